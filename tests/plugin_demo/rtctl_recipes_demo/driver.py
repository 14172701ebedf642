"""Recipe "add a driver": an ideal actuator in front of the simulated plant (no noise, no delay)."""
from dataclasses import dataclass

import numpy as np

from rtctl.drivers.base import ActuatorDriver
from rtctl.options import setting


class IdealDriver(ActuatorDriver):   # named by its entry point (entry_points.txt)
    @dataclass(frozen=True)
    class Options(ActuatorDriver.Options):
        max_effort: float = setting("float", 100.0, positive=True)   # N m, saturation

    @classmethod
    def from_config(cls, options, context):
        return cls(context.model, cls.Options(**options), plant=context.plant, period=context.period)

    def __init__(self, model, options=None, *, plant, period):
        super().__init__(model, options)
        self.plant, self.period, self.max_effort = plant, float(period), self.options.max_effort
        self._effort = np.zeros(model.nv)

    def read(self, state, now):
        state.q[self.q_index] = self.plant.q[self.q_index]
        state.v[self.v_index] = self.plant.v[self.v_index]
        state.stamp, state.fresh = now, True
        self.health.reads += 1
        return True

    def write(self, command, now):
        self._effort[self.v_index] = np.clip(command.effort[self.v_index], -self.max_effort, self.max_effort)
        self.plant.step(self.period, self._effort)
        self.health.writes += 1

    def safe_stop(self):
        self._effort[:] = 0.0
