"""Every URDF that example-robot-data ships loads here and agrees with Pinocchio.

For each file (found through the installed distribution's file list, so the
test does not depend on where it is installed), with a fixed base and with a
free-flyer base: rtctl loads it with the default inertia policy (at most one
warning, naming every link it found), and at random states inverse dynamics,
the mass matrix and forward dynamics agree with Pinocchio's by joint name to
``oracle.close(rtol=1e-9)``. Joints whose subtree is massless make M singular:
there forward dynamics must raise naming them (Pinocchio's ABA divides by zero).

Models with mimic joints are compared twice: every joint on its own against
Pinocchio's default model (which ignores ``<mimic>``), and in independent
coordinates (:class:`rtctl.dynamics.coupled.CoupledDynamics`) against
Pinocchio's ``mimic=True`` model where Pinocchio builds one, else against the
projection ``G^T (.) G`` of its unconstrained model by the coupling Jacobian.

Not compared, each for a physical reason:

* ``ur3.urdf`` is an empty ``<robot>`` (no links, no name): Pinocchio refuses
  it too; there is no body to compare.
* ``quadrotor_base.urdf`` and ``iris_simple.urdf`` with a fixed base: each is a
  single rigid body (no movable joint), so a fixed base leaves nv = 0 and no
  dynamics; rtctl refuses that load with the reason and loads them with a
  free-flyer (6 DOFs), compared like the others.
"""
from __future__ import annotations

import importlib.metadata
import re
import warnings
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from oracle import NamedPair, close, worst_relative_error

from rtctl.dynamics import Dynamics
from rtctl.dynamics.coupled import CoupledDynamics
from rtctl.model import ModelError
from rtctl.model.inertia import InertiaWarning
from rtctl.model.massless import massless_subtree_joints
from rtctl.model.mimic import MimicWarning
from rtctl.model.urdf import load_urdf

RTOL = 1e-9
N_STATES = 3
SINGLE_RIGID_BODIES = {"quadrotor_base.urdf", "iris_simple.urdf"}
REFUSED_BY_PINOCCHIO_TOO = {"ur3.urdf"}


def example_robot_data_urdfs() -> dict:
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    urdfs = [f for f in files if f.suffix == ".urdf" and "robots" in f.parts]
    return {"/".join(f.parts[f.parts.index("robots") + 1:]): str(f.locate()) for f in urdfs}


URDFS = example_robot_data_urdfs()
pytestmark = pytest.mark.skipif(not URDFS, reason="example-robot-data (a test extra) is not installed")
CASES = [(name, base) for name in URDFS if name.rsplit("/", 1)[-1] not in REFUSED_BY_PINOCCHIO_TOO
         for base in ("fixed", "free_flyer")
         if not (base == "fixed" and name.rsplit("/", 1)[-1] in SINGLE_RIGID_BODIES)]
MIMIC_CASES = [case for case in CASES if "<mimic" in Path(URDFS[case[0]]).read_text()]


def check(ours, ref, what):
    assert close(ours, ref, rtol=RTOL), f"{what}: worst relative error {worst_relative_error(ours, ref):.3g}"


@cache
def load(name, base):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_urdf(URDFS[name], None if base == "fixed" else base)
    return model, [w for w in caught if issubclass(w.category, (InertiaWarning, MimicWarning))]


def pinocchio_model(name, base, mimic=False):
    args = (URDFS[name],) if base == "fixed" else (URDFS[name], pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(*args, mimic=mimic)


def random_states(model, q_of, nv, seed):
    rng = np.random.default_rng(seed)
    return [(q_of(model.random_configuration(rng)), rng.normal(size=nv), rng.normal(size=nv),
             10.0 * rng.normal(size=nv)) for _ in range(N_STATES)]


@pytest.mark.parametrize("name", sorted(URDFS))
@pytest.mark.slow
def test_pinocchio_and_rtctl_load_the_same_files(name):
    try:
        pinocchio_model(name, "free_flyer")
        pinocchio_loads = True
    except (RuntimeError, ValueError):
        pinocchio_loads = False
    assert pinocchio_loads == (name.rsplit("/", 1)[-1] not in REFUSED_BY_PINOCCHIO_TOO)
    if pinocchio_loads:
        load(name, "free_flyer")
    else:
        with pytest.raises(ModelError, match="no <link> elements"):
            load_urdf(URDFS[name])


@pytest.mark.parametrize("name", sorted(SINGLE_RIGID_BODIES))
def test_a_single_rigid_body_needs_a_floating_base(name):
    (path,) = [p for n, p in URDFS.items() if n.endswith("/" + name)]
    with pytest.raises(ModelError, match="no movable joint.*floating_base='free_flyer'"):
        load_urdf(path)
    assert load_urdf(path, "free_flyer").nv == 6


@pytest.mark.parametrize("name,base", CASES, ids=[f"{n}-{b}" for n, b in CASES])
@pytest.mark.slow
def test_one_warning_names_every_inconsistent_inertia(name, base):
    model, caught = load(name, base)
    caught = [w for w in caught if w.category is InertiaWarning]
    assert len(caught) == (1 if model.inertia_findings else 0)
    for finding in model.inertia_findings:
        assert f"link '{finding.link}'" in str(caught[0].message) and finding.amount > 1e-5


@pytest.mark.parametrize("name,base", CASES, ids=[f"{n}-{b}" for n, b in CASES])
@pytest.mark.slow
def test_dynamics_agree_with_pinocchio_by_joint_name(name, base):
    model, _ = load(name, base)
    pair = NamedPair(model, pinocchio_model(name, base))
    dyn, idle = Dynamics(model), massless_subtree_joints(model)
    for k, (q, v, a, tau) in enumerate(random_states(model, lambda q: q, model.nv, CASES.index((name, base)))):
        check(dyn.inverse_dynamics(q, v, a), pair.rnea(q, v, a), f"{name} {base} state {k}: inverse dynamics")
        check(dyn.mass_matrix(q), pair.crba(q), f"{name} {base} state {k}: mass matrix")
        if idle:
            with pytest.raises(ValueError, match=f"singular.*'{re.escape(idle[0])}'"):
                dyn.forward_dynamics(q, v, tau)
            continue
        check(dyn.forward_dynamics(q, v, tau), pair.forward_dynamics(q, v, tau),
              f"{name} {base} state {k}: forward dynamics")


def movable_joints_with_mimic(path) -> list[str]:
    root = ET.parse(path).getroot()
    return [j.get("name") for j in root.iter("joint") if j.find("mimic") is not None and j.get("type") != "fixed"]


def coupled_reference(name, base, model):
    """Pinocchio's mimic model of the file, or None where Pinocchio cannot build one."""
    try:
        return NamedPair(model, pinocchio_model(name, base, mimic=True), coupled=True)
    except (RuntimeError, ValueError):
        return None


@pytest.mark.parametrize("name,base", MIMIC_CASES, ids=[f"{n}-{b}" for n, b in MIMIC_CASES])
def test_mimic_joints_agree_in_independent_coordinates(name, base):
    model, caught = load(name, base)
    if model.mimic is None:  # <mimic> on fixed joints (no coordinate), or naming joints that are fixed or absent
        followers = [j for j in movable_joints_with_mimic(URDFS[name]) if j in model.joint_names]
        warned = "".join(str(w.message) for w in caught if w.category is MimicWarning)
        assert all(f"joint '{j}' mimics" in warned for j in followers)
        return
    coupled, g, dof_names = CoupledDynamics(model), model.mimic.G, model.mimic.dof_joint_names(model)
    full = NamedPair(model, pinocchio_model(name, base))
    reference = coupled_reference(name, base, model)
    states = random_states(model, model.mimic.reduced_q, coupled.nv, 100 + MIMIC_CASES.index((name, base)))
    for k, (q, v, a, tau) in enumerate(states):
        q_full = model.mimic.full_q(q)
        if reference is not None:
            expected_id, expected_m = reference.rnea(q, v, a), reference.crba(q)
        else:
            expected_id = g.T @ full.rnea(q_full, g @ v, g @ a)
            expected_m = g.T @ full.crba(q_full) @ g
        check(coupled.inverse_dynamics(q, v, a), expected_id, f"{name} {base} state {k}: coupled inverse dynamics")
        check(coupled.mass_matrix(q), expected_m, f"{name} {base} state {k}: coupled mass matrix")
        idle = [dof_names[i] for i in np.flatnonzero(np.diag(expected_m) == 0)]
        if idle:
            with pytest.raises(ValueError, match=f"singular.*'{re.escape(idle[0])}'"):
                coupled.forward_dynamics(q, v, tau)
            continue
        expected_fd = np.linalg.solve(expected_m, tau - (expected_id - expected_m @ a))
        check(coupled.forward_dynamics(q, v, tau), expected_fd, f"{name} {base} state {k}: coupled forward dynamics")
