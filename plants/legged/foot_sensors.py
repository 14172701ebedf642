"""Force-torque sensors at the feet of the legged plant: what they read, and the ground wrenches a controller
takes from them.

A real legged robot does not know its ground's stiffness: it measures the force under each foot (a six-axis
force-torque sensor above the sole, a three-axis load cell in a point foot). The two compiled, allocation-free
kernels here are the two sides of that measurement, both in Featherstone's (RBDA 2008, sec. 2.8) order
``[torque; force]``:

* :func:`foot_sensor_wrench` (the plant, :meth:`rtctl.plants.legged.plant.LeggedPlant.sensor_wrench`): the
  ground reaction at the contact points of the sensor's body, ``F_c`` at ``C_c`` (world axes, the contact
  model's last evaluation, :meth:`~rtctl.plants.legged.plant.LeggedPlant.foot_forces`), as the wrench the
  ground exerts across the sensor about its point ``P = O + R p`` in its axes ``A = R R_m``:
  ``f = A^T sum F_c``, ``n = A^T sum (C_c - P) x F_c``. Between the sole and the ground nothing else
  is carried: the sole's mass is the foot body's, the sensor reads the ground alone.
* :func:`measured_ground_wrenches` (the controllers, ``ground_force = "sensors"``,
  :mod:`rtctl.plants.legged.control`): the inverse, each sensor's reading back to the external wrench on
  its body about the body's origin in world axes, ``f_w = A f``, ``n_O = A n + (R p) x f_w``, at the
  measured configuration -- the ``w^F`` of Shah, Saha & Dutt (2012), eqs. 17 and 20, which eqs. 26-27 take as
  ``tau^F = N^T w^F`` -- in place of the contact model evaluated at the measured base state.
"""
from __future__ import annotations

from numba import njit

from rtctl.dynamics.kernels import W_R, forward_kinematics

__all__ = ["foot_sensor_wrench", "measured_ground_wrenches"]


@njit(cache=True, inline="always")
def _axes(ws, body, mount, k):
    """Sensor axis ``k`` in world axes: ``R`` times column ``k`` of ``R_m``."""
    ax, ay, az = mount[k], mount[3 + k], mount[6 + k]
    return (ws[body, W_R] * ax + ws[body, W_R + 1] * ay + ws[body, W_R + 2] * az,
            ws[body, W_R + 3] * ax + ws[body, W_R + 4] * ay + ws[body, W_R + 5] * az,
            ws[body, W_R + 6] * ax + ws[body, W_R + 7] * ay + ws[body, W_R + 8] * az)


@njit(cache=True, inline="always")
def _rotate(ws, body, x, y, z):
    """``R x`` for body ``body``'s rotation ``R`` in ``ws``."""
    return (ws[body, W_R] * x + ws[body, W_R + 1] * y + ws[body, W_R + 2] * z,
            ws[body, W_R + 3] * x + ws[body, W_R + 4] * y + ws[body, W_R + 5] * z,
            ws[body, W_R + 6] * x + ws[body, W_R + 7] * y + ws[body, W_R + 8] * z)


@njit(cache=True)
def foot_sensor_wrench(mi, mf, ws, q, grf, bodies, points, body, mount, out):
    """The reading ``out`` (6) of a force-torque sensor fixed in ``body`` at ``mount`` (R_m row-major, then p,
    both in the body's frame) under the ground reactions ``grf`` (nc, 3, world axes) at the contact points
    ``points`` (nc, 3) of ``bodies`` (nc,), configuration ``q`` (module docstring). False when ``body``
    carries no contact point (``out`` untouched)."""
    found = False
    for c in range(bodies.shape[0]):
        found = found or bodies[c] == body
    if not found:
        return False
    forward_kinematics(mi, mf, ws, q)
    rx, ry, rz = _rotate(ws, body, mount[9], mount[10], mount[11])   # O -> P, world axes
    nx = ny = nz = fx = fy = fz = 0.0
    for c in range(bodies.shape[0]):
        if bodies[c] != body:
            continue
        cx, cy, cz = _rotate(ws, body, points[c, 0], points[c, 1], points[c, 2])
        dx, dy, dz = cx - rx, cy - ry, cz - rz                          # P -> C
        gx, gy, gz = grf[c, 0], grf[c, 1], grf[c, 2]
        nx += dy * gz - dz * gy
        ny += dz * gx - dx * gz
        nz += dx * gy - dy * gx
        fx += gx
        fy += gy
        fz += gz
    for k in range(3):
        ax, ay, az = _axes(ws, body, mount, k)
        out[k] = ax * nx + ay * ny + az * nz
        out[3 + k] = ax * fx + ay * fy + az * fz
    return True


@njit(cache=True)
def measured_ground_wrenches(mi, mf, ws, q, bodies, mounts, wrenches, f_ext, forces):
    """**Add** each sensor's reading ``wrenches[k]`` (``[n; f]`` in its axes about its point; sensor ``k`` fixed
    in ``bodies[k]`` at ``mounts[k]``, 12 values as for :func:`foot_sensor_wrench`) to ``f_ext[bodies[k]]``
    as ``[n_O; f_w]`` about the body's origin in world axes at configuration ``q``, and write its world force
    to ``forces[k]`` (N). Runs the forward kinematics on ``ws``; allocates nothing."""
    forward_kinematics(mi, mf, ws, q)
    for k in range(bodies.shape[0]):
        b = bodies[k]
        mount, w = mounts[k], wrenches[k]
        nx = ny = nz = fx = fy = fz = 0.0
        for j in range(3):
            ax, ay, az = _axes(ws, b, mount, j)
            nx += ax * w[j]
            ny += ay * w[j]
            nz += az * w[j]
            fx += ax * w[3 + j]
            fy += ay * w[3 + j]
            fz += az * w[3 + j]
        rx, ry, rz = _rotate(ws, b, mount[9], mount[10], mount[11])
        f_ext[b, 0] += nx + ry * fz - rz * fy
        f_ext[b, 1] += ny + rz * fx - rx * fz
        f_ext[b, 2] += nz + rx * fy - ry * fx
        f_ext[b, 3] += fx
        f_ext[b, 4] += fy
        f_ext[b, 5] += fz
        forces[k, 0], forces[k, 1], forces[k, 2] = fx, fy, fz


