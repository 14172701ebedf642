"""Dynamics in independent coordinates: mimic joints follow their leaders.

With the coupling of :mod:`rtctl.model.mimic` (``q_full = Gq q + b``,
``v_full = G v``, ``a_full = G a``, G constant), the equations of motion of the
coupled tree are the full tree's projected by virtual work:

    tau = G^T tau_full(q_full, G v, G a),    M = G^T M_full G,    h = G^T h_full.

A model without mimic joints gets the identity coupling, so the class works
for every model; ``nq``/``nv`` count independent coordinates (leaders and
free joints, no followers).
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from ..model.mimic import MimicCoupling
from . import Dynamics


class CoupledDynamics:
    """Inverse dynamics, mass matrix and forward dynamics of a model with its mimic couplings applied."""

    def __init__(self, model: Model):
        self.model = model
        self.coupling = model.mimic if model.mimic is not None else MimicCoupling(model, [])
        self.full = Dynamics(model)
        self.nq, self.nv = self.coupling.nq, self.coupling.nv
        self.joint_names = self.coupling.joint_names

    def _full_state(self, q, v):
        c = self.coupling
        return c.full_q(self._vec(q, self.nq, "q")), c.full_v(self._vec(v, self.nv, "v"))

    @staticmethod
    def _vec(x, n, name):
        arr = np.asarray(x, dtype=float)
        if arr.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
        return arr

    def inverse_dynamics(self, q, v, a, f_ext=None) -> np.ndarray:
        q_full, v_full = self._full_state(q, v)
        a_full = self.coupling.full_v(self._vec(a, self.nv, "a"))
        return self.coupling.reduced_tau(self.full.inverse_dynamics(q_full, v_full, a_full, f_ext))

    def nonlinear_effects(self, q, v, f_ext=None) -> np.ndarray:
        return self.inverse_dynamics(q, v, np.zeros(self.nv), f_ext)

    def mass_matrix(self, q) -> np.ndarray:
        g = self.coupling.G
        m_full = self.full.mass_matrix(self.coupling.full_q(self._vec(q, self.nq, "q")))
        return g.T @ m_full @ g

    def forward_dynamics(self, q, v, tau, f_ext=None) -> np.ndarray:
        """Independent accelerations: M a = tau - h, by Cholesky; a singular M names the massless joints."""
        rhs = self._vec(tau, self.nv, "tau") - self.nonlinear_effects(q, v, f_ext)
        mass_matrix = self.mass_matrix(q)
        try:
            factor = np.linalg.cholesky(mass_matrix)
        except np.linalg.LinAlgError:
            raise ValueError("singular inertia (coupled mass matrix not positive definite)"
                             + self._zero_rows_note(mass_matrix)) from None
        return np.linalg.solve(factor.T, np.linalg.solve(factor, rhs))

    def _zero_rows_note(self, mass_matrix) -> str:
        names = self.coupling.dof_joint_names(self.model)
        idle = sorted({names[k] for k in np.flatnonzero(np.diag(mass_matrix) <= 0)}, key=names.index)
        if not idle:
            return ""
        return (f"; joints {', '.join(repr(n) for n in idle)} of model '{self.model.name}' move massless subtrees "
                "(no mass or inertia below them, followers included)")

    def integrate(self, q, v, dt: float) -> np.ndarray:
        """q (+) v dt, through the full configuration manifold (the coupling is linear)."""
        q_full, v_full = self._full_state(q, v)
        return self.coupling.reduced_q(self.full.integrate(q_full, v_full, dt))
