"""Pinocchio's joint order and configuration conventions, on request.

rtctl numbers a URDF's joints depth-first with children in file order;
Pinocchio (through urdfdom) visits children sorted by joint name, so the two
orders of q, v, a and tau differ in many real models. Pinocchio also writes a
continuous (unbounded revolute) joint as two coordinates ``(cos theta, sin theta)``
(its ``JointModelRUBX/Y/Z`` and ``RevoluteUnboundedUnaligned``, ``nq = 2``,
``nv = 1``) where rtctl keeps the angle ``theta`` (``nq = 1``).

:class:`PinocchioOrder` maps vectors between the two by joint name:

* ``to_pinocchio_q`` / ``from_pinocchio_q``: configurations. A free-flyer is
  ``[x, y, z, qx, qy, qz, qw]`` in both libraries (quaternion x, y, z, w) and
  is copied as is; a continuous joint becomes ``(cos, sin)`` and comes back as
  ``atan2(sin, cos)`` (an angle in (-pi, pi]).
* ``to_pinocchio_v`` / ``from_pinocchio_v``: any vector of the velocity space
  -- v, a, tau, the rows of an ``(n, nv)`` array -- a permutation; the
  free-flyer's ``[v_lin; omega]`` in the base frame is the same in both.
* ``to_pinocchio_matrix`` / ``from_pinocchio_matrix``: an nv x nv matrix such
  as M(q), rows and columns permuted.

Pinocchio is not imported: build the map from the Pinocchio model's joint
names, ``nqs``, ``nvs``, ``idx_qs`` and ``idx_vs`` (plain lists), or pass a
``pinocchio.Model`` to :meth:`PinocchioOrder.from_pinocchio`, which reads those
attributes. Free-flyer models compare with a Pinocchio model built with
``pinocchio.JointModelFreeFlyer()`` as root joint (named ``root_joint`` by both).
"""
from __future__ import annotations

import numpy as np

from . import FREE_FLYER, MI_NQ, MI_NV, REVOLUTE, Model

__all__ = ["PinocchioOrder"]


class PinocchioOrder:
    """Index maps between an rtctl :class:`~rtctl.model.Model` and a Pinocchio model of the same robot.

    ``joint_names``, ``nqs``, ``nvs``, ``idx_qs``, ``idx_vs``: the Pinocchio
    model's per-joint lists (``universe`` and other joints without coordinates
    are skipped). Every rtctl joint must appear there by name with a matching
    size, and the Pinocchio model must have no other coordinates; otherwise
    ``ValueError`` names the joint. Every method takes ``out=`` (not aliasing its input) for the result.
    """

    def __init__(self, model: Model, joint_names, nqs, nvs, idx_qs, idx_vs):
        self.model = model
        lists = [list(joint_names), [int(n) for n in nqs], [int(n) for n in nvs], [int(n) for n in idx_qs],
                 [int(n) for n in idx_vs]]
        if len({len(x) for x in lists}) != 1:
            raise ValueError("joint_names, nqs, nvs, idx_qs and idx_vs must have one entry per Pinocchio joint")
        pin = {name: (nq, nv, iq, iv) for name, nq, nv, iq, iv in zip(*lists) if nq or nv}
        self.nq_pinocchio = sum(nq for nq, _, _, _ in pin.values())
        self.nv_pinocchio = sum(nv for _, nv, _, _ in pin.values())
        self.pinocchio_joint_names = sorted(pin, key=lambda name: pin[name][3])
        self._build(model, pin)

    @classmethod
    def from_pinocchio(cls, model: Model, pin_model) -> PinocchioOrder:
        """The map to a ``pinocchio.Model`` (read through its ``names``, ``nqs``, ``nvs``, ``idx_qs``, ``idx_vs``)."""
        return cls(model, list(pin_model.names), list(pin_model.nqs), list(pin_model.nvs), list(pin_model.idx_qs),
                   list(pin_model.idx_vs))

    def _build(self, model: Model, pin: dict) -> None:
        copy_src, copy_dst, cont_src, cont_dst = [], [], [], []
        self.continuous_joints = []
        self.v_index = np.zeros(model.nv, dtype=np.int64)  # ours[k] = pinocchio[v_index[k]]
        for i, name in enumerate(model.joint_names):
            if name not in pin:
                hint = " (build it with pinocchio.JointModelFreeFlyer())" if model.joint_type[i] == FREE_FLYER else ""
                raise ValueError(f"the Pinocchio model has no joint '{name}' of model '{model.name}'{hint}")
            nq_p, nv_p, iq_p, iv_p = pin.pop(name)
            iq, iv = int(model.idx_q[i]), int(model.idx_v[i])
            nq, nv = int(model.packed_int[i, MI_NQ]), int(model.packed_int[i, MI_NV])
            continuous = model.joint_type[i] == REVOLUTE and (nq_p, nv_p) == (2, 1)
            if nv_p != nv or (nq_p != nq and not continuous):
                raise ValueError(f"joint '{name}': nq={nq_p}, nv={nv_p} in the Pinocchio model, "
                                 f"nq={nq}, nv={nv} in model '{model.name}'")
            self.v_index[iv:iv + nv] = np.arange(iv_p, iv_p + nv)
            if not continuous:
                copy_src.extend(range(iq, iq + nq))
                copy_dst.extend(range(iq_p, iq_p + nq))
            else:  # continuous joint: theta <-> (cos theta, sin theta)
                cont_src.append(iq)
                cont_dst.append(iq_p)
                self.continuous_joints.append(name)
        if pin:
            raise ValueError(f"model '{model.name}' has no joint(s) {sorted(pin)} of the Pinocchio model")
        self._copy_src, self._copy_dst = _index(copy_src), _index(copy_dst)
        self._cont_src, self._cont_dst = _index(cont_src), _index(cont_dst)
        self._cont_dst_sin = self._cont_dst + 1
        self.identity = (not cont_src and np.array_equal(self.v_index, np.arange(model.nv))
                         and np.array_equal(self._copy_dst, np.arange(model.nq)))

    # -- configurations ------------------------------------------------------
    def to_pinocchio_q(self, q, out=None) -> np.ndarray:
        """rtctl configuration (length model.nq) -> Pinocchio's (length nq_pinocchio)."""
        q = _vector(q, self.model.nq, "q")
        out = _output(out, (self.nq_pinocchio,), "out")
        out[self._copy_dst] = q[self._copy_src]
        theta = q[self._cont_src]
        out[self._cont_dst] = np.cos(theta)
        out[self._cont_dst_sin] = np.sin(theta)
        return out

    def from_pinocchio_q(self, q_pin, out=None) -> np.ndarray:
        """Pinocchio configuration -> rtctl's; a continuous joint's angle is atan2(sin, cos)."""
        q_pin = _vector(q_pin, self.nq_pinocchio, "q_pin")
        out = _output(out, (self.model.nq,), "out")
        out[self._copy_src] = q_pin[self._copy_dst]
        out[self._cont_src] = np.arctan2(q_pin[self._cont_dst_sin], q_pin[self._cont_dst])
        return out

    # -- velocity-space vectors and matrices ---------------------------------
    def to_pinocchio_v(self, x, out=None) -> np.ndarray:
        """v, a or tau (or an array whose first axis is the velocity space) in Pinocchio's order."""
        x = _array(x, self.model.nv, "x")
        out = _output(out, x.shape, "out")
        out[self.v_index] = x
        return out

    def from_pinocchio_v(self, x_pin, out=None) -> np.ndarray:
        """A Pinocchio v, a or tau (first axis the velocity space) in rtctl's order."""
        x_pin = _array(x_pin, self.nv_pinocchio, "x_pin")
        out = _output(out, x_pin.shape, "out")
        return np.take(x_pin, self.v_index, axis=0, out=out, mode="clip")

    to_pinocchio_a = to_pinocchio_tau = to_pinocchio_v
    from_pinocchio_a = from_pinocchio_tau = from_pinocchio_v

    def to_pinocchio_matrix(self, m, out=None) -> np.ndarray:
        """An nv x nv matrix (e.g. M(q)) with rows and columns in Pinocchio's order."""
        m = _matrix(m, self.model.nv, "m")
        out = _output(out, m.shape, "out")
        out[np.ix_(self.v_index, self.v_index)] = m
        return out

    def from_pinocchio_matrix(self, m_pin, out=None) -> np.ndarray:
        """A Pinocchio nv x nv matrix (e.g. ``pin.crba``'s, symmetrized) in rtctl's order."""
        m_pin = _matrix(m_pin, self.nv_pinocchio, "m_pin")
        out = _output(out, m_pin.shape, "out")
        out[...] = m_pin[np.ix_(self.v_index, self.v_index)]
        return out

    def __repr__(self) -> str:
        return (f"PinocchioOrder(model '{self.model.name}', nq {self.model.nq} -> {self.nq_pinocchio}, "
                f"identity={self.identity}, continuous={self.continuous_joints})")


def _index(x):
    return np.array(x, dtype=np.int64)


def _array(x, n, name):
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[0] != n:
        raise ValueError(f"{name} must have length {n} along its first axis, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _vector(x, n, name):
    arr = _array(x, n, name)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


def _matrix(x, n, name):
    arr = _array(x, n, name)
    if arr.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}), got {arr.shape}")
    return arr


def _output(out, shape, name):
    if out is None:
        return np.empty(shape)
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.shape != shape:
        raise ValueError(f"{name} must be a float64 array of shape {shape}")
    return out
