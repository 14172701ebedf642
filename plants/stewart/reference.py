"""The independent formulation the Stewart platform's generalized-momentum model is checked against (tests,
benchmarks): the platform and its legs as a tree in rtctl's generic core, cut at the spherical joints, with
the loop closures as constraints.

Nothing in the plant or the controllers imports this module.
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.dynamics.constrained import projected_inverse_dynamics as _projected_inverse_dynamics
from rtctl.model import ModelBuilder

from .model import StewartPlatform

__all__ = ["actuation_matrix", "closure", "projected_inverse_dynamics", "tree_model", "tree_state"]


def tree_model(platform: StewartPlatform):
    """The generic-core model for the cross-check: the platform on a ZYX Euler-angle floating base
    (its 6 coordinates are exactly x) plus six two-body legs, each a universal joint at B_i (a
    revolute about z_B, then one about the rotated y axis -- the leg frame of eqs. 49-52), the
    cylinder, a prismatic joint along the leg and the piston; the tree is cut at the spherical joints
    P_i (frames ``tip{i}`` on the piston and ``plat{i}`` on the platform). nv = 24."""
    p = platform
    b = ModelBuilder("stewart_tree", gravity=(0.0, 0.0, -p.g))
    b.add_euler_floating_base("platform", sequence="zyx", mass=p.m_P, inertia=np.diag(p.I_P))
    for i in range(6):
        b.add_frame(f"plat{i}", "platform", translation=p.platform_points[i])
    for i in range(6):
        yaw = b.add_body(f"uj{i}", -1, "revolute", axis=(0, 0, 1), translation=p.base_points[i])
        cyl = b.add_body(f"cylinder{i}", yaw, "revolute", axis=(0, 1, 0), mass=p.m_C,
                         com=(p.b_C, 0, 0), inertia=np.diag(p.I_C))
        b.add_body(f"piston{i}", cyl, "prismatic", axis=(1, 0, 0), mass=p.m_S, com=(-p.b_S, 0, 0),
                   inertia=np.diag(p.I_S))
        b.add_frame(f"tip{i}", f"piston{i}")
    return b.build()


def tree_state(platform: StewartPlatform, dyn, x, xd, xdd):
    """Tree (q, v, a) of the platform motion (x, xd, xdd): leg joint angles from the leg vectors,
    leg joint rates and accelerations by solving the loop-closure constraints with the generic
    Jacobians (``Dynamics.jacobian`` / ``jacobian_dot_times_v``). Returns q, v, a, Jc (18 x 24)."""
    x, xd, xdd = platform._pose(x), platform._pose(xd, "xd"), platform._pose(xdd, "xdd")
    legs, L = platform.inverse_kinematics(x)
    q = np.zeros(24)
    q[:6] = x
    for i, l in enumerate(legs):
        q[6 + 3 * i] = math.atan2(l[1], l[0])
        q[7 + 3 * i] = math.atan2(-l[2], math.hypot(l[0], l[1]))
        q[8 + 3 * i] = L[i]
    v, a = np.zeros(24), np.zeros(24)
    v[:6], a[:6] = xd, xdd
    Jc, bias = closure(dyn, q, v)
    # Jc v = 0 and Jc a + bias = 0, with the platform part given: solve for the 18 leg DOFs.
    leg = slice(6, 24)
    v[leg] = np.linalg.solve(Jc[:, leg], -Jc[:, :6] @ xd)
    Jc, bias = closure(dyn, q, v)
    a[leg] = np.linalg.solve(Jc[:, leg], -Jc[:, :6] @ xdd - bias)
    return q, v, a, Jc


def closure(dyn, q, v=None):
    """Loop-closure Jacobian (18 x 24: tip_i minus plat_i point velocities) and, with v, Jc-dot v."""
    Jc = np.zeros((18, dyn.model.nv))
    bias = np.zeros(18)
    for i in range(6):
        Jc[3 * i:3 * i + 3] = dyn.jacobian(q, f"tip{i}")[3:] - dyn.jacobian(q, f"plat{i}")[3:]
        if v is not None:
            bias[3 * i:3 * i + 3] = (dyn.jacobian_dot_times_v(q, v, f"tip{i}")[3:]
                                     - dyn.jacobian_dot_times_v(q, v, f"plat{i}")[3:])
    return Jc, bias


def actuation_matrix() -> np.ndarray:
    """B (24 x 6): leg forces act on the prismatic joints."""
    B = np.zeros((24, 6))
    for i in range(6):
        B[8 + 3 * i, i] = 1.0
    return B


def projected_inverse_dynamics(platform: StewartPlatform, dyn, x, xd, xdd):
    """Leg forces by the generic core: tree inverse dynamics projected onto the closure null space
    (:func:`rtctl.dynamics.constrained.projected_inverse_dynamics`). Returns the result object."""
    q, v, a, Jc = tree_state(platform, dyn, x, xd, xdd)
    return _projected_inverse_dynamics(dyn, q, v, a, Jc, actuation=actuation_matrix())
