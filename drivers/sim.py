"""The ``sim`` backend: the loop drives a simulated plant as if it were hardware.

Each ``write`` converts the joint effort command to actuator torques through
the transmission, saturates them at the actuator limits, optionally delays
them by one cycle, converts back and advances the plant by one loop period.
Each ``read`` measures the plant like encoders would: actuator-space
positions quantised to ``encoder_counts`` per revolution (or per metre),
Gaussian noise on position, velocity and effort, converted back to joint
space. A floating base is passed through exactly (the simulator stands in for
a state estimator). In ``position`` mode the drive closes its own loop:
``tau = effort + stiffness (position - q) + damping (velocity - v)``; in ``velocity`` mode its velocity loop
of gain ``damping`` on :func:`~rtctl.drivers.base.velocity_set_point`, the same torque where ``damping > 0``.

Several sim drivers may share one plant, each over its own joints: each puts its
joints' efforts in ``plant.applied_effort`` and the one built with
``steps_plant=True`` (the last of them) advances the plant.
"""
from __future__ import annotations

from dataclasses import dataclass

import time

import numpy as np

from rtctl.options import setting

from .base import EFFORT_MODE, MODES, POSITION_MODE, ActuatorDriver, velocity_set_point
from .transmission import Transmission


class SimDriver(ActuatorDriver):
    """A simulated plant (any :class:`rtctl.plants.base.Plant`: ``q``, ``v``, ``step``) seen as hardware."""

    shares_plant = True
    modes = MODES

    @dataclass(frozen=True)
    class Options(ActuatorDriver.Options):
        torque_limit: object = setting("floats", None, positive=True)   # N m (N) per actuator
        position_noise: float = setting("float", 0.0, low=0.0)           # rad (m), standard deviation
        velocity_noise: float = setting("float", 0.0, low=0.0)
        effort_noise: float = setting("float", 0.0, low=0.0)
        encoder_counts: int = setting("int", 0, low=0)                   # per revolution (metre); 0: exact
        latency_cycles: int = setting("int", 0, low=0, high=1)
        seed: int = setting("int", 0, low=0)

    @classmethod
    def from_config(cls, options: dict, context):
        return cls(context.model, cls.Options(**options), plant=context.plant, period=context.period,
                   transmission=context.transmission, steps_plant=context.steps_plant)

    def __init__(self, model, options: "SimDriver.Options | None" = None, *, plant, period: float,
                 transmission: Transmission | None = None, steps_plant: bool = True):
        super().__init__(model, options)
        options = self.options
        n = len(self.v_index)
        if not period > 0:
            raise ValueError(f"{self.name}: period must be > 0 s, got {period}")
        self.plant = plant
        self.steps_plant = bool(steps_plant)
        self.period = float(period)
        problem = plant.step_size_problem(self.period) if self.steps_plant else ""
        if problem:
            raise ValueError(f"{self.name}: {problem}")
        self.transmission = transmission or Transmission(n)
        if self.transmission.n != n:
            raise ValueError(f"{self.name}: transmission is for {self.transmission.n} joints, driver has {n}")
        torque_limit = options.torque_limit
        if torque_limit is None:
            # Actuator limits implied by the joint effort limits under a diagonal transmission.
            joint_limit = model.effort_limit[self.v_index]
            torque_limit = np.abs(joint_limit / np.diag(self.transmission.matrix)) \
                if self.transmission.is_diagonal else np.full(n, np.inf)
        self.torque_limit = np.broadcast_to(np.asarray(torque_limit, dtype=float), (n,)).copy()
        if np.any(~(self.torque_limit > 0)):
            raise ValueError(f"{self.name}: torque_limit must be > 0, got {self.torque_limit.tolist()}")
        self.position_noise = options.position_noise
        self.velocity_noise = options.velocity_noise
        self.effort_noise = options.effort_noise
        self.count_step = 2 * np.pi / options.encoder_counts if options.encoder_counts else 0.0
        self.latency_cycles = options.latency_cycles
        self.position_share = plant.position_share
        self.rng = np.random.default_rng(options.seed)
        self.saturated_cycles = 0
        # Preallocated per-cycle buffers (actuator space a_*, joint space j_*).
        self._a_pos, self._a_vel, self._a_tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self._j_tau, self._j_vec, self._noise = np.zeros(n), np.zeros(n), np.zeros(n)
        self._pending = np.zeros(n)
        self._applied = np.zeros(n)
        self._effort = plant.applied_effort

    def on_activate(self) -> None:
        self._pending[:] = 0.0
        self._applied[:] = 0.0

    def warm(self, cycle) -> None:
        """Its joints of the scratch state where the plant is now (the components after it warm at the run's
        first state), then the plant's step, by the driver that steps it (the driver's own work is NumPy)."""
        state, plant = cycle.state, self.plant
        state.q[self.q_index], state.v[self.v_index] = plant.q[self.q_index], plant.v[self.v_index]
        if self.base_nq:
            state.q[:self.base_nq], state.v[:self.base_nv] = plant.q[:self.base_nq], plant.v[:self.base_nv]
        if self.steps_plant:
            self.plant.warm(cycle.dt)

    def read(self, state, now: float) -> bool:
        plant, tr = self.plant, self.transmission
        np.take(plant.q, self.q_index, out=self._j_vec)
        tr.to_actuator_position(self._j_vec, self._a_pos)
        if self.count_step:
            np.divide(self._a_pos, self.count_step, out=self._a_pos)
            np.round(self._a_pos, out=self._a_pos)
            np.multiply(self._a_pos, self.count_step, out=self._a_pos)
        self._add_noise(self._a_pos, self.position_noise)
        tr.to_joint_position(self._a_pos, self._j_vec)
        if self.base_nq:
            state.q[:self.base_nq] = plant.q[:self.base_nq]
            state.v[:self.base_nv] = plant.v[:self.base_nv]
        state.q[self.q_index] = self._j_vec

        np.take(plant.v, self.v_index, out=self._j_vec)
        tr.to_actuator_position(self._j_vec, self._a_vel)
        self._add_noise(self._a_vel, self.velocity_noise)
        tr.to_joint_position(self._a_vel, self._j_vec)
        state.v[self.v_index] = self._j_vec

        tr.to_joint_effort(self._applied, self._j_vec)
        self._add_noise(self._j_vec, self.effort_noise)
        state.effort[self.v_index] = self._j_vec
        state.stamp = now
        state.fresh = True
        self.health.reads += 1
        return True

    def _add_noise(self, x, sigma):
        if sigma:
            self.rng.standard_normal(out=self._noise)
            self._noise *= sigma
            x += self._noise

    def write(self, command, now: float) -> None:
        np.take(command.effort, self.v_index, out=self._j_tau)
        if self.mode == POSITION_MODE:
            # The drive's own PD on joint position/velocity targets.
            for k in range(len(self.v_index)):
                iv = self.v_index[k]
                self._j_tau[k] += command.stiffness[iv] * (command.position[iv] - self.plant.q[self.q_index[k]]) \
                    + command.damping[iv] * (command.velocity[iv] - self.plant.v[iv])
        elif self.mode != EFFORT_MODE:
            for k in range(len(self.v_index)):
                iv = self.v_index[k]
                target = velocity_set_point(command, iv, self.plant.q[self.q_index[k]])
                self._j_tau[k] += command.damping[iv] * (target - self.plant.v[iv])
        self.transmission.to_actuator_effort(self._j_tau, self._a_tau)
        if np.any(np.abs(self._a_tau) > self.torque_limit):
            self.saturated_cycles += 1
            np.clip(self._a_tau, -self.torque_limit, self.torque_limit, out=self._a_tau)
        if self.latency_cycles:
            self._applied[:] = self._pending
            self._pending[:] = self._a_tau
        else:
            self._applied[:] = self._a_tau
        self.transmission.to_joint_effort(self._applied, self._j_tau)
        self._effort[self.v_index] = self._j_tau
        if self.steps_plant:
            start = time.perf_counter()
            self.plant.step(self.period, self._effort)
            self.plant_seconds[0] = time.perf_counter() - start
        self.health.writes += 1

    def safe_stop(self) -> None:
        self._pending[:] = 0.0
        self._applied[:] = 0.0
        self._effort[self.v_index] = 0.0
