"""The CoE mailbox of the emulated EtherCAT slaves, frame by frame in exact bytes: the mailbox on SM0 / SM1 with
its header, counter, repeat request and error reply (ETG.1000.4 mailbox sync managers; ETG.1000.6 5.6 mailbox),
SDO upload and download expedited, normal and segmented, complete access and abort codes (ETG.1000.6 5.6.2; the
SDO protocol of CiA 301 7.2.4.3), the PDO assignment and mapping objects (ETG.1000.6 5.6.7) and the SII's mailbox
words (ETG.2010)."""
from __future__ import annotations

import struct

from hypothesis import given, settings, strategies as st

from rtctl.hil.ethercat import esc as E
from rtctl.hil.ethercat.chain import EscChain
from rtctl.hil.ethercat.frame import Command as C, build_frame, datagrams, station
from rtctl.hil.ethercat.sii import INPUTS_START, OUTPUTS_START, SlaveIdentity

IDENTITY = SlaveIdentity(0x00001337, 0x00000402, 0x00020001, 0, "Test drive")
STATION = 0x1001
MBX_OUT, MBX_IN, MBX_SIZE = 0x1000, 0x1080, 128


def run(chain, parts, now=0.0):
    frame = build_frame(parts)
    assert chain.process(frame, now)
    return datagrams(frame)


def line(identity=IDENTITY, state=E.PREOP):
    """One slave, station address 0x1001, its mailbox sync managers as the SII declares them, in ``state``."""
    chain = EscChain.cia402(1, identity)
    sms = b"".join(struct.pack("<HHBBBB", start, length, control, 0, 1, 0) for start, length, control in (
        (MBX_OUT, MBX_SIZE, 0x26), (MBX_IN, MBX_SIZE, 0x22), (OUTPUTS_START, 7, 0x64), (INPUTS_START, 7, 0x20)))
    fmmu = (struct.pack("<IHBBHBBBBH", 0, 7, 0, 7, OUTPUTS_START, 0, 2, 1, 0, 0)
            + struct.pack("<IHBBHBBBBH", 7, 7, 0, 7, INPUTS_START, 0, 1, 1, 0, 0))
    run(chain, [(C.APWR, 0, station(0, E.REG_STATION), struct.pack("<H", STATION)),
                (C.FPWR, 0, station(STATION, E.REG_SM), sms), (C.FPWR, 0, station(STATION, E.REG_FMMU), fmmu)])
    for s in (E.PREOP, E.SAFEOP, E.OP):
        if s <= state:
            run(chain, [(C.FPWR, 0, station(STATION, E.REG_AL_CONTROL), struct.pack("<H", s))])
    assert chain.slaves[0].state == state
    return chain


def post(chain, message: bytes) -> int:
    """Write ``message`` to SM0 as a master does (the whole mailbox); the working counter."""
    (w,) = run(chain, [(C.FPWR, 0, station(STATION, MBX_OUT), message.ljust(MBX_SIZE, b"\0"))])
    return w.wkc


def fetch(chain) -> bytes | None:
    """SM1's message (header and its length of data), None if the read was not counted (SM1 empty)."""
    (r,) = run(chain, [(C.FPRD, 0, station(STATION, MBX_IN), MBX_SIZE)])
    if r.wkc == 0:
        return None
    length = struct.unpack_from("<H", r.data)[0]
    return bytes(r.data[:6 + length])


class Master:
    """A master's side of the mailbox: the counter 1..7 in turn (ETG.1000.6 5.6)."""

    def __init__(self, chain):
        self.chain = chain
        self.counter = 0

    def coe(self, data: bytes) -> bytes | None:
        self.counter = self.counter % 7 + 1
        assert post(self.chain, struct.pack("<HHBB", len(data), 0, 0, 0x03 | self.counter << 4) + data) == 1
        return fetch(self.chain)

    def sdo(self, command: int, index: int, subindex: int, data: bytes = bytes(4)) -> bytes:
        reply = self.coe(struct.pack("<HBHB", 0x2000, command, index, subindex) + data)
        assert reply[4] == 0 and reply[5] & 0x0F == 0x03                                 # CoE
        service = struct.unpack_from("<H", reply, 6)[0] >> 12
        assert service == (2 if reply[8] == 0x80 else 3)      # an abort: service SDO request (5.6.2.7)
        return reply[8:]

    def upload(self, index: int, subindex: int, complete: bool = False) -> bytes | int:
        """The value (bytes) or the abort code (int), segments followed to the last."""
        r = self.sdo(0x40 | (0x10 if complete else 0), index, subindex)
        if r[0] == 0x80:
            return struct.unpack_from("<I", r, 4)[0]
        if r[0] & 0x02:
            return r[4:8 - (r[0] >> 2 & 3)]
        size = struct.unpack_from("<I", r, 4)[0]
        data, toggle = r[8:], 0
        while len(data) < size:
            seg = self.sdo(0x60 | toggle, 0, 0)
            assert seg[0] & 0xE0 == 0 and seg[0] & 0x10 == toggle
            data += seg[1:] if len(seg) > 8 else seg[1:8 - (seg[0] >> 1 & 7)]
            toggle ^= 0x10
        assert r[0] == 0x41 and len(data) == size
        return data

    def download(self, index: int, subindex: int, data: bytes, complete: bool = False) -> int:
        """0 or the abort code: expedited up to 4 bytes (not complete access), else normal in one message."""
        ca = 0x10 if complete else 0
        if len(data) <= 4 and not complete:
            r = self.sdo(0x23 | (4 - len(data)) << 2, index, subindex, data.ljust(4, b"\0"))
        else:
            r = self.sdo(0x21 | ca, index, subindex, struct.pack("<I", len(data)) + data)
        return struct.unpack_from("<I", r, 4)[0] if r[0] == 0x80 else (r[0] == 0x60 and 0)


def test_expedited_upload_of_the_vendor_id_in_exact_bytes():
    """ETG.1000.6 5.6.2.4 SDO upload expedited: request header length 10, address 0, type 3 (CoE) counter 1; CoE
    header 0x2000 (SDO request), command 0x40, 0x1018:01. Response: the slave's counter 1, CoE 0x3000, command
    0x43 (expedited, size indicated, 4 bytes), the vendor id."""
    chain = line()
    request = bytes.fromhex("0a00" "0000" "00" "13" "0020" "40" "1810" "01" "00000000")
    assert post(chain, request) == 1
    assert fetch(chain) == bytes.fromhex("0a00" "0000" "00" "13" "0030" "43" "1810" "01" "37130000")
    assert fetch(chain) is None                                    # SM1 read empty: not counted


def test_identity_and_device_type_and_pdo_objects_match_the_sii():
    m = Master(line())
    assert [m.upload(0x1018, k) for k in range(5)] == [
        b"\x04", *(struct.pack("<I", v) for v in (0x1337, 0x402, 0x00020001, 1))]
    assert m.upload(0x1000, 0) == struct.pack("<I", 0x00020192)            # CiA 402 servo drive
    assert m.upload(0x1C00, 0, complete=True) == bytes([4, 0, 1, 2, 3, 4])  # count padded to 16 bits
    assert m.upload(0x1C12, 0, complete=True) == bytes.fromhex("0100" "0016")
    assert m.upload(0x1C13, 1, complete=True) == bytes.fromhex("001a")
    assert m.upload(0x1600, 0, complete=True) == bytes.fromhex("0300" "10004060" "20007a60" "08006060")
    assert m.upload(0x1A00, 0, complete=True) == bytes.fromhex("0300" "10004160" "20006460" "08006160")


def test_normal_and_segmented_upload_of_a_long_device_name():
    """A name of 200 bytes: the initiate response carries the size and 112 bytes (a 128-byte mailbox less its
    6-byte header, the CoE header, command, index, sub-index and size), one segment the other 88."""
    name = "".join(chr(0x21 + k % 90) for k in range(200))
    m = Master(line(SlaveIdentity(1, 2, 3, 0, name)))
    assert m.upload(0x1008, 0) == name.encode()
    assert m.chain.slaves[0].sdo.transfers["uploads"] == 1
    short = Master(line())
    first = short.sdo(0x40, 0x1008, 0)
    assert first == bytes.fromhex("41" "0810" "00" "0a000000") + b"Test drive"    # normal, complete in one


def test_download_round_trip_and_segmented_download():
    m = Master(line())
    assert m.download(0x6065, 0, struct.pack("<I", 123_456)) == 0
    assert m.upload(0x6065, 0) == struct.pack("<I", 123_456)
    text = bytes(range(0x30, 0x30 + 60))
    # normal initiate with 30 of the 60 bytes, then a 26-byte segment and a last one of 4 (7 less 3 unused)
    r = m.sdo(0x21, 0x2000, 0, struct.pack("<I", 60) + text[:30])
    assert r == bytes.fromhex("60" "0020" "00" "00000000")
    seg = m.coe(bytes.fromhex("0020") + bytes([0x00]) + text[30:56])
    assert seg[6:] == bytes.fromhex("0030" "20") + bytes(7)
    seg = m.coe(bytes.fromhex("0020") + bytes([0x10 | 3 << 1 | 1]) + text[56:] + bytes(3))
    assert seg[8] == 0x30                                              # toggle 1
    assert m.upload(0x2000, 0) == text


def test_abort_codes():
    m = Master(line())
    assert m.download(0x1018, 1, struct.pack("<I", 7)) == 0x06010002        # read-only
    assert m.coe(bytes.fromhex("0020" "23" "1810" "01" "07000000"))[6:] == bytes.fromhex(
        "0020" "80" "1810" "01" "02000106")                                 # CoE service 2: abort, the code
    assert m.upload(0x5555, 0) == 0x06020000                                 # no such object
    assert m.upload(0x1018, 9) == 0x06090011                                 # no such sub-index
    assert m.download(0x6065, 0, b"\x01\x02") == 0x06070010                  # 2 bytes to an UNSIGNED32
    assert m.download(0x1600, 1, struct.pack("<I", 0x60400010)) == 0x06010003  # sub-index 0 not 0 first
    assert m.sdo(0x60, 0, 0)[0] == 0x80                                     # a segment of no transfer
    m.sdo(0x21, 0x2000, 0, struct.pack("<I", 20) + b"abc")
    seg = m.coe(bytes.fromhex("0020") + bytes([0x10]) + b"defghij")          # toggle 1 first: not alternated
    assert seg[6:] == bytes.fromhex("0020" "80" "0020" "00" "00000305")
    assert m.upload(0x6065, 0) == struct.pack("<I", 10_000)                 # nothing was written


def test_pdo_remap_by_complete_access_in_preop_only():
    """ETG.1000.6 5.6.7: mapping and assignment written in PRE-OP; complete access writes the count and the
    entries at once. RxPDO 0x1600 without the modes of operation: 6 bytes on SM2; in SAFE-OP a write of the
    assignment is refused with 0x08000022."""
    chain = line()
    m = Master(chain)
    assert m.download(0x1600, 0, bytes.fromhex("0200" "10004060" "20007a60"), complete=True) == 0
    assert m.upload(0x1600, 0, complete=True) == bytes.fromhex("0200" "10004060" "20007a60")
    assert chain.slaves[0].dictionary.mapped_bytes(2) == 6
    assert m.download(0x1600, 0, bytes.fromhex("0100" "10004160"), complete=True) == 0x06040041  # an input
    assert m.download(0x1600, 0, bytes.fromhex("0200" "10004060"), complete=True) == 0x06070010  # too short
    assert m.download(0x1600, 0, b"\x00") == 0 and m.download(0x1600, 0, b"\x03") == 0          # one by one
    safeop = Master(line(state=E.SAFEOP))
    assert safeop.download(0x1C12, 0, b"\x00") == 0x08000022


def test_the_cia402_objects_mirror_the_process_data():
    chain = line(state=E.OP)
    (d,) = run(chain, [(C.LRW, 0, 0, struct.pack("<Hib", 0x000F, -4242, 8) + bytes(7))], now=0.01)
    run(chain, [(C.LRD, 0, 7, 7)], now=0.02)
    m = Master(chain)
    assert m.upload(0x6040, 0) == struct.pack("<H", 0x000F)
    assert m.upload(0x607A, 0) == struct.pack("<i", -4242)
    assert m.upload(0x6064, 0) == struct.pack("<i", -4242)         # the loopback axis follows its target
    assert m.upload(0x6041, 0) == struct.pack("<H", 0x0237)
    assert m.download(0x6041, 0, b"\0\0") == 0x06010002


def test_mailbox_counter_repeat_request_and_error_reply():
    chain = line()
    get_vendor = bytes.fromhex("0a00" "0000" "00" "23" "0020" "40" "1810" "01" "00000000")   # counter 2
    assert post(chain, get_vendor) == 1
    reply = fetch(chain)
    assert post(chain, get_vendor) == 1 and fetch(chain) is None   # the same counter again: a repeat, dropped
    # repeat request: toggle SM1's activate bit 1; the last reply again in SM1, bit 1 of 0x080F acknowledges
    (r,) = run(chain, [(C.FPRD, 0, station(STATION, 0x080D), 3)])
    status, activate, pdi = r.data
    assert status & 0x08 == 0
    run(chain, [(C.FPWR, 0, station(STATION, 0x080E), bytes([activate ^ 0x02]))])
    (r,) = run(chain, [(C.FPRD, 0, station(STATION, 0x080D), 3)])
    assert r.data[0] & 0x08 and r.data[2] & 0x02 == (activate ^ 0x02) & 0x02
    assert fetch(chain) == reply
    # an unknown mailbox type (4) gets the error reply: type 0, service 1, 0x02 protocol not supported
    assert post(chain, bytes.fromhex("0400" "0000" "00" "34" "00000000")) == 1
    assert fetch(chain) == bytes.fromhex("0400" "0000" "00" "20" "0100" "0200")
    summary = chain.slaves[0].summary()["mailbox"]
    assert (summary["repeated"], summary["repeat_requests"], summary["errors"]) == (1, 1, 1)


def test_the_mailbox_is_off_in_init():
    chain = line(state=E.INIT)
    assert post(chain, bytes.fromhex("0a00" "0000" "00" "13" "0020" "40" "1810" "01" "00000000")) == 0
    assert fetch(chain) is None


def test_sii_declares_the_mailbox():
    """ETG.2010: words 0x18 / 0x19 the receive (SM0) mailbox offset and size, 0x1A / 0x1B the send (SM1)
    mailbox, 0x1C the protocols (CoE 0x0004)."""
    image = line().slaves[0].sii
    assert struct.unpack_from("<5H", image, 0x18 * 2) == (MBX_OUT, MBX_SIZE, MBX_IN, MBX_SIZE, 0x0004)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=6, max_size=MBX_SIZE), st.integers(0, 15), st.integers(0, 7))
def test_any_mailbox_message_is_answered_or_dropped_never_raises(body, kind, counter):
    """Any bytes after a header of any type and counter and of any length up to the mailbox: the slave answers
    with one well-formed message or none, and the mailbox takes the next request."""
    chain = line()
    length = struct.unpack_from("<H", body)[0] % (MBX_SIZE + 16)
    assert post(chain, struct.pack("<HHBB", length, 0, 0, kind | counter << 4) + body[6:]) == 1
    reply = fetch(chain)
    if reply is not None:
        assert len(reply) <= MBX_SIZE and reply[5] & 0x0F in (0x00, 0x03)
    m = Master(chain)
    m.counter = counter                                    # next counter differs from the fuzzed one
    assert m.upload(0x1018, 1) == struct.pack("<I", 0x1337)


def test_a_fault_on_request_sends_an_emergency_and_its_reset():
    """ETG.1000.6 5.6.4: an emergency is a CoE message of service 1 with the error code, the error register
    (0x1001) and 5 manufacturer bytes. 0x5530 written to 0x2001 faults the axis: after the SDO response, SM1
    holds the emergency (the slave's counter 2); in OP the statusword reads fault (0x0208) until the controlword's
    fault reset bit rises, which sends the error reset (code 0, register 0)."""
    chain = line(state=E.OP)
    m = Master(chain)
    assert m.download(0x2001, 0, struct.pack("<H", 0x5530)) == 0
    assert fetch(chain) == bytes.fromhex("0a00" "0000" "00" "23" "0010" "3055" "01" "0000000000")
    assert m.upload(0x1001, 0) == b"\x01"
    run(chain, [(C.LRW, 0, 0, struct.pack("<Hib", 0x000F, 5, 8) + bytes(7))], now=0.01)
    (d,) = run(chain, [(C.LRD, 0, 7, 7)], now=0.02)
    assert struct.unpack("<Hib", d.data)[0] == 0x0208
    run(chain, [(C.LWR, 0, 0, struct.pack("<Hib", 0x0080, 5, 8))], now=0.03)
    assert fetch(chain)[6:] == bytes.fromhex("0010" "0000" "00" "0000000000")
    assert chain.slaves[0].summary()["emergencies"] == 2


def test_sdo_information_in_exact_bytes():
    """ETG.1000.6 5.6.3: CoE service 8, then opcode, reserved, fragments left. The OD list of type 0 (the
    number of objects of each list: all 45, RxPDO mappable 7, TxPDO mappable 7, backup, settings); the object
    description of 0x1018 (UNSIGNED32, 4 sub-indices, RECORD, its name); the entry description of 0x1018:01
    (UNSIGNED32, 32 bits, readable in every state 0x0007); 0x5555 answered by the error request (opcode 7) with
    0x06020000."""
    m = Master(line())
    counts = m.coe(bytes.fromhex("0080" "01" "00" "0000" "0000"))
    assert counts[6:] == bytes.fromhex("0080" "02" "00" "0000" "0000" "2d00" "0700" "0700" "0000" "0000")
    description = m.coe(bytes.fromhex("0080" "03" "00" "0000" "1810"))
    assert description[6:] == bytes.fromhex("0080" "04" "00" "0000" "1810" "0700" "04" "09") + b"Identity"
    entry = m.coe(bytes.fromhex("0080" "05" "00" "0000" "1810" "01" "07"))
    assert entry[6:] == bytes.fromhex("0080" "06" "00" "0000" "1810" "01" "07" "0700" "2000" "0700") + b"SubIndex 001"
    assert m.coe(bytes.fromhex("0080" "03" "00" "0000" "5555"))[6:] == bytes.fromhex("0080" "07" "00" "0000" "00000206")


def test_an_od_list_longer_than_the_mailbox_comes_in_fragments():
    chain = line()
    od = chain.slaves[0].dictionary
    for k in range(79):                                    # 124 objects: 248 bytes of indices, 3 fragments
        od.objects[0x3000 + k] = od.objects[0x6065]
    m = Master(chain)
    first = m.coe(bytes.fromhex("0080" "01" "00" "0000" "0100"))
    replies = [first] + [fetch(chain) for _ in range(2)]
    assert [(r[8], struct.unpack_from("<H", r, 10)[0]) for r in replies] == [(0x82, 2), (0x82, 1), (0x02, 0)]
    words = b"".join(r[12:] for r in replies)
    assert struct.unpack_from("<H", words)[0] == 1
    assert list(struct.unpack(f"<{len(words) // 2 - 1}H", words[2:])) == sorted(od.objects)
    assert fetch(chain) is None
