"""The safety layer: limit checks, watchdog, faults, e-stop, and a latched safe state (SI units).

Every cycle the loop calls :meth:`SafetyMonitor.check` on the measured state and
the command about to be written, after the controller and before the driver's
``write``. The monitor trips to the safe state on

* a non-finite value anywhere in ``state.q``, ``state.v``, ``state.effort`` or
  ``command.effort``;
* a measured position of an actuated joint outside its soft limits
  ``[lower + position_margin, upper - position_margin]`` (joints with infinite
  limits are not checked on that side);
* a measured ``|v|`` above ``velocity_scale * velocity_limit``;
* a stale state: ``state.fresh`` False for more than ``watchdog_cycles``
  consecutive checks;
* a driver fault (``check(..., driver_fault=True, reason=...)`` or
  :meth:`SafetyMonitor.report_fault`) or a software e-stop (:meth:`SafetyMonitor.estop`);
* a commanded ``|effort|`` above ``effort_limit`` when ``effort_clamp`` is
  False. With ``effort_clamp`` True (default) the command is clamped to exactly
  ``+-effort_limit`` instead, counted in ``clamp_count`` and recorded as an event
  (the first clamped cycle of each run of consecutive clamped cycles), and the
  monitor stays armed.

The safe state is latched: once tripped, every ``check`` overwrites the command
with the safe command and returns False until :meth:`SafetyMonitor.rearm`
succeeds. The safe command sets ``stiffness``, ``damping`` and the ``velocity``
target to 0 on every row (so a drive closing its own loop stops pulling towards
a stale target) and ``effort`` by ``safe_mode`` (IEC 60204-1 stop categories;
:mod:`rtctl.safety.stop`):

* ``"hold"`` (category 2; the default where the model carries the robot's weight,
  :func:`~rtctl.safety.stop.hold_unavailable`): decelerate within the limits, then
  hold with the model's gravity compensation and a bounded stiffness. It needs a
  trusted state: from a non-finite state, a stale one, a driver fault or a failing
  dynamics kernel on, it falls back for the rest of the latch to damping (which
  needs only finite velocities), or to zero torque when a velocity is not finite,
  and records why (event kind ``"safe"``);
* ``"damping"`` (the default elsewhere): ``-D v`` on the actuated joints, clamped to
  ``+-effort_limit`` (``D = damping_gain``, by default
  :func:`~rtctl.safety.stop.default_damping`; a gain too weak to stop the fall under
  gravity the model shows is refused), and zero torque when any actuated velocity
  is not finite;
* ``"zero_torque"`` (category 0): 0.

Base rows of a floating base are always 0.

Real-time behaviour: the per-cycle work is one call of the numba kernel
:func:`_safety_cycle` over arrays preallocated at construction (limits, index
arrays, counters), and while holding one of :func:`~rtctl.safety.stop.hold_command`;
they return status codes and leave the offending index and value in those arrays.
Strings are built only when something happens (a trip, the first cycle of a clamp
burst, a fallback); the armed, clamped-burst and latched paths allocate nothing.
Both kernels are compiled at import (explicit signatures) and the hold's is run once
by :meth:`SafetyMonitor.configure`, before the loop activates any hardware.
"""
from __future__ import annotations

import math
import threading
from collections import deque

import numpy as np

from ..model import PRISMATIC, Model
from ..rt.interfaces import Command, RobotState, actuated_indices
from ..rt.limits import MIN_JERK_PEAK_ACCELERATION, MIN_JERK_PEAK_VELOCITY, SafetyError
from ..rt.stability import Sampling
from .kernel import (OK, CLAMP_CONTINUED, CLAMP_NEW, TRIP, NAN_Q, NAN_V, NAN_EFFORT, POSITION, VELOCITY, STALE,
                     NAN_COMMAND, EFFORT, NEVER_CHECKED, L_LO, L_HI, L_VMAX, L_EMAX, L_DAMP, L_SOFT_LO, L_SOFT_HI,
                     L_ROWS, C_CYCLES, C_CLAMPS, C_STALE, C_CLAMPING, C_WATCHDOG, C_CLAMP_MODE, C_DAMPING, C_WHERE,
                     C_STATE_CODE, C_STATE_WHERE, C_WIDTH, V_VALUE, V_STATE_VALUE, V_WIDTH, UNTRUSTED, _latched_hold,
                     _safety_cycle, _write_safe_command)  # noqa: F401  (the kernel's names, as before the split)
from .stop import HOLD_KP, Hold, damping_violation, default_damping, gravity_bound, hold_unavailable

SAFE_MODES = ("hold", "damping", "zero_torque")

def _positive_finite(name, x, allow_zero=True):
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {x}")
    return x


class SafetyMonitor:
    """Checks every cycle's state and command; latches the safe state on any violation.

    See the module docstring for the checks and the safe command. Attributes:
    ``tripped``, ``trip_reason``, ``trip_cycle`` (0-based index of the check
    from which the safe command applies: the check that detected the fault, or
    the next check after an :meth:`estop`/:meth:`report_fault`; in a loop this
    is the loop's cycle index; -1 while armed), ``cycles`` (checks performed),
    ``clamp_count`` (checks with at least one clamped effort), ``events``
    (a deque of the last ``event_capacity`` ``(cycle, kind, detail)`` records,
    kind one of ``"trip"``, ``"clamp"``, ``"rearm"``, ``"safe"``: the hold's stop
    or why it gave way) and ``fallback`` (why the hold gave way in this latch,
    '' while it holds).
    """

    def __init__(self, model: Model, *, position_margin: float = 0.05, velocity_scale: float = 1.0,
                 safe_mode: str | None = None, damping_gain=None, watchdog_cycles: int = 5,
                 effort_clamp: bool = True, event_capacity: int = 256, acceleration_limit=None,
                 hold_kp: float = HOLD_KP, hold_kd: float | None = None, sampling: Sampling | None = None):
        if safe_mode is None:
            safe_mode = "damping" if hold_unavailable(model) else "hold"
        if safe_mode not in SAFE_MODES:
            raise ValueError(f"safe_mode must be one of {SAFE_MODES}, got {safe_mode!r}")
        margin = _positive_finite("position_margin", position_margin)
        scale = _positive_finite("velocity_scale", velocity_scale, allow_zero=False)
        if isinstance(watchdog_cycles, bool) or int(watchdog_cycles) != watchdog_cycles or watchdog_cycles < 1:
            raise ValueError(f"watchdog_cycles must be an integer >= 1, got {watchdog_cycles!r}")
        if int(event_capacity) != event_capacity or event_capacity < 1:
            raise ValueError(f"event_capacity must be an integer >= 1, got {event_capacity!r}")
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.safe_mode = safe_mode
        self.position_margin = margin
        self.velocity_scale = scale
        self.watchdog_cycles = int(watchdog_cycles)
        self.effort_clamp = bool(effort_clamp)

        q_idx, v_idx, names = actuated_indices(model)
        self.q_index = np.ascontiguousarray(q_idx, dtype=np.int64)
        self.v_index = np.ascontiguousarray(v_idx, dtype=np.int64)
        self.joint_names = list(names)
        n = len(names)
        body_of_v = {int(model.idx_v[b]): b for b in range(model.nbodies)}
        self.units = [("m", "m/s", "N") if model.joint_type[body_of_v[int(i)]] == PRISMATIC
                       else ("rad", "rad/s", "N m") for i in self.v_index]

        lower, upper = model.lower[self.q_index], model.upper[self.q_index]
        vmax, emax = model.velocity_limit[self.v_index], model.effort_limit[self.v_index]
        lim = np.zeros((L_ROWS, n))
        lim[L_LO] = lim[L_SOFT_LO] = lower + margin
        lim[L_HI] = lim[L_SOFT_HI] = upper - margin
        bad = np.flatnonzero(lim[L_LO] > lim[L_HI])
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"position_margin {margin} leaves no range for joint '{names[k]}' "
                             f"(limits [{lower[k]:.4g}, {upper[k]:.4g}])")
        lim[L_VMAX] = scale * vmax
        lim[L_EMAX] = emax
        gravity = gravity_bound(model) if model.base == "fixed" else np.zeros(n)  # a floating base: contacts
        if damping_gain is None:
            lim[L_DAMP] = default_damping(emax, lim[L_VMAX], gravity)
        else:
            gain = np.asarray(damping_gain, dtype=float)
            if gain.ndim == 1 and gain.shape[0] == self.nv and self.nv != n:
                gain = gain[self.v_index]
            if gain.ndim == 0:
                gain = np.full(n, float(gain))
            if gain.shape != (n,):
                raise ValueError(f"damping_gain must be a scalar or {n} (actuated joints) or {self.nv} (nv) "
                                 f"values, got shape {gain.shape}")
            if not np.all(np.isfinite(gain)) or np.any(gain < 0):
                raise ValueError(f"damping_gain must be finite and >= 0, got {gain.tolist()}")
            lim[L_DAMP] = gain
        if safe_mode == "damping":
            problem = damping_violation(names, self.units, lim[L_DAMP], gravity, lim[L_VMAX], emax)
            if problem:
                raise ValueError(problem)
        self.damping_gain = lim[L_DAMP].copy()
        self.acceleration_limit = self._per_joint("acceleration_limit", acceleration_limit, n, np.inf)
        self._hold = Hold(model, self.q_index, self.v_index, names, hold_kp, hold_kd, self.acceleration_limit) \
            if safe_mode == "hold" else None
        self._holding = False  # the hold planned its stop in this latch
        self.fallback = ""     # why the hold gave way to the fallback in this latch ('' while it holds)
        self._lim = np.ascontiguousarray(lim)
        self._ctl = np.zeros(C_WIDTH, dtype=np.int64)
        self._ctl[C_WATCHDOG] = self.watchdog_cycles
        self._ctl[C_CLAMP_MODE] = 1 if self.effort_clamp else 0
        self._ctl[C_DAMPING] = 0 if safe_mode == "zero_torque" else 1  # the hold's fallback is damping
        self._ctl[C_STATE_CODE] = NEVER_CHECKED
        self._val = np.zeros(V_WIDTH)

        self.tripped, self.trip_reason, self.trip_cycle, self.operator_stop = False, "", -1, False
        self.estop_count = 0  # every estop() call, latched or not: a re-arm sent before one must not undo it
        self.trip_count = self.rearm_count = 0  # trips into the safe state (one per latch), re-arms out of it
        self._transition = threading.Lock()
        self.events: deque = deque(maxlen=int(event_capacity))
        self._fault_pending = False   # report_fault() since the last check
        self._fault_active = False    # the last check was told of a driver fault (or one is pending)
        self._fault_reason = ""
        self._reaction = None         # estop(..., reaction): replaces the safe command while latched
        if sampling is not None:
            self.configure(sampling)

    def configure(self, sampling: Sampling) -> None:
        """The loop's sampling (period, actuator latency), given by the loop before it activates any hardware:
        the hold checks its gains against the loop's stability bound (ValueError naming it) and its kernel
        runs once, on scratch arrays. Nothing to do in the other modes."""
        hold = self._hold
        if hold is None:
            return
        hold.configure(sampling)
        ctl = self._ctl.copy()
        ctl[C_STATE_CODE] = OK
        model = self.model
        q, v, effort = model.neutral_configuration(), np.zeros(model.nv), np.zeros(model.nv)
        _latched_hold(True, q, v, effort, self.q_index, self.v_index, hold.dyn.mi, hold.dyn.mf, hold.dyn.ws,
                      hold.plan.copy(), hold.clock.copy(), hold.mass, hold.alpha, hold.tau, ctl)

    # -- counters ------------------------------------------------------------------
    @property
    def cycles(self) -> int:
        return int(self._ctl[C_CYCLES])

    @property
    def clamp_count(self) -> int:
        return int(self._ctl[C_CLAMPS])

    @property
    def stale_cycles(self) -> int:
        """Current run of consecutive checks with ``state.fresh`` False."""
        return int(self._ctl[C_STALE])

    @property
    def armed(self) -> bool:
        return not self.tripped

    # -- the per-cycle check -------------------------------------------------------
    def check(self, state: RobotState, command: Command, driver_fault: bool = False, reason: str = "") -> bool:
        """Check ``state`` and ``command`` (clamping efforts in place); True when armed and OK.

        On a trip, or while latched, the command is overwritten with the safe
        command and False is returned. ``driver_fault=True`` (with its ``reason``)
        reports a fault of the driver this cycle, which trips.
        """
        fault = driver_fault or self._fault_pending
        code = _safety_cycle(state.q, state.v, state.effort, command.effort, command.stiffness,
                             command.damping, command.velocity, bool(state.fresh),
                             self.tripped or fault, self.q_index, self.v_index, self._lim, self._ctl, self._val)
        if code < CLAMP_NEW and not fault and not self.tripped:
            self._fault_active = False
            return True
        return self._event(code, fault, driver_fault, reason, state, command)

    def _event(self, code: int, fault: bool, driver_fault: bool, reason: str, state, command) -> bool:
        """The slow path of :meth:`check`: anything other than armed-and-quiet."""
        if driver_fault:
            self._fault_reason = reason or "driver reported a fault"
        self._fault_active = fault
        self._fault_pending = False
        if self.tripped:
            self._hold_cycle(state, command, fault)
            if self._reaction is not None:  # an e-stop's reaction replaces the safe command while latched
                self._reaction(state, command)
            return False
        if fault:
            self._trip(f"driver fault: {self._fault_reason}", self.cycles - 1)
            self._hold_cycle(state, command, fault)
            return False
        if code >= TRIP:
            self._trip(self._describe(code, int(self._ctl[C_WHERE]), float(self._val[V_VALUE])), self.cycles - 1)
            self._hold_cycle(state, command, fault)
            return False
        if code == CLAMP_NEW:
            k = int(self._ctl[C_WHERE])
            e = float(self._val[V_VALUE])
            detail = (f"effort limit: joint '{self.joint_names[k]}' effort {e:.4g} {self.units[k][2]} "
                      f"clamped to {np.copysign(self._lim[L_EMAX, k], e):.4g}")
            self.events.append((self.cycles - 1, "clamp", detail))
        return True

    def _hold_cycle(self, state, command, fault: bool) -> None:
        """While latched in 'hold': the hold's command over the fallback the kernel wrote, as long as the state
        is trusted; from the first cycle it is not, the fallback for the rest of the latch, with an event
        saying which and why. Allocates nothing while it holds."""
        hold = self._hold
        if hold is None or self.fallback:
            return
        if fault:
            return self._fall_back(f"driver fault: {self._fault_reason}", state)
        if hold.sampling is None:
            return self._fall_back("the monitor was given no loop period (SafetyMonitor.configure)", state)
        status = _latched_hold(not self._holding, state.q, state.v, command.effort, self.q_index, self.v_index,
                               hold.dyn.mi, hold.dyn.mf, hold.dyn.ws, hold.plan, hold.clock, hold.mass, hold.alpha,
                               hold.tau, self._ctl)
        if status == OK:
            if not self._holding:
                self._holding = True
                self.events.append((self.cycles - 1, "safe", hold.describe()))
            return
        if status == UNTRUSTED:
            code = int(self._ctl[C_STATE_CODE])
            why = self._describe(code, int(self._ctl[C_STATE_WHERE]), float(self._val[V_STATE_VALUE])) \
                if code != OK else self._describe(STALE, -1, float(self._ctl[C_STALE]))
        else:
            why = f"the model's dynamics kernel returned status {status}"
        self._fall_back(why, state)

    def _fall_back(self, why: str, state) -> None:
        finite = bool(np.all(np.isfinite(state.v[self.v_index])))
        self.fallback = f"hold abandoned ({why}): " + (
            "damping instead (it needs only the measured velocities)" if finite else
            "zero torque instead (a velocity is not finite: nothing to damp with; damping once they all are)")
        self.events.append((self.cycles - 1, "safe", self.fallback))

    # -- trips from outside the check ------------------------------------------------
    def safe_command(self, state: RobotState, command: Command) -> None:
        """Overwrite ``command`` with the damping (or zero-torque) command for ``state``, with no check and no
        trip: the last command of an orderly stop, written once before the drivers are deactivated (a hold
        needs cycles to come; the drivers' own stop follows at once)."""
        _write_safe_command(state.v, command.effort, command.stiffness, command.damping, command.velocity,
                            self.v_index, self._lim, bool(self._ctl[C_DAMPING]))

    def estop(self, reason: str = "software e-stop", operator: bool = False, reaction=None) -> None:
        """Software e-stop: trip now; the next :meth:`check` writes the safe command.

        ``operator``: a person asked for it (control channel, dashboard, schedule), as opposed to
        the software stopping itself (a failing component, overruns); the run reports it as such.
        ``reaction(state, command)``: run after each check while this trip is latched, it may replace the
        safe effort (a collision reflex; within the effort limits, allocation-free). Callable from any thread."""
        with self._transition:
            self.estop_count += 1
            if not self.tripped:
                self.operator_stop, self._reaction = bool(operator), reaction
            self._trip(f"e-stop: {reason}", self.cycles)

    def report_fault(self, reason: str = "driver reported a fault") -> None:
        """A driver fault: trip now. It counts as persisting until a check without ``driver_fault``."""
        self._fault_reason = reason
        self._fault_pending = True
        self._fault_active = True
        self._trip(f"driver fault: {reason}", self.cycles)

    def _trip(self, reason: str, cycle: int) -> None:
        if self.tripped:
            return
        self.tripped = True
        self.trip_reason = reason
        self.trip_cycle = cycle
        self.trip_count += 1
        self.events.append((cycle, "trip", reason))

    # -- leaving the safe state --------------------------------------------------------
    def rearm_blockers(self, state: RobotState | None = None) -> list[str]:
        """Why :meth:`rearm` would refuse now (empty: it would succeed).

        With ``state`` (the latest measured state), a joint outside its soft limits does not block
        as long as it lies within one ``position_margin`` beyond its hard limit: :meth:`rearm` then
        re-arms into recovery for it.
        """
        problems = []
        if self._fault_active:
            problems.append(f"driver fault still reported: {self._fault_reason}")
        state_code = int(self._ctl[C_STATE_CODE])
        if state_code == NEVER_CHECKED:
            problems.append("no state has been checked yet")
        elif state_code != OK and (state is None or state_code not in (POSITION, VELOCITY)):
            problems.append(self._describe(state_code, int(self._ctl[C_STATE_WHERE]),
                                           float(self._val[V_STATE_VALUE])))
        elif state is not None:
            problems += self._recovery_blockers(state)
        stale = int(self._ctl[C_STALE])
        if stale > self.watchdog_cycles:
            problems.append(self._describe(STALE, -1, float(stale)))
        return problems

    def _recovery_blockers(self, state: RobotState) -> list[str]:
        problems = []
        margin = self.position_margin
        lower, upper = self.model.lower[self.q_index], self.model.upper[self.q_index]
        for k, name in enumerate(self.joint_names):
            x, speed = float(state.q[self.q_index[k]]), abs(float(state.v[self.v_index[k]]))
            if not (lower[k] - margin <= x <= upper[k] + margin):
                qu = self.units[k][0]
                problems.append(f"joint '{name}' q = {x:.4g} {qu} lies more than the position margin ({margin:g}) "
                                f"beyond its hard limits [{lower[k]:.4g}, {upper[k]:.4g}]: move it back by hand")
            if speed > self._lim[L_VMAX, k]:
                problems.append(self._describe(VELOCITY, k, speed))
        return problems

    def rearm(self, state: RobotState | None = None, estop_count: int | None = None) -> list[str]:
        """Leave the safe state if the last checked state is finite, inside the limits and fresh enough.

        With ``state``, joints outside their soft limits (but within one margin of their hard
        limits) are re-armed into recovery: the position bound on their violated side becomes
        their current position less one ``position_margin``, and returns to the soft limit by
        itself once the joint is back inside it. Returns the names of the joints in recovery.
        Raises :class:`SafetyError` (staying latched) naming what still blocks it. Does nothing
        when armed. ``estop_count`` (the :attr:`estop_count` seen when the re-arm was asked for):
        refuse if an e-stop came after it.
        """
        if not self.tripped:
            return []
        if estop_count is None:
            estop_count = self.estop_count
        problems = self.rearm_blockers(state)
        if estop_count != self.estop_count:
            problems.append("an e-stop arrived after this re-arm was asked for; ask again")
        if problems:
            raise SafetyError(f"cannot re-arm (tripped at cycle {self.trip_cycle}: {self.trip_reason}): "
                              + "; ".join(problems))
        lim, margin = self._lim, self.position_margin
        low, high = lim[L_SOFT_LO].copy(), lim[L_SOFT_HI].copy()
        if state is not None:
            q = state.q[self.q_index]
            low = np.where(q < low, q - margin, low)
            high = np.where(q > high, q + margin, high)
        recovering = [name for k, name in enumerate(self.joint_names)
                      if low[k] < lim[L_SOFT_LO, k] or high[k] > lim[L_SOFT_HI, k]]
        with self._transition:
            if estop_count != self.estop_count:
                raise SafetyError("cannot re-arm: an e-stop arrived while re-arming; ask again")
            lim[L_LO], lim[L_HI] = low, high
            detail = f"re-armed after: {self.trip_reason}"
            if recovering:
                detail += f"; recovering {recovering} from outside their soft limits"
            self.events.append((self.cycles, "rearm", detail))
            self.rearm_count += 1
            self.tripped, self._reaction, self.trip_reason, self.trip_cycle = False, None, "", -1
            self._holding, self.fallback = False, ""
            self.operator_stop = False
            self._ctl[C_CLAMPING] = 0
        return recovering

    # -- limits of planned motion ----------------------------------------------------------
    def soft_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) soft position limits of the actuated joints (copies)."""
        return self._lim[L_SOFT_LO].copy(), self._lim[L_SOFT_HI].copy()

    @property
    def velocity_bound(self) -> np.ndarray:
        """|v| above which the monitor trips, per actuated joint (``velocity_scale * velocity_limit``)."""
        return self._lim[L_VMAX].copy()

    def position_violation(self, q, what: str) -> str:
        """'' when every actuated-joint value of ``q`` (one per joint) lies inside the soft limits, else why."""
        q = np.asarray(q, dtype=float)
        for k, name in enumerate(self.joint_names):
            lo, hi = self._lim[L_SOFT_LO, k], self._lim[L_SOFT_HI, k]
            if not lo <= q[k] <= hi:
                return (f"{what}: joint '{name}' = {q[k]:.6g} {self.units[k][0]} outside its soft limits "
                        f"[{lo:.6g}, {hi:.6g}] (limits minus position_margin {self.position_margin:g})")
        return ""

    def min_jerk_violation(self, start, goal, duration: float) -> str:
        """'' when a minimum-jerk move from ``start`` to ``goal`` in ``duration`` s stays within the velocity
        bound and the acceleration limit of every joint, else why (naming the joint and the shortest
        duration that would do). Peaks: 1.875 |dq| / T and 5.774 |dq| / T^2."""
        dq = np.abs(np.asarray(goal, dtype=float) - np.asarray(start, dtype=float))
        for k, name in enumerate(self.joint_names):
            vmax, amax = self._lim[L_VMAX, k], self.acceleration_limit[k]
            peak_v = MIN_JERK_PEAK_VELOCITY * dq[k] / duration
            peak_a = MIN_JERK_PEAK_ACCELERATION * dq[k] / duration ** 2
            shortest = max(MIN_JERK_PEAK_VELOCITY * dq[k] / vmax if vmax > 0 else math.inf,
                           math.sqrt(MIN_JERK_PEAK_ACCELERATION * dq[k] / amax) if amax > 0 else math.inf)
            _, vu, _ = self.units[k]
            if peak_v > vmax:
                return (f"joint '{name}': a move of {dq[k]:.4g} in {duration:g} s peaks at {peak_v:.4g} {vu}, "
                        f"above its velocity limit {vmax:.4g} {vu}; it needs at least {shortest:.4g} s")
            if peak_a > amax:
                return (f"joint '{name}': a move of {dq[k]:.4g} in {duration:g} s peaks at an acceleration of "
                        f"{peak_a:.4g} {vu}/s, above its limit {amax:.4g} {vu}/s; it needs at least {shortest:.4g} s")
        return ""

    def oscillation_violation(self, amplitude, frequency) -> str:
        """'' when ``amplitude sin(2 pi f t + phase)`` (per joint) stays within the velocity bound and the
        acceleration limit, else why (naming the joint)."""
        amplitude = np.abs(np.broadcast_to(np.asarray(amplitude, dtype=float), (len(self.joint_names),)))
        omega = 2.0 * math.pi * np.broadcast_to(np.asarray(frequency, dtype=float), (len(self.joint_names),))
        for k, name in enumerate(self.joint_names):
            peak_v, peak_a = amplitude[k] * omega[k], amplitude[k] * omega[k] ** 2
            _, vu, _ = self.units[k]
            if peak_v > self._lim[L_VMAX, k]:
                return (f"joint '{name}': amplitude {amplitude[k]:.4g} at {omega[k] / (2 * math.pi):.4g} Hz peaks at "
                        f"{peak_v:.4g} {vu}, above its velocity limit {self._lim[L_VMAX, k]:.4g} {vu}")
            if peak_a > self.acceleration_limit[k]:
                return (f"joint '{name}': amplitude {amplitude[k]:.4g} at {omega[k] / (2 * math.pi):.4g} Hz peaks at "
                        f"{peak_a:.4g} {vu}/s, above its acceleration limit {self.acceleration_limit[k]:.4g} {vu}/s")
        return ""

    def _per_joint(self, name: str, value, n: int, default: float) -> np.ndarray:
        if value is None:
            return np.full(n, default)
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
        if arr.shape != (n,):
            raise ValueError(f"{name} must be a scalar or {n} values (one per actuated joint), got shape {arr.shape}")
        if not np.all(arr > 0):
            raise ValueError(f"{name} must be > 0, got {arr.tolist()}")
        return arr

    # -- messages -------------------------------------------------------------------------
    def _q_label(self, i: int) -> str:
        hits = np.flatnonzero(self.q_index == i)
        return f"joint '{self.joint_names[hits[0]]}'" if hits.size else "floating base"

    def _v_label(self, i: int) -> str:
        hits = np.flatnonzero(self.v_index == i)
        return f"joint '{self.joint_names[hits[0]]}'" if hits.size else "floating base"

    def _describe(self, code: int, where: int, value: float) -> str:
        if code == NAN_Q:
            return f"non-finite state: q[{where}] ({self._q_label(where)}) = {value}"
        if code == NAN_V:
            return f"non-finite state: v[{where}] ({self._v_label(where)}) = {value}"
        if code == NAN_EFFORT:
            return f"non-finite state: effort[{where}] ({self._v_label(where)}) = {value}"
        if code == NAN_COMMAND:
            return f"non-finite command: effort[{where}] ({self._v_label(where)}) = {value}"
        if code == STALE:
            return (f"stale state: no fresh sample for {int(value)} consecutive cycles "
                    f"(watchdog {self.watchdog_cycles})")
        name, (qu, vu, eu) = self.joint_names[where], self.units[where]
        if code == POSITION:
            lo, hi = self._lim[L_LO, where], self._lim[L_HI, where]
            return (f"position limit: joint '{name}' q = {value:.4g} {qu} outside the soft limits "
                    f"[{lo:.4g}, {hi:.4g}]")
        if code == VELOCITY:
            return f"velocity limit: joint '{name}' |v| = {abs(value):.4g} {vu} > {self._lim[L_VMAX, where]:.4g}"
        if code == EFFORT:
            return (f"effort limit: joint '{name}' |effort| = {abs(value):.4g} {eu} > "
                    f"{self._lim[L_EMAX, where]:.4g}")
        return f"safety code {code}"

    def __repr__(self) -> str:
        status = f"tripped: {self.trip_reason}" if self.tripped else "armed"
        return f"SafetyMonitor({self.model.name!r}, {self.safe_mode}, {status}, cycles={self.cycles})"
