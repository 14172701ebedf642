"""The ``mip_emulated`` sensor backend: the ``mip`` backend reading an emulated 3DM-GX5-25 that measures the
simulated plant, the device in its own process on its own clock.

Built with the simulated plant (a run config's ``[plant]``, stepped by the ``sim`` driver), it is a
:class:`~rtctl.drivers.mip.MipImu` in every way but where its port comes from (:mod:`rtctl.hil.emulated_device`,
which the ``netft_emulated`` backend shares): ``configure`` creates a :class:`~rtctl.hil.truth_feed.TruthFeed`
(0600 shared memory) for its frame, starts the emulator (``python -m rtctl.hil.mip_imu --truth NAME``,
:mod:`rtctl.hil.mip_imu`) with this table's options, takes the pty the emulator announces and configures the
device over it exactly as the ``mip`` backend configures a real one (ping, idle, device information,
descriptors, base rate, message format, stream). Every read first writes the truth of the sensor frame for the
plant's newest state and time (:class:`~rtctl.hil.truth_feed.TruthWriter`), then reads the device without
blocking, as the ``mip`` backend does. The clock, the first sample at activate and the emulator's end with the
sensor or its loop process are :mod:`rtctl.hil.emulated_device`'s.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtctl.drivers.mip import DeviceError, MipImu
from rtctl.drivers.sensor import IMU
from rtctl.drivers.sim_sensors import MOTION_SIZE, sensor_motion
from rtctl.dynamics import Dynamics
from rtctl.options import setting

from .emulated_device import EmulatedDevice, EmulatorOptions
from .imu_noise import G0, GX5_25
from .mip_imu import MipImuProcess
from .truth_feed import SIZE, TruthFeed, TruthWriter, truth_sample

EMULATOR_OPTIONS = ("latency", "accel_noise_density", "gyro_noise_density", "accel_initial_bias",
                    "gyro_initial_bias", "accel_bias_instability", "gyro_bias_instability")


class EmulatedMipImu(EmulatedDevice, MipImu):
    """A MIP IMU emulated in another process, measuring the simulated plant (kind ``imu``)."""

    kinds = (IMU,)
    process_class = MipImuProcess
    address_options = ("port",)
    passed_options = EMULATOR_OPTIONS
    device_error = DeviceError

    @dataclass(frozen=True)
    class Options(EmulatorOptions, MipImu.Options):
        port: str = setting("str", None)      # leave out: the emulator's pty, known once it has started
        # s from sampling to sending; this and each error below: the 3DM-GX5-25 datasheet's if left out
        latency: float = setting("float", None, low=0.0, high=1.0)
        accel_noise_density: float = setting("float", None, low=0.0)   # m/s^2/sqrt(Hz)
        gyro_noise_density: float = setting("float", None, low=0.0)    # rad/s/sqrt(Hz)
        accel_initial_bias: float = setting("float", None, low=0.0)    # m/s^2, sigma of the turn-on bias
        gyro_initial_bias: float = setting("float", None, low=0.0)     # rad/s, sigma of the turn-on bias
        accel_bias_instability: float = setting("float", None, low=0.0)   # m/s^2
        gyro_bias_instability: float = setting("float", None, low=0.0)    # rad/s

    def __init__(self, model, options: "EmulatedMipImu.Options | None" = None, *, plant):
        super().__init__(model, options, plant=plant)
        self._dynamics = Dynamics(plant.model)
        self._writer: TruthWriter | None = None

    def device_arguments(self) -> list[str]:
        return ["--accel-range", repr(self.options.accel_range * G0), "--gyro-range", repr(self.options.gyro_range)]

    def create_feed(self) -> TruthFeed:
        feed = TruthFeed.create()
        self._writer = TruthWriter.for_sensor(feed, self._dynamics, self)
        return feed

    def forget_feed(self) -> None:
        self._writer = None

    def attach(self, process) -> None:
        self.options = self.options.replace(port=process.port)

    def send_latency(self) -> float:
        """The emulator's ``latency``: the datasheet's unless given."""
        return GX5_25.latency if self.options.latency is None else self.options.latency

    def device_fd(self) -> int:
        return self._fd

    # -- every cycle: never raises, never blocks ------------------------------------------------------------
    def write_truth(self) -> None:
        """The sensor frame's truth for the plant's state and time, into the feed. Allocation-free."""
        plant = self.plant
        if self._writer is not None:
            self._writer.step(plant.t, plant.q, plant.v)

    def warm(self, cycle) -> None:
        """The parse and conversion kernels (``mip``), then the truth's kinematics on scratch arrays; and the
        loop's pace, which ``clock = "auto"`` follows (warm comes before configure)."""
        super().warm(cycle)
        d, plant = self._dynamics, self.plant
        motion = np.zeros(MOTION_SIZE)
        sensor_motion(d.mi, d.mf, d.ws, plant.q.copy(), plant.v.copy(), np.zeros(plant.model.nv), self.body,
                      np.ascontiguousarray(self.rotation, dtype=float),
                      np.ascontiguousarray(self.translation, dtype=float), motion)
        truth_sample(motion, np.full(3, np.nan), 1e-3, 0.0, np.zeros(SIZE))
