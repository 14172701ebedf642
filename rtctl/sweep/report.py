"""``rtctl sweep-report``: each metric against each varied parameter, and the Pareto front.

The Pareto front is drawn for a tracking metric against an effort metric
(default ``tracking_rms`` vs ``actuator_energy``) over the runs that finished
``ok``: a run is on the front when no other run is at least as good on both
and better on one.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .results import read_columns, read_metadata

METRIC_LABELS = {
    "tracking_rms": "tracking RMS, worst joint (rad; m prismatic)",
    "tracking_max": "tracking max, worst joint (rad; m prismatic)",
    "peak_effort": "peak |effort| (N m; N prismatic)",
    "actuator_energy": "actuator energy (J)",
    "trips": "safety trips", "overruns": "overruns", "cycles": "cycles", "wall_s": "wall time (s)",
    "compute_p50_us": "compute p50 (us)", "compute_p99_us": "compute p99 (us)",
}
PARAM_UNITS = {"kp": "1/s^2", "kd": "1/s", "mass_scale": "x nominal", "payload_mass": "kg", "viscous_friction":
               "N m s/rad", "rate_hz": "Hz", "duration": "s", "frequency": "Hz", "amplitude": "rad"}


def metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name)


def param_label(path: str) -> str:
    unit = PARAM_UNITS.get(path.rsplit(".", 1)[-1])
    return f"{path} ({unit})" if unit else path


def spans_decades(values) -> bool:
    """Positive values whose largest is more than 20 times the smallest: a log axis reads them right."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return v.size > 1 and v.min() > 0 and v.max() > 20 * v.min()


STATUS_COLOURS = {"ok": "tab:blue", "tripped": "tab:orange", "diverged": "tab:red", "error": "black",
                  "timeout": "tab:purple"}


def pareto_front(x, y) -> np.ndarray:
    """Indices of the non-dominated points when both ``x`` and ``y`` are to be minimised, sorted by x."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    order = np.lexsort((y, x))
    front, best = [], np.inf
    for i in order:
        if y[i] < best:
            front.append(i)
            best = y[i]
    return np.asarray(front, dtype=int)


def _numeric(values) -> np.ndarray | None:
    out = []
    for v in values:
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                return None
        if isinstance(v, list):
            v = float(np.mean(v)) if v else float("nan")
        if v is None:
            v = float("nan")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        out.append(float(v))
    return np.asarray(out)


def missing_runs(results: str | Path, rows: int) -> str:
    """'' when the file holds every run its sweep planned; else one line saying how many are missing (an
    interrupted sweep: running it again resumes it)."""
    planned = read_metadata(results).get("planned_runs")
    if not isinstance(planned, int) or rows >= planned:
        return ""
    return (f"{planned - rows} of the sweep's {planned} planned runs are missing (interrupted; run the same "
            "`rtctl sweep` again to resume it)")


def sweep_report(results: str | Path, out: str | Path, metrics=("tracking_rms", "peak_effort", "actuator_energy"),
                 pareto=("actuator_energy", "tracking_rms")) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = read_columns(results)
    if not cols.get("run_id"):
        raise ValueError(f"{results}: no runs in the results file")
    status = np.asarray(cols["status"])
    params = [c for c in cols if c.startswith("param.")]
    numeric_params = {p: v for p in params if (v := _numeric(cols[p])) is not None}
    metrics = [m for m in metrics if m in cols]
    if not metrics:
        raise ValueError(f"{results}: none of the requested metrics is a column; columns: {sorted(cols)}")
    n_rows = max(1, len(numeric_params))
    fig, axes = plt.subplots(n_rows + 1, len(metrics), figsize=(4.2 * len(metrics), 3.2 * (n_rows + 1)),
                             squeeze=False)
    for r, (pname, pv) in enumerate(numeric_params.items()):
        for c, metric in enumerate(metrics):
            ax = axes[r][c]
            mv = np.asarray(_numeric(cols[metric]))
            for st, colour in STATUS_COLOURS.items():
                sel = status == st
                if sel.any():
                    ax.scatter(pv[sel], mv[sel], s=14, color=colour, label=st, alpha=0.8)
            if spans_decades(pv):
                ax.set_xscale("log")
            if spans_decades(mv):
                ax.set_yscale("log")
            ax.set_xlabel(param_label(pname[len("param."):]))
            ax.set_ylabel(metric_label(metric), fontsize=8)
            ax.grid(True, alpha=0.3)
    shown = [st for st in STATUS_COLOURS if (status == st).any()]
    if numeric_params and len(shown) > 1:
        axes[0][-1].legend(fontsize=8, title="status", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if not numeric_params:
        for c in range(len(metrics)):
            axes[0][c].set_visible(False)
    for c in range(len(metrics)):
        axes[n_rows][c].set_visible(False)
    ax = axes[n_rows][0]
    ax.set_visible(True)
    xname, yname = pareto
    if xname in cols and yname in cols:
        x, y = np.asarray(_numeric(cols[xname])), np.asarray(_numeric(cols[yname]))
        ok = (status == "ok") & np.isfinite(x) & np.isfinite(y)
        idx = np.flatnonzero(ok)
        ax.scatter(x[ok], y[ok], s=14, color="tab:gray", label="ok runs")
        if idx.size:
            front = idx[pareto_front(x[idx], y[idx])]
            ax.plot(x[front], y[front], "o-", color="tab:green", label="Pareto front")
        for name, scale in ((x[ok], ax.set_xscale), (y[ok], ax.set_yscale)):
            if spans_decades(name):
                scale("log")
        ax.set_xlabel(metric_label(xname))
        ax.set_ylabel(metric_label(yname), fontsize=8)
        not_ok = int((status != "ok").sum())
        ax.set_title(f"Pareto front ({front.size if idx.size else 0} of {idx.size} ok runs; "
                     f"{not_ok} not ok, not shown)", fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.grid(True, alpha=0.3)
    counts = {s: int((status == s).sum()) for s in np.unique(status)}
    title = f"{Path(results).name}: {len(status)} runs ({', '.join(f'{k} {v}' for k, v in counts.items())})"
    missing = missing_runs(results, len(status))
    fig.suptitle(f"{title}\nINCOMPLETE: {missing}" if missing else title, color="tab:red" if missing else "black")
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
