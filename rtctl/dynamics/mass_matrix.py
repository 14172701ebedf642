"""Mass-matrix kernels: the generalized inertia matrix by composite modules (seed 004 eqs. A.2-A.3)."""
from __future__ import annotations

from numba import njit

from ..model import MF_ARMATURE, MF_MASS, MI_IV, MI_NV, MI_PARENT
from .kinematics import forward_kinematics
from .spatial import cross, sym_mul
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, NOT_FINITE, OK, SIG_Q_MAT, W_CH, W_CI, W_CM, W_D, W_I, W_O, W_S,
                        WRONG_LENGTH, all_finite, model_sizes)


@njit(cache=True, forceinline=True)
def composite_inertias(mi, mf, ws):
    """Composite-module inertias about each O_i (eq. A.3): mass, first moment, rotational inertia."""
    nb = mi.shape[0]
    for i in range(nb):
        m = mf[i, MF_MASS]
        ws[i, W_CM] = m
        for k in range(3):
            ws[i, W_CH + k] = m * ws[i, W_D + k]
        for k in range(6):
            ws[i, W_CI + k] = ws[i, W_I + k]
    for i in range(nb - 1, -1, -1):
        p = mi[i, MI_PARENT]
        if p < 0:
            continue
        m = ws[i, W_CM]
        hx, hy, hz = ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2]
        rx, ry, rz = ws[i, W_O] - ws[p, W_O], ws[i, W_O + 1] - ws[p, W_O + 1], ws[i, W_O + 2] - ws[p, W_O + 2]
        # I_P = I_O + 2 (r.h) 1 - h r^T - r h^T + m (|r|^2 1 - r r^T)
        rh = rx * hx + ry * hy + rz * hz
        rr = rx * rx + ry * ry + rz * rz
        ws[p, W_CI + 0] += ws[i, W_CI + 0] + 2 * rh - 2 * hx * rx + m * (rr - rx * rx)
        ws[p, W_CI + 1] += ws[i, W_CI + 1] + 2 * rh - 2 * hy * ry + m * (rr - ry * ry)
        ws[p, W_CI + 2] += ws[i, W_CI + 2] + 2 * rh - 2 * hz * rz + m * (rr - rz * rz)
        ws[p, W_CI + 3] += ws[i, W_CI + 3] - hx * ry - rx * hy - m * rx * ry
        ws[p, W_CI + 4] += ws[i, W_CI + 4] - hx * rz - rx * hz - m * rx * rz
        ws[p, W_CI + 5] += ws[i, W_CI + 5] - hy * rz - ry * hz - m * ry * rz
        ws[p, W_CM] += m
        ws[p, W_CH] += hx + m * rx
        ws[p, W_CH + 1] += hy + m * ry
        ws[p, W_CH + 2] += hz + m * rz


@njit(cache=True, forceinline=True)
def inertia_columns(mi, mf, ws, M, n_dof):
    """Fill the GIM entries I^{i,j} = S_j^T A^T M~_i S_i (eq. A.2) of the DOFs below ``n_dof``.

    Ancestors have smaller DOF indices, so a column below n_dof only touches rows below it.
    """
    nb = mi.shape[0]
    for i in range(nb):
        iv = mi[i, MI_IV]
        if iv >= n_dof:
            break
        m = ws[i, W_CM]
        hx, hy, hz = ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2]
        for k in range(mi[i, MI_NV]):
            col = iv + k
            o = W_S + DOF_WIDTH * k
            ex, ey, ez, lx, ly, lz = ws[i, o], ws[i, o + 1], ws[i, o + 2], ws[i, o + 3], ws[i, o + 4], ws[i, o + 5]
            # F = M~_i s (eq. 19 form with m d -> h): [I e + h x l; m l - h x e]
            ix, iy, iz = sym_mul(ws, i, W_CI, ex, ey, ez)
            ax_, ay_, az_ = cross(hx, hy, hz, lx, ly, lz)
            bx, by, bz = cross(hx, hy, hz, ex, ey, ez)
            nx, ny, nz = ix + ax_, iy + ay_, iz + az_
            fx, fy, fz = m * lx - bx, m * ly - by, m * lz - bz
            j = i
            while j >= 0:
                for kj in range(mi[j, MI_NV]):
                    row = mi[j, MI_IV] + kj
                    oj = W_S + DOF_WIDTH * kj
                    val = (ws[j, oj] * nx + ws[j, oj + 1] * ny + ws[j, oj + 2] * nz
                           + ws[j, oj + 3] * fx + ws[j, oj + 4] * fy + ws[j, oj + 5] * fz)
                    M[row, col] = val
                    M[col, row] = val
                pj = mi[j, MI_PARENT]
                if pj >= 0:
                    rx = ws[j, W_O] - ws[pj, W_O]
                    ry = ws[j, W_O + 1] - ws[pj, W_O + 1]
                    rz = ws[j, W_O + 2] - ws[pj, W_O + 2]
                    mx, my, mz = cross(rx, ry, rz, fx, fy, fz)
                    nx, ny, nz = nx + mx, ny + my, nz + mz
                j = pj
            M[col, col] += mf[i, MF_ARMATURE]


@njit(SIG_Q_MAT, **ENTRY_OPTIONS)
def crba(mi, mf, ws, q, M):
    """Generalized inertia matrix by composite modules, seed 004 eqs. A.2-A.3.

    M~_i = M_i + sum_children A^T M~_j A (composite inertia about O_i, kept as
    mass, first moment and rotational inertia), and
    I^{i,j} = S_j^T A_{i,j}^T M~_i S_i for j an ancestor of i.
    Returns a status code (``OK`` = 0).
    """
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if M.shape[0] != nv or M.shape[1] != nv:
        return WRONG_LENGTH + 2
    if not all_finite(q):
        return NOT_FINITE + 1
    forward_kinematics(mi, mf, ws, q)
    for r in range(nv):
        for c in range(nv):
            M[r, c] = 0.0  # entries of bodies on different branches stay zero (eq. A.2)
    composite_inertias(mi, mf, ws)
    inertia_columns(mi, mf, ws, M, nv)
    return OK
