"""How the safe state stops a robot: the hold, and how much damping gravity needs.

IEC 60204-1:2016 (sec. 9.2.2) names three stop categories: 0, removing power at once; 1, a controlled stop,
then power removed (or a brake applied); 2, a controlled stop with power kept. The monitor's safe modes:

* ``"hold"`` (category 2, as arms without brakes stop): from the state measured at the trip, every joint
  decelerates at a constant rate to rest, all together (the motion keeps its direction in joint space), in
  the shortest time ``T`` in which no joint exceeds its ``acceleration_limit`` nor :data:`STOP_EFFORT_SHARE`
  of its effort limit over its inertia ``M_jj(q)`` at the trip; ``T`` shrinks, up to the full effort, so that
  no joint travels beyond its hard limit (a joint moving at ``v0`` stops ``v0 T / 2`` further). It then
  holds where it stopped. The command is the model's inverse dynamics along that reference with a PD on its
  error, ``tau = ID(q, v, a_ref + kp (q_ref - q) + kd (v_ref - v))``: gravity, Coriolis and inertia from the
  model, and the bounded stiffness ``kp M(q)`` (``hold_kp``, ``hold_kd``: checked against the stability of
  the loop at its period, :mod:`rtctl.rt.stability`) for what the model does not know, a payload. Efforts are
  clamped to the limits. It needs a model that carries the robot's weight (:func:`hold_unavailable`).
* ``"damping"``: ``-D v``, and an unpowered arm falls until ``D v`` carries its weight: :func:`gravity_bound`
  bounds the gravity torque of each joint over every configuration, and a gain below ``bound / velocity
  limit`` is refused (:func:`damping_violation`).
* ``"zero_torque"``: category 0 for drives that remove power or brake themselves.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..dynamics import Dynamics
from ..dynamics.kernels import OK, crba, rnea
from ..model import PRISMATIC, REVOLUTE, Model
from ..model.massless import massless_subtree_joints
from ..rt.stability import Sampling, gain_violation

HOLD_KP = 400.0           # 1/s^2: the hold's default stiffness, 20 rad/s critically damped (the demo's tracking)
STOP_EFFORT_SHARE = 0.5   # of each joint's effort limit the hold's deceleration may take (the rest: gravity, payload)
DAMPING_SPEED_SHARE = 0.5  # the default damping gain lets gravity drive a joint to at most this share of its limit

# Rows of the hold's plan (one column per actuated joint) and slots of its clock.
P_Q0, P_V0, P_LO, P_HI, P_KP, P_KD, P_EMAX, P_AMAX = range(8)
P_ROWS = 8
H_ELAPSED, H_DURATION, H_PERIOD = range(3)

_V, _M = "float64[::1]", "float64[:, ::1]"
_HOLD_SIG = (f"int64(boolean, {_V}, {_V}, {_V}, int64[::1], int64[::1], int64[:, ::1], {_M}, {_M}, {_M}, {_V}, "
             f"{_M}, {_V}, {_V})")


@njit(cache=True, inline="always")
def _plan_stop(q, v, q_index, v_index, plan, mass, clock):
    """Take the trip's state as the start and set the common stop duration (module docstring)."""
    duration, shortest, room_limit = 0.0, 0.0, math.inf
    for k in range(q_index.shape[0]):
        x, w = q[q_index[k]], v[v_index[k]]
        plan[P_Q0, k], plan[P_V0, k] = x, w
        speed = abs(w)
        if speed == 0.0:
            continue
        inertia = mass[v_index[k], v_index[k]]
        by_effort = plan[P_EMAX, k] / inertia if inertia > 0.0 else math.inf
        rate = min(plan[P_AMAX, k], STOP_EFFORT_SHARE * by_effort)
        full = min(plan[P_AMAX, k], by_effort)
        if rate > 0.0:  # a joint with no effort at all sets no stop time
            duration = max(duration, speed / rate)
            shortest = max(shortest, speed / full)
        room = plan[P_HI, k] - x if w > 0.0 else x - plan[P_LO, k]
        room_limit = min(room_limit, 2.0 * max(room, 0.0) / speed)
    clock[H_ELAPSED] = 0.0
    clock[H_DURATION] = max(min(duration, room_limit), shortest)


@njit(_HOLD_SIG, cache=True)
def hold_command(start, q, v, effort, q_index, v_index, mi, mf, ws, plan, clock, mass, alpha, tau):
    """One cycle of the hold: with ``start``, plan the stop from this state; then write the efforts of the
    actuated joints (every other row 0) and advance the clock one period. Returns the dynamics kernels'
    status (``OK``: the command is written). Allocates nothing."""
    if start:
        status = crba(mi, mf, ws, q, mass)
        if status != OK:
            return status
        _plan_stop(q, v, q_index, v_index, plan, mass, clock)
    t, duration = clock[H_ELAPSED], clock[H_DURATION]
    alpha[:] = 0.0
    for k in range(q_index.shape[0]):
        q0, v0 = plan[P_Q0, k], plan[P_V0, k]
        if t < duration:
            a_ref = -v0 / duration
            v_ref = v0 + a_ref * t
            q_ref = q0 + (v0 + 0.5 * a_ref * t) * t
        else:
            a_ref, v_ref, q_ref = 0.0, 0.0, q0 + 0.5 * v0 * duration
        q_ref = min(max(q_ref, plan[P_LO, k]), plan[P_HI, k])
        alpha[v_index[k]] = (a_ref + plan[P_KP, k] * (q_ref - q[q_index[k]])
                             + plan[P_KD, k] * (v_ref - v[v_index[k]]))
    status = rnea(mi, mf, ws, q, v, alpha, tau)
    if status != OK:
        return status
    effort[:] = 0.0
    for k in range(v_index.shape[0]):
        i = v_index[k]
        effort[i] = min(max(tau[i], -plan[P_EMAX, k]), plan[P_EMAX, k])
    clock[H_ELAPSED] = t + clock[H_PERIOD]
    return OK


def hold_unavailable(model: Model) -> str:
    """Why the hold cannot run on ``model`` ('' when it can): it needs a fixed base (a floating base's weight
    rests on contacts the model does not know) and mass behind every actuated joint (a model that carries
    nothing, such as the actuator-space models of the parallel robots, would compensate no weight)."""
    if model.base != "fixed":
        return (f"model '{model.name}' has a floating base ({model.base}): its weight rests on contacts the model "
                "does not know")
    massless = [name for name in massless_subtree_joints(model) if name in model.joint_names[model.n_base_bodies:]]
    if massless:
        return (f"model '{model.name}' carries no mass behind joints {massless} (the hold's gravity compensation "
                "and inertia come from the model)")
    return ""


class Hold:
    """The hold's plan, work arrays and gains (see the module docstring) over ``model``'s actuated joints
    ``q_index``, ``v_index``; :meth:`configure` gives it the loop's sampling before it can run."""

    def __init__(self, model: Model, q_index, v_index, names, kp: float, kd: float | None, acceleration_limit):
        problem = hold_unavailable(model)
        if problem:
            raise ValueError(f"safe_mode 'hold' is not possible: {problem}; use 'damping' or 'zero_torque'")
        self.kp = float(kp)
        self.kd = 2.0 * math.sqrt(self.kp) if kd is None else float(kd)
        for name, gain in (("hold_kp", self.kp), ("hold_kd", self.kd)):
            if not (math.isfinite(gain) and gain > 0):
                raise ValueError(f"{name} must be finite and > 0, got {gain}")
        self.names = list(names)
        self.q_index, self.v_index = q_index, v_index
        self.dyn = Dynamics(model)  # its own workspace: the controller's belongs to the controller
        n = len(q_index)
        plan = np.zeros((P_ROWS, n))
        plan[P_LO], plan[P_HI] = model.lower[q_index], model.upper[q_index]
        plan[P_KP], plan[P_KD] = self.kp, self.kd
        plan[P_EMAX], plan[P_AMAX] = model.effort_limit[v_index], acceleration_limit
        self.plan = np.ascontiguousarray(plan)
        self.clock = np.zeros(3)
        self.mass = np.zeros((model.nv, model.nv))
        self.alpha, self.tau = np.zeros(model.nv), np.zeros(model.nv)
        self.sampling: Sampling | None = None

    def configure(self, sampling: Sampling) -> None:
        """The loop's sampling: the hold's gains are checked against its stability bound (ValueError naming
        it) and its clock runs at the period."""
        problem = gain_violation(self.kp, self.kd, sampling, self.names)
        if problem:
            raise ValueError(f"hold_kp, hold_kd: {problem}")
        self.sampling = sampling
        self.clock[H_PERIOD] = sampling.period

    def describe(self) -> str:
        """The stop just planned, for the event log."""
        return (f"hold: decelerating to rest in {self.clock[H_DURATION]:.3g} s, then holding with the model's "
                f"gravity compensation (kp {self.kp:g} 1/s^2, kd {self.kd:g} 1/s)")


def gravity_bound(model: Model) -> np.ndarray:
    """Per actuated joint, an upper bound of the gravity torque (force) the model exerts on it over every
    configuration within the limits; ``inf`` where none exists (a prismatic joint without limits below it).

    A body b below joint j lies at most ``r_jb`` from the joint's origin: the lengths of the joint placements
    on the path from j to b, the travel of the prismatic joints on it and b's centre-of-mass offset; so
    ``|g_j| <= s_j sum_b m_b r_jb`` for a revolute joint and ``s_j sum_b m_b`` for a prismatic one, with
    ``s_j = |gravity|``, or ``|gravity x axis|`` (revolute) and ``|gravity . axis|`` (prismatic) for a joint
    hanging from the fixed world, whose axis never turns."""
    nb, first = model.nbodies, model.n_base_bodies
    g = np.asarray(model.gravity, dtype=float)
    travel = np.where(model.joint_type == PRISMATIC,
                      np.maximum(np.abs(model.lower[model.idx_q]), np.abs(model.upper[model.idx_q])), 0.0)
    step = np.linalg.norm(model.joint_translation, axis=1) + travel
    com = np.linalg.norm(model.com, axis=1)
    rotation, _ = Dynamics(model).forward_kinematics(model.neutral_configuration())
    bound = np.zeros(nb - first)
    for j in range(first, nb):
        reach = np.full(nb, -1.0)
        reach[j] = 0.0
        for b in range(j + 1, nb):
            if reach[model.parent[b]] >= 0.0:
                reach[b] = reach[model.parent[b]] + step[b]
        below = reach >= 0.0
        axis = rotation[j] @ model.axis[j]
        fixed_axis = model.parent[j] < 0 and model.base == "fixed"
        with np.errstate(invalid="ignore"):
            if model.joint_type[j] == REVOLUTE:
                scale = np.linalg.norm(np.cross(g, axis)) if fixed_axis else np.linalg.norm(g)
                moments = np.where(model.mass[below] > 0, model.mass[below] * (reach[below] + com[below]), 0.0)
                bound[j - first] = scale * np.sum(moments)
            else:
                scale = abs(g @ axis) if fixed_axis else np.linalg.norm(g)
                bound[j - first] = scale * np.sum(model.mass[below]) if np.all(np.isfinite(reach[below])) else np.inf
    return np.where(np.isnan(bound), np.inf, bound)


def default_damping(effort_limit, velocity_limit, bound) -> np.ndarray:
    """The damping gain when none is given: ``0.1 effort_limit / velocity_limit`` (1.0 where either is not
    finite), raised where needed so that gravity drives no joint beyond :data:`DAMPING_SPEED_SHARE` of its
    velocity limit."""
    with np.errstate(divide="ignore", invalid="ignore"):
        base = 0.1 * effort_limit / velocity_limit
        base = np.where(np.isfinite(base) & (velocity_limit > 0), base, 1.0)
        needed = np.where(np.isfinite(bound), bound / (DAMPING_SPEED_SHARE * velocity_limit), 0.0)
    return np.maximum(base, np.nan_to_num(needed, nan=0.0, posinf=0.0))


def damping_violation(names, units, gain, bound, velocity_limit, effort_limit) -> str:
    """'' when ``-D v`` (clamped to the effort limit) stops every joint's fall under gravity below its velocity
    limit, as the model shows (a joint's terminal speed is at most ``bound / D``, alone; the coupled arm is
    checked in simulation by the tests); else one line naming the first joint and the gain it needs."""
    for k, name in enumerate(names):
        vmax, g, d = velocity_limit[k], bound[k], gain[k]
        if not math.isfinite(vmax) or g == 0.0:
            continue
        _, vu, eu = units[k]
        if not math.isfinite(g):
            return (f"damping: joint '{name}' carries a load the model cannot bound (a prismatic joint without "
                    "limits below it): the damping cannot be shown to stop its fall; use 'hold' or 'zero_torque'")
        if g >= effort_limit[k]:
            return (f"damping: joint '{name}': gravity can exert {g:.4g} {eu} on it, not less than its effort limit "
                    f"{effort_limit[k]:.4g} {eu}: no damping stops its fall; use 'hold' (or brakes and "
                    "'zero_torque')")
        if d * vmax < g:
            return (f"damping: joint '{name}': damping_gain {d:.4g} lets gravity ({g:.4g} {eu} at most, as the "
                    f"model shows) drive it to {g / d if d > 0 else math.inf:.4g} {vu}, beyond its velocity limit "
                    f"{vmax:.4g} {vu}; it needs at least {g / vmax:.4g}")
    return ""
