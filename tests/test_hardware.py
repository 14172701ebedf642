"""A loop that owns several drivers (ros2_control's ResourceManager), and the controller lifecycle.

The demo arm split over two sim drivers runs exactly as over one; a fault or an exception in either puts
both in the safe state; joints driven twice or not at all are refused naming them; the controller is
activated before the first cycle and again on a re-arm."""
import copy
import tomllib

import numpy as np
import pytest

from rtctl.config import ConfigError, DEMO_CONFIG, build, validate
from rtctl.safety import SafetyError

ARM = [f"joint{k}" for k in range(1, 8)]


def demo(**sections):
    raw = tomllib.loads(DEMO_CONFIG.read_text())
    raw["driver"]["encoder_counts"] = 0
    raw["driver"]["velocity_noise"] = 0.0
    raw["loop"]["pace"] = False
    raw.update(sections)
    return raw


def split(raw, first=4):
    """The same config with its [driver] split into two [[drivers]] over the first and last joints."""
    raw = copy.deepcopy(raw)
    one = raw.pop("driver")
    raw["drivers"] = [dict(one, joints=ARM[:first]), dict(one, joints=ARM[first:])]
    return raw


def run(raw, cycles=1500):
    loop = build(validate(raw, "hw.toml"))
    report = loop.run(cycles=cycles)
    return loop, report


@pytest.mark.slow
def test_two_sim_drivers_over_half_the_arm_each_run_exactly_as_one():
    one, r1 = run(demo())
    two, r2 = run(split(demo()))
    assert len(two.drivers) == 2 and [d.joint_names for d in two.drivers] == [ARM[:4], ARM[4:]]
    np.testing.assert_array_equal(two.drivers[0].plant.q, one.driver.plant.q)
    np.testing.assert_array_equal(r2.tracking_max, r1.tracking_max)
    assert not r2.tripped and r2.driver_health["writes"] == 2 * r1.driver_health["writes"]


@pytest.mark.slow
def test_a_fault_in_one_driver_puts_every_driver_in_the_safe_state():
    loop = build(validate(split(demo()), "hw.toml"))
    loop.run(cycles=600)
    loop.drivers[1].health.set_fault("bus off (test)")
    report = loop.run(cycles=200)
    assert report.tripped and "bus off (test)" in report.trip_reason and "driver[sim]" in report.trip_reason
    damping = -loop.safety.damping_gain * loop.state.v          # the safe command: -D v on every joint
    np.testing.assert_allclose(loop.command.effort, damping, rtol=1e-12)
    assert np.abs(damping).min() > 0
    # both drivers put it on their joints of the plant (gear and rotor model: joint effort in, joint effort out)
    np.testing.assert_allclose(loop.drivers[0].plant.applied_effort, loop.command.effort, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_an_exception_in_one_driver_stops_it_and_the_other_keeps_the_safe_command():
    loop = build(validate(split(demo()), "hw.toml"))
    loop.run(cycles=600)
    broken, healthy = loop.drivers[1], loop.drivers[0]

    def read(state, now):
        raise OSError("serial port vanished")

    broken.read = read
    writes = healthy.health.writes
    report = loop.run(cycles=300)
    assert report.tripped and "serial port vanished" in report.trip_reason
    assert loop.hardware.ok == [True, False]
    assert healthy.health.writes == writes + 300           # still commanded: the safe command
    assert not loop.drivers[0].plant.applied_effort[4:].any()  # the failed driver's joints: torque off
    with pytest.raises(SafetyError, match="a driver failed"):
        loop.rearm(loop.safety.estop_count)


@pytest.mark.parametrize("joints,match", [
    ((ARM[:4], ARM[3:]), r"joint 'joint4' is driven by both"),
    ((ARM[:4], ARM[4:6]), r"no driver drives the actuated joints \['joint7'\]"),
    ((ARM[:4], ARM[4:] + ["wrist"]), r"joints: unknown or unactuated joints \['wrist'\]"),
])
def test_joints_driven_twice_or_not_at_all_are_refused_naming_them(joints, match):
    raw = split(demo())
    raw["drivers"][0]["joints"], raw["drivers"][1]["joints"] = list(joints[0]), list(joints[1])
    with pytest.raises(ConfigError, match=match):
        build(validate(raw, "hw.toml"))


def test_one_driver_and_several_drivers_are_exclusive():
    raw = split(demo())
    raw["driver"] = {"backend": "sim"}
    with pytest.raises(ConfigError, match=r"either one \[driver\] or several \[\[drivers\]\]"):
        validate(raw, "hw.toml")


@pytest.mark.slow
def test_the_controller_is_activated_before_the_first_cycle_and_on_each_rearm():
    loop = build(validate(demo(), "hw.toml"))
    calls = []
    loop.controller.on_activate = lambda: calls.append(("activate", loop.cycle))
    loop.controller.on_deactivate = lambda: calls.append(("deactivate", loop.cycle))
    loop.run(cycles=100)
    loop.run(cycles=100)
    assert calls == [("activate", 0)]
    loop.safety.estop("test", operator=True)
    count = loop.safety.estop_count
    loop.run(cycles=50)
    loop.boundary_hooks.append(lambda lp: lp.rearm(count) if lp.safety.tripped else None)
    loop.run(cycles=10)
    assert calls == [("activate", 0), ("deactivate", 250), ("activate", 250)]
