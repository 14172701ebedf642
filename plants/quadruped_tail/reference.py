"""The independent formulations the quadruped-with-tail model is checked against (tests, benchmarks).

The same robot as a tree in rtctl's generic core (:func:`tree_model`), its state for given generalized
coordinates through the four foot constraints (:func:`tree_state`), and the random states near ``q0`` the
cross-checks use. And the per-cycle Python path the compiled steps (:mod:`rtctl.plants.quadruped_tail.steps`)
replaced, kept as their reference: joint accelerations per leg with numpy (:func:`reference_joint_accelerations`),
forward kinematics by numpy's SVD, least squares by ``numpy.linalg.lstsq``, the condition number by the SVD,
the allocations by ``numpy.linalg.solve``, composed as the controller (:class:`ReferenceFFPD`) and the pitch
trajectory (:class:`ReferencePitch`) did. Nothing in the plant or the controllers imports this module.
"""
from __future__ import annotations

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder, rpy_to_matrix

import math
from collections import deque

from .kinematics import _ACT_JOINT, _ACT_LEG, ACTUATOR_NAMES, P_IBX
from .model import QuadrupedTail

__all__ = ["TREE_BASE", "ReferenceFFPD", "ReferencePitch", "random_states", "reference_allocate",
           "reference_condition_number", "reference_forward_kinematics", "reference_generalized_motion",
           "reference_inverse_dynamics", "reference_joint_accelerations", "tree_coordinates", "tree_model",
           "tree_reference", "tree_state"]

TREE_BASE = np.array([0, 1, 2, 5, 4, 3, 18, 19])   # tree index of q[k] for k = 0..7


def tree_model(mech: QuadrupedTail):
    """The same robot in the generic core: torso on a ZYX Euler-angle base (R = Rz Ry Rx, eq. 1), four
    legs (hip ``ha`` about torso y at a_i, massless; ``hb`` about -x; thigh and shank uniform slender bars
    of inertia m l^2 / 12 about their transverse axes, zero about their own; knee about x after a fixed
    R_x(-pi) so its coordinate is the interior angle) and the tail (``ta`` about x at r, ``tb`` about z,
    point mass at [0, -l_t, 0]). Frames ``foot{i}`` at the shank tips. Tree coordinates:
    [p, phi_z, phi_y, phi_x, (ha_i, hb_i, k_i) x 4, ta, tb] (nv = 20)."""
    lth, lsh, lt = mech.l_th, mech.l_sh, mech.l_t
    b = ModelBuilder("quadruped_tail_tree", gravity=(0.0, 0.0, -mech.g))
    b.add_euler_floating_base("torso", sequence="zyx", mass=mech.m_b, inertia=np.diag(mech.par[P_IBX:]))
    bar = lambda m, l: np.diag([m * l * l / 12.0, m * l * l / 12.0, 0.0])  # noqa: E731
    for i in range(4):
        b.add_body(f"hipa{i}", "torso", "revolute", axis=(0, 1, 0), translation=mech.A[i])
        b.add_body(f"thigh{i}", f"hipa{i}", "revolute", axis=(-1, 0, 0), mass=mech.m_th,
                   com=(0, 0, -lth / 2), inertia=bar(mech.m_th, lth))
        b.add_body(f"shank{i}", f"thigh{i}", "revolute", axis=(1, 0, 0), rotation=rpy_to_matrix((-np.pi, 0, 0)),
                   translation=(0, 0, -lth), mass=mech.m_sh, com=(0, 0, -lsh / 2), inertia=bar(mech.m_sh, lsh))
        b.add_frame(f"foot{i}", f"shank{i}", translation=(0, 0, -lsh))
    b.add_body("taila", "torso", "revolute", axis=(1, 0, 0), translation=mech.r)
    b.add_body("tail", "taila", "revolute", axis=(0, 0, 1), mass=mech.m_t, com=(0, -lt, 0))
    return b.build()


def tree_coordinates(q, ang):
    """Tree q (20) from generalized q and leg angles (4, 3)."""
    out = np.zeros(20)
    out[:3] = q[:3]
    out[3:6] = q[5], q[4], q[3]
    out[6:18] = np.asarray(ang).ravel()
    out[18:20] = q[6:8]
    return out


def tree_reference(mech: QuadrupedTail):
    """Generic-core dynamics of :func:`tree_model` and the actuation map B (20 x 14, tree DOF of each
    actuator in :data:`~rtctl.plants.quadruped_tail.kinematics.ACTUATOR_NAMES` order)."""
    idx = {}
    for k in range(4):
        idx[f"ha{k + 1}"], idx[f"hb{k + 1}"], idx[f"k{k + 1}"] = 6 + 3 * k, 7 + 3 * k, 8 + 3 * k
    idx["ta"], idx["tb"] = 18, 19
    actuation = np.zeros((20, 14))
    for j, name in enumerate(ACTUATOR_NAMES):
        actuation[idx[name], j] = 1.0
    return Dynamics(tree_model(mech)), actuation


def tree_state(mech: QuadrupedTail, dyn, q, qd, qdd):
    """Tree (q, v, a), the foot constraint Jacobian Jc, the null-space basis Phi (tree velocities of
    unit generalized velocities) and the constraint bias, from the generic core only (leg rates and
    accelerations follow from the four foot constraints)."""
    tq = tree_coordinates(q, mech.inverse_kinematics(q))
    legs, rest = np.arange(6, 18), np.r_[0:6, 18, 19]
    jc = np.vstack([dyn.jacobian(tq, f"foot{i}")[3:] for i in range(4)])
    tv = np.zeros(20)
    tv[TREE_BASE] = qd
    tv[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ tv[rest])
    gamma = np.concatenate([dyn.jacobian_dot_times_v(tq, tv, f"foot{i}")[3:] for i in range(4)])
    ta = np.zeros(20)
    ta[TREE_BASE] = qdd
    ta[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ ta[rest] - gamma)
    phi = np.zeros((20, 8))
    phi[TREE_BASE, np.arange(8)] = 1.0
    phi[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ phi[rest])
    bias = np.zeros(20)
    bias[legs] = np.linalg.solve(jc[:, legs], -gamma)
    return tq, tv, ta, jc, phi, bias


def random_states(mech: QuadrupedTail, n, seed):
    """``n`` random (q, qd, qdd) near q0 (legs stay reachable), as used by the cross-checks."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        q = mech.q0 + np.r_[rng.normal(0, 0.02, 3), rng.normal(0, 0.1, 3), rng.uniform(-1, 1, 2)]
        yield q, rng.normal(0, 1, 8), rng.normal(0, 2, 8)


# -- the per-cycle Python path (numpy) the compiled steps replaced -------------------------------------------
def reference_joint_accelerations(mech: QuadrupedTail, q, qd, qdd):
    """Actuator-space joint accelerations (14): J_tau xi-dot plus, per leg, the joint accelerations at
    xi-dot = 0 from the second derivative of eq. 5 (s-ddot = R^T (w x (w x (d - p)) + 2 w x v)) solved with
    numpy."""
    q = np.asarray(q, float)
    T = mech.twist_map(q)
    w = mech._kin(q, qd)
    Tdot_qd = np.zeros(8)
    Tdot_qd[3:6] = w.edot
    out = w.Jtau @ (T @ np.asarray(qdd, float) + Tdot_qd)
    ang, angd, R = w.ang.copy(), w.angd.copy(), w.R.copy()
    lth, lsh = mech.l_th, mech.l_sh
    v, om = w.xi[:3], w.xi[3:6]
    for i in range(4):
        wd = mech.D[i] - q[:3]
        sdd = R.T @ (np.cross(om, np.cross(om, wd)) + 2 * np.cross(om, v))
        ha, hb, kk = ang[i]
        dha, dhb, dk = angd[i]
        cha, sha, chb, shb = np.cos(ha), np.sin(ha), np.cos(hb), np.sin(hb)
        u = hb - kk
        cu, su = np.cos(u), np.sin(u)
        gz = -lth * chb + lsh * cu
        ddu = dhb - dk
        gdz = (lth * shb - lsh * su) * dhb + lsh * su * dk
        rx = cha * sdd[0] - sha * sdd[2]
        ry = sdd[1]
        rz = sha * sdd[0] + cha * sdd[2]
        ddha = (rx - 2 * dha * gdz) / gz
        by = ry - (lth * shb * dhb ** 2 - lsh * su * ddu ** 2)
        bz = rz + gz * dha ** 2 - (lth * chb * dhb ** 2 - lsh * cu * ddu ** 2)
        Am = np.array([[-lth * chb + lsh * cu, -lsh * cu], [lth * shb - lsh * su, lsh * su]])
        ddhb, ddk = np.linalg.solve(Am, [by, bz])
        bias = {0: ddha, 1: ddhb, 2: ddk}
        for row in range(14):
            if _ACT_LEG[row] == i:
                out[row] += bias[_ACT_JOINT[row]]
    return out


def reference_forward_kinematics(mech: QuadrupedTail, q_act):
    """Generalized q from the 14 actuator angles: d_i - p = R (a_i + s_i), R by numpy's SVD (Kabsch)."""
    q_act = np.asarray(q_act, float)
    lth, lsh = mech.l_th, mech.l_sh
    U = np.empty((4, 3))
    for i in range(4):
        ha, hb, kk = (q_act[next(r for r in range(14) if _ACT_LEG[r] == i and _ACT_JOINT[r] == j)] for j in range(3))
        gy = -lth * math.sin(hb) + lsh * math.sin(hb - kk)
        gz = -lth * math.cos(hb) + lsh * math.cos(hb - kk)
        U[i] = mech.A[i] + (math.sin(ha) * gz, gy, math.cos(ha) * gz)
    ub, db = U.mean(axis=0), mech.D.mean(axis=0)
    Us, _, Vt = np.linalg.svd((U - ub).T @ (mech.D - db))
    Dg = np.diag([1.0, 1.0, 1.0 if np.linalg.det(Vt.T @ Us.T) > 0 else -1.0])
    R = Vt.T @ Dg @ Us.T
    q = np.empty(8)
    q[:3] = db - R @ ub
    q[4] = -math.asin(max(-1.0, min(1.0, R[2, 0])))
    q[3] = math.atan2(R[2, 1], R[2, 2])
    q[5] = math.atan2(R[1, 0], R[0, 0])
    q[6:] = q_act[6:8]
    return q


def reference_generalized_motion(mech: QuadrupedTail, q_act, v_act, a_act=None):
    """(q, q-dot, q-ddot) by numpy least squares over the 14 joint equations (``numpy.linalg.lstsq``)."""
    q = reference_forward_kinematics(mech, q_act)
    Jq = mech._kin(q).Jtau @ mech.twist_map(q)
    qd = np.linalg.lstsq(Jq, np.asarray(v_act, float), rcond=None)[0]
    if a_act is None:
        return q, qd, None
    base = reference_joint_accelerations(mech, q, qd, np.zeros(8))
    return q, qd, np.linalg.lstsq(Jq, np.asarray(a_act, float) - base, rcond=None)[0]


def reference_condition_number(mech: QuadrupedTail, q):
    """cond(J_tau_a) (twist coordinates, eq. 27) from numpy's SVD."""
    sv = np.linalg.svd(mech.actuation_jacobians(q, coords="xi")[0], compute_uv=False)
    return np.inf if sv[-1] <= 0 else sv[0] / sv[-1]


def reference_allocate(mech: QuadrupedTail, q, force, method="paper"):
    """Actuator torques (14) whose eq. 46 force equals the q-space ``force``: eq. 41 (tau_p = 0) for
    ``"paper"``, else the weighted minimum norm of :meth:`QuadrupedTail.inverse_dynamics`, by numpy solves."""
    mode, w, tau0 = mech._alloc_args(method, None, None, None)
    f = np.linalg.solve(mech.twist_map(q).T, np.asarray(force, float))
    Jtau = np.vstack(mech.actuation_jacobians(q, coords="xi"))
    if mode == 0:
        Ja = Jtau[:8]
        if not np.all(np.isfinite(Ja)) or abs(np.linalg.det(Ja)) < 1e-14:
            raise ValueError("singular J_tau_a")
        return np.r_[np.linalg.solve(Ja.T, f - Jtau[8:].T @ tau0[8:]), tau0[8:]]
    JW = Jtau.T / w
    lam = np.linalg.solve(JW @ Jtau, f - Jtau.T @ tau0)
    return tau0 + JW.T @ lam


def reference_inverse_dynamics(mech: QuadrupedTail, q, qd, qdd, method="paper"):
    """Actuator torques (14) for (q, q-dot, q-ddot): the q-space virtual-work force (eqs. 38-40) allocated by
    :func:`reference_allocate`."""
    return reference_allocate(mech, q, mech.generalized_forces(q, qd, qdd), method)


class ReferenceFFPD:
    """The Python update :class:`~rtctl.plants.quadruped_tail.control.QuadrupedTailFFPD` had before its compiled
    step: the same law and singularity monitor over the numpy functions above (allocates per cycle)."""

    def __init__(self, mech: QuadrupedTail, kp=100.0, kd=None, cond_threshold=1e3, redundant_method="min_norm"):
        self.mechanism = mech
        self.kp = np.broadcast_to(np.asarray(kp, float), (8,)).copy()
        self.kd = 2.0 * np.sqrt(self.kp) if kd is None else np.broadcast_to(np.asarray(kd, float), (8,)).copy()
        self.cond_threshold, self.redundant_method = float(cond_threshold), redundant_method
        self.events, self.redundant, self.cycle, self.cond = deque(maxlen=256), False, 0, 1.0
        self.q_est, self.qd_est, self.tau_ff, self.tau_c = np.zeros(8), np.zeros(8), np.zeros(14), np.zeros(14)

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        m = self.mechanism
        qe, qde, _ = reference_generalized_motion(m, q, v)
        qd, qdd, qddd = reference_generalized_motion(m, q_d, qd_d, qdd_d)
        self.q_est[:], self.qd_est[:] = qe, qde
        self.cond = reference_condition_number(m, qe)
        redundant = self.cond > self.cond_threshold
        if redundant != self.redundant:
            self.redundant = redundant
            self.events.append({"event": "singularity_enter" if redundant else "singularity_exit",
                                "cycle": self.cycle, "cond": self.cond,
                                "allocation": self.redundant_method if redundant else "paper"})
        method = self.redundant_method if redundant else "paper"
        self.tau_ff[:] = reference_inverse_dynamics(m, qd, qdd, qddd, method)
        if np.any(self.kp) or np.any(self.kd):
            M = m.dynamics_terms(qe, qde)[0]
            self.tau_c[:] = reference_allocate(m, qe, M @ (self.kp * (qd - qe) + self.kd * (qdd - qde)), method)
        else:
            self.tau_c[:] = 0.0
        effort[:] = self.tau_ff + self.tau_c
        self.cycle += 1


class ReferencePitch:
    """The Python sample :class:`~rtctl.plants.quadruped_tail.control.QuadrupedTailPitch` had: the section-4.2
    motion (numpy), inverse kinematics and rates, and :func:`reference_joint_accelerations`."""

    n = 14

    def __init__(self, t0=0.0, mechanism: QuadrupedTail | None = None):
        self.mechanism, self.t0 = mechanism or QuadrupedTail(), float(t0)

    def generalized(self, t):
        if t < self.t0:
            return self.mechanism.q0.copy(), np.zeros(8), np.zeros(8)
        t -= self.t0
        w, a1, a2 = 2.0 * math.pi / 0.3, math.pi / 36.0, math.pi / 18.0
        q = np.array([0.2, 0.3, 0.4, a1 * math.sin(w * t), 0, 0, 0, a2 * math.sin(w * t + math.pi)])
        qd = np.array([0, 0, 0, a1 * w * math.cos(w * t), 0, 0, 0, a2 * w * math.cos(w * t + math.pi)])
        qdd = np.array([0, 0, 0, -a1 * w * w * math.sin(w * t), 0, 0, 0, -a2 * w * w * math.sin(w * t + math.pi)])
        return q, qd, qdd

    def sample(self, t, q, qd, qdd) -> None:
        x, xd, xdd = self.generalized(t)
        q[:], qd[:] = self.mechanism.joint_state(x, xd)
        qdd[:] = reference_joint_accelerations(self.mechanism, x, xd, xdd)
