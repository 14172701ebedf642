"""The generic simulated plant: any rtctl model as a rigid-body system with joint friction.

:class:`RigidBodyPlant` (registered as ``"rigid_body"``) integrates

    dq/dt = configuration_rate(q, v),
    dv/dt = M(q)^-1 (effort + tau_friction(v) - h(q, v)),
    tau_friction = -viscous * v - (coulomb + (static - coulomb) exp(-(v / v_s)^2)) tanh(v / coulomb_velocity_scale),

the viscous, Coulomb and static friction with the Stribeck curve of Armstrong-Helouvry, Dupont & Canudas
de Wit (Automatica 1994, eq. 3), ``v_s`` the Stribeck velocity; ``static`` defaults to ``coulomb`` (no
Stribeck effect). When the config gives no ``viscous_friction`` / ``coulomb_friction``, a URDF's
``<dynamics damping friction>`` (``model.damping``, ``model.friction``) are used. Forward dynamics: the O(n)
articulated-body algorithm of :mod:`rtctl.dynamics`. Friction acts on the actuated joints only
(:func:`rtctl.rt.interfaces.actuated_indices`); a floating base moves without friction.

A fixed step is one call into a compiled, allocation-free kernel of the plant's integrator, compiled (or loaded
from the cache) when the plant is built; :func:`_step_kernel` takes the integrator as an argument. Three integrators:

* ``"rosenbrock"`` (the default when some joint has friction): the L-stable Rosenbrock-W method ROS34PW2
  of :mod:`plants.integrate`, linearly implicit in the friction (each stage adds ``gamma h b(v)`` to the
  joint inertia, ``b(v) >= 0`` the friction torque over the velocity at the step's start,
  :func:`plants.joint_friction.friction_coefficients`). Third order; stable for any damping and Coulomb
  level on any link: where a step cannot resolve a joint's damping (h b / I > 3), each step cuts the
  distance to its steady speed 7.7-fold or more (|R| <= 0.13), as an overdamped joint settles.
* ``"rk4"`` (the default without joint friction): classical Runge-Kutta on (q, v) with q treated in R^nq
  (the free-flyer quaternion advances by dq/dt = 1/2 q (x) [omega; 0]) and renormalised after every
  sub-step. Fourth order; energy drift of an unforced robot at 1 ms is far below 1e-7 of its energy scale.
* ``"semi_implicit_euler"``: v += h a(q, v), then q = q (+) v h on the configuration manifold (exact SE(3)
  step for the free-flyer). First order and symplectic for conservative systems.

The last two are explicit in the friction: a sub-step h must keep ``h viscous / I`` below 2.785 for RK4
(2 for Euler), I the lightest joint's effective inertia, or the motion grows without bound (2 N m s/rad
on xArm7's 1.4e-4 kg m^2 last link needs h < 0.19 ms), and ``h coulomb / (coulomb_velocity_scale I)``
likewise, or the joint chatters about rest. A step that leaves a NaN or inf is refused, the state
unchanged, with one line naming the joint and the likely cause (:mod:`plants.divergence`).

:meth:`RigidBodyPlant.simulate_offline` is the accuracy reference: the same equations by ``solve_ivp``, tight tolerances.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.contact import contact_dynamics
from rtctl.dynamics.kernels import (NOT_FINITE, OK, SINGULAR, W_FEXT, WRONG_LENGTH, aba, aba_with_inertia,
                                    all_finite, configuration_rate, integrate, model_sizes, transmitted_wrench)
from rtctl.model import FREE_FLYER, MI_IQ, MI_TYPE, Model, inertia_scale_factor
from rtctl.options import setting
from rtctl.rt.interfaces import actuated_indices
from rtctl.rt.stability import euler_position_share
from rtctl.rt.warmup import ready_kernel

from rtctl.options import options_of

from .base import Plant, check_integration_options, payload_settings, with_tree_payload
from .divergence import divergence_message, explicit_damping_problem
from .end_stops import STOP_ROWS, add_end_stop_torques, end_stop_table
from .integrate import (ROSENBROCK_ROWS, W_A as _W_A, advance_with_rollback, inlined, rk4_advance,
                        rosenbrock_w_advance, specialise)
from .joint_friction import (STRIBECK_ROWS, add_stribeck_torques, friction_coefficients, friction_vector,
                             model_friction, stribeck_table)

__all__ = ["RigidBodyPlant", "INTEGRATORS", "RK4", "SEMI_IMPLICIT_EULER", "ROSENBROCK", "DIVERGED",
           "INVALID_ARGUMENT", "STOP_ROWS", "WORK_ROWS", "add_end_stop_torques", "add_stribeck_torques",
           "end_stop_table", "stribeck_table", "work_array"]

RK4 = 0
SEMI_IMPLICIT_EULER = 1
ROSENBROCK = 2
INTEGRATORS = {"rk4": RK4, "semi_implicit_euler": SEMI_IMPLICIT_EULER, "rosenbrock": ROSENBROCK}

# Status codes of _step_kernel beyond those of rtctl.dynamics.kernels (OK, NOT_FINITE + k,
# WRONG_LENGTH + k with k = 1 q, 2 v, 3 effort, 4 viscous, 5 coulomb, 6 work, and SINGULAR).
DIVERGED = 30          # a finite state became NaN or inf during the step
INVALID_ARGUMENT = 31  # dt not finite and > 0, substeps < 1, unknown method or scale not > 0

# Rows of the work array (each max(nq, nv) wide): the integrators', then the torques of the current stage, the
# friction coefficients b and the inertia gamma h b the Rosenbrock step adds.
_W_TAU = ROSENBROCK_ROWS
_W_FRICTION = _W_TAU + 1
_W_ADDED_INERTIA = _W_TAU + 2
WORK_ROWS = _W_TAU + 3
_NO_STRIBECK = np.zeros((STRIBECK_ROWS, 0))

SIG_STEP = ("int64(int64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64[::1], "
            "float64, int64, int64, float64[::1], float64[::1], float64, float64[:, ::1], float64[:, ::1], "
            "float64[:, ::1])")


def work_array(model: Model) -> np.ndarray:
    """A work array for :func:`_step_kernel` on ``model`` (RK4 stages, friction forces, state backup)."""
    return np.zeros((WORK_ROWS, max(model.nq, model.nv)))


@njit(cache=True)
def _accelerations(mi, mf, ws, q, v, tau, a, contact):
    """dv/dt by the O(n) ABA; with ``contact`` (not None) under the ground contact of
    :func:`rtctl.dynamics.contact.contact_dynamics` (the legged plant)."""
    if contact is None:
        return aba(mi, mf, ws, q, v, tau, a)
    return contact_dynamics(mi, mf, ws, q, v, tau, a, contact)


@inlined
def _loaded_accelerations(q, v, a, args):
    """dv/dt into ``a`` under ``effort`` plus the joints' friction (viscous, Coulomb, Stribeck) and end stops,
    the torques in the scratch ``tau`` (``args``: :func:`_derivative`'s); the dynamics' status."""
    mi, mf, ws, effort, viscous, coulomb, scale, tau, contact, stops, stribeck = args
    for k in range(v.shape[0]):
        tau[k] = effort[k] - viscous[k] * v[k] - coulomb[k] * np.tanh(v[k] / scale)
    add_stribeck_torques(v, stribeck, scale, tau)
    add_end_stop_torques(q, v, stops, tau)
    return _accelerations(mi, mf, ws, q, v, tau, a, contact)


@njit(cache=True)
def _derivative(q, v, dq, a, args):
    """dq/dt into ``dq`` and dv/dt into ``a`` under ``effort`` plus friction and end stops; returns aba's status.

    The plant's rate function for :mod:`plants.integrate`: ``args`` = (mi, mf, ws, effort, viscous, coulomb,
    scale, tau, contact, stops, stribeck) with ``tau`` the scratch for the joint torques and ``stribeck`` the
    Stribeck table (:func:`add_stribeck_torques`; no columns: none)."""
    status = _loaded_accelerations(q, v, a, args)
    if status != OK:
        return status
    configuration_rate(args[0], q, v, dq)
    return OK


@njit(cache=True)
def _normalise_quaternions(mi, q):
    """Rescale the free-flyer quaternion in ``q`` to unit norm."""
    for i in range(mi.shape[0]):
        if mi[i, MI_TYPE] == FREE_FLYER:
            o = mi[i, MI_IQ] + 3
            n = np.sqrt(q[o] ** 2 + q[o + 1] ** 2 + q[o + 2] ** 2 + q[o + 3] ** 2)
            for k in range(4):
                q[o + k] /= n


@inlined
def _normalise_after_step(q, v, h, work, args):
    """After an RK4 step (q treated in R^nq): the free-flyer quaternion back to unit norm."""
    _normalise_quaternions(args[0], q)
    return OK


@inlined
def _semi_implicit_euler_step(q, v, h, work, args):
    """v += h a(q, v); q = q (+) v h on the configuration manifold, in place (``args``: :func:`_derivative`)."""
    a = work[_W_A, :v.shape[0]]
    status = _loaded_accelerations(q, v, a, args)
    if status != OK:
        return status
    for k in range(v.shape[0]):
        v[k] += h * a[k]
    integrate(args[0], q, v, h, q)
    return OK


@inlined
def _rosenbrock_prepare(q, v, gamma_h, args):
    """The friction coefficients b at the step's start and the inertia ``gamma h b`` each stage adds
    (``args``: :func:`_derivative`'s, then the Stribeck table and the rows of b and of the added inertia)."""
    viscous, coulomb, scale, stribeck, b, added = args[4], args[5], args[6], args[10], args[11], args[12]
    friction_coefficients(v, viscous, coulomb, scale, stribeck, b)
    for k in range(v.shape[0]):
        added[k] = gamma_h * b[k]
    return OK


@inlined
def _rosenbrock_rates(q, v, s, dq, a, args):
    """dq/dt and ``a = (M + gamma h B)^-1 (effort + tau_friction(v) + end stops - B s - h(q, v))``
    (:func:`plants.integrate.rosenbrock_w_advance`)."""
    mi, mf, ws, effort, viscous, coulomb, scale, tau, _, stops, stribeck, b, added = args
    for k in range(v.shape[0]):
        tau[k] = effort[k] - viscous[k] * v[k] - coulomb[k] * np.tanh(v[k] / scale) - b[k] * s[k]
    add_stribeck_torques(v, stribeck, scale, tau)
    add_end_stop_torques(q, v, stops, tau)
    status = aba_with_inertia(mi, mf, ws, q, v, tau, added, a)
    if status != OK:
        return status
    configuration_rate(mi, q, v, dq)
    return OK


_rk4_advance = rk4_advance("rigid_body", _derivative, finish=_normalise_after_step)
_euler_advance = advance_with_rollback("rigid_body_euler", _semi_implicit_euler_step)
_rosenbrock_advance = rosenbrock_w_advance("rigid_body_rosenbrock", _rosenbrock_prepare, _rosenbrock_rates,
                                           finish=_normalise_after_step)


@njit(cache=True)
def _sensor_truth(mi, mf, ws, q, v, effort, viscous, coulomb, scale, stops, stribeck, work, body, mount, out):
    """:meth:`RigidBodyPlant.sensor_wrench`: the accelerations of the rate function, then the wrench across the
    sensor (``work``: 3 rows of max(nq, nv))."""
    nq, nv = q.shape[0], v.shape[0]
    tau, dq, a = work[0, :nv], work[1, :nq], work[2, :nv]
    status = _derivative(q, v, dq, a, (mi, mf, ws, effort, viscous, coulomb, scale, tau, None, stops, stribeck))
    if status != OK:
        return status
    return transmitted_wrench(mi, mf, ws, q, v, a, body, mount, tau, out)


@njit(cache=True)
def check_step(mi, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work):
    """``OK`` or the status :func:`_step_kernel` refuses these arguments with (module constants)."""
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if v.shape[0] != nv:
        return WRONG_LENGTH + 2
    if effort.shape[0] != nv:
        return WRONG_LENGTH + 3
    if viscous.shape[0] != nv:
        return WRONG_LENGTH + 4
    if coulomb.shape[0] != nv:
        return WRONG_LENGTH + 5
    if work.shape[0] < WORK_ROWS or work.shape[1] < max(nq, nv):
        return WRONG_LENGTH + 6
    if not (dt > 0.0 and dt < np.inf and substeps >= 1 and scale > 0.0):
        return INVALID_ARGUMENT
    if method != RK4 and method != SEMI_IMPLICIT_EULER and method != ROSENBROCK:
        return INVALID_ARGUMENT
    if not all_finite(q):
        return NOT_FINITE + 1
    if not all_finite(v):
        return NOT_FINITE + 2
    if not all_finite(effort):
        return NOT_FINITE + 3
    return OK


@njit(cache=True)
def advance(mi, mf, ws, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work, contact, stops,
            stribeck):
    """:func:`_step_kernel` with an optional ground ``contact`` tuple (see
    :func:`rtctl.dynamics.contact.contact_dynamics`; ``None``: no contact)."""
    status = check_step(mi, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work)
    if status != OK:
        return status
    if contact is not None and method == ROSENBROCK:
        return INVALID_ARGUMENT  # the ground contact's stiffness is not in the Rosenbrock step's Jacobian
    nv = v.shape[0]
    args = (mi, mf, ws, effort, viscous, coulomb, scale, work[_W_TAU, :nv], contact, stops, stribeck)
    if method == RK4:
        status = _rk4_advance(q, v, dt, substeps, work, DIVERGED, args)
    elif method == SEMI_IMPLICIT_EULER:
        status = _euler_advance(q, v, dt, substeps, work, DIVERGED, args)
    else:
        status = _rosenbrock_advance(q, v, dt, substeps, work, DIVERGED, args + (
            work[_W_FRICTION, :nv], work[_W_ADDED_INERTIA, :nv]))
    if status != OK and status != SINGULAR:
        return DIVERGED
    return status


@njit(cache=True)
def _step_kernel(mi, mf, ws, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work, stops, stribeck):
    """Advance (q, v) in place by ``dt`` in ``substeps`` equal sub-steps with ``effort`` held constant.

    ``method`` is :data:`RK4`, :data:`SEMI_IMPLICIT_EULER` or :data:`ROSENBROCK`; ``viscous`` and
    ``coulomb`` are per-DOF friction coefficients (zero on unactuated DOFs),
    ``scale`` the Coulomb regularisation velocity, ``work`` from
    :func:`work_array`, ``stops`` the end stops (:func:`end_stop_table`; ``(STOP_ROWS, 0)``:
    none), ``stribeck`` the Stribeck table (:func:`stribeck_table`; no columns: none). Allocates nothing.
    Returns ``OK`` or a status code (see the module constants); on any non-OK status q and v are unchanged.
    """
    return advance(mi, mf, ws, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work, None, stops,
                   stribeck)


@inlined
def _plain_args(args, work, nv):
    return args


@inlined
def _rosenbrock_args(args, work, nv):
    """The Rosenbrock stages' extra rows: the friction coefficients b and the inertia gamma h b they add."""
    return args + (work[_W_FRICTION, :nv], work[_W_ADDED_INERTIA, :nv])


def _integrator_step(mi, mf, ws, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work, stops, stribeck):
    """:func:`_step_kernel` with its integrator bound when compiled (``integrator_advance`` and its
    ``stage_args``): a plant compiles the integrator it steps with, not all three."""
    status = check_step(mi, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work)
    if status != OK:
        return status
    nv = v.shape[0]
    args = (mi, mf, ws, effort, viscous, coulomb, scale, work[_W_TAU, :nv], None, stops, stribeck)
    status = integrator_advance(q, v, dt, substeps, work, DIVERGED, stage_args(args, work, nv))  # noqa: F821
    if status != OK and status != SINGULAR:
        return DIVERGED
    return status


_INTEGRATOR_STEPS = {
    RK4: specialise(_integrator_step, "rk4", integrator_advance=_rk4_advance, stage_args=_plain_args),
    SEMI_IMPLICIT_EULER: specialise(_integrator_step, "euler", integrator_advance=_euler_advance,
                                    stage_args=_plain_args),
    ROSENBROCK: specialise(_integrator_step, "rosenbrock", integrator_advance=_rosenbrock_advance,
                           stage_args=_rosenbrock_args),
}


class RigidBodyPlant(Plant):
    """A model's rigid-body dynamics with joint friction, advanced by a fixed-step integrator.

    Over ``model`` (fixed or floating base; gravity and armature read live from ``model.packed_float``) with
    ``options``: the integrator (``"rosenbrock"``, ``"rk4"`` or ``"semi_implicit_euler"``, module docstring;
    None: Rosenbrock when some joint has friction, else RK4), equal ``substeps`` per :meth:`step`, viscous
    and Coulomb friction (N m s/rad and N m, or N s/m and N; a scalar for every actuated joint or nv per-DOF
    values, a floating base's ignored; None: the model's ``damping`` and ``friction``, a URDF's
    ``<dynamics>``), the Stribeck curve's static level and velocity (None: no Stribeck effect; a static level
    needs a velocity), the tanh's ``coulomb_velocity_scale``, spring-damper ``end_stops`` (:func:`end_stop_table`).

    Invalid settings raise ``ValueError`` naming the parameter and its value.
    """

    @dataclass(frozen=True)
    class Options(Plant.Options):
        end_stops: bool = setting("bool", None)   # spring-damper end stops at the hard limits (default true)
        static_friction: object = setting("floats", None, low=0.0)        # N m (N): breakaway level
        stribeck_velocity: object = setting("floats", None, positive=True)  # rad/s (m/s)

    integrators = tuple(INTEGRATORS)  # the integrators this plant steps with (a subclass may take fewer)
    # options left None: the integrator (None: by the friction), sub-steps, friction (the model's <dynamics>)
    default_integrator, default_substeps, friction_from_model = None, 1, True

    def own_settings(self, options) -> tuple[bool, object, object]:
        """``(end_stops, static_friction, stribeck_velocity)``: a subclass whose Options lack them answers."""
        return options.end_stops is not False, options.static_friction, options.stribeck_velocity

    def __init__(self, model: Model, options: "RigidBodyPlant.Options | None" = None):
        self.options = options = options_of(self, options)
        end_stops, static_friction, stribeck_velocity = self.own_settings(options)
        integrator = self.default_integrator if options.integrator is None else options.integrator
        substeps = self.default_substeps if options.substeps is None else options.substeps
        viscous_friction, coulomb_friction = (0.0 if x is None and not self.friction_from_model else x
                                              for x in (options.viscous_friction, options.coulomb_friction))
        chosen, substeps, scale = check_integration_options("rk4" if integrator is None else integrator, substeps,
                                                            options.coulomb_velocity_scale, allowed=self.integrators)
        mass_scale = inertia_scale_factor(options.mass_scale)
        payload = payload_settings(options.payload_mass, options.payload_frame, options.payload_offset)
        if mass_scale != 1.0:
            model = model.with_inertia_scaled(mass_scale)
        model = with_tree_payload(model, payload, model.body_names[-1])
        super().__init__(model)
        _, actuated_v, _ = actuated_indices(model)
        if viscous_friction is None:
            viscous_friction = model_friction(model.damping, actuated_v)
        if coulomb_friction is None:
            coulomb_friction = model_friction(model.friction, actuated_v)
        self._viscous, viscous_setting = friction_vector(viscous_friction, "viscous_friction", model.nv, actuated_v)
        self._coulomb, coulomb_setting = friction_vector(coulomb_friction, "coulomb_friction", model.nv, actuated_v)
        stribeck = {}
        if static_friction is not None:
            if stribeck_velocity is None:
                raise ValueError("static_friction needs stribeck_velocity (rad/s or m/s, > 0): the speed over "
                                 "which friction falls from the static to the Coulomb level")
            static, stribeck["static_friction"] = friction_vector(static_friction, "static_friction", model.nv,
                                                                  actuated_v)
            velocity, stribeck["stribeck_velocity"] = friction_vector(stribeck_velocity, "stribeck_velocity",
                                                                      model.nv, actuated_v, positive=True)
            self._stribeck = stribeck_table(self._coulomb, static, velocity)
        elif stribeck_velocity is not None:
            raise ValueError("stribeck_velocity is given without static_friction (the static friction level)")
        else:
            self._stribeck = _NO_STRIBECK
        if integrator is None:
            chosen = "rosenbrock" if np.any(self._viscous) or np.any(self._coulomb) or stribeck else "rk4"
        self._settings = {
            "integrator": chosen,
            "substeps": int(substeps),
            "viscous_friction": viscous_setting,
            "coulomb_friction": coulomb_setting,
            "coulomb_velocity_scale": scale,
            "mass_scale": mass_scale,
            "end_stops": end_stops,
            **payload,
            **stribeck,
        }
        self._method = INTEGRATORS[chosen]
        self._substeps = int(substeps)
        if chosen == "semi_implicit_euler":  # RK4 and ROS34PW2 are exact on a constant acceleration
            self.position_share = euler_position_share(self._substeps)
        self._scale = scale
        self.dynamics = Dynamics(model)
        self._work = work_array(model)
        self._kernel = ready_kernel(_INTEGRATOR_STEPS[self._method], SIG_STEP)
        self._stops = end_stop_table(model, self.dynamics) if end_stops else np.zeros((STOP_ROWS, 0))

    def step(self, dt: float, effort) -> None:
        """Advance q, v (in place) and t by ``dt`` seconds with ``effort`` (nv generalized forces) held constant.

        Raises ``ValueError`` (state left unchanged) if ``dt`` is not a finite
        positive number, ``effort`` has the wrong length or contains NaN or
        inf, the inertia is singular, or the integration diverges.
        """
        dyn = self.dynamics
        try:
            status = self._kernel(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, effort, dt, self._substeps, self._method,
                                  self._viscous, self._coulomb, self._scale, self._work, self._stops, self._stribeck)
        except TypeError:
            status = self._step_converted(dt, effort)
        if status != OK:
            self._raise(status, dt, effort)
        self.t += dt

    def _step_converted(self, dt, effort) -> int:
        """The step with ``dt`` and ``effort`` converted to the kernel's types (the slow path)."""
        dt, effort = self._converted(dt, effort)
        dyn = self.dynamics
        return self._kernel(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, effort, dt, self._substeps, self._method,
                            self._viscous, self._coulomb, self._scale, self._work, self._stops, self._stribeck)

    def _converted(self, dt, effort):
        """``dt`` as a float and ``effort`` as a float64 C vector; ValueError naming a bad input or state."""
        try:
            dt = float(dt)
        except (TypeError, ValueError):
            raise ValueError(f"dt must be a finite time step > 0 s, got {dt!r}") from None
        try:
            effort = np.ascontiguousarray(effort, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"effort must be a numeric vector of length nv = {self.nv}") from None
        if effort.ndim != 1:
            raise ValueError(f"effort must have shape ({self.nv},), got {effort.shape}")
        for name, arr in (("q", self.q), ("v", self.v)):
            if type(arr) is not np.ndarray or arr.dtype != np.float64 or arr.ndim != 1 or not arr.flags.c_contiguous:
                raise ValueError(f"plant state {name} must be a C-contiguous float64 vector (use reset() to set it)")
        return dt, effort

    def _raise(self, status: int, dt, effort):
        if status == NOT_FINITE + 3:
            raise ValueError("effort contains NaN or inf")
        if status == WRONG_LENGTH + 3:
            raise ValueError(f"effort must have shape ({self.nv},), got {np.shape(effort)}")
        if status in (NOT_FINITE + 1, NOT_FINITE + 2):
            name = "q" if status == NOT_FINITE + 1 else "v"
            raise ValueError(f"plant state {name} contains NaN or inf (use reset() to set a valid state)")
        if status in (WRONG_LENGTH + 1, WRONG_LENGTH + 2):
            name, n = ("q", self.nq) if status == WRONG_LENGTH + 1 else ("v", self.nv)
            raise ValueError(f"plant state {name} must have shape ({n},) (use reset() to set it)")
        if status == INVALID_ARGUMENT:
            raise ValueError(f"dt must be a finite time step > 0 s, got {dt!r}")
        if status == SINGULAR:
            raise ValueError("singular inertia: an articulated-body inertia is not positive definite (massless "
                             "chain end or singular configuration); the state is unchanged")
        if status == DIVERGED:
            raise ValueError(self._divergence(dt, effort))
        raise ValueError(f"step failed with kernel status {status}")

    def _divergence(self, dt, effort) -> str:
        """The one line of :func:`plants.divergence.divergence_message`; a plainer one if even that fails."""
        try:
            return divergence_message(self, float(dt), effort)
        except Exception:  # the diagnosis must not hide the failure it explains
            return (f"{self.name} plant ({self.model.name!r}): a step of {dt} s left NaN or inf; the state is "
                    "unchanged")

    def step_size_problem(self, dt: float) -> str:
        """:func:`plants.divergence.explicit_damping_problem` (explicit steps that cannot hold a joint's damping)."""
        return explicit_damping_problem(self, dt)

    @property
    def viscous(self) -> np.ndarray:
        """Viscous friction per DOF (N m s/rad or N s/m; zero on a floating base's DOFs); a copy."""
        return self._viscous.copy()

    def set_external_wrench(self, frame: str | int | None = None, wrench=None) -> None:
        """Apply ``wrench`` = [n; f] (N m, N; world axes, moment about the origin of ``frame``, a link or
        frame name or a body index) to that frame's body from the next :meth:`step` on, held constant in
        world axes over each step (a frame off the body origin adds its lever arm at the current pose).
        ``frame=None``: remove every external wrench. Between steps only (not real-time: allocates)."""
        ws = self.dynamics.ws
        nb = self.model.nbodies
        if frame is None:
            ws[:nb, W_FEXT:W_FEXT + 6] = 0.0
            return
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ValueError(f"wrench must be 6 finite values [n; f], got {wrench!r}")
        if isinstance(frame, str):
            f = self.model.frame(frame)
            if f.body < 0:
                raise ValueError(f"frame '{frame}' is fixed to the world: no body to push")
            body, offset = f.body, f.translation
        else:
            body, offset = int(frame), np.zeros(3)
        rot, _ = self.dynamics.frame_placement(self.q, body)
        ws[body, W_FEXT:W_FEXT + 3] = w[:3] + np.cross(rot @ offset, w[3:])
        ws[body, W_FEXT + 3:W_FEXT + 6] = w[3:]

    def sensor_wrench(self, body: int, mount: np.ndarray, out: np.ndarray) -> bool:
        """:meth:`Plant.sensor_wrench`, at the accelerations the last step's effort, friction and end stops give
        (a plant with a ground contact model cannot tell, nor is anything transmitted across a frame fixed to the
        world: False)."""
        if self.contact_model is not None or body < 0:
            return False
        dyn = self.dynamics
        return _sensor_truth(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, self.applied_effort, self._viscous,
                             self._coulomb, self._scale, self._stops, self._stribeck, self._work, body, mount,
                             out) == OK

    def external_wrenches(self) -> np.ndarray:
        """The applied external wrenches, (nbodies, 6): row k [n; f] about body k's origin, world axes (a copy)."""
        return self.dynamics.ws[:self.model.nbodies, W_FEXT:W_FEXT + 6].copy()

    def friction_forces(self, v) -> np.ndarray:
        """Generalized friction forces at velocity ``v``: -viscous v - coulomb tanh(v / scale), plus the
        Stribeck part of :func:`add_stribeck_torques`."""
        v = np.ascontiguousarray(v, dtype=float)
        tau = -self._viscous * v - self._coulomb * np.tanh(v / self._scale)
        add_stribeck_torques(v, self._stribeck, self._scale, tau)
        return tau

    def end_stop_torques(self, q, v) -> np.ndarray:
        """Generalized end-stop torques at (q, v) (zero while every joint is within its limits)."""
        tau = np.zeros(self.nv)
        add_end_stop_torques(np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(v, dtype=float),
                             self._stops, tau)
        return tau

    def simulate_offline(self, duration: float, effort_fn, *, method: str = "DOP853", rtol: float = 1e-10,
                         atol: float = 1e-10, t_eval=None):
        """Accuracy reference: integrate the plant's equations with :func:`scipy.integrate.solve_ivp`.

        Starts from the current state at the current time ``self.t`` and runs
        to ``self.t + duration``; ``effort_fn(t, q, v)`` gives the nv
        generalized efforts at any time (it must not modify q or v). Returns
        ``(t, q_traj, v_traj)`` with shapes (N,), (N, nq), (N, nv), at the
        absolute times ``t_eval`` if given (else at the solver's steps); a
        free-flyer's quaternions are renormalised. The plant's own state and
        time are not changed. Raises ``ValueError`` for bad arguments or effort
        and ``RuntimeError`` if the solver fails.
        """
        try:
            duration = float(duration)
        except (TypeError, ValueError):
            raise ValueError(f"duration must be a finite number > 0 s, got {duration!r}") from None
        if not 0.0 < duration < math.inf:
            raise ValueError(f"duration must be a finite number > 0 s, got {duration!r}")
        if not callable(effort_fn):
            raise ValueError(f"effort_fn must be callable as effort_fn(t, q, v), got {effort_fn!r}")
        nq, nv = self.nq, self.nv
        dyn = self.dynamics
        t0 = self.t

        def rhs(t, y):
            q, v = y[:nq], y[nq:]
            effort = np.asarray(effort_fn(t, q, v), dtype=float)
            if effort.shape != (nv,):
                raise ValueError(f"effort_fn must return {nv} values, got shape {effort.shape}")
            if not np.all(np.isfinite(effort)):
                raise ValueError(f"effort_fn returned NaN or inf at t = {t}")
            dy = np.empty(nq + nv)
            dyn.configuration_rate(q, v, out=dy[:nq])
            dyn.forward_dynamics(q, v, effort + self.friction_forces(v) + self.end_stop_torques(q, v), out=dy[nq:])
            return dy

        y0 = np.concatenate([self.q, self.v])
        if t_eval is not None:
            t_eval = np.asarray(t_eval, dtype=float)
        from scipy.integrate import solve_ivp   # the offline reference only: a second of import time

        sol = solve_ivp(rhs, (t0, t0 + duration), y0, method=method, rtol=rtol, atol=atol, t_eval=t_eval)
        if not sol.success:
            raise RuntimeError(f"solve_ivp ({method}) failed: {sol.message}")
        q_traj = np.ascontiguousarray(sol.y[:nq].T)
        v_traj = np.ascontiguousarray(sol.y[nq:].T)
        for i in np.flatnonzero(self.model.joint_type == FREE_FLYER):
            o = self.model.idx_q[i] + 3
            q_traj[:, o:o + 4] /= np.linalg.norm(q_traj[:, o:o + 4], axis=1, keepdims=True)
        return sol.t.copy(), q_traj, v_traj

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy of the current state in J (potential zero at the world origin height)."""
        return self.dynamics.energy(self.q, self.v)

    def parameters(self) -> dict:
        """The settings, as keyword arguments that rebuild this plant with :func:`create_plant` (from the
        model it was created from: ``self.model`` already carries ``mass_scale``)."""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self._settings.items()}

    def __repr__(self) -> str:
        return (f"RigidBodyPlant({self.model.name!r}, integrator={self._settings['integrator']!r}, "
                f"substeps={self._substeps})")
