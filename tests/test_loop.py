"""The control loop closed on the simulated plant, through the same config path as ``rtctl run``.

Tracking: computed torque with the exact model keeps the 7-DOF arm within
1e-3 rad of a minimum-jerk move; feed-forward + PD with a 10 % mass error
stays within 0.02 rad; PD alone is at least 10x worse than computed torque.
Safety: each fault ends in the latched safe state at the stated cycle, and
re-arming resumes control. Overrun policies count, skip and trip as
configured. A failing component moves the system to the safe state. After
warm-up a cycle allocates nothing (tracemalloc).
"""
import copy
import importlib
import os
import time
import tracemalloc

import numpy as np
import pytest

from rtctl.loops.trajectories import create_trajectory
from rtctl.config import ConfigError, build, validate
from rtctl.rt.loop import LoopReport

GOAL = [0.6, 0.5, -0.4, -1.0, 0.5, 0.6, 0.3]
BASE = {
    "robot": {"model": "arm7"},
    "plant": {"initial_position": [0.0] * 7},
    # A geared arm: 100:1 reductions and 5e-6 kg m^2 rotors reflect 0.05 kg m^2 onto every joint,
    # which is what keeps torque-gain PD loops (FF+PD, PD) stable on the light wrist at 1 kHz.
    "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
    "controller": {"type": "computed_torque", "kp": 400.0},
    "trajectory": {"type": "min_jerk", "goal": GOAL, "duration": 1.5, "t0": 0.1},
    "loop": {"rate_hz": 1000.0, "duration": 2.0, "pace": False},
    "safety": {"safe_mode": "damping"},  # the latched command these tests check; the hold: test_safe_stop.py
}


def make_loop(overrides=None, hooks=()):
    raw = copy.deepcopy(BASE)
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    loop = build(validate(raw))
    loop.hooks.extend(hooks)
    return loop


def run(overrides=None, hooks=(), duration=2.0):
    loop = make_loop(overrides, hooks)
    return loop, loop.run(duration=duration)


# -- tracking ----------------------------------------------------------------------------------------


def test_computed_torque_with_the_exact_model_tracks_within_1e_3_rad():
    _, report = run()
    assert not report.tripped, report.trip_reason
    assert report.tracking_max.max() < 1e-3
    assert report.cycles == 2000


def test_feedforward_pd_with_10_percent_mass_error_stays_bounded():
    _, report = run({"controller": {"type": "ff_pd", "kp": 400.0}, "plant": {"mass_scale": 1.1}})
    assert not report.tripped, report.trip_reason
    assert report.tracking_max.max() < 0.02


@pytest.mark.slow
def test_pd_alone_is_measurably_worse_than_computed_torque():
    _, ct = run()
    _, pd = run({"controller": {"type": "pd", "kp": 400.0}})
    assert pd.tracking_max.max() > 10 * ct.tracking_max.max()


def test_computed_torque_tolerates_sensor_imperfections():
    _, report = run({"driver": {"encoder_counts": 131072, "velocity_noise": 1e-3, "latency_cycles": 1},
                     "plant": {"viscous_friction": 0.05}})
    assert not report.tripped, report.trip_reason
    assert report.tracking_max.max() < 5e-3


# -- safety in the loop --------------------------------------------------------------------------------


def at_cycle(k, action):
    def hook(cycle, t, state, command):
        if cycle == k:
            action(state, command)
    return hook


def after_cycle(k, action):
    def hook(cycle, t, state, command):
        if cycle >= k:
            action(state, command)
    return hook


def assert_latched_safe(loop, loop_cycle):
    """Tripped in the given loop cycle, and every command since was the damping command -D v.

    (Damping mode does not hold a gravity-loaded arm: it sags slowly, as on a real robot.)
    """
    assert loop.safety.tripped
    assert loop.safety.trip_cycle == loop_cycle
    expected = -loop.safety.damping_gain * loop.state.v
    limit = loop.model.effort_limit
    assert np.allclose(loop.command.effort, np.clip(expected, -limit, limit), rtol=1e-12, atol=1e-12)


def test_nan_command_trips_on_the_same_cycle_and_latches():
    loop, report = run(hooks=[at_cycle(500, lambda s, c: c.effort.__setitem__(2, np.nan))])
    assert report.tripped and "joint3" in report.trip_reason
    assert_latched_safe(loop, 500)


def test_velocity_breach_trips_on_the_next_read():
    loop = make_loop()
    plant = loop.driver.plant
    loop.hooks.append(at_cycle(300, lambda s, c: plant.v.__setitem__(3, 5.0)))  # > 2.27 rad/s limit of joint4
    report = loop.run(duration=2.0)
    assert "joint4" in report.trip_reason
    assert_latched_safe(loop, 301)  # set after cycle 300's read; seen by cycle 301's


def test_stale_state_trips_after_the_watchdog():
    loop, report = run({"safety": {"watchdog_cycles": 5}},
                       hooks=[after_cycle(400, lambda s, c: setattr(s, "fresh", False))])
    assert report.tripped and "stale" in report.trip_reason
    assert loop.safety.trip_cycle == 405  # the 6th stale cycle in a row exceeds the watchdog of 5


def test_estop_trips_and_rearm_resumes_tracking():
    """After the e-stop the arm is damped to rest; after re-arming, a move re-planned from where
    it stopped (as an operator would) brings it to the goal."""
    loop = make_loop(hooks=[at_cycle(100, lambda s, c: loop.safety.estop("operator pressed e-stop"))])
    loop.run(cycles=600)
    assert_latched_safe(loop, 100)
    assert "operator pressed e-stop" in loop.safety.trip_reason
    loop.safety.rearm()
    here = loop.state.q.copy()
    loop.trajectory = create_trajectory("min_jerk", start=here, goal=GOAL, duration=1.5, t0=loop.cycle * 1e-3)
    loop.run(cycles=2000)
    assert not loop.safety.tripped, loop.safety.trip_reason
    assert np.abs(loop.driver.plant.q - GOAL).max() < 1e-3


def test_failing_controller_moves_the_system_to_the_safe_state():
    loop = make_loop()
    original = loop.controller.update

    def flaky(t, dt, q, v, q_d, qd_d, qdd_d, effort):
        if loop.cycle == 250:
            raise RuntimeError("solver diverged")
        original(t, dt, q, v, q_d, qd_d, qdd_d, effort)

    loop.controller.update = flaky
    report = loop.run(duration=1.0)
    assert report.tripped and "solver diverged" in report.trip_reason
    assert loop.safety.trip_cycle == 250
    assert any("solver diverged" in f for f in report.failures)
    assert report.cycles == 1000


# -- overruns --------------------------------------------------------------------------------------------


def slow_between(loop, first, last, seconds):
    original = loop.controller.update

    def slow(*args):
        if first <= loop.cycle < last:
            t_end = time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                pass
        original(*args)

    loop.controller.update = slow


@pytest.mark.parametrize("policy", ["count", "skip", "trip"])
@pytest.mark.slow
def test_overrun_policies(policy):
    loop = make_loop({"loop": {"pace": True, "overrun_policy": policy, "max_consecutive_overruns": 5}})
    slow_between(loop, 50, 60, 2.5e-3)
    report = loop.run(cycles=200)
    assert report.overruns >= 10
    if policy == "count":
        assert not report.tripped and report.skipped_cycles == 0
    elif policy == "skip":
        assert not report.tripped and report.skipped_cycles >= 10
    else:
        assert report.tripped and "consecutive overruns" in report.trip_reason
        assert 54 <= loop.safety.trip_cycle <= 60  # after the 5th consecutive overrun of cycles 50..59


def test_paced_loop_keeps_the_period_on_average():
    """Absolute deadlines: the mean wake-up period equals the configured period (no drift)."""
    loop = make_loop({"loop": {"pace": True}})
    report = loop.run(cycles=500)
    assert report.timing["period"]["mean"] == pytest.approx(1000.0, rel=0.02)


# -- allocation ----------------------------------------------------------------------------------------


def test_a_cycle_allocates_nothing_after_warm_up():
    loop = make_loop({"driver": {"velocity_noise": 1e-3, "encoder_counts": 4096}})
    for k in range(300):
        loop.step(k * 1e-3)
    tracemalloc.start()
    for k in range(300, 400):
        loop.step(k * 1e-3)
    before = tracemalloc.take_snapshot()
    for k in range(400, 800):
        loop.step(k * 1e-3)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    # Our packages by where they are, not by folder names (a clone in a folder named rtctl must not count
    # the tests' own lines).
    packages = [importlib.import_module(f"rtctl{sub}") for sub in ("", ".drivers", ".loops", ".plants")]
    ours = [tracemalloc.Filter(True, os.path.join(os.path.dirname(p.__file__), "*")) for p in packages]
    growth = [d for d in after.filter_traces(ours).compare_to(before.filter_traces(ours), "lineno")
              if d.size_diff > 0]
    assert not growth, "\n".join(str(d) for d in growth[:10])


# -- configuration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw,match", [
    ({"loop": {"rate_hz": -5}}, r"\[loop\] rate_hz: must be > 0"),
    ({"loop": {"rat_hz": 500}}, r"\[loop\] unknown key 'rat_hz'"),
    ({"controler": {}}, r"unknown section \[controler\]"),
    ({"controller": {"type": "lqr"}}, r"\[controller\] type: unknown controller 'lqr'.*computed_torque"),
    ({"controller": {"kp": [1, "x"]}}, r"\[controller\] kp\[1\]: expected a number"),
    ({"trajectory": {"type": "sinusoid", "goal": [1.0]}}, r"\[trajectory\] unknown key 'goal' for trajectory 'sinusoid'"),
    ({"safety": {"watchdog_cycles": 0}}, r"\[safety\] watchdog_cycles: must be >= 1"),
    ({"loop": {"pace": "yes"}}, r"\[loop\] pace: expected true or false"),
])
def test_bad_configs_name_the_key(raw, match):
    with pytest.raises(ConfigError, match=match):
        validate(raw, "run.toml")


def test_config_errors_from_components_name_the_section():
    with pytest.raises(ConfigError, match=r"\[trajectory\] goal must have 7 values, one per actuated joint "
                                          r"\(joint1, .*, joint7\), got 3"):
        make_loop({"trajectory": {"goal": [0.1, 0.2, 0.3]}})
    with pytest.raises(ConfigError, match=r"\[robot\] model"):
        make_loop({"robot": {"model": "no_such_robot"}})
    with pytest.raises(ConfigError, match=r"\[plant\] initial_position"):
        make_loop({"plant": {"initial_position": [0.0, 0.0]}})


def test_torque_level_controllers_require_explicit_gains():
    raw = copy.deepcopy(BASE)
    raw["controller"] = {"type": "pd"}
    with pytest.raises(ConfigError, match=r"\[controller\] kp is required for type 'pd'"):
        build(validate(raw))


def test_hardware_is_activated_after_the_process_is_prepared():
    """A full garbage collection next to live hardware stalls the master (a CANopen drive then sees
    its heartbeat consumer time out): run() collects and freezes first, then activates the driver,
    and does not collect again when the driver is already active."""
    import gc

    loop = make_loop()
    seen = {}
    original = loop.driver.on_activate

    def on_activate():
        seen["gc_enabled_at_activation"] = gc.isenabled()
        original()

    loop.driver.on_activate = on_activate
    full_collections = []   # the interpreter's own young collections may come before run() disables it
    gc.callbacks.append(lambda phase, info: full_collections.append(info) if phase == "start"
                        and info["generation"] == 2 else None)
    try:
        loop.run(cycles=10)
        assert seen["gc_enabled_at_activation"] is False
        assert full_collections
        loop.driver.configure()
        loop.driver.activate()
        full_collections.clear()
        loop.run(cycles=10)
        assert full_collections == []
    finally:
        gc.callbacks.pop()


@pytest.mark.parametrize("pace", [False, True])
@pytest.mark.slow
def test_request_stop_ends_the_run_after_the_cycle_in_progress_and_only_that_run(pace):
    def stop_at_cycle_40(cycle, t, state, command):
        if cycle == 40:
            loop.request_stop()

    loop = make_loop({"loop": {"pace": pace}}, hooks=(stop_at_cycle_40,))
    report = loop.run(cycles=100)
    assert report.cycles == 41 and loop.cycle == 41 and not report.tripped
    loop.run(cycles=100)                        # the request does not outlive the run it ended
    assert loop.cycle == 141


def test_a_run_with_more_than_one_percent_overruns_says_so_loudly():
    def report(overruns):
        return LoopReport(cycles=1000, duration=1.0, rate_hz=1000.0, tracked_names=["j"], tracking_rms=np.zeros(1),
                          tracking_max=np.zeros(1), timing={"compute": dict(min=100.0, mean=300.0, p50=280.0, p99=950.0, max=1500.0)}, overruns=overruns,
                          skipped_cycles=0, tripped=False, trip_reason="")
    assert report(10).overrun_warning() == "" and "WARNING" not in report(10).format()
    warning = report(11).overrun_warning()
    assert warning.startswith("WARNING: 11 of 1000 cycles (1.1 %) overran their 1 ms period")
    assert "compute p99 950 us" in warning and warning in report(11).format()
