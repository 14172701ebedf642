"""The ``sim_force_torque`` sensor backend: a six-axis force-torque sensor read straight off the simulated plant.

For a run without an emulated device: every cycle the reading is what the plant says a sensor fixed in the
sensor's body reads at its current state (:meth:`rtctl.plants.base.Plant.sensor_wrench`: the wrench the body
and everything it carries exert across the sensor, from the recursive Newton-Euler algorithm's body force,
Featherstone RBDA 2008 sec. 5.3), plus Gaussian noise of ``force_noise`` / ``torque_noise`` (standard
deviations, N and N m) from a seeded generator and a constant offset ``force_bias`` / ``torque_bias`` (a
transducer's zero that has drifted: what a tare removes). The device time stamp is the plant's time. The hardware
counterpart is the Net F/T backend (:mod:`rtctl.drivers.netft`), fed by its emulator (:mod:`rtctl.hil.netft_sensor`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtctl.options import setting

from .sensor import FORCE_TORQUE, Sensor


def sensor_mount(sensor: Sensor) -> np.ndarray:
    """The 12 values a plant's ``sensor_wrench`` takes for ``sensor``: its axes in its body's frame (row-major),
    then its origin there (m)."""
    return np.ascontiguousarray(np.concatenate([np.asarray(sensor.rotation, dtype=float).reshape(9),
                                                np.asarray(sensor.translation, dtype=float)]))


class SimForceTorque(Sensor):
    """A force-torque sensor on a simulated plant (``plant``: any :class:`rtctl.plants.base.Plant` whose
    ``sensor_wrench`` answers)."""

    kinds = (FORCE_TORQUE,)

    @dataclass(frozen=True)
    class Options(Sensor.Options):
        kind: str = setting("str", FORCE_TORQUE, choices=(FORCE_TORQUE,))   # a six-axis force-torque sensor
        force_noise: float = setting("float", 0.0, low=0.0)    # N, standard deviation per axis
        torque_noise: float = setting("float", 0.0, low=0.0)   # N m
        force_bias: object = setting("floats", None)           # N, 3 values added to every sample (default 0)
        torque_bias: object = setting("floats", None)          # N m, 3 values (default 0)
        seed: int = setting("int", 0, low=0)                    # of the noise's generator

    @classmethod
    def from_config(cls, options: dict, context) -> "SimForceTorque":
        return cls(context.model, cls.Options(**options), plant=context.plant)

    def __init__(self, model, options: "SimForceTorque.Options | None" = None, *, plant):
        super().__init__(model, options)
        self.plant = plant
        self.mount = sensor_mount(self)
        self._truth = np.zeros(6)
        if not plant.sensor_wrench(self.body, self.mount, self._truth):
            if self.body < 0:
                raise ValueError(f"{self.name}: frame {self.options.frame!r} is fixed to the world: nothing is "
                                 "transmitted across it")
            raise ValueError(f"{self.name}: the {type(plant).__name__} plant gives no force-torque reading "
                             "(sensor_wrench)")
        self.bias = np.zeros(6)
        for key, part, value in (("torque_bias", slice(0, 3), self.options.torque_bias),
                                 ("force_bias", slice(3, 6), self.options.force_bias)):
            if value is not None:
                bias = np.asarray(value, dtype=float).reshape(-1)
                if bias.shape != (3,) or not np.all(np.isfinite(bias)):
                    raise ValueError(f"{self.name}: {key} needs 3 finite values, got {value!r}")
                self.bias[part] = bias
        self._sigma = np.array([self.options.torque_noise] * 3 + [self.options.force_noise] * 3)
        self._noise = np.zeros(6)
        self.rng = np.random.default_rng(self.options.seed)

    def receive(self, reading, now: float) -> bool:
        if not self.plant.sensor_wrench(self.body, self.mount, self._truth):
            self.health.set_fault(f"{self.name}: the plant gave no force-torque reading at t = {self.plant.t:.6g} s")
            return False
        self.rng.standard_normal(out=self._noise)
        np.multiply(self._noise, self._sigma, out=self._noise)
        np.add(self._noise, self.bias, out=self._noise)
        np.add(self._truth, self._noise, out=reading.wrench)
        reading.device_stamp = self.plant.t
        return True
