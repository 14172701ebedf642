"""The estimators' compiled pieces against independent formulations (loops/estimation).

* SO(3): Exp and Log are inverse, agree with scipy's rotation vectors, and J_l is the derivative
  Exp(phi + d) = Exp(J_l(phi) d) Exp(phi) (central differences); quaternions round-trip.
* Base coordinates: writing an estimate into q, v and reading it back is the identity for a free flyer and
  for the quadruped's Euler chain, and the rotation, origin, velocity and angular velocity read from q, v are
  those rtctl's own kinematics gives the base body (forward kinematics, the twist recursion).
* Leg kinematics: h is the foot in the (mounted) IMU frame from rtctl's forward kinematics, G = J J^T from a
  central-difference Jacobian, dh/dt from a central difference of h along the joint velocities.
* The sparse Kalman update equals the dense textbook update; the invariant EKF's propagation equals
  Phi P Phi^T + Ad Q Ad^T dt with Phi = expm(A dt) of the dense A of Hartley et al. (2020) eq. 45 (with the bias
  columns); adding a foot is F P F^T + G N G^T (eq. 33).
* The Wilson-Hilferty chi-square quantile is at or above scipy's and within 0.5 % of it from 100 degrees of
  freedom (the divergence check's MIN_DOF) for false-alarm probabilities down to 1e-9.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.spatial.transform import Rotation
from scipy.stats import chi2, norm

from rtctl.dynamics import Dynamics
from rtctl.loops.estimation import InvariantEKF
from rtctl.loops.estimation import invariant_ekf as ekf
from rtctl.loops.estimation import kinematics as kin
from rtctl.loops.estimation import lie
from rtctl.loops.estimation.linalg import sparse_update
from rtctl.loops.estimation.monitor import MIN_DOF, chi2_quantile
from rtctl.model import ModelBuilder
from rtctl.plants.legged.model import planar_biped, spatial_quadruped

RNG = np.random.default_rng(7)


def mat(t):
    return np.array(t).reshape(3, 3)


def skew(x):
    return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])


def test_so3_exp_log_jacobian_and_quaternions():
    for _ in range(50):
        w = RNG.normal(size=3) * RNG.choice([1e-9, 1e-3, 1.0, 3.0])
        r = mat(lie.exp_so3(*w))
        np.testing.assert_allclose(r, Rotation.from_rotvec(w).as_matrix(), atol=1e-12)
        np.testing.assert_allclose(lie.log_so3(tuple(r.ravel())), Rotation.from_matrix(r).as_rotvec(), atol=1e-9)
        q = lie.matrix_to_quaternion(tuple(r.ravel()))
        np.testing.assert_allclose(mat(lie.quaternion_to_matrix(*q)), r, atol=1e-12)
        d, h = RNG.normal(size=3), 1e-6
        jl = mat(lie.left_jacobian(*w))
        num = (mat(lie.exp_so3(*(w + h * d))) - mat(lie.exp_so3(*(w - h * d)))) / (2 * h) @ r.T
        np.testing.assert_allclose(num, skew(jl @ d), atol=1e-6)
    near_pi = Rotation.from_rotvec([np.pi - 1e-8, 0, 0]).as_matrix()
    np.testing.assert_allclose(np.abs(lie.log_so3(tuple(near_pi.ravel()))), [np.pi - 1e-8, 0, 0], atol=1e-6)


def free_flyer_model():
    b = ModelBuilder("hopper")
    base = b.add_body("base", -1, "free_flyer", mass=2.0, inertia=np.diag([0.02, 0.03, 0.04]))
    leg = b.add_body("leg", base, "revolute", axis=(0, 1, 0), translation=(0.1, 0.05, -0.02), mass=0.5,
                     com=(0, 0, -0.1), inertia=np.eye(3) * 1e-3)
    b.add_body("shin", leg, "revolute", axis=(1, 0, 0), translation=(0, 0, -0.2), mass=0.3, com=(0, 0, -0.1),
               inertia=np.eye(3) * 1e-3)
    b.add_frame("foot", 2, translation=(0.01, 0.0, -0.2))
    return b.build()


@pytest.mark.parametrize("which", ["euler", "free_flyer", "planar"])
def test_base_coordinates_round_trip_and_agree_with_rtctl_kinematics(which):
    model = {"euler": lambda: spatial_quadruped().model, "free_flyer": free_flyer_model,
             "planar": lambda: planar_biped().model}[which]()
    feet = {"euler": ["front_left_foot"], "free_flyer": ["foot"], "planar": ["left_sole"]}[which]
    est = InvariantEKF(model, feet=feet)
    kind, axes = est.cfg_i[kin.CI_KIND], est.cfg_i[kin.CI_AXES:kin.CI_AXES + 6]
    dyn = Dynamics(model)
    body = model.n_base_bodies - 1
    out, back = np.zeros(18), np.zeros(18)
    for _ in range(20):
        q = model.random_configuration(RNG)
        if which == "euler":
            q[3:6] = RNG.uniform(-1.2, 1.2, 3)
        v = RNG.normal(size=model.nv)
        kin.read_base(kind, axes, q, v, out)
        rot, pos = dyn.forward_kinematics(q)
        np.testing.assert_allclose(out[:9].reshape(3, 3), rot[body], atol=1e-12)
        np.testing.assert_allclose(out[9:12], pos[body], atol=1e-12)
        twist = dyn.jacobian(q, body) @ v        # [omega; velocity of the origin], world axes
        np.testing.assert_allclose(out[12:15], twist[3:], atol=1e-10)
        np.testing.assert_allclose(rot[body] @ out[15:18], twist[:3], atol=1e-10)
        q2, v2 = q.copy(), v.copy()
        q2[:est.cfg_i[kin.CI_NBQ]] = 0.3
        v2[:model.n_base_dofs] = 0.0
        if which == "euler":
            q2[3:6] = q[3:6] + 2 * np.pi * np.array([1, 0, -2]) + 1e-3   # yaw and roll kept near the previous ones
        if which == "planar":
            q2[2] = q[2] + 4 * np.pi + 1e-3                                # the pitch kept near the previous one
        kin.write_base(kind, axes, tuple(out[:9]), out[9:12], out[12:15], out[15:18], q2, v2)
        kin.read_base(kind, axes, q2, v2, back)
        np.testing.assert_allclose(back, out, atol=1e-9)
        if which == "euler":
            np.testing.assert_allclose(q2[:6], q[:6] + 2 * np.pi * np.array([0, 0, 0, 1, 0, -2]), atol=1e-9)
        elif which == "planar":
            np.testing.assert_allclose(q2[:3], q[:3] + np.array([0, 0, 4 * np.pi]), atol=1e-9)
            np.testing.assert_allclose(v2[:3], v[:3], atol=1e-12)
        else:
            np.testing.assert_allclose(np.abs(q2[3:7] @ q[3:7]), 1.0, atol=1e-12)


def test_leg_kinematics_against_forward_kinematics_and_differences():
    robot = spatial_quadruped()
    m = robot.model
    est = InvariantEKF(m, feet=robot.foot_names)
    mount_r = Rotation.from_euler("xyz", [0.1, -0.2, 0.3]).as_matrix()
    mount_t = np.array([0.05, -0.02, 0.03])
    est.mount_imu(est.base_body, mount_r, mount_t)
    dyn = Dynamics(m)
    n, nv = est.n_feet, m.nv
    feet, jac, qk = np.zeros((n, kin.FOOT_WIDTH)), np.zeros((6, nv)), m.neutral_configuration()

    def legs(q, v):
        kin.leg_kinematics(m.packed_int, m.packed_float, est.ws, q, v, qk, est.cfg_i, est.cfg_f, jac, feet)
        return feet.copy()

    q = m.random_configuration(RNG)
    v = RNG.normal(size=nv)
    out = legs(q, v)
    rot, pos = dyn.forward_kinematics(q)
    base = m.n_base_bodies - 1
    eps = 1e-6
    for k, name in enumerate(robot.foot_names):
        p_world = dyn.frame_placement(q, name)[1]
        p_base = rot[base].T @ (p_world - pos[base])
        np.testing.assert_allclose(out[k, :3], mount_r.T @ (p_base - mount_t), atol=1e-12)
        jcols = np.zeros((3, nv))
        for j in range(m.n_base_dofs, nv):
            dq = np.zeros(nv)
            dq[j] = eps
            jcols[:, j] = (legs(dyn.integrate(q, dq, 1.0), v)[k, :3] - legs(dyn.integrate(q, -dq, 1.0), v)[k, :3]) \
                / (2 * eps)
        np.testing.assert_allclose(out[k, 3:12].reshape(3, 3), jcols @ jcols.T, atol=1e-8)
        np.testing.assert_allclose(out[k, 12:15], jcols @ v, atol=1e-8)


def test_sparse_update_equals_the_dense_kalman_update():
    dim, m_max = 12, 9
    a = RNG.normal(size=(dim, dim))
    P = a @ a.T + np.eye(dim)
    hrows = np.zeros((m_max, 4))
    H = np.zeros((6, dim))
    for r in range(6):
        i, j = RNG.choice(dim, 2, replace=False)
        wj = 0.0 if r == 5 else RNG.normal()
        hrows[r] = (i, 1.0, j, wj)
        H[r, i] += 1.0
        H[r, j] += wj
    nz = RNG.normal(size=(6, 6))
    N = np.zeros((m_max, m_max))
    N[:6, :6] = nz @ nz.T + np.eye(6) * 0.1
    z = np.zeros(m_max)
    z[:6] = RNG.normal(size=6)
    mw, delta = np.zeros((2 * m_max, dim + m_max + 1)), np.zeros(dim)
    S = H @ P @ H.T + N[:6, :6]
    K = P @ H.T @ np.linalg.inv(S)
    expected_P = P - K @ S @ K.T
    got = P.copy()
    nis = sparse_update(got, hrows, N, z, 6, mw, delta)
    np.testing.assert_allclose(delta, K @ z[:6], atol=1e-10)
    np.testing.assert_allclose(got, expected_P, atol=1e-10)
    assert nis == pytest.approx(z[:6] @ np.linalg.solve(S, z[:6]), rel=1e-10)
    N[0, 0] = -1e9
    assert sparse_update(P.copy(), hrows, N, z, 6, mw, delta) == -1.0


def _filter(n_feet=3):
    robot = spatial_quadruped()
    est = InvariantEKF(robot.model, feet=robot.foot_names[:n_feet])
    x = est.x
    x[ekf.X_R:ekf.X_R + 9] = Rotation.from_rotvec(RNG.normal(size=3)).as_matrix().ravel()
    x[ekf.X_V:ekf.X_BA + 3] = RNG.normal(size=12)
    x[ekf.X_D:ekf.X_D + 3 * n_feet] = RNG.normal(size=3 * n_feet)
    a = RNG.normal(size=(est.P.shape[0], est.P.shape[0])) * 0.1
    return est, a @ a.T


def _adjoint_and_a(x, n_feet, g):
    r = x[:9].reshape(3, 3)
    dim = 15 + 3 * n_feet
    cols = [x[ekf.X_V:ekf.X_V + 3], x[ekf.X_P:ekf.X_P + 3]] + [x[ekf.X_D + 3 * k:ekf.X_D + 3 * k + 3]
                                                               for k in range(n_feet)]
    ad = np.eye(dim)
    ad[:3, :3] = r
    for c, vec in enumerate(cols):
        ad[3 + 3 * c:6 + 3 * c, :3] = skew(vec) @ r
        ad[3 + 3 * c:6 + 3 * c, 3 + 3 * c:6 + 3 * c] = r
    A = np.zeros((dim, dim))
    A[3:6, 0:3] = skew(g)
    A[6:9, 3:6] = np.eye(3)
    bg = 9 + 3 * n_feet
    A[:bg, bg:bg + 6] = -ad[:bg, :bg] @ np.vstack([np.eye(6), np.zeros((bg - 6, 6))])
    return ad, A


def test_invariant_ekf_propagation_is_expm_of_the_error_dynamics():
    """Hartley et al. (2020) eq. 45 with the bias columns -Ad_X [I 0; 0 I; 0 0]: Phi = expm(A dt) exactly (A is
    nilpotent), Q_d = Ad_X Q Ad_X^T dt."""
    n = 3
    est, P0 = _filter(n)
    x, par = est.x, est.par
    x[ekf.X_D + 3 * n:] = 1.0                          # every foot in contact
    dt = 0.01
    ad, A = _adjoint_and_a(x, n, par[ekf.PAR_GX:ekf.PAR_GX + 3])
    Q = np.diag(np.r_[[par[ekf.PAR_GYRO]] * 3, [par[ekf.PAR_ACCEL]] * 3, [0.0] * 3, [par[ekf.PAR_FOOT]] * (3 * n),
                      [par[ekf.PAR_GYRO_BIAS]] * 3, [par[ekf.PAR_ACCEL_BIAS]] * 3])
    phi = expm(A * dt)
    expected = phi @ P0 @ phi.T + ad @ Q @ ad.T * dt
    P = P0.copy()
    x0 = x.copy()
    imu = np.r_[RNG.normal(size=3), RNG.normal(size=3), [np.nan] * 4]
    ekf.propagate(x, P, imu, dt, par, n, est.work)
    np.testing.assert_allclose(P, expected, atol=1e-12)
    r0 = x0[:9].reshape(3, 3)
    acc = r0 @ (imu[:3] - x0[ekf.X_BA:ekf.X_BA + 3]) + par[ekf.PAR_GX:ekf.PAR_GX + 3]
    np.testing.assert_allclose(x[ekf.X_V:ekf.X_V + 3], x0[ekf.X_V:ekf.X_V + 3] + acc * dt, atol=1e-12)
    np.testing.assert_allclose(x[ekf.X_P:ekf.X_P + 3], x0[ekf.X_P:ekf.X_P + 3] + x0[ekf.X_V:ekf.X_V + 3] * dt
                               + 0.5 * acc * dt * dt, atol=1e-12)
    np.testing.assert_allclose(x[:9].reshape(3, 3), r0 @ Rotation.from_rotvec(
        (imu[3:6] - x0[ekf.X_BG:ekf.X_BG + 3]) * dt).as_matrix(), atol=1e-12)


def test_adding_a_foot_copies_the_position_error_and_dropping_it_marginalises():
    n = 3
    est, P0 = _filter(n)
    x = est.x
    x[ekf.X_D + 3 * n:] = [1.0, 0.0, 1.0]
    d1 = ekf.P_D + 3
    P0[d1:d1 + 3, :] = 0.0
    P0[:, d1:d1 + 3] = 0.0
    feet = np.zeros((n, kin.FOOT_WIDTH))
    feet[:, :3] = RNG.normal(size=(n, 3))
    feet[:, 3:12] = np.eye(3).ravel() * 0.5
    est.cfg_f[kin.CF_NOISE:kin.CF_NOISE + 2] = (4e-6, 1e-6)
    P = P0.copy()
    ekf.add_foot(x, P, feet, 1, n, est.cfg_f)
    r = x[:9].reshape(3, 3)
    F = np.eye(P0.shape[0])
    F[d1:d1 + 3, :] = 0.0
    F[d1:d1 + 3, ekf.P_P:ekf.P_P + 3] = np.eye(3)
    G = np.zeros((P0.shape[0], 3))
    G[d1:d1 + 3] = r
    N = 4e-6 * 0.5 * np.eye(3) + 1e-6 * np.eye(3)
    np.testing.assert_allclose(P, F @ P0 @ F.T + G @ N @ G.T, atol=1e-15)
    np.testing.assert_allclose(x[ekf.X_D + 3:ekf.X_D + 6], x[ekf.X_P:ekf.X_P + 3] + r @ feet[1, :3], atol=1e-14)
    assert x[ekf.X_D + 3 * n + 1] == 1.0
    ekf.drop_foot(x, P, 1, n)
    np.testing.assert_array_equal(P, P0)   # its rows and columns zero again, the rest untouched
    assert x[ekf.X_D + 3 * n + 1] == 0.0


@pytest.mark.parametrize("p", [1e-3, 1e-6, 1e-9])
def test_wilson_hilferty_chi_square_quantile(p):
    z = -norm.ppf(p)
    for dof in (MIN_DOF, 300, 1000, 10000):
        exact = chi2.isf(p, dof)
        assert exact <= chi2_quantile(float(dof), z) <= exact * 1.005
