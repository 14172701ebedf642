"""Strict URDF validation in rtctl.model.urdf: limits, numbers, XML safety, and a fuzz test.

* ``<limit>``: effort and velocity are required wherever a ``<limit>`` is
  present (urdfdom), lower/upper default to 0; the error names the file, the
  joint and the missing attribute.
* Numbers: exactly the xs:double lexical space, finite values only, exact
  counts for vectors; the error names the element (``joint 'j' <origin>``,
  ``link 'l' <inertial><mass>``, ...) and quotes the offending attribute text.
* XML: any ``<!DOCTYPE`` is refused, so entity bombs and external entities
  never expand; XML and I/O errors become ModelError naming the file.
* Fuzz (Hypothesis, bounded): mutated copies of the bundled arm7.urdf and
  random bytes either load into a model with finite arrays or raise
  ModelError -- no other exception, and no warning but the loader's own
  reports (an inconsistent inertia, a dangling ``<mimic>``) naming the file.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtctl import bundled_model_path
from rtctl.model import Model, ModelError
from rtctl.model.inertia import InertiaWarning
from rtctl.model.mimic import MimicWarning
from rtctl.model.urdf import UNBOUNDED, load_urdf, parse_xs_double
from rtctl.options import show

BUNDLED_FILES = sorted(bundled_model_path("arm7").parent.glob("*.urdf"))
INERTIA = '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'


def link(name, inertial=None):
    inertial = inertial if inertial is not None else f'<origin xyz="0 0 0"/><mass value="1"/>{INERTIA}'
    return f'<link name="{name}"><inertial>{inertial}</inertial></link>'


def joint(name, parent, child, type="revolute", body='<limit lower="-1" upper="1" effort="10" velocity="2"/>'):
    return (f'<joint name="{name}" type="{type}"><parent link="{parent}"/><child link="{child}"/>'
            f"{body}</joint>")


def arm(elbow_type="revolute", elbow_body=None, forearm=None, *extra):
    """base -shoulder-> upper_arm -elbow-> forearm."""
    elbow = joint("elbow", "upper_arm", "forearm", elbow_type) if elbow_body is None else \
        joint("elbow", "upper_arm", "forearm", elbow_type, elbow_body)
    return "\n".join(['<robot name="test_arm">', link("base"), link("upper_arm"), forearm or link("forearm"),
                      joint("shoulder", "base", "upper_arm"), elbow, *extra, "</robot>"])


# ---------------------------------------------------------------- <limit>


@pytest.mark.parametrize("missing", ["effort", "velocity"])
@pytest.mark.parametrize("jtype", ["revolute", "prismatic", "continuous"])
def test_limit_without_effort_or_velocity_names_joint_and_attribute(load_error, jtype, missing):
    attrs = {"lower": "-1", "upper": "1", "effort": "10", "velocity": "2"}
    del attrs[missing]
    limit = "<limit " + " ".join(f'{k}="{v}"' for k, v in attrs.items()) + "/>"
    message = load_error(arm(jtype, limit))
    assert "joint 'elbow' <limit>" in message and f"missing attribute '{missing}'" in message


def test_limit_on_a_fixed_joint_is_checked_too(load_error):
    # urdfdom parses a <limit> on any joint type; its values are ignored for a fixed joint.
    message = load_error(arm("fixed", '<limit effort="1"/>'))
    assert "joint 'elbow' <limit>" in message and "missing attribute 'velocity'" in message


def test_limit_on_a_floating_root_joint_is_checked_too():
    urdf = ('<robot name="r"><link name="world"/>' + link("base") + link("arm")
            + joint("float", "world", "base", "floating", '<limit velocity="1"/>')
            + joint("shoulder", "base", "arm") + "</robot>")
    with pytest.raises(ModelError, match=r"joint 'float' <limit>: missing attribute 'effort'"):
        load_urdf(urdf)


def test_limit_lower_and_upper_default_to_zero():
    model = load_urdf(arm("revolute", '<limit effort="3" velocity="4"/>'))
    i = model.body_index("forearm")
    assert (model.lower[model.idx_q[i]], model.upper[model.idx_q[i]]) == (0.0, 0.0)
    assert (model.effort_limit[model.idx_v[i]], model.velocity_limit[model.idx_v[i]]) == (3.0, 4.0)


def test_continuous_joint_with_effort_and_velocity_only_is_unbounded():
    model = load_urdf(arm("continuous", '<limit effort="3" velocity="4"/>'))
    i = model.body_index("forearm")
    assert (model.lower[model.idx_q[i]], model.upper[model.idx_q[i]]) == (-np.inf, np.inf)
    assert model.velocity_limit[model.idx_v[i]] == 4.0


def test_largest_double_limit_reads_as_unbounded():
    big = f"{UNBOUNDED:.17g}"
    model = load_urdf(arm("revolute", f'<limit lower="-{big}" upper="{big}" effort="{big}" velocity="2"/>'))
    i = model.body_index("forearm")
    assert (model.lower[model.idx_q[i]], model.upper[model.idx_q[i]]) == (-np.inf, np.inf)
    assert model.effort_limit[model.idx_v[i]] == np.inf


@pytest.mark.parametrize("key", ["effort", "velocity"])
def test_negative_effort_or_velocity_names_joint_and_value(load_error, key):
    attrs = {"lower": "-1", "upper": "1", "effort": "10", "velocity": "2", key: "-0.5"}
    limit = "<limit " + " ".join(f'{k}="{v}"' for k, v in attrs.items()) + "/>"
    message = load_error(arm("revolute", limit))
    assert "joint 'elbow' <limit>" in message and f"{key}='-0.5'" in message and ">= 0" in message


@pytest.mark.parametrize("path", BUNDLED_FILES, ids=lambda p: p.stem)
def test_bundled_urdfs_meet_the_spec_and_load(path):
    root = ET.parse(path).getroot()
    for j in root.findall("joint"):
        lim = j.find("limit")
        if j.get("type") in ("revolute", "prismatic"):
            assert lim is not None, j.get("name")
        if lim is not None:
            assert lim.get("effort") is not None and lim.get("velocity") is not None, j.get("name")
    for floating_base in (None, "free_flyer", "euler"):
        assert isinstance(load_urdf(path, floating_base), Model)


# ---------------------------------------------------------------- numbers

# (where the bad text goes, the element named in the message, attribute, vector size)
PLACES = {
    "joint-origin-xyz": ("joint 'elbow' <origin>", "xyz", 3),
    "joint-origin-rpy": ("joint 'elbow' <origin>", "rpy", 3),
    "axis": ("joint 'elbow' <axis>", "xyz", 3),
    "limit-lower": ("joint 'elbow' <limit>", "lower", 1),
    "limit-upper": ("joint 'elbow' <limit>", "upper", 1),
    "limit-effort": ("joint 'elbow' <limit>", "effort", 1),
    "limit-velocity": ("joint 'elbow' <limit>", "velocity", 1),
    "inertial-origin": ("link 'forearm' <inertial><origin>", "xyz", 3),
    "mass": ("link 'forearm' <inertial><mass>", "value", 1),
    "inertia-ixx": ("link 'forearm' <inertial><inertia>", "ixx", 1),
    "inertia-ixy": ("link 'forearm' <inertial><inertia>", "ixy", 1),
}


def urdf_with(place, text):
    """The test arm with attribute text ``text`` (XML-escaped here) at ``place``."""
    a = quoteattr(text)
    limit = {"lower": '"-1"', "upper": '"1"', "effort": '"10"', "velocity": '"2"'}
    origin, rpy, axis = '"0 0 0.3"', '"0 0 0"', '"0 0 1"'
    inertial_origin, mass = '"0 0 0"', '"1"'
    inertia = {"ixx": '"0.01"', "iyy": '"0.01"', "izz": '"0.01"', "ixy": '"0"', "ixz": '"0"', "iyz": '"0"'}
    if place == "joint-origin-xyz":
        origin = a
    elif place == "joint-origin-rpy":
        rpy = a
    elif place == "axis":
        axis = a
    elif place.startswith("limit-"):
        limit[place[6:]] = a
    elif place == "inertial-origin":
        inertial_origin = a
    elif place == "mass":
        mass = a
    else:
        inertia[place[8:]] = a
    body = (f"<origin xyz={origin} rpy={rpy}/><axis xyz={axis}/>"
            "<limit " + " ".join(f"{k}={v}" for k, v in limit.items()) + "/>")
    forearm = link("forearm", f"<origin xyz={inertial_origin}/><mass value={mass}/>"
                              "<inertia " + " ".join(f"{k}={v}" for k, v in inertia.items()) + "/>")
    return arm("revolute", body, forearm)


# Outside the xs:double lexical space though Python's float() takes most of them.
NOT_XS_DOUBLE = ["1_5", "\u0661", "\uff11", "inf", "-inf", "Infinity", "infinity", "nan", "NAN", "+nan", "0x10",
                 "1,5", "1.5.2", "e3", "1e", ".", "-", "\u00a01", "1\u2003", "1d3", "\u22121", "abc"]
NOT_FINITE = ["INF", "-INF", "+INF", "NaN", "1e999", "-1e400", "1" * 400]


def expected_attr_text(place, token):
    """The attribute text written for ``token`` at ``place`` (vectors get it as the middle number)."""
    return f"0 {token} 0" if PLACES[place][2] == 3 else token


@pytest.mark.parametrize("token", NOT_XS_DOUBLE + NOT_FINITE)
@pytest.mark.parametrize("place", list(PLACES))
def test_bad_number_names_element_attribute_and_text(place, token):
    element, attr, _ = PLACES[place]
    text = expected_attr_text(place, token)
    with pytest.raises(ModelError) as info:
        load_urdf(urdf_with(place, text))
    message = str(info.value)
    assert f"{element}: attribute {attr}={show(text)}" in message, message
    assert ("is not finite" if token in NOT_FINITE else "is not numeric") in message


def test_bad_number_from_a_file_names_the_file(load_error):
    message = load_error(urdf_with("mass", "1_5"))
    assert "link 'forearm' <inertial><mass>: attribute value='1_5' is not numeric" in message


@pytest.mark.parametrize("place", [p for p, (_, _, n) in PLACES.items() if n == 3])
@pytest.mark.parametrize("text", ["0 0", "0 0 0 0", "", "   "])
def test_vector_needs_exactly_three_numbers(place, text):
    element, attr, _ = PLACES[place]
    with pytest.raises(ModelError) as info:
        load_urdf(urdf_with(place, text))
    assert f"{element}: attribute {attr}={text!r} must be 3 numbers" in str(info.value)


@pytest.mark.parametrize("text", ["1 2", ""])
def test_scalar_needs_exactly_one_number(text):
    with pytest.raises(ModelError, match=rf"<mass>: attribute value={text!r} must be one number"):
        load_urdf(urdf_with("mass", text))


@pytest.mark.parametrize("text, value", [("2", 2.0), ("+2", 2.0), ("2.", 2.0), (".5", 0.5), ("0.5e1", 5.0),
                                         ("5E-1", 0.5), ("+1.5e+1", 15.0), ("007", 7.0),
                                         (" \t2.5\n\r ", 2.5)])
def test_xs_double_forms_and_surrounding_xml_space_are_accepted(text, value):
    model = load_urdf(urdf_with("mass", text))
    assert model.mass[model.body_index("forearm")] == value


def test_vectors_may_be_separated_by_any_xml_white_space():
    model = load_urdf(urdf_with("joint-origin-xyz", "\n 0.1\t0.2 \r\n 0.3 "))
    np.testing.assert_array_equal(model.joint_translation[model.body_index("forearm")], [0.1, 0.2, 0.3])


@pytest.mark.parametrize("text", ["0 0 0", "0 -0 0.0", "1e-13 0 0"])
def test_zero_axis_names_the_joint_and_text(text):
    with pytest.raises(ModelError) as info:
        load_urdf(urdf_with("axis", text))
    assert f"joint 'elbow' <axis>: attribute xyz={text!r}" in str(info.value)


def test_huge_finite_axis_components_keep_their_direction():
    model = load_urdf(urdf_with("axis", "1e308 1e308 0"))
    np.testing.assert_allclose(model.axis[model.body_index("forearm")], [2 ** -0.5, 2 ** -0.5, 0], rtol=1e-15)


def test_overflowing_placement_is_a_model_error_naming_the_joint():
    hand = joint("wrist", "forearm", "hand", "fixed", '<origin xyz="1.5e308 0 0"/>')
    with pytest.raises(ModelError, match="joint 'wrist'.*overflow"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            load_urdf(arm("revolute", '<origin xyz="1.5e308 0 0"/><limit effort="1" velocity="1"/>', None,
                          link("hand"), hand))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parse_xs_double_reads_back_what_repr_and_model_to_urdf_write(x):
    assert parse_xs_double(repr(x)) == x
    assert parse_xs_double(f"{x:.17g}") == x


@given(st.text(max_size=12) | st.from_regex(r"[ \t]?[+-]?[0-9]{0,3}\.?[0-9]{0,3}([eE][+-]?[0-9]{1,4})?[ \n]?",
                                            fullmatch=True))
def test_parse_xs_double_accepts_only_finite_values_python_also_reads(text):
    try:
        value = parse_xs_double(text)
    except ValueError:
        return
    assert math.isfinite(value) and value == float(text)
    assert text.strip(" \t\r\n").isascii()


# ---------------------------------------------------------------- XML safety

BILLION_LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE robot [\n  <!ENTITY lol "lol">\n'
                  + "".join(f'  <!ENTITY lol{i} "{("&lol;" if i == 1 else f"&lol{i - 1};") * 10}">\n'
                            for i in range(1, 10))
                  + ']>\n<robot name="&lol9;"><link name="base">&lol9;</link></robot>\n')

XXE = ('<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
       '<robot name="r"><link name="&x;"/></robot>\n')

PARAMETER_XXE = ('<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>\n'
                 '<robot name="r"><link name="base"/></robot>\n')


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, XXE, PARAMETER_XXE, "<!DOCTYPE robot>\n" + arm()],
                         ids=["billion-laughs", "xxe", "parameter-entity-xxe", "plain-doctype"])
def test_any_doctype_is_refused_without_expanding_entities(load_error, doc):
    start = time.perf_counter()
    message = load_error(doc)
    assert time.perf_counter() - start < 2.0
    assert "DOCTYPE" in message and "not allowed" in message
    assert "root:" not in message and "lollollol" not in message


def test_undeclared_entity_is_a_parse_error(load_error):
    assert "cannot read URDF" in load_error(arm().replace('name="base"', 'name="&x;"', 1))


@pytest.mark.parametrize("data", [b'<?xml version="1.0" encoding="no-such-codec"?><robot/>',
                                  b'<robot name="\xff\xfe"/>', b'\xef\xbb\xbf<robot name="\xc3"/>'])
def test_undecodable_bytes_are_a_model_error(data):
    with pytest.raises(ModelError, match="cannot read URDF"):
        load_urdf(data)


def test_bytes_document_loads_like_the_text():
    path = bundled_model_path("arm7")
    a, b = load_urdf(path.read_bytes()), load_urdf(path)
    np.testing.assert_array_equal(a.mass, b.mass)


def test_surrogates_in_a_string_are_a_model_error():
    with pytest.raises(ModelError, match="cannot read URDF"):
        load_urdf('<robot name="\ud800"/>')


@pytest.mark.parametrize("path", ["arm\0.urdf", b"arm\0.urdf"])
def test_path_with_nul_is_a_model_error(path):
    with pytest.raises(ModelError, match="cannot read URDF"):
        load_urdf(path)


def test_directory_instead_of_file_names_the_path(tmp_path):
    with pytest.raises(ModelError) as info:
        load_urdf(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_deeply_nested_elements_do_not_recurse():
    doc = arm().replace('<link name="base">', '<link name="base">' + "<x>" * 100_000 + "</x>" * 100_000, 1)
    assert load_urdf(doc).nv == 2


# ---------------------------------------------------------------- fuzz

ARM7_TEXT = bundled_model_path("arm7").read_text(encoding="utf-8")
ARM7_ROOT = ET.fromstring(ARM7_TEXT)
ARM7_ELEMENTS = len(list(ARM7_ROOT.iter()))
ARM7_NAMES = sorted({el.get(k) for el in ARM7_ROOT.iter() for k in ("name", "link") if el.get(k)})
ATTRIBUTES = ["xyz", "rpy", "value", "ixx", "ixy", "ixz", "iyy", "iyz", "izz", "lower", "upper", "effort",
              "velocity", "name", "type", "link"]
SPECIAL = ["", " ", "0", "-0", "1", "-1", "1_5", "\u0661", "inf", "-inf", "INF", "-INF", "NaN", "nan", "1e999",
           "1e308", "-1e308", "1.7976931348623157e+308", "5e-324", "0 0", "0 0 0", "1 0 0 0", "0 0 1e308",
           "1e308 1e308 1e308", "revolute", "continuous", "prismatic", "fixed", "floating", "planar"]
EXTREME = ["0", "-0", "1", "-1", "0.5", "1e-13", "5e-324", "1e154", "1e200", "-1e200", "1e308", "-1e308",
           "1.7976931348623157e+308", "-1.7976931348623157e+308", "INF", "NaN", "1e999", "1_5", "\u0661"]
XML_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from(" \t\n\r"), max_size=20)
NUMBER_TEXT = st.one_of(
    st.floats().map(repr), st.floats(width=32).map(str), st.integers().map(str),
    st.lists(st.floats(), max_size=4).map(lambda xs: " ".join(map(repr, xs))),
    st.lists(st.sampled_from(EXTREME), min_size=1, max_size=4).map(" ".join),
    st.from_regex(r"[+-]?[0-9]{0,4}\.?[0-9]{0,4}([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)
VALUES = st.one_of(st.sampled_from(SPECIAL), st.sampled_from(EXTREME), st.sampled_from(ARM7_NAMES),
                   NUMBER_TEXT, NUMBER_TEXT, XML_TEXT)
EXISTING_ATTRIBUTES = [(i, k) for i, el in enumerate(ARM7_ROOT.iter()) for k in el.attrib]
SET_EXISTING = st.builds(lambda where, value: ("set", *where, value), st.sampled_from(EXISTING_ATTRIBUTES), VALUES)
MUTATION = st.one_of(
    SET_EXISTING, SET_EXISTING, SET_EXISTING,  # mostly: change an attribute the file has
    st.tuples(st.just("set"), st.integers(0, ARM7_ELEMENTS - 1), st.sampled_from(ATTRIBUTES), VALUES),
    st.tuples(st.just("delete-attribute"), st.integers(0, ARM7_ELEMENTS - 1), st.sampled_from(ATTRIBUTES)),
    st.tuples(st.just("delete-element"), st.integers(1, ARM7_ELEMENTS - 1)),
    st.tuples(st.just("duplicate-element"), st.integers(1, ARM7_ELEMENTS - 1)),
)


def mutate(mutations):
    root = copy.deepcopy(ARM7_ROOT)
    for op, index, *args in mutations:
        parents = {child: parent for parent in root.iter() for child in parent}
        elements = list(root.iter())
        el = elements[index % len(elements)]
        if op == "set":
            el.set(*args)
        elif op == "delete-attribute":
            el.attrib.pop(args[0], None)
        elif el in parents:
            parent = parents[el]
            if op == "delete-element":
                parent.remove(el)
            else:
                parent.append(copy.deepcopy(el))
    return ET.tostring(root, encoding="unicode")


def assert_loads_or_model_error(source, label=None):
    """``load_urdf(source)`` gives a Model with finite arrays or a ModelError (naming ``label``); the only
    warnings are the loader's reports of what it accepted (inconsistent inertias, dangling mimics), naming
    the file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # an overflow warning would be an unreported bad number
        try:
            model = load_urdf(source)
        except ModelError as exc:
            assert label is None or str(exc).startswith(f"{label}: "), str(exc)
            return
    for w in caught:
        assert issubclass(w.category, (InertiaWarning, MimicWarning)), str(w.message)
        assert str(w.message).startswith(f"{label or '<urdf string>'}: "), str(w.message)
    for attr in ("mass", "com", "inertia_com", "joint_translation", "joint_rotation", "axis"):
        assert np.all(np.isfinite(getattr(model, attr))), attr
    np.testing.assert_allclose(np.linalg.norm(model.axis, axis=1), 1.0, rtol=1e-12)
    assert not np.any(np.isnan(model.lower)) and not np.any(np.isnan(model.upper))
    assert np.all(model.lower <= model.upper)
    assert np.all(model.velocity_limit >= 0) and np.all(model.effort_limit >= 0)


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(FUZZ, max_examples=1000)
@given(st.lists(MUTATION, min_size=1, max_size=5))
@pytest.mark.slow
def test_fuzz_mutated_arm7_loads_or_raises_model_error(mutations):
    assert_loads_or_model_error(mutate(mutations), "<urdf string>")


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_fuzz_spliced_bytes_load_or_raise_model_error_naming_the_file(tmp_path_factory, data):
    original = ARM7_TEXT.encode("utf-8")
    start = data.draw(st.integers(0, len(original)), label="start")
    length = data.draw(st.integers(0, 40), label="length")
    garbage = data.draw(st.binary(max_size=40), label="garbage")
    spliced = original[:start] + garbage + original[start + length:]
    path = tmp_path_factory.mktemp("fuzz") / "spliced.urdf"
    path.write_bytes(spliced)
    assert_loads_or_model_error(path, str(path))
    assert_loads_or_model_error(spliced)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_bytes_raise_model_error_naming_the_file(tmp_path_factory, garbage):
    path = tmp_path_factory.mktemp("fuzz") / "garbage.urdf"
    path.write_bytes(garbage)
    with pytest.raises(ModelError) as info:
        load_urdf(path)
    assert str(info.value).startswith(f"{path}: ")
    assert_loads_or_model_error(b"<" + garbage)


# ---------------------------------------------------------------- joints as real files have them

LIMIT = '<limit lower="-1" upper="1" effort="10" velocity="2"/>'


def test_planar_joint_is_refused_naming_the_joint():
    with pytest.raises(ModelError, match="joint 'elbow': planar joints are not supported"):
        load_urdf(arm("planar", LIMIT))


def test_floating_joint_inside_the_tree_is_refused_naming_the_joint():
    with pytest.raises(ModelError, match="joint 'elbow': a floating joint is only supported at the root"):
        load_urdf(arm("floating", ""))


def test_dynamics_element_is_read_per_dof_with_zero_defaults():
    model = load_urdf(arm("revolute", LIMIT + '<dynamics damping="0.7" friction="0.25"/>'))
    elbow = model.idx_v[model.body_index("forearm")]
    assert model.damping[elbow] == 0.7 and model.friction[elbow] == 0.25
    assert model.damping.sum() == 0.7 and model.friction.sum() == 0.25
    only_damping = load_urdf(arm("revolute", LIMIT + '<dynamics damping="2"/>'))
    assert only_damping.friction.sum() == 0 and only_damping.damping.sum() == 2


def test_negative_damping_is_refused_naming_joint_and_value(tmp_path):
    path = tmp_path / "arm.urdf"
    path.write_text(arm("revolute", LIMIT + '<dynamics damping="-0.5"/>'))
    with pytest.raises(ModelError) as info:
        load_urdf(path)
    assert str(info.value) == f"{path}: joint 'elbow' <dynamics>: attribute damping='-0.5' must be >= 0"


def test_continuous_joint_has_no_position_limits_even_with_a_limit_element():
    model = load_urdf(arm("continuous", LIMIT))
    iq = model.idx_q[model.body_index("forearm")]
    assert model.lower[iq] == -math.inf and model.upper[iq] == math.inf
    assert model.velocity_limit[model.idx_v[model.body_index("forearm")]] == 2


def test_a_tree_with_no_movable_joint_loads_only_with_a_floating_base():
    single = '<robot name="drone"><link name="body"><inertial><mass value="1.5"/>' \
             '<inertia ixx="0.02" iyy="0.02" izz="0.03" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>'
    with pytest.raises(ModelError, match="no movable joint: the tree below root link 'body' is one rigid body"):
        load_urdf(single)
    model = load_urdf(single, "free_flyer")
    assert (model.nv, model.base, model.total_mass) == (6, "free_flyer", 1.5)
