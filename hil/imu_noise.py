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
from numba import njit

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


# An AxisErrors as the compiled kernel takes it (errors_row): one row per sensor kind.
E_DENSITY, E_INSTABILITY, E_CORRELATION, E_WALK, E_RESOLUTION, E_RANGE = range(6)
# SensorErrors.state: turn-on bias, Gauss-Markov bias and random walk, one row each.
S_TURN_ON, S_GAUSS_MARKOV, S_RANDOM_WALK = range(3)
DRAWS = 9       # standard normal draws per triad and sample: white noise, Gauss-Markov, random walk


def errors_row(e: AxisErrors) -> np.ndarray:
    return np.array([e.noise_density, e.bias_instability, e.correlation_time, e.random_walk, e.resolution, e.range])


@njit(cache=True)
def apply_errors(truth, dt, e, state, draws, out):
    """``out`` (3) = the measurement over ``dt`` of the true ``truth`` (3, SI) with the errors ``e``
    (:func:`errors_row`), the bias ``state`` (3 x 3, rows :data:`S_TURN_ON` ...) advanced by one sample, from
    :data:`DRAWS` standard normal ``draws``."""
    white = e[E_DENSITY] / math.sqrt(dt)
    phi = math.exp(-dt / e[E_CORRELATION])
    markov = e[E_INSTABILITY] / GAUSS_MARKOV_ALLAN_PEAK * math.sqrt(1.0 - phi * phi)
    walk = e[E_WALK] * math.sqrt(dt)
    for k in range(3):
        state[S_GAUSS_MARKOV, k] = phi * state[S_GAUSS_MARKOV, k] + markov * draws[3 + k]
        state[S_RANDOM_WALK, k] += walk * draws[6 + k]
        y = truth[k] + state[S_TURN_ON, k] + state[S_GAUSS_MARKOV, k] + state[S_RANDOM_WALK, k] + white * draws[k]
        if e[E_RESOLUTION] > 0.0:
            y = np.rint(y / e[E_RESOLUTION]) * e[E_RESOLUTION]
        out[k] = min(max(y, -e[E_RANGE]), e[E_RANGE])


class SensorErrors:
    """The errors of a triad (3 axes) of one sensor kind; :meth:`apply` is one output sample."""

    def __init__(self, errors: AxisErrors, rng: np.random.Generator):
        self.e = errors
        self.rng = rng
        self.row = errors_row(errors)
        self.state = np.zeros((3, 3))
        if errors.initial_bias > 0:
            self.state[S_TURN_ON] = rng.normal(0.0, errors.initial_bias, 3)
        self.turn_on, self.gauss_markov, self.random_walk = self.state
        self._draws = np.zeros(DRAWS)

    def bias(self) -> np.ndarray:
        return self.turn_on + self.gauss_markov + self.random_walk

    def apply(self, truth, dt: float, out) -> None:
        """``out`` = the measurement over ``dt`` of the true ``truth`` (3 values, SI)."""
        self.rng.standard_normal(out=self._draws)
        apply_errors(truth, dt, self.row, self.state, self._draws, out)
