"""Kinematics kernels: body poses, twists and twist rates, point Jacobians, centre of mass, energy.

Quantities are those of the module-DeNOC paper (Shah, Saha & Dutt, 2012): the twist
``t_k = [omega_k; odot_k]`` of body k is its angular velocity and the velocity
of its origin O_k, both in world axes (eq. 1); ``A_{k,j}`` shifts a twist from
O_j to O_k (eq. 2); the twist rate is the time derivative of the twist (the
classical acceleration of O_k). Joints enter only through the joint model:
:func:`~rtctl.dynamics.joints.jcalc` (the placed joint transform) and
:func:`~rtctl.dynamics.joints.motion_subspace` (S_k in world axes, left in the
workspace).
"""
from __future__ import annotations

from numba import njit

from ..model import MF_COM, MF_INERTIA, MF_MASS, MI_IQ, MI_IV, MI_NV, MI_PARENT, MI_TYPE
from .joints import joint_configuration_rate, joint_integrate, joint_trig, motion_subspace, placed_joint
from .spatial import cross, mat_mul, mat_vec, rot_mul, sym_mul, ws_rot
from .workspace import DOF_WIDTH, W_ACC, W_ALPHA, W_C, W_D, W_I, W_O, W_OMEGA, W_R, W_S, W_TRIG, W_VEL


@njit(cache=True, forceinline=True)
def forward_kinematics(mi, mf, ws, q):
    """Body poses, world-axes motion subspaces S_k, centre-of-mass offsets d_k and inertias about O_k.

    The pose of body k is its parent's composed with the joint's placed
    transform, X_k = X_parent (X_tree,k X_J,k(q)) (RBDA Table 5.1,
    ``X_i = X_J X_T``, here as poses rather than coordinate transforms).
    """
    joint_trig(mi, ws, q)
    for i in range(mi.shape[0]):
        body_pose(mi, mf, ws, q, i)


@njit(cache=True, forceinline=True)
def body_pose(mi, mf, ws, q, i):
    """One step of :func:`forward_kinematics` after :func:`~rtctl.dynamics.joints.joint_trig`: body i's
    pose, S_i, d_i and inertia (its parent's pose known)."""
    _inertia_to_world(mf, ws, i, body_frame(mi, mf, ws, q, i))


@njit(cache=True, forceinline=True)
def body_frame(mi, mf, ws, q, i):
    """:func:`body_pose` but the inertia: body i's pose, S_i and d_i. Returns its world rotation (9-tuple)."""
    rot, pos = placed_joint(mi, mf, q, i, ws[i, W_TRIG], ws[i, W_TRIG + 1])
    r = _compose_pose(mi, ws, i, rot, pos)
    motion_subspace(mi, mf, ws, i, r)
    ws[i, W_D], ws[i, W_D + 1], ws[i, W_D + 2] = mat_vec(r, mf[i, MF_COM], mf[i, MF_COM + 1], mf[i, MF_COM + 2])
    return r


@njit(cache=True, forceinline=True)
def _compose_pose(mi, ws, i, rot, pos):
    """World pose of body i (W_R, W_O): the parent's pose composed with ``rot``, ``pos``, the pose of
    body i in its parent's frame from :func:`~rtctl.dynamics.joints.jcalc` (the world's for a root).
    Returns the world rotation as a row-major 9-tuple."""
    p = mi[i, MI_PARENT]
    if p >= 0:
        tx, ty, tz = pos
        for r in range(3):
            a0, a1, a2 = ws[p, W_R + 3 * r], ws[p, W_R + 3 * r + 1], ws[p, W_R + 3 * r + 2]
            ws[i, W_O + r] = ws[p, W_O + r] + a0 * tx + a1 * ty + a2 * tz
        rot = mat_mul(ws_rot(ws, p, W_R), rot)
    else:
        ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2] = pos
    ws[i, W_R], ws[i, W_R + 1], ws[i, W_R + 2] = rot[0], rot[1], rot[2]
    ws[i, W_R + 3], ws[i, W_R + 4], ws[i, W_R + 5] = rot[3], rot[4], rot[5]
    ws[i, W_R + 6], ws[i, W_R + 7], ws[i, W_R + 8] = rot[6], rot[7], rot[8]
    return rot


@njit(cache=True, forceinline=True)
def _inertia_to_world(mf, ws, i, r):
    """Rotational inertia about O_k in world axes, R I_body R^T, from the body-axes one in the model row."""
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = r
    a0, a1, a2 = sym_mul(mf, i, MF_INERTIA, r0, r1, r2)  # rows of R I (I symmetric)
    b0, b1, b2 = sym_mul(mf, i, MF_INERTIA, r3, r4, r5)
    c0, c1, c2 = sym_mul(mf, i, MF_INERTIA, r6, r7, r8)
    ws[i, W_I + 0] = a0 * r0 + a1 * r1 + a2 * r2
    ws[i, W_I + 1] = b0 * r3 + b1 * r4 + b2 * r5
    ws[i, W_I + 2] = c0 * r6 + c1 * r7 + c2 * r8
    ws[i, W_I + 3] = a0 * r3 + a1 * r4 + a2 * r5
    ws[i, W_I + 4] = a0 * r6 + a1 * r7 + a2 * r8
    ws[i, W_I + 5] = b0 * r6 + b1 * r7 + b2 * r8


@njit(cache=True, forceinline=True)
def propagate_velocity(mi, ws, i, v):
    """Twist t_i = A_{i,p} t_p + S_i qd_i (Shah, Saha & Dutt, 2012, eqs. 1-2) and the velocity-product acceleration c_i.

    With the joint velocity v_J = S_i qd_i = [w_J; u_J] and S_i fixed in body i
    (d/dt S_i = omega_i x S_i), the time derivative of eq. 1 at zero joint
    acceleration is A_{i,p} t'_p + c_i with
    c_i = [omega_i x w_J; omega_p x (omega_p x r) + (omega_p + omega_i) x u_J],
    r = O_i - O_p (Featherstone's c_J + v_i x v_J with c_J = 0, RBDA Table 5.1,
    for these classical accelerations). Writes ``W_OMEGA``, ``W_VEL`` and ``W_C``.
    """
    p = mi[i, MI_PARENT]
    if p < 0:
        wx = wy = wz = ux = uy = uz = rx = ry = rz = 0.0
    else:
        wx, wy, wz = ws[p, W_OMEGA], ws[p, W_OMEGA + 1], ws[p, W_OMEGA + 2]
        ux, uy, uz = ws[p, W_VEL], ws[p, W_VEL + 1], ws[p, W_VEL + 2]
        rx, ry, rz = ws[i, W_O] - ws[p, W_O], ws[i, W_O + 1] - ws[p, W_O + 1], ws[i, W_O + 2] - ws[p, W_O + 2]
    jax, jay, jaz, jlx, jly, jlz = motion_times(mi, ws, i, v, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    sx, sy, sz = cross(wx, wy, wz, rx, ry, rz)
    ox, oy, oz = wx + jax, wy + jay, wz + jaz
    ws[i, W_OMEGA], ws[i, W_OMEGA + 1], ws[i, W_OMEGA + 2] = ox, oy, oz
    ws[i, W_VEL], ws[i, W_VEL + 1], ws[i, W_VEL + 2] = ux + sx + jlx, uy + sy + jly, uz + sz + jlz
    ws[i, W_C], ws[i, W_C + 1], ws[i, W_C + 2] = cross(ox, oy, oz, jax, jay, jaz)
    cx, cy, cz = cross(wx, wy, wz, sx, sy, sz)
    kx, ky, kz = cross(wx + ox, wy + oy, wz + oz, jlx, jly, jlz)
    ws[i, W_C + 3], ws[i, W_C + 4], ws[i, W_C + 5] = cx + kx, cy + ky, cz + kz


@njit(cache=True, forceinline=True)
def motion_times(mi, ws, i, x, ax, ay, az, lx, ly, lz):
    """(ax, ay, az, lx, ly, lz) + S_i x_i: a joint's motion subspace (world axes, ``W_S``) times its DOFs of ``x``."""
    iv = mi[i, MI_IV]
    for k in range(mi[i, MI_NV]):
        o = W_S + DOF_WIDTH * k
        xk = x[iv + k]
        ax += ws[i, o] * xk
        ay += ws[i, o + 1] * xk
        az += ws[i, o + 2] * xk
        lx += ws[i, o + 3] * xk
        ly += ws[i, o + 4] * xk
        lz += ws[i, o + 5] * xk
    return ax, ay, az, lx, ly, lz


@njit(cache=True, forceinline=True)
def bias_twist_rate(mi, mf, ws, i, gravity_scale):
    """A_{i,p} t'_p + c_i: the twist rate of body i at zero joint acceleration (eq. 1 differentiated).

    The world's twist rate is ``[0; -gravity_scale * g]``. Needs ``W_C`` of body i
    (:func:`propagate_velocity`) and the parent's twist rate.
    """
    p = mi[i, MI_PARENT]
    if p < 0:
        g = mi.shape[0]  # the gravity row of mf
        alx = aly = alz = 0.0
        acx, acy, acz = -gravity_scale * mf[g, 0], -gravity_scale * mf[g, 1], -gravity_scale * mf[g, 2]
    else:
        rx, ry, rz = ws[i, W_O] - ws[p, W_O], ws[i, W_O + 1] - ws[p, W_O + 1], ws[i, W_O + 2] - ws[p, W_O + 2]
        alx, aly, alz = ws[p, W_ALPHA], ws[p, W_ALPHA + 1], ws[p, W_ALPHA + 2]
        tx, ty, tz = cross(alx, aly, alz, rx, ry, rz)
        acx, acy, acz = ws[p, W_ACC] + tx, ws[p, W_ACC + 1] + ty, ws[p, W_ACC + 2] + tz
    return (alx + ws[i, W_C], aly + ws[i, W_C + 1], alz + ws[i, W_C + 2],
            acx + ws[i, W_C + 3], acy + ws[i, W_C + 4], acz + ws[i, W_C + 5])


@njit(cache=True, forceinline=True)
def set_twist_rate(mi, ws, i, bias, qdd):
    """t'_i = ``bias`` + S_i qdd_i, with ``bias`` from :func:`bias_twist_rate`."""
    alx, aly, alz, acx, acy, acz = bias
    alx, aly, alz, acx, acy, acz = motion_times(mi, ws, i, qdd, alx, aly, alz, acx, acy, acz)
    ws[i, W_ALPHA], ws[i, W_ALPHA + 1], ws[i, W_ALPHA + 2] = alx, aly, alz
    ws[i, W_ACC], ws[i, W_ACC + 1], ws[i, W_ACC + 2] = acx, acy, acz


@njit(cache=True, forceinline=True)
def kinematics(mi, mf, ws, q, v, a, gravity_scale):
    """FK plus the twist (eq. 1) and twist-rate recursions over the tree.

    The world's twist rate is ``[0; -gravity_scale * g]``, so with
    ``gravity_scale = 1`` the accelerations carry gravity as a fictitious
    upward acceleration of the base (used by inverse dynamics).
    """
    forward_kinematics(mi, mf, ws, q)
    for i in range(mi.shape[0]):
        propagate_velocity(mi, ws, i, v)
        set_twist_rate(mi, ws, i, bias_twist_rate(mi, mf, ws, i, gravity_scale), a)


@njit(cache=True)
def point_jacobian(mi, ws, body, px, py, pz, J):
    """World-aligned Jacobian [angular; linear] (6 x nv) of the point O_body + R_body p.

    Column of DOF j of an ancestor joint: [s_a; s_l + s_a x (P - O_j)] for its
    column [s_a; s_l] of S (the twist of eq. 1 shifted to P). Uses the poses in
    ``ws`` (call forward_kinematics first). Columns of joints that are not
    ancestors of ``body`` are zero.
    """
    nv = J.shape[1]
    for r in range(6):
        for c in range(nv):
            J[r, c] = 0.0
    dx, dy, dz = rot_mul(ws, body, W_R, px, py, pz)
    x, y, z = ws[body, W_O] + dx, ws[body, W_O + 1] + dy, ws[body, W_O + 2] + dz
    j = body
    while j >= 0:
        k = mi[j, MI_IV]
        rx, ry, rz = x - ws[j, W_O], y - ws[j, W_O + 1], z - ws[j, W_O + 2]
        for c in range(k, k + mi[j, MI_NV]):
            o = W_S + DOF_WIDTH * (c - k)
            ex, ey, ez = ws[j, o], ws[j, o + 1], ws[j, o + 2]
            cx, cy, cz = cross(ex, ey, ez, rx, ry, rz)
            J[0, c], J[1, c], J[2, c] = ex, ey, ez
            J[3, c], J[4, c], J[5, c] = ws[j, o + 3] + cx, ws[j, o + 4] + cy, ws[j, o + 5] + cz
        j = mi[j, MI_PARENT]


@njit(cache=True)
def point_acceleration(ws, body, px, py, pz, out):
    """Classical acceleration [alpha; a_P] of the point O_body + R_body p from the kinematics in ``ws``.

    After ``kinematics(q, v, 0, gravity_scale=0)`` this is the bias term J-dot v.
    """
    dx, dy, dz = rot_mul(ws, body, W_R, px, py, pz)
    wx, wy, wz = ws[body, W_OMEGA], ws[body, W_OMEGA + 1], ws[body, W_OMEGA + 2]
    alx, aly, alz = ws[body, W_ALPHA], ws[body, W_ALPHA + 1], ws[body, W_ALPHA + 2]
    tx, ty, tz = cross(alx, aly, alz, dx, dy, dz)
    sx, sy, sz = cross(wx, wy, wz, dx, dy, dz)
    cx, cy, cz = cross(wx, wy, wz, sx, sy, sz)
    out[0], out[1], out[2] = alx, aly, alz
    out[3] = ws[body, W_ACC] + tx + cx
    out[4] = ws[body, W_ACC + 1] + ty + cy
    out[5] = ws[body, W_ACC + 2] + tz + cz


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
    t = 0.0
    pot = 0.0
    for i in range(nb):
        m = mf[i, MF_MASS]
        wx, wy, wz = ws[i, W_OMEGA], ws[i, W_OMEGA + 1], ws[i, W_OMEGA + 2]
        ux, uy, uz = ws[i, W_VEL], ws[i, W_VEL + 1], ws[i, W_VEL + 2]
        iwx, iwy, iwz = sym_mul(ws, i, W_I, wx, wy, wz)
        cx, cy, cz = cross(wx, wy, wz, ws[i, W_D], ws[i, W_D + 1], ws[i, W_D + 2])
        t += 0.5 * (m * (ux * ux + uy * uy + uz * uz) + wx * iwx + wy * iwy + wz * iwz) \
            + m * (ux * cx + uy * cy + uz * cz)
        for k in range(3):
            pot -= m * mf[nb, k] * (ws[i, W_O + k] + ws[i, W_D + k])
    out[0] = t
    out[1] = pot


@njit(cache=True)
def integrate(mi, q, v, dt, out):
    """q (+) v dt on the configuration manifold (Pinocchio's ``integrate``), joint by joint
    (:func:`~rtctl.dynamics.joints.joint_integrate`). ``out`` may be ``q``."""
    for i in range(mi.shape[0]):
        joint_integrate(mi[i, MI_TYPE], q, mi[i, MI_IQ], v, mi[i, MI_IV], dt, out)


@njit(cache=True)
def configuration_rate(mi, q, v, out):
    """dq/dt for velocity v, joint by joint (:func:`~rtctl.dynamics.joints.joint_configuration_rate`)."""
    for i in range(mi.shape[0]):
        joint_configuration_rate(mi[i, MI_TYPE], q, mi[i, MI_IQ], v, mi[i, MI_IV], out)
