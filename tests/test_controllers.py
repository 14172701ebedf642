"""Controllers of :mod:`loops.controllers` (Shah, Saha & Dutt, 2012, eqs. 31-37).

Closed-loop checks run the arm7 plant with a small RK4 integrator of
``Dynamics.forward_dynamics`` at dt = 1 ms, the effort held constant over each
step (zero-order hold, as a 1 kHz digital loop applies it), tracking a
minimum-jerk move of 0.5-1 rad per joint in 1.5 s followed by 0.5 s of hold.
"""
import textwrap
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

import rtctl
from rtctl.registry import CONTROLLERS
from rtctl.loops import (
    PD,
    ComputedTorque,
    Controller,
    FeedForwardPD,
    FloatingBaseComputedTorque,
    MinimumJerk,
    PDGravity,
    create_controller,
)
from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf

from allocation_counter import run_with_allocation_counters

ROOT = Path(__file__).resolve().parent.parent
LOOPS_DIR = str(ROOT / "loops")
DT, T_END = 1e-3, 2.0
Q_START = np.array([0.3, 0.5, -0.4, -1.0, 0.5, 0.8, 0.2])
Q_GOAL = Q_START + np.array([0.8, 0.6, -0.7, 0.9, -1.0, 0.5, 1.0])



# The joint-space laws of loops.controllers; mechanism-specific controllers (Stewart, geared,
# quadruped with tail) register in the same registry and are tested with their mechanisms.
GENERIC_KINDS = {k: c for k, c in CONTROLLERS.all().items() if c.__module__ == "rtctl.loops.controllers"}

def arm7(mass_scale=1.0):
    """arm7, optionally with every body's mass and inertia scaled (a wrong model for the controller)."""
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    if mass_scale != 1.0:  # as Model.with_inertia_scaled does: scale the arrays, then re-pack the kernel tables
        model.mass = model.mass * mass_scale
        model.inertia_com = model.inertia_com * mass_scale
        model.packed_int, model.packed_float = model._pack()
    return model


def quadruped():
    return load_urdf(rtctl.bundled_model_path("quadruped12"), "free_flyer")


@pytest.fixture(scope="module")
def plant():
    return Dynamics(arm7())


@pytest.fixture(scope="module")
def joint_gains(plant):
    """Torque-level gains for a 20 rad/s critically damped loop per joint: Kp = 400 diag(M), Kd = 40 diag(M).

    (Unit-inertia gains such as kp = 400, kd = 40 would make the wrist, with ~4e-4 kg m^2, far too stiff
    for a 1 ms loop.)
    """
    m_diag = np.maximum(np.diag(plant.mass_matrix(Q_START)), np.diag(plant.mass_matrix(0.5 * (Q_START + Q_GOAL))))
    return 400.0 * m_diag, 40.0 * m_diag


def simulate(plant, controller, trajectory, q0, t_end=T_END, dt=DT):
    """RK4 with the effort held over each step; returns the max |q_d - q| at every control instant."""
    n = plant.model.nv
    q, v, tau = np.array(q0, dtype=float), np.zeros(n), np.zeros(n)
    q_d, qd_d, qdd_d = np.zeros(n), np.zeros(n), np.zeros(n)
    fd = plant.forward_dynamics
    errors = np.empty(round(t_end / dt))
    for k in range(errors.size):
        trajectory.sample(k * dt, q_d, qd_d, qdd_d)
        errors[k] = np.abs(q_d - q).max()
        controller.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)
        a1 = fd(q, v, tau)
        v2 = v + 0.5 * dt * a1
        a2 = fd(q + 0.5 * dt * v, v2, tau)
        v3 = v + 0.5 * dt * a2
        a3 = fd(q + 0.5 * dt * v2, v3, tau)
        v4 = v + dt * a3
        a4 = fd(q + dt * v3, v4, tau)
        q = q + dt / 6 * (v + 2 * v2 + 2 * v3 + v4)
        v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    assert np.all(np.isfinite(q))
    return errors


@pytest.fixture(scope="module")
def move():
    return MinimumJerk(MinimumJerk.Options(start=Q_START, goal=Q_GOAL, duration=1.5))


@pytest.fixture(scope="module")
def ct_errors(plant, move):
    return simulate(plant, ComputedTorque(Dynamics(arm7()), ComputedTorque.Options(kp=400.0)), move, Q_START)


# -- closed loop on arm7 ----------------------------------------------------------------
def test_computed_torque_tracks_with_exact_model(ct_errors):
    # Continuous-time CT would give qdd = alpha exactly; what remains is the 1 ms hold (error ~ dt).
    assert ct_errors.max() < 1e-3, ct_errors.max()
    assert ct_errors[-1] < 1e-5


def test_feed_forward_pd_with_ten_percent_mass_error_stays_bounded(plant, move, joint_gains):
    wrong = arm7(1.1)
    scaled = 1.1 * plant.mass_matrix(Q_START)  # entries within 1e-12 of the largest (some are 1e-5 of it)
    np.testing.assert_allclose(Dynamics(wrong).mass_matrix(Q_START), scaled, rtol=1e-12, atol=1e-12 * abs(scaled).max())
    kp, kd = joint_gains
    errors = simulate(plant, FeedForwardPD(Dynamics(wrong), FeedForwardPD.Options(kp=kp, kd=kd)), move, Q_START)
    assert errors.max() < 0.05, errors.max()  # measured: ~0.015 rad
    exact = simulate(plant, FeedForwardPD(Dynamics(arm7()), FeedForwardPD.Options(kp=kp, kd=kd)), move, Q_START)
    assert exact.max() < 1e-3 and exact.max() < errors.max() / 10


def test_pd_alone_is_much_worse_than_computed_torque(plant, move, joint_gains, ct_errors):
    kp, kd = joint_gains
    errors = simulate(plant, PD(Dynamics(arm7()), PD.Options(kp=kp, kd=kd)), move, Q_START)
    assert errors.max() > 10 * ct_errors.max(), (errors.max(), ct_errors.max())
    assert errors.max() > 0.05  # gravity and inertia left to the feedback


def test_pd_gravity_holds_a_static_pose(plant, joint_gains):
    kp, kd = joint_gains
    assert np.abs(plant.gravity_forces(Q_GOAL)).max() > 10.0  # a pose that gravity loads
    hold = MinimumJerk(MinimumJerk.Options(start=Q_GOAL, goal=Q_GOAL, duration=1.0))
    errors = simulate(plant, PDGravity(Dynamics(arm7()), PDGravity.Options(kp=kp, kd=kd)), hold, Q_GOAL + 0.1)
    assert errors[0] == pytest.approx(0.1)
    assert errors[1000] < 1e-3 and errors[-1] < 1e-7 and errors[-1] < errors[1500] < errors[1000]
    # without the gravity term the same PD sags by a steady error
    sag = simulate(plant, PD(Dynamics(arm7()), PD.Options(kp=kp, kd=kd)), hold, Q_GOAL + 0.1)
    assert sag[-1] > 0.05 and abs(sag[-1] - sag[-200]) < 1e-3


def test_computed_torque_law_gives_qdd_equal_alpha(plant):
    rng = np.random.default_rng(7)
    ctrl = ComputedTorque(Dynamics(arm7()), ComputedTorque.Options(kp=[100, 200, 300, 400, 500, 600, 700], kd=20.0))
    np.testing.assert_array_equal(ctrl.kd, 20.0)
    tau = np.zeros(7)
    for _ in range(5):
        q, v = arm7().random_configuration(rng), rng.normal(size=7)
        q_d, qd_d, qdd_d = q + 0.1 * rng.normal(size=7), rng.normal(size=7), rng.normal(size=7)
        ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)
        alpha = qdd_d + ctrl.kp * (q_d - q) + ctrl.kd * (qd_d - v)  # eq. 37
        np.testing.assert_allclose(ctrl.alpha, alpha, rtol=1e-15)
        np.testing.assert_allclose(tau, plant.mass_matrix(q) @ alpha + plant.nonlinear_effects(q, v), rtol=1e-10)
        np.testing.assert_allclose(plant.forward_dynamics(q, v, tau), alpha, rtol=1e-9, atol=1e-9 * np.abs(alpha).max())


def test_model_terms_of_ff_pd_pd_gravity_and_pd(plant):
    rng = np.random.default_rng(11)
    q, v = arm7().random_configuration(rng), rng.normal(size=7)
    q_d, qd_d, qdd_d = q + 0.1 * rng.normal(size=7), rng.normal(size=7), rng.normal(size=7)
    kp, kd = rng.uniform(10, 100, 7), rng.uniform(1, 10, 7)
    pd = kp * (q_d - q) + kd * (qd_d - v)
    expected = {
        FeedForwardPD: plant.inverse_dynamics(q_d, qd_d, qdd_d) + pd,  # eq. 31
        PDGravity: plant.gravity_forces(q) + pd,
        PD: pd,
    }
    tau = np.zeros(7)
    for cls, want in expected.items():
        cls(Dynamics(arm7()), cls.Options(kp=kp, kd=kd)).update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)
        np.testing.assert_allclose(tau, want, rtol=1e-12, atol=1e-12, err_msg=cls.__name__)


# -- floating base (quadruped12) ------------------------------------------------------
def random_floating_state(model, rng):
    q = model.random_configuration(rng, span=1.0)
    return q, rng.normal(size=model.nv)


def test_floating_base_computed_torque_on_quadruped():
    model = quadruped()
    plant = Dynamics(quadruped())
    ctrl = FloatingBaseComputedTorque(Dynamics(model), FloatingBaseComputedTorque.Options(kp=100.0))
    assert ctrl.n == 12 and ctrl.n_base == 6
    np.testing.assert_array_equal(ctrl.kd, 20.0)
    rng = np.random.default_rng(5)
    tau = np.full(model.nv, np.nan)
    for _ in range(5):
        q, v = random_floating_state(model, rng)
        q_d = q[7:] + 0.2 * rng.normal(size=12)
        qd_d, qdd_d = rng.normal(size=12), 3.0 * rng.normal(size=12)
        ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)
        assert np.all(tau[:6] == 0.0)  # the base is not actuated: exactly zero
        alpha = qdd_d + ctrl.kp * (q_d - q[7:]) + ctrl.kd * (qd_d - v[6:])  # eq. 37
        acc = plant.forward_dynamics(q, v, tau)
        np.testing.assert_allclose(acc[6:], alpha, rtol=0, atol=1e-9 * np.abs(alpha).max())
        np.testing.assert_allclose(ctrl.acc[:6], acc[:6], rtol=0, atol=1e-9 * np.abs(acc).max())  # eq. 34
        # eq. 36 with the explicit GIM blocks gives the same joint forces
        big_m, h = plant.mass_matrix(q), plant.nonlinear_effects(q, v)
        i0, it0, ith = big_m[:6, :6], big_m[6:, :6], big_m[6:, 6:]
        eq36 = (ith - it0 @ np.linalg.solve(i0, it0.T)) @ alpha + h[6:] - it0 @ np.linalg.solve(i0, h[:6])
        np.testing.assert_allclose(tau[6:], eq36, rtol=1e-9, atol=1e-9 * np.abs(eq36).max())


def test_feed_forward_pd_on_floating_base_uses_measured_base_state():
    model = quadruped()
    plant = Dynamics(quadruped())
    ctrl = FeedForwardPD(Dynamics(model), FeedForwardPD.Options(kp=50.0))
    rng = np.random.default_rng(9)
    q, v = random_floating_state(model, rng)
    qdd_d = rng.normal(size=12)
    tau = np.zeros(model.nv)
    ctrl.update(0.0, 1e-3, q, v, q[7:].copy(), v[6:].copy(), qdd_d, tau)  # on the desired motion: pure feed-forward
    a = np.zeros(model.nv)
    a[6:] = qdd_d
    want, _ = plant.floating_base_inverse_dynamics(q, v, a)
    assert np.all(tau[:6] == 0.0)
    np.testing.assert_allclose(tau, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(plant.forward_dynamics(q, v, tau)[6:], qdd_d, atol=1e-9)
    q_d = q[7:] + 0.1
    ctrl.update(0.0, 1e-3, q, v, q_d, v[6:].copy(), qdd_d, tau)  # PD on top, ID along the desired joint state
    q_ff = q.copy()
    q_ff[7:] = q_d
    want, _ = plant.floating_base_inverse_dynamics(q_ff, v, a)
    want[6:] += 50.0 * 0.1
    np.testing.assert_allclose(tau, want, rtol=1e-12, atol=1e-12)


def test_pd_gravity_and_pd_on_floating_base_leave_base_rows_zero():
    model = quadruped()
    rng = np.random.default_rng(2)
    q, v = random_floating_state(model, rng)
    tau = np.full(model.nv, np.nan)
    pd = 10.0 * 0.1 - np.sqrt(10.0) * 2 * v[6:]
    for cls in (PDGravity, PD):
        cls(Dynamics(model), cls.Options(kp=10.0)).update(0.0, 1e-3, q, v, q[7:] + 0.1, np.zeros(12), np.zeros(12), tau)
        assert np.all(tau[:6] == 0.0) and np.all(np.isfinite(tau))
        if cls is PDGravity:  # joint rows of g(q) with the base held still
            np.testing.assert_allclose(tau[6:], Dynamics(model).gravity_forces(q)[6:] + pd, rtol=1e-12)
    np.testing.assert_allclose(tau[6:], pd, rtol=1e-14)


def test_floating_base_computed_torque_with_euler_angle_base():
    b = ModelBuilder("planar_leg")
    trunk = b.add_euler_floating_base("trunk", mass=5.0, inertia=np.diag([0.1, 0.2, 0.15]))
    hip = b.add_body("thigh", trunk, "revolute", axis=(0, 1, 0), translation=(0, 0, -0.1), mass=1.0,
                     com=(0, 0, -0.15), inertia=np.diag([0.01, 0.01, 0.002]))
    b.add_body("shank", hip, "revolute", axis=(0, 1, 0), translation=(0, 0, -0.3), mass=0.5,
               com=(0, 0, -0.15), inertia=np.diag([0.005, 0.005, 0.001]))
    model = b.build()
    ctrl = FloatingBaseComputedTorque(Dynamics(model), FloatingBaseComputedTorque.Options(kp=25.0))
    assert ctrl.n_base == 6 and ctrl.n == 2
    rng = np.random.default_rng(4)
    q, v = rng.normal(size=8) * 0.3, rng.normal(size=8)
    tau = np.zeros(8)
    ctrl.update(0.0, 1e-3, q, v, np.array([0.2, -0.4]), np.zeros(2), np.array([1.0, -2.0]), tau)
    assert np.all(tau[:6] == 0.0)
    alpha = np.array([1.0, -2.0]) + 25.0 * (np.array([0.2, -0.4]) - q[6:]) + 10.0 * (0.0 - v[6:])
    np.testing.assert_allclose(Dynamics(model).forward_dynamics(q, v, tau)[6:], alpha, atol=1e-9 * np.abs(alpha).max())
    with pytest.raises(ValueError, match="FloatingBaseComputedTorque"):
        ComputedTorque(Dynamics(model), ComputedTorque.Options(kp=1.0))


def test_base_type_mismatch_is_rejected():
    with pytest.raises(ValueError, match="floating base.*use FloatingBaseComputedTorque"):
        ComputedTorque(Dynamics(quadruped()), ComputedTorque.Options(kp=100.0))
    with pytest.raises(ValueError, match="fixed base; use ComputedTorque"):
        FloatingBaseComputedTorque(Dynamics(arm7()), FloatingBaseComputedTorque.Options(kp=100.0))


# -- gains, factory and argument checks ---------------------------------------------
def test_gains_default_and_validation():
    dyn = Dynamics(arm7())
    ctrl = PD(dyn, PD.Options(kp=[1, 4, 9, 16, 25, 36, 49]))
    np.testing.assert_allclose(ctrl.kd, 2 * np.sqrt(ctrl.kp))  # critically damped default
    assert isinstance(ctrl, Controller)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # kp is checked before the default kd uses it
        for kp, kd in ((-1.0, None), (np.nan, None), (1.0, -2.0), (1.0, np.inf), ([1, 2, 3, 4, 5, 6, -7], None)):
            for cls in GENERIC_KINDS.values():
                if cls is FloatingBaseComputedTorque:
                    continue
                with pytest.raises(ValueError, match=r"Options k[pd](\[\d\])?: must be (finite|>= 0.0)"):
                    cls(dyn, cls.Options(kp=kp, kd=kd))
    with pytest.raises(ValueError, match="pd: kp and kd must be numbers or vectors with one entry per actuated"):
        PD(dyn, PD.Options(kp=[1.0, 2.0]))
    with pytest.raises(ValueError, match=r"kp(\[0\])?: expected a number, got 'stiff'"):
        PD(dyn, PD.Options(kp="stiff"))
    with pytest.raises(TypeError, match="dyn must be an rtctl.dynamics.Dynamics"):
        PD(arm7(), PD.Options(kp=1.0))


def test_create_controller():
    dyn = Dynamics(arm7())
    for kind, cls in GENERIC_KINDS.items():
        if cls is FloatingBaseComputedTorque:
            ctrl = create_controller(kind, Dynamics(quadruped()), kp=100.0)
        else:
            ctrl = create_controller(kind, dyn, kp=100.0, kd=5.0)
        assert type(ctrl) is cls and ctrl.name == kind
    with pytest.raises(ValueError, match="unknown controller 'lqr'.*computed_torque"):
        create_controller("lqr", dyn, kp=1.0)
    with pytest.raises(ValueError, match="kp is required for type 'pd'"):
        create_controller("pd", dyn)
    with pytest.raises(ValueError, match="'pd'.*ki"):
        create_controller("pd", dyn, kp=1.0, ki=2.0)


def test_update_rejects_bad_arguments():
    ctrl = ComputedTorque(Dynamics(arm7()), ComputedTorque.Options(kp=100.0))
    q, v, z, tau = np.zeros(7), np.zeros(7), np.zeros(7), np.zeros(7)
    for args, match in (
        ((np.zeros(6), v, z, z, z, tau), r"q must have shape \(7,\)"),
        ((q, v, z, np.zeros(8), z, tau), r"qd_d must have shape \(7,\)"),
        ((q, v, z, z, z, np.zeros(6)), r"effort must have shape \(7,\)"),
        ((q, np.full(7, np.nan), z, z, z, tau), r"v contains NaN or inf"),
        ((q, v, z, z, np.full(7, np.inf), tau), r"qdd_d contains NaN or inf"),
        ((q, v, z, z, z, [0.0] * 7), r"effort must be a writable C-contiguous float64"),
        ((q, v, z, z, z, np.zeros(7, dtype=np.float32)), r"effort must be a writable C-contiguous float64"),
        ((q, v, [[0.0] * 7], z, z, tau), r"q_d must be a vector"),
        ((q, v, ["x"] * 7, z, z, tau), r"q_d must be a numeric vector"),
    ):
        with pytest.raises(ValueError, match=match):
            ctrl.update(0.0, 1e-3, *args)
    ctrl.update(0.0, 1e-3, list(q), v[::1], np.zeros(14)[::2], z.astype(np.float32), z, tau)  # converted (slow path)
    assert np.all(np.isfinite(tau))
    ctrl.kp = np.ones(3)  # gains replaced after construction are checked too
    with pytest.raises(ValueError, match=r"kp must have shape \(7,\)"):
        ctrl.update(0.0, 1e-3, q, v, z, z, z, tau)
    ctrl.kp = np.ones(7)
    ctrl.kd[2] = np.nan
    with pytest.raises(ValueError, match=r"kd contains NaN or inf"):
        ctrl.update(0.0, 1e-3, q, v, z, z, z, tau)
    huge = ComputedTorque(Dynamics(arm7()), ComputedTorque.Options(kp=1e308))
    with pytest.raises(ValueError, match="dynamics kernel returned status"):
        huge.update(0.0, 1e-3, q, v, np.full(7, 10.0), z, z, tau)


# -- allocation -----------------------------------------------------------------------
def test_update_allocates_nothing():
    arm, quad = Dynamics(arm7()), Dynamics(quadruped())
    cases = [(cls(arm, cls.Options(kp=100.0)), arm.model) for cls in (FeedForwardPD, ComputedTorque, PDGravity, PD)]
    cases += [(cls(quad, cls.Options(kp=100.0)), quad.model) for cls in (FloatingBaseComputedTorque, FeedForwardPD)]
    for ctrl, model in cases:
        q, v, tau = model.neutral_configuration(), np.zeros(model.nv), np.zeros(model.nv)
        q_d, qd_d, qdd_d = np.full(ctrl.n, 0.1), np.zeros(ctrl.n), np.ones(ctrl.n)
        ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)  # warm up
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(500):
                ctrl.update(0.0, 1e-3, q, v, q_d, qd_d, qdd_d, tau)
            peak = tracemalloc.get_traced_memory()[1] - base
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        growth = [s for s in after.compare_to(before, "filename")
                  if s.traceback[0].filename.startswith(LOOPS_DIR) and (s.size_diff > 0 or s.count_diff > 0)]
        assert not growth, (ctrl, growth)
        assert peak < 1024, (ctrl, peak)


NRT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl import bundled_model_path
    from rtctl.dynamics import Dynamics
    from rtctl.model.urdf import load_urdf
    from rtctl.loops import controllers as lc

    @njit
    def cycles(n, modes, mi, mf, ws, index, kp, kd, work, block, q, v, q_d, qd_d, qdd_d, effort):
        bad = 0
        for _ in range(n):
            for mode in modes:
                bad += lc._control_step(mode, mi, mf, ws, index, kp, kd, work, block, q, v, q_d, qd_d, qdd_d,
                                        effort)
        return bad

    for name, base, modes in (("arm7", None, np.array([0, 1, 2, 3])), ("quadruped12", "free_flyer",
                                                                        np.array([0, 1, 2, 4]))):
        dyn = Dynamics(load_urdf(bundled_model_path(name), base))
        c = lc.PD(dyn, lc.PD.Options(kp=10.0))
        m = dyn.model
        args = (modes, dyn.mi, dyn.mf, dyn.ws, c.index, c.kp, c.kd, c._work, c._base_block,
                m.neutral_configuration(), np.ones(m.nv), np.full(c.n, 0.1), np.ones(c.n), np.ones(c.n),
                np.zeros(m.nv))
        assert cycles(1, *args) == 0
        counts = allocations(cycles, *args)
        assert counts[0] == counts[1], (name, counts)
    print("OK")
""")


@pytest.mark.slow
def test_compiled_step_allocates_nothing_per_call():
    out = run_with_allocation_counters(NRT_SCRIPT)
    assert out.strip().endswith("OK")
