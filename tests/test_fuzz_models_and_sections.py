"""Outside input to the new surfaces, from a careless user and from another process on the same machine.

* MJCF files (``load_mujoco_model``, the ``mujoco`` plant, ``[robot] model = "x.xml"``): random mutations of
  the bundled Panda (byte flips, truncations, attribute values replaced by NaN, inf, huge, negative numbers or
  garbage, deleted, duplicated and moved elements) either load into a model without NaN, which the plant
  steps, or are refused with one :class:`MujocoModelError` naming the file (MuJoCo's compiler raises
  ``ValueError``; ``compile_model`` wraps it) -- never another exception or a hang.
* ``[mechanism]`` (robot model ``"geared"``), ``[bite]``, ``[observer]`` and the chewing CPG's feedback keys
  through :func:`rtctl.config.validate` / :func:`~rtctl.config.build`: a loop, or a ConfigError naming the
  file and the section.
* The telemetry publisher process: its ring is private to its owner and leaves no name behind; a publisher
  process that is stopped costs the loop nothing; one that stops reading must not hang ``close()``.

After each fuzz the safe path still works: a small loop runs and e-stops.

Each bug this file found (and that is now fixed) keeps its own test with the exact reproduction.
"""
from __future__ import annotations

import copy
import importlib.util
import math
import os
import re
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtctl.config import ConfigError, build, validate
from telemetry_helpers import make_loop

HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None
needs_mujoco = pytest.mark.skipif(not HAS_MUJOCO, reason="the mujoco extra (rtctl[mujoco]) is not installed")
PLANTS = Path(os.fspath(importlib.util.find_spec("rtctl.plants").submodule_search_locations[0]))
PANDA = PLANTS / "mujoco" / "panda.xml"
PANDA_READY = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_EXAMPLE = 5.0   # s: a single load or build taking longer counts as a hang

def _safe_path_still_works():
    """After a fuzz: a small loop runs, e-stops and stays tripped."""
    loop = make_loop()
    report = loop.run(cycles=20)
    assert not report.tripped and loop.cycle == 20
    loop.safety.estop("after fuzz")
    assert loop.safety.tripped
    report = loop.run(cycles=5)
    assert report.tripped and loop.safety.tripped


def _nan_fields(model) -> list[str]:
    return [name for name, value in vars(model).items()
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and np.isnan(value).any()]


# ----------------------------------------------------------------------------------------------- MJCF mutations
_SPECIAL = ["nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e400", "-1", "0", "-0", "1e-320", "garbage", "",
            "ball", "free", "slide", "true", "&amp;", "1 2", "1 2 3 4 5 6 7 8 9 10 11"]
_ATTRIBUTE = re.compile(rb'(\w+)="([^"]*)"')


@st.composite
def _mjcf_mutants(draw, source: bytes):
    """(mutated bytes, a description of the mutation)."""
    kind = draw(st.sampled_from(["flip", "truncate", "attribute", "attribute", "attribute", "delete", "duplicate",
                                 "move"]))
    if kind == "flip":
        data = bytearray(source)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data), kind
    if kind == "truncate":
        cut = draw(st.integers(0, len(source) - 1))
        return source[:cut], f"truncate at {cut}"
    lines = source.splitlines(keepends=True)
    if kind == "attribute":
        found = list(_ATTRIBUTE.finditer(source))
        m = found[draw(st.integers(0, len(found) - 1))]
        value = draw(st.one_of(st.sampled_from(_SPECIAL), st.floats().map(repr),
                               st.text(st.characters(codec="utf-8"), max_size=6)))
        n = len(m.group(2).split()) or 1
        value = " ".join([value] * draw(st.sampled_from(sorted({1, n}))))
        return source[:m.start(2)] + value.encode() + source[m.end(2):], f"{m.group(1).decode()}={value!r}"
    elements = [i for i, line in enumerate(lines) if re.search(rb"<(joint|motor|inertial|body|option|compiler)", line)]
    i = elements[draw(st.integers(0, len(elements) - 1))]
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    else:  # move a line (a joint, a motor, an inertial) to just inside another element
        line = lines.pop(i)
        targets = [k for k, other in enumerate(lines) if re.search(rb"<(body|worldbody|actuator)\b", other)]
        lines.insert(targets[draw(st.integers(0, len(targets) - 1))] + 1, line)
    return b"".join(lines), f"{kind} line {i + 1}"


@needs_mujoco
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
def test_mutated_mjcf_loads_without_nan_and_steps_or_is_refused_naming_the_file(tmp_path, monkeypatch):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model
    from rtctl.plants.mujoco.plant import MujocoPlant

    monkeypatch.chdir(tmp_path)   # MuJoCo appends its warnings to MUJOCO_LOG.TXT in the working directory
    source = PANDA.read_bytes()
    path = tmp_path / "mutant.xml"

    @FUZZ
    @given(mutant=_mjcf_mutants(source))
    def fuzz(mutant):
        data, what = mutant
        path.write_bytes(data)
        start = time.monotonic()
        try:
            model, _ = load_mujoco_model(path)
        except MujocoModelError as exc:
            assert str(path) in str(exc), (what, str(exc))
            return
        finally:
            assert time.monotonic() - start < SLOW_EXAMPLE, what
        assert _nan_fields(model) == [], what
        try:
            plant = MujocoPlant(options=MujocoPlant.Options(actuation="generalized"), source=path)
        except ValueError as exc:    # MujocoModelError or a plant setting, naming the file
            assert str(path) in str(exc), (what, str(exc))
            return
        for _ in range(3):
            try:
                plant.step(1e-3, np.zeros(plant.nv))
            except ValueError as exc:
                assert "diverged" in str(exc), (what, str(exc))
                return
            assert np.all(np.isfinite(plant.q)) and np.all(np.isfinite(plant.v)), what

    fuzz()
    _safe_path_still_works()


def _mujoco_config(directory: Path, model_text: bytes) -> dict:
    """A validated run config on ``robot.xml`` (``[robot] model`` and the ``mujoco`` plant), as load_config gives."""
    (directory / "robot.xml").write_bytes(model_text)
    raw = {"robot": {"model": "robot.xml"}, "plant": {"type": "mujoco", "initial_position": PANDA_READY},
           "controller": {"type": "computed_torque", "kp": 400.0},
           "trajectory": {"type": "min_jerk", "goal": [0.6, -0.3, 0.4, -2.0, 0.4, 1.9, 1.2], "duration": 0.05},
           "loop": {"rate_hz": 1000.0, "pace": False}}
    source = str(directory / "run.toml")
    cfg = validate(raw, source)
    cfg["_dir"], cfg["_source"] = str(directory), source
    return cfg


@needs_mujoco
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
def test_mutated_mjcf_as_robot_model_builds_a_loop_or_is_one_config_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = PANDA.read_bytes()

    @settings(FUZZ, max_examples=40)
    @given(mutant=_mjcf_mutants(source))
    def fuzz(mutant):
        data, what = mutant
        start = time.monotonic()
        try:
            loop = build(_mujoco_config(tmp_path, data))
        except ConfigError as exc:
            assert str(exc).startswith(f"{tmp_path / 'run.toml'}: ["), (what, str(exc))
            return
        finally:
            assert time.monotonic() - start < SLOW_EXAMPLE, what
        assert _nan_fields(loop.model) == [], what
        loop.run(cycles=10)
        loop.safety.estop("after the mutant")
        assert loop.run(cycles=2).tripped

    fuzz()
    _safe_path_still_works()


@needs_mujoco
def test_a_name_that_is_not_utf8_is_refused_naming_the_file(tmp_path, monkeypatch):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "latin1.xml"
    path.write_bytes(PANDA.read_text().replace('name="panda_link3"', 'name="panda_l\u00e9nk3"').encode("latin-1"))
    with pytest.raises(MujocoModelError) as info:
        load_mujoco_model(path)
    assert str(path) in str(info.value)


@needs_mujoco
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("old, new, named", [
    pytest.param('gravity="0.0 0.0 -9.81"', 'gravity="nan nan nan"', "gravity"),
    pytest.param('gear="1"', 'gear="nan"', "panda_joint1"),
    pytest.param('range="-2.8973 2.8973"', 'limited="true" range="nan nan"', "panda_joint1"),
])
def test_non_finite_values_do_not_compile_into_the_model(tmp_path, monkeypatch, old, new, named):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "nan.xml"
    path.write_text(PANDA.read_text().replace(old, new, 1))
    try:
        model, _ = load_mujoco_model(path)
    except MujocoModelError as exc:
        assert str(path) in str(exc) and named in str(exc)
    else:
        assert _nan_fields(model) == []


@needs_mujoco
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("old, new", [
    pytest.param('<inertial pos="-0.003141 -0.02872 0.003495"', '<inertial pos="1e154 1e154 1e154"'),
    pytest.param('<joint name="panda_joint2" type="hinge" axis="0.0 0.0 1.0" pos="0.0 0.0 0.0"',
                 '<joint name="panda_joint2" type="hinge" axis="0.0 0.0 1.0" pos="1e154 1e154 1e154"'),
])
def test_huge_lengths_do_not_overflow_into_nan(tmp_path, monkeypatch, old, new):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "huge.xml"
    text = PANDA.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    try:
        model, _ = load_mujoco_model(path)
    except MujocoModelError as exc:
        assert str(path) in str(exc) and "panda_link2" in str(exc)
    else:
        assert _nan_fields(model) == []


@needs_mujoco
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("old, new, field", [
    pytest.param('range="-2.8973 2.8973"', 'range="2.8973 -2.8973"', "lower"),
    pytest.param('ctrlrange="-87.0 87.0"', 'ctrlrange="87.0 -87.0"', "effort_limit"),
])
def test_a_reversed_range_is_refused_not_silently_unlimited(tmp_path, monkeypatch, old, new, field):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "reversed.xml"
    path.write_text(PANDA.read_text().replace(old, new, 1))
    try:
        model, _ = load_mujoco_model(path)
    except MujocoModelError as exc:
        assert str(path) in str(exc) and "panda_joint1" in str(exc)
        return
    assert np.isfinite(getattr(model, field)[0]), f"joint 'panda_joint1' lost its {field}"


# ----------------------------------------------------------------------------------------------- [mechanism]
PLANETARY = tomllib.loads((PLANTS / "geared" / "planetary.toml").read_text())
PLANETARY["loop"]["pace"] = False
_ELEMENTS = ("link", "turning_pair", "gear_pair")
_MECH_KEYS = ["name", "mass", "com", "inertia", "dh", "axis", "axial_inertia", "transverse_inertia", "lower",
              "upper", "velocity_limit", "effort_limit", "count", "links", "teeth", "kind", "sign", "base",
              "end_effector", "inputs", "gravity", "no_such_key", *_ELEMENTS]
_LINKS = ["0", "1", "2", "m1", "s", "p"]
_number = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, -1.0, 0.0, 1e-300, 2 ** 70]),
                    st.floats(-10.0, 10.0), st.integers(-3, 100))
_mech_value = st.one_of(
    _number, st.sampled_from(_LINKS + ["", "garbage", "a", "b", "c", "d", "bevel", "internal", "external", True]),
    st.lists(_number, max_size=7), st.lists(st.sampled_from(_LINKS + ["x"]), max_size=4),
    st.just({}), st.just([{}]))


@st.composite
def _mechanisms(draw):
    raw = copy.deepcopy(PLANETARY)
    mech = raw["mechanism"]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "set", "set", "top", "delete", "duplicate", "drop_key"]))
        element = draw(st.sampled_from(_ELEMENTS))
        items = mech.get(element)
        items = items if isinstance(items, list) and items and all(isinstance(x, dict) for x in items) else None
        if op == "top":
            mech[draw(st.sampled_from(_MECH_KEYS))] = draw(_mech_value)
        elif items is None:
            continue
        elif op == "set":
            draw(st.sampled_from(items))[draw(st.sampled_from(_MECH_KEYS))] = draw(_mech_value)
        elif op == "delete":
            del items[draw(st.integers(0, len(items) - 1))]
        elif op == "duplicate":
            items.append(copy.deepcopy(draw(st.sampled_from(items))))
        else:
            item = draw(st.sampled_from(items))
            if item:
                del item[draw(st.sampled_from(sorted(item)))]
    return raw


@pytest.mark.slow
def test_random_mechanism_tables_are_validated_or_refused_naming_file_and_section():
    @FUZZ
    @given(raw=_mechanisms())
    def fuzz(raw):
        try:
            cfg = validate(raw, "fuzz.toml")
        except ConfigError as exc:
            assert str(exc).startswith("fuzz.toml: [mechanism]"), str(exc)
            return
        cfg["_source"] = "fuzz.toml"
        start = time.monotonic()
        try:
            loop = build(cfg)
        except ConfigError as exc:
            assert str(exc).startswith("fuzz.toml: ["), str(exc)
            return
        assert time.monotonic() - start < SLOW_EXAMPLE
        assert not _nan_fields(loop.model), _nan_fields(loop.model)
        loop.run(cycles=10)
        loop.safety.estop("after the mechanism")
        assert loop.run(cycles=2).tripped

    fuzz()
    _safe_path_still_works()


def _planetary(**change):
    raw = copy.deepcopy(PLANETARY)
    for path, value in change.items():
        element, index, key = path.split("__") if "__" in path else (None, None, path)
        target = raw["mechanism"] if element is None else raw["mechanism"][element][int(index)]
        target[key] = value
    return raw


def test_the_base_link_as_an_input_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^planetary\.toml: \[mechanism\] .*inputs"):
        validate(_planetary(inputs=["m1", "0"]), "planetary.toml")


@pytest.mark.parametrize("change, key", [
    pytest.param({"link__1__lower": 3.0, "link__1__upper": -3.0}, "lower"),
    pytest.param({"link__1__inertia": [-1.0, 1.0, 1.0, 0.0, 0.0, 0.0]}, "inertia"),
    pytest.param({"link__1__inertia": [1e308, 1e308, 1e308, 0.0, 0.0, 0.0]}, "inertia"),
])
def test_a_link_the_model_refuses_is_refused_when_the_config_is_read_naming_link_and_key(change, key):
    with pytest.raises(ConfigError) as info:
        validate(_planetary(**change), "planetary.toml")
    assert str(info.value).startswith("planetary.toml: [mechanism] link[1]") and key in str(info.value)


@pytest.mark.parametrize("change", [
    pytest.param({"link__1__mass": 1e308}),
    pytest.param({"link__1__dh": [1e308, 1e308, 1e308]}),
])
def test_huge_masses_and_lengths_are_refused_or_give_a_finite_model(change):
    try:
        cfg = validate(_planetary(**change), "planetary.toml")
        cfg["_source"] = "planetary.toml"
        loop = build(cfg)
    except ConfigError as exc:
        assert str(exc).startswith("planetary.toml: [mechanism] link[1]")
        return
    assert _nan_fields(loop.model) == []
    assert not loop.run(cycles=5).tripped


# ------------------------------------------------------------------------------- [bite], [observer], jaw_cpg
JAW = tomllib.loads((PLANTS / "jaw" / "jaw.toml").read_text())
JAW["loop"]["pace"] = False
JAW["trajectory"]["t0"] = 0.0     # the CPG (and its feedback) from the first cycle
JAW.pop("schedule")
STEWART = tomllib.loads((PLANTS / "stewart" / "stewart.toml").read_text())
STEWART["loop"]["pace"] = False
_SECTION_KEYS = {
    "bite": ["enabled", "force_limit", "gain", "frame", "forgetting", "initial_covariance", "no_such_key"],
    "observer": ["enabled", "gain", "frame", "no_such_key"],
    "trajectory": ["feedback_gain", "feedback_source", "coupling", "convergence"],
}
_hostile = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, -1.0, 0.0, 1e-300, 2 ** 70, True, False,
                            "", "garbage", "incisal", "platform", "external", "tracking_error", "bite_force", [],
                            [1.0] * 6])
_plausible = {   # values a user might write: most examples get past validate and run
    "enabled": st.booleans(), "force_limit": st.floats(1e-3, 1e4), "gain": st.floats(1e-3, 1e5),
    "frame": st.sampled_from(["incisal", "platform"]), "forgetting": st.floats(0.5, 1.0),
    "initial_covariance": st.floats(1e-3, 1e9), "no_such_key": st.just(1.0), "feedback_gain": st.floats(0.0, 1e3),
    "feedback_source": st.sampled_from(["external", "tracking_error", "bite_force"]),
    "coupling": st.floats(0.0, 100.0), "convergence": st.floats(1e-2, 100.0),
}


@st.composite
def _jaw_or_stewart(draw):
    jaw = draw(st.booleans())
    raw = copy.deepcopy(JAW if jaw else STEWART)
    sections = ["bite", "trajectory"] if jaw else ["observer"]
    if draw(st.booleans()):   # most runs with the hook on, so that its keys matter
        raw.setdefault(sections[0], {}).update({"enabled": True, **({"force_limit": 40.0} if jaw else {})})
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sections))
        key = draw(st.sampled_from(_SECTION_KEYS[section]))
        raw.setdefault(section, {})[key] = draw(_hostile if draw(st.integers(0, 3)) == 0 else _plausible[key])
    return raw, sections


@pytest.mark.slow
def test_random_bite_observer_and_cpg_feedback_values_run_or_are_refused_naming_file_and_section():
    @settings(FUZZ, max_examples=60)
    @given(case=_jaw_or_stewart())
    def fuzz(case):
        raw, _ = case
        try:
            cfg = validate(raw, "fuzz.toml")
            cfg["_source"] = "fuzz.toml"
            loop = build(cfg)
        except ConfigError as exc:
            message = str(exc)
            assert message.startswith("fuzz.toml: [") and "]" in message, message
            return
        report = loop.run(cycles=300)
        if not report.tripped:   # a trip is the safe answer (e.g. a NaN desired motion); else everything is finite
            assert np.all(np.isfinite(loop.q_d)) and np.all(np.isfinite(loop.command.effort))
            for hook in loop.hooks:
                values = getattr(hook, "telemetry_values", None)
                if values is not None and not np.all(np.isfinite(values)):
                    bad = [n for n, v in zip(hook.telemetry_fields, values) if not math.isfinite(v)]
                    # test_a_tiny_forgetting_factor_is_refused_or_identifies_finite_values
                    assert all(n.startswith("patient_") for n in bad), bad
        loop.safety.estop("after the section fuzz")
        assert loop.run(cycles=2).tripped

    fuzz()
    _safe_path_still_works()


@pytest.mark.parametrize("base, section, options", [
    pytest.param(JAW, "bite", {"enabled": True, "force_limit": 40.0, "frame": "condyle"}),
    pytest.param(STEWART, "observer", {"enabled": True, "frame": "incisal"}),
    pytest.param(JAW, "bite", {"enabled": True}),
])
def test_a_bad_bite_or_observer_key_is_refused_naming_its_section_and_key(base, section, options):
    raw = copy.deepcopy(base)
    raw[section] = options
    with pytest.raises(ConfigError) as info:
        cfg = validate(raw, "fuzz.toml")
        cfg["_source"] = "fuzz.toml"
        build(cfg)
    key = "frame" if "frame" in options else "force_limit"
    assert re.search(rf"^fuzz\.toml: .*\[{section}\] {key}", str(info.value)), str(info.value)


def test_a_tiny_forgetting_factor_is_refused_or_identifies_finite_values():
    raw = copy.deepcopy(JAW)
    raw["bite"] = {"enabled": True, "force_limit": 60.0, "forgetting": 1e-10}
    try:
        loop = build(validate(raw, "fuzz.toml"))
    except ConfigError as exc:
        assert "[bite] forgetting" in str(exc)
        return
    loop.run(cycles=500)
    monitor = next(h for h in loop.hooks if hasattr(h, "bite_force"))
    assert np.all(np.isfinite(monitor.telemetry_values)), dict(zip(monitor.telemetry_fields, monitor.telemetry_values))


@pytest.mark.parametrize("source, gain", [("tracking_error", 1e11), ("bite_force", 1e6), ("tracking_error", 1e308)])
@pytest.mark.slow
def test_cpg_feedback_never_drives_the_jaw_beyond_the_therapists_speed(source, gain):
    raw = copy.deepcopy(JAW)
    raw["trajectory"].update(feedback_gain=gain, feedback_source=source)
    if source == "bite_force":
        raw["bite"] = {"enabled": True, "force_limit": 60.0}
    loop = build(validate(raw, "fuzz.toml"))
    max_speed = raw["therapist"]["max_speed"]
    peak = 0.0
    for _ in range(30):
        report = loop.run(cycles=50)
        peak = max(peak, float(np.linalg.norm(loop.trajectory.incisal[1])))
        if report.tripped:
            break
    assert peak <= max_speed, f"desired incisal speed {peak:.4g} m/s > therapist's {max_speed} m/s"
    assert not report.tripped, report.trip_reason


def test_a_cpg_whose_desired_motion_overflows_trips_at_its_first_cycle_instead_of_raising():
    """Found by the section fuzz: ``convergence = 1e308`` makes the jaw CPG's desired acceleration overflow. The
    warm-up before activation met it first and ``run()`` raised; the run now starts, and its first cycle trips
    the safety monitor on the controller's refusal, the robot left in its safe state."""
    raw = copy.deepcopy(JAW)
    raw["trajectory"]["convergence"] = 1e308
    cfg = validate(raw, "fuzz.toml")
    cfg["_source"] = "fuzz.toml"
    loop = build(cfg)
    report = loop.run(cycles=50)
    assert report.tripped and "qdd_d contains NaN or inf" in report.trip_reason, report.trip_reason
    assert report.trip_history[0][0] <= 1, report.trip_history      # (cycle, reason, re-armed at)
