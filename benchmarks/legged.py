#!/usr/bin/env python3
"""Table 2 of Shah, Saha & Dutt (2012) measured here: the legged robots' q'' and 1 s simulations.

For the planar biped (9 DOF, walking) and the spatial quadruped (18 DOF,
trotting), under the contact-aware feed-forward (FF, eq. 31) and
computed-torque (CT, eqs. 33-37) controllers of :mod:`rtctl.plants.legged.control` with the
paper's gains (kp = 49, kd = 14), all measured in the same run:

* time per q'': rtctl's O(n) articulated-module recursion (``aba``, UDU^T,
  eqs. 28-30, one link per module), the module-level block UDU^T of the
  paper's modules (:mod:`rtctl.plants.legged.modular`, "O(n) mod.", timed for
  q'' only), rtctl's O(n^3) reference (M by composite modules + Cholesky)
  and Pinocchio's ABA on the same model (built from the robot's URDF export:
  the planar and Euler-angle bases as prismatic + revolute joints) and the
  same states (sampled every 10 ms along the controlled run). Each is the
  compiled routine called from Python, timed in alternating batches
  (median microseconds per call); "% impr." is the paper's
  ``(t_O(n^3) - t_O(n)) / t_O(n^3)``, "/pin" the ratio to Pinocchio.
* wall time to simulate 1 s: the real-time mode (trajectory sample +
  controller + :class:`rtctl.plants.legged.plant.LeggedPlant` fixed step: the quadruped
  at 1 kHz with 8 plant sub-steps, the biped at 10 kHz with 1, the rate its
  walk needs with the paper's gains) and the offline mode (the same
  closed loop, controller evaluated continuously, integrated by scipy's
  stiff BDF solver at rtol 1e-6 as the paper used MATLAB's NDF solver),
  each with the O(n) and the O(n^3) forward dynamics inside the plant.
  Median of ``--repeats`` runs.

Then, per robot on the states of a computed-torque run: inverse dynamics,
mass matrix and under-actuated inverse dynamics (eqs. 26-27) by rtctl's
link-level kernels and by the module-level DeNOC kernels
(:mod:`rtctl.plants.legged.modular`, the paper's block recursion), beside
Pinocchio's RNEA and CRBA on the same model and states (ratio to Pinocchio).

The biped walks the paper's plan on the legged plant's default ground
(k = 1e6 N/m, d = 5000 N s/m, ``PAPER_GROUND``) at 10 kHz; the quadruped
trots at 1 kHz with 8 plant sub-steps, which that stiff ground does not
allow (the loop diverges or rolls), so its timing runs on a 1e5 / 500 ground.

Also printed: the fixed-step sweep that sets the plant's sub-steps (standing
drop of both robots on the default ground and on 1e5 / 500, and the first
second of each gait under CT on 1e5 / 500, 1 kHz): the
largest deviation of the base position from an RK4 reference with 128
sub-steps, for 1-48 sub-steps of either integrator, or 'x' where the run
fails or the standing robot's summed vertical ground reaction does not
settle within 1 % of its weight.

Targets: O(n) faster than O(n^3) on the quadruped; O(n) q'' <= 1.5x
Pinocchio's ABA; 1 s of quadruped trot simulated in <= 0.1 s (fixed step).
Usage: python benchmarks/legged.py [--batches 15] [--calls 2000] [--repeats 3] [--no-sweep]
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

from rtctl.dynamics.contact import ContactModel  # noqa: E402
from rtctl.plants.legged.control import (BipedWalk, LeggedComputedTorque, LeggedFeedForwardPD,  # noqa: E402
                                         QuadrupedTrot)
from rtctl.plants.legged.module_dynamics import (ModularDynamics, entry_floating_base, entry_forward_dynamics,  # noqa: E402
                                                 entry_inverse_dynamics, entry_mass_matrix)
from rtctl.plants.legged.plant import PAPER_GROUND, LeggedPlant  # noqa: E402
from rtctl.dynamics import Dynamics, kernels  # noqa: E402
from rtctl.plants.legged.model import planar_biped, spatial_quadruped  # noqa: E402
from rtctl.rt.interfaces import actuated_indices  # noqa: E402

DT = 1e-3
KP, KD = 49.0, 14.0
# Fixed-step settings per robot (from the sweep below, with margin).
FIXED = {"biped": ("semi_implicit_euler", 1), "quadruped": ("semi_implicit_euler", 8)}
# Control period of the walking loop: the biped's FF and CT laws with the paper's gains are stable only with a
# fast loop (kd dt / I_foot < 2 at the ankles; see plants/legged/control.py), so it runs at 10 kHz as in its example.
LOOP_DT = {"biped": 1e-4, "quadruped": 1e-3}
ROBOTS = {"biped": (planar_biped, BipedWalk), "quadruped": (spatial_quadruped, QuadrupedTrot)}
# Ground of each robot's walk: the biped's paper plan needs the stiff default (plants/legged/gait.py); the
# quadruped's 1 kHz x 8 sub-step loop needs a softer one (module docstring).
SOFT_GROUND = ContactModel(stiffness=1e5, damping=500.0)
GROUND = {"biped": PAPER_GROUND, "quadruped": SOFT_GROUND}
CONTROLLERS = {"FF": LeggedFeedForwardPD, "CT": LeggedComputedTorque}
# The paper's Table 2 (Intel E8400, ms; re-read from the OCR'd table, whose rows are shifted):
# (q'' O(n^3), q'' O(n), 1 s simulation O(n^3), O(n)).
PAPER = {("biped", "FF"): (2.88, 2.40, 5034, 4312), ("biped", "CT"): (2.89, 2.41, 2920, 2241),
         ("quadruped", "FF"): (4.48, 3.49, 16170, 10443), ("quadruped", "CT"): (4.49, 3.50, 9675, 7031)}


def closed_loop(robot, trajectory, controller_cls, *, forward_dynamics="aba", integrator, substeps, duration=1.0,
                record_every=10, dt=DT, contact=None):
    """Run trajectory + controller + plant at 1 kHz; return (wall seconds, recorded (q, v, effort), plant).

    Raises :class:`Failed` (with the simulated time reached) if the plant or the controller rejects a step.
    """
    plant = LeggedPlant(robot.model, LeggedPlant.Options(integrator=integrator, substeps=substeps,
                                                         forward_dynamics=forward_dynamics), contact=contact)
    controller = controller_cls(Dynamics(robot.model), controller_cls.Options(kp=KP, kd=KD), robot=robot,
                                contact=plant.contact_model)
    plant.reset(*trajectory.initial_state())
    n = trajectory.n
    q_d, qd_d, qdd_d = np.zeros(n), np.zeros(n), np.zeros(n)
    effort = np.zeros(robot.model.nv)
    steps = int(round(duration / dt))
    record = []
    t0 = time.perf_counter()
    try:
        for k in range(steps):
            trajectory.sample(plant.t, q_d, qd_d, qdd_d)
            controller.update(0.0, 1e-3, plant.q, plant.v, q_d, qd_d, qdd_d, effort)
            plant.step(dt, effort)
            if record_every and k % record_every == 0:
                record.append((plant.q.copy(), plant.v.copy(), effort.copy()))
    except ValueError as exc:
        raise Failed(plant.t, str(exc)) from None
    return time.perf_counter() - t0, record, plant


class Failed(Exception):
    def __init__(self, t, message):
        super().__init__(f"failed at t = {t:.3f} s: {message}")
        self.t = t


def offline(robot, trajectory, controller_cls, *, forward_dynamics="aba", duration=1.0, contact=None):
    """The same closed loop, continuous-time controller, integrated by BDF; return (wall seconds, nfev)."""
    plant = LeggedPlant(robot.model, LeggedPlant.Options(forward_dynamics=forward_dynamics), contact=contact)
    controller = controller_cls(Dynamics(robot.model), controller_cls.Options(kp=KP, kd=KD), robot=robot,
                                contact=plant.contact_model)
    plant.reset(*trajectory.initial_state())
    n = trajectory.n
    q_d, qd_d, qdd_d = np.zeros(n), np.zeros(n), np.zeros(n)
    effort = np.zeros(robot.model.nv)
    q_c, v_c = np.zeros(robot.model.nq), np.zeros(robot.model.nv)

    def effort_fn(t, q, v):
        q_c[:], v_c[:] = q, v
        trajectory.sample(t, q_d, qd_d, qdd_d)
        controller.update(0.0, 1e-3, q_c, v_c, q_d, qd_d, qdd_d, effort)
        return effort

    t0 = time.perf_counter()
    _, _, _, info = plant.simulate_offline(duration, effort_fn, method="BDF", rtol=1e-6, atol=1e-8)
    return time.perf_counter() - t0, info["nfev"]


def per_call_us(fn, states, calls):
    n = len(states)
    t0 = time.perf_counter()
    for k in range(calls):
        fn(*states[k % n])
    return (time.perf_counter() - t0) / calls * 1e6


def time_qdd(robot, record, batches, calls):
    """Median us per q'' of the O(n), O(n^3), the module-level block UDU^T (:mod:`rtctl.plants.legged.modular`,
    the paper's modules) and Pinocchio ABA on the recorded states (same states for all)."""
    pair = Pair.from_model(robot.model)
    dyn = pair.dyn
    mi, mf, ws, mat = dyn.mi, dyn.mf, dyn.ws, dyn._mat
    md = ModularDynamics(robot)
    mmi, mmf, mws, mods, work, fd_work = md.dyn.mi, md.dyn.mf, md.dyn.ws, md.mods, md._work, md._fd_work
    out = np.zeros(robot.model.nv)
    states = [(q, v, tau, pair.q_to_pin(q), pair.v_to_pin(v), pair.v_to_pin(tau)) for q, v, tau in record]
    pm, pd = pair.pin_model, pair.pin_data
    worst = max(max(np.abs(dyn.forward_dynamics(q, v, tau) - pair.v_from_pin(pin.aba(pm, pd, qp, vp, tp))).max(),
                    np.abs(md.forward_dynamics(q, v, tau) - pair.v_from_pin(pin.aba(pm, pd, qp, vp, tp))).max())
                for q, v, tau, qp, vp, tp in states)
    candidates = {
        "O(n)": lambda q, v, tau, *_: kernels.aba(mi, mf, ws, q, v, tau, out),
        "O(n^3)": lambda q, v, tau, *_: kernels.forward_dynamics_cholesky(mi, mf, ws, mat, q, v, tau, out),
        "module": lambda q, v, tau, *_: entry_forward_dynamics(mmi, mmf, mws, mods, q, v, tau, out, work, fd_work),
        "pin": lambda q, v, tau, qp, vp, tp: pin.aba(pm, pd, qp, vp, tp),
    }
    for fn in candidates.values():
        per_call_us(fn, states, 200)
    samples = {name: [] for name in candidates}
    for _ in range(batches):
        for name, fn in candidates.items():
            samples[name].append(per_call_us(fn, states, calls))
    return {name: float(np.median(v)) for name, v in samples.items()}, worst


def time_inverse_dynamics(robot, record, batches, calls):
    """Median us per call of inverse dynamics and mass matrix: rtctl's link-level kernels (RNEA, CRBA,
    floating-base RNEA of eqs. 26-27), the module-level DeNOC kernels (:mod:`rtctl.plants.legged.modular`)
    and Pinocchio's RNEA and CRBA, on the same recorded states. Returns (times, largest disagreement)."""
    pair = Pair.from_model(robot.model)
    dyn = pair.dyn
    mi, mf, ws = dyn.mi, dyn.mf, dyn.ws
    md = ModularDynamics(robot)
    nv, n0 = robot.model.nv, robot.n_base
    out, acc, mat, base = np.zeros(nv), np.zeros(nv), np.zeros((nv, nv)), np.zeros((n0, n0))
    mmi, mmf, mws, mods, work = md.dyn.mi, md.dyn.mf, md.dyn.ws, md.mods, md._work
    states = [(q, v, v * 0.5, pair.q_to_pin(q), pair.v_to_pin(v), pair.v_to_pin(v * 0.5)) for q, v, _ in record]
    pm, pd = pair.pin_model, pair.pin_data
    worst = 0.0
    for q, v, a, qp, vp, ap in states:
        worst = max(worst, np.abs(md.inverse_dynamics(q, v, a) - pair.v_from_pin(pin.rnea(pm, pd, qp, vp, ap))).max(),
                    np.abs(md.mass_matrix(q) - pair.matrix_from_pin(pin.crba(pm, pd, qp))).max())
    candidates = {
        ("ID", "rtctl link RNEA"): lambda q, v, a, *_: kernels.rnea(mi, mf, ws, q, v, a, out),
        ("ID", "module DeNOC"): lambda q, v, a, *_: entry_inverse_dynamics(mmi, mmf, mws, mods, q, v, a, out, work),
        ("ID", "Pinocchio RNEA"): lambda q, v, a, qp, vp, ap: pin.rnea(pm, pd, qp, vp, ap),
        ("GIM", "rtctl link CRBA"): lambda q, *_: kernels.crba(mi, mf, ws, q, mat),
        ("GIM", "module DeNOC"): lambda q, *_: entry_mass_matrix(mmi, mmf, mws, mods, q, mat, work),
        ("GIM", "Pinocchio CRBA"): lambda q, v, a, qp, *_: pin.crba(pm, pd, qp),
        ("FB-ID", "rtctl link"): lambda q, v, a, *_: kernels.floating_base_rnea(mi, mf, ws, base, q, v, a, acc, out),
        ("FB-ID", "module DeNOC"): lambda q, v, a, *_: entry_floating_base(mmi, mmf, mws, mods, q, v, a, acc, out,
                                                                            work),
    }
    for fn in candidates.values():
        per_call_us(fn, states, 200)
    samples = {key: [] for key in candidates}
    for _ in range(batches):
        for key, fn in candidates.items():
            samples[key].append(per_call_us(fn, states, calls))
    return {key: float(np.median(v)) for key, v in samples.items()}, worst


def improvement(slow, fast):
    return 100.0 * (slow - fast) / slow


def stance(robot):
    """A still stance: the biped's straight legs leaning 0.07 rad forward (centre of mass over mid-foot), the
    quadruped's knees bent 1 rad under its hips; base lowered onto the ground."""
    q = robot.model.neutral_configuration()
    if robot.n_base == 3:
        q[[3, 6]], q[[5, 8]] = 0.07, -0.07
    else:
        for k, (_, pitch, knee) in enumerate(robot.legs.values()):
            sign = 1.0 if k < 2 else -1.0
            q[pitch], q[knee] = 0.5 * sign, -sign
    dyn = Dynamics(robot.model)
    rot, pos = dyn.forward_kinematics(q)
    low = min(pos[b, 2] + rot[b, 2] @ p for b, p in zip(robot.contact_bodies, robot.contact_points))
    q[1 if robot.n_base == 3 else 2] -= low
    return q


def stand_still(robot, integrator, substeps, steps=1500, contact=None):
    """Drop 1 cm onto the feet in :func:`stance`, joints held by a 1 kHz PD (the biped's ankles damped against
    the shank pitch rate); return (|sum F_z - W| / W at the end, base trajectory)."""
    plant = LeggedPlant(robot.model, LeggedPlant.Options(integrator=integrator, substeps=substeps,
                                                         viscous_friction=2.0), contact=contact)
    q0 = stance(robot)
    q0[1 if robot.n_base == 3 else 2] += 0.01
    plant.reset(q0)
    qi, vi, _ = actuated_indices(robot.model)
    effort = np.zeros(robot.model.nv)
    base = []
    for _ in range(steps):
        effort[vi] = 300.0 * (q0[qi] - plant.q[qi])
        if robot.n_base == 3:
            for hip, knee, ankle in robot.legs.values():
                effort[ankle] += 40.0 * (plant.v[2] + plant.v[hip] + plant.v[knee])
        else:
            effort[vi] -= 5.0 * plant.v[vi]
        plant.step(DT, effort)
        base.append(plant.q[:robot.n_base].copy())
    return abs(plant.total_ground_reaction[2] - robot.weight) / robot.weight, np.array(base)


SUBSTEPS = (1, 2, 4, 8, 16, 32, 48)


def sweep(print_fn):
    """Fixed-step accuracy at 1 kHz per robot, scenario, integrator and sub-step count (module docstring)."""
    print_fn("\nFixed-step integration at 1 kHz (ground: default = 1e6 / 5000, soft = 1e5 / 500): largest "
             "base-position deviation (mm) from "
             "RK4 with 128 sub-steps over the run; 'x' = the run failed or (standing) did not settle to sum F_z "
             "within 1 % of the weight")
    print_fn(f"{'robot':<11}{'scenario':<19}{'integrator':<21}" + "".join(f"{n:>9d}" for n in SUBSTEPS))
    for name, (factory, traj_cls) in ROBOTS.items():
        robot = factory()
        npos = 2 if robot.n_base == 3 else 3  # the base position coordinates: (x, z) or (x, y, z)
        scenarios = {"stand, default": (None, PAPER_GROUND), "stand, soft": (None, SOFT_GROUND),
                     "gait CT 1 s, soft": (LeggedComputedTorque, SOFT_GROUND)}
        for label, (ctl, ground) in scenarios.items():
            def base_path(integrator, substeps):
                if ctl is None:
                    try:
                        err, base = stand_still(robot, integrator, substeps, contact=ground)
                    except ValueError:
                        return None
                    return base if err < 0.01 else None
                try:
                    _, rec, _ = closed_loop(robot, traj_cls(robot=robot), ctl, integrator=integrator,
                                            substeps=substeps, record_every=1, contact=ground)
                except Failed:
                    return None
                return np.array([r[0][:robot.n_base] for r in rec])

            ref = base_path("rk4", 128)
            for integrator in ("semi_implicit_euler", "rk4"):
                cells = []
                for substeps in SUBSTEPS:
                    path = base_path(integrator, substeps)
                    if path is None or ref is None:
                        cells.append("x")
                    else:
                        cells.append(f"{1e3 * np.abs(path[:, :npos] - ref[:, :npos]).max():.3g}")
                print_fn(f"{name:<11}{label:<19}{integrator:<21}" + "".join(f"{c:>9}" for c in cells))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-sweep", action="store_true", help="skip the fixed-step stability sweep")
    args = ap.parse_args(argv)
    print(f"Shah, Saha & Dutt (2012) Table 2, measured: rtctl O(n) / O(n^3) vs Pinocchio {pin.__version__} | Python "
          f"{platform.python_version()} | {platform.machine()} | q'': median of {args.batches} batches x "
          f"{args.calls} calls (us); 1 s simulations: median of {args.repeats} (ms)")
    head = (f"{'robot':<10}{'ctl':<4}{'algorithm':<10}{'q_dd us':>9}{'impr.':>8}{'/pin':>6}"
            f"{'fixed-step ms':>15}{'impr.':>8}{'BDF ms':>9}{'impr.':>8}{'nfev':>7}   paper: q_dd ms, sim ms")
    print(head)
    print("-" * len(head))
    rows = {}
    for name, (factory, traj_cls) in ROBOTS.items():
        robot = factory()
        integrator, substeps = FIXED[name]
        for ctl_name, ctl_cls in CONTROLLERS.items():
            sim, bdf = {}, {}
            record = None
            try:
                for fd in ("cholesky", "aba"):
                    times = []
                    for _ in range(args.repeats + 1):  # the first run warms up
                        wall, rec, _ = closed_loop(robot, traj_cls(robot=robot), ctl_cls, forward_dynamics=fd,
                                                   dt=LOOP_DT[name], record_every=int(round(0.01 / LOOP_DT[name])),
                                                   integrator=integrator, substeps=substeps, contact=GROUND[name])
                        times.append(wall)
                        record = rec
                    sim[fd] = float(np.median(times[1:])) * 1e3
                    offline(robot, traj_cls(robot=robot), ctl_cls, forward_dynamics=fd, duration=0.02,
                            contact=GROUND[name])
                    walls = [offline(robot, traj_cls(robot=robot), ctl_cls, forward_dynamics=fd, contact=GROUND[name])
                             for _ in range(max(1, args.repeats // 2))]
                    bdf[fd] = (float(np.median([w for w, _ in walls])) * 1e3, walls[0][1])
            except (Failed, RuntimeError) as exc:
                print(f"{name:<10}{ctl_name:<4}the closed loop {exc}")
                continue
            qdd, worst = time_qdd(robot, record, args.batches, args.calls)
            paper = PAPER[(name, ctl_name)]
            rows[(name, ctl_name)] = (qdd, sim, bdf, worst)
            print(f"{name:<10}{ctl_name:<4}{'O(n^3)':<10}{qdd['O(n^3)']:>9.2f}{'':>8}{qdd['O(n^3)'] / qdd['pin']:>6.2f}"
                  f"{sim['cholesky']:>15.1f}{'':>8}{bdf['cholesky'][0]:>9.0f}{'':>8}{bdf['cholesky'][1]:>7d}"
                  f"   {paper[0]:.2f}, {paper[2]}")
            print(f"{'':<14}{'O(n)':<10}{qdd['O(n)']:>9.2f}{improvement(qdd['O(n^3)'], qdd['O(n)']):>7.1f}%"
                  f"{qdd['O(n)'] / qdd['pin']:>6.2f}{sim['aba']:>15.1f}"
                  f"{improvement(sim['cholesky'], sim['aba']):>7.1f}%{bdf['aba'][0]:>9.0f}"
                  f"{improvement(bdf['cholesky'][0], bdf['aba'][0]):>7.1f}%{bdf['aba'][1]:>7d}"
                  f"   {paper[1]:.2f} ({improvement(paper[0], paper[1]):.2f}%), {paper[3]} "
                  f"({improvement(paper[2], paper[3]):.2f}%)")
            print(f"{'':<14}{'O(n) mod.':<10}{qdd['module']:>9.2f}"
                  f"{improvement(qdd['O(n^3)'], qdd['module']):>7.1f}%{qdd['module'] / qdd['pin']:>6.2f}"
                  f"   module-level block UDU^T (eqs. 28-30, A.4-A.9), q'' only")
            print(f"{'':<14}{'Pinocchio':<10}{qdd['pin']:>9.2f}")
    print("-" * len(head))
    print(f"fixed step: biped {1e-3 / LOOP_DT['biped']:g} kHz loop, {FIXED['biped'][1]} ({FIXED['biped'][0]}) "
          f"sub-step; quadruped {1e-3 / LOOP_DT['quadruped']:g} kHz, {FIXED['quadruped'][1]} sub-steps; wall time includes the "
          "trajectory sample and the controller; largest |q''| disagreement rtctl (link and module) vs Pinocchio: "
          f"{max((r[3] for r in rows.values()), default=np.nan):.1e}")
    quad = [rows[("quadruped", c)] for c in CONTROLLERS if ("quadruped", c) in rows]
    faster = bool(quad) and all(r[0]["O(n)"] < r[0]["O(n^3)"] for r in quad)
    ratio = max((r[0]["O(n)"] / r[0]["pin"] for r in rows.values()), default=np.inf)
    trot = max((r[1]["aba"] for r in quad), default=np.inf)
    print(f"targets: O(n) faster than O(n^3) on the quadruped: {'met' if faster else 'NOT met'}; "
          f"O(n) q'' <= 1.5x Pinocchio: {'met' if ratio <= 1.5 else 'NOT met'} (worst {ratio:.2f}x); "
          f"1 s of quadruped trot <= 100 ms: {'met' if trot <= 100 else 'NOT met'} ({trot:.1f} ms)")
    print(f"\nInverse dynamics (ID), mass matrix (GIM) and under-actuated ID (FB-ID, eqs. 26-27) per call (us, median "
          f"of {args.batches} batches x {args.calls}), on the recorded states; ratio to Pinocchio's RNEA / CRBA")
    for name, (factory, traj_cls) in ROBOTS.items():
        robot = factory()
        integrator, substeps = FIXED[name]
        _, record, _ = closed_loop(robot, traj_cls(robot=robot), LeggedComputedTorque, dt=LOOP_DT[name],
                                   record_every=int(round(0.01 / LOOP_DT[name])), integrator=integrator,
                                   substeps=substeps, contact=GROUND[name])
        times, worst = time_inverse_dynamics(robot, record, args.batches, args.calls)
        peer = {"ID": times[("ID", "Pinocchio RNEA")], "GIM": times[("GIM", "Pinocchio CRBA")],
                "FB-ID": times[("ID", "Pinocchio RNEA")]}
        for (what, label), us in times.items():
            print(f"{name:<10}{what:<6}{label:<18}{us:>8.2f} us{us / peer[what]:>7.2f}x")
        print(f"{name:<10}module DeNOC vs Pinocchio: largest |difference| {worst:.1e}")
    if not args.no_sweep:
        sweep(print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
