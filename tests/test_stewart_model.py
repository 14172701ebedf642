"""Stewart platform of Lopes (2009): kinematics, generalized-momentum dynamics, FK, workspace, op counts.

Every formulation check runs on random poses inside the workspace with random
rates/accelerations. Tolerances: analytic vs generic core 1e-8 relative (the
issue's bar; observed ~1e-14); analytic vs central finite differences (step
1e-6) 1e-6 relative -- finite differences appear only here, as an independent
check, never in the model. Corrections to the OCR'd equations tested here:
eq. 84/25 (J_C^-T), eq. 83 (T^-T), eq. 51 (y_C numerators).
"""
import math

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.dynamics.constrained import constrained_forward_dynamics
from rtctl.plants.stewart.opcount import PAPER_TABLE1, count_coriolis, count_shared
from rtctl.plants.stewart.model import P1, P2, TABLE2, StewartPlatform
from rtctl.plants.stewart.reference import actuation_matrix, closure, projected_inverse_dynamics, tree_model, tree_state

H = 1e-6
N_RANDOM = 12


@pytest.fixture(scope="module")
def mech():
    return StewartPlatform()


@pytest.fixture(scope="module")
def tree(mech):
    return Dynamics(tree_model(mech))


def states(mech, n=N_RANDOM, seed=0):
    rng = np.random.default_rng(seed)
    return [(mech.random_pose(rng), rng.normal(size=6) * 0.6, rng.normal(size=6) * 2.0) for _ in range(n)]


def fd(fun, x, xd, h=H):
    """Central difference of fun along the path x + t xd (at t = 0)."""
    return (np.asarray(fun(x + h * xd)) - np.asarray(fun(x - h * xd))) / (2 * h)


def rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(1e-12, np.abs(np.asarray(b)).max())


def test_table2_defaults_and_hexagons(mech):
    assert (mech.r_B, mech.r_P, mech.m_P, mech.m_C, mech.m_S, mech.b_C, mech.b_S) == (1.5, 0.75, 1.43, 0.39, 0.39,
                                                                                      0.5, 0.5)
    assert mech.phi_B == pytest.approx(math.radians(15)) and mech.phi_P == 0.0
    assert np.allclose(np.linalg.norm(mech.base_points, axis=1), 1.5)
    assert np.allclose(np.linalg.norm(mech.platform_points, axis=1), 0.75)
    ang = np.degrees(np.arctan2(mech.base_points[:, 1], mech.base_points[:, 0])) % 360
    # B1/B6, B2/B3, B4/B5 are 2 phi_B = 30 deg apart
    for i, j in ((0, 5), (1, 2), (3, 4)):
        assert (ang[i] - ang[j]) % 360 in (pytest.approx(30.0), pytest.approx(330.0))
    # phi_P = 0: P1 = P2, P3 = P4, P5 = P6 (a 6-3 platform)
    assert np.allclose(mech.platform_points[0::2], mech.platform_points[1::2])
    # at P1 all legs have the same length sqrt(z^2 + |b_i - p_i|^2) by the 3-fold symmetry
    d = np.linalg.norm(mech.base_points[0] - mech.platform_points[0])
    assert np.allclose(mech.leg_lengths(P1), math.sqrt(4.0 + d * d), rtol=1e-14)
    assert TABLE2["I_C"] == (0.0, 0.1, 0.1)


def test_rotation_and_euler_jacobian(mech):
    """Eq. 4 is Rz(psi) Ry(theta) Rx(phi); eq. 9 maps Euler rates to omega (omega~ = R-dot R^T)."""
    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    def ry(a):
        return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])

    def rx(a):
        return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])

    for x, xd, _ in states(mech):
        R = mech.rotation(x)
        assert np.allclose(R, rz(x[3]) @ ry(x[4]) @ rx(x[5]), atol=1e-15)
        W = fd(mech.rotation, x, xd) @ R.T
        JA, JAd, T, Td = mech.euler_jacobian(x, xd)
        omega = JA @ xd[3:]
        assert rel([W[2, 1], W[0, 2], W[1, 0]], omega) < 1e-6
        assert rel(JAd, fd(lambda y: mech.euler_jacobian(y)[0], x, xd)) < 1e-6


def test_jc_je_against_leg_length_rates(mech):
    for x, xd, _ in states(mech):
        ld = fd(mech.leg_lengths, x, xd)
        assert rel(mech.je(x) @ xd, ld) < 1e-7
        assert rel(mech.jc(x) @ mech.twist(x, xd), ld) < 1e-7


def test_leg_jacobians_and_their_rates(mech):
    """J_D (eq. 36) = leg angular velocity n x n-dot; J_B (40), J_G (62) = centre-of-mass velocities of
    eqs. 29, 59; the analytic *_dot terms = d/dt along the motion; leg frame eqs. 49-52."""
    for x, xd, _ in states(mech, 6):
        u = mech.twist(x, xd)
        for i in range(6):
            J = mech.leg_jacobians(x, xd, i)

            def n_of(y, i=i):
                legs, L = mech.inverse_kinematics(y)
                return legs[i] / L[i]

            n, nd = n_of(x), fd(n_of, x, xd)
            assert rel(J["J_D"] @ u, np.cross(n, nd)) < 1e-6
            assert abs(n @ (J["J_D"] @ u)) < 1e-12          # perpendicular to the leg (eq. 34)
            p_c = lambda y, i=i: mech.base_points[i] + mech.b_C * n_of(y)                    # eq. 29
            p_s = lambda y, i=i: y[:3] + mech.rotation(y) @ mech.platform_points[i] - mech.b_S * n_of(y)  # eq. 59
            assert rel(J["J_B"] @ u, fd(p_c, x, xd)) < 1e-6
            assert rel(J["J_G"] @ u, fd(p_s, x, xd)) < 1e-6
            for name in ("K", "J_D", "J_B", "J_G", "R_C"):
                num = fd(lambda y, name=name, i=i: mech.leg_jacobians(y, xd, i)[name], x, xd)
                assert rel(J[name + "_dot"], num) < 1e-6, name
            Rc = J["R_C"]
            assert np.allclose(Rc.T @ Rc, np.eye(3), atol=1e-14) and np.linalg.det(Rc) == pytest.approx(1.0)
            assert np.allclose(Rc[:, 0], n) and abs(Rc[2, 1]) < 1e-15 and Rc[2, 2] > 0   # eqs. 50-52


def test_inertia_is_the_euler_space_mass_matrix(mech):
    """T^T M is symmetric positive definite and 1/2 xd^T T^T M xd is the kinetic energy assembled body by body."""
    for x, xd, _ in states(mech):
        M, _, _ = mech.matrices(x, xd)
        T = mech.euler_jacobian(x)[2]
        ME = T.T @ M
        assert np.abs(ME - ME.T).max() < 1e-12 * np.abs(ME).max()
        assert np.linalg.eigvalsh(ME).min() > 0
        assert 0.5 * xd @ ME @ xd == pytest.approx(mech.kinetic_energy(x, xd), rel=1e-12)


def test_coriolis_power_balance(mech):
    """xd^T T^T V xd = 1/2 xd^T (d/dt T^T M) xd: the analytic V of eqs. 28-76 carries exactly the
    kinetic-energy rate the configuration-dependent inertia implies (d/dt by finite difference here)."""
    for x, xd, _ in states(mech):
        _, V, _ = mech.matrices(x, xd)
        T = mech.euler_jacobian(x)[2]
        MEd = fd(lambda y: mech.euler_jacobian(y)[2].T @ mech.matrices(y, xd)[0], x, xd)
        assert xd @ T.T @ V @ xd == pytest.approx(0.5 * xd @ MEd @ xd, rel=1e-6, abs=1e-9)


def test_per_body_coriolis_rates_are_d_dt_of_momentum_maps(mech):
    """Each body's V equals J^T d/dt(momentum map) (eqs. 24, 43, 55, 65, 73): check V xd against the
    finite-difference rate of the momentum map times xd, body by body."""
    x, xd, _ = states(mech, 1, seed=3)[0]
    T = mech.euler_jacobian(x)[2]
    u = T @ xd
    for i in range(6):
        J = mech.leg_jacobians(x, xd, i)
        legs = 1 << i
        _, V, _ = mech.matrices(x, xd, "cylinder_translation", legs)
        JBT = lambda y: mech.leg_jacobians(y, xd, i)["J_B"] @ mech.euler_jacobian(y)[2]
        assert rel(V @ xd, mech.m_C * J["J_B"].T @ fd(JBT, x, xd) @ xd) < 1e-6
        _, V, _ = mech.matrices(x, xd, "piston_rotation", legs)

        def h_map(y):
            Jy = mech.leg_jacobians(y, xd, i)
            return Jy["R_C"] @ np.diag(mech.I_S) @ Jy["R_C"].T @ Jy["J_D"] @ mech.euler_jacobian(y)[2]
        assert rel(V @ xd, J["J_D"].T @ fd(h_map, x, xd) @ xd) < 1e-6
    assert np.isfinite(u).all()


def test_gravity_from_potential_energy(mech):
    """dP/dx (eqs. 77-80) = T^T G|B; eq. 83 as printed (T^-1) would not give G|B.

    With Table 2 (m_C = m_S, b_C = b_S) the cylinder and piston centres of mass
    of a leg sum to m (b_i + P_i), so P = (m_P + 6 m_C) g z exactly: a pure
    vertical force. The T^-1 vs T^-T check therefore uses b_S = 0.3 m.
    """
    for x, _, _ in states(mech, 4):
        G = mech.matrices(x, np.zeros(6))[2]
        assert rel(G, [0, 0, (mech.m_P + 6 * mech.m_C) * mech.g, 0, 0, 0]) < 1e-14
    other = StewartPlatform(b_S=0.3)
    for x, _, _ in states(other):
        GE = np.array([(other.potential_energy(x + H * e) - other.potential_energy(x - H * e)) / (2 * H)
                       for e in np.eye(6)])
        T = other.euler_jacobian(x)[2]
        G = other.matrices(x, np.zeros(6))[2]
        assert rel(other.gravity_euler(x), GE) < 1e-7
        assert rel(np.linalg.solve(T.T, GE), G) < 1e-7          # T^-T: correct
        if abs(x[3]) > 0.05 or abs(x[4]) > 0.05:
            assert rel(np.linalg.solve(T, GE)[3:], G[3:]) > 1e-2   # T^-1 (as printed): wrong moments


def test_cross_check_with_generic_core(mech, tree):
    """Leg forces of eqs. 24-84 = projected inverse dynamics of the cut tree with loop closures, 1e-8 relative."""
    worst = 0.0
    for x, xd, xdd in states(mech, 20, seed=11):
        tau = mech.inverse_dynamics(x, xd, xdd)
        res = projected_inverse_dynamics(mech, tree, x, xd, xdd)
        assert res.residual < 1e-10
        worst = max(worst, rel(tau, res.tau))
    assert worst < 1e-8
    other = StewartPlatform(m_P=3.0, I_P=(0.3, 0.5, 0.7), m_C=1.1, I_C=(0.0, 0.2, 0.2), m_S=0.6,
                            I_S=(0.0, 0.05, 0.05), b_C=0.7, b_S=0.4)
    other_tree = Dynamics(tree_model(other))
    for x, xd, xdd in states(other, 8, seed=12):
        res = projected_inverse_dynamics(other, other_tree, x, xd, xdd)
        assert rel(other.inverse_dynamics(x, xd, xdd), res.tau) < 1e-8
    # the power balance behind eq. 84: tau . l-dot = f|B . u  (J_C^-T, not J_C^-1)
    x, xd, xdd = states(mech, 1, seed=5)[0]
    f = mech.platform_wrench(x, xd, xdd)
    tau = mech.inverse_dynamics(x, xd, xdd)
    assert tau @ (mech.je(x) @ xd) == pytest.approx(f @ mech.twist(x, xd), rel=1e-12)
    assert rel(np.linalg.solve(mech.jc(x), f), tau) > 1e-3


def test_body_contributions_sum_to_total(mech):
    for x, xd, xdd in states(mech, 4):
        parts = sum(mech.inverse_dynamics(x, xd, xdd, b) for b in ("platform", "cylinder_translation",
                                                                    "cylinder_rotation", "piston_translation",
                                                                    "piston_rotation"))
        assert rel(parts, mech.inverse_dynamics(x, xd, xdd)) < 1e-13


def test_forward_dynamics(mech, tree):
    """FD inverts ID, and matches the generic constrained forward dynamics of the tree."""
    for x, xd, xdd in states(mech, 6, seed=2):
        tau = mech.inverse_dynamics(x, xd, xdd)
        assert rel(mech.forward_dynamics(x, xd, tau), xdd) < 1e-10
        q, v, _, Jc = tree_state(mech, tree, x, xd, np.zeros(6))
        _, bias = closure(tree, q, v)
        qdd, _ = constrained_forward_dynamics(tree, q, v, actuation_matrix() @ tau, Jc, bias)
        assert rel(qdd[:6], xdd) < 1e-8


def test_forward_kinematics(mech):
    rng = np.random.default_rng(4)
    for _ in range(20):
        x = mech.random_pose(rng)
        sol = mech.forward_kinematics(mech.leg_lengths(x))
        assert np.abs(sol - x).max() < 1e-9
    assert np.abs(mech.forward_kinematics(mech.leg_lengths(P2)) - P2).max() < 1e-9
    with pytest.raises(ValueError, match="outside the stroke"):
        mech.forward_kinematics(np.full(6, 3.5))
    with pytest.raises(ValueError, match="forward kinematics failed"):
        # inside the stroke but not assemblable: one leg far longer than its neighbours
        mech.forward_kinematics(np.array([1.85, 3.25, 1.85, 3.25, 1.85, 3.25]))


def test_workspace_checks(mech):
    assert mech.check_workspace(P1) == (True, "inside the workspace")
    assert mech.in_workspace(P2)
    assert mech.workspace_status(P1 + [0, 0, 1.5, 0, 0, 0]) == 2
    assert mech.workspace_status(P1 - [0, 0, 0.8, 0, 0, 0]) == 1
    assert mech.workspace_status(P1 * [1, 1, -1, 1, 1, 1]) == 5
    assert mech.workspace_status(P1 + [0, 0, 0, 0, math.pi / 2, 0]) == 4
    # the 6-3 platform turned about z_B: det J_C crosses zero; the check flags the neighbourhood
    psis = np.linspace(0, math.pi, 721)
    dets = np.array([mech.det_jc(P1 + [0, 0, 0, p, 0, 0]) for p in psis])
    k = int(np.flatnonzero(np.sign(dets[1:]) != np.sign(dets[:-1]))[0])
    near = P1 + [0, 0, 0, psis[k], 0, 0]
    assert abs(mech.det_jc(near)) < mech.det_min and mech.workspace_status(near) in (1, 2, 3)
    ok, reason = mech.check_leg_lengths(mech.leg_lengths(P2))
    assert ok
    ok, reason = mech.check_leg_lengths(np.full(6, 1.0))
    assert not ok and "stroke" in reason


def test_operation_counts(mech):
    """The instrumented run evaluates the same V as the compiled kernel; the totals follow the table's rule."""
    res = count_coriolis(mech)
    x, xd = res["x"], res["xd"]
    for row, bits in (("platform", "platform"), ("cylinder_rotation", "cylinder_rotation"),
                      ("piston_translation", "piston_translation")):
        legs = 63 if row == "platform" else 1
        assert np.abs(res["V"][row] - mech.matrices(x, xd, bits, legs)[1]).max() < 1e-13
    c = res["counts"]
    rows = PAPER_TABLE1["rows"][:-1]
    for j in range(3):
        assert c["total"][j] == c["platform"][j] + 6 * sum(c[r][j] for r in rows[1:])
    # below the paper's Lagrange totals, and sharing the leg kinematics saves further operations
    assert all(c["total"][j] < PAPER_TABLE1["lagrange"][-1][j] for j in range(3))
    shared = count_shared(mech, x, xd)
    assert shared[0] < c["total"][0] and shared[1] < c["total"][1]
