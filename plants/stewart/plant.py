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
from rtctl.plants.stewart.solvers import solve6
from rtctl.plants.stewart.model import StewartPlatform
from rtctl.model import Model
from rtctl.options import setting

from ..base import (Plant, check_integration_options, mechanism_with_model_errors, plant_settings,
                    stribeck_per_coordinate, time_step)

__all__ = ["StewartPlant"]


def _per_leg(value, name):
    arr = np.broadcast_to(np.asarray(value, dtype=float), (6,)).copy() if np.ndim(value) == 0 or \
        np.shape(value) == (6,) else None
    if arr is None or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be a scalar or 6 per-leg values, finite and >= 0, got {value!r}")
    return arr


class StewartPlant(Plant):
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

    @dataclass(frozen=True)
    class Options(Plant.Options):
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
        self._substeps = int(substeps)
        self._settings = dict(integrator=integrator, substeps=int(substeps),
                              viscous_friction=np.asarray(viscous_friction, float).tolist(),
                              coulomb_friction=np.asarray(coulomb_friction, float).tolist(),
                              coulomb_velocity_scale=scale, **model_errors)
        if static_friction is not None:
            self._settings.update(static_friction=np.asarray(static_friction, float).tolist(),
                                  stribeck_velocity=np.asarray(stribeck_velocity, float).tolist())
        self.x = np.zeros(6)
        self.xd = np.zeros(6)
        self._rk = np.zeros((WORK_ROWS, 6))
        self._wk = np.zeros((_k.NWK, 6, 6))
        self._wv = np.zeros((_k.NWV, 6))
        self._wrench = np.zeros(6)          # [force; moment about the platform centre] in {B}
        self._wrench_on = False
        self._push = np.zeros(6)            # effort + the leg forces of the wrench
        self._R, self._JC, self._LU = np.zeros((3, 3)), np.zeros((6, 6)), np.zeros((6, 6))
        self._a, self._l, self._tau_wrench = np.zeros(3), np.zeros(3), np.zeros(6)
        self.reset_pose(self.mechanism.home)

    frames = {"platform": np.zeros(3)}

    def set_external_wrench(self, frame: str | None = "platform", wrench=None) -> None:
        """Apply ``wrench`` = [n; f] (N m, N; base axes, moment about ``frame``, a point of the moving
        platform: ``"platform"``, its centre) from the next :meth:`step` on. ``frame=None``: remove it.
        Between steps only (allocates)."""
        if frame is None:
            self._wrench[:] = 0.0
            self._wrench_on = False
            return
        points = self.frames
        if frame not in points:
            raise ValueError(f"frame '{frame}' does not exist on the platform; frames: {sorted(points)}")
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ValueError(f"wrench must be 6 finite values [n; f], got {wrench!r}")
        arm = self.mechanism.rotation(self.x) @ points[frame]
        self._wrench[:3] = w[3:]
        self._wrench[3:] = w[:3] + np.cross(arm, w[3:])
        self._wrench_on = True

    def external_wrench(self) -> np.ndarray:
        """The applied wrench [n; f] about the platform centre, base axes (a copy; zero when none)."""
        return np.concatenate([self._wrench[3:], self._wrench[:3]])

    def _with_wrench(self, effort):
        """``effort`` plus the leg forces exerting the wrench at the current pose (J_C^T tau = F, eq. 84)."""
        _k.rotation(self.x, self._R)
        _k.jc_matrix(self.mechanism.pts, self.x, self._R, self._JC, self._a, self._l)
        if solve6(self._JC, self._wrench, self._tau_wrench, self._LU, True) != _k.OK:
            raise ValueError("J_C is singular at this pose: the external wrench cannot be applied")
        np.add(effort, self._tau_wrench, out=self._push)
        return self._push

    def reset_pose(self, x, xd=None) -> None:
        """Set the platform pose and rate (time to zero); q, v follow."""
        m = self.mechanism
        self.x[:] = m._pose(x)
        self.xd[:] = 0.0 if xd is None else m._pose(xd, "xd")
        self.q[:], self.v[:], _ = m.leg_motion(self.x, self.xd, np.zeros(6))
        self.t = 0.0

    def reset(self, q=None, v=None) -> None:
        """Set the leg lengths ``q`` (default: the home pose) and rates ``v`` (default 0); the pose is
        found by forward kinematics (ValueError outside the workspace)."""
        m = self.mechanism
        x = m.home.copy() if q is None else m.forward_kinematics(q)
        xd = np.zeros(6) if v is None else np.linalg.solve(m.je(x), m._pose(v, "v"))
        self.reset_pose(x, xd)

    def step(self, dt: float, effort) -> None:
        """Advance by ``dt`` s with leg forces ``effort`` (6, N) held; ValueError (state unchanged) on bad
        input, a singular inertia or divergence."""
        dt = time_step(dt)
        if self._wrench_on:
            effort = self._with_wrench(np.asarray(effort, dtype=float))
        try:
            st = _steps.plant_step(self.mechanism.pts, self.mechanism.par, self.x, self.xd, effort, dt,
                                   self._substeps, self._friction, self._scale, self.q, self.v, self._rk,
                                   self._wk, self._wv)
        except TypeError:
            eff = np.ascontiguousarray(effort, dtype=np.float64)
            if eff.shape != (6,):
                raise ValueError(f"effort must have shape (6,), got {np.shape(effort)}") from None
            st = _steps.plant_step(self.mechanism.pts, self.mechanism.par, self.x, self.xd, eff, dt,
                                   self._substeps, self._friction, self._scale, self.q, self.v, self._rk,
                                   self._wk, self._wv)
        if st == _k.NOT_FINITE:
            raise ValueError("effort or plant state contains NaN or inf, or the step diverged; state unchanged")
        if st != _k.OK:
            raise ValueError("singular platform inertia or J_C during the step; state unchanged")
        self.t += dt

    def friction_forces(self, leg_rates) -> np.ndarray:
        """The legs' friction forces (N) at ``leg_rates`` (m/s), opposing them (module docstring)."""
        return _k.leg_friction_forces(leg_rates, *self._friction, self._scale)

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy in J."""
        m = self.mechanism
        return m.kinetic_energy(self.x, self.xd), m.potential_energy(self.x)

    def parameters(self) -> dict:
        return dict(self._settings)

    def __repr__(self):
        return f"StewartPlant(substeps={self._substeps}, x={np.round(self.x, 4).tolist()})"
