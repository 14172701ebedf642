"""Simulated geared robotic mechanism (Chen & Wang, 1998): the true GRM dynamics in joint coordinates.

:class:`GearedPlant` (registered as ``"geared"``) integrates eq. 23 with gravity and joint friction,

    (M_v + M_s) theta'' = effort - C_v - C_s - g - viscous theta' - coulomb tanh(theta' / scale),

where ``effort = A xi`` are the joint torques the input torques produce (eq. 22; the ``sim``
driver applies ``tau_j = A_tr^T tau_m`` with ``A_tr = A^T``, see :mod:`drivers.transmission`).
G_v comes from the generic core on the plant's model (the virtual EOLC), G_s from the mechanism's
secondary links (eqs. 14-21; both times ``mass_scale``, a model error for robustness tests), so the
input-link (rotor) inertias and their coupling are in the plant exactly -- do not also give the
driver a ``rotor_inertia``. One classical RK4 step (``substeps`` sub-steps) is one compiled,
allocation-free call (:func:`_geared_step`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from rtctl.dynamics.kernels import OK
from rtctl.plants.geared.energy import link_energies
from rtctl.plants.geared.kernels import grm_forward_dynamics
from rtctl.plants.geared.model import GearedMechanism, mechanism_of
from rtctl.model import Model, inertia_scale_factor

from ..integrate import WORK_ROWS, rk4_advance
from ..base import Plant, check_integration_options, plant_settings, payload_settings, with_tree_payload

__all__ = ["GearedPlant"]

DIVERGED = 30


@njit(cache=True)
def _geared_rates(q, v, dq, a, args):
    """theta' and theta'' of eq. 23 with joint friction (module docstring) at (theta, theta')."""
    mi, mf, ws, carrier, inertia, axis_body, bmat, effort, visc, coul, scale, M, Ms, work, Cs, zero, tau = args
    for k in range(v.shape[0]):
        dq[k] = v[k]
        tau[k] = effort[k] - visc[k] * v[k] - coul[k] * np.tanh(v[k] / scale)
    return grm_forward_dynamics(mi, mf, ws, carrier, inertia, axis_body, bmat, q, v, tau, a, M, Ms, work, Cs, zero)


_geared_advance = rk4_advance("geared", _geared_rates)
_TAU_ROW = WORK_ROWS  # the friction-corrected joint torques, after the integrator's rows


@njit(cache=True)
def _geared_step(mi, mf, ws, carrier, inertia, axis_body, bmat, q, v, effort, dt, substeps, visc, coul, scale,
                 M, Ms, work, Cs, zero, rk):
    """RK4 on (theta, theta') with rollback; ``rk`` (WORK_ROWS + 1, n): the integrator's rows, then the torques."""
    return _geared_advance(q, v, dt, substeps, rk, DIVERGED, (mi, mf, ws, carrier, inertia, axis_body, bmat, effort,
                                                               visc, coul, scale, M, Ms, work, Cs, zero, rk[_TAU_ROW]))


def _per_joint(value, name, n):
    arr = np.asarray(value, dtype=float)
    arr = np.full(n, float(arr)) if arr.ndim == 0 else arr.copy()
    if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be a scalar or {n} per-joint values, finite and >= 0, got {value!r}")
    return arr


class GearedPlant(Plant):
    """The GRM's joint-space dynamics (eq. 23) under joint torques ``effort`` (= A xi).

    Parameters: ``model`` the virtual EOLC model (:meth:`GearedMechanism.virtual_model`; its
    mass properties give G_v), ``mechanism`` (default: the one the model carries -- robot model
    ``"geared"`` from a ``[mechanism]`` section -- else the built-in one named like the model, e.g. ``"grm3"``), ``integrator`` ``"rk4"`` only, ``substeps``, friction per joint.
    """

    def __init__(self, model: Model, options: "Plant.Options | None" = None, *,
                 mechanism: GearedMechanism | None = None):
        (integrator, substeps, viscous_friction, coulomb_friction, coulomb_velocity_scale, mass_scale, payload_mass,
         payload_frame, payload_offset) = plant_settings(self, options)
        if mechanism is None:
            mechanism = mechanism_of(model, "geared plant")
        integrator, substeps, scale = check_integration_options(integrator, substeps, coulomb_velocity_scale)
        mass_scale = inertia_scale_factor(mass_scale)
        self._payload = payload_settings(payload_mass, payload_frame, payload_offset)
        if mass_scale != 1.0:
            model, mechanism = model.with_inertia_scaled(mass_scale), mechanism.with_inertia_scaled(mass_scale)
        model = with_tree_payload(model, self._payload, "end_effector")
        super().__init__(model)
        self._mass_scale = mass_scale
        self.mechanism = mechanism
        self.dyn = mechanism.dynamics(model)
        n = mechanism.n
        self._visc = _per_joint(viscous_friction, "viscous_friction", n)
        self._coul = _per_joint(coulomb_friction, "coulomb_friction", n)
        self._scale = scale
        self._substeps = int(substeps)
        self._rk = np.zeros((WORK_ROWS + 1, n))

    def step(self, dt: float, effort) -> None:
        if not (isinstance(dt, (int, float)) and 0 < dt < math.inf):
            raise ValueError(f"dt must be a finite time step > 0 s, got {dt!r}")
        d, c = self.dyn, self.dyn.core
        eff = effort
        if not (isinstance(eff, np.ndarray) and eff.dtype == np.float64 and eff.shape == (self.nv,)
                and eff.flags.c_contiguous):
            eff = np.ascontiguousarray(effort, dtype=np.float64)
            if eff.shape != (self.nv,):
                raise ValueError(f"effort must have shape ({self.nv},), got {np.shape(effort)}")
        st = _geared_step(c.mi, c.mf, c.ws, d.carrier, d.inertia, d.axis_body, d.bmat, self.q, self.v, eff,
                          float(dt), self._substeps, self._visc, self._coul, self._scale, d.M, d.Ms, d.work, d.Cs,
                          d.zero, self._rk)
        if st != OK:
            raise ValueError(f"geared plant step failed (status {st}: NaN/inf effort or state, singular inertia or "
                             "divergence); state unchanged")
        self.t += dt

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy of all links, primary and secondary (:mod:`rtctl.plants.geared.energy`)."""
        T, V = link_energies(self.mechanism, self.q.copy(), self.v.copy())
        return float(np.real(T)), float(np.real(V))

    def parameters(self) -> dict:
        return dict(mechanism=self.mechanism.name, substeps=self._substeps, viscous_friction=self._visc.tolist(),
                    coulomb_friction=self._coul.tolist(), coulomb_velocity_scale=self._scale,
                    mass_scale=self._mass_scale, **self._payload)
