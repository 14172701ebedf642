"""The wrench at a force-torque sensor, handed from the loop's process to the sensor's emulator.

The feed is a :class:`~rtctl.hil.truth_feed.TruthFeed` whose samples are :data:`WIDTH` values: the plant time
(:data:`T`), then the wrench ``[torque; force]`` (N m, N; the sensor's axes, about its point) from
:data:`WRENCH`. The truth feed's sequence lock keeps the emulator from seeing half of one step and half of the
next without the writer ever waiting; its ring keeps the last :data:`DEPTH` plant steps, so that an emulator on
the plant's clock takes the step each of its ticks falls on (:meth:`~rtctl.hil.truth_feed.TruthFeed.read_at`)
even when it runs some way behind the plant. The block is 0600 under an unguessable name, created ``O_EXCL``,
and an opener refuses one another user owns or others may open: other users cannot open it at all
(tests/test_netft_feed.py: a uid-65534 child of the test).

:class:`PlantWrenchFeed` is the loop-side writer: what a sensor fixed where the sensor is reads on the simulated
plant (:meth:`rtctl.plants.base.Plant.sensor_wrench`), written for the plant's newest state and time. The
``netft_emulated`` backend calls :meth:`PlantWrenchFeed.write` before each read; a test wiring an emulator by
hand appends the object to the loop's ``boundary_hooks`` (it is called before every cycle, right after the
plant's last step).
"""
from __future__ import annotations

import numpy as np

from rtctl.drivers.sim_force_torque import sensor_mount

from .truth_feed import TruthFeed

T, WRENCH, WIDTH = 0, 1, 7
DEPTH = 4096     # plant steps kept: 4.1 s of a 1 kHz plant, 0.5 s of wall time at 8 times real time


def create_feed() -> TruthFeed:
    """A new wrench feed, owned by this process (``close`` removes it)."""
    return TruthFeed.create(depth=DEPTH, width=WIDTH)


def open_feed(name: str) -> TruthFeed:
    """The wrench feed ``name`` (its creator removes it); ValueError for a block that is not one."""
    feed = TruthFeed(name)
    if feed.width != WIDTH:
        feed.close()
        raise ValueError(f"shared memory {name!r} is not a wrench feed ({feed.width} values a sample, not {WIDTH})")
    return feed


class PlantWrenchFeed:
    """Writes into ``feed`` the wrench a sensor placed like ``sensor`` (any :class:`rtctl.drivers.sensor.Sensor`
    of the plant's model) reads on ``plant``; as a control-loop boundary hook, before every cycle."""

    def __init__(self, plant, sensor, feed: TruthFeed):
        self.plant, self.feed = plant, feed
        self.body, self.mount = sensor.body, sensor_mount(sensor)
        self.sample = np.full(WIDTH, np.nan)
        self.wrench = self.sample[WRENCH:]
        if not plant.sensor_wrench(self.body, self.mount, self.wrench):
            raise ValueError(f"{sensor.name}: the {type(plant).__name__} plant gives no wrench at frame "
                             f"{sensor.options.frame!r}")
        self.write()

    def write(self) -> bool:
        """Publish the wrench for the plant's state and time; False (nothing written) when the plant cannot
        tell. Allocation-free."""
        plant = self.plant
        if not plant.sensor_wrench(self.body, self.mount, self.wrench):
            return False
        self.sample[T] = plant.t
        self.feed.write(self.sample)
        return True

    def __call__(self, loop) -> None:
        self.write()
