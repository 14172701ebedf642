"""Dynamixel Protocol 2.0 packet codec (ROBOTIS e-manual, "Protocol 2.0").

Wire format of every packet::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | [ERR] PARAMS... | CRC_L CRC_H

``LEN`` counts the bytes after itself (instruction, parameters, CRC) *after*
byte stuffing; a status packet (``INST = 0x55``) carries an error byte before
its parameters. The CRC is CRC-16 with polynomial 0x8005, initial value 0, no
reflection (CRC-16/BUYPASS), over everything from the first header byte to the
last parameter, sent low byte first. Byte stuffing: wherever ``FF FF FD``
occurs from the instruction byte on (the two bytes before the instruction
count as context, as in the official SDK), an extra ``FD`` is inserted, so a
header can never appear inside a packet; the receiver removes it.

Everything here is plain data manipulation: :func:`encode` for one-off
packets, :class:`PacketWriter` for packets rebuilt every control cycle in a
preallocated buffer, :class:`StreamDecoder` for splitting a byte stream into
checked packets.
"""
from __future__ import annotations

from typing import NamedTuple

HEADER = b"\xff\xff\xfd\x00"
STUFF_PATTERN = b"\xff\xff\xfd"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC
MAX_LENGTH = 1024          # largest LEN field accepted by the decoder

# Instructions.
PING = 0x01
READ = 0x02
WRITE = 0x03
REG_WRITE = 0x04
ACTION = 0x05
FACTORY_RESET = 0x06
REBOOT = 0x08
CLEAR = 0x10
CONTROL_TABLE_BACKUP = 0x20
STATUS = 0x55
SYNC_READ = 0x82
SYNC_WRITE = 0x83
FAST_SYNC_READ = 0x8A
BULK_READ = 0x92
BULK_WRITE = 0x93
FAST_BULK_READ = 0x9A
CLEAR_MULTI_TURN = bytes([0x01, 0x44, 0x58, 0x4C, 0x22])       # CLEAR parameters: reset multi-turn position
BACKUP_MAGIC = bytes([0x43, 0x54, 0x52, 0x4C])                 # CONTROL TABLE BACKUP parameters 2..5 ("CTRL")

# Error byte of a status packet: bit 7 is the hardware alert, bits 0-6 the result.
ERROR_ALERT = 0x80
ERROR_NONE = 0x00
ERROR_RESULT_FAIL = 0x01
ERROR_INSTRUCTION = 0x02
ERROR_CRC = 0x03
ERROR_DATA_RANGE = 0x04
ERROR_DATA_LENGTH = 0x05
ERROR_DATA_LIMIT = 0x06
ERROR_ACCESS = 0x07
ERROR_NAMES = {
    ERROR_NONE: "ok", ERROR_RESULT_FAIL: "result fail", ERROR_INSTRUCTION: "instruction error",
    ERROR_CRC: "CRC error", ERROR_DATA_RANGE: "data range error", ERROR_DATA_LENGTH: "data length error",
    ERROR_DATA_LIMIT: "data limit error", ERROR_ACCESS: "access error",
}


def describe_error(error: int) -> str:
    text = ERROR_NAMES.get(error & 0x7F, f"unknown error 0x{error & 0x7F:02x}")
    return text + (" + hardware alert" if error & ERROR_ALERT else "")


# Hardware Error Status (X series, address 70) and Shutdown (63) bits.
HW_INPUT_VOLTAGE = 0x01
HW_OVERHEATING = 0x04
HW_MOTOR_ENCODER = 0x08
HW_ELECTRICAL_SHOCK = 0x10
HW_OVERLOAD = 0x20
HW_ERROR_NAMES = {HW_INPUT_VOLTAGE: "input voltage error", HW_OVERHEATING: "overheating error",
                  HW_MOTOR_ENCODER: "motor encoder error", HW_ELECTRICAL_SHOCK: "electrical shock error",
                  HW_OVERLOAD: "overload error"}


def describe_hardware_error(bits: int) -> str:
    """The names of the set bits of a Hardware Error Status value, e.g. ``"overheating error"``."""
    names = [name for bit, name in HW_ERROR_NAMES.items() if bits & bit]
    unknown = bits & ~sum(HW_ERROR_NAMES) & 0xFF
    if unknown:
        names.append(f"unknown bits 0x{unknown:02x}")
    return " + ".join(names) if names else "no error"


class ProtocolError(ValueError):
    pass


def _make_crc_table(poly: int = 0x8005) -> tuple[int, ...]:
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ poly) if c & 0x8000 else (c << 1)
        table.append(c & 0xFFFF)
    return tuple(table)


CRC_TABLE = _make_crc_table()


def crc16(data, start: int = 0, end: int | None = None, crc: int = 0) -> int:
    """CRC-16 (poly 0x8005, init 0) of ``data[start:end]``, continuing from ``crc``."""
    table = CRC_TABLE
    if end is None:
        end = len(data)
    for i in range(start, end):
        crc = ((crc << 8) ^ table[((crc >> 8) ^ data[i]) & 0xFF]) & 0xFFFF
    return crc


def stuff_into(raw, n: int, out: bytearray) -> int:
    """Byte-stuff the packet ``raw[:n]`` (header..last parameter, no CRC, LEN of the unstuffed packet)
    into ``out``, fix LEN, append the CRC; return the total length written."""
    out[0:7] = raw[0:7]
    j = 7
    for i in range(7, n):
        b = raw[i]
        out[j] = b
        j += 1
        if b == 0xFD and raw[i - 1] == 0xFF and raw[i - 2] == 0xFF:
            out[j] = 0xFD
            j += 1
    length = j - 7 + 2
    out[5] = length & 0xFF
    out[6] = length >> 8
    crc = crc16(out, 0, j)
    out[j] = crc & 0xFF
    out[j + 1] = crc >> 8
    return j + 2


def needs_stuffing(raw, n: int) -> bool:
    return raw.find(STUFF_PATTERN, 5, n) >= 0


def finish_into(raw: bytearray, n: int, out: bytearray) -> int:
    """Complete the unstuffed packet ``raw[:n]``: fast path (no stuffing needed) appends the CRC in
    ``raw`` itself and returns ``n + 2`` with ``raw`` the packet; otherwise returns ``-(length)`` of
    the stuffed packet written to ``out``."""
    if raw.find(STUFF_PATTERN, 5, n) < 0:
        crc = crc16(raw, 0, n)
        raw[n] = crc & 0xFF
        raw[n + 1] = crc >> 8
        return n + 2
    return -stuff_into(raw, n, out)


def encode(dxl_id: int, instruction: int, params=b"", error: int | None = None) -> bytes:
    """One complete packet: an instruction packet, or a status packet when ``error`` is given."""
    if not 0 <= dxl_id <= BROADCAST_ID:
        raise ProtocolError(f"id must be 0..{BROADCAST_ID}, got {dxl_id}")
    body = bytes(params) if error is None else bytes([error & 0xFF]) + bytes(params)
    n = 8 + len(body)
    length = len(body) + 3
    raw = bytearray(n + 2)
    raw[0:4] = HEADER
    raw[4] = dxl_id
    raw[5] = length & 0xFF
    raw[6] = length >> 8
    raw[7] = STATUS if error is not None else instruction
    raw[8:n] = body
    out = bytearray(2 * n + 4)
    k = finish_into(raw, n, out)
    return bytes(raw[:k]) if k > 0 else bytes(out[:-k])


def encode_status(dxl_id: int, error: int = 0, params=b"") -> bytes:
    return encode(dxl_id, STATUS, params, error=error)


def unstuff(data) -> bytes:
    """Remove byte stuffing from a packet body (instruction..parameters)."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        out.append(b)
        if b == 0xFD and i + 1 < n and data[i + 1] == 0xFD and len(out) >= 3 and out[-2] == 0xFF and out[-3] == 0xFF:
            i += 1  # skip the stuffed FD
        i += 1
    return bytes(out)


# -- little-endian helpers -------------------------------------------------------
def u16(value: int) -> bytes:
    return int(value & 0xFFFF).to_bytes(2, "little")


def u32(value: int) -> bytes:
    return int(value & 0xFFFFFFFF).to_bytes(4, "little")


def to_bytes(value: int, size: int) -> bytes:
    return int(value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def from_bytes(data, signed: bool = True) -> int:
    return int.from_bytes(data, "little", signed=signed)


# -- instruction parameter builders ---------------------------------------------
def ping_packet(dxl_id: int) -> bytes:
    return encode(dxl_id, PING)


def read_packet(dxl_id: int, address: int, length: int) -> bytes:
    return encode(dxl_id, READ, u16(address) + u16(length))


def write_packet(dxl_id: int, address: int, data) -> bytes:
    return encode(dxl_id, WRITE, u16(address) + bytes(data))


def sync_read_packet(address: int, length: int, ids) -> bytes:
    return encode(BROADCAST_ID, SYNC_READ, u16(address) + u16(length) + bytes(ids))


def sync_write_packet(address: int, length: int, items) -> bytes:
    """``items``: (id, data bytes of ``length``) pairs."""
    body = bytearray(u16(address) + u16(length))
    for dxl_id, data in items:
        if len(data) != length:
            raise ProtocolError(f"sync write: id {dxl_id} has {len(data)} data bytes, expected {length}")
        body.append(dxl_id)
        body += data
    return encode(BROADCAST_ID, SYNC_WRITE, body)


def bulk_read_packet(items) -> bytes:
    """``items``: (id, address, length) triples."""
    body = bytearray()
    for dxl_id, address, length in items:
        body.append(dxl_id)
        body += u16(address) + u16(length)
    return encode(BROADCAST_ID, BULK_READ, body)


def bulk_write_packet(items) -> bytes:
    """``items``: (id, address, data bytes) triples."""
    body = bytearray()
    for dxl_id, address, data in items:
        body.append(dxl_id)
        body += u16(address) + u16(len(data)) + bytes(data)
    return encode(BROADCAST_ID, BULK_WRITE, body)


class Packet(NamedTuple):
    id: int
    instruction: int
    error: int          # status packets only (else 0)
    params: bytes       # unstuffed


class ReplyFilter:
    """Takes the status packet that can answer one request (an ``on_packet`` callback); keeps the others.

    A status packet names its servo but not the instruction it answers (e-manual, Protocol 2.0, Status Packet:
    Header, ID, Length, Instruction 0x55, Error, Parameters), so a late reply could pass for the next request's.
    The reply to a request to ``dxl_id`` is a status packet from ``dxl_id`` with ``params`` parameters, i.e.
    Length = ``params`` + 4 (Instruction Details: READ returns the requested length, WRITE none, PING three:
    model number and firmware version) -- or one with an error (bits 0-6 of the error byte) and no parameters,
    which fails the request and never passes for a value."""

    def __init__(self, dxl_id: int, params: int):
        self.dxl_id, self.params = dxl_id, params
        self.packet: Packet | None = None
        self.skipped: list[Packet] = []

    def __call__(self, pkt: Packet) -> bool:
        if pkt.instruction == STATUS and pkt.id == self.dxl_id and (
                len(pkt.params) == self.params or (pkt.error & 0x7F and not pkt.params)):
            self.packet = pkt
            return True
        self.skipped.append(pkt)
        return False


def describe_packets(packets, at_most: int = 3) -> str:
    """``status from ID 1 (ok, 3 parameter bytes), ...``: what came, for an error message."""
    text = ", ".join(f"{'status' if p.instruction == STATUS else f'instruction 0x{p.instruction:02x}'} from ID {p.id} "
                     f"({describe_error(p.error)}, {len(p.params)} parameter bytes)" for p in packets[:at_most])
    return text + (f" and {len(packets) - at_most} more" if len(packets) > at_most else "")


def decode(data) -> Packet:
    """Decode exactly one packet; raises :class:`ProtocolError` on any defect."""
    dec = StreamDecoder()
    dec.feed(data)
    pkt = dec.pop()
    if pkt is None or dec.corrupt or dec.junk or len(dec.buf):
        raise ProtocolError(f"not exactly one valid packet: {bytes(data).hex(' ')}")
    return pkt


class StreamDecoder:
    """Splits a byte stream into CRC-checked packets; counts corrupt packets and junk bytes."""

    def __init__(self, keep_corrupt: bool = False):
        self.buf = bytearray()
        self.corrupt = 0    # packets whose CRC did not match
        self.junk = 0       # bytes discarded outside any packet (noise, truncated packets)
        self.keep_corrupt = keep_corrupt
        self.corrupt_packets: list[Packet] = []   # (id, instruction) of CRC failures, when keep_corrupt

    def feed(self, data) -> None:
        self.buf += data

    def clear(self) -> None:
        self.junk += len(self.buf)
        del self.buf[:]

    def pop(self) -> Packet | None:
        """The next complete valid packet, or None when more bytes are needed."""
        buf = self.buf
        while True:
            i = buf.find(HEADER)
            if i < 0:
                keep = 3 if len(buf) >= 3 else len(buf)
                drop = len(buf) - keep
                if drop:
                    self.junk += drop
                    del buf[:drop]
                return None
            if i:
                self.junk += i
                del buf[:i]
            if len(buf) < 7:
                return None
            length = buf[5] | (buf[6] << 8)
            if length < 3 or length > MAX_LENGTH or buf[4] > BROADCAST_ID:
                self.junk += 1
                del buf[:1]
                continue
            total = 7 + length
            if len(buf) < total:
                return None
            crc = buf[total - 2] | (buf[total - 1] << 8)
            if crc16(buf, 0, total - 2) != crc:
                self.corrupt += 1
                if self.keep_corrupt:
                    self.corrupt_packets.append(Packet(buf[4], buf[7], 0, b""))
                self.junk += 4
                del buf[:4]     # a header cannot occur inside a packet: rescan from here
                continue
            dxl_id = buf[4]
            body = bytes(buf[7:total - 2])
            del buf[:total]
            if body.find(b"\xff\xff\xfd\xfd") >= 0:
                body = unstuff(body)
            inst = body[0]
            if inst == STATUS:
                if len(body) < 2:
                    self.corrupt += 1
                    continue
                return Packet(dxl_id, STATUS, body[1], body[2:])
            return Packet(dxl_id, inst, 0, body[1:])
