"""Joint friction of the rigid-body plant (viscous, Coulomb, static with the Stribeck curve; a URDF's
``<dynamics>`` as the default) and the computed-torque controller's friction compensation."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import rtctl
from rtctl.config import build, validate
from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf
from rtctl.model.urdf_writer import model_to_urdf
from rtctl.plants.rigid_body import RigidBodyPlant

INERTIA = 0.02                       # kg m^2 about the vertical axis: gravity does no work
VISCOUS, COULOMB, STATIC, V_S, SCALE = 0.05, 0.4, 0.6, 0.2, 0.02   # SCALE: h Fs / (SCALE I) < 2.8 at h = 0.25 ms


def rotor(damping=0.0, friction=0.0):
    b = ModelBuilder("rotor")
    b.add_body("disc", -1, "revolute", axis=(0, 0, 1), mass=1.0, inertia=np.diag([0.01, 0.01, INERTIA]),
               damping=damping, friction=friction)
    return b.build()


def friction(v):
    """Armstrong-Helouvry et al. 1994, eq. 3, with the plant's tanh in place of sign(v)."""
    return -VISCOUS * v - (COULOMB + (STATIC - COULOMB) * np.exp(-(v / V_S) ** 2)) * np.tanh(v / SCALE)


def stribeck_plant(**extra):
    return RigidBodyPlant(rotor(), RigidBodyPlant.Options(viscous_friction=VISCOUS, coulomb_friction=COULOMB,
                                                          static_friction=STATIC, stribeck_velocity=V_S,
                                                          coulomb_velocity_scale=SCALE, **extra))


def test_friction_forces_follow_the_stribeck_curve():
    plant = stribeck_plant()
    for v in (-1.0, -0.2, -0.01, 0.0, 0.003, 0.1, 0.5):
        assert plant.friction_forces([v])[0] == pytest.approx(friction(v), rel=1e-14, abs=1e-15)
    assert plant.parameters()["static_friction"] == STATIC and plant.parameters()["stribeck_velocity"] == V_S


@pytest.mark.parametrize("integrator", ["rk4", "semi_implicit_euler", "rosenbrock"])
def test_coast_down_matches_the_scalar_equation(integrator):
    """A spinning disc left alone slows by friction alone: I dv/dt = friction(v), solved by scipy."""
    plant = stribeck_plant(integrator=integrator, substeps=4)
    plant.reset(v=[1.5])
    dt, steps = 1e-3, 3000
    speeds = []
    for _ in range(steps):
        plant.step(dt, np.zeros(1))
        speeds.append(plant.v[0])
    t = dt * np.arange(1, steps + 1)
    exact = solve_ivp(lambda _, v: friction(v) / INERTIA, (0, t[-1]), [1.5], t_eval=t, rtol=1e-11, atol=1e-12,
                      method="LSODA").y[0]
    # rad/s, of 1.5, at h = 0.25 ms: fourth order; first order; third order with the friction's secant
    # as the Jacobian (tangent slope below it: a looser constant, 2.7e-5 measured)
    tolerance = {"rk4": 1e-5, "semi_implicit_euler": 2e-3, "rosenbrock": 1e-4}[integrator]
    assert np.abs(np.array(speeds) - exact).max() < tolerance
    assert abs(speeds[-1]) < 1e-3       # stopped within the 3 s (the Coulomb level alone: 1.5 I / 0.4 = 75 ms)


def test_breakaway_needs_the_static_level():
    """From rest a steady torque below the static level only creeps (|v| stays below the tanh scale
    times a few); above it the disc breaks away and speeds past the Stribeck velocity."""
    speeds = {}
    for factor in (0.9, 1.1):
        plant = stribeck_plant(substeps=4)
        for _ in range(1000):
            plant.step(1e-3, np.array([factor * STATIC]))
        speeds[factor] = plant.v[0]
    assert 0 < speeds[0.9] < 5 * SCALE
    assert speeds[1.1] > V_S


def test_urdf_dynamics_are_the_default_friction(tmp_path):
    path = tmp_path / "rotor.urdf"
    path.write_text(model_to_urdf(rotor(damping=0.3, friction=0.7)))
    raw = {"robot": {"model": str(path)}, "controller": {"type": "pd", "kp": 1.0},
           "trajectory": {"type": "min_jerk", "goal": [0.1], "duration": 1.0}, "loop": {"pace": False}}
    plant = build(validate(raw)).driver.plant
    assert plant.parameters()["viscous_friction"] == 0.3 and plant.parameters()["coulomb_friction"] == 0.7
    assert plant.friction_forces([2.0])[0] == pytest.approx(-0.3 * 2.0 - 0.7 * np.tanh(2.0 / 1e-3), rel=1e-14)
    raw["plant"] = {"viscous_friction": 0.1}
    raw["controller"] = {"type": "computed_torque", "kp": 100.0, "friction_compensation": True}
    loop = build(validate(raw))
    plant = loop.driver.plant
    assert plant.parameters()["viscous_friction"] == [0.1] and plant.parameters()["coulomb_friction"] == 0.7
    assert loop.controller.friction_compensation and loop.controller._coulomb.tolist() == [0.7]


@pytest.mark.parametrize("options, message", [
    (dict(static_friction=0.5), "static_friction needs stribeck_velocity"),
    (dict(stribeck_velocity=0.1), "stribeck_velocity is given without static_friction"),
    (dict(static_friction=0.5, stribeck_velocity=0.0), r"stribeck_velocity(\[0\])?: must be > 0"),
    (dict(static_friction=-0.5, stribeck_velocity=0.1), r"static_friction(\[0\])?: must be >= 0.0"),
])
def test_bad_stribeck_settings_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        RigidBodyPlant(rotor(), RigidBodyPlant.Options(**options))


@pytest.mark.parametrize("kind, robot", [("computed_torque", "arm7"), ("ff_pd", "arm7"), ("pd_gravity", "arm7"),
                                         ("floating_base_computed_torque", "quadruped12"),
                                         ("legged_computed_torque", "spatial_quadruped")])
@pytest.mark.slow
def test_friction_compensation_adds_the_models_dynamics_along_the_desired_velocity(kind, robot):
    """Every model-based law adds exactly ``damping qd_d + friction sign(qd_d)`` on the actuated joints and
    nothing on a floating base's rows; independent PD, which has no model terms, refuses the option."""
    from rtctl.plants.legged.model import LEGGED_ROBOTS
    from rtctl.registry import CONTROLLERS
    from rtctl.rt.interfaces import actuated_indices

    if robot in LEGGED_ROBOTS:
        model = LEGGED_ROBOTS[robot]().model
    else:
        model = load_urdf(rtctl.bundled_model_path(robot), floating_base="free_flyer" if "floating" in kind else None)
    actuated = actuated_indices(model)[1]
    n = len(actuated)
    model.damping[actuated] = np.linspace(0.1, 0.7, n)
    model.friction[actuated] = np.linspace(1.0, 0.4, n)
    plain = CONTROLLERS.create(kind, Dynamics(model), kp=100.0)
    compensated = CONTROLLERS.create(kind, Dynamics(model), kp=100.0, friction_compensation=True)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    q_d, qd_d, qdd_d = (rng.normal(size=n) for _ in range(3))
    qd_d[n // 2] = 0.0
    expected = np.zeros(model.nv)
    expected[actuated] = model.damping[actuated] * qd_d + model.friction[actuated] * np.sign(qd_d)
    a, b = np.zeros(model.nv), np.zeros(model.nv)
    plain.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, a)
    compensated.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, b)
    round_off = 1e-14 * max(1.0, np.abs(a).max())     # a random pose sinks the legged robot: 8e5 N m
    np.testing.assert_allclose(b - a, expected, rtol=1e-12, atol=round_off)
    compensated.update(0.0, 1e-3, list(q), v, q_d, list(qd_d), qdd_d, b)      # the slow path converts lists
    np.testing.assert_allclose(b - a, expected, rtol=1e-12, atol=round_off)


def test_independent_pd_has_no_friction_compensation():
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    from rtctl.registry import CONTROLLERS
    with pytest.raises(ValueError, match="controller 'pd' .*unexpected keyword argument 'friction_compensation'"):
        CONTROLLERS.create("pd", Dynamics(model), kp=10.0, friction_compensation=True)
    raw = {"robot": {"model": "arm7"}, "controller": {"type": "pd", "kp": 10.0, "friction_compensation": True}}
    with pytest.raises(ValueError, match="friction_compensation"):
        build(validate(raw))


def platform_plant(kind, **friction_options):
    from rtctl.plants.jaw.model import JawRehabRobot
    from rtctl.plants.stewart.model import StewartPlatform
    from rtctl.registry import PLANTS

    mechanism = StewartPlatform() if kind == "stewart" else JawRehabRobot()
    model = (mechanism if kind == "stewart" else mechanism.robot).actuator_model()
    return PLANTS.create(kind, model, **friction_options)


@pytest.mark.parametrize("kind", ["stewart", "jaw"])
def test_platform_legs_follow_the_rigid_body_plants_stribeck_curve(kind):
    """The Stewart and jaw plants' leg friction is the rigid-body plant's curve (one formula, written twice:
    the legs' compiled kernel and the rigid-body table), per leg and with per-leg values."""
    plant = platform_plant(kind, viscous_friction=VISCOUS, coulomb_friction=COULOMB, static_friction=STATIC,
                           stribeck_velocity=V_S, coulomb_velocity_scale=SCALE)
    reference = stribeck_plant()
    for v in (-1.0, -0.2, -0.01, 0.0, 0.003, 0.1, 0.5):
        np.testing.assert_allclose(plant.friction_forces(np.full(6, v)), reference.friction_forces([v])[0],
                                   rtol=1e-14, atol=1e-15)
    assert plant.parameters()["static_friction"] == STATIC
    levels = np.linspace(0.5, 1.0, 6)
    per_leg = platform_plant(kind, coulomb_friction=0.4, static_friction=levels, stribeck_velocity=V_S,
                             coulomb_velocity_scale=SCALE)
    np.testing.assert_allclose(-per_leg.friction_forces(np.zeros(6) + 1.0), 0.4 + (levels - 0.4) * np.exp(-25.0)
                               * np.tanh(1.0 / SCALE), rtol=1e-14)
    np.testing.assert_allclose(-per_leg.friction_forces(np.full(6, 50 * SCALE)), levels - (levels - 0.4) *
                               (1 - np.exp(-(50 * SCALE / V_S) ** 2)), rtol=1e-12)


@pytest.mark.parametrize("kind", ["stewart", "jaw"])
@pytest.mark.parametrize("options, message", [
    (dict(static_friction=0.5), "static_friction needs stribeck_velocity"),
    (dict(stribeck_velocity=0.1), "stribeck_velocity is given without static_friction"),
    (dict(static_friction=0.5, stribeck_velocity=0.0), r"stribeck_velocity(\[0\])?: must be > 0"),
    (dict(static_friction=[0.5] * 5, stribeck_velocity=0.1), "static_friction must be a number or 6 numbers"),
])
def test_bad_platform_stribeck_settings_are_named(kind, options, message):
    with pytest.raises(ValueError, match=message):
        platform_plant(kind, **options)


@pytest.mark.slow
def test_a_stewart_leg_push_below_the_static_level_only_creeps():
    """At rest at home, held against gravity by the generalized-momentum model's leg forces: an extra push on
    every leg below the legs' static level moves the platform by less than the tanh scale allows; above it
    the platform breaks away and the legs speed past the Stribeck velocity."""
    static, coulomb, v_s, scale = 40.0, 20.0, 0.05, 0.002    # h static / (scale m_leg) ~ 0.5: RK4 stays stable
    rates = {}
    for factor in (0.9, 1.2):
        plant = platform_plant("stewart", coulomb_friction=coulomb, static_friction=static, stribeck_velocity=v_s,
                               coulomb_velocity_scale=scale, substeps=16)
        home = plant.mechanism.home
        hold = plant.mechanism.inverse_dynamics(home, np.zeros(6), np.zeros(6))
        for _ in range(300):
            plant.step(1e-3, hold + factor * static)
        rates[factor] = np.abs(plant.v).max()
    assert rates[0.9] < 3 * scale
    assert rates[1.2] > v_s
