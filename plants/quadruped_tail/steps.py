"""Compiled per-cycle steps of the quadruped with a robotic tail (Liu & Ben-Tzvi, 2018): the feed-forward + PD
controller of the paper's Fig. 7 and the Fig. 7/8 pitch trajectory, each one allocation-free numba call over
the kernels of :mod:`rtctl.plants.quadruped_tail.kinematics` and :mod:`rtctl.plants.quadruped_tail.dynamics`.

:class:`~rtctl.plants.quadruped_tail.control.QuadrupedTailFFPD` and
:class:`~rtctl.plants.quadruped_tail.control.QuadrupedTailPitch` wrap them; the Python formulation they replace
(numpy least squares, SVD, solves) is kept in :mod:`rtctl.plants.quadruped_tail.reference` and the tests hold
the two to 1e-10.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from rtctl.dynamics.spatial import cholesky_solve

from .dynamics import _allocate, _cond, _id_xi, _mcg_xi, _to_q, _twist_force, _Work
from .kinematics import OK, SINGULAR, _fk, _joint_accelerations, _joint_state, _kin, _xid_from_qdd

BAD_INPUT = 3
STEP_STATUS_TEXT = {BAD_INPUT: "the actuator-space arrays must hold 14 finite values each"}

# rows of the controller's ``gen`` array (8 wide): estimated and desired generalized motion, forces
G_Q, G_QD, G_Q_DES, G_QD_DES, G_QDD_DES, G_F_DES, G_FORCE, G_FTWIST = range(8)
GEN_ROWS = 8
# the section-4.2 pitch motion: period (s), amplitudes of phi_x and theta_tb (rad)
PITCH_PERIOD, PITCH_AMPLITUDE_PHI_X, PITCH_AMPLITUDE_TB = 0.3, math.pi / 36.0, math.pi / 18.0


@njit(cache=True)
def _actuation_in_q(Jtau, E, Jq):
    """J_tau T (14 x 8): the actuator rates per unit q-dot, ``theta-dot = J_tau T q-dot`` (eqs. 27-28)."""
    for k in range(14):
        j3, j4, j5 = Jtau[k, 3], Jtau[k, 4], Jtau[k, 5]
        for b in range(8):
            Jq[k, b] = Jtau[k, b]
        for b in range(3):
            Jq[k, 3 + b] = j3 * E[0, b] + j4 * E[1, b] + j5 * E[2, b]


@njit(cache=True)
def _normal_matrix(Jq, nrm):
    """nrm (64, row-major) = Jq^T Jq, the normal matrix of the 14 x 8 least-squares problem."""
    for a in range(8):
        for b in range(a, 8):
            s = 0.0
            for k in range(14):
                s += Jq[k, a] * Jq[k, b]
            nrm[a * 8 + b] = s
            nrm[b * 8 + a] = s


@njit(cache=True)
def _least_squares(Jq, nrm, rhs, chol, x):
    """x = argmin |Jq x - rhs| by the normal equations (Cholesky of ``nrm`` = Jq^T Jq, copied to ``chol``);
    False when Jq loses column rank."""
    for a in range(8):
        s = 0.0
        for k in range(14):
            s += Jq[k, a] * rhs[k]
        x[a] = s
    for k in range(64):
        chol[k] = nrm[k]
    return cholesky_solve(chol, 0, 8, x, 0)


@njit(cache=True)
def _actuator_vectors_ok(a, b, c):
    """Each of a, b, c holds 14 finite values."""
    if a.shape[0] != 14 or b.shape[0] != 14 or c.shape[0] != 14:
        return False
    for k in range(14):
        if not (math.isfinite(a[k]) and math.isfinite(b[k]) and math.isfinite(c[k])):
            return False
    return True


@njit(cache=True)
def _any_nonzero(x):
    for k in range(x.shape[0]):
        if x[k] != 0.0:
            return True
    return False


@njit(cache=True)
def ffpd_step(par, A, D, r, q_act, v_act, qa_des, va_des, aa_des, kp, kd, cond_threshold, redundant_mode, weights,
              tau0, effort, tau_ff, tau_c, gen, log, logged, R, E, edot, xi, xid, ang, angd, angb, J, bias, Jtau,
              legj, M, C, G, Mq, Cq, Gq, mat, vec, svd_a, svd_v, sv, fkw, Jq, Jtau_des, nrm, act):
    """One cycle of the Fig. 7 feed-forward + PD law from actuator-space measurements; returns (status, cond).

    Desired motion: q_d by forward kinematics of ``qa_des``, q_d-dot and q_d-ddot by least squares over the
    14 joint equations ``theta-dot = J_tau T q-dot`` and ``theta-ddot = J_tau xi-dot + bias`` (eqs. 27-28,
    second derivative of eq. 5), tau_ff = ID (eqs. 37-41). Estimate: q, q-dot from ``q_act``, ``v_act``
    alike; cond(J_tau_a) (eq. 27) above ``cond_threshold`` switches both allocations from eq. 41 (tau_p = 0)
    to ``redundant_mode`` over ``weights``; tau_c = alloc(M_q (Kp e + Kd e')) (eq. 42's mass matrix, eq. 46).
    ``gen`` (GEN_ROWS, 8) receives the generalized motion (rows ``G_*``); the row ``log[logged]`` (when
    ``logged < len(log)``) gets [tau_ff, tau_c, q, cond]. Every other array is scratch
    (:meth:`FFPDWork.scratch`).
    """
    n = 14
    if not (_actuator_vectors_ok(q_act, v_act, effort) and _actuator_vectors_ok(qa_des, va_des, aa_des)):
        return BAD_INPUT, 0.0
    q, qd = gen[G_Q], gen[G_QD]
    q_des, qd_des, qdd_des = gen[G_Q_DES], gen[G_QD_DES], gen[G_QDD_DES]
    # desired generalized motion and its virtual-work force (eqs. 37-40, twist coordinates)
    _fk(par, A, D, qa_des, q_des, fkw)
    for b in range(8):
        qd_des[b] = 0.0
    st = _kin(par, A, D, r, q_des, qd_des, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st, 0.0
    _actuation_in_q(Jtau, E, Jq)
    _normal_matrix(Jq, nrm)
    if not _least_squares(Jq, nrm, va_des, mat, qd_des):
        return SINGULAR, 0.0
    st = _kin(par, A, D, r, q_des, qd_des, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st, 0.0
    for b in range(8):
        qdd_des[b] = 0.0
    _joint_accelerations(Jtau, angb, E, edot, qdd_des, xid, act)
    for k in range(n):
        act[k] = aa_des[k] - act[k]
    if not _least_squares(Jq, nrm, act, mat, qdd_des):
        return SINGULAR, 0.0
    _xid_from_qdd(E, edot, qdd_des, xid)
    _id_xi(par, q_des, xi, xid, J, bias, R, gen[G_F_DES])
    for k in range(n):
        for b in range(8):
            Jtau_des[k, b] = Jtau[k, b]
    # estimated generalized motion, singularity monitor, mass matrix
    _fk(par, A, D, q_act, q, fkw)
    for b in range(8):
        qd[b] = 0.0
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st, 0.0
    _actuation_in_q(Jtau, E, Jq)
    _normal_matrix(Jq, nrm)
    if not _least_squares(Jq, nrm, v_act, mat, qd):
        return SINGULAR, 0.0
    cond = _cond(Jtau, svd_a, svd_v, sv)
    mode = redundant_mode if cond > cond_threshold else 0
    st = _allocate(Jtau_des, gen[G_F_DES], mode, weights, tau0, tau_ff, mat, vec)
    if st != OK:
        return st, cond
    if _any_nonzero(kp) or _any_nonzero(kd):
        _mcg_xi(par, xi, J, bias, R, M, C, G)
        _to_q(E, edot, M, C, G, Mq, Cq, Gq)
        u = gen[G_FORCE]
        for b in range(8):
            u[b] = kp[b] * (q_des[b] - q[b]) + kd[b] * (qd_des[b] - qd[b])
        for a in range(8):
            s = 0.0
            for b in range(8):
                s += Mq[a, b] * u[b]
            vec[a] = s
        for a in range(8):
            u[a] = vec[a]
        _twist_force(E, u, gen[G_FTWIST])
        st = _allocate(Jtau, gen[G_FTWIST], mode, weights, tau0, tau_c, mat, vec)
        if st != OK:
            return st, cond
    else:
        for k in range(n):
            tau_c[k] = 0.0
    for k in range(n):
        effort[k] = tau_ff[k] + tau_c[k]
    if logged < log.shape[0]:
        for k in range(n):
            log[logged, k] = tau_ff[k]
            log[logged, n + k] = tau_c[k]
        for b in range(8):
            log[logged, 2 * n + b] = q[b]
        log[logged, 2 * n + 8] = cond
    return OK, cond


@njit(cache=True)
def pitch_motion(t, q0, x):
    """The Fig. 7/8 desired motion ``q_d = [0.2, 0.3, 0.4, pi/36 sin(2 pi t/0.3), 0, 0, 0, pi/18 sin(2 pi t/0.3 +
    pi)]`` (section 4.2) about ``q0``: rows of ``x`` (3, 8) = q, q-dot, q-ddot; ``t < 0`` holds ``q0``."""
    for b in range(8):
        x[0, b] = q0[b]
        x[1, b] = 0.0
        x[2, b] = 0.0
    if t < 0.0:
        return
    w = 2.0 * math.pi / PITCH_PERIOD
    s1, c1 = math.sin(w * t), math.cos(w * t)
    s2, c2 = math.sin(w * t + math.pi), math.cos(w * t + math.pi)
    x[0, 3] += PITCH_AMPLITUDE_PHI_X * s1
    x[1, 3] = PITCH_AMPLITUDE_PHI_X * w * c1
    x[2, 3] = -PITCH_AMPLITUDE_PHI_X * w * w * s1
    x[0, 7] += PITCH_AMPLITUDE_TB * s2
    x[1, 7] = PITCH_AMPLITUDE_TB * w * c2
    x[2, 7] = -PITCH_AMPLITUDE_TB * w * w * s2


@njit(cache=True)
def pitch_sample(t, q0, par, A, D, r, x, q_act, v_act, a_act, R, E, edot, xi, xid, ang, angd, angb, J, bias, Jtau,
                 legj):
    """Actuator angles, rates and accelerations (14 each) of :func:`pitch_motion` at ``t`` (s after the
    start): inverse kinematics (eqs. 4-9), rates (eqs. 11-18) and their derivative (second derivative of
    eq. 5). ``x`` (3, 8) receives the generalized motion. Returns a status."""
    if not (q_act.shape[0] == 14 and v_act.shape[0] == 14 and a_act.shape[0] == 14 and math.isfinite(t)):
        return BAD_INPUT
    pitch_motion(t, q0, x)
    st = _kin(par, A, D, r, x[0], x[1], R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st
    _joint_state(ang, angd, q_act, v_act, x[0], x[1])
    _joint_accelerations(Jtau, angb, E, edot, x[2], xid, a_act)
    return OK


class FFPDWork:
    """The arrays of :func:`ffpd_step` besides its inputs and outputs: the kernels' :class:`_Work`, the
    least-squares matrix J_tau T, J_tau at the desired pose, the normal matrix and a 14-vector."""

    def __init__(self):
        self.w = _Work()
        self.Jq, self.Jtau_des = np.zeros((14, 8)), np.zeros((14, 8))
        self.nrm, self.act = np.zeros(64), np.zeros(14)

    def scratch(self):
        """The trailing arguments of :func:`ffpd_step`, from ``R`` on."""
        w = self.w
        return (w.R, w.E, w.edot, w.xi, w.xid, w.ang, w.angd, w.angb, w.J, w.bias, w.Jtau, w.legj, w.M, w.C, w.G,
                w.Mq, w.Cq, w.Gq, w.mat, w.vec, w.svd_a, w.svd_v, w.sv, w.fkw, self.Jq, self.Jtau_des, self.nrm,
                self.act)
