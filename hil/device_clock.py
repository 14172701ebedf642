"""The crystal an emulated device runs on: the host's clock, or the simulated plant's time.

An emulated sensor samples and sends on its own clock, whatever its master sends or reads (a real device
does: the master cannot make it sample sooner, or wait for it). Both clocks give the device's time in
seconds since it was powered on, counted by its crystal (``drift_ppm`` off the clock it derives from):

* :class:`WallClock` -- the host's monotonic clock. Right for a run paced at wall-clock rate, and the only
  clock a device has against real hardware.
* :class:`PlantTimeClock` -- the simulated plant's time, as the loop process publishes it with the sensor
  frame's truth (the ``T`` column of a :class:`hil.truth_feed.TruthFeed`). Hardware-in-the-loop against a
  simulated plant that runs slower than real time (the stiff-ground legged plants step at 10 kHz, slower than
  that in Python; any run with ``pace = false``) or faster (an offline arm): on the wall clock the device would
  send many samples per simulated period, or few, and its latency would be wall time; on the plant's time it
  sends one sample per device period of simulated time, each taken at the plant step its tick falls on
  (:meth:`hil.truth_feed.TruthFeed.read_at`), and holds it for its latency in simulated time. It still does
  not wait for its master: it follows the plant's time by polling the feed, every ``poll`` seconds while the
  plant moves and every :data:`IDLE_POLL` once it has stood still for :data:`IDLE_AFTER`, so it costs little
  when nothing changes; to each sample's latency it adds a poll and whatever the scheduler delays it, in wall
  time, which is that times the run's speed against real time in simulated time.

An emulator takes its clock from the command line: :func:`add_clock_arguments` and :func:`clock_from`.
"""
from __future__ import annotations

import math
import time

from rtctl.options import argument_type

IDLE_WAIT = 0.05    # s the wall-clock device sleeps at most when nothing is due
MAX_LAG = 0.1       # s behind its clock after which the wall-clock device skips ticks instead of bursting them out
POLL = 2e-4         # s between polls of the plant's time while it moves
IDLE_AFTER = 0.1    # s of wall time without a new plant time before the polls slow down
IDLE_POLL = 2e-3    # s between polls of a plant standing still


class WallClock:
    """The host's monotonic clock, the crystal ``drift_ppm`` fast. ``max_lag``: seconds behind after which the
    device skips ticks (its process was stopped or starved: those samples are lost, as a real device's)."""

    max_lag = MAX_LAG
    primes = False    # a resumed stream's first sample comes at the next tick, as a device's does

    def __init__(self, drift_ppm: float = 0.0):
        self.scale = 1.0 + drift_ppm * 1e-6      # device seconds per host second
        self.t0 = time.monotonic()

    def now(self) -> float:
        """The device's time (s since it was powered on)."""
        return (time.monotonic() - self.t0) * self.scale

    def truth_time(self, device_time: float) -> float | None:
        """The plant time to take the truth at for a sample at ``device_time``: None, the newest (the plant
        runs on the same wall clock)."""
        return None

    def wait(self, until: float, now: float) -> float:
        """Host seconds to sleep before ``until`` (device time) is due, at most :data:`IDLE_WAIT`."""
        return min(max(0.0, (until - now) / self.scale), IDLE_WAIT)


class PlantTimeClock:
    """The simulated plant's time (the newest ``T`` of ``feed``), the crystal ``drift_ppm`` fast: device time
    is plant time (times the drift). None until the loop process has written a first sample. No tick is ever
    skipped: a device behind the plant in wall time is not behind it in the plant's time."""

    max_lag = math.inf
    # The plant's time stands still while the run is set up, the plant held at its initial state, and a robot's
    # IMU streams long before its loop's first cycle: a stream resumed on the plant's clock sends the sample of
    # its newest tick at once, so that the first cycle has a reading (as the sim backend's first read does).
    primes = True

    def __init__(self, feed, drift_ppm: float = 0.0, poll: float = POLL):
        self.feed = feed
        self.scale = 1.0 + drift_ppm * 1e-6      # device seconds per plant second
        self.poll = float(poll)
        self._last = math.nan
        self._changed = time.monotonic()

    def now(self) -> float | None:
        t = self.feed.newest_time()
        if t != t:
            return None
        if t != self._last:
            self._last, self._changed = t, time.monotonic()
        return t * self.scale

    def truth_time(self, device_time: float) -> float:
        return device_time / self.scale

    def wait(self, until: float, now: float | None) -> float:
        """The next poll: soon while the plant moves, later once it has stood still a while."""
        return IDLE_POLL if time.monotonic() - self._changed > IDLE_AFTER else self.poll


def add_clock_arguments(parser, feed_option: str) -> None:
    """``--clock``, ``--poll`` and ``--clock-drift-ppm``; the plant's time is the one of the feed
    ``feed_option`` names."""
    parser.add_argument("--clock", choices=("wall", "plant"), default="wall",
                        help=f"the device's crystal: the host's clock, or the simulated plant's time of {feed_option} "
                        "(a plant slower or faster than real time: one sample per device period of simulated time)")
    parser.add_argument("--poll", type=argument_type("float", positive=True), default=POLL,
                        help="s between polls of the plant's time (--clock plant)")
    parser.add_argument("--clock-drift-ppm", type=float, default=0.0,
                        help="the device's clock against the host's (or the plant's)")


def clock_from(args, feed, feed_option: str):
    """The clock :func:`add_clock_arguments` parsed into ``args``, on ``feed`` (None: the emulator has none);
    ValueError for the plant's clock without a feed."""
    if args.clock == "wall":
        return WallClock(args.clock_drift_ppm)
    if feed is None:
        raise ValueError(f"--clock plant needs the plant's time: give {feed_option}")
    return PlantTimeClock(feed, args.clock_drift_ppm, args.poll)
