"""The external joint torque a force-torque sensor measures, beside the one the momentum observer estimates.

A sensor fixed in a body of the arm reads the wrench its distal side exerts across it (:mod:`rtctl.drivers.sensor`).
Less its bias and the weight of what it carries (:class:`rtctl.loops.wrench.WrenchProcessing`), that is the
external wrench applied beyond it, and its joint torques ``tau_m = J_s(q)^T w`` (the Jacobian of the sensor's
origin, world axes; :meth:`~rtctl.loops.wrench.WrenchProcessing.joint_torques`) are what the observer's residual
``r`` estimates of such a contact, without the observer's lag and without its model: the collision monitor
(:mod:`rtctl.loops.collision`) detects on both, and holds them against each other through the observer's own lag
(:class:`rtctl.loops.agreement.Agreement`). What the sensor cannot tell apart from a contact: the inertial forces
of the load it carries in motion (:mod:`rtctl.loops.wrench`); the detection's velocity and acceleration bands cover
them as they cover the observer's model errors.

The comparison, the detection on ``tau_m`` and the tare (``tare_on_start``) start at a run's second cycle: the
first reads the sensor before any effort of the run is applied (a simulated arm is then falling for that instant,
and what the sensor carries pulls less on it), as the observer's first cycle only takes its momentum p(0).
"""
from __future__ import annotations

import numpy as np

from .agreement import QUIET, Agreement, SensorBesideObserver
from .wrench import WrenchProcessing


class SensorComparison(SensorBesideObserver):
    """``sensor`` (a force-torque :class:`~rtctl.drivers.sensor.Sensor` on the observer's model) beside
    ``observer`` (a :class:`~rtctl.loops.observer.MomentumObserver`): after :meth:`update`, :attr:`joint_torque`
    (the measured external torque per actuated joint) and :attr:`agreement` (``tolerance`` per actuated joint,
    ``duration`` s)."""

    def __init__(self, observer, sensor, *, tolerance, duration: float, tool_mass: float = 0.0,
                 tool_com=(0.0, 0.0, 0.0), tare_on_start: bool = False):
        super().__init__(observer, sensor,
                         WrenchProcessing(observer.model, sensor, tool_mass=tool_mass, tool_com=tool_com),
                         Agreement(observer.decay[observer.v_index], tolerance, duration, observer.dt), tare_on_start)
        self.torque = np.zeros(observer.model.nv)          # J_s^T w_c over every DOF
        self.joint_torque = np.zeros(len(observer.v_index))

    def update(self, q) -> int:
        """One cycle at ``q``, after the observer's: the measured joint torques and, from the run's second cycle
        on, their comparison with the observer's residual; the joint that has disagreed for longer than the
        agreement's duration, else -1."""
        self.samples += 1
        if self.samples == 2 and self.tare_on_start:
            self.processing.tare(q)
        self.processing.joint_torques(q, self.torque)
        np.take(self.torque, self.observer.v_index, out=self.joint_torque)
        if self.samples < 2:
            return -1
        return self.agreement.update(self.joint_torque, self.observer.joint_residual)

    def silent(self) -> bool:
        """The raw reading is far below what the load the sensor carries weighs on it (a broken sensor; the slow
        path of a fault)."""
        load = float(np.linalg.norm(self.processing.load))
        return load > 0.0 and float(np.linalg.norm(self.sensor.reading.wrench)) < QUIET * load

    def warm(self, q) -> None:
        """Reach :meth:`update`'s kernels (the tare's too: the same compensation, without a target) on scratch
        arrays; the bias and the comparison stay as they are."""
        self.processing.update(q)
        self.processing.joint_torques(q, self.torque.copy())
        self.agreement.warm(self.joint_torque, self.observer.joint_residual)
