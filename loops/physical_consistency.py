"""Physically consistent inertial parameters for identification: the log-Cholesky parameterisation.

A body's ten inertial parameters pi (:mod:`rtctl.dynamics.regressor` order) belong to a rigid body when its
4 x 4 pseudo-inertia J is positive definite (the LMI of Wensing, Kim & Slotine, RA-L 2018, eq. 9). Every
such J is U U^T with U = e^alpha V upper triangular (Rucker & Wensing, RA-L 2022, eq. 10), so a fit over the
log-Cholesky parameters theta is a fit over rigid bodies only. The factor's diagonal (the body's RMS extent
along each axis given the others, m) is held above MIN_THICKNESS: a fit pressed against the constraint
otherwise ends on a flat body whose pseudo-inertia is singular to round-off (its smallest eigenvalue came out
-3e-17 on the arm), no longer strictly positive definite.

:func:`consistent_fit` is the constrained least-squares fit :mod:`rtctl.loops.identification` uses, with
parameters that the run does not identify held at the given model's values.
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.dynamics.regressor import PARAMETERS_PER_BODY

__all__ = ["MIN_THICKNESS", "consistent_fit", "log_cholesky_jacobian", "log_cholesky_to_parameters",
           "parameters_of_pseudo_inertia", "parameters_to_log_cholesky", "physically_consistent", "pseudo_inertia"]

MIN_THICKNESS = 1e-4             # m: least RMS extent of a body's mass along each axis (a 0.35 mm plate)
MAX_EVALUATIONS = 200            # of the consistent fit's residual, when the free minimum is not consistent
FIXED_WEIGHT = 1e4               # a held parameter's penalty, relative to its own column's information


def pseudo_inertia(pi_body) -> np.ndarray:
    """J = [[Sigma, h], [h^T, m]], Sigma = tr(I)/2 1 - I (Wensing, Kim & Slotine 2018, eq. 7)."""
    m, h = pi_body[0], pi_body[1:4]
    xx, xy, yy, xz, yz, zz = pi_body[4:10]
    inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def parameters_of_pseudo_inertia(J) -> np.ndarray:
    """pi of one body from its pseudo-inertia J: the inverse of :func:`pseudo_inertia`."""
    sigma = J[:3, :3]
    inertia = np.trace(sigma) * np.eye(3) - sigma
    return np.array([J[3, 3], *J[:3, 3], inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2],
                     inertia[1, 2], inertia[2, 2]])


_FACTOR_ENTRIES = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))  # theta[1:] in V


def _log_cholesky_factor(theta):
    """(e^alpha, V): U = e^alpha V, V = [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]
    for theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3) (Rucker & Wensing 2022, eq. 10)."""
    V = np.eye(4)
    for k, (r, c) in enumerate(_FACTOR_ENTRIES):
        V[r, c] = np.exp(theta[k + 1]) if k < 3 else theta[k + 1]
    return np.exp(theta[0]), V


def log_cholesky_to_parameters(theta) -> np.ndarray:
    """pi of one body from its log-Cholesky parameters: J = U U^T (:func:`_log_cholesky_factor`)."""
    e_alpha, V = _log_cholesky_factor(theta)
    return parameters_of_pseudo_inertia(e_alpha ** 2 * V @ V.T)


def log_cholesky_jacobian(theta) -> np.ndarray:
    """d pi / d theta (10 x 10) of :func:`log_cholesky_to_parameters`: dJ = e^(2 alpha) (dV V^T + V dV^T),
    dJ / d alpha = 2 J, and pi is linear in J."""
    e_alpha, V = _log_cholesky_factor(theta)
    J = e_alpha ** 2 * V @ V.T
    out = np.empty((10, 10))
    out[:, 0] = parameters_of_pseudo_inertia(2.0 * J)
    for k, (r, c) in enumerate(_FACTOR_ENTRIES):
        dV = np.zeros((4, 4))
        dV[r, c] = V[r, c] if k < 3 else 1.0
        dJ = e_alpha ** 2 * (dV @ V.T + V @ dV.T)
        out[:, k + 1] = parameters_of_pseudo_inertia(dJ)
    return out


def physically_consistent(pi_body) -> bool:
    """The pseudo-inertia J positive definite (Wensing, Kim & Slotine 2018, Theorem 1) with the body at least
    MIN_THICKNESS thick along each axis (its log-Cholesky factor's diagonal, :func:`_log_cholesky_factor`)."""
    J = pseudo_inertia(pi_body)
    if not np.linalg.eigvalsh(J)[0] > 1e-12 * max(np.abs(J).max(), 1e-300):
        return False
    flip = np.eye(4)[::-1]
    try:
        U = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip
    except np.linalg.LinAlgError:
        return False
    return bool(np.all(np.diag(U)[:3] >= MIN_THICKNESS * U[3, 3]))


def parameters_to_log_cholesky(pi_body) -> np.ndarray:
    """The inverse of :func:`log_cholesky_to_parameters`, for a positive definite J (a body a little
    short of it is nudged inside first: the start of the constrained fit)."""
    J = pseudo_inertia(pi_body)
    scale = max(np.abs(J).max(), 1e-12)
    smallest = np.linalg.eigvalsh(J)[0]
    if smallest < 1e-9 * scale:
        J = J + (1e-9 * scale - smallest) * np.eye(4)
    flip = np.eye(4)[::-1]
    U = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip      # upper triangular, J = U U^T
    e_alpha = U[3, 3]
    V = U / e_alpha
    return np.array([math.log(e_alpha), math.log(V[0, 0]), math.log(V[1, 1]), math.log(V[2, 2]), V[0, 1], V[1, 2],
                     V[0, 2], V[0, 3], V[1, 3], V[2, 3]])




def consistent_fit(R, target, prior, n_bodies: int, weight: float, fixed):
    """Minimise |R p - target|^2 + weight |pi - prior_pi|^2 over p = [pi; friction] (10 ``n_bodies`` inertial
    parameters, then friction) with ``p[fixed] = prior[fixed]``, every body not wholly held physically consistent
    and every free friction >= 0. The objective is convex: its minimum without the consistency constraints (a
    linear least-squares problem in the free parameters) is the answer when it is feasible; otherwise a
    trust-region least-squares solve over the log-Cholesky parameters of the bodies not wholly held (friction as
    squares; each body's factor diagonal >= MIN_THICKNESS), from that minimum moved into the feasible set. A
    wholly held body and a held friction are constants there; a held parameter of a body fitted in part is held
    by a penalty FIXED_WEIGHT times its column's information, then set to the given value exactly (when its
    body stays consistent, as it does unless the fit presses it against MIN_THICKNESS). Returns (p, the indices
    of the bodies whose minimum without the constraints was not consistent)."""
    from scipy.optimize import least_squares

    prior, fixed = np.asarray(prior, dtype=float), np.asarray(fixed, dtype=bool)
    n_inertial = PARAMETERS_PER_BODY * n_bodies
    pull = np.eye(n_inertial, prior.size)
    system = np.vstack([R, math.sqrt(weight) * pull])
    rhs = np.r_[target, math.sqrt(weight) * prior[:n_inertial]] - system[:, fixed] @ prior[fixed]
    p_free = prior.copy()
    p_free[~fixed] = np.linalg.lstsq(system[:, ~fixed], rhs, rcond=None)[0]
    held_body = fixed[:n_inertial].reshape(n_bodies, PARAMETERS_PER_BODY).all(axis=1)
    fitted = [i for i in range(n_bodies) if not held_body[i]]
    inconsistent = [i for i in fitted if not physically_consistent(p_free[10 * i:10 * i + 10])]
    friction = np.flatnonzero(~fixed[n_inertial:]) + n_inertial
    if np.all(p_free[friction] >= 0) and not inconsistent:
        return p_free, inconsistent
    penalised = np.flatnonzero(fixed[:n_inertial] & ~np.repeat(held_body, PARAMETERS_PER_BODY))
    stiffness = np.sqrt(FIXED_WEIGHT * (np.sum(R[:, penalised] ** 2, axis=0) + weight))
    n_theta = PARAMETERS_PER_BODY * len(fitted)

    def unpack(x):
        p = prior.copy()
        for k, i in enumerate(fitted):
            p[10 * i:10 * i + 10] = log_cholesky_to_parameters(x[10 * k:10 * k + 10])
        p[friction] = x[n_theta:] ** 2
        return p

    def residual(x):
        p = unpack(x)
        return np.concatenate([R @ p - target, math.sqrt(weight) * (p[:n_inertial] - prior[:n_inertial]),
                               stiffness * (p[penalised] - prior[penalised])])

    def jacobian(x):
        dp = np.zeros((prior.size, x.size))
        for k, i in enumerate(fitted):
            dp[10 * i:10 * i + 10, 10 * k:10 * k + 10] = log_cholesky_jacobian(x[10 * k:10 * k + 10])
        dp[friction, n_theta + np.arange(friction.size)] = 2.0 * x[n_theta:]
        return np.vstack([R @ dp, math.sqrt(weight) * dp[:n_inertial], stiffness[:, None] * dp[penalised]])

    x0 = np.concatenate([*(parameters_to_log_cholesky(p_free[10 * i:10 * i + 10]) for i in fitted),
                         np.sqrt(np.clip(p_free[friction], 0.0, None))])
    lower = np.full(x0.size, -np.inf)
    for k in range(len(fitted)):
        lower[10 * k + 1:10 * k + 4] = math.log(MIN_THICKNESS)
    x0 = np.maximum(x0, lower + 1e-6)
    result = least_squares(residual, x0, jac=jacobian, bounds=(lower, np.inf), method="trf", ftol=1e-6,
                           max_nfev=MAX_EVALUATIONS)
    p = unpack(result.x)
    exact = p.copy()
    exact[penalised] = prior[penalised]
    if all(physically_consistent(exact[10 * i:10 * i + 10]) for i in fitted):
        p = exact
    return p, inconsistent
