"""The 6 x 6 task-space matrices of the Cartesian impedance law (:mod:`rtctl.loops.impedance`): the user order
of their values and their default bounds, their rows in the law's gain block, the small dense algebra over those
rows (LDL^T solves, cyclic Jacobi eigen-decomposition) and the damping that makes the task-space closed loop
critically damped, ``D = 2 zeta Q K_0^(1/2) Q^T`` by double diagonalization (Ott, *Cartesian Impedance Control
of Redundant and Flexible-Joint Robots*, Springer 2008, ch. 3; the law itself is in that module's docstring)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# Rows of the 6 x 6 matrices (row-major, [angular; linear]): the ramp's ends and the gains in use, scratch.
# Width max(36, nv^2): row G_MASS holds the LDL^T factor of M.
G_K_FROM, G_K_TO, G_D_FROM, G_D_TO, G_K, G_D, G_LAMBDA_INV, G_LAMBDA, G_S, G_V, G_Q, G_MASS = range(12)
G_ROWS = 12
_JACOBI_SWEEPS = 60     # cyclic Jacobi sweeps at most (6 x 6 converges in a handful)
# User order of the 6 values (config, control channel) -> internal [angular; linear]
USER_TO_TASK = np.array([3, 4, 5, 0, 1, 2])
# Default bounds of K and D (user order) for the configuration and the control channel's set_impedance:
# a stiff industrial setting (5 kN/m; 300 N m/rad) and, with the arm's task-space inertia of up to ~10 kg and
# ~0.1 kg m^2, about twice the critical damping of those stiffnesses.
STIFFNESS_LIMIT = (5000.0, 5000.0, 5000.0, 300.0, 300.0, 300.0)
DAMPING_LIMIT = (1000.0, 1000.0, 1000.0, 100.0, 100.0, 100.0)


def task_matrix(values, name: str, owner: str = "cartesian_impedance") -> np.ndarray:
    """6 values (diagonal) or 36 (a full matrix, row-major), translational first (user order), as the 6 x 6
    matrix in the internal [angular; linear] order; ValueError naming ``name`` unless finite and symmetric."""
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 6:
        user = np.diag(arr)
    elif arr.size == 36:
        user = arr.reshape(6, 6)
    else:
        raise ValueError(f"{owner}: {name} needs 6 values (x, y, z, rx, ry, rz) or 36 (a 6 x 6 matrix, row-major), "
                         f"got {arr.size}")
    if not np.all(np.isfinite(user)):
        raise ValueError(f"{owner}: {name} contains NaN or inf")
    if not np.allclose(user, user.T, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(user).max())):
        i, j = np.unravel_index(np.argmax(np.abs(user - user.T)), user.shape)
        raise ValueError(f"{owner}: {name} is not symmetric (entry ({i}, {j}) = {user[i, j]:g}, "
                         f"({j}, {i}) = {user[j, i]:g})")
    return np.ascontiguousarray(user[np.ix_(USER_TO_TASK, USER_TO_TASK)])


def user_matrix(task: np.ndarray) -> np.ndarray:
    """The inverse of :func:`task_matrix`: a 6 x 6 [angular; linear] matrix in the user order."""
    back = np.argsort(USER_TO_TASK)
    return np.asarray(task).reshape(6, 6)[np.ix_(back, back)]


def definiteness_problem(matrix: np.ndarray, name: str, strict: bool) -> str:
    """``""`` when the symmetric ``matrix`` is positive definite (``strict``) or semi-definite, else why, with
    its smallest eigenvalue."""
    smallest = float(np.linalg.eigvalsh(matrix).min())
    scale = max(1.0, float(np.abs(matrix).max()))
    if (strict and smallest <= 1e-12 * scale) or (not strict and smallest < -1e-12 * scale):
        return (f"{name} is not positive {'definite' if strict else 'semi-definite'} (smallest eigenvalue "
                f"{smallest:.6g})")
    return ""


# -- small dense algebra over flat row-major blocks -------------------------------------------------
@njit(cache=True, forceinline=True)
def ldlt_solve(a, i, n, b, ob):
    """Solve A x = b (x -> b[ob:ob+n]) with the factor of :func:`rtctl.dynamics.spatial.ldlt_factor` at
    a[i, :n*n] (stride n): L y = b, z = D^-1 y, L^T x = z."""
    for r in range(n):
        s = b[ob + r]
        for k in range(r):
            s -= a[i, n * r + k] * b[ob + k]
        b[ob + r] = s
    for r in range(n):
        b[ob + r] *= a[i, n * r + r]
    for r in range(n - 1, -1, -1):
        s = b[ob + r]
        for k in range(r + 1, n):
            s -= a[i, n * k + r] * b[ob + k]
        b[ob + r] = s


@njit(cache=True)
def jacobi_eigen(a, ia, v, iv, n):
    """Eigen-decomposition of the symmetric n x n matrix at a[ia, :n*n] by cyclic Jacobi rotations
    (Golub & Van Loan, Algorithm 8.5.3): its diagonal becomes the eigenvalues, the columns of
    v[iv, :n*n] the eigenvectors. Returns False if it did not converge."""
    for r in range(n):
        for c in range(n):
            v[iv, n * r + c] = 1.0 if r == c else 0.0
    for _ in range(_JACOBI_SWEEPS):
        off = 0.0
        scale = 0.0
        for r in range(n):
            scale += a[ia, n * r + r] ** 2
            for c in range(r + 1, n):
                off += a[ia, n * r + c] ** 2
        if off <= 1e-30 * scale or off == 0.0:
            return True
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = a[ia, n * p + q]
                if apq == 0.0:
                    continue
                theta = (a[ia, n * q + q] - a[ia, n * p + p]) / (2.0 * apq)
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):
                    akp, akq = a[ia, n * k + p], a[ia, n * k + q]
                    a[ia, n * k + p] = c * akp - s * akq
                    a[ia, n * k + q] = s * akp + c * akq
                for k in range(n):
                    apk, aqk = a[ia, n * p + k], a[ia, n * q + k]
                    a[ia, n * p + k] = c * apk - s * aqk
                    a[ia, n * q + k] = s * apk + c * aqk
                for k in range(n):
                    vkp, vkq = v[iv, n * k + p], v[iv, n * k + q]
                    v[iv, n * k + p] = c * vkp - s * vkq
                    v[iv, n * k + q] = s * vkp + c * vkq
    return False


@njit(cache=True)
def critical_damping(g, zeta):
    """D = 2 zeta Q K_0^(1/2) Q^T (module docstring) from K (row G_K) and the LDL^T factor of
    Lambda^-1 (row G_LAMBDA_INV): C = L diag(d)^(1/2), S = C^T K C = V K_0 V^T, Q = C^-T V."""
    n = 6
    for r in range(n):                            # S = C^T K C, C[k, r] = L[k, r] sqrt(d_r) (L unit lower)
        for c in range(n):
            s = 0.0
            for a in range(r, n):
                lar = 1.0 if a == r else g[G_LAMBDA_INV, n * a + r]
                for b in range(c, n):
                    lbc = 1.0 if b == c else g[G_LAMBDA_INV, n * b + c]
                    s += lar * g[G_K, n * a + b] * lbc
            g[G_S, n * r + c] = s / math.sqrt(g[G_LAMBDA_INV, n * r + r] * g[G_LAMBDA_INV, n * c + c])
    if not jacobi_eigen(g, G_S, g, G_V, n):
        return False
    for c in range(n):                            # Q = C^-T V: L^T Q = diag(d)^(-1/2) V, back substitution
        for r in range(n - 1, -1, -1):
            s = g[G_V, n * r + c] * math.sqrt(g[G_LAMBDA_INV, n * r + r])  # the factor keeps 1/d_r
            for k in range(r + 1, n):
                s -= g[G_LAMBDA_INV, n * k + r] * g[G_Q, n * k + c]
            g[G_Q, n * r + c] = s
    for r in range(n):
        for c in range(n):
            s = 0.0
            for k in range(n):
                s += g[G_Q, n * r + k] * math.sqrt(max(g[G_S, n * k + k], 0.0)) * g[G_Q, n * c + k]
            g[G_D, n * r + c] = 2.0 * zeta * s
    return True
