"""A simulated rigid-body plant never diverges silently (plants/integrate.py, plants/divergence.py).

* Every example-robot-data robot whose URDF declares ``<dynamics damping>`` holds mid-range at 1 kHz under
  computed torque with the plant's defaults (its URDF friction, the default integrator) for 0.3 s: no trip,
  no failure, and velocity and tracking error within what round-off can build in that time. The explicit
  RK4 that was the default let 2 N m s/rad on xArm7's 0.17 kg last link (h d / I = 14.6) reach 1e174 rad/s.
  Five cannot hold mid-range at all, each for a physical reason the test checks (:data:`CANNOT_HOLD`).
* A damper on a light link under a constant torque: the Rosenbrock step settles to tau / d as the linear
  theory says, ``v_n = (1 - R(-h d / I)^n) tau / d`` with R the method's stability function, to round-off.
* Coulomb friction 7000 times too steep for the step on that link: below the Coulomb level the link creeps
  at ``scale atanh(tau / c)``, the regularised curve's exact equilibrium; above it, it accelerates at
  ``(tau - c) / I`` after a breakaway of a few steps. Explicit RK4 on the same link chatters at a thousand
  times the creep.
* A step that leaves NaN or inf is refused with one line naming the plant, the joint and the likely cause,
  the state unchanged; an explicit integrator that cannot hold a joint's damping is refused before the run
  (one line), and a plant that fails in the run trips the run's safety with its line (the warm-up before
  the run steps a copy of the plant: its refusal does not stop the run, and nothing compiles in the run).
"""
from __future__ import annotations

import math
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_real_urdfs import URDFS

from rtctl.config import build, validate
from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf
from rtctl.plants.integrate import ROS_ALPHA, ROS_B, ROS_GAMMA, ROS_GAMMA_IJ
from rtctl.plants.rigid_body import RigidBodyPlant
from rtctl.rt.interfaces import actuated_indices

DT, HOLD = 1e-3, 0.3
ROUND_OFF = 1e-9  # relative torque error the controller's and the plant's gravity may differ by (1e-16 in fact)


def declares_damping(path) -> bool:
    """A movable joint of the URDF has ``<dynamics damping>`` > 0."""
    joints = ET.parse(path).getroot().iter("joint")
    return any(j.get("type") != "fixed" and j.find("dynamics") is not None
               and float(j.find("dynamics").get("damping", 0)) > 0 for j in joints)


DAMPED = sorted(name for name, path in URDFS.items() if declares_damping(path))
# Robots that cannot hold mid-range, by the joint that cannot (the test checks the reason, unheld_joints).
CANNOT_HOLD = {
    "pr2_description/urdf/pr2.urdf": "r_shoulder_lift_joint",  # 39.7 N m of 30; the real arm has a spring
    "tiago_description/robots/tiago_dual.urdf": "suspension_right_joint",  # 116 N of 100: the wheel stands on a floor
    "double_pendulum_description/urdf/double_pendulum.urdf": "joint1",  # passive pendulums: effort limit 0
    "double_pendulum_description/urdf/double_pendulum_continuous.urdf": "joint1",
    "double_pendulum_description/urdf/double_pendulum_simple.urdf": "joint1",
}


def mid_range(model):
    q_index, v_index, names = actuated_indices(model)
    lower, upper = model.lower[q_index], model.upper[q_index]
    finite = np.isfinite(lower) & np.isfinite(upper)
    mid = model.neutral_configuration()[q_index]
    mid[finite] = 0.5 * (lower[finite] + upper[finite])
    return mid, names


def unheld_joints(model, q_mid) -> list[str]:
    """The actuated joints nothing can hold at ``q_mid``: no actuator (effort limit 0), or gravity beyond
    the effort limit."""
    q_index, v_index, names = actuated_indices(model)
    q = model.neutral_configuration()
    q[q_index] = q_mid
    gravity = Dynamics(model).gravity_forces(q)[v_index]
    return [name for name, g, limit in zip(names, gravity, model.effort_limit[v_index]) if limit == 0 or abs(g) > limit]


def test_the_damped_robots_are_found():
    assert len(DAMPED) >= 30 and set(CANNOT_HOLD) <= set(DAMPED), DAMPED


@pytest.mark.parametrize("name", DAMPED)
@pytest.mark.slow
def test_every_damped_example_robot_holds_mid_range_at_1khz(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inertia and mimic warnings: tests/test_real_urdfs.py checks them
        model = load_urdf(URDFS[name])
    q_mid, names = mid_range(model)
    unheld = unheld_joints(model, q_mid)
    if name in CANNOT_HOLD:
        assert CANNOT_HOLD[name] in unheld, f"{name} holds mid-range now: take it out of CANNOT_HOLD"
        return
    assert not unheld, f"{name}: nothing can hold {unheld}"
    q_index = actuated_indices(model)[0]
    ranges = (model.upper - model.lower)[q_index]
    margin = min(0.05, 0.25 * float(np.min(ranges[np.isfinite(ranges)], initial=np.inf)))  # grippers' 2 cm
    raw = {"robot": {"model": URDFS[name]}, "plant": {"initial_position": q_mid.tolist()},
           "controller": {"type": "computed_torque"},
           "trajectory": {"type": "min_jerk", "goal": q_mid.tolist(), "duration": HOLD},
           "safety": {"position_margin": margin}, "loop": {"pace": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop = build(validate(raw))
    plant = loop.driver.plant
    assert np.any(plant.viscous > 0) and plant.parameters()["integrator"] == "rosenbrock"
    report = loop.run(duration=HOLD)
    assert report.cycles == round(HOLD / DT) and not report.tripped and not report.failures, report.format()
    # At the equilibrium the only torque imbalance is round-off in the two gravity computations: its
    # acceleration on the lightest joint, over the hold, bounds the velocity and (times the hold) the drift.
    dyn = plant.dynamics
    inertia = 1.0 / np.diag(np.linalg.pinv(dyn.mass_matrix(plant.q)))
    imbalance = ROUND_OFF * (1.0 + np.abs(dyn.gravity_forces(plant.q)).max())
    v_bound = HOLD * imbalance / inertia.min()
    assert np.all(np.isfinite(plant.q)) and np.abs(plant.v).max() < v_bound, (np.abs(plant.v).max(), v_bound)
    assert np.all(report.tracking_max < HOLD * v_bound), (report.tracking_max.max(), HOLD * v_bound)


WRIST = 1.4e-4  # kg m^2: xArm7's last link about its axis (here under the 10 N m s/rad of its first joints)


def light_link(damping=0.0, friction=0.0):
    b = ModelBuilder("light_link")
    b.add_body("link", -1, "revolute", axis=(0, 0, 1), mass=0.17, inertia=np.diag([2e-4, 2e-4, WRIST]),
               damping=damping, friction=friction)  # vertical axis: gravity does no work
    return b.build()


def stability_function(z):
    """R(z) of ROS34PW2 on y' = lambda y with J = lambda, z = h lambda (one step from y = 1)."""
    k = np.zeros(4)
    for i in range(4):
        stage = 1.0 + ROS_ALPHA[i, :i] @ k[:i]
        k[i] = (z * stage + z * (ROS_GAMMA_IJ[i, :i] @ k[:i])) / (1.0 - ROS_GAMMA * z)
    return 1.0 + ROS_B @ k


def test_a_stiff_damper_on_a_light_link_settles_as_the_linear_theory_says():
    damping, torque = 10.0, 0.5
    plant = RigidBodyPlant(light_link(damping=damping), RigidBodyPlant.Options(end_stops=False))
    z = -DT * damping / (WRIST + plant.model.armature[0])
    assert plant.parameters()["integrator"] == "rosenbrock" and z < -70
    r = stability_function(z)
    assert abs(r) < 0.04 and abs(stability_function(-1e12)) < 1e-11  # L-stable: R(-inf) = 0
    steady = torque / damping
    for n in range(1, 6):
        plant.step(DT, np.array([torque]))
        assert plant.v[0] == pytest.approx(steady * (1.0 - r ** n), rel=1e-12, abs=1e-15)
    # q(t) = (tau / d)(t - (I / d)(1 - e^(-t d / I))): the step cannot resolve the 14 us rise, so q is off by
    # less than one step's travel, and from then on it travels exactly h tau / d per step.
    exact = steady * (5 * DT - WRIST / damping)
    assert abs(plant.q[0] - exact) < DT * steady
    before = plant.q[0]
    plant.step(DT, np.array([torque]))
    assert plant.q[0] - before == pytest.approx(DT * steady, rel=2 * abs(r) ** 5)


def test_steep_coulomb_friction_on_a_light_link_sticks_and_slips_as_the_curve_says():
    coulomb, scale = 1.0, 1e-3   # h coulomb / (scale I) = 7100
    for torque in (0.5, 1.5):
        plant = RigidBodyPlant(light_link(friction=coulomb), RigidBodyPlant.Options(end_stops=False))
        explicit = RigidBodyPlant(light_link(friction=coulomb), RigidBodyPlant.Options(
            integrator="rk4", end_stops=False))
        speeds, chatter = [], []
        for _ in range(50):
            plant.step(DT, np.array([torque]))
            explicit.step(DT, np.array([torque]))
            speeds.append(plant.v[0])
            chatter.append(abs(explicit.v[0]))
        if torque < coulomb:
            creep = scale * math.atanh(torque / coulomb)
            assert np.all(np.abs(np.array(speeds[20:]) - creep) < 1e-9 * creep), speeds[:8]
            assert max(chatter) > 1000 * creep
        else:  # the breakaway takes the steps whose Coulomb kick h c / I = 7 rad/s exceeds the speed, then
            # the link accelerates at (tau - c) / I; it lags 4.6 steps' worth of that
            kick = DT * (torque - coulomb) / WRIST
            np.testing.assert_allclose(np.diff(speeds[-10:]), kick, rtol=1e-4)
            assert 0 < (50 * kick - speeds[-1]) / kick < 10


def test_a_non_finite_step_names_the_plant_the_joint_and_the_cause():
    model = load_urdf(URDFS["xarm_description/urdf/xarm7.urdf"])
    plant = RigidBodyPlant(model)
    plant.step(DT, np.zeros(7))
    state = plant.q.copy(), plant.v.copy(), plant.t
    effort = np.zeros(7)
    effort[3] = 1e306
    with pytest.raises(ValueError, match=r"^rigid_body plant \('UF_ROBOT'\): a step of 0\.001 s left NaN or inf at "
                                         r"joint 'joint4': a torque of 1e\+306 N m \(mostly effort, 1e\+306 N m\) "
                                         r"on an effective inertia of [\d.e+-]+ kg m\^2 changes its velocity by "
                                         r"[\d.e+]+ rad/s in one step; the state is unchanged$"):
        plant.step(DT, effort)
    assert np.array_equal(plant.q, state[0]) and np.array_equal(plant.v, state[1]) and plant.t == state[2]
    explicit = RigidBodyPlant(model, RigidBodyPlant.Options(integrator="rk4"))
    problem = (r"joint 'joint7': its viscous friction 2 N m s/rad on an effective inertia of [\d.e-]+ kg m\^2 "
               r"needs steps below [\d.e-]+ s with the explicit rk4 \(h d / I = [\d.]+ > 2\.785\); integrator "
               r"\"rosenbrock\" \(the default with joint friction\) is stable for any friction")
    assert explicit.step_size_problem(DT) and explicit.step_size_problem(1e-5) == ""
    with pytest.raises(ValueError, match=r"^rigid_body plant \('UF_ROBOT'\): a step of 0\.001 s left NaN or inf at "
                                         + problem + "; the state is unchanged$"):
        for _ in range(1000):
            explicit.step(DT, np.zeros(7))
    assert np.all(np.isfinite(explicit.v)) and np.abs(explicit.v).max() > 1e100   # the last finite state


def xarm7_config(**plant):
    q_mid, _ = mid_range(load_urdf(URDFS["xarm_description/urdf/xarm7.urdf"]))
    return {"robot": {"model": URDFS["xarm_description/urdf/xarm7.urdf"]},
            "plant": {"initial_position": q_mid.tolist(), **plant}, "controller": {"type": "computed_torque"},
            "trajectory": {"type": "min_jerk", "goal": q_mid.tolist(), "duration": 0.1}, "loop": {"pace": False}}


def test_an_explicit_integrator_that_cannot_hold_the_damping_is_refused_before_the_run():
    with pytest.raises(ValueError) as refused:
        build(validate(xarm7_config(integrator="rk4")))
    lines = str(refused.value).splitlines()
    assert len(lines) == 1 and "driver[sim]: rigid_body plant ('UF_ROBOT'): joint 'joint7': its viscous friction " \
        "2 N m s/rad" in lines[0] and 'integrator "rosenbrock"' in lines[0], lines
    build(validate(xarm7_config(integrator="rk4", substeps=100)))   # 10 us sub-steps hold it


def test_a_plant_that_fails_mid_run_trips_the_run_with_its_line():
    loop = build(validate(xarm7_config()))
    loop.driver.plant.set_external_wrench("link7", [0.0, 0.0, 0.0, 0.0, 0.0, 1e306])
    report = loop.run(duration=0.01)
    assert report.tripped and len(report.failures) == 1
    assert report.trip_reason == f"e-stop: {report.failures[0]}"
    assert report.trip_reason.startswith("e-stop: driver[sim].write: ValueError: rigid_body plant ('UF_ROBOT'): a step "
                                         "of 0.001 s left NaN or inf at joint 'joint")
    assert "(mostly external wrench" in report.trip_reason and "\n" not in report.trip_reason
    assert not loop.late_kernels  # the diagnosis reaches no kernel the run had not: the failure compiled nothing
