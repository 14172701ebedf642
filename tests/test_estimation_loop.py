"""Each estimator as the loop's ``[estimator]``, built from its table on the ``sim`` sensors: Solo 12 on MuJoCo's
contact (mujoco_solo12.toml: standing and shifting its weight, 1 kHz, a free-flyer base), the ``sim`` IMU on the
base link (the BMI088-class noise densities and biases of tests/estimation_truth.py) and a ``sim`` contact
sensor on each lower leg at its foot sphere's centre, the floating-base computed-torque controller closed on
the estimate. A run that does not fall on the truth must not fall on the estimate: 4 s with the base's height
and tilt within 1 mm and 1 mrad of the same run closed on the truth (measured: 3 um, 0.02 mrad), and the
estimate within 0.5 deg, 1 cm and 0.05 m/s RMS of the simulator's truth the loop keeps beside it (measured:
invariant EKF 0.27 deg, 2.1 mm, 7 mm/s; the baseline's complementary filter 0.37 deg, 2.8 mm, 6 mm/s, and on
the device's orientation, which the sim IMU gives, its tilt is the truth's).

(The seed quadruped's and biped's laws, legged_computed_torque and legged_ff_pd, cancel the ground force they
compute from the measured base on a 1e6 N/m ground: 0.1 mm of height error is 100 N. Closed on the invariant
EKF's estimate, within 0.1 mm and 0.1 mrad of the truth, the trotting quadruped pitched past 0.08 rad within
0.1 s. On measured foot forces, ground_force = "sensors", they run on the estimate: tests/test_legged_estimated.py.) A sensor the table names but the config does not have is one
line naming the file, the section and the sensor."""
from __future__ import annotations

import tomllib

import numpy as np
import pytest

from rtctl.config import ConfigError, bundled_config_path, build, validate
from rtctl.loops.estimation import Estimator

LEGS = ("FL", "FR", "HL", "HR")
DURATION = 4.0


def config(estimator: str | None, **changes) -> dict:
    path = bundled_config_path("mujoco_solo12")
    raw = tomllib.loads(path.read_text())
    raw["loop"].update(pace=False, duration=DURATION)
    raw["sensors"] = [{"name": "imu", "kind": "imu", "frame": "base_link", "gyro_noise_density": 2.4e-4,
                       "accel_noise_density": 1.7e-3, "gyro_bias": [2e-3, -3e-3, 1e-3],
                       "accel_bias": [0.03, -0.02, 0.05]}]
    raw["sensors"] += [{"name": leg, "kind": "contact", "frame": f"{leg}_LOWER_LEG", "foot": f"{leg}_LOWER_LEG",
                        "mount_xyz": [0.0, 0.008 if leg[1] == "L" else -0.008, -0.16], "threshold": 2.0}
                       for leg in LEGS]
    if estimator is not None:
        raw["estimator"] = {"type": estimator, "start": "drivers", "imu": "imu", "contacts": list(LEGS),
                            "encoder_noise": 2e-4, "foot_velocity_density": 2e-3, **changes}
    return raw


def run(estimator, **changes):
    raw = config(estimator, **changes)
    cfg = validate(raw, "solo_estimated.toml")
    cfg["_dir"] = str(bundled_config_path("mujoco_solo12").parent)
    loop = build(cfg)
    truth, estimate = [], []

    def record(cycle, t, state, command):
        if loop.estimator is not None:
            truth.append(np.r_[loop.base_truth.q, loop.base_truth.v])
        estimate.append(np.r_[state.q[:7], state.v[:6]])

    loop.hooks.append(record)
    report = loop.run(duration=DURATION)
    return loop, report, np.array(truth), np.array(estimate)


def tilt(q):
    """Roll and pitch of free-flyer configurations (quaternion xyzw in q[3:7])."""
    from scipy.spatial.transform import Rotation
    return Rotation.from_quat(q[:, 3:7]).as_euler("ZYX")[:, 1:]


@pytest.fixture(scope="module")
def on_the_truth():
    pytest.importorskip("mujoco")
    return run(None)


@pytest.mark.slow
@pytest.mark.parametrize("name, changes", [("invariant_ekf", {}), ("leg_odometry_kf", {"device_orientation": False}),
                                           ("leg_odometry_kf", {})], ids=["invariant_ekf", "complementary", "device"])
def test_solo12_closed_on_the_estimate_stands_as_on_the_truth(name, changes, on_the_truth):
    loop, report, truth, estimate = run(name, **changes)
    assert isinstance(loop.estimator, Estimator) and loop.estimator.name == name
    assert not report.tripped, report.trip_reason
    assert not loop.late_kernels, loop.late_kernels      # its warm reached every kernel before the run
    reference = on_the_truth[3]
    assert not on_the_truth[1].tripped
    assert np.abs(truth[:, 2] - reference[:, 2]).max() < 1e-3
    assert np.abs(tilt(truth) - tilt(reference)).max() < 1e-3
    from scipy.spatial.transform import Rotation
    error = Rotation.from_quat(estimate[:, 3:7]) * Rotation.from_quat(truth[:, 3:7]).inv()
    assert np.degrees(np.abs(error.as_rotvec()[:, :2])).max() < 0.5
    assert np.abs(estimate[:, :3] - truth[:, :3]).max() < 0.01
    assert np.sqrt(np.mean(np.sum((estimate[:, 7:10] - truth[:, 7:10]) ** 2, axis=1))) < 0.05


@pytest.mark.parametrize("changes, message", [
    ({"imu": "imu2"}, "solo_estimated.toml: [estimator] imu: no [[sensors]] table named 'imu2' (did you mean "
                      "'imu'?)"),
    ({"contacts": ["imu", *LEGS[1:]]}, "solo_estimated.toml: [estimator] contacts: sensor 'imu' is a 'imu' sensor, "
                                       "not 'contact'"),
])
def test_sensors_the_table_names_must_exist(changes, message):
    pytest.importorskip("mujoco")
    cfg = validate(config("invariant_ekf", **changes), "solo_estimated.toml")
    cfg["_dir"] = str(bundled_config_path("mujoco_solo12").parent)
    with pytest.raises(ConfigError) as err:
        build(cfg)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.slow
def test_the_estimator_keeps_nothing_from_cycle_to_cycle():
    """tracemalloc over windows of 400 cycles of the Solo 12 loop (allocation_counter.retained_per_cycle): no
    line of the estimator's modules keeps memory from one window to the next."""
    pytest.importorskip("mujoco")
    from allocation_counter import retained_per_cycle
    from rtctl.loops.estimation import base, invariant_ekf_estimator

    cfg = validate(config("invariant_ekf"), "solo_estimated.toml")
    cfg["_dir"] = str(bundled_config_path("mujoco_solo12").parent)
    loop = build(cfg)
    loop.warm()
    loop.estimator.on_start()
    assert retained_per_cycle(loop, [base, invariant_ekf_estimator]) == []
    assert loop.estimator.fault_reason == ""
