#!/usr/bin/env python3
"""Stewart platform (Lopes, 2009): per-call inverse dynamics, generalized momentum vs the generic core.

Both compute the six leg forces for the same random states (pose inside the
workspace, random rates and accelerations), measured in the same run:

* ``generalized momentum``: :meth:`StewartPlatform.inverse_dynamics` -- the
  checked Python API around one compiled call (M, V, G of eqs. 24-83, then
  tau = J_C^-T f, eq. 84); also the bare compiled kernel (what the
  controller calls in the loop) and the full computed-torque step (FK by
  Newton-Raphson + ID).
* ``generic core``: the tree (platform on an Euler-angle floating base + six
  two-body legs, nv = 24) with 18 loop-closure constraints, tree state from
  the closure (generic Jacobians) and
  :func:`rtctl.dynamics.constrained.projected_inverse_dynamics` (recursive ID,
  null-space projection by SVD). The ID-plus-projection part alone is also
  timed (tree state precomputed).

Target: <= 20 us per call for the generalized-momentum model.
Usage: python benchmarks/stewart.py [--calls 20000]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.dynamics.constrained import projected_inverse_dynamics
from rtctl.plants.stewart import kernels as _k
from rtctl.plants.stewart import solvers as _ks
from rtctl.plants.stewart import steps as _steps
from rtctl.plants.stewart import reference as stewart_reference
from rtctl.plants.stewart.model import StewartPlatform


def per_call(fn, states, repeat):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        for s in states:
            fn(*s)
        best = min(best, (time.perf_counter() - t) / len(states))
    return best * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--generic-calls", type=int, default=300)
    args = ap.parse_args(argv)
    m = StewartPlatform()
    dyn = Dynamics(stewart_reference.tree_model(m))
    rng = np.random.default_rng(1)
    states = [(m.random_pose(rng), rng.normal(size=6) * 0.5, rng.normal(size=6)) for _ in range(200)]
    tau = np.zeros(6)
    wk, wv = np.zeros((_k.NWK, 6, 6)), np.zeros((_k.NWV, 6))
    pts, par = m.pts, m.par
    B = stewart_reference.actuation_matrix()

    def gm_api(x, xd, xdd):
        return m.inverse_dynamics(x, xd, xdd)

    def gm_kernel(x, xd, xdd):
        _ks.inverse_dynamics(pts, par, x, xd, xdd, _k.B_ALL, tau, wk, wv)

    tree = [stewart_reference.tree_state(m, dyn, *s) for s in states[:50]]

    def generic_full(x, xd, xdd):
        return stewart_reference.projected_inverse_dynamics(m, dyn, x, xd, xdd).tau

    def generic_projection(q, v, a, Jc):
        return projected_inverse_dynamics(dyn, q, v, a, Jc, actuation=B).tau

    # computed-torque step (FK warm-started from a nearby pose)
    kp, kd = np.full(6, 400.0), np.full(6, 40.0)
    ct_states = []
    for x, xd, xdd in states:
        q, qd, _ = m.leg_motion(x, xd, xdd)
        ct_states.append((q, qd, x + 1e-4))
    x_est, alpha = np.zeros(6), np.zeros(6)

    def ct_step(q, qd, guess):
        x_est[:] = guess
        _steps.computed_torque_step(pts, par, q, qd, q, qd, qd, kp, kd, x_est, 1e-11, 20, alpha, tau, wk, wv)

    # agreement on the timed states
    err = max(np.abs(m.inverse_dynamics(*s) - generic_full(*s)).max() / np.abs(generic_full(*s)).max()
              for s in states[:50])
    for f, st in ((gm_api, states), (gm_kernel, states), (generic_full, states[:5]), (ct_step, ct_states)):
        for s in st[:5]:
            f(*s)  # compile / warm up
    reps = max(1, args.calls // len(states))
    rows = [
        ("generalized momentum, Python API (M, V, G, J_C^-T)", per_call(gm_api, states, reps)),
        ("generalized momentum, compiled kernel", per_call(gm_kernel, states, reps)),
        ("computed-torque step: FK (Newton) + xd, xdd + ID", per_call(ct_step, ct_states, reps)),
        ("generic core: tree state + projected ID (nv=24, m=18)",
         per_call(generic_full, states[:args.generic_calls], 1)),
        ("generic core: projected ID only (state precomputed)",
         per_call(generic_projection, tree[:args.generic_calls], 3)),
    ]
    print(f"Stewart platform inverse dynamics, per call ({platform.python_implementation()} "
          f"{platform.python_version()}, {platform.machine()})")
    print(f"{'method':58s} {'us/call':>10s}")
    print("-" * 69)
    for name, us in rows:
        print(f"{name:58s} {us:10.2f}")
    print("-" * 69)
    print(f"target <= 20 us (generalized momentum): {'met' if rows[0][1] <= 20 else 'NOT met'} "
          f"(API {rows[0][1]:.2f} us, kernel {rows[1][1]:.2f} us); "
          f"speed-up over the generic core: {rows[3][1] / rows[0][1]:.0f}x")
    print(f"max relative disagreement GM vs generic core on 50 timed states: {err:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
