#!/usr/bin/env python3
"""Per-call time of rtctl's dynamics against Pinocchio, measured in the same run.

For each bundled model (7-DOF arm, 18-DOF quadruped, 36-DOF humanoid) and
each algorithm -- inverse dynamics (rtctl RNEA vs pin.rnea), mass matrix
(CRBA vs pin.crba), forward dynamics (O(n) ABA vs pin.aba) -- the two
libraries are timed in alternating batches over the same pool of random
states; the table shows the median microseconds per call and the ratio
rtctl / Pinocchio (< 1: rtctl is faster). "api" is the checked Python method
with a preallocated output (what a Python control loop calls); "kernel" is
the compiled kernel called directly (what compiled control code calls).
Also shown: the O(n^3) forward dynamics (M + Cholesky) for comparison.

Usage: python benchmarks/dynamics.py [--batches 31] [--calls 2000]
Needs Pinocchio (the `pin` package from the test extra).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import pinocchio as pin  # noqa: E402
from oracle import Pair  # noqa: E402

from rtctl import bundled_model_path  # noqa: E402
from rtctl.dynamics import kernels  # noqa: E402

MODELS = [("arm7", None, "7-DOF arm"), ("quadruped12", "free_flyer", "18-DOF quadruped"),
          ("humanoid", "free_flyer", "36-DOF humanoid")]


def per_call_us(fn, states, calls):
    """Time `calls` calls cycling through `states`; return microseconds per call."""
    n = len(states)
    t0 = time.perf_counter()
    for k in range(calls):
        fn(*states[k % n])
    return (time.perf_counter() - t0) / calls * 1e6


def compare(candidates, states, batches, calls):
    """Alternate batches of each candidate; return the median per-call time of each."""
    for fn in candidates.values():
        per_call_us(fn, states, 200)  # warm-up (compilation, caches)
    samples = {name: [] for name in candidates}
    for _ in range(batches):
        for name, fn in candidates.items():
            samples[name].append(per_call_us(fn, states, calls))
    return {name: float(np.median(v)) for name, v in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=31)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)

    print(f"rtctl dynamics vs Pinocchio {pin.__version__} | Python {platform.python_version()} | "
          f"{platform.machine()} | median of {args.batches} batches x {args.calls} calls, microseconds per call")
    header = f"{'model':<18}{'algorithm':<10}{'rtctl api':>10}{'rtctl kernel':>13}{'pinocchio':>10}" \
             f"{'api/pin':>9}{'kernel/pin':>11}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for name, base, label in MODELS:
        pair = Pair.from_urdf(bundled_model_path(name), base)
        model, dyn = pair.model, pair.dyn
        pm, pd = pair.pin_model, pair.pin_data
        mi, mf, ws = dyn.mi, dyn.mf, dyn.ws
        ours, theirs = [], []
        for _ in range(64):
            q = model.random_configuration(rng)
            v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
            tau = dyn.inverse_dynamics(q, v, a).copy()
            ours.append((q, v, a, tau))
            theirs.append((pair.q_to_pin(q), pair.v_to_pin(v), pair.v_to_pin(a), pair.v_to_pin(tau)))
        out = np.zeros(model.nv)
        mat = np.zeros((model.nv, model.nv))
        mixed = [o + t for o, t in zip(ours, theirs)]  # one pool, so each candidate sees the same states
        rows = {
            "ID": {
                "api": lambda q, v, a, tau, *_: dyn.inverse_dynamics(q, v, a, out=out),
                "kernel": lambda q, v, a, tau, *_: kernels.rnea(mi, mf, ws, q, v, a, out),
                "pin": lambda *s: pin.rnea(pm, pd, s[4], s[5], s[6]),
            },
            "M": {
                "api": lambda q, *_: dyn.mass_matrix(q, out=mat),
                "kernel": lambda q, *_: kernels.crba(mi, mf, ws, q, mat),
                "pin": lambda *s: pin.crba(pm, pd, s[4]),
            },
            "FD": {
                "api": lambda q, v, a, tau, *_: dyn.forward_dynamics(q, v, tau, out=out),
                "kernel": lambda q, v, a, tau, *_: kernels.aba(mi, mf, ws, q, v, tau, out),
                "pin": lambda *s: pin.aba(pm, pd, s[4], s[5], s[7]),
            },
            "FD O(n^3)": {
                "api": lambda q, v, a, tau, *_: dyn.forward_dynamics_cholesky(q, v, tau, out=out),
                "kernel": lambda q, v, a, tau, *_: kernels.forward_dynamics_cholesky(
                    mi, mf, ws, dyn._mat, q, v, tau, out),
                "pin": lambda *s: pin.aba(pm, pd, s[4], s[5], s[7]),
            },
        }
        for algo, candidates in rows.items():
            t = compare(candidates, mixed, args.batches, args.calls)
            print(f"{label:<18}{algo:<10}{t['api']:>10.2f}{t['kernel']:>13.2f}{t['pin']:>10.2f}"
                  f"{t['api'] / t['pin']:>9.2f}{t['kernel'] / t['pin']:>11.2f}")
    print("FD O(n^3) is rtctl's M + Cholesky reference; its 'pinocchio' column repeats pin.aba for scale.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
