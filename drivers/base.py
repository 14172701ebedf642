"""The one abstract actuator interface (python-can's ``BusABC`` is the model).

A backend moves joint state in and effort/position commands out, converting
to and from its own units and actuator space inside itself. The loop sees
only :class:`~rtctl.rt.interfaces.RobotState` and :class:`~rtctl.rt.interfaces.Command`.

Lifecycle (ros2_control style): ``configure()`` (resolve joints, open the
transport), ``activate()`` (enable torque), then every cycle ``read(state)``
and ``write(command)``, then ``deactivate()`` (torque off). ``read`` and
``write`` never raise on bus trouble: they count it in :class:`DriverHealth`
and report faults, which the safety layer turns into the safe state.

Backends are found by the name of their entry point (group ``rtctl.drivers``, through
:data:`rtctl.registry.DRIVERS`), declare their keys of a ``[driver]`` table as a
dataclass ``Options`` (the common ones below, plus their own), take it in their
constructor and are built from config by ``from_config(options, context)``; a loop
may own several, each over its own ``joints`` (:class:`rtctl.rt.hardware.Hardware`).
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field

import numpy as np

from rtctl.model import Model
from rtctl.options import OptionsBase, options_of, setting
from rtctl.registry import DRIVERS, RegisteredName
from rtctl.rt.interfaces import Command, RobotState, actuated_indices
from rtctl.rt.lifecycle import Lifecycle
from rtctl.rt.stability import EXACT_HOLD

EFFORT_MODE = "effort"
POSITION_MODE = "position"
VELOCITY_MODE = "velocity"
MODES = (EFFORT_MODE, POSITION_MODE, VELOCITY_MODE)


def velocity_set_point(command: Command, iv: int, q: float) -> float:
    """The velocity a drive's own velocity loop is given for DOF ``iv`` in velocity mode, at measured position
    ``q``: the set point's velocity plus its position error through ``stiffness / damping`` (1/s),
    ``v* = velocity + (K / D)(position - q)``. A velocity loop of gain D on v* makes exactly the position loop's
    torque ``K (position - q) + D (velocity - v)``; with K or D = 0 there is no position term. Non-finite set
    points give 0."""
    stiffness, damping = command.stiffness[iv], command.damping[iv]
    target = command.velocity[iv]
    if stiffness > 0.0 and damping > 0.0:
        target += stiffness / damping * (command.position[iv] - q)
    return target if math.isfinite(target) else 0.0


@dataclass
class DriverHealth:
    """Counters a driver keeps; ``fault`` latches until the driver is reconfigured."""

    reads: int = 0
    writes: int = 0
    timeouts: int = 0
    corrupt: int = 0
    retries: int = 0
    stale_cycles: int = 0
    fault: bool = False
    fault_reason: str = ""
    extra: dict = field(default_factory=dict)

    def set_fault(self, reason: str) -> None:
        if not self.fault:
            self.fault = True
            self.fault_reason = reason


class ActuatorDriver(Lifecycle, abc.ABC):
    """Abstract backend. Subclasses implement :meth:`read` and :meth:`write` (and lifecycle hooks)."""

    backend = RegisteredName(DRIVERS, "abstract")   # its entry point's name
    # How the loop's commands reach the joints, for the gains' stability bound (rtctl.rt.stability): the cycles
    # from a write to the actuators applying it, where known, and the share of period^2 u by which one period
    # of constant acceleration u moves a joint (1/2 in the physical world; a simulated plant's integrator's).
    latency_cycles: int = 0
    position_share: float = EXACT_HOLD
    # A bus whose own clock paces the actuators (EtherCAT's distributed clocks) asks the loop to move its next
    # deadline by this many seconds, set by read each cycle, to stay in phase with that clock (0: the loop's own).
    cycle_correction: float = 0.0
    # The ``mode`` values this backend drives: effort (torque), position (the drive's own position loop on the
    # set points), velocity (the drive's own velocity loop; the set points' position error through kp / kd).
    modes: tuple = (EFFORT_MODE, POSITION_MODE)
    sections: dict = {}      # whole config sections this driver owns: {"name": OptionsDataclass}
    shares_plant = False     # several over one simulated plant: the config builds the last with steps_plant

    @dataclass(frozen=True)
    class Options(OptionsBase):
        """``[driver]`` keys every backend takes; the transmission maps its joints to its actuators."""

        joints: object = setting("strs", None)    # the actuated joints it drives (default: all of them)
        mode: str = setting("str", EFFORT_MODE, choices=MODES)
        gear_ratio: object = setting("floats", None)
        coupling: object = setting("matrix", None)
        rotor_inertia: object = setting("floats", None, low=0.0)

    @classmethod
    def transmission_from_config(cls, options: dict, n: int):
        """The :class:`~rtctl.drivers.transmission.Transmission` of ``n`` joints the table describes."""
        from .transmission import Transmission

        return Transmission(n, ratio=options["gear_ratio"], coupling=options["coupling"],
                            rotor_inertia=options["rotor_inertia"])

    @classmethod
    def from_config(cls, options: dict, context) -> "ActuatorDriver":
        """Built from its table over ``context.model``, with ``context.transmission``."""
        return cls(context.model, cls.Options(**options), transmission=context.transmission)

    def __init__(self, model: Model, options: "ActuatorDriver.Options | None" = None):
        super().__init__()
        self.options = options = options_of(self, options)
        self.name = f"driver[{self.backend}]"
        self.model = model
        q_idx, v_idx, names = actuated_indices(model)
        self.base_nq = int(q_idx[0]) if len(q_idx) else model.nq
        self.base_nv = int(v_idx[0]) if len(v_idx) else model.nv
        if options.joints is not None:
            unknown = [j for j in options.joints if j not in names]
            if unknown:
                raise ValueError(f"{self.name}: unknown or unactuated joints {unknown}; actuated joints: {names}")
            keep = [names.index(j) for j in options.joints]
            q_idx, v_idx, names = q_idx[keep], v_idx[keep], list(options.joints)
        if options.mode not in self.modes:
            raise ValueError(f"{self.name}: mode = {options.mode!r} is not one this backend drives "
                             f"({', '.join(map(repr, self.modes))})")
        self.mode = options.mode
        self.joint_names = names
        self.q_index = np.asarray(q_idx, dtype=np.int64)
        self.v_index = np.asarray(v_idx, dtype=np.int64)
        self.health = DriverHealth()
        self.plant_seconds = np.zeros(1)  # s spent stepping an in-process simulated plant in the last write

    @abc.abstractmethod
    def read(self, state: RobotState, now: float) -> bool:
        """Fill this driver's joints in ``state``; return True if the sample is fresh."""

    @abc.abstractmethod
    def write(self, command: Command, now: float) -> None:
        """Send this driver's joints of ``command`` (effort or position targets per ``mode``)."""

    def warm(self, cycle) -> None:
        """Before :meth:`activate`: reach every kernel :meth:`read` and :meth:`write` can call
        (:mod:`rtctl.rt.warmup`), without touching the hardware. Nothing for a backend that calls none."""

    def publish_measurement(self, state: RobotState, transmission, position, velocity, effort, work,
                            now: float, fresh: bool) -> bool:
        """Write actuator-space measurements (SI, one entry per joint of this driver) into ``state``.

        Positions and velocities go to joint space through ``transmission`` (``q = A^-1 theta``),
        efforts as ``tau_j = A^T tau_m``; ``work`` is a preallocated vector of the driver's
        joint count. Allocation-free. Returns ``fresh``.
        """
        transmission.to_joint_position(position, work)
        state.q[self.q_index] = work
        transmission.to_joint_position(velocity, work)
        state.v[self.v_index] = work
        transmission.to_joint_effort(effort, work)
        state.effort[self.v_index] = work
        state.stamp = now
        state.fresh = fresh
        return fresh

    def safe_stop(self) -> None:
        """Put the actuators in their own safe state now (zero torque); must not raise."""


def create_driver(backend: str, model: Model, **keywords) -> ActuatorDriver:
    """Instantiate a backend by name (``"sim"``, ``"dynamixel"``, ...): the keywords its ``Options`` declares
    become its options, the others (``plant``, ``period``, ``transmission``, ...) are its constructor's."""
    return DRIVERS.create(backend, model, **keywords)
