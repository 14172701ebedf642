"""Mimic joints as coupled joints: q_m = multiplier q_leader + offset, nv counts independent joints, torques mapped
back through the coupling. Compared with Pinocchio's mimic model (ID, M; FD as M^-1 (tau - h), Pinocchio's ABA
does not take mimic joints) and with its unconstrained model projected by the coupling Jacobian G."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from oracle import NamedPair, close

from rtctl.dynamics.coupled import CoupledDynamics
from rtctl.model import ModelError
from rtctl.model.mimic import MimicWarning
from rtctl.model.report import model_report
from rtctl.model.urdf import load_urdf, model_to_urdf

LIMIT = '<limit lower="-1" upper="1" effort="10" velocity="2"/>'
INERTIA = '<inertia ixx="0.01" iyy="0.02" izz="0.025" ixy="0.001" ixz="0" iyz="0"/>'


def link(name, mass=1.0):
    inertial = f'<origin xyz="0.05 0.02 0.1"/><mass value="{mass}"/>{INERTIA}'
    return f'<link name="{name}"><inertial>{inertial}</inertial></link>'


def joint(name, parent, child, kind="revolute", axis="0 0 1", origin="0 0 0.2", mimic=""):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{origin}" rpy="0.1 0 0"/><axis xyz="{axis}"/>{LIMIT}{mimic}</joint>')


CHAIN = '<mimic joint="finger_right" multiplier="2" offset="-0.05"/>'


def gripper(follower_mimic='<mimic joint="finger_left" multiplier="-0.8" offset="0.1"/>', tip_mimic=CHAIN):
    """An arm with a parallel gripper: finger_right mimics finger_left; tip mimics finger_right (a chain, which
    Pinocchio's mimic model does not take: its comparisons use ``tip_mimic=""``)."""
    return ('<robot name="gripper">' + "".join([
        link("base"), link("arm"), link("palm"), link("left"), link("right"), link("tip", 0.3),
        joint("shoulder", "base", "arm", axis="0 1 0"), joint("wrist", "arm", "palm"),
        joint("finger_left", "palm", "left", "prismatic", axis="1 0 0", origin="0.03 0 0.05"),
        joint("finger_right", "palm", "right", "prismatic", axis="1 0 0", origin="-0.03 0 0.05", mimic=follower_mimic),
        joint("tip_joint", "right", "tip", axis="0 1 0", mimic=tip_mimic)]) + "</robot>")


@pytest.fixture(scope="module", params=["chain", "pinocchio-compatible"])
def gripper_file(tmp_path_factory, request):
    path = tmp_path_factory.mktemp("mimic") / "gripper.urdf"
    path.write_text(gripper(tip_mimic=CHAIN if request.param == "chain" else ""))
    return path


def test_coupling_counts_independent_joints_and_composes_chains():
    model = load_urdf(gripper())
    coupling = model.mimic
    assert model.nv == 5 and coupling.nv == 3 and coupling.joint_names == ["shoulder", "wrist", "finger_left"]
    q_full = coupling.full_q([0.2, -0.3, 0.01])
    # finger_right = -0.8 * 0.01 + 0.1; tip = 2 * finger_right - 0.05
    np.testing.assert_allclose(q_full, [0.2, -0.3, 0.01, 0.092, 0.134], rtol=1e-15)
    assert "'tip_joint' = -1.6 * 'finger_left' + 0.15" in model_report(model)


@pytest.mark.parametrize("base", ["fixed", "free_flyer"])
def test_coupled_dynamics_agree_with_pinocchio_mimic_and_with_the_projected_full_model(gripper_file, base):
    root = () if base == "fixed" else (pin.JointModelFreeFlyer(),)
    model = load_urdf(gripper_file, None if base == "fixed" else base)
    coupled, g = CoupledDynamics(model), model.mimic.G
    chain = "tip_joint" not in model.mimic.joint_names
    mimic_pair = None if chain else NamedPair(model, pin.buildModelFromUrdf(str(gripper_file), *root, mimic=True),
                                              coupled=True)
    full_pair = NamedPair(model, pin.buildModelFromUrdf(str(gripper_file), *root))
    rng = np.random.default_rng(11)
    for _ in range(4):
        q = model.mimic.reduced_q(model.random_configuration(rng))
        v, a, tau = rng.normal(size=(3, coupled.nv))
        q_full = model.mimic.full_q(q)
        tau_ours, m_ours, acc_ours = (coupled.inverse_dynamics(q, v, a), coupled.mass_matrix(q),
                                      coupled.forward_dynamics(q, v, tau))
        m_projected = g.T @ full_pair.crba(q_full) @ g
        assert close(tau_ours, g.T @ full_pair.rnea(q_full, g @ v, g @ a))
        assert close(m_ours, m_projected)
        h_projected = g.T @ full_pair.rnea(q_full, g @ v, np.zeros(model.nv))
        assert close(acc_ours, np.linalg.solve(m_projected, tau - h_projected))
        if mimic_pair is not None:
            assert close(tau_ours, mimic_pair.rnea(q, v, a))
            assert close(m_ours, mimic_pair.crba(q))
            assert close(acc_ours, mimic_pair.forward_dynamics(q, v, tau))


def test_mimic_round_trips_through_model_to_urdf(gripper_file):
    model = load_urdf(gripper_file)
    again = load_urdf(model_to_urdf(model))
    assert again.mimic.describe() == model.mimic.describe()
    assert again.nv == model.nv and again.mimic.nv == model.mimic.nv


def test_a_mimic_naming_no_movable_joint_loads_as_independent_with_a_warning():
    with pytest.warns(MimicWarning, match="joint 'finger_right' mimics 'no_such_joint'"):
        model = load_urdf(gripper('<mimic joint="no_such_joint"/>'))
    assert model.mimic.joint_names == ["shoulder", "wrist", "finger_left", "finger_right"]


def test_mimic_cycle_and_self_mimic_are_refused_naming_the_joints():
    with pytest.raises(ModelError, match="joint 'finger_right' <mimic>: a joint cannot mimic itself"):
        load_urdf(gripper('<mimic joint="finger_right"/>'))
    with pytest.raises(ModelError, match="mimic joints form a cycle: 'finger_right' -> 'tip_joint' -> 'finger_right'"):
        load_urdf(gripper('<mimic joint="tip_joint"/>'))


def test_mimic_without_joint_attribute_names_the_joint():
    with pytest.raises(ModelError, match="joint 'finger_right' <mimic>: missing attribute 'joint'"):
        load_urdf(gripper('<mimic multiplier="2"/>'))
