"""Scenario sweeps: many offline closed-loop simulations of one base config with varied parameters.

* :mod:`rtctl.sweep.spec` -- the sweep file (base config, parameters, sampling, metrics, backend);
* :mod:`rtctl.sweep.runner` -- one run: the same ``build`` -> loop -> plant path as ``rtctl run``, unpaced;
* :mod:`rtctl.sweep.backends` -- a local process pool (default), Dask distributed, sequential;
* :mod:`rtctl.sweep.results` -- the resumable Parquet results (one row per run);
* :mod:`rtctl.sweep.report` -- metric-vs-parameter and Pareto plots.

``rtctl sweep SWEEP.toml --out results.parquet`` runs it; re-running the same
command skips the runs already finished. Ctrl-C stops a sweep cleanly: the runs in
flight are abandoned, the finished ones are written to the results file
(:class:`SweepInterrupted`), and the next run of the command resumes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .backends import Backend, create_backend
from .results import ResultStore, read_columns, read_rows
from .runner import FAILURES, STATUSES, run_one
from .spec import METRICS, Sweep, SweepError, load_sweep

__all__ = ["Backend", "FAILURES", "METRICS", "STATUSES", "Sweep", "SweepError", "SweepInterrupted", "SweepSummary",
           "create_backend", "load_sweep", "read_columns", "read_rows", "run_one", "run_sweep"]


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a sweep. ``done`` of ``total`` runs are finished and in the results file ``path``
    (``ran`` of them in this call); ``restored``: a ``--fresh`` sweep stopped before its first result, so
    the earlier results were put back."""

    def __init__(self, done: int, total: int, ran: int, path: str, restored: bool = False):
        super().__init__(f"sweep interrupted after {done} of {total} runs; results in {path}")
        self.done, self.total, self.ran, self.path, self.restored = done, total, ran, path, restored


@dataclass
class SweepSummary:
    total: int
    skipped: int
    ran: int
    by_status: dict = field(default_factory=dict)
    wall_s: float = 0.0
    workers: int = 1
    path: str = ""

    @property
    def runs_per_s(self) -> float:
        return self.ran / self.wall_s if self.wall_s > 0 else float("nan")

    def format(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.by_status.items())) or "none"
        text = (f"{self.total} runs: {self.skipped} already done, {self.ran} ran in {self.wall_s:.1f} s "
                f"({self.runs_per_s:.2f} runs/s on {self.workers} workers); statuses: {counts} -> {self.path}")
        if self.by_status.get("timeout"):
            text += (f"\n{self.by_status['timeout']} runs hit the wall-clock limit ([backend] run_timeout) and were "
                     f"stopped early (their rows hold the cycles that ran); raise it and use --fresh to re-run them")
        return text


def run_sweep(sweep: Sweep, out: str | Path, *, backend: Backend | None = None, resume: bool = True,
              progress: bool = True) -> SweepSummary:
    """Run every run of ``sweep`` not already in ``out`` and write the results file.

    ``resume=False`` starts over, but the earlier results are only moved aside: they are deleted once the
    new sweep has written its first row, and put back if it fails or is interrupted before that. Ctrl-C
    (``KeyboardInterrupt``) writes the finished rows to ``out`` and raises :class:`SweepInterrupted`.
    """
    store = ResultStore(out)
    store.recover_aside()
    runs = sweep.runs()
    wanted = {r["run_id"] for r in runs}
    metadata = {"sweep": sweep.source, "method": sweep.method, "parameters": [p.path for p in sweep.parameters],
                "planned_runs": len(runs)}
    if not resume:
        store.set_aside()
    own_backend = backend is None
    by_status: dict[str, int] = {}
    done: set = set()
    ran = 0
    bar = None
    try:
        done = {r["run_id"] for r in store.existing_rows()} & wanted
        todo = [r for r in runs if r["run_id"] not in done]
        if own_backend:
            backend = create_backend(sweep.backend["kind"], workers=sweep.backend["workers"],
                                     address=sweep.backend["address"], tls=sweep.backend.get("tls"))
        if progress and todo:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), unit="run", desc="sweep", dynamic_ncols=True)
        start = time.perf_counter()
        results = backend.map_unordered(run_one, todo)
        try:
            for _, row in results:
                keep = {k: v for k, v in row.items()
                        if k in ("run_id", "index", "status", "reason") or k.startswith("param.")
                        or k in sweep.metrics}
                store.append(keep)   # the first row also deletes the results --fresh moved aside
                ran += 1
                by_status[row["status"]] = by_status.get(row["status"], 0) + 1
                if bar is not None:
                    bar.update(1)
                    failed = {"failed": sum(v for k, v in by_status.items() if k != "ok")}
                    if by_status.get("timeout"):  # a failure kind of its own: the limit may just be too tight
                        failed["timeout"] = by_status["timeout"]
                    bar.set_postfix(failed)
            wall = time.perf_counter() - start
            workers = backend.workers
        finally:
            close = getattr(results, "close", None)
            if close is not None:  # a generator left early (Ctrl-C): it stops the runs still in flight
                close()
            if bar is not None:
                bar.close()
            store.close()
            if own_backend and backend is not None:
                backend.close()
        store.finalize(keep_ids=wanted, metadata=metadata)
        store.drop_aside()
    except KeyboardInterrupt:
        restored = store.restore_aside()   # nothing new was written: the earlier results stay
        if ran or done:
            store.finalize(keep_ids=wanted, metadata=metadata)
        raise SweepInterrupted(done=len(done) + ran, total=len(runs), ran=ran, path=str(out),
                               restored=restored) from None
    except BaseException:
        store.restore_aside()
        raise
    return SweepSummary(total=len(runs), skipped=len(done), ran=len(todo), by_status=by_status, wall_s=wall,
                        workers=workers, path=str(out))
