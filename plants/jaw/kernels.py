"""Compiled kernels of the jaw-rehabilitation robot (Kalani et al., 2018): Gibbs-Appell inverse dynamics,
the coupled robot + jaw-model dynamics, the patient impedance and the incisal-point mapping.

Allocation-free numba code on caller-provided work arrays; :mod:`rtctl.plants.jaw.steps`
builds the per-cycle plant and controller steps on it and :mod:`rtctl.plants.jaw.model`
wraps it in a checked API. The Stewart-platform kinematics (rotation, Euler
Jacobian, leg vectors, J_C) and, for the plant's forward model only, the
generalized-momentum matrices come from :mod:`rtctl.plants.stewart.kernels`;
forward kinematics, the workspace check and 6 x 6 solves from
:mod:`rtctl.plants.stewart.solvers`.

Packed arrays
-------------
``pts2`` (2, 2, 6, 3): ``pts2[ROBOT]``, ``pts2[JAW]`` -- the ``pts`` of each
platform (base points b_i in {B}, platform points p_i in {P}).
``P`` (3, NP): row ``ROBOT`` and ``JAW`` are the platforms' ``par`` vectors
(``_stewart_kernels.P_*``; the jaw's gravity entry is negative, see below), row
``CPL`` the coupling parameters (``C_*``: rest pose, patient impedance, bolus,
incisal point, hinge, leg friction, singularity thresholds).
``W`` (NW, 6, 6) and ``V`` (NV, 6): work arrays; ``W[:NWK]``, ``V[:NWV]`` are
the Stewart kernels' ``wk``, ``wv``; the rest are the ``J_*`` / ``U_*`` slots.

Frames
------
Robot: base {B} on the table (z up), pose x = [x, y, z, psi, theta, phi] of its
moving platform {P} (ZYX Euler angles). Jaw model: its base {B'} (the skull) is
{B} turned by pi about x_B and lifted to height h (``C_H``); its moving
platform {P'} (the mandible) is {P} turned by pi about x_P, rigidly fixed to
{P} (same origin). Then B'_R_P' = Rx(pi) R Rx(pi) = Rz(-psi) Ry(-theta) Rx(phi), so

    x' = S x + c,   S = diag(1, -1, -1, -1, -1, 1),   c = [0, 0, h, 0, 0, 0],

and a jaw-frame twist or wrench maps to {B} by E = diag(1, -1, -1, 1, -1, -1).
Gravity points along +z' in {B'}: the jaw's ``par[P_G]`` is -g.
"""
import numpy as np
from numba import njit

from ..integrate import WORK_ROWS
from ..stewart import kernels as _sk
from ..stewart import solvers as _ss

jit = njit(cache=True)

# Explicit signatures of the per-cycle entry points: anything but C-contiguous float64 arrays is refused with a
# TypeError (the Python wrappers then convert once or raise a ValueError) instead of compiling a new variant.
_A4, _A3, _A2, _A1 = "float64[:, :, :, ::1]", "float64[:, :, ::1]", "float64[:, ::1]", "float64[::1]"
SIG_INCISAL = f"int64({_A4}, {_A2}, {_A1}, {_A1}, {_A1}, {_A1}, {_A1}, {_A1}, {_A3}, {_A2})"

ROBOT, JAW, CPL = 0, 1, 2

# Coupling row P[CPL].
C_X0 = 0            # rest (occlusion) pose, 6
C_K = 6             # patient stiffness on the 6 pose coordinates (N/m, N m/rad), 6
C_D = 12            # patient damping (N s/m, N m s/rad), 6
C_H = 18            # height of the jaw model's base {B'} above {B}, m
C_INC = 19          # incisal point in {P}, 3
C_HINGE = 22        # opening rotation per metre of vertical incisal displacement, rad/m (1 / hinge radius)
C_BD, C_BF, C_BLO, C_BHI, C_BE, C_BV = 23, 24, 25, 26, 27, 28   # bolus: damping, force, band, edge, v-scale
C_VISC = 29         # robot leg viscous friction, 6
C_COUL = 35         # robot leg Coulomb friction, 6
C_VSC = 41          # Coulomb velocity scale
C_DETR, C_DETJ = 42, 43   # |det J_C| thresholds of the robot and the jaw model
C_STRIBECK = 44     # robot leg static minus Coulomb friction, 6 (0: no Stribeck rise)
C_STRIBECK_V = 50   # robot leg Stribeck velocity, 6
NCP = 56
NP = max(NCP, _sk.NPAR)

# Extra work slots (after the Stewart kernels' slots).
NWK, NWV = _sk.NWK, _sk.NWV
J_RI, J_MR, J_VR, J_MJ, J_VJ, J_ME, J_JE, J_LU, J_S = (NWK + k for k in range(9))
NW = NWK + 9
(U_UD, U_F, U_FR, U_FJ, U_XJ, U_XDJ, U_XDDJ, U_FP, U_GR, U_GJ, U_H, U_T1, U_T2, U_TAU, U_ZERO, U_XDD,
 U_Q1, U_Q2, U_X, U_XD) = (NWV + k for k in range(20))
U_RK = NWV + 20     # the integrator's WORK_ROWS rows (plants.integrate)
NV = U_RK + WORK_ROWS

# Packed plant state rows.
S_X, S_XD, S_Q, S_V, S_QJ, S_FP, S_INC = 0, 1, 2, 3, 4, 5, 6
NS = 7
# Controller state rows.
K_KP, K_KD, K_X, K_XD, K_XDD, K_ALPHA, K_OPT = 0, 1, 2, 3, 4, 5, 6
NK = 7

OK, SINGULAR, NOT_FINITE = _sk.OK, _sk.SINGULAR, _sk.NOT_FINITE
WRONG_SHAPE = 9
JAW_STATUS_OFFSET = 10
BAD_ARGUMENT = 20


# ---------------------------------------------------------------- frames and small helpers
@jit
def jaw_pose(x, xj, h):
    """x' = S x + c (module docstring)."""
    for k in range(6):
        xj[k] = x[k] if (k == 0 or k == 5) else -x[k]
    xj[2] += h


@jit
def jaw_map(x, xd, xdd, xj, xdj, xddj, h):
    """x' = S x + c, x-dot' = S x-dot, x-ddot' = S x-ddot."""
    jaw_pose(x, xj, h)
    for k in range(6):
        s = 1.0 if (k == 0 or k == 5) else -1.0
        xdj[k] = s * xd[k]
        xddj[k] = s * xdd[k]


@jit
def tsai_leg_frame(l, d, Ri):
    """B_R_i of the leg frame of [49]: z_i = l / d along the leg, y_i = [-l_y, l_x, 0] / rho (horizontal),
    x_i = y_i x z_i; columns of Ri[:3, :3]."""
    rho = np.sqrt(l[0] * l[0] + l[1] * l[1])
    zx, zy, zz = l[0] / d, l[1] / d, l[2] / d
    yx, yy = -l[1] / rho, l[0] / rho
    Ri[0, 0] = yy * zz
    Ri[1, 0] = -yx * zz
    Ri[2, 0] = yx * zy - yy * zx
    Ri[0, 1] = yx
    Ri[1, 1] = yy
    Ri[2, 1] = 0.0
    Ri[0, 2] = zx
    Ri[1, 2] = zy
    Ri[2, 2] = zz


@jit
def twist_rates(xd, xdd, JA, JAd, ud):
    """x-ddot_M = [v-dot; omega-dot] = T xdd + T-dot xd (Lopes, 2009, eqs. 8, 23; the appendix's x-ddot_M)."""
    for k in range(3):
        ud[k] = xdd[k]
        ud[3 + k] = (JA[k, 0] * xdd[3] + JA[k, 1] * xdd[4] + JA[k, 2] * xdd[5]
                     + JAd[k, 0] * xd[3] + JAd[k, 1] * xd[4] + JAd[k, 2] * xd[5])


# ---------------------------------------------------------------- Gibbs-Appell
@jit
def ga_wrench(pts, par, x, xd, xdd, bodies, F, W, V):
    """F = dS/d(x-ddot_M) - Q_g: the wrench [force; moment about the platform centre] in {B} the legs must
    exert on the platform, from the Gibbs function S = S_M + sum_i (S_1i + S_2i) of the selected bodies
    (``_stewart_kernels.B_*`` bits). Gravity enters as the generalized force of the weights,
    sum_k m_k J_k^T g e_z, i.e. each centre-of-mass acceleration a_k is replaced by a_k + g e_z.

    Platform (B.1-B.6): with omega_b = R^T omega, alpha_b = R^T omega-dot (principal body axes),
    dS_M/d(v-dot) = m a_M and dS_M/d(omega-dot) = R [I_b alpha_b + omega_b x I_b omega_b] (Euler's equations).
    Leg i, in its frame {i} (A.1-A.32): rows J_x, J_y, J_z of iJ_bi (A.5), iv_bi = iJ_bi x-dot_M (A.4),
    iD_2i = iR_B omega_M x (omega_M x b_i) (A.16-A.18), iomega_i (A.8), iomega-dot_i = iJ_omega_i x-ddot_M + iD_4i
    (A.21-A.24), cylinder centre a_1i = iJ_V1i x-ddot_M + iD_6i (A.25-A.28), piston centre
    a_2i = iJ_V2i x-ddot_M + iD_8i (A.29-A.32); S_1i (C.1-C.4), S_2i (D.1-D.4). Every link Jacobian is a
    row combination of iJ_bi, so sum J^T (dS/d acc) = iJ_bi^T c and the leg adds the force f_i = B_R_i c at
    its platform joint b_i: F += [f_i; b_i x f_i].

    Leg inertias in {i} (x_i = -z_C, y_i = y_C, z_i = x_C of the leg frame of Lopes, 2009): I_11 = I_zz,
    I_22 = I_yy, I_33 = I_xx of ``par``. Cylinder and piston share the leg's angular velocity, which is
    perpendicular to the leg (omega_z = omega-dot_z = 0).
    """
    wk, wv = W[:NWK], V[:NWV]
    R, JA, JAd = wk[_sk.K_R], wk[_sk.K_JA], wk[_sk.K_JAD]
    u, ud = wv[_sk.V_U], V[U_UD]
    _sk.euler_terms(x, xd, R, JA, JAd, u)
    twist_rates(xd, xdd, JA, JAd, ud)
    g = par[_sk.P_G]
    for k in range(6):
        F[k] = 0.0
    if bodies & _sk.B_PLATFORM:
        _ga_platform(par, R, u, ud, g, F)
    legbits = bodies & (_sk.B_CYL_TRA | _sk.B_CYL_ROT | _sk.B_PIS_TRA | _sk.B_PIS_ROT)
    if legbits == 0:
        return
    m1 = par[_sk.P_MC] if bodies & _sk.B_CYL_TRA else 0.0
    m2 = par[_sk.P_MS] if bodies & _sk.B_PIS_TRA else 0.0
    e1, e2 = par[_sk.P_BC], par[_sk.P_BS]
    i11, i22 = 0.0, 0.0            # I_33 (axial) meets omega_z = omega-dot_z = 0 only
    if bodies & _sk.B_CYL_ROT:
        i11 += par[_sk.P_ICZ]
        i22 += par[_sk.P_ICY]
    if bodies & _sk.B_PIS_ROT:
        i11 += par[_sk.P_ISZ]
        i22 += par[_sk.P_ISY]
    b, l, Ri = wv[_sk.V_A], wv[_sk.V_L], W[J_RI]
    t1, t2 = V[U_T1], V[U_T2]
    for i in range(6):
        _sk.leg_vectors(i, pts, x, R, b, l)
        d = np.sqrt(l[0] * l[0] + l[1] * l[1] + l[2] * l[2])
        tsai_leg_frame(l, d, Ri)
        vx, vy, vz, jx, jy, jz, d2x, d2y, d2z = _ga_leg_motion(u, ud, b, Ri, t1, t2)
        _ga_add_leg(d, vx, vy, vz, jx, jy, jz, d2x, d2y, d2z, g, m1, m2, e1, e2, i11, i22, b, Ri, F)


@jit
def _ga_platform(par, R, u, ud, g, F):
    """The platform's dS_M/d(x-ddot_M) - Q_g (B.1-B.6) into F: m (v-dot + g e_z) and, with omega_b = R^T omega and
    alpha_b = R^T omega-dot in the principal body axes, R [I_b alpha_b + omega_b x I_b omega_b]."""
    w0, w1, w2 = u[3], u[4], u[5]
    m = par[_sk.P_MP]
    F[0] = m * ud[0]
    F[1] = m * ud[1]
    F[2] = m * (ud[2] + g)
    ix, iy, iz = par[_sk.P_IPX], par[_sk.P_IPY], par[_sk.P_IPZ]
    wb0 = R[0, 0] * w0 + R[1, 0] * w1 + R[2, 0] * w2
    wb1 = R[0, 1] * w0 + R[1, 1] * w1 + R[2, 1] * w2
    wb2 = R[0, 2] * w0 + R[1, 2] * w1 + R[2, 2] * w2
    ab0 = R[0, 0] * ud[3] + R[1, 0] * ud[4] + R[2, 0] * ud[5]
    ab1 = R[0, 1] * ud[3] + R[1, 1] * ud[4] + R[2, 1] * ud[5]
    ab2 = R[0, 2] * ud[3] + R[1, 2] * ud[4] + R[2, 2] * ud[5]
    n0 = ix * ab0 + (iz - iy) * wb1 * wb2      # dS_M / d alpha (B.6)
    n1 = iy * ab1 + (ix - iz) * wb0 * wb2
    n2 = iz * ab2 + (iy - ix) * wb0 * wb1
    for r in range(3):
        F[3 + r] = R[r, 0] * n0 + R[r, 1] * n1 + R[r, 2] * n2


@jit
def _ga_leg_motion(u, ud, b, Ri, t1, t2):
    """The platform joint b_i of a leg in the leg frame {i} (rows of ``Ri``): its velocity iv_bi (A.4),
    iJ_bi x-ddot_M (A.3, A.5) and iD_2i = iR_B omega x (omega x b_i) (A.16-A.18), as nine scalars."""
    w0, w1, w2 = u[3], u[4], u[5]
    # t1 = omega x b, t2 = omega x (omega x b) = D_1 (A.16)
    t1[0] = w1 * b[2] - w2 * b[1]
    t1[1] = w2 * b[0] - w0 * b[2]
    t1[2] = w0 * b[1] - w1 * b[0]
    t2[0] = w1 * t1[2] - w2 * t1[1]
    t2[1] = w2 * t1[0] - w0 * t1[2]
    t2[2] = w0 * t1[1] - w1 * t1[0]
    vb0, vb1, vb2 = u[0] + t1[0], u[1] + t1[1], u[2] + t1[2]
    # v-dot_M + omega-dot x b: iJ_bi x-ddot_M = iR_B J_bi x-ddot_M (A.3, A.5)
    jb0 = ud[0] + ud[4] * b[2] - ud[5] * b[1]
    jb1 = ud[1] + ud[5] * b[0] - ud[3] * b[2]
    jb2 = ud[2] + ud[3] * b[1] - ud[4] * b[0]
    vx = Ri[0, 0] * vb0 + Ri[1, 0] * vb1 + Ri[2, 0] * vb2      # iv_bi (A.4)
    vy = Ri[0, 1] * vb0 + Ri[1, 1] * vb1 + Ri[2, 1] * vb2
    vz = Ri[0, 2] * vb0 + Ri[1, 2] * vb1 + Ri[2, 2] * vb2
    jx = Ri[0, 0] * jb0 + Ri[1, 0] * jb1 + Ri[2, 0] * jb2
    jy = Ri[0, 1] * jb0 + Ri[1, 1] * jb1 + Ri[2, 1] * jb2
    jz = Ri[0, 2] * jb0 + Ri[1, 2] * jb1 + Ri[2, 2] * jb2
    d2x = Ri[0, 0] * t2[0] + Ri[1, 0] * t2[1] + Ri[2, 0] * t2[2]   # iD_2i (A.18)
    d2y = Ri[0, 1] * t2[0] + Ri[1, 1] * t2[1] + Ri[2, 1] * t2[2]
    d2z = Ri[0, 2] * t2[0] + Ri[1, 2] * t2[1] + Ri[2, 2] * t2[2]
    return vx, vy, vz, jx, jy, jz, d2x, d2y, d2z


@jit
def _ga_add_leg(d, vx, vy, vz, jx, jy, jz, d2x, d2y, d2z, g, m1, m2, e1, e2, i11, i22, b, Ri, F):
    """Add one leg's force f_i = B_R_i c at its platform joint b_i to F, [f_i; b_i x f_i], where iJ_bi^T c is the
    leg's sum J^T (dS/d acc) over its cylinder (C.1-C.4) and piston (D.1-D.4), each centre-of-mass acceleration
    a_k taken as a_k + g e_z for the weights."""
    gx, gy, gz = g * Ri[2, 0], g * Ri[2, 1], g * Ri[2, 2]          # iR_B g e_z
    inv_d = 1.0 / d
    inv_d2 = inv_d * inv_d
    cx, cy, cz = 0.0, 0.0, 0.0
    if m1 != 0.0:   # A.25-A.28 (iD_5i carries the minus sign of A.25), C.2
        a1x = e1 * inv_d * (jx + d2x) - 2.0 * e1 * inv_d2 * vx * vz
        a1y = e1 * inv_d * (jy + d2y) - 2.0 * e1 * inv_d2 * vy * vz
        k1 = m1 * e1 * inv_d
        cx += k1 * (a1x + gx)
        cy += k1 * (a1y + gy)
    if m2 != 0.0:   # A.29-A.32, D.2
        f = (d - e2) * inv_d
        a2x = f * (jx + d2x) + 2.0 * e2 * inv_d2 * vx * vz
        a2y = f * (jy + d2y) + 2.0 * e2 * inv_d2 * vy * vz
        a2z = jz + d2z + e2 * inv_d2 * (vx * vx + vy * vy)
        cx += m2 * f * (a2x + gx)
        cy += m2 * f * (a2y + gy)
        cz += m2 * (a2z + gz)
    if i11 != 0.0 or i22 != 0.0:   # A.21-A.24, C.3-C.4 + D.3-D.4
        ax = -(jy + d2y) * inv_d + 2.0 * inv_d2 * vy * vz
        ay = (jx + d2x) * inv_d - 2.0 * inv_d2 * vx * vz
        # K = omega x (I omega) (C.4, D.4) has only a z component, (I_22 - I_11) omega_x omega_y, which
        # iJ_omega_i (zero third row) does not see; N = I alpha + K in {i}
        nx = i11 * ax
        ny = i22 * ay
        cx += ny * inv_d
        cy -= nx * inv_d
    fx = Ri[0, 0] * cx + Ri[0, 1] * cy + Ri[0, 2] * cz
    fy = Ri[1, 0] * cx + Ri[1, 1] * cy + Ri[1, 2] * cz
    fz = Ri[2, 0] * cx + Ri[2, 1] * cy + Ri[2, 2] * cz
    F[0] += fx
    F[1] += fy
    F[2] += fz
    F[3] += b[1] * fz - b[2] * fy
    F[4] += b[2] * fx - b[0] * fz
    F[5] += b[0] * fy - b[1] * fx


@jit
def ga_inverse_dynamics(pts, par, x, xd, xdd, bodies, tau, W, V):
    """Leg forces of one platform by Gibbs-Appell: J_p^T tau = dS/d(x-ddot_M) - Q_g, J_p of A.7 (= J_C).
    The wrench is left in V[U_F]. Returns OK or SINGULAR."""
    F = V[U_F]
    ga_wrench(pts, par, x, xd, xdd, bodies, F, W, V)
    wk, wv = W[:NWK], V[:NWV]
    JC = wk[_sk.K_JC]
    _sk.rotation(x, wk[_sk.K_R])
    _sk.jc_matrix(pts, x, wk[_sk.K_R], JC, wv[_sk.V_A], wv[_sk.V_L])
    return _ss.solve6(JC, F, tau, wk[_sk.K_LU], True)


# ---------------------------------------------------------------- patient impedance and incisal point
@jit
def _smoothstep(t):
    if t <= 0.0:
        return 0.0
    if t >= 1.0:
        return 1.0
    return t * t * (3.0 - 2.0 * t)


@jit
def patient_force(cp, x, xd, R, JA, f, inc):
    """Generalized force of the patient on the pose coordinates (Euler space, power f . xd):

    f = -K (x - x0) - D xd + J_I^T [0, 0, -F_b],

    F_b = w(p_z) (c_b z-dot + f_b tanh(z-dot / v_s)) while closing (z-dot > 0, else 0): the bolus pushes the
    incisal point down while the jaw closes inside the band [lo, hi] of p_z, w a C1 smoothstep window of
    edge width e. J_I = [I3, -(R r_I)~ J_A] maps xd to the incisal-point velocity. R, JA at x.
    ``inc`` receives [p (3), F_b, z-dot, w]. Returns F_b.
    """
    for k in range(6):
        f[k] = -cp[C_K + k] * (x[k] - cp[C_X0 + k]) - cp[C_D + k] * xd[k]
    rx = R[0, 0] * cp[C_INC] + R[0, 1] * cp[C_INC + 1] + R[0, 2] * cp[C_INC + 2]
    ry = R[1, 0] * cp[C_INC] + R[1, 1] * cp[C_INC + 1] + R[1, 2] * cp[C_INC + 2]
    rz = R[2, 0] * cp[C_INC] + R[2, 1] * cp[C_INC + 1] + R[2, 2] * cp[C_INC + 2]
    inc[0] = x[0] + rx - cp[C_X0] - cp[C_INC]
    inc[1] = x[1] + ry - cp[C_X0 + 1] - cp[C_INC + 1]
    inc[2] = x[2] + rz - cp[C_X0 + 2] - cp[C_INC + 2]
    jz3 = ry * JA[0, 0] - rx * JA[1, 0]
    jz4 = ry * JA[0, 1] - rx * JA[1, 1]
    jz5 = ry * JA[0, 2] - rx * JA[1, 2]
    zd = xd[2] + jz3 * xd[3] + jz4 * xd[4] + jz5 * xd[5]
    fb = 0.0
    w = 0.0
    if zd > 0.0 and (cp[C_BD] != 0.0 or cp[C_BF] != 0.0):
        e = cp[C_BE]
        pz = inc[2]
        if e > 0.0:
            w = _smoothstep((pz - cp[C_BLO]) / e) * _smoothstep((cp[C_BHI] - pz) / e)
        elif cp[C_BLO] <= pz <= cp[C_BHI]:
            w = 1.0
        fb = w * (cp[C_BD] * zd + cp[C_BF] * np.tanh(zd / cp[C_BV]))
        f[2] -= fb
        f[3] -= fb * jz3
        f[4] -= fb * jz4
        f[5] -= fb * jz5
    inc[3] = fb
    inc[4] = zd
    inc[5] = w
    return fb


@jit
def incisal_pose(cp, p, pd, pdd, x, xd, xdd):
    """Pose, rate, acceleration of {P} for the incisal displacement p (and its derivatives) from occlusion.

    The opening rotation about the lateral axis is a = p_z / rho (rho = 1 / cp[C_HINGE]; the incisal point
    of a pure hinge at distance rho moves p_z ~ rho a), the translation makes the incisal point land exactly
    at r_I + p: x_pos = x0 + p + r_I - Rx(a) r_I, (psi, theta, phi) = (0, 0, a).
    """
    k = cp[C_HINGE]
    a, ad, add = k * p[2], k * pd[2], k * pdd[2]
    c, s = np.cos(a), np.sin(a)
    iy, iz = cp[C_INC + 1], cp[C_INC + 2]
    x[0] = cp[C_X0] + p[0]
    x[1] = cp[C_X0 + 1] + p[1] + iy * (1.0 - c) + iz * s
    x[2] = cp[C_X0 + 2] + p[2] + iz * (1.0 - c) - iy * s
    x[3] = 0.0
    x[4] = 0.0
    x[5] = a
    ky = iy * s + iz * c
    kz = iz * s - iy * c
    xd[0] = pd[0]
    xd[1] = pd[1] + ky * ad
    xd[2] = pd[2] + kz * ad
    xd[3] = 0.0
    xd[4] = 0.0
    xd[5] = ad
    xdd[0] = pdd[0]
    xdd[1] = pdd[1] + ky * add + (iy * c - iz * s) * ad * ad
    xdd[2] = pdd[2] + kz * add + (iz * c + iy * s) * ad * ad
    xdd[3] = 0.0
    xdd[4] = 0.0
    xdd[5] = add


@jit
def coupled_workspace_status(pts2, P, x, W, V):
    """0 inside the workspace of both platforms; the robot's ``workspace_status`` code (1-6), or
    JAW_STATUS_OFFSET + the jaw model's code."""
    wk, wv = W[:NWK], V[:NWV]
    cp = P[CPL]
    st = _ss.workspace_status(pts2[ROBOT], P[ROBOT], x, cp[C_DETR], wk, wv)
    if st != 0:
        return st
    xj = V[U_XJ]
    jaw_pose(x, xj, cp[C_H])
    st = _ss.workspace_status(pts2[JAW], P[JAW], xj, cp[C_DETJ], wk, wv)
    if st != 0:
        return JAW_STATUS_OFFSET + st
    return 0


@njit(SIG_INCISAL, cache=True)
def incisal_to_legs(pts2, P, p, pd, pdd, l, ld, ldd, W, V):
    """Robot leg lengths, rates, accelerations for the incisal motion (p, pd, pdd) (``incisal_pose``, then the
    leg IK and its derivatives). Returns 0, the ``coupled_workspace_status`` code, or BAD_ARGUMENT (p, pd, pdd
    not of length 3 or l, ld, ldd not of length 6); outputs untouched on failure."""
    if not (p.shape[0] == 3 and pd.shape[0] == 3 and pdd.shape[0] == 3 and l.shape[0] == 6 and ld.shape[0] == 6
            and ldd.shape[0] == 6):
        return BAD_ARGUMENT
    x, xd, xdd = V[U_X], V[U_XD], V[U_XDD]
    incisal_pose(P[CPL], p, pd, pdd, x, xd, xdd)
    st = coupled_workspace_status(pts2, P, x, W, V)
    if st != 0:
        return st
    _sk.leg_motion(pts2[ROBOT], x, xd, xdd, l, ld, ldd, W[:NWK], V[:NWV])
    return 0


# ---------------------------------------------------------------- coupled robot + jaw model
@jit
def _euler_force_to_legs(pts, x, f, tau, W, V):
    """tau = J_E^-T f with J_E = J_C T (Euler-space generalized force f to leg forces)."""
    wk, wv = W[:NWK], V[:NWV]
    R, JA = wk[_sk.K_R], wk[_sk.K_JA]
    _sk.euler_terms(x, V[U_ZERO], R, JA, wk[_sk.K_JAD], wv[_sk.V_U])
    JC, JE = wk[_sk.K_JC], W[J_JE]
    _sk.jc_matrix(pts, x, R, JC, wv[_sk.V_A], wv[_sk.V_L])
    _sk.je_from_jc(JC, JA, JE)
    return _ss.solve6(JE, f, tau, W[J_LU], True)


@jit
def coupled_inverse_dynamics(pts2, P, x, xd, xdd, tau, W, V):
    """Robot leg forces for the motion (x, xd, xdd) of the coupled system by Gibbs-Appell:

    J_E^T tau = T^T (F_robot + E F_jaw) - f_patient,

    F_robot, F_jaw of ``ga_wrench`` (the jaw model's at x' = S x + c; its legs are passive), f_patient of
    ``patient_force`` (stiffness, damping, bolus). The Euler-space force is left in V[U_H]. Returns OK or
    SINGULAR."""
    cp = P[CPL]
    Fr, Fj = V[U_FR], V[U_FJ]
    xj, xdj, xddj = V[U_XJ], V[U_XDJ], V[U_XDDJ]
    ga_wrench(pts2[ROBOT], P[ROBOT], x, xd, xdd, _sk.B_ALL, Fr, W, V)
    jaw_map(x, xd, xdd, xj, xdj, xddj, cp[C_H])
    ga_wrench(pts2[JAW], P[JAW], xj, xdj, xddj, _sk.B_ALL, Fj, W, V)
    wk = W[:NWK]
    R, JA = wk[_sk.K_R], wk[_sk.K_JA]
    _sk.euler_terms(x, xd, R, JA, wk[_sk.K_JAD], V[:NWV][_sk.V_U])
    fp, h = V[U_FP], V[U_H]
    patient_force(cp, x, xd, R, JA, fp, V[U_T1])
    for k in range(6):
        s = -1.0 if (k == 1 or k == 2 or k == 4 or k == 5) else 1.0
        V[U_F][k] = Fr[k] + s * Fj[k]
    F = V[U_F]
    for k in range(3):
        h[k] = F[k] - fp[k]
        h[3 + k] = JA[0, k] * F[3] + JA[1, k] * F[4] + JA[2, k] * F[5] - fp[3 + k]
    return _euler_force_to_legs(pts2[ROBOT], x, h, tau, W, V)


@jit
def coupled_matrices(pts2, P, x, xd, ME, hE, W, V):
    """Generalized-momentum model of the coupled system in Euler space (Lopes, 2009, eqs. 24-83, for each platform):

    ME xdd + hE = J_E^T tau,  ME = T^T (M_r + E M_j S),
    hE = T^T (V_r xd + G_r + E (V_j S xd + G_j)) - f_patient.

    Leaves the incisal-point record of ``patient_force`` in V[U_T1]."""
    cp = P[CPL]
    wk, wv = W[:NWK], V[:NWV]
    Mr, Vr, Mj, Vj = W[J_MR], W[J_VR], W[J_MJ], W[J_VJ]
    Gr, Gj = V[U_GR], V[U_GJ]
    xj, xdj = V[U_XJ], V[U_XDJ]
    jaw_pose(x, xj, cp[C_H])
    for k in range(6):
        xdj[k] = xd[k] if (k == 0 or k == 5) else -xd[k]
    _sk.gm_matrices(pts2[JAW], P[JAW], xj, xdj, _sk.B_ALL, _sk.ALL_LEGS, _sk.W_ALL, Mj, Vj, Gj, wk, wv)
    _sk.gm_matrices(pts2[ROBOT], P[ROBOT], x, xd, _sk.B_ALL, _sk.ALL_LEGS, _sk.W_ALL, Mr, Vr, Gr, wk, wv)
    JA = wk[_sk.K_JA]      # left at the robot pose by gm_matrices (euler_terms)
    F = V[U_F]
    for r in range(6):
        sr = -1.0 if (r == 1 or r == 2 or r == 4 or r == 5) else 1.0
        s = Gr[r] + sr * Gj[r]
        for c in range(6):
            sc = 1.0 if (c == 0 or c == 5) else -1.0
            Mr[r, c] += sr * sc * Mj[r, c]
            s += Vr[r, c] * xd[c] + sr * sc * Vj[r, c] * xd[c]
        F[r] = s
    fp = V[U_FP]
    patient_force(cp, x, xd, wk[_sk.K_R], JA, fp, V[U_T1])
    for c in range(6):
        for r in range(3):
            ME[r, c] = Mr[r, c]
        for r in range(3):
            ME[3 + r, c] = JA[0, r] * Mr[3, c] + JA[1, r] * Mr[4, c] + JA[2, r] * Mr[5, c]
    for r in range(3):
        hE[r] = F[r] - fp[r]
        hE[3 + r] = JA[0, r] * F[3] + JA[1, r] * F[4] + JA[2, r] * F[5] - fp[3 + r]


@jit
def _jaw_legs_and_je(pts, x, W, V):
    """J_E = J_C T at x into W[J_JE] (R, J_A at x left in the Stewart slots)."""
    wk, wv = W[:NWK], V[:NWV]
    R, JA = wk[_sk.K_R], wk[_sk.K_JA]
    _sk.euler_terms(x, V[U_ZERO], R, JA, wk[_sk.K_JAD], wv[_sk.V_U])
    _sk.jc_matrix(pts, x, R, wk[_sk.K_JC], wv[_sk.V_A], wv[_sk.V_L])
    _sk.je_from_jc(wk[_sk.K_JC], JA, W[J_JE])


@jit
def coupled_inverse_dynamics_gm(pts2, P, x, xd, xdd, tau, W, V):
    """Robot leg forces of the coupled system by the generalized-momentum model: tau = J_E^-T (ME xdd + hE)
    (``coupled_matrices``). Returns OK or SINGULAR."""
    ME, hE, f = W[J_ME], V[U_H], V[U_T2]
    coupled_matrices(pts2, P, x, xd, ME, hE, W, V)
    for r in range(6):
        s = hE[r]
        for c in range(6):
            s += ME[r, c] * xdd[c]
        f[r] = s
    return _euler_force_to_legs(pts2[ROBOT], x, f, tau, W, V)


@jit
def coupled_forward_dynamics(pts2, P, x, xd, tau, xdd, W, V):
    """xdd of the coupled system under robot leg forces tau minus the legs' friction (viscous, tanh-regularised
    Coulomb and Stribeck, :func:`~rtctl.plants.stewart.kernels.leg_friction`: cp[C_VISC], cp[C_COUL],
    cp[C_STRIBECK], cp[C_STRIBECK_V], cp[C_VSC]): ME xdd = J_E^T tau_net - hE. Returns OK or SINGULAR."""
    cp = P[CPL]
    ME, hE, rhs = W[J_ME], V[U_H], V[U_T2]
    coupled_matrices(pts2, P, x, xd, ME, hE, W, V)
    _jaw_legs_and_je(pts2[ROBOT], x, W, V)
    JE, tn = W[J_JE], W[J_S, 1]
    for i in range(6):
        ld = 0.0
        for c in range(6):
            ld += JE[i, c] * xd[c]
        tn[i] = tau[i] - _sk.leg_friction(ld, cp[C_VISC + i], cp[C_COUL + i], cp[C_STRIBECK + i],
                                          cp[C_STRIBECK_V + i], cp[C_VSC])
    for c in range(6):
        s = -hE[c]
        for i in range(6):
            s += JE[i, c] * tn[i]
        rhs[c] = s
    return _ss.solve6(ME, rhs, xdd, W[J_LU], False)
