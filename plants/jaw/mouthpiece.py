"""A six-axis force-torque sensor in the jaw robot's mouthpiece: what it reads on the simulated plant, and its
force in the base frame for the bite monitor.

The sensor sits between the bite splint (the robot's platform and the jaw model's mandible, rigidly joined) and
the patient's teeth: its distal side is the patient, so it reads the wrench the patient exerts on the mouthpiece
-- the tissue's stiffness and damping and a food bolus (:class:`~rtctl.plants.jaw.model.PatientImpedance`) --
and nothing of the mechanism (a push on the platform set with ``set_external_wrench`` does not pass through
it). The plant keeps the patient's force as the generalized force ``f`` on the pose coordinates (Euler space);
the wrench on the platform is ``F = T^-T f`` (Lopes 2009, eq. 23: ``T = diag(I, J_A)``), the force ``f[:3]`` and
the moment about the platform's centre ``n = J_A^-T f[3:]``, in {B}. Moved to the sensor's origin ``a = R(x) p``
(``p`` its point in {P}) and turned into its axes ``R_s = R(x) R_p`` (Featherstone's ``[torque; force]``):

    w = [R_s^T (n - a x f);  R_s^T f].

The actuator-space model names the sensor's frame where it is at the rest pose, attached to the world
(:meth:`~rtctl.plants.jaw.model.JawRehabRobot.actuator_model`); the rest orientation is level (checked by the
mechanism), so a mount ``(R_m, p_m)`` there is ``R_p = R_m``, ``p = p_m - x_rest`` in {P}. One compiled call,
allocation-free.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..stewart.kernels import rotation


@njit(cache=True)
def mouthpiece_wrench(x, patient, rest, mount, R, out):
    """The module docstring's ``w`` into ``out`` (6) at the pose ``x`` for the patient's generalized force
    ``patient`` (6), the rest pose ``rest``, the sensor's ``mount`` (12: its axes at rest row-major, its origin at
    rest); ``R`` (3, 3) scratch. False (``out`` untouched) where J_A is singular (theta = +-pi/2)."""
    cth = np.cos(x[4])
    if abs(cth) < 1e-12:
        return False
    rotation(x, R)
    cps, sps, sth = np.cos(x[3]), np.sin(x[3]), np.sin(x[4])
    g0, g1, g2 = patient[3], patient[4], patient[5]
    along = (g2 + sth * g0) / cth              # J_A^T n = g for J_A of ZYX angles, by its three rows
    n0, n1, n2 = cps * along - sps * g1, sps * along + cps * g1, g0
    f0, f1, f2 = patient[0], patient[1], patient[2]
    px, py, pz = mount[9] - rest[0], mount[10] - rest[1], mount[11] - rest[2]
    ax = R[0, 0] * px + R[0, 1] * py + R[0, 2] * pz
    ay = R[1, 0] * px + R[1, 1] * py + R[1, 2] * pz
    az = R[2, 0] * px + R[2, 1] * py + R[2, 2] * pz
    n0 -= ay * f2 - az * f1
    n1 -= az * f0 - ax * f2
    n2 -= ax * f1 - ay * f0
    for c in range(3):      # R_s = R R_m: column c of R_s is R times column c of R_m
        s0 = R[0, 0] * mount[c] + R[0, 1] * mount[3 + c] + R[0, 2] * mount[6 + c]
        s1 = R[1, 0] * mount[c] + R[1, 1] * mount[3 + c] + R[1, 2] * mount[6 + c]
        s2 = R[2, 0] * mount[c] + R[2, 1] * mount[3 + c] + R[2, 2] * mount[6 + c]
        out[c] = s0 * n0 + s1 * n1 + s2 * n2
        out[3 + c] = s0 * f0 + s1 * f1 + s2 * f2
    return True


@njit(cache=True)
def base_force(x, mount, force, R, out):
    """A force measured in the sensor's axes (``force``, 3) in {B} (``out``, 3): ``R(x) R_m force`` at the pose
    ``x`` (``R`` (3, 3) scratch)."""
    rotation(x, R)
    for r in range(3):
        s = 0.0
        for c in range(3):
            s += (R[r, 0] * mount[c] + R[r, 1] * mount[3 + c] + R[r, 2] * mount[6 + c]) * force[c]
        out[r] = s
