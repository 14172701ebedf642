"""Kalani et al. (2018) chewing CPG: incisal paths (sagittal, frontal), perturbation recovery and feedback; writes PNGs.

    python -m rtctl.plants.jaw.plots_cpg --out DIR

Runs the coupled-Hopf CPG of :mod:`rtctl.loops.cpg` (no robot) and writes

* ``DIR/cpg_incisal_paths.png``: one steady cycle of each shipped pattern in the sagittal (anterior y,
  vertical z) and frontal (lateral x, vertical z) planes, opening strokes solid, closing strokes dashed,
  with the measured loop area and opening-closing separation in the titles;
* ``DIR/cpg_perturbation_recovery.png``: the vertical output after an amplitude and a phase kick against
  the unperturbed CPG, and the decay of the amplitude and phase-difference errors against their exact
  solutions (H3 and tan(d/2) = tan(d0/2) exp(-3 k t));
* ``DIR/cpg_feedback.png``: a bite-force pulse through the phase feedback (H2): the phase lag it leaves
  and the cycle held before occlusion while the force lasts.

Each function returns the path it wrote and the figures it measured.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from rtctl.loops.cpg import ChewingCPG
from rtctl.loops.cpg.patterns import REFERENCE_CYCLES

__all__ = ["main", "plot_feedback", "plot_incisal_paths", "plot_perturbation_recovery", "sagittal_loop_measures"]

DT = 1e-3
COLORS = {"normal": "tab:blue", "hard_food": "tab:red", "lateral_grinding": "tab:green"}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def steady_cycle(name: str, samples: int = 4000) -> np.ndarray:
    """One steady cycle (samples, 3) of the running CPG's incisal point (m), from occlusion (phase 0)."""
    cpg = ChewingCPG(name, start_at_rest=False)
    dt = 1.0 / (cpg.target_frequency * samples)
    out = np.empty((samples, 3))
    for i in range(samples):
        out[i] = cpg.p
        cpg.step(dt)
    return out


def sagittal_loop_measures(cycle: np.ndarray) -> dict:
    """Opening depth, anterior-posterior range, enclosed sagittal area (shoelace) and the largest
    separation of the opening and closing strokes at equal height (5-95 % of the opening), in m and m^2."""
    y, z = cycle[:, 1], cycle[:, 2]
    i_open = int(np.argmax(-z))
    down, up = np.arange(i_open + 1), np.arange(i_open, len(z))
    depth = float(-z.min())
    levels = -depth * np.linspace(0.05, 0.95, 181)
    y_open = np.interp(-levels, -z[down], y[down])
    y_close = np.interp(levels, z[up], y[up])
    area = 0.5 * float(np.sum(y * np.roll(z, -1) - np.roll(y, -1) * z))
    return {"opening_m": depth, "ap_range_m": float(np.ptp(y)), "lateral_m": float(np.ptp(cycle[:, 0])),
            "area_m2": abs(area), "max_separation_m": float(np.max(y_open - y_close)),
            "height_of_max_separation_m": float(-levels[int(np.argmax(y_open - y_close))])}


def plot_incisal_paths(out_dir) -> tuple[Path, dict]:
    plt = _pyplot()
    fig, (ax_s, ax_f) = plt.subplots(1, 2, figsize=(11, 5.6), layout="constrained")
    measures = {}
    for name in REFERENCE_CYCLES:
        cyc = steady_cycle(name) * 1e3
        m = sagittal_loop_measures(cyc * 1e-3)
        measures[name] = m
        i_open = int(np.argmax(-cyc[:, 2]))
        color = COLORS[name]
        for ax, a in ((ax_s, 1), (ax_f, 0)):
            ax.plot(cyc[:i_open + 1, a], cyc[:i_open + 1, 2], "-", color=color, lw=1.8)
            ax.plot(cyc[i_open:, a], cyc[i_open:, 2], "--", color=color, lw=1.8)
            k = i_open // 2
            ax.annotate("", xy=(cyc[k + 40, a], cyc[k + 40, 2]), xytext=(cyc[k, a], cyc[k, 2]),
                        arrowprops={"arrowstyle": "->", "color": color, "lw": 1.5})
        ax_s.plot([], [], "-", color=color, label=f"{name}: {m['opening_m'] * 1e3:.1f} mm open, loop "
                                                  f"{m['max_separation_m'] * 1e3:.2f} mm, {m['area_m2'] * 1e6:.1f} mm$^2$")
    ax_s.plot([], [], "-", color="0.3", label="solid: opening stroke")
    ax_s.plot([], [], "--", color="0.3", label="dashed: closing stroke")
    n = measures["normal"]
    ax_s.set_title(f"sagittal plane (normal: opening path {n['max_separation_m'] * 1e3:.2f} mm anterior of closing "
                   f"at {n['height_of_max_separation_m'] * 1e3:.1f} mm)", fontsize=10)
    ax_s.set_xlabel("anterior-posterior y (mm, anterior +)")
    ax_f.set_title(f"frontal plane (normal: lateral excursion {n['lateral_m'] * 1e3:.1f} mm to the working side)",
                   fontsize=10)
    ax_f.set_xlabel("lateral x (mm, working side +)")
    ax_s.set_xlim(-8.0, 3.0)
    ax_f.set_xlim(-2.0, 10.0)
    for ax in (ax_s, ax_f):
        ax.set_ylim(-21.0, 1.0)
        ax.set_ylabel("vertical z (mm, up +; occlusion at 0)")
        ax.set_aspect("equal", adjustable="box")
        ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncol=2, fontsize=9)
    fig.suptitle("chewing CPG (coupled Hopf oscillators, learned Fourier shape): incisal point, one steady cycle")
    path = Path(out_dir) / "cpg_incisal_paths.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, measures


def plot_perturbation_recovery(out_dir) -> tuple[Path, dict]:
    plt = _pyplot()
    kicked, free = ChewingCPG("normal", start_at_rest=False), ChewingCPG("normal", start_at_rest=False)
    gamma, k = kicked.oscillator_parameters["convergence"], kicked.oscillator_parameters["coupling"]
    r0, d0, t_kick, n = 0.5, 1.0, 1.0, 4000
    t = DT * np.arange(1, n + 1)
    z_kicked, z_free, radius, diff = (np.empty(n) for _ in range(4))
    for i in range(n):
        if i == int(t_kick / DT):
            kicked.perturb(phase=(0.0, 0.0, d0), radius=(1.0, 1.0, r0))
        kicked.step(DT)
        free.step(DT)
        z_kicked[i], z_free[i] = kicked.p[2], free.p[2]
        radius[i] = kicked.radii[2]
        diff[i] = kicked.phases[2] - kicked.phases[0]
    after = t > t_kick
    ta = t[after] - t_kick
    r_exact = 1.0 / np.sqrt(1.0 + (1.0 / r0 ** 2 - 1.0) * np.exp(-2.0 * gamma * ta))
    d_exact = 2.0 * np.arctan(math.tan(d0 / 2) * np.exp(-3.0 * k * ta))
    rt = 1.0 + 0.01 * (r0 - 1.0)
    t_r = -math.log((1.0 / rt ** 2 - 1.0) / (1.0 / r0 ** 2 - 1.0)) / (2.0 * gamma)
    t_d = math.log(math.tan(d0 / 2) / math.tan(0.01 * d0 / 2)) / (3.0 * k)
    cycle = 1.0 / kicked.target_frequency
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(9, 7.5), layout="constrained", sharex=True)
    ax0.plot(t, z_free * 1e3, color="0.6", lw=2.5, label="unperturbed CPG")
    ax0.plot(t, z_kicked * 1e3, color="tab:blue", lw=1.2,
             label=f"kicked at t = {t_kick:.1f} s: vertical amplitude r = {r0}, phase +{d0} rad")
    ax0.axvline(t_kick, color="k", lw=0.8, ls=":")
    ax0.set_ylabel("vertical incisal z (mm)")
    ax0.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9)
    fig.suptitle("recovery onto the limit cycle; the rhythm keeps d0/3 of the phase kick (neutral common phase)",
                 fontsize=11)
    ax1.semilogy(t[after], np.abs(radius[after] - 1.0) / abs(r0 - 1.0), color="tab:red", lw=2.5, alpha=0.5,
                 label="|r - 1| / |r0 - 1|, CPG")
    ax1.semilogy(t[after], np.abs(r_exact - 1.0) / abs(r0 - 1.0), "k--", lw=0.9, label="exact (H3), rate 2 gamma")
    ax1.semilogy(t[after], np.abs(diff[after]) / d0, color="tab:green", lw=2.5, alpha=0.5,
                 label="|theta_z - theta_x| / d0, CPG")
    ax1.semilogy(t[after], d_exact / d0, "k:", lw=0.9, label="exact tan(d/2) = tan(d0/2) exp(-3 k t)")
    ax1.axhline(0.01, color="0.4", lw=0.8)
    for tt, c in ((t_r, "tab:red"), (t_d, "tab:green")):
        ax1.axvline(t_kick + tt, color=c, lw=0.8, ls="-.")
    ax1.set_ylim(1e-6, 2.0)
    ax1.set_xlabel("time (s)")
    ax1.set_ylabel("error / initial error")
    ax1.legend(loc="upper right", fontsize=9)
    ax1.set_title(f"1 % reached after {t_r:.3f} s = {t_r / cycle:.2f} cycles (amplitude, gamma = {gamma:g}/s) and "
                  f"{t_d:.3f} s = {t_d / cycle:.2f} cycles (phase, k = {k:g}/s)", fontsize=10)
    path = Path(out_dir) / "cpg_perturbation_recovery.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, {"amplitude_1pct_s": t_r, "phase_1pct_s": t_d, "cycle_s": cycle}


def plot_feedback(out_dir, gain: float = 0.05, force: float = 40.0) -> tuple[Path, dict]:
    """A ``force`` N bite-force pulse (0.5 s) with ``gain`` rad/s per N against the unfed CPG."""
    plt = _pyplot()
    fed = ChewingCPG("normal", start_at_rest=False, feedback_gain=gain)
    free = ChewingCPG("normal", start_at_rest=False)
    n, on, off = 4000, 1000, 1500
    t = DT * np.arange(n)
    z_fed, z_free, u, lag = (np.empty(n) for _ in range(4))
    for i in range(n):
        fed.set_feedback(force if on <= i < off else 0.0)
        fed.step(DT)
        free.step(DT)
        z_fed[i], z_free[i], u[i] = fed.p[2], free.p[2], fed.feedback
        lag[i] = math.remainder(free.phase - fed.phase, 2 * math.pi)
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(9, 6.5), layout="constrained", sharex=True)
    ax0.plot(t, z_free * 1e3, color="0.6", lw=2.5, label="no feedback")
    ax0.plot(t, z_fed * 1e3, color="tab:blue", lw=1.2, label=f"bite force {force:g} N x gain {gain:g} rad/s/N")
    ax0.axvspan(on * DT, off * DT, color="tab:orange", alpha=0.15, label="force applied")
    ax0.set_ylabel("vertical incisal z (mm)")
    ax0.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=9)
    fig.suptitle("phase feedback (H2): the cycle lingers near occlusion while the patient bites", fontsize=11)
    ax1.plot(t, lag, color="tab:purple", label="phase lag behind the unfed CPG (rad)")
    ax1.plot(t, u * gain, color="tab:orange", label="sigma u, filtered feedback (rad/s)")
    ax1.set_xlabel("time (s)")
    ax1.set_ylabel("rad, rad/s")
    ax1.legend(loc="center right", fontsize=9)
    ax1.set_title(f"lag left by the pulse: {lag[-1]:.3f} rad = {lag[-1] / (2 * math.pi * free.target_frequency) * 1e3:.0f} ms "
                  f"of the {1e3 / free.target_frequency:.0f} ms cycle", fontsize=10)
    path = Path(out_dir) / "cpg_feedback.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, {"lag_rad": float(lag[-1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="output directory")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path, measures = plot_incisal_paths(out)
    print(path)
    for name, m in measures.items():
        print(f"  {name:<17} opening {m['opening_m'] * 1e3:5.2f} mm  AP range {m['ap_range_m'] * 1e3:4.2f} mm  "
              f"lateral {m['lateral_m'] * 1e3:4.2f} mm  sagittal area {m['area_m2'] * 1e6:5.2f} mm^2  "
              f"opening-closing separation {m['max_separation_m'] * 1e3:4.2f} mm")
    path, rec = plot_perturbation_recovery(out)
    print(path)
    print(f"  1 % recovery: amplitude {rec['amplitude_1pct_s']:.3f} s, phase {rec['phase_1pct_s']:.3f} s "
          f"(cycle {rec['cycle_s']:.3f} s)")
    path, fb = plot_feedback(out)
    print(path)
    print(f"  lag after a 40 N, 0.5 s pulse: {fb['lag_rad']:.3f} rad")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
