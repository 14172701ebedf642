"""The process image of the emulated EtherCAT slaves follows their PDO mapping, frame by frame in exact bytes: the
CiA 402 objects a CST / CSV / CSP master maps (CiA 402-2 6.2-6.4, their data types and units as the CAN drive
model's), the mapping 0x1600-0x1603 / 0x1A00-0x1A03 and assignment 0x1C12 / 0x1C13 rewritten in PRE-OP, the
mappings the slave refuses with their abort codes (ETG.1000.6 5.6.7, 5.6.2.7), the sync manager lengths
checked against the new mapping at PRE-OP -> SAFE-OP (AL status codes 0x001D / 0x001E) and, with the CAN
emulator's drives behind the slaves, the drive's own objects read and written by SDO."""
from __future__ import annotations

import struct

import pytest

from rtctl.hil.ethercat import esc as E
from rtctl.hil.ethercat.chain import EscChain
from rtctl.hil.ethercat.dictionary import MAX_PDO_BYTES
from rtctl.hil.ethercat.frame import Command as C, station
from rtctl.hil.ethercat.sii import INPUTS_START, OUTPUTS_START
from test_ethercat_coe import IDENTITY, MBX_IN, MBX_OUT, MBX_SIZE, STATION, Master, line, run

# (index, data type, bits, direction): ETG.1000.6 / CiA 301 data type codes; RxPDO "rx", TxPDO "tx".
CIA402_PROCESS_OBJECTS = [
    (0x6040, 0x0006, 16, "rx"), (0x6060, 0x0002, 8, "rx"), (0x607A, 0x0004, 32, "rx"),
    (0x60FF, 0x0004, 32, "rx"), (0x6071, 0x0003, 16, "rx"),
    (0x6041, 0x0006, 16, "tx"), (0x6061, 0x0002, 8, "tx"), (0x6064, 0x0004, 32, "tx"),
    (0x606C, 0x0004, 32, "tx"), (0x6077, 0x0003, 16, "tx"), (0x603F, 0x0006, 16, "tx")]
RX_MAPPABLE, TX_MAPPABLE = 0x40, 0x80


def entry(index, subindex, bits):
    return struct.pack("<I", index << 16 | subindex << 8 | bits)


def remap(m: Master, mapping: int, entries) -> int:
    """A mapping written by complete access: the count (16 bits) and the entries; 0 or the abort code."""
    return m.download(mapping, 0, struct.pack("<H", len(entries)) + b"".join(entry(*e) for e in entries),
                      complete=True)


def assign(m: Master, assignment: int, pdos) -> int:
    return m.download(assignment, 0, struct.pack("<H", len(pdos)) + struct.pack(f"<{len(pdos)}H", *pdos),
                      complete=True)


def sync_managers(chain, out_length, in_length):
    sms = (struct.pack("<HHBBBB", OUTPUTS_START, out_length, 0x64, 0, 1, 0)
           + struct.pack("<HHBBBB", INPUTS_START, in_length, 0x20, 0, 1, 0))
    fmmu = (struct.pack("<IHBBHBBBBH", 0, out_length, 0, 7, OUTPUTS_START, 0, 2, 1, 0, 0)
            + struct.pack("<IHBBHBBBBH", 64, in_length, 0, 7, INPUTS_START, 0, 1, 1, 0, 0))
    run(chain, [(C.FPWR, 0, station(STATION, E.REG_SM + 2 * E.SM_SIZE), sms),
                (C.FPWR, 0, station(STATION, E.REG_FMMU), fmmu)])


def request(chain, state, now=0.0):
    (_, r) = run(chain, [(C.FPWR, 0, station(STATION, E.REG_AL_CONTROL), struct.pack("<H", state)),
                         (C.FPRD, 0, station(STATION, E.REG_AL_STATUS), 6)], now)
    status, _, code = struct.unpack("<HHH", r.data)
    return status, code


def test_the_cia402_process_objects_exist_and_are_mappable():
    """ETG.1000.6 5.6.3.5 entry description: data type, bit length, access with bit 6 RxPDO / bit 7 TxPDO
    mappable, for each object a CST / CSV / CSP master maps; an upload returns as many bytes."""
    m = Master(line())
    for index, data_type, bits, direction in CIA402_PROCESS_OBJECTS:
        reply = m.coe(struct.pack("<HBBHHBB", 0x8000, 0x05, 0, 0, index, 0, 0))
        got_index, _, _, got_type, got_bits, access = struct.unpack_from("<HBBHHH", reply, 12)
        assert (got_index, got_type, got_bits) == (index, data_type, bits)
        assert access & 0xC0 == (RX_MAPPABLE if direction == "rx" else TX_MAPPABLE), hex(index)
        assert len(m.upload(index, 0)) == bits // 8


def test_a_cst_mapping_written_in_preop_is_the_process_image():
    """The CST layout (RxPDO 0x1600: controlword, target torque, modes of operation; TxPDO 0x1A00 then 0x1A01:
    statusword, position, velocity, torque actual, modes display, error code): SM2 / SM3 at the old lengths
    are refused at PRE-OP -> SAFE-OP with 0x001D, then 0x001E; at 5 and 15 bytes the line goes to OP, the
    outputs land in the objects at their offsets and the inputs carry the loopback axis's echo."""
    chain = line()
    m = Master(chain)
    od = chain.slaves[0].dictionary
    assert od.mapped_bytes(2) == od.mapped_bytes(3) == 7                    # cached before the remap
    assert assign(m, 0x1C13, []) == 0
    assert remap(m, 0x1600, [(0x6040, 0, 16), (0x6071, 0, 16), (0x6060, 0, 8)]) == 0
    assert remap(m, 0x1A00, [(0x6041, 0, 16), (0x6064, 0, 32), (0x606C, 0, 32)]) == 0
    assert remap(m, 0x1A01, [(0x6077, 0, 16), (0x6061, 0, 8), (0x603F, 0, 16)]) == 0
    assert assign(m, 0x1C13, [0x1A00, 0x1A01]) == 0
    assert m.upload(0x1C13, 0, complete=True) == bytes.fromhex("0200" "001a" "011a")
    assert m.upload(0x1A01, 0, complete=True) == bytes.fromhex("0300" "10007760" "08006160" "10003f60")
    assert (od.mapped_bytes(2), od.mapped_bytes(3)) == (5, 15)
    sync_managers(chain, 7, 7)
    assert request(chain, E.SAFEOP) == (E.PREOP | E.ERROR_INDICATION, E.AL_INVALID_OUTPUT_CONFIGURATION)
    sync_managers(chain, 5, 7)
    assert request(chain, E.SAFEOP | E.ERROR_INDICATION) == (E.PREOP | E.ERROR_INDICATION,
                                                             E.AL_INVALID_INPUT_CONFIGURATION)
    sync_managers(chain, 5, 15)
    assert request(chain, E.SAFEOP | E.ERROR_INDICATION) == (E.SAFEOP, 0)
    assert request(chain, E.OP) == (E.OP, 0)
    run(chain, [(C.LWR, 0, 0, struct.pack("<Hhb", 0x000F, -321, 10))], now=0.01)
    (d,) = run(chain, [(C.LRD, 0, 64, 15)], now=0.02)
    assert d.wkc == 1
    assert struct.unpack("<Hiihbh", d.data) == (0x0237, 0, 0, -321, 10, 0)
    assert [od.value(i) for i in (0x6040, 0x6071, 0x6060)] == [0x000F, -321, 10]
    assert od.layout_of(3) == [(0x6041, 0, 16, 0), (0x6064, 0, 32, 2), (0x606C, 0, 32, 6),
                               (0x6077, 0, 16, 10), (0x6061, 0, 8, 12), (0x603F, 0, 16, 13)]


def test_mappings_the_slave_refuses_with_their_abort_codes():
    """ETG.1000.6 5.6.7 / 5.6.2.7: an entry naming an object that cannot be mapped -- an input in an RxPDO, an
    object not mappable, one that does not exist, the wrong bit length -- 0x06040041 when written; PDOs that
    together exceed the 42 bytes a buffered SM2 has (three buffers between 0x1100 and SM3 at 0x1180) 0x06040042,
    whether the assignment or an assigned mapping grows them; a TxPDO in the outputs' assignment 0x06090030.
    Nothing refused is taken: the SII's 7-byte image stays."""
    chain = line()
    m = Master(chain)
    assert MAX_PDO_BYTES == (INPUTS_START - OUTPUTS_START) // 3 == 42
    assert m.download(0x1600, 0, b"\x00") == 0
    for bad in ((0x6041, 0, 16), (0x6076, 0, 32), (0x1018, 1, 32), (0x5555, 0, 16), (0x6040, 0, 32),
                (0x6040, 1, 16)):
        assert m.download(0x1600, 1, entry(*bad)) == 0x06040041, bad
    assert m.download(0x1600, 0, b"\x03") == 0                             # the SII's entries, untouched
    wide = [(0x607A, 0, 32), (0x60FF, 0, 32)] * 4                           # 32 bytes
    assert remap(m, 0x1601, wide) == 0
    assert remap(m, 0x1602, [(0x607A, 0, 32), (0x6040, 0, 16)]) == 0        # 6 bytes
    assert assign(m, 0x1C12, [0x1600, 0x1601]) == 0                         # 7 + 32 = 39
    assert assign(m, 0x1C12, [0x1600, 0x1601, 0x1602]) == 0x06040042        # 45
    assert remap(m, 0x1600, [(0x6040, 0, 16), (0x607A, 0, 32), (0x60FF, 0, 32), (0x6071, 0, 16),
                             (0x6060, 0, 8)]) == 0x06040042                  # 13 + 32 = 45
    assert assign(m, 0x1C12, [0x1600, 0x1A00]) == 0x06090030
    assert m.upload(0x1C12, 0, complete=True) == bytes.fromhex("0200" "0016" "0116")
    assert chain.slaves[0].dictionary.mapped_bytes(2) == 39
    assert assign(m, 0x1C12, [0x1600]) == 0
    assert chain.slaves[0].dictionary.mapped_bytes(2) == 7


def test_in_safeop_and_op_the_mapping_objects_are_not_writable():
    """ETG.1000.6 5.6.7: PDO mapping written in PRE-OP only (0x08000022 in SAFE-OP and OP)."""
    for state in (E.SAFEOP, E.OP):
        m = Master(line(state=state))
        assert remap(m, 0x1A01, [(0x6077, 0, 16)]) == 0x08000022
        assert m.download(0x1601, 0, b"\x00") == 0x08000022


@pytest.fixture
def drive_line():
    """One slave in PRE-OP with the CAN emulator's CiA 402 drive of can_arm2's shoulder behind it (gear ratio
    10)."""
    from rtctl.hil.ethercat.drive_axis import drive_axes
    chain = EscChain.cia402(1, IDENTITY, applications=drive_axes("can_arm2")[:1])
    sms = b"".join(struct.pack("<HHBBBB", s, MBX_SIZE, c, 0, 1, 0) for s, c in ((MBX_OUT, 0x26), (MBX_IN, 0x22)))
    run(chain, [(C.APWR, 0, station(0, E.REG_STATION), struct.pack("<H", STATION)),
                (C.FPWR, 0, station(STATION, E.REG_SM), sms)])
    assert request(chain, E.PREOP) == (E.PREOP, 0)
    return chain


def test_the_drives_objects_are_read_and_written_in_the_drive(drive_line):
    """CiA 402-2 by SDO over CoE, in the CAN drive model itself (one object dictionary for both buses):
    supported drive modes 0x6502 (CSP, CSV, CST: bits 7-9), rated torque 0x6076 (mN m), max torque 0x6072
    (per mille), encoder resolution 0x608F, gear ratio 0x6091 (10 motor turns per joint turn), quick stop option
    code 0x605A and deceleration 0x6085; a write lands in the drive, one out of the drive's range is refused
    with the drive's code (0x06090031 above 0x6072's 5000, 0x06090032 a deceleration of 0, 0x06090030 a mode
    it does not support), the position actual value is the drive's live one."""
    drive = drive_line.slaves[0].application.drive
    m = Master(drive_line)

    def u32(index, sub=0):
        return struct.unpack("<I", m.upload(index, sub))[0]

    assert u32(0x6502) == 1 << 7 | 1 << 8 | 1 << 9
    assert (u32(0x6076), struct.unpack("<H", m.upload(0x6072, 0))[0]) == (1000, 3000)
    assert (u32(0x608F, 1), u32(0x608F, 2), u32(0x6091, 1), u32(0x6091, 2)) == (1 << 17, 1, 10, 1)
    assert (struct.unpack("<h", m.upload(0x605A, 0))[0], u32(0x6085)) == (2, 50 * (1 << 17))
    assert m.download(0x6072, 0, struct.pack("<H", 2000)) == 0
    assert drive.values[(0x6072, 0)] == 2000
    assert m.download(0x6072, 0, struct.pack("<H", 6000)) == 0x06090031
    assert m.download(0x6085, 0, struct.pack("<I", 0)) == 0x06090032
    assert m.download(0x6060, 0, struct.pack("<b", 3)) == 0x06090030
    assert m.download(0x6060, 0, struct.pack("<b", 10)) == 0
    assert drive.values[(0x6060, 0)] == 10 and drive_line.slaves[0].dictionary.value(0x6060) == 10
    assert drive.values[(0x6072, 0)] == 2000
    drive.position = 123_456
    assert struct.unpack("<i", m.upload(0x6064, 0)) == (123_456,)
    assert m.download(0x6064, 0, bytes(4)) == 0x06010002


def test_the_timestamp_object_carries_the_time_of_the_inputs_sample():
    """ETG.1020 timestamp object 0x10F8 (UNSIGNED64, ns, TxPDO mappable): mapped alone, SM3 carries the system
    time of the slave's last input sample -- its clock (the chain's time) plus the system time offset 0x0920
    (ETG.1000.4 distributed clocks) -- which a frame reads before its own sample."""
    chain = line()
    m = Master(chain)
    reply = m.coe(struct.pack("<HBBHHBB", 0x8000, 0x05, 0, 0, 0x10F8, 0, 0))
    assert struct.unpack_from("<HHH", reply, 16) == (0x001B, 64, 0x07 | TX_MAPPABLE)
    assert remap(m, 0x1A00, [(0x10F8, 0, 64)]) == 0
    sync_managers(chain, 7, 8)
    assert request(chain, E.SAFEOP, now=1.25) == (E.SAFEOP, 0)
    (d,) = run(chain, [(C.LRD, 0, 64, 8)], now=2.0)
    assert struct.unpack("<Q", d.data) == (1_250_000_000,)
    run(chain, [(C.FPWR, 0, station(STATION, 0x0920), struct.pack("<Q", 7))], now=2.5)
    (d,) = run(chain, [(C.LRD, 0, 64, 8)], now=3.0)
    assert struct.unpack("<Q", d.data) == (2_500_000_007,)
