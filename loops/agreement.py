"""A measured force or torque held against a momentum observer's estimate of the same quantity.

A momentum observer estimates an external force or torque ``tau_ext`` through a first-order lag of gain K_O
(Haddadin, De Luca & Albu-Schaeffer, IEEE T-RO 33(6), 2017, eq. 23; discretely ``r_k = a r_{k-1} + (1 - a)
tau_avg``, ``a = exp(-K_O dt)``, :mod:`rtctl.loops.observer`). A sensor measures ``tau_ext`` with no lag. To
compare like with like the measurement ``m`` goes through the same discrete lag,

    mbar_k = a mbar_{k-1} + (1 - a) (m_{k-1} + m_k) / 2,        mbar = 0 where the observer restarts (r = 0),

(the trapezoid average over the period, as the observer integrates its own momentum terms) and the difference
``d = mbar - r`` is what the two do not share: an error of the model (masses, friction, the load the sensor
carries), of the sensor (a bias, a broken cable) or a force only one of them can see (a contact between the
base and the sensor acts on the robot but not across the sensor). Component k disagrees while ``|d_k| >
tolerance_k``; when it has disagreed for longer than ``duration`` s (``floor(duration / dt) + 1`` consecutive
cycles) :meth:`Agreement.update` names it. One compiled call per cycle, allocation-free.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# Rows of the comparison's array (n wide): the last measurement, the lagged measurement, the difference.
A_LAST, A_LAGGED, A_DIFFERENCE = range(3)
A_ROWS = 3
QUIET = 0.25    # of the difference: a side whose size is below it "sees almost none of it"


@njit(cache=True)
def agreement_step(measured, estimate, decay, tolerance, rows, counts, limit, first):
    """One cycle of the module docstring's comparison: ``rows`` (A_ROWS, n), ``counts`` (n, int64) the consecutive
    cycles each component has disagreed. Returns the component that has disagreed for ``limit`` cycles or more
    (the largest ``|d| / tolerance`` among them), -1 if none."""
    last, lagged, diff = rows[A_LAST], rows[A_LAGGED], rows[A_DIFFERENCE]
    worst, excess = -1, 0.0
    for k in range(measured.shape[0]):
        if first:
            lagged[k] = 0.0
        else:
            lagged[k] = decay[k] * lagged[k] + (1.0 - decay[k]) * 0.5 * (last[k] + measured[k])
        last[k] = measured[k]
        diff[k] = lagged[k] - estimate[k]
        ratio = abs(diff[k]) / tolerance[k]
        counts[k] = counts[k] + 1 if ratio > 1.0 else 0
        if counts[k] >= limit and ratio > excess:
            worst, excess = k, ratio
    return worst


def persistence_cycles(duration: float, dt: float) -> int:
    """The consecutive cycles of period ``dt`` that last longer than ``duration`` s."""
    return int(math.floor(duration / dt + 1e-9)) + 1


class Agreement:
    """The module docstring's comparison of ``n`` components, the observer's lag ``decay`` (n, ``exp(-K_O dt)``),
    ``tolerance`` (n, the quantity's units, > 0), ``duration`` (s) at the control period ``dt``. After
    :meth:`update`: :attr:`lagged` (the measurement through the observer's lag) and :attr:`difference`."""

    def __init__(self, decay, tolerance, duration: float, dt: float):
        self.decay = np.ascontiguousarray(decay, dtype=float)
        self.tolerance = np.ascontiguousarray(tolerance, dtype=float)
        n = self.decay.shape[0]
        self.duration, self.limit = float(duration), persistence_cycles(duration, dt)
        self.rows = np.zeros((A_ROWS, n))
        self.lagged, self.difference = self.rows[A_LAGGED], self.rows[A_DIFFERENCE]
        self.counts = np.zeros(n, dtype=np.int64)
        self._first = True

    def reset(self) -> None:
        """Restart with the observer: the lagged measurement from zero, no disagreement counted."""
        self._first = True
        self.counts[:] = 0

    def update(self, measured, estimate) -> int:
        """One cycle; the component that has disagreed for longer than ``duration``, else -1."""
        hit = agreement_step(measured, estimate, self.decay, self.tolerance, self.rows, self.counts, self.limit,
                             self._first)
        self._first = False
        return hit

    def warm(self, measured, estimate) -> None:
        """Reach :meth:`update`'s kernel on copies (:mod:`rtctl.rt.warmup`)."""
        agreement_step(measured, estimate, self.decay, self.tolerance, self.rows.copy(), self.counts.copy(),
                       self.limit, True)

    def plausible_cause(self, estimate, silent: bool = False,
                        unseen: str = "a contact between the base and the sensor") -> str:
        """Which of the module docstring's causes the sizes of the two sides point at (the slow path of a fault);
        ``silent``: the sensor's raw reading is not even what its own load weighs (the caller knows); ``unseen``:
        a force the observer sees that does not pass through the sensor."""
        d = float(np.linalg.norm(self.difference))
        if silent:
            return ("the sensor reads almost nothing, not even the weight of what it carries: a broken or "
                    "disconnected sensor is plausible")
        if np.linalg.norm(self.lagged) < QUIET * d:
            return ("the sensor reads almost none of what the observer sees: a broken or disconnected sensor is "
                    f"plausible (or {unseen}, which it cannot see)")
        if np.linalg.norm(estimate) < QUIET * d:
            return ("the observer sees almost none of what the sensor reads: a sensor bias or drift is plausible "
                    "(tare it), or a load on the sensor it is not told of")
        return ("both see a force but not the same: a model error is plausible (masses, friction, the load the "
                "sensor carries, its mount)")


class SensorBesideObserver:
    """A force-torque ``sensor`` read through ``processing`` (:class:`~rtctl.loops.wrench.WrenchProcessing`)
    beside ``observer``'s estimate of the same force, held by ``agreement``. The comparison starts at a run's
    second cycle: in simulation the first reading comes before the first effort reached the plant."""

    def __init__(self, observer, sensor, processing, agreement: Agreement, tare_on_start: bool):
        self.observer, self.sensor = observer, sensor
        self.name = sensor.options.name
        self.processing, self.agreement = processing, agreement
        self.tare_on_start = bool(tare_on_start)
        self.samples = 0          # cycles since the run started

    @property
    def comparing(self) -> bool:
        return self.samples > 1

    def reset(self) -> None:
        """A run starts (the observer restarts with it): the comparison too, and the tare if asked for."""
        self.agreement.reset()
        self.samples = 0
