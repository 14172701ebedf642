"""The joint-torque regressor: Y(q, v, a) pi is the inverse dynamics, and Y is Pinocchio's regressor.

Pinocchio's ``computeJointTorqueRegressor`` orders its rows by its own velocity order and its columns by
its joints (10 per joint, the same parameters about the joint frame); both are mapped by joint name
(:class:`rtctl.model.pinocchio_order.PinocchioOrder`). Compared on the bundled URDFs and on every URDF
example-robot-data ships that both libraries load with a movable joint.
"""
from __future__ import annotations

import importlib.metadata
import warnings

import numpy as np
import pinocchio as pin
import pytest

import rtctl
from rtctl.dynamics import Dynamics
from rtctl.dynamics.regressor import (BaseParameters, JointTorqueRegressor, inertial_parameters,
                                      model_with_inertial_parameters)
from rtctl.model import FREE_FLYER, ModelError
from rtctl.model.pinocchio_order import PinocchioOrder
from rtctl.model.urdf import load_urdf

BUNDLED = [("arm7", None), ("quadruped12", "free_flyer"), ("humanoid", "free_flyer"), ("arm7", "free_flyer")]


def example_robot_data_urdfs() -> list:
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return sorted(str(f.locate()) for f in files if f.suffix == ".urdf" and "robots" in f.parts)


def random_state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def pinocchio_regressor(model, path, floating_base, q, v, a):
    """Pinocchio's regressor of the same robot in rtctl's row and column order."""
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromUrdf(path)
    order = PinocchioOrder.from_pinocchio(model, pm)
    Y = pin.computeJointTorqueRegressor(pm, pm.createData(), order.to_pinocchio_q(q), order.to_pinocchio_v(v),
                                        order.to_pinocchio_v(a))
    columns = np.concatenate([np.arange(10 * (pm.getJointId(name) - 1), 10 * pm.getJointId(name))
                              for name in model.joint_names])
    return order.from_pinocchio_v(Y)[:, columns]


@pytest.mark.parametrize("name, base", BUNDLED)
def test_regressor_times_parameters_is_the_inverse_dynamics(name, base):
    model = load_urdf(rtctl.bundled_model_path(name), base)
    rng = np.random.default_rng(1)
    armature = rng.uniform(0.0, 0.1, model.nv)
    if model.has_free_flyer:
        armature[:6] = 0.0
    model.set_armature(armature)
    regressor, dynamics, pi = JointTorqueRegressor(model), Dynamics(model), inertial_parameters(model)
    for _ in range(5):
        q, v, a = random_state(model, rng)
        tau = dynamics.inverse_dynamics(q, v, a)
        np.testing.assert_allclose(regressor.compute(q, v, a) @ pi + armature * a, tau, rtol=0,
                                   atol=1e-10 * max(1.0, np.abs(tau).max()))


@pytest.mark.parametrize("name, base", BUNDLED)
def test_regressor_matches_pinocchio_on_bundled_urdfs(name, base):
    path = str(rtctl.bundled_model_path(name))
    model = load_urdf(path, base)
    rng = np.random.default_rng(2)
    regressor = JointTorqueRegressor(model)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        Y = regressor.compute(q, v, a)
        np.testing.assert_allclose(Y, pinocchio_regressor(model, path, base, q, v, a), rtol=0,
                                   atol=1e-10 * max(1.0, np.abs(Y).max()))


@pytest.mark.slow
def test_regressor_matches_pinocchio_on_real_urdfs():
    """Every example-robot-data URDF both libraries load with at least one DOF, fixed and free-flyer base."""
    paths = example_robot_data_urdfs()
    if not paths:
        pytest.skip("example-robot-data is not installed")
    rng = np.random.default_rng(3)
    compared, worst = [], 0.0
    for path in paths:
        for base in (None, "free_flyer"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    model = load_urdf(path, base)
                    pin.buildModelFromUrdf(path)
                except (ModelError, ValueError, RuntimeError):
                    continue   # an empty <robot>, a single rigid body with a fixed base: test_real_urdfs.py
            if base is None and np.any(model.joint_type == FREE_FLYER):
                continue
            q, v, a = random_state(model, rng)
            Y = JointTorqueRegressor(model).compute(q, v, a)
            Y_pin = pinocchio_regressor(model, path, base, q, v, a)
            error = np.abs(Y - Y_pin).max() / max(1.0, np.abs(Y).max())
            worst = max(worst, error)
            assert error < 1e-10, (path, base, error)
            compared.append((path, base))
    print(f"regressor agrees with Pinocchio on {len(compared)} URDF/base pairs, worst relative error {worst:.2e}")
    assert len(compared) >= 40


def test_base_parameters_reproduce_the_torques_and_parameters_round_trip():
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    regressor = JointTorqueRegressor(model)
    rng = np.random.default_rng(4)
    states = [random_state(model, rng) for _ in range(30)]
    Y = regressor.stacked(*(np.array([s[k] for s in states]) for k in range(3)))
    base = BaseParameters(Y)
    assert base.rank == np.linalg.matrix_rank(Y) and base.rank < Y.shape[1]
    pi = rng.normal(size=Y.shape[1])
    np.testing.assert_allclose(Y[:, base.independent] @ base.beta(pi), Y @ pi, atol=1e-9 * np.abs(Y @ pi).max())
    np.testing.assert_allclose(base.combination() @ pi, base.beta(pi), rtol=1e-14)
    # the first body turns about the vertical: its mass and first moment do nothing (zero columns)
    assert np.all(np.abs(Y[:, :4]) < 1e-12)
    same = model_with_inertial_parameters(model, inertial_parameters(model))
    np.testing.assert_allclose(inertial_parameters(same), inertial_parameters(model), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(same.inertia_com, model.inertia_com, atol=1e-15)


def test_bad_vectors_are_named():
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    regressor = JointTorqueRegressor(model)
    with pytest.raises(ValueError, match=r"^v must have shape \(7,\)"):
        regressor.compute(np.zeros(7), np.zeros(6), np.zeros(7))
    with pytest.raises(ValueError, match=r"^a contains NaN or inf"):
        regressor.compute(np.zeros(7), np.zeros(7), np.full(7, np.nan))
    with pytest.raises(ModelError, match="pi must hold 70 finite values"):
        model_with_inertial_parameters(model, np.zeros(69))
