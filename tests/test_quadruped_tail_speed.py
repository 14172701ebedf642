"""Liu & Ben-Tzvi (2018), quadruped with a tail: the compiled per-cycle steps against the Python path they
replaced, and their allocation.

The reference (``rtctl.plants.quadruped_tail.reference``) solves with numpy: joint accelerations per leg,
Kabsch by numpy's SVD, ``lstsq`` for the generalized rates and accelerations, the condition number by the SVD,
the allocations by ``numpy.linalg.solve``. The compiled path uses the normal equations (Cholesky), a Jacobi
SVD, LU and Cholesky on preallocated arrays. Agreement: 1e-10 relative to max(1, |reference|) (observed
~1e-13) on random states near q0, on the pitch run and across the singularity switch.
"""
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import rtctl.plants.quadruped_tail as quadruped_tail_package
from allocation_counter import run_with_allocation_counters
from rtctl.config import build, bundled_config_path, load_config
from rtctl.dynamics import Dynamics
from rtctl.plants.quadruped_tail import reference as ref
from rtctl.plants.quadruped_tail.control import QuadrupedTailFFPD, QuadrupedTailPitch
from rtctl.plants.quadruped_tail.model import QuadrupedTail
from rtctl.plants.quadruped_tail.plant import QuadrupedTailPlant

TOL = 1e-10
PACKAGE_DIR = str(Path(quadruped_tail_package.__file__).parent)


def rel_err(new, old):
    new, old = np.asarray(new, float), np.asarray(old, float)
    return np.abs(new - old).max() / max(1.0, np.abs(old).max())


@pytest.fixture(scope="module")
def mech():
    return QuadrupedTail()


def actuator_motion(mech, q, qd, qdd):
    qa, va = mech.joint_state(q, qd)
    return qa, va, mech.joint_accelerations(q, qd, qdd)


def test_kinematic_kernels_match_numpy_reference(mech):
    """Joint accelerations (second derivative of eq. 5), forward kinematics (Kabsch), generalized motion
    (least squares over eqs. 27-28) and cond(J_tau_a) (eq. 27) agree with the numpy path to 1e-10."""
    worst = {"ja": 0.0, "fk": 0.0, "gm": 0.0, "cond": 0.0}
    for q, qd, qdd in ref.random_states(mech, 40, 11):
        qa, va, aa = actuator_motion(mech, q, qd, qdd)
        worst["ja"] = max(worst["ja"], rel_err(aa, ref.reference_joint_accelerations(mech, q, qd, qdd)))
        worst["fk"] = max(worst["fk"], rel_err(mech.forward_kinematics(qa), ref.reference_forward_kinematics(mech, qa)))
        for new, old in zip(mech.generalized_motion(qa, va, aa), ref.reference_generalized_motion(mech, qa, va, aa)):
            worst["gm"] = max(worst["gm"], rel_err(new, old))
        c_new, c_old = mech.condition_number(q), ref.reference_condition_number(mech, q)
        worst["cond"] = max(worst["cond"], abs(c_new - c_old) / c_old)
    print({k: f"{v:.1e}" for k, v in worst.items()})
    assert max(worst.values()) < TOL
    # the generalized motion recovered from the actuator motion is the one it came from (independent check)
    q, qd, qdd = next(ref.random_states(mech, 1, 12))
    for got, want in zip(mech.generalized_motion(*actuator_motion(mech, q, qd, qdd)), (q, qd, qdd)):
        assert rel_err(got, want) < 1e-9


def test_allocations_match_numpy_reference(mech):
    """Eq. 41 (LU) and the minimum-norm / weighted allocation (Cholesky) agree with numpy's solves, and the
    allocated torques reproduce the force (eq. 46)."""
    rng = np.random.default_rng(13)
    for q, qd, qdd in ref.random_states(mech, 10, 14):
        force = rng.normal(0.0, 20.0, 8)
        for method in ("paper", "min_norm"):
            tau = mech.allocate(q, force, method=method)
            assert rel_err(tau, ref.reference_allocate(mech, q, force, method)) < TOL
            assert rel_err(mech.actuation_force(q, tau), force) < TOL
            assert rel_err(mech.inverse_dynamics(q, qd, qdd, method=method),
                           ref.reference_inverse_dynamics(mech, q, qd, qdd, method)) < TOL


def test_controller_step_matches_reference_and_switches_alike(mech):
    """QuadrupedTailFFPD's compiled step == the Python update it replaced (effort, tau_ff, tau_c, estimate,
    cond, log row) on random measured/desired pairs, with a threshold that puts about half of them above
    it: the same singularity events at the same cycles."""
    states = list(ref.random_states(mech, 60, 15))
    conds = [ref.reference_condition_number(mech, q) for q, _, _ in states[:30]]
    threshold = float(np.median(conds))
    ctl = QuadrupedTailFFPD(Dynamics(mech.actuator_model()), QuadrupedTailFFPD.Options(kp=400.0),
                            cond_threshold=threshold, log_capacity=30)
    old = ref.ReferenceFFPD(mech, kp=400.0, cond_threshold=threshold)
    e_new, e_old = np.zeros(14), np.zeros(14)
    worst = 0.0
    for k, (measured, desired) in enumerate(zip(states[:30], states[30:])):
        qa, va, _ = actuator_motion(mech, *measured)
        ctl.update(k * 1e-3, 1e-3, qa, va, *actuator_motion(mech, *desired), e_new)
        old.update(k * 1e-3, 1e-3, qa, va, *actuator_motion(mech, *desired), e_old)
        for new, ref_value in ((e_new, e_old), (ctl.tau_ff, old.tau_ff), (ctl.tau_c, old.tau_c),
                               (ctl.q_est, old.q_est), (ctl.qd_est, old.qd_est)):
            worst = max(worst, rel_err(new, ref_value))
        assert abs(ctl.cond - old.cond) < TOL * old.cond
        assert np.array_equal(ctl.log[k], np.r_[ctl.tau_ff, ctl.tau_c, ctl.q_est, ctl.cond])
    print(f"controller step vs reference: worst relative error {worst:.1e}, events {len(ctl.events)}")
    assert worst < TOL
    assert len(ctl.events) >= 2 and list(ctl.events) == [
        {**e, "cond": pytest.approx(e["cond"], rel=TOL)} for e in old.events]
    assert ctl.logged == 30


@pytest.mark.slow
def test_pitch_run_matches_reference_every_cycle(mech):
    """300 cycles of the section-4.2 pitch run (plant at 2 RK4 substeps, t0 = 0.05 s so q0 is held first):
    trajectory sample and controller effort == the reference at the same inputs, every cycle; the plant
    follows the motion (the feed-forward alone leaves it by 0.05 within 0.5 s, test_quadruped_tail)."""
    plant = QuadrupedTailPlant(mech.actuator_model(), QuadrupedTailPlant.Options(substeps=2))
    traj, traj_old = QuadrupedTailPitch(QuadrupedTailPitch.Options(t0=0.05)), ref.ReferencePitch(t0=0.05)
    ctl = QuadrupedTailFFPD(Dynamics(mech.actuator_model()), QuadrupedTailFFPD.Options(kp=400.0))
    old = ref.ReferenceFFPD(mech, kp=400.0)
    d_new, d_old = [np.zeros(14) for _ in range(3)], [np.zeros(14) for _ in range(3)]
    e_new, e_old = np.zeros(14), np.zeros(14)
    for k in range(300):
        t = k * 1e-3
        traj.sample(t, *d_new)
        traj_old.sample(t, *d_old)
        assert max(rel_err(a, b) for a, b in zip(d_new, d_old)) < TOL, t
        ctl.update(t, 1e-3, plant.q, plant.v, *d_new, e_new)
        old.update(t, 1e-3, plant.q, plant.v, *d_new, e_old)
        assert rel_err(e_new, e_old) < TOL, t
        plant.step(1e-3, e_new)
    assert np.abs(plant.x - traj.generalized(0.3)[0]).max() < 0.015     # 7.6e-3 in the transient at 0.3 s


def test_bad_inputs_raise_one_clear_error(mech):
    ctl = QuadrupedTailFFPD(Dynamics(mech.actuator_model()), QuadrupedTailFFPD.Options(kp=400.0))
    qa, va, aa = actuator_motion(mech, *next(ref.random_states(mech, 1, 16)))
    bad = "the actuator-space arrays must hold 14 finite values each"
    with pytest.raises(ValueError, match=f"quadruped_tail_ffpd: {bad}"):
        ctl.update(0.0, 1e-3, qa[:8], va, qa, va, aa, np.zeros(14))
    with pytest.raises(ValueError, match=f"quadruped_tail_ffpd: {bad}"):
        ctl.update(0.0, 1e-3, qa, va, qa, np.r_[va[:13], np.nan], aa, np.zeros(14))
    far = qa.copy()
    far[2:6] = np.pi - 0.04          # all knees straight: the best-fit pose puts a foot out of reach
    with pytest.raises(ValueError, match="quadruped_tail_ffpd: a foot is out of reach"):
        ctl.update(0.0, 1e-3, qa, va, far, va, aa, np.zeros(14))
    with pytest.raises(ValueError, match="quadruped_tail_ffpd: redundant_method 'weighted'.*weights"):
        QuadrupedTailFFPD(Dynamics(mech.actuator_model()), redundant_method="weighted")
    with pytest.raises(ValueError, match=f"quadruped_tail_pitch at t = 0.1 s: {bad}"):
        QuadrupedTailPitch().sample(0.1, np.zeros(8), np.zeros(14), np.zeros(14))


ALLOC_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.dynamics import Dynamics
    from rtctl.plants.quadruped_tail import dynamics as qd, steps
    from rtctl.plants.quadruped_tail.control import QuadrupedTailFFPD, QuadrupedTailPitch
    from rtctl.plants.quadruped_tail.model import QuadrupedTail
    from rtctl.plants.quadruped_tail.plant import QuadrupedTailPlant

    @njit
    def cycles(n, traj_args, desired, ctl_in, ctl_out, plant_args, plant_state, effort, tw, cw, pw):
        bad = 0
        for k in range(n):
            t = k * 1e-3
            bad += steps.pitch_sample(t, *traj_args, desired[0], desired[1], desired[2], *tw)
            st, cond = steps.ffpd_step(*ctl_in, plant_state[0], plant_state[1], desired[0], desired[1],
                                       desired[2], *ctl_out, *cw)
            bad += st
            bad += qd.plant_step(*plant_args, plant_state[0], plant_state[1], *pw)
        return bad

    ctl = QuadrupedTailFFPD(Dynamics(QuadrupedTail().actuator_model()), QuadrupedTailFFPD.Options(kp=400.0),
                        log_capacity=10)
    traj = QuadrupedTailPitch()
    m = ctl.mechanism
    plant = QuadrupedTailPlant(m.actuator_model(), QuadrupedTailPlant.Options(substeps=2))
    desired, effort = np.zeros((3, 14)), np.zeros(14)
    plant_state = np.zeros((2, 14))
    plant_state[0], plant_state[1] = plant.q, plant.v
    args = (traj._head, desired, ctl._head,
            (ctl.kp, ctl.kd, ctl.cond_threshold, ctl._redundant_mode, ctl._weights, ctl._tau0, effort, ctl.tau_ff,
             ctl.tau_c, ctl._gen, ctl.log, 10),
            (m.par, m.A, m.D, m.r, plant.x, plant.xd, effort, 1e-3, 2, plant._work), plant_state, effort,
            traj._scratch, ctl._scratch, plant._step_work)
    assert cycles(1, *args) == 0
    counts = allocations(cycles, *args)
    print("allocations for 1 and 300 cycles:", counts)
    assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_compiled_cycle_allocates_nothing():
    """Trajectory sample, controller step and plant step (2 RK4 substeps) of the pitch example, 300 cycles from a
    compiled loop: numba's allocation counter does not move (see tests/test_allocation.py)."""
    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")


def test_loop_cycle_allocates_nothing_in_the_quadruped_tail_components():
    """The pitch example through rtctl's loop (sim driver, plant, controller, trajectory): after warm-up, 500
    cycles leave no memory growth in this package, and the package's per-cycle calls hold nothing beyond their
    argument tuples."""
    loop = build(load_config(bundled_config_path("quadruped_tail_pitch")))
    loop.pace = False
    loop.run(duration=0.01)
    ctl, traj, plant = loop.controller, loop.trajectory, loop.driver.plant
    q_d, qd_d, qdd_d, effort = np.zeros(14), np.zeros(14), np.zeros(14), np.zeros(14)
    tracemalloc.start()
    try:
        for k in range(300):      # traced cycles first: values replaced every cycle (cond, cycle > 256) count once
            loop.step(0.01 + k * 1e-3)
        before = tracemalloc.take_snapshot()
        for k in range(300, 800):
            loop.step(0.01 + k * 1e-3)
        after = tracemalloc.take_snapshot()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for k in range(500):
            t = 0.81 + k * 1e-3
            traj.sample(t, q_d, qd_d, qdd_d)
            ctl.update(t, 1e-3, plant.q, plant.v, q_d, qd_d, qdd_d, effort)
            plant.step(1e-3, effort)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    growth = [s for s in after.compare_to(before, "filename")
              if s.traceback[0].filename.startswith(PACKAGE_DIR) and (s.size_diff > 0 or s.count_diff > 0)]
    assert not growth, growth
    # what remains is transient: the argument tuple of the largest compiled call (~56 B per argument)
    arguments = len(ctl._head) + 17 + len(ctl._scratch)
    print(f"peak traced memory of a cycle's calls: {peak} B ({arguments} arguments to the controller step)")
    assert peak < 100 * arguments, peak
    assert not loop.failures
