"""Mass-matrix kernels: the generalized inertia matrix by composite modules (seed 004 eqs. A.2-A.3).

Every spatial quantity of the CRBA is referred to one point per subtree, P_k:
the origin of the root of body k's subtree (``W_P``; the base of an arm, the
floating base of a legged robot), in world axes. Referred to a common point, a
composite inertia is the plain sum of its bodies' inertias (eq. A.3 without
the shift A^T M~ A between bodies), and the force F = M~_i S_i of a DOF is the
same vector at every ancestor, so I^{i,j} = S_j^T A_{i,j}^T M~_i S_i (eq. A.2)
is one 6-term dot product with S_j referred to P (``W_SP``). This is
Featherstone's CRBA (RBDA 2008, sec. 6.2, Table 6.2: F = I^c_i S_i,
H_ij = S_j^T F up the tree) with the coordinate transforms of F between bodies
removed. P is the subtree's own root, not the world origin, so lever arms stay
of the robot's size wherever a floating base is.
"""
from __future__ import annotations

from numba import njit

from ..model import MF_ARMATURE, MF_MASS, MI_IV, MI_NV, MI_PARENT
from .joints import joint_trig
from .kinematics import body_pose
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, NOT_FINITE, OK, SIG_Q_MAT, W_CH, W_CI, W_CM, W_D, W_I, W_O, W_P,
                        W_S, W_SP, WRONG_LENGTH, all_finite, model_sizes)


@njit(cache=True, forceinline=True)
def refer_to_root(mi, mf, ws, i):
    """Body i's inertia and motion subspace referred to P_i (needs the pose, d_i and inertia of body i).

    Writes P_i (``W_P``), the body's mass, first moment and rotational inertia about P_i as the start
    of its composite (``W_CM``, ``W_CH``, ``W_CI``), and S_i referred to P_i (``W_SP``).
    """
    p = mi[i, MI_PARENT]
    if p >= 0:
        px, py, pz = ws[p, W_P], ws[p, W_P + 1], ws[p, W_P + 2]
    else:
        px, py, pz = ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2]
    ws[i, W_P], ws[i, W_P + 1], ws[i, W_P + 2] = px, py, pz
    rx, ry, rz = ws[i, W_O] - px, ws[i, W_O + 1] - py, ws[i, W_O + 2] - pz
    m = mf[i, MF_MASS]
    hx, hy, hz = m * ws[i, W_D], m * ws[i, W_D + 1], m * ws[i, W_D + 2]
    # I_P = I_O + 2 (r.h) 1 - h r^T - r h^T + m (|r|^2 1 - r r^T), h = m d the first moment about O
    rh = rx * hx + ry * hy + rz * hz
    rr = rx * rx + ry * ry + rz * rz
    ws[i, W_CI + 0] = ws[i, W_I + 0] + 2 * rh - 2 * hx * rx + m * (rr - rx * rx)
    ws[i, W_CI + 1] = ws[i, W_I + 1] + 2 * rh - 2 * hy * ry + m * (rr - ry * ry)
    ws[i, W_CI + 2] = ws[i, W_I + 2] + 2 * rh - 2 * hz * rz + m * (rr - rz * rz)
    ws[i, W_CI + 3] = ws[i, W_I + 3] - hx * ry - rx * hy - m * rx * ry
    ws[i, W_CI + 4] = ws[i, W_I + 4] - hx * rz - rx * hz - m * rx * rz
    ws[i, W_CI + 5] = ws[i, W_I + 5] - hy * rz - ry * hz - m * ry * rz
    ws[i, W_CM] = m
    ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2] = hx + m * rx, hy + m * ry, hz + m * rz
    end = DOF_WIDTH * mi[i, MI_NV]
    b = 0
    while b < end:
        s, o = W_S + b, W_SP + b
        ax, ay, az = ws[i, s], ws[i, s + 1], ws[i, s + 2]
        ws[i, o], ws[i, o + 1], ws[i, o + 2] = ax, ay, az
        ws[i, o + 3] = ws[i, s + 3] + ry * az - rz * ay
        ws[i, o + 4] = ws[i, s + 4] + rz * ax - rx * az
        ws[i, o + 5] = ws[i, s + 5] + rx * ay - ry * ax
        b += DOF_WIDTH


@njit(cache=True, forceinline=True)
def composite_columns(mi, mf, ws, M, n_dof):
    """Composite inertias (eq. A.3) and the GIM entries (eq. A.2) of the DOFs below ``n_dof``, in one pass
    from the leaves (:func:`refer_to_root` first for every body).

    When body i is reached its composite is complete (children have larger indices); its DOFs' columns
    are filled, then the composite is added to the parent's. Ancestors have smaller DOF indices, so a
    column below n_dof only touches rows below it. Entries of bodies on different branches are not
    written.
    """
    for i in range(mi.shape[0] - 1, -1, -1):
        iv = mi[i, MI_IV]
        if iv < n_dof:
            _columns(mi, mf, ws, M, i, iv)
        p = mi[i, MI_PARENT]
        if p >= 0:
            for k in range(10):
                ws[p, W_CM + k] += ws[i, W_CM + k]


@njit(cache=True, forceinline=True)
def _columns(mi, mf, ws, M, i, iv):
    """Columns of body i's DOFs: F = M~_i s = [I a + h x l; m l - h x a] for each column s = [a; l] of S
    (all about P_i), and I^{i,j} = s_j . F for every DOF of every ancestor j, i included."""
    m = ws[i, W_CM]
    hx, hy, hz = ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2]
    c0, c1, c2, c3, c4, c5 = ws[i, W_CI], ws[i, W_CI + 1], ws[i, W_CI + 2], ws[i, W_CI + 3], ws[i, W_CI + 4], \
        ws[i, W_CI + 5]
    col = iv
    end = W_SP + DOF_WIDTH * mi[i, MI_NV]
    o = W_SP
    while o < end:
        ax, ay, az, lx, ly, lz = ws[i, o], ws[i, o + 1], ws[i, o + 2], ws[i, o + 3], ws[i, o + 4], ws[i, o + 5]
        nx = c0 * ax + c3 * ay + c4 * az + hy * lz - hz * ly
        ny = c3 * ax + c1 * ay + c5 * az + hz * lx - hx * lz
        nz = c4 * ax + c5 * ay + c2 * az + hx * ly - hy * lx
        fx = m * lx - (hy * az - hz * ay)
        fy = m * ly - (hz * ax - hx * az)
        fz = m * lz - (hx * ay - hy * ax)
        j = i
        while j >= 0:
            row = mi[j, MI_IV]
            oj = W_SP
            ej = W_SP + DOF_WIDTH * mi[j, MI_NV]
            while oj < ej:
                val = (ws[j, oj] * nx + ws[j, oj + 1] * ny + ws[j, oj + 2] * nz
                       + ws[j, oj + 3] * fx + ws[j, oj + 4] * fy + ws[j, oj + 5] * fz)
                M[row, col] = val
                M[col, row] = val
                row += 1
                oj += DOF_WIDTH
            j = mi[j, MI_PARENT]
        M[col, col] += mf[i, MF_ARMATURE]
        col += 1
        o += DOF_WIDTH


@njit(SIG_Q_MAT, **ENTRY_OPTIONS)
def crba(mi, mf, ws, q, M):
    """Generalized inertia matrix by composite modules, seed 004 eqs. A.2-A.3.

    M~_i = M_i + sum_children M~_j (composite inertia about P_i, kept as
    mass, first moment and rotational inertia), and
    I^{i,j} = S_j^T M~_i S_i for j an ancestor of i, both S referred to P_i
    (see the module's docstring). Leaves the poses of q in ``ws``, as
    :func:`~rtctl.dynamics.kinematics.forward_kinematics` does.
    Returns a status code (``OK`` = 0).
    """
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if M.shape[0] != nv or M.shape[1] != nv:
        return WRONG_LENGTH + 2
    if not all_finite(q):
        return NOT_FINITE + 1
    joint_trig(mi, ws, q)
    for i in range(mi.shape[0]):
        body_pose(mi, mf, ws, q, i)
        refer_to_root(mi, mf, ws, i)
    for r in range(nv):
        for c in range(nv):
            M[r, c] = 0.0  # entries of bodies on different branches stay zero (eq. A.2)
    composite_columns(mi, mf, ws, M, nv)
    return OK
