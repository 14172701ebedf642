"""``[plant] mass_scale``: every plant's masses and inertias, whatever its formulation.

Scaling every mass and inertia by f scales M, C and the gravity term alike (eq. M qdd + C + g = tau),
so a plant scaled by f driven by f tau must follow the unscaled plant driven by tau, step for step,
as long as no force outside the rigid-body dynamics acts (friction, contact and the patient's
impedance are switched off). The same scaled plant driven by tau must not: that is what catches a
plant that ignores the key.
"""
from pathlib import Path

import numpy as np
import pytest

import rtctl

from plants import create_plant
from rtctl.config import build, read_toml, validate
from rtctl.mechanisms import actuator_model
from rtctl.mechanisms.geared import GEARED_MODELS
from rtctl.mechanisms.legged import LEGGED_ROBOTS
from rtctl.model import ModelError
from rtctl.model.urdf import load_urdf

F = 1.7
STEPS, DT = 50, 1e-3
NO_PATIENT = dict(stiffness=[0.0] * 6, damping=[0.0] * 6, bolus_force=0.0, bolus_damping=0.0)


def _arm7():
    return load_urdf(Path(rtctl.__file__).parent / "data" / "models" / "arm7.urdf")


# plant type, model factory, plant options, effort scale (N m or N) of the random efforts
CASES = {
    "rigid_body": (_arm7, {}, 5.0),
    "legged": (lambda: LEGGED_ROBOTS["planar_biped"]().model, {}, 5.0),
    "geared": (GEARED_MODELS["grm3"], {}, 0.5),
    "stewart": (lambda: actuator_model("stewart"), {}, 20.0),
    "jaw": (lambda: actuator_model("jaw"), NO_PATIENT, 2.0),
    "quadruped_tail": (lambda: actuator_model("quadruped_tail"), {}, 2.0),
}


def _start(plant, name):
    """The plant's own initial state; the legged robot lifted 0.5 m (no foot touches the ground) and moving."""
    if name == "legged":
        q = plant.q.copy()
        q[1] += 0.5
        plant.reset(q, np.random.default_rng(1).normal(0.0, 0.3, plant.nv))


def _run(plant, efforts):
    for tau in efforts:
        plant.step(DT, tau)
    return plant.q.copy(), plant.v.copy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_scaled_plant_under_scaled_effort_follows_the_nominal_plant(name):
    factory, options, scale = CASES[name]
    nominal = create_plant(name, factory(), **options)
    scaled = create_plant(name, factory(), mass_scale=F, **options)
    wrong = create_plant(name, factory(), mass_scale=F, **options)
    assert scaled.parameters()["mass_scale"] == F
    for p in (nominal, scaled, wrong):
        _start(p, name)
    rng = np.random.default_rng(7)
    efforts = scale * rng.uniform(-1.0, 1.0, (STEPS, nominal.nv))
    if name == "legged":
        efforts[:, :3] = 0.0                       # the floating base is not actuated
    q1, v1 = _run(nominal, efforts)
    q2, v2 = _run(scaled, F * efforts)
    q3, v3 = _run(wrong, efforts)
    np.testing.assert_allclose(q2, q1, rtol=0, atol=1e-10)
    np.testing.assert_allclose(v2, v1, rtol=0, atol=1e-8)
    assert np.abs(v3 - v1).max() > 1e-4, "the scaled plant moved like the nominal one under the same effort"


def test_config_mass_scale_reaches_every_plant_and_bad_values_are_named():
    for name, example in (("stewart", "stewart.toml"), ("jaw", "jaw.toml"), ("geared", "geared.toml"),
                          ("quadruped_tail", "quadruped_tail_forward.toml")):
        path = Path(__file__).parents[1] / "examples" / example
        raw = read_toml(path)
        raw["plant"]["mass_scale"] = 1.25
        cfg = validate(raw, str(path))
        cfg["_dir"] = str(path.parent)
        loop = build(cfg)
        assert loop.driver.plant.parameters()["mass_scale"] == 1.25, name
    with pytest.raises(ModelError, match="inertia scale factor must be finite and > 0, got nan"):
        create_plant("stewart", actuator_model("stewart"), mass_scale=float("nan"))
    with pytest.raises(ModelError, match="must be a number > 0, got 'heavy'"):
        create_plant("jaw", actuator_model("jaw"), mass_scale="heavy")
