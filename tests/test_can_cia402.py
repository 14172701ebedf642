"""CiA 402: the ``canopen`` package drives our emulated drive through its BaseNode402 API (interop), and our
``cia402`` master against the same emulator, both on python-can's virtual bus (emulator in a thread)."""
import threading
import time
import uuid

import can
import canopen
import numpy as np
import pytest

from rtctl.drivers import Transmission, create_driver
from rtctl.drivers.can.cia402 import (CW_DISABLE_VOLTAGE, CW_FAULT_RESET, CW_SHUTDOWN, CW_SWITCH_ON, drive_object_dictionary,
                                next_controlword, state_of)
from rtctl.hil.can_emulator import Cia402Emulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant
from rtctl.rt.interfaces import Command, RobotState


def test_statusword_decoding_and_the_path_to_operation_enabled():
    assert state_of(0x0250) == "SWITCH ON DISABLED"
    assert state_of(0x0231) == "READY TO SWITCH ON"
    assert state_of(0x0233) == "SWITCHED ON"
    assert state_of(0x0237) == "OPERATION ENABLED"
    assert state_of(0x0208) == "FAULT"
    assert next_controlword(0x0208, CW_DISABLE_VOLTAGE) == CW_FAULT_RESET
    assert next_controlword(0x0208, CW_FAULT_RESET) == CW_DISABLE_VOLTAGE  # a new rising edge needs a low first
    assert next_controlword(0x0250, 0) == CW_SHUTDOWN
    assert next_controlword(0x0231, 0) == CW_SWITCH_ON


@pytest.fixture
def drive():
    channel = f"c402-{uuid.uuid4().hex}"
    plant = make_plant(build_arm2())
    plant.reset(np.array([0.1, 0.2]))
    emu_bus = can.Bus(interface="virtual", channel=channel)
    emu = Cia402Emulator(emu_bus, plant, np.array([0, 1]), [1, 2], ratio=10.0)
    stop = threading.Event()
    run_in_thread(emu, stop, 0.002)
    yield channel, emu
    stop.set()
    time.sleep(0.01)
    emu_bus.shutdown()


def test_canopen_basenode402_drives_our_emulated_drive(drive):
    channel, emu = drive
    net = canopen.Network()
    net.connect(interface="virtual", channel=channel)
    try:
        node = canopen.BaseNode402(1, drive_object_dictionary())
        net.add_node(node)
        node.nmt.state = "PRE-OPERATIONAL"
        node.sdo[0x1017].raw = 20
        assert node.nmt.wait_for_heartbeat(1.0) == "PRE-OPERATIONAL"
        node.setup_402_state_machine()              # uploads the PDO configuration by SDO
        assert 0x6041 in node.tpdo_values and 0x6040 in node.rpdo_pointers
        node.nmt.state = "OPERATIONAL"
        net.sync.start(0.005)
        node.rpdo[1].start(0.005)
        node.op_mode = "CYCLIC SYNCHRONOUS TORQUE"
        assert node.op_mode == "CYCLIC SYNCHRONOUS TORQUE"
        node.state = "OPERATION ENABLED"
        assert node.state == "OPERATION ENABLED"
        assert emu.drives[0].state == "OPERATION ENABLED"
        # The drive faults (injected over-current): statusword, error code and EMCY say so.
        node.sdo[0x2001].raw = 0x2310
        node.check_statusword(0.5)
        node.check_statusword(0.5)
        assert node.state == "FAULT" and node.is_faulted()
        assert node.sdo[0x603F].raw == 0x2310
        node.emcy.wait(0x2310, 1.0)
        assert node.emcy.active and node.emcy.active[-1].code == 0x2310
        # canopen's fault reset (rising edge of controlword bit 7) returns it to service.
        node.reset_from_fault()
        node.state = "OPERATION ENABLED"
        assert node.state == "OPERATION ENABLED" and not node.is_faulted()
        node.state = "SWITCH ON DISABLED"
        assert emu.drives[0].state == "SWITCH ON DISABLED"
    finally:
        net.sync.stop()
        net.disconnect()


def test_our_master_runs_cst_and_counts_a_lost_heartbeat(drive):
    channel, emu = drive
    model = build_arm2()
    bus = can.Bus(interface="virtual", channel=channel)
    drv = create_driver("cia402", model, node_ids=[1, 2], bus=bus, transmission=Transmission(2, ratio=10.0),
                        reply_timeout=0.02, heartbeat_ms=10, heartbeat_timeout=0.05)
    try:
        drv.configure()
        assert drv.rad_per_increment[0] == pytest.approx(2 * np.pi / 2 ** 17)
        assert drv.nm_per_permille[0] == pytest.approx(1e-3)
        drv.activate()
        assert [d.state for d in emu.drives] == ["OPERATION ENABLED"] * 2
        state, command = RobotState(model), Command(model)
        command.effort[:] = [2.0, -1.0]           # joint N m -> motor 0.2 / -0.1 N m -> 200 / -100 per mille
        drv.write(command, 0.0)
        assert drv.read(state, 0.0)
        assert [d.target for d in emu.drives] == [200, -100]
        # Position actual in increments of the motor shaft, through the 10:1 gear to the joint.
        sent = np.array([d.position for d in emu.drives]) * 2 * np.pi / 2 ** 17 / 10.0
        assert np.allclose(state.q, sent, rtol=0, atol=1e-12)
        assert np.allclose(state.q, emu.clock.plant.q, atol=2 * np.pi / 2 ** 17 / 10 + 0.05)
        assert not drv.health.fault and drv.health.extra["heartbeats"] > 0
        emu.heartbeat_enabled = False
        t0 = time.monotonic()
        while not drv.health.fault and time.monotonic() - t0 < 1.0:
            drv.write(command, 0.0)
            drv.read(state, 0.0)
            time.sleep(0.002)
        assert drv.health.fault and "heartbeat of node" in drv.health.fault_reason
        assert 0.04 < time.monotonic() - t0 < 0.5
    finally:
        drv.deactivate()
        drv.close()
        bus.shutdown()
