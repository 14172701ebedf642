"""An emulated MicroStrain 3DM-GX5-25 class IMU speaking MIP on a pseudo-terminal, in its own process.

Run as::

    rtctl-hil mip-imu [--truth NAME] [--rate-noise ...] [--corrupt-from K --corrupt-count N] ...

It opens a pty, prints ``PORT /dev/pts/N`` once ready, answers the base and 3DM commands as
:mod:`hil.mip_device` says, and streams its IMU message on its own clock: base-rate ticks of the device's
crystal (``--clock-drift-ppm`` from the host's monotonic clock), whatever the master sends or reads. A tick
where a field of the message format is due samples the truth, applies the datasheet's errors
(:mod:`hil.imu_noise`) and queues the packet, which leaves ``--latency`` s later. Bytes the master does not
read fill the pty and are then dropped and counted, as a UART with no listener loses them. On SIGTERM,
SIGHUP or SIGINT it prints one ``STATS {json}`` line and exits.

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
import struct
import subprocess
import sys
import time
import tty

import numpy as np

from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip.driver import WORLD_FROM_NED
from rtctl.model import quaternion_to_matrix, rpy_to_matrix
from rtctl.options import Parser, argument_type
from rtctl.rt.signals import on_stop_signals

from .imu_noise import G0, GX5_25, AxisErrors, ImuDatasheet, SensorErrors
from .mip_device import Identity, MipDevice
from .truth_feed import ACC, GRAVITY, OMEGA, QUAT, SIZE, TruthFeed

IDLE_WAIT = 0.05    # s the loop sleeps at most when nothing is due
MAX_LAG = 0.1       # s behind its clock after which the emulator skips ticks instead of bursting them out


def _quat_mul(a, b):
    """Hamilton product of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)


NED_FROM_WORLD = (-WORLD_FROM_NED[0], -WORLD_FROM_NED[1], -WORLD_FROM_NED[2], WORLD_FROM_NED[3])


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
    """Truth in, the device's measurements out (SI in the sensor frame, then MIP units)."""

    def __init__(self, truth, datasheet: ImuDatasheet, seed: int = 0):
        self.truth = truth
        rng = np.random.default_rng(seed)
        self.accel = SensorErrors(datasheet.accel, rng)
        self.gyro = SensorErrors(datasheet.gyro, rng)
        self._truth = np.zeros(SIZE)
        self._f = np.zeros(3)
        self._w = np.zeros(3)
        self.accel_g = np.zeros(3)
        self.gyro_rad_s = np.zeros(3)
        self.quaternion_ned = (1.0, 0.0, 0.0, 0.0)
        self.truth_misses = 0

    def sample(self, dt: float) -> None:
        """One measurement averaged over ``dt`` seconds, from the newest truth."""
        t = self._truth
        if self.truth.read(t) < 0:
            self.truth_misses += 1
        q = t[QUAT:QUAT + 4]
        r = quaternion_to_matrix(q)
        np.dot(r.T, t[ACC:ACC + 3] - t[GRAVITY:GRAVITY + 3], out=self._f)
        np.dot(r.T, t[OMEGA:OMEGA + 3], out=self._w)
        self.accel.apply(self._f, dt, self.accel_g)
        self.accel_g /= G0
        self.gyro.apply(self._w, dt, self.gyro_rad_s)
        x, y, z, w = _quat_mul(NED_FROM_WORLD, tuple(q))
        self.quaternion_ned = (w, x, y, z) if w >= 0 else (-w, -x, -y, -z)

    def field(self, descriptor: int, dt: float, device_time: float) -> bytes:
        if descriptor == P.SCALED_ACCEL:
            return P.field(descriptor, struct.pack(">3f", *self.accel_g))
        if descriptor == P.SCALED_GYRO:
            return P.field(descriptor, struct.pack(">3f", *self.gyro_rad_s))
        if descriptor == P.DELTA_THETA:
            return P.field(descriptor, struct.pack(">3f", *(self.gyro_rad_s * dt)))
        if descriptor == P.DELTA_VELOCITY:
            return P.field(descriptor, struct.pack(">3f", *(self.accel_g * dt)))
        if descriptor == P.COMP_QUATERNION:
            return P.field(descriptor, struct.pack(">4f", *self.quaternion_ned))
        week, tow = divmod(device_time, P.SECONDS_PER_WEEK)
        return P.field(P.GPS_TIMESTAMP, struct.pack(">dHH", tow, int(week), 0))


class Emulator:
    """The device on the master side of a pty: command replies, and the stream on the device's clock."""

    def __init__(self, identity: Identity, imu: ImuModel, latency: float, clock_drift_ppm: float = 0.0,
                 corrupt=(0, 0), nan_from: int = 0, capture=None):
        self.device = MipDevice(identity, self.poll)
        self.identity, self.imu, self.latency = identity, imu, latency
        self.rate_scale = 1.0 + clock_drift_ppm * 1e-6     # device seconds per host second
        self.corrupt_from, self.corrupt_count = corrupt
        self.nan_from = nan_from
        self.capture = capture
        self.splitter = P.PacketSplitter()
        self.pending = collections.deque()                # (host time to send, bytes)
        self.t0 = time.monotonic()
        self.tick = 0
        self.stats = dict(commands=0, nacks=0, data_packets=0, corrupted=0, nan_packets=0, dropped_bytes=0,
                          corrupt_commands=0, sent_bytes=0, lag_skips=0)

    def device_time(self, host: float) -> float:
        return (host - self.t0) * self.rate_scale

    def host_time(self, tick: int) -> float:
        return self.t0 + tick / self.identity.base_rate / self.rate_scale

    def poll(self, descriptors) -> bytes:
        dt = self._period()
        self.imu.sample(dt)
        now = self.device_time(time.monotonic())
        return P.packet(P.SENSOR_DATA_SET, *(self.imu.field(d, dt, now) for d in descriptors))

    def _period(self) -> float:
        fmt = self.device.settings.imu_format
        return (min(n for _, n in fmt) if fmt else 1) / self.identity.base_rate

    def on_bytes(self, data: bytes) -> list[bytes]:
        self._record("rx", data)
        before = self.splitter.corrupt
        out = []
        for descriptor_set, fields in self.splitter.feed(data):
            out.extend(self.device.handle(descriptor_set, fields))
        self.stats["corrupt_commands"] += self.splitter.corrupt - before
        return out

    def due(self, now: float) -> None:
        """Queue the data packets of every base-rate tick up to host time ``now``."""
        base = self.identity.base_rate
        behind = now - self.host_time(self.tick + 1)
        if behind > MAX_LAG:          # the process was stopped or starved: those samples are lost
            skipped = int(behind * base * self.rate_scale)
            self.tick += skipped
            self.stats["lag_skips"] += skipped
        while self.host_time(self.tick + 1) <= now:
            self.tick += 1
            if not self.device.streaming:
                continue
            fields = [d for d, n in self.device.settings.imu_format if self.tick % n == 0]
            if fields:
                dt = self._period()
                self.imu.sample(dt)
                device_time = self.tick / base
                self.pending.append((self.host_time(self.tick) + self.latency, self._data_packet(fields, dt,
                                                                                                 device_time)))

    def _data_packet(self, fields, dt: float, device_time: float) -> bytes:
        self.stats["data_packets"] += 1
        k = self.stats["data_packets"]
        if self.nan_from and k >= self.nan_from:
            self.imu.gyro_rad_s[0] = np.nan
            self.stats["nan_packets"] += 1
        data = bytearray(P.packet(P.SENSOR_DATA_SET, *(self.imu.field(d, dt, device_time) for d in fields)))
        if self.corrupt_count and self.corrupt_from <= k < self.corrupt_from + self.corrupt_count:
            data[-1] ^= 0xFF
            self.stats["corrupted"] += 1
        return bytes(data)

    def next_event(self) -> float:
        t = self.host_time(self.tick + 1)
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
                    truth_misses=self.imu.truth_misses, ticks=self.tick)


def serve(emulator: Emulator, master: int, stopping) -> None:
    """The emulator's loop until ``stopping()``: commands answered as they come, data on the device's clock."""
    while not stopping():
        now = time.monotonic()
        emulator.due(now)
        while emulator.pending and emulator.pending[0][0] <= now:
            emulator.send(master, emulator.pending.popleft()[1])
        wait = min(max(0.0, emulator.next_event() - time.monotonic()), IDLE_WAIT)
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
            for reply in emulator.on_bytes(data):
                emulator.send(master, reply)


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
    ap.add_argument("--clock-drift-ppm", type=float, default=0.0, help="the device's clock against the host's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corrupt-from", type=argument_type("int", low=1), default=1, help="1-based data packet")
    ap.add_argument("--corrupt-count", type=argument_type("int", low=0), default=0)
    ap.add_argument("--nan-from", type=argument_type("int", low=0), default=0, help="1-based data packet; 0: never")
    ap.add_argument("--capture", default=None, help="JSON-lines file of every byte received and sent")
    return ap


def datasheet_from(args) -> ImuDatasheet:
    def errors(kind: str) -> AxisErrors:
        return AxisErrors(*(getattr(args, f"{kind}_{k}") for k in ("noise_density", "bias_instability",
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
        truth = TruthFeed(args.truth) if args.truth else StaticTruth(args.static_rpy, args.static_rate)
        imu = ImuModel(truth, datasheet_from(args), args.seed)
        capture = open(args.capture, "w") if args.capture else None
    except (OSError, ValueError) as exc:
        ap.exit(1, f"{prog}: error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    emulator = Emulator(identity, imu, args.latency, args.clock_drift_ppm, (args.corrupt_from, args.corrupt_count),
                        args.nan_from, capture)
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    fcntl.fcntl(master, fcntl.F_SETFL, fcntl.fcntl(master, fcntl.F_GETFL) | os.O_NONBLOCK)
    stopping = []
    on_stop_signals(lambda *a: stopping.append(1))
    print(f"PORT {os.ttyname(slave)}", flush=True)
    try:
        serve(emulator, master, lambda: bool(stopping))
    finally:
        print("STATS " + json.dumps(emulator.report()), flush=True)
        if capture is not None:
            capture.close()
    return 0


class MipImuProcess:
    """Start ``python -m rtctl.hil.mip_imu`` and wait for its port; ``stop()`` returns its STATS."""

    def __init__(self, *args: str, startup_timeout: float = 60.0):
        self.proc = subprocess.Popen([sys.executable, "-m", "rtctl.hil.mip_imu", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + startup_timeout
        self.port = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                self.port = line.split()[1]
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError(f"MIP IMU emulator did not start: {self.proc.stderr.read()[-2000:]}")
        self.stats = None

    def kill(self) -> None:
        """SIGKILL: the device is gone (no STATS)."""
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = 10.0) -> dict | None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        for line in (out or "").splitlines():
            if line.startswith("STATS "):
                self.stats = json.loads(line[6:])
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
