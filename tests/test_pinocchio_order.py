"""rtctl.model.pinocchio_order: q, v, a, tau and M between rtctl's joint order and Pinocchio's, by joint name.

The models are built so that the two orders differ (rtctl: depth-first,
children in file order; Pinocchio: children sorted by joint name) and carry
continuous joints (Pinocchio's (cos, sin) coordinates), one about an
unaligned axis; with a fixed base and with a free-flyer. Checked: round trips
of q (both ways), v and M; pin.rnea, pin.crba and pin.aba through the map
against rtctl's own dynamics; Talos, PR2 and Tiago from example-robot-data
when installed and loadable; errors naming the joint or argument; and that
the module does not import Pinocchio.
"""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import warnings

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.model.inertia import InertiaWarning
from rtctl.model.pinocchio_order import PinocchioOrder
from rtctl.model.urdf import load_urdf

pin = pytest.importorskip("pinocchio")


def _link(name, mass=1.0):
    return (f'<link name="{name}"><inertial><origin xyz="0.02 0.01 0.05"/><mass value="{mass}"/>'
            f'<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.025" iyz="0.002" izz="0.015"/></inertial></link>')


def _joint(name, jtype, parent, child, axis, xyz, limit=True):
    lim = '<limit lower="-0.5" upper="0.5" effort="10" velocity="2"/>' if limit else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="0.1 -0.2 0.3"/><axis xyz="{axis}"/>{lim}</joint>')


# File order: z_joint's branch first; Pinocchio visits base's children by name (a_joint first).
URDF = "\n".join([
    '<robot name="branches">', _link("base", 2.0), _link("l1"), _link("l2"), _link("l3"), _link("l4"), _link("l5"),
    _joint("z_joint", "continuous", "base", "l1", "0 0 1", "0 0.2 0", limit=False),
    _joint("c_joint", "continuous", "l1", "l2", "0.6 0 0.8", "0 0 0.3", limit=False),
    _joint("a_joint", "revolute", "base", "l3", "0 1 0", "0 -0.2 0"),
    _joint("m_joint", "prismatic", "l3", "l4", "1 0 0", "0.1 0 0.2"),
    _joint("b_joint", "revolute", "l3", "l5", "0 0 1", "0 0.1 0.1"),
    "</robot>",
])


@pytest.fixture(params=[None, "free_flyer"], ids=["fixed", "free_flyer"])
def robot(request, tmp_path):
    path = tmp_path / "branches.urdf"
    path.write_text(URDF)
    return _robot(path, request.param)


def _robot(path, base):
    model = load_urdf(path, base)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if base else pin.buildModelFromUrdf(str(path))
    pm.gravity.linear = model.gravity
    return model, pm, PinocchioOrder.from_pinocchio(model, pm)


def _states(model, rng, n=3):
    for _ in range(n):
        yield model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_orders_differ_and_continuous_joints_are_found(robot):
    model, pm, order = robot
    ours = [n for n in model.joint_names if n != "root_joint"]
    theirs = [n for n in list(pm.names)[1:] if n != "root_joint"]
    assert ours == ["z_joint", "c_joint", "a_joint", "m_joint", "b_joint"]
    assert theirs == ["a_joint", "b_joint", "m_joint", "z_joint", "c_joint"]
    assert not order.identity
    assert order.continuous_joints == ["z_joint", "c_joint"]
    assert (order.nq_pinocchio, order.nv_pinocchio) == (pm.nq, pm.nv) == (model.nq + 2, model.nv)
    assert order.pinocchio_joint_names == list(pm.names)[1:]


def test_configuration_round_trips(robot):
    model, pm, order = robot
    rng = np.random.default_rng(1)
    for q, _, _ in _states(model, rng):
        q_pin = order.to_pinocchio_q(q)
        for name in order.continuous_joints:  # (cos, sin) of our angle
            iq, iq_pin = model.idx_q[model.joint_names.index(name)], pm.idx_qs[pm.getJointId(name)]
            np.testing.assert_array_equal(q_pin[iq_pin:iq_pin + 2], [np.cos(q[iq]), np.sin(q[iq])])
        np.testing.assert_allclose(order.from_pinocchio_q(q_pin), q, rtol=0, atol=1e-15)
        out = np.empty(model.nq)
        assert order.from_pinocchio_q(q_pin, out=out) is out
    for _ in range(3):
        q_pin = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        np.testing.assert_allclose(order.to_pinocchio_q(order.from_pinocchio_q(q_pin)), q_pin, rtol=0, atol=1e-15)


def test_velocity_and_matrix_round_trips(robot):
    model, _, order = robot
    rng = np.random.default_rng(2)
    v = rng.normal(size=model.nv)
    np.testing.assert_array_equal(order.from_pinocchio_v(order.to_pinocchio_v(v)), v)
    rows = rng.normal(size=(model.nv, 3))  # first axis is the velocity space
    np.testing.assert_array_equal(order.from_pinocchio_tau(order.to_pinocchio_tau(rows)), rows)
    m = rng.normal(size=(model.nv, model.nv))
    np.testing.assert_array_equal(order.from_pinocchio_matrix(order.to_pinocchio_matrix(m)), m)
    out = np.empty(model.nv)
    assert order.to_pinocchio_a(v, out=out) is out


def check_dynamics(model, pm, order, rng, n=3):
    """rtctl's ID, M and FD against pin.rnea, pin.crba and pin.aba through the map."""
    pd, dyn = pm.createData(), Dynamics(model)
    for q, v, a in _states(model, rng, n):
        qp, vp, ap = order.to_pinocchio_q(q), order.to_pinocchio_v(v), order.to_pinocchio_a(a)
        tau = dyn.inverse_dynamics(q, v, a)
        scale = np.abs(tau).max()
        np.testing.assert_allclose(order.from_pinocchio_tau(pin.rnea(pm, pd, qp, vp, ap)), tau, rtol=0,
                                   atol=1e-10 * scale)
        m_pin = pin.crba(pm, pd, qp)
        m_pin = np.triu(m_pin) + np.triu(m_pin, 1).T
        mass = dyn.mass_matrix(q)
        np.testing.assert_allclose(order.from_pinocchio_matrix(m_pin), mass, rtol=0, atol=1e-10 * np.abs(mass).max())
        acc = order.from_pinocchio_a(pin.aba(pm, pd, qp, vp, order.to_pinocchio_tau(tau)))
        np.testing.assert_allclose(acc, a, rtol=0, atol=1e-8 * max(1.0, np.abs(a).max()))


def test_pinocchio_dynamics_by_joint_name(robot):
    check_dynamics(*robot, np.random.default_rng(3))


def _example_robot(relative):
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed")
    for f in files:
        if str(f).replace("\\", "/").endswith("example-robot-data/robots/" + relative):
            return f.locate()
    pytest.skip(f"example-robot-data has no {relative}")


@pytest.mark.parametrize("relative, base", [
    ("talos_data/robots/talos_reduced.urdf", "free_flyer"),
    ("pr2_description/urdf/pr2.urdf", None),
    ("tiago_description/robots/tiago.urdf", None),
])
def test_example_robot_data(relative, base):
    path = _example_robot(relative)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertiaWarning)     # PR2 and Tiago: CAD inertias kept as written
        model = load_urdf(path, base)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if base else pin.buildModelFromUrdf(str(path))
    pm.gravity.linear = model.gravity
    order = PinocchioOrder.from_pinocchio(model, pm)
    assert not order.identity  # the reason these models are here
    check_dynamics(model, pm, order, np.random.default_rng(4), n=2)


def _lists(pm):
    return list(pm.names), list(pm.nqs), list(pm.nvs), list(pm.idx_qs), list(pm.idx_vs)


def test_plain_lists_and_errors(robot):
    model, pm, order = robot
    names, nqs, nvs, idx_qs, idx_vs = _lists(pm)
    same = PinocchioOrder(model, names, nqs, nvs, idx_qs, idx_vs)
    np.testing.assert_array_equal(same.v_index, order.v_index)
    k = names.index("m_joint")
    renamed = names[:k] + ["other_joint"] + names[k + 1:]
    with pytest.raises(ValueError, match="no joint 'm_joint'"):
        PinocchioOrder(model, renamed, nqs, nvs, idx_qs, idx_vs)
    with pytest.raises(ValueError, match="joint 'm_joint': nq=2"):
        PinocchioOrder(model, names, nqs[:k] + [2] + nqs[k + 1:], nvs, idx_qs, idx_vs)
    with pytest.raises(ValueError, match="one entry per Pinocchio joint"):
        PinocchioOrder(model, names[:-1], nqs, nvs, idx_qs, idx_vs)
    with pytest.raises(ValueError, match="has no joint"):
        PinocchioOrder(model, names + ["extra"], nqs + [1], nvs + [1], idx_qs + [pm.nq], idx_vs + [pm.nv])
    with pytest.raises(ValueError, match="q must have length"):
        order.to_pinocchio_q(np.zeros(model.nq + 1))
    with pytest.raises(ValueError, match="q_pin contains NaN"):
        order.from_pinocchio_q(np.full(pm.nq, np.nan))
    with pytest.raises(ValueError, match="out must be a float64 array"):
        order.to_pinocchio_v(np.zeros(model.nv), out=np.zeros(model.nv + 1))


def test_free_flyer_needs_a_pinocchio_free_flyer(tmp_path):
    path = tmp_path / "branches.urdf"
    path.write_text(URDF)
    with pytest.raises(ValueError, match="JointModelFreeFlyer"):
        PinocchioOrder.from_pinocchio(load_urdf(path, "free_flyer"), pin.buildModelFromUrdf(str(path)))


def test_module_does_not_import_pinocchio():
    code = "import sys, rtctl.model.pinocchio_order; print('pinocchio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
