"""Stewart platform in the loop: plant, pose trajectory, computed-torque controller, config, example.

Tolerances are stated per test; random states are inside the workspace.
"""
import copy

import numpy as np
import pytest

from rtctl.plants.stewart.control import StewartComputedTorque, StewartPoseTrajectory
from rtctl.plants import create_plant
from rtctl.config import build, load_config, validate, bundled_config_path
from rtctl.dynamics import Dynamics
from rtctl.plants.stewart import steps as _steps
from rtctl.registry import robot_model as actuator_model
from rtctl.plants.stewart.model import P1, P2, StewartPlatform

EXAMPLE = bundled_config_path("stewart")


@pytest.fixture(scope="module")
def mech():
    return StewartPlatform()


def test_actuator_model(mech):
    m = actuator_model("stewart")
    assert (m.nq, m.nv) == (6, 6)
    assert np.allclose(m.lower, mech.stroke[0]) and np.allclose(m.upper, mech.stroke[1])
    assert np.allclose(m.effort_limit, mech.force_limit) and m.total_mass == 0.0


def test_trig_spline_profile():
    """s = 1/2 - 9/16 cos(pi t) + 1/16 cos(3 pi t): rest-to-rest, s' = 3pi/4 sin^3, s'' its derivative."""
    tau = np.linspace(0, 1, 101)
    s, sd, sdd = np.array([_steps.trig_spline_profile(t) for t in tau]).T
    assert s[0] == pytest.approx(0, abs=1e-15) and s[-1] == pytest.approx(1, abs=1e-15)
    assert max(abs(sd[0]), abs(sd[-1]), abs(sdd[0]), abs(sdd[-1])) < 1e-12
    h = 1e-6
    for t in (0.13, 0.5, 0.77):
        sp = (_steps.trig_spline_profile(t + h)[0] - _steps.trig_spline_profile(t - h)[0]) / (2 * h)
        spp = (_steps.trig_spline_profile(t + h)[1] - _steps.trig_spline_profile(t - h)[1]) / (2 * h)
        assert sp == pytest.approx(_steps.trig_spline_profile(t)[1], rel=1e-8)
        assert spp == pytest.approx(_steps.trig_spline_profile(t)[2], rel=1e-7)
    assert np.all(np.diff(s) > 0)


def test_pose_trajectory(mech):
    traj = StewartPoseTrajectory(mechanism=mech)          # the paper's P1 -> P2 -> P1, 2 s segments
    assert np.allclose(traj.pose(0.0)[0], P1) and np.allclose(traj.pose(2.0)[0], P2)
    assert np.allclose(traj.pose(4.0)[0], P1) and traj.duration == 4.0
    q, qd, qdd = np.zeros(6), np.zeros(6), np.zeros(6)
    rng = np.random.default_rng(0)
    h = 1e-5
    for t in np.concatenate([rng.uniform(0.01, 3.99, 6), [2.0]]):
        traj.sample(t, q, qd, qdd)
        x, xd, xdd = traj.pose(t)
        assert np.allclose(q, mech.leg_lengths(x), rtol=1e-14)
        qp, qm = np.zeros((2, 6)), np.zeros((2, 6))
        traj.sample(t + h, qp[0], qp[1], np.zeros(6))
        traj.sample(t - h, qm[0], qm[1], np.zeros(6))
        assert np.allclose((qp[0] - qm[0]) / (2 * h), qd, rtol=1e-6, atol=1e-8)
        assert np.allclose((qp[1] - qm[1]) / (2 * h), qdd, rtol=1e-5, atol=1e-6)
    traj.sample(2.0, q, qd, qdd)                          # rest at P2
    assert np.abs(qd).max() < 1e-12 and np.abs(qdd).max() < 1e-12
    with pytest.raises(ValueError, match="leaves the workspace"):
        StewartPoseTrajectory(StewartPoseTrajectory.Options(times=[0, 1], waypoints=[P1, P1 + [0, 0, 1.5, 0, 0, 0]]),
                                                            mechanism=mech)


def test_plant_energy_and_leg_state(mech):
    """Unforced, frictionless: kinetic + potential energy is conserved (RK4, 1 ms, 0.3 s: < 1e-7 relative
    to the potential-energy scale); q, v stay the IK of the pose after every step."""
    plant = create_plant("stewart", actuator_model("stewart"), substeps=1)
    rng = np.random.default_rng(3)
    plant.reset_pose(mech.random_pose(rng), rng.normal(size=6) * 0.3)
    e0 = sum(plant.energy())
    hold = mech.inverse_dynamics(plant.x, np.zeros(6), np.zeros(6)) * 0.0
    for _ in range(300):
        plant.step(1e-3, hold)
        q, v, _ = mech.leg_motion(plant.x, plant.xd, np.zeros(6))
        assert np.allclose(plant.q, q, rtol=1e-14) and np.allclose(plant.v, v, rtol=1e-12, atol=1e-14)
    assert abs(sum(plant.energy()) - e0) < 1e-7 * abs(e0)
    x = plant.x.copy()
    with pytest.raises(ValueError):
        plant.step(1e-3, np.array([np.nan] * 6))
    assert np.array_equal(plant.x, x)
    plant.reset(mech.leg_lengths(P2))
    assert np.abs(plant.x - P2).max() < 1e-9


def test_plant_static_equilibrium(mech):
    plant = create_plant("stewart", actuator_model("stewart"))
    tau = mech.inverse_dynamics(P2, np.zeros(6), np.zeros(6))
    plant.reset_pose(P2)
    for _ in range(200):
        plant.step(1e-3, tau)
    assert np.abs(plant.x - P2).max() < 1e-12


def test_controller_imposes_the_leg_accelerations(mech):
    """On the exact model the computed-torque forces make the legs accelerate at alpha (1e-8 relative)."""
    ctl = StewartComputedTorque(Dynamics(actuator_model("stewart")), StewartComputedTorque.Options(
        kp=400.0), mechanism=mech)
    rng = np.random.default_rng(5)
    effort = np.zeros(6)
    for _ in range(8):
        x, xd = mech.random_pose(rng), rng.normal(size=6) * 0.5
        q, qd, _ = mech.leg_motion(x, xd, np.zeros(6))
        q_d, qd_d, qdd_d = q + rng.normal(size=6) * 1e-3, qd + rng.normal(size=6) * 1e-2, rng.normal(size=6)
        ctl.x[:] = x + 1e-3                                # warm start away from the answer
        ctl.update(0.0, 1e-3, q, qd, q_d, qd_d, qdd_d, effort)
        assert np.abs(ctl.x - x).max() < 1e-9             # FK from leg lengths
        alpha = qdd_d + ctl.kp * (q_d - q) + ctl.kd * (qd_d - qd)
        xdd = mech.forward_dynamics(x, xd, effort)
        assert np.allclose(mech.leg_motion(x, xd, xdd)[2], alpha, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="stroke"):
        ctl.update(0.0, 1e-3, np.full(6, 5.0), qd, q_d, qd_d, qdd_d, effort)


@pytest.mark.slow
def test_example_config_tracks_the_paper_trajectory():
    """plants/stewart/stewart.toml through build(): sim driver, safety, loop; tracking of the paper's path.

    Bounds: with 0.5 N s/m unmodelled leg friction and sensor noise, max leg error < 2.5 mm (observed 1.65 mm); without
    them (exact model) < 3e-5 m -- what is left is the zero-order hold of the leg forces over the
    1 ms period while the commanded acceleration changes (observed ~1.1e-5 m)."""
    cfg = load_config(EXAMPLE)
    cfg["loop"]["pace"] = False
    assert cfg["robot"]["model"] == "stewart" and cfg["plant"]["type"] == "stewart"
    report = build(cfg).run(duration=5.0)
    assert not report.tripped
    assert report.tracking_max.max() < 2.5e-3
    exact = copy.deepcopy(cfg)
    exact["plant"]["viscous_friction"] = 0.0
    exact["driver"]["position_noise"] = exact["driver"]["velocity_noise"] = 0.0
    loop = build(exact)
    report = loop.run(duration=5.0)
    assert not report.tripped and report.tracking_max.max() < 3e-5
    assert np.abs(loop.driver.plant.x - P1).max() < 1e-5   # back at P1


def test_config_validation():
    with pytest.raises(ValueError, match="unknown key 'goal' for trajectory 'stewart_pose'"):
        validate({"robot": {"model": "stewart"}, "trajectory": {"type": "stewart_pose", "goal": [1.0]}})
    cfg = validate({"robot": {"model": "stewart"}, "plant": {"type": "stewart"},
                    "controller": {"type": "stewart_computed_torque"}, "trajectory": {"type": "stewart_pose"},
                    "loop": {"pace": False, "duration": 0.05}})
    loop = build(cfg)                                      # the paper's path by default, kp defaults to 400
    assert loop.run(duration=0.05).tracking_max.max() < 1e-6   # zero-order hold only (observed 1.3e-7 m)
