"""The true wrench at a force-torque sensor, handed from the loop's process to the sensor's emulator.

A small shared-memory block (a file in ``/dev/shm``, mapped by both processes): a magic word, a sequence
counter, the plant's time and the wrench ``[torque; force]`` (N m, N; the sensor's frame), written under a
sequence lock (the counter is odd while a write is under way; a reader retries until it reads the same even
count before and after its copy), so the emulator never sees half of one step and half of the next and the
writer never waits.

The block is created only by the process that writes it, new (``O_EXCL``: a name someone made first is
refused, never reused), with mode 0600 and ``O_NOFOLLOW``; its name carries 16 random bytes. A reader opens
it read-only and refuses a block that is not a regular file of the writer's size owned by its own user with no
access for others (another user's planted block). Other users cannot open it at all
(tests/test_netft_feed.py: a uid-65534 child of the test).

:class:`PlantWrenchFeed` is the loop-side writer: a boundary hook of the control loop that, before every cycle
(right after the plant's last step), writes what a sensor fixed where the sensor is reads on the simulated
plant (:meth:`rtctl.plants.base.Plant.sensor_wrench`).
"""
from __future__ import annotations

import mmap
import os
import re
import secrets
import stat

import numpy as np

from rtctl.drivers.sim_force_torque import sensor_mount

DIRECTORY = "/dev/shm"
PREFIX = "rtctl-wrench-"
NAME = re.compile(r"rtctl-wrench-[0-9a-f]{32}")
MAGIC = np.frombuffer(b"rtctlWF1", dtype=np.uint64)[0]
SIZE = 72            # magic, sequence (uint64), t, wrench[6] (float64)
RETRIES = 1000


def _path(name: str) -> str:
    if not NAME.fullmatch(str(name)):
        raise ValueError(f"wrench feed name {name!r} is not one this module makes ({PREFIX} and 32 hex digits)")
    return os.path.join(DIRECTORY, name)


class WrenchFeed:
    """The writer's side: creates the block (module docstring); :meth:`write` per plant step; :meth:`close`
    removes it."""

    def __init__(self):
        self.name = PREFIX + secrets.token_hex(16)
        self.path = _path(self.name)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            os.unlink(self.path)
            raise
        os.close(fd)
        self._words = np.ndarray(2, dtype=np.uint64, buffer=self._map)
        self._values = np.ndarray(7, dtype=np.float64, buffer=self._map, offset=16)
        self._values[0] = np.nan
        self._words[0] = MAGIC

    def write(self, t: float, wrench) -> None:
        """Publish the wrench at plant time ``t`` (allocation-free for a float64 vector of 6)."""
        words = self._words
        words[1] += 1
        self._values[0] = t
        self._values[1:] = wrench
        words[1] += 1

    def close(self) -> None:
        if self._map is not None:
            del self._words, self._values
            self._map.close()
            self._map = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class WrenchFeedReader:
    """The emulator's side: opens a block by name, read-only, after the checks of the module docstring."""

    def __init__(self, name: str):
        path = _path(name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            problem = ("not a regular file" if not stat.S_ISREG(st.st_mode)
                       else f"owned by uid {st.st_uid}, not {os.geteuid()}" if st.st_uid != os.geteuid()
                       else f"mode {stat.S_IMODE(st.st_mode):o} lets others in" if st.st_mode & 0o077
                       else f"{st.st_size} bytes, not {SIZE}" if st.st_size != SIZE else "")
            if problem:
                raise ValueError(f"wrench feed {name}: {problem}")
            self._map = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self._words = np.ndarray(2, dtype=np.uint64, buffer=self._map)
        self._values = np.ndarray(7, dtype=np.float64, buffer=self._map, offset=16)
        if self._words[0] != MAGIC:
            raise ValueError(f"wrench feed {name}: not a wrench feed (magic)")
        self._copy = np.zeros(7)
        self.torn = 0    # reads that met a write under way and retried

    def read(self, out) -> float:
        """Copy the newest wrench into ``out`` (6) and return its plant time; NaN before the first write or if
        no consistent copy was had in :data:`RETRIES` tries."""
        words, copy = self._words, self._copy
        for _ in range(RETRIES):
            before = int(words[1])
            if before & 1:
                self.torn += 1
                continue
            copy[:] = self._values
            if int(words[1]) == before:
                out[:] = copy[1:]
                return float(copy[0])
            self.torn += 1
        return float("nan")

    def close(self) -> None:
        if self._map is not None:
            del self._words, self._values
            self._map.close()
            self._map = None


class PlantWrenchFeed:
    """A control-loop boundary hook (``loop.boundary_hooks``) that writes, before every cycle, the wrench a
    sensor placed like ``sensor`` (any :class:`rtctl.drivers.sensor.Sensor` of the loop's model) reads on
    ``plant`` into ``feed``."""

    def __init__(self, plant, sensor, feed: WrenchFeed):
        self.plant, self.feed = plant, feed
        self.body, self.mount = sensor.body, sensor_mount(sensor)
        self.wrench = np.zeros(6)
        if not plant.sensor_wrench(self.body, self.mount, self.wrench):
            raise ValueError(f"{sensor.name}: the {type(plant).__name__} plant gives no wrench at frame "
                             f"{sensor.options.frame!r}")
        feed.write(plant.t, self.wrench)

    def __call__(self, loop) -> None:
        if self.plant.sensor_wrench(self.body, self.mount, self.wrench):
            self.feed.write(self.plant.t, self.wrench)
