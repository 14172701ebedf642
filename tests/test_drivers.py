"""Transmissions and the simulated driver backend.

Transmission: actuator/joint maps are inverse to each other, efforts conserve
power, a reduction reflects N^2 J_rotor. Sim driver: encoder quantisation is
one count, torque saturates at the actuator limit, latency delays the command
by exactly one cycle, and the registry refuses unknown backends by name.
"""
import numpy as np
import pytest

from rtctl.drivers import SimDriver, Transmission, create_driver
from rtctl.plants import create_plant
from rtctl import bundled_model_path
from rtctl.model.urdf import load_urdf
from rtctl.rt.interfaces import Command, RobotState


def test_transmission_maps_are_inverse_and_conserve_power():
    rng = np.random.default_rng(0)
    coupling = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.5, -1.0, 2.0]]) * 30
    tr = Transmission(3, coupling=coupling)
    q, qd, tau_m = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
    theta, out = np.zeros(3), np.zeros(3)
    tr.to_actuator_position(q, theta)
    assert np.allclose(tr.to_joint_position(theta, out), q, rtol=1e-14, atol=1e-14)
    theta_dot = tr.to_actuator_position(qd, np.zeros(3))
    tau_j = tr.to_joint_effort(tau_m, np.zeros(3))
    assert tau_j @ qd == pytest.approx(tau_m @ theta_dot, rel=1e-12)
    assert np.allclose(tr.to_actuator_effort(tau_j, np.zeros(3)), tau_m, rtol=1e-12)


def test_reduction_reflects_n_squared_rotor_inertia():
    tr = Transmission(2, ratio=[100.0, -50.0], rotor_inertia=[2e-5, 1e-5])
    assert np.allclose(tr.armature(), [100.0 ** 2 * 2e-5, 50.0 ** 2 * 1e-5], rtol=1e-14)
    assert tr.is_diagonal


@pytest.mark.parametrize("kwargs,match", [
    ({"ratio": [1.0, 0.0]}, "ratio"),
    ({"coupling": [[1.0, 2.0], [2.0, 4.0]]}, "singular"),
    ({"rotor_inertia": -1.0}, "rotor_inertia"),
    ({"ratio": 2.0, "coupling": np.eye(2)}, "either"),
])
def test_transmission_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Transmission(2, **kwargs)


def make_driver(**options):
    model = load_urdf(bundled_model_path("arm7"))
    plant = create_plant("rigid_body", load_urdf(bundled_model_path("arm7")))
    driver = create_driver("sim", model, plant=plant, period=1e-3, **options)
    driver.configure()
    driver.activate()
    return model, plant, driver


def test_encoder_quantisation_is_one_count_on_the_motor_side():
    counts, ratio = 4096, 10.0
    model, plant, driver = make_driver(encoder_counts=counts, transmission=Transmission(7, ratio=ratio))
    state = RobotState(model)
    rng = np.random.default_rng(1)
    for _ in range(20):
        plant.q[:] = rng.uniform(-1, 1, 7)
        driver.read(state, 0.0)
        step = 2 * np.pi / counts / ratio
        assert np.all(np.abs(state.q - plant.q) <= step / 2 + 1e-15)
        assert np.allclose(state.q / step, np.round(state.q / step), atol=1e-9)


def test_torque_saturates_at_the_actuator_limit_and_is_counted():
    model, plant, driver = make_driver(transmission=Transmission(7, ratio=50.0), torque_limit=2.0)
    command = Command(model)
    command.effort[:] = 1000.0
    driver.write(command, 0.0)
    state = RobotState(model)
    driver.read(state, 0.0)
    assert np.allclose(state.effort, 2.0 * 50.0)  # joint effort = ratio x saturated motor torque
    assert driver.saturated_cycles == 1


def test_one_cycle_latency_applies_the_previous_command():
    model, plant, driver = make_driver(latency_cycles=1)
    command, state = Command(model), RobotState(model)
    command.effort[:] = 3.0
    driver.write(command, 0.0)
    driver.read(state, 0.001)
    assert np.all(state.effort == 0.0)
    command.effort[:] = 5.0
    driver.write(command, 0.001)
    driver.read(state, 0.002)
    assert np.all(state.effort == 3.0)


def test_write_advances_the_plant_by_one_period():
    model, plant, driver = make_driver()
    command = Command(model)
    for _ in range(10):
        driver.write(command, 0.0)
    assert plant.t == pytest.approx(0.01, rel=1e-12)


def test_unknown_backend_and_joints_are_named():
    model = load_urdf(bundled_model_path("arm7"))
    with pytest.raises(ValueError, match="unknown driver backend 'profinet'"):
        create_driver("profinet", model)
    plant = create_plant("rigid_body", model)
    with pytest.raises(ValueError, match="elbow"):
        SimDriver(model, SimDriver.Options(joints=["elbow"]), plant=plant, period=1e-3)
