"""The floating base's state from what a real robot measures: the ``[estimator]`` extension point.

A robot whose base is not bolted down has no encoder on its base: its pose and velocity are estimated every
cycle from its sensors (an IMU, foot contacts, ``rtctl.drivers.sensor``) and its joint encoders. The loop
calls :meth:`StateEstimator.update` after every read and before the controller, which then sees the
estimate in ``state`` and never the simulator's truth; in simulation the truth is kept beside it for
comparison (``ControlLoop.base_truth``, published with the estimate). A latched
:attr:`StateEstimator.fault_reason` (a diverging filter) is the loop's safe state, as a driver's fault is.
"""
from __future__ import annotations

import abc

import numpy as np

from ..model import PRISMATIC
from .hooks import TelemetrySource
from .lifecycle import Lifecycle


class BaseTruth(TelemetrySource):
    """What the drivers gave for the base before the estimator wrote its estimate (a simulator's truth; zeros on
    hardware, whose drivers give none), kept for comparison and published as ``truth/q/k`` and ``truth/v/k``.
    ``q`` and ``v`` are views of one vector, ``values``."""

    def __init__(self, model):
        nq = int(model.idx_q[model.n_base_bodies]) if model.n_base_bodies < model.nbodies else model.nq
        nv = int(model.idx_v[model.n_base_bodies]) if model.n_base_bodies < model.nbodies else model.nv
        self.values = np.zeros(nq + nv)
        self.q, self.v = self.values[:nq], self.values[nq:]
        self.telemetry_fields = tuple([f"truth/q/{k}" for k in range(nq)] + [f"truth/v/{k}" for k in range(nv)])
        self.telemetry_values = self.values
        units = [_unit(model, k, "q") for k in range(nq)] + [_unit(model, k, "v") for k in range(nv)]
        self.telemetry_units = tuple(units)


def _unit(model, k: int, which: str) -> str:
    """The SI unit of base coordinate ``k`` of ``q`` or ``v``: a free flyer's position (m), quaternion (1),
    linear (m/s) and angular (rad/s) velocity; an Euler or planar chain's prismatic (m, m/s) and revolute
    (rad, rad/s) joints."""
    if model.base == "free_flyer":
        return ("m" if k < 3 else "1") if which == "q" else ("m/s" if k < 3 else "rad/s")
    prismatic = model.joint_type[k] == PRISMATIC
    return ("m" if prismatic else "rad") + ("" if which == "q" else "/s")


class StateEstimator(Lifecycle, TelemetrySource, abc.ABC):
    """Estimates the base's ``q`` and ``v`` entries of the loop's state (the model's convention,
    :mod:`rtctl.model`) once per cycle, allocation-free; its covariance and whatever it publishes go out as
    telemetry (:class:`~rtctl.rt.hooks.TelemetrySource`)."""

    name = "estimator"
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
