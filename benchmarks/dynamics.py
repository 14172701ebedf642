#!/usr/bin/env python3
"""Per-call time of rtctl's dynamics against Pinocchio, measured in the same run.

For each model -- UR5, Panda, Solo12 and Talos from example-robot-data (when
that package is installed and rtctl loads the URDF; otherwise the row says why
it is skipped) and the bundled 7-DOF arm, 18-DOF quadruped and 36-DOF
humanoid -- and each algorithm -- inverse dynamics (rtctl RNEA vs pin.rnea), mass matrix
(CRBA vs pin.crba), forward dynamics (O(n) ABA vs pin.aba) -- the two
libraries are timed in alternating batches over the same pool of random
states; the table shows the median microseconds per call and the ratio
rtctl / Pinocchio (< 1: rtctl is faster). A round times one batch of each
candidate back to back; the ratio is the median over rounds of the ratio
within a round, so a change of the machine's load between rounds cancels (the
ratio of the medians does not: on a shared machine one candidate's median can
come from busier moments than the other's). "api" is the checked Python method
with a preallocated output (what a Python control loop calls); "kernel" is
the compiled kernel called directly (what compiled control code calls).
Also shown: the O(n^3) forward dynamics (M + Cholesky) for comparison.

Joints are matched by name (rtctl.model.pinocchio_order), so the libraries
may order them differently. The load average of the machine is printed before
and after the run: the ratios are only meaningful on a quiet machine.

Usage: python benchmarks/dynamics.py [--batches 301] [--calls 200] [--models ur5,panda,...]
Needs Pinocchio (the `pin` package from the test extra); example-robot-data is optional.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import time

import numpy as np
import pinocchio as pin

from rtctl import bundled_model_path
from rtctl.dynamics import Dynamics, kernels
from rtctl.model.pinocchio_order import PinocchioOrder
from rtctl.model.urdf import load_urdf

# (key, label, where the URDF is: "bundled:<name>" or "erd:<path in example-robot-data's robots/>", base)
MODELS = [
    ("ur5", "UR5 (6)", "erd:ur_description/urdf/ur5_robot.urdf", None),
    ("panda", "Panda (9)", "erd:panda_description/urdf/panda.urdf", None),
    ("arm7", "arm7 (7)", "bundled:arm7", None),
    ("solo12", "Solo12 (18)", "erd:solo_description/robots/solo12.urdf", "free_flyer"),
    ("quadruped12", "quadruped12 (18)", "bundled:quadruped12", "free_flyer"),
    ("humanoid", "humanoid (36)", "bundled:humanoid", "free_flyer"),
    ("talos", "Talos (38)", "erd:talos_data/robots/talos_reduced.urdf", "free_flyer"),
]


def example_robot_data_file(relative: str):
    """A file of the example-robot-data package (found through its installed file list), or None."""
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    suffix = "example-robot-data/robots/" + relative
    for f in files:
        if str(f).replace("\\", "/").endswith(suffix):
            return f.locate()
    return None


def load_pair(where: str, base):
    """(rtctl model, Pinocchio model, PinocchioOrder), or a string saying why the model is skipped."""
    kind, name = where.split(":", 1)
    path = bundled_model_path(name) if kind == "bundled" else example_robot_data_file(name)
    if path is None:
        return "example-robot-data is not installed or lacks the file"
    try:
        model = load_urdf(path, base)
    except Exception as exc:  # noqa: BLE001 -- a benchmark reports what it cannot load and goes on
        return f"rtctl cannot load it yet ({type(exc).__name__}: {str(exc).splitlines()[0][-90:]})"
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if base else pin.buildModelFromUrdf(str(path))
    pm.gravity.linear = model.gravity
    try:
        order = PinocchioOrder.from_pinocchio(model, pm)
    except ValueError as exc:
        return f"joints do not match Pinocchio's ({exc})"
    return model, pm, order


def per_call_us(fn, states, calls):
    """Time `calls` calls cycling through `states`; return microseconds per call."""
    n = len(states)
    t0 = time.perf_counter()
    for k in range(calls):
        fn(*states[k % n])
    return (time.perf_counter() - t0) / calls * 1e6


def compare(candidates, states, batches, calls, reference="pin"):
    """Alternate batches of each candidate; return the median per-call time of each, and the median over
    rounds of each candidate's time relative to ``reference`` in the same round (key ``name + "/ref"``)."""
    for fn in candidates.values():
        per_call_us(fn, states, 200)  # warm-up (compilation, caches)
    samples = {name: [] for name in candidates}
    for _ in range(batches):
        for name, fn in candidates.items():
            samples[name].append(per_call_us(fn, states, calls))
    ref = np.array(samples[reference])
    result = {name: float(np.median(v)) for name, v in samples.items()}
    result.update({name + "/ref": float(np.median(np.array(v) / ref)) for name, v in samples.items()})
    return result


def bench_model(model, pm, order, rng, batches, calls):
    """Yield (algorithm, median microseconds of 'api', 'kernel' and 'pin') for one model."""
    dyn, pd = Dynamics(model), pm.createData()
    mi, mf, ws = dyn.mi, dyn.mf, dyn.ws
    ours, theirs = [], []
    for _ in range(64):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        tau = dyn.inverse_dynamics(q, v, a).copy()
        ours.append((q, v, a, tau))
        theirs.append((order.to_pinocchio_q(q), order.to_pinocchio_v(v), order.to_pinocchio_v(a),
                       order.to_pinocchio_v(tau)))
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
        yield algo, compare(candidates, mixed, batches, calls)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=301)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--models", default=",".join(m[0] for m in MODELS),
                        help="comma-separated subset of " + ",".join(m[0] for m in MODELS))
    args = parser.parse_args(argv)
    chosen = args.models.split(",")

    print(f"rtctl dynamics vs Pinocchio {pin.__version__} | Python {platform.python_version()} | "
          f"{platform.machine()} | median of {args.batches} batches x {args.calls} calls, microseconds per call")
    print("load average (1, 5, 15 min) at start: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    header = f"{'model':<18}{'algorithm':<10}{'rtctl api':>10}{'rtctl kernel':>13}{'pinocchio':>10}" \
             f"{'api/pin':>9}{'kernel/pin':>11}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for key, label, where, base in MODELS:
        if key not in chosen:
            continue
        loaded = load_pair(where, base)
        if isinstance(loaded, str):
            print(f"{label:<18}skipped: {loaded}")
            continue
        for algo, t in bench_model(*loaded, rng, args.batches, args.calls):
            print(f"{label:<18}{algo:<10}{t['api']:>10.2f}{t['kernel']:>13.2f}{t['pin']:>10.2f}"
                  f"{t['api/ref']:>9.2f}{t['kernel/ref']:>11.2f}")
    print("FD O(n^3) is rtctl's M + Cholesky reference; its 'pinocchio' column repeats pin.aba for scale.")
    print("load average (1, 5, 15 min) at end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
