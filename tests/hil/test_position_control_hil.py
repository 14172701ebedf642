"""The joint_position controller over the actuators' own position loops, against the emulators.

* MIT motors (CAN): the driver sends each motor its set point, stiffness and damping and the feed-forward
  torque in one MIT-mode frame (p_des, v_des, kp, kd, t_ff), and the motor closes
  ``t = kp (p_des - p) + kd (v_des - v) + t_ff`` itself. At rest without feed-forward the arm sags to where
  ``K (q_d - q) = g(q)``; with gravity feed-forward it holds ``q_d``.
* Dynamixel servos: position mode hands the servo its Goal Position (ROBOTIS e-manual, X-series control table,
  Goal Position, address 116); the servo's own PID (Position P Gain, address 84) pulls toward it. A servo takes
  no feed-forward current in position mode, so the arm sags to where the servo's P stiffness balances gravity.
"""
import numpy as np
import pytest

from rtctl.drivers import create_driver
from rtctl.dynamics import Dynamics
from rtctl.hil.can_harness import Emulator
from rtctl.hil.can_robot import build_arm2
from rtctl.hil.dynamixel_emulator import hil_arm
from rtctl.loops.controllers import create_controller
from rtctl.loops.trajectories import create_trajectory
from rtctl.rt.loop import ControlLoop
from rtctl.safety import SafetyMonitor

from machine import skip_if_starved
from test_can_hil import server  # noqa: F401  (the module's CAN bus server fixture)
from test_dynamixel_hil import emulator, wall_clock

Q0 = [0.2, -0.4]
HOLD = [0.5, -0.2]
RATE = 500.0
STIFFNESS = [20.0, 8.0]     # N m/rad at the joints
DAMPING = [1.5, 0.6]        # N m s/rad


def hold_loop(model, driver, feedforward):
    controller = create_controller("joint_position", Dynamics(model), kp=STIFFNESS, kd=DAMPING,
                                   feedforward=feedforward)
    trajectory = create_trajectory("min_jerk", start=Q0, goal=HOLD, duration=0.5)
    return ControlLoop(model=model, drivers=[driver], controller=controller, trajectory=trajectory,
                       safety=SafetyMonitor(model, watchdog_cycles=25), rate_hz=RATE)


def mit_hold(server, feedforward):
    emu = Emulator(server, "mit", [1, 2], "--initial", *map(str, Q0))
    model = build_arm2()
    driver = create_driver("can_mit", model, can_ids=[1, 2], can_interface="remote", can_channel=server.url,
                           read_timeout=5e-4, mode="position", max_failed_cycles=25)
    loop = hold_loop(model, driver, feedforward)
    try:
        report = loop.run(duration=3.0)
    finally:
        driver.close()
        emu.stop()
    skip_if_starved(report, "a 500 Hz hold over CAN")
    assert not report.tripped and not driver.health.fault, report.format()
    return loop


@wall_clock   # emulator processes on a shared machine: one more run if its scheduling failed this one
@pytest.mark.slow
def test_mit_motors_close_the_loop_the_controller_sets_and_sag_as_their_stiffness_says(server):
    loop = mit_hold(server, "none")
    q, v = loop.state.q, loop.state.v
    gravity = Dynamics(loop.model).gravity_forces(q)
    spring = np.asarray(STIFFNESS) * (np.asarray(HOLD) - q)
    print("sag", np.asarray(HOLD) - q, "spring", spring, "gravity", gravity, "v", v)
    assert np.abs(v).max() < 0.01, v
    assert np.abs(spring).max() > 0.5                                # it sagged: the motors' springs hold it
    # MIT-frame quantisation: kp 12 bits over 0-500 N m/rad, position 16 bits over +-12.5 rad (at the motor)
    np.testing.assert_allclose(spring, gravity, atol=0.03 * np.abs(gravity).max())


@wall_clock   # emulator processes on a shared machine: one more run if its scheduling failed this one
@pytest.mark.slow
def test_mit_motors_hold_the_set_point_with_gravity_feedforward(server):
    loop = mit_hold(server, "gravity")
    sag = np.asarray(HOLD) - loop.state.q
    gravity = Dynamics(loop.model).gravity_forces(loop.state.q)
    assert np.abs(sag).max() < 0.03 * np.abs(gravity / np.asarray(STIFFNESS)).max(), sag


@wall_clock   # emulator processes on a shared machine: one more run if its scheduling failed this one
@pytest.mark.slow
def test_dynamixel_servos_follow_the_controllers_goal_positions_with_their_own_pid():
    model = hil_arm(2)
    with emulator() as emu:
        driver = create_driver("dynamixel", model, port=emu.port, mode="position", position_gains=(1600, 0, 0))
        loop = hold_loop(model, driver, "none")
        try:
            report = loop.run(duration=1.5)
        finally:
            driver.close()
    skip_if_starved(report, "a 500 Hz hold over the Dynamixel bus")
    assert not report.tripped and not driver.health.fault, report.format()
    q = loop.state.q
    # P-only servo PID: duty = P/128 * error (counts) / 885, torque = 4.1 N m * duty at rest (the emulator's
    # XM430 model), so the servo's stiffness is K = 1600/128/885 * 4.1 * 4096/(2 pi) = 37.75 N m/rad.
    K = 1600 / 128 / 885 * 4.1 * 4096 / (2 * np.pi)
    expected = np.asarray(HOLD) - Dynamics(model).gravity_forces(q) / K
    assert np.all(np.abs(q - expected) < 3 * 2 * np.pi / 4096), (q, expected)
    assert HOLD[0] - q[0] > 0.005                   # joint 1 carries the arm: a real steady-state error
