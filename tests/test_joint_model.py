"""The joint model (rtctl.dynamics.joints.jcalc): joint transforms and motion subspaces, and the kernels' use of it."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import rtctl.dynamics as dynamics_package
from rtctl.dynamics import Dynamics
from rtctl.dynamics import kernels as k
from rtctl.dynamics.joints import _sincos
from rtctl.dynamics.spatial import ldlt_factor
from rtctl.model import (FREE_FLYER, MF_AXIS, MF_ROT, MF_TRANS, MF_WIDTH, MI_PARENT, MI_TYPE, MI_WIDTH, PRISMATIC,
                         REVOLUTE, ModelBuilder)

ALGORITHM_MODULES = ("__init__", "workspace", "spatial", "kinematics", "inverse", "mass_matrix", "forward", "contact",
                     "constrained")


def joint_calc(jtype, axis, q, rotation=None, translation=None):
    """(R, p, S in body axes as 6 x nv) from jcalc and motion_subspace on a one-body model row: (R, p) is the
    placement (rotation, translation) composed with the joint transform, identity placement by default."""
    mi = np.zeros((1, MI_WIDTH), dtype=np.int64)
    mi[0, MI_TYPE], mi[0, MI_PARENT] = jtype, -1
    mf = np.zeros((2, MF_WIDTH))
    mf[0, MF_ROT:MF_ROT + 9] = np.ravel(np.eye(3) if rotation is None else rotation)
    mf[0, MF_TRANS:MF_TRANS + 3] = 0.0 if translation is None else translation
    mf[0, MF_AXIS:MF_AXIS + 3] = axis
    ws = np.zeros((1, k.WS_WIDTH))
    rot, pos = k.jcalc(mi, mf, np.asarray(q, dtype=float), 0)
    nv = 6 if jtype == FREE_FLYER else 1
    k.motion_subspace(mi, mf, ws, 0, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
    s = np.array([ws[0, k.W_S + k.DOF_WIDTH * j:k.W_S + k.DOF_WIDTH * j + 6] for j in range(nv)]).T
    return np.reshape(rot, (3, 3)), np.array(pos), s


def test_revolute_joint_rotates_about_its_axis():
    rng = np.random.default_rng(1)
    for _ in range(5):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        th = rng.uniform(-3, 3)
        rot, pos, s = joint_calc(REVOLUTE, axis, [th])
        np.testing.assert_allclose(rot, Rotation.from_rotvec(th * axis).as_matrix(), atol=1e-14)
        assert np.array_equal(pos, np.zeros(3))
        np.testing.assert_array_equal(s[:, 0], np.r_[axis, 0, 0, 0])


@pytest.mark.parametrize("axis", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (-1, 0, 0), (0, -1, 0), (0, 0, -1), (0.6, 0, 0.8)])
def test_revolute_joint_placed_in_its_parent(axis):
    """jcalc's placed transform is X_tree X_J: R_tree Rot(a, theta) and t_tree (the coordinate-axis fast path
    included), to round-off."""
    rng = np.random.default_rng(3)
    tree = Rotation.random(random_state=5).as_matrix()
    t = rng.normal(size=3)
    for th in rng.uniform(-7, 7, 5):
        rot, pos, _ = joint_calc(REVOLUTE, np.asarray(axis, dtype=float), [th], tree, t)
        np.testing.assert_allclose(rot, tree @ Rotation.from_rotvec(th * np.asarray(axis, dtype=float)).as_matrix(),
                                   atol=1e-15)
        assert np.array_equal(pos, t)


def test_motion_subspace_is_in_world_axes():
    rng = np.random.default_rng(4)
    r = Rotation.random(random_state=6).as_matrix()
    mi = np.zeros((3, MI_WIDTH), dtype=np.int64)
    mi[:, MI_TYPE] = REVOLUTE, PRISMATIC, FREE_FLYER
    mf = np.zeros((4, MF_WIDTH))
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    mf[:2, MF_AXIS:MF_AXIS + 3] = axis
    ws = np.zeros((3, k.WS_WIDTH))
    for i in range(3):
        k.motion_subspace(mi, mf, ws, i, tuple(r.ravel()))
    col = [ws[i, k.W_S + k.DOF_WIDTH * j:k.W_S + k.DOF_WIDTH * j + 6] for i in range(3) for j in range(6 if i == 2 else 1)]
    np.testing.assert_allclose(col[0], np.r_[r @ axis, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(col[1], np.r_[0, 0, 0, r @ axis], atol=1e-15)
    swap = np.block([[np.zeros((3, 3)), r], [r, np.zeros((3, 3))]])
    np.testing.assert_array_equal(np.array(col[2:]).T, swap)


def test_joint_sincos_is_within_an_ulp_of_libm():
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(-4, 4, 20000), rng.uniform(-1e5, 1e5, 20000), rng.uniform(-1e8, 1e8, 1000),
                        np.arange(-2000, 2000) * np.pi / 4 + rng.choice([0.0, 1e-12, -1e-9], 4000), [0.0, 1e5, -1e5]])
    got = np.array([_sincos(t) for t in x])
    np.testing.assert_allclose(got[:, 0], np.sin(x), rtol=0, atol=1.2e-16)
    np.testing.assert_allclose(got[:, 1], np.cos(x), rtol=0, atol=1.2e-16)


def test_prismatic_joint_translates_along_its_axis():
    axis = np.array([0.6, 0.0, 0.8])
    rot, pos, s = joint_calc(PRISMATIC, axis, [0.25])
    assert np.array_equal(rot, np.eye(3))
    np.testing.assert_allclose(pos, 0.25 * axis, atol=1e-16)
    np.testing.assert_array_equal(s[:, 0], np.r_[0, 0, 0, axis])


def test_free_flyer_joint_is_the_pose_and_its_subspace_swaps_the_halves():
    quat = Rotation.random(random_state=4).as_quat()  # xyzw, the order of q[3:7]
    q = np.r_[0.1, -0.2, 0.3, quat]
    rot, pos, s = joint_calc(FREE_FLYER, (1.0, 0.0, 0.0), q)
    np.testing.assert_allclose(rot, Rotation.from_quat(quat).as_matrix(), atol=1e-14)
    np.testing.assert_array_equal(pos, q[:3])
    swap = np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])  # v = [v_lin; omega]
    np.testing.assert_array_equal(s, swap)


def random_tree(seed, free_flyer):
    rng = np.random.default_rng(seed)
    b = ModelBuilder("tree")
    if free_flyer:
        b.add_body("base", -1, FREE_FLYER, mass=3.0, inertia=np.diag([0.1, 0.2, 0.3]))
    for i in range(int(free_flyer), 8):
        b.add_body(f"b{i}", int(rng.integers(-1 if not free_flyer else 0, i)) if i else -1,
                   "prismatic" if rng.random() < 0.3 else "revolute", axis=rng.normal(size=3),
                   rotation=Rotation.random(random_state=seed + i).as_matrix(), translation=rng.uniform(-0.3, 0.3, 3),
                   mass=1.0, com=rng.uniform(-0.1, 0.1, 3), inertia=np.diag([0.01, 0.02, 0.03]))
    return b.build()


@pytest.mark.parametrize("free_flyer", [False, True])
def test_twists_are_the_time_derivative_of_the_poses(free_flyer):
    """t_k = sum over the ancestors' joints of S qd (world axes) equals d/dt of body k's pose along q (+) v t."""
    model = random_tree(7, free_flyer)
    dyn = Dynamics(model)
    rng = np.random.default_rng(2)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    k.kinematics(dyn.mi, dyn.mf, dyn.ws, q, v, np.zeros(model.nv), 0.0)
    nb = model.nbodies
    omega, vel = dyn.ws[:nb, k.W_OMEGA:k.W_OMEGA + 3].copy(), dyn.ws[:nb, k.W_VEL:k.W_VEL + 3].copy()
    h = 1e-6
    rot_p, pos_p = dyn.forward_kinematics(dyn.integrate(q, v, h))
    rot_m, pos_m = dyn.forward_kinematics(dyn.integrate(q, v, -h))
    for b in range(nb):
        dr = (rot_p[b] - rot_m[b]) / (2 * h) @ ((rot_p[b] + rot_m[b]) / 2).T  # omega~
        np.testing.assert_allclose([dr[2, 1], dr[0, 2], dr[1, 0]], omega[b], atol=1e-6)
        np.testing.assert_allclose((pos_p[b] - pos_m[b]) / (2 * h), vel[b], atol=1e-6)


def test_configuration_rate_is_the_derivative_of_integrate():
    model = random_tree(3, True)
    dyn = Dynamics(model)
    rng = np.random.default_rng(5)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    h = 1e-6
    finite = (dyn.integrate(q, v, h) - dyn.integrate(q, v, -h)) / (2 * h)
    np.testing.assert_allclose(dyn.configuration_rate(q, v), finite, atol=1e-8)


def test_jacobian_columns_are_the_world_motion_subspace_at_the_point():
    model = random_tree(11, True)
    dyn = Dynamics(model)
    q = model.random_configuration(np.random.default_rng(6))
    last = model.nbodies - 1
    jac = dyn.jacobian(q, last)
    _, pos = dyn.forward_kinematics(q)
    j = last
    while j >= 0:
        i0, nv = model.idx_v[j], 6 if model.joint_type[j] == FREE_FLYER else 1
        for c in range(nv):
            s = dyn.ws[j, k.W_S + k.DOF_WIDTH * c:k.W_S + k.DOF_WIDTH * c + 6]
            np.testing.assert_allclose(jac[:3, i0 + c], s[:3], atol=1e-15)
            np.testing.assert_allclose(jac[3:, i0 + c], s[3:] + np.cross(s[:3], pos[last] - pos[j]), atol=1e-14)
        j = model.parent[j]


@pytest.mark.parametrize("n", range(1, 7))
def test_ldlt_factor_reconstructs_the_matrix(n):
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    stride = 9
    ws = np.zeros((1, 4 + stride * n))
    for r in range(n):
        ws[0, 4 + stride * r:4 + stride * r + n] = spd[r]
    assert ldlt_factor(ws, 0, 4, n, stride)
    f = np.array([ws[0, 4 + stride * r:4 + stride * r + n] for r in range(n)])
    lower = np.tril(f, -1) + np.eye(n)
    np.testing.assert_allclose(lower @ np.diag(1.0 / np.diag(f)) @ lower.T, spd, rtol=1e-12, atol=1e-12)
    ws[0, 4] = -1.0
    assert not ldlt_factor(ws, 0, 4, n, stride)


def test_only_the_joint_model_knows_joint_types():
    """The algorithms reach joints through jcalc and the joint maps: no joint-type constant outside joints.py."""
    folder = Path(dynamics_package.__file__).parent
    joint_types = {"FREE_FLYER", "REVOLUTE", "PRISMATIC", "JOINT_TYPE_NAMES"}
    for name in ALGORITHM_MODULES:
        tree = ast.parse((folder / f"{name}.py").read_text())
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert not used & joint_types, f"{name}.py uses {sorted(used & joint_types)}"
