"""Per-cycle compiled entry points of the Stewart platform (Lopes, 2009): the plant step, the
computed-torque control step and the pose trajectory's sample.

Allocation-free numba code on the work arrays of :mod:`rtctl.plants.stewart.kernels` (notation and layout there).
"""
import numpy as np
from numba import njit

from ..integrate import inlined, rk4_advance
from .kernels import (B_ALL, K_JA, K_JAD, K_JC, K_LU, K_R, K_S3, NOT_FINITE, OK, V_A, V_DX, V_L, V_Q1, V_Q2, V_TAU,
                      V_U, V_X, V_XD, _dot3, euler_terms, jc_matrix, leg_friction, leg_motion, leg_vectors, rotation)
from .solvers import forward_dynamics, forward_kinematics, inverse_dynamics, leg_rates_to_platform, solve6

jit = njit(cache=True)


# ---------------------------------------------------------------- plant step
@jit
def _plant_derivative(pts, par, x, xd, tau, friction, vscale, xdd, wk, wv):
    """xdd under leg forces tau minus leg friction (:func:`leg_friction`; ``friction`` rows: viscous, Coulomb,
    static minus Coulomb, Stribeck velocity)."""
    R, JC, f = wk[K_R], wk[K_JC], wv[V_TAU]
    rotation(x, R)
    jc_matrix(pts, x, R, JC, wv[V_A], wv[V_L])
    JA, u = wk[K_JA], wv[V_U]
    euler_terms(x, xd, R, JA, wk[K_JAD], u)
    for i in range(6):
        ldi = 0.0
        for c in range(6):
            ldi += JC[i, c] * u[c]
        f[i] = tau[i] - leg_friction(ldi, friction[0, i], friction[1, i], friction[2, i], friction[3, i], vscale)
    return forward_dynamics(pts, par, x, xd, f, xdd, wk, wv)


@inlined
def _plant_rates(x, xd, dx, xdd, args):
    """Rate function of :mod:`plants.integrate`: dx = xd and xdd of :func:`_plant_derivative`."""
    pts, par, tau, friction, vscale, wk, wv = args
    for k in range(6):
        dx[k] = xd[k]
    return _plant_derivative(pts, par, x, xd, tau, friction, vscale, xdd, wk, wv)


_plant_advance = rk4_advance("stewart", _plant_rates)


@jit
def plant_step(pts, par, x, xd, tau, dt, substeps, friction, vscale, q, v, rk, wk, wv):
    """Advance the platform state (x, xd) by dt with leg forces tau held (classical RK4 in Euler
    coordinates), then write the leg lengths q and rates v. ``rk`` is (WORK_ROWS, 6) scratch of
    :mod:`plants.integrate`. On a non-OK status the state is restored. Returns OK, SINGULAR or NOT_FINITE."""
    for k in range(6):
        if not (np.isfinite(x[k]) and np.isfinite(xd[k]) and np.isfinite(tau[k])):
            return NOT_FINITE
    status = _plant_advance(x, xd, dt, substeps, rk, NOT_FINITE, (pts, par, tau, friction, vscale, wk, wv))
    if status != OK:
        return status
    R, JC = wk[K_R], wk[K_JC]
    JA, u = wk[K_JA], wv[V_U]
    euler_terms(x, xd, R, JA, wk[K_JAD], u)
    jc_matrix(pts, x, R, JC, wv[V_A], wv[V_L])
    for i in range(6):
        leg_vectors(i, pts, x, R, wv[V_A], wv[V_L])
        q[i] = np.sqrt(_dot3(wv[V_L], wv[V_L]))
        s = 0.0
        for c in range(6):
            s += JC[i, c] * u[c]
        v[i] = s
    return OK


# ---------------------------------------------------------------- computed-torque control step
@jit
def computed_torque_step(pts, par, q, v, q_d, qd_d, qdd_d, kp, kd, x_est, tol, max_iter, alpha, tau, wk, wv):
    """Leg forces by computed torque with the generalized-momentum model (one allocation-free step).

    1. x = FK(q) by Newton-Raphson warm-started at ``x_est`` (updated in place);
    2. xd = J_E^-1 v (eq. 5);
    3. alpha = qdd_d + kp (q_d - q) + kd (qd_d - v) (desired leg accelerations);
    4. xdd = J_E^-1 (alpha - J_E-dot xd) (the leg-acceleration bias from ``leg_motion`` at xdd = 0);
    5. tau = J_C^-T (M xdd + V xd + G) (eqs. 81-84).
    With an exact model the legs then accelerate at alpha: e-ddot + kd e-dot + kp e = 0.
    Returns OK or a status (FK_* or SINGULAR); tau untouched on failure.
    """
    st = forward_kinematics(pts, par, q, x_est, tol, max_iter, wk, wv)
    if st != OK:
        return st
    xd, xdd, zero = wv[V_XD], wv[V_DX], wv[V_X]
    st = leg_rates_to_platform(pts, x_est, v, xd, wk, wv)     # leaves J_E in wk[K_S3]
    if st != OK:
        return st
    for k in range(6):
        zero[k] = 0.0
    leg_motion(pts, x_est, xd, zero, wv[V_Q1], wv[V_Q2], alpha, wk, wv)   # alpha <- l-ddot at xdd = 0
    for i in range(6):
        alpha[i] = qdd_d[i] + kp[i] * (q_d[i] - q[i]) + kd[i] * (qd_d[i] - v[i]) - alpha[i]
    st = solve6(wk[K_S3], alpha, xdd, wk[K_LU], False)
    if st != OK:
        return st
    return inverse_dynamics(pts, par, x_est, xd, xdd, B_ALL, tau, wk, wv)


# ---------------------------------------------------------------- pose trajectory
@jit
def trig_spline_profile(tau):
    """Third-order trigonometric rest-to-rest profile s(tau), tau in [0, 1]:

    s = 1/2 - 9/16 cos(pi tau) + 1/16 cos(3 pi tau), s' = 3 pi / 4 sin^3(pi tau),
    s'' = 9 pi^2 / 4 sin^2(pi tau) cos(pi tau); s(0) = 0, s(1) = 1, s' = s'' = 0 at both ends.
    Returns (s, s', s'')."""
    c1 = np.cos(np.pi * tau)
    sn = np.sin(np.pi * tau)
    s = 0.5 - 0.5625 * c1 + 0.0625 * np.cos(3.0 * np.pi * tau)
    sd = 0.75 * np.pi * sn * sn * sn
    sdd = 2.25 * np.pi * np.pi * sn * sn * c1
    return s, sd, sdd


@jit
def pose_spline_sample(t, times, waypoints, x, xd, xdd):
    """Pose, rate, acceleration of the waypoint path: segment k (times[k] .. times[k+1]) moves from
    waypoints[k] to waypoints[k+1] with the profile of ``trig_spline_profile``; holds before and after."""
    nseg = times.shape[0] - 1
    if t <= times[0]:
        for c in range(6):
            x[c] = waypoints[0, c]
            xd[c] = 0.0
            xdd[c] = 0.0
        return
    if t >= times[nseg]:
        for c in range(6):
            x[c] = waypoints[nseg, c]
            xd[c] = 0.0
            xdd[c] = 0.0
        return
    k = 0
    while t > times[k + 1]:
        k += 1
    T = times[k + 1] - times[k]
    s, sd, sdd = trig_spline_profile((t - times[k]) / T)
    for c in range(6):
        d = waypoints[k + 1, c] - waypoints[k, c]
        x[c] = waypoints[k, c] + s * d
        xd[c] = sd / T * d
        xdd[c] = sdd / (T * T) * d


@jit
def pose_trajectory_sample(pts, t, times, waypoints, q, qd, qdd, wk, wv):
    """Desired leg lengths, rates and accelerations at time t (pose spline, then IK)."""
    x, xd, xdd = wv[V_X], wv[V_XD], wv[V_DX]
    pose_spline_sample(t, times, waypoints, x, xd, xdd)
    leg_motion(pts, x, xd, xdd, q, qd, qdd, wk, wv)
