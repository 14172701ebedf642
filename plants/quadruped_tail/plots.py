"""Liu & Ben-Tzvi (2018) figures: section 4.1 forward simulation (RK4 at 0.1 ms vs the 1 ms real-time step; p and Euler
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
from rtctl.plants.quadruped_tail.model import ACTUATOR_NAMES, QuadrupedTail  # noqa: E402
from rtctl.plants.quadruped_tail.control import simulate_pitch_tracking  # noqa: E402


def forward(mech, substeps, duration=1.0, dt=1e-3):
    """Section 4.1 open-loop run: (t, generalized coordinates, why it stopped early or None)."""
    plant = QuadrupedTailPlant(mech.actuator_model(), QuadrupedTailPlant.Options(substeps=substeps))
    tau, t, x = np.zeros(14), [0.0], [plant.x.copy()]
    for k in range(int(round(duration / dt))):
        try:
            plant.step(dt, QuadrupedTailOpenLoop.profile(k * dt, tau))
        except ValueError as exc:
            return np.array(t), np.array(x), str(exc)
        t.append(plant.t)
        x.append(plant.x.copy())
    return np.array(t), np.array(x), None


def forward_figure(out: Path, t1, x1, t2, x2, stopped=None):
    """Fig. 6: p and the Euler angles, RK4 at 0.1 ms (solid) and 1 ms (dashed, same colour); returns the
    largest differences of p (m) and of the Euler angles (rad) over the common time span."""
    n = min(len(t1), len(t2))
    dp = float(np.abs(x1[:n, :3] - x2[:n, :3]).max())
    dphi = float(np.abs(x1[:n, 3:6] - x2[:n, 3:6]).max())
    fig, ax = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True, layout="constrained")
    for row, names, offset in ((0, ("p_x", "p_y", "p_z"), 0), (1, ("phi_x", "phi_y", "phi_z"), 3)):
        for k, lab in enumerate(names):
            ax[row].plot(t1, x1[:, offset + k], lw=1.6, label=lab)
            ax[row].plot(t2, x2[:, offset + k], "--", lw=1.0, color="k", alpha=0.7)
        ax[row].grid(True, alpha=0.3)
        ax[row].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax[0].set_ylabel("torso position p (m)")
    ax[1].set_ylabel("Euler angles phi (rad)")
    ax[1].set_xlabel("time (s)")
    ax[0].plot([], [], "--", color="k", alpha=0.7, label="1 ms step")
    ax[0].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    stop = f"stopped at {t1[-1]:.3f} s ({stopped})" if stopped else f"ran to {t1[-1]:.3f} s"
    fig.suptitle(f"Section 4.1 forward model, RK4 at 0.1 ms (solid) vs 1 ms (dashed); {stop}\n"
                 f"max |0.1 ms - 1 ms|: p {dp:.1e} m, phi {dphi:.1e} rad", fontsize=10)
    fig.savefig(out / "quadruped_tail_forward.png", dpi=120)
    plt.close(fig)
    return dp, dphi


def pitch_figure(out: Path, e_ol, e_cl, tc, ol_survived=True):
    """Figs. 8 and 9: the largest generalized tracking error per cycle (open loop vs PD) and the PD
    compensation torques ``tc`` (cycles, 14) of the active actuators (and of the passive ones if nonzero)."""
    fig, ax = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True, layout="constrained")
    t_ol = np.arange(1, len(e_ol) + 1) * 1e-3
    ax[0].semilogy(t_ol, e_ol, label="feed-forward only")
    ax[0].semilogy(np.arange(1, len(e_cl) + 1) * 1e-3, e_cl, label="feed-forward + PD (kp = 400 1/s$^2$)")
    if len(e_ol) and not ol_survived:
        ax[0].plot(t_ol[-1], e_ol[-1], "x", color="C0", ms=8)
        ax[0].annotate(f"leaves the workspace at {t_ol[-1]:.3f} s", (t_ol[-1], e_ol[-1]), xytext=(8, -4),
                       textcoords="offset points", fontsize=8, color="C0", va="top")
    ax[0].set_ylabel("max$_i$ |q$_i$ - q$_{d,i}$| (m, rad)")
    ax[0].set_title("Fig. 8 -- pitch tracking error (generalized coordinates)", loc="left", fontsize=10)
    ax[0].legend(fontsize=8, loc="lower right")
    ax[0].grid(True, which="major", alpha=0.3)
    t = np.arange(len(tc)) * 1e-3
    # the passive-joint actuators (tau_p) are zero under the paper's allocation (eq. 41): drawn only if used
    shown = [k for k in range(tc.shape[1]) if k < 8 or np.any(tc[:, k])]
    for k in shown:
        ax[1].plot(t, tc[:, k], lw=1.0, label=ACTUATOR_NAMES[k])
    ax[1].set_yscale("symlog", linthresh=1.0)
    ax[1].set_ylabel("compensation tau_c (N m)\n(symmetric log, linear within ±1)")
    ax[1].set_xlabel("time (s)")
    what = "active actuators (tau_p = 0 throughout)" if len(shown) == 8 else "all actuators"
    ax[1].set_title(f"Fig. 9 -- PD compensation torque, {what}, kp = 400 1/s$^2$", loc="left", fontsize=10)
    ax[1].grid(True, alpha=0.3)
    ax[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.savefig(out / "quadruped_tail_pitch.png", dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    mech = QuadrupedTail()
    t1, x1, why = forward(mech, 10)
    t2, x2, _ = forward(mech, 1)
    stopped = why and ("a leg leaves its workspace" if "out of reach" in why else "singular Jacobian")
    dp, dphi = forward_figure(out, t1, x1, t2, x2, stopped)
    n = min(len(t1), len(t2))
    diff = np.abs(x1[:n] - x2[:n]).max()
    print(f"forward: reached {t1[-1]:.3f} s (0.1 ms) / {t2[-1]:.3f} s (1 ms), max difference {diff:.2e} "
          f"(p {dp:.2e} m, phi {dphi:.2e} rad); stopped: {why}")

    e_ol, _, ol_survived = simulate_pitch_tracking(mech, 0.0, 1000, start_on_trajectory=True)
    e_cl, ctl, _ = simulate_pitch_tracking(mech, 400.0, 2000)
    tc = ctl.log[:ctl.logged, 14:28]
    pitch_figure(out, e_ol, e_cl, tc, ol_survived)
    active = tc[:, :8]
    print(f"pitch: open loop error {e_ol[-1]:.3f} at {len(e_ol)} ms; closed loop error {e_cl[-1]:.2e} at 2 s; "
          f"tau_c RMS over the 8 active actuators {np.sqrt(np.mean(active[:1000] ** 2)):.2f} (first s) -> "
          f"{np.sqrt(np.mean(active[1000:] ** 2)):.2f} N m (second s), |tau_p| <= {np.abs(tc[:, 8:]).max():.1e} N m")

if __name__ == "__main__":
    main()
