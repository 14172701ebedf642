"""The estimator component: a floating-base state estimator inside the control cycle.

An :class:`Estimator` is the loop's ``[estimator]`` (:class:`rtctl.rt.estimation.StateEstimator`). Once per
cycle, after the reads, the loop calls :meth:`Estimator.update`, which takes the IMU's reading and the feet's
contact sensors from the loop's state and, with the measured joints, writes the base's coordinates of ``q``
and ``v`` (a free flyer's, the Euler-angle chain's or the planar base's, :mod:`loops.estimation.kinematics`)
from its estimate in one compiled, allocation-free call (:meth:`Estimator.step`, which takes the same as arrays). Its
:attr:`~Estimator.covariance` is the filter's own and goes out as telemetry with the NIS and the slips
(variances with their units). A divergence check (:mod:`loops.estimation.monitor`) or a bad input latches
:attr:`~rtctl.rt.estimation.StateEstimator.fault_reason`, one line saying what, which the loop turns into its
safe state; the next run (:meth:`Estimator.on_start`) starts the estimate again, from the plant's initial
state in simulation (``start = "drivers"``: the base the simulator's driver read) or from the first IMU
sample.

An IMU slower than the loop (a MIP device streams at most at its base rate, the 3DM-GX5's 500 Hz, under a
10 kHz loop) leaves its reading as it was on the cycles without a new sample (``fresh`` False), and every cycle
propagates over its own dt with the reading it has: the estimate stays at the cycle's time, where the joints
are read and the legs correct it, and each sample, the device's mean over its period, moves it by its
integral over one period, one period late. Propagating only on a fresh sample, over its own period, while the
legs correct every cycle would fuse encoders read up to a period after the state's time: on the trot with a
250 Hz IMU that diverges within 0.5 s, where holding the sample keeps 0.13 deg and 20 mm/s RMS
(tests/test_estimation_filters.py).

The estimators are found by name (:data:`rtctl.registry.ESTIMATORS`, entry-point group ``rtctl.estimators``):
``invariant_ekf`` (:class:`loops.estimation.invariant_ekf_estimator.InvariantEKF`) and ``leg_odometry_kf``
(:class:`loops.estimation.leg_odometry.LegOdometryKF`). The contact input is each foot's contact sensor
(:mod:`loops.estimation.common` says why). What they cannot tell: an IMU turned on its mount about x or y is
a slope to them and about z a heading (neither is observable from an IMU and legs), so the IMU sensor's
``mount_rpy`` must be right.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from rtctl.dynamics.kernels import WS_WIDTH
from rtctl.model import ModelError
from rtctl.options import OptionsBase, options_of, setting
from rtctl.registry import ESTIMATORS, RegisteredName
from rtctl.rt.estimation import StateEstimator

from .common import (BAD_CONTACT, BAD_IMU, BAD_JOINTS, BAD_SHAPE, BAD_STATE, CONTACT_SOURCES, D_CONTACT, D_DOF,
                     D_NIS, DIVERGED_NIS, DIVERGED_REJECTED, IMU_SIZE, UPDATE_FAILED)
from .kinematics import (BASE_EULER, BASE_FREE_FLYER, BASE_PLANAR, CF_CONTACT, CF_MONITOR, CF_MOUNT, CF_NOISE,
                         CF_POINTS, CI_AXES, CI_FEET, CI_KIND, CI_NBQ, CI_NBV, read_base)
from .lie import rot_apply, rot_mul
from .monitor import M_LAST_BOUND, M_SUM_DOF, M_SUM_NIS, monitor_reset, monitor_size
from .mounts import sensor_mounts

BASE_KINDS = {"free_flyer": BASE_FREE_FLYER, "euler": BASE_EULER, "planar": BASE_PLANAR}
START = ("imu", "drivers")
DIAG_FIELDS = ("nis", "nis_dof", "feet_in_contact", "feet_accepted", "feet_rejected", "slips")


def _unit_axis(axis, what: str) -> int:
    """The coordinate index of a unit coordinate axis, or ValueError naming ``what``."""
    a = np.asarray(axis, dtype=float)
    k = int(np.argmax(np.abs(a)))
    if not (abs(abs(a[k]) - 1.0) < 1e-12 and np.count_nonzero(a) == 1 and a[k] > 0):
        raise ValueError(f"{what}: the estimators need its axis along +x, +y or +z, got {a.tolist()}")
    return k


def base_layout(model) -> tuple[int, np.ndarray]:
    """(kind, axes) of the model's floating base for :func:`~loops.estimation.kinematics.write_base`; ValueError
    for a base the estimators do not write (fixed, a chain with offsets or tilted axes)."""
    if model.base not in BASE_KINDS:
        raise ValueError(f"model '{model.name}': a state estimator writes a 'free_flyer', 'euler' or 'planar' "
                         f"floating base, this model's base is {model.base!r}")
    axes = np.zeros(6, dtype=np.int64)
    if model.base == "planar":
        for i in range(3):
            if not (np.allclose(model.joint_rotation[i], np.eye(3)) and np.allclose(model.joint_translation[i], 0)):
                raise ValueError(f"model '{model.name}': planar-base joint '{model.joint_names[i]}' has an offset "
                                 "origin; the estimators need the base's joints at the base origin")
            axes[i] = _unit_axis(model.axis[i], f"model '{model.name}': planar-base joint '{model.joint_names[i]}'")
        if sorted(axes[:3]) != [0, 1, 2]:
            raise ValueError(f"model '{model.name}': the planar base's prismatic joints must move along two "
                             "coordinate axes and its revolute joint turn about the third")
    if model.base == "euler":
        for i in range(6):
            if not (np.allclose(model.joint_rotation[i], np.eye(3)) and np.allclose(model.joint_translation[i], 0)):
                raise ValueError(f"model '{model.name}': Euler-chain joint '{model.joint_names[i]}' has an offset "
                                 "origin; the estimators need the chain's joints at the base origin")
            axes[i] = _unit_axis(model.axis[i], f"model '{model.name}': Euler-chain joint '{model.joint_names[i]}'")
        if sorted(axes[:3]) != [0, 1, 2] or len(set(axes[3:])) != 3:
            raise ValueError(f"model '{model.name}': the Euler chain's prismatic joints must move along x, y and z "
                             "and its revolute joints turn about three different axes (Tait-Bryan angles)")
    return BASE_KINDS[model.base], axes


class Estimator(StateEstimator, abc.ABC):
    """Base of the floating-base state estimators (module docstring).

    Built from a config, its feet are the contact sensors it names (``contacts``: each one's body and mount
    point) and its IMU the sensor ``imu`` (its body, axes and origin); built in Python, ``feet`` names frames
    or links of the model (the contact points at ``foot_points`` in them, default their origins) and the IMU
    is on the base body, aligned with it, unless :meth:`mount_imu` says otherwise.
    """

    name = RegisteredName(ESTIMATORS, "estimator")   # its entry point's name
    feet_diagnostics = 1   # values per foot in diag after D_CONTACT (the contact flags; a filter may add its own)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        start: str = setting("str", "imu", choices=START)   # first estimate: level at rest (imu) or the drivers' base
        imu: str = setting("str", "imu")                  # the [[sensors]] IMU it reads (on the base body)
        contacts: object = setting("strs", None)          # the [[sensors]] foot contacts it reads, one per foot
        contact_source: str = setting("str", "flag", choices=tuple(CONTACT_SOURCES))   # their flag or force
        contact_force_on: float = setting("float", 20.0, positive=True)     # N, "force": in contact from here
        contact_force_off: float = setting("float", 10.0, positive=True)    # N, "force": out of contact below
        gyro_noise_density: float = setting("float", 2.4e-4, positive=True)   # rad/s/sqrt(Hz)
        accel_noise_density: float = setting("float", 1.7e-3, positive=True)  # m/s^2/sqrt(Hz)
        encoder_noise: float = setting("float", 1e-3, low=0.0)              # rad (standard deviation)
        joint_velocity_noise: float = setting("float", 0.02, positive=True)   # rad/s (standard deviation)
        foot_position_noise: float = setting("float", 3e-3, low=0.0)        # m (standard deviation)
        foot_velocity_density: float = setting("float", 0.02, positive=True)  # m/s/sqrt(Hz): a foot in contact
        initial_orientation_std: float = setting("float", 0.01, positive=True)   # rad (roll, pitch, yaw)
        initial_velocity_std: float = setting("float", 0.05, positive=True)      # m/s
        initial_position_std: float = setting("float", 0.01, positive=True)      # m
        slip_speed: float = setting("float", 0.2, positive=True)            # m/s: a foot in contact moving faster
        slip_probability: float = setting("float", 1e-4, positive=True, high=0.5)  # a foot in contact past the gate
        divergence_window: float = setting("float", 0.5, positive=True)          # s of innovations tested
        divergence_probability: float = setting("float", 1e-6, positive=True, high=0.5)  # false alarm per window
        max_rejected_time: float = setting("float", 0.2, positive=True)     # s with every foot past the slip gate

    @classmethod
    def from_config(cls, options: dict, context) -> "Estimator":
        """Built from its ``[estimator]`` table over ``context.model`` at the loop period, on the sensors it
        names (``context.sensors``); a reading of its IMU spans the device's sample period or the loop's, the
        longer (:attr:`~rtctl.drivers.sensor.Sensor.sample_period`)."""
        options = cls.Options(**options)
        feet, points, imu = sensor_mounts(context.model, context.sensors, options, cls.name)
        device_period = context.sensors[options.imu].sample_period or context.period
        est = cls(context.model, options, feet=feet, foot_points=points, period=context.period,
                  imu_period=max(device_period, context.period))
        est.mount_imu(*imu)
        return est

    def __init__(self, model, options: "Estimator.Options | None" = None, *, feet, foot_points=None,
                 period: float = 1e-3, imu_period: float | None = None):
        super().__init__()
        self.options = options = options_of(self, options)
        if options.contact_force_off > options.contact_force_on:
            raise ValueError(f"{self.name}: contact_force_off ({options.contact_force_off} N) must not exceed "
                             f"contact_force_on ({options.contact_force_on} N)")
        self.model = model
        self.period = float(period)
        self.imu_period = self.period if imu_period is None else float(imu_period)
        if not self.imu_period > 0:
            raise ValueError(f"{self.name}: imu_period must be > 0 s, got {imu_period}")
        kind, axes = base_layout(model)
        self.foot_names = list(feet)
        n = self.n_feet = len(self.foot_names)
        if options.contacts is not None and len(options.contacts) != n:
            raise ValueError(f"{self.name}: {n} feet but {len(options.contacts)} contacts")
        bodies, points = self._feet(model, foot_points)
        self.base_body = model.n_base_bodies - 1
        self.cfg_i = np.zeros(CI_FEET + n, dtype=np.int64)
        self.cfg_i[CI_KIND], self.cfg_i[CI_NBQ], self.cfg_i[CI_NBV] = kind, model.idx_q[self.base_body] + (
            7 if kind == BASE_FREE_FLYER else 1), model.n_base_dofs
        self.cfg_i[CI_AXES:CI_AXES + 6] = axes
        self.cfg_i[CI_FEET:] = bodies
        self.cfg_f = np.zeros(CF_POINTS + 3 * n)
        self.cfg_f[CF_NOISE] = options.encoder_noise ** 2
        self.cfg_f[CF_NOISE + 1] = options.foot_position_noise ** 2
        self.cfg_f[CF_CONTACT:CF_CONTACT + 3] = (CONTACT_SOURCES[options.contact_source], options.contact_force_on,
                                                 options.contact_force_off)
        window = max(1, int(round(options.divergence_window / self.period)))
        self.cfg_f[CF_MONITOR] = -NormalDist().inv_cdf(options.divergence_probability)
        self.cfg_f[CF_MONITOR + 1] = max(1, int(round(options.max_rejected_time / self.period)))
        self.cfg_f[CF_POINTS:] = points.ravel()
        self.mount_imu(self.base_body, np.eye(3), np.zeros(3))
        self.ws = np.zeros((model.nbodies, WS_WIDTH))
        self._monitor = D_CONTACT + self.feet_diagnostics * n   # where the divergence check's window starts
        self.diag = np.zeros(self._monitor + monitor_size(window))
        self._t = math.nan          # control time of the last update (NaN: none since the start)
        self._started = False       # the estimate has an initial state
        self._fresh_reset = False   # reset() was called and no update has run since
        self._base = np.zeros(18)   # scratch of read_base
        self._contact = np.zeros(n)  # the contact sensors' values this cycle
        self._readings = None       # (IMU reading, contact readings) from the loop's state, found at the first update
        self._allocate()
        names, units = self.covariance_names()
        self.telemetry_fields = tuple(f"estimator/{f}" for f in DIAG_FIELDS) + tuple(f"estimator/var/{c}"
                                                                                  for c in names)
        self.telemetry_units = ("1",) * len(DIAG_FIELDS) + tuple(units)
        self.telemetry_values = np.zeros(len(self.telemetry_fields))
        self._variance = self.covariance.reshape(-1)[::self.covariance.shape[0] + 1]   # a view: P's diagonal

    def _feet(self, model, foot_points):
        """(bodies, contact points in the bodies) of the feet."""
        n = self.n_feet
        points = np.zeros((n, 3)) if foot_points is None else np.array(foot_points, dtype=float)
        if points.shape != (n, 3):
            raise ValueError(f"{self.name}: foot_points needs one [x, y, z] row per foot ({n}), got shape "
                             f"{list(points.shape)}")
        bodies = np.zeros(n, dtype=np.int64)
        for k, name in enumerate(self.foot_names):
            try:
                frame = model.frame(name)
            except ModelError as exc:
                raise ValueError(f"{self.name}: feet: {exc}") from None
            if frame.body < model.n_base_bodies:
                raise ValueError(f"{self.name}: foot {name!r} is not on a leg (it moves with the base or the world)")
            bodies[k] = frame.body
            points[k] = frame.translation + frame.rotation @ points[k]
        return bodies, points

    def mount_imu(self, body: int, rotation, translation) -> None:
        """The IMU's frame: its axes ``rotation`` and origin ``translation`` (m) in body ``body``'s frame, which
        must be the base body (the IMU sensor's ``body``, ``rotation``, ``translation``)."""
        if body != self.base_body:
            name = self.model.body_names[body] if 0 <= body < self.model.nbodies else "the world"
            raise ValueError(f"{self.name}: the IMU is on {name!r}; the estimators need it on the base body "
                             f"{self.model.body_names[self.base_body]!r}")
        r = np.asarray(rotation, dtype=float)
        if r.shape != (3, 3) or not np.allclose(r @ r.T, np.eye(3), atol=1e-9) or np.linalg.det(r) < 0:
            raise ValueError(f"{self.name}: the IMU's rotation must be a 3 x 3 rotation matrix")
        self.cfg_f[CF_MOUNT:CF_MOUNT + 9] = r.ravel()
        self.cfg_f[CF_MOUNT + 9:CF_MOUNT + 12] = np.asarray(translation, dtype=float)

    # -- what each filter provides -----------------------------------------------------------------------------
    @abc.abstractmethod
    def _allocate(self) -> None:
        """Preallocate the filter's state, covariance, parameters and scratch."""

    @abc.abstractmethod
    def _initialise(self, r, p, vel, imu) -> None:
        """Start the estimate at the IMU's world rotation ``r`` (9-tuple), position ``p`` and velocity ``vel``
        (world) with the initial covariance; ``imu`` the first reading (None from :meth:`reset`)."""

    @abc.abstractmethod
    def _step(self, dt: float, imu, contact, q, v) -> int:
        """One compiled cycle; the status (loops.estimation.common)."""

    @property
    @abc.abstractmethod
    def covariance(self) -> np.ndarray:
        """The filter's covariance (updated in place every cycle; its subclass documents the order)."""

    @abc.abstractmethod
    def covariance_names(self) -> tuple[list, list]:
        """(name, unit) of each coordinate of :attr:`covariance`'s diagonal, for its telemetry."""

    @abc.abstractmethod
    def imu_state(self) -> tuple:
        """(R, v, p) of the IMU in the world: the estimate the covariance is about (copies; tests, plots)."""

    # -- the cycle ---------------------------------------------------------------------------------------------
    def reset(self, q, v=None) -> None:
        """Start the estimate at the base state of ``q`` (and ``v``, default at rest), e.g. the robot's
        configured initial state; its covariance the options' initial one."""
        q = np.asarray(q, dtype=float)
        v = np.zeros(self.model.nv) if v is None else np.asarray(v, dtype=float)
        read_base(self.cfg_i[CI_KIND], self.cfg_i[CI_AXES:CI_AXES + 6], q, v, self._base)
        b = self._base
        rb = tuple(b[:9])
        m = self.cfg_f[CF_MOUNT:CF_MOUNT + 12]
        r = rot_mul(rb, tuple(m[:9]))
        tx, ty, tz = rot_apply(rb, m[9], m[10], m[11])
        wx, wy, wz = rot_apply(rb, b[15], b[16], b[17])
        p = (b[9] + tx, b[10] + ty, b[11] + tz)
        vel = (b[12] + wy * tz - wz * ty, b[13] + wz * tx - wx * tz, b[14] + wx * ty - wy * tx)
        self._start()
        self._initialise(r, p, vel, None)
        self._started = self._fresh_reset = True

    def _start(self) -> None:
        self.diag[:] = 0.0
        monitor_reset(self.diag[self._monitor:])
        self._t = math.nan

    def on_start(self) -> None:
        """A run starts: the fault is cleared, the next step is 0 s long, and the estimate starts from the last
        :meth:`reset` if no update has run since, else (``start``) from the first IMU sample (level from its
        specific force, at the origin, at rest) or from the base the drivers read in the first cycle."""
        self.fault_reason = ""
        self.recover()
        self._t = math.nan
        if not self._fresh_reset:
            self._started = False

    def on_activate(self) -> None:
        self.on_start()

    def update(self, t: float, state) -> None:
        """The loop's cycle (:class:`rtctl.rt.estimation.StateEstimator`): the IMU's and the contact sensors'
        readings in ``state.sensors``, the joints of ``state``; the base's entries of ``state.q`` and
        ``state.v`` written. A fault latches :attr:`fault_reason`."""
        if self._readings is None:
            self._readings = self._find_readings(state.sensors)
        if not self._started and self.options.start == "drivers":
            self.reset(state.q, state.v)
        imu, contacts = self._readings
        force = self.options.contact_source == "force"
        contact = self._contact
        for k in range(self.n_feet):
            contact[k] = contacts[k].force[0] if force else contacts[k].contact[0]
        self.step(t, imu.values, contact, state.q, state.v)

    def _find_readings(self, readings: dict):
        names = [self.options.imu, *(self.options.contacts or ())]
        missing = [n for n in names if n not in readings]
        if missing or self.options.contacts is None:
            raise ValueError(f"{self.name}: no reading of sensor {missing[0] if missing else 'contacts'!r} in the "
                             f"loop's state (sensors: {sorted(readings)})")
        return readings[self.options.imu], [readings[n] for n in self.options.contacts]

    def step(self, t: float, imu, contact, q, v) -> bool:
        """One cycle at control time ``t`` (s): ``imu`` the IMU reading's values (10: specific force, angular
        rate, orientation xyzw or NaN), ``contact`` each foot's contact input, ``q`` and ``v`` the measured state,
        whose base entries are overwritten with the estimate. False once a fault is latched
        (:attr:`fault_reason`)."""
        if self.fault_reason:
            return False
        dt = 0.0 if self._t != self._t else t - self._t
        if not self._started:
            self._start()
            self._initialise(None, None, None, imu)
            self._started = True
            dt = 0.0
        self._t = t
        self._fresh_reset = False
        try:
            status = self._step(dt, imu, contact, q, v)
        except TypeError:   # not float64 vectors (numba's dispatcher refuses them): the slow path
            status = self._step_converted(dt, imu, contact, q, v)
        if status == BAD_SHAPE:
            self._step_converted(dt, imu, contact, q, v)   # names the vector
            return False
        values = self.telemetry_values
        values[:len(DIAG_FIELDS)] = self.diag[:len(DIAG_FIELDS)]
        values[len(DIAG_FIELDS):] = self._variance
        if status:
            self._latch(status, dt, imu, contact, q, v)
            return False
        return True

    def _step_converted(self, dt, imu, contact, q, v):
        """The step on float64 copies of the inputs (q and v copied back); BAD_SHAPE after latching a fault that
        names an input of the wrong shape or type."""
        m = self.model
        arrays = []
        for name, value, size in (("imu", imu, IMU_SIZE), ("contact", contact, self.n_feet), ("q", q, m.nq),
                                  ("v", v, m.nv)):
            try:
                arr = np.array(value, dtype=np.float64)
            except (TypeError, ValueError):
                arr = None
            if arr is None or arr.shape != (size,):
                self._latch_line(f"{name} must be {size} numbers, got {type(value).__name__} of shape "
                                 f"{list(np.shape(value)) if arr is not None else '?'}")
                return BAD_SHAPE
            arrays.append(arr)
        status = self._step(float(dt), *arrays)
        q[:], v[:] = arrays[2], arrays[3]
        return status

    def _latch_line(self, reason: str) -> None:
        self.fault_reason = f"estimator '{self.name}': {reason}"
        self.fail(self.fault_reason)

    def _latch(self, status, dt, imu, contact, q, v) -> None:
        self._latch_line(self._reason(status, dt, imu, contact, q, v))

    def _reason(self, status, dt, imu, contact, q, v) -> str:
        mon = self.diag[self._monitor:]
        o = self.options
        if status == DIVERGED_NIS:
            return (f"diverged: normalised innovation {mon[M_SUM_NIS]:.1f} over the last {o.divergence_window:g} s "
                    f"exceeds its chi-square bound {mon[M_LAST_BOUND]:.1f} ({int(mon[M_SUM_DOF])} degrees of "
                    f"freedom, false-alarm probability {o.divergence_probability:g})")
        if status == DIVERGED_REJECTED:
            return (f"diverged: for {o.max_rejected_time:g} s no foot in contact agreed with the estimate (every "
                    "one past the slip gate)")
        if status == UPDATE_FAILED:
            return "the innovation covariance is not positive definite"
        if status == BAD_STATE:
            return "the estimate or its covariance is not finite"
        if status == BAD_CONTACT:
            k = int(np.flatnonzero(~np.isfinite(np.asarray(contact, dtype=float)))[0])
            return f"contact input of foot {self.foot_names[k]!r} is {contact[k]}"
        if status == BAD_JOINTS:
            nq, nv = self.cfg_i[CI_NBQ], self.cfg_i[CI_NBV]
            for arr, first, names, what in ((q, nq, self.model.idx_q, "position"), (v, nv, self.model.idx_v,
                                                                                        "velocity")):
                bad = np.flatnonzero(~np.isfinite(np.asarray(arr[first:], dtype=float)))
                if bad.size:
                    index = first + int(bad[0])
                    joint = self.model.joint_names[int(np.searchsorted(names, index, side="right")) - 1]
                    return f"joint {joint!r} {what} is {arr[index]}"
        if status == BAD_IMU:
            if not 0.0 <= dt < 1.0:
                return f"time step {dt!r} s since the last update is outside [0, 1) s"
            return (f"IMU sample not finite: specific force {np.asarray(imu[:3]).tolist()}, angular rate "
                    f"{np.asarray(imu[3:6]).tolist()}")
        return f"status {status}"

    @property
    def nis(self) -> tuple[float, int]:
        """This cycle's normalised innovation squared and its degrees of freedom (0 when nothing was measured)."""
        return float(self.diag[D_NIS]), int(self.diag[D_DOF])

    @property
    def contact(self) -> np.ndarray:
        """Each foot's contact flag this cycle (after the ``force`` threshold)."""
        return self.diag[D_CONTACT:D_CONTACT + self.n_feet]

    def warm(self, cycle=None) -> None:
        """Before the hardware is activated: a reset and steps on copies (touch-down, stance, lift-off; a start
        from the IMU with and without the device's orientation) reach every kernel :meth:`update` calls; the
        estimate is started afresh after them."""
        q = self.model.neutral_configuration() if cycle is None else cycle.state.q.copy()
        v = np.zeros(self.model.nv) if cycle is None else cycle.state.v.copy()
        imu = np.array([0.0, 0.0, 9.81, 0.0, 0.0, 0.0, np.nan, np.nan, np.nan, np.nan])
        contact = np.ones(self.n_feet)
        on = self.options.contact_force_on if self.options.contact_source == "force" else 1.0
        saved = (self.fault_reason, self._t, self.lifecycle_state, self.error_reason)
        self.reset(q, v)
        for orientation in (np.nan, 0.0):
            imu[6:9], imu[9] = orientation, 1.0 if orientation == 0.0 else np.nan
            self._started, self._t = False, math.nan
            for t, c in ((0.0, on), (self.period, on), (2 * self.period, 0.0)):
                contact[:] = c
                self.step(t, imu, contact, q, v)
        self.fault_reason, self._t, self.lifecycle_state, self.error_reason = saved
        self._started = self._fresh_reset = False
