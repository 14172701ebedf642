"""The ``netft_emulated`` sensor backend: the ``netft`` backend reading an emulated ATI Net F/T that measures the
simulated plant's wrench at the sensor, the device in its own process on its own clock.

Built with the simulated plant (a run config's ``[plant]``, stepped by the ``sim`` driver), it is a
:class:`~rtctl.drivers.netft.NetFT` in every way but where the device is (:mod:`rtctl.hil.emulated_device`,
which the ``mip_emulated`` backend shares): ``configure`` creates a wrench feed (:mod:`rtctl.hil.wrench_feed`,
0600 shared memory), starts the emulator (``python -m rtctl.hil.netft_sensor --feed NAME``,
:mod:`rtctl.hil.netft_sensor`) on loopback with this table's options, takes the RDT and calibration ports it
announces (free ones the system picked: two runs never collide) and reads the calibration over TCP and opens
the RDT socket exactly as the ``netft`` backend does for a real device. Every read first writes what a sensor
fixed where this one is reads on the plant at its newest state and time (:meth:`rtctl.plants.base.Plant.sensor_wrench`,
the wrench the ``sim_force_torque`` backend reads), then takes the records that arrived without blocking.

On the plant's clock (an offline run) the emulator ticks in plant time and each record's device stamp
(``ft_sequence`` / 7000) is the plant time of the step it measured, the Gamma SI-130-10's noise (its
resolution as the standard deviation, times ``noise_scale``) and a rounding to the calibration's counts added.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtctl.drivers.netft import NetFT
from rtctl.drivers.netft import protocol as P
from rtctl.drivers.sensor import FORCE_TORQUE
from rtctl.drivers.sim_force_torque import sensor_mount
from rtctl.options import setting

from .emulated_device import EmulatedDevice, EmulatorOptions
from .netft_sensor import BUFFER, LOOPBACK, RATE_HZ, NetFTProcess
from .wrench_feed import PlantWrenchFeed, create_feed

EMULATOR_OPTIONS = ("rate", "buffer", "latency", "noise_scale")


class EmulatedNetFT(EmulatedDevice, NetFT):
    """An ATI Net F/T emulated in another process, measuring the simulated plant (kind ``force_torque``)."""

    kinds = (FORCE_TORQUE,)
    process_class = NetFTProcess
    feed_option = "--feed"
    address_options = ("host", "rdt_port", "tcp_port")
    passed_options = EMULATOR_OPTIONS

    @dataclass(frozen=True)
    class Options(EmulatorOptions, NetFT.Options):
        host: str = setting("str", None)          # leave out: the emulator serves on loopback
        rdt_port: int = setting("int", None, low=1, high=65535)   # leave out: the ports the emulator announces
        tcp_port: int = setting("int", None, low=1, high=65535)
        # records per second, at most the device's 7000; this and each below: the emulator's default if left out
        rate: float = setting("float", None, positive=True, high=P.INTERNAL_RATE_HZ)
        buffer: int = setting("int", None, low=1, high=P.MAX_RECORDS_PER_DATAGRAM)   # records a datagram, buffered
        latency: float = setting("float", None, low=0.0, high=1.0)   # s the load is late
        noise_scale: float = setting("float", None, low=0.0)          # times the Gamma's resolution, per axis

    def __init__(self, model, options: "EmulatedNetFT.Options | None" = None, *, plant):
        super().__init__(model, options, plant=plant)
        if not plant.sensor_wrench(self.body, sensor_mount(self), np.zeros(6)):
            raise ValueError(f"{self.name}: the {type(plant).__name__} plant gives no wrench at frame "
                             f"{self.options.frame!r}")
        self._writer: PlantWrenchFeed | None = None

    def create_feed(self):
        feed = create_feed()
        self._writer = PlantWrenchFeed(self.plant, self, feed)
        return feed

    def forget_feed(self) -> None:
        self._writer = None

    def attach(self, process) -> None:
        self.options = self.options.replace(host=LOOPBACK, rdt_port=process.rdt_port, tcp_port=process.tcp_port)
        self.where = f"{LOOPBACK}:{process.rdt_port}"

    def send_period(self) -> float:
        """Seconds between datagrams: a record each (real-time streaming), or ``buffer`` records each."""
        o = self.options
        records = (BUFFER if o.buffer is None else o.buffer) if o.buffered else 1
        return records / (RATE_HZ if o.rate is None else o.rate)

    def device_fd(self) -> int | None:
        return None if self.sock is None else self.sock.fileno()

    # -- every cycle: never raises, never blocks ------------------------------------------------------------
    def write_truth(self) -> None:
        """The wrench at the sensor for the plant's state and time, into the feed. Allocation-free."""
        if self._writer is not None:
            self._writer.write()
