"""``rtctl warm``: compile, or load from numba's cache, every kernel the bundled run configs (or the ones named)
can reach, one config per worker process of the sweep's local pool, so the cores compile side by side.

Each worker builds its config and warms its loop (:meth:`rtctl.rt.loop.ControlLoop.warm`) as a run does before
the hardware is activated, counting the kernels it compiled (the numba compile events of its own process).
The kernels land in the cache every later run and test loads them from: after ``rtctl warm``, a first
``rtctl demo`` compiles nothing. Two workers may compile a kernel both their configs reach; the second to
finish writes the same entry.
"""
from __future__ import annotations

import time
from pathlib import Path

from .backends import LocalPool


def warm_config(item: dict) -> dict:
    """Build and warm the config ``item["params"]["config"]`` in this process; its row: status, kernels
    compiled, seconds."""
    from numba.core import event

    from ..config import build, load_config

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            compiled.append(ev.data["dispatcher"])

    path = item["params"]["config"]
    start = time.perf_counter()
    row = {"run_id": item["run_id"], "index": item["index"], "config": path}
    with event.install_listener("numba:compile", Count()):
        try:
            build(load_config(path)).warm()
        except (OSError, ValueError) as exc:   # ConfigError, ModelError: one line naming the file
            return dict(row, status="error", reason=str(exc), compiled=len(compiled),
                        seconds=time.perf_counter() - start)
    return dict(row, status="ok", reason="", compiled=len(compiled), seconds=time.perf_counter() - start)


def warm(configs: list[Path], jobs: int = 0, progress: bool = True) -> list[dict]:
    """Warm ``configs`` on ``jobs`` worker processes (0: one per core); their rows, in ``configs``' order."""
    from tqdm import tqdm

    items = [{"run_id": str(k), "index": k, "params": {"config": str(path)}} for k, path in enumerate(configs)]
    rows: list = [None] * len(items)
    with LocalPool(min(jobs or LocalPool().workers, len(items))) as pool, \
            tqdm(total=len(items), unit="config", disable=not progress, desc="rtctl warm") as bar:
        for item, row in pool.map_unordered(warm_config, items):
            rows[item["index"]] = dict(row, config=str(configs[item["index"]]))
            bar.update(1)
    return rows
