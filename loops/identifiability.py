"""What a recorded run identifies, judged in physical units, for :mod:`rtctl.loops.identification`.

The fit ``tau = X p`` (``p``: 10 inertial parameters per body, then each joint's viscous and Coulomb friction)
only determines what the run's torques hold above their noise. Three steps decide it:

1. **Sliding rows** (:func:`moving_rows`). Viscous plus Coulomb friction describes a joint that slides; a joint
   creeping below its Stribeck velocity (Armstrong-Helouvry, Dupont & Canudas de Wit, Automatica 1994,
   section 2) or held still holds whatever torque the rest needs. Joint j's row of a sample enters the fit
   when |qd_j| reaches both MOVING_FRACTION of its RMS velocity and SLIDING_FRACTION of its velocity limit
   (SLIDING_SPEED where the model has none). A joint commanded to stay still that moves a few mrad through
   tracking error has no rows: nothing of its own is fitted.
2. **Base parameters in physical units** (:func:`structural_base`). ``X p = X_b beta``, ``beta = C p``, from
   the pivoted QR of the regressor at random states (Gautier, J. Robot. Syst. 1991), with C in the
   parameters' own units.
3. **Essential parameters** (:func:`essential_parameters`): each base parameter's standard deviation from the
   weighted least-squares covariance ``(X_w^T X_w)^-1 s^2`` (rows weighted by the inverse of their joint's
   residual RMS, ``s^2`` the weighted residual variance; Gautier & Poignet, 2001), relative to a plausible
   magnitude of that parameter (:func:`plausible_scales`) rather than to its estimate, which may be near zero.
   The worst base parameter above RELATIVE_STD_MAX is held at the given model's value and the rest
   refitted, until every one left is below it (the elimination of Pham & Gautier, "Essential parameters of
   robots", IEEE CDC 1991, with the relative standard deviation of Swevers, Ganseman, Tukel, De Schutter &
   Van Brussel, IEEE TRA 1997, section V). The criterion is the parameter's torque contribution over the
   run, at its plausible magnitude, against the measured torque noise: for a column independent of the
   others, relative std = noise / (|X_k| magnitude).

A held base parameter holds every standard parameter in it (:func:`held_parameters`): each base parameter
has a standard parameter of its own, so the others stay free, and the held ones keep exactly the given
model's values.
"""
from __future__ import annotations

import numpy as np

from rtctl.dynamics.regressor import PARAMETERS_PER_BODY, BaseParameters
from rtctl.model import Model
from rtctl.rt.interfaces import actuated_indices

__all__ = ["Essential", "essential_parameters", "held_parameters", "moving_rows", "plausible_scales",
           "structural_base", "subtree_bodies"]

MOVING_FRACTION = 0.1            # of a joint's RMS velocity: below it the joint is taken to be at rest
SLIDING_FRACTION = 0.01          # of a joint's velocity limit: below it the joint does not slide
SLIDING_SPEED = 0.01             # rad/s (m/s): the same for a joint without a velocity limit
RELATIVE_STD_MAX = 0.3           # of the larger of its plausible magnitude and its estimate: above it, not identified
FRICTION_FRACTION = 0.02         # of a joint's effort limit: the plausible Coulomb friction
ROUND_OFF = 1e-12                # of the largest regressor column: a column this small is round-off
BASE_TOLERANCE = 1e-6            # R's diagonal below this times its largest: a dependent column
COMBINATION_TOLERANCE = 1e-9     # an entry of C below this (relative to its row's largest): not in that base
TIE_BREAK = 1e-6                 # relative preference for the earlier of two columns of equal norm


def moving_rows(model: Model, qd) -> np.ndarray:
    """(N, nv) mask of the rows to fit (module docstring, step 1); ``qd`` (N, n) of the actuated joints."""
    _, v_index, _ = actuated_indices(model)
    speed = np.abs(np.asarray(qd, dtype=float))
    moving = np.ones((speed.shape[0], model.nv), dtype=bool)
    moving[:, v_index] = speed >= np.maximum(MOVING_FRACTION * np.sqrt(np.mean(speed ** 2, axis=0)),
                                             sliding_speed(model))
    return moving


def sliding_speed(model: Model) -> np.ndarray:
    """Per actuated joint: the speed below which it is taken not to slide (rad/s or m/s)."""
    _, v_index, _ = actuated_indices(model)
    limit = model.velocity_limit[v_index]
    return np.where(np.isfinite(limit) & (limit > 0), SLIDING_FRACTION * limit, SLIDING_SPEED)


def structural_base(model: Model, regressor_at) -> tuple[BaseParameters, np.ndarray]:
    """(base, C): the base parameters of ``model``'s regressor with friction columns, ``regressor_at(q, qd,
    qdd)`` (the stacked X of the actuated joints' rows of states), at random states; C (r x p) with
    ``X p = X[:, base.independent] C p`` in physical units. Columns are scaled to unit norm for the rank
    decision, the earlier ones TIE_BREAK larger: columns of equal norm (Ixx and Iyy of a link turning about z)
    are otherwise chosen by round-off, and a URDF written and read back would have other base parameters; a
    column at round-off is a parameter with no effect (zero in C)."""
    rng = np.random.default_rng(0)
    q_index, v_index, _ = actuated_indices(model)
    count = max(30, 4 * PARAMETERS_PER_BODY * model.nbodies // max(1, len(v_index)))
    q = np.array([model.random_configuration(rng) for _ in range(count)])[:, q_index]
    qd, qdd = rng.normal(size=(count, len(v_index))), rng.normal(size=(count, len(v_index)))
    X = regressor_at(q, qd, qdd)
    norms = np.linalg.norm(X, axis=0)
    significant = norms > ROUND_OFF * norms.max()
    preference = 1.0 + TIE_BREAK * np.linspace(1.0, 0.0, X.shape[1])
    factor = np.where(significant, preference / np.where(significant, norms, 1.0), 0.0)
    base = BaseParameters(X * factor, tolerance=BASE_TOLERANCE)
    C = np.zeros((base.rank, X.shape[1]))
    C[np.arange(base.rank), base.independent] = 1.0
    dependent = factor[base.dependent]
    C[:, base.dependent] = factor[base.independent, None] * base.K / np.where(dependent > 0, dependent, 1.0)
    return base, C


def plausible_scales(model: Model, torque_scale) -> np.ndarray:
    """A plausible magnitude of each parameter p (10 per body, then each actuated joint's viscous and Coulomb
    friction). Body i of mass m and radius of gyration about its origin r = sqrt(tr(I_O) / 2m): m for the
    mass, m r for the first moments, m r^2 for the inertia (bodies without mass take the others' means).
    Coulomb friction: the given model's or FRICTION_FRACTION of the effort limit (of ``torque_scale``, the
    run's largest torque, without one); viscous: the given model's or that torque at the velocity limit
    (SLIDING_SPEED / SLIDING_FRACTION without one)."""
    _, v_index, _ = actuated_indices(model)
    mass = np.asarray(model.mass, dtype=float)
    radius = np.zeros(model.nbodies)
    for i in range(model.nbodies):
        if mass[i] > 0:
            c = model.com[i]
            about_origin = model.inertia_com[i] + mass[i] * (c @ c * np.eye(3) - np.outer(c, c))
            radius[i] = np.sqrt(max(np.trace(about_origin), 0.0) / (2.0 * mass[i]))
    heavy = mass > 0
    mass = np.where(heavy, mass, mass[heavy].mean() if heavy.any() else 1.0)
    radius = np.where(heavy & (radius > 0), radius, radius[heavy].mean() if heavy.any() else 0.1)
    inertial = np.column_stack([mass, *(mass * radius,) * 3, *(mass * radius ** 2,) * 6]).reshape(-1)
    effort = model.effort_limit[v_index]
    effort = np.where(np.isfinite(effort) & (effort > 0), effort, np.asarray(torque_scale, dtype=float))
    coulomb = np.maximum(model.friction[v_index], FRICTION_FRACTION * effort)
    limit = model.velocity_limit[v_index]
    speed = np.where(np.isfinite(limit) & (limit > 0), limit, SLIDING_SPEED / SLIDING_FRACTION)
    viscous = np.maximum(model.damping[v_index], coulomb / speed)
    return np.r_[inertial, viscous, coulomb]


class Essential:
    """What :func:`essential_parameters` found: ``held`` and ``identified`` (indices of base parameters), the
    relative standard deviation of each base parameter (of the identified ones in the final fit; of a held
    one when it was held), and ``noise`` (per row, the torque RMS the weights came from)."""

    def __init__(self, held, identified, relative_std, noise):
        self.held, self.identified, self.relative_std, self.noise = held, identified, relative_std, noise


def essential_parameters(Xb, y, dof, prior_beta, scale_beta) -> Essential:
    """The elimination of the module docstring (step 3) on the rows ``Xb`` (base-parameter columns), torques
    ``y`` and each row's joint ``dof``; held base parameters keep ``prior_beta``, magnitudes ``scale_beta``."""
    beta = np.linalg.lstsq(Xb, y, rcond=None)[0]
    residual = Xb @ beta - y
    joints = np.unique(dof)
    rms = {k: np.sqrt(np.mean(residual[dof == k] ** 2)) for k in joints}
    floor = 1e-12 * max(max(rms.values()), 1e-300)
    noise = np.array([max(rms[k], floor) for k in dof])
    Z = Xb / noise[:, None] * scale_beta
    target = y / noise
    z_prior = prior_beta / scale_beta
    free, held = list(range(Xb.shape[1])), []
    relative_std = np.full(Xb.shape[1], np.inf)
    while free:
        target_free = target - Z[:, held] @ z_prior[held]
        Zf = Z[:, free]
        information = Zf.T @ Zf
        ridge = 1e-12 * max(np.trace(information) / len(free), 1e-300)
        covariance = np.linalg.inv(information + ridge * np.eye(len(free)))
        z = covariance @ (Zf.T @ target_free)
        misfit = Zf @ z - target_free
        variance = misfit @ misfit / max(1, len(target) - len(free))
        std = np.sqrt(variance * np.diag(covariance)) / np.maximum(1.0, np.abs(z))
        relative_std[free] = std
        worst = int(np.argmax(std))
        if std[worst] <= RELATIVE_STD_MAX:
            break
        held.append(free.pop(worst))
    return Essential(sorted(held), free, relative_std, noise)


def held_parameters(C, held) -> np.ndarray:
    """Mask over p: the standard parameters in the held base parameters (rows ``held`` of C)."""
    mask = np.zeros(C.shape[1], dtype=bool)
    for k in held:
        row = np.abs(C[k])
        mask |= row > COMBINATION_TOLERANCE * row.max()
    return mask


def subtree_bodies(model: Model, body: int) -> list:
    """``body`` and every body it carries."""
    out = [body]
    for i in range(body + 1, model.nbodies):
        if model.parent[i] in out:
            out.append(i)
    return out
