"""Every model declares its base (fixed, free_flyer, euler, planar); actuation follows the declaration, never names."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import rtctl
from rtctl.dynamics import Dynamics
from rtctl.model import BASE_KINDS, FREE_FLYER, ModelBuilder, ModelError
from rtctl.model.urdf import load_urdf, model_to_urdf
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.rt.interfaces import actuated_indices

LEG = {"mass": 1.0, "com": (0, 0, -0.2), "inertia": np.diag([0.02, 0.02, 0.004])}
BASE_SHAPE = {"fixed": (0, 0), "free_flyer": (1, 6), "euler": (6, 6), "planar": (3, 3)}


def legged(base: str):
    """A trunk on the given base with a two-joint leg (hip, knee)."""
    b = ModelBuilder(f"leg_on_{base}")
    trunk_inertia = {"mass": 5.0, "inertia": np.diag([0.1, 0.2, 0.15])}
    if base == "free_flyer":
        trunk = b.add_body("trunk", -1, FREE_FLYER, joint_name="root", **trunk_inertia)
    elif base == "euler":
        trunk = b.add_euler_floating_base("trunk", **trunk_inertia)
    elif base == "planar":
        trunk = b.add_planar_floating_base("trunk", **trunk_inertia)
    else:
        trunk = b.add_body("trunk", -1, "revolute", joint_name="yaw", axis=(0, 0, 1), **trunk_inertia)
    thigh = b.add_body("thigh", trunk, "revolute", joint_name="hip", axis=(0, 1, 0), **LEG)
    b.add_body("shank", thigh, "revolute", joint_name="knee", axis=(0, 1, 0), translation=(0, 0, -0.4), **LEG)
    return b.build()


@pytest.mark.parametrize("base", BASE_KINDS)
def test_each_base_kind_declares_its_bodies_and_dofs(base):
    m = legged(base)
    assert m.base == base
    assert (m.n_base_bodies, m.n_base_dofs) == BASE_SHAPE[base]
    assert m.has_free_flyer == (base == "free_flyer")
    assert f"base: {base}" in m.describe()
    q_idx, v_idx, names = actuated_indices(m)
    expected = ["yaw", "hip", "knee"] if base == "fixed" else ["hip", "knee"]
    assert names == expected
    assert v_idx.tolist() == list(range(m.n_base_dofs, m.nv))
    assert q_idx.tolist() == list(range(m.nq - len(expected), m.nq))


@pytest.mark.parametrize("base", BASE_KINDS)
def test_copies_keep_the_base(base):
    m = legged(base)
    for other in (copy.deepcopy(m), m.with_inertia_scaled(1.5), m.with_payload("shank", 0.5, (0, 0, -0.1))):
        assert (other.base, other.n_base_bodies, other.n_base_dofs) == (m.base, m.n_base_bodies, m.n_base_dofs)
        assert actuated_indices(other)[2] == actuated_indices(m)[2]


@pytest.mark.parametrize("suffixes", [("px", "py", "pz", "rz", "ry", "rx"), ("px", "pz", "ry")])
def test_a_fixed_model_named_like_a_floating_base_has_every_joint_actuated(suffixes):
    """Joints named like the Euler chain or the planar base, in the same order and types, declared fixed."""
    b = ModelBuilder("look_alike")
    parent = -1
    for k, suffix in enumerate(suffixes):
        axis = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}[suffix[1]]
        kind = "prismatic" if suffix[0] == "p" else "revolute"
        last = k == len(suffixes) - 1
        parent = b.add_body(f"body{k}", parent, kind, joint_name=f"trunk_{suffix}", axis=axis,
                            mass=2.0 if last else 0.0, inertia=np.diag([0.1, 0.1, 0.1]) if last else None)
    b.add_body("link", parent, "revolute", joint_name="hip", axis=(0, 1, 0), **LEG)
    m = b.build()
    assert (m.base, m.n_base_bodies, m.n_base_dofs) == ("fixed", 0, 0)
    q_idx, v_idx, names = actuated_indices(m)
    assert names == [f"trunk_{s}" for s in suffixes] + ["hip"]
    assert v_idx.tolist() == list(range(m.nv)) and q_idx.tolist() == list(range(m.nq))


@pytest.mark.parametrize("make", [planar_biped, spatial_quadruped])
def test_a_legged_urdf_loaded_without_a_floating_base_is_fixed(make):
    """model_to_urdf writes the base chain as ordinary joints; read back fixed, they are all actuated."""
    robot = make()
    back = load_urdf(model_to_urdf(robot.model))
    assert back.joint_names == robot.model.joint_names
    assert back.base == "fixed" and actuated_indices(back)[2] == back.joint_names


def test_legged_robots_declare_their_base():
    biped, quadruped = planar_biped(), spatial_quadruped()
    assert (biped.model.base, biped.n_base) == ("planar", 3) and biped.n_base == biped.model.n_base_dofs
    assert (quadruped.model.base, quadruped.n_base) == ("euler", 6)
    assert quadruped.n_base == quadruped.model.n_base_dofs


@pytest.mark.parametrize("floating_base, base", [(None, "fixed"), ("fixed", "fixed"), ("free_flyer", "free_flyer"),
                                                 ("euler", "euler"), ("planar", "planar")])
def test_the_urdf_loader_declares_the_base_it_adds(floating_base, base):
    path = rtctl.bundled_model_path("quadruped12")
    fixed = load_urdf(path)
    m = load_urdf(path, floating_base)
    assert m.base == base and m.n_base_dofs == BASE_SHAPE[base][1]
    names = actuated_indices(m)[2]
    assert names == fixed.joint_names  # the URDF's own joints, whatever the base
    assert actuated_indices(m)[1].tolist() == list(range(m.n_base_dofs, m.nv))


def test_a_urdf_floating_root_joint_is_a_free_flyer():
    urdf = """<robot name="r"><link name="world"/><link name="a"><inertial><mass value="1"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
        <link name="b"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
        </inertial></link>
        <joint name="float" type="floating"><parent link="world"/><child link="a"/></joint>
        <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    m = load_urdf(urdf)
    assert (m.base, m.n_base_bodies, m.n_base_dofs) == ("free_flyer", 1, 6)
    assert actuated_indices(m)[2] == ["j"]


def test_declarations_that_do_not_match_the_bodies_are_refused():
    b = ModelBuilder("bad")
    b.add_body("link", -1, "revolute", **LEG)
    b.base = "euler"
    with pytest.raises(ModelError, match="'euler' base is the serial chain"):
        b.build()
    b.base = "floating"
    with pytest.raises(ModelError, match="base must be one of"):
        b.build()
    ff = ModelBuilder("ff")
    ff.add_body("trunk", -1, FREE_FLYER, **LEG)
    ff.base = "fixed"
    with pytest.raises(ModelError, match="free-flyer joint is the root of a 'free_flyer' base"):
        ff.build()
    late = ModelBuilder("late")
    late.add_body("link", -1, "revolute", **LEG)
    with pytest.raises(ModelError, match="must be the first bodies"):
        late.add_euler_floating_base("trunk")
    with pytest.raises(ModelError, match="must be the first bodies"):
        late.add_planar_floating_base("trunk")


def test_floating_base_inverse_dynamics_defaults_to_the_declared_base():
    rng = np.random.default_rng(3)
    for base in ("free_flyer", "euler", "planar"):
        m = legged(base)
        dyn = Dynamics(m)
        q = m.random_configuration(rng, span=0.5)
        v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
        tau, acc = dyn.floating_base_inverse_dynamics(q, v, a)
        tau_n, acc_n = dyn.floating_base_inverse_dynamics(q, v, a, n_base=m.n_base_dofs)
        assert np.array_equal(tau, tau_n) and np.array_equal(acc, acc_n)
        assert np.all(tau[:m.n_base_dofs] == 0.0) and np.array_equal(acc[m.n_base_dofs:], a[m.n_base_dofs:])
    with pytest.raises(ValueError, match="fixed base: give n_base"):
        Dynamics(legged("fixed")).floating_base_inverse_dynamics(np.zeros(3), np.zeros(3), np.zeros(3))
