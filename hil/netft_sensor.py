"""An emulated ATI Net F/T with a Gamma transducer, in a process of its own on its own clock.

Run as::

    rtctl-hil netft-sensor [--feed NAME | --wrench TX,TY,TZ,FX,FY,FZ] [--rate 1000] [--host 127.0.0.1] ...

It serves RDT on a UDP port and the calibration on a TCP port of ``--host`` (loopback by default; ports 0, the
default: free ones the system picks, so that any number of emulators run side by side), prints
``PORT rdt=N tcp=M`` once ready, and on SIGTERM, SIGHUP or SIGINT one ``STATS {json}`` line (requests,
records sent, late ticks, biases, calibration reads), then exits 0; so it does, removing the feed, once the
process ``--parent`` names is gone (:mod:`rtctl.hil.emulator_child`).

The device, as its manual (document 9620-05-NET FT; :mod:`rtctl.drivers.netft.protocol`) describes it:

* RDT requests (sec. 10.1, Table 10.1): stop; start real-time streaming (one record per datagram) or buffered
  streaming (``--buffer`` records per datagram) of ``sample_count`` records (0: until stopped), at ``--rate``
  records per second (at most 7000), the first at once; set software bias (from then on the records read the
  load of that moment as zero); reset threshold latch (no thresholds here: nothing to reset). Records go to
  the address of the latest request (the device answers one client). ``rdt_sequence`` counts each request's
  records from 1, ``ft_sequence`` the device's samples since power-up at 7000 per second up to the record's
  tick; other datagrams are counted and ignored.
* The TCP interface (sec. 11): Read Calibration Info answers counts per force and per torque in N and N m.
* The status code (the manual's table): bit 17 (transducer saturation) with bit 31 while the load exceeds the
  transducer's range on some axis (the record then holds the range's end); ``--inject-status HEX@SECONDS``
  ORs a code into every record from that many seconds after power-up.

The transducer: ATI Gamma with calibration SI-130-10, as ATI's Gamma specifications list it: sensing ranges
Fx, Fy 130 N, Fz 400 N, Tx, Ty, Tz 10 N m; resolution Fx, Fy 1/40 N, Fz 1/20 N, Tx, Ty, Tz 1/800 N m. Each
record adds Gaussian noise with the resolution as its standard deviation (``--noise-scale`` times it) from a
seeded generator, then rounds to counts (1 000 000 per N and per N m, the calibration it reports).

The clock (``--clock``, :mod:`rtctl.hil.device_clock`): the host's, on which a wake-up late by more than
:data:`MAX_CATCH_UP` ticks sends that many and counts the rest late (lost, as a starved device loses them);
or, with a feed, the simulated plant's time, on which every tick is sent and device time is plant time (so
``ft_sequence / 7000`` is the plant time of the record's tick).

The load: ``--feed NAME`` reads the true wrench at the sensor from the loop's process through shared memory
(:mod:`rtctl.hil.wrench_feed`), ``--latency`` s old: on the host's clock the newest truth at least that old
when read, on the plant's the plant step ``--latency`` before the tick; ``--wrench`` holds a constant one
instead. Both are ``[torque; force]`` in the sensor's frame, N m and N.
"""
from __future__ import annotations

import argparse
import json
import math
import select
import socket
import sys
from collections import deque

import numpy as np

from rtctl.drivers.netft import protocol as P
from rtctl.options import Parser, argument_type
from rtctl.rt.signals import on_stop_signals

from .device_clock import add_clock_arguments, clock_from
from .emulator_child import EmulatorChild, add_parent_argument, orphan_check, say
from .wrench_feed import T, WIDTH, WRENCH, open_feed

LOOPBACK = "127.0.0.1"
# ATI Gamma, calibration SI-130-10 (ATI's Gamma specifications): Fx Fy Fz (N), Tx Ty Tz (N m).
GAMMA_SI_130_10 = {"name": "Gamma SI-130-10", "range": (130.0, 130.0, 400.0, 10.0, 10.0, 10.0),
                   "resolution": (1 / 40, 1 / 40, 1 / 20, 1 / 800, 1 / 800, 1 / 800),
                   "counts_per_force": 1_000_000, "counts_per_torque": 1_000_000}
RATE_HZ = 1000.0        # records per second unless --rate says otherwise
BUFFER = 4              # records per datagram of buffered streaming unless --buffer says otherwise
MAX_CATCH_UP = 8        # ticks sent at one wake-up after a late one; older ticks are skipped (counted late)


class NetFTDevice:
    """The device's behaviour without sockets: requests in, records out, at the device time ``now`` (s since
    power-up) the caller passes. ``catch_up``: ticks sent at most at one call, the older ones skipped and counted
    late (None: every tick sent, the plant's clock)."""

    def __init__(self, truth, rate_hz: float = 1000.0, buffer: int = 1, noise_scale: float = 1.0, seed: int = 0,
                 inject_status=None, spec=GAMMA_SI_130_10, catch_up: int | None = MAX_CATCH_UP):
        if not 0 < rate_hz <= P.INTERNAL_RATE_HZ:
            raise ValueError(f"rate must be in (0, {P.INTERNAL_RATE_HZ:g}] records per second, got {rate_hz}")
        self.truth, self.rate, self.buffer = truth, float(rate_hz), int(buffer)
        self.spec = spec
        self.counts_per_unit = np.array([spec["counts_per_force"]] * 3 + [spec["counts_per_torque"]] * 3, float)
        self.range = np.asarray(spec["range"], float)
        self.sigma = noise_scale * np.asarray(spec["resolution"], float)
        self.rng = np.random.default_rng(seed)
        self.inject_status = inject_status     # (code, seconds after power-up) or None
        self.catch_up = catch_up
        self.bias = np.zeros(6)
        self.client = None
        self.streaming = False
        self.remaining = 0          # records still to send of a finite request (0 with streaming: unlimited)
        self.rdt_sequence = 0
        self.stream_start = 0.0     # device time of the stream's first tick
        self.ticks = 0              # ticks of the stream passed (sent or skipped)
        self.last_now = -math.inf
        self.pending = []           # records of a buffered datagram not yet sent
        self.per_datagram = 1
        self.stats = {"requests": 0, "bad_requests": 0, "unsupported": 0, "records": 0, "datagrams": 0,
                      "late_ticks": 0, "biases": 0, "calibration_reads": 0, "saturated_records": 0,
                      "clock_restarts": 0}
        self._wrench = np.zeros(6)

    # -- requests -----------------------------------------------------------------------------------
    def request(self, data: bytes, sender, now: float) -> None:
        parsed = P.parse_rdt_request(data)
        if parsed is None:
            self.stats["bad_requests"] += 1
            return
        command, count = parsed
        self.stats["requests"] += 1
        self.client = sender
        if command == P.STOP:
            self.streaming, self.pending = False, []
        elif command in (P.START_REALTIME, P.START_BUFFERED):
            self.streaming, self.remaining, self.rdt_sequence = True, count, 0
            self.per_datagram = 1 if command == P.START_REALTIME else self.buffer
            self.pending, self.stream_start, self.ticks = [], now, 0
        elif command == P.SET_SOFTWARE_BIAS:
            self.bias[:] = self.sample(now)[1] + self.bias
            self.stats["biases"] += 1
        elif command != P.RESET_THRESHOLD_LATCH:
            self.stats["unsupported"] += 1

    # -- samples ------------------------------------------------------------------------------------
    def sample(self, now: float):
        """(status, F/T in counts less the bias) at device time ``now``: the load's truth in the transducer's
        axes (Fx .. Tz), the noise, the range and the rounding to counts."""
        torque_force = self._wrench
        self.truth(now, torque_force)
        load = np.concatenate([torque_force[3:], torque_force[:3]])    # Featherstone's [n; f] -> Fx .. Tz
        load = load + self.rng.standard_normal(6) * self.sigma
        status = 0
        over = np.abs(load) > self.range
        if over.any():
            status |= P.ERROR_SUMMARY | P.SATURATION
            self.stats["saturated_records"] += 1
            load = np.clip(load, -self.range, self.range)
        if self.inject_status is not None and now >= self.inject_status[1]:
            status |= self.inject_status[0]
        counts = np.round(load * self.counts_per_unit) - self.bias
        return status, counts

    def tick_time(self, tick: int) -> float:
        return self.stream_start + tick / self.rate

    def next_event(self) -> float:
        """Device time of the next tick (infinite while not streaming)."""
        return self.tick_time(self.ticks) if self.streaming else math.inf

    def due(self, now: float) -> list[bytes]:
        """The datagrams to send at ``now``: one record per tick of the rate up to ``now`` (at most
        ``catch_up``; the older ones skipped and counted late), grouped ``per_datagram`` to a datagram. Device
        time that went back (the plant was reset) restarts the stream's ticks there."""
        if now < self.last_now - 1e-9 and self.streaming:
            self.stream_start, self.ticks = now, 0
            self.stats["clock_restarts"] += 1
        self.last_now = now
        if not self.streaming:
            return []
        ticks = math.floor((now - self.stream_start) * self.rate + 1e-6) + 1 - self.ticks  # due, not yet passed
        if ticks <= 0:
            return []
        if self.catch_up is not None and ticks > self.catch_up:
            self.stats["late_ticks"] += ticks - self.catch_up
            self.ticks += ticks - self.catch_up
            ticks = self.catch_up
        out = []
        for _ in range(ticks):
            at = self.tick_time(self.ticks)
            self.ticks += 1
            status, counts = self.sample(at)
            self.rdt_sequence += 1
            ft_sequence = math.floor(at * P.INTERNAL_RATE_HZ + 1e-6)
            self.pending.append(P.pack_record(self.rdt_sequence, ft_sequence, status,
                                              np.clip(counts, -2**31, 2**31 - 1)))
            self.stats["records"] += 1
            if len(self.pending) >= self.per_datagram:
                out.append(b"".join(self.pending))
                self.pending = []
            if self.remaining:
                self.remaining -= 1
                if not self.remaining:
                    self.streaming = False
                    break
        if not self.streaming and self.pending:
            out.append(b"".join(self.pending))
            self.pending = []
        self.stats["datagrams"] += len(out)
        return out

    def calibration(self, command: bytes) -> bytes | None:
        """The answer to a TCP command (sec. 11): Read Calibration Info; None for anything else."""
        if len(command) != P.TCP_COMMAND_SIZE or command[0] != P.READCALINFO:
            return None
        self.stats["calibration_reads"] += 1
        return P.Calibration(2, 3, self.spec["counts_per_force"], self.spec["counts_per_torque"]).pack()


class ConstantTruth:
    """The wrench the emulated transducer feels: ``truth(device_time, out)``; this one a constant ``wrench``."""

    misses = 0       # samples the feed no longer held (none without a feed)

    def __init__(self, wrench):
        self.value = np.asarray(wrench, dtype=float)

    def __call__(self, now, out):
        out[:] = self.value


class FeedTruth(ConstantTruth):
    """The truth from the shared-memory feed on the host's clock: the newest wrench at least ``latency`` s old
    by the device's clock of when it was read."""

    def __init__(self, feed, latency: float):
        super().__init__(np.zeros(6))
        self.feed, self.latency = feed, latency
        self.sample = np.zeros(WIDTH)
        self.history = deque(maxlen=4096)

    def __call__(self, now, out):
        history, sample = self.history, self.sample
        self.feed.read(sample)
        t = sample[T]
        if t == t and (not history or history[-1][1] != t):
            history.append((now, t, sample[WRENCH:].copy()))
        while len(history) > 1 and history[1][0] <= now - self.latency:
            history.popleft()
        out[:] = history[0][2] if history else 0.0


class PlantTimeTruth(FeedTruth):
    """The truth from the shared-memory feed on the plant's clock: the plant step ``latency`` s before the tick
    (``now``, device time, is the plant's time by ``clock``); :attr:`misses` counts ticks the ring no longer
    held the step of (the newest taken instead)."""

    def __init__(self, feed, latency: float, clock):
        super().__init__(feed, latency)
        self.clock = clock

    def __call__(self, now, out):
        if self.feed.read_at(self.clock.truth_time(now) - self.latency, self.sample) < 0:
            self.misses += 1
        out[:] = self.sample[WRENCH:]


def serve(device: NetFTDevice, clock, udp: socket.socket, tcp: socket.socket, stopping) -> None:
    """Answer requests and send records on the device's ``clock`` until ``stopping()``."""
    while not stopping():
        wait = clock.wait(device.next_event(), clock.now())
        try:
            readable, _, _ = select.select([udp, tcp], [], [], wait)
        except InterruptedError:
            continue
        now = clock.now() or 0.0     # the plant's time before the loop process wrote any: its start
        if udp in readable:
            for _ in range(64):
                try:
                    data, sender = udp.recvfrom(2048)
                except BlockingIOError:
                    break
                device.request(data, sender, now)
        if tcp in readable:
            _answer_tcp(device, tcp)
        for datagram in device.due(now):
            try:
                udp.sendto(datagram, device.client)
            except OSError:
                device.stats["send_errors"] = device.stats.get("send_errors", 0) + 1


def _answer_tcp(device: NetFTDevice, tcp: socket.socket) -> None:
    try:
        conn, _ = tcp.accept()
    except BlockingIOError:
        return
    with conn:
        conn.settimeout(1.0)
        try:
            data = b""
            while len(data) < P.TCP_COMMAND_SIZE:
                chunk = conn.recv(P.TCP_COMMAND_SIZE - len(data))
                if not chunk:
                    break
                data += chunk
            answer = device.calibration(data)
            if answer is not None:
                conn.sendall(answer)
        except OSError:
            pass


def _status_injection(text: str):
    try:
        code, seconds = text.split("@")
        value = (int(code, 16), float(seconds))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HEX@SECONDS (e.g. 0x80000004@0.5), got {text!r}") from None
    if not 0 <= value[0] <= 0xFFFFFFFF or not value[1] >= 0:
        raise argparse.ArgumentTypeError(f"status 0..0xFFFFFFFF and seconds >= 0, got {text!r}")
    return value


def _wrench(text: str):
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 6 or not all(math.isfinite(x) for x in values):
        raise argparse.ArgumentTypeError(f"expected 6 finite numbers TX,TY,TZ,FX,FY,FZ, got {text!r}")
    return values


def main(argv=None) -> int:
    prog = "rtctl-hil netft-sensor"
    ap = Parser(prog=prog, description=__doc__.split("\n")[0])
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--feed", default=None, help="the shared-memory wrench feed's name (rtctl.hil.wrench_feed)")
    source.add_argument("--wrench", type=_wrench, default=None, help="a constant load TX,TY,TZ,FX,FY,FZ (N m, N)")
    ap.add_argument("--host", default=LOOPBACK, help="address to serve on (default 127.0.0.1)")
    ap.add_argument("--rdt-port", type=argument_type("int", low=0, high=65535), default=0)
    ap.add_argument("--tcp-port", type=argument_type("int", low=0, high=65535), default=0)
    ap.add_argument("--rate", type=argument_type("float", positive=True, high=P.INTERNAL_RATE_HZ), default=RATE_HZ,
                    help="records per second (at most 7000, the device's maximum)")
    ap.add_argument("--buffer", type=argument_type("int", low=1, high=P.MAX_RECORDS_PER_DATAGRAM), default=BUFFER,
                    help="records per datagram of buffered streaming")
    ap.add_argument("--latency", type=argument_type("float", low=0.0), default=0.0, help="s the load is late")
    ap.add_argument("--noise-scale", type=argument_type("float", low=0.0), default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inject-status", type=_status_injection, default=None, metavar="HEX@SECONDS")
    add_clock_arguments(ap, "--feed")
    add_parent_argument(ap)
    args = ap.parse_args(argv)
    feed = None
    try:
        feed = open_feed(args.feed) if args.feed else None
        clock = clock_from(args, feed, "--feed")
        truth = (ConstantTruth(args.wrench or [0.0] * 6) if feed is None else FeedTruth(feed, args.latency)
                 if args.clock == "wall" else PlantTimeTruth(feed, args.latency, clock))
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((args.host, args.rdt_port))
        tcp = socket.create_server((args.host, args.tcp_port))
    except (OSError, ValueError) as exc:
        ap.exit(1, f"{prog}: error: {exc}\n")
    udp.setblocking(False)
    tcp.setblocking(False)
    device = NetFTDevice(truth, args.rate, args.buffer, args.noise_scale, args.seed, args.inject_status,
                         catch_up=MAX_CATCH_UP if args.clock == "wall" else None)
    stopping = []
    on_stop_signals(lambda *a: stopping.append(1))
    orphaned = orphan_check(args.parent)
    try:
        say(f"PORT rdt={udp.getsockname()[1]} tcp={tcp.getsockname()[1]}")
        serve(device, clock, udp, tcp, lambda: bool(stopping) or orphaned())
    finally:
        if orphaned() and feed is not None:     # its creator was killed: nobody else will remove the block
            feed.close(unlink=True)
        say("STATS " + json.dumps(dict(device.stats, truth_misses=truth.misses,
                                       torn_retries=feed.torn_retries if feed is not None else 0)))
    return 0


class NetFTProcess(EmulatorChild):
    """``python -m rtctl.hil.netft_sensor ARGS``: its RDT (UDP) and calibration (TCP) ports are :attr:`rdt_port`
    and :attr:`tcp_port`."""

    module, what = "rtctl.hil.netft_sensor", "the Net F/T emulator"

    def __init__(self, *args: str, **keywords):
        super().__init__(*args, **keywords)
        fields = dict(item.split("=") for item in self.announced)
        self.rdt_port, self.tcp_port = int(fields["rdt"]), int(fields["tcp"])


if __name__ == "__main__":
    sys.exit(main())
