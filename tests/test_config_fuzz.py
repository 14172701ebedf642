"""Run configs from outside the process: random TOML text and random values in every section give either
a validated config or a ConfigError naming the file -- never another exception -- and a loop built from
the demo right after still e-stops."""
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rtctl
from rtctl.config import COMPONENTS, CORE_SCHEMA, ConfigError, read_toml, section_keys, validate

DEMO = Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml"

_scalar = st.one_of(st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                           max_size=3), max_leaves=8)
_section = st.sampled_from(sorted([*CORE_SCHEMA, *COMPONENTS, "contact", "patient", "therapist", "drivers"]))


@st.composite
def _configs(draw):
    raw = tomllib.loads(DEMO.read_text())
    for _ in range(draw(st.integers(1, 4))):
        section = draw(_section)
        try:
            keys = sorted(section_keys(raw, section)) + ["no_such_key"]
        except ConfigError:  # a section the selected components do not have: any key is refused
            keys = ["no_such_key", "stiffness", "type"]
        if section == "drivers":
            raw[section] = draw(st.lists(st.dictionaries(st.sampled_from(["backend", "joints", "seed"]), _value,
                                                         max_size=3), max_size=2))
            continue
        raw.setdefault(section, {})[draw(st.sampled_from(keys))] = draw(_value)
    return raw


@settings(max_examples=500, deadline=None)
@given(raw=_configs())
@pytest.mark.slow
def test_random_values_in_every_section_are_validated_or_refused_naming_the_file(raw):
    try:
        validate(raw, "fuzz.toml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml: ")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_random_toml_text_is_parsed_or_refused_naming_the_file(tmp_path, text):
    path = tmp_path / "fuzz.toml"
    path.write_bytes(text.encode("utf-8", errors="replace"))
    try:
        read_toml(path)
    except ConfigError as exc:
        assert "fuzz.toml" in str(exc)


def test_the_demo_still_estops_after_the_fuzz():
    from rtctl.config import build, load_config
    cfg = load_config(DEMO)
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    loop.run(cycles=5)
    loop.safety.estop("after the config fuzz", operator=True)
    report = loop.run(cycles=5)
    assert report.tripped and report.operator_stop
    assert (loop.command.stiffness == 0).all()
