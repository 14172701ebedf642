"""What both estimators' compiled steps share: the per-cycle input vector, the contact flags, the status codes
and the diagnostics vector.

Inputs: ``imu`` (float64, 10), an IMU reading's values ``[specific force (3, m/s^2), angular rate (3, rad/s),
orientation quaternion xyzw (4, NaN when the device gives none)]`` in the IMU's frame (drivers.sensor's
layout); ``contact`` (K), each foot's flag (1.0 in contact) or its normal force (N), as the ``contact_source``
option says.

Contact (the estimators' choice among contact sensors, the gait schedule and an estimated foot force): the
foot contact sensors. A gait schedule says when a foot should be down, not when it is: a late touch-down on
lower ground or a stumble is a foot "in contact" that moves (which the slip gate then has to catch every
time), and an estimated foot force needs the base acceleration that is being estimated (the momentum
observer of loops.observer sees joint torques, not where the base goes). The sensors' debounced flag is used
as is (``"flag"``); a sensor that gives its normal force can be thresholded here instead (``"force"``) with
hysteresis: in contact from ``force_on`` N up, out of contact below ``force_off`` N.

Diagnostics ``diag`` (float64): ``D_*`` per cycle (the NIS and its degrees of freedom, feet in contact,
accepted, rejected by the slip gate, slips so far, the step's status), each foot's contact flag, then the
divergence check's window (loops.estimation.monitor).
"""
from __future__ import annotations

import math

from numba import njit

from rtctl.dynamics.kernels import model_sizes

from .kinematics import CF_CONTACT, CI_FEET, CI_NBQ, CI_NBV
from .monitor import DIVERGED_NIS, DIVERGED_REJECTED

I_F, I_W, I_QUAT, IMU_SIZE = 0, 3, 6, 10
CONTACT_FLAG, CONTACT_FORCE = 0, 1
CONTACT_SOURCES = {"flag": CONTACT_FLAG, "force": CONTACT_FORCE}

D_NIS, D_DOF, D_IN_CONTACT, D_ACCEPTED, D_REJECTED, D_SLIPS, D_STATUS, D_CONTACT = 0, 1, 2, 3, 4, 5, 6, 7

# Status of a step (the estimators' fault messages name them)
OK = 0
UPDATE_FAILED, BAD_IMU, BAD_JOINTS, BAD_CONTACT, BAD_STATE, BAD_SHAPE = range(DIVERGED_REJECTED + 1,
                                                                             DIVERGED_REJECTED + 7)


def diag_monitor_offset(n_feet: int) -> int:
    return D_CONTACT + n_feet


@njit(cache=True)
def check_inputs(mi, dt, imu, contact, q, v, cfg_i):
    """OK, or the status naming the first bad input: BAD_SHAPE for a vector of the wrong length, else the IMU's
    specific force and rate, a joint position or velocity, a contact value; a step ``dt`` outside [0, 1) s."""
    nq, nv = model_sizes(mi)
    if (imu.shape[0] != IMU_SIZE or contact.shape[0] != cfg_i.shape[0] - CI_FEET or q.shape[0] != nq
            or v.shape[0] != nv):
        return BAD_SHAPE
    n_base_q, n_base_v = cfg_i[CI_NBQ], cfg_i[CI_NBV]
    if not (dt >= 0.0 and dt < 1.0):
        return BAD_IMU
    for k in range(I_F, I_QUAT):
        if not math.isfinite(imu[k]):
            return BAD_IMU
    for k in range(n_base_q, q.shape[0]):
        if not math.isfinite(q[k]):
            return BAD_JOINTS
    for k in range(n_base_v, v.shape[0]):
        if not math.isfinite(v[k]):
            return BAD_JOINTS
    for k in range(contact.shape[0]):
        if not math.isfinite(contact[k]):
            return BAD_CONTACT
    return OK


@njit(cache=True)
def contact_flags(contact, cfg_f, diag):
    """Each foot's contact flag into ``diag[D_CONTACT:]`` from the contact input (module docstring)."""
    source = cfg_f[CF_CONTACT]
    for k in range(contact.shape[0]):
        c = contact[k]
        if source == CONTACT_FLAG:
            diag[D_CONTACT + k] = 1.0 if c > 0.5 else 0.0
        elif c >= cfg_f[CF_CONTACT + 1]:
            diag[D_CONTACT + k] = 1.0
        elif c < cfg_f[CF_CONTACT + 2]:
            diag[D_CONTACT + k] = 0.0


@njit(cache=True)
def state_finite(x, P):
    for k in range(x.shape[0]):
        if not math.isfinite(x[k]):
            return False
    for k in range(P.shape[0]):
        if not (math.isfinite(P[k, k]) and P[k, k] >= 0.0):
            return False
    return True
