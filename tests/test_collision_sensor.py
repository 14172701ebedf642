"""Collision detection with a force-torque sensor beside the momentum observer (loops/collision.py with
``wrench_sensor``, loops/collision_sensor.py, loops/agreement.py), on arm7 held at rest by computed torque with a
sim_force_torque sensor at its tool, built from a run config.

* Agreement: under a known wrench at the tool, once at rest, the measured joint torques ``J_s^T w`` are the applied
  ``J^T F`` within 4 standard errors of the sensor's noise mapped to the joints; the observer's residual is the
  applied torque; the measurement through the observer's lag differs from the residual by noise of the size the
  lag leaves of it (``sigma sqrt((1 - a) / 2)``, ``a = exp(-K_O dt)``), and by less than 0.5 N m on the way
  there (the inertia the sensor carries, accelerated by the step, is what it reads less).
* Detection: a 20 N contact at the tool is detected on the measured torque in the cycle it starts and on the
  observer's residual within 10 cycles (a monitor without the sensor); a contact on link 3, between the base and
  the sensor, is the observer's to see (the sensor reads only its noise and the inertia of its load, under a
  quarter of the residual that trips).
* Faults: a sensor that reads zero while a wrench acts (a cut cable: a test backend) and one with an offset
  (``force_bias``) latch the safe state after ``disagreement_time``, with one line saying which is plausible; the
  offset tared at the start (``tare_on_start``) is no fault.
* Bad ``[collision]`` values are one line naming the file, the section and the key.
* Real time: the monitor with its sensor keeps nothing from cycle to cycle; the compiled comparison and the joint
  torques allocate nothing.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rtctl.config import build, validate
from rtctl.drivers.sim_force_torque import SimForceTorque
from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import point_jacobian
from rtctl.options import ConfigError
from rtctl.registry import SENSORS

Q0 = [0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2]
K_O, DT = 50.0, 1e-3
NOISE = {"force_noise": 0.02, "torque_noise": 0.001}
FORCE = np.array([0.0, 0.0, 0.0, 2.0, 4.0, -3.0])          # [n; f] at the tool frame's origin, world axes
CONTACT = np.array([0.0, 0.0, 0.0, 12.0, -16.0, 0.0])      # 20 N
SOURCE = "arm_ft.toml"


def arm(collision=None, sensor=None, backend="sim_force_torque", others=()):
    """arm7 held at Q0 by computed torque, the wrist sensor at its tool (``sensor``: its keys to change, False for
    none) and ``others``, the collision monitor on it (``collision``: its keys, None removes one)."""
    raw = {"robot": {"model": "arm7"},
           "plant": {"initial_position": Q0, "viscous_friction": 0.0, "coulomb_friction": 0.0},
           "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
           "controller": {"type": "computed_torque", "kp": 400.0},
           "trajectory": {"type": "min_jerk", "goal": Q0, "duration": 0.1},
           "loop": {"rate_hz": 1000.0, "pace": False},
           "collision": {"enabled": True, "gain": K_O, "threshold": 1.0, "wrench_sensor": "wrist",
                         **(collision or {})}}
    if sensor is not False:
        raw["sensors"] = [{"backend": backend, "name": "wrist", "kind": "force_torque", "frame": "tool", **NOISE,
                           **(sensor or {})}, *others]
    raw["collision"] = {k: v for k, v in raw["collision"].items() if v is not None}
    return build(validate(raw, SOURCE))


def push(loop, frame, wrench, t_on):
    """``wrench`` at ``frame`` from control time ``t_on`` on."""
    plant = loop.drivers[0].plant
    loop.boundary_hooks.append(lambda lp: plant.set_external_wrench(frame, wrench)
                               if lp.cycle == round(t_on / lp.period) else None)


def sensor_jacobian(loop):
    """J_s (6 x nv) of the sensor's origin at the loop's present q."""
    sensor, dyn = loop.sensors[0], Dynamics(loop.model)
    dyn.forward_kinematics(loop.state.q)
    jac = np.zeros((6, loop.model.nv))
    point_jacobian(dyn.mi, dyn.ws, sensor.body, *sensor.translation, jac)
    return jac


def joint_noise(jac):
    """The standard deviation per joint of J_s^T w for the sensor's noise (isotropic per part: any axes)."""
    return np.sqrt(NOISE["torque_noise"] ** 2 * (jac[:3] ** 2).sum(axis=0)
                   + NOISE["force_noise"] ** 2 * (jac[3:] ** 2).sum(axis=0))


def record(loop):
    """Per cycle: the residual, the measured joint torque and their lagged difference."""
    mon, rows = loop.collision, []
    loop.hooks.append(lambda c, t, s, cmd: rows.append(np.concatenate(
        [mon.observer.joint_residual, mon.comparison.joint_torque, mon.comparison.agreement.difference])))
    return rows


@pytest.mark.slow
def test_observer_and_sensor_agree_within_the_observers_lag_and_the_sensors_noise():
    loop = arm({"threshold": 5.0, "disagreement_tolerance": 0.5})   # the wrench is no collision
    mon = loop.collision
    n = len(mon.joint_names)
    push(loop, "tool", FORCE, 0.2)
    rows = record(loop)
    loop.run(duration=1.5)     # the step at 0.2 s, at rest (joint speeds below 1e-4 rad/s) well before 0.7 s
    assert not loop.safety.tripped, loop.safety.trip_reason   # no fault on the way: |d| <= 0.5 N m
    rows = np.array(rows)
    r, m, d = rows[:, :n], rows[:, n:2 * n], rows[:, 2 * n:]
    assert np.abs(loop.state.v).max() < 1e-4
    plant, body = loop.drivers[0].plant, loop.sensors[0].body
    applied = plant.dynamics.jacobian(plant.q, body).T @ plant.external_wrenches()[body]   # about the body origin
    jac = sensor_jacobian(loop)
    sigma = joint_noise(jac)
    rest = slice(700, None)
    count = len(m[rest])
    a = math.exp(-K_O * DT)
    lagged_sigma = sigma * math.sqrt((1 - a) / 2)
    print("applied", np.round(applied, 4), "\nnoise per joint", np.round(sigma, 4),
          "\nmean measured - applied", np.round(m[rest].mean(axis=0) - applied, 5),
          "\nresidual - applied", np.round(r[-1] - applied, 6),
          "\nstd of the lagged difference / its prediction", np.round(d[rest].std(axis=0) / lagged_sigma, 3),
          "\nlargest |d| over the step (N m)", np.round(np.abs(d[200:700]).max(axis=0), 3))
    assert np.all(np.abs(m[rest].mean(axis=0) - applied) <= 4 * sigma / math.sqrt(count))
    assert np.all(np.abs(r[rest] - applied) <= 1e-3 * np.abs(applied).max())
    assert np.all(np.abs(d[rest].mean(axis=0)) <= 4 * sigma / math.sqrt(count) + 1e-3 * np.abs(applied).max())
    ratio = d[rest].std(axis=0) / lagged_sigma
    assert np.all((ratio > 0.5) & (ratio < 1.5)), ratio   # about 20 independent windows of 1 / K_O: +-25 %
    assert np.all(np.abs(d[rest] - d[rest].mean(axis=0)) <= 5 * lagged_sigma)
    names, units = mon.telemetry_fields, mon.telemetry_units
    assert len(units) == len(names) == len(mon.telemetry_values)
    k = names.index("measured_torque/joint2")
    assert units[k] == "N m" and mon.telemetry_values[k] == mon.comparison.joint_torque[1]
    k = names.index("torque_disagreement/joint2")
    assert units[k] == "N m" and mon.telemetry_values[k] == mon.comparison.agreement.difference[1]
    assert units[names.index("sensor_disagrees")] == "1"


@pytest.mark.slow
def test_a_contact_beyond_the_sensor_is_detected_by_both_and_one_before_it_only_by_the_observer():
    on = 300
    loop = arm()
    push(loop, "tool", CONTACT, on * DT)
    loop.run(duration=0.4)
    mon = loop.collision
    assert mon.detection["source"] == "sensor 'wrist'" and mon.detection_cycle - on <= 1
    assert "measured by sensor 'wrist'" in loop.safety.trip_reason and "\n" not in loop.safety.trip_reason
    assert loop.late_kernels == []

    alone = arm({"wrench_sensor": None}, sensor=False)
    push(alone, "tool", CONTACT, on * DT)
    alone.run(duration=0.4)
    observed = alone.collision
    assert observed.detection["source"] == "observer" and 1 < observed.detection_cycle - on <= 10
    print(f"contact at the tool detected {mon.detection_cycle - on} cycles after it starts on the sensor, "
          f"{observed.detection_cycle - on} on the observer")

    below = arm()
    push(below, "link3", CONTACT, on * DT)
    rows = record(below)
    below.run(duration=0.4)
    n, detected = len(below.collision.joint_names), below.collision.detection_cycle
    measured = np.array(rows)[1:detected + 1, n:2 * n]        # from the comparison's start to the detection
    assert below.collision.detection["source"] == "observer" and 1 < detected - on <= 100   # within 5 / K_O
    print(f"contact on link3 (smaller torques: a lever of at most 0.4 m) detected {detected - on} cycles after it "
          "starts, by the observer")
    print(f"  the sensor's largest measured torque meanwhile: {np.abs(measured).max():.3f} N m (the inertia it "
          "carries, accelerated by the push)")
    assert np.abs(measured).max() < 0.25 * abs(below.collision.detection["residual"])   # none of the contact


class CutCable(SimForceTorque):
    """A force-torque sensor whose transducer's signals are lost: it streams its noise and nothing else."""

    def receive(self, reading, now):
        fresh = super().receive(reading, now)
        reading.wrench -= self._truth
        return fresh


@pytest.fixture
def cut_cable():
    SENSORS.register("cut_cable_test")(CutCable)
    yield "cut_cable_test"
    SENSORS.classes.pop("cut_cable_test", None)


@pytest.mark.slow
def test_a_sensor_that_reads_nothing_while_a_wrench_acts_is_a_fault_naming_a_broken_sensor(cut_cable):
    """It does not even read the weight of what it carries: less that weight, the measured torque pulls the other
    way (5.5 N m on joint 2; the threshold is above it, so it is the disagreement that trips)."""
    tolerance, duration = 0.5, 0.05
    loop = arm({"threshold": 8.0, "disagreement_tolerance": tolerance, "disagreement_time": duration},
               backend=cut_cable)
    push(loop, "tool", FORCE, 0.0)
    rows = record(loop)
    loop.run(duration=0.3)
    mon = loop.collision
    n = len(mon.joint_names)
    d = np.array(rows)[:, 2 * n:]
    first = int(np.argmax(np.any(np.abs(d) > tolerance, axis=1)))    # the first cycle beyond the tolerance
    reason = loop.safety.trip_reason
    print(reason)
    assert loop.safety.tripped and mon.disagreements == 1 and mon.detections == 0
    assert loop.safety.trip_cycle == first + round(duration / DT)      # for longer than 0.05 s: 51 cycles
    assert "sensor 'wrist' and the observer disagree on joint" in reason and "broken or disconnected" in reason
    assert "\n" not in reason
    assert mon.telemetry_values[mon.telemetry_fields.index("sensor_disagrees")] == 1.0


@pytest.mark.slow
def test_an_offset_is_a_fault_naming_a_bias_and_a_tare_at_the_start_removes_it():
    bias = {"force_bias": [0.0, 0.0, 6.0]}
    loop = arm({"threshold": 10.0, "disagreement_tolerance": 0.5}, sensor=bias)
    loop.run(duration=0.3)
    reason = loop.safety.trip_reason
    assert loop.collision.disagreements == 1 and "sensor bias or drift is plausible (tare it)" in reason
    tared = arm({"threshold": 10.0, "disagreement_tolerance": 0.5, "tare_on_start": True}, sensor=bias)
    tared.run(duration=0.3)
    assert not tared.safety.tripped, tared.safety.trip_reason
    comparison = tared.collision.comparison
    jac = sensor_jacobian(tared)
    assert np.all(np.abs(comparison.joint_torque) <= 5 * joint_noise(jac) + 1e-3)


@pytest.mark.parametrize("collision, match", [
    ({"wrench_sensor": "elbow"}, r"wrench_sensor: the robot has no sensor 'elbow'"),
    ({"wrench_sensor": "imu"}, r"wrench_sensor: sensor 'imu' is of kind 'imu', not 'force_torque'"),
    ({"disagreement_tolerance": 0.0}, r"disagreement_tolerance\[0\]: must be > 0, got 0.0"),
    ({"disagreement_tolerance": [1.0, 2.0]}, r"disagreement_tolerance must be a scalar or 7 finite values"),
    ({"disagreement_time": -0.1}, r"disagreement_time: must be > 0, got -0.1"),
    ({"tool_com": [0.0, 0.1]}, r"tool_com must be 3 finite values"),
    ({"wrench_sensor": None, "tool_mass": 0.4}, r"tool_mass: applies to a force-torque sensor's wrench"),
    ({"tare_on_start": "yes"}, r"tare_on_start: expected true or false, got 'yes'"),
])
def test_bad_collision_sensor_options_are_one_line_naming_file_section_and_key(collision, match):
    imu = {"backend": "sim", "name": "imu", "kind": "imu", "frame": "link3"}
    with pytest.raises(ConfigError, match=match) as info:
        arm(collision, others=[imu])
    assert str(info.value).startswith(f"{SOURCE}: [collision] ") and "\n" not in str(info.value)
    print(info.value)


@pytest.mark.slow
def test_the_monitor_with_its_sensor_keeps_nothing_per_cycle():
    from allocation_counter import retained_per_cycle

    import rtctl.loops.agreement as agreement
    import rtctl.loops.collision as collision
    import rtctl.loops.collision_sensor as collision_sensor
    import rtctl.loops.observer as observer
    import rtctl.loops.wrench as wrench

    loop = arm({"threshold": 5.0})
    push(loop, "tool", FORCE, 0.1)
    assert retained_per_cycle(loop, [agreement, collision, collision_sensor, observer, wrench]) == []
    assert loop.collision.comparison.agreement.counts.sum() == 0 and not loop.safety.tripped


ALLOC_SCRIPT = """
import numpy as np
from numba import njit
import rtctl
from rtctl.dynamics import Dynamics
from rtctl.loops.agreement import agreement_step
from rtctl.loops.wrench import joint_torques_of
from rtctl.model.urdf import load_urdf

dyn = Dynamics(load_urdf(rtctl.bundled_model_path("arm7")))
q = np.array([0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2])
dyn.forward_kinematics(q)
mount = np.zeros(12)
mount[[0, 4, 8]] = 1.0
mount[9:] = [0.0, 0.0, 0.1]

@njit
def cycles(k, mi, ws, mount, jac, wrench, tau, estimate, decay, tolerance, rows, counts):
    for i in range(k):
        joint_torques_of(mi, ws, 6, mount, wrench, jac, tau)
        agreement_step(tau, estimate, decay, tolerance, rows, counts, 50, i == 0)
    return 0

args = (dyn.mi, dyn.ws, mount, np.zeros((6, 7)), np.array([0.1, 0.2, 0.3, 2.0, 4.0, -3.0]), np.zeros(7),
        np.full(7, 0.2), np.full(7, 0.95), np.full(7, 0.5), np.zeros((3, 7)), np.zeros(7, dtype=np.int64))
assert cycles(1, *args) == 0
counts = allocations(cycles, *args)
print("allocations for 1 and 300 cycles:", counts)
assert counts[0] == counts[1], counts
print("OK")
"""


@pytest.mark.slow
def test_the_compiled_comparison_and_joint_torques_allocate_nothing():
    from allocation_counter import run_with_allocation_counters

    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")
