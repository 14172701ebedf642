"""Forward dynamics kernels: the O(n) articulated-body algorithm and the O(n^3) M + Cholesky reference.

:func:`aba` is Featherstone's FDab (RBDA sec. 7.3, Table 7.1) in the module-DeNOC
form of Shah, Saha & Dutt (2012, eqs. 28-30, A.4-A.9): three passes over the tree --
velocities and bias terms outwards, articulated inertias inwards, accelerations
outwards -- on the world-axes quantities of :mod:`rtctl.dynamics.kinematics`.
Joints of any number of DOFs enter through their motion subspace S_i.

The joint-space inertia of each articulated body, D_i = S_i^T IA_i S_i, is kept
as its factor D_i = L_i Delta_i L_i^T (unit lower L_i, diagonal Delta_i), the UDU^T
decomposition of Shah, Saha & Dutt (2012), and the backward pass stores U_i L_i^-T and L_i^-1 u_i
instead of U_i and u_i. With W = U L^-T and u~ = L^-1 u:

    U D^-1 U^T = W Delta^-1 W^T,   U D^-1 u = W Delta^-1 u~,
    D^-1 (u - U^T a) = L^-T Delta^-1 (u~ - W^T a),

so an n-DOF joint costs n rank-one updates of the articulated inertia, and a
1-DOF joint (L = 1) needs no solve at all.
"""
from __future__ import annotations

from numba import njit

from ..model import MF_ARMATURE, MI_IV, MI_NV, MI_PARENT
from .inverse import rnea, velocity_product_wrench
from .kinematics import bias_twist_rate, forward_kinematics, propagate_velocity, set_twist_rate
from .mass_matrix import crba
from .spatial import cholesky_solve, dot6, ldlt_factor, shift_articulated, spatial_inertia
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, OK, SIG_MAT_Q_V_TAU_OUT, SIG_Q_V_A_OUT, SIG_Q_V_TAU_EXTRA_OUT,
                        SINGULAR, W_C, W_DLDL, W_FEXT, W_IA, W_PA, W_S, W_U, W_UU, WRONG_LENGTH, check_vectors)


@njit(cache=True, forceinline=True)
def _velocity_pass(mi, mf, ws, v):
    """Pass 1: twists t_i, velocity products c_i, IA_i = M_i and pA_i = Omega M E t - w_ext (eq. A.8 start)."""
    for i in range(mi.shape[0]):
        propagate_velocity(mi, ws, i, v)
        spatial_inertia(mf, ws, i)
        nx, ny, nz, fx, fy, fz = velocity_product_wrench(mf, ws, i)
        ws[i, W_PA], ws[i, W_PA + 1], ws[i, W_PA + 2] = nx - ws[i, W_FEXT], ny - ws[i, W_FEXT + 1], \
            nz - ws[i, W_FEXT + 2]
        ws[i, W_PA + 3], ws[i, W_PA + 4], ws[i, W_PA + 5] = fx - ws[i, W_FEXT + 3], fy - ws[i, W_FEXT + 4], \
            fz - ws[i, W_FEXT + 5]


@njit(cache=True, forceinline=True)
def _joint_force_columns(mi, ws, i, tau):
    """U_i = IA_i S_i and u_i = tau_i - S_i^T pA_i (RBDA Table 7.1; Shah et al. 2012, eq. A.6: Psi^_i = M^_i p_i)."""
    end = DOF_WIDTH * mi[i, MI_NV]
    b, k = 0, mi[i, MI_IV]
    while b < end:
        s, u = W_S + b, W_U + b
        s0, s1, s2, s3, s4, s5 = ws[i, s], ws[i, s + 1], ws[i, s + 2], ws[i, s + 3], ws[i, s + 4], ws[i, s + 5]
        for r in range(6):
            o = W_IA + 6 * r
            ws[i, u + r] = (ws[i, o] * s0 + ws[i, o + 1] * s1 + ws[i, o + 2] * s2 + ws[i, o + 3] * s3
                            + ws[i, o + 4] * s4 + ws[i, o + 5] * s5)
        ws[i, W_UU + b] = tau[k] - dot6(ws, i, s, W_PA)
        b, k = b + DOF_WIDTH, k + 1


@njit(cache=True, forceinline=True)
def _joint_inertia(mi, mf, ws, i, extra):
    """Lower triangle of D_i = S_i^T U_i + armature (RBDA Table 7.1; Shah et al. 2012, eq. A.7: I^_i = p_i^T Psi^_i),
    plus ``extra`` (per DOF; None: nothing) on its diagonal."""
    end = DOF_WIDTH * mi[i, MI_NV]
    b, k = 0, 0
    while b < end:
        s = W_S + b
        s0, s1, s2, s3, s4, s5 = ws[i, s], ws[i, s + 1], ws[i, s + 2], ws[i, s + 3], ws[i, s + 4], ws[i, s + 5]
        bj = b
        while bj < end:
            u = W_U + bj
            ws[i, W_DLDL + bj + k] = (s0 * ws[i, u] + s1 * ws[i, u + 1] + s2 * ws[i, u + 2] + s3 * ws[i, u + 3]
                                      + s4 * ws[i, u + 4] + s5 * ws[i, u + 5])
            bj += DOF_WIDTH
        ws[i, W_DLDL + b + k] += mf[i, MF_ARMATURE]
        if extra is not None:
            ws[i, W_DLDL + b + k] += extra[mi[i, MI_IV] + k]
        b, k = b + DOF_WIDTH, k + 1


@njit(cache=True, forceinline=True)
def _factor_joint_inertia(ws, i, n):
    """D_i = L Delta L^T, then U_i <- U_i L^-T and u_i <- L^-1 u_i (the UDU^T form, module docstring).

    Returns False if D_i is not positive definite.
    """
    if not ldlt_factor(ws, i, W_DLDL, n, DOF_WIDTH):
        return False
    for k in range(1, n):
        w = W_U + DOF_WIDTH * k
        w0, w1, w2, w3, w4, w5 = ws[i, w], ws[i, w + 1], ws[i, w + 2], ws[i, w + 3], ws[i, w + 4], ws[i, w + 5]
        uk = ws[i, W_UU + DOF_WIDTH * k]
        for j in range(k):
            lkj = ws[i, W_DLDL + DOF_WIDTH * k + j]
            wj = W_U + DOF_WIDTH * j
            w0, w1, w2 = w0 - lkj * ws[i, wj], w1 - lkj * ws[i, wj + 1], w2 - lkj * ws[i, wj + 2]
            w3, w4, w5 = w3 - lkj * ws[i, wj + 3], w4 - lkj * ws[i, wj + 4], w5 - lkj * ws[i, wj + 5]
            uk -= lkj * ws[i, W_UU + DOF_WIDTH * j]
        ws[i, w], ws[i, w + 1], ws[i, w + 2], ws[i, w + 3], ws[i, w + 4], ws[i, w + 5] = w0, w1, w2, w3, w4, w5
        ws[i, W_UU + DOF_WIDTH * k] = uk
    return True


@njit(cache=True, forceinline=True)
def _articulated_for_parent(mi, ws, i):
    """Ia_i = IA_i - U_i D_i^-1 U_i^T and pa_i = pA_i + Ia_i c_i + U_i D_i^-1 u_i, in place (RBDA Table 7.1),
    as the rank-one updates sum_k w_k (w_k^T, u~_k) / delta_k of the factored D_i."""
    for k in range(mi[i, MI_NV]):
        b = DOF_WIDTH * k
        w = W_U + b
        w0, w1, w2, w3, w4, w5 = ws[i, w], ws[i, w + 1], ws[i, w + 2], ws[i, w + 3], ws[i, w + 4], ws[i, w + 5]
        inv_delta = ws[i, W_DLDL + b + k]
        u = ws[i, W_UU + b] * inv_delta
        for r in range(6):
            y = ws[i, w + r] * inv_delta
            o = W_IA + 6 * r
            ws[i, o] -= y * w0
            ws[i, o + 1] -= y * w1
            ws[i, o + 2] -= y * w2
            ws[i, o + 3] -= y * w3
            ws[i, o + 4] -= y * w4
            ws[i, o + 5] -= y * w5
            ws[i, W_PA + r] += ws[i, w + r] * u
    for r in range(6):
        ws[i, W_PA + r] += dot6(ws, i, W_IA + 6 * r, W_C)


@njit(cache=True, forceinline=True)
def _articulated_pass(mi, mf, ws, tau, extra):
    """Pass 2, leaves to root: the articulated inertias and bias wrenches (Shah, Saha & Dutt, 2012, eqs. A.8-A.9), with
    ``extra`` (None or nv values) added to the joint-space inertia like an armature.

    Returns False if some D_i is singular (a massless chain end or a singular
    Euler-angle configuration).
    """
    for i in range(mi.shape[0] - 1, -1, -1):
        _joint_force_columns(mi, ws, i, tau)
        _joint_inertia(mi, mf, ws, i, extra)
        if not _factor_joint_inertia(ws, i, mi[i, MI_NV]):
            return False
        p = mi[i, MI_PARENT]
        if p >= 0:
            _articulated_for_parent(mi, ws, i)
            shift_articulated(ws, i, p)
    return True


@njit(cache=True, forceinline=True)
def _acceleration_pass(mi, mf, ws, qdd):
    """Pass 3, root to leaves (eq. 30): a'_i = A_{i,p} t'_p + c_i, qdd_i = D_i^-1 (u_i - U_i^T a'_i),
    t'_i = a'_i + S_i qdd_i; the world accelerates at -g."""
    for i in range(mi.shape[0]):
        n = mi[i, MI_NV]
        iv = mi[i, MI_IV]
        bias = bias_twist_rate(mi, mf, ws, i, 1.0)
        a0, a1, a2, a3, a4, a5 = bias
        b, k = 0, 0
        while k < n:
            w = W_U + b
            qdd[iv + k] = (ws[i, W_UU + b] - (ws[i, w] * a0 + ws[i, w + 1] * a1 + ws[i, w + 2] * a2
                                              + ws[i, w + 3] * a3 + ws[i, w + 4] * a4 + ws[i, w + 5] * a5)
                           ) * ws[i, W_DLDL + b + k]
            b, k = b + DOF_WIDTH, k + 1
        for k in range(n - 2, -1, -1):
            x = qdd[iv + k]
            for j in range(k + 1, n):
                x -= ws[i, W_DLDL + DOF_WIDTH * j + k] * qdd[iv + j]
            qdd[iv + k] = x
        set_twist_rate(mi, ws, i, bias, qdd)


@njit(SIG_Q_V_A_OUT, **ENTRY_OPTIONS)
def aba(mi, mf, ws, q, v, tau, qdd):
    """Recursive O(n) forward dynamics by the articulated-module UDU^T decomposition.

    Featherstone's FDab (RBDA Table 7.1) as Shah, Saha & Dutt (2012) eqs. 28-30 and A.4-A.9
    with one link per module: pass 1 the twists and bias terms, pass 2 the
    backward recursion of the articulated inertia M^_i (A.8-A.9) with
    Psi^_i = M^_i S_i and I^_i = S_i^T Psi^_i (A.6-A.7), pass 3 the forward
    substitution of eq. 30. Returns a status code: ``SINGULAR`` if an
    articulated inertia is singular (a massless chain end or a singular
    Euler-angle configuration).
    """
    status = check_vectors(mi, q, v, tau, qdd)
    if status != OK:
        return status
    forward_kinematics(mi, mf, ws, q)
    _velocity_pass(mi, mf, ws, v)
    if not _articulated_pass(mi, mf, ws, tau, None):
        return SINGULAR
    _acceleration_pass(mi, mf, ws, qdd)
    return OK


@njit(SIG_Q_V_TAU_EXTRA_OUT, **ENTRY_OPTIONS)
def aba_with_inertia(mi, mf, ws, q, v, tau, extra, qdd):
    """:func:`aba` of ``(M(q) + diag(extra)) qdd = tau - h(q, v)``: ``extra`` (nv values >= 0) joins the
    joint-space inertia as an armature would, in the same O(n) passes.

    A linearly implicit step treats a joint damping ``B`` (diagonal, joint space) this way: with
    ``extra = c h B`` the step solves ``(M + c h B) a = f`` (Hairer & Wanner, Solving ODEs II, sec. IV.7;
    MuJoCo's implicit integrators add ``h B`` to M the same way). Status codes number
    q, v, tau, qdd 1-4 as :func:`aba`'s do, and ``extra`` 5 (its length; it is not checked for NaN)."""
    status = check_vectors(mi, q, v, tau, qdd)
    if status != OK:
        return status
    if extra.shape[0] != qdd.shape[0]:
        return WRONG_LENGTH + 5
    forward_kinematics(mi, mf, ws, q)
    _velocity_pass(mi, mf, ws, v)
    if not _articulated_pass(mi, mf, ws, tau, extra):
        return SINGULAR
    _acceleration_pass(mi, mf, ws, qdd)
    return OK


@njit(SIG_MAT_Q_V_TAU_OUT, **ENTRY_OPTIONS)
def forward_dynamics_cholesky(mi, mf, ws, M, q, v, tau, qdd):
    """O(n^3) reference forward dynamics: M(q) qdd = tau - h(q, v), by Cholesky.

    ``M`` is an nv x nv work matrix (overwritten by the factor). Returns a
    status code numbering q, v, tau, qdd as arguments 1-4.
    """
    status = check_vectors(mi, q, v, tau, qdd)
    if status != OK:
        return status
    nv = M.shape[0]
    for k in range(nv):
        qdd[k] = 0.0
    # h = ID(q, v, 0): rnea reads the zero acceleration in its forward pass before the backward
    # pass writes h, so qdd can serve as both.
    status = rnea(mi, mf, ws, q, v, qdd, qdd)
    if status != 0:
        return status
    for k in range(nv):
        qdd[k] = tau[k] - qdd[k]
    crba(mi, mf, ws, q, M)
    flat = M.reshape(nv * nv)
    if not cholesky_solve(flat, 0, nv, qdd, 0):
        return SINGULAR
    return OK
