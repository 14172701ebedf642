"""Quadruped with a tail (Liu & Ben-Tzvi, 2018) in the real-time loop: controllers, trajectories, singularity monitor.

All work on the 14-joint actuator-space model (:mod:`rtctl.plants.quadruped_tail.plant`):
``q``/``v`` are the actuator angles/rates ``[q_a; q_p]`` (eqs. 27-28) and the
effort is the 14 actuator torques.

* :class:`QuadrupedTailFFPD` (``"quadruped_tail_ffpd"``) -- the feed-forward
  scheme of the paper's Fig. 7 with a PD compensation: from the *measured*
  actuator angles/rates the pose and rates are recovered (feet fixed: SVD
  solution of ``d_i - p = R (a_i + s_i)``, rates by least squares over
  ``theta-dot = J_tau T q-dot``); likewise the desired generalized motion from
  the desired actuator motion. Then
  ``tau = tau_ff + tau_c``, ``tau_ff = ID(q_d, q_d', q_d'')`` (virtual work,
  eqs. 37-41) and the compensation ``tau_c = alloc(q, M(q) (Kp e + Kd e'))``,
  ``e = q_d - q`` in generalized coordinates (kp in 1/s^2, scalar or 8 values).
  ``kp = 0`` is the open-loop feed-forward of the paper's Fig. 8.
  **Singularity monitor**: every cycle the condition number of ``J_tau_a``
  (twist coordinates, eq. 27) is computed; above ``cond_threshold`` the
  allocation switches from eq. 41 (tau_p = 0) to the redundant 14-actuator
  solution (``redundant_method``, default minimum norm) and an event
  ``{"event": "singularity_enter" | "singularity_exit", "cycle", "cond", "allocation"}``
  is appended to the bounded ``events`` deque (``max_events``), the format a
  telemetry sink can forward.
* :class:`QuadrupedTailOpenLoop` (``"quadruped_tail_open_loop"``) -- the
  section-4.1 torque profile ``tau_a = [0, 0, 15, 15, 20.5, 20.5, -7.7,
  -10 sin(31.4 t)]``, ``tau_p = 0``, with ``t`` = cycles x ``period``.
* :class:`QuadrupedTailPitch` (``"quadruped_tail_pitch"``) -- the Fig. 7/8
  trajectory ``q_d(t) = [0.2, 0.3, 0.4, pi/36 sin(2 pi t/0.3), 0, 0, 0,
  pi/18 sin(2 pi t/0.3 + pi)]`` mapped to actuator angles, rates and
  accelerations (inverse kinematics and eqs. 11-18 with their derivative).
* :class:`QuadrupedTailHold` (``"quadruped_tail_hold"``) -- hold q0 (the
  reference of the open-loop forward run).

The feed-forward + PD controller and the pitch trajectory are each one
allocation-free compiled call per cycle (:mod:`rtctl.plants.quadruped_tail.steps`:
least squares by the normal equations, the condition number by a Jacobi SVD, the
allocations by LU / Cholesky on preallocated arrays).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.plants.quadruped_tail import steps as _steps
from rtctl.plants.quadruped_tail.dynamics import _Work
from rtctl.plants.quadruped_tail.kinematics import OK, STATUS_TEXT
from rtctl.plants.quadruped_tail.model import QuadrupedTail

from rtctl.options import OptionsBase, options_of, setting
from rtctl.loops.base import Controller, Trajectory

__all__ = ["QuadrupedTailFFPD", "QuadrupedTailOpenLoop", "QuadrupedTailPitch", "QuadrupedTailHold"]


def _check_model(name, model):
    if model.nv != 14:
        raise ValueError(f"{name}: needs the 14-actuator quadruped_tail model, got nv={model.nv}")


class QuadrupedTailFFPD(Controller):
    """Fig. 7 feed-forward + PD compensation with the J_tau_a singularity monitor (module docstring)."""

    gain_units = ("N m/rad (N/m)", "N m s/rad (N s/m)")   # a PD on the actuators' efforts (Fig. 7)
    default_kp = 400.0
    requires_model = "quadruped_tail"

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None, *,
                 mechanism: QuadrupedTail | None = None, cond_threshold: float = 1e3,
                 redundant_method: str = "min_norm", max_events: int = 256, log_capacity: int = 0):
        _check_model(self.name, dyn.model)
        options = options_of(self, options)
        kp, kd = self.default_kp if options.kp is None else options.kp, options.kd
        kp8 = np.broadcast_to(np.asarray(kp, dtype=float), (8,)).copy()   # the eight leg joints
        super().__init__(dyn, options.replace(kp=0.0, kd=0.0))
        self.options = options
        self.kp = kp8
        self.kd = 2.0 * np.sqrt(kp8) if kd is None else np.broadcast_to(np.asarray(kd, float), (8,)).copy()
        if not cond_threshold > 1:
            raise ValueError(f"{self.name}: cond_threshold must be > 1, got {cond_threshold}")
        self.mechanism = mechanism or QuadrupedTail()
        self.cond_threshold = float(cond_threshold)
        self.redundant_method = redundant_method
        try:
            self._redundant_mode, self._weights, self._tau0 = self.mechanism._alloc_args(redundant_method, None,
                                                                                         None, None)
        except ValueError as exc:
            raise ValueError(f"{self.name}: redundant_method {redundant_method!r}: {exc}") from None
        self.events: deque = deque(maxlen=int(max_events))
        self.redundant = False
        self.cycle = 0
        self.cond = 1.0
        self._gen = np.zeros((_steps.GEN_ROWS, 8))
        self.q_est = self._gen[_steps.G_Q]
        self.qd_est = self._gen[_steps.G_QD]
        self.q_est[:] = self.mechanism.q0
        self.tau_ff = np.zeros(14)
        self.tau_c = np.zeros(14)
        self.log = np.zeros((int(log_capacity), 14 + 14 + 8 + 1))   # tau_ff, tau_c, q_est, cond
        self.logged = 0
        m = self.mechanism
        self._work = _steps.FFPDWork()
        self._head = (m.par, m.A, m.D, m.r)
        self._scratch = self._work.scratch()

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        st, cond = _steps.ffpd_step(*self._head, q, v, q_d, qd_d, qdd_d, self.kp, self.kd, self.cond_threshold,
                                    self._redundant_mode, self._weights, self._tau0, effort, self.tau_ff,
                                    self.tau_c, self._gen, self.log, self.logged, *self._scratch)
        if st != OK:
            raise ValueError(f"{self.name}: {STATUS_TEXT.get(st) or _steps.STEP_STATUS_TEXT[st]} (measured "
                             f"q = {np.round(q, 4).tolist()}, desired q = {np.round(q_d, 4).tolist()})")
        self.cond = cond
        redundant = cond > self.cond_threshold
        if redundant != self.redundant:
            self.redundant = redundant
            self.events.append({"event": "singularity_enter" if redundant else "singularity_exit",
                                "cycle": self.cycle, "cond": cond,
                                "allocation": self.redundant_method if redundant else "paper"})
        if self.logged < self.log.shape[0]:
            self.logged += 1
        self.cycle += 1

    def __repr__(self):
        return f"QuadrupedTailFFPD(kp={self.kp.tolist()}, cond_threshold={self.cond_threshold})"


class QuadrupedTailOpenLoop(Controller):
    """Section 4.1's open-loop torque profile (module docstring) at the loop's control time."""

    default_kp = 400.0
    requires_model = "quadruped_tail"

    def __init__(self, dyn: Dynamics, options: "Controller.Options | None" = None):
        _check_model(self.name, dyn.model)
        options = options_of(self, options)
        super().__init__(dyn, options.replace(kp=0.0, kd=0.0))   # open loop: no feedback
        self.options = options

    @staticmethod
    def profile(t: float, out=None):
        """tau (14) of section 4.1 at time t."""
        out = np.zeros(14) if out is None else out
        out[:8] = (0.0, 0.0, 15.0, 15.0, 20.5, 20.5, -7.7, -10.0 * math.sin(31.4 * t))
        out[8:] = 0.0
        return out

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        self.profile(t, effort)


class QuadrupedTailPitch(Trajectory):
    """The paper's Fig. 7/8 pitch motion in actuator space (starts at ``t0``; q0 held before)."""

    n = 14

    @dataclass(frozen=True)
    class Options(OptionsBase):
        t0: float = setting("float", 0.0, low=0.0)
        duration: float = setting("float", 2.0, positive=True)   # s

    def __init__(self, options: "QuadrupedTailPitch.Options | None" = None, *,
                 mechanism: QuadrupedTail | None = None):
        self.options = options = options_of(self, options)
        self.mechanism = m = mechanism or QuadrupedTail()
        self.t0 = options.t0
        self.duration = self.t0 + options.duration
        self._x = np.zeros((3, 8))
        self._w = w = _Work()
        self._head = (m.q0, m.par, m.A, m.D, m.r, self._x)
        self._scratch = (w.R, w.E, w.edot, w.xi, w.xid, w.ang, w.angd, w.angb, w.J, w.bias, w.Jtau, w.legj)

    def generalized(self, t: float):
        """(q, q-dot, q-ddot) of the desired motion at time ``t`` (new arrays)."""
        x = np.empty((3, 8))
        _steps.pitch_motion(float(t) - self.t0, self.mechanism.q0, x)
        return x[0], x[1], x[2]

    def sample(self, t: float, q, qd, qdd) -> None:
        st = _steps.pitch_sample(t - self.t0, *self._head, q, qd, qdd, *self._scratch)
        if st != OK:
            raise ValueError(f"quadruped_tail_pitch at t = {t} s: {STATUS_TEXT.get(st) or _steps.STEP_STATUS_TEXT[st]}")


class QuadrupedTailHold(Trajectory):
    """Hold the actuator angles of q0 (the paper's initial pose)."""

    n = 14

    @dataclass(frozen=True)
    class Options(OptionsBase):
        duration: float = setting("float", 1.0, positive=True)   # s

    def __init__(self, options: "QuadrupedTailHold.Options | None" = None, *,
                 mechanism: QuadrupedTail | None = None):
        self.options = options = options_of(self, options)
        m = mechanism or QuadrupedTail()
        self.q0 = m.joint_state(m.q0)[0]
        self.duration = options.duration

    def sample(self, t: float, q, qd, qdd) -> None:
        q[:] = self.q0
        qd[:] = 0.0
        qdd[:] = 0.0


def simulate_pitch_tracking(mech, kp, cycles, rate=1000.0, start_on_trajectory=False):
    """Offline section-4.2 run: feed-forward + PD (``kp``; 0 = feed-forward only) on the plant for
    ``cycles`` steps; returns (max generalized error per cycle, controller, survived = stayed reachable)."""
    from rtctl.plants.quadruped_tail.plant import QuadrupedTailPlant

    am = mech.actuator_model()
    plant = QuadrupedTailPlant(am, QuadrupedTailPlant.Options(substeps=2))
    if start_on_trajectory:
        plant.reset_state(*QuadrupedTailPitch().generalized(0.0)[:2])
    ctl = QuadrupedTailFFPD(Dynamics(am), QuadrupedTailFFPD.Options(kp=kp), log_capacity=cycles)
    traj = QuadrupedTailPitch()
    qd, vd, ad, eff = np.zeros(14), np.zeros(14), np.zeros(14), np.zeros(14)
    err = []
    for k in range(cycles):
        traj.sample(k / rate, qd, vd, ad)
        ctl.update(k / rate, 1.0 / rate, plant.q.copy(), plant.v.copy(), qd, vd, ad, eff)
        try:
            plant.step(1.0 / rate, eff)
        except ValueError:
            return np.array(err), ctl, False
        err.append(np.abs(plant.x - traj.generalized((k + 1) / rate)[0]).max())
    return np.array(err), ctl, True
