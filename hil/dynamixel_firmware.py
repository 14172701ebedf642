"""The emulated firmware of DYNAMIXEL X-series servos: control table, Protocol 2.0 instructions, Bus Watchdog,
hardware errors. No physics here (:mod:`hil.dynamixel_emulator` drives a plant with it).

What the ROBOTIS e-manual specifies and this firmware does ("P2" is the DYNAMIXEL Protocol 2.0 page,
"CT" the XM430-W350 control table):

* Status packet error numbers (P2, Status Packet / Error): Result Fail (CLEAR while moving, CONTROL TABLE
  BACKUP with torque on or nothing to restore), Instruction Error (undefined instruction, ACTION without REG
  WRITE), CRC Error (an instruction packet addressed to the servo whose CRC does not match), Data Range Error
  (a value outside an item's range; a goal while the Bus Watchdog error is set), Data Length Error (a write
  that covers part of an item, malformed parameters), Data Limit Error (a goal outside its configured limit
  item: Min/Max Position Limit, Current, Velocity, PWM Limit), Access Error (write to a read-only or undefined
  address, EEPROM or Indirect Address write while Torque Enable is 1, read beyond the table). Bit 7 (Alert) is
  set in every status packet while Hardware Error Status is not 0. A refused write changes nothing (all items
  of a packet or none).
* Instructions (P2, Instruction Details): PING, READ, WRITE, REG WRITE + ACTION (Registered Instruction 69),
  FACTORY RESET (0xFF all, 0x01 all but ID, 0x02 all but ID and baud rate; 0xFF to the broadcast ID is not
  executed), REBOOT, CLEAR (multi-turn), CONTROL TABLE BACKUP (store / restore), SYNC READ/WRITE, BULK READ/
  WRITE, FAST SYNC READ and FAST BULK READ (one status packet from 0xFE, per-servo error, ID, data and running
  CRC, no byte stuffing). The broadcast ID gets status packets for PING and the (fast) sync/bulk reads only.
* Status Return Level (CT 68): 0 answers PING only, 1 PING and reads, 2 everything. Return Delay Time (CT 9,
  2 us units). ID (CT 7) and Baud Rate (CT 8) take effect at once: a servo answers at its new ID, and only
  hears packets sent at its baud rate (when the port's bit rate is known, see ``Firmware.line_baud``).
* Bus Watchdog (CT 98, 20 ms units): while Torque Enable is 1, an interval between instruction packets for the
  servo longer than the set time stops it (position modes hold where they are, velocity mode goes to 0, current
  and PWM modes output 0), the item reads -1 and goal writes get Data Range Error until 0 is written.
* Hardware Error Status (CT 70) and Shutdown (CT 63): the conditions whose bit is set in Shutdown are detected
  -- input voltage outside Min/Max Voltage Limit, temperature above Temperature Limit, overload (output
  saturated for :data:`~rtctl.hil.dynamixel_servo.OVERLOAD_TIME`) or an injected fault -- set their bit, clear
  Torque Enable and latch until REBOOT; Torque Enable cannot be set to 1 while one is latched (the write gets
  Result Fail).
* Indirect Address / Indirect Data (CT 168-251, 578-661): each Indirect Data byte reads and writes the address
  its Indirect Address names, with that item's access, size, range and limits (:mod:`rtctl.hil.dynamixel_servo`),
  also in (fast) sync and bulk reads and writes.

The servo itself (control table, write checks, watchdog, error conditions) is :class:`Servo`.
"""
from __future__ import annotations

import math
import random

from rtctl.drivers.dynamixel import protocol as P
from rtctl.drivers.dynamixel.control_table import BAUD_RATES

from .dynamixel_servo import READ_ONLY, Servo  # noqa: F401  (re-exported)

READ_INSTRUCTIONS = {P.READ, P.SYNC_READ, P.BULK_READ, P.FAST_SYNC_READ, P.FAST_BULK_READ}
TICK = 2e-3             # s between checks of the Bus Watchdog and the hardware error conditions
HW_BITS = {"input_voltage": P.HW_INPUT_VOLTAGE, "overheating": P.HW_OVERHEATING, "encoder": P.HW_MOTOR_ENCODER,
           "electrical_shock": P.HW_ELECTRICAL_SHOCK, "overload": P.HW_OVERLOAD}


class Firmware:
    """The servos of one bus: instruction packets in, status packets out (``pending``: (send time, bytes)).

    Fault injection: ``drop_rate`` / ``corrupt_rate`` (each status packet lost / its CRC flipped with that
    probability), ``delay_sync_read``/``delay_ms`` (the replies to that SYNC READ are late), ``late_read`` (the
    status packet of that READ, 1-based, goes out once more just before the reply to the next instruction packet:
    a late reply, as the first reply to a READ the master timed out on and re-sent), ``inject`` ((seconds after
    the first instruction packet, servo id, hardware error bits) to latch then)."""

    def __init__(self, servos, drop_rate: float = 0.0, corrupt_rate: float = 0.0, delay_sync_read: int = 0,
                 delay_ms: float = 0.0, seed: int = 0, inject=(), late_read: int = 0):
        self.servos = list(servos)
        self.rng = random.Random(seed)
        self.drop_rate, self.corrupt_rate = drop_rate, corrupt_rate
        self.delay_sync_read, self.delay_s = delay_sync_read, delay_ms * 1e-3
        self.inject = sorted(inject)
        self.late_read, self._held = late_read, None
        self.stats = {k: 0 for k in ("packets", "replies", "dropped", "corrupted", "delayed", "sync_reads",
                                      "sync_writes", "fast_reads", "bad_instruction", "steps", "lag_skips", "crc_errors_in",
                                      "refused_writes", "watchdog_expiries", "hardware_errors",
                                      "factory_resets_refused", "reads", "late_replies")}
        self.watchdog_events: list[dict] = []
        self.torque_events: list[list] = []      # [time, servo id, "torque on" | "torque off"] as it changes
        self._torque_was = [s.torque_on() for s in self.servos]
        self.pending: list[tuple[float, bytes]] = []
        self._last_reply = None
        self._last_tick = -1.0
        self.line_baud = None           # the port's bit rate if known: servos set to another rate hear nothing
        self.t_first = None

    @property
    def by_id(self) -> dict:
        """The servos that hear the bus now, by their current ID."""
        return {s.id: s for s in self.servos
                if self.line_baud is None or BAUD_RATES.get(s.get("baud_rate")) == self.line_baud}

    # -- periodic: watchdog, hardware errors --------------------------------------------------
    def tick(self, now: float) -> None:
        if now - self._last_tick < TICK:
            return
        self._last_tick = now
        while self.inject and self.t_first is not None and now - self.t_first >= self.inject[0][0]:
            _, dxl_id, bits = self.inject.pop(0)
            for s in self.servos:
                if s.id == dxl_id and s.detect(bits):
                    self.stats["hardware_errors"] += 1
        for s in self.servos:
            event = s.check_watchdog(now)
            if event is not None:
                self.stats["watchdog_expiries"] += 1
                self.watchdog_events.append(event)
            if s.detect(s.conditions(now)):
                self.stats["hardware_errors"] += 1
        self._note_torque(now)

    def _note_torque(self, now: float) -> None:
        for k, s in enumerate(self.servos):
            on = s.torque_on()
            if on != self._torque_was[k]:
                self._torque_was[k] = on
                self.torque_events.append([now, s.id, "torque on" if on else "torque off"])

    # -- replies ----------------------------------------------------------------------------------
    def _send(self, data: bytes, servo: Servo, now: float, extra_delay: float = 0.0) -> None:
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.stats["dropped"] += 1
            return
        if self.corrupt_rate and self.rng.random() < self.corrupt_rate:
            data = data[:-1] + bytes([data[-1] ^ 0x5A])
            self.stats["corrupted"] += 1
        if extra_delay:
            self.stats["delayed"] += 1
        t = now + servo.get("return_delay_time") * 2e-6 + extra_delay
        if self._last_reply is not None:     # replies to one packet go out in the order of its ids
            t = max(t, self._last_reply)
        self._last_reply = t
        self.pending.append((t, data))
        self.stats["replies"] += 1

    def _reply(self, servo: Servo, inst: int, error: int, params, now: float, extra_delay: float = 0.0) -> None:
        """A status packet, if the Status Return Level answers ``inst`` (PING always)."""
        level = servo.get("status_return_level")
        if inst != P.PING and (level == 0 or (level == 1 and inst not in READ_INSTRUCTIONS)):
            return
        self._send(P.encode_status(servo.id, servo.status_error(error), params), servo, now, extra_delay)

    def due(self, now: float):
        """Pop the replies whose send time has come (in order)."""
        out, keep = [], []
        for t, data in self.pending:
            (out if t <= now else keep).append((t, data))
        self.pending = keep
        return [d for _, d in sorted(out, key=lambda x: x[0])]

    # -- instruction packets ---------------------------------------------------------------------
    def handle(self, pkt: P.Packet, now: float) -> None:
        self.stats["packets"] += 1
        if pkt.instruction == P.STATUS:
            return
        if self.t_first is None:
            self.t_first = now
        self._last_reply = None
        if self._held is not None:
            self.pending.append((now, self._held))
            self._held, self._last_reply = None, now
            self.stats["late_replies"] += 1
        servos = self.by_id
        targets = list(servos.values()) if pkt.id == P.BROADCAST_ID else \
            ([servos[pkt.id]] if pkt.id in servos else [])
        for s in targets:
            s.wd_last = now
        handler = HANDLERS.get(pkt.instruction)
        if handler is None:
            self.stats["bad_instruction"] += 1
            self._unicast(pkt, targets, lambda s: P.ERROR_INSTRUCTION, now)
        else:
            handler(self, pkt, servos, targets, now)
        self._note_torque(now)

    def crc_error(self, pkt: P.Packet, now: float) -> None:
        """An instruction packet whose CRC did not match: the servo it names answers CRC Error."""
        self.stats["crc_errors_in"] += 1
        s = self.by_id.get(pkt.id)
        self._last_reply = None
        if s is not None and pkt.instruction != P.STATUS:
            self._reply(s, pkt.instruction, P.ERROR_CRC, b"", now)

    def _unicast(self, pkt, targets, execute, now, params=b"") -> None:
        """Run ``execute(servo) -> error`` on each target; answer only an instruction sent to one ID."""
        for s in targets:
            error = execute(s)
            if pkt.id != P.BROADCAST_ID:
                self._reply(s, pkt.instruction, error, params, now)

    def _ping(self, pkt, servos, targets, now) -> None:
        for s in targets:
            self._reply(s, P.PING, 0, P.u16(s.get("model_number")) + bytes([s.get("firmware_version")]), now)

    def _read(self, pkt, servos, targets, now) -> None:
        if pkt.id == P.BROADCAST_ID or not targets:
            return                                     # READ is not executed for the broadcast ID
        s, params = targets[0], pkt.params
        if len(params) != 4:
            self._reply(s, P.READ, P.ERROR_DATA_LENGTH, b"", now)
            return
        error, data = s.read(params[0] | params[1] << 8, params[2] | params[3] << 8)
        self._reply(s, P.READ, error, data, now)
        self.stats["reads"] += 1
        if self.stats["reads"] == self.late_read:
            self._held = P.encode_status(s.id, s.status_error(error), data)

    def _write(self, pkt, servos, targets, now) -> None:
        params = pkt.params

        def execute(s):
            error = P.ERROR_DATA_LENGTH if len(params) < 3 else s.write(params[0] | params[1] << 8, params[2:])
            self.stats["refused_writes"] += bool(error)
            return error
        self._unicast(pkt, targets, execute, now)

    def _reg_write(self, pkt, servos, targets, now) -> None:
        params = pkt.params

        def execute(s):
            if len(params) < 3:
                return P.ERROR_DATA_LENGTH
            error = s.check_write(params[0] | params[1] << 8, params[2:])
            if not error:
                s.registered = (params[0] | params[1] << 8, bytes(params[2:]))
                s.set("registered_instruction", 1)
            return error
        self._unicast(pkt, targets, execute, now)

    def _action(self, pkt, servos, targets, now) -> None:
        def execute(s):
            if s.registered is None:
                return P.ERROR_INSTRUCTION
            address, data = s.registered
            s.registered = None
            s.set("registered_instruction", 0)
            return s.write(address, data)
        self._unicast(pkt, targets, execute, now)

    def _factory_reset(self, pkt, servos, targets, now) -> None:
        params = pkt.params
        error = P.ERROR_DATA_LENGTH if len(params) != 1 else \
            (P.ERROR_DATA_RANGE if params[0] not in (0x01, 0x02, 0xFF) else 0)
        if not error and pkt.id == P.BROADCAST_ID and params[0] == 0xFF:
            self.stats["factory_resets_refused"] += 1  # reset-all to every servo at once is not executed
            return
        self._unicast(pkt, targets, lambda s: error, now)
        for s in targets if not error else ():
            s.factory_reset(params[0])

    def _reboot(self, pkt, servos, targets, now) -> None:
        self._unicast(pkt, targets, lambda s: 0, now)
        for s in targets:
            s.boot()

    def _clear(self, pkt, servos, targets, now) -> None:
        params = bytes(pkt.params)

        def execute(s):
            if len(params) != len(P.CLEAR_MULTI_TURN):
                return P.ERROR_DATA_LENGTH
            if params != P.CLEAR_MULTI_TURN:
                return P.ERROR_DATA_RANGE
            if s.moving():
                return P.ERROR_RESULT_FAIL              # only while the servo is stopped
            s.clear_multi_turn()
            return 0
        self._unicast(pkt, targets, execute, now)

    def _backup(self, pkt, servos, targets, now) -> None:
        params = bytes(pkt.params)
        restore = []

        def execute(s):
            if len(params) != 5:
                return P.ERROR_DATA_LENGTH
            if params[0] not in (0x01, 0x02) or params[1:] != P.BACKUP_MAGIC:
                return P.ERROR_DATA_RANGE
            if s.torque_on() or (params[0] == 0x02 and s.backup is None):
                return P.ERROR_RESULT_FAIL
            if params[0] == 0x01:
                s.store_backup()
            else:
                restore.append(s)
            return 0
        self._unicast(pkt, targets, execute, now)
        for s in restore:                               # after the status packet: restore, then reboot
            s.restore_backup()

    def _write_item(self, s: Servo, address: int, data) -> None:
        if s.write(address, data):
            self.stats["refused_writes"] += 1

    def _sync_write(self, pkt, servos, targets, now) -> None:
        params = pkt.params
        if pkt.id != P.BROADCAST_ID or len(params) < 4:
            return
        self.stats["sync_writes"] += 1
        address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
        body = params[4:]
        if length < 1 or len(body) % (length + 1):
            return                                       # malformed: nobody can tell which bytes are whose
        for i in range(0, len(body), length + 1):
            if body[i] in servos:
                self._write_item(servos[body[i]], address, body[i + 1:i + 1 + length])

    def _bulk_write(self, pkt, servos, targets, now) -> None:
        params, i = pkt.params, 0
        if pkt.id != P.BROADCAST_ID:
            return
        while i + 5 <= len(params):
            length = params[i + 3] | params[i + 4] << 8
            if i + 5 + length > len(params):
                return
            if params[i] in servos:
                self._write_item(servos[params[i]], params[i + 1] | params[i + 2] << 8, params[i + 5:i + 5 + length])
            i += 5 + length

    def _sync_read(self, pkt, servos, targets, now) -> None:
        params = pkt.params
        if pkt.id != P.BROADCAST_ID or len(params) < 5:
            return
        address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
        items = [(dxl_id, address, length) for dxl_id in params[4:]]
        if pkt.instruction == P.FAST_SYNC_READ:
            self._fast_read(items, servos, now)
            return
        self.stats["sync_reads"] += 1
        extra = self.delay_s if self.stats["sync_reads"] == self.delay_sync_read else 0.0
        for dxl_id, _, _ in items:
            if dxl_id in servos:
                error, data = servos[dxl_id].read(address, length)
                self._reply(servos[dxl_id], P.SYNC_READ, error, data, now, extra)

    def _bulk_read(self, pkt, servos, targets, now) -> None:
        params = pkt.params
        if pkt.id != P.BROADCAST_ID or not params or len(params) % 5:
            return
        items = [(params[i], params[i + 1] | params[i + 2] << 8, params[i + 3] | params[i + 4] << 8)
                 for i in range(0, len(params), 5)]
        if pkt.instruction == P.FAST_BULK_READ:
            self._fast_read(items, servos, now)
            return
        for dxl_id, address, length in items:
            if dxl_id in servos:
                error, data = servos[dxl_id].read(address, length)
                self._reply(servos[dxl_id], P.BULK_READ, error, data, now)

    def _fast_read(self, items, servos, now) -> None:
        """FAST SYNC/BULK READ: one status packet from the broadcast ID, each servo appending its error, ID,
        data and the CRC of the packet so far; no byte stuffing. A servo that does not answer ends the packet
        there (the master then sees a truncated packet)."""
        self.stats["fast_reads"] += 1
        out = bytearray(P.HEADER + bytes([P.BROADCAST_ID]) + P.u16(1 + sum(4 + n for _, _, n in items))
                        + bytes([P.STATUS]))
        first = None
        for dxl_id, address, length in items:
            s = servos.get(dxl_id)
            if s is None or s.get("status_return_level") == 0:
                break
            error, data = s.read(address, length)
            out += bytes([s.status_error(error), s.id]) + (data if not error else bytes(length))
            out += P.u16(P.crc16(out))
            first = first or s
        if first is not None:
            self._send(bytes(out), first, now)


HANDLERS = {P.PING: Firmware._ping, P.READ: Firmware._read, P.WRITE: Firmware._write,
            P.REG_WRITE: Firmware._reg_write, P.ACTION: Firmware._action, P.FACTORY_RESET: Firmware._factory_reset,
            P.REBOOT: Firmware._reboot, P.CLEAR: Firmware._clear, P.CONTROL_TABLE_BACKUP: Firmware._backup,
            P.SYNC_READ: Firmware._sync_read, P.FAST_SYNC_READ: Firmware._sync_read,
            P.SYNC_WRITE: Firmware._sync_write, P.BULK_READ: Firmware._bulk_read,
            P.FAST_BULK_READ: Firmware._bulk_read, P.BULK_WRITE: Firmware._bulk_write}


def parse_injection(text: str) -> tuple[float, int, int]:
    """``"ID:KIND:SECONDS"`` (KIND one of :data:`HW_BITS`) -> (seconds, id, bits)."""
    try:
        dxl_id, kind, seconds = text.split(":")
        at = float(seconds)
        if not math.isfinite(at) or at < 0:
            raise ValueError
        return at, int(dxl_id), HW_BITS[kind]
    except (ValueError, KeyError):
        raise ValueError(f"{text!r}: expected ID:KIND:SECONDS with KIND one of "
                         f"{sorted(HW_BITS)} and SECONDS finite and >= 0") from None

