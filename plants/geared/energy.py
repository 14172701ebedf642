"""Kinetic and potential energy of every link of a geared robotic mechanism (seed 002, Chen & Wang), primary
and secondary, from chained D-H transforms and the gear kinematics (eqs. 9-11) -- independent of the
virtual-link machinery. The plant reports these energies; the brute-force Lagrangian of
:mod:`rtctl.plants.geared.reference` differentiates them.
"""
from __future__ import annotations

import numpy as np

from .model import _rx, _rz

__all__ = ["link_energies", "link_kinematics"]


def link_kinematics(mech, q, qd):
    """World rotation, com position, angular velocity (as linear maps of theta-dot) for every moving link.

    Independent of the virtual-link machinery: primary links from chained D-H transforms,
    secondary links turned by their own angle q_{j,i} = b_j . theta about e_j (gear kinematics,
    eqs. 9-11), angular velocities omega_j = omega_i + q_{j,i}-dot e_j. Works for complex q.
    """
    n = mech.n
    dt = np.result_type(q, qd, float)
    R = [np.eye(3, dtype=dt)]
    p = [np.zeros(3, dtype=dt)]
    w = [np.zeros(3, dtype=dt)]
    for r in range(1, n + 1):
        a, alpha, d = mech.dh[r]
        z = R[-1][:, 2]
        wr = w[-1] + z * qd[r - 1]
        Rr = R[-1] @ _rz(q[r - 1]) @ _rx(alpha).astype(dt)
        pr = p[-1] + R[-1] @ _rz(q[r - 1]) @ np.array([a, 0.0, d], dtype=dt)
        R.append(Rr)
        p.append(pr)
        w.append(wr)
    bodies = []
    for r in range(1, n + 1):
        ln = mech.links[mech.primary[r]]
        inertia = np.zeros((3, 3)) if ln.inertia is None else np.asarray(ln.inertia, dtype=float)
        bodies.append((float(ln.mass), R[r] @ np.asarray(ln.com, float) + p[r], w[r], R[r] @ inertia @ R[r].T))
    for s in mech._secs:
        sl = mech.links[s.name]
        i = s.carrier
        b = mech.b[s.name]
        angle = b @ q
        e = s.axis
        ex = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
        rot_rel = np.eye(3) + np.sin(angle) * ex + (1 - np.cos(angle)) * (ex @ ex)   # Rodrigues about e_j
        Rj = R[i] @ rot_rel
        i_s = sl.transverse_inertia * (np.eye(3) - np.outer(e, e)) + sl.axial_inertia * np.outer(e, e)
        wj = w[i] + (R[i] @ e) * (b @ qd)
        bodies.append((float(sl.mass), R[i] @ np.asarray(sl.com, float) + p[i], wj, Rj @ i_s @ Rj.T))
    return bodies, p


def link_energies(mech, q, qd):
    """(kinetic, potential) energy of all links, primary and secondary (complex-safe).

    v_c of a link carried by primary link i: sum_{k <= i} z_{k-1} x (p_c - o_{k-1}) theta_k-dot.
    """
    n = mech.n
    bodies, origins = link_kinematics(mech, q, qd)
    dt = np.result_type(q, qd, float)
    R = [np.eye(3, dtype=dt)]
    for r in range(1, n + 1):
        R.append(R[-1] @ _rz(q[r - 1]) @ _rx(mech.dh[r, 1]).astype(dt))
    owner = list(range(1, n + 1)) + [s.carrier for s in mech._secs]
    T, V = 0.0, 0.0
    for (m, pc, w, Iw), own in zip(bodies, owner):
        vc = np.zeros(3, dtype=dt)
        for k in range(1, own + 1):
            vc = vc + np.cross(R[k - 1][:, 2], pc - origins[k - 1]) * qd[k - 1]
        T = T + 0.5 * m * (vc @ vc) + 0.5 * (w @ Iw @ w)
        V = V - m * (mech.gravity @ pc)
    return T, V
