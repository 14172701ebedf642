"""Solves on the Stewart platform's generalized-momentum model (Lopes, 2009): 6 x 6 linear systems,
inverse and forward dynamics (eqs. 81-84), forward kinematics by Newton-Raphson, the workspace check and the
platform rate of given leg rates (eq. 5).

Allocation-free numba code on the work arrays of :mod:`rtctl.plants.stewart.kernels` (notation and layout there).
"""
import numpy as np
from numba import njit

from .kernels import (ALL_LEGS, B_ALL, FK_NO_CONVERGENCE, FK_OUT_OF_STROKE, FK_WRONG_BRANCH, K_JA, K_JAD, K_JC, K_LU,
                      K_M, K_R, K_S3, K_V, OK, P_LMAX, P_LMIN, SINGULAR, V_A, V_DX, V_F, V_G, V_L, V_R6, V_U, V_X,
                      W_ALL, _dot3, euler_rate_matrix, euler_terms, gm_matrices, jc_matrix, je_from_jc, leg_vectors,
                      rotation)

jit = njit(cache=True)


# ---------------------------------------------------------------- 6 x 6 solves
@jit
def solve6(A, b, out, LU, transpose):
    """out = A^-1 b (or A^-T b) by Gaussian elimination with partial pivoting; returns OK or SINGULAR."""
    scale = 0.0
    for r in range(6):
        out[r] = b[r]
        for c in range(6):
            LU[r, c] = A[c, r] if transpose else A[r, c]
            if abs(LU[r, c]) > scale:
                scale = abs(LU[r, c])
    if not scale > 0.0:
        return SINGULAR
    for k in range(6):
        p = k
        for r in range(k + 1, 6):
            if abs(LU[r, k]) > abs(LU[p, k]):
                p = r
        if abs(LU[p, k]) <= 1e-13 * scale:
            return SINGULAR
        if p != k:
            for c in range(6):
                tmp = LU[k, c]
                LU[k, c] = LU[p, c]
                LU[p, c] = tmp
            tmp = out[k]
            out[k] = out[p]
            out[p] = tmp
        for r in range(k + 1, 6):
            f = LU[r, k] / LU[k, k]
            if f != 0.0:
                for c in range(k, 6):
                    LU[r, c] -= f * LU[k, c]
                out[r] -= f * out[k]
    for k in range(5, -1, -1):
        s = out[k]
        for c in range(k + 1, 6):
            s -= LU[k, c] * out[c]
        out[k] = s / LU[k, k]
    return OK


@jit
def det6(A, LU):
    """Determinant by partial-pivoting elimination (A unchanged)."""
    for r in range(6):
        for c in range(6):
            LU[r, c] = A[r, c]
    det = 1.0
    for k in range(6):
        p = k
        for r in range(k + 1, 6):
            if abs(LU[r, k]) > abs(LU[p, k]):
                p = r
        if LU[p, k] == 0.0:
            return 0.0
        if p != k:
            det = -det
            for c in range(6):
                tmp = LU[k, c]
                LU[k, c] = LU[p, c]
                LU[p, c] = tmp
        det *= LU[k, k]
        for r in range(k + 1, 6):
            f = LU[r, k] / LU[k, k]
            for c in range(k, 6):
                LU[r, c] -= f * LU[k, c]
    return det


# ---------------------------------------------------------------- dynamics
@jit
def inverse_dynamics(pts, par, x, xd, xdd, bodies, tau, wk, wv):
    """Actuator forces tau = J_C^-T (M xdd + V xd + G) (eqs. 81-84) of the selected bodies.

    Eq. 84 (and 25) is printed as J_C^-1 in places; the power balance
    tau . l-dot = tau . J_C u = (J_C^T tau) . u gives f|B = J_C^T tau, so
    tau = J_C^-T f|B. The wrench f|B is left in wv[V_F]. Returns OK or SINGULAR.
    """
    Mw, Vw, G, f = wk[K_M], wk[K_V], wv[V_G], wv[V_F]
    gm_matrices(pts, par, x, xd, bodies, ALL_LEGS, W_ALL, Mw, Vw, G, wk, wv)
    for r in range(6):
        s = G[r]
        for c in range(6):
            s += Mw[r, c] * xdd[c] + Vw[r, c] * xd[c]
        f[r] = s
    JC = wk[K_JC]
    jc_matrix(pts, x, wk[K_R], JC, wv[V_A], wv[V_L])
    return solve6(JC, f, tau, wk[K_LU], True)


@jit
def forward_dynamics(pts, par, x, xd, tau, xdd, wk, wv):
    """xdd = M^-1 (J_C^T tau - V xd - G) (section 3.5, eq. 81 solved for xdd). Returns OK or SINGULAR."""
    Mw, Vw, G, f = wk[K_M], wk[K_V], wv[V_G], wv[V_F]
    gm_matrices(pts, par, x, xd, B_ALL, ALL_LEGS, W_ALL, Mw, Vw, G, wk, wv)
    JC = wk[K_JC]
    jc_matrix(pts, x, wk[K_R], JC, wv[V_A], wv[V_L])
    for r in range(6):
        s = -G[r]
        for c in range(6):
            s += JC[c, r] * tau[c] - Vw[r, c] * xd[c]
        f[r] = s
    return solve6(Mw, f, xdd, wk[K_LU], False)


@jit
def forward_kinematics(pts, par, lengths, x, tol, max_iter, wk, wv):
    """Platform pose from leg lengths by Newton-Raphson on |l_i(x)| - lengths_i = 0 with J_E (eq. 5).

    ``x`` holds the initial guess and receives the solution. Returns OK,
    FK_OUT_OF_STROKE (a length outside [l_min, l_max]), SINGULAR (J_E singular
    on the way), FK_NO_CONVERGENCE, or FK_WRONG_BRANCH (converged with the
    platform at or below the base plane). On failure ``x`` is left unchanged.
    """
    for i in range(6):
        if not (lengths[i] >= par[P_LMIN] and lengths[i] <= par[P_LMAX]):
            return FK_OUT_OF_STROKE
    R, JA, JC, JE = wk[K_R], wk[K_JA], wk[K_JC], wk[K_S3]
    xs, r, dx = wv[V_X], wv[V_R6], wv[V_DX]
    for k in range(6):
        xs[k] = x[k]
    for it in range(max_iter):
        rotation(xs, R)
        jc_matrix(pts, xs, R, JC, wv[V_A], wv[V_L])
        err = 0.0
        for i in range(6):
            leg_vectors(i, pts, xs, R, wv[V_A], wv[V_L])
            r[i] = np.sqrt(_dot3(wv[V_L], wv[V_L])) - lengths[i]
            if abs(r[i]) > err:
                err = abs(r[i])
        if err <= tol:
            if xs[2] <= 0.0:
                return FK_WRONG_BRANCH
            for k in range(6):
                x[k] = xs[k]
            return OK
        cps, sps, cth, sth = np.cos(xs[3]), np.sin(xs[3]), np.cos(xs[4]), np.sin(xs[4])
        euler_rate_matrix(cps, sps, cth, sth, JA)
        je_from_jc(JC, JA, JE)
        if solve6(JE, r, dx, wk[K_LU], False) != OK:
            return SINGULAR
        for k in range(6):
            xs[k] -= dx[k]
        if not (abs(xs[0]) < 1e6 and abs(xs[1]) < 1e6 and abs(xs[2]) < 1e6):
            return FK_NO_CONVERGENCE
    return FK_NO_CONVERGENCE


@jit
def workspace_status(pts, par, x, det_min, wk, wv):
    """0 inside the workspace; 1 a leg shorter than l_min, 2 longer than l_max, 3 |det J_C| < det_min
    (near a singular configuration), 4 |cos theta| < 1e-3 (Euler-angle singularity), 5 platform at or
    below the base plane, 6 non-finite pose."""
    for k in range(6):
        if not np.isfinite(x[k]):
            return 6
    if x[2] <= 0.0:
        return 5
    if abs(np.cos(x[4])) < 1e-3:
        return 4
    R, JC = wk[K_R], wk[K_JC]
    rotation(x, R)
    for i in range(6):
        leg_vectors(i, pts, x, R, wv[V_A], wv[V_L])
        L = np.sqrt(_dot3(wv[V_L], wv[V_L]))
        if L < par[P_LMIN]:
            return 1
        if L > par[P_LMAX]:
            return 2
    jc_matrix(pts, x, R, JC, wv[V_A], wv[V_L])
    if abs(det6(JC, wk[K_LU])) < det_min:
        return 3
    return 0


@jit
def leg_rates_to_platform(pts, x, ld, xd, wk, wv):
    """xd = J_E^-1 l-dot (eq. 5). Returns OK or SINGULAR."""
    R, JA, JC, JE = wk[K_R], wk[K_JA], wk[K_JC], wk[K_S3]
    euler_terms(x, wv[V_X], R, JA, wk[K_JAD], wv[V_U])   # wv[V_X] as a dummy rate: only R, J_A are used
    jc_matrix(pts, x, R, JC, wv[V_A], wv[V_L])
    je_from_jc(JC, JA, JE)
    return solve6(JE, ld, xd, wk[K_LU], False)
