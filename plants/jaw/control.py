"""Jaw-rehabilitation robot (Kalani et al., 2018) in the real-time loop: Gibbs-Appell controllers on the legs.

Both controllers work on the robot's actuator space (six prismatic legs, see
:mod:`rtctl.plants.jaw.plant`) and use the coupled Gibbs-Appell model of
:class:`rtctl.plants.jaw.model.JawRehabRobot` (robot platform and legs, mandible
platform and the jaw model's passive legs, and -- ``include_impedance``, default
on -- the nominal patient impedance), one allocation-free compiled call per cycle:

* :class:`JawFeedForwardPD` (``"jaw_ff_pd"``): the desired pose by forward
  kinematics of the *desired* leg lengths (Newton-Raphson warm-started at the
  previous cycle's), its rate and acceleration from the desired leg rates and
  accelerations (Lopes, 2009, eq. 5, and its derivative), the Gibbs-Appell leg
  forces of that motion plus a PD on the leg errors:
  ``tau = ID(x_d, xd_d, xdd_d) + Kp (q_d - q) + Kd (qd_d - v)``, kp in N/m, kd in
  N s/m (default: critically damped for the leg-space inertia at the rest pose,
  ``kd_i = 2 sqrt(kp_i Lambda_ii)``, ``Lambda = J_E^-T M_E J_E^-1``).
* :class:`JawComputedTorque` (``"jaw_computed_torque"``): like
  ``stewart_computed_torque`` -- the pose by forward kinematics of the
  *measured* legs, ``xd = J_E^-1 v``, ``alpha = qdd_d + Kp e + Kd e-dot``,
  ``xdd = J_E^-1 (alpha - J_E-dot xd)``, ``tau = ID(x, xd, xdd)``; kp in 1/s^2
  (default 400), kd default ``2 sqrt(kp)``. With an exact model the legs follow
  ``e-ddot + Kd e-dot + Kp e = 0``.
"""
from __future__ import annotations

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.plants.jaw import kernels as _jk
from rtctl.plants.jaw import steps as _steps
from rtctl.plants.jaw.bite import BiteMonitor
from rtctl.plants.jaw.model import JawRehabRobot, PatientImpedance
from rtctl.plants.stewart.model import FK_ERRORS

from rtctl.loops.base import Controller
from rtctl.options import options_of

__all__ = ["JawComputedTorque", "JawFeedForwardPD"]

_ARGS = ("q", "v", "q_d", "qd_d", "qdd_d")


class _JawController(Controller):
    """Shared machinery: packed model and state, the compiled step, status -> ValueError."""

    requires_model = "jaw"  # actuator-space model of rtctl.mechanisms (the robot's six legs)
    sections = {"bite": BiteMonitor.Options}  # the bite-force limit and patient identification
    _step = None
    _bite: dict = {}

    @classmethod
    def from_config(cls, options: dict, context) -> "_JawController":
        controller = super().from_config(options, context)
        controller._bite = dict(context.sections.get("bite", {}))
        return controller

    def add_loop_hooks(self, loop) -> None:
        """The ``[bite]`` monitor on this controller's model, when enabled (called once the loop is built)."""
        BiteMonitor.from_config(self._bite, loop, self.mechanism)

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None, *,
                 mechanism: JawRehabRobot | None = None, include_impedance: bool = True,
                 impedance: PatientImpedance | None = None, fk_tol: float = 1e-11, fk_max_iter: int = 20):
        options = options_of(self, options)
        kd = options.kd
        super().__init__(dyn, options.replace(kd=0.0 if kd is None else kd))
        self.options = options
        if self.model.nv != 6 or self.n != 6:
            raise ValueError(f"{self.name}: needs the 6-leg actuator-space model, got nv={self.model.nv}")
        if not isinstance(include_impedance, bool):
            raise ValueError(f"{self.name}: include_impedance must be True or False, got {include_impedance!r}")
        if impedance is not None and not include_impedance:
            raise ValueError(f"{self.name}: an impedance was given but include_impedance is False")
        if not (np.isfinite(fk_tol) and fk_tol > 0) or int(fk_max_iter) != fk_max_iter or fk_max_iter < 1:
            raise ValueError(f"{self.name}: fk_tol must be > 0 and fk_max_iter an integer >= 1, got "
                             f"{fk_tol!r}, {fk_max_iter!r}")
        self.mechanism = m = mechanism or JawRehabRobot()
        self.include_impedance = include_impedance
        self.P = m.pack(impedance if include_impedance else PatientImpedance.none())
        self._C = np.zeros((_jk.NK, 6))
        self._C[_jk.K_KP], self._C[_jk.K_KD] = self.kp, self.kd if kd is not None else self._default_kd()
        self.kp, self.kd = self._C[_jk.K_KP], self._C[_jk.K_KD]
        self._C[_jk.K_X] = m.rest_pose
        self._C[_jk.K_OPT, 0], self._C[_jk.K_OPT, 1] = float(fk_tol), int(fk_max_iter)
        self.x, self.xd, self.xdd = self._C[_jk.K_X], self._C[_jk.K_XD], self._C[_jk.K_XDD]
        self._W, self._V = np.zeros((_jk.NW, 6, 6)), np.zeros((_jk.NV, 6))

    def _default_kd(self) -> np.ndarray:
        return 2.0 * np.sqrt(self.kp)

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """Leg forces into ``effort`` (6) for the measured legs ``q``/``v`` and the desired leg motion."""
        m = self.mechanism
        try:
            st = self._step(m.pts2, self.P, q, v, q_d, qd_d, qdd_d, effort, self._C, self._W, self._V)
        except TypeError:
            args = []
            for name, a in zip(_ARGS, (q, v, q_d, qd_d, qdd_d)):
                try:
                    arr = np.array(a, dtype=np.float64, order="C")
                except (TypeError, ValueError):
                    raise ValueError(f"{self.name}: {name} must be a numeric vector") from None
                if arr.shape != (6,):
                    raise ValueError(f"{self.name}: {name} must have shape (6,), got {arr.shape}")
                args.append(arr)
            if not (isinstance(effort, np.ndarray) and effort.shape == (6,) and effort.dtype == np.float64
                    and effort.flags.c_contiguous and effort.flags.writeable):
                raise ValueError(f"{self.name}: effort must be a writable C-contiguous float64 array of shape (6,)")
            st = self._step(m.pts2, self.P, *args, effort, self._C, self._W, self._V)
        if st != _jk.OK:
            self._raise(st, (q, v, q_d, qd_d, qdd_d, effort))

    def _raise(self, st, args):
        if st == _jk.WRONG_SHAPE:
            name, arr = next((n, a) for n, a in zip(_ARGS + ("effort",), args) if np.shape(a) != (6,))
            raise ValueError(f"{self.name}: {name} must have shape (6,), got {np.shape(arr)}")
        if st == _jk.NOT_FINITE:
            bad = next(n for n, a in zip(_ARGS, args) if not np.all(np.isfinite(np.asarray(a, dtype=float))))
            raise ValueError(f"{self.name}: {bad} contains NaN or inf")
        if st in FK_ERRORS and st != _jk.SINGULAR:
            which = "desired" if isinstance(self, JawFeedForwardPD) else "measured"
            legs = args[2] if which == "desired" else args[0]
            reason = FK_ERRORS[st].replace("measured", which)
            raise ValueError(f"{self.name}: {reason} ({which} leg lengths {np.round(legs, 6).tolist()})")
        raise ValueError(f"{self.name}: J_E is singular at the pose {np.round(self.x, 6).tolist()}")

    def __repr__(self):
        return (f"{type(self).__name__}(kp={self.kp.tolist()}, kd={self.kd.tolist()}, "
                f"include_impedance={self.include_impedance})")


class JawComputedTorque(_JawController):
    """Computed torque on the coupled Gibbs-Appell model (module docstring); kp in 1/s^2, kd in 1/s.
    ``self.x``, ``self.xd``, ``self.xdd``: the pose estimated from the measured legs and the commanded rates."""

    default_kp = 400.0
    _step = staticmethod(_steps.computed_torque_step)


class JawFeedForwardPD(_JawController):
    """Gibbs-Appell feed-forward of the desired leg motion + leg PD (module docstring); kp in N/m, kd in N s/m.
    ``self.x``, ``self.xd``, ``self.xdd``: the desired pose and its rates of the last cycle."""

    _step = staticmethod(_steps.ff_pd_step)

    def _default_kd(self) -> np.ndarray:
        m = self.mechanism
        JE = m.robot.je(m.rest_pose)
        Jinv = np.linalg.inv(JE)
        lam = np.diag(Jinv.T @ m.mass_matrix(m.rest_pose) @ Jinv)
        return 2.0 * np.sqrt(self.kp * lam)
