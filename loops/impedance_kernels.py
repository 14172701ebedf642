"""The Cartesian impedance controller's layout and its kernels besides the law (:mod:`rtctl.loops.impedance`):
the settings vector, the rows of its work arrays, the gain ramp, the controlled frame's pose and the desired
motion from a joint trajectory."""
from __future__ import annotations

import numpy as np
from numba import njit

from rtctl.dynamics.kernels import W_O, W_R, forward_kinematics, kinematics, point_acceleration, point_jacobian

from .task_space import G_D, G_D_FROM, G_D_TO, G_K, G_K_FROM, G_K_TO

# Settings vector.
S_RAMP_T0, S_RAMP_TIME, S_ZETA, S_CORIOLIS, S_FEEDFORWARD, S_EXTERNAL, S_BODY, S_FRAME_R, S_FRAME_T = \
    0, 1, 2, 3, 4, 5, 6, 7, 16
S_ZETA_FROM, S_ZETA_TO = 19, 20   # a damping_ratio change's ends, blended like K and D
S_NULLSPACE_RAMP = 21             # 1 while a null-space stiffness change is blended (joint_gains rows 2 -> 3)
S_SHAPING = 22                    # 1: close on the measured external wrench with the task inertia of V_FEXT
S_WIDTH = 23
# Rows of the vector work array (width max(nv, 12)).
V_POSE, V_ERROR, V_WRENCH, V_TWIST, V_H, V_TAU0, V_Y, V_JDV, V_QW, V_VW, V_AW, V_ZERO, V_FEXT = range(13)
V_ROWS = 13   # V_FEXT: the measured external wrench at the frame (6, world axes), then the inverse task inertia (6)
# Desired-motion vector: pose (12), twist (6), twist rate (6).
D_POSE, D_TWIST, D_RATE = 0, 12, 18
D_WIDTH = 24


@njit(cache=True)
def ramped_gains(settings, g, joint_gains, t):
    """K and D of this cycle: linear from the *_FROM to the *_TO rows over the ramp time; K_n likewise (from
    ``joint_gains`` row 2 to row 3) while a null-space stiffness change is under way."""
    if np.isnan(settings[S_RAMP_T0]):  # a change starts its ramp now
        settings[S_RAMP_T0] = t
    ramp = settings[S_RAMP_TIME]
    w = 1.0 if ramp <= 0.0 else min(1.0, max(0.0, (t - settings[S_RAMP_T0]) / ramp))
    for k in range(36):
        g[G_K, k] = g[G_K_FROM, k] + w * (g[G_K_TO, k] - g[G_K_FROM, k])
        g[G_D, k] = g[G_D_FROM, k] + w * (g[G_D_TO, k] - g[G_D_FROM, k])
    if settings[S_ZETA_TO] > 0.0:
        # (1 - w) from + w to: exactly the new ratio at the ramp's end (from + w (to - from) rounded a tiny ratio
        # to 0, which reads as "explicit damping matrix")
        settings[S_ZETA] = (1.0 - w) * settings[S_ZETA_FROM] + w * settings[S_ZETA_TO]
    if settings[S_NULLSPACE_RAMP] != 0.0:
        for j in range(joint_gains.shape[1]):
            joint_gains[0, j] = (1.0 - w) * joint_gains[2, j] + w * joint_gains[3, j]
        if w >= 1.0:
            settings[S_NULLSPACE_RAMP] = 0.0


@njit(cache=True)
def frame_pose(ws, settings, out, o):
    """World pose (R row-major, p) of the controlled frame from the body poses in ``ws`` into out[o:o+12]."""
    b = int(settings[S_BODY])
    fr, ft = S_FRAME_R, S_FRAME_T
    for i in range(3):
        for j in range(3):
            out[o + 3 * i + j] = (ws[b, W_R + 3 * i] * settings[fr + j] + ws[b, W_R + 3 * i + 1] * settings[fr + 3 + j]
                                  + ws[b, W_R + 3 * i + 2] * settings[fr + 6 + j])
        out[o + 9 + i] = (ws[b, W_O + i] + ws[b, W_R + 3 * i] * settings[ft] + ws[b, W_R + 3 * i + 1] * settings[ft + 1]
                          + ws[b, W_R + 3 * i + 2] * settings[ft + 2])


@njit(cache=True)
def frame_pose_kernel(mi, mf, ws, settings, q, out):
    """Forward kinematics at ``q`` and the controlled frame's pose (12) into ``out``."""
    forward_kinematics(mi, mf, ws, q)
    frame_pose(ws, settings, out, 0)


@njit(cache=True)
def desired_from_joints(mi, mf, ws, settings, idx, q, q_d, qd_d, qdd_d, jx, vec, des):
    """The desired pose, twist and twist rate of the frame from the joint trajectory: FK(q_d), J(q_d) qd_d,
    J(q_d) qdd_d + Jdot(q_d, qd_d) qd_d (the last only with the inertia feed-forward)."""
    nv = jx.shape[2]
    q_index, v_index = idx[0], idx[1]
    qw, vw, aw, zero = vec[V_QW], vec[V_VW, :nv], vec[V_AW, :nv], vec[V_ZERO, :nv]
    for k in range(q.shape[0]):
        qw[k] = q[k]
    for k in range(nv):
        vw[k] = 0.0
        aw[k] = 0.0
        zero[k] = 0.0
    for j in range(q_index.shape[0]):
        qw[q_index[j]] = q_d[j]
        vw[v_index[j]] = qd_d[j]
        aw[v_index[j]] = qdd_d[j]
    nq = q.shape[0]
    body = int(settings[S_BODY])
    ft = S_FRAME_T
    if settings[S_FEEDFORWARD] != 0.0:
        kinematics(mi, mf, ws, qw[:nq], vw, zero, 0.0)
        point_acceleration(ws, body, settings[ft], settings[ft + 1], settings[ft + 2], vec[V_JDV])
    else:
        forward_kinematics(mi, mf, ws, qw[:nq])
        for r in range(6):
            vec[V_JDV, r] = 0.0
    frame_pose(ws, settings, des, D_POSE)
    jac = jx[0]
    point_jacobian(mi, ws, body, settings[ft], settings[ft + 1], settings[ft + 2], jac)
    for r in range(6):
        s = 0.0
        a = vec[V_JDV, r]
        for c in range(nv):
            s += jac[r, c] * vw[c]
            a += jac[r, c] * aw[c]
        des[D_TWIST + r] = s
        des[D_RATE + r] = a
