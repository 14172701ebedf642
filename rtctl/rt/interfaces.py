"""State and command interfaces: what controllers see instead of transports (SI units).

Both are sized by the robot model (``nq``, ``nv``) and preallocated once; every
cycle the driver writes the state in place and reads the command in place.

* :class:`RobotState` -- ``q`` (nq), ``v`` (nv), measured generalized ``effort``
  (nv), the sample time ``stamp`` (s, loop clock), ``fresh`` (the driver
  delivered a new sample this cycle) and ``sensors`` (each sensor's newest
  reading by its name, ``rtctl.drivers.sensor``). A driver fills the entries of
  its joints; a floating base is filled by the ``[estimator]``
  (:mod:`rtctl.rt.estimation`), or without one by the sim backend from the plant.
* :class:`Command` -- per DOF (nv, indexed like ``v``): ``effort`` (N m or N),
  and for drives that close their own loop ``position`` (rad or m, 1-DOF
  joints at their v index), ``velocity``, ``stiffness``, ``damping``. Base
  rows of a floating base are never sent to hardware.
"""
from __future__ import annotations

import numpy as np

from ..model import Model


class RobotState:
    __slots__ = ("q", "v", "effort", "stamp", "fresh", "sensors")

    def __init__(self, model: Model):
        self.q = model.neutral_configuration()
        self.v = np.zeros(model.nv)
        self.effort = np.zeros(model.nv)
        self.stamp = 0.0
        self.fresh = False
        self.sensors: dict = {}


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
    """(q indices, v indices, names) of the joints that are not part of the model's floating base.

    The base is what the model declares (``model.base``, ``model.n_base_bodies``,
    see :mod:`rtctl.model`): its first ``n_base_bodies`` bodies. Every other
    joint is actuated, whatever its name.
    """
    idx = np.arange(model.n_base_bodies, model.nbodies)
    return model.idx_q[idx].copy(), model.idx_v[idx].copy(), [model.joint_names[i] for i in idx]
