"""Excitation trajectories for identification: finite Fourier series optimised for the regressor's condition.

Each joint follows a finite Fourier series of fundamental ``omega_f = 2 pi frequency`` and ``L`` harmonics
(Swevers, Ganseman, Tukel, De Schutter & Van Brussel, IEEE TRA 1997, eq. 21)::

    q_j(t) = q_j0 + sum_l  a_jl / (omega_f l) sin(omega_f l t) - b_jl / (omega_f l) cos(omega_f l t)

periodic with period ``1 / frequency``, so the run can be averaged over periods and its velocity and
acceleration are known in closed form. Three linear constraints per joint make every period start and
end at rest at ``q_j0`` (the plant's initial position): ``sum_l a_jl = 0`` (velocity), ``sum_l l b_jl = 0``
(acceleration) and ``sum_l b_jl / l = 0`` (position); the coefficients are those of a null-space basis
of these constraints. Each joint's series is scaled to the largest size that keeps it inside its position
range (a joint without position limits, a continuous one: within ``unlimited_range`` of its start), velocity
limit and acceleration limit (the constraints of Swevers et al., eq. 23), so every candidate is feasible.
The free coefficients minimise the condition number of the stacked base regressor with the friction columns
(eq. 22) over one period, by L-BFGS from a seeded random start. After ``periods`` periods the trajectory
holds ``q_0``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

from rtctl.dynamics.regressor import BaseParameters, JointTorqueRegressor
from rtctl.options import setting
from rtctl.rt.interfaces import actuated_indices

from .trajectories import (_OK, _CompiledTrajectory, _array, _check_out, _joint_entry, _joint_values, _owner,
                           _scalar, _where)

__all__ = ["ExcitationTrajectory", "fourier_series", "regressor_condition"]

PEAK_SAMPLES = 2000    # per period, where the limits are checked (a series of <= 40 harmonics is smooth on it)
SMOOTH_SAMPLES = 400   # per period, for the optimiser's smooth peaks
_V = "float64[::1]"
_SIG_FOURIER = f"int64(float64, float64, float64, {_V}, float64[:, ::1], float64[:, ::1], {_V}, {_V}, {_V})"


@njit(_SIG_FOURIER, cache=True)
def _fourier_sample(t, omega, duration, center, a, b, q, qd, qdd):
    """The series of the module docstring at ``t`` (rest at ``center`` outside [0, duration]); a, b: (n, L)."""
    n, harmonics = a.shape
    status = _check_out(n, t, q, qd, qdd)
    if status != _OK:
        return status
    inside = 0.0 <= t <= duration
    for j in range(n):
        q[j], qd[j], qdd[j] = center[j], 0.0, 0.0
        if not inside:
            continue
        for k in range(harmonics):
            w = omega * (k + 1)
            s, c = math.sin(w * t), math.cos(w * t)
            q[j] += (a[j, k] * s - b[j, k] * c) / w
            qd[j] += a[j, k] * c + b[j, k] * s
            qdd[j] += w * (b[j, k] * c - a[j, k] * s)
    return _OK


def fourier_series(t, omega, center, a, b):
    """(q, qd, qdd) of the series at the times ``t`` (vector), each (len(t), n): the vectorised kernel."""
    t = np.asarray(t, dtype=float)[:, None, None]
    w = omega * np.arange(1, a.shape[1] + 1)[None, None, :]
    s, c = np.sin(w * t), np.cos(w * t)
    q = center + np.sum((a * s - b * c) / w, axis=2)
    qd = np.sum(a * c + b * s, axis=2)
    qdd = np.sum(w * (b * c - a * s), axis=2)
    return q, qd, qdd


def _rest_constraints_basis(harmonics: int) -> np.ndarray:
    """Orthonormal basis (2L x 2L-3) of the coefficients [a; b] of one joint with zero velocity,
    acceleration and position offset at t = 0."""
    from scipy.linalg import null_space

    ell = np.arange(1, harmonics + 1, dtype=float)
    zeros = np.zeros(harmonics)
    constraints = np.array([np.r_[np.ones(harmonics), zeros], np.r_[zeros, ell], np.r_[zeros, 1.0 / ell]])
    return null_space(constraints)


def regressor_condition(regressor: JointTorqueRegressor, base: BaseParameters, q, qd, qdd, q_index,
                        coulomb_width=None) -> float:
    """Condition number of the stacked base regressor with viscous and Coulomb friction columns at the
    samples (q, qd, qdd of the actuated joints, one row per sample). The Coulomb columns are sign(qd), or
    tanh(qd / coulomb_width) (per joint) to keep the condition a smooth function of the motion."""
    model = regressor.model
    n = len(q_index)
    full_q = np.tile(model.neutral_configuration(), (q.shape[0], 1))
    full_q[:, q_index] = q
    Y = regressor.stacked(full_q, qd, qdd)[:, base.independent]
    friction = np.zeros((Y.shape[0], 2 * n))
    rows = np.arange(q.shape[0]) * model.nv
    for j in range(n):
        friction[rows + j, j] = qd[:, j]
        friction[rows + j, n + j] = (np.sign(qd[:, j]) if coulomb_width is None
                                     else np.tanh(qd[:, j] / coulomb_width[j]))
    return float(np.linalg.cond(np.hstack([Y, friction])))


class ExcitationTrajectory(_CompiledTrajectory):
    """A periodic excitation for identification (module docstring): ``n`` joints, period ``1 / frequency``.

    ``start`` (n) is where each period starts and ends at rest; ``lower``/``upper`` (n) the position range,
    ``velocity_limit``/``acceleration_limit`` (n) the bounds every joint's series is scaled into;
    ``coefficients`` (n, 2L): each joint's ``[a_1..a_L, b_1..b_L]`` before scaling (the constraints of the
    module docstring are imposed by projection). ``duration = periods / frequency``. ``joint_names``: the
    actuated joints' names, which errors then name (a config's); without them errors name the class and index.
    """

    _kernel = staticmethod(_fourier_sample)

    @dataclass(frozen=True)
    class Options:
        frequency: float = setting("float", 0.1, low=1e-3, high=10.0)     # Hz: the fundamental, 1 / period
        harmonics: int = setting("int", 5, low=3, high=40)                # L
        periods: int = setting("int", 1, low=1)
        acceleration_limit: object = setting("floats", None, positive=True, required=True)   # rad/s^2 (m/s^2)
        velocity_limit: object = setting("floats", None, positive=True)    # default: the model's limits
        position_margin: float = setting("float", 0.1, low=0.0)           # rad (m) inside the hard limits
        unlimited_range: float = setting("float", math.pi, positive=True)  # rad (m) about the start, unlimited joints
        optimise: bool = setting("bool", True)                              # minimise the condition number
        iterations: int = setting("int", 30, low=1, high=10_000)          # L-BFGS iterations
        samples: int = setting("int", 80, low=10, high=10_000)            # per period, for the condition
        seed: int = setting("int", 0, low=0)                                # the random start

    @classmethod
    def from_config(cls, options: dict, context) -> "ExcitationTrajectory":
        """Over the controller's model from the plant's initial position, inside the hard limits less
        ``position_margin`` (a joint without a limit, continuous: within ``unlimited_range`` of its start) and
        the model's velocity limits (or ``velocity_limit``)."""
        model = context.model
        q_index, v_index, names = actuated_indices(model)
        start = context.q0[q_index]
        lower, upper = cls.position_range(start, model.lower[q_index], model.upper[q_index],
                                          options["position_margin"], options["unlimited_range"])
        velocity = (context.vector(options["velocity_limit"], "velocity_limit") if options["velocity_limit"]
                    is not None else model.velocity_limit[v_index])
        for k, name in enumerate(names):
            if not lower[k] < start[k] < upper[k]:
                raise ValueError(f"joint '{name}': the initial position {start[k]:.6g} is not inside its limits "
                                 f"less position_margin [{lower[k]:.6g}, {upper[k]:.6g}]")
            if not np.isfinite(velocity[k]):
                raise ValueError(f"joint '{name}' has no velocity limit in the model: give velocity_limit")
        acceleration = context.vector(options["acceleration_limit"], "acceleration_limit")
        rng = np.random.default_rng(options["seed"])
        coefficients = rng.normal(size=(len(names), 2 * options["harmonics"]))
        trajectory = cls(start, lower, upper, velocity, acceleration, options["frequency"], coefficients,
                         options["periods"], joint_names=names)
        if options["optimise"]:
            trajectory.optimise(JointTorqueRegressor(model), q_index, options["iterations"], options["samples"])
        return trajectory

    @staticmethod
    def position_range(start, lower, upper, margin: float, unlimited: float):
        """(lower, upper): the hard limits less ``margin``; a side without a limit (a continuous joint's) at
        ``unlimited`` from ``start``."""
        start, lower, upper = (np.asarray(x, dtype=float) for x in (start, lower, upper))
        return (np.where(np.isfinite(lower), lower + margin, start - unlimited),
                np.where(np.isfinite(upper), upper - margin, start + unlimited))

    def __init__(self, start, lower, upper, velocity_limit, acceleration_limit, frequency: float, coefficients,
                 periods: int = 1, joint_names=None):
        cls = _owner(self, joint_names)
        self.start = _array(cls, "start", start, 1, joints=joint_names)
        self.n = n = self.start.shape[0]
        for name, value in (("lower", lower), ("upper", upper), ("velocity_limit", velocity_limit),
                            ("acceleration_limit", acceleration_limit)):
            setattr(self, name, _array(cls, name, value, 1, n, allow_scalar_for=n, joints=joint_names))
        for name in ("velocity_limit", "acceleration_limit"):
            _joint_values(cls, name, getattr(self, name), joint_names, lambda x: x > 0, "must be > 0")
        inside = (self.lower < self.start) & (self.start < self.upper)
        if not inside.all():
            k = int(np.flatnonzero(~inside)[0])
            raise ValueError(f"{_joint_entry(cls, 'start', k, joint_names)} is {self.start[k]:.6g}, not strictly "
                             f"inside [lower, upper] = [{self.lower[k]:.6g}, {self.upper[k]:.6g}]")
        self.frequency = _scalar(cls, "frequency", frequency, positive=True)
        self.omega = 2.0 * math.pi * self.frequency
        coefficients = _array(cls, "coefficients", coefficients, 2, n, joints=joint_names)
        if coefficients.shape[1] % 2 or coefficients.shape[1] < 6:
            raise ValueError(f"{_where(cls, 'coefficients')} must have 2 L columns (a_1..a_L, b_1..b_L), "
                             f"L >= 3, per joint; got {coefficients.shape[1]}")
        self.harmonics = coefficients.shape[1] // 2
        self.periods = int(periods)
        if self.periods < 1:
            raise ValueError(f"{_where(cls, 'periods')} must be >= 1, got {periods!r}")
        self.duration = self.periods / self.frequency
        self._basis = _rest_constraints_basis(self.harmonics)
        self._a = np.zeros((n, self.harmonics))
        self._b = np.zeros((n, self.harmonics))
        self._args = (self.omega, self.duration, self.start, self._a, self._b)
        self.set_free_coefficients(coefficients @ self._basis)

    def set_free_coefficients(self, z, smooth: bool = False) -> None:
        """Set the series from free coefficients ``z`` (n x 2L-3, along the constraint basis), each joint
        scaled to the largest series within its position range, velocity and acceleration limits.

        ``smooth``: the peaks are taken as 16-norms over the samples (just below the true maxima), which
        makes the scale a smooth function of ``z`` for the optimiser."""
        raw = np.asarray(z, dtype=float).reshape(self.n, -1) @ self._basis.T
        a, b = raw[:, :self.harmonics], raw[:, self.harmonics:]
        t = np.linspace(0.0, 1.0 / self.frequency, SMOOTH_SAMPLES if smooth else PEAK_SAMPLES, endpoint=False)
        q, qd, qdd = fourier_series(t, self.omega, self.start, a, b)
        offset = q - self.start
        if smooth:
            def peak(x):
                return np.mean(np.abs(x) ** 16, axis=0) ** (1 / 16)
        else:
            def peak(x):
                return np.max(np.abs(x), axis=0)
        tiny = 1e-300
        scale = np.min([(self.upper - self.start) / (peak(offset.clip(0.0)) + tiny),
                        (self.start - self.lower) / (peak(offset.clip(None, 0.0)) + tiny),
                        self.velocity_limit / (peak(qd) + tiny),
                        self.acceleration_limit / (peak(qdd) + tiny)], axis=0)
        self._a[:] = a * scale[:, None]
        self._b[:] = b * scale[:, None]

    @threadpool_limits.wrap(limits=1, user_api="blas")
    def optimise(self, regressor: JointTorqueRegressor, q_index, iterations: int = 30, samples: int = 80) -> float:
        """Minimise the condition number of the base regressor with friction columns over one period
        (Swevers et al. eq. 22) in the free coefficients, from the current ones; returns the condition."""
        from scipy.optimize import minimize

        model = regressor.model
        q_index = np.asarray(q_index)
        rng = np.random.default_rng(1)
        random_q = np.array([model.random_configuration(rng) for _ in range(40)])
        base = BaseParameters(regressor.stacked(random_q, rng.normal(size=(40, model.nv)),
                                                rng.normal(size=(40, model.nv))))
        t = np.linspace(0.0, 1.0 / self.frequency, samples, endpoint=False)

        def cost(z):
            self.set_free_coefficients(z, smooth=True)
            q, qd, qdd = fourier_series(t, self.omega, self.start, self._a, self._b)
            return math.log(regressor_condition(regressor, base, q, qd, qdd, q_index,
                                                coulomb_width=0.05 * self.velocity_limit))

        z0 = np.hstack([self._a, self._b]) @ self._basis
        result = minimize(cost, z0.ravel(), method="L-BFGS-B", options={"maxiter": iterations})
        self.set_free_coefficients(result.x)
        q, qd, qdd = fourier_series(t, self.omega, self.start, self._a, self._b)
        self.condition = regressor_condition(regressor, base, q, qd, qdd, q_index)
        return self.condition

    def peaks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(lowest q, highest q, largest |qd|, largest |qdd|) per joint over a period."""
        t = np.linspace(0.0, 1.0 / self.frequency, PEAK_SAMPLES, endpoint=False)
        q, qd, qdd = fourier_series(t, self.omega, self.start, self._a, self._b)
        return q.min(axis=0), q.max(axis=0), np.abs(qd).max(axis=0), np.abs(qdd).max(axis=0)

    def limit_violation(self, safety) -> str:
        """The lowest and highest positions inside the soft limits, the peak velocity and acceleration
        within the monitor's bounds."""
        low, high, velocity, acceleration = self.peaks()
        rounding = 1.0 + 1e-12        # a series scaled onto a bound reaches it to within a few ulps
        for what, q in (("[trajectory] excitation lowest position", low),
                        ("[trajectory] excitation highest position", high)):
            problem = safety.position_violation(q, what)
            if problem:
                return problem
        for k, name in enumerate(safety.joint_names):
            if velocity[k] > safety.velocity_bound[k] * rounding:
                return (f"[trajectory] excitation: joint '{name}' peaks at {velocity[k]:.4g} (rad/s or m/s), above "
                        f"its velocity bound {safety.velocity_bound[k]:.4g}")
            if acceleration[k] > safety.acceleration_limit[k] * rounding:
                return (f"[trajectory] excitation: joint '{name}' peaks at an acceleration of {acceleration[k]:.4g}, "
                        f"above its limit {safety.acceleration_limit[k]:.4g}")
        return ""

    def __repr__(self):
        return f"ExcitationTrajectory(n={self.n}, frequency={self.frequency} Hz, harmonics={self.harmonics})"


