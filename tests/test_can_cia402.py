"""The ``cia402`` driver against the emulated drives on python-can's virtual bus (emulator in a thread):
statusword decoding, CST, the drive's heartbeat consumed (a lost drive is a fault within two heartbeat
periods), a drive's boot-up after a reset, quick stop and fault reset, and the master heartbeat the drive
watches (CiA 301 7.2.8.3.2, CiA 402-2 6.3)."""
import threading
import time
import uuid

import can
import numpy as np
import pytest

from rtctl.drivers import Transmission, create_driver
from rtctl.drivers.cia402 import (CW_DISABLE_VOLTAGE, CW_FAULT_RESET, CW_SHUTDOWN, CW_SWITCH_ON,
                                      next_controlword, state_of)
from rtctl.hil.can_emulator import Cia402Emulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant
from rtctl.rt.interfaces import Command, RobotState


def test_statusword_decoding_and_the_path_to_operation_enabled():
    """CiA 402-2 6.2 (statusword state bits) and 6.3 (transitions 2, 3, 4, 15)."""
    assert state_of(0x0250) == "SWITCH ON DISABLED"
    assert state_of(0x0231) == "READY TO SWITCH ON"
    assert state_of(0x0233) == "SWITCHED ON"
    assert state_of(0x0237) == "OPERATION ENABLED"
    assert state_of(0x0217) == "QUICK STOP ACTIVE"
    assert state_of(0x021F) == "FAULT REACTION ACTIVE"
    assert state_of(0x0208) == "FAULT"
    assert next_controlword(0x0208, CW_DISABLE_VOLTAGE) == CW_FAULT_RESET
    assert next_controlword(0x0208, CW_FAULT_RESET) == CW_DISABLE_VOLTAGE  # a new rising edge needs a low first
    assert next_controlword(0x0250, 0) == CW_SHUTDOWN
    assert next_controlword(0x0231, 0) == CW_SWITCH_ON


@pytest.fixture
def rig():
    channel = f"c402-{uuid.uuid4().hex}"
    plant = make_plant(build_arm2())
    plant.reset(np.array([0.1, 0.2]))
    emu_bus = can.Bus(interface="virtual", channel=channel)
    emu = Cia402Emulator(emu_bus, plant, np.array([0, 1]), [1, 2], ratio=10.0)
    stop = threading.Event()
    run_in_thread(emu, stop, 0.002)
    model = build_arm2()
    bus = can.Bus(interface="virtual", channel=channel)
    made = []

    def driver(**options):
        options = {"read_timeout": 0.02, "heartbeat_period": 0.05, **options}
        drv = create_driver("cia402", model, can_ids=[1, 2], bus=bus, transmission=Transmission(2, ratio=10.0),
                            **options)
        made.append(drv)
        drv.configure()
        drv.activate()
        return drv

    yield emu, driver, model, channel
    for drv in made:
        try:
            drv.deactivate()
        except Exception:  # noqa: BLE001  (a test may leave it faulted or inactive)
            pass
        drv.close()
    stop.set()
    time.sleep(0.01)
    bus.shutdown()
    emu_bus.shutdown()


def cycle(drv, model, seconds, until=None):
    state, command = RobotState(model), Command(model)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and until()):
        drv.write(command, 0.0)
        drv.read(state, 0.0)
        time.sleep(0.002)
    return state


def test_cst_torque_and_position_scaling(rig):
    """CiA 402-2 0x6071/0x6076 (torque per mille of rated), 0x6064/0x608F (increments per revolution)."""
    emu, driver, model, _ = rig
    drv = driver(master_heartbeat_timeout=0)
    assert drv.rad_per_increment[0] == pytest.approx(2 * np.pi / 2 ** 17)
    assert drv.nm_per_permille[0] == pytest.approx(1e-3)
    assert [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2
    state, command = RobotState(model), Command(model)
    command.effort[:] = [2.0, -1.0]           # joint N m -> motor 0.2 / -0.1 N m -> 200 / -100 per mille
    drv.write(command, 0.0)
    assert drv.read(state, 0.0)
    drv.write(command, 0.0)
    assert drv.read(state, 0.0)
    assert [d.values[(0x6071, 0)] for d in emu.drives] == [200, -100]
    sent = np.array([d.position for d in emu.drives]) * 2 * np.pi / 2 ** 17 / 10.0
    assert np.allclose(state.q, emu.clock.plant.q, atol=2 * np.pi / 2 ** 17 / 10 + 0.05)
    assert np.all(np.abs(state.q - sent) < 0.02)


def test_a_lost_drive_heartbeat_is_a_fault_within_two_periods(rig):
    """CiA 301 7.2.8.3.2 (heartbeat consumer in the master): with a 50 ms producer time the driver faults
    once the newest heartbeat of a drive is two periods old, and names the node."""
    emu, driver, model, _ = rig
    drv = driver(master_heartbeat_timeout=0)
    cycle(drv, model, 0.2)
    assert not drv.health.fault and drv.health.extra["heartbeats"] >= 6
    emu.drives[1].heartbeat_muted = True
    cycle(drv, model, 1.0, until=lambda: drv.health.fault)
    t_fault = time.monotonic()
    age = t_fault - drv._hb_time[1]
    assert drv.health.fault and "heartbeat of node 2 lost" in drv.health.fault_reason, drv.health.fault_reason
    assert 0.1 <= age <= 0.1 + 0.05, age                 # two periods, plus one cycle and scheduling


def test_boot_up_after_a_drive_reset_is_a_fault_and_configure_recovers(rig):
    """CiA 301 7.3.2.2.1: a drive that was reset sends its boot-up (0x00) and has lost its configuration; the
    driver faults naming the boot-up, refuses to activate before configure, and runs again after it."""
    emu, driver, model, channel = rig
    drv = driver(master_heartbeat_timeout=0)
    cycle(drv, model, 0.1)
    other = can.Bus(interface="virtual", channel=channel)
    other.send(can.Message(arbitration_id=0, data=bytes([0x81, 2]), is_extended_id=False))   # reset node 2
    other.shutdown()
    cycle(drv, model, 1.0, until=lambda: drv.health.fault)
    assert "node 2 sent a boot-up message" in drv.health.fault_reason, drv.health.fault_reason
    assert emu.drives[1].nmt == 127 and emu.drives[1].state == "SWITCH ON DISABLED"
    drv.deactivate()
    drv.configure()
    drv.activate()
    cycle(drv, model, 0.2)
    assert not drv.health.fault and [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2


def test_quick_stop_then_activate_again(rig):
    """CiA 402-2 6.3 transitions 11, 12 (0x605A = 2) and back through 2, 3, 4: the driver's quick stop takes
    every drive to QUICK STOP ACTIVE and SWITCH ON DISABLED; activate returns them to OPERATION ENABLED."""
    emu, driver, model, _ = rig
    drv = driver(master_heartbeat_timeout=0)
    drv.quick_stop()
    cycle(drv, model, 1.0, until=lambda: all(d.state == "SWITCH ON DISABLED" for d in emu.drives))
    assert [s for _t, s in emu.drives[0].states][-3:] == ["OPERATION ENABLED", "QUICK STOP ACTIVE",
                                                         "SWITCH ON DISABLED"]
    assert drv.health.fault and "after the quick stop this driver requested" in drv.health.fault_reason
    drv.deactivate()
    drv.configure()
    drv.activate()
    assert [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2


def test_drive_fault_reaction_and_fault_reset(rig):
    """CiA 402-2 6.3 transitions 13, 14, 15: a drive fault is FAULT REACTION ACTIVE then FAULT; the driver
    faults naming the state and the EMCY code, and activate resets it on a rising edge of bit 7."""
    emu, driver, model, _ = rig
    drv = driver(master_heartbeat_timeout=0)
    emu.drives[0].enter_fault(0x2310, time.monotonic())
    cycle(drv, model, 1.0, until=lambda: emu.drives[0].state == "FAULT")
    # the EMCY decoded (CiA 301 7.2.7; error register 0x1001 bits 0 and 1, CiA 301 7.5.2.2)
    assert "node 1 in FAULT" in drv.health.fault_reason and ("EMCY 0x2310 (continuous over current), error "
                                                             "register 0x03 (generic, current)") in drv.health.fault_reason
    drv.deactivate()
    drv.configure()
    drv.activate()
    assert [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2 and emu.drives[0].error_code == 0


@pytest.mark.slow
def test_master_heartbeat_is_watched_by_the_drive(rig):
    """CiA 301 7.2.8.3.2.3 (0x1016 in the drive) and CiA 402-2 0x6007 = 1: the driver configures each drive
    to watch its heartbeat (0x77F) and produces it while active; when it stops (here: the heartbeat thread
    stopped, as by the death of the process) every drive faults within the consumer time (EMCY 0x8130), and a
    deactivated driver first switches the watch off."""
    emu, driver, model, channel = rig
    drv = driver(master_heartbeat_period=0.05, master_heartbeat_timeout=0.2)
    assert [d.values[(0x1016, 1)] for d in emu.drives] == [0x7F << 16 | 200] * 2
    assert [d.values[(0x6007, 0)] for d in emu.drives] == [1, 1]
    cycle(drv, model, 0.5)
    assert [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2
    drv._stop_master_heartbeat()
    stopped = time.monotonic()
    deadline = stopped + 1.0
    while time.monotonic() < deadline and not all(d.state in ("FAULT", "FAULT REACTION ACTIVE")
                                                  for d in emu.drives):
        time.sleep(0.005)
    for d in emu.drives:
        lost = [t for t, e in d.log if e == "heartbeat of node 127 lost"]
        # The consumer time runs from the last heartbeat the drive received (CiA 301 7.2.8.3.2.3), not from
        # `stopped`: on a loaded machine the heartbeat thread's last beat can come more than one period before
        # the stop, so the lower bound is taken from the drive's own receive time of that beat.
        heard = max(entry[3] for entry in d._consumer.values())
        assert lost and 0.2 <= lost[-1] - heard and lost[-1] - stopped <= 0.2 + 0.15, (lost, heard, stopped)
        assert d.error_code == 0x8130
    drv.deactivate()
    drv.configure()
    drv.activate()
    cycle(drv, model, 0.2)
    drv.deactivate()
    assert [d.values[(0x1016, 1)] for d in emu.drives] == [0, 0]
