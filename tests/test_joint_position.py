"""The joint-position controller and position-mode drives, end to end (issue: a position-mode driver under an
effort controller ran effort control without a word).

* At rest, a drive's PD ``K (q_d - q) + D (0 - v)`` plus the feed-forward effort balances gravity exactly:
  without feed-forward the arm sags to where ``K (q_d - q) = g(q)``; with gravity compensation it holds
  ``q_d`` (Siciliano et al. 2009, section 8.5.2).
* A velocity-mode drive closes its velocity loop, of gain D, on ``v* = qd_d + (K / D)(q_d - q)``
  (:func:`rtctl.drivers.base.velocity_set_point`): the same torque as the position loop's, so the sim backend's
  two modes move the arm alike.
* A position- or velocity-mode driver under a controller that writes only effort, or the reverse, is refused
  when the config is built, naming the driver; a backend refuses a mode it does not drive, naming both.
"""
from __future__ import annotations

import numpy as np
import pytest

from rtctl.config import build, load_config
from rtctl.dynamics import Dynamics
from rtctl.options import ConfigError

HOLD = [0.3, 0.6, -0.2, -1.0, 0.4, 0.5, 0.2]
STIFFNESS = [300.0, 300.0, 150.0, 150.0, 20.0, 20.0, 10.0]   # N m/rad: the shoulder sags by about 0.1 rad
DAMPING = [30.0, 30.0, 15.0, 15.0, 1.0, 1.0, 0.5]              # N m s/rad, stable sampled at 1 kHz


def config(tmp_path, controller: str, mode: str = "position", feedforward: str | None = None):
    extra = f'feedforward = "{feedforward}"\n' if feedforward else ""
    text = f"""
[robot]
model = "arm7"
[plant]
type = "rigid_body"
integrator = "rk4"
viscous_friction = 0.0
coulomb_friction = 0.0
initial_position = {HOLD}
[driver]
backend = "sim"
mode = "{mode}"
[controller]
type = "{controller}"
kp = {STIFFNESS}
kd = {DAMPING}
{extra}[trajectory]
type = "min_jerk"
goal = {HOLD}
duration = 0.5
[loop]
rate_hz = 1000.0
duration = 4.0
pace = false
[safety]
position_margin = 0.0
"""
    path = tmp_path / f"{controller}_{mode}_{feedforward}.toml"
    path.write_text(text)
    return path


def rest_state(path):
    loop = build(load_config(path))
    report = loop.run(duration=4.0)
    assert not report.tripped, report.trip_reason
    return loop


@pytest.mark.slow
def test_without_feedforward_the_arm_rests_where_the_drives_stiffness_balances_gravity(tmp_path):
    loop = rest_state(config(tmp_path, "joint_position", feedforward="none"))
    q, v = loop.state.q, loop.state.v
    assert np.abs(v).max() < 1e-6, v
    gravity = Dynamics(loop.model).gravity_forces(q)
    spring = np.asarray(STIFFNESS) * (np.asarray(HOLD) - q)
    assert np.abs(spring).max() > 5.0                         # it did sag: the drives held against gravity
    np.testing.assert_allclose(spring, gravity, atol=1e-6 * np.abs(gravity).max() + 1e-9)


def test_with_gravity_feedforward_the_arm_holds_its_set_point(tmp_path):
    loop = rest_state(config(tmp_path, "joint_position", feedforward="gravity"))
    assert np.abs(loop.state.q - np.asarray(HOLD)).max() < 1e-7, loop.state.q - np.asarray(HOLD)
    np.testing.assert_allclose(loop.command.position, HOLD)
    np.testing.assert_allclose(loop.command.stiffness, STIFFNESS)


@pytest.mark.parametrize("controller, mode, expected", [
    ("computed_torque", "position", "mode = 'position': controller 'computed_torque' writes only effort"),
    ("joint_position", "effort", "mode = 'effort': controller 'joint_position' gives the drives' own position loop"),
    ("computed_torque", "velocity", "mode = 'velocity': controller 'computed_torque' writes only effort, so the "
                                    "drives would get no velocity set point"),
])
def test_a_drive_mode_the_controller_does_not_feed_is_refused(tmp_path, controller, mode, expected):
    with pytest.raises(ConfigError) as err:
        build(load_config(config(tmp_path, controller, mode)))
    message = str(err.value)
    assert expected in message and "[driver]" in message and "\n" not in message, message


def test_a_velocity_mode_drive_moves_the_arm_as_the_position_loop_does(tmp_path):
    """The sim backend in velocity mode against position mode, 1 s of the same move from rest (a 0.5 s minimum
    jerk to HOLD from 0.3 rad below it) under gravity feed-forward: D (v* - v) = K (q_d - q) + D (qd_d - v), so
    the two runs agree to rounding; both settle on HOLD."""
    runs = {}
    for mode in ("position", "velocity"):
        path = config(tmp_path, "joint_position", mode, feedforward="gravity")
        path.write_text(path.read_text().replace(f"initial_position = {HOLD}",
                                                 f"initial_position = {(np.asarray(HOLD) - 0.3).tolist()}"))
        loop = build(load_config(path))
        trace = []
        loop.hooks.append(lambda cycle, t, state, command: trace.append(state.q.copy()))
        report = loop.run(duration=1.0)
        assert not report.tripped, report.trip_reason
        runs[mode] = np.array(trace)
    moved = np.abs(runs["position"][-1] - runs["position"][0]).max()
    assert moved > 0.25, moved
    np.testing.assert_allclose(runs["velocity"], runs["position"], atol=1e-9)
    # 0.5 s after the move ended, within 0.01 rad of it (the shoulder's drive settles at kp / kd = 10 1/s)
    assert np.abs(runs["velocity"][-1] - np.asarray(HOLD)).max() < 0.02


JOINT_POSITION = 'type = "joint_position"\nkp = [40.0, 20.0]\nkd = [2.0, 1.0]'


def refused_driver(tmp_path, driver: str, controller: str = JOINT_POSITION) -> str:
    """The one-line ConfigError of can_arm2 with the ``[driver]`` and ``[controller]`` lines given."""
    path = tmp_path / "driver.toml"
    path.write_text(f'''
[robot]
model = "can_arm2"
[driver]
{driver}
[controller]
{controller}
[trajectory]
type = "min_jerk"
goal = [0.2, -0.4]
duration = 1.0
''')
    with pytest.raises(ConfigError) as err:
        build(load_config(path))
    message = str(err.value)
    assert "\n" not in message and "[driver]" in message, message
    return message


def test_a_backend_refuses_a_mode_it_does_not_drive(tmp_path):
    """The CAN CiA 402 backend drives cyclic synchronous torque only: mode = 'velocity' is one line naming the
    backend, the mode and the modes it drives, before any bus is opened."""
    message = refused_driver(tmp_path, 'backend = "cia402"\ncan_channel = "vcan-none"\ncan_ids = [1, 2]\n'
                                       'mode = "velocity"')
    assert "mode = 'velocity' is not one this backend drives ('effort')" in message, message


def test_a_torque_offset_in_effort_mode_is_refused(tmp_path):
    """The ``ethercat`` backend's torque offset 0x60B2 carries a drive-side loop's feed-forward; in effort mode
    (cyclic synchronous torque) the target is the effort already: one line naming the key and the modes."""
    message = refused_driver(tmp_path, 'backend = "ethercat"\nethercat_interface = "ecmaster"\n'
                                       'vendor_id = 0x0F3E\nproduct_code = 0x0402\ntorque_offset = true',
                             controller='type = "computed_torque"\nkp = 400.0')
    assert "torque_offset = true is for mode = 'position' or 'velocity'" in message, message
