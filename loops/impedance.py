"""Cartesian impedance control of a fixed-base arm's frame, with a null-space posture.

Notation: ``q``, ``v`` the measured joint state; ``(R, p)`` the world pose of the controlled frame's
origin P, ``J(q)`` its 6 x nv world-aligned Jacobian with rows [angular; linear] (so the frame's twist
is ``xdot = J v = [omega; v_P]``, world axes, :mod:`rtctl.dynamics`); ``(R_d, p_d)``, ``xdot_d``,
``xddot_d`` the desired pose, twist and twist rate (:mod:`loops.cartesian`). The law
(Ott, *Cartesian Impedance Control of Redundant and Flexible-Joint Robots*, Springer 2008, ch. 3):

    e     = [log(R_d R^T); p_d - p]                 rotation vector of R_d R^T (world axes), position error
    F     = K e + D (xdot_d - J v) [+ Lambda (xddot_d - Jdot v)]     wrench [n; f] at P, world axes
    tau   = g(q) [+ C(q, v) v] + J^T F + (I - J^T Lambda J M^-1) tau_0
    tau_0 = K_n (q_d - q) + D_n (qd_d - v)                            posture toward the trajectory's q_d
    Lambda = (J M^-1 J^T)^-1                                           task-space inertia

``K``, ``D`` are symmetric 6 x 6 (internally [angular; linear]; the config and the control channel give
them translational first, see :class:`CartesianImpedance.Options`). The null-space projector
``I - J^T Lambda J M^-1`` is the transpose of the dynamically consistent one (Khatib 1987, "A unified
approach for motion and force control of robot manipulators: the operational space formulation"): the
posture torque causes no acceleration of the frame. The bracketed terms are options (``coriolis``,
``inertia_feedforward``). With both and an exact model the closed loop of the frame is
``Lambda eddot + D edot + K e = F_ext`` (for the position part; to first order in the rotation error).

Closing on a measured wrench (``wrench_sensor``, a force-torque sensor of the robot, and ``task_inertia``
Lambda_d, diagonal): the sensor's reading less its load's weight and bias, moved to P in world axes
(:mod:`rtctl.loops.wrench`), is F_ext, and the law becomes

    F = Lambda Lambda_d^-1 (K e + D (xdot_d - J v) + F_ext) - F_ext [+ Lambda (xddot_d - Jdot v)]

so that the frame shows the inertia Lambda_d instead of Lambda: ``Lambda_d eddot + D edot + K e = F_ext``
(Ott 2008, ch. 3, impedance control with inertia shaping, which needs the external force measured). What the
sensor carries in motion adds its own inertia M_s (its reading is ``F_ext - M_s xddot``): the frame then shows
``Lambda_d + (1 - Lambda_d Lambda^-1) M_s``. ``damping`` gives D (``damping_ratio`` would design it for Lambda).

Statics, what the stiffness test measures: at rest under an external wrench ``F_ext`` at P the
equilibrium is ``J^T (K e + F_ext) + N^T tau_0 = 0``; range(J^T) and range(N^T) meet only in 0, so
``K (x - x_d) = F_ext`` exactly (the posture spring takes up nothing of it).

Damping: ``damping`` gives D; ``damping_ratio`` zeta builds it every cycle by the double
diagonalisation of Albu-Schaeffer, Ott, Frese & Hirzinger (ICRA 2003, "Cartesian impedance control of
redundant robots: recent results with the DLR light-weight arms"): find Q with ``Lambda = Q Q^T`` and
``K = Q K_0 Q^T``, K_0 diagonal, and set ``D = 2 zeta Q K_0^(1/2) Q^T``, so that each mode of the
linearised ``Lambda eddot + D edot + K e = 0`` has damping ratio zeta with the task-space inertia at the
current q. Here ``Lambda^-1 = C C^T`` (Cholesky), ``C^T K C = V K_0 V^T`` (Jacobi), ``Q = C^-T V``.

Live changes (:meth:`CartesianImpedance.set_impedance`, the control channel's ``set_impedance``): K and
D (or the damping ratio zeta) and the null-space stiffness K_n move linearly from their values to the new ones
over ``gain_ramp`` s, so in one cycle of period dt the wrench changes by at most
``|K_new - K_old| |e| dt / gain_ramp`` (plus the same for D, and for K_n on the posture torque) on top of
what the motion itself changes.

The desired pose: a Cartesian trajectory the controller follows (:meth:`CartesianImpedance.follow`, e.g.
``cartesian_min_jerk``), else the forward kinematics of the joint trajectory's ``q_d``
(``xdot_d = J(q_d) qd_d``, ``xddot_d = J(q_d) qdd_d + Jdot(q_d, qd_d) qd_d``).

Real time: :meth:`CartesianImpedance.update` is one compiled call over arrays preallocated at
construction (plus one for the Cartesian trajectory's sample): RNEA for g (+ C v), CRBA, the frame
Jacobian, LDL^T of M and of J M^-1 J^T (7 + 6 unknowns for the arm). ``kp`` / ``kd`` of this controller
are the posture gains K_n / D_n (``set_gains`` changes them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import all_finite, crba, kinematics, point_acceleration, point_jacobian, rnea
from rtctl.dynamics.spatial import ldlt_factor
from rtctl.model import ModelError
from rtctl.options import OptionsBase, options_of, setting
from rtctl.telemetry.scene import target_pose_fields

from .base import Controller
from .cartesian import CartesianReference, log_rotation
from .impedance_kernels import (D_POSE, D_RATE, D_TWIST, D_WIDTH, S_BODY, S_CORIOLIS, S_EXTERNAL, S_FEEDFORWARD,
                                S_FRAME_R, S_FRAME_T, S_NULLSPACE_RAMP, S_RAMP_T0, S_RAMP_TIME, S_SHAPING, S_WIDTH,
                                S_ZETA, S_ZETA_FROM, S_ZETA_TO, V_ERROR, V_FEXT, V_H, V_JDV, V_POSE, V_ROWS, V_TAU0,
                                V_TWIST, V_WRENCH, V_Y, V_ZERO, desired_from_joints, frame_pose, frame_pose_kernel,
                                ramped_gains)
from .task_space import (DAMPING_LIMIT, G_D, G_D_FROM, G_D_TO, G_K, G_K_FROM, G_K_TO, G_LAMBDA, G_LAMBDA_INV, G_MASS,
                         G_ROWS, STIFFNESS_LIMIT, critical_damping, definiteness_problem, ldlt_solve, task_matrix,
                         user_matrix)
from .wrench import WrenchProcessing

__all__ = ["CartesianImpedance", "task_matrix", "user_matrix"]

# Status codes: OK; NOT_FINITE + k for argument k (1 q, 2 v, 3 q_d, 4 qd_d, 5 qdd_d, 6 the desired
# motion, 7 the gains); WRONG_LENGTH + k; TASK_SINGULAR: J M^-1 J^T not positive definite.
_OK, _NOT_FINITE, _WRONG_LENGTH, _TASK_SINGULAR, _MASS_SINGULAR, _KERNEL = 0, 0, 10, 20, 21, 100
_ARG_NAMES = ("q", "v", "q_d", "qd_d", "qdd_d", "desired pose", "gains")


@njit(cache=True)
def impedance_step(mi, mf, ws, idx, settings, g, joint_gains, t, q, v, q_d, qd_d, qdd_d, des, mass, jx, vec, effort):
    """One cycle of the law of the module docstring; writes ``effort`` (nv) and returns a status code.

    ``jx`` (2, 6, nv): J and X^T = J M^-1. ``mass`` (nv, nv): M. ``des``: the desired
    pose, twist and twist rate, filled here from the joint trajectory unless ``settings[S_EXTERNAL]``.
    ``joint_gains`` (4, n): K_n, D_n, and the ends of a K_n change
    (:func:`~rtctl.loops.impedance_kernels.ramped_gains`)."""
    nv = v.shape[0]
    q_index, v_index = idx[0], idx[1]
    n = q_index.shape[0]
    if mass.shape[0] != nv or effort.shape[0] != nv:
        return _WRONG_LENGTH + 2
    for k, arr in enumerate((q_d, qd_d, qdd_d)):
        if arr.shape[0] != n:
            return _WRONG_LENGTH + 3 + k
    for k, arr in enumerate((q, v, q_d, qd_d, qdd_d)):
        if not all_finite(arr):
            return _NOT_FINITE + 1 + k
    if not (all_finite(joint_gains[0]) and all_finite(joint_gains[1])):
        return _NOT_FINITE + 7
    if settings[S_EXTERNAL] == 0.0:
        desired_from_joints(mi, mf, ws, settings, idx, q, q_d, qd_d, qdd_d, jx, vec, des)
    if not all_finite(des):
        return _NOT_FINITE + 6
    ramped_gains(settings, g, joint_gains, t)
    body = int(settings[S_BODY])
    ft = S_FRAME_T
    zero, h = vec[V_ZERO, :nv], vec[V_H, :nv]
    for k in range(nv):
        zero[k] = 0.0
    if settings[S_FEEDFORWARD] != 0.0:
        kinematics(mi, mf, ws, q, v, zero, 0.0)
        point_acceleration(ws, body, settings[ft], settings[ft + 1], settings[ft + 2], vec[V_JDV])
    status = rnea(mi, mf, ws, q, v if settings[S_CORIOLIS] != 0.0 else zero, zero, h)
    if status != 0:
        return _KERNEL + status
    status = crba(mi, mf, ws, q, mass)   # leaves the poses of q in ws
    if status != 0:
        return _KERNEL + status
    jac, xt = jx[0], jx[1]
    point_jacobian(mi, ws, body, settings[ft], settings[ft + 1], settings[ft + 2], jac)
    pose = vec[V_POSE]
    frame_pose(ws, settings, pose, 0)
    # e = [log(R_d R^T); p_d - p]
    r = pose
    d = des
    rr = (d[0] * r[0] + d[1] * r[1] + d[2] * r[2], d[0] * r[3] + d[1] * r[4] + d[2] * r[5],
          d[0] * r[6] + d[1] * r[7] + d[2] * r[8], d[3] * r[0] + d[4] * r[1] + d[5] * r[2],
          d[3] * r[3] + d[4] * r[4] + d[5] * r[5], d[3] * r[6] + d[4] * r[7] + d[5] * r[8],
          d[6] * r[0] + d[7] * r[1] + d[8] * r[2], d[6] * r[3] + d[7] * r[4] + d[8] * r[5],
          d[6] * r[6] + d[7] * r[7] + d[8] * r[8])
    e = vec[V_ERROR]
    e[0], e[1], e[2] = log_rotation(rr[0], rr[1], rr[2], rr[3], rr[4], rr[5], rr[6], rr[7], rr[8])
    for k in range(3):
        e[3 + k] = d[D_POSE + 9 + k] - pose[9 + k]
    twist = vec[V_TWIST]
    for a in range(6):
        s = 0.0
        for c in range(nv):
            s += jac[a, c] * v[c]
        twist[a] = s
    # M = L D L^T; X^T = J M^-1 row by row; Lambda^-1 = J X
    for r in range(nv):
        for c in range(nv):
            g[G_MASS, nv * r + c] = mass[r, c]
    if not ldlt_factor(g, G_MASS, 0, nv, nv):
        return _MASS_SINGULAR
    for a in range(6):
        for c in range(nv):
            xt[a, c] = jac[a, c]
        ldlt_solve(g, G_MASS, nv, xt[a], 0)
    for a in range(6):
        for b in range(6):
            s = 0.0
            for c in range(nv):
                s += jac[a, c] * xt[b, c]
            g[G_LAMBDA_INV, 6 * a + b] = s
    if not ldlt_factor(g, G_LAMBDA_INV, 0, 6, 6):
        return _TASK_SINGULAR
    for a in range(6):
        for b in range(6):
            g[G_LAMBDA, 6 * a + b] = 1.0 if a == b else 0.0
        ldlt_solve(g, G_LAMBDA_INV, 6, g[G_LAMBDA], 6 * a)
    if settings[S_ZETA] > 0.0 and not critical_damping(g, settings[S_ZETA]):
        return _TASK_SINGULAR
    f = vec[V_WRENCH]
    for a in range(6):
        s = 0.0
        for b in range(6):
            s += g[G_K, 6 * a + b] * e[b] + g[G_D, 6 * a + b] * (d[D_TWIST + b] - twist[b])
        f[a] = s
    if settings[S_SHAPING] != 0.0:   # F = Lambda Lambda_d^-1 (K e + D edot + F_ext) - F_ext
        fext, y = vec[V_FEXT], vec[V_Y]
        for a in range(6):
            y[a] = (f[a] + fext[a]) * fext[6 + a]
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += g[G_LAMBDA, 6 * a + b] * y[b]
            f[a] = s - fext[a]
    if settings[S_FEEDFORWARD] != 0.0:
        for a in range(6):
            s = 0.0
            for b in range(6):
                s += g[G_LAMBDA, 6 * a + b] * (d[D_RATE + b] - vec[V_JDV, b])
            f[a] += s
    # tau_0, and y = Lambda X^T tau_0 for its projection tau_0 - J^T y
    tau0, y = vec[V_TAU0, :nv], vec[V_Y]
    for k in range(nv):
        tau0[k] = 0.0
    for j in range(n):
        tau0[v_index[j]] = joint_gains[0, j] * (q_d[j] - q[q_index[j]]) + joint_gains[1, j] * (qd_d[j] - v[v_index[j]])
    for a in range(6):
        s = 0.0
        for c in range(nv):
            s += xt[a, c] * tau0[c]
        y[6 + a] = s
    for a in range(6):
        s = 0.0
        for b in range(6):
            s += g[G_LAMBDA, 6 * a + b] * y[6 + b]
        y[a] = f[a] - s
    for c in range(nv):
        s = h[c] + tau0[c]
        for a in range(6):
            s += jac[a, c] * y[a]
        effort[c] = s
    if not all_finite(effort):
        return _NOT_FINITE + 7
    return _OK


class CartesianImpedance(Controller):
    """Cartesian impedance control of one frame of a fixed-base arm (module docstring).

    The 6 values of ``stiffness`` and ``damping`` (and ``stiffness_limit``, ``damping_limit``) are
    **translational first**: ``[x, y, z, rx, ry, rz]`` in N/m (N s/m) then N m/rad (N m s/rad), about world
    axes at the frame origin; 36 values give a full symmetric matrix row-major in that order. Internally
    (``stiffness_matrix``, ``damping_matrix``, ``wrench``, ``error``) the order is [angular; linear].
    """


    @dataclass(frozen=True)
    class Options(OptionsBase):
        frame: str = setting("str", None, required=True)             # a link or frame of the model
        stiffness: object = setting("floats", None, required=True)   # N/m x3, N m/rad x3 (or 36 values)
        damping: object = setting("floats", None)                    # N s/m x3, N m s/rad x3 (or 36 values)
        damping_ratio: float = setting("float", None, positive=True)  # default 1 when damping is not given
        nullspace_stiffness: object = setting("floats", 10.0, low=0.0)   # N m/rad per joint
        nullspace_damping: object = setting("floats", None, low=0.0)     # N m s/rad; default critical at q0
        coriolis: bool = setting("bool", True)                        # + C(q, v) v
        inertia_feedforward: bool = setting("bool", False)            # + J^T Lambda (xddot_d - Jdot v)
        gain_ramp: float = setting("float", 0.1, low=0.0, high=10.0)  # s over which a K or D change is blended
        stiffness_limit: object = setting("floats", None, positive=True)   # default STIFFNESS_LIMIT
        damping_limit: object = setting("floats", None, positive=True)     # default DAMPING_LIMIT
        wrench_sensor: str = setting("str", None)     # a force_torque sensor of the robot: close on its wrench
        task_inertia: object = setting("floats", None, positive=True)   # kg x3, kg m^2 x3: Lambda_d, with it
        tool_mass: float = setting("float", 0.0, low=0.0)   # kg the sensor carries that the model does not have
        tool_com: object = setting("floats", None)          # m, its centre of mass in the sensor's frame
        tare_on_start: bool = setting("bool", False)        # tared at each run's second cycle, zero before

    @classmethod
    def from_config(cls, options: dict, context) -> CartesianImpedance:
        controller = cls(context.dynamics, cls.Options(**options), posture=context.q0)
        context.cartesian_controller = controller   # a Cartesian trajectory built next follows it
        return controller

    def __init__(self, dyn: Dynamics, options: "CartesianImpedance.Options", *, posture=None):
        if not isinstance(dyn, Dynamics):
            raise TypeError(f"{self.name}: dyn must be an rtctl.dynamics.Dynamics, got {type(dyn).__name__}")
        self.options = o = options_of(self, options)
        frame, stiffness, damping, damping_ratio = o.frame, o.stiffness, o.damping, o.damping_ratio
        nullspace_stiffness, nullspace_damping, coriolis = o.nullspace_stiffness, o.nullspace_damping, o.coriolis
        inertia_feedforward, gain_ramp = o.inertia_feedforward, o.gain_ramp
        stiffness_limit, damping_limit = o.stiffness_limit, o.damping_limit
        model = dyn.model
        if damping is not None and damping_ratio is not None:
            raise ValueError(f"{self.name}: give damping or damping_ratio, not both")
        self.stiffness_limit = self._limit(STIFFNESS_LIMIT if stiffness_limit is None else stiffness_limit,
                                           "stiffness_limit")
        self.damping_limit = self._limit(DAMPING_LIMIT if damping_limit is None else damping_limit, "damping_limit")
        stiffness_matrix = self.checked_stiffness(stiffness)
        damping_matrix = None if damping is None else self.checked_damping(damping)
        zeta = 1.0 if damping is None and damping_ratio is None else damping_ratio
        try:
            f = model.frame(frame)
        except ModelError as exc:
            raise ValueError(f"{self.name}: frame: {exc}") from None
        if f.body < 0:
            raise ValueError(f"{self.name}: frame '{frame}' is fixed to the world; it cannot be moved")
        try:
            self._set_up(dyn, nullspace_stiffness, None)
        except ValueError as exc:
            raise ValueError(f"{self.name}: nullspace_stiffness: one value or one per actuated joint, finite and "
                             f">= 0 ({exc})") from None
        if self.model.nv != self.n or self.model.base != "fixed":
            raise ValueError(f"{self.name}: needs a fixed-base model whose every DOF is actuated; model "
                             f"'{model.name}' has {model.nv} DOFs, {self.n} actuated")
        self.frame = frame
        nv = model.nv
        self.idx = np.ascontiguousarray(np.array([self.q_index, self.v_index], dtype=np.int64).reshape(2, self.n))
        self.q_index, self.v_index = self.idx[0], self.idx[1]
        self.joint_gains = np.zeros((4, self.n))   # K_n, D_n, a K_n change's from and to
        self.joint_gains[0] = self.kp
        if nullspace_damping is None:
            q0 = model.neutral_configuration() if posture is None else np.asarray(posture, dtype=float)
            inertia = np.diag(dyn.mass_matrix(np.ascontiguousarray(q0, dtype=float)))[self.v_index]
            self.joint_gains[1] = 2.0 * np.sqrt(self.kp * inertia)
        else:
            self.joint_gains[1] = np.broadcast_to(np.asarray(nullspace_damping, dtype=float), (self.n,))
        if not np.all(np.isfinite(self.joint_gains)) or np.any(self.joint_gains < 0):
            raise ValueError(f"{self.name}: nullspace_stiffness and nullspace_damping must be finite and >= 0, got "
                             f"{self.joint_gains[0].tolist()}, {self.joint_gains[1].tolist()}")
        self.kp, self.kd = self.joint_gains[0], self.joint_gains[1]   # set_gains writes through to the step
        self.settings = np.zeros(S_WIDTH)
        s = self.settings
        s[S_RAMP_T0] = -math.inf
        s[S_RAMP_TIME] = float(gain_ramp)
        s[S_ZETA] = s[S_ZETA_FROM] = s[S_ZETA_TO] = 0.0 if zeta is None else float(zeta)
        s[S_CORIOLIS] = float(bool(coriolis))
        s[S_FEEDFORWARD] = float(bool(inertia_feedforward))
        s[S_BODY] = f.body
        s[S_FRAME_R:S_FRAME_R + 9] = np.asarray(f.rotation, dtype=float).reshape(9)
        s[S_FRAME_T:S_FRAME_T + 3] = f.translation
        self.gains = np.zeros((G_ROWS, max(36, nv * nv)))
        for row in (G_K_FROM, G_K_TO, G_K):
            self.gains[row, :36] = stiffness_matrix.reshape(36)
        if damping_matrix is not None:
            for row in (G_D_FROM, G_D_TO, G_D):
                self.gains[row, :36] = damping_matrix.reshape(36)
        self.desired = np.zeros(D_WIDTH)
        self.telemetry_values = self.desired[D_POSE:D_POSE + 12]   # the target pose, as the 3D view draws it
        self.telemetry_fields = target_pose_fields(frame)
        self.telemetry_units = ("1",) * 9 + ("m",) * 3
        self._mass = np.zeros((nv, nv))
        self._jx = np.zeros((2, 6, nv))
        self._vec = np.zeros((V_ROWS, max(nv, 12)))
        self.reference = None
        self._anchor_pending = True
        self._shaping(o)

    def _shaping(self, o) -> None:
        """The inverse task inertia of ``task_inertia`` (module docstring), used once a sensor is bound."""
        self.wrench_processing = None
        self._tare_pending = 0      # cycles until the tare: the run's second (the first is read before any effort)
        if (o.wrench_sensor is None) != (o.task_inertia is None):
            raise ValueError(f"{self.name}: wrench_sensor and task_inertia go together (the measured wrench and "
                             "the inertia the frame shows with it)")
        if o.task_inertia is None:
            return
        if o.damping is None:
            raise ValueError(f"{self.name}: task_inertia needs damping (a matrix): damping_ratio designs D for the "
                             "robot's own task inertia")
        inertia = np.broadcast_to(np.asarray(o.task_inertia, dtype=float), (6,))
        self._vec[V_FEXT, 6:12] = 1.0 / np.concatenate([inertia[3:], inertia[:3]])   # [angular; linear]

    def close_on(self, sensor) -> None:
        """Close on ``sensor``'s measured wrench (module docstring): a force-torque
        :class:`~rtctl.drivers.sensor.Sensor` on this controller's model."""
        o = self.options
        if o.task_inertia is None:
            raise ValueError(f"{self.name}: closing on a measured wrench needs task_inertia")
        processing = WrenchProcessing(self.model, sensor, tool_mass=o.tool_mass,
                                      tool_com=(0.0, 0.0, 0.0) if o.tool_com is None else o.tool_com)
        self._wrench_target = processing.target(self.frame)
        self.wrench_processing = processing
        self.settings[S_SHAPING] = 1.0

    def add_loop_hooks(self, loop) -> None:
        """With ``wrench_sensor``: close on that sensor of the loop's (:meth:`close_on`)."""
        name = self.options.wrench_sensor
        if name is None:
            return
        sensors = {s.options.name: s for s in loop.sensors}
        if name not in sensors:
            raise ValueError(f"wrench_sensor: the robot has no sensor {name!r} (its sensors: {sorted(sensors)})")
        self.close_on(sensors[name])

    # -- checks --------------------------------------------------------------------------------
    def _limit(self, values, name) -> np.ndarray:
        arr = np.asarray(values, dtype=float).reshape(-1)
        if arr.shape != (6,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"{self.name}: {name} needs 6 finite values > 0 (x, y, z, rx, ry, rz), got {values!r}")
        return arr

    def _within_limit(self, matrix, limit, name) -> None:
        diagonal = np.diag(user_matrix(matrix))
        k = int(np.argmax(diagonal - limit))
        if diagonal[k] > limit[k]:
            axis = ("x", "y", "z", "rx", "ry", "rz")[k]
            raise ValueError(f"{self.name}: {name} along {axis} = {diagonal[k]:g} exceeds {name}_limit {limit[k]:g}")

    def checked_stiffness(self, values) -> np.ndarray:
        """``values`` (6 or 36, user order) as the internal K; ValueError naming ``stiffness`` unless finite,
        symmetric positive definite and within ``stiffness_limit``."""
        matrix = task_matrix(values, "stiffness", self.name)
        problem = definiteness_problem(matrix, "stiffness", strict=True)
        if problem:
            raise ValueError(f"{self.name}: {problem}")
        self._within_limit(matrix, self.stiffness_limit, "stiffness")
        return matrix

    def checked_damping(self, values) -> np.ndarray:
        """``values`` (6 or 36) as the internal D; symmetric positive semi-definite, within ``damping_limit``."""
        matrix = task_matrix(values, "damping", self.name)
        problem = definiteness_problem(matrix, "damping", strict=False)
        if problem:
            raise ValueError(f"{self.name}: {problem}")
        self._within_limit(matrix, self.damping_limit, "damping")
        return matrix

    # -- the Cartesian reference -----------------------------------------------------------------
    def follow(self, reference) -> None:
        """Take the desired pose from ``reference`` (a :class:`~rtctl.loops.cartesian.CartesianReference`)
        instead of the forward kinematics of ``q_d``."""
        if not isinstance(reference, CartesianReference):
            raise TypeError(f"{self.name}: a Cartesian reference is a CartesianReference (anchor() and "
                            f"evaluate()); got {type(reference).__name__}")
        self.reference = reference
        self.settings[S_EXTERNAL] = 1.0

    def on_activate(self) -> None:
        """The Cartesian reference restarts from the measured pose at the next cycle; a gain ramp completes."""
        self._anchor_pending = True
        self._tare_pending = 2 if self.options.tare_on_start else 0
        self.gains[G_K_FROM] = self.gains[G_K_TO]
        self.gains[G_D_FROM] = self.gains[G_D_TO]
        self.settings[S_ZETA] = self.settings[S_ZETA_FROM] = self.settings[S_ZETA_TO]
        if self.settings[S_NULLSPACE_RAMP]:
            self.joint_gains[0] = self.joint_gains[3]
            self.settings[S_NULLSPACE_RAMP] = 0.0
        self.settings[S_RAMP_T0] = -math.inf

    # -- the live settings (control channel protocol) ----------------------------------------------
    def impedance_limits(self) -> dict:
        """What ``set_impedance`` may set: per-axis bounds of K and D (user order), the damping mode."""
        return {"stiffness": self.stiffness_limit.tolist(), "damping": self.damping_limit.tolist(),
                "damping_mode": "ratio" if self.settings[S_ZETA] > 0 else "matrix",
                "gain_ramp": float(self.settings[S_RAMP_TIME]), "joints": self.n}

    def check_impedance(self, stiffness=None, damping=None, damping_ratio=None) -> tuple:
        """(K, D, zeta) of a change, checked; ValueError naming the field. Nothing is applied."""
        if damping is not None and self.settings[S_ZETA] > 0:
            raise ValueError(f"{self.name}: damping: this controller sets D from damping_ratio "
                             f"{self.settings[S_ZETA]:g}; change damping_ratio instead")
        if damping_ratio is not None:
            if self.settings[S_ZETA] <= 0:
                raise ValueError(f"{self.name}: damping_ratio: this controller has an explicit damping matrix; "
                                 "change damping instead")
            if not (isinstance(damping_ratio, (int, float)) and math.isfinite(damping_ratio)
                    and 0 < damping_ratio <= 10):
                raise ValueError(f"{self.name}: damping_ratio must be in (0, 10], got {damping_ratio!r}")
        k = None if stiffness is None else self.checked_stiffness(stiffness)
        d = None if damping is None else self.checked_damping(damping)
        return k, d, damping_ratio

    def set_impedance(self, stiffness=None, damping=None, damping_ratio=None, nullspace_stiffness=None) -> str:
        """Blend K (and D, or zeta, and the null-space stiffness K_n) to new values over ``gain_ramp`` s from the
        next cycle (module docstring). Call between cycles (the control channel does, at a cycle boundary).
        Returns what changed."""
        k, d, zeta = self.check_impedance(stiffness, damping, damping_ratio)
        if nullspace_stiffness is not None:
            try:
                k_n = np.broadcast_to(np.asarray(nullspace_stiffness, dtype=float), (self.n,)).copy()
            except (TypeError, ValueError):
                k_n = None
            if k_n is None or not np.all(np.isfinite(k_n)) or np.any(k_n < 0):
                raise ValueError(f"{self.name}: nullspace_stiffness: one value or one per actuated joint, finite "
                                 f"and >= 0, got {nullspace_stiffness!r}")
        self.joint_gains[2] = self.joint_gains[0]                   # a change under way restarts from here
        if nullspace_stiffness is not None:
            self.joint_gains[3] = k_n
            self.settings[S_NULLSPACE_RAMP] = 1.0
        g = self.gains
        g[G_K_FROM], g[G_D_FROM] = g[G_K], g[G_D]
        if k is not None:
            g[G_K_TO, :36] = k.reshape(36)
        if d is not None:
            g[G_D_TO, :36] = d.reshape(36)
        self.settings[S_ZETA_FROM] = self.settings[S_ZETA]         # a ratio blended like K and D: a step in
        if zeta is not None:                                        # zeta is a step in D (0.1 -> 10: 100 x)
            self.settings[S_ZETA_TO] = float(zeta)
        self.settings[S_RAMP_T0] = math.nan
        parts = []
        if k is not None:
            parts.append(f"stiffness={np.round(np.diag(user_matrix(k)), 6).tolist()}")
        if d is not None:
            parts.append(f"damping={np.round(np.diag(user_matrix(d)), 6).tolist()}")
        if zeta is not None:
            parts.append(f"damping_ratio={zeta:g}")
        if nullspace_stiffness is not None:
            parts.append(f"nullspace_stiffness={np.round(k_n, 6).tolist()}")
        return ", ".join(parts) + f" (blended over {self.settings[S_RAMP_TIME]:g} s)"

    @property
    def stiffness_matrix(self) -> np.ndarray:
        """K in use, 6 x 6 [angular; linear] (a copy)."""
        return self.gains[G_K, :36].reshape(6, 6).copy()

    @property
    def damping_matrix(self) -> np.ndarray:
        """D in use (the last cycle's, with damping_ratio), 6 x 6 [angular; linear] (a copy)."""
        return self.gains[G_D, :36].reshape(6, 6).copy()

    @property
    def task_inertia(self) -> np.ndarray:
        """Lambda of the last cycle, 6 x 6 [angular; linear] (a copy)."""
        return self.gains[G_LAMBDA, :36].reshape(6, 6).copy()

    @property
    def pose(self) -> np.ndarray:
        """The frame's measured pose (12) of the last cycle."""
        return self._vec[V_POSE, :12]

    @property
    def error(self) -> np.ndarray:
        """e = [log(R_d R^T); p_d - p] of the last cycle (rad, m; world axes)."""
        return self._vec[V_ERROR, :6]

    @property
    def wrench(self) -> np.ndarray:
        """F = [n; f] the impedance applies at the frame origin, last cycle (N m, N; world axes)."""
        return self._vec[V_WRENCH, :6]

    # -- the cycle ---------------------------------------------------------------------------------
    def frame_pose(self, q) -> np.ndarray:
        """World pose (12) of the frame at ``q`` (allocates: for checks)."""
        out = np.zeros(12)
        frame_pose_kernel(self.dyn.mi, self.dyn.mf, self.dyn.ws, self.settings,
                          np.ascontiguousarray(q, dtype=float), out)
        return out

    def tracked(self):
        """The frame's pose error ``[log(R_d R^T); p_d - p]`` (rad, m; world axes), not the posture's joints."""
        names = tuple(f"{self.frame} {axis} ({unit})" for axis, unit in
                      (("rx", "rad"), ("ry", "rad"), ("rz", "rad"), ("x", "m"), ("y", "m"), ("z", "m")))
        return names, self.error

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """Write the joint torques (nv) into ``effort``; allocation-free for float64 C vectors."""
        dyn = self.dyn
        ref = self.reference
        if ref is not None:
            des = self.desired
            if self._anchor_pending:
                if not all_finite(q):
                    raise ValueError(f"{self.name}: q contains NaN or inf")
                frame_pose_kernel(dyn.mi, dyn.mf, dyn.ws, self.settings, q, self._vec[V_POSE])
                ref.anchor(t, self._vec[V_POSE])
                self._anchor_pending = False
            ref.evaluate(t, des[D_POSE:D_POSE + 12], des[D_TWIST:D_TWIST + 6], des[D_RATE:D_RATE + 6])
        processing = self.wrench_processing
        if processing is not None:
            if self._tare_pending:
                self._tare_pending -= 1
                if not self._tare_pending:
                    processing.tare(q)
            if self._tare_pending:      # the run's first cycle, to be tared at the next: no wrench to close on
                self._vec[V_FEXT, :6] = 0.0
            else:
                processing.update(q, self._wrench_target, world_axes=True)
                self._vec[V_FEXT, :6] = processing.moved
        status = impedance_step(dyn.mi, dyn.mf, dyn.ws, self.idx, self.settings, self.gains, self.joint_gains,
                                float(t), q, v, q_d, qd_d, qdd_d, self.desired, self._mass, self._jx, self._vec,
                                effort)
        if status != _OK:
            self._raise(status)

    def _raise(self, status):
        if status >= _KERNEL:
            raise ValueError(f"{self.name}: dynamics kernel returned status {status - _KERNEL}")
        if status == _TASK_SINGULAR:
            raise ValueError(f"{self.name}: frame '{self.frame}' is at a kinematic singularity (J M^-1 J^T is not "
                             "positive definite)")
        if status == _MASS_SINGULAR:
            raise ValueError(f"{self.name}: the mass matrix is not positive definite")
        if status > _WRONG_LENGTH:
            k = status - _WRONG_LENGTH - 1
            raise ValueError(f"{self.name}: {_ARG_NAMES[k]} has the wrong length")
        raise ValueError(f"{self.name}: {_ARG_NAMES[status - _NOT_FINITE - 1]} contains NaN or inf")

    def __repr__(self):
        return f"CartesianImpedance(model='{self.model.name}', frame='{self.frame}')"


