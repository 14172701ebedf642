"""The contact-aided invariant EKF (Hartley, Ghaffari, Eustice & Grizzle, "Contact-aided invariant extended
Kalman filtering for robot state estimation", IJRR 39(4), 2020), compiled and allocation-free.

State: X in SE_{2+K}(3), the IMU's orientation R, velocity v and position p in the world and the K foot
positions d_k (eq. 8), with the IMU biases theta = [b_g; b_a] beside it (section 6: the "imperfect IMU"
filter; the biases are estimated, not assumed zero). K is the number of feet, fixed: a foot out of contact
keeps its slot with zero covariance rows and columns, so nothing changes size and nothing allocates.

Error: right-invariant, X = Exp(xi) X_hat (eq. 11 with the convention of the authors' code: H below is the
negative of eq. 29's), bias error zeta = theta - theta_hat. Covariance P of [xi_R, xi_v, xi_p, xi_d1..K,
zeta_g, zeta_a] (dimension 15 + 3K).

Propagation (eqs. 6, 7, 16-19, section 6 eq. 45), with the measured specific force f and angular rate w held
over the step dt:

    R+ = R Exp((w - b_g) dt),  v+ = v + (R (f - b_a) + g) dt,  p+ = p + v dt + (R (f - b_a) + g) dt^2 / 2
    P+ = Phi P Phi^T + Ad_X Q Ad_X^T dt

Phi = exp(A dt) of the linearised error dynamics A (eq. 45: [g]x couples xi_R to xi_v, xi_v drives xi_p, and
-Ad_X feeds the bias errors in); A is nilpotent (A^4 = 0), so Phi = I + A dt + A^2 dt^2/2 + A^3 dt^3/6 is exact.
Its off-diagonal 3 x 3 blocks are applied as sparse row and column operations (:func:`_apply_phi`). Q holds the
gyroscope, accelerometer, contact-velocity and bias random-walk densities (isotropic); with isotropic densities
Ad_X Q Ad_X^T has a closed form (:func:`_add_process_noise`).

Correction (section 5.2, eqs. 26-30): for a foot in contact the leg kinematics h(alpha) (the foot in the IMU
frame) give Y = X^-1 b with b = [0, 0, 1, -1 at d_k]; the innovation z = R h + p - d_k, H = [0, 0, -I, I at
d_k, 0], noise N = R Cov[h] R^T (eq. 29), one stacked update over the feet in contact
(:func:`~loops.estimation.linalg.sparse_update`), then X+ = Exp(delta_X) X, theta+ = theta + delta_theta.

Contacts (section 5.3): a foot that touches down is added with d_k = p + R h, its error that of p (xi_d = xi_p
exactly in the right-invariant error) plus N: the covariance rows and columns of p copied into its slot
(eq. 33). A foot that lifts off is marginalised: its rows and columns of P are deleted (zeroed here; eq. 34).

Slip: a foot in contact that moves is not used this cycle and is re-added at its measured position, as if it
had just touched down, so a slipping foot, or one flagged in contact before it lands, never pulls the base
along. It moves when its own normalised innovation z_k^T S_kk^-1 z_k exceeds the gate (chi-square, 3 degrees
of freedom, ``slip_probability``), or when its velocity over the ground, v + R (w x h + dh/dt) from the
estimate and the joint velocities (the leg odometry of Bloesch et al., "State estimation for legged robots:
consistent fusion of leg kinematics and IMU", RSS 2012, section IV-B), is faster than ``slip_speed`` or past
the same gate against its covariance (:func:`~loops.estimation.kinematics.foot_moves`). A foot dragged along
the ground at a light load passes the first test for tens of milliseconds, never the second; and the end of
such a slide, slower than ``slip_speed``, taken for a foot at rest, pushed the filter along its unobservable
tilt-and-accelerometer-bias direction: 0.8 deg of pitch after 60 s of the trot with an ideal IMU, 0.007 deg
with the velocity gate.
"""
from __future__ import annotations

from numba import njit

from .common import (BAD_STATE, D_ACCEPTED, D_CONTACT, D_DOF, D_IN_CONTACT, D_NIS, D_REJECTED, D_SLIPS, D_STATUS,
                     I_W, OK, UPDATE_FAILED, check_inputs, contact_flags, state_finite)
from .kinematics import CF_MONITOR, CF_NOISE, F_H, foot_covariance, foot_moves, leg_kinematics, write_estimate
from .lie import exp_so3, left_jacobian, orthonormalise, rot_apply, rot_mul, rot_read, rot_write
from .linalg import inverse_quadratic3, sparse_update
from .monitor import monitor_add

# State vector x: R (row-major), v, p, b_g, b_a, then the K feet d_k, then the K contact flags of the filter
X_R, X_V, X_P, X_BG, X_BA, X_D = 0, 9, 12, 15, 18, 21
# Covariance blocks
P_R, P_V, P_P, P_D = 0, 3, 6, 9
# Parameters par: the noise densities squared (continuous time), gravity, the slip gate
(PAR_GYRO, PAR_ACCEL, PAR_GYRO_BIAS, PAR_ACCEL_BIAS, PAR_FOOT, PAR_GX, PAR_GY, PAR_GZ, PAR_GATE, PAR_SLIP_SPEED,
 PAR_JOINT_VELOCITY, PAR_RATE_NOISE) = range(12)
PAR_SIZE = 12


def state_size(n_feet: int) -> int:
    return X_D + 4 * n_feet


def cov_size(n_feet: int) -> int:
    return 15 + 3 * n_feet


def work_shape(n_feet: int, nq: int, nv: int) -> tuple:
    """Rows: Phi P (dim), the Phi blocks (9 + K), the update's scratch (2 m_max), H rows, N, z, delta, the feet's
    kinematics (K), the Jacobian (6), the neutral-base configuration (1)."""
    dim, m = cov_size(n_feet), 3 * n_feet
    return _rows(dim, n_feet)[-1] + 1, max(dim + m + 1, 15, nq, nv)


@njit(cache=True, inline="always")
def _rows(dim, n_feet):
    """First rows of work's parts: blocks, update scratch, feet, Jacobian, configuration."""
    blocks = dim
    update = blocks + 9 + n_feet
    feet = update + 4 * 3 * n_feet + 2
    return blocks, update, feet, feet + n_feet, feet + n_feet + 6


@njit(cache=True, inline="always")
def _bias_blocks(n_feet):
    return 9 + 3 * n_feet, 12 + 3 * n_feet


@njit(cache=True, inline="always")
def _set_block(blocks, k, row, col, m):
    blocks[k, 0], blocks[k, 1] = row, col
    for n in range(9):
        blocks[k, 2 + n] = m[n]


@njit(cache=True, inline="always")
def _skew_times(x, y, z, r):
    """[x]x R for a row-major R."""
    out = (y * r[6] - z * r[3], y * r[7] - z * r[4], y * r[8] - z * r[5],
           z * r[0] - x * r[6], z * r[1] - x * r[7], z * r[2] - x * r[8],
           x * r[3] - y * r[0], x * r[4] - y * r[1], x * r[5] - y * r[2])
    return out


@njit(cache=True, inline="always")
def _lin(a, sa, b, sb):
    return (a[0] * sa + b[0] * sb, a[1] * sa + b[1] * sb, a[2] * sa + b[2] * sb, a[3] * sa + b[3] * sb,
            a[4] * sa + b[4] * sb, a[5] * sa + b[5] * sb, a[6] * sa + b[6] * sb, a[7] * sa + b[7] * sb,
            a[8] * sa + b[8] * sb)


@njit(cache=True)
def _phi_blocks(x, par, n_feet, dt, blocks):
    """The off-diagonal blocks of Phi - I (module docstring) at the state before the step; returns their count."""
    r = rot_read(x, X_R)
    gx, gy, gz = par[PAR_GX], par[PAR_GY], par[PAR_GZ]
    g = (0.0, -gz, gy, gz, 0.0, -gx, -gy, gx, 0.0)
    eye = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    gr = rot_mul(g, r)
    vr = _skew_times(x[X_V], x[X_V + 1], x[X_V + 2], r)
    pr = _skew_times(x[X_P], x[X_P + 1], x[X_P + 2], r)
    bg, ba = _bias_blocks(n_feet)
    h2, h3 = 0.5 * dt * dt, dt * dt * dt / 6.0
    _set_block(blocks, 0, P_V, P_R, _lin(g, dt, eye, 0.0))
    _set_block(blocks, 1, P_P, P_R, _lin(g, h2, eye, 0.0))
    _set_block(blocks, 2, P_P, P_V, _lin(eye, dt, eye, 0.0))
    _set_block(blocks, 3, P_R, bg, _lin(r, -dt, eye, 0.0))
    _set_block(blocks, 4, P_V, bg, _lin(vr, -dt, gr, -h2))
    _set_block(blocks, 5, P_P, bg, _lin(_lin(pr, -dt, vr, -h2), 1.0, gr, -h3))
    _set_block(blocks, 6, P_V, ba, _lin(r, -dt, eye, 0.0))
    _set_block(blocks, 7, P_P, ba, _lin(r, -h2, eye, 0.0))
    n = 8
    for k in range(n_feet):
        if x[X_D + 3 * n_feet + k] > 0.0:
            o = X_D + 3 * k
            _set_block(blocks, n, P_D + 3 * k, bg, _lin(_skew_times(x[o], x[o + 1], x[o + 2], r), -dt, eye, 0.0))
            n += 1
    return n


@njit(cache=True)
def _apply_phi(P, T, blocks, n_blocks):
    """P <- Phi P Phi^T with Phi = I + sum of ``blocks`` (row, column, 3 x 3); T (dim, dim) scratch."""
    dim = P.shape[0]
    for i in range(dim):
        for j in range(dim):
            T[i, j] = P[i, j]
    for b in range(n_blocks):   # T = Phi P: row block i gets M P[j block, :]
        i, j = int(blocks[b, 0]), int(blocks[b, 1])
        for r in range(3):
            m0, m1, m2 = blocks[b, 2 + 3 * r], blocks[b, 3 + 3 * r], blocks[b, 4 + 3 * r]
            for c in range(dim):
                T[i + r, c] += m0 * P[j, c] + m1 * P[j + 1, c] + m2 * P[j + 2, c]
    for i in range(dim):
        for j in range(dim):
            P[i, j] = T[i, j]
    for b in range(n_blocks):   # P = T Phi^T: column block i gets T[:, j block] M^T
        i, j = int(blocks[b, 0]), int(blocks[b, 1])
        for r in range(3):
            m0, m1, m2 = blocks[b, 2 + 3 * r], blocks[b, 3 + 3 * r], blocks[b, 4 + 3 * r]
            for c in range(dim):
                P[c, i + r] += T[c, j] * m0 + T[c, j + 1] * m1 + T[c, j + 2] * m2
    for i in range(dim):
        for j in range(i):
            e = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = P[j, i] = e


@njit(cache=True)
def _add_process_noise(x, P, par, n_feet, dt):
    """P += Ad_X Q Ad_X^T dt. The gyroscope noise enters every block through the column [I; [v]x; [p]x; [d_k]x] R
    of Ad_X, whose Gram matrix has the blocks (a.b) I - b a^T for a, b in {v, p, d_k} and -[b]x in the
    rotation's row; the accelerometer noise enters v, the contact noise its foot, the bias walks their biases."""
    qg, qa, qf = par[PAR_GYRO] * dt, par[PAR_ACCEL] * dt, par[PAR_FOOT] * dt
    bg, ba = _bias_blocks(n_feet)
    n_points = 2 + n_feet
    for a in range(-1, n_points):   # -1: the rotation's own row block
        if a >= 2 and x[X_D + 3 * n_feet + a - 2] <= 0.0:
            continue
        ra = P_R if a < 0 else (P_V if a == 0 else (P_P if a == 1 else P_D + 3 * (a - 2)))
        oa = 0 if a < 0 else (X_V if a == 0 else (X_P if a == 1 else X_D + 3 * (a - 2)))
        for b in range(-1, n_points):
            if b >= 2 and x[X_D + 3 * n_feet + b - 2] <= 0.0:
                continue
            rb = P_R if b < 0 else (P_V if b == 0 else (P_P if b == 1 else P_D + 3 * (b - 2)))
            ob = 0 if b < 0 else (X_V if b == 0 else (X_P if b == 1 else X_D + 3 * (b - 2)))
            if a < 0 and b < 0:
                for k in range(3):
                    P[ra + k, rb + k] += qg
            elif a < 0:   # I ([b]x)^T = -[b]x
                bx, by, bz = x[ob], x[ob + 1], x[ob + 2]
                P[ra, rb + 1] += qg * bz
                P[ra, rb + 2] -= qg * by
                P[ra + 1, rb] -= qg * bz
                P[ra + 1, rb + 2] += qg * bx
                P[ra + 2, rb] += qg * by
                P[ra + 2, rb + 1] -= qg * bx
            elif b < 0:   # [a]x
                ax, ay, az = x[oa], x[oa + 1], x[oa + 2]
                P[ra, rb + 1] -= qg * az
                P[ra, rb + 2] += qg * ay
                P[ra + 1, rb] += qg * az
                P[ra + 1, rb + 2] -= qg * ax
                P[ra + 2, rb] -= qg * ay
                P[ra + 2, rb + 1] += qg * ax
            else:   # [a]x [b]x^T = (a.b) I - b a^T
                dot = x[oa] * x[ob] + x[oa + 1] * x[ob + 1] + x[oa + 2] * x[ob + 2]
                for r in range(3):
                    for c in range(3):
                        P[ra + r, rb + c] += qg * ((dot if r == c else 0.0) - x[ob + r] * x[oa + c])
    for k in range(3):
        P[P_V + k, P_V + k] += qa
        P[bg + k, bg + k] += par[PAR_GYRO_BIAS] * dt
        P[ba + k, ba + k] += par[PAR_ACCEL_BIAS] * dt
    for f in range(n_feet):
        if x[X_D + 3 * n_feet + f] > 0.0:
            for k in range(3):
                P[P_D + 3 * f + k, P_D + 3 * f + k] += qf


@njit(cache=True)
def propagate(x, P, imu, dt, par, n_feet, work):
    """One IMU step of length ``dt`` (module docstring); ``imu`` = [specific force (3), angular rate (3)]."""
    dim = P.shape[0]
    b0 = _rows(dim, n_feet)[0]
    blocks = work[b0:b0 + 9 + n_feet]
    n_blocks = _phi_blocks(x, par, n_feet, dt, blocks)
    _apply_phi(P, work[:dim, :dim], blocks, n_blocks)
    _add_process_noise(x, P, par, n_feet, dt)
    r = rot_read(x, X_R)
    ax, ay, az = rot_apply(r, imu[0] - x[X_BA], imu[1] - x[X_BA + 1], imu[2] - x[X_BA + 2])
    ax, ay, az = ax + par[PAR_GX], ay + par[PAR_GY], az + par[PAR_GZ]
    h2 = 0.5 * dt * dt
    x[X_P] += x[X_V] * dt + ax * h2
    x[X_P + 1] += x[X_V + 1] * dt + ay * h2
    x[X_P + 2] += x[X_V + 2] * dt + az * h2
    x[X_V] += ax * dt
    x[X_V + 1] += ay * dt
    x[X_V + 2] += az * dt
    w = exp_so3((imu[3] - x[X_BG]) * dt, (imu[4] - x[X_BG + 1]) * dt, (imu[5] - x[X_BG + 2]) * dt)
    rot_write(x, X_R, orthonormalise(rot_mul(r, w)))


@njit(cache=True)
def add_foot(x, P, feet, k, n_feet, cfg_f):
    """Foot k touches down: d_k = p + R h_k, its covariance that of p plus R Cov[h_k] R^T (eq. 33)."""
    r = rot_read(x, X_R)
    o, d = X_D + 3 * k, P_D + 3 * k
    hx, hy, hz = rot_apply(r, feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2])
    x[o], x[o + 1], x[o + 2] = x[X_P] + hx, x[X_P + 1] + hy, x[X_P + 2] + hz
    dim = P.shape[0]
    for j in range(dim):
        if j < d or j >= d + 3:
            for c in range(3):
                P[d + c, j] = P[P_P + c, j]
                P[j, d + c] = P[j, P_P + c]
    n = foot_covariance(feet, k, r, cfg_f[CF_NOISE], cfg_f[CF_NOISE + 1])
    for a in range(3):
        for b in range(3):
            P[d + a, d + b] = P[P_P + a, P_P + b] + n[3 * a + b]
    x[X_D + 3 * n_feet + k] = 1.0


@njit(cache=True)
def drop_foot(x, P, k, n_feet):
    """Foot k lifts off: its rows and columns of P are marginalised out (eq. 34; zeroed in the fixed slot)."""
    d = P_D + 3 * k
    for j in range(P.shape[0]):
        for c in range(3):
            P[d + c, j] = 0.0
            P[j, d + c] = 0.0
    x[X_D + 3 * n_feet + k] = 0.0


@njit(cache=True, inline="always")
def _foot_innovation(x, feet, k, r):
    hx, hy, hz = rot_apply(r, feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2])
    o = X_D + 3 * k
    return hx + x[X_P] - x[o], hy + x[X_P + 1] - x[o + 1], hz + x[X_P + 2] - x[o + 2]


@njit(cache=True, inline="always")
def _block(P, o):
    """The 3 x 3 diagonal block of P at o (row-major 9-tuple)."""
    return (P[o, o], P[o, o + 1], P[o, o + 2], P[o + 1, o], P[o + 1, o + 1], P[o + 1, o + 2], P[o + 2, o],
            P[o + 2, o + 1], P[o + 2, o + 2])


@njit(cache=True, inline="always")
def _s_entry(P, d, a, b, n):
    return P[d + a, d + b] - P[d + a, P_P + b] - P[P_P + a, d + b] + P[P_P + a, P_P + b] + n[3 * a + b]


@njit(cache=True)
def _foot_nis(P, k, zx, zy, zz, n):
    """z^T S_kk^-1 z for foot k alone: S_kk = P_dd - P_dp - P_pd + P_pp + N."""
    d = P_D + 3 * k
    s = (_s_entry(P, d, 0, 0, n), _s_entry(P, d, 0, 1, n), _s_entry(P, d, 0, 2, n),
         _s_entry(P, d, 1, 0, n), _s_entry(P, d, 1, 1, n), _s_entry(P, d, 1, 2, n),
         _s_entry(P, d, 2, 0, n), _s_entry(P, d, 2, 1, n), _s_entry(P, d, 2, 2, n))
    return inverse_quadratic3(s, zx, zy, zz)


@njit(cache=True)
def correct(x, P, feet, contact, imu, par, cfg_f, n_feet, work, st):
    """Contacts added, dropped and gated, then one stacked leg-kinematics update (module docstring). ``contact``
    (K,) 1.0 for a foot in contact; ``imu`` the sample (its angular rate for the feet's speeds). Fills ``st``
    (loops.estimation.common's D_*); returns False if the update failed (S not positive definite)."""
    dim = P.shape[0]
    m_max = 3 * n_feet
    base = _rows(dim, n_feet)[1]
    mw = work[base:base + 2 * m_max]
    hrows = work[base + 2 * m_max:base + 3 * m_max]
    noise = work[base + 3 * m_max:base + 4 * m_max]
    z = work[base + 4 * m_max]
    delta = work[base + 4 * m_max + 1]
    r = rot_read(x, X_R)
    w = (imu[I_W] - x[X_BG], imu[I_W + 1] - x[X_BG + 1], imu[I_W + 2] - x[X_BG + 2])
    for k in range(m_max):
        for c in range(m_max):
            noise[k, c] = 0.0
    flags = X_D + 3 * n_feet
    in_contact = accepted = rejected = 0
    for k in range(n_feet):
        if contact[k] <= 0.0:
            if x[flags + k] > 0.0:
                drop_foot(x, P, k, n_feet)
            continue
        in_contact += 1
        if x[flags + k] <= 0.0:
            continue   # added below, after the update: it carries no information this cycle
        zx, zy, zz = _foot_innovation(x, feet, k, r)
        n = foot_covariance(feet, k, r, cfg_f[CF_NOISE], cfg_f[CF_NOISE + 1])
        if (foot_moves(feet, k, r, x[X_V:X_V + 3], w, _block(P, P_V), par[PAR_JOINT_VELOCITY],
                       par[PAR_RATE_NOISE], par[PAR_SLIP_SPEED], par[PAR_GATE])
                or _foot_nis(P, k, zx, zy, zz, n) > par[PAR_GATE]):
            drop_foot(x, P, k, n_feet)   # re-added below at its measured position
            rejected += 1
            continue
        m = 3 * accepted
        for c in range(3):
            hrows[m + c, 0], hrows[m + c, 1] = P_D + 3 * k + c, 1.0
            hrows[m + c, 2], hrows[m + c, 3] = P_P + c, -1.0
            for e in range(3):
                noise[m + c, m + e] = n[3 * c + e]
        z[m], z[m + 1], z[m + 2] = zx, zy, zz
        accepted += 1
    st[D_IN_CONTACT], st[D_ACCEPTED], st[D_REJECTED] = in_contact, accepted, rejected
    st[D_SLIPS] += rejected
    st[D_NIS] = st[D_DOF] = 0.0
    ok = True
    if accepted > 0:
        nis = sparse_update(P, hrows, noise, z, 3 * accepted, mw, delta)
        if nis < 0.0:
            ok = False
        else:
            st[D_NIS], st[D_DOF] = nis, 3.0 * accepted
            _apply_correction(x, delta, n_feet)
    for k in range(n_feet):
        if contact[k] > 0.0 and x[flags + k] <= 0.0:
            add_foot(x, P, feet, k, n_feet, cfg_f)
    return ok


@njit(cache=True)
def _apply_correction(x, delta, n_feet):
    """X <- Exp(delta_X) X (left multiplication: right-invariant), theta <- theta + delta_theta."""
    dr = exp_so3(delta[P_R], delta[P_R + 1], delta[P_R + 2])
    jl = left_jacobian(delta[P_R], delta[P_R + 1], delta[P_R + 2])
    rot_write(x, X_R, orthonormalise(rot_mul(dr, rot_read(x, X_R))))
    for col in range(2 + n_feet):
        o = X_V if col == 0 else (X_P if col == 1 else X_D + 3 * (col - 2))
        e = P_V if col == 0 else (P_P if col == 1 else P_D + 3 * (col - 2))
        a0, a1, a2 = rot_apply(dr, x[o], x[o + 1], x[o + 2])
        b0, b1, b2 = rot_apply(jl, delta[e], delta[e + 1], delta[e + 2])
        x[o], x[o + 1], x[o + 2] = a0 + b0, a1 + b1, a2 + b2
    bg, ba = _bias_blocks(n_feet)
    for k in range(3):
        x[X_BG + k] += delta[bg + k]
        x[X_BA + k] += delta[ba + k]


@njit(cache=True)
def ekf_step(mi, mf, ws, q, v, dt, imu, contact, cfg_i, cfg_f, par, x, P, work, diag):
    """One cycle: the leg kinematics at ``q``, propagation over ``dt`` with the IMU sample ``imu``, contacts and
    the leg-kinematics update, the divergence check, then the base coordinates of ``q`` and ``v`` written from
    the estimate. Returns the status (loops.estimation.common); on a bad input nothing changes."""
    n_feet = contact.shape[0]
    dim = P.shape[0]
    status = check_inputs(mi, dt, imu, contact, q, v, cfg_i)
    if status != OK:
        diag[D_STATUS] = status
        return status
    contact_flags(contact, cfg_f, diag)
    _, _, f0, j0, q0 = _rows(dim, n_feet)
    feet = work[f0:f0 + n_feet]
    leg_kinematics(mi, mf, ws, q, v, work[q0, :q.shape[0]], cfg_i, cfg_f, work[j0:j0 + 6, :v.shape[0]], feet)
    if dt > 0.0:
        propagate(x, P, imu, dt, par, n_feet, work)
    if not correct(x, P, feet, diag[D_CONTACT:D_CONTACT + n_feet], imu, par, cfg_f, n_feet, work, diag):
        status = UPDATE_FAILED
    elif not state_finite(x, P):
        status = BAD_STATE
    else:
        status = monitor_add(diag[D_CONTACT + n_feet:], diag[D_NIS], diag[D_DOF], diag[D_IN_CONTACT],
                             diag[D_ACCEPTED], cfg_f[CF_MONITOR], cfg_f[CF_MONITOR + 1])
    diag[D_STATUS] = status
    w = (imu[I_W] - x[X_BG], imu[I_W + 1] - x[X_BG + 1], imu[I_W + 2] - x[X_BG + 2])
    write_estimate(cfg_i, cfg_f, rot_read(x, X_R), x[X_P:X_P + 3], x[X_V:X_V + 3], w, q, v)
    return status
