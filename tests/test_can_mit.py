"""MIT-mode protocol: exact frame bytes, pack/unpack round trips within one quantisation step, and the
``can_mit`` driver against the emulated motors on python-can's virtual bus (in-process)."""
import threading
import uuid

import can
import numpy as np
import pytest

from rtctl.drivers.can.mit import (ENTER_MOTOR_MODE, EXIT_MOTOR_MODE, MODELS, ZERO_POSITION, float_to_uint, is_special,
                             pack_command, pack_reply, unpack_command, unpack_reply)
from rtctl.drivers import create_driver
from rtctl.hil.can_emulator import MitEmulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant
from rtctl.rt.interfaces import Command, RobotState

AK80 = MODELS["AK80-9"]


def test_special_frames_are_the_reference_bytes():
    assert ENTER_MOTOR_MODE.hex() == "fffffffffffffffc"
    assert EXIT_MOTOR_MODE.hex() == "fffffffffffffffd"
    assert ZERO_POSITION.hex() == "fffffffffffffffe"
    assert [is_special(f) for f in (ENTER_MOTOR_MODE, EXIT_MOTOR_MODE, ZERO_POSITION)] == [0xFC, 0xFD, 0xFE]
    assert is_special(pack_command(AK80, 0, 0, 0, 0, 0)) == 0


def test_zero_command_bytes():
    # The well-known all-zero MIT command: p, v, t at mid-range (truncated), kp = kd = 0.
    assert bytes(pack_command(AK80, 0.0, 0.0, 0.0, 0.0, 0.0)).hex() == "7fff7ff0000007ff"


def test_known_command_bytes_field_by_field():
    # p = 12.5 -> 0xFFFF; v = -25.64 -> 0x000; kp = 500 -> 0xFFF; kd = 2.5 -> int(2.5*4095/5) = 2047 = 0x7FF;
    # t = 18 -> 0xFFF.
    data = pack_command(AK80, 12.5, -25.64, 500.0, 2.5, 18.0)
    assert bytes(data).hex() == "ffff000fff7fffff"  # b5 = kd[11:4], b6 = kd[3:0] t[11:8]
    # Out-of-range values clamp to the range ends.
    assert pack_command(AK80, 99.0, -99.0, 1e6, -1.0, -99.0) == pack_command(AK80, 12.5, -25.64, 500.0, 0.0, -18.0)
    assert float_to_uint(1.0, 0.0, 1.0, 12) == 4095 and float_to_uint(0.0, 0.0, 1.0, 12) == 0


def test_known_reply_bytes():
    data = pack_reply(AK80, 3, 12.5, 0.0, -18.0)
    assert bytes(data).hex() == "03ffff7ff000"
    mid, p, v, t = unpack_reply(AK80, data)
    assert mid == 3 and p == 12.5 and t == -18.0 and abs(v) <= AK80.step("v")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trips_are_within_one_quantisation_step(name):
    m = MODELS[name]
    rng = np.random.default_rng(5)
    for _ in range(500):
        p, v = rng.uniform(m.p_min, m.p_max), rng.uniform(m.v_min, m.v_max)
        kp, kd, t = rng.uniform(m.kp_min, m.kp_max), rng.uniform(m.kd_min, m.kd_max), rng.uniform(m.t_min, m.t_max)
        got = unpack_command(m, pack_command(m, p, v, kp, kd, t))
        for x, y, field in zip((p, v, kp, kd, t), got, ("p", "v", "kp", "kd", "t")):
            assert 0.0 <= x - y <= m.step(field) * (1 + 1e-9)  # truncation: never above, less than a step below
        mid, pr, vr, tr = unpack_reply(m, pack_reply(m, 7, p, v, t))
        assert mid == 7
        assert 0 <= p - pr <= m.step("p") * (1 + 1e-9) and 0 <= v - vr <= m.step("v") * (1 + 1e-9)
        assert 0 <= t - tr <= m.step("t") * (1 + 1e-9)


@pytest.fixture
def virtual_mit():
    """The MIT driver and an emulated motor pair on one python-can virtual channel (emulator in a thread)."""
    channel = f"mit-{uuid.uuid4().hex}"
    model = build_arm2()
    plant = make_plant(build_arm2())
    plant.reset(np.array([0.3, -0.2]))
    emu_bus = can.Bus(interface="virtual", channel=channel)
    drv_bus = can.Bus(interface="virtual", channel=channel)
    stop = threading.Event()
    emulators = []

    def start(**faults):
        emu = MitEmulator(emu_bus, plant, np.array([0, 1]), [1, 2], "AK80-9", **faults)
        emulators.append(emu)
        run_in_thread(emu, stop, 0.002)
        drv = create_driver("can_mit", model, can_ids=[1, 2], bus=drv_bus, read_timeout=0.02)
        drv.configure()
        drv.activate()
        start.channel = channel
        return emu, drv, model, plant

    yield start
    stop.set()
    emu_bus.shutdown()
    drv_bus.shutdown()


def test_driver_reads_quantised_state_and_the_motor_applies_the_torque(virtual_mit):
    emu, drv, model, plant = virtual_mit()
    state, command = RobotState(model), Command(model)
    assert drv.read(state, 0.0) is False  # activation sample, nothing awaited yet
    assert np.allclose(state.q, [0.3, -0.2], atol=AK80.step("p") + 2 * np.pi / 16384 / 9)
    command.effort[:] = [1.5, -0.75]
    drv.write(command, 0.0)
    assert drv.read(state, 0.002) is True
    # The motor applies the commanded torque quantised to 12 bits over +-18 N m.
    assert np.all(np.abs(emu.cmd[:, 4] - [1.5, -0.75]) <= AK80.step("t"))
    assert np.all(emu.cmd[:, 2:4] == 0.0)
    drv.write(command, 0.002)
    drv.read(state, 0.004)
    assert np.all(np.abs(state.effort - [1.5, -0.75]) <= 2 * AK80.step("t"))
    assert drv.health.timeouts == 0 and not drv.health.fault


def test_dropped_replies_are_counted_then_fault(virtual_mit):
    emu, drv, model, _plant = virtual_mit()
    emu.faults.drop = 1.0  # every reply lost from now on
    state, command = RobotState(model), Command(model)
    for k in range(1, 6):
        drv.write(command, 0.0)
        assert drv.read(state, 0.0) is False
        assert drv.health.timeouts == 2 * k
        assert drv.health.fault == (k >= drv.max_failed_cycles)
    assert "missed 5 consecutive replies" in drv.health.fault_reason
    # Faulted: the driver sends the motor-side safe command, damping only.
    drv.write(command, 0.0)
    for _ in range(200):
        if emu.cmd[0, 3] > 0:
            break
        threading.Event().wait(0.005)
    assert emu.cmd[0, 2] == 0.0 and abs(emu.cmd[0, 3] - drv.safe_kd) <= AK80.step("kd")


def test_unknown_ids_and_error_frames_are_counted(virtual_mit):
    _emu, drv, model, _plant = virtual_mit()
    state = RobotState(model)
    other = can.Bus(interface="virtual", channel=virtual_mit.channel)
    other.send(can.Message(arbitration_id=0x123, data=b"\x00" * 6, is_extended_id=False))
    other.send(can.Message(arbitration_id=0, data=bytes([9, 0, 0, 0, 0, 0]), is_extended_id=False))  # motor 9
    other.send(can.Message(is_error_frame=True, arbitration_id=0))
    threading.Event().wait(0.02)
    drv.read(state, 0.0)
    other.shutdown()
    assert drv.health.extra["unknown_ids"] == 2 and drv.health.extra["bus_errors"] == 1
    assert not drv.health.fault
