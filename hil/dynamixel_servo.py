"""One emulated DYNAMIXEL X-series servo: its control table as a byte array, the checks a write passes, indirect
addressing, CLEAR, CONTROL TABLE BACKUP, the Bus Watchdog and the hardware error conditions. The instructions
that reach it are :mod:`rtctl.hil.dynamixel_firmware`'s; its docstring lists the e-manual behaviours ("P2" the
DYNAMIXEL Protocol 2.0 page, "CT" the XM430-W350 control table).

Indirect addressing (CT Indirect Address, Indirect Data): Indirect Address n (2 bytes, RAM, 1-28 at 168-223,
29-56 at 578-633, initial value its own Indirect Data byte) names the control-table address Indirect Data n
(1 byte, 224-251 and 634-661) stands for: a read of Indirect Data n reads that address, a write writes it, with
the properties of the item there ("Size, value range, and Access"): a write through it is refused as a direct
write would be -- Access Error for a read-only or undefined target, Data Length Error when the bytes written do
not cover whole items, Data Range / Data Limit Error for their values. An Indirect Address takes 64 ~ 661 (the
RAM area; else Data Range Error), and only while Torque Enable is 0 (Access Error otherwise, as the EEPROM area:
ROBOTIS' indirect-address example turns torque off for that). An Indirect Data byte naming another Indirect Data
byte (the initial state) is plain storage: one level of indirection. REBOOT resets the Indirect Addresses (RAM).
"""
from __future__ import annotations

from rtctl.drivers.dynamixel import protocol as P
from rtctl.drivers.dynamixel.control_table import EEPROM, GOAL_ITEMS, POSITION_CONTROL, ServoModel

READ_ONLY = {"model_number", "model_information", "firmware_version", "registered_instruction",
             "hardware_error_status", "realtime_tick", "moving", "moving_status", "present_pwm",
             "present_current", "present_velocity", "present_position", "velocity_trajectory",
             "position_trajectory", "present_input_voltage", "present_temperature"}
# RAM items a CONTROL TABLE BACKUP stores besides the EEPROM area (P2, Control Table Backup).
BACKUP_RAM_ITEMS = ("velocity_i_gain", "velocity_p_gain", "position_d_gain", "position_i_gain", "position_p_gain",
                    "feedforward_2nd_gain", "feedforward_1st_gain", "profile_acceleration", "profile_velocity")
OVERLOAD_TIME = 1.0     # s of continuous output saturation detected as overload (the e-manual gives no time)


class Servo:
    """One servo's control table (a byte array laid out as :class:`ServoModel` says) and firmware state."""

    def __init__(self, dxl_id: int, spec: ServoModel):
        self.spec = spec
        self._items = {f.name: (f.address, f.address + f.size, f.signed) for f in spec.fields.values()}
        self.mem = bytearray(spec.table_size)
        self.byte_field = [None] * spec.table_size
        for f in spec.fields.values():
            self.byte_field[f.address:f.address + f.size] = [f] * f.size
        self._indirect = bytearray(spec.table_size)       # 1 at each Indirect Data byte
        for a in spec.indirect:
            self._indirect[a] = 1
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
    def targets(self, address: int, length: int):
        """The address each byte of ``address:address + length`` stands for: itself, or for an Indirect Data byte
        the address its Indirect Address names (itself again when that is an Indirect Data byte)."""
        if self._indirect.find(1, address, address + length) < 0:
            return range(address, address + length)
        out = []
        for a in range(address, address + length):
            if self._indirect[a]:
                pointer = self.spec.indirect[a]
                target = self.mem[pointer] | self.mem[pointer + 1] << 8
                a = a if self._indirect[target] else target
            out.append(a)
        return out

    def _plan(self, address: int, data):
        """(target address per byte, the items they fall in, in order) of writing ``data`` at ``address``;
        None if the bytes run past the control table."""
        if not data or address + len(data) > len(self.mem):
            return None
        targets = self.targets(address, len(data))
        fields = []
        for f in (self.byte_field[targets.start:targets.stop] if isinstance(targets, range)
                  else [self.byte_field[t] for t in targets]):
            if all(f is not g for g in fields):
                fields.append(f)
        return targets, fields

    @staticmethod
    def _put(mem, targets, data) -> None:
        if isinstance(targets, range):
            mem[targets.start:targets.stop] = data
        else:
            for t, byte in zip(targets, data):
                mem[t] = byte

    def check_write(self, address: int, data) -> int:
        """Error number for writing ``data`` at ``address`` (0 if allowed), in the order the e-manual lists
        the causes: access (undefined, read-only, EEPROM or Indirect Address locked), then length (part of an
        item), then value."""
        plan = self._plan(address, data)
        return P.ERROR_ACCESS if plan is None else self._check(data, *plan)

    def _check(self, data, targets, fields) -> int:
        if any(f is None or f.name in READ_ONLY for f in fields):
            return P.ERROR_ACCESS
        if self.torque_on() and any(f.name in self.spec.torque_locked for f in fields):
            return P.ERROR_ACCESS
        if isinstance(targets, range):
            covered = fields[0].address >= targets.start and fields[-1].address + fields[-1].size <= targets.stop
        else:
            written = set(targets)
            covered = all(a in written for f in fields for a in range(f.address, f.address + f.size))
        if not covered:
            return P.ERROR_DATA_LENGTH
        trial = bytearray(self.mem)
        self._put(trial, targets, data)
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
        plan = self._plan(address, data)
        err = P.ERROR_ACCESS if plan is None else self._check(data, *plan)
        if err:
            return err
        targets, fields = plan
        names = {f.name for f in fields}
        mode = self.get("operating_mode")
        self._put(self.mem, targets, data)
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
        if self._indirect.find(1, address, address + length) < 0:
            return 0, bytes(self.mem[address:address + length])
        return 0, bytes(self.mem[t] for t in self.targets(address, length))

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
