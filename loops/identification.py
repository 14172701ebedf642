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
   decimated to about eight samples per period of the cut-off. The last HELD_OUT of the samples are held
   out: they validate the fit and are not fitted.
2. **What the run identifies** (:mod:`rtctl.loops.identifiability`): the rows where each joint slides, the
   base parameters in physical units, and the essential ones -- each base parameter whose standard
   deviation is within RELATIVE_STD_MAX of its plausible magnitude, given the measured torque noise. The
   standard parameters in the others keep the given model's values and are reported as not identified,
   with their joint.
3. **Weighted least squares**, each joint's rows weighted by the inverse of its residual standard deviation
   after ordinary least squares (Gautier & Poignet, 2001).
4. **Physical consistency** (:mod:`rtctl.loops.physical_consistency`): the free parameters are fitted to
   the weighted residual plus a small pull towards the model's own parameters (which splits what the run
   sees only in combination as the given model does) with every body's pseudo-inertia positive definite
   (Wensing, Kim & Slotine, RA-L 2018) in log-Cholesky parameters (Rucker & Wensing, RA-L 2022) and
   friction >= 0.
5. **The held-out check**: a joint whose held-out torque the fit predicts worse than the given model gets
   the given model's friction back, then the given model's parameters of every body it carries (its torque
   is then the given model's), and the rest is refitted; so, by construction, the written model predicts
   no joint's held-out torque worse than the given model.

The result (:class:`Identification`) carries the identified model (a URDF with the parameters and the
friction as ``<dynamics damping friction>``, which the ``rigid_body`` plant and the ``computed_torque``
controller's ``friction_compensation`` read), the condition number, the per-joint torque-prediction
RMS of both models on the fitted and the held-out samples, and the parameters the run did not identify.
"""
from __future__ import annotations

import copy
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from rtctl.dynamics import Dynamics
from rtctl.dynamics.regressor import (PARAMETERS_PER_BODY, JointTorqueRegressor, inertial_parameters,
                                      model_with_inertial_parameters)
from rtctl.model import PRISMATIC, Model
from rtctl.rt.interfaces import actuated_indices

from .identifiability import (COMBINATION_TOLERANCE, essential_parameters, held_parameters, moving_rows,
                              plausible_scales, sliding_speed, structural_base, subtree_bodies)
from .physical_consistency import consistent_fit

__all__ = ["Identification", "IdentificationError", "Motion", "identify", "identify_command", "motion_from_samples",
           "plot_prediction", "predicted_torques", "read_run", "torque_rms"]

DEFAULT_CUTOFF_HZ = 5.0          # well above the harmonics of an excitation (<= 2 Hz), far below a 1 kHz loop
PRIOR_WEIGHT = 1e-3              # pull towards the model's parameters, relative to the data's mean information
DIRECTION_CUTOFF_RATIO = 4.0     # the velocity whose sign is the Coulomb column: 4x the cut-off
EFFORT_MARGIN = 10.0             # a commanded torque beyond this times the effort limit: not this robot's run
HELD_OUT = 0.2                   # the last fifth of the run validates the fit
NOT_WORSE_TOLERANCE = 1e-9       # relative: round-off between two equal predictions


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
    """What :func:`identify` found (SI units; torques N m or N). Per joint RMS values are NaN where the joint
    has no such samples (a joint that never slides is not fitted)."""

    model: Model                       # the identified model: parameters and <dynamics damping friction>
    parameters: np.ndarray             # pi, 10 per body (rtctl.dynamics.regressor order)
    viscous: np.ndarray                # per actuated joint, N m s/rad (N s/m)
    coulomb: np.ndarray                # per actuated joint, N m (N)
    condition: float                   # of the weighted identified base regressor, unit columns
    base_rank: int                     # base parameters of the model (inertial and friction)
    rms_before: np.ndarray             # per joint: the given model's torque prediction error on the fitted rows
    rms_after: np.ndarray
    rms_torque: np.ndarray             # per joint: RMS of the measured torque there
    joint_names: list
    identified_rank: int = 0           # of those, the base parameters this run identifies
    validation_before: np.ndarray = None   # per joint: the same on the held-out rows
    validation_after: np.ndarray = None
    validation_torque: np.ndarray = None
    unexcited: list = field(default_factory=list)      # parameters with no effect on the joint torques
    combined: list = field(default_factory=list)       # identifiable only in combination with others
    not_identified: list = field(default_factory=list)  # parameters this run does not identify (given values)
    held_joints: dict = field(default_factory=dict)    # {joint: its parameters in not_identified}
    still: dict = field(default_factory=dict)          # {joint that never slides: how it moved}
    reverted: list = field(default_factory=list)       # given back to the given model by the held-out check
    kept: list = field(default_factory=list)           # every parameter with the given model's value (both above)
    samples: int = 0
    fitted_samples: int = 0
    constrained: list = field(default_factory=list)    # bodies whose unconstrained fit no rigid body has

    def report(self) -> str:
        """The identification report as text."""
        width = max(16, 2 + max(len(name) for name in self.joint_names))
        lines = [(f"identified model '{self.model.name}' from {self.samples} samples ({self.fitted_samples} fitted, "
                  f"the last {self.samples - self.fitted_samples} held out): {self.identified_rank} of its "
                  f"{self.base_rank} base parameters (inertial and friction), condition number {self.condition:.4g} "
                  f"(unit columns)"),
                 f"{'':<{width}}{'-- fitted --':^34}{'-- held out --':^34}",
                 f"{'joint':<{width}}{'RMS tau (N m)':>14}{'given':>10}{'after':>10}{'RMS tau (N m)':>14}"
                 f"{'given':>10}{'after':>10}{'F_v':>11}{'F_c':>11}"]
        kept = set(self.kept)
        for k, name in enumerate(self.joint_names):
            friction = [f"{value:.4g}" + ("*" if f"{name}.{key}" in kept else "")
                        for key, value in (("F_v", self.viscous[k]), ("F_c", self.coulomb[k]))]
            lines.append(f"{name:<{width}}{_row(self.rms_torque[k], self.rms_before[k], self.rms_after[k])}"
                         f"{_row(self.validation_torque[k], self.validation_before[k], self.validation_after[k])}"
                         f"{friction[0]:>11}{friction[1]:>11}")
        fitted = (_overall(x) for x in (self.rms_torque, self.rms_before, self.rms_after))
        held_out = (_overall(x) for x in (self.validation_torque, self.validation_before, self.validation_after))
        lines.append(f"{'all joints':<{width}}{_row(*fitted)}{_row(*held_out)}")
        lines.append("(given/after: RMS torque-prediction error of the given and the identified model, relative to the "
                     "joint's RMS torque, over the samples where the joint slides (held out: where it slides, else all "
                     "of them); the identified model predicts no joint's held-out torque worse, by construction; "
                     "*: the given model's value)")
        held = "; ".join(f"{joint}{f' ({self.still[joint]})' if joint in self.still else ''}: {', '.join(params)}"
                         for joint, params in self.held_joints.items())
        lines.append(f"not identified by this run (kept from the given model): {held or 'none'}")
        lines.append(f"given back to the given model by the held-out check: {'; '.join(self.reverted) or 'none'}")
        lines.append(f"no effect on the joint torques (kept from the given model): "
                     f"{', '.join(self.unexcited) or 'none'}")
        lines.append(f"identifiable only in combination with others (split as the given model suggests): "
                     f"{', '.join(self.combined) or 'none'}")
        lines.append(f"physical consistency enforced (the unconstrained fit was no rigid body) on: "
                     f"{', '.join(self.constrained) or 'none'}")
        return "\n".join(lines)

    def warning(self) -> str:
        """One line naming the joints whose friction this run does not identify (among them every joint that
        never slides) and what the held-out check gave back, or ''. Weak inertial parameters of a joint that
        slides (products of inertia of light distal links, typically) are only listed in the report."""
        joints = [name for name in self.joint_names
                  if f"{name}.F_v" in self.not_identified or f"{name}.F_c" in self.not_identified]
        parts = []
        if joints:
            named = "; ".join(f"{name} ({self.still[name]})" if name in self.still else name for name in joints)
            count = sum(len(self.held_joints.get(name, ())) for name in joints)
            parts.append(f"the run does not identify the friction of joint(s) {named}: {count} parameter(s) of "
                         f"theirs keep the given model's values (the report lists them)")
        if self.reverted:
            parts.append(f"the held-out check gave back the given model's {'; '.join(self.reverted)}")
        return "; ".join(parts)


def _row(torque, before, after) -> str:
    if not np.isfinite(torque) or torque <= 0:
        return f"{'-':>14}{'-':>10}{'-':>10}"
    return f"{torque:>14.4g}{before / torque:>10.2%}{after / torque:>10.2%}"


def _overall(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.sqrt(np.mean(x[np.isfinite(x)] ** 2))) if np.isfinite(x).any() else math.nan


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


# -- identification ------------------------------------------------------------------------------------------
def _friction_of(model: Model):
    _, v_index, _ = actuated_indices(model)
    return np.r_[model.damping[v_index], model.friction[v_index]]


def torque_rms(error: np.ndarray) -> np.ndarray:
    """Per-joint RMS over the samples of an (N, n) array."""
    return np.sqrt(np.mean(np.asarray(error) ** 2, axis=0))


@threadpool_limits.wrap(limits=1, user_api="blas")
def identify(model: Model, t, q, tau, cutoff_hz: float = DEFAULT_CUTOFF_HZ, source: str = "the run",
             held_out: float = HELD_OUT) -> Identification:
    """Identify ``model``'s inertial parameters and joint friction from a run: sample times ``t`` (N,), measured
    positions ``q`` and commanded torques ``tau`` (N, n) of its actuated joints (module docstring); the last
    ``held_out`` of the run validates the fit and is not fitted."""
    _, v_index, names = actuated_indices(model)
    if not 0.0 < held_out < 0.5:
        raise IdentificationError(f"held_out {held_out!r}: give the share of the run to validate on, in (0, 0.5)")
    motion = motion_from_samples(t, q, tau, cutoff_hz)
    X, y = _stacked(model, motion)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise IdentificationError(f"{source}: the regressor or the torques less the armature's share are not finite "
                                  f"(largest armature {np.max(model.armature):g} kg m^2): nothing to fit")
    if not np.isfinite(_sum_of_squares(y)):
        _raise_overflow(source, model, y)
    labels, nv, n_bodies = _labels(model), model.nv, model.nbodies
    fit_rows, check_rows, n_fit = _row_sets(model, motion, held_out)
    still = [k for k in range(len(names)) if not fit_rows[:, v_index[k]].any()]
    if len(still) == len(names):
        raise IdentificationError(f"model '{model.name}' is not identifiable from {source}: no joint slides "
                                  f"({'; '.join(f'{names[k]} {_motion_of(model, motion, k)}' for k in still)}); "
                                  f"record an excitation run (trajectory type 'excitation') that moves every joint")
    base, C = structural_base(model, lambda q, qd, qdd: _stacked(model, Motion(
        np.arange(q.shape[0]), q, qd, qdd, np.zeros_like(qd), np.sign(qd)))[0])
    rows = fit_rows.reshape(-1)
    dof = np.flatnonzero(rows) % nv
    Xf, yf = X[rows], y[rows]
    prior = np.r_[inertial_parameters(model), _friction_of(model)]
    scales = plausible_scales(model, np.abs(motion.tau).max(axis=0))
    essential = essential_parameters(Xf[:, base.independent], yf, dof, C @ prior, np.abs(C) @ scales)
    if not essential.identified:
        raise IdentificationError(f"model '{model.name}' is not identifiable from {source}: none of its {base.rank} "
                                  f"base parameters stands out of the torque noise; nothing written")
    held = held_parameters(C, essential.held)
    Xw, yw = Xf / essential.noise[:, None], yf / essential.noise
    condition = float(np.linalg.cond(_unit_columns(Xw[:, base.independent[essential.identified]])))
    Q, R = np.linalg.qr(Xw)
    weight = PRIOR_WEIGHT * float(np.mean(np.sum(R * R, axis=0)))
    check = check_rows.reshape(-1)
    check_dof = np.flatnonzero(check) % nv
    X_check, y_check = X[check], y[check]
    p, inconsistent, reverted, reverted_groups, validation_before, validation_after = _checked_fit(
        model, R, Q.T @ yw, prior, weight, held, (X_check, y_check, check_dof))
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(Xf @ p)) and np.all(np.isfinite(validation_after))):
        _raise_overflow(source, model, y)
    identified = _with_parameters(model, p[:PARAMETERS_PER_BODY * n_bodies], p[-2 * len(names):-len(names)],
                                  p[-len(names):])
    unexcited, combined = _structural_lists(C, labels)
    return Identification(
        model=identified, parameters=p[:PARAMETERS_PER_BODY * n_bodies], viscous=p[-2 * len(names):-len(names)],
        coulomb=p[-len(names):], condition=condition, base_rank=base.rank, identified_rank=len(essential.identified),
        rms_before=_per_joint_rms(Xf @ prior - yf, dof, v_index), rms_after=_per_joint_rms(Xf @ p - yf, dof, v_index),
        rms_torque=_per_joint_rms(yf, dof, v_index),
        validation_before=validation_before, validation_after=validation_after,
        validation_torque=_per_joint_rms(y_check, check_dof, v_index), joint_names=names,
        unexcited=unexcited, combined=combined,
        not_identified=[labels[j] for j in np.flatnonzero(held)], held_joints=_held_joints(model, held),
        still={names[k]: _motion_of(model, motion, k) for k in still},
        reverted=reverted_groups, kept=[labels[j] for j in np.flatnonzero(held | reverted)],
        samples=motion.q.shape[0], fitted_samples=n_fit,
        constrained=[model.body_names[i] for i in inconsistent])


def _structural_lists(C, labels):
    """(parameters with no effect on any joint torque, parameters seen only in combination with others)."""
    members = np.abs(C) > COMBINATION_TOLERANCE * np.abs(C).max(axis=1, keepdims=True)
    combined = members & (members.sum(axis=1) > 1)[:, None]
    return ([labels[j] for j in range(len(labels)) if not members[:, j].any()],
            [labels[j] for j in range(len(labels)) if combined[:, j].any()])


def _raise_overflow(source, model: Model, y):
    raise IdentificationError(f"{source}: the fit overflowed (torques up to {np.max(np.abs(y)):.3g} N m after the "
                              f"armature's share, largest armature {np.max(model.armature):g} kg m^2): nothing written")


def _sum_of_squares(y) -> float:
    with np.errstate(all="ignore"):
        return float(np.sum(y * y))


def _unit_columns(X):
    norms = np.linalg.norm(X, axis=0)
    return X / np.where(norms > 0, norms, 1.0)


def _row_sets(model: Model, motion: Motion, held_out: float):
    """(fit, check, the number of samples before the held-out tail); fit and check (N, nv) masks: the sliding
    rows (:func:`~rtctl.loops.identifiability.moving_rows`) before the tail, and in it; a joint that does not
    slide in the tail is checked on all its rows there (the torque it holds)."""
    n_samples = motion.q.shape[0]
    n_fit = n_samples - max(2, int(round(held_out * n_samples)))
    if n_fit < 2:
        raise IdentificationError(f"the run is too short: {n_samples} filtered samples leave none to fit beside the "
                                  f"held-out {held_out:.0%}")
    moving = moving_rows(model, motion.qd)
    fit, check = moving.copy(), moving.copy()
    fit[n_fit:] = False
    check[:n_fit] = False
    check[n_fit:, ~check[n_fit:].any(axis=0)] = True
    return fit, check, n_fit


def _checked_fit(model: Model, R, target, prior, weight: float, held, check):
    """The consistent fit with the ``held`` parameters at the given model's values, then the held-out check
    (module docstring, step 5); ``check`` = (X, y, joint of each row) of the held-out rows. Returns (p, the
    bodies whose unconstrained fit was inconsistent, the mask of parameters given back, what was given back,
    and the held-out RMS error of each joint with the given and with the written model)."""
    _, v_index, _ = actuated_indices(model)
    X, y, dof = check
    before = _per_joint_rms(X @ prior - y, dof, v_index)
    reverted, groups = np.zeros_like(held), []
    while True:
        p, inconsistent = consistent_fit(R, target, prior, model.nbodies, weight, held | reverted)
        after = _per_joint_rms(X @ p - y, dof, v_index)
        worse = np.flatnonzero(after > before * (1 + NOT_WORSE_TOLERANCE))
        if not worse.size:
            return p, inconsistent, reverted, groups, before, after
        k = worse[np.argmax(after[worse] / before[worse])]
        group, what = _fallback_group(model, k, held | reverted, p, prior, check)
        if not group.any():      # every parameter joint k's torque depends on is the given one: cannot happen
            raise IdentificationError(f"joint {k}: the held-out check found nothing to give back; nothing written")
        reverted |= group
        groups.append(what)


def _fallback_group(model: Model, k: int, given, p, prior, check):
    """What of actuated joint k to give back to the given model when the fit predicts its held-out torque worse:
    its friction first, then, one at a time, the body it carries whose given parameters predict that torque best
    (with all of them, its torque is the given model's: a joint's torque depends on nothing else)."""
    _, v_index, names = actuated_indices(model)
    n, n_inertial = len(names), PARAMETERS_PER_BODY * model.nbodies
    group = np.zeros_like(given)
    group[[n_inertial + k, n_inertial + n + k]] = True
    if (group & ~given).any():
        return group & ~given, f"{names[k]} friction"
    X, y, dof = check
    rows = dof == v_index[k]
    body = int(np.flatnonzero(np.asarray(model.idx_v) == v_index[k])[0])
    best, best_error = None, math.inf
    for i in subtree_bodies(model, body):
        span = slice(PARAMETERS_PER_BODY * i, PARAMETERS_PER_BODY * (i + 1))
        if given[span].all():
            continue
        trial = p.copy()
        trial[span] = prior[span]
        error = float(np.sum((X[rows] @ trial - y[rows]) ** 2))
        if error < best_error:
            best, best_error = i, error
    group[:] = False
    if best is not None:
        group[PARAMETERS_PER_BODY * best:PARAMETERS_PER_BODY * (best + 1)] = True
        return group, f"{model.body_names[best]} (for {names[k]})"
    return group, ""


def _motion_of(model: Model, motion: Motion, k: int) -> str:
    """How actuated joint k moved over the run, against the speed it slides from."""
    _, v_index, _ = actuated_indices(model)
    body = int(np.flatnonzero(np.asarray(model.idx_v) == v_index[k])[0])
    unit = "m" if model.joint_type[body] == PRISMATIC else "rad"
    return (f"moved {np.ptp(motion.q[:, k]):.3g} {unit} at up to {np.abs(motion.qd[:, k]).max():.3g} {unit}/s; it "
            f"slides from {sliding_speed(model)[k]:.3g} {unit}/s")


def _held_joints(model: Model, held) -> dict:
    """{joint: its parameters (its friction, those of the body it moves) that the run does not identify}."""
    _, _, names = actuated_indices(model)
    labels, n_inertial = _labels(model), PARAMETERS_PER_BODY * model.nbodies
    out = {}
    for j in np.flatnonzero(held):
        joint = (model.joint_names[j // PARAMETERS_PER_BODY] if j < n_inertial
                 else names[(j - n_inertial) % len(names)])
        out.setdefault(joint, []).append(labels[j])
    return out


def _per_joint_rms(x, dof, v_index) -> np.ndarray:
    return np.array([np.sqrt(np.mean(x[dof == k] ** 2)) if np.any(dof == k) else np.nan for k in v_index])


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
    if result.warning():
        print(f"rtctl identify: warning: {result.warning()}", file=sys.stderr)
    print(f"rtctl identify: wrote {out} and {out.with_suffix('.txt')}")
    if args.plot:
        motion = motion_from_samples(t, q, tau, args.cutoff)
        plot_prediction(motion, predicted_torques(model, motion), predicted_torques(result.model, motion),
                        result.joint_names, args.plot)
        print(f"rtctl identify: wrote {args.plot}")
    return 0
