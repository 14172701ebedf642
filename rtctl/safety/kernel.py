"""The safety monitor's per-cycle kernels and the layout of the arrays they share with it.

:func:`_safety_cycle` is the whole check of one cycle (:class:`rtctl.safety.SafetyMonitor.check`);
:func:`_latched_hold` the hold's command while latched (:mod:`rtctl.safety.stop`). Both are compiled at
import (explicit signatures) and allocate nothing.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .stop import hold_command

# Status codes of _safety_cycle. Below TRIP: no trip.
OK = 0
CLAMP_CONTINUED = 1   # effort clamped, and it was already clamped on the previous cycle
CLAMP_NEW = 2         # effort clamped, first cycle of a burst (record an event)
TRIP = 10
NAN_Q = 10            # where = index into state.q
NAN_V = 11            # where = index into state.v
NAN_EFFORT = 12       # where = index into state.effort
POSITION = 13         # where = actuated joint number
VELOCITY = 14         # where = actuated joint number
STALE = 15            # where = -1, value = number of consecutive stale cycles
NAN_COMMAND = 16      # where = index into command.effort
EFFORT = 17           # where = actuated joint number (effort_clamp False)
NEVER_CHECKED = 99    # state status before the first check

# Rows of the float table ``lim`` (one column per actuated joint). L_LO/L_HI are the position bounds
# checked now: the soft limits, or during a recovery re-arm the position the joint was re-armed at
# (less a tolerance), tightened back to the soft limit L_SOFT_LO/L_SOFT_HI once the joint is inside it.
L_LO, L_HI, L_VMAX, L_EMAX, L_DAMP, L_SOFT_LO, L_SOFT_HI = 0, 1, 2, 3, 4, 5, 6
L_ROWS = 7
# Slots of the int64 control/counter array ``ctl``.
C_CYCLES = 0         # checks performed
C_CLAMPS = 1         # checks in which at least one effort was clamped
C_STALE = 2          # current run of consecutive stale checks
C_CLAMPING = 3       # 1 if the previous check clamped
C_WATCHDOG = 4       # config: watchdog_cycles
C_CLAMP_MODE = 5     # config: 1 = clamp, 0 = trip on effort limit
C_DAMPING = 6        # config: 1 = damping safe command (also the hold's fallback), 0 = zero torque
C_WHERE = 7          # offending index of the returned code
C_STATE_CODE = 8     # status of the state alone (for rearm): OK, NAN_*, POSITION, VELOCITY
C_STATE_WHERE = 9    # its offending index
C_WIDTH = 10
# Slots of the float64 array ``val``.
V_VALUE = 0          # offending value of the returned code (before clamping for an effort)
V_STATE_VALUE = 1    # offending value of the state status
V_WIDTH = 2


_A = "float64[::1]"
_SIG = (f"int64({_A}, {_A}, {_A}, {_A}, {_A}, {_A}, {_A}, boolean, boolean, "
        "int64[::1], int64[::1], float64[:, ::1], int64[::1], float64[::1])")


# The kernel's helpers are inlined into it: as separate calls, the reference counting of their array
# arguments would add about half to the time of a check.
@njit(cache=True, inline="always")
def _first_non_finite(x):
    """Index of the first NaN or infinity in ``x``; -1 when all are finite."""
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return i
    return -1


@njit(cache=True, inline="always")
def _check_state(q, v, tau, q_index, v_index, lim):
    """(code, where, value) of the measured state: non-finite values, then actuated positions outside the bounds
    checked now (a recovering joint's bound tightened back to the soft limit once the joint is inside it), then
    actuated speeds above their bound; ``(OK, -1, 0.0)`` when none."""
    i = _first_non_finite(q)
    if i >= 0:
        return NAN_Q, i, q[i]
    i = _first_non_finite(v)
    if i >= 0:
        return NAN_V, i, v[i]
    i = _first_non_finite(tau)
    if i >= 0:
        return NAN_EFFORT, i, tau[i]
    n = q_index.shape[0]
    for k in range(n):
        x = q[q_index[k]]
        if lim[L_LO, k] < lim[L_SOFT_LO, k] and x >= lim[L_SOFT_LO, k]:
            lim[L_LO, k] = lim[L_SOFT_LO, k]
        if lim[L_HI, k] > lim[L_SOFT_HI, k] and x <= lim[L_SOFT_HI, k]:
            lim[L_HI, k] = lim[L_SOFT_HI, k]
        if x < lim[L_LO, k] or x > lim[L_HI, k]:
            return POSITION, k, x
    for k in range(n):
        x = v[v_index[k]]
        if abs(x) > lim[L_VMAX, k]:
            return VELOCITY, k, x
    return OK, -1, 0.0


@njit(cache=True, inline="always")
def _check_command(cmd_effort, v_index, lim, clamp):
    """(code, where, value) of the command about to be written: a non-finite effort, then actuated efforts above
    their limit: EFFORT for the first, or with ``clamp`` each clamped in place to exactly its limit and CLAMP_NEW
    naming the first (its value before clamping); ``(OK, -1, 0.0)`` when none."""
    i = _first_non_finite(cmd_effort)
    if i >= 0:
        return NAN_COMMAND, i, cmd_effort[i]
    code, where, value = OK, -1, 0.0
    for k in range(v_index.shape[0]):
        i = v_index[k]
        e = cmd_effort[i]
        limit = lim[L_EMAX, k]
        if abs(e) > limit:
            if not clamp:
                return EFFORT, k, e
            if code == OK:
                code, where, value = CLAMP_NEW, k, e
            cmd_effort[i] = limit if e > 0 else -limit
    return code, where, value


@njit(f"void({_A}, {_A}, {_A}, {_A}, {_A}, int64[::1], float64[:, ::1], boolean)", cache=True, inline="always")
def _write_safe_command(v, cmd_effort, cmd_stiffness, cmd_damping, cmd_velocity, v_index, lim, damping):
    """Stiffness, damping and velocity target 0 on every row, and effort 0; with ``damping``, when every actuated
    velocity is finite, effort ``-D v`` clamped to ``+-effort_limit`` on the actuated joints. Compiled at import
    too: :meth:`SafetyMonitor.safe_command` calls it at the end of a run, where nothing may compile."""
    for i in range(cmd_effort.shape[0]):
        cmd_effort[i] = 0.0
        cmd_stiffness[i] = 0.0
        cmd_damping[i] = 0.0
        cmd_velocity[i] = 0.0
    if not damping:
        return
    n = v_index.shape[0]
    for k in range(n):
        if not np.isfinite(v[v_index[k]]):
            return
    for k in range(n):
        e = 0.0 - lim[L_DAMP, k] * v[v_index[k]]  # 0.0 - x: no -0.0 for x = 0
        limit = lim[L_EMAX, k]
        if e > limit:
            e = limit
        elif e < -limit:
            e = -limit
        cmd_effort[v_index[k]] = e


@njit(_SIG, cache=True)
def _safety_cycle(q, v, tau, cmd_effort, cmd_stiffness, cmd_damping, cmd_velocity, fresh, force_safe,
                  q_index, v_index, lim, ctl, val):
    """One safety check: counters, watchdog, state checks, command checks, then the safe command if needed.

    Returns a status code (see the module constants); the offending index is left
    in ``ctl[C_WHERE]`` and the value in ``val[V_VALUE]``. With ``force_safe``
    (latched, or a fault reported this cycle) the command is not checked and the
    safe command is always written. Allocates nothing.
    """
    ctl[C_CYCLES] += 1
    if fresh:
        ctl[C_STALE] = 0
    else:
        ctl[C_STALE] += 1
    code, where, value = _check_state(q, v, tau, q_index, v_index, lim)
    ctl[C_STATE_CODE] = code
    ctl[C_STATE_WHERE] = where
    val[V_STATE_VALUE] = value
    if code == OK and ctl[C_STALE] > ctl[C_WATCHDOG]:
        code, where, value = STALE, -1, float(ctl[C_STALE])
    if code == OK and not force_safe:
        code, where, value = _check_command(cmd_effort, v_index, lim, ctl[C_CLAMP_MODE] != 0)
    if code == CLAMP_NEW:
        ctl[C_CLAMPS] += 1
        if ctl[C_CLAMPING]:
            code = CLAMP_CONTINUED
        ctl[C_CLAMPING] = 1
    else:
        ctl[C_CLAMPING] = 0
    ctl[C_WHERE] = where
    val[V_VALUE] = value
    if force_safe or code >= TRIP:
        _write_safe_command(v, cmd_effort, cmd_stiffness, cmd_damping, cmd_velocity, v_index, lim,
                            ctl[C_DAMPING] != 0)
    return code


UNTRUSTED = -1  # _latched_hold: the state the hold would act on is not finite or not fresh


@njit(f"int64(boolean, {_A}, {_A}, {_A}, int64[::1], int64[::1], int64[:, ::1], float64[:, ::1], float64[:, ::1], "
      f"float64[:, ::1], {_A}, float64[:, ::1], {_A}, {_A}, int64[::1])", cache=True)
def _latched_hold(start, q, v, effort, q_index, v_index, mi, mf, ws, plan, clock, mass, alpha, tau, ctl):
    """The hold's command (:func:`~rtctl.safety.stop.hold_command`) when the last check found the state finite
    and fresh; else :data:`UNTRUSTED`, the command left as the kernel wrote it."""
    code = ctl[C_STATE_CODE]
    if code == NAN_Q or code == NAN_V or code == NAN_EFFORT or ctl[C_STALE] > ctl[C_WATCHDOG]:
        return UNTRUSTED
    return hold_command(start, q, v, effort, q_index, v_index, mi, mf, ws, plan, clock, mass, alpha, tau)
