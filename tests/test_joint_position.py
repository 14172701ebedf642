"""The joint-position controller and position-mode drives, end to end (issue: a position-mode driver under an
effort controller ran effort control without a word).

* At rest, a drive's PD ``K (q_d - q) + D (0 - v)`` plus the feed-forward effort balances gravity exactly:
  without feed-forward the arm sags to where ``K (q_d - q) = g(q)``; with gravity compensation it holds
  ``q_d`` (Siciliano et al. 2009, section 8.5.2).
* A position-mode driver under a controller that writes only effort, or the reverse, is refused when the config
  is built, naming the driver.
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
])
def test_a_drive_mode_the_controller_does_not_feed_is_refused(tmp_path, controller, mode, expected):
    with pytest.raises(ConfigError) as err:
        build(load_config(config(tmp_path, controller, mode)))
    message = str(err.value)
    assert expected in message and "[driver]" in message and "\n" not in message, message
