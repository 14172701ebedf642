"""Chen & Wang (1998) GRM from a run config's ``[mechanism]`` section: the planetary example runs and tracks, and bad
definitions are refused naming the file, section, element and key (or the gear pair, its kind and its axes)."""
import copy
import functools
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import rtctl.plants.geared as geared
from rtctl.config import build, validate
from rtctl.options import ConfigError
from rtctl.plants.geared.model import GearedMechanism, check_mechanism_section, geared_model
from rtctl.registry import ROBOTS

EXAMPLE = Path(geared.__file__).parent / "planetary.toml"
WHERE = "planetary.toml: [mechanism]"


def example():
    with open(EXAMPLE, "rb") as fh:
        return tomllib.load(fh)


def config_supports_robot_sections() -> bool:
    """Whether rtctl.config hands a named robot model the sections it owns (the [mechanism] of "geared")."""
    raw = example()
    try:
        validate(raw, str(EXAMPLE))
    except ConfigError as exc:
        if "unknown section [mechanism]" in str(exc):
            return False
        raise
    return True


def test_example_coupling_is_A_transpose_and_willis():
    mech = GearedMechanism.from_dict(example()["mechanism"])
    np.testing.assert_allclose(np.array(example()["driver"]["coupling"]), mech.A.T, atol=1e-15)
    # sun relative to the ring (link 1) per carrier (link 2) turn: 1 + N_ring / N_sun (Willis)
    assert mech.b["s"][1] == pytest.approx(1 + 70 / 20, rel=1e-15)
    assert mech.gear_carrier[("s", "p")] == "2" and mech.gear_carrier[("p", "1")] == "2"


def run_example(duration):
    """The example built by rtctl.config.build: through its own [mechanism] section when rtctl.config hands it
    to the robot model, else through an in-process robot model made from that section."""
    raw = example()
    if not config_supports_robot_sections():
        checked = check_mechanism_section(raw.pop("mechanism"), WHERE)
        ROBOTS.register("planetary_arm_test")(functools.partial(geared_model, mechanism=checked))
        raw["robot"]["model"] = "planetary_arm_test"
    cfg = validate(raw, str(EXAMPLE))
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    return loop.run(duration=duration), loop


@pytest.mark.slow
def test_mechanism_section_runs_and_tracks():
    rep, loop = run_example(2.0)
    assert not rep.tripped, rep.trip_reason
    assert loop.controller.mechanism.name == "planetary_arm"
    assert loop.driver.saturated_cycles == 0
    print(f"\nplanetary arm, virtual-link CT, 2 s: tracking RMS {rep.tracking_rms} rad, max {rep.tracking_max} rad")
    assert np.all(rep.tracking_rms < 1e-4) and np.all(rep.tracking_max < 3e-4)   # measured 2e-5, 4e-5 rad
    # the motor torques the controller computed (xi = A^-1 tau, eq. 22) are what the driver applied
    np.testing.assert_allclose(loop.controller.xi, loop.driver._applied, rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(not config_supports_robot_sections() or
                    "geared" not in {ep.name for ep in entry_points(group="rtctl.robots")},
                    reason="needs rtctl.config to hand robot models their sections and the 'geared' entry point")
@pytest.mark.slow
def test_rtctl_run_the_example():
    out = subprocess.run([sys.executable, "-m", "rtctl.cli", "run", str(EXAMPLE), "--offline", "--duration", "1.0"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no trips" in out.stdout


def _mutated(change):
    table = copy.deepcopy(example()["mechanism"])
    change(table)
    return table


def _link(table, name):
    return next(ln for ln in table["link"] if ln["name"] == name)


def _carrier_as_input(table):
    """The stage with the carrier as an input (a secondary link carrying one planet) and the sun as link 2."""
    table["link"] = [ln for ln in table["link"] if ln["name"] not in ("s", "p")] + [
        dict(name="c", mass=0.5, axis=[0, 0, 1], axial_inertia=4e-4, transverse_inertia=3e-4),
        dict(name="p", mass=0.05, com=[0.03375, 0, 0], axis=[0, 0, 1], axial_inertia=1e-5, transverse_inertia=8e-6)]
    table["turning_pair"] = table["turning_pair"][:3] + [dict(links=["1", "c"], axis="b"),
                                                         dict(links=["c", "p"], axis="c")]
    table["gear_pair"] = [table["gear_pair"][0], dict(links=["2", "p"], teeth=[20, 25]),
                          dict(links=["p", "1"], teeth=[25, 70], kind="internal")]
    table["inputs"] = ["m1", "c"]


@pytest.mark.parametrize("change, words", [
    (lambda t: t.__setitem__("mass_scale", 2.0), ["unknown key 'mass_scale'"]),
    (lambda t: _link(t, "1").__setitem__("masss", 2.0), ["link[1] ('1') unknown key 'masss'", "did you mean 'mass'"]),
    (lambda t: _link(t, "1").__setitem__("mass", -3.0), ["link[1] ('1') mass: must be >= 0.0, got -3.0"]),
    (lambda t: _link(t, "p").__setitem__("count", 0), ["link[5] ('p') count: must be >= 1, got 0"]),
    (lambda t: _link(t, "s").__setitem__("axis", [0, 1]), ["link[4] ('s') axis: expected 3 values, got [0, 1]"]),
    (lambda t: t["gear_pair"][1].__setitem__("teeth", [20, 25, 30]), ["gear_pair[1] teeth: expected 2 values"]),
    (lambda t: t["gear_pair"][1].__setitem__("kind", "spur"),
     ["gear_pair[1] kind: must be one of ['external', 'internal', 'bevel'], got 'spur'"]),
    (lambda t: t["turning_pair"][0].pop("axis"), ["turning_pair[0] axis is required"]),
    (lambda t: t.pop("inputs"), ["inputs is required"]),
    # an axis contradicting its pair's kind, named with the pair, the kind and both axes
    (lambda t: _link(t, "m1").__setitem__("axis", [1.0, 0.0, 0.0]),
     ["gear pair m1-1 (kind 'external')", "axis of 'm1' [1, 0, 0] through [0.08, 0, 0.3] m",
      "axis of '1' [0, 0, 1] through [0, 0, 0] m", "not parallel", "external (spur) pair needs parallel axes"]),
    (lambda t: _link(t, "s").__setitem__("axis", [0.0, 0.2, 1.0]),
     ["gear pair s-p (kind 'external')", "axis of 's' [0, -0.980581, 0.196116] through [0, 0, 0.4] m",
      "axis of 'p' [0, -1, 0] through [0.03375, 0, 0.4] m", "not parallel"]),
    (lambda t: t["gear_pair"][2].update(kind="bevel", sign=1),
     ["gear pair p-1 (kind 'bevel')", "are parallel; a bevel pair needs intersecting, non-parallel axes"]),
    (lambda t: t["gear_pair"][0].update(kind="bevel", sign=-1) or _link(t, "m1").update(axis=[1, 0, 0],
                                                                                         com=[0.08, 0.05, 0.3]),
     ["gear pair m1-1 (kind 'bevel')", "do not intersect (they pass 0.05 m apart)"]),
    (lambda t: t["gear_pair"][0].update(kind="internal") or _link(t, "m1").update(axis=[0, 1, 0]),
     ["gear pair m1-1 (kind 'internal')", "internal (ring) pair needs parallel axes"]),
    # structure
    (lambda t: t["gear_pair"].__setitem__(0, dict(links=["m1", "2"], teeth=[15, 90])),
     ["gear pair m1-2: no carrier", "'m1' turns about axes ['d'], '2' about ['b', 'c']"]),
    (lambda t: _carrier_as_input(t), ["secondary link 'p' on secondary carrier 'c'", "0.03375 m off",
                                      "give count >= 3"]),
    (lambda t: _carrier_as_input(t) or _link(t, "p").update(axis=[0, 0.3, 1], count=3),
     ["gear pair 2-p (kind 'external')", "not parallel"]),
])
def test_bad_definitions_are_refused_naming_the_element(change, words):
    with pytest.raises(ConfigError) as err:
        check_mechanism_section(_mutated(change), WHERE)
    message = str(err.value)
    assert message.startswith(WHERE), message
    for w in words:
        assert w in message, message


def test_carrier_as_input_with_three_planets_is_accepted():
    def balanced(t):
        _carrier_as_input(t)
        _link(t, "p")["count"] = 3
    mech = GearedMechanism.from_dict(_mutated(balanced))
    assert mech.secondary_carrier == {"p": "c"} and mech.A[1, 1] == pytest.approx(1 / (1 + 70 / 20), rel=1e-15)


@pytest.mark.skipif(not config_supports_robot_sections(), reason="needs rtctl.config to hand robot models their "
                                                                "sections")
def test_config_errors_name_the_file(tmp_path):
    text = EXAMPLE.read_text().replace("teeth = [20, 25]", "teeth = [20, -25]")
    path = tmp_path / "bad_planetary.toml"
    path.write_text(text)
    from rtctl.config import load_config
    with pytest.raises(ConfigError, match=r"bad_planetary.toml: \[mechanism\] gear_pair\[1\] teeth\[1\]: must be > 0"):
        load_config(path)
