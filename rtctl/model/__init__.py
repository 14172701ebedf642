"""Robot models as kinematic trees stored in flat arrays.

A :class:`Model` holds one row per moving body ("link"); every body has exactly
one joint connecting it to its parent body (``parent == -1`` is the world).
Bodies are numbered so that ``parent[i] < i`` (a topological order), which is
all the recursive algorithms in :mod:`rtctl.dynamics` need.

Frames and conventions (SI units throughout):

* ``joint_rotation[i]``, ``joint_translation[i]``: pose of joint ``i``'s frame
  in the parent body's frame (the URDF ``<origin>``). Body ``i``'s frame is the
  joint frame moved by the joint motion.
* ``axis[i]``: unit joint axis in the joint (= body) frame.
* ``mass[i]``, ``com[i]`` (body frame), ``inertia_com[i]``: 3x3 rotational
  inertia about the centre of mass, in body-frame axes.
* Joint types: ``REVOLUTE``, ``PRISMATIC`` (1 DOF each) and ``FREE_FLYER``
  (root only; nq = 7, nv = 6, using Pinocchio's convention:
  ``q = [x, y, z, qx, qy, qz, qw]`` with position in the world and a unit
  quaternion, ``v = [v_lin; omega]`` the body's spatial velocity expressed in
  the body frame). Fixed joints are merged into their parent when a model is
  built; the merged links survive as :class:`Frame` entries.
* The "Euler-angle joint" floating base of the legged-robot paper
  (Shah, Saha & Dutt) is a chain of three prismatic and three revolute 1-DOF
  joints through massless bodies; :meth:`ModelBuilder.add_euler_floating_base`
  creates it.
* Every model declares its base (``Model.base``, one of :data:`BASE_KINDS`):
  ``"fixed"`` (root bodies hang from the world, every joint is actuated),
  ``"free_flyer"`` (body 0 on a free-flyer joint), ``"euler"`` (bodies 0-5: the
  Euler-angle chain) or ``"planar"`` (bodies 0-2: prismatic x, prismatic z,
  revolute y). Whoever builds the model declares it -- the URDF loader's
  ``floating_base`` argument, :meth:`ModelBuilder.add_euler_floating_base`,
  :meth:`ModelBuilder.add_planar_floating_base` or a free-flyer root joint --
  and the model checks that its first bodies form that chain. The base bodies
  (``n_base_bodies``) and their DOFs (``n_base_dofs``, the first ones of v) are
  unactuated; joint names play no part.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..options import did_you_mean, show, show_all
from .body import (ModelError, check_inertia, combine_inertias, inertia_scale_factor, payload_mass,  # noqa: F401
                   payload_offset, quaternion_to_matrix, rpy_to_matrix)  # re-exported: part of rtctl.model

REVOLUTE = 0
PRISMATIC = 1
FREE_FLYER = 2
JOINT_TYPE_NAMES = {REVOLUTE: "revolute", PRISMATIC: "prismatic", FREE_FLYER: "free_flyer"}
# Coordinates (nq) and DOFs (nv) of each joint type.
JOINT_NQ = {REVOLUTE: 1, PRISMATIC: 1, FREE_FLYER: 7}
JOINT_NV = {REVOLUTE: 1, PRISMATIC: 1, FREE_FLYER: 6}

# The base kinds and the joint types of the serial chain of bodies each one is, from the root.
BASE_JOINTS = {
    "fixed": (),
    "free_flyer": (FREE_FLYER,),
    "euler": (PRISMATIC, PRISMATIC, PRISMATIC, REVOLUTE, REVOLUTE, REVOLUTE),
    "planar": (PRISMATIC, PRISMATIC, REVOLUTE),
}
BASE_KINDS = tuple(BASE_JOINTS)

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)


@dataclass(frozen=True)
class Frame:
    """A named frame rigidly attached to a body (``body == -1``: the world)."""

    name: str
    body: int
    rotation: np.ndarray
    translation: np.ndarray

    def mounted(self, name: str, xyz=None, rpy=None) -> "Frame":
        """The frame ``name`` at ``xyz`` (m) with axes turned by ``rpy`` (rad, URDF's fixed-axis roll-pitch-yaw)
        in this one, attached to the same body (a sensor's mount); ModelError when either is not 3 numbers."""
        xyz, rpy = (np.zeros(3) if v is None else np.asarray(v, dtype=float) for v in (xyz, rpy))
        for label, v in (("xyz", xyz), ("rpy", rpy)):
            if v.shape != (3,):
                raise ModelError(f"mount_{label} needs 3 values, got {v.size}")
        return Frame(name, self.body, self.rotation @ rpy_to_matrix(rpy), self.translation + self.rotation @ xyz)


@dataclass
class _Body:
    name: str
    joint_name: str
    parent: int
    joint_type: int
    rotation: np.ndarray
    translation: np.ndarray
    axis: np.ndarray
    mass: float
    com: np.ndarray
    inertia_com: np.ndarray
    lower: float
    upper: float
    velocity_limit: float
    effort_limit: float
    damping: float = 0.0
    friction: float = 0.0


class ModelBuilder:
    """Build a :class:`Model` body by body from Python.

    >>> b = ModelBuilder("pendulum")
    >>> link = b.add_body("link", parent=-1, joint_type="revolute", axis=(0, 1, 0),
    ...                   mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.01]))
    >>> b.build().nv
    1
    """

    def __init__(self, name: str = "robot", gravity=DEFAULT_GRAVITY, *, require_physical_inertia: bool = True):
        """``require_physical_inertia=False`` accepts physically inconsistent inertias (the URDF loader
        applies its own ``inertia`` policy first); shapes, symmetry and masses are checked either way."""
        self.name = name
        self.require_physical_inertia = require_physical_inertia
        self.gravity = np.asarray(gravity, dtype=float)
        if not np.all(np.isfinite(self.gravity)):
            raise ModelError(f"model {show(name)}: gravity must be a finite 3-vector, got {self.gravity.tolist()}")
        self.base = "fixed"
        self._bodies: list[_Body] = []
        self._frames: list[Frame] = []

    @property
    def nbodies(self) -> int:
        return len(self._bodies)

    def body_index(self, name: str) -> int:
        for i, b in enumerate(self._bodies):
            if b.name == name:
                return i
        raise ModelError(f"unknown body (link) name {show(name)}")

    def add_body(
        self,
        name: str,
        parent: int | str,
        joint_type: str | int,
        *,
        joint_name: str | None = None,
        axis=(0.0, 0.0, 1.0),
        rotation=None,
        translation=(0.0, 0.0, 0.0),
        mass: float = 0.0,
        com=(0.0, 0.0, 0.0),
        inertia=None,
        lower: float = -np.inf,
        upper: float = np.inf,
        velocity_limit: float = np.inf,
        effort_limit: float = np.inf,
        damping: float = 0.0,
        friction: float = 0.0,
    ) -> int:
        """Add a body connected to ``parent`` (index, name, or -1 for the world); return its index.

        A free-flyer joint makes the model's base ``"free_flyer"``; its coordinates are the
        body's world pose, so ``rotation`` and ``translation`` do not apply to it.
        """
        where = f"body {show(name)}"
        if isinstance(parent, str):
            try:
                parent = self.body_index(parent)
            except ModelError as exc:
                raise ModelError(f"{where}: parent: {exc}") from None
        parent = int(parent)
        if parent < -1 or parent >= len(self._bodies):
            raise ModelError(f"{where}: parent index {parent} does not exist")
        if any(b.name == name for b in self._bodies):
            raise ModelError(f"{where}: duplicate body name")
        jtype = _parse_joint_type(joint_type, where)
        if jtype == FREE_FLYER and (parent != -1 or self._bodies):
            raise ModelError(f"{where}: a free-flyer joint is only supported as the first (root) joint")
        axis = np.asarray(axis, dtype=float)
        if axis.shape != (3,) or not np.all(np.isfinite(axis)) or np.linalg.norm(axis) < 1e-12:
            raise ModelError(f"{where}: joint axis must be a non-zero 3-vector, got {axis.tolist()}")
        rot = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
        if rot.shape != (3, 3) or not np.allclose(rot @ rot.T, np.eye(3), atol=1e-9):
            raise ModelError(f"{where}: joint rotation is not a rotation matrix")
        trans = np.asarray(translation, dtype=float)
        com = np.asarray(com, dtype=float)
        for label, vec in (("translation", trans), ("com", com)):
            if vec.shape != (3,) or not np.all(np.isfinite(vec)):
                raise ModelError(f"{where}: {label} must be a finite 3-vector, got {np.asarray(vec).tolist()}")
        mass = float(mass)
        inertia = np.zeros((3, 3)) if inertia is None else inertia
        inertia = check_inertia(inertia, mass, where, self.require_physical_inertia)
        lower, upper = float(lower), float(upper)
        if lower > upper:
            raise ModelError(f"{where}: joint lower limit {lower} exceeds upper limit {upper}")
        if velocity_limit < 0 or effort_limit < 0:
            raise ModelError(f"{where}: velocity and effort limits must be >= 0")
        if not (damping >= 0 and friction >= 0 and np.isfinite(damping) and np.isfinite(friction)):
            raise ModelError(f"{where}: damping and friction must be finite and >= 0, got {damping}, {friction}")
        if jtype == FREE_FLYER:
            rot, trans = np.eye(3), np.zeros(3)
            self.base = "free_flyer"
        self._bodies.append(
            _Body(
                name=name,
                joint_name=joint_name or f"{name}_joint",
                parent=parent,
                joint_type=jtype,
                rotation=rot,
                translation=trans,
                axis=axis / np.linalg.norm(axis),
                mass=mass,
                com=com,
                inertia_com=inertia,
                lower=lower,
                upper=upper,
                velocity_limit=float(velocity_limit),
                effort_limit=float(effort_limit),
                damping=float(damping),
                friction=float(friction),
            )
        )
        return len(self._bodies) - 1

    def add_fixed(self, name: str, parent: int | str, *, rotation=None, translation=(0, 0, 0),
                  mass: float = 0.0, com=(0, 0, 0), inertia=None) -> None:
        """Attach a rigid child to ``parent`` through a fixed joint: its mass, centre of mass and inertia
        merge into the parent (parallel-axis), a massless child's inertia included; on the world they are
        dropped. The child survives as a :class:`Frame` named ``name``.
        """
        if isinstance(parent, str):
            parent = self.body_index(parent) if parent != "world" else -1
        rot = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
        trans = np.asarray(translation, dtype=float)
        inertia = check_inertia(np.zeros((3, 3)) if inertia is None else inertia, float(mass), f"link {show(name)}",
                                self.require_physical_inertia)
        if parent >= 0 and (mass > 0 or np.any(inertia != 0)):
            body = self._bodies[parent]
            c_child = trans + rot @ np.asarray(com, dtype=float)
            i_child = rot @ inertia @ rot.T
            body.mass, body.com, body.inertia_com = combine_inertias(
                body.mass, body.com, body.inertia_com, float(mass), c_child, i_child
            )
        self._frames.append(Frame(name, parent, rot, trans))

    def add_frame(self, name: str, body: int | str, rotation=None, translation=(0, 0, 0)) -> None:
        if isinstance(body, str):
            body = self.body_index(body)
        rot = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
        self._frames.append(Frame(name, int(body), rot, np.asarray(translation, dtype=float)))

    def add_euler_floating_base(self, body_name: str, *, sequence: str = "zyx", mass=0.0,
                                com=(0, 0, 0), inertia=None) -> int:
        """Floating base as the Euler-angle joint chain of the legged-robot paper.

        Three prismatic joints along world x, y, z, then three revolute joints
        about the axes named by ``sequence`` (each about the moving frame), so
        ``sequence="zyx"`` gives ``R = Rz(a) Ry(b) Rx(c)``, i.e. roll-pitch-yaw
        about fixed axes. The last revolute joint carries ``body_name``.
        Returns the index of that body. The model's base is then ``"euler"``;
        the chain must be the first bodies added.
        """
        self._check_base_first("an Euler-angle floating base", body_name)
        if len(sequence) != 3 or any(a == b for a, b in zip(sequence, sequence[1:])):
            raise ModelError("Euler sequence must be three axis letters, no two consecutive alike; "
                             f"got {show(sequence)}")
        unit = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}
        parent = -1
        for letter in "xyz":
            parent = self.add_body(f"{body_name}_T{letter}", parent, PRISMATIC, axis=unit[letter],
                                   joint_name=f"{body_name}_p{letter}")
        for k, letter in enumerate(sequence):
            last = k == 2
            if letter not in unit:
                raise ModelError(f"Euler sequence letter {show(letter)} is not one of x, y, z")
            parent = self.add_body(
                body_name if last else f"{body_name}_R{k}{letter}", parent, REVOLUTE,
                axis=unit[letter], joint_name=f"{body_name}_r{letter}",
                mass=mass if last else 0.0, com=com if last else (0, 0, 0),
                inertia=inertia if last else None,
            )
        self.base = "euler"
        return parent

    def add_planar_floating_base(self, body_name: str, *, mass=0.0, com=(0, 0, 0), inertia=None) -> int:
        """Planar floating base in the x-z plane (the 3-DOF trunk of the paper's planar biped).

        Prismatic joints along world x and z (``{body}_px``, ``{body}_pz``) through
        massless bodies, then a revolute joint about y (``{body}_ry``) carrying
        ``body_name``. Returns the index of that body. The model's base is then
        ``"planar"``; the chain must be the first bodies added.
        """
        self._check_base_first("a planar floating base", body_name)
        parent = self.add_body(f"{body_name}_Tx", -1, PRISMATIC, axis=(1, 0, 0), joint_name=f"{body_name}_px")
        parent = self.add_body(f"{body_name}_Tz", parent, PRISMATIC, axis=(0, 0, 1), joint_name=f"{body_name}_pz")
        body = self.add_body(body_name, parent, REVOLUTE, axis=(0, 1, 0), joint_name=f"{body_name}_ry",
                             mass=mass, com=com, inertia=inertia)
        self.base = "planar"
        return body

    def _check_base_first(self, what: str, body_name: str) -> None:
        if self._bodies:
            raise ModelError(f"body {show(body_name)}: {what} must be the first bodies of the model "
                             f"({len(self._bodies)} already added)")

    def build(self) -> "Model":
        if not self._bodies:
            raise ModelError(f"model {show(self.name)} has no moving bodies")
        return Model(self.name, self._bodies, self._frames, self.gravity, base=self.base)


def _parse_joint_type(joint_type, where):
    if isinstance(joint_type, str):
        lookup = {v: k for k, v in JOINT_TYPE_NAMES.items()}
        lookup["continuous"] = REVOLUTE
        lookup["floating"] = FREE_FLYER
        if joint_type not in lookup:
            raise ModelError(f"{where}: unknown joint type {show(joint_type)}")
        return lookup[joint_type]
    if joint_type not in JOINT_TYPE_NAMES:
        raise ModelError(f"{where}: unknown joint type {joint_type!r}")
    return int(joint_type)


# Column layout of the packed float model (one row per body; the last row holds gravity): joint placement
# in the parent (rotation, translation), joint axis, mass, centre of mass, inertia about the body origin
# (xx yy zz xy xz yz), armature of each of the joint's DOFs (zero for a free-flyer), inertia about the centre
# of mass (xx yy zz xy xz yz).
MF_ROT, MF_TRANS, MF_AXIS, MF_MASS, MF_COM, MF_INERTIA, MF_ARMATURE, MF_ICOM = 0, 9, 12, 15, 16, 19, 25, 26
MF_WIDTH = 32
# Columns of the packed integer model: parent body, joint type, first index in q and v, joint nq and nv.
MI_PARENT, MI_TYPE, MI_IQ, MI_IV, MI_NQ, MI_NV = 0, 1, 2, 3, 4, 5
MI_WIDTH = 6


class Model:
    """A kinematic tree as flat arrays (see the module docstring for conventions)."""

    def __init__(self, name: str, bodies: list[_Body], frames: list[Frame], gravity, base: str = "fixed"):
        self.name = name
        self.nbodies = len(bodies)
        self.body_names = [b.name for b in bodies]
        self.joint_names = [b.joint_name for b in bodies]
        self.parent = np.array([b.parent for b in bodies], dtype=np.int64)
        self.joint_type = np.array([b.joint_type for b in bodies], dtype=np.int64)
        for i, p in enumerate(self.parent):
            if p >= i:
                raise ModelError(f"body {show(bodies[i].name)}: parent {p} is not listed before it")
        self.joint_rotation = np.array([b.rotation for b in bodies])
        self.joint_translation = np.array([b.translation for b in bodies])
        self.axis = np.array([b.axis for b in bodies])
        self.mass = np.array([b.mass for b in bodies])
        self.com = np.array([b.com for b in bodies])
        self.inertia_com = np.array([b.inertia_com for b in bodies])
        self.gravity = np.asarray(gravity, dtype=float).copy()
        self.frames = list(frames)

        self._declare_base(base)
        nq_joint = np.array([JOINT_NQ[t] for t in self.joint_type], dtype=np.int64)
        nv_joint = np.array([JOINT_NV[t] for t in self.joint_type], dtype=np.int64)
        self.idx_q = np.concatenate([[0], np.cumsum(nq_joint)[:-1]]).astype(np.int64)
        self.idx_v = np.concatenate([[0], np.cumsum(nv_joint)[:-1]]).astype(np.int64)
        self.nq = int(nq_joint.sum())
        self.nv = int(nv_joint.sum())
        self.lower = np.full(self.nq, -np.inf)
        self.upper = np.full(self.nq, np.inf)
        self.velocity_limit = np.full(self.nv, np.inf)
        self.effort_limit = np.full(self.nv, np.inf)
        for i, b in enumerate(bodies):
            if b.joint_type != FREE_FLYER:
                self.lower[self.idx_q[i]] = b.lower
                self.upper[self.idx_q[i]] = b.upper
                self.velocity_limit[self.idx_v[i]] = b.velocity_limit
                self.effort_limit[self.idx_v[i]] = b.effort_limit
        self.n_base_dofs = int(nv_joint[:self.n_base_bodies].sum())
        self.damping = np.zeros(self.nv)
        self.friction = np.zeros(self.nv)
        for i, b in enumerate(bodies):
            if b.joint_type != FREE_FLYER:
                self.damping[self.idx_v[i]] = b.damping
                self.friction[self.idx_v[i]] = b.friction
        self.mimic = None  # a rtctl.model.mimic.MimicCoupling when some joints mimic others
        self.inertia_findings = []  # rtctl.model.inertia.InertiaFinding of each link warned about or repaired
        self.closed_chain = None  # a rtctl.model.closed_chain.ClosedChain the joints move (a parallel mechanism)
        self.armature = np.zeros(self.nv)
        self.packed_int, self.packed_float = self._pack()

    def _declare_base(self, base: str) -> None:
        """Set ``base``, ``n_base_bodies`` and ``has_free_flyer`` after checking that the first bodies are
        the serial chain of joints ``BASE_JOINTS[base]`` hanging from the world."""
        if base not in BASE_JOINTS:
            raise ModelError(f"model {show(self.name)}: base must be one of {BASE_KINDS}, got {base!r}")
        chain = BASE_JOINTS[base]
        expected = ", ".join(JOINT_TYPE_NAMES[t] for t in chain)
        if len(chain) > self.nbodies or any(self.joint_type[k] != t or self.parent[k] != k - 1
                                            for k, t in enumerate(chain)):
            raise ModelError(f"model {show(self.name)}: a {show(base)} base is the serial chain ({expected}) of the "
                             f"first {len(chain)} bodies from the world; the model's bodies do not start so")
        if np.any(self.joint_type[len(chain):] == FREE_FLYER):
            raise ModelError(f"model {show(self.name)}: a free-flyer joint is the root of a 'free_flyer' base, "
                             f"not part of a {show(base)} model")
        self.base = base
        self.n_base_bodies = len(chain)
        self.has_free_flyer = base == "free_flyer"

    @property
    def total_mass(self) -> float:
        return float(self.mass.sum())

    def _pack(self):
        mi = np.zeros((self.nbodies, MI_WIDTH), dtype=np.int64)
        mi[:, MI_PARENT] = self.parent
        mi[:, MI_TYPE] = self.joint_type
        mi[:, MI_IQ] = self.idx_q
        mi[:, MI_IV] = self.idx_v
        mi[:, MI_NQ] = [JOINT_NQ[t] for t in self.joint_type]
        mi[:, MI_NV] = [JOINT_NV[t] for t in self.joint_type]
        mf = np.zeros((self.nbodies + 1, MF_WIDTH))
        for i in range(self.nbodies):
            mf[i, MF_ROT:MF_ROT + 9] = self.joint_rotation[i].ravel()
            mf[i, MF_TRANS:MF_TRANS + 3] = self.joint_translation[i]
            mf[i, MF_AXIS:MF_AXIS + 3] = self.axis[i]
            mf[i, MF_MASS] = self.mass[i]
            mf[i, MF_COM:MF_COM + 3] = self.com[i]
            # Rotational inertia about the body origin (parallel-axis theorem), body axes.
            c = self.com[i]
            i_o = self.inertia_com[i] + self.mass[i] * (c @ c * np.eye(3) - np.outer(c, c))
            if not np.all(np.isfinite(i_o)):
                raise ModelError(f"body {show(self.body_names[i])}: the rotational inertia about the joint frame "
                                 f"(mass {self.mass[i]}, center of mass {np.asarray(c).tolist()}) is not finite: a "
                                 f"length or mass is out of range")
            mf[i, MF_INERTIA:MF_INERTIA + 6] = [i_o[0, 0], i_o[1, 1], i_o[2, 2], i_o[0, 1], i_o[0, 2], i_o[1, 2]]
            mf[i, MF_ARMATURE] = self.armature[self.idx_v[i]]
            i_c = self.inertia_com[i]
            mf[i, MF_ICOM:MF_ICOM + 6] = [i_c[0, 0], i_c[1, 1], i_c[2, 2], i_c[0, 1], i_c[0, 2], i_c[1, 2]]
        mf[self.nbodies, 0:3] = self.gravity
        return mi, mf

    def set_armature(self, armature) -> None:
        """Reflected rotor inertia per DOF (kg m^2 or kg), added to the diagonal of M(q).

        A motor of rotor inertia J behind a reduction N adds N^2 J to its joint;
        :class:`drivers.transmission.Transmission` computes it. Free-flyer DOFs must be 0.
        """
        arm = np.asarray(armature, dtype=float)
        if arm.shape == ():
            arm = np.full(self.nv, float(arm))
            if self.has_free_flyer:
                arm[0:6] = 0.0
        if arm.shape != (self.nv,) or not np.all(np.isfinite(arm)) or np.any(arm < 0):
            raise ModelError(f"armature must be {self.nv} finite values >= 0, got {np.asarray(armature).tolist()}")
        if self.has_free_flyer and np.any(arm[0:6] != 0):
            raise ModelError("armature of the free-flyer DOFs must be zero")
        self.armature = arm.copy()
        self.packed_float[:self.nbodies, MF_ARMATURE] = arm[self.idx_v]

    def with_inertia_scaled(self, factor: float) -> "Model":
        """A copy with every body's mass and inertia times ``factor`` (a model error for robustness tests);
        the armature (rotor inertia, a drive property) is kept."""
        factor = inertia_scale_factor(factor)
        out = copy.deepcopy(self)
        out.mass *= factor
        out.inertia_com *= factor
        out.packed_int, out.packed_float = out._pack()
        return out

    def with_payload(self, frame: str, mass: float, offset=(0.0, 0.0, 0.0)) -> "Model":
        """A copy carrying a point mass ``mass`` (kg) at ``offset`` (m, in the link or merged frame ``frame``),
        fused into the body that frame is attached to (a payload the controller's model may not know)."""
        f = self.frame(frame)
        if f.body < 0:
            raise ModelError(f"payload frame {show(frame)} of model {show(self.name)} is fixed to the world")
        m, off = payload_mass(mass), payload_offset(offset)
        out = copy.deepcopy(self)
        b = f.body
        out.mass[b], out.com[b], out.inertia_com[b] = combine_inertias(
            out.mass[b], out.com[b], out.inertia_com[b], m, f.rotation @ off + f.translation, np.zeros((3, 3)))
        out.packed_int, out.packed_float = out._pack()
        return out

    def set_gravity(self, gravity) -> None:
        self.gravity = np.asarray(gravity, dtype=float).copy()
        self.packed_float[self.nbodies, 0:3] = self.gravity

    def neutral_configuration(self) -> np.ndarray:
        """Zero joint positions (clipped into the limits), identity base orientation."""
        q = np.clip(np.zeros(self.nq), self.lower, self.upper)
        if self.has_free_flyer:
            q[0:7] = [0, 0, 0, 0, 0, 0, 1]
        return q

    def random_configuration(self, rng: np.random.Generator, span: float = np.pi) -> np.ndarray:
        """A random configuration inside the joint limits (``+-span`` where a joint is unbounded)."""
        lo = np.where(np.isfinite(self.lower), self.lower, -span)
        hi = np.where(np.isfinite(self.upper), self.upper, span)
        q = rng.uniform(lo, hi)
        if self.has_free_flyer:
            quat = rng.normal(size=4)
            q[3:7] = quat / np.linalg.norm(quat)
        return q

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise ModelError(f"model {show(self.name)} has no body (link) named {show(name)}") from None

    def frame(self, name: str) -> Frame:
        """A body or a merged frame by name, as a :class:`Frame` attached to a body."""
        if name in self.body_names:
            return Frame(name, self.body_names.index(name), np.eye(3), np.zeros(3))
        for f in self.frames:
            if f.name == name:
                return f
        known = self.body_names + [f.name for f in self.frames]
        raise ModelError(f"model {show(self.name)} has no link or frame named {show(name)}{did_you_mean(name, known)}; "
                         f"links and frames: {show_all(known)}")

    def kinematic_modules(self) -> list[list[int]]:
        """The serial chains of the legged-robot paper's modularisation (Fig. 1).

        A module starts at a body whose parent is the world or a branching body
        and runs down the single-child chain below it.
        """
        children = [[] for _ in range(self.nbodies)]
        roots = []
        for i, p in enumerate(self.parent):
            (roots if p < 0 else children[p]).append(i)
        modules, starts = [], list(roots)
        while starts:
            i = starts.pop(0)
            chain = [i]
            while len(children[chain[-1]]) == 1:
                chain.append(children[chain[-1]][0])
            modules.append(chain)
            starts.extend(children[chain[-1]])
        return modules

    def describe(self) -> str:
        """Human-readable tree: bodies, joints, masses, DOF."""
        moved = "" if self.closed_chain is None else f" (the closed chain's: {self.closed_chain.total_mass:.4g} kg)"
        lines = [
            (f"model {show(self.name)}: {self.nbodies} bodies, nq = {self.nq}, nv (DOF) = {self.nv}, "
             f"total mass = {self.total_mass:.4g} kg{moved}, gravity = {self.gravity.tolist()} m/s^2"),
            f"base: {self.base} ({self.n_base_bodies} bodies, {self.n_base_dofs} unactuated DOFs)",
        ]
        depth = np.zeros(self.nbodies, dtype=int)
        for i in range(self.nbodies):
            p = self.parent[i]
            depth[i] = 0 if p < 0 else depth[p] + 1
            jt = JOINT_TYPE_NAMES[int(self.joint_type[i])]
            limits = ""
            if self.joint_type[i] != FREE_FLYER:
                iq, iv = self.idx_q[i], self.idx_v[i]
                unit = "rad" if self.joint_type[i] == REVOLUTE else "m"
                limits = (
                    f" [{self.lower[iq]:.4g}, {self.upper[iq]:.4g}] {unit}"
                    f", |v| <= {self.velocity_limit[iv]:.4g}, |effort| <= {self.effort_limit[iv]:.4g}"
                )
                axis = " axis " + np.array2string(self.axis[i], precision=3, suppress_small=True)
            else:
                axis = ""
            lines.append(
                f"{'  ' * (depth[i] + 1)}{self.body_names[i]}  <- {jt} {show(self.joint_names[i])}{axis}"
                f"  mass {self.mass[i]:.4g} kg{limits}"
            )
        merged = [f.name for f in self.frames]
        if merged:
            lines.append(f"frames (fixed links merged into bodies): {', '.join(merged)}")
        mods = self.kinematic_modules()
        lines.append(
            f"kinematic modules: {len(mods)} ("
            + "; ".join(self._module_label(m) for m in mods)
            + ")"
        )
        return "\n".join(lines)

    def _module_label(self, chain: list[int]) -> str:
        names = [self.body_names[i] for i in chain]
        if len(names) > 8:
            return f"{names[0]}-{names[1]}-...-{names[-1]} ({len(names)} bodies)"
        return "-".join(names)

    def __repr__(self) -> str:
        return f"Model({show(self.name)}, nbodies={self.nbodies}, nq={self.nq}, nv={self.nv})"
