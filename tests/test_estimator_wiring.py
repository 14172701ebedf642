"""The ``[estimator]`` extension point in the loop (rtctl.rt.estimation): called after the reads and before the
controller, which sees its estimate and not the drivers' base; the drivers' base (a simulator's truth) kept
and published beside it; a latched fault is the safe state; its exception is a fault, never the loop's."""
import tomllib

import numpy as np
import pytest

from rtctl.config import ConfigError, bundled_config_path, build, validate
from rtctl.rt.estimation import StateEstimator


class Offset(StateEstimator):
    """A test estimator: the truth the loop kept, shifted by ``offset`` m in x; what the controller saw."""

    def __init__(self, loop_source, offset=0.25):
        super().__init__()
        self.source, self.offset, self.calls, self.seen_x = loop_source, offset, 0, []
        self.raise_at = self.fault_at = None
        self.telemetry_fields = ("estimate/x",)
        self.telemetry_values = np.zeros(1)

    def update(self, t, state):
        self.calls += 1
        if self.raise_at is not None and self.calls >= self.raise_at:
            raise FloatingPointError("covariance not positive definite")
        if self.fault_at is not None and self.calls >= self.fault_at:
            self.fault_reason = "estimator: normalised innovation 412 beyond its bound 37.6 (diverged)"
        state.q[0] = self.source.base_truth.q[0] + self.offset
        self.telemetry_values[0] = state.q[0]


def quadruped():
    raw = tomllib.loads(bundled_config_path("legged_quadruped").read_text())
    raw["loop"]["pace"] = False
    return build(validate(raw, "quadruped.toml"))


def with_estimator(loop, **settings):
    estimator = Offset(loop)
    for key, value in settings.items():
        setattr(estimator, key, value)
    loop.estimator = estimator
    return estimator


def test_the_controller_sees_the_estimate_and_the_truth_is_kept_beside_it():
    loop = quadruped()
    estimator = with_estimator(loop)
    seen = []
    loop.hooks.append(lambda cycle, t, state, command: seen.append(state.q[0]))   # runs after the controller
    plant = loop.drivers[0].plant
    truth = []
    for k in range(50):
        truth.append(plant.q[0])              # the state the next read measures
        loop.step(k * loop.period)
    assert estimator.calls == 50
    np.testing.assert_allclose(loop.base_truth.q[0], truth[-1], rtol=0, atol=0)
    np.testing.assert_allclose(seen, np.array(truth) + 0.25, rtol=0, atol=1e-15)


def test_the_truth_and_the_estimate_are_published_with_units():
    from rtctl.telemetry import Telemetry

    loop = quadruped()
    with_estimator(loop)
    telemetry = Telemetry(endpoint="tcp://127.0.0.1:0").attach(loop)
    names, units = telemetry.extra_names, telemetry.metadata()["fields"]["extra"]["unit"]
    assert "estimate/x" in names
    # the Euler-angle base: x, y, z (m) then three angles (rad); their rates
    at = names.index("truth/q/0")
    assert names[at:at + 12] == [f"truth/q/{k}" for k in range(6)] + [f"truth/v/{k}" for k in range(6)]
    assert units[at:at + 12] == ["m"] * 3 + ["rad"] * 3 + ["m/s"] * 3 + ["rad/s"] * 3


def test_a_latched_estimator_fault_is_the_safe_state():
    loop = quadruped()
    with_estimator(loop, fault_at=30)
    report = loop.run(cycles=100)
    assert report.tripped and "normalised innovation 412" in report.trip_reason
    assert report.trip_history[0][0] == 29            # the cycle it latched in


def test_an_estimator_that_raises_is_a_fault_and_the_loop_goes_on_safe():
    loop = quadruped()
    with_estimator(loop, raise_at=10)
    report = loop.run(cycles=60)
    assert report.cycles == 60 and report.tripped
    assert "estimator.update: FloatingPointError: covariance not positive definite" in report.trip_reason


def test_an_unknown_estimator_type_is_one_line_naming_the_file():
    raw = tomllib.loads(bundled_config_path("legged_quadruped").read_text())
    raw["estimator"] = {"type": "kalman_magic"}
    with pytest.raises(ConfigError) as err:
        validate(raw, "quadruped.toml")
    assert str(err.value).startswith("quadruped.toml: [estimator] type: unknown state estimator 'kalman_magic'")
    raw["estimator"] = {}
    with pytest.raises(ConfigError, match=r"quadruped.toml: \[estimator\]: needs 'type', one of "):
        validate(raw, "quadruped.toml")
