"""Per-cycle compiled entry points of the jaw-rehabilitation robot (Kalani et al., 2018): the plant step
(the coupled robot + jaw-model dynamics integrated by :mod:`plants.integrate`) and the controllers' steps.

Allocation-free numba code on the packed and work arrays of :mod:`rtctl.plants.jaw.kernels` (layout there).
"""
import numpy as np
from numba import njit

from ..integrate import WORK_ROWS, inlined, rk4_advance
from ..stewart import kernels as _sk
from ..stewart import solvers as _ss
from .kernels import (_A1, _A2, _A3, _A4, C_H, CPL, JAW, K_ALPHA, K_KD, K_KP, K_OPT, K_X, K_XD, K_XDD, NOT_FINITE, NWK,
                      NWV, OK, ROBOT, S_FP, S_INC, S_Q, S_QJ, S_V, S_X, S_XD, U_Q1, U_Q2, U_RK, U_T1, U_T2, U_XJ,
                      U_ZERO, WRONG_SHAPE, coupled_forward_dynamics, coupled_inverse_dynamics, jaw_pose, patient_force)

jit = njit(cache=True)

# Explicit signatures (see rtctl.plants.jaw.kernels).
SIG_PLANT = f"int64({_A4}, {_A2}, {_A2}, {_A1}, float64, int64, {_A3}, {_A2})"
SIG_CONTROL = f"int64({_A4}, {_A2}, {_A1}, {_A1}, {_A1}, {_A1}, {_A1}, {_A1}, {_A2}, {_A3}, {_A2})"


@jit
def plant_outputs(pts2, P, S, W, V):
    """Robot legs q, v, jaw-model legs, patient force and incisal record of the state S[S_X], S[S_XD]."""
    x, xd = S[S_X], S[S_XD]
    wk, wv = W[:NWK], V[:NWV]
    R, JA = wk[_sk.K_R], wk[_sk.K_JA]
    _sk.euler_terms(x, xd, R, JA, wk[_sk.K_JAD], wv[_sk.V_U])
    _sk.jc_matrix(pts2[ROBOT], x, R, wk[_sk.K_JC], wv[_sk.V_A], wv[_sk.V_L])
    u, JC = wv[_sk.V_U], wk[_sk.K_JC]
    for i in range(6):
        _sk.leg_vectors(i, pts2[ROBOT], x, R, wv[_sk.V_A], wv[_sk.V_L])
        S[S_Q, i] = np.sqrt(_sk._dot3(wv[_sk.V_L], wv[_sk.V_L]))
        s = 0.0
        for c in range(6):
            s += JC[i, c] * u[c]
        S[S_V, i] = s
    patient_force(P[CPL], x, xd, R, JA, S[S_FP], S[S_INC])
    xj = V[U_XJ]
    jaw_pose(x, xj, P[CPL, C_H])
    _sk.rotation(xj, R)
    for i in range(6):
        _sk.leg_vectors(i, pts2[JAW], xj, R, wv[_sk.V_A], wv[_sk.V_L])
        S[S_QJ, i] = np.sqrt(_sk._dot3(wv[_sk.V_L], wv[_sk.V_L]))


@inlined
def _plant_rates(x, xd, dx, xdd, args):
    """Rate function of :mod:`plants.integrate`: dx = xd and xdd of ``coupled_forward_dynamics``."""
    pts2, P, tau, W, V = args
    for k in range(6):
        dx[k] = xd[k]
    return coupled_forward_dynamics(pts2, P, x, xd, tau, xdd, W, V)


_plant_advance = rk4_advance("jaw", _plant_rates)


@njit(SIG_PLANT, cache=True)
def plant_step(pts2, P, S, tau, dt, substeps, W, V):
    """Advance (S[S_X], S[S_XD]) by dt with the robot leg forces tau held (classical RK4 in Euler coordinates,
    ``substeps`` steps), then refresh the outputs (``plant_outputs``). On a non-OK status the state is
    restored. Returns OK, SINGULAR, NOT_FINITE or WRONG_SHAPE (tau not of length 6)."""
    if tau.shape[0] != 6:
        return WRONG_SHAPE
    x, xd = S[S_X], S[S_XD]
    for k in range(6):
        if not (np.isfinite(x[k]) and np.isfinite(xd[k]) and np.isfinite(tau[k])):
            return NOT_FINITE
    status = _plant_advance(x, xd, dt, substeps, V[U_RK:U_RK + WORK_ROWS], NOT_FINITE, (pts2, P, tau, W, V))
    if status != OK:
        return status
    plant_outputs(pts2, P, S, W, V)
    return OK


# ---------------------------------------------------------------- controller steps
@jit
def _finite6(a):
    for k in range(6):
        if not np.isfinite(a[k]):
            return False
    return True


@jit
def _check_io(q, v, q_d, qd_d, qdd_d, tau):
    """OK, WRONG_SHAPE (an argument not of length 6) or NOT_FINITE."""
    if not (q.shape[0] == 6 and v.shape[0] == 6 and q_d.shape[0] == 6 and qd_d.shape[0] == 6
            and qdd_d.shape[0] == 6 and tau.shape[0] == 6):
        return WRONG_SHAPE
    if not (_finite6(q) and _finite6(v) and _finite6(q_d) and _finite6(qd_d) and _finite6(qdd_d)):
        return NOT_FINITE
    return OK


@jit
def _platform_motion(pts, par, q, qd, qdd, x, xd, xdd, tol, max_iter, W, V):
    """x = FK(q) (Newton-Raphson warm-started at x, updated in place), xd = J_E^-1 qd (Lopes, 2009, eq. 5),
    xdd = J_E^-1 (qdd - l-ddot(x, xd, 0)). Returns OK or a forward-kinematics / SINGULAR status."""
    wk, wv = W[:NWK], V[:NWV]
    st = _ss.forward_kinematics(pts, par, q, x, tol, max_iter, wk, wv)
    if st != OK:
        return st
    st = _ss.leg_rates_to_platform(pts, x, qd, xd, wk, wv)     # leaves J_E in wk[K_S3]
    if st != OK:
        return st
    bias, rhs = V[U_T1], V[U_T2]
    _sk.leg_motion(pts, x, xd, V[U_ZERO], V[U_Q1], V[U_Q2], bias, wk, wv)
    for i in range(6):
        rhs[i] = qdd[i] - bias[i]
    return _ss.solve6(wk[_sk.K_S3], rhs, xdd, wk[_sk.K_LU], False)


@njit(SIG_CONTROL, cache=True)
def computed_torque_step(pts2, P, q, v, q_d, qd_d, qdd_d, tau, C, W, V):
    """Computed torque on the coupled Gibbs-Appell model (one allocation-free step):

    1. x = FK(q) warm-started at C[K_X]; xd = J_E^-1 v;
    2. alpha = qdd_d + kp (q_d - q) + kd (qd_d - v) (C[K_ALPHA]);
    3. xdd = J_E^-1 (alpha - J_E-dot xd);
    4. tau = ``coupled_inverse_dynamics``(x, xd, xdd).

    C rows: K_KP, K_KD gains; K_X, K_XD, K_XDD the pose estimate and its rates; K_OPT [fk_tol, fk_max_iter].
    With an exact model the legs accelerate at alpha. Returns OK, WRONG_SHAPE, NOT_FINITE or a FK / SINGULAR
    status (tau untouched on failure)."""
    st = _check_io(q, v, q_d, qd_d, qdd_d, tau)
    if st != OK:
        return st
    alpha = C[K_ALPHA]
    for i in range(6):
        alpha[i] = qdd_d[i] + C[K_KP, i] * (q_d[i] - q[i]) + C[K_KD, i] * (qd_d[i] - v[i])
    st = _platform_motion(pts2[ROBOT], P[ROBOT], q, v, alpha, C[K_X], C[K_XD], C[K_XDD], C[K_OPT, 0],
                          int(C[K_OPT, 1]), W, V)
    if st != OK:
        return st
    return coupled_inverse_dynamics(pts2, P, C[K_X], C[K_XD], C[K_XDD], tau, W, V)


@njit(SIG_CONTROL, cache=True)
def ff_pd_step(pts2, P, q, v, q_d, qd_d, qdd_d, tau, C, W, V):
    """Gibbs-Appell feed-forward of the desired leg motion plus leg PD (one allocation-free step):

    x_d = FK(q_d) (warm start C[K_X]), xd_d = J_E^-1 qd_d, xdd_d = J_E^-1 (qdd_d - J_E-dot xd_d),
    tau = ``coupled_inverse_dynamics``(x_d, xd_d, xdd_d) + kp (q_d - q) + kd (qd_d - v)   (kp N/m, kd N s/m).

    Returns OK, WRONG_SHAPE, NOT_FINITE or a FK / SINGULAR status (tau untouched on failure)."""
    st = _check_io(q, v, q_d, qd_d, qdd_d, tau)
    if st != OK:
        return st
    st = _platform_motion(pts2[ROBOT], P[ROBOT], q_d, qd_d, qdd_d, C[K_X], C[K_XD], C[K_XDD], C[K_OPT, 0],
                          int(C[K_OPT, 1]), W, V)
    if st != OK:
        return st
    ff = C[K_ALPHA]
    st = coupled_inverse_dynamics(pts2, P, C[K_X], C[K_XD], C[K_XDD], ff, W, V)
    if st != OK:
        return st
    for i in range(6):
        tau[i] = ff[i] + C[K_KP, i] * (q_d[i] - q[i]) + C[K_KD, i] * (qd_d[i] - v[i])
    return OK
