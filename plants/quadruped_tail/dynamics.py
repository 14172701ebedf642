"""Compiled virtual-work dynamics of the quadruped with a robotic tail (seed 000, Liu & Ben-Tzvi): inverse
dynamics (eqs. 37-41), mass, Coriolis and gravity terms (eqs. 42-55), forward dynamics (eq. 43), the actuator
allocation (eq. 41 and its weighted least-norm variants) and the plant's RK4 step.

Numba functions on caller-provided arrays (:class:`_Work`) on top of :mod:`rtctl.plants.quadruped_tail.kinematics`;
:mod:`rtctl.plants.quadruped_tail.model` wraps them in a checked API.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..integrate import inlined, rk4_advance
from .kinematics import OK, P_G, P_IBX, P_IBY, P_IBZ, P_MB, P_MSH, P_MT, P_MTH, SINGULAR, UNREACHABLE, _kin, _xid_from_qdd

@njit(cache=True)
def _body_inertia(par, R, Iw):
    """I_b = R I_b^(P) R^T (section 3.2)."""
    for a in range(3):
        for b in range(3):
            Iw[a, b] = R[a, 0] * par[P_IBX] * R[b, 0] + R[a, 1] * par[P_IBY] * R[b, 1] + R[a, 2] * par[P_IBZ] * R[b, 2]


@njit(cache=True)
def _id_xi(par, q, xi, xid, J, bias, R, out):
    """Eq. 37's right-hand side in twist coordinates: tau_b + tau_t + sum tau_l,i (eqs. 38-40)."""
    mth, msh, mb, mt, g = par[P_MTH], par[P_MSH], par[P_MB], par[P_MT], par[P_G]
    acc = np.empty((9, 3))
    for i in range(9):
        for k in range(3):
            s = bias[i, k]
            for b in range(8):
                s += J[i, k, b] * xid[b]
            acc[i, k] = s
    f = np.zeros((9, 3))
    for i in range(4):  # eq. 40 (eq. 34 lumping; shank K-F with the foot fixed)
        for k in range(3):
            gk = -g if k == 2 else 0.0
            f[i, k] = mth / 3.0 * acc[i, k] + mth / 6.0 * acc[4 + i, k] - mth / 2.0 * gk
            f[4 + i, k] = (mth + msh) / 3.0 * acc[4 + i, k] + mth / 6.0 * acc[i, k] - (mth + msh) / 2.0 * gk
    for k in range(3):  # eq. 39
        f[8, k] = mt * (acc[8, k] - (-g if k == 2 else 0.0))
    for b in range(8):
        s = 0.0
        for i in range(9):
            s += J[i, 0, b] * f[i, 0] + J[i, 1, b] * f[i, 1] + J[i, 2, b] * f[i, 2]
        out[b] = s
    # eq. 38
    Iw = np.empty((3, 3))
    _body_inertia(par, R, Iw)
    w = xi[3:6]
    Iw_w = Iw @ w
    out[0] += mb * xid[0]
    out[1] += mb * xid[1]
    out[2] += mb * (xid[2] + g)
    out[3] += Iw[0, 0] * xid[3] + Iw[0, 1] * xid[4] + Iw[0, 2] * xid[5] + w[1] * Iw_w[2] - w[2] * Iw_w[1]
    out[4] += Iw[1, 0] * xid[3] + Iw[1, 1] * xid[4] + Iw[1, 2] * xid[5] + w[2] * Iw_w[0] - w[0] * Iw_w[2]
    out[5] += Iw[2, 0] * xid[3] + Iw[2, 1] * xid[4] + Iw[2, 2] * xid[5] + w[0] * Iw_w[1] - w[1] * Iw_w[0]


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
    Iw = np.empty((3, 3))
    _body_inertia(par, R, Iw)
    for k in range(3):
        M[k, k] += mb
        for l in range(k, 3):
            M[3 + k, 3 + l] += Iw[k, l]
    G[2] += mb * g
    w = xi[3:6]
    Iw_w = Iw @ w
    C[3] += w[1] * Iw_w[2] - w[2] * Iw_w[1]
    C[4] += w[2] * Iw_w[0] - w[0] * Iw_w[2]
    C[5] += w[0] * Iw_w[1] - w[1] * Iw_w[0]
    for a in range(8):
        for b in range(a):
            M[a, b] = M[b, a]


@njit(cache=True)
def _to_q(E, edot, M, C, G, Mq, Cq, Gq):
    """M_q = T^T M T, C_q = T^T (C + M T-dot q-dot), G_q = T^T G with T = diag(I3, E, I2)."""
    T = np.zeros((8, 8))
    for k in range(8):
        T[k, k] = 1.0
    for a in range(3):
        for b in range(3):
            T[3 + a, 3 + b] = E[a, b]
    MT = M @ T
    Mq[:, :] = T.T @ MT
    c = C.copy()
    for a in range(8):
        c[a] += M[a, 3] * edot[0] + M[a, 4] * edot[1] + M[a, 5] * edot[2]
    Cq[:] = T.T @ c
    Gq[:] = T.T @ G


@njit(cache=True)
def _twist_T(E, f, out):
    """out = T^T f (a twist-space generalized force to q coordinates)."""
    for k in range(8):
        out[k] = f[k]
    for b in range(3):
        out[3 + b] = E[0, b] * f[3] + E[1, b] * f[4] + E[2, b] * f[5]


@njit(cache=True)
def _allocate(Jtau, f, mode, w, tau0, out):
    """Actuator torques with J_tau^T tau = f (twist space).

    mode 0: eq. 41, tau_p = tau0[8:] given, tau_a = J_tau_a^-T (f - J_tau_p^T tau_p);
    mode 1: min (tau - tau0)^T W (tau - tau0) subject to J_tau^T tau = f, W = diag(w) (all 14).
    Returns a status.
    """
    if mode == 0:
        rhs = f.copy()
        for b in range(8):
            for k in range(8, 14):
                rhs[b] -= Jtau[k, b] * tau0[k]
        Ja = Jtau[:8, :].copy()
        if not np.all(np.isfinite(Ja)):
            return SINGULAR
        if abs(np.linalg.det(Ja)) < 1e-14:
            return SINGULAR
        ta = np.linalg.solve(Ja.T, rhs)
        for k in range(8):
            out[k] = ta[k]
        for k in range(8, 14):
            out[k] = tau0[k]
        return OK
    winv = 1.0 / w
    JW = np.empty((8, 14))
    for b in range(8):
        for k in range(14):
            JW[b, k] = Jtau[k, b] * winv[k]
    S = JW @ Jtau
    rhs = f - Jtau.T @ tau0
    if abs(np.linalg.det(S)) < 1e-300:
        return SINGULAR
    lam = np.linalg.solve(S, rhs)
    for k in range(14):
        s = 0.0
        for b in range(8):
            s += JW[b, k] * lam[b]
        out[k] = tau0[k] + s
    return OK


@njit(cache=True)
def _cond(Ja):
    sv = np.linalg.svd(Ja)[1]
    if sv[-1] <= 0.0:
        return np.inf
    return sv[0] / sv[-1]


class _Work:
    def __init__(self):
        self.R, self.E, self.edot = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3)
        self.xi, self.xid = np.zeros(8), np.zeros(8)
        self.ang, self.angd = np.zeros((4, 3)), np.zeros((4, 3))
        self.J, self.bias, self.Jtau = np.zeros((9, 3, 8)), np.zeros((9, 3)), np.zeros((14, 8))
        self.M, self.C, self.G = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.Mq, self.Cq, self.Gq = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.f, self.fq = np.zeros(8), np.zeros(8)


@njit(cache=True)
def _fd_core(par, A, D, r, q, qd, tau, qdd, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq, Cq, Gq,
             f, fq):
    """Forward dynamics (eq. 43): q-ddot = M_q^-1 (T^T J_tau^T tau - C_q - G_q); returns a status."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, J, bias, Jtau)
    if st != OK:
        return st
    _mcg_xi(par, xi, J, bias, R, M, C, G)
    _to_q(E, edot, M, C, G, Mq, Cq, Gq)
    for b in range(8):
        s = 0.0
        for k in range(14):
            s += Jtau[k, b] * tau[k]
        f[b] = s
    _twist_T(E, f, fq)
    for b in range(8):
        fq[b] -= Cq[b] + Gq[b]
    try:
        L = np.linalg.cholesky(Mq)
    except Exception:  # noqa: BLE001 - numba raises a generic error for non-PD
        return SINGULAR
    y = np.linalg.solve(L, fq)
    qdd[:] = np.linalg.solve(L.T, y)
    return OK


@njit(cache=True)
def _id_core(par, A, D, r, q, qd, qdd, mode, w, tau0, tau, R, E, edot, xi, xid, ang, angd, J, bias, Jtau, f):
    """Virtual-work inverse dynamics (eqs. 37-41): actuator torques (14) for (q, q-dot, q-ddot)."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, J, bias, Jtau)
    if st != OK:
        return st
    _xid_from_qdd(E, edot, qdd, xid)
    _id_xi(par, q, xi, xid, J, bias, R, f)
    return _allocate(Jtau, f, mode, w, tau0, tau)


@inlined
def _rates(q, qd, dq, qdd, args):
    """Rate function of :mod:`plants.integrate`: q-dot and the q-ddot of eq. 43 under the held torques."""
    par, A, D, r, tau, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq, Cq, Gq, f, fq = args
    for k in range(8):
        dq[k] = qd[k]
    return _fd_core(par, A, D, r, q, qd, tau, qdd, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq, Cq, Gq,
                    f, fq)


_advance = rk4_advance("quadruped_tail", _rates)


@njit(cache=True)
def plant_step(par, A, D, r, x, xd, tau, dt, substeps, work, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G,
               Mq, Cq, Gq, f, fq):
    """``substeps`` classical RK4 steps of (q, q-dot) under constant tau, in place; ``work`` (WORK_ROWS, 8) of
    :mod:`plants.integrate`. Returns a status; on failure (UNREACHABLE also for a non-finite state) q and
    q-dot are unchanged."""
    return _advance(x, xd, dt, substeps, work, UNREACHABLE, (par, A, D, r, tau, R, E, edot, xi, ang, angd, J, bias,
                                                              Jtau, M, C, G, Mq, Cq, Gq, f, fq))
