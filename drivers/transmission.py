"""Transmissions between joint space and actuator space.

Actuator positions relate to joint positions by ``theta_m = A q``: ``A`` is
``diag(ratio)`` for independent reductions, or a general invertible coupling
matrix for gear trains where one motor drives several joints (differentials,
the geared mechanisms of Chen & Wang (1998)). Power is conserved, ``tau_j^T qd =
tau_m^T theta_m_dot``, so efforts map as ``tau_j = A^T tau_m`` and
``tau_m = A^-T tau_j``. A rotor of inertia ``J_m`` reflects into joint space as
``A^T diag(J_m) A`` (``N^2 J_m`` for a plain reduction).
"""
from __future__ import annotations

import numpy as np


class Transmission:
    def __init__(self, n: int, ratio=None, coupling=None, rotor_inertia=None):
        if ratio is not None and coupling is not None:
            raise ValueError("transmission: give either ratio or coupling, not both")
        if coupling is not None:
            a = np.asarray(coupling, dtype=float)
            if a.shape != (n, n) or not np.all(np.isfinite(a)):
                raise ValueError(f"transmission: coupling must be a finite {n}x{n} matrix, got shape {a.shape}")
            if abs(np.linalg.det(a)) < 1e-12:
                raise ValueError("transmission: coupling matrix is singular (some joint is not driven)")
        else:
            r = np.broadcast_to(np.asarray(1.0 if ratio is None else ratio, dtype=float), (n,))
            if not np.all(np.isfinite(r)) or np.any(r == 0):
                raise ValueError(f"transmission: ratio must be finite and non-zero, got {r.tolist()}")
            a = np.diag(r)
        j = np.broadcast_to(np.asarray(0.0 if rotor_inertia is None else rotor_inertia, dtype=float), (n,))
        if not np.all(np.isfinite(j)) or np.any(j < 0):
            raise ValueError(f"transmission: rotor_inertia must be finite and >= 0, got {j.tolist()}")
        self.n = n
        self.matrix = a.copy()
        self.matrix_inv = np.linalg.inv(a)
        self.matrix_inv_t = np.ascontiguousarray(self.matrix_inv.T)
        self.matrix_t = np.ascontiguousarray(a.T)
        self.rotor_inertia = j.copy()
        self.is_diagonal = bool(np.all(a == np.diag(np.diag(a))))

    def to_actuator_position(self, q, out):
        """theta_m = A q (also velocities)."""
        return np.matmul(self.matrix, q, out=out)

    def to_joint_position(self, theta, out):
        """q = A^-1 theta_m (also velocities)."""
        return np.matmul(self.matrix_inv, theta, out=out)

    def to_actuator_effort(self, tau_joint, out):
        """tau_m = A^-T tau_j."""
        return np.matmul(self.matrix_inv_t, tau_joint, out=out)

    def to_joint_effort(self, tau_motor, out):
        """tau_j = A^T tau_m."""
        return np.matmul(self.matrix_t, tau_motor, out=out)

    def reflected_inertia(self) -> np.ndarray:
        """A^T diag(J_m) A: the rotor inertia seen in joint space (n x n)."""
        return self.matrix.T @ np.diag(self.rotor_inertia) @ self.matrix

    def armature(self) -> np.ndarray:
        """Diagonal of :meth:`reflected_inertia`, what :meth:`Model.set_armature` takes.

        For a coupled train the off-diagonal terms are not part of the
        recursive core's model; they are exact only for diagonal transmissions.
        """
        return np.diag(self.reflected_inertia()).copy()
