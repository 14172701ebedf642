"""MuJoCo's free-joint state and rtctl's (Pinocchio's): ``qpos`` = ``[x, y, z, qw, qx, qy, qz]`` and ``qvel`` =
``[v_world; omega_body]`` against ``q`` = ``[x, y, z, qx, qy, qz, qw]`` and ``v`` = ``[v_body; omega_body]``
(:mod:`rtctl.plants.mujoco.model`); the other coordinates are the same in both."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _unit(w, x, y, z):
    """The quaternion (w, x, y, z) scaled to unit norm."""
    n = np.sqrt(w * w + x * x + y * y + z * z)
    return w / n, x / n, y / n, z / n


@njit(cache=True, inline="always")
def _rotation(w, x, y, z):
    """The rotation matrix of the unit quaternion (w, x, y, z), row by row (the free joint's base to world)."""
    return (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y))


@njit(cache=True)
def to_rtctl_state(qpos, qvel, free, q, v):
    """MuJoCo's ``qpos``, ``qvel`` as rtctl's ``q``, ``v`` (in place); ``free``: body 0 is a free flyer."""
    for k in range(qpos.shape[0]):
        q[k] = qpos[k]
    for k in range(qvel.shape[0]):
        v[k] = qvel[k]
    if free:
        w, x, y, z = _unit(qpos[3], qpos[4], qpos[5], qpos[6])
        q[3], q[4], q[5], q[6] = x, y, z, w
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rotation(w, x, y, z)
        a, b, c = qvel[0], qvel[1], qvel[2]
        v[0] = r00 * a + r10 * b + r20 * c
        v[1] = r01 * a + r11 * b + r21 * c
        v[2] = r02 * a + r12 * b + r22 * c


@njit(cache=True)
def to_mujoco_state(q, v, free, qpos, qvel):
    """rtctl's ``q``, ``v`` as MuJoCo's ``qpos``, ``qvel`` (in place); the inverse of :func:`to_rtctl_state`."""
    for k in range(q.shape[0]):
        qpos[k] = q[k]
    for k in range(v.shape[0]):
        qvel[k] = v[k]
    if free:
        w, x, y, z = _unit(q[6], q[3], q[4], q[5])
        qpos[3], qpos[4], qpos[5], qpos[6] = w, x, y, z
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rotation(w, x, y, z)
        a, b, c = v[0], v[1], v[2]
        qvel[0] = r00 * a + r01 * b + r02 * c
        qvel[1] = r10 * a + r11 * b + r12 * c
        qvel[2] = r20 * a + r21 * b + r22 * c
