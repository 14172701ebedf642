"""One sweep run: build the loop from its config, run it offline, return a row of metrics.

A run never raises: a config that does not build, a controller that raises,
a state that diverges or a safety trip all come back as a row with a
``status`` and a ``reason`` (failures are data).

A run may carry a wall-clock limit (``run["run_timeout"]``, seconds; ``[backend]
run_timeout`` of the sweep file). It is cooperative: the metrics sink looks at
the clock every few cycles and asks the loop to stop at the next cycle
boundary once the limit has passed; the row is then ``timeout`` with the
metrics of the cycles that ran.
"""
from __future__ import annotations

import time
import traceback

import numpy as np
from numba import njit

from ..rt.hooks import LoopSink

STATUSES = ("ok", "tripped", "diverged", "error", "timeout")
FAILURES = STATUSES[1:]

CHECK_EVERY = 256      # the most cycles between two looks at the clock (a power of two <= 256: small cached ints)
CHECK_WALL = 0.02      # ... fewer when cycles are slow: aim at one look per ~20 ms of wall time


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


class MetricsSink(LoopSink):
    """The loop's per-cycle sink (the slot telemetry uses): effort and energy metrics, divergence detection,
    and the wall-clock limit ``limit`` (s, ``None``: none).

    The limit's clock starts after the first cycle, like the paced loop's timing: build, the loop's
    set-up (a full garbage collection) and the first cycle's one-off work (numba cache loads, first
    touches) depend on the worker process, not on the run.
    """

    def __init__(self, loop, limit: float | None = None):
        self.v_index = np.asarray(loop.controller.v_index, dtype=np.int64)
        self.dt = loop.period
        self.peak = np.zeros(1)
        self.energy = np.zeros(1)
        self.diverged_at = -1.0
        self.limit = limit
        self.timed_out = False
        self._deadline = self._last_check = None   # set at the first look at the clock
        self._interval = self._countdown = 1

    def warm(self, cycle) -> None:
        _accumulate_effort(cycle.command.effort, cycle.state.v, self.v_index, self.dt, np.zeros(1), np.zeros(1))

    def sample(self, loop, t: float) -> None:
        finite = _accumulate_effort(loop.command.effort, loop.state.v, self.v_index, self.dt, self.peak, self.energy)
        if not finite and self.diverged_at < 0:
            self.diverged_at = t
        if self.limit is not None:
            self._countdown -= 1   # stays within 0..CHECK_EVERY: no int is allocated per cycle
            if self._countdown == 0:
                self._check_clock(loop)

    def _check_clock(self, loop) -> None:
        now = time.perf_counter()
        if self._deadline is None:  # after the first cycle: start the clock
            self._deadline, self._last_check = now + self.limit, now
            self._countdown = 1
            return
        if now >= self._deadline:
            self.timed_out = True
            loop.request_stop()    # the loop ends after this cycle
            self._countdown = CHECK_EVERY
            return
        elapsed, n = now - self._last_check, self._interval
        if elapsed * CHECK_EVERY <= CHECK_WALL * n:  # fast cycles: the full interval stays within CHECK_WALL
            n = CHECK_EVERY
        else:
            n = max(1, min(CHECK_EVERY, int(n * CHECK_WALL / elapsed)))
        self._interval = self._countdown = n
        self._last_check = now


def _failure(run: dict, status: str, reason: str, wall: float) -> dict:
    return {"run_id": run["run_id"], "index": run["index"], "status": status, "reason": reason[-2000:],
            "wall_s": wall, **{f"param.{k}": v for k, v in run["params"].items()}}


def run_one(run: dict) -> dict:
    """Run one sweep entry (``{"run_id", "index", "params", "config"}``, optionally ``"run_timeout"``: a
    wall-clock limit in s on the simulation's cycles, see :class:`MetricsSink`) and return its row."""
    from ..config import build

    start = time.perf_counter()
    try:
        loop = build(run["config"])
    except Exception as exc:  # noqa: BLE001  a run that cannot be built is recorded, not fatal
        return _failure(run, "error", f"build: {type(exc).__name__}: {exc}", time.perf_counter() - start)
    limit = run.get("run_timeout")
    sink = MetricsSink(loop, limit)
    loop.telemetry = sink
    duration = run["config"]["loop"]["duration"]
    try:
        report = loop.run(duration=duration)
    except Exception as exc:  # noqa: BLE001
        tail = traceback.format_exc(limit=3)
        return _failure(run, "error", f"run: {type(exc).__name__}: {exc}\n{tail}", time.perf_counter() - start)
    wall = time.perf_counter() - start
    # stopped by the limit before the last cycle (a limit passed on the very last cycle cut nothing short)
    timed_out = sink.timed_out and report.cycles < int(round(duration * loop.rate_hz))
    state_finite = bool(np.all(np.isfinite(loop.state.q)) and np.all(np.isfinite(loop.state.v)))
    if sink.diverged_at >= 0 or not state_finite:
        status = "diverged"
        reason = f"non-finite state or effort at t = {max(sink.diverged_at, 0.0):.4g} s"
    elif report.failures:
        status, reason = "error", "; ".join(report.failures)
    elif report.tripped:
        status, reason = "tripped", report.trip_reason
    elif timed_out:
        status, reason = "timeout", ""
    else:
        status, reason = "ok", ""
    if timed_out:
        cut = (f"wall-clock limit {float(limit)!r} s reached at control time {report.duration:.3f} s "
               f"of {float(duration)!r} s (cycle {report.cycles})")
        reason = cut if status == "timeout" else f"{reason}; stopped early: {cut}"
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
