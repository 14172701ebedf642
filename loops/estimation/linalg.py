"""The Kalman measurement update both estimators share, for measurement matrices whose rows each have at most
two non-zero entries (a difference of two states, or one state).

The leg-kinematics measurements of both filters are such rows: the invariant EKF's innovation of a foot is
``d_k - p`` in the right-invariant error (Hartley et al. 2020, eq. 29: H = [0, 0, -I, I]), the baseline's
foot position ``d_k - p`` and velocity ``v``. Row r of H is ``w_a e_a + w_b e_b`` (``hrows[r] = [a, w_a, b,
w_b]``), so H P is two scaled rows of P per measurement row and H P H^T two entries of it.

    S = H P H^T + N,   delta = P H^T S^-1 z,   P <- P - (H P)^T S^-1 (H P)      (the Kalman gain K = P H^T S^-1)

solved through the Cholesky factor of S (Golub & Van Loan, "Matrix Computations", 4th ed., 2013,
Algorithm 4.2.1), never an inverse. P is symmetrised after the update. Returns the normalised innovation
squared z^T S^-1 z (the divergence check's input), or -1 when S is not positive definite.

Scratch ``mw`` (float64, 2 m_max rows, dim + m_max + 1 columns): rows 0..m-1 hold H P (columns 0..dim-1),
S (next m_max columns) and z (the last); rows m_max.. hold S^-1 H P.
"""
from __future__ import annotations

import math

from numba import njit


@njit(cache=True)
def cholesky_in_place(a, o, n):
    """Lower Cholesky factor of the SPD block ``a[:n, o:o + n]`` in place; False if not positive definite."""
    for j in range(n):
        s = a[j, o + j]
        for k in range(j):
            s -= a[j, o + k] * a[j, o + k]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        a[j, o + j] = d
        for i in range(j + 1, n):
            s = a[i, o + j]
            for k in range(j):
                s -= a[i, o + k] * a[j, o + k]
            a[i, o + j] = s / d
    return True


@njit(cache=True)
def cholesky_solve_column(a, o, n, b, row0, col):
    """Solve L L^T x = b for the factor at ``a[:n, o:o + n]`` and b = ``b[row0:row0 + n, col]``, in place."""
    for i in range(n):
        s = b[row0 + i, col]
        for k in range(i):
            s -= a[i, o + k] * b[row0 + k, col]
        b[row0 + i, col] = s / a[i, o + i]
    for i in range(n - 1, -1, -1):
        s = b[row0 + i, col]
        for k in range(i + 1, n):
            s -= a[k, o + i] * b[row0 + k, col]
        b[row0 + i, col] = s / a[i, o + i]


@njit(cache=True)
def sparse_update(P, hrows, noise, z, m, mw, delta):
    """The measurement update (module docstring) of ``m`` rows: ``hrows`` (m_max, 4), ``noise`` (m_max, m_max)
    N, innovation ``z`` (m_max); writes the correction into ``delta`` (dim) and updates P in place."""
    dim = P.shape[0]
    m_max = hrows.shape[0]
    so, zc = dim, dim + m_max
    for r in range(m):
        a, wa, b, wb = int(hrows[r, 0]), hrows[r, 1], int(hrows[r, 2]), hrows[r, 3]
        for j in range(dim):
            mw[r, j] = wa * P[a, j] + (wb * P[b, j] if wb != 0.0 else 0.0)
        mw[r, zc] = z[r]
    for r in range(m):
        for s in range(m):
            a, wa, b, wb = int(hrows[s, 0]), hrows[s, 1], int(hrows[s, 2]), hrows[s, 3]
            mw[r, so + s] = wa * mw[r, a] + (wb * mw[r, b] if wb != 0.0 else 0.0) + noise[r, s]
    for r in range(m):   # symmetric up to rounding: use the mean of both triangles
        for s in range(r):
            e = 0.5 * (mw[r, so + s] + mw[s, so + r])
            mw[r, so + s] = mw[s, so + r] = e
    if not cholesky_in_place(mw, so, m):
        return -1.0
    for r in range(m):
        for j in range(dim):
            mw[m_max + r, j] = mw[r, j]
    for j in range(dim):
        cholesky_solve_column(mw, so, m, mw, m_max, j)
    cholesky_solve_column(mw, so, m, mw, 0, zc)   # z -> S^-1 z in place
    nis = 0.0
    for r in range(m):
        nis += z[r] * mw[r, zc]
    for j in range(dim):
        s = 0.0
        for r in range(m):
            s += mw[r, j] * mw[r, zc]
        delta[j] = s
    for i in range(dim):
        for j in range(i, dim):
            s = 0.0
            for r in range(m):
                s += mw[r, i] * mw[m_max + r, j]
            if s != 0.0:
                P[i, j] -= s
                if j != i:
                    P[j, i] = P[i, j]
    return nis


@njit(cache=True)
def inverse_quadratic3(s, zx, zy, zz):
    """z^T S^-1 z for a symmetric 3 x 3 S (row-major 9-tuple) by its adjugate; inf if S is not positive
    definite by its determinant."""
    c00, c01, c02 = s[4] * s[8] - s[5] * s[7], s[2] * s[7] - s[1] * s[8], s[1] * s[5] - s[2] * s[4]
    det = s[0] * c00 + s[3] * c01 + s[6] * c02
    if not det > 0.0:
        return math.inf
    c11, c12 = s[0] * s[8] - s[2] * s[6], s[2] * s[3] - s[0] * s[5]
    c22 = s[0] * s[4] - s[1] * s[3]
    return (zx * (c00 * zx + c01 * zy + c02 * zz) + zy * (c01 * zx + c11 * zy + c12 * zz)
            + zz * (c02 * zx + c12 * zy + c22 * zz)) / det
