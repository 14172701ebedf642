"""The ATI Net F/T's wire formats: RDT over UDP, the TCP calibration command and the system status code.

From ATI's *Net F/T Installation and Operation Manual* (document 9620-05-NET FT, revision 11):

* Sec. 10, *UDP Interface Using RDT* (Raw Data Transfer): port 49152, up to 7000 records per second, every
  multi-byte value high byte first (network order).
* Sec. 10.1, *RDT Protocol*: the request ``{uint16 command_header = 0x1234; uint16 command; uint32
  sample_count}`` (8 bytes; ``sample_count`` 0: until stopped), the commands of Table 10.1 (0x0000 stop
  streaming, 0x0002 start high-speed real-time streaming, 0x0003 start high-speed buffered streaming,
  0x0004 start multi-unit streaming, 0x0041 reset threshold latch, 0x0042 set software bias), and the record
  ``{uint32 rdt_sequence; uint32 ft_sequence; uint32 status; int32 Fx, Fy, Fz, Tx, Ty, Tz}`` (36 bytes; a
  buffered datagram carries several): ``rdt_sequence`` counts the records of one request from 1 (a missing
  number is a lost record), ``ft_sequence`` the device's internal samples from power-up at 7000 per second
  (its clock), ``status`` the system status code, the six values in counts.
* Sec. 11, *TCP Interface*: port 49151; the Read Calibration Info command (sec. 11.5, 20 bytes, the first
  READCALINFO = 1, the rest zero) and its response (sec. 11.6, ``{uint16 header = 0x1234; uint8 forceUnits;
  uint8 torqueUnits; uint32 countsPerForce; uint32 countsPerTorque; uint16 scaleFactors[6]}``, 24 bytes,
  with the unit codes listed there). A force in counts divided by counts per force is the force in the
  calibration's force unit (likewise torque).

The record parser is compiled (:func:`take_records`): it reads whatever arrived, refuses a datagram that is not
a whole number of records (counted corrupt) and never raises, so the sensor's cycle can call it on anything.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numba import njit

RDT_PORT = 49152
TCP_PORT = 49151
HEADER = 0x1234
STOP, START_REALTIME, START_BUFFERED, START_MULTI_UNIT = 0x0000, 0x0002, 0x0003, 0x0004
RESET_THRESHOLD_LATCH, SET_SOFTWARE_BIAS = 0x0041, 0x0042
COMMANDS = {STOP: "stop streaming", START_REALTIME: "start high-speed real-time streaming",
            START_BUFFERED: "start high-speed buffered streaming", START_MULTI_UNIT: "start multi-unit streaming",
            RESET_THRESHOLD_LATCH: "reset threshold latch", SET_SOFTWARE_BIAS: "set software bias"}
INTERNAL_RATE_HZ = 7000.0        # ft_sequence's rate, and the fastest RDT output
REQUEST = struct.Struct(">HHI")
RECORD = struct.Struct(">III6i")
RECORD_SIZE = RECORD.size        # 36
MAX_RECORDS_PER_DATAGRAM = 40    # a buffered datagram's records (1440 bytes: one Ethernet frame)

READFT, READCALINFO = 0, 1
TCP_COMMAND_SIZE = 20
CALIBRATION = struct.Struct(">HBBII6H")   # 24 bytes
FORCE_UNITS = {1: ("lbf", 4.4482216152605), 2: ("N", 1.0), 3: ("klbf", 4448.2216152605), 4: ("kN", 1000.0),
               5: ("kgf", 9.80665), 6: ("gf", 0.00980665)}
TORQUE_UNITS = {1: ("lbf in", 0.1129848290276167), 2: ("lbf ft", 1.3558179483314004), 3: ("N m", 1.0),
                4: ("N mm", 0.001), 5: ("kgf cm", 0.0980665), 6: ("kN m", 1000.0)}

# The system status code (the manual's table of its bits); bit 31 summarises the errors.
ERROR_SUMMARY, MONITOR_LATCHED, SATURATION = 1 << 31, 1 << 16, 1 << 17
STATUS_BITS = {
    31: "error summary", 30: "CPU or RAM error", 29: "digital board error", 28: "analog board error",
    27: "serial link communication error", 26: "program memory verification error",
    25: "halted due to configuration errors", 24: "settings validation error",
    23: "configuration incompatible with calibration", 22: "network communication failure",
    21: "CAN communication error", 20: "RDT communication error", 19: "EtherNet/IP protocol failure",
    18: "DeviceNet protocol failure", 17: "transducer saturation or A/D error", 16: "monitor condition latched",
    14: "watchdog timeout error", 13: "stack check error", 12: "serial EEPROM I2C failure",
    11: "serial flash SPI failure", 10: "analog board watchdog timeout", 9: "excessive strain gage excitation current",
    8: "insufficient strain gage excitation current", 7: "artificial analog ground out of range",
    6: "analog board power supply too high", 5: "analog board power supply too low",
    4: "serial link data unavailable", 3: "reference voltage or power monitoring error",
    2: "internal temperature error", 1: "HTTP protocol failure",
}
NOT_ERRORS = ERROR_SUMMARY | MONITOR_LATCHED   # a latched threshold (a monitor condition) is an event, not a fault


def rdt_request(command: int, sample_count: int = 0) -> bytes:
    """The 8 bytes of an RDT request (sec. 10.1)."""
    return REQUEST.pack(HEADER, command, sample_count)


def parse_rdt_request(data: bytes) -> tuple[int, int] | None:
    """``(command, sample_count)`` of an RDT request, None if ``data`` is not one (length, header)."""
    if len(data) != REQUEST.size:
        return None
    header, command, count = REQUEST.unpack(data)
    return (command, count) if header == HEADER else None


def pack_record(rdt_sequence: int, ft_sequence: int, status: int, counts) -> bytes:
    """The 36 bytes of an RDT record: Fx, Fy, Fz, Tx, Ty, Tz in counts."""
    return RECORD.pack(rdt_sequence & 0xFFFFFFFF, ft_sequence & 0xFFFFFFFF, status & 0xFFFFFFFF,
                       *(int(c) for c in counts))


def status_errors(status: int) -> int:
    """The error bits of a status code (everything but the summary and a latched monitor condition); a summary
    bit alone counts as an error of its own."""
    status &= 0xFFFFFFFF
    errors = status & ~NOT_ERRORS
    return errors or (ERROR_SUMMARY if status == ERROR_SUMMARY else 0)


def describe_status(status: int) -> str:
    """``0x80020000 (transducer saturation or A/D error)``: the code and the names of its bits."""
    status &= 0xFFFFFFFF
    names = [STATUS_BITS.get(b, f"bit {b}") for b in range(30, -1, -1) if status >> b & 1]
    return f"0x{status:08X} ({', '.join(names) or STATUS_BITS[31]})"


@dataclass(frozen=True)
class Calibration:
    """The Read Calibration Info response (sec. 11.6)."""

    force_units: int
    torque_units: int
    counts_per_force: int
    counts_per_torque: int
    scale_factors: tuple = (1, 1, 1, 1, 1, 1)

    def pack(self) -> bytes:
        return CALIBRATION.pack(HEADER, self.force_units, self.torque_units, self.counts_per_force,
                                self.counts_per_torque, *self.scale_factors)

    @classmethod
    def parse(cls, data: bytes) -> "Calibration":
        """From the 24 response bytes; ValueError naming what is wrong (length, header, a unit code)."""
        if len(data) != CALIBRATION.size:
            raise ValueError(f"the calibration response has {len(data)} bytes, not {CALIBRATION.size}")
        header, fu, tu, cpf, cpt, *scale = CALIBRATION.unpack(data)
        if header != HEADER:
            raise ValueError(f"the calibration response's header is 0x{header:04X}, not 0x{HEADER:04X}")
        if fu not in FORCE_UNITS:
            raise ValueError(f"unknown force unit code {fu} (known: {sorted(FORCE_UNITS)})")
        if tu not in TORQUE_UNITS:
            raise ValueError(f"unknown torque unit code {tu} (known: {sorted(TORQUE_UNITS)})")
        if cpf == 0 or cpt == 0:
            raise ValueError(f"counts per force {cpf} and per torque {cpt} must be > 0")
        return cls(fu, tu, cpf, cpt, tuple(scale))

    def counts_per_si(self) -> tuple[float, float]:
        """(force counts per N, torque counts per N m)."""
        return self.counts_per_force / FORCE_UNITS[self.force_units][1], \
            self.counts_per_torque / TORQUE_UNITS[self.torque_units][1]


def calibration_request() -> bytes:
    """The 20 bytes of the Read Calibration Info command (sec. 11.5)."""
    return bytes([READCALINFO]) + bytes(TCP_COMMAND_SIZE - 1)


# The parser's state vector (int64), kept by the sensor between datagrams.
ST_LAST_RDT, ST_GAPS, ST_STALE, ST_CORRUPT, ST_STATUS, ST_FT, ST_FT_WRAPS, ST_RECORDS = range(8)
ST_SIZE = 8


def parser_state() -> np.ndarray:
    """A fresh state: no record seen yet."""
    state = np.zeros(ST_SIZE, dtype=np.int64)
    state[ST_LAST_RDT] = -1
    return state


@njit(cache=True, inline="always")
def _u32(data, o):
    return (np.int64(data[o]) << 24) | (np.int64(data[o + 1]) << 16) | (np.int64(data[o + 2]) << 8) \
        | np.int64(data[o + 3])


@njit("int64(uint8[::1], int64, int64[::1], float64[::1])", cache=True)
def take_records(data, n, state, counts):
    """Parse the ``n`` bytes of one datagram in ``data``: the newest record with a new ``rdt_sequence`` goes to
    ``counts`` (Fx, Fy, Fz, Tx, Ty, Tz) and ``state`` (its status, its ft_sequence unwrapped through the wraps
    at 2^32); a record repeating or older than the last one is dropped (ST_STALE), the numbers skipped are
    counted lost (ST_GAPS), a datagram that is not a whole number of records from 1 to
    MAX_RECORDS_PER_DATAGRAM is refused (ST_CORRUPT). Returns the number of new records."""
    if n <= 0 or n > data.shape[0] or n % 36 != 0 or n > 36 * MAX_RECORDS_PER_DATAGRAM:
        state[ST_CORRUPT] += 1
        return 0
    fresh = 0
    for r in range(n // 36):
        o = 36 * r
        rdt = _u32(data, o)
        last = state[ST_LAST_RDT]
        if last >= 0:
            step = (rdt - last) & 0xFFFFFFFF
            if step == 0 or step >= 0x80000000:
                state[ST_STALE] += 1
                continue
            state[ST_GAPS] += step - 1
        state[ST_LAST_RDT] = rdt
        ft = _u32(data, o + 4)
        if state[ST_RECORDS] > 0 and state[ST_FT] - ft >= 0x80000000:
            state[ST_FT_WRAPS] += 1
        state[ST_FT] = ft
        state[ST_STATUS] = _u32(data, o + 8)
        for k in range(6):
            u = _u32(data, o + 12 + 4 * k)
            counts[k] = float(u - 0x100000000 if u >= 0x80000000 else u)
        state[ST_RECORDS] += 1
        fresh += 1
    return fresh


def device_seconds(state: np.ndarray) -> float:
    """The device's clock at the newest record: its unwrapped ft_sequence over the internal rate (s)."""
    return float(state[ST_FT_WRAPS] * 4294967296 + state[ST_FT]) / INTERNAL_RATE_HZ
