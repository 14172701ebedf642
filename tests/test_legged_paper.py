"""Shah, Saha & Dutt (2012) as published: the biped's own plan and gains on the default ground, and the
module-level DeNOC recursion (the paper's block formulation) against rtctl's link-by-link kernels.

Walk runs go through the real-time loop (sim driver, "legged" plant, 10 kHz, one plant step per cycle).
"""
from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest
from rtctl.config import build, bundled_config_path, load_config
from rtctl.plants.legged.control import BIPED_GROUND, BipedWalk, run_walk
from rtctl.plants.legged.plant import PAPER_GROUND
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.plants.legged.module_dynamics import ModularDynamics, module_table

from rtctl.dynamics import Dynamics, kernels
from rtctl.dynamics.contact import ContactModel

WALK_T = 12.0


def stance_foot_tilt(rec):
    """Pitch (rad) of the stance foot (left on even steps) over the middle 90 % of each step."""
    step = np.floor(rec.t).astype(int)
    left = step % 2 == 0
    tilt = np.where(left, rec.q[:, 2] + rec.q[:, 3:6].sum(axis=1), rec.q[:, 2] + rec.q[:, 6:9].sum(axis=1))
    phase = rec.t - step
    return np.abs(tilt[(phase > 0.05) & (phase < 0.95)])


@pytest.fixture(scope="module")
def paper_walks():
    return {law: run_walk("planar_biped", law, WALK_T) for law in ("ff", "ct")}


def test_the_defaults_are_the_papers_plan_on_the_stiff_ground():
    traj = BipedWalk()
    assert not traj.gait.leg_compensation
    assert traj.gait.params[13] == 1.0 and traj.gait.params[14] == 0.0        # K1, K2: B.1 unchanged
    assert (PAPER_GROUND.stiffness, PAPER_GROUND.damping) == (1e6, 5000.0)
    assert BIPED_GROUND == PAPER_GROUND


@pytest.mark.slow
def test_a_config_without_contact_walks_the_paper_plan_on_the_papers_ground():
    """The shipped biped config has no [contact]: the plant and the controller get k = 1e6 N/m, d = 5000 N s/m, and
    the paper's plan and gains walk on it through the loop built from the config -- 3 s, trunk height within 2 mm,
    pitch within 10 mrad, 0.3 m per step (on the 1e5 / 500 ground the same plan pitches past 0.3 rad at 2.9 s)."""
    path = bundled_config_path("legged_biped")
    with open(path, "rb") as f:
        assert "contact" not in tomllib.load(f)
    cfg = load_config(path)
    loop = build(cfg)
    plant = loop.driver.plant
    assert plant.contact_model == PAPER_GROUND and loop.controller.contact == PAPER_GROUND
    assert type(loop.controller).__name__ == "LeggedFeedForwardPD"
    assert (loop.controller.kp[0], loop.controller.kd[0]) == (49.0, 14.0)
    trunk = []
    loop.hooks.append(lambda cycle, t, state, command: trunk.append(state.q[:3].copy()) if cycle % 100 == 0 else None)
    x0 = plant.q[0]
    report = loop.run(duration=3.0)
    assert not report.tripped and not loop.failures
    trunk = np.array(trunk)
    assert len(trunk) >= 299
    assert np.abs(trunk[:, 1] - 0.96).max() < 2e-3
    assert np.abs(trunk[:, 2]).max() < 0.01
    assert plant.q[0] - x0 == pytest.approx(0.9, rel=0.05)


@pytest.mark.parametrize("law", ["ff", "ct"])
@pytest.mark.slow
def test_paper_controller_walks_12_s_on_the_default_ground(paper_walks, law):
    """kp = 49, kd = 14, B.1 without the legs' mass, k = 1e6 N/m, d = 5000 N s/m: the trunk's centre of mass
    stays within 2 mm of z_c = 0.96 m and its pitch within 10 mrad for 12 s, every step advances 0.3 m +- 5 %,
    the stance foot tilts by less than 10 mrad (measured: 0.47 mm, 4.0 mrad, 3.9 mrad)."""
    rec = paper_walks[law]
    assert not rec.failures and not rec.report.tripped
    assert rec.t[-1] > WALK_T - 0.02
    assert np.abs(rec.q[:, 1] - 0.96).max() < 2e-3
    assert np.abs(rec.q[:, 2]).max() < 0.01
    steps = np.searchsorted(rec.t, np.arange(0.0, WALK_T, 1.0) - 1e-9)
    progress = np.diff(rec.q[steps, 0])
    assert len(progress) == 11 and np.all(np.abs(progress - 0.3) < 0.015), progress
    assert stance_foot_tilt(rec).max() < 0.01
    planned, _ = rec.planned()
    assert np.abs(rec.q[:, 3:] - planned[:, 3:]).max() < 2e-3


@pytest.mark.slow
def test_on_the_soft_ground_the_paper_plan_falls_and_the_leg_mass_compensation_walks():
    """The measured reason for the default ground: on k = 1e5, d = 500 the stance foot's rocking grows every step
    (10, 56, 310 mrad in steps 1-3) and the trunk pitches past 0.3 rad at 2.9 s (measured 2.93 s under both laws);
    the leg-mass compensation (option) walks there."""
    soft = ContactModel(stiffness=1e5, damping=500.0)
    plain = run_walk("planar_biped", "ff", 4.0, contact=soft)
    pitch = np.abs(plain.q[:, 2])
    assert pitch.max() > 0.3
    fall = plain.t[np.argmax(pitch > 0.3)]
    assert 2.8 < fall < 3.1
    tilt = [stance_foot_tilt(StepWindow(plain, k)).max() for k in range(3)]
    assert tilt[0] < tilt[1] < tilt[2]
    compensated = run_walk("planar_biped", "ff", WALK_T, contact=soft, leg_compensation=True)
    assert not compensated.failures
    assert np.abs(compensated.q[:, 2]).max() < 0.01
    assert np.abs(compensated.q[:, 1] - 0.96).max() < 3e-3


class StepWindow:
    """The samples of step k of a walk record (for :func:`stance_foot_tilt`)."""

    def __init__(self, rec, k):
        sel = (rec.t >= k) & (rec.t < k + 1)
        self.t, self.q = rec.t[sel], rec.q[sel]


# -- module-level DeNOC recursion ---------------------------------------------------------------------------
def states(robot, count, seed):
    rng = np.random.default_rng(seed)
    m = robot.model
    for _ in range(count):
        yield (m.neutral_configuration() + 0.6 * rng.standard_normal(m.nq), rng.standard_normal(m.nv),
               rng.standard_normal(m.nv), rng.standard_normal((m.nbodies, 6)))


@pytest.mark.parametrize("make", [planar_biped, spatial_quadruped])
def test_module_level_kernel_equals_link_level_kernel(make):
    """Mass matrix (eqs. A.2-A.3), inverse dynamics with external wrenches (eq. 28) and the under-actuated
    inverse dynamics (eqs. 26-27) of the block recursion agree with rtctl's link-by-link CRBA, RNEA and
    floating-base RNEA to 1e-12 (relative to the largest entry) on random states; the last (the base
    acceleration and the forces that carry it) to 1e-12 or 10 eps cond(I_0), the round-off its solve amplifies."""
    robot = make()
    md, dyn = ModularDynamics(robot), Dynamics(robot.model)
    nv, nb = robot.model.nv, robot.model.nbodies
    ref_m, ref_tau, ref_acc, base = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros((robot.n_base,) * 2)
    for q, v, a, fext in states(robot, 20, 11):
        assert kernels.crba(dyn.mi, dyn.mf, dyn.ws, q, ref_m) == 0
        mass = md.mass_matrix(q)
        assert np.abs(mass - ref_m).max() <= 1e-12 * np.abs(ref_m).max()
        md.set_external_wrenches(fext)
        dyn.ws[:nb, kernels.W_FEXT:kernels.W_FEXT + 6] = fext
        assert kernels.rnea(dyn.mi, dyn.mf, dyn.ws, q, v, a, ref_tau) == 0
        tau = md.inverse_dynamics(q, v, a)
        assert np.abs(tau - ref_tau).max() <= 1e-12 * np.abs(ref_tau).max()
        acc, tau = md.floating_base_inverse_dynamics(q, v, a)
        dyn.ws[:nb, kernels.W_FEXT:kernels.W_FEXT + 6] = fext
        assert kernels.floating_base_rnea(dyn.mi, dyn.mf, dyn.ws, base, q, v, a, ref_acc, ref_tau) == 0
        # qdd_0 solves I_0 qdd_0 = -h_0: round-off in I_0 is amplified by its condition (6.5e4 near the
        # Euler base's gimbal lock in one of these states), whatever the order of the sums
        conditioned = max(1e-12, 10 * np.finfo(float).eps * np.linalg.cond(ref_m[:robot.n_base, :robot.n_base]))
        assert np.abs(acc - ref_acc).max() <= conditioned * max(1.0, np.abs(ref_acc).max())
        assert np.abs(tau - ref_tau).max() <= conditioned * np.abs(ref_tau).max()  # tau carries qdd_0
        assert np.all(tau[:robot.n_base] == 0.0) and np.array_equal(acc[robot.n_base:], a[robot.n_base:])


def test_module_table_follows_the_papers_modules_and_rejects_others():
    biped = planar_biped()
    table = module_table(biped)
    # M0 = (x, z, pitch) base, M1 and M2 the legs, each emerging from the trunk (last link of M0)
    assert table.tolist() == [[0, 3, -1, 0], [3, 3, 0, 3], [6, 3, 0, 6]]
    quad = module_table(spatial_quadruped())
    assert quad[:, 1].tolist() == [6, 3, 3, 3, 3] and quad[1:, 2].tolist() == [0, 0, 0, 0]
    shuffled = dataclasses.replace(biped, modules=[biped.modules[0], ("M1", ["left_thigh", "left_foot"]),
                                                   ("M2", ["left_shank", "right_thigh", "right_shank", "right_foot"])])
    with pytest.raises(ValueError, match="module M1 of planar_biped: link 'left_foot' does not follow"):
        module_table(shuffled)
    partial = dataclasses.replace(biped, modules=biped.modules[:2])
    with pytest.raises(ValueError, match="do not cover its 9 bodies"):
        module_table(partial)
    md = ModularDynamics(biped)
    with pytest.raises(ValueError, match="q must be 9 finite numbers"):
        md.mass_matrix(np.zeros(8))
