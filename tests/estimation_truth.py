"""Truth for the estimator tests and benchmark: the seed quadruped trotting on its compliant ground
(plants/legged, the legged_quadruped.toml gait under computed torque at 10 kHz), and what its sensors would
read at the estimators' 1 kHz.

The IMU is on the trunk, aligned with it (the IMU frame is the base body's). Its sample at cycle k is what a
strapdown IMU integrates over the period before it (its delta-angle and delta-velocity outputs divided by the
period): the angular rate is Log(R_{k-1}^T R_k) / dt and the specific force the mean of R^T (a - g) over the
plant's ten 0.1 ms steps in the period, a = the step's velocity change over 0.1 ms (the semi-implicit Euler
step's own acceleration). To it the synthesis adds a constant bias, a bias random walk and white noise of the
stated densities (a BMI088-class MEMS IMU: accelerometer 175 ug/sqrt(Hz) = 1.7e-3 m/s^2/sqrt(Hz), gyroscope
0.014 deg/s/sqrt(Hz) = 2.4e-4 rad/s/sqrt(Hz)); the encoders add white noise to the joint positions and
velocities; each foot's contact flag is its ground reaction above a threshold (a contact sensor on the
plant's foot force, as the emulated one does).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rtctl.dynamics import Dynamics
from rtctl.loops.estimation.kinematics import BASE_EULER, read_base
from rtctl.plants.legged.control import run_walk
from rtctl.plants.legged.model import spatial_quadruped

PLANT_STEP = 1e-4     # s: the trot's loop period (one plant step per cycle)
PERIOD = 1e-3         # s: the estimators' cycle
SUB = int(round(PERIOD / PLANT_STEP))
EULER_AXES = np.array([0, 1, 2, 2, 1, 0], dtype=np.int64)   # the quadruped's chain: x, y, z, then zyx


def _log(r):
    c = np.clip(0.5 * (np.trace(r, axis1=-2, axis2=-1) - 1.0), -1.0, 1.0)
    t = np.arccos(c)
    v = np.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]], axis=-1)
    s = np.where(t < 1e-9, 0.5, 0.5 * t / np.where(t < 1e-9, 1.0, np.sin(t)))
    return v * s[..., None]


@dataclass
class Truth:
    """The trot at the estimators' cycle (index k at time k * PERIOD): full ``q``, ``v``, the trunk's world
    rotation ``R``, position ``p``, velocity ``vel`` (world), body rate ``omega``, the ideal IMU sample
    ``imu`` (specific force, angular rate over the period ending at k; row 0 unused), the feet's ground
    reactions ``grf`` (N) and world positions ``feet``."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    R: np.ndarray
    p: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    imu: np.ndarray
    grf: np.ndarray
    feet: np.ndarray
    robot: object = field(repr=False)

    @property
    def n(self) -> int:
        return self.t.shape[0]


def _base_states(q, v):
    n = q.shape[0]
    out, base = np.zeros(18), np.zeros((n, 18))
    for i in range(n):
        read_base(BASE_EULER, EULER_AXES, q[i], v[i], out)
        base[i] = out
    return base[:, :9].reshape(n, 3, 3), base[:, 9:12], base[:, 12:15], base[:, 15:18]


def trot_truth(duration: float) -> Truth:
    """Trot ``duration`` s (module docstring)."""
    rec = run_walk("spatial_quadruped", "ct", duration, record_every=PLANT_STEP)
    assert not rec.failures, rec.failures
    robot = spatial_quadruped()
    rot, pos, vel, omega = _base_states(rec.q, rec.v)
    g = robot.model.gravity
    acc = np.diff(vel, axis=0) / PLANT_STEP
    f_fine = np.einsum("nji,nj->ni", rot[:-1], acc - g)
    n = (rec.q.shape[0] - 1) // SUB
    idx = np.arange(n + 1) * SUB
    imu = np.zeros((n + 1, 6))
    imu[1:, :3] = f_fine[:n * SUB].reshape(n, SUB, 3).mean(axis=1)
    imu[1:, 3:] = _log(np.einsum("nji,njk->nik", rot[idx[:-1]], rot[idx[1:]])) / PERIOD
    dyn = Dynamics(robot.model)
    feet = np.zeros((n + 1, len(robot.foot_names), 3))
    for k, i in enumerate(idx):
        r, o = dyn.forward_kinematics(rec.q[i])
        for f, (b, point) in enumerate(zip(robot.contact_bodies, robot.contact_points)):
            feet[k, f] = o[b] + r[b] @ point
    return Truth(t=idx * PLANT_STEP, q=rec.q[idx], v=rec.v[idx], R=rot[idx], p=pos[idx], vel=vel[idx],
                 omega=omega[idx], imu=imu, grf=rec.grf[idx, :, 2], feet=feet, robot=robot)


@dataclass
class Sensors:
    """Noise model of the synthesised sensors (densities continuous-time, per sqrt(Hz))."""

    accel_density: float = 1.7e-3      # m/s^2/sqrt(Hz)
    gyro_density: float = 2.4e-4       # rad/s/sqrt(Hz)
    accel_bias: tuple = (0.03, -0.02, 0.05)      # m/s^2, constant part
    gyro_bias: tuple = (2e-3, -3e-3, 1e-3)       # rad/s (0.11, 0.17, 0.06 deg/s)
    accel_walk: float = 1e-4           # m/s^3/sqrt(Hz)
    gyro_walk: float = 1e-5            # rad/s^2/sqrt(Hz)
    encoder: float = 5e-4              # rad
    joint_velocity: float = 0.02       # rad/s
    contact_force: float = 10.0        # N: a foot is flagged in contact above it


@dataclass
class Measurements:
    imu: np.ndarray          # (n, 10): specific force, angular rate, orientation (NaN)
    q: np.ndarray            # (n, nq): joints with encoder noise, base entries from the truth (overwritten)
    v: np.ndarray
    contact: np.ndarray      # (n, K) 0/1


def synthesize(truth: Truth, seed: int, sensors: Sensors = Sensors()) -> Measurements:
    rng = np.random.default_rng(seed)
    n = truth.n
    root = 1.0 / np.sqrt(PERIOD)
    walk_a = np.cumsum(rng.normal(size=(n, 3)) * sensors.accel_walk * np.sqrt(PERIOD), axis=0)
    walk_g = np.cumsum(rng.normal(size=(n, 3)) * sensors.gyro_walk * np.sqrt(PERIOD), axis=0)
    imu = np.full((n, 10), np.nan)
    imu[:, :3] = truth.imu[:, :3] + np.asarray(sensors.accel_bias) + walk_a \
        + rng.normal(size=(n, 3)) * sensors.accel_density * root
    imu[:, 3:6] = truth.imu[:, 3:] + np.asarray(sensors.gyro_bias) + walk_g \
        + rng.normal(size=(n, 3)) * sensors.gyro_density * root
    nb_q, nb_v = 6, 6
    q, v = truth.q.copy(), truth.v.copy()
    q[:, nb_q:] += rng.normal(size=q[:, nb_q:].shape) * sensors.encoder
    v[:, nb_v:] += rng.normal(size=v[:, nb_v:].shape) * sensors.joint_velocity
    contact = (truth.grf > sensors.contact_force).astype(float)
    return Measurements(imu=imu, q=q, v=v, contact=contact)


def held_device(truth: Truth, every: int, seed: int, sensors: Sensors = Sensors()) -> tuple[Measurements, np.ndarray]:
    """The readings of an IMU ``every`` times slower than the estimators' cycle, as a loop holds them, and which
    cycles got a new sample. The device's sample at each cycle k that is a multiple of ``every`` is the mean
    specific force over its period (its delta velocity over the period, divided by it) and the rotation over
    it, Log(R_{k-every}^T R_k) / period, plus the biases of ``sensors`` and white noise of their densities at
    the device's rate; it stays the reading until the next (the first, at k = 0, is the first period's).
    Encoders and contact flags as :func:`synthesize` gives them."""
    meas = synthesize(truth, seed, sensors)
    rng = np.random.default_rng(seed + 1000)
    period = every * PERIOD
    ticks = np.arange(0, truth.n, every)
    ends = np.maximum(ticks, every)
    samples = np.zeros((ticks.size, 6))
    for j, k in enumerate(ends):
        samples[j, :3] = truth.imu[k - every + 1:k + 1, :3].mean(axis=0)
        samples[j, 3:] = _log(truth.R[k - every].T @ truth.R[k]) / period
    noise = np.repeat([sensors.accel_density, sensors.gyro_density], 3) / np.sqrt(period)
    samples += np.r_[sensors.accel_bias, sensors.gyro_bias] + rng.normal(size=samples.shape) * noise
    meas.imu[:, :6] = samples[np.arange(truth.n) // every]
    return meas, np.arange(truth.n) % every == 0


@dataclass
class Run:
    """An estimator run over a truth: the written base state ``q``, ``v`` per cycle, the IMU-frame estimate
    ``R``, ``vel``, ``p``, the covariance of its first ``nees_dim`` error coordinates, the NIS and its degrees
    of freedom, and the cycle its fault latched at (-1: none)."""

    q: np.ndarray
    v: np.ndarray
    R: np.ndarray
    vel: np.ndarray
    p: np.ndarray
    cov: np.ndarray
    nis: np.ndarray
    fault_cycle: int = -1
    fault: str = ""


def run_estimator(est, truth: Truth, meas: Measurements, *, cycles: int | None = None, initial_error=None,
                  nees_dim: int = 9, clock=None) -> Run:
    """``est`` (started here) over the measurements, started at the truth's first state (plus
    ``initial_error`` = (rotation vector, velocity, position) of the IMU, world axes); each cycle's step at the
    time ``clock[k]`` (default the cycle's, k * PERIOD)."""
    n = truth.n if cycles is None else cycles
    nq, nv = truth.q.shape[1], truth.v.shape[1]
    run = Run(q=np.zeros((n, nq)), v=np.zeros((n, nv)), R=np.zeros((n, 3, 3)), vel=np.zeros((n, 3)),
              p=np.zeros((n, 3)), cov=np.zeros((n, nees_dim, nees_dim)), nis=np.zeros((n, 2)))
    est.on_start()
    q0, v0 = truth.q[0].copy(), truth.v[0].copy()
    if initial_error is not None:
        from scipy.spatial.transform import Rotation
        dr, dv, dp = initial_error
        r0 = Rotation.from_rotvec(dr).as_matrix() @ truth.R[0]
        q0[3:6] = Rotation.from_matrix(r0).as_euler("ZYX")
        q0[0:3] += dp
        v0[0:3] += dv
    est.reset(q0, v0)
    for k in range(n):
        q, v = meas.q[k].copy(), meas.v[k].copy()
        if k > 0:
            q[:6], v[:6] = run.q[k - 1, :6], run.v[k - 1, :6]
        else:
            q[:6], v[:6] = q0[:6], v0[:6]
        if not est.step(k * PERIOD if clock is None else clock[k], meas.imu[k], meas.contact[k], q, v):
            run.fault_cycle, run.fault = k, est.fault_reason
            for name in ("q", "v", "R", "vel", "p", "cov", "nis"):
                setattr(run, name, getattr(run, name)[:k])
            break
        run.q[k], run.v[k] = q, v
        run.R[k], run.vel[k], run.p[k] = est.imu_state()
        run.cov[k] = est.covariance[:nees_dim, :nees_dim]
        run.nis[k] = est.nis
    return run


def errors(run: Run, truth: Truth) -> dict:
    """Roll and pitch RMS error (rad), yaw error at the end (rad), base velocity RMS error (m/s, norm),
    horizontal drift at the end (m) and the distance walked (m)."""
    n = run.q.shape[0]
    rel = np.einsum("nij,nkj->nik", truth.R[:n], run.R)      # R_true R_hat^T
    up = rel[:, 2, :]                                          # tilt error from the world z row
    tilt = _log(rel)
    e_v = run.v[:, :3] - truth.v[:n, :3]
    e_p = run.q[:, :2] - truth.q[:n, :2]
    walked = np.sum(np.linalg.norm(np.diff(truth.q[:n, :2], axis=0), axis=1))
    return {"roll_pitch_rms": float(np.sqrt(np.mean(tilt[:, 0] ** 2 + tilt[:, 1] ** 2) / 2.0)),
            "roll_rms": float(np.sqrt(np.mean(tilt[:, 0] ** 2))), "pitch_rms": float(np.sqrt(np.mean(tilt[:, 1] ** 2))),
            "yaw_end": float(tilt[-1, 2]), "velocity_rms": float(np.sqrt(np.mean(np.sum(e_v ** 2, axis=1)))),
            "drift": float(np.linalg.norm(e_p[-1])), "walked": float(walked), "up": up}


def nees(run: Run, truth: Truth, dim: int = 9) -> np.ndarray:
    """Per cycle, the NEES of the right-invariant error xi = Log(X_true X_hat^-1) over (R, v, p)[:dim]
    against the filter's covariance (its first-order form: xi_v = v - dR v_hat, xi_p = p - dR p_hat)."""
    n = run.q.shape[0]
    rel = np.einsum("nij,nkj->nik", truth.R[:n], run.R)
    xi = np.concatenate([_log(rel), truth.vel[:n] - np.einsum("nij,nj->ni", rel, run.vel),
                         truth.p[:n] - np.einsum("nij,nj->ni", rel, run.p)], axis=1)[:, :dim]
    return np.einsum("ni,ni->n", xi, np.linalg.solve(run.cov[:, :dim, :dim], xi[..., None])[..., 0])


def monte_carlo_nees(make_estimator, truth: Truth, runs: int, dim: int = 9):
    """``(averaged, fault)``: the NEES averaged over ``runs`` runs of fresh estimators from ``make_estimator()``,
    each with biases drawn from the filter's bias prior, an initial error from its initial covariance and its
    own sensor noise (per cycle; ``fault`` the first run's fault, "" if none faulted)."""
    o = make_estimator().options
    averaged = np.zeros(truth.n)
    for seed in range(runs):
        rng = np.random.default_rng(100 + seed)
        sensors = Sensors(accel_bias=tuple(rng.normal(size=3) * o.initial_accel_bias_std),
                          gyro_bias=tuple(rng.normal(size=3) * o.initial_gyro_bias_std))
        initial = (rng.normal(size=3) * o.initial_orientation_std, rng.normal(size=3) * o.initial_velocity_std,
                   rng.normal(size=3) * o.initial_position_std)
        run = run_estimator(make_estimator(), truth, synthesize(truth, seed, sensors), initial_error=initial)
        if run.fault:
            return averaged, run.fault
        averaged += nees(run, truth, dim) / runs
    return averaged, ""
