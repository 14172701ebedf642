"""The small robot of the CAN HIL suite: a two-link arm swinging in a vertical plane.

Built with :class:`rtctl.model.ModelBuilder` (:func:`build_arm2`) and, for the
config-file path, the same arm as URDF text (:func:`arm2_urdf`). Link 1: 1.0 kg,
0.30 m; link 2: 0.6 kg, 0.25 m; joints about y, gravity -z. The largest static
shoulder torque is about 4 N m, well inside an AK80-9 (18 N m) or the CiA 402
drives of the emulator (10 N m rated at the joint).
"""
from __future__ import annotations

import numpy as np

from rtctl.model import ModelBuilder

L1, L2 = 0.30, 0.25
M1, M2 = 1.0, 0.6
LIMIT = 2.5          # rad, both joints
VELOCITY_LIMIT = 10.0
EFFORT_LIMIT = 15.0
JOINTS = ["shoulder", "elbow"]
VISCOUS_FRICTION = 0.05   # N m s / rad at each joint: the emulators' plant


def _inertia(m, length):
    i = m * length * length / 12.0
    return np.diag([1e-4, i, i])


def build_arm2():
    b = ModelBuilder("can_arm2")
    common = dict(axis=(0, 1, 0), lower=-LIMIT, upper=LIMIT, velocity_limit=VELOCITY_LIMIT, effort_limit=EFFORT_LIMIT)
    b.add_body("link1", -1, "revolute", joint_name="shoulder", mass=M1, com=(L1 / 2, 0, 0),
               inertia=_inertia(M1, L1), **common)
    b.add_body("link2", "link1", "revolute", joint_name="elbow", translation=(L1, 0, 0), mass=M2,
               com=(L2 / 2, 0, 0), inertia=_inertia(M2, L2), **common)
    return b.build()


def arm2_urdf() -> str:
    def link(name, m, length):
        i = m * length * length / 12.0
        return (f'<link name="{name}"><inertial><origin xyz="{length / 2} 0 0"/><mass value="{m}"/>'
                f'<inertia ixx="1e-4" iyy="{i!r}" izz="{i!r}" ixy="0" ixz="0" iyz="0"/></inertial></link>')

    def joint(name, parent, child, x):
        return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
                f'<origin xyz="{x} 0 0"/><axis xyz="0 1 0"/>'
                f'<limit lower="{-LIMIT}" upper="{LIMIT}" velocity="{VELOCITY_LIMIT}" effort="{EFFORT_LIMIT}"/></joint>')

    return ('<?xml version="1.0"?><robot name="can_arm2"><link name="base"/>' + link("link1", M1, L1)
            + link("link2", M2, L2) + joint("shoulder", "base", "link1", 0.0)
            + joint("elbow", "link1", "link2", L1) + "</robot>")


def make_plant(model, viscous: float = VISCOUS_FRICTION):
    """The emulators' plant: the rigid-body simulation of ``model`` with a little joint friction."""
    from rtctl.plants import create_plant
    return create_plant("rigid_body", model, integrator="rk4", viscous_friction=np.full(model.nv, viscous))
