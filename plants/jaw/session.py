"""A jaw-rehabilitation session: run a ``jaw_cpg`` config through the loop, record it, plot it, summarise it.

``rtctl jaw-session CONFIG --out DIR`` builds the loop from the config (the
jaw robot, the chewing CPG, a controller, the simulated two-platform plant,
the ``[[schedule]]`` of parameter changes), runs it unpaced (same control
time, no waiting), records every cycle and writes

* ``legs.png`` -- desired vs measured leg lengths, the leg forces (applied,
  after the safety clamp) and the tracking error;
* ``incisal.png`` -- the incisal path in three projections (frontal x-z,
  sagittal y-z, horizontal x-y), commanded (CPG) and actual (from the
  plant's platform pose), before and after each scheduled change;
* ``session.npz`` -- the recorded arrays;

and a table of tracking error and leg force per phase (before a change, the
2 s after it, the rest), the numbers quoted in the closing note of issue 8.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rtctl.drivers.sim import SimDriver
from rtctl.plants.jaw.plant import JawPlant
from rtctl.rt.hooks import LoopSink

TRANSITION_WINDOW = 2.0  # s after a scheduled change counted as its transition


class SessionRecorder(LoopSink):
    """Per-cycle recording into preallocated arrays (the loop's sink slot; forwards to a telemetry sink)."""

    def __init__(self, loop, n_cycles: int, inner=None):
        self.inner = inner
        n = loop.controller.n
        self.q_index, self.v_index = loop.controller.q_index, loop.controller.v_index
        self.t = np.zeros(n_cycles)
        self.q, self.q_d, self.effort = np.zeros((n_cycles, n)), np.zeros((n_cycles, n)), np.zeros((n_cycles, n))
        self.incisal_d = np.zeros((n_cycles, 3))
        self.pose = np.zeros((n_cycles, 6))
        self.frequency = np.zeros(n_cycles)
        self.tripped = np.zeros(n_cycles, dtype=bool)
        self.k = 0
        self.events: list = []
        plant = loop.driver.plant if isinstance(loop.driver, SimDriver) else None
        self._pose_src = plant.x if isinstance(plant, JawPlant) else None

    def sample(self, loop, t: float) -> None:
        k = self.k
        if k < self.t.shape[0]:
            self.t[k] = t
            self.q[k] = loop.state.q[self.q_index]
            self.q_d[k] = loop.q_d
            self.effort[k] = loop.command.effort[self.v_index]
            traj = loop.trajectory
            self.incisal_d[k] = traj.incisal[0]
            self.frequency[k] = traj.cpg.frequency
            if self._pose_src is not None:
                self.pose[k] = self._pose_src
            self.tripped[k] = loop.safety.tripped
            self.k = k + 1
        if self.inner is not None:
            self.inner.sample(loop, t)

    def warm(self, cycle) -> None:
        if isinstance(self.inner, LoopSink):
            self.inner.warm(cycle)

    def notes(self) -> list[str]:
        return self.inner.notes() if isinstance(self.inner, LoopSink) else []

    def event(self, kind, text, cycle, t, data=None) -> None:
        """A control or safety event: kept in ``events`` and forwarded to the wrapped publisher."""
        self.events.append((t, kind, text))
        if self.inner is not None:
            self.inner.event(kind, text, cycle, t, data)


@dataclass
class SessionResult:
    report: object
    phases: list = field(default_factory=list)  # (name, t0, t1, rms error, max error, peak |force|)
    files: list = field(default_factory=list)

    def format(self) -> str:
        lines = [f"{'phase':<48}{'t (s)':>12}{'RMS err (mm)':>14}{'max err (mm)':>14}{'max |F| (N)':>13}"]
        for name, t0, t1, rms, mx, force in self.phases:
            lines.append(f"{name:<48}{f'{t0:.1f}-{t1:.1f}':>12}{rms * 1e3:>14.3f}{mx * 1e3:>14.3f}{force:>13.1f}")
        return "\n".join(lines)


def _phases(rec: SessionRecorder, changes, duration: float, t_start: float):
    edges = [t_start]
    names = []
    label = "chewing"
    for t, request in changes:
        if t <= edges[-1] or t >= duration:
            continue
        names.append(f"steady ({label})")
        edges.append(t)
        what = ", ".join(f"{k}={v}" for k, v in request.items() if k != "cmd")
        names.append(f"transition ({what})")
        edges.append(min(t + TRANSITION_WINDOW, duration))
        label = f"after {what}"
    names.append(f"steady ({label})")
    edges.append(duration)
    out = []
    n = rec.k
    err = np.abs(rec.q_d[:n] - rec.q[:n])
    for name, t0, t1 in zip(names, edges[:-1], edges[1:]):
        sel = (rec.t[:n] >= t0) & (rec.t[:n] < t1)
        if not sel.any():
            continue
        e = err[sel]
        out.append((name, t0, t1, float(np.sqrt(np.mean(e ** 2))), float(e.max()),
                    float(np.abs(rec.effort[:n][sel]).max())))
    return out


def _change_text(request) -> str:
    return ", ".join(f"{k}={v}" for k, v in request.items() if k != "cmd")


def _plot(rec: SessionRecorder, mechanism, changes, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = rec.k
    t = rec.t[:n]
    files = []
    # only the changes that happened within the recorded run (a shortened run must not stretch the axes)
    changes = [(tc, req) for tc, req in changes if n and t[0] < tc <= t[-1]]
    fig, axes = plt.subplots(3, 1, figsize=(11, 9.4), sharex=True, layout="constrained")
    for i in range(rec.q.shape[1]):
        line, = axes[0].plot(t, rec.q[:n, i] * 1e3, lw=0.8, label=f"leg {i + 1}")
        axes[0].plot(t, rec.q_d[:n, i] * 1e3, "--", lw=0.8, color=line.get_color())
        axes[1].plot(t, rec.effort[:n, i], lw=0.7, color=line.get_color())
        axes[2].plot(t, (rec.q_d[:n, i] - rec.q[:n, i]) * 1e3, lw=0.7, color=line.get_color())
    axes[0].set_ylabel("leg length (mm)\nsolid measured, dashed desired")
    axes[1].set_ylabel("leg force (N)")
    axes[2].set_ylabel("tracking error (mm)")
    axes[2].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        for tc, _ in changes:
            ax.axvline(tc, color="k", lw=0.8, alpha=0.5)
    for tc, req in changes:   # name each scheduled change above the top panel
        axes[0].annotate(f"t = {tc:g} s: {_change_text(req)}", (tc, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(3, 3), textcoords="offset points", fontsize=8, va="bottom")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
    fig.suptitle("jaw rehabilitation session: legs (vertical lines: scheduled CPG changes)")
    files.append(out / "legs.png")
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)

    actual = np.array([mechanism.incisal_point(x) for x in rec.pose[:n:5]]).reshape(-1, 3) * 1e3
    desired = rec.incisal_d[:n:5] * 1e3
    ts = t[::5]
    bounds = [t[0] if n else 0.0] + [tc for tc, _ in changes] + [t[-1] if n else 0.0]
    labels = ["initial CPG"] + [_change_text(req) for _, req in changes]
    fig, axes = plt.subplots(1, 3, figsize=(14, 5.4), layout="constrained")
    views = (("frontal", 0, 2, "lateral x (mm)"), ("sagittal", 1, 2, "anterior y (mm)"),
             ("horizontal", 0, 1, "lateral x (mm)"))
    for ax, (name, a, b, xl) in zip(axes, views):
        for k, (t0, t1) in enumerate(zip(bounds[:-1], bounds[1:])):
            last = k == len(bounds) - 2
            sel = (ts >= t0) & ((ts <= t1) if last else (ts < t1))
            if not sel.any():
                continue
            ax.plot(actual[sel, a], actual[sel, b], lw=0.9, color=f"C{k}", zorder=3,
                    label=f"{round(t0, 1):g}-{round(t1, 1):g} s: {labels[k]}")
            ax.plot(desired[sel, a], desired[sel, b], "--", lw=0.9, color=f"C{k}", alpha=0.8, zorder=2)
        ax.set_title(f"{name} projection", fontsize=10)
        ax.set_xlabel(xl)
        ax.set_ylabel("vertical z (mm)" if b == 2 else "anterior y (mm)")
        ax.axis("equal")
        ax.grid(True, alpha=0.3)
    axes[0].plot([], [], "--", lw=0.9, color="0.3", label="dashed: commanded (CPG)")
    handles, leg_labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, leg_labels, loc="outside lower center", ncol=len(leg_labels), fontsize=8, frameon=False)
    fig.suptitle("jaw rehabilitation session: incisal path, actual (solid, by phase) vs commanded (dashed)")
    files.append(out / "incisal.png")
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    return files


def run_session(loop, cfg: dict, out_dir, plots: bool = True) -> SessionResult:
    """Run a built ``jaw_cpg`` loop (``cfg``: its validated config, run offline) with a recorder; write
    plots and data into ``out_dir``."""
    if cfg["trajectory"]["type"] != "jaw_cpg":
        raise ValueError(f"{cfg.get('_source', '<config>')}: a jaw session needs [trajectory] type = "
                         f"\"jaw_cpg\", got {cfg['trajectory']['type']!r}")
    total = cfg["loop"]["duration"]
    n_cycles = int(round(total * loop.rate_hz))
    rec = SessionRecorder(loop, n_cycles, inner=loop.telemetry)
    loop.telemetry = rec
    try:
        report = loop.run(cycles=n_cycles)
    finally:
        loop.telemetry = rec.inner
        from rtctl.operator.wiring import close
        close(loop)
    changes = [(e["t"], {k: v for k, v in e.items() if k != "t"}) for e in cfg.get("schedule", [])
               if e.get("cmd") == "set_cpg"]
    result = SessionResult(report=report, phases=_phases(rec, changes, total, cfg["trajectory"]["t0"] or 0.0))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = rec.k
    np.savez_compressed(out / "session.npz", t=rec.t[:n], q=rec.q[:n], q_d=rec.q_d[:n], effort=rec.effort[:n],
                        incisal_desired=rec.incisal_d[:n], pose=rec.pose[:n], frequency=rec.frequency[:n])
    result.files.append(out / "session.npz")
    if plots:
        result.files += _plot(rec, loop.trajectory.mechanism, changes, out)
    return result
