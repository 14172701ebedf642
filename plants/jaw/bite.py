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
  without lag bias. A food bolus in the band is a force the model does not have: it biases the fit
  while it acts.

One :class:`BiteMonitor` is a loop hook (like :class:`rtctl.loops.collision.CollisionMonitor`), allocation-free
per cycle; telemetry: the bite force, the limit trip flag, the identified K and D.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import setting
from rtctl.plants.stewart.observer import PlatformObserverHook

from .observer import jaw_observer

COORDINATES = ("x", "y", "z", "psi", "theta", "phi")


@njit(cache=True)
def rls_step(y, x, xd, x_rest, decay, forgetting, phi_prev, phi_f, theta, P, first):
    """One RLS update per pose coordinate (module docstring); ``phi_prev`` (6, 2) the last raw regressor,
    ``phi_f`` (6, 2) the filtered one, ``theta`` (6, 2) [K, D], ``P`` (6, 2, 2) the covariance."""
    for k in range(6):
        p0, p1 = -(x[k] - x_rest[k]), -xd[k]
        if first:
            phi_f[k, 0], phi_f[k, 1] = 0.0, 0.0
        else:
            a = decay[k]
            phi_f[k, 0] = a * phi_f[k, 0] + (1.0 - a) * 0.5 * (phi_prev[k, 0] + p0)
            phi_f[k, 1] = a * phi_f[k, 1] + (1.0 - a) * 0.5 * (phi_prev[k, 1] + p1)
        phi_prev[k, 0], phi_prev[k, 1] = p0, p1
        f0, f1 = phi_f[k, 0], phi_f[k, 1]
        Pf0 = P[k, 0, 0] * f0 + P[k, 0, 1] * f1
        Pf1 = P[k, 1, 0] * f0 + P[k, 1, 1] * f1
        denom = forgetting + f0 * Pf0 + f1 * Pf1
        g0, g1 = Pf0 / denom, Pf1 / denom
        err = y[k] - (theta[k, 0] * f0 + theta[k, 1] * f1)
        theta[k, 0] += g0 * err
        theta[k, 1] += g1 * err
        P00 = (P[k, 0, 0] - g0 * Pf0) / forgetting
        P01 = (P[k, 0, 1] - g0 * Pf1) / forgetting
        P11 = (P[k, 1, 1] - g1 * Pf1) / forgetting
        P[k, 0, 0], P[k, 0, 1], P[k, 1, 0], P[k, 1, 1] = P00, P01, P01, P11


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

    @classmethod
    def from_config(cls, options: dict, loop, mechanism):
        """Built from a validated ``[bite]`` table and attached to ``loop``; None when not ``enabled``."""
        if not options.get("enabled"):
            return None
        kwargs = {k: v for k, v in options.items() if k != "enabled" and v is not None}
        if "force_limit" not in kwargs:
            raise ValueError("[bite] force_limit is required when enabled (N, the therapist's limit on the bite force)")
        return cls(mechanism, loop.safety, loop.period, **kwargs).attach(loop)

    def __init__(self, mechanism, safety, dt: float, *, force_limit, gain=50.0, frame: str = "incisal",
                 forgetting: float = 0.9995, initial_covariance: float = 1e6):
        self.force_limit = _check_limit(force_limit, "force_limit")
        lam = float(forgetting) if isinstance(forgetting, (int, float)) else math.nan
        if not 0.0 < lam <= 1.0:
            raise ValueError(f"bite: forgetting must be in (0, 1], got {forgetting!r}")
        p0 = float(initial_covariance) if isinstance(initial_covariance, (int, float)) else math.nan
        if not (math.isfinite(p0) and p0 > 0):
            raise ValueError(f"bite: initial_covariance must be finite and > 0, got {initial_covariance!r}")
        super().__init__(jaw_observer(mechanism, gain, dt, frame))
        self.safety, self.forgetting, self.initial_covariance = safety, lam, p0
        self.x_rest = np.array(mechanism.rest_pose, dtype=float)
        self.stiffness, self.damping = np.zeros(6), np.zeros(6)
        self._theta, self._P = np.zeros((6, 2)), np.zeros((6, 2, 2))
        self._phi_prev, self._phi_f = np.zeros((6, 2)), np.zeros((6, 2))
        self._rls_first = True
        self.bite_force = 0.0
        self.peak_bite_force = 0.0
        self.trips = 0
        self.telemetry_fields += (["bite_force", "bite_limit_tripped"]
                                  + [f"patient_stiffness/{c}" for c in COORDINATES]
                                  + [f"patient_damping/{c}" for c in COORDINATES])
        self.telemetry_values = np.zeros(len(self.telemetry_fields))
        self.reset_identification()

    def reset_identification(self) -> None:
        """Start the identification again (theta = 0, P = initial_covariance I)."""
        self._theta[:] = 0.0
        self._P[:] = 0.0
        self._P[:, 0, 0] = self._P[:, 1, 1] = self.initial_covariance
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

    def __call__(self, cycle: int, t: float, state, command) -> None:
        obs = self.observer
        if not obs.update(state.q, state.v, state.effort):
            return
        self.publish()
        f = obs.platform_wrench
        self.bite_force = math.sqrt(f[0] * f[0] + f[1] * f[1] + f[2] * f[2])
        if self.bite_force > self.peak_bite_force:
            self.peak_bite_force = self.bite_force
        rls_step(obs.residual, obs.x, obs.xd, self.x_rest, obs.decay, self.forgetting, self._phi_prev, self._phi_f,
                 self._theta, self._P, self._rls_first)
        self._rls_first = False
        self.stiffness[:] = self._theta[:, 0]
        self.damping[:] = self._theta[:, 1]
        values = self.telemetry_values
        values[12] = self.bite_force
        values[14:20] = self.stiffness
        values[20:26] = self.damping
        if self.bite_force > self.force_limit and not self.safety.tripped:
            self.trips += 1
            values[13] = 1.0
            self.safety.estop(f"bite force {self.bite_force:.3g} N above the therapist's limit "
                              f"{self.force_limit:.3g} N (estimated at '{obs.frame}')")
        elif not self.safety.tripped:
            values[13] = 0.0
