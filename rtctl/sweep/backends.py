"""Where sweep runs execute: one small interface, a local process pool and Dask distributed behind it.

A backend maps a picklable function over items and yields ``(item, row)``
pairs as runs finish, in completion order. A run that takes its worker down
(a segfault, the OOM killer, a lost machine) comes back as an ``error`` row
naming what happened; the sweep goes on. Ray, or anything else with
submit/as-completed semantics, fits behind the same interface.

Ctrl-C (``KeyboardInterrupt`` in the caller) stops a backend at once: the
runs not started are cancelled and the local pool's worker processes, which
ignore SIGINT themselves (a terminal sends it to the whole process group),
are terminated; their runs in flight are lost and re-run on resume.
"""
from __future__ import annotations

import abc
import os
import signal
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


def _ignore_sigint() -> None:
    """Pool worker initializer: Ctrl-C and a terminal's hang-up, which reach the whole process group, are the
    parent's to handle (it terminates the workers, with SIGTERM)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (the helper process the pool's semaphores register with) with
    SIGHUP ignored, which the exec'd tracker inherits: it ignores SIGINT and SIGTERM itself but not a
    terminal's hang-up, which reaches the whole process group and killed it mid-sweep (the parent relaunched it
    and printed its KeyErrors). The parent's own handler is back within the start (about a millisecond)."""
    import threading
    from multiprocessing import resource_tracker

    previous = signal.getsignal(signal.SIGHUP)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        resource_tracker.ensure_running()
        return
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, previous)


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
        _start_resource_tracker()
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_ignore_sigint)

    def _terminate(self) -> None:
        """Stop now: cancel what has not started and kill the workers (their runs in flight are lost)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        terminate = getattr(pool, "terminate_workers", None)   # Python >= 3.14
        if terminate is not None:
            terminate()
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(5)

    def map_unordered(self, fn, items):
        queue = list(items)[::-1]
        attempts: dict[str, int] = {}
        pending: dict = {}
        self._pool = self._pool or self._new_pool()
        try:
            yield from self._run(fn, queue, attempts, pending)
        except BaseException:  # Ctrl-C, or the caller stopped iterating: abandon the runs in flight
            self._terminate()
            raise

    def _run(self, fn, queue, attempts, pending):
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

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


ENCRYPTED_SCHEMES = ("tls", "wss")


def check_scheduler_address(address: str, tls: dict | None = None) -> None:
    """Refuse a scheduler address that is not ``tls://`` (or ``wss://``).

    An open Dask scheduler runs any code sent to it, as its user, for anyone who reaches its port (another
    user of this machine reaches a loopback one), and the client unpickles whatever comes back: rtctl
    reaches one only over TLS with this client's certificates (``inproc://``: a scheduler in this process).
    """
    scheme, sep, _ = address.partition("://")
    scheme = scheme.lower() if sep else "tcp"   # distributed's default protocol
    if scheme in ENCRYPTED_SCHEMES or scheme == "inproc":
        return
    raise SweepError(
        f"[backend] address {address!r}: rtctl reaches a Dask scheduler only over TLS with this client's "
        f"certificates (an open {scheme}:// scheduler runs any code sent to it, as its user, for anyone who "
        f"reaches its port, other users of this machine included): use tls://HOST:PORT with [backend] "
        f"tls_ca_file, tls_cert and tls_key (or distributed's comm.tls configuration); see docs/sweeps.md")


def _stop_http(dask_scheduler=None, dask_worker=None) -> None:
    """Close a Dask node's HTTP server (run on the node's event loop by ``Client.run[_on_scheduler]``)."""
    (dask_scheduler or dask_worker).http_server.stop()


def private_local_cluster(workers: int):
    """A ``LocalCluster`` on 127.0.0.1 that only this process can use, and ``Client`` on it.

    Its scheduler, nannies and workers speak TLS with credentials made for this cluster
    (``Security.temporary()``: a key and self-signed certificate held in memory, mutual TLS), so another
    user's client cannot connect to any of them and run code as ours. distributed starts an HTTP server on
    every node whatever ``dashboard_address`` says (the scheduler's on port 8787: info pages, a proxy to the
    workers', metrics): their routes are emptied and the servers are stopped once the cluster is up.
    """
    import dask
    from distributed import Client, LocalCluster, Security

    try:
        security = Security.temporary()
    except ImportError:
        raise SweepError("the dask backend needs the cryptography package for its cluster's TLS credentials: "
                         "pip install 'rtctl[dask]'") from None
    with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               protocol="tls://", security=security, dashboard_address=None,
                               scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, silence_logs=40)
    client = Client(cluster)
    try:
        client.run_on_scheduler(_stop_http)
        client.run(_stop_http)
    except BaseException:
        client.close()
        cluster.close()
        raise
    return cluster, client


class DaskBackend(Backend):
    """Dask distributed: a scheduler at ``address`` (a multi-machine cluster), or a LocalCluster.

    With no address a ``LocalCluster`` of ``workers`` single-threaded worker
    processes starts on 127.0.0.1. With an address, rtctl (the
    same version) must be installed on every worker machine, and run configs
    should name bundled models or paths that exist on the workers. Runs are
    submitted with ``pure=False`` (each one is a new simulation); a run whose
    worker dies is retried once by the scheduler, then recorded as an error.

    With no address the cluster is :func:`private_local_cluster` (TLS with its own credentials, no HTTP
    server). A scheduler at an address must be reached over TLS
    (:func:`check_scheduler_address`): ``tls`` holds the client's CA file,
    certificate and key (``{"tls_ca_file", "tls_cert", "tls_key"}``, from the
    ``[backend]`` table) and the connection then requires encryption; without
    it, distributed's own configuration (``distributed.comm.tls.*``) applies.
    """

    name = "dask"

    def __init__(self, address: str = "", workers: int = 0, tls: dict | None = None):
        if address:
            check_scheduler_address(address, tls)
        elif tls:
            raise SweepError("[backend] tls_* keys: they secure the connection to a scheduler at [backend] "
                             "address; the LocalCluster started without an address makes its own")
        try:
            from dask.distributed import Client
        except ImportError:
            raise SweepError("the dask backend needs dask.distributed: pip install 'rtctl[dask]'") from None
        self._cluster = None
        if address:
            kwargs = {}
            if tls:
                from distributed.security import Security
                kwargs["security"] = Security(tls_ca_file=tls["tls_ca_file"], tls_client_cert=tls["tls_cert"],
                                              tls_client_key=tls["tls_key"], require_encryption=True)
            elif address.partition("://")[0].lower() in ENCRYPTED_SCHEMES:
                import dask

                if not dask.config.get("distributed.comm.tls.ca-file", None):
                    raise SweepError(f"[backend] address {address!r}: a TLS scheduler needs the client's "
                                     f"certificates: set [backend] tls_ca_file, tls_cert and tls_key (or "
                                     f"distributed.comm.tls in the Dask configuration)")
            try:
                self.client = Client(address, timeout="30s", **kwargs)
            except OSError as exc:  # unreachable, timed out, or the TLS handshake failed
                raise SweepError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        else:
            n = int(workers) or (os.cpu_count() or 1)
            self._cluster, self.client = private_local_cluster(n)

    @property
    def workers(self) -> int:
        return max(1, sum(w["nthreads"] for w in self.client.scheduler_info()["workers"].values()))

    def map_unordered(self, fn, items):
        from dask.distributed import as_completed

        futures = {}
        try:
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
        except BaseException:  # Ctrl-C, or the caller stopped iterating: cancel what has not finished
            pending = [f for f, _ in futures.values() if not f.done()]
            if pending:
                try:
                    self.client.cancel(pending)
                except Exception:  # noqa: BLE001  the client may be gone already
                    pass
            raise

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


def create_backend(kind: str, *, workers: int = 0, address: str = "", tls: dict | None = None) -> Backend:
    if kind == "local":
        return LocalPool(workers)
    if kind == "dask":
        return DaskBackend(address, workers, tls)
    if kind == "sequential":
        return Sequential()
    raise ValueError(f"unknown sweep backend {kind!r}; choose local, dask or sequential")
