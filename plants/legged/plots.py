#!/usr/bin/env python3
"""Reproduce Shah, Saha & Dutt (2012): Figs. 7 and 11, section 5's Figs. 12-14 (biped) and 16-17 (quadruped).

Runs the closed loops through the real-time loop (sim driver, "legged" plant, 10 kHz, unpaced) with the
paper's gains kp = 49, kd = 14 -- the biped 12 s under feed-forward (eq. 31) and computed-torque
(eqs. 34-37) control and 1 s with the inverse-dynamics torques alone, the quadruped's trot 6 s under both
laws -- and writes

* ``fig07_operation_counts.png`` -- Fig. 7 (floating-base forward dynamics) and Table 1 as lines: operation
  counts against n, the paper's formulas as printed (its proposed ID and FD, McMillan and Orin's O(n) and
  O(n^3) FD, Featherstone's fixed-base ID and FD) beside ours counted by :mod:`rtctl.plants.legged.opcount`
  (the biped and quadruped, paper's modules and one link per module; fixed-base chains and their fitted lines).
  The extracted text of the paper has Fig. 7's caption only: the log-log axes and the n range are ours, and
  its Featherstone floating-base curve, whose formula is not printed, is not drawn;
* ``fig11_biped_gait_ik.png`` -- Fig. 11: the biped's six joint trajectories from the inverse kinematics of
  the Appendix B gait, first 4 s (the span of Figs. 13-14; the text gives Fig. 11's caption only), rad with
  degrees on the right axis;
* ``fig12_biped_without_control.png`` -- support-leg (module M1) joint angles, desired vs simulated;
* ``fig13_biped_trunk.png`` -- trunk centre of mass (x, z) and pitch, planned, FF, CT;
* ``fig14_biped_joints.png`` -- support-leg joint angles, desired, FF, CT (first 4 s);
* ``biped_ground_reactions.png`` -- vertical and horizontal ground reaction of each foot (CT);
* ``fig16_quadruped_trunk.png`` -- trunk centre of mass and Euler angles, planned, FF, CT;
* ``fig17_quadruped_joints.png`` -- front-left leg (module M1) joint angles, desired, FF, CT;
* ``quadruped_ground_reactions.png`` -- vertical ground reaction of each foot (CT);

* ``biped_paper_walk.png`` -- the paper's plan and feed-forward gains on the default ground
  (k = 1e6 N/m, d = 5000 N s/m): trunk height, pitch and vertical ground reaction of each foot, 12 s;
* ``quadruped_trot_paper.png`` -- the paper's pure trot (two feet down at a time, 1 s steps), the same
  pure trot with 0.3 s steps, and the config's trot with a four-foot phase (40 % of each 1 s step),
  computed torque: roll, pitch and height of the trunk;
* ``quadruped_trot_support_line.png`` -- why the paper's pure trot falls: the centre of mass's distance
  from the support line (measured, planned), the centre of pressure on it, the planned zero-moment point,
  and the departure from the plan against exp(sqrt(g / z_c) t);
* ``quadruped_trot_periods.png`` -- the pure trot's largest roll in 8 s against the step period;

and prints the bounds the tests assert. Figs. 7 and 11 need no simulation and are always drawn;
``--no-sim`` writes only them, ``--paper`` them and the last four.
Usage: python plants/legged/plots.py [--out DIR] [--paper | --no-sim]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rtctl.plants.legged.control import (QuadrupedGait, planned_zmp_offset, run_walk,  # noqa: E402
                                         support_line_offsets)

Z_C = 0.5                       # m, the quadruped's planned centre-of-mass height
OMEGA = np.sqrt(9.81 / Z_C)     # 1/s, the inverted pendulum's rate about the support line
FAST = {"period": 0.3, "stride": 0.09}  # the pure trot's step that walks (the same 0.3 m/s)


# FF and CT agree with the plan to ~1e-4 rad: the plan is a wide grey band, FF a solid line and CT a dashed
# line on top, so all three stay visible where they coincide
STYLE = {"FF": {"lw": 1.6, "color": "C0"}, "CT": {"lw": 1.0, "ls": "--", "color": "C1"},
         "simulated": {"lw": 1.2, "color": "C0"}}
PLAN = {"lw": 4.0, "color": "0.75", "solid_capstyle": "butt"}


def _finish(fig, path, title, axes, ncol=None):
    """Shared legend below the axes (never over a curve; each label once, from whichever panel draws it),
    title, save. ``ncol``: legend columns (default all labels in one row)."""
    legend = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=ncol or len(legend),
               fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def tracking_error(runs, names, t_max=None):
    """Largest |q - q_d| (rad) of each run over the plotted joints and time span."""
    cols = [j for _, j in names]
    out = {}
    for label, (tr, q, q_d) in runs.items():
        sel = np.ones(len(tr), bool) if t_max is None else tr <= t_max
        out[label] = float(np.abs(q[sel][:, cols] - q_d[sel][:, cols]).max())
    return out


def joint_figure(path, title, t, q_d, runs, names, t_max=None, show_error=False):
    """``runs``: label -> (t, joint angles, desired joint angles) drawn over the desired ``q_d`` at ``t``."""
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.4 * len(names) + 0.8), sharex=True,
                             layout="constrained")
    for ax, (name, j) in zip(axes, names):
        ax.plot(t, q_d[:, j], label="desired", **PLAN)
        for label, (tr, q, _) in runs.items():
            ax.plot(tr, q[:, j], label=label, **STYLE.get(label, {}))
        ax.set_ylabel(f"{name} (rad)")
        ax.grid(True, alpha=0.3)
        if t_max:
            ax.set_xlim(0, t_max)
    axes[-1].set_xlabel("time (s)")
    if show_error:
        err = tracking_error(runs, names, t_max)
        title += "\nmax |q - q_d|: " + ", ".join(f"{k} {v:.1e} rad" for k, v in err.items())
    _finish(fig, path, title, axes)


def trunk_figure(path, title, recs, rows):
    ref = recs["CT"]
    planned, _ = ref.planned()
    fig, axes = plt.subplots(len(rows), 1, figsize=(7, 2.2 * len(rows) + 0.8), sharex=True,
                             layout="constrained")
    for ax, (label, k, unit) in zip(axes, rows):
        ax.plot(ref.t, planned[:, k], label="planned", **PLAN)
        for name, rec in recs.items():
            ax.plot(rec.t, rec.q[:, k], label=name, **STYLE.get(name, {}))
        ax.set_ylabel(f"{label} ({unit})")
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time (s)")
    _finish(fig, path, title, axes)


def biped_grf_figure(path, ct, t_max=4.0):
    """Vertical and horizontal ground reaction of each foot (sum over its contact points), CT, first 4 s."""
    fig, axes = plt.subplots(2, 1, figsize=(7, 5.4), sharex=True, layout="constrained")
    for foot, idx in ct.robot.feet.items():
        axes[0].plot(ct.t, ct.grf[:, idx, 2].sum(axis=1), label=foot.replace("_", " "))
        axes[1].plot(ct.t, ct.grf[:, idx, 0].sum(axis=1), label=foot.replace("_", " "))
    axes[0].axhline(ct.robot.weight, color="k", ls=":", lw=1, label=f"weight ({ct.robot.weight:.1f} N)")
    axes[0].set_ylabel("vertical GRF (N)")
    axes[1].set_ylabel("horizontal GRF (N)")
    axes[1].set_xlabel("time (s)")
    axes[0].set_xlim(0, t_max)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    _finish(fig, path, f"Biped ground reaction forces (CT, first {t_max:g} s)", axes)


def quadruped_grf_figure(path, qct):
    """Vertical ground reaction of each foot (CT), one panel per foot on a common scale."""
    names = qct.robot.foot_names
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 1.6 * len(names) + 0.9), sharex=True, sharey=True,
                             layout="constrained")
    quarter, half = qct.robot.weight / len(names), qct.robot.weight / 2
    for c, (ax, name) in enumerate(zip(axes, names)):
        ax.plot(qct.t, qct.grf[:, c, 2], color=f"C{c}", lw=1.0)
        ax.axhline(quarter, color="k", ls=":", lw=1)
        ax.axhline(half, color="k", ls="-.", lw=0.8)
        ax.set_ylabel("F_z (N)")
        ax.set_title(name.replace("_", " "), loc="left", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].plot([], [], "k:", lw=1, label=f"weight / {len(names)} ({quarter:.1f} N, all feet down)")
    axes[0].plot([], [], "k-.", lw=0.8, label=f"weight / 2 ({half:.1f} N, trot pair)")
    axes[-1].set_xlabel("time (s)")
    _finish(fig, path, "Quadruped vertical ground reaction forces (CT)", axes)


def biped_paper_walk_figure(path, rec):
    """Trunk height, pitch and each foot's vertical ground reaction of one biped walk."""
    z_err = np.abs(rec.q[:, 1] - 0.96).max()
    pitch = np.abs(rec.q[:, 2]).max()
    fig, axes = plt.subplots(3, 1, figsize=(9.5, 7.4), sharex=True, layout="constrained")
    axes[0].plot(rec.t, rec.q[:, 1], color="C0", label="trunk centre of mass z_0")
    axes[0].axhline(0.96, color="0.6", ls="--", lw=1, label="planned z_c = 0.96 m")
    axes[0].set_ylabel("z_0 (m)")
    axes[1].plot(rec.t, rec.q[:, 2] * 1e3, color="C1", label="trunk pitch")
    axes[1].set_ylabel("pitch (mrad)")
    for k, (foot, idx) in enumerate(rec.robot.feet.items()):
        axes[2].plot(rec.t, rec.grf[:, idx, 2].sum(axis=1), lw=0.9, color=f"C{k + 2}", label=foot.replace("_", " "))
    axes[2].axhline(rec.robot.weight, color="k", ls=":", lw=1, label=f"weight ({rec.robot.weight:.1f} N)")
    axes[2].set_ylabel("vertical GRF (N)")
    axes[2].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axes[0].set_ylim(0.955, 0.965)
    fig.suptitle(f"Biped, paper's plan (B.1) and FF gains on k = 1e6 N/m, d = 5000 N s/m, {rec.t[-1]:.0f} s\n"
                 f"max |z_0 - 0.96| = {z_err * 1e3:.2f} mm, max |pitch| = {pitch * 1e3:.2f} mrad, "
                 f"x advanced {rec.q[-1, 0] - rec.q[0, 0]:.3f} m")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def trot_figure(path, runs):
    """``runs``: label -> walk record of the quadruped; roll, pitch and height of the trunk, with fall times
    (roll or pitch past 0.3 rad, or the trunk 10 cm off its height)."""
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 7.4), sharex=True, layout="constrained")
    notes = []
    for k, (label, rec) in enumerate(runs.items()):
        roll = np.abs(rec.q[:, 5])
        note = f"{label.split(' (')[0]}: "
        if (roll > 1.0).any():
            note += (f"roll past 0.3 rad at {rec.t[np.argmax(roll > 0.3)]:.2f} s, rolls over (past 1 rad) at "
                     f"{rec.t[np.argmax(roll > 1.0)]:.2f} s")
        else:
            note += f"max |roll| {roll.max():.3f} rad"
        notes.append(note)
        sel = slice(None)
        axes[0].plot(rec.t[sel], rec.q[sel, 5], color=f"C{k}", label=label)
        axes[1].plot(rec.t[sel], rec.q[sel, 4], color=f"C{k}", label=label)
        axes[2].plot(rec.t[sel], rec.q[sel, 2], color=f"C{k}", label=label)
    for ax, name in zip(axes, ("roll (rad)", "pitch (rad)", "trunk z (m)")):
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylim(-0.5, 0.5)
    axes[1].set_ylim(-0.5, 0.5)
    axes[2].set_ylim(0.35, 0.6)
    axes[-1].set_xlabel("time (s)")
    _finish(fig, path, "Quadruped trot, computed torque (kp = 49, kd = 14), k = 1e6 N/m, d = 5000 N s/m\n"
            + "\n".join(notes), axes)


def support_line_figure(path, rec, t_max=2.0):
    """The paper's pure trot against its support line: distances from it and the departure's growth."""
    sel = rec.t <= t_max
    t = rec.t[sel]
    off = {k: v[sel] for k, v in support_line_offsets(rec).items()}
    gait = QuadrupedGait(double_support=0.0)
    tz = np.concatenate([k + np.linspace(0.002, 0.998, 100) for k in range(int(np.ceil(t_max)))])
    zmp = np.array([planned_zmp_offset(gait, x) for x in tz])
    fig, axes = plt.subplots(2, 1, figsize=(10.0, 7.0), sharex=True, layout="constrained")
    ax = axes[0]
    ax.plot(t, 100 * off["com_planned"], color="0.6", lw=3, label="centre of mass, planned")
    ax.plot(t, 100 * off["com"], color="C0", label="centre of mass, simulated")
    ax.plot(tz, 100 * zmp, color="C2", ls="--", lw=1, label="zero-moment point, planned")
    ax.plot(t, 100 * off["cop"], color="C3", lw=2.5, label="centre of pressure (two feet down)")
    ax.set_ylabel("distance from support line (cm)")
    ax = axes[1]
    departure = np.abs(off["com"] - off["com_planned"])
    ax.semilogy(t, 100 * departure, color="C0", label="|simulated - planned| centre-of-mass distance")
    window = (t >= 0.5) & (t <= 0.7)
    rate, c0 = np.polyfit(t[window], np.log(departure[window]), 1)
    ref = (t > 0.1) & (t < 0.8)
    ax.semilogy(t[ref], 100 * np.exp(c0 + OMEGA * (t[ref] - 0.6) + rate * 0.6), color="k", ls=":",
                label=f"exp(sqrt(g / z_c) t), sqrt(g / z_c) = {OMEGA:.2f} 1/s")
    ax.set_ylabel("departure (cm)")
    ax.set_xlabel("time (s)")
    for a in axes:
        a.grid(True, alpha=0.3)
        a.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axes[0].set_ylim(-8, 8)
    axes[1].set_ylim(1e-3, 20)
    roll = abs(rec.q[np.searchsorted(rec.t, 0.7), 5])
    fig.suptitle("Paper's pure trot (1 s steps, CT): two point feet give no moment about their line\n"
                 f"departure grows at {rate:.2f} 1/s over 0.5-0.7 s; roll {roll:.2f} rad at 0.7 s; "
                 "the swing feet then touch down early", fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return rate


def period_figure(path, periods=(0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0), duration=8.0):
    """The pure trot's largest |roll| and |pitch| in ``duration`` s against the step period (stride 0.3 m/s x T)."""
    rows = []
    for period in periods:
        rec = run_walk("spatial_quadruped", "ct", duration, double_support=0.0, period=period, stride=0.3 * period)
        rows.append((period, np.abs(rec.q[:, 5]).max(), np.abs(rec.q[:, 4]).max()))
    rows = np.array(rows)
    fig, ax = plt.subplots(figsize=(8.5, 4.8), layout="constrained")
    ax.semilogy(rows[:, 0], rows[:, 1], "o-", color="C0", label="max |roll|")
    ax.semilogy(rows[:, 0], rows[:, 2], "s--", color="C1", label="max |pitch|")
    ax.axhline(0.3, color="k", ls=":", lw=1, label="0.3 rad")
    ax.set_xlabel("step period T (s)")
    ax.set_ylabel(f"largest trunk angle in {duration:g} s (rad)")
    top = ax.secondary_xaxis("top", functions=(lambda x: np.exp(OMEGA * x),
                                               lambda y: np.log(np.maximum(y, 1e-9)) / OMEGA))
    top.set_ticks([2, 5, 10, 20, 50, 100])
    top.set_xlabel("growth per step exp(sqrt(g / z_c) T)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle("Pure trot (no four-foot phase), computed torque, 0.3 m/s, k = 1e6 N/m, d = 5000 N s/m", fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return rows


N_AXIS = np.geomspace(1, 50, 60)   # n of Fig. 7's formula lines (log axis)


def mcmillan_orin_fd(n):
    """McMillan and Orin's floating-base forward dynamics as printed in Table 1(a): label -> (M, A) at ``n``."""
    n = np.asarray(n, float)
    return {"O(n)": (224 * n + 158, 205 * n + 131),
            "O(n^3)": (n ** 3 / 6 + 17.5 * n ** 2 + (175 + 1 / 3) * n + 137,
                       n ** 3 / 6 + 13 * n ** 2 + (160 + 5 / 6) * n + 91)}


def opcount_summary(table):
    """The numbers Fig. 7's title quotes, from :func:`~rtctl.plants.legged.opcount.count_table`'s ``table``:
    ``{"fit": (M slope, M intercept, A slope, A intercept) of the counted fixed-base ID, "fit_forward": the same
    for FD, (robot, partition, quantity): (ours M, ours A, n, paper M, paper A)}`` (floating-base ID and FD)."""
    from rtctl.plants.legged.opcount import paper_counts
    out = {key: tuple(int(round(x)) for x in table[key]) for key in ("fit", "fit_forward")}
    rows = {"floating_inverse": "floating_inverse", "forward": "floating_forward"}
    for (name, partition, quantity), (mul, add, _, n) in table["legged"].items():
        if quantity in rows:
            out[(name, partition, quantity)] = (mul, add, n, *paper_counts(rows[quantity], n))
    return out


def _formula(slope, intercept):
    return f"{slope}n {'+' if intercept >= 0 else '-'} {abs(intercept)}"


def opcount_figure(path, table):
    """Fig. 7 (and Table 1 as lines): operation counts against n, the paper's formulas as printed (lines) and
    ours as counted (markers; the fixed-base chains' fitted lines dotted). Columns: floating-base forward
    dynamics (Fig. 7; the paper's Featherstone floating-base curve has no printed formula and is not drawn),
    floating-base inverse dynamics (Table 1(a)), fixed base (Table 1(b)); rows: multiplications/divisions,
    additions/subtractions. Returns :func:`opcount_summary`."""
    from rtctl.plants.legged.opcount import PAPER_TABLE1
    summary = opcount_summary(table)
    fig, axes = plt.subplots(2, 3, figsize=(13.5, 8.8), sharex=True, layout="constrained")
    fd, id_ = {"color": "C0"}, {"color": "C2"}
    robots = [(k, v) for k, v in summary.items() if isinstance(k, tuple)]
    for row in range(2):              # 0: M, 1: A
        for col, (quantity, ours, style, what) in enumerate((("floating_forward", "forward", fd, "FD"),
                                                             ("floating_inverse", "floating_inverse", id_, "ID"))):
            ax = axes[row, col]
            slope, intercept = PAPER_TABLE1[quantity][row]
            ax.plot(N_AXIS, slope * N_AXIS + intercept, lw=1.4, label=f"paper: proposed {what} (Table 1)", **style)
            if what == "FD":
                for (label, mo), ls in zip(mcmillan_orin_fd(N_AXIS).items(), ("--", "-.")):
                    ax.plot(N_AXIS, mo[row], color="0.45", ls=ls, lw=1.2, label=f"paper: McMillan & Orin {label} FD")
            for (name, partition, q), (mul, add, n, _, _) in robots:
                if q != ours:
                    continue
                modules = partition == "modules"
                ax.plot([n], [(mul, add)[row]], "s" if modules else "o", ms=7, mew=1.5,
                        mfc=style["color"] if modules else "none", mec=style["color"], ls="none",
                        label=f"ours: {what} counted, " + ("paper's modules" if modules else "one link per module"))
        ax = axes[row, 2]
        for key, quantity, style, what in (("_forward", "fixed_forward", fd, "FD"), ("", "fixed_inverse", id_, "ID")):
            slope, intercept = PAPER_TABLE1[quantity][row]
            ax.plot(N_AXIS, slope * N_AXIS + intercept, lw=1.4, label=f"paper: proposed {what} (Table 1)", **style)
            slope, intercept = PAPER_TABLE1[quantity + "_featherstone"][row]
            ax.plot(N_AXIS, slope * N_AXIS + intercept, lw=1.2, ls="--", color="C3" if what == "FD" else "C4",
                    label=f"paper: Featherstone {what} (Table 1(b))")
            chains = table["chains" + key]
            ns = np.array(list(chains))
            ax.plot(ns, [chains[n][row] for n in ns], "o", ms=7, mew=1.5, mfc="none", mec=style["color"], ls="none",
                    label=f"ours: {what} counted, one link per module")
            fit = summary["fit" + key][2 * row:2 * row + 2]
            ax.plot(N_AXIS, fit[0] * N_AXIS + fit[1], ls=":", lw=1.6, label=f"ours: {what} fitted to the counts",
                    **style)
    unit = ("multiplications / divisions M", "additions / subtractions A")
    panels = ("floating base, FD (Fig. 7)", "floating base, ID (Table 1(a))", "fixed base, chain (Table 1(b))")
    for row in range(2):
        for col, panel in enumerate(panels):
            ax = axes[row, col]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(1, 50)
            ax.set_xticks([1, 2, 5, 10, 20, 50], ["1", "2", "5", "10", "20", "50"])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{panel}: {unit[row].split(' ')[0]}", loc="left", fontsize=9)
            if col == 0:
                ax.set_ylabel(f"{unit[row]} per evaluation")
            if row == 1:
                ax.set_xlabel("n, joint DOFs outside the base (links)")
        axes[row, 1].set_ylim(axes[row, 0].get_ylim())    # the floating-base FD and ID panels on one scale
    b, q = ("planar_biped", "modules", "forward"), ("spatial_quadruped", "modules", "forward")
    bl, ql = ("planar_biped", "links", "forward"), ("spatial_quadruped", "links", "forward")
    fm, fi = summary["fit_forward"], summary["fit"]
    title = ("Fig. 7 -- operation counts against n: the paper's Table 1 formulas (lines) beside ours counted "
             "(markers)\n"
             f"floating-base FD: biped (n = {summary[b][2]}) {summary[b][0]} M (paper {summary[b][3]}), quadruped "
             f"(n = {summary[q][2]}) {summary[q][0]} M (paper {summary[q][3]}); one link per module "
             f"{summary[bl][0]} / {summary[ql][0]} M\n"
             f"fixed-base FD ({_formula(*fm[:2])}) M ({_formula(*fm[2:])}) A (paper {_formula(209, -198)} / "
             f"{_formula(201, -185)}); ID ({_formula(*fi[:2])}) M ({_formula(*fi[2:])}) A (paper "
             f"{_formula(94, -81)} / {_formula(82, -75)})")
    _finish(fig, path, title, axes.ravel(), ncol=4)
    return summary


def gait_joint_trajectories(gait, t):
    """Actuated joint angles (rad) the gait's inverse kinematics gives at the times ``t``: (len(t), n)."""
    nb = gait.robot.n_base
    return np.array([gait.state(float(x))[0][nb:] for x in t])


def angle_ranges_deg(q):
    """(min, max) of each column of ``q`` (rad), in degrees."""
    q = np.degrees(np.asarray(q, float))
    return [(float(lo), float(hi)) for lo, hi in zip(q.min(axis=0), q.max(axis=0))]


def gait_ik_figure(path, gait, t_max=4.0):
    """Fig. 11: the biped's actuated joint trajectories from the inverse kinematics of the Appendix B gait
    (left and right leg, rad with degrees on the right axis; grey bands: left leg in stance). Returns the
    joint ranges (deg) the title quotes, hip, knee, ankle of the left leg then the right."""
    t = np.linspace(0.0, t_max, int(round(t_max * 200)) + 1)
    q = gait_joint_trajectories(gait, t)
    ranges = angle_ranges_deg(q)
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 7.6), sharex=True, layout="constrained")
    for j, (ax, name) in enumerate(zip(axes, ("hip theta_1", "knee theta_2", "ankle theta_3"))):
        for k in range(int(np.ceil(t_max / gait.period))):
            if gait.stance(k * gait.period) == 0:
                ax.axvspan(k * gait.period, min((k + 1) * gait.period, t_max), color="0.92", lw=0)
        ax.plot(t, q[:, j], color="C0", lw=1.6, label="left leg (module M1)")
        ax.plot(t, q[:, 3 + j], color="C1", lw=1.2, ls="--", label="right leg (module M2)")
        ax.set_ylabel(f"{name} (rad)")
        ax.secondary_yaxis("right", functions=(np.degrees, np.radians)).set_ylabel("(deg)")
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, t_max)
    axes[0].fill_between([], [], color="0.92", label="left leg in stance")
    axes[-1].set_xlabel("time (s)")
    span = "left leg: " + ", ".join(f"{n} {lo:.1f} to {hi:.1f} deg" for n, (lo, hi) in
                                    zip(("hip", "knee", "ankle"), ranges[:3]))
    _finish(fig, path, f"Fig. 11 -- biped joint trajectories from the gait's inverse kinematics, first {t_max:g} s\n"
            f"Appendix B gait: T = {gait.period:g} s, l_s = {gait.stride:g} m, h_f = {gait.foot_height:g} m, z_c = "
            f"{gait.com_height:g} m\n{span}", axes)
    return ranges


def static_figures(out: Path) -> None:
    """Figs. 7 and 11: no simulation."""
    from rtctl.plants.legged.gait import BipedGait
    from rtctl.plants.legged.opcount import count_table
    summary = opcount_figure(out / "fig07_operation_counts.png", count_table())
    fm, fi = summary["fit_forward"], summary["fit"]
    print(f"Fig. 7: fixed-base FD ({_formula(*fm[:2])}) M ({_formula(*fm[2:])}) A, ID ({_formula(*fi[:2])}) M "
          f"({_formula(*fi[2:])}) A; " + "; ".join(
              f"{k[0]} {k[2]} {k[1]}: {v[0]} M {v[1]} A (paper {v[3]} / {v[4]})"
              for k, v in summary.items() if isinstance(k, tuple)))
    ranges = gait_ik_figure(out / "fig11_biped_gait_ik.png", BipedGait())
    print("Fig. 11: " + ", ".join(f"{n} {lo:.1f} to {hi:.1f} deg" for n, (lo, hi) in
                                  zip(("hip", "knee", "ankle"), ranges[:3])))


def paper_figures(out: Path) -> None:
    walk = run_walk("planar_biped", "ff", 12.0)
    biped_paper_walk_figure(out / "biped_paper_walk.png", walk)
    pure = run_walk("spatial_quadruped", "ct", 8.0, double_support=0.0, record_every=5e-3)
    trots = {"pure trot, 1 s steps (paper)": pure,
             "pure trot, 0.3 s steps": run_walk("spatial_quadruped", "ct", 8.0, double_support=0.0, **FAST),
             "40 % four-foot phase, 1 s steps (config)": run_walk("spatial_quadruped", "ct", 8.0)}
    trot_figure(out / "quadruped_trot_paper.png", trots)
    rate = support_line_figure(out / "quadruped_trot_support_line.png", pure)
    rows = period_figure(out / "quadruped_trot_periods.png")
    roll = np.abs(pure.q[:, 5])
    print(f"pure trot, 1 s steps: roll past 0.3 rad at {pure.t[np.argmax(roll > 0.3)]:.2f} s, past 1 rad at "
          f"{pure.t[np.argmax(roll > 1.0)] if (roll > 1.0).any() else float('nan'):.2f} s; departure from the "
          f"support line grows at {rate:.2f} 1/s (sqrt(g / z_c) = {OMEGA:.2f})")
    for name, rec in trots.items():
        planned, _ = rec.planned()
        print(f"{name}: max |roll| {np.abs(rec.q[:, 5]).max():.3f} rad, |y| {np.abs(rec.q[:, 1]).max():.3f} m, "
              f"progress {(rec.q[-1, 0] - rec.q[0, 0]) / (planned[-1, 0] - planned[0, 0]):.3f} of the plan")
    for period, roll_max, pitch_max in rows:
        print(f"pure trot T = {period:g} s: max |roll| {roll_max:.3f} rad, max |pitch| {pitch_max:.3f} rad")
    print(f"biped, paper's plan on the default ground: |z_0 - 0.96| <= {np.abs(walk.q[:, 1] - 0.96).max() * 1e3:.2f} "
          f"mm, |pitch| <= {np.abs(walk.q[:, 2]).max() * 1e3:.2f} mrad")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="legged_figures", help="output directory for the PNGs")
    ap.add_argument("--paper", action="store_true", help="only the paper-fidelity figures (default ground, trot)")
    ap.add_argument("--no-sim", action="store_true", help="only Figs. 7 and 11 (operation counts, gait IK)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    static_figures(out)
    if args.no_sim:
        print(f"figures written to {out}/")
        return 0
    paper_figures(out)
    if args.paper:
        print(f"figures written to {out}/")
        return 0

    biped = {"FF": run_walk("planar_biped", "ff", 12.0), "CT": run_walk("planar_biped", "ct", 12.0)}
    open_loop = run_walk("planar_biped", "ff", 1.0, kp=0.0, kd=0.0)
    quad = {"FF": run_walk("spatial_quadruped", "ff", 6.0), "CT": run_walk("spatial_quadruped", "ct", 6.0)}

    leg = [("hip", 0), ("knee", 1), ("ankle", 2)]
    ok = np.isfinite(open_loop.q).all(axis=1)
    joint_figure(out / "fig12_biped_without_control.png", "Fig. 12 -- support leg (M1) without control",
                 open_loop.t, open_loop.q_d,
                 {"simulated": (open_loop.t[ok], open_loop.q[ok, 3:], open_loop.q_d[ok])}, leg)
    trunk_figure(out / "fig13_biped_trunk.png", "Fig. 13 -- biped trunk (12 s)", biped,
                 [("x_0", 0, "m"), ("z_0", 1, "m"), ("pitch", 2, "rad")])
    ct = biped["CT"]
    joint_figure(out / "fig14_biped_joints.png", "Fig. 14 -- support leg (M1) with control (first 4 s)", ct.t, ct.q_d,
                 {name: (rec.t, rec.q[:, 3:], rec.q_d) for name, rec in biped.items()}, leg, t_max=4.0,
                 show_error=True)

    biped_grf_figure(out / "biped_ground_reactions.png", ct)

    trunk_figure(out / "fig16_quadruped_trunk.png", "Fig. 16 -- quadruped trunk (6 s trot)", quad,
                 [("x", 0, "m"), ("y", 1, "m"), ("z", 2, "m"), ("yaw", 3, "rad"), ("pitch", 4, "rad"),
                  ("roll", 5, "rad")])
    qct = quad["CT"]
    joint_figure(out / "fig17_quadruped_joints.png", "Fig. 17 -- front-left leg (M1) with control (6 s trot)",
                 qct.t, qct.q_d, {name: (rec.t, rec.q[:, 6:], rec.q_d) for name, rec in quad.items()},
                 [("hip roll", 0), ("hip pitch", 1), ("knee", 2)], show_error=True)
    quadruped_grf_figure(out / "quadruped_ground_reactions.png", qct)

    for name, rec in biped.items():
        planned, _ = rec.planned()
        print(f"biped {name}: |z_0 - 0.96| <= {np.abs(rec.q[:, 1] - 0.96).max() * 1e3:.1f} mm, "
              f"|pitch| <= {np.abs(rec.q[:, 2]).max():.4f} rad, x(12 s) - x(0) = {rec.q[-1, 0] - rec.q[0, 0]:.3f} m "
              f"(planned {planned[-1, 0] - planned[0, 0]:.3f} m), joint error <= "
              f"{np.abs(rec.q[:, 3:] - planned[:, 3:]).max():.1e} rad")
    print(f"biped FF vs CT joint angles: max difference {np.abs(biped['FF'].q[:, 3:] - ct.q[:, 3:]).max():.1e} rad")
    planned, _ = open_loop.planned()
    pitch_err = np.abs(open_loop.q[:, 2] - planned[:, 2])
    over = pitch_err > 0.05
    print("biped without control: pitch error " + (f"exceeds 0.05 rad at t = {open_loop.t[np.argmax(over)]:.2f} s"
                                                   if over.any() else "stays within 0.05 rad"))
    for name, rec in quad.items():
        print(f"quadruped {name}: |z - 0.5| <= {np.abs(rec.q[:, 2] - 0.5).max() * 1e3:.1f} mm, "
              f"|yaw, pitch, roll| <= {np.abs(rec.q[:, 3:6]).max(axis=0).round(4).tolist()} rad, "
              f"x(6 s) - x(0) = {rec.q[-1, 0] - rec.q[0, 0]:.3f} m")
    print(f"figures written to {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
