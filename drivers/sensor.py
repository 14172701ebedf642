"""Sensors beside the actuators (ros2_control's sensor components: IMU, force-torque; plus foot contact).

A sensor is a component with the drivers' lifecycle (``configure`` opens the device and checks that it is
the one configured, ``activate`` starts its stream, ``deactivate`` idles it) and their health counters.
Every cycle the loop calls :meth:`Sensor.read`, which never raises and never blocks: the backend's
:meth:`Sensor.receive` fills the sensor's :class:`SensorReading` when a new sample has arrived, and the
base class keeps the stale-data watchdog (no sample for ``max_age`` s latches a fault) and refuses
non-finite samples. A latched fault is the loop's safe state, as a driver's is.

Readings are SI, in the sensor's frame, with the device's own time stamp kept where it gives one:

* ``imu``: ``specific_force`` (3, m/s^2: ``R^T (a - g)``, what an accelerometer measures), ``angular_rate``
  (3, rad/s) and, when the device estimates it, ``orientation`` (4: quaternion ``[x, y, z, w]`` of the sensor
  frame in the world frame, z up; NaN when the device gives none).
* ``force_torque``: ``wrench`` (6: Featherstone's ``[torque; force]``, N m and N), the views ``torque`` and
  ``force``.
* ``contact``: ``contact`` (1.0 in contact, 0.0 not, after the debounce) and the normal ``force`` (N, NaN
  when the device gives none).

Backends are found by the name of their entry point (group ``rtctl.sensors``, :data:`rtctl.registry.SENSORS`);
a robot has several, one ``[[sensors]]`` table each, and each is mounted on a link or frame of the model
(``frame``) at ``mount_xyz`` / ``mount_rpy`` in it. Units are converted, and a device's own frame
conventions (a NED-referenced attitude, counts per newton) taken off, inside the backend.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.model import ModelError
from rtctl.options import OptionsBase, options_of, setting
from rtctl.registry import SENSORS, RegisteredName
from rtctl.rt.hooks import TelemetrySource
from rtctl.rt.lifecycle import Lifecycle

from .base import DriverHealth

IMU, FORCE_TORQUE, CONTACT = "imu", "force_torque", "contact"
KINDS = (IMU, FORCE_TORQUE, CONTACT)


@dataclass(frozen=True)
class Field:
    """One measured quantity of a reading: its name, its length and its SI unit; ``optional`` ones may be NaN
    (a device that does not give them)."""

    name: str
    size: int
    unit: str
    optional: bool = False


FIELDS = {
    IMU: (Field("specific_force", 3, "m/s^2"), Field("angular_rate", 3, "rad/s"),
          Field("orientation", 4, "1", optional=True)),
    FORCE_TORQUE: (Field("torque", 3, "N m"), Field("force", 3, "N")),
    CONTACT: (Field("contact", 1, "1"), Field("force", 1, "N", optional=True)),
}


class SensorReading:
    """A sensor's newest sample: one preallocated vector ``values`` and a named view of it per :class:`Field`
    (``reading.angular_rate``), ``stamp`` (loop time of the newest sample, s), ``device_stamp`` (the device's
    own clock, s; NaN if it gives none) and ``fresh`` (a new sample this cycle). A force-torque reading also
    has ``wrench``, the six values as Featherstone's ``[torque; force]``."""

    def __init__(self, kind: str):
        self.kind = kind
        self.fields = FIELDS[kind]
        self.values = np.full(sum(f.size for f in self.fields), np.nan)
        offset = 0
        for f in self.fields:
            setattr(self, f.name, self.values[offset:offset + f.size])
            offset += f.size
        self.required = sum(f.size for f in self.fields if not f.optional)   # the leading, never-NaN values
        if kind == FORCE_TORQUE:
            self.wrench = self.values
        self.stamp = float("nan")
        self.device_stamp = float("nan")
        self.fresh = False


AXES = {1: ("",), 3: ("x", "y", "z"), 4: ("x", "y", "z", "w")}


def telemetry_names(sensor: str, fields) -> tuple[tuple, tuple]:
    """``(names, units)`` of a reading's values in telemetry: ``imu/angular_rate/x``, ``foot/contact``."""
    names, units = [], []
    for f in fields:
        for axis in AXES[f.size]:
            names.append(f"{sensor}/{f.name}" + (f"/{axis}" if axis else ""))
            units.append(f.unit)
    return tuple(names), tuple(units)


@njit("int64(float64[::1], int64)", cache=True)
def first_non_finite(values, n):
    """Index of the first of ``values[:n]`` that is NaN or infinite, -1 if none."""
    for k in range(n):
        if not np.isfinite(values[k]):
            return k
    return -1


class Sensor(Lifecycle, TelemetrySource, abc.ABC):
    """Abstract sensor backend. Subclasses implement :meth:`receive` (and the lifecycle hooks). Its reading
    goes out with every telemetry sample (``NAME/FIELD/x``, with units)."""

    backend = RegisteredName(SENSORS, "abstract")   # its entry point's name
    kinds: tuple = KINDS    # the kinds this backend can be
    # s between the samples of a device that samples on its own clock (a reading is their mean over it, an
    # estimator's noise per reading follows from it); None: one sample per read, at the loop's period
    sample_period: float | None = None

    @dataclass(frozen=True)
    class Options(OptionsBase):
        """``[[sensors]]`` keys every backend takes."""

        name: str = setting("str", None, required=True)      # unique among the robot's sensors
        kind: str = setting("str", IMU, choices=KINDS)
        frame: str = setting("str", None, required=True)     # the link or frame of the model it is mounted on
        mount_xyz: object = setting("floats", None)          # m, its origin in that frame (default 0)
        mount_rpy: object = setting("floats", None)          # rad, its axes in that frame (default aligned)
        max_age: float = setting("float", 0.05, positive=True)   # s without a new sample before it faults

    @classmethod
    def from_config(cls, options: dict, context) -> "Sensor":
        """Built from its table over ``context.model``."""
        return cls(context.model, cls.Options(**options))

    def __init__(self, model, options: "Sensor.Options | None" = None):
        super().__init__()
        self.options = options = options_of(self, options)
        self.name = f"sensor '{options.name}'"
        if options.kind not in self.kinds:
            raise ValueError(f"{self.name}: kind {options.kind!r}: backend '{self.backend}' is {list(self.kinds)}")
        try:
            frame = model.frame(options.frame)
        except ModelError as exc:
            raise ValueError(f"{self.name}: frame: {exc}") from None
        try:
            mount = frame.mounted(options.name, options.mount_xyz, options.mount_rpy)
        except ModelError as exc:
            raise ValueError(f"{self.name}: {exc}") from None
        self.model = model
        self.body = mount.body          # the body it moves with (-1: the world)
        self.rotation = mount.rotation  # its axes in the body frame
        self.translation = mount.translation   # its origin in the body frame (m)
        self.kind = options.kind
        self.reading = SensorReading(options.kind)
        self.telemetry_fields, self.telemetry_units = telemetry_names(options.name, self.reading.fields)
        self.telemetry_values = self.reading.values
        self.health = DriverHealth()
        self._last_sample = float("nan")   # loop time of the newest sample, or of the first read

    @abc.abstractmethod
    def receive(self, reading: SensorReading, now: float) -> bool:
        """Fill ``reading`` (SI, the sensor's frame) if a new sample has arrived since the last call and return
        True; else False. Must not raise or block; counts bad packets in :attr:`health`."""

    def read(self, now: float) -> bool:
        """One cycle's read: the backend's :meth:`receive`, then the checks every sensor gets (a non-finite
        sample, no sample for ``max_age`` s: a latched fault). Never raises."""
        reading = self.reading
        try:
            fresh = bool(self.receive(reading, now))
        except Exception as exc:  # noqa: BLE001  (a backend that raises is a fault, never the loop's exception)
            self.health.set_fault(f"{self.name}: {type(exc).__name__}: {exc}")
            fresh = False
        if self._last_sample != self._last_sample:
            self._last_sample = now
        if fresh:
            bad = first_non_finite(reading.values, reading.required)
            if bad >= 0:
                self.health.corrupt += 1
                self.health.set_fault(f"{self.name}: {self._field_at(bad)} is {reading.values[bad]}")
                fresh = False
            else:
                self.health.reads += 1
                reading.stamp = self._last_sample = now
        if not fresh:
            self.health.stale_cycles += 1
            if now - self._last_sample > self.options.max_age:
                self.health.set_fault(f"{self.name}: stale: no sample for {now - self._last_sample:.3f} s "
                                      f"(max_age {self.options.max_age:g} s)")
        reading.fresh = fresh
        return fresh

    def _field_at(self, index: int) -> str:
        offset = 0
        for f in self.reading.fields:
            if index < offset + f.size:
                return f"{f.name}[{index - offset}]" if f.size > 1 else f.name
            offset += f.size
        return f"value {index}"

    def on_activate(self) -> None:
        self._last_sample = float("nan")

    def warm(self, cycle) -> None:
        """Before :meth:`activate`: reach every kernel :meth:`receive` can call, without touching the device.
        Nothing for a backend that calls none."""


def create_sensor(backend: str, model, **keywords) -> Sensor:
    """Instantiate a sensor backend by name: the keywords its ``Options`` declares become its options, the
    others are its constructor's."""
    return SENSORS.create(backend, model, **keywords)
