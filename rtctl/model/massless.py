"""Joints that move nothing: the DOFs whose mass-matrix row is zero whatever the configuration.

A revolute joint whose subtree (its body and every body below it) has no mass
and no rotational inertia, a prismatic joint whose subtree has no mass, and a
free-flyer carrying no mass have a zero diagonal entry in M(q): inverse
dynamics and M are still defined, forward dynamics is not.
"""
from __future__ import annotations

import numpy as np

from ..options import show
from . import FREE_FLYER, PRISMATIC, Model


def massless_subtree_joints(model: Model) -> list[str]:
    """Names of the joints (in model order) whose subtree carries nothing they could accelerate."""
    mass = model.mass.astype(float).copy()
    inertia = np.abs(model.inertia_com).reshape(model.nbodies, 9).sum(axis=1)
    for i in range(model.nbodies - 1, -1, -1):
        p = model.parent[i]
        if p >= 0:
            mass[p] += mass[i]
            inertia[p] += inertia[i]
    names = []
    for i in range(model.nbodies):
        translating = model.joint_type[i] in (PRISMATIC, FREE_FLYER)
        if mass[i] == 0 and (translating or inertia[i] == 0):
            names.append(model.joint_names[i])
    return names


def massless_note(model: Model) -> str:
    """The sentence a singular forward dynamics adds to its error: which joints move massless subtrees."""
    names = massless_subtree_joints(model)
    if not names:
        return ""
    listed = ", ".join(show(n) for n in names)
    return (f"; joint{'s' if len(names) > 1 else ''} {listed} of model {show(model.name)} move massless subtrees "
            "(no mass or inertia below them): give those links mass or fix those joints")
