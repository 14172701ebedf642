"""Small-matrix algebra of the kernels: 3-vectors, 3x3 and 6x6 matrices stored in flat rows.

The kernels keep vectors as scalar triples (no arrays, so nothing allocates)
and matrices row-major in rows of 2-D arrays (the workspace, the packed model),
addressed as (row, first column) so that no row view is made. Spatial quantities are
[angular; linear] (see :mod:`rtctl.dynamics`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..model import MF_MASS
from .workspace import W_D, W_I, W_IA, W_O, W_PA


@njit(cache=True, forceinline=True)
def cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True, forceinline=True)
def sym_mul(s, i, o, x, y, z):
    """(symmetric 3x3 stored as xx yy zz xy xz yz at s[i, o:o+6]) @ (x, y, z)."""
    return (s[i, o] * x + s[i, o + 3] * y + s[i, o + 4] * z,
            s[i, o + 3] * x + s[i, o + 1] * y + s[i, o + 5] * z,
            s[i, o + 4] * x + s[i, o + 5] * y + s[i, o + 2] * z)


@njit(cache=True, forceinline=True)
def rot_mul(r, i, o, x, y, z):
    """(row-major 3x3 at r[i, o:o+9]) @ (x, y, z)."""
    return (r[i, o] * x + r[i, o + 1] * y + r[i, o + 2] * z,
            r[i, o + 3] * x + r[i, o + 4] * y + r[i, o + 5] * z,
            r[i, o + 6] * x + r[i, o + 7] * y + r[i, o + 8] * z)


@njit(cache=True, forceinline=True)
def mat_vec(r, x, y, z):
    """(row-major 3x3 as a 9-tuple) @ (x, y, z)."""
    return (r[0] * x + r[1] * y + r[2] * z, r[3] * x + r[4] * y + r[5] * z, r[6] * x + r[7] * y + r[8] * z)


@njit(cache=True, forceinline=True)
def mat_mul(a, b):
    """Product of two row-major 3x3 matrices given as 9-tuples."""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@njit(cache=True, forceinline=True)
def ws_rot(r, i, o):
    """The row-major 3x3 at r[i, o:o+9] as a 9-tuple."""
    return (r[i, o], r[i, o + 1], r[i, o + 2], r[i, o + 3], r[i, o + 4], r[i, o + 5], r[i, o + 6], r[i, o + 7],
            r[i, o + 8])


@njit(cache=True, forceinline=True)
def spatial_inertia(mf, ws, i):
    """IA_i <- M_i of Shah, Saha & Dutt (2012) eq. 19: [[I, m d~], [-m d~, m 1]] about O_i, world axes."""
    m = mf[i, MF_MASS]
    dx, dy, dz = m * ws[i, W_D], m * ws[i, W_D + 1], m * ws[i, W_D + 2]
    ia = W_IA
    sym = (W_I + 0, W_I + 3, W_I + 4, W_I + 3, W_I + 1, W_I + 5, W_I + 4, W_I + 5, W_I + 2)
    for r in range(3):
        for c in range(3):
            ws[i, ia + 6 * r + c] = ws[i, sym[3 * r + c]]
            ws[i, ia + 6 * (r + 3) + c + 3] = m if r == c else 0.0
    # upper-right m d~ and lower-left -m d~ = (m d~)^T
    skew = (0.0, -dz, dy, dz, 0.0, -dx, -dy, dx, 0.0)
    for r in range(3):
        for c in range(3):
            ws[i, ia + 6 * r + c + 3] = skew[3 * r + c]
            ws[i, ia + 6 * (c + 3) + r] = skew[3 * r + c]


@njit(cache=True, forceinline=True)
def shift_articulated(ws, i, p):
    """IA_p += A^T Ia A and pA_p += A^T pa, A = [[1, 0], [X, 1]], X = -r~, r = O_i - O_p.

    The parent's share of an articulated body (RBDA Table 7.1, ``IA_lambda += X^T Ia X``)
    with the shift A_{i,p} of Shah, Saha & Dutt (2012) eq. 2; ``ws[i, W_IA]``/``ws[i, W_PA]`` hold Ia and pa.
    With Ia = [[A11, A12], [A12^T, A22]], T = A12 X (rows r x a_k for the rows a_k of A12) and
    Y = A22 X (rows r x b_k for the rows b_k of A22): A^T Ia A = [[A11 + T + T^T + r~ Y, A12 + Y^T],
    [A12^T + Y, A22]] and A^T pa = [n + r x f; f].
    """
    rx, ry, rz = ws[i, W_O] - ws[p, W_O], ws[i, W_O + 1] - ws[p, W_O + 1], ws[i, W_O + 2] - ws[p, W_O + 2]
    o = W_IA
    t0 = cross(rx, ry, rz, ws[i, o + 3], ws[i, o + 4], ws[i, o + 5])
    t1 = cross(rx, ry, rz, ws[i, o + 9], ws[i, o + 10], ws[i, o + 11])
    t2 = cross(rx, ry, rz, ws[i, o + 15], ws[i, o + 16], ws[i, o + 17])
    y0 = cross(rx, ry, rz, ws[i, o + 21], ws[i, o + 22], ws[i, o + 23])
    y1 = cross(rx, ry, rz, ws[i, o + 27], ws[i, o + 28], ws[i, o + 29])
    y2 = cross(rx, ry, rz, ws[i, o + 33], ws[i, o + 34], ws[i, o + 35])
    z0 = cross(rx, ry, rz, y0[0], y1[0], y2[0])  # columns of r~ Y
    z1 = cross(rx, ry, rz, y0[1], y1[1], y2[1])
    z2 = cross(rx, ry, rz, y0[2], y1[2], y2[2])
    t = (t0[0], t0[1], t0[2], t1[0], t1[1], t1[2], t2[0], t2[1], t2[2])
    y = (y0[0], y0[1], y0[2], y1[0], y1[1], y1[2], y2[0], y2[1], y2[2])
    z = (z0[0], z0[1], z0[2], z1[0], z1[1], z1[2], z2[0], z2[1], z2[2])
    for k in range(3):
        for c in range(3):
            ws[p, o + 6 * k + c] += ws[i, o + 6 * k + c] + t[3 * k + c] + t[3 * c + k] + z[3 * c + k]
            a12 = ws[i, o + 6 * k + 3 + c] + y[3 * c + k]
            ws[p, o + 6 * k + 3 + c] += a12
            ws[p, o + 6 * (c + 3) + k] += a12
            ws[p, o + 6 * (k + 3) + 3 + c] += ws[i, o + 6 * (k + 3) + 3 + c]
    fx, fy, fz = ws[i, W_PA + 3], ws[i, W_PA + 4], ws[i, W_PA + 5]
    mx, my, mz = cross(rx, ry, rz, fx, fy, fz)
    ws[p, W_PA] += ws[i, W_PA] + mx
    ws[p, W_PA + 1] += ws[i, W_PA + 1] + my
    ws[p, W_PA + 2] += ws[i, W_PA + 2] + mz
    ws[p, W_PA + 3] += fx
    ws[p, W_PA + 4] += fy
    ws[p, W_PA + 5] += fz


@njit(cache=True, forceinline=True)
def cholesky_solve(a, o, n, b, ob):
    """Solve A x = b in place (x -> b) for SPD A stored row-major in a[o:o+n*n]; A is overwritten.

    Returns False if A is not positive definite.
    """
    for j in range(n):
        s = a[o + j * n + j]
        for k in range(j):
            s -= a[o + j * n + k] * a[o + j * n + k]
        if not s > 0.0:
            return False
        d = np.sqrt(s)
        a[o + j * n + j] = d
        for i in range(j + 1, n):
            s = a[o + i * n + j]
            for k in range(j):
                s -= a[o + i * n + k] * a[o + j * n + k]
            a[o + i * n + j] = s / d
    for i in range(n):
        s = b[ob + i]
        for k in range(i):
            s -= a[o + i * n + k] * b[ob + k]
        b[ob + i] = s / a[o + i * n + i]
    for i in range(n - 1, -1, -1):
        s = b[ob + i]
        for k in range(i + 1, n):
            s -= a[o + k * n + i] * b[ob + k]
        b[ob + i] = s / a[o + i * n + i]
    return True


@njit(cache=True, forceinline=True)
def ldlt_factor(a, i, o, n, stride):
    """A = L D L^T in place for the n x n SPD matrix with entry (r, c) at a[i, o + stride r + c] (its lower
    triangle is read).

    Leaves L (unit diagonal) below the diagonal, 1/D on it and (L D)^T above it
    (Golub & Van Loan, Algorithm 4.1.2). Returns False if a pivot d_j <= 0 (A not
    positive definite); a NaN pivot (A overflowed) is carried into the result. For
    n = 1 (a 1-DOF joint) it is one division.
    """
    for j in range(n):
        rj = o + stride * j
        d = a[i, rj + j]
        for k in range(j):
            d -= a[i, rj + k] * a[i, o + stride * k + j]
        if d <= 0.0:
            return False
        inv = 1.0 / d
        for r in range(j + 1, n):
            rr = o + stride * r
            s = a[i, rr + j]
            for k in range(j):
                s -= a[i, rr + k] * a[i, o + stride * k + j]
            a[i, rj + r] = s
            a[i, rr + j] = s * inv
        a[i, rj + j] = inv
    return True


@njit(cache=True, forceinline=True)
def dot6(a, i, o1, o2):
    """a[i, o1:o1+6] . a[i, o2:o2+6]."""
    return (a[i, o1] * a[i, o2] + a[i, o1 + 1] * a[i, o2 + 1] + a[i, o1 + 2] * a[i, o2 + 2]
            + a[i, o1 + 3] * a[i, o2 + 3] + a[i, o1 + 4] * a[i, o2 + 4] + a[i, o1 + 5] * a[i, o2 + 5])


@njit(cache=True, forceinline=True)
def matrix_quaternion(r):
    """Unit quaternion ``(x, y, z, w)`` of a rotation given as a row-major 9-tuple, ``w >= 0`` (Shepperd,
    "Quaternion from rotation matrix", J. Guidance and Control 1(3), 1978: the largest of the four
    squares is taken first, so no division by a small number)."""
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = r
    trace = r0 + r4 + r8
    if trace >= r0 and trace >= r4 and trace >= r8:
        s = 2.0 * np.sqrt(1.0 + trace)
        w, x, y, z = 0.25 * s, (r7 - r5) / s, (r2 - r6) / s, (r3 - r1) / s
    elif r0 >= r4 and r0 >= r8:
        s = 2.0 * np.sqrt(1.0 + r0 - r4 - r8)
        w, x, y, z = (r7 - r5) / s, 0.25 * s, (r1 + r3) / s, (r2 + r6) / s
    elif r4 >= r8:
        s = 2.0 * np.sqrt(1.0 + r4 - r0 - r8)
        w, x, y, z = (r2 - r6) / s, (r1 + r3) / s, 0.25 * s, (r5 + r7) / s
    else:
        s = 2.0 * np.sqrt(1.0 + r8 - r0 - r4)
        w, x, y, z = (r3 - r1) / s, (r2 + r6) / s, (r5 + r7) / s, 0.25 * s
    if w < 0.0:
        return -x, -y, -z, -w
    return x, y, z, w
