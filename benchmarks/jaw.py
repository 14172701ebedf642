#!/usr/bin/env python3
"""Jaw-rehabilitation robot (Kalani et al., 2018): per-call cost of the Gibbs-Appell inverse dynamics vs the
generalized-momentum one, the coupled (robot + jaw model + patient) models, the plant step and the controllers.

All rows run on the same random states (poses inside the workspace of both
platforms, random rates and accelerations) in the same process:

* one platform (the robot): the appendix's Gibbs-Appell leg forces
  (:func:`rtctl.plants.jaw.kernels.ga_inverse_dynamics`, and the checked
  Python API :func:`rtctl.plants.jaw.model.gibbs_appell_inverse_dynamics`) vs the
  generalized-momentum ones of Lopes (2009) (``rtctl.plants.stewart.solvers.inverse_dynamics`` and
  :meth:`StewartPlatform.inverse_dynamics`); the ratio GM / GA;
* two platforms + patient: Gibbs-Appell (what the controllers use) vs
  generalized momentum (the plant's model), compiled;
* the plant step (1 ms, RK4 with 2 substeps, 8 coupled forward dynamics), the
  two controller updates and ``incisal_to_legs``.

Each row is a function ``row_*(ctx) -> (label, us_per_call)`` listed in
:data:`ROWS`; add a row (e.g. the CPG sample) by writing one and appending it.
Target: <= 20 us per call for the Gibbs-Appell ID.
Usage: python benchmarks/jaw.py [--calls 20000]
"""
from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass, field

import numpy as np

from rtctl.plants.jaw.control import JawComputedTorque, JawFeedForwardPD
from rtctl.plants.jaw.plant import JawPlant
from rtctl.dynamics import Dynamics
from rtctl.plants.jaw import kernels as _jk
from rtctl.plants.stewart import kernels as _sk
from rtctl.plants.stewart import solvers as _ss
from rtctl.plants.jaw.model import JawRehabRobot, gibbs_appell_inverse_dynamics


def per_call(fn, states, repeat):
    """Best-of-``repeat`` mean time per call of fn(*state) over ``states``, in us."""
    best = np.inf
    for s in states[:5]:
        fn(*s)
    for _ in range(repeat):
        t = time.perf_counter()
        for s in states:
            fn(*s)
        best = min(best, (time.perf_counter() - t) / len(states))
    return best * 1e6


@dataclass
class Context:
    calls: int
    mech: JawRehabRobot = field(default_factory=JawRehabRobot)
    states: list = field(default_factory=list)
    tau: np.ndarray = field(default_factory=lambda: np.zeros(6))

    def __post_init__(self):
        rng = np.random.default_rng(1)
        self.states = [(self.mech.random_pose(rng), rng.normal(size=6) * 0.3, rng.normal(size=6) * 3.0)
                       for _ in range(200)]
        self.W, self.V = np.zeros((_jk.NW, 6, 6)), np.zeros((_jk.NV, 6))
        self.wk, self.wv = np.zeros((_sk.NWK, 6, 6)), np.zeros((_sk.NWV, 6))
        self.results: dict = {}

    @property
    def repeat(self):
        return max(1, self.calls // len(self.states))


def row_ga_kernel(ctx):
    r, tau, W, V = ctx.mech.robot, ctx.tau, ctx.W, ctx.V
    us = per_call(lambda x, xd, xdd: _jk.ga_inverse_dynamics(r.pts, r.par, x, xd, xdd, _sk.B_ALL, tau, W, V),
                  ctx.states, ctx.repeat)
    ctx.results["ga_kernel"] = us
    return "robot, Gibbs-Appell, compiled kernel", us


def row_gm_kernel(ctx):
    r, tau, wk, wv = ctx.mech.robot, ctx.tau, ctx.wk, ctx.wv
    us = per_call(lambda x, xd, xdd: _ss.inverse_dynamics(r.pts, r.par, x, xd, xdd, _sk.B_ALL, tau, wk, wv),
                  ctx.states, ctx.repeat)
    ctx.results["gm_kernel"] = us
    return "robot, generalized momentum, compiled kernel", us


def row_ga_api(ctx):
    r, work = ctx.mech.robot, (ctx.W, ctx.V)
    us = per_call(lambda x, xd, xdd: gibbs_appell_inverse_dynamics(r, x, xd, xdd, work=work), ctx.states, ctx.repeat)
    ctx.results["ga_api"] = us
    return "robot, Gibbs-Appell, Python API", us


def row_gm_api(ctx):
    r = ctx.mech.robot
    us = per_call(r.inverse_dynamics, ctx.states, ctx.repeat)
    ctx.results["gm_api"] = us
    return "robot, generalized momentum, Python API", us


def row_coupled_ga(ctx):
    m, tau, W, V = ctx.mech, ctx.tau, ctx.W, ctx.V
    return "robot + jaw + patient, Gibbs-Appell, kernel", per_call(
        lambda x, xd, xdd: _jk.coupled_inverse_dynamics(m.pts2, m.P, x, xd, xdd, tau, W, V), ctx.states, ctx.repeat)


def row_coupled_gm(ctx):
    m, tau, W, V = ctx.mech, ctx.tau, ctx.W, ctx.V
    return "robot + jaw + patient, generalized momentum, kernel", per_call(
        lambda x, xd, xdd: _jk.coupled_inverse_dynamics_gm(m.pts2, m.P, x, xd, xdd, tau, W, V), ctx.states,
        ctx.repeat)


def row_plant_step(ctx):
    m = ctx.mech
    plant = JawPlant(m.actuator_model(), JawPlant.Options(substeps=2), mechanism=m)
    hold = m.inverse_dynamics(m.rest_pose, np.zeros(6), np.zeros(6))
    states = [(m.incisal_pose([0.0, 0.0, -0.01 * k / 50])[0],) for k in range(50)]

    def step(x):
        plant.x[:] = x
        plant.xd[:] = 0.0
        plant.step(1e-3, hold)
    return "plant step (1 ms, RK4, 2 substeps)", per_call(step, states, max(1, ctx.repeat // 20))


def _controller_states(ctx):
    m, out = ctx.mech, []
    for x, xd, xdd in ctx.states:
        q, qd, qdd = m.leg_motion(x, xd, xdd)
        out.append((q, qd, q + 1e-5, qd, qdd, x))
    return out


def _controller_row(ctx, cls, kp):
    m = ctx.mech
    ctl = cls(Dynamics(m.actuator_model()), kp=kp, mechanism=m)
    effort = np.zeros(6)

    def update(q, v, q_d, qd_d, qdd_d, x):
        ctl.x[:] = x + 1e-5
        ctl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, effort)
    return f"{cls.name}.update (FK + GA ID)", per_call(update, _controller_states(ctx), ctx.repeat)


def row_computed_torque(ctx):
    return _controller_row(ctx, JawComputedTorque, 400.0)


def row_ff_pd(ctx):
    return _controller_row(ctx, JawFeedForwardPD, 2000.0)


def row_incisal_to_legs(ctx):
    m = ctx.mech
    l, ld, ldd = np.zeros(6), np.zeros(6), np.zeros(6)
    rng = np.random.default_rng(2)
    states = [(rng.uniform([-0.005, -0.005, -0.02], [0.005, 0.005, 0.0]), rng.normal(size=3) * 0.05,
               rng.normal(size=3)) for _ in range(200)]
    return "incisal_to_legs (pose, workspace check, leg IK)", per_call(
        lambda p, pd, pdd: m.incisal_to_legs(p, pd, pdd, l, ld, ldd), states, ctx.repeat)


def _cpg_in_transition():
    from rtctl.loops.cpg import ChewingCPG
    cpg = ChewingCPG("normal")
    cpg.set_pattern("hard_food", frequency=1.0)  # every filter moving: the costliest step
    return cpg


def row_cpg_step(ctx):
    cpg = _cpg_in_transition()
    ctx.results["cpg_step"] = us = per_call(cpg.step, [(1e-3,)] * 200, ctx.repeat)
    return "CPG step (ChewingCPG.step, mid-transition)", us


def row_cpg_trajectory(ctx):
    from rtctl.plants.jaw.cpg_trajectory import JawCPGTrajectory
    traj = JawCPGTrajectory(JawCPGTrajectory.Options(pattern="normal"))
    traj.cpg.apply(traj.cpg.check_request(pattern="hard_food"))
    q, qd, qdd = np.zeros(6), np.zeros(6), np.zeros(6)
    clock = iter(np.arange(1, 10_000_000) * 1e-3)
    ctx.results["cpg_traj"] = us = per_call(lambda: traj.sample(next(clock), q, qd, qdd), [()] * 200, ctx.repeat)
    return "jaw_cpg sample (CPG step + incisal_to_legs, one call)", us


ROWS = [row_ga_kernel, row_gm_kernel, row_ga_api, row_gm_api, row_coupled_ga, row_coupled_gm, row_plant_step,
        row_computed_torque, row_ff_pd, row_incisal_to_legs, row_cpg_step, row_cpg_trajectory]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args(argv)
    ctx = Context(calls=args.calls)
    m = ctx.mech
    err = max(np.abs(gibbs_appell_inverse_dynamics(m.robot, *s) - m.robot.inverse_dynamics(*s)).max()
              / np.abs(m.robot.inverse_dynamics(*s)).max() for s in ctx.states)
    err2 = max(np.abs(m.inverse_dynamics(*s) - m.inverse_dynamics_gm(*s)).max()
               / np.abs(m.inverse_dynamics_gm(*s)).max() for s in ctx.states)
    rows = [row(ctx) for row in ROWS]
    print(f"Jaw-rehabilitation robot, per call ({platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, {len(ctx.states)} states)")
    print(f"{'what':58s} {'us/call':>10s}")
    print("-" * 69)
    for name, us in rows:
        print(f"{name:58s} {us:10.2f}")
    print("-" * 69)
    r = ctx.results
    print(f"generalized momentum / Gibbs-Appell: kernel {r['gm_kernel'] / r['ga_kernel']:.1f}x, "
          f"Python API {r['gm_api'] / r['ga_api']:.1f}x")
    print(f"target <= 20 us (Gibbs-Appell ID): {'met' if r['ga_api'] <= 20 else 'NOT met'} "
          f"(API {r['ga_api']:.2f} us, kernel {r['ga_kernel']:.2f} us)")
    print(f"target <= 10 us (CPG step per cycle): {'met' if r['cpg_step'] <= 10 else 'NOT met'} "
          f"(step {r['cpg_step']:.2f} us; with the leg mapping {r['cpg_traj']:.2f} us)")
    print(f"max relative disagreement GA vs GM on the timed states: one platform {err:.1e}, coupled {err2:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
