"""rtctl models built from compiled MuJoCo models agree with MuJoCo's own dynamics.

For every model file available without a download -- gymnasium's MuJoCo assets (quadruped ``ant``,
``humanoid``, planar ``hopper`` / ``walker2d`` / ``half_cheetah``, the 7-DOF ``pusher`` arm, ...) and every
URDF of example-robot-data compiled by MuJoCo's URDF importer, with a fixed and a free-flyer base -- the
rtctl model of :func:`rtctl.plants.mujoco.model.model_from_mujoco` gives, at random states, the inverse
dynamics of ``mj_inverse`` and the mass matrix of ``mj_fullM`` (contacts, joint limits and every other
constraint off, springs, dampers and fluid forces off, gravity and armature on) to ``oracle.close(rtol=1e-9)``.
MuJoCo's free joint differs from rtctl's: ``qvel = T v`` with ``T = diag(R, I)`` (R the base orientation),
so ``tau = T^T qfrc``, ``M = T^T M_mj T`` and ``qacc = T a + [R (omega x v_lin); 0]``.

Refused, each listed with its reason: URDFs whose inertias MuJoCo's compiler rejects (it names the link),
and models without a joint. Menagerie models are checked the same way when the mujoco-menagerie package has
them in its local cache (never downloaded here); tests/test_menagerie.py checks those PyPI wheels ship.
Effort limits come from what bounds the force (a servo's forcerange, never its position range); a linear
joint equality is a mimic joint MuJoCo's constraint agrees with; other equalities and tendons with forces of
their own are refused naming them. The bundled MJCF files agree with their sources (rtctl's own
URDF loader, the planar biped of Shah, Saha & Dutt, 2012) to 1e-9, and malformed MJCF is refused naming the element.
"""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import importlib.util
import os
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco extra (rtctl[mujoco]) is not installed")

from oracle import close, worst_relative_error  # noqa: E402

from rtctl.dynamics import Dynamics  # noqa: E402
from rtctl.model.urdf import load_urdf  # noqa: E402
from rtctl.plants.mujoco.model import (MujocoModelError, compile_model, load_mujoco_model,  # noqa: E402
                                       model_from_mujoco)
from rtctl.plants.mujoco.state import to_mujoco_state, to_rtctl_state  # noqa: E402
from rtctl.plants.mujoco.plant import bundled_model  # noqa: E402

RTOL = 1e-9
N_STATES = 3
pytestmark = pytest.mark.filterwarnings("ignore:compiler attribute 'settotalmass' is deprecated")


def gymnasium_assets() -> dict:
    if importlib.util.find_spec("gymnasium") is None:
        return {}
    assets = importlib.resources.files("gymnasium") / "envs" / "mujoco" / "assets"
    return {p.name: Path(os.fspath(p)) for p in assets.iterdir() if p.name.endswith(".xml")}


def example_robot_data_urdfs() -> dict:
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    return {"/".join(f.parts[f.parts.index("robots") + 1:]): Path(f.locate()) for f in files
            if f.suffix == ".urdf" and "robots" in f.parts}


GYM = gymnasium_assets()
URDFS = example_robot_data_urdfs()

# MuJoCo's compiler refuses these URDFs (with either base), naming the link: physically inconsistent
# inertias (not positive definite, or principal moments violating A + B >= C) and massless moving links.
INCONSISTENT_INERTIA = {
    "alex_description/urdf/alex_psyonic_hands.urdf": "LeftPsyonicAbilityBaseLink",
    "allegro_hand_description/urdf/allegro_left_hand.urdf": "link_11.0",
    "allegro_hand_description/urdf/allegro_right_hand.urdf": "link_3.0",
    "anymal_b_simple_description/robots/anymal-kinova.urdf": "base",
    "anymal_b_simple_description/robots/anymal.urdf": "base",
    "anymal_c_simple_description/urdf/anymal.urdf": "depth_camera_front_camera",
    "b1_description/urdf/b1-z1.urdf": "base",
    "b1_description/urdf/b1.urdf": "base",
    "finger_edu_description/robots/finger_edu.urdf": "finger_lower_link",
    "go1_description/urdf/go1.urdf": "base",
    "hyq_description/robots/hyq_no_sensors.urdf": "base_link",
    "icub_description/robots/icub.urdf": "l_ankle_2",
    "icub_description/robots/icub_reduced.urdf": "l_ankle_2",
    "pr2_description/urdf/pr2.urdf": "sensor_mount_link",
    "romeo_description/urdf/romeo_laas_small.urdf": "body",
    "romeo_description/urdf/romeo_small.urdf": "RShoulderYawLink",
    "tiago_description/robots/tiago.urdf": "base_antenna_left_link",
    "tiago_description/robots/tiago_dual.urdf": "base_antenna_left_link",
    "tiago_description/robots/tiago_no_hand.urdf": "base_antenna_left_link",
}
MASSLESS_MOVING_LINK = {
    "human_description/robots/human.urdf": "left_upperleg_virtual",
    "romeo_description/urdf/romeo.urdf": "LFinger11Link",
}
# Nothing moves: a single rigid body on a fixed base, or an empty <robot>.
NO_JOINTS = {("hector_description/robots/quadrotor_base.urdf", "fixed"),
             ("iris_description/robots/iris_simple.urdf", "fixed"),
             ("ur_description/urdf/ur3.urdf", "fixed"), ("ur_description/urdf/ur3.urdf", "free_flyer")}


def refusal(name: str, base: str):
    """(what the error must say, the element it names) for a URDF MuJoCo or rtctl refuses, else None."""
    if name in INCONSISTENT_INERTIA:
        return r"inertia must (have positive eigenvalues|satisfy A \+ B >= C)", INCONSISTENT_INERTIA[name]
    if name in MASSLESS_MOVING_LINK:
        return "mass and inertia of moving bodies must be larger", MASSLESS_MOVING_LINK[name]
    if (name, base) in NO_JOINTS:
        return "(no joints|no body to put a free joint on)", None
    return None


def dynamics_only(m):
    """``m`` with everything but rigid-body dynamics and armature off (contacts, limits, springs, ...)."""
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT | mujoco.mjtDisableBit.mjDSBL_SPRING
                              | mujoco.mjtDisableBit.mjDSBL_DAMPER)
    m.opt.density = m.opt.viscosity = 0.0
    m.body_gravcomp[:] = 0.0
    return m


def mujoco_reference(m, d, model, q, v, a):
    """(tau, M) of MuJoCo at rtctl's (q, v, a), in rtctl's coordinates (module docstring)."""
    to_mujoco_state(q, v, model.has_free_flyer, d.qpos, d.qvel)
    qacc = a.copy()
    transform = np.eye(model.nv)
    if model.has_free_flyer:
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, d.qpos[3:7])
        rot = rot.reshape(3, 3)
        transform[:3, :3] = rot
        qacc[:3] = rot @ (a[:3] + np.cross(v[3:6], v[:3]))
    d.qacc[:] = qacc
    mujoco.mj_inverse(m, d)
    mass = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, mass)
    return transform.T @ d.qfrc_inverse, transform.T @ mass @ transform


def check_against_mujoco(m, model, seed=0):
    """Worst relative errors (inverse dynamics, mass matrix) of rtctl against MuJoCo at random states."""
    dynamics_only(m)
    d = mujoco.MjData(m)
    dyn = Dynamics(model)
    rng = np.random.default_rng(seed)
    worst_tau = worst_mass = 0.0
    for _ in range(N_STATES):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        tau_ref, mass_ref = mujoco_reference(m, d, model, q, v, a)
        tau, mass = dyn.inverse_dynamics(q, v, a), dyn.mass_matrix(q)
        assert close(tau, tau_ref, rtol=RTOL), f"inverse dynamics: worst {worst_relative_error(tau, tau_ref):.3g}"
        assert close(mass, mass_ref, rtol=RTOL), f"mass matrix: worst {worst_relative_error(mass, mass_ref):.3g}"
        worst_tau = max(worst_tau, worst_relative_error(tau, tau_ref))
        worst_mass = max(worst_mass, worst_relative_error(mass, mass_ref))
    return worst_tau, worst_mass


@pytest.mark.skipif(not GYM, reason="gymnasium (a test extra) is not installed")
@pytest.mark.parametrize("name", sorted(GYM))
@pytest.mark.slow
def test_gymnasium_model_agrees_with_mujoco(name):
    model, m = load_mujoco_model(GYM[name])
    expected_base = {"ant.xml": "free_flyer", "humanoid.xml": "free_flyer", "humanoidstandup.xml": "free_flyer",
                     "hopper.xml": "planar", "walker2d.xml": "planar", "walker2d_v5.xml": "planar",
                     "half_cheetah.xml": "planar"}.get(name, "fixed")
    assert model.base == expected_base
    assert model.nv == m.nv and model.nq == m.nq
    assert np.allclose(model.armature, m.dof_armature)
    check_against_mujoco(m, model)


def test_the_quadruped_and_humanoid_are_among_them():
    if not GYM:
        pytest.skip("gymnasium (a test extra) is not installed")
    assert {"ant.xml", "humanoid.xml", "pusher.xml"} <= set(GYM)


CASES = [(name, base) for name in sorted(URDFS) for base in ("fixed", "free_flyer")]


@pytest.mark.skipif(not URDFS, reason="example-robot-data (a test extra) is not installed")
@pytest.mark.parametrize("name,base", CASES)
@pytest.mark.slow
def test_example_robot_data_urdf_compiled_by_mujoco_agrees(name, base):
    expected = refusal(name, base)
    if expected is not None:
        with pytest.raises(MujocoModelError) as info:
            load_mujoco_model(URDFS[name], floating_base=None if base == "fixed" else base)
        message = str(info.value)
        assert str(URDFS[name]) in message and re.search(expected[0], message), message
        if expected[1] is not None:
            assert f"Element name '{expected[1]}'" in message, message
        return
    model, m = load_mujoco_model(URDFS[name], floating_base=None if base == "fixed" else base)
    assert model.base == base
    check_against_mujoco(m, model)


def test_the_refusals_are_a_minority_and_the_arms_quadrupeds_humanoids_load():
    if not URDFS:
        pytest.skip("example-robot-data (a test extra) is not installed")
    refused = {name for name, base in CASES if refusal(name, base) is not None}
    loaded = {name.rsplit("/", 1)[-1] for name in URDFS if name not in refused}
    assert {"panda.urdf", "ur5_robot.urdf", "solo12.urdf", "a1.urdf", "go2.urdf", "talos_reduced.urdf",
            "g1_29dof_rev_1_0.urdf"} <= loaded
    assert len(refused) < len(URDFS) / 2


def test_state_conversions_are_inverse_and_rotate_the_base_velocity():
    model, m = load_mujoco_model(GYM["ant.xml"]) if GYM else pytest.skip("gymnasium is not installed")
    rng = np.random.default_rng(3)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    qpos, qvel = np.zeros(m.nq), np.zeros(m.nv)
    to_mujoco_state(q, v, True, qpos, qvel)
    assert np.array_equal(qpos[3:7], [q[6], q[3], q[4], q[5]])
    q2, v2 = np.zeros(model.nq), np.zeros(model.nv)
    to_rtctl_state(qpos, qvel, True, q2, v2)
    assert np.allclose(q2, q, rtol=0, atol=1e-15) and np.allclose(v2, v, rtol=0, atol=1e-14)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    world_velocity = np.zeros(6)          # [omega; v] of the torso origin, world axes
    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, 1, world_velocity, 0)
    rot = d.xmat[1].reshape(3, 3)
    assert np.allclose(rot.T @ world_velocity[3:], v[:3], atol=1e-12)   # rtctl: the body-frame linear velocity
    assert np.allclose(rot.T @ world_velocity[:3], v[3:6], atol=1e-12)


@cache
def bundled(name):
    return load_mujoco_model(bundled_model(name))


@pytest.mark.skipif(not URDFS, reason="example-robot-data (a test extra) is not installed")
def test_bundled_panda_is_example_robot_data_panda_with_fixed_fingers(tmp_path):
    from rtctl.plants.mujoco.bundle import panda_source_urdf
    ours, m = bundled("panda")
    source = load_urdf(panda_source_urdf(tmp_path))
    assert ours.joint_names == source.joint_names == [f"panda_joint{k}" for k in range(1, 8)]
    assert np.array_equal(ours.lower, source.lower) and np.array_equal(ours.upper, source.upper)
    assert np.array_equal(ours.effort_limit, source.effort_limit)       # the motors' control range
    compare_models(ours, source)
    check_against_mujoco(m, ours)


@pytest.mark.skipif(not URDFS, reason="example-robot-data (a test extra) is not installed")
def test_bundled_solo12_is_example_robot_data_solo12():
    from rtctl.plants.mujoco.bundle import SOLO_TORQUE_LIMIT
    ours, m = bundled("solo12")
    source = load_urdf(URDFS["solo_description/robots/solo12.urdf"], "free_flyer")
    assert ours.joint_names[1:] == source.joint_names[1:] and ours.base == "free_flyer"
    assert np.allclose(ours.effort_limit[6:], SOLO_TORQUE_LIMIT)
    assert m.ngeom == 5 and m.nu == 12                          # floor and four feet; 12 motors
    compare_models(ours, source)
    check_against_mujoco(m, ours)


def test_bundled_planar_biped_is_the_papers_planar_biped():
    from rtctl.plants.legged.model import planar_biped
    ours, m = bundled("planar_biped")
    seed = planar_biped().model
    assert ours.joint_names == seed.joint_names and ours.base == seed.base == "planar"
    compare_models(ours, seed)
    check_against_mujoco(m, ours)


def compare_models(ours, reference):
    """Inverse dynamics and mass matrix of two rtctl models of one robot at random states (same coordinates)."""
    d1, d2 = Dynamics(ours), Dynamics(reference)
    rng = np.random.default_rng(7)
    for _ in range(N_STATES):
        q = reference.random_configuration(rng)
        v, a = rng.normal(size=reference.nv), rng.normal(size=reference.nv)
        tau, tau_ref = d1.inverse_dynamics(q, v, a), d2.inverse_dynamics(q, v, a)
        assert close(tau, tau_ref, rtol=RTOL), worst_relative_error(tau, tau_ref)
        assert close(d1.mass_matrix(q), d2.mass_matrix(q), rtol=RTOL)


def test_mjcf_export_round_trips_the_seed_robots():
    from rtctl import bundled_model_path
    from rtctl.plants.legged.model import spatial_quadruped
    from rtctl.plants.mujoco.export import mjcf_from_model
    for model in (spatial_quadruped().model, load_urdf(bundled_model_path("humanoid"), "free_flyer")):
        m = mujoco.MjModel.from_xml_string(mjcf_from_model(model, min_inertia=1e-9))
        back = model_from_mujoco(m)
        assert back.joint_names == model.joint_names and back.base == model.base
        assert np.array_equal(back.lower, model.lower) and np.array_equal(back.upper, model.upper)
        compare_models(back, model)


def write(tmp_path, text, name="bad.xml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_ball_joint_is_refused_naming_it(tmp_path):
    path = write(tmp_path, """<mujoco><worldbody><body name="arm"><joint name="shoulder" type="ball"/>
        <geom type="capsule" size="0.05" fromto="0 0 0 0 0 -0.3"/></body></worldbody></mujoco>""")
    with pytest.raises(MujocoModelError, match=r"bad\.xml: joint 'shoulder' of body 'arm': ball joints are not"):
        load_mujoco_model(path)


def test_a_second_free_body_is_refused_naming_it(tmp_path):
    path = write(tmp_path, """<mujoco><worldbody>
        <body name="robot"><freejoint name="root"/><geom type="sphere" size="0.1"/></body>
        <body name="box" pos="1 0 0"><freejoint name="box_free"/><geom type="box" size="0.1 0.1 0.1"/></body>
        </worldbody></mujoco>""")
    with pytest.raises(MujocoModelError, match="joint 'box_free' of body 'box': a free joint is supported only"):
        load_mujoco_model(path)


def test_mjcf_mujoco_cannot_compile_is_refused_naming_file_element_and_line(tmp_path):
    path = write(tmp_path, """<mujoco><worldbody>
        <body name="link"><joint name="j" type="hinge" axis="0 1 0"/>
          <geom type="capsule" size="0.05" fromto="0 0 0 0 0 -0.3" colour="red"/></body>
        </worldbody></mujoco>""")
    with pytest.raises(MujocoModelError) as info:
        load_mujoco_model(path)
    message = str(info.value)
    assert message.startswith(f"{path}: MuJoCo cannot compile it") and "colour" in message and "line 3" in message


def test_missing_file_and_bad_base_are_refused(tmp_path):
    with pytest.raises(MujocoModelError, match="no such model file"):
        compile_model(tmp_path / "nothing.xml")
    with pytest.raises(MujocoModelError, match="floating_base must be 'fixed' or 'free_flyer'"):
        compile_model(bundled_model("panda"), floating_base="planar")


def menagerie_cached_models():
    """(name, MJCF path) of the Menagerie arms, quadrupeds, bipeds and humanoids already in mujoco-menagerie's
    local cache (or its MENAGERIE_ROOT checkout); the reason as a string when there are none. No I/O beyond
    looking at the cache: nothing is downloaded."""
    if importlib.util.find_spec("mujoco_menagerie") is None:
        return "the mujoco-menagerie package is not installed"
    import mujoco_menagerie
    store = mujoco_menagerie.Cache()
    found = []
    for robot in mujoco_menagerie.robots():
        if robot.category not in ("arm", "quadruped", "biped", "humanoid"):
            continue
        directory = store.root / robot.name if store.root else store.model_path(robot)
        if (store.root and directory.is_dir()) or store.is_cached(robot):
            found.append((robot.name, directory / robot.entry(robot.default_model).file))
    return found or f"no Menagerie arm, quadruped or humanoid is in the local cache ({store.dir})"


MENAGERIE = menagerie_cached_models()


@pytest.mark.skipif(isinstance(MENAGERIE, str), reason=str(MENAGERIE))
@pytest.mark.parametrize("name,path", [] if isinstance(MENAGERIE, str) else MENAGERIE)
def test_cached_menagerie_model_agrees_or_is_refused_naming_the_element(name, path):
    try:
        model, m = load_mujoco_model(path)
    except MujocoModelError as exc:
        assert re.search(r"(joint|body) '[^']+'|Element|equality \w+ |tendon ", str(exc)), str(exc)
        pytest.skip(f"{name}: refused: {exc}")
    check_against_mujoco(m, model)


def test_menagerie_check_never_downloads():
    if isinstance(MENAGERIE, str):
        assert "not installed" in MENAGERIE or "local cache" in MENAGERIE
    else:
        assert all(path.is_file() for _, path in MENAGERIE)


ARM3 = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="l1"><joint name="j1" axis="0 1 0" {j1}/><geom type="capsule" size="0.05" fromto="0 0 0 0 0 -0.3"/>
    <body name="l2" pos="0 0 -0.3"><joint name="j2" axis="0 1 0" ref="0.2"/>
      <geom type="capsule" size="0.04" fromto="0 0 0 0 0 -0.3"/>
      <body name="l3" pos="0 0 -0.3"><joint name="j3" type="slide" axis="0 0 1" ref="-0.1"/>
        <geom type="sphere" size="0.05"/></body></body></body>
  <body name="free_end" pos="1 0 0"><geom type="sphere" size="0.05" mass="0"/></body>
</worldbody>{extra}</mujoco>"""


def arm3(tmp_path, extra="", j1=""):
    return write(tmp_path, ARM3.format(extra=extra, j1=j1))


def test_effort_limits_come_from_what_bounds_the_force(tmp_path):
    """A motor: gear x gain x control range, capped by its forcerange; a position servo: gear x forcerange,
    never its control range (a position); the joint's actuatorfrcrange caps the sum."""
    path = arm3(tmp_path, j1='actuatorfrcrange="-40 40"', extra="""<actuator>
        <motor joint="j1" gear="100" ctrlrange="-1 1"/>
        <position joint="j2" kp="500" ctrlrange="-3 3" forcerange="-7 7" gear="2"/>
        <position joint="j3" kp="500" ctrlrange="-3 3"/>
        <motor joint="j2" gear="5" ctrlrange="-1 1" forcerange="-0.5 0.5"/></actuator>""")
    model, m = load_mujoco_model(path)
    assert model.effort_limit.tolist() == [40.0, 2 * 7.0 + 5 * 0.5, np.inf]


def test_a_linear_joint_equality_is_a_mimic_joint_mujoco_keeps(tmp_path):
    """``<equality joint1 joint2 polycoef="a0 a1 0 0 0">``: q1 - q1_0 = a0 + a1 (q2 - q2_0) (q_0 the refs), rtctl's
    mimic q1 = a1 q2 + (q1_0 + a0 - a1 q2_0); at coupled states MuJoCo's equality residual is zero."""
    path = arm3(tmp_path, j1='ref="0.3"', extra='<equality><joint joint1="j1" joint2="j2" polycoef="0.05 -1.5 0 0 0"/>'
                                              '</equality>')
    model, m = load_mujoco_model(path)
    (mimic,) = model.mimic.mimics
    assert (mimic.name, mimic.leader, mimic.multiplier) == ("j1", "j2", -1.5)
    assert mimic.offset == pytest.approx(0.3 + 0.05 + 1.5 * 0.2, abs=1e-15)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(2)
    for _ in range(3):
        d.qpos[:] = model.mimic.full_q(rng.normal(size=model.mimic.nq))
        mujoco.mj_forward(m, d)
        rows = d.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        assert rows.sum() == 1 and abs(d.efc_pos[rows][0]) < 1e-14
    check_against_mujoco(m, model)


@pytest.mark.parametrize("extra,message", [
    ('<equality><connect body1="l3" body2="free_end" anchor="0 0 0"/></equality>',
     r"equality connect #0 \(bodies 'l3' and 'free_end'\): a connect constraint closes a kinematic loop"),
    ('<equality><weld name="hold" body1="l2"/></equality>',
     r"equality weld 'hold' \(#0\) \(bodies 'l2' and 'world'\): a weld constraint closes a kinematic loop \(or fixes a body\)"),
    ('<equality><joint joint1="j1" joint2="j2" polycoef="0 1 0.5 0 0"/></equality>',
     r"equality joint #0 \(joints 'j1' and 'j2'\): polycoef \[0.0, 1.0, 0.5, 0.0, 0.0\]: only an active linear"),
    ('<equality><joint name="lock" joint1="j1"/></equality>', r"equality joint 'lock' \(#0\) \(joint 'j1'\): polycoef"),
    ('<tendon><fixed name="spring" stiffness="10"><joint joint="j1" coef="1"/><joint joint="j2" coef="-1"/></fixed>'
     '</tendon>', r"tendon 'spring' \(#0\) has stiffness: it applies forces rtctl's dynamics do not model"),
])
def test_equalities_and_tendons_rtctl_cannot_represent_are_refused_naming_them(tmp_path, extra, message):
    with pytest.raises(MujocoModelError, match=message) as info:
        load_mujoco_model(arm3(tmp_path, extra=extra))
    assert str(info.value).startswith(f"{tmp_path / 'bad.xml'}: ")


def test_a_tendon_that_only_transmits_an_actuator_force_is_accepted(tmp_path):
    path = arm3(tmp_path, extra='<tendon><fixed name="split"><joint joint="j1" coef="0.5"/><joint joint="j2" '
                                'coef="0.5"/></fixed></tendon><actuator><motor tendon="split" ctrlrange="-1 1"/></actuator>')
    model, m = load_mujoco_model(path)
    assert m.ntendon == 1 and model.mimic is None
    check_against_mujoco(m, model)
