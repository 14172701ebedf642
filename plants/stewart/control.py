"""Stewart platform (Lopes, 2009) in the real-time loop: computed-torque leg forces and the pose trajectory.

Both work on the actuator-space model (six prismatic "leg" joints; see
:mod:`rtctl.plants.stewart.plant`) and use the generalized-momentum model of
:class:`rtctl.plants.stewart.model.StewartPlatform` through its compiled kernels:

* :class:`StewartComputedTorque` (``"stewart_computed_torque"``): from the
  *measured* leg lengths and rates only (what a real platform measures), the
  pose by Newton-Raphson forward kinematics warm-started at the previous
  cycle's pose, the platform rate ``xd = J_E^-1 l-dot`` (eq. 5), the desired
  leg accelerations ``alpha = l-ddot_d + Kp e + Kd e-dot``, the platform
  acceleration ``xdd = J_E^-1 (alpha - J_E-dot xd)`` and the leg forces
  ``tau = J_C^-T (M xdd + V xd + G)`` (eqs. 81-84). With an exact model the
  legs follow ``e-ddot + Kd e-dot + Kp e = 0``. One allocation-free compiled
  call per cycle (:func:`~rtctl.plants.stewart.steps.computed_torque_step`).
* :class:`StewartPoseTrajectory` (``"stewart_pose"``): a task-space path through
  pose waypoints (rows [x, y, z (m), psi, theta, phi (rad)]) at the given
  times, each segment the third-order trigonometric rest-to-rest profile
  ``s(tau) = 1/2 - 9/16 cos(pi tau) + 1/16 cos(3 pi tau)`` (velocity
  ``3 pi / 4 sin^3(pi tau)``: position, velocity and acceleration continuous,
  zero velocity and acceleration at every waypoint), converted to desired leg
  lengths, rates and accelerations by inverse kinematics (eqs. 5, 31 and the
  derivative of eq. 5). The paper's P1 -> P2 -> P1 path is the default.
"""
from __future__ import annotations
from dataclasses import dataclass

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.plants.stewart import kernels as _k
from rtctl.plants.stewart import steps as _steps
from rtctl.plants.stewart.model import FK_ERRORS, StewartPlatform, paper_trajectory
from rtctl.plants.stewart.observer import ObserverOptions, add_stewart_observer

from rtctl.options import OptionsBase, options_of, setting
from rtctl.loops.base import Controller, Trajectory

__all__ = ["StewartComputedTorque", "StewartPoseTrajectory"]


class StewartComputedTorque(Controller):
    """Computed-torque leg forces for the Stewart platform (actuator-space model, see module docstring).

    ``kp`` in 1/s^2 (default 400 from config), ``kd`` default ``2 sqrt(kp)``.
    ``self.x`` is the pose estimated by forward kinematics in the last cycle.
    """

    default_kp = 400.0
    requires_model = "stewart"  # actuator-space model of rtctl.mechanisms (six legs), not a generic robot
    sections = {"observer": ObserverOptions}  # the platform's external-wrench observer
    _observer: dict = {}

    @classmethod
    def from_config(cls, options: dict, context) -> "StewartComputedTorque":
        controller = super().from_config(options, context)
        controller._observer = dict(context.sections.get("observer", {}))
        return controller

    def add_loop_hooks(self, loop) -> None:
        """The ``[observer]`` hook on this controller's model, when enabled (called once the loop is built)."""
        add_stewart_observer(self._observer, loop, self.mechanism)

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None, *,
                 mechanism: StewartPlatform | None = None, fk_tol: float = 1e-11, fk_max_iter: int = 20):
        super().__init__(dyn, options)
        if self.model.nv != 6 or self.n != 6:
            raise ValueError(f"{self.name}: needs the 6-leg actuator-space model, got nv={self.model.nv}")
        self.mechanism = mechanism or StewartPlatform()
        self.x = self.mechanism.home.copy()
        self.alpha = np.zeros(6)
        self.tau = np.zeros(6)
        self.fk_tol, self.fk_max_iter = float(fk_tol), int(fk_max_iter)
        self._wk = np.zeros((_k.NWK, 6, 6))
        self._wv = np.zeros((_k.NWV, 6))

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """Leg forces into ``effort`` (6) for measured leg lengths ``q``/rates ``v`` and the desired motion."""
        m = self.mechanism
        try:
            st = _steps.computed_torque_step(m.pts, m.par, q, v, q_d, qd_d, qdd_d, self.kp, self.kd, self.x,
                                         self.fk_tol, self.fk_max_iter, self.alpha, effort, self._wk, self._wv)
        except TypeError:
            args = [np.ascontiguousarray(a, dtype=np.float64) for a in (q, v, q_d, qd_d, qdd_d)]
            for name, a in zip(("q", "v", "q_d", "qd_d", "qdd_d"), args):
                if a.shape != (6,):
                    raise ValueError(f"{self.name}: {name} must have shape (6,), got {a.shape}") from None
            if not (isinstance(effort, np.ndarray) and effort.shape == (6,) and effort.dtype == np.float64
                    and effort.flags.c_contiguous):
                raise ValueError(f"{self.name}: effort must be a C-contiguous float64 array of shape (6,)") \
                    from None
            st = _steps.computed_torque_step(m.pts, m.par, *args, self.kp, self.kd, self.x, self.fk_tol,
                                         self.fk_max_iter, self.alpha, effort, self._wk, self._wv)
        if st != _k.OK:
            if st in FK_ERRORS:
                raise ValueError(f"{self.name}: {FK_ERRORS[st]} (measured leg lengths {np.round(q, 6).tolist()})")
            raise ValueError(f"{self.name}: step failed with status {st}")

    def __repr__(self):
        return f"StewartComputedTorque(kp={self.kp.tolist()}, kd={self.kd.tolist()})"


class StewartPoseTrajectory(Trajectory):
    """Desired leg motion of a pose path (third-order trigonometric segments, then IK).

    ``times``: increasing waypoint times (s); ``waypoints``: one pose row per
    time; default the paper's P1 -> P2 -> P1 with 2 s segments starting at
    ``t0``. Every waypoint must be inside the workspace; poses between them
    are checked on a fine grid at construction.
    """

    n = 6

    @dataclass(frozen=True)
    class Options(OptionsBase):
        times: object = setting("floats", None)          # s; default: the paper's path
        waypoints: object = setting("matrix", None)      # pose rows [x, y, z, psi, theta, phi] (m, rad)
        t0: float = setting("float", 0.0, low=0.0)

    def __init__(self, options: "StewartPoseTrajectory.Options | None" = None, *,
                 mechanism: StewartPlatform | None = None):
        self.options = options = options_of(self, options)
        times, waypoints, t0 = options.times, options.waypoints, options.t0
        self.mechanism = m = mechanism or StewartPlatform()
        if times is None and waypoints is None:
            times, waypoints = paper_trajectory(t0=t0)
        elif times is None or waypoints is None:
            raise ValueError("stewart_pose: give both 'times' and 'waypoints' (or neither for the paper's path)")
        else:
            times = np.asarray(times, dtype=float) + t0
        self.times = np.ascontiguousarray(times, dtype=float)
        self.waypoints = np.ascontiguousarray(waypoints, dtype=float)
        if self.times.ndim != 1 or self.times.size < 2 or np.any(np.diff(self.times) <= 0) \
                or not np.all(np.isfinite(self.times)):
            raise ValueError(f"stewart_pose: times must be >= 2 finite, strictly increasing values, got "
                             f"{self.times.tolist()}")
        if self.waypoints.shape != (self.times.size, 6) or not np.all(np.isfinite(self.waypoints)):
            raise ValueError(f"stewart_pose: waypoints must be {self.times.size} finite rows of 6 pose values "
                             f"[x, y, z, psi, theta, phi] (m, rad), got shape {self.waypoints.shape}")
        self.duration = float(self.times[-1])
        x, xd, xdd = np.zeros(6), np.zeros(6), np.zeros(6)
        for t in np.linspace(self.times[0], self.times[-1], 401):
            _steps.pose_spline_sample(float(t), self.times, self.waypoints, x, xd, xdd)
            status = m.workspace_status(x)
            if status:
                from rtctl.plants.stewart.model import WORKSPACE_REASONS
                raise ValueError(f"stewart_pose: the path leaves the workspace at t = {t:.3f} s "
                                 f"(pose {np.round(x, 4).tolist()}): {WORKSPACE_REASONS[status]}")
        self._wk = np.zeros((_k.NWK, 6, 6))
        self._wv = np.zeros((_k.NWV, 6))

    def pose(self, t: float):
        """(x, xd, xdd) of the pose path at time t."""
        x, xd, xdd = np.zeros(6), np.zeros(6), np.zeros(6)
        _steps.pose_spline_sample(float(t), self.times, self.waypoints, x, xd, xdd)
        return x, xd, xdd

    def sample(self, t: float, q, qd, qdd) -> None:
        _steps.pose_trajectory_sample(self.mechanism.pts, float(t), self.times, self.waypoints, q, qd, qdd,
                                  self._wk, self._wv)

    def __repr__(self):
        return f"StewartPoseTrajectory(times={self.times.tolist()})"
