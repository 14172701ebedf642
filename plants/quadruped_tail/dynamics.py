"""Compiled virtual-work dynamics of the quadruped with a robotic tail (Liu & Ben-Tzvi, 2018): inverse
dynamics (eqs. 37-41), mass, Coriolis and gravity terms (eqs. 42-55), forward dynamics (eq. 43), the actuator
allocation (eq. 41 and its weighted least-norm variants) and the plant's RK4 step.

Numba functions on caller-provided arrays (:class:`_Work`) on top of :mod:`rtctl.plants.quadruped_tail.kinematics`;
:mod:`rtctl.plants.quadruped_tail.model` wraps them in a checked API.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from rtctl.dynamics.spatial import cholesky_solve

from ..integrate import inlined, rk4_advance
from .kinematics import (OK, P_G, P_IBX, P_IBY, P_IBZ, P_MB, P_MSH, P_MT, P_MTH, SINGULAR, UNREACHABLE, _jacobi_svd,
                         _joint_state, _kin, _xid_from_qdd)

@njit(cache=True)
def _inertia_world(par, R, a, b):
    """Entry (a, b) of I_b = R I_b^(P) R^T (section 3.2)."""
    return R[a, 0] * par[P_IBX] * R[b, 0] + R[a, 1] * par[P_IBY] * R[b, 1] + R[a, 2] * par[P_IBZ] * R[b, 2]


@njit(cache=True)
def _point_acc(J, bias, xid, i, k):
    """Component k of the acceleration of point i, J_i xi-dot + bias_i (eqs. 29-31)."""
    s = bias[i, k]
    for b in range(8):
        s += J[i, k, b] * xid[b]
    return s


@njit(cache=True)
def _body_wrench(par, R, xi, xid, out):
    """Eq. 38: out[3:6] += I_b w-dot + w x I_b w, out[:3] += m_b (v-dot + g e_z)."""
    mb, g = par[P_MB], par[P_G]
    w0, w1, w2 = xi[3], xi[4], xi[5]
    iw0 = _inertia_world(par, R, 0, 0) * w0 + _inertia_world(par, R, 0, 1) * w1 + _inertia_world(par, R, 0, 2) * w2
    iw1 = _inertia_world(par, R, 1, 0) * w0 + _inertia_world(par, R, 1, 1) * w1 + _inertia_world(par, R, 1, 2) * w2
    iw2 = _inertia_world(par, R, 2, 0) * w0 + _inertia_world(par, R, 2, 1) * w1 + _inertia_world(par, R, 2, 2) * w2
    out[0] += mb * xid[0]
    out[1] += mb * xid[1]
    out[2] += mb * (xid[2] + g)
    for a in range(3):
        out[3 + a] += _inertia_world(par, R, a, 0) * xid[3] + _inertia_world(par, R, a, 1) * xid[4] \
            + _inertia_world(par, R, a, 2) * xid[5]
    out[3] += w1 * iw2 - w2 * iw1
    out[4] += w2 * iw0 - w0 * iw2
    out[5] += w0 * iw1 - w1 * iw0


@njit(cache=True)
def _id_xi(par, q, xi, xid, J, bias, R, out):
    """Eq. 37's right-hand side in twist coordinates: tau_b + tau_t + sum tau_l,i (eqs. 38-40)."""
    mth, msh, mt, g = par[P_MTH], par[P_MSH], par[P_MT], par[P_G]
    for b in range(8):
        out[b] = 0.0
    for i in range(4):  # eq. 40 (eq. 34 lumping; shank K-F with the foot fixed)
        for k in range(3):
            gk = -g if k == 2 else 0.0
            ah, ak = _point_acc(J, bias, xid, i, k), _point_acc(J, bias, xid, 4 + i, k)
            fh = mth / 3.0 * ah + mth / 6.0 * ak - mth / 2.0 * gk
            fk = (mth + msh) / 3.0 * ak + mth / 6.0 * ah - (mth + msh) / 2.0 * gk
            for b in range(8):
                out[b] += J[i, k, b] * fh + J[4 + i, k, b] * fk
    for k in range(3):  # eq. 39
        fn = mt * (_point_acc(J, bias, xid, 8, k) - (-g if k == 2 else 0.0))
        for b in range(8):
            out[b] += J[8, k, b] * fn
    _body_wrench(par, R, xi, xid, out)


@njit(cache=True)
def _mcg_xi(par, xi, J, bias, R, M, C, G):
    """Mass matrix (eqs. 51-55), Coriolis (eqs. 44-45, 48) and gravity (eq. 47) in twist coordinates."""
    mth, msh, mb, mt, g = par[P_MTH], par[P_MSH], par[P_MB], par[P_MT], par[P_G]
    for a in range(8):
        C[a] = 0.0
        G[a] = 0.0
        for b in range(8):
            M[a, b] = 0.0
    for i in range(4):
        Jh, Jk = J[i], J[4 + i]
        bh, bk = bias[i], bias[4 + i]
        for a in range(8):
            for b in range(a, 8):
                hh = Jh[0, a] * Jh[0, b] + Jh[1, a] * Jh[1, b] + Jh[2, a] * Jh[2, b]
                kk = Jk[0, a] * Jk[0, b] + Jk[1, a] * Jk[1, b] + Jk[2, a] * Jk[2, b]
                hk = Jh[0, a] * Jk[0, b] + Jh[1, a] * Jk[1, b] + Jh[2, a] * Jk[2, b] \
                    + Jk[0, a] * Jh[0, b] + Jk[1, a] * Jh[1, b] + Jk[2, a] * Jh[2, b]
                M[a, b] += mth / 3.0 * (hh + kk) + mth / 6.0 * hk + msh / 3.0 * kk
            for k in range(3):
                C[a] += Jh[k, a] * (mth / 3.0 * bh[k] + mth / 6.0 * bk[k]) \
                    + Jk[k, a] * ((mth + msh) / 3.0 * bk[k] + mth / 6.0 * bh[k])
            G[a] += g * (mth / 2.0 * Jh[2, a] + (mth + msh) / 2.0 * Jk[2, a])
    Jn = J[8]
    for a in range(8):
        for b in range(a, 8):
            M[a, b] += mt * (Jn[0, a] * Jn[0, b] + Jn[1, a] * Jn[1, b] + Jn[2, a] * Jn[2, b])
        C[a] += mt * (Jn[0, a] * bias[8, 0] + Jn[1, a] * bias[8, 1] + Jn[2, a] * bias[8, 2])
        G[a] += g * mt * Jn[2, a]
    for k in range(3):
        M[k, k] += mb
        for l in range(k, 3):
            M[3 + k, 3 + l] += _inertia_world(par, R, k, l)
    G[2] += mb * g
    w0, w1, w2 = xi[3], xi[4], xi[5]
    iw0 = _inertia_world(par, R, 0, 0) * w0 + _inertia_world(par, R, 0, 1) * w1 + _inertia_world(par, R, 0, 2) * w2
    iw1 = _inertia_world(par, R, 1, 0) * w0 + _inertia_world(par, R, 1, 1) * w1 + _inertia_world(par, R, 1, 2) * w2
    iw2 = _inertia_world(par, R, 2, 0) * w0 + _inertia_world(par, R, 2, 1) * w1 + _inertia_world(par, R, 2, 2) * w2
    C[3] += w1 * iw2 - w2 * iw1
    C[4] += w2 * iw0 - w0 * iw2
    C[5] += w0 * iw1 - w1 * iw0
    for a in range(8):
        for b in range(a):
            M[a, b] = M[b, a]


@njit(cache=True)
def _to_q(E, edot, M, C, G, Mq, Cq, Gq):
    """M_q = T^T M T, C_q = T^T (C + M T-dot q-dot), G_q = T^T G with T = diag(I3, E, I2)."""
    for a in range(8):
        m0, m1, m2 = M[a, 3], M[a, 4], M[a, 5]
        for b in range(8):
            Mq[a, b] = M[a, b]
        for b in range(3):
            Mq[a, 3 + b] = m0 * E[0, b] + m1 * E[1, b] + m2 * E[2, b]
        Cq[a] = C[a] + m0 * edot[0] + m1 * edot[1] + m2 * edot[2]
    for b in range(8):
        m0, m1, m2 = Mq[3, b], Mq[4, b], Mq[5, b]
        for a in range(3):
            Mq[3 + a, b] = E[0, a] * m0 + E[1, a] * m1 + E[2, a] * m2
    _twist_T(E, Cq, Cq)
    _twist_T(E, G, Gq)


@njit(cache=True)
def _twist_T(E, f, out):
    """out = T^T f (a twist-space generalized force to q coordinates); ``out`` may be ``f``."""
    f3, f4, f5 = f[3], f[4], f[5]
    for k in range(8):
        out[k] = f[k]
    for b in range(3):
        out[3 + b] = E[0, b] * f3 + E[1, b] * f4 + E[2, b] * f5


@njit(cache=True)
def _det3(a00, a01, a02, a10, a11, a12, a20, a21, a22):
    """Determinant of the 3 x 3 matrix given by rows."""
    return a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)


@njit(cache=True)
def _twist_force(E, fq, out):
    """out = T^-T fq: a q-space generalized force to twist coordinates (E^T x = fq[3:6] by Cramer's rule)."""
    for k in range(8):
        out[k] = fq[k]
    b0, b1, b2 = fq[3], fq[4], fq[5]
    det = _det3(E[0, 0], E[1, 0], E[2, 0], E[0, 1], E[1, 1], E[2, 1], E[0, 2], E[1, 2], E[2, 2])
    out[3] = _det3(b0, E[1, 0], E[2, 0], b1, E[1, 1], E[2, 1], b2, E[1, 2], E[2, 2]) / det
    out[4] = _det3(E[0, 0], b0, E[2, 0], E[0, 1], b1, E[2, 1], E[0, 2], b2, E[2, 2]) / det
    out[5] = _det3(E[0, 0], E[1, 0], b0, E[0, 1], E[1, 1], b1, E[0, 2], E[1, 2], b2) / det


@njit(cache=True)
def _lu_solve(a, n, b):
    """Solve A x = b in place (x -> b) by LU with partial pivoting, A (n x n) row-major in a[:n*n]
    (overwritten); returns det(A) (0 when a pivot vanishes, b then unusable)."""
    det = 1.0
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(a[i * n + j]) > abs(a[p * n + j]):
                p = i
        if p != j:
            for k in range(n):
                a[j * n + k], a[p * n + k] = a[p * n + k], a[j * n + k]
            b[j], b[p] = b[p], b[j]
            det = -det
        d = a[j * n + j]
        det *= d
        if d == 0.0:
            return 0.0
        for i in range(j + 1, n):
            l = a[i * n + j] / d
            a[i * n + j] = l
            for k in range(j + 1, n):
                a[i * n + k] -= l * a[j * n + k]
            b[i] -= l * b[j]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, n):
            s -= a[i * n + k] * b[k]
        b[i] = s / a[i * n + i]
    return det


@njit(cache=True)
def _allocate(Jtau, f, mode, w, tau0, out, mat, vec):
    """Actuator torques with J_tau^T tau = f (twist space); ``mat`` (64) and ``vec`` (8) are scratch.

    mode 0: eq. 41, tau_p = tau0[8:] given, tau_a = J_tau_a^-T (f - J_tau_p^T tau_p);
    mode 1: min (tau - tau0)^T W (tau - tau0) subject to J_tau^T tau = f, W = diag(w) (all 14):
    tau = tau0 + W^-1 J_tau lambda, (J_tau^T W^-1 J_tau) lambda = f - J_tau^T tau0.
    Returns a status (SINGULAR for |det J_tau_a| < 1e-14, resp. det(J_tau^T W^-1 J_tau) < 1e-300).
    """
    if mode == 0:
        for b in range(8):
            s = f[b]
            for k in range(8, 14):
                s -= Jtau[k, b] * tau0[k]
            vec[b] = s
            for k in range(8):
                if not np.isfinite(Jtau[k, b]):
                    return SINGULAR
                mat[b * 8 + k] = Jtau[k, b]
        if abs(_lu_solve(mat, 8, vec)) < 1e-14:
            return SINGULAR
        for k in range(8):
            out[k] = vec[k]
        for k in range(8, 14):
            out[k] = tau0[k]
        return OK
    for a in range(8):
        s = f[a]
        for k in range(14):
            s -= Jtau[k, a] * tau0[k]
        vec[a] = s
        for b in range(8):
            s = 0.0
            for k in range(14):
                s += Jtau[k, a] * Jtau[k, b] / w[k]
            mat[a * 8 + b] = s
    if not cholesky_solve(mat, 0, 8, vec, 0):
        return SINGULAR
    det = 1.0
    for a in range(8):
        det *= mat[a * 8 + a] * mat[a * 8 + a]
    if det < 1e-300:
        return SINGULAR
    for k in range(14):
        s = 0.0
        for b in range(8):
            s += Jtau[k, b] * vec[b]
        out[k] = tau0[k] + s / w[k]
    return OK


@njit(cache=True)
def _cond(Jtau, A, V, sv):
    """Condition number of J_tau_a = Jtau[:8] (twist coordinates, eq. 27) by the Jacobi SVD; ``A``, ``V``
    (8 x 8), ``sv`` (8) scratch."""
    for a in range(8):
        for b in range(8):
            A[a, b] = Jtau[a, b]
    _jacobi_svd(A, V, sv)
    hi, lo = sv[0], sv[0]
    for k in range(1, 8):
        hi = max(hi, sv[k])
        lo = min(lo, sv[k])
    if not lo > 0.0:
        return np.inf
    return hi / lo


class _Work:
    """The kernels' arrays: kinematics (``_kin``), dynamics, allocation and forward-kinematics scratch."""

    def __init__(self):
        self.R, self.E, self.edot = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3)
        self.xi, self.xid = np.zeros(8), np.zeros(8)
        self.ang, self.angd, self.angb = np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 3))
        self.J, self.bias, self.Jtau = np.zeros((9, 3, 8)), np.zeros((9, 3)), np.zeros((14, 8))
        self.legj = np.zeros((2, 3, 6))
        self.M, self.C, self.G = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.Mq, self.Cq, self.Gq = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.f = np.zeros(8)
        self.mat, self.vec = np.zeros(64), np.zeros(8)
        self.svd_a, self.svd_v, self.sv = np.zeros((8, 8)), np.zeros((8, 8)), np.zeros(8)
        self.fkw = np.zeros((11, 3))

    def kin_args(self):
        """The work arrays of ``_kin`` after (par, A, D, r, q, qd)."""
        return (self.R, self.E, self.edot, self.xi, self.ang, self.angd, self.angb, self.J, self.bias, self.Jtau,
                self.legj)


@njit(cache=True)
def _fd_core(par, A, D, r, q, qd, tau, qdd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj, M, C, G, Mq,
             Cq, Gq, f, mat):
    """Forward dynamics (eq. 43): q-ddot = M_q^-1 (T^T J_tau^T tau - C_q - G_q) by Cholesky; ``mat`` (64)
    scratch. Returns a status."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st
    _mcg_xi(par, xi, J, bias, R, M, C, G)
    _to_q(E, edot, M, C, G, Mq, Cq, Gq)
    for b in range(8):
        s = 0.0
        for k in range(14):
            s += Jtau[k, b] * tau[k]
        f[b] = s
    _twist_T(E, f, qdd)
    for a in range(8):
        qdd[a] -= Cq[a] + Gq[a]
        for b in range(8):
            mat[a * 8 + b] = Mq[a, b]
    if not cholesky_solve(mat, 0, 8, qdd, 0):
        return SINGULAR
    return OK


@njit(cache=True)
def _id_core(par, A, D, r, q, qd, qdd, mode, w, tau0, tau, R, E, edot, xi, xid, ang, angd, angb, J, bias, Jtau,
             legj, f, mat, vec):
    """Virtual-work inverse dynamics (eqs. 37-41): actuator torques (14) for (q, q-dot, q-ddot)."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return st
    _xid_from_qdd(E, edot, qdd, xid)
    _id_xi(par, q, xi, xid, J, bias, R, f)
    return _allocate(Jtau, f, mode, w, tau0, tau, mat, vec)


@inlined
def _rates(q, qd, dq, qdd, args):
    """Rate function of :mod:`plants.integrate`: q-dot and the q-ddot of eq. 43 under the held torques."""
    par, A, D, r, tau, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj, M, C, G, Mq, Cq, Gq, f, mat = args
    for k in range(8):
        dq[k] = qd[k]
    return _fd_core(par, A, D, r, q, qd, tau, qdd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj, M, C, G,
                    Mq, Cq, Gq, f, mat)


_advance = rk4_advance("quadruped_tail", _rates)


@njit(cache=True)
def plant_step(par, A, D, r, x, xd, tau, dt, substeps, work, q_act, v_act, R, E, edot, xi, ang, angd, angb, J, bias,
               Jtau, legj, M, C, G, Mq, Cq, Gq, f, mat):
    """``substeps`` classical RK4 steps of (q, q-dot) under constant tau, in place, then the actuator angles and
    rates ``q_act``, ``v_act`` of the new state (eqs. 4-18, 27-28); ``work`` (WORK_ROWS, 8) of
    :mod:`plants.integrate`. Returns a status; when the integration fails (UNREACHABLE also for a non-finite
    state) q and q-dot are unchanged; minus the status when the new state is out of the legs' workspace."""
    st = _advance(x, xd, dt, substeps, work, UNREACHABLE, (par, A, D, r, tau, R, E, edot, xi, ang, angd, angb, J,
                                                            bias, Jtau, legj, M, C, G, Mq, Cq, Gq, f, mat))
    if st != OK:
        return st
    st = _kin(par, A, D, r, x, xd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj)
    if st != OK:
        return -st
    _joint_state(ang, angd, q_act, v_act, x, xd)
    return OK
