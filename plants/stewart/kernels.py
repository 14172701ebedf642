"""Compiled kernels of the 6-UPS Stewart platform, generalized-momentum formulation (Lopes, 2009):
kinematics, the generalized-momentum matrices M, V, G and the legs' Jacobians and motion.

Everything here is allocation-free numba code working on caller-provided work
arrays; :mod:`rtctl.plants.stewart.solvers` builds the dynamics and forward
kinematics on it, :mod:`rtctl.plants.stewart.steps` the per-cycle plant,
controller and trajectory steps, and :mod:`rtctl.plants.stewart.model` wraps
them in a checked Python API.

The same source is also loaded as a plain-Python module with the global
``COUNTING = True`` (see :mod:`rtctl.plants.stewart.opcount`): then ``jit`` is the
identity and the kernels run on object arrays of operation-counting scalars,
which is how the Coriolis-matrix operation counts of Table 1 are measured.
Kernels therefore never allocate, use ``np.sqrt``/``np.sin``/``np.cos``
(numpy calls the scalar's method for object operands) and no ``math`` module.

Notation (paper's symbols; all vectors in the base frame {B})
--------------------------------------------------------------
x = [x_P, y_P, z_P, psi, theta, phi]   platform pose, ZYX Euler angles (eq. 3, 4)
xd, xdd                                 its first and second time derivatives
u = [v; omega] = T xd                   platform twist (eqs. 8, 23)
a_i = R p_i                             platform joint i relative to the platform centre
l_i = x_pos + a_i - b_i                 leg vector (eq. 31), L_i = |l_i|, n_i = l_i / L_i (eq. 30)
K_i = [I3, a_i~^T]                      velocity of P_i: l_i-dot = K_i u
lbar_i = l_i / (l_i^T l_i)              (eq. 37)
J_D = lbar~ K                           leg angular velocity, eq. 36
J_B = b_C n~^T J_D                      cylinder centre of mass, eq. 40 (= b_C n~^T lbar~ K)
J_G = K - b_S n~^T J_D                  piston centre of mass, eq. 62 (= (I - b_S n~^T lbar~) K)

Parameter vector ``par`` (see the P_* indices) and points ``pts`` (2, 6, 3):
``pts[0, i]`` = b_i in {B}, ``pts[1, i]`` = p_i in {P}.
"""
import numpy as np

COUNTING = globals().get("COUNTING", False)
if COUNTING:
    def jit(f):
        return f
    kernel_part = jit
else:
    from numba import njit
    jit = njit(cache=True)
    kernel_part = njit(cache=True, inline="always")   # the parts of one kernel: inlined, compiled as one function

# Parameter vector layout.
P_MP, P_IPX, P_IPY, P_IPZ = 0, 1, 2, 3
P_MC, P_ICX, P_ICY, P_ICZ = 4, 5, 6, 7
P_MS, P_ISX, P_ISY, P_ISZ = 8, 9, 10, 11
P_BC, P_BS, P_G, P_LMIN, P_LMAX = 12, 13, 14, 15, 16
NPAR = 17

# Body selection bits (Fig. 6 contributions, Table 1 rows).
B_PLATFORM, B_CYL_TRA, B_CYL_ROT, B_PIS_TRA, B_PIS_ROT = 1, 2, 4, 8, 16
B_ALL = 31
ALL_LEGS = 63
# What to compute.
W_INERTIA, W_CORIOLIS, W_GRAVITY = 1, 2, 4
W_ALL = 7

# Status codes.
OK, SINGULAR, NOT_FINITE, FK_NO_CONVERGENCE, FK_OUT_OF_STROKE, FK_WRONG_BRANCH = 0, 1, 2, 3, 4, 5

# Work-array slots: wk is (NWK, 6, 6); wv is (NWV, 6).
K_R, K_JA, K_JAD, K_K, K_KD, K_JD, K_JDD, K_N, K_ND = 0, 1, 2, 3, 4, 5, 6, 7, 8
K_JT, K_JTD, K_S1, K_S2, K_S3, K_S4, K_RC, K_RCD, K_IB, K_IBD, K_A, K_AD, K_T1, K_JC, K_LU = (
    9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23)
K_J, K_JDOT, K_M, K_V = 24, 25, 26, 27
NWK = 28
V_U, V_A, V_AD, V_L, V_LD, V_N, V_ND, V_LB, V_LBD, V_Y, V_YD, V_Z, V_ZD, V_T1, V_T2 = range(15)
V_F, V_G, V_X, V_XD, V_TAU, V_R6, V_DX, V_Q1, V_Q2 = 15, 16, 17, 18, 19, 20, 21, 22, 23
NWV = 24


# ---------------------------------------------------------------- small linear algebra
@jit
def leg_friction(rate, viscous, coulomb, stribeck_level, stribeck_velocity, scale):
    """A leg's friction force opposing its rate (N): viscous, and a tanh-regularised Coulomb level raised
    near rest by the Stribeck part ``(static - coulomb) exp(-(rate / v_s)^2)`` (the rigid-body plant's curve)."""
    x = rate / stribeck_velocity
    return viscous * rate + (coulomb + stribeck_level * np.exp(-x * x)) * np.tanh(rate / scale)


def leg_friction_forces(leg_rates, viscous, coulomb, stribeck_level, stribeck_velocity, scale) -> np.ndarray:
    """The legs' friction forces (N, opposing ``leg_rates``) of :func:`leg_friction`, per leg (not compiled)."""
    rates = np.broadcast_to(np.asarray(leg_rates, dtype=float), (6,))
    return -np.array([leg_friction(float(rates[i]), viscous[i], coulomb[i], stribeck_level[i],
                                   stribeck_velocity[i], scale) for i in range(6)])


@jit
def _skew(a, S):
    """S = a~ (eq. 38)."""
    S[0, 0] = 0.0
    S[0, 1] = -a[2]
    S[0, 2] = a[1]
    S[1, 0] = a[2]
    S[1, 1] = 0.0
    S[1, 2] = -a[0]
    S[2, 0] = -a[1]
    S[2, 1] = a[0]
    S[2, 2] = 0.0


@jit
def _cross(a, b, c):
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]


@jit
def _dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _mul(A, B, C, r, m, c):
    """C[:r, :c] = A[:r, :m] B[:m, :c]."""
    for i in range(r):
        for j in range(c):
            s = 0.0
            for k in range(m):
                s = s + A[i, k] * B[k, j]
            C[i, j] = s


@jit
def _tmul_add(A, B, C, m, r, c, scale):
    """C[:r, :c] += scale * A[:m, :r]^T B[:m, :c]."""
    for i in range(r):
        for j in range(c):
            s = 0.0
            for k in range(m):
                s = s + A[k, i] * B[k, j]
            C[i, j] = C[i, j] + scale * s


@jit
def _times_T(J, JA, out):
    """out = J T with T = diag(I3, J_A) (eq. 23): [J[:, :3], J[:, 3:] J_A] (any number of rows)."""
    for i in range(J.shape[0]):
        for j in range(3):
            out[i, j] = J[i, j]
            out[i, 3 + j] = J[i, 3] * JA[0, j] + J[i, 4] * JA[1, j] + J[i, 5] * JA[2, j]


@jit
def _times_T_dot(J, Jd, JA, JAd, out):
    """out = d/dt (J T) = Jd T + J Td = [Jd[:, :3], Jd[:, 3:] J_A + J[:, 3:] J_A-dot]."""
    for i in range(3):
        for j in range(3):
            out[i, j] = Jd[i, j]
            out[i, 3 + j] = (Jd[i, 3] * JA[0, j] + Jd[i, 4] * JA[1, j] + Jd[i, 5] * JA[2, j]
                             + J[i, 3] * JAd[0, j] + J[i, 4] * JAd[1, j] + J[i, 5] * JAd[2, j])


# ---------------------------------------------------------------- kinematics
@jit
def euler_rate_matrix(cps, sps, cth, sth, JA):
    """J_A (eq. 9), omega = J_A [psi', theta', phi'], from the cosines and sines of psi and theta."""
    JA[0, 0] = 0.0
    JA[0, 1] = -sps
    JA[0, 2] = cth * cps
    JA[1, 0] = 0.0
    JA[1, 1] = cps
    JA[1, 2] = cth * sps
    JA[2, 0] = 1.0
    JA[2, 1] = 0.0
    JA[2, 2] = -sth


@jit
def euler_terms(x, xd, R, JA, JAd, u):
    """R (eq. 4), J_A (eq. 9) and its time derivative, u = T xd = [v; omega] (eqs. 8, 23)."""
    cps, sps = np.cos(x[3]), np.sin(x[3])
    cth, sth = np.cos(x[4]), np.sin(x[4])
    cph, sph = np.cos(x[5]), np.sin(x[5])
    sth_sph, sth_cph = sth * sph, sth * cph
    R[0, 0] = cps * cth
    R[0, 1] = cps * sth_sph - sps * cph
    R[0, 2] = cps * sth_cph + sps * sph
    R[1, 0] = sps * cth
    R[1, 1] = sps * sth_sph + cps * cph
    R[1, 2] = sps * sth_cph - cps * sph
    R[2, 0] = -sth
    R[2, 1] = cth * sph
    R[2, 2] = cth * cph
    euler_rate_matrix(cps, sps, cth, sth, JA)
    psd, thd = xd[3], xd[4]
    JAd[0, 0] = 0.0
    JAd[0, 1] = -cps * psd
    JAd[0, 2] = -(sth * thd * cps + cth * sps * psd)
    JAd[1, 0] = 0.0
    JAd[1, 1] = -sps * psd
    JAd[1, 2] = cth * cps * psd - sth * thd * sps
    JAd[2, 0] = 0.0
    JAd[2, 1] = 0.0
    JAd[2, 2] = -cth * thd
    for k in range(3):
        u[k] = xd[k]
        u[3 + k] = JA[k, 0] * xd[3] + JA[k, 1] * xd[4] + JA[k, 2] * xd[5]


@jit
def rotation(x, R):
    """R of eq. 4 only."""
    cps, sps = np.cos(x[3]), np.sin(x[3])
    cth, sth = np.cos(x[4]), np.sin(x[4])
    cph, sph = np.cos(x[5]), np.sin(x[5])
    R[0, 0] = cps * cth
    R[0, 1] = cps * sth * sph - sps * cph
    R[0, 2] = cps * sth * cph + sps * sph
    R[1, 0] = sps * cth
    R[1, 1] = sps * sth * sph + cps * cph
    R[1, 2] = sps * sth * cph - cps * sph
    R[2, 0] = -sth
    R[2, 1] = cth * sph
    R[2, 2] = cth * cph


@jit
def leg_vectors(i, pts, x, R, a, l):
    """a_i = R p_i and l_i = x_pos + a_i - b_i (eq. 31)."""
    for r in range(3):
        a[r] = R[r, 0] * pts[1, i, 0] + R[r, 1] * pts[1, i, 1] + R[r, 2] * pts[1, i, 2]
        l[r] = x[r] + a[r] - pts[0, i, r]


@jit
def leg_kinematics(i, pts, x, R, u, wk, wv, rates):
    """Leg i: a, l, n, lbar and the Jacobians K, J_D (eq. 36), N = n~^T J_D, with time derivatives if ``rates``.

    Returns L_i. Vectors go to ``wv`` rows V_A, V_L, V_N, V_LB (and V_AD, V_LD,
    V_ND, V_LBD), matrices to ``wk`` slots K_K, K_JD, K_N (and K_KD, K_JDD, K_ND).
    """
    a, ad, l, ld = wv[V_A], wv[V_AD], wv[V_L], wv[V_LD]
    n, nd, lb, lbd = wv[V_N], wv[V_ND], wv[V_LB], wv[V_LBD]
    leg_vectors(i, pts, x, R, a, l)
    L2 = _dot3(l, l)
    L = np.sqrt(L2)
    inv_L = 1.0 / L
    inv_L2 = inv_L * inv_L
    for r in range(3):
        n[r] = l[r] * inv_L
        lb[r] = l[r] * inv_L2                     # eq. 37
    K, S1, S2 = wk[K_K], wk[K_S1], wk[K_S2]
    _skew(a, S1)
    for r in range(3):                            # K = [I3, a~^T] = [I3, -a~]
        for c in range(3):
            K[r, c] = 1.0 if r == c else 0.0
            K[r, 3 + c] = -S1[r, c]
    _skew(lb, S2)
    JD = wk[K_JD]
    _mul(S2, K, JD, 3, 3, 6)                      # eq. 36: J_D = [lbar~, lbar~ a~^T]
    S3 = wk[K_S3]
    _skew(n, S3)
    N = wk[K_N]
    for r in range(3):                            # N = n~^T J_D = -n~ J_D
        for c in range(6):
            N[r, c] = -(S3[r, 0] * JD[0, c] + S3[r, 1] * JD[1, c] + S3[r, 2] * JD[2, c])
    if rates:
        _cross(u[3:6], a, ad)                     # a-dot = omega x a
        for r in range(3):
            ld[r] = u[r] + ad[r]                  # l-dot = v + omega x a
        Ld = _dot3(n, ld)
        for r in range(3):
            nd[r] = (ld[r] - n[r] * Ld) * inv_L
            lbd[r] = (ld[r] - 2.0 * Ld * n[r]) * inv_L2   # d/dt (l / L^2)
        Kd = wk[K_KD]
        _skew(ad, S1)
        for r in range(3):
            for c in range(3):
                Kd[r, c] = 0.0
                Kd[r, 3 + c] = -S1[r, c]
        JDd = wk[K_JDD]
        S4 = wk[K_S4]
        _skew(lbd, S4)
        for r in range(3):                        # J_D-dot = lbar-dot~ K + lbar~ K-dot
            for c in range(6):
                JDd[r, c] = (S4[r, 0] * K[0, c] + S4[r, 1] * K[1, c] + S4[r, 2] * K[2, c]
                             + S2[r, 0] * Kd[0, c] + S2[r, 1] * Kd[1, c] + S2[r, 2] * Kd[2, c])
        _skew(nd, S4)
        Nd = wk[K_ND]
        for r in range(3):                        # N-dot = -(n-dot~ J_D + n~ J_D-dot)
            for c in range(6):
                Nd[r, c] = -(S4[r, 0] * JD[0, c] + S4[r, 1] * JD[1, c] + S4[r, 2] * JD[2, c]
                             + S3[r, 0] * JDd[0, c] + S3[r, 1] * JDd[1, c] + S3[r, 2] * JDd[2, c])
    return L


@jit
def leg_frame(l, ld, n, nd, wk, wv, rates):
    """Cylinder/piston frame B_R_C = [x_C y_C z_C] (eqs. 49-52) and its time derivative.

    x_C = n, y_C = [-l_y, l_x, 0] / sqrt(l_x^2 + l_y^2) (eq. 51; the OCR dropped
    the components l_iy, l_ix of the numerators), z_C = x_C x y_C (eq. 52).
    """
    y, yd, z, zd = wv[V_Y], wv[V_YD], wv[V_Z], wv[V_ZD]
    rho = np.sqrt(l[0] * l[0] + l[1] * l[1])
    inv_rho = 1.0 / rho
    y[0] = -l[1] * inv_rho
    y[1] = l[0] * inv_rho
    y[2] = 0.0
    _cross(n, y, z)
    RC = wk[K_RC]
    for r in range(3):
        RC[r, 0] = n[r]
        RC[r, 1] = y[r]
        RC[r, 2] = z[r]
    if rates:
        rhod_over_rho = (l[0] * ld[0] + l[1] * ld[1]) * inv_rho * inv_rho
        yd[0] = -ld[1] * inv_rho - y[0] * rhod_over_rho
        yd[1] = ld[0] * inv_rho - y[1] * rhod_over_rho
        yd[2] = 0.0
        t1, t2 = wv[V_T1], wv[V_T2]
        _cross(nd, y, t1)
        _cross(n, yd, t2)
        RCd = wk[K_RCD]
        for r in range(3):
            zd[r] = t1[r] + t2[r]
            RCd[r, 0] = nd[r]
            RCd[r, 1] = yd[r]
            RCd[r, 2] = zd[r]


@jit
def _rotated_inertia(R, Rd, ix, iy, iz, IB, IBd, rates):
    """I|B = R diag(ix, iy, iz) R^T (eqs. 17, 48) and d/dt = Rd D R^T + R D Rd^T."""
    for r in range(3):
        for c in range(r, 3):
            s = ix * R[r, 0] * R[c, 0] + iy * R[r, 1] * R[c, 1] + iz * R[r, 2] * R[c, 2]
            IB[r, c] = s
            IB[c, r] = s
    if rates:
        for r in range(3):
            for c in range(r, 3):
                s = (ix * Rd[r, 0] * R[c, 0] + iy * Rd[r, 1] * R[c, 1] + iz * Rd[r, 2] * R[c, 2]
                     + ix * R[r, 0] * Rd[c, 0] + iy * R[r, 1] * Rd[c, 1] + iz * R[r, 2] * Rd[c, 2])
                IBd[r, c] = s
                IBd[c, r] = s


@jit
def _add_translating(J, Jd, mass, wk, what, M, V):
    """A translating body with centre-of-mass velocity J u: M += m J^T (J T), V += m J^T d/dt(J T)

    (eqs. 45-46 for the cylinder with J = J_B, eqs. 67-68 for the piston with J = J_G)."""
    JA, JAd, JT, JTd = wk[K_JA], wk[K_JAD], wk[K_JT], wk[K_JTD]
    if what & W_INERTIA:
        _times_T(J, JA, JT)
        _tmul_add(J, JT, M, 3, 6, 6, mass)
    if what & W_CORIOLIS:
        _times_T_dot(J, Jd, JA, JAd, JTd)
        _tmul_add(J, JTd, V, 3, 6, 6, mass)


@jit
def _add_rotating(JD, JDd, IB, IBd, wk, what, M, V):
    """A rotating leg body: M += J_D^T I|B J_D T, V += J_D^T d/dt(I|B J_D T) (eqs. 57-58, 75-76)."""
    JA, JAd, JT, JTd, A = wk[K_JA], wk[K_JAD], wk[K_JT], wk[K_JTD], wk[K_A]
    if what & W_INERTIA:
        _times_T(JD, JA, JT)
        _mul(IB, JT, A, 3, 3, 6)
        _tmul_add(JD, A, M, 3, 6, 6, 1.0)
    if what & W_CORIOLIS:
        _times_T(JD, JA, JT)
        _times_T_dot(JD, JDd, JA, JAd, JTd)
        Ad = wk[K_AD]
        for r in range(3):                        # d/dt (I J_D T) = I-dot (J_D T) + I d/dt(J_D T)
            for c in range(6):
                Ad[r, c] = (IBd[r, 0] * JT[0, c] + IBd[r, 1] * JT[1, c] + IBd[r, 2] * JT[2, c]
                            + IB[r, 0] * JTd[0, c] + IB[r, 1] * JTd[1, c] + IB[r, 2] * JTd[2, c])
        _tmul_add(JD, Ad, V, 3, 6, 6, 1.0)


@jit
def gm_matrices(pts, par, x, xd, bodies, legs, what, M, V, G, wk, wv):
    """Generalized-momentum model: M (eqs. 27, 45, 57, 67, 75 summed), V (28, 46, 58, 68, 76 summed),
    G (eqs. 77-80, 83, in {B}) of the selected bodies, so that the wrench on the platform in {B} is

        f|B = M xdd + V xd + G                                  (eqs. 81-84)

    ``bodies``: B_* bit mask; ``legs``: bit i selects leg i; ``what``: W_* mask.
    M and V are 6 x 6 with rows in {B} ([force; moment]) and columns in Euler
    rates (not symmetric: they are the paper's I|E and V|E). G|B = sum_k m_k g J_k^T e_z,
    i.e. T^-T dP/dx -- eq. 83 prints T^-1, which is not the transformation
    that maps Euler-space generalized forces to {B} (power: f|B . T xd = f|E . xd
    gives f|B = T^-T f|E); see ``gravity_euler`` for dP/dx itself.
    """
    R, JA, JAd = wk[K_R], wk[K_JA], wk[K_JAD]
    u = wv[V_U]
    for r in range(6):
        G[r] = 0.0
        for c in range(6):
            M[r, c] = 0.0
            V[r, c] = 0.0
    rates = (what & W_CORIOLIS) != 0
    euler_terms(x, xd, R, JA, JAd, u)
    g = par[P_G]
    if bodies & B_PLATFORM:
        _add_platform(par, R, JA, JAd, u, what, g, M, V, G, wk)
    if (bodies & (B_ALL - B_PLATFORM)) == 0:
        return
    for i in range(6):
        if not (legs >> i) & 1:
            continue
        leg_kinematics(i, pts, x, R, u, wk, wv, rates)
        JD, JDd, N, Nd = wk[K_JD], wk[K_JDD], wk[K_N], wk[K_ND]
        if bodies & (B_CYL_TRA | B_PIS_TRA):
            J, Jd = wk[K_J], wk[K_JDOT]           # 3 x 6 J_B / J_G and their rates
            if bodies & B_CYL_TRA:                # eq. 40: J_B = b_C n~^T lbar~ K
                bc = par[P_BC]
                for r in range(3):
                    for c in range(6):
                        J[r, c] = bc * N[r, c]
                        if rates:
                            Jd[r, c] = bc * Nd[r, c]
                _add_translating(J, Jd, par[P_MC], wk, what, M, V)
                if what & W_GRAVITY:
                    for c in range(6):
                        G[c] = G[c] + par[P_MC] * g * J[2, c]
            if bodies & B_PIS_TRA:                # eq. 62: J_G = (I - b_S n~^T lbar~) K
                bs = par[P_BS]
                K, Kd = wk[K_K], wk[K_KD]
                for r in range(3):
                    for c in range(6):
                        J[r, c] = K[r, c] - bs * N[r, c]
                        if rates:
                            Jd[r, c] = Kd[r, c] - bs * Nd[r, c]
                _add_translating(J, Jd, par[P_MS], wk, what, M, V)
                if what & W_GRAVITY:
                    for c in range(6):
                        G[c] = G[c] + par[P_MS] * g * J[2, c]
        if (bodies & (B_CYL_ROT | B_PIS_ROT)) and (what & (W_INERTIA | W_CORIOLIS)):
            leg_frame(wv[V_L], wv[V_LD], wv[V_N], wv[V_ND], wk, wv, rates)
            RC, RCd, IB, IBd = wk[K_RC], wk[K_RCD], wk[K_IB], wk[K_IBD]
            if bodies & B_CYL_ROT:                # eq. 48
                _rotated_inertia(RC, RCd, par[P_ICX], par[P_ICY], par[P_ICZ], IB, IBd, rates)
                _add_rotating(JD, JDd, IB, IBd, wk, what, M, V)
            if bodies & B_PIS_ROT:                # eq. 70, B_R_S = B_R_C
                _rotated_inertia(RC, RCd, par[P_ISX], par[P_ISY], par[P_ISZ], IB, IBd, rates)
                _add_rotating(JD, JDd, IB, IBd, wk, what, M, V)


@kernel_part
def _add_platform(par, R, JA, JAd, u, what, g, M, V, G, wk):
    """The platform's terms: I|B (eq. 17), M (eq. 27), V (eq. 28) and its weight in G."""
    IB, IBd, S1, T1 = wk[K_IB], wk[K_IBD], wk[K_S1], wk[K_T1]
    _rotated_inertia(R, R, par[P_IPX], par[P_IPY], par[P_IPZ], IB, IBd, False)   # eq. 17
    mp = par[P_MP]
    if what & W_INERTIA:                      # eq. 27: I|B T = diag(m_P I3, I_P|B J_A)
        for r in range(3):
            M[r, r] = M[r, r] + mp
        _mul(IB, JA, T1, 3, 3, 3)
        for r in range(3):
            for c in range(3):
                M[3 + r, 3 + c] = M[3 + r, 3 + c] + T1[r, c]
    if what & W_CORIOLIS:                     # eq. 28: d/dt(I|B T) = diag(0, I-dot J_A + I J_A-dot)
        _skew(u[3:6], S1)                     # I-dot = omega~ I - I omega~ (R-dot = omega~ R)
        _mul(S1, IB, T1, 3, 3, 3)
        for r in range(3):
            for c in range(r, 3):
                s = T1[r, c] + T1[c, r]       # omega~ I - I omega~ = W + W^T with W = omega~ I
                IBd[r, c] = s
                IBd[c, r] = s
        for r in range(3):
            for c in range(3):
                V[3 + r, 3 + c] = V[3 + r, 3 + c] + (
                    IBd[r, 0] * JA[0, c] + IBd[r, 1] * JA[1, c] + IBd[r, 2] * JA[2, c]
                    + IB[r, 0] * JAd[0, c] + IB[r, 1] * JAd[1, c] + IB[r, 2] * JAd[2, c])
    if what & W_GRAVITY:
        G[2] = G[2] + mp * g


# ---------------------------------------------------------------- Jacobians of the legs
@jit
def jc_matrix(pts, x, R, JC, a, l):
    """J_C (eq. 6): row i = [n_i^T, (a_i x n_i)^T]; l-dot = J_C [v; omega]. Returns min leg length."""
    lmin = np.inf
    for i in range(6):
        leg_vectors(i, pts, x, R, a, l)
        L = np.sqrt(_dot3(l, l))
        if L < lmin:
            lmin = L
        for r in range(3):
            JC[i, r] = l[r] / L
        JC[i, 3] = (a[1] * l[2] - a[2] * l[1]) / L
        JC[i, 4] = (a[2] * l[0] - a[0] * l[2]) / L
        JC[i, 5] = (a[0] * l[1] - a[1] * l[0]) / L
    return lmin


@jit
def je_from_jc(JC, JA, JE):
    """J_E = J_C T (eqs. 5, 6, 23)."""
    _times_T(JC, JA, JE)


@jit
def leg_motion(pts, x, xd, xdd, q, qd, qdd, wk, wv):
    """Leg lengths, rates and accelerations of a platform motion (x, xd, xdd) (IK, eq. 5 and its derivative).

    l-ddot_i = n_i . (v-dot + omega-dot x a_i + omega x (omega x a_i)) + (|l-dot_i|^2 - L-dot_i^2) / L_i,
    with [v-dot; omega-dot] = T xdd + T-dot xd.
    """
    R, JA, JAd = wk[K_R], wk[K_JA], wk[K_JAD]
    u = wv[V_U]
    euler_terms(x, xd, R, JA, JAd, u)
    ud = wv[V_R6]
    for k in range(3):
        ud[k] = xdd[k]
        ud[3 + k] = (JA[k, 0] * xdd[3] + JA[k, 1] * xdd[4] + JA[k, 2] * xdd[5]
                     + JAd[k, 0] * xd[3] + JAd[k, 1] * xd[4] + JAd[k, 2] * xd[5])
    a, ad, l, ld, t1, t2 = wv[V_A], wv[V_AD], wv[V_L], wv[V_LD], wv[V_T1], wv[V_T2]
    for i in range(6):
        leg_vectors(i, pts, x, R, a, l)
        L = np.sqrt(_dot3(l, l))
        _cross(u[3:6], a, ad)
        for r in range(3):
            ld[r] = u[r] + ad[r]
        Ld = _dot3(l, ld) / L
        _cross(ud[3:6], a, t1)
        _cross(u[3:6], ad, t2)
        s = 0.0
        for r in range(3):
            s += l[r] * (ud[r] + t1[r] + t2[r])
        q[i] = L
        qd[i] = Ld
        qdd[i] = s / L + (_dot3(ld, ld) - Ld * Ld) / L
