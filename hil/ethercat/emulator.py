"""The emulated slave line as a process on one end of a network link: a raw ``AF_PACKET`` socket bound to
EtherType 0x88A4 on ``--interface``, each EtherCAT frame that arrives run through the line and sent back out
of the same interface, as the last slave's closed port 1 returns it to the master (ETG.1000.4: the frame
processed on its way out, forwarded unchanged on its way back). The returned frame's source address has bit 1
of its first byte set (locally administered), as an ESC's port 0 marks it, so a master tells it from its own.

Run: ``python -m rtctl.hil.ethercat --interface IFACE --slaves N`` (root or CAP_NET_RAW; see ``--help``). It
prints ``READY`` once the socket is bound and runs until SIGTERM, SIGHUP or Ctrl-C (within one poll, 5 ms),
then prints ``STATS {json}``: frame counters and each slave's state, AL status code and last outputs.
"""
from __future__ import annotations

import json
import random
import select
import socket
import sys
import threading
import time

from rtctl.options import Parser, argument_type
from rtctl.rt.signals import on_stop_signals

from .chain import EscChain
from .esc import OP
from .frame import ETHERTYPE, LOGICAL, datagrams
from .sii import SlaveIdentity

ETHERNET_HEADER = 14
PACKET_OUTGOING = 4
LOCALLY_ADMINISTERED = 0x02
POLL_S = 0.005


def open_socket(interface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    sock.bind((interface, ETHERTYPE))
    sock.setblocking(False)
    return sock


class FrameFaults:
    """Faults on request: ``drop`` -- the probability that a process data frame (one with a logical command)
    is lost, never answered (bring-up frames are not: the line can be brought up first);
    ``wkc_offset`` -- added to the working counter of each logical datagram answered (process data miscounted)."""

    def __init__(self, drop: float = 0.0, wkc_offset: int = 0, seed: int = 0):
        self.drop = drop
        self.wkc_offset = wkc_offset
        self.random = random.Random(seed)
        self.dropped = 0

    def lose(self, payload: bytearray) -> bool:
        if self.drop and _has_logical(payload) and self.random.random() < self.drop:
            self.dropped += 1
            return True
        return False

    def miscount(self, payload: bytearray) -> None:
        if self.wkc_offset:
            for d in datagrams(payload):
                if d.command in LOGICAL:
                    d.wkc = d.wkc + self.wkc_offset


class DriveFault:
    """A fault on request on the emulator's own clock: the drive at ``position`` faults with error ``code`` (its
    fault reaction, its EMCY in the slave's mailbox) once its slave has been in OP for ``after`` s."""

    def __init__(self, position: int, code: int, after: float):
        self.position, self.code, self.after = position, code, after
        self.since = None
        self.done = False

    def check(self, chain: EscChain, now: float) -> None:
        esc = chain.slaves[self.position]
        if self.done or esc.state != OP:
            return
        if self.since is None:
            self.since = now
        elif now - self.since >= self.after:
            esc.application.fault(self.code, now)
            self.done = True


def _has_logical(payload: bytearray) -> bool:
    try:
        return any(d.command in LOGICAL for d in datagrams(payload))
    except ValueError:
        return False


def serve(sock: socket.socket, chain: EscChain, stop: threading.Event, poll: float = POLL_S,
          clock=time.monotonic, faults: FrameFaults | None = None, drive_fault: DriveFault | None = None) -> None:
    """Answer frames on ``sock`` until ``stop`` is set: each frame sent back once through the line, then the
    slaves' PDIs run (they run between frames too)."""
    faults = faults or FrameFaults()
    while not stop.is_set():
        ready, _, _ = select.select([sock], [], [], poll)
        now = clock()
        if drive_fault is not None:
            drive_fault.check(chain, now)
        if not ready:
            chain.tick(now)
            continue
        while True:
            try:
                raw, address = sock.recvfrom(2048)
            except BlockingIOError:
                break
            if address[2] == PACKET_OUTGOING or len(raw) < ETHERNET_HEADER + 2:
                continue
            now = clock()                  # each frame passes the line when it is taken, not at the wake-up
            frame = bytearray(raw)
            if int.from_bytes(frame[12:14], "big") != ETHERTYPE:
                continue
            payload = frame[ETHERNET_HEADER:]
            if faults.lose(payload) or not chain.process(payload, now, pdi=False):
                continue
            faults.miscount(payload)
            frame[ETHERNET_HEADER:] = payload
            frame[6] |= LOCALLY_ADMINISTERED
            sock.send(frame)
            chain.tick(now)


def integer(text: str) -> int:
    """A command-line integer, decimal or 0x-prefixed hexadecimal (as vendor ids are written)."""
    return int(text, 0)


def main(argv=None, prog="python -m rtctl.hil.ethercat") -> int:
    p = Parser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--interface", required=True, help="the network interface the master's frames arrive on")
    p.add_argument("--slaves", type=argument_type("int", positive=True), default=None,
                   help="slaves in the line (default 1; with --robot one per actuated joint)")
    p.add_argument("--robot", default=None, help="drive this robot (as [robot] model names it, e.g. can_arm2) "
                   "with the CAN emulator's CiA 402 drive model; without it each slave follows its target")
    p.add_argument("--ratio", type=argument_type("float", positive=True), default=10.0,
                   help="with --robot: gear ratio, motor turns per joint turn (the drives declare it in 0x6091)")
    p.add_argument("--initial", nargs="+", type=argument_type("float"), default=None, metavar="Q",
                   help="with --robot: the joints' initial positions (rad or m, one per actuated joint)")
    p.add_argument("--rated-torque", nargs="+", type=argument_type("float", positive=True), default=None,
                   metavar="NM", help="with --robot: each drive's rated torque 0x6076, N m at the motor (one for "
                   "all, or one per joint; default 1): the torque's resolution is a thousandth of it")
    p.add_argument("--mjcf", default=None, help="with --robot: MuJoCo simulates this MJCF (or URDF) file of the "
                   "robot instead of rtctl's rigid-body plant (the mujoco extra)")
    p.add_argument("--vendor-id", type=integer, default=0x00000F3E, help="SII vendor id")
    p.add_argument("--product-code", type=integer, default=0x00000402, help="SII product code")
    p.add_argument("--revision", type=integer, default=0x00010000, help="SII revision number")
    p.add_argument("--name", default="rtctl emulated CiA 402 drive", help="the device name (SII string 1)")
    p.add_argument("--drop", type=argument_type("float", low=0.0, high=1.0), default=0.0,
                   help="fault: probability that a process data frame is lost")
    p.add_argument("--wkc-offset", type=int, default=0, help="fault: added to each process data working counter")
    p.add_argument("--not-mappable", type=integer, default=None, metavar="INDEX",
                   help="fault: no slave maps object INDEX into a PDO (an entry naming it is aborted, 0x06040041)")
    p.add_argument("--refuse-op", nargs=2, type=integer, default=None, metavar=("POSITION", "CODE"),
                   help="fault: the slave at POSITION (0 first) stays in SAFE-OP, refusing OP with AL status CODE")
    p.add_argument("--drive-fault", nargs=3, default=None, metavar=("POSITION", "CODE", "SECONDS"),
                   help="fault: the drive at POSITION faults with error CODE (e.g. 0x2310) once its slave has been "
                   "in OP for SECONDS, sending its EMCY")
    p.add_argument("--late-sync0", nargs=2, type=integer, default=None, metavar=("POSITION", "COUNT"),
                   help="fault: the slave at POSITION takes its first COUNT SYNC0 activations 150 ms late, as from "
                   "a master held off past its start time (no SYNC0 until activated again in time)")
    p.add_argument("--clock-drift", type=argument_type("float", low=-1000.0, high=1000.0), default=0.0,
                   metavar="PPM", help="the slaves' clocks run PPM fast against the host's (distributed clocks)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not args.name.isascii() or len(args.name) > 255:
        p.error(f"--name must be ASCII of at most 255 characters, not {args.name!r}")
    identity = SlaveIdentity(args.vendor_id, args.product_code, args.revision, 0, args.name)
    axes = None
    if args.robot:
        from .drive_axis import drive_axes
        try:
            axes = drive_axes(args.robot, args.ratio, args.initial, args.mjcf, args.rated_torque)
        except Exception as exc:  # noqa: BLE001  (a bad robot or model file: one line)
            p.exit(1, f"{prog}: error: robot {args.robot!r}: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
        if args.slaves not in (None, len(axes)):
            p.error(f"--slaves {args.slaves}: robot {args.robot!r} has {len(axes)} actuated joints, one slave each")
    elif args.initial or args.mjcf or args.rated_torque:
        p.error("--initial, --mjcf and --rated-torque need --robot")
    args.slaves = len(axes) if axes else args.slaves or 1
    chain = EscChain.cia402(args.slaves, identity, time.monotonic(), applications=axes, drift_ppm=args.clock_drift)
    if args.not_mappable is not None:
        for esc in chain.slaves:
            obj = esc.dictionary.objects.get(args.not_mappable)
            if obj is None:
                p.error(f"--not-mappable: the slaves have no object 0x{args.not_mappable:04X}")
            for entry in obj.entries.values():
                entry.mappable = False
    if args.refuse_op:
        position, code = args.refuse_op
        if not 0 <= position < args.slaves:
            p.error(f"--refuse-op: slave position {position} is not in the line (0..{args.slaves - 1})")
        if not 0 < code <= 0xFFFF:
            p.error(f"--refuse-op: AL status code {code:#x} is not in 0x0001..0xFFFF")
        chain.slaves[position].refuse_op_code = code
    if args.late_sync0:
        position, count = args.late_sync0
        if not 0 <= position < args.slaves or count < 1:
            p.error(f"--late-sync0: slave {position} (0..{args.slaves - 1}) and count {count} (>= 1) must both hold")
        chain.slaves[position].clock.late_activations = count
    drive_fault = None
    if args.drive_fault:
        try:
            position, code, after = integer(args.drive_fault[0]), integer(args.drive_fault[1]), \
                float(args.drive_fault[2])
        except ValueError:
            p.error(f"--drive-fault: {' '.join(args.drive_fault)!r} is not POSITION CODE SECONDS")
        if not 0 <= position < args.slaves or not 0 < code <= 0xFFFF or not 0 <= after < float("inf"):
            p.error(f"--drive-fault: slave {position} (0..{args.slaves - 1}), error code {code:#x} (0x0001..0xFFFF) "
                    f"and {after} s (finite, >= 0) must all hold")
        drive_fault = DriveFault(position, code, after)
    faults = FrameFaults(args.drop, args.wkc_offset, args.seed)
    try:
        sock = open_socket(args.interface)
    except OSError as exc:
        p.exit(1, f"{prog}: error: cannot open a raw socket on interface {args.interface!r} (needs root or "
                  f"CAP_NET_RAW and an existing interface): {exc}\n")
    stop = threading.Event()
    on_stop_signals(lambda *_: stop.set())
    print("READY", flush=True)
    try:
        serve(sock, chain, stop, faults=faults, drive_fault=drive_fault)
    finally:
        sock.close()
        print("STATS " + json.dumps(dict(chain.summary(), dropped=faults.dropped)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
