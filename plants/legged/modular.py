"""Module-level DeNOC dynamics of Shah, Saha & Dutt (2012): the paper's block recursion over kinematic modules.

rtctl's dynamics kernels (:mod:`rtctl.dynamics`) recurse link by link. This
module is the second, independent kernel the paper is about: each kinematic
module ``M_i`` (a serial chain of ``eta^i`` one-DOF links emerging from the
last link of its parent module ``M_beta``) is handled as one block, with the
module matrices of section 2 and Appendix A built explicitly:

* ``N^i`` (6 eta^i x eta^i), the module-joint-rate propagation matrix of
  eq. 5, block (k, j) = ``A_{k,j} p_j`` for ``k >= j``;
* ``A^{i,beta}`` (6 eta^i x 6 eta^beta), the module-twist propagation matrix
  of eq. 9: only its last block column (the parent module's last link) is
  non-zero, so it is stored as that 6 eta^i x 6 column;
* ``M^i = diag(M_k)`` (eqs. 18-19), the 6 x 6 link mass matrices about O_k.

Twists ``t_k = [omega_k; odot_k]`` and twist rates are world-axes, about the
link origins O_k (eqs. 1-2, as in :mod:`rtctl.dynamics.kinematics`); the
link poses, world-axes joint axes ``p_k``, centre-of-mass offsets ``d_k`` and
inertias ``I_k`` about O_k come from :func:`rtctl.dynamics.kinematics.forward_kinematics`.

Recursions (Fig. A.1)
    forward, modules 0..s:  ``t^i = A^{i,beta} t^beta + N^i qd^i`` (eq. 8),
        ``t'^i = A^{i,beta} t'^beta + Adot^{i,beta} t^beta + N^i qdd^i + Ndot^i qd^i``
        (eq. 8 differentiated; ``Adot`` has ``(odot_j - odot_k)~`` in its lower-left block,
        ``pdot_k = Omega_k p_k``), ``w^i = M^i t'^i + Omega^i M^i E^i t^i - w^{F,i}`` (eq. 17);
    backward, modules s..0: ``w~^i = w^i + sum_{c in xi^i} A^{c,i T} w~^c`` and
        ``h~^i = N^{i T} w~^i``, i.e. ``h~ = N_d^T N_l^T w`` (eqs. 22, 28).
    GIM (eqs. A.2-A.3): ``M~^i = M^i + sum_c A^{c,i T} M~^c A^{c,i}`` (the 6 eta^i x 6 eta^i
        composite-module mass matrix) and ``I^{i,j} = N^{i T} M~^i A^{i,j} N^j`` for ``M_i in gamma^j``.
    Floating-base inverse dynamics (eqs. 26-27, steps 1-3 of section 4.1):
        ``h~`` with ``qdd_0 = 0``, ``I_0 = I^{0,0}``, ``I_{theta0} = [I^{i,0}]``,
        ``qdd_0 = -I_0^{-1} h~_0`` (Cholesky), ``tau_theta = I_{theta0} qdd_0 + h~_theta``.
    Forward dynamics (section 4.2, eqs. 28-30, Fig. A.2; the block UDU^T of eqs. A.4-A.9):
        step 1 ``h`` at ``qdd = 0``; backward, modules s..0: ``M^^i = M^i + sum_c A^{c,i T} M-bar^c A^{c,i}``,
        ``Psi^^i = M^^i N^i``, ``I^^i = N^{i T} Psi^^i = U_i D_i U_i^T`` (within the module),
        ``M-bar^i = M^^i - Psi^^i Psi^{i T}``, ``phi^^i = phi^i - N^{i T} eta^i``, ``phi~^i = I^^{i,-1} phi^^i``;
        forward, modules 0..s: ``qdd^i = phi~^i - Psi^{i T} A^{i,beta} mu-bar^beta``. Read from the OCR'd text
        and re-derived: A.6 is ``U^{i,j} = N^{i T} A^{j,i T} Psi^j`` (the printed order does not multiply), A.7's
        "I^{i-1}" is the inverse of I^^i, and step 1's "qdot = 0" is ``qdd = 0`` (tests/test_legged_modular_fd.py).

Gravity enters as the world's twist rate ``[0; -g]`` (as in rtctl's RNEA).
Joint armature ``a_k`` adds ``a_k qdd_k`` to the forces and ``a_k`` to the GIM
diagonal. The same source runs compiled (numba) and, loaded a second time
with ``COUNTING = True``, as plain Python on operation-counting scalars
(:mod:`rtctl.plants.legged.opcount`): the operation counts of Table 1 are
counts of this very algorithm. Its compiled entries and checked Python API (:class:`ModularDynamics`) are
:mod:`rtctl.plants.legged.module_dynamics`.
"""
import numpy as np

COUNTING = globals().get("COUNTING", False)
if COUNTING:
    def jit(f):
        return f
else:
    from numba import njit
    jit = njit(cache=True)

# Columns of the module table ``mods`` (nm, 4).
MOD_FIRST, MOD_LINKS, MOD_PARENT, MOD_DOF = 0, 1, 2, 3


@jit
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@jit
def _link_mass_matrix(m, d, inertia, b, out, r0):
    """M_k of eq. 19 about O_k, world axes: [I_k, m d~; -m d~, m 1], into out[r0:r0+6, r0:r0+6]."""
    ix, iy, iz, ixy, ixz, iyz = inertia[b, 0], inertia[b, 1], inertia[b, 2], inertia[b, 3], inertia[b, 4], inertia[b, 5]
    mk = m[b]
    hx, hy, hz = mk * d[b, 0], mk * d[b, 1], mk * d[b, 2]
    out[r0, r0], out[r0, r0 + 1], out[r0, r0 + 2] = ix, ixy, ixz
    out[r0 + 1, r0], out[r0 + 1, r0 + 1], out[r0 + 1, r0 + 2] = ixy, iy, iyz
    out[r0 + 2, r0], out[r0 + 2, r0 + 1], out[r0 + 2, r0 + 2] = ixz, iyz, iz
    # m d~ (upper right) and -m d~ (lower left)
    out[r0, r0 + 3], out[r0, r0 + 4], out[r0, r0 + 5] = 0.0, -hz, hy
    out[r0 + 1, r0 + 3], out[r0 + 1, r0 + 4], out[r0 + 1, r0 + 5] = hz, 0.0, -hx
    out[r0 + 2, r0 + 3], out[r0 + 2, r0 + 4], out[r0 + 2, r0 + 5] = -hy, hx, 0.0
    out[r0 + 3, r0], out[r0 + 3, r0 + 1], out[r0 + 3, r0 + 2] = 0.0, hz, -hy
    out[r0 + 4, r0], out[r0 + 4, r0 + 1], out[r0 + 4, r0 + 2] = -hz, 0.0, hx
    out[r0 + 5, r0], out[r0 + 5, r0 + 1], out[r0 + 5, r0 + 2] = hy, -hx, 0.0
    for r in range(3):
        for c in range(3):
            out[r0 + 3 + r, r0 + 3 + c] = mk if r == c else 0.0


@jit
def _twist_shift(pos, k, j, x, out, r0):
    """out[r0:r0+6] = A_{k,j} x (eq. 2): [x_ang; x_lin + (O_j - O_k) x x_ang]."""
    ax, ay, az = pos[j, 0] - pos[k, 0], pos[j, 1] - pos[k, 1], pos[j, 2] - pos[k, 2]
    cx, cy, cz = _cross(ax, ay, az, x[0], x[1], x[2])
    out[r0], out[r0 + 1], out[r0 + 2] = x[0], x[1], x[2]
    out[r0 + 3], out[r0 + 4], out[r0 + 5] = x[3] + cx, x[4] + cy, x[5] + cz


@jit
def _shift_block(pos, k, j, out, r0):
    """The 6 x 6 A_{k,j} of eq. 2 into out[r0:r0+6, 0:6]: [1 0; a~ 1] with a = O_j - O_k."""
    ax, ay, az = pos[j, 0] - pos[k, 0], pos[j, 1] - pos[k, 1], pos[j, 2] - pos[k, 2]
    for r in range(6):
        for c in range(6):
            out[r0 + r, c] = 1.0 if r == c else 0.0
    out[r0 + 3, 1], out[r0 + 3, 2] = -az, ay
    out[r0 + 4, 0], out[r0 + 4, 2] = az, -ax
    out[r0 + 5, 0], out[r0 + 5, 1] = -ay, ax


@jit
def module_matrices(mods, pos, s_axis, v, twist, n_mat, n_dot, a_col, a_dot):
    """Forward pass 1: for each module (parents first) the twists t^i (eq. 8), N^i (eq. 5), the non-zero
    block column of A^{i,beta} (eq. 9) and the time derivatives N-dot^i and (A-dot^{i,beta} t^beta).

    ``twist`` (nb, 6) link twists; ``n_mat``, ``n_dot`` (nm, 6E, E); ``a_col`` (nm, 6E, 6);
    ``a_dot`` (nm, 6E): A-dot^{i,beta} t^beta, the velocity-product part of the parent's propagation.
    """
    for i in range(mods.shape[0]):
        first, eta, beta, dof = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_PARENT], mods[i, MOD_DOF]
        last_beta = mods[beta, MOD_FIRST] + mods[beta, MOD_LINKS] - 1 if beta >= 0 else -1
        for k in range(eta):
            b = first + k
            if last_beta >= 0:
                _shift_block(pos, b, last_beta, a_col[i], 6 * k)
                _twist_shift(pos, b, last_beta, twist[last_beta], twist[b], 0)
            else:
                for r in range(6):
                    twist[b, r] = 0.0
            for j in range(k):                     # N^i block (k, j) = A_{k,j} p_j, eq. 5
                bj = first + j
                _twist_shift(pos, b, bj, s_axis[bj], n_mat[i, :, j], 6 * k)
            for r in range(6):                     # block (k, k) = p_k (A_{k,k} = 1)
                n_mat[i, 6 * k + r, k] = s_axis[b, r]
            for j in range(k + 1, eta):
                for r in range(6):
                    n_mat[i, 6 * k + r, j] = 0.0
            for r in range(6):
                for j in range(k + 1):
                    twist[b, r] = twist[b, r] + n_mat[i, 6 * k + r, j] * v[dof + j]
        for k in range(eta):                       # rates, with the twists of this module known
            b = first + k
            if last_beta >= 0:                     # A-dot^{i,beta} t^beta: (odot_beta - odot_k) x omega_beta
                ux = twist[last_beta, 3] - twist[b, 3]
                uy = twist[last_beta, 4] - twist[b, 4]
                uz = twist[last_beta, 5] - twist[b, 5]
                cx, cy, cz = _cross(ux, uy, uz, twist[last_beta, 0], twist[last_beta, 1], twist[last_beta, 2])
                a_dot[i, 6 * k], a_dot[i, 6 * k + 1], a_dot[i, 6 * k + 2] = 0.0, 0.0, 0.0
                a_dot[i, 6 * k + 3], a_dot[i, 6 * k + 4], a_dot[i, 6 * k + 5] = cx, cy, cz
            else:
                for r in range(6):
                    a_dot[i, 6 * k + r] = 0.0
            for j in range(k + 1):                 # N-dot block (k, j) = A-dot_{k,j} p_j + A_{k,j} Omega_j p_j
                bj = first + j
                wjx, wjy, wjz = twist[bj, 0], twist[bj, 1], twist[bj, 2]
                ex, ey, ez = s_axis[bj, 0], s_axis[bj, 1], s_axis[bj, 2]
                lx, ly, lz = s_axis[bj, 3], s_axis[bj, 4], s_axis[bj, 5]
                pex, pey, pez = _cross(wjx, wjy, wjz, ex, ey, ez)
                plx, ply, plz = _cross(wjx, wjy, wjz, lx, ly, lz)
                r0 = 6 * k
                n_dot[i, r0, j], n_dot[i, r0 + 1, j], n_dot[i, r0 + 2, j] = pex, pey, pez
                if j == k:                         # block (k, k) = Omega_k p_k (A_{k,k} = 1, A-dot_{k,k} = 0)
                    n_dot[i, r0 + 3, j], n_dot[i, r0 + 4, j], n_dot[i, r0 + 5, j] = plx, ply, plz
                    continue
                ax, ay, az = pos[bj, 0] - pos[b, 0], pos[bj, 1] - pos[b, 1], pos[bj, 2] - pos[b, 2]
                sx, sy, sz = _cross(ax, ay, az, pex, pey, pez)
                ux, uy, uz = twist[bj, 3] - twist[b, 3], twist[bj, 4] - twist[b, 4], twist[bj, 5] - twist[b, 5]
                dx, dy, dz = _cross(ux, uy, uz, ex, ey, ez)
                n_dot[i, r0 + 3, j] = plx + sx + dx
                n_dot[i, r0 + 4, j] = ply + sy + dy
                n_dot[i, r0 + 5, j] = plz + sz + dz


@jit
def module_wrenches(mods, pos, d, m, inertia, gravity, fext, v, a, twist, n_mat, n_dot, a_col, a_dot, rate,
                    wrench, mass_work):
    """Forward pass 2: twist rates t'^i (eq. 8 differentiated) with the world's twist rate [0; -g], and the
    module wrenches w^i = M^i t'^i + Omega^i M^i E^i t^i - w^{F,i} (eq. 17) into ``wrench`` (nb, 6)."""
    for i in range(mods.shape[0]):
        first, eta, beta, dof = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_PARENT], mods[i, MOD_DOF]
        last_beta = mods[beta, MOD_FIRST] + mods[beta, MOD_LINKS] - 1 if beta >= 0 else -1
        for k in range(eta):
            b = first + k
            if last_beta >= 0:
                for r in range(6):
                    s = 0.0
                    for c in range(6):
                        s = s + a_col[i, 6 * k + r, c] * rate[last_beta, c]
                    rate[b, r] = s + a_dot[i, 6 * k + r]
            else:
                rate[b, 0], rate[b, 1], rate[b, 2] = 0.0, 0.0, 0.0
                rate[b, 3], rate[b, 4], rate[b, 5] = -gravity[0], -gravity[1], -gravity[2]
            for r in range(6):
                s = rate[b, r]
                for j in range(k + 1):
                    s = s + n_mat[i, 6 * k + r, j] * a[dof + j] + n_dot[i, 6 * k + r, j] * v[dof + j]
                rate[b, r] = s
            _link_mass_matrix(m, d, inertia, b, mass_work, 0)
            wx, wy, wz = twist[b, 0], twist[b, 1], twist[b, 2]
            for r in range(6):                     # M_k t'_k
                s = 0.0
                for c in range(6):
                    s = s + mass_work[r, c] * rate[b, c]
                wrench[b, r] = s - fext[b, r]
            # Omega_k M_k E_k t_k = [omega~ I omega; omega~ (-m d~ omega)]
            iwx = mass_work[0, 0] * wx + mass_work[0, 1] * wy + mass_work[0, 2] * wz
            iwy = mass_work[1, 0] * wx + mass_work[1, 1] * wy + mass_work[1, 2] * wz
            iwz = mass_work[2, 0] * wx + mass_work[2, 1] * wy + mass_work[2, 2] * wz
            gx, gy, gz = _cross(wx, wy, wz, iwx, iwy, iwz)
            hwx = mass_work[3, 0] * wx + mass_work[3, 1] * wy + mass_work[3, 2] * wz
            hwy = mass_work[4, 0] * wx + mass_work[4, 1] * wy + mass_work[4, 2] * wz
            hwz = mass_work[5, 0] * wx + mass_work[5, 1] * wy + mass_work[5, 2] * wz
            fx, fy, fz = _cross(wx, wy, wz, hwx, hwy, hwz)
            wrench[b, 0], wrench[b, 1], wrench[b, 2] = wrench[b, 0] + gx, wrench[b, 1] + gy, wrench[b, 2] + gz
            wrench[b, 3], wrench[b, 4], wrench[b, 5] = wrench[b, 3] + fx, wrench[b, 4] + fy, wrench[b, 5] + fz


@jit
def module_backward(mods, a_col, n_mat, arm, a, wrench, out):
    """Backward pass: w~^i = w^i + sum_c A^{c,i T} w~^c and h~^i = N^{i T} w~^i (eqs. 22, 28), plus the
    armature forces; children are later modules, so modules are visited last to first."""
    for i in range(mods.shape[0] - 1, -1, -1):
        first, eta, beta, dof = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_PARENT], mods[i, MOD_DOF]
        for j in range(eta):
            s = arm[first + j] * a[dof + j]
            for k in range(j, eta):
                for r in range(6):
                    s = s + n_mat[i, 6 * k + r, j] * wrench[first + k, r]
            out[dof + j] = s
        if beta >= 0:                              # A^{i,beta T} w~^i lands on the parent's last link
            last_beta = mods[beta, MOD_FIRST] + mods[beta, MOD_LINKS] - 1
            for c in range(6):
                s = 0.0
                for k in range(eta):
                    for r in range(6):
                        s = s + a_col[i, 6 * k + r, c] * wrench[first + k, r]
                wrench[last_beta, c] = wrench[last_beta, c] + s


@jit
def module_inverse_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, a, tau, twist, rate, wrench,
                            n_mat, n_dot, a_col, a_dot, mass_work):
    """tau = I(q) qdd + C qd - tau^F (eqs. 23-24, 28) by the module recursion of Fig. A.1."""
    module_matrices(mods, pos, s_axis, v, twist, n_mat, n_dot, a_col, a_dot)
    module_wrenches(mods, pos, d, m, inertia, gravity, fext, v, a, twist, n_mat, n_dot, a_col, a_dot, rate, wrench,
                    mass_work)
    module_backward(mods, a_col, n_mat, arm, a, wrench, tau)


@jit
def composite_module_mass(mods, pos, d, m, inertia, a_col, m_tilde, mass_work):
    """M~^i = M^i + sum_c A^{c,i T} M~^c A^{c,i} (eq. A.3), modules last to first; ``m_tilde`` (nm, 6E, 6E)."""
    nm = mods.shape[0]
    for i in range(nm):
        eta = mods[i, MOD_LINKS]
        for r in range(6 * eta):
            for c in range(6 * eta):
                m_tilde[i, r, c] = 0.0
        for k in range(eta):
            _link_mass_matrix(m, d, inertia, mods[i, MOD_FIRST] + k, m_tilde[i], 6 * k)
    for i in range(nm - 1, 0, -1):
        eta, beta = mods[i, MOD_LINKS], mods[i, MOD_PARENT]
        r0 = 6 * (mods[beta, MOD_LINKS] - 1)       # the parent's last link
        for c in range(6):                         # mass_work[:6 eta, :6] = M~^i A-column
            for r in range(6 * eta):
                s = 0.0
                for k in range(6 * eta):
                    s = s + m_tilde[i, r, k] * a_col[i, k, c]
                mass_work[r, c] = s
        for r in range(6):
            for c in range(6):
                s = 0.0
                for k in range(6 * eta):
                    s = s + a_col[i, k, r] * mass_work[k, c]
                m_tilde[beta, r0 + r, r0 + c] = m_tilde[beta, r0 + r, r0 + c] + s


@jit
def module_mass_matrix(mods, pos, d, m, inertia, arm, n_mat, a_col, m_tilde, mass_work, shift, n_cols, out):
    """GIM blocks I^{i,j} = N^{i T} M~^i A^{i,j} N^j for M_i in gamma^j (eq. A.2) into ``out`` for every module i
    and its ancestors j (j = i included: A^{i,i} = 1); other blocks are zero. Needs N^i and A^{i,beta}
    (:func:`module_matrices`). ``n_cols`` limits the columns to DOFs below it (``nv``: the whole GIM;
    the base's n_0: only I_0 and I_{theta0}, as the floating-base inverse dynamics needs)."""
    nv = out.shape[0]
    for r in range(nv):
        for c in range(n_cols):
            out[r, c] = 0.0
    composite_module_mass(mods, pos, d, m, inertia, a_col, m_tilde, mass_work)
    for i in range(mods.shape[0]):
        first_i, eta_i, dof_i = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_DOF]
        j = i
        while j >= 0:
            first_j, eta_j, dof_j = mods[j, MOD_FIRST], mods[j, MOD_LINKS], mods[j, MOD_DOF]
            if dof_j < n_cols:
                last_j = first_j + eta_j - 1
                for k in range(eta_i):             # shift[:6 eta_i, :eta_j] = A^{i,j} N^j
                    for c in range(eta_j):
                        if j == i:
                            for r in range(6):
                                shift[6 * k + r, c] = n_mat[i, 6 * k + r, c]
                        else:
                            _twist_shift(pos, first_i + k, last_j, n_mat[j, 6 * (eta_j - 1):6 * eta_j, c], shift[:, c],
                                         6 * k)
                for c in range(eta_j):             # mass_work[:6 eta_i, c] = M~^i A^{i,j} N^j
                    for r in range(6 * eta_i):
                        s = 0.0
                        for k in range(6 * eta_i):
                            s = s + m_tilde[i, r, k] * shift[k, c]
                        mass_work[r, c] = s
                for r in range(eta_i):             # I^{i,j} = N^{i T} (...)
                    for c in range(eta_j):
                        if dof_j + c >= n_cols:
                            continue
                        s = 0.0
                        for k in range(r, eta_i):
                            for e in range(6):
                                s = s + n_mat[i, 6 * k + e, r] * mass_work[6 * k + e, c]
                        out[dof_i + r, dof_j + c] = s
                        if j != i and dof_i + r < n_cols:
                            out[dof_j + c, dof_i + r] = s
            j = mods[j, MOD_PARENT]
    for i in range(mods.shape[0]):
        for k in range(mods[i, MOD_LINKS]):
            col = mods[i, MOD_DOF] + k
            if col < n_cols:
                out[col, col] = out[col, col] + arm[mods[i, MOD_FIRST] + k]


@jit
def _cholesky_solve(a, n, b):
    """Solve A x = b for the SPD n x n matrix a[:n, :n] (overwritten by its Cholesky factor), x -> b[:n].
    Returns False if A is not positive definite."""
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s = s - a[j, k] * a[j, k]
        if not s > 0.0:
            return False
        djj = np.sqrt(s)
        a[j, j] = djj
        for i in range(j + 1, n):
            s = a[i, j]
            for k in range(j):
                s = s - a[i, k] * a[j, k]
            a[i, j] = s / djj
    for i in range(n):
        s = b[i]
        for k in range(i):
            s = s - a[i, k] * b[k]
        b[i] = s / a[i, i]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, n):
            s = s - a[k, i] * b[k]
        b[i] = s / a[i, i]
    return True


@jit
def module_floating_base_id(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, a, acc, tau, twist, rate, wrench,
                            n_mat, n_dot, a_col, a_dot, m_tilde, mass_work, shift, gim, base):
    """Under-actuated inverse dynamics, eqs. 26-27 (steps 1-3 of section 4.1) by the module recursion.

    Step 1-2: h~ = N_d^T N_l^T w with qdd_0 = 0 and qdd_theta = a[n0:]; I_0 and I_{theta0} (the first n0
    columns of the GIM, eq. A.2). Step 3: qdd_0 = -I_0^{-1} h~_0, tau_theta = I_{theta0} qdd_0 + h~_theta.
    ``n0 = base.shape[0]`` is the base module's DOF count. Writes the full acceleration to ``acc``
    and the forces to ``tau`` (base part 0). Returns False if I_0 is singular.
    """
    n0 = base.shape[0]
    nv = acc.shape[0]
    for k in range(nv):
        acc[k] = a[k] if k >= n0 else 0.0
    module_inverse_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, acc, tau, twist, rate, wrench,
                            n_mat, n_dot, a_col, a_dot, mass_work)
    module_mass_matrix(mods, pos, d, m, inertia, arm, n_mat, a_col, m_tilde, mass_work, shift, n0, gim)
    for r in range(n0):
        acc[r] = -tau[r]
        for c in range(n0):
            base[r, c] = gim[r, c]
    if not _cholesky_solve(base, n0, acc):
        return False
    for r in range(n0, nv):
        s = tau[r]
        for c in range(n0):
            s = s + gim[r, c] * acc[c]
        tau[r] = s
    for r in range(n0):
        tau[r] = 0.0
    return True


# -- forward dynamics: the block UDU^T of Appendix A.1 and eqs. 28-30 ----------------------------------------------
@jit
def _udu_factor(a, n):
    """Intra-modular decomposition I^^i = U_i D_i U_i^T of the eta x eta articulated-module inertia (Appendix A.3:
    the serial chain's reverse Gaussian elimination [21]), in place on a[:n, :n]: D_i on the diagonal, the unit
    upper-triangular U_i above it (the input's upper triangle is read, the lower one is scratch).
    Returns False if a pivot is not positive."""
    for j in range(n - 1, -1, -1):
        for k in range(j + 1, n):                  # U_i[j, k] D_k, kept below the diagonal
            a[k, j] = a[j, k] * a[k, k]
        s = a[j, j]
        for k in range(j + 1, n):
            s = s - a[j, k] * a[k, j]
        if not s > 0.0:
            return False
        a[j, j] = s
        for r in range(j):
            t = a[r, j]
            for k in range(j + 1, n):
                t = t - a[r, k] * a[k, j]
            a[r, j] = t / s
    return True


@jit
def _udu_solve(a, n, b):
    """b[:n] <- (U_i D_i U_i^T)^{-1} b[:n] with the factors of :func:`_udu_factor`: eq. 30's three solves within a
    module, U_i z = b (last to first), then D_i^{-1} and U_i^T x = D_i^{-1} z (first to last)."""
    for j in range(n - 1, -1, -1):
        s = b[j]
        for k in range(j + 1, n):
            s = s - a[j, k] * b[k]
        b[j] = s
    for j in range(n):
        s = b[j] / a[j, j]
        for k in range(j):
            s = s - a[k, j] * b[k]
        b[j] = s


@jit
def _add_shifted_inertia(mk, a_col, r0, out):
    """out += A_k^T M A_k for a symmetric 6 x 6 M = [P Q; Q^T R] and A_k = [1 0; a~ 1] (eq. 2, a~ read from rows
    r0+3:r0+6 of the A^{i,beta} block column ``a_col``): [P + X a~ - a~ Q^T, X; X^T, R] with X = Q - a~ R;
    upper triangle computed, mirrored (the parent's share of A.8)."""
    for r in range(3):                             # X = Q - a~ R -> out's upper-right block (and its transpose)
        for c in range(3):
            s = mk[r, 3 + c]
            for e in range(3):
                s = s - a_col[r0 + 3 + r, e] * mk[3 + e, 3 + c]
            out[r, 3 + c] = out[r, 3 + c] + s
            out[3 + c, r] = out[r, 3 + c]
            mk[r, 3 + c] = s                       # M^_k's Q is not read again: X kept in its place
    for r in range(3):                             # P + X a~ - a~ Q^T, with Q^T = mk's lower-left block
        for c in range(r, 3):
            s = mk[r, c]
            for e in range(3):
                s = s + mk[r, 3 + e] * a_col[r0 + 3 + e, c] - a_col[r0 + 3 + r, e] * mk[3 + e, c]
            out[r, c] = out[r, c] + s
            out[c, r] = out[r, c]
    for r in range(3):                             # R
        for c in range(r, 3):
            out[3 + r, 3 + c] = out[3 + r, 3 + c] + mk[3 + r, 3 + c]
            out[3 + c, 3 + r] = out[3 + r, 3 + c]


@jit
def articulated_modules(mods, d, m, inertia, arm, n_mat, a_col, phi, m_hat, i_hat, psi_hat, g, g_hat, mass_work, eta):
    """Backward pass of the forward dynamics, modules last to first: the block UDU^T of the GIM (eqs. A.4-A.9)
    with eq. 30 (i)-(ii) done on the way.

    Per module: M^^i = M^i + sum_c A^{c,i T} M-bar^c A^{c,i} (A.8; the children's shares land on the last link,
    so M^^i stays block diagonal and is kept per link in ``m_hat`` (nb, 6, 6)); Psi^^i = M^^i N^i (A.7);
    I^^i = N^{i T} Psi^^i (A.6, plus the joints' armature), factored I^^i = U_i D_i U_i^T (:func:`_udu_factor`).
    Psi^i = Psi^^i I^^{i,-1} (A.7; the OCR prints the inverse as "I^{i-1}") enters U only as
    U^{beta,i} = N^{beta T} A^{i,beta T} Psi^i (A.6: the OCR's order "(A^{j,i})^T N^{i,T}" does not multiply),
    so it is kept as the 6 x eta^i ``g[i]`` = A^{i,beta T} Psi^i = (I^^{i,-1} G^^T)^T with G^ = A^{i,beta T} Psi^^i.
    The parent's share (A.9) A^{i,beta T} (M^^i - Psi^^i Psi^{i T}) A^{i,beta} = sum_k A_k^T M^_k A_k - G^ g^T
    (:func:`_add_shifted_inertia`; M^^i is not read again afterwards).
    Eq. 30 (i), U phi^ = phi: phi^^i = phi^i - N^{i T} eta^i with eta^i = sum_c A^{c,i T} (Psi^c phi^^c + eta^c)
    (on the last link: ``eta`` (nb, 6)); (ii), D phi~ = phi^: phi~^i = I^^{i,-1} phi^^i. ``phi`` (nv) holds
    tau - h on entry and phi~ on return. Returns False if an I^^i is not positive definite."""
    nm = mods.shape[0]
    for i in range(nm):                            # M^^i = M^i before the children's shares; eta = 0
        for k in range(mods[i, MOD_LINKS]):
            b = mods[i, MOD_FIRST] + k
            _link_mass_matrix(m, d, inertia, b, m_hat[b], 0)
            for r in range(6):
                eta[b, r] = 0.0
    for i in range(nm - 1, -1, -1):
        first, n, beta, dof = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_PARENT], mods[i, MOD_DOF]
        last = first + n - 1
        for k in range(n):                         # Psi^^i = M^^i N^i, block (k, j) = M^_k A_{k,j} p_j, j <= k
            for j in range(k + 1):
                for r in range(6):
                    s = 0.0
                    for c in range(6):
                        s = s + m_hat[first + k, r, c] * n_mat[i, 6 * k + c, j]
                    psi_hat[6 * k + r, j] = s
        for r in range(n):                         # I^^i = N^{i T} Psi^^i (upper triangle) + armature
            for c in range(r, n):
                s = arm[first + r] if r == c else 0.0
                for k in range(c, n):
                    for e in range(6):
                        s = s + n_mat[i, 6 * k + e, r] * psi_hat[6 * k + e, c]
                i_hat[r, c] = s
        if not _udu_factor(i_hat, n):
            return False
        for j in range(n):                         # phi^^i = phi^i - N^{i T} eta^i (eq. 30 i)
            s = phi[dof + j]
            for e in range(6):
                s = s - n_mat[i, 6 * (n - 1) + e, j] * eta[last, e]
            phi[dof + j] = s
        if beta >= 0:
            last_beta = mods[beta, MOD_FIRST] + mods[beta, MOD_LINKS] - 1
            for c in range(6):                     # G^ = A^{i,beta T} Psi^^i, g = (I^^{i,-1} G^^T)^T
                for j in range(n):
                    s = 0.0
                    for k in range(j, n):
                        for r in range(6):
                            s = s + a_col[i, 6 * k + r, c] * psi_hat[6 * k + r, j]
                    g_hat[c, j] = s
                    g[i, c, j] = s
                _udu_solve(i_hat, n, g[i, c])
            for c in range(6):                     # eta^beta += A^{i,beta T} (Psi^i phi^^i + eta^i)
                s = eta[last_beta, c]
                for j in range(n):
                    s = s + g[i, c, j] * phi[dof + j]
                for r in range(6):
                    s = s + a_col[i, 6 * (n - 1) + r, c] * eta[last, r]
                eta[last_beta, c] = s
            for r in range(6):                     # M^^beta += A^T M^^i A - G^ g^T (A.8-A.9), symmetric
                for c in range(r, 6):
                    s = m_hat[last_beta, r, c]
                    for j in range(n):
                        s = s - g_hat[r, j] * g[i, c, j]
                    m_hat[last_beta, r, c] = s
                    m_hat[last_beta, c, r] = s
            for k in range(n):                     # ... + sum_k A_k^T M^_k A_k
                _add_shifted_inertia(m_hat[first + k], a_col[i], 6 * k, m_hat[last_beta])
        _udu_solve(i_hat, n, phi[dof:dof + n])   # phi~^i = I^^{i,-1} phi^^i (eq. 30 ii)
    return True


@jit
def module_accelerations(mods, n_mat, a_col, g, qdd, mu):
    """Eq. 30 (iii), U^T qdd = phi~, modules first to last: qdd^i = phi~^i - Psi^{i T} A^{i,beta} mu-bar^beta with
    mu-bar^beta = N^beta qdd^beta + A^{beta,gamma} mu-bar^gamma, the twist rate of the parent's last link due to the
    accelerations of the modules above it (kept per last link in ``mu`` (nb, 6)). ``qdd`` holds phi~ on entry."""
    for i in range(mods.shape[0]):
        first, n, beta, dof = mods[i, MOD_FIRST], mods[i, MOD_LINKS], mods[i, MOD_PARENT], mods[i, MOD_DOF]
        last = first + n - 1
        if beta >= 0:
            last_beta = mods[beta, MOD_FIRST] + mods[beta, MOD_LINKS] - 1
            for j in range(n):
                s = qdd[dof + j]
                for c in range(6):
                    s = s - g[i, c, j] * mu[last_beta, c]
                qdd[dof + j] = s
            for r in range(6):                     # A_{last, last_beta} mu-bar^beta
                s = 0.0
                for c in range(6):
                    s = s + a_col[i, 6 * (n - 1) + r, c] * mu[last_beta, c]
                mu[last, r] = s
        else:
            for r in range(6):
                mu[last, r] = 0.0
        for r in range(6):                         # + (N^i qdd^i) on the last link
            s = mu[last, r]
            for j in range(n):
                s = s + n_mat[i, 6 * (n - 1) + r, j] * qdd[dof + j]
            mu[last, r] = s


@jit
def module_forward_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, tau, qdd, zero, h, twist, rate,
                            wrench, n_mat, n_dot, a_col, a_dot, mass_work, m_hat, i_hat, psi_hat, g, g_hat, eta, mu):
    """I(q) qdd = tau - h (eq. 28) solved as U D U^T qdd = tau - h (eqs. 29-30, section 4.2, Fig. A.2) in O(n) modules.

    Step 1: t, t' with qdd = 0 and w = M t' + Omega M E t - w^F, h = N_d^T N_l^T w (the inverse dynamics of
    Fig. A.1 at ``zero`` acceleration; the OCR's "when qdot = 0" is qdd = 0: with qdot = 0 h would lose C qdot).
    Step 2: phi = tau - h, then eq. 30 (i)-(ii) (:func:`articulated_modules`) and (iii)
    (:func:`module_accelerations`). Fixed base and floating base alike: the root module hangs from the world
    (twist rate [0; -g]); a floating base is the root module M_0 of n_0 DOFs, ``tau[:n_0]`` its (usually zero)
    generalized forces. Returns False if an articulated-module inertia I^^i is not positive definite."""
    module_inverse_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, zero, h, twist, rate, wrench,
                            n_mat, n_dot, a_col, a_dot, mass_work)
    for k in range(qdd.shape[0]):
        qdd[k] = tau[k] - h[k]
    if not articulated_modules(mods, d, m, inertia, arm, n_mat, a_col, qdd, m_hat, i_hat, psi_hat, g, g_hat,
                               mass_work, eta):
        return False
    module_accelerations(mods, n_mat, a_col, g, qdd, mu)
    return True
