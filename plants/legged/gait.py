"""Gait synthesis and leg inverse kinematics for the legged locomotion of Shah, Saha & Dutt (2012).

Gait synthesis (Appendix B)
---------------------------
Inverted-pendulum trunk (eq. B.1): over one step ``0 <= tau <= T`` the hip,
measured from the stance ankle, moves as
``x_h(tau) = x_h(0) cosh(w tau) + (xdot_h(0) / w) sinh(w tau)``, ``w = sqrt(g / z_c)``.
The repeatability conditions ``x_h(0) = -x_h(T)`` and ``xdot_h(0) = xdot_h(T)``
are *one* condition, not two: with ``C = cosh(w T)``, ``S = sinh(w T)`` the
first reads ``x_h(0) (1 + C) = -xdot_h(0) S / w`` and the second
``xdot_h(0) (1 - C) = x_h(0) w S``; eliminating ``xdot_h(0)`` from both gives
``1 - C^2 = -S^2``, an identity. The step length fixes the rest: the hip
advances ``-2 x_h(0)`` per step, and the swing ankle of eq. B.2 advances
``2 l_s`` (from ``-l_s`` to ``+l_s``, measured like ``x_h`` from the stance
ankle, a frame fixed to the ground), so it lands where the next stance begins
only if every step is ``l_s`` long: ``x_h(0) = -l_s / 2`` and then
``xdot_h(0) = (l_s / 2) w coth(w T / 2)``, i.e. in closed form

    x_h(tau) = (l_s / 2) sinh(w (tau - T / 2)) / sinh(w T / 2).

The average forward speed is ``l_s / T``. The trunk keeps its height and
attitude (B.1: ``z_h = z_c - l_0 / 2`` for the biped's upright trunk of
length ``l_0`` with its centre of mass at height ``z_c``; for the quadruped's
level trunk the hips are at the height ``z_c`` of its centre of mass).

Swing ankle (eq. B.2): ``x = -l_s cos(pi tau / T)`` in the stance-ankle
frame. The vertical profile as printed, ``(h_f / 2) (1 - cos(pi tau / T))``,
ends at ``h_f`` at ``tau = T``, so the foot would never land (an OCR or
typesetting slip); re-derived with ``2 pi``:
``z = (h_f / 2) (1 - cos(2 pi tau / T))``, zero with zero velocity at lift-off
and touch-down and ``h_f`` at mid-swing. Both feet keep horizontal (the IPM
assumption of Appendix B).

Legs' mass (``leg_compensation``; off for the biped, as in the paper; on for
the quadruped). B.1 treats the robot as a point mass at the hip, but the
biped carries 4.4 of its 9.4 kg in the legs (the quadruped 8 of 12 kg). With
the trunk on B.1 the swing leg's travel shifts the whole-body centre of mass
by ~0.14 m over a step and the planned centre of pressure runs from 1.3 cm to
13.7 cm ahead of the ankle on a 15 cm foot (tests/test_legged_gait.py): the
stance foot's heel or toe unloads every step and the foot rocks on the
other contact point. Measured (10 kHz, 12 s): on the legged plant's
default ground (k = 1e6 N/m, d = 5000 N s/m, :data:`~rtctl.plants.legged.plant.PAPER_GROUND`)
the rocking stays below 4 mrad and the paper's plan walks; on a soft or
lightly damped ground it grows from step to step and the biped falls
(trunk pitch past 0.3 rad; feed-forward and computed torque alike unless
two times are given, FF first: k = 1e5, d = 500: stance-foot tilt 10, 56,
310 mrad in steps 1-3, falls at 2.9 s; k = 1e6, d = 500: 3.6 s; k = 1e5,
d = 5000: 2.7 s; k = 3e5, d = 1500: 5.8 s and 6.5 s). The compensation keeps the robot on such
grounds (k = 1e5, d = 500: walks 12 s, pitch within 5 mrad): B.1 is applied
to the centre of mass, each leg's mass taken at the midpoint of its hip and
foot: ``M x_G = (M - N m_l / 2) x_trunk + (m_l / 2) sum(x_foot)`` for ``N``
legs of mass ``m_l``, so the trunk moves as ``K1 L + K2 S`` with ``L`` the
B.1 term, ``S`` the swing ankle's x of eq. B.2,
``K1 = M / (M - N m_l / 2)`` and ``K2 = -(N_swing m_l / 2) / (M - N m_l / 2)``
(biped 1.306 and -0.153, quadruped 1.5 and -0.25); the half-stride ``a`` of
``L`` follows from the step-length condition (:func:`ipm_initial_state`).
The planned centre of pressure then stays between 6.9 and 9.6 cm ahead of
the ankle.

Double support (``double_support = d``): the first ``d T`` of each step has
all feet down and the trunk follows a quintic matching position, velocity
and acceleration of the neighbouring single-support phases; B.1 and B.2 act
over the single support ``T_ss = (1 - d) T``. The biped uses ``d = 0`` (the
paper). The quadruped uses ``d = 0.4``. On a diagonal pair of point feet the
ground's centre of pressure lies on the line through them, so the ground
exerts no moment about that line: gravity's moment about it, ``m g`` times
the centre of mass's distance from it, is opposed only by the motion's own
inertia. The paper's pure trot (``d = 0``, T = 1 s) carries the centre of
mass from 4.3 cm on one side of the line to 4.3 cm on the other over each
step with the zero-moment point of the planned motion within 1.8 cm of the
line (1.1 cm over the middle 90 % of the step): the unstable orbit of an
inverted pendulum of height ``z_c``, whose departures grow as
``exp(sqrt(g / z_c) t)`` (4.43 1/s, e-folding time 0.23 s; measured 4.64 1/s
over 0.5-0.7 s of the first step) and on which no joint-space law acts.
Simulated (10 kHz, default ground; tests/test_legged_trot.py,
``plots.py --paper``): the trunk rolls past 0.3 rad at 3.4 s and rolls over
(past 1 rad) at 7.4 s under computed torque, 6.1 s under feed-forward. Two
changes make the trot walk. A four-foot phase of 0.4 s re-levels the trunk
every step (roll below 0.05 rad; the config). Or shorter steps: the swing
feet land where the joints put them relative to the trunk, so each
touch-down moves the support line with the trunk and catches the departure
of the step before, which grew by ``exp(sqrt(g / z_c) T)``: with T = 0.3 s
(stride 0.09 m, the same 0.3 m/s; factor 3.8) the pure trot walks (roll
within 0.053 rad over 8 s, 93 % of the planned progress -- the feet slip at
touch-down), T = 0.5 s (factor 9.2) rolls up to 0.25 rad and T >= 0.6 s
(factor 14) rolls over within 8 s.

Step ``k`` (``kT <= t < (k + 1) T``) has its stance ankle at
``x_0 + k l_s``; the biped alternates left (even k) and right stance; the
quadruped trots with the diagonal pairs in phase: front-left + hind-right in
stance on even steps, front-right + hind-left on odd ones. The gait starts in
motion (t = 0 is the start of a step with both feet on the ground and the
trunk at its planned velocity); :meth:`BipedGait.state` gives the full
planned state, which is how simulations are started (``initial_state``).

Inverse kinematics (Fig. 11)
----------------------------
Biped leg (thigh ``l_1``, shank ``l_2``, horizontal foot): with absolute link
pitches ``b_1`` (thigh), ``b_2`` (shank), a link's downward axis is
``u(b) = (-sin b, -cos b)`` in (x, z) and the hip-to-ankle vector
``d = l_1 u(b_1) + l_2 u(b_2)``; ``b_2 - b_1 = acos((|d|^2 - l_1^2 - l_2^2) / (2 l_1 l_2)) > 0``
(knee in front of the hip-ankle line) and ``b_1 = atan2(-d_x, -d_z) -
atan2(l_2 sin(b_2 - b_1), l_1 + l_2 cos(b_2 - b_1))``. Joint angles
``theta_1 = b_1 - phi``, ``theta_2 = b_2 - b_1``, ``theta_3 = -b_2`` (foot
level). Rates and accelerations are exact: ``J [b_1'; b_2'] = d'`` with
``J = [l_1 u'(b_1), l_2 u'(b_2)]`` and ``J [b_1''; b_2''] = d'' - l_1 u''(b_1) b_1'^2
- l_2 u''(b_2) b_2'^2`` (``u'' = -u``), differentiating the closed-form
trunk and ankle trajectories analytically.

Quadruped leg (universal hip: roll ``a`` about x, then pitch about y; knee
about y): the hip-to-foot vector in the trunk frame is
``p = R_x(a) w``, ``w = (w_x, 0, w_z)`` the planar 2-link vector of the roll
frame, so ``a = atan2(p_y, -p_z)``, ``w_x = p_x``, ``w_z = -sqrt(p_y^2 + p_z^2)``
(rates by differentiating the polar coordinates), then the planar solution
above. The front knees point backwards and the hind knees forwards (a
fore-aft mirror-symmetric stance).

Real time: :class:`BipedWalk` (``"biped_walk"``) and :class:`QuadrupedTrot`
(``"quadruped_trot"``) evaluate these closed forms in one compiled call per
sample, writing only into the caller's arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.loops.controllers import _OK
from rtctl.loops.trajectories import _BAD_T, _CompiledTrajectory, _check_out, _scalar
from rtctl.plants.legged.model import QUADRUPED_LEGS, LeggedRobot, planar_biped, spatial_quadruped
from rtctl.options import OptionsBase, options_of, setting

__all__ = ["BipedGait", "BipedWalk", "QuadrupedGait", "QuadrupedTrot", "ipm_initial_state"]

G = 9.81

# Layout of the gait parameter vector.
P_T, P_LS, P_HF, P_ZC, P_OMEGA, P_L1, P_L2, P_HIP_Z, P_ANKLE_Z, P_X0, P_TDS, P_A, P_VE, P_K1, P_K2 = range(15)
NP = 15

_IK_FAILED = 5


def ipm_initial_state(period: float, stride: float, com_height: float, double_support: float = 0.0,
                      k1: float = 1.0, k2: float = 0.0, g: float = G):
    """``(x_h(0), xdot_h(0))`` of eq. B.1 at the start of single support (module docstring).

    Paper form (``k1 = 1``, ``k2 = 0``, no double support): ``(-l_s / 2, (l_s / 2) w coth(w T / 2))``.
    With a double-support share ``d`` of each step (``T_ds = d T``, ``T_ss = T - T_ds``) and the trunk
    ``k1 L + k2 S`` (``L`` the pendulum term, ``S`` the swing ankle), the trunk covers
    ``2 (k1 a + k2 l_s)`` in single support and ``T_ds k1 xdot_h(0)`` in double support, so
    ``a = l_s (1 - 2 k2) / (k1 (2 + w T_ds coth(w T_ss / 2)))``; returns ``(-a, a w coth(w T_ss / 2))``.
    """
    w = math.sqrt(g / com_height)
    tds = double_support * period
    coth = 1.0 / math.tanh(0.5 * w * (period - tds))
    a = stride * (1.0 - 2.0 * k2) / (k1 * (2.0 + w * tds * coth))
    return -a, a * w * coth


# -- compiled closed forms ------------------------------------------------------------------------------
@njit(cache=True)
def _quintic(tau, h, x0, v0, a0, x1, v1, a1):
    """Quintic Hermite blend on [0, h] matching position, velocity and acceleration at both ends."""
    s = tau / h
    d = x1 - x0 - v0 * h - 0.5 * a0 * h * h
    dv = (v1 - v0 - a0 * h) * h
    da = (a1 - a0) * h * h
    c3 = 10.0 * d - 4.0 * dv + 0.5 * da
    c4 = -15.0 * d + 7.0 * dv - da
    c5 = 6.0 * d - 3.0 * dv + 0.5 * da
    x = x0 + v0 * tau + 0.5 * a0 * tau * tau + s * s * s * (c3 + s * (c4 + s * c5))
    v = v0 + a0 * tau + s * s * (3.0 * c3 + s * (4.0 * c4 + 5.0 * s * c5)) / h
    a = a0 + s * (6.0 * c3 + s * (12.0 * c4 + 20.0 * s * c5)) / (h * h)
    return x, v, a


@njit(cache=True)
def _gait_point(t, p):
    """Step index k, stance reference x_k (world), trunk x from x_k with rate and acceleration, and the
    other foot (x, z) from (x_k, 0) with rates and accelerations (on the ground behind during double support).

    Single support (T_ss): the trunk is ``K1 L + K2 S + C0`` with ``L`` eq. B.1 in closed form,
    ``a sinh(w (tau - T_ss/2)) / sinh(w T_ss/2)``, and ``S`` the swing ankle's x of eq. B.2 over T_ss
    (the paper: K1 = 1, K2 = C0 = 0). Double support (T_ds, first in each step): a quintic blend of the
    trunk between the single-support end states.
    """
    period, tds, ls = p[P_T], p[P_TDS], p[P_LS]
    k = math.floor(t / period)
    tau = t - k * period
    xs = p[P_X0] + k * ls
    w, a, k1, k2 = p[P_OMEGA], p[P_A], p[P_K1], p[P_K2]
    tss = period - tds
    fa, fb = math.pi / tss, 2.0 * math.pi / tss
    if tau < tds:
        ve = k1 * p[P_VE]
        a_end = k1 * w * w * a - k2 * ls * fa * fa
        h_end = k1 * a + k2 * ls
        xh, vh, ah = _quintic(tau, tds, h_end - ls, ve, a_end, -h_end, ve, -a_end)
        return int(k), xs, xh, vh, ah, -ls, 0.0, 0.0, 0.0, 0.0, 0.0
    tau -= tds
    scale = a / math.sinh(0.5 * w * tss)
    sh, ch = math.sinh(w * (tau - 0.5 * tss)), math.cosh(w * (tau - 0.5 * tss))
    hh = 0.5 * p[P_HF]
    ca, sa, cb, sb = math.cos(fa * tau), math.sin(fa * tau), math.cos(fb * tau), math.sin(fb * tau)
    sx, svx, sax = -ls * ca, ls * fa * sa, ls * fa * fa * ca
    return (int(k), xs, k1 * scale * sh + k2 * sx, k1 * scale * w * ch + k2 * svx, k1 * scale * w * w * sh + k2 * sax,
            sx, svx, sax, hh * (1.0 - cb), hh * fb * sb, hh * fb * fb * cb)


@njit(cache=True)
def _two_link(dx, dz, vx, vz, ax, az, l1, l2, knee_sign):
    """Absolute pitches (b1, b2) of a planar two-link leg reaching d from the hip, their rates and
    accelerations (module docstring); ``ok`` False if d is out of reach."""
    c = (dx * dx + dz * dz - l1 * l1 - l2 * l2) / (2.0 * l1 * l2)
    if not (-1.0 < c < 1.0):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    k = knee_sign * math.acos(c)
    b1 = math.atan2(-dx, -dz) - math.atan2(l2 * math.sin(k), l1 + l2 * math.cos(k))
    b2 = b1 + k
    s1, c1, s2, c2 = math.sin(b1), math.cos(b1), math.sin(b2), math.cos(b2)
    j11, j12, j21, j22 = -l1 * c1, -l2 * c2, l1 * s1, l2 * s2
    det = j11 * j22 - j12 * j21
    w1 = (j22 * vx - j12 * vz) / det
    w2 = (j11 * vz - j21 * vx) / det
    rx = ax - l1 * s1 * w1 * w1 - l2 * s2 * w2 * w2
    rz = az - l1 * c1 * w1 * w1 - l2 * c2 * w2 * w2
    return True, b1, b2, w1, w2, (j22 * rx - j12 * rz) / det, (j11 * rz - j21 * rx) / det


@njit(cache=True)
def _biped_plan(t, p, out):
    """Planned (3, 9) rows position, velocity, acceleration of [x_0, z_0, phi, left leg, right leg]."""
    for r in range(3):
        for j in range(9):
            out[r, j] = 0.0
    k, xs, xh, vh, ah, sx, svx, sax, sz, svz, saz = _gait_point(t, p)
    out[0, 0], out[1, 0], out[2, 0] = xs + xh, vh, ah
    out[0, 1] = p[P_ZC]
    for leg in range(2):
        stance = (k + leg) % 2 == 0  # leg 0 (left) on even steps
        if stance:
            dx, vx, ax, dz, vz, az = -xh, -vh, -ah, p[P_ANKLE_Z] - p[P_HIP_Z], 0.0, 0.0
        else:
            dx, vx, ax = sx - xh, svx - vh, sax - ah
            dz, vz, az = p[P_ANKLE_Z] + sz - p[P_HIP_Z], svz, saz
        ok, b1, b2, w1, w2, a1, a2 = _two_link(dx, dz, vx, vz, ax, az, p[P_L1], p[P_L2], 1.0)
        if not ok:
            return _IK_FAILED
        j = 3 + 3 * leg
        out[0, j], out[0, j + 1], out[0, j + 2] = b1, b2 - b1, -b2
        out[1, j], out[1, j + 1], out[1, j + 2] = w1, w2 - w1, -w2
        out[2, j], out[2, j + 1], out[2, j + 2] = a1, a2 - a1, -a2
    return _OK


@njit(cache=True)
def _quadruped_plan(t, p, legs, out):
    """Planned (3, 18) rows of [x, y, z, yaw, pitch, roll, 4 x (hip roll, hip pitch, knee)].

    ``legs`` (4, 6): hip x, y, z in the trunk frame, the diagonal pair (0 or 1), the knee sign, the
    foot's lateral position y.
    """
    for r in range(3):
        for j in range(18):
            out[r, j] = 0.0
    k, xs, xh, vh, ah, sx, svx, sax, sz, svz, saz = _gait_point(t, p)
    out[0, 0], out[1, 0], out[2, 0] = xs + xh, vh, ah
    out[0, 2] = p[P_ZC]
    for leg in range(4):
        hz = legs[leg, 2]
        stance = (k + int(legs[leg, 3])) % 2 == 0
        # foot - hip in the (level, unrotated) trunk frame; the foot stays under its hip laterally
        if stance:
            px, vx, ax = -xh, -vh, -ah
            pz, vz, az = -p[P_ZC] - hz, 0.0, 0.0
        else:
            px, vx, ax = sx - xh, svx - vh, sax - ah
            pz, vz, az = sz - p[P_ZC] - hz, svz, saz
        # polar coordinates of (Y, X) = (p_y, -p_z): roll a and length rho; the trunk stays on the
        # x axis and the foot at its lateral position y_f, so p_y = y_f - y_hip is constant
        X, Xd, Xdd, Y, Yd, Ydd = -pz, -vz, -az, legs[leg, 5] - legs[leg, 1], 0.0, 0.0
        rho = math.sqrt(X * X + Y * Y)
        roll = math.atan2(Y, X)
        rho_d = (X * Xd + Y * Yd) / rho
        roll_d = (X * Yd - Y * Xd) / (rho * rho)
        rho_dd = (Xd * Xd + Yd * Yd + X * Xdd + Y * Ydd - rho_d * rho_d) / rho
        roll_dd = (X * Ydd - Y * Xdd - 2.0 * rho * rho_d * roll_d) / (rho * rho)
        ok, b1, b2, w1, w2, a1, a2 = _two_link(px, -rho, vx, -rho_d, ax, -rho_dd, p[P_L1], p[P_L2], legs[leg, 4])
        if not ok:
            return _IK_FAILED
        j = 6 + 3 * leg
        out[0, j], out[0, j + 1], out[0, j + 2] = roll, b1, b2 - b1
        out[1, j], out[1, j + 1], out[1, j + 2] = roll_d, w1, w2 - w1
        out[2, j], out[2, j + 1], out[2, j + 2] = roll_dd, a1, a2 - a1
    return _OK


@njit(cache=True)
def _copy_joints(status, work, first, q, qd, qdd):
    if status != _OK:
        return status
    for j in range(q.shape[0]):
        q[j] = work[0, first + j]
        qd[j] = work[1, first + j]
        qdd[j] = work[2, first + j]
    return _OK


@njit(cache=True)
def _check(n, t, q, qd, qdd):
    """The trajectories' own argument check (:func:`rtctl.loops.trajectories._check_out`), and a gait starts at t = 0."""
    status = _check_out(n, t, q, qd, qdd)
    if status == _OK and t < 0.0:
        return _BAD_T
    return status


@njit(cache=True)
def _biped_sample(t, p, work, q, qd, qdd):
    status = _check(6, t, q, qd, qdd)
    if status != _OK:
        return status
    return _copy_joints(_biped_plan(t, p, work), work, 3, q, qd, qdd)


@njit(cache=True)
def _quadruped_sample(t, p, legs, work, q, qd, qdd):
    status = _check(12, t, q, qd, qdd)
    if status != _OK:
        return status
    return _copy_joints(_quadruped_plan(t, p, legs, work), work, 6, q, qd, qdd)


# -- gaits (Python API: planned motion for tests, plots and initial states) ---------------------------------
class _Gait:
    """Shared parameters and planned-state access; subclasses provide ``_plan(t)`` (a compiled kernel)."""

    kind = "gait"
    nv = 0

    def _params(self, period, stride, foot_height, com_height, double_support, g, l1, l2, hip_z, ankle_z, x0,
                leg_compensation, n_swing):
        cls = type(self).__name__
        period = _scalar(cls, "period", period, positive=True)
        stride = _scalar(cls, "stride", stride, nonnegative=True)
        foot_height = _scalar(cls, "foot_height", foot_height, nonnegative=True)
        com_height = _scalar(cls, "com_height", com_height, positive=True)
        double_support = _scalar(cls, "double_support", double_support, nonnegative=True)
        if double_support >= 0.5:
            raise ValueError(f"{cls}: double_support must be a share of the step in [0, 0.5), got {double_support!r}")
        k1, k2 = 1.0, 0.0
        if leg_compensation:
            m = self.robot.model
            total = m.total_mass
            leg = total - float(m.mass[m.body_index(self.robot.trunk_body)])
            leg_each = leg / len(self.robot.legs)
            k1 = total / (total - 0.5 * leg)
            k2 = -0.5 * n_swing * leg_each / (total - 0.5 * leg)
        x_h0, v_h0 = ipm_initial_state(period, stride, com_height, double_support, k1, k2, g)
        p = np.zeros(NP)
        p[[P_T, P_LS, P_HF, P_ZC, P_OMEGA, P_L1, P_L2, P_HIP_Z, P_ANKLE_Z, P_X0, P_TDS, P_A, P_VE, P_K1, P_K2]] = [
            period, stride, foot_height, com_height, math.sqrt(g / com_height), l1, l2, hip_z, ankle_z, x0,
            double_support * period, -x_h0, v_h0, k1, k2]
        self.leg_compensation = bool(leg_compensation)
        self.period, self.stride, self.foot_height, self.com_height = period, stride, foot_height, com_height
        self.double_support = double_support
        self.omega = p[P_OMEGA]
        self.params = p
        self._work = np.zeros((3, self.nv))

    @property
    def speed(self) -> float:
        """Average forward speed l_s / T (m/s)."""
        return self.stride / self.period

    def state(self, t: float):
        """Planned full ``(q, v, a)`` (base and joints) at time ``t`` (s); ValueError if the IK fails."""
        t = _scalar(type(self).__name__, "t", t, nonnegative=True)
        if self._plan(t) != _OK:
            raise ValueError(f"{type(self).__name__}: a foot target at t = {t} s is out of the leg's reach "
                             f"(stride {self.stride} m, com_height {self.com_height} m)")
        return self._work[0].copy(), self._work[1].copy(), self._work[2].copy()

    def stance(self, t: float) -> int:
        """Index of the stance leg (biped) or diagonal pair (quadruped) at time ``t``."""
        return int(math.floor(t / self.period)) % 2


class BipedGait(_Gait):
    """IPM walking of the planar biped (section 5.1, Appendix B; T = 1 s, l_s = 0.3 m, h_f = 0.1 m, z_c = 0.96 m).

    ``x0``: world x of the first stance (left) ankle; at t = 0 the right foot is
    ``stride`` behind it. ``double_support`` (share of a step, default 0 as in
    the paper) and ``leg_compensation`` (default off, the paper's B.1): module docstring.
    """

    kind = "biped"
    nv = 9

    def __init__(self, robot: LeggedRobot | None = None, *, period=1.0, stride=0.3, foot_height=0.1,
                 com_height=0.96, double_support=0.0, leg_compensation=False, x0=0.0, g=G):
        self.robot = robot or planar_biped()
        ll = self.robot.link_lengths
        hip_z = float(com_height) - ll["trunk"] / 2.0
        self._params(period, stride, foot_height, com_height, double_support, g, ll["thigh"], ll["shank"], hip_z,
                     self.robot.ankle_height, float(x0), leg_compensation, 1)
        self.hip_height = hip_z
        if self._plan(0.5 * self.period) != _OK or self._plan(0.0) != _OK:
            raise ValueError(f"BipedGait: hip height {hip_z:.3f} m (com_height {com_height} m) and stride "
                             f"{stride} m are out of the legs' reach")

    def _plan(self, t):
        return _biped_plan(t, self.params, self._work)

    def ankles(self, t: float) -> np.ndarray:
        """Planned (2, 2) ankle positions (x, z) of the left and right foot."""
        k, xs, _, _, _, sx, _, _, sz, _, _ = _gait_point(float(t), self.params)
        out = np.zeros((2, 2))
        for leg in range(2):
            stance = (k + leg) % 2 == 0
            out[leg] = (xs, self.robot.ankle_height) if stance else (xs + sx, self.robot.ankle_height + sz)
        return out


class QuadrupedGait(_Gait):
    """IPM trot of the spatial quadruped (section 5.2, Appendix B; T = 1 s, l_s = 0.3 m, h_f = 0.08 m, z_c = 0.5 m).

    Diagonal pairs in phase; ``x0``: world x of the trunk centre's stance
    reference of step 0. ``double_support`` (default 0.4, a four-foot phase
    at the start of each step) and ``leg_compensation`` (default on): module docstring.
    ``foot_width``: lateral distance of the left and right feet (default the
    hip width, feet under the hips; narrower feet use the hip roll joints).
    """

    kind = "quadruped"
    nv = 18

    def __init__(self, robot: LeggedRobot | None = None, *, period=1.0, stride=0.3, foot_height=0.08,
                 com_height=0.5, double_support=0.4, leg_compensation=True, foot_width=None, x0=0.0,
                 g=G):
        self.robot = robot or spatial_quadruped()
        ll = self.robot.link_lengths
        self._params(period, stride, foot_height, com_height, double_support, g, ll["thigh"], ll["shank"],
                     float(com_height), 0.0, float(x0), leg_compensation, 2)
        self.hip_height = float(com_height)
        self.legs = np.zeros((4, 6))
        if foot_width is None:
            foot_width = 2.0 * abs(self.robot.hip_offsets[0][1])
        foot_width = _scalar("QuadrupedGait", "foot_width", foot_width, nonnegative=True)
        self.foot_width = foot_width
        for i, name in enumerate(QUADRUPED_LEGS):
            self.legs[i, 0:3] = self.robot.hip_offsets[i]
            self.legs[i, 5] = math.copysign(0.5 * foot_width, self.robot.hip_offsets[i][1])
            self.legs[i, 3] = 0.0 if name in ("front_left", "hind_right") else 1.0
            self.legs[i, 4] = -1.0 if name.startswith("front") else 1.0
        if self._plan(0.5 * self.period) != _OK or self._plan(0.0) != _OK:
            raise ValueError(f"QuadrupedGait: com_height {com_height} m and stride {stride} m are out of the "
                             "legs' reach")

    def _plan(self, t):
        return _quadruped_plan(t, self.params, self.legs, self._work)

    def feet(self, t: float) -> np.ndarray:
        """Planned (4, 3) foot positions (legs in :data:`~rtctl.plants.legged.model.QUADRUPED_LEGS` order)."""
        k, xs, _, _, _, sx, _, _, sz, _, _ = _gait_point(float(t), self.params)
        out = np.zeros((4, 3))
        for leg in range(4):
            stance = (k + int(self.legs[leg, 3])) % 2 == 0
            out[leg] = (xs + self.legs[leg, 0] + (0.0 if stance else sx), self.legs[leg, 5],
                        0.0 if stance else sz)
        return out


# -- trajectories -----------------------------------------------------------------------------------------
class _GaitTrajectory(_CompiledTrajectory):
    gait: _Gait

    def __init__(self, gait, duration):
        self.gait = gait
        self.duration = _scalar(type(self).__name__, "duration", duration, positive=True)
        self.n = gait.nv - gait.robot.n_base

    def initial_state(self):
        """The planned full state ``(q, v)`` at t = 0: start a simulation on the gait."""
        q, v, _ = self.gait.state(0.0)
        return q, v

    def _raise(self, status, t):
        if status == _IK_FAILED:
            raise ValueError(f"{type(self).__name__}.sample: a foot target at t = {t} s is out of reach")
        if status == _BAD_T:
            raise ValueError(f"{type(self).__name__}.sample: t must be finite and >= 0, got {t!r}")
        super()._raise(status, t)


class BipedWalk(_GaitTrajectory):
    """Actuated-joint motion of the biped's IPM walk (:class:`BipedGait`); periodic, defined for all t >= 0.

    ``duration`` (s) is the length of the walk the run is planned for; the gait
    continues periodically after it.
    """

    _kernel = staticmethod(_biped_sample)

    @dataclass(frozen=True)
    class Options(OptionsBase):
        # Shah, Saha & Dutt (2012) Appendix B: step period T (s), stride l_s (m), swing height h_f (m), trunk COM height
        # z_c (m), double-support share of a step, leg-mass compensation, planned walk length (s)
        period: float = setting("float", 1.0, positive=True)
        stride: float = setting("float", 0.3, low=0.0)
        foot_height: float = setting("float", 0.1, low=0.0)
        com_height: float = setting("float", 0.96, positive=True)
        double_support: float = setting("float", 0.0, low=0.0, high=0.49)
        leg_compensation: bool = setting("bool", False)
        duration: float = setting("float", 12.0, positive=True)

    def __init__(self, options: "BipedWalk.Options | None" = None, *, robot: LeggedRobot | None = None):
        self.options = o = options_of(self, options)
        super().__init__(BipedGait(robot, period=o.period, stride=o.stride, foot_height=o.foot_height,
                                   com_height=o.com_height, double_support=o.double_support,
                                   leg_compensation=o.leg_compensation), o.duration)
        self._args = (self.gait.params, np.zeros((3, 9)))


class QuadrupedTrot(_GaitTrajectory):
    """Actuated-joint motion of the quadruped's IPM trot (:class:`QuadrupedGait`); periodic for t >= 0."""

    _kernel = staticmethod(_quadruped_sample)

    @dataclass(frozen=True)
    class Options(BipedWalk.Options):   # the biped's keys, with the trot's defaults
        foot_height: float = setting("float", 0.08, low=0.0)
        com_height: float = setting("float", 0.5, positive=True)
        double_support: float = setting("float", 0.4, low=0.0, high=0.49)
        leg_compensation: bool = setting("bool", True)
        duration: float = setting("float", 4.0, positive=True)
        foot_width: float = setting("float", None, low=0.0)   # m, lateral foot placement (default: the robot's)

    def __init__(self, options: "QuadrupedTrot.Options | None" = None, *, robot: LeggedRobot | None = None):
        self.options = o = options_of(self, options)
        super().__init__(QuadrupedGait(robot, period=o.period, stride=o.stride, foot_height=o.foot_height,
                                       com_height=o.com_height, double_support=o.double_support,
                                       leg_compensation=o.leg_compensation, foot_width=o.foot_width), o.duration)
        self._args = (self.gait.params, self.gait.legs, np.zeros((3, 18)))
