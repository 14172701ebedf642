"""The ``invariant_ekf`` estimator: :mod:`loops.estimation.invariant_ekf`'s filter as an
:class:`~loops.estimation.base.Estimator`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from rtctl.options import setting
from rtctl.rt.warmup import ready_kernel

from .base import Estimator
from .invariant_ekf import (P_D, P_P, P_R, P_V, PAR_ACCEL, PAR_ACCEL_BIAS, PAR_FOOT, PAR_GATE, PAR_GX, PAR_GYRO,
                            PAR_GYRO_BIAS, PAR_JOINT_VELOCITY, PAR_RATE_NOISE, PAR_SIZE, PAR_SLIP_SPEED, X_BA, X_BG,
                            X_P, X_R, X_V, cov_size, ekf_step, state_size, work_shape)
from .lie import rot_write, tilt_from_gravity

_V, _M = "float64[::1]", "float64[:, ::1]"
SIG_STEP = (f"int64(int64[:, ::1], {_M}, {_M}, {_V}, {_V}, float64, {_V}, {_V}, int64[::1], {_V}, {_V}, {_V}, {_M}, "
            f"{_M}, {_V})")


class InvariantEKF(Estimator):
    """The contact-aided invariant EKF of Hartley et al. (IJRR 2020) with IMU bias states.

    :attr:`covariance` is over the right-invariant error ``[xi_R, xi_v, xi_p, xi_d1..K, zeta_g, zeta_a]``
    (rad, m/s, m, m, rad/s, m/s^2), IMU frame quantities in world axes; a foot out of contact has zero rows.
    """

    @dataclass(frozen=True)
    class Options(Estimator.Options):
        gyro_bias_walk: float = setting("float", 1e-5, positive=True)       # rad/s^2/sqrt(Hz)
        accel_bias_walk: float = setting("float", 1e-4, positive=True)      # m/s^3/sqrt(Hz)
        initial_gyro_bias_std: float = setting("float", 0.01, positive=True)   # rad/s
        initial_accel_bias_std: float = setting("float", 0.1, positive=True)   # m/s^2

    def _allocate(self) -> None:
        m, o, n = self.model, self.options, self.n_feet
        self.x = np.zeros(state_size(n))
        self.P = np.zeros((cov_size(n), cov_size(n)))
        self.work = np.zeros(work_shape(n, m.nq, m.nv))
        self.work[-1, :m.nq] = m.neutral_configuration()
        self.par = np.zeros(PAR_SIZE)
        self.par[PAR_GYRO], self.par[PAR_ACCEL] = o.gyro_noise_density ** 2, o.accel_noise_density ** 2
        self.par[PAR_GYRO_BIAS], self.par[PAR_ACCEL_BIAS] = o.gyro_bias_walk ** 2, o.accel_bias_walk ** 2
        self.par[PAR_FOOT] = o.foot_velocity_density ** 2
        self.par[PAR_GX:PAR_GX + 3] = m.gravity
        self.par[PAR_GATE] = chi2.ppf(1.0 - o.slip_probability, 3)
        self.par[PAR_SLIP_SPEED] = o.slip_speed
        self.par[PAR_JOINT_VELOCITY] = o.joint_velocity_noise ** 2
        self.par[PAR_RATE_NOISE] = o.gyro_noise_density ** 2 / self.imu_period   # a reading's rate variance
        self._kernel = ready_kernel(ekf_step, SIG_STEP)

    @property
    def covariance(self) -> np.ndarray:
        return self.P

    def covariance_names(self) -> tuple[list, list]:
        names, units = [], []
        blocks = [("rotation", "rad^2"), ("velocity", "m^2/s^2"), ("position", "m^2")]
        blocks += [(f"foot/{f}", "m^2") for f in self.foot_names]
        blocks += [("gyro_bias", "rad^2/s^2"), ("accel_bias", "m^2/s^4")]
        for block, unit in blocks:
            names += [f"{block}/{axis}" for axis in "xyz"]
            units += [unit] * 3
        return names, units

    def imu_state(self) -> tuple:
        x = self.x
        return x[X_R:X_R + 9].reshape(3, 3).copy(), x[X_V:X_V + 3].copy(), x[X_P:X_P + 3].copy()

    @property
    def bias(self) -> tuple[np.ndarray, np.ndarray]:
        """The estimated (gyroscope, accelerometer) biases (rad/s, m/s^2)."""
        return self.x[X_BG:X_BG + 3].copy(), self.x[X_BA:X_BA + 3].copy()

    def _initialise(self, r, p, vel, imu) -> None:
        o, x, P = self.options, self.x, self.P
        if r is None:
            r = tilt_from_gravity(float(imu[0]), float(imu[1]), float(imu[2]))
            p = vel = (0.0, 0.0, 0.0)
        x[:] = 0.0
        rot_write(x, X_R, r)
        x[X_V:X_V + 3], x[X_P:X_P + 3] = vel, p
        P[:] = 0.0
        d = np.arange(3)
        bg, ba = P_D + 3 * self.n_feet, P_D + 3 * self.n_feet + 3
        for block, std in ((P_R, o.initial_orientation_std), (P_V, o.initial_velocity_std),
                           (P_P, o.initial_position_std), (bg, o.initial_gyro_bias_std),
                           (ba, o.initial_accel_bias_std)):
            P[block + d, block + d] = std ** 2

    def _step(self, dt, imu, contact, q, v) -> int:
        m = self.model
        return self._kernel(m.packed_int, m.packed_float, self.ws, q, v, dt, imu, contact, self.cfg_i, self.cfg_f,
                            self.par, self.x, self.P, self.work, self.diag)
