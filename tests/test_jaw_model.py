"""Jaw-rehabilitation robot of Kalani et al. (2018): geometry, frames, Gibbs-Appell dynamics, patient, incisal map.

Formulation checks run on random poses inside the workspace of both platforms
with random rates and accelerations. Tolerances: Gibbs-Appell vs the
generalized-momentum model and vs the generic core 1e-8 relative (the issue's
bar; observed ~1e-15 and ~1e-14); compiled kernel vs the NumPy reference
1e-12; analytic vs central finite differences 1e-6 relative (finite
differences only here, as an independent check). Corrections to the OCR'd
appendix tested here: A.16 (J_bi signs), A.19-A.20 (missing iD_2i,z),
A.25-A.26 (sign of iD_5i).
"""
import math

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.plants.jaw import kernels as _jk
from rtctl.plants.jaw.model import (HINGE_RADIUS, INCISAL_POINT, JAW_PARAMETERS, REST_POSE, ROBOT_PARAMETERS,
                                  SKULL_HEIGHT, STATUS_REASONS, JawRehabRobot, PatientImpedance,
                                  gibbs_appell_inverse_dynamics, gibbs_appell_wrench)
from rtctl.plants.jaw.reference import gibbs_appell_reference, tsai_leg_frame
from rtctl.plants.stewart.model import StewartPlatform
from rtctl.plants.stewart.reference import projected_inverse_dynamics, tree_model

E = np.diag([1.0, -1.0, -1.0, 1.0, -1.0, -1.0])
S = np.diag([1.0, -1.0, -1.0, -1.0, -1.0, 1.0])
BOLUS = PatientImpedance(bolus_damping=40.0, bolus_force=8.0, bolus_band=(-0.03, 0.01), bolus_edge=2e-3)


@pytest.fixture(scope="module")
def mech():
    return JawRehabRobot()


def states(mech, n=10, seed=0):
    rng = np.random.default_rng(seed)
    return [(mech.random_pose(rng), rng.normal(size=6) * 0.3, rng.normal(size=6) * 3.0) for _ in range(n)]


def rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(1e-12, np.abs(np.asarray(b)).max())


def path(x, xd, xdd, t):
    return x + xd * t + 0.5 * xdd * t * t


def second_difference(fun, x, xd, xdd, h=1e-4):
    """(first, second) time derivative of fun(x(t)) at t = 0 along x(t) = x + xd t + xdd t^2 / 2."""
    fp, f0, fm = (np.asarray(fun(path(x, xd, xdd, t))) for t in (h, 0.0, -h))
    return (fp - fm) / (2 * h), (fp - 2 * f0 + fm) / (h * h)


def test_documented_geometry_and_masses(mech):
    r, j = mech.robot, mech.jaw
    assert (r.r_B, r.r_P, r.stroke) == (0.12, 0.08, (0.13, 0.20))
    assert 0.2 <= j.m_P <= 0.4 and j.I_P[0] < j.I_P[1] < j.I_P[2]          # Zhang et al. 2002 ordering
    assert j.I_P[0] + j.I_P[1] > j.I_P[2]                                  # a physical inertia
    assert r.m_P == pytest.approx(2700 * math.pi * 0.09 ** 2 * 0.006)      # aluminium disc
    for p in (r, j):                                                       # legs are bodies of revolution
        assert p.I_C[1] == p.I_C[2] and p.I_S[1] == p.I_S[2] and p.I_C[0] > 0
    assert j.g == -r.g
    assert HINGE_RADIUS == pytest.approx(0.088, abs=1e-3)                  # Bonwill's triangle
    assert np.array_equal(mech.rest_pose, REST_POSE) and mech.skull_height == SKULL_HEIGHT
    lr, lj = r.leg_lengths(REST_POSE), mech.jaw_leg_lengths(REST_POSE)
    assert np.allclose(lr, lr[0]) and r.stroke[0] < lr[0] < r.stroke[1]   # 3-fold symmetric rest pose
    assert np.allclose(lj, lj[0]) and j.stroke[0] < lj[0] < j.stroke[1]
    assert mech.jaw_pose(REST_POSE)[2] == pytest.approx(SKULL_HEIGHT - REST_POSE[2])
    assert JAW_PARAMETERS["stroke"] == j.stroke and ROBOT_PARAMETERS["force_limit"] == r.force_limit


def test_frame_map_between_the_platforms(mech):
    """x' = S x + c puts the mandible joints where the rigid attachment {P'} = {P} Rx(pi) puts them, and
    maps twists by E (u' = E u), so the jaw wrench maps to {B} by E (equal power)."""
    Rx = np.diag([1.0, -1.0, -1.0])
    skull = np.array([0.0, 0.0, SKULL_HEIGHT])
    for x, xd, xdd in states(mech, 6):
        xj, xdj, _ = mech.jaw_pose(x, xd, xdd)
        R, Rj = mech.robot.rotation(x), mech.jaw.rotation(xj)
        for pj in mech.jaw.platform_points:
            world_via_robot = x[:3] + R @ Rx @ pj
            world_via_jaw = skull + Rx @ (xj[:3] + Rj @ pj)
            assert np.allclose(world_via_robot, world_via_jaw, atol=1e-15)
        u, uj = mech.robot.twist(x, xd), mech.jaw.twist(xj, xdj)
        assert np.allclose(uj, E @ u, atol=1e-14)
        F = np.random.default_rng(1).normal(size=6)
        assert (E @ F) @ u == pytest.approx(F @ uj, rel=1e-13)


@pytest.mark.parametrize("which", ["robot", "jaw"])
def test_gibbs_appell_equals_generalized_momentum(mech, which):
    """The appendix's Gibbs-Appell leg forces == the generalized-momentum ones of Lopes (2009) (same geometry and
    inertias), per body group and in total, 1e-8 relative (observed ~1e-15)."""
    plat = getattr(mech, which)
    worst = 0.0
    for x, xd, xdd in states(mech, 12, seed=1):
        if which == "jaw":
            x, xd, xdd = mech.jaw_pose(x, xd, xdd)
        for bodies in ("platform", "cylinders", "pistons", "cylinder_translation", "cylinder_rotation",
                       "piston_translation", "piston_rotation", "all"):
            ga = gibbs_appell_inverse_dynamics(plat, x, xd, xdd, bodies)
            gm = plat.inverse_dynamics(x, xd, xdd, bodies)
            worst = max(worst, rel(ga, gm))
        assert rel(gibbs_appell_wrench(plat, x, xd, xdd), plat.platform_wrench(x, xd, xdd)) < 1e-12
    assert worst < 1e-8


def test_gibbs_appell_equals_generic_core():
    """Gibbs-Appell == projected inverse dynamics of the generic recursive core on the cut tree (true universal
    joints), 1e-8 relative, when the legs have no axial inertia. Both analytic formulations neglect the legs'
    spin about their axes: with the documented actuators' axial inertia the leg forces differ from the true
    universal-joint mechanism by a small but nonzero amount (< 2%, observed 0.8%)."""
    tr = lambda i: (0.0, i[1], i[2])
    for params, sign in ((ROBOT_PARAMETERS, 1.0), (JAW_PARAMETERS, -1.0)):
        home = REST_POSE if sign > 0 else S @ REST_POSE + [0, 0, SKULL_HEIGHT, 0, 0, 0]
        plat = StewartPlatform(**{**params, "I_C": tr(params["I_C"]), "I_S": tr(params["I_S"])}, g=sign * 9.81,
                               home=home)
        tree = Dynamics(tree_model(plat))
        rng = np.random.default_rng(7)
        for _ in range(4):
            x = plat.random_pose(rng, span=(0.01, 0.01, 0.01, 0.1, 0.1, 0.2))
            xd, xdd = rng.normal(size=6) * 0.3, rng.normal(size=6) * 3.0
            res = projected_inverse_dynamics(plat, tree, x, xd, xdd)
            assert res.residual < 1e-10
            assert rel(gibbs_appell_inverse_dynamics(plat, x, xd, xdd), res.tau) < 1e-8
    robot = JawRehabRobot().robot
    tree = Dynamics(tree_model(robot))
    x, xd, xdd = states(JawRehabRobot(), 1, seed=7)[0]
    spin = rel(gibbs_appell_inverse_dynamics(robot, x, xd, xdd), projected_inverse_dynamics(robot, tree, x, xd, xdd).tau)
    assert 1e-5 < spin < 2e-2


def test_compiled_kernel_equals_reference(mech):
    for plat in (mech.robot, mech.jaw):
        for x, xd, xdd in states(mech, 6, seed=2):
            if plat is mech.jaw:
                x, xd, xdd = mech.jaw_pose(x, xd, xdd)
            ref = gibbs_appell_reference(plat, x, xd, xdd)
            for name, bits in (("platform", "platform"), ("cylinders", "cylinders"), ("pistons", "pistons")):
                assert rel(gibbs_appell_wrench(plat, x, xd, xdd, bits), ref.grad[name] - ref.Qg[name]) < 1e-12
            tau = gibbs_appell_inverse_dynamics(plat, x, xd, xdd)
            assert rel(tau, np.linalg.solve(ref.Jp.T, ref.wrench())) < 1e-12
            assert np.allclose(ref.Jp, plat.jc(x), atol=1e-15)                  # A.7 J_p = J_C


def test_gradient_of_the_gibbs_function(mech):
    """The analytic dS/d(x-ddot_M) equals the central difference of the Gibbs functions B.6, C.1-C.4, D.1-D.4
    (S is quadratic in the accelerations, so the difference is exact up to rounding): 1e-7 relative."""
    h = 1e-3
    for x, xd, xdd in states(mech, 4, seed=3):
        ref = gibbs_appell_reference(mech.robot, x, xd, xdd)
        for body in ("platform", "cylinders", "pistons"):
            num = np.zeros(6)
            for k in range(6):
                e = np.zeros(6)
                e[k] = h
                sp = gibbs_appell_reference(mech.robot, x, xd, twist_rate=ref.twist_rate + e).S[body]
                sm = gibbs_appell_reference(mech.robot, x, xd, twist_rate=ref.twist_rate - e).S[body]
                num[k] = (sp - sm) / (2 * h)
            assert rel(num, ref.grad[body]) < 1e-7, body


def test_link_accelerations_and_ocr_corrections(mech):
    """A.8, A.22, A.26, A.30 against finite differences of the leg geometry; A.16's printed J_bi signs, the
    printed A.19-A.20 (no iD_2i,z) and A.26's +iD_5i (A.25 subtracts it) are wrong."""
    r = mech.robot
    e1, e2 = r.b_C, r.b_S
    for x, xd, xdd in states(mech, 4, seed=4):
        ref = gibbs_appell_reference(r, x, xd, xdd)
        u, ud = ref.twist, ref.twist_rate
        qd_fd, qdd_fd = second_difference(r.leg_lengths, x, xd, xdd)
        assert rel(ref.qdd, qdd_fd) < 1e-6
        assert np.abs(ref.qdd_printed - qdd_fd).max() > 1e3 * np.abs(ref.qdd - qdd_fd).max()
        for i in range(6):
            def n_of(y, i=i):
                legs, L = r.inverse_kinematics(y)
                return legs[i] / L[i]

            def tip(y, i=i):
                return y[:3] + r.rotation(y) @ r.platform_points[i]

            n = n_of(x)
            nd, ndd = second_difference(n_of, x, xd, xdd)
            assert rel(ref.legs["omega"][i], np.cross(n, nd)) < 1e-6
            assert rel(ref.legs["alpha"][i], np.cross(n, ndd)) < 1e-6
            _, a1 = second_difference(lambda y: r.base_points[i] + e1 * n_of(y), x, xd, xdd)
            _, a2 = second_difference(lambda y: tip(y) - e2 * n_of(y), x, xd, xdd)
            assert rel(ref.legs["a1"][i], a1) < 1e-6 and rel(ref.legs["a2"][i], a2) < 1e-6
            # A.25-A.26: adding the underbraced term instead of subtracting it
            legs, L = r.inverse_kinematics(x)
            Ri = tsai_leg_frame(legs[i])
            b = r.rotation(x) @ r.platform_points[i]
            vx, vy, vz = Ri.T @ (u[:3] + np.cross(u[3:], b))
            d5 = e1 / L[i] ** 2 * np.array([2 * vx * vz, 2 * vy * vz, vx * vx + vy * vy])
            assert rel(ref.legs["a1"][i] + 2 * Ri @ d5, a1) > 1e-3
            # A.16: the printed matrix vs A.3's J_bi
            _, ab = second_difference(tip, x, xd, xdd)
            D1 = np.cross(u[3:], np.cross(u[3:], b))
            bx, by, bz = b
            printed = np.array([[1, 0, 0, 0, -bz, -by], [0, 1, 0, -bz, 0, bx], [0, 0, 1, -by, bx, 0]])
            a3 = np.array([[1, 0, 0, 0, bz, -by], [0, 1, 0, -bz, 0, bx], [0, 0, 1, by, -bx, 0]])
            assert rel(a3 @ ud + D1, ab) < 1e-6
            assert rel(printed @ ud + D1, ab) > 1e-3


@pytest.mark.slow
def test_two_platform_inverse_dynamics(mech):
    """Coupled Gibbs-Appell ID == the independent sum (generalized momentum of each platform, the jaw's wrench
    mapped by E, the patient force) == the compiled coupled GM model, 1e-8 relative; with a bolus active."""
    m = JawRehabRobot(impedance=BOLUS)
    for x, xd, xdd in states(m, 10, seed=5):
        xj, xdj, xddj = m.jaw_pose(x, xd, xdd)
        T, JE = m.robot.euler_jacobian(x)[2], m.robot.je(x)
        F = m.robot.platform_wrench(x, xd, xdd) + E @ m.jaw.platform_wrench(xj, xdj, xddj)
        f, _ = m.patient_force(x, xd)
        expected = np.linalg.solve(JE.T, T.T @ F - f)
        tau = m.inverse_dynamics(x, xd, xdd)
        assert rel(tau, expected) < 1e-8
        assert rel(m.inverse_dynamics_gm(x, xd, xdd), tau) < 1e-8
        bare = m.inverse_dynamics(x, xd, xdd, impedance=False)
        assert rel(tau - bare, np.linalg.solve(JE.T, -f)) < 1e-8
        # power: leg forces supply the platforms' wrench minus the patient's
        assert tau @ (JE @ xd) == pytest.approx(F @ (T @ xd) - f @ xd, rel=1e-10, abs=1e-12)


def test_forward_dynamics_round_trip_and_mass_matrix(mech):
    m = JawRehabRobot(impedance=BOLUS)
    for x, xd, xdd in states(m, 8, seed=6):
        tau = m.inverse_dynamics(x, xd, xdd)
        assert rel(m.forward_dynamics(x, xd, tau), xdd) < 1e-9
        ME = m.mass_matrix(x)
        assert np.abs(ME - ME.T).max() < 1e-12 * np.abs(ME).max() and np.linalg.eigvalsh(ME).min() > 0
        assert 0.5 * xd @ ME @ xd == pytest.approx(m.energy(x, xd)["kinetic"], rel=1e-12)


def test_energy_balance(mech):
    """dE/dt = tau . l-dot - xd . D xd - F_b z-dot for E = kinetic + gravity (both platforms) + the stiffness's
    potential energy, along the forward-dynamics motion; central differences, 1e-6 relative."""
    m = JawRehabRobot(impedance=BOLUS)
    rng = np.random.default_rng(8)
    h = 1e-5
    bolus_seen = 0
    for _ in range(8):
        x, xd = m.random_pose(rng), rng.normal(size=6) * 0.2
        tau = rng.normal(size=6) * 3.0
        xdd = m.forward_dynamics(x, xd, tau)
        e = [sum(m.energy(x + s * h * xd + 0.5 * h * h * xdd, xd + s * h * xdd).values()) for s in (1, -1)]
        dEdt = (e[0] - e[1]) / (2 * h)
        _, rec = m.patient_force(x, xd)
        bolus_seen += rec["bolus_force"] > 0
        power = tau @ (m.robot.je(x) @ xd) - xd @ (BOLUS.damping * xd) - rec["bolus_force"] * rec["incisal_velocity_z"]
        assert dEdt == pytest.approx(power, rel=1e-6, abs=1e-9)
    assert bolus_seen >= 2


def test_patient_force(mech):
    imp = PatientImpedance(stiffness=(100, 200, 300, 1, 2, 3), damping=(1, 2, 3, 0.1, 0.2, 0.3), bolus_damping=30.0,
                           bolus_force=5.0, bolus_band=(-0.02, -0.004), bolus_edge=2e-3, bolus_velocity_scale=0.01)
    m = JawRehabRobot(impedance=imp)
    x0 = m.rest_pose
    rng = np.random.default_rng(9)
    for _ in range(5):
        x, xd = m.random_pose(rng), rng.normal(size=6) * 0.1
        f, rec = m.patient_force(x, xd)
        p = m.incisal_point(x)
        assert np.allclose(rec["p"], p, atol=1e-15)
        zdot = m.incisal_point(x + 1e-6 * xd) - m.incisal_point(x - 1e-6 * xd)
        assert rec["incisal_velocity_z"] == pytest.approx(zdot[2] / 2e-6, rel=1e-6, abs=1e-12)
        spring_damper = -imp.stiffness * (x - x0) - imp.damping * xd
        if rec["bolus_force"] == 0.0:
            assert np.allclose(f, spring_damper, atol=1e-14)
        assert rec["bolus_force"] >= 0 and (rec["bolus_force"] == 0 or rec["incisal_velocity_z"] > 0)
    # bolus: only while closing, only inside the band, smooth window edges
    for pz, zd, expect in ((-0.01, 0.05, 30 * 0.05 + 5 * math.tanh(5.0)), (-0.01, -0.05, 0.0), (-0.03, 0.05, 0.0),
                           (-0.001, 0.05, 0.0), (-0.019, 0.05, (30 * 0.05 + 5 * math.tanh(5.0)) * 0.5)):
        x, xd, _ = m.incisal_pose([0, 0, pz], [0, 0, zd])
        _, rec = m.patient_force(x, xd)
        assert rec["bolus_force"] == pytest.approx(expect, rel=1e-12, abs=1e-15), (pz, zd)


def test_incisal_mapping(mech):
    """incisal_point inverts incisal_pose; rates and accelerations match finite differences along a smooth
    incisal path; incisal_to_legs == IK of that pose and its derivatives == finite differences of the leg
    lengths (1e-6 relative)."""
    def p_of(t):
        return np.array([0.004 * math.sin(3 * t), 0.003 * math.sin(2 * t + 1), -0.012 * (1 - math.cos(4 * t))])

    l, ld, ldd = np.zeros(6), np.zeros(6), np.zeros(6)
    h = 1e-4
    for t in (0.1, 0.45, 0.8, 1.3):
        p = p_of(t)
        pd = (p_of(t + h) - p_of(t - h)) / (2 * h)
        pdd = (p_of(t + h) - 2 * p + p_of(t - h)) / (h * h)
        x, xd, xdd = mech.incisal_pose(p, pd, pdd)
        assert np.allclose(mech.incisal_point(x), p, atol=1e-16)
        assert x[5] == pytest.approx(p[2] / HINGE_RADIUS) and x[3] == x[4] == 0.0
        xs = [mech.incisal_pose(p_of(s))[0] for s in (t + h, t, t - h)]
        assert rel(xd, (xs[0] - xs[2]) / (2 * h)) < 1e-6
        assert rel(xdd, (xs[0] - 2 * xs[1] + xs[2]) / (h * h)) < 1e-5
        assert mech.incisal_to_legs(p, pd, pdd, l, ld, ldd) == 0
        Ls = [mech.robot.leg_lengths(xx) for xx in xs]
        assert np.allclose(l, Ls[1], rtol=1e-15)
        assert rel(ld, (Ls[0] - Ls[2]) / (2 * h)) < 1e-6
        assert rel(ldd, (Ls[0] - 2 * Ls[1] + Ls[2]) / (h * h)) < 1e-4
    # the opening rotation carries the condyles forward: 20 mm of opening = 0.23 rad and ~8 mm of glide
    x, _, _ = mech.incisal_pose([0, 0, -0.02])
    assert x[5] == pytest.approx(-0.02 / HINGE_RADIUS)
    # pure translation with an infinite hinge radius
    flat = JawRehabRobot(hinge_radius=math.inf)
    x, xd, xdd = flat.incisal_pose([0.001, 0.002, -0.01], [0.1, 0.2, 0.3], [1, 2, 3])
    assert np.allclose(x, REST_POSE + [0.001, 0.002, -0.01, 0, 0, 0]) and np.allclose(xdd[:3], [1, 2, 3])
    # leaving the workspace: a status, outputs untouched
    l0 = l.copy()
    st = mech.incisal_to_legs(np.array([0.0, 0.0, -0.08]), np.zeros(3), np.zeros(3), l, ld, ldd)
    assert st != 0 and "shorter than the stroke" in STATUS_REASONS[st] and np.array_equal(l, l0)
    st = mech.incisal_to_legs(np.array([0.0, 0.0, np.nan]), np.zeros(3), np.zeros(3), l, ld, ldd)
    assert STATUS_REASONS[st] == "robot: pose is not finite"
    assert mech.incisal_to_legs([0.0, 0.0, -0.01], (0, 0, 0), np.zeros(3), l, ld, ldd) == 0      # converted
    assert mech.incisal_to_legs(np.zeros(4)[:3], np.zeros(3), np.zeros(3), l, ld, ldd) == 0
    assert STATUS_REASONS[mech.incisal_to_legs(np.zeros(4), np.zeros(3), np.zeros(3), l, ld, ldd)].startswith("bad")
    with pytest.raises(ValueError, match="ld must be a writable"):
        mech.incisal_to_legs([0.0, 0.0, -0.01], np.zeros(3), np.zeros(3), l, [0.0] * 6, ldd)
    # lifting the platform straight up 25 mm: the jaw model's legs bottom out before the robot's top out
    assert mech.workspace_status(REST_POSE + [0, 0, 0.025, 0, 0, 0]) == _jk.JAW_STATUS_OFFSET + 1
    assert STATUS_REASONS[_jk.JAW_STATUS_OFFSET + 1] == "jaw model: a leg is shorter than the stroke minimum"


def test_chewing_range_is_in_the_workspace(mech):
    """The documented geometry covers a chewing envelope: 25 mm opening, +-8 mm lateral and antero-posterior."""
    l, ld, ldd = np.zeros(6), np.zeros(6), np.zeros(6)
    z3 = np.zeros(3)
    for px in (-0.008, 0.0, 0.008):
        for py in (-0.008, 0.0, 0.008):
            for pz in np.linspace(-0.025, 0.0, 6):
                assert mech.incisal_to_legs(np.array([px, py, pz]), z3, z3, l, ld, ldd) == 0, (px, py, pz)


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(ValueError, match="stiffness"):
        PatientImpedance(stiffness=-1.0)
    with pytest.raises(ValueError, match="damping"):
        PatientImpedance(damping=[1, 2, 3])
    with pytest.raises(ValueError, match="bolus_band"):
        PatientImpedance(bolus_band=(0.0, -0.01))
    with pytest.raises(ValueError, match="bolus_edge"):
        PatientImpedance(bolus_band=(-0.01, 0.0), bolus_edge=0.006)
    with pytest.raises(ValueError, match="bolus_velocity_scale"):
        PatientImpedance(bolus_velocity_scale=0.0)
    with pytest.raises(ValueError, match="bolus_force"):
        PatientImpedance(bolus_force=math.nan)
    with pytest.raises(ValueError, match="unknown impedance parameter 'stifness'"):
        PatientImpedance().replace(stifness=1.0)
    with pytest.raises(ValueError, match="rest_pose orientation"):
        JawRehabRobot(rest_pose=REST_POSE + [0, 0, 0, 0.1, 0, 0])
    with pytest.raises(ValueError, match="skull_height"):
        JawRehabRobot(skull_height=0.1)
    with pytest.raises(ValueError, match="hinge_radius"):
        JawRehabRobot(hinge_radius=-0.05)
    with pytest.raises(ValueError, match="incisal_point"):
        JawRehabRobot(incisal_point=[0.0, 0.03])
    with pytest.raises(ValueError, match="not in the workspace"):
        JawRehabRobot(rest_pose=[0, 0, 0.25, 0, 0, 0], skull_height=0.34)
    with pytest.raises(ValueError, match=r"jaw.g must be -robot.g"):
        JawRehabRobot(jaw=StewartPlatform(**JAW_PARAMETERS, home=S @ REST_POSE + [0, 0, SKULL_HEIGHT, 0, 0, 0]))
    with pytest.raises(ValueError, match="impedance must be"):
        JawRehabRobot(impedance={"stiffness": 1.0})
    m = JawRehabRobot()
    with pytest.raises(ValueError, match="xdd must have shape"):
        m.inverse_dynamics(REST_POSE, np.zeros(6), np.zeros(5))
    with pytest.raises(ValueError, match="bodies must be one of"):
        gibbs_appell_inverse_dynamics(m.robot, REST_POSE, np.zeros(6), np.zeros(6), "legs")
    assert INCISAL_POINT.shape == (3,)
