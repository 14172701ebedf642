"""Emulated CAN actuator firmware around one simulated plant: MIT-mode motors and CiA 402 drives.

The firmware behaviours live in :mod:`rtctl.hil.mit_firmware` (the mini-cheetah motor controller
firmware), :mod:`rtctl.hil.canopen_device` (CiA 301) and :mod:`rtctl.hil.cia402_drive` (CiA 402); this
module couples them to a :class:`plants.rigid_body.RigidBodyPlant` advanced in soft real time
(:class:`~rtctl.hil.plant_clock.PlantClock`: integrated to the wall clock whenever the emulator wakes, in
sub-steps of at most ``max_substep`` under the firmware's torques) and runs them as a process.

Fault injection (options): ``drop`` -- probability of not answering (a reply or TPDO frame lost),
``delay_reply=(n, seconds)`` -- the n-th answer is sent late (the firmware stalls), and for CiA 402 a
write of an error code to the manufacturer object 0x2001 (or ``fault_at_sync``) puts the drive into FAULT
with an EMCY message.

Run as a process: ``rtctl-hil can-emulator --protocol mit --channel ws://127.0.0.1:PORT/ --ids 1 2`` (or
``python -m rtctl.hil.can_emulator ...``; see ``--help``); it prints ``READY`` once on the bus and runs until
killed or SIGTERM, SIGHUP or Ctrl-C (within one poll, 5 ms), then prints its counters, its event log
(``events``: monotonic time and what happened, per motor / drive) and each actuator's final state (``final``:
torque it makes, mode / state) as one JSON line.
"""
from __future__ import annotations

import ipaddress
from fractions import Fraction
import json
import socket
import sys
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import can
import numpy as np

from rtctl.drivers.can import objects as ob
from rtctl.drivers.can.bus import shutdown_bus

from .cia402_drive import Cia402Drive
from rtctl.options import Parser, argument_type
from rtctl.rt.signals import on_stop_signals
from .mit_firmware import MitEmulator
from .plant_clock import Faults, PlantClock

DEFAULT_ROBOT = "can_arm2"    # as a run config names it: [robot] model = "can_arm2"
SAME_SYNC = 1e-6              # s: one SYNC however many drives ask (a SYNC0 pulse's time differs by ns per slave)
__all__ = ["Cia402Emulator", "MitEmulator", "PlantClock", "build_plant", "main", "run_in_thread"]


class Cia402Emulator:
    """CiA 402 drives (one per joint, node IDs ``node_ids``) around one plant, with gear ``ratio`` (motor turns
    per joint turn, each drive declaring it in 0x6091 as the nearest fraction of denominator <= 65536) and rated
    torque ``rated_torque_mnm`` (0x6076, mN m at the motor; one for all, or one per drive)."""

    def __init__(self, bus, plant, v_index, node_ids, ratio=10.0, rated_torque_mnm=1000, max_torque_permille=3000,
                 increments_per_rev=1 << 17, drop=0.0, delay_reply=None, seed=0, fault_at_sync=None):
        self.bus = bus
        n = len(node_ids)
        self.ratio = np.broadcast_to(np.asarray(ratio, dtype=float), (n,)).copy()
        self.clock = PlantClock(plant, v_index, self.ratio, torque_fn=self._torque)
        self.faults = Faults(drop, delay_reply, seed)
        self.syncs = 0
        self.unknown = 0
        self._msg = can.Message(arbitration_id=0, data=b"", is_extended_id=False)
        now = time.monotonic()
        self.drives = []
        rated = np.broadcast_to(np.asarray(rated_torque_mnm), (n,))
        inertia = load_inertia(plant, v_index, self.ratio)
        for k, i in enumerate(node_ids):
            gear = Fraction(abs(self.ratio[k])).limit_denominator(1 << 16)     # 0x6091, as the plant is geared
            od = ob.drive_object_dictionary(int(rated[k]), max_torque_permille, increments_per_rev,
                                            (gear.numerator, gear.denominator))
            d = Cia402Drive(i, od, self._send, now, load_inertia=inertia[k])
            d.transmit_pdo = self._transmit_pdo
            d.fault_at_sync = fault_at_sync
            self.drives.append(d)
        self._wake = now
        self._sampled_at = None

    @property
    def heartbeat_enabled(self) -> bool:
        return not any(d.heartbeat_muted for d in self.drives)

    @heartbeat_enabled.setter
    def heartbeat_enabled(self, on: bool) -> None:
        for d in self.drives:
            d.heartbeat_muted = not on

    def _send(self, cob, data):
        self.bus.send(can.Message(arbitration_id=cob, data=data, is_extended_id=False))

    def _transmit_pdo(self, cob, data):
        if self.faults.before_answer():
            self._send(cob, data)

    def _torque(self, theta, omega, out, h):
        for k, d in enumerate(self.drives):
            out[k] = d.torque(theta[k], omega[k], h)

    def _sample(self, now, frame=False):
        # The plant moves at each SYNC (a gap longer than max_gap is integrated only up to it: a stalled or
        # configuring host does not drop the arm), and in real time while a drive ramps down on its own -- also
        # when no SYNC was ever sent: the quick stop and the fault reaction run on the drive's clock.
        if not frame and all(d.ramp is None for d in self.drives):
            return
        self.clock.advance(now)
        theta, omega = self.clock.motor_state()
        for k, d in enumerate(self.drives):
            d.measure(theta[k], omega[k])

    def sample(self, now: float) -> None:
        """The plant advanced to ``now`` and each drive's actual values measured: a SYNC's work, for a bus
        whose frames carry no SYNC (the EtherCAT slaves sample at each process data frame: once for the line,
        however many of its slaves ask)."""
        if self._sampled_at is None or abs(now - self._sampled_at) > SAME_SYNC:
            self._sampled_at = now
            self._sample(now, frame=True)

    def between_syncs(self, now: float) -> None:
        """Between SYNCs (or process data frames): the plant moves only while a drive ramps down on its own
        clock (a quick stop, a fault reaction); a configuring or silent master does not drop the arm."""
        self._sample(now)

    def poll(self, timeout: float) -> None:
        now = time.monotonic()
        self.between_syncs(now)
        wake = min(d.tick(now) for d in self.drives)
        msg = self.bus.recv(max(0.0, min(timeout, wake - now)))
        if msg is None or msg.is_error_frame or msg.is_extended_id:
            return
        now = time.monotonic()
        if msg.arbitration_id == 0x80:
            self._sample(now, frame=True)
            self.syncs += 1
        for d in self.drives:
            d.receive(msg.arbitration_id, msg.data, now)

    @property
    def fault_events(self) -> int:
        return sum(d.fault_events for d in self.drives)

    def counters(self):
        return {"syncs": self.syncs, "dropped": self.faults.dropped, "delayed": self.faults.delayed,
                "faults": self.fault_events, "plant_steps": self.clock.steps,
                "events": {d.id: [[t, e] for t, e in d.log] for d in self.drives}}

    def final(self):
        """Each drive's state, the torque it makes (N m at the motor) and when its heartbeat consumer last
        received the watched heartbeat (monotonic s; None: no consumer armed), by node ID."""
        return {d.id: {"state": d.state, "torque": d.applied,
                       "master_heartbeat_last": max((e[3] for e in d._consumer.values()), default=None)}
                for d in self.drives}


def final_state(emu) -> dict:
    """What each actuator is doing now: a CiA 402 drive's state and torque, an MIT motor's mode and torque."""
    if isinstance(emu, Cia402Emulator):
        return emu.final()
    return {i: {"state": emu.mode[k] + (" (CAN timeout)" if emu.timed_out[k] else ""),
                "torque": float(emu.clock.motor_torque[k]), "last_command": float(emu.last_command[k])}
            for k, i in enumerate(emu.ids)}


def run_in_thread(emulator, stop: threading.Event, timeout=0.005) -> threading.Thread:
    """Serve ``emulator`` from a daemon thread until ``stop`` is set (in-process tests)."""
    def loop():
        while not stop.is_set():
            emulator.poll(timeout)
    t = threading.Thread(target=loop, daemon=True, name="can-emulator")
    t.start()
    return t


def load_inertia(plant, v_index, ratio) -> np.ndarray:
    """Each motor's load inertia (kg m^2), as a drive's commissioning measures it: the joint's diagonal entry of
    the plant's mass matrix in its present configuration over the gear ratio squared."""
    from rtctl.dynamics import Dynamics
    mass = Dynamics(plant.model).mass_matrix(plant.q)
    return np.array([mass[i, i] for i in v_index]) / np.asarray(ratio, dtype=float) ** 2


def build_plant(robot: str, urdf: str | None, initial, mjcf: str | None = None):
    """The emulators' plant: rtctl's rigid-body simulation of ``urdf`` or of ``robot`` named as a run config's
    ``[robot] model`` names it (``can_arm2``, the CAN HIL arm; a bundled model), or with ``mjcf`` (an MJCF or
    URDF file) MuJoCo's simulation of it (the mujoco extra), whose own rtctl model names the joints."""
    from rtctl.cli import load_model
    from rtctl.hil.can_robot import make_plant
    plant = None
    if mjcf:
        from rtctl.plants.mujoco.plant import MujocoPlant
        plant = MujocoPlant(source=mjcf)
        model = plant.model
    else:
        model = load_model(urdf or robot, None)
    from rtctl.rt.interfaces import actuated_indices
    q_idx, v_idx, _names = actuated_indices(model)
    plant = plant or make_plant(model)
    q0 = model.neutral_configuration()
    if initial:
        q0[q_idx] = initial
    plant.reset(q0)
    plant.step(1e-4, np.zeros(model.nv))  # compile / load the numba kernels before going on the bus
    plant.reset(q0)
    return plant, v_idx


def loopback_channel(url: str) -> str:
    """``url`` (``ws://HOST:PORT/PATH``) with HOST replaced by the address it resolves to, when every address it
    resolves to is a loopback one (python-can-remote then connects to that address, not to a name that might
    resolve elsewhere next time); ValueError saying why not otherwise. A prefix test passed
    ``ws://127.0.0.1.invalid:9/`` and ``ws://127.0.0.1@192.0.2.1:9/`` (user info: the host is 192.0.2.1)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:                     # a port that is not a number, a bad IPv6 literal
        raise ValueError(f"{url!r}: {exc}") from None
    if parts.scheme != "ws" or not host or port is None:
        raise ValueError(f"{url!r} is not ws://HOST:PORT/")
    try:
        addresses = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"host {host!r} does not resolve ({getattr(exc, 'strerror', None) or exc})") from None
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise ValueError(f"host {host!r} is {', '.join(sorted(set(addresses)))}, not a loopback address")
    address = f"[{addresses[0]}]" if ":" in addresses[0] else addresses[0]
    return urlunsplit(("ws", f"{address}:{port}", parts.path or "/", parts.query, ""))


def main(argv=None, prog="python -m rtctl.hil.can_emulator"):
    p = Parser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--protocol", choices=("mit", "cia402"), required=True)
    p.add_argument("--interface", default="remote")
    p.add_argument("--channel", required=True, help="e.g. ws://127.0.0.1:PORT/")
    p.add_argument("--ids", type=int, nargs="+", required=True, help="motor CAN IDs / CANopen node IDs")
    p.add_argument("--robot", default=DEFAULT_ROBOT,
                   help="a robot as [robot] model names it: can_arm2 (default), the CAN HIL arm, or a bundled model")
    p.add_argument("--urdf", default=None)
    p.add_argument("--mjcf", default=None, help="simulate this MJCF (or URDF) file in MuJoCo (rtctl[mujoco])")
    p.add_argument("--initial", type=float, nargs="*", default=None)
    p.add_argument("--motor-model", default="AK80-9")
    p.add_argument("--ratio", type=argument_type("float", positive=True), default=10.0,
                   help="CiA 402 gear ratio (motor turns per joint turn; the drives declare it in 0x6091)")
    p.add_argument("--drop", type=float, default=0.0)
    p.add_argument("--delay-reply", type=float, nargs=2, default=None, metavar=("N", "SECONDS"))
    p.add_argument("--fault-at-sync", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--can-timeout-cycles", type=int, default=0,
                   help="MIT firmware CAN_TIMEOUT in 40 kHz loop cycles (0: none)")
    args = p.parse_args(argv)
    if args.interface == "remote":
        try:
            args.channel = loopback_channel(args.channel)
        except ValueError as exc:
            p.error(f"the emulator only talks to a loopback bus server (--channel ws://127.0.0.1:PORT/): {exc}")
    try:
        plant, v_idx = build_plant(args.robot, args.urdf, args.initial, args.mjcf)
    except Exception as exc:  # noqa: BLE001  (a bad URDF: one line)
        p.exit(1, f"{prog}: error: robot: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    try:
        bus = can.Bus(interface=args.interface, channel=args.channel)
    except Exception as exc:  # noqa: BLE001  (no bus server there: one line)
        p.exit(1, f"{prog}: error: cannot open the CAN bus (interface {args.interface!r}, channel {args.channel!r}; "
                  f"is a bus server running there?): {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    delay = (int(args.delay_reply[0]), args.delay_reply[1]) if args.delay_reply else None
    if args.protocol == "mit":
        emu = MitEmulator(bus, plant, v_idx, args.ids, args.motor_model, drop=args.drop, delay_reply=delay,
                          seed=args.seed, can_timeout_cycles=args.can_timeout_cycles)
    else:
        emu = Cia402Emulator(bus, plant, v_idx, args.ids, ratio=args.ratio, drop=args.drop, delay_reply=delay,
                             seed=args.seed, fault_at_sync=args.fault_at_sync)
    stop = threading.Event()
    on_stop_signals(lambda *_: stop.set())
    print(f"PLANT {type(plant).__name__} nv={plant.model.nv}", flush=True)
    print("READY", flush=True)
    try:
        while not stop.is_set():
            emu.poll(0.005)
    finally:
        print(json.dumps(dict(emu.counters(), final=final_state(emu))), flush=True)
        shutdown_bus(bus)      # also when the bus server went first
    return 0


if __name__ == "__main__":
    sys.exit(main())
