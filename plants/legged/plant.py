"""Simulated legged robot on a compliant ground (Shah, Saha & Dutt, 2012).

:class:`LeggedPlant` (registered as ``"legged"``) integrates the
configuration-independent equations of motion of a floating-base robot,

    I(q) q'' + C(q, q') q' = tau + tau^F,   tau^F = N^T w^F        (eqs. 23-24)

where the link-ground wrenches ``w^F`` come from the compliant contact of
:mod:`rtctl.dynamics.contact` (spring-dashpot normal force without pull,
regularised Coulomb/viscous friction, optional stiction) at contact points on
the feet. The same equations hold in flight and in single, double or
multiple support. ``q''`` is found by the O(n) articulated-module recursion
(``forward_dynamics="aba"``, eqs. 28-30, the default) or by the O(n^3)
M + Cholesky reference (``"cholesky"``); joint friction acts on the actuated
joints as in :class:`~plants.rigid_body.RigidBodyPlant`.

Fixed-step mode (:meth:`LeggedPlant.step`): one compiled, allocation-free call
per step that runs the rigid-body plant's RK4 or semi-implicit Euler
sub-steps (:func:`plants.rigid_body.advance`) with the contact wrenches
recomputed at every stage, and accounts the energy dissipated by the contacts
and by joint friction and the work done by the efforts (trapezoidal rule over
the sub-steps; the balance closes to about 2 % of the dissipated energy at
the defaults, the error coming from the force jump of the linear dashpot at
touch-down). The contact is stiff and the explicit integrators must resolve
its fastest mode, the 0.2 kg biped feet pitching on the heel and toe
dashpots. The default ground is that of Shah, Saha & Dutt (2012), :data:`PAPER_GROUND`
(k = 1e6 N/m, d = 5000 N s/m per contact point: the paper's biped plan
walks on it and falls on softer ones, :mod:`rtctl.plants.legged.gait`).
Measured at 1 kHz, joints held by a PD (``benchmarks/legged.py`` prints the
sweep): on that ground the standing quadruped settles (summed vertical
ground reaction within 1 % of the weight) from 8 semi-implicit Euler or 4
RK4 sub-steps and the biped only from 48 or 32 -- its walks run at 10 kHz
with one step per cycle under the laws of :mod:`rtctl.plants.legged.control`,
which cancel the ground force they see -- while on a 1e5 / 500 ground
the biped settles from 8 or 4 sub-steps and the quadruped from 4 or 2. While
trotting, the friction of the loaded feet (slope ``4 mu F_n / v_s`` at zero
slip) sets the accuracy: a 4x softer friction law (``slip_velocity = 0.2``
m/s, more creep under tangential load) cut the trunk's deviation from a
converged solution after 1 s of trot about tenfold at 4-8 semi-implicit
Euler sub-steps (1e5 / 500 ground); the sweep prints that deviation per
sub-step count. The default, semi-implicit Euler with 8 sub-steps (125 us),
is the cheapest setting that settles the quadruped on either ground and the
biped on the softer one.

Offline mode (:meth:`LeggedPlant.simulate_offline`): the same right-hand side
(one compiled call per evaluation) integrated by a stiff variable-step solver
of :func:`scipy.integrate.solve_ivp` -- ``"BDF"`` (variable-order backward
differentiation, the counterpart of the MATLAB NDF solver the paper used) or
``"LSODA"`` -- with the dissipated energy and the effort work as extra states.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, types

from rtctl.dynamics.contact import (INFO_POWER, INFO_SPRING_ENERGY, ContactModel, check_contact_points,
                                    refresh_contact)
from rtctl.dynamics.kernels import OK, SINGULAR, W_FEXT, WRONG_LENGTH, model_sizes
from rtctl.model import FREE_FLYER, PRISMATIC, Model

from rtctl.options import setting

from ..base import Plant
from .foot_sensors import foot_sensor_wrench
from ..integrate import advance_with_rollback, inlined, rk4_advance
from ..rigid_body import (_NO_STRIBECK, _W_TAU, DIVERGED, RK4, STOP_ROWS, WORK_ROWS, RigidBodyPlant, _derivative,
                          _normalise_after_step, _semi_implicit_euler_step, check_step)

__all__ = ["LeggedPlant", "PAPER_GROUND", "FORWARD_DYNAMICS", "E_CONTACT", "E_JOINT_FRICTION", "E_EFFORT_WORK"]

FORWARD_DYNAMICS = ("aba", "cholesky")

PAPER_GROUND = ContactModel(stiffness=1e6, damping=5000.0)
"""The legged plant's default ground: the stiff, well-damped ground of Shah, Saha & Dutt (2012) (N/m, N s/m per contact
point); the other fields are :class:`~rtctl.dynamics.contact.ContactModel`'s defaults."""

# Entries of the energy-accounting vector (J).
E_CONTACT = 0          # dissipated by the ground contacts
E_JOINT_FRICTION = 1   # dissipated by joint friction
E_EFFORT_WORK = 2      # work done on the robot by the efforts

_R_Q0 = WORK_ROWS       # extra work rows: the offline solver's state and rates
_R_V0 = WORK_ROWS + 1
_R_DQ = WORK_ROWS + 2
_R_A = WORK_ROWS + 3
_R_TAU = WORK_ROWS + 4
_R_POWER = WORK_ROWS + 5   # [contact, joint friction, effort] power (W) at the end of the last sub-step
_R_ENERGY = WORK_ROWS + 6  # the same three integrated over the step so far (J)
_ROWS = WORK_ROWS + 7
_ENERGY_TERMS = 3          # the work array is at least this wide


_NO_STOPS = np.zeros((STOP_ROWS, 0))  # the legs run without end stops: the gait keeps them inside


@njit(cache=True)
def _powers(mi, mf, ws, q, v, effort, viscous, coulomb, scale, contact):
    """(contact dissipation, joint-friction dissipation, effort power) in W at (q, v); refreshes the
    contact wrenches in ``ws``, ``grf`` and ``info`` for this state."""
    power, _ = refresh_contact(mi, mf, ws, q, v, contact)
    joint = 0.0
    work = 0.0
    for k in range(v.shape[0]):
        joint += viscous[k] * v[k] * v[k] + coulomb[k] * v[k] * np.tanh(v[k] / scale)
        work += effort[k] * v[k]
    return power, joint, work


_V, _M, _I = types.float64[::1], types.float64[:, ::1], types.int64[:, ::1]
CONTACT_TYPE = types.Tuple((_V, types.int64[::1], _M, _M, _V, _M))  # (params, bodies, points, grf, info, mat)
SIG_STEP = types.int64(_I, _M, _M, _V, _V, _V, types.float64, types.int64, types.int64, _V, _V, types.float64, _M,
                       CONTACT_TYPE, _V)


@inlined
def _account_energy(q, v, h, work, args):
    """After a sub-step of length h: the trapezoidal rule on the contact, joint-friction and effort powers
    (work rows ``_R_POWER``: at the start of the sub-step; ``_R_ENERGY``: the sums over the step)."""
    mi, mf, ws, effort, viscous, coulomb, scale, _, contact, _, _ = args
    power, energy = work[_R_POWER], work[_R_ENERGY]
    p1, j1, w1 = _powers(mi, mf, ws, q, v, effort, viscous, coulomb, scale, contact)
    energy[0] += 0.5 * h * (power[0] + p1)
    energy[1] += 0.5 * h * (power[1] + j1)
    energy[2] += 0.5 * h * (power[2] + w1)
    power[0], power[1], power[2] = p1, j1, w1
    return OK


@inlined
def _normalise_and_account_energy(q, v, h, work, args):
    """After an RK4 sub-step: the free-flyer quaternion back to unit norm, then :func:`_account_energy`."""
    _normalise_after_step(q, v, h, work, args)
    return _account_energy(q, v, h, work, args)


_rk4_advance = rk4_advance("legged", _derivative, finish=_normalise_and_account_energy)
_euler_advance = advance_with_rollback("legged_euler", _semi_implicit_euler_step, finish=_account_energy)


@njit(SIG_STEP, cache=True)
def _step(mi, mf, ws, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work, contact, energy):
    """Advance (q, v) in place by ``dt`` in ``substeps`` sub-steps under ``effort`` and the ground contact.

    ``contact`` is the tuple of :func:`rtctl.dynamics.contact.contact_dynamics`;
    ``energy`` (3,) accumulates [contact dissipation, joint-friction
    dissipation, effort work] (J). Returns ``OK`` or a status code of
    :mod:`plants.rigid_body`; on failure q, v and ``energy`` are unchanged.
    """
    status = check_step(mi, q, v, effort, dt, substeps, method, viscous, coulomb, scale, work)
    if status != OK:
        return status
    nq, nv = model_sizes(mi)
    if work.shape[0] < _ROWS or work.shape[1] < max(nq, nv, _ENERGY_TERMS):
        return WRONG_LENGTH + 6
    power, step_energy = work[_R_POWER], work[_R_ENERGY]
    power[0], power[1], power[2] = _powers(mi, mf, ws, q, v, effort, viscous, coulomb, scale, contact)
    for k in range(_ENERGY_TERMS):
        step_energy[k] = 0.0
    args = (mi, mf, ws, effort, viscous, coulomb, scale, work[_W_TAU, :nv], contact, _NO_STOPS, _NO_STRIBECK)
    if method == RK4:
        status = _rk4_advance(q, v, dt, substeps, work, DIVERGED, args)
    else:
        status = _euler_advance(q, v, dt, substeps, work, DIVERGED, args)
    if status != OK:
        return status if status == SINGULAR else DIVERGED
    for k in range(_ENERGY_TERMS):
        energy[k] += step_energy[k]
    return OK


@njit(cache=True)
def _rhs(mi, mf, ws, y, effort, viscous, coulomb, scale, work, contact, dy):
    """d/dt of y = [q, v, E_contact, E_joint, W_effort] for the offline solver; returns the FD status."""
    nq, nv = model_sizes(mi)
    q, v = work[_R_Q0, :nq], work[_R_V0, :nv]
    for k in range(nq):
        q[k] = y[k]
    for k in range(nv):
        v[k] = y[nq + k]
    dq, a, tau = work[_R_DQ, :nq], work[_R_A, :nv], work[_R_TAU, :nv]
    status = _derivative(q, v, dq, a, (mi, mf, ws, effort, viscous, coulomb, scale, tau, contact, _NO_STOPS,
                                       _NO_STRIBECK))
    for k in range(nq):
        dy[k] = dq[k]
    for k in range(nv):
        dy[nq + k] = a[k]
    info = contact[4]
    joint = 0.0
    power = 0.0
    for k in range(nv):
        joint += viscous[k] * v[k] * v[k] + coulomb[k] * v[k] * np.tanh(v[k] / scale)
        power += effort[k] * v[k]
    dy[nq + nv] = info[INFO_POWER]
    dy[nq + nv + 1] = joint
    dy[nq + nv + 2] = power
    return status


_CONTACT_OPTIONS = {"contact_stiffness": "stiffness", "contact_damping": "damping", "contact_friction": "friction",
                    "contact_static_friction": "static_friction", "contact_viscous_friction": "viscous_friction",
                    "contact_slip_velocity": "slip_velocity", "contact_hunt_crossley": "hunt_crossley",
                    "ground_height": "ground_height"}


def _robot_for(model: Model):
    """The :class:`~rtctl.plants.legged.model.LeggedRobot` whose model ``model`` is, or None."""
    from rtctl.plants.legged.model import LEGGED_ROBOTS
    if model.name not in LEGGED_ROBOTS:
        return None
    robot = LEGGED_ROBOTS[model.name]()
    if robot.model.body_names != model.body_names or robot.model.nv != model.nv:
        raise ValueError(f"model '{model.name}' does not have the bodies of the built-in robot of that name; "
                         "pass contact_bodies and contact_points")
    return robot


@dataclass(frozen=True)
class ContactOptions:
    """``[contact]``: the compliant ground of :class:`~rtctl.dynamics.contact.ContactModel` (SI units)."""

    stiffness: float = setting("float", PAPER_GROUND.stiffness, positive=True)   # N/m, Shah, Saha & Dutt 2012
    damping: float = setting("float", PAPER_GROUND.damping, low=0.0)             # N s/m
    hunt_crossley: float = setting("float", 0.0, low=0.0)
    friction: float = setting("float", 0.8, low=0.0)
    static_friction: float = setting("float", None, low=0.0)
    viscous_friction: float = setting("float", 0.0, low=0.0)         # N s/m
    slip_velocity: float = setting("float", 0.05, positive=True)     # m/s
    ground_height: float = setting("float", 0.0)                     # m


class LeggedPlant(RigidBodyPlant):
    """A floating-base robot on the compliant ground, advanced by a fixed-step integrator.

    Parameters
    ----------
    model : the full floating-base model (planar, Euler-angle or free-flyer base).
    robot : a :class:`~rtctl.plants.legged.model.LeggedRobot` supplying the contact
        points; by default the built-in robot named like ``model`` (a key of
        ``LEGGED_ROBOTS``), unless ``contact_bodies``/``contact_points`` are given.
    contact_bodies, contact_points : (nc,) body indices and (nc, 3) points in
        those bodies' frames (m).
    contact : a :class:`~rtctl.dynamics.contact.ContactModel` or a dict of its
        fields; or give the fields as ``contact_stiffness``, ``contact_damping``,
        ``contact_friction``, ``contact_static_friction``,
        ``contact_viscous_friction``, ``contact_slip_velocity``, ``contact_hunt_crossley``,
        ``ground_height``. Fields not given: :data:`PAPER_GROUND` (k = 1e6 N/m,
        d = 5000 N s/m), the rest :class:`~rtctl.dynamics.contact.ContactModel`'s defaults.
    forward_dynamics : ``"aba"`` (O(n), default) or ``"cholesky"`` (O(n^3)).
    integrator, substeps, viscous_friction, coulomb_friction,
    coulomb_velocity_scale : as for :class:`RigidBodyPlant` (joint friction on
        the actuated joints); defaults ``"semi_implicit_euler"`` and 8 sub-steps.

    Invalid settings raise ``ValueError`` naming the parameter and its value.
    """

    sections = {"contact": ContactOptions}
    integrators = ("rk4", "semi_implicit_euler")  # the ground's stiffness is not in the Rosenbrock step's Jacobian

    @dataclass(frozen=True)
    class Options(Plant.Options):
        forward_dynamics: str = setting("str", "aba", choices=("aba", "cholesky"))   # O(n) or O(n^3)

    @classmethod
    def from_config(cls, options: dict, context, **arguments):
        return super().from_config(options, context, contact=dict(context.sections["contact"]), **arguments)

    default_integrator, default_substeps = "semi_implicit_euler", 8
    friction_from_model = False   # the joint friction given, else none

    def own_settings(self, options) -> tuple[bool, object, object]:
        return False, None, None   # the feet, not end stops, meet the world; no Stribeck effect

    def __init__(self, model: Model, options: "LeggedPlant.Options | None" = None, *, robot=None,
                 contact_bodies=None, contact_points=None, contact=None, **contact_options):
        unknown = sorted(set(contact_options) - set(_CONTACT_OPTIONS))
        if unknown:
            raise ValueError(f"unknown option '{unknown[0]}' for the legged plant; contact options: "
                             f"{sorted(_CONTACT_OPTIONS)}")
        super().__init__(model, options)
        del self._settings["end_stops"]
        forward_dynamics = self.options.forward_dynamics
        self.contact_model = self._contact_model(contact, contact_options)
        explicit = contact_bodies is not None or contact_points is not None
        if robot is None and not explicit:
            robot = _robot_for(model)
            if robot is None:
                raise ValueError(f"model '{model.name}' is not a built-in legged robot; pass robot= or "
                                 "contact_bodies and contact_points")
        if explicit:
            if contact_bodies is None or contact_points is None:
                raise ValueError("give both contact_bodies and contact_points")
            bodies, points = check_contact_points(model, contact_bodies, contact_points)
            self.foot_names = [f"contact_{k}" for k in range(bodies.shape[0])]
        else:
            bodies, points = check_contact_points(model, robot.contact_bodies, robot.contact_points)
            self.foot_names = list(robot.foot_names)
        self.robot = robot
        self.contact_bodies, self.contact_points = bodies, points
        nc = bodies.shape[0]
        self._grf = np.zeros((nc, 3))
        self._info = np.zeros(2)
        self._mat = np.zeros((model.nv, model.nv) if forward_dynamics == "cholesky" else (0, 0))
        self._contact = (self.contact_model.pack(), bodies, points, self._grf, self._info, self._mat)
        self._work = np.zeros((_ROWS, max(model.nq, model.nv, _ENERGY_TERMS)))
        self._energy = np.zeros(3)
        self._settings.update(forward_dynamics=forward_dynamics, contact=self.contact_model.as_dict())
        if explicit:
            self._settings.update(contact_bodies=bodies.tolist(), contact_points=points.tolist())
        self.q[:] = self.standing_configuration()

    @staticmethod
    def _contact_model(contact, options) -> ContactModel:
        if contact is not None and options:
            raise ValueError("give either contact= or the contact_* options, not both")
        if isinstance(contact, ContactModel):
            return contact
        fields = {"stiffness": PAPER_GROUND.stiffness, "damping": PAPER_GROUND.damping}  # the rest: ContactModel's
        if contact is None:
            return ContactModel(**{**fields, **{_CONTACT_OPTIONS[k]: v for k, v in options.items() if v is not None}})
        if isinstance(contact, dict):
            try:
                return ContactModel(**{**fields, **contact})
            except TypeError as exc:
                raise ValueError(f"contact: {exc}") from None
        raise ValueError(f"contact must be a ContactModel or a dict of its fields, got {contact!r}")

    # -- state -----------------------------------------------------------------
    def standing_configuration(self) -> np.ndarray:
        """The neutral configuration with the base moved vertically so the lowest contact point touches the
        ground (unchanged if the base has no vertical coordinate: a free-flyer's z or a prismatic base
        joint along world z)."""
        m = self.model
        q = m.neutral_configuration()
        rot, pos = self.dynamics.forward_kinematics(q)
        iz = None
        if m.has_free_flyer:
            iz = int(m.idx_q[0]) + 2
        else:
            for i in range(m.nbodies):
                if m.joint_type[i] != PRISMATIC or m.parent[i] != i - 1:
                    break
                if np.allclose(rot[i] @ m.axis[i], (0.0, 0.0, 1.0)):
                    iz = int(m.idx_q[i])
                    break
        if iz is None:
            return q
        z = min(pos[b, 2] + rot[b, 2] @ p for b, p in zip(self.contact_bodies, self.contact_points))
        q[iz] += self.contact_model.ground_height - z
        return q

    def reset(self, q=None, v=None) -> None:
        """Set the state (defaults: :meth:`standing_configuration`, rest), time and energy accounts to zero."""
        super().reset(self.standing_configuration() if q is None else q, v)
        self._energy[:] = 0.0
        if np.all(np.isfinite(self.q)) and np.all(np.isfinite(self.v)):
            self._refresh()   # foot_forces and the foot sensors read the ground at this state from the start

    def step(self, dt: float, effort) -> None:
        """Advance q, v (in place) and t by ``dt`` seconds with ``effort`` (nv generalized forces) held.

        Raises ``ValueError`` (state unchanged) for a bad ``dt`` or ``effort``,
        a singular inertia, or a diverging integration.
        """
        dyn = self.dynamics
        try:
            status = _step(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, effort, dt, self._substeps, self._method,
                           self._viscous, self._coulomb, self._scale, self._work, self._contact, self._energy)
        except TypeError:
            dt, effort = self._converted(dt, effort)
            status = _step(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, effort, dt, self._substeps, self._method,
                           self._viscous, self._coulomb, self._scale, self._work, self._contact, self._energy)
        if status != OK:
            self._raise(status, dt, effort)
        self.t += dt

    def _raise(self, status: int, dt, effort):
        if status == DIVERGED:
            raise ValueError(f"the integration diverged in a step of {dt} s with {self._substeps} sub-step(s) "
                             f"({self._settings['integrator']}); the contact (stiffness "
                             f"{self.contact_model.stiffness:g} N/m, damping {self.contact_model.damping:g} N s/m, "
                             f"slip_velocity {self.contact_model.slip_velocity:g} m/s) needs shorter sub-steps: "
                             "add substeps or soften the contact; the state is unchanged")
        super()._raise(status, dt, effort)

    # -- contact and energy ------------------------------------------------------
    def _refresh(self):
        dyn = self.dynamics
        zero = np.zeros(self.nv)
        for name, arr in (("q", self.q), ("v", self.v)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"plant state {name} contains NaN or inf")
        _powers(dyn.mi, dyn.mf, dyn.ws, self.q, self.v, zero, self._viscous, self._coulomb, self._scale,
                self._contact)

    def foot_forces(self, out: np.ndarray) -> None:
        """The ground reaction at each foot from the contact model's last evaluation (the last stage of the
        last step), world axes (N); allocation-free."""
        out[:] = self._grf

    def sensor_wrench(self, body: int, mount: np.ndarray, out: np.ndarray) -> bool:
        """:meth:`Plant.sensor_wrench` of a force-torque sensor on a foot: the ground reaction at the contact
        points of ``body`` (:meth:`foot_forces`, the contact model at the current state) as the wrench the ground
        exerts across the sensor, about its point and in its axes
        (:func:`~rtctl.plants.legged.foot_sensors.foot_sensor_wrench`); allocation-free. Between sole and ground
        the sensor carries nothing but the ground's force, so its reading needs no accelerations. False for the world (nothing is transmitted across it) and for a body
        with no contact point (the trunk, a thigh): there the reading would be the wrench transmitted through
        the leg, which needs the accelerations of everything beyond the cut under the ground's forces (the
        rate function :class:`RigidBodyPlant` evaluates for a plant without ground); this plant does not
        evaluate it for a sensor."""
        if body < 0:
            return False
        dyn = self.dynamics
        return foot_sensor_wrench(dyn.mi, dyn.mf, dyn.ws, self.q, self._grf, self.contact_bodies,
                                  self.contact_points, body, mount, out)

    @property
    def ground_reaction(self) -> np.ndarray:
        """(nc, 3) ground reaction force on the robot at each contact point, world axes (N), current state."""
        self._refresh()
        return self._grf.copy()

    @property
    def total_ground_reaction(self) -> np.ndarray:
        """Sum of the ground reaction forces (3,), world axes (N), current state."""
        return self.ground_reaction.sum(axis=0)

    @property
    def contact_wrenches(self) -> np.ndarray:
        """(nbodies, 6) contact wrenches [n; f] about each body origin, world axes, current state."""
        self._refresh()
        nb = self.model.nbodies
        return self.dynamics.ws[:nb, W_FEXT:W_FEXT + 6].copy()

    @property
    def spring_energy(self) -> float:
        """Energy stored in the contact springs (J), current state."""
        self._refresh()
        return float(self._info[INFO_SPRING_ENERGY])

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy in J; the potential is gravity's (zero at the world origin height)
        plus the contact springs' (:attr:`spring_energy`)."""
        kinetic, gravity = self.dynamics.energy(self.q, self.v)
        return kinetic, gravity + self.spring_energy

    @property
    def dissipated_energy(self) -> float:
        """Energy (J) dissipated since :meth:`reset` by the contacts and joint friction (fixed-step mode)."""
        return float(self._energy[E_CONTACT] + self._energy[E_JOINT_FRICTION])

    @property
    def energy_account(self) -> dict:
        """Energy accounts since :meth:`reset` (J): ``contact`` and ``joint_friction`` dissipation, ``effort_work``.

        Balance: kinetic + potential + dissipated - effort_work is constant up to integration error.
        """
        e = self._energy
        return {"contact": float(e[E_CONTACT]), "joint_friction": float(e[E_JOINT_FRICTION]),
                "effort_work": float(e[E_EFFORT_WORK])}

    # -- offline -----------------------------------------------------------------
    def simulate_offline(self, duration: float, effort_fn, *, method: str = "BDF", rtol: float = 1e-6,
                         atol: float = 1e-8, t_eval=None, max_step: float = math.inf):
        """Integrate the plant's equations with a stiff variable-step solver of :func:`scipy.integrate.solve_ivp`.

        Starts from the current state at ``self.t`` and runs ``duration`` s;
        ``effort_fn(t, q, v)`` gives the nv efforts (it must not modify q, v).
        ``method``: ``"BDF"`` (default), ``"LSODA"`` or ``"Radau"``. Returns
        ``(t, q_traj, v_traj, info)``: shapes (N,), (N, nq), (N, nv) at the
        absolute times ``t_eval`` if given (else the solver's steps), and
        ``info`` with the energy accounts along the trajectory (``contact``,
        ``joint_friction``, ``effort_work``: (N,) J from the start) and the
        number of right-hand-side evaluations ``nfev``. The plant's state and
        time are unchanged. ``ValueError`` for bad arguments or efforts,
        ``RuntimeError`` if the solver fails.
        """
        try:
            duration = float(duration)
        except (TypeError, ValueError):
            raise ValueError(f"duration must be a finite number > 0 s, got {duration!r}") from None
        if not 0.0 < duration < math.inf:
            raise ValueError(f"duration must be a finite number > 0 s, got {duration!r}")
        if method not in ("BDF", "LSODA", "Radau"):
            raise ValueError(f"method must be 'BDF', 'LSODA' or 'Radau' (stiff solvers), got {method!r}")
        if not callable(effort_fn):
            raise ValueError(f"effort_fn must be callable as effort_fn(t, q, v), got {effort_fn!r}")
        nq, nv = self.nq, self.nv
        dyn = self.dynamics
        work = np.zeros_like(self._work)
        args = (self._viscous, self._coulomb, self._scale, work, self._contact)

        def rhs(t, y):
            effort = np.ascontiguousarray(effort_fn(t, y[:nq], y[nq:nq + nv]), dtype=np.float64)
            if effort.shape != (nv,):
                raise ValueError(f"effort_fn must return {nv} values, got shape {effort.shape}")
            if not np.all(np.isfinite(effort)):
                raise ValueError(f"effort_fn returned NaN or inf at t = {t}")
            dy = np.empty(nq + nv + 3)
            status = _rhs(dyn.mi, dyn.mf, dyn.ws, y, effort, *args, dy)
            if status != OK:
                dy[:] = np.nan
            return dy

        y0 = np.concatenate([self.q, self.v, np.zeros(3)])
        t0 = self.t
        if t_eval is not None:
            t_eval = np.asarray(t_eval, dtype=float)
        from scipy.integrate import solve_ivp   # the offline reference only: a second of import time

        sol = solve_ivp(rhs, (t0, t0 + duration), y0, method=method, rtol=rtol, atol=atol, t_eval=t_eval,
                        max_step=max_step)
        if not sol.success:
            raise RuntimeError(f"solve_ivp ({method}) failed: {sol.message}")
        q_traj = np.ascontiguousarray(sol.y[:nq].T)
        v_traj = np.ascontiguousarray(sol.y[nq:nq + nv].T)
        for i in np.flatnonzero(self.model.joint_type == FREE_FLYER):
            o = self.model.idx_q[i] + 3
            q_traj[:, o:o + 4] /= np.linalg.norm(q_traj[:, o:o + 4], axis=1, keepdims=True)
        e = sol.y[nq + nv:]
        info = {"contact": e[0].copy(), "joint_friction": e[1].copy(), "effort_work": e[2].copy(),
                "nfev": int(sol.nfev)}
        return sol.t.copy(), q_traj, v_traj, info

    def __repr__(self) -> str:
        return (f"LeggedPlant({self.model.name!r}, {self.contact_bodies.shape[0]} contact points, integrator="
                f"{self._settings['integrator']!r}, substeps={self._substeps}, "
                f"forward_dynamics={self._settings['forward_dynamics']!r})")
