"""EtherCAT frames: the EtherCAT header and its datagrams (ETG.1000.4, DL protocol: the frame structure of
EtherType 0x88A4 and the DLPDU of each command).

A frame is the Ethernet payload after EtherType 0x88A4: a 2-byte header (bits 0-10 the length of the
datagrams that follow, bit 11 reserved, bits 12-15 the type, 1 for EtherCAT commands) and one or more
datagrams, each a 10-byte header -- command, index, address (ADP and ADO, or a 32-bit logical address),
length (bits 0-10), circulating (bit 14) and more-follows (bit 15) flags, IRQ -- then the data and a 16-bit
working counter. All little endian. :class:`Datagram` is a view into the frame's bytes, so a slave processes
the frame in place as the frame passes through it.
"""
from __future__ import annotations

import struct
from enum import IntEnum

ETHERTYPE = 0x88A4
HEADER_TYPE_COMMANDS = 1
DATAGRAM_HEADER = 10
WKC_SIZE = 2
_HEADER = struct.Struct("<BBHHHH")      # cmd, idx, ADP, ADO, length/flags, IRQ
_LENGTH_MASK = 0x07FF
_MORE = 0x8000
_CIRCULATING = 0x4000


class Command(IntEnum):
    """The command types of ETG.1000.4 (DL protocol, table of EtherCAT command types)."""
    NOP = 0
    APRD = 1
    APWR = 2
    APRW = 3
    FPRD = 4
    FPWR = 5
    FPRW = 6
    BRD = 7
    BWR = 8
    BRW = 9
    LRD = 10
    LWR = 11
    LRW = 12
    ARMW = 13
    FRMW = 14


AUTO_INCREMENT = frozenset({Command.APRD, Command.APWR, Command.APRW, Command.ARMW})
CONFIGURED = frozenset({Command.FPRD, Command.FPWR, Command.FPRW, Command.FRMW})
BROADCAST = frozenset({Command.BRD, Command.BWR, Command.BRW})
LOGICAL = frozenset({Command.LRD, Command.LWR, Command.LRW})
READS = frozenset({Command.APRD, Command.FPRD, Command.BRD, Command.LRD})
WRITES = frozenset({Command.APWR, Command.FPWR, Command.BWR, Command.LWR})
READ_WRITES = frozenset({Command.APRW, Command.FPRW, Command.BRW, Command.LRW})


class FrameError(ValueError):
    """A frame that is not a well-formed EtherCAT frame (the ESC passes it on untouched)."""


class Datagram:
    """One datagram of a frame, read and written in place in ``buf`` at ``offset``."""
    __slots__ = ("buf", "offset", "command", "length")

    def __init__(self, buf: bytearray, offset: int):
        self.buf = buf
        self.offset = offset
        self.command = buf[offset]
        self.length = struct.unpack_from("<H", buf, offset + 6)[0] & _LENGTH_MASK

    @property
    def index(self) -> int:
        return self.buf[self.offset + 1]

    @property
    def adp(self) -> int:
        return struct.unpack_from("<H", self.buf, self.offset + 2)[0]

    @adp.setter
    def adp(self, value: int) -> None:
        struct.pack_into("<H", self.buf, self.offset + 2, value & 0xFFFF)

    @property
    def ado(self) -> int:
        return struct.unpack_from("<H", self.buf, self.offset + 4)[0]

    @property
    def logical_address(self) -> int:
        return struct.unpack_from("<I", self.buf, self.offset + 2)[0]

    @property
    def more_follows(self) -> bool:
        return bool(struct.unpack_from("<H", self.buf, self.offset + 6)[0] & _MORE)

    @property
    def data_offset(self) -> int:
        return self.offset + DATAGRAM_HEADER

    @property
    def data(self) -> memoryview:
        start = self.data_offset
        return memoryview(self.buf)[start:start + self.length]

    @property
    def wkc(self) -> int:
        return struct.unpack_from("<H", self.buf, self.data_offset + self.length)[0]

    @wkc.setter
    def wkc(self, value: int) -> None:
        struct.pack_into("<H", self.buf, self.data_offset + self.length, value & 0xFFFF)

    @property
    def end(self) -> int:
        return self.data_offset + self.length + WKC_SIZE


def datagrams(frame: bytearray) -> list[Datagram]:
    """The datagrams of ``frame`` (the EtherCAT header first, no Ethernet header), checked against the
    header's length and each datagram's more-follows flag; :class:`FrameError` if they disagree."""
    if len(frame) < 2:
        raise FrameError("shorter than the EtherCAT header")
    header = struct.unpack_from("<H", frame, 0)[0]
    if header >> 12 != HEADER_TYPE_COMMANDS:
        raise FrameError(f"EtherCAT header type {header >> 12}, not 1 (commands)")
    end = 2 + (header & _LENGTH_MASK)
    if end > len(frame):
        raise FrameError(f"header length {end - 2} beyond the frame's {len(frame) - 2} bytes")
    out, offset = [], 2
    while True:
        if offset + DATAGRAM_HEADER + WKC_SIZE > end:
            raise FrameError(f"datagram at byte {offset} runs past the header length")
        d = Datagram(frame, offset)
        if d.end > end:
            raise FrameError(f"datagram at byte {offset} (length {d.length}) runs past the header length")
        out.append(d)
        if not d.more_follows:
            return out
        offset = d.end


def build_frame(parts: list[tuple[int, int, int, bytes | int]]) -> bytearray:
    """A frame of datagrams ``(command, index, address, data or a length to read)``; ``address`` is
    ``ADP | ADO << 16`` (or the logical address), working counters 0. For masters and tests."""
    body = bytearray()
    for k, (command, index, address, data) in enumerate(parts):
        payload = bytes(data)      # an int: that many zero bytes, the room for what a read returns
        flags = len(payload) | (_MORE if k < len(parts) - 1 else 0)
        body += _HEADER.pack(command, index, address & 0xFFFF, address >> 16, flags, 0) + payload + b"\0\0"
    return bytearray(struct.pack("<H", len(body) | HEADER_TYPE_COMMANDS << 12)) + body


def station(adp: int, ado: int) -> int:
    """The 32-bit address field of a physical command: ADP (position or station address) and ADO (offset)."""
    return (adp & 0xFFFF) | (ado & 0xFFFF) << 16
