"""Seed 000 figures: section 4.1 forward simulation (RK4 at 0.1 ms vs the 1 ms real-time step; p and Euler
angles, Fig. 6) and section 4.2 pitch tracking (open-loop feed-forward vs feed-forward + PD, Fig. 8, and
the compensation torque, Fig. 9). ``python plants/quadruped_tail/plots.py --out DIR``.

With the stated hip geometry the 4.1 profile drives leg 4 to full extension at ~0.41 s; the forward run
stops at the first step that leaves the workspace (reported on the plot).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rtctl.plants.quadruped_tail.control import QuadrupedTailOpenLoop  # noqa: E402
from rtctl.plants.quadruped_tail.plant import QuadrupedTailPlant  # noqa: E402
from rtctl.plants.quadruped_tail.model import QuadrupedTail  # noqa: E402
from rtctl.plants.quadruped_tail.control import simulate_pitch_tracking  # noqa: E402


def forward(mech, substeps, duration=1.0, dt=1e-3):
    plant = QuadrupedTailPlant(mech.actuator_model(), substeps=substeps)
    tau, t, x = np.zeros(14), [0.0], [plant.x.copy()]
    for k in range(int(round(duration / dt))):
        try:
            plant.step(dt, QuadrupedTailOpenLoop.profile(k * dt, tau))
        except ValueError:
            break
        t.append(plant.t)
        x.append(plant.x.copy())
    return np.array(t), np.array(x)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    mech = QuadrupedTail()
    t1, x1 = forward(mech, 10)
    t2, x2 = forward(mech, 1)
    n = min(len(t1), len(t2))
    diff = np.abs(x1[:n] - x2[:n]).max()
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for k, lab in enumerate(("p_x", "p_y", "p_z")):
        ax[0].plot(t1, x1[:, k], label=lab + " (0.1 ms)")
        ax[0].plot(t2, x2[:, k], "--", label=lab + " (1 ms)")
    for k, lab in enumerate(("phi_x", "phi_y", "phi_z")):
        ax[1].plot(t1, x1[:, 3 + k], label=lab + " (0.1 ms)")
        ax[1].plot(t2, x2[:, 3 + k], "--", label=lab + " (1 ms)")
    ax[0].set_ylabel("m")
    ax[1].set_ylabel("rad")
    ax[1].set_xlabel("t (s)")
    ax[0].set_title(f"Section 4.1 forward model, RK4; max |0.1 ms - 1 ms| = {diff:.1e}; stopped at {t1[-1]:.3f} s")
    ax[0].legend(fontsize=7, ncol=3)
    ax[1].legend(fontsize=7, ncol=3)
    fig.savefig(out / "quadruped_tail_forward.png", dpi=120)
    print(f"forward: reached {t1[-1]:.3f} s (0.1 ms) / {t2[-1]:.3f} s (1 ms), max difference {diff:.2e}")

    e_ol, _, _ = simulate_pitch_tracking(mech, 0.0, 1000, start_on_trajectory=True)
    e_cl, ctl, _ = simulate_pitch_tracking(mech, 400.0, 2000)
    tc = ctl.log[:ctl.logged, 14:28]
    fig, ax = plt.subplots(2, 1, figsize=(8, 6))
    ax[0].semilogy(np.arange(1, len(e_ol) + 1) * 1e-3, e_ol, label="feed-forward only")
    ax[0].semilogy(np.arange(1, len(e_cl) + 1) * 1e-3, e_cl, label="feed-forward + PD (kp = 400)")
    ax[0].set_ylabel("max |q - q_d|")
    ax[0].legend()
    ax[1].plot(np.arange(len(tc)) * 1e-3, tc[:, :8])
    ax[1].set_ylabel("compensation tau_c (N m)")
    ax[1].set_xlabel("t (s)")
    fig.savefig(out / "quadruped_tail_pitch.png", dpi=120)
    print(f"pitch: open loop error {e_ol[-1]:.3f} at {len(e_ol)} ms; closed loop error {e_cl[-1]:.2e} at 2 s; "
          f"tau_c RMS {np.sqrt(np.mean(tc[:1000] ** 2)):.2f} -> {np.sqrt(np.mean(tc[1000:] ** 2)):.2f} N m")


if __name__ == "__main__":
    main()
