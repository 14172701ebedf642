"""The ``mip_emulated`` sensor backend: the ``mip`` backend reading an emulated 3DM-GX5-25 that measures the
simulated plant, the device in its own process on its own clock.

Built with the simulated plant (a run config's ``[plant]``, stepped by the ``sim`` driver), it is a
:class:`~rtctl.drivers.mip.MipImu` in every way but where its port comes from: ``configure`` creates a
:class:`~rtctl.hil.truth_feed.TruthFeed` (0600 shared memory) for its frame, starts the emulator
(``python -m rtctl.hil.mip_imu --truth NAME``, :mod:`rtctl.hil.mip_imu`) with this table's options, takes
the pty the emulator announces and configures the device over it exactly as the ``mip`` backend configures a
real one (ping, idle, device information, descriptors, base rate, message format, stream). Every read
first writes the truth of the sensor frame for the plant's newest state and time (the sim driver's write
stepped the plant once since the last read; :class:`~rtctl.hil.truth_feed.TruthWriter`), then reads the
device without blocking, as the ``mip`` backend does. The master's reads do not drive the device: it samples
on its own clock, and what it sends reaches a later read.

The device's clock (``clock``): ``"wall"``, the host's clock, for runs paced at wall-clock rate; ``"plant"``,
the simulated plant's time, for runs that are not (:mod:`rtctl.hil.device_clock` says why); ``"auto"`` (the
default) takes the plant's time when the loop that runs the sensor is not paced (``[loop] pace = false``,
``--offline``), which the sensor learns from the loop before configure (:meth:`EmulatedMipImu.warm`), and the
wall clock otherwise (also when it is configured outside a loop).

The emulator process and the shared block belong to the sensor: :meth:`EmulatedMipImu.close` ends and removes
them, and so does the sensor's collection or the interpreter's exit (``weakref.finalize``). A loop process
killed outright leaves neither behind: the emulator notices its parent is gone (``--parent``), exits and
unlinks the block. The emulator runs in a session of its own, so a Ctrl-C at the terminal reaches the loop
alone, which stops in order.
"""
from __future__ import annotations

import math
import os
import select
import time
import weakref
from dataclasses import dataclass

import numpy as np

from rtctl.drivers.mip import DeviceError, MipImu
from rtctl.drivers.sensor import IMU
from rtctl.drivers.sim_sensors import MOTION_SIZE, sensor_motion
from rtctl.dynamics import Dynamics
from rtctl.options import setting

from .device_clock import POLL
from .imu_noise import G0
from .mip_imu import MipImuProcess
from .truth_feed import SIZE, TruthFeed, TruthWriter, truth_sample

CLOCKS = ("auto", "plant", "wall")
EMULATOR_OPTIONS = ("latency", "accel_noise_density", "gyro_noise_density", "accel_initial_bias",
                    "gyro_initial_bias", "accel_bias_instability", "gyro_bias_instability")
STOP_TIMEOUT = 5.0     # s the emulator has to print its statistics and exit on SIGTERM


class Emulation:
    """One sensor's emulator process and truth block; :meth:`close` ends both, once. Holds no reference to the
    sensor, so that ``weakref.finalize`` can close it when the sensor is collected."""

    def __init__(self):
        self.feed: TruthFeed | None = None
        self.process: MipImuProcess | None = None
        self.stats: dict | None = None      # the emulator's STATS line, once it has stopped

    def running(self) -> bool:
        return self.process is not None and self.process.proc.poll() is None

    def stop_process(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            self.stats = process.stop(STOP_TIMEOUT)

    def close(self) -> None:
        self.stop_process()
        feed, self.feed = self.feed, None
        if feed is not None:
            feed.close()


class EmulatedMipImu(MipImu):
    """A MIP IMU emulated in another process, measuring the simulated plant (kind ``imu``)."""

    kinds = (IMU,)

    @dataclass(frozen=True)
    class Options(MipImu.Options):
        port: str = setting("str", None)      # leave out: the emulator's pty, known once it has started
        # the device's crystal; auto: the plant's time when the loop is not paced, else the wall clock
        clock: str = setting("str", "auto", choices=CLOCKS)
        seed: int = setting("int", 0, low=0)                  # the emulated errors' random draws
        # s from sampling to sending; this and each error below: the 3DM-GX5-25 datasheet's if left out
        latency: float = setting("float", None, low=0.0, high=1.0)
        accel_noise_density: float = setting("float", None, low=0.0)   # m/s^2/sqrt(Hz)
        gyro_noise_density: float = setting("float", None, low=0.0)    # rad/s/sqrt(Hz)
        accel_initial_bias: float = setting("float", None, low=0.0)    # m/s^2, sigma of the turn-on bias
        gyro_initial_bias: float = setting("float", None, low=0.0)     # rad/s, sigma of the turn-on bias
        accel_bias_instability: float = setting("float", None, low=0.0)   # m/s^2
        gyro_bias_instability: float = setting("float", None, low=0.0)    # rad/s
        poll: float = setting("float", POLL, positive=True, high=0.01)   # s between polls of the plant's time
        startup_timeout: float = setting("float", 60.0, positive=True)   # s for the emulator to announce its pty

    @classmethod
    def from_config(cls, options: dict, context) -> "EmulatedMipImu":
        return cls(context.model, cls.Options(**options), plant=context.plant)

    def __init__(self, model, options: "EmulatedMipImu.Options | None" = None, *, plant):
        super().__init__(model, options)
        if self.options.port is not None:
            raise ValueError(f"{self.name}: port {self.options.port!r}: the emulated device's port is the pty its "
                             f"emulator opens; leave port out")
        if plant is None:
            raise ValueError(f"{self.name}: backend 'mip_emulated' measures a simulated plant, and there is none")
        self.plant = plant
        self._dynamics = Dynamics(plant.model)
        self._writer: TruthWriter | None = None
        self.paced: bool | None = None      # the loop's pace, learned in warm (None: not run by a loop yet)
        self.emulation = Emulation()
        self._finalizer = weakref.finalize(self, self.emulation.close)

    @property
    def clock(self) -> str:
        """The clock the emulator runs (or will run) on: ``plant`` or ``wall``."""
        if self.options.clock != "auto":
            return self.options.clock
        return "plant" if self.paced is False else "wall"

    def emulator_arguments(self, feed_name: str) -> list[str]:
        o = self.options
        args = ["--truth", feed_name, "--clock", self.clock, "--parent", str(os.getpid()), "--seed", str(o.seed),
                "--poll", repr(o.poll), "--accel-range", repr(o.accel_range * G0), "--gyro-range", repr(o.gyro_range)]
        given = vars(o)
        for name in EMULATOR_OPTIONS:
            value = given[name]
            if value is not None:
                args += ["--" + name.replace("_", "-"), repr(value)]
        return args

    # -- configuration (may block, may raise) -----------------------------------------------------------
    def on_configure(self) -> None:
        if not self.emulation.running():
            self._start_emulator()
        super().on_configure()

    def _start_emulator(self) -> None:
        emulation = self.emulation
        emulation.stop_process()      # one that died: its statistics are kept, its pty is gone
        if emulation.feed is None:
            emulation.feed = TruthFeed.create()
            self._writer = TruthWriter.for_sensor(emulation.feed, self._dynamics, self)
        self.write_truth()            # a first sample before the device's first tick
        try:
            emulation.process = MipImuProcess(*self.emulator_arguments(emulation.feed.name),
                                              startup_timeout=self.options.startup_timeout, new_session=True)
        except (OSError, RuntimeError) as exc:
            raise DeviceError(f"{self.name}: {exc}") from None
        self.options = self.options.replace(port=emulation.process.port)

    def on_activate(self) -> None:
        """Resume the stream and wait for its first sample: the loop's first cycle has a reading (on the plant's
        clock the device sends it at once, :attr:`~rtctl.hil.device_clock.PlantTimeClock.primes`)."""
        self.write_truth()
        super().on_activate()
        timeout = self.options.command_timeout
        deadline = time.monotonic() + timeout
        while not MipImu.receive(self, self.reading, math.nan) and not self.health.fault:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeviceError(f"{self.name}: no sample from the emulated device within {timeout:g} s of resume")
            select.select((self._fd,), (), (), min(remaining, 0.01))

    def close(self) -> None:
        """Close the port, stop the emulator and remove the truth block (after deactivate)."""
        super().close()
        self.emulation.close()
        self._writer = None
        self.options = self.options.replace(port=None)

    # -- every cycle: never raises, never blocks ------------------------------------------------------------
    def write_truth(self) -> None:
        """The sensor frame's truth for the plant's state and time, into the feed. Allocation-free."""
        plant = self.plant
        if self._writer is not None:
            self._writer.step(plant.t, plant.q, plant.v)

    def receive(self, reading, now: float) -> bool:
        self.write_truth()
        return super().receive(reading, now)

    def warm(self, cycle) -> None:
        """The parse and conversion kernels (``mip``), then the truth's kinematics on scratch arrays; and the
        loop's pace, which ``clock = "auto"`` follows (warm comes before configure)."""
        super().warm(cycle)
        self.paced = bool(cycle.loop.pace)
        d, plant = self._dynamics, self.plant
        motion = np.zeros(MOTION_SIZE)
        sensor_motion(d.mi, d.mf, d.ws, plant.q.copy(), plant.v.copy(), np.zeros(plant.model.nv), self.body,
                      np.ascontiguousarray(self.rotation, dtype=float),
                      np.ascontiguousarray(self.translation, dtype=float), motion)
        truth_sample(motion, np.full(3, np.nan), 1e-3, 0.0, np.zeros(SIZE))
