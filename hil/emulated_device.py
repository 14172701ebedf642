"""What the emulated sensor backends share: a device's backend reading its emulator, which measures the
simulated plant from a process of its own, on its own clock.

An emulated backend (``mip_emulated``, ``netft_emulated``) is its device's backend (``mip``, ``netft``) in every
way but where the device is: :class:`EmulatedDevice` comes first among its bases and, at ``configure``, creates
the shared block the plant's truth at the sensor goes through (a :class:`~rtctl.hil.truth_feed.TruthFeed`,
0600), writes a first sample, starts the emulator (``python -m rtctl.hil.NAME``, :mod:`rtctl.hil.emulator_child`)
on it with the table's options, takes the address the emulator announces, then lets the device's backend
configure the device there as it would a real one. Every read first writes the truth for the plant's newest
state and time (the sim driver's write stepped the plant once since the last read), then reads the device
without blocking, as the device's backend does. The master's reads do not drive the device: it samples on its
own clock, and what it sends reaches a later read. Activate waits for the resumed stream's first sample, so
that the loop's first cycle has a reading (an estimator or a controller closing on it needs one).

The device's clock (``clock``): ``"wall"``, the host's clock, for runs paced at wall-clock rate; ``"plant"``,
the simulated plant's time, for runs that are not (:mod:`rtctl.hil.device_clock` says why); ``"auto"`` (the
default) takes the plant's time when the loop that runs the sensor is not paced (``[loop] pace = false``,
``--offline``), which the sensor learns from the loop before configure (:meth:`EmulatedDevice.warm`), and the
wall clock otherwise (also when it is configured outside a loop).

Lockstep (``lockstep``, on by default): an unpaced loop has no deadline to keep, and on the plant's clock the
device's time is the plant's, so a device the host starves (its process waits for a CPU while the loop, in another,
runs the plant) falls behind the plant by as much simulated time as the run gains in that wall time. A reader
closing on it is fed stale readings, then one reading merging the backlog (drivers/mip: the mean over its span),
which an estimator propagating every cycle with the reading it holds (loops/estimation/base.py) integrates late
(Solo 12's emulator stopped for 0.1 s ten times in 2 s: waited for only once its sample was half ``max_age``, 0.25
s, old, readings reached 0.41 s and the tilt estimate 0.57 to 2.7 deg off; under the rule below, 7 ms and 0.20 to
0.25 deg; tests/test_mip_emulated.py). So, on the plant's clock in an unpaced loop only, a read that finds no new
sample while the newest it has is more than ``lockstep_lag`` behind the plant's time (its device stamp, the plant
time of its tick) waits for the device's next sample, up to :data:`LOCKSTEP_TIMEOUT` of wall time, as a
co-simulation master waits at each communication step for its slowest unit (Gomes et al., "Co-simulation: a
survey", ACM Computing Surveys 51(3), 2018). A device on pace is at most its latency and a send period behind
(:meth:`EmulatedDevice.send_latency`, :meth:`EmulatedDevice.send_period`); ``lockstep_lag`` defaults to its latency
and :data:`LAG_PERIODS` send periods, capped at half ``max_age`` but never below its latency and
:data:`MIN_LAG_PERIODS` send periods; one given must lie between the latter (else a read would wait for a sample
not due yet) and ``max_age`` (which the stale watchdog would reach first). A device that sends nothing within
:data:`LOCKSTEP_TIMEOUT` is let go (the loop runs on until the watchdog trips, ``max_age`` of simulated time after
its last sample) until it sends again. A paced loop never waits: there the device runs on the wall clock, and a
wait would cost the loop its deadline.

The emulator process and the shared block belong to the sensor: :meth:`EmulatedDevice.close` ends and removes
them, and so does the sensor's collection or the interpreter's exit (``weakref.finalize``). A loop process
killed outright leaves neither behind: the emulator notices its parent is gone (``--parent``), exits and
unlinks the block. The emulator runs in a session of its own, so a Ctrl-C at the terminal reaches the loop
alone, which stops in order.

A backend built on it declares its extension points: the emulator's process wrapper (:attr:`process_class`),
the device backend's options that say where the device is (:attr:`address_options`, the emulator's to give),
the options handed to the emulator as they are (:attr:`passed_options`), the feed (:meth:`create_feed`), the
truth written each read (:meth:`write_truth`), the emulator's own arguments (:meth:`device_arguments`), and
what the announced address becomes (:meth:`attach`).
"""
from __future__ import annotations

import math
import os
import select
import time
import weakref
from dataclasses import dataclass

from rtctl.options import OptionsBase, setting

from .device_clock import POLL
from .emulator_child import EmulatorChild

CLOCKS = ("auto", "plant", "wall")
STOP_TIMEOUT = 5.0     # s the emulator has to print its statistics and exit on SIGTERM
LOCKSTEP_TIMEOUT = 1.0   # s of wall time a read in lockstep waits for the device's next sample at most
LAG_PERIODS = 3          # the default lockstep_lag: the device's latency and this many send periods
MIN_LAG_PERIODS = 2      # a lockstep_lag below the latency and this many send periods is refused


class Emulation:
    """One sensor's emulator process and truth block; :meth:`close` ends both, once. Holds no reference to the
    sensor, so that ``weakref.finalize`` can close it when the sensor is collected."""

    def __init__(self):
        self.feed = None                             # the TruthFeed, once configured
        self.process: EmulatorChild | None = None
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


@dataclass(frozen=True)
class EmulatorOptions(OptionsBase):
    """The keys an emulated backend adds to its device backend's (``class Options(EmulatorOptions,
    Device.Options)``)."""

    # the device's crystal; auto: the plant's time when the loop is not paced, else the wall clock
    clock: str = setting("str", "auto", choices=CLOCKS)
    seed: int = setting("int", 0, low=0)                             # the emulated errors' random draws
    poll: float = setting("float", POLL, positive=True, high=0.01)   # s between polls of the plant's time
    startup_timeout: float = setting("float", 60.0, positive=True)   # s for the emulator to announce itself
    lockstep: bool = setting("bool", True)       # unpaced, on the plant's clock: wait for a device left behind
    # s of simulated time the newest sample may be behind the plant before a read waits (lockstep); default: the
    # device's latency and LAG_PERIODS send periods
    lockstep_lag: float = setting("float", None, positive=True)


class EmulatedDevice:
    """The part of an emulated backend that is not its device's (module docstring); first among its bases:
    ``class EmulatedMipImu(EmulatedDevice, MipImu)``."""

    process_class: type = EmulatorChild   # the emulator, started with :meth:`emulator_arguments`
    feed_option = "--truth"               # the emulator's argument naming the feed
    address_options: tuple = ()           # the device backend's options saying where the device is: left out
    passed_options: tuple = ()            # options given to the emulator as ``--name-with-dashes`` when set
    device_error: type = RuntimeError     # what configure and activate raise when the emulator fails

    @classmethod
    def from_config(cls, options: dict, context):
        return cls(context.model, cls.Options(**options), plant=context.plant)

    def __init__(self, model, options=None, *, plant):
        super().__init__(model, options)
        given = vars(self.options)
        for key in self.address_options:
            if given[key] is not None:
                raise ValueError(f"{self.name}: {key} {given[key]!r}: the emulated device's {key} is the one its "
                                 f"emulator announces; leave {key} out")
        if plant is None:
            raise ValueError(f"{self.name}: backend '{self.backend}' measures a simulated plant, and there is none")
        lag, max_age = self.options.lockstep_lag, self.options.max_age
        if lag is not None and lag >= max_age:
            raise ValueError(f"{self.name}: lockstep_lag {lag:g} s: must be below max_age ({max_age:g} s), which "
                             f"the stale watchdog would reach before a read waits")
        self.plant = plant
        self.paced: bool | None = None      # the loop's pace, learned in warm (None: not run by a loop yet)
        self.lockstep_waits = 0             # reads that waited for the device (lockstep)
        self.lockstep_seconds = 0.0         # wall time they waited
        self._lag = math.inf                # lockstep_lag in force, set at activate
        self._in_lockstep = False
        self.emulation = Emulation()
        self._finalizer = weakref.finalize(self, self.emulation.close)

    @property
    def clock(self) -> str:
        """The clock the emulator runs (or will run) on: ``plant`` or ``wall``."""
        if self.options.clock != "auto":
            return self.options.clock
        return "plant" if self.paced is False else "wall"

    @property
    def lockstep_lag(self) -> float:
        """Simulated seconds the newest sample may be behind the plant's time before a read in lockstep waits for
        the next (module docstring): the option, else the latency and :data:`LAG_PERIODS` send periods, at most
        half ``max_age`` and at least the latency and :data:`MIN_LAG_PERIODS` send periods."""
        if self.options.lockstep_lag is not None:
            return self.options.lockstep_lag
        latency, period = self.send_latency(), self.send_period()
        return max(latency + MIN_LAG_PERIODS * period, min(latency + LAG_PERIODS * period, 0.5 * self.options.max_age))

    @property
    def waits_for_device(self) -> bool:
        """Reads wait for a device left behind (module docstring): lockstep on, the plant's clock, unpaced."""
        return self.options.lockstep and self.paced is False and self.clock == "plant"

    def emulator_arguments(self, feed_name: str) -> list[str]:
        o = self.options
        args = [self.feed_option, feed_name, "--clock", self.clock, "--parent", str(os.getpid()), "--seed",
                str(o.seed), "--poll", repr(o.poll), *self.device_arguments()]
        given = vars(o)
        for name in self.passed_options:
            if given[name] is not None:
                args += ["--" + name.replace("_", "-"), repr(given[name])]
        return args

    # -- extension points ---------------------------------------------------------------------------------
    def create_feed(self):
        """A new truth feed for this sensor (and whatever writes it: :meth:`write_truth`)."""
        raise NotImplementedError

    def forget_feed(self) -> None:
        """The feed is gone: drop what writes it."""

    def write_truth(self) -> None:
        """The truth at the sensor for the plant's state and time, into the feed. Allocation-free; nothing
        before :meth:`create_feed`."""

    def device_arguments(self) -> list[str]:
        """The emulator's arguments for this table beyond the common ones and :attr:`passed_options`."""
        return []

    def attach(self, process) -> None:
        """Point the device backend's options at the address ``process`` announced."""

    def detach(self) -> None:
        """The emulator is gone: the address options left out again."""
        self.options = self.options.replace(**{key: None for key in self.address_options})

    def send_period(self) -> float:
        """Seconds of the device's clock between its sends, as configured."""
        return self.sample_period

    def send_latency(self) -> float:
        """Seconds of the device's clock from a sample's tick to its send."""
        return 0.0

    def device_fd(self) -> int | None:
        """A file descriptor that turns readable when the device sends (None: poll)."""
        return None

    # -- configuration (may block, may raise) -----------------------------------------------------------
    def on_configure(self) -> None:
        """The emulator started (once), the device configured on it; then a ``lockstep_lag`` the device's send
        period makes too short is refused (module docstring)."""
        if not self.emulation.running():
            self._start_emulator()
        super().on_configure()
        least = self.send_latency() + MIN_LAG_PERIODS * self.send_period()
        if self.lockstep_lag < least:
            raise self.device_error(f"{self.name}: lockstep_lag {self.lockstep_lag:g} s: below the device's latency "
                                    f"and {MIN_LAG_PERIODS} send periods ({least:g} s): a read would wait for a "
                                    f"sample not due yet")

    def _start_emulator(self) -> None:
        emulation = self.emulation
        emulation.stop_process()      # one that died: its statistics are kept, its address is gone
        if emulation.feed is None:
            emulation.feed = self.create_feed()
        self.write_truth()            # a first sample before the device's first tick
        try:
            emulation.process = self.process_class(*self.emulator_arguments(emulation.feed.name),
                                                    startup_timeout=self.options.startup_timeout, new_session=True)
        except (OSError, RuntimeError) as exc:
            raise self.device_error(f"{self.name}: {exc}") from None
        self.attach(emulation.process)

    def on_activate(self) -> None:
        """Resume the stream and wait for its first sample: the loop's first cycle has a reading (on the plant's
        clock the device sends it at once, the plant's time standing still until the first cycle)."""
        self.write_truth()
        super().on_activate()
        timeout = self.options.startup_timeout
        if not self._await_sample(self.reading, math.nan, timeout) and not self.health.fault:
            raise self.device_error(f"{self.name}: no sample from the emulated device within {timeout:g} s of resume")
        self._in_lockstep, self._lag = self.waits_for_device, self.lockstep_lag

    def _await_sample(self, reading, now: float, timeout: float) -> bool:
        """Read the device until it gives a sample (True) or ``timeout`` s have passed or it faulted (False)."""
        deadline = time.monotonic() + timeout
        while not super().receive(reading, now):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.health.fault:
                return False
            fd = self.device_fd()
            if fd is None:
                time.sleep(min(remaining, 1e-3))
            else:
                select.select((fd,), (), (), min(remaining, 0.01))
        return True

    def close(self) -> None:
        """Close the device, stop the emulator and remove the truth block (after deactivate)."""
        super().close()
        self.emulation.close()
        self.forget_feed()
        self.detach()

    # -- every cycle: never raises; waits only in lockstep, in a loop that is not paced -----------------------
    def receive(self, reading, now: float) -> bool:
        """The truth written, then the device read; in lockstep (module docstring), no new sample while the newest
        is more than ``lockstep_lag`` behind the plant: the next is waited for."""
        self.write_truth()
        fresh = super().receive(reading, now)
        if fresh:
            self._in_lockstep = self.waits_for_device
        elif self._in_lockstep and self.plant.t - reading.device_stamp > self._lag:
            start = time.monotonic()
            fresh = self._await_sample(reading, now, LOCKSTEP_TIMEOUT)
            self.lockstep_waits += 1
            self.lockstep_seconds += time.monotonic() - start
            self.health.extra.update(lockstep_waits=self.lockstep_waits,
                                     lockstep_seconds=round(self.lockstep_seconds, 6))
            self._in_lockstep = fresh
        return fresh

    def warm(self, cycle) -> None:
        """The device backend's kernels; and the loop's pace, which ``clock = "auto"`` follows (warm comes
        before configure)."""
        super().warm(cycle)
        self.paced = bool(cycle.loop.pace)
