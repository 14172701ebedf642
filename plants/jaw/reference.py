"""The appendix's Gibbs-Appell model of one Stewart platform in plain NumPy (Kalani et al., 2018): the
reference the compiled kernel (:func:`rtctl.plants.jaw.kernels.ga_wrench`) is checked against in the tests.

Accelerations from A.1-A.32, Gibbs functions B.6, C.1-C.4, D.1-D.4 with the corrections listed in
:mod:`rtctl.plants.jaw.model`. Nothing in the plant or the controllers imports this module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stewart.model import StewartPlatform

__all__ = ["GibbsAppellTerms", "gibbs_appell_reference", "tsai_leg_frame"]


def _skew(a):
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def tsai_leg_frame(l) -> np.ndarray:
    """B_R_i of leg vector l: z_i along the leg, y_i = [-l_y, l_x, 0] / rho, x_i = y_i x z_i."""
    z = l / np.linalg.norm(l)
    y = np.array([-l[1], l[0], 0.0]) / math.hypot(l[0], l[1])
    return np.column_stack([np.cross(y, z), y, z])


@dataclass
class GibbsAppellTerms:
    """Result of :func:`gibbs_appell_reference` (bodies: ``platform``, ``cylinders``, ``pistons``)."""

    S: dict            # Gibbs function value per body group (B.6, C.1-C.4, D.1-D.4), kg m^2/s^4
    grad: dict         # dS/d(x-ddot_M) per body group
    Qg: dict           # generalized force of the weights per body group
    Jp: np.ndarray     # A.7 (rows iJ_bi,z)
    qdd: np.ndarray    # leg accelerations, A.19 with iD_2i,z (corrected)
    qdd_printed: np.ndarray   # A.19-A.20 as printed (without iD_2i,z)
    twist: np.ndarray          # x-dot_M = [v; omega]
    twist_rate: np.ndarray     # x-ddot_M = [v-dot; omega-dot]
    legs: dict                 # per leg, in {B} (6, 3): omega, alpha (A.8, A.22), a1, a2 (A.26, A.30)

    def wrench(self) -> np.ndarray:
        return sum(self.grad.values()) - sum(self.Qg.values())


def gibbs_appell_reference(platform: StewartPlatform, x, xd, xdd=None, *, twist_rate=None) -> GibbsAppellTerms:
    """The appendix's Gibbs-Appell model of one platform in plain NumPy (reference for the compiled kernel).

    Accelerations from A.1-A.32, Gibbs functions B.6, C.1-C.4, D.1-D.4 (with the corrections listed in the
    module docstring) and their analytic gradients with respect to x-ddot_M. ``twist_rate`` (the platform's
    [v-dot; omega-dot]) may be given instead of ``xdd``.
    """
    m = platform
    x, xd = m._pose(x), m._pose(xd, "xd")
    JA, JAd, T, Td = m.euler_jacobian(x, xd)
    u = T @ xd
    if twist_rate is None:
        ud = T @ m._pose(xdd, "xdd") + Td @ xd
    else:
        ud = m._pose(twist_rate, "twist_rate")
    w, vd, wd = u[3:], ud[:3], ud[3:]
    R = m.rotation(x)
    g = m.g
    ez = np.array([0.0, 0.0, 1.0])
    # platform, B.1-B.6 (omega components in the principal body axes)
    Ip = m.I_P
    wb, ab = R.T @ w, R.T @ wd
    S = {"platform": 0.5 * m.m_P * vd @ vd + 0.5 * (Ip * ab) @ ab
         + (Ip[2] - Ip[1]) * ab[0] * wb[1] * wb[2] + (Ip[0] - Ip[2]) * ab[1] * wb[0] * wb[2]
         + (Ip[1] - Ip[0]) * ab[2] * wb[0] * wb[1]}
    grad = {"platform": np.r_[m.m_P * vd, R @ (Ip * ab + np.cross(wb, Ip * wb))]}
    Qg = {"platform": np.r_[0.0, 0.0, -m.m_P * g, 0.0, 0.0, 0.0]}
    e1, e2 = m.b_C, m.b_S
    I1 = np.array([m.I_C[2], m.I_C[1], m.I_C[0]])    # (I_11, I_22, I_33) in {i}
    I2 = np.array([m.I_S[2], m.I_S[1], m.I_S[0]])
    for key in ("cylinders", "pistons"):
        S[key], grad[key], Qg[key] = 0.0, np.zeros(6), np.zeros(6)
    Jp, qdd, qdd_printed = np.zeros((6, 6)), np.zeros(6), np.zeros(6)
    legs = {k: np.zeros((6, 3)) for k in ("omega", "alpha", "a1", "a2")}
    for i in range(6):
        b = R @ m.platform_points[i]
        l = x[:3] + b - m.base_points[i]
        d = np.linalg.norm(l)
        Ri = tsai_leg_frame(l)
        Jb = np.hstack([np.eye(3), -_skew(b)])                            # A.3
        iJb = Ri.T @ Jb                                                   # A.5
        vx, vy, vz = iJb @ u                                              # A.4
        Jp[i] = iJb[2]                                                    # A.6-A.7
        D1 = np.cross(w, np.cross(w, b))                                  # A.16
        D2 = Ri.T @ D1                                                    # A.18
        qdd[i] = iJb[2] @ ud + D2[2] + (vx * vx + vy * vy) / d            # A.19, corrected
        qdd_printed[i] = iJb[2] @ ud + (vx * vx + vy * vy) / d            # A.19-A.20 as printed
        z6 = np.zeros(6)
        Jw = np.vstack([-iJb[1], iJb[0], z6]) / d                         # A.23 (A.8)
        D3 = 2.0 / d ** 2 * np.array([vy * vz, -vx * vz, 0.0])            # A.21
        D4 = np.array([-D2[1], D2[0], 0.0]) / d + D3                      # A.24
        Jv1 = e1 / d * np.vstack([iJb[0], iJb[1], z6])                    # A.27 (A.9)
        D5 = -e1 / d ** 2 * np.array([2 * vx * vz, 2 * vy * vz, vx * vx + vy * vy])   # A.25, sign corrected
        D6 = e1 / d * np.array([D2[0], D2[1], 0.0]) + D5                  # A.28
        Jv2 = np.vstack([(d - e2) * iJb[0], (d - e2) * iJb[1], d * iJb[2]]) / d       # A.31 (A.10)
        D7 = e2 / d ** 2 * np.array([2 * vx * vz, 2 * vy * vz, vx * vx + vy * vy])    # A.29
        D8 = np.array([(d - e2) * D2[0], (d - e2) * D2[1], d * D2[2]]) / d + D7       # A.32
        om = Jw @ u                                                       # A.8
        al = Jw @ ud + D4                                                 # A.22
        a1 = Jv1 @ ud + D6                                                # A.26
        a2 = Jv2 @ ud + D8                                                # A.30
        for key, val in (("omega", om), ("alpha", al), ("a1", a1), ("a2", a2)):
            legs[key][i] = Ri @ val
        gi = Ri.T @ ez
        for key, mass, Iq, J, a in (("cylinders", m.m_C, I1, Jv1, a1), ("pistons", m.m_S, I2, Jv2, a2)):
            K = np.cross(om, Iq * om)                                     # C.4 / D.4
            S[key] += 0.5 * mass * a @ a + 0.5 * al @ (Iq * al) + al @ K  # C.1-C.3 / D.1-D.3
            grad[key] += mass * J.T @ a + Jw.T @ (Iq * al + K)
            Qg[key] += -mass * g * J.T @ gi
    return GibbsAppellTerms(S=S, grad=grad, Qg=Qg, Jp=Jp, qdd=qdd, qdd_printed=qdd_printed, twist=u,
                            twist_rate=ud, legs=legs)
