#!/usr/bin/env python3
"""Reproduce section 5 of Lopes (2009): Figs. 4, 5, 6 and Table 1.

The platform moves P1 -> P2 -> P1 (2 s per segment, third-order trigonometric
profile, see :mod:`rtctl.plants.stewart.control`); the inverse dynamics of the
generalized-momentum model gives the leg forces. Writes

* ``fig4_actuator_trajectories.png`` -- leg (a) positions, (b) velocities, (c) accelerations;
* ``fig5_actuator_forces.png`` -- leg forces;
* ``fig6_body_contributions.png`` -- the forces due to the platform, the six
  cylinders and the six pistons (each with its own inertia and gravity; they sum to Fig. 5);

and prints the operation-count table (Table 1 beside our counts) and a few figures.
Usage: python plants/stewart/plots.py [--out DIR] [--segment-time 2.0]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rtctl.plants.stewart.control import StewartPoseTrajectory  # noqa: E402
from rtctl.plants.stewart.opcount import count_coriolis, count_shared, format_table  # noqa: E402
from rtctl.plants.stewart.model import StewartPlatform, paper_trajectory  # noqa: E402


def compute(segment_time=2.0, n=801):
    m = StewartPlatform()
    times, waypoints = paper_trajectory(segment_time)
    traj = StewartPoseTrajectory(StewartPoseTrajectory.Options(times=times, waypoints=waypoints), mechanism=m)
    t = np.linspace(times[0], times[-1], n)
    q, qd, qdd, tau = (np.zeros((n, 6)) for _ in range(4))
    parts = {k: np.zeros((n, 6)) for k in ("platform", "cylinders", "pistons")}
    for k, tk in enumerate(t):
        traj.sample(tk, q[k], qd[k], qdd[k])
        x, xd, xdd = traj.pose(tk)
        tau[k] = m.inverse_dynamics(x, xd, xdd)
        for name in parts:
            parts[name][k] = m.inverse_dynamics(x, xd, xdd, bodies=name)
    return m, t, q, qd, qdd, tau, parts


def _legend_right(fig, ax, labels):
    """One legend for the six legs, outside the axes on the right (it never covers a curve)."""
    fig.legend(ax.get_lines()[:len(labels)], labels, loc="outside right center", fontsize=8, frameon=False)


def plot(out: Path, t, q, qd, qdd, tau, parts):
    out.mkdir(parents=True, exist_ok=True)
    labels = [f"leg {i + 1}" for i in range(6)]
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 9), sharex=True, layout="constrained")
    for ax, data, yl, tag in zip(axes, (q, qd, qdd), ("leg length (m)", "leg velocity (m/s)",
                                                      "leg acceleration (m/s$^2$)"), "abc"):
        ax.plot(t, data)
        ax.set_ylabel(yl)
        ax.set_title(f"({tag})", loc="left")
        ax.grid(True, alpha=0.3)
    _legend_right(fig, axes[0], labels)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle("Fig. 4 -- actuator trajectories (P1 -> P2 -> P1)")
    fig.savefig(out / "fig4_actuator_trajectories.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    ax.plot(t, tau)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("actuator force (N)")
    _legend_right(fig, ax, labels)
    ax.grid(True, alpha=0.3)
    ax.set_title("Fig. 5 -- actuator forces")
    fig.savefig(out / "fig5_actuator_forces.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(3, 1, figsize=(7.5, 9), sharex=True, layout="constrained")
    for ax, (name, data) in zip(axes, parts.items()):
        ax.plot(t, data)
        ax.set_ylabel("force (N)")
        ax.set_title(f"due to the {'moving platform' if name == 'platform' else 'six ' + name}", loc="left")
        ax.grid(True, alpha=0.3)
    _legend_right(fig, axes[0], labels)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle("Fig. 6 -- contributions to the actuator forces (they sum to Fig. 5)")
    fig.savefig(out / "fig6_body_contributions.png", dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="stewart_figures", help="output directory for the PNGs")
    ap.add_argument("--segment-time", type=float, default=2.0, help="duration of each segment (s)")
    args = ap.parse_args(argv)
    m, t, q, qd, qdd, tau, parts = compute(args.segment_time)
    out = Path(args.out)
    plot(out, t, q, qd, qdd, tau, parts)
    print(f"wrote {out}/fig4_actuator_trajectories.png, fig5_actuator_forces.png, fig6_body_contributions.png")
    print(f"leg length range {q.min():.4f} .. {q.max():.4f} m (stroke {m.stroke}); "
          f"|velocity| <= {np.abs(qd).max():.3f} m/s; |acceleration| <= {np.abs(qdd).max():.3f} m/s^2")
    print(f"actuator forces {tau.min():.3f} .. {tau.max():.3f} N; at P1 (static) {np.round(tau[0], 4).tolist()} N")
    for name, data in parts.items():
        print(f"  {name:10s} {data.min():8.3f} .. {data.max():8.3f} N")
    print(f"sum of the contributions = total forces to {np.abs(sum(parts.values()) - tau).max():.1e} N")
    print()
    print(format_table(count_coriolis(m)["counts"], count_shared(m)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
