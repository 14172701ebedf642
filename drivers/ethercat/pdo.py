"""The process data of a CiA 402 drive on EtherCAT: the objects the ``ethercat`` driver exchanges in each mode,
the SDO writes that map them in PRE-OP, the mapping read back from a slave, and where each object sits in the
slave's bytes.

PDO mapping and assignment (ETG.1000.6 5.6.7; ETG.6010, the CiA 402 profile over EtherCAT, 6.2): a sync
manager's process data is the concatenation, in order, of the PDOs its assignment object lists (0x1C12 for SM2,
the outputs; 0x1C13 for SM3, the inputs), each PDO the concatenation of its mapping object's entries (0x1600..
receive, 0x1A00.. transmit; an entry is ``index << 16 | subindex << 8 | bit length``). Either object is written
only in PRE-OP, with its sub-index 0 (the count) at 0 while the entries change.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..base import EFFORT_MODE, POSITION_MODE, VELOCITY_MODE
from ..can import objects as ob

RX_ASSIGN, TX_ASSIGN = 0x1C12, 0x1C13
RX_PDO, TX_PDO = 0x1600, 0x1A00

# (bits, struct format) of the objects the driver reads or writes (CiA 402-2 data types).
OBJECT_TYPES = {
    ob.CONTROLWORD: (16, "H"), ob.MODES_OF_OPERATION: (8, "b"), ob.TARGET_POSITION: (32, "i"),
    ob.TARGET_VELOCITY: (32, "i"), ob.TARGET_TORQUE: (16, "h"), ob.TORQUE_OFFSET: (16, "h"),
    ob.STATUSWORD: (16, "H"), ob.MODES_DISPLAY: (8, "b"), ob.POSITION_ACTUAL: (32, "i"),
    ob.VELOCITY_ACTUAL: (32, "i"), ob.TORQUE_ACTUAL: (16, "h"), ob.ERROR_CODE: (16, "H"),
}
MODE_OF_OPERATION = {EFFORT_MODE: ob.CST, POSITION_MODE: ob.CSP, VELOCITY_MODE: ob.CSV}
TARGET = {EFFORT_MODE: ob.TARGET_TORQUE, POSITION_MODE: ob.TARGET_POSITION, VELOCITY_MODE: ob.TARGET_VELOCITY}
INPUTS = (ob.STATUSWORD, ob.MODES_DISPLAY, ob.POSITION_ACTUAL, ob.VELOCITY_ACTUAL, ob.TORQUE_ACTUAL, ob.ERROR_CODE)
REQUIRED_INPUTS = (ob.STATUSWORD, ob.POSITION_ACTUAL, ob.VELOCITY_ACTUAL)


def outputs(mode: str, torque_offset: bool = False) -> tuple:
    """What the driver maps into the outputs when it maps (``pdo_mapping = "config"``): controlword, mode,
    the mode's target, and the torque offset 0x60B2 when it sends one."""
    return (ob.CONTROLWORD, ob.MODES_OF_OPERATION, TARGET[mode]) + ((ob.TORQUE_OFFSET,) if torque_offset else ())


def required_outputs(mode: str, torque_offset: bool = False) -> tuple:
    """What a slave's own output mapping must hold (``pdo_mapping = "slave"``)."""
    return (ob.CONTROLWORD, TARGET[mode]) + ((ob.TORQUE_OFFSET,) if torque_offset else ())


@dataclass(frozen=True)
class Entry:
    """One mapping entry: an object's index, sub-index and bit length."""

    index: int
    subindex: int
    bits: int

    @classmethod
    def of(cls, index: int) -> "Entry":
        return cls(index, 0, OBJECT_TYPES[index][0])

    @classmethod
    def decode(cls, value: int) -> "Entry":
        return cls(value >> 16, value >> 8 & 0xFF, value & 0xFF)

    def encode(self) -> int:
        return self.index << 16 | self.subindex << 8 | self.bits

    def __str__(self) -> str:
        return f"0x{self.index:04X}:{self.subindex:02X} ({self.bits} bits)"


class Image:
    """One direction of a slave's process data: ``entries`` in order, the objects this driver knows by their
    byte offset (anything else is padding to it: written as zeros, read past). ``pack`` / ``unpack`` move the
    known objects in ``fields`` order (:attr:`fields`)."""

    def __init__(self, entries: list[Entry]):
        self.entries = list(entries)
        fmt, self.fields, at, bits = "<", [], 0, 0
        for e in self.entries:
            known = OBJECT_TYPES.get(e.index)
            if (e.subindex == 0 and known and known[0] == e.bits and bits % 8 == 0
                    and e.index not in self.fields):
                fmt += (f"{bits // 8 - at}x" if bits // 8 > at else "") + known[1]
                self.fields.append(e.index)
                at = (bits + e.bits) // 8
            bits += e.bits
        self.bits = bits
        self.size = (bits + 7) // 8
        self.struct = struct.Struct(fmt + (f"{self.size - at}x" if self.size > at else ""))
        self.position = {index: k for k, index in enumerate(self.fields)}

    def missing(self, required) -> list[int]:
        return [index for index in required if index not in self.position]

    def describe(self) -> str:
        return ", ".join(str(e) for e in self.entries) or "nothing"


def write_mapping(sdo_write, assign: int, pdo: int, entries: list[Entry]) -> None:
    """Assign ``pdo`` alone to the sync manager of ``assign`` and map ``entries`` into it (ETG.1000.6 5.6.7.4:
    the count first to 0, the entries, the count; the assignment likewise), through ``sdo_write(index,
    subindex, data)``."""
    sdo_write(assign, 0, bytes([0]))
    sdo_write(pdo, 0, bytes([0]))
    for k, entry in enumerate(entries, 1):
        sdo_write(pdo, k, entry.encode().to_bytes(4, "little"))
    sdo_write(pdo, 0, bytes([len(entries)]))
    sdo_write(assign, 1, pdo.to_bytes(2, "little"))
    sdo_write(assign, 0, bytes([1]))


def read_mapping(sdo_read, assign: int) -> list[Entry]:
    """The entries of every PDO the sync manager of ``assign`` has assigned, in order, through
    ``sdo_read(index, subindex) -> bytes``."""
    entries = []
    for k in range(1, sdo_read(assign, 0)[0] + 1):
        pdo = int.from_bytes(sdo_read(assign, k)[:2], "little")
        for j in range(1, sdo_read(pdo, 0)[0] + 1):
            entries.append(Entry.decode(int.from_bytes(sdo_read(pdo, j)[:4], "little")))
    return entries
