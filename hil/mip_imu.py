"""An emulated MicroStrain 3DM-GX5-25 class IMU speaking MIP on a pseudo-terminal, in its own process.

Run as::

    rtctl-hil mip-imu [--truth NAME] [--rate-noise ...] [--corrupt-from K --corrupt-count N] ...

It opens a pty, prints ``PORT /dev/pts/N`` once ready, answers the base and 3DM commands as
:mod:`hil.mip_device` says, and streams its IMU message on its own clock: base-rate ticks of the device's
crystal (``--clock-drift-ppm`` from the host's monotonic clock or, with ``--clock plant``, from the simulated
plant's time the truth feed carries: :mod:`hil.device_clock` says why), whatever the master sends or reads. A
tick where a field of the message format is due samples the truth (on the plant's clock, the plant step the
tick falls on), applies the datasheet's errors (:mod:`hil.imu_noise`) and queues the packet, which leaves
``--latency`` s later on the same clock. Bytes the master does not read fill the pty and are then dropped and
counted, as a UART with no listener loses them. On SIGTERM, SIGHUP or SIGINT it prints one ``STATS {json}``
line and exits; so it does, unlinking the truth block, once the process ``--parent`` names is gone
(:mod:`hil.emulator_child`).

The truth is a :class:`hil.truth_feed.TruthFeed` (``--truth NAME``: the sensor frame's pose, velocities and
acceleration, written by the loop process each plant step), or without one a device at rest with the
attitude ``--static-rpy`` in the z-up world (default: upright as it sits on a table, its z axis down) and
the body rate ``--static-rate``. Fields: scaled accelerometer (g) and gyro (rad/s), delta theta and delta
velocity (the message period's sample times the period), the orientation quaternion (the true attitude in
NED, the emulator's filter being perfect) and the GPS timestamp (internal time: week and time of week of the
device clock since power-on, valid flags 0). Faults: ``--corrupt-from K --corrupt-count N`` (data packets
K..K+N-1 with a wrong checksum), ``--nan-from K`` (gyro x NaN from data packet K). ``--capture FILE`` writes
every byte received and sent as JSON lines ``{"t", "dir": "rx"|"tx", "hex"}``.
"""
from __future__ import annotations

import argparse
import collections
import errno
import fcntl
import json
import math
import os
import select
import sys
import time
import tty

import numpy as np

from rtctl.drivers.mip import protocol as P
from rtctl.model import rpy_to_matrix
from rtctl.options import Parser, argument_type
from rtctl.rt.signals import on_stop_signals

from .device_clock import WallClock, add_clock_arguments, clock_from
from .imu_noise import DRAWS, G0, GX5_25, AxisErrors, ImuDatasheet, SensorErrors
from .mip_device import IMU_FIELDS, Identity, MipDevice
from .mip_sample import M_ACCEL, M_GYRO, M_SIZE, MAX_DATA_PACKET, NED_FROM_WORLD, measure, pack_data
from .truth_feed import GRAVITY, OMEGA, QUAT, SIZE, TruthFeed
from .emulator_child import EmulatorChild, add_parent_argument, orphan_check, say


class StaticTruth:
    """A device at rest: attitude ``rpy`` in the world, body rate ``rate`` (rad/s, sensor axes)."""

    def __init__(self, rpy=(math.pi, 0.0, 0.0), rate=(0.0, 0.0, 0.0)):
        r = rpy_to_matrix(rpy)
        from rtctl.dynamics.spatial import matrix_quaternion
        self.sample = np.zeros(SIZE)
        self.sample[QUAT:QUAT + 4] = matrix_quaternion(tuple(r.ravel()))
        self.sample[OMEGA:OMEGA + 3] = r @ np.asarray(rate, dtype=float)
        self.sample[GRAVITY:GRAVITY + 3] = (0.0, 0.0, -G0)

    def read(self, out) -> int:
        out[:] = self.sample
        return 2


class ImuModel:
    """Truth in, the device's measurements out (SI in the sensor frame, then MIP units), compiled
    (:mod:`hil.mip_sample`)."""

    def __init__(self, truth, datasheet: ImuDatasheet, seed: int = 0):
        self.truth = truth
        self.rng = np.random.default_rng(seed)
        self.accel = SensorErrors(datasheet.accel, self.rng)      # turn-on biases drawn: accelerometer first
        self.gyro = SensorErrors(datasheet.gyro, self.rng)
        self._truth = np.zeros(SIZE)
        self._draws = np.zeros(2 * DRAWS)
        self._force, self._rate = np.zeros(3), np.zeros(3)
        self.measurement = np.zeros(M_SIZE)
        self.accel_g = self.measurement[M_ACCEL:M_ACCEL + 3]
        self.gyro_rad_s = self.measurement[M_GYRO:M_GYRO + 3]
        self._packet = np.zeros(MAX_DATA_PACKET, dtype=np.uint8)
        self._f32 = np.zeros(1, dtype=np.float32)
        self._f64 = np.zeros(1, dtype=np.float64)
        self._descriptors: dict[tuple, np.ndarray] = {}
        self.truth_misses = 0

    def sample(self, dt: float, at: float | None = None) -> None:
        """One measurement averaged over ``dt`` seconds, from the newest truth or, ``at`` a plant time, from the
        plant step it falls on."""
        t = self._truth
        if (self.truth.read(t) if at is None else self.truth.read_at(at, t)) < 0:
            self.truth_misses += 1
        self.rng.standard_normal(out=self._draws)
        measure(t, dt, NED_FROM_WORLD, self.accel.row, self.accel.state, self.gyro.row, self.gyro.state,
                self._draws, self.measurement, self._force, self._rate)

    def warm(self) -> None:
        """Load the compiled sample and packet kernels (from numba's cache) on scratch copies, before the device
        announces its port: the first sample of a run is not late by their loading."""
        measure(np.zeros(SIZE), 0.002, NED_FROM_WORLD, self.accel.row, self.accel.state.copy(), self.gyro.row,
                self.gyro.state.copy(), self._draws.copy(), np.zeros(M_SIZE), np.zeros(3), np.zeros(3))
        f32, f64 = np.zeros(1, dtype=np.float32), np.zeros(1)
        pack_data(np.array(IMU_FIELDS, dtype=np.int64), np.zeros(M_SIZE), 0.002, 0.0, 0,
                  np.zeros(MAX_DATA_PACKET, dtype=np.uint8), f32, f32.view(np.uint32), f64, f64.view(np.uint64))

    def packet(self, descriptors, dt: float, device_time: float) -> bytes:
        """The IMU data packet of the newest measurement with the fields ``descriptors``."""
        key = tuple(descriptors)
        fields = self._descriptors.get(key)
        if fields is None:
            fields = self._descriptors[key] = np.array(key, dtype=np.int64)
        week, tow = divmod(device_time, P.SECONDS_PER_WEEK)
        n = pack_data(fields, self.measurement, dt, tow, int(week), self._packet, self._f32,
                      self._f32.view(np.uint32), self._f64, self._f64.view(np.uint64))
        return self._packet[:n].tobytes()


class Emulator:
    """The device on the master side of a pty: command replies, and the stream on the device's clock
    (:mod:`hil.device_clock`: the host's, or the simulated plant's time)."""

    def __init__(self, identity: Identity, imu: ImuModel, latency: float, clock=None, corrupt=(0, 0),
                 nan_from: int = 0, capture=None):
        self.device = MipDevice(identity, self.poll)
        self.identity, self.imu, self.latency = identity, imu, latency
        self.clock = WallClock() if clock is None else clock
        self.corrupt_from, self.corrupt_count = corrupt
        self.nan_from = nan_from
        self.capture = capture
        self.splitter = P.PacketSplitter()
        self.pending = collections.deque()                # (device time to send, bytes)
        self.t0, self.cpu0 = time.monotonic(), time.process_time()
        self.tick = None         # the newest base-rate tick, counted from power-on; None: the clock has not run
        self.last_time = -math.inf
        self.stats = dict(commands=0, nacks=0, data_packets=0, corrupted=0, nan_packets=0, dropped_bytes=0,
                          corrupt_commands=0, sent_bytes=0, lag_skips=0, clock_restarts=0)

    def tick_time(self, tick: int) -> float:
        return tick / self.identity.base_rate

    def poll(self, descriptors) -> bytes:
        dt = self._period()
        now = self.clock.now() or 0.0
        self.imu.sample(dt, self.clock.truth_time(now))
        return self.imu.packet(descriptors, dt, now)

    def _period(self) -> float:
        fmt = self.device.settings.imu_format
        return (min(n for _, n in fmt) if fmt else 1) / self.identity.base_rate

    def on_bytes(self, data: bytes) -> list[bytes]:
        """The packets to send for bytes from the master: the replies, then, when they (re)started the stream on
        a clock that primes it, the stream's first sample (:meth:`_prime`)."""
        self._record("rx", data)
        before, streaming = self.splitter.corrupt, self.device.streaming
        out = []
        for descriptor_set, fields in self.splitter.feed(data):
            out.extend(self.device.handle(descriptor_set, fields))
        self.stats["corrupt_commands"] += self.splitter.corrupt - before
        now = self.clock.now() if self.clock.primes and self.device.streaming and not streaming else None
        if now is not None:
            out.append(self._prime(now))
        return out

    def _start(self, now: float) -> None:
        """The ticks start at ``now``: power-on, or a plant whose time went back (it was reset)."""
        if self.tick is not None:
            self.stats["clock_restarts"] += 1
        self.tick = math.floor(now * self.identity.base_rate + 1e-6)
        self.pending.clear()

    def due(self, now: float) -> None:
        """Queue the data packets of every base-rate tick up to device time ``now``."""
        if self.tick is None or now < self.last_time - 1e-9:
            self._start(now)
        self.last_time = now
        base = self.identity.base_rate
        behind = now - self.tick_time(self.tick + 1)
        if behind > self.clock.max_lag:          # the process was stopped or starved: those samples are lost
            skipped = int(behind * base)
            self.tick += skipped
            self.stats["lag_skips"] += skipped
        while self.tick_time(self.tick + 1) <= now + 1e-9:
            self.tick += 1
            if not self.device.streaming:
                continue
            fields = [d for d, n in self.device.settings.imu_format if self.tick % n == 0]
            if fields:
                dt = self._period()
                device_time = self.tick_time(self.tick)
                self.imu.sample(dt, self.clock.truth_time(device_time))
                self.pending.append((device_time + self.latency, self._data_packet(fields, dt, device_time)))

    def _prime(self, now: float) -> bytes:
        """The data packet that (re)starts the stream on a clock that primes it, behind the command's reply: the
        sample of its newest tick, of every field of the format, from the truth at ``now``, the plant's time when
        the command came (it stands still until the master has the reply)
        (:attr:`hil.device_clock.PlantTimeClock.primes` says why). The ticks up to ``now`` are passed."""
        if self.tick is None or now < self.last_time - 1e-9:
            self._start(now)
        fmt = self.device.settings.imu_format
        every = min(n for _, n in fmt)
        tick = math.floor(now * self.identity.base_rate / every + 1e-6) * every
        self.tick = max(self.tick, tick)
        dt, device_time = self._period(), self.tick_time(tick)
        self.imu.sample(dt, self.clock.truth_time(now))
        return self._data_packet([d for d, _ in fmt], dt, device_time)

    def _data_packet(self, fields, dt: float, device_time: float) -> bytes:
        self.stats["data_packets"] += 1
        k = self.stats["data_packets"]
        if self.nan_from and k >= self.nan_from:
            self.imu.gyro_rad_s[0] = np.nan
            self.stats["nan_packets"] += 1
        data = bytearray(self.imu.packet(fields, dt, device_time))
        if self.corrupt_count and self.corrupt_from <= k < self.corrupt_from + self.corrupt_count:
            data[-1] ^= 0xFF
            self.stats["corrupted"] += 1
        return bytes(data)

    def next_event(self) -> float:
        t = self.tick_time((self.tick or 0) + 1)
        return min(t, self.pending[0][0]) if self.pending else t

    def _record(self, direction: str, data: bytes) -> None:
        if self.capture is not None and data:
            self.capture.write(json.dumps({"t": round(time.monotonic() - self.t0, 6), "dir": direction,
                                           "hex": data.hex()}) + "\n")
            self.capture.flush()

    def send(self, fd: int, data: bytes) -> None:
        self._record("tx", data)
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            if exc.errno != errno.EIO:     # EIO: nobody holds the pty's other end
                raise
            sent = 0
        self.stats["sent_bytes"] += sent
        self.stats["dropped_bytes"] += len(data) - sent

    def report(self) -> dict:
        return dict(self.stats, commands=self.device.commands, nacks=self.device.nacks,
                    truth_misses=self.imu.truth_misses, ticks=self.tick or 0,
                    cpu_seconds=round(time.process_time() - self.cpu0, 4),       # serving, since it started
                    wall_seconds=round(time.monotonic() - self.t0, 4))


def serve(emulator: Emulator, master: int, stopping) -> None:
    """The emulator's loop until ``stopping()``: commands answered as they come, data on the device's clock."""
    clock = emulator.clock
    while not stopping():
        now = clock.now()
        if now is not None:
            emulator.due(now)
            while emulator.pending and emulator.pending[0][0] <= now + 1e-9:
                emulator.send(master, emulator.pending.popleft()[1])
        wait = clock.wait(emulator.next_event(), clock.now())
        try:
            readable = select.select((master,), (), (), wait)[0]
        except InterruptedError:
            continue
        if readable:
            try:
                data = os.read(master, 4096)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:     # the master closed its end; wait for the next open
                    time.sleep(wait)
                    continue
                raise
            replies = emulator.on_bytes(data)
            if replies:
                emulator.send(master, b"".join(replies))     # one write: the master reads them together


def _floats(n: int):
    def parse(text: str):
        try:
            values = [float(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {n} comma-separated numbers, got {text!r}") from None
        if len(values) != n:
            raise argparse.ArgumentTypeError(f"expected {n} comma-separated numbers, got {len(values)}")
        return values
    return parse


def build_parser(prog: str) -> argparse.ArgumentParser:
    ident, d = Identity(), GX5_25
    number, positive = argument_type("float", low=0.0), argument_type("float", positive=True)
    ap = Parser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("--truth", default=None, help="name of the TruthFeed shared memory block to measure")
    ap.add_argument("--static-rpy", type=_floats(3), default=[math.pi, 0.0, 0.0],
                    help="rad, the device's attitude in the world without --truth (default pi,0,0: upright)")
    ap.add_argument("--static-rate", type=_floats(3), default=[0.0, 0.0, 0.0],
                    help="rad/s, its body rate without --truth")
    ap.add_argument("--model-name", default=ident.model_name)
    ap.add_argument("--model-number", default=ident.model_number)
    ap.add_argument("--serial-number", default=ident.serial_number)
    ap.add_argument("--firmware-version", type=int, default=ident.firmware_version, help="e.g. 1108 for 1.1.08")
    ap.add_argument("--base-rate", type=argument_type("int", positive=True, high=65535), default=ident.base_rate)
    for kind, e in (("accel", d.accel), ("gyro", d.gyro)):
        unit, unit_s = ("m/s^2", "m/s^2") if kind == "accel" else ("rad/s", "rad/s")
        ap.add_argument(f"--{kind}-noise-density", type=number, default=e.noise_density, help=f"{unit}/sqrt(Hz)")
        ap.add_argument(f"--{kind}-bias-instability", type=number, default=e.bias_instability, help=unit_s)
        ap.add_argument(f"--{kind}-initial-bias", type=number, default=e.initial_bias, help=f"{unit}, sigma")
        ap.add_argument(f"--{kind}-random-walk", type=number, default=e.random_walk, help=f"{unit}/sqrt(s)")
        ap.add_argument(f"--{kind}-resolution", type=number, default=e.resolution, help=unit)
        ap.add_argument(f"--{kind}-range", type=positive, default=e.range, help=unit)
    ap.add_argument("--latency", type=number, default=d.latency, help="s from sampling to sending")
    add_clock_arguments(ap, "--truth")
    add_parent_argument(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corrupt-from", type=argument_type("int", low=1), default=1, help="1-based data packet")
    ap.add_argument("--corrupt-count", type=argument_type("int", low=0), default=0)
    ap.add_argument("--nan-from", type=argument_type("int", low=0), default=0, help="1-based data packet; 0: never")
    ap.add_argument("--capture", default=None, help="JSON-lines file of every byte received and sent")
    return ap


def datasheet_from(args) -> ImuDatasheet:
    def errors(kind: str) -> AxisErrors:
        return AxisErrors(*(vars(args)[f"{kind}_{k}"] for k in ("noise_density", "bias_instability",
                                                                    "initial_bias", "resolution", "range",
                                                                    "random_walk")))
    return ImuDatasheet(name=args.model_name, accel=errors("accel"), gyro=errors("gyro"), latency=args.latency)


def main(argv=None) -> int:
    prog = "rtctl-hil mip-imu"
    ap = build_parser(prog)
    args = ap.parse_args(argv)
    try:
        identity = Identity(args.model_name, args.model_number, args.serial_number, "", Identity().device_options,
                            args.firmware_version, args.base_rate)
        identity.info().encode()
        feed = TruthFeed(args.truth) if args.truth else None
        clock = clock_from(args, feed, "--truth")
        truth = feed or StaticTruth(args.static_rpy, args.static_rate)
        imu = ImuModel(truth, datasheet_from(args), args.seed)
        imu.warm()
        capture = open(args.capture, "w") if args.capture else None
    except (OSError, ValueError) as exc:
        ap.exit(1, f"{prog}: error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    emulator = Emulator(identity, imu, args.latency, clock, (args.corrupt_from, args.corrupt_count), args.nan_from,
                        capture)
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    fcntl.fcntl(master, fcntl.F_SETFL, fcntl.fcntl(master, fcntl.F_GETFL) | os.O_NONBLOCK)
    stopping = []
    on_stop_signals(lambda *a: stopping.append(1))
    orphaned = orphan_check(args.parent)
    try:
        say(f"PORT {os.ttyname(slave)}")
        serve(emulator, master, lambda: bool(stopping) or orphaned())
    finally:
        if orphaned() and feed is not None:     # its creator was killed: nobody else will remove the block
            feed.close(unlink=True)
        say("STATS " + json.dumps(emulator.report()))
        if capture is not None:
            capture.close()
    return 0


class MipImuProcess(EmulatorChild):
    """``python -m rtctl.hil.mip_imu ARGS``: its pty is :attr:`port`."""

    module, what = "rtctl.hil.mip_imu", "the MIP IMU emulator"

    def __init__(self, *args: str, **keywords):
        super().__init__(*args, **keywords)
        self.port = self.announced[0]


if __name__ == "__main__":
    sys.exit(main())
