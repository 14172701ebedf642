"""Simulated quadruped with a robotic tail, all feet on the ground (Liu & Ben-Tzvi, 2018), behind an
actuator-space model.

The loop, drivers and safety are sized by the actuator-space model
(:meth:`rtctl.plants.quadruped_tail.model.QuadrupedTail.actuator_model`: 14
independent revolute joints ``ha1, ha2, k1..k4, ta, tb, ha3, ha4, hb1..hb4`` =
``[q_a; q_p]`` of eqs. 27-28). :class:`QuadrupedTailPlant` (``"quadruped_tail"``)
integrates the true 8-DOF dynamics ``M q'' + C + G = F`` (eqs. 42-55,
``F = J_tau^T tau`` eq. 46) of ``q = [p, phi_x, phi_y, phi_z, ta, tb]`` by
classical RK4 (``substeps`` per step, one compiled call), and after every step
rewrites the public ``q``/``v`` with the joint angles/rates of the 14 actuators
(inverse kinematics, eqs. 4-18) -- so the ``sim`` driver works unchanged.
``effort`` is the 14 actuator torques (N m). ``reset(q)`` takes actuator
angles (the pose follows by forward kinematics, the feet being fixed);
:meth:`reset_state` takes generalized coordinates (default the paper's
``q0 = [0.2, 0.3, 0.4, 0, 0, 0, 0, 0]``).
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.plants.integrate import WORK_ROWS
from rtctl.plants.quadruped_tail import dynamics as _qd
from rtctl.plants.quadruped_tail import kinematics as _qk
from rtctl.plants.quadruped_tail.model import QuadrupedTail
from rtctl.model import Model

from ..base import Plant, check_integration_options, plant_settings, mechanism_with_model_errors

__all__ = ["QuadrupedTailPlant"]


class QuadrupedTailPlant(Plant):
    """The 8-DOF virtual-work model under 14 actuator torques (see module docstring).

    Parameters: ``model`` the 14-joint actuator-space model (only its size is used);
    ``mechanism`` a :class:`QuadrupedTail` (default Table 1); ``integrator`` ``"rk4"``;
    ``substeps`` RK4 steps per :meth:`step`. Other config keys are accepted and must be zero
    (this plant has no joint friction model).
    """

    def __init__(self, model: Model, options: "Plant.Options | None" = None, *,
                 mechanism: QuadrupedTail | None = None):
        (integrator, substeps, viscous_friction, coulomb_friction, coulomb_velocity_scale, mass_scale, payload_mass,
         payload_frame, payload_offset) = plant_settings(self, options)
        if model.nq != 14 or model.nv != 14:
            raise ValueError(f"the quadruped_tail plant needs the 14-actuator model, got nq={model.nq}")
        integrator, substeps, _ = check_integration_options(integrator, substeps, coulomb_velocity_scale)
        if np.any(np.asarray(viscous_friction, float) != 0) or np.any(np.asarray(coulomb_friction, float) != 0):
            raise ValueError("the quadruped_tail plant has no joint friction model; leave the friction keys 0")
        self.mechanism, self._model_errors = mechanism_with_model_errors(
            mechanism or QuadrupedTail(), "quadruped_tail", "torso", mass_scale, payload_mass, payload_frame,
            payload_offset)
        super().__init__(model)
        self._substeps = int(substeps)
        self.x = np.zeros(8)          # generalized coordinates q
        self.xd = np.zeros(8)         # q-dot
        self._tau = np.zeros(14)
        self._work = np.zeros((WORK_ROWS, 8))
        self._w = _qd._Work()
        m, w = self.mechanism, self._w
        self._step_head = (m.par, m.A, m.D, m.r, self.x, self.xd, self._tau)
        self._step_work = (*w.kin_args(), w.M, w.C, w.G, w.Mq, w.Cq, w.Gq, w.f, w.mat)
        self.reset_state(self.mechanism.q0)

    def _publish(self) -> None:
        w, m = self._w, self.mechanism
        st = _qk._kin(m.par, m.A, m.D, m.r, self.x, self.xd, *w.kin_args())
        if st != _qk.OK:
            raise ValueError(f"q = {np.round(self.x, 4).tolist()}: {_qk.STATUS_TEXT[st]}")
        _qk._joint_state(w.ang, w.angd, self.q, self.v, self.x, self.xd)

    def reset_state(self, x, xd=None) -> None:
        """Set the generalized coordinates (and rates, default 0) and the time to zero; q, v follow."""
        self.x[:] = np.asarray(x, float)
        self.xd[:] = 0.0 if xd is None else np.asarray(xd, float)
        self._publish()
        self.t = 0.0

    def reset(self, q=None, v=None) -> None:
        """Set actuator angles ``q`` (default: the pose q0) and rates ``v`` (default 0)."""
        m = self.mechanism
        if q is None:
            x = m.q0.copy()
        else:
            x = m.forward_kinematics(q)
        xd = np.zeros(8) if v is None else m.generalized_motion(m.joint_state(x)[0], v)[1]
        self.reset_state(x, xd)

    def step(self, dt: float, effort) -> None:
        """Advance by ``dt`` s with the 14 actuator torques held; ValueError (state unchanged) on bad input
        or when a leg leaves its workspace."""
        dt = float(dt)
        if not 0.0 < dt < math.inf:
            raise ValueError(f"dt must be a finite time step > 0 s, got {dt!r}")
        tau = effort if isinstance(effort, np.ndarray) else np.asarray(effort, dtype=float)
        if tau.shape != (14,) or not math.isfinite(tau.sum()):
            raise ValueError(f"effort must be 14 finite actuator torques, got shape {tau.shape}")
        self._tau[:] = tau
        st = _qd.plant_step(*self._step_head, dt, self._substeps, self._work, self.q, self.v, *self._step_work)
        if st < 0:
            raise ValueError(f"q = {np.round(self.x, 4).tolist()}: {_qk.STATUS_TEXT[-st]}")
        if st != _qk.OK:
            raise ValueError(f"quadruped_tail step failed ({_qk.STATUS_TEXT.get(st, st)}); state unchanged")
        self.t += dt

    def parameters(self) -> dict:
        return dict(integrator="rk4", substeps=self._substeps, **self._model_errors)

    def __repr__(self):
        return f"QuadrupedTailPlant(substeps={self._substeps}, q={np.round(self.x, 4).tolist()})"
