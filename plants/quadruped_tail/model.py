"""Quadruped with a robotic pendulum tail, all four feet on the ground (Liu & Ben-Tzvi, 2018).

Virtual-work kinematics and dynamics of the 8-DOF hybrid mechanism: the torso
is the travelling plate of a 4-SRRR parallel mechanism (hip universal joint =
two revolute joints, knee revolute, spherical foot fixed at ``d_i``) and carries
a massless tail bar with a tip mass on a universal joint.

Generalized coordinates ``q = [p, phi_x, phi_y, phi_z, theta_ta, theta_tb]``
(eq. 1: ``R = Rz(phi_z) Ry(phi_y) Rx(phi_x)``, roll-pitch-yaw about fixed axes).

Geometry and assumptions (Table 1 and section 4 of the paper; Figs. 1-3 are
not in the OCR text, so the following are stated here and checked by the tests):

* The torso's long axis is ``y`` (Table 1: ``I_xx > I_yy``) and the tail points
  to ``-y`` (eq. 10: ``t = R_x(ta) R_z(tb) [0, -l_t, 0]``). The hip attachment
  points ``a_i`` lie in the torso's mid plane ``z = 0`` on a 0.48 m (x) by
  0.54 m (y) rectangle centred on P: ``a_1 = (0.24, 0.27, 0)``,
  ``a_2 = (-0.24, 0.27, 0)``, ``a_3 = (-0.24, -0.27, 0)``, ``a_4 = (0.24, -0.27, 0)``
  (``|a1 - a2| = 0.48``, ``|a2 - a3| = 0.54``); the feet ``d_i`` of section 4
  then lie within 7 cm of the points below the hips at ``q0``. The tail joint
  is at ``r = (0, -0.34, 0)`` (``|r| = 0.34``). The mass centre of the torso is
  its geometric centre P (as in the paper).
  At rest at ``q0`` (tau_p = 0) the inverse dynamics gives ``tau_ta = -8.44 N m``
  (the paper's profile holds the tail with -7.7 N m) and knee torques of
  tens of N m; the paper's section-4.1 torques are not an equilibrium of
  this (or, by its Fig. 6, the paper's) geometry.
* Leg joint angles (Fig. 2): ``b_i = R_y(ha) R_x(-hb) [0, 0, -l_th]`` (the sign
  of ``hb`` is the one of ``Q_k``, eq. 22), ``c_i = R_y(ha) R_x(-(hb + pi - k))
  [0, 0, -l_sh]``: ``theta_k`` is the *interior* knee angle between thigh and
  shank, which is what eqs. 6 and 15 state and what puts ``q0``'s knees
  (83.6 deg) in the stated range (0, pi/2). The knee points forward (+y), the
  ``-asin`` branch of eq. 8.
* Eq. 7 as OCR'd (``atan2(s_x, s_z)``) gives +-pi for a leg pointing down; the
  range (-pi/2, pi/2) and eq. 16 (the derivative of ``atan(s_x / s_z)``) fix it
  to ``atan2(-s_x, -s_z)``.
* Eq. 17/18 as printed use ``cos(hb + k)``, which belongs to the *bent* knee
  angle ``pi - k``; re-derived from the y row of eq. 5 with the interior angle:
  ``hb' = -(s_y' + l_sh cos(hb - k) k') / (l_th cos hb - l_sh cos(hb - k))``.
* Eq. 2 (``omega = phi-dot``) holds only at ``phi = 0``. We keep the paper's
  body twist ``xi = [v, omega, ta', tb']`` for all Jacobians (eqs. 11-31) and
  map to q-dot with ``xi = T(q) q-dot``, ``T = diag(I3, E(phi), I2)``,
  ``omega = E phi-dot`` (``E`` of eq. 1's fixed-axis angles). Generalized
  forces in q are ``T^T`` times the twist ones; the actuator torques do not
  depend on this choice. The generic-core cross-check (Euler-angle base) decides.
* Eq. 36 has ``J_h^T m_sh / 2``; eq. 40 and 47 (and the ideal-bar integral)
  give ``m_th / 2``. Eq. 51 is not symmetric as printed; the integral of eq. 49
  gives ``m/3 (J1^T J1 + J2^T J2) + m/6 (J1^T J2 + J2^T J1)``.
* Thigh = ideal bar H-K, shank = ideal bar K-F with F fixed (``J_F = 0``).

Actuators: 14 (hips ``ha, hb``, knees, tail ``ta, tb``) in the order
``[q_a; q_p]`` with ``q_a = [ha1, ha2, k1, k2, k3, k4, ta, tb]`` (eq. 27) and
``q_p = [ha3, ha4, hb1, hb2, hb3, hb4]`` (eq. 28). ``J_tau`` (14 x 8) maps the
twist ``xi`` (or, with ``T``, q-dot) to these joint rates.

The compiled kernels (:mod:`rtctl.plants.quadruped_tail.kinematics`,
:mod:`rtctl.plants.quadruped_tail.dynamics`, and the per-cycle controller and
trajectory steps of :mod:`rtctl.plants.quadruped_tail.steps`) are allocation-free
numba functions on preallocated arrays; :class:`QuadrupedTail` is the checked
Python API. The independent formulations the tests and benchmarks check it
against (the same robot in the generic core; the former numpy path of the
controller) are in :mod:`rtctl.plants.quadruped_tail.reference`.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from rtctl.model import inertia_scale_factor, payload_mass

from .dynamics import _Work, _allocate, _cond, _fd_core, _id_core, _id_xi, _mcg_xi, _to_q, _twist_force, _twist_T
from .kinematics import (ACTUATOR_NAMES, OK, P_G, P_IBX, P_IBY, P_IBZ, P_LSH, P_LT, P_LTH, P_MB, P_MSH, P_MT, P_MTH,
                         SINGULAR, STATUS_TEXT, UNREACHABLE, _fk, _joint_accelerations, _joint_state, _kin,
                         _xid_from_qdd)
from .steps import _actuation_in_q, _least_squares, _normal_matrix

__all__ = ["QuadrupedTail", "ACTUATOR_NAMES", "OK", "UNREACHABLE", "SINGULAR"]

class QuadrupedTail:
    """The quadruped-with-tail mechanism: parameters (Table 1), kinematics, virtual-work dynamics.

    All q-space quantities use ``q = [p, phi_x, phi_y, phi_z, ta, tb]``; actuator
    vectors are 14 long in the order of :data:`ACTUATOR_NAMES`. See the module
    docstring for the geometry and the corrections to the OCR'd equations.
    """

    def __init__(self, *, l_th=0.3, l_sh=0.3, l_t=0.6, m_th=0.9453, m_sh=1.2289, m_b=26.9078, m_t=1.4347,
                 I_b=(0.8404, 0.3793, 1.2125), g=9.8067, hips=None, feet=None, r=(0.0, -0.34, 0.0),
                 torque_limit=math.inf, velocity_limit=20.0):
        self.par = np.array([l_th, l_sh, l_t, m_th, m_sh, m_b, m_t, g, *I_b], dtype=float)
        self.A = np.ascontiguousarray(
            [[0.24, 0.27, 0.0], [-0.24, 0.27, 0.0], [-0.24, -0.27, 0.0], [0.24, -0.27, 0.0]]
            if hips is None else hips, dtype=float)
        # section 4: [d1 d2 d3 d4] as columns
        self.D = np.ascontiguousarray(
            np.array([[0.41, -0.01, -0.01, 0.41], [0.63, 0.57, 0.03, -0.03], [0.0, 0.0, 0.0, 0.0]]).T
            if feet is None else feet, dtype=float)
        self.r = np.asarray(r, dtype=float)
        if self.A.shape != (4, 3) or self.D.shape != (4, 3) or self.r.shape != (3,):
            raise ValueError("hips and feet must be 4 x 3 (one row per leg), r a 3-vector")
        self.q0 = np.array([0.2, 0.3, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0])
        self.torque_limit = np.broadcast_to(np.asarray(torque_limit, float), (14,)).copy()
        self.velocity_limit = float(velocity_limit)
        self._w = _Work()

    # -- parameters ------------------------------------------------------
    l_th = property(lambda s: s.par[P_LTH])
    l_sh = property(lambda s: s.par[P_LSH])
    l_t = property(lambda s: s.par[P_LT])
    m_th = property(lambda s: s.par[P_MTH])
    m_sh = property(lambda s: s.par[P_MSH])
    m_b = property(lambda s: s.par[P_MB])
    m_t = property(lambda s: s.par[P_MT])
    g = property(lambda s: s.par[P_G])

    def with_inertia_scaled(self, factor: float) -> "QuadrupedTail":
        """The same robot with every mass and the body's inertia times ``factor`` (a model error for
        robustness tests)."""
        f = inertia_scale_factor(factor)
        out = copy.deepcopy(self)
        out.par[[P_MTH, P_MSH, P_MB, P_MT, P_IBX, P_IBY, P_IBZ]] *= f
        return out

    def with_payload(self, mass: float) -> "QuadrupedTail":
        """The same robot carrying a point mass ``mass`` (kg) at the torso's centre of mass."""
        out = copy.deepcopy(self)
        out.par[P_MB] += payload_mass(mass)
        return out

    def _vec(self, x, n, name):
        a = np.ascontiguousarray(x, dtype=float)
        if a.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or inf")
        return a

    def _kin(self, q, qd=None):
        w = self._w
        q = self._vec(q, 8, "q")
        qd = np.zeros(8) if qd is None else self._vec(qd, 8, "qd")
        st = _kin(self.par, self.A, self.D, self.r, q, qd, *w.kin_args())
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return w

    # -- kinematics (eqs. 1-31) -----------------------------------------
    def rotation(self, q):
        """R_P^S of eq. 1."""
        return self._kin(q).R.copy()

    def euler_rate_matrix(self, q):
        """E(phi) with omega = E phi-dot (T = diag(I3, E, I2) maps q-dot to the twist xi)."""
        return self._kin(q).E.copy()

    def twist_map(self, q):
        T = np.eye(8)
        T[3:6, 3:6] = self._kin(q).E
        return T

    def inverse_kinematics(self, q):
        """(4, 3) leg joint angles [theta_ha, theta_hb, theta_k] per leg (eqs. 4-9)."""
        return self._kin(q).ang.copy()

    def joint_state(self, q, qd=None):
        """Actuator-space positions and rates (14 each, order of :data:`ACTUATOR_NAMES`)."""
        w = self._kin(q, qd)
        qa, va = np.zeros(14), np.zeros(14)
        _joint_state(w.ang, w.angd, qa, va, self._vec(q, 8, "q"), np.zeros(8) if qd is None else
                     self._vec(qd, 8, "qd"))
        return qa, va

    def tail_tip(self, q):
        """Position of the tail mass N (eq. 10)."""
        q = self._vec(q, 8, "q")
        R = self._kin(q).R
        ta, tb, lt = q[6], q[7], self.l_t
        t = np.array([lt * np.sin(tb), -lt * np.cos(ta) * np.cos(tb), -lt * np.sin(ta) * np.cos(tb)])
        return q[:3] + R @ (self.r + t)

    def point_positions(self, q):
        """World positions of H_i (4, 3), K_i (4, 3) and N."""
        q = self._vec(q, 8, "q")
        w = self._kin(q)
        H = q[:3] + self.A @ w.R.T
        K = np.empty((4, 3))
        for i, (ha, hb, _) in enumerate(w.ang):
            b = np.array([-self.l_th * np.sin(ha) * np.cos(hb), -self.l_th * np.sin(hb),
                          -self.l_th * np.cos(ha) * np.cos(hb)])
            K[i] = H[i] + w.R @ b
        return H, K, self.tail_tip(q)

    def point_jacobians(self, q, coords="q"):
        """(9, 3, 8) Jacobians of H_1..4, K_1..4, N (eqs. 20, 23, 26); ``coords`` "xi" (twist, as in the paper)
        or "q" (times T)."""
        w = self._kin(q)
        return w.J.copy() if coords == "xi" else w.J @ self.twist_map(q)

    def actuation_jacobians(self, q, coords="q"):
        """(J_tau_a (8 x 8), J_tau_p (6 x 8)) of eqs. 27-28 (w.r.t. the twist for ``coords="xi"``)."""
        w = self._kin(q)
        Jt = w.Jtau.copy() if coords == "xi" else w.Jtau @ self.twist_map(q)
        return Jt[:8].copy(), Jt[8:].copy()

    def accelerations(self, q, qd, qdd):
        """Accelerations of H_1..4, K_1..4, N (9, 3) (eqs. 29-31)."""
        w = self._kin(q, qd)
        xid = np.zeros(8)
        _xid_from_qdd(w.E, w.edot, self._vec(qdd, 8, "qdd"), xid)
        return np.einsum("ikb,b->ik", w.J, xid) + w.bias

    def condition_number(self, q):
        """Condition number of J_tau_a (twist coordinates, the paper's eq. 27)."""
        w = self._kin(q)
        return float(_cond(w.Jtau, w.svd_a, w.svd_v, w.sv))

    # -- dynamics (eqs. 32-55) -------------------------------------------
    def generalized_forces(self, q, qd, qdd):
        """tau_b + tau_t + sum tau_l,i (eqs. 38-40) in q coordinates (8)."""
        w = self._kin(q, qd)
        _xid_from_qdd(w.E, w.edot, self._vec(qdd, 8, "qdd"), w.xid)
        _id_xi(self.par, np.asarray(q, float), w.xi, w.xid, w.J, w.bias, w.R, w.f)
        out = np.empty(8)
        _twist_T(w.E, w.f, out)
        return out

    def _alloc_args(self, method, tau_p, weights, torque_limit):
        tau0 = np.zeros(14)
        if method == "paper":
            if tau_p is not None:
                tau0[8:] = self._vec(tau_p, 6, "tau_p")
            return 0, np.ones(14), tau0
        if method not in ("min_norm", "weighted", "limits"):
            raise ValueError(f"method must be 'paper', 'min_norm', 'weighted' or 'limits', got {method!r}")
        if tau_p is not None:
            tau0[8:] = self._vec(tau_p, 6, "tau_p")
        if method == "min_norm":
            w = np.ones(14)
        elif method == "weighted":
            w = self._vec(weights, 14, "weights")
        else:
            lim = self.torque_limit if torque_limit is None else np.broadcast_to(
                np.asarray(torque_limit, float), (14,))
            if not np.all(np.isfinite(lim)):
                raise ValueError("method 'limits' needs finite torque limits (the paper states none; pass "
                                 "torque_limit or build the mechanism with one)")
            w = 1.0 / np.asarray(lim, float) ** 2
        if np.any(w <= 0):
            raise ValueError("weights must be > 0")
        return 1, np.ascontiguousarray(w), tau0

    def inverse_dynamics(self, q, qd, qdd, method="paper", tau_p=None, weights=None, torque_limit=None):
        """Actuator torques (14, order of :data:`ACTUATOR_NAMES`) producing (q, q-dot, q-ddot).

        ``method``: ``"paper"`` -- eq. 41 with the redundant torques fixed to ``tau_p`` (default 0);
        ``"min_norm"`` -- all 14 actuators, minimum ``|tau - tau_pref|`` subject to eq. 37, where the
        preferred profile ``tau_pref`` has ``tau_p`` (default 0) in its last six entries;
        ``"weighted"`` -- the same with ``sum w_k (tau_k - tau_pref,k)^2``, ``weights`` (14);
        ``"limits"`` -- weights ``1 / limit_k^2`` (``torque_limit`` or the mechanism's), i.e. the
        least-squares torque relative to each actuator's limit.
        """
        mode, wts, tau0 = self._alloc_args(method, tau_p, weights, torque_limit)
        w = self._w
        q, qd, qdd = self._vec(q, 8, "q"), self._vec(qd, 8, "qd"), self._vec(qdd, 8, "qdd")
        tau = np.empty(14)
        st = _id_core(self.par, self.A, self.D, self.r, q, qd, qdd, mode, wts, tau0, tau, w.R, w.E, w.edot, w.xi,
                      w.xid, w.ang, w.angd, w.angb, w.J, w.bias, w.Jtau, w.legj, w.f, w.mat, w.vec)
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return tau

    def allocate(self, q, force, method="paper", tau_p=None, weights=None, torque_limit=None):
        """Actuator torques (14) whose eq. 46 force ``T^T J_tau^T tau`` equals the q-space ``force`` (8),
        by the allocation ``method`` of :meth:`inverse_dynamics`."""
        mode, wts, tau0 = self._alloc_args(method, tau_p, weights, torque_limit)
        w = self._kin(q)
        _twist_force(w.E, self._vec(force, 8, "force"), w.f)
        tau = np.empty(14)
        if _allocate(w.Jtau, w.f, mode, wts, tau0, tau, w.mat, w.vec) != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[SINGULAR]}")
        return tau

    def dynamics_terms(self, q, qd):
        """(M, C, G) of eq. 42 in q coordinates (eqs. 44-55)."""
        w = self._kin(q, qd)
        _mcg_xi(self.par, w.xi, w.J, w.bias, w.R, w.M, w.C, w.G)
        _to_q(w.E, w.edot, w.M, w.C, w.G, w.Mq, w.Cq, w.Gq)
        return w.Mq.copy(), w.Cq.copy(), w.Gq.copy()

    def actuation_force(self, q, tau):
        """F of eq. 46 in q coordinates: T^T (J_tau_a^T tau_a + J_tau_p^T tau_p)."""
        w = self._kin(q)
        out = np.empty(8)
        _twist_T(w.E, w.Jtau.T @ self._vec(tau, 14, "tau"), out)
        return out

    def forward_dynamics(self, q, qd, tau):
        """q-ddot of eq. 43 under the 14 actuator torques."""
        w = self._w
        q, qd, tau = self._vec(q, 8, "q"), self._vec(qd, 8, "qd"), self._vec(tau, 14, "tau")
        out = np.empty(8)
        st = _fd_core(self.par, self.A, self.D, self.r, q, qd, tau, out, *w.kin_args(), w.M, w.C, w.G, w.Mq, w.Cq,
                      w.Gq, w.f, w.mat)
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return out

    def forward_kinematics(self, q_act):
        """Generalized coordinates q from the 14 actuator-space joint angles (the feet are fixed)."""
        out = np.empty(8)
        _fk(self.par, self.A, self.D, self._vec(q_act, 14, "q_act"), out, self._w.fkw)
        return out

    def generalized_motion(self, q_act, v_act, a_act=None):
        """(q, q-dot, q-ddot) from actuator-space positions, rates, accelerations (least squares over the
        14 joint equations ``theta-dot = J_tau T q-dot``, ``theta-ddot = J_tau (T q-ddot + E-dot phi-dot) +
        bias``, eqs. 27-28 and the second derivative of eq. 5, by the normal equations)."""
        q = self.forward_kinematics(q_act)
        v_act = self._vec(v_act, 14, "v_act")
        a_act = None if a_act is None else self._vec(a_act, 14, "a_act")
        w = self._kin(q)
        Jq, nrm = np.empty((14, 8)), np.empty(64)
        _actuation_in_q(w.Jtau, w.E, Jq)
        _normal_matrix(Jq, nrm)
        qd = np.empty(8)
        if not _least_squares(Jq, nrm, v_act, w.mat, qd):
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[SINGULAR]}")
        if a_act is None:
            return q, qd, None
        qdd = np.empty(8)
        rhs = a_act - self.joint_accelerations(q, qd, np.zeros(8))
        _least_squares(Jq, nrm, rhs, w.mat, qdd)
        return q, qd, qdd

    def joint_accelerations(self, q, qd, qdd):
        """Actuator-space joint accelerations (14) for (q, q-dot, q-ddot), from the second derivative of
        eq. 5 (legs) and the tail coordinates."""
        w = self._kin(q, qd)
        out = np.empty(14)
        _joint_accelerations(w.Jtau, w.angb, w.E, w.edot, self._vec(qdd, 8, "qdd"), w.xid, out)
        return out

    # -- the loop's model -----------------------------------------------
    def actuator_model(self, name: str = "quadruped_tail"):
        """The loop's actuator-space model: 14 independent massless revolute joints (order of
        :data:`ACTUATOR_NAMES`) with position, velocity and torque limits."""
        from rtctl.model import ModelBuilder

        lim = {"ha": (-np.pi / 2, np.pi / 2), "hb": (-np.pi / 2, np.pi / 2), "k": (0.05, np.pi - 0.05),
               "ta": (-np.pi / 2, np.pi / 2), "tb": (-np.pi / 2, np.pi / 2)}
        b = ModelBuilder(name)
        for k, n in enumerate(ACTUATOR_NAMES):
            lo, hi = lim[n.rstrip("1234")]
            b.add_body(n, -1, "revolute", joint_name=n, axis=(1, 0, 0), lower=lo, upper=hi,
                       velocity_limit=self.velocity_limit, effort_limit=float(self.torque_limit[k]))
        return b.build()


def quadruped_tail_model():
    """The robot model ``"quadruped_tail"``: the 14-actuator model of :class:`QuadrupedTail`."""
    return QuadrupedTail().actuator_model("quadruped_tail")
