"""An inertial sensor's errors as its datasheet states them, for the emulated MIP IMU (:mod:`hil.mip_imu`).

Per axis, each output sample (the average over one message period ``dt``) is

    y = clip(quantise(x + b0 + b_gm + b_rw + n), range)

* ``n``: white noise of density ``N`` (the datasheet's noise density; the angle / velocity random walk),
  standard deviation ``N / sqrt(dt)`` for a sample averaged over ``dt`` -- its Allan deviation at
  ``tau = dt`` is the same (IEEE Std 952-1997, Annex C: ``sigma(tau) = N / sqrt(tau)``);
* ``b0``: the turn-on bias, drawn once per power-on with the datasheet's initial bias error as its sigma;
* ``b_gm``: the bias instability as a first-order Gauss-Markov process of correlation time ``tau_c``, whose
  Allan deviation peaks at 0.437 of its sigma at ``tau = 1.89 tau_c`` (El-Sheimy, Hou & Niu, "Analysis and
  modeling of inertial sensors using Allan variance", IEEE Trans. Instrum. Meas. 57(1), 2008): sigma is the
  datasheet's bias instability / 0.437, so the emulated Allan floor is the datasheet's figure;
* ``b_rw``: a rate random walk of density ``K`` (0 unless given: the datasheets below state none);
* quantisation to the datasheet's resolution, then saturation at its range.

:data:`GX5_25` holds the figures of the LORD MicroStrain 3DM-GX5-25 AHRS datasheet (its specification
table: IMU sensor outputs), as the comments say; each is an option of the emulator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

G0 = 9.80665
DEG = math.pi / 180.0
GAUSS_MARKOV_ALLAN_PEAK = 0.437    # Allan deviation peak / sigma of a first-order Gauss-Markov process


@dataclass(frozen=True)
class AxisErrors:
    """One sensor's error figures, SI (accelerometer: m/s^2; gyroscope: rad/s)."""

    noise_density: float          # per sqrt(Hz)
    bias_instability: float       # the Allan deviation floor
    initial_bias: float           # sigma of the turn-on bias
    resolution: float
    range: float
    random_walk: float = 0.0      # per sqrt(s) of rate random walk
    correlation_time: float = 100.0   # s, of the Gauss-Markov bias


@dataclass(frozen=True)
class ImuDatasheet:
    name: str
    accel: AxisErrors
    gyro: AxisErrors
    latency: float                # s from sampling to the packet leaving the device

    def replace(self, **changes) -> "ImuDatasheet":
        return replace(self, **changes)


# LORD MicroStrain 3DM-GX5-25 datasheet, "Specifications", IMU sensor outputs (standard +-8 g / +-300 deg/s
# sensors): accelerometer noise density 100 ug/sqrt(Hz), bias instability +-0.04 mg, initial bias error
# +-0.002 g, resolution < 0.1 mg, range +-8 g; gyroscope noise density 0.005 deg/s/sqrt(Hz), bias
# instability 8 deg/h, initial bias error +-0.04 deg/s, resolution < 0.008 deg/s, range +-300 deg/s;
# IMU data latency < 1 ms (taken as 1 ms).
GX5_25 = ImuDatasheet(
    name="3DM-GX5-25",
    accel=AxisErrors(noise_density=100e-6 * G0, bias_instability=0.04e-3 * G0, initial_bias=0.002 * G0,
                     resolution=0.1e-3 * G0, range=8.0 * G0),
    gyro=AxisErrors(noise_density=0.005 * DEG, bias_instability=8.0 * DEG / 3600.0, initial_bias=0.04 * DEG,
                    resolution=0.008 * DEG, range=300.0 * DEG),
    latency=1e-3,
)


class SensorErrors:
    """The errors of a triad (3 axes) of one sensor kind; :meth:`apply` is one output sample."""

    def __init__(self, errors: AxisErrors, rng: np.random.Generator):
        self.e = errors
        self.rng = rng
        self.turn_on = rng.normal(0.0, errors.initial_bias, 3) if errors.initial_bias > 0 else np.zeros(3)
        self.gauss_markov = np.zeros(3)
        self.random_walk = np.zeros(3)
        self._noise = np.zeros(3)

    def bias(self) -> np.ndarray:
        return self.turn_on + self.gauss_markov + self.random_walk

    def apply(self, truth, dt: float, out) -> None:
        """``out`` = the measurement over ``dt`` of the true ``truth`` (3 values, SI)."""
        e, rng = self.e, self.rng
        if e.bias_instability > 0:
            sigma = e.bias_instability / GAUSS_MARKOV_ALLAN_PEAK
            phi = math.exp(-dt / e.correlation_time)
            self.gauss_markov *= phi
            self.gauss_markov += rng.normal(0.0, sigma * math.sqrt(1.0 - phi * phi), 3)
        if e.random_walk > 0:
            self.random_walk += rng.normal(0.0, e.random_walk * math.sqrt(dt), 3)
        rng.standard_normal(out=self._noise)
        np.multiply(self._noise, e.noise_density / math.sqrt(dt), out=out)
        out += truth
        out += self.turn_on
        out += self.gauss_markov
        out += self.random_walk
        if e.resolution > 0:
            np.divide(out, e.resolution, out=out)
            np.round(out, out=out)
            out *= e.resolution
        np.clip(out, -e.range, e.range, out=out)
