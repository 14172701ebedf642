"""Write a :class:`~rtctl.model.Model` as URDF text that :func:`rtctl.model.urdf.load_urdf` reads back."""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

import numpy as np

from . import FREE_FLYER, PRISMATIC, REVOLUTE, Model

# URDF parsers (urdfdom) reject "inf", so an unbounded limit is written as the largest double
# and read back as infinite.
UNBOUNDED = float(np.finfo(np.float64).max)


def model_to_urdf(model: Model) -> str:
    """Write a Model as URDF text that :func:`load_urdf` reads back to the same arrays and frames.

    Bodies hang from a ``world`` link (a free-flyer root as a ``floating`` joint); merged frames
    become massless links on fixed joints; damping, friction and mimic couplings are written too. Unbounded
    joints are written with the largest double as limit -- URDF parsers reject
    ``inf`` -- and revolute joints always as ``revolute``, so every joint keeps
    one position coordinate in other URDF readers too.
    """
    lines = [f'<robot name={quoteattr(model.name)}>', '  <link name="world"/>']
    fmt = lambda v: " ".join(f"{x:.17g}" for x in v)  # noqa: E731
    for i in range(model.nbodies):
        c = model.com[i]
        inertia = model.inertia_com[i]
        lines += [
            f'  <link name={quoteattr(model.body_names[i])}>',
            "    <inertial>",
            f'      <origin xyz="{fmt(c)}" rpy="0 0 0"/>',
            f'      <mass value="{model.mass[i]:.17g}"/>',
            f'      <inertia ixx="{inertia[0, 0]:.17g}" ixy="{inertia[0, 1]:.17g}" ixz="{inertia[0, 2]:.17g}" '
            f'iyy="{inertia[1, 1]:.17g}" iyz="{inertia[1, 2]:.17g}" izz="{inertia[2, 2]:.17g}"/>',
            "    </inertial>",
            "  </link>",
        ]

    def joint(name, kind, parent, child, rotation, translation):
        return [f'  <joint name={quoteattr(name)} type="{kind}">',
                f'    <parent link={quoteattr(parent)}/>', f'    <child link={quoteattr(child)}/>',
                f'    <origin xyz="{fmt(translation)}" rpy="{fmt(matrix_to_rpy(rotation))}"/>']

    for i in range(model.nbodies):
        p = model.parent[i]
        jt = int(model.joint_type[i])
        kind = {REVOLUTE: "revolute", PRISMATIC: "prismatic", FREE_FLYER: "floating"}[jt]
        lines += joint(model.joint_names[i], kind, "world" if p < 0 else model.body_names[p], model.body_names[i],
                       model.joint_rotation[i], model.joint_translation[i])
        if jt != FREE_FLYER:
            iq, iv = model.idx_q[i], model.idx_v[i]
            bound = lambda x: float(np.clip(x, -UNBOUNDED, UNBOUNDED))  # noqa: E731
            lines.append(f'    <axis xyz="{fmt(model.axis[i])}"/>')
            lines.append(f'    <limit lower="{bound(model.lower[iq]):.17g}" upper="{bound(model.upper[iq]):.17g}" '
                         f'effort="{bound(model.effort_limit[iv]):.17g}" '
                         f'velocity="{bound(model.velocity_limit[iv]):.17g}"/>')
            lines += _dynamics_and_mimic(model, i)
        lines.append("  </joint>")
    for f in model.frames:
        if f.name == "world" or f.name in model.body_names:
            continue
        lines.append(f'  <link name={quoteattr(f.name)}/>')
        parent = "world" if f.body < 0 else model.body_names[f.body]
        lines += joint(f"{f.name}_fixed", "fixed", parent, f.name, f.rotation, f.translation)
        lines.append("  </joint>")
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def _dynamics_and_mimic(model: Model, body: int) -> list[str]:
    """The ``<dynamics>`` (if not zero) and ``<mimic>`` (if any) elements of a 1-DOF joint."""
    iv, lines = model.idx_v[body], []
    if model.damping[iv] or model.friction[iv]:
        lines.append(f'    <dynamics damping="{model.damping[iv]:.17g}" friction="{model.friction[iv]:.17g}"/>')
    mimics = model.mimic.mimics if model.mimic is not None else []
    for m in mimics:
        if m.name == model.joint_names[body]:
            lines.append(f'    <mimic joint={quoteattr(m.leader)} multiplier="{m.multiplier:.17g}" '
                         f'offset="{m.offset:.17g}"/>')
    return lines


def matrix_to_rpy(r: np.ndarray) -> np.ndarray:
    """URDF's roll-pitch-yaw (rad, fixed axes: ``R = Rz(yaw) Ry(pitch) Rx(roll)``) of a rotation matrix;
    :func:`rtctl.model.rpy_to_matrix` inverted (roll 0 at the pitch singularity)."""
    pitch = np.arctan2(-r[2, 0], np.hypot(r[0, 0], r[1, 0]))
    if abs(np.cos(pitch)) < 1e-12:
        return np.array([np.arctan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([np.arctan2(r[2, 1], r[2, 2]), pitch, np.arctan2(r[1, 0], r[0, 0])])
