"""Helpers of the identification tests: a consistently perturbed robot, a run recorded as `rtctl record` does,
example-robot-data's robots."""
from __future__ import annotations

import importlib.metadata
import threading
import time

import numpy as np
import pytest

from rtctl.dynamics.regressor import inertial_parameters, model_with_inertial_parameters
from rtctl.telemetry.recording import record


def perturbed(model, rng, spread=0.3):
    """Every body's mass times 1 + u, its centre of mass moved by u |c| per axis and its mass distribution's
    second moments Sigma scaled along its axes, u uniform in [-spread, spread]: a consistent rigid body."""
    pi = inertial_parameters(model)
    for i in range(model.nbodies):
        m, c, inertia = model.mass[i], model.com[i], model.inertia_com[i]
        sigma = 0.5 * np.trace(inertia) * np.eye(3) - inertia
        m2 = m * (1 + rng.uniform(-spread, spread))
        c2 = c + rng.uniform(-spread, spread, 3) * np.abs(c)
        stretch = np.diag(np.sqrt(1 + rng.uniform(-spread, spread, 3)))
        sigma2 = m2 / m * stretch @ sigma @ stretch
        inertia2 = np.trace(sigma2) * np.eye(3) - sigma2 + m2 * (c2 @ c2 * np.eye(3) - np.outer(c2, c2))
        pi[10 * i:10 * i + 10] = [m2, *(m2 * c2), inertia2[0, 0], inertia2[0, 1], inertia2[1, 1], inertia2[0, 2],
                                  inertia2[1, 2], inertia2[2, 2]]
    return model_with_inertial_parameters(model, pi)


def recorded_run(loop, path, duration):
    """Run ``loop`` for ``duration`` s with its telemetry recorded into the MCAP file ``path``."""
    cycles = int(round(duration * loop.rate_hz))
    tel = loop.telemetry
    result = {}
    recorder = threading.Thread(target=lambda: result.update(record(tel.endpoint, str(path), samples=cycles,
                                                                    idle_timeout=5.0, progress=False)))
    try:
        recorder.start()
        time.sleep(0.6)  # PUB/SUB slow joiner: let the recorder subscribe before the first sample
        loop.run(cycles=cycles)
        recorder.join(30)
    finally:
        tel.close()
    assert result["samples"] == cycles and result["lost"] == 0, result
    return path


def example_robot_data(relative: str) -> str:
    """The path of example-robot-data's robots/``relative``; the test skips without it (a test extra)."""
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = [f.locate() for f in files if str(f).replace("\\", "/").endswith("example-robot-data/robots/" + relative)]
    if not found:
        pytest.skip(f"example-robot-data (a test extra) has no {relative}")
    return str(found[0])
