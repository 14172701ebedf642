"""One rigid body's placement and inertia: rotations, the physical-inertia check, fusing two bodies,
and the model errors a plant may carry (inertia scale, payload); :class:`ModelError` for bad input."""
from __future__ import annotations

import math

import numpy as np


class ModelError(ValueError):
    """A model description is malformed; the message names the offending element."""


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix: Rz(y) Ry(p) Rx(r)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def quaternion_to_matrix(quat_xyzw) -> np.ndarray:
    """Unit quaternion ``[x, y, z, w]`` (Pinocchio/Eigen storage order) to a rotation matrix."""
    x, y, z, w = (float(a) for a in quat_xyzw)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def check_inertia(inertia, mass, where: str) -> np.ndarray:
    """Validate a rotational inertia about the centre of mass; return it as a symmetric array.

    A physical inertia is symmetric positive semi-definite and satisfies the
    triangle inequalities of its principal moments. A point mass (zero
    inertia) is allowed; a massless body must have zero inertia.
    """
    inertia = np.asarray(inertia, dtype=float)
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ModelError(f"{where}: inertia must be a finite 3x3 matrix, got {inertia.tolist()}")
    if not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-12):
        raise ModelError(f"{where}: inertia is not symmetric: {inertia.tolist()}")
    if not np.isfinite(mass) or mass < 0:
        raise ModelError(f"{where}: mass must be finite and >= 0, got {mass}")
    inertia = 0.5 * (inertia + inertia.T)
    scale = max(float(np.abs(inertia).max()), 1e-300)
    eig = np.linalg.eigvalsh(inertia)
    if eig[0] < -1e-9 * scale:
        raise ModelError(
            f"{where}: inertia is not positive definite (eigenvalues {eig.tolist()})"
        )
    if eig[0] + eig[1] < eig[2] * (1 - 1e-9) - 1e-12 * scale:
        raise ModelError(
            f"{where}: principal moments {eig.tolist()} violate the triangle inequality "
            "(no rigid body has this inertia)"
        )
    if mass == 0 and np.abs(inertia).max() > 0:
        raise ModelError(f"{where}: a massless body cannot have a non-zero inertia")
    return inertia


def combine_inertias(m1, c1, i1, m2, c2, i2):
    """Mass, centre of mass and inertia about it of two rigid bodies fused together."""
    m = m1 + m2
    if m == 0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = (m1 * np.asarray(c1) + m2 * np.asarray(c2)) / m

    def shifted(mi, ci, ii):
        d = np.asarray(ci) - c
        return ii + mi * (d @ d * np.eye(3) - np.outer(d, d))

    return m, c, shifted(m1, c1, i1) + shifted(m2, c2, i2)


def inertia_scale_factor(factor) -> float:
    """``factor`` as a float if it is a finite number > 0 (the one check of every ``with_inertia_scaled``)."""
    try:
        f = float(factor)
    except (TypeError, ValueError):
        raise ModelError(f"inertia scale factor must be a number > 0, got {factor!r}") from None
    if not (math.isfinite(f) and f > 0):
        raise ModelError(f"inertia scale factor must be finite and > 0, got {factor!r}")
    return f


def payload_mass(mass) -> float:
    """``mass`` (kg) as a float if it is a finite number >= 0 (the one check of every ``with_payload``)."""
    try:
        m = float(mass)
    except (TypeError, ValueError):
        raise ModelError(f"payload mass must be a number of kg >= 0, got {mass!r}") from None
    if not (math.isfinite(m) and m >= 0):
        raise ModelError(f"payload mass must be finite and >= 0 kg, got {mass!r}")
    return m


def payload_offset(offset) -> np.ndarray:
    """``offset`` (m) as a 3-vector if it is 3 finite numbers (the one check of every payload offset)."""
    try:
        off = np.array(offset, dtype=float).reshape(3)
    except (TypeError, ValueError):
        off = np.full(3, np.nan)
    if not np.all(np.isfinite(off)):
        raise ModelError(f"payload offset must be 3 finite numbers (m), got {offset!r}")
    return off
