"""The compiled CPG step: a phase oscillator with a Fourier output layer, modulated through filters.

The generator keeps one phase ``phi`` (rad) and, per axis ``j`` of the incisal
point (0 lateral x, 1 anterior-posterior y, 2 vertical z, m), a truncated
Fourier series over that phase -- the output layer of the adaptive-frequency
oscillator of Petric et al. (2011, IJRR 30(14), eq. 4; the single-oscillator
form of Gams et al. 2009, Auton Robot 27:3-23) with the coefficients frozen
after learning (:mod:`loops.cpg.learning`)::

    p_j(t) = a_j0 + sum_{k=1..K} a_jk cos(k phi) + b_jk sin(k phi)              (O1)
    phi-dot = omega                                                              (O2)

so every harmonic is phase-locked to the fundamental (the oscillators of the
programmable CPG of Righetti & Ijspeert, ICRA 2006, reduced to their
phase-locked state).
Online modulation never writes ``omega`` or the coefficients directly: each
follows its target ``u`` (set by the therapist) through a critically damped
linear filter with a four-fold pole at ``-lambda``, the cascade of four
first-order lags ::

    x1' = lambda (u - x1),  x_i' = lambda (x_{i-1} - x_i)  (i = 2..4),  y = x4    (O3)

the amplitude dynamics of Ijspeert et al. (2007, Science 315:1416-1420,
eq. 2: a critically damped second-order system) raised to fourth order, so that
after a step of any target ``y``, ``y'``, ``y''`` and ``y'''`` stay continuous::

    y' = lambda (x3 - x4),  y'' = lambda^2 (x2 - 2 x3 + x4),
    y''' = lambda^3 (x1 - 3 x2 + 3 x3 - x4)                                      (O4)

A scaled amplitude or a new pattern is a new coefficient target; a new
frequency is a new ``omega`` target. Position, velocity, acceleration and jerk
of (O1) follow by the chain rule from (O4) and the derivatives of the basis
functions (``g = cos k phi``: ``g' = -k sin``, ``g'' = -k^2 cos``,
``g''' = k^3 sin`` with respect to ``phi``)::

    p = sum c g,   p' = sum c' g + c g-dot,   p'' = sum c'' g + 2 c' g-dot + c g-ddot,
    p''' = sum c''' g + 3 c'' g-dot + 3 c' g-ddot + c g-dddot,
    g-dot = g' w,  g-ddot = g'' w^2 + g' w',  g-dddot = g''' w^3 + 3 g'' w w' + g' w''   (O5)

Integration is exact for a target held over the step (no RK error at any
``dt``): with deviations ``e_i = x_i - u``, ``s = lambda dt`` and
``E = exp(-s)``, (O3) is ``e' = lambda (N - I) e`` with ``N`` the shift, so ::

    e_i(t + dt) = E sum_{m=0..i-1} s^m / m! e_{i-m}(t)                           (O6)

and the phase advances by the exact integral of ``omega = u + e_4``::

    phi(t + dt) = phi(t) + u dt + sum_i (e_i(t) - e_i(t + dt)) / lambda          (O7)

Since (O3) has a non-negative impulse response of unit gain, every coefficient
set the generator passes through is a convex combination of the targets it
was given: the position envelope of a transition never leaves the hull of the
accepted patterns (used by :mod:`loops.cpg.limits`).

Memory layout (all float64, preallocated, C-contiguous):

* ``st`` (``ST_LEN``): phase, the four ``omega`` stages, the ``omega`` target,
  the two filter rates (1/s), time (s) and the filtered ``omega``,
  ``omega'``, ``omega''`` of the last evaluation;
* ``coef`` (5, 3, 2K + 1): ``coef[0]`` the coefficient targets, ``coef[1..4]``
  the four filter stages; along the last axis ``a_0, a_1..a_K, b_1..b_K``;
* ``out`` (4, 3): rows ``p``, ``p'``, ``p''``, ``p'''`` of the incisal point.

:func:`cpg_step` is the whole per-cycle work; it allocates nothing.
"""
from __future__ import annotations

import math

from numba import njit

__all__ = [
    "BAD_DT", "BAD_SHAPE", "OK", "ST_LEN", "ST_OMEGA", "ST_OMEGA_D", "ST_OMEGA_DD", "ST_OMEGA_STAGE", "ST_OMEGA_TARGET",
    "ST_PHASE", "ST_RATE_COEF", "ST_RATE_OMEGA", "ST_TIME", "cpg_step", "simulate_extremes",
]

ST_PHASE = 0
ST_OMEGA_STAGE = 1      # stages x1..x4 of the omega filter in slots 1..4; x4 is omega
ST_OMEGA_TARGET = 5
ST_RATE_OMEGA = 6       # lambda of the omega filter (1/s)
ST_RATE_COEF = 7        # lambda of the coefficient filters (1/s)
ST_TIME = 8
ST_OMEGA = 9            # omega, omega', omega'' at the last evaluation (rad/s, rad/s^2, rad/s^3)
ST_OMEGA_D = 10
ST_OMEGA_DD = 11
ST_LEN = 12

OK, BAD_DT, BAD_SHAPE = 0, 1, 2
TWO_PI = 2.0 * math.pi

_SIG_STEP = "int64(float64, float64[::1], float64[:, :, ::1], float64[:, ::1])"
_SIG_SIM = "int64(float64, int64, float64[::1], float64[:, :, ::1], float64[:, ::1], float64[::1])"


@njit(cache=True)
def _evaluate(st, coef, out):
    """Write p, p', p'', p''' (O1, O5) of the current state into ``out``."""
    nc = coef.shape[2]
    nh = (nc - 1) // 2
    lw = st[ST_RATE_OMEGA]
    x2, x3, x4 = st[ST_OMEGA_STAGE + 1], st[ST_OMEGA_STAGE + 2], st[ST_OMEGA_STAGE + 3]
    w = x4
    wd = lw * (x3 - x4)
    wdd = lw * lw * (x2 - 2.0 * x3 + x4)
    st[ST_OMEGA] = w
    st[ST_OMEGA_D] = wd
    st[ST_OMEGA_DD] = wdd
    lc = st[ST_RATE_COEF]
    lc2 = lc * lc
    lc3 = lc2 * lc
    for j in range(3):
        c1, c2, c3, c4 = coef[1, j, 0], coef[2, j, 0], coef[3, j, 0], coef[4, j, 0]
        out[0, j] = c4
        out[1, j] = lc * (c3 - c4)
        out[2, j] = lc2 * (c2 - 2.0 * c3 + c4)
        out[3, j] = lc3 * (c1 - 3.0 * c2 + 3.0 * c3 - c4)
    phi = st[ST_PHASE]
    cos1, sin1 = math.cos(phi), math.sin(phi)
    ck, sk = cos1, sin1
    w2 = w * w
    w3 = w2 * w
    wwd3 = 3.0 * w * wd
    for k in range(1, nh + 1):
        kf = float(k)
        k2 = kf * kf
        k3 = k2 * kf
        # cos(k phi) and its time derivatives
        g, g1, g2, g3 = ck, -kf * sk, -k2 * ck, k3 * sk
        gd = g1 * w
        gdd = g2 * w2 + g1 * wd
        gddd = g3 * w3 + g2 * wwd3 + g1 * wdd
        # sin(k phi)
        h, h1, h2, h3 = sk, kf * ck, -k2 * sk, -k3 * ck
        hd = h1 * w
        hdd = h2 * w2 + h1 * wd
        hddd = h3 * w3 + h2 * wwd3 + h1 * wdd
        for j in range(3):
            c1, c2, c3, c4 = coef[1, j, k], coef[2, j, k], coef[3, j, k], coef[4, j, k]
            v, vd = c4, lc * (c3 - c4)
            vdd = lc2 * (c2 - 2.0 * c3 + c4)
            vddd = lc3 * (c1 - 3.0 * c2 + 3.0 * c3 - c4)
            i = nh + k
            d1, d2, d3, d4 = coef[1, j, i], coef[2, j, i], coef[3, j, i], coef[4, j, i]
            u, ud = d4, lc * (d3 - d4)
            udd = lc2 * (d2 - 2.0 * d3 + d4)
            uddd = lc3 * (d1 - 3.0 * d2 + 3.0 * d3 - d4)
            out[0, j] += v * g + u * h
            out[1, j] += vd * g + v * gd + ud * h + u * hd
            out[2, j] += vdd * g + 2.0 * vd * gd + v * gdd + udd * h + 2.0 * ud * hd + u * hdd
            out[3, j] += (vddd * g + 3.0 * vdd * gd + 3.0 * vd * gdd + v * gddd
                          + uddd * h + 3.0 * udd * hd + 3.0 * ud * hdd + u * hddd)
        ck, sk = ck * cos1 - sk * sin1, sk * cos1 + ck * sin1


@njit(_SIG_STEP, cache=True)
def cpg_step(dt, st, coef, out):
    """Advance the CPG by ``dt`` s (exact, eqs. O6-O7) and write p, p', p'', p''' into ``out`` (O1, O5).

    ``dt = 0`` only evaluates. Returns ``OK``, ``BAD_DT`` (``dt`` negative or
    not finite) or ``BAD_SHAPE`` (``st``, ``coef``, ``out`` of the wrong shape).
    """
    if not (dt >= 0.0 and dt < math.inf):
        return BAD_DT
    if (st.shape[0] != ST_LEN or coef.shape[0] != 5 or coef.shape[1] != 3 or coef.shape[2] % 2 != 1
            or out.shape[0] != 4 or out.shape[1] != 3):
        return BAD_SHAPE
    if dt > 0.0:
        lam = st[ST_RATE_OMEGA]
        u = st[ST_OMEGA_TARGET]
        s = lam * dt
        big_e = math.exp(-s)
        s2 = 0.5 * s * s
        s3 = s2 * s / 3.0
        o = ST_OMEGA_STAGE
        e1, e2, e3, e4 = st[o] - u, st[o + 1] - u, st[o + 2] - u, st[o + 3] - u
        n1 = big_e * e1
        n2 = big_e * (e2 + s * e1)
        n3 = big_e * (e3 + s * e2 + s2 * e1)
        n4 = big_e * (e4 + s * e3 + s2 * e2 + s3 * e1)
        phi = st[ST_PHASE] + u * dt + ((e1 - n1) + (e2 - n2) + (e3 - n3) + (e4 - n4)) / lam
        if phi >= TWO_PI or phi < 0.0:
            phi -= TWO_PI * math.floor(phi / TWO_PI)
        st[ST_PHASE] = phi
        st[o], st[o + 1], st[o + 2], st[o + 3] = u + n1, u + n2, u + n3, u + n4
        lam = st[ST_RATE_COEF]
        s = lam * dt
        big_e = math.exp(-s)
        s2 = 0.5 * s * s
        s3 = s2 * s / 3.0
        for j in range(3):
            for i in range(coef.shape[2]):
                u = coef[0, j, i]
                e1, e2, e3, e4 = coef[1, j, i] - u, coef[2, j, i] - u, coef[3, j, i] - u, coef[4, j, i] - u
                coef[1, j, i] = u + big_e * e1
                coef[2, j, i] = u + big_e * (e2 + s * e1)
                coef[3, j, i] = u + big_e * (e3 + s * e2 + s2 * e1)
                coef[4, j, i] = u + big_e * (e4 + s * e3 + s2 * e2 + s3 * e1)
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
