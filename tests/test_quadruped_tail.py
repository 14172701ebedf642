"""Liu & Ben-Tzvi (2018): quadruped with a tail -- virtual-work model, generic-core cross-check, loop.

Tolerances: finite differences 1e-6 (central, step 1e-6); formulation agreement 1e-8 relative
(observed ~1e-14); random states are q0 perturbed (legs stay reachable), random rates/accelerations.
"""
from pathlib import Path

import numpy as np
import pytest

from rtctl.plants.quadruped_tail.control import (QuadrupedTailOpenLoop, QuadrupedTailPitch,
                                  simulate_pitch_tracking)
from rtctl.plants.quadruped_tail.plant import QuadrupedTailPlant
from rtctl.config import build, load_config, bundled_config_path
from rtctl.dynamics.constrained import projected_inverse_dynamics
from rtctl.plants.quadruped_tail.model import QuadrupedTail
from rtctl.plants.quadruped_tail.reference import random_states, tree_reference, tree_state

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mech():
    return QuadrupedTail()


def test_geometry_and_ik(mech):
    """Table 1 distances, stated hip layout, IK closes every leg loop (eqs. 4-10)."""
    A = mech.A
    assert np.linalg.norm(A[0] - A[1]) == pytest.approx(0.48) and np.linalg.norm(A[1] - A[2]) == pytest.approx(0.54)
    assert np.linalg.norm(mech.r) == pytest.approx(0.34)
    for q, _, _ in random_states(mech, 5, 0):
        H, K, N = mech.point_positions(q)
        assert np.allclose(np.linalg.norm(K - H, axis=1), 0.3, atol=1e-12)
        assert np.allclose(np.linalg.norm(mech.D - K, axis=1), 0.3, atol=1e-12)
        assert np.linalg.norm(N - (q[:3] + mech.rotation(q) @ mech.r)) == pytest.approx(0.6)
        ang = mech.inverse_kinematics(q)
        assert np.all(np.abs(ang[:, :2]) < np.pi / 2) and np.all((ang[:, 2] > 0) & (ang[:, 2] < np.pi))
        qa, _ = mech.joint_state(q)
        assert np.allclose(mech.forward_kinematics(qa), q, atol=1e-12)


def test_jacobians_and_accelerations_by_finite_differences(mech):
    """Joint Jacobians (eqs. 15, 16, re-derived 18), point Jacobians/accelerations (eqs. 20-31)."""
    h = 1e-6
    for q, qd, qdd in random_states(mech, 4, 1):
        qa, va = mech.joint_state(q, qd)
        fd = (mech.joint_state(q + h * qd)[0] - mech.joint_state(q - h * qd)[0]) / (2 * h)
        assert np.abs(fd - va).max() < 1e-6 * max(1, np.abs(va).max())

        def rates(t):
            return mech.joint_state(q + t * qd + 0.5 * t * t * qdd, qd + t * qdd)[1]

        ja = mech.joint_accelerations(q, qd, qdd)
        assert np.abs((rates(h) - rates(-h)) / (2 * h) - ja).max() < 1e-6 * max(1, np.abs(ja).max())

        def vel(t):
            qq, vv = q + t * qd + 0.5 * t * t * qdd, qd + t * qdd
            return mech.point_jacobians(qq) @ vv

        acc = mech.accelerations(q, qd, qdd)
        assert np.abs((vel(h) - vel(-h)) / (2 * h) - acc).max() < 1e-6 * max(1, np.abs(acc).max())
        H0, K0, N0 = mech.point_positions(q)
        H1, K1, N1 = mech.point_positions(q + h * qd)
        pos_fd = (np.vstack([H1, K1, N1]) - np.vstack([H0, K0, N0])) / h
        assert np.abs(pos_fd - mech.point_jacobians(q) @ qd).max() < 1e-5


def test_eq2_literal_is_wrong_away_from_zero(mech):
    """omega = phi-dot (eq. 2) only at phi = 0; the generic cross-check below needs omega = E phi-dot."""
    assert np.allclose(mech.euler_rate_matrix(mech.q0), np.eye(3))
    q = mech.q0.copy()
    q[3:6] = 0.1, 0.2, 0.3
    assert np.abs(mech.euler_rate_matrix(q) - np.eye(3)).max() > 0.05


@pytest.mark.slow
def test_cross_check_with_projected_generic_core(mech):
    """Virtual-work actuator torques == projected inverse dynamics of the tree (tau_p = 0 and minimum
    norm), and the virtual-work M, C, G == Phi^T M Phi, Phi^T (M Phi-dot q-dot + h - g), Phi^T g; 1e-8 rel."""
    dyn, B = tree_reference(mech)
    worst = 0.0
    for q, qd, qdd in random_states(mech, 6, 2):
        tq, tv, ta, Jc, Phi, bias = tree_state(mech, dyn, q, qd, qdd)
        assert max(np.abs(dyn.frame_placement(tq, f"foot{i}")[1] - mech.D[i]).max() for i in range(4)) < 1e-12
        for method, cols in (("paper", 8), ("min_norm", 14)):
            ref = projected_inverse_dynamics(dyn, tq, tv, ta, Jc, actuation=B[:, :cols])
            tau = mech.inverse_dynamics(q, qd, qdd, method=method)
            err = np.abs(ref.tau - tau[:cols]).max() / np.abs(ref.tau).max()
            worst = max(worst, err)
            assert err < 1e-8 and ref.residual < 1e-10
        w = np.linspace(0.5, 3.0, 14)
        ref = projected_inverse_dynamics(dyn, tq, tv, ta, Jc, actuation=B, weights=w)
        tau = mech.inverse_dynamics(q, qd, qdd, method="weighted", weights=w)
        assert np.abs(ref.tau - tau).max() < 1e-8 * np.abs(ref.tau).max()
        M, C, G = mech.dynamics_terms(q, qd)
        Mt = dyn.mass_matrix(tq)
        g = dyn.gravity_forces(tq)
        h = dyn.nonlinear_effects(tq, tv)
        Mp, Gp = Phi.T @ Mt @ Phi, Phi.T @ g
        Cp = Phi.T @ (Mt @ bias + h - g)
        assert np.abs(M - Mp).max() < 1e-8 * np.abs(Mp).max()
        assert np.abs(G - Gp).max() < 1e-8 * np.abs(Gp).max()
        assert np.abs(C - Cp).max() < 1e-8 * max(np.abs(Cp).max(), 1.0)
    print(f"cross-check worst relative torque error {worst:.2e}")


def test_id_fd_consistency_and_redundancy(mech):
    """M q'' + C + G = eqs. 38-40; FD(ID(q'')) = q''; every allocation satisfies eq. 37; minimum norm
    is the smallest; the tau_p profile is honoured."""
    for q, qd, qdd in random_states(mech, 3, 3):
        M, C, G = mech.dynamics_terms(q, qd)
        f = mech.generalized_forces(q, qd, qdd)
        assert np.abs(M @ qdd + C + G - f).max() < 1e-10 * np.abs(f).max()
        assert np.allclose(M, M.T, atol=1e-12) and np.linalg.eigvalsh(M).min() > 0
        taus = {}
        for method, kw in (("paper", {}), ("paper", {"tau_p": np.arange(6.0)}), ("min_norm", {}),
                           ("limits", {"torque_limit": np.r_[np.full(8, 50.0), np.full(6, 10.0)]})):
            tau = mech.inverse_dynamics(q, qd, qdd, method=method, **kw)
            assert np.abs(mech.actuation_force(q, tau) - f).max() < 1e-9 * np.abs(f).max()
            assert np.abs(mech.forward_dynamics(q, qd, tau) - qdd).max() < 1e-8
            taus[(method, "tau_p" in kw)] = tau
        assert np.allclose(taus[("paper", True)][8:], np.arange(6.0))
        assert np.linalg.norm(taus[("min_norm", False)]) <= np.linalg.norm(taus[("paper", False)]) + 1e-9


def test_plant_publishes_actuator_coordinates_and_rk4_converges(mech):
    """Section 4.1 over 0.3 s: public q/v are the actuator angles/rates; RK4 at 1 ms vs 0.1 ms agree to
    1e-6 (fourth order)."""
    am = mech.actuator_model()
    fine, coarse = QuadrupedTailPlant(am, QuadrupedTailPlant.Options(substeps=10)), QuadrupedTailPlant(am,
                                                                     QuadrupedTailPlant.Options(substeps=1))
    tau = np.zeros(14)
    for k in range(300):
        QuadrupedTailOpenLoop.profile(k * 1e-3, tau)
        fine.step(1e-3, tau)
        coarse.step(1e-3, tau)
    qa, va = mech.joint_state(fine.x, fine.xd)
    assert np.allclose(fine.q, qa) and np.allclose(fine.v, va)
    assert np.abs(fine.x - coarse.x).max() < 1e-6
    assert abs(fine.x[5]) > 0.1      # the tail swing yaws the torso


@pytest.mark.slow
def test_open_loop_feed_forward_drifts(mech):
    """Fig. 8: the feed-forward alone (kp = 0) leaves the desired motion within 0.2 s; the singularity
    monitor fires on the way (events bounded)."""
    err, ctl, survived = simulate_pitch_tracking(mech, 0.0, 1000, start_on_trajectory=True)   # exact initial state
    print(f"open loop: error {err[9]:.2e} at 10 ms, {err[min(99, len(err) - 1)]:.2e} at 0.1 s, "
          f"{'survived' if survived else f'left the workspace at {len(err) + 1} ms'}")
    assert err[:10].max() < 1e-3
    assert not survived or err.max() > 0.1
    assert np.argmax(err > 0.05) < 500
    assert any(e["event"] == "singularity_enter" for e in ctl.events)
    assert len(ctl.events) <= ctl.events.maxlen


@pytest.mark.slow
def test_pitch_through_rtctl_loop_tracks_and_compensation_decays():
    """Fig. 7 through `rtctl run`'s config: sim driver, plant, controller; RMS compensation torque over
    the last second < 10% of the first second; tracking error at the end < 5 mm/mrad-level (0.005)."""
    cfg = load_config(bundled_config_path("quadruped_tail_pitch"))
    cfg["controller"]["type"] = "quadruped_tail_ffpd"
    loop = build(cfg)
    loop.controller.log = np.zeros((2000, 37))
    loop.controller.logged = 0
    loop.pace = False
    report = loop.run(duration=2.0)
    assert not loop.failures and not loop.safety.tripped
    plant = loop.driver.plant
    q_d = QuadrupedTailPitch().generalized(plant.t)[0]
    assert np.abs(plant.x - q_d).max() < 5e-3
    tc = loop.controller.log[:loop.controller.logged, 14:28]
    first, last = np.sqrt(np.mean(tc[:1000] ** 2)), np.sqrt(np.mean(tc[1000:] ** 2))
    print(f"compensation RMS first second {first:.3f} N m, last second {last:.3f} N m, ratio {last / first:.4f}")
    assert last < 0.1 * first
    assert report is not None


def test_forward_config_runs():
    cfg = load_config(bundled_config_path("quadruped_tail_forward"))
    loop = build(cfg)
    loop.pace = False
    loop.run(duration=0.1)
    assert not loop.failures and loop.driver.plant.t == pytest.approx(0.1)
