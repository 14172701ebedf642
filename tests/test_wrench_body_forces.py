"""The spatial force across every joint (rtctl.dynamics: Dynamics.body_forces, the kernels body_forces and
transmitted_wrench) and what a simulated force-torque sensor reads (Plant.sensor_wrench, the sim_force_torque
backend).

* tau_i = S_i^T f_i (Featherstone, RBDA 2008, sec. 5.3) for every DOF of arm7 (fixed) and quadruped12 (free
  flyer) on random states with external wrenches: the body forces and the joint forces of the same call agree
  to 1e-12 relative.
* f_i against Pinocchio's ``data.f`` after its RNEA (its local frame rotated to world axes), 1e-9 relative.
* A sensor at arm7's tool at rest, held by the gravity torques, reads the weight of the body it is fixed in
  (link7 with the tool fused into it: 0.8 kg) at its centre of mass; pushed by a known wrench and held still
  (the effort adds -J^T w), it reads that wrench on top, in its axes, about its point (the sign convention).
* In motion, against Pinocchio: the accelerations Pinocchio's ABA gives under the plant's last effort, its
  body force of joint7, moved to the sensor and negated.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rtctl
from rtctl.drivers.sim_force_torque import SimForceTorque, sensor_mount
from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import DOF_WIDTH, W_S
from rtctl.model import JOINT_NV, MF_ARMATURE, rpy_to_matrix
from rtctl.model.urdf import load_urdf
from rtctl.plants.rigid_body import RigidBodyPlant

from oracle import Pair, close, worst_relative_error


def random_state(model, rng):
    return (model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv),
            5.0 * rng.normal(size=(model.nbodies, 6)))


@pytest.mark.parametrize("name, base", [("arm7", None), ("quadruped12", "free_flyer")])
def test_joint_forces_are_the_body_forces_projected_on_the_joint_axes(name, base):
    model = load_urdf(rtctl.bundled_model_path(name), base)
    dyn = Dynamics(model)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, v, a, f_ext = random_state(model, rng)
        tau = dyn.inverse_dynamics(q, v, a, f_ext=f_ext).copy()
        forces = dyn.body_forces(q, v, a, f_ext=f_ext)
        projected = np.zeros(model.nv)
        for i in range(model.nbodies):
            iv = model.idx_v[i]
            for j in range(JOINT_NV[int(model.joint_type[i])]):
                s = dyn.ws[i, W_S + DOF_WIDTH * j:W_S + DOF_WIDTH * j + 6]   # S_i's column j of this very call
                projected[iv + j] = s @ forces[i] + model.packed_float[i, MF_ARMATURE] * a[iv + j]
        assert np.max(np.abs(projected - tau)) <= 1e-12 * max(1.0, np.max(np.abs(tau)))


@pytest.mark.parametrize("name, base", [("arm7", None), ("quadruped12", "free_flyer")])
def test_body_forces_agree_with_pinocchio(name, base):
    pair = Pair.from_urdf(rtctl.bundled_model_path(name), base)
    model, dyn = pair.model, pair.dyn
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, v, a, f_ext = random_state(model, rng)
        ours = dyn.body_forces(q, v, a, f_ext=f_ext).copy()
        pair.rnea(q, v, a, f_ext)
        rot, _ = dyn.forward_kinematics(q)
        ref = np.array([np.concatenate([rot[i] @ pair.pin_data.f[int(pair.pin_joint[i])].angular,
                                        rot[i] @ pair.pin_data.f[int(pair.pin_joint[i])].linear])
                        for i in range(model.nbodies)])
        assert close(ours, ref, rtol=1e-9), worst_relative_error(ours, ref)


Q0 = np.array([0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2])


def arm_plant(**options):
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    plant = RigidBodyPlant(model, RigidBodyPlant.Options(viscous_friction=0.0, coulomb_friction=0.0, **options))
    plant.reset(Q0)
    return model, plant


def sensor_pose(model, q, frame, mount_rpy):
    """World rotation of the sensor axes and world position of its point, from the frame placement."""
    rot, pos = Dynamics(model).frame_placement(q, frame)
    return rot @ rpy_to_matrix(mount_rpy), pos


def test_a_sensor_at_rest_reads_the_weight_it_carries_and_the_push():
    model, plant = arm_plant()
    rpy = [0.3, -0.2, 1.1]
    sensor = SimForceTorque(model, SimForceTorque.Options(name="wrist", frame="tool", mount_rpy=rpy), plant=plant)
    dyn = Dynamics(model)
    plant.applied_effort[:] = dyn.gravity_forces(Q0)
    sensor.read(0.0)
    body = model.frame("tool").body
    r_s, p_s = sensor_pose(model, Q0, "tool", rpy)
    rot, pos = dyn.forward_kinematics(Q0)
    centre = pos[body] + rot[body] @ model.com[body]
    weight = model.mass[body] * model.gravity            # 0.8 kg: link7 and the tool fused into it
    expected = np.concatenate([r_s.T @ np.cross(centre - p_s, weight), r_s.T @ weight])
    np.testing.assert_allclose(sensor.reading.wrench, expected, rtol=0, atol=1e-9)
    assert np.isclose(model.mass[body], 0.8)

    push = np.array([0.4, -0.3, 0.2, 5.0, -3.0, 8.0])    # [n; f] about the tool frame's origin, world axes
    plant.set_external_wrench("tool", push)
    plant.applied_effort[:] = dyn.gravity_forces(Q0) - dyn.jacobian(Q0, "tool").T @ push   # still at rest
    sensor.read(0.001)
    moved = np.concatenate([r_s.T @ push[:3], r_s.T @ push[3:]])   # the tool frame's origin is the sensor's
    np.testing.assert_allclose(sensor.reading.wrench, expected + moved, rtol=0, atol=1e-9)


def test_a_moving_sensor_reads_pinocchios_joint_force_moved_to_it():
    model, plant = arm_plant()
    pair = Pair.from_urdf(rtctl.bundled_model_path("arm7"))
    rng = np.random.default_rng(11)
    mount = dict(mount_xyz=[0.01, -0.02, 0.03], mount_rpy=[0.2, 0.1, -0.4])
    sensor = SimForceTorque(model, SimForceTorque.Options(name="wrist", frame="tool", **mount), plant=plant)
    body = model.frame("tool").body
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.normal(size=model.nv)
        plant.reset(q, v)
        plant.applied_effort[:] = 10.0 * rng.normal(size=model.nv)
        push = rng.normal(size=6)
        plant.set_external_wrench(body, push)
        assert plant.sensor_wrench(body, sensor_mount(sensor), sensor.reading.wrench)
        f_ext = np.zeros((model.nbodies, 6))
        f_ext[body] = push
        qdd = pair.aba(q, v, plant.applied_effort, f_ext)
        pair.rnea(q, v, qdd, f_ext)
        force = pair.pin_data.f[int(pair.pin_joint[body])]          # local frame of joint7, about its origin
        point = model.frame("tool").translation + model.frame("tool").rotation @ np.array(mount["mount_xyz"])
        axes = model.frame("tool").rotation @ rpy_to_matrix(mount["mount_rpy"])
        moved = pin.SE3(axes, point).actInv(pin.Force(-force.linear, -force.angular))
        expected = np.concatenate([moved.angular, moved.linear])
        assert close(sensor.reading.wrench, expected, rtol=1e-9), worst_relative_error(sensor.reading.wrench,
                                                                                       expected)
