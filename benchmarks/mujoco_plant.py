#!/usr/bin/env python3
"""Plant step cost: rtctl's own plants against the MuJoCo plant, on the same models, in the same run.

Each row steps one plant 1 ms at a time (``plant.step(1e-3, effort)`` from Python, as the sim driver calls
it every cycle) under a constant effort from a state where nothing diverges, timed in alternating batches
(median microseconds per step over ``--batches`` batches of ``--steps`` steps); the MuJoCo plant's row
includes its conversions (effort in, state out), and the ``mj_step`` row is MuJoCo's bare step on the same
``MjData`` for reference. Pairs compare like with like:

* Panda arm (7 DOF, the bundled MJCF both plants are built from), no contact: rtctl ``rigid_body`` RK4 vs
  MuJoCo RK4, and rtctl semi-implicit Euler vs MuJoCo's Euler (which is semi-implicit too), 1 and 4
  sub-steps;
* Solo 12 (18 DOF, free flyer) standing on the floor, then folding under zero effort: rtctl ``legged`` plant
  on a ground of 1e5 N/m, 500 N s/m per point (the plant's default, the biped paper's 1e6 N/m and 5000 N s/m,
  is too stiff for a light foot at these sub-steps: it diverges), its default integrator (semi-implicit
  Euler, 8 sub-steps), the sphere feet's lowest points as contact points vs MuJoCo's contact (Euler, 4 sub-steps, as
  in ``mujoco_solo12.toml``) -- different contact models, so the row is cost, not equivalence;
* the planar biped of Shah, Saha & Dutt, 2012 (9 DOF) standing on both grounds, 0.1 ms steps (one sub-step
  each), as the walking examples run.

Ratio: rtctl's time / MuJoCo's (below 1: rtctl is faster). Usage: python benchmarks/mujoco_plant.py [--batches 15]
[--steps 500]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

# This script is named like the package it measures: drop its own folder from the path, or
# "import mujoco" would import this file.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402


def timed(step, steps: int, batches: int) -> float:
    """Median microseconds per call of ``step()`` over ``batches`` batches of ``steps`` calls."""
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        samples.append((time.perf_counter() - start) / steps * 1e6)
    return float(np.median(samples))


def stepper(plant, dt: float, effort):
    def run():
        plant.step(dt, effort)
    return run


def bare_steps(step, model, data, substeps: int):
    def run():
        for _ in range(substeps):
            step(model, data)
    return run


def panda_pairs():
    from rtctl.plants import create_plant
    from rtctl.plants.mujoco.plant import MujocoPlant, bundled_model, panda_model
    q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    model = panda_model()
    effort = np.zeros(model.nv)
    from rtctl.dynamics import Dynamics
    effort[:] = Dynamics(model).gravity_forces(q0)              # holds the arm: no limit is reached
    rows = []
    for substeps in (1, 4):
        for ours_integrator, theirs in (("rk4", "rk4"), ("semi_implicit_euler", "euler")):
            ours = create_plant("rigid_body", model, integrator=ours_integrator, substeps=substeps, end_stops=False,
                                viscous_friction=0.0)
            mj = MujocoPlant(model, MujocoPlant.Options(integrator=theirs, substeps=substeps, contact=False),
                                                        source=bundled_model("panda"))
            rows.append((f"Panda 7 DOF, {ours_integrator} vs {theirs}, {substeps} sub-step(s)", ours, mj, q0, effort))
    return rows


SOLO12_GROUND = {"stiffness": 1e5, "damping": 500.0}


def solo12_pair():
    from rtctl.plants.mujoco.plant import MujocoPlant, bundled_model, solo12_model
    from rtctl.plants.legged.plant import LeggedPlant
    from rtctl.plants.mujoco.model import load_mujoco_model
    model, m = load_mujoco_model(bundled_model("solo12"))
    feet = [k for k in range(m.ngeom) if m.geom_bodyid[k] > 0]
    bodies = np.array([m.geom_bodyid[k] for k in feet]) - 1     # MuJoCo body b is rtctl body b - 1 here
    points = np.array([m.geom_pos[k] - (0.0, 0.0, m.geom_size[k, 0]) for k in feet])
    ours = LeggedPlant(solo12_model(), contact_bodies=bodies, contact_points=points, contact=SOLO12_GROUND)
    mj = MujocoPlant(model, MujocoPlant.Options(substeps=4), source=bundled_model("solo12"))
    q0 = mj.q.copy()
    q0[2] = 0.2389
    q0[7:] = [0.0, 0.8, -1.6, 0.0, 0.8, -1.6, 0.0, -0.8, 1.6, 0.0, -0.8, 1.6]
    return ("Solo 12 18 DOF standing, legged (8 sub-steps) vs MuJoCo contact (4)", ours, mj, q0,
            np.zeros(model.nv))


def biped_pair():
    from rtctl.plants.legged.control import BIPED_GROUND, BipedWalk
    from rtctl.plants.legged.model import planar_biped
    from rtctl.plants import create_plant
    from rtctl.plants.mujoco.plant import MujocoPlant, bundled_model
    robot = planar_biped()
    ours = create_plant("legged", robot.model, substeps=1, integrator="semi_implicit_euler", contact=BIPED_GROUND)
    mj = MujocoPlant(robot.model, MujocoPlant.Options(substeps=1), source=bundled_model("planar_biped"))
    q0, _ = BipedWalk(robot=robot).initial_state()
    return ("planar biped 9 DOF, legged vs MuJoCo contact, 0.1 ms", ours, mj, q0, np.zeros(robot.model.nv))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    import mujoco
    rows = panda_pairs() + [solo12_pair(), biped_pair()]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"mujoco {mujoco.__version__}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'plant pair':<66} {'rtctl us':>9} {'MuJoCo us':>10} {'mj_step us':>11} {'rtctl/MuJoCo':>13}")
    for label, ours, mj, q0, effort in rows:
        dt = 1e-4 if "0.1 ms" in label else 1e-3
        for plant in (ours, mj):
            plant.reset(q0)
            for _ in range(20):                                   # compile, settle
                plant.step(dt, effort)

        samples = {"ours": [], "mj": [], "bare": []}
        substeps = mj.parameters()["substeps"]
        for _ in range(args.batches):                             # alternate: the same machine state for all
            for plant in (ours, mj):
                plant.reset(q0)
            samples["ours"].append(timed(stepper(ours, dt, effort), args.steps, 1))
            samples["mj"].append(timed(stepper(mj, dt, effort), args.steps, 1))
            samples["bare"].append(timed(bare_steps(mujoco.mj_step, mj.mj_model, mj.mj_data, substeps), args.steps, 1))
        t_ours, t_mj, t_bare = (float(np.median(samples[k])) for k in ("ours", "mj", "bare"))
        print(f"{label:<66} {t_ours:9.2f} {t_mj:10.2f} {t_bare:11.2f} {t_ours / t_mj:13.2f}")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
