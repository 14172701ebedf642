"""Controller and trajectory interfaces.

A :class:`Trajectory` gives the desired position, velocity and acceleration
of the actuated joints (length ``n``) at any time, written into preallocated
arrays. A :class:`Controller` turns the measured state and the desired motion
into generalized efforts (nv) for the actuated joints; neither allocates per
cycle.

Lifecycle (ros2_control's controllers): the loop calls ``warm(cycle)`` before it
activates the hardware (:mod:`rtctl.rt.warmup`), ``on_activate()`` before its first
cycle and ``on_deactivate()`` + ``on_activate()`` on a re-arm, then ``update(t, dt,
...)`` every cycle with the control time and period (s).

Config: each class declares the keys of its ``[controller]`` / ``[trajectory]``
table as a dataclass ``Options`` (:mod:`rtctl.options`) and builds itself with
``from_config(options, context)``; it is found by the name of its entry point
(:data:`rtctl.registry.CONTROLLERS`, :data:`rtctl.registry.TRAJECTORIES`).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.options import OptionsBase, options_of, setting
from rtctl.registry import CONTROLLERS, TRAJECTORIES, RegisteredName
from rtctl.rt.hooks import TelemetrySource
from rtctl.rt.interfaces import actuated_indices
from rtctl.rt.stability import gain_violation


class Trajectory(abc.ABC):
    n: int
    duration: float
    name = RegisteredName(TRAJECTORIES, "trajectory")   # its entry point's name
    sections: dict = {}  # whole config sections this trajectory owns: {"name": OptionsDataclass}

    @dataclass(frozen=True)
    class Options(OptionsBase):
        """No keys: a trajectory class lists its own."""

    @classmethod
    def from_config(cls, options: dict, context) -> "Trajectory":
        """Built from its ``[trajectory]`` table."""
        return cls(cls.Options(**options))

    @abc.abstractmethod
    def sample(self, t: float, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        """Write the desired position, velocity, acceleration at time ``t`` (s) into the arrays."""

    def limit_violation(self, safety) -> str:
        """What of this motion leaves the safety monitor's limits (``""``: nothing); checked before a run."""
        return ""

    def initial_state(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The full state ``(q, v)`` (floating base included) a simulated plant starts on, e.g. a gait's planned
        state at t = 0; None (the default): the plant's own initial state."""
        return None

    def peak_velocity(self) -> np.ndarray | None:
        """Per joint, the largest desired speed this motion reaches (a re-arm's recovery move leaves the rest of
        the velocity bound free); None (the default): not known, the recovery keeps a fixed share."""
        return None

    # set_cpg's generic change: an oscillator has the arrays amplitude, center, phase, frequency (Hz) and omega
    # (rad/s, kept equal to 2 pi frequency), which the control channel changes at a cycle boundary
    oscillator = False
    patterns: dict | None = None   # an oscillator's named patterns (set_cpg's pattern field), with set_pattern

    def validate_cpg_request(self, request: dict):
        """A trajectory with its own set_cpg parameters and limits (a CPG): ``(apply(loop) -> detail, cleaned
        request)`` for ``request``, or ValueError with the reason; None (the default): the channel's own
        checks of an :attr:`oscillator` apply."""
        return None

    retargetable = False  # a point-to-point move the control channel's set_target may send elsewhere

    def retarget(self, start: np.ndarray, goal: np.ndarray, t0: float, duration: float) -> None:
        """Move from ``start`` at control time ``t0`` to ``goal`` in ``duration`` s (set_target, at a cycle
        boundary). Only a trajectory with :attr:`retargetable` offers it."""
        raise TypeError(f"{type(self).__name__} is not a point-to-point move: it cannot be retargeted")

    def add_loop_hooks(self, loop) -> None:
        """Once the loop is built: attach what this component configures in a section it owns (a monitor, a
        feedback hook) to ``loop``. By default nothing. An error names its own ``[section]``."""

    def warm(self, cycle) -> None:
        """Before the hardware is activated, reach every kernel :meth:`sample` can call (:mod:`rtctl.rt.warmup`):
        by default one sample at the run's start time into ``cycle``'s scratch arrays, which suits a
        trajectory that is a function of time. One with a state (an integrator, a clock) or with kernels a
        sample at that time does not reach calls its kernels on copies of its arrays instead."""
        self.sample(cycle.t, cycle.q_d, cycle.qd_d, cycle.qdd_d)


class Controller(TelemetrySource, abc.ABC):
    """Base for controllers over a model's actuated joints.

    ``q_index``/``v_index`` locate the actuated joints in the model's q and v;
    gains ``kp``/``kd`` are per actuated joint (``kd`` defaults to the
    critically damped ``2 sqrt(kp)``).
    """

    name = RegisteredName(CONTROLLERS, "controller")   # its entry point's name
    default_kp: float | None = None  # kp when the config gives none; None: the config must give it
    sections: dict = {}
    gain_units = ("1/s^2", "1/s")    # of kp, kd in messages: acceleration gains, or a torque-level law's
    # The Command fields update_command writes. A driver in position mode closes the joint loop on the drive
    # and needs a controller that writes "position" (its set point, velocity, stiffness and damping).
    writes: tuple = ("effort",)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        # computed torque: kp in 1/s^2; torque-level laws: N m/rad (or N/m) per joint
        kp: object = setting("floats", None, low=0.0)
        kd: object = setting("floats", None, low=0.0)   # default 2 sqrt(kp): critically damped

    @classmethod
    def from_config(cls, options: dict, context) -> "Controller":
        """Built from its ``[controller]`` table over ``context.dynamics``."""
        return cls(context.dynamics, cls.Options(**options))

    def error_inertia(self, q) -> np.ndarray | None:
        """Per actuated joint, the inertia ``m`` that makes this law's closed loop ``e'' + (kd / m) e' + (kp / m) e
        = 0`` about configuration ``q`` (ones where the law cancels the inertia, as computed torque does); None
        (the default): its error dynamics are not of that form and its gains get no stability bound."""
        return None

    def gain_violation(self, kp, kd, sampling, q) -> str:
        """'' when gains ``kp``, ``kd`` keep this law's loop stable as the loop samples it (``sampling``, a
        :class:`rtctl.rt.stability.Sampling`) about configuration ``q``; else one line naming the joint and the
        bound. The config's gains and every ``set_gains`` are checked."""
        inertia = self.error_inertia(q)
        if inertia is None:
            return ""
        ones = bool(np.all(inertia == 1.0))
        return gain_violation(kp, kd, sampling, self.joint_names, inertia=None if ones else inertia,
                              units=self.gain_units)

    def impedance_limits(self) -> dict | None:
        """What the control channel's ``set_impedance`` may set on this law: a dict with at least ``"stiffness"``
        and ``"damping"`` (6 upper bounds each, translational first: x, y, z, rx, ry, rz); None (the default):
        the law has no impedance to change live."""
        return None

    def check_impedance(self, stiffness=None, damping=None, damping_ratio=None) -> tuple:
        """``(K, D, zeta)`` of a change, checked (ValueError naming what is wrong); nothing is applied. Offered
        by a law whose :meth:`impedance_limits` is not None."""
        raise ValueError(f"{self.name} has no impedance to change")

    def set_impedance(self, stiffness=None, damping=None, damping_ratio=None, nullspace_stiffness=None) -> str:
        """Apply a checked change from the loop's thread (blended in, without a torque step); returns what
        changed. Offered by a law whose :meth:`impedance_limits` is not None."""
        raise ValueError(f"{self.name} has no impedance to change")

    def tracked(self) -> tuple[tuple[str, ...], np.ndarray] | None:
        """What the run's report tracks: None (the default) for the actuated joints' ``q_d - q``; a law
        that follows something else (a frame's pose) returns its names (with units) and the array its
        :meth:`update` writes that error into every cycle."""
        return None

    def add_loop_hooks(self, loop) -> None:
        """Once the loop is built: attach what this component configures in a section it owns (a monitor, a
        feedback hook) to ``loop``. By default nothing. An error names its own ``[section]``."""

    def on_activate(self) -> None:
        """Before the first cycle and after a re-arm: reset integrators, clocks, filters."""

    def on_deactivate(self) -> None:
        """When the loop stops using this controller (a stop before a re-arm)."""

    def warm(self, cycle) -> None:
        """Before the hardware is activated, reach every kernel :meth:`update_command` can call (:mod:`rtctl.rt.warmup`):
        by default one update on ``cycle``'s scratch arrays. What it leaves in the controller's state is reset
        by :meth:`on_activate`, which the loop calls before the first cycle; a controller with kernels one
        update does not reach (a mode, a ramp) calls those too."""
        self.update_command(cycle.t, cycle.dt, cycle.state.q, cycle.state.v, cycle.q_d, cycle.qd_d, cycle.qdd_d,
                            cycle.command)

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None):
        """Over ``dyn``'s model with ``options`` (``kp`` None: :attr:`default_kp`, which a law without one
        requires; ``kd`` None: ``2 sqrt(kp)``)."""
        self.options = options = options_of(self, options)
        kp = options.kp
        if kp is None:
            if self.default_kp is None:
                raise ValueError(f"kp is required for type '{self.name}' (a torque gain in N m/rad per joint; it "
                                 "depends on the robot's inertia)")
            kp = self.default_kp
        self._set_up(dyn, kp, options.kd)

    def _set_up(self, dyn: Dynamics, kp, kd) -> None:
        """The model's actuated joints and the gains ``kp``, ``kd`` (None: ``2 sqrt(kp)``) over them."""
        self.dyn = dyn
        self.model = dyn.model
        q_index, v_index, self.joint_names = actuated_indices(self.model)
        n = len(v_index)
        self.n = n
        self.index = np.array([q_index, v_index], dtype=np.int64).reshape(2, n)  # rows: q_index, v_index
        self.q_index, self.v_index = self.index[0], self.index[1]
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), (n,)).copy()
        self.kd = 2.0 * np.sqrt(self.kp) if kd is None else np.broadcast_to(np.asarray(kd, dtype=float), (n,)).copy()

    @abc.abstractmethod
    def update(self, t: float, dt: float, q: np.ndarray, v: np.ndarray, q_d: np.ndarray, qd_d: np.ndarray,
               qdd_d: np.ndarray, effort: np.ndarray) -> None:
        """At control time ``t`` with period ``dt`` (s): measured full ``q`` (nq), ``v`` (nv); desired
        actuated-joint motion (n); write ``effort`` (nv)."""

    def update_command(self, t: float, dt: float, q: np.ndarray, v: np.ndarray, q_d: np.ndarray,
                       qd_d: np.ndarray, qdd_d: np.ndarray, command) -> None:
        """Fill this cycle's ``command`` (:class:`rtctl.rt.interfaces.Command`), which the loop calls: by default
        :meth:`update`'s effort. A controller that also writes set points for the drives' own loops (position,
        velocity, stiffness, damping) overrides it and names those fields in :attr:`writes`."""
        self.update(t, dt, q, v, q_d, qd_d, qdd_d, command.effort)
