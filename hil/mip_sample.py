"""The emulated MIP IMU's sample, compiled: the truth in the sensor frame, and the IMU data packet's bytes.

A plant-clocked emulator (:mod:`hil.device_clock`) keeps up with a loop that may run several times faster
than real time, so its work per sample is two compiled calls rather than some forty NumPy and ``struct``
calls. :func:`measure` is one sample: :func:`body_truth` turns a
:class:`hil.truth_feed.TruthFeed` sample into the sensor-axes specific force ``R^T (a - g)``, angular rate
``R^T omega`` and MIP's NED attitude, and the datasheet's errors are applied to them
(:func:`hil.imu_noise.apply_errors`); :func:`pack_data` writes the IMU data packet of the fields due
(3DM-GX5 DCP 6.1-6.4: big-endian IEEE 754 values, the Fletcher checksum).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip.driver import WORLD_FROM_NED

from .imu_noise import DRAWS, G0, apply_errors
from .truth_feed import ACC, GRAVITY, OMEGA, QUAT

# A sample's values (float64): accelerometer (g), gyro (rad/s), attitude quaternion in NED (w, x, y, z).
M_ACCEL, M_GYRO, M_QUAT = 0, 3, 6
M_SIZE = 10
NED_FROM_WORLD = np.array((-WORLD_FROM_NED[0], -WORLD_FROM_NED[1], -WORLD_FROM_NED[2], WORLD_FROM_NED[3]))
MAX_DATA_PACKET = 4 + 4 * 14 + 18 + 14 + 2   # header, four 3-float fields, the quaternion, the GPS time, checksum


@njit(cache=True)
def body_truth(truth, ned_from_world, force, rate, sample):
    """``force`` and ``rate`` (3, sensor axes: ``R^T (a - g)`` and ``R^T omega``) of a truth sample, and its
    attitude in NED as ``sample[M_QUAT:]`` (w, x, y, z; w >= 0)."""
    x, y, z, w = truth[QUAT], truth[QUAT + 1], truth[QUAT + 2], truth[QUAT + 3]
    r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)
    r10, r11, r12 = 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)
    r20, r21, r22 = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)
    fx, fy, fz = truth[ACC] - truth[GRAVITY], truth[ACC + 1] - truth[GRAVITY + 1], truth[ACC + 2] - truth[GRAVITY + 2]
    wx, wy, wz = truth[OMEGA], truth[OMEGA + 1], truth[OMEGA + 2]
    force[0], force[1], force[2] = r00 * fx + r10 * fy + r20 * fz, r01 * fx + r11 * fy + r21 * fz, \
        r02 * fx + r12 * fy + r22 * fz
    rate[0], rate[1], rate[2] = r00 * wx + r10 * wy + r20 * wz, r01 * wx + r11 * wy + r21 * wz, \
        r02 * wx + r12 * wy + r22 * wz
    ax, ay, az, aw = ned_from_world[0], ned_from_world[1], ned_from_world[2], ned_from_world[3]
    qx = aw * x + ax * w + ay * z - az * y
    qy = aw * y - ax * z + ay * w + az * x
    qz = aw * z + ax * y - ay * x + az * w
    qw = aw * w - ax * x - ay * y - az * z
    sign = 1.0 if qw >= 0.0 else -1.0
    sample[M_QUAT], sample[M_QUAT + 1], sample[M_QUAT + 2], sample[M_QUAT + 3] = sign * qw, sign * qx, sign * qy, \
        sign * qz


@njit(cache=True, inline="always")
def _put_f32(out, k, x, f32, u32):
    f32[0] = x
    bits = u32[0]
    out[k], out[k + 1], out[k + 2], out[k + 3] = (bits >> 24) & 0xFF, (bits >> 16) & 0xFF, (bits >> 8) & 0xFF, \
        bits & 0xFF


@njit(cache=True)
def pack_data(descriptors, sample, dt, tow, week, out, f32, u32, f64, u64):
    """Write the IMU data packet of ``descriptors`` (each field once) into ``out``; its length. Delta theta and
    delta velocity are the sample times ``dt``; the GPS timestamp is ``tow`` s into GPS week ``week`` with
    valid flags 0 (the device's internal time). ``f32``/``u32`` and ``f64``/``u64`` are one-element views of
    the same bytes (bit patterns without allocating)."""
    out[0], out[1], out[2] = P.SYNC1, P.SYNC2, P.SENSOR_DATA_SET
    k = 4
    for d in descriptors:
        if d == P.GPS_TIMESTAMP:
            out[k], out[k + 1] = 14, d
            f64[0] = tow
            bits = u64[0]
            for b in range(8):
                out[k + 2 + b] = (bits >> (56 - 8 * b)) & 0xFF
            out[k + 10], out[k + 11], out[k + 12], out[k + 13] = (week >> 8) & 0xFF, week & 0xFF, 0, 0
            k += 14
            continue
        n, at, scale = 3, M_ACCEL, 1.0
        if d == P.SCALED_GYRO:
            at = M_GYRO
        elif d == P.DELTA_THETA:
            at, scale = M_GYRO, dt
        elif d == P.DELTA_VELOCITY:
            scale = dt
        elif d == P.COMP_QUATERNION:
            n, at = 4, M_QUAT
        out[k], out[k + 1] = 2 + 4 * n, d
        for j in range(n):
            _put_f32(out, k + 2 + 4 * j, sample[at + j] * scale, f32, u32)
        k += 2 + 4 * n
    out[3] = k - 4
    a = b = 0
    for j in range(k):
        a = (a + out[j]) & 0xFF
        b = (b + a) & 0xFF
    out[k], out[k + 1] = a, b
    return k + 2


@njit(cache=True)
def measure(truth, dt, ned_from_world, accel_errors, accel_state, gyro_errors, gyro_state, draws, sample, force,
            rate):
    """One sample (``sample``: :data:`M_ACCEL` ...) of the device from a truth sample: the sensor-axes truth
    (:func:`body_truth`) with each triad's errors (:func:`hil.imu_noise.apply_errors`, from ``draws``: 2 x
    :data:`hil.imu_noise.DRAWS` standard normal values), the accelerometer in g."""
    body_truth(truth, ned_from_world, force, rate, sample)
    apply_errors(force, dt, accel_errors, accel_state, draws[:DRAWS], sample[M_ACCEL:M_ACCEL + 3])
    apply_errors(rate, dt, gyro_errors, gyro_state, draws[DRAWS:], sample[M_GYRO:M_GYRO + 3])
    for k in range(3):
        sample[M_ACCEL + k] /= G0
