"""An rtctl model as a MuJoCo model: the inverse of :func:`rtctl.plants.mujoco.model.model_from_mujoco`.

:func:`mjcf_from_model` writes a :class:`rtctl.model.Model` as MJCF text (every number at full double
precision, angles in radians) with the same joints in the same order, so that the rtctl model rebuilt from the compiled spec
has rtctl's dynamics to round-off. MuJoCo refuses massless moving bodies, so a chain of massless rtctl
bodies (an Euler or planar floating base, a massless hip) whose joints are not rotated relative to each
other becomes one MuJoCo body carrying all their joints, each at its anchor ``pos``:
``T(p_1) J_1 T(-p_1) T(p_2) J_2 T(-p_2) ...`` with ``p_k`` the summed joint translations, which equals
rtctl's ``J_1 T(t_2) J_2 ...`` followed by ``T(-p_k)`` (slides commute with translations). Frames become
sites; contact spheres, a floor and one motor actuator per actuated joint are added on request.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from rtctl.model import FREE_FLYER, PRISMATIC, REVOLUTE, Model
from rtctl.options import show
from rtctl.rt.interfaces import actuated_indices

from .model import MujocoModelError

__all__ = ["mjcf_from_model"]


def _matrix_to_quat_wxyz(r) -> list:
    """A rotation matrix as a unit quaternion [w, x, y, z] (Shepperd's method)."""
    r = np.asarray(r, dtype=float)
    trace = np.trace(r)
    if trace > 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.asarray(q)
    return (q / np.linalg.norm(q)).tolist()


def _massless(model: Model, i: int) -> bool:
    return model.mass[i] == 0.0 and not np.any(model.inertia_com[i])


def _numbers(values) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(values))


def mjcf_from_model(model: Model, *, contact_spheres=(), floor: bool = True, timestep: float = 1e-3,
                    motors: bool = True, min_inertia: float = 0.0, friction: float = 1.0,
                    comment: str | None = None) -> str:
    """``model`` as MJCF text (see the module docstring).

    ``contact_spheres``: ``(body name, centre (body frame, m), radius m)`` collision spheres, massless; they
    collide with the floor only. ``floor``: a ground plane at z = 0 (``friction`` its and the spheres'
    sliding friction coefficient). ``motors``: one motor per actuated joint, gear 1, control range the
    joint's effort limit (unlimited where infinite). ``min_inertia``: principal moments below it (kg m^2)
    are raised to it -- MuJoCo requires positive ones; a planar robot's moments about the axes it cannot
    turn about do not enter its dynamics. ``comment``: a first line (the model's origin and licence).
    """
    root = ET.Element("mujoco", model=model.name)
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    ET.SubElement(root, "option", timestep=repr(float(timestep)), gravity=_numbers(model.gravity))
    world = ET.SubElement(root, "worldbody")
    children = [[] for _ in range(model.nbodies)]
    for i, p in enumerate(model.parent):
        if p >= 0:
            children[p].append(i)

    def merges_into_child(i: int) -> bool:
        return (model.joint_type[i] != FREE_FLYER and _massless(model, i) and len(children[i]) == 1
                and np.allclose(model.joint_rotation[children[i][0]], np.eye(3), atol=1e-12)
                and not any(f.body == i for f in model.frames))

    if floor:
        ET.SubElement(world, "geom", name="floor", type="plane", size="0 0 0.05", contype="1", conaffinity="0",
                      friction=_numbers((friction, 0.005, 1e-4)))
    mj_body = {}            # rtctl body -> (MJCF body, offset p: the MuJoCo frame is the rtctl frame T(-p))
    for i in range(model.nbodies):
        p = model.parent[i]
        if p >= 0 and merges_into_child(p):
            continue        # its joint was written with the chain's first body
        chain = [i]
        while merges_into_child(chain[-1]):
            chain.append(children[chain[-1]][0])
        parent_body, parent_offset = (world, np.zeros(3)) if p < 0 else mj_body[p]
        body = ET.SubElement(parent_body, "body", name=model.body_names[chain[-1]],
                             pos=_numbers(model.joint_translation[i] + parent_offset),
                             quat=_numbers(_matrix_to_quat_wxyz(model.joint_rotation[i])))
        anchor = np.zeros(3)
        joints = []
        for k, b in enumerate(chain):
            if k:
                anchor = anchor + model.joint_translation[b]
            joints.append(_joint(model, b, anchor))
        body.append(_inertial(model, chain[-1], anchor, min_inertia))
        body.extend(joints)
        for b in chain:
            mj_body[b] = (body, anchor)
    for f in model.frames:
        parent_body, offset = (world, np.zeros(3)) if f.body < 0 else mj_body[f.body]
        ET.SubElement(parent_body, "site", name=f.name, pos=_numbers(f.translation + offset),
                      quat=_numbers(_matrix_to_quat_wxyz(f.rotation)))
    for name, centre, radius in contact_spheres:
        parent_body, offset = mj_body[model.body_index(name)]
        ET.SubElement(parent_body, "geom", type="sphere", size=repr(float(radius)), mass="0", contype="0",
                      conaffinity="1", pos=_numbers(np.asarray(centre, dtype=float) + offset),
                      friction=_numbers((friction, 0.005, 1e-4)))
    if motors:
        actuators = ET.SubElement(root, "actuator")
        _, v_index, names = actuated_indices(model)
        for iv, name in zip(v_index, names):
            limit = float(model.effort_limit[iv])
            motor = ET.SubElement(actuators, "motor", name=name, joint=name, gear="1")
            if np.isfinite(limit):
                motor.set("ctrlrange", _numbers((-limit, limit)))
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    if comment:
        text = f"<!-- {comment} -->\n{text}"
    return text + "\n"


def _joint(model: Model, i: int, anchor) -> ET.Element:
    jtype = int(model.joint_type[i])
    if jtype == FREE_FLYER:
        return ET.Element("freejoint", name=model.joint_names[i])
    kind = {REVOLUTE: "hinge", PRISMATIC: "slide"}.get(jtype)
    if kind is None:
        raise MujocoModelError(f"model {show(model.name)}: joint {show(model.joint_names[i])} has a type MuJoCo has no "
                               f"joint for ({jtype})")
    iq, iv = model.idx_q[i], model.idx_v[i]
    joint = ET.Element("joint", name=model.joint_names[i], type=kind, axis=_numbers(model.axis[i]),
                       pos=_numbers(anchor))
    for key, value in (("armature", model.armature[iv]), ("damping", model.damping[iv]),
                       ("frictionloss", model.friction[iv])):
        if value:
            joint.set(key, repr(float(value)))
    lower, upper = float(model.lower[iq]), float(model.upper[iq])
    if np.isfinite(lower) and np.isfinite(upper):
        joint.set("range", _numbers((lower, upper)))
    return joint


def _inertial(model: Model, i: int, offset, min_inertia: float) -> ET.Element:
    """Body ``i``'s mass, centre of mass (shifted into the MuJoCo frame by ``offset``) and inertia."""
    moments, axes = np.linalg.eigh(model.inertia_com[i])
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    return ET.Element("inertial", pos=_numbers(model.com[i] + offset), quat=_numbers(_matrix_to_quat_wxyz(axes)),
                      mass=repr(float(model.mass[i])), diaginertia=_numbers(np.maximum(moments, min_inertia)))
