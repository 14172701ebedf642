"""Desired-motion generators for the actuated joints.

Every generator is a :class:`~loops.base.Trajectory`: it knows its number of
joints ``n`` and its ``duration`` (s), and :meth:`sample` writes the desired
position, velocity and acceleration at time ``t`` into three preallocated
float64 arrays of length ``n``. Sampling allocates nothing: the arithmetic runs
in small compiled (numba) kernels over arrays prepared at construction.

* :class:`MinimumJerk` -- quintic point-to-point move, zero velocity and
  acceleration at both ends (the minimum-jerk profile).
* :class:`CubicSplineTrajectory` -- C2 cubic spline through waypoints
  ("clamped": zero end velocities, "natural": zero end accelerations).
* :class:`Sinusoid` -- ``center + amplitude sin(2 pi f t + phase)``.
* :func:`create_trajectory` -- build one of them by name.

Point-to-point generators hold their end points outside their time range
(position at the end point, zero velocity and acceleration). Constructors
check their parameters and raise ``ValueError`` naming the parameter and the
offending value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import OptionsBase, options_of, setting
from rtctl.registry import TRAJECTORIES
from rtctl.rt.limits import MIN_JERK_PEAK_VELOCITY

from .base import Trajectory

__all__ = ["CubicSplineTrajectory", "MinimumJerk", "Sinusoid", "create_trajectory"]

# Kernel status codes (0 = OK). 1..3: q, qd, qdd has the wrong length; 4: t is not finite.
_OK, _BAD_T = 0, 4
_OUT_NAMES = ("q", "qd", "qdd")

_V = "float64[::1]"
_SIG_MIN_JERK = f"int64(float64, float64, float64, {_V}, {_V}, {_V}, {_V}, {_V})"
_SIG_SPLINE = f"int64(float64, {_V}, float64[:, :, ::1], float64[:, ::1], float64[:, ::1], {_V}, {_V}, {_V})"
_SIG_SINUSOID = f"int64(float64, {_V}, {_V}, {_V}, {_V}, {_V}, {_V}, {_V})"


# -- compiled kernels ---------------------------------------------------------
@njit(cache=True)
def _check_out(n, t, q, qd, qdd):
    if q.shape[0] != n:
        return 1
    if qd.shape[0] != n:
        return 2
    if qdd.shape[0] != n:
        return 3
    if not math.isfinite(t):
        return _BAD_T
    return _OK


@njit(_SIG_MIN_JERK, cache=True)
def _min_jerk_sample(t, t0, duration, start, goal, q, qd, qdd):
    """s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5, tau = (t - t0) / T; q = start + (goal - start) s."""
    n = start.shape[0]
    status = _check_out(n, t, q, qd, qdd)
    if status != _OK:
        return status
    if t <= t0 or t >= t0 + duration:
        end = start if t <= t0 else goal
        for j in range(n):
            q[j] = end[j]
            qd[j] = 0.0
            qdd[j] = 0.0
        return _OK
    tau = (t - t0) / duration
    s = tau * tau * tau * (10.0 + tau * (-15.0 + 6.0 * tau))
    ds = tau * tau * (30.0 + tau * (-60.0 + 30.0 * tau)) / duration
    dds = tau * (60.0 + tau * (-180.0 + 120.0 * tau)) / (duration * duration)
    for j in range(n):
        d = goal[j] - start[j]
        # Measured from the nearer end point so both ends are reproduced to the last bit.
        q[j] = start[j] + d * s if s <= 0.5 else goal[j] - d * (1.0 - s)
        qd[j] = d * ds
        qdd[j] = d * dds
    return _OK


@njit(_SIG_SPLINE, cache=True)
def _spline_sample(t, x, c, start_state, end_state, q, qd, qdd):
    """Piecewise cubic q = c0 s^3 + c1 s^2 + c2 s + c3, s = t - x_i, on [x_i, x_{i+1}).

    ``start_state``/``end_state`` (3, n) are q, qd, qdd at the first and last knot.
    """
    n = c.shape[2]
    status = _check_out(n, t, q, qd, qdd)
    if status != _OK:
        return status
    m = x.shape[0] - 1
    if t <= x[0] or t >= x[m]:
        outside = t < x[0] or t > x[m]
        state = start_state if t <= x[0] else end_state
        for j in range(n):
            q[j] = state[0, j]
            qd[j] = 0.0 if outside else state[1, j]
            qdd[j] = 0.0 if outside else state[2, j]
        return _OK
    lo, hi = 0, m - 1  # find the interval i with x[i] <= t < x[i + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    s = t - x[lo]
    for j in range(n):
        a, b, cc, d = c[0, lo, j], c[1, lo, j], c[2, lo, j], c[3, lo, j]
        q[j] = ((a * s + b) * s + cc) * s + d
        qd[j] = (3.0 * a * s + 2.0 * b) * s + cc
        qdd[j] = 6.0 * a * s + 2.0 * b
    return _OK


@njit(_SIG_SINUSOID, cache=True)
def _sinusoid_sample(t, center, amplitude, omega, phase, q, qd, qdd):
    n = center.shape[0]
    status = _check_out(n, t, q, qd, qdd)
    if status != _OK:
        return status
    for j in range(n):
        arg = omega[j] * t + phase[j]
        s, c = math.sin(arg), math.cos(arg)
        q[j] = center[j] + amplitude[j] * s
        qd[j] = amplitude[j] * omega[j] * c
        qdd[j] = -amplitude[j] * omega[j] * omega[j] * s
    return _OK


# -- parameter checking ---------------------------------------------------------
def _array(cls, name, value, ndim, length=None, *, allow_scalar_for=None, column_if_1d=False, joints=None,
           joint_axis=0):
    """``value`` as a finite float64 array of rank ``ndim`` (and leading length), or ValueError. With ``joints``
    (the actuated joints' names along ``joint_axis``, as a config gives them) the message names the key and the
    joint, not the class and the array."""
    where = _where(cls if joints is None else None, name)
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be numeric, got {value!r}") from None
    if allow_scalar_for is not None and arr.ndim == 0:
        arr = np.full(allow_scalar_for, float(arr))
    if column_if_1d and arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != ndim or arr.size == 0:
        shape = "a non-empty vector" if ndim == 1 else f"a non-empty {ndim}-D array"
        raise ValueError(f"{where} must be {shape}, got {value!r} (shape {arr.shape})")
    if joints is not None and arr.shape[joint_axis] != len(joints):
        what = "values" if ndim == 1 else ("rows" if joint_axis == 0 else "columns")
        raise ValueError(f"{name} must have {len(joints)} {what}, one per actuated joint ({', '.join(joints)}), "
                         f"got {arr.shape[joint_axis]}")
    if length is not None and arr.shape[0] != length:
        what = f"length {length}" if ndim == 1 else f"{length} rows (one per entry of times)"
        raise ValueError(f"{where} must have {what}, got {arr.shape[0]} ({value!r})")
    if not np.all(np.isfinite(arr)):
        if joints is not None:
            index = tuple(np.argwhere(~np.isfinite(arr))[0])
            entry = f"[{index[1 - joint_axis]}]" if ndim == 2 else ""
            raise ValueError(f"{name}: joint '{joints[index[joint_axis]]}'{entry} is {arr[index]}; must be finite")
        raise ValueError(f"{where} must be finite, got {value!r}")
    return np.ascontiguousarray(arr)


def _joint_values(cls, name, values, joints, test, requirement):
    """ValueError naming the first joint whose entry of ``values`` fails ``test`` (its index without names)."""
    bad = np.flatnonzero(~test(np.asarray(values)))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{_joint_entry(cls, name, k, joints)} is {values[k]:.6g}; {requirement}")


def _joint_entry(cls, name, k, joints) -> str:
    """``name: joint 'NAME'`` (joints with names), else ``Class: name[k]``."""
    return f"{name}: joint '{joints[k]}'" if joints is not None else f"{_where(cls, name)}[{k}]"


def _scalar(cls, name, value, *, positive=False, nonnegative=False):
    """``value`` as a finite float, or ValueError naming ``cls`` (None: a config's key alone) and ``name``."""
    where = _where(cls, name)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{where} must be finite, got {value!r}")
    if positive and x <= 0:
        raise ValueError(f"{where} must be > 0, got {value!r}")
    if nonnegative and x < 0:
        raise ValueError(f"{where} must be >= 0, got {value!r}")
    return x


def _where(cls, name) -> str:
    """How an error names a parameter: ``Class: name``, or the key alone when ``cls`` is None."""
    return f"{cls}: {name}" if cls else name


def _owner(trajectory, joint_names):
    """The class name errors start with, or None when the joints have names (a config's: its keys say enough)."""
    return None if joint_names is not None else type(trajectory).__name__


class _CompiledTrajectory(Trajectory):
    """Shared ``sample``: run the kernel on ``self._args``; explain a rejected call."""

    _kernel = None
    _args: tuple = ()

    def sample(self, t: float, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        """Write the desired position, velocity, acceleration at time ``t`` (s) into ``q``, ``qd``, ``qdd``.

        The outputs must be writable C-contiguous float64 arrays of length ``n``.
        """
        try:
            status = self._kernel(t, *self._args, q, qd, qdd)
        except TypeError:
            self._explain(t, (q, qd, qdd))
            raise
        if status != _OK:
            self._raise(status, t)

    def _explain(self, t, outs):
        try:
            float(t)
        except (TypeError, ValueError):
            raise ValueError(f"{type(self).__name__}.sample: t must be a number, got {t!r}") from None
        for name, arr in zip(_OUT_NAMES, outs):
            if (type(arr) is not np.ndarray or arr.dtype != np.float64 or arr.ndim != 1
                    or not arr.flags.c_contiguous or not arr.flags.writeable):
                raise ValueError(f"{type(self).__name__}.sample: {name} must be a writable C-contiguous float64 "
                                 f"array of shape ({self.n},), got {type(arr).__name__} "
                                 f"{getattr(arr, 'dtype', '')} {getattr(arr, 'shape', '')}") from None

    def _raise(self, status, t):
        if status == _BAD_T:
            raise ValueError(f"{type(self).__name__}.sample: t must be finite, got {t!r}")
        raise ValueError(f"{type(self).__name__}.sample: {_OUT_NAMES[status - 1]} must have shape ({self.n},)")


# -- generators -------------------------------------------------------------------
class MinimumJerk(_CompiledTrajectory):
    """Minimum-jerk (quintic) move from ``start`` to ``goal`` in ``duration`` s, starting at ``t0``.

    ``q(t) = start + (goal - start) s(tau)``, ``s = 10 tau^3 - 15 tau^4 + 6 tau^5``,
    ``tau = (t - t0) / duration``: zero velocity and acceleration at both ends,
    peak velocity ``1.875 |goal - start| / duration`` at mid-time. Holds
    ``start`` for ``t <= t0`` and ``goal`` for ``t >= t0 + duration``.
    """

    _kernel = staticmethod(_min_jerk_sample)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        start: object = setting("floats", None)        # default: the plant's initial position
        goal: object = setting("floats", None, required=True)
        duration: float = setting("float", None, positive=True, required=True)
        t0: float = setting("float", 0.0, low=0.0)

    @classmethod
    def from_config(cls, options: dict, context):
        start = options["start"] if options["start"] is not None else context.q0[context.q_index].tolist()
        return cls(cls.Options(**dict(options, start=start)), joint_names=context.joint_names)

    def limit_violation(self, safety) -> str:
        """Start and goal inside the soft limits, the move's peak velocity and acceleration within bounds."""
        for what, q in (("[trajectory] start", self.start), ("[trajectory] goal", self.goal)):
            problem = safety.position_violation(np.asarray(q, dtype=float), what)
            if problem:
                return problem
        problem = safety.min_jerk_violation(self.start, self.goal, float(self.duration))
        return f"[trajectory] min_jerk: {problem}" if problem else ""

    def __init__(self, options: "MinimumJerk.Options", *, joint_names=None):
        self.options = options = options_of(self, options)
        start, goal, duration, t0 = options.start, options.goal, options.duration, options.t0
        cls = _owner(self, joint_names)
        if start is None:
            raise ValueError(f"{_where(cls, 'start')} is required (a config takes the plant's initial position)")
        self.start = _array(cls, "start", start, 1, joints=joint_names)
        self.n = self.start.shape[0]
        self.goal = _array(cls, "goal", goal, 1, self.n, joints=joint_names)
        self.duration = _scalar(cls, "duration", duration, positive=True)
        self.t0 = _scalar(cls, "t0", t0)
        self._args = (self.t0, self.duration, self.start, self.goal)

    retargetable = True

    def retarget(self, start, goal, t0: float, duration: float) -> None:
        self.start[:] = start
        self.goal[:] = goal
        self.t0, self.duration = float(t0), float(duration)
        self._args = (self.t0, self.duration, self.start, self.goal)

    def peak_velocity(self) -> np.ndarray:
        """|qd| at its largest over the move, per joint: 1.875 |goal - start| / duration."""
        return MIN_JERK_PEAK_VELOCITY * np.abs(self.goal - self.start) / self.duration

    def __repr__(self):
        return f"MinimumJerk(n={self.n}, duration={self.duration}, t0={self.t0})"


class CubicSplineTrajectory(_CompiledTrajectory):
    """C2 cubic spline through ``waypoints`` (shape (k, n), k >= 2) at increasing ``times``.

    ``boundary="clamped"`` gives zero velocity at the first and last waypoint,
    ``"natural"`` zero acceleration there. The spline is fitted once with
    :class:`scipy.interpolate.CubicSpline`; its piecewise coefficients are then
    evaluated by a compiled kernel (Horner form, binary search for the
    interval). ``duration = times[-1] - times[0]``. Outside ``[times[0],
    times[-1]]`` the end waypoint is held with zero velocity and acceleration
    (for "natural" that is a velocity step at the ends).
    """

    _kernel = staticmethod(_spline_sample)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        times: object = setting("floats", None, required=True)
        waypoints: object = setting("matrix", None, required=True)
        boundary: str = setting("str", "clamped", choices=("clamped", "natural"))

    @classmethod
    def from_config(cls, options: dict, context):
        return cls(cls.Options(**options), joint_names=context.joint_names)

    def limit_violation(self, safety) -> str:
        """Every waypoint inside the soft limits."""
        for i, row in enumerate(np.atleast_2d(np.asarray(self.waypoints, dtype=float))):
            problem = safety.position_violation(row, f"[trajectory] waypoints[{i}]")
            if problem:
                return problem
        return ""

    def __init__(self, options: "CubicSplineTrajectory.Options", *, joint_names=None):
        from scipy.interpolate import CubicSpline

        self.options = options = options_of(self, options)
        times, waypoints, boundary = options.times, options.waypoints, options.boundary

        cls = _owner(self, joint_names)
        self.times = _array(cls, "times", times, 1)
        k = self.times.shape[0]
        if k < 2:
            raise ValueError(f"{_where(cls, 'times')} must hold at least 2 values, got {times!r}")
        steps = np.diff(self.times)
        if np.any(steps <= 0):
            bad = int(np.argmax(steps <= 0))
            raise ValueError(f"{_where(cls, 'times')} must be strictly increasing, got {times!r} "
                             f"(times[{bad + 1}] = {self.times[bad + 1]} <= times[{bad}] = {self.times[bad]})")
        self.waypoints = _array(cls, "waypoints", waypoints, 2, k, column_if_1d=True, joints=joint_names,
                                joint_axis=1)
        self.n = self.waypoints.shape[1]
        self.boundary = boundary
        self.duration = float(self.times[-1] - self.times[0])
        spline = CubicSpline(self.times, self.waypoints, axis=0, bc_type=boundary)
        self.coefficients = np.ascontiguousarray(spline.c)  # (4, k - 1, n), highest power first
        start_state = np.zeros((3, self.n))
        end_state = np.zeros((3, self.n))
        for d in (1, 2):
            start_state[d] = spline(self.times[0], d)
            end_state[d] = spline(self.times[-1], d)
        start_state[0], end_state[0] = self.waypoints[0], self.waypoints[-1]
        # The boundary condition holds exactly, not just to round-off.
        zeroed = 1 if boundary == "clamped" else 2
        start_state[zeroed] = end_state[zeroed] = 0.0
        self.spline = spline
        self._args = (self.times, self.coefficients, start_state, end_state)

    def __repr__(self):
        return f"CubicSplineTrajectory(n={self.n}, knots={self.times.shape[0]}, boundary={self.boundary!r})"


class Sinusoid(_CompiledTrajectory):
    """``q = center + amplitude sin(2 pi frequency t + phase)`` per joint (frequency in Hz).

    ``center`` fixes ``n``; ``amplitude``, ``frequency`` (>= 0) and ``phase``
    (rad) are scalars or length-``n`` vectors. ``duration`` is ``inf``.
    """

    _kernel = staticmethod(_sinusoid_sample)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        center: object = setting("floats", None, required=True)
        amplitude: object = setting("floats", None, required=True)
        frequency: object = setting("floats", None, positive=True, required=True)   # Hz
        phase: object = setting("floats", 0.0)                                      # rad

    @classmethod
    def from_config(cls, options: dict, context):
        return cls(cls.Options(**options), joint_names=context.joint_names)

    def limit_violation(self, safety) -> str:
        """Both ends of the swing inside the soft limits, peak velocity and acceleration within bounds."""
        center, amplitude = np.asarray(self.center), np.abs(np.asarray(self.amplitude))
        for what, q in (("[trajectory] center - amplitude", center - amplitude),
                        ("[trajectory] center + amplitude", center + amplitude)):
            problem = safety.position_violation(q, what)
            if problem:
                return problem
        problem = safety.oscillation_violation(self.amplitude, self.frequency)
        return f"[trajectory] sinusoid: {problem}" if problem else ""

    oscillator = True

    def __init__(self, options: "Sinusoid.Options", *, joint_names=None):
        self.options = options = options_of(self, options)
        center, amplitude, frequency, phase = options.center, options.amplitude, options.frequency, options.phase
        cls = _owner(self, joint_names)
        self.center = _array(cls, "center", center, 1, joints=joint_names)
        self.n = n = self.center.shape[0]
        self.amplitude = _array(cls, "amplitude", amplitude, 1, n, allow_scalar_for=n, joints=joint_names)
        self.frequency = _array(cls, "frequency", frequency, 1, n, allow_scalar_for=n, joints=joint_names)
        self.phase = _array(cls, "phase", phase, 1, n, allow_scalar_for=n, joints=joint_names)
        self.duration = math.inf
        self.omega = 2.0 * np.pi * self.frequency    # rad/s, what the kernel reads: kept equal to 2 pi frequency
        self._args = (self.center, self.amplitude, self.omega, self.phase)

    def peak_velocity(self) -> np.ndarray:
        """|qd| at its largest, per joint: |amplitude| 2 pi frequency."""
        return np.abs(self.amplitude) * self.omega

    def __repr__(self):
        return f"Sinusoid(n={self.n})"




def create_trajectory(kind: str, **params) -> Trajectory:
    """Build a trajectory by name: ``"min_jerk"`` (:class:`MinimumJerk`), ``"spline"``
    (:class:`CubicSplineTrajectory`) or ``"sinusoid"`` (:class:`Sinusoid`), with that
    class's constructor parameters as keywords."""
    return TRAJECTORIES.create(kind, **params)
