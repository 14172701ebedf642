"""The joint model: everything the kernels know about joint types, in one place.

Featherstone's joint calculation (RBDA sec. 4.4, Table 4.1; ``jcalc`` of
spatial_v2) gives, from the joint type, its axis and its coordinates, the joint
transform X_J(q) and the motion subspace S. Here it is two functions, because
the forward kinematics needs the transform before it knows the body's world
rotation and S after: :func:`jcalc` returns the joint transform already placed
in the parent (X_tree X_J, cheap for the common joints, see there), and
:func:`motion_subspace` writes S in world axes to the workspace (``W_S``),
where every other algorithm (RNEA, CRBA, ABA, Jacobians) reads it. Every
recursive algorithm reads joints only through these. For every joint type here
S is constant in body coordinates (Featherstone's c_J = 0), so in world axes
d/dt S = omega x S; the twist-rate recursions rely on that.

:func:`joint_integrate` and :func:`joint_configuration_rate` are the joint's
maps between velocity and configuration (q (+) v dt and dq/dt).

Joint types (coordinates q_J, velocity v_J, body-frame S as [angular; linear] columns):

* revolute about unit axis a: q_J = theta, X_J = (Rot(a, theta), 0), S = [a; 0];
* prismatic along a: q_J = d, X_J = (1, a d), S = [0; a];
* free-flyer: q_J = [p; quaternion xyzw], v_J = [v_lin; omega] in body axes
  (Pinocchio's convention), X_J = (R(quat), p), S = [[0, 1], [1, 0]].
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..model import FREE_FLYER, MF_AXIS, MF_ROT, MF_TRANS, MI_IQ, MI_TYPE, REVOLUTE
from .spatial import cross, ws_rot
from .workspace import DOF_WIDTH, W_S, W_TRIG


@njit(cache=True, forceinline=True)
def jcalc(mi, mf, q, i):
    """Joint transform of body i (RBDA Table 4.1) placed in its parent: (rotation, translation).

    :func:`placed_joint` with the joint angle's sine and cosine computed here.
    """
    if mi[i, MI_TYPE] == REVOLUTE:
        sn, c = _sincos(q[mi[i, MI_IQ]])
        return placed_joint(mi, mf, q, i, sn, c)
    return placed_joint(mi, mf, q, i, 0.0, 1.0)


@njit(cache=True, forceinline=True)
def joint_trig(mi, ws, q):
    """Sine and cosine of every revolute joint's angle into ``W_TRIG``, for :func:`placed_joint`.

    A pass of its own: the angles are independent of each other, so the processor overlaps their
    polynomials, which inside the pose recursion sat on its critical path (the forward kinematics of
    a 6-DOF arm about 12 % faster, bit-identical).
    """
    for i in range(mi.shape[0]):
        if mi[i, MI_TYPE] == REVOLUTE:
            ws[i, W_TRIG], ws[i, W_TRIG + 1] = _sincos(q[mi[i, MI_IQ]])


@njit(cache=True, forceinline=True)
def placed_joint(mi, mf, q, i, sn, c):
    """Joint transform of body i placed in its parent, given sn = sin q_J and c = cos q_J of a revolute
    joint (ignored for the others).

    Returns the pose of the body frame in the parent's frame,
    X_tree X_J(q) (Featherstone's ``Xup = XJ * Xtree``, as a pose: the rotation
    row-major as a 9-tuple, the translation as a 3-tuple). The product with the
    placement X_tree is formed here because the joint's structure makes it
    cheap: a revolute joint about a coordinate axis (most URDF joints) mixes two
    columns of the placement rotation by cos and sin (:func:`_place_rotated`).
    The motion subspace, the other half of Featherstone's jcalc, is
    :func:`motion_subspace`.
    """
    jtype, iq = mi[i, MI_TYPE], mi[i, MI_IQ]
    if jtype == FREE_FLYER:
        qx, qy, qz, qw = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
        rot = (1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw),
               2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw),
               2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy))
        return _place_rotation(mf, i, rot), _place_point(mf, i, q[iq], q[iq + 1], q[iq + 2])
    ax, ay, az = mf[i, MF_AXIS], mf[i, MF_AXIS + 1], mf[i, MF_AXIS + 2]
    if jtype == REVOLUTE:
        origin = (mf[i, MF_TRANS], mf[i, MF_TRANS + 1], mf[i, MF_TRANS + 2])
        if ay == 0.0 and az == 0.0:
            return _place_rotated(mf, i, 0, c, ax * sn), origin
        if ax == 0.0 and az == 0.0:
            return _place_rotated(mf, i, 1, c, ay * sn), origin
        if ax == 0.0 and ay == 0.0:
            return _place_rotated(mf, i, 2, c, az * sn), origin
        # Rodrigues: cos th 1 + sin th a~ + (1 - cos th) a a^T
        v = 1.0 - c
        rot = (c + ax * ax * v, ax * ay * v - az * sn, ax * az * v + ay * sn,
               ay * ax * v + az * sn, c + ay * ay * v, ay * az * v - ax * sn,
               az * ax * v - ay * sn, az * ay * v + ax * sn, c + az * az * v)
        return _place_rotation(mf, i, rot), origin
    th = q[iq]
    return ws_rot(mf, i, MF_ROT), _place_point(mf, i, ax * th, ay * th, az * th)


@njit(cache=True, forceinline=True)
def _sincos(x):
    """(sin x, cos x) of a revolute joint's angle, inline: libm's sin and cos are a call, which costs more
    than the rest of a body's forward kinematics (the call spills every live register).

    For |x| < 1e5: x = n pi/2 + y by a two-constant Cody-Waite reduction (n pi/2's head exact, error
    < 1e-21 in y), then fdlibm's minimax polynomials on |y| <= pi/4 (FreeBSD k_sin.c, k_cos.c) and the
    quadrant's swap and signs without branches; within 1.2e-16 of libm
    (tests/test_joint_model.py). libm beyond.
    """
    if not abs(x) < 1e5:
        return np.sin(x), np.cos(x)
    n = np.floor(x * 0.63661977236758134308 + 0.5)
    y = (x - n * 1.57079632673412561417e+00) - n * 6.07710050650619224932e-11
    z = y * y
    s = y + z * y * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 + z * (
        -1.98412698298579493134e-04 + z * (2.75573137070700676789e-06 + z * (
            -2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    r = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (
        2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 + z * (
            2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))))
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + z * r)
    k = np.int64(n) & 3
    sign = 1.0 - (k & 2)
    odd = (k & 1) == 1
    return sign * (c if odd else s), sign * (-s if odd else c)


@njit(cache=True, forceinline=True)
def motion_subspace(mi, mf, ws, i, r):
    """Write the motion subspace S of body i's joint in world axes (RBDA Table 4.1 rotated by the body's
    world rotation ``r``, a row-major 9-tuple): column j, [angular; linear], to
    ``ws[i, W_S + DOF_WIDTH j : W_S + DOF_WIDTH j + 6]``.

    Revolute: [R a; 0]; prismatic: [0; R a]; free-flyer (v = [v_lin; omega] in
    body axes): [0; R e_j] for j < 3 and [R e_(j-3); 0] after.
    """
    jtype = mi[i, MI_TYPE]
    if jtype == FREE_FLYER:
        for j in range(3):
            _set_column(ws, i, W_S + DOF_WIDTH * j, 0.0, 0.0, 0.0, r[j], r[3 + j], r[6 + j])
            _set_column(ws, i, W_S + DOF_WIDTH * (j + 3), r[j], r[3 + j], r[6 + j], 0.0, 0.0, 0.0)
        return
    ax, ay, az = mf[i, MF_AXIS], mf[i, MF_AXIS + 1], mf[i, MF_AXIS + 2]
    if ay == 0.0 and az == 0.0:  # a coordinate axis (most URDF joints): a column of R
        ex, ey, ez = r[0] * ax, r[3] * ax, r[6] * ax
    elif ax == 0.0 and az == 0.0:
        ex, ey, ez = r[1] * ay, r[4] * ay, r[7] * ay
    elif ax == 0.0 and ay == 0.0:
        ex, ey, ez = r[2] * az, r[5] * az, r[8] * az
    else:
        ex, ey, ez = (r[0] * ax + r[1] * ay + r[2] * az, r[3] * ax + r[4] * ay + r[5] * az,
                      r[6] * ax + r[7] * ay + r[8] * az)
    if jtype == REVOLUTE:
        _set_column(ws, i, W_S, ex, ey, ez, 0.0, 0.0, 0.0)
    else:
        _set_column(ws, i, W_S, 0.0, 0.0, 0.0, ex, ey, ez)


@njit(cache=True, forceinline=True)
def _set_column(ws, i, s, a0, a1, a2, a3, a4, a5):
    ws[i, s], ws[i, s + 1], ws[i, s + 2], ws[i, s + 3], ws[i, s + 4], ws[i, s + 5] = a0, a1, a2, a3, a4, a5


@njit(cache=True, forceinline=True)
def _place_rotation(mf, i, r):
    """R_tree R_J for the placement rotation R_tree of body i and a joint rotation R_J (9-tuple, row-major)."""
    t0, t1, t2 = mf[i, MF_ROT], mf[i, MF_ROT + 1], mf[i, MF_ROT + 2]
    t3, t4, t5 = mf[i, MF_ROT + 3], mf[i, MF_ROT + 4], mf[i, MF_ROT + 5]
    t6, t7, t8 = mf[i, MF_ROT + 6], mf[i, MF_ROT + 7], mf[i, MF_ROT + 8]
    return (t0 * r[0] + t1 * r[3] + t2 * r[6], t0 * r[1] + t1 * r[4] + t2 * r[7], t0 * r[2] + t1 * r[5] + t2 * r[8],
            t3 * r[0] + t4 * r[3] + t5 * r[6], t3 * r[1] + t4 * r[4] + t5 * r[7], t3 * r[2] + t4 * r[5] + t5 * r[8],
            t6 * r[0] + t7 * r[3] + t8 * r[6], t6 * r[1] + t7 * r[4] + t8 * r[7], t6 * r[2] + t7 * r[5] + t8 * r[8])


@njit(cache=True, forceinline=True)
def _place_rotated(mf, i, k, c, s):
    """R_tree Rot(e_k, theta) with c = cos theta, s = sin theta (s negated for an axis along -e_k).

    Column k of R_tree stays; columns u = k+1 and w = k+2 (mod 3) become
    c t_u + s t_w and c t_w - s t_u.
    """
    u, w = (k + 1) % 3, (k + 2) % 3
    o = MF_ROT
    cu0, cu1, cu2 = mf[i, o + u], mf[i, o + 3 + u], mf[i, o + 6 + u]
    cw0, cw1, cw2 = mf[i, o + w], mf[i, o + 3 + w], mf[i, o + 6 + w]
    nu0, nu1, nu2 = c * cu0 + s * cw0, c * cu1 + s * cw1, c * cu2 + s * cw2
    nw0, nw1, nw2 = c * cw0 - s * cu0, c * cw1 - s * cu1, c * cw2 - s * cu2
    ck0, ck1, ck2 = mf[i, o + k], mf[i, o + 3 + k], mf[i, o + 6 + k]
    if k == 0:
        return (ck0, nu0, nw0, ck1, nu1, nw1, ck2, nu2, nw2)
    if k == 1:
        return (nw0, ck0, nu0, nw1, ck1, nu1, nw2, ck2, nu2)
    return (nu0, nw0, ck0, nu1, nw1, ck1, nu2, nw2, ck2)


@njit(cache=True, forceinline=True)
def _place_point(mf, i, x, y, z):
    """R_tree (x, y, z) + t_tree: a point of the joint frame in the parent's frame."""
    return (mf[i, MF_ROT] * x + mf[i, MF_ROT + 1] * y + mf[i, MF_ROT + 2] * z + mf[i, MF_TRANS],
            mf[i, MF_ROT + 3] * x + mf[i, MF_ROT + 4] * y + mf[i, MF_ROT + 5] * z + mf[i, MF_TRANS + 1],
            mf[i, MF_ROT + 6] * x + mf[i, MF_ROT + 7] * y + mf[i, MF_ROT + 8] * z + mf[i, MF_TRANS + 2])


@njit(cache=True, forceinline=True)
def joint_integrate(jtype, q, iq, v, iv, dt, out):
    """q_J (+) v_J dt for one joint (Pinocchio's ``integrate``); ``out`` may be ``q``.

    1-DOF joints add; the free-flyer composes its pose with exp(v dt) of the
    body-frame twist (SE(3) exponential), keeping a unit quaternion in the
    hemisphere of the input one.
    """
    if jtype != FREE_FLYER:
        out[iq] = q[iq] + v[iv] * dt
        return
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
    c1x, c1y, c1z = cross(wx, wy, wz, vx, vy, vz)
    c2x, c2y, c2z = cross(wx, wy, wz, c1x, c1y, c1z)
    px, py, pz = vx + a * c1x + b * c2x, vy + a * c1y + b * c2y, vz + a * c1z + b * c2z
    x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
    # rotate p_inc by the current orientation (unit quaternion)
    tx, ty, tz = cross(x, y, z, px, py, pz)
    tx, ty, tz = 2 * tx, 2 * ty, 2 * tz
    ux, uy, uz = cross(x, y, z, tx, ty, tz)
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


@njit(cache=True, forceinline=True)
def joint_configuration_rate(jtype, q, iq, v, iv, out):
    """dq_J/dt for one joint: 1-DOF joints copy v; the free-flyer gives [R v_lin; 0.5 q (x) [omega; 0]]."""
    if jtype != FREE_FLYER:
        out[iq] = v[iv]
        return
    x, y, z, w = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
    vx, vy, vz = v[iv], v[iv + 1], v[iv + 2]
    tx, ty, tz = cross(x, y, z, vx, vy, vz)
    tx, ty, tz = 2 * tx, 2 * ty, 2 * tz
    ux, uy, uz = cross(x, y, z, tx, ty, tz)
    out[iq], out[iq + 1], out[iq + 2] = vx + w * tx + ux, vy + w * ty + uy, vz + w * tz + uz
    bx, by, bz = v[iv + 3], v[iv + 4], v[iv + 5]
    out[iq + 3] = 0.5 * (w * bx + y * bz - z * by)
    out[iq + 4] = 0.5 * (w * by - x * bz + z * bx)
    out[iq + 5] = 0.5 * (w * bz + x * by - y * bx)
    out[iq + 6] = 0.5 * (-x * bx - y * by - z * bz)
