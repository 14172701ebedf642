"""End stops of the rigid-body plants: a stiff, critically damped spring-damper beyond each hard joint limit."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.model import Model
from rtctl.rt.interfaces import actuated_indices

__all__ = ["END_STOP_MAX_FREQUENCY", "END_STOP_YIELD", "STOP_ROWS", "add_end_stop_torques", "end_stop_table"]

# Rows of the end-stop table (one column per joint with finite limits).
_S_IQ, _S_IV, _S_LOWER, _S_UPPER, _S_STIFFNESS, _S_DAMPING = range(6)
STOP_ROWS = 6
END_STOP_YIELD = 0.01  # rad or m: an end stop yields this far under the joint's effort limit
END_STOP_MAX_FREQUENCY = 50.0  # Hz: the stiffest stop rings no faster, so a 1 kHz step resolves it


@njit(cache=True)
def add_end_stop_torques(q, v, stops, tau):
    """Add each joint's end-stop torque to ``tau``: a unilateral spring-damper while the joint is beyond a
    hard limit, ``-k (q - upper) - d v`` above the upper one (``k (lower - q) - d v`` below the lower),
    never pulling the joint into the stop. ``stops`` columns: see :data:`STOP_ROWS`."""
    for c in range(stops.shape[1]):
        i, k = int(stops[_S_IQ, c]), int(stops[_S_IV, c])
        x = q[i]
        f = 0.0
        if x > stops[_S_UPPER, c]:
            f = min(0.0, -stops[_S_STIFFNESS, c] * (x - stops[_S_UPPER, c]) - stops[_S_DAMPING, c] * v[k])
        elif x < stops[_S_LOWER, c]:
            f = max(0.0, stops[_S_STIFFNESS, c] * (stops[_S_LOWER, c] - x) - stops[_S_DAMPING, c] * v[k])
        tau[k] += f



def end_stop_table(model: Model, dynamics: Dynamics) -> np.ndarray:
    """End stops at the hard limits of every actuated joint with finite limits and a finite effort limit.

    Stiffness ``k = effort_limit / END_STOP_YIELD`` (the joint's own actuator pressing on the stop
    moves it 0.01 rad or m beyond the limit), lowered where needed so that the stop rings at no more
    than :data:`END_STOP_MAX_FREQUENCY` on the joint's smallest effective inertia ``1 / (M^-1)_kk``
    (the other joints free, neutral configuration): a 1 kHz step then resolves it (h omega <= 0.32).
    Damping ``d = 2 sqrt(k I)``, critically damped on that inertia."""
    q_idx, v_idx, _ = actuated_indices(model)
    M_inv = np.linalg.pinv(dynamics.mass_matrix(model.neutral_configuration()))
    omega_max = 2.0 * math.pi * END_STOP_MAX_FREQUENCY
    columns = []
    for i, k in zip(q_idx, v_idx):
        lower, upper, effort = model.lower[i], model.upper[i], model.effort_limit[k]
        if not (np.isfinite(lower) and np.isfinite(upper) and np.isfinite(effort) and effort > 0):
            continue
        if not M_inv[k, k] > 0:  # a massless joint: nothing to stop
            continue
        inertia = 1.0 / M_inv[k, k]
        stiffness = min(effort / END_STOP_YIELD, inertia * omega_max ** 2)
        columns.append((i, k, lower, upper, stiffness, 2.0 * math.sqrt(stiffness * inertia)))
    table = np.zeros((STOP_ROWS, len(columns)))
    for c, column in enumerate(columns):
        table[:, c] = column
    return table
