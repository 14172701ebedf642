#!/usr/bin/env python3
"""Reproduce section 5 of Shah, Saha & Dutt (seed 004): Figs. 12-14 (biped) and 16-17 (quadruped).

Runs the closed loops through the real-time loop (sim driver, "legged" plant, 10 kHz, unpaced) with the
paper's gains kp = 49, kd = 14 -- the biped 12 s under feed-forward (eq. 31) and computed-torque
(eqs. 34-37) control and 1 s with the inverse-dynamics torques alone, the quadruped's trot 6 s under both
laws -- and writes

* ``fig12_biped_without_control.png`` -- support-leg (module M1) joint angles, desired vs simulated;
* ``fig13_biped_trunk.png`` -- trunk centre of mass (x, z) and pitch, planned, FF, CT;
* ``fig14_biped_joints.png`` -- support-leg joint angles, desired, FF, CT (first 4 s);
* ``biped_ground_reactions.png`` -- vertical and horizontal ground reaction of each foot (CT);
* ``fig16_quadruped_trunk.png`` -- trunk centre of mass and Euler angles, planned, FF, CT;
* ``fig17_quadruped_joints.png`` -- front-left leg (module M1) joint angles, desired, FF, CT;
* ``quadruped_ground_reactions.png`` -- vertical ground reaction of each foot (CT);

and prints the bounds the tests assert. Usage: python plants/legged/plots.py [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rtctl.plants.legged.control import run_walk  # noqa: E402


def joint_figure(path, title, t, q_d, runs, names, t_max=None):
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.4 * len(names)), sharex=True)
    for ax, (name, j) in zip(axes, names):
        ax.plot(t, q_d[:, j], "k--", lw=1.2, label="desired")
        for label, (tr, q) in runs.items():
            ax.plot(tr, q[:, j], lw=1.0, label=label)
        ax.set_ylabel(f"{name} (rad)")
        ax.grid(True, alpha=0.3)
        if t_max:
            ax.set_xlim(0, t_max)
    axes[0].legend(fontsize=8, ncol=3)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def trunk_figure(path, title, recs, rows):
    ref = recs["CT"]
    planned, _ = ref.planned()
    fig, axes = plt.subplots(len(rows), 1, figsize=(7, 2.2 * len(rows)), sharex=True)
    for ax, (label, k, unit) in zip(axes, rows):
        ax.plot(ref.t, planned[:, k], "k--", lw=1.2, label="planned")
        for name, rec in recs.items():
            ax.plot(rec.t, rec.q[:, k], lw=1.0, label=name)
        ax.set_ylabel(f"{label} ({unit})")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, ncol=3)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="legged_figures", help="output directory for the PNGs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    biped = {"FF": run_walk("planar_biped", "ff", 12.0), "CT": run_walk("planar_biped", "ct", 12.0)}
    open_loop = run_walk("planar_biped", "ff", 1.0, kp=0.0, kd=0.0)
    quad = {"FF": run_walk("spatial_quadruped", "ff", 6.0), "CT": run_walk("spatial_quadruped", "ct", 6.0)}

    leg = [("hip", 0), ("knee", 1), ("ankle", 2)]
    ok = np.isfinite(open_loop.q).all(axis=1)
    joint_figure(out / "fig12_biped_without_control.png", "Fig. 12 -- support leg (M1) without control",
                 open_loop.t, open_loop.q_d, {"simulated": (open_loop.t[ok], open_loop.q[ok, 3:])}, leg)
    trunk_figure(out / "fig13_biped_trunk.png", "Fig. 13 -- biped trunk (12 s)", biped,
                 [("x_0", 0, "m"), ("z_0", 1, "m"), ("pitch", 2, "rad")])
    ct = biped["CT"]
    joint_figure(out / "fig14_biped_joints.png", "Fig. 14 -- support leg (M1) with control", ct.t, ct.q_d,
                 {name: (rec.t, rec.q[:, 3:]) for name, rec in biped.items()}, leg, t_max=4.0)

    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for foot, idx in ct.robot.feet.items():
        axes[0].plot(ct.t, ct.grf[:, idx, 2].sum(axis=1), label=foot)
        axes[1].plot(ct.t, ct.grf[:, idx, 0].sum(axis=1), label=foot)
    axes[0].axhline(ct.robot.weight, color="k", ls=":", lw=1, label="weight")
    axes[0].set_ylabel("vertical GRF (N)")
    axes[1].set_ylabel("horizontal GRF (N)")
    axes[1].set_xlabel("time (s)")
    axes[0].set_xlim(0, 4)
    axes[0].legend(fontsize=8)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.suptitle("Biped ground reaction forces (CT)")
    fig.tight_layout()
    fig.savefig(out / "biped_ground_reactions.png", dpi=120)
    plt.close(fig)

    trunk_figure(out / "fig16_quadruped_trunk.png", "Fig. 16 -- quadruped trunk", quad,
                 [("x", 0, "m"), ("y", 1, "m"), ("z", 2, "m"), ("yaw", 3, "rad"), ("pitch", 4, "rad"),
                  ("roll", 5, "rad")])
    qct = quad["CT"]
    joint_figure(out / "fig17_quadruped_joints.png", "Fig. 17 -- front-left leg (M1) with control", qct.t,
                 qct.q_d, {name: (rec.t, rec.q[:, 6:]) for name, rec in quad.items()},
                 [("hip roll", 0), ("hip pitch", 1), ("knee", 2)])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for c, name in enumerate(qct.robot.foot_names):
        ax.plot(qct.t, qct.grf[:, c, 2], label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("vertical GRF (N)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.suptitle("Quadruped ground reaction forces (CT)")
    fig.tight_layout()
    fig.savefig(out / "quadruped_ground_reactions.png", dpi=120)
    plt.close(fig)

    for name, rec in biped.items():
        planned, _ = rec.planned()
        print(f"biped {name}: |z_0 - 0.96| <= {np.abs(rec.q[:, 1] - 0.96).max() * 1e3:.1f} mm, "
              f"|pitch| <= {np.abs(rec.q[:, 2]).max():.4f} rad, x(12 s) - x(0) = {rec.q[-1, 0] - rec.q[0, 0]:.3f} m "
              f"(planned {planned[-1, 0] - planned[0, 0]:.3f} m), joint error <= "
              f"{np.abs(rec.q[:, 3:] - planned[:, 3:]).max():.1e} rad")
    print(f"biped FF vs CT joint angles: max difference {np.abs(biped['FF'].q[:, 3:] - ct.q[:, 3:]).max():.1e} rad")
    planned, _ = open_loop.planned()
    pitch_err = np.abs(open_loop.q[:, 2] - planned[:, 2])
    print(f"biped without control: pitch error exceeds 0.05 rad at t = {open_loop.t[np.argmax(pitch_err > 0.05)]:.2f} s")
    for name, rec in quad.items():
        print(f"quadruped {name}: |z - 0.5| <= {np.abs(rec.q[:, 2] - 0.5).max() * 1e3:.1f} mm, "
              f"|yaw, pitch, roll| <= {np.abs(rec.q[:, 3:6]).max(axis=0).round(4).tolist()} rad, "
              f"x(6 s) - x(0) = {rec.q[-1, 0] - rec.q[0, 0]:.3f} m")
    print(f"figures written to {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
