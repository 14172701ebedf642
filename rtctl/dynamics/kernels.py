"""Numba kernels of the recursive dynamics (module-DeNOC form, seed 004).

Every kernel takes the packed model (``mi`` integer rows, ``mf`` float rows,
gravity in ``mf[nbodies, 0:3]``), the workspace ``ws`` (one float row per body
plus one scratch row) and plain vectors; none of them allocates. Quantities
are expressed as in the paper: the twist ``t_k = [omega_k; odot_k]`` of body k
is its angular velocity and the velocity of its origin ``O_k``, both in world
axes (eq. 1), wrenches ``w_k = [n_k; f_k]`` are moments about ``O_k`` and
forces (eq. 19), and ``A_{k,j}`` shifts a twist from ``O_j`` to ``O_k``
(eq. 2). Kernels that take user vectors first check them and return a status
code (0 = ok, k = the k-th vector argument is not finite) instead of raising,
so they can be called from other compiled code.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..model import (FREE_FLYER, MF_ARMATURE, MF_AXIS, MF_COM, MF_INERTIA, MF_MASS, MF_ROT, MF_TRANS, MI_IQ, MI_IV,
                     MI_PARENT, MI_TYPE, PRISMATIC, REVOLUTE)

# Workspace columns (per body row).
W_R = 0        # 9: world rotation of the body frame, row-major
W_O = 9        # 3: world position of the body origin O_k
W_E = 12       # 3: joint axis in world axes (e_k)
W_D = 15       # 3: centre-of-mass offset from O_k, world axes (d_k)
W_I = 18       # 6: rotational inertia about O_k, world axes (xx yy zz xy xz yz)
W_OMEGA = 24   # 3: angular velocity
W_VEL = 27     # 3: velocity of O_k
W_ALPHA = 30   # 3: angular acceleration
W_ACC = 33     # 3: acceleration of O_k
W_WRENCH = 36  # 6: [n; f] about O_k (composite, after the backward pass)
W_FEXT = 42    # 6: external wrench on the body [n; f] about O_k, world axes
W_IA = 48      # 36: articulated (or composite) 6x6 inertia about O_k, row-major
W_PA = 84      # 6: articulated bias wrench
W_C = 90       # 6: velocity-product acceleration c_k
W_U = 96       # 6: U_k = IA_k p_k
W_DD = 102     # 1: D_k = p_k^T U_k
W_UU = 103     # 1: u_k = tau_k - p_k^T pA_k
W_CM = 104     # 1: composite mass
W_CH = 105     # 3: composite first moment about O_k
W_CI = 108     # 6: composite rotational inertia about O_k
WS_WIDTH = 114
# The scratch row (index nbodies) holds a 6x6 matrix at 0 and a 6-vector at 36 (ABA's root
# solve), the 3x3 temporaries of the articulated-inertia shift at 0..26, and one 3x3 of
# forward kinematics here:
W_SCRATCH_ROT = 90

# Status codes returned by the entry kernels.
OK = 0
NOT_FINITE = 0    # + k: the k-th vector argument (1-based, after the workspace) has NaN or inf
WRONG_LENGTH = 10  # + k: the k-th vector argument has the wrong length
SINGULAR = 20     # an articulated inertia or the mass matrix is not positive definite

# Explicit signatures: numba rejects wrong dtypes or ranks with TypeError instead of compiling a variant.
_M = "int64[:, ::1], float64[:, ::1], float64[:, ::1]"
SIG_Q_V_A_OUT = f"int64({_M}, float64[::1], float64[::1], float64[::1], float64[::1])"
SIG_Q_MAT = f"int64({_M}, float64[::1], float64[:, ::1])"
SIG_MAT_Q_V_TAU_OUT = f"int64({_M}, float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1])"


@njit(cache=True)
def all_finite(x):
    for k in range(x.shape[0]):
        if not np.isfinite(x[k]):
            return False
    return True


@njit(cache=True)
def model_sizes(mi):
    """(nq, nv) of a packed model."""
    last = mi.shape[0] - 1
    ff = mi[last, MI_TYPE] == FREE_FLYER
    return mi[last, MI_IQ] + (7 if ff else 1), mi[last, MI_IV] + (6 if ff else 1)


@njit(cache=True)
def check_vectors(mi, q, v, a, out):
    """Status of the usual (q, v, a-or-tau, out) arguments: lengths first, then finiteness."""
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if v.shape[0] != nv:
        return WRONG_LENGTH + 2
    if a.shape[0] != nv:
        return WRONG_LENGTH + 3
    if out.shape[0] != nv:
        return WRONG_LENGTH + 4
    if not all_finite(q):
        return NOT_FINITE + 1
    if not all_finite(v):
        return NOT_FINITE + 2
    if not all_finite(a):
        return NOT_FINITE + 3
    return OK


@njit(cache=True)
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True)
def _sym_mul(s, o, x, y, z):
    """(symmetric 3x3 stored as xx yy zz xy xz yz at s[o:o+6]) @ (x, y, z)."""
    return (s[o] * x + s[o + 3] * y + s[o + 4] * z,
            s[o + 3] * x + s[o + 1] * y + s[o + 5] * z,
            s[o + 4] * x + s[o + 5] * y + s[o + 2] * z)


@njit(cache=True)
def _rot_mul(r, o, x, y, z):
    """(row-major 3x3 at r[o:o+9]) @ (x, y, z)."""
    return (r[o] * x + r[o + 1] * y + r[o + 2] * z,
            r[o + 3] * x + r[o + 4] * y + r[o + 5] * z,
            r[o + 6] * x + r[o + 7] * y + r[o + 8] * z)


@njit(cache=True)
def _rot_tmul(r, o, x, y, z):
    """(row-major 3x3 at r[o:o+9])^T @ (x, y, z)."""
    return (r[o] * x + r[o + 3] * y + r[o + 6] * z,
            r[o + 1] * x + r[o + 4] * y + r[o + 7] * z,
            r[o + 2] * x + r[o + 5] * y + r[o + 8] * z)


@njit(cache=True)
def forward_kinematics(mi, mf, ws, q):
    """Body poses R_k, O_k, world joint axes e_k, d_k and inertias about O_k in world axes."""
    nb = mi.shape[0]
    l = ws[nb, W_SCRATCH_ROT:W_SCRATCH_ROT + 9]  # noqa: E741  (a 3x3 temporary in the scratch row)
    for i in range(nb):
        p = mi[i, MI_PARENT]
        jt = mi[i, MI_TYPE]
        iq = mi[i, MI_IQ]
        wi = ws[i]
        m = mf[i]
        if jt == FREE_FLYER:
            x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
            wi[W_R + 0] = 1 - 2 * (y * y + z * z)
            wi[W_R + 1] = 2 * (x * y - z * w)
            wi[W_R + 2] = 2 * (x * z + y * w)
            wi[W_R + 3] = 2 * (x * y + z * w)
            wi[W_R + 4] = 1 - 2 * (x * x + z * z)
            wi[W_R + 5] = 2 * (y * z - x * w)
            wi[W_R + 6] = 2 * (x * z - y * w)
            wi[W_R + 7] = 2 * (y * z + x * w)
            wi[W_R + 8] = 1 - 2 * (x * x + y * y)
            wi[W_O] = q[iq]
            wi[W_O + 1] = q[iq + 1]
            wi[W_O + 2] = q[iq + 2]
        else:
            ax, ay, az = m[MF_AXIS], m[MF_AXIS + 1], m[MF_AXIS + 2]
            tx, ty, tz = m[MF_TRANS], m[MF_TRANS + 1], m[MF_TRANS + 2]
            if jt == REVOLUTE:
                # l = X_tree rotation @ Rodrigues(axis, theta)
                th = q[iq]
                c, s = np.cos(th), np.sin(th)
                v = 1.0 - c
                j0, j1, j2 = c + ax * ax * v, ax * ay * v - az * s, ax * az * v + ay * s
                j3, j4, j5 = ay * ax * v + az * s, c + ay * ay * v, ay * az * v - ax * s
                j6, j7, j8 = az * ax * v - ay * s, az * ay * v + ax * s, c + az * az * v
                for r in range(3):
                    a0, a1, a2 = m[MF_ROT + 3 * r], m[MF_ROT + 3 * r + 1], m[MF_ROT + 3 * r + 2]
                    l[3 * r] = a0 * j0 + a1 * j3 + a2 * j6
                    l[3 * r + 1] = a0 * j1 + a1 * j4 + a2 * j7
                    l[3 * r + 2] = a0 * j2 + a1 * j5 + a2 * j8
            else:
                for k in range(9):
                    l[k] = m[MF_ROT + k]
                th = q[iq]
                dx, dy, dz = _rot_mul(m, MF_ROT, ax, ay, az)
                tx += dx * th
                ty += dy * th
                tz += dz * th
            if p < 0:
                for k in range(9):
                    wi[W_R + k] = l[k]
                wi[W_O], wi[W_O + 1], wi[W_O + 2] = tx, ty, tz
            else:
                wp = ws[p]
                for r in range(3):
                    a0, a1, a2 = wp[W_R + 3 * r], wp[W_R + 3 * r + 1], wp[W_R + 3 * r + 2]
                    wi[W_R + 3 * r] = a0 * l[0] + a1 * l[3] + a2 * l[6]
                    wi[W_R + 3 * r + 1] = a0 * l[1] + a1 * l[4] + a2 * l[7]
                    wi[W_R + 3 * r + 2] = a0 * l[2] + a1 * l[5] + a2 * l[8]
                ox, oy, oz = _rot_mul(wp, W_R, tx, ty, tz)
                wi[W_O], wi[W_O + 1], wi[W_O + 2] = wp[W_O] + ox, wp[W_O + 1] + oy, wp[W_O + 2] + oz
            wi[W_E], wi[W_E + 1], wi[W_E + 2] = _rot_mul(wi, W_R, ax, ay, az)
        wi[W_D], wi[W_D + 1], wi[W_D + 2] = _rot_mul(wi, W_R, m[MF_COM], m[MF_COM + 1], m[MF_COM + 2])
        # I_world = R I_body R^T
        for r in range(3):
            b0, b1, b2 = _sym_mul(m, MF_INERTIA, wi[W_R + 3 * r], wi[W_R + 3 * r + 1], wi[W_R + 3 * r + 2])
            l[3 * r], l[3 * r + 1], l[3 * r + 2] = b0, b1, b2  # row r of R I (I symmetric)
        wi[W_I + 0] = l[0] * wi[W_R + 0] + l[1] * wi[W_R + 1] + l[2] * wi[W_R + 2]
        wi[W_I + 1] = l[3] * wi[W_R + 3] + l[4] * wi[W_R + 4] + l[5] * wi[W_R + 5]
        wi[W_I + 2] = l[6] * wi[W_R + 6] + l[7] * wi[W_R + 7] + l[8] * wi[W_R + 8]
        wi[W_I + 3] = l[0] * wi[W_R + 3] + l[1] * wi[W_R + 4] + l[2] * wi[W_R + 5]
        wi[W_I + 4] = l[0] * wi[W_R + 6] + l[1] * wi[W_R + 7] + l[2] * wi[W_R + 8]
        wi[W_I + 5] = l[3] * wi[W_R + 6] + l[4] * wi[W_R + 7] + l[5] * wi[W_R + 8]


@njit(cache=True)
def kinematics(mi, mf, ws, q, v, a, gravity_scale):
    """FK plus the twist (eq. 1) and twist-rate recursions over the tree.

    The world's twist rate is ``[0; -gravity_scale * g]``, so with
    ``gravity_scale = 1`` the accelerations carry gravity as a fictitious
    upward acceleration of the base (used by inverse dynamics).
    """
    forward_kinematics(mi, mf, ws, q)
    nb = mi.shape[0]
    g = mf[nb]
    for i in range(nb):
        p = mi[i, MI_PARENT]
        jt = mi[i, MI_TYPE]
        iv = mi[i, MI_IV]
        wi = ws[i]
        if jt == FREE_FLYER:
            vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
            bx, by, bz = v[iv + 3], v[iv + 4], v[iv + 5]
            wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = _rot_mul(wi, W_R, bx, by, bz)
            wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = _rot_mul(wi, W_R, vx, vy, vz)
            wi[W_ALPHA], wi[W_ALPHA + 1], wi[W_ALPHA + 2] = _rot_mul(wi, W_R, a[iv + 3], a[iv + 4], a[iv + 5])
            cx, cy, cz = _cross(bx, by, bz, vx, vy, vz)
            ax, ay, az = _rot_mul(wi, W_R, a[iv] + cx, a[iv + 1] + cy, a[iv + 2] + cz)
            wi[W_ACC] = ax - gravity_scale * g[0]
            wi[W_ACC + 1] = ay - gravity_scale * g[1]
            wi[W_ACC + 2] = az - gravity_scale * g[2]
            continue
        if p < 0:
            wx = wy = wz = 0.0
            ux = uy = uz = 0.0
            alx = aly = alz = 0.0
            acx, acy, acz = -gravity_scale * g[0], -gravity_scale * g[1], -gravity_scale * g[2]
            rx = ry = rz = 0.0
        else:
            wp = ws[p]
            wx, wy, wz = wp[W_OMEGA], wp[W_OMEGA + 1], wp[W_OMEGA + 2]
            ux, uy, uz = wp[W_VEL], wp[W_VEL + 1], wp[W_VEL + 2]
            alx, aly, alz = wp[W_ALPHA], wp[W_ALPHA + 1], wp[W_ALPHA + 2]
            acx, acy, acz = wp[W_ACC], wp[W_ACC + 1], wp[W_ACC + 2]
            rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
        ex, ey, ez = wi[W_E], wi[W_E + 1], wi[W_E + 2]
        qd, qdd = v[iv], a[iv]
        # Shift the parent's twist and twist rate to O_i: A_{i,p} t_p and its time derivative.
        sx, sy, sz = _cross(wx, wy, wz, rx, ry, rz)
        ux, uy, uz = ux + sx, uy + sy, uz + sz
        tx, ty, tz = _cross(alx, aly, alz, rx, ry, rz)
        cx, cy, cz = _cross(wx, wy, wz, sx, sy, sz)
        acx, acy, acz = acx + tx + cx, acy + ty + cy, acz + tz + cz
        kx, ky, kz = _cross(wx, wy, wz, ex, ey, ez)
        if jt == REVOLUTE:
            wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = wx + ex * qd, wy + ey * qd, wz + ez * qd
            wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = ux, uy, uz
            wi[W_ALPHA] = alx + ex * qdd + kx * qd
            wi[W_ALPHA + 1] = aly + ey * qdd + ky * qd
            wi[W_ALPHA + 2] = alz + ez * qdd + kz * qd
            wi[W_ACC], wi[W_ACC + 1], wi[W_ACC + 2] = acx, acy, acz
        else:
            wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = wx, wy, wz
            wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = ux + ex * qd, uy + ey * qd, uz + ez * qd
            wi[W_ALPHA], wi[W_ALPHA + 1], wi[W_ALPHA + 2] = alx, aly, alz
            wi[W_ACC] = acx + 2 * kx * qd + ex * qdd
            wi[W_ACC + 1] = acy + 2 * ky * qd + ey * qdd
            wi[W_ACC + 2] = acz + 2 * kz * qd + ez * qdd


@njit(cache=True)
def _body_wrench(mf, ws, i):
    """Newton-Euler wrench of body i about O_i, eqs. 17-19: M t' + Omega M E t - w_ext."""
    wi = ws[i]
    m = mf[i, MF_MASS]
    wx, wy, wz = wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2]
    alx, aly, alz = wi[W_ALPHA], wi[W_ALPHA + 1], wi[W_ALPHA + 2]
    acx, acy, acz = wi[W_ACC], wi[W_ACC + 1], wi[W_ACC + 2]
    dx, dy, dz = wi[W_D], wi[W_D + 1], wi[W_D + 2]
    iwx, iwy, iwz = _sym_mul(wi, W_I, wx, wy, wz)
    iax, iay, iaz = _sym_mul(wi, W_I, alx, aly, alz)
    gx, gy, gz = _cross(wx, wy, wz, iwx, iwy, iwz)
    hx, hy, hz = _cross(dx, dy, dz, acx, acy, acz)
    wi[W_WRENCH] = iax + gx + m * hx - wi[W_FEXT]
    wi[W_WRENCH + 1] = iay + gy + m * hy - wi[W_FEXT + 1]
    wi[W_WRENCH + 2] = iaz + gz + m * hz - wi[W_FEXT + 2]
    px, py, pz = _cross(alx, aly, alz, dx, dy, dz)
    sx, sy, sz = _cross(wx, wy, wz, dx, dy, dz)
    cx, cy, cz = _cross(wx, wy, wz, sx, sy, sz)
    wi[W_WRENCH + 3] = m * (acx + px + cx) - wi[W_FEXT + 3]
    wi[W_WRENCH + 4] = m * (acy + py + cy) - wi[W_FEXT + 4]
    wi[W_WRENCH + 5] = m * (acz + pz + cz) - wi[W_FEXT + 5]


@njit(cache=True)
def _project_and_propagate(mi, ws, i, out):
    """tau_i = p_i^T w_i, then w_parent += A_{i,p}^T w_i (moment shifted from O_i to O_p)."""
    wi = ws[i]
    jt = mi[i, MI_TYPE]
    iv = mi[i, MI_IV]
    nx, ny, nz = wi[W_WRENCH], wi[W_WRENCH + 1], wi[W_WRENCH + 2]
    fx, fy, fz = wi[W_WRENCH + 3], wi[W_WRENCH + 4], wi[W_WRENCH + 5]
    if jt == REVOLUTE:
        out[iv] = wi[W_E] * nx + wi[W_E + 1] * ny + wi[W_E + 2] * nz
    elif jt == PRISMATIC:
        out[iv] = wi[W_E] * fx + wi[W_E + 1] * fy + wi[W_E + 2] * fz
    else:
        out[iv], out[iv + 1], out[iv + 2] = _rot_tmul(wi, W_R, fx, fy, fz)
        out[iv + 3], out[iv + 4], out[iv + 5] = _rot_tmul(wi, W_R, nx, ny, nz)
    p = mi[i, MI_PARENT]
    if p >= 0:
        wp = ws[p]
        rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
        mx, my, mz = _cross(rx, ry, rz, fx, fy, fz)
        wp[W_WRENCH] += nx + mx
        wp[W_WRENCH + 1] += ny + my
        wp[W_WRENCH + 2] += nz + mz
        wp[W_WRENCH + 3] += fx
        wp[W_WRENCH + 4] += fy
        wp[W_WRENCH + 5] += fz


@njit(SIG_Q_V_A_OUT, cache=True)
def rnea(mi, mf, ws, q, v, a, tau):
    """Recursive inverse dynamics, seed 004 Fig. A.1: tau = M(q) a + h(q, v) - J^T w_ext.

    Step 1 (forward): twists and twist rates, eq. 1 and its derivative, with
    gravity as a base acceleration; body wrenches w = M t' + Omega M E t
    (eqs. 17-19). Step 2 (backward): w_p += A^T w_i and tau_i = p_i^T w_i,
    i.e. tau = N_d^T N_l^T w (eqs. 22-24, 28). External wrenches come from
    ``ws[:, W_FEXT]``. Returns a status code (``OK`` = 0).
    """
    status = check_vectors(mi, q, v, a, tau)
    if status != OK:
        return status
    kinematics(mi, mf, ws, q, v, a, 1.0)
    nb = mi.shape[0]
    for i in range(nb):
        _body_wrench(mf, ws, i)
    for i in range(nb - 1, -1, -1):
        iv = mi[i, MI_IV]
        # Reflected rotor inertia; a[iv] is read before tau[iv] is written, so a and tau may alias.
        rotor = mf[i, MF_ARMATURE] * a[iv] if mi[i, MI_TYPE] != FREE_FLYER else 0.0
        _project_and_propagate(mi, ws, i, tau)
        if mi[i, MI_TYPE] != FREE_FLYER:
            tau[iv] += rotor
    return OK


@njit(cache=True)
def _motion_column(mi, ws, i, k):
    """Column k of the motion-propagation matrix p_i (eq. 2) in world axes: (ang, lin)."""
    wi = ws[i]
    jt = mi[i, MI_TYPE]
    if jt == REVOLUTE:
        return wi[W_E], wi[W_E + 1], wi[W_E + 2], 0.0, 0.0, 0.0
    if jt == PRISMATIC:
        return 0.0, 0.0, 0.0, wi[W_E], wi[W_E + 1], wi[W_E + 2]
    # Free flyer, v = [v_lin; omega] in body axes: columns of R under the linear or the angular part.
    if k < 3:
        return 0.0, 0.0, 0.0, wi[W_R + k], wi[W_R + 3 + k], wi[W_R + 6 + k]
    k -= 3
    return wi[W_R + k], wi[W_R + 3 + k], wi[W_R + 6 + k], 0.0, 0.0, 0.0


@njit(cache=True)
def _joint_nv(mi, i):
    return 6 if mi[i, MI_TYPE] == FREE_FLYER else 1


@njit(cache=True)
def _composite_inertias(mi, mf, ws):
    """Composite-module inertias about each O_i (eq. A.3): mass, first moment, rotational inertia."""
    nb = mi.shape[0]
    for i in range(nb):
        wi = ws[i]
        m = mf[i, MF_MASS]
        wi[W_CM] = m
        for k in range(3):
            wi[W_CH + k] = m * wi[W_D + k]
        for k in range(6):
            wi[W_CI + k] = wi[W_I + k]
    for i in range(nb - 1, -1, -1):
        p = mi[i, MI_PARENT]
        if p < 0:
            continue
        wi, wp = ws[i], ws[p]
        m = wi[W_CM]
        hx, hy, hz = wi[W_CH], wi[W_CH + 1], wi[W_CH + 2]
        rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
        # I_P = I_O + 2 (r.h) 1 - h r^T - r h^T + m (|r|^2 1 - r r^T)
        rh = rx * hx + ry * hy + rz * hz
        rr = rx * rx + ry * ry + rz * rz
        wp[W_CI + 0] += wi[W_CI + 0] + 2 * rh - 2 * hx * rx + m * (rr - rx * rx)
        wp[W_CI + 1] += wi[W_CI + 1] + 2 * rh - 2 * hy * ry + m * (rr - ry * ry)
        wp[W_CI + 2] += wi[W_CI + 2] + 2 * rh - 2 * hz * rz + m * (rr - rz * rz)
        wp[W_CI + 3] += wi[W_CI + 3] - hx * ry - rx * hy - m * rx * ry
        wp[W_CI + 4] += wi[W_CI + 4] - hx * rz - rx * hz - m * rx * rz
        wp[W_CI + 5] += wi[W_CI + 5] - hy * rz - ry * hz - m * ry * rz
        wp[W_CM] += m
        wp[W_CH] += hx + m * rx
        wp[W_CH + 1] += hy + m * ry
        wp[W_CH + 2] += hz + m * rz


@njit(cache=True)
def _inertia_columns(mi, mf, ws, M, n_dof):
    """Fill the GIM entries I^{i,j} = p_j^T A^T M~_i p_i (eq. A.2) of the DOFs below ``n_dof``.

    Ancestors have smaller DOF indices, so a column below n_dof only touches rows below it.
    """
    nb = mi.shape[0]
    for i in range(nb):
        iv = mi[i, MI_IV]
        if iv >= n_dof:
            break
        wi = ws[i]
        m = wi[W_CM]
        hx, hy, hz = wi[W_CH], wi[W_CH + 1], wi[W_CH + 2]
        for k in range(_joint_nv(mi, i)):
            ex, ey, ez, lx, ly, lz = _motion_column(mi, ws, i, k)
            # F = M~_i p (eq. 19 form with m d -> h): [I e + h x l; m l - h x e]
            ix, iy, iz = _sym_mul(wi, W_CI, ex, ey, ez)
            ax_, ay_, az_ = _cross(hx, hy, hz, lx, ly, lz)
            bx, by, bz = _cross(hx, hy, hz, ex, ey, ez)
            nx, ny, nz = ix + ax_, iy + ay_, iz + az_
            fx, fy, fz = m * lx - bx, m * ly - by, m * lz - bz
            col = iv + k
            j = i
            while j >= 0:
                jv = mi[j, MI_IV]
                for kk in range(_joint_nv(mi, j)):
                    px, py, pz, sx, sy, sz = _motion_column(mi, ws, j, kk)
                    val = px * nx + py * ny + pz * nz + sx * fx + sy * fy + sz * fz
                    M[jv + kk, col] = val
                    M[col, jv + kk] = val
                pj = mi[j, MI_PARENT]
                if pj >= 0:
                    rx = ws[j, W_O] - ws[pj, W_O]
                    ry = ws[j, W_O + 1] - ws[pj, W_O + 1]
                    rz = ws[j, W_O + 2] - ws[pj, W_O + 2]
                    mx, my, mz = _cross(rx, ry, rz, fx, fy, fz)
                    nx, ny, nz = nx + mx, ny + my, nz + mz
                j = pj
        if mi[i, MI_TYPE] != FREE_FLYER:
            M[iv, iv] += mf[i, MF_ARMATURE]


@njit(SIG_Q_MAT, cache=True)
def crba(mi, mf, ws, q, M):
    """Generalized inertia matrix by composite modules, seed 004 eqs. A.2-A.3.

    M~_i = M_i + sum_children A^T M~_j A (composite inertia about O_i, kept as
    mass, first moment and rotational inertia), and
    I^{i,j} = p_j^T A_{i,j}^T M~_i p_i for j an ancestor of i.
    Returns a status code (``OK`` = 0).
    """
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if M.shape[0] != nv or M.shape[1] != nv:
        return WRONG_LENGTH + 2
    if not all_finite(q):
        return NOT_FINITE + 1
    forward_kinematics(mi, mf, ws, q)
    for r in range(nv):
        for c in range(nv):
            M[r, c] = 0.0  # entries of bodies on different branches stay zero (eq. A.2)
    _composite_inertias(mi, mf, ws)
    _inertia_columns(mi, mf, ws, M, nv)
    return OK


@njit(cache=True)
def floating_base_rnea(mi, mf, ws, base_block, q, v, a, acc, tau):
    """Under-actuated inverse dynamics, seed 004 eqs. 26-27 (Fig. A.1 steps 1-3).

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
    _composite_inertias(mi, mf, ws)  # poses from the rnea pass above
    for r in range(n0):
        for c in range(n0):
            base_block[r, c] = 0.0
    _inertia_columns(mi, mf, ws, base_block, n0)
    for k in range(n0):
        acc[k] = -tau[k]
    if not _cholesky_solve(base_block.reshape(n0 * n0), 0, n0, acc, 0):
        return SINGULAR
    rnea(mi, mf, ws, q, v, acc, tau)
    for k in range(n0):
        tau[k] = 0.0
    return OK


@njit(cache=True)
def _spatial_inertia(mf, ws, i):
    """IA_i <- M_i of eq. 19: [[I, m d~], [-m d~, m 1]] about O_i, world axes."""
    wi = ws[i]
    m = mf[i, MF_MASS]
    dx, dy, dz = m * wi[W_D], m * wi[W_D + 1], m * wi[W_D + 2]
    ia = W_IA
    sym = (W_I + 0, W_I + 3, W_I + 4, W_I + 3, W_I + 1, W_I + 5, W_I + 4, W_I + 5, W_I + 2)
    for r in range(3):
        for c in range(3):
            wi[ia + 6 * r + c] = wi[sym[3 * r + c]]
            wi[ia + 6 * (r + 3) + c + 3] = m if r == c else 0.0
    # upper-right m d~ and lower-left -m d~ = (m d~)^T
    skew = (0.0, -dz, dy, dz, 0.0, -dx, -dy, dx, 0.0)
    for r in range(3):
        for c in range(3):
            wi[ia + 6 * r + c + 3] = skew[3 * r + c]
            wi[ia + 6 * (c + 3) + r] = skew[3 * r + c]


@njit(cache=True)
def _shift_articulated(wi, wp, scratch):
    """IA_p += A^T Ia A and pA_p += A^T pa, A = [[1, 0], [X, 1]], X = -r~, r = O_i - O_p.

    ``wi[W_IA]``/``wi[W_PA]`` hold Ia = IA - U U^T / D and pa on entry.
    """
    rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
    x = scratch  # X stored row-major in scratch[0:9], then T = A12 X at 9:18, Y = A22 X at 18:27
    x[0], x[1], x[2] = 0.0, rz, -ry
    x[3], x[4], x[5] = -rz, 0.0, rx
    x[6], x[7], x[8] = ry, -rx, 0.0
    ia = W_IA
    for r in range(3):
        for c in range(3):
            t = 0.0
            y = 0.0
            for k in range(3):
                t += wi[ia + 6 * r + 3 + k] * x[3 * k + c]
                y += wi[ia + 6 * (r + 3) + 3 + k] * x[3 * k + c]
            x[9 + 3 * r + c] = t
            x[18 + 3 * r + c] = y
    # A11' = A11 + T + T^T + X^T Y ; A12' = A12 + X^T A22 ; A22' = A22
    for r in range(3):
        for c in range(3):
            xty = 0.0
            xta = 0.0
            for k in range(3):
                xty += x[3 * k + r] * x[18 + 3 * k + c]
                xta += x[3 * k + r] * wi[ia + 6 * (k + 3) + 3 + c]
            a11 = wi[ia + 6 * r + c] + x[9 + 3 * r + c] + x[9 + 3 * c + r] + xty
            a12 = wi[ia + 6 * r + 3 + c] + xta
            wp[ia + 6 * r + c] += a11
            wp[ia + 6 * r + 3 + c] += a12
            wp[ia + 6 * (c + 3) + r] += a12
            wp[ia + 6 * (r + 3) + 3 + c] += wi[ia + 6 * (r + 3) + 3 + c]
    fx, fy, fz = wi[W_PA + 3], wi[W_PA + 4], wi[W_PA + 5]
    mx, my, mz = _cross(rx, ry, rz, fx, fy, fz)
    wp[W_PA] += wi[W_PA] + mx
    wp[W_PA + 1] += wi[W_PA + 1] + my
    wp[W_PA + 2] += wi[W_PA + 2] + mz
    wp[W_PA + 3] += fx
    wp[W_PA + 4] += fy
    wp[W_PA + 5] += fz


@njit(cache=True)
def _cholesky_solve(a, o, n, b, ob):
    """Solve A x = b in place (x -> b) for SPD A stored row-major in a[o:o+n*n]; A is overwritten.

    Returns False if A is not positive definite.
    """
    for j in range(n):
        s = a[o + j * n + j]
        for k in range(j):
            s -= a[o + j * n + k] * a[o + j * n + k]
        if not s > 0.0:
            return False
        d = np.sqrt(s)
        a[o + j * n + j] = d
        for i in range(j + 1, n):
            s = a[o + i * n + j]
            for k in range(j):
                s -= a[o + i * n + k] * a[o + j * n + k]
            a[o + i * n + j] = s / d
    for i in range(n):
        s = b[ob + i]
        for k in range(i):
            s -= a[o + i * n + k] * b[ob + k]
        b[ob + i] = s / a[o + i * n + i]
    for i in range(n - 1, -1, -1):
        s = b[ob + i]
        for k in range(i + 1, n):
            s -= a[o + k * n + i] * b[ob + k]
        b[ob + i] = s / a[o + i * n + i]
    return True


@njit(SIG_Q_V_A_OUT, cache=True)
def aba(mi, mf, ws, q, v, tau, qdd):
    """Recursive O(n) forward dynamics by the articulated-module UDU^T decomposition.

    Seed 004 eqs. 28-30 and A.4-A.9 with one link per module: backward
    recursion of the articulated inertia M^_i (A.8-A.9), Psi^_i = M^_i p_i,
    I^_i = p_i^T Psi^_i (A.6-A.7), then the forward substitution of eq. 30.
    Returns a status code: ``SINGULAR`` if an articulated inertia is singular
    (a massless chain end or a singular Euler-angle configuration).
    """
    status = check_vectors(mi, q, v, tau, qdd)
    if status != OK:
        return status
    nb = mi.shape[0]
    g = mf[nb]
    scratch = ws[nb]
    forward_kinematics(mi, mf, ws, q)
    # Velocities and velocity-product accelerations c_i (twist rates with zero joint accelerations).
    for i in range(nb):
        p = mi[i, MI_PARENT]
        jt = mi[i, MI_TYPE]
        iv = mi[i, MI_IV]
        wi = ws[i]
        if jt == FREE_FLYER:
            vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
            bx, by, bz = v[iv + 3], v[iv + 4], v[iv + 5]
            wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = _rot_mul(wi, W_R, bx, by, bz)
            wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = _rot_mul(wi, W_R, vx, vy, vz)
            cx, cy, cz = _cross(bx, by, bz, vx, vy, vz)
            wi[W_C], wi[W_C + 1], wi[W_C + 2] = 0.0, 0.0, 0.0
            wi[W_C + 3], wi[W_C + 4], wi[W_C + 5] = _rot_mul(wi, W_R, cx, cy, cz)
        else:
            if p < 0:
                wx = wy = wz = ux = uy = uz = rx = ry = rz = 0.0
            else:
                wp = ws[p]
                wx, wy, wz = wp[W_OMEGA], wp[W_OMEGA + 1], wp[W_OMEGA + 2]
                ux, uy, uz = wp[W_VEL], wp[W_VEL + 1], wp[W_VEL + 2]
                rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
            ex, ey, ez = wi[W_E], wi[W_E + 1], wi[W_E + 2]
            qd = v[iv]
            sx, sy, sz = _cross(wx, wy, wz, rx, ry, rz)
            cx, cy, cz = _cross(wx, wy, wz, sx, sy, sz)
            kx, ky, kz = _cross(wx, wy, wz, ex, ey, ez)
            if jt == REVOLUTE:
                wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = wx + ex * qd, wy + ey * qd, wz + ez * qd
                wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = ux + sx, uy + sy, uz + sz
                wi[W_C], wi[W_C + 1], wi[W_C + 2] = kx * qd, ky * qd, kz * qd
                wi[W_C + 3], wi[W_C + 4], wi[W_C + 5] = cx, cy, cz
            else:
                wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2] = wx, wy, wz
                wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2] = ux + sx + ex * qd, uy + sy + ey * qd, uz + sz + ez * qd
                wi[W_C], wi[W_C + 1], wi[W_C + 2] = 0.0, 0.0, 0.0
                wi[W_C + 3], wi[W_C + 4], wi[W_C + 5] = cx + 2 * kx * qd, cy + 2 * ky * qd, cz + 2 * kz * qd
        # Articulated inertia starts as the body's own (eq. A.8 with no children yet) and the
        # bias wrench as Omega M E t - w_ext.
        _spatial_inertia(mf, ws, i)
        m = mf[i, MF_MASS]
        wx, wy, wz = wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2]
        dx, dy, dz = wi[W_D], wi[W_D + 1], wi[W_D + 2]
        iwx, iwy, iwz = _sym_mul(wi, W_I, wx, wy, wz)
        gx, gy, gz = _cross(wx, wy, wz, iwx, iwy, iwz)
        sx, sy, sz = _cross(wx, wy, wz, dx, dy, dz)
        cx, cy, cz = _cross(wx, wy, wz, sx, sy, sz)
        wi[W_PA], wi[W_PA + 1], wi[W_PA + 2] = gx - wi[W_FEXT], gy - wi[W_FEXT + 1], gz - wi[W_FEXT + 2]
        wi[W_PA + 3] = m * cx - wi[W_FEXT + 3]
        wi[W_PA + 4] = m * cy - wi[W_FEXT + 4]
        wi[W_PA + 5] = m * cz - wi[W_FEXT + 5]
    # Backward pass: U_i, D_i, u_i and the articulated inertias of the parents (A.6-A.9).
    for i in range(nb - 1, -1, -1):
        wi = ws[i]
        jt = mi[i, MI_TYPE]
        if jt == FREE_FLYER:
            continue
        iv = mi[i, MI_IV]
        off = W_IA if jt == REVOLUTE else W_IA + 3
        ex, ey, ez = wi[W_E], wi[W_E + 1], wi[W_E + 2]
        for r in range(6):
            wi[W_U + r] = wi[W_IA + 6 * r + off - W_IA] * ex + wi[W_IA + 6 * r + off - W_IA + 1] * ey \
                + wi[W_IA + 6 * r + off - W_IA + 2] * ez
        po = 0 if jt == REVOLUTE else 3
        d = wi[W_U + po] * ex + wi[W_U + po + 1] * ey + wi[W_U + po + 2] * ez + mf[i, MF_ARMATURE]
        if not d > 0.0:
            return SINGULAR
        wi[W_DD] = d
        u = tau[iv] - (wi[W_PA + po] * ex + wi[W_PA + po + 1] * ey + wi[W_PA + po + 2] * ez)
        wi[W_UU] = u
        p = mi[i, MI_PARENT]
        if p < 0:
            continue
        # Ia = IA - U U^T / D ; pa = pA + Ia c + U u / D
        for r in range(6):
            for c in range(6):
                wi[W_IA + 6 * r + c] -= wi[W_U + r] * wi[W_U + c] / d
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += wi[W_IA + 6 * r + c] * wi[W_C + c]
            wi[W_PA + r] += s + wi[W_U + r] * u / d
        _shift_articulated(wi, ws[p], scratch)
    # Forward pass (eq. 30): twist rates and joint accelerations; the world accelerates at -g.
    for i in range(nb):
        wi = ws[i]
        p = mi[i, MI_PARENT]
        jt = mi[i, MI_TYPE]
        iv = mi[i, MI_IV]
        if jt == FREE_FLYER:
            # Root articulated body: IA t' = S tau - pA with S tau = [R n_b; R f_b] (world wrench).
            fx, fy, fz = _rot_mul(wi, W_R, tau[iv], tau[iv + 1], tau[iv + 2])
            nx, ny, nz = _rot_mul(wi, W_R, tau[iv + 3], tau[iv + 4], tau[iv + 5])
            for k in range(36):
                scratch[k] = wi[W_IA + k]
            scratch[36], scratch[37], scratch[38] = nx - wi[W_PA], ny - wi[W_PA + 1], nz - wi[W_PA + 2]
            scratch[39], scratch[40], scratch[41] = fx - wi[W_PA + 3], fy - wi[W_PA + 4], fz - wi[W_PA + 5]
            if not _cholesky_solve(scratch, 0, 6, scratch, 36):
                return SINGULAR
            for k in range(3):
                wi[W_ALPHA + k] = scratch[36 + k]
                wi[W_ACC + k] = scratch[39 + k]
            vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
            bx, by, bz = v[iv + 3], v[iv + 4], v[iv + 5]
            cx, cy, cz = _cross(bx, by, bz, vx, vy, vz)
            ax, ay, az = _rot_tmul(wi, W_R, wi[W_ACC] + g[0], wi[W_ACC + 1] + g[1], wi[W_ACC + 2] + g[2])
            qdd[iv], qdd[iv + 1], qdd[iv + 2] = ax - cx, ay - cy, az - cz
            qdd[iv + 3], qdd[iv + 4], qdd[iv + 5] = _rot_tmul(wi, W_R, wi[W_ALPHA], wi[W_ALPHA + 1], wi[W_ALPHA + 2])
            continue
        if p < 0:
            alx = aly = alz = 0.0
            acx, acy, acz = -g[0], -g[1], -g[2]
        else:
            wp = ws[p]
            rx, ry, rz = wi[W_O] - wp[W_O], wi[W_O + 1] - wp[W_O + 1], wi[W_O + 2] - wp[W_O + 2]
            alx, aly, alz = wp[W_ALPHA], wp[W_ALPHA + 1], wp[W_ALPHA + 2]
            tx, ty, tz = _cross(alx, aly, alz, rx, ry, rz)
            acx, acy, acz = wp[W_ACC] + tx, wp[W_ACC + 1] + ty, wp[W_ACC + 2] + tz
        alx += wi[W_C]
        aly += wi[W_C + 1]
        alz += wi[W_C + 2]
        acx += wi[W_C + 3]
        acy += wi[W_C + 4]
        acz += wi[W_C + 5]
        ut = (wi[W_U] * alx + wi[W_U + 1] * aly + wi[W_U + 2] * alz
              + wi[W_U + 3] * acx + wi[W_U + 4] * acy + wi[W_U + 5] * acz)
        th = (wi[W_UU] - ut) / wi[W_DD]
        qdd[iv] = th
        ex, ey, ez = wi[W_E], wi[W_E + 1], wi[W_E + 2]
        if jt == REVOLUTE:
            alx, aly, alz = alx + ex * th, aly + ey * th, alz + ez * th
        else:
            acx, acy, acz = acx + ex * th, acy + ey * th, acz + ez * th
        wi[W_ALPHA], wi[W_ALPHA + 1], wi[W_ALPHA + 2] = alx, aly, alz
        wi[W_ACC], wi[W_ACC + 1], wi[W_ACC + 2] = acx, acy, acz
    return OK


@njit(SIG_MAT_Q_V_TAU_OUT, cache=True)
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
    if not _cholesky_solve(flat, 0, nv, qdd, 0):
        return SINGULAR
    return OK


@njit(cache=True)
def point_jacobian(mi, ws, body, px, py, pz, J):
    """World-aligned Jacobian [angular; linear] (6 x nv) of the point O_body + R_body p.

    Uses the poses in ``ws`` (call forward_kinematics first). Columns of joints
    that are not ancestors of ``body`` are zero.
    """
    nv = J.shape[1]
    for r in range(6):
        for c in range(nv):
            J[r, c] = 0.0
    wb = ws[body]
    dx, dy, dz = _rot_mul(wb, W_R, px, py, pz)
    x, y, z = wb[W_O] + dx, wb[W_O + 1] + dy, wb[W_O + 2] + dz
    j = body
    while j >= 0:
        wj = ws[j]
        jv = mi[j, MI_IV]
        rx, ry, rz = x - wj[W_O], y - wj[W_O + 1], z - wj[W_O + 2]
        for k in range(_joint_nv(mi, j)):
            ex, ey, ez, lx, ly, lz = _motion_column(mi, ws, j, k)
            cx, cy, cz = _cross(ex, ey, ez, rx, ry, rz)
            J[0, jv + k], J[1, jv + k], J[2, jv + k] = ex, ey, ez
            J[3, jv + k], J[4, jv + k], J[5, jv + k] = lx + cx, ly + cy, lz + cz
        j = mi[j, MI_PARENT]


@njit(cache=True)
def point_acceleration(ws, body, px, py, pz, out):
    """Classical acceleration [alpha; a_P] of the point O_body + R_body p from the kinematics in ``ws``.

    After ``kinematics(q, v, 0, gravity_scale=0)`` this is the bias term J-dot v.
    """
    wb = ws[body]
    dx, dy, dz = _rot_mul(wb, W_R, px, py, pz)
    wx, wy, wz = wb[W_OMEGA], wb[W_OMEGA + 1], wb[W_OMEGA + 2]
    alx, aly, alz = wb[W_ALPHA], wb[W_ALPHA + 1], wb[W_ALPHA + 2]
    tx, ty, tz = _cross(alx, aly, alz, dx, dy, dz)
    sx, sy, sz = _cross(wx, wy, wz, dx, dy, dz)
    cx, cy, cz = _cross(wx, wy, wz, sx, sy, sz)
    out[0], out[1], out[2] = alx, aly, alz
    out[3] = wb[W_ACC] + tx + cx
    out[4] = wb[W_ACC + 1] + ty + cy
    out[5] = wb[W_ACC + 2] + tz + cz


@njit(cache=True)
def center_of_mass(mi, mf, ws, out):
    """Centre of mass of the whole tree from the poses in ``ws``; returns the total mass."""
    total = 0.0
    out[0] = out[1] = out[2] = 0.0
    for i in range(mi.shape[0]):
        m = mf[i, MF_MASS]
        total += m
        for k in range(3):
            out[k] += m * (ws[i, W_O + k] + ws[i, W_D + k])
    if total > 0:
        for k in range(3):
            out[k] /= total
    return total


@njit(cache=True)
def energy(mi, mf, ws, out):
    """Kinetic and potential energy from the kinematics in ``ws``: out = [T, V]."""
    nb = mi.shape[0]
    g = mf[nb]
    t = 0.0
    pot = 0.0
    for i in range(nb):
        wi = ws[i]
        m = mf[i, MF_MASS]
        wx, wy, wz = wi[W_OMEGA], wi[W_OMEGA + 1], wi[W_OMEGA + 2]
        ux, uy, uz = wi[W_VEL], wi[W_VEL + 1], wi[W_VEL + 2]
        iwx, iwy, iwz = _sym_mul(wi, W_I, wx, wy, wz)
        cx, cy, cz = _cross(wx, wy, wz, wi[W_D], wi[W_D + 1], wi[W_D + 2])
        t += 0.5 * (m * (ux * ux + uy * uy + uz * uz) + wx * iwx + wy * iwy + wz * iwz) \
            + m * (ux * cx + uy * cy + uz * cz)
        for k in range(3):
            pot -= m * g[k] * (wi[W_O + k] + wi[W_D + k])
    out[0] = t
    out[1] = pot


@njit(cache=True)
def integrate(mi, q, v, dt, out):
    """q (+) v dt on the configuration manifold (Pinocchio's ``integrate``).

    1-DOF joints add; the free-flyer composes its pose with exp(v dt) of the
    body-frame twist (SE(3) exponential), keeping a unit quaternion in the
    hemisphere of the input one. ``out`` may be ``q``.
    """
    for i in range(mi.shape[0]):
        iq = mi[i, MI_IQ]
        iv = mi[i, MI_IV]
        if mi[i, MI_TYPE] != FREE_FLYER:
            out[iq] = q[iq] + v[iv] * dt
            continue
        vx, vy, vz = v[iv] * dt, v[iv + 1] * dt, v[iv + 2] * dt
        wx, wy, wz = v[iv + 3] * dt, v[iv + 4] * dt, v[iv + 5] * dt
        th2 = wx * wx + wy * wy + wz * wz
        th = np.sqrt(th2)
        if th < 1e-4:
            a = 0.5 - th2 / 24.0
            b = 1.0 / 6.0 - th2 / 120.0
            hs = 0.5 - th2 / 48.0  # sin(th/2)/th
            hc = 1.0 - th2 / 8.0
        else:
            a = (1.0 - np.cos(th)) / th2
            b = (th - np.sin(th)) / (th2 * th)
            hs = np.sin(0.5 * th) / th
            hc = np.cos(0.5 * th)
        # p_inc = V(w) v with V = 1 + a w~ + b w~^2
        c1x, c1y, c1z = _cross(wx, wy, wz, vx, vy, vz)
        c2x, c2y, c2z = _cross(wx, wy, wz, c1x, c1y, c1z)
        px, py, pz = vx + a * c1x + b * c2x, vy + a * c1y + b * c2y, vz + a * c1z + b * c2z
        x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
        # rotate p_inc by the current orientation (unit quaternion)
        tx, ty, tz = _cross(x, y, z, px, py, pz)
        tx, ty, tz = 2 * tx, 2 * ty, 2 * tz
        ux, uy, uz = _cross(x, y, z, tx, ty, tz)
        out[iq] = q[iq] + px + w * tx + ux
        out[iq + 1] = q[iq + 1] + py + w * ty + uy
        out[iq + 2] = q[iq + 2] + pz + w * tz + uz
        # quaternion product q (x) [hs w; hc]
        bx, by, bz, bw = hs * wx, hs * wy, hs * wz, hc
        nx = w * bx + x * bw + y * bz - z * by
        ny = w * by - x * bz + y * bw + z * bx
        nz = w * bz + x * by - y * bx + z * bw
        nw = w * bw - x * bx - y * by - z * bz
        norm = np.sqrt(nx * nx + ny * ny + nz * nz + nw * nw)
        if nx * x + ny * y + nz * z + nw * w < 0:
            norm = -norm  # same rotation; stay in q's hemisphere (as Pinocchio) so q moves continuously
        out[iq + 3], out[iq + 4], out[iq + 5], out[iq + 6] = nx / norm, ny / norm, nz / norm, nw / norm


@njit(cache=True)
def configuration_rate(mi, q, v, out):
    """dq/dt for velocity v: 1-DOF joints copy v; the free-flyer gives [R v_lin; 0.5 q (x) [omega; 0]]."""
    for i in range(mi.shape[0]):
        iq = mi[i, MI_IQ]
        iv = mi[i, MI_IV]
        if mi[i, MI_TYPE] != FREE_FLYER:
            out[iq] = v[iv]
            continue
        x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
        vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
        tx, ty, tz = _cross(x, y, z, vx, vy, vz)
        tx, ty, tz = 2 * tx, 2 * ty, 2 * tz
        ux, uy, uz = _cross(x, y, z, tx, ty, tz)
        out[iq], out[iq + 1], out[iq + 2] = vx + w * tx + ux, vy + w * ty + uy, vz + w * tz + uz
        bx, by, bz = v[iv + 3], v[iv + 4], v[iv + 5]
        out[iq + 3] = 0.5 * (w * bx + y * bz - z * by)
        out[iq + 4] = 0.5 * (w * by - x * bz + z * bx)
        out[iq + 5] = 0.5 * (w * bz + x * by - y * bx)
        out[iq + 6] = 0.5 * (-x * bx - y * by - z * bz)
