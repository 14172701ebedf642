"""The bite force on the jaw robot, held against the therapist's limit, and the patient's impedance identified
online -- both from the momentum observer of :mod:`rtctl.plants.jaw.observer` (no force sensor).

* **Bite force**: the magnitude of the force the observer estimates on the moving platform (everything the
  mechanism model does not explain: the patient's tissue and muscles, a food bolus), N. Beyond
  ``force_limit`` the monitor latches the safety monitor's e-stop (the safe command until re-armed).
* **Patient impedance** (:class:`~rtctl.plants.jaw.model.PatientImpedance`: f = -K (x - x_rest) - D xd on
  each pose coordinate): recursive least squares with exponential forgetting (Ljung, "System
  Identification", 2nd ed., eqs. 11.65-11.66 with forgetting factor lambda), one 2-parameter problem per
  coordinate k, theta_k = [K_k, D_k], y = r_k (the observer's Euler-space residual), phi = -[x_k - x_rest_k,
  xd_k]. The residual is the true force through the observer's first-order filter (r' = K_O (f - r)); the
  regressor goes through the same discrete filter, so a constant theta fits filtered y and phi alike
  without lag bias.
* **Validity**: the estimate is published only where it means something. A food bolus is a force the
  model does not have (a Coulomb-like push while closing): fitted anyway, it turned the z stiffness to
  -1452 N/m at 1.5 s of chewing. Per coordinate, over a window of time constant ``fit_window``
  (exponential weights), the monitor keeps the a-priori prediction error e = y - theta^T phi (theta
  before the update), y, and the filtered regressor's second moments. The coordinate is *valid* when
  (1) the regression is persistently exciting -- the window has seen at least ``fit_window`` s since the
  start, its RMS rate is at least ``min_speed`` (m/s; ``min_angular_speed`` rad/s for the angles) and
  the two regressor columns are not nearly collinear (|correlation| <= 0.9) --, (2) the model fits:
  RMS(e) <= ``fit_tolerance`` RMS(y), and (3) K >= 0 and D >= 0. The published K and D are the RLS
  estimate while valid and the last valid one otherwise (zero before the first). The window needs some
  cycles to see a bolus; meanwhile a valid coordinate's sample with |e| > 3 ``fit_tolerance`` RMS(y)
  (the first bites) is not learnt from and ends the validity at once, counted as a window that does not
  fit (valid again after about ln 2 ``fit_window`` of samples that fit). Once invalid the RLS learns from
  every sample again (it would otherwise never follow a patient whose impedance truly changed), so it
  recovers when the bolus is gone. Telemetry flags each coordinate (``patient_impedance_valid/*``, 1 or 0).

* **Measured bite force** (``sensor``: a force-torque sensor in the mouthpiece, on the model's ``incisal`` or
  ``platform`` frame, :mod:`rtctl.plants.jaw.bite_sensor`): the sensor's force in the base frame, beside the
  estimate. Beyond ``force_limit`` it latches the safe state too, without the observer's lag; through that lag it
  is held against the estimate axis by axis, and a disagreement beyond ``disagreement_tolerance`` (N) for longer
  than ``disagreement_time`` latches the safe state with one line saying what is plausible (a broken sensor, a
  bias, a force on the robot beside the mouthpiece, a model error).

One :class:`BiteMonitor` is a loop hook (like :class:`rtctl.loops.collision.CollisionMonitor`), allocation-free
per cycle; telemetry (with units): the bite force, the limit trip flag, the published K and D and their validity;
with a sensor the measured bite force, the norm of the lagged measurement less the estimate, and a flag.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import setting
from rtctl.plants.stewart.observer import PlatformObserverHook

from .bite_sensor import AXES, MouthpieceSensor
from .observer import jaw_frames, jaw_observer

COORDINATES = ("x", "y", "z", "psi", "theta", "phi")
MAX_CORRELATION = 0.9            # of the two regressor columns over the window: beyond it K and D are not separable
FILLED = 1.0 - math.exp(-1.0)   # of the window's weight: at least fit_window s of data seen
OUTLIER = 3.0                    # x fit_tolerance x RMS(y): a valid coordinate's sample beyond it is not learnt from
# columns of the window statistics (per coordinate): error^2, y^2, phi_K^2, phi_K phi_D, phi_D^2, weight
W_EE, W_YY, W_00, W_01, W_11, W_N = range(6)


@njit(cache=True)
def rls_step(y, x, xd, x_rest, decay, forgetting, phi_prev, phi_f, theta, P, first,
             window, min_speed, fit_tolerance, stats, estimate, valid):
    """One RLS update per pose coordinate and its validity (module docstring); ``phi_prev`` (6, 2) the last raw
    regressor, ``phi_f`` (6, 2) the filtered one, ``theta`` (6, 2) [K, D], ``P`` (6, 2, 2) the covariance;
    ``window`` the statistics' decay per cycle, ``min_speed`` (6,), ``stats`` (6, 6) the window statistics,
    ``estimate`` (6, 2) the published [K, D], ``valid`` (6,) 1.0 or 0.0."""
    for k in range(6):
        p0, p1 = -(x[k] - x_rest[k]), -xd[k]
        if first:
            phi_f[k, 0], phi_f[k, 1] = 0.0, 0.0
            for c in range(6):
                stats[k, c] = 0.0
        else:
            a = decay[k]
            phi_f[k, 0] = a * phi_f[k, 0] + (1.0 - a) * 0.5 * (phi_prev[k, 0] + p0)
            phi_f[k, 1] = a * phi_f[k, 1] + (1.0 - a) * 0.5 * (phi_prev[k, 1] + p1)
        phi_prev[k, 0], phi_prev[k, 1] = p0, p1
        f0, f1 = phi_f[k, 0], phi_f[k, 1]
        st = stats[k]
        err = y[k] - (theta[k, 0] * f0 + theta[k, 1] * f1)
        bound = OUTLIER * fit_tolerance
        outlier = valid[k] > 0.0 and err * err * st[W_N] > bound * bound * st[W_YY]
        if not outlier:
            Pf0 = P[k, 0, 0] * f0 + P[k, 0, 1] * f1
            Pf1 = P[k, 1, 0] * f0 + P[k, 1, 1] * f1
            denom = forgetting + f0 * Pf0 + f1 * Pf1
            g0, g1 = Pf0 / denom, Pf1 / denom
            theta[k, 0] += g0 * err
            theta[k, 1] += g1 * err
            P00 = (P[k, 0, 0] - g0 * Pf0) / forgetting
            P01 = (P[k, 0, 1] - g0 * Pf1) / forgetting
            P11 = (P[k, 1, 1] - g1 * Pf1) / forgetting
            P[k, 0, 0], P[k, 0, 1], P[k, 1, 0], P[k, 1, 1] = P00, P01, P01, P11
        st[W_EE] = window * st[W_EE] + err * err
        st[W_YY] = window * st[W_YY] + y[k] * y[k]
        st[W_00] = window * st[W_00] + f0 * f0
        st[W_01] = window * st[W_01] + f0 * f1
        st[W_11] = window * st[W_11] + f1 * f1
        st[W_N] = window * st[W_N] + 1.0
        excited = (st[W_N] * (1.0 - window) >= FILLED and st[W_11] >= min_speed[k] * min_speed[k] * st[W_N]
                   and st[W_00] > 0.0
                   and st[W_01] * st[W_01] <= MAX_CORRELATION * MAX_CORRELATION * st[W_00] * st[W_11])
        if outlier:                 # counts as a window that does not fit: valid again after ~ln 2 fit_window of fits
            st[W_EE] = max(st[W_EE], 2.0 * fit_tolerance * fit_tolerance * st[W_YY])
        fits = st[W_EE] <= fit_tolerance * fit_tolerance * st[W_YY]
        if excited and fits and not outlier and theta[k, 0] >= 0.0 and theta[k, 1] >= 0.0:
            valid[k] = 1.0
            estimate[k, 0], estimate[k, 1] = theta[k, 0], theta[k, 1]
        else:
            valid[k] = 0.0


def _check_positive(value, name: str, unit: str) -> float:
    x = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"bite: {name} must be finite and > 0{unit}, got {value!r}")
    return x


def _check_limit(value, name: str) -> float:
    x = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"bite: {name} must be a finite force > 0 N, got {value!r}")
    return x


class BiteMonitor(PlatformObserverHook):
    """Bite force against the therapist's limit and the patient's impedance identified online (module
    docstring), over the jaw observer of ``mechanism`` (the controller's model)."""

    prefix = "jaw"

    @dataclass(frozen=True)
    class Options:
        """The ``[bite]`` section (SI units)."""

        enabled: bool = setting("bool", False)
        force_limit: float = setting("float", None, positive=True)   # N: beyond it, the safe state
        gain: float = setting("float", 50.0, positive=True)          # K_O (1/s)
        frame: str = setting("str", "incisal", choices=("incisal", "platform"))   # where the wrench is published
        forgetting: float = setting("float", 0.9995, low=0.9, high=1.0)   # RLS lambda (memory ~ 1/(1 - lambda) cycles)
        initial_covariance: float = setting("float", 1e6, positive=True)
        fit_window: float = setting("float", 0.5, positive=True)       # s: time constant of the validity statistics
        fit_tolerance: float = setting("float", 0.1, positive=True)    # RMS prediction error / RMS force, at most
        min_speed: float = setting("float", 5e-4, positive=True)       # m/s: least RMS rate of x, y, z to be valid
        min_angular_speed: float = setting("float", 5e-3, positive=True)   # rad/s: the same for psi, theta, phi
        sensor: str = setting("str", None)       # a force_torque [[sensors]] in the mouthpiece: measure the force too
        disagreement_tolerance: float = setting("float", None, positive=True)   # N per axis (0.1 force_limit)
        disagreement_time: float = setting("float", None, positive=True)        # s beyond it: a fault (0.1)
        tare_on_start: bool = setting("bool", None)   # the sensor reads zero at each run's second cycle (false)

    @classmethod
    def from_config(cls, options: dict, loop, mechanism):
        """Built from a validated ``[bite]`` table and attached to ``loop``; None when not ``enabled``."""
        if not options.get("enabled"):
            return None
        kwargs = {k: v for k, v in options.items() if k != "enabled" and v is not None}
        if "force_limit" not in kwargs:
            raise ValueError("[bite] force_limit is required when enabled (N, the therapist's limit on the bite force)")
        name = kwargs.get("sensor")
        if name is not None:
            sensors = {s.options.name: s for s in loop.sensors}
            if name not in sensors:
                raise ValueError(f"[bite] sensor: the robot has no sensor {name!r} (its sensors: {sorted(sensors)})")
            kwargs["sensor"] = sensors[name]
        try:
            monitor = cls(mechanism, loop.safety, loop.period, **kwargs)
        except ValueError as exc:
            raise ValueError(f"[bite] {str(exc).removeprefix('bite: ')}") from None
        return monitor.attach(loop)

    def __init__(self, mechanism, safety, dt: float, *, force_limit, gain=50.0, frame: str = "incisal",
                 forgetting: float = 0.9995, initial_covariance: float = 1e6, fit_window: float = 0.5,
                 fit_tolerance: float = 0.1, min_speed: float = 5e-4, min_angular_speed: float = 5e-3, sensor=None,
                 disagreement_tolerance=None, disagreement_time=None, tare_on_start=None):
        self.force_limit = _check_limit(force_limit, "force_limit")
        lam = float(forgetting) if isinstance(forgetting, (int, float)) else math.nan
        if not 0.0 < lam <= 1.0:
            raise ValueError(f"bite: forgetting must be in (0, 1], got {forgetting!r}")
        p0 = _check_positive(initial_covariance, "initial_covariance", "")
        window = _check_positive(fit_window, "fit_window", " s")
        self.fit_tolerance = _check_positive(fit_tolerance, "fit_tolerance", "")
        speeds = (_check_positive(min_speed, "min_speed", " m/s"),
                  _check_positive(min_angular_speed, "min_angular_speed", " rad/s"))
        super().__init__(jaw_observer(mechanism, gain, dt, frame))
        self.safety, self.forgetting, self.initial_covariance = safety, lam, p0
        self.window = math.exp(-float(dt) / window)
        self.min_speed = np.repeat(speeds, 3)
        self.x_rest = np.array(mechanism.rest_pose, dtype=float)
        self._estimate = np.zeros((6, 2))
        self.stiffness, self.damping = self._estimate[:, 0], self._estimate[:, 1]   # published (views)
        self.valid = np.zeros(6)
        self._theta, self._P = np.zeros((6, 2)), np.zeros((6, 2, 2))
        self._phi_prev, self._phi_f = np.zeros((6, 2)), np.zeros((6, 2))
        self._stats = np.zeros((6, 6))
        self._rls_first = True
        self.bite_force = 0.0
        self._peak = np.zeros(1)          # the peak bite force, N: held in place (no object kept per new peak)
        self.trips = 0
        self.telemetry_fields += (["bite_force", "bite_limit_tripped"]
                                  + [f"patient_stiffness/{c}" for c in COORDINATES]
                                  + [f"patient_damping/{c}" for c in COORDINATES]
                                  + [f"patient_impedance_valid/{c}" for c in COORDINATES])
        self.telemetry_units = (["N"] * 6 + ["N m"] * 3 + ["N"] * 3 + ["N", "1"] + ["N/m"] * 3 + ["N m/rad"] * 3
                                + ["N s/m"] * 3 + ["N m s/rad"] * 3 + ["1"] * 6)
        self.measurement = self._measurement(mechanism, sensor, disagreement_tolerance, disagreement_time,
                                             tare_on_start)
        self.telemetry_values = np.zeros(len(self.telemetry_fields))
        self.disagreements = 0
        self.reset_identification()

    def _measurement(self, mechanism, sensor, tolerance, duration, tare_on_start):
        """The sensor in the mouthpiece beside the observer (module docstring), or None without one."""
        if sensor is None:
            given = {"disagreement_tolerance": tolerance, "disagreement_time": duration, "tare_on_start": tare_on_start}
            unused = [k for k, v in given.items() if v is not None]
            if unused:
                raise ValueError(f"bite: {unused[0]} applies to a measured bite force; name the sensor with sensor")
            return None
        name = sensor.options.name
        if sensor.kind != "force_torque":
            raise ValueError(f"bite: sensor: sensor {name!r} is of kind {sensor.kind!r}, not 'force_torque'")
        frames = jaw_frames(mechanism)
        if sensor.options.frame not in frames or sensor.body != -1:
            raise ValueError(f"bite: sensor: sensor {name!r} is mounted on {sensor.options.frame!r}, not in the "
                             f"mouthpiece: mount it on one of the platform's frames {sorted(frames)}")
        tolerance = 0.1 * self.force_limit if tolerance is None else _check_limit(tolerance, "disagreement_tolerance")
        duration = 0.1 if duration is None else _check_positive(duration, "disagreement_time", " s")
        self.telemetry_fields += ["bite_force_measured", "bite_force_disagreement", "bite_sensor_disagrees"]
        self.telemetry_units += ["N", "N", "1"]
        return MouthpieceSensor(self.observer, sensor, tolerance=tolerance, duration=duration,
                                tare_on_start=bool(tare_on_start))

    @property
    def rls_estimate(self) -> np.ndarray:
        """The running RLS estimate [K, D] per coordinate (6, 2), valid or not (a view)."""
        return self._theta

    def reset_identification(self) -> None:
        """Start the identification again (theta = 0, P = initial_covariance I, nothing published as valid)."""
        self._theta[:] = 0.0
        self._P[:] = 0.0
        self._P[:, 0, 0] = self._P[:, 1, 1] = self.initial_covariance
        self._estimate[:] = 0.0
        self.valid[:] = 0.0
        self._rls_first = True

    def set_force_limit(self, value) -> None:
        self.force_limit = _check_limit(value, "force_limit")

    def attach(self, loop):
        loop.hooks.append(self)
        loop.bite = self
        return self

    def on_start(self) -> None:
        super().on_start()
        self._rls_first = True
        if self.measurement is not None:
            self.measurement.reset()

    def warm(self, cycle) -> None:
        """The observer's kernels and the identification's step, on copies (:mod:`rtctl.rt.warmup`); with a sensor
        its processing and comparison."""
        super().warm(cycle)
        if self.measurement is not None:
            self.measurement.warm(cycle.state.q)
        obs = self.observer
        rls_step(obs.residual.copy(), obs.x.copy(), obs.xd.copy(), self.x_rest, obs.decay, self.forgetting,
                 self._phi_prev.copy(), self._phi_f.copy(), self._theta.copy(), self._P.copy(), True, self.window,
                 self.min_speed, self.fit_tolerance, self._stats.copy(), self._estimate.copy(), self.valid.copy())

    @property
    def peak_bite_force(self) -> float:
        return float(self._peak[0])

    def __call__(self, cycle: int, t: float, state, command) -> None:
        obs = self.observer
        if not obs.update(state.q, state.v, state.effort):
            return
        self.publish()
        f = obs.platform_wrench
        self.bite_force = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
        if self.bite_force > self._peak[0]:
            self._peak[0] = self.bite_force
        rls_step(obs.residual, obs.x, obs.xd, self.x_rest, obs.decay, self.forgetting, self._phi_prev, self._phi_f,
                 self._theta, self._P, self._rls_first, self.window, self.min_speed, self.fit_tolerance, self._stats,
                 self._estimate, self.valid)
        self._rls_first = False
        values = self.telemetry_values
        values[12] = self.bite_force
        values[14:20] = self.stiffness
        values[20:26] = self.damping
        values[26:32] = self.valid
        measurement, split = self.measurement, -1
        if measurement is not None:
            split = measurement.update(state.q)
            values[32] = measurement.bite_force
            d = measurement.agreement.difference
            values[33] = math.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        if self.safety.tripped:
            return
        values[13] = 0.0
        if measurement is not None and measurement.comparing:
            values[34] = 0.0
            if measurement.bite_force > self.force_limit:
                self._trip(measurement.bite_force, f"measured by sensor '{measurement.name}'")
            elif split >= 0:
                self._disagree(split)
        if self.bite_force > self.force_limit and not self.safety.tripped:
            self._trip(self.bite_force, f"estimated at '{obs.frame}'")

    def _trip(self, force: float, how: str) -> None:
        """The slow path: the bite force is beyond the therapist's limit."""
        self.trips += 1
        self.telemetry_values[13] = 1.0
        self.safety.estop(f"bite force {force:.3g} N above the therapist's limit {self.force_limit:.3g} N ({how})")

    def _disagree(self, k: int) -> None:
        """The slow path: the sensor and the observer have disagreed on axis k of the force for longer than the
        tolerated time; latch the safe state."""
        measurement = self.measurement
        agreement = measurement.agreement
        self.disagreements += 1
        self.telemetry_values[34] = 1.0
        self.safety.estop(
            f"bite monitor: sensor '{measurement.name}' and the observer disagree on the force's {AXES[k]} axis for "
            f"more than {agreement.duration:g} s: measured {agreement.lagged[k]:.3g} N (through the observer's lag), "
            f"estimated {self.observer.platform_wrench[k]:.3g} N, tolerance {agreement.tolerance[k]:.3g} N; "
            + agreement.plausible_cause(measurement.estimate, unseen="a force on the robot beside the mouthpiece"))
