"""Reference formulations of a geared robotic mechanism (Chen & Wang, 1998) for the tests and benchmarks:
G_s element by element from eqs. 18a-d, 19a-e and 20a-c (the compiled kernels use the compact form of
eqs. 16a/16b) and the brute-force Lagrangian of all links, independent of the virtual-link machinery.

Nothing in the plant or the controllers imports this module.
"""
from __future__ import annotations

import numpy as np

from .energy import link_energies
from .model import _rx, _rz

__all__ = ["axes_in_frame", "brute_force_dynamics", "dh_frames", "gs_reference", "secondary_terms"]


def dh_frames(mech, q):
    """World rotations R_i of the D-H frames i = 0..n (eq. 5 chained)."""
    rots = [np.eye(3)]
    for r in range(1, mech.n + 1):
        rots.append(rots[-1] @ _rz(q[r - 1]) @ _rx(mech.dh[r, 1]))
    return rots


def axes_in_frame(mech, q, i):
    """^i z_{k-1} (k = 1..i) and their partial derivatives d ^i z_{k-1} / d theta_h (eq. 8, Table 2)."""
    rots = dh_frames(mech, q)
    ri = rots[i]
    n = mech.n
    z = np.zeros((n + 1, 3))            # z[k] = ^i z_{k-1}
    dz = np.zeros((n + 1, n + 1, 3))    # dz[k, h] = d ^i z_{k-1} / d theta_h
    for k in range(1, i + 1):
        z[k] = ri.T @ rots[k - 1][:, 2]
        for h in range(k + 1, i + 1):
            # Turning joint h rotates frame i (not frame k-1) about z_{h-1}: d(R_i^T z) = -R_i^T (z_{h-1} x ...)
            zh = rots[h - 1][:, 2]
            dz[k, h] = ri.T @ np.cross(rots[k - 1][:, 2], zh)
    return z, dz


def secondary_terms(mech, name, q):
    """M_{j/i} and the coupling matrices C_{j/i,r} (r = 1..n) of secondary link ``name`` at ``q``,
    element by element from eqs. 18a-d, 19a-e and 20a-c (joint indices 1-based as in the paper;
    arrays 0-based). Returns (M (n x n), C (n x n x n) with C[r-1] = C_{j/i,r})."""
    s = next(x for x in mech._secs if x.name == name)
    i, e, ij, b = s.carrier, s.axis, s.inertia, s.b
    n = mech.n
    if np.any(b[:i] != 0):
        raise ValueError(f"secondary link '{name}': b = {b.tolist()} has inner terms (a planet its own carrier's joint "
                         "drives); the case tables of eqs. 18-20 assume eq. 11's class (outer terms only)")
    z, dz = axes_in_frame(mech, np.asarray(q, dtype=float), i)
    inner = lambda k: k <= i  # noqa: E731
    M = np.zeros((n, n))
    C = np.zeros((n, n, n))
    for r in range(1, n + 1):
        for k in range(1, n + 1):
            if inner(r) and inner(k):
                val = 0.0                                    # (18a)
            elif inner(r):
                val = ij * b[k - 1] * (e @ z[r])             # (18b)
            elif inner(k):
                val = ij * b[r - 1] * (e @ z[k])             # (18c)
            else:
                val = ij * b[r - 1] * b[k - 1]               # (18d)
            M[r - 1, k - 1] = val
    for r in range(1, n + 1):
        for h in range(1, n + 1):
            for k in range(1, n + 1):
                val = 0.0
                if inner(r):
                    if h < r and not inner(k):
                        val = -0.5 * ij * b[k - 1] * (e @ dz[h, r])       # (19a)
                    elif inner(h) and h > r and not inner(k):
                        val = 0.5 * ij * b[k - 1] * (e @ dz[r, h])        # (19b)
                    elif not inner(h) and k < r:
                        val = -0.5 * ij * b[h - 1] * (e @ dz[k, r])       # (19c)
                    elif not inner(h) and inner(k) and k > r:
                        val = 0.5 * ij * b[h - 1] * (e @ dz[r, k])        # (19d)
                else:
                    if inner(h) and inner(k) and h < k:
                        val = 0.5 * ij * b[r - 1] * (e @ dz[h, k])        # (20a)
                    elif inner(h) and inner(k) and k < h:
                        val = 0.5 * ij * b[r - 1] * (e @ dz[k, h])        # (20b)
                C[r - 1, h - 1, k - 1] = val                              # else (19e), (20c): 0
    return M, C


def gs_reference(mech, q, v, a):
    """G_s = M_s theta'' + C_s (eq. 21) by summing :func:`secondary_terms` (eq. 17). Returns (G_s, M_s, C_s)."""
    n = mech.n
    Ms, Cs = np.zeros((n, n)), np.zeros(n)
    v = np.asarray(v, dtype=float)
    for s in mech._secs:
        M, C = secondary_terms(mech, s.name, q)
        Ms += M
        Cs += np.array([v @ C[r] @ v for r in range(n)])
    return Ms @ np.asarray(a, dtype=float) + Cs, Ms, Cs


def brute_force_dynamics(mech, q, qd, qdd=None, h=1e-30):
    """The independent cross-check: M, C(q, qd) qd and g from the Lagrangian of *all* links.

    Kinetic energy T = sum over primary and secondary links of 1/2 m v_c^2 + 1/2 omega^T I omega with
    every link's absolute angular velocity from the gear kinematics. M_rk = d^2 T / d qd_r d qd_k
    (exact: T is quadratic in qd; by polarisation), dM/d theta_k by complex-step differentiation
    (h = 1e-30, exact to rounding), c_r = sum_k (dM_rk/dtheta_h qd_h) qd_k - 1/2 qd^T dM/dtheta_r qd,
    g = dV/d theta by complex step. Returns (tau, M, c, g) with tau = M qdd + c + g.
    """
    n = mech.n
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)

    def mass(qq):
        dt = np.result_type(qq, float)
        M = np.zeros((n, n), dtype=dt)
        eye = np.eye(n)
        tk = [link_energies(mech, qq, eye[k])[0] for k in range(n)]
        for r in range(n):
            M[r, r] = 2 * tk[r]
            for k in range(r + 1, n):
                M[r, k] = M[k, r] = link_energies(mech, qq, eye[r] + eye[k])[0] - tk[r] - tk[k]
        return M

    M = mass(q).real
    dM = np.zeros((n, n, n))   # dM[h] = dM / d theta_h
    g = np.zeros(n)
    for hh in range(n):
        qc = q.astype(complex)
        qc[hh] += 1j * h
        dM[hh] = mass(qc).imag / h
        g[hh] = link_energies(mech, qc, np.zeros(n))[1].imag / h
    Mdot = np.einsum("hrk,h->rk", dM, qd)
    c = Mdot @ qd - 0.5 * np.array([qd @ dM[r] @ qd for r in range(n)])
    qdd = np.zeros(n) if qdd is None else np.asarray(qdd, dtype=float)
    return M @ qdd + c + g, M, c, g
