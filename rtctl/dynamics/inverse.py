"""Inverse dynamics kernels: the recursive Newton-Euler algorithm and its under-actuated variant.

Shah, Saha & Dutt (2012) Fig. A.1 and eqs. 17-28 in the DeNOC notation of
:mod:`rtctl.dynamics.kinematics`; wrenches ``w_k = [n_k; f_k]`` are moments
about O_k and forces, world axes (eq. 19).
"""
from __future__ import annotations

from numba import njit

from ..model import MF_ARMATURE, MF_MASS, MI_IV, MI_NV, MI_PARENT
from .kinematics import bias_twist_rate, forward_kinematics, propagate_velocity, set_twist_rate
from .mass_matrix import composite_columns, refer_to_root
from .spatial import cholesky_solve, cross, rot_mul, sym_mul, ws_rot
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, OK, SIG_Q_V_A_OUT, SINGULAR, W_ACC, W_ALPHA, W_D, W_FEXT, W_I, W_O,
                        W_OMEGA, W_R, W_S, W_WRENCH, check_vectors)


@njit(cache=True, forceinline=True)
def velocity_product_wrench(mf, ws, i):
    """Omega M E t of body i (Shah, Saha & Dutt, 2012, eq. 19): [omega x I omega; m omega x (omega x d)] about O_i.

    The wrench a body needs at zero twist rate (Featherstone's v x* I v).
    """
    m = mf[i, MF_MASS]
    wx, wy, wz = ws[i, W_OMEGA], ws[i, W_OMEGA + 1], ws[i, W_OMEGA + 2]
    iwx, iwy, iwz = sym_mul(ws, i, W_I, wx, wy, wz)
    gx, gy, gz = cross(wx, wy, wz, iwx, iwy, iwz)
    sx, sy, sz = cross(wx, wy, wz, ws[i, W_D], ws[i, W_D + 1], ws[i, W_D + 2])
    cx, cy, cz = cross(wx, wy, wz, sx, sy, sz)
    return gx, gy, gz, m * cx, m * cy, m * cz


@njit(cache=True, forceinline=True)
def _body_wrench(mf, ws, i):
    """Newton-Euler wrench of body i about O_i, eqs. 17-19: M t' + Omega M E t - w_ext."""
    m = mf[i, MF_MASS]
    alx, aly, alz = ws[i, W_ALPHA], ws[i, W_ALPHA + 1], ws[i, W_ALPHA + 2]
    acx, acy, acz = ws[i, W_ACC], ws[i, W_ACC + 1], ws[i, W_ACC + 2]
    dx, dy, dz = ws[i, W_D], ws[i, W_D + 1], ws[i, W_D + 2]
    bnx, bny, bnz, bfx, bfy, bfz = velocity_product_wrench(mf, ws, i)
    iax, iay, iaz = sym_mul(ws, i, W_I, alx, aly, alz)
    hx, hy, hz = cross(dx, dy, dz, acx, acy, acz)
    ws[i, W_WRENCH] = iax + m * hx + bnx - ws[i, W_FEXT]
    ws[i, W_WRENCH + 1] = iay + m * hy + bny - ws[i, W_FEXT + 1]
    ws[i, W_WRENCH + 2] = iaz + m * hz + bnz - ws[i, W_FEXT + 2]
    px, py, pz = cross(alx, aly, alz, dx, dy, dz)
    ws[i, W_WRENCH + 3] = m * (acx + px) + bfx - ws[i, W_FEXT + 3]
    ws[i, W_WRENCH + 4] = m * (acy + py) + bfy - ws[i, W_FEXT + 4]
    ws[i, W_WRENCH + 5] = m * (acz + pz) + bfz - ws[i, W_FEXT + 5]


@njit(cache=True, forceinline=True)
def _project_and_propagate(mi, mf, ws, i, a, out):
    """tau_i = S_i^T w_i + armature a_i, then w_parent += A_{i,p}^T w_i (moment shifted from O_i to O_p).

    Each a[k] is read before out[k] is written, so ``a`` and ``out`` may alias.
    """
    nx, ny, nz = ws[i, W_WRENCH], ws[i, W_WRENCH + 1], ws[i, W_WRENCH + 2]
    fx, fy, fz = ws[i, W_WRENCH + 3], ws[i, W_WRENCH + 4], ws[i, W_WRENCH + 5]
    rotor = mf[i, MF_ARMATURE]
    iv = mi[i, MI_IV]
    for k in range(iv, iv + mi[i, MI_NV]):
        o = W_S + DOF_WIDTH * (k - iv)
        out[k] = (ws[i, o] * nx + ws[i, o + 1] * ny + ws[i, o + 2] * nz + ws[i, o + 3] * fx
                  + ws[i, o + 4] * fy + ws[i, o + 5] * fz + rotor * a[k])
    p = mi[i, MI_PARENT]
    if p >= 0:
        rx, ry, rz = ws[i, W_O] - ws[p, W_O], ws[i, W_O + 1] - ws[p, W_O + 1], ws[i, W_O + 2] - ws[p, W_O + 2]
        mx, my, mz = cross(rx, ry, rz, fx, fy, fz)
        ws[p, W_WRENCH] += nx + mx
        ws[p, W_WRENCH + 1] += ny + my
        ws[p, W_WRENCH + 2] += nz + mz
        ws[p, W_WRENCH + 3] += fx
        ws[p, W_WRENCH + 4] += fy
        ws[p, W_WRENCH + 5] += fz


@njit(SIG_Q_V_A_OUT, **ENTRY_OPTIONS)
def rnea(mi, mf, ws, q, v, a, tau):
    """Recursive inverse dynamics, Shah, Saha & Dutt (2012) Fig. A.1: tau = M(q) a + h(q, v) - J^T w_ext.

    Step 1 (forward): twists and twist rates, eq. 1 and its derivative, with
    gravity as a base acceleration; body wrenches w = M t' + Omega M E t
    (eqs. 17-19). Step 2 (backward): w_p += A^T w_i and tau_i = S_i^T w_i,
    i.e. tau = N_d^T N_l^T w (eqs. 22-24, 28). External wrenches come from
    ``ws[:, W_FEXT]``. ``a`` and ``tau`` may be the same array. Returns a
    status code (``OK`` = 0).
    """
    status = check_vectors(mi, q, v, a, tau)
    if status != OK:
        return status
    forward_kinematics(mi, mf, ws, q)
    nb = mi.shape[0]
    for i in range(nb):  # kinematics(..., gravity_scale=1) and the body wrenches in one pass over the tree
        propagate_velocity(mi, ws, i, v)
        set_twist_rate(mi, ws, i, bias_twist_rate(mi, mf, ws, i, 1.0), a)
        _body_wrench(mf, ws, i)
    for i in range(nb - 1, -1, -1):
        _project_and_propagate(mi, mf, ws, i, a, tau)
    return OK


@njit(**ENTRY_OPTIONS)
def floating_base_rnea(mi, mf, ws, base_block, q, v, a, acc, tau):
    """Under-actuated inverse dynamics, Shah, Saha & Dutt (2012) eqs. 26-27 (Fig. A.1 steps 1-3).

    The first ``n0 = base_block.shape[0]`` DOFs (the floating base: a
    free-flyer, the Euler-angle chain, or a planar base) are unactuated. Given
    the joint accelerations ``a[n0:]`` (``a[:n0]`` is ignored), find the base
    acceleration ``qdd_0 = -I_0^{-1} (I_{theta0}^T qdd_theta + h_0)`` and the
    joint forces ``tau_theta = I_{theta0} qdd_0 + I_theta qdd_theta + h_theta``.
    Both come from the recursive inverse dynamics: h~_0 is the base part of
    ID(q, v, [0; qdd_theta]), I_0 the base block of the GIM from the composite
    inertias (O(n), no full GIM), and tau = ID(q, v, [qdd_0; qdd_theta]).
    Writes the full acceleration to ``acc`` and the forces to ``tau`` (its
    base part, zero up to round-off, is set to exactly 0). Returns a status code.
    """
    n0 = base_block.shape[0]
    status = check_vectors(mi, q, v, a, tau)
    if status != OK:
        return status
    nv = acc.shape[0]
    for k in range(nv):
        acc[k] = a[k] if k >= n0 else 0.0
    rnea(mi, mf, ws, q, v, acc, tau)
    for i in range(mi.shape[0]):
        refer_to_root(mi, mf, ws, i, ws_rot(ws, i, W_R))  # poses from the rnea pass above
    for r in range(n0):
        for c in range(n0):
            base_block[r, c] = 0.0
    composite_columns(mi, mf, ws, base_block, n0)
    for k in range(n0):
        acc[k] = -tau[k]
    if not cholesky_solve(base_block.reshape(n0 * n0), 0, n0, acc, 0):
        return SINGULAR
    rnea(mi, mf, ws, q, v, acc, tau)
    for k in range(n0):
        tau[k] = 0.0
    return OK


@njit(cache=True)
def body_forces(mi, mf, ws, q, v, a, tau, out):
    """The spatial force across every joint: row i of ``out`` (nbodies, 6) is f_i, the force body i's parent
    exerts on it through joint i, ``[n; f]`` with the moment about O_i, world axes (Featherstone, RBDA 2008,
    sec. 5.3, eq. 5.10: f_i = f_i^B - f_i^x + sum over the children j of f_j, so tau_i = S_i^T f_i). The
    backward pass of :func:`rnea` leaves it in ``ws[i, W_WRENCH]``; the joint forces go to ``tau``. Returns
    rnea's status."""
    status = rnea(mi, mf, ws, q, v, a, tau)
    if status != OK:
        return status
    for i in range(mi.shape[0]):
        for k in range(6):
            out[i, k] = ws[i, W_WRENCH + k]
    return OK


@njit(cache=True)
def transmitted_wrench(mi, mf, ws, q, v, a, body, mount, tau, out):
    """The wrench ``[n; f]`` (6) that the distal side of a cut rigidly fixed in ``body`` -- the body and its
    subtree, with their external forces ``ws[:, W_FEXT]`` -- exerts on the proximal side, about the cut's point
    and in its axes: ``-f_body`` of :func:`body_forces` moved to the point ``O + R p`` and rotated into the
    axes ``R R_m`` (``mount``: R_m row-major, the cut's axes in the body frame, then p, its point in the body
    frame). At rest with a massless distal side it is the external wrench applied there: what a force-torque
    sensor between a flange and a tool reads. Returns rnea's status."""
    status = rnea(mi, mf, ws, q, v, a, tau)
    if status != OK:
        return status
    nx, ny, nz = -ws[body, W_WRENCH], -ws[body, W_WRENCH + 1], -ws[body, W_WRENCH + 2]
    fx, fy, fz = -ws[body, W_WRENCH + 3], -ws[body, W_WRENCH + 4], -ws[body, W_WRENCH + 5]
    rx, ry, rz = rot_mul(ws, body, W_R, mount[9], mount[10], mount[11])   # O -> P, world axes
    mx, my, mz = cross(rx, ry, rz, fx, fy, fz)
    nx, ny, nz = nx - mx, ny - my, nz - mz                                 # n_P = n_O + (O - P) x f
    for k in range(3):   # sensor axis k in world: R (column k of R_m); the component is its dot product
        ax, ay, az = rot_mul(ws, body, W_R, mount[k], mount[3 + k], mount[6 + k])
        out[k] = ax * nx + ay * ny + az * nz
        out[3 + k] = ax * fx + ay * fy + az * fz
    return OK
