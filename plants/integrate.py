"""The fixed-step integrators every simulated plant uses: classical RK4 (and a Rosenbrock-W method) with rollback.

A plant describes its dynamics by a compiled *rate function*

    rates(q, v, dq, a, args) -> status

that writes the configuration rate ``dq = dq/dt`` (``v`` itself for a state in R^n; the free-flyer
quaternion rate for the rigid-body plant) and the acceleration ``a = dv/dt`` at ``(q, v)``, with
``args`` a tuple of whatever else it needs (model arrays, efforts held over the step, scratch);
status 0 is success in every plant's codes. :func:`rk4_advance` builds from it the kernel

    advance(q, v, dt, substeps, work, diverged, args) -> status

that takes ``substeps`` classical RK4 steps and, when a step fails or leaves a non-finite state
(then the status is ``diverged``), restores the state it started from and returns the status.
:func:`advance_with_rollback` does the same for any other one-step method (the rigid-body plant's
semi-implicit Euler). An optional ``finish(q, v, h, work, args) -> status`` runs after every step
(a projection back onto the configuration manifold, energy bookkeeping). All allocate nothing.

:func:`rosenbrock_w_advance` is the L-stable Rosenbrock-W method ROS34PW2 (Rang & Angermann, BIT 45, 2005,
order 3 for any Jacobian approximation; Hairer & Wanner, Solving ODEs II, sec. IV.7) for
``M(q) dv/dt = f(q, v)`` whose stiff part is a joint-space damping ``-B v`` with ``B`` diagonal and >= 0
(viscous friction, the slope of a regularised Coulomb curve). With the approximate Jacobian ``J = -M^-1 B``
of dv/dt (nothing for q) each stage solves

    (M(Q_i) + gamma h B) K_i = h (f(Q_i, V_i) - B sum_j gamma_ij K_j^v),   K_i^q = h dq/dt(Q_i, V_i),

one articulated-body pass with ``gamma h B`` added to the joint inertia
(:func:`rtctl.dynamics.kernels.aba_with_inertia`), as the linearly implicit Euler step of MuJoCo's implicit
integrators adds ``h B`` (MuJoCo documentation, Computation: numerical integration). The plant gives two
functions:
``prepare(q, v, gamma_h, args) -> status`` evaluates B at the step's start and the added inertia
``gamma_h B``; ``rates(q, v, s, dq, a, args) -> status`` writes dq/dt and ``a = (M + gamma h B)^-1 (f - B s)``.
For B = 0 the method is an explicit third-order Runge-Kutta method; it is L-stable (R(-inf) = 0, and
|R(z)| <= 0.13 for real z < -3): a joint whose damping the step cannot resolve settles in a few steps
instead of diverging.

Each plant gets its own compiled copy of these kernels in which the calls to its functions are
direct calls, compiled and cached like any other (:func:`specialise`). A compiled function could
instead take the rate function as an argument, but a kernel that passes one is not cacheable and
the receiving function is cached under a key holding the passed function's per-process identity,
so every process would compile both again. The extra arguments travel as one tuple (``*args``
made the plants' steps 10 to 25 % slower: every call copies them as one aggregate); the
``work`` array needs :data:`WORK_ROWS` rows at least ``max(nq, nv)`` wide.
"""
from __future__ import annotations

import math
import types

import numpy as np
from numba import njit

__all__ = ["WORK_ROWS", "W_Q0", "W_V0", "W_QS", "W_VS", "W_DQ", "W_A", "W_KQ", "W_KV", "ROSENBROCK_ROWS",
           "ROS_GAMMA", "advance_with_rollback", "inlined", "rk4_advance", "rosenbrock_w_advance", "specialise"]

# Rows of the integrator's work array, each at least max(nq, nv) wide: the state at the start of the
# step (restored on failure), the stage state, the rates of the current stage and their running sums.
W_Q0, W_V0, W_QS, W_VS, W_DQ, W_A, W_KQ, W_KV = range(8)
WORK_ROWS = 8
# The Rosenbrock-W method's rows after those: K_1..K_3 of q and of v (rows W_K + 2 j and W_K + 2 j + 1),
# then the stage's sum_j gamma_ij K_j^v.
W_K = WORK_ROWS
W_S = W_K + 6
ROSENBROCK_ROWS = W_S + 1

# ROS34PW2 (Rang & Angermann 2005): gamma_ii, alpha_ij, gamma_ij (i > j) and the weights b_j.
ROS_GAMMA = 4.3586652150845900e-01
ROS_ALPHA = np.array([[0.0, 0.0, 0.0],
                      [8.7173304301691801e-01, 0.0, 0.0],
                      [8.4457060015369423e-01, -1.1299064236484185e-01, 0.0],
                      [0.0, 0.0, 1.0]])
ROS_GAMMA_IJ = np.array([[0.0, 0.0, 0.0],
                         [-8.7173304301691801e-01, 0.0, 0.0],
                         [-9.0338057013044082e-01, 5.4180672388095326e-02, 0.0],
                         [2.4212380706095346e-01, -1.2232505839045147e+00, 5.4526025533510214e-01]])
ROS_B = np.array([2.4212380706095346e-01, -1.2232505839045147e+00, 1.5452602553351020e+00, ROS_GAMMA])

#: Decorator for the small functions a plant hands to these kernels (rate-function adapters, one-step methods,
#: ``finish`` hooks): numba inlines them into the plant's kernel, so they cost no call.
inlined = njit(cache=True, inline="always")


def specialise(template, name: str, inline: str = "never", **functions):
    """``njit(cache=True, inline=inline)`` of a copy of ``template`` whose global names ``functions`` are bound
    to the given compiled functions (or None); cached under ``<template>__<name>``, one entry per plant."""
    copy = types.FunctionType(template.__code__, {**template.__globals__, **functions}, template.__name__,
                              template.__defaults__)
    copy.__qualname__ = f"{template.__qualname__}__{name}"
    copy.__doc__ = template.__doc__
    return njit(cache=True, inline=inline)(copy)


@njit(cache=True)
def _finite(x):
    for k in range(x.shape[0]):
        if not math.isfinite(x[k]):
            return False
    return True


@njit(cache=True)
def _save(q, v, work):
    for k in range(q.shape[0]):
        work[W_Q0, k] = q[k]
    for k in range(v.shape[0]):
        work[W_V0, k] = v[k]


@njit(cache=True)
def _restore(q, v, work):
    for k in range(q.shape[0]):
        q[k] = work[W_Q0, k]
    for k in range(v.shape[0]):
        v[k] = work[W_V0, k]


def _rk4_step_template(q, v, h, work, args):
    """One classical Runge-Kutta step of ``h`` on R^nq x R^nv with ``rates(q, v, dq, a, args)``, in place;
    returns the first non-zero status of ``rates`` (then q and v are not yet changed) or 0."""
    nq, nv = q.shape[0], v.shape[0]
    qs, vs = work[W_QS, :nq], work[W_VS, :nv]
    dq, a = work[W_DQ, :nq], work[W_A, :nv]
    kq, kv = work[W_KQ, :nq], work[W_KV, :nv]
    status = rates(q, v, dq, a, args)  # noqa: F821 - bound by specialise
    if status != 0:
        return status
    for k in range(nq):
        kq[k] = dq[k]
        qs[k] = q[k] + 0.5 * h * dq[k]
    for k in range(nv):
        kv[k] = a[k]
        vs[k] = v[k] + 0.5 * h * a[k]
    for stage in range(2):
        status = rates(qs, vs, dq, a, args)  # noqa: F821
        if status != 0:
            return status
        c = 0.5 * h if stage == 0 else h
        for k in range(nq):
            kq[k] += 2.0 * dq[k]
            qs[k] = q[k] + c * dq[k]
        for k in range(nv):
            kv[k] += 2.0 * a[k]
            vs[k] = v[k] + c * a[k]
    status = rates(qs, vs, dq, a, args)  # noqa: F821
    if status != 0:
        return status
    for k in range(nq):
        q[k] += h / 6.0 * (kq[k] + dq[k])
    for k in range(nv):
        v[k] += h / 6.0 * (kv[k] + a[k])
    return 0


def _rosenbrock_w_step_template(q, v, h, work, args):
    """One ROS34PW2 step of ``h`` (module docstring) on R^nq x R^nv, in place; returns the first non-zero
    status of ``prepare`` or ``rates`` (then q and v are not yet changed) or 0."""
    nq, nv = q.shape[0], v.shape[0]
    qs, vs, s = work[W_QS, :nq], work[W_VS, :nv], work[W_S, :nv]
    dq, a = work[W_DQ, :nq], work[W_A, :nv]
    status = prepare(q, v, ROS_GAMMA * h, args)  # noqa: F821 - bound by specialise
    if status != 0:
        return status
    for i in range(4):
        for k in range(nq):
            x = q[k]
            for j in range(i):
                x += ROS_ALPHA[i, j] * work[W_K + 2 * j, k]
            qs[k] = x
        for k in range(nv):
            x, c = v[k], 0.0
            for j in range(i):
                kv = work[W_K + 2 * j + 1, k]
                x += ROS_ALPHA[i, j] * kv
                c += ROS_GAMMA_IJ[i, j] * kv
            vs[k] = x
            s[k] = c
        status = rates(qs, vs, s, dq, a, args)  # noqa: F821
        if status != 0:
            return status
        if i < 3:
            for k in range(nq):
                work[W_K + 2 * i, k] = h * dq[k]
            for k in range(nv):
                work[W_K + 2 * i + 1, k] = h * a[k]
    for k in range(nq):
        x = ROS_B[3] * h * dq[k]
        for j in range(3):
            x += ROS_B[j] * work[W_K + 2 * j, k]
        q[k] += x
    for k in range(nv):
        x = ROS_B[3] * h * a[k]
        for j in range(3):
            x += ROS_B[j] * work[W_K + 2 * j + 1, k]
        v[k] += x
    return 0


def _advance_template(q, v, dt, substeps, work, diverged, args):
    """Advance ``(q, v)`` in place by ``dt`` in ``substeps`` equal steps of ``step(q, v, h, work, args)``, each
    followed by ``finish(q, v, h, work, args)`` when given.

    Returns 0, the first non-zero status of ``step`` or ``finish``, or ``diverged`` when a step leaves q or v
    with a NaN or inf; on any non-zero status q and v are restored to their values at the call."""
    _save(q, v, work)
    h = dt / substeps
    status = 0
    for _ in range(substeps):
        status = step(q, v, h, work, args)  # noqa: F821 - bound by specialise
        if status != 0:
            break
        if finish is not None:  # noqa: F821 - bound by specialise
            status = finish(q, v, h, work, args)  # noqa: F821
            if status != 0:
                break
        if not (_finite(q) and _finite(v)):
            status = diverged
            break
    if status != 0:
        _restore(q, v, work)
    return status


def rk4_advance(name: str, rates, finish=None):
    """The compiled ``advance(q, v, dt, substeps, work, diverged, args) -> status`` of classical RK4 on the
    rate function ``rates`` (module docstring), with ``finish`` after every step."""
    step = specialise(_rk4_step_template, f"{name}_step", inline="always", rates=rates)
    return advance_with_rollback(name, step, finish)


def rosenbrock_w_advance(name: str, prepare, rates, finish=None):
    """The compiled ``advance(q, v, dt, substeps, work, diverged, args) -> status`` of ROS34PW2 on the plant's
    ``prepare`` and ``rates`` (module docstring), with ``finish`` after every step; ``work`` needs
    :data:`ROSENBROCK_ROWS` rows."""
    step = specialise(_rosenbrock_w_step_template, f"{name}_step", inline="always", prepare=prepare, rates=rates)
    return advance_with_rollback(name, step, finish)


def advance_with_rollback(name: str, step, finish=None):
    """The compiled ``advance(q, v, dt, substeps, work, diverged, args) -> status`` of the one-step method
    ``step(q, v, h, work, args) -> status`` (module docstring), with ``finish`` after every step."""
    return specialise(_advance_template, name, step=step, finish=finish)
