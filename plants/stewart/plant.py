"""Simulated Stewart platform (Lopes, 2009): the true closed-chain dynamics behind an actuator-space model.

The loop, drivers and safety are sized by the *actuator-space* model
(:meth:`rtctl.plants.stewart.model.StewartPlatform.actuator_model`: six
prismatic "leg" joints), so :class:`StewartPlant` (registered as
``"stewart"``) exposes ``q`` = leg lengths (m), ``v`` = leg rates (m/s) and
takes ``effort`` = leg forces (N). Internally it integrates the platform pose
``x`` = [x, y, z, psi, theta, phi] and rate ``xd`` (ZYX Euler angles) with the
generalized-momentum model,

    M(x) xdd = J_C(x)^T (tau - f(l-dot)) - V(x, xd) xd - G(x),
    f(l-dot) = c_v l-dot + (c_c + (c_s - c_c) exp(-(l-dot / v_s)^2)) tanh(l-dot / s)

(section 3.5 of the paper solved for xdd, leg friction added: viscous, Coulomb and, with
``static_friction`` c_s and ``stribeck_velocity`` v_s, the Stribeck rise towards rest), by classical
RK4 in one compiled, allocation-free call per step
(:func:`rtctl.plants.stewart.steps.plant_step`), and rewrites ``q`` and
``v`` from the new pose after every step -- so the ``sim`` driver works
unchanged. ``reset(q)`` takes leg lengths (forward kinematics from the home
pose); :meth:`reset_pose` takes a pose.

:meth:`set_external_wrench` pushes the moving platform with a known wrench (a contact, a
test load): at the start of each step it becomes the leg forces ``J_C(x)^-T F`` that exert
it (eq. 84), held over the step like the effort.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtctl.plants.integrate import WORK_ROWS
from rtctl.plants.stewart import kernels as _k
from rtctl.plants.stewart import steps as _steps
from rtctl.plants.stewart.model import StewartPlatform
from rtctl.model import Model
from rtctl.options import setting

from ..base import check_integration_options, mechanism_with_model_errors, plant_settings, stribeck_per_coordinate
from .platform_plant import SixLegPlatformPlant

__all__ = ["StewartPlant"]


def _per_leg(value, name):
    arr = np.broadcast_to(np.asarray(value, dtype=float), (6,)).copy() if np.ndim(value) == 0 or \
        np.shape(value) == (6,) else None
    if arr is None or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be a scalar or 6 per-leg values, finite and >= 0, got {value!r}")
    return arr


class StewartPlant(SixLegPlatformPlant):
    """The 6-UPS platform's rigid-body dynamics (platform, 6 cylinders, 6 pistons) under leg forces.

    Parameters
    ----------
    model : the actuator-space model (6 prismatic joints); only its size is used.
    mechanism : a :class:`StewartPlatform` (default: Table 2 parameters).
    integrator : ``"rk4"`` (the only one; the key exists for config compatibility).
    substeps : RK4 sub-steps per :meth:`step`.
    viscous_friction, coulomb_friction : leg friction, N s/m and N (scalar or 6 values).
    coulomb_velocity_scale : m/s of the tanh regularisation.
    static_friction, stribeck_velocity : the legs' breakaway level (N) and Stribeck velocity (m/s, > 0);
        both or neither (module docstring).
    """

    singular = "singular platform inertia or J_C during the step"

    @dataclass(frozen=True)
    class Options(SixLegPlatformPlant.Options):
        static_friction: object = setting("floats", None, low=0.0)          # N: the legs' breakaway level
        stribeck_velocity: object = setting("floats", None, positive=True)  # m/s

    def __init__(self, model: Model, options: "StewartPlant.Options | None" = None, *,
                 mechanism: StewartPlatform | None = None):
        (integrator, substeps, viscous_friction, coulomb_friction, coulomb_velocity_scale, mass_scale, payload_mass,
         payload_frame, payload_offset) = plant_settings(self, options)
        static_friction, stribeck_velocity = self.options.static_friction, self.options.stribeck_velocity
        if model.nq != 6 or model.nv != 6:
            raise ValueError(f"the Stewart plant needs the 6-leg actuator-space model, got nq={model.nq}")
        integrator, substeps, scale = check_integration_options(integrator, substeps, coulomb_velocity_scale)
        self.mechanism, model_errors = mechanism_with_model_errors(
            mechanism or StewartPlatform(), "stewart", "platform", mass_scale, payload_mass, payload_frame,
            payload_offset)
        super().__init__(model)
        self._friction = np.zeros((4, 6))     # rows: viscous, Coulomb, static minus Coulomb, Stribeck velocity
        self._friction[0] = _per_leg(viscous_friction, "viscous_friction")
        self._friction[1] = _per_leg(coulomb_friction, "coulomb_friction")
        self._friction[2], self._friction[3] = stribeck_per_coordinate(static_friction, stribeck_velocity,
                                                                       self._friction[1], 6)
        self._scale = scale
        self.init_platform(substeps, dict(integrator=integrator, substeps=int(substeps),
                                          viscous_friction=np.asarray(viscous_friction, float).tolist(),
                                          coulomb_friction=np.asarray(coulomb_friction, float).tolist(),
                                          coulomb_velocity_scale=scale, **model_errors),
                           static_friction, stribeck_velocity)
        self.x = np.zeros(6)
        self.xd = np.zeros(6)
        self._rk = np.zeros((WORK_ROWS, 6))
        self._wk = np.zeros((_k.NWK, 6, 6))
        self._wv = np.zeros((_k.NWV, 6))
        self.reset_pose(self.home_pose())

    @property
    def platform(self) -> StewartPlatform:
        return self.mechanism

    def home_pose(self) -> np.ndarray:
        return self.mechanism.home

    def reset_pose(self, x, xd=None) -> None:
        """Set the platform pose and rate (time to zero); q, v follow."""
        m = self.mechanism
        self.x[:] = m._pose(x)
        self.xd[:] = 0.0 if xd is None else m._pose(xd, "xd")
        self.q[:], self.v[:], _ = m.leg_motion(self.x, self.xd, np.zeros(6))
        self.t = 0.0

    def advance(self, dt: float, effort) -> int:
        return _steps.plant_step(self.mechanism.pts, self.mechanism.par, self.x, self.xd, effort, dt, self._substeps,
                                 self._friction, self._scale, self.q, self.v, self._rk, self._wk, self._wv)

    def friction_forces(self, leg_rates) -> np.ndarray:
        """The legs' friction forces (N) at ``leg_rates`` (m/s), opposing them (module docstring)."""
        return _k.leg_friction_forces(leg_rates, *self._friction, self._scale)

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy in J."""
        m = self.mechanism
        return m.kinetic_energy(self.x, self.xd), m.potential_energy(self.x)
