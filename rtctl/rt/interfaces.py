"""State and command interfaces: what controllers see instead of transports (SI units).

Both are sized by the robot model (``nq``, ``nv``) and preallocated once; every
cycle the driver writes the state in place and reads the command in place.

* :class:`RobotState` -- ``q`` (nq), ``v`` (nv), measured generalized ``effort``
  (nv), the sample time ``stamp`` (s, loop clock) and ``fresh`` (the driver
  delivered a new sample this cycle). A driver fills the entries of its joints;
  a floating base is filled by whatever estimates it (the sim backend: the plant).
* :class:`Command` -- per DOF (nv, indexed like ``v``): ``effort`` (N m or N),
  and for drives that close their own loop ``position`` (rad or m, 1-DOF
  joints at their v index), ``velocity``, ``stiffness``, ``damping``. Base
  rows of a floating base are never sent to hardware.
"""
from __future__ import annotations

import numpy as np

from ..model import Model


class RobotState:
    __slots__ = ("q", "v", "effort", "stamp", "fresh")

    def __init__(self, model: Model):
        self.q = model.neutral_configuration()
        self.v = np.zeros(model.nv)
        self.effort = np.zeros(model.nv)
        self.stamp = 0.0
        self.fresh = False


class Command:
    __slots__ = ("effort", "position", "velocity", "stiffness", "damping")

    def __init__(self, model: Model):
        self.effort = np.zeros(model.nv)
        self.position = np.zeros(model.nv)
        self.velocity = np.zeros(model.nv)
        self.stiffness = np.zeros(model.nv)
        self.damping = np.zeros(model.nv)

    def zero(self) -> None:
        self.effort[:] = 0.0
        self.stiffness[:] = 0.0
        self.damping[:] = 0.0


def actuated_indices(model: Model):
    """(q indices, v indices, names) of the 1-DOF joints that are not part of a floating base.

    The base is the free-flyer root, the Euler-angle chain (the bodies before the
    first body whose parent is not the previous one, when the chain starts with three
    prismatic joints named ``*_p{x,y,z}``), or the planar base (joints ``*_px``,
    ``*_pz``, ``*_ry``: the first three DOFs).
    """
    first = 1 if model.has_free_flyer else 0
    names = model.joint_names
    if not model.has_free_flyer and len(names) >= 6 and all(
            names[k].endswith(f"_p{axis}") for k, axis in enumerate("xyz")):
        first = 6
    elif not model.has_free_flyer and len(names) >= 3 and all(
            names[k].endswith(suffix) for k, suffix in enumerate(("_px", "_pz", "_ry"))):
        first = 3
    idx = np.arange(first, model.nbodies)
    return model.idx_q[idx].copy(), model.idx_v[idx].copy(), [names[i] for i in idx]
