"""The joint model: everything the kernels know about joint types, in one place.

:func:`jcalc` is Featherstone's joint calculation (RBDA sec. 4.4, Table 4.1;
``jcalc`` of spatial_v2): from the joint type, its axis and its coordinates it
gives the joint transform X_J(q) and the motion subspace S. Every recursive
algorithm (forward kinematics, RNEA, CRBA, ABA, Jacobians) reads joints only
through it -- the forward kinematics calls it and leaves S in world axes in the
workspace (``W_S``) for the others. For every joint type here S is constant in
body coordinates (Featherstone's c_J = 0), so in world axes d/dt S = omega x S;
the twist-rate recursions rely on that.

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

from ..model import FREE_FLYER, REVOLUTE
from .spatial import cross
from .workspace import DOF_WIDTH, W_O, W_R, W_S


@njit(cache=True, forceinline=True)
def jcalc(jtype, ax, ay, az, q, iq, ws, i):
    """Joint transform X_J(q) and motion subspace S of body i's joint (RBDA Table 4.1); returns its nv.

    ``(ax, ay, az)`` is the joint axis and ``q[iq:]`` its coordinates. Writes X_J,
    the pose of the body frame in the joint frame, to the body's pose columns
    (rotation row-major at ``W_R``, translation at ``W_O``), where
    :func:`~rtctl.dynamics.kinematics.forward_kinematics` turns it into the
    world pose, and column j of S in body axes, [angular; linear], to
    ``ws[i, W_S + DOF_WIDTH j : W_S + DOF_WIDTH j + 6]``.
    """
    if jtype == FREE_FLYER:
        qx, qy, qz, qw = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
        ws[i, W_R + 0] = 1 - 2 * (qy * qy + qz * qz)
        ws[i, W_R + 1] = 2 * (qx * qy - qz * qw)
        ws[i, W_R + 2] = 2 * (qx * qz + qy * qw)
        ws[i, W_R + 3] = 2 * (qx * qy + qz * qw)
        ws[i, W_R + 4] = 1 - 2 * (qx * qx + qz * qz)
        ws[i, W_R + 5] = 2 * (qy * qz - qx * qw)
        ws[i, W_R + 6] = 2 * (qx * qz - qy * qw)
        ws[i, W_R + 7] = 2 * (qy * qz + qx * qw)
        ws[i, W_R + 8] = 1 - 2 * (qx * qx + qy * qy)
        ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2] = q[iq], q[iq + 1], q[iq + 2]
        for j in range(6):
            s = W_S + DOF_WIDTH * j
            for k in range(6):
                ws[i, s + k] = 1.0 if k == (j + 3) % 6 else 0.0  # v = [v_lin; omega]: S = [[0, 1], [1, 0]]
        return 6
    th = q[iq]
    if jtype == REVOLUTE:
        # Rodrigues: cos th 1 + sin th a~ + (1 - cos th) a a^T
        c, sn = np.cos(th), np.sin(th)
        v = 1.0 - c
        ws[i, W_R + 0], ws[i, W_R + 1], ws[i, W_R + 2] = c + ax * ax * v, ax * ay * v - az * sn, ax * az * v + ay * sn
        ws[i, W_R + 3], ws[i, W_R + 4], ws[i, W_R + 5] = ay * ax * v + az * sn, c + ay * ay * v, ay * az * v - ax * sn
        ws[i, W_R + 6], ws[i, W_R + 7], ws[i, W_R + 8] = az * ax * v - ay * sn, az * ay * v + ax * sn, c + az * az * v
        ws[i, W_O] = ws[i, W_O + 1] = ws[i, W_O + 2] = 0.0
        ws[i, W_S], ws[i, W_S + 1], ws[i, W_S + 2] = ax, ay, az
        ws[i, W_S + 3] = ws[i, W_S + 4] = ws[i, W_S + 5] = 0.0
        return 1
    for k in range(9):
        ws[i, W_R + k] = 1.0 if k % 4 == 0 else 0.0
    ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2] = ax * th, ay * th, az * th
    ws[i, W_S] = ws[i, W_S + 1] = ws[i, W_S + 2] = 0.0
    ws[i, W_S + 3], ws[i, W_S + 4], ws[i, W_S + 5] = ax, ay, az
    return 1


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
