"""Joint-space feedback controllers (Shah, Saha & Dutt, 2012, section 4.3).

Notation: ``q``, ``v`` the measured full state (nq, nv); ``q_d``, ``qd_d``,
``qdd_d`` the desired motion of the ``n`` actuated joints; ``e = q_d - q_theta``
and ``e_dot = qd_d - qd_theta`` the tracking errors of the actuated joints;
``Kp = diag(kp)``, ``Kd = diag(kd)`` (default ``kd = 2 sqrt(kp)``, the
critically damped choice of the paper for unit-inertia error dynamics).
``ID(q, v, a)`` is the recursive inverse dynamics (Fig. A.1,
:func:`rtctl.dynamics.kernels.rnea`).

* :class:`FeedForwardPD` -- eq. 31: ``tau = ID(q_d, qd_d, qdd_d) + Kp e + Kd e_dot``.
* :class:`ComputedTorque` -- eqs. 32, 37: ``tau = I(q) alpha + h(q, qd) = ID(q, qd, alpha)``,
  ``alpha = qdd_d + Kp e + Kd e_dot``; the closed loop is ``qdd = alpha`` (fixed base).
* :class:`FloatingBaseComputedTorque` -- eqs. 33-36 for a floating base: the base
  acceleration ``alpha_0 = -I_0^{-1} (I_{theta0}^T alpha_theta + h_0)`` (eq. 34) and the
  joint forces ``tau_theta = I_{theta0} alpha_0 + I_theta alpha_theta + h_theta`` (eq. 35)
  by :func:`rtctl.dynamics.kernels.floating_base_rnea` (eqs. 26-27): recursive passes
  and the 6 x 6 base block only, never eq. 36's inverse of the full GIM.
* :class:`PDGravity` -- ``tau = g(q) + Kp e + Kd e_dot``.
* :class:`PD` -- ``tau = Kp e + Kd e_dot``.
* :func:`create_controller` -- build one by name.

Real-time contract: :meth:`~loops.base.Controller.update` writes the ``nv``
generalized efforts in place -- the actuated entries, zeros elsewhere (the
rows of a floating base are exactly 0) -- and allocates nothing: one compiled
step (:func:`_control_step`) runs the whole law on work vectors preallocated at
construction and calls the dynamics kernels directly with ``dyn.mi``,
``dyn.mf``, ``dyn.ws``. Inputs must be C-contiguous float64 vectors for the
fast path; anything else is converted once (with a copy) or rejected with a
``ValueError`` naming the argument, as are wrong lengths, NaN/inf inputs and a
non-zero status from a dynamics kernel. A controller uses its ``Dynamics``
workspace, so like ``Dynamics`` it is not thread-safe; give the plant (or any
other user in another thread) its own ``Dynamics``.

Revolute-joint errors are plain differences (no wrapping to (-pi, pi]).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.core.errors import NumbaPendingDeprecationWarning

from rtctl.dynamics import Dynamics
from rtctl.dynamics import kernels as _k
from rtctl.dynamics.kernels import all_finite, floating_base_rnea, model_sizes, rnea
from rtctl.options import options_of, setting
from rtctl.registry import CONTROLLERS

from .base import Controller

__all__ = ["PD", "ComputedTorque", "FeedForwardPD", "FloatingBaseComputedTorque", "PDGravity",
           "create_controller"]

# Lists reach a compiled step only to be rejected there and converted on the slow path
# (``_CompiledController._converted_inputs``); numba's notice about typing them is not the caller's concern.
warnings.filterwarnings("ignore", message=r"(?s).*type 'reflected list' found for argument",
                        category=NumbaPendingDeprecationWarning)

# Control laws of the shared compiled step.
MODE_PD, MODE_PD_GRAVITY, MODE_FF_PD, MODE_COMPUTED_TORQUE, MODE_FLOATING_CT = 0, 1, 2, 3, 4

# Status codes of the step: 0 OK; WRONG_LENGTH + k / NOT_FINITE + k for the k-th
# argument of ``update`` (1 q, 2 v, 3 q_d, 4 qd_d, 5 qdd_d, 6 effort) or gain (7 kp, 8 kd);
# KERNEL + s: a dynamics kernel returned status s.
_OK = 0
_NOT_FINITE = 0
_WRONG_LENGTH = 10
_KERNEL = 100
_ARG_NAMES = ("q", "v", "q_d", "qd_d", "qdd_d", "effort", "kp", "kd")

_V = "float64[::1]"
# Few arguments on purpose: a call with 20 or more arguments leaves its argument tuple to the
# interpreter's bookkeeping (tracemalloc sees ~200 B retained per call, up to ~400 kB).
_SIG_STEP = ("int64(int64, int64[:, ::1], float64[:, ::1], float64[:, ::1], int64[:, ::1], "
             f"{_V}, {_V}, float64[:, ::1], float64[:, ::1], {_V}, {_V}, {_V}, {_V}, {_V}, {_V})")


@njit(cache=True)
def _argument_status(nq, nv, n, kp, kd, q, v, q_d, qd_d, qdd_d, effort):
    """_OK, or the status naming the first argument of the wrong length or with NaN/inf."""
    lengths = ((q, nq), (v, nv), (q_d, n), (qd_d, n), (qdd_d, n), (effort, nv), (kp, n), (kd, n))
    for k in range(8):  # gains may have been replaced after construction
        if lengths[k][0].shape[0] != lengths[k][1]:
            return _WRONG_LENGTH + k + 1
    checked = (q, v, q_d, qd_d, qdd_d, kp, kd)
    numbers = (1, 2, 3, 4, 5, 7, 8)
    for k in range(7):
        if not all_finite(checked[k]):
            return _NOT_FINITE + numbers[k]
    return _OK


@njit(cache=True)
def _model_terms(mode, mi, mf, ws, q_index, v_index, kp, kd, work, base_block, q, v, q_d, qd_d, qdd_d):
    """The inverse-dynamics term of law ``mode`` into ``work[3]``; the dynamics kernel's status."""
    nq, nv = model_sizes(mi)
    n = q_index.shape[0]
    qw, vw, aw, tau, acc = work[0, :nq], work[1, :nv], work[2, :nv], work[3, :nv], work[4, :nv]
    n0 = base_block.shape[0]
    if mode == MODE_PD_GRAVITY:  # g(q) = ID(q, 0, 0), base held still
        vw[:] = 0.0
        aw[:] = 0.0
        return rnea(mi, mf, ws, q, vw, aw, tau)
    if mode == MODE_FF_PD:  # ID at the desired joint state (measured base state)
        qw[:] = q
        vw[:] = v
        aw[:] = 0.0
        for j in range(n):
            qw[q_index[j]] = q_d[j]
            vw[v_index[j]] = qd_d[j]
            aw[v_index[j]] = qdd_d[j]
        if n0 == 0:
            return rnea(mi, mf, ws, qw, vw, aw, tau)
        return floating_base_rnea(mi, mf, ws, base_block, qw, vw, aw, acc, tau)
    if mode == MODE_COMPUTED_TORQUE or mode == MODE_FLOATING_CT:  # alpha, eq. 37
        aw[:] = 0.0
        for j in range(n):
            aw[v_index[j]] = qdd_d[j] + kp[j] * (q_d[j] - q[q_index[j]]) + kd[j] * (qd_d[j] - v[v_index[j]])
        if mode == MODE_COMPUTED_TORQUE:  # eq. 32 by one RNEA pass
            return rnea(mi, mf, ws, q, v, aw, tau)
        return floating_base_rnea(mi, mf, ws, base_block, q, v, aw, acc, tau)  # eqs. 34-35 (acc[:n0] = alpha_0)
    return _OK


@njit(_SIG_STEP, cache=True)
def _control_step(mode, mi, mf, ws, index, kp, kd, work, base_block, q, v, q_d, qd_d, qdd_d, effort):
    """One control cycle of law ``mode``; writes ``effort`` and returns a status code.

    ``index`` (2, n): the q and v indices of the actuated joints. ``work`` (5, >= nq)
    rows: q, v, a handed to the ID, its output tau, and the full acceleration of
    the floating-base ID. ``base_block``: n0 x n0 (n0 = floating-base DOFs, 0 for
    a fixed base).
    """
    nq, nv = model_sizes(mi)
    q_index, v_index = index[0], index[1]
    status = _argument_status(nq, nv, q_index.shape[0], kp, kd, q, v, q_d, qd_d, qdd_d, effort)
    if status != _OK:
        return status
    status = _model_terms(mode, mi, mf, ws, q_index, v_index, kp, kd, work, base_block, q, v, q_d, qd_d, qdd_d)
    if status != _OK:
        return _KERNEL + status
    tau = work[3, :nv]
    effort[:] = 0.0
    for j in range(q_index.shape[0]):
        iv = v_index[j]
        if mode == MODE_COMPUTED_TORQUE or mode == MODE_FLOATING_CT:
            effort[iv] = tau[iv]
        else:
            pd = kp[j] * (q_d[j] - q[q_index[j]]) + kd[j] * (qd_d[j] - v[iv])
            effort[iv] = pd if mode == MODE_PD else tau[iv] + pd
    return _OK


@njit(cache=True)
def _add_friction_compensation(effort, v_index, qd_d, viscous, coulomb):
    """effort += viscous qd_d + coulomb sign(qd_d) on the actuated joints (the desired velocity: no sensor noise)."""
    for j in range(v_index.shape[0]):
        effort[v_index[j]] += viscous[j] * qd_d[j] + coulomb[j] * np.sign(qd_d[j])


def _floating_base_dofs(model, v_index) -> int:
    """Number of unactuated base DOFs in front of the actuated joints (0 for a fixed base)."""
    n0 = int(v_index[0]) if len(v_index) else model.nv
    if n0 == 0:
        return 0
    prefix = np.concatenate([[0], np.cumsum(np.where(model.joint_type == 2, 6, 1))])
    nb0 = int(np.searchsorted(prefix, n0))
    if prefix[nb0] != n0 or any(model.parent[i] != i - 1 for i in range(1, nb0)):
        raise ValueError(f"model '{model.name}': its first {n0} DOFs are not a serial floating-base chain")
    return n0


class _CompiledController(Controller):
    """Shared machinery: work vectors, the compiled step, status -> ValueError.

    ``friction_compensation`` (the model-based laws) adds the joint friction of the model (a URDF's
    ``<dynamics damping friction>``, e.g. an identified one) along the desired velocity:
    ``damping qd_d + friction sign(qd_d)``, on the actuated joints.
    """

    mode = MODE_PD
    gain_units = ("N m/rad (N/m)", "N m s/rad (N s/m)")

    @dataclass(frozen=True)
    class Options(Controller.Options):
        friction_compensation: bool = setting("bool", False)   # + the model's <dynamics> friction along qd_d

    def __init__(self, dyn: Dynamics, options: "_CompiledController.Options | None" = None):
        if not isinstance(dyn, Dynamics):
            raise TypeError(f"{self.name}: dyn must be an rtctl.dynamics.Dynamics, got {type(dyn).__name__}")
        options = options_of(self, options)
        friction_compensation = isinstance(options, _CompiledController.Options) and options.friction_compensation
        try:
            super().__init__(dyn, options)
        except ValueError as exc:
            if str(exc).startswith(self.name) or str(exc).startswith("kp is required"):
                raise
            raise ValueError(f"{self.name}: kp and kd must be numbers or vectors with one entry per actuated "
                             f"joint (kp={options.kp!r}, kd={options.kd!r}): {exc}") from None
        m = self.model
        self.n_base = _floating_base_dofs(m, self.v_index)
        self._check_base()
        self._work = np.zeros((5, m.nq))
        self.alpha = self._work[2, :m.nv]  # acceleration handed to the ID (alpha for computed torque)
        self.tau = self._work[3, :m.nv]    # full ID output of the last cycle
        self.acc = self._work[4, :m.nv]    # floating base: full acceleration incl. the base part (eq. 34)
        self._base_block = np.zeros((self.n_base, self.n_base))
        self.friction_compensation = bool(friction_compensation)
        self._viscous = np.ascontiguousarray(m.damping[self.v_index])
        self._coulomb = np.ascontiguousarray(m.friction[self.v_index])

    def _check_base(self) -> None:
        pass

    def error_inertia(self, q) -> np.ndarray:
        """A torque-level PD acts on each joint through ``1 / (M(q)^-1)_jj``, the inertia the joint moves when
        every other DOF is free (a local bound: it changes as the robot moves)."""
        inverse = np.linalg.inv(Dynamics(self.model).mass_matrix(np.ascontiguousarray(q, dtype=float)))
        return 1.0 / np.diag(inverse)[self.v_index]

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """Write the generalized efforts (nv) for measured ``q`` (nq), ``v`` (nv) and the desired
        actuated-joint motion ``q_d``, ``qd_d``, ``qdd_d`` (n) into ``effort``; allocation-free."""
        try:
            status = _control_step(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, self.kp, self.kd,
                                   self._work, self._base_block, q, v, q_d, qd_d, qdd_d, effort)
        except TypeError:
            status = self._update_converted(q, v, q_d, qd_d, qdd_d, effort)
        if status != _OK:
            self._raise(status)
        if self.friction_compensation:
            self._compensate_friction(qd_d, effort)

    def _compensate_friction(self, qd_d, effort) -> None:
        try:
            _add_friction_compensation(effort, self.v_index, qd_d, self._viscous, self._coulomb)
        except TypeError:  # the slow path's inputs (lists, views), accepted by the control step
            _add_friction_compensation(effort, self.v_index, np.ascontiguousarray(qd_d, dtype=np.float64),
                                       self._viscous, self._coulomb)

    def _update_converted(self, q, v, q_d, qd_d, qdd_d, effort):
        """Slow path for inputs numba rejects (lists, other dtypes, strided views)."""
        args, kp, kd = self._converted_inputs(q, v, q_d, qd_d, qdd_d, effort)
        return _control_step(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, kp, kd,
                             self._work, self._base_block, *args, effort)

    def _converted_inputs(self, q, v, q_d, qd_d, qdd_d, effort):
        """``(q, v, q_d, qd_d, qdd_d)`` as float64 C vectors and the gains as C arrays; ValueError naming a bad one."""
        if (type(effort) is not np.ndarray or effort.dtype != np.float64 or effort.ndim != 1
                or not effort.flags.c_contiguous or not effort.flags.writeable):
            raise ValueError(f"{self.name}: effort must be a writable C-contiguous float64 array of shape "
                             f"({self.model.nv},)")
        args = []
        for name, x in zip(_ARG_NAMES, (q, v, q_d, qd_d, qdd_d)):
            try:
                arr = np.array(x, dtype=np.float64, order="C")
            except (TypeError, ValueError):
                raise ValueError(f"{self.name}: {name} must be a numeric vector") from None
            if arr.ndim != 1:
                raise ValueError(f"{self.name}: {name} must be a vector, got shape {arr.shape}")
            args.append(arr)
        kp = np.ascontiguousarray(self.kp, dtype=np.float64)
        kd = np.ascontiguousarray(self.kd, dtype=np.float64)
        return args, kp, kd

    def _raise(self, status):
        m = self.model
        sizes = (m.nq, m.nv, self.n, self.n, self.n, m.nv, self.n, self.n)
        if status >= _KERNEL:
            s = status - _KERNEL
            if s == _k.SINGULAR:
                raise ValueError(f"{self.name}: dynamics kernel reports a singular inertia "
                                 f"(status {s}): the base block I_0 is not positive definite")
            raise ValueError(f"{self.name}: dynamics kernel returned status {s} (a non-finite intermediate: "
                             f"check the gains and the size of the tracking error)")
        if status > _WRONG_LENGTH:
            k = status - _WRONG_LENGTH - 1
            raise ValueError(f"{self.name}: {_ARG_NAMES[k]} must have shape ({sizes[k]},)")
        raise ValueError(f"{self.name}: {_ARG_NAMES[status - _NOT_FINITE - 1]} contains NaN or inf")

    def __repr__(self):
        return f"{type(self).__name__}(model='{self.model.name}', n={self.n}, n_base={self.n_base})"


class FeedForwardPD(_CompiledController):
    """Feed-forward of the inverse dynamics plus joint PD, Shah, Saha & Dutt (2012) eq. 31.

    ``tau_theta = tau_ID + Kp (q_d - q_theta) + Kd (qd_d - qd_theta)``, with
    ``tau_ID`` the inverse dynamics along the desired motion (the gains act on
    torque, so scale them with the joint inertias). For a fixed base
    ``tau_ID = ID(q_d, qd_d, qdd_d)`` (one RNEA pass). For a floating base the
    base is not commanded, so ``tau_ID`` is evaluated at the *measured* base
    pose and velocity with the *desired* joint state, by the under-actuated
    inverse dynamics of eqs. 26-27 (:func:`~rtctl.dynamics.kernels.floating_base_rnea`):
    the base acceleration is the one the desired joint accelerations cause,
    and the base rows of the effort are 0.
    """

    mode = MODE_FF_PD


class ComputedTorque(_CompiledController):
    """Computed-torque control, Shah, Saha & Dutt (2012) eqs. 32 and 37 (fixed-base models).

    ``alpha = qdd_d + Kp (q_d - q) + Kd (qd_d - qd)`` (eq. 37) and
    ``tau = I(q) alpha + h(q, qd) = ID(q, qd, alpha)`` (eq. 32): one RNEA pass,
    no mass matrix. With an exact model the closed loop is ``qdd = alpha``,
    i.e. ``e_dd + Kd e_dot + Kp e = 0`` per joint (critically damped for the
    default ``kd = 2 sqrt(kp)``). The last ``alpha`` is kept in ``self.alpha``.
    Floating-base models need :class:`FloatingBaseComputedTorque`.
    """

    default_kp = 400.0
    mode = MODE_COMPUTED_TORQUE
    gain_units = Controller.gain_units

    def error_inertia(self, q) -> np.ndarray:
        return np.ones(self.n)

    def _check_base(self) -> None:
        if self.n_base:
            raise ValueError(f"{self.name}: model '{self.model.name}' has a floating base ({self.n_base} unactuated "
                             "DOFs); use FloatingBaseComputedTorque (kind 'floating_base_computed_torque')")


class FloatingBaseComputedTorque(_CompiledController):
    """Under-actuated computed-torque control of a floating-base robot, Shah, Saha & Dutt (2012) eqs. 33-37.

    With ``alpha_theta`` from eq. 37, eq. 33 (``tau = I alpha + h`` with a zero
    base part) splits into the base acceleration (eq. 34)
    ``alpha_0 = -I_0^{-1} (I_{theta0}^T alpha_theta + h_0)`` and the joint forces
    (eq. 35) ``tau_theta = I_{theta0} alpha_0 + I_theta alpha_theta + h_theta``,
    i.e. eq. 36 without forming ``I_theta - I_{theta0} I_0^{-1} I_{theta0}^T``.
    Both come recursively from :func:`~rtctl.dynamics.kernels.floating_base_rnea`:
    ``h~_0`` from an RNEA pass with ``[0; alpha_theta]``, ``I_0`` from the
    composite inertias (a 6 x 6 solve), then ``tau = ID(q, qd, [alpha_0; alpha_theta])``.
    The base rows of the effort are exactly 0; applied to the (contact-free)
    robot the joints accelerate at ``alpha_theta``. ``self.acc`` holds
    ``[alpha_0; alpha_theta]`` of the last cycle.
    """

    default_kp = 400.0
    mode = MODE_FLOATING_CT
    gain_units = Controller.gain_units

    def error_inertia(self, q) -> np.ndarray:
        return np.ones(self.n)

    def _check_base(self) -> None:
        if not self.n_base:
            raise ValueError(f"{self.name}: model '{self.model.name}' has a fixed base; use ComputedTorque "
                             "(kind 'computed_torque')")


class PDGravity(_CompiledController):
    """PD with gravity compensation: ``tau = g(q) + Kp e + Kd e_dot``, ``g(q) = ID(q, 0, 0)``.

    With an exact ``g`` a constant set point is asymptotically stable for any
    positive gains. For a floating base, ``g`` is the joint part of the
    gravity forces with the base held still; the base rows are 0.
    """

    mode = MODE_PD_GRAVITY


class PD(_CompiledController):
    """Independent joint PD: ``tau = Kp (q_d - q) + Kd (qd_d - qd)`` (no model terms)."""

    mode = MODE_PD
    Options = Controller.Options




def create_controller(kind: str, dyn: Dynamics, **gains) -> Controller:
    """Build a controller by name (:data:`rtctl.registry.CONTROLLERS`) with gains ``kp`` and optional ``kd``."""
    return CONTROLLERS.create(kind, dyn, **gains)
