"""The simulated plant's truth at a sensor's frame, shared with the emulator processes that measure it.

A :class:`TruthFeed` is one block of POSIX shared memory (``multiprocessing.shared_memory``): a sequence
number, the ring's depth, its samples' width and the last ``depth`` samples of ``width`` float64 values each,
the plant time first. An IMU's (:data:`SIZE` values, the default) are the plant time, the sensor frame's world
position, orientation (quaternion x, y, z, w), the velocity of its origin and its angular velocity (world
axes), the linear acceleration of its origin and the model's gravity; a force-torque sensor's are the plant
time and the wrench across the sensor (:mod:`rtctl.hil.wrench_feed`). The loop process writes it every plant
step (:class:`TruthWriter`); an emulator reads the newest sample at its own rate (:meth:`TruthFeed.read`), or,
on the plant's clock, the sample of the plant step its tick falls on (:meth:`TruthFeed.read_at`): the ring
keeps the steps the emulator has not caught up with.

A sequence lock keeps a reader from ever seeing a torn sample (Lamport, "Concurrent reading and writing",
CACM 20(11), 1977; the Linux kernel's seqlock): the writer makes the sequence odd, writes the next slot, makes
it even; the sequence is twice the number of whole writes. A reader copies a slot between two reads of the
sequence and keeps the copy when the writer has not come round the ring to that slot in between, so it never
waits for a write in progress (that one writes another slot). Each store is its own NumPy call, so the
interpreter performs them in program order, and x86-64 keeps stores in that order for other cores (total store
order); a weakly ordered CPU would need barriers.

The block is created with mode 0600 under an unguessable name and ``O_EXCL`` (a name squatted by another
user is an error, never a block someone else can write): only this user's processes can open it. An opener
refuses a block another user owns or others may open (one planted under the name it was given).

:class:`TruthWriter` computes what is written with the ``sim`` sensor's
:func:`~rtctl.drivers.sim_sensors.sensor_motion` (rtctl's kinematics kernels: the twist recursion of Shah, Saha
& Dutt, 2012, eqs. 1-2); the acceleration is the finite difference of
the frame origin's velocity across plant steps (first order in the step: an acceptable error for the
emulated accelerometer, whose noise at 500 Hz is far larger for steps of a millisecond or less).
"""
from __future__ import annotations

import os
import secrets
import stat
import sys
from multiprocessing import resource_tracker, shared_memory

import numpy as np
from numba import njit

from rtctl.drivers.sim_sensors import MOTION_SIZE, sensor_motion
from rtctl.dynamics.spatial import matrix_quaternion

T, POS, QUAT, VEL, OMEGA, ACC, GRAVITY = 0, 1, 4, 8, 11, 14, 17
SIZE = 20
_HEADER = 3       # uint64 words before the samples: the sequence number, the ring's depth and the samples' width
DEPTH = 256       # samples kept: 25.6 ms of a 10 kHz plant's steps, 0.256 s of a 1 kHz plant's
READ_TRIES = 1000
TIME_SLACK = 1e-9   # s: a plant time summed step by step is some ulps off the same time as k / rate
_CREATED: set[str] = set()   # blocks this process made (their tracking, for unlinking at exit, is kept)


class TruthFeed:
    """One sensor frame's truth in shared memory. ``TruthFeed.create()`` makes a new block (this process
    owns it: :meth:`close` with ``unlink``); ``TruthFeed(name)`` opens an existing one."""

    def __init__(self, name: str, *, _create: bool = False, depth: int = DEPTH, width: int = SIZE):
        if _create:
            if not 1 <= depth <= 65536 or not 1 <= width <= 256:
                raise ValueError(f"a truth feed keeps 1 to 65536 samples of 1 to 256 values, not {depth} of {width}")
            self.shm = shared_memory.SharedMemory(name=name, create=True, size=8 * (_HEADER + depth * width))
            os.fchmod(self.shm._fd, 0o600)
            _CREATED.add(self.shm.name)
        else:
            self.shm = shared_memory.SharedMemory(name=name)
            if sys.version_info < (3, 13) and self.shm.name not in _CREATED:
                resource_tracker.unregister(self.shm._name, "shared_memory")   # 3.12 and older would unlink it
                # at this process's exit, though it merely opened it
        self.name = self.shm.name
        self.owner = _create
        words = np.ndarray((_HEADER,), dtype=np.uint64, buffer=self.shm.buf)
        if _create:
            words[:] = (0, depth, width)
        self.depth, self.width = int(words[1]), int(words[2])
        problem = self._foreign() if not _create else ""
        if not problem and (not 1 <= self.depth or not 1 <= self.width
                            or self.shm.size < 8 * (_HEADER + self.depth * self.width)):
            problem = f"is not a truth feed (depth {self.depth}, width {self.width}, {self.shm.size} bytes)"
        if problem:
            self.shm.close()
            raise ValueError(f"shared memory {name!r} {problem}")
        self._seq = words[:1]
        self.ring = np.ndarray((self.depth, self.width), dtype=np.float64, buffer=self.shm.buf, offset=8 * _HEADER)
        self._slots = [self.ring[k] for k in range(self.depth)]    # views made once: a write makes none
        if _create:
            self.ring[:] = np.nan
        self._next = (int(self._seq[0]) >> 1) % self.depth       # the slot of the next write
        self._one = np.uint64(1)
        self._scratch = np.zeros(self.width)
        self.torn_retries = 0

    def _foreign(self) -> str:
        """Why an opened block is not this user's own (another user made it, or lets others in), or ""."""
        st = os.fstat(self.shm._fd)
        if st.st_uid != os.geteuid():
            return f"is owned by uid {st.st_uid}, not {os.geteuid()}"
        return f"has mode {stat.S_IMODE(st.st_mode):o}: it lets others in" if st.st_mode & 0o077 else ""

    @classmethod
    def create(cls, depth: int = DEPTH, width: int = SIZE) -> "TruthFeed":
        return cls(f"rtctl-truth-{secrets.token_hex(8)}", _create=True, depth=depth, width=width)

    def mode(self) -> int:
        """The block's permission bits (0o600)."""
        return stat.S_IMODE(os.fstat(self.shm._fd).st_mode)

    def write(self, values) -> None:
        """Publish ``values`` (``width`` floats) as one sample. Allocation-free; one writer only."""
        seq = self._seq
        seq += self._one
        np.copyto(self._slots[self._next], values)
        seq += self._one
        self._next = self._next + 1 if self._next + 1 < self.depth else 0

    def _kept(self, m: int) -> bool:
        """Write ``m`` (1-based) is still whole in its slot: the writer has not begun write ``m + depth``."""
        return (int(self._seq[0]) + 1) >> 1 < m + self.depth

    def read(self, out) -> int:
        """Copy the newest whole sample into ``out``; its sequence number (twice the writes so far; 0: nothing
        written yet, ``out`` NaN), or -1 when the writer came round the ring during every try."""
        for _ in range(READ_TRIES):
            n = int(self._seq[0]) >> 1
            np.copyto(out, self._slots[(n - 1) % self.depth])
            if self._kept(n):
                return 2 * n
            self.torn_retries += 1
        return -1

    def newest_time(self) -> float:
        """The plant time of the newest whole sample (NaN: nothing written yet)."""
        self.read(self._scratch)
        return float(self._scratch[T])

    def read_at(self, t: float, out) -> int:
        """Copy into ``out`` the newest whole sample of plant time at most ``t`` (+ :data:`TIME_SLACK`): the
        step a device's tick at plant time ``t`` falls on. Its sequence number; -1 when the ring no longer
        holds (or never held) a sample that old: then ``out`` is the newest, as :meth:`read` gives it."""
        n = int(self._seq[0]) >> 1
        for m in range(n, max(n - self.depth, 0), -1):
            slot = self._slots[(m - 1) % self.depth]
            if slot[T] <= t + TIME_SLACK:
                np.copyto(out, slot)
                if self._kept(m):
                    return 2 * m
                break
            if not self._kept(m):
                break
        self.read(out)
        return -1

    def close(self, unlink: bool | None = None) -> None:
        """Unmap the block; unlink it too if this process created it (or ``unlink``): an opener unlinks a
        block only when its creator is gone (an emulator whose loop process was killed)."""
        self.ring = self._slots = self._seq = None
        self.shm.close()
        if not (self.owner if unlink is None else unlink):
            return
        tracked = self.owner or sys.version_info >= (3, 13)
        if not tracked:      # unlink() tells the resource tracker, which must know the block (3.12 and older)
            resource_tracker.register(self.shm._name, "shared_memory")
        try:
            self.shm.unlink()
        except FileNotFoundError:
            if self.owner:
                raise
            resource_tracker.unregister(self.shm._name, "shared_memory")    # someone else removed it first
        _CREATED.discard(self.shm.name)


@njit(cache=True)
def truth_sample(motion, previous, dt, t, out):
    """``out``'s time, position, orientation and velocities from :func:`~rtctl.drivers.sim_sensors.sensor_motion`'s
    ``motion``; its acceleration the origin velocity's change since ``previous`` (updated) over ``dt`` (0 for
    the first step)."""
    out[T] = t
    out[QUAT], out[QUAT + 1], out[QUAT + 2], out[QUAT + 3] = matrix_quaternion(
        (motion[0], motion[1], motion[2], motion[3], motion[4], motion[5], motion[6], motion[7], motion[8]))
    for k in range(3):
        out[POS + k] = motion[9 + k]
        out[OMEGA + k] = motion[12 + k]
        out[VEL + k] = motion[15 + k]
        out[ACC + k] = (motion[15 + k] - previous[k]) / dt if dt > 0.0 and np.isfinite(previous[k]) else 0.0
        previous[k] = motion[15 + k]


class TruthWriter:
    """Writes a sensor frame's truth into a :class:`TruthFeed` each plant step, in the loop process.

    ``body``, ``rotation`` (3 x 3, the sensor's axes in the body) and ``translation`` (m) are a
    :class:`~rtctl.drivers.sensor.Sensor`'s (``sensor.body``, ...). :meth:`step` allocates nothing."""

    def __init__(self, feed: TruthFeed, dynamics, body: int, rotation, translation):
        self.feed, self.dynamics = feed, dynamics
        model = dynamics.model
        self.body = int(body)
        self.rotation = np.ascontiguousarray(rotation, dtype=float).reshape(3, 3)
        self.translation = np.ascontiguousarray(translation, dtype=float).reshape(3)
        self.sample = np.full(SIZE, np.nan)
        self.sample[GRAVITY:GRAVITY + 3] = model.gravity
        self._zero = np.zeros(model.nv)
        self._motion = np.zeros(MOTION_SIZE)
        self._previous = np.full(3, np.nan)
        self._last_t = np.nan

    @classmethod
    def for_sensor(cls, feed: TruthFeed, dynamics, sensor) -> "TruthWriter":
        return cls(feed, dynamics, sensor.body, sensor.rotation, sensor.translation)

    def step(self, t: float, q, v) -> None:
        """Publish the frame's truth at plant time ``t`` for the plant state ``q``, ``v``."""
        d = self.dynamics
        sensor_motion(d.mi, d.mf, d.ws, q, v, self._zero, self.body, self.rotation, self.translation, self._motion)
        truth_sample(self._motion, self._previous, t - self._last_t, t, self.sample)
        self._last_t = t
        self.feed.write(self.sample)
