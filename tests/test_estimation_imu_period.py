"""An estimator's noise per IMU reading follows from the IMU's own sample period, not the loop's.

A device that samples on its own clock (the mip backends: the message period, 1 / rate) gives readings that
are each its mean over that period, held by the loop's faster cycles in between: a reading's white-noise
variance is ``N^2 / T`` with ``T`` the device's period (IEEE Std 952-1997, Annex C: ``sigma(tau) = N / sqrt(tau)``),
which the slip gate's rate variance (PAR_RATE_NOISE) must be. With the loop's period instead it is 20 times too
large for a 500 Hz IMU under the seed biped's 10 kHz loop.
"""
from __future__ import annotations

import numpy as np
import pytest

from rtctl.config import build, bundled_config_path, read_toml, validate
from rtctl.hil.imu_noise import AxisErrors, SensorErrors
from rtctl.loops.estimation import invariant_ekf, leg_odometry


@pytest.mark.parametrize("backend, estimator, par", [
    ("mip_emulated", "invariant_ekf", invariant_ekf.PAR_RATE_NOISE),
    ("mip_emulated", "leg_odometry_kf", leg_odometry.PAR_RATE_NOISE),
    ("sim", "invariant_ekf", invariant_ekf.PAR_RATE_NOISE),
])
def test_a_readings_rate_variance_is_that_of_one_device_sample(backend, estimator, par):
    """The estimator built from the seed biped's emulated-IMU config (500 Hz device, 10 kHz loop), with its
    estimator swapped and, for ``sim``, its IMU the sim backend's (a sample per cycle): the rate variance it
    uses equals the measured variance of 20000 gyro samples the emulator's noise model draws at the IMU's
    period with the estimator's density, within 5 standard errors of a variance (sqrt(2 / n))."""
    path = bundled_config_path("legged_biped_emulated_imu")
    raw = read_toml(path)
    raw["estimator"]["type"] = estimator
    raw["sensors"][0]["backend"] = backend
    cfg = validate(raw, str(path))
    cfg["_dir"] = str(path.parent)
    loop = build(cfg)
    est, period = loop.estimator, 1.0 / cfg["loop"]["rate_hz"]
    device_period = 1.0 / 500.0 if backend == "mip_emulated" else period
    assert loop.sensors[0].backend == backend and est.imu_period == device_period and est.period == period
    density = est.options.gyro_noise_density
    errors = SensorErrors(AxisErrors(noise_density=density, bias_instability=0.0, initial_bias=0.0,
                                     resolution=0.0, range=np.inf), np.random.default_rng(5))
    n, out = 20000, np.zeros(3)
    samples = np.empty((n, 3))
    for k in range(n):
        errors.apply(np.zeros(3), device_period, out)
        samples[k] = out
    measured = samples.var(axis=0)
    assert np.all(np.abs(measured / est.par[par] - 1.0) < 5.0 * np.sqrt(2.0 / n)), (measured, est.par[par])
