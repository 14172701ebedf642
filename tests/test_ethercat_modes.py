"""The drives' own loops over EtherCAT: cyclic synchronous velocity (0x6060 = 9, CiA 402-2 6.4; target velocity
0x60FF in increments/s of the motor shaft) tracking, the controller's feed-forward as the torque offset 0x60B2
(CiA 402-2 6.4), and the safe state of both drive-side modes. A tripped
loop's safe command sets every stiffness to 0: a drive in cyclic synchronous position or velocity must then hold
where its joint was, not follow the set points the controller keeps writing (the trajectory that tripped it).
The line: the CAN emulator's drives over can_arm2, geared 10:1, two slaves in a network namespace the test
makes (tests/ethercat_line.py)."""
from __future__ import annotations

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.hil.ethercat import netns

from ethercat_line import (ARM, Q0, STALL_TOLERANT, build_inside, emulated_line, run_closed, run_config,
                           run_inside)
from machine import skip_if_peer_starved, skip_if_starved

pytest.importorskip("pysoem")
pytestmark = pytest.mark.slow
WHY_NOT = netns.unavailable()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

KP, KD = [40.0, 20.0], [2.0, 1.0]            # N m/rad, N m s/rad: kp / kd = 20 1/s, the velocity loop's outer gain


def drive_loop_config(mode: str) -> dict:
    raw = run_config("can_arm2", Q0, [0.3, 0.3], [0.5, 0.7], mode=mode, max_failed_cycles=STALL_TOLERANT,
                     watchdog=1.0)
    raw["controller"] = {"type": "joint_position", "kp": KP, "kd": KD, "feedforward": "none"}
    raw["safety"] = {"watchdog_cycles": STALL_TOLERANT}
    return raw


def test_cyclic_synchronous_velocity_follows_the_trajectory():
    """``mode = "velocity"``: each drive closes its velocity loop on v* = qd_d + (kp / kd)(q_d - q), which the
    driver sends as 0x60FF every frame; 2 s of the sinusoids track within the CAN suite's 0.15 rad, the drives
    in mode 9."""
    with emulated_line(*ARM) as (ns, _proc, stop):
        loop, report = run_closed(ns, drive_loop_config("velocity"), 2.0)
        stats = stop()
    if report.tripped or np.any(report.tracking_max >= 0.15):
        skip_if_starved(report, "CSV tracking over EtherCAT")
        skip_if_peer_starved(loop.driver.health, 0, "CSV tracking over EtherCAT")
    assert not report.tripped and np.all(report.tracking_max < 0.15), report.format()
    assert [s["mode"] for s in stats["slaves"]] == [9, 9]


def test_the_feed_forward_reaches_the_drives_as_their_torque_offset():
    """``torque_offset = true`` in velocity mode under ``feedforward = "inverse_dynamics"``: the driver maps
    0x60B2 and sends each cycle's feed-forward ID(q_d, qd_d, qdd_d) through the gear in per mille of the rated
    torque; the largest offset each emulated drive received is the model's largest along the trajectory (rtctl's
    inverse dynamics, computed here from the sampled trajectory), to the offset's resolution, and the arm tracks
    as without it. Without the option the drives get none."""
    runs = {}
    for offset in (False, True):
        raw = drive_loop_config("velocity")
        raw["controller"]["feedforward"] = "inverse_dynamics"
        raw["driver"]["torque_offset"] = offset
        with emulated_line(*ARM) as (ns, _proc, stop):
            loop, report = run_closed(ns, raw, 2.0)
            runs[offset] = loop, report, [s["torque_offset_peak"] for s in stop()["slaves"]]
    loop, report, peaks = runs[True]
    if report.tripped or np.any(report.tracking_max >= 0.15):
        skip_if_starved(report, "CSV with a torque offset over EtherCAT")
        skip_if_peer_starved(loop.driver.health, 0, "CSV with a torque offset over EtherCAT")
    assert not report.tripped and np.all(report.tracking_max < 0.15), report.format()
    assert runs[False][2] == [0, 0]
    dyn, q, qd, qdd = Dynamics(loop.model), np.zeros(2), np.zeros(2), np.zeros(2)
    expected = np.zeros(2)
    for t in np.arange(0.0, 2.0, 1e-3):
        loop.trajectory.sample(t, q, qd, qdd)
        expected = np.maximum(expected, np.abs(dyn.inverse_dynamics(q, qd, qdd)))
    expected_permille = expected / 10.0 / 1.0 * 1000.0          # through the 10:1 gear, of the 1 N m rated torque
    print(f"\ntorque offset peaks {peaks} per mille, the model's {np.round(expected_permille, 1)}")
    np.testing.assert_allclose(peaks, expected_permille, atol=1.0)


def e_stopped_run(mode: str):
    """``mode``'s loop e-stopped at 0.8 s, the joints moving at up to 1.3 rad/s, run to 2 s; (loop, trace of
    (t, q, v, measured effort))."""
    with emulated_line(*ARM) as (ns, _proc, stop):
        loop = build_inside(ns, drive_loop_config(mode))
        trace = []

        def hook(cycle, t, state, command):
            if cycle == 800:
                loop.safety.estop("test e-stop", operator=True)
            trace.append((t, state.q.copy(), state.v.copy(), state.effort.copy()))
        loop.hooks.append(hook)
        try:
            report = run_inside(ns, loop, 2.0)
        finally:
            loop.driver.close()
        stats = stop()
    if "e-stop" not in report.trip_reason or loop.driver.health.fault:
        skip_if_starved(report, f"the e-stop in {mode} mode over EtherCAT")
        skip_if_peer_starved(loop.driver.health, 0, f"the e-stop in {mode} mode over EtherCAT")
    assert report.tripped and "e-stop" in report.trip_reason and not loop.driver.health.fault, report.format()
    assert all(s["drive_state"] == "SWITCH ON DISABLED" for s in stats["slaves"]), stats
    return loop, trace


QUICK_STOP_DECELERATION = 2 * np.pi * 50 / 10    # the emulated drives' 0x6085, 50 rev/s^2 at the motor: rad/s^2


@pytest.mark.parametrize("mode", ["position", "velocity"])
def test_a_tripped_loop_stops_the_drives_on_their_ramp_and_holds(mode):
    """The e-stop at speed: the controller still writes the trajectory's set points, the safe command sets their
    stiffness to 0, and each drive is sent to rest on its quick stop deceleration 0x6085 (31.4 rad/s^2 at the
    joint through the 10:1 gear) from the position and velocity of the trip: it stops at v |v| / (2 a) on, not
    turning back, and stays there for the last 0.8 s, while the trajectory it no longer follows sweeps 0.3 rad
    about Q0. The drives' torque then balances gravity, steadily (a drive loop too stiff for its load chatters
    between its limits instead: +-30 N m in alternate frames, before the drives' loops were tuned to their
    load)."""
    loop, trace = e_stopped_run(mode)
    t = np.array([x[0] for x in trace])
    q = np.array([x[1] for x in trace])
    v = np.array([x[2] for x in trace])
    effort = np.array([x[3] for x in trace])
    at = loop.safety.trip_cycle
    assert np.abs(v[at]).max() > 0.3, v[at]                              # moving when stopped
    model = loop.model
    assert np.all(q >= model.lower) and np.all(q <= model.upper)
    late = t >= t[-1] - 0.8
    stop = q[at] + v[at] * np.abs(v[at]) / (2 * QUICK_STOP_DECELERATION)
    held = q[late].mean(0)
    print(f"\n{mode}: at the trip q = {np.round(q[at], 4)}, v = {np.round(v[at], 3)} rad/s; held at "
          f"{np.round(held, 4)} (the ramp's stop {np.round(stop, 4)}), ptp {np.round(np.ptp(q[late], axis=0), 5)} rad")
    # within what two cycles of latency at the trip's speed move (2 ms x 1.3 rad/s) and the loops' lag
    assert np.abs(held - stop).max() < 0.01, (held, stop)
    past = np.sign(v[at]) * (q[at:] - stop)                              # beyond the stop point, along the motion
    assert past.max() < 0.01, past.max(0)
    assert np.all(np.ptp(q[late], axis=0) < 0.005), np.ptp(q[late], axis=0)
    gravity = Dynamics(model).gravity_forces(held)
    resolution = 10 * 1e-3                # a thousandth of the 1 N m rated torque, through the 10:1 gear
    print(f"torque held {np.round(effort[late].mean(0), 3)} N m (gravity {np.round(gravity, 3)}), ptp "
          f"{np.round(np.ptp(effort[late], axis=0), 3)}")
    assert np.all(np.abs(effort[late] - gravity) < 2 * resolution + 0.02 * np.abs(gravity)), \
        np.abs(effort[late] - gravity).max(0)
