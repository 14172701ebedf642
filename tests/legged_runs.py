"""Whole runs of the seed biped's walk and quadruped's trot from their shipped configs, and the walking tests'
criteria on them (tests/test_legged_estimated.py, tests/test_legged_emulated_imu.py)."""
from __future__ import annotations

import tomllib

import numpy as np
import pytest

from rtctl.config import bundled_config_path, build, validate

DURATION = 2.0
SEED = {"planar_biped": "legged_biped", "spatial_quadruped": "legged_quadruped"}


def shipped_raw(name: str, duration: float = DURATION) -> tuple[dict, object]:
    """The shipped config ``name`` as a dict, cut to ``duration`` s and unpaced, and its path."""
    path = bundled_config_path(name)
    raw = tomllib.loads(path.read_text())
    raw["loop"].update(pace=False, duration=duration)
    raw["trajectory"]["duration"] = duration
    return raw, path


class Run:
    """A run of a config (``raw``, read from ``path``): the base (truth and what the controller saw) and the joints
    every 1 ms; ``hooks`` are the loop's too."""

    def __init__(self, raw, path, hooks=()):
        cfg = validate(raw, path.name)
        cfg["_dir"] = str(path.parent)
        self.loop = loop = build(cfg)
        nb = loop.model.n_base_dofs
        self.seen, self.truth, self.joints = [], [], []

        def record(cycle, t, state, command):
            if cycle % 10 == 0:
                self.seen.append(np.r_[state.q[:nb], state.v[:nb]])
                truth = (loop.base_truth.q, loop.base_truth.v) if loop.estimator else (state.q[:nb], state.v[:nb])
                self.truth.append(np.r_[truth])
                self.joints.append(state.q[nb:].copy())

        loop.hooks.extend((record, *hooks))
        self.report = loop.run(duration=raw["loop"]["duration"])
        self.seen, self.truth, self.joints = map(np.array, (self.seen, self.truth, self.joints))


def seed_run(robot_name):
    return Run(*shipped_raw(SEED[robot_name]))


def attitude(robot_name, base):
    """Roll and pitch (rad) of the quadruped's Euler chain (x, y, z, yaw, pitch, roll), the biped's pitch."""
    return base[:, [5, 4]] if robot_name == "spatial_quadruped" else base[:, [2]]


def stays_up(robot_name, run, seed):
    """The walking tests' criteria (tests/test_legged_walking.py) on the truth of ``run``, relative to ``seed``."""
    truth = run.truth
    if robot_name == "planar_biped":
        assert np.abs(truth[:, 1] - 0.96).max() < 5e-3
        assert np.abs(truth[:, 2]).max() < 0.02
    else:
        assert np.abs(truth[:, 2] - 0.5).max() < 0.01
        assert np.abs(truth[:, 3:6]).max() < 0.08
        assert np.abs(truth[:, 1]).max() < 0.03
    assert truth[-1, 0] - truth[0, 0] == pytest.approx(seed.truth[-1, 0] - seed.truth[0, 0], rel=0.02)


def estimate_errors(robot_name, run) -> tuple[np.ndarray, float]:
    """RMS of the estimate's error from the truth: roll and pitch (the biped's pitch) in degrees, and the
    velocity's norm (m/s) over the base's linear coordinates."""
    nb = run.loop.model.n_base_dofs
    error = run.seen - run.truth
    tilt_rms = np.degrees(np.sqrt(np.mean(attitude(robot_name, error) ** 2, axis=0)))
    linear = np.array([0, 1, 2] if nb == 6 else [0, 1])
    return tilt_rms, float(np.sqrt(np.mean(np.sum(error[:, nb + linear] ** 2, axis=1))))
