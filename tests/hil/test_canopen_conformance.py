"""CiA 301 / CiA 402 conformance of the emulated drive, driven by a third-party master: python-canopen.

The emulator runs in a thread on python-can's virtual bus; the master is canopen's ``Network`` with
``RemoteNode`` / ``BaseNode402`` and its SDO client, NMT master, SYNC producer and PDO API. A sniffer bus
records every frame with its arrival time. One test per documented behaviour, the section in its docstring.
Timing bounds are for a busy 2-core machine: heartbeat periods of 50 ms, margins of 50-150 ms.
"""
import time

import numpy as np
import pytest
from canopen.sdo import SdoCommunicationError

from rtctl.hil.canopen_rig import MARGIN, Rig, map_tpdo


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


# -- CiA 301: NMT ---------------------------------------------------------------------------------------
def test_boot_up_after_reset_node_and_reset_communication(rig):
    """CiA 301 7.3.2.2.1 / 7.3.2.2.4: after Reset Node and Reset Communication the device sends the boot-up
    message (0x700 + node ID, one byte 0x00) and enters PRE-OPERATIONAL by itself; Reset Communication
    restores 0x1000-0x1FFF only, Reset Node also the application objects."""
    node = rig.node
    start = time.monotonic()
    node.sdo[0x1017].raw = 50
    node.sdo[0x6072].raw = 1234
    for command, app_restored in (("RESET COMMUNICATION", False), ("RESET", True)):
        t0 = time.monotonic()
        node.nmt.state = command
        assert rig.wait(lambda: b"\x00" in [d for _t, d in rig.sniffer.of(0x701, t0)])
        # the device sends the boot-up and then enters PRE-OPERATIONAL: the sniffer can see the frame first
        assert rig.wait(lambda: rig.drive.nmt == 127), rig.drive.nmt
        assert node.sdo[0x1017].raw == 0                   # communication object back to power-on
        assert (node.sdo[0x6072].raw == 3000) == app_restored
    assert rig.sniffer.of(0x702, start) == []              # node 2 was not addressed


def test_heartbeat_producer_period_and_state_byte(rig):
    """CiA 301 7.2.8.3.2.1: the producer sends 0x700 + node ID with the NMT state every 0x1017 ms
    (127 pre-operational, 5 operational, 4 stopped)."""
    node = rig.node
    t0 = time.monotonic()
    node.sdo[0x1017].raw = 50
    time.sleep(0.55)
    beats = rig.sniffer.of(0x701, t0)
    assert {d for _t, d in beats} == {b"\x7f"}, beats
    assert 6 <= len(beats) <= 12, len(beats)                     # 11 due; a loaded machine may delay a few
    gaps = np.diff([t for t, _d in beats])
    assert np.median(gaps) == pytest.approx(0.05, abs=0.01)
    for command, byte in (("OPERATIONAL", 5), ("STOPPED", 4)):
        t0 = time.monotonic()
        node.nmt.state = command
        assert rig.wait(lambda: len(rig.sniffer.of(0x701, t0)) >= 3)
        states = [d for _t, d in rig.sniffer.of(0x701, t0)]
        # a beat the device sent before the NMT command reached it may still be on the bus: at most the first
        stale = 0 if states[0] == bytes([byte]) else 1
        assert states[stale:] == [bytes([byte])] * (len(states) - stale), states


def test_pdos_only_in_operational(rig):
    """CiA 301 7.3.2.2.4 (table 40): PDOs are exchanged only in OPERATIONAL; entering PRE-OPERATIONAL
    or STOPPED stops the TPDOs and RPDOs are not taken."""
    node = rig.node
    node.tpdo.read()
    rig.net.sync.start(0.005)
    time.sleep(0.1)
    assert rig.sniffer.of(0x181) == []                      # pre-operational: SYNC, but no TPDO
    node.nmt.state = "OPERATIONAL"
    assert rig.wait(lambda: len(rig.sniffer.of(0x181)) >= 5)
    for state, nmt in (("PRE-OPERATIONAL", 127), ("STOPPED", 4)):
        node.nmt.state = "OPERATIONAL"
        assert rig.wait(lambda: rig.drive.nmt == 5, 5.0)
        node.nmt.state = state
        # Not a fixed sleep: on a loaded machine the emulator may take longer to act on the command, and TPDOs
        # it sent at SYNCs before the command may still be on their way to the sniffer. Once the drive has left
        # OPERATIONAL, a marker frame sent on the emulator's bus arrives after every frame it sent before.
        assert rig.wait(lambda: rig.drive.nmt == nmt, 5.0), state
        n0 = rig.marker()
        time.sleep(0.1)
        assert [c for _t, c, _d in rig.sniffer.frames[n0:]].count(0x181) == 0, state
    node.nmt.state = "PRE-OPERATIONAL"
    rig.net.send_message(0x201, bytes([0x06, 0x00]))        # RPDO1 (controlword "shutdown") in PRE-OPERATIONAL
    time.sleep(0.05)
    assert rig.drive.state == "SWITCH ON DISABLED"


def test_no_sdo_in_stopped(rig):
    """CiA 301 7.3.2.2.4 (table 40): in STOPPED the device answers no SDO (only NMT and heartbeat)."""
    rig.node.nmt.state = "STOPPED"
    time.sleep(0.02)
    with pytest.raises(SdoCommunicationError):
        rig.node.sdo[0x1000].raw
    rig.node.nmt.state = "PRE-OPERATIONAL"
    assert rig.node.sdo[0x1000].raw == 0x00020192


# -- CiA 301: SDO abort codes ----------------------------------------------------------------------------
def test_sdo_abort_object_does_not_exist(rig):
    """CiA 301 7.2.4.3.17 (table 22): 0x06020000 object does not exist in the object dictionary."""
    assert rig.abort_of(lambda: rig.node.sdo.upload(0x5FFF, 0)) == 0x06020000
    assert rig.abort_of(lambda: rig.node.sdo.download(0x5FFF, 0, b"\x01")) == 0x06020000


def test_sdo_abort_subindex_does_not_exist(rig):
    """CiA 301 table 22: 0x06090011 sub-index does not exist -- of a record, and any sub-index other than 0 of
    a VAR (the sub-index is honoured)."""
    assert rig.abort_of(lambda: rig.node.sdo.upload(0x1018, 9)) == 0x06090011
    assert rig.abort_of(lambda: rig.node.sdo.upload(0x6041, 1)) == 0x06090011
    assert rig.abort_of(lambda: rig.node.sdo.download(0x6040, 1, b"\x06\x00")) == 0x06090011
    assert rig.drive.controlword == 0


def test_sdo_abort_read_only(rig):
    """CiA 301 table 22: 0x06010002 attempt to write a read-only object."""
    assert rig.abort_of(lambda: rig.node.sdo.download(0x6041, 0, b"\x00\x00")) == 0x06010002
    assert rig.abort_of(lambda: rig.node.sdo.download(0x1018, 1, b"\x00\x00\x00\x00")) == 0x06010002


def test_sdo_abort_value_too_high_and_too_low(rig):
    """CiA 301 table 22: 0x06090031 value written too high, 0x06090032 too low (0x6072 above the power
    stage's peak, 0x605A outside 0..8, 0x6085 of 0); the value is not taken."""
    sdo = rig.node.sdo
    assert rig.abort_of(lambda: setattr(sdo[0x6072], "raw", 5001)) == 0x06090031
    assert rig.abort_of(lambda: setattr(sdo[0x605A], "raw", 9)) == 0x06090031
    assert rig.abort_of(lambda: setattr(sdo[0x605A], "raw", -1)) == 0x06090032
    assert rig.abort_of(lambda: setattr(sdo[0x6085], "raw", 0)) == 0x06090032
    assert (sdo[0x6072].raw, sdo[0x605A].raw) == (3000, 2)
    sdo[0x6072].raw = 5000
    assert sdo[0x6072].raw == 5000


def test_sdo_abort_length_mismatch(rig):
    """CiA 301 table 22: 0x06070010 data type does not match, length of service parameter does not match."""
    assert rig.abort_of(lambda: rig.node.sdo.download(0x6040, 0, b"\x06\x00\x00\x00")) == 0x06070010
    assert rig.abort_of(lambda: rig.node.sdo.download(0x607A, 0, b"\x01")) == 0x06070010


def test_mode_of_operation_range_and_display(rig):
    """CiA 402-2 6.4 (0x6060/0x6061, 0x6502): CSP 8, CSV 9, CST 10 are taken and shown in 0x6061; an
    unsupported mode is refused with 0x06090030."""
    sdo = rig.node.sdo
    assert sdo[0x6502].raw == 0x380
    for mode in (8, 9, 10):
        sdo[0x6060].raw = mode
        assert sdo[0x6061].raw == mode
    assert rig.abort_of(lambda: setattr(sdo[0x6060], "raw", 1)) == 0x06090030
    assert sdo[0x6061].raw == 10


def test_consumer_heartbeat_duplicate_node_is_incompatible(rig):
    """CiA 301 7.5.2.23 (0x1016): two entries for one node with non-zero times -> 0x06040043."""
    sdo = rig.node.sdo
    sdo[0x1016][1].raw = 0x7F << 16 | 100
    assert rig.abort_of(lambda: setattr(sdo[0x1016][2], "raw", 0x7F << 16 | 200)) == 0x06040043
    sdo[0x1016][2].raw = 0x7E << 16 | 200


def test_software_limit_max_below_min(rig):
    """CiA 402-2 0x607D with CiA 301 table 22: a max position limit below the min is 0x06090036."""
    sdo = rig.node.sdo
    sdo[0x607D][1].raw = -1000
    assert rig.abort_of(lambda: setattr(sdo[0x607D][2], "raw", -2000)) == 0x06090036


# -- CiA 301: PDO mapping and transmission types ---------------------------------------------------------
def test_bad_pdo_mapping_is_an_sdo_abort(rig):
    """CiA 301 7.5.2.36/7.5.2.38 (mapping procedure) and table 22: an entry naming an object that cannot be
    mapped (0x1017, a missing 0x5FFF, a wrong length) -> 0x06040041; more than 64 bits -> 0x06040042; an
    entry written while the PDO is valid or sub-index 0 is not 0 -> 0x08000022. The emulator keeps serving."""
    sdo = rig.node.sdo
    assert rig.abort_of(lambda: setattr(sdo[0x1A00][1], "raw", 0x60410010)) == 0x08000022   # TPDO1 valid
    sdo[0x1800][1].raw = 0x80000181
    assert rig.abort_of(lambda: setattr(sdo[0x1A00][1], "raw", 0x60410010)) == 0x08000022   # sub 0 is 1
    sdo[0x1A00][0].raw = 0
    for bad in (0x10170010, 0x5FFF0010, 0x60410020):
        assert rig.abort_of(lambda: setattr(sdo[0x1A00][1], "raw", bad)) == 0x06040041, hex(bad)
    for sub, entry in ((1, 0x60640020), (2, 0x606C0020), (3, 0x60410010)):
        sdo[0x1A00][sub].raw = entry
    assert rig.abort_of(lambda: setattr(sdo[0x1A00][0], "raw", 3)) == 0x06040042             # 80 bits
    sdo[0x1A00][0].raw = 2
    sdo[0x1800][1].raw = 0x181
    assert sdo[0x1000].raw == 0x00020192


def test_cob_id_cannot_change_while_valid_and_reserved_transmission_types(rig):
    """CiA 301 7.5.2.35 (PDO communication parameter): the CAN-ID of a valid PDO cannot change, and
    transmission types 241-251 are reserved (252/253, RTR only, are not supported here) -> 0x06090030."""
    sdo = rig.node.sdo
    assert rig.abort_of(lambda: setattr(sdo[0x1800][1], "raw", 0x191)) == 0x06090030
    for trans in (241, 251, 252):
        assert rig.abort_of(lambda: setattr(sdo[0x1800][2], "raw", trans)) == 0x06090030
    sdo[0x1800][2].raw = 254


def test_tpdo_synchronous_cyclic_every_nth_sync(rig):
    """CiA 301 7.2.2.2 / 7.5.2.35 (transmission type 1-240): the TPDO is sent at every n-th SYNC."""
    map_tpdo(rig, 3)
    rig.node.nmt.state = "OPERATIONAL"
    time.sleep(0.02)
    t0 = time.monotonic()
    syncs = rig.emu.syncs
    for _ in range(30):
        rig.net.sync.transmit()
        time.sleep(0.004)
    rig.after_syncs(syncs + 30)
    assert len(rig.sniffer.of(0x181, t0)) == 10


def test_tpdo_synchronous_acyclic_on_change(rig):
    """CiA 301 7.2.2.2 (transmission type 0): sent at a SYNC only after its data changed."""
    map_tpdo(rig, 0)
    node = rig.node
    node.nmt.state = "OPERATIONAL"
    time.sleep(0.02)
    t0 = time.monotonic()
    syncs = rig.emu.syncs
    for k in range(10):
        if k == 5:
            node.sdo[0x6040].raw = 0x06                         # shutdown: statusword changes
        rig.net.sync.transmit()
        time.sleep(0.005)
    rig.after_syncs(syncs + 10)
    words = [int.from_bytes(d, "little") for _t, d in rig.sniffer.of(0x181, t0)]
    assert words == [0x0240, 0x0231]


def test_tpdo_event_driven_inhibit_and_event_timer(rig):
    """CiA 301 7.2.2.2 / 7.5.2.35 (transmission type 254/255, inhibit time in 100 us, event timer in ms):
    without SYNC, sent on a change of the data but not within the inhibit time, and again at least every
    event-timer period when nothing changes."""
    map_tpdo(rig, 255, inhibit=1000, event_timer=100)           # 100 ms inhibit, 100 ms timer
    node = rig.node
    node.nmt.state = "OPERATIONAL"
    time.sleep(0.35)
    beats = rig.sniffer.of(0x181)
    gaps = np.diff([t for t, _d in beats])
    assert 3 <= len(beats) <= 5 and np.all(gaps > 0.095) and np.all(gaps < 0.1 + MARGIN)
    t0 = time.monotonic()
    node.sdo[0x6040].raw = 0x06
    node.sdo[0x6040].raw = 0x07                                   # two changes within the inhibit time
    assert rig.wait(lambda: any(d == b"\x33\x02" for _t, d in rig.sniffer.of(0x181, t0)), 0.5)
    changed = [t for t, d in rig.sniffer.of(0x181, t0) if d != b"\x40\x02"]
    assert len(changed) <= 2 and (len(changed) < 2 or changed[1] - changed[0] >= 0.095)


def test_rpdo_shorter_than_mapping_is_not_processed(rig):
    """CiA 301 7.2.2.3.3 / table 21: an RPDO with fewer bytes than mapped is not processed; EMCY 0x8210."""
    rig.node.nmt.state = "OPERATIONAL"
    time.sleep(0.02)
    t0 = time.monotonic()
    rig.net.send_message(0x201, b"\x06")
    rig.net.sync.transmit()
    assert rig.wait(lambda: rig.sniffer.of(0x81, t0))
    assert rig.sniffer.of(0x81, t0)[0][1] == bytes([0x10, 0x82, 0x11, 0, 0, 0, 0, 0])
    assert rig.drive.state == "SWITCH ON DISABLED"


# -- CiA 301 heartbeat consumer and CiA 402 abort connection -----------------------------------------------
def test_heartbeat_consumer_loss_faults_the_drive(rig):
    """CiA 301 7.2.8.3.2.3 (0x1016, 0x1029) and CiA 402-2 0x6007 = 1: monitoring starts at the first
    heartbeat; a master heartbeat older than the consumer time -> EMCY 0x8130, PRE-OPERATIONAL, and the drive's
    fault reaction (FAULT REACTION ACTIVE, then FAULT)."""
    rig.enable_cst()
    sdo = rig.node.sdo
    sdo[0x1016][1].raw = 0x7F << 16 | 150
    time.sleep(0.3)
    assert rig.drive.state == "OPERATION ENABLED"                 # no heartbeat yet: not monitored
    for _ in range(6):
        time.sleep(0.05)
        last = time.monotonic()        # before the send: the drive receives this heartbeat at or after `last`
        rig.net.send_message(0x77F, b"\x05")
    assert rig.wait(lambda: rig.sniffer.of(0x81, last), 0.15 + MARGIN + 0.1)
    t_emcy, data = rig.sniffer.of(0x81, last)[0]
    assert data == bytes([0x30, 0x81, 0x11, 0, 0, 0, 0, 0])
    assert 0.15 - 0.01 <= t_emcy - last <= 0.15 + MARGIN
    states = [s for _t, s in rig.drive.states]
    assert states[-2:] == ["FAULT REACTION ACTIVE", "FAULT"] or states[-1] == "FAULT REACTION ACTIVE"
    assert rig.wait(lambda: rig.drive.state == "FAULT")
    assert rig.drive.nmt == 127 and rig.drive.error_code == 0x8130


# -- CiA 402 state machine ---------------------------------------------------------------------------------
def test_quick_stop_option_2_ramps_then_switch_on_disabled(rig):
    """CiA 402-2 6.3 transitions 11 and 12, 0x605A = 2: quick stop -> QUICK STOP ACTIVE (statusword bit 5
    low) while the quick stop ramp runs, then SWITCH ON DISABLED."""
    rig.enable_cst()
    rig.node.controlword = 0x02
    assert rig.wait(lambda: rig.drive.state == "SWITCH ON DISABLED")
    states = [s for _t, s in rig.drive.states]
    assert states[-3:] == ["OPERATION ENABLED", "QUICK STOP ACTIVE", "SWITCH ON DISABLED"]
    words = [int.from_bytes(d[:2], "little") for _t, d in rig.sniffer.of(0x181)]
    assert any(w & 0x6F == 0x07 for w in words)                   # QUICK STOP ACTIVE was reported


def test_quick_stop_option_6_stays_and_returns_to_operation(rig):
    """CiA 402-2 6.3 transition 16, 0x605A = 6: the drive stays in QUICK STOP ACTIVE after the ramp and
    enable operation returns it to OPERATION ENABLED."""
    rig.node.sdo[0x605A].raw = 6
    rig.enable_cst()
    rig.node.controlword = 0x02
    time.sleep(0.3)
    assert rig.drive.state == "QUICK STOP ACTIVE"
    rig.node.controlword = 0x0F
    assert rig.wait(lambda: rig.drive.state == "OPERATION ENABLED")


def test_fault_reaction_active_before_fault_and_reset_on_rising_edge(rig):
    """CiA 402-2 6.3 transitions 13, 14, 15: a fault enters FAULT REACTION ACTIVE (EMCY with the error code),
    then FAULT; only a rising edge of controlword bit 7 resets it (a held bit does not)."""
    rig.enable_cst()                                               # RPDO1 (controlword) sent every 5 ms
    t0 = time.monotonic()
    node, sdo = rig.node, rig.node.sdo
    sdo[0x2001].raw = 0x2310
    assert rig.wait(lambda: rig.drive.state == "FAULT")
    assert [s for _t, s in rig.drive.states][-2:] == ["FAULT REACTION ACTIVE", "FAULT"]
    assert rig.sniffer.of(0x81, t0)[0][1] == bytes([0x10, 0x23, 0x03, 0, 0, 0, 0, 0])
    assert sdo[0x603F].raw == 0x2310
    node.controlword = 0x80                                        # rising edge
    assert rig.wait(lambda: rig.drive.state == "SWITCH ON DISABLED") and sdo[0x603F].raw == 0
    assert rig.wait(lambda: len(rig.sniffer.of(0x81, t0)) == 2)    # error reset: EMCY 0x0000, register 0
    assert rig.sniffer.of(0x81, t0)[1][1] == bytes(8)
    rig.drive.enter_fault(0x2310, time.monotonic())                # bit 7 held high in every RPDO: no edge
    assert rig.wait(lambda: rig.drive.state == "FAULT")
    time.sleep(0.1)
    assert rig.drive.state == "FAULT"
    node.controlword = 0x00
    time.sleep(0.03)
    node.controlword = 0x80
    assert rig.wait(lambda: rig.drive.state == "SWITCH ON DISABLED")


def test_max_torque_limits_cst(rig):
    """CiA 402-2 0x6072 / 0x6071: the torque made never exceeds max torque; statusword bit 11 (internal
    limit active) says so."""
    rig.enable_cst()
    sdo = rig.node.sdo
    sdo[0x6072].raw = 200
    sdo[0x6071].raw = 900
    assert rig.wait(lambda: rig.drive.torque_actual == 200, 0.5)
    assert sdo[0x6077].raw == 200 and sdo[0x6041].raw & 0x0800


def test_csp_target_clamped_by_software_position_limit(rig):
    """CiA 402-2 0x607D in CSP: a target beyond the max position limit is replaced by the limit; bit 11."""
    sdo = rig.node.sdo
    position = sdo[0x6064].raw
    sdo[0x607D][2].raw = position + 5000
    sdo[0x607A].raw = position + 200000
    rig.enable_cst()
    sdo[0x6060].raw = 8
    assert rig.wait(lambda: abs(sdo[0x6064].raw - (position + 5000)) < 500, 1.0)
    time.sleep(0.1)
    assert abs(sdo[0x6064].raw - (position + 5000)) < 500 and sdo[0x6041].raw & 0x0800
