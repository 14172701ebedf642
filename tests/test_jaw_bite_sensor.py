"""The jaw robot's bite force measured by a force-torque sensor in the mouthpiece beside the observer's estimate
(plants/jaw/mouthpiece.py, plants/jaw/bite_sensor.py, plants/jaw/bite.py with ``[bite] sensor``), on the shipped
jaw config (plants/jaw/jaw.toml: its CPG chewing, unmodelled leg friction and encoder noise) with the bolus of
tests/test_jaw_bite.py (20 N, 200 N s/m over the last 10 mm) and a sim_force_torque sensor at the incisal point,
its axes turned.

* The sensor reads the patient's wrench: its force in the base frame is the plant's patient force within 5
  standard deviations of its noise.
* Agreement within the observer's lag: the estimate follows the measurement through r_k = a r_{k-1} + (1 - a)
  (m_{k-1} + m_k) / 2, so ``|e - m| <= (1 + a) / (2 (1 - a)) max |dm|`` (dm: the change of the measured force over
  one period) plus what the lag does not explain; that rest, the lagged measurement less the estimate, is the
  leg friction the controller's model lacks (lagged alike) within ``max |df|`` (the force averaged over a period
  against its samples at the period's ends: a bolus letting go changes it by 3 N in one period), the sensor's noise
  through the lag and the observer's own noise (5 standard deviations each, the observer's measured at rest); with
  no bolus for 0.1 s, within the noise alone (measured 0.04 N, where the friction makes 0.45 N).
* A limit below the peak trips in the cycle the measured force crosses it, before the estimate would.
* A sensor with an offset is flagged with one line naming a bias; tared at the start it is not.
* Bad ``[bite]`` sensor settings are one line naming the file, the section and the key.
* Real time: the monitor with its sensor keeps nothing per cycle; the compiled mouthpiece kernels allocate nothing.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rtctl.config import bundled_config_path, build, load_config
from rtctl.options import ConfigError

K_O, DT = 50.0, 1e-3
NOISE = 0.05                    # N per axis of the sensor's force
SENSOR = f"""
[[sensors]]
name = "bite"
kind = "force_torque"
backend = "sim_force_torque"
frame = "incisal"
mount_rpy = [0.3, -0.2, 0.5]
force_noise = {NOISE}
torque_noise = 0.002
"""


def jaw(tmp_path, bite="", sensor=SENSOR, name="jaw_bite.toml", limit=100.0):
    """The shipped jaw config with the bolus of tests/test_jaw_bite.py, ``sensor`` and a [bite] section (enabled,
    ``force_limit`` N, and ``bite``), offline, without its schedule."""
    text = bundled_config_path("jaw").read_text()
    text = text.replace("bolus_force = 2.0 ", "bolus_force = 20.0\nbolus_damping = 200.0 ")
    text = text[:text.index("[[schedule]]")]
    path = tmp_path / name
    path.write_text(text + sensor + f"\n[bite]\nenabled = true\nforce_limit = {limit!r}\n" + bite)
    cfg = load_config(path)
    cfg["loop"]["pace"] = False
    return build(cfg)


def lag(x):
    """``x`` (cycles, n) through the observer's discrete lag, from its second cycle (the comparison's start)."""
    a, y = math.exp(-K_O * DT), np.zeros_like(x)
    for k in range(2, len(x)):
        y[k] = a * y[k - 1] + (1 - a) * 0.5 * (x[k - 1] + x[k])
    return y


@pytest.mark.slow
def test_the_measured_and_estimated_bite_forces_agree_within_the_observers_lag(tmp_path):
    loop = jaw(tmp_path, 'sensor = "bite"\n')
    plant, mon = loop.drivers[0].plant, loop.bite
    rows = []

    def record(cycle, t, state, command):
        legs = plant.friction_forces(plant.v)              # what the controller's model lacks
        rows.append(np.concatenate([mon.measurement.force, mon.observer.platform_wrench[:3],
                                    mon.measurement.agreement.difference, plant.patient_wrench()[:3],
                                    (plant.platform.jc(plant.x).T @ legs)[:3], [plant.bolus_force]]))
    loop.hooks.append(record)
    loop.run(duration=2.5)
    assert not loop.safety.tripped, loop.safety.trip_reason
    m, e, d, true, friction, bolus = np.split(np.array(rows), [3, 6, 9, 12, 15], axis=1)
    assert bolus.max() > 15.0                                              # the bolus was bitten
    assert np.abs(m - true).max() <= 5 * NOISE
    a = math.exp(-K_O * DT)
    lagged_noise = NOISE * math.sqrt((1 - a) / 2)
    observer_noise = e[100:500].std(axis=0).max()          # at rest before the chewing starts (t0 = 0.5 s)
    step = np.linalg.norm(np.diff(true, axis=0), axis=1).max()
    rest = np.linalg.norm(d + lag(friction), axis=1)
    print(f"peak bite force measured {np.linalg.norm(m, axis=1).max():.2f} N, estimated "
          f"{np.linalg.norm(e, axis=1).max():.2f} N; largest |e - m| {np.linalg.norm(e - m, axis=1).max():.2f} N; "
          f"lagged difference up to {np.linalg.norm(d, axis=1).max():.2f} N, {rest.max():.2f} N less the lagged leg "
          f"friction (up to {np.linalg.norm(lag(friction), axis=1).max():.2f} N); largest change in a period "
          f"{step:.2f} N; observer noise {observer_noise:.4f} N")
    allowance = step + 5 * (lagged_noise + observer_noise)
    assert rest.max() <= allowance
    quiet = np.array([k > 1 and bolus[max(0, k - 100):k + 1].max() == 0.0 for k in range(len(bolus))])
    lagged = np.linalg.norm(d[quiet], axis=1).max()
    print(f"no bolus for 0.1 s ({quiet.sum()} cycles): lagged difference up to {lagged:.3f} N, "
          f"{rest[quiet].max():.3f} N less the lagged leg friction")
    assert rest[quiet].max() <= 5 * (lagged_noise + observer_noise) < lagged / 4   # the friction is the difference
    measured_step = np.linalg.norm(np.diff(m, axis=0), axis=1).max()
    lag_bound = (1 + a) / (2 * (1 - a)) * measured_step
    assert np.all(np.linalg.norm(e - m, axis=1) <= lag_bound + np.linalg.norm(lag(friction), axis=1) + allowance)
    names, units = mon.telemetry_fields, mon.telemetry_units
    assert len(units) == len(names) == len(mon.telemetry_values)
    k = names.index("bite_force_measured")
    assert units[k] == "N" and mon.telemetry_values[k] == mon.measurement.bite_force
    assert mon.measurement.bite_force == pytest.approx(np.linalg.norm(m[-1]), rel=1e-12)   # two norms' roundings
    k = names.index("bite_force_disagreement")
    assert units[k] == "N" and np.isclose(mon.telemetry_values[k], np.linalg.norm(d[-1]))


@pytest.mark.slow
def test_a_limit_crossed_is_caught_by_the_measured_force_before_the_estimate(tmp_path):
    loop = jaw(tmp_path, 'sensor = "bite"\n')
    mon, rows = loop.bite, []
    loop.hooks.append(lambda c, t, s, cmd: rows.append((mon.measurement.bite_force, mon.bite_force)))
    loop.run(duration=1.5)
    measured, estimated = np.array(rows).T
    limit = 0.8 * measured.max()
    loop = jaw(tmp_path, 'sensor = "bite"\n', limit=float(limit))
    loop.run(duration=1.5)
    crossed = int(np.argmax(measured > limit))
    reason = loop.safety.trip_reason
    print(f"limit {limit:.2f} N: measured crosses it at cycle {crossed}, the estimate at "
          f"{int(np.argmax(estimated > limit))}; {reason}")
    assert loop.safety.tripped and loop.safety.trip_cycle == crossed and loop.bite.trips == 1
    assert estimated[crossed] < limit and np.argmax(estimated > limit) > crossed
    assert "above the therapist's limit" in reason and "measured by sensor 'bite'" in reason and "\n" not in reason


@pytest.mark.slow
def test_a_sensor_with_an_offset_is_flagged_and_a_tare_at_the_start_removes_it(tmp_path):
    offset = SENSOR + "force_bias = [0.0, 0.0, 3.0]\n"
    loop = jaw(tmp_path, 'sensor = "bite"\ndisagreement_tolerance = 1.0\n', sensor=offset)
    agreement, rows = loop.bite.measurement.agreement, []
    loop.hooks.append(lambda c, t, s, cmd: rows.append(agreement.difference.copy()))
    loop.run(duration=0.5)
    reason = loop.safety.trip_reason
    print(reason)
    first = int(np.argmax(np.any(np.abs(np.array(rows)) > 1.0, axis=1)))   # the first cycle beyond the tolerance
    assert loop.bite.disagreements == 1 and loop.safety.trip_cycle == first + round(0.1 / DT)   # longer than 0.1 s
    assert reason.startswith("e-stop: bite monitor: sensor 'bite' and the observer disagree on the force's")
    assert "a sensor bias or drift is plausible (tare it)" in reason and "\n" not in reason
    assert loop.bite.telemetry_values[loop.bite.telemetry_fields.index("bite_sensor_disagrees")] == 1.0
    tared = jaw(tmp_path, 'sensor = "bite"\ndisagreement_tolerance = 1.0\ntare_on_start = true\n', sensor=offset)
    tared.run(duration=1.5)                                   # through the first bite
    assert not tared.safety.tripped, tared.safety.trip_reason
    assert tared.late_kernels == []


@pytest.mark.parametrize("sensor, bite, match", [
    (SENSOR, 'sensor = "wrist"\n', r"\[bite\] sensor: the robot has no sensor 'wrist' \(its sensors: \['bite'\]\)"),
    ('[[sensors]]\nname = "bite"\nkind = "force_torque"\nbackend = "netft"\nframe = "leg1"\nhost = "127.0.0.1"\n',
     'sensor = "bite"\n', r"\[bite\] sensor: sensor 'bite' is mounted on 'leg1', not in the mouthpiece"),
    ('[[sensors]]\nname = "bite"\nkind = "imu"\nframe = "incisal"\n', 'sensor = "bite"\n',
     r"\[bite\] sensor: sensor 'bite' is of kind 'imu', not 'force_torque'"),
    (SENSOR, "disagreement_tolerance = 2.0\n",
     r"\[bite\] disagreement_tolerance applies to a measured bite force; name the sensor with sensor"),
    (SENSOR, 'sensor = "bite"\ndisagreement_time = 0.0\n', r"\[bite\] disagreement_time: must be > 0, got 0.0"),
    (SENSOR, 'sensor = "bite"\ntare_on_start = 1\n', r"\[bite\] tare_on_start: expected true or false"),
])
def test_bad_bite_sensor_settings_are_one_line_naming_file_section_and_key(tmp_path, sensor, bite, match):
    with pytest.raises(ConfigError, match=match) as info:
        jaw(tmp_path, bite, sensor=sensor, name="bad_bite.toml")
    message = str(info.value)
    print(message)
    assert message.startswith(str(tmp_path / "bad_bite.toml")) and "\n" not in message


@pytest.mark.slow
def test_the_bite_monitor_with_its_sensor_keeps_nothing_per_cycle(tmp_path):
    from allocation_counter import retained_per_cycle

    import rtctl.loops.agreement as agreement
    import rtctl.loops.wrench as wrench
    import rtctl.plants.jaw.bite as bite
    import rtctl.plants.jaw.bite_sensor as bite_sensor
    import rtctl.plants.jaw.mouthpiece as mouthpiece

    loop = jaw(tmp_path, 'sensor = "bite"\n')
    assert retained_per_cycle(loop, [agreement, wrench, bite, bite_sensor, mouthpiece]) == []
    assert not loop.safety.tripped and loop.bite.measurement.samples == 1900


ALLOC_SCRIPT = """
import numpy as np
from numba import njit
from rtctl.plants.jaw.model import JawRehabRobot
from rtctl.plants.jaw.mouthpiece import base_force, mouthpiece_wrench

mech = JawRehabRobot()
x = mech.rest_pose + np.array([0.001, -0.002, -0.01, 0.05, -0.1, 0.02])
mount = np.zeros(12)
mount[[0, 4, 8]] = 1.0
mount[9:] = mech.rest_pose[:3] + mech.incisal_offset

@njit
def cycles(k, x, patient, rest, mount, R, out, force):
    for i in range(k):
        if not mouthpiece_wrench(x, patient, rest, mount, R, out):
            return 1
        base_force(x, mount, out[3:], R, force)
    return 0

args = (x, np.array([1.0, 2.0, -20.0, 0.1, 0.2, 0.3]), mech.rest_pose, mount, np.zeros((3, 3)), np.zeros(6),
        np.zeros(3))
assert cycles(1, *args) == 0
counts = allocations(cycles, *args)
print("allocations for 1 and 300 cycles:", counts)
assert counts[0] == counts[1], counts
print("OK")
"""


@pytest.mark.slow
def test_the_compiled_mouthpiece_kernels_allocate_nothing():
    from allocation_counter import run_with_allocation_counters

    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")
