"""Compliant foot-ground contact: the configuration-independent ground model of Shah, Saha & Dutt (2012).

Shah, Saha & Dutt (2012, section 1) model every foot-ground interaction
as external forces and moments: the ground "can exert vertical conservative
and dissipative forces (represented by a combination of spring and dashpot),
and horizontal frictional forces" computed from the feet's positions and
velocities (refs. [13] Stewart 2000 and [14] Gilardi & Sharf 2002, whose
survey classifies this as a continuous, penalty-type contact model). The
resulting wrenches are the link-ground wrenches ``w^F`` of eqs. 17 and 20,
mapped into joint space as ``tau^F = N^T w^F`` (eq. 24); one set of
equations covers every phase (flight, single, double or multiple support).

Ground: the horizontal plane ``z = ground_height`` (world z up), normal
``n = e_z``. For a contact point P (a point fixed on a body) at depth
``delta = ground_height - z_P`` with velocity ``v_P``:

* normal force (Kelvin-Voigt spring-dashpot, no pull)::

      F_n = max(0, k delta + (d + 3/2 alpha k delta) delta_dot)   if delta > 0, else 0,

  with ``delta_dot = -v_P . n``; ``alpha = 0`` (the default) is the paper's
  linear spring-dashpot, ``alpha > 0`` (s/m) adds the Hunt-Crossley dashpot
  (Hunt & Crossley 1975; Marhefka & Orin 1999, reviewed by Gilardi & Sharf),
  whose force vanishes at first touch and gives a restitution coefficient of
  about ``1 - alpha v_impact``;

* friction on the tangential slip velocity ``v_t = v_P - (v_P . n) n``,
  ``s = |v_t| / v_s``, opposing the slip and proportional to the load::

      F_t = -F_n [mu tanh(4 s) + (mu_s - mu) s / (s^2/4 + 3/4)^2 + c_v |v_t|] v_t / |v_t|

  The first term is Coulomb friction regularised by ``tanh`` (within 0.1 %
  of ``mu F_n`` above ``v_s``); the second adds a Stribeck stiction peak that
  reaches ``mu_s F_n`` at ``|v_t| = v_s`` and decays to ``mu F_n`` when
  sliding fast (the form of the continuous velocity-based friction model of
  Brown & McPhee, J. Comput. Nonlinear Dynam., 2016); the third is viscous friction
  per unit load. With ``mu_s = mu`` (the default) it is plain regularised
  Coulomb-viscous friction. Memoryless, so the same function serves the
  fixed-step integrators and stiff variable-step solvers.
* wrench on the body the point belongs to, world-aligned about the body
  origin O: ``[n; f] = [(P - O) x F; F]``, accumulated into ``f_ext``.

Energy: with ``E_s = k delta^2 / 2`` the spring energy of a penetrating
point, the power the contact removes from the robot and the spring,

    P_diss = F_n delta_dot - F_t . v_t - k delta delta_dot,

is ``(d + 3/2 alpha k delta) delta_dot^2 - F_t . v_t >= 0`` while the force is unclamped and
``-k delta delta_dot > 0`` while clamped (the point leaves faster than the
spring relaxes): the contact dissipates energy and never creates it.

Default parameters (for robots of about 10 kg standing on 2-4 feet): a
stiffness of 1e5 N/m (a point carrying 25 N sinks 0.25 mm, a hard rubber
sole), damping 500 N s/m (damping ratio d / (2 sqrt(k m)) = 0.5 for a 2.5 kg
share of the robot on one point: a landing rebounds with a restitution of
about exp(-pi 0.5 / sqrt(1 - 0.5^2)) = 0.16), mu = 0.8 (rubber on concrete or
wood), a transition velocity of 0.05 m/s. Critical damping (1e3 N s/m) halves
the explicit integrators' stable step on the 0.2 kg biped feet;
:class:`rtctl.plants.legged.plant.LeggedPlant` documents the fixed-step settings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from numba import njit

from .kernels import W_FEXT, W_O, W_OMEGA, W_R, W_VEL, aba, forward_dynamics_cholesky, kinematics

__all__ = ["ContactModel", "contact_wrenches", "contact_wrenches_from_kinematics", "contact_dynamics",
           "compute_contact", "check_contact_points", "NPARAMS", "P_STIFFNESS", "P_DAMPING", "P_FRICTION",
           "P_STATIC_FRICTION", "P_VISCOUS_FRICTION", "P_SLIP_VELOCITY", "P_GROUND_HEIGHT", "P_HUNT_CROSSLEY",
           "INFO_POWER", "INFO_SPRING_ENERGY"]

# Layout of the packed parameter vector (ContactModel.pack()).
P_STIFFNESS = 0
P_DAMPING = 1
P_FRICTION = 2
P_STATIC_FRICTION = 3
P_VISCOUS_FRICTION = 4
P_SLIP_VELOCITY = 5
P_GROUND_HEIGHT = 6
P_HUNT_CROSSLEY = 7
NPARAMS = 8

# Entries of the ``info`` vector written by contact_dynamics.
INFO_POWER = 0          # W: power dissipated by the contacts
INFO_SPRING_ENERGY = 1  # J: energy stored in the contact springs


@dataclass(frozen=True)
class ContactModel:
    """Parameters of the compliant ground (SI units); invalid values raise ``ValueError`` naming the field.

    stiffness : N/m, normal spring per contact point (> 0).
    damping : N s/m, normal dashpot per contact point (>= 0).
    friction : Coulomb (kinetic) friction coefficient mu (>= 0).
    static_friction : stiction coefficient mu_s (>= friction); ``None`` means equal to ``friction``.
    viscous_friction : s/m, viscous friction per unit normal load c_v (>= 0).
    slip_velocity : m/s, transition velocity v_s of the friction law (> 0).
    ground_height : m, height of the ground plane.
    hunt_crossley : s/m, Hunt-Crossley damping alpha (>= 0; 0: linear dashpot only).
    """

    stiffness: float = 1e5
    damping: float = 500.0
    friction: float = 0.8
    static_friction: float | None = None
    viscous_friction: float = 0.0
    slip_velocity: float = 0.05
    ground_height: float = 0.0
    hunt_crossley: float = 0.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "static_friction" and value is None:
                object.__setattr__(self, f.name, self.friction)
                continue
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"contact {f.name} must be a finite number, got {value!r}")
            object.__setattr__(self, f.name, float(value))
        if not self.stiffness > 0:
            raise ValueError(f"contact stiffness must be > 0 N/m, got {self.stiffness!r}")
        for name in ("damping", "friction", "viscous_friction", "hunt_crossley"):
            if getattr(self, name) < 0:
                raise ValueError(f"contact {name} must be >= 0, got {getattr(self, name)!r}")
        if not self.slip_velocity > 0:
            raise ValueError(f"contact slip_velocity must be > 0 m/s, got {self.slip_velocity!r}")
        if self.static_friction < self.friction:
            raise ValueError(f"contact static_friction ({self.static_friction}) must be >= friction "
                             f"({self.friction})")

    def pack(self) -> np.ndarray:
        """The parameters as the flat float64 vector the kernels take (layout: the ``P_*`` constants)."""
        out = np.zeros(NPARAMS)
        out[P_STIFFNESS] = self.stiffness
        out[P_DAMPING] = self.damping
        out[P_FRICTION] = self.friction
        out[P_STATIC_FRICTION] = self.static_friction
        out[P_VISCOUS_FRICTION] = self.viscous_friction
        out[P_SLIP_VELOCITY] = self.slip_velocity
        out[P_GROUND_HEIGHT] = self.ground_height
        out[P_HUNT_CROSSLEY] = self.hunt_crossley
        return out

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def friction_coefficient(self, slip_speed) -> np.ndarray:
        """Friction force per unit normal load at the given slip speed(s) |v_t| (m/s)."""
        s = np.abs(np.asarray(slip_speed, dtype=float)) / self.slip_velocity
        bump = (self.static_friction - self.friction) * s / (0.25 * s * s + 0.75) ** 2
        return self.friction * np.tanh(4.0 * s) + bump + self.viscous_friction * s * self.slip_velocity


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


@njit(cache=True)
def contact_wrenches_from_kinematics(ws, params, bodies, points, f_ext, grf):
    """Ground forces from the poses and twists already in ``ws``; see :func:`contact_wrenches`.

    ``ws`` must hold the body rotations, origins, angular velocities and
    origin velocities of the state (after :func:`~rtctl.dynamics.kernels.kinematics`,
    ``rnea`` or ``aba`` on it). Returns ``(P_diss, E_s)``.
    """
    k = params[P_STIFFNESS]
    d = params[P_DAMPING]
    mu = params[P_FRICTION]
    bump = params[P_STATIC_FRICTION] - mu
    cv = params[P_VISCOUS_FRICTION]
    vs = params[P_SLIP_VELOCITY]
    ground = params[P_GROUND_HEIGHT]
    hc = 1.5 * params[P_HUNT_CROSSLEY] * k
    power = 0.0
    spring = 0.0
    for c in range(bodies.shape[0]):
        b = bodies[c]
        wb = ws[b]
        px, py, pz = points[c, 0], points[c, 1], points[c, 2]
        rx = wb[W_R] * px + wb[W_R + 1] * py + wb[W_R + 2] * pz
        ry = wb[W_R + 3] * px + wb[W_R + 4] * py + wb[W_R + 5] * pz
        rz = wb[W_R + 6] * px + wb[W_R + 7] * py + wb[W_R + 8] * pz
        depth = ground - (wb[W_O + 2] + rz)
        if depth <= 0.0:
            grf[c, 0] = grf[c, 1] = grf[c, 2] = 0.0
            continue
        wx, wy, wz = wb[W_OMEGA], wb[W_OMEGA + 1], wb[W_OMEGA + 2]
        vx = wb[W_VEL] + wy * rz - wz * ry
        vy = wb[W_VEL + 1] + wz * rx - wx * rz
        vz = wb[W_VEL + 2] + wx * ry - wy * rx
        rate = -vz
        spring += 0.5 * k * depth * depth
        fn = k * depth + (d + hc * depth) * rate
        if fn <= 0.0:
            grf[c, 0] = grf[c, 1] = grf[c, 2] = 0.0
            power -= k * depth * rate
            continue
        speed = np.sqrt(vx * vx + vy * vy)
        s = speed / vs
        # friction per unit slip velocity: F_n mu(s) / |v_t|, finite as |v_t| -> 0
        if s > 1e-6:
            g = 0.25 * s * s + 0.75
            per = fn * (mu * np.tanh(4.0 * s) / s + bump / (g * g) + cv * vs) / vs
        else:
            per = fn * (4.0 * mu + bump / 0.5625 + cv * vs) / vs
        fx, fy = -per * vx, -per * vy
        grf[c, 0], grf[c, 1], grf[c, 2] = fx, fy, fn
        power += (fn - k * depth) * rate + per * speed * speed
        f = f_ext[b]
        f[0] += ry * fn - rz * fy
        f[1] += rz * fx - rx * fn
        f[2] += rx * fy - ry * fx
        f[3] += fx
        f[4] += fy
        f[5] += fn
    return power, spring


@njit(cache=True)
def contact_wrenches(mi, mf, ws, q, v, params, bodies, points, f_ext, grf):
    """Foot-ground wrenches w^F (Shah, Saha & Dutt, 2012, eqs. 17, 20) of the compliant ground at state (q, v).

    Arguments: the packed model ``mi``, ``mf`` and workspace ``ws`` (as for
    the kernels of :mod:`rtctl.dynamics.kernels`), ``q`` (nq), ``v`` (nv),
    ``params`` from :meth:`ContactModel.pack`, ``bodies`` (nc,) int64 body
    index of each contact point, ``points`` (nc, 3) the points in their
    body's frame, ``f_ext`` (nbodies, 6) and ``grf`` (nc, 3).

    Runs the forward kinematics and twist recursion (eq. 1) on ``ws`` (its
    twist-rate columns are left meaningless), then **adds** each point's
    wrench ``[(P - O_b) x F; F]`` (world axes, about the body origin) to row
    ``b`` of ``f_ext`` and **writes** the ground reaction force F on the robot
    (world axes) to ``grf[c]``. ``f_ext`` may be the workspace's own
    external-wrench columns ``ws[:nbodies, W_FEXT:W_FEXT + 6]`` (zero them
    first), which the ``rnea``/``aba``/``forward_dynamics_cholesky`` kernels
    read. Returns ``(P_diss, E_s)``: the power dissipated by the contacts (W,
    >= 0) and the energy stored in their springs (J). Allocates nothing;
    inputs are not checked (callable from other compiled code).
    """
    kinematics(mi, mf, ws, q, v, v, 0.0)
    return contact_wrenches_from_kinematics(ws, params, bodies, points, f_ext, grf)


@njit(cache=True)
def refresh_contact(mi, mf, ws, q, v, contact):
    """Replace every external wrench in ``ws`` by the contact wrenches at (q, v) and write ``(P_diss, E_s)``
    into ``info`` of ``contact`` (the tuple of :func:`contact_dynamics`); returns them."""
    params, bodies, points, grf, info, mat = contact
    nb = mi.shape[0]
    for i in range(nb):
        for j in range(6):
            ws[i, W_FEXT + j] = 0.0
    power, spring = contact_wrenches(mi, mf, ws, q, v, params, bodies, points, ws[:nb, W_FEXT:W_FEXT + 6], grf)
    info[INFO_POWER] = power
    info[INFO_SPRING_ENERGY] = spring
    return power, spring


@njit(cache=True)
def contact_dynamics(mi, mf, ws, q, v, tau, qdd, contact):
    """Forward dynamics under the ground contact: qdd = FD(q, v, tau, w^F) (eqs. 23-24 with tau^F).

    ``contact`` is the tuple ``(params, bodies, points, grf, info, mat)``:
    the arguments of :func:`contact_wrenches`, ``info`` (2,) receiving
    ``(P_diss, E_s)``, and ``mat`` selecting the algorithm: a (0, 0) array
    for the O(n) articulated-body recursion (``aba``, eqs. 28-30), an
    (nv, nv) work matrix for the O(n^3) M + Cholesky reference. Replaces
    every external wrench in ``ws`` by the contact wrenches. Returns the
    forward-dynamics status code.
    """
    refresh_contact(mi, mf, ws, q, v, contact)
    mat = contact[5]
    if mat.shape[0] == 0:
        return aba(mi, mf, ws, q, v, tau, qdd)
    return forward_dynamics_cholesky(mi, mf, ws, mat, q, v, tau, qdd)


def check_contact_points(model, bodies, points):
    """Validate contact bodies and points for ``model``; return them as (int64 (nc,), float64 (nc, 3)) arrays."""
    try:
        b = np.asarray(bodies)
        p = np.asarray(points, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("contact_bodies must be body indices and contact_points numeric (nc, 3) arrays") from None
    if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.integer):
        raise ValueError(f"contact_bodies must be a non-empty 1-D array of body indices, got {np.asarray(bodies)!r}")
    if p.shape != (b.shape[0], 3) or not np.all(np.isfinite(p)):
        raise ValueError(f"contact_points must be a finite ({b.shape[0]}, 3) array (one point per contact body, "
                         f"in the body frame, m), got shape {p.shape}")
    bad = b[(b < 0) | (b >= model.nbodies)]
    if bad.size:
        raise ValueError(f"contact_bodies: body index {int(bad[0])} out of range 0..{model.nbodies - 1}")
    return np.ascontiguousarray(b, dtype=np.int64), np.ascontiguousarray(p)


def compute_contact(dynamics, contact: ContactModel, q, v, bodies, points):
    """Checked Python API: ``(f_ext (nbodies, 6), grf (nc, 3), P_diss, E_s)`` at state (q, v).

    ``f_ext`` holds the contact wrenches [n; f] (world axes, about each body's
    origin) in the form :meth:`rtctl.dynamics.Dynamics.forward_dynamics` takes.
    """
    model = dynamics.model
    bodies, points = check_contact_points(model, bodies, points)
    q = dynamics._vec(q, model.nq, "q")
    v = dynamics._vec(v, model.nv, "v")
    dynamics._finite(q, "q")
    dynamics._finite(v, "v")
    f_ext = np.zeros((model.nbodies, 6))
    grf = np.zeros((bodies.shape[0], 3))
    power, spring = contact_wrenches(dynamics.mi, dynamics.mf, dynamics.ws, q, v, contact.pack(), bodies, points,
                                     f_ext, grf)
    return f_ext, grf, float(power), float(spring)
