"""Per-call time: virtual-work ID / FD of the quadruped with a tail (seed 000) vs the projected generic core.

Same random states, same run. ``vw ID kernel`` is the compiled eqs. 37-41 call the plant and controllers
use (no argument checks); ``vw ID`` the checked Python method; the generic rows build the tree state and
constraint Jacobian with ``Dynamics.jacobian`` / ``jacobian_dot_times_v`` and call
``projected_inverse_dynamics`` / ``constrained_forward_dynamics``. Target: <= 20 us for the ID.
Run: ``python benchmarks/quadruped_tail.py [--n 300]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtctl.dynamics.constrained import constrained_forward_dynamics, projected_inverse_dynamics  # noqa: E402
from rtctl.plants.quadruped_tail import dynamics as qt  # noqa: E402
from rtctl.plants.quadruped_tail.model import QuadrupedTail  # noqa: E402
from rtctl.plants.quadruped_tail.reference import random_states, tree_reference, tree_state  # noqa: E402


def _time(fn, states, reps):
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for s in states:
            fn(*s)
        best = min(best, (time.perf_counter() - t0) / len(states))
    return best * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    mech = QuadrupedTail()
    dyn, B = tree_reference(mech)
    states = list(random_states(mech, args.n, 7))
    w = mech._w
    tau0, wts, tau = np.zeros(14), np.ones(14), np.empty(14)

    def vw_kernel(q, qd, qdd):
        qt._id_core(mech.par, mech.A, mech.D, mech.r, q, qd, qdd, 0, wts, tau0, tau, w.R, w.E, w.edot, w.xi, w.xid,
                    w.ang, w.angd, w.J, w.bias, w.Jtau, w.f)

    taus = [mech.inverse_dynamics(*s) for s in states]
    fd_states = [(q, qd, t) for (q, qd, _), t in zip(states, taus)]
    out = np.empty(8)

    def vw_fd_kernel(q, qd, t):
        qt._fd_core(mech.par, mech.A, mech.D, mech.r, q, qd, t, out, w.R, w.E, w.edot, w.xi, w.ang, w.angd, w.J,
                    w.bias, w.Jtau, w.M, w.C, w.G, w.Mq, w.Cq, w.Gq, w.f, w.fq)

    def gen_id(q, qd, qdd):
        tq, tv, ta, Jc, _, _ = tree_state(mech, dyn, q, qd, qdd)
        projected_inverse_dynamics(dyn, tq, tv, ta, Jc, actuation=B[:, :8])

    def gen_fd(q, qd, t):
        tq, tv, _, Jc, _, _ = tree_state(mech, dyn, q, qd, np.zeros(8))
        gam = np.concatenate([dyn.jacobian_dot_times_v(tq, tv, f"foot{i}")[3:] for i in range(4)])
        constrained_forward_dynamics(dyn, tq, tv, B @ t, Jc, gam)

    for fn, st in ((vw_kernel, states), (vw_fd_kernel, fd_states)):   # compile / warm up
        fn(*st[0])
    rows = [("vw ID kernel (eqs. 37-41, tau_p = 0)", _time(vw_kernel, states, args.reps)),
            ("vw ID checked method", _time(lambda *s: mech.inverse_dynamics(*s), states, args.reps)),
            ("vw ID min-norm (14 actuators)", _time(lambda *s: mech.inverse_dynamics(*s, method="min_norm"),
                                                    states, args.reps)),
            ("vw FD kernel (eqs. 42-55)", _time(vw_fd_kernel, fd_states, args.reps)),
            ("generic projected ID (tree + Jc + projection)", _time(gen_id, states, max(1, args.reps // 2))),
            ("generic constrained FD (tree + Jc + Delassus)", _time(gen_fd, fd_states, max(1, args.reps // 2)))]
    print(f"quadruped with tail, {args.n} random states, best of {args.reps}")
    print(f"{'formulation':50s} {'us/call':>10s}")
    for name, us in rows:
        print(f"{name:50s} {us:10.1f}")
    print(f"target <= 20 us for the ID: {'met' if rows[0][1] <= 20 else 'missed'}")


if __name__ == "__main__":
    main()
