"""The model report of ``rtctl info FILE``: what a loaded model is and what loading it took."""
from __future__ import annotations

import os
import warnings

import numpy as np

from . import FREE_FLYER, Model
from .massless import massless_subtree_joints
from .urdf import load_urdf


def urdf_report(source: str | os.PathLike, floating_base: str | None = None, inertia: str = "warn") -> str:
    """Load a URDF (its warnings become lines of the report) and return :func:`model_report` of it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_urdf(source, floating_base, inertia=inertia)
    return model_report(model)


def model_report(model: Model) -> str:
    """Dofs, total mass, base, massless subtrees, inertias warned or repaired, mimic joints, missing limits."""
    chain = model.closed_chain
    lines = [f"model '{model.name}': {model.nbodies} bodies, nq = {model.nq}, nv = {model.nv} DOFs",
             f"total mass: {model.total_mass:.6g} kg" if chain is None else
             f"total mass: {chain.total_mass:.6g} kg, of the closed chain the joints move (the tree's bodies: "
             f"{model.total_mass:.6g} kg)",
             f"base: {model.base} ({model.n_base_dofs} unactuated DOFs)"]
    if chain is None:
        lines += _section("massless subtrees (forward dynamics raises; ID and M work)",
                          [f"joint '{name}'" for name in massless_subtree_joints(model)])
    else:
        lines += chain.report()
    action = " (repaired)" if _repaired(model) else " (kept as written)"
    lines += _section("inertias physically inconsistent" + action, [f.describe() for f in model.inertia_findings])
    if model.mimic is not None:
        lines.append(f"mimic joints: {len(model.mimic.mimics)} (independent DOFs: {model.mimic.nv})")
        lines += [f"  {text}" for text in model.mimic.describe()]
    else:
        lines.append("mimic joints: none")
    lines += _section("missing limits", _missing_limits(model))
    return "\n".join(lines)


def _repaired(model: Model) -> bool:
    return any(f.repaired is not None for f in model.inertia_findings)


def _section(title: str, items: list[str]) -> list[str]:
    if not items:
        return [f"{title}: none"]
    return [f"{title}: {len(items)}"] + [f"  {item}" for item in items]


def _missing_limits(model: Model) -> list[str]:
    """Per 1-DOF joint, which of position, velocity and effort limits are unbounded (continuous: position)."""
    out = []
    for i, name in enumerate(model.joint_names):
        if i < model.n_base_bodies or model.joint_type[i] == FREE_FLYER:
            continue
        iq, iv = model.idx_q[i], model.idx_v[i]
        missing = [what for what, bounded in (
            ("position", np.isfinite(model.lower[iq]) or np.isfinite(model.upper[iq])),
            ("velocity", np.isfinite(model.velocity_limit[iv])),
            ("effort", np.isfinite(model.effort_limit[iv]))) if not bounded]
        if missing:
            out.append(f"joint '{name}': no {', '.join(missing)} limit")
    return out
