"""The estimators' divergence check: the normalised innovation squared (NIS) over a sliding window against its
chi-square bound.

For a consistent Kalman filter the innovations z_k are zero-mean, white and have the covariance S_k the filter
computes, so eps_k = z_k^T S_k^-1 z_k is chi-square with dim(z_k) degrees of freedom and the sum over a window
of N cycles is chi-square with the summed dimensions (Bar-Shalom, Li & Kirubarajan, "Estimation with
Applications to Tracking and Navigation", 2001, section 5.4.2, eqs. 5.4.2-7 to 5.4.2-9). The check latches
when the window's sum exceeds the (1 - alpha) quantile of that distribution, by the Wilson-Hilferty
approximation chi2_k(1 - alpha) = k (1 - 2/(9k) + z_alpha sqrt(2/(9k)))^3 (Johnson, Kotz & Balakrishnan,
"Continuous Univariate Distributions", vol. 1, 1994, eq. 18.24). In these tails it errs high, so the check
is a little more tolerant than stated: by 0.16 % at 100 degrees of freedom and alpha = 1e-6, by 0.31 % at
alpha = 1e-9 (tests/test_estimation_kernels.py compares it with scipy); the window is tested from 100
degrees of freedom on.

A filter that rejects every foot it is given (each innovation past the slip gate) learns nothing from the legs
and drifts on the IMU alone, which the NIS of the accepted ones would never show: ``max_rejected`` cycles in a
row with feet in contact and none accepted latch too.

Layout of ``mon`` (float64): the header ``M_*`` then the window's per-cycle NIS and degrees of freedom.
"""
from __future__ import annotations

import math

from numba import njit

M_SUM_NIS, M_SUM_DOF, M_NEXT, M_FILLED, M_REJECTED_RUN, M_LAST_BOUND = 0, 1, 2, 3, 4, 5
M_HEADER = 6
MIN_DOF = 100             # the window is tested from this many degrees of freedom on
DIVERGED_NIS, DIVERGED_REJECTED = 1, 2


def monitor_size(window: int) -> int:
    return M_HEADER + 2 * window


@njit(cache=True)
def chi2_quantile(dof, z):
    """Wilson-Hilferty approximation of the chi-square quantile with ``dof`` degrees of freedom at the standard
    normal quantile ``z``."""
    c = 2.0 / (9.0 * dof)
    t = 1.0 - c + z * math.sqrt(c)
    return dof * t * t * t


@njit(cache=True)
def monitor_reset(mon):
    for k in range(mon.shape[0]):
        mon[k] = 0.0


@njit(cache=True)
def monitor_add(mon, nis, dof, in_contact, accepted, z, max_rejected):
    """Add this cycle's NIS (``dof`` degrees of freedom; 0 when nothing was measured) to the window; 0, or the
    reason the filter diverged (``DIVERGED_NIS``, ``DIVERGED_REJECTED``)."""
    window = (mon.shape[0] - M_HEADER) // 2
    k = int(mon[M_NEXT])
    o = M_HEADER + 2 * k
    mon[M_SUM_NIS] += nis - mon[o]
    mon[M_SUM_DOF] += dof - mon[o + 1]
    mon[o], mon[o + 1] = nis, dof
    mon[M_NEXT] = (k + 1) % window
    if mon[M_FILLED] < window:
        mon[M_FILLED] += 1.0
    if in_contact > 0 and accepted == 0:
        mon[M_REJECTED_RUN] += 1.0
    else:
        mon[M_REJECTED_RUN] = 0.0
    if mon[M_REJECTED_RUN] > max_rejected:
        return DIVERGED_REJECTED
    total = mon[M_SUM_DOF]
    if total < MIN_DOF:
        return 0
    bound = chi2_quantile(total, z)
    mon[M_LAST_BOUND] = bound
    if mon[M_SUM_NIS] > bound:
        return DIVERGED_NIS
    return 0
