"""The floating base's state from what a real robot measures: the ``[estimator]`` extension point.

A robot whose base is not bolted down has no encoder on its base: its pose and velocity are estimated every
cycle from its sensors (an IMU, foot contacts, ``rtctl.drivers.sensor``) and its joint encoders. The loop
calls :meth:`StateEstimator.update` after every read and before the controller, which then sees the
estimate in ``state`` and never the simulator's truth; in simulation the truth is kept beside it
(``ControlLoop.base_truth_q`` / ``base_truth_v``) for comparison. A latched :attr:`StateEstimator.fault_reason`
(a diverging filter) is the loop's safe state, as a driver's fault is.
"""
from __future__ import annotations

import abc

from .hooks import TelemetrySource
from .lifecycle import Lifecycle


class StateEstimator(Lifecycle, TelemetrySource, abc.ABC):
    """Estimates the base's ``q`` and ``v`` entries of the loop's state (the model's convention,
    :mod:`rtctl.model`) once per cycle, allocation-free; its covariance and whatever it publishes go out as
    telemetry (:class:`~rtctl.rt.hooks.TelemetrySource`)."""

    fault_reason: str = ""   # latched: why the estimate can no longer be trusted ("" while it can)

    @abc.abstractmethod
    def update(self, t: float, state) -> None:
        """Control time ``t`` (s): read the sensors' readings (``state.sensors``) and the joints of ``state``,
        write the base's entries of ``state.q`` and ``state.v``. Must not block; may raise (the loop then
        goes to the safe state)."""

    def warm(self, cycle) -> None:
        """Before the hardware is activated: call every kernel :meth:`update` can reach, on the copies in
        ``cycle`` (:class:`~rtctl.rt.warmup.ScratchCycle`), without changing the estimate."""

    def on_start(self) -> None:
        """At the start of each run, after the hardware came up: start the estimate afresh."""
