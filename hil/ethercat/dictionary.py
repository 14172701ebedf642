"""The object dictionary of an emulated CoE slave (ETG.1000.6 5.6.1 and CiA 301 7.4: index / sub-index,
object codes VAR / ARRAY / RECORD, data types, access; ETG.1000.6 5.6.7 the PDO mapping and assignment
objects; CiA 402-2 the drive objects).

Per slave: device type 0x1000 (CiA 402 servo drive), error register 0x1001, device name 0x1008, hardware and
software versions 0x1009 / 0x100A, identity 0x1018 (the SII's identity), the timestamp object 0x10F8 (ETG.1020,
UNSIGNED64: the system time in ns of the last input sample, with SYNC0 running its pulse's), the sync manager
communication types 0x1C00, four RxPDO mappings 0x1600-0x1603 and four TxPDO mappings 0x1A00-0x1A03
(ETG.6010, CiA 402 on EtherCAT; the SII's PDOs first, the others empty), their assignment to SM2 / SM3
(0x1C12 / 0x1C13, the SII's), 0x6065 following error window and 0x6067 position window, 0x2000 a
manufacturer-specific name string and 0x2001 a fault on request (an error code written: the application's
fault and its emergency, see .chain.SlaveApplication). The CiA 402 objects 0x6000-0x6FFF are the CAN drive's
(:func:`rtctl.drivers.can.objects.drive_object_dictionary`: data types, access, ranges, which are mappable):
controlword 0x6040, statusword 0x6041, error code 0x603F, modes of operation 0x6060 / display 0x6061, target
position 0x607A / velocity 0x60FF / torque 0x6071, torque offset 0x60B2, position 0x6064 / velocity 0x606C /
torque 0x6077 actual,
max torque 0x6072, rated torque 0x6076, encoder resolution 0x608F, gear ratio 0x6091, supported drive modes
0x6502, quick stop option code 0x605A and deceleration 0x6085, software position limit 0x607D, ... With a
``device`` behind the slave (the CAN emulator's drive, :mod:`.drive_axis`) an SDO reads and writes these in
the drive itself, with its checks and its live actual values, so that both buses share one drive; without one
the dictionary keeps them.

Each object also holds the value the process data carry (:meth:`ObjectDictionary.pack` / :meth:`unpack`): the
slave application reads its outputs from, and writes its inputs to, these values.

Writes are checked as ETG.1000.6 5.6.2.7 (SDO abort codes) and 5.6.7 (PDO configuration) say: an object that
does not exist 0x06020000, a sub-index 0x06090011, read-only 0x06010002, a length that does not match the data
type 0x06070010, a value outside the object's range 0x06090030 / 0x06090031 (too high) / 0x06090032 (too low);
a PDO mapping or assignment entry written only in PRE-OP (else 0x08000022) and only while its sub-index 0 is 0
(else 0x06010003), a mapping entry naming an object that cannot be mapped (none, not mappable, another bit
length, or an input in an RxPDO) 0x06040041, a mapping or an assignment whose PDOs exceed the sync manager's
room 0x06040042.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .sii import (INPUTS_START, INTEGER8, INTEGER16, INTEGER32, OUTPUTS_START, UNSIGNED8, UNSIGNED16, UNSIGNED32,
                  SiiLayout, SM_MAILBOX_IN, SM_MAILBOX_OUT, SM_OUTPUTS, SM_UNUSED)

VISIBLE_STRING, UNSIGNED64 = 0x09, 0x1B
_FORMATS = {INTEGER8: "<b", INTEGER16: "<h", INTEGER32: "<i", UNSIGNED8: "<B", UNSIGNED16: "<H", UNSIGNED32: "<I",
            UNSIGNED64: "<Q"}
_RANGES = {fmt: ((-(1 << (8 * struct.calcsize(fmt) - 1)), (1 << (8 * struct.calcsize(fmt) - 1)) - 1)
                if fmt[1].islower() else (0, (1 << (8 * struct.calcsize(fmt))) - 1)) for fmt in _FORMATS.values()}
VAR, ARRAY, RECORD = 0x07, 0x08, 0x09

OBJECT_DOES_NOT_EXIST, SUBINDEX_DOES_NOT_EXIST = 0x06020000, 0x06090011
READ_ONLY, SUBINDEX_ZERO_FIRST, LENGTH_MISMATCH = 0x06010002, 0x06010003, 0x06070010
VALUE_RANGE, VALUE_TOO_HIGH, VALUE_TOO_LOW = 0x06090030, 0x06090031, 0x06090032
CANNOT_MAP, PDO_TOO_LONG, DEVICE_STATE = 0x06040041, 0x06040042, 0x08000022
PDO_MAPPING_ROOM = 8          # entries a PDO mapping object holds
RX_PDOS, TX_PDOS = range(0x1600, 0x1604), range(0x1A00, 0x1A04)
# A buffered sync manager takes three buffers of its length in process RAM (ETG.1000.4, sync manager buffered
# mode); the SII puts SM3 128 bytes after SM2, which leaves each direction 42 bytes of process data.
MAX_PDO_BYTES = (INPUTS_START - OUTPUTS_START) // 3
PROFILE_AREA = range(0x6000, 0x7000)    # CiA 402-2: the standardized device profile area

FAULT_REQUEST = 0x2001                  # as the CAN emulator's drives: an error code written enters FAULT
TIMESTAMP = 0x10F8                      # ETG.1020 timestamp object: system time (ns) of the inputs' sample
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
    or bytes for a string), ``size`` the string's room in bytes, whether it may be mapped into a PDO and its
    range (``low`` / ``high``, None: the data type's)."""
    data_type: int
    access: str
    value: int | bytes
    size: int = 0
    mappable: bool = False
    low: int | None = None
    high: int | None = None

    @property
    def bits(self) -> int:
        fmt = _FORMATS.get(self.data_type)
        return 8 * (struct.calcsize(fmt) if fmt else max(self.size, len(self.value)))

    def encode(self, value=None) -> bytes:
        """``value`` (default: the entry's own) in the entry's data type, an integer saturated at its range (a
        drive's actual value beyond it, a motor spun up by a diverging plant, is sent as the nearest one)."""
        value = self.value if value is None else value
        fmt = _FORMATS.get(self.data_type)
        if fmt is None:
            return bytes(value)
        lo, hi = _RANGES[fmt]
        return struct.pack(fmt, lo if value < lo else hi if value > hi else value)

    def decode(self, data: bytes) -> int | bytes:
        fmt = _FORMATS.get(self.data_type)
        if fmt is None:
            if len(data) > self.size:
                raise SdoAbort(LENGTH_MISMATCH)
            return bytes(data)
        if len(data) != struct.calcsize(fmt):
            raise SdoAbort(LENGTH_MISMATCH)
        return struct.unpack(fmt, data)[0]

    def check_range(self, value) -> None:
        if self.low is not None and value < self.low:
            raise SdoAbort(VALUE_TOO_LOW)
        if self.high is not None and value > self.high:
            raise SdoAbort(VALUE_TOO_HIGH)


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


def profile_objects(od) -> dict[int, DictionaryObject]:
    """The device profile objects (0x6000-0x6FFF) of a CANopen object dictionary (python-canopen's, as
    :func:`rtctl.drivers.can.objects.drive_object_dictionary` builds it): same data types (CiA 301 codes, which
    ETG.1000.6 shares), access, defaults, ranges and PDO mapping flags. An object of members of one data type
    is an ARRAY, else a RECORD (CiA 301 7.4.3)."""
    out = {}
    for obj in od.values():
        if obj.index not in PROFILE_AREA:
            continue
        members = list(obj.values()) if hasattr(obj, "values") else [obj]
        entries = {v.subindex: Entry(v.data_type, "ro" if v.access_type == "const" else
                                     "rw" if v.access_type == "wo" else v.access_type,
                                     v.default, 0, bool(v.pdo_mappable), v.min, v.max) for v in members}
        if len(members) == 1 and members[0] is obj:
            code = VAR
        else:
            code = ARRAY if len({e.data_type for k, e in entries.items() if k}) == 1 else RECORD
        out[obj.index] = DictionaryObject(obj.name, code, entries)
    return out


class ObjectDictionary:
    """The objects of one CiA 402 slave with the SII ``layout``; ``state`` (the AL state) decides what the
    PDO configuration objects accept. ``device``: the drive behind the slave (``od``, ``read(index, sub)``,
    ``write(index, sub, value)`` raising an ``SdoAbortedError``, ``now``: :class:`rtctl.hil.cia402_drive.Cia402Drive`)
    whose profile objects an SDO reads and writes, ``clock()`` the slave's time for the drive. :meth:`read` /
    :meth:`write` take one sub-index, :meth:`read_complete` / :meth:`write_complete` an object's sub-indices at
    once (ETG.1000.6 5.6.2.1.1 complete access)."""

    def __init__(self, layout: SiiLayout, hardware_version: str = "1.0", software_version: str = "1.0",
                 device=None, clock=lambda: 0.0):
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
            TIMESTAMP: _var("Timestamp object", UNSIGNED64, "ro", 0, mappable=True),
            0x1C00: _record("Sync manager communication type", ARRAY, "ro", UNSIGNED8,
                            [s.kind for s in layout.sync_managers]),
            0x2000: _var("User name", VISIBLE_STRING, "rw", b"", 256),
            FAULT_REQUEST: _var("Fault on request (error code)", UNSIGNED16, "rw", 0),
            0x6065: _var("Following error window", UNSIGNED32, "rw", 10_000),
            0x6067: _var("Position window", UNSIGNED32, "rw", 100),
        }
        if device is None:
            from rtctl.drivers.can.objects import drive_object_dictionary
            profile = profile_objects(drive_object_dictionary())
        else:
            profile = profile_objects(device.od)
        self.objects.update(profile)
        self.device, self.clock = device, clock
        self.device_objects = frozenset(profile) if device is not None else frozenset()
        for pdo in layout.rx_pdos + layout.tx_pdos:
            for e in pdo.entries:
                if e.index not in self.objects:
                    self.objects[e.index] = _var(e.name, e.data_type, "ro" if pdo in layout.tx_pdos else "rw", 0,
                                                 mappable=True)
        sii_pdos = {p.index: p for p in layout.rx_pdos + layout.tx_pdos}
        for k, index in enumerate(list(RX_PDOS) + list(TX_PDOS)):
            pdo = sii_pdos.get(index)
            entries = [e.index << 16 | e.subindex << 8 | e.bits for e in pdo.entries] if pdo else []
            name = pdo.name if pdo else f"{'RxPDO' if index in RX_PDOS else 'TxPDO'} {index % 16 + 1}"
            self.objects[index] = _record(name, RECORD, "rw-preop", UNSIGNED32, entries, room=PDO_MAPPING_ROOM)
        self.assign_index = {}
        self.output_sync_manager = next((n for n, sm in enumerate(layout.sync_managers) if sm.kind == SM_OUTPUTS),
                                        None)
        for n, sm in enumerate(layout.sync_managers):
            pdos = [p.index for p in layout.rx_pdos + layout.tx_pdos if p.sync_manager == n]
            if sm.kind not in (SM_UNUSED, SM_MAILBOX_OUT, SM_MAILBOX_IN):
                self.objects[0x1C10 + n] = _record(f"Sync manager {n} PDO assignment", ARRAY, "rw-preop",
                                                   UNSIGNED16, pdos, room=len(RX_PDOS))
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
        e = self.entry(index, subindex)
        if index in self.device_objects:
            return e.encode(self.device.read(index, subindex))
        return e.encode()

    def write(self, index: int, subindex: int, data: bytes) -> None:
        e = self.entry(index, subindex)
        if e.access == "ro":
            raise SdoAbort(READ_ONLY)
        value = e.decode(data)
        if e.access == "rw-preop":
            self._check_pdo_configuration(index, subindex, value)
            self._mappings.clear()
        elif index in self.device_objects:
            self._device_write(index, subindex, value)
        elif e.data_type in _FORMATS:
            e.check_range(value)
        e.value = value
        if index == FAULT_REQUEST and value:
            self.on_fault_request(value)

    def _device_write(self, index: int, subindex: int, value: int) -> None:
        from canopen.sdo import SdoAbortedError
        self.device.now = self.clock()
        try:
            self.device.write(index, subindex, value)
        except SdoAbortedError as refused:
            raise SdoAbort(refused.code) from None

    def value(self, index: int, subindex: int = 0):
        return self.objects[index].entries[subindex].value

    def set_value(self, index: int, subindex: int, value) -> None:
        """The application's side: a value the process data carry, stored without the SDO checks."""
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
        """ETG.1000.6 5.6.7: a mapping entry is checked when written (and again when sub-index 0 enables the
        mapping), an assignment entry must name a PDO of its direction; sub-index 0 = n enables n entries if
        the PDOs they make fit the sync manager's room."""
        if self.state != PREOP:
            raise SdoAbort(DEVICE_STATE)
        obj = self.objects[index]
        is_mapping = index in RX_PDOS or index in TX_PDOS
        if subindex:
            if obj.entries[0].value != 0:
                raise SdoAbort(SUBINDEX_ZERO_FIRST)
            if value and is_mapping:
                self._mapped_bits(value, rx=index in RX_PDOS)
            elif value and value not in self._pdos_of(index):
                raise SdoAbort(VALUE_RANGE)
            return
        if value > len(obj.entries) - 1:
            raise SdoAbort(VALUE_RANGE)
        entries = [obj.entries[k].value for k in range(1, value + 1)]
        if is_mapping:
            bits = sum(self._mapped_bits(entry, rx=index in RX_PDOS) for entry in entries)
            assigned = [self._assigned(a) for a in self.assign_index.values()]
            others = next((sum(self._pdo_bits(p) for p in pdos if p != index)
                           for pdos in assigned if index in pdos), 0)
            total = bits + others
        else:
            if any(entry not in self._pdos_of(index) for entry in entries):
                raise SdoAbort(VALUE_RANGE)
            total = sum(self._pdo_bits(p) for p in entries)
        if total > 8 * MAX_PDO_BYTES:
            raise SdoAbort(PDO_TOO_LONG)

    def _pdos_of(self, assignment: int) -> range:
        """The PDOs an assignment object may name: RxPDOs for the outputs' sync manager, TxPDOs else."""
        return RX_PDOS if assignment == self.assign_index.get(self.output_sync_manager) else TX_PDOS

    def _assigned(self, assignment: int) -> list[int]:
        entries = self.objects[assignment].entries
        return [entries[k].value for k in range(1, entries[0].value + 1)]

    def _pdo_bits(self, pdo: int) -> int:
        entries = self.objects[pdo].entries
        return sum(entries[k].value & 0xFF for k in range(1, entries[0].value + 1))

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
            out = []
            for pdo in self._assigned(self.assign_index[sync_manager]):
                entries = self.objects[pdo].entries
                for j in range(1, entries[0].value + 1):
                    out.append(self.objects[entries[j].value >> 16].entries[entries[j].value >> 8 & 0xFF])
            self._mappings[sync_manager] = out
        return self._mappings[sync_manager]

    def maps(self, sync_manager: int, index: int, subindex: int = 0) -> bool:
        """Whether the PDOs assigned to ``sync_manager`` map the object ``index:subindex``."""
        entry = self.objects[index].entries[subindex]
        return any(e is entry for e in self.mapping(sync_manager))

    def mapped_bytes(self, sync_manager: int) -> int:
        return sum(e.bits for e in self.mapping(sync_manager)) // 8

    def layout_of(self, sync_manager: int) -> list[tuple[int, int, int, int]]:
        """(index, sub-index, bits, byte offset) of each object mapped on ``sync_manager``, in order."""
        out, offset = [], 0
        for pdo in self._assigned(self.assign_index[sync_manager]):
            entries = self.objects[pdo].entries
            for j in range(1, entries[0].value + 1):
                entry = entries[j].value
                out.append((entry >> 16, entry >> 8 & 0xFF, entry & 0xFF, offset))
                offset += (entry & 0xFF) // 8
        return out

    # -- process data -------------------------------------------------------------------------------------

    def unpack(self, sync_manager: int, data) -> None:
        """The outputs of ``sync_manager`` (its bytes as the master wrote them) into the objects mapped."""
        offset = 0
        for e in self.mapping(sync_manager):
            size = e.bits // 8
            e.value = e.decode(bytes(data[offset:offset + size]))
            offset += size

    def pack(self, sync_manager: int) -> bytes:
        """The inputs of ``sync_manager``: the values of the objects mapped, in order."""
        return b"".join(e.encode() for e in self.mapping(sync_manager))
