"""The emulated CiA 402 drive runs on its own clock: python-canopen as the only master, rtctl's loop not running.

A real drive completes its quick stop ramp and its fault reaction in its own control loop whatever the master
sends, SYNC or nothing; and its PDOs follow their transmission types without a cyclic master. Each test drives
the emulator (a thread on python-can's virtual bus, :mod:`rtctl.hil.canopen_rig`) with canopen's SDO client, NMT master
and raw PDO frames, and sends a SYNC only where the behaviour under test needs one. Frames the master sends
are served in order, so the answer to an SDO request comes after everything the drive did for the frames before
it: no sleeps stand in for "the drive has seen it".
"""
import math
import time

import pytest

from rtctl.hil.canopen_rig import MARGIN, Rig
from rtctl.hil.cia402_drive import SETTLE_TIME

OE, QSA, SOD = "OPERATION ENABLED", "QUICK STOP ACTIVE", "SWITCH ON DISABLED"
FRA, FAULT = "FAULT REACTION ACTIVE", "FAULT"
RPDO1, TPDO1, EMCY = 0x201, 0x181, 0x081
CSV, CST = 9, 10


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def enable(rig, mode=CST):
    """Modes of operation, then shutdown, switch on, enable operation, all by SDO (transitions 2, 3, 4)."""
    sdo = rig.node.sdo
    sdo[0x6060].raw = mode
    for controlword in (0x06, 0x07, 0x0F):
        sdo[0x6040].raw = controlword
    assert rig.drive.state == OE


def words(rig, start=0, end=None):
    """The statuswords TPDO1 carried in sniffed frames ``start:end``."""
    return [int.from_bytes(d[:2], "little") for _t, c, d in list(rig.sniffer.frames)[start:end] if c == TPDO1]


def served(rig):
    """Index of the next sniffed frame once the drive has served every frame sent so far (an SDO round trip)."""
    rig.node.sdo[0x1000].raw
    return len(rig.sniffer.frames)


def state_times(rig):
    """The drive's own log: (monotonic time, state) per state it entered."""
    return list(rig.drive.states)


# -- CiA 402 state machine on the drive's clock ------------------------------------------------------------
def test_quick_stop_reaches_switch_on_disabled_without_sync(rig):
    """CiA 402-2 6.3.1 transitions 11 and 12 with quick stop option code 0x605A = 2 (slow down on the quick stop
    ramp 0x6085, then SWITCH ON DISABLED): quick stop (controlword 0xxx x01x) from OPERATION ENABLED enters
    QUICK STOP ACTIVE (statusword xxxx xxxx x00x 0111), and once the motor stands the drive goes on by itself to
    SWITCH ON DISABLED (x1xx 0000). No SYNC is ever on the bus."""
    sdo = rig.node.sdo
    assert sdo[0x605A].raw == 2
    rig.node.nmt.state = "OPERATIONAL"
    enable(rig)
    sdo[0x6040].raw = 0x02
    assert sdo[0x6041].raw & 0x6F == 0x07                                   # QUICK STOP ACTIVE
    assert rig.wait(lambda: rig.drive.state == SOD, 1.5), state_times(rig)[-3:]
    assert [s for _t, s in state_times(rig)][-3:] == [OE, QSA, SOD]
    assert sdo[0x6041].raw & 0x4F == 0x40                                   # SWITCH ON DISABLED
    assert rig.emu.syncs == 0


def settled_syncs(rig, quiet: float = 0.05, timeout: float = 2.0) -> int:
    """The emulator's SYNC count once it has not changed for ``quiet`` s (at most ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    count, since = rig.emu.syncs, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.005)
        if rig.emu.syncs != count:
            count, since = rig.emu.syncs, time.monotonic()
    return count


def test_quick_stop_ramp_keeps_its_deceleration_after_the_master_falls_silent(rig):
    """CiA 402-2 6.3.1 transition 11 and 0x605A = 1 (slow down on the profile deceleration 0x6084): the drive
    spins in cyclic synchronous velocity while python-canopen's SYNC producer runs; the producer stops, then a
    quick stop by SDO. The drive ramps the motor down at 0x6084 on its own clock: QUICK STOP ACTIVE lasts at
    least v0 / 0x6084 (no faster stop than the ramp) and at most that plus the settle time and the margin."""
    sdo = rig.node.sdo
    speed = int(10.0 * rig.drive.increments / (2 * math.pi))      # 10 rad/s at the motor
    sdo[0x605A].raw = 1
    sdo[0x6084].raw = 4 * speed                                              # a 0.25 s ramp from that speed
    sdo[0x60FF].raw = speed
    rig.node.nmt.state = "OPERATIONAL"
    enable(rig, CSV)
    rig.net.sync.start(0.005)
    assert rig.wait(lambda: abs(rig.drive.velocity - speed) < 0.1 * speed, 3.0), rig.drive.velocity
    rig.net.sync.stop()
    syncs = settled_syncs(rig)        # a SYNC sent before the stop may still be on its way through the bus
    v0 = sdo[0x606C].raw
    sdo[0x6040].raw = 0x02
    assert rig.wait(lambda: rig.drive.state == SOD, 2.0), state_times(rig)[-3:]
    (t_qsa, qsa), (t_sod, sod) = state_times(rig)[-2:]
    assert (qsa, sod) == (QSA, SOD)
    ramp = abs(v0) / sdo[0x6084].raw
    first_gap = rig.emu.clock.max_gap          # the first step after a silence integrates up to max_gap at once
    assert ramp - first_gap - 0.005 <= t_sod - t_qsa <= ramp + SETTLE_TIME + MARGIN, (t_sod - t_qsa, ramp)
    assert rig.emu.syncs == syncs


def test_fault_reaction_ends_in_fault_and_reset_sends_emcy_0000_without_sync(rig):
    """CiA 402-2 6.3.1 transitions 13, 14, 15 with fault reaction option code 0x605E = 2 (quick stop ramp): a fault
    enters FAULT REACTION ACTIVE (statusword xxxx xxxx x0xx 1111) with an EMCY carrying the error code, the drive
    then enters FAULT (x0xx 1000) by itself; the rising edge of controlword bit 7 resets it to SWITCH ON
    DISABLED, and CiA 301 7.2.7 (EMCY, error code 0x0000 "error reset or no error") says the error is gone with
    error register 0x1001 = 0. No SYNC is ever on the bus."""
    sdo = rig.node.sdo
    assert sdo[0x605E].raw == 2
    rig.node.nmt.state = "OPERATIONAL"
    enable(rig)
    n0 = served(rig)
    sdo[0x2001].raw = 0x2310                                                 # inject: continuous over-current
    assert rig.wait(lambda: rig.drive.state == FAULT, 1.5), state_times(rig)[-3:]
    assert [s for _t, s in state_times(rig)][-3:] == [OE, FRA, FAULT]
    assert sdo[0x6041].raw & 0x4F == 0x08 and sdo[0x603F].raw == 0x2310
    n1 = served(rig)
    sdo[0x6040].raw = 0x80
    assert rig.drive.state == SOD and sdo[0x6041].raw & 0x4F == 0x40
    assert sdo[0x603F].raw == 0 and sdo[0x1001].raw == 0
    emcy = [d for _t, c, d in list(rig.sniffer.frames)[n0:] if c == EMCY]
    assert emcy == [bytes([0x10, 0x23, 0x03, 0, 0, 0, 0, 0]), bytes(8)]
    assert len([d for _t, c, d in list(rig.sniffer.frames)[n0:n1] if c == EMCY]) == 1   # the reset's came after
    assert rig.emu.syncs == 0


# -- CiA 301 PDOs without a cyclic master ---------------------------------------------------------------------
def test_rpdo_received_in_pre_operational_is_ignored(rig):
    """CiA 301 7.3.2.2.4 (services per NMT state): PDOs are exchanged only in OPERATIONAL. An asynchronous RPDO1
    (transmission type 255, which would be taken at once) carrying shutdown in PRE-OPERATIONAL is dropped, and is
    not taken later either; the same frame in OPERATIONAL is."""
    sdo = rig.node.sdo
    sdo[0x1400][2].raw = 255
    rig.net.send_message(RPDO1, bytes([0x06, 0x00]))
    assert sdo[0x6040].raw == 0 and sdo[0x6041].raw & 0x4F == 0x40
    rig.node.nmt.state = "OPERATIONAL"
    rig.net.sync.transmit()
    assert sdo[0x6040].raw == 0 and sdo[0x6041].raw & 0x4F == 0x40
    rig.net.send_message(RPDO1, bytes([0x06, 0x00]))
    assert sdo[0x6040].raw == 0x06 and sdo[0x6041].raw & 0x6F == 0x21      # READY TO SWITCH ON


def test_asynchronous_rpdo_is_applied_at_once_and_synchronous_at_the_next_sync(rig):
    """CiA 301 7.2.2.2 and 7.5.2.35 (RPDO communication parameter 0x1400, transmission type): an RPDO of type
    0-240 is actuated at the next SYNC, one of type 254/255 at its reception. Without SYNC a synchronous RPDO1
    waits; a SYNC applies it; switched to 255 the next one is applied with no SYNC."""
    sdo = rig.node.sdo
    assert sdo[0x1400][2].raw == 1
    rig.node.nmt.state = "OPERATIONAL"
    rig.net.send_message(RPDO1, bytes([0x06, 0x00]))
    assert sdo[0x6040].raw == 0 and sdo[0x6041].raw & 0x4F == 0x40         # latched, not applied
    rig.net.sync.transmit()
    assert sdo[0x6040].raw == 0x06 and sdo[0x6041].raw & 0x6F == 0x21
    sdo[0x1400][2].raw = 255
    rig.net.send_message(RPDO1, bytes([0x07, 0x00]))
    assert sdo[0x6040].raw == 0x07 and sdo[0x6041].raw & 0x6F == 0x23      # SWITCHED ON, no SYNC
    assert rig.emu.syncs == 1


@pytest.mark.parametrize("trans", [254, 255])
def test_event_driven_tpdo_on_each_statusword_change(rig, trans):
    """CiA 301 7.2.2.2 and 7.5.2.37 (TPDO communication parameter 0x1800, transmission types 254/255:
    event-driven, the event being a change of the mapped statusword here; no inhibit time, no event timer):
    without SYNC, TPDO1 is sent at each change of the statusword and never while it does not change. The states
    it reports are those the master commands (shutdown, switch on, enable operation, quick stop) and the one the
    drive enters by itself at the end of the quick stop (QUICK STOP ACTIVE -> SWITCH ON DISABLED); bit 11
    (internal limit active) may change in between while the ramp holds the motor at the torque limit."""
    sdo = rig.node.sdo
    sdo[0x1800][2].raw = trans
    rig.node.nmt.state = "OPERATIONAL"
    n0 = served(rig)
    for controlword in (0x06, 0x07, 0x0F, 0x02):
        sdo[0x6040].raw = controlword
    assert rig.wait(lambda: 0x0240 in words(rig, n0), 1.5), state_times(rig)[-3:]
    time.sleep(0.2)                                                          # nothing changes any more
    sent = words(rig, n0, rig.marker())
    assert all(a != b for a, b in zip(sent, sent[1:])), [hex(w) for w in sent]     # only changes are sent
    states = [w & ~0x0800 for w in sent]
    assert [w for k, w in enumerate(states) if k == 0 or w != states[k - 1]] == \
        [0x0231, 0x0233, 0x0237, 0x0217, 0x0240]
    assert sent[-1] == 0x0240                                                # SWITCH ON DISABLED, then quiet
    assert rig.emu.syncs == 0


def test_acyclic_synchronous_tpdo_at_the_sync_after_a_change(rig):
    """CiA 301 7.2.2.2 and 7.5.2.37 (transmission type 0, synchronous acyclic): TPDO1 goes out at a SYNC only when
    its data changed since it was last sent, with the data of that SYNC. With no SYNC yet, the drive goes from
    OPERATION ENABLED through FAULT REACTION ACTIVE to FAULT by itself; then the master sends SYNCs by hand: the
    first carries FAULT, the next nothing; after a fault reset by SDO the next SYNC carries SWITCH ON DISABLED
    and the one after it nothing."""
    sdo = rig.node.sdo
    sdo[0x1800][2].raw = 0
    rig.node.nmt.state = "OPERATIONAL"
    enable(rig)
    n0 = served(rig)
    sdo[0x2001].raw = 0x2310
    assert rig.wait(lambda: rig.drive.state == FAULT, 1.5), state_times(rig)[-3:]
    assert words(rig, n0) == []                                              # no SYNC yet: nothing sent
    sent = []
    for k in (1, 2, 3, 4):
        if k == 3:
            sdo[0x6040].raw = 0x80                                           # fault reset
        n = len(rig.sniffer.frames)
        rig.net.sync.transmit()
        rig.after_syncs(k)
        sent.append([w & 0x4F for w in words(rig, n)])
    assert sent == [[0x08], [], [0x40], []]                                 # FAULT; -; SWITCH ON DISABLED; -
