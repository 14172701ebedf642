"""Why a rigid-body plant's step left NaN or inf: the one line that names the joint and the likely cause.

A step that leaves a non-finite state is refused with the state unchanged (:mod:`plants.integrate`); from
that last finite state :func:`divergence_message` weighs, per DOF, what a step of h = dt / substeps does
with the inertia ``I_k = 1 / (M^-1)_kk`` the joint feels with every other joint free:

* viscous friction an explicit integrator does not resolve: ``h d_k / I_k`` beyond the method's
  stability interval on the negative real axis (2.785 for classical RK4, 2 for Euler; Hairer & Wanner,
  Solving ODEs II, sec. IV.2). ``h d_k / I_k`` is the Rayleigh quotient of ``h M^-1 D`` at the joint, a
  lower bound of its largest eigenvalue, so a joint named this way makes the step unstable;
* a torque (effort, end stop, gravity, velocity or external forces, friction) that changes the joint's
  velocity by more in one step than it has: the largest term is named;
* otherwise a velocity that grew over earlier steps (an unstable closed loop, or a stiffness no step resolves).

:func:`explicit_damping_problem` is the first check alone, at a given state: the sim driver asks it
before a run so that an explicit integrator never starts on damping it cannot hold.
"""
from __future__ import annotations

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.model import PRISMATIC

__all__ = ["EXPLICIT_STABILITY", "divergence_message", "explicit_damping_problem"]

# Stability interval of the explicit methods on the negative real axis: |R(z)| <= 1 for -limit <= z <= 0.
EXPLICIT_STABILITY = {"rk4": 2.785, "semi_implicit_euler": 2.0}


def _units(model, k: int) -> tuple[str, str, str]:
    """(torque, velocity, inertia) units of DOF k: N, m/s, kg for a prismatic joint, else N m, rad/s, kg m^2."""
    body = int(np.searchsorted(model.idx_v, k, side="right")) - 1
    if model.joint_type[body] == PRISMATIC:
        return "N", "m/s", "kg"
    return "N m", "rad/s", "kg m^2"


def _joint(model, k: int) -> str:
    return model.joint_names[int(np.searchsorted(model.idx_v, k, side="right")) - 1]


def _effective_inertia(dynamics: Dynamics, q) -> np.ndarray:
    """``1 / (M^-1)_kk`` per DOF (inf where M's pseudo-inverse has a zero diagonal)."""
    with np.errstate(all="ignore"):
        diagonal = np.diag(np.linalg.pinv(dynamics.mass_matrix(q)))
        return np.where(diagonal > 0, 1.0 / diagonal, np.inf)


def _unresolved_damping(integrator: str, h: float, viscous, inertia):
    """(DOF, h d / I) of the joint whose viscous friction the explicit method resolves least, or None."""
    limit = EXPLICIT_STABILITY.get(integrator)
    if limit is None or not np.any(viscous > 0):
        return None
    with np.errstate(all="ignore"):
        ratio = np.where(viscous > 0, h * viscous / inertia, 0.0)
    k = int(np.argmax(ratio))
    return (k, float(ratio[k])) if ratio[k] > limit else None


def _damping_cause(model, integrator, h, k, ratio, viscous, inertia) -> str:
    torque, velocity, mass = _units(model, k)
    limit = EXPLICIT_STABILITY[integrator]
    return (f"its viscous friction {viscous[k]:.3g} {torque} s/{velocity.split('/')[0]} on an effective inertia "
            f"of {inertia[k]:.3g} {mass} needs steps below {limit * inertia[k] / viscous[k]:.3g} s with the "
            f"explicit {integrator} (h d / I = {ratio:.3g} > {limit}); integrator \"rosenbrock\" (the default "
            "with joint friction) is stable for any friction")


def explicit_damping_problem(plant, dt: float) -> str:
    """One line if the plant's explicit integrator cannot resolve its viscous friction at steps of ``dt``
    (split into its sub-steps) at its current configuration, else ""."""
    settings = plant.parameters()
    integrator, h = settings["integrator"], dt / settings["substeps"]
    if integrator not in EXPLICIT_STABILITY or not np.any(plant.viscous > 0):
        return ""
    inertia = _effective_inertia(plant.dynamics, plant.q)
    found = _unresolved_damping(integrator, h, plant.viscous, inertia)
    if found is None:
        return ""
    k, ratio = found
    return (f"{plant.name} plant ({plant.model.name!r}): joint {_joint(plant.model, k)!r}: "
            + _damping_cause(plant.model, integrator, h, k, ratio, plant.viscous, inertia))


def _torque_terms(plant, q, v, effort) -> dict:
    """The generalized forces acting at (q, v), by origin."""
    own = Dynamics(plant.model)  # without the plant's external wrenches
    with np.errstate(all="ignore"):
        bias = own.nonlinear_effects(q, v)
        external = bias - plant.dynamics.nonlinear_effects(q, v)
    return {"effort": np.asarray(effort, dtype=float), "end stop": plant.end_stop_torques(q, v),
            "gravity and velocity terms": -bias, "external wrench": external, "friction": plant.friction_forces(v)}


def _cause(plant, h, q, v, effort, inertia) -> tuple[int, str]:
    model = plant.model
    terms = _torque_terms(plant, q, v, effort)
    with np.errstate(all="ignore"):
        total = sum(terms.values())
        kick = h * np.abs(total) / inertia
    fastest = int(np.argmax(np.abs(v)))
    if not np.all(np.isfinite(kick)) or kick.max() < abs(v[fastest]):
        # the velocity products overflow before the torques do: the velocity is the cause
        torque, velocity, _ = _units(model, fastest)
        return fastest, (f"its velocity had grown to {v[fastest]:.3g} {velocity} (limit "
                         f"{model.velocity_limit[fastest]:.3g}) over earlier steps, under an effort of "
                         f"{terms['effort'][fastest]:.3g} {torque}: an unstable closed loop, or a stiffness the "
                         "step does not resolve")
    k = int(np.argmax(kick))
    torque, velocity, mass = _units(model, k)
    name = max(terms, key=lambda term: abs(terms[term][k]))
    return k, (f"a torque of {total[k]:.3g} {torque} (mostly {name}, {terms[name][k]:.3g} {torque}) on an "
               f"effective inertia of {inertia[k]:.3g} {mass} changes its velocity by {kick[k]:.3g} {velocity} "
               "in one step")


def divergence_message(plant, dt: float, effort) -> str:
    """The one line for a step of ``dt`` under ``effort`` that left NaN or inf, from the plant's (restored)
    state: the plant, its model, the joint and the likely cause (module docstring)."""
    settings = plant.parameters()
    integrator, h = settings["integrator"], dt / settings["substeps"]
    q, v = plant.q.copy(), plant.v.copy()
    inertia = _effective_inertia(plant.dynamics, q)
    found = _unresolved_damping(integrator, h, plant.viscous, inertia)
    if found is not None:
        k, cause = found[0], _damping_cause(plant.model, integrator, h, found[0], found[1], plant.viscous, inertia)
    else:
        k, cause = _cause(plant, h, q, v, effort, inertia)
    return (f"{plant.name} plant ({plant.model.name!r}): a step of {dt:g} s left NaN or inf at joint "
            f"{_joint(plant.model, k)!r}: {cause}; the state is unchanged")
