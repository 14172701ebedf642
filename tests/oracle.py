"""Pinocchio as the reference oracle: the same robot in both libraries, with explicit conversions.

Joints are matched by name, so the two libraries may order them differently.
Spatial vectors: rtctl uses [angular; linear], Pinocchio [linear; angular];
:func:`swap_halves` converts. Pinocchio is a test and benchmark dependency only.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from rtctl.dynamics import Dynamics
from rtctl.model import FREE_FLYER, Model
from rtctl.model.urdf import load_urdf, model_to_urdf


def swap_halves(x: np.ndarray) -> np.ndarray:
    """[a; b] -> [b; a] along the first axis of a 6-vector or a 6 x n matrix."""
    return np.concatenate([x[3:6], x[0:3]], axis=0)


class Pair:
    """An rtctl model and the Pinocchio model of the same URDF, with index maps between them."""

    def __init__(self, model: Model, pin_model: "pin.Model"):
        self.model = model
        self.dyn = Dynamics(model)
        self.pin_model = pin_model
        self.pin_data = pin_model.createData()
        self.q_index = np.zeros(model.nq, dtype=int)  # ours[k] = pinocchio[q_index[k]]
        self.v_index = np.zeros(model.nv, dtype=int)
        self.pin_joint = np.zeros(model.nbodies, dtype=int)
        for i, name in enumerate(model.joint_names):
            if not pin_model.existJointName(name):
                raise KeyError(f"Pinocchio model has no joint '{name}'")
            j = pin_model.getJointId(name)
            self.pin_joint[i] = j
            nq, nv = (7, 6) if model.joint_type[i] == FREE_FLYER else (1, 1)
            assert pin_model.nqs[j] == nq and pin_model.nvs[j] == nv, name
            self.q_index[model.idx_q[i]:model.idx_q[i] + nq] = np.arange(pin_model.idx_qs[j], pin_model.idx_qs[j] + nq)
            self.v_index[model.idx_v[i]:model.idx_v[i] + nv] = np.arange(pin_model.idx_vs[j], pin_model.idx_vs[j] + nv)
        assert pin_model.nq == model.nq and pin_model.nv == model.nv
        self.pin_model.gravity.linear = model.gravity

    @classmethod
    def from_urdf(cls, path, floating_base=None) -> "Pair":
        model = load_urdf(path, floating_base)
        if floating_base == "free_flyer":
            pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        else:
            pm = pin.buildModelFromUrdf(str(path))
        return cls(model, pm)

    @classmethod
    def from_model(cls, model: Model) -> "Pair":
        """Mirror a Python-built model in Pinocchio through URDF text."""
        text = model_to_urdf(model)
        if model.has_free_flyer:
            pm = _pin_from_floating_urdf(text, model)
        else:
            pm = pin.buildModelFromXML(text)
        return cls(model, pm)

    # conversions -------------------------------------------------------
    def q_to_pin(self, q):
        out = np.zeros(self.pin_model.nq)
        out[self.q_index] = q
        return out

    def v_to_pin(self, v):
        out = np.zeros(self.pin_model.nv)
        out[self.v_index] = v
        return out

    def v_from_pin(self, v_pin):
        return np.asarray(v_pin)[self.v_index]

    def matrix_from_pin(self, m_pin):
        return np.asarray(m_pin)[np.ix_(self.v_index, self.v_index)]

    def fext_to_pin(self, q, f_ext):
        """Our world-aligned [n; f] wrenches about body origins -> Pinocchio's local-frame Forces."""
        rot, _ = self.dyn.forward_kinematics(q)
        forces = [pin.Force.Zero() for _ in range(self.pin_model.njoints)]
        for i in range(self.model.nbodies):
            r = rot[i]
            forces[self.pin_joint[i]] = pin.Force(r.T @ f_ext[i, 3:6], r.T @ f_ext[i, 0:3])
        return forces

    # Pinocchio's answers in rtctl's ordering and conventions --------------
    def rnea(self, q, v, a, f_ext=None):
        args = (self.pin_model, self.pin_data, self.q_to_pin(q), self.v_to_pin(v), self.v_to_pin(a))
        if f_ext is not None:
            args = args + (self.fext_to_pin(q, f_ext),)
        return self.v_from_pin(pin.rnea(*args))

    def crba(self, q):
        m = pin.crba(self.pin_model, self.pin_data, self.q_to_pin(q))
        m = np.triu(m) + np.triu(m, 1).T
        return self.matrix_from_pin(m)

    def nle(self, q, v):
        return self.v_from_pin(pin.nonLinearEffects(self.pin_model, self.pin_data, self.q_to_pin(q), self.v_to_pin(v)))

    def aba(self, q, v, tau, f_ext=None):
        args = (self.pin_model, self.pin_data, self.q_to_pin(q), self.v_to_pin(v), self.v_to_pin(tau))
        if f_ext is not None:
            args = args + (self.fext_to_pin(q, f_ext),)
        return self.v_from_pin(pin.aba(*args))

    def frame_jacobian(self, q, frame_name):
        """World-aligned frame Jacobian, rows [angular; linear], columns in rtctl order."""
        qp = self.q_to_pin(q)
        fid = self.pin_model.getFrameId(frame_name)
        pin.computeJointJacobians(self.pin_model, self.pin_data, qp)
        pin.updateFramePlacements(self.pin_model, self.pin_data)
        j = pin.getFrameJacobian(self.pin_model, self.pin_data, fid, pin.LOCAL_WORLD_ALIGNED)
        return swap_halves(j)[:, self.v_index]

    def frame_classical_acceleration(self, q, v, frame_name):
        """[alpha; a_P] of a frame origin with zero joint accelerations (J-dot v), world axes."""
        fid = self.pin_model.getFrameId(frame_name)
        pin.forwardKinematics(self.pin_model, self.pin_data, self.q_to_pin(q), self.v_to_pin(v),
                              np.zeros(self.pin_model.nv))
        pin.updateFramePlacements(self.pin_model, self.pin_data)
        acc = pin.getFrameClassicalAcceleration(self.pin_model, self.pin_data, fid, pin.LOCAL_WORLD_ALIGNED)
        return np.concatenate([acc.angular, acc.linear])

    def frame_placement(self, q, frame_name):
        pin.framesForwardKinematics(self.pin_model, self.pin_data, self.q_to_pin(q))
        pl = self.pin_data.oMf[self.pin_model.getFrameId(frame_name)]
        return pl.rotation.copy(), pl.translation.copy()

    def center_of_mass(self, q):
        return pin.centerOfMass(self.pin_model, self.pin_data, self.q_to_pin(q)).copy()

    def integrate(self, q, v, dt):
        return pin.integrate(self.pin_model, self.q_to_pin(q), self.v_to_pin(v) * dt)[self.q_index]


def _pin_from_floating_urdf(text: str, model: Model):
    """Pinocchio model for a free-flyer rtctl model written by model_to_urdf."""
    root = model.body_names[0]
    root_joint = model.joint_names[0]
    lines = text.splitlines()
    # Drop the world link and the floating joint; build with Pinocchio's free-flyer named like ours.
    out, skip = [], False
    for line in lines:
        if line.strip() == '<link name="world"/>':
            continue
        if line.strip().startswith(f'<joint name="{root_joint}" type="floating">'):
            skip = True
        if not skip:
            out.append(line)
        if skip and line.strip() == "</joint>":
            skip = False
    pm = pin.buildModelFromXML("\n".join(out), pin.JointModelFreeFlyer())
    # Pinocchio names its free-flyer "root_joint"; ours may differ.
    if root_joint != "root_joint":
        pm.names[1] = root_joint
    assert pm.frames[pm.getFrameId(root)].parentJoint == 1
    return pm


def close(ours, ref, rtol=1e-9):
    """Relative per-element agreement: |ours - ref| <= rtol * max(|ref|, 1e-3 max|ref|, 1e-12).

    The floor keeps elements that are zero in exact arithmetic (and round-off
    sized in both libraries) from demanding agreement beyond double precision.
    """
    ours, ref = np.asarray(ours, dtype=float), np.asarray(ref, dtype=float)
    scale = np.maximum(np.abs(ref), max(1e-3 * np.abs(ref).max(), 1e-12))
    return bool(np.all(np.abs(ours - ref) <= rtol * scale))


def worst_relative_error(ours, ref):
    ours, ref = np.asarray(ours, dtype=float), np.asarray(ref, dtype=float)
    scale = np.maximum(np.abs(ref), max(1e-3 * np.abs(ref).max(), 1e-12))
    return float(np.max(np.abs(ours - ref) / scale))


class NamedPair:
    """An rtctl model and Pinocchio's model of the same URDF file, matched by joint name.

    Unlike :class:`Pair` it takes Pinocchio's continuous joints (nq = 2: cos, sin of the angle) and
    mimic joints (``mimic=True``: nq = nv = 0, driven by their leader). ``coupled`` compares the
    independent coordinates of ``model.mimic`` (leaders only) against Pinocchio's mimic model;
    otherwise every joint of the rtctl model against Pinocchio's model without mimic.
    """

    def __init__(self, model: Model, pin_model: "pin.Model", coupled: bool = False):
        self.model, self.pin_model = model, pin_model
        names = model.mimic.joint_names if coupled and model.mimic is not None else model.joint_names
        self.joints = []  # (pin joint id, our first q, our first v, our nq, our nv)
        iq = iv = 0
        for i, name in enumerate(model.joint_names):
            if name not in names:
                continue
            nq, nv = (7, 6) if model.joint_type[i] == FREE_FLYER else (1, 1)
            if not pin_model.existJointName(name):
                raise KeyError(f"Pinocchio model has no joint '{name}'")
            j = pin_model.getJointId(name)
            assert pin_model.nvs[j] == nv and pin_model.nqs[j] in ((nq, 2) if nq == 1 else (nq,)), name
            self.joints.append((j, iq, iv, nq, nv))
            iq, iv = iq + nq, iv + nv
        self.nq, self.nv = iq, iv
        assert pin_model.nv == self.nv, (pin_model.nv, self.nv)
        self.v_index = np.zeros(self.nv, dtype=int)
        for j, _, iv, _, nv in self.joints:
            self.v_index[iv:iv + nv] = np.arange(pin_model.idx_vs[j], pin_model.idx_vs[j] + nv)
        self.pin_model.gravity.linear = model.gravity

    def _data(self):
        """Fresh Pinocchio data for every call: with mimic joints, Pinocchio 4.1's rnea and crba give answers
        that depend on which of them ran before on the same data."""
        return self.pin_model.createData()

    def q_to_pin(self, q):
        out = pin.neutral(self.pin_model)
        for j, iq, _, nq, _ in self.joints:
            start = self.pin_model.idx_qs[j]
            if self.pin_model.nqs[j] == 2 and nq == 1:
                out[start:start + 2] = np.cos(q[iq]), np.sin(q[iq])
            else:
                out[start:start + nq] = q[iq:iq + nq]
        return out

    def v_to_pin(self, v):
        out = np.zeros(self.pin_model.nv)
        out[self.v_index] = v
        return out

    def rnea(self, q, v, a):
        tau = pin.rnea(self.pin_model, self._data(), self.q_to_pin(q), self.v_to_pin(v), self.v_to_pin(a))
        return np.asarray(tau)[self.v_index]

    def crba(self, q):
        m = pin.crba(self.pin_model, self._data(), self.q_to_pin(q))
        m = np.triu(m) + np.triu(m, 1).T
        return m[np.ix_(self.v_index, self.v_index)]

    def forward_dynamics(self, q, v, tau):
        """Pinocchio's ABA, or (mimic models, which ABA does not take) M^-1 (tau - h) from CRBA and RNEA."""
        if not len(self.pin_model.mimicking_joints):
            acc = pin.aba(self.pin_model, self._data(), self.q_to_pin(q), self.v_to_pin(v), self.v_to_pin(tau))
            return np.asarray(acc)[self.v_index]
        return np.linalg.solve(self.crba(q), tau - self.rnea(q, v, np.zeros(self.nv)))
