"""The emulated EtherCAT slave line, frame by frame, in exact bytes: addressing and working counters of each
command (ETG.1000.4, the DL protocol's command types, auto-increment / configured / broadcast / logical
addressing and the working counter; ETG.1000.3, the DL services), the SII EEPROM interface (ETG.1000.4 SII
access, ETG.2010 the image) and the AL state machine with its status codes (ETG.1000.6)."""
from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given, settings, strategies as st

from rtctl.hil.ethercat import esc as E
from rtctl.hil.ethercat.chain import EscChain
from rtctl.hil.ethercat.frame import Command as C, build_frame, datagrams, station
from rtctl.hil.ethercat.emulator import open_socket
from rtctl.hil.ethercat.sii import OUTPUTS_START, INPUTS_START, SlaveIdentity, crc8
from other_user import as_other_user

IDENTITY = SlaveIdentity(0x00001337, 0x00000402, 0x00020001, 0, "Test drive")


def line(n=3):
    return EscChain.cia402(n, IDENTITY)


def run(chain, parts, now=0.0):
    frame = build_frame(parts)
    assert chain.process(frame, now)
    return frame, datagrams(frame)


def test_brd_counts_every_slave_and_ors_the_data():
    frame, (d,) = run(line(3), [(C.BRD, 0x2A, station(0, E.REG_TYPE), 2)])
    # header: length 14, type 1; datagram: BRD, index 0x2A, ADP 0 + 3 slaves, ADO 0, length 2; data: type
    # 0x90 revision 1 OR-ed; WKC 3.
    assert bytes(frame) == bytes.fromhex("0e10" "07" "2a" "0300" "0000" "0200" "0000" "9001" "0300")
    assert d.wkc == 3


def test_auto_increment_addresses_the_slave_seeing_adp_zero():
    chain = line(3)
    frame, (w, r) = run(chain, [(C.APWR, 1, station(-1 & 0xFFFF, E.REG_STATION), b"\x02\x10"),
                                (C.APRD, 2, station(-1 & 0xFFFF, E.REG_STATION), 2)])
    assert (w.wkc, r.wkc, bytes(r.data)) == (1, 1, b"\x02\x10")
    assert (w.adp, r.adp) == (2, 2)                        # 0xFFFF + 3 slaves, each +1
    assert [s.summary()["station"] for s in chain.slaves] == [0, 0x1002, 0]
    assert bytes(frame[2:12]) == bytes.fromhex("02" "01" "0200" "1000" "0280" "0000")


def test_configured_address_and_read_write():
    chain = line(2)
    run(chain, [(C.APWR, 0, station(0, E.REG_STATION), b"\x01\x10"),
                (C.APWR, 0, station(0xFFFF, E.REG_STATION), b"\x02\x10")])
    _, (rd, none, rw) = run(chain, [(C.FPRD, 0, station(0x1002, E.REG_STATION), 2),
                                    (C.FPRD, 0, station(0x1003, E.REG_STATION), 2),
                                    (C.FPRW, 0, station(0x1001, 0x1000), b"\xaa\xbb")])
    assert (bytes(rd.data), rd.wkc) == (b"\x02\x10", 1)
    assert (bytes(none.data), none.wkc) == (b"\0\0", 0)    # no slave has station 0x1003
    assert (bytes(rw.data), rw.wkc) == (b"\0\0", 3)        # read the old value (+1), wrote (+2)
    assert bytes(chain.slaves[0].memory[0x1000:0x1002]) == b"\xaa\xbb"
    assert bytes(chain.slaves[1].memory[0x1000:0x1002]) == b"\0\0"


def test_armw_reads_the_addressed_slave_and_writes_the_others():
    chain = line(3)
    for k, s in enumerate(chain.slaves):
        s.memory[0x1800:0x1804] = struct.pack("<I", 100 + k)
    _, (d,) = run(chain, [(C.ARMW, 0, station(0, 0x1800), 4)])
    assert d.wkc == 3 and struct.unpack("<I", d.data)[0] == 100
    assert [struct.unpack_from("<I", s.memory, 0x1800)[0] for s in chain.slaves] == [100, 100, 100]


def test_read_only_registers_keep_their_value_but_count():
    chain = line(1)
    _, (d,) = run(chain, [(C.BWR, 0, station(0, E.REG_AL_STATUS), b"\x08\x00")])
    assert d.wkc == 1 and chain.slaves[0].memory[E.REG_AL_STATUS] == E.INIT


def sii_read(chain, station_address, word):
    control = struct.pack("<HI", E.EEP_READ, word)
    _, (w, r) = run(chain, [(C.FPWR, 0, station(station_address, E.REG_EEP_CONTROL), control),
                            (C.FPRD, 0, station(station_address, E.REG_EEP_DATA), 8)])
    assert w.wkc == 1 and r.wkc == 1
    return bytes(r.data)


def test_sii_identity_through_the_eeprom_interface():
    chain = line(2)
    run(chain, [(C.APWR, 0, station(0xFFFF, E.REG_STATION), b"\x02\x10")])
    assert sii_read(chain, 0x1002, 0x0008) == struct.pack("<II", 0x1337, 0x402)
    assert sii_read(chain, 0x1002, 0x000C) == struct.pack("<II", 0x00020001, 2)    # revision, serial 2
    image = chain.slaves[1].sii
    assert image[14] == crc8(bytes(image[:14]))
    assert struct.unpack_from("<H", image, 0x40 * 2)[0] == 10                       # strings first
    assert image[0x40 * 2 + 5:0x40 * 2 + 6 + 10] == b"\x0aTest drive"     # count, length, text
    _, (st_,) = run(chain, [(C.FPRD, 0, station(0x1002, E.REG_EEP_CONTROL), 2)])
    assert struct.unpack("<H", st_.data)[0] == E.EEP_READ_8_BYTES                   # not busy, no error
    control = struct.pack("<HI", E.EEP_READ, 0x10000)                                # beyond the EEPROM
    _, (_, st_) = run(chain, [(C.FPWR, 0, station(0x1002, E.REG_EEP_CONTROL), control),
                              (C.FPRD, 0, station(0x1002, E.REG_EEP_CONTROL), 2)])
    assert struct.unpack("<H", st_.data)[0] & E.EEP_ACK_ERROR


def al(chain, control, now=0.0):
    _, (_, r) = run(chain, [(C.BWR, 0, station(0, E.REG_AL_CONTROL), struct.pack("<H", control)),
                            (C.BRD, 0, station(0, E.REG_AL_STATUS), 6)], now)
    status, _, code = struct.unpack("<HHH", r.data)
    return status, code


MAILBOX = ((0x1000, 128, 0x26), (0x1080, 128, 0x22))      # SM0, SM1 as the SII declares them


def configure_mailbox(chain, sms=MAILBOX, activate=(1, 1)):
    """SM0 / SM1 (start, length, control) written as a master does before PRE-OP."""
    raw = b"".join(struct.pack("<HHBBBB", start, length, control, 0, on, 0)
                   for (start, length, control), on in zip(sms, activate))
    run(chain, [(C.BWR, 0, station(0, E.REG_SM), raw)])


def configure_process_data(chain):
    """What a master writes for the minimal CiA 402 image: the mailbox, SM2 / SM3 and an output and an input
    FMMU at logical 0 (7 bytes out) and 7 (7 bytes in) for the one slave."""
    configure_mailbox(chain)
    sm = (struct.pack("<HHBBBB", OUTPUTS_START, 7, 0x64, 0, 1, 0)
          + struct.pack("<HHBBBB", INPUTS_START, 7, 0x20, 0, 1, 0))
    fmmu = (struct.pack("<IHBBHBBBBH", 0, 7, 0, 7, OUTPUTS_START, 0, 2, 1, 0, 0)
            + struct.pack("<IHBBHBBBBH", 7, 7, 0, 7, INPUTS_START, 0, 1, 1, 0, 0))
    run(chain, [(C.BWR, 0, station(0, E.REG_SM + 2 * E.SM_SIZE), sm), (C.BWR, 0, station(0, E.REG_FMMU), fmmu)])


def test_al_state_machine_refusals_and_acknowledge():
    chain = line(1)
    assert al(chain, E.OP) == (E.INIT | E.ERROR_INDICATION, E.AL_INVALID_STATE_CHANGE)
    assert al(chain, E.PREOP) == (E.INIT | E.ERROR_INDICATION, E.AL_INVALID_STATE_CHANGE)   # not acknowledged
    configure_mailbox(chain)
    assert al(chain, E.PREOP | E.ERROR_INDICATION) == (E.PREOP, 0)
    assert al(chain, 0x05 | E.ERROR_INDICATION) == (E.PREOP | E.ERROR_INDICATION, E.AL_UNKNOWN_STATE)
    assert al(chain, E.BOOT | E.ERROR_INDICATION) == (E.PREOP | E.ERROR_INDICATION, E.AL_BOOTSTRAP_NOT_SUPPORTED)
    assert al(chain, E.SAFEOP | E.ERROR_INDICATION) == (E.PREOP | E.ERROR_INDICATION,
                                                        E.AL_INVALID_OUTPUT_CONFIGURATION)   # SM2 not set
    configure_process_data(chain)
    assert al(chain, E.SAFEOP | E.ERROR_INDICATION) == (E.SAFEOP, 0)
    assert al(chain, E.OP) == (E.OP, 0)
    assert al(chain, E.INIT) == (E.INIT, 0)                                                  # down: always


@pytest.mark.parametrize("sms, activate", [
    (MAILBOX, (1, 0)),                                             # SM1 not enabled
    (((0x1000, 128, 0x26), (0x1100, 128, 0x22)), (1, 1)),          # SM1 elsewhere
    (((0x1000, 64, 0x26), (0x1080, 128, 0x22)), (1, 1)),           # SM0 shorter
    (((0x1000, 128, 0x22), (0x1080, 128, 0x26)), (1, 1)),          # directions swapped
    (((0x1000, 128, 0x24), (0x1080, 128, 0x22)), (1, 1)),          # SM0 buffered, not mailbox mode
])
def test_preop_refused_with_an_invalid_mailbox_configuration(sms, activate):
    """ETG.1000.6 AL status code 0x0016 (invalid mailbox configuration): INIT -> PRE-OP checks SM0 / SM1 against
    the SII (enabled, start, length, the control byte's mode and direction); the slave stays in INIT with the
    error indication and takes PRE-OP once the master writes them right and acknowledges. The interrupt
    enables (bits 4-5) are the master's: SM0 at 0x06 instead of 0x26 is taken."""
    chain = line(2)
    configure_mailbox(chain, sms, activate)
    assert al(chain, E.PREOP) == (E.INIT | E.ERROR_INDICATION, E.AL_INVALID_MAILBOX_CONFIGURATION)
    assert al(chain, E.PREOP) == (E.INIT | E.ERROR_INDICATION, E.AL_INVALID_MAILBOX_CONFIGURATION)
    assert all(s.state == E.INIT and s.refusals == 1 for s in chain.slaves)
    configure_mailbox(chain, ((0x1000, 128, 0x06), (0x1080, 128, 0x22)))
    assert al(chain, E.PREOP | E.ERROR_INDICATION) == (E.PREOP, 0)
    assert all(s.mailbox.active for s in chain.slaves)


def test_lrw_through_the_fmmus_and_the_sm_watchdog():
    chain = line(1)
    configure_process_data(chain)
    for state in (E.PREOP, E.SAFEOP, E.OP):
        assert al(chain, state, now=0.0)[0] == state
    out = struct.pack("<Hib", 0x000F, -123456, 8)
    _, (d,) = run(chain, [(C.LRW, 0, 0, out + bytes(7))], now=0.01)
    assert d.wkc == 3                                      # read (+1) and write (+2)
    assert bytes(chain.slaves[0].memory[OUTPUTS_START:OUTPUTS_START + 7]) == out
    _, (d,) = run(chain, [(C.LRD, 0, 7, 7)], now=0.02)
    assert d.wkc == 1 and struct.unpack("<Hib", d.data) == (0x0237, -123456, 8)   # the axis answered
    assert chain.slaves[0].application.received == 1        # handed over once: the LRD wrote no outputs
    _, (d,) = run(chain, [(C.LWR, 0, 100, 4)], now=0.03)
    assert d.wkc == 0                                      # no FMMU there
    # 100 ms SM watchdog (divider 2498, time 1000) from the last output write (the LRW at 0.01; the LRD and
    # the LWR that reached no FMMU do not trigger it): alive at 0.109, expired at 0.111.
    chain.tick(0.109)
    assert chain.slaves[0].state == E.OP
    chain.tick(0.111)
    assert chain.slaves[0].summary()["state"] == "SAFE-OP" and chain.slaves[0].status_code == E.AL_SM_WATCHDOG
    assert struct.unpack_from("<H", chain.slaves[0].memory, E.REG_WD_SM_STATUS)[0] == 0


def test_bitwise_fmmu():
    chain = line(1)
    s = chain.slaves[0]
    s.memory[0x1100] = 0b1010_0000
    # logical byte 0 bits 2..4 <- physical 0x1100 bits 5..7, readable and writable
    s.memory[E.REG_FMMU:E.REG_FMMU + 16] = struct.pack("<IHBBHBBBBH", 0, 1, 2, 4, 0x1100, 5, 3, 1, 0, 0)
    _, (d,) = run(chain, [(C.LRW, 0, 0, b"\xff")])
    assert d.wkc == 3 and d.data[0] == 0b1111_0111         # bits 2..4 <- 1,0,1; the rest untouched
    assert s.memory[0x1100] == 0b1110_0000                 # bits 5..7 <- 1,1,1 from the frame


datagram_parts = st.tuples(st.integers(0, 15), st.integers(0, 255), st.integers(0, 0xFFFFFFFF),
                           st.binary(max_size=64))


@settings(max_examples=300, deadline=None)
@given(st.lists(datagram_parts, min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)),
                                                                   max_size=4), st.binary(max_size=8))
def test_any_frame_is_processed_or_rejected_never_raises(parts, flips, tail):
    """Well-formed frames of any command, address and data, then bytes overwritten and appended: the line
    processes the frame or leaves it untouched; its length never changes."""
    chain = line(2)
    frame = build_frame(parts) + tail
    for at, value in flips:
        if at < len(frame):
            frame[at] = value
    before = bytes(frame)
    if not chain.process(frame, 0.0):
        assert bytes(frame) == before
    assert len(frame) == len(before)


@pytest.mark.parametrize("argv, named", [
    (["--interface", "no-such-interface0"], "interface 'no-such-interface0'"),
    (["--interface", "x", "--vendor-id", "0xZZ"], "--vendor-id"),
    (["--interface", "x", "--drop", "1.5"], "--drop"),
    (["--interface", "x", "--slaves", "2", "--refuse-op", "2", "0x1A"], "slave position 2"),
    (["--interface", "x", "--refuse-op", "0", "0x10000"], "AL status code 0x10000"),
    (["--interface", "x", "--slaves", "2", "--drive-fault", "2", "0x2310", "0.5"], "--drive-fault: slave 2"),
    (["--interface", "x", "--drive-fault", "0", "0x2310", "nan"], "nan s"),
    (["--interface", "x", "--drive-fault", "0", "over", "0.5"], "--drive-fault: '0 over 0.5'"),
    (["--interface", "x", "--slaves", "2", "--late-sync0", "2", "1"], "--late-sync0: slave 2 (0..1)"),
    (["--interface", "x", "--late-sync0", "0", "0"], "count 0"),
    (["--interface", "x", "--name", "Ä"], "--name")])
def test_emulator_command_line_mistakes_are_one_line(argv, named, capsys):
    from rtctl.hil.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["ethercat-slaves", *argv])
    err = capsys.readouterr().err
    assert exc.value.code in (1, 2) and err.count("\n") == 1 and named in err and "Traceback" not in err, err


def _raw_socket_errno() -> int:
    try:
        open_socket("lo").close()
        return 0
    except OSError as exc:
        return exc.errno


def test_another_local_user_cannot_put_frames_on_the_line():
    """The line answers on a raw socket only root (CAP_NET_RAW) opens: another user can neither run it nor
    send it frames (the tests' line is in a namespace of its own besides)."""
    assert as_other_user(_raw_socket_errno) == errno.EPERM
