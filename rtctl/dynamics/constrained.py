"""Dynamics of closed chains: a tree plus loop-closure constraints ``phi(q) = 0``.

A closed mechanism (a Stewart platform, a quadruped with its feet on the
ground) is modelled as a spanning tree whose cut joints become constraints
with Jacobian ``Jc`` (m x nv) and bias ``Jc_dot_v`` (the constraint
acceleration at zero joint acceleration), so that ``Jc qdd + Jc_dot_v = 0``.
The tree's equations gain the constraint forces: ``M qdd + h = B tau + Jc^T lam``
with ``B`` (nv x na) mapping actuator forces to generalized forces.

These helpers are for analysis, cross-checks and simulation set-up; they
use dense linear algebra and allocate, so they are not on the real-time path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from . import Dynamics


@dataclass
class ProjectedInverseDynamics:
    """Result of :func:`projected_inverse_dynamics`."""

    tau: np.ndarray          # actuator forces (na)
    lam: np.ndarray          # constraint multipliers (m): Jc^T lam is the constraint generalized force
    residual: float          # |B tau + Jc^T lam - (M a + h)| / max(1, |M a + h|): ~0 when the motion is realisable


def _checked_matrix(x, shape, name):
    """``x`` as a finite float array of ``shape`` (``None`` = any size); a vector is taken as one row."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 1 and len(shape) == 2:
        arr = arr[None, :]
    if arr.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, arr.shape)):
        expected = tuple("any" if s is None else s for s in shape)
        raise ValueError(f"{name} must have shape {expected}, got {np.asarray(x).shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def projected_inverse_dynamics(dyn: Dynamics, q, v, a, Jc, actuation=None, weights=None,
                               f_ext=None) -> ProjectedInverseDynamics:
    """Actuator forces that produce the constraint-consistent motion (q, v, a).

    Projects the tree's inverse dynamics ``tau_id = M a + h`` (computed by the
    recursive core, no mass matrix) onto the null space ``N`` of ``Jc``, which
    removes the unknown constraint forces: ``N^T B tau = N^T tau_id``.
    With more actuators than the mechanism has DOF (redundant actuation) the
    minimum weighted-norm solution ``min tau^T W tau`` is returned
    (``weights``: W's diagonal, default all ones). Then ``lam`` follows from
    ``Jc^T lam = tau_id - B tau`` in the least-squares sense.
    """
    nv = dyn.model.nv
    Jc = _checked_matrix(Jc, (None, nv), "Jc")
    B = np.eye(nv) if actuation is None else _checked_matrix(actuation, (nv, None), "actuation")
    tau_id = dyn.inverse_dynamics(q, v, a, f_ext=f_ext).copy()
    null = sla.null_space(Jc) if Jc.shape[0] else np.eye(nv)
    c = null.T @ B
    d = null.T @ tau_id
    if weights is None:
        w_inv_sqrt = np.ones(B.shape[1])
    else:
        w = _checked_matrix(weights, (B.shape[1],), "weights")
        if np.any(w <= 0):
            raise ValueError("weights must be positive")
        w_inv_sqrt = 1.0 / np.sqrt(w)
    y = np.linalg.lstsq(c * w_inv_sqrt, d, rcond=None)[0]
    tau = w_inv_sqrt * y
    rest = tau_id - B @ tau
    lam = np.linalg.lstsq(Jc.T, rest, rcond=None)[0] if Jc.shape[0] else np.zeros(0)
    residual = np.linalg.norm(rest - Jc.T @ lam) / max(1.0, np.linalg.norm(tau_id))
    return ProjectedInverseDynamics(tau, lam, float(residual))


def constrained_forward_dynamics(dyn: Dynamics, q, v, tau, Jc, Jc_dot_v, *, phi=None, stiffness: float = 0.0,
                                 damping: float = 0.0, f_ext=None):
    """Accelerations and multipliers of the constrained tree, with Baumgarte stabilisation.

    Solves ``M qdd = tau - h + Jc^T lam`` subject to
    ``Jc qdd = -Jc_dot_v - 2 damping Jc v - stiffness**2 phi`` (Baumgarte:
    the constraint error obeys a critically damped second-order system when
    ``damping == stiffness``; both zero enforce the acceleration constraint
    only). Redundant constraints are handled in the least-squares sense.
    Returns ``(qdd, lam)``.
    """
    m = dyn.model
    Jc = _checked_matrix(Jc, (None, m.nv), "Jc")
    gamma = _checked_matrix(Jc_dot_v, (Jc.shape[0],), "Jc_dot_v")
    v_arr = np.asarray(v, dtype=float)
    rhs_c = -gamma - 2.0 * damping * (Jc @ v_arr)
    if phi is not None:
        rhs_c = rhs_c - stiffness ** 2 * _checked_matrix(phi, (Jc.shape[0],), "phi")
    mass = dyn.mass_matrix(q).copy()
    h = dyn.nonlinear_effects(q, v, out=None) if f_ext is None else \
        dyn.inverse_dynamics(q, v, np.zeros(m.nv), f_ext=f_ext)
    tau = dyn._vec(tau, m.nv, "tau")
    if not np.all(np.isfinite(tau)):
        raise ValueError("tau contains NaN or inf")
    try:
        factor = sla.cho_factor(mass)
    except np.linalg.LinAlgError:
        raise ValueError("mass matrix is not positive definite") from None
    free = sla.cho_solve(factor, tau - h)
    minv_jt = sla.cho_solve(factor, Jc.T)
    delassus = Jc @ minv_jt
    lam = np.linalg.lstsq(delassus, rhs_c - Jc @ free, rcond=None)[0]
    return free + minv_jt @ lam, lam
