"""The object dictionary of an emulated CoE slave (ETG.1000.6 5.6.1 and CiA 301 7.4: index / sub-index,
object codes VAR / ARRAY / RECORD, data types, access; ETG.1000.6 5.6.7 the PDO mapping and assignment
objects; CiA 402-2 the drive objects).

Per slave: device type 0x1000 (CiA 402 servo drive), error register 0x1001, device name 0x1008, hardware and
software versions 0x1009 / 0x100A, identity 0x1018 (the SII's identity), the sync manager communication types
0x1C00, the RxPDO mapping 0x1600 and TxPDO mapping 0x1A00 (the SII's PDOs), their assignment to SM2 / SM3
(0x1C12 / 0x1C13), the CiA 402 objects of the process image (0x6040 controlword, 0x6041 statusword, 0x6060 /
0x6061 modes of operation and display, 0x607A target position, 0x6064 position actual value) mirroring the
process data, and writable parameters: 0x6065 following error window, 0x6067 position window, 0x607D software
position limit, 0x6085 quick stop deceleration, 0x2000 a manufacturer-specific name string and 0x2001 a fault
on request (an error code written: the application's fault and its emergency, see .chain.SlaveApplication).

Writes are checked as ETG.1000.6 5.6.2.7 (SDO abort codes) and 5.6.7 (PDO configuration) say: an object that
does not exist 0x06020000, a sub-index 0x06090011, read-only 0x06010002, a length that does not match the data
type 0x06070010, a value outside the object's range 0x06090030; a PDO mapping or assignment entry written only
in PRE-OP (else 0x08000022) and only while its sub-index 0 is 0 (else 0x06010003), an entry naming an object
that cannot be mapped 0x06040041, a mapping longer than the sync manager allows 0x06040042.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .sii import (INTEGER8, INTEGER16, INTEGER32, UNSIGNED8, UNSIGNED16, UNSIGNED32, SiiLayout,
                  SM_MAILBOX_IN, SM_MAILBOX_OUT, SM_UNUSED)

VISIBLE_STRING = 0x09
_FORMATS = {INTEGER8: "<b", INTEGER16: "<h", INTEGER32: "<i", UNSIGNED8: "<B", UNSIGNED16: "<H", UNSIGNED32: "<I"}
VAR, ARRAY, RECORD = 0x07, 0x08, 0x09

OBJECT_DOES_NOT_EXIST, SUBINDEX_DOES_NOT_EXIST = 0x06020000, 0x06090011
READ_ONLY, SUBINDEX_ZERO_FIRST, LENGTH_MISMATCH = 0x06010002, 0x06010003, 0x06070010
VALUE_RANGE, CANNOT_MAP, PDO_TOO_LONG, DEVICE_STATE = 0x06090030, 0x06040041, 0x06040042, 0x08000022
PDO_MAPPING_ROOM = 8          # entries a PDO mapping object holds
MAX_PDO_BYTES = 64            # the process data sync managers' room (0x1100 / 0x1180, 128 bytes apart)

# The slave application's process image (see .chain.LoopbackAxis): controlword / statusword, target / actual
# position, modes of operation / display; the objects it reads from the outputs and writes to the inputs.
PROCESS_IMAGE = struct.Struct("<Hib")
OUTPUT_OBJECTS = ((0x6040, 0), (0x607A, 0), (0x6060, 0))
INPUT_OBJECTS = ((0x6041, 0), (0x6064, 0), (0x6061, 0))

FAULT_REQUEST = 0x2001                  # as the CAN emulator's drives: an error code written enters FAULT
DEVICE_TYPE_SERVO = 0x00020192          # CiA 402 (0x0192), servo drive (type 0x02)
PREOP = 2                               # AL state (see .esc) in which PDO configuration is writable


class SdoAbort(Exception):
    """An SDO refused with ``code`` (ETG.1000.6 table of SDO abort codes)."""

    def __init__(self, code: int):
        super().__init__(f"SDO abort {code:#010x}")
        self.code = code


@dataclass
class Entry:
    """One sub-index: data type, access ("ro", "rw", or "rw-preop": writable in PRE-OP only), value (an int,
    or bytes for a string), ``size`` the string's room in bytes."""
    data_type: int
    access: str
    value: int | bytes
    size: int = 0
    mappable: bool = False

    @property
    def bits(self) -> int:
        fmt = _FORMATS.get(self.data_type)
        return 8 * (struct.calcsize(fmt) if fmt else max(self.size, len(self.value)))

    def encode(self) -> bytes:
        fmt = _FORMATS.get(self.data_type)
        return struct.pack(fmt, self.value) if fmt else bytes(self.value)

    def decode(self, data: bytes) -> int | bytes:
        fmt = _FORMATS.get(self.data_type)
        if fmt is None:
            if len(data) > self.size:
                raise SdoAbort(LENGTH_MISMATCH)
            return bytes(data)
        if len(data) != struct.calcsize(fmt):
            raise SdoAbort(LENGTH_MISMATCH)
        return struct.unpack(fmt, data)[0]


@dataclass
class DictionaryObject:
    """An object: name, object code, its sub-indices (sub-index 0 of an ARRAY / RECORD: the count)."""
    name: str
    code: int
    entries: dict[int, Entry]


def _var(name, data_type, access, value, size=0, mappable=False):
    return DictionaryObject(name, VAR, {0: Entry(data_type, access, value, size, mappable)})


def _record(name, code, access, data_type, values, count_access=None, room=0):
    """Sub-index 0 the count of ``values``; ``room`` sub-indices in all (a PDO mapping's free entries)."""
    entries = {0: Entry(UNSIGNED8, count_access or access, len(values))}
    padded = list(values) + [0] * (room - len(values))
    entries.update({k + 1: Entry(data_type, access, v) for k, v in enumerate(padded)})
    return DictionaryObject(name, code, entries)


class ObjectDictionary:
    """The objects of one CiA 402 slave with the SII ``layout``; ``state`` (the AL state) decides what the
    PDO configuration objects accept. :meth:`read` / :meth:`write` take one sub-index, :meth:`read_complete` /
    :meth:`write_complete` an object's sub-indices at once (ETG.1000.6 5.6.2.1.1 complete access)."""

    def __init__(self, layout: SiiLayout, hardware_version: str = "1.0", software_version: str = "1.0"):
        i = layout.identity
        name = i.name.encode("ascii")
        self.objects: dict[int, DictionaryObject] = {
            0x1000: _var("Device type", UNSIGNED32, "ro", DEVICE_TYPE_SERVO),
            0x1001: _var("Error register", UNSIGNED8, "ro", 0),
            0x1008: _var("Manufacturer device name", VISIBLE_STRING, "ro", name, len(name)),
            0x1009: _var("Manufacturer hardware version", VISIBLE_STRING, "ro", hardware_version.encode(), 16),
            0x100A: _var("Manufacturer software version", VISIBLE_STRING, "ro", software_version.encode(), 16),
            0x1018: _record("Identity", RECORD, "ro", UNSIGNED32,
                            [i.vendor_id, i.product_code, i.revision, i.serial]),
            0x1C00: _record("Sync manager communication type", ARRAY, "ro", UNSIGNED8,
                            [s.kind for s in layout.sync_managers]),
            0x2000: _var("User name", VISIBLE_STRING, "rw", b"", 256),
            FAULT_REQUEST: _var("Fault on request (error code)", UNSIGNED16, "rw", 0),
            0x6065: _var("Following error window", UNSIGNED32, "rw", 10_000),
            0x6067: _var("Position window", UNSIGNED32, "rw", 100),
            0x607D: _record("Software position limit", ARRAY, "rw", INTEGER32, [-(2**31), 2**31 - 1],
                            count_access="ro"),
            0x6085: _var("Quick stop deceleration", UNSIGNED32, "rw", 100_000),
        }
        for pdo in layout.rx_pdos + layout.tx_pdos:
            for e in pdo.entries:
                self.objects[e.index] = _var(e.name, e.data_type, "ro" if pdo in layout.tx_pdos else "rw", 0,
                                             mappable=True)
        self.rx_pdos = {p.index: p for p in layout.rx_pdos}
        self.tx_pdos = {p.index: p for p in layout.tx_pdos}
        for pdo in layout.rx_pdos + layout.tx_pdos:
            self.objects[pdo.index] = _record(pdo.name, RECORD, "rw-preop", UNSIGNED32,
                                              [e.index << 16 | e.subindex << 8 | e.bits for e in pdo.entries],
                                              room=PDO_MAPPING_ROOM)
        self.assign_index = {}
        for n, sm in enumerate(layout.sync_managers):
            pdos = [p.index for p in layout.rx_pdos + layout.tx_pdos if p.sync_manager == n]
            if sm.kind not in (SM_UNUSED, SM_MAILBOX_OUT, SM_MAILBOX_IN):
                self.objects[0x1C10 + n] = _record(f"Sync manager {n} PDO assignment", ARRAY, "rw-preop",
                                                   UNSIGNED16, pdos)
                self.assign_index[n] = 0x1C10 + n
        self.state = PREOP
        self._mappings: dict[int, list] = {}
        self.on_fault_request = lambda code: None

    # -- one sub-index ------------------------------------------------------------------------------------

    def entry(self, index: int, subindex: int) -> Entry:
        obj = self.objects.get(index)
        if obj is None:
            raise SdoAbort(OBJECT_DOES_NOT_EXIST)
        e = obj.entries.get(subindex)
        if e is None:
            raise SdoAbort(SUBINDEX_DOES_NOT_EXIST)
        return e

    def read(self, index: int, subindex: int) -> bytes:
        return self.entry(index, subindex).encode()

    def write(self, index: int, subindex: int, data: bytes) -> None:
        e = self.entry(index, subindex)
        if e.access == "ro":
            raise SdoAbort(READ_ONLY)
        value = e.decode(data)
        if e.access == "rw-preop":
            self._check_pdo_configuration(index, subindex, value)
            self._mappings.clear()
        e.value = value
        if index == FAULT_REQUEST and value:
            self.on_fault_request(value)

    def value(self, index: int, subindex: int = 0):
        return self.objects[index].entries[subindex].value

    def set_value(self, index: int, subindex: int, value) -> None:
        """The application's side: a value the process data carried, stored without the SDO checks."""
        self.objects[index].entries[subindex].value = value

    # -- complete access ----------------------------------------------------------------------------------

    def read_complete(self, index: int, subindex: int) -> bytes:
        """Sub-indices ``subindex`` (0 or 1) to the count in sub-index 0, which complete access pads to 16 bits
        (ETG.1000.6 5.6.2.1.1)."""
        obj = self._complete_object(index, subindex)
        count = obj.entries[0].value
        out = bytearray(struct.pack("<BB", count, 0) if subindex == 0 else b"")
        for k in range(1, count + 1):
            out += obj.entries[k].encode()
        return bytes(out)

    def write_complete(self, index: int, subindex: int, data: bytes) -> None:
        """All sub-indices from ``subindex`` at once: with sub-index 0 the new count first (as a 16-bit field),
        the entries written with sub-index 0 at 0, then the count, as a master writing one by one would."""
        obj = self._complete_object(index, subindex)
        if any(e.access == "ro" for k, e in obj.entries.items() if k):
            raise SdoAbort(READ_ONLY)
        if subindex == 0:
            if len(data) < 2:
                raise SdoAbort(LENGTH_MISMATCH)
            count, data = data[0], data[2:]
        else:
            count = obj.entries[0].value
        sizes = [obj.entries[k].bits // 8 for k in range(1, count + 1) if k in obj.entries]
        if len(sizes) != count:
            raise SdoAbort(VALUE_RANGE)
        if sum(sizes) != len(data):
            raise SdoAbort(LENGTH_MISMATCH)
        before = {k: e.value for k, e in obj.entries.items()}
        try:
            if subindex == 0:
                self.write(index, 0, b"\0")
            offset = 0
            for k, size in enumerate(sizes, 1):
                self.write(index, k, data[offset:offset + size])
                offset += size
            if subindex == 0:
                self.write(index, 0, bytes([count]))
        except SdoAbort:
            for k, value in before.items():
                obj.entries[k].value = value
            raise

    def _complete_object(self, index: int, subindex: int) -> DictionaryObject:
        obj = self.objects.get(index)
        if obj is None:
            raise SdoAbort(OBJECT_DOES_NOT_EXIST)
        if obj.code == VAR or subindex > 1:
            raise SdoAbort(SUBINDEX_DOES_NOT_EXIST)
        return obj

    # -- PDO configuration --------------------------------------------------------------------------------

    def _check_pdo_configuration(self, index: int, subindex: int, value: int) -> None:
        if self.state != PREOP:
            raise SdoAbort(DEVICE_STATE)
        obj = self.objects[index]
        if subindex:
            if obj.entries[0].value != 0:
                raise SdoAbort(SUBINDEX_ZERO_FIRST)
            return
        if value > len(obj.entries) - 1:
            raise SdoAbort(VALUE_RANGE)
        if index in self.rx_pdos or index in self.tx_pdos:
            bits = 0
            for k in range(1, value + 1):
                bits += self._mapped_bits(obj.entries[k].value, rx=index in self.rx_pdos)
            if bits > 8 * MAX_PDO_BYTES:
                raise SdoAbort(PDO_TOO_LONG)
        else:
            pdos = self.rx_pdos if self.assign_index.get(2) == index else self.tx_pdos
            if any(obj.entries[k].value not in pdos for k in range(1, value + 1)):
                raise SdoAbort(VALUE_RANGE)

    def _mapped_bits(self, entry: int, rx: bool) -> int:
        index, subindex, bits = entry >> 16, entry >> 8 & 0xFF, entry & 0xFF
        obj = self.objects.get(index)
        e = obj.entries.get(subindex) if obj else None
        if e is None or not e.mappable or e.bits != bits or (rx and e.access == "ro"):
            raise SdoAbort(CANNOT_MAP)
        return bits

    def mapping(self, sync_manager: int) -> list[Entry]:
        """The entries the PDOs assigned to ``sync_manager`` map, in order."""
        if sync_manager not in self._mappings:
            assign = self.objects[self.assign_index[sync_manager]].entries
            out = []
            for k in range(1, assign[0].value + 1):
                pdo = self.objects[assign[k].value].entries
                for j in range(1, pdo[0].value + 1):
                    out.append(self.objects[pdo[j].value >> 16].entries[pdo[j].value >> 8 & 0xFF])
            self._mappings[sync_manager] = out
        return self._mappings[sync_manager]

    def mapped_bytes(self, sync_manager: int) -> int:
        return sum(e.bits for e in self.mapping(sync_manager)) // 8

    # -- process data -------------------------------------------------------------------------------------

    def unpack(self, sync_manager: int, data) -> None:
        """The outputs of ``sync_manager`` (its bytes as the master wrote them) into the objects mapped."""
        offset = 0
        for e in self.mapping(sync_manager):
            size = e.bits // 8
            e.value = e.decode(bytes(data[offset:offset + size]))
            offset += size

    def pack(self, sync_manager: int) -> bytes:
        return b"".join(e.encode() for e in self.mapping(sync_manager))

    def application_outputs(self) -> bytes:
        return PROCESS_IMAGE.pack(*(self.value(i, s) for i, s in OUTPUT_OBJECTS))

    def store_inputs(self, image: bytes) -> None:
        for (index, subindex), value in zip(INPUT_OBJECTS, PROCESS_IMAGE.unpack(image)):
            self.set_value(index, subindex, value)
