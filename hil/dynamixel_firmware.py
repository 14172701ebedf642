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
  address, EEPROM write while Torque Enable is 1, read beyond the table). Bit 7 (Alert) is set in every status
  packet while Hardware Error Status is not 0. A refused write changes nothing (all items of a packet or none).
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
  saturated for :data:`OVERLOAD_TIME`) or an injected fault -- set their bit, clear Torque Enable and latch until
  REBOOT; Torque Enable cannot be set to 1 while one is latched (the write gets Result Fail).
"""
from __future__ import annotations

import math
import random

from rtctl.drivers.dynamixel import protocol as P
from rtctl.drivers.dynamixel.control_table import (
    BAUD_RATES,
    EEPROM,
    GOAL_ITEMS,
    POSITION_CONTROL,
    ServoModel,
)

READ_ONLY = {"model_number", "model_information", "firmware_version", "registered_instruction",
             "hardware_error_status", "realtime_tick", "moving", "moving_status", "present_pwm",
             "present_current", "present_velocity", "present_position", "velocity_trajectory",
             "position_trajectory", "present_input_voltage", "present_temperature"}
READ_INSTRUCTIONS = {P.READ, P.SYNC_READ, P.BULK_READ, P.FAST_SYNC_READ, P.FAST_BULK_READ}
# RAM items a CONTROL TABLE BACKUP stores besides the EEPROM area (P2, Control Table Backup).
BACKUP_RAM_ITEMS = ("velocity_i_gain", "velocity_p_gain", "position_d_gain", "position_i_gain", "position_p_gain",
                    "feedforward_2nd_gain", "feedforward_1st_gain", "profile_acceleration", "profile_velocity")
TICK = 2e-3             # s between checks of the Bus Watchdog and the hardware error conditions
OVERLOAD_TIME = 1.0     # s of continuous output saturation detected as overload (the e-manual gives no time)
HW_BITS = {"input_voltage": P.HW_INPUT_VOLTAGE, "overheating": P.HW_OVERHEATING, "encoder": P.HW_MOTOR_ENCODER,
           "electrical_shock": P.HW_ELECTRICAL_SHOCK, "overload": P.HW_OVERLOAD}


class Servo:
    """One servo's control table (a byte array laid out as :class:`ServoModel` says) and firmware state."""

    def __init__(self, dxl_id: int, spec: ServoModel):
        self.spec = spec
        self._items = {f.name: (f.address, f.address + f.size, f.signed) for f in spec.fields.values()}
        self.mem = bytearray(spec.table_size)
        self.byte_field = [None] * spec.table_size
        for f in spec.fields.values():
            self.byte_field[f.address:f.address + f.size] = [f] * f.size
        self.backup: bytes | None = None
        self.position_offset = 0          # counts added by CLEAR (multi-turn reset)
        self.load_defaults()
        self.set("id", dxl_id)
        self.boot()

    # -- raw access ---------------------------------------------------------------------
    @property
    def id(self) -> int:
        return self.mem[self.spec["id"].address]

    def get(self, name: str) -> int:
        start, end, signed = self._items[name]
        return int.from_bytes(self.mem[start:end], "little", signed=signed)

    def set(self, name: str, value: int) -> None:
        start, end, _ = self._items[name]
        self.mem[start:end] = (int(value) & ((1 << (8 * (end - start))) - 1)).to_bytes(end - start, "little")

    def torque_on(self) -> bool:
        return self.mem[self._items["torque_enable"][0]] != 0

    def status_error(self, error: int) -> int:
        """The error byte of a status packet: ``error`` plus the Alert bit while a hardware error is latched."""
        return error | (P.ERROR_ALERT if self.get("hardware_error_status") else 0)

    # -- power-on, reboot, factory reset ---------------------------------------------------
    def load_defaults(self, keep=()) -> None:
        kept = {name: self.get(name) for name in keep}
        self.mem[:] = bytes(len(self.mem))
        for f in self.spec.fields.values():
            if f.default is not None:
                self.set(f.name, f.default)
        for name, value in kept.items():
            self.set(name, value)

    def boot(self) -> None:
        """The state after power-on or REBOOT: RAM items at their defaults (present values kept), no hardware
        error, no Bus Watchdog, nothing registered; the goal position is the present position."""
        present = {f.name: self.get(f.name) for f in self.spec.fields.values() if f.name in READ_ONLY}
        for f in self.spec.fields.values():
            if f.area != EEPROM and f.default is not None:
                self.set(f.name, f.default)
        for name in ("present_position", "present_velocity", "present_current", "present_input_voltage",
                     "present_temperature"):
            self.set(name, present[name])
        self.set("hardware_error_status", 0)
        self.set("goal_position", present["present_position"])
        self.integral = 0.0
        self.stopped = False            # stopped by the Bus Watchdog
        self.hold = None                # position (counts) held while stopped
        self.wd_last = None             # time of the last instruction packet for this servo
        self.registered = None          # (address, data) of a REG WRITE
        self.saturated_since = None     # output saturated since (overload detection)

    def factory_reset(self, option: int) -> None:
        keep = {0x01: ("id",), 0x02: ("id", "baud_rate")}.get(option, ())
        self.load_defaults(keep + ("present_position", "present_velocity", "present_current",
                                   "present_input_voltage", "present_temperature"))
        self.boot()

    # -- writes ----------------------------------------------------------------------------
    def fields_in(self, address: int, length: int):
        out = []
        for f in self.byte_field[address:address + length]:
            if not out or out[-1] is not f:
                out.append(f)
        return out

    def check_write(self, address: int, data) -> int:
        """Error number for writing ``data`` at ``address`` (0 if allowed), in the order the e-manual lists
        the causes: access (undefined, read-only, EEPROM locked), then length (part of an item), then value."""
        return self._check(address, data, self.fields_in(address, len(data)))

    def _check(self, address: int, data, fields) -> int:
        end = address + len(data)
        if not data or end > len(self.mem):
            return P.ERROR_ACCESS
        if any(f is None or f.name in READ_ONLY for f in fields):
            return P.ERROR_ACCESS
        if self.torque_on() and any(f.area == EEPROM for f in fields):
            return P.ERROR_ACCESS
        if fields[0].address < address or fields[-1].address + fields[-1].size > end:
            return P.ERROR_DATA_LENGTH
        trial = bytearray(self.mem)
        trial[address:end] = data
        for f in fields:
            err = self._value_error(f, P.from_bytes(trial[f.address:f.address + f.size], f.signed), trial)
            if err:
                return err
        return 0

    def _value_error(self, f, value: int, trial) -> int:
        name = f.name
        if name in GOAL_ITEMS and self.get("bus_watchdog") == -1:
            return P.ERROR_DATA_RANGE                  # goals are read-only until the watchdog error is cleared
        if name == "bus_watchdog" and self.get("bus_watchdog") == -1 and value != 0:
            return P.ERROR_DATA_RANGE                  # the error is cleared by writing 0
        if name == "torque_enable" and value and self.get("hardware_error_status"):
            return P.ERROR_RESULT_FAIL                 # only REBOOT re-enables torque after a shutdown
        allowed = self.spec.ranges.get(name)
        if allowed is not None:
            ok = allowed[0] <= value <= allowed[1] if len(allowed) == 2 else value in allowed
            if not ok:
                return P.ERROR_DATA_RANGE
        limit = self.spec.limits.get(name)
        if limit is not None and not (name == "goal_position" and self._mode(trial) != POSITION_CONTROL):
            high = self._item(trial, limit[1])
            low = -high if limit[0] is None else self._item(trial, limit[0])
            if not low <= value <= high:
                return P.ERROR_DATA_LIMIT
        return 0

    def _item(self, mem, name: str) -> int:
        f = self.spec[name]
        return P.from_bytes(mem[f.address:f.address + f.size], f.signed)

    def _mode(self, mem) -> int:
        return self._item(mem, "operating_mode")

    def write(self, address: int, data) -> int:
        fields = self.fields_in(address, len(data))
        err = self._check(address, data, fields)
        if err:
            return err
        names = {f.name for f in fields}
        mode = self.get("operating_mode")
        self.mem[address:address + len(data)] = data
        if "operating_mode" in names and self.get("operating_mode") != mode:
            self._mode_changed()
        if names & {"goal_position", "torque_enable"}:
            self.integral = 0.0
        if names.intersection(GOAL_ITEMS) or not self.torque_on():
            self.stopped, self.hold = False, None
        return 0

    def _mode_changed(self) -> None:
        """Switching Operating Mode resets the profile to 0 and Goal PWM / Goal Current to their limits."""
        self.set("profile_velocity", 0)
        self.set("profile_acceleration", 0)
        self.set("goal_pwm", self.get("pwm_limit"))
        self.set("goal_current", self.get("current_limit"))

    def read(self, address: int, length: int):
        if length < 1 or address + length > len(self.mem):
            return P.ERROR_ACCESS, b""
        return 0, bytes(self.mem[address:address + length])

    # -- CLEAR, CONTROL TABLE BACKUP ----------------------------------------------------------
    def moving(self) -> bool:
        return abs(self.get("present_velocity")) > self.get("moving_threshold")

    def clear_multi_turn(self) -> None:
        """Present Position to its value within one revolution (the goal moves with it: no jump)."""
        present = self.get("present_position")
        shift = present % self.spec.position_counts - present
        self.position_offset += shift
        self.set("present_position", present + shift)
        self.set("goal_position", self.get("goal_position") + shift)

    def store_backup(self) -> None:
        self.backup = bytes(self.mem)

    def restore_backup(self) -> None:
        saved = self.backup
        for f in self.spec.fields.values():
            if (f.area == EEPROM and f.name not in READ_ONLY) or f.name in BACKUP_RAM_ITEMS:
                self.mem[f.address:f.address + f.size] = saved[f.address:f.address + f.size]
        self.boot()
        for name in BACKUP_RAM_ITEMS:                  # boot() put RAM at its defaults: the backup wins
            f = self.spec[name]
            self.mem[f.address:f.address + f.size] = saved[f.address:f.address + f.size]

    # -- Bus Watchdog, hardware errors -----------------------------------------------------------
    def check_watchdog(self, now: float) -> dict | None:
        """Expire the Bus Watchdog if the servo has heard nothing for longer than its time; the event or None."""
        units = self.get("bus_watchdog")
        if units <= 0 or not self.torque_on() or self.wd_last is None:
            return None
        timeout = units * self.spec.seconds_per_watchdog_unit
        if now - self.wd_last <= timeout:
            return None
        self.set("bus_watchdog", -1)
        self.stopped, self.hold = True, self.get("present_position")
        self.set("profile_acceleration", 0)
        self.set("profile_velocity", 0)
        return {"id": self.id, "timeout": timeout, "last_packet": self.wd_last, "expired": now}

    def conditions(self, now: float) -> int:
        """Hardware error bits whose condition holds now (before the Shutdown mask)."""
        bits = 0
        if not self.get("min_voltage_limit") <= self.get("present_input_voltage") <= self.get("max_voltage_limit"):
            bits |= P.HW_INPUT_VOLTAGE
        if self.get("present_temperature") > self.get("temperature_limit"):
            bits |= P.HW_OVERHEATING
        if self.saturated_since is not None and now - self.saturated_since >= OVERLOAD_TIME:
            bits |= P.HW_OVERLOAD
        return bits

    def detect(self, bits: int) -> int:
        """Latch the errors of ``bits`` that Shutdown selects: torque off. Returns the newly latched bits."""
        bits &= self.get("shutdown")
        new = bits & ~self.get("hardware_error_status")
        if new:
            self.set("hardware_error_status", self.get("hardware_error_status") | new)
            self.set("torque_enable", 0)
            self.integral, self.stopped, self.hold = 0.0, False, None
        return new


class Firmware:
    """The servos of one bus: instruction packets in, status packets out (``pending``: (send time, bytes)).

    Fault injection: ``drop_rate`` / ``corrupt_rate`` (each status packet lost / its CRC flipped with that
    probability), ``delay_sync_read``/``delay_ms`` (the replies to that SYNC READ are late), ``inject``
    ((seconds after the first instruction packet, servo id, hardware error bits) to latch then)."""

    def __init__(self, servos, drop_rate: float = 0.0, corrupt_rate: float = 0.0, delay_sync_read: int = 0,
                 delay_ms: float = 0.0, seed: int = 0, inject=()):
        self.servos = list(servos)
        self.rng = random.Random(seed)
        self.drop_rate, self.corrupt_rate = drop_rate, corrupt_rate
        self.delay_sync_read, self.delay_s = delay_sync_read, delay_ms * 1e-3
        self.inject = sorted(inject)
        self.stats = {k: 0 for k in ("packets", "replies", "dropped", "corrupted", "delayed", "sync_reads",
                                      "sync_writes", "fast_reads", "bad_instruction", "steps", "lag_skips", "crc_errors_in",
                                      "refused_writes", "watchdog_expiries", "hardware_errors",
                                      "factory_resets_refused")}
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

