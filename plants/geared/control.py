"""Computed-torque control of a geared robotic mechanism (Chen & Wang, 1998) in actuator space.

:class:`GearedComputedTorque` (``"geared_computed_torque"``): desired joint motion ->
``alpha = qdd_d + Kp e + Kd e_dot`` -> virtual-link inverse dynamics (eq. 23:
``tau = (M_v + M_s) alpha + C_v + C_s + g``, G_v by the generic recursive core on the
virtual EOLC, G_s from eqs. 14-21) -> joint efforts ``tau``; the input (motor) torques
are ``xi = A^-1 tau`` (eq. 22), kept in ``self.xi``. The loop hands ``tau`` to the sim
driver, whose coupling transmission ``A_tr = A^T`` turns it into exactly these motor
torques (``tau_m = A_tr^-T tau_j``), saturates them and applies ``A_tr^T tau_m = A xi``.
With an exact model the joints follow ``e'' + Kd e' + Kp e = 0``.

``gs``: ``"full"`` (default, the virtual-link model), ``"none"`` (drop G_s: the arm treated as
direct drive, the paper's point) or ``"diagonal"`` (the usual per-joint "rotor inertia x ratio^2"
armature, diag(M_s), ignoring the coupling and C_s) -- the latter two are the comparison
controllers. One compiled, allocation-free call per cycle.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import OK
from rtctl.plants.geared.kernels import grm_inverse_dynamics
from rtctl.plants.geared.model import GearedMechanism, mechanism_of

from rtctl.loops.base import Controller

__all__ = ["GearedComputedTorque"]


@njit(cache=True)
def _ct_step(mi, mf, ws, carrier, inertia, axis_body, bmat, kp, kd, q, v, q_d, qd_d, qdd_d, alpha, effort, Ms,
             work, Cs, a_inv, xi):
    n = alpha.shape[0]
    for k in range(n):
        alpha[k] = qdd_d[k] + kp[k] * (q_d[k] - q[k]) + kd[k] * (qd_d[k] - v[k])
    st = grm_inverse_dynamics(mi, mf, ws, carrier, inertia, axis_body, bmat, q, v, alpha, effort, Ms, work, Cs)
    if st != OK:
        return st
    for r in range(n):
        acc = 0.0
        for k in range(n):
            acc += a_inv[r, k] * effort[k]
        xi[r] = acc
    return OK


class GearedComputedTorque(Controller):
    """Virtual-link computed torque for a GRM (see module docstring). ``kp`` 1/s^2, ``kd`` 1/s."""

    default_kp = 400.0

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None, *,
                 mechanism: GearedMechanism | None = None, gs: str = "full"):
        super().__init__(dyn, options)
        if mechanism is None:
            mechanism = mechanism_of(self.model, self.name)
        if self.n != mechanism.n or self.model.nv != mechanism.n:
            raise ValueError(f"{self.name}: model has {self.model.nv} joints, mechanism {mechanism.n}")
        if gs not in ("full", "none", "diagonal"):
            raise ValueError(f"{self.name}: gs must be 'full', 'none' or 'diagonal', got {gs!r}")
        self.mechanism, self.gs = mechanism, gs
        model = mechanism.virtual_model(self.model.name)
        if gs == "diagonal":
            model.set_armature(np.diag(mechanism.dynamics(model).mass_matrix(np.zeros(mechanism.n))
                                       - Dynamics(model).mass_matrix(np.zeros(mechanism.n))).copy())
        self.grm = mechanism.dynamics(model)
        if gs != "full":
            self.grm.bmat = np.zeros_like(self.grm.bmat)
            self.grm.inertia = np.zeros_like(self.grm.inertia)
        n = mechanism.n
        self.alpha = np.zeros(n)
        self.xi = np.zeros(n)

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        g, c = self.grm, self.grm.core
        st = _ct_step(c.mi, c.mf, c.ws, g.carrier, g.inertia, g.axis_body, g.bmat, self.kp, self.kd, q, v, q_d,
                      qd_d, qdd_d, self.alpha, effort, g.Ms, g.work, g.Cs, g.A_inv, self.xi)
        if st != OK:
            raise ValueError(f"{self.name}: inverse dynamics failed with status {st} (NaN/inf state or command)")

    def __repr__(self):
        return f"GearedComputedTorque(gs={self.gs!r}, kp={self.kp.tolist()}, kd={self.kd.tolist()})"
