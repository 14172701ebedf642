#!/usr/bin/env python3
"""Scenario sweeps: runs per second of the local process pool and Dask vs one process, and scaling efficiency.

The sweep is the bundled demo (7-DOF arm, computed torque at 1 kHz, RK4 plant)
with the plant's mass scaled over ``--runs`` values, each run ``--duration``
seconds of control time, unpaced. Every backend runs the same sweep in the
same process tree, one after another:

* ``one worker`` -- :class:`rtctl.sweep.backends.LocalPool` with 1 spawned worker: one run after
  another in a fresh process (the reference for the scaling figures);
* ``in-process`` -- the ``sequential`` backend in this process (shown for reference: every run
  starts with a full garbage collection of this bigger process, see ``[loop] disable_gc``);
* ``local pool`` -- :class:`rtctl.sweep.backends.LocalPool` with N spawned workers;
* ``dask`` -- a Dask ``LocalCluster`` of N single-threaded worker processes.

Each parallel backend is timed twice: ``cold`` includes starting the workers
(interpreter, imports, numba cache loads), ``warm`` is a second sweep on the
same, already started workers. Scaling efficiency is
``(runs/s) / (N x one-worker runs/s)``; on a machine with N cores, 1.0 is
perfect. The physics metrics of every backend are checked to be identical.
Usage: python benchmarks/sweep.py [--runs 32] [--duration 1.0] [--workers 0]
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from rtctl.sweep import create_backend, load_sweep, read_rows, run_sweep

PHYSICS = ("status", "tracking_rms", "tracking_max", "peak_effort", "actuator_energy")


def sweep_file(directory: Path, runs: int, duration: float, offset: float = 0.0) -> Path:
    values = [round(0.7 + offset + 0.6 * k / max(runs - 1, 1), 6) for k in range(runs)]
    path = directory / f"bench{offset}.toml"
    path.write_text(f'[sweep]\nbase = "demo"\nmethod = "grid"\nduration = {duration}\n'
                    f'[[sweep.parameter]]\npath = "plant.mass_scale"\nvalues = {values}\n')
    return path


def timed(backend, sweep, out):
    start = time.perf_counter()
    summary = run_sweep(sweep, out, backend=backend, progress=False, resume=False)
    wall = time.perf_counter() - start
    rows = read_rows(out)
    return summary.ran / wall, {r["run_id"]: tuple(r[k] for k in PHYSICS) for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=0, help="0: one per core")
    args = ap.parse_args()
    n = args.workers or os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="rtctl-sweep-bench-"))
    cold_sweep = load_sweep(sweep_file(tmp, args.runs, args.duration))
    warm_sweep = load_sweep(sweep_file(tmp, args.runs, args.duration, offset=0.001))
    seq = create_backend("sequential")
    timed(seq, load_sweep(sweep_file(tmp, 2, args.duration, offset=0.5)), tmp / "warmup.parquet")  # JIT/cache load
    in_cold, reference = timed(seq, cold_sweep, tmp / "seq.parquet")
    in_warm, reference_warm = timed(seq, warm_sweep, tmp / "seq2.parquet")
    results = []
    for label, kind, workers in (("one worker", "local", 1), ("local pool", "local", n),
                                 ("dask LocalCluster", "dask", n)):
        try:
            backend = create_backend(kind, workers=workers)
        except ValueError as exc:
            print(f"({kind}: {exc})")
            continue
        with backend:
            cold, got = timed(backend, cold_sweep, tmp / f"{kind}{workers}.parquet")
            warm, got_warm = timed(backend, warm_sweep, tmp / f"{kind}{workers}-2.parquet")
        assert got == reference and got_warm == reference_warm, f"{label}: metrics differ from the in-process run"
        results.append((label, workers, cold, warm))
    seq_rate_warm = results[0][3]
    results.insert(1, ("in-process", 1, in_cold, in_warm))
    print(f"rtctl sweep benchmark -- {args.runs} runs x {args.duration:g} s of control time (demo arm, 1 kHz); "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'backend':<20}{'workers':>8}{'cold runs/s':>13}{'warm runs/s':>13}{'speed-up':>10}{'efficiency':>12}")
    for name, workers, cold, warm in results:
        speed = warm / seq_rate_warm
        print(f"{name:<20}{workers:>8}{cold:>13.2f}{warm:>13.2f}{speed:>10.2f}{speed / workers:>12.2f}")
    print("speed-up and efficiency use the warm rates; identical physics metrics on every backend: yes")


if __name__ == "__main__":
    main()
