"""Where sweep runs execute: one small interface, a local process pool and Dask distributed behind it.

A backend maps a picklable function over items and yields ``(item, row)``
pairs as runs finish, in completion order. A run that takes its worker down
(a segfault, the OOM killer, a lost machine) comes back as an ``error`` row
naming what happened; the sweep goes on. Ray, or anything else with
submit/as-completed semantics, fits behind the same interface.
"""
from __future__ import annotations

import abc
import os
from typing import Callable, Iterable, Iterator

from .spec import SweepError


def worker_died_row(item: dict, reason: str) -> dict:
    return {"run_id": item["run_id"], "index": item["index"], "status": "error", "reason": reason,
            **{f"param.{k}": v for k, v in item["params"].items()}}


class Backend(abc.ABC):
    """Runs ``fn(item) -> row`` for many items; yields ``(item, row)`` as each finishes."""

    name = "backend"

    @property
    @abc.abstractmethod
    def workers(self) -> int:
        """How many runs execute at once."""

    @abc.abstractmethod
    def map_unordered(self, fn: Callable[[dict], dict], items: Iterable[dict]) -> Iterator[tuple[dict, dict]]:
        """Yield ``(item, fn(item))`` in completion order; never raises for a failed run."""

    def close(self) -> None:
        """Release processes, clients and clusters this backend started."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalPool(Backend):
    """A pool of worker processes on this machine (``workers=0``: one per core).

    Workers are started with ``spawn`` (a clean interpreter: no threads or
    locks inherited from the caller). A worker that dies breaks Python's pool;
    the runs in flight are then retried once in a fresh pool, and a run that
    takes a worker down twice is recorded as an error.
    """

    name = "local"

    def __init__(self, workers: int = 0):
        self._workers = int(workers) or (os.cpu_count() or 1)
        self._pool = None

    @property
    def workers(self) -> int:
        return self._workers

    def _new_pool(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"))

    def map_unordered(self, fn, items):
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        queue = list(items)[::-1]
        attempts: dict[str, int] = {}
        pending: dict = {}
        self._pool = self._pool or self._new_pool()
        while queue or pending:
            while queue and len(pending) < 2 * self._workers:
                item = queue.pop()
                pending[self._pool.submit(fn, item)] = item
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                item = pending.pop(future)
                try:
                    yield item, future.result()
                except BrokenProcessPool:
                    broken = True
                    attempts[item["run_id"]] = attempts.get(item["run_id"], 0) + 1
                    if attempts[item["run_id"]] >= 2:
                        yield item, worker_died_row(item, "a worker process died twice while running this run")
                    else:
                        queue.append(item)
                except Exception as exc:  # noqa: BLE001  fn itself does not raise; pickling might
                    yield item, worker_died_row(item, f"{type(exc).__name__}: {exc}")
            if broken:
                for future, item in pending.items():
                    attempts[item["run_id"]] = attempts.get(item["run_id"], 0) + 1
                    queue.append(item)
                pending.clear()
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskBackend(Backend):
    """Dask distributed: a scheduler at ``address`` (a multi-machine cluster), or a LocalCluster.

    With no address a ``LocalCluster`` of ``workers`` single-threaded worker
    processes starts on 127.0.0.1 (no dashboard). With an address, rtctl (the
    same version) must be installed on every worker machine, and run configs
    should name bundled models or paths that exist on the workers. Runs are
    submitted with ``pure=False`` (each one is a new simulation); a run whose
    worker dies is retried once by the scheduler, then recorded as an error.
    """

    name = "dask"

    def __init__(self, address: str = "", workers: int = 0):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise SweepError("the dask backend needs dask.distributed: pip install 'rtctl[dask]'") from None
        self._cluster = None
        if address:
            self.client = Client(address, timeout="30s")
        else:
            n = int(workers) or (os.cpu_count() or 1)
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                         dashboard_address=None, silence_logs=40)
            self.client = Client(self._cluster)

    @property
    def workers(self) -> int:
        return max(1, sum(w["nthreads"] for w in self.client.scheduler_info()["workers"].values()))

    def map_unordered(self, fn, items):
        from dask.distributed import as_completed

        futures = {}
        for item in items:
            fut = self.client.submit(fn, item, key=f"rtctl-run-{item['run_id']}", pure=False, retries=1)
            futures[fut.key] = (fut, item)
        for fut in as_completed([f for f, _ in futures.values()]):
            item = futures[fut.key][1]
            if fut.status == "finished":
                yield item, fut.result()
            else:
                exc = fut.exception()
                yield item, worker_died_row(item, f"{type(exc).__name__}: {exc}")
            fut.release()

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


class Sequential(Backend):
    """Runs in this process, one after another (the reference for scaling measurements)."""

    name = "sequential"

    @property
    def workers(self) -> int:
        return 1

    def map_unordered(self, fn, items):
        for item in items:
            yield item, fn(item)


def create_backend(kind: str, *, workers: int = 0, address: str = "") -> Backend:
    if kind == "local":
        return LocalPool(workers)
    if kind == "dask":
        return DaskBackend(address, workers)
    if kind == "sequential":
        return Sequential()
    raise ValueError(f"unknown sweep backend {kind!r}; choose local, dask or sequential")
