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
``_head`` during the cycle, before :meth:`CycleStats.record` moves on):

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
"""
from __future__ import annotations

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
        self._period = np.zeros(self.capacity)
        self._latency = np.zeros(self.capacity)
        self._compute = np.zeros(self.capacity)
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
        return getattr(self, "_" + metric)

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
