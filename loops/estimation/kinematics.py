"""Leg kinematics in the IMU frame and the floating base's coordinates, for the estimators' compiled steps.

Leg kinematics: with the base coordinates at the neutral pose (base frame = world frame), rtctl's forward
kinematics (:func:`rtctl.dynamics.kernels.forward_kinematics`) places every foot in the base frame, and the
world-aligned point Jacobian (:func:`rtctl.dynamics.kernels.point_jacobian`) is then the base-frame Jacobian of
the foot with respect to the joint angles. In the IMU frame (mounted at ``R_m``, ``t_m`` on the base body):

    h(alpha)     = R_m^T (p_foot(alpha) - t_m)                    (Hartley et al. 2020, eq. 20: h_p)
    G            = R_m^T J J^T R_m                                (J over the joints, base frame)
    dh/dt        = R_m^T J alpha'                                 (the foot's velocity relative to the base)

so that joint noise of variance s^2 per joint gives h the covariance s^2 G (eq. 21: encoder noise through J)
and dh/dt the covariance s_v^2 G for joint-velocity noise s_v^2. Rows of ``feet_out`` (one per foot):
``[h (3), G (9), dh/dt (3)]``; :func:`foot_covariance` adds a foot-placement noise (the contact point moving
on the foot, model error).

Base coordinates: :func:`write_base` turns the estimate of the base body (world rotation R, position p,
world velocity of its origin, body angular velocity) into the model's base coordinates: for a free flyer
``q = [p; quaternion xyzw]``, ``v = [R^T v_world; omega_body]`` (Pinocchio's convention, rtctl.model); for the
Euler-angle chain (three prismatic joints along world axes, then three revolute joints about the body
axes of ``sequence``), the Tait-Bryan angles of R nearest the previous ones and their rates
``E(angles)^-1 omega_body``; for the planar base (two prismatic joints along world axes in the plane, then
one revolute joint about its normal, the seed biped's x, z, pitch), the in-plane position and velocity, the
angle of R about the normal (the 3D estimate projected on the plane: what leaves it, a roll or a yaw the
sensors' noise gives the filter, is dropped) and the body rate about it.
"""
from __future__ import annotations

import math

from numba import njit

from rtctl.dynamics.kernels import W_O, W_R, forward_kinematics, point_jacobian

from .lie import matrix_to_quaternion, quaternion_to_matrix, rot_apply, rot_apply_t, rot_mul
from .linalg import inverse_quadratic3

BASE_FREE_FLYER, BASE_EULER, BASE_PLANAR = 0, 1, 2
FOOT_WIDTH = 15          # per foot: h (3), G = J J^T in the IMU frame (9), dh/dt (3)
F_H, F_JJT, F_HDOT = 0, 3, 12
# Integer configuration cfg_i: base kind, base coordinates in q and v, the Euler chain's axes (prismatic 0-2,
# revolute 0-2, as coordinate indices), then each foot's body
CI_KIND, CI_NBQ, CI_NBV, CI_AXES, CI_FEET = 0, 1, 2, 3, 9
# Float configuration cfg_f: the IMU's mount on the base body (R_m row-major, t_m), [encoder variance,
# foot-position variance] (foot_covariance), the contact input [source, force on, force off]
# (loops.estimation.common), the divergence check [normal quantile, most cycles without an accepted foot],
# then each foot's contact point in its body
CF_MOUNT, CF_NOISE, CF_CONTACT, CF_MONITOR, CF_POINTS = 0, 12, 14, 17, 19


@njit(cache=True)
def leg_kinematics(mi, mf, ws, q, v, qk, cfg_i, cfg_f, jac, feet_out):
    """Every foot's ``[h, G, dh/dt]`` into ``feet_out`` (module docstring) at joint positions ``q`` and
    velocities ``v`` (their base entries are not read); ``qk`` (nq) holds the neutral base coordinates (only its
    joint entries are written); ``cfg_i``, ``cfg_f`` the configuration (``CI_*``, ``CF_*``); ``jac`` (6, nv)
    scratch."""
    nq, nv = q.shape[0], v.shape[0]
    n_base_q, n_base_v = cfg_i[CI_NBQ], cfg_i[CI_NBV]
    for i in range(n_base_q, nq):
        qk[i] = q[i]
    forward_kinematics(mi, mf, ws, qk)
    mount = cfg_f[CF_MOUNT:CF_MOUNT + 12]
    rm = (mount[0], mount[1], mount[2], mount[3], mount[4], mount[5], mount[6], mount[7], mount[8])
    for f in range(feet_out.shape[0]):
        b = cfg_i[CI_FEET + f]
        o = CF_POINTS + 3 * f
        px, py, pz = cfg_f[o], cfg_f[o + 1], cfg_f[o + 2]
        ox, oy, oz = rot_apply((ws[b, W_R], ws[b, W_R + 1], ws[b, W_R + 2], ws[b, W_R + 3], ws[b, W_R + 4],
                                ws[b, W_R + 5], ws[b, W_R + 6], ws[b, W_R + 7], ws[b, W_R + 8]), px, py, pz)
        x, y, z = ws[b, W_O] + ox - mount[9], ws[b, W_O + 1] + oy - mount[10], ws[b, W_O + 2] + oz - mount[11]
        out = feet_out[f]
        out[F_H], out[F_H + 1], out[F_H + 2] = rot_apply_t(rm, x, y, z)
        point_jacobian(mi, ws, b, px, py, pz, jac)
        # C = J J^T over the joints' columns (rows 3..5: linear), then R_m^T C R_m
        c00 = c01 = c02 = c11 = c12 = c22 = 0.0
        dx = dy = dz = 0.0
        for j in range(n_base_v, nv):
            a0, a1, a2 = jac[3, j], jac[4, j], jac[5, j]
            c00 += a0 * a0
            c01 += a0 * a1
            c02 += a0 * a2
            c11 += a1 * a1
            c12 += a1 * a2
            c22 += a2 * a2
            dx += a0 * v[j]
            dy += a1 * v[j]
            dz += a2 * v[j]
        c = (c00, c01, c02, c01, c11, c12, c02, c12, c22)
        for col in range(3):   # R_m^T C R_m, column by column
            m0, m1, m2 = rot_apply_t(rm, c[col], c[3 + col], c[6 + col])   # (R_m^T C)[:, col]
            out[F_JJT + col], out[F_JJT + 3 + col], out[F_JJT + 6 + col] = m0, m1, m2
        for row in range(3):
            r0, r1, r2 = out[F_JJT + 3 * row], out[F_JJT + 3 * row + 1], out[F_JJT + 3 * row + 2]
            out[F_JJT + 3 * row] = r0 * mount[0] + r1 * mount[3] + r2 * mount[6]
            out[F_JJT + 3 * row + 1] = r0 * mount[1] + r1 * mount[4] + r2 * mount[7]
            out[F_JJT + 3 * row + 2] = r0 * mount[2] + r1 * mount[5] + r2 * mount[8]
        out[F_HDOT], out[F_HDOT + 1], out[F_HDOT + 2] = rot_apply_t(rm, dx, dy, dz)


@njit(cache=True, inline="always")
def foot_covariance(feet, k, r, joint_variance, foot_variance):
    """R (joint_variance G_k + foot_variance I) R^T: the covariance of foot k's kinematics rotated by R (e.g.
    into the world), row-major 9-tuple."""
    a = joint_variance
    c = (a * feet[k, F_JJT] + foot_variance, a * feet[k, F_JJT + 1], a * feet[k, F_JJT + 2],
         a * feet[k, F_JJT + 3], a * feet[k, F_JJT + 4] + foot_variance, a * feet[k, F_JJT + 5],
         a * feet[k, F_JJT + 6], a * feet[k, F_JJT + 7], a * feet[k, F_JJT + 8] + foot_variance)
    return rot_mul(rot_mul(r, c), (r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8]))


@njit(cache=True)
def foot_moves(feet, k, r, v, w, cov_v, joint_variance, rate_variance, slip_speed, gate):
    """Foot k, in contact, moves over the ground: its velocity u = v + R (w x h_k + dh_k/dt) (``v`` the IMU's
    world velocity, ``w`` its bias-corrected rate) is faster than ``slip_speed``, or its normalised square
    u^T (Cov[v] + N)^-1 u exceeds ``gate``, N = R (joint_variance G_k + rate_variance |h_k|^2 I) R^T the
    leg's own velocity noise (joint velocities through J, the rate sample's through h_k); ``cov_v`` the
    9-tuple of the velocity estimate's covariance."""
    hx, hy, hz = feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2]
    cx, cy, cz = w[1] * hz - w[2] * hy, w[2] * hx - w[0] * hz, w[0] * hy - w[1] * hx
    ux, uy, uz = rot_apply(r, cx + feet[k, F_HDOT], cy + feet[k, F_HDOT + 1], cz + feet[k, F_HDOT + 2])
    ux, uy, uz = ux + v[0], uy + v[1], uz + v[2]
    if ux * ux + uy * uy + uz * uz > slip_speed * slip_speed:
        return True
    n = foot_covariance(feet, k, r, joint_variance, rate_variance * (hx * hx + hy * hy + hz * hz))
    s = (cov_v[0] + n[0], cov_v[1] + n[1], cov_v[2] + n[2], cov_v[3] + n[3], cov_v[4] + n[4], cov_v[5] + n[5],
         cov_v[6] + n[6], cov_v[7] + n[7], cov_v[8] + n[8])
    return inverse_quadratic3(s, ux, uy, uz) > gate


@njit(cache=True, inline="always")
def _axis_rotation(axis, angle):
    """Rotation by ``angle`` about coordinate axis ``axis`` (0 x, 1 y, 2 z), row-major."""
    c, s = math.cos(angle), math.sin(angle)
    if axis == 0:
        return (1.0, 0.0, 0.0, 0.0, c, -s, 0.0, s, c)
    if axis == 1:
        return (c, 0.0, s, 0.0, 1.0, 0.0, -s, 0.0, c)
    return (c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0)


@njit(cache=True, inline="always")
def _unit(axis):
    return (1.0 if axis == 0 else 0.0, 1.0 if axis == 1 else 0.0, 1.0 if axis == 2 else 0.0)


@njit(cache=True, inline="always")
def _rate_columns(i, j, k, b, c):
    """The columns of E with omega_body = E [a', b', c'] for R = R_i(a) R_j(b) R_k(c):
    R_k(c)^T R_j(b)^T u_i, R_k(c)^T u_j, u_k."""
    rc, rb = _axis_rotation(k, c), _axis_rotation(j, b)
    ui, uj = _unit(i), _unit(j)
    t = rot_apply_t(rb, ui[0], ui[1], ui[2])
    return rot_apply_t(rc, t[0], t[1], t[2]), rot_apply_t(rc, uj[0], uj[1], uj[2]), _unit(k)


@njit(cache=True)
def tait_bryan_angles(r, i, j, k):
    """Angles (a, b, c) with R = R_i(a) R_j(b) R_k(c) for distinct axes i, j, k; b in [-pi/2, pi/2]."""
    sign = 1.0 if (j - i) % 3 == 1 else -1.0   # +1 for the cyclic orders xyz, yzx, zxy
    s = sign * r[3 * i + k]
    b = math.asin(min(1.0, max(-1.0, s)))
    a = math.atan2(-sign * r[3 * j + k], r[3 * k + k])
    c = math.atan2(-sign * r[3 * i + j], r[3 * i + i])
    return a, b, c


@njit(cache=True, inline="always")
def _nearest(angle, previous):
    """``angle`` plus the multiple of 2 pi that brings it nearest ``previous`` (keeps a yaw continuous)."""
    return angle + 2.0 * math.pi * round((previous - angle) / (2.0 * math.pi))


@njit(cache=True)
def write_base(kind, axes, r, p, vel, omega, q, v):
    """The base coordinates of ``q`` and ``v`` from the base body's world rotation ``r`` (9-tuple), position
    ``p``, origin velocity ``vel`` (world) and angular velocity ``omega`` (body axes) (module docstring).
    ``axes`` = [prismatic axis 0, 1, 2, revolute axis 0, 1, 2] as coordinate indices (Euler chain)."""
    if kind == BASE_FREE_FLYER:
        q[0], q[1], q[2] = p[0], p[1], p[2]
        q[3], q[4], q[5], q[6] = matrix_to_quaternion(r)
        v[0], v[1], v[2] = rot_apply_t(r, vel[0], vel[1], vel[2])
        v[3], v[4], v[5] = omega[0], omega[1], omega[2]
        return
    if kind == BASE_PLANAR:
        for k in range(2):
            q[k] = p[axes[k]]
            v[k] = vel[axes[k]]
        j = axes[2]
        a, b = (j + 1) % 3, (j + 2) % 3   # R_j(t): R[b][a] = sin t, R[a][a] = R[b][b] = cos t
        q[2] = _nearest(math.atan2(r[3 * b + a] - r[3 * a + b], r[3 * a + a] + r[3 * b + b]), q[2])
        v[2] = omega[j]
        return
    for k in range(3):
        q[k] = p[axes[k]]
        v[k] = vel[axes[k]]
    i, j, k = axes[3], axes[4], axes[5]
    a, b, c = tait_bryan_angles(r, i, j, k)
    q[3], q[4], q[5] = _nearest(a, q[3]), b, _nearest(c, q[5])
    e0, e1, e2 = _rate_columns(i, j, k, b, c)
    # Cramer's rule for E x = omega (singular only at gimbal lock, |b| = pi/2)
    det = (e0[0] * (e1[1] * e2[2] - e1[2] * e2[1]) - e1[0] * (e0[1] * e2[2] - e0[2] * e2[1])
           + e2[0] * (e0[1] * e1[2] - e0[2] * e1[1]))
    wx, wy, wz = omega[0], omega[1], omega[2]
    v[3] = (wx * (e1[1] * e2[2] - e1[2] * e2[1]) - e1[0] * (wy * e2[2] - wz * e2[1])
            + e2[0] * (wy * e1[2] - wz * e1[1])) / det
    v[4] = (e0[0] * (wy * e2[2] - wz * e2[1]) - wx * (e0[1] * e2[2] - e0[2] * e2[1])
            + e2[0] * (e0[1] * wz - e0[2] * wy)) / det
    v[5] = (e0[0] * (e1[1] * wz - e1[2] * wy) - e1[0] * (e0[1] * wz - e0[2] * wy)
            + wx * (e0[1] * e1[2] - e0[2] * e1[1])) / det


@njit(cache=True)
def read_base(kind, axes, q, v, out):
    """The inverse of :func:`write_base`: ``out`` = [R (9), p (3), world velocity (3), body omega (3)] from the
    base coordinates of ``q``, ``v``."""
    if kind == BASE_FREE_FLYER:
        r = quaternion_to_matrix(q[3], q[4], q[5], q[6])
        p = (q[0], q[1], q[2])
        vel = rot_apply(r, v[0], v[1], v[2])
        omega = (v[3], v[4], v[5])
    elif kind == BASE_PLANAR:
        j = axes[2]
        r = _axis_rotation(j, q[2])
        u0, u1 = _unit(axes[0]), _unit(axes[1])
        p = (u0[0] * q[0] + u1[0] * q[1], u0[1] * q[0] + u1[1] * q[1], u0[2] * q[0] + u1[2] * q[1])
        vel = (u0[0] * v[0] + u1[0] * v[1], u0[1] * v[0] + u1[1] * v[1], u0[2] * v[0] + u1[2] * v[1])
        u = _unit(j)
        omega = (u[0] * v[2], u[1] * v[2], u[2] * v[2])
    else:
        i, j, k = axes[3], axes[4], axes[5]
        ra, rb, rc = _axis_rotation(i, q[3]), _axis_rotation(j, q[4]), _axis_rotation(k, q[5])
        r = rot_mul(rot_mul(ra, rb), rc)
        px = py = pz = vx = vy = vz = 0.0
        for n in range(3):
            if axes[n] == 0:
                px, vx = q[n], v[n]
            elif axes[n] == 1:
                py, vy = q[n], v[n]
            else:
                pz, vz = q[n], v[n]
        p, vel = (px, py, pz), (vx, vy, vz)
        e0, e1, e2 = _rate_columns(i, j, k, q[4], q[5])
        omega = (e0[0] * v[3] + e1[0] * v[4] + e2[0] * v[5], e0[1] * v[3] + e1[1] * v[4] + e2[1] * v[5],
                 e0[2] * v[3] + e1[2] * v[4] + e2[2] * v[5])
    for n in range(9):
        out[n] = r[n]
    for n in range(3):
        out[9 + n], out[12 + n], out[15 + n] = p[n], vel[n], omega[n]


@njit(cache=True)
def write_estimate(cfg_i, cfg_f, r_imu, p_imu, v_imu, w_imu, q, v):
    """The base coordinates of ``q`` and ``v`` from the IMU's world rotation ``r_imu``, position, velocity and
    angular rate (IMU axes): R_b = R_i R_m^T, p_b = p_i - R_b t_m, omega_b = R_m w_i (body axes),
    v_b = v_i - (R_b omega_b) x (R_b t_m) (the IMU's origin moves with the base body)."""
    m = cfg_f[CF_MOUNT:CF_MOUNT + 12]
    rm_t = (m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8])
    rb = rot_mul(r_imu, rm_t)
    tx, ty, tz = rot_apply(rb, m[9], m[10], m[11])
    wb = rot_apply_t(rm_t, w_imu[0], w_imu[1], w_imu[2])   # R_m w_i
    wx, wy, wz = rot_apply(rb, wb[0], wb[1], wb[2])
    p = (p_imu[0] - tx, p_imu[1] - ty, p_imu[2] - tz)
    vel = (v_imu[0] - (wy * tz - wz * ty), v_imu[1] - (wz * tx - wx * tz), v_imu[2] - (wx * ty - wy * tx))
    axes = cfg_i[CI_AXES:CI_AXES + 6]
    write_base(cfg_i[CI_KIND], axes, rb, p, vel, wb, q, v)
