"""Gait synthesis (Shah, Saha & Dutt 2012, Appendix B) and leg inverse kinematics (Fig. 11) of plants/legged/gait.py."""
from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from rtctl.plants.legged.gait import BipedGait, BipedWalk, QuadrupedGait, QuadrupedTrot, ipm_initial_state
from rtctl.loops.trajectories import create_trajectory
from rtctl.dynamics import Dynamics
from rtctl.plants.legged.model import QUADRUPED_LEGS, planar_biped, spatial_quadruped

G = 9.81


@pytest.fixture(scope="module")
def biped():
    return planar_biped()


@pytest.fixture(scope="module")
def quadruped():
    return spatial_quadruped()


def contact_points_world(dyn, robot, q):
    rot, pos = dyn.forward_kinematics(q)
    return np.array([rot[b] @ p + pos[b] for b, p in zip(robot.contact_bodies, robot.contact_points)])


def test_ipm_repeatability_conditions_of_eq_b1():
    """x_h(0) = -x_h(T), xdot_h(0) = xdot_h(T) for eq. B.1 with the closed-form initial state; the hip
    advances one stride per step (paper values: T = 1 s, l_s = 0.3 m, z_c = 0.96 m)."""
    T, ls, zc = 1.0, 0.3, 0.96
    w = math.sqrt(G / zc)
    x0, v0 = ipm_initial_state(T, ls, zc)
    assert x0 == pytest.approx(-ls / 2, abs=1e-15)
    xT = x0 * math.cosh(w * T) + v0 / w * math.sinh(w * T)
    vT = x0 * w * math.sinh(w * T) + v0 * math.cosh(w * T)
    assert xT == pytest.approx(-x0, rel=1e-12) and vT == pytest.approx(v0, rel=1e-12)
    # the planner's trunk (paper form: no leg compensation, no double support) is that B.1 curve
    gait = BipedGait(leg_compensation=False)
    for tau in np.linspace(0.0, 0.99, 12):
        q, v, a = gait.state(2.0 + tau)
        x_rel = q[0] - 2 * ls  # stance ankle of step 2 at x = 2 l_s
        assert x_rel == pytest.approx(x0 * math.cosh(w * tau) + v0 / w * math.sinh(w * tau), abs=1e-12)
        assert v[0] == pytest.approx(x0 * w * math.sinh(w * tau) + v0 * math.cosh(w * tau), abs=1e-12)
        assert a[0] == pytest.approx(w * w * x_rel, abs=1e-10)  # the pendulum law x'' = (g / z_c) x
        assert q[1] == pytest.approx(zc) and q[2] == 0.0 and v[1] == v[2] == 0.0


def test_gait_is_periodic_and_advances_one_stride_per_step():
    """One step moves the trunk by l_s at the same velocity; two steps (both legs or pairs) repeat the joints."""
    for gait in (BipedGait(), BipedGait(double_support=0.2), QuadrupedGait(), QuadrupedGait(double_support=0.0)):
        for t in (0.0, 0.3, 0.77):
            q0, v0, a0 = gait.state(t + 1.0)
            q1, v1, a1 = gait.state(t + 2.0)
            q2, v2, a2 = gait.state(t + 3.0)
            assert q1[0] - q0[0] == pytest.approx(gait.stride, abs=1e-12)
            assert v1[0] == pytest.approx(v0[0], abs=1e-12)
            assert q2[0] - q0[0] == pytest.approx(2 * gait.stride, abs=1e-12)
            nb = gait.robot.n_base
            np.testing.assert_allclose(q2[nb:], q0[nb:], atol=1e-12)
            np.testing.assert_allclose(v2, v0, atol=1e-12)
            np.testing.assert_allclose(a2, a0, atol=1e-9)
        assert gait.speed == pytest.approx(0.3)


def test_biped_feet_stance_still_swing_lands_on_next_foothold(biped):
    """Stance foot flat on the ground and still for the whole step (no slip), swing ankle on eq. B.2
    (x from -l_s to +l_s in the stance-ankle frame; z re-derived with 2 pi: 0 at lift-off and touch-down,
    h_f at mid-swing), feet horizontal throughout."""
    gait = BipedGait(robot=biped)
    dyn = Dynamics(biped.model)
    ls, hf = gait.stride, gait.foot_height
    for k in (0, 1, 4):
        stance = ("left_foot", "right_foot")[k % 2]
        swing = ("left_foot", "right_foot")[1 - k % 2]
        for tau in np.linspace(0.0, 1.0 - 1e-9, 11):
            t = k + tau
            q, v, _ = gait.state(t)
            p = contact_points_world(dyn, biped, q)
            st, sw = p[biped.feet[stance]], p[biped.feet[swing]]
            np.testing.assert_allclose(st[:, 2], 0.0, atol=1e-12)             # flat on the ground
            np.testing.assert_allclose(st[:, 0], [k * ls, k * ls + 0.15], atol=1e-12)
            np.testing.assert_allclose(sw[:, 2], hf / 2 * (1 - math.cos(2 * math.pi * tau)), atol=1e-12)
            assert sw[0, 0] == pytest.approx(k * ls - ls * math.cos(math.pi * tau), abs=1e-12)
            vel = dyn.jacobian(q, stance)[3:] @ v  # foot origin (ankle) velocity
            np.testing.assert_allclose(vel, 0.0, atol=1e-12)
            for foot in ("left_foot", "right_foot"):
                rot, _ = dyn.frame_placement(q, foot)
                np.testing.assert_allclose(rot, np.eye(3), atol=1e-12)
        q_end, _, _ = gait.state(k + 1.0 - 1e-12)
        p_end = contact_points_world(dyn, biped, q_end)[biped.feet[swing]]
        np.testing.assert_allclose(p_end[:, 0], [(k + 1) * ls, (k + 1) * ls + 0.15], atol=1e-9)
        np.testing.assert_allclose(p_end[:, 2], 0.0, atol=1e-9)


def test_quadruped_trot_diagonal_pairs_in_phase(quadruped):
    gait = QuadrupedGait(robot=quadruped)
    dyn = Dynamics(quadruped.model)
    legs = list(QUADRUPED_LEGS)
    fl, fr, hl, hr = (legs.index(n) for n in ("front_left", "front_right", "hind_left", "hind_right"))
    tds = gait.double_support * gait.period
    for t in np.linspace(0.0, 3.99, 60):
        q, v, _ = gait.state(t)
        p = contact_points_world(dyn, quadruped, q)
        np.testing.assert_allclose(p, gait.feet(t), atol=1e-12)  # IK reaches every planned foot point
        assert p[fl, 2] == pytest.approx(p[hr, 2], abs=1e-12) and p[fr, 2] == pytest.approx(p[hl, 2], abs=1e-12)
        np.testing.assert_allclose(p[:, 1], quadruped.hip_offsets[:, 1], atol=1e-12)  # feet under the hips
        k, tau = int(t // 1.0), t % 1.0
        swinging = (fr, hl) if k % 2 == 0 else (fl, hr)
        if tau < tds:
            np.testing.assert_allclose(p[:, 2], 0.0, atol=1e-12)                    # four-foot phase
        else:
            s = (tau - tds) / (1.0 - tds)
            np.testing.assert_allclose(p[list(swinging), 2], 0.04 * (1 - math.cos(2 * math.pi * s)), atol=1e-12)
        np.testing.assert_allclose(q[1:6], [0.0, gait.com_height, 0.0, 0.0, 0.0], atol=1e-15)  # level trunk
        np.testing.assert_allclose(v[1:6], 0.0, atol=1e-15)


@pytest.mark.parametrize("make", [lambda: BipedGait(), lambda: BipedGait(double_support=0.2),
                                  lambda: QuadrupedGait(), lambda: QuadrupedGait(foot_width=0.2)],
                         ids=["biped", "biped_ds", "quadruped", "quadruped_narrow"])
def test_rates_and_accelerations_match_finite_differences(make):
    gait = make()
    rng = np.random.default_rng(4)
    h = 1e-5
    boundaries = [k * gait.period + d for k in range(5) for d in (0.0, gait.double_support * gait.period)]
    for t in rng.uniform(0.0, 4.0, 25):
        if min(abs(t - b) for b in boundaries) < 10 * h:
            continue
        q, v, a = gait.state(t)
        qp, vp, _ = gait.state(t + h)
        qm, vm, _ = gait.state(t - h)
        np.testing.assert_allclose((qp - qm) / (2 * h), v, rtol=0, atol=2e-8 * max(1.0, np.abs(v).max()))
        np.testing.assert_allclose((vp - vm) / (2 * h), a, rtol=0, atol=2e-7 * max(1.0, np.abs(a).max()))


def test_velocity_continuous_across_phase_boundaries():
    """Positions and velocities are continuous at touch-down/lift-off; accelerations jump there (eq. B.2's
    swing ankle starts and stops with a non-zero horizontal acceleration l_s (pi / T)^2)."""
    for gait in (BipedGait(), QuadrupedGait()):
        tds = gait.double_support * gait.period
        for tb in (1.0, 2.0, 1.0 + tds):
            q0, v0, a0 = gait.state(tb - 1e-10)
            q1, v1, a1 = gait.state(tb + 1e-10)
            np.testing.assert_allclose(q1, q0, atol=1e-8)
            np.testing.assert_allclose(v1, v0, atol=1e-6)


def test_leg_compensation_keeps_the_planned_centre_of_pressure_inside_the_foot(biped):
    """Centre of pressure of the planned single-support motion (from the inverse dynamics with every DOF
    prescribed: the base rows are the ground wrench), relative to the stance ankle; the foot spans
    [0, 0.15] m. Paper form (trunk = B.1 as for a point mass at the hip): 1 cm to 13.7 cm, next to both
    edges; with the legs' mass compensated: 6.9 cm to 9.6 cm, around the foot's middle."""
    dyn = Dynamics(biped.model)

    def cop_range(gait):
        cops = []
        for t in np.linspace(1.0 + 1e-6, 2.0 - 1e-6, 60):
            q, v, a = gait.state(t)
            fx, fz, my = dyn.inverse_dynamics(q, v, a)[:3]
            assert fz > 0.9 * biped.weight
            cops.append(q[0] + (-q[1] * fx - my) / fz - gait.ankles(t)[gait.stance(t)][0])
        return min(cops), max(cops)

    lo, hi = cop_range(BipedGait(robot=biped, leg_compensation=False))
    assert lo < 0.02 and hi > 0.13
    lo, hi = cop_range(BipedGait(robot=biped, leg_compensation=True))
    assert 0.06 < lo and hi < 0.10


@pytest.mark.slow
def test_trajectory_samples_the_planned_joints_without_allocating():
    for kind, n, first in (("biped_walk", 6, 3), ("quadruped_trot", 12, 6)):
        traj = create_trajectory(kind)
        assert traj.n == n and traj.duration > 0
        q, qd, qdd = np.zeros(n), np.zeros(n), np.zeros(n)
        for t in (0.0, 0.37, 1.5, 7.25):
            traj.sample(t, q, qd, qdd)
            qf, vf, af = traj.gait.state(t)
            np.testing.assert_array_equal(q, qf[first:])
            np.testing.assert_array_equal(qd, vf[first:])
            np.testing.assert_array_equal(qdd, af[first:])
        q0, v0 = traj.initial_state()
        np.testing.assert_array_equal(q0, traj.gait.state(0.0)[0])
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            for k in range(2000):
                traj.sample(k * 1e-3, q, qd, qdd)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert peak < 512, (kind, peak)


def test_bad_inputs_raise_value_errors_naming_the_problem():
    traj = BipedWalk()
    z = np.zeros(6)
    with pytest.raises(ValueError, match="t must be finite and >= 0"):
        traj.sample(float("nan"), z, z.copy(), z.copy())
    with pytest.raises(ValueError, match="t must be finite and >= 0"):
        traj.sample(-0.1, z, z.copy(), z.copy())
    with pytest.raises(ValueError, match=r"qd must have shape \(6,\)"):
        traj.sample(0.1, z, np.zeros(5), z.copy())
    with pytest.raises(ValueError, match="out of the legs' reach"):
        BipedWalk(BipedWalk.Options(com_height=1.8))
    with pytest.raises(ValueError, match="double_support"):
        QuadrupedTrot(QuadrupedTrot.Options(double_support=0.6))
    with pytest.raises(ValueError, match="stride"):
        BipedGait(stride=-0.1)
    with pytest.raises(ValueError, match="period"):
        QuadrupedGait(period=0.0)


@pytest.mark.slow
def test_legged_controllers_take_any_numeric_vectors_on_their_slow_path():
    """Lists and float32 give the same efforts as float64 arrays; a bad effort buffer is named."""
    from rtctl.dynamics import Dynamics
    from rtctl.plants.legged.model import planar_biped
    from rtctl.plants.legged.control import BipedWalk, LeggedComputedTorque, LeggedFeedForwardPD
    robot = planar_biped()
    traj = BipedWalk(robot=robot)
    q, v = traj.initial_state()[:2]
    q_d, qd_d, qdd_d = np.zeros(6), np.zeros(6), np.zeros(6)
    traj.sample(0.3, q_d, qd_d, qdd_d)
    for cls in (LeggedFeedForwardPD, LeggedComputedTorque):
        ctl = cls(Dynamics(robot.model), cls.Options(kp=49.0, kd=14.0), robot=robot)
        fast, slow = np.zeros(9), np.zeros(9)
        ctl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, fast)
        ctl.update(0.0, 1e-3, list(q), v.astype(np.float32), list(q_d), qd_d[::1], qdd_d, slow)
        assert np.abs(fast).max() > 0 and np.allclose(slow, fast, rtol=1e-6, atol=1e-6)
        with pytest.raises(ValueError, match="effort must be a writable C-contiguous float64 array"):
            ctl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, [0.0] * 9)
