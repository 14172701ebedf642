"""Shah, Saha & Dutt (2012) section 5: the biped walks and the quadruped trots under feed-forward (eq. 31) and
computed-torque (eqs. 33-37) control with the foot-ground forces, through the real-time loop.

Each closed-loop run is simulated once per module (fixtures): the biped 12 s and the quadruped 5 s under
both laws at 10 kHz (kp = 49, kd = 14 as in the paper), the biped without feedback for 1 s, and the
biped under computed torque in continuous time with the stiff variable-step solver (BDF).
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from rtctl.plants.legged.control import LeggedComputedTorque, LeggedFeedForwardPD, run_walk, run_walk_offline
from rtctl.config import build, load_config, bundled_config_path
from rtctl.dynamics import Dynamics
from rtctl.dynamics.contact import ContactModel, compute_contact
from rtctl.plants.legged.model import planar_biped, spatial_quadruped

BIPED_T, QUAD_T = 12.0, 5.0


@pytest.fixture(scope="module")
def biped_runs():
    return {law: run_walk("planar_biped", law, BIPED_T) for law in ("ff", "ct")}


@pytest.fixture(scope="module")
def quadruped_runs():
    # sampled every 1 ms: on the stiff default ground the touch-down force peaks last a few ms, and 10 ms samples
    # of the summed vertical force averaged 2.8 % under the weight (1 ms: 0.5 % over, 0.1 ms: 0.2 % under, CT)
    return {law: run_walk("spatial_quadruped", law, QUAD_T, record_every=1e-3) for law in ("ff", "ct")}


@pytest.fixture(scope="module")
def biped_open_loop():
    return run_walk("planar_biped", "ff", 1.0, kp=0.0, kd=0.0)


@pytest.fixture(scope="module")
def biped_offline():
    with np.errstate(over="ignore"):  # scipy's finite-difference Jacobian probes large factors
        return run_walk_offline("planar_biped", "ct", BIPED_T)


def errors(rec):
    planned, _ = rec.planned()
    return rec.q - planned


@pytest.mark.parametrize("law", ["ff", "ct"])
@pytest.mark.slow
def test_biped_walks_forward_stably_for_12_s(biped_runs, law):
    """The paper's plan on the biped's default ground: trunk height within 5 mm of z_c = 0.96 m, pitch within
    0.02 rad, every step 0.3 m +- 5 %, joints within 1 mrad of the plan (measured: 0.47 mm, 4.0 mrad)."""
    rec = biped_runs[law]
    assert not rec.failures and not rec.report.tripped
    assert rec.t[-1] > BIPED_T - 0.02
    e = errors(rec)
    assert np.abs(rec.q[:, 1] - 0.96).max() < 5e-3
    assert np.abs(rec.q[:, 2]).max() < 0.02
    assert np.abs(e[:, 3:]).max() < 1e-3
    steps = np.searchsorted(rec.t, np.arange(0.0, BIPED_T, 1.0) - 1e-9)
    progress = np.diff(rec.q[steps, 0])
    assert len(progress) == 11 and np.all(np.abs(progress - 0.3) < 0.015), progress
    total = rec.q[-1, 0] - rec.q[0, 0]
    assert total == pytest.approx(rec.gait.state(rec.t[-1])[0][0] - rec.gait.state(0.0)[0][0], rel=0.01)
    assert np.abs(rec.q[:, 0] - rec.planned()[0][:, 0]).max() < 0.02


@pytest.mark.slow
def test_biped_ff_and_ct_joint_trajectories_agree(biped_runs):
    """Fig. 14: the support-leg joint angles under both laws agree within 1 mrad over 12 s (measured 0.04 mrad)."""
    ff, ct = biped_runs["ff"], biped_runs["ct"]
    n = min(len(ff.t), len(ct.t))
    np.testing.assert_array_equal(ff.t[:n], ct.t[:n])
    assert np.abs(ff.q[:n, 3:] - ct.q[:n, 3:]).max() < 1e-3
    assert np.abs(ff.q[:n, :3] - ct.q[:n, :3]).max() < 2e-3


@pytest.mark.slow
def test_without_control_the_biped_deviates_within_1_s(biped_open_loop, biped_runs):
    """Fig. 12: the inverse-dynamics torques alone (kp = kd = 0) lose the trunk within a second; with the same
    torques plus feedback the deviation never reaches the threshold (|pitch error| 0.05 rad or |z error| 2 cm)."""
    def deviation_time(rec):
        e = errors(rec)
        bad = (np.abs(e[:, 2]) > 0.05) | (np.abs(e[:, 1]) > 0.02) | ~np.isfinite(e).all(axis=1)
        return rec.t[np.argmax(bad)] if bad.any() else np.inf

    t_dev = deviation_time(biped_open_loop)
    assert 0.1 < t_dev < 1.0
    assert np.abs(errors(biped_open_loop)[:10, :]).max() < 2e-3  # it starts on the plan (measured 1.1e-3 at 0.09 s)
    for rec in biped_runs.values():
        assert deviation_time(rec) == np.inf


@pytest.mark.parametrize("law", ["ff", "ct"])
@pytest.mark.slow
def test_quadruped_trots_without_toppling(quadruped_runs, law):
    """Trunk height within 1 cm of z_c = 0.5 m, roll/pitch/yaw within 0.08 rad, lateral drift < 3 cm, forward
    progress within 2 % of the plan's 0.3 m per step, on the default 1e6 / 5000 ground (measured: 3.2 mm, 0.041 rad,
    2.7 cm, 0.01 %)."""
    rec = quadruped_runs[law]
    assert not rec.failures and not rec.report.tripped and rec.t[-1] > QUAD_T - 0.02
    assert np.abs(rec.q[:, 2] - 0.5).max() < 0.01
    assert np.abs(rec.q[:, 3:6]).max() < 0.08
    assert np.abs(rec.q[:, 1]).max() < 0.03
    planned = rec.gait.state(rec.t[-1])[0][0] - rec.gait.state(0.0)[0][0]
    assert rec.q[-1, 0] - rec.q[0, 0] == pytest.approx(planned, rel=0.02)
    assert np.abs(errors(rec)[:, 6:]).max() < 2e-3


@pytest.mark.slow
def test_quadruped_ff_and_ct_joint_trajectories_agree(quadruped_runs):
    """Fig. 17: joint angles under both laws agree within 2 mrad (measured 0.34 mrad)."""
    ff, ct = quadruped_runs["ff"], quadruped_runs["ct"]
    n = min(len(ff.t), len(ct.t))
    assert np.abs(ff.q[:n, 6:] - ct.q[:n, 6:]).max() < 2e-3


@pytest.mark.parametrize("robot", ["biped", "quadruped"])
@pytest.mark.slow
def test_ground_reaction_carries_the_weight_and_contacts_dissipate(biped_runs, quadruped_runs, robot):
    """Over whole gait periods the mean summed vertical GRF is the weight (the trunk returns to its height and
    vertical speed) within 1 %; the ground dissipates energy (> 0) and the energy books balance:
    change of kinetic + potential energy = effort work - dissipation, within 2.5 % of the work on the default
    1e6 / 5000 ground (the stiff dashpot's force jump at touch-down within one 0.1 ms step; measured 1.7 % biped,
    1.9 % quadruped)."""
    share = 0.025
    for rec in (biped_runs if robot == "biped" else quadruped_runs).values():
        n_periods = int(rec.t[-1] // 2.0)
        window = rec.t < 2.0 * n_periods
        fz = rec.grf[window, :, 2].sum(axis=1)
        assert fz.mean() == pytest.approx(rec.robot.weight, rel=0.01)
        assert np.all(rec.grf[:, :, 2] >= 0.0)
        acct = rec.energy_account
        assert acct["contact"] > 0.0
        assert rec.energy_change == pytest.approx(acct["effort_work"] - acct["contact"],
                                                  abs=share * abs(acct["effort_work"]))


@pytest.mark.slow
def test_single_support_load_is_on_the_stance_foot(biped_runs):
    rec = biped_runs["ct"]
    mid = (rec.t % 1.0 > 0.2) & (rec.t % 1.0 < 0.8)
    step = (rec.t // 1.0).astype(int)
    feet = [rec.robot.feet["left_foot"], rec.robot.feet["right_foot"]]
    for k in np.flatnonzero(mid):
        stance, swing = feet[step[k] % 2], feet[1 - step[k] % 2]
        assert rec.grf[k, swing, 2].sum() == 0.0
        assert rec.grf[k, stance, 2].sum() > 0.8 * rec.robot.weight


@pytest.mark.slow
def test_continuous_time_control_matches_the_10_khz_loop(biped_offline, biped_runs):
    """The paper's setting -- the law evaluated at every step of a stiff variable-step solver (BDF) -- and the
    fixed-rate loop give the same walk: trunk within 2 mm, joints within 1 mrad (measured 0.4 mm, 0.1 mrad)."""
    off, ct = biped_offline, biped_runs["ct"]
    n = min(len(off.t), len(ct.t))
    np.testing.assert_allclose(off.t[:n], ct.t[:n], atol=1e-9)
    assert np.abs(off.q[:n, :2] - ct.q[:n, :2]).max() < 2e-3
    assert np.abs(off.q[:n, 2:] - ct.q[:n, 2:]).max() < 1e-3
    acct = off.energy_account
    assert acct["contact"] > 0
    assert off.energy_change == pytest.approx(acct["effort_work"] - acct["contact"], abs=1e-3)


# -- the contact-aware control laws -----------------------------------------------------------------------
def loaded_state(robot, rng):
    """A state with every foot point pressed 0.1-1 mm into the ground and moving."""
    dyn = Dynamics(robot.model)
    q = robot.model.neutral_configuration()
    n0 = robot.n_base
    q[n0:] = rng.uniform(-0.2, 0.2, robot.model.nq - n0)
    rot, pos = dyn.forward_kinematics(q)
    lowest = min((rot[b] @ p + pos[b])[2] for b, p in zip(robot.contact_bodies, robot.contact_points))
    q[1 if n0 == 3 else 2] -= lowest + 5e-4
    return q, 0.05 * rng.normal(size=robot.model.nv)


@pytest.mark.parametrize("make", [planar_biped, spatial_quadruped], ids=["biped", "quadruped"])
def test_computed_torque_with_ground_forces_gives_the_commanded_joint_acceleration(make):
    """Eqs. 34-37 with tau^F: under the commanded effort and the ground wrenches of the same state, the
    forward dynamics accelerates the joints at alpha = qdd_d + Kp e + Kd e_dot, and the base rows are 0."""
    robot = make()
    rng = np.random.default_rng(11)
    contact = ContactModel()
    ctrl = LeggedComputedTorque(Dynamics(robot.model), LeggedComputedTorque.Options(kp=49.0, kd=14.0), contact=contact)
    dyn = Dynamics(robot.model)
    n0, n = robot.n_base, robot.n_actuated
    for _ in range(3):
        q, v = loaded_state(robot, rng)
        q_d, qd_d, qdd_d = q[n0:] + 0.01 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
        effort = np.zeros(robot.model.nv)
        ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, effort)
        f_ext, grf, _, _ = compute_contact(dyn, contact, q, v, robot.contact_bodies, robot.contact_points)
        assert grf[:, 2].sum() > 10.0
        np.testing.assert_allclose(ctrl.grf, grf, rtol=1e-12, atol=1e-9)
        assert np.all(effort[:n0] == 0.0)
        qdd = dyn.forward_dynamics(q, v, effort, f_ext=f_ext)
        alpha = qdd_d + 49.0 * (q_d - q[n0:]) + 14.0 * (qd_d - v[n0:])
        np.testing.assert_allclose(qdd[n0:], alpha, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("make", [planar_biped, spatial_quadruped], ids=["biped", "quadruped"])
def test_feed_forward_is_the_underactuated_inverse_dynamics_with_ground_forces_plus_pd(make):
    """Eq. 31 with eqs. 26-27: tau = ID(measured base, desired joints; w^F of the measured state) + Kp e + Kd e_dot."""
    robot = make()
    rng = np.random.default_rng(12)
    contact = ContactModel(stiffness=5e4, damping=300.0)
    ctrl = LeggedFeedForwardPD(Dynamics(robot.model), LeggedFeedForwardPD.Options(kp=49.0, kd=14.0), contact=contact)
    dyn = Dynamics(robot.model)
    n0, n = robot.n_base, robot.n_actuated
    q, v = loaded_state(robot, rng)
    q_d, qd_d, qdd_d = q[n0:] + 0.02 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    effort = np.zeros(robot.model.nv)
    ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, effort)
    f_ext, _, _, _ = compute_contact(dyn, contact, q, v, robot.contact_bodies, robot.contact_points)
    qw, vw, aw = q.copy(), v.copy(), np.zeros(robot.model.nv)
    qw[n0:], vw[n0:], aw[n0:] = q_d, qd_d, qdd_d
    dyn.inverse_dynamics(qw, vw, aw, f_ext=f_ext)  # loads f_ext into the workspace for the next call
    tau_id, _ = dyn.floating_base_inverse_dynamics(qw, vw, aw, n_base=n0)
    pd = 49.0 * (q_d - q[n0:]) + 14.0 * (qd_d - v[n0:])
    np.testing.assert_allclose(effort[n0:], tau_id[n0:] + pd, rtol=1e-10, atol=1e-9)
    assert np.all(effort[:n0] == 0.0)


def test_generic_floating_base_computed_torque_runs_on_the_planar_base():
    """The existing eqs. 33-37 controller finds the 3-DOF planar base; in flight the joints follow alpha."""
    from rtctl.loops.controllers import FloatingBaseComputedTorque

    robot = planar_biped()
    dyn = Dynamics(robot.model)
    ctrl = FloatingBaseComputedTorque(Dynamics(robot.model), FloatingBaseComputedTorque.Options(kp=49.0, kd=14.0))
    assert ctrl.n_base == 3 and ctrl.n == 6
    rng = np.random.default_rng(2)
    q, v = rng.uniform(-0.5, 0.5, 9), rng.normal(size=9)
    q_d, qd_d, qdd_d = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    effort = np.zeros(9)
    ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, effort)
    qdd = dyn.forward_dynamics(q, v, effort)
    np.testing.assert_allclose(qdd[3:], qdd_d + 49.0 * (q_d - q[3:]) + 14.0 * (qd_d - v[3:]), rtol=1e-9, atol=1e-9)


def test_legged_controllers_allocate_nothing_and_reject_bad_input():
    robot = spatial_quadruped()
    q, v = loaded_state(robot, np.random.default_rng(5))
    z, effort = np.zeros(12), np.zeros(18)
    for cls in (LeggedFeedForwardPD, LeggedComputedTorque):
        ctrl = cls(Dynamics(robot.model), cls.Options(kp=49.0, kd=14.0))
        ctrl.update(0.0, 1e-3, q, v, z, z, z, effort)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(1000):
                ctrl.update(0.0, 1e-3, q, v, z, z, z, effort)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert peak < 1024, (cls.__name__, peak)
        with pytest.raises(ValueError, match=r"q must have shape \(18,\)"):
            ctrl.update(0.0, 1e-3, q[:17], v, z, z, z, effort)
        with pytest.raises(ValueError, match="v contains NaN"):
            ctrl.update(0.0, 1e-3, q, np.full(18, np.nan), z, z, z, effort)
        with pytest.raises(ValueError, match=r"qdd_d must have shape \(12,\)"):
            ctrl.update(0.0, 1e-3, q, v, z, z, np.zeros(3), effort)
    with pytest.raises(ValueError, match="does not match model"):
        LeggedComputedTorque(Dynamics(robot.model), LeggedComputedTorque.Options(kp=49.0), robot=planar_biped())
    with pytest.raises(ValueError, match="contact must be a ContactModel"):
        LeggedComputedTorque(Dynamics(robot.model), LeggedComputedTorque.Options(kp=49.0), contact=3.0)


# -- configuration ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, nq", [("legged_biped.toml", 9), ("legged_quadruped.toml", 18)])
@pytest.mark.slow
def test_example_configs_build_and_run(name, nq):
    cfg = load_config(bundled_config_path(name.removesuffix(".toml")))
    cfg["loop"]["duration"] = 0.3
    loop = build(cfg)
    plant = loop.driver.plant
    q0, v0 = loop.trajectory.initial_state()
    np.testing.assert_array_equal(plant.q, q0)  # the plant starts on the gait
    np.testing.assert_array_equal(plant.v, v0)
    assert plant.q.shape == (nq,) and loop.rate_hz == 10000.0
    assert loop.controller.contact == plant.contact_model
    report = loop.run(duration=0.3)
    assert not report.tripped and not loop.failures
    assert report.tracking_max.max() < 1e-3
    assert abs(plant.q[0] - loop.trajectory.gait.state(0.3)[0][0]) < 5e-3
