"""Quadruped with a tail (Liu & Ben-Tzvi, 2018): per-call time of the virtual-work ID / FD vs the projected generic
core, and the control cycle of the pitch example compiled vs the Python path it replaced.

Table 1, same random states, same run: ``vw ID kernel`` is the compiled eqs. 37-41 call the plant and
controllers use (no argument checks); ``vw ID`` the checked Python method; the generic rows build the tree
state and constraint Jacobian with ``Dynamics.jacobian`` / ``jacobian_dot_times_v`` and call
``projected_inverse_dynamics`` / ``constrained_forward_dynamics``. Target: <= 20 us for the ID.

Table 2, "control cycle": ``plants/quadruped_tail/quadruped_tail_pitch.toml`` (1 kHz, plant in-process at its
2 RK4 substeps), ``--cycles`` cycles per pass, p50/p99 per call of ``controller.update``, ``trajectory.sample``,
the plant's step and the whole ``loop.step`` (each call timed inside ``loop.run``: sim driver and safety
included), unpaced and paced at 1 kHz. An unpaced run competes for the CPU all the time, so on a shared machine
its p99 is the scheduler's time slice; the paced run sleeps between cycles like the real loop. "before" is the
Python path the compiled steps replaced, still callable as
``reference.ReferenceFFPD`` / ``reference.ReferencePitch`` (numpy lstsq, SVD, solves, the per-leg joint
accelerations in Python) and put into the same loop; "after" the compiled steps. The reference does the forward
kinematics and the allocations in numpy where the replaced code called compiled kernels, so its controller row
is slower than that code was; the plant step is the same compiled kernel in both columns. Both run in this process, one
after the other, twice (after, before, after, before) and the rows take all cycles of a variant. Target: whole
cycle p99 <= 500 us (paced). The load average is printed: the figures depend on what else runs.
Run: ``python benchmarks/quadruped_tail.py [--n 300] [--cycles 2000] [--only-cycle]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rtctl.config import build, bundled_config_path, load_config  # noqa: E402
from rtctl.dynamics.constrained import constrained_forward_dynamics, projected_inverse_dynamics  # noqa: E402
from rtctl.plants.quadruped_tail import dynamics as qt  # noqa: E402
from rtctl.plants.quadruped_tail.model import QuadrupedTail  # noqa: E402
from rtctl.plants.quadruped_tail.reference import (ReferenceFFPD, ReferencePitch, random_states,  # noqa: E402
                                                   tree_reference, tree_state)


def _time(fn, states, reps):
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for s in states:
            fn(*s)
        best = min(best, (time.perf_counter() - t0) / len(states))
    return best * 1e6


def _pitch_loop(variant):
    """The pitch example's loop, unpaced; for "before" its controller and trajectory take the reference path."""
    loop = build(load_config(bundled_config_path("quadruped_tail_pitch")))
    loop.pace = False
    if variant == "before":
        ctl, traj = loop.controller, loop.trajectory
        old_ctl = ReferenceFFPD(ctl.mechanism, kp=ctl.kp, kd=ctl.kd, cond_threshold=ctl.cond_threshold,
                                redundant_method=ctl.redundant_method)
        old_traj = ReferencePitch(t0=traj.t0, mechanism=traj.mechanism)
        ctl.update, traj.sample = old_ctl.update, old_traj.sample
    return loop


def _component_times(variant, cycles):
    """(controller.update, trajectory.sample, plant step) seconds per cycle over ``cycles`` cycles of the pitch
    motion, the controller's torques driving the in-process plant."""
    loop = _pitch_loop(variant)
    ctl, traj, plant, period = loop.controller, loop.trajectory, loop.driver.plant, loop.period
    q_d, qd_d, qdd_d, effort = np.zeros(14), np.zeros(14), np.zeros(14), np.zeros(14)
    out = np.empty((3, cycles))
    clock = time.perf_counter
    for k in range(cycles):
        t = k * period
        t0 = clock()
        traj.sample(t, q_d, qd_d, qdd_d)
        t1 = clock()
        ctl.update(t, period, plant.q, plant.v, q_d, qd_d, qdd_d, effort)
        t2 = clock()
        plant.step(period, effort)
        t3 = clock()
        out[:, k] = t2 - t1, t1 - t0, t3 - t2
    return out


def _loop_step_times(variant, cycles, paced):
    """Seconds of each ``loop.step`` of ``loop.run`` (sim driver, plant, trajectory, controller, safety), the loop
    paced at its 1 kHz or not."""
    loop = _pitch_loop(variant)
    loop.pace = paced
    times = np.zeros(cycles)
    count = [0]
    step, clock = loop.step, time.perf_counter

    def timed_step(t):
        t0 = clock()
        step(t)
        times[count[0]] = clock() - t0
        count[0] += 1

    loop.step = timed_step
    loop.run(cycles=cycles)
    if loop.failures:
        raise RuntimeError(f"{variant}: the pitch run failed: {loop.failures}")
    return times


def control_cycle_table(cycles):
    """Table 2 (module docstring): rows of (name, before p50, before p99, after p50, after p99) in us, and the
    overruns (steps longer than the 1 ms period) of the paced runs."""
    for variant in ("after", "before"):     # compile and warm up
        _component_times(variant, 50)
        _loop_step_times(variant, 50, False)
    runs = {"before": [], "after": []}
    load_before = os.getloadavg()
    for _ in range(2):
        for variant in ("after", "before"):
            runs[variant].append((*_component_times(variant, cycles), _loop_step_times(variant, cycles, False),
                                  _loop_step_times(variant, cycles, True)))
    load_after = os.getloadavg()
    rows = []
    names = ("controller.update", "trajectory.sample", "plant step (same in both)", "loop.step unpaced",
             "loop.step paced at 1 kHz")
    for i, name in enumerate(names):
        stats = []
        for variant in ("before", "after"):
            data = np.concatenate([run[i] for run in runs[variant]]) * 1e6
            stats += [np.percentile(data, 50), np.percentile(data, 99)]
        rows.append((name, *stats))
    overruns = {v: int(sum(np.count_nonzero(run[4] > 1e-3) for run in runs[v])) for v in runs}
    return rows, overruns, load_before, load_after


def print_control_cycle(cycles):
    rows, overruns, load_before, load_after = control_cycle_table(cycles)
    print(f"\ncontrol cycle: pitch example, {2 * cycles} cycles per variant, unpaced, in-process plant; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min), {os.cpu_count()} CPUs")
    print(f"{'us per call':30s} {'before p50':>10s} {'p99':>8s} {'after p50':>10s} {'p99':>8s} {'p50 ratio':>10s} "
          f"{'p99 ratio':>10s}")
    for name, b50, b99, a50, a99 in rows:
        print(f"{name:30s} {b50:10.1f} {b99:8.1f} {a50:10.1f} {a99:8.1f} {b50 / a50:10.1f} {b99 / a99:10.1f}")
    print(f"paced runs: {overruns['before']} (before) and {overruns['after']} (after) of {2 * cycles} cycles over "
          f"the 1 ms period")
    whole = rows[-1][4]
    print(f"target: whole cycle p99 <= 500 us (paced): {'met' if whole <= 500 else 'missed'} ({whole:.0f} us)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=2000, help="cycles per variant and pass (two passes)")
    ap.add_argument("--only-cycle", action="store_true", help="only the control-cycle table")
    args = ap.parse_args(argv)
    if not args.only_cycle:
        id_fd_table(args)
    print_control_cycle(args.cycles)


def id_fd_table(args):
    mech = QuadrupedTail()
    dyn, B = tree_reference(mech)
    states = list(random_states(mech, args.n, 7))
    w = mech._w
    tau0, wts, tau = np.zeros(14), np.ones(14), np.empty(14)

    def vw_kernel(q, qd, qdd):
        qt._id_core(mech.par, mech.A, mech.D, mech.r, q, qd, qdd, 0, wts, tau0, tau, w.R, w.E, w.edot, w.xi, w.xid,
                    w.ang, w.angd, w.angb, w.J, w.bias, w.Jtau, w.legj, w.f, w.mat, w.vec)

    taus = [mech.inverse_dynamics(*s) for s in states]
    fd_states = [(q, qd, t) for (q, qd, _), t in zip(states, taus)]
    out = np.empty(8)

    def vw_fd_kernel(q, qd, t):
        qt._fd_core(mech.par, mech.A, mech.D, mech.r, q, qd, t, out, *w.kin_args(), w.M, w.C, w.G, w.Mq, w.Cq, w.Gq,
                    w.f, w.mat)

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
