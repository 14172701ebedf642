"""Compiled virtual-link dynamics of a geared robotic mechanism (Chen & Wang, 1998): the secondary links'
G_s (eqs. 16-21) on the world joint axes a core kernel leaves, joint-space inverse and forward dynamics
(eq. 23) and :class:`GRMDynamics`, their checked Python API.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from rtctl.dynamics import kernels as _k

__all__ = ["GRMDynamics", "gs_terms", "grm_forward_dynamics", "grm_inverse_dynamics"]


_SIG_GS = ("void(float64[:, ::1], int64[::1], float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], "
           "float64[:, ::1], float64[::1], float64[:, ::1])")


@njit(_SIG_GS, cache=True)
def gs_terms(ws, carrier, inertia, axis_body, bmat, v, Ms, Cs, work):
    """M_s and C_s (eqs. 16-21) from the world joint axes and rotations left in ``ws`` by a core kernel.

    ``work``: (3, >= n + 1): rows c_k, c_k-dot and a scratch column sum. z_{k-1} (world) is body k's
    joint axis (ws[k-1, W_E]); e_j (world) = R_body_i e_body.
    """
    n = v.shape[0]
    for r in range(n):
        Cs[r] = 0.0
        for k in range(n):
            Ms[r, k] = 0.0
    for j in range(carrier.shape[0]):
        i = carrier[j]
        ij = inertia[j]
        s = 0.0
        for k in range(n):
            s += bmat[j, k] * v[k]
        if i == 0:
            for r in range(n):
                for k in range(n):
                    Ms[r, k] += ij * bmat[j, r] * bmat[j, k]
            continue
        wi = ws[i - 1]
        ex = wi[_k.W_R + 0] * axis_body[j, 0] + wi[_k.W_R + 1] * axis_body[j, 1] + wi[_k.W_R + 2] * axis_body[j, 2]
        ey = wi[_k.W_R + 3] * axis_body[j, 0] + wi[_k.W_R + 4] * axis_body[j, 1] + wi[_k.W_R + 5] * axis_body[j, 2]
        ez = wi[_k.W_R + 6] * axis_body[j, 0] + wi[_k.W_R + 7] * axis_body[j, 1] + wi[_k.W_R + 8] * axis_body[j, 2]
        c, cd, dsum = work[0], work[1], work[2]
        for k in range(n):
            c[k] = 0.0
            cd[k] = 0.0
            dsum[k] = 0.0
        for k in range(i):
            zk = ws[k]
            c[k] = ex * zk[_k.W_E] + ey * zk[_k.W_E + 1] + ez * zk[_k.W_E + 2]
        # D_{k,h} = e . (z_{k-1} x z_{h-1}) for k < h <= i (0-based k < h < i)
        for k in range(i):
            ax, ay, az = ws[k, _k.W_E], ws[k, _k.W_E + 1], ws[k, _k.W_E + 2]
            for h in range(k + 1, i):
                bx, by, bz = ws[h, _k.W_E], ws[h, _k.W_E + 1], ws[h, _k.W_E + 2]
                dkh = ex * (ay * bz - az * by) + ey * (az * bx - ax * bz) + ez * (ax * by - ay * bx)
                cd[k] += dkh * v[h]          # c_k-dot = sum_h D_{k,h} theta_h-dot
                dsum[h] += dkh * v[k]        # sum_k D_{k,h} theta_k-dot  (= d/d theta_h of e . omega_i)
        w = 0.0
        for k in range(i):
            w += cd[k] * v[k]
        for r in range(n):
            br, cr = bmat[j, r], c[r]
            for k in range(n):
                Ms[r, k] += ij * (br * bmat[j, k] + br * c[k] + cr * bmat[j, k])      # eq. 18
            Cs[r] += ij * br * w + ij * s * (cd[r] - dsum[r])                        # eqs. 16a/16b (19, 20)


_SIG_ID = ("int64(int64[:, ::1], float64[:, ::1], float64[:, ::1], int64[::1], float64[::1], float64[:, ::1], "
           "float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], "
           "float64[:, ::1], float64[::1])")


@njit(_SIG_ID, cache=True)
def grm_inverse_dynamics(mi, mf, ws, carrier, inertia, axis_body, bmat, q, v, a, tau, Ms, work, Cs):
    """Joint-space inverse dynamics of eq. 23: tau = G_v (core RNEA on the virtual EOLC, with gravity) + G_s."""
    status = _k.rnea(mi, mf, ws, q, v, a, tau)
    if status != _k.OK:
        return status
    gs_terms(ws, carrier, inertia, axis_body, bmat, v, Ms, Cs, work)
    n = v.shape[0]
    for r in range(n):
        acc = Cs[r]
        for k in range(n):
            acc += Ms[r, k] * a[k]
        tau[r] += acc
    return _k.OK


_SIG_FD = ("int64(int64[:, ::1], float64[:, ::1], float64[:, ::1], int64[::1], float64[::1], float64[:, ::1], "
           "float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[:, ::1], "
           "float64[:, ::1], float64[:, ::1], float64[::1], float64[::1])")


@njit(_SIG_FD, cache=True)
def grm_forward_dynamics(mi, mf, ws, carrier, inertia, axis_body, bmat, q, v, tau, qdd, M, Ms, work, Cs, zero):
    """theta'' = (M_v + M_s)^-1 (tau - C_v - C_s - g) (eq. 23 solved; Cholesky). ``zero``: n zeros."""
    n = v.shape[0]
    status = _k.rnea(mi, mf, ws, q, v, zero, qdd)      # C_v + g into qdd (temporarily)
    if status != _k.OK:
        return status
    gs_terms(ws, carrier, inertia, axis_body, bmat, v, Ms, Cs, work)
    status = _k.crba(mi, mf, ws, q, M)
    if status != _k.OK:
        return status
    for r in range(n):
        qdd[r] = tau[r] - qdd[r] - Cs[r]
        for k in range(n):
            M[r, k] += Ms[r, k]
    # In-place Cholesky M = L L^T (lower triangle), then two triangular solves.
    for r in range(n):
        for k in range(r + 1):
            acc = M[r, k]
            for p in range(k):
                acc -= M[r, p] * M[k, p]
            if r == k:
                if not acc > 0.0:
                    return _k.SINGULAR
                M[r, r] = math.sqrt(acc)
            else:
                M[r, k] = acc / M[k, k]
    for r in range(n):
        acc = qdd[r]
        for p in range(r):
            acc -= M[r, p] * qdd[p]
        qdd[r] = acc / M[r, r]
    for r in range(n - 1, -1, -1):
        acc = qdd[r]
        for p in range(r + 1, n):
            acc -= M[p, r] * qdd[p]
        qdd[r] = acc / M[r, r]
    return _k.OK


class GRMDynamics:
    """Compiled virtual-link dynamics of a :class:`~rtctl.plants.geared.model.GearedMechanism` (eqs. 13, 21, 23).

    ``model`` defaults to ``mech.virtual_model()``; pass another (e.g. mass-scaled) model of
    the same tree to perturb G_v. Not thread-safe (one workspace).
    """

    def __init__(self, mech, model=None):
        from rtctl.dynamics import Dynamics
        self.mech = mech
        self.model = model if model is not None else mech.virtual_model()
        if self.model.nv != mech.n:
            raise ValueError(f"model has nv={self.model.nv}, mechanism has {mech.n} joints")
        self.core = Dynamics(self.model)
        n = mech.n
        self.carrier, self.inertia = mech.sec_carrier, mech.sec_inertia
        self.axis_body, self.bmat = mech.sec_axis_body, mech.sec_b
        if self.bmat.shape[0] == 0:   # numba needs a 2-D array; a dummy secondary with zero inertia
            self.carrier, self.inertia = np.zeros(1, np.int64), np.zeros(1)
            self.axis_body, self.bmat = np.zeros((1, 3)), np.zeros((1, n))
        self.Ms = np.zeros((n, n))
        self.Cs = np.zeros(n)
        self.M = np.zeros((n, n))
        self.work = np.zeros((3, n + 1))
        self.zero = np.zeros(n)
        self.A, self.A_inv = mech.A, mech.A_inv

    def _check(self, status):
        if status != _k.OK:
            raise ValueError(f"GRM dynamics kernel failed with status {status} (NaN/inf input or singular inertia)")

    def inverse_dynamics(self, q, v, a, out=None):
        """Joint torques tau = (M_v + M_s) a + C_v + C_s + g (eq. 23's left-hand side)."""
        out = np.empty(self.mech.n) if out is None else out
        w = self.core
        self._check(grm_inverse_dynamics(w.mi, w.mf, w.ws, self.carrier, self.inertia, self.axis_body, self.bmat,
                                         q, v, a, out, self.Ms, self.work, self.Cs))
        return out

    def actuator_inverse_dynamics(self, q, v, a, out=None):
        """Input torques xi = A^-1 tau (eqs. 22-23)."""
        tau = self.inverse_dynamics(q, v, a)
        out = np.empty(self.mech.n) if out is None else out
        np.matmul(self.A_inv, tau, out=out)
        return out

    def forward_dynamics(self, q, v, tau, out=None):
        """theta'' under joint torques ``tau`` (use ``A @ xi`` for input torques)."""
        out = np.empty(self.mech.n) if out is None else out
        w = self.core
        self._check(grm_forward_dynamics(w.mi, w.mf, w.ws, self.carrier, self.inertia, self.axis_body, self.bmat,
                                         q, v, tau, out, self.M, self.Ms, self.work, self.Cs, self.zero))
        return out

    def actuator_forward_dynamics(self, q, v, xi, out=None):
        return self.forward_dynamics(q, v, self.A @ np.asarray(xi, dtype=float), out)

    def gs(self, q, v, a):
        """(G_s, M_s, C_s) from the compiled kernel (eq. 21)."""
        tau = self.inverse_dynamics(q, v, a)  # leaves M_s, C_s in the buffers
        del tau
        return self.Ms @ np.asarray(a, float) + self.Cs, self.Ms.copy(), self.Cs.copy()

    def mass_matrix(self, q):
        """M_v + M_s."""
        n = self.mech.n
        M = self.core.mass_matrix(np.asarray(q, float))
        self.inverse_dynamics(q, np.zeros(n), np.zeros(n))
        return M + self.Ms
