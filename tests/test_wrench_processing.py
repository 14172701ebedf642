"""Force-torque processing (rtctl.loops.wrench): the load's gravity, the bias, the wrench in another frame.

* Gravity compensation of a known tool: arm7's plant carries a 1.2 kg payload at the tool; at rest in six
  random configurations a noisy sim_force_torque sensor (0.05 N, 0.002 N m) reads, and the processing over the
  model with the payload fused in (as an identified model gives it) leaves a mean within 4 standard errors of
  zero on every axis and no sample beyond 5 standard deviations: only the noise. The tool given as
  tool_mass / tool_com instead of in the model compensates the same to 1e-12; the bare model leaves the
  payload's weight (11.8 N).
* The wrench moved to another frame agrees with Pinocchio's action of SE(3) on a force (1e-12), in that
  frame's axes and in world axes, and Pinocchio's inverse brings it back to the sensor (round trip).
* tare: with a push on the tool the compensated reading is zero after the tare (within the noise), and minus
  the push once it is gone.
* Before the sensor's first sample (a NaN reading) the compensated wrench is zero, the load already known.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rtctl
from rtctl.drivers.sim_force_torque import SimForceTorque
from rtctl.dynamics import Dynamics
from rtctl.loops.wrench import WrenchProcessing
from rtctl.model import rpy_to_matrix
from rtctl.model.urdf import load_urdf
from rtctl.plants.rigid_body import RigidBodyPlant

SIGMA = np.array([0.002] * 3 + [0.05] * 3)                  # [torque; force]
MASS, OFFSET = 1.2, np.array([0.02, -0.01, 0.06])          # the payload, in the tool frame
MOUNT = dict(mount_xyz=[0.0, 0.0, 0.01], mount_rpy=[0.0, 0.0, 0.5])


def rig():
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    loaded = model.with_payload("tool", MASS, OFFSET)
    plant = RigidBodyPlant(loaded, RigidBodyPlant.Options(viscous_friction=0.0, coulomb_friction=0.0,
                                                          end_stops=False))
    sensor = SimForceTorque(model, SimForceTorque.Options(name="wrist", frame="tool", force_noise=SIGMA[3],
                                                          torque_noise=SIGMA[0], seed=4, **MOUNT), plant=plant)
    return model, loaded, plant, sensor


def hold_still(plant, q, push=None):
    """The plant at rest at ``q`` under the effort that keeps it there (and ``push`` on the tool, [n; f])."""
    plant.reset(q)
    dyn = Dynamics(plant.model)
    plant.applied_effort[:] = dyn.gravity_forces(q)
    if push is not None:
        plant.set_external_wrench("tool", push)
        plant.applied_effort -= dyn.jacobian(q, "tool").T @ push
    else:
        plant.set_external_wrench(None)


def compensated_samples(sensor, processing, q, n=200):
    out = []
    for k in range(n):
        assert sensor.read(1e-3 * k)
        out.append(processing.update(q).copy())
    return np.array(out)


def test_gravity_compensation_of_a_known_tool_leaves_only_the_noise():
    model, loaded, plant, sensor = rig()
    identified = WrenchProcessing(loaded, sensor)
    in_tool_frame = np.asarray(MOUNT["mount_xyz"])
    tool_com = rpy_to_matrix(MOUNT["mount_rpy"]).T @ (OFFSET - in_tool_frame)   # the payload in the sensor frame
    given = WrenchProcessing(model, sensor, tool_mass=MASS, tool_com=tool_com)
    bare = WrenchProcessing(model, sensor)
    rng = np.random.default_rng(2)
    for _ in range(6):
        q = model.random_configuration(rng)
        hold_still(plant, q)
        samples = compensated_samples(sensor, identified, q)
        assert np.all(np.abs(samples.mean(axis=0)) <= 4 * SIGMA / np.sqrt(len(samples))), samples.mean(axis=0)
        assert np.all(np.abs(samples) <= 5 * SIGMA)
        np.testing.assert_allclose(given.update(q), identified.update(q), rtol=0, atol=1e-12)
        assert np.linalg.norm(bare.update(q)[3:]) == pytest.approx(MASS * 9.81, abs=6 * SIGMA[3])


def test_the_wrench_moved_to_another_frame_agrees_with_pinocchio_and_comes_back():
    model, loaded, plant, sensor = rig()
    processing = WrenchProcessing(loaded, sensor)
    dyn = Dynamics(model)
    rng = np.random.default_rng(8)
    for frame in ("link4", "tool", "link7"):
        q = model.random_configuration(rng)
        plant.reset(q, rng.normal(size=model.nv))
        plant.applied_effort[:] = rng.normal(size=model.nv)
        sensor.read(0.0)
        target = processing.target(frame)
        processing.update(q, target)
        in_frame = processing.moved.copy()
        processing.update(q, target, world_axes=True)
        in_world_axes = processing.moved.copy()
        rot, pos = dyn.frame_placement(q, "tool")
        sensor_pose = pin.SE3(rot @ rpy_to_matrix(MOUNT["mount_rpy"]), pos + rot @ MOUNT["mount_xyz"])
        frame_pose = pin.SE3(*dyn.frame_placement(q, frame))
        w = processing.compensated
        in_world = sensor_pose.act(pin.Force(w[3:], w[:3]))
        expected = frame_pose.actInv(in_world)
        np.testing.assert_allclose(in_frame, np.concatenate([expected.angular, expected.linear]), atol=1e-12)
        aligned = pin.SE3(np.eye(3), frame_pose.translation).actInv(in_world)
        np.testing.assert_allclose(in_world_axes, np.concatenate([aligned.angular, aligned.linear]), atol=1e-12)
        back = sensor_pose.actInv(frame_pose.act(pin.Force(in_frame[3:], in_frame[:3])))
        np.testing.assert_allclose(np.concatenate([back.angular, back.linear]), w, atol=1e-12)


def test_tare_zeroes_the_reading_under_a_push_and_the_push_comes_back_negative():
    model, loaded, plant, sensor = rig()
    processing = WrenchProcessing(loaded, sensor)
    q = np.array([0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2])
    push = np.array([0.3, -0.2, 0.1, 4.0, -6.0, 2.0])       # [n; f] about the tool frame's origin, world axes
    hold_still(plant, q, push)
    sensor.read(0.0)
    processing.tare(q)
    samples = compensated_samples(sensor, processing, q)
    assert np.all(np.abs(samples.mean(axis=0)) <= 6 * SIGMA), samples.mean(axis=0)   # the tare took one noisy sample
    hold_still(plant, q)
    gone = compensated_samples(sensor, processing, q).mean(axis=0)
    rot, _ = Dynamics(model).frame_placement(q, "tool")
    axes = rot @ rpy_to_matrix(MOUNT["mount_rpy"])
    lever = np.cross(axes @ MOUNT["mount_xyz"], push[3:])    # the push about the sensor's point
    expected = -np.concatenate([axes.T @ (push[:3] - lever), axes.T @ push[3:]])
    assert np.all(np.abs(gone - expected) <= 6 * SIGMA), gone - expected


def test_before_the_first_sample_the_compensated_wrench_is_zero_not_nan():
    model, loaded, plant, sensor = rig()
    processing = WrenchProcessing(loaded, sensor)
    q = np.array([0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2])
    assert np.all(np.isnan(sensor.reading.wrench))
    assert np.all(processing.update(q, processing.target("link4")) == 0.0) and np.all(processing.moved == 0.0)
    assert np.linalg.norm(processing.load[3:]) == pytest.approx((model.mass[-1] + MASS) * 9.81)
