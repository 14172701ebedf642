#!/usr/bin/env python3
"""Per-cycle cost of the momentum observer beside the inverse dynamics', measured in the same run.

For the bundled 7-DOF arm, 18-DOF quadruped and 36-DOF humanoid: the median microseconds per call of
the observer's compiled step (p = M qd, C^T qd - g by one O(n) pass out and one in, the residual
update; :func:`rtctl.loops.observer.observer_step`), of the whole :meth:`MomentumObserver.update`
(step plus the frame wrench by least squares), and of the recursive inverse dynamics (the compiled
RNEA kernel and ``Dynamics.inverse_dynamics`` with a preallocated output), timed in alternating
batches over the same random states. The load average is printed before and after: the numbers
are only comparable on a quiet machine.

Usage: python benchmarks/observer.py [--batches 21] [--calls 2000]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from rtctl.loops.observer import MomentumObserver, observer_step

from rtctl import bundled_model_path
from rtctl.dynamics import Dynamics, kernels
from rtctl.model.urdf import load_urdf

MODELS = (("arm7", None), ("quadruped12", "free_flyer"), ("humanoid", "free_flyer"))


def _timed(fn, states, calls):
    """Median-ready per-call time (s) of ``fn(q, v)`` over ``calls`` calls cycling through ``states``."""
    n = len(states)
    start = time.perf_counter()
    for k in range(calls):
        q, v, tau = states[k % n]
        fn(q, v, tau)
    return (time.perf_counter() - start) / calls


def bench(name, base, batches, calls):
    model = load_urdf(bundled_model_path(name), base)
    dyn = Dynamics(model)
    obs = MomentumObserver(dyn, 50.0, 1e-3)
    rng = np.random.default_rng(0)
    states = []
    for _ in range(64):
        q = model.neutral_configuration()
        q = dyn.integrate(q, rng.uniform(-0.5, 0.5, model.nv), 1.0)
        states.append((q, rng.uniform(-1, 1, model.nv), rng.uniform(-1, 1, model.nv)))
    out, zero = np.zeros(model.nv), np.zeros(model.nv)
    mi, mf, ws, acc, x, decay = dyn.mi, dyn.mf, dyn.ws, obs._acc, obs._x, obs.decay
    candidates = {
        "observer kernel": lambda q, v, tau: observer_step(mi, mf, ws, acc, q, v, tau, x, decay, 1e-3, False),
        "observer update": lambda q, v, tau: obs.update(q, v, tau),
        "RNEA kernel": lambda q, v, tau: kernels.rnea(mi, mf, ws, q, v, zero, out),
        "inverse_dynamics": lambda q, v, tau: dyn.inverse_dynamics(q, v, zero, out=out),
    }
    for fn in candidates.values():  # compile and warm up
        _timed(fn, states, 100)
    times = {label: [] for label in candidates}
    for _ in range(batches):
        for label, fn in candidates.items():
            times[label].append(_timed(fn, states, calls))
    medians = {label: 1e6 * float(np.median(t)) for label, t in times.items()}
    ratio = medians["observer kernel"] / medians["RNEA kernel"]
    cells = "".join(f"{medians[label]:>18.2f}" for label in candidates)
    print(f"{name:<12}{model.nv:>4}{cells}{ratio:>12.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    print(f"{'model':<12}{'nv':>4}" + "".join(f"{h:>18}" for h in ("observer kernel", "observer update",
                                                                  "RNEA kernel", "inverse_dynamics"))
          + f"{'obs / RNEA':>12}")
    print(" " * 16 + "(median us per call)")
    for name, base in MODELS:
        bench(name, base, args.batches, args.calls)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
