"""The compiled CPG step: coupled Hopf oscillators with a learned Fourier output, modulated through filters.

Rhythm layer. One Hopf oscillator per output channel ``i`` (0 lateral x,
1 anterior-posterior y, 2 vertical z of the incisal point), in polar form
``z_i = r_i exp(j theta_i)`` -- the oscillator of the adaptive-frequency CPGs
of Righetti, Buchli & Ijspeert (2006, Physica D 216:269-281, eq. 5 with the
learning rate set to zero once the frequency is learned) and of the
programmable CPG of Righetti & Ijspeert (ICRA 2006, eq. 1), with unit target
amplitude ``mu = 1``::

    r_i'     = gamma (1 - r_i^2) r_i                                             (H1)
    theta_i' = omega + k sum_{j != i} sin(phi_j - phi_i) - sigma u g(phi_i),
    phi_i    = theta_i - delta_i,   g(phi) = (1 + cos phi) / 2                    (H2)

(H1) has the stable limit cycle ``r = 1``: a radial perturbation decays,
exactly, as ``r^2(t) = 1 / (1 + (1/r0^2 - 1) exp(-2 gamma t))`` (H3), i.e. at
the rate ``2 gamma`` near the cycle. The phase coupling of (H2) (all-to-all,
strength ``k``, the coupling of Righetti & Ijspeert 2006 reduced to phase
locking) locks the channels to the set phase differences
``theta_i - theta_0 = delta_i - delta_0``; linearised about the locked state,
``phi' = -k L phi`` with ``L`` the Laplacian of the complete graph on three
channels (eigenvalues 0, 3, 3), so every phase difference decays at the rate
``3 k`` (H4). The common phase is neutral: a perturbation of all channels
together is kept (the rhythm is shifted, not corrected), as on any limit cycle.

Sensory feedback ``u`` (a bite force or a tracking error, in its own unit;
:meth:`loops.cpg.generator.ChewingCPG.set_feedback`) enters (H2) through the
phase response ``g``, largest at occlusion (pattern phase 0) and zero at the
largest opening, with gain ``sigma`` (rad/s per unit): positive ``u`` slows
the cycle around occlusion, negative ``u`` speeds it. For a constant ``u``
with ``0 <= sigma u < omega`` the period is, in closed form (integrating
``d phi / (omega - sigma u (1 + cos phi) / 2)`` over a cycle)::

    T(u) = 2 pi / sqrt(omega (omega - sigma u))                                   (H5)

and for ``sigma u >= omega`` the phase stops at the fixed point near occlusion
(the jaw holds closed while the patient bites harder than the gain allows).

Pattern layer. Channel ``j`` plays its axis of the learned Fourier series
over its own phase and scales it by its oscillator's amplitude::

    p_j = r_j [a_j0 + sum_{k=1..K} a_jk cos(k theta_j) + b_jk sin(k theta_j)]     (O1)

the output layer of Gams et al. (2009, Auton Robot 27:3-23) and Petric et al.
(2011, IJRR 30(14), eq. 4) with its coefficients frozen after learning
(:mod:`loops.cpg.learning`).

Modulation. The frequency ``omega``, every coefficient ``c`` and the feedback
``u`` follow their targets through a critically damped linear filter with a
four-fold pole at ``-lambda`` (the amplitude dynamics of Ijspeert et al. 2007,
Science 315:1416-1420, eq. 2, raised to fourth order)::

    x1' = lambda (v - x1),  x_i' = lambda (x_{i-1} - x_i)  (i = 2..4),  y = x4    (O3)
    y' = lambda (x3 - x4),  y'' = lambda^2 (x2 - 2 x3 + x4),
    y''' = lambda^3 (x1 - 3 x2 + 3 x3 - x4)                                      (O4)

integrated exactly for a target held over the step: with ``e_i = x_i - v``,
``s = lambda dt``, ``E = exp(-s)``::

    e_i(t + dt) = E sum_{m=0..i-1} s^m / m! e_{i-m}(t)                           (O6)

so ``y`` is continuous up to its third derivative whatever the requests. A
scaled amplitude or a new pattern is a new coefficient target (the blend is
coefficient by coefficient, and every coefficient set passed through is a
convex combination of the targets: the envelope of a transition stays in the
hull of the accepted patterns); a new frequency is a new ``omega`` target, and
a new pattern leaves ``omega`` where it is.

Derivatives of the output follow by the chain and product rules from (H1),
(H2), (O4) and the derivatives of the basis (``g_k = cos k theta``:
``g_k' = -k sin``, ``g_k'' = -k^2 cos``, ``g_k''' = k^3 sin`` in ``theta``)::

    r'' = gamma (1 - 3 r^2) r',   r''' = gamma ((1 - 3 r^2) r'' - 6 r r'^2)
    theta_i'' = omega' + k sum cos(d_ij) d_ij' - sigma (u' g + u g_phi theta_i')
    theta_i''' = omega'' + k sum (cos(d_ij) d_ij'' - sin(d_ij) d_ij'^2)
                 - sigma (u'' g + 2 u' g_phi theta_i' + u (g_phiphi theta_i'^2 + g_phi theta_i''))   (O5)

with ``d_ij = phi_j - phi_i``; ``F_j`` the bracket of (O1), ``p = r F``,
``p' = r' F + r F'``, ``p'' = r'' F + 2 r' F' + r F''``,
``p''' = r''' F + 3 r'' F' + 3 r' F'' + r F'''``.

Integration per step ``dt``: the filters by (O6), the radii by (H3) (both
exact); each phase as ``theta_i(t + tau) = theta_i(t) + Omega(tau) + psi_i(tau)``
with ``Omega`` the exact integral of the filtered ``omega`` ::

    Omega(tau) = v tau + sum_i (e_i(t) - e_i(t + tau)) / lambda                   (O7)

and the remainder ``psi`` (coupling and feedback terms of H2) by one
classical Runge-Kutta step, the feedback ``u`` taken from its exact filter
solution at ``t``, ``t + dt/2``, ``t + dt``. On the locked cycle without
feedback ``psi`` stays 0 and the phase is exact at any ``dt``.

Memory layout (all float64, preallocated, C-contiguous):

* ``st`` (``ST_LEN``): phases, radii, the four ``omega`` stages and their
  target, the filter rates (1/s), time (s), ``gamma``, ``k``, the three phase
  offsets ``delta``, ``sigma``, the four feedback stages and their target,
  and the ``omega``, ``omega'``, ``omega''`` and ``theta_i'`` of the last
  evaluation;
* ``coef`` (5, 3, 2K + 1): ``coef[0]`` the coefficient targets, ``coef[1..4]``
  the four filter stages; along the last axis ``a_0, a_1..a_K, b_1..b_K``;
* ``out`` (4, 3): rows ``p``, ``p'``, ``p''``, ``p'''`` of the incisal point.

:func:`cpg_step` is the whole per-cycle work; it allocates nothing.
"""
from __future__ import annotations

import math

from numba import njit

__all__ = [
    "BAD_DT", "BAD_SHAPE", "OK", "ST_COUPLING", "ST_FEEDBACK_GAIN", "ST_FEEDBACK_STAGE", "ST_FEEDBACK_TARGET",
    "ST_GAMMA", "ST_LEN", "ST_OFFSET", "ST_OMEGA", "ST_OMEGA_D", "ST_OMEGA_DD", "ST_OMEGA_STAGE", "ST_OMEGA_TARGET",
    "ST_PHASE", "ST_PHASE_RATE", "ST_RADIUS", "ST_RATE_COEF", "ST_RATE_FEEDBACK", "ST_RATE_OMEGA", "ST_TIME",
    "cpg_step", "simulate_extremes",
]

N_CHANNELS = 3
ST_PHASE = 0            # theta_i, slots 0..2 (rad, in [0, 2 pi))
ST_RADIUS = 3           # r_i, slots 3..5
ST_OMEGA_STAGE = 6      # stages x1..x4 of the omega filter in slots 6..9; x4 is omega
ST_OMEGA_TARGET = 10
ST_RATE_OMEGA = 11      # lambda of the omega filter (1/s)
ST_RATE_COEF = 12       # lambda of the coefficient filters (1/s)
ST_TIME = 13
ST_GAMMA = 14           # Hopf radial convergence gamma (1/s)
ST_COUPLING = 15        # phase coupling k (1/s)
ST_OFFSET = 16          # delta_i, slots 16..18 (rad)
ST_FEEDBACK_GAIN = 19   # sigma (rad/s per unit of feedback)
ST_FEEDBACK_STAGE = 20  # stages of the feedback filter in slots 20..23; x4 is u
ST_FEEDBACK_TARGET = 24
ST_RATE_FEEDBACK = 25   # lambda of the feedback filter (1/s)
ST_OMEGA = 26           # omega, omega', omega'' at the last evaluation (rad/s, rad/s^2, rad/s^3)
ST_OMEGA_D = 27
ST_OMEGA_DD = 28
ST_PHASE_RATE = 29      # theta_i' at the last evaluation, slots 29..31 (rad/s)
ST_LEN = 32

OK, BAD_DT, BAD_SHAPE = 0, 1, 2
TWO_PI = 2.0 * math.pi

_SIG_STEP = "int64(float64, float64[::1], float64[:, :, ::1], float64[:, ::1])"
_SIG_SIM = "int64(float64, int64, float64[::1], float64[:, :, ::1], float64[:, ::1], float64[::1])"


@njit(cache=True, inline="always")
def _filter_output_after(st, first, target, s):
    """``y = x4`` of the filter whose stages start at ``st[first]`` after ``s = lambda t`` (O6), state unchanged."""
    e1, e2, e3, e4 = st[first] - target, st[first + 1] - target, st[first + 2] - target, st[first + 3] - target
    return target + math.exp(-s) * (e4 + s * e3 + 0.5 * s * s * e2 + s * s * s / 6.0 * e1)


@njit(cache=True, inline="always")
def _omega_integral(st, target, lam, tau):
    """``integral_0^tau omega`` (rad) from the current omega filter state, exactly (O7)."""
    o = ST_OMEGA_STAGE
    s = lam * tau
    big_e = math.exp(-s)
    e1, e2, e3, e4 = st[o] - target, st[o + 1] - target, st[o + 2] - target, st[o + 3] - target
    n1 = big_e * e1
    n2 = big_e * (e2 + s * e1)
    n3 = big_e * (e3 + s * e2 + 0.5 * s * s * e1)
    n4 = big_e * (e4 + s * e3 + 0.5 * s * s * e2 + s * s * s / 6.0 * e1)
    return target * tau + ((e1 - n1) + (e2 - n2) + (e3 - n3) + (e4 - n4)) / lam


@njit(cache=True, inline="always")
def _filter_advance(x, first, target, s):
    """Advance the four filter stages ``x[first..first+3]`` towards ``target`` by ``s = lambda dt`` (O6)."""
    big_e = math.exp(-s)
    s2 = 0.5 * s * s
    s3 = s2 * s / 3.0
    e1, e2, e3, e4 = x[first] - target, x[first + 1] - target, x[first + 2] - target, x[first + 3] - target
    x[first] = target + big_e * e1
    x[first + 1] = target + big_e * (e2 + s * e1)
    x[first + 2] = target + big_e * (e3 + s * e2 + s2 * e1)
    x[first + 3] = target + big_e * (e4 + s * e3 + s2 * e2 + s3 * e1)


@njit(cache=True, inline="always")
def _phase_rate(st, i, theta0, theta1, theta2, omega, u):
    """Right-hand side of (H2) for channel ``i`` at the phases ``theta0..2``."""
    k = st[ST_COUPLING]
    phi_i = (theta0 if i == 0 else theta1 if i == 1 else theta2) - st[ST_OFFSET + i]
    rate = omega - st[ST_FEEDBACK_GAIN] * u * 0.5 * (1.0 + math.cos(phi_i))
    if k != 0.0:
        for j in range(N_CHANNELS):
            if j != i:
                phi_j = (theta0 if j == 0 else theta1 if j == 1 else theta2) - st[ST_OFFSET + j]
                rate += k * math.sin(phi_j - phi_i)
    return rate


@njit(cache=True)
def _evaluate(st, coef, out):
    """Write p, p', p'', p''' (O1, O5) of the current state into ``out``; record omega and theta_i'."""
    lw = st[ST_RATE_OMEGA]
    o = ST_OMEGA_STAGE
    w = st[o + 3]
    wd = lw * (st[o + 2] - st[o + 3])
    wdd = lw * lw * (st[o + 1] - 2.0 * st[o + 2] + st[o + 3])
    st[ST_OMEGA] = w
    st[ST_OMEGA_D] = wd
    st[ST_OMEGA_DD] = wdd
    lu = st[ST_RATE_FEEDBACK]
    f = ST_FEEDBACK_STAGE
    u = st[f + 3]
    ud = lu * (st[f + 2] - st[f + 3])
    udd = lu * lu * (st[f + 1] - 2.0 * st[f + 2] + st[f + 3])
    sigma = st[ST_FEEDBACK_GAIN]
    k = st[ST_COUPLING]
    gamma = st[ST_GAMMA]
    th0, th1, th2 = st[ST_PHASE], st[ST_PHASE + 1], st[ST_PHASE + 2]
    # theta_i' (H2), then theta_i'' and theta_i''' (O5), three channels unrolled into scalars
    v0 = _phase_rate(st, 0, th0, th1, th2, w, u)
    v1 = _phase_rate(st, 1, th0, th1, th2, w, u)
    v2 = _phase_rate(st, 2, th0, th1, th2, w, u)
    st[ST_PHASE_RATE], st[ST_PHASE_RATE + 1], st[ST_PHASE_RATE + 2] = v0, v1, v2
    a0 = a1 = a2 = 0.0
    for i in range(N_CHANNELS):
        phi_i = st[ST_PHASE + i] - st[ST_OFFSET + i]
        vi = v0 if i == 0 else v1 if i == 1 else v2
        g = 0.5 * (1.0 + math.cos(phi_i))
        g1 = -0.5 * math.sin(phi_i)
        acc = wd - sigma * (ud * g + u * g1 * vi)
        for j in range(N_CHANNELS):
            if j != i:
                vj = v0 if j == 0 else v1 if j == 1 else v2
                d = (st[ST_PHASE + j] - st[ST_OFFSET + j]) - phi_i
                acc += k * math.cos(d) * (vj - vi)
        if i == 0:
            a0 = acc
        elif i == 1:
            a1 = acc
        else:
            a2 = acc
    lc = st[ST_RATE_COEF]
    lc2 = lc * lc
    lc3 = lc2 * lc
    nc = coef.shape[2]
    nh = (nc - 1) // 2
    for i in range(N_CHANNELS):
        phi_i = st[ST_PHASE + i] - st[ST_OFFSET + i]
        vi = v0 if i == 0 else v1 if i == 1 else v2
        ai = a0 if i == 0 else a1 if i == 1 else a2
        g = 0.5 * (1.0 + math.cos(phi_i))
        g1 = -0.5 * math.sin(phi_i)
        g2 = -0.5 * math.cos(phi_i)
        jerk_phase = wdd - sigma * (udd * g + 2.0 * ud * g1 * vi + u * (g2 * vi * vi + g1 * ai))
        for j in range(N_CHANNELS):
            if j != i:
                vj = v0 if j == 0 else v1 if j == 1 else v2
                aj = a0 if j == 0 else a1 if j == 1 else a2
                d = (st[ST_PHASE + j] - st[ST_OFFSET + j]) - phi_i
                jerk_phase += k * (math.cos(d) * (aj - ai) - math.sin(d) * (vj - vi) * (vj - vi))
        # F_i and its time derivatives (the bracket of O1)
        c1, c2, c3, c4 = coef[1, i, 0], coef[2, i, 0], coef[3, i, 0], coef[4, i, 0]
        f0 = c4
        f1 = lc * (c3 - c4)
        f2 = lc2 * (c2 - 2.0 * c3 + c4)
        f3 = lc3 * (c1 - 3.0 * c2 + 3.0 * c3 - c4)
        theta = st[ST_PHASE + i]
        cos1, sin1 = math.cos(theta), math.sin(theta)
        ck, sk = cos1, sin1
        v2_ = vi * vi
        v3_ = v2_ * vi
        vai3 = 3.0 * vi * ai
        for h in range(1, nh + 1):
            kf = float(h)
            k2 = kf * kf
            k3 = k2 * kf
            gc, gc1, gc2, gc3 = ck, -kf * sk, -k2 * ck, k3 * sk
            gcd = gc1 * vi
            gcdd = gc2 * v2_ + gc1 * ai
            gcddd = gc3 * v3_ + gc2 * vai3 + gc1 * jerk_phase
            gs, gs1, gs2, gs3 = sk, kf * ck, -k2 * sk, -k3 * ck
            gsd = gs1 * vi
            gsdd = gs2 * v2_ + gs1 * ai
            gsddd = gs3 * v3_ + gs2 * vai3 + gs1 * jerk_phase
            c1, c2, c3, c4 = coef[1, i, h], coef[2, i, h], coef[3, i, h], coef[4, i, h]
            a, ad = c4, lc * (c3 - c4)
            add = lc2 * (c2 - 2.0 * c3 + c4)
            addd = lc3 * (c1 - 3.0 * c2 + 3.0 * c3 - c4)
            m = nh + h
            d1, d2, d3, d4 = coef[1, i, m], coef[2, i, m], coef[3, i, m], coef[4, i, m]
            b, bd = d4, lc * (d3 - d4)
            bdd = lc2 * (d2 - 2.0 * d3 + d4)
            bddd = lc3 * (d1 - 3.0 * d2 + 3.0 * d3 - d4)
            f0 += a * gc + b * gs
            f1 += ad * gc + a * gcd + bd * gs + b * gsd
            f2 += add * gc + 2.0 * ad * gcd + a * gcdd + bdd * gs + 2.0 * bd * gsd + b * gsdd
            f3 += (addd * gc + 3.0 * add * gcd + 3.0 * ad * gcdd + a * gcddd
                   + bddd * gs + 3.0 * bdd * gsd + 3.0 * bd * gsdd + b * gsddd)
            ck, sk = ck * cos1 - sk * sin1, sk * cos1 + ck * sin1
        r = st[ST_RADIUS + i]
        r1 = gamma * (1.0 - r * r) * r
        r2 = gamma * (1.0 - 3.0 * r * r) * r1
        r3 = gamma * ((1.0 - 3.0 * r * r) * r2 - 6.0 * r * r1 * r1)
        out[0, i] = r * f0
        out[1, i] = r1 * f0 + r * f1
        out[2, i] = r2 * f0 + 2.0 * r1 * f1 + r * f2
        out[3, i] = r3 * f0 + 3.0 * r2 * f1 + 3.0 * r1 * f2 + r * f3


@njit(_SIG_STEP, cache=True)
def cpg_step(dt, st, coef, out):
    """Advance the CPG by ``dt`` s (H2 by RK4; H3, O6 exact) and write p, p', p'', p''' into ``out`` (O1, O5).

    ``dt = 0`` only evaluates. Returns ``OK``, ``BAD_DT`` (``dt`` negative or
    not finite) or ``BAD_SHAPE`` (``st``, ``coef``, ``out`` of the wrong shape).
    """
    if not (dt >= 0.0 and dt < math.inf):
        return BAD_DT
    if (st.shape[0] != ST_LEN or coef.shape[0] != 5 or coef.shape[1] != N_CHANNELS or coef.shape[2] % 2 != 1
            or out.shape[0] != 4 or out.shape[1] != N_CHANNELS):
        return BAD_SHAPE
    if dt > 0.0:
        w_target = st[ST_OMEGA_TARGET]
        lam_w = st[ST_RATE_OMEGA]
        u_target = st[ST_FEEDBACK_TARGET]
        s_u = st[ST_RATE_FEEDBACK] * dt
        h = dt
        # theta_i = theta_i(t) + Omega(tau) + psi_i(tau): Omega the exact integral of omega (O7), psi by RK4
        big_a = _omega_integral(st, w_target, lam_w, 0.5 * h)
        big_c = _omega_integral(st, w_target, lam_w, h)
        u_a = st[ST_FEEDBACK_STAGE + 3]
        u_b = _filter_output_after(st, ST_FEEDBACK_STAGE, u_target, 0.5 * s_u)
        u_c = _filter_output_after(st, ST_FEEDBACK_STAGE, u_target, s_u)
        t0, t1, t2 = st[ST_PHASE], st[ST_PHASE + 1], st[ST_PHASE + 2]
        k10 = _phase_rate(st, 0, t0, t1, t2, 0.0, u_a)
        k11 = _phase_rate(st, 1, t0, t1, t2, 0.0, u_a)
        k12 = _phase_rate(st, 2, t0, t1, t2, 0.0, u_a)
        y0, y1, y2 = t0 + big_a + 0.5 * h * k10, t1 + big_a + 0.5 * h * k11, t2 + big_a + 0.5 * h * k12
        k20 = _phase_rate(st, 0, y0, y1, y2, 0.0, u_b)
        k21 = _phase_rate(st, 1, y0, y1, y2, 0.0, u_b)
        k22 = _phase_rate(st, 2, y0, y1, y2, 0.0, u_b)
        y0, y1, y2 = t0 + big_a + 0.5 * h * k20, t1 + big_a + 0.5 * h * k21, t2 + big_a + 0.5 * h * k22
        k30 = _phase_rate(st, 0, y0, y1, y2, 0.0, u_b)
        k31 = _phase_rate(st, 1, y0, y1, y2, 0.0, u_b)
        k32 = _phase_rate(st, 2, y0, y1, y2, 0.0, u_b)
        y0, y1, y2 = t0 + big_c + h * k30, t1 + big_c + h * k31, t2 + big_c + h * k32
        k40 = _phase_rate(st, 0, y0, y1, y2, 0.0, u_c)
        k41 = _phase_rate(st, 1, y0, y1, y2, 0.0, u_c)
        k42 = _phase_rate(st, 2, y0, y1, y2, 0.0, u_c)
        new0 = t0 + big_c + h / 6.0 * (k10 + 2.0 * k20 + 2.0 * k30 + k40)
        new1 = t1 + big_c + h / 6.0 * (k11 + 2.0 * k21 + 2.0 * k31 + k41)
        new2 = t2 + big_c + h / 6.0 * (k12 + 2.0 * k22 + 2.0 * k32 + k42)
        # wrap all three by the same whole turns so their differences stay continuous
        turns = math.floor(new0 / TWO_PI)
        st[ST_PHASE] = new0 - TWO_PI * turns
        st[ST_PHASE + 1] = new1 - TWO_PI * turns
        st[ST_PHASE + 2] = new2 - TWO_PI * turns
        decay = math.exp(-2.0 * st[ST_GAMMA] * dt)
        for i in range(N_CHANNELS):
            r = st[ST_RADIUS + i]
            if r > 0.0:
                st[ST_RADIUS + i] = 1.0 / math.sqrt(1.0 + (1.0 / (r * r) - 1.0) * decay)
        _filter_advance(st, ST_OMEGA_STAGE, w_target, lam_w * dt)
        _filter_advance(st, ST_FEEDBACK_STAGE, u_target, s_u)
        s = st[ST_RATE_COEF] * dt
        big_e = math.exp(-s)
        s2 = 0.5 * s * s
        s3 = s2 * s / 3.0
        for j in range(N_CHANNELS):
            for i in range(coef.shape[2]):
                v = coef[0, j, i]
                e1, e2, e3, e4 = coef[1, j, i] - v, coef[2, j, i] - v, coef[3, j, i] - v, coef[4, j, i] - v
                coef[1, j, i] = v + big_e * e1
                coef[2, j, i] = v + big_e * (e2 + s * e1)
                coef[3, j, i] = v + big_e * (e3 + s * e2 + s2 * e1)
                coef[4, j, i] = v + big_e * (e4 + s * e3 + s2 * e2 + s3 * e1)
        st[ST_TIME] += dt
    _evaluate(st, coef, out)
    return OK


@njit(_SIG_SIM, cache=True)
def simulate_extremes(dt, n, st, coef, out, ext):
    """Run ``n`` steps of ``dt`` from the given state (modified in place) and record the extremes.

    ``ext`` (4): the largest opening ``max(-z)`` (m), incisal speed ``|p'|``
    (m/s), acceleration ``|p''|`` (m/s^2) and jerk ``|p'''|`` (m/s^3) over the
    current output and the ``n`` steps. Returns the first non-OK status or OK.
    """
    status = cpg_step(0.0, st, coef, out)
    if status != OK:
        return status
    for r in range(4):
        ext[r] = 0.0
    for i in range(n + 1):
        if i > 0:
            status = cpg_step(dt, st, coef, out)
            if status != OK:
                return status
        opening = -out[0, 2]
        if opening > ext[0]:
            ext[0] = opening
        for r in range(1, 4):
            m = math.sqrt(out[r, 0] * out[r, 0] + out[r, 1] * out[r, 1] + out[r, 2] * out[r, 2])
            if m > ext[r]:
                ext[r] = m
    return OK
