"""The seed biped's walk and quadruped's trot closed on what a real robot measures (issue 33, item 4): the trunk
from the invariant EKF on a sim IMU, contact sensors and the encoders, the foot-ground forces of the control laws
from force-torque sensors on the feet (plants/legged/legged_biped_estimated.toml, legged_quadruped_estimated.toml).

The foot sensors first: LeggedPlant.sensor_wrench is the ground reaction at the foot's contact points, about the
sensor's point and in its axes; turned back to the body's origin by the controllers it is the contact model's
wrench; on the truth with noise-free sensors the two laws' efforts are the model's to rounding. Then the closed
loops, 2 s each (two steps). The seed laws on the contact model at the estimated base fall (the reproduction).
On the sensors the run on the estimate walks as the seed run on the truth in the same test does (the walking
tests' criteria), and the estimate is within 0.5 deg of roll and pitch and 0.05 m/s of velocity RMS of the truth
the loop keeps. Measured: joint tracking max 0.73 mrad (truth 0.42) for the trot, 0.064 mrad (truth 0.069) for
the walk; trunk attitude max 0.041 rad (truth 0.041), 3.8 mrad (truth 4.0); estimate pitch RMS 0.17 and 0.18
deg (the IMU's 0.03 m/s^2 accelerometer bias along x, which a level trunk cannot tell from 3 mrad = 0.17 deg of
pitch), velocity RMS 6.8 and 7.6 mm/s.
"""
from __future__ import annotations

import numpy as np
import pytest

from legged_runs import Run, attitude, estimate_errors, seed_run, shipped_raw, stays_up
from rtctl.config import ConfigError, build, validate
from rtctl.drivers.sim_force_torque import SimForceTorque
from rtctl.dynamics import Dynamics
from rtctl.plants.legged.control import LeggedComputedTorque, LeggedFeedForwardPD, make_walk
from rtctl.plants.legged.foot_sensors import measured_ground_wrenches

CONFIGS = {"planar_biped": "legged_biped_estimated", "spatial_quadruped": "legged_quadruped_estimated"}


def rotation(rpy):
    from scipy.spatial.transform import Rotation
    return Rotation.from_euler("xyz", rpy).as_matrix()


# -- the foot sensors ------------------------------------------------------------------------------------------
def stepped_walk(robot_name, steps=3000):
    """A plant some way into its gait under the model-based law (feet loaded, one or two in the air)."""
    robot, traj, plant, driver, ctrl = make_walk(robot_name, "ct")
    n = traj.n
    q_d, qd_d, qdd_d, effort = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(robot.model.nv)
    for k in range(steps):
        traj.sample(plant.t, q_d, qd_d, qdd_d)
        ctrl.update(plant.t, 1e-4, plant.q, plant.v, q_d, qd_d, qdd_d, effort)
        plant.step(1e-4, effort)
    return robot, traj, plant


@pytest.mark.parametrize("robot_name", ["planar_biped", "spatial_quadruped"])
def test_a_foot_sensor_reads_the_ground_reaction_at_its_point_and_in_its_axes(robot_name):
    """Force: the foot's ground reactions summed, in the sensor's axes; moment: about the sensor's point. Read back
    by the controllers' kernel, the readings give the contact model's wrench on each foot body about its origin."""
    robot, _, plant = stepped_walk(robot_name)
    dyn = Dynamics(robot.model)
    rot, pos = dyn.forward_kinematics(plant.q)
    grf = np.zeros((len(plant.foot_names), 3))
    plant.foot_forces(grf)
    assert grf[:, 2].sum() > 0.5 * robot.weight
    bodies = sorted(set(int(b) for b in robot.contact_bodies))
    r_m, p = rotation([0.3, -0.2, 1.1]), np.array([0.01, -0.02, -0.03])
    mount = np.r_[r_m.reshape(9), p]
    readings = np.zeros((len(bodies), 6))
    for k, b in enumerate(bodies):
        assert plant.sensor_wrench(b, mount, readings[k])
        axes, point = rot[b] @ r_m, pos[b] + rot[b] @ p
        f, n = np.zeros(3), np.zeros(3)
        for c in np.flatnonzero(robot.contact_bodies == b):
            at = pos[b] + rot[b] @ robot.contact_points[c]
            f += grf[c]
            n += np.cross(at - point, grf[c])
        np.testing.assert_allclose(readings[k], np.r_[axes.T @ n, axes.T @ f], rtol=1e-12, atol=1e-9)
    wrenches = np.zeros((robot.model.nbodies, 6))
    forces = np.zeros((len(bodies), 3))
    measured_ground_wrenches(dyn.mi, dyn.mf, dyn.ws, plant.q, np.array(bodies), np.tile(mount, (len(bodies), 1)),
                             readings, wrenches, forces)
    np.testing.assert_allclose(wrenches, plant.contact_wrenches, rtol=1e-10, atol=1e-8)
    trunk = robot.model.n_base_bodies - 1
    assert not plant.sensor_wrench(trunk, mount, np.zeros(6))   # no contact point: a leg's wrench, not told
    assert not plant.sensor_wrench(-1, mount, np.zeros(6))


@pytest.mark.parametrize("cls", [LeggedFeedForwardPD, LeggedComputedTorque])
@pytest.mark.parametrize("robot_name", ["planar_biped", "spatial_quadruped"])
def test_on_the_truth_the_measured_forces_give_the_models_efforts(robot_name, cls):
    """Noise-free sim_force_torque sensors on the feet read the plant after its step, whose last evaluation of the
    ground is at the state the controller measures: the efforts on the sensors are the model's to rounding."""
    robot, traj, plant = stepped_walk(robot_name)
    m = robot.model
    frames = {"planar_biped": ["left_sole", "right_sole"],
              "spatial_quadruped": [f"{leg}_foot" for leg in ("front_left", "front_right", "hind_left", "hind_right")]}
    options = [SimForceTorque.Options(name=f, kind="force_torque", frame=f, mount_rpy=[0.1, 0.2, 0.3])
               for f in frames[robot_name]]
    sensors = [SimForceTorque(m, o, plant=plant) for o in options]
    model = cls(Dynamics(m), cls.Options(kp=49.0, kd=14.0), robot=robot)
    measured = cls(Dynamics(m), cls.Options(kp=49.0, kd=14.0, ground_force="sensors",
                                            foot_sensors=frames[robot_name]), robot=robot)
    measured.close_on_feet(sensors)
    n = traj.n
    q_d, qd_d, qdd_d = np.zeros(n), np.zeros(n), np.zeros(n)
    e_model, e_measured = np.zeros(m.nv), np.zeros(m.nv)
    for _ in range(200):
        for s in sensors:
            assert s.read(plant.t)
        traj.sample(plant.t, q_d, qd_d, qdd_d)
        model.update(plant.t, 1e-4, plant.q, plant.v, q_d, qd_d, qdd_d, e_model)
        measured.update(plant.t, 1e-4, plant.q, plant.v, q_d, qd_d, qdd_d, e_measured)
        np.testing.assert_allclose(e_measured, e_model, rtol=1e-9, atol=1e-9 * np.abs(e_model).max())
        plant.step(1e-4, e_model)
    np.testing.assert_allclose(measured.measured_forces.sum(axis=0), model.grf.sum(axis=0), atol=1e-9)


def peak_allocation(ctrl, q, v, effort, cycles=1000):
    """Peak bytes traced over ``cycles`` updates beyond what was traced before them, and what stays after."""
    import tracemalloc
    z = np.zeros(ctrl.n)
    ctrl.update(0.0, 1e-4, q, v, z, z, z, effort)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(cycles):
            ctrl.update(0.0, 1e-4, q, v, z, z, z, effort)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base, current - base


def test_the_controller_on_sensors_allocates_nothing_and_names_a_bad_reading():
    """Over 1000 updates the sensors' path peaks under 1 kB as the model's does (tests/test_legged_walking.py:
    the compiled call's dispatch; the process's first traced window, the model's here, carries tracemalloc's own
    overhead) and keeps nothing cycle by cycle (measured 32 bytes in all); a NaN reading is one line naming the
    sensor."""
    robot, traj, plant = stepped_walk("spatial_quadruped", steps=10)
    m = robot.model
    names = [f"{leg}_foot" for leg in ("front_left", "front_right", "hind_left", "hind_right")]
    sensors = [SimForceTorque(m, SimForceTorque.Options(name=f, kind="force_torque", frame=f), plant=plant)
               for f in names]
    for s in sensors:
        assert s.read(plant.t)
    ctrl = LeggedComputedTorque(Dynamics(m), LeggedComputedTorque.Options(kp=49.0, ground_force="sensors",
                                                                          foot_sensors=names), robot=robot)
    ctrl.close_on_feet(sensors)
    model = LeggedComputedTorque(Dynamics(m), LeggedComputedTorque.Options(kp=49.0), robot=robot)
    effort = np.zeros(m.nv)
    peak_allocation(model, plant.q, plant.v, effort)
    peak, kept = peak_allocation(ctrl, plant.q, plant.v, effort)
    assert peak < 1024 and kept < 100, (peak, kept)   # < 0.1 byte a cycle: nothing per cycle
    sensors[2].reading.wrench[4] = np.nan
    z = np.zeros(12)
    with pytest.raises(ValueError, match="foot sensor 'hind_left_foot' reads NaN or inf"):
        ctrl.update(0.0, 1e-4, plant.q, plant.v, z, z, z, effort)


def raw_config(robot_name, **controller):
    raw, path = shipped_raw(CONFIGS[robot_name])
    raw["controller"].update(controller)
    return raw, path


@pytest.mark.parametrize("change, message", [
    ({"foot_sensors": ["front_left_force", "front_right_force", "hind_left_force", "hind_left_contact"]},
     "foot_sensors: sensor 'hind_left_contact' is a 'contact' sensor, not 'force_torque'"),
    ({"foot_sensors": ["front_left_force", "front_right_force", "hind_left_force"]},
     "foot_sensors: no sensor on foot 'hind_right_shank'"),
    ({"foot_sensors": ["front_left_force", "front_right_force", "hind_left_force", "hind_right"]},
     "foot_sensors: the robot has no sensor 'hind_right'"),
])
def test_bad_foot_sensors_are_one_line(change, message):
    raw, path = raw_config("spatial_quadruped", **change)
    cfg = validate(raw, path.name)
    cfg["_dir"] = str(path.parent)
    with pytest.raises(ConfigError) as err:
        build(cfg)
    prefix = "legged_quadruped_estimated.toml: [controller] 'legged_computed_torque': "
    assert str(err.value).startswith(prefix + message) and "\n" not in str(err.value), str(err.value)


def test_a_foot_sensor_on_the_trunk_is_refused():
    raw, path = raw_config("spatial_quadruped")
    raw["sensors"][-1]["frame"] = "trunk"
    cfg = validate(raw, path.name)
    cfg["_dir"] = str(path.parent)
    with pytest.raises(ConfigError) as err:
        build(cfg)
    assert "sensor 'hind_right_force'" in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- closed on the estimate --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def on_the_truth():
    return {name: seed_run(name) for name in CONFIGS}


@pytest.mark.slow
@pytest.mark.parametrize("robot_name", ["planar_biped", "spatial_quadruped"])
def test_the_seed_laws_on_the_model_at_the_estimated_base_fall(robot_name):
    """The reproduction: ground_force = "model" at the invariant EKF's base. Measured (0.5 s): the trotting
    quadruped's joints 6.5 rad from the plan, the biped's trunk 11 cm down and its joints 0.29 rad off."""
    raw, path = raw_config(robot_name, ground_force="model")
    del raw["controller"]["foot_sensors"]
    raw["loop"]["duration"] = 0.5
    run = Run(raw, path)
    assert run.report.tripped or run.report.tracking_max.max() > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("robot_name", ["planar_biped", "spatial_quadruped"])
def test_closed_on_the_estimate_it_walks_as_on_the_truth(robot_name, on_the_truth):
    """2 s on the estimate and measured foot forces: up by the walking tests' criteria, as far as the seed run on
    the truth; joint tracking within twice the seed run's worst error plus 1 mrad, roll and pitch within twice its
    largest plus 5 mrad; the estimate within 0.5 deg of roll and pitch and 0.05 m/s RMS of the truth."""
    seed = on_the_truth[robot_name]
    assert not seed.report.tripped
    raw, path = raw_config(robot_name)
    run = Run(raw, path)
    assert not run.report.tripped, run.report.trip_reason
    assert not run.loop.late_kernels, run.loop.late_kernels
    stays_up(robot_name, run, seed)
    assert run.report.tracking_max.max() < 2.0 * seed.report.tracking_max.max() + 1e-3
    tilt, seed_tilt = attitude(robot_name, run.truth), attitude(robot_name, seed.truth)
    assert np.abs(tilt).max() < 2.0 * np.abs(seed_tilt).max() + 5e-3
    tilt_rms, velocity_rms = estimate_errors(robot_name, run)
    assert tilt_rms.max() <= 0.5
    assert velocity_rms <= 0.05
    print(f"{robot_name}: tracking max {run.report.tracking_max.max():.2e} rad (truth "
          f"{seed.report.tracking_max.max():.2e}), attitude max {np.abs(tilt).max():.2e} rad (truth "
          f"{np.abs(seed_tilt).max():.2e}), estimate roll/pitch RMS {tilt_rms} deg, velocity RMS "
          f"{velocity_rms:.4f} m/s")
