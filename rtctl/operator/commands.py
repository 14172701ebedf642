"""The change commands of the control channel: each one's fields checked against the loop as built.

A validator takes a request that passed :func:`~rtctl.operator.requests.check_command` and returns
``(apply, clean)``: ``apply(loop)`` makes the change at a cycle boundary (checking again what may
have changed since) and returns its description; ``clean`` is the request as applied, for the
event log. Any field out of its range raises :class:`~rtctl.operator.requests.Refused` naming it.

The components' extension points this uses are declared with defaults on their base classes
(:class:`loops.base.Controller`, :class:`loops.base.Trajectory`): ``set_target`` retargets a trajectory
whose ``retargetable`` is true (``retarget``); ``set_impedance`` changes a controller whose
``impedance_limits()`` is not None (``check_impedance``, then ``set_impedance`` from the loop's thread,
blended in without a torque step, e.g. :class:`loops.impedance.CartesianImpedance` over its ``gain_ramp``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .requests import COMMANDS, INT64_MAX, INT64_MIN, Refused


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(f"{name}: expected a number, got {type(value).__name__} {value!r:.60}")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise Refused(f"{name}: integer out of the 64-bit range")
    x = float(value)
    if not math.isfinite(x):
        raise Refused(f"{name}: must be finite, got {value!r}")
    return x


def _vector(value, n, name, low=-math.inf, high=math.inf, low_open=False):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise Refused(f"{name}: expected {n} values (one per actuated joint), got {len(value)}")
        arr = np.array([_number(v, f"{name}[{i}]") for i, v in enumerate(value)])
    else:
        arr = np.full(n, _number(value, name))
    for i, x in enumerate(arr):
        if x < low or x > high or (low_open and x <= low):
            lo = f"({low:g}" if low_open else f"[{low:g}"
            raise Refused(f"{name}[{i}] = {x:g} outside the allowed range {lo}, {high:g}]")
    return arr


def _task_values(value, name, positive_diagonal):
    """6 values (a diagonal, x y z rx ry rz) or 36 (a 6 x 6 matrix, row-major) of an impedance, finite, with
    the diagonal > 0 (``positive_diagonal``) or >= 0."""
    if not isinstance(value, (list, tuple)) or len(value) not in (6, 36):
        count = len(value) if isinstance(value, (list, tuple)) else "a scalar"
        raise Refused(f"{name}: expected 6 values (x, y, z, rx, ry, rz) or 36 (a 6 x 6 matrix, row-major), got "
                      f"{count}")
    arr = np.array([_number(v, f"{name}[{i}]") for i, v in enumerate(value)])
    diagonal = arr if arr.size == 6 else np.diag(arr.reshape(6, 6))
    for i, x in enumerate(diagonal):
        if x < 0 or (positive_diagonal and x == 0):
            where = f"{name}[{i}]" if arr.size == 6 else f"{name}[{7 * i}] (diagonal {i})"
            raise Refused(f"{where} = {x:g} must be {'> 0' if positive_diagonal else '>= 0'}")
    return arr


def _refuse_unstable_gains(loop, kp, kd) -> None:
    """Refused naming the bound when the gains (None: the controller's own) would make the loop unstable at
    its rate (:meth:`loops.base.Controller.gain_violation`), about the last measured configuration (the
    model's neutral one before the first cycle)."""
    ctl = loop.controller
    q = loop.state.q.copy() if loop.cycle > 0 else loop.model.neutral_configuration()
    problem = ctl.gain_violation(ctl.kp if kp is None else kp, ctl.kd if kd is None else kd, loop.sampling, q)
    if problem:
        raise Refused(f"set_gains: {problem}")


@dataclass(frozen=True)
class OscillatorChange:
    """The oscillator parameters a set_cpg request sets, one value per actuated joint; None: unchanged."""
    amplitude: np.ndarray | None
    center: np.ndarray | None
    frequency: np.ndarray | None
    phase: np.ndarray | None
    pattern: str | None

    def fields(self) -> dict:
        """The change as the request's fields (the pattern first), for the reply and the event log."""
        fields = {} if self.pattern is None else {"pattern": self.pattern}
        for name in ("amplitude", "center", "frequency", "phase"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value.tolist()
        return fields

    def apply_to(self, tr, t: float) -> None:
        """Set the parameters of trajectory ``tr`` at control time ``t``; a new frequency without a new phase
        keeps ``omega t + phase`` continuous at ``t``."""
        if self.amplitude is not None:
            tr.amplitude[:] = self.amplitude
        if self.center is not None:
            tr.center[:] = self.center
        if self.phase is not None:
            tr.phase[:] = self.phase
        if self.frequency is not None:
            if self.phase is None:
                tr.phase[:] = tr.phase + (tr.omega - 2 * np.pi * self.frequency) * t
            tr.frequency[:] = self.frequency
            tr.omega[:] = 2 * np.pi * self.frequency
        if self.pattern is not None:
            tr.set_pattern(self.pattern)


def _pattern(name, traj) -> str:
    patterns = traj.patterns
    if patterns is None:
        raise Refused(f"pattern: the trajectory {type(traj).__name__} has no patterns")
    if not isinstance(name, str) or name not in patterns:
        raise Refused(f"pattern: must be one of {list(patterns)}, got {str(name)[:40]!r}")
    return name


class CommandValidation:
    """The validators ``_validate_<command>`` of :class:`~rtctl.operator.control.ControlServer`.

    Reads the server's ``loop``, ``n`` (actuated joints), ``joints`` (their names), the soft
    limits ``q_low`` / ``q_high`` and the limits ``kp_max``, ``kd_max``, ``frequency_max``
    and ``duration_max``.
    """

    def _validate_set_gains(self, req):
        if "kp" not in req and "kd" not in req:
            raise Refused("set_gains: give kp and/or kd")
        kp = _vector(req["kp"], self.n, "kp", 0.0, self.kp_max) if "kp" in req else None
        kd = _vector(req["kd"], self.n, "kd", 0.0, self.kd_max) if "kd" in req else None
        _refuse_unstable_gains(self.loop, kp, kd)

        def apply(loop):
            ctl = loop.controller
            _refuse_unstable_gains(loop, kp, kd)  # against the gains of now (another request may have set one)
            if kp is not None:
                ctl.kp[:] = kp
            if kd is not None:
                ctl.kd[:] = kd
            return f"kp={ctl.kp.tolist()} kd={ctl.kd.tolist()}"
        clean = {k: v.tolist() for k, v in (("kp", kp), ("kd", kd)) if v is not None}
        return apply, clean

    def _validate_set_target(self, req):
        traj = self.loop.trajectory
        if not traj.retargetable:
            raise Refused(f"set_target: needs a min_jerk trajectory; this loop runs {type(traj).__name__} "
                          "(oscillators: use set_cpg)")
        if "goal" not in req:
            raise Refused("set_target: 'goal' is required")
        goal = _vector(req["goal"], self.n, "goal")
        for i in range(self.n):
            if not self.q_low[i] <= goal[i] <= self.q_high[i]:
                raise Refused(f"goal[{i}] ({self.joints[i]}) = {goal[i]:g} outside the soft limits "
                              f"[{self.q_low[i]:g}, {self.q_high[i]:g}]")
        duration = _number(req.get("duration", 1.0), "duration")
        if not 0 < duration <= self.duration_max:
            raise Refused(f"duration = {duration:g} s outside the allowed range (0, {self.duration_max:g}]")
        self._refuse_while_moving_on_its_own("set_target", self.loop)  # after the fields: their errors first
        safety = self.loop.safety
        problem = safety.min_jerk_violation(self.loop.q_d, goal, duration)
        if problem:
            raise Refused(f"set_target: {problem}")

        def apply(loop):
            self._refuse_while_moving_on_its_own("set_target", loop)
            again = loop.safety.min_jerk_violation(loop.q_d, goal, duration)  # from where the loop is now
            if again:
                raise Refused(f"set_target: {again}")
            t = loop.cycle * loop.period
            loop.trajectory.retarget(loop.q_d, goal, t, duration)
            return f"move to {goal.tolist()} in {duration:g} s from t = {t:.6g} s"
        return apply, {"goal": goal.tolist(), "duration": duration}

    def _refuse_while_moving_on_its_own(self, cmd: str, loop) -> None:
        """A new move starts from the desired state at rest: not during a re-arm's recovery move (whose
        offset is not the trajectory's), and for set_target not while the current move is under way."""
        if loop.recovering:
            raise Refused(f"{cmd}: the robot is rejoining its trajectory after a re-arm; wait until it has")
        if cmd == "set_target":
            moving = np.flatnonzero(np.abs(loop.qd_d) > 1e-9)
            if moving.size:
                k = int(moving[0])
                raise Refused(f"set_target: the current move is under way (joint '{self.joints[k]}' desired "
                              f"velocity {loop.qd_d[k]:.4g}); wait until it has ended")

    def _validate_set_cpg(self, req):
        traj = self.loop.trajectory
        if self.loop.recovering:
            self._refuse_while_moving_on_its_own("set_cpg", self.loop)
        try:                                    # a CPG with its own parameters and limits
            custom = traj.validate_cpg_request({k: v for k, v in req.items() if k in COMMANDS["set_cpg"]})
        except ValueError as exc:
            raise Refused(str(exc)) from None
        if custom is not None:
            return custom
        change = self._oscillator_change(req, traj)
        clean = change.fields()

        def apply(loop):
            self._refuse_while_moving_on_its_own("set_cpg", loop)
            self._change_oscillator_without_a_step(loop, change)
            return ", ".join(f"{k}={v}" for k, v in clean.items())
        return apply, clean

    def _oscillator_change(self, req, traj) -> OscillatorChange:
        """The parameters of a set_cpg request for a sinusoid or CPG trajectory, checked against the soft
        limits and the joints' velocity and acceleration limits."""
        if not traj.oscillator:
            raise Refused(f"set_cpg: needs an oscillator trajectory (sinusoid or a CPG); this loop runs "
                          f"{type(traj).__name__} (min_jerk: use set_target)")
        if not set(req) & COMMANDS["set_cpg"]:
            raise Refused("set_cpg: give at least one of " + ", ".join(sorted(COMMANDS["set_cpg"])))
        change = OscillatorChange(
            amplitude=_vector(req["amplitude"], self.n, "amplitude", 0.0) if "amplitude" in req else None,
            center=_vector(req["center"], self.n, "center") if "center" in req else None,
            frequency=_vector(req["frequency"], self.n, "frequency", 0.0, self.frequency_max, low_open=True)
            if "frequency" in req else None,
            phase=_vector(req["phase"], self.n, "phase", -2 * math.pi, 2 * math.pi) if "phase" in req else None,
            pattern=_pattern(req["pattern"], traj) if "pattern" in req else None)
        amp = traj.amplitude if change.amplitude is None else change.amplitude
        center = traj.center if change.center is None else change.center
        if change.amplitude is not None or change.center is not None:
            for i in range(self.n):
                if center[i] - amp[i] < self.q_low[i] or center[i] + amp[i] > self.q_high[i]:
                    raise Refused(f"joint {i} ({self.joints[i]}): center +- amplitude = [{center[i] - amp[i]:g}, "
                                  f"{center[i] + amp[i]:g}] leaves the soft limits "
                                  f"[{self.q_low[i]:g}, {self.q_high[i]:g}]")
        frequency = traj.frequency if change.frequency is None else change.frequency
        problem = self.loop.safety.oscillation_violation(amp, frequency)
        if problem:
            raise Refused(f"set_cpg: {problem}")
        return change

    def _change_oscillator_without_a_step(self, loop, change: OscillatorChange) -> None:
        """Apply ``change`` to the running trajectory, or leave it as it was and refuse when the desired
        position would jump by more than the velocity bound allows in one cycle."""
        tr = loop.trajectory
        t = loop.cycle * loop.period
        before = [np.empty(self.n) for _ in range(3)]
        tr.sample(t, *before)
        saved = {name: getattr(tr, name).copy() for name in ("amplitude", "center", "phase", "frequency", "omega")}
        change.apply_to(tr, t)
        after = [np.empty(self.n) for _ in range(3)]
        tr.sample(t, *after)
        step = np.abs(after[0] - before[0])
        allowed = loop.safety.velocity_bound * loop.period
        k = int(np.argmax(step - allowed))
        if step[k] > allowed[k]:
            for name, value in saved.items():
                getattr(tr, name)[:] = value
            raise Refused(f"set_cpg: the change would step joint '{self.joints[k]}' desired position by "
                          f"{step[k]:.4g} at once (more than its velocity bound allows in one cycle, "
                          f"{allowed[k]:.3g}); change amplitude, center or phase where they leave the "
                          "position unchanged, or in smaller steps")

    def _validate_set_impedance(self, req):
        ctl = self.loop.controller
        if ctl.impedance_limits() is None:
            raise Refused(f"set_impedance: the loop's controller ({ctl.name}) is not an impedance controller")
        fields = sorted(COMMANDS["set_impedance"] & set(req))
        if not fields:
            raise Refused("set_impedance: give at least one of " + ", ".join(sorted(COMMANDS["set_impedance"])))
        change = {}
        for name, low_open in (("stiffness", True), ("damping", False)):
            if name in req:
                change[name] = _task_values(req[name], name, low_open)
        if "damping_ratio" in req:
            change["damping_ratio"] = _number(req["damping_ratio"], "damping_ratio")
        nullspace = None
        if "nullspace_stiffness" in req:
            nullspace = _vector(req["nullspace_stiffness"], self.n, "nullspace_stiffness", 0.0, self.kp_max)
        try:
            ctl.check_impedance(**change)
        except ValueError as exc:
            raise Refused(f"set_impedance: {exc}") from None

        def apply(loop):
            try:
                return loop.controller.set_impedance(**change, nullspace_stiffness=nullspace)
            except ValueError as exc:
                raise Refused(f"set_impedance: {exc}") from None
        clean = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in change.items()}
        if nullspace is not None:
            clean["nullspace_stiffness"] = nullspace.tolist()
        return apply, clean

    def _validate_estop(self, req):
        reason = req.get("reason", "control channel")
        if not isinstance(reason, str) or len(reason) > 200:
            raise Refused("reason: expected a string of at most 200 characters")

        def apply(loop):
            loop.safety.estop(reason, operator=True)
            return f"e-stop: {reason}"
        return apply, {"reason": reason}

    def _validate_rearm(self, req):
        estop_count = self.loop.safety.estop_count  # an e-stop after this request must not be undone by it

        def apply(loop):
            from ..safety import SafetyError
            try:
                detail = loop.rearm(estop_count)
            except SafetyError as exc:
                raise Refused(str(exc)) from None
            return detail
        return apply, {}
