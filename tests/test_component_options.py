"""Each config key declared once, each component named once (issue 32, item 2).

A component's ``Options`` dataclass is the one declaration of the keys of its config table (with their
defaults); its constructor takes such an ``Options``, and the name it is found by is the one its entry point
in ``pyproject.toml`` gives it.
"""
import dataclasses
import inspect
from importlib.metadata import entry_points

import numpy as np
import pytest

from rtctl import bundled_model_path
from rtctl.config import COMPONENTS, component_keys, component_options
from rtctl.options import ConfigError, OptionsBase, check_table, schema_keys
from rtctl.registry import CONTROLLERS, DRIVERS, PLANTS, TRAJECTORIES

SECTIONS = {DRIVERS: "driver", PLANTS: "plant", CONTROLLERS: "controller", TRAJECTORIES: "trajectory"}
# The excitation trajectory's constructor takes the designed series (limits resolved, coefficients), which its
# from_config derives from the options; it is not built from its Options (yet).
DESIGNED = {"excitation"}


def bundled(registry):
    return [ep for ep in entry_points(group=registry.group) if ep.value.startswith("rtctl.")]


@pytest.mark.parametrize("registry", list(SECTIONS), ids=list(SECTIONS.values()))
def test_every_entry_point_loads_and_its_options_are_the_keys_its_table_takes(registry):
    section = SECTIONS[registry]
    _, selector, _ = COMPONENTS[section]
    for ep in bundled(registry):
        cls = registry.get(ep.name)
        assert cls is ep.load() and cls.registered_name == ep.name and registry.name_of(cls) == ep.name
        fields = [f.name for f in dataclasses.fields(cls.Options)]
        keys = component_keys(section, cls)     # what the config validator takes in a table selecting it
        assert set(keys) == {selector, *fields}, ep.name
        with pytest.raises(ConfigError, match=f"unknown key 'not_a_key' for {section} '{ep.name}'"):
            component_options(section, cls, {selector: ep.name, "not_a_key": 1}, f"[{section}]")
        if ep.name in DESIGNED:
            continue
        assert issubclass(cls.Options, OptionsBase), ep.name
        parameters = list(inspect.signature(cls.__init__).parameters)[1:]
        assert "options" in parameters, ep.name
        # none of its keys is declared again as an argument; the subject it works on (a plant's or driver's
        # model, a controller's dynamics) comes first (the MuJoCo plant's [plant] model key is its file,
        # handed over resolved as source)
        subject = parameters[:parameters.index("options")]
        assert not set(fields) & (set(parameters) - set(subject)), (ep.name, set(fields) & set(parameters))


def test_every_robot_model_entry_point_builds_a_model():
    from rtctl.registry import ROBOTS

    for ep in bundled(ROBOTS):
        factory = ROBOTS.get(ep.name)
        assert factory is ep.load()
        if getattr(factory, "sections", None):
            with pytest.raises(ValueError, match=r"\[mechanism\]|section"):
                factory()   # built from the config sections it owns: without them, a clear refusal
        else:
            model = factory()
            assert model.nv > 0 and model.name


def test_options_check_themselves_as_a_table_is_checked():
    from rtctl.drivers.sim import SimDriver

    with pytest.raises(ConfigError, match=r"^SimDriver.Options position_noise: must be >= 0.0, got -1$"):
        SimDriver.Options(position_noise=-1)
    with pytest.raises(ConfigError, match=r"^SimDriver.Options mode: must be one of "
                                          r"\['effort', 'position', 'velocity'\], got 'torque'$"):
        SimDriver.Options(mode="torque")
    table = {"position_noise": 1, "encoder_counts": 4096, "torque_limit": np.array([3, 4.5]), "joints": ("a",)}
    checked = check_table(table | {"torque_limit": [3, 4.5], "joints": ["a"]}, schema_keys(SimDriver.Options), "[d]")
    made = SimDriver.Options(**table)
    assert made == SimDriver.Options(**checked)
    assert type(made.position_noise) is float and made.position_noise == 1.0       # a float key: a float
    assert type(made.encoder_counts) is int                                       # an int key stays an int
    assert made.torque_limit == [3.0, 4.5] and made.joints == ["a"]                # arrays and tuples: lists
    assert SimDriver.Options().replace(seed=3).seed == 3
    with pytest.raises(ConfigError, match="seed: must be >= 0"):
        SimDriver.Options().replace(seed=-3)


def test_a_component_refuses_another_components_options():
    from rtctl.drivers.sim import SimDriver
    from rtctl.model.urdf import load_urdf
    from rtctl.plants.rigid_body import RigidBodyPlant

    model = load_urdf(bundled_model_path("arm7"))
    with pytest.raises(TypeError, match="options must be a SimDriver.Options, got RigidBodyPlant.Options"):
        SimDriver(model, RigidBodyPlant.Options(), plant=RigidBodyPlant(model), period=1e-3)


def test_names_come_from_the_entry_points_or_an_in_process_registration():
    from rtctl.loops.controllers import ComputedTorque
    from rtctl.registry import Registry

    assert ComputedTorque.name == "computed_torque"

    class Stiffer(ComputedTorque):    # a script's own law: named after the law it derives from
        pass

    assert Stiffer.name == "computed_torque"
    local = Registry("controller", "rtctl.controllers")
    local.register("stiffer")(Stiffer)
    assert local.name_of(Stiffer) == "stiffer" and local.get("stiffer") is Stiffer
    assert local.name_of(int, "none") == "none"


def test_a_config_gives_its_component_the_options_python_would():
    """The driver a config builds holds the Options its table makes, defaults filled in by the Options."""
    from rtctl.config import bundled_config_path, build, load_config

    cfg = load_config(bundled_config_path("demo"))
    driver = build(cfg).drivers[0]
    table = {k: v for k, v in cfg["driver"].items() if k != "backend"}
    assert driver.options == type(driver).Options(**table)
    given = {k: v for k, v in table.items() if v is not None}
    assert driver.options == type(driver).Options(**given)
