"""Sensors beside the drivers: the ``[[sensors]]`` tables, the readings in the loop's state, the stale and
non-finite checks that latch the safe state, and the ``sim`` backend's physics.

The simulated IMU is checked against the rigid-body kinematics computed independently by the dynamics
core's Jacobians: the angular rate is ``R^T J_w v`` and the specific force ``R^T (J_v qdd + Jdot v - g)``,
with ``qdd`` taken from the plant's own velocities."""
import copy
import tomllib

import numpy as np
import pytest

from rtctl.config import ConfigError, DEMO_CONFIG, build, validate
from rtctl.drivers.sensor import Sensor, SensorReading, first_non_finite
from rtctl.dynamics import Dynamics
from rtctl.registry import SENSORS


def demo(*sensors, **sections):
    raw = tomllib.loads(DEMO_CONFIG.read_text())
    raw["driver"]["encoder_counts"] = 0
    raw["driver"]["velocity_noise"] = 0.0
    raw["loop"]["pace"] = False
    raw["sensors"] = [dict(s) for s in sensors]
    raw.update(sections)
    return raw


WRIST_IMU = {"name": "wrist", "kind": "imu", "frame": "link7", "mount_xyz": [0.0, 0.0, 0.05],
             "mount_rpy": [0.3, -0.2, 0.1]}


def test_a_sim_imu_on_a_moving_arm_measures_its_rate_and_specific_force():
    loop = build(validate(demo(WRIST_IMU), "imu.toml"))
    imu, plant = loop.sensors[0], loop.drivers[0].plant
    dyn, dt = Dynamics(plant.model), loop.period
    reading = loop.state.sensors["wrist"]
    assert reading is imu.reading and reading.kind == "imu"
    previous_q = previous_v = None
    checked = 0
    for cycle in range(900):
        q, v = plant.q.copy(), plant.v.copy()     # what the next read measures
        loop.step(cycle * dt)
        r_ws = _sensor_rotation(dyn, q, imu)
        jac = dyn.jacobian(q, "link7", point=_mount_in_frame(imu))
        np.testing.assert_allclose(reading.angular_rate, r_ws.T @ (jac[:3] @ v), atol=1e-12)
        if previous_v is not None and cycle % 50 == 0:
            # the backend differentiates the origin's velocity over one read: compare with (J v - J_prev v_prev)/dt
            jac_prev = dyn.jacobian(previous_q, "link7", point=_mount_in_frame(imu))
            a = (jac[3:] @ v - jac_prev[3:] @ previous_v) / dt
            np.testing.assert_allclose(reading.specific_force, r_ws.T @ (a - plant.model.gravity), atol=1e-9)
            checked += 1
        previous_q, previous_v = q, v
    assert checked >= 15
    x, y, z, w = reading.orientation
    assert abs(x * x + y * y + z * z + w * w - 1.0) < 1e-12
    np.testing.assert_allclose(_quat_matrix(reading.orientation), r_ws, atol=1e-12)
    assert np.linalg.norm(reading.angular_rate) > 0.1        # the arm did move


def _mount_in_frame(sensor):
    frame = sensor.model.frame(sensor.options.frame)
    return frame.rotation.T @ (sensor.translation - frame.translation)


def _sensor_rotation(dyn, q, sensor):
    rot, _ = dyn.forward_kinematics(q)
    return rot[sensor.body] @ sensor.rotation


def _quat_matrix(quat):
    x, y, z, w = quat
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def test_an_imu_at_rest_reads_minus_gravity_and_its_noise_has_the_configured_density():
    density = 2e-3       # m/s^2/sqrt(Hz)
    raw = demo(dict(WRIST_IMU, accel_noise_density=density, gyro_noise_density=1e-4, seed=3))
    raw["trajectory"] = {"type": "min_jerk", "goal": [0.0] * 7, "duration": 1.0}
    loop = build(validate(raw, "imu.toml"))
    imu = loop.sensors[0]
    samples = np.zeros((2000, 6))
    for k in range(samples.shape[0]):
        loop.step(k * loop.period)
        samples[k] = imu.reading.values[:6]
    plant = loop.drivers[0].plant
    r_ws = _sensor_rotation(Dynamics(plant.model), plant.q, imu)
    mean = samples[200:].mean(axis=0)
    sigma = density / np.sqrt(loop.period)
    np.testing.assert_allclose(mean[:3], -r_ws.T @ plant.model.gravity, atol=5 * sigma / np.sqrt(1800))
    measured = samples[200:, :3].std(axis=0)
    # the variance of 1800 samples: its relative standard error is sqrt(2 / 1800) = 3.3 %
    np.testing.assert_allclose(measured, sigma, rtol=5 * np.sqrt(2 / 1800))


def test_contact_follows_the_foot_force_after_the_debounce():
    raw = tomllib.loads(_bundled("legged_quadruped").read_text())
    raw["loop"].update(pace=False, duration=1.0)
    raw["trajectory"]["duration"] = 1.0
    raw["sensors"] = [{"name": f"{foot}", "kind": "contact", "frame": "trunk", "foot": foot, "threshold": 5.0,
                       "debounce": 3} for foot in ("front_left_foot", "front_right_foot")]
    loop = build(validate(raw, "contact.toml"))
    plant = loop.drivers[0].plant
    forces = np.zeros((4, 3))
    raw_state, flags = [], []
    for k in range(10000):
        loop.step(k * loop.period)
        plant.foot_forces(forces)
        raw_state.append(forces[:2, 2] > 5.0)
        flags.append([loop.state.sensors[f].contact[0] for f in ("front_left_foot", "front_right_foot")])
    raw_state, flags = np.array(raw_state), np.array(flags) > 0.5
    for leg in range(2):
        changes = np.flatnonzero(np.diff(flags[:, leg].astype(int)))
        assert len(changes) >= 2, "the trot lifts and sets down each foot"
        assert flags[0, leg] == raw_state[0, leg]     # the first read sets the state
        for c in changes:       # a change follows three reads agreeing on the new state
            assert np.all(raw_state[c - 2:c + 1, leg] == flags[c + 1, leg]), (c, raw_state[c - 3:c + 2, leg])
        agree = np.mean(raw_state[:, leg] == flags[:, leg])
        assert agree > 0.99


def _bundled(name):
    from rtctl.config import bundled_config_path
    return bundled_config_path(name)


class Scripted(Sensor):
    """A test backend whose samples the test sets: ``script[k]`` is the k-th read's sample (None: none)."""

    kinds = ("imu", "force_torque", "contact")

    def __init__(self, model, options=None, *, script=()):
        super().__init__(model, options)
        self.script, self.calls = list(script), 0

    @classmethod
    def from_config(cls, options, context):
        return cls(context.model, cls.Options(**options), script=SCRIPT)

    def receive(self, reading, now):
        sample = self.script[self.calls] if self.calls < len(self.script) else None
        self.calls += 1
        if sample is None:
            return False
        if isinstance(sample, Exception):
            raise sample
        reading.values[:len(sample)] = sample
        return True


SCRIPT: list = []


@pytest.fixture
def scripted():
    SENSORS.register("scripted_test")(Scripted)
    yield SCRIPT
    SENSORS.classes.pop("scripted_test", None)
    SCRIPT.clear()


GOOD = [0.0, 0.0, 9.81, 0.0, 0.0, 0.0]


def run_scripted(script, cycles, **options):
    SCRIPT[:] = script
    table = {"backend": "scripted_test", "name": "imu", "kind": "imu", "frame": "link3", **options}
    loop = build(validate(demo(table), "scripted.toml"))
    report = loop.run(cycles=cycles)
    return loop, report


def test_a_sensor_that_stops_sending_latches_the_safe_state_after_max_age(scripted):
    loop, report = run_scripted([GOOD] * 100, 200, max_age=0.02)
    assert report.tripped and "sensor 'imu': stale: no sample for" in report.trip_reason
    assert "max_age 0.02 s" in report.trip_reason
    # the last sample came at cycle 99: the first read 20 ms (20 cycles at 1 kHz) later or the next faults
    cycle = report.trip_history[0][0]
    assert 119 <= cycle <= 120, report.trip_history
    np.testing.assert_allclose(loop.command.effort, -loop.safety.damping_gain * loop.state.v, rtol=1e-12)


@pytest.mark.parametrize("bad, field", [(np.nan, "specific_force[1]"), (np.inf, "specific_force[1]")])
def test_a_non_finite_sample_is_a_fault_naming_the_field(scripted, bad, field):
    sample = list(GOOD)
    sample[1] = bad
    loop, report = run_scripted([GOOD] * 10 + [sample] + [GOOD] * 100, 50)
    assert report.tripped and f"sensor 'imu': {field} is {bad}" in report.trip_reason
    assert loop.sensors[0].health.corrupt == 1


def test_a_backend_that_raises_is_a_fault_not_an_exception(scripted):
    loop, report = run_scripted([GOOD] * 5 + [OSError("device vanished")], 30)
    assert report.tripped and "sensor 'imu': OSError: device vanished" in report.trip_reason


def test_an_optional_field_may_be_missing():
    reading = SensorReading("imu")
    reading.values[:6] = GOOD
    assert np.isnan(reading.orientation).all()
    assert first_non_finite(reading.values, reading.required) == -1
    assert reading.required == 6


@pytest.mark.parametrize("table, message", [
    ({"name": "imu", "kind": "imu", "frame": "link9"}, "[[sensors]] 0 ('imu'): sensor 'imu': frame: model"),
    ({"name": "imu", "kind": "imu"}, "[[sensors]] 0 ('imu') frame is required"),
    ({"kind": "imu", "frame": "link7"}, "[[sensors]] 0 name is required"),
    ({"name": "ft", "kind": "force_torque", "frame": "link7"},
     "[[sensors]] 0 ('ft') kind: 'force_torque': backend 'sim' measures ['imu', 'contact']"),
    ({"name": "imu", "kind": "imu", "frame": "link7", "backend": "nope"}, "[[sensors]] 0 ('imu') backend: unknown"),
    ({"name": "imu", "kind": "imu", "frame": "link7", "max_age": -1.0}, "[[sensors]] 0 ('imu') max_age"),
    ({"name": "imu", "kind": "imu", "frame": "link7", "mount_xyz": [1.0, 2.0]},
     "sensor 'imu': mount_xyz needs 3 values, got 2"),
    ({"name": "c", "kind": "contact", "frame": "link7", "foot": "left"}, "sensor 'c': foot 'left' is not one"),
])
def test_a_bad_sensor_table_is_one_line_naming_the_file_table_and_key(table, message):
    with pytest.raises(ConfigError) as err:
        build(validate(demo(table), "robot.toml"))
    text = str(err.value)
    assert text.startswith("robot.toml: ") and message in text and "\n" not in text


def test_two_sensors_with_one_name_are_refused_naming_both():
    with pytest.raises(ConfigError, match=r"\[\[sensors\]\] 1 \('imu'\) name: 'imu' is also the name of "
                                          r"\[\[sensors\]\] 0"):
        validate(demo(WRIST_IMU | {"name": "imu"}, WRIST_IMU | {"name": "imu"}), "robot.toml")


def test_sensor_readings_go_out_in_telemetry_with_their_units():
    from rtctl.telemetry import Telemetry

    loop = build(validate(demo(WRIST_IMU), "imu.toml"))
    telemetry = Telemetry(endpoint="tcp://127.0.0.1:0").attach(loop)
    names = telemetry.extra_names
    at = names.index("wrist/angular_rate/x")
    assert names[at:at + 3] == ["wrist/angular_rate/x", "wrist/angular_rate/y", "wrist/angular_rate/z"]
    units = telemetry.metadata()["fields"]["extra"]["unit"]
    assert units[at] == "rad/s" and units[names.index("wrist/specific_force/z")] == "m/s^2"
    assert units[names.index("wrist/orientation/w")] == "1"


def test_random_sensor_tables_are_validated_or_refused_in_one_line():
    rng = np.random.default_rng(33)
    values = [None, "", "imu", "contact", "force_torque", "link7", "trunk", -1.0, 0.0, 1e308, float("nan"),
              [1.0, 2.0, 3.0], [1.0], "x" * 300, True, 3, {"a": 1}]
    keys = ["name", "kind", "frame", "max_age", "mount_xyz", "mount_rpy", "backend", "gyro_noise_density",
            "threshold", "debounce", "foot", "seed", "bogus"]
    base = copy.deepcopy(WRIST_IMU)
    for _ in range(150):
        table = dict(base)
        for key in rng.choice(keys, size=rng.integers(1, 4), replace=False):
            value = values[rng.integers(len(values))]
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        try:
            build(validate(demo(table), "fuzz.toml"))
        except ConfigError as exc:
            assert str(exc).startswith("fuzz.toml: ") and "\n" not in str(exc)


def test_mujoco_feet_carry_the_standing_robots_weight_and_their_contact_sensors_say_so():
    pytest.importorskip("mujoco")
    raw = tomllib.loads(_bundled("mujoco_solo12").read_text())
    raw["loop"]["pace"] = False
    raw["trajectory"]["amplitude"] = [0.0] * 12          # standing still
    raw["sensors"] = [{"name": f"{leg}_contact", "kind": "contact", "frame": f"{leg}_LOWER_LEG",
                       "foot": f"{leg}_LOWER_LEG"} for leg in ("FL", "FR", "HL", "HR")]
    cfg = validate(raw, "solo.toml")
    cfg["_dir"] = str(_bundled("mujoco_solo12").parent)
    loop = build(cfg)
    plant = loop.drivers[0].plant
    assert plant.foot_names == ["FL_LOWER_LEG", "FR_LOWER_LEG", "HL_LOWER_LEG", "HR_LOWER_LEG"]
    loop.run(cycles=1000)
    forces = np.zeros((4, 3))
    plant.foot_forces(forces)
    weight = plant.model.total_mass * 9.81
    # at rest the ground carries the weight: the vertical forces sum to m g (MuJoCo's soft contact, 1 %)
    assert abs(forces[:, 2].sum() - weight) < 0.01 * weight, (forces, weight)
    assert np.all(forces[:, 2] > 0.15 * weight)
    assert all(loop.state.sensors[f"{leg}_contact"].contact[0] == 1.0 for leg in ("FL", "FR", "HL", "HR"))
    np.testing.assert_allclose([loop.state.sensors[f"{leg}_contact"].force[0] for leg in ("FL", "FR", "HL", "HR")],
                               forces[:, 2], rtol=0.05)
