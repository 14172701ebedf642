"""The independent formulation the quadruped-with-tail model is checked against (tests, benchmarks).

The same robot as a tree in rtctl's generic core (:func:`tree_model`), its state for given generalized
coordinates through the four foot constraints (:func:`tree_state`), and the random states near ``q0`` the
cross-checks use. Nothing in the plant or the controllers imports this module.
"""
from __future__ import annotations

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder, rpy_to_matrix

from .kinematics import ACTUATOR_NAMES, P_IBX
from .model import QuadrupedTail

__all__ = ["TREE_BASE", "random_states", "tree_coordinates", "tree_model", "tree_reference", "tree_state"]

TREE_BASE = np.array([0, 1, 2, 5, 4, 3, 18, 19])   # tree index of q[k] for k = 0..7


def tree_model(mech: QuadrupedTail):
    """The same robot in the generic core: torso on a ZYX Euler-angle base (R = Rz Ry Rx, eq. 1), four
    legs (hip ``ha`` about torso y at a_i, massless; ``hb`` about -x; thigh and shank uniform slender bars
    of inertia m l^2 / 12 about their transverse axes, zero about their own; knee about x after a fixed
    R_x(-pi) so its coordinate is the interior angle) and the tail (``ta`` about x at r, ``tb`` about z,
    point mass at [0, -l_t, 0]). Frames ``foot{i}`` at the shank tips. Tree coordinates:
    [p, phi_z, phi_y, phi_x, (ha_i, hb_i, k_i) x 4, ta, tb] (nv = 20)."""
    lth, lsh, lt = mech.l_th, mech.l_sh, mech.l_t
    b = ModelBuilder("quadruped_tail_tree", gravity=(0.0, 0.0, -mech.g))
    b.add_euler_floating_base("torso", sequence="zyx", mass=mech.m_b, inertia=np.diag(mech.par[P_IBX:]))
    bar = lambda m, l: np.diag([m * l * l / 12.0, m * l * l / 12.0, 0.0])  # noqa: E731
    for i in range(4):
        b.add_body(f"hipa{i}", "torso", "revolute", axis=(0, 1, 0), translation=mech.A[i])
        b.add_body(f"thigh{i}", f"hipa{i}", "revolute", axis=(-1, 0, 0), mass=mech.m_th,
                   com=(0, 0, -lth / 2), inertia=bar(mech.m_th, lth))
        b.add_body(f"shank{i}", f"thigh{i}", "revolute", axis=(1, 0, 0), rotation=rpy_to_matrix((-np.pi, 0, 0)),
                   translation=(0, 0, -lth), mass=mech.m_sh, com=(0, 0, -lsh / 2), inertia=bar(mech.m_sh, lsh))
        b.add_frame(f"foot{i}", f"shank{i}", translation=(0, 0, -lsh))
    b.add_body("taila", "torso", "revolute", axis=(1, 0, 0), translation=mech.r)
    b.add_body("tail", "taila", "revolute", axis=(0, 0, 1), mass=mech.m_t, com=(0, -lt, 0))
    return b.build()


def tree_coordinates(q, ang):
    """Tree q (20) from generalized q and leg angles (4, 3)."""
    out = np.zeros(20)
    out[:3] = q[:3]
    out[3:6] = q[5], q[4], q[3]
    out[6:18] = np.asarray(ang).ravel()
    out[18:20] = q[6:8]
    return out


def tree_reference(mech: QuadrupedTail):
    """Generic-core dynamics of :func:`tree_model` and the actuation map B (20 x 14, tree DOF of each
    actuator in :data:`~rtctl.plants.quadruped_tail.kinematics.ACTUATOR_NAMES` order)."""
    idx = {}
    for k in range(4):
        idx[f"ha{k + 1}"], idx[f"hb{k + 1}"], idx[f"k{k + 1}"] = 6 + 3 * k, 7 + 3 * k, 8 + 3 * k
    idx["ta"], idx["tb"] = 18, 19
    actuation = np.zeros((20, 14))
    for j, name in enumerate(ACTUATOR_NAMES):
        actuation[idx[name], j] = 1.0
    return Dynamics(tree_model(mech)), actuation


def tree_state(mech: QuadrupedTail, dyn, q, qd, qdd):
    """Tree (q, v, a), the foot constraint Jacobian Jc, the null-space basis Phi (tree velocities of
    unit generalized velocities) and the constraint bias, from the generic core only (leg rates and
    accelerations follow from the four foot constraints)."""
    tq = tree_coordinates(q, mech.inverse_kinematics(q))
    legs, rest = np.arange(6, 18), np.r_[0:6, 18, 19]
    jc = np.vstack([dyn.jacobian(tq, f"foot{i}")[3:] for i in range(4)])
    tv = np.zeros(20)
    tv[TREE_BASE] = qd
    tv[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ tv[rest])
    gamma = np.concatenate([dyn.jacobian_dot_times_v(tq, tv, f"foot{i}")[3:] for i in range(4)])
    ta = np.zeros(20)
    ta[TREE_BASE] = qdd
    ta[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ ta[rest] - gamma)
    phi = np.zeros((20, 8))
    phi[TREE_BASE, np.arange(8)] = 1.0
    phi[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ phi[rest])
    bias = np.zeros(20)
    bias[legs] = np.linalg.solve(jc[:, legs], -gamma)
    return tq, tv, ta, jc, phi, bias


def random_states(mech: QuadrupedTail, n, seed):
    """``n`` random (q, qd, qdd) near q0 (legs stay reachable), as used by the cross-checks."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        q = mech.q0 + np.r_[rng.normal(0, 0.02, 3), rng.normal(0, 0.1, 3), rng.uniform(-1, 1, 2)]
        yield q, rng.normal(0, 1, 8), rng.normal(0, 2, 8)
