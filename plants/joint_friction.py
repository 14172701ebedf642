"""Joint friction of the rigid-body plants: the Stribeck curve, its implicit coefficient, the settings.

The friction torque on a DOF at velocity v is (:mod:`plants.rigid_body`)

    tau_friction(v) = -viscous v - (coulomb + (static - coulomb) exp(-(v / v_s)^2)) tanh(v / scale),

viscous, Coulomb and static friction with the Stribeck curve of Armstrong-Helouvry, Dupont & Canudas de Wit
(Automatica 1994, eq. 3). :func:`friction_coefficients` writes it as ``tau_friction(v) = -b(v) v`` with
``b(v) >= 0``: the linearly implicit integrator (:func:`plants.integrate.rosenbrock_w_advance`) treats
``b`` as the damping it must not let destabilise a step, so the regularised Coulomb curve, whose slope at
rest is ``coulomb / scale`` (1000 coulomb at the default 1 mm/s), is as safe as a viscous term.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["STRIBECK_ROWS", "add_stribeck_torques", "friction_coefficients", "friction_vector", "model_friction",
           "stribeck_table"]

STRIBECK_ROWS = 3  # columns of a Stribeck table: (DOF index, static minus Coulomb level, Stribeck velocity v_s)


@njit(cache=True, forceinline=True)
def add_stribeck_torques(v, stribeck, scale, tau):
    """Add the Stribeck part of each listed joint's friction to ``tau``: ``-(static - coulomb)
    exp(-(v / v_s)^2) tanh(v / scale)`` (module docstring). ``stribeck`` columns: (DOF index, static minus
    Coulomb level, Stribeck velocity v_s), one per joint whose static level differs from its Coulomb level."""
    for c in range(stribeck.shape[1]):
        k = int(stribeck[0, c])
        x = v[k] / stribeck[2, c]
        tau[k] -= stribeck[1, c] * np.exp(-x * x) * np.tanh(v[k] / scale)


@njit(cache=True, forceinline=True)
def _tanh_ratio(x):
    """tanh(x) / x, continued by its limit 1 at x = 0 (series to x^2 below 1e-4: error < 1e-17)."""
    if abs(x) < 1e-4:
        return 1.0 - x * x / 3.0
    return math.tanh(x) / x


@njit(cache=True)
def friction_coefficients(v, viscous, coulomb, scale, stribeck, out):
    """``b(v)`` per DOF into ``out``: the friction torque over the velocity, ``tau_friction(v) = -b(v) v``.

    The secant of the curve, ``b = viscous + level(v) tanh(v / scale) / v``, not its tangent: the tangent of
    the Coulomb part vanishes at speeds well above ``scale``, so a step implicit in it alone lets a light
    joint's Coulomb kick ``h coulomb / I`` carry it through rest and back, step after step (a chatter at
    that speed), while the secant grows as the speed falls and brings the joint to rest. Never negative:
    the level stays between the Coulomb and static values, both >= 0."""
    for k in range(v.shape[0]):
        out[k] = viscous[k] + coulomb[k] * _tanh_ratio(v[k] / scale) / scale
    for c in range(stribeck.shape[1]):
        k = int(stribeck[0, c])
        x = v[k] / stribeck[2, c]
        out[k] += stribeck[1, c] * np.exp(-x * x) * _tanh_ratio(v[k] / scale) / scale


def stribeck_table(coulomb: np.ndarray, static: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """The columns of :func:`add_stribeck_torques`: one per DOF whose static level differs from its Coulomb level."""
    dofs = np.flatnonzero(static != coulomb)
    return np.ascontiguousarray(np.array([dofs, static[dofs] - coulomb[dofs], velocity[dofs]], dtype=float)
                                .reshape(STRIBECK_ROWS, dofs.size))


def friction_vector(value, name: str, nv: int, actuated: np.ndarray, positive: bool = False):
    """Validate a friction setting; return (per-DOF array zero off the actuated DOFs, setting as given)."""
    try:
        arr = None if isinstance(value, (str, bytes)) else np.array(value, dtype=float)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != nv):
        got = f"{arr.shape[0]} values" if arr is not None and arr.ndim == 1 else repr(value)
        raise ValueError(f"{name} must be a scalar or {nv} per-DOF values (one per velocity DOF), got {got}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {arr.tolist()}")
    if positive and np.any(np.broadcast_to(arr, (nv,))[actuated] <= 0):
        raise ValueError(f"{name} must be > 0 for every actuated joint, got {arr.tolist()}")
    per_dof = np.zeros(nv)
    per_dof[actuated] = np.broadcast_to(arr, (nv,))[actuated]
    return per_dof, (float(arr) if arr.ndim == 0 else arr.tolist())


def model_friction(per_dof: np.ndarray, actuated: np.ndarray):
    """A URDF's ``<dynamics>`` value per DOF as a setting: one number when every actuated joint has it."""
    values = per_dof[actuated]
    return float(values[0]) if values.size and np.all(values == values[0]) else per_dof.tolist()
