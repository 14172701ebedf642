"""Identification refuses what the run cannot identify (issue 31, item 1).

A UR5 (example-robot-data) whose links are off the URDF by up to 30 % and whose joints have friction the URDF
lacks runs an excitation with wrist 3 commanded to stay still; tracking error moves it about a milliradian.
`rtctl identify` used to fit that joint's friction from the creep (viscous 24 N m s/rad against the plant's
0.15, Coulomb 0.0003 N m against 0.4) and report it as identified; on a run that moves wrist 3 that model
predicted wrist 3's torque 38x worse than the URDF. Now the joint is named, its friction and the parameters of
its link that only its motion shows keep the given model's values, and the written model predicts no joint's
held-out torque worse than the given model.
"""
from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest

import rtctl
from rtctl.config import build, validate
from rtctl.dynamics.regressor import inertial_parameters
from rtctl.loops.identifiability import RELATIVE_STD_MAX, essential_parameters
from rtctl.loops.identification import (identify, identify_command, motion_from_samples, predicted_torques,
                                        read_run, torque_rms)
from rtctl.model.urdf import load_urdf
from rtctl.model.urdf_writer import model_to_urdf

from identification_helpers import example_robot_data, perturbed, recorded_run


Q0 = [0.0, -1.2, 1.2, -1.5, -1.5, 0.0]
HELD_STILL = {"type": "excitation", "frequency": 0.2, "harmonics": 5, "periods": 1, "optimise": False, "seed": 3,
              "velocity_limit": 1.2, "acceleration_limit": [4.0, 4.0, 4.0, 4.0, 4.0, 1e-9]}   # wrist 3: held still
MOVING = {"type": "sinusoid", "center": Q0, "amplitude": [0.5, 0.4, 0.5, 0.5, 0.6, 0.6],
          "frequency": [0.25, 0.3, 0.35, 0.4, 0.45, 0.5]}


def ur5_loop(plant_urdf, trajectory, controller_model):
    """The true UR5 (viscous 0.15 N m s/rad, Coulomb 0.4 N m on every joint, smoothed over 10 mrad/s as
    pre-sliding friction is; encoder noise) under computed torque on the URDF's model, telemetry on."""
    raw = {"robot": {"model": str(plant_urdf)},
           "plant": {"initial_position": Q0, "viscous_friction": 0.15, "coulomb_friction": 0.4,
                     "coulomb_velocity_scale": 0.01, "substeps": 2},
           "driver": {"position_noise": 1e-4, "velocity_noise": 0.01, "seed": 5},
           "controller": {"type": "computed_torque", "kp": 100.0},
           "trajectory": trajectory,
           "loop": {"rate_hz": 500.0, "pace": False},
           "telemetry": {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.05, "capacity": 40_000}}
    loop = build(validate(raw))
    from rtctl.dynamics import Dynamics
    from rtctl.loops.controllers import ComputedTorque

    loop.controller = ComputedTorque(Dynamics(copy.deepcopy(controller_model)), ComputedTorque.Options(kp=100.0))
    return loop


@pytest.fixture(scope="module")
def ur5(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ur5")
    urdf = example_robot_data("ur_description/urdf/ur5_robot.urdf")
    given = load_urdf(urdf)
    true_urdf = tmp / "ur5_true.urdf"
    true_urdf.write_text(model_to_urdf(perturbed(given, np.random.default_rng(6))))
    held = recorded_run(ur5_loop(true_urdf, HELD_STILL, given), tmp / "held.mcap", 5.0)
    moving = recorded_run(ur5_loop(true_urdf, MOVING, given), tmp / "moving.mcap", 4.0)
    return SimpleNamespace(tmp=tmp, urdf=urdf, given=given, held=held, moving=moving)


@pytest.mark.slow
def test_a_joint_held_still_is_named_keeps_the_given_friction_and_spoils_no_prediction(ur5, capsys):
    out = ur5.tmp / "identified.urdf"
    args = SimpleNamespace(recording=str(ur5.held), model=ur5.urdf, out=str(out), cutoff=5.0, armature=None,
                           plot=None)
    assert identify_command(args) == 0
    captured = capsys.readouterr()
    print(captured.out)
    t, q, _ = read_run(ur5.held, ur5.given)
    print(f"wrist 3 moved {np.ptp(q[:, 5]) * 1e3:.2f} mrad")
    warning = captured.err.strip()
    assert warning.count("\n") == 0 and warning.startswith("rtctl identify: warning: the run does not identify the "
                                                           "friction of joint(s) wrist_3_joint (moved ")
    (line,) = [line for line in captured.out.splitlines() if line.startswith("not identified by this run")]
    assert "wrist_3_joint (moved" in line and "wrist_3_joint.F_v" in line and "wrist_3_joint.F_c" in line
    assert "wrist_3_link.Izz" in line
    (row,) = [line for line in captured.out.splitlines() if line.startswith("wrist_3_joint ")]
    assert row.split()[1:4] == ["-", "-", "-"] and row.split()[-2:] == ["0*", "0*"]    # not fitted; friction kept

    written = load_urdf(out)
    assert written.damping[5] == 0.0 and written.friction[5] == 0.0     # the URDF's, not the creep's
    t, q, tau = read_run(ur5.moving, ur5.given)
    motion = motion_from_samples(t, q, tau)
    scale = torque_rms(motion.tau)
    errors = {name: torque_rms(predicted_torques(model, motion) - motion.tau) / scale
              for name, model in (("URDF", ur5.given), ("identified", written))}
    overall = {name: float(np.sqrt(np.mean((e * scale) ** 2)) / np.sqrt(np.mean(scale ** 2)))
               for name, e in errors.items()}
    print(f"run moving every joint: wrist 3 torque error {errors['URDF'][5]:.1%} (URDF) -> "
          f"{errors['identified'][5]:.1%} (identified); all joints {overall['URDF']:.1%} -> "
          f"{overall['identified']:.1%}")
    assert errors["identified"][5] <= 1.02 * errors["URDF"][5]
    assert overall["identified"] < 0.2 * overall["URDF"]
    assert np.all(errors["identified"][:5] < 0.2 * errors["URDF"][:5])


@pytest.mark.slow
def test_the_report_validates_the_written_model_on_the_held_out_tail(ur5):
    """The report's held-out columns are the written model's own predictions by recursive inverse dynamics (from
    the URDF it writes, read back), on the last fifth of the run that was not fitted, never worse than the given
    model's; a joint that never slides is checked on every held-out sample (the torque it holds)."""
    t, q, tau = read_run(ur5.held, ur5.given)
    result = identify(ur5.given, t, q, tau)
    assert np.all(result.validation_after <= result.validation_before * (1 + 1e-9))
    written = ur5.tmp / "check.urdf"
    written.write_text(model_to_urdf(result.model))
    motion = motion_from_samples(t, q, tau)
    n = motion.q.shape[0]
    tail = np.arange(n) >= n - round(0.2 * n)
    sliding = np.abs(motion.qd) >= np.maximum(0.1 * torque_rms(motion.qd), 0.01 * ur5.given.velocity_limit)
    assert not sliding[:, 5].any()
    rows = sliding & tail[:, None]
    rows[:, 5] = tail
    for model, expected in ((ur5.given, result.validation_before), (load_urdf(written), result.validation_after)):
        error = predicted_torques(model, motion) - motion.tau
        measured = [np.sqrt(np.mean(error[rows[:, k], k] ** 2)) for k in range(6)]
        np.testing.assert_allclose(measured, expected, rtol=1e-6)


@pytest.mark.slow
def test_the_held_out_check_gives_back_what_the_fit_predicts_worse():
    """Given the true model (arm7 with its friction), the fit of noisy torques can only add estimation error: the
    check gives the given model's parameters back joint by joint until no joint's held-out torque is predicted
    worse; what it gave back is exactly the given model's."""
    from test_identification import sines_run

    model = load_urdf(rtctl.bundled_model_path("arm7"))
    model.damping[:], model.friction[:] = 0.3, 0.5
    given = inertial_parameters(model)
    t, q, tau = sines_run(model, given)
    tau = tau + np.random.default_rng(3).normal(scale=0.05, size=tau.shape)
    result = identify(model, t, q, tau)
    print(result.report())
    assert result.reverted and "the held-out check gave back" in result.warning()
    assert np.all(result.validation_after <= result.validation_before * (1 + 1e-9))
    labels = [f"{body}.{name}" for body in model.body_names for name in ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy",
                                                                         "Ixz", "Iyz", "Izz")]
    for j, label in enumerate(labels):
        if label in result.kept:
            assert result.parameters[j] == given[j], label
    for k, name in enumerate(result.joint_names):
        if f"{name}.F_v" in result.kept:
            assert (result.viscous[k], result.coulomb[k]) == (0.3, 0.5)


def test_a_base_parameters_relative_standard_deviation_is_the_noise_over_its_torque_contribution():
    """Two orthogonal regressor columns of |X_k| = 20 over 400 rows of one joint, torque noise of RMS 0.01 N m: an
    isolated base parameter's relative standard deviation is sigma / (|X_k| max(s_k, |beta_k|)), sigma^2 the
    residual's sum of squares over the degrees of freedom and s_k its plausible magnitude. Parameter 1 (s = 2e-4,
    truly 0: a torque contribution of 0.004 N m over the run, below the noise's 0.2) is at 2.5, above
    RELATIVE_STD_MAX: held at its given value 1e-4 and parameter 0 refitted alone (4 +- 1.25e-4 relative)."""
    rows = 400
    t = np.linspace(0.0, 2 * np.pi, rows, endpoint=False)
    X = np.column_stack([np.sin(t), np.cos(t)]) * np.sqrt(2.0)
    noise = np.random.default_rng(0).normal(size=rows)
    noise -= X @ np.linalg.lstsq(X, noise, rcond=None)[0]          # orthogonal to both columns
    noise *= 0.01 / np.sqrt(np.mean(noise ** 2))
    scales = np.array([0.2, 2e-4])
    essential = essential_parameters(X, X @ [4.0, 0.0] + noise, np.zeros(rows, dtype=int), np.array([3.0, 1e-4]),
                                     scales)
    print("relative standard deviations", essential.relative_std)
    assert essential.held == [1] and essential.identified == [0]
    np.testing.assert_allclose(essential.noise, 0.01, rtol=1e-12)
    sigma_both = 0.01 * np.sqrt(rows / (rows - 2))
    sigma_one = np.sqrt(rows * (0.01 ** 2 + 1e-4 ** 2) / (rows - 1))     # the residual holds X_1 (0 - 1e-4) now
    np.testing.assert_allclose(essential.relative_std[1], sigma_both / (20 * 2e-4), rtol=1e-6)   # the 1e-12 ridge
    assert essential.relative_std[1] > RELATIVE_STD_MAX
    np.testing.assert_allclose(essential.relative_std[0], sigma_one / (20 * 4.0), rtol=1e-9)
