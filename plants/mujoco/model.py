"""MuJoCo models as rtctl models: compile an MJCF or URDF with MuJoCo, then rebuild its kinematic tree.

:func:`compile_model` compiles a file with MuJoCo's own compiler (MJCF, or URDF through MuJoCo's URDF
importer, mesh geometry dropped: MuJoCo cannot resolve ``package://`` meshes and the dynamics do not use
them). :func:`model_from_mujoco` builds the :class:`rtctl.model.Model` of a compiled ``MjModel`` so that
rtctl's dynamics and MuJoCo's agree to round-off, with the same q and v ordering (both follow the body
tree depth-first) and these conventions:

* a hinge joint is ``revolute``, a slide joint ``prismatic``, with the joint's axis. MuJoCo moves a body
  by ``T(p) R(a, q - q0) T(-p)`` per hinge (``p`` the joint's ``pos`` in the body, ``q0`` its ``ref``) and
  by ``T(a (q - q0))`` per slide, in the order the joints are declared; rtctl puts the joint frame at
  ``p`` and folds ``R(a, -q0) T(-p)`` (or ``T(-a q0)``) into what follows, so q is MuJoCo's ``qpos`` itself;
* a body with several joints becomes a chain of rtctl bodies, the intermediate ones massless and named
  ``<body>/<joint>``; the last carries the MuJoCo body's name, mass and inertia;
* a body without joints is welded to its parent: its mass merges into the rtctl body that carries it and it
  stays a frame of that name; sites become frames too;
* a free joint on the first body is the ``free_flyer`` base. MuJoCo's free-joint ``qpos`` is
  ``[x, y, z, qw, qx, qy, qz]`` and its ``qvel`` ``[v_world; omega_body]``; rtctl's (Pinocchio's) are
  ``[x, y, z, qx, qy, qz, qw]`` and ``[v_body; omega_body]``: :mod:`rtctl.plants.mujoco.state` converts;
* the first body's joints slide x, slide z, hinge y make a ``planar`` base, three slides and three hinges
  an ``euler`` base; any other model has a ``fixed`` base;
* ``dof_armature`` is the model's armature (the free-flyer's must be zero), ``dof_damping`` and
  ``dof_frictionloss`` its joint damping and friction; joint ranges are the position limits; the effort
  limit is what the joint's actuators can apply: a motor's gear times its control range, a servo's
  (position, velocity, affine ``general``) gear times its ``forcerange`` (its control range is a set-point
  range), capped by the joint's ``actuatorfrcrange`` (:func:`_effort_limits`).

A linear joint-joint ``<equality>`` (``polycoef="a0 a1 0 0 0"``) becomes a mimic joint (``model.mimic``, the
coordinates stay MuJoCo's full ones, as for a URDF's ``<mimic>``); every other equality (connect, weld,
distance, tendon, flex: a closed chain or a fixed body), a tendon with a force of its own (stiffness,
damping, friction, armature, limits), ball joints, free joints below the first body and MuJoCo models with
a free body beside a tree are refused with :class:`MujocoModelError` naming the file and the element. Nothing here imports ``mujoco`` until it is
called; without it, the error says to install ``rtctl[mujoco]``.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from rtctl.model import Model, ModelBuilder, ModelError
from rtctl.options import show

from .bounded import BoundExceeded, run_bounded

__all__ = ["MujocoModelError", "require_mujoco", "compile_model", "model_from_mujoco", "load_mujoco_model"]

INSTALL_HINT = 'the MuJoCo plant needs the mujoco package: pip install "rtctl[mujoco]"'


class MujocoModelError(ModelError):
    """A MuJoCo model rtctl cannot represent, or a file MuJoCo cannot compile; the message names the element."""


def require_mujoco():
    """The ``mujoco`` module, or ImportError saying how to install it."""
    try:
        import mujoco
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from None
    return mujoco


def _strip_urdf_meshes(text: str, label: str) -> str:
    """The URDF without mesh geometry (``<visual>``/``<collision>`` holding a ``<mesh>``)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise MujocoModelError(f"{label}: not well-formed XML: {exc}") from None
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for elem in list(link.findall(tag)):
                if elem.find("geometry/mesh") is not None:
                    link.remove(elem)
    return ET.tostring(root, encoding="unicode")


MAX_BODIES = 2000          # bodies, joints or geoms of a model rtctl compiles (Menagerie's largest have a few hundred)
MAX_INCLUDE_DEPTH = 8      # <include> within <include>
# MuJoCo's parse and compile of one file run in a child process (bounded.run_bounded) that may add this much address
# space and take this much CPU; the most of Menagerie's robots (Apptronik Apollo) took 1569 MB and 6.7 s here.
MAX_COMPILE_MEMORY_MB = 4096
MAX_COMPILE_CPU_S = 60
MAX_COMPILE_WALL_S = 600       # wall time, for a file that blocks (a FIFO) or a starved child
_FILE_ELEMENTS = ("include", "model")   # elements whose file MuJoCo parses whole: <include>, <asset><model>


def _check_replicates(path: Path, top: Path | None = None, factor: int = 1, depth: int = 0) -> None:
    """MujocoModelError naming the file when nested ``<replicate>`` counts (in it or the files it includes or
    attaches as ``<model>`` assets) multiply past MAX_BODIES copies: MuJoCo expands them while it parses, and
    1000 x 1000 copies of one body take minutes and gigabytes before its compiler could say anything. A file
    this check cannot read as XML (expat) is refused, as is a count that is not an integer: MuJoCo's parser
    (TinyXML2) reads some of what expat refuses (a bare ``&``), so skipping such a file skipped the check."""
    top = top or path
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise MujocoModelError(f"{path}: not well-formed XML (rtctl reads every file MuJoCo will before MuJoCo "
                               f"does): {exc}") from None
    except (OSError, ValueError):
        return                                        # a file that cannot be opened: MuJoCo's own message

    def walk(element, factor):
        for child in element:
            if child.tag == "replicate":
                text = child.get("count", "1")
                if not text.strip().lstrip("+").isdigit():
                    raise MujocoModelError(f"{path}: <replicate count={show(text)}>: not a count (digits)")
                count = int(text)
                if count * factor > MAX_BODIES:
                    raise MujocoModelError(f"{path}: <replicate count=\"{count}\"> makes {count * factor} copies "
                                           f"(nested replicates multiply); rtctl compiles at most {MAX_BODIES}")
                walk(child, count * factor)
            elif child.tag in _FILE_ELEMENTS and child.get("file"):
                if depth >= MAX_INCLUDE_DEPTH:
                    raise MujocoModelError(f"{path}: <{child.tag} file={show(child.get('file'))}> nests more than "
                                           f"{MAX_INCLUDE_DEPTH} files deep")
                included = Path(child.get("file"))
                _check_replicates(included if included.is_absolute() else top.parent / included, top,
                                  factor if child.tag == "include" else 1, depth + 1)
            else:
                walk(child, factor)

    walk(root, factor)


def _check_counts(spec, path: Path) -> None:
    """MujocoModelError naming the file when it has more than MAX_BODIES bodies, joints or geoms (checked
    before MuJoCo compiles it: its memory grows with their square)."""
    for kind in ("bodies", "joints", "geoms"):
        n = len(getattr(spec, kind))
        if n > MAX_BODIES:
            raise MujocoModelError(f"{path}: {n} {kind}; rtctl compiles models of at most {MAX_BODIES}")


_MUJOCO_ELEMENT = re.compile(r"Element name '([^']*)', id (\d+)|Element '([^']*)'|line (\d+)")


def compile_model(source, *, floating_base: str | None = None, lock_joints=()):
    """The compiled ``MjModel`` of an MJCF (``.xml``) or URDF (``.urdf``) file.

    ``floating_base="free_flyer"`` adds a free joint to the first body (a URDF's root link, which MuJoCo
    otherwise welds to the world). ``lock_joints``: names of hinge or slide joints removed from the model, their
    bodies welded at the joints' reference position (``qpos0``) with their mass kept -- a gripper's fingers on an
    arm, say (:func:`_lock_joints`). Errors name the file and MuJoCo's message (its element and line)."""
    mujoco = require_mujoco()
    path = Path(os.fspath(source))
    if floating_base not in (None, "fixed", "free_flyer"):
        raise MujocoModelError(f"{path}: floating_base must be 'fixed' or 'free_flyer' for a MuJoCo model "
                               f"(a planar or Euler base is declared by the model's own joints), got {floating_base!r}")
    if not path.is_file():
        raise MujocoModelError(f"{path}: no such model file")
    text = None
    try:
        if path.suffix.lower() == ".urdf":
            text = _strip_urdf_meshes(path.read_text(), str(path))
        else:
            _check_replicates(path)
    except (OSError, UnicodeError) as exc:
        raise MujocoModelError(f"{path}: cannot read it: {exc}") from None
    except RecursionError:
        raise MujocoModelError(f"{path}: elements nested too deeply to check") from None
    try:
        return run_bounded(_compile, mujoco, path, text, floating_base, tuple(lock_joints),
                           memory_mb=MAX_COMPILE_MEMORY_MB, cpu_s=MAX_COMPILE_CPU_S, wall_s=MAX_COMPILE_WALL_S)
    except BoundExceeded as exc:
        raise MujocoModelError(f"{path}: MuJoCo's compile {exc}{_bounds()}") from None


def _bounds() -> str:
    return (f" (rtctl runs it in a child process of at most {MAX_COMPILE_MEMORY_MB} MB and {MAX_COMPILE_CPU_S} s "
            f"of CPU)")


def _compile(mujoco, path: Path, urdf_text: str | None, floating_base, lock_joints: tuple):
    """:func:`compile_model`'s work, in the bounded child process."""
    try:
        spec = mujoco.MjSpec.from_file(str(path)) if urdf_text is None else mujoco.MjSpec.from_string(urdf_text)
        _check_counts(spec, path)
        if floating_base == "free_flyer":
            root = spec.worldbody.first_body()
            if root is None:
                raise MujocoModelError(f"{path}: no body to put a free joint on")
            if any(True for _ in root.joints):
                raise MujocoModelError(f"{path}: body {show(root.name)} already has joints; a free_flyer base goes on "
                                       f"a body welded to the world")
            root.add_freejoint()
        if lock_joints:
            _lock_joints(mujoco, spec, tuple(lock_joints), path)
        return spec.compile()
    except MujocoModelError:
        raise
    except ValueError as exc:  # MuJoCo's parser and compiler: the element and line
        raise MujocoModelError(f"{path}: MuJoCo cannot compile it: {' '.join(str(exc).split())}") from None
    except Exception as exc:  # noqa: BLE001  (MemoryError, or RuntimeError: an allocation past the bound)
        raise MujocoModelError(f"{path}: MuJoCo's compile failed ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())}){_bounds()}") from None


def _lock_joints(mujoco, spec, names: tuple, path) -> None:
    """Remove the joints ``names`` from ``spec`` (their bodies weld to their parents at ``qpos0``) and with them
    what acts on those joints alone: joint equalities among them, tendons over them, the actuators on those
    joints or tendons, the sensors of any of these; connect and weld equalities left inside one rigid body; and
    the keyframes (their qpos no longer fits). MujocoModelError naming the element when a joint is unknown or
    not a hinge or slide, or a tendon or joint equality couples a locked joint with a free one (lock both)."""
    m = spec.compile()
    JOINT, TENDON, ACTUATOR = (mujoco.mjtObj.mjOBJ_JOINT, mujoco.mjtObj.mjOBJ_TENDON, mujoco.mjtObj.mjOBJ_ACTUATOR)
    one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    locked = set()
    for name in names:
        if not isinstance(name, str) or not name.isprintable():
            raise MujocoModelError(f"{path}: lock_joints: {name!r} is not a joint name (printable text)")
        j = mujoco.mj_name2id(m, JOINT, name)
        if j < 0:
            known = [mujoco.mj_id2name(m, JOINT, k) for k in range(m.njnt)]
            raise MujocoModelError(f"{path}: lock_joints: no joint named {name!r}; its joints: {known}")
        if int(m.jnt_type[j]) not in one_dof:
            raise MujocoModelError(f"{path}: lock_joints: joint {name!r} is not a hinge or slide joint")
        locked.add(j)
    tendons = set()
    for t in range(m.ntendon):
        wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
        joints = {int(m.wrap_objid[w]) for w in wraps if int(m.wrap_type[w]) == int(mujoco.mjtWrap.mjWRAP_JOINT)}
        if joints & locked:
            if joints - locked or len(joints) != len(wraps):
                raise MujocoModelError(f"{path}: lock_joints: tendon {mujoco.mj_id2name(m, TENDON, t) or f'#{t}'!r} "
                                       f"couples a locked joint with joints or sites that stay; lock all of them")
            tendons.add(t)
    equalities = set()
    for e in range(m.neq):
        if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT):
            joints = {int(i) for i in (m.eq_obj1id[e], m.eq_obj2id[e]) if i >= 0}
            if joints & locked:
                if joints - locked:
                    names_ = [mujoco.mj_id2name(m, JOINT, k) for k in sorted(joints)]
                    raise MujocoModelError(f"{path}: lock_joints: equality joint #{e} couples joints {names_}; "
                                           f"lock both or neither")
                equalities.add(e)
    actuators = {a for a in range(m.nu)
                 if (int(m.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT) and m.actuator_trnid[a, 0] in locked)
                 or (int(m.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_TENDON) and m.actuator_trnid[a, 0] in tendons)}
    gone = {JOINT: locked, TENDON: tendons, ACTUATOR: actuators}
    sensors = {s for s in range(m.nsensor) for kind, ids in gone.items()
               if int(m.sensor_objtype[s]) == int(kind) and m.sensor_objid[s] in ids}
    doomed = ([spec.sensors[s] for s in sorted(sensors)] + [spec.equalities[e] for e in sorted(equalities)]
              + [spec.actuators[a] for a in sorted(actuators)] + [spec.tendons[t] for t in sorted(tendons)]
              + [spec.joint(mujoco.mj_id2name(m, JOINT, j)) for j in sorted(locked)] + list(spec.keys))
    for element in doomed:
        spec.delete(element)
    m = spec.compile()
    rigid = []
    for e in range(m.neq):
        if int(m.eq_type[e]) in (int(mujoco.mjtEq.mjEQ_CONNECT), int(mujoco.mjtEq.mjEQ_WELD)):
            ids = [int(m.eq_obj1id[e]), int(m.eq_obj2id[e])]
            if int(m.eq_objtype[e]) == int(mujoco.mjtObj.mjOBJ_SITE):
                ids = [int(m.site_bodyid[i]) for i in ids]
            if m.body_weldid[ids[0]] == m.body_weldid[ids[1]]:
                rigid.append(spec.equalities[e])
    for element in rigid:
        spec.delete(element)


def _quat_wxyz_to_matrix(quat) -> np.ndarray:
    w, x, y, z = (float(a) for a in quat)
    n = w * w + x * x + y * y + z * z
    w, x, y, z = (c / np.sqrt(n) for c in (w, x, y, z))
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _axis_angle(axis, angle) -> np.ndarray:
    """Rodrigues' rotation about the unit ``axis`` by ``angle``."""
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _name(mujoco, m, kind, index, fallback, label: str) -> str:
    """The name of MuJoCo object ``index`` of ``kind`` (``fallback`` if unnamed); MujocoModelError naming the
    file ``label``, the kind and index when the name is not UTF-8."""
    try:
        return mujoco.mj_id2name(m, kind, index) or fallback
    except UnicodeDecodeError as exc:
        what = str(getattr(kind, "name", kind)).removeprefix("mjOBJ_").lower()
        raise MujocoModelError(f"{label}: the name of {what} #{index} is not UTF-8 ({exc.reason} at byte "
                               f"{exc.start}); save the file as UTF-8") from None


def _base_kind(types, axes) -> str:
    """The rtctl base the first body's joints make (see the module docstring)."""
    slide, hinge = 2, 3
    unit = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}
    if list(types) == [slide, slide, hinge] and all(np.allclose(a, unit[c]) for a, c in zip(axes, "xzy")):
        return "planar"
    if list(types) == [slide] * 3 + [hinge] * 3 and all(np.allclose(a, unit[c]) for a, c in zip(axes, "xyz")):
        return "euler"
    return "fixed"


def is_plain_motor(mujoco, m, a) -> bool:
    """Whether actuator ``a`` is a direct torque (force) source: fixed gain, no bias, no activation dynamics
    (``<motor>``, or a ``<general>`` declared so). Its control is then a torque divided by gear and gain; any
    other actuator (``<position>``, ``<velocity>``, a ``<general>`` with an affine bias: a servo) takes a
    set-point as its control."""
    return (int(m.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED)
            and int(m.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_NONE)
            and int(m.actuator_dyntype[a]) == int(mujoco.mjtDyn.mjDYN_NONE))


def _effort_limits(mujoco, m) -> np.ndarray:
    """Per DOF, the largest generalized force MuJoCo's actuators can apply (inf: unlimited), from what bounds
    the force rather than the control:

    * each joint-transmission actuator contributes |gear| times its largest force: for a plain motor
      (:func:`is_plain_motor`) |gain| times its largest control, capped by its ``forcerange``; for a servo
      (position, velocity or affine-bias ``general``) its ``forcerange`` only (its ``ctrlrange`` is a set-point
      range, a position for a position servo); an actuator with neither limit makes the DOF unlimited;
    * the joint's ``actuatorfrcrange``, if limited, caps the sum (MuJoCo clamps the joint's total actuator
      force to it);
    * a DOF no actuator drives: its ``actuatorfrcrange`` or inf."""
    one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    limit = np.full(m.nv, np.inf)
    from_actuators = np.zeros(m.nv)
    unlimited = np.zeros(m.nv, dtype=bool)
    driven = np.zeros(m.nv, dtype=bool)
    for a in range(m.nu):
        if int(m.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            continue
        j = m.actuator_trnid[a, 0]
        if int(m.jnt_type[j]) not in one_dof:
            continue
        d = m.jnt_dofadr[j]
        driven[d] = True
        force = np.inf
        if is_plain_motor(mujoco, m, a) and m.actuator_ctrllimited[a]:
            force = abs(m.actuator_gainprm[a, 0]) * np.abs(m.actuator_ctrlrange[a]).max()
        if m.actuator_forcelimited[a]:
            force = min(force, np.abs(m.actuator_forcerange[a]).max())
        if np.isfinite(force):
            from_actuators[d] += abs(m.actuator_gear[a, 0]) * force
        else:
            unlimited[d] = True
    limit[driven & ~unlimited] = from_actuators[driven & ~unlimited]
    for j in range(m.njnt):
        if m.jnt_actfrclimited[j] and int(m.jnt_type[j]) in one_dof:
            d = m.jnt_dofadr[j]
            limit[d] = min(limit[d], np.abs(m.jnt_actfrcrange[j]).max())
    return limit


def _joint_equalities(mujoco, m, joint_names: list, label: str) -> list:
    """The model's ``<equality>`` constraints as mimic joints; MujocoModelError naming the file, the equality
    (name or index, kind) and its objects for any that rtctl cannot represent.

    Only a joint-joint equality whose polynomial is linear (``polycoef="a0 a1 0 0 0"``, a1 != 0) maps onto
    rtctl's mimic coupling: MuJoCo keeps ``q1 - q1_0 = a0 + a1 (q2 - q2_0)`` (``q_0`` the joints' ``qpos0``), so
    joint1 mimics joint2 with multiplier a1 and offset ``q1_0 + a0 - a1 q2_0``. A connect, weld, distance,
    tendon or flex equality closes a loop (or fixes a body) that rtctl's kinematic trees do not have; a joint
    equality without joint2 locks the joint; a non-linear polynomial is no mimic."""
    from rtctl.model.mimic import MimicJoint
    one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    mimics = []
    for e in range(m.neq):
        kind = str(mujoco.mjtEq(int(m.eq_type[e])).name).removeprefix("mjEQ_").lower()
        name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_EQUALITY, e, "", label)
        where = f"{label}: equality {kind} " + (f"{show(name)} (#{e})" if name else f"#{e}")
        obj_type = mujoco.mjtObj(int(m.eq_objtype[e]))
        if obj_type not in (mujoco.mjtObj.mjOBJ_BODY, mujoco.mjtObj.mjOBJ_SITE):   # MuJoCo leaves it unset
            obj_type = {mujoco.mjtEq.mjEQ_JOINT: mujoco.mjtObj.mjOBJ_JOINT,
                        mujoco.mjtEq.mjEQ_TENDON: mujoco.mjtObj.mjOBJ_TENDON,
                        mujoco.mjtEq.mjEQ_FLEX: mujoco.mjtObj.mjOBJ_FLEX}.get(
                mujoco.mjtEq(int(m.eq_type[e])), mujoco.mjtObj.mjOBJ_BODY)
        objects = [_name(mujoco, m, obj_type, int(i), f"#{int(i)}", label) for i in (m.eq_obj1id[e], m.eq_obj2id[e])
                   if i >= 0]
        what = str(obj_type.name).removeprefix("mjOBJ_").lower()
        plural = {"body": "bodies"}.get(what, f"{what}s") if len(objects) > 1 else what
        where += f" ({plural} {' and '.join(repr(o) for o in objects)})" if objects else ""
        data = np.array(m.eq_data[e, :5], dtype=float)
        if int(m.eq_type[e]) != int(mujoco.mjtEq.mjEQ_JOINT):
            raise MujocoModelError(f"{where}: a {kind} constraint closes a kinematic loop (or fixes a body) that "
                                   f"rtctl's kinematic trees cannot represent; remove it or import the robot without "
                                   f"that mechanism (e.g. an arm's file without its gripper)")
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        if j2 < 0 or np.any(data[2:] != 0.0) or data[1] == 0.0 or not m.eq_active0[e] \
                or int(m.jnt_type[j1]) not in one_dof or int(m.jnt_type[j2]) not in one_dof:
            raise MujocoModelError(f"{where}: polycoef {data.tolist()}{'' if m.eq_active0[e] else ', inactive'}: "
                                   f"only an active linear joint-joint equality (polycoef a0 a1 0 0 0, a1 != 0, two "
                                   f"hinge or slide joints) maps onto rtctl's mimic joints")
        offset = float(m.qpos0[m.jnt_qposadr[j1]] + data[0] - data[1] * m.qpos0[m.jnt_qposadr[j2]])
        mimics.append(MimicJoint(joint_names[j1], joint_names[j2], float(data[1]), offset))
    return mimics


def _check_tendons(mujoco, m, label: str) -> None:
    """MujocoModelError naming the tendon if one applies a force of its own (stiffness, damping, friction loss,
    armature, a length limit): rtctl's dynamics have no tendons. A tendon without them only transmits an
    actuator's force (Menagerie's grippers split one actuator over two fingers so) and changes no dynamics."""
    for t in range(m.ntendon):
        own = {"stiffness": m.tendon_stiffness[t], "damping": m.tendon_damping[t],
               "frictionloss": m.tendon_frictionloss[t], "armature": m.tendon_armature[t],
               "limited": float(m.tendon_limited[t])}
        for key in ("tendon_stiffnesspoly", "tendon_dampingpoly"):
            if hasattr(m, key):
                own[key.removeprefix("tendon_")] = float(np.abs(getattr(m, key)[t]).max())
        active = [k for k, v in own.items() if v != 0.0]
        if active:
            name = _name(mujoco, m, mujoco.mjtObj.mjOBJ_TENDON, t, "", label)
            where = f"tendon {show(name)} (#{t})" if name else f"tendon #{t}"
            raise MujocoModelError(f"{label}: {where} has {', '.join(active)}: it applies forces rtctl's dynamics "
                                   f"do not model (only a tendon that merely transmits an actuator's force is "
                                   f"accepted); remove them or the tendon")


def model_from_mujoco(m, name: str | None = None, label: str = "<MjModel>") -> Model:
    """The rtctl model of the compiled MuJoCo model ``m`` (conventions: the module docstring).

    ``label`` (the file) prefixes the errors, which name the MuJoCo body or joint."""
    mujoco = require_mujoco()
    OBJ_BODY, OBJ_JOINT = mujoco.mjtObj.mjOBJ_BODY, mujoco.mjtObj.mjOBJ_JOINT
    FREE, BALL, SLIDE, HINGE = (int(t) for t in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL,
                                                  mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE))
    body_names = [_name(mujoco, m, OBJ_BODY, b, f"body{b}", label) for b in range(m.nbody)]
    joint_names = [_name(mujoco, m, OBJ_JOINT, j, f"{body_names[m.jnt_bodyid[j]]}_joint{j}", label)
                   for j in range(m.njnt)]
    for j in range(m.njnt):
        where = f"{label}: joint {show(joint_names[j])} of body {show(body_names[m.jnt_bodyid[j]])}"
        if m.jnt_type[j] == BALL:
            raise MujocoModelError(f"{where}: ball joints are not supported by rtctl's joint types (revolute, "
                                   f"prismatic, free_flyer at the root); replace it with three hinges")
        if m.jnt_type[j] == FREE and (m.jnt_bodyid[j] != 1 or m.body_jntnum[1] != 1):
            raise MujocoModelError(f"{where}: a free joint is supported only as the one joint of the first body (the "
                                   f"floating base); a second free body (a loose object) is not part of a robot")
    if m.njnt == 0:
        raise MujocoModelError(f"{label}: the model has no joints (nothing moves)")
    if not np.all(np.isfinite(m.opt.gravity)):
        raise MujocoModelError(f"{label}: <option gravity> must be 3 finite numbers, got {list(m.opt.gravity)}")
    for j in range(m.njnt):
        lower, upper = (float(x) for x in m.jnt_range[j])
        if (m.jnt_limited[j] or (lower, upper) != (0.0, 0.0)) and not lower < upper:
            raise MujocoModelError(f"{label}: joint {show(joint_names[j])}: range [{lower}, {upper}] is not an "
                                   f"interval lower < upper (MuJoCo would leave the joint without position limits)")
    for a in range(m.nu):
        where = f"{label}: actuator {show(_name(mujoco, m, mujoco.mjtObj.mjOBJ_ACTUATOR, a, f'actuator{a}', label))}"
        if int(m.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT) and 0 <= m.actuator_trnid[a, 0] < m.njnt:
            where += f" (on joint {show(joint_names[m.actuator_trnid[a, 0]])})"
        if not np.all(np.isfinite(m.actuator_gear[a])):
            raise MujocoModelError(f"{where}: gear must be finite, got "
                                   f"{m.actuator_gear[a].tolist()}")
        lower, upper = (float(x) for x in m.actuator_ctrlrange[a])
        if (m.actuator_ctrllimited[a] or (lower, upper) != (0.0, 0.0)) and not lower < upper:
            raise MujocoModelError(f"{where}: ctrlrange [{lower}, {upper}] is not an interval "
                                   f"lower < upper (MuJoCo would leave the actuator without control limits)")

    mimics = _joint_equalities(mujoco, m, joint_names, label)
    _check_tendons(mujoco, m, label)

    first = [j for j in range(m.body_jntadr[1], m.body_jntadr[1] + m.body_jntnum[1])] if m.nbody > 1 else []
    base = "free_flyer" if first and m.jnt_type[first[0]] == FREE else \
        _base_kind([m.jnt_type[j] for j in first], [m.jnt_axis[j] for j in first]) \
        if m.body_parentid[1] == 0 else "fixed"
    builder = ModelBuilder(name or label, gravity=np.array(m.opt.gravity), require_physical_inertia=False)
    effort_limit = _effort_limits(mujoco, m)

    # carrier[b]: the rtctl body carrying MuJoCo body b (-1: the world); offset[b]: b's frame in it (R, p).
    carrier = np.full(m.nbody, -1)
    offset_rot = np.zeros((m.nbody, 3, 3))
    offset_pos = np.zeros((m.nbody, 3))
    offset_rot[0] = np.eye(3)
    for b in range(1, m.nbody):
        parent = m.body_parentid[b]
        body_rot = _quat_wxyz_to_matrix(m.body_quat[b])
        rot = offset_rot[parent] @ body_rot
        pos = offset_rot[parent] @ m.body_pos[b] + offset_pos[parent]
        rtctl_parent = carrier[parent]
        mass, com, inertia = _body_inertia(m, b)
        joints = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        if not joints:
            carrier[b], offset_rot[b], offset_pos[b] = rtctl_parent, rot, pos
            builder.add_fixed(body_names[b], rtctl_parent, rotation=rot, translation=pos, mass=mass, com=com,
                              inertia=inertia)
            continue
        for k, j in enumerate(joints):
            last = k == len(joints) - 1
            jtype = int(m.jnt_type[j])
            axis = np.array(m.jnt_axis[j], dtype=float)
            anchor = np.array(m.jnt_pos[j], dtype=float) if jtype == HINGE else np.zeros(3)
            ref = float(m.qpos0[m.jnt_qposadr[j]]) if jtype in (HINGE, SLIDE) else 0.0
            # The joint frame at the anchor, in the previous rtctl body (rot, pos: what precedes it).
            joint_rot, joint_pos = rot, rot @ anchor + pos
            limits = {}
            if jtype in (HINGE, SLIDE):
                d = m.jnt_dofadr[j]
                lower, upper = (m.jnt_range[j] if m.jnt_limited[j] else (-np.inf, np.inf))
                limits = dict(lower=float(lower), upper=float(upper), effort_limit=float(effort_limit[d]),
                              damping=float(m.dof_damping[d]), friction=float(m.dof_frictionloss[d]))
            carried = (mass, com, inertia) if last else (0.0, np.zeros(3), np.zeros((3, 3)))
            # What follows the joint motion, in the new body: R(a, -q0) T(-p) (hinge) or T(-a q0) (slide).
            if jtype == HINGE:
                rot = _axis_angle(axis / np.linalg.norm(axis), -ref)
                pos = -rot @ anchor
            elif jtype == SLIDE:
                rot, pos = np.eye(3), -axis * ref
            else:
                rot, pos = np.eye(3), np.zeros(3)
            b_com = rot @ carried[1] + pos
            b_inertia = rot @ carried[2] @ rot.T
            kind = {HINGE: "revolute", SLIDE: "prismatic", FREE: "free_flyer"}[jtype]
            try:
                index = builder.add_body(body_names[b] if last else f"{body_names[b]}/{joint_names[j]}", rtctl_parent,
                                         kind, joint_name=joint_names[j], axis=axis, rotation=joint_rot,
                                         translation=joint_pos, mass=carried[0], com=b_com, inertia=b_inertia,
                                         **limits)
            except ModelError as exc:
                raise MujocoModelError(f"{label}: body {show(body_names[b])}, joint {show(joint_names[j])}: "
                                       f"{exc}") from None
            rtctl_parent = index
        carrier[b], offset_rot[b], offset_pos[b] = rtctl_parent, rot, pos
    for site in range(m.nsite):
        b = m.site_bodyid[site]
        builder.add_frame(_name(mujoco, m, mujoco.mjtObj.mjOBJ_SITE, site, f"site{site}", label), int(carrier[b]),
                          rotation=offset_rot[b] @ _quat_wxyz_to_matrix(m.site_quat[site]),
                          translation=offset_rot[b] @ m.site_pos[site] + offset_pos[b])
    builder.base = base
    try:
        model = builder.build()
    except ModelError as exc:
        raise MujocoModelError(f"{label}: {exc}") from None
    armature = np.array(m.dof_armature, dtype=float)
    if model.has_free_flyer and np.any(armature[:6] != 0):
        raise MujocoModelError(f"{label}: joint {show(joint_names[first[0]])} (free) has armature "
                               f"{armature[:6].tolist()}; a floating base has no rotor inertia")
    model.set_armature(armature)
    if mimics:
        from rtctl.model.mimic import MimicCoupling
        try:
            model.mimic = MimicCoupling(model, mimics)
        except ModelError as exc:
            raise MujocoModelError(f"{label}: the joint equalities as mimic joints: {exc}") from None
    return model


def _body_inertia(m, b):
    """(mass, centre of mass, rotational inertia about it) of MuJoCo body ``b`` in its own frame."""
    r = _quat_wxyz_to_matrix(m.body_iquat[b])
    return float(m.body_mass[b]), np.array(m.body_ipos[b], dtype=float), r @ np.diag(m.body_inertia[b]) @ r.T


def load_mujoco_model(source, *, floating_base: str | None = None, name: str | None = None, lock_joints=()):
    """``(rtctl model, MjModel)`` of an MJCF or URDF file compiled by MuJoCo (see :func:`compile_model`)."""
    m = compile_model(source, floating_base=floating_base, lock_joints=lock_joints)
    label = os.fspath(source)
    return model_from_mujoco(m, name or Path(label).stem, label=label), m
