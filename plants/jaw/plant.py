"""Simulated jaw-rehabilitation robot (Kalani et al., 2018): robot + jaw model + patient behind the legs.

:class:`JawPlant` (registered as ``"jaw"``) exposes the robot's actuator space
like :mod:`rtctl.plants.stewart.plant`: ``q`` = leg lengths (m), ``v`` = leg rates (m/s),
``effort`` = leg forces (N). Inside it integrates the common pose ``x`` of the
robot's moving platform and the mandible (the jaw model's moving platform,
rigidly attached) with the generalized-momentum model of each platform
(Lopes, 2009) and the patient's generalized force,

    T^T (M_r + E M_j S) xdd + T^T (V_r xd + G_r + E (V_j S xd + G_j)) = J_E^T tau_net + f_patient

(:func:`rtctl.plants.jaw.kernels.coupled_matrices`), ``tau_net`` the leg
forces minus the legs' friction (viscous, Coulomb, and the Stribeck rise towards rest with
``static_friction`` and ``stribeck_velocity``, as in :mod:`rtctl.plants.stewart.plant`), ``f_patient`` the
stiffness, damping and food-bolus force of :class:`~rtctl.plants.jaw.model.PatientImpedance`,
by classical RK4 in one compiled, allocation-free call per step
(:func:`~rtctl.plants.jaw.steps.plant_step`). The controllers of
:mod:`rtctl.plants.jaw.control` use the independent Gibbs-Appell model.

For plotting: :attr:`x`, :attr:`xd` (pose and rate), :attr:`patient_force`
(Euler-space generalized force of the patient), :meth:`patient_wrench`
([force; moment] in {B}), :attr:`jaw_leg_lengths`, :attr:`incisal`
(incisal displacement from occlusion, m), :attr:`bolus_force` (N). A force-torque sensor in the mouthpiece
(backend ``sim_force_torque`` on the model's frame ``incisal`` or ``platform``) reads the patient's wrench
(:meth:`sensor_wrench`).

:meth:`set_external_wrench` pushes the moving platform with a known wrench (at its centre or the
incisal point): at the start of each step it becomes the robot leg forces ``J_C(x)^-T F`` that
exert it, held over the step like the effort.
"""
from __future__ import annotations

from dataclasses import dataclass


import numpy as np

from rtctl.plants.jaw import kernels as _jk
from rtctl.plants.jaw import steps as _steps
from rtctl.plants.jaw.model import STATUS_REASONS, JawRehabRobot, PatientImpedance
from rtctl.plants.jaw.mouthpiece import mouthpiece_wrench
from rtctl.plants.stewart import kernels as _sk
from rtctl.plants.stewart.platform_plant import SixLegPlatformPlant
from rtctl.model import Model
from rtctl.options import ConfigError, setting

from ..base import check_integration_options, mechanism_with_model_errors, plant_settings, stribeck_per_coordinate

__all__ = ["JawPlant"]


@dataclass(frozen=True)
class PatientOptions:
    """``[patient]``: the patient's impedance about the rest pose (:class:`PatientImpedance`; default nominal)."""

    stiffness: object = setting("floats", None, low=0.0)      # 6: N/m (x, y, z), N m/rad (psi, theta, phi)
    damping: object = setting("floats", None, low=0.0)        # 6: N s/m, N m s/rad
    bolus_force: float = setting("float", None, low=0.0)      # N, resisting closing inside bolus_band
    bolus_damping: float = setting("float", None, low=0.0)    # N s/m
    bolus_band: object = setting("floats", None)              # (lower, upper) incisal vertical displacement, m
    bolus_edge: float = setting("float", None, low=0.0)       # m
    bolus_velocity_scale: float = setting("float", None, positive=True)   # m/s


class JawPlant(SixLegPlatformPlant):
    """The coupled robot + jaw-model + patient dynamics under the robot's leg forces.

    Parameters
    ----------
    model : the actuator-space model (6 prismatic legs); only its size is used.
    mechanism : a :class:`JawRehabRobot` (default: the documented desktop geometry).
    integrator : ``"rk4"``; substeps : RK4 sub-steps per :meth:`step`.
    viscous_friction, coulomb_friction : robot leg friction, N s/m and N (scalar or 6 values).
    coulomb_velocity_scale : m/s of the tanh regularisation.
    impedance : the *true* patient (:class:`PatientImpedance`; default the mechanism's nominal one).
    stiffness, damping, bolus_damping, bolus_force, bolus_band, bolus_edge, bolus_velocity_scale :
        override single fields of that impedance (same meaning and units; validated).
    """

    sections = {"patient": PatientOptions}
    singular = "singular inertia or J_E during the step"

    @dataclass(frozen=True)
    class Options(SixLegPlatformPlant.Options):
        static_friction: object = setting("floats", None, low=0.0)          # N: the legs' breakaway level
        stribeck_velocity: object = setting("floats", None, positive=True)  # m/s

    @classmethod
    def from_config(cls, options: dict, context, **arguments):
        patient = {k: v for k, v in context.sections["patient"].items() if v is not None}
        try:
            PatientImpedance().replace(**patient)
        except ValueError as exc:
            raise ConfigError(f"{context.source}: [patient] {exc}") from None
        return super().from_config(options, context, **patient, **arguments)

    def __init__(self, model: Model, options: "JawPlant.Options | None" = None, *,
                 mechanism: JawRehabRobot | None = None, impedance: PatientImpedance | None = None,
                 stiffness=None, damping=None, bolus_damping=None, bolus_force=None, bolus_band=None,
                 bolus_edge=None, bolus_velocity_scale=None):
        (integrator, substeps, viscous_friction, coulomb_friction, coulomb_velocity_scale, mass_scale, payload_mass,
         payload_frame, payload_offset) = plant_settings(self, options)
        static_friction, stribeck_velocity = self.options.static_friction, self.options.stribeck_velocity
        if model.nq != 6 or model.nv != 6:
            raise ValueError(f"the jaw plant needs the 6-leg actuator-space model, got nq={model.nq}, nv={model.nv}")
        integrator, substeps, scale = check_integration_options(integrator, substeps, coulomb_velocity_scale)
        self.mechanism, model_errors = mechanism_with_model_errors(
            mechanism or JawRehabRobot(), "jaw", "platform", mass_scale, payload_mass, payload_frame, payload_offset)
        m = self.mechanism
        super().__init__(model)
        if impedance is not None and not isinstance(impedance, PatientImpedance):
            raise ValueError(f"impedance must be a PatientImpedance, got {type(impedance).__name__}")
        self.impedance = (impedance or m.impedance).replace(
            stiffness=stiffness, damping=damping, bolus_damping=bolus_damping, bolus_force=bolus_force,
            bolus_band=bolus_band, bolus_edge=bolus_edge, bolus_velocity_scale=bolus_velocity_scale)
        self.P = m.pack(self.impedance, viscous_friction=viscous_friction, coulomb_friction=coulomb_friction,
                        coulomb_velocity_scale=scale)
        cp = self.P[_jk.CPL]
        cp[_jk.C_STRIBECK:_jk.C_STRIBECK + 6], cp[_jk.C_STRIBECK_V:_jk.C_STRIBECK_V + 6] = stribeck_per_coordinate(
            static_friction, stribeck_velocity, cp[_jk.C_COUL:_jk.C_COUL + 6], 6)
        self.init_platform(substeps, dict(integrator=integrator, substeps=substeps,
                                          viscous_friction=self.P[_jk.CPL, _jk.C_VISC:_jk.C_VISC + 6].tolist(),
                                          coulomb_friction=self.P[_jk.CPL, _jk.C_COUL:_jk.C_COUL + 6].tolist(),
                                          coulomb_velocity_scale=scale, **model_errors,
                                          impedance=self.impedance.as_dict()),
                           static_friction, stribeck_velocity)
        self._S = np.zeros((_jk.NS, 6))
        self.x, self.xd = self._S[_jk.S_X], self._S[_jk.S_XD]
        self.q, self.v = self._S[_jk.S_Q], self._S[_jk.S_V]
        self.jaw_leg_lengths = self._S[_jk.S_QJ]
        self.patient_force = self._S[_jk.S_FP]
        self.incisal = self._S[_jk.S_INC, :3]
        self._W, self._V = np.zeros((_jk.NW, 6, 6)), np.zeros((_jk.NV, 6))
        self.frames = m.platform_frames()
        self._sensor_rotation = np.zeros((3, 3))
        self.reset_pose(self.home_pose())

    @property
    def platform(self):
        return self.mechanism.robot

    def home_pose(self) -> np.ndarray:
        return self.mechanism.rest_pose

    def set_external_wrench(self, frame: str | None = "incisal", wrench=None) -> None:
        """As :meth:`SixLegPlatformPlant.set_external_wrench`, about the incisal point by default."""
        super().set_external_wrench(frame, wrench)

    def sensor_wrench(self, body: int, mount: np.ndarray, out: np.ndarray) -> bool:
        """:meth:`Plant.sensor_wrench` of a force-torque sensor in the mouthpiece: the wrench the patient exerts on
        it (:mod:`rtctl.plants.jaw.mouthpiece`). ``body`` -1 and ``mount`` at the rest pose: a frame of the
        platform as the actuator-space model names it; the legs (that model's bodies) carry no sensor: False."""
        if body != -1:
            return False
        return mouthpiece_wrench(self.x, self.patient_force, self.mechanism.rest_pose, mount, self._sensor_rotation,
                                 out)

    @property
    def bolus_force(self) -> float:
        """The bolus force on the incisal point at the current state, N (>= 0, downward)."""
        return float(self._S[_jk.S_INC, 3])

    def patient_wrench(self) -> np.ndarray:
        """The patient's wrench on the platform in {B}, [force; moment about the platform centre]."""
        return self.mechanism.patient_wrench(self.x, self.xd, self.impedance)

    def reset_pose(self, x, xd=None) -> None:
        """Set the pose and rate (time to zero); ValueError outside the workspace of either platform."""
        m = self.mechanism
        x = m._pose(x)
        status = m.workspace_status(x)
        if status:
            raise ValueError(f"pose {np.round(x, 6).tolist()} is not in the workspace: {STATUS_REASONS[status]}")
        self.x[:] = x
        self.xd[:] = 0.0 if xd is None else m._pose(xd, "xd")
        _steps.plant_outputs(m.pts2, self.P, self._S, self._W, self._V)
        self.t = 0.0

    def advance(self, dt: float, effort) -> int:
        return _steps.plant_step(self.mechanism.pts2, self.P, self._S, effort, dt, self._substeps, self._W, self._V)

    def friction_forces(self, leg_rates) -> np.ndarray:
        """The robot legs' friction forces (N) at ``leg_rates`` (m/s), opposing them (module docstring)."""
        cp = self.P[_jk.CPL]
        return _sk.leg_friction_forces(leg_rates, cp[_jk.C_VISC:_jk.C_VISC + 6], cp[_jk.C_COUL:_jk.C_COUL + 6],
                                       cp[_jk.C_STRIBECK:_jk.C_STRIBECK + 6],
                                       cp[_jk.C_STRIBECK_V:_jk.C_STRIBECK_V + 6], cp[_jk.C_VSC])

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy in J; potential = gravity of both platforms + the patient stiffness's."""
        e = self.mechanism.energy(self.x, self.xd, self.impedance)
        return e["kinetic"], e["gravity"] + e["spring"]
