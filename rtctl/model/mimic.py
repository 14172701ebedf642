"""Mimic joints: joints whose coordinate follows another joint's, ``q_m = multiplier q_leader + offset``.

A :class:`~rtctl.model.Model` keeps every joint of the tree with its own
coordinate (the *full* coordinates, what the kernels and Pinocchio without
mimic use); ``model.mimic`` is the :class:`MimicCoupling` that maps the
*independent* coordinates (every joint that mimics none: leaders and the rest)
onto them:

* ``q_full = Gq q + b`` (``b`` the offsets), ``v_full = G v``, ``a_full = G a``
  -- the coupling is linear with constant ``G``, so no velocity-product term;
* generalized forces map back by virtual work: ``tau = G^T tau_full``, and
  ``M = G^T M_full G``.

A mimic of a mimic follows the first leader that mimics no joint, with the
multipliers and offsets composed. :class:`rtctl.dynamics.coupled.CoupledDynamics`
runs the dynamics in the independent coordinates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..options import show
from . import FREE_FLYER, Model, ModelError


class MimicWarning(UserWarning):
    """A ``<mimic>`` names no movable joint: the joint loads as an independent joint."""


@dataclass(frozen=True)
class MimicJoint:
    """``q[name] = multiplier * q[leader] + offset``; ``leader`` mimics no joint once the coupling resolves it."""

    name: str
    leader: str
    multiplier: float = 1.0
    offset: float = 0.0


class MimicCoupling:
    """The linear map from a model's independent coordinates to its full coordinates."""

    def __init__(self, model: Model, mimics: list[MimicJoint]):
        self.mimics = _resolve_chains(model, mimics)
        followers = {m.name for m in self.mimics}
        bodies = [i for i in range(model.nbodies) if model.joint_names[i] not in followers]
        self.joint_names = [model.joint_names[i] for i in bodies]
        self.independent_q = _coordinates(model, bodies, model.idx_q, _joint_nq)
        self.independent_v = _coordinates(model, bodies, model.idx_v, _joint_nv)
        self.nq, self.nv = len(self.independent_q), len(self.independent_v)
        self.Gq = _selection(model.nq, self.independent_q)
        self.G = _selection(model.nv, self.independent_v)
        self.offset = np.zeros(model.nq)
        column_q = {int(k): c for c, k in enumerate(self.independent_q)}
        column_v = {int(k): c for c, k in enumerate(self.independent_v)}
        for m in self.mimics:
            follower, leader = model.joint_names.index(m.name), model.joint_names.index(m.leader)
            self.Gq[model.idx_q[follower], column_q[int(model.idx_q[leader])]] = m.multiplier
            self.G[model.idx_v[follower], column_v[int(model.idx_v[leader])]] = m.multiplier
            self.offset[model.idx_q[follower]] = m.offset

    def full_q(self, q) -> np.ndarray:
        return self.Gq @ np.asarray(q, dtype=float) + self.offset

    def full_v(self, v) -> np.ndarray:
        """Full velocities (or accelerations) of independent ones."""
        return self.G @ np.asarray(v, dtype=float)

    def reduced_q(self, q_full) -> np.ndarray:
        return np.asarray(q_full, dtype=float)[self.independent_q]

    def reduced_v(self, v_full) -> np.ndarray:
        return np.asarray(v_full, dtype=float)[self.independent_v]

    def reduced_tau(self, tau_full) -> np.ndarray:
        """Generalized forces on the independent coordinates: ``G^T tau_full``."""
        return self.G.T @ np.asarray(tau_full, dtype=float)

    def dof_joint_names(self, model: Model) -> list[str]:
        """The joint of each independent velocity coordinate."""
        names = []
        for i, name in enumerate(model.joint_names):
            if name in self.joint_names:
                names += [name] * _joint_nv(model, i)
        return names

    def describe(self) -> list[str]:
        return [f"{show(m.name)} = {m.multiplier:g} * {show(m.leader)} + {m.offset:g}" for m in self.mimics]


def _joint_nq(model, i):
    return 7 if model.joint_type[i] == FREE_FLYER else 1


def _joint_nv(model, i):
    return 6 if model.joint_type[i] == FREE_FLYER else 1


def _coordinates(model, bodies, start, size) -> np.ndarray:
    return np.array([k for i in bodies for k in range(start[i], start[i] + size(model, i))], dtype=np.int64)


def _selection(n_full, kept) -> np.ndarray:
    out = np.zeros((n_full, len(kept)))
    out[kept, np.arange(len(kept))] = 1.0
    return out


def _resolve_chains(model: Model, mimics: list[MimicJoint]) -> list[MimicJoint]:
    """Each mimic joint expressed through a leader that mimics none; refuse unknown leaders and cycles."""
    by_name = {m.name: m for m in mimics}
    for m in mimics:
        where = f"joint {show(m.name)} <mimic>"
        if m.leader not in model.joint_names:
            raise ModelError(f"{where}: joint {show(m.leader)} is not a movable joint of the model (mimic a revolute, "
                             "continuous or prismatic joint)")
        if model.joint_type[model.joint_names.index(m.leader)] == FREE_FLYER:
            raise ModelError(f"{where}: joint {show(m.leader)} is a free-flyer; only 1-DOF joints can be mimicked")
    resolved = []
    for m in mimics:
        multiplier, offset, leader, chain = m.multiplier, m.offset, m.leader, [m.name]
        while leader in by_name:
            if leader in chain:
                raise ModelError(f"joint {show(m.name)} <mimic>: the mimic joints form a cycle: "
                                 + " -> ".join(show(j) for j in chain + [leader]))
            chain.append(leader)
            up = by_name[leader]
            multiplier, offset, leader = multiplier * up.multiplier, multiplier * up.offset + offset, up.leader
        resolved.append(MimicJoint(m.name, leader, multiplier, offset))
    return resolved
