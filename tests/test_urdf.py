"""URDF loading and writing (rtctl.model.urdf) and ModelBuilder validation.

Malformed URDFs must raise ModelError whose message names the faulty link or
joint (and the file path when loaded from a file). Well-formed ones must give
the documented model: fixed joints merged, continuous joints unbounded,
depth-first joint order, limits read, and a lossless model_to_urdf round trip.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from rtctl import bundled_model_path
from rtctl.model import FREE_FLYER, PRISMATIC, REVOLUTE, ModelBuilder, ModelError, rpy_to_matrix
from rtctl.model.urdf import load_urdf, model_to_urdf

BUNDLED = ["arm7", "quadruped12", "humanoid"]

LIMIT = '<limit lower="-1" upper="1" effort="10" velocity="2"/>'
INERTIA = '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'


def link(name, mass=1.0, inertia=INERTIA, com="0 0 0"):
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>{inertia}'
            f"</inertial></link>")


def joint(name, parent, child, type="revolute", body=LIMIT):
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f"{body}</joint>")


def robot(*elements):
    return '<robot name="test_arm">\n' + "\n".join(elements) + "\n</robot>\n"


def arm(forearm=None, elbow=None, *extra):
    """base -shoulder-> upper_arm -elbow-> forearm, with either piece replaceable."""
    return robot(
        link("base"), link("upper_arm"), forearm or link("forearm"),
        joint("shoulder", "base", "upper_arm"),
        elbow or joint("elbow", "upper_arm", "forearm"),
        *extra,
    )


def link_masses(path):
    """{link name: <mass value>} straight from the XML, 0 for links without <inertial>."""
    masses = {}
    for el in ET.parse(path).getroot().findall("link"):
        mass = el.find("inertial/mass")
        masses[el.get("name")] = float(mass.get("value")) if mass is not None else 0.0
    return masses


def root_link(path):
    """The one link of the file that is no joint's child."""
    root = ET.parse(path).getroot()
    children = {j.find("child").get("link") for j in root.findall("joint")}
    (name,) = [el.get("name") for el in root.findall("link") if el.get("name") not in children]
    return name


def serial_chain(n):
    """A valid URDF: n links in one chain of continuous joints."""
    parts = [link("l0")]
    for i in range(1, n):
        parts += [link(f"l{i}", mass=0.01), joint(f"j{i}", f"l{i - 1}", f"l{i}", type="continuous", body="")]
    return robot(*parts)


# ---------------------------------------------------------------- malformed URDFs


def test_joint_without_parent_names_the_joint(load_error):
    elbow = '<joint name="elbow" type="revolute"><child link="forearm"/>' + LIMIT + "</joint>"
    message = load_error(arm(elbow=elbow))
    assert "joint 'elbow'" in message and "<parent" in message


def test_parent_naming_unknown_link_names_joint_and_link(load_error):
    message = load_error(arm(elbow=joint("elbow", "no_such_link", "forearm")))
    assert "joint 'elbow'" in message and "'no_such_link'" in message


def test_child_naming_unknown_link_names_joint_and_link(load_error):
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "no_such_link")))
    assert "joint 'elbow'" in message and "'no_such_link'" in message


def test_cycle_without_root_is_reported_with_a_joint_of_the_cycle(load_error):
    urdf = robot(link("a"), link("b"), link("c"),
                 joint("a_to_b", "a", "b"), joint("b_to_c", "b", "c"), joint("c_to_a", "c", "a"))
    message = load_error(urdf)
    assert "cycle" in message
    assert any(f"'{name}'" in message for name in ("a_to_b", "b_to_c", "c_to_a"))


def test_cycle_error_names_a_joint_on_the_cycle_not_a_side_branch():
    urdf = robot(link("a"), link("b"), link("c"), link("side"),
                 joint("a_to_side", "a", "side"),
                 joint("a_to_b", "a", "b"), joint("b_to_c", "b", "c"), joint("c_to_a", "c", "a"))
    with pytest.raises(ModelError) as info:
        load_urdf(urdf)
    assert "'a_to_side'" not in str(info.value)


def test_link_with_two_parent_joints_names_link_and_both_joints(load_error):
    message = load_error(arm(None, None, link("hand"),
                             joint("wrist", "forearm", "hand"), joint("second_wrist", "upper_arm", "hand")))
    assert "link 'hand'" in message and "'wrist'" in message and "'second_wrist'" in message


def test_cycle_detached_from_root_names_the_unreached_links(load_error):
    message = load_error(arm(None, None, link("loop_a"), link("loop_b"),
                             joint("ab", "loop_a", "loop_b"), joint("ba", "loop_b", "loop_a")))
    assert "'loop_a'" in message and "'loop_b'" in message


def test_unknown_joint_type_names_joint_and_type(load_error):
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "forearm", type="ball")))
    assert "joint 'elbow'" in message and "'ball'" in message


def test_joint_without_type_attribute_says_the_attribute_is_missing():
    elbow = '<joint name="elbow"><parent link="upper_arm"/><child link="forearm"/>' + LIMIT + "</joint>"
    with pytest.raises(ModelError) as info:
        load_urdf(arm(elbow=elbow))
    assert "joint 'elbow'" in str(info.value) and "missing" in str(info.value)


def test_negative_mass_names_the_link(load_error):
    message = load_error(arm(forearm=link("forearm", mass=-2.0)))
    assert "link 'forearm'" in message and "negative mass" in message


def strict_error(urdf, *args) -> str:
    with pytest.raises(ModelError) as info:
        load_urdf(urdf, *args, inertia="strict")
    return str(info.value)


def test_inertia_with_negative_eigenvalue_names_the_link_under_strict():
    bad = '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0.05" ixz="0" iyz="0"/>'
    message = strict_error(arm(forearm=link("forearm", inertia=bad)))
    # principal moments 0.01 -+ 0.05 and 0.01: the smallest, -0.04, is 66.7 % of the largest, 0.06
    assert "link 'forearm': inertia is not positive semi-definite" in message and "66.7% of the largest" in message


def test_inertia_violating_triangle_inequality_names_the_link_and_by_how_much_under_strict():
    bad = '<inertia ixx="0.01" iyy="0.01" izz="0.05" ixy="0" ixz="0" iyz="0"/>'
    message = strict_error(arm(forearm=link("forearm", inertia=bad)))
    # 0.01 + 0.01 falls short of 0.05 by 0.03, 60 % of it
    assert "link 'forearm': principal moments [0.01, 0.01, 0.05] violate the triangle inequality" in message
    assert "by 60% of l3" in message


def test_bad_inertia_of_link_fixed_to_a_moving_body_names_the_link_under_strict():
    bad = '<inertia ixx="-0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
    wrist = joint("wrist", "forearm", "hand", type="fixed", body="")
    message = strict_error(arm(None, None, link("hand", inertia=bad), wrist))
    assert "link 'hand': inertia is not positive semi-definite" in message


def test_bad_root_inertia_with_free_flyer_names_the_file_under_strict(tmp_path):
    bad = '<inertia ixx="-0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
    path = tmp_path / "bad_root.urdf"
    path.write_text(robot(link("base", inertia=bad), link("upper_arm"), joint("shoulder", "base", "upper_arm")))
    message = strict_error(path, "free_flyer")
    assert "link 'base'" in message and message.startswith(str(path))


def test_bad_root_inertia_is_rejected_for_a_fixed_base_too_under_strict():
    bad = '<inertia ixx="-0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
    message = strict_error(robot(link("base", inertia=bad), link("upper_arm"), joint("shoulder", "base", "upper_arm")))
    assert "link 'base'" in message


def test_revolute_joint_without_limit_names_the_joint(load_error):
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "forearm", body="")))
    assert "joint 'elbow'" in message and "<limit>" in message


def test_lower_limit_above_upper_names_the_joint(load_error):
    limit = '<limit lower="1" upper="-1" effort="10" velocity="2"/>'
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "forearm", body=limit)))
    assert "joint 'elbow'" in message and "exceeds" in message


def test_non_numeric_attribute_names_joint_and_value(load_error):
    body = '<origin xyz="1 a 0"/>' + LIMIT
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "forearm", body=body)))
    assert "joint 'elbow'" in message and "xyz='1 a 0'" in message and "not numeric" in message


def test_wrong_number_of_values_names_joint_and_value(load_error):
    body = '<axis xyz="1 0"/>' + LIMIT
    message = load_error(arm(elbow=joint("elbow", "upper_arm", "forearm", body=body)))
    assert "joint 'elbow'" in message and "xyz='1 0'" in message


def test_duplicate_link_name_is_reported(load_error):
    message = load_error(arm(None, None, link("forearm")))
    assert "link 'forearm'" in message and "twice" in message


def test_duplicate_joint_name_is_reported(load_error):
    message = load_error(arm(None, None, link("hand"), joint("elbow", "forearm", "hand")))
    assert "joint 'elbow'" in message and "twice" in message


def test_more_than_one_root_names_all_roots(load_error):
    message = load_error(arm(None, None, link("stray")))
    assert "root" in message and "'base'" in message and "'stray'" in message


def test_floating_joint_below_the_root_names_the_joint(load_error):
    message = load_error(arm(None, None, link("drone"), joint("tether", "forearm", "drone", type="floating", body="")))
    assert "joint 'tether'" in message and "floating" in message


def test_floating_root_with_a_second_child_names_the_root_link():
    urdf = robot(link("world"), link("base"), link("camera"),
                 joint("float", "world", "base", type="floating", body=""),
                 joint("camera_mount", "world", "camera", type="fixed", body=""))
    with pytest.raises(ModelError) as info:
        load_urdf(urdf)
    assert "'world'" in str(info.value)


def test_text_that_is_not_xml_is_reported(load_error):
    assert "cannot read URDF" in load_error("<robot><link></robot>")


def test_plain_text_file_is_reported_with_its_path(tmp_path):
    path = tmp_path / "notes.urdf"
    path.write_text("this is not XML at all\n")
    with pytest.raises(ModelError, match="cannot read URDF") as info:
        load_urdf(path)
    assert str(path) in str(info.value)


def test_missing_file_is_reported_with_its_path(tmp_path):
    path = tmp_path / "does_not_exist.urdf"
    with pytest.raises(ModelError) as info:
        load_urdf(str(path))
    assert str(path) in str(info.value)


def test_long_serial_chain_loads():
    model = load_urdf(serial_chain(1500))
    assert model.nv == 1499


# ---------------------------------------------------------------- well-formed URDFs


@pytest.mark.parametrize("name", BUNDLED)
def test_fixed_base_total_mass_is_all_links_but_the_root(name):
    masses = link_masses(bundled_model_path(name))
    model = load_urdf(bundled_model_path(name))
    root = root_link(bundled_model_path(name))
    assert model.total_mass == pytest.approx(sum(masses.values()) - masses[root], rel=1e-12)


@pytest.mark.parametrize("name", BUNDLED)
def test_free_flyer_total_mass_includes_the_root(name):
    masses = link_masses(bundled_model_path(name))
    model = load_urdf(bundled_model_path(name), "free_flyer")
    assert model.total_mass == pytest.approx(sum(masses.values()), rel=1e-12)


def test_fixed_joint_merges_mass_com_and_inertia_into_parent():
    # Two unit point masses: forearm at its origin, hand 1 m along the forearm's x axis.
    point = '<inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/>'
    urdf = robot(link("base"), link("forearm", inertia=point), link("hand", inertia=point),
                 joint("elbow", "base", "forearm"),
                 joint("wrist", "forearm", "hand", type="fixed", body='<origin xyz="1 0 0"/>'))
    model = load_urdf(urdf)
    assert model.body_names == ["forearm"]
    assert model.mass[0] == pytest.approx(2.0)
    np.testing.assert_allclose(model.com[0], [0.5, 0, 0], atol=1e-15)
    np.testing.assert_allclose(model.inertia_com[0], np.diag([0, 0.5, 0.5]), atol=1e-15)


def test_fixed_joint_placement_and_com_are_rotated_into_the_parent_body():
    urdf = robot(link("base"), link("forearm", mass=0.0, inertia=""), link("hand", mass=2.0, com="1 0 0"),
                 link("finger"),
                 joint("elbow", "base", "forearm"),
                 joint("wrist", "forearm", "hand", type="fixed",
                       body='<origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/>'),
                 joint("knuckle", "hand", "finger", body='<origin xyz="0 1 0"/>' + LIMIT))
    model = load_urdf(urdf)
    rz = rpy_to_matrix([0, 0, np.pi / 2])
    np.testing.assert_allclose(model.com[0], [1, 1, 0], atol=1e-12)
    hand = model.frame("hand")
    assert hand.body == 0
    np.testing.assert_allclose(hand.translation, [1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(hand.rotation, rz, atol=1e-15)
    finger = model.body_index("finger")
    assert model.parent[finger] == 0
    np.testing.assert_allclose(model.joint_translation[finger], [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(model.joint_rotation[finger], rz, atol=1e-15)


def test_merged_links_are_available_as_frames():
    model = load_urdf(bundled_model_path("arm7"))
    tool = model.frame("tool")
    assert "tool" not in model.body_names
    assert tool.body == model.body_index("link7")
    np.testing.assert_allclose(tool.translation, [0, 0, 0.045])
    np.testing.assert_allclose(tool.rotation, rpy_to_matrix([0, 0, 0.3]), atol=1e-15)
    assert model.frame("base").body == -1


def test_continuous_joint_loads_as_unbounded_revolute():
    model = load_urdf(arm(elbow=joint("elbow", "upper_arm", "forearm", type="continuous",
                                      body='<limit lower="-1" upper="1" effort="7" velocity="3"/>')))
    i = model.body_index("forearm")
    assert model.joint_type[i] == REVOLUTE
    assert model.lower[model.idx_q[i]] == -np.inf and model.upper[model.idx_q[i]] == np.inf
    assert model.velocity_limit[model.idx_v[i]] == 3 and model.effort_limit[model.idx_v[i]] == 7


def test_continuous_joint_without_limit_element_is_accepted():
    model = load_urdf(arm(elbow=joint("elbow", "upper_arm", "forearm", type="continuous", body="")))
    assert model.velocity_limit[model.idx_v[model.body_index("forearm")]] == np.inf


def test_joint_order_is_depth_first_with_children_in_file_order():
    # Joints listed breadth-first; the model must still number each chain contiguously.
    urdf = robot(link("torso"), link("l1"), link("r1"), link("l2"), link("r2"), link("l3"),
                 joint("left_1", "torso", "l1"), joint("right_1", "torso", "r1"),
                 joint("right_2", "r1", "r2"), joint("left_2", "l1", "l2"), joint("left_3", "l2", "l3"))
    model = load_urdf(urdf)
    assert model.joint_names == ["left_1", "left_2", "left_3", "right_1", "right_2"]
    assert model.body_names == ["l1", "l2", "l3", "r1", "r2"]
    assert model.parent.tolist() == [-1, 0, 1, -1, 3]


def test_prismatic_joint_type_and_axis_are_read():
    body = '<axis xyz="0 0 2"/><limit lower="0" upper="0.3" effort="100" velocity="0.5"/>'
    model = load_urdf(arm(elbow=joint("elbow", "upper_arm", "forearm", type="prismatic", body=body)))
    i = model.body_index("forearm")
    assert model.joint_type[i] == PRISMATIC
    np.testing.assert_allclose(model.axis[i], [0, 0, 1])


@pytest.mark.parametrize("name", BUNDLED)
def test_limits_are_read_from_the_file(name):
    model = load_urdf(bundled_model_path(name))
    moving = [j for j in ET.parse(bundled_model_path(name)).getroot().findall("joint") if j.get("type") != "fixed"]
    assert sorted(model.joint_names) == sorted(j.get("name") for j in moving)
    for j in moving:
        i = model.joint_names.index(j.get("name"))
        limit = {k: float(v) for k, v in j.find("limit").attrib.items()}
        iq, iv = model.idx_q[i], model.idx_v[i]
        assert (model.lower[iq], model.upper[iq]) == (limit["lower"], limit["upper"])
        assert (model.velocity_limit[iv], model.effort_limit[iv]) == (limit["velocity"], limit["effort"])


def test_world_root_with_floating_joint_gives_free_flyer_named_after_the_joint():
    urdf = robot(link("world"), link("base"), link("upper_arm"),
                 joint("float", "world", "base", type="floating", body=""),
                 joint("shoulder", "base", "upper_arm"))
    model = load_urdf(urdf)
    assert model.has_free_flyer and model.joint_type[0] == FREE_FLYER
    assert model.joint_names[0] == "float" and model.body_names[0] == "base"
    assert (model.nq, model.nv) == (8, 7)


ROUND_TRIP_ARRAYS = ["parent", "joint_type", "axis", "mass", "com", "inertia_com", "joint_rotation",
                     "joint_translation", "lower", "upper", "velocity_limit", "effort_limit"]


def assert_same_model(a, b):
    assert (a.name, a.body_names, a.joint_names) == (b.name, b.body_names, b.joint_names)
    for attr in ROUND_TRIP_ARRAYS:
        np.testing.assert_allclose(getattr(b, attr), getattr(a, attr), rtol=1e-12, atol=1e-12, err_msg=attr)


@pytest.mark.parametrize("floating_base", [None, "free_flyer"])
@pytest.mark.parametrize("name", BUNDLED)
def test_model_to_urdf_round_trip_reproduces_the_arrays(name, floating_base):
    model = load_urdf(bundled_model_path(name), floating_base)
    assert_same_model(model, load_urdf(model_to_urdf(model)))


def test_model_to_urdf_round_trip_keeps_euler_base_limits_infinite():
    model = load_urdf(bundled_model_path("arm7"), "euler")
    assert_same_model(model, load_urdf(model_to_urdf(model)))


def test_model_to_urdf_round_trip_keeps_a_one_sided_revolute_limit():
    b = ModelBuilder("stop")
    b.add_body("link", -1, "revolute", mass=1.0, inertia=np.eye(3) * 0.1, upper=1.0, velocity_limit=2, effort_limit=3)
    model = b.build()
    assert load_urdf(model_to_urdf(model)).upper[0] == 1.0


# ---------------------------------------------------------------- ModelBuilder


@pytest.fixture
def builder():
    b = ModelBuilder("test")
    b.add_body("upper_arm", -1, "revolute", mass=1.0, inertia=np.eye(3) * 0.1)
    return b


def test_builder_rejects_free_flyer_after_first_body(builder):
    with pytest.raises(ModelError, match="body 'base'.*free-flyer"):
        builder.add_body("base", -1, "free_flyer")


def test_builder_rejects_unknown_parent_index(builder):
    with pytest.raises(ModelError, match="body 'forearm'.*parent index 5"):
        builder.add_body("forearm", 5, "revolute")


def test_builder_unknown_parent_name_names_the_parent(builder):
    with pytest.raises(ModelError, match="'elbow_link'"):
        builder.add_body("forearm", "elbow_link", "revolute")


def test_builder_unknown_parent_name_also_names_the_new_body(builder):
    with pytest.raises(ModelError, match="'forearm'"):
        builder.add_body("forearm", "elbow_link", "revolute")


def test_builder_rejects_duplicate_body_name(builder):
    with pytest.raises(ModelError, match="body 'upper_arm'.*duplicate"):
        builder.add_body("upper_arm", 0, "revolute")


def test_builder_rejects_zero_axis(builder):
    with pytest.raises(ModelError, match="body 'forearm'.*axis"):
        builder.add_body("forearm", 0, "revolute", axis=(0, 0, 0))


def test_builder_accepts_massless_body_with_inertia_and_keeps_it(builder):
    builder.add_body("forearm", 0, "revolute", mass=0.0, inertia=np.eye(3) * 0.1)
    model = builder.build()
    assert model.mass[1] == 0 and np.array_equal(model.inertia_com[1], np.eye(3) * 0.1)


def test_builder_rejects_inconsistent_inertia_unless_told_not_to():
    rod_beyond_thin = np.diag([0.01, 0.01, 0.05])
    with pytest.raises(ModelError, match="body 'link'.*triangle inequality"):
        ModelBuilder("m").add_body("link", -1, "revolute", mass=1.0, inertia=rod_beyond_thin)
    lenient = ModelBuilder("m", require_physical_inertia=False)
    lenient.add_body("link", -1, "revolute", mass=1.0, inertia=rod_beyond_thin)
    assert np.array_equal(lenient.build().inertia_com[0], rod_beyond_thin)


def test_builder_accepts_massless_body_without_inertia(builder):
    builder.add_body("forearm", "upper_arm", "revolute")
    assert builder.build().parent.tolist() == [-1, 0]
