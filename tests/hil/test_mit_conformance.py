"""The emulated MIT-mode motor against the mini-cheetah motor controller firmware (Ben Katz,
bgkatz/motorcontrol, STM32 version): raw python-can frames in, the firmware's answers checked byte by byte.

Sections cited: ``stm32f4xx_it.c`` CAN1_RX0_IRQHandler (reply then special frames / unpack_cmd, timeout
reset), ``fsm.c`` update_fsm / run_fsm / fsm_exit_state (modes, zero, CAN_TIMEOUT), ``can.c`` pack_reply /
unpack_cmd (bit layout), ``foc.c`` torque_control / zero_commands. Ranges: the "mini-cheetah" configuration
(P +-12.5 rad, V +-65 rad/s, KP 0..500, KD 0..5, T +-18 N m).
"""
import threading
import time
import uuid

import can
import numpy as np
import pytest

from rtctl.drivers.can.mit import MODELS, pack_command, unpack_reply
from rtctl.hil.can_emulator import MitEmulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant

MC = MODELS["mini-cheetah"]
ENTER, EXIT, ZERO = bytes([0xFF] * 7 + [0xFC]), bytes([0xFF] * 7 + [0xFD]), bytes([0xFF] * 7 + [0xFE])


@pytest.fixture
def motor():
    channel = f"mitc-{uuid.uuid4().hex}"
    plant = make_plant(build_arm2())
    plant.reset(np.array([0.3, -0.2]))
    emu_bus = can.Bus(interface="virtual", channel=channel)
    host = can.Bus(interface="virtual", channel=channel)
    emu = MitEmulator(emu_bus, plant, np.array([0, 1]), [1, 2], "mini-cheetah", host_id=0,
                      can_timeout_cycles=4000)                       # 4000 cycles of 25 us = 0.1 s
    stop = threading.Event()
    run_in_thread(emu, stop, 0.002)

    def send(data, motor_id=1):
        """One frame to a motor; its reply (arbitration ID, bytes)."""
        while host.recv(0) is not None:
            pass
        host.send(can.Message(arbitration_id=motor_id, data=data, is_extended_id=False))
        reply = host.recv(0.5)
        return None if reply is None else (reply.arbitration_id, bytes(reply.data))

    yield emu, send
    stop.set()
    time.sleep(0.01)
    host.shutdown()
    emu_bus.shutdown()


def settled(predicate, timeout=2.0):
    """The firmware answers before it acts on a frame (CAN1_RX0_IRQHandler packs the reply first), so the reply
    can reach the test while the emulator thread has not yet applied the frame: wait for its effect."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.001)
    return predicate()


def test_the_fixture_stops_its_emulator_thread():
    """The fixture's teardown runs: its emulator thread ends (a thread left serving per test loads the machine
    the timing tests run on)."""
    before = set(threading.enumerate())
    fixture = motor.__wrapped__()
    next(fixture)
    started = [t for t in threading.enumerate() if t.name == "can-emulator" and t not in before]
    assert len(started) == 1
    with pytest.raises(StopIteration):
        next(fixture)
    started[0].join(1.0)
    assert not started[0].is_alive()


def test_every_frame_is_answered_with_the_six_byte_reply(motor):
    """can.c pack_reply and CAN1_RX0_IRQHandler: every frame to the motor's ID is answered to CAN_MASTER (0)
    with 6 bytes [CAN_ID, p16, v12, t12]; in the rest state the torque is zero (0x7FF, mid-range)."""
    emu, send = motor
    cob, data = send(pack_command(MC, 0, 0, 0, 0, 0))
    assert cob == 0 and len(data) == 6 and data[0] == 1
    mid, p, v, t = unpack_reply(MC, data)
    assert abs(p - 0.3) < 2 * MC.step("p") + emu.position_step and ((data[4] & 0xF) << 8 | data[5]) == 0x7FF
    cob, data = send(pack_command(MC, 0, 0, 0, 0, 0), motor_id=2)
    assert data[0] == 2
    assert send(ENTER, motor_id=3) is None                           # not its ID: no answer


def test_enter_exit_motor_mode_and_commands_only_act_in_motor_mode(motor):
    """fsm.c update_fsm / run_fsm: FC enters MOTOR mode from rest, FD returns to rest and zeroes the commands
    (fsm_exit_state -> zero_commands); a command torque acts only in MOTOR mode."""
    emu, send = motor
    send(pack_command(MC, 0, 0, 0, 0, 5.0))
    time.sleep(0.02)
    assert emu.mode[0] == "rest" and emu.clock.motor_torque[0] == 0.0
    send(ENTER)
    assert settled(lambda: emu.mode[0] == "motor")
    send(pack_command(MC, 0, 0, 0, 0, 5.0))
    _mid, _p, _v, t = unpack_reply(MC, send(pack_command(MC, 0, 0, 0, 0, 5.0))[1])
    assert abs(t - 5.0) <= 2 * MC.step("t")
    send(EXIT)
    assert settled(lambda: emu.mode[0] == "rest" and np.all(emu.cmd[0] == 0.0)), (emu.mode[0], emu.cmd[0])
    _mid, _p, _v, t = unpack_reply(MC, send(EXIT)[1])
    assert abs(t) <= MC.step("t")


def test_set_zero_only_in_rest_mode(motor):
    """fsm.c update_fsm: the zero command (FE) is taken in the rest (menu) state and ignored in MOTOR mode."""
    emu, send = motor
    send(ENTER)
    send(ZERO)
    _mid, p, _v, _t = unpack_reply(MC, send(ENTER)[1])
    assert abs(p - 0.3) < 0.05 and emu.offset[0] == 0.0
    send(EXIT)
    send(ZERO)
    _mid, p, _v, _t = unpack_reply(MC, send(EXIT)[1])
    assert abs(p) <= 2 * MC.step("p") + emu.position_step


def test_packed_ranges_and_out_of_range_commands(motor):
    """can.c unpack_cmd with the configured ranges: all-ones fields are the range ends (P 12.5, V 65, KP 500,
    KD 5, T 18); a host value beyond a range can only arrive clamped to its end; the torque made is
    limited to the current limit (the T range) however large kp times the error is (foc.c)."""
    emu, send = motor
    send(pack_command(MC, 99.0, 999.0, 1e4, 50.0, 99.0))
    assert bytes(pack_command(MC, 99.0, 999.0, 1e4, 50.0, 99.0)).hex() == "ffffffffffffffff"
    assert settled(lambda: np.allclose(emu.cmd[0], [12.5, 65.0, 500.0, 5.0, 18.0], rtol=0, atol=1e-12)), emu.cmd[0]
    send(pack_command(MC, -99.0, -999.0, -1.0, -1.0, -99.0))
    assert settled(lambda: np.allclose(emu.cmd[0], [-12.5, -65.0, 0.0, 0.0, -18.0], rtol=0, atol=1e-12)), emu.cmd[0]
    send(ENTER)
    send(pack_command(MC, 12.5, 0.0, 500.0, 0.0, 0.0))               # kp * error ~ 6000 N m asked
    _mid, _p, _v, t = unpack_reply(MC, send(pack_command(MC, 12.5, 0.0, 500.0, 0.0, 0.0))[1])
    assert t == MC.t_max                                             # 0xFFF: the current limit
    send(EXIT)


def test_can_timeout_zeroes_the_commands_and_only_a_command_resumes(motor):
    """fsm.c run_fsm MOTOR_MODE and stm32f4xx_it.c: with CAN_TIMEOUT = 4000 cycles (0.1 s at 40 kHz), once no
    command frame came for longer the commands are zeroed and the motor makes no torque; special frames do
    not reset the counter; the next command frame does."""
    emu, send = motor
    send(ENTER)
    t_cmd = time.monotonic()        # before the send: the firmware takes the command at or after t_cmd
    send(pack_command(MC, 0, 0, 0, 0, 4.0))
    torques = []
    while time.monotonic() - t_cmd < 0.35:                           # probe with FC: a no-op in MOTOR mode
        _mid, _p, _v, t = unpack_reply(MC, send(ENTER)[1])
        torques.append((time.monotonic() - t_cmd, t))
        time.sleep(0.01)
    assert all(abs(t - 4.0) <= 2 * MC.step("t") for dt, t in torques if dt < 0.09)
    zero = [dt for dt, t in torques if abs(t) <= MC.step("t")]
    assert zero and 0.1 <= zero[0] <= 0.1 + 0.1, torques            # within the timeout plus a probe and slack
    events = [e for e in emu.events if e[1] == 1 and e[2] == "CAN timeout: commands zeroed"]
    assert len(events) == 1 and 0.1 <= events[0][0] - emu.last_command[0] <= 0.1 + 0.05
    _mid, _p, _v, t = unpack_reply(MC, send(pack_command(MC, 0, 0, 0, 0, 4.0))[1])
    _mid, _p, _v, t = unpack_reply(MC, send(ENTER)[1])
    assert abs(t - 4.0) <= 2 * MC.step("t")
    send(EXIT)
