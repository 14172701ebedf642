"""The Slave Information Interface (SII) EEPROM image of an emulated slave (ETG.1000.6, SII; ETG.2010, the SII
specification: its word layout and categories).

Words 0x0000-0x0007 the ESC configuration area (PDI control, configured station alias, checksum: CRC-8 with
polynomial x^8+x^2+x+1 and initial value 0xFF over words 0-6, ETG.2010 "ESC configuration area"), words
0x0008-0x000F the identity (vendor id, product code, revision, serial number, 32 bits each), 0x0014-0x001C
the bootstrap and standard mailbox offsets and sizes and the mailbox protocols, 0x003E the EEPROM size
(kbit - 1) and 0x003F the version (1). From word 0x0040 the categories, each a type word, a length word (in
words) and its data, ended by the type 0xFFFF: strings (10), general (30), FMMU (40), sync managers (41),
TxPDO (50) and RxPDO (51).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

CATEGORY_STRINGS = 10
CATEGORY_GENERAL = 30
CATEGORY_FMMU = 40
CATEGORY_SYNC_MANAGER = 41
CATEGORY_TXPDO = 50
CATEGORY_RXPDO = 51
CATEGORY_END = 0xFFFF

FMMU_OUTPUTS, FMMU_INPUTS = 1, 2
SM_UNUSED, SM_MAILBOX_OUT, SM_MAILBOX_IN, SM_OUTPUTS, SM_INPUTS = 0, 1, 2, 3, 4

# Data type codes of ETG.1000.6 / CiA 301 (the PDO entries' "data type" byte).
INTEGER8, INTEGER16, INTEGER32, UNSIGNED8, UNSIGNED16, UNSIGNED32 = 0x02, 0x03, 0x04, 0x05, 0x06, 0x07

# Sync manager control bytes (ESC register 0x0804 + 8n): buffered mode; direction ECAT writes (outputs) or
# ECAT reads (inputs); an AL event on each access; outputs also trigger the SM watchdog (bit 6).
SM_CONTROL_OUTPUTS = 0x64
SM_CONTROL_INPUTS = 0x20
# Mailbox sync managers: mailbox mode; SM0 ECAT writes, SM1 ECAT reads; an AL event on each access.
SM_CONTROL_MAILBOX_OUT = 0x26
SM_CONTROL_MAILBOX_IN = 0x22
MAILBOX_PROTOCOL_COE = 0x0004        # SII word 0x001C
# CoE details (the general category's byte 5, ETG.2010): SDO, PDO assignment and configuration, complete access.
COE_SDO, COE_SDO_INFO, COE_PDO_ASSIGN, COE_PDO_CONFIG, COE_COMPLETE_ACCESS = 0x01, 0x02, 0x04, 0x08, 0x20


@dataclass(frozen=True)
class PdoEntry:
    """One object mapped into a PDO: index, subindex, bit length, data type code, name."""
    index: int
    subindex: int
    bits: int
    data_type: int
    name: str


@dataclass(frozen=True)
class Pdo:
    """A PDO (0x1600.. RxPDO, 0x1A00.. TxPDO) assigned to sync manager ``sync_manager``."""
    index: int
    sync_manager: int
    entries: tuple[PdoEntry, ...]
    name: str

    @property
    def bits(self) -> int:
        return sum(e.bits for e in self.entries)


@dataclass(frozen=True)
class SyncManagerSetting:
    """A sync manager as the SII declares it (the start values a master writes to 0x0800 + 8n)."""
    start: int
    length: int
    control: int
    enable: int
    kind: int


@dataclass(frozen=True)
class SlaveIdentity:
    """What a master reads of a slave: the SII identity words and its name (string 1, ETG.2010)."""
    vendor_id: int
    product_code: int
    revision: int
    serial: int
    name: str
    group: str = "Drives"


@dataclass(frozen=True)
class SiiLayout:
    """Identity, PDOs and sync managers of one slave type; :meth:`image` writes its SII EEPROM."""
    identity: SlaveIdentity
    rx_pdos: tuple[Pdo, ...]
    tx_pdos: tuple[Pdo, ...]
    sync_managers: tuple[SyncManagerSetting, ...]
    station_alias: int = 0
    size_bytes: int = 2048
    coe_details: int = 0
    strings: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        names = [self.identity.name, self.identity.group]
        for pdo in self.rx_pdos + self.tx_pdos:
            names.append(pdo.name)
            names.extend(e.name for e in pdo.entries)
        object.__setattr__(self, "strings", tuple(dict.fromkeys(names)))

    def string_index(self, text: str) -> int:
        return self.strings.index(text) + 1

    def mailbox(self) -> tuple[SyncManagerSetting, SyncManagerSetting] | None:
        """SM0 (mailbox out) and SM1 (mailbox in) if the slave has a mailbox."""
        sms = self.sync_managers
        if len(sms) > 1 and (sms[0].kind, sms[1].kind) == (SM_MAILBOX_OUT, SM_MAILBOX_IN):
            return sms[0], sms[1]
        return None

    def image(self) -> bytes:
        """The EEPROM's bytes: ``size_bytes`` long, 0xFF after the end category (an erased EEPROM)."""
        head = bytearray(0x80)
        struct.pack_into("<H", head, 0x04 * 2, self.station_alias)
        head[0x07 * 2] = crc8(bytes(head[:14]))
        i = self.identity
        struct.pack_into("<IIII", head, 0x08 * 2, i.vendor_id, i.product_code, i.revision, i.serial)
        mailbox = self.mailbox()
        if mailbox:
            out, in_ = mailbox
            words = (out.start, out.length, in_.start, in_.length)
            struct.pack_into("<8HH", head, 0x14 * 2, *words, *words, MAILBOX_PROTOCOL_COE)
        struct.pack_into("<H", head, 0x3E * 2, self.size_bytes * 8 // 1024 - 1)
        struct.pack_into("<H", head, 0x3F * 2, 1)
        body = bytearray(head)
        for kind, data in self._categories():
            if len(data) % 2:
                data += b"\0"
            body += struct.pack("<HH", kind, len(data) // 2) + data
        body += struct.pack("<H", CATEGORY_END)
        if len(body) > self.size_bytes:
            raise ValueError(f"SII image of {len(body)} bytes exceeds the EEPROM's {self.size_bytes}")
        return bytes(body) + b"\xff" * (self.size_bytes - len(body))

    def _categories(self):
        strings = bytearray([len(self.strings)])
        for s in self.strings:
            raw = s.encode("ascii")
            strings += bytes([len(raw)]) + raw
        yield CATEGORY_STRINGS, strings
        general = bytearray(32)
        general[0] = self.string_index(self.identity.group)   # group
        general[2] = self.string_index(self.identity.name)    # order (device type)
        general[3] = self.string_index(self.identity.name)    # name
        general[5] = self.coe_details if self.mailbox() else 0
        general[9] = 1                                         # CiA 402 (DS402) channels
        yield CATEGORY_GENERAL, general
        yield CATEGORY_FMMU, bytearray([FMMU_OUTPUTS, FMMU_INPUTS])
        sms = bytearray()
        for sm in self.sync_managers:
            sms += struct.pack("<HHBBBB", sm.start, sm.length, sm.control, 0, sm.enable, sm.kind)
        yield CATEGORY_SYNC_MANAGER, sms
        yield CATEGORY_TXPDO, self._pdos(self.tx_pdos)
        yield CATEGORY_RXPDO, self._pdos(self.rx_pdos)

    def _pdos(self, pdos) -> bytearray:
        out = bytearray()
        for pdo in pdos:
            out += struct.pack("<HBBBBH", pdo.index, len(pdo.entries), pdo.sync_manager, 0,
                               self.string_index(pdo.name), 0)
            for e in pdo.entries:
                out += struct.pack("<HBBBBH", e.index, e.subindex, self.string_index(e.name), e.data_type, e.bits, 0)
        return out


def crc8(data: bytes) -> int:
    """CRC-8 of the ESC configuration area: polynomial 0x07, initial value 0xFF, no reflection (ETG.2010)."""
    crc = 0xFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


MAILBOX_OUT_START, MAILBOX_IN_START, MAILBOX_SIZE = 0x1000, 0x1080, 128
OUTPUTS_START = 0x1100
INPUTS_START = 0x1180


def cia402_layout(identity: SlaveIdentity) -> SiiLayout:
    """The minimal cyclic-synchronous-position process image of a CiA 402 drive: RxPDO 0x1600 (controlword
    0x6040, target position 0x607A, modes of operation 0x6060) on SM2, TxPDO 0x1A00 (statusword 0x6041,
    position actual 0x6064, modes of operation display 0x6061) on SM3, 7 bytes each; the mailbox on SM0 / SM1
    (128 bytes each) with CoE: a master reads the PDO assignment and mapping by SDO (complete access), or
    from these SII categories."""
    rx = Pdo(0x1600, 2, (PdoEntry(0x6040, 0, 16, UNSIGNED16, "Controlword"),
                         PdoEntry(0x607A, 0, 32, INTEGER32, "Target position"),
                         PdoEntry(0x6060, 0, 8, INTEGER8, "Modes of operation")), "RxPDO 1")
    tx = Pdo(0x1A00, 3, (PdoEntry(0x6041, 0, 16, UNSIGNED16, "Statusword"),
                         PdoEntry(0x6064, 0, 32, INTEGER32, "Position actual value"),
                         PdoEntry(0x6061, 0, 8, INTEGER8, "Modes of operation display")), "TxPDO 1")
    sms = (SyncManagerSetting(MAILBOX_OUT_START, MAILBOX_SIZE, SM_CONTROL_MAILBOX_OUT, 1, SM_MAILBOX_OUT),
           SyncManagerSetting(MAILBOX_IN_START, MAILBOX_SIZE, SM_CONTROL_MAILBOX_IN, 1, SM_MAILBOX_IN),
           SyncManagerSetting(OUTPUTS_START, rx.bits // 8, SM_CONTROL_OUTPUTS, 1, SM_OUTPUTS),
           SyncManagerSetting(INPUTS_START, tx.bits // 8, SM_CONTROL_INPUTS, 1, SM_INPUTS))
    return SiiLayout(identity, (rx,), (tx,), sms,
                     coe_details=COE_SDO | COE_SDO_INFO | COE_PDO_ASSIGN | COE_PDO_CONFIG | COE_COMPLETE_ACCESS)
