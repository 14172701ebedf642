"""CANopen CiA 402 drives in cyclic synchronous torque mode (CST, mode 10): the ``cia402`` backend.

The CANopen stack is the ``canopen`` package: NMT (pre-operational for
configuration, operational to run), SDO for the configuration, its PDO API for
the mapping, its NMT master's heartbeat reception and its EMCY consumer. At
``configure`` each drive gets, by SDO: its heartbeat producer time 0x1017
(``heartbeat_period``), a heartbeat consumer entry 0x1016:01 watching this
master (node ``master_node_id``, ``master_heartbeat_timeout``; 0 turns it
off), the abort connection option code 0x6007 (``connection_loss_reaction``:
none / fault / disable_voltage / quick_stop), mode of operation 0x6060 = CST;
and it is read for rated torque 0x6076, max torque 0x6072, encoder resolution
0x608F, supported modes 0x6502 (CST required) and gear ratio 0x6091, which must
agree with the config's ``gear_ratio`` (configure fails naming both otherwise).

The real-time path is ours: per cycle one RPDO per drive (controlword 0x6040 +
target torque 0x6071, synchronous) and one SYNC (this driver is the SYNC
producer, so the drives sample and apply in step with the loop); every SYNC
each drive answers with

* TPDO1: statusword 0x6041 (u16), position actual 0x6064 (i32, increments), torque actual 0x6077 (i16, per mille);
* TPDO2: velocity actual 0x606C (i32, increments/s), modes of operation display 0x6061 (i8).

Units inside: position and velocity in encoder increments of the motor shaft
(``0x608F`` increments per motor revolution), torque in thousandths of the
rated torque ``0x6076`` (mN m). The transmission maps the motor shaft to the
joint.

The controlword/statusword state machine (CiA 402 figure "drive state
machine") is walked by :meth:`Cia402Driver.on_activate`: fault reset (a rising
edge of controlword bit 7), shutdown (0x06), switch on (0x07), enable
operation (0x0F). While running, a statusword that leaves OPERATION ENABLED
(a drive fault, a quick stop) latches a driver fault naming the state and the
drive's last EMCY error code, as do ``max_failed_cycles`` consecutive missing TPDOs of
a drive, a drive heartbeat older than ``heartbeat_timeout`` (default two
``heartbeat_period``) or one reporting another NMT state than operational, a
boot-up message since ``configure`` (the drive was reset and lost its
configuration: configure again), and ``max_bus_errors`` consecutive failed
sends; error frames and frames with unknown IDs are counted. Re-configure and
activate again to reset a drive fault. :meth:`Cia402Driver.safe_stop` sends
the quick stop command (controlword 0x02): each drive stops as its quick stop
option code 0x605A says.

Heartbeats both ways: while the driver is active a thread of this process sends
the master's heartbeat (0x700 + ``master_node_id``, state OPERATIONAL) every
``master_heartbeat_period``. A control process that dies (or loses the bus)
stops it, and each drive's own consumer times out after
``master_heartbeat_timeout`` and reacts by itself: EMCY 0x8130 and the 0x6007
reaction (fault, disable voltage or quick stop) -- the drives stop without
this process. A control *thread* that hangs while the process lives keeps the
heartbeat going; that case is our loop's watchdog's. ``deactivate`` clears
each live drive's consumer entry before the heartbeat stops (a planned stop is
no lost master).
"""
from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass

import can
import canopen
import numpy as np

from rtctl.options import setting

from ..base import EFFORT_MODE, ActuatorDriver, DriverHealth
from ..cia402 import (CW_DISABLE_VOLTAGE, CW_ENABLE_OPERATION, CW_FAULT_RESET, CW_QUICK_STOP,  # noqa: F401
                      CW_SHUTDOWN, CW_SWITCH_ON, SW_OPERATION_ENABLED, SW_OPERATION_ENABLED_MASK, is_fault,
                      emergency_line, next_controlword, state_of)
from ..transmission import Transmission
from .bus import CAN_COUNTERS, CanOptions, check_can_ids, check_channel, drain, open_bus, release_with, shutdown_bus

from .objects import (CONSUMER_HEARTBEAT, CONTROLWORD, CSP, CST, CSV, ENCODER_RESOLUTION, ERROR_CODE,  # noqa: F401
                      FAULT_INJECTION, HEARTBEAT_TIME, MAX_TORQUE, MODES_DISPLAY, MODES_OF_OPERATION,
                      POSITION_ACTUAL, RATED_TORQUE, STATUSWORD, SUPPORTED_CST_BIT, SUPPORTED_MODES, TARGET_TORQUE,
                      TORQUE_ACTUAL, VELOCITY_ACTUAL, ABORT_CONNECTION, declared_gear_ratio, drive_object_dictionary)

_TPDO1 = struct.Struct("<HiH")   # statusword, position actual, torque actual (as u16, sign fixed below)
_TPDO1_SIGNED = struct.Struct("<Hih")
_TPDO2 = struct.Struct("<ib")    # velocity actual, modes display
_RPDO1 = struct.Struct("<Hh")    # controlword, target torque


# 0x6007 abort connection option codes (CiA 402) by the name the config uses.
CONNECTION_LOSS_REACTIONS = {"none": 0, "fault": 1, "disable_voltage": 2, "quick_stop": 3}


@dataclass(frozen=True)
class Cia402Options(CanOptions):
    """``[driver]`` keys of the ``cia402`` backend beyond the CAN ones (seconds, converted to CANopen's ms here)."""

    heartbeat_period: float = setting("float", 0.05, low=0.001, high=65.535)   # the drives' producer time 0x1017
    heartbeat_timeout: float = setting("float", None, positive=True)            # default: two heartbeat periods
    master_node_id: int = setting("int", 127, low=1, high=127)                  # this master's own heartbeat ID
    master_heartbeat_period: float = setting("float", 0.05, low=0.001, high=65.535)
    master_heartbeat_timeout: float = setting("float", 0.2, low=0.0, high=65.535)  # each drive's 0x1016 (0: off)
    connection_loss_reaction: str = setting("str", "fault", choices=tuple(CONNECTION_LOSS_REACTIONS))  # 0x6007


class _BusWatch(can.Listener):
    """Counts error frames and frames whose ID belongs to nothing configured (runs in the notifier thread)."""

    def __init__(self, extra: dict, known: set):
        self.extra, self.known = extra, known

    def on_message_received(self, msg):
        if msg.is_error_frame:
            self.extra["bus_errors"] += 1
        elif msg.arbitration_id not in self.known:
            self.extra["unknown_ids"] += 1

    def on_error(self, exc):
        self.extra["bus_errors"] += 1


class Cia402Driver(ActuatorDriver):
    """One CiA 402 drive per joint (node IDs ``can_ids``), torque commands in CST."""

    Options = Cia402Options
    modes = (EFFORT_MODE,)               # cyclic synchronous torque

    def __init__(self, model, options: "Cia402Driver.Options | None" = None, *, bus: can.BusABC | None = None,
                 transmission: Transmission | None = None, object_dictionary=None, max_bus_errors: int = 5,
                 activate_timeout: float = 2.0, bus_options: dict | None = None):
        super().__init__(model, options)
        options = self.options
        n = len(self.v_index)
        ids = check_can_ids(self.name, options.can_ids, n, high=127, what="CANopen node IDs")
        check_channel(self.name, options.can_channel, bus)
        if max_bus_errors < 1:
            raise ValueError(f"{self.name}: max_bus_errors must be >= 1, got {max_bus_errors}")
        heartbeat_period, master_heartbeat_period = options.heartbeat_period, options.master_heartbeat_period
        master_heartbeat_timeout, master_node_id = options.master_heartbeat_timeout, options.master_node_id
        heartbeat_timeout = 2.0 * heartbeat_period if options.heartbeat_timeout is None else options.heartbeat_timeout
        if not heartbeat_timeout > heartbeat_period:
            raise ValueError(f"{self.name}: heartbeat_timeout ({heartbeat_timeout} s) must exceed the drives' "
                             f"heartbeat_period ({heartbeat_period} s)")
        if master_heartbeat_timeout and not master_heartbeat_period < master_heartbeat_timeout <= 65.535:
            raise ValueError(f"{self.name}: master_heartbeat_timeout ({master_heartbeat_timeout} s) must exceed "
                             f"master_heartbeat_period ({master_heartbeat_period} s) and be <= 65.535 s, or be 0")
        if master_node_id in ids:
            raise ValueError(f"{self.name}: master_node_id {master_node_id} must not be a drive's node ID")
        self.can_ids = ids
        self.transmission = transmission or Transmission(n)
        if self.transmission.n != n:
            raise ValueError(f"{self.name}: transmission is for {self.transmission.n} joints, driver has {n}")
        self.can_interface, self.can_channel = options.can_interface, options.can_channel
        self.bus_options = dict(bus_options or {})
        self.bus = bus
        self._own_bus = bus is None
        self._release = None        # stops the network and shuts down the bus this driver opened (close or exit)
        self.object_dictionary = object_dictionary
        self.read_timeout, self.max_failed_cycles = options.read_timeout, options.max_failed_cycles
        self.max_bus_errors = int(max_bus_errors)
        self.heartbeat_period, self.heartbeat_timeout = float(heartbeat_period), float(heartbeat_timeout)
        self.master_node_id = int(master_node_id)
        self.master_heartbeat_period = float(master_heartbeat_period)
        self.master_heartbeat_timeout = float(master_heartbeat_timeout)
        self.connection_loss_reaction = options.connection_loss_reaction
        self._master_heartbeat = can.Message(arbitration_id=0x700 + self.master_node_id, data=bytes([5]),
                                             is_extended_id=False)   # NMT state OPERATIONAL
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._booted = np.zeros(n, dtype=bool)
        self._quick_stop = False
        self.activate_timeout = float(activate_timeout)
        self.network: canopen.Network | None = None
        self.nodes: list[canopen.BaseNode402] = []
        # Per-drive scale factors (filled in configure from the drive's objects).
        self.rad_per_increment = np.zeros(n)
        self.nm_per_permille = np.zeros(n)
        self.max_torque_permille = np.zeros(n)
        # Receive slots, written by the notifier thread: [drive][pdo] -> bytes of the last TPDO.
        self._rx = [[bytearray(8), bytearray(8)] for _ in range(n)]
        self._rx_gen = np.zeros((n, 2), dtype=np.int64)
        self._gen = 0
        self._pending = 0
        self._event = threading.Event()
        self._slot_of_cob: dict[int, tuple[int, int]] = {}
        self._hb_time = np.zeros(n)
        self._hb_state = np.zeros(n, dtype=np.int64)
        self._emcy = [""] * n         # each drive's last emergency, as a phrase
        self.statusword = np.zeros(n, dtype=np.int64)
        self._controlword = [CW_DISABLE_VOLTAGE] * n
        self._missed = np.zeros(n, dtype=np.int64)
        self._got = np.zeros(n, dtype=bool)
        self._rpdo = [can.Message(arbitration_id=0x200 + i, data=bytearray(4), is_extended_id=False) for i in ids]
        self._sync = can.Message(arbitration_id=0x80, data=b"", is_extended_id=False)
        self._a_pos, self._a_vel, self._a_tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self._j_vec, self._j_tau, self._cmd = np.zeros(n), np.zeros(n), np.zeros(n)
        self._send_errors = 0
        self._awaiting = False
        self._sent_at = 0.0
        self.last_rtt = 0.0
        self.saturated_cycles = 0
        self._reset_health()

    def _reset_health(self):
        self.health = DriverHealth()
        for key in CAN_COUNTERS:
            self.health.extra[key] = 0
        self.health.extra["heartbeats"] = 0
        self.health.extra["emcy"] = 0
        self.health.extra["missed_by_drive"] = [0] * len(self.can_ids)

    # -- configuration (not real time: SDO, blocking with the canopen timeouts) ----------
    def on_configure(self) -> None:
        self._reset_health()
        self._missed[:] = 0
        self._send_errors = 0
        if self.network is None:
            if self.bus is None:
                self.bus = open_bus(self.can_interface, self.can_channel, **self.bus_options)
                self._own_bus = True
            net = canopen.Network(self.bus)
            self._release = release_with(self, _release_network, net, self.bus if self._own_bus else None,
                                         self._heartbeat_stop)
            drain(self.bus)
            known = {0, 0x80}
            for i in self.can_ids:
                known.update({0x80 + i, 0x180 + i, 0x280 + i, 0x380 + i, 0x480 + i, 0x200 + i, 0x300 + i,
                              0x400 + i, 0x500 + i, 0x580 + i, 0x600 + i, 0x700 + i})
            net.listeners.append(_BusWatch(self.health.extra, known))
            self._watch = net.listeners[-1]
            net.connect()
            self.network = net
            self.nodes = []
            for k, i in enumerate(self.can_ids):
                od = self.object_dictionary if self.object_dictionary is not None else drive_object_dictionary()
                node = canopen.BaseNode402(i, od)
                net.add_node(node)
                node.nmt.add_heartbeat_callback(lambda state, k=k: self._on_heartbeat(k, state))
                node.emcy.add_callback(lambda err, k=k: self._on_emcy(k, err))
                self.nodes.append(node)
        else:
            self._watch.extra = self.health.extra
        for k, node in enumerate(self.nodes):
            node.nmt.state = "PRE-OPERATIONAL"
        for k, node in enumerate(self.nodes):
            self._configure_node(k, node)
        for node in self.nodes:
            node.nmt.state = "OPERATIONAL"
        self._booted[:] = False
        deadline = time.monotonic() + max(0.5, 3 * self.heartbeat_period)
        while time.monotonic() < deadline and not np.all(self._hb_state == 5):
            time.sleep(0.002)
        if not np.all(self._hb_state == 5):
            bad = [self.can_ids[k] for k in range(len(self.can_ids)) if self._hb_state[k] != 5]
            raise TimeoutError(f"{self.name}: no operational heartbeat from nodes {bad}")

    def _configure_node(self, k: int, node) -> None:
        sdo = node.sdo
        supported = sdo[SUPPORTED_MODES].raw
        if not supported & SUPPORTED_CST_BIT:
            raise ValueError(f"{self.name}: node {node.id} does not support cyclic synchronous torque "
                             f"(0x6502 = 0x{supported:08X})")
        sdo[HEARTBEAT_TIME].raw = int(round(self.heartbeat_period * 1000))
        # The drive watches this master's heartbeat (0x1016) and reacts to its loss by 0x6007.
        sdo[ABORT_CONNECTION].raw = CONNECTION_LOSS_REACTIONS[self.connection_loss_reaction]
        ms = int(round(self.master_heartbeat_timeout * 1000))
        sdo[CONSUMER_HEARTBEAT][1].raw = self.master_node_id << 16 | ms if ms else 0
        sdo[MODES_OF_OPERATION].raw = CST
        rated = sdo[RATED_TORQUE].raw
        increments = sdo[ENCODER_RESOLUTION][1].raw
        revolutions = sdo[ENCODER_RESOLUTION][2].raw
        self.max_torque_permille[k] = sdo[MAX_TORQUE].raw
        if not rated > 0 or not increments > 0 or not revolutions > 0:
            raise ValueError(f"{self.name}: node {node.id} reports rated torque {rated} mN m, encoder "
                             f"{increments} increments per {revolutions} revolutions")
        self.nm_per_permille[k] = rated / 1e6
        self._check_gear_ratio(k, node)
        self.rad_per_increment[k] = 2 * np.pi * revolutions / increments
        # PDO mapping through canopen's PDO API (uploaded, replaced, downloaded by SDO).
        node.tpdo.read()
        node.rpdo.read()
        for maps in (node.tpdo, node.rpdo):
            for pdo in maps.values():
                pdo.clear()
                pdo.enabled = False
        layout = ((node.tpdo[1], 0x180, (STATUSWORD, POSITION_ACTUAL, TORQUE_ACTUAL)),
                  (node.tpdo[2], 0x280, (VELOCITY_ACTUAL, MODES_DISPLAY)),
                  (node.rpdo[1], 0x200, (CONTROLWORD, TARGET_TORQUE)))
        for pdo, base, objects in layout:
            for index in objects:
                pdo.add_variable(index)
            pdo.cob_id = base + node.id
            pdo.trans_type = 1          # synchronous, every SYNC
            pdo.enabled = True
        node.tpdo.save()
        node.rpdo.save()
        for which, base in ((0, 0x180), (1, 0x280)):
            cob = base + node.id
            self._slot_of_cob[cob] = (k, which)
            self.network.unsubscribe(cob)
            self.network.subscribe(cob, self._on_tpdo)

    def _check_gear_ratio(self, k: int, node) -> None:
        """The config's ratio (joint = motor / ratio) against the one the drive declares (0x6091): apart, every
        position and torque would be off by their quotient."""
        gear = declared_gear_ratio(node.sdo)
        ratio = abs(self.transmission.matrix[k, k])
        if gear and gear[1] and self.transmission.is_diagonal and not np.isclose(gear[0] / gear[1], ratio, 1e-6):
            raise ValueError(f"{self.name}: node {node.id}: the drive's gear ratio 0x6091 is {gear[0]}:{gear[1]} "
                             f"(motor:shaft revolutions, {gear[0] / gear[1]:g}), the config's [driver] gear_ratio "
                             f"is {ratio:g}: make them agree")

    # -- callbacks (notifier thread) ---------------------------------------------------
    def _on_tpdo(self, can_id, data, timestamp):
        k, which = self._slot_of_cob[can_id]
        self._rx[k][which][:len(data)] = data
        if self._rx_gen[k, which] != self._gen:
            self._rx_gen[k, which] = self._gen
            self._pending -= 1
            if self._pending <= 0:
                self._event.set()
        else:
            self.health.extra["late_replies"] += 1

    def _on_heartbeat(self, k, state):
        self._hb_time[k] = time.monotonic()
        self._hb_state[k] = state
        if state == 0:                    # boot-up: the drive was reset and lost its configuration
            self._booted[k] = True
        self.health.extra["heartbeats"] += 1

    def _on_emcy(self, k, err):
        self._emcy[k] = emergency_line(err.code, err.register, bytes(err.data))
        self.health.extra["emcy"] += 1

    # -- the cycle ---------------------------------------------------------------------
    def _send(self, msg) -> None:
        try:
            self.bus.send(msg, timeout=self.read_timeout)
            self._send_errors = 0
        except Exception:  # noqa: BLE001
            self._send_errors += 1
            self.health.extra["bus_errors"] += 1
            self.health.extra["dropped_sends"] += 1
            if self._send_errors >= self.max_bus_errors:
                self.health.set_fault(f"{self.name}: {self._send_errors} consecutive failed sends")

    def _exchange(self, controlwords, torques_permille) -> None:
        """Send every drive's RPDO and then the SYNC; arm the reception of the answers."""
        for k, msg in enumerate(self._rpdo):
            _RPDO1.pack_into(msg.data, 0, controlwords[k], int(torques_permille[k]))
            self._send(msg)
        self._gen += 1
        self._pending = 2 * len(self.can_ids)
        self._event.clear()
        self._sent_at = time.perf_counter()
        self._send(self._sync)
        self._awaiting = True

    def _collect(self, timeout: float) -> None:
        if self._pending > 0:
            self._event.wait(timeout)
        gen = self._gen
        for k in range(len(self.can_ids)):
            self._got[k] = self._rx_gen[k, 0] == gen and self._rx_gen[k, 1] == gen
            if self._got[k]:
                sw, pos, tau = _TPDO1_SIGNED.unpack_from(self._rx[k][0], 0)
                vel, _mode = _TPDO2.unpack_from(self._rx[k][1], 0)
                self.statusword[k] = sw
                self._a_pos[k] = pos * self.rad_per_increment[k]
                self._a_vel[k] = vel * self.rad_per_increment[k]
                self._a_tau[k] = tau * self.nm_per_permille[k]

    def on_activate(self) -> None:
        """Walk every drive to OPERATION ENABLED through RPDO controlwords on SYNC (bounded wait)."""
        n = len(self.can_ids)
        reset = [self.can_ids[k] for k in range(n) if self._booted[k]]
        if reset:
            raise RuntimeError(f"{self.name}: nodes {reset} sent a boot-up message since configure() (they were "
                               f"reset and lost their configuration): configure again")
        zero = [0] * n
        deadline = time.monotonic() + self.activate_timeout
        cw = list(self._controlword)
        while True:
            self._exchange(cw, zero)
            self._collect(0.02)
            if all(self._got) and all(self.statusword[k] & SW_OPERATION_ENABLED_MASK == SW_OPERATION_ENABLED
                                      for k in range(n)):
                break
            if time.monotonic() > deadline:
                states = {self.can_ids[k]: state_of(int(self.statusword[k])) for k in range(n)}
                raise TimeoutError(f"{self.name}: drives did not reach OPERATION ENABLED: {states}")
            for k in range(n):
                if self._got[k]:
                    cw[k] = next_controlword(int(self.statusword[k]), cw[k])
            time.sleep(0.002)
        self._controlword = [CW_ENABLE_OPERATION] * n
        self._quick_stop = False
        self._start_master_heartbeat()
        self._missed[:] = 0
        self._awaiting = False

    def read(self, state, now: float) -> bool:
        health = self.health
        fresh = False
        if self._awaiting:
            self._collect(self.read_timeout)
            if self._pending <= 0:
                self.last_rtt = time.perf_counter() - self._sent_at
            for k in range(len(self.can_ids)):
                if self._got[k]:
                    self._missed[k] = 0
                    fresh = True
                    sw = int(self.statusword[k])
                    if sw & SW_OPERATION_ENABLED_MASK != SW_OPERATION_ENABLED and not health.fault:
                        code = f", {self._emcy[k]}" if self._emcy[k] else ""
                        why = " after the quick stop this driver requested" if self._quick_stop else ""
                        health.set_fault(f"{self.name}: node {self.can_ids[k]} in {state_of(sw)}{why} "
                                         f"(statusword 0x{sw:04X}{code})")
                else:
                    self._missed[k] += 1
                    health.timeouts += 1
                    health.extra["missed_by_drive"][k] += 1
                    if self._missed[k] >= self.max_failed_cycles:
                        health.set_fault(f"{self.name}: node {self.can_ids[k]} missed {self._missed[k]} "
                                         f"consecutive TPDOs")
            if not self._got.all():
                health.stale_cycles += 1
            self._awaiting = False
        mono = time.monotonic()
        for k in range(len(self.can_ids)):
            if self._booted[k]:
                health.set_fault(f"{self.name}: node {self.can_ids[k]} sent a boot-up message: it was reset "
                                 f"and lost its configuration (configure again)")
            elif mono - self._hb_time[k] > self.heartbeat_timeout:
                health.set_fault(f"{self.name}: heartbeat of node {self.can_ids[k]} lost "
                                 f"({(mono - self._hb_time[k]) * 1e3:.0f} ms old)")
            elif self._hb_state[k] != 5:
                health.set_fault(f"{self.name}: node {self.can_ids[k]} left NMT OPERATIONAL "
                                 f"(heartbeat state {int(self._hb_state[k])})")
        notifier = self.network.notifier if self.network is not None else None
        if notifier is not None and getattr(notifier, "exception", None) is not None:
            health.set_fault(f"{self.name}: CAN receive failed: {notifier.exception}")
        health.reads += 1
        return self.publish_measurement(state, self.transmission, self._a_pos, self._a_vel, self._a_tau,
                                        self._j_vec, now, fresh)

    def write(self, command, now: float) -> None:
        np.take(command.effort, self.v_index, out=self._j_tau)
        self.transmission.to_actuator_effort(self._j_tau, self._cmd)
        cmd = self._cmd
        np.divide(cmd, self.nm_per_permille, out=cmd)
        np.round(cmd, out=cmd)
        if np.any(np.abs(cmd) > self.max_torque_permille):
            self.saturated_cycles += 1
            np.clip(cmd, -self.max_torque_permille, self.max_torque_permille, out=cmd)
        self._exchange(self._controlword, cmd)
        self.health.writes += 1

    def _start_master_heartbeat(self) -> None:
        """The master's heartbeat (0x700 + master_node_id, state OPERATIONAL), from a thread of this process
        while the driver is active: a dead control process is a lost master for every drive."""
        if not self.master_heartbeat_timeout or self._heartbeat_thread is not None:
            return
        self._heartbeat_stop.clear()
        bus, msg, period, stop = self.bus, self._master_heartbeat, self.master_heartbeat_period, self._heartbeat_stop

        def beat():
            while True:
                try:
                    bus.send(msg)
                except Exception:  # noqa: BLE001  (a failed send is a missed heartbeat; the drives react)
                    pass
                if stop.wait(period):
                    return
        self._heartbeat_thread = threading.Thread(target=beat, daemon=True, name="cia402-master-heartbeat")
        self._heartbeat_thread.start()

    def _stop_master_heartbeat(self) -> None:
        if self._heartbeat_thread is not None:
            self._heartbeat_stop.set()
            self._heartbeat_thread.join(1.0)
            self._heartbeat_thread = None

    def quick_stop(self) -> None:
        """Send the quick stop command (controlword 0x02) now and in every later cycle: each drive stops as
        its quick stop option code 0x605A says (QUICK STOP ACTIVE, then SWITCH ON DISABLED for codes 1-4),
        and this driver reports the drives' leaving OPERATION ENABLED as its fault. ``activate`` again to
        return to service."""
        n = len(self.can_ids)
        self._quick_stop = True
        self._controlword = [CW_QUICK_STOP] * n
        self._exchange(self._controlword, [0] * n)
        self._awaiting = False

    def safe_stop(self) -> None:
        """Quick stop every drive (the drives' own ramp and power-off, per 0x605A); never raises."""
        try:
            self.quick_stop()
        except Exception:  # noqa: BLE001
            pass

    def on_deactivate(self) -> None:
        n = len(self.can_ids)
        self._controlword = [CW_SHUTDOWN] * n
        for _ in range(2):
            self._exchange(self._controlword, [0] * n)
            self._collect(0.02)
        self._awaiting = False
        # Live drives stop watching the master's heartbeat before it stops (SDO, not real time).
        mono = time.monotonic()
        for k, node in enumerate(self.nodes):
            if self.master_heartbeat_timeout and mono - self._hb_time[k] < self.heartbeat_timeout:
                try:
                    node.sdo[CONSUMER_HEARTBEAT][1].raw = 0
                except Exception:  # noqa: BLE001  (a drive that does not answer will react to the lost master)
                    pass
        self._stop_master_heartbeat()

    def close(self) -> None:
        """Stop the master heartbeat and the receive thread, and shut the bus down if this driver opened it
        (done at exit too if nobody calls this)."""
        self._stop_master_heartbeat()
        if self._release is not None:
            self._release()
            self._release = None
        elif self.bus is not None and self._own_bus:     # configure failed before the network existed
            shutdown_bus(self.bus)
        self.network = None
        self.bus = None


def _release_network(net: canopen.Network, own_bus, heartbeat_stop: threading.Event) -> None:
    """The driver's teardown without the driver (a finalizer's): master heartbeat thread told to stop, receive
    thread stopped, then the bus shut down if the driver opened it."""
    heartbeat_stop.set()
    try:
        if net.notifier is not None:
            net.notifier.stop(1.0)
    finally:
        if own_bus is not None:
            shutdown_bus(own_bus)
        net.bus = None
