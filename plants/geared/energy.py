"""Kinetic and potential energy of every link of a geared robotic mechanism (Chen & Wang, 1998), primary
and secondary (each copy of a planet separately), from chained D-H transforms and the gear kinematics (eqs. 9-11)
-- independent of the virtual-link machinery. The plant reports these energies; the brute-force Lagrangian of
:mod:`rtctl.plants.geared.reference` differentiates them.
"""
from __future__ import annotations

import numpy as np

from .model import _rx, _rz

__all__ = ["link_energies", "link_kinematics"]


def _rodrigues(e, angle):
    """Rotation by ``angle`` (real or complex) about the unit vector ``e``."""
    ex = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
    return np.eye(3) + np.sin(angle) * ex + (1 - np.cos(angle)) * (ex @ ex)


def link_kinematics(mech, q, qd):
    """Every moving body as (mass, com, com velocity, angular velocity, inertia about the com), world frame.

    Primary links from chained D-H transforms; a secondary link turned by its own angle q_{j,c} = b_j . theta
    about its axis relative to its carrier c (gear kinematics, eqs. 9-11, solved for every thin edge); a planet on
    a secondary carrier also orbits with that carrier about the carrier's axis; every copy (``count``) is a body
    of its own. omega_j = omega_c + q_{j,c}-dot e_j. Works for complex q (complex-step derivatives).
    """
    n = mech.n
    dt = np.result_type(q, qd, float)
    R = [np.eye(3, dtype=dt)]
    p = [np.zeros(3, dtype=dt)]
    w = [np.zeros(3, dtype=dt)]
    for r in range(1, n + 1):
        a, alpha, d = mech.dh[r]
        wr = w[-1] + R[-1][:, 2] * qd[r - 1]
        Rz = R[-1] @ _rz(q[r - 1])
        p.append(p[-1] + Rz @ np.array([a, 0.0, d], dtype=dt))
        R.append(Rz @ _rx(alpha).astype(dt))
        w.append(wr)

    def frame_velocity(i, pc):
        """Velocity of the point pc (world) fixed in primary link i."""
        v = np.zeros(3, dtype=dt)
        for k in range(1, i + 1):
            v = v + np.cross(R[k - 1][:, 2], pc - p[k - 1]) * qd[k - 1]
        return v

    bodies = []
    for r in range(1, n + 1):
        ln = mech.links[mech.primary[r]]
        inertia = np.zeros((3, 3)) if ln.inertia is None else np.asarray(ln.inertia, dtype=float)
        pc = R[r] @ np.asarray(ln.com, float) + p[r]
        bodies.append((float(ln.mass), pc, frame_velocity(r, pc), w[r], R[r] @ inertia @ R[r].T))
    for s in mech.secondary:
        sl = mech.links[s]
        i = mech.carrier[s]
        e = mech.sec_axis[s]
        i_axis = sl.transverse_inertia * (np.eye(3) - np.outer(e, e)) + sl.axial_inertia * np.outer(e, e)
        parent = mech.secondary_carrier.get(s)
        if parent is None:
            R_c, point_c, e_c, rate_c = np.eye(3), np.zeros(3), np.zeros(3), 0.0
        else:
            point_c, e_c = mech.sec_com[parent], mech.sec_axis[parent]
            R_c, rate_c = _rodrigues(e_c, mech.b[parent] @ q), mech.b[parent] @ qd
        spin, rate = _rodrigues(e, mech.b[s] @ q), mech.b[s] @ qd
        for rot_k, com_k, e_k in mech.copies(s):
            com_i = point_c + R_c @ (com_k - point_c)           # in frame i
            R_rel = R_c @ rot_k @ spin
            pc = R[i] @ com_i + p[i]
            vc = frame_velocity(i, pc) + R[i] @ np.cross(e_c, com_i - point_c) * rate_c
            wj = w[i] + R[i] @ e_c * rate_c + R[i] @ (R_c @ e_k) * rate
            Rj = R[i] @ R_rel
            bodies.append((float(sl.mass), pc, vc, wj, Rj @ i_axis @ Rj.T))
    return bodies


def link_energies(mech, q, qd):
    """(kinetic, potential) energy of all links, primary and secondary, every copy (complex-safe)."""
    T, V = 0.0, 0.0
    for m, pc, vc, w, Iw in link_kinematics(mech, q, qd):
        T = T + 0.5 * m * (vc @ vc) + 0.5 * (w @ Iw @ w)
        V = V - m * (mech.gravity @ pc)
    return T, V
