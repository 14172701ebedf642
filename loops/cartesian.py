"""Cartesian references for task-space controllers: rotation maps and a minimum-jerk pose path.

A pose is 12 numbers: the world rotation ``R`` row-major (9), then the position ``p`` (3), in m.
Twists and their rates are Featherstone's [angular; linear] in world axes: ``[omega; v_P]`` (rad/s,
m/s) and their time derivatives ``[alpha; a_P]`` (rad/s^2, m/s^2) of the frame origin P, the
convention of :mod:`rtctl.dynamics`.

:class:`CartesianMinimumJerk` (registered as ``cartesian_min_jerk``) moves a controller's frame from
its measured pose at activation to a goal pose. The interface between it and a Cartesian controller
(:class:`loops.impedance.CartesianImpedance`) is two calls, both allocation-free:

* ``anchor(t, pose)`` -- the controller's first cycle after each activation (run start, re-arm)
  hands over the measured pose of its frame; the move starts there, ``delay`` s later, and lasts
  ``duration`` s (a re-arm restarts it from where the robot is: the spring never starts stretched);
* ``evaluate(t, pose, twist, twist_rate)`` -- every cycle, the desired pose and its derivatives.

Its ``sample(t, q, qd, qdd)`` (the joint-space trajectory the loop samples) writes the posture the
controller's null space is pulled toward, at rest.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.model import rpy_to_matrix
from rtctl.options import OptionsBase, options_of, setting

from .base import Trajectory

__all__ = ["CartesianMinimumJerk", "exp_rotation", "log_rotation"]

# Slots of CartesianMinimumJerk's parameter vector.
C_T_START, C_DURATION, C_DELAY, C_ANCHORED = 0, 1, 2, 3
C_GOAL_POSITION_KIND, C_GOAL_ROTATION_KIND = 4, 5    # how the goal is given, below
C_R0, C_P0, C_P1, C_W = 6, 15, 18, 21                # start rotation and position, goal position, rotation vector
C_GOAL_P, C_GOAL_R, C_OFFSET, C_ROTATION = 24, 27, 36, 39
C_WIDTH = 42
# Goal kinds: the start itself, an absolute value, relative to the start.
KEEP, ABSOLUTE, RELATIVE = 0, 1, 2
_SMALL_ANGLE = 1e-6
_NEAR_PI = 1e-4


@njit(cache=True, forceinline=True)
def log_rotation(r00, r01, r02, r10, r11, r12, r20, r21, r22):
    """The rotation vector theta a of a rotation matrix (its matrix logarithm, 0 <= theta <= pi).

    ``theta = acos((tr R - 1) / 2)`` and ``a = vee(R - R^T) / (2 sin theta)``; near theta = pi, where
    that quotient loses its digits, the axis comes from ``(R + R^T) / 2 = I + (1 - cos theta)(a a^T - I)``
    with its sign from vee(R - R^T).
    """
    c = 0.5 * (r00 + r11 + r22 - 1.0)
    c = min(1.0, max(-1.0, c))
    theta = math.acos(c)
    vx, vy, vz = r21 - r12, r02 - r20, r10 - r01
    if theta < _SMALL_ANGLE:
        f = 0.5 + theta * theta / 12.0
        return f * vx, f * vy, f * vz
    if theta < math.pi - _NEAR_PI:
        f = theta / (2.0 * math.sin(theta))
        return f * vx, f * vy, f * vz
    d = 1.0 - c
    axx, ayy, azz = (r00 - c) / d, (r11 - c) / d, (r22 - c) / d   # diagonal of a a^T
    sxy, sxz, syz = 0.5 * (r01 + r10) / d, 0.5 * (r02 + r20) / d, 0.5 * (r12 + r21) / d
    if axx >= ayy and axx >= azz:
        ax = math.sqrt(max(axx, 0.0))
        ay, az = sxy / ax, sxz / ax
    elif ayy >= azz:
        ay = math.sqrt(max(ayy, 0.0))
        ax, az = sxy / ay, syz / ay
    else:
        az = math.sqrt(max(azz, 0.0))
        ax, ay = sxz / az, syz / az
    if ax * vx + ay * vy + az * vz < 0.0:
        ax, ay, az = -ax, -ay, -az
    n = math.sqrt(ax * ax + ay * ay + az * az)
    return theta * ax / n, theta * ay / n, theta * az / n


@njit(cache=True, forceinline=True)
def exp_rotation(wx, wy, wz):
    """Rotation matrix (row-major 9-tuple) of the rotation vector w (Rodrigues' formula)."""
    t2 = wx * wx + wy * wy + wz * wz
    if t2 < 1e-12:
        a, b = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0
    else:
        theta = math.sqrt(t2)
        a, b = math.sin(theta) / theta, (1.0 - math.cos(theta)) / t2
    return (1.0 - b * (wy * wy + wz * wz), -a * wz + b * wx * wy, a * wy + b * wx * wz,
            a * wz + b * wx * wy, 1.0 - b * (wx * wx + wz * wz), -a * wx + b * wy * wz,
            -a * wy + b * wx * wz, a * wx + b * wy * wz, 1.0 - b * (wx * wx + wy * wy))


@njit(cache=True, forceinline=True)
def _times_transpose(a, oa, b, ob):
    """A B^T of the row-major 3x3 matrices at a[oa:oa+9] and b[ob:ob+9], as a 9-tuple."""
    return (a[oa] * b[ob] + a[oa + 1] * b[ob + 1] + a[oa + 2] * b[ob + 2],
            a[oa] * b[ob + 3] + a[oa + 1] * b[ob + 4] + a[oa + 2] * b[ob + 5],
            a[oa] * b[ob + 6] + a[oa + 1] * b[ob + 7] + a[oa + 2] * b[ob + 8],
            a[oa + 3] * b[ob] + a[oa + 4] * b[ob + 1] + a[oa + 5] * b[ob + 2],
            a[oa + 3] * b[ob + 3] + a[oa + 4] * b[ob + 4] + a[oa + 5] * b[ob + 5],
            a[oa + 3] * b[ob + 6] + a[oa + 4] * b[ob + 7] + a[oa + 5] * b[ob + 8],
            a[oa + 6] * b[ob] + a[oa + 7] * b[ob + 1] + a[oa + 8] * b[ob + 2],
            a[oa + 6] * b[ob + 3] + a[oa + 7] * b[ob + 4] + a[oa + 8] * b[ob + 5],
            a[oa + 6] * b[ob + 6] + a[oa + 7] * b[ob + 7] + a[oa + 8] * b[ob + 8])


@njit(cache=True)
def min_jerk_anchor(params, t, pose):
    """Start the move at the measured ``pose`` (12) at control time ``t`` (+ the delay); fix the goal."""
    for k in range(9):
        params[C_R0 + k] = pose[k]
    for k in range(3):
        params[C_P0 + k] = pose[9 + k]
        kind = params[C_GOAL_POSITION_KIND]
        params[C_P1 + k] = params[C_GOAL_P + k] if kind == ABSOLUTE else \
            pose[9 + k] + (params[C_OFFSET + k] if kind == RELATIVE else 0.0)
    kind = params[C_GOAL_ROTATION_KIND]
    if kind == ABSOLUTE:
        wx, wy, wz = log_rotation(*_times_transpose(params, C_GOAL_R, params, C_R0))
    elif kind == RELATIVE:
        wx, wy, wz = params[C_ROTATION], params[C_ROTATION + 1], params[C_ROTATION + 2]
    else:
        wx = wy = wz = 0.0
    params[C_W], params[C_W + 1], params[C_W + 2] = wx, wy, wz
    params[C_T_START] = t + params[C_DELAY]
    params[C_ANCHORED] = 1.0


@njit(cache=True)
def min_jerk_evaluate(params, t, pose, twist, twist_rate):
    """Pose, twist and twist rate at ``t``: ``p = p0 + s (p1 - p0)``, ``R = exp(s w) R0``, ``w = log(R1 R0^T)``
    (a slerp about the fixed world axis w), ``s`` the minimum-jerk profile 10 tau^3 - 15 tau^4 + 6 tau^5;
    so ``omega = s' w``, ``alpha = s'' w``. Before the start and after the end the pose is held at rest."""
    duration = params[C_DURATION]
    tau = (t - params[C_T_START]) / duration
    if tau <= 0.0:
        s = ds = dds = 0.0
    elif tau >= 1.0:
        s, ds, dds = 1.0, 0.0, 0.0
    else:
        s = tau * tau * tau * (10.0 + tau * (-15.0 + 6.0 * tau))
        ds = tau * tau * (30.0 + tau * (-60.0 + 30.0 * tau)) / duration
        dds = tau * (60.0 + tau * (-180.0 + 120.0 * tau)) / (duration * duration)
    wx, wy, wz = params[C_W], params[C_W + 1], params[C_W + 2]
    e = exp_rotation(s * wx, s * wy, s * wz)
    r0 = C_R0
    for i in range(3):
        for j in range(3):
            pose[3 * i + j] = (e[3 * i] * params[r0 + j] + e[3 * i + 1] * params[r0 + 3 + j]
                               + e[3 * i + 2] * params[r0 + 6 + j])
    for k in range(3):
        d = params[C_P1 + k] - params[C_P0 + k]
        pose[9 + k] = params[C_P0 + k] + s * d
        twist[3 + k] = ds * d
        twist_rate[3 + k] = dds * d
    twist[0], twist[1], twist[2] = ds * wx, ds * wy, ds * wz
    twist_rate[0], twist_rate[1], twist_rate[2] = dds * wx, dds * wy, dds * wz


class CartesianReference(abc.ABC):
    """A desired pose of a Cartesian controller's frame in time (:meth:`CartesianImpedance.follow`): started from
    the measured pose (:meth:`anchor`), then evaluated each cycle (:meth:`evaluate`, allocation-free)."""

    @abc.abstractmethod
    def anchor(self, t: float, pose: np.ndarray) -> None:
        """Start from ``pose`` (12: rotation row-major, then position) at control time ``t``."""

    @abc.abstractmethod
    def evaluate(self, t: float, pose: np.ndarray, twist: np.ndarray, twist_rate: np.ndarray) -> None:
        """Desired pose (12), twist and twist rate (6 each, [angular; linear], world axes) at ``t``."""


class CartesianMinimumJerk(Trajectory, CartesianReference):
    """Minimum-jerk move of a Cartesian controller's frame to a goal pose (module docstring).

    Goal position: ``goal_position`` (m, world), or ``offset`` (m, world axes) from the start, or
    neither (held). Goal orientation: ``goal_rpy`` (rad, URDF roll-pitch-yaw of the frame in the world),
    or ``rotation`` (rotation vector, rad, world axes: ``R_goal = exp(rotation) R_start``), or neither
    (held). The path: straight line, and the slerp about the fixed axis of ``R_goal R_start^T``, both with
    the minimum-jerk timing over ``duration`` s, starting ``delay`` s after activation; peak speed
    ``1.875 |p1 - p0| / duration``, peak angular speed ``1.875 |w| / duration``.

    ``posture`` (one per actuated joint, rad or m; default the plant's initial position) is the joint
    position this trajectory hands the loop as ``q_d``: the controller's null-space target.
    """

    @dataclass(frozen=True)
    class Options(OptionsBase):
        duration: float = setting("float", None, positive=True, required=True)   # s
        goal_position: object = setting("floats", None)   # m, world
        offset: object = setting("floats", None)          # m, world axes, from the start
        goal_rpy: object = setting("floats", None)        # rad
        rotation: object = setting("floats", None)        # rad, rotation vector in world axes
        delay: float = setting("float", 0.0, low=0.0)     # s after activation
        posture: object = setting("floats", None)         # rad or m per actuated joint

    @classmethod
    def from_config(cls, options: dict, context) -> CartesianMinimumJerk:
        controller = context.cartesian_controller
        if controller is None:
            raise ValueError("cartesian_min_jerk moves the frame of a Cartesian controller: set [controller] "
                             "type = \"cartesian_impedance\"")
        posture = options["posture"] if options["posture"] is not None else context.q0[context.q_index]
        trajectory = cls(cls.Options(**dict(options, posture=posture)))
        controller.follow(trajectory)
        return trajectory

    def __init__(self, options: "CartesianMinimumJerk.Options"):
        self.options = o = options_of(self, options)
        goal_position, offset, goal_rpy, rotation, delay = o.goal_position, o.offset, o.goal_rpy, o.rotation, o.delay
        name = self.name
        if o.posture is None:
            raise ValueError(f"{name}: posture is required (a config takes the plant's initial position)")
        self.duration = o.duration
        self.posture = _finite_vector(name, "posture", o.posture, None)
        self.n = self.posture.shape[0]
        for a, b in (("goal_position", "offset"), ("goal_rpy", "rotation")):
            if (goal_position if a == "goal_position" else goal_rpy) is not None and \
                    (offset if b == "offset" else rotation) is not None:
                raise ValueError(f"{name}: give {a} or {b}, not both")
        self.params = np.zeros(C_WIDTH)
        p = self.params
        p[C_DURATION] = self.duration
        p[C_DELAY] = delay
        if goal_position is not None:
            p[C_GOAL_POSITION_KIND], p[C_GOAL_P:C_GOAL_P + 3] = ABSOLUTE, _finite_vector(name, "goal_position",
                                                                                         goal_position, 3)
        elif offset is not None:
            p[C_GOAL_POSITION_KIND], p[C_OFFSET:C_OFFSET + 3] = RELATIVE, _finite_vector(name, "offset", offset, 3)
        if goal_rpy is not None:
            p[C_GOAL_ROTATION_KIND] = ABSOLUTE
            p[C_GOAL_R:C_GOAL_R + 9] = rpy_to_matrix(_finite_vector(name, "goal_rpy", goal_rpy, 3)).reshape(9)
        elif rotation is not None:
            w = _finite_vector(name, "rotation", rotation, 3)
            if np.linalg.norm(w) > math.pi:
                raise ValueError(f"{name}: rotation must be a rotation vector of angle <= pi rad, got |rotation| = "
                                 f"{np.linalg.norm(w):.6g}")
            p[C_GOAL_ROTATION_KIND], p[C_ROTATION:C_ROTATION + 3] = RELATIVE, w

    @property
    def anchored(self) -> bool:
        return bool(self.params[C_ANCHORED])

    def anchor(self, t: float, pose: np.ndarray) -> None:
        """Start the move from ``pose`` (12) at control time ``t`` (module docstring)."""
        min_jerk_anchor(self.params, t, pose)

    def evaluate(self, t: float, pose: np.ndarray, twist: np.ndarray, twist_rate: np.ndarray) -> None:
        """Desired pose (12), twist and twist rate (6 each) at ``t``; allocation-free."""
        min_jerk_evaluate(self.params, t, pose, twist, twist_rate)

    def sample(self, t, q, qd, qdd) -> None:
        """The null-space posture, at rest."""
        q[:] = self.posture
        qd[:] = 0.0
        qdd[:] = 0.0

    def limit_violation(self, safety) -> str:
        """The posture inside the soft limits (the Cartesian path is not checked against joint limits)."""
        return safety.position_violation(self.posture, "[trajectory] posture")

    def peak_speeds(self) -> tuple[float, float]:
        """(m/s, rad/s): the largest linear and angular speed of the anchored move."""
        p = self.params
        return (1.875 * float(np.linalg.norm(p[C_P1:C_P1 + 3] - p[C_P0:C_P0 + 3])) / self.duration,
                1.875 * float(np.linalg.norm(p[C_W:C_W + 3])) / self.duration)

    def __repr__(self):
        return f"CartesianMinimumJerk(duration={self.duration}, n={self.n})"


def _finite_vector(owner, name, value, length) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: {name} must be numeric, got {value!r}") from None
    if length is not None and arr.shape != (length,):
        raise ValueError(f"{owner}: {name} must have {length} values, got {arr.size}")
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: {name} must be finite numbers, got {value!r}")
    return np.ascontiguousarray(arr)


