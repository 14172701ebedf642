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


# Violations up to this fraction of a link's own inertia scale are round-off, not findings.
RELATIVE_TOLERANCE = 1e-5


def check_inertia(inertia, mass, where: str, physical: bool = True) -> np.ndarray:
    """Validate a rotational inertia about the centre of mass; return it as a symmetric array.

    Always: a finite symmetric 3x3 matrix and a finite mass >= 0. With ``physical``, also
    physically consistent (see :func:`inertia_violation`) up to :data:`RELATIVE_TOLERANCE` of
    its own scale. A point mass (zero inertia) and a massless body carrying an inertia are allowed.
    """
    inertia = np.asarray(inertia, dtype=float)
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ModelError(f"{where}: inertia must be a finite 3x3 matrix, got {inertia.tolist()}")
    scale = float(np.abs(inertia).max())
    if np.any(np.abs(inertia - inertia.T) > RELATIVE_TOLERANCE * scale):
        raise ModelError(f"{where}: inertia is not symmetric: {inertia.tolist()}")
    if not np.isfinite(mass) or mass < 0:
        raise ModelError(f"{where}: mass must be finite and >= 0, got {mass}")
    inertia = 0.5 * (inertia + inertia.T)
    violation = inertia_violation(inertia) if physical else None
    if violation is not None:
        raise ModelError(f"{where}: {violation[0]}")
    return inertia


def inertia_violation(inertia: np.ndarray) -> tuple[str, float] | None:
    """``(problem, relative amount)`` if a symmetric inertia is physically inconsistent beyond the tolerance."""
    moments = np.linalg.eigvalsh(inertia)
    scale = float(np.abs(moments).max())
    if scale == 0.0:
        return None
    smallest, largest = moments[0], moments[2]
    if -smallest > RELATIVE_TOLERANCE * scale:
        amount = -smallest / scale
        return (f"inertia is not positive semi-definite: principal moments {format_moments(moments)}, "
                f"the smallest is "
                f"{_percent(amount)} of the largest magnitude below zero"), amount
    excess = largest - moments[0] - moments[1]
    if excess > RELATIVE_TOLERANCE * scale:
        amount = excess / largest
        return (f"principal moments {format_moments(moments)} violate the triangle inequality "
                f"(l1 + l2 >= l3) by {_percent(amount)} of l3 (no rigid body has this inertia)"), amount
    return None


def combine_inertias(m1, c1, i1, m2, c2, i2):
    """Mass, centre of mass and inertia about it of two rigid bodies fused together.

    Massless bodies keep their rotational inertia (no parallel-axis term: it scales with mass);
    two massless bodies give a massless body with the sum of the inertias, centred at ``c1``.
    """
    m = m1 + m2
    if m == 0:
        return 0.0, np.asarray(c1, dtype=float).copy(), np.asarray(i1, dtype=float) + np.asarray(i2, dtype=float)
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


def format_moments(moments) -> str:
    return "[" + ", ".join(f"{float(x):.6g}" for x in moments) + "]"


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"
