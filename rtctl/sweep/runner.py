"""One sweep run: build the loop from its config, run it offline, return a row of metrics.

A run never raises: a config that does not build, a controller that raises,
a state that diverges or a safety trip all come back as a row with a
``status`` and a ``reason`` (failures are data).
"""
from __future__ import annotations

import time
import traceback

import numpy as np
from numba import njit

STATUSES = ("ok", "tripped", "diverged", "error")


@njit(cache=True)
def _accumulate_effort(effort, v, v_index, dt, peak, energy):
    """Peak |effort| and the actuators' absolute mechanical work sum_i |tau_i v_i| dt (both in place)."""
    finite = True
    for k in range(v_index.shape[0]):
        i = v_index[k]
        tau, vel = effort[i], v[i]
        if not (np.isfinite(tau) and np.isfinite(vel)):
            finite = False
            continue
        a = abs(tau)
        if a > peak[0]:
            peak[0] = a
        energy[0] += abs(tau * vel) * dt
    return finite


class MetricsSink:
    """The loop's per-cycle sink (the slot telemetry uses): effort and energy metrics, divergence detection."""

    def __init__(self, loop):
        self.v_index = np.asarray(loop.controller.v_index, dtype=np.int64)
        self.dt = loop.period
        self.peak = np.zeros(1)
        self.energy = np.zeros(1)
        self.diverged_at = -1.0

    def sample(self, loop, t: float) -> None:
        finite = _accumulate_effort(loop.command.effort, loop.state.v, self.v_index, self.dt, self.peak, self.energy)
        if not finite and self.diverged_at < 0:
            self.diverged_at = t


def _failure(run: dict, status: str, reason: str, wall: float) -> dict:
    return {"run_id": run["run_id"], "index": run["index"], "status": status, "reason": reason[-2000:],
            "wall_s": wall, **{f"param.{k}": v for k, v in run["params"].items()}}


def run_one(run: dict) -> dict:
    """Run one sweep entry (``{"run_id", "index", "params", "config"}``) and return its row."""
    from ..config import build

    start = time.perf_counter()
    try:
        loop = build(run["config"])
    except Exception as exc:  # noqa: BLE001  a run that cannot be built is recorded, not fatal
        return _failure(run, "error", f"build: {type(exc).__name__}: {exc}", time.perf_counter() - start)
    sink = MetricsSink(loop)
    loop.telemetry = sink
    duration = run["config"]["loop"]["duration"]
    try:
        report = loop.run(duration=duration)
    except Exception as exc:  # noqa: BLE001
        tail = traceback.format_exc(limit=3)
        return _failure(run, "error", f"run: {type(exc).__name__}: {exc}\n{tail}", time.perf_counter() - start)
    wall = time.perf_counter() - start
    state_finite = bool(np.all(np.isfinite(loop.state.q)) and np.all(np.isfinite(loop.state.v)))
    if sink.diverged_at >= 0 or not state_finite:
        status = "diverged"
        reason = f"non-finite state or effort at t = {max(sink.diverged_at, 0.0):.4g} s"
    elif report.failures:
        status, reason = "error", "; ".join(report.failures)
    elif report.tripped:
        status, reason = "tripped", report.trip_reason
    else:
        status, reason = "ok", ""
    compute = report.timing.get("compute", {})
    row = {
        "run_id": run["run_id"], "index": run["index"], "status": status, "reason": reason,
        "tracking_rms": float(np.max(report.tracking_rms)) if len(report.tracking_rms) else 0.0,
        "tracking_max": float(np.max(report.tracking_max)) if len(report.tracking_max) else 0.0,
        "peak_effort": float(sink.peak[0]),
        "actuator_energy": float(sink.energy[0]),
        "trips": int(report.tripped),
        "compute_p50_us": float(compute.get("p50", float("nan"))),
        "compute_p99_us": float(compute.get("p99", float("nan"))),
        "overruns": int(report.overruns),
        "cycles": int(report.cycles),
        "wall_s": wall,
    }
    row.update({f"param.{k}": v for k, v in run["params"].items()})
    return row
