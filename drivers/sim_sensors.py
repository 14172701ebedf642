"""The ``sim`` sensor backend: a simulated plant measured in the loop's process, as an IMU or a foot contact.

* ``imu``: the sensor frame's angular rate and specific force ``R^T (a - g)`` from the plant's state, its
  orientation in the world; ``a`` is the difference of the sensor origin's velocity between two reads over
  their time apart (the loop period: a lag of half a period against the true acceleration). White noise of
  the given densities (the standard deviation at the read rate is ``density / sqrt(period)``) and a constant
  bias are added. Ideal otherwise: an emulated device (``hil``) adds range, resolution and latency.
* ``contact``: the ground reaction at one of the plant's feet (:attr:`rtctl.plants.base.Plant.foot_names`),
  in contact while its normal component exceeds ``threshold``, the state changing only after ``debounce``
  reads agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.kinematics import kinematics
from rtctl.dynamics.spatial import cross, matrix_quaternion
from rtctl.dynamics.workspace import W_O, W_OMEGA, W_R, W_VEL
from rtctl.options import setting

from .sensor import CONTACT, IMU, Sensor

MOTION_SIZE = 18   # sensor_motion's out: rotation (9, row-major), origin (3), angular velocity (3), velocity (3)


@njit(cache=True)
def sensor_motion(mi, mf, ws, q, v, zero, body, rot, pos, out):
    """World rotation, origin, angular velocity and origin velocity of a frame at ``rot``, ``pos`` in body
    ``body`` (world axes; ``body < 0``: fixed in the world)."""
    kinematics(mi, mf, ws, q, v, zero, 0.0)
    if body < 0:
        for k in range(9):
            out[k] = rot[k // 3, k % 3]
        for k in range(3):
            out[9 + k], out[12 + k], out[15 + k] = pos[k], 0.0, 0.0
        return
    for r in range(3):
        for c in range(3):
            out[3 * r + c] = (ws[body, W_R + 3 * r] * rot[0, c] + ws[body, W_R + 3 * r + 1] * rot[1, c]
                              + ws[body, W_R + 3 * r + 2] * rot[2, c])
    dx = ws[body, W_R] * pos[0] + ws[body, W_R + 1] * pos[1] + ws[body, W_R + 2] * pos[2]
    dy = ws[body, W_R + 3] * pos[0] + ws[body, W_R + 4] * pos[1] + ws[body, W_R + 5] * pos[2]
    dz = ws[body, W_R + 6] * pos[0] + ws[body, W_R + 7] * pos[1] + ws[body, W_R + 8] * pos[2]
    wx, wy, wz = ws[body, W_OMEGA], ws[body, W_OMEGA + 1], ws[body, W_OMEGA + 2]
    cx, cy, cz = cross(wx, wy, wz, dx, dy, dz)
    out[9], out[10], out[11] = ws[body, W_O] + dx, ws[body, W_O + 1] + dy, ws[body, W_O + 2] + dz
    out[12], out[13], out[14] = wx, wy, wz
    out[15], out[16], out[17] = ws[body, W_VEL] + cx, ws[body, W_VEL + 1] + cy, ws[body, W_VEL + 2] + cz


@njit(cache=True)
def imu_sample(motion, previous, dt, gravity, first, noise, bias, specific_force, angular_rate, orientation):
    """The IMU's reading from :func:`sensor_motion`'s ``motion`` and the origin velocity of the last read
    (``previous``, updated): sensor-axes specific force and angular rate plus ``bias`` and ``noise``
    (6: force then rate), orientation ``[x, y, z, w]``."""
    ax = ay = az = 0.0
    if not first:
        ax = (motion[15] - previous[0]) / dt
        ay = (motion[16] - previous[1]) / dt
        az = (motion[17] - previous[2]) / dt
    previous[0], previous[1], previous[2] = motion[15], motion[16], motion[17]
    fx, fy, fz = ax - gravity[0], ay - gravity[1], az - gravity[2]
    for k in range(3):   # R^T x: column k of R
        specific_force[k] = motion[k] * fx + motion[3 + k] * fy + motion[6 + k] * fz + bias[k] + noise[k]
        angular_rate[k] = (motion[k] * motion[12] + motion[3 + k] * motion[13] + motion[6 + k] * motion[14]
                           + bias[3 + k] + noise[3 + k])
    x, y, z, w = matrix_quaternion((motion[0], motion[1], motion[2], motion[3], motion[4], motion[5],
                                    motion[6], motion[7], motion[8]))
    orientation[0], orientation[1], orientation[2], orientation[3] = x, y, z, w


class SimSensor(Sensor):
    """An IMU or a foot contact of the simulated plant the ``sim`` driver steps, measured in the loop's process."""

    kinds = (IMU, CONTACT)

    @dataclass(frozen=True)
    class Options(Sensor.Options):
        gyro_noise_density: float = setting("float", 0.0, low=0.0)     # rad/s/sqrt(Hz)
        accel_noise_density: float = setting("float", 0.0, low=0.0)    # m/s^2/sqrt(Hz)
        gyro_bias: object = setting("floats", None)                    # rad/s, 3 values (default 0)
        accel_bias: object = setting("floats", None)                   # m/s^2, 3 values (default 0)
        foot: str = setting("str", None)            # contact: the plant's foot (its foot_names)
        threshold: float = setting("float", 5.0, low=0.0)    # N: normal ground reaction taken as contact
        debounce: int = setting("int", 2, low=1)             # reads agreeing before the contact state changes
        seed: int = setting("int", 0, low=0)

    @classmethod
    def from_config(cls, options: dict, context) -> "SimSensor":
        return cls(context.model, cls.Options(**options), plant=context.plant, period=context.period)

    def __init__(self, model, options: "SimSensor.Options | None" = None, *, plant, period: float):
        super().__init__(model, options)
        options = self.options
        if not period > 0:
            raise ValueError(f"{self.name}: period must be > 0 s, got {period}")
        self.plant, self.period = plant, float(period)
        self._rng = np.random.default_rng(options.seed)
        if self.kind == IMU:
            self._dynamics = Dynamics(plant.model)
            self._zero = np.zeros(plant.model.nv)
            self._rot = np.ascontiguousarray(self.rotation)
            self._pos = np.ascontiguousarray(self.translation)
            self._motion = np.zeros(MOTION_SIZE)
            self._previous = np.zeros(3)
            self._gravity = np.asarray(plant.model.gravity, dtype=float)
            self._bias = np.zeros(6)
            for k, given in ((0, options.accel_bias), (3, options.gyro_bias)):
                if given is not None:
                    if len(given) != 3:
                        raise ValueError(f"{self.name}: a bias needs 3 values, got {len(given)}")
                    self._bias[k:k + 3] = given
            self._sigma = np.repeat([options.accel_noise_density, options.gyro_noise_density], 3) / np.sqrt(period)
            self._noise = np.zeros(6)
            self._first = True
        else:
            feet = list(plant.foot_names)
            if options.foot not in feet:
                raise ValueError(f"{self.name}: foot {options.foot!r} is not one of the plant's feet {feet}")
            self._foot = feet.index(options.foot)
            self._forces = np.zeros((len(feet), 3))
            self._agree = 0
            self._state = -1.0     # none yet: the first read sets it

    def on_activate(self) -> None:
        super().on_activate()
        self._first, self._state = True, -1.0

    def receive(self, reading, now: float) -> bool:
        if self.kind == IMU:
            self._imu(reading)
        else:
            self._contact(reading)
        return True

    def _imu(self, reading) -> None:
        dyn, plant = self._dynamics, self.plant
        sensor_motion(dyn.mi, dyn.mf, dyn.ws, plant.q, plant.v, self._zero, self.body, self._rot, self._pos,
                      self._motion)
        self._rng.standard_normal(out=self._noise)
        self._noise *= self._sigma
        imu_sample(self._motion, self._previous, self.period, self._gravity, self._first, self._noise, self._bias,
                   reading.specific_force, reading.angular_rate, reading.orientation)
        self._first = False

    def _contact(self, reading) -> None:
        self.plant.foot_forces(self._forces)
        normal = self._forces[self._foot, 2]
        touching = 1.0 if normal > self.options.threshold else 0.0
        self._agree = self._agree + 1 if touching != self._state else 0
        if self._agree >= self.options.debounce or self._state < 0.0:
            self._state, self._agree = touching, 0
        reading.contact[0] = self._state
        reading.force[0] = normal

    def warm(self, cycle) -> None:
        if self.kind == IMU:
            dyn = self._dynamics
            motion, previous = np.zeros(MOTION_SIZE), np.zeros(3)
            sensor_motion(dyn.mi, dyn.mf, dyn.ws, self.plant.q.copy(), self.plant.v.copy(), self._zero, self.body,
                          self._rot, self._pos, motion)
            out = np.zeros(10)
            imu_sample(motion, previous, self.period, self._gravity, False, np.zeros(6), self._bias, out[:3],
                       out[3:6], out[6:])
