"""What a loop runs beside its drivers, trajectory and controller: hooks and a telemetry sink.

A loop hook (:class:`LoopHook`, in ``loop.hooks``) runs every cycle after the controller and before the
safety check: an observer, a collision monitor, a feedback into the trajectory. A telemetry sink
(:class:`LoopSink`, ``loop.telemetry``) takes each cycle's sample after the write. Plain callables and
objects with a ``sample`` method still run; deriving from these classes adds what the loop does around
the cycles: :meth:`LoopHook.on_start` when the hardware comes up, and ``warm`` before it does
(:mod:`rtctl.rt.warmup`).
"""
from __future__ import annotations

import abc


class TelemetrySource:
    """Named numbers a component adds to each telemetry sample (its ``extra`` field): the controller's, then
    each loop hook's, each sensor's and the estimator's, in that order. ``telemetry_values`` is an array of
    ``len(telemetry_fields)`` the component updates in place every cycle; none (the default) adds nothing.
    ``telemetry_units`` gives each field's SI unit (empty: not stated)."""

    telemetry_fields: tuple | list = ()
    telemetry_values = None
    telemetry_units: tuple | list = ()


class LoopHook(TelemetrySource, abc.ABC):
    """``hook(cycle, t, state, command)`` every cycle; allocation-free (it runs in the real-time loop)."""

    @abc.abstractmethod
    def __call__(self, cycle: int, t: float, state, command) -> None:
        """One cycle at control time ``t``: read ``state``, may change ``command`` before the safety check."""

    def on_start(self) -> None:
        """At the start of each run, after the hardware came up: restart what depends on the last run."""

    def warm(self, cycle) -> None:
        """Before the hardware is activated: call every kernel this hook can reach, on the copies in ``cycle``
        (a :class:`~rtctl.rt.warmup.ScratchCycle`), including those of rare paths (a detection, a reaction).
        Nothing to do for a hook that calls none."""


class LoopSink(abc.ABC):
    """``loop.telemetry``: :meth:`sample` once per cycle after the write; allocation-free, never blocks."""

    @abc.abstractmethod
    def sample(self, loop, t: float) -> None:
        """Take this cycle's sample (control time ``t``)."""

    def warm(self, cycle) -> None:
        """Before the hardware is activated: call every kernel :meth:`sample` can reach, on scratch data
        (never into the stream: nothing of it may reach a reader)."""

    def notes(self) -> list[str]:
        """Lines for the run's report: what went wrong with the stream while the loop ran (none: [])."""
        return []
