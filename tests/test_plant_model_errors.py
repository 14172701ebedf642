"""Model errors of the plant the controller does not know: ``[plant] mass_scale`` and the payload.

mass_scale -- every plant's masses and inertias, whatever its formulation. Scaling every mass and inertia by f scales M, C and the gravity term alike (eq. M qdd + C + g = tau),
so a plant scaled by f driven by f tau must follow the unscaled plant driven by tau, step for step,
as long as no force outside the rigid-body dynamics acts (friction, contact and the patient's
impedance are switched off). The same scaled plant driven by tau must not: that is what catches a
plant that ignores the key.

payload -- a point mass. On a tree model its generalized gravity force is -J^T m g with J the
point's Jacobian (here by finite differences of its position); on the Stewart and jaw robots'
platforms the leg forces that hold it follow from virtual work, J_l^T df = m g e_z with J_l the
derivative of the leg lengths by the pose (finite differences of the inverse kinematics).
"""
from pathlib import Path

import numpy as np
import pytest

import rtctl

from rtctl.plants import create_plant
from rtctl.config import ConfigError, build, read_toml, validate, bundled_config_path
from rtctl.registry import robot_model as actuator_model
from rtctl.plants.geared.model import grm3_model
from rtctl.plants.legged.model import LEGGED_ROBOTS
from rtctl.model import ModelError
from rtctl.model.urdf import load_urdf

F = 1.7
STEPS, DT = 50, 1e-3
NO_PATIENT = dict(stiffness=[0.0] * 6, damping=[0.0] * 6, bolus_force=0.0, bolus_damping=0.0)


def _arm7():
    return load_urdf(Path(rtctl.__file__).parent / "data" / "models" / "arm7.urdf")


# plant type, model factory, plant options, effort scale (N m or N) of the random efforts
CASES = {
    "rigid_body": (_arm7, {}, 5.0),
    "legged": (lambda: LEGGED_ROBOTS["planar_biped"]().model, {}, 5.0),
    "geared": (grm3_model, {}, 0.5),
    "stewart": (lambda: actuator_model("stewart"), {}, 20.0),
    "jaw": (lambda: actuator_model("jaw"), NO_PATIENT, 2.0),
    "quadruped_tail": (lambda: actuator_model("quadruped_tail"), {}, 2.0),
}


def _start(plant, name):
    """The plant's own initial state; the legged robot lifted 0.5 m (no foot touches the ground) and moving."""
    if name == "legged":
        q = plant.q.copy()
        q[1] += 0.5
        plant.reset(q, np.random.default_rng(1).normal(0.0, 0.3, plant.nv))


def _run(plant, efforts):
    for tau in efforts:
        plant.step(DT, tau)
    return plant.q.copy(), plant.v.copy()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_scaled_plant_under_scaled_effort_follows_the_nominal_plant(name):
    factory, options, scale = CASES[name]
    nominal = create_plant(name, factory(), **options)
    scaled = create_plant(name, factory(), mass_scale=F, **options)
    wrong = create_plant(name, factory(), mass_scale=F, **options)
    assert scaled.parameters()["mass_scale"] == F
    for p in (nominal, scaled, wrong):
        _start(p, name)
    rng = np.random.default_rng(7)
    efforts = scale * rng.uniform(-1.0, 1.0, (STEPS, nominal.nv))
    if name == "legged":
        efforts[:, :3] = 0.0                       # the floating base is not actuated
    q1, v1 = _run(nominal, efforts)
    q2, v2 = _run(scaled, F * efforts)
    q3, v3 = _run(wrong, efforts)
    np.testing.assert_allclose(q2, q1, rtol=0, atol=1e-10)
    np.testing.assert_allclose(v2, v1, rtol=0, atol=1e-8)
    assert np.abs(v3 - v1).max() > 1e-4, "the scaled plant moved like the nominal one under the same effort"


@pytest.mark.slow
def test_config_mass_scale_reaches_every_plant_and_bad_values_are_named():
    for name, example in (("stewart", "stewart.toml"), ("jaw", "jaw.toml"), ("geared", "geared.toml"),
                          ("quadruped_tail", "quadruped_tail_forward.toml")):
        path = bundled_config_path(example.removesuffix(".toml"))
        raw = read_toml(path)
        raw["plant"]["mass_scale"] = 1.25
        cfg = validate(raw, str(path))
        cfg["_dir"] = str(path.parent)
        loop = build(cfg)
        assert loop.driver.plant.parameters()["mass_scale"] == 1.25, name
    with pytest.raises(ConfigError, match="^StewartPlant.Options mass_scale: must be finite, got nan$"):
        create_plant("stewart", actuator_model("stewart"), mass_scale=float("nan"))
    with pytest.raises(ConfigError, match="^JawPlant.Options mass_scale: expected a number, got 'heavy'$"):
        create_plant("jaw", actuator_model("jaw"), mass_scale="heavy")


def _finite_difference(fun, x, h=1e-6):
    cols = []
    for k in range(len(x)):
        e = np.zeros(len(x))
        e[k] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("frame, offset", [(None, (0.0, 0.0, 0.0)), ("link4", (0.03, -0.05, 0.12))])
def test_tree_payload_weighs_minus_jacobian_transpose_m_g(frame, offset):
    from rtctl.dynamics import Dynamics
    model = _arm7()
    mass = 2.5
    plant = create_plant("rigid_body", model, payload_mass=mass, payload_frame=frame, payload_offset=offset)
    name = frame or model.body_names[-1]
    nominal, loaded = Dynamics(model), Dynamics(plant.model)

    def point(q):
        rot, pos = nominal.frame_placement(q, name)
        return pos + rot @ np.asarray(offset)

    rng = np.random.default_rng(3)
    for _ in range(5):
        q = model.random_configuration(rng)
        jac = _finite_difference(point, q)
        expected = -jac.T @ (mass * model.gravity)
        np.testing.assert_allclose(loaded.gravity_forces(q) - nominal.gravity_forces(q), expected, atol=1e-7)
    assert plant.model.total_mass == pytest.approx(model.total_mass + mass, rel=1e-14)
    assert plant.parameters()["payload_mass"] == mass


@pytest.mark.parametrize("name", ["stewart", "jaw"])
def test_platform_payload_is_held_by_the_virtual_work_leg_forces(name):
    mass = 0.8 if name == "jaw" else 40.0
    options = NO_PATIENT if name == "jaw" else {}
    loaded = create_plant(name, actuator_model(name), payload_mass=mass, **options)
    sagging = create_plant(name, actuator_model(name), payload_mass=mass, **options)
    nominal = create_plant(name, actuator_model(name), **options)
    mech = nominal.mechanism
    robot = mech.robot if name == "jaw" else mech
    x = mech.random_pose(np.random.default_rng(5))
    hold = mech.inverse_dynamics(x, np.zeros(6), np.zeros(6), **({"impedance": False} if name == "jaw" else {}))
    jl = _finite_difference(robot.leg_lengths, x)
    extra = np.linalg.solve(jl.T, np.array([0.0, 0.0, mass * robot.g, 0.0, 0.0, 0.0]))
    for plant, effort in ((nominal, hold), (loaded, hold + extra), (sagging, hold)):
        plant.reset_pose(x)
        for _ in range(20):
            plant.step(1e-3, effort)
    assert np.abs(nominal.x - x).max() < 1e-9 and np.abs(loaded.x - x).max() < 1e-9
    assert x[2] - sagging.x[2] > 1e-4                     # without the extra forces the payload sinks


def test_payload_errors_name_the_setting():
    with pytest.raises(ConfigError, match=r"^RigidBodyPlant.Options payload_mass: must be >= 0.0, got -1.0$"):
        create_plant("rigid_body", _arm7(), payload_mass=-1.0)
    with pytest.raises(ModelError, match="has no link or frame named 'gripper'"):
        create_plant("rigid_body", _arm7(), payload_mass=1.0, payload_frame="gripper")
    with pytest.raises(ModelError, match="payload offset must be 3 finite numbers"):
        create_plant("rigid_body", _arm7(), payload_mass=1.0, payload_offset=[0.1, 0.2])
    with pytest.raises(ConfigError, match=r"^JawPlant.Options payload_offset\[0\]: expected a number, got 'up'$"):
        create_plant("jaw", actuator_model("jaw"), payload_mass=1.0, payload_offset="up")
    with pytest.raises(ValueError, match="carries a payload only at the centre of mass of its platform"):
        create_plant("stewart", actuator_model("stewart"), payload_mass=1.0, payload_offset=[0.0, 0.0, 0.1])
    path = bundled_config_path("stewart")
    raw = read_toml(path)
    raw["plant"]["payload_mass"] = 5.0
    raw["plant"]["payload_frame"] = "tool"
    with pytest.raises(ConfigError, match=r"\[plant\].*payload only at the centre of mass of its platform"):
        build(validate(raw, str(path)))
