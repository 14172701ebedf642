"""Compiled kinematics of the quadruped with a robotic tail (Liu & Ben-Tzvi, 2018): position, velocity and
acceleration analysis (eqs. 4-31), the actuator-space joint state (eqs. 27-28) and forward kinematics.

Numba functions on caller-provided arrays (:class:`rtctl.plants.quadruped_tail.dynamics._Work`); geometry,
conventions and the corrections to the OCR'd equations are in :mod:`rtctl.plants.quadruped_tail.model`,
which wraps these kernels in a checked API.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# The parts of ``_kin``: numba inlines them into it, so the kernel still compiles as one function.
kernel_part = njit(cache=True, inline="always")

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
def _kin(par, A, D, r, q, qd, R, E, edot, xi, ang, angd, angb, J, bias, Jtau, legj):
    """Position, velocity and acceleration analysis (eqs. 4-31) at (q, q-dot).

    Writes R, E, edot (see ``_rot_E``), xi = T q-dot, the leg joint angles
    ``ang[i] = [ha, hb, k]`` (eqs. 6-9), their rates ``angd`` and their
    accelerations at xi-dot = 0 ``angb`` (second derivative of eq. 5), the point Jacobians
    ``J`` (9, 3, 8) w.r.t. xi of H_1..4 (eq. 20), K_1..4 (eq. 23) and N (eq. 26),
    their bias accelerations ``bias`` (9, 3) = acceleration at xi-dot = 0
    (eqs. 29-31 without the xi-dot terms), and the actuation Jacobian
    ``Jtau`` (14, 8) = [J_tau_a; J_tau_p] (eqs. 27-28) w.r.t. xi; ``legj`` (2, 3, 6) is scratch.
    Returns a status.
    """
    lth, lsh = par[P_LTH], par[P_LSH]
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
    js = legj[0]
    jj = legj[1]
    for i in range(4):
        # s_i = R^T (d_i - p) - a_i  (eq. 5)
        wd0, wd1, wd2 = D[i, 0] - q[0], D[i, 1] - q[1], D[i, 2] - q[2]
        s0 = R[0, 0] * wd0 + R[1, 0] * wd1 + R[2, 0] * wd2 - A[i, 0]
        s1 = R[0, 1] * wd0 + R[1, 1] * wd1 + R[2, 1] * wd2 - A[i, 1]
        s2 = R[0, 2] * wd0 + R[1, 2] * wd1 + R[2, 2] * wd2 - A[i, 2]
        ok, ha, hb, kk, cha, sha, spz = _leg_angles(lth, lsh, s0, s1, s2)
        if not ok:
            return UNREACHABLE
        ang[i, 0], ang[i, 1], ang[i, 2] = ha, hb, kk
        chb, shb = math.cos(hb), math.sin(hb)
        u = hb - kk
        cu, su = math.cos(u), math.sin(u)
        if not _leg_rate_rows(lth, lsh, R, wd0, wd1, wd2, s0, s1, s2, kk, cha, chb, cu, spz, js, jj):
            return UNREACHABLE
        dha = jj[0, 0] * v[0] + jj[0, 1] * v[1] + jj[0, 2] * v[2] + jj[0, 3] * w[0] + jj[0, 4] * w[1] + jj[0, 5] * w[2]
        dhb = jj[1, 0] * v[0] + jj[1, 1] * v[1] + jj[1, 2] * v[2] + jj[1, 3] * w[0] + jj[1, 4] * w[1] + jj[1, 5] * w[2]
        dk = jj[2, 0] * v[0] + jj[2, 1] * v[1] + jj[2, 2] * v[2] + jj[2, 3] * w[0] + jj[2, 4] * w[1] + jj[2, 5] * w[2]
        angd[i, 0], angd[i, 1], angd[i, 2] = dha, dhb, dk
        ddha, ddhb, ddk = _leg_bias(lth, lsh, R, v, w, wd0, wd1, wd2, cha, sha, chb, shb, cu, su, spz, dha, dhb, dk)
        angb[i, 0], angb[i, 1], angb[i, 2] = ddha, ddhb, ddk
        _leg_points(lth, A, R, w, i, cha, sha, chb, shb, dha, dhb, ddha, ddhb, jj, J, bias)
        # actuation Jacobian rows (eqs. 27-28)
        for row in range(14):
            if _ACT_LEG[row] == i:
                for b in range(6):
                    Jtau[row, b] = jj[_ACT_JOINT[row], b]
    _tail_point(par[P_LT], r, q, qd, R, w, J, bias)
    Jtau[6, 6] = 1.0
    Jtau[7, 7] = 1.0
    return OK


@kernel_part
def _set_point_bias(bias, row, R, w0, w1, w2, r0, r1, r2, dx, dy, dz, ddx, ddy, ddz):
    """``bias[row]`` = w x (w x r) + 2 w x (R d) + R dd: the bias acceleration of a point at ``r`` (world
    axes, from the torso origin) that moves at ``d``, ``dd`` in the torso frame (eq. 31)."""
    c0, c1, c2 = _cross3(w0, w1, w2, r0, r1, r2)
    t0, t1, t2 = _cross3(w0, w1, w2, c0, c1, c2)
    e0 = R[0, 0] * dx + R[0, 1] * dy + R[0, 2] * dz
    e1 = R[1, 0] * dx + R[1, 1] * dy + R[1, 2] * dz
    e2 = R[2, 0] * dx + R[2, 1] * dy + R[2, 2] * dz
    d0, d1, d2 = _cross3(w0, w1, w2, e0, e1, e2)
    bias[row, 0] = t0 + 2.0 * d0 + R[0, 0] * ddx + R[0, 1] * ddy + R[0, 2] * ddz
    bias[row, 1] = t1 + 2.0 * d1 + R[1, 0] * ddx + R[1, 1] * ddy + R[1, 2] * ddz
    bias[row, 2] = t2 + 2.0 * d2 + R[2, 0] * ddx + R[2, 1] * ddy + R[2, 2] * ddz


@kernel_part
def _cross3(a0, a1, a2, b0, b1, b2):
    """a x b of two vectors given by their components."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@kernel_part
def _set_point_base(J, i, r0, r1, r2):
    """[I, -skew(rho), 0] (eqs. 20, 23, 26): v + omega x rho, for rho = (r0, r1, r2)."""
    J[i, 0, 0] = 1.0
    J[i, 1, 1] = 1.0
    J[i, 2, 2] = 1.0
    J[i, 0, 4], J[i, 0, 5] = r2, -r1
    J[i, 1, 3], J[i, 1, 5] = -r2, r0
    J[i, 2, 3], J[i, 2, 4] = r1, -r0


@kernel_part
def _leg_angles(lth, lsh, s0, s1, s2):
    """Joint angles of a leg reaching s_i (eqs. 6-9): ``(ok, ha, hb, k, cos ha, sin ha, s'_z)``, ``k`` the interior
    knee angle (eq. 6), ``ha`` by eq. 7 as ``atan2(-s_x, -s_z)``, ``hb`` by eq. 8's ``-asin`` branch; ``ok``
    False when the foot is out of reach."""
    n2 = s0 * s0 + s1 * s1 + s2 * s2
    ns = math.sqrt(n2)
    if not (abs(lth - lsh) < ns < lth + lsh):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    ck = -(n2 - lth * lth - lsh * lsh) / (2.0 * lth * lsh)
    kk = math.acos(ck)
    ha = math.atan2(-s0, -s2)
    cha, sha = math.cos(ha), math.sin(ha)
    spy = s1
    spz = sha * s0 + cha * s2
    if spz >= 0.0:
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    hs = 0.5 * (lth + lsh + ns)
    area = math.sqrt(max(hs * (hs - lth) * (hs - lsh) * (hs - ns), 0.0))
    hb = math.atan(spy / spz) - math.asin(min(2.0 * area / (ns * lth), 1.0))
    return True, ha, hb, kk, cha, sha, spz


@kernel_part
def _leg_rate_rows(lth, lsh, R, wd0, wd1, wd2, s0, s1, s2, kk, cha, chb, cu, spz, js, jj):
    """j_s (eq. 13: s-dot = [-R^T, R^T skew(d - p)] t_p) into ``js`` and the rows of [ha, hb, k]-dot per unit
    platform twist (eqs. 15, 16 and 18 re-derived) into ``jj``; False at a kinematic singularity."""
    sk = math.sin(kk)
    for a in range(3):
        for b in range(3):
            js[a, b] = -R[b, a]
        # R^T skew(wd): column b of skew(wd) = wd x e_b
        js[a, 3] = R[1, a] * wd2 - R[2, a] * wd1
        js[a, 4] = R[2, a] * wd0 - R[0, a] * wd2
        js[a, 5] = R[0, a] * wd1 - R[1, a] * wd0
    den_hb = lth * chb - lsh * cu
    if sk < 1e-9 or abs(spz) < 1e-9 or abs(den_hb) < 1e-9:
        return False
    ca2 = cha * cha / (s2 * s2) if abs(s2) > 1e-12 else 0.0
    for b in range(6):
        jk = (s0 * js[0, b] + s1 * js[1, b] + s2 * js[2, b]) / (lth * lsh * sk)          # eq. 15
        if abs(s2) > 1e-12:
            jha = ca2 * (s2 * js[0, b] - s0 * js[2, b])                                  # eq. 16
        else:
            jha = (s2 * js[0, b] - s0 * js[2, b]) / (s0 * s0)
        jhb = -(js[1, b] + lsh * cu * jk) / den_hb                                       # eq. 18 (re-derived)
        jj[0, b], jj[1, b], jj[2, b] = jha, jhb, jk
    return True


@kernel_part
def _leg_bias(lth, lsh, R, v, w, wd0, wd1, wd2, cha, sha, chb, shb, cu, su, spz, dha, dhb, dk):
    """(ha'', hb'', k'') at xi-dot = 0: the joint-acceleration bias from the derivative of eq. 12,
    s-ddot = R^T (w x (w x (d - p)) + 2 w x v), resolved in the ha frame (g = R_y(ha)^T s = [0, g_y, g_z]):
    R_y^T s'' = e_y x (e_y x g) ha'^2 + (e_y x g) ha'' + 2 ha' e_y x g' + g_hb hb'' + g_k k'' + g2."""
    c0, c1, c2 = _cross3(w[0], w[1], w[2], wd0, wd1, wd2)
    t0, t1, t2 = _cross3(w[0], w[1], w[2], c0, c1, c2)
    c0, c1, c2 = _cross3(w[0], w[1], w[2], v[0], v[1], v[2])
    t0 += 2.0 * c0
    t1 += 2.0 * c1
    t2 += 2.0 * c2
    sdd0 = R[0, 0] * t0 + R[1, 0] * t1 + R[2, 0] * t2
    sdd1 = R[0, 1] * t0 + R[1, 1] * t1 + R[2, 1] * t2
    sdd2 = R[0, 2] * t0 + R[1, 2] * t1 + R[2, 2] * t2
    gz = spz
    ddu = dhb - dk
    gdz = (lth * shb - lsh * su) * dhb + lsh * su * dk
    rx = cha * sdd0 - sha * sdd2
    ry = sdd1
    rz = sha * sdd0 + cha * sdd2
    ddha = (rx - 2.0 * dha * gdz) / gz
    by = ry - (lth * shb * dhb * dhb - lsh * su * ddu * ddu)
    bz = rz + gz * dha * dha - (lth * chb * dhb * dhb - lsh * cu * ddu * ddu)
    a11, a12 = -lth * chb + lsh * cu, -lsh * cu
    a21, a22 = lth * shb - lsh * su, lsh * su
    det = a11 * a22 - a12 * a21
    ddhb = (by * a22 - a12 * bz) / det
    ddk = (a11 * bz - a21 * by) / det
    return ddha, ddhb, ddk


@kernel_part
def _leg_points(lth, A, R, w, i, cha, sha, chb, shb, dha, dhb, ddha, ddhb, jj, J, bias):
    """Jacobians and bias accelerations of the hip H_i (eqs. 19-20, 29: rho = R a_i) and the knee K_i
    (eqs. 21-23, 30: b = R_y(ha) bb, bb = [0, -l_th sin hb, -l_th cos hb])."""
    w0, w1, w2 = w[0], w[1], w[2]
    r0 = R[0, 0] * A[i, 0] + R[0, 1] * A[i, 1] + R[0, 2] * A[i, 2]
    r1 = R[1, 0] * A[i, 0] + R[1, 1] * A[i, 1] + R[1, 2] * A[i, 2]
    r2 = R[2, 0] * A[i, 0] + R[2, 1] * A[i, 1] + R[2, 2] * A[i, 2]
    _set_point_base(J, i, r0, r1, r2)
    c0, c1, c2 = _cross3(w0, w1, w2, r0, r1, r2)
    bias[i, 0], bias[i, 1], bias[i, 2] = _cross3(w0, w1, w2, c0, c1, c2)
    bby, bbz = -lth * shb, -lth * chb
    bpx, bpy, bpz = sha * bbz, bby, cha * bbz          # b in P frame
    r0 = R[0, 0] * (A[i, 0] + bpx) + R[0, 1] * (A[i, 1] + bpy) + R[0, 2] * (A[i, 2] + bpz)
    r1 = R[1, 0] * (A[i, 0] + bpx) + R[1, 1] * (A[i, 1] + bpy) + R[1, 2] * (A[i, 2] + bpz)
    r2 = R[2, 0] * (A[i, 0] + bpx) + R[2, 1] * (A[i, 1] + bpy) + R[2, 2] * (A[i, 2] + bpz)
    _set_point_base(J, 4 + i, r0, r1, r2)
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
    _set_point_bias(bias, 4 + i, R, w0, w1, w2, r0, r1, r2, bdx, bdy, bdz, bddx, bddy, bddz)


@kernel_part
def _tail_point(lt, r, q, qd, R, w, J, bias):
    """Jacobian and bias acceleration of the tail mass N (eqs. 10, 24-26, 31)."""
    w0, w1, w2 = w[0], w[1], w[2]
    ta, tb = q[6], q[7]
    cta, sta, ctb, stb = math.cos(ta), math.sin(ta), math.cos(tb), math.sin(tb)
    tx, ty, tz = lt * stb, -lt * cta * ctb, -lt * sta * ctb
    r0 = R[0, 0] * (r[0] + tx) + R[0, 1] * (r[1] + ty) + R[0, 2] * (r[2] + tz)
    r1 = R[1, 0] * (r[0] + tx) + R[1, 1] * (r[1] + ty) + R[1, 2] * (r[2] + tz)
    r2 = R[2, 0] * (r[0] + tx) + R[2, 1] * (r[1] + ty) + R[2, 2] * (r[2] + tz)
    _set_point_base(J, 8, r0, r1, r2)
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
    _set_point_bias(bias, 8, R, w0, w1, w2, r0, r1, r2, tdx, tdy, tdz, t2x, t2y, t2z)


@njit(cache=True)
def _xid_from_qdd(E, edot, qdd, xid):
    for k in range(3):
        xid[k] = qdd[k]
        xid[3 + k] = E[k, 0] * qdd[3] + E[k, 1] * qdd[4] + E[k, 2] * qdd[5] + edot[k]
    xid[6], xid[7] = qdd[6], qdd[7]


@njit(cache=True)
def _joint_state(ang, angd, q_act, v_act, q, qd):
    """Actuator-space coordinates [q_a; q_p] (eqs. 27-28) from leg angles/rates and the tail."""
    for row in range(14):
        leg = _ACT_LEG[row]
        j = _ACT_JOINT[row]
        if leg < 0:
            q_act[row] = q[6 + j]
            v_act[row] = qd[6 + j]
        else:
            q_act[row] = ang[leg, j]
            v_act[row] = angd[leg, j]


@njit(cache=True)
def _joint_accelerations(Jtau, angb, E, edot, qdd, xid, out):
    """Actuator-space joint accelerations (14) from the second derivative of eq. 5 per leg:
    ``J_tau xi-dot`` (eqs. 27-28, ``xi-dot = T q-ddot + E-dot phi-dot``) plus the legs' joint accelerations at
    xi-dot = 0 (``angb`` of :func:`_kin` at the same (q, q-dot)); the tail rows are ta'', tb''."""
    _xid_from_qdd(E, edot, qdd, xid)
    for row in range(14):
        s = 0.0
        for b in range(8):
            s += Jtau[row, b] * xid[b]
        leg = _ACT_LEG[row]
        if leg >= 0:
            s += angb[leg, _ACT_JOINT[row]]
        out[row] = s


@njit(cache=True)
def _jacobi_svd(A, V, sv):
    """One-sided Jacobi SVD (Hestenes): rotates the columns of A (m x n, m >= n) in place until they are
    orthogonal, ``A_in V = A_out``; ``sv`` gets the column norms (the singular values, unsorted), ``V`` the
    right singular vectors. Allocation-free; relative accuracy near machine precision."""
    m, n = A.shape
    for a in range(n):
        for b in range(n):
            V[a, b] = 1.0 if a == b else 0.0
    for _ in range(60):
        rotated = False
        for p in range(n - 1):
            for k in range(p + 1, n):
                alpha, beta, gamma = 0.0, 0.0, 0.0
                for i in range(m):
                    alpha += A[i, p] * A[i, p]
                    beta += A[i, k] * A[i, k]
                    gamma += A[i, p] * A[i, k]
                if abs(gamma) <= 1e-15 * math.sqrt(alpha * beta) or gamma == 0.0:
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                t = math.copysign(1.0, zeta) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = c * t
                for i in range(m):
                    ap, ak = A[i, p], A[i, k]
                    A[i, p], A[i, k] = c * ap - s * ak, s * ap + c * ak
                for i in range(n):
                    vp, vk = V[i, p], V[i, k]
                    V[i, p], V[i, k] = c * vp - s * vk, s * vp + c * vk
        if not rotated:
            break
    for b in range(n):
        s = 0.0
        for i in range(m):
            s += A[i, b] * A[i, b]
        sv[b] = math.sqrt(s)


@njit(cache=True)
def _fk(par, A, D, q_act, q, fkw):
    """Torso pose from the 12 leg joint angles (feet fixed): d_i - p = R (a_i + s_i) for the four legs,
    R by the SVD solution of Wahba's problem, p by the mean; then the Euler angles of eq. 1.

    ``fkw`` (11, 3) is scratch. With ``H = sum (u_i - u) (d_i - d)^T = sum sigma_k l_k r_k^T`` the rotation is
    ``R = r_1 l_1^T + r_2 l_2^T + (r_1 x r_2)(l_1 x l_2)^T`` over the two largest singular values (the
    proper rotation of Kabsch's ``V diag(1, 1, det) U^T``; H has rank 2 here, the feet being coplanar)."""
    U, H, V, sv = fkw[0:4], fkw[4:7], fkw[7:10], fkw[10]
    lth, lsh = par[P_LTH], par[P_LSH]
    for row in range(14):
        leg = _ACT_LEG[row]
        if leg >= 0:
            U[leg, _ACT_JOINT[row]] = q_act[row]
    for i in range(4):
        ha, hb, u = U[i, 0], U[i, 1], U[i, 1] - U[i, 2]
        gz = -lth * math.cos(hb) + lsh * math.cos(u)          # eq. 5: s_i' = b_i + c_i
        U[i, 0] = A[i, 0] + math.sin(ha) * gz
        U[i, 1] = A[i, 1] - lth * math.sin(hb) + lsh * math.sin(u)
        U[i, 2] = A[i, 2] + math.cos(ha) * gz
    for k in range(3):
        ub = 0.25 * (U[0, k] + U[1, k] + U[2, k] + U[3, k])
        db = 0.25 * (D[0, k] + D[1, k] + D[2, k] + D[3, k])
        sv[k] = ub
        q[k] = db
    for a in range(3):
        for b in range(3):
            s = 0.0
            for i in range(4):
                s += (U[i, a] - sv[a]) * (D[i, b] - q[b])
            H[a, b] = s
    # q[:3] holds the feet's mean, sv the legs' mean until the pose is known
    ub0, ub1, ub2 = sv[0], sv[1], sv[2]
    _jacobi_svd(H, V, sv)
    k1 = 0 if sv[0] >= sv[1] and sv[0] >= sv[2] else (1 if sv[1] >= sv[2] else 2)
    k2 = (k1 + 1) % 3
    k3 = (k1 + 2) % 3
    if sv[k3] > sv[k2]:
        k2 = k3
    l1 = (H[0, k1] / sv[k1], H[1, k1] / sv[k1], H[2, k1] / sv[k1])
    l2 = (H[0, k2] / sv[k2], H[1, k2] / sv[k2], H[2, k2] / sv[k2])
    l3 = _cross3(l1[0], l1[1], l1[2], l2[0], l2[1], l2[2])
    r3 = _cross3(V[0, k1], V[1, k1], V[2, k1], V[0, k2], V[1, k2], V[2, k2])
    for a in range(3):
        for b in range(3):
            H[a, b] = V[a, k1] * l1[b] + V[a, k2] * l2[b] + r3[a] * l3[b]
    for k in range(3):
        q[k] -= H[k, 0] * ub0 + H[k, 1] * ub1 + H[k, 2] * ub2
    q[4] = -math.asin(max(-1.0, min(1.0, H[2, 0])))
    q[3] = math.atan2(H[2, 1], H[2, 2])
    q[5] = math.atan2(H[1, 0], H[0, 0])
    q[6] = q_act[6]
    q[7] = q_act[7]
