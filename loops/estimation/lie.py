"""SO(3) and SE_K(3) in closed form, for the estimators' compiled steps (no allocation: 3-vectors and 3 x 3
matrices are tuples, rotations row-major 9-tuples).

* :func:`exp_so3`, :func:`log_so3`: Rodrigues' formula and its inverse (Barfoot, "State Estimation for
  Robotics", 2017, eqs. 7.14 and 7.18-7.20).
* :func:`left_jacobian`: J_l(phi) of SO(3) (Barfoot eq. 7.77a), which also maps the translational parts of
  the exponential of SE_K(3): Exp([phi; rho_1; ...; rho_K]) = [Exp(phi), J_l(phi) rho_1, ..., J_l(phi) rho_K]
  (Hartley et al., "Contact-aided invariant extended Kalman filtering for robot state estimation", IJRR
  2020, Appendix A, eq. 48).
* :func:`matrix_to_quaternion`, :func:`quaternion_to_matrix`: Pinocchio's ``[x, y, z, w]`` order
  (Shepperd's method for the first).
"""
from __future__ import annotations

import math

from numba import njit

SMALL_ANGLE = 1e-7   # rad: below it the series of the closed forms are used


@njit(cache=True, inline="always")
def cross3(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True, inline="always")
def rot_apply(r, x, y, z):
    """R [x, y, z] for a row-major 9-tuple R."""
    return (r[0] * x + r[1] * y + r[2] * z, r[3] * x + r[4] * y + r[5] * z, r[6] * x + r[7] * y + r[8] * z)


@njit(cache=True, inline="always")
def rot_apply_t(r, x, y, z):
    """R^T [x, y, z]."""
    return (r[0] * x + r[3] * y + r[6] * z, r[1] * x + r[4] * y + r[7] * z, r[2] * x + r[5] * y + r[8] * z)


@njit(cache=True, inline="always")
def rot_mul(a, b):
    """A B of two row-major 9-tuples."""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8],
            a[3] * b[0] + a[4] * b[3] + a[5] * b[6], a[3] * b[1] + a[4] * b[4] + a[5] * b[7],
            a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@njit(cache=True, inline="always")
def rot_transpose(r):
    return (r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8])


@njit(cache=True, inline="always")
def rot_read(a, o):
    """The 9-tuple stored at ``a[o:o + 9]``."""
    return (a[o], a[o + 1], a[o + 2], a[o + 3], a[o + 4], a[o + 5], a[o + 6], a[o + 7], a[o + 8])


@njit(cache=True, inline="always")
def rot_write(a, o, r):
    for k in range(9):
        a[o + k] = r[k]


@njit(cache=True)
def exp_so3(wx, wy, wz):
    """Exp(w): R = I + sin(t)/t [w]x + (1 - cos(t))/t^2 [w]x^2, t = |w|."""
    t2 = wx * wx + wy * wy + wz * wz
    t = math.sqrt(t2)
    if t < SMALL_ANGLE:
        a, b = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0
    else:
        a, b = math.sin(t) / t, (1.0 - math.cos(t)) / t2
    xx, yy, zz, xy, xz, yz = wx * wx, wy * wy, wz * wz, wx * wy, wx * wz, wy * wz
    return (1.0 - b * (yy + zz), -a * wz + b * xy, a * wy + b * xz,
            a * wz + b * xy, 1.0 - b * (xx + zz), -a * wx + b * yz,
            -a * wy + b * xz, a * wx + b * yz, 1.0 - b * (xx + yy))


@njit(cache=True)
def log_so3(r):
    """Log(R) as a 3-vector (angle in [0, pi]); near pi from the symmetric part."""
    c = 0.5 * (r[0] + r[4] + r[8] - 1.0)
    c = min(1.0, max(-1.0, c))
    t = math.acos(c)
    vx, vy, vz = r[7] - r[5], r[2] - r[6], r[3] - r[1]   # 2 sin(t) axis
    if t < SMALL_ANGLE:
        return 0.5 * vx, 0.5 * vy, 0.5 * vz
    if t < math.pi - 1e-6:
        f = 0.5 * t / math.sin(t)
        return f * vx, f * vy, f * vz
    # t ~ pi: axis from the largest diagonal of (R + I) / 2 = a a^T
    xx, yy, zz = 0.5 * (r[0] + 1.0), 0.5 * (r[4] + 1.0), 0.5 * (r[8] + 1.0)
    if xx >= yy and xx >= zz:
        ax = math.sqrt(max(xx, 0.0))
        ay, az = 0.25 * (r[1] + r[3]) / ax, 0.25 * (r[2] + r[6]) / ax
    elif yy >= zz:
        ay = math.sqrt(max(yy, 0.0))
        ax, az = 0.25 * (r[1] + r[3]) / ay, 0.25 * (r[5] + r[7]) / ay
    else:
        az = math.sqrt(max(zz, 0.0))
        ax, ay = 0.25 * (r[2] + r[6]) / az, 0.25 * (r[5] + r[7]) / az
    return t * ax, t * ay, t * az


@njit(cache=True)
def left_jacobian(wx, wy, wz):
    """J_l(w) = I + (1 - cos t)/t^2 [w]x + (t - sin t)/t^3 [w]x^2 (row-major 9-tuple)."""
    t2 = wx * wx + wy * wy + wz * wz
    t = math.sqrt(t2)
    if t < SMALL_ANGLE:
        a, b = 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0
    else:
        a, b = (1.0 - math.cos(t)) / t2, (t - math.sin(t)) / (t2 * t)
    xx, yy, zz, xy, xz, yz = wx * wx, wy * wy, wz * wz, wx * wy, wx * wz, wy * wz
    return (1.0 - b * (yy + zz), -a * wz + b * xy, a * wy + b * xz,
            a * wz + b * xy, 1.0 - b * (xx + zz), -a * wx + b * yz,
            -a * wy + b * xz, a * wx + b * yz, 1.0 - b * (xx + yy))


@njit(cache=True)
def orthonormalise(r):
    """The rotation nearest to a nearly orthonormal R (one step of R (3 I - R^T R) / 2), against the
    rounding that products of many exponentials accumulate."""
    e = rot_mul(rot_transpose(r), r)
    c = (1.5 - 0.5 * e[0], -0.5 * e[1], -0.5 * e[2], -0.5 * e[3], 1.5 - 0.5 * e[4], -0.5 * e[5],
         -0.5 * e[6], -0.5 * e[7], 1.5 - 0.5 * e[8])
    return rot_mul(r, c)


@njit(cache=True)
def quaternion_to_matrix(x, y, z, w):
    """Rotation of the quaternion [x, y, z, w] (normalised here)."""
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
            2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y))


@njit(cache=True)
def matrix_to_quaternion(r):
    """[x, y, z, w] of R with w >= 0 (Shepperd: from the largest of w, x, y, z)."""
    tr = r[0] + r[4] + r[8]
    if tr >= r[0] and tr >= r[4] and tr >= r[8]:
        s = 2.0 * math.sqrt(1.0 + tr)
        w, x, y, z = 0.25 * s, (r[7] - r[5]) / s, (r[2] - r[6]) / s, (r[3] - r[1]) / s
    elif r[0] >= r[4] and r[0] >= r[8]:
        s = 2.0 * math.sqrt(1.0 + r[0] - r[4] - r[8])
        w, x, y, z = (r[7] - r[5]) / s, 0.25 * s, (r[1] + r[3]) / s, (r[2] + r[6]) / s
    elif r[4] >= r[8]:
        s = 2.0 * math.sqrt(1.0 + r[4] - r[0] - r[8])
        w, x, y, z = (r[2] - r[6]) / s, (r[1] + r[3]) / s, 0.25 * s, (r[5] + r[7]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + r[8] - r[0] - r[4])
        w, x, y, z = (r[3] - r[1]) / s, (r[2] + r[6]) / s, (r[5] + r[7]) / s, 0.25 * s
    if w < 0.0:
        return -x, -y, -z, -w
    return x, y, z, w


@njit(cache=True)
def tilt_from_gravity(fx, fy, fz):
    """A rotation R (body to world, yaw zero) whose R^T e_z is the direction of the specific force
    ``f`` measured at rest (it points up): roll = atan2(f_y, f_z), pitch = atan2(-f_x, |(f_y, f_z)|)."""
    roll = math.atan2(fy, fz)
    pitch = math.atan2(-fx, math.sqrt(fy * fy + fz * fz))
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    return (cp, sp * sr, sp * cr, 0.0, cr, -sr, -sp, cp * sr, cp * cr)
