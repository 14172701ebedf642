"""The bite force a force-torque sensor in the mouthpiece measures, beside the jaw observer's estimate of it.

The sensor (:mod:`rtctl.plants.jaw.mouthpiece`: between the bite splint and the patient's teeth, mounted on the
model's ``incisal`` or ``platform`` frame) reads the patient's wrench in its own axes. Less its bias (a tare at a
run's second cycle with ``tare_on_start``; :class:`rtctl.loops.wrench.WrenchProcessing`, which also reads zero
before the first sample), its force turned into the base frame {B} at the observer's pose, ``f_m = R(x) R_m f``, is
the force the observer estimates on the platform (the force part of ``F = T^-T r``, the residual through the
observer's lag: :mod:`rtctl.plants.stewart.observer`), so the two compare axis by axis through that lag
(:class:`rtctl.loops.agreement.Agreement`, the observer's gains on x, y, z). The measured bite force is
``|f_m|``, without the lag. As for the collision monitor (:mod:`rtctl.loops.collision_sensor`), the comparison and
the tare start at a run's second cycle, when the observer has its first residual.
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.loops.agreement import Agreement, SensorBesideObserver
from rtctl.loops.wrench import WrenchProcessing

from .mouthpiece import base_force

AXES = ("x", "y", "z")


class MouthpieceSensor(SensorBesideObserver):
    """``sensor`` (a force-torque :class:`~rtctl.drivers.sensor.Sensor` on a platform frame of the jaw's
    actuator-space model) beside ``observer`` (the jaw's :class:`~rtctl.plants.stewart.observer.PlatformObserver`):
    after :meth:`update`, :attr:`force` (N, {B}), :attr:`bite_force` (N) and :attr:`agreement` (``tolerance`` N
    per axis, ``duration`` s)."""

    def __init__(self, observer, sensor, *, tolerance: float, duration: float, tare_on_start: bool = False):
        super().__init__(observer, sensor, WrenchProcessing(sensor.model, sensor, model_load=False),
                         Agreement(observer.decay[:3], np.full(3, float(tolerance)), duration, observer.dt),
                         tare_on_start)
        self.mount = np.ascontiguousarray(np.asarray(sensor.rotation, dtype=float).reshape(9))
        self.force = np.zeros(3)
        self.bite_force = 0.0
        self._R = np.zeros((3, 3))
        self._measured = self.processing.compensated[3:]      # views made once: none per cycle
        self.estimate = observer.platform_wrench[:3]

    def update(self, q) -> int:
        """One cycle after the observer's (its pose ``x`` and force): the measured force and bite force and, from
        the run's second cycle on, their comparison; the axis that has disagreed for longer than the agreement's
        duration, else -1."""
        self.samples += 1
        if self.samples == 2 and self.tare_on_start:
            self.processing.tare(q)
        self.processing.update(q)
        base_force(self.observer.x, self.mount, self._measured, self._R, self.force)
        f = self.force
        self.bite_force = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
        if self.samples < 2:
            return -1
        return self.agreement.update(self.force, self.estimate)

    def warm(self, q) -> None:
        """Reach :meth:`update`'s kernels on scratch arrays (the tare's is the same compensation)."""
        self.processing.update(q)
        base_force(self.observer.home, self.mount, self._measured, self._R, self.force.copy())
        self.agreement.warm(self.force, self.estimate)
