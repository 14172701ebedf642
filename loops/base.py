"""Controller and trajectory interfaces.

A :class:`Trajectory` gives the desired position, velocity and acceleration
of the actuated joints (length ``n``) at any time, written into preallocated
arrays. A :class:`Controller` turns the measured state and the desired motion
into generalized efforts (nv) for the actuated joints; neither allocates per
cycle.
"""
from __future__ import annotations

import abc

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.rt.interfaces import actuated_indices


class Trajectory(abc.ABC):
    n: int
    duration: float

    @abc.abstractmethod
    def sample(self, t: float, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        """Write the desired position, velocity, acceleration at time ``t`` (s) into the arrays."""


class Controller(abc.ABC):
    """Base for controllers over a model's actuated joints.

    ``q_index``/``v_index`` locate the actuated joints in the model's q and v;
    gains ``kp``/``kd`` are per actuated joint (``kd`` defaults to the
    critically damped ``2 sqrt(kp)``).
    """

    name = "controller"

    def __init__(self, dyn: Dynamics, kp, kd=None):
        self.dyn = dyn
        self.model = dyn.model
        self.q_index, self.v_index, self.joint_names = actuated_indices(self.model)
        n = len(self.v_index)
        self.n = n
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), (n,)).copy()
        if not np.all(np.isfinite(self.kp)) or np.any(self.kp < 0):
            raise ValueError(f"{self.name}: kp must be finite and >= 0, got {self.kp.tolist()}")
        self.kd = 2.0 * np.sqrt(self.kp) if kd is None else np.broadcast_to(np.asarray(kd, dtype=float), (n,)).copy()
        if not np.all(np.isfinite(self.kd)) or np.any(self.kd < 0):
            raise ValueError(f"{self.name}: kd must be finite and >= 0, got {self.kd.tolist()}")

    @abc.abstractmethod
    def update(self, q: np.ndarray, v: np.ndarray, q_d: np.ndarray, qd_d: np.ndarray, qdd_d: np.ndarray,
               effort: np.ndarray) -> None:
        """Measured full ``q`` (nq), ``v`` (nv); desired actuated-joint motion (n); write ``effort`` (nv)."""
