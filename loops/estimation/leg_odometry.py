"""The baseline estimator ``leg_odometry_kf``: orientation from the IMU alone, then a linear Kalman filter on
leg odometry, as the MIT Cheetah software does (Bledt, Powell, Katz, Di Carlo, Wensing & Kim, "MIT Cheetah 3:
Design and control of a robust, dynamic quadruped robot", IROS 2018, section V-B; its
``PositionVelocityEstimator``).

Orientation: the device's own when it gives one (a finite quaternion in the reading, ``device_orientation``),
else the explicit complementary filter on SO(3) of Mahony, Hamel & Pflimlin ("Nonlinear complementary filters
on the special orthogonal group", IEEE TAC 53(5), 2008, eq. 32) with gyroscope-bias estimate b:

    R <- R Exp((w - b) dt),   e = u x (R^T e_z),   R <- R Exp(k_P e dt),   b <- b - k_I e dt,

k_P = 1 / ``tilt_time_constant``, k_I = k_P / ``gyro_bias_time_constant``, u the measured up direction. The
specific force f = R^T (a - g) is gravity only at rest: a trotting trunk sways sideways by tenths of a g, which
the filter would take for a tilt of a degree or two (the trot of tests/test_estimation_filters.py). So u is
the specific force less the acceleration the leg odometry measures, u = (f - R^T a_hat) / |g| with a_hat the
Kalman filter's velocity change over the step (velocity aiding, Vasconcelos, Cardeira, Silvestre & Oliveira,
"Discrete-time complementary filters for attitude and position estimation", IEEE TCST 19(1), 2011), and it
is not normalised (a mean of normalised vectors is biased where the vertical and horizontal accelerations are
correlated, as at a touch-down). Yaw is the gyroscope's integral.

Kalman filter on x = [p, v, d_1..K] (the IMU's position and velocity and the feet, world frame), linear
because R is taken as known: prediction p += v dt + a dt^2/2, v += a dt with a = R f + g; process noise
``velocity_process_density`` on v, ``foot_velocity_density`` on a foot in contact and ``swing_foot_density``
on a foot in the air (the Cheetah's inflated noise of a foot it does not trust). Measurements: every foot's
position relative to the IMU, d_k - p = R h_k, and for each foot in contact the IMU's velocity from the leg,
v = -R (w x h_k + dh_k/dt) (its noise: the joint velocities' through J and the gyroscope's sample noise
times |h_k|), both through the shared sparse update (:mod:`loops.estimation.linalg`). A foot in contact that
moves (faster than ``slip_speed`` over the ground, v + R (w x h + dh/dt) with the filter's v, or with its
velocity measurement's own normalised innovation past the chi-square gate of ``slip_probability``) gives no
velocity measurement and gets the swing noise, as a foot in the air.

:attr:`~loops.estimation.base.Estimator.covariance` is the filter's, over [p, v, d_1..K] (m, m/s, m); the
orientation has none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.stats import chi2

from rtctl.options import setting
from rtctl.rt.warmup import ready_kernel

from .base import Estimator
from .common import (BAD_STATE, D_ACCEPTED, D_CONTACT, D_DOF, D_IN_CONTACT, D_NIS, D_REJECTED, D_SLIPS, D_STATUS,
                     I_F, I_QUAT, I_W, OK, UPDATE_FAILED, check_inputs, contact_flags, state_finite)
from .kinematics import (CF_MONITOR, CF_NOISE, F_H, F_HDOT, foot_covariance, foot_moves, leg_kinematics,
                         write_estimate)
from .lie import (cross3, exp_so3, orthonormalise, quaternion_to_matrix, rot_apply, rot_apply_t, rot_mul, rot_read,
                  rot_write, tilt_from_gravity)
from .linalg import sparse_update
from .monitor import monitor_add

# Orientation state o: R (9), gyroscope bias b (3), the filter's velocity at the last step (3), 1.0 once the
# feet are placed
O_R, O_B, O_V, O_PLACED, O_SIZE = 0, 9, 12, 15, 16
# Filter state x: p, v, d_k
K_P, K_V, K_D = 0, 3, 6
# Parameters
(PAR_KP, PAR_KI, PAR_DEVICE, PAR_Q_V, PAR_Q_FOOT, PAR_Q_SWING, PAR_JOINT_VELOCITY, PAR_RATE_NOISE,
 PAR_SLIP_SPEED, PAR_GATE, PAR_GX, PAR_GY, PAR_GZ) = range(13)
PAR_SIZE = 13


def work_shape(n_feet: int, nq: int, nv: int) -> tuple:
    """Rows: the update's scratch (2 m_max), H rows, N, z, delta, the feet (K), Jacobian (6), configuration."""
    dim, m = 6 + 3 * n_feet, 6 * n_feet
    return 5 * m + 2 + n_feet + 7, max(dim + m + 1, 15, nq, nv)


@njit(cache=True, inline="always")
def _device(par, imu):
    """The device's orientation is used: allowed and given."""
    return par[PAR_DEVICE] > 0.0 and math.isfinite(imu[I_QUAT]) and math.isfinite(imu[I_QUAT + 3])


@njit(cache=True)
def orientation_predict(o, imu, dt, par):
    """R over one step: the device's orientation, else the bias-corrected gyroscope's."""
    if _device(par, imu):
        rot_write(o, O_R, quaternion_to_matrix(imu[I_QUAT], imu[I_QUAT + 1], imu[I_QUAT + 2], imu[I_QUAT + 3]))
        return
    w = exp_so3((imu[I_W] - o[O_B]) * dt, (imu[I_W + 1] - o[O_B + 1]) * dt, (imu[I_W + 2] - o[O_B + 2]) * dt)
    rot_write(o, O_R, orthonormalise(rot_mul(rot_read(o, O_R), w)))


@njit(cache=True)
def orientation_correct(o, x, imu, dt, par):
    """The complementary filter's correction towards the up direction the specific force less the leg
    odometry's acceleration shows (module docstring); then remembers the filter's velocity."""
    if not _device(par, imu):
        r = rot_read(o, O_R)
        gx, gy, gz = par[PAR_GX], par[PAR_GY], par[PAR_GZ]
        g = math.sqrt(gx * gx + gy * gy + gz * gz)
        ax, ay, az = rot_apply_t(r, (x[K_V] - o[O_V]) / dt, (x[K_V + 1] - o[O_V + 1]) / dt,
                                 (x[K_V + 2] - o[O_V + 2]) / dt)
        ux, uy, uz = rot_apply_t(r, -gx / g, -gy / g, -gz / g)
        ex, ey, ez = cross3((imu[I_F] - ax) / g, (imu[I_F + 1] - ay) / g, (imu[I_F + 2] - az) / g, ux, uy, uz)
        kp, ki = par[PAR_KP], par[PAR_KI]
        rot_write(o, O_R, orthonormalise(rot_mul(r, exp_so3(kp * ex * dt, kp * ey * dt, kp * ez * dt))))
        o[O_B] -= ki * ex * dt
        o[O_B + 1] -= ki * ey * dt
        o[O_B + 2] -= ki * ez * dt
    o[O_V], o[O_V + 1], o[O_V + 2] = x[K_V], x[K_V + 1], x[K_V + 2]


@njit(cache=True)
def predict(x, P, o, imu, dt, par, flags, n_feet):
    """The linear prediction and its process noise (module docstring); ``flags`` each foot's trust (1.0: a foot
    in contact, not slipping)."""
    r = rot_read(o, O_R)
    ax, ay, az = rot_apply(r, imu[I_F], imu[I_F + 1], imu[I_F + 2])
    a = (ax + par[PAR_GX], ay + par[PAR_GY], az + par[PAR_GZ])
    dim = P.shape[0]
    for k in range(3):
        x[K_P + k] += x[K_V + k] * dt + 0.5 * a[k] * dt * dt
        x[K_V + k] += a[k] * dt
    # P <- F P F^T with F = [[I, dt I, 0], [0, I, 0], [0, 0, I]]: row block p += dt row block v, then columns
    for k in range(3):
        for c in range(dim):
            P[K_P + k, c] += dt * P[K_V + k, c]
    for k in range(3):
        for c in range(dim):
            P[c, K_P + k] += dt * P[c, K_V + k]
    for k in range(3):
        P[K_V + k, K_V + k] += par[PAR_Q_V] * dt
        for f in range(n_feet):
            q = par[PAR_Q_FOOT] if flags[f] > 0.0 else par[PAR_Q_SWING]
            P[K_D + 3 * f + k, K_D + 3 * f + k] += q * dt


@njit(cache=True)
def _foot_velocity(o, feet, k, imu):
    """R (w x h_k + dh_k/dt): the foot's velocity relative to the IMU, world axes (w bias-corrected)."""
    r = rot_read(o, O_R)
    wx, wy, wz = imu[I_W] - o[O_B], imu[I_W + 1] - o[O_B + 1], imu[I_W + 2] - o[O_B + 2]
    cx, cy, cz = cross3(wx, wy, wz, feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2])
    return rot_apply(r, cx + feet[k, F_HDOT], cy + feet[k, F_HDOT + 1], cz + feet[k, F_HDOT + 2])


@njit(cache=True, inline="always")
def _velocity_noise(feet, k, r, par):
    """Covariance of the leg's IMU velocity -R (w x h_k + dh_k/dt): the joint velocities' through J and the
    gyroscope sample's times |h_k|."""
    h2 = feet[k, F_H] ** 2 + feet[k, F_H + 1] ** 2 + feet[k, F_H + 2] ** 2
    return foot_covariance(feet, k, r, par[PAR_JOINT_VELOCITY], par[PAR_RATE_NOISE] * h2)


@njit(cache=True)
def trust(x, P, o, feet, imu, contact, par, flags, n_feet):
    """Each foot's flag: in contact and not moving over the ground
    (:func:`~loops.estimation.kinematics.foot_moves`). Returns the number in contact and the number that slip."""
    in_contact = slipping = 0
    r = rot_read(o, O_R)
    w = (imu[I_W] - o[O_B], imu[I_W + 1] - o[O_B + 1], imu[I_W + 2] - o[O_B + 2])
    cov_v = (P[K_V, K_V], P[K_V, K_V + 1], P[K_V, K_V + 2], P[K_V + 1, K_V], P[K_V + 1, K_V + 1],
             P[K_V + 1, K_V + 2], P[K_V + 2, K_V], P[K_V + 2, K_V + 1], P[K_V + 2, K_V + 2])
    for k in range(n_feet):
        flags[k] = 0.0
        if contact[k] <= 0.0:
            continue
        in_contact += 1
        if foot_moves(feet, k, r, x[K_V:K_V + 3], w, cov_v, par[PAR_JOINT_VELOCITY], par[PAR_RATE_NOISE],
                      par[PAR_SLIP_SPEED], par[PAR_GATE]):
            slipping += 1
        else:
            flags[k] = 1.0
    return in_contact, slipping


@njit(cache=True)
def correct(x, P, o, feet, imu, flags, par, cfg_f, n_feet, work, st):
    """Every foot's position and the trusted feet's velocity measurements in one update; fills ``st``."""
    dim = P.shape[0]
    m_max = 6 * n_feet
    mw = work[:2 * m_max]
    hrows = work[2 * m_max:3 * m_max]
    noise = work[3 * m_max:4 * m_max]
    z = work[4 * m_max]
    delta = work[4 * m_max + 1]
    for a in range(m_max):
        for b in range(m_max):
            noise[a, b] = 0.0
    r = rot_read(o, O_R)
    m = 0
    for k in range(n_feet):
        n = foot_covariance(feet, k, r, cfg_f[CF_NOISE], cfg_f[CF_NOISE + 1])
        hx, hy, hz = rot_apply(r, feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2])
        h = (hx, hy, hz)
        for c in range(3):
            hrows[m + c, 0], hrows[m + c, 1] = K_D + 3 * k + c, 1.0
            hrows[m + c, 2], hrows[m + c, 3] = K_P + c, -1.0
            z[m + c] = h[c] - (x[K_D + 3 * k + c] - x[K_P + c])
            for e in range(3):
                noise[m + c, m + e] = n[3 * c + e]
        m += 3
    accepted = 0
    for k in range(n_feet):
        if flags[k] <= 0.0:
            continue
        n = _velocity_noise(feet, k, r, par)
        u = _foot_velocity(o, feet, k, imu)
        for c in range(3):
            hrows[m + c, 0], hrows[m + c, 1], hrows[m + c, 2], hrows[m + c, 3] = K_V + c, 1.0, K_V + c, 0.0
            z[m + c] = -u[c] - x[K_V + c]
            for e in range(3):
                noise[m + c, m + e] = n[3 * c + e]
        m += 3
        accepted += 1
    nis = sparse_update(P, hrows, noise, z, m, mw, delta)
    if nis < 0.0:
        return False
    for j in range(dim):
        x[j] += delta[j]
    st[D_NIS], st[D_DOF], st[D_ACCEPTED] = nis, m, accepted
    return True


@njit(cache=True)
def _place_feet(x, o, feet, n_feet):
    """The first cycle after the start: every foot where the leg puts it, d_k = p + R h_k."""
    r = rot_read(o, O_R)
    for k in range(n_feet):
        hx, hy, hz = rot_apply(r, feet[k, F_H], feet[k, F_H + 1], feet[k, F_H + 2])
        x[K_D + 3 * k], x[K_D + 3 * k + 1], x[K_D + 3 * k + 2] = x[K_P] + hx, x[K_P + 1] + hy, x[K_P + 2] + hz


@njit(cache=True)
def odometry_step(mi, mf, ws, q, v, dt, imu, contact, cfg_i, cfg_f, par, x, P, o, work, diag):
    """One cycle of the baseline (module docstring); returns the status (loops.estimation.common)."""
    n_feet = contact.shape[0]
    status = check_inputs(mi, dt, imu, contact, q, v, cfg_i)
    if status != OK:
        diag[D_STATUS] = status
        return status
    contact_flags(contact, cfg_f, diag)
    m_max = 6 * n_feet
    f0 = 4 * m_max + 2
    feet = work[f0:f0 + n_feet]
    leg_kinematics(mi, mf, ws, q, v, work[f0 + n_feet + 6, :q.shape[0]], cfg_i, cfg_f,
                   work[f0 + n_feet:f0 + n_feet + 6, :v.shape[0]], feet)
    flags = diag[D_CONTACT + n_feet:D_CONTACT + 2 * n_feet]
    if dt > 0.0:
        orientation_predict(o, imu, dt, par)
    if o[O_PLACED] == 0.0:
        _place_feet(x, o, feet, n_feet)
        o[O_PLACED] = 1.0
    in_contact, slipping = trust(x, P, o, feet, imu, diag[D_CONTACT:D_CONTACT + n_feet], par, flags, n_feet)
    if dt > 0.0:
        predict(x, P, o, imu, dt, par, flags, n_feet)
    diag[D_IN_CONTACT], diag[D_REJECTED] = in_contact, slipping
    diag[D_SLIPS] += slipping
    if not correct(x, P, o, feet, imu, flags, par, cfg_f, n_feet, work, diag):
        status = UPDATE_FAILED
    else:
        if dt > 0.0:
            orientation_correct(o, x, imu, dt, par)
        status = OK if state_finite(x, P) and state_finite(o, P) else BAD_STATE
    if status == OK:
        status = monitor_add(diag[D_CONTACT + 2 * n_feet:], diag[D_NIS], diag[D_DOF], in_contact,
                             diag[D_ACCEPTED], cfg_f[CF_MONITOR], cfg_f[CF_MONITOR + 1])
    diag[D_STATUS] = status
    w = (imu[I_W] - o[O_B], imu[I_W + 1] - o[O_B + 1], imu[I_W + 2] - o[O_B + 2])
    write_estimate(cfg_i, cfg_f, rot_read(o, O_R), x[K_P:K_P + 3], x[K_V:K_V + 3], w, q, v)
    return status


_V, _M = "float64[::1]", "float64[:, ::1]"
SIG_STEP = (f"int64(int64[:, ::1], {_M}, {_M}, {_V}, {_V}, float64, {_V}, {_V}, int64[::1], {_V}, {_V}, {_V}, {_M}, "
            f"{_V}, {_M}, {_V})")


class LegOdometryKF(Estimator):
    """The baseline (module docstring): complementary filter (or the device's orientation) and a linear
    Kalman filter on leg odometry; no IMU bias in the filter but the complementary filter's gyroscope bias."""

    feet_diagnostics = 2   # each foot's contact flag, then its trust (in contact, not slipping)

    @dataclass(frozen=True)
    class Options(Estimator.Options):
        device_orientation: bool = setting("bool", True)                   # use the IMU's own when it gives one
        tilt_time_constant: float = setting("float", 0.5, positive=True)   # s
        gyro_bias_time_constant: float = setting("float", 4.0, positive=True)    # s
        velocity_process_density: float = setting("float", 0.1, positive=True)   # m/s^2/sqrt(Hz)
        swing_foot_density: float = setting("float", 1.0, positive=True)   # m/s/sqrt(Hz): a foot in the air

    def _allocate(self) -> None:
        m, o, n = self.model, self.options, self.n_feet
        dim = 6 + 3 * n
        self.x = np.zeros(dim)
        self.P = np.zeros((dim, dim))
        self.o = np.zeros(O_SIZE)
        self.work = np.zeros(work_shape(n, m.nq, m.nv))
        self.work[-1, :m.nq] = m.neutral_configuration()
        self.par = np.zeros(PAR_SIZE)
        kp = 1.0 / o.tilt_time_constant
        self.par[PAR_KP], self.par[PAR_KI] = kp, kp / o.gyro_bias_time_constant
        self.par[PAR_DEVICE] = 1.0 if o.device_orientation else 0.0
        self.par[PAR_Q_V] = o.velocity_process_density ** 2
        self.par[PAR_Q_FOOT], self.par[PAR_Q_SWING] = o.foot_velocity_density ** 2, o.swing_foot_density ** 2
        self.par[PAR_JOINT_VELOCITY] = o.joint_velocity_noise ** 2
        self.par[PAR_RATE_NOISE] = o.gyro_noise_density ** 2 / self.imu_period   # a reading's rate variance
        self.par[PAR_SLIP_SPEED] = o.slip_speed
        self.par[PAR_GATE] = chi2.ppf(1.0 - o.slip_probability, 3)
        self.par[PAR_GX:PAR_GX + 3] = m.gravity
        self._kernel = ready_kernel(odometry_step, SIG_STEP)

    @property
    def covariance(self) -> np.ndarray:
        return self.P

    def covariance_names(self) -> tuple[list, list]:
        names, units = [], []
        for block, unit in [("position", "m^2"), ("velocity", "m^2/s^2")] + [(f"foot/{f}", "m^2")
                                                                             for f in self.foot_names]:
            names += [f"{block}/{axis}" for axis in "xyz"]
            units += [unit] * 3
        return names, units

    def imu_state(self) -> tuple:
        return self.o[O_R:O_R + 9].reshape(3, 3).copy(), self.x[K_V:K_V + 3].copy(), self.x[K_P:K_P + 3].copy()

    @property
    def gyro_bias(self) -> np.ndarray:
        return self.o[O_B:O_B + 3].copy()

    def _initialise(self, r, p, vel, imu) -> None:
        o = self.options
        if r is None:
            if self.options.device_orientation and np.all(np.isfinite(imu[6:10])):
                r = quaternion_to_matrix(*(float(c) for c in imu[6:10]))
            else:
                r = tilt_from_gravity(float(imu[0]), float(imu[1]), float(imu[2]))
            p = vel = (0.0, 0.0, 0.0)
        self.o[:] = 0.0
        rot_write(self.o, O_R, r)
        self.x[:] = 0.0
        self.x[K_P:K_P + 3], self.x[K_V:K_V + 3] = p, vel
        self.o[O_V:O_V + 3] = vel
        self.P[:] = 0.0
        d = np.arange(3)
        self.P[K_P + d, K_P + d] = o.initial_position_std ** 2
        self.P[K_V + d, K_V + d] = o.initial_velocity_std ** 2
        feet = np.arange(K_D, self.P.shape[0])
        self.P[feet, feet] = o.initial_position_std ** 2 + o.foot_position_noise ** 2   # placed by the first cycle

    def _step(self, dt, imu, contact, q, v) -> int:
        m = self.model
        return self._kernel(m.packed_int, m.packed_float, self.ws, q, v, dt, imu, contact, self.cfg_i, self.cfg_f,
                            self.par, self.x, self.P, self.o, self.work, self.diag)
