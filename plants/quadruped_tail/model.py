"""Quadruped with a robotic pendulum tail, all four feet on the ground (seed 000, Liu & Ben-Tzvi).

Virtual-work kinematics and dynamics of the 8-DOF hybrid mechanism: the torso
is the travelling plate of a 4-SRRR parallel mechanism (hip universal joint =
two revolute joints, knee revolute, spherical foot fixed at ``d_i``) and carries
a massless tail bar with a tip mass on a universal joint.

Generalized coordinates ``q = [p, phi_x, phi_y, phi_z, theta_ta, theta_tb]``
(eq. 1: ``R = Rz(phi_z) Ry(phi_y) Rx(phi_x)``, roll-pitch-yaw about fixed axes).

Geometry and assumptions (Table 1 and section 4 of the paper; Figs. 1-3 are
not in the OCR text, so the following are stated here and checked by the tests):

* The torso's long axis is ``y`` (Table 1: ``I_xx > I_yy``) and the tail points
  to ``-y`` (eq. 10: ``t = R_x(ta) R_z(tb) [0, -l_t, 0]``). The hip attachment
  points ``a_i`` lie in the torso's mid plane ``z = 0`` on a 0.48 m (x) by
  0.54 m (y) rectangle centred on P: ``a_1 = (0.24, 0.27, 0)``,
  ``a_2 = (-0.24, 0.27, 0)``, ``a_3 = (-0.24, -0.27, 0)``, ``a_4 = (0.24, -0.27, 0)``
  (``|a1 - a2| = 0.48``, ``|a2 - a3| = 0.54``); the feet ``d_i`` of section 4
  then lie within 7 cm of the points below the hips at ``q0``. The tail joint
  is at ``r = (0, -0.34, 0)`` (``|r| = 0.34``). The mass centre of the torso is
  its geometric centre P (as in the paper).
  At rest at ``q0`` (tau_p = 0) the inverse dynamics gives ``tau_ta = -8.44 N m``
  (the paper's profile holds the tail with -7.7 N m) and knee torques of
  tens of N m; the paper's section-4.1 torques are not an equilibrium of
  this (or, by its Fig. 6, the paper's) geometry.
* Leg joint angles (Fig. 2): ``b_i = R_y(ha) R_x(-hb) [0, 0, -l_th]`` (the sign
  of ``hb`` is the one of ``Q_k``, eq. 22), ``c_i = R_y(ha) R_x(-(hb + pi - k))
  [0, 0, -l_sh]``: ``theta_k`` is the *interior* knee angle between thigh and
  shank, which is what eqs. 6 and 15 state and what puts ``q0``'s knees
  (83.6 deg) in the stated range (0, pi/2). The knee points forward (+y), the
  ``-asin`` branch of eq. 8.
* Eq. 7 as OCR'd (``atan2(s_x, s_z)``) gives +-pi for a leg pointing down; the
  range (-pi/2, pi/2) and eq. 16 (the derivative of ``atan(s_x / s_z)``) fix it
  to ``atan2(-s_x, -s_z)``.
* Eq. 17/18 as printed use ``cos(hb + k)``, which belongs to the *bent* knee
  angle ``pi - k``; re-derived from the y row of eq. 5 with the interior angle:
  ``hb' = -(s_y' + l_sh cos(hb - k) k') / (l_th cos hb - l_sh cos(hb - k))``.
* Eq. 2 (``omega = phi-dot``) holds only at ``phi = 0``. We keep the paper's
  body twist ``xi = [v, omega, ta', tb']`` for all Jacobians (eqs. 11-31) and
  map to q-dot with ``xi = T(q) q-dot``, ``T = diag(I3, E(phi), I2)``,
  ``omega = E phi-dot`` (``E`` of eq. 1's fixed-axis angles). Generalized
  forces in q are ``T^T`` times the twist ones; the actuator torques do not
  depend on this choice. The generic-core cross-check (Euler-angle base) decides.
* Eq. 36 has ``J_h^T m_sh / 2``; eq. 40 and 47 (and the ideal-bar integral)
  give ``m_th / 2``. Eq. 51 is not symmetric as printed; the integral of eq. 49
  gives ``m/3 (J1^T J1 + J2^T J2) + m/6 (J1^T J2 + J2^T J1)``.
* Thigh = ideal bar H-K, shank = ideal bar K-F with F fixed (``J_F = 0``).

Actuators: 14 (hips ``ha, hb``, knees, tail ``ta, tb``) in the order
``[q_a; q_p]`` with ``q_a = [ha1, ha2, k1, k2, k3, k4, ta, tb]`` (eq. 27) and
``q_p = [ha3, ha4, hb1, hb2, hb3, hb4]`` (eq. 28). ``J_tau`` (14 x 8) maps the
twist ``xi`` (or, with ``T``, q-dot) to these joint rates.

The compiled kernels (``_kin``, ``_id_xi``, ``_mcg_xi``) are allocation-light
numba functions; :class:`QuadrupedTail` is the checked Python API.
"""
from __future__ import annotations

import copy
import math

import numpy as np
from numba import njit

from rtctl.model import inertia_scale_factor, payload_mass

__all__ = ["QuadrupedTail", "ACTUATOR_NAMES", "OK", "UNREACHABLE", "SINGULAR"]

OK, UNREACHABLE, SINGULAR = 0, 1, 2
STATUS_TEXT = {UNREACHABLE: "a foot is out of reach of its leg (|s_i| outside [|l_th - l_sh|, l_th + l_sh]) "
                            "or a leg is at a kinematic singularity",
               SINGULAR: "singular actuation Jacobian or mass matrix"}

ACTUATOR_NAMES = ("ha1", "ha2", "k1", "k2", "k3", "k4", "ta", "tb", "ha3", "ha4", "hb1", "hb2", "hb3", "hb4")
# (leg, joint) of each actuator row; joint 0 = ha, 1 = hb, 2 = k; leg -1 = tail (joint 0 ta, 1 tb)
_ACT_LEG = np.array([0, 1, 0, 1, 2, 3, -1, -1, 2, 3, 0, 1, 2, 3], dtype=np.int64)
_ACT_JOINT = np.array([0, 0, 2, 2, 2, 2, 0, 1, 0, 0, 1, 1, 1, 1], dtype=np.int64)

# par: l_th, l_sh, l_t, m_th, m_sh, m_b, m_t, g, Ib_x, Ib_y, Ib_z
P_LTH, P_LSH, P_LT, P_MTH, P_MSH, P_MB, P_MT, P_G, P_IBX, P_IBY, P_IBZ = range(11)


@njit(cache=True)
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True)
def _rot_E(q, qd, R, E, edot):
    """Eq. 1 R(phi); E with omega = E phi-dot; edot = E-dot phi-dot."""
    cx, sx = math.cos(q[3]), math.sin(q[3])
    cy, sy = math.cos(q[4]), math.sin(q[4])
    cz, sz = math.cos(q[5]), math.sin(q[5])
    R[0, 0] = cz * cy
    R[0, 1] = cz * sy * sx - sz * cx
    R[0, 2] = cz * sy * cx + sz * sx
    R[1, 0] = sz * cy
    R[1, 1] = sz * sy * sx + cz * cx
    R[1, 2] = sz * sy * cx - cz * sx
    R[2, 0] = -sy
    R[2, 1] = cy * sx
    R[2, 2] = cy * cx
    # omega = e_z dphz + Rz e_y dphy + Rz Ry e_x dphx
    E[0, 0], E[1, 0], E[2, 0] = cz * cy, sz * cy, -sy
    E[0, 1], E[1, 1], E[2, 1] = -sz, cz, 0.0
    E[0, 2], E[1, 2], E[2, 2] = 0.0, 0.0, 1.0
    dx, dy, dz = qd[3], qd[4], qd[5]
    edot[0] = (-sz * cy * dz - cz * sy * dy) * dx - cz * dz * dy
    edot[1] = (cz * cy * dz - sz * sy * dy) * dx - sz * dz * dy
    edot[2] = -cy * dy * dx


@njit(cache=True)
def _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, J, bias, Jtau):
    """Position, velocity and acceleration analysis (eqs. 4-31) at (q, q-dot).

    Writes R, E, edot (see ``_rot_E``), xi = T q-dot, the leg joint angles
    ``ang[i] = [ha, hb, k]`` (eqs. 6-9) and rates ``angd``, the point Jacobians
    ``J`` (9, 3, 8) w.r.t. xi of H_1..4 (eq. 20), K_1..4 (eq. 23) and N (eq. 26),
    their bias accelerations ``bias`` (9, 3) = acceleration at xi-dot = 0
    (eqs. 29-31 without the xi-dot terms), and the actuation Jacobian
    ``Jtau`` (14, 8) = [J_tau_a; J_tau_p] (eqs. 27-28) w.r.t. xi. Returns a status.
    """
    lth, lsh, lt = par[P_LTH], par[P_LSH], par[P_LT]
    _rot_E(q, qd, R, E, edot)
    for k in range(3):
        xi[k] = qd[k]
        xi[3 + k] = E[k, 0] * qd[3] + E[k, 1] * qd[4] + E[k, 2] * qd[5]
    xi[6], xi[7] = qd[6], qd[7]
    v = xi[0:3]
    w = xi[3:6]
    for i in range(9):
        for a in range(3):
            for b in range(8):
                J[i, a, b] = 0.0
    for i in range(14):
        for b in range(8):
            Jtau[i, b] = 0.0
    wd = np.empty(3)
    tmp = np.empty(3)
    tmp2 = np.empty(3)
    rho = np.empty(3)
    s = np.empty(3)
    sd = np.empty(3)
    sdd = np.empty(3)
    js = np.empty((3, 6))
    jj = np.empty((3, 6))
    for i in range(4):
        # s_i = R^T (d_i - p) - a_i  (eq. 5)
        for k in range(3):
            wd[k] = D[i, k] - q[k]
        for k in range(3):
            s[k] = R[0, k] * wd[0] + R[1, k] * wd[1] + R[2, k] * wd[2] - A[i, k]
        n2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2]
        ns = math.sqrt(n2)
        if not (abs(lth - lsh) < ns < lth + lsh):
            return UNREACHABLE
        # eq. 6 (interior knee angle), eq. 7 (atan2(-s_x, -s_z)), eqs. 8-9
        ck = -(n2 - lth * lth - lsh * lsh) / (2.0 * lth * lsh)
        kk = math.acos(ck)
        sk = math.sin(kk)
        ha = math.atan2(-s[0], -s[2])
        cha, sha = math.cos(ha), math.sin(ha)
        spy = s[1]
        spz = sha * s[0] + cha * s[2]
        if spz >= 0.0:
            return UNREACHABLE
        hs = 0.5 * (lth + lsh + ns)
        area = math.sqrt(max(hs * (hs - lth) * (hs - lsh) * (hs - ns), 0.0))
        hb = math.atan(spy / spz) - math.asin(min(2.0 * area / (ns * lth), 1.0))
        ang[i, 0], ang[i, 1], ang[i, 2] = ha, hb, kk
        chb, shb = math.cos(hb), math.sin(hb)
        u = hb - kk
        cu, su = math.cos(u), math.sin(u)
        # j_s (eq. 13): s-dot = [-R^T, R^T skew(d - p)] t_p
        for a in range(3):
            for b in range(3):
                js[a, b] = -R[b, a]
            # R^T skew(wd): column b of skew(wd) = wd x e_b
            js[a, 3] = R[1, a] * wd[2] - R[2, a] * wd[1]
            js[a, 4] = R[2, a] * wd[0] - R[0, a] * wd[2]
            js[a, 5] = R[0, a] * wd[1] - R[1, a] * wd[0]
        den_hb = lth * chb - lsh * cu
        if sk < 1e-9 or abs(spz) < 1e-9 or abs(den_hb) < 1e-9:
            return UNREACHABLE
        ca2 = cha * cha / (s[2] * s[2]) if abs(s[2]) > 1e-12 else 0.0
        for b in range(6):
            jk = (s[0] * js[0, b] + s[1] * js[1, b] + s[2] * js[2, b]) / (lth * lsh * sk)          # eq. 15
            if abs(s[2]) > 1e-12:
                jha = ca2 * (s[2] * js[0, b] - s[0] * js[2, b])                                      # eq. 16
            else:
                jha = (s[2] * js[0, b] - s[0] * js[2, b]) / (s[0] * s[0])
            jhb = -(js[1, b] + lsh * cu * jk) / den_hb                                               # eq. 18 (re-derived)
            jj[0, b], jj[1, b], jj[2, b] = jha, jhb, jk
        for k in range(3):
            sd[k] = js[k, 0] * v[0] + js[k, 1] * v[1] + js[k, 2] * v[2] + js[k, 3] * w[0] + js[k, 4] * w[1] \
                + js[k, 5] * w[2]
        dha = jj[0, 0] * v[0] + jj[0, 1] * v[1] + jj[0, 2] * v[2] + jj[0, 3] * w[0] + jj[0, 4] * w[1] + jj[0, 5] * w[2]
        dhb = jj[1, 0] * v[0] + jj[1, 1] * v[1] + jj[1, 2] * v[2] + jj[1, 3] * w[0] + jj[1, 4] * w[1] + jj[1, 5] * w[2]
        dk = jj[2, 0] * v[0] + jj[2, 1] * v[1] + jj[2, 2] * v[2] + jj[2, 3] * w[0] + jj[2, 4] * w[1] + jj[2, 5] * w[2]
        angd[i, 0], angd[i, 1], angd[i, 2] = dha, dhb, dk
        # joint-acceleration bias: s-ddot at xi-dot = 0 is R^T (w x (w x wd) + 2 w x v)  (derivative of eq. 12)
        _cross(w, wd, tmp)
        _cross(w, tmp, tmp2)
        _cross(w, v, tmp)
        for k in range(3):
            tmp2[k] += 2.0 * tmp[k]
        for k in range(3):
            sdd[k] = R[0, k] * tmp2[0] + R[1, k] * tmp2[1] + R[2, k] * tmp2[2]
        # in the ha frame (g = R_y(ha)^T s = [0, gy, gz]):
        # R_y^T s'' = e_y x (e_y x g) ha'^2 + (e_y x g) ha'' + 2 ha' e_y x g' + g_hb hb'' + g_k k'' + g2
        gz = spz
        ddu = dhb - dk
        gdz = (lth * shb - lsh * su) * dhb + lsh * su * dk
        rx = cha * sdd[0] - sha * sdd[2]
        ry = sdd[1]
        rz = sha * sdd[0] + cha * sdd[2]
        ddha = (rx - 2.0 * dha * gdz) / gz
        by = ry - (lth * shb * dhb * dhb - lsh * su * ddu * ddu)
        bz = rz + gz * dha * dha - (lth * chb * dhb * dhb - lsh * cu * ddu * ddu)
        a11, a12 = -lth * chb + lsh * cu, -lsh * cu
        a21, a22 = lth * shb - lsh * su, lsh * su
        det = a11 * a22 - a12 * a21
        ddhb = (by * a22 - a12 * bz) / det
        # (k'' bias not needed: K depends on ha, hb only)
        # H_i (eqs. 19-20, 29): rho = R a_i
        for k in range(3):
            rho[k] = R[k, 0] * A[i, 0] + R[k, 1] * A[i, 1] + R[k, 2] * A[i, 2]
        _point_base(J, i, rho)
        _cross(w, rho, tmp)
        _cross(w, tmp, tmp2)
        for k in range(3):
            bias[i, k] = tmp2[k]
        # K_i (eqs. 21-23, 30): b = R_y(ha) bb, bb = [0, -lth sin hb, -lth cos hb]
        bby, bbz = -lth * shb, -lth * chb
        bpx, bpy, bpz = sha * bbz, bby, cha * bbz          # b in P frame
        for k in range(3):
            rho[k] = R[k, 0] * (A[i, 0] + bpx) + R[k, 1] * (A[i, 1] + bpy) + R[k, 2] * (A[i, 2] + bpz)
        _point_base(J, 4 + i, rho)
        # Q_k (eq. 22) columns (P frame)
        q1x, q1y, q1z = -lth * cha * chb, 0.0, lth * sha * chb
        q2x, q2y, q2z = lth * sha * shb, -lth * chb, lth * cha * shb
        for b in range(6):
            cxp = q1x * jj[0, b] + q2x * jj[1, b]
            cyp = q1y * jj[0, b] + q2y * jj[1, b]
            czp = q1z * jj[0, b] + q2z * jj[1, b]
            for k in range(3):
                J[4 + i, k, b] += R[k, 0] * cxp + R[k, 1] * cyp + R[k, 2] * czp
        # b-dot (P frame) and b-ddot bias
        bdx = q1x * dha + q2x * dhb
        bdy = q1y * dha + q2y * dhb
        bdz = q1z * dha + q2z * dhb
        # in the ha frame: bb'' = e_y x (e_y x bb) ha'^2 + (e_y x bb) ha'' + 2 ha' e_y x bb' + bb_hb hb'' + bb2
        bbdz = lth * shb * dhb
        fx = bbz * ddha + 2.0 * dha * bbdz
        fy = -lth * chb * ddhb + lth * shb * dhb * dhb
        fz = -bbz * dha * dha + lth * shb * ddhb + lth * chb * dhb * dhb
        bddx = cha * fx + sha * fz
        bddy = fy
        bddz = -sha * fx + cha * fz
        _cross(w, rho, tmp)
        _cross(w, tmp, tmp2)
        for k in range(3):
            rbd = R[k, 0] * bdx + R[k, 1] * bdy + R[k, 2] * bdz
            tmp[k] = rbd
        _cross(w, tmp, sd)
        for k in range(3):
            bias[4 + i, k] = tmp2[k] + 2.0 * sd[k] + R[k, 0] * bddx + R[k, 1] * bddy + R[k, 2] * bddz
        # actuation Jacobian rows (eqs. 27-28)
        for row in range(14):
            if _ACT_LEG_K[row] == i:
                for b in range(6):
                    Jtau[row, b] = jj[_ACT_JOINT_K[row], b]
    # tail N (eqs. 10, 24-26, 31)
    ta, tb = q[6], q[7]
    cta, sta, ctb, stb = math.cos(ta), math.sin(ta), math.cos(tb), math.sin(tb)
    tx, ty, tz = lt * stb, -lt * cta * ctb, -lt * sta * ctb
    for k in range(3):
        rho[k] = R[k, 0] * (r[0] + tx) + R[k, 1] * (r[1] + ty) + R[k, 2] * (r[2] + tz)
    _point_base(J, 8, rho)
    k1x, k1y, k1z = 0.0, lt * sta * ctb, -lt * cta * ctb          # K_n (eq. 25)
    k2x, k2y, k2z = lt * ctb, lt * cta * stb, lt * sta * stb
    for k in range(3):
        J[8, k, 6] = R[k, 0] * k1x + R[k, 1] * k1y + R[k, 2] * k1z
        J[8, k, 7] = R[k, 0] * k2x + R[k, 1] * k2y + R[k, 2] * k2z
    dta, dtb = qd[6], qd[7]
    tdx = k1x * dta + k2x * dtb
    tdy = k1y * dta + k2y * dtb
    tdz = k1z * dta + k2z * dtb
    # K_n-dot theta-dot (second derivatives of t)
    t2x = -lt * stb * dtb * dtb
    t2y = lt * cta * ctb * (dta * dta + dtb * dtb) - 2.0 * lt * sta * stb * dta * dtb
    t2z = lt * sta * ctb * (dta * dta + dtb * dtb) + 2.0 * lt * cta * stb * dta * dtb
    _cross(w, rho, tmp)
    _cross(w, tmp, tmp2)
    for k in range(3):
        tmp[k] = R[k, 0] * tdx + R[k, 1] * tdy + R[k, 2] * tdz
    _cross(w, tmp, sd)
    for k in range(3):
        bias[8, k] = tmp2[k] + 2.0 * sd[k] + R[k, 0] * t2x + R[k, 1] * t2y + R[k, 2] * t2z
    Jtau[6, 6] = 1.0
    Jtau[7, 7] = 1.0
    return OK


_ACT_LEG_K = _ACT_LEG
_ACT_JOINT_K = _ACT_JOINT


@njit(cache=True)
def _point_base(J, i, rho):
    """[I, -skew(rho), 0] (eqs. 20, 23, 26): v + omega x rho."""
    J[i, 0, 0] = 1.0
    J[i, 1, 1] = 1.0
    J[i, 2, 2] = 1.0
    J[i, 0, 4], J[i, 0, 5] = rho[2], -rho[1]
    J[i, 1, 3], J[i, 1, 5] = -rho[2], rho[0]
    J[i, 2, 3], J[i, 2, 4] = rho[1], -rho[0]


@njit(cache=True)
def _body_inertia(par, R, Iw):
    """I_b = R I_b^(P) R^T (section 3.2)."""
    for a in range(3):
        for b in range(3):
            Iw[a, b] = R[a, 0] * par[P_IBX] * R[b, 0] + R[a, 1] * par[P_IBY] * R[b, 1] + R[a, 2] * par[P_IBZ] * R[b, 2]


@njit(cache=True)
def _id_xi(par, q, xi, xid, J, bias, R, out):
    """Eq. 37's right-hand side in twist coordinates: tau_b + tau_t + sum tau_l,i (eqs. 38-40)."""
    mth, msh, mb, mt, g = par[P_MTH], par[P_MSH], par[P_MB], par[P_MT], par[P_G]
    acc = np.empty((9, 3))
    for i in range(9):
        for k in range(3):
            s = bias[i, k]
            for b in range(8):
                s += J[i, k, b] * xid[b]
            acc[i, k] = s
    f = np.zeros((9, 3))
    for i in range(4):  # eq. 40 (eq. 34 lumping; shank K-F with the foot fixed)
        for k in range(3):
            gk = -g if k == 2 else 0.0
            f[i, k] = mth / 3.0 * acc[i, k] + mth / 6.0 * acc[4 + i, k] - mth / 2.0 * gk
            f[4 + i, k] = (mth + msh) / 3.0 * acc[4 + i, k] + mth / 6.0 * acc[i, k] - (mth + msh) / 2.0 * gk
    for k in range(3):  # eq. 39
        f[8, k] = mt * (acc[8, k] - (-g if k == 2 else 0.0))
    for b in range(8):
        s = 0.0
        for i in range(9):
            s += J[i, 0, b] * f[i, 0] + J[i, 1, b] * f[i, 1] + J[i, 2, b] * f[i, 2]
        out[b] = s
    # eq. 38
    Iw = np.empty((3, 3))
    _body_inertia(par, R, Iw)
    w = xi[3:6]
    Iw_w = Iw @ w
    out[0] += mb * xid[0]
    out[1] += mb * xid[1]
    out[2] += mb * (xid[2] + g)
    out[3] += Iw[0, 0] * xid[3] + Iw[0, 1] * xid[4] + Iw[0, 2] * xid[5] + w[1] * Iw_w[2] - w[2] * Iw_w[1]
    out[4] += Iw[1, 0] * xid[3] + Iw[1, 1] * xid[4] + Iw[1, 2] * xid[5] + w[2] * Iw_w[0] - w[0] * Iw_w[2]
    out[5] += Iw[2, 0] * xid[3] + Iw[2, 1] * xid[4] + Iw[2, 2] * xid[5] + w[0] * Iw_w[1] - w[1] * Iw_w[0]


@njit(cache=True)
def _mcg_xi(par, xi, J, bias, R, M, C, G):
    """Mass matrix (eqs. 51-55), Coriolis (eqs. 44-45, 48) and gravity (eq. 47) in twist coordinates."""
    mth, msh, mb, mt, g = par[P_MTH], par[P_MSH], par[P_MB], par[P_MT], par[P_G]
    for a in range(8):
        C[a] = 0.0
        G[a] = 0.0
        for b in range(8):
            M[a, b] = 0.0
    for i in range(4):
        Jh, Jk = J[i], J[4 + i]
        bh, bk = bias[i], bias[4 + i]
        for a in range(8):
            for b in range(a, 8):
                hh = Jh[0, a] * Jh[0, b] + Jh[1, a] * Jh[1, b] + Jh[2, a] * Jh[2, b]
                kk = Jk[0, a] * Jk[0, b] + Jk[1, a] * Jk[1, b] + Jk[2, a] * Jk[2, b]
                hk = Jh[0, a] * Jk[0, b] + Jh[1, a] * Jk[1, b] + Jh[2, a] * Jk[2, b] \
                    + Jk[0, a] * Jh[0, b] + Jk[1, a] * Jh[1, b] + Jk[2, a] * Jh[2, b]
                M[a, b] += mth / 3.0 * (hh + kk) + mth / 6.0 * hk + msh / 3.0 * kk
            for k in range(3):
                C[a] += Jh[k, a] * (mth / 3.0 * bh[k] + mth / 6.0 * bk[k]) \
                    + Jk[k, a] * ((mth + msh) / 3.0 * bk[k] + mth / 6.0 * bh[k])
            G[a] += g * (mth / 2.0 * Jh[2, a] + (mth + msh) / 2.0 * Jk[2, a])
    Jn = J[8]
    for a in range(8):
        for b in range(a, 8):
            M[a, b] += mt * (Jn[0, a] * Jn[0, b] + Jn[1, a] * Jn[1, b] + Jn[2, a] * Jn[2, b])
        C[a] += mt * (Jn[0, a] * bias[8, 0] + Jn[1, a] * bias[8, 1] + Jn[2, a] * bias[8, 2])
        G[a] += g * mt * Jn[2, a]
    Iw = np.empty((3, 3))
    _body_inertia(par, R, Iw)
    for k in range(3):
        M[k, k] += mb
        for l in range(k, 3):
            M[3 + k, 3 + l] += Iw[k, l]
    G[2] += mb * g
    w = xi[3:6]
    Iw_w = Iw @ w
    C[3] += w[1] * Iw_w[2] - w[2] * Iw_w[1]
    C[4] += w[2] * Iw_w[0] - w[0] * Iw_w[2]
    C[5] += w[0] * Iw_w[1] - w[1] * Iw_w[0]
    for a in range(8):
        for b in range(a):
            M[a, b] = M[b, a]


@njit(cache=True)
def _to_q(E, edot, M, C, G, Mq, Cq, Gq):
    """M_q = T^T M T, C_q = T^T (C + M T-dot q-dot), G_q = T^T G with T = diag(I3, E, I2)."""
    T = np.zeros((8, 8))
    for k in range(8):
        T[k, k] = 1.0
    for a in range(3):
        for b in range(3):
            T[3 + a, 3 + b] = E[a, b]
    MT = M @ T
    Mq[:, :] = T.T @ MT
    c = C.copy()
    for a in range(8):
        c[a] += M[a, 3] * edot[0] + M[a, 4] * edot[1] + M[a, 5] * edot[2]
    Cq[:] = T.T @ c
    Gq[:] = T.T @ G


@njit(cache=True)
def _twist_T(E, f, out):
    """out = T^T f (a twist-space generalized force to q coordinates)."""
    for k in range(8):
        out[k] = f[k]
    for b in range(3):
        out[3 + b] = E[0, b] * f[3] + E[1, b] * f[4] + E[2, b] * f[5]


@njit(cache=True)
def _allocate(Jtau, f, mode, w, tau0, out):
    """Actuator torques with J_tau^T tau = f (twist space).

    mode 0: eq. 41, tau_p = tau0[8:] given, tau_a = J_tau_a^-T (f - J_tau_p^T tau_p);
    mode 1: min (tau - tau0)^T W (tau - tau0) subject to J_tau^T tau = f, W = diag(w) (all 14).
    Returns a status.
    """
    if mode == 0:
        rhs = f.copy()
        for b in range(8):
            for k in range(8, 14):
                rhs[b] -= Jtau[k, b] * tau0[k]
        Ja = Jtau[:8, :].copy()
        if not np.all(np.isfinite(Ja)):
            return SINGULAR
        if abs(np.linalg.det(Ja)) < 1e-14:
            return SINGULAR
        ta = np.linalg.solve(Ja.T, rhs)
        for k in range(8):
            out[k] = ta[k]
        for k in range(8, 14):
            out[k] = tau0[k]
        return OK
    winv = 1.0 / w
    JW = np.empty((8, 14))
    for b in range(8):
        for k in range(14):
            JW[b, k] = Jtau[k, b] * winv[k]
    S = JW @ Jtau
    rhs = f - Jtau.T @ tau0
    if abs(np.linalg.det(S)) < 1e-300:
        return SINGULAR
    lam = np.linalg.solve(S, rhs)
    for k in range(14):
        s = 0.0
        for b in range(8):
            s += JW[b, k] * lam[b]
        out[k] = tau0[k] + s
    return OK


@njit(cache=True)
def _cond(Ja):
    sv = np.linalg.svd(Ja)[1]
    if sv[-1] <= 0.0:
        return np.inf
    return sv[0] / sv[-1]


class _Work:
    def __init__(self):
        self.R, self.E, self.edot = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(3)
        self.xi, self.xid = np.zeros(8), np.zeros(8)
        self.ang, self.angd = np.zeros((4, 3)), np.zeros((4, 3))
        self.J, self.bias, self.Jtau = np.zeros((9, 3, 8)), np.zeros((9, 3)), np.zeros((14, 8))
        self.M, self.C, self.G = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.Mq, self.Cq, self.Gq = np.zeros((8, 8)), np.zeros(8), np.zeros(8)
        self.f, self.fq = np.zeros(8), np.zeros(8)


# Status of ``_kin`` is cheap to raise on; the kernels below wrap it for the plant and controllers.

@njit(cache=True)
def _fd_core(par, A, D, r, q, qd, tau, qdd, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq, Cq, Gq,
             f, fq):
    """Forward dynamics (eq. 43): q-ddot = M_q^-1 (T^T J_tau^T tau - C_q - G_q); returns a status."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, J, bias, Jtau)
    if st != OK:
        return st
    _mcg_xi(par, xi, J, bias, R, M, C, G)
    _to_q(E, edot, M, C, G, Mq, Cq, Gq)
    for b in range(8):
        s = 0.0
        for k in range(14):
            s += Jtau[k, b] * tau[k]
        f[b] = s
    _twist_T(E, f, fq)
    for b in range(8):
        fq[b] -= Cq[b] + Gq[b]
    try:
        L = np.linalg.cholesky(Mq)
    except Exception:  # noqa: BLE001 - numba raises a generic error for non-PD
        return SINGULAR
    y = np.linalg.solve(L, fq)
    qdd[:] = np.linalg.solve(L.T, y)
    return OK


@njit(cache=True)
def _xid_from_qdd(E, edot, qdd, xid):
    for k in range(3):
        xid[k] = qdd[k]
        xid[3 + k] = E[k, 0] * qdd[3] + E[k, 1] * qdd[4] + E[k, 2] * qdd[5] + edot[k]
    xid[6], xid[7] = qdd[6], qdd[7]


@njit(cache=True)
def _id_core(par, A, D, r, q, qd, qdd, mode, w, tau0, tau, R, E, edot, xi, xid, ang, angd, J, bias, Jtau, f):
    """Virtual-work inverse dynamics (eqs. 37-41): actuator torques (14) for (q, q-dot, q-ddot)."""
    st = _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, J, bias, Jtau)
    if st != OK:
        return st
    _xid_from_qdd(E, edot, qdd, xid)
    _id_xi(par, q, xi, xid, J, bias, R, f)
    return _allocate(Jtau, f, mode, w, tau0, tau)


@njit(cache=True)
def _rk4(par, A, D, r, x, xd, tau, dt, n, k, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq, Cq, Gq, f,
         fq):
    """n classical RK4 steps of (q, q-dot) under constant tau; k: (8, 8) scratch. Returns a status."""
    h = dt / n
    q1, v1 = np.empty(8), np.empty(8)
    a = np.empty(8)
    for _ in range(n):
        # k rows: 0-1 dq, dv of stage 1, 2-3 stage 2, 4-5 stage 3, 6-7 stage 4
        for stage in range(4):
            c = 0.0 if stage == 0 else (0.5 * h if stage < 3 else h)
            for j in range(8):
                q1[j] = x[j] + (c * k[2 * stage - 2, j] if stage else 0.0)
                v1[j] = xd[j] + (c * k[2 * stage - 1, j] if stage else 0.0)
            st = _fd_core(par, A, D, r, q1, v1, tau, a, R, E, edot, xi, ang, angd, J, bias, Jtau, M, C, G, Mq,
                          Cq, Gq, f, fq)
            if st != OK:
                return st
            for j in range(8):
                k[2 * stage, j] = v1[j]
                k[2 * stage + 1, j] = a[j]
        for j in range(8):
            x[j] += h / 6.0 * (k[0, j] + 2.0 * k[2, j] + 2.0 * k[4, j] + k[6, j])
            xd[j] += h / 6.0 * (k[1, j] + 2.0 * k[3, j] + 2.0 * k[5, j] + k[7, j])
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(xd))):
            return UNREACHABLE
    return OK


@njit(cache=True)
def _joint_state(ang, angd, q_act, v_act, q, qd):
    """Actuator-space coordinates [q_a; q_p] (eqs. 27-28) from leg angles/rates and the tail."""
    for row in range(14):
        leg = _ACT_LEG_K[row]
        j = _ACT_JOINT_K[row]
        if leg < 0:
            q_act[row] = q[6 + j]
            v_act[row] = qd[6 + j]
        else:
            q_act[row] = ang[leg, j]
            v_act[row] = angd[leg, j]


@njit(cache=True)
def _leg_vector(par, ha, hb, kk, out):
    """s_i' = b_i + c_i in the torso frame from the joint angles (eq. 5)."""
    lth, lsh = par[P_LTH], par[P_LSH]
    u = hb - kk
    gy = -lth * math.sin(hb) + lsh * math.sin(u)
    gz = -lth * math.cos(hb) + lsh * math.cos(u)
    out[0] = math.sin(ha) * gz
    out[1] = gy
    out[2] = math.cos(ha) * gz


@njit(cache=True)
def _fk(par, A, D, q_act, q):
    """Torso pose from the 12 leg joint angles (feet fixed): d_i - p = R (a_i + s_i) for the four legs,
    R by the SVD solution of Wahba's problem, p by the mean; then the Euler angles of eq. 1."""
    U = np.empty((4, 3))
    s = np.empty(3)
    leg_ang = np.empty((4, 3))
    for row in range(14):
        leg = _ACT_LEG_K[row]
        if leg >= 0:
            leg_ang[leg, _ACT_JOINT_K[row]] = q_act[row]
    for i in range(4):
        _leg_vector(par, leg_ang[i, 0], leg_ang[i, 1], leg_ang[i, 2], s)
        for k in range(3):
            U[i, k] = A[i, k] + s[k]
    ub = np.zeros(3)
    db = np.zeros(3)
    for i in range(4):
        for k in range(3):
            ub[k] += 0.25 * U[i, k]
            db[k] += 0.25 * D[i, k]
    H = np.zeros((3, 3))
    for i in range(4):
        for a in range(3):
            for b in range(3):
                H[a, b] += (U[i, a] - ub[a]) * (D[i, b] - db[b])
    Us, _, Vt = np.linalg.svd(H)
    V = Vt.T
    dd = np.linalg.det(V @ Us.T)
    Dg = np.eye(3)
    Dg[2, 2] = 1.0 if dd > 0 else -1.0
    R = V @ Dg @ Us.T
    for k in range(3):
        q[k] = db[k] - (R[k, 0] * ub[0] + R[k, 1] * ub[1] + R[k, 2] * ub[2])
    q[4] = -math.asin(max(-1.0, min(1.0, R[2, 0])))
    q[3] = math.atan2(R[2, 1], R[2, 2])
    q[5] = math.atan2(R[1, 0], R[0, 0])
    q[6] = q_act[6]
    q[7] = q_act[7]


class QuadrupedTail:
    """The quadruped-with-tail mechanism: parameters (Table 1), kinematics, virtual-work dynamics.

    All q-space quantities use ``q = [p, phi_x, phi_y, phi_z, ta, tb]``; actuator
    vectors are 14 long in the order of :data:`ACTUATOR_NAMES`. See the module
    docstring for the geometry and the corrections to the OCR'd equations.
    """

    def __init__(self, *, l_th=0.3, l_sh=0.3, l_t=0.6, m_th=0.9453, m_sh=1.2289, m_b=26.9078, m_t=1.4347,
                 I_b=(0.8404, 0.3793, 1.2125), g=9.8067, hips=None, feet=None, r=(0.0, -0.34, 0.0),
                 torque_limit=math.inf, velocity_limit=20.0):
        self.par = np.array([l_th, l_sh, l_t, m_th, m_sh, m_b, m_t, g, *I_b], dtype=float)
        self.A = np.ascontiguousarray(
            [[0.24, 0.27, 0.0], [-0.24, 0.27, 0.0], [-0.24, -0.27, 0.0], [0.24, -0.27, 0.0]]
            if hips is None else hips, dtype=float)
        # section 4: [d1 d2 d3 d4] as columns
        self.D = np.ascontiguousarray(
            np.array([[0.41, -0.01, -0.01, 0.41], [0.63, 0.57, 0.03, -0.03], [0.0, 0.0, 0.0, 0.0]]).T
            if feet is None else feet, dtype=float)
        self.r = np.asarray(r, dtype=float)
        if self.A.shape != (4, 3) or self.D.shape != (4, 3) or self.r.shape != (3,):
            raise ValueError("hips and feet must be 4 x 3 (one row per leg), r a 3-vector")
        self.q0 = np.array([0.2, 0.3, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0])
        self.torque_limit = np.broadcast_to(np.asarray(torque_limit, float), (14,)).copy()
        self.velocity_limit = float(velocity_limit)
        self._w = _Work()

    # -- parameters ------------------------------------------------------
    l_th = property(lambda s: s.par[P_LTH])
    l_sh = property(lambda s: s.par[P_LSH])
    l_t = property(lambda s: s.par[P_LT])
    m_th = property(lambda s: s.par[P_MTH])
    m_sh = property(lambda s: s.par[P_MSH])
    m_b = property(lambda s: s.par[P_MB])
    m_t = property(lambda s: s.par[P_MT])
    g = property(lambda s: s.par[P_G])

    def with_inertia_scaled(self, factor: float) -> "QuadrupedTail":
        """The same robot with every mass and the body's inertia times ``factor`` (a model error for
        robustness tests)."""
        f = inertia_scale_factor(factor)
        out = copy.deepcopy(self)
        out.par[[P_MTH, P_MSH, P_MB, P_MT, P_IBX, P_IBY, P_IBZ]] *= f
        return out

    def with_payload(self, mass: float) -> "QuadrupedTail":
        """The same robot carrying a point mass ``mass`` (kg) at the torso's centre of mass."""
        out = copy.deepcopy(self)
        out.par[P_MB] += payload_mass(mass)
        return out

    def _vec(self, x, n, name):
        a = np.ascontiguousarray(x, dtype=float)
        if a.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or inf")
        return a

    def _kin(self, q, qd=None):
        w = self._w
        q = self._vec(q, 8, "q")
        qd = np.zeros(8) if qd is None else self._vec(qd, 8, "qd")
        st = _kin(self.par, self.A, self.D, self.r, q, qd, w.R, w.E, w.edot, w.xi, w.ang, w.angd, w.J, w.bias,
                  w.Jtau)
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return w

    # -- kinematics (eqs. 1-31) -----------------------------------------
    def rotation(self, q):
        """R_P^S of eq. 1."""
        return self._kin(q).R.copy()

    def euler_rate_matrix(self, q):
        """E(phi) with omega = E phi-dot (T = diag(I3, E, I2) maps q-dot to the twist xi)."""
        return self._kin(q).E.copy()

    def twist_map(self, q):
        T = np.eye(8)
        T[3:6, 3:6] = self._kin(q).E
        return T

    def inverse_kinematics(self, q):
        """(4, 3) leg joint angles [theta_ha, theta_hb, theta_k] per leg (eqs. 4-9)."""
        return self._kin(q).ang.copy()

    def joint_state(self, q, qd=None):
        """Actuator-space positions and rates (14 each, order of :data:`ACTUATOR_NAMES`)."""
        w = self._kin(q, qd)
        qa, va = np.zeros(14), np.zeros(14)
        _joint_state(w.ang, w.angd, qa, va, self._vec(q, 8, "q"), np.zeros(8) if qd is None else
                     self._vec(qd, 8, "qd"))
        return qa, va

    def tail_tip(self, q):
        """Position of the tail mass N (eq. 10)."""
        q = self._vec(q, 8, "q")
        R = self._kin(q).R
        ta, tb, lt = q[6], q[7], self.l_t
        t = np.array([lt * np.sin(tb), -lt * np.cos(ta) * np.cos(tb), -lt * np.sin(ta) * np.cos(tb)])
        return q[:3] + R @ (self.r + t)

    def point_positions(self, q):
        """World positions of H_i (4, 3), K_i (4, 3) and N."""
        q = self._vec(q, 8, "q")
        w = self._kin(q)
        H = q[:3] + self.A @ w.R.T
        K = np.empty((4, 3))
        for i, (ha, hb, _) in enumerate(w.ang):
            b = np.array([-self.l_th * np.sin(ha) * np.cos(hb), -self.l_th * np.sin(hb),
                          -self.l_th * np.cos(ha) * np.cos(hb)])
            K[i] = H[i] + w.R @ b
        return H, K, self.tail_tip(q)

    def point_jacobians(self, q, coords="q"):
        """(9, 3, 8) Jacobians of H_1..4, K_1..4, N (eqs. 20, 23, 26); ``coords`` "xi" (twist, as in the paper)
        or "q" (times T)."""
        w = self._kin(q)
        return w.J.copy() if coords == "xi" else w.J @ self.twist_map(q)

    def actuation_jacobians(self, q, coords="q"):
        """(J_tau_a (8 x 8), J_tau_p (6 x 8)) of eqs. 27-28 (w.r.t. the twist for ``coords="xi"``)."""
        w = self._kin(q)
        Jt = w.Jtau.copy() if coords == "xi" else w.Jtau @ self.twist_map(q)
        return Jt[:8].copy(), Jt[8:].copy()

    def accelerations(self, q, qd, qdd):
        """Accelerations of H_1..4, K_1..4, N (9, 3) (eqs. 29-31)."""
        w = self._kin(q, qd)
        xid = np.zeros(8)
        _xid_from_qdd(w.E, w.edot, self._vec(qdd, 8, "qdd"), xid)
        return np.einsum("ikb,b->ik", w.J, xid) + w.bias

    def condition_number(self, q):
        """Condition number of J_tau_a (twist coordinates, the paper's eq. 27)."""
        return float(_cond(self._kin(q).Jtau[:8].copy()))

    # -- dynamics (eqs. 32-55) -------------------------------------------
    def generalized_forces(self, q, qd, qdd):
        """tau_b + tau_t + sum tau_l,i (eqs. 38-40) in q coordinates (8)."""
        w = self._kin(q, qd)
        _xid_from_qdd(w.E, w.edot, self._vec(qdd, 8, "qdd"), w.xid)
        _id_xi(self.par, np.asarray(q, float), w.xi, w.xid, w.J, w.bias, w.R, w.f)
        out = np.empty(8)
        _twist_T(w.E, w.f, out)
        return out

    def _alloc_args(self, method, tau_p, weights, torque_limit):
        tau0 = np.zeros(14)
        if method == "paper":
            if tau_p is not None:
                tau0[8:] = self._vec(tau_p, 6, "tau_p")
            return 0, np.ones(14), tau0
        if method not in ("min_norm", "weighted", "limits"):
            raise ValueError(f"method must be 'paper', 'min_norm', 'weighted' or 'limits', got {method!r}")
        if tau_p is not None:
            tau0[8:] = self._vec(tau_p, 6, "tau_p")
        if method == "min_norm":
            w = np.ones(14)
        elif method == "weighted":
            w = self._vec(weights, 14, "weights")
        else:
            lim = self.torque_limit if torque_limit is None else np.broadcast_to(
                np.asarray(torque_limit, float), (14,))
            if not np.all(np.isfinite(lim)):
                raise ValueError("method 'limits' needs finite torque limits (the paper states none; pass "
                                 "torque_limit or build the mechanism with one)")
            w = 1.0 / np.asarray(lim, float) ** 2
        if np.any(w <= 0):
            raise ValueError("weights must be > 0")
        return 1, np.ascontiguousarray(w), tau0

    def inverse_dynamics(self, q, qd, qdd, method="paper", tau_p=None, weights=None, torque_limit=None):
        """Actuator torques (14, order of :data:`ACTUATOR_NAMES`) producing (q, q-dot, q-ddot).

        ``method``: ``"paper"`` -- eq. 41 with the redundant torques fixed to ``tau_p`` (default 0);
        ``"min_norm"`` -- all 14 actuators, minimum ``|tau - tau_pref|`` subject to eq. 37, where the
        preferred profile ``tau_pref`` has ``tau_p`` (default 0) in its last six entries;
        ``"weighted"`` -- the same with ``sum w_k (tau_k - tau_pref,k)^2``, ``weights`` (14);
        ``"limits"`` -- weights ``1 / limit_k^2`` (``torque_limit`` or the mechanism's), i.e. the
        least-squares torque relative to each actuator's limit.
        """
        mode, wts, tau0 = self._alloc_args(method, tau_p, weights, torque_limit)
        w = self._w
        q, qd, qdd = self._vec(q, 8, "q"), self._vec(qd, 8, "qd"), self._vec(qdd, 8, "qdd")
        tau = np.empty(14)
        st = _id_core(self.par, self.A, self.D, self.r, q, qd, qdd, mode, wts, tau0, tau, w.R, w.E, w.edot, w.xi,
                      w.xid, w.ang, w.angd, w.J, w.bias, w.Jtau, w.f)
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return tau

    def allocate(self, q, force, method="paper", tau_p=None, weights=None, torque_limit=None):
        """Actuator torques (14) whose eq. 46 force ``T^T J_tau^T tau`` equals the q-space ``force`` (8),
        by the allocation ``method`` of :meth:`inverse_dynamics`."""
        mode, wts, tau0 = self._alloc_args(method, tau_p, weights, torque_limit)
        w = self._kin(q)
        f = np.linalg.solve(self.twist_map(q).T, self._vec(force, 8, "force"))
        tau = np.empty(14)
        if _allocate(w.Jtau, f, mode, wts, tau0, tau) != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[SINGULAR]}")
        return tau

    def dynamics_terms(self, q, qd):
        """(M, C, G) of eq. 42 in q coordinates (eqs. 44-55)."""
        w = self._kin(q, qd)
        _mcg_xi(self.par, w.xi, w.J, w.bias, w.R, w.M, w.C, w.G)
        _to_q(w.E, w.edot, w.M, w.C, w.G, w.Mq, w.Cq, w.Gq)
        return w.Mq.copy(), w.Cq.copy(), w.Gq.copy()

    def actuation_force(self, q, tau):
        """F of eq. 46 in q coordinates: T^T (J_tau_a^T tau_a + J_tau_p^T tau_p)."""
        w = self._kin(q)
        out = np.empty(8)
        _twist_T(w.E, w.Jtau.T @ self._vec(tau, 14, "tau"), out)
        return out

    def forward_dynamics(self, q, qd, tau):
        """q-ddot of eq. 43 under the 14 actuator torques."""
        w = self._w
        q, qd, tau = self._vec(q, 8, "q"), self._vec(qd, 8, "qd"), self._vec(tau, 14, "tau")
        out = np.empty(8)
        st = _fd_core(self.par, self.A, self.D, self.r, q, qd, tau, out, w.R, w.E, w.edot, w.xi, w.ang, w.angd,
                      w.J, w.bias, w.Jtau, w.M, w.C, w.G, w.Mq, w.Cq, w.Gq, w.f, w.fq)
        if st != OK:
            raise ValueError(f"q = {np.round(q, 4).tolist()}: {STATUS_TEXT[st]}")
        return out

    def forward_kinematics(self, q_act):
        """Generalized coordinates q from the 14 actuator-space joint angles (the feet are fixed)."""
        out = np.empty(8)
        _fk(self.par, self.A, self.D, self._vec(q_act, 14, "q_act"), out)
        return out

    def generalized_motion(self, q_act, v_act, a_act=None):
        """(q, q-dot, q-ddot) from actuator-space positions, rates, accelerations (least squares over the
        14 joint equations ``theta-dot = J_tau T q-dot``, ``theta-ddot = J_tau (T q-ddot + E-dot phi-dot) +
        bias``)."""
        q = self.forward_kinematics(q_act)
        w = self._kin(q)
        Jq = w.Jtau @ self.twist_map(q)
        qd = np.linalg.lstsq(Jq, self._vec(v_act, 14, "v_act"), rcond=None)[0]
        if a_act is None:
            return q, qd, None
        # joint-acceleration bias: finite-difference-free via the zero-acceleration joint accelerations
        base = self.joint_accelerations(q, qd, np.zeros(8))
        qdd = np.linalg.lstsq(Jq, self._vec(a_act, 14, "a_act") - base, rcond=None)[0]
        return q, qd, qdd

    def joint_accelerations(self, q, qd, qdd):
        """Actuator-space joint accelerations (14) for (q, q-dot, q-ddot), from the second derivative of
        eq. 5 (legs) and the tail coordinates."""
        return _joint_accelerations(self, q, qd, qdd)

    # -- models for the loop and the cross-check --------------------------
    def actuator_model(self, name: str = "quadruped_tail"):
        """The loop's actuator-space model: 14 independent massless revolute joints (order of
        :data:`ACTUATOR_NAMES`) with position, velocity and torque limits."""
        from rtctl.model import ModelBuilder

        lim = {"ha": (-np.pi / 2, np.pi / 2), "hb": (-np.pi / 2, np.pi / 2), "k": (0.05, np.pi - 0.05),
               "ta": (-np.pi / 2, np.pi / 2), "tb": (-np.pi / 2, np.pi / 2)}
        b = ModelBuilder(name)
        for k, n in enumerate(ACTUATOR_NAMES):
            lo, hi = lim[n.rstrip("1234")]
            b.add_body(n, -1, "revolute", joint_name=n, axis=(1, 0, 0), lower=lo, upper=hi,
                       velocity_limit=self.velocity_limit, effort_limit=float(self.torque_limit[k]))
        return b.build()

    def tree_model(self):
        """The same robot in the generic core: torso on a ZYX Euler-angle base (R = Rz Ry Rx, eq. 1), four
        legs (hip ``ha`` about torso y at a_i, massless; ``hb`` about -x; thigh and shank uniform slender bars
        of inertia m l^2 / 12 about their transverse axes, zero about their own; knee about x after a fixed
        R_x(-pi) so its coordinate is the interior angle) and the tail (``ta`` about x at r, ``tb`` about z,
        point mass at [0, -l_t, 0]). Frames ``foot{i}`` at the shank tips. Tree coordinates:
        [p, phi_z, phi_y, phi_x, (ha_i, hb_i, k_i) x 4, ta, tb] (nv = 20)."""
        from rtctl.model import ModelBuilder, rpy_to_matrix

        lth, lsh, lt = self.l_th, self.l_sh, self.l_t
        b = ModelBuilder("quadruped_tail_tree", gravity=(0.0, 0.0, -self.g))
        b.add_euler_floating_base("torso", sequence="zyx", mass=self.m_b, inertia=np.diag(self.par[P_IBX:]))
        bar = lambda m, l: np.diag([m * l * l / 12.0, m * l * l / 12.0, 0.0])  # noqa: E731
        for i in range(4):
            b.add_body(f"hipa{i}", "torso", "revolute", axis=(0, 1, 0), translation=self.A[i])
            b.add_body(f"thigh{i}", f"hipa{i}", "revolute", axis=(-1, 0, 0), mass=self.m_th,
                       com=(0, 0, -lth / 2), inertia=bar(self.m_th, lth))
            b.add_body(f"shank{i}", f"thigh{i}", "revolute", axis=(1, 0, 0), rotation=rpy_to_matrix((-np.pi, 0, 0)),
                       translation=(0, 0, -lth), mass=self.m_sh, com=(0, 0, -lsh / 2), inertia=bar(self.m_sh, lsh))
            b.add_frame(f"foot{i}", f"shank{i}", translation=(0, 0, -lsh))
        b.add_body("taila", "torso", "revolute", axis=(1, 0, 0), translation=self.r)
        b.add_body("tail", "taila", "revolute", axis=(0, 0, 1), mass=self.m_t, com=(0, -lt, 0))
        return b.build()

    @staticmethod
    def tree_coordinates(q, ang):
        """Tree q (20) from generalized q and leg angles (4, 3)."""
        out = np.zeros(20)
        out[:3] = q[:3]
        out[3:6] = q[5], q[4], q[3]
        out[6:18] = np.asarray(ang).ravel()
        out[18:20] = q[6:8]
        return out

    # tree velocity columns of the generalized coordinates
    TREE_BASE = np.array([0, 1, 2, 5, 4, 3, 18, 19])   # tree index of q[k] for k = 0..7

    def tree_reference(self):
        """The independent formulation: generic-core dynamics of :meth:`tree_model` and the actuation
        map B (20 x 14, tree DOF of each actuator in :data:`ACTUATOR_NAMES` order)."""
        from rtctl.dynamics import Dynamics

        idx = {}
        for k in range(4):
            idx[f"ha{k + 1}"], idx[f"hb{k + 1}"], idx[f"k{k + 1}"] = 6 + 3 * k, 7 + 3 * k, 8 + 3 * k
        idx["ta"], idx["tb"] = 18, 19
        actuation = np.zeros((20, 14))
        for j, name in enumerate(ACTUATOR_NAMES):
            actuation[idx[name], j] = 1.0
        return Dynamics(self.tree_model()), actuation

    def tree_state(self, dyn, q, qd, qdd):
        """Tree (q, v, a), the foot constraint Jacobian Jc, the null-space basis Phi (tree velocities of
        unit generalized velocities) and the constraint bias, from the generic core only (leg rates and
        accelerations follow from the four foot constraints)."""
        tq = self.tree_coordinates(q, self.inverse_kinematics(q))
        legs, rest = np.arange(6, 18), np.r_[0:6, 18, 19]
        jc = np.vstack([dyn.jacobian(tq, f"foot{i}")[3:] for i in range(4)])
        tv = np.zeros(20)
        tv[self.TREE_BASE] = qd
        tv[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ tv[rest])
        gamma = np.concatenate([dyn.jacobian_dot_times_v(tq, tv, f"foot{i}")[3:] for i in range(4)])
        ta = np.zeros(20)
        ta[self.TREE_BASE] = qdd
        ta[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ ta[rest] - gamma)
        phi = np.zeros((20, 8))
        phi[self.TREE_BASE, np.arange(8)] = 1.0
        phi[legs] = np.linalg.solve(jc[:, legs], -jc[:, rest] @ phi[rest])
        bias = np.zeros(20)
        bias[legs] = np.linalg.solve(jc[:, legs], -gamma)
        return tq, tv, ta, jc, phi, bias

    def random_states(self, n, seed):
        """``n`` random (q, qd, qdd) near q0 (legs stay reachable), as used by the cross-checks."""
        rng = np.random.default_rng(seed)
        for _ in range(n):
            q = self.q0 + np.r_[rng.normal(0, 0.02, 3), rng.normal(0, 0.1, 3), rng.uniform(-1, 1, 2)]
            yield q, rng.normal(0, 1, 8), rng.normal(0, 2, 8)


def _joint_accelerations(mech, q, qd, qdd):
    """Joint accelerations through the twist (xi-dot) and the kinematic bias of the leg joints (derivative
    of eqs. 13-18), numerically: d/dt (J_tau(q) T(q) q-dot) along the motion by a central difference of
    second order is avoided; instead J_tau xi-dot + (joint bias) with the bias from the exact second
    derivative of eq. 5 solved per leg (same equations as the kernel)."""
    w = mech._kin(q, qd)
    xid = np.zeros(8)
    _xid_from_qdd(w.E, w.edot, mech._vec(qdd, 8, "qdd"), xid)
    out = w.Jtau @ xid
    ang, angd, R = w.ang.copy(), w.angd.copy(), w.R.copy()
    lth, lsh = mech.l_th, mech.l_sh
    v, om = w.xi[:3], w.xi[3:6]
    for i in range(4):
        wd = mech.D[i] - q[:3]
        sdd = R.T @ (np.cross(om, np.cross(om, wd)) + 2 * np.cross(om, v))
        ha, hb, kk = ang[i]
        dha, dhb, dk = angd[i]
        cha, sha, chb, shb = np.cos(ha), np.sin(ha), np.cos(hb), np.sin(hb)
        u = hb - kk
        cu, su = np.cos(u), np.sin(u)
        gz = -lth * chb + lsh * cu
        ddu = dhb - dk
        gdz = (lth * shb - lsh * su) * dhb + lsh * su * dk
        rx = cha * sdd[0] - sha * sdd[2]
        ry = sdd[1]
        rz = sha * sdd[0] + cha * sdd[2]
        ddha = (rx - 2 * dha * gdz) / gz
        by = ry - (lth * shb * dhb ** 2 - lsh * su * ddu ** 2)
        bz = rz + gz * dha ** 2 - (lth * chb * dhb ** 2 - lsh * cu * ddu ** 2)
        Am = np.array([[-lth * chb + lsh * cu, -lsh * cu], [lth * shb - lsh * su, lsh * su]])
        ddhb, ddk = np.linalg.solve(Am, [by, bz])
        bias = {0: ddha, 1: ddhb, 2: ddk}
        for row in range(14):
            if _ACT_LEG[row] == i:
                out[row] += bias[_ACT_JOINT[row]]
    return out


def quadruped_tail_model():
    """The robot model ``"quadruped_tail"``: the 14-actuator model of :class:`QuadrupedTail`."""
    return QuadrupedTail().actuator_model("quadruped_tail")
