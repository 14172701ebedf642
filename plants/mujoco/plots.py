#!/usr/bin/env python3
"""The planar biped of Shah, Saha & Dutt (2012) landing and standing on MuJoCo's contact beside rtctl's ground.

The same robot, controller and start on two plants: the biped (rtctl's model of it; on MuJoCo the bundled
``planar_biped.xml``, whose tree is that model's) is released 2 cm above the ground in a double-support pose
(knees bent 0.4 rad, feet flat, trunk upright, hips over the middle of the feet) and held there by joint PD
(kp = 300 N m/rad, kd = 15 N m s/rad: :data:`KP`, :data:`KD`) at 10 kHz through the sim driver. The paper's
walking gains (kp = 49, kd = 14) act beside its model terms; as plain PD they let the trunk sink 18 mm and
pitch 0.13 rad forward on both grounds (measured over 0.8 s), so the comparison holds the pose stiffer. Ground 1: the ``legged`` plant's
compliant ground with the walking examples' parameters (:data:`rtctl.plants.legged.control.BIPED_GROUND`:
k = 1e6 N/m, d = 5000 N s/m per heel and toe point, mu = 0.8), semi-implicit Euler at 0.1 ms. Ground 2:
MuJoCo's soft-constraint contact (spheres of 1 cm at the heels and toes, mu = 1, default solref/solimp), its
Euler integrator at 0.1 ms.

Why not the walking example on MuJoCo: the paper's walking laws (eqs. 31, 33-37) put the foot-ground forces
of the compliant ground, evaluated at the measured state, into their model term. On another contact that
estimate is not the force the feet feel: a penetration of MuJoCo's softer contact reads as a large
compliant-ground force, the law answers it with stance torques that press the foot further down, and the
loop diverges within 10 ms (observed for solref time constants from 0.2 to 20 ms). A walking controller on
MuJoCo needs a contact estimate of MuJoCo's own contact.

Writes ``biped_grounds.png``: trunk height and pitch, and each plant's total vertical ground reaction against
the weight (1 ms samples, thin, and their 10 ms running mean: the stiff compliant ground's reaction rings
between heel and toe at a higher rate than the samples), and prints the settled values. Usage: python plants/mujoco/plots.py [--out DIR] [--duration S]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rtctl.dynamics import Dynamics  # noqa: E402
from rtctl.plants.legged.control import BIPED_GROUND  # noqa: E402
from rtctl.plants.legged.model import planar_biped  # noqa: E402

RATE_HZ = 10_000.0
GROUNDS = ("rtctl compliant ground", "MuJoCo contact")
# rad: left hip, knee, ankle, right hip, knee, ankle. Knees bent 0.4 rad, feet flat (hip + knee + ankle = 0),
# the hips 0.98 sin(0.0766) = 0.075 m ahead of the ankles: over the middle of the 0.15 m feet.
POSE = np.array([0.2766, -0.4, 0.1234, 0.2766, -0.4, 0.1234])
DROP = 0.02                                             # m above the ground at release
KP, KD = 300.0, 15.0


def release_state(robot) -> np.ndarray:
    """The pose with the soles ``DROP`` above the ground: trunk height from the legs' geometry."""
    lengths = robot.link_lengths
    q = robot.model.neutral_configuration()
    q[3:] = POSE
    hip_to_sole = (lengths["thigh"] * np.cos(POSE[0]) + lengths["shank"] * np.cos(POSE[0] + POSE[1])
                   + robot.ankle_height)
    q[1] = lengths["trunk"] / 2 + hip_to_sole + DROP
    return q


def run_biped(ground: str, duration: float = 1.5, record_every: float = 0.001) -> dict:
    """Drop and hold the biped on ``ground`` (one of :data:`GROUNDS`) for ``duration`` s; the trunk state and
    the total vertical ground reaction (N) every ``record_every`` s, and the loop report."""
    from rtctl.drivers import create_driver
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.plants import create_plant
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    from .plant import MujocoPlant, bundled_model

    robot = planar_biped()
    if ground == GROUNDS[0]:
        plant = create_plant("legged", robot.model, substeps=1, integrator="semi_implicit_euler",
                             contact=BIPED_GROUND)

        def vertical_reaction():
            return float(plant.total_ground_reaction[2])
    elif ground == GROUNDS[1]:
        plant = MujocoPlant(robot.model, MujocoPlant.Options(substeps=1), source=bundled_model("planar_biped"))

        def vertical_reaction():
            return float(plant.contact_forces()[:, 2].sum())
    else:
        raise ValueError(f"ground must be one of {GROUNDS}, got {ground!r}")
    plant.reset(release_state(robot))
    driver = create_driver("sim", robot.model, plant=plant, period=1.0 / RATE_HZ)
    controller = create_controller("pd", Dynamics(robot.model), kp=KP, kd=KD)
    hold = create_trajectory("sinusoid", center=POSE, amplitude=np.zeros(6), frequency=1.0)
    every = round(record_every * RATE_HZ)
    rows = []

    def record(cycle, t, state, command):
        if cycle % every == 0:
            rows.append((t, *state.q[:3], vertical_reaction()))

    loop = ControlLoop(model=robot.model, drivers=[driver], controller=controller, trajectory=hold,
                       safety=SafetyMonitor(robot.model), rate_hz=RATE_HZ, pace=False, hooks=[record])
    start = time.perf_counter()
    report = loop.run(duration=duration)
    data = np.array(rows)
    return {"t": data[:, 0], "trunk": data[:, 1:4], "reaction": data[:, 4], "report": report,
            "weight": robot.weight, "wall": time.perf_counter() - start}


def settled(run: dict, last: float = 0.3) -> dict:
    """Means over the last ``last`` seconds: trunk height (m), pitch (rad), vertical reaction (N); and the
    peak reaction of the landing (N)."""
    tail = run["t"] >= run["t"][-1] - last
    return {"height": float(run["trunk"][tail, 1].mean()), "pitch": float(run["trunk"][tail, 2].mean()),
            "reaction": float(run["reaction"][tail].mean()), "peak": float(run["reaction"].max())}


def figure(runs: dict, path: Path) -> None:
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 8.0), sharex=True, layout="constrained")
    styles = ({"color": "C0", "lw": 1.6}, {"color": "C1", "lw": 1.2, "ls": "--"})
    first = next(iter(runs.values()))
    for (name, run), style in zip(runs.items(), styles):
        axes[0].plot(run["t"], run["trunk"][:, 1], label=name, **style)
        axes[1].plot(run["t"], run["trunk"][:, 2], label=name, **style)
        axes[2].plot(run["t"], run["reaction"], color=style["color"], lw=0.4, alpha=0.5)
        window = np.ones(10) / 10.0                                   # 10 ms running mean over the 1 ms samples
        axes[2].plot(run["t"][9:], np.convolve(run["reaction"], window, "valid"), label=f"{name} (10 ms mean)",
                     **style)
    axes[2].axhline(first["weight"], color="0.5", lw=1.0, label=f"weight {first['weight']:.1f} N")
    axes[2].set_ylim(0.0, 4.0 * first["weight"])
    for ax, label in zip(axes, ("trunk height z (m)", "trunk pitch (rad)", "vertical ground reaction (N)")):
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time (s)")
    handles, names = axes[2].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    lines = [f"{name}: settles at z {s['height']:.4f} m, pitch {s['pitch']:+.4f} rad, reaction {s['reaction']:.1f} N, "
             f"landing peak {s['peak']:.0f} N" for name, run in runs.items() for s in [settled(run)]]
    fig.suptitle(f"Planar biped dropped {DROP * 100:.0f} cm, joint PD (kp {KP:g}, kd {KD:g}) at 10 kHz\n"
                 + "\n".join(lines), fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--duration", type=float, default=1.5)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {ground: run_biped(ground, args.duration) for ground in GROUNDS}
    for name, run in runs.items():
        s_ = settled(run)
        print(f"{name}: {run['report'].cycles} cycles in {run['wall']:.1f} s, tripped {run['report'].tripped}; "
              f"settled trunk height {s_['height']:.4f} m, pitch {s_['pitch']:+.4f} rad, vertical reaction "
              f"{s_['reaction']:.2f} N (weight {run['weight']:.2f} N), landing peak {s_['peak']:.0f} N")
    path = args.out / "biped_grounds.png"
    figure(runs, path)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
