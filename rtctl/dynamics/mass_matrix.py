"""Mass-matrix kernels: the generalized inertia matrix by composite modules (Shah, Saha & Dutt, 2012, eqs. A.2-A.3).

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

from ..model import MF_ARMATURE, MF_ICOM, MF_MASS, MI_IV, MI_NV, MI_PARENT
from .joints import joint_trig
from .kinematics import body_frame
from .spatial import sym_mul
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, NOT_FINITE, OK, SIG_Q_MAT, W_CH, W_CI, W_CM, W_D, W_O, W_P,
                        W_S, W_SP, WRONG_LENGTH, all_finite, model_sizes)

# Fused multiply-adds in the CRBA's own steps (not in the shared forward kinematics, see
# workspace.ENTRY_OPTIONS): about 4 % of a 6- to 9-DOF mass matrix, entries within round-off of the
# unfused ones (tests/test_pinocchio_agreement.py, tests/test_real_urdfs.py at 1e-9).
CONTRACT = {"contract"}


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def refer_to_root(mi, mf, ws, i, r):
    """Body i's inertia and motion subspace referred to P_i, from its pose, d_i and S_i in ``ws`` and its
    world rotation ``r`` (row-major 9-tuple).

    Writes P_i (``W_P``), the body's mass, first moment h = m c and rotational inertia about P_i,
    I_P = R I_C R^T + m (|c|^2 1 - c c^T) (c: the centre of mass from P_i; Steiner), as the start of
    its composite (``W_CM``, ``W_CH``, ``W_CI``), and S_i referred to P_i (``W_SP``).
    """
    p = mi[i, MI_PARENT]
    if p >= 0:
        px, py, pz = ws[p, W_P], ws[p, W_P + 1], ws[p, W_P + 2]
    else:
        px, py, pz = ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2]
    ws[i, W_P], ws[i, W_P + 1], ws[i, W_P + 2] = px, py, pz
    rx, ry, rz = ws[i, W_O] - px, ws[i, W_O + 1] - py, ws[i, W_O + 2] - pz
    cx, cy, cz = rx + ws[i, W_D], ry + ws[i, W_D + 1], rz + ws[i, W_D + 2]
    m = mf[i, MF_MASS]
    hx, hy, hz = m * cx, m * cy, m * cz
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = r
    a0, a1, a2 = sym_mul(mf, i, MF_ICOM, r0, r1, r2)  # rows of R I_C (I_C symmetric)
    b0, b1, b2 = sym_mul(mf, i, MF_ICOM, r3, r4, r5)
    e0, e1, e2 = sym_mul(mf, i, MF_ICOM, r6, r7, r8)
    ws[i, W_CI + 0] = a0 * r0 + a1 * r1 + a2 * r2 + (hy * cy + hz * cz)
    ws[i, W_CI + 1] = b0 * r3 + b1 * r4 + b2 * r5 + (hx * cx + hz * cz)
    ws[i, W_CI + 2] = e0 * r6 + e1 * r7 + e2 * r8 + (hx * cx + hy * cy)
    ws[i, W_CI + 3] = a0 * r3 + a1 * r4 + a2 * r5 - hx * cy
    ws[i, W_CI + 4] = a0 * r6 + a1 * r7 + a2 * r8 - hx * cz
    ws[i, W_CI + 5] = b0 * r6 + b1 * r7 + b2 * r8 - hy * cz
    ws[i, W_CM] = m
    ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2] = hx, hy, hz
    nv = mi[i, MI_NV]
    if nv == 1:
        _refer_column(ws, i, 0, rx, ry, rz)
    else:
        end = DOF_WIDTH * nv
        b = 0
        while b < end:
            _refer_column(ws, i, b, rx, ry, rz)
            b += DOF_WIDTH


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def _refer_column(ws, i, b, rx, ry, rz):
    """Column [a; l] of S_i (DOF block offset b) referred to P_i, r = O_i - P_i away: [a; l + r x a]."""
    s, o = W_S + b, W_SP + b
    ax, ay, az = ws[i, s], ws[i, s + 1], ws[i, s + 2]
    ws[i, o], ws[i, o + 1], ws[i, o + 2] = ax, ay, az
    ws[i, o + 3] = ws[i, s + 3] + ry * az - rz * ay
    ws[i, o + 4] = ws[i, s + 4] + rz * ax - rx * az
    ws[i, o + 5] = ws[i, s + 5] + rx * ay - ry * ax


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def composite_columns(mi, mf, ws, M, n_dof):
    """Composite inertias (eq. A.3) and the GIM entries (eq. A.2) of the DOFs below ``n_dof``, in one pass
    from the leaves (:func:`refer_to_root` first for every body).

    When body i is reached its composite is complete (children have larger indices); it is added to
    the parent's and its DOFs' columns are filled. Sums are paired (a tree, not a chain of additions):
    the pass is bound by the latency of its dependent multiply-adds. Ancestors have smaller DOF
    indices, so a column below n_dof only touches rows below it. Entries of bodies on different branches are not
    written (they are zero, eq. A.2).
    """
    for i in range(mi.shape[0] - 1, -1, -1):
        p = mi[i, MI_PARENT]
        if p >= 0:  # first, so that the parent's composite is complete early
            for k in range(10):
                ws[p, W_CM + k] += ws[i, W_CM + k]
        iv = mi[i, MI_IV]
        if iv < n_dof:
            _columns(mi, mf, ws, M, i, iv)


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def _columns(mi, mf, ws, M, i, iv):
    """Columns of body i's DOFs: F (:func:`_force`) for each column of S, and I^{i,j} = s_j . F for every
    DOF of every ancestor j, i included."""
    col = iv
    end = W_SP + DOF_WIDTH * mi[i, MI_NV]
    o = W_SP
    while o < end:
        nx, ny, nz, fx, fy, fz = _force(ws, i, o)
        _column(mi, ws, M, i, col, nx, ny, nz, fx, fy, fz)
        M[col, col] += mf[i, MF_ARMATURE]
        col += 1
        o += DOF_WIDTH


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def _force(ws, i, o):
    """F = M~_i s = [I a + h x l; m l - h x a] for the column s = [a; l] of S at ``ws[i, o:o+6]``, all
    about P_i (composite mass m, first moment h, rotational inertia I)."""
    m = ws[i, W_CM]
    hx, hy, hz = ws[i, W_CH], ws[i, W_CH + 1], ws[i, W_CH + 2]
    c0, c1, c2, c3, c4, c5 = ws[i, W_CI], ws[i, W_CI + 1], ws[i, W_CI + 2], ws[i, W_CI + 3], ws[i, W_CI + 4], \
        ws[i, W_CI + 5]
    ax, ay, az, lx, ly, lz = ws[i, o], ws[i, o + 1], ws[i, o + 2], ws[i, o + 3], ws[i, o + 4], ws[i, o + 5]
    return ((c0 * ax + c3 * ay) + (c4 * az + (hy * lz - hz * ly)),
            (c3 * ax + c1 * ay) + (c5 * az + (hz * lx - hx * lz)),
            (c4 * ax + c5 * ay) + (c2 * az + (hx * ly - hy * lx)),
            m * lx - (hy * az - hz * ay), m * ly - (hz * ax - hx * az), m * lz - (hx * ay - hy * ax))


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def _dot_sp(ws, j, o, nx, ny, nz, fx, fy, fz):
    """s . F for the column s of S referred to P at ``ws[j, o:o+6]`` (sums paired)."""
    return ((ws[j, o] * nx + ws[j, o + 1] * ny) + (ws[j, o + 2] * nz + ws[j, o + 3] * fx)) \
        + (ws[j, o + 4] * fy + ws[j, o + 5] * fz)


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def one_dof_columns(mi, mf, ws, M):
    """:func:`composite_columns` for a tree of 1-DOF joints (arms, fixed-base legs): the DOF of body k is
    row and column k, so the walk up the ancestors needs no DOF bookkeeping (about 12 % of an arm's
    mass matrix against the general walk)."""
    for i in range(mi.shape[0] - 1, -1, -1):
        p = mi[i, MI_PARENT]
        if p >= 0:
            for k in range(10):
                ws[p, W_CM + k] += ws[i, W_CM + k]
        nx, ny, nz, fx, fy, fz = _force(ws, i, W_SP)
        j = i
        while j >= 0:
            val = _dot_sp(ws, j, W_SP, nx, ny, nz, fx, fy, fz)
            M[j, i] = val
            M[i, j] = val
            j = mi[j, MI_PARENT]
        M[i, i] += mf[i, MF_ARMATURE]


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def chain_columns(mi, mf, ws, M):
    """:func:`one_dof_columns` for a serial chain (each body's parent the one before it): the ancestors
    of body i are the bodies before it, a counted loop (about 18 % of an arm's mass matrix against the
    general walk)."""
    for i in range(mi.shape[0] - 1, -1, -1):
        if i > 0:
            for k in range(10):
                ws[i - 1, W_CM + k] += ws[i, W_CM + k]
        nx, ny, nz, fx, fy, fz = _force(ws, i, W_SP)
        for j in range(i, -1, -1):
            val = _dot_sp(ws, j, W_SP, nx, ny, nz, fx, fy, fz)
            M[j, i] = val
            M[i, j] = val
        M[i, i] += mf[i, MF_ARMATURE]


@njit(cache=True, forceinline=True, fastmath=CONTRACT)
def _column(mi, ws, M, i, col, nx, ny, nz, fx, fy, fz):
    """M[row, col] = M[col, row] = s_row . F for the DOFs of body i and its ancestors. A 1-DOF joint, the
    common one, skips the loop over its DOFs."""
    j = i
    while j >= 0:
        row = mi[j, MI_IV]
        nvj = mi[j, MI_NV]
        if nvj == 1:
            val = _dot_sp(ws, j, W_SP, nx, ny, nz, fx, fy, fz)
            M[row, col] = val
            M[col, row] = val
        else:
            oj = W_SP
            ej = W_SP + DOF_WIDTH * nvj
            while oj < ej:
                val = _dot_sp(ws, j, oj, nx, ny, nz, fx, fy, fz)
                M[row, col] = val
                M[col, row] = val
                row += 1
                oj += DOF_WIDTH
        j = mi[j, MI_PARENT]


@njit(cache=True, forceinline=True)
def _serial_chain(mi):
    """True if each body's parent is the body before it (an arm): then every entry of M is written."""
    for i in range(1, mi.shape[0]):
        if mi[i, MI_PARENT] != i - 1:
            return False
    return True


@njit(SIG_Q_MAT, **ENTRY_OPTIONS)
def crba(mi, mf, ws, q, M):
    """Generalized inertia matrix by composite modules, Shah, Saha & Dutt (2012) eqs. A.2-A.3.

    M~_i = M_i + sum_children M~_j (composite inertia about P_i, kept as
    mass, first moment and rotational inertia), and
    I^{i,j} = S_j^T M~_i S_i for j an ancestor of i, both S referred to P_i
    (see the module's docstring). Leaves the poses of q in ``ws`` (with S and d,
    not the inertias about O_k), as
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
        refer_to_root(mi, mf, ws, i, body_frame(mi, mf, ws, q, i))
    chain = _serial_chain(mi)
    if not chain:  # in a chain every DOF is an ancestor or a descendant of every other
        for r in range(nv):
            for c in range(nv):
                M[r, c] = 0.0  # entries of bodies on different branches stay zero (eq. A.2)
    if nv != mi.shape[0]:  # a joint with several DOFs (a free-flyer)
        composite_columns(mi, mf, ws, M, nv)
    elif chain:
        chain_columns(mi, mf, ws, M)
    else:
        one_dof_columns(mi, mf, ws, M)
    return OK
