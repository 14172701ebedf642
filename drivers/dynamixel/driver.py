"""The ``dynamixel`` backend: a chain of X-series servos on one Protocol 2.0 bus.

Servo ``servo_ids[k]`` drives actuated joint ``k`` (in model order, or the order of ``joints``) through
``transmission`` (default 1:1: the servo horn is the joint). Positions are relative to ``position_center``
(2048 counts = 0 rad). A servo silent at ``baudrate`` is PINGed at the other X-series rates to name the one it
answers at (configure still fails: the rate is the config's to change).

Every control cycle costs two bus packets:

* ``read``: one SYNC_READ of present current, velocity and position (one
  contiguous block, addresses 126-137) answered by one status packet per
  servo, waited for at most ``read_timeout`` seconds per attempt;
* ``write``: one SYNC_WRITE of goal currents (``effort`` mode, operating mode
  0: ``current = tau_motor / torque_constant``, rounded to the 2.69 mA unit
  and clamped at the current limit) or of goal positions (``position`` mode,
  operating mode 3: the servo's own position PID; joints whose command
  ``stiffness`` is 0 -- the safe command -- hold their last measured position).
  In effort mode torque is enabled by one extra SYNC_WRITE right after the
  first goal currents, so the robot does not sag at 0 A after ``activate``.

Bus trouble never raises out of ``read``/``write``: a missing status packet
is a timeout, a bad CRC is corrupt, an OS-level error (port gone) is an
``io_error``; the SYNC_READ is re-sent up to ``retries`` times within the
cycle, a cycle that still lacks a servo's reply is stale (``state.fresh`` is
False, the joints keep their last values), and ``max_failed_cycles``
consecutive stale cycles latch ``health.fault`` -- which the safety monitor
turns into the safe state. A status packet with the hardware-alert bit (bit 7
of its error byte) makes the driver read that servo's Hardware Error Status
(item 70) and latch a fault naming the servo and the error (overload,
overheating, ...); a servo already in that state refuses ``configure``.

Goals are clamped before sending (goal current to the Current Limit, goal position to the Min/Max Position
Limit read at ``configure``): the servo would refuse them, and a SYNC_WRITE has no status packet to say so.

Bus Watchdog (``bus_watchdog`` seconds, default 0.5, 0 = off; item 98 in 20 ms
units, rounded up): cleared (0) at ``configure``, armed by a SYNC_WRITE right
after the first cycle's goals. If this process dies or stalls, each servo
stops by its own firmware once no packet came for that long. A cycle that
starts more than half that time after the previous packet asks the servos
(READ of item 98); one that reads -1 (expired) latches a fault -- the servo
refuses goals until the watchdog is cleared, which the next ``configure`` does.
The per-cycle paths write into buffers preallocated at construction.
"""
from __future__ import annotations

import contextlib
import errno
import os
import select
import struct
import time
from dataclasses import dataclass

import numpy as np

from rtctl.options import setting

from ..base import EFFORT_MODE, POSITION_MODE, ActuatorDriver
from ..transmission import Transmission
from . import protocol as P
from .control_table import BAUD_RATES, CURRENT_CONTROL, POSITION_CONTROL, ServoModel

_STATE = struct.Struct("<hii")     # present current (2), velocity (4), position (4): addresses 126..137
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")


class BusError(RuntimeError):
    """Configuration-time bus failure (configure/activate may raise; read/write never do)."""


class NoReply(BusError):
    """A servo sent no status packet to a configuration-time instruction."""


class DynamixelDriver(ActuatorDriver):
    @dataclass(frozen=True)
    class Options(ActuatorDriver.Options):
        port: str = setting("str", None, required=True)              # serial device, e.g. /dev/ttyUSB0
        baudrate: int = setting("int", 57600, positive=True)
        servo_ids: object = setting("ints", None, low=0, high=252)   # one per joint (default 1, 2, ...)
        servo_model: str = setting("str", "XM430-W350")
        retries: int = setting("int", 1, low=0, high=10)
        read_timeout: float = setting("float", 1e-3, positive=True, high=1.0)   # s per attempt
        max_failed_cycles: int = setting("int", 5, low=1)            # consecutive failed cycles -> fault
        bus_watchdog: float = setting("float", 0.5, low=0.0, high=2.54)   # s without a packet -> servo stops; 0: off

    def __init__(self, model, options: "DynamixelDriver.Options | None" = None, *,
                 transmission: Transmission | None = None, torque_constant=None, return_delay_time: int | None = 0,
                 position_gains=None, check_model: bool = True, rtt_capacity: int = 100_000):
        super().__init__(model, options)
        options = self.options
        n = len(self.v_index)
        if not options.port:
            raise ValueError(f"{self.name}: port is required: the serial device, e.g. /dev/ttyUSB0")
        ids = self._servo_ids(options.servo_ids, n)
        self.servos = self._servo_models(options.servo_model, n)
        if return_delay_time is not None and not 0 <= return_delay_time <= 254:
            raise ValueError(f"{self.name}: return_delay_time must be 0..254 (x 2 us) or None")
        self.bus_watchdog, self.watchdog_units = self._watchdog_units(options.bus_watchdog)
        self.port, self.baudrate, self.servo_ids = options.port, options.baudrate, ids
        self.read_timeout, self.retries, self.max_failed_cycles = options.read_timeout, options.retries, \
            options.max_failed_cycles
        self.return_delay_time, self.position_gains, self.check_model = return_delay_time, position_gains, check_model
        self.transmission = transmission or Transmission(n)
        if self.transmission.n != n:
            raise ValueError(f"{self.name}: transmission is for {self.transmission.n} joints, driver has {n}")
        self.torque_constant = self._torque_constants(torque_constant, n)
        self.n = n
        self._id_slot = {dxl_id: k for k, dxl_id in enumerate(ids)}
        self._center = np.array([s.position_center for s in self.servos], dtype=float)
        self._rad_per_count = np.array([s.rad_per_count for s in self.servos])
        self._rad_s_per_unit = np.array([s.rad_s_per_unit for s in self.servos])
        self._nm_per_unit = self.torque_constant * np.array([s.amp_per_unit for s in self.servos])
        self._current_limit = np.array([s.current_limit for s in self.servos], dtype=float)
        self._allocate_cycle_buffers(n)
        s0 = self.servos[0]
        self._state_addr, self._state_len = s0.span("present_current", "present_position")
        self._sync_read = P.sync_read_packet(self._state_addr, self._state_len, ids)
        self._build_goal_packet(s0["goal_current" if self.mode == EFFORT_MODE else "goal_position"], ids)
        self.decoder = P.StreamDecoder()
        self._ser = None
        self._fd = -1
        self._consecutive_failed = 0
        self._enable_pending = False
        self._arm_pending = self._armed = False
        self._last_tx = 0.0
        self._alerted = np.zeros(n, dtype=bool)
        self._pos_min = np.zeros(n)
        self._pos_max = np.full(n, 4095.0)
        self._clock = time.perf_counter
        self.rtt = np.zeros(int(rtt_capacity))      # seconds, SYNC_READ sent -> last status packet in
        self.rtt_count = 0
        self.saturated_cycles = 0
        self.health.extra.update(missing_packets=0, io_errors=0, status_errors=0, hardware_alerts=0,
                                 unexpected_packets=0, late_bytes=0, late_packets=0, write_errors=0,
                                 watchdog_checks=0)

    def _servo_ids(self, ids, n: int) -> list[int]:
        ids = list(range(1, n + 1)) if ids is None else [int(i) for i in np.atleast_1d(ids)]
        if len(ids) != n or len(set(ids)) != n or not all(0 <= i <= P.MAX_ID for i in ids):
            raise ValueError(f"{self.name}: servo_ids must be {n} distinct ids in 0..{P.MAX_ID} (one per joint "
                             f"{self.joint_names}), got {ids}")
        return ids

    def _servo_models(self, servo_model, n: int) -> list[ServoModel]:
        names = [servo_model] * n if isinstance(servo_model, str) else list(servo_model)
        if len(names) != n:
            raise ValueError(f"{self.name}: servo_model: give one name or {n}, got {len(names)}")
        return [ServoModel(s) for s in names]

    def _watchdog_units(self, seconds) -> tuple[float, int]:
        """Bus Watchdog (s, SI) -> item 98 units of 20 ms, rounded up (1..127; 0 disables)."""
        unit = self.servos[0].seconds_per_watchdog_unit
        if not (np.isfinite(seconds) and (seconds == 0 or unit <= seconds <= 127 * unit)):
            raise ValueError(f"{self.name}: bus_watchdog must be 0 (off) or in [{unit}, {127 * unit:.2f}] s, "
                             f"got {seconds}")
        units = int(np.ceil(seconds / unit - 1e-9))
        return units * unit, units

    def _torque_constants(self, torque_constant, n: int) -> np.ndarray:
        """N m per A at each joint's servo: the servo models' own, or ``torque_constant`` (one or one per joint)."""
        kt = np.array([s.torque_constant for s in self.servos]) if torque_constant is None else \
            np.broadcast_to(np.asarray(torque_constant, dtype=float), (n,)).copy()
        if not np.all(np.isfinite(kt) & (kt > 0)):
            raise ValueError(f"{self.name}: torque_constant must be > 0 N m/A, got {kt.tolist()}")
        return kt

    def _allocate_cycle_buffers(self, n: int) -> None:
        self._a_pos, self._a_vel, self._a_tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self._j_vec, self._j_tau = np.zeros(n), np.zeros(n)
        self._units = np.zeros(n)
        self._got = np.zeros(n, dtype=bool)
        self._raw_cur = np.zeros(n, dtype=np.int64)
        self._raw_vel = np.zeros(n, dtype=np.int64)
        self._raw_pos = np.zeros(n, dtype=np.int64)

    def _build_goal_packet(self, field, ids: list[int]) -> None:
        """The SYNC_WRITE of goal currents (2 bytes) or goal positions (4 bytes) to every servo, whose values
        :meth:`write` fills in place each cycle."""
        n = len(ids)
        self._goal_size = field.size
        self._goal_pack = _I16 if field.size == 2 else _I32
        param_len = 4 + n * (1 + field.size)
        self._sw_n = 8 + param_len
        self._sw_raw = bytearray(self._sw_n + 2)
        self._sw_out = bytearray(2 * self._sw_n + 4)
        self._sw_raw[0:4] = P.HEADER
        self._sw_raw[4] = P.BROADCAST_ID
        self._sw_raw[5], self._sw_raw[6] = (param_len + 3) & 0xFF, (param_len + 3) >> 8
        self._sw_raw[7] = P.SYNC_WRITE
        self._sw_raw[8:12] = P.u16(field.address) + P.u16(field.size)
        self._sw_offset = [12 + k * (1 + field.size) + 1 for k in range(n)]
        for k, dxl_id in enumerate(ids):
            self._sw_raw[12 + k * (1 + field.size)] = dxl_id
        self._sw_view = memoryview(self._sw_raw)
        self._sw_out_view = memoryview(self._sw_out)

    # -- transport -------------------------------------------------------------------
    def _open(self) -> None:
        import serial
        self._close()
        self._ser = serial.Serial(self.port, self.baudrate, timeout=0, write_timeout=self.read_timeout * 10)
        self._fd = self._ser.fileno()

    def _close(self) -> None:
        if self._ser is not None:
            with contextlib.suppress(Exception):
                self._ser.close()
        self._ser, self._fd = None, -1

    def _send(self, data) -> bool:
        try:
            if self._fd < 0:
                raise OSError(errno.EBADF, "port not open")
            sent = os.write(self._fd, data)
            if sent != len(data):      # a short write on a tty: send the rest within the write timeout
                self._ser.write(data[sent:])
            self._last_tx = self._clock()
            return True
        except (OSError, ValueError, Exception) as exc:  # noqa: BLE001  serial.SerialException and OS errors
            self.health.extra["io_errors"] += 1
            self.health.extra["last_io_error"] = f"{type(exc).__name__}: {exc}"
            return False

    def _drain(self) -> bool:
        """Discard what arrived outside a transaction (late replies), counted in bytes and in the valid packets
        among them (a corrupt one is counted as corrupt); False on an I/O error."""
        dec, extra = self.decoder, self.health.extra
        extra["late_bytes"] += len(dec.buf)    # decoded after the last transaction ended
        try:
            while select.select((self._fd,), (), (), 0)[0]:
                chunk = os.read(self._fd, 4096)
                if not chunk:
                    raise OSError(errno.EIO, "port closed by peer")
                extra["late_bytes"] += len(chunk)
                dec.feed(chunk)
            return True
        except (OSError, ValueError) as exc:
            extra["io_errors"] += 1
            extra["last_io_error"] = f"{type(exc).__name__}: {exc}"
            return False
        finally:
            while dec.pop() is not None:
                extra["late_packets"] += 1
            dec.clear()
            dec.junk = 0

    def _receive(self, deadline: float, want: int, on_packet) -> int:
        """Read until ``want`` accepted packets or ``deadline``; returns accepted count, -1 on I/O error."""
        got, last_look = 0, False
        dec = self.decoder
        fd, clock = self._fd, self._clock
        while got < want:
            pkt = dec.pop()
            if pkt is not None:
                if on_packet(pkt):
                    got += 1
                else:
                    self.health.extra["unexpected_packets"] += 1
                continue
            if last_look:
                break
            remaining = deadline - clock()
            if remaining <= 0:
                # One last look without waiting: a reply that came while this thread was preempted is not lost.
                last_look, remaining = True, 0.0
            try:
                if not select.select((fd,), (), (), remaining)[0]:
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise OSError(errno.EIO, "port closed by peer")
            except (OSError, ValueError) as exc:
                self.health.extra["io_errors"] += 1
                self.health.extra["last_io_error"] = f"{type(exc).__name__}: {exc}"
                return -1
            dec.feed(chunk)
        return got

    def _count_corrupt(self) -> None:
        if self.decoder.corrupt:
            self.health.corrupt += self.decoder.corrupt
            self.decoder.corrupt = 0

    # -- configuration-time transactions (may raise BusError) ---------------------------
    def transact(self, packet: bytes, dxl_id: int, reply_params: int, what: str,
                 attempts: int | None = None) -> P.Packet:
        """Send ``packet`` (``what`` it asks, for messages) to servo ``dxl_id`` and return its status packet,
        retrying; raises :class:`BusError` in one line naming servo, request and what came instead.

        What is on the port before each attempt is drained and counted (``late_packets``): a late reply to an
        earlier request. Within the attempt's timeout only the status packet :class:`~.protocol.ReplyFilter`
        takes (ID ``dxl_id``, ``reply_params`` parameters) is the reply; any other is counted
        (``unexpected_packets``) and skipped."""
        attempts = self.retries + 2 if attempts is None else attempts
        timeout = max(self.read_timeout, 0.02)
        reply = P.ReplyFilter(dxl_id, reply_params)
        for attempt in range(attempts):
            if attempt:
                self.health.retries += 1
            if not self._drain() or not self._send(packet):
                raise BusError(f"{self.name}: {self.port}: {self.health.extra.get('last_io_error')}")
            got = self._receive(self._clock() + timeout, 1, reply)
            self._count_corrupt()
            if got < 0:
                raise BusError(f"{self.name}: {self.port}: {self.health.extra.get('last_io_error')}")
            if got == 1:
                pkt = reply.packet
                if pkt.error & 0x7F:
                    self.health.extra["status_errors"] += 1
                    raise BusError(f"{self.name}: servo {dxl_id}: {what}: {P.describe_error(pkt.error)}")
                return pkt
            self.health.timeouts += 1
            self.health.extra["missing_packets"] += 1
        came = f"; came instead: {P.describe_packets(reply.skipped)}" if reply.skipped else ""
        raise NoReply(f"{self.name}: {what}: no reply from servo {dxl_id} within {timeout * 1e3:.0f} ms on "
                      f"{self.port} at {self.baudrate} bps after {attempts} attempts{came}")

    def _answering_rate(self, dxl_id: int) -> str:
        """Where a servo silent at ``baudrate`` answers: one PING at each other X-series rate (e-manual, Baud
        Rate, address 8), the factory 57600 first. Said, never switched to: the port goes back to ``baudrate``."""
        found = None
        try:
            for rate in sorted(set(BAUD_RATES.values()) - {self.baudrate}, key=lambda r: (r != 57600, r)):
                try:
                    self._ser.baudrate = rate
                    self.transact(P.ping_packet(dxl_id), dxl_id, 3, "PING", attempts=1)
                except (NoReply, ValueError, OSError):      # silent there, or a rate this port cannot set
                    continue
                except BusError:                            # an error status: it answered
                    pass
                found = rate
                break
        finally:
            self._ser.baudrate = self.baudrate
        if found is None:
            return (f"servo {dxl_id} answers at none of the X-series rates {sorted(BAUD_RATES.values())} bps "
                    "either: check its power, wiring, ID (servo_ids) and the port")
        return (f"servo {dxl_id} answers at {found} bps: set [driver] baudrate = {found}, or the servo's Baud Rate "
                f"(address 8) to {self.baudrate} bps")

    def ping(self, dxl_id: int) -> int:
        pkt = self.transact(P.ping_packet(dxl_id), dxl_id, 3, "PING")
        return pkt.params[0] | (pkt.params[1] << 8)

    def read_fields(self, k: int, *names: str) -> list[int]:
        """Items ``names`` (ascending addresses) of servo ``k``, in one READ of the block they span."""
        address, size = self.servos[k].span(names[0], names[-1])
        what = f"read {' .. '.join(dict.fromkeys((names[0], names[-1])))} (address {address}, {size} bytes)"
        pkt = self.transact(P.read_packet(self.servo_ids[k], address, size), self.servo_ids[k], size, what)
        fields = [self.servos[k][name] for name in names]
        return [P.from_bytes(pkt.params[f.address - address:f.address - address + f.size], f.signed) for f in fields]

    def read_field(self, k: int, name: str) -> int:
        return self.read_fields(k, name)[0]

    def write_field(self, k: int, name: str, value: int) -> None:
        f = self.servos[k][name]
        self.transact(P.write_packet(self.servo_ids[k], f.address, P.to_bytes(int(value), f.size)), self.servo_ids[k],
                      0, f"write {name} = {int(value)} (address {f.address})")

    def _read_quiet(self, k: int, name: str) -> int | None:
        """``read_field`` in the cycle: one attempt, None instead of raising."""
        try:
            f = self.servos[k][name]
            pkt = self.transact(P.read_packet(self.servo_ids[k], f.address, f.size), self.servo_ids[k], f.size,
                                f"read {name}", attempts=1)
            return P.from_bytes(pkt.params, f.signed)
        except BusError:
            return None

    # -- lifecycle ------------------------------------------------------------------------
    def on_configure(self) -> None:
        self._open()
        self._consecutive_failed = 0
        self.health.fault, self.health.fault_reason = False, ""
        operating = CURRENT_CONTROL if self.mode == EFFORT_MODE else POSITION_CONTROL
        for k, dxl_id in enumerate(self.servo_ids):
            try:
                number = self.ping(dxl_id)
            except NoReply as exc:
                raise NoReply(f"{exc}; {self._answering_rate(dxl_id)}") from None
            if self.check_model and number != self.servos[k].model_number:
                raise BusError(f"{self.name}: servo {dxl_id} reports model number {number}, expected "
                               f"{self.servos[k].model_number} ({self.servos[k].name})")
            self.write_field(k, "torque_enable", 0)          # EEPROM writes need torque off
            self._check_hardware_error(k)
            self.write_field(k, "bus_watchdog", 0)           # off, and clears an expiry of an earlier run
            # Consecutive reads differ in length (1, 3, 2, 8 bytes, PING 3 between servos): a late reply to one
            # can never pass for the next (see transact).
            delay, mode = self.read_fields(k, "return_delay_time", "operating_mode")
            if self.return_delay_time is not None and delay != self.return_delay_time:
                self.write_field(k, "return_delay_time", self.return_delay_time)
            if mode != operating:
                self.write_field(k, "operating_mode", operating)
            if self.mode == POSITION_MODE and self.position_gains is not None:
                p, i, d = self.position_gains
                self.write_field(k, "position_p_gain", p)
                self.write_field(k, "position_i_gain", i)
                self.write_field(k, "position_d_gain", d)
            self._current_limit[k] = self.read_field(k, "current_limit")
            self._pos_max[k], self._pos_min[k] = self.read_fields(k, "max_position_limit", "min_position_limit")
        self._armed = False

    def _check_hardware_error(self, k: int) -> None:
        bits = self.read_field(k, "hardware_error_status")
        if bits:
            raise BusError(f"{self.name}: servo {self.servo_ids[k]}: hardware error: {P.describe_hardware_error(bits)} "
                           f"(Hardware Error Status 0x{bits:02x}); the servo has shut down: remove the cause "
                           "and REBOOT it")

    def on_activate(self) -> None:
        for k in range(self.n):
            pos = self.read_field(k, "present_position")
            self._raw_pos[k] = pos
            if self.mode == EFFORT_MODE:
                self.write_field(k, "goal_current", 0)
            else:
                self.write_field(k, "goal_position", pos)
                self.write_field(k, "torque_enable", 1)
        # Effort mode: torque goes on together with the first goal currents (the first write), so the
        # robot does not sag at 0 A between activation and the first control cycle.
        self._enable_pending = self.mode == EFFORT_MODE
        # The Bus Watchdog is armed right after the first cycle's goals, so that nothing slow before the first
        # cycle (first-touch work in the controller) can expire it.
        self._arm_pending = self.watchdog_units > 0
        self._consecutive_failed = 0
        self._alerted[:] = False

    def on_deactivate(self) -> None:
        self._enable_pending = self._arm_pending = self._armed = False
        self._torque_off()

    def _torque_off(self) -> None:
        f = self.servos[0]["torque_enable"]
        self._send(P.sync_write_packet(f.address, 1, [(i, b"\x00") for i in self.servo_ids]))

    def close(self) -> None:
        """Torque off (best effort) and release the port."""
        if self._fd >= 0:
            self._torque_off()
        self._close()

    # -- the cycle --------------------------------------------------------------------------
    def _accept_state(self, pkt) -> bool:
        k = self._id_slot.get(pkt.id, -1)
        if pkt.instruction != P.STATUS or k < 0 or self._got[k]:
            return False
        if pkt.error:
            if pkt.error & P.ERROR_ALERT:
                self.health.extra["hardware_alerts"] += 1
                self._alerted[k] = True         # named (Hardware Error Status read) at the end of the read
            if pkt.error & 0x7F:
                self.health.extra["status_errors"] += 1
                return False
        if len(pkt.params) != self._state_len:
            self.health.extra["status_errors"] += 1
            return False
        cur, vel, pos = _STATE.unpack_from(pkt.params)
        self._raw_cur[k], self._raw_vel[k], self._raw_pos[k] = cur, vel, pos
        self._got[k] = True
        return True

    def _sync_read_once(self) -> int:
        """One SYNC_READ transaction: number of servos that answered, -1 on an I/O error."""
        self._got[:] = False
        if not self._drain():
            return -1
        t0 = self._clock()
        if not self._send(self._sync_read):
            return -1
        got = self._receive(t0 + self.read_timeout, self.n, self._accept_state)
        self._count_corrupt()
        if got == self.n:
            if self.rtt_count < self.rtt.shape[0]:
                self.rtt[self.rtt_count] = self._clock() - t0
            self.rtt_count += 1
        return got

    def read(self, state, now: float) -> bool:
        h = self.health
        gap = self._clock() - self._last_tx if self._armed else 0.0
        complete = False
        for attempt in range(1 + (0 if h.fault else self.retries)):
            if attempt:
                h.retries += 1
            got = self._sync_read_once()
            if got == self.n:
                complete = True
                break
            if got < 0:
                break                       # the port itself failed: no point retrying this cycle
            missing = self.n - got
            h.extra["missing_packets"] += missing
            h.timeouts += 1
        h.reads += 1
        if complete:
            self._consecutive_failed = 0
        else:
            h.stale_cycles += 1
            self._consecutive_failed += 1
            if self._consecutive_failed >= self.max_failed_cycles:
                h.set_fault(f"no complete state from the servos for {self._consecutive_failed} consecutive "
                            f"cycles (timeouts {h.timeouts}, corrupt {h.corrupt}, io errors "
                            f"{h.extra['io_errors']})")
        if not h.fault and self._alerted.any():
            self._name_hardware_error()
        if not h.fault and gap > 0.5 * self.bus_watchdog:
            self._check_watchdog(gap)
        # Actuator space SI from the latest register values (stale joints keep their last values).
        np.subtract(self._raw_pos, self._center, out=self._a_pos)
        np.multiply(self._a_pos, self._rad_per_count, out=self._a_pos)
        np.multiply(self._raw_vel, self._rad_s_per_unit, out=self._a_vel)
        np.multiply(self._raw_cur, self._nm_per_unit, out=self._a_tau)
        return self.publish_measurement(state, self.transmission, self._a_pos, self._a_vel, self._a_tau,
                                        self._j_vec, now, complete)

    def _name_hardware_error(self) -> None:
        """A status packet had the Alert bit: fault naming the servo and its Hardware Error Status."""
        k = int(np.flatnonzero(self._alerted)[0])
        self._alerted[:] = False
        bits = self._read_quiet(k, "hardware_error_status")
        what = "Hardware Error Status unreadable" if bits is None else \
            f"{P.describe_hardware_error(bits)} (Hardware Error Status 0x{bits:02x})"
        self.health.set_fault(f"servo {self.servo_ids[k]}: hardware error: {what}; the servo turned its torque off "
                              "(REBOOT it after removing the cause)")

    def _check_watchdog(self, gap: float) -> None:
        """The bus was silent long enough for a Bus Watchdog to expire: ask each servo (item 98 = -1)."""
        self.health.extra["watchdog_checks"] += 1
        for k, dxl_id in enumerate(self.servo_ids):
            if self._read_quiet(k, "bus_watchdog") == -1:
                self.health.set_fault(f"servo {dxl_id}: Bus Watchdog expired ({gap * 1e3:.0f} ms without a packet, "
                                      f"limit {self.bus_watchdog * 1e3:.0f} ms): the servo stopped itself and "
                                      "refuses goals; reconfigure the driver to clear and re-arm it")
                return

    def write(self, command, now: float) -> None:
        raw, offs, pack = self._sw_raw, self._sw_offset, self._goal_pack
        if self.mode == EFFORT_MODE:
            np.take(command.effort, self.v_index, out=self._j_tau)
            self.transmission.to_actuator_effort(self._j_tau, self._a_tau)
            np.divide(self._a_tau, self._nm_per_unit, out=self._units)
            np.round(self._units, out=self._units)
            if np.any(np.abs(self._units) > self._current_limit):
                self.saturated_cycles += 1
                np.clip(self._units, -self._current_limit, self._current_limit, out=self._units)
            if not np.all(np.isfinite(self._units)):
                self._units[:] = 0.0
            for k in range(self.n):
                pack.pack_into(raw, offs[k], int(self._units[k]))
        else:
            np.take(command.position, self.v_index, out=self._j_vec)
            self.transmission.to_actuator_position(self._j_vec, self._a_pos)
            np.divide(self._a_pos, self._rad_per_count, out=self._units)
            np.add(self._units, self._center, out=self._units)
            np.round(self._units, out=self._units)
            for k in range(self.n):
                iv = self.v_index[k]
                if not command.stiffness[iv] > 0 or not np.isfinite(self._units[k]):
                    self._units[k] = self._raw_pos[k]       # hold
            if np.any(self._units < self._pos_min) or np.any(self._units > self._pos_max):
                self.saturated_cycles += 1              # a goal beyond the limits would be refused: clamp it
                np.clip(self._units, self._pos_min, self._pos_max, out=self._units)
            for k in range(self.n):
                pack.pack_into(raw, offs[k], int(self._units[k]))
        length = P.finish_into(raw, self._sw_n, self._sw_out)
        data = self._sw_view[:length] if length > 0 else self._sw_out_view[:-length]
        if self._send(data):
            self.health.writes += 1
            if self._enable_pending:
                self._enable_pending = False
                f = self.servos[0]["torque_enable"]
                self._send(P.sync_write_packet(f.address, 1, [(i, b"\x01") for i in self.servo_ids]))
            if self._arm_pending:
                self._arm_pending = False
                f = self.servos[0]["bus_watchdog"]
                self._armed = self._send(P.sync_write_packet(f.address, 1, [(i, bytes([self.watchdog_units]))
                                                                            for i in self.servo_ids]))
        else:
            self.health.extra["write_errors"] += 1

    def safe_stop(self) -> None:
        """Zero goal current (effort mode) or torque off (position mode); best effort, never raises."""
        with contextlib.suppress(Exception):
            if self._fd < 0:
                return
            if self.mode == EFFORT_MODE:
                f = self.servos[0]["goal_current"]
                self._send(P.sync_write_packet(f.address, 2, [(i, b"\x00\x00") for i in self.servo_ids]))
            else:
                self._torque_off()
