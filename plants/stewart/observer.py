"""External-wrench observer of parallel platforms on their own generalized-momentum model (Lopes, 2009).

De Luca's residual (Haddadin, De Luca & Albu-Schaeffer, IEEE T-RO 33(6), 2017, eqs. 21-23; the tree-model
version is :mod:`rtctl.loops.observer`) with the platform pose ``x`` = [x, y, z, psi, theta, phi] (ZYX Euler
angles) as the generalized coordinates:

    p_E = T^T P,   P = M(x) xd = sum_k J_k^T L_k                     (eqs. 24-28, 45, 57, 67, 75 summed)
    p_E' = J_E^T tau + T^T F_ext + beta_E,   beta_E = T'^T P + T^T (sum_k J_k'^T L_k - G)
    r = K_O (p_E - p_E(0) - int (J_E^T tau + beta_E + r) ds),   r' = K_O (T^T F_ext - r)

``M`` is the paper's I|E (rows: {B} wrench [force; moment], columns: Euler rates), ``L_k`` the momentum of
body k (m v_c of each cylinder and piston, I|B omega of each leg) and ``J_k`` its Jacobian on the twist
u = T xd (J_B eq. 40, J_G eq. 62, J_D eq. 36), so P is the platform-space momentum and T = diag(I, J_A)
(eq. 23). Newton-Euler projected on the J_k (the model's own M xd' + V xd = sum_k J_k^T L_k') gives
P' = J_C^T tau + F_ext - G + sum_k J_k'^T L_k: the term ``sum J'^T L`` is the platform's C^T-like term
(M' xd - V xd), exact, from the analytic J_k' the Coriolis kernels already compute; beta_E = C_E^T xd - g_E
of the Euler-space model (M_E = T^T M). No acceleration, no finite difference.

Several platforms rigidly attached (the jaw robot: the robot and the jaw model, :mod:`rtctl.plants.jaw`)
sum their P and beta in the first platform's {B}: platform j sits at x_j = s_j x + c_j (coordinate signs
s_j, offset c_j) and its twists and wrenches map to {B} by the signs e_j (``maps`` rows M_SIGN, M_OFFSET,
M_TWIST).

Discrete form as in :mod:`rtctl.loops.observer`: the leg forces ``tau_{k-1}`` held over the period, J_E^T
tau_{k-1} and beta by the trapezoid rule between samples, eq. 23 integrated exactly:
r_k = a r_{k-1} + (1 - a) dE_k / dt, a = exp(-K_O dt). The estimates: the external wrench on the platform
F = T^-T r (= J_C^T tau_ext), the equivalent leg forces tau_ext = J_E^-T r, the wrench about a point of
the platform (a named frame).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import setting
from rtctl.rt.hooks import LoopHook

from . import kernels as _k
from .solvers import forward_kinematics, leg_rates_to_platform, solve6

jit = njit(cache=True)

M_SIGN, M_OFFSET, M_TWIST = 0, 1, 2
# Rows of the observer's float state (length 6 each).
X_P, X_BETA, X_R, X_NEW_P, X_NEW_BETA, X_Q, X_XD, X_TAU, X_F, X_Q2, X_PB, X_BB = range(12)
X_ROWS = 12
# Matrices of the observer: J_E now and at the last sample, J_C now, LU scratch.
Y_JE, Y_JE_PREV, Y_JC, Y_LU = range(4)
Y_ROWS = 4
# Status codes beyond the kernels' (OK, SINGULAR, FK_*).
NOT_FINITE = _k.NOT_FINITE


@jit
def platform_momentum(pts, par, x, xd, P, beta, wk, wv):
    """P = M(x) xd = sum_k J_k^T L_k and beta = sum_k J_k'^T L_k - G, both in {B} ([force; moment] rows)
    for one platform with its legs (module docstring). Uses ``wk``/``wv`` slots of :mod:`.kernels`."""
    Mw, Vw, G = wk[_k.K_M], wk[_k.K_V], wv[_k.V_G]
    _k.gm_matrices(pts, par, x, xd, _k.B_ALL, _k.ALL_LEGS, _k.W_INERTIA | _k.W_GRAVITY, Mw, Vw, G, wk, wv)
    for r in range(6):
        s = 0.0
        for c in range(6):
            s += Mw[r, c] * xd[c]
        P[r] = s
        beta[r] = -G[r]
    R, JA, JAd, u = wk[_k.K_R], wk[_k.K_JA], wk[_k.K_JAD], wv[_k.V_U]
    _k.euler_terms(x, xd, R, JA, JAd, u)
    bc, bs, mc, ms = par[_k.P_BC], par[_k.P_BS], par[_k.P_MC], par[_k.P_MS]
    ix, iy, iz = par[_k.P_ICX] + par[_k.P_ISX], par[_k.P_ICY] + par[_k.P_ISY], par[_k.P_ICZ] + par[_k.P_ISZ]
    lin, ang = wv[_k.V_T1], wv[_k.V_T2]
    for i in range(6):
        _k.leg_kinematics(i, pts, x, R, u, wk, wv, True)
        K, Kd, N, Nd, JD, JDd = wk[_k.K_K], wk[_k.K_KD], wk[_k.K_N], wk[_k.K_ND], wk[_k.K_JD], wk[_k.K_JDD]
        _k.leg_frame(wv[_k.V_L], wv[_k.V_LD], wv[_k.V_N], wv[_k.V_ND], wk, wv, False)
        IB = wk[_k.K_IB]
        _k._rotated_inertia(wk[_k.K_RC], wk[_k.K_RCD], ix, iy, iz, IB, wk[_k.K_IBD], False)
        for r in range(3):
            n_u, k_u, w = 0.0, 0.0, 0.0
            for c in range(6):
                n_u += N[r, c] * u[c]
                k_u += K[r, c] * u[c]
                w += JD[r, c] * u[c]
            lin[r] = n_u                      # N u: J_B u = b_C N u, J_G u = K u - b_S N u
            ang[r] = k_u
            wv[_k.V_R6][r] = w                # leg angular velocity J_D u
        for r in range(3):
            wv[_k.V_R6][3 + r] = IB[r, 0] * wv[_k.V_R6][0] + IB[r, 1] * wv[_k.V_R6][1] + IB[r, 2] * wv[_k.V_R6][2]
        for c in range(6):
            s = 0.0
            for r in range(3):
                l_cyl = mc * bc * lin[r]
                l_pis = ms * (ang[r] - bs * lin[r])
                s += bc * Nd[r, c] * l_cyl + (Kd[r, c] - bs * Nd[r, c]) * l_pis + JDd[r, c] * wv[_k.V_R6][3 + r]
            beta[c] += s


@jit
def momentum_terms(pts_all, par_all, maps, x, xd, p, beta, PB, betaB, wk, wv):
    """Euler-space p = T^T P and beta = T'^T P + T^T sum_j e_j beta_j of the platforms rigidly attached
    (``maps``: module docstring); PB, betaB receive the {B} sums."""
    xj, xdj, Pj, bj = wv[_k.V_X], wv[_k.V_XD], wv[_k.V_Q1], wv[_k.V_Q2]
    for r in range(6):
        PB[r] = 0.0
        betaB[r] = 0.0
    for j in range(pts_all.shape[0]):
        for k in range(6):
            xj[k] = maps[j, M_SIGN, k] * x[k] + maps[j, M_OFFSET, k]
            xdj[k] = maps[j, M_SIGN, k] * xd[k]
        platform_momentum(pts_all[j], par_all[j], xj, xdj, Pj, bj, wk, wv)
        for k in range(6):
            PB[k] += maps[j, M_TWIST, k] * Pj[k]
            betaB[k] += maps[j, M_TWIST, k] * bj[k]
    R, JA, JAd = wk[_k.K_R], wk[_k.K_JA], wk[_k.K_JAD]
    _k.euler_terms(x, xd, R, JA, JAd, wv[_k.V_U])
    for k in range(3):
        p[k] = PB[k]
        beta[k] = betaB[k]
        p[3 + k] = JA[0, k] * PB[3] + JA[1, k] * PB[4] + JA[2, k] * PB[5]
        beta[3 + k] = (JA[0, k] * betaB[3] + JA[1, k] * betaB[4] + JA[2, k] * betaB[5]
                       + JAd[0, k] * PB[3] + JAd[1, k] * PB[4] + JAd[2, k] * PB[5])


@jit
def observer_step(pts_all, par_all, maps, q, v, tau, x_est, fk_tol, fk_max_iter, X, Y, decay, dt, first, wk, wv):
    """One cycle on the measured leg lengths q, rates v and the leg forces tau held over the last period:
    the pose by forward kinematics warm-started at ``x_est`` (first platform), xd = J_E^-1 v, then the
    residual (module docstring) into X[X_R], the leg forces equivalent to it into X[X_TAU] and the wrench
    [force; moment about the platform centre] in {B} into X[X_F]. Returns OK, NOT_FINITE or the status of
    the forward kinematics / a singular J_E (nothing updated but the warm start)."""
    for k in range(6):
        if not (np.isfinite(q[k]) and np.isfinite(v[k]) and np.isfinite(tau[k])):
            return NOT_FINITE
    pts, par = pts_all[0], par_all[0]
    st = forward_kinematics(pts, par, q, x_est, fk_tol, fk_max_iter, wk, wv)
    if st != _k.OK:
        return st
    xd = X[X_XD]
    st = leg_rates_to_platform(pts, x_est, v, xd, wk, wv)
    if st != _k.OK:
        return st
    JE, JC = Y[Y_JE], Y[Y_JC]
    for r in range(6):
        for c in range(6):
            JE[r, c] = wk[_k.K_S3][r, c]
            JC[r, c] = wk[_k.K_JC][r, c]
    p, beta, res = X[X_NEW_P], X[X_NEW_BETA], X[X_R]
    momentum_terms(pts_all, par_all, maps, x_est, xd, p, beta, X[X_PB], X[X_BB], wk, wv)
    JEp = Y[Y_JE_PREV]
    for k in range(6):
        if first:
            res[k] = 0.0
        else:
            qk = 0.0
            for i in range(6):
                qk += 0.5 * (JEp[i, k] + JE[i, k]) * tau[i]
            dE = p[k] - X[X_P, k] - dt * (qk + 0.5 * (X[X_BETA, k] + beta[k]))
            res[k] = decay[k] * res[k] + (1.0 - decay[k]) * dE / dt
        X[X_P, k] = p[k]
        X[X_BETA, k] = beta[k]
    for r in range(6):
        for c in range(6):
            JEp[r, c] = JE[r, c]
    st = solve6(JE, res, X[X_TAU], Y[Y_LU], True)
    if st != _k.OK:
        return st
    for c in range(6):
        s = 0.0
        for i in range(6):
            s += JC[i, c] * X[X_TAU, i]
        X[X_F, c] = s
    return _k.OK


@jit
def wrench_at_point(R, point, F, out):
    """[n; f] (Featherstone order) about the platform point ``point`` (in {P}) of F = [f; n_centre] in {B}:
    n = n_centre - (R point) x f."""
    ax = R[0, 0] * point[0] + R[0, 1] * point[1] + R[0, 2] * point[2]
    ay = R[1, 0] * point[0] + R[1, 1] * point[1] + R[1, 2] * point[2]
    az = R[2, 0] * point[0] + R[2, 1] * point[1] + R[2, 2] * point[2]
    out[0] = F[3] - (ay * F[2] - az * F[1])
    out[1] = F[4] - (az * F[0] - ax * F[2])
    out[2] = F[5] - (ax * F[1] - ay * F[0])
    out[3], out[4], out[5] = F[0], F[1], F[2]


def check_gain(gain, who: str) -> np.ndarray:
    """K_O (1/s): a scalar or one per pose coordinate, finite and > 0."""
    g = np.asarray(gain, dtype=float)
    if g.ndim == 0:
        g = np.full(6, float(g))
    if g.shape != (6,) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"{who}: gain must be finite and > 0, a scalar or 6 values (1/s), got {gain!r}")
    return g


class PlatformObserver:
    """The residual of a platform (module docstring) from the loop's leg lengths, rates and leg forces,
    allocation-free per cycle (one compiled call).

    ``platforms``: [(pts, par), ...] rigidly attached, the first carrying the legs; ``maps``: (n, 3, 6) or
    None (one platform); ``frames``: {name: point in {P} (m)} where :attr:`wrench` can be taken; ``home``:
    the forward kinematics' first guess. After :meth:`update`: :attr:`x`, :attr:`xd` (pose, rate),
    :attr:`residual` (Euler space, N and N m), :attr:`leg_residual` (N), :attr:`platform_wrench`
    ([force; moment about the centre] in {B}), :attr:`wrench` ([n; f] about ``frame``, base axes),
    :attr:`momentum` (p_E).
    """

    def __init__(self, platforms, gain, dt: float, *, frames: dict, frame: str, home, maps=None,
                 fk_tol: float = 1e-11, fk_max_iter: int = 20, name: str = "observer"):
        self.name = name
        if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"{name}: dt must be a finite period > 0 s, got {dt!r}")
        self.dt = float(dt)
        self.gain = check_gain(gain, name)
        self.decay = np.exp(-self.gain * self.dt)
        self.pts_all = np.ascontiguousarray(np.stack([p for p, _ in platforms]), dtype=float)
        self.par_all = np.ascontiguousarray(np.stack([p for _, p in platforms]), dtype=float)
        if maps is None:
            maps = np.zeros((1, 3, 6))
            maps[0, M_SIGN] = maps[0, M_TWIST] = 1.0
        self.maps = np.ascontiguousarray(maps, dtype=float)
        self.frames = {k: np.ascontiguousarray(v, dtype=float) for k, v in frames.items()}
        if frame not in self.frames:
            raise ValueError(f"{name}: frame '{frame}' does not exist; frames of this platform: {sorted(self.frames)}")
        self.frame, self._point = frame, self.frames[frame]
        self.fk_tol, self.fk_max_iter = float(fk_tol), int(fk_max_iter)
        self.home = np.array(home, dtype=float)
        self.x = self.home.copy()
        self._X = np.zeros((X_ROWS, 6))
        self._Y = np.zeros((Y_ROWS, 6, 6))
        self._wk, self._wv = np.zeros((_k.NWK, 6, 6)), np.zeros((_k.NWV, 6))
        X = self._X
        self.momentum, self.residual, self.xd = X[X_P], X[X_R], X[X_XD]
        self.leg_residual, self.platform_wrench = X[X_TAU], X[X_F]
        self.wrench = np.zeros(6)
        self._R = np.zeros((3, 3))
        self._first = True
        self.samples = 0
        self.status = _k.OK

    def reset(self) -> None:
        """Restart: the next :meth:`update` takes its momentum as p(0) and sets r = 0."""
        self._first = True

    def warm(self, q, v, tau) -> None:
        """Reach :meth:`update`'s kernels (:mod:`rtctl.rt.warmup`) on copies of this observer's arrays, whether or
        not the forward kinematics converges at ``q``: its state stays as it is."""
        observer_step(self.pts_all, self.par_all, self.maps, q, v, tau, self.x.copy(), self.fk_tol, self.fk_max_iter,
                      self._X.copy(), self._Y.copy(), self.decay, self.dt, True, self._wk.copy(), self._wv.copy())
        R = np.zeros((3, 3))
        _k.rotation(self.home, R)
        wrench_at_point(R, self._point, np.zeros(6), np.zeros(6))

    def update(self, q, v, tau) -> bool:
        """One cycle; False (estimates unchanged, :attr:`status` says why) on a non-finite input, a failed
        forward kinematics or a singular J_E."""
        st = observer_step(self.pts_all, self.par_all, self.maps, q, v, tau, self.x, self.fk_tol, self.fk_max_iter,
                           self._X, self._Y, self.decay, self.dt, self._first, self._wk, self._wv)
        self.status = st
        if st != _k.OK:
            return False
        self._first = False
        self.samples += 1
        _k.rotation(self.x, self._R)
        wrench_at_point(self._R, self._point, self.platform_wrench, self.wrench)
        return True

    def terms(self, x, xd):
        """``(p_E, beta_E, P, beta_B)`` at a pose and rate, as new arrays (checks and tests; allocates)."""
        out = [np.zeros(6) for _ in range(4)]
        momentum_terms(self.pts_all, self.par_all, self.maps, np.ascontiguousarray(x, dtype=float),
                       np.ascontiguousarray(xd, dtype=float), *out, np.zeros_like(self._wk), np.zeros_like(self._wv))
        return tuple(out)


class PlatformObserverHook(LoopHook):
    """A :class:`PlatformObserver` as one of the loop's ``hooks``: updated every cycle on the measured state
    and the leg forces applied over the last period; telemetry: the residual per leg (N) and the wrench at
    its frame ([n; f], N m and N)."""

    prefix = "platform"

    def __init__(self, observer: PlatformObserver, legs=("leg1", "leg2", "leg3", "leg4", "leg5", "leg6")):
        self.observer = observer
        self.telemetry_fields = ([f"{self.prefix}_residual/{j}" for j in legs]
                                 + [f"{self.prefix}_wrench/{c}" for c in ("nx", "ny", "nz", "fx", "fy", "fz")])
        self.telemetry_values = np.zeros(len(self.telemetry_fields))

    def attach(self, loop):
        loop.hooks.append(self)
        return self

    def on_start(self) -> None:
        """A run starts: the torque measured before it does not continue the last run's."""
        self.observer.reset()

    def warm(self, cycle) -> None:
        self.observer.warm(cycle.state.q, cycle.state.v, cycle.state.effort)

    def publish(self) -> None:
        values, obs = self.telemetry_values, self.observer
        values[:6] = obs.leg_residual
        values[6:12] = obs.wrench

    def __call__(self, cycle: int, t: float, state, command) -> None:
        if self.observer.update(state.q, state.v, state.effort):
            self.publish()


def stewart_observer(mechanism, gain, dt: float, frame: str = "platform", **options) -> PlatformObserver:
    """The observer of a :class:`~rtctl.plants.stewart.model.StewartPlatform` (the model the controller
    uses; a different one than the plant's is a model error). Frames: ``platform`` (its centre)."""
    return PlatformObserver([(mechanism.pts, mechanism.par)], gain, dt, frames={"platform": np.zeros(3)},
                            frame=frame, home=mechanism.home, name="stewart observer", **options)


@dataclass(frozen=True)
class ObserverOptions:
    """The ``[observer]`` section of a Stewart run: the platform's external-wrench observer on telemetry."""

    enabled: bool = setting("bool", False)
    gain: float = setting("float", 50.0, positive=True)   # K_O (1/s): the estimate's bandwidth
    frame: str = setting("str", "platform", choices=("platform",))   # where the wrench is published


def add_stewart_observer(options: dict, loop, mechanism):
    """The ``[observer]`` hook on ``loop`` when enabled (None otherwise)."""
    if not options.get("enabled"):
        return None
    return PlatformObserverHook(stewart_observer(mechanism, options["gain"], loop.period,
                                                 options["frame"])).attach(loop)
