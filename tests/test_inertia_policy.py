"""Inertias as real URDF files have them: the strict/warn/repair policy, relative tolerances, massless links and
fixed-joint merging that keeps every child's mass, centre of mass and inertia.

* The projection of ``repair`` is checked by the variational inequality that characterises the nearest point
  of a convex set: <I - R, P - R> <= 0 for every physically consistent P.
* Merging is checked against the parallel-axis sum by hand and against Pinocchio (ID, M, FD to 1e-9).
"""
from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest
from oracle import NamedPair, close

from rtctl.dynamics import Dynamics
from rtctl.model import ModelError, rpy_to_matrix
from rtctl.model.body import inertia_violation
from rtctl.model.inertia import InertiaWarning, nearest_physical_inertia
from rtctl.model.report import model_report
from rtctl.model.urdf import load_urdf

LIMIT = '<limit lower="-1" upper="1" effort="10" velocity="2"/>'


def inertia_xml(i):
    entries = {"ixx": (0, 0), "iyy": (1, 1), "izz": (2, 2), "ixy": (0, 1), "ixz": (0, 2), "iyz": (1, 2)}
    return "<inertia " + " ".join(f'{key}="{float(i[rc])!r}"' for key, rc in entries.items()) + "/>"


def link(name, mass=1.0, inertia=None, com="0 0 0"):
    inertia = np.eye(3) * 0.01 if inertia is None else inertia
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass!r}"/>{inertia_xml(inertia)}'
            "</inertial></link>")


def joint(name, parent, child, kind="revolute", origin="0 0 0", axis="0 0 1", rpy="0 0 0"):
    body = "" if kind == "fixed" else f'<axis xyz="{axis}"/>{LIMIT}'
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{origin}" rpy="{rpy}"/>{body}</joint>')


def robot(*parts):
    return '<robot name="chain">' + "".join(parts) + "</robot>"


BAD = {"hand": np.diag([0.01, 0.01, 0.05]), "finger": np.array([[0.01, 0.05, 0], [0.05, 0.01, 0], [0, 0, 0.01]])}


def two_bad_links():
    return robot(link("base"), link("arm"), link("hand", inertia=BAD["hand"]), link("finger", inertia=BAD["finger"]),
                 joint("shoulder", "base", "arm"), joint("wrist", "arm", "hand", axis="1 0 0"),
                 joint("knuckle", "hand", "finger", origin="0 0 0.1", axis="0 1 0"))


def random_physical_inertia(rng, scale=1.0):
    """A rotated inertia of a random box of positive density: always physically consistent."""
    second = rng.uniform(0, 1, size=3) * scale
    rot, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return rot @ np.diag(second.sum() - second) @ rot.T


def test_strict_refuses_listing_every_offending_link():
    with pytest.raises(ModelError) as info:
        load_urdf(two_bad_links(), inertia="strict")
    message = str(info.value)
    assert "2 links with a physically inconsistent inertia (inertia='strict'" in message
    assert "link 'hand': principal moments [0.01, 0.01, 0.05] violate the triangle inequality" in message
    assert "by 60% of l3" in message
    assert "link 'finger': inertia is not positive semi-definite" in message


def test_warn_is_the_default_loads_as_written_and_warns_once_naming_every_link():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_urdf(two_bad_links())
    (warning,) = caught
    assert warning.category is InertiaWarning
    assert "link 'hand'" in str(warning.message) and "link 'finger'" in str(warning.message)
    np.testing.assert_array_equal(model.inertia_com[model.body_index("hand")], BAD["hand"])
    assert [f.link for f in model.inertia_findings] == ["hand", "finger"]


def test_repair_replaces_each_with_a_consistent_inertia_and_reports_the_change():
    with pytest.warns(InertiaWarning, match="(?s)repaired the inertia of 2 links.*link 'hand'.*repaired to"):
        model = load_urdf(two_bad_links(), inertia="repair")
    for name, bad in BAD.items():
        repaired = model.inertia_com[model.body_index(name)]
        assert inertia_violation(repaired) is None
        np.testing.assert_allclose(repaired, nearest_physical_inertia(bad), rtol=1e-12)
    # 0.01 + 0.01 >= 0.05 restored by moving the three moments 0.03/3 each along (1, 1, -1)
    np.testing.assert_allclose(model.inertia_com[model.body_index("hand")], np.diag([0.02, 0.02, 0.04]), atol=1e-15)
    assert "(repaired)" in model_report(model)


def test_unknown_policy_is_refused():
    with pytest.raises(ModelError, match="inertia must be one of"):
        load_urdf(two_bad_links(), inertia="ignore")


@pytest.mark.parametrize("seed", range(5))
def test_repair_is_the_nearest_consistent_inertia(seed):
    rng = np.random.default_rng(seed)
    bad = rng.normal(size=(3, 3)) * 0.01
    bad = bad + bad.T
    repaired = nearest_physical_inertia(bad)
    assert inertia_violation(repaired) is None
    for _ in range(200):  # projection onto a convex set: <bad - R, P - R> <= 0 for all P in the set
        candidate = random_physical_inertia(rng, scale=0.02) if rng.random() < 0.5 else \
            nearest_physical_inertia(repaired + 1e-3 * rng.normal(size=(3, 3)) * np.eye(3))
        assert np.sum((bad - repaired) * (candidate - repaired)) <= 1e-15


def test_repair_leaves_a_consistent_inertia_unchanged():
    rng = np.random.default_rng(7)
    for _ in range(20):
        good = random_physical_inertia(rng)
        np.testing.assert_allclose(nearest_physical_inertia(good), good, atol=1e-14)


@pytest.mark.parametrize("scale", [1e-12, 1.0, 1e6])
def test_tolerances_are_relative_to_the_link_inertia_scale(scale):
    round_off = np.diag([-1e-11, 0.5, 0.5]) * scale  # -1e-11 of a 0.5 scale: round-off at any units
    cad = np.diag([1.0, 1.0, 2.007]) * scale  # triangle inequality broken by 0.35 %
    assert inertia_violation(round_off) is None
    problem, amount = inertia_violation(cad)
    assert "triangle inequality" in problem and amount == pytest.approx(0.007 / 2.007, rel=1e-9)


def test_merging_keeps_every_child_mass_com_and_inertia_by_the_parallel_axis_theorem():
    i_hand, i_sensor = np.diag([0.02, 0.03, 0.04]), np.diag([0.001, 0.002, 0.0025])
    rpy = np.array([0.3, -0.2, 0.5])
    urdf = robot(link("base"), link("arm", mass=2.0, com="0.1 0 0"),
                 link("hand", mass=1.0, inertia=i_hand, com="0 0.2 0"),
                 link("sensor", mass=0.0, inertia=i_sensor),
                 joint("shoulder", "base", "arm"), joint("wrist", "arm", "hand", "fixed", origin="0.5 0 0"),
                 joint("mount", "hand", "sensor", "fixed", origin="0 0 0.3", rpy=" ".join(map(str, rpy))))
    model = load_urdf(urdf)
    c_arm, c_hand = np.array([0.1, 0, 0]), np.array([0.5, 0.2, 0])
    com = (2.0 * c_arm + 1.0 * c_hand) / 3.0

    def shifted(m, c, i):
        d = c - com
        return i + m * (d @ d * np.eye(3) - np.outer(d, d))

    rot = rpy_to_matrix(rpy)
    expected = shifted(2.0, c_arm, np.eye(3) * 0.01) + shifted(1.0, c_hand, i_hand) + rot @ i_sensor @ rot.T
    assert model.mass[0] == 3.0
    np.testing.assert_allclose(model.com[0], com, rtol=1e-14)
    np.testing.assert_allclose(model.inertia_com[0], expected, rtol=1e-12)


def massless_chain_urdf():
    """A revolute joint moving a massless link that carries an inertia, a fixed massless child with one, and a
    leg whose last joint moves a massless, inertia-free link (a sensor frame on a joint)."""
    return robot(link("base"), link("rotor", mass=0.0, inertia=np.diag([0.002, 0.002, 0.003])),
                 link("rotor_cap", mass=0.0, inertia=np.diag([0.001, 0.001, 0.0015])), link("leg"),
                 joint("spin", "base", "rotor"), joint("cap", "rotor", "rotor_cap", "fixed", origin="0 0 0.05"),
                 joint("hip", "rotor", "leg", origin="0.2 0 0", axis="0 1 0"))


def test_massless_links_with_inertia_agree_with_pinocchio(tmp_path):
    path = tmp_path / "massless.urdf"
    path.write_text(massless_chain_urdf())
    model = load_urdf(path)
    pair, dyn = NamedPair(model, pin.buildModelFromUrdf(str(path))), Dynamics(model)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, v, a, tau = model.random_configuration(rng), *rng.normal(size=(3, model.nv))
        assert close(dyn.inverse_dynamics(q, v, a), pair.rnea(q, v, a))
        assert close(dyn.mass_matrix(q), pair.crba(q))
        assert close(dyn.forward_dynamics(q, v, tau), pair.forward_dynamics(q, v, tau))


def test_a_massless_subtree_keeps_id_and_m_and_forward_dynamics_names_the_joints():
    urdf = robot(link("base"), link("arm"), link("camera", mass=0.0, inertia=np.zeros((3, 3))),
                 link("lens", mass=0.0, inertia=np.zeros((3, 3))),
                 joint("shoulder", "base", "arm"), joint("pan", "arm", "camera", origin="0 0 0.3"),
                 joint("zoom", "camera", "lens", "prismatic"))
    model = load_urdf(urdf)
    dyn = Dynamics(model)
    q, v, a = np.full(3, 0.3), np.ones(3), np.ones(3)
    assert np.all(np.isfinite(dyn.inverse_dynamics(q, v, a)))
    m = dyn.mass_matrix(q)
    assert m[0, 0] > 0 and np.all(m[1:, :] == 0) and np.all(m[:, 1:] == 0)
    with pytest.raises(ValueError, match="singular.*joints 'pan', 'zoom' of model 'chain' move massless subtrees"):
        dyn.forward_dynamics(q, v, np.zeros(3))
    assert "massless subtrees (forward dynamics raises; ID and M work): 2" in model_report(model)
