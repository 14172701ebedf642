"""What a simulated six-leg platform is, whichever dynamics moves it: the Stewart platform (Lopes, 2009) and the
jaw rehabilitation robot (Kalani et al., 2018), each a 6-UPS platform driven by its legs' forces.

The plant shows the loop the actuator space (``q`` leg lengths, m; ``v`` leg rates, m/s; ``effort`` leg forces,
N) and keeps the moving platform's pose ``x`` = [x, y, z, psi, theta, phi] (ZYX Euler angles) and rate ``xd``.
A subclass gives its compiled step (:meth:`advance`), the platform its legs drive (:attr:`platform`, a
:class:`~rtctl.plants.stewart.model.StewartPlatform`), its home pose and :meth:`reset_pose`; this class gives the
rest: the reset from leg lengths (forward kinematics), the step's checks and messages, and an external wrench,
which at the start of each step becomes the leg forces ``J_C(x)^-T F`` that exert it (Lopes 2009, eq. 84),
held over the step like the effort.
"""
from __future__ import annotations

import abc

import numpy as np

from . import kernels as _k
from .solvers import solve6
from ..base import Plant, time_step

__all__ = ["SixLegPlatformPlant"]


class SixLegPlatformPlant(Plant):
    """A 6-UPS platform under leg forces (module docstring)."""

    frames: dict = {"platform": np.zeros(3)}   # points of the moving platform (its frame) a wrench may act at
    singular = "singular inertia during the step"   # what a SINGULAR status of the step means

    def init_platform(self, substeps: int, settings: dict, static_friction=None, stribeck_velocity=None) -> None:
        """What every six-leg plant keeps beside its own state: sub-steps, settings (with the legs' static
        friction where given), the wrench's buffers."""
        self._substeps = int(substeps)
        self._settings = settings
        if static_friction is not None:
            settings.update(static_friction=np.asarray(static_friction, float).tolist(),
                            stribeck_velocity=np.asarray(stribeck_velocity, float).tolist())
        self._wrench = np.zeros(6)          # [force; moment about the platform centre], base axes
        self._wrench_on = False
        self._push, self._tau_wrench = np.zeros(6), np.zeros(6)   # effort + the wrench's leg forces
        self._R, self._JC, self._LU = np.zeros((3, 3)), np.zeros((6, 6)), np.zeros((6, 6))
        self._a, self._l = np.zeros(3), np.zeros(3)

    # -- what a six-leg plant declares
    @property
    @abc.abstractmethod
    def platform(self):
        """The :class:`~rtctl.plants.stewart.model.StewartPlatform` whose legs the loop drives."""

    @abc.abstractmethod
    def home_pose(self) -> np.ndarray:
        """The pose :meth:`reset` starts from without leg lengths."""

    @abc.abstractmethod
    def reset_pose(self, x, xd=None) -> None:
        """Set the pose and rate (time to zero); ``q`` and ``v`` follow."""

    @abc.abstractmethod
    def advance(self, dt: float, effort: np.ndarray) -> int:
        """One compiled step by ``dt`` with ``effort`` held; its status (``kernels.OK`` ...). TypeError when the
        compiled step refuses ``effort``'s type (:meth:`step` converts it then)."""

    # -- what they share
    def set_external_wrench(self, frame: str | None = "platform", wrench=None) -> None:
        """Apply ``wrench`` = [n; f] (N m, N; base axes, moment about ``frame``, a point of :attr:`frames`) from
        the next :meth:`step` on. ``frame=None``: remove it. Between steps only (allocates)."""
        if frame is None:
            self._wrench[:] = 0.0
            self._wrench_on = False
            return
        if frame not in self.frames:
            raise ValueError(f"frame '{frame}' does not exist on the platform; frames: {sorted(self.frames)}")
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ValueError(f"wrench must be 6 finite values [n; f], got {wrench!r}")
        arm = self.platform.rotation(self.x) @ self.frames[frame]
        self._wrench[:3] = w[3:]
        self._wrench[3:] = w[:3] + np.cross(arm, w[3:])
        self._wrench_on = True

    def external_wrench(self) -> np.ndarray:
        """The applied wrench [n; f] about the platform centre, base axes (a copy; zero when none)."""
        return np.concatenate([self._wrench[3:], self._wrench[:3]])

    def _with_wrench(self, effort):
        """``effort`` plus the leg forces exerting the wrench at the current pose (J_C^T tau = F, eq. 84)."""
        _k.rotation(self.x, self._R)
        _k.jc_matrix(self.platform.pts, self.x, self._R, self._JC, self._a, self._l)
        if solve6(self._JC, self._wrench, self._tau_wrench, self._LU, True) != _k.OK:
            raise ValueError("J_C is singular at this pose: the external wrench cannot be applied")
        np.add(effort, self._tau_wrench, out=self._push)
        return self._push

    def reset(self, q=None, v=None) -> None:
        """Set the leg lengths ``q`` (default: the home pose) and rates ``v`` (default 0); the pose comes from
        forward kinematics (ValueError outside the workspace)."""
        m = self.mechanism
        x = self.home_pose().copy() if q is None else m.forward_kinematics(q)
        xd = np.zeros(6) if v is None else np.linalg.solve(self.platform.je(x), m._pose(v, "v"))
        self.reset_pose(x, xd)

    def step(self, dt: float, effort) -> None:
        """Advance by ``dt`` s with leg forces ``effort`` (6, N) held; ValueError (state unchanged) on bad
        input, a singular inertia or divergence."""
        dt = time_step(dt)
        if self._wrench_on:
            effort = self._with_wrench(np.asarray(effort, dtype=float))
        try:
            status = self.advance(dt, effort)
        except TypeError:
            converted = np.ascontiguousarray(effort, dtype=np.float64)
            if converted.shape != (6,):
                raise ValueError(f"effort must have shape (6,), got {np.shape(effort)}") from None
            status = self.advance(dt, converted)
        if status == _k.NOT_FINITE:
            raise ValueError("effort or plant state contains NaN or inf, or the step diverged; state unchanged")
        if status != _k.OK:
            raise ValueError(f"{self.singular}; state unchanged")
        self.t += dt

    def parameters(self) -> dict:
        return dict(self._settings)

    def __repr__(self):
        return f"{type(self).__name__}(substeps={self._substeps}, x={np.round(self.x, 5).tolist()})"
