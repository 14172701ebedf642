"""Emulated CAN actuator firmware: MIT-mode motors and CiA 402 drives around one simulated plant.

Each emulator owns a :class:`plants.rigid_body.RigidBodyPlant` and advances it
in soft real time at the rate of the bus traffic: whenever a frame that
samples the motors arrives (an MIT command, a CiA 402 SYNC) the plant is
integrated from its last time to now (wall clock, sub-steps of at most
``max_substep``) under the torques held since then, then the state is
measured with the device's quantisation and answered, then the new command is
latched. Gaps longer than ``max_gap`` (the controller stopped) are not
integrated beyond ``max_gap``.

Fault injection (options): ``drop`` -- probability of not answering (a reply
or TPDO frame lost), ``delay_reply=(n, seconds)`` -- the n-th answer is sent
late (the firmware stalls), and for CiA 402 a write of an error code to the
manufacturer object 0x2001 (or ``fault_at_sync``) puts the drive into FAULT
with an EMCY message.

Run as a process: ``python -m hil.can_emulator --protocol mit --channel
ws://127.0.0.1:PORT/ --ids 1 2`` (see ``--help``); it prints ``READY`` once
on the bus and runs until killed or SIGTERM.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import struct
import sys
import threading
import time

import can
import numpy as np

from rtctl.drivers.can import cia402 as c4
from rtctl.drivers.can.mit import get_model, is_special, pack_reply, unpack_command


class PlantClock:
    """Advances a plant to wall-clock time under held actuator torques (joint space, transmission ratio r)."""

    def __init__(self, plant, v_index, ratio, max_substep=5e-4, max_gap=0.02, torque_fn=None):
        self.plant = plant
        self.v_index = np.asarray(v_index)
        self.ratio = np.asarray(ratio, dtype=float)
        self.max_substep, self.max_gap = max_substep, max_gap
        self.effort = np.zeros(plant.nv)
        self.motor_torque = np.zeros(len(self.v_index))  # actuator torque applied over the last interval
        self.torque_fn = torque_fn                        # f(theta, omega, out) -> motor torques, per sub-step
        self.last = None
        self.steps = 0

    def motor_state(self):
        q = self.plant.q[self.v_index] * self.ratio  # 1-DOF joints: q index == v index for a fixed base
        v = self.plant.v[self.v_index] * self.ratio
        return q, v

    def advance(self, now: float) -> None:
        if self.last is None:
            self.last = now
            return
        dt = min(now - self.last, self.max_gap)
        self.last = now
        if dt <= 0:
            return
        n = max(1, math.ceil(dt / self.max_substep))
        h = dt / n
        for _ in range(n):
            if self.torque_fn is not None:
                theta, omega = self.motor_state()
                self.torque_fn(theta, omega, self.motor_torque)
            self.effort[self.v_index] = self.motor_torque * self.ratio
            self.plant.step(h, self.effort)
        self.steps += n


class _Faults:
    def __init__(self, drop=0.0, delay_reply=None, seed=0):
        self.rng = np.random.default_rng(seed)
        self.drop = float(drop)
        self.delay_reply = delay_reply  # (n, seconds)
        self.answers = 0
        self.dropped = 0
        self.delayed = 0

    def before_answer(self) -> bool:
        """False: drop this answer. Sleeps first when this is the answer to delay."""
        self.answers += 1
        if self.delay_reply and self.answers == self.delay_reply[0]:
            self.delayed += 1
            time.sleep(self.delay_reply[1])
        if self.drop and self.rng.random() < self.drop:
            self.dropped += 1
            return False
        return True


class MitEmulator:
    """MIT-mode motors (one per joint, output-side values) answering on ``bus``."""

    def __init__(self, bus, plant, v_index, can_ids, motor_model="AK80-9", host_id=0, encoder_bits=14,
                 gear=9.0, drop=0.0, delay_reply=None, seed=0):
        self.bus = bus
        self.motors = [get_model(motor_model)] * len(can_ids) if isinstance(motor_model, str) else \
            [get_model(m) for m in motor_model]
        self.ids = list(can_ids)
        self.slot = {i: k for k, i in enumerate(self.ids)}
        self.host_id = host_id
        n = len(self.ids)
        self.enabled = np.zeros(n, dtype=bool)
        self.cmd = np.zeros((n, 5))  # p, v, kp, kd, t_ff (output side)
        self.offset = np.zeros(n)     # zero-position offsets
        # Rotor encoder of encoder_bits behind a gear: the output-side position step.
        self.position_step = 2 * math.pi / (1 << encoder_bits) / gear
        self.clock = PlantClock(plant, v_index, np.ones(n), torque_fn=self._torque)
        self.faults = _Faults(drop, delay_reply, seed)
        self.unknown = 0
        self.frames = 0
        self._reply = [can.Message(arbitration_id=host_id, data=bytearray(6), is_extended_id=False) for _ in self.ids]

    def _torque(self, theta, omega, out):
        for k, m in enumerate(self.motors):
            if not self.enabled[k]:
                out[k] = 0.0
                continue
            p, v, kp, kd, t = self.cmd[k]
            tau = kp * (p - (theta[k] - self.offset[k])) + kd * (v - omega[k]) + t
            out[k] = min(max(tau, m.t_min), m.t_max)

    def handle(self, msg, now) -> None:
        k = self.slot.get(msg.arbitration_id)
        if k is None or msg.is_error_frame:
            self.unknown += 1
            return
        self.frames += 1
        self.clock.advance(now)
        special = is_special(msg.data)
        if special == 0xFC:
            self.enabled[k] = True
        elif special == 0xFD:
            self.enabled[k] = False
            self.cmd[k] = 0.0
        elif special == 0xFE:
            self.offset[k] = self.clock.motor_state()[0][k]
        theta, omega = self.clock.motor_state()
        m = self.motors[k]
        if special == 0 and len(msg.data) == 8:
            self.cmd[k] = unpack_command(m, msg.data)
        if self.faults.before_answer():
            p = round((theta[k] - self.offset[k]) / self.position_step) * self.position_step
            pack_reply(m, self.ids[k], p, omega[k], self.clock.motor_torque[k], self._reply[k].data)
            self.bus.send(self._reply[k])

    def poll(self, timeout: float) -> None:
        msg = self.bus.recv(timeout)
        if msg is not None:
            self.handle(msg, time.perf_counter())

    def counters(self):
        return {"frames": self.frames, "dropped": self.faults.dropped, "delayed": self.faults.delayed,
                "unknown": self.unknown, "plant_steps": self.clock.steps}


class _Drive:
    """One CiA 402 drive: a canopen LocalNode (SDO server, NMT slave, EMCY producer) plus the power stage."""

    def __init__(self, emulator, k, node_id, network, od_kwargs):
        import canopen
        self.emu, self.k, self.id = emulator, k, node_id
        self.node = canopen.LocalNode(node_id, c4.drive_object_dictionary(**od_kwargs))
        od = self.node.object_dictionary
        self.rated_nm = od[c4.RATED_TORQUE].default / 1000.0
        self.increments = od[c4.ENCODER_RESOLUTION][1].default
        # Heartbeat produced by the emulator loop (not python-can periodic tasks, which would live in
        # the bus server and outlive this process).
        nmt = self.node.nmt
        nmt.start_heartbeat = lambda ms: setattr(nmt, "_heartbeat_time_ms", ms)
        nmt.stop_heartbeat = lambda: None
        nmt.update_heartbeat = lambda: None
        network.add_node(self.node)
        for i in range(4):  # the predefined connection set: PDO COB-IDs include the node ID
            for base_index, base_cob in ((0x1400, 0x200), (0x1800, 0x180)):
                cob = od[base_index + i][1].default
                self.node.data_store.setdefault(base_index + i, {})[1] = struct.pack(
                    "<I", (cob & 0x80000000) | (base_cob + 0x100 * i + node_id))
        self.node.add_read_callback(self._on_read)
        self.node.add_write_callback(self._on_write)
        self.statusword = 0x0000 | 0x0200  # NOT READY TO SWITCH ON, remote
        self.state = "SWITCH ON DISABLED"
        self.controlword = 0
        self.mode = 0
        self.target = 0          # per mille, latched at SYNC
        self.applied = 0         # per mille being applied
        self.max_torque = od[c4.MAX_TORQUE].default
        self.error_code = 0
        self.rpdos = []          # [(cob, fields, trans_type)], fields: [(index, struct fmt)]
        self.tpdos = []
        self.rpdo_data = {}      # cob -> latest bytes (synchronous RPDOs apply at SYNC)
        self.nmt_state = 0
        self.sync_count = 0
        self.position = 0
        self.velocity = 0
        self.torque_actual = 0

    # -- object access ----------------------------------------------------------------------
    def value(self, index):
        return {c4.STATUSWORD: self.statusword_value(), c4.POSITION_ACTUAL: self.position,
                c4.VELOCITY_ACTUAL: self.velocity, c4.TORQUE_ACTUAL: self.torque_actual,
                c4.MODES_DISPLAY: self.mode, c4.ERROR_CODE: self.error_code, c4.CONTROLWORD: self.controlword,
                c4.TARGET_TORQUE: self.target, c4.MODES_OF_OPERATION: self.mode}.get(index)

    def _on_read(self, index, subindex, od):
        return self.value(index)

    def _on_write(self, index, subindex, od, data):
        if index in (c4.CONTROLWORD, c4.TARGET_TORQUE, c4.MODES_OF_OPERATION, c4.FAULT_INJECTION):
            self.apply(index, od.decode_raw(data))

    def apply(self, index, value):
        if index == c4.CONTROLWORD:
            self.on_controlword(int(value))
        elif index == c4.TARGET_TORQUE:
            self.target = int(value)
        elif index == c4.MODES_OF_OPERATION:
            self.mode = int(value)
        elif index == c4.FAULT_INJECTION and value:
            self.enter_fault(int(value))

    def statusword_value(self):
        base = {"NOT READY TO SWITCH ON": 0x00, "SWITCH ON DISABLED": 0x40, "READY TO SWITCH ON": 0x21,
                "SWITCHED ON": 0x23, "OPERATION ENABLED": 0x27, "QUICK STOP ACTIVE": 0x07,
                "FAULT REACTION ACTIVE": 0x0F, "FAULT": 0x08}[self.state]
        if self.state in ("READY TO SWITCH ON", "SWITCHED ON", "OPERATION ENABLED"):
            base |= 0x10  # voltage enabled
        if self.state not in ("QUICK STOP ACTIVE",) and base != 0x08:
            base |= 0x20 if self.state != "SWITCH ON DISABLED" else 0
        return base | 0x0200

    def on_controlword(self, cw):
        old, self.controlword = self.controlword, cw
        s = self.state
        if s == "FAULT":
            if cw & 0x80 and not old & 0x80:
                self.state = "SWITCH ON DISABLED"
                self.error_code = 0
            return
        if cw & 0x82 == 0x00:                                 # disable voltage
            self.state = "SWITCH ON DISABLED"
        elif cw & 0x86 == 0x02:                               # quick stop
            self.state = "QUICK STOP ACTIVE" if s == "OPERATION ENABLED" else "SWITCH ON DISABLED"
        elif cw & 0x87 == 0x06:                               # shutdown
            if s in ("SWITCH ON DISABLED", "SWITCHED ON", "OPERATION ENABLED"):
                self.state = "READY TO SWITCH ON"
        elif cw & 0x8F == 0x07:                               # switch on / disable operation
            if s in ("READY TO SWITCH ON", "OPERATION ENABLED"):
                self.state = "SWITCHED ON"
        elif cw & 0x8F == 0x0F:                               # enable operation
            if s in ("SWITCHED ON", "READY TO SWITCH ON"):
                self.state = "OPERATION ENABLED"

    def enter_fault(self, code):
        self.state = "FAULT"
        self.error_code = code
        self.emu.fault_events += 1
        self.node.emcy.send(code, 0x01)

    # -- PDO mapping from the object dictionary (as the master configured it by SDO) -------------
    def parse_pdos(self):
        sdo = self.node.sdo
        self.rpdos, self.tpdos = [], []
        for kind, com0, map0 in (("r", 0x1400, 0x1600), ("t", 0x1800, 0x1A00)):
            for i in range(4):
                cob = sdo[com0 + i][1].raw
                if cob & 0x80000000:
                    continue
                fields = []
                for sub in range(1, sdo[map0 + i][0].raw + 1):
                    entry = sdo[map0 + i][sub].raw
                    index, bits = entry >> 16, entry & 0xFF
                    obj = self.node.object_dictionary[index]
                    signed = obj.data_type in (2, 3, 4)
                    fmt = {8: "b", 16: "h", 32: "i"}[bits]
                    fields.append((index, "<" + (fmt if signed else fmt.upper())))
                entry = (cob & 0x7FF, fields, sdo[com0 + i][2].raw)
                (self.rpdos if kind == "r" else self.tpdos).append(entry)

    def on_rpdo(self, cob, data):
        for c, fields, trans in self.rpdos:
            if c == cob:
                if trans <= 240:
                    self.rpdo_data[cob] = bytes(data)
                else:
                    self._apply_rpdo(fields, data)

    def _apply_rpdo(self, fields, data):
        offset = 0
        for index, fmt in fields:
            value, = struct.unpack_from(fmt, data, offset)
            offset += struct.calcsize(fmt)
            self.apply(index, value)

    def measure(self, theta, omega, torque_nm):
        """The drive's sampled actual values (motor shaft, device units)."""
        self.position = int(round(theta * self.increments / (2 * math.pi)))
        self.velocity = int(round(omega * self.increments / (2 * math.pi)))
        self.torque_actual = int(round(torque_nm / self.rated_nm * 1000.0))

    def send_tpdos(self):
        for cob, fields, trans in self.tpdos:
            if trans == 0 or trans > 240 or self.sync_count % trans:
                continue
            if not self.emu.faults.before_answer():
                continue
            data = bytearray()
            for index, fmt in fields:
                data += struct.pack(fmt, self.value(index))
            self.emu.bus.send(can.Message(arbitration_id=cob, data=data, is_extended_id=False))

    def latch(self):
        for cob, fields, trans in self.rpdos:
            data = self.rpdo_data.pop(cob, None)
            if data is not None:
                self._apply_rpdo(fields, data)
        if self.state == "OPERATION ENABLED" and self.mode == c4.CST:
            self.applied = max(-self.max_torque, min(self.max_torque, self.target))
        else:
            self.applied = 0


class Cia402Emulator:
    """CiA 402 drives (one per joint, node IDs ``node_ids``) in CST around one plant, with gear ``ratio``."""

    def __init__(self, bus, plant, v_index, node_ids, ratio=10.0, rated_torque_mnm=1000, max_torque_permille=3000,
                 increments_per_rev=1 << 17, drop=0.0, delay_reply=None, seed=0, fault_at_sync=None):
        import canopen
        self.bus = bus
        self.network = canopen.Network(bus)  # no notifier: this loop dispatches every frame itself
        n = len(node_ids)
        self.ratio = np.broadcast_to(np.asarray(ratio, dtype=float), (n,)).copy()
        self.clock = PlantClock(plant, v_index, self.ratio)
        self.faults = _Faults(drop, delay_reply, seed)
        self.fault_events = 0
        self.fault_at_sync = fault_at_sync
        self.heartbeat_enabled = True
        od_kwargs = dict(rated_torque_mnm=rated_torque_mnm, max_torque_permille=max_torque_permille,
                         increments_per_rev=increments_per_rev)
        self.drives = [_Drive(self, k, i, self.network, od_kwargs) for k, i in enumerate(node_ids)]
        self.rpdo_owner = {}
        self.syncs = 0
        self.unknown = 0
        self._next_hb = 0.0
        for d in self.drives:
            d.node.nmt.state = "PRE-OPERATIONAL"      # boot-up frame, then pre-operational
            d.nmt_state = d.node.nmt._state

    def _refresh_nmt(self):
        for d in self.drives:
            state = d.node.nmt._state
            if state != d.nmt_state:
                if state == 5:
                    d.parse_pdos()
                    for cob, _f, _t in d.rpdos:
                        self.rpdo_owner[cob] = d
                d.nmt_state = state

    def on_sync(self, now):
        self.syncs += 1
        self.clock.advance(now)
        theta, omega = self.clock.motor_state()
        for d in self.drives:
            if d.nmt_state != 5:
                continue
            d.sync_count += 1
            if self.fault_at_sync is not None and d.sync_count == self.fault_at_sync:
                d.enter_fault(0x2310)
            d.measure(theta[d.k], omega[d.k], self.clock.motor_torque[d.k])
            d.send_tpdos()
            d.latch()
            self.clock.motor_torque[d.k] = d.applied * d.rated_nm / 1000.0

    def heartbeat(self, now):
        if now >= self._next_hb:
            periods = [d.node.nmt._heartbeat_time_ms for d in self.drives if d.node.nmt._heartbeat_time_ms]
            if periods and self.heartbeat_enabled:
                for d in self.drives:
                    if d.node.nmt._heartbeat_time_ms:
                        self.bus.send(can.Message(arbitration_id=0x700 + d.id, data=[d.node.nmt._state],
                                                  is_extended_id=False))
                self._next_hb = now + min(periods) / 1000.0
            else:
                self._next_hb = now + 0.01

    def poll(self, timeout: float) -> None:
        now = time.perf_counter()
        self.heartbeat(now)
        msg = self.bus.recv(max(0.0, min(timeout, self._next_hb - now)))
        if msg is None:
            return
        now = time.perf_counter()
        if msg.is_error_frame:
            return
        cob = msg.arbitration_id
        if cob == 0x80:
            self.on_sync(now)
        elif cob in self.rpdo_owner:
            self.rpdo_owner[cob].on_rpdo(cob, msg.data)
        else:
            self.network.notify(cob, msg.data, msg.timestamp)
            self._refresh_nmt()

    def counters(self):
        return {"syncs": self.syncs, "dropped": self.faults.dropped, "delayed": self.faults.delayed,
                "faults": self.fault_events, "plant_steps": self.clock.steps}


def run_in_thread(emulator, stop: threading.Event, timeout=0.005) -> threading.Thread:
    """Serve ``emulator`` from a daemon thread until ``stop`` is set (in-process tests)."""
    def loop():
        while not stop.is_set():
            emulator.poll(timeout)
    t = threading.Thread(target=loop, daemon=True, name="can-emulator")
    t.start()
    return t


def build_plant(robot: str, urdf: str | None, initial):
    from rtctl.hil.can_robot import build_arm2, make_plant
    if urdf:
        from rtctl.model.urdf import load_urdf
        model = load_urdf(urdf)
    elif robot == "arm2":
        model = build_arm2()
    else:
        raise SystemExit(f"unknown robot {robot!r}")
    from rtctl.rt.interfaces import actuated_indices
    q_idx, v_idx, _names = actuated_indices(model)
    plant = make_plant(model)
    q0 = model.neutral_configuration()
    if initial:
        q0[q_idx] = initial
    plant.reset(q0)
    plant.step(1e-4, np.zeros(model.nv))  # compile / load the numba kernels before going on the bus
    plant.reset(q0)
    return plant, v_idx


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hil.can_emulator", description=__doc__.split("\n")[0])
    p.add_argument("--protocol", choices=("mit", "cia402"), required=True)
    p.add_argument("--interface", default="remote")
    p.add_argument("--channel", required=True, help="e.g. ws://127.0.0.1:PORT/")
    p.add_argument("--ids", type=int, nargs="+", required=True, help="motor CAN IDs / CANopen node IDs")
    p.add_argument("--robot", default="arm2")
    p.add_argument("--urdf", default=None)
    p.add_argument("--initial", type=float, nargs="*", default=None)
    p.add_argument("--motor-model", default="AK80-9")
    p.add_argument("--ratio", type=float, default=10.0, help="CiA 402 gear ratio (motor turns per joint turn)")
    p.add_argument("--drop", type=float, default=0.0)
    p.add_argument("--delay-reply", type=float, nargs=2, default=None, metavar=("N", "SECONDS"))
    p.add_argument("--fault-at-sync", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not args.channel.startswith(("ws://127.", "ws://localhost")) and args.interface == "remote":
        raise SystemExit("the emulator only talks to a loopback bus server")
    plant, v_idx = build_plant(args.robot, args.urdf, args.initial)
    bus = can.Bus(interface=args.interface, channel=args.channel)
    delay = (int(args.delay_reply[0]), args.delay_reply[1]) if args.delay_reply else None
    if args.protocol == "mit":
        emu = MitEmulator(bus, plant, v_idx, args.ids, args.motor_model, drop=args.drop, delay_reply=delay,
                          seed=args.seed)
    else:
        emu = Cia402Emulator(bus, plant, v_idx, args.ids, ratio=args.ratio, drop=args.drop, delay_reply=delay,
                             seed=args.seed, fault_at_sync=args.fault_at_sync)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("READY", flush=True)
    try:
        while not stop.is_set():
            emu.poll(0.05)
    finally:
        print(json.dumps(emu.counters()), flush=True)
        bus.shutdown()


if __name__ == "__main__":
    sys.exit(main())
