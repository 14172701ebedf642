"""Identification of a robot's inertial parameters and joint friction from a recorded run.

``rtctl identify RECORDING.mcap --model ROBOT.urdf`` (:func:`identify_command`) reads what a real robot
records -- the measured joint positions ``q`` and the commanded joint torques ``effort_cmd`` of every
cycle (:mod:`rtctl.telemetry.tools`) -- and fits, for a fixed-base model,

    tau = Y(q, qd, qdd) pi + diag(qd) F_v + diag(sign qd) F_c,

``Y`` the joint-torque regressor (:mod:`rtctl.dynamics.regressor`, 10 parameters per body), ``F_v`` and
``F_c`` each joint's viscous and Coulomb friction. The steps:

1. **Signals** (:func:`motion_from_samples`). ``q`` and ``tau`` pass the same zero-phase Butterworth
   filter (forward and backward, so no lag; the same on both sides keeps the equation consistent,
   Gautier's parallel filtering); ``qd`` and ``qdd`` are central differences of the filtered ``q``. The
   Coulomb column ``sign(qd)``, a step at each reversal that the filter smooths in ``tau``, is taken
   from a lightly filtered velocity and then passes the same filter. A
   torque commanded at cycle k acts from sample k to k + 1, so the torque at sample k is the mean of
   the commands of cycles k - 1 and k. The filter's start-up at both ends is dropped and the rest
   decimated to about eight samples per period of the cut-off.
2. **Base parameters** (:class:`~rtctl.dynamics.regressor.BaseParameters`): QR with column pivoting of
   the stacked regressor and friction columns of the run. A parameter direction the model has but the
   run does not excite -- a joint that hardly moved, too few samples -- is refused with one line naming
   the parameters and the joints.
3. **Weighted least squares** on the base parameters, each joint's rows weighted by the inverse of its
   residual standard deviation after ordinary least squares (Gautier & Poignet, 2001).
4. **Physical consistency**: the full parameters are fitted to the same weighted residual plus a small
   pull towards the model's own parameters (which settles the directions the run cannot see) with every
   body's 4 x 4 pseudo-inertia positive definite (the LMI of Wensing, Kim & Slotine, RA-L 2018, eq. 9)
   and friction >= 0: each body parameterised by the log-Cholesky factor of its pseudo-inertia (Rucker &
   Wensing, RA-L 2022, eq. 10), friction by square roots. The factor's diagonal (the body's RMS extent
   along each axis given the others, m) is held above MIN_THICKNESS: a fit pressed against the constraint
   otherwise ends on a flat body whose pseudo-inertia is singular to round-off (its smallest eigenvalue
   came out -3e-17 on the arm), no longer strictly positive definite.

The result (:class:`Identification`) carries the identified model (a URDF with the parameters and the
friction as ``<dynamics damping friction>``, which the ``rigid_body`` plant and the ``computed_torque``
controller's ``friction_compensation`` read), the condition number, the per-joint torque-prediction
RMS before and after, and the parameters the run could not identify.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from rtctl.dynamics import Dynamics
from rtctl.dynamics.regressor import (PARAMETERS_PER_BODY, BaseParameters, JointTorqueRegressor,
                                      inertial_parameters, model_with_inertial_parameters)
from rtctl.model import Model
from rtctl.rt.interfaces import actuated_indices

__all__ = ["Identification", "IdentificationError", "Motion", "identify", "identify_command", "motion_from_samples",
           "plot_prediction", "predicted_torques", "read_run", "torque_rms"]

DEFAULT_CUTOFF_HZ = 5.0          # well above the harmonics of an excitation (<= 2 Hz), far below a 1 kHz loop
PRIOR_WEIGHT = 1e-3              # pull towards the model's parameters, relative to the data's mean information
WEAK_MOTION = 1e-3               # rad or m: a joint that moved less than this excites nothing
DIRECTION_CUTOFF_RATIO = 4.0     # the velocity whose sign is the Coulomb column: 4x the cut-off
MOVING_FRACTION = 0.1            # of a joint's RMS velocity: below it the joint is taken to be at rest
ROUND_OFF = 1e-12                # of the largest regressor column: a column this small is round-off
BASE_TOLERANCE = 1e-6            # R's diagonal below this times its largest: a direction the run does not see
MAX_EVALUATIONS = 100            # of the consistent fit's residual, when the free minimum is not consistent
EFFORT_MARGIN = 10.0              # a commanded torque beyond this times the effort limit: not this robot's run
MIN_THICKNESS = 1e-4             # m: least RMS extent of a body's mass along each axis (a 0.35 mm plate)


class IdentificationError(ValueError):
    """A recording or model identification cannot use; the message names what is wrong."""


@dataclass
class Motion:
    """Filtered samples of the actuated joints: time (N,), q, qd, qdd, tau and the filtered direction of motion
    ``direction`` (the Coulomb friction's regressor column, filtered like tau), each (N, n)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    direction: np.ndarray


@dataclass
class Identification:
    """What :func:`identify` found (SI units; torques N m or N)."""

    model: Model                       # the identified model: parameters and <dynamics damping friction>
    parameters: np.ndarray             # pi, 10 per body (rtctl.dynamics.regressor order)
    viscous: np.ndarray                # per actuated joint, N m s/rad (N s/m)
    coulomb: np.ndarray                # per actuated joint, N m (N)
    condition: float                   # of the weighted base regressor with the friction columns, unit columns
    base_rank: int
    rms_before: np.ndarray             # per joint: the given model's torque prediction error on the run
    rms_after: np.ndarray
    rms_torque: np.ndarray             # per joint: RMS of the measured torque
    joint_names: list
    unexcited: list = field(default_factory=list)      # parameters with no effect on the run's torques
    combined: list = field(default_factory=list)       # identifiable only in combination with others
    samples: int = 0
    constrained: list = field(default_factory=list)    # bodies whose unconstrained fit no rigid body has

    def report(self) -> str:
        """The identification report as text."""
        lines = [(f"identified model '{self.model.name}' from {self.samples} samples: {self.base_rank} base "
                  f"parameters (inertial and friction), condition number {self.condition:.4g} (unit columns)"),
                 f"{'joint':<16}{'RMS tau (N m)':>14}{'before':>10}{'after':>10}{'F_v':>10}{'F_c':>10}"]
        for k, name in enumerate(self.joint_names):
            lines.append(f"{name:<16}{self.rms_torque[k]:>14.4g}{self.rms_before[k] / self.rms_torque[k]:>10.2%}"
                         f"{self.rms_after[k] / self.rms_torque[k]:>10.2%}{self.viscous[k]:>10.4g}"
                         f"{self.coulomb[k]:>10.4g}")
        total = np.sqrt(np.mean(self.rms_torque ** 2))
        lines.append(f"{'all joints':<16}{total:>14.4g}{np.sqrt(np.mean(self.rms_before ** 2)) / total:>10.2%}"
                     f"{np.sqrt(np.mean(self.rms_after ** 2)) / total:>10.2%}")
        lines.append("(before/after: RMS torque-prediction error of the given and the identified model, "
                     "relative to the joint's RMS torque, over the samples where the joint moves)")
        lines.append(f"not identifiable (no effect on this run's torques, kept from the given model): "
                     f"{', '.join(self.unexcited) or 'none'}")
        lines.append(f"identifiable only in combination with others (split as the given model suggests): "
                     f"{', '.join(self.combined) or 'none'}")
        lines.append(f"physical consistency enforced (the unconstrained fit was no rigid body) on: "
                     f"{', '.join(self.constrained) or 'none'}")
        return "\n".join(lines)


# -- the recording --------------------------------------------------------------------------------------------
def read_run(path, model: Model):
    """``(t, q, tau)`` of the model's actuated joints from an MCAP recording (``rtctl record``): measured
    positions and commanded torques, cycles with the safe state latched left out."""
    from rtctl.telemetry.tools import read_recording

    if model.base != "fixed":
        raise IdentificationError(f"model '{model.name}' has a floating base ({model.base}): identification "
                                  "needs the base's motion, which a recording of the joints does not hold")
    recording = read_recording(str(path), progress=False)
    samples, meta = recording["samples"], recording["meta"] or {}
    recorded = meta.get("joints") or []
    if not isinstance(recorded, list) or not all(isinstance(name, str) for name in recorded):
        raise IdentificationError(f"{path}: the metadata's 'joints' is {str(recorded)[:80]}, not a list of joint names")
    twice = sorted({name for name in recorded if recorded.count(name) > 1})
    if twice:
        raise IdentificationError(f"{path}: the metadata names the joint(s) {twice[:5]} more than once")
    _, v_index, needed = actuated_indices(model)
    missing = [name for name in needed if name not in recorded]
    if missing:
        raise IdentificationError(f"{path}: the recording has no joint(s) {missing} of model '{model.name}' "
                                  f"(recorded joints: {recorded or 'none (no metadata)'})")
    for name in ("t", "q", "effort_cmd"):
        if name not in samples:
            raise IdentificationError(f"{path}: the recording has no '{name}' field")
        width = samples[name].shape[1] if samples[name].ndim == 2 else None
        if name != "t" and width != len(recorded):
            raise IdentificationError(f"{path}: the field '{name}' holds {width or 'no list of'} values per sample "
                                      f"where the metadata names {len(recorded)} joints")
    if samples["t"].ndim != 1:
        raise IdentificationError(f"{path}: the field 't' holds lists where each sample has one time")
    columns = [recorded.index(name) for name in needed]
    keep = samples["tripped"] == 0 if "tripped" in samples else np.ones(len(samples["t"]), dtype=bool)
    t, q, tau = samples["t"][keep], samples["q"][keep][:, columns], samples["effort_cmd"][keep][:, columns]
    index = samples["index"][keep] if "index" in samples else np.flatnonzero(keep)
    for field_name, values in (("t", t[:, None]), ("q", q), ("effort_cmd", tau)):
        bad = ~np.isfinite(values)
        if bad.any():
            k, j = np.argwhere(bad)[0]
            joint = f" ({needed[j]})" if field_name != "t" else ""
            raise IdentificationError(f"{path}: sample {index[k]} has {field_name}{joint} = {values[k, j]}; "
                                      f"identification needs finite values")
    limit = model.effort_limit[v_index]
    beyond = np.isfinite(limit) & (limit > 0) & (np.abs(tau) > EFFORT_MARGIN * limit)
    if beyond.any():
        k, j = np.argwhere(beyond)[0]
        raise IdentificationError(f"{path}: sample {index[k]} commands effort_cmd ({needed[j]}) = {tau[k, j]:.6g}, "
                                  f"over {EFFORT_MARGIN:g} times the model's effort limit {limit[j]:g}: a recording "
                                  f"of another robot, or a damaged one")
    if len(t) < 3 or np.any(np.diff(t) <= 0):
        raise IdentificationError(f"{path}: needs a run of increasing sample times; got {len(t)} samples")
    return t, q, tau


def motion_from_samples(t, q, tau, cutoff_hz: float = DEFAULT_CUTOFF_HZ) -> Motion:
    """Filtered q, tau and the derived qd, qdd (module docstring, step 1)."""
    from scipy.signal import butter, filtfilt

    t, q, tau = (np.asarray(x, dtype=float) for x in (t, q, tau))
    dt = float(np.median(np.diff(t)))
    nyquist = 0.5 / dt
    if not 0 < cutoff_hz < nyquist:
        raise IdentificationError(f"cutoff {cutoff_hz} Hz must lie between 0 and the recording's Nyquist "
                                  f"frequency {nyquist:g} Hz")
    edge = int(math.ceil(3.0 / (cutoff_hz * dt)))
    step = max(1, int(round(1.0 / (8.0 * cutoff_hz * dt))))
    if len(t) <= 2 * edge + 2 * step:
        raise IdentificationError(f"the run is too short: {len(t)} samples ({t[-1] - t[0]:.3g} s); the filter "
                                  f"alone needs {2 * edge} samples ({2 * edge * dt:.3g} s)")
    b, a = butter(4, cutoff_hz / nyquist)
    held = tau.copy()
    held[1:] = 0.5 * (tau[1:] + tau[:-1])
    q_f = filtfilt(b, a, q, axis=0)
    tau_f = filtfilt(b, a, held, axis=0)
    qd = np.gradient(q_f, dt, axis=0)
    qdd = np.gradient(qd, dt, axis=0)
    light = butter(4, min(DIRECTION_CUTOFF_RATIO * cutoff_hz / nyquist, 0.9))
    direction = filtfilt(b, a, np.sign(np.gradient(filtfilt(*light, q, axis=0), dt, axis=0)), axis=0)
    keep = slice(edge, len(t) - edge, step)
    return Motion(t[keep], q_f[keep], qd[keep], qdd[keep], tau_f[keep], direction[keep])


# -- regressors ---------------------------------------------------------------------------------------------
def _full_state(model: Model, index, x, neutral):
    """Rows of ``x`` (actuated joints) placed at ``index`` in rows of ``neutral`` (a full q or v)."""
    full = np.tile(neutral, (x.shape[0], 1))
    full[:, index] = x
    return full


def _stacked(model: Model, motion: Motion):
    """(X, tau): rows sample by sample, joint by joint; columns the 10 nbodies inertial parameters, then
    each joint's viscous and Coulomb friction; tau less the drives' known rotor inertia (``model.armature``)."""
    q_index, v_index, _ = actuated_indices(model)
    n, nv = len(q_index), model.nv
    rest = np.zeros(nv)
    Y = JointTorqueRegressor(model).stacked(_full_state(model, q_index, motion.q, model.neutral_configuration()),
                                            _full_state(model, v_index, motion.qd, rest),
                                            _full_state(model, v_index, motion.qdd, rest))
    friction = np.zeros((Y.shape[0], 2 * n))
    rows = np.arange(motion.q.shape[0]) * nv
    for j in range(n):
        friction[rows + v_index[j], j] = motion.qd[:, j]
        friction[rows + v_index[j], n + j] = motion.direction[:, j]
    tau = np.zeros((motion.q.shape[0], nv))
    tau[:, v_index] = motion.tau - model.armature[v_index] * motion.qdd
    return np.hstack([Y, friction]), tau.reshape(-1)


def _labels(model: Model) -> list:
    _, _, names = actuated_indices(model)
    return (JointTorqueRegressor(model).parameter_labels() + [f"{name}.F_v" for name in names]
            + [f"{name}.F_c" for name in names])


def _structural_rank(model: Model) -> BaseParameters:
    """The base parameters of the model itself: the stacked regressor at random states."""
    rng = np.random.default_rng(0)
    _, v_index, _ = actuated_indices(model)
    count = max(30, 4 * PARAMETERS_PER_BODY * model.nbodies // max(1, len(v_index)))
    q = np.array([model.random_configuration(rng) for _ in range(count)])
    qd, qdd = rng.normal(size=(count, model.nv)), rng.normal(size=(count, model.nv))
    motion = Motion(np.arange(count), q[:, actuated_indices(model)[0]], qd[:, v_index], qdd[:, v_index],
                    np.zeros((count, len(v_index))), np.sign(qd[:, v_index]))
    return BaseParameters(_unit_columns(_stacked(model, motion)[0]), tolerance=BASE_TOLERANCE)


def _unit_columns(X):
    """X with every column scaled to unit norm (so rank decisions do not depend on units); a column at the
    round-off level of the largest (a parameter with no effect, computed as 1e-17 instead of 0) becomes zero."""
    norms = np.linalg.norm(X, axis=0)
    significant = norms > ROUND_OFF * norms.max()
    return np.where(significant, X / np.where(significant, norms, 1.0), 0.0)


# -- physical consistency: log-Cholesky parameters (Rucker & Wensing 2022) -------------------------------------
def _pseudo_inertia(pi_body) -> np.ndarray:
    """J = [[Sigma, h], [h^T, m]], Sigma = tr(I)/2 1 - I (Wensing, Kim & Slotine 2018, eq. 7)."""
    m, h = pi_body[0], pi_body[1:4]
    xx, xy, yy, xz, yz, zz = pi_body[4:10]
    inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def _parameters_of_pseudo_inertia(J) -> np.ndarray:
    sigma = J[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.array([J[3, 3], *J[:3, 3], inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2],
                     inertia[1, 2], inertia[2, 2]])


_FACTOR_ENTRIES = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))  # theta[1:] in V


def _log_cholesky_factor(theta):
    """(e^alpha, V): U = e^alpha V, V = [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]
    for theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3) (Rucker & Wensing 2022, eq. 10)."""
    V = np.eye(4)
    for k, (r, c) in enumerate(_FACTOR_ENTRIES):
        V[r, c] = np.exp(theta[k + 1]) if k < 3 else theta[k + 1]
    return np.exp(theta[0]), V


def _log_cholesky_to_parameters(theta) -> np.ndarray:
    """pi of one body from its log-Cholesky parameters: J = U U^T (:func:`_log_cholesky_factor`)."""
    e_alpha, V = _log_cholesky_factor(theta)
    return _parameters_of_pseudo_inertia(e_alpha ** 2 * V @ V.T)


def _log_cholesky_jacobian(theta) -> np.ndarray:
    """d pi / d theta (10 x 10) of :func:`_log_cholesky_to_parameters`: dJ = e^(2 alpha) (dV V^T + V dV^T),
    dJ / d alpha = 2 J, and pi is linear in J."""
    e_alpha, V = _log_cholesky_factor(theta)
    J = e_alpha ** 2 * V @ V.T
    out = np.empty((10, 10))
    out[:, 0] = _parameters_of_pseudo_inertia(2.0 * J)
    for k, (r, c) in enumerate(_FACTOR_ENTRIES):
        dV = np.zeros((4, 4))
        dV[r, c] = V[r, c] if k < 3 else 1.0
        dJ = e_alpha ** 2 * (dV @ V.T + V @ dV.T)
        out[:, k + 1] = _parameters_of_pseudo_inertia(dJ)
    return out


def _physically_consistent(pi_body) -> bool:
    """The pseudo-inertia J positive definite (Wensing, Kim & Slotine 2018, Theorem 1) with the body at least
    MIN_THICKNESS thick along each axis (its log-Cholesky factor's diagonal, :func:`_log_cholesky_factor`)."""
    J = _pseudo_inertia(pi_body)
    if not np.linalg.eigvalsh(J)[0] > 1e-12 * max(np.abs(J).max(), 1e-300):
        return False
    flip = np.eye(4)[::-1]
    try:
        U = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip
    except np.linalg.LinAlgError:
        return False
    return bool(np.all(np.diag(U)[:3] >= MIN_THICKNESS * U[3, 3]))


def _parameters_to_log_cholesky(pi_body) -> np.ndarray:
    """The inverse of :func:`_log_cholesky_to_parameters`, for a positive definite J (a body a little
    short of it is nudged inside first: the start of the constrained fit)."""
    J = _pseudo_inertia(pi_body)
    scale = max(np.abs(J).max(), 1e-12)
    smallest = np.linalg.eigvalsh(J)[0]
    if smallest < 1e-9 * scale:
        J = J + (1e-9 * scale - smallest) * np.eye(4)
    flip = np.eye(4)[::-1]
    U = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip      # upper triangular, J = U U^T
    e_alpha = U[3, 3]
    V = U / e_alpha
    return np.array([math.log(e_alpha), math.log(V[0, 0]), math.log(V[1, 1]), math.log(V[2, 2]), V[0, 1], V[1, 2],
                     V[0, 2], V[0, 3], V[1, 3], V[2, 3]])


def _consistent_fit(R, target, prior, n_bodies: int, n_friction: int, weight: float):
    """Minimise |R p - target|^2 + weight |pi - prior_pi|^2 over physically consistent bodies and friction >= 0
    (module docstring, step 4); p = [pi; friction]. The objective is convex: its unconstrained minimum (a
    linear least-squares problem) is the answer when it is feasible; otherwise a trust-region least-squares
    solve in the log-Cholesky parameters (friction as squares; each body's factor diagonal >= MIN_THICKNESS),
    from that minimum moved into the feasible set. Returns (p, the indices of the bodies whose unconstrained
    fit was not consistent)."""
    from scipy.optimize import least_squares

    n_inertial = PARAMETERS_PER_BODY * n_bodies
    prior_pi = prior[:n_inertial]
    pull = np.hstack([np.eye(n_inertial), np.zeros((n_inertial, n_friction))])
    p_free = np.linalg.lstsq(np.vstack([R, math.sqrt(weight) * pull]),
                             np.r_[target, math.sqrt(weight) * prior_pi], rcond=None)[0]
    inconsistent = [i for i in range(n_bodies) if not _physically_consistent(p_free[10 * i:10 * i + 10])]
    if np.all(p_free[n_inertial:] >= 0) and not inconsistent:
        return p_free, inconsistent

    def unpack(x):
        pi = np.concatenate([_log_cholesky_to_parameters(x[10 * i:10 * i + 10]) for i in range(n_bodies)])
        return np.concatenate([pi, x[n_inertial:] ** 2])

    def residual(x):
        p = unpack(x)
        return np.concatenate([R @ p - target, math.sqrt(weight) * (p[:n_inertial] - prior_pi)])

    def jacobian(x):
        dp = np.zeros((n_inertial + n_friction, x.size))
        for i in range(n_bodies):
            dp[10 * i:10 * i + 10, 10 * i:10 * i + 10] = _log_cholesky_jacobian(x[10 * i:10 * i + 10])
        dp[n_inertial:, n_inertial:] = np.diag(2.0 * x[n_inertial:])
        return np.vstack([R @ dp, math.sqrt(weight) * dp[:n_inertial]])

    x0 = np.concatenate([*(_parameters_to_log_cholesky(p_free[10 * i:10 * i + 10]) for i in range(n_bodies)),
                         np.sqrt(np.clip(p_free[n_inertial:], 0.0, None))])
    lower = np.full(x0.size, -np.inf)
    for i in range(n_bodies):
        lower[10 * i + 1:10 * i + 4] = math.log(MIN_THICKNESS)
    x0 = np.maximum(x0, lower + 1e-6)
    result = least_squares(residual, x0, jac=jacobian, bounds=(lower, np.inf), method="trf", ftol=1e-6,
                           max_nfev=MAX_EVALUATIONS)
    return unpack(result.x), inconsistent


# -- identification ------------------------------------------------------------------------------------------
def _friction_of(model: Model):
    _, v_index, _ = actuated_indices(model)
    return np.r_[model.damping[v_index], model.friction[v_index]]


def torque_rms(error: np.ndarray) -> np.ndarray:
    """Per-joint RMS over the samples of an (N, n) array."""
    return np.sqrt(np.mean(np.asarray(error) ** 2, axis=0))


@threadpool_limits.wrap(limits=1, user_api="blas")
def identify(model: Model, t, q, tau, cutoff_hz: float = DEFAULT_CUTOFF_HZ, source: str = "the run") -> Identification:
    """Identify ``model``'s inertial parameters and joint friction from a run: sample times ``t`` (N,), measured
    positions ``q`` and commanded torques ``tau`` (N, n) of its actuated joints (module docstring)."""
    _, v_index, names = actuated_indices(model)
    motion = motion_from_samples(t, q, tau, cutoff_hz)
    X, y = _stacked(model, motion)
    moving = _moving_rows(model, motion)
    X, y = X[moving], y[moving]
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise IdentificationError(f"{source}: the regressor or the torques less the armature's share are not finite "
                                  f"(largest armature {np.max(model.armature):g} kg m^2): nothing to fit")
    labels = _labels(model)
    nv, n, n_bodies = model.nv, len(names), model.nbodies
    structural = _structural_rank(model)
    run = BaseParameters(_unit_columns(X), tolerance=BASE_TOLERANCE)
    if run.rank < structural.rank:
        _raise_unexcited(source, model, motion, structural, run, labels)
    Xb = X[:, run.independent]
    beta = np.linalg.lstsq(Xb, y, rcond=None)[0]
    dof = np.flatnonzero(moving) % nv
    residual = Xb @ beta - y
    sigma = np.sqrt(np.array([np.mean(residual[dof == k] ** 2) if np.any(dof == k) else 0.0 for k in range(nv)]))
    w_rows = 1.0 / np.maximum(sigma, 1e-12 * max(sigma.max(), 1e-300))[dof]
    Xw, yw = X * w_rows[:, None], y * w_rows
    condition = float(np.linalg.cond(_unit_columns(Xw[:, run.independent])))
    Q, R = np.linalg.qr(Xw)
    prior = np.r_[inertial_parameters(model), _friction_of(model)]
    weight = PRIOR_WEIGHT * float(np.mean(np.sum(R * R, axis=0)))
    p, inconsistent = _consistent_fit(R, Q.T @ yw, prior, n_bodies, 2 * n, weight)
    identified = _with_parameters(model, p[:PARAMETERS_PER_BODY * n_bodies], p[-2 * n:-n], p[-n:])
    before = _per_joint_rms(X @ prior - y, dof, v_index)
    after = _per_joint_rms(X @ p - y, dof, v_index)
    with np.errstate(all="ignore"):
        scale = np.sum(y * y)
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(before)) and np.all(np.isfinite(after))
            and np.isfinite(scale)):
        raise IdentificationError(f"{source}: the fit overflowed (torques up to {np.max(np.abs(y)):.3g} N m after the "
                                  f"armature's share, largest armature {np.max(model.armature):g} kg m^2): nothing "
                                  f"written")
    coupled = np.abs(run.K) >= 1e-9
    no_effect = [labels[c] for k, c in sorted(enumerate(run.dependent), key=lambda kc: kc[1])
                 if not coupled[:, k].any()]
    combined = sorted({labels[c] for k, c in enumerate(run.dependent) if coupled[:, k].any()}
                      | {labels[c] for k, c in enumerate(run.independent) if coupled[k].any()})
    return Identification(model=identified, parameters=p[:PARAMETERS_PER_BODY * n_bodies], viscous=p[-2 * n:-n],
                          coulomb=p[-n:], condition=condition, base_rank=run.rank, rms_before=before,
                          rms_after=after, rms_torque=_per_joint_rms(y, dof, v_index), joint_names=names,
                          unexcited=no_effect, combined=combined, samples=motion.q.shape[0],
                          constrained=[labels[PARAMETERS_PER_BODY * i].split(".")[0] for i in inconsistent])


def _moving_rows(model: Model, motion: Motion) -> np.ndarray:
    """Which rows of the stacked regressor to fit: joint j's row of a sample where joint j moves. A joint at
    rest holds whatever friction torque the other forces need (stiction), which no friction model of
    velocity predicts; its rows are left out (|qd_j| below MOVING_FRACTION of its RMS velocity)."""
    _, v_index, _ = actuated_indices(model)
    moving = np.ones((motion.q.shape[0], model.nv), dtype=bool)
    speed = np.abs(motion.qd)
    moving[:, v_index] = speed >= MOVING_FRACTION * np.sqrt(np.mean(speed ** 2, axis=0))
    return moving.reshape(-1)


def _per_joint_rms(x, dof, v_index) -> np.ndarray:
    return np.array([np.sqrt(np.mean(x[dof == k] ** 2)) if np.any(dof == k) else 0.0 for k in v_index])


def _raise_unexcited(source, model, motion, structural, run, labels):
    span = motion.q.max(axis=0) - motion.q.min(axis=0)
    _, _, names = actuated_indices(model)
    still = [f"{name} (moved {span[k]:.3g})" for k, name in enumerate(names) if span[k] < WEAK_MOTION]
    missing = structural.rank - run.rank
    hint = f"; joints that hardly moved: {', '.join(still)}" if still else ""
    raise IdentificationError(
        f"model '{model.name}' is not identifiable from {source}: the run excites {run.rank} of its "
        f"{structural.rank} base parameters ({missing} missing, over {motion.q.shape[0]} filtered samples){hint}; "
        f"record an excitation run (trajectory type 'excitation') that moves every joint")


def _with_parameters(model: Model, pi, viscous, coulomb) -> Model:
    out = model_with_inertial_parameters(model, pi)
    _, v_index, _ = actuated_indices(model)
    out.damping = copy.copy(model.damping)
    out.friction = copy.copy(model.friction)
    out.damping[v_index] = viscous
    out.friction[v_index] = coulomb
    return out


def predicted_torques(model: Model, motion: Motion) -> np.ndarray:
    """The torques ``model`` predicts along ``motion`` (N, n): recursive inverse dynamics plus its
    ``<dynamics>`` friction, damping qd + friction sign(qd) (``motion.direction``; independent of the regressor)."""
    q_index, v_index, _ = actuated_indices(model)
    dynamics = Dynamics(model)
    rest = np.zeros(model.nv)
    q = _full_state(model, q_index, motion.q, model.neutral_configuration())
    qd, qdd = _full_state(model, v_index, motion.qd, rest), _full_state(model, v_index, motion.qdd, rest)
    out = np.array([dynamics.inverse_dynamics(q[k], qd[k], qdd[k])[v_index] for k in range(q.shape[0])])
    return out + model.damping[v_index] * motion.qd + model.friction[v_index] * motion.direction


# -- plots and the command --------------------------------------------------------------------------------------
def plot_prediction(motion: Motion, before: np.ndarray, after: np.ndarray, joint_names, path, title: str = ""):
    """Measured torque and the predictions of the given and the identified model, one panel per joint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joint_names)
    rms = torque_rms(motion.tau)
    total = np.sqrt(np.mean(rms ** 2))
    rel_before = np.sqrt(np.mean(torque_rms(before - motion.tau) ** 2)) / total
    rel_after = np.sqrt(np.mean(torque_rms(after - motion.tau) ** 2)) / total
    fig, axes = plt.subplots(n, 1, figsize=(11, 1.9 * n + 1), sharex=True, constrained_layout=True)
    axes = np.atleast_1d(axes)
    for k, name in enumerate(joint_names):
        ax = axes[k]
        ax.plot(motion.t, motion.tau[:, k], color="black", lw=1.4, label="measured (commanded, filtered)")
        ax.plot(motion.t, before[:, k], color="tab:red", lw=1.0, ls="--", label="given model")
        ax.plot(motion.t, after[:, k], color="tab:blue", lw=1.0, label="identified model")
        ax.set_ylabel(f"{name}\n(N m)")
        ax.set_title(f"{name}: RMS error {torque_rms(before[:, k] - motion.tau[:, k]) / rms[k]:.1%} before, "
                     f"{torque_rms(after[:, k] - motion.tau[:, k]) / rms[k]:.1%} after", fontsize=9, loc="left")
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    axes[-1].set_xlabel("t (s)")
    fig.suptitle(f"{title}torque prediction: RMS error {rel_before:.1%} (given model) -> {rel_after:.1%} "
                 f"(identified) of the RMS torque {total:.3g} N m")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def identify_command(args) -> int:
    """``rtctl identify RECORDING.mcap --model ROBOT.urdf [--out OUT.urdf] [--cutoff HZ] [--armature KG_M2 ...]
    [--plot PNG]``: writes the identified URDF and prints the report (also written next to it as ``.txt``).
    ``--armature``: the drives' reflected rotor inertia during the run (a URDF holds none; the run's
    ``rotor_inertia`` times the gear ratio squared), taken out of the torques before the fit."""
    from rtctl import bundled_model_path
    from rtctl.model.urdf import load_urdf
    from rtctl.model.urdf_writer import model_to_urdf

    recording = Path(args.recording)
    if not recording.is_file():
        raise FileNotFoundError(f"{recording}: no such recording")
    model_path = Path(args.model)
    if not model_path.exists() and model_path.suffix != ".urdf":
        model_path = bundled_model_path(args.model)          # a bundled robot by name, as `rtctl info` takes it
    model = load_urdf(model_path)
    if args.armature is not None:
        if len(args.armature) not in (1, model.nv):
            raise IdentificationError(f"--armature: give one value or {model.nv} (one per joint of model "
                                      f"'{model.name}'), got {len(args.armature)}")
        model.set_armature(np.broadcast_to(np.asarray(args.armature, dtype=float), (model.nv,)))
    t, q, tau = read_run(recording, model)
    with np.errstate(over="ignore", invalid="ignore"):      # an overflowing fit is refused in one line by identify
        result = identify(model, t, q, tau, cutoff_hz=args.cutoff, source=str(recording))
    out = Path(args.out) if args.out else recording.with_name(f"{recording.stem}_identified.urdf")
    out.write_text(model_to_urdf(result.model))
    report = result.report()
    out.with_suffix(".txt").write_text(report + "\n")
    print(report)
    print(f"rtctl identify: wrote {out} and {out.with_suffix('.txt')}")
    if args.plot:
        motion = motion_from_samples(t, q, tau, args.cutoff)
        plot_prediction(motion, predicted_torques(model, motion), predicted_torques(result.model, motion),
                        result.joint_names, args.plot)
        print(f"rtctl identify: wrote {args.plot}")
    return 0
