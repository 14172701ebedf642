"""The planar biped and spatial quadruped of Shah, Saha & Dutt (2012, section 5): structure, URDF, dynamics vs
Pinocchio."""
from __future__ import annotations

from functools import cache

import numpy as np
import pytest

import rtctl
from rtctl.dynamics import Dynamics
from rtctl.registry import robot_model as actuator_model
from rtctl.plants.legged.model import LEGGED_ROBOTS, planar_biped, spatial_quadruped
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf
from rtctl.rt.interfaces import actuated_indices

from oracle import Pair, close, worst_relative_error

G = 9.81


@cache
def robot(name):
    return LEGGED_ROBOTS[name]()


@cache
def pair(name):
    return Pair.from_model(load_urdf(robot(name).to_urdf()))


def random_states(model, n_base, seed, count=3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        q = rng.uniform(-1.2, 1.2, model.nq)  # |pitch| < pi/2 keeps the Euler chain regular
        out.append((q, rng.normal(size=model.nv), rng.normal(size=model.nv), 10 * rng.normal(size=model.nv),
                    5 * rng.normal(size=(model.nbodies, 6))))
    return out


@pytest.mark.parametrize("name, nv, n_base, mass, nc", [
    ("planar_biped", 9, 3, 5 + 2 * (1 + 1 + 0.2), 4),
    ("spatial_quadruped", 18, 6, 4 + 8 * 1, 4),
])
def test_dofs_masses_and_contacts(name, nv, n_base, mass, nc):
    r = robot(name)
    assert (r.model.nv, r.model.nq, r.n_base, r.n_actuated) == (nv, nv, n_base, nv - n_base)
    assert r.total_mass == pytest.approx(mass, rel=1e-12)
    q_idx, v_idx, names = actuated_indices(r.model)
    assert v_idx.tolist() == list(range(n_base, nv)) and q_idx.tolist() == v_idx.tolist()
    assert sorted(j for leg in r.legs.values() for j in leg) == list(range(n_base, nv))
    assert r.contact_bodies.shape == (nc,) and r.contact_bodies.dtype == np.int64
    assert r.contact_points.shape == (nc, 3) and len(r.foot_names) == nc
    assert sorted(i for pts in r.feet.values() for i in pts) == list(range(nc))
    # the paper's links (trunk + 6 or 8 leg links) carry all the mass; the others are massless
    massive = [b for b, m in zip(r.model.body_names, r.model.mass) if m > 0]
    assert len(massive) == (7 if name == "planar_biped" else 9)
    assert actuator_model(name).nv == nv


@pytest.mark.parametrize("name", list(LEGGED_ROBOTS))
def test_modules_partition_the_tree_like_the_generic_modularisation(name):
    r = robot(name)
    flat = [b for _, bodies in r.modules for b in bodies]
    assert sorted(flat) == sorted(r.model.body_names) and len(flat) == len(set(flat))
    assert r.module_indices() == r.model.kinematic_modules()
    assert [m for m, _ in r.modules] == [f"M{k}" for k in range(len(r.modules))]
    assert len(r.modules) == (3 if name == "planar_biped" else 5)  # Fig. 5 and Fig. 15(b)


@pytest.mark.parametrize("name", list(LEGGED_ROBOTS))
def test_urdf_round_trip_and_bundled_copy(name):
    r = robot(name)
    text = r.to_urdf()
    back = load_urdf(text)
    m = r.model
    assert back.body_names == m.body_names and back.joint_names == m.joint_names
    for attr in ("parent", "joint_type", "joint_rotation", "joint_translation", "axis", "mass", "com", "inertia_com"):
        np.testing.assert_allclose(getattr(back, attr), getattr(m, attr), rtol=0, atol=1e-15, err_msg=attr)
    assert [f.name for f in back.frames if f.name != "world"] == [f.name for f in m.frames]
    assert rtctl.bundled_model_path(name).read_text() == text, "bundled URDF is stale: regenerate with to_urdf()"


@pytest.mark.parametrize("name", list(LEGGED_ROBOTS))
def test_dynamics_agree_with_pinocchio(name):
    p = pair(name)
    for k, (q, v, a, tau, f_ext) in enumerate(random_states(p.model, robot(name).n_base, seed=len(name))):
        for ours, ref, what in (
            (p.dyn.mass_matrix(q), p.crba(q), "M"),
            (p.dyn.inverse_dynamics(q, v, a, f_ext=f_ext), p.rnea(q, v, a, f_ext), "ID with f_ext"),
            (p.dyn.forward_dynamics(q, v, tau, f_ext=f_ext), p.aba(q, v, tau, f_ext), "ABA with f_ext"),
            (p.dyn.center_of_mass(q), p.center_of_mass(q), "COM"),
        ):
            assert close(ours, ref, rtol=1e-9), f"{name} state {k} {what}: {worst_relative_error(ours, ref):.3g}"
        for foot in [f.name for f in p.model.frames]:
            rot, pos = p.dyn.frame_placement(q, foot)
            rot_ref, pos_ref = p.frame_placement(q, foot)
            np.testing.assert_allclose(pos, pos_ref, atol=1e-12)
            np.testing.assert_allclose(rot, rot_ref, atol=1e-12)


def test_biped_geometry_at_zero_configuration():
    """Straight legs under the trunk: soles l0/2 + 2 l + ankle height below the trunk COM, feet flat."""
    r = planar_biped()
    dyn = Dynamics(r.model)
    q = np.zeros(9)
    q[1] = 1.5
    rot, pos = dyn.forward_kinematics(q)
    for k in range(len(r.foot_names)):
        p = rot[r.contact_bodies[k]] @ r.contact_points[k] + pos[r.contact_bodies[k]]
        assert p[2] == pytest.approx(1.5 - 0.25 - 1.0 - r.ankle_height, abs=1e-14)
    heel, toe = (rot[r.contact_bodies[i]] @ r.contact_points[i] + pos[r.contact_bodies[i]] for i in r.feet["left_foot"])
    assert toe[0] - heel[0] == pytest.approx(0.15, abs=1e-14)
    # COM of the stretched robot: trunk at 1.5; thigh, shank, foot centres below it
    z_com = (5 * 1.5 + 2 * (1.0 * 1.0 + 1.0 * 0.5 + 0.2 * (0.25 - r.ankle_height))) / 9.4
    assert dyn.center_of_mass(q)[2] == pytest.approx(z_com, abs=1e-12)


def test_biped_leg_inertia_about_the_hip():
    """Stretched leg about the hip: thigh m l^2/3 + shank (I_c + m (1.5 l)^2) + foot, minus nothing else."""
    r = planar_biped()
    m = Dynamics(r.model).mass_matrix(np.zeros(9))
    l, rad = 0.5, 0.02
    i_c = (3 * rad ** 2 + l ** 2) / 12
    foot_x, foot_z = 0.5 * (-r.heel_offset + 0.15 - r.heel_offset), -(2 * l + r.ankle_height)
    i_foot = 0.2 * 0.15 ** 2 / 12 + 0.2 * (foot_x ** 2 + foot_z ** 2)
    expected = (i_c + 0.25 * l ** 2) + (i_c + (1.5 * l) ** 2) + i_foot
    assert m[3, 3] == pytest.approx(expected, rel=1e-12)
    assert m[0, 0] == pytest.approx(9.4, rel=1e-12) and m[1, 1] == pytest.approx(9.4, rel=1e-12)


def test_quadruped_feet_under_the_hips():
    r = spatial_quadruped()
    dyn = Dynamics(r.model)
    q = np.zeros(18)
    q[2] = 0.7
    rot, pos = dyn.forward_kinematics(q)
    feet = np.array([rot[b] @ p + pos[b] for b, p in zip(r.contact_bodies, r.contact_points)])
    np.testing.assert_allclose(feet[:, :2], r.hip_offsets[:, :2], atol=1e-14)
    np.testing.assert_allclose(feet[:, 2], 0.7 - 0.6, atol=1e-14)
    assert np.ptp(feet[:, 0]) == pytest.approx(1.0) and np.ptp(feet[:, 1]) == pytest.approx(0.3)


@pytest.mark.parametrize("name", list(LEGGED_ROBOTS))
def test_underactuated_inverse_dynamics_is_consistent_with_forward_dynamics(name):
    """Eqs. 26-27: tau with a zero base part; forward dynamics under tau (and f_ext) reproduces acc."""
    r = robot(name)
    dyn = Dynamics(r.model)
    for q, v, a, _, f_ext in random_states(r.model, r.n_base, seed=7):
        dyn.inverse_dynamics(q, v, a, f_ext=f_ext)  # stores f_ext in the workspace used below
        tau, acc = dyn.floating_base_inverse_dynamics(q, v, a, n_base=r.n_base)
        assert np.all(tau[:r.n_base] == 0.0)
        np.testing.assert_allclose(acc[r.n_base:], a[r.n_base:], rtol=0, atol=0)
        qdd = dyn.forward_dynamics(q, v, tau, f_ext=f_ext)
        np.testing.assert_allclose(qdd, acc, rtol=1e-9, atol=1e-9)


def test_planar_base_builder_and_errors():
    b = ModelBuilder("p")
    body = b.add_planar_floating_base("base", mass=2.0, inertia=np.diag([0.1, 0.2, 0.1]))
    b.add_body("link", body, "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5))
    m = b.build()
    assert m.joint_names[:3] == ["base_px", "base_pz", "base_ry"] and m.nv == 4
    assert actuated_indices(m)[2] == ["link_joint"]
    assert Dynamics(m).mass_matrix(np.zeros(4))[0, 0] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="n_base=5"):
        Dynamics(m).floating_base_inverse_dynamics(np.zeros(4), np.zeros(4), np.zeros(4), n_base=5)
    with pytest.raises(ValueError, match="ankle_height"):
        planar_biped(ankle_height=-0.1)
    with pytest.raises(ValueError, match="width"):
        spatial_quadruped(width=0.0)
