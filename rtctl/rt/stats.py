"""Loop timing statistics: per-cycle period, wake-up latency and compute time in ring buffers.

:class:`CycleStats` keeps the last ``capacity`` cycles of each metric (seconds,
float64, preallocated) and counters over the whole run. :meth:`CycleStats.record`
stores into the buffers in place and allocates nothing; the summaries (in
microseconds) are computed on demand, outside the loop, over the retained window.

Metrics:

* ``period``: time between consecutive wake-ups;
* ``latency``: wake-up time minus the deadline (how late the loop woke up);
* ``compute``: time from wake-up to the end of the cycle's work.

Where the compute time goes (:data:`PARTS`, written by the loop into :attr:`CycleStats.parts` at
its :attr:`~CycleStats.slot` during the cycle, before :meth:`CycleStats.record` moves on):

* ``driver_read``: the drivers' reads (bus I/O, a simulated driver's sensor model);
* ``control``: trajectory, controller, loop hooks (observers, monitors) and the safety check;
* ``driver_write``: the drivers' writes, without the simulated plant;
* ``plant``: in-process simulation (a simulated driver stepping its plant);
* ``telemetry``: the hand-off to the telemetry ring.

Each cycle's overrun flag is kept beside its timing, so :meth:`CycleStats.late_summary` can say what the
late cycles spent their time on: waking up (latency) or computing.

Counters: ``cycles`` (recorded), ``overruns`` (cycles flagged as overrun),
``skipped`` (deadlines dropped by a skip policy; the loop may add to it directly),
``max_consecutive_overruns`` (longest run of consecutive overruns).

:class:`LoopReport` is what a run returns: tracking, this timing, the safety monitor's trips and re-arms,
the kernels first reached after activation and the telemetry sink's notes, and its printed form.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

METRICS = ("period", "latency", "compute")
PARTS = ("driver_read", "control", "driver_write", "plant", "telemetry")
STATISTICS = ("min", "mean", "p50", "p99", "max")


class CycleStats:
    """Ring buffers of the last ``capacity`` cycles' timing plus run counters."""

    def __init__(self, capacity: int):
        if isinstance(capacity, bool) or int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self._metrics = {metric: np.zeros(self.capacity) for metric in METRICS}
        self._period, self._latency, self._compute = (self._metrics[m] for m in METRICS)
        self.parts = np.zeros((len(PARTS), self.capacity))  # s, per part of the compute time (module docstring)
        self._late = np.zeros(self.capacity, dtype=np.bool_)  # the cycle overran
        self._head = 0  # where the next sample goes
        self.reset()

    def reset(self) -> None:
        """Forget all samples and counters (the buffers are reused)."""
        self._head = 0
        self.cycles = 0
        self.overruns = 0
        self.skipped = 0
        self.consecutive_overruns = 0
        self.max_consecutive_overruns = 0

    def record(self, period: float, latency: float, compute: float, overrun: bool, skipped: int = 0) -> None:
        """Store one cycle's timing (seconds). Allocates nothing: buffer writes and counter updates only."""
        i = self._head
        self._period[i] = period
        self._latency[i] = latency
        self._compute[i] = compute
        self._late[i] = overrun
        i += 1
        self._head = 0 if i == self.capacity else i
        self.cycles += 1
        if skipped:
            self.skipped += skipped
        if overrun:
            self.overruns += 1
            self.consecutive_overruns += 1
            if self.consecutive_overruns > self.max_consecutive_overruns:
                self.max_consecutive_overruns = self.consecutive_overruns
        else:
            self.consecutive_overruns = 0

    # -- reading back (not for the loop: these allocate) ------------------------------
    @property
    def count(self) -> int:
        """Number of retained samples: min(cycles, capacity)."""
        return min(self.cycles, self.capacity)

    def _buffer(self, metric: str) -> np.ndarray:
        if metric in PARTS:
            return self.parts[PARTS.index(metric)]
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; metrics: {METRICS + PARTS}")
        return self._metrics[metric]

    @property
    def slot(self) -> int:
        """Where the running cycle's samples go (its :attr:`parts` during the cycle, then :meth:`record`)."""
        return self._head

    def copy_latest(self, out: np.ndarray) -> None:
        """The last recorded cycle's :data:`METRICS` (s) into ``out``, in their order; allocation-free (the
        telemetry hand-off calls it every cycle)."""
        i = self._head - 1
        out[0], out[1], out[2] = self._period[i], self._latency[i], self._compute[i]

    def window(self, metric: str) -> np.ndarray:
        """A copy of the retained samples of ``metric`` (seconds; a metric or a part), oldest first."""
        buf = self._buffer(metric)
        if self.cycles < self.capacity:
            return buf[:self.cycles].copy()
        return np.concatenate((buf[self._head:], buf[:self._head]))

    def summary(self) -> dict:
        """``{metric: {min, mean, p50, p99, max}}`` in microseconds over the retained window (the metrics,
        then the parts of the compute time), plus counters.

        Percentiles use NumPy's default (linear interpolation). With no samples
        the statistics are NaN. The counter entries are ``cycles``, ``window``
        (samples summarised), ``overruns``, ``skipped``, ``max_consecutive_overruns``.
        """
        n = self.count
        out: dict = {}
        for metric in METRICS + PARTS:
            data = self._buffer(metric)[:n] * 1e6  # order does not matter for these statistics
            if n == 0:
                out[metric] = {k: float("nan") for k in STATISTICS}
                continue
            p50, p99 = np.percentile(data, [50.0, 99.0])
            out[metric] = {"min": float(data.min()), "mean": float(data.mean()), "p50": float(p50),
                           "p99": float(p99), "max": float(data.max())}
        out.update(cycles=self.cycles, window=n, overruns=self.overruns, skipped=self.skipped,
                   max_consecutive_overruns=self.max_consecutive_overruns)
        return out

    def late_summary(self, period: float) -> dict:
        """What the overrun cycles of the retained window spent their time on, in microseconds.

        ``{"cycles": overrun cycles in the window, "latency", "compute": their mean wake-up latency and compute
        time, each part of :data:`PARTS`: its mean over them, "woke_late": how many of them computed within
        ``period`` (s) -- they overran because they woke up late --, "woke_late_latency",
        "woke_late_compute": the means over those (NaN if none)}``; ``{}`` without overruns.
        """
        n = self.count
        late = self._late[:n]
        k = int(late.sum())
        if k == 0:
            return {}
        latency, compute = self._latency[:n][late], self._compute[:n][late]
        woke = compute <= period
        out = {"cycles": k, "latency": float(latency.mean() * 1e6), "compute": float(compute.mean() * 1e6),
               "woke_late": int(woke.sum()),
               "woke_late_latency": float(latency[woke].mean() * 1e6) if woke.any() else float("nan"),
               "woke_late_compute": float(compute[woke].mean() * 1e6) if woke.any() else float("nan")}
        for j, part in enumerate(PARTS):
            out[part] = float(self.parts[j, :n][late].mean() * 1e6)
        return out

    def format_table(self) -> str:
        """The summary as a readable table (microseconds)."""
        s = self.summary()
        lines = [f"{'metric (us)':<12}" + "".join(f"{k:>12}" for k in STATISTICS)]
        for metric in METRICS + PARTS:
            lines.append(f"{metric:<12}" + "".join(f"{s[metric][k]:>12.2f}" for k in STATISTICS))
        ratio = f" ({100.0 * self.overruns / self.cycles:.3g}%)" if self.cycles else ""
        lines.append(f"cycles {self.cycles} (last {s['window']} summarised), overruns {self.overruns}{ratio}, "
                     f"skipped {self.skipped}, max consecutive overruns {self.max_consecutive_overruns}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"CycleStats(capacity={self.capacity}, cycles={self.cycles}, overruns={self.overruns})"


def trip_history(events) -> list[tuple[int, str, int]]:
    """``(trip cycle, reason, cycle of the re-arm that left it or -1)`` of each trip among a safety monitor's
    ``events`` (``(cycle, kind, detail)``), oldest first."""
    history = []
    for cycle, kind, detail in list(events):
        if kind == "trip":
            history.append((cycle, detail, -1))
        elif kind == "rearm" and history and history[-1][2] < 0:
            history[-1] = (history[-1][0], history[-1][1], cycle)
    return history


@dataclass
class LoopReport:
    """What a run did: tracking, timing, safety."""

    cycles: int
    duration: float
    rate_hz: float
    tracked_names: list[str]    # the actuated joints, or what the controller tracks instead (a frame's pose)
    tracking_rms: np.ndarray
    tracking_max: np.ndarray
    timing: dict
    overruns: int
    skipped_cycles: int
    tripped: bool
    trip_reason: str
    operator_stop: bool = False
    safety_events: list = field(default_factory=list)
    driver_health: dict = field(default_factory=dict)
    realtime: str = ""
    failures: list = field(default_factory=list)
    late: dict = field(default_factory=dict)  # the overrun cycles' timing (CycleStats.late_summary)
    trips: int = 0           # safe-state trips during the run (e-stops, limits, faults), re-armed or not
    rearms: int = 0          # re-arms during the run
    trip_history: list = field(default_factory=list)   # (trip cycle, reason, re-arm cycle or -1), oldest first
    late_kernels: list = field(default_factory=list)   # kernels first reached after activation (rtctl.rt.warmup)
    notes: list = field(default_factory=list)          # what the telemetry sink reports (LoopSink.notes)
    stopped_by: str = ""     # the stop signal that ended the run early (rtctl.rt.signals), e.g. "SIGTERM"
    safe_command_written: bool = False  # that stop wrote the safe command through the drivers before deactivating

    OVERRUN_WARNING_FRACTION = 0.01

    def overrun_warning(self) -> str:
        """A loud line when more than 1 % of cycles overran (the loop did not keep its rate), else ``""``.

        It names what made the cycles late: when most late cycles computed within the period they overran
        because they woke up late (wake-up latency: the machine's scheduling, not the loop's work); otherwise
        the part of the compute time that took the most in the late cycles (over all cycles without ``late``).
        """
        if not (self.cycles and self.overruns > self.OVERRUN_WARNING_FRACTION * self.cycles):
            return ""
        head = (f"WARNING: {self.overruns} of {self.cycles} cycles ({100.0 * self.overruns / self.cycles:.1f} %) "
                f"overran their {1e3 / self.rate_hz:g} ms period: this loop did not keep its rate on this machine")
        compute_p99 = self.timing.get("compute", {}).get("p99", float("nan"))
        late = self.late
        if late and 2 * late["woke_late"] > late["cycles"]:
            latency_p99 = self.timing.get("latency", {}).get("p99", float("nan"))
            return (f"{head}: {late['woke_late']} of its {late['cycles']} late cycles woke up late (wake-up latency "
                    f"{late['woke_late_latency']:.0f} us mean in them, p99 {latency_p99:.0f} us over the run) and "
                    f"computed within the period ({late['woke_late_compute']:.0f} us mean in them, compute p99 "
                    f"{compute_p99:.0f} us): the machine woke the loop late, its work fits; free a CPU for it "
                    "([loop] cpus, realtime_priority), or lower rate_hz")
        if late:
            means = {part: late[part] for part in PARTS if part in late}
        else:
            means = {part: self.timing[part]["mean"] for part in PARTS if part in self.timing}
        worst = max(means, key=means.get) if means else ""
        scope = " in the late cycles" if late else ""
        where = f", most of it in {worst} ({means[worst]:.0f} us mean{scope})" if worst else ""
        return (f"{head} (compute p99 {compute_p99:.0f} us{where}); lower rate_hz, or free a CPU for it "
                "([loop] cpus, realtime_priority)")

    SHOWN_TRIPS = 3

    def safety_summary(self) -> str:
        """The safety line: the state the run ended in, and every trip it had and whether it was re-armed
        (count; the reasons of the first :data:`SHOWN_TRIPS`)."""
        if self.tripped and self.operator_stop:
            line = f"SAFE STATE: stopped by the operator ({self.trip_reason})"
        elif self.tripped:
            line = f"SAFE STATE: tripped ({self.trip_reason})"
        elif not self.trips:
            return "safety: armed throughout, no trips"
        else:
            line = "safety: armed at the end"
        earlier = self.trips - (1 if self.tripped else 0)
        if not earlier:
            return line
        plural = "s" if earlier != 1 else ""
        rearms = f"{self.rearms} re-arm{'s' if self.rearms != 1 else ''}"
        shown = [f"{reason} (cycle {cycle}, re-armed at cycle {rearm})"
                 for cycle, reason, rearm in self.trip_history if rearm >= 0][:self.SHOWN_TRIPS]
        more = f"; and {earlier - len(shown)} more" if earlier > len(shown) else ""
        before = "; before that" if self.tripped else ", after"
        return f"{line}{before} {earlier} trip{plural} and {rearms}: " + "; ".join(shown) + more

    def format(self) -> str:
        lines = [f"ran {self.cycles} cycles at {self.rate_hz:g} Hz ({self.duration:.3f} s of control time)",
                 self.realtime, "", "tracking error (rad or m)       RMS          max"]
        for name, rms, mx in zip(self.tracked_names, self.tracking_rms, self.tracking_max):
            lines.append(f"  {name:<26}{rms:>11.3e}  {mx:>11.3e}")
        lines += ["", "loop timing (us)        min      mean       p50       p99       max"]
        for metric in ("period", "latency", "compute", *PARTS):
            if metric in self.timing:
                m = self.timing[metric]
                if metric in PARTS and m["max"] == 0.0:
                    continue  # e.g. no in-process plant, no telemetry
                cells = "".join(f"{m[k]:>10.1f}" for k in ("min", "mean", "p50", "p99", "max"))
                label = f"  {metric:<14}" if metric not in PARTS else f"    {metric:<12}"
                lines.append(f"{label}{cells}")
        lines.append(f"  overruns: {self.overruns}, skipped cycles: {self.skipped_cycles}")
        if self.overrun_warning():
            lines.append(f"  {self.overrun_warning()}")
        lines.append("")
        lines.append(self.safety_summary())
        if self.stopped_by:
            lines.append(f"stopped by {self.stopped_by}: " + ("the safe command, then " if self.safe_command_written
                                                             else "before the first cycle; ")
                         + "every driver deactivated")
        if self.late_kernels:
            lines.append(f"WARNING: {len(self.late_kernels)} kernel{'s' if len(self.late_kernels) != 1 else ''} "
                         "compiled or loaded after the hardware was activated (a cycle waited for each; warm them "
                         "before the run): " + "; ".join(self.late_kernels))
        lines += self.notes
        for event in self.safety_events:
            lines.append(f"  event: {event}")
        for failure in self.failures:
            lines.append(f"  component failure: {failure}")
        if self.driver_health:
            lines.append("driver: " + ", ".join(f"{k}={v}" for k, v in self.driver_health.items()))
        return "\n".join(lines)
