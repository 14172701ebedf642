"""The master's cycle on the line's reference clock (ETG.1000.4 distributed clocks; the master side as SOEM's
examples do it, ``ec_sync``).

With distributed clocks every drive acts on SYNC0 pulses of its own clock, started by SOEM at a whole multiple of
the cycle time (``ecx_dcsync0``: SYNC0 at the system times k x cycle, shift 0), and the slaves' clocks are kept
on the reference clock (the first slave's) by the FRMW in every process data frame. The master's clock is not:
a host's crystal is off by tens of ppm, so a master that keeps its own period drifts through the SYNC0 interval
(50 ppm at 1 kHz: a whole cycle in 20 s), and each time its frame crosses a pulse one interval gets no outputs
and the next two. The frame reads the reference clock's system time as it passes (pysoem's ``dc_time``); its
phase in the SYNC0 interval is that time modulo the cycle. :class:`ReferenceClockFollower` holds it at half a
cycle (the frame's outputs reach every drive half a cycle before the pulse that takes them, the inputs it reads
were latched half a cycle before) by moving the loop's next deadline: a PI controller on the phase error, its
integral the clocks' drift. :func:`start_sync0` starts SYNC0 and checks that it runs."""
from __future__ import annotations

import time

from .line import SOEM_SYNC_DELAY, sync0_state

KP = 0.3          # of the phase error, per cycle: a first error of half a cycle settles in 10 cycles, no overshoot
KI = 0.01         # of its sum, the drift (tests/test_ethercat_clock.py); 0.3 of the frames' jitter moves deadlines
LIMIT = 0.05      # of the period: the most one cycle moves


class ReferenceClockFollower:
    """The correction (s) of the loop's next deadline from the reference clock's time ``dc_ns`` read by the
    frame of each cycle (:meth:`update`), for a loop of ``period`` s; ``phase_error_ns`` the last one."""

    def __init__(self, period: float):
        self.cycle_ns = int(round(period * 1e9))
        self.limit_ns = LIMIT * self.cycle_ns
        self.reset()

    def reset(self) -> None:
        self.integral = 0.0
        self.phase_error_ns = 0.0
        self.correction = 0.0

    def update(self, dc_ns: int) -> float:
        error = float(dc_ns % self.cycle_ns - self.cycle_ns // 2)
        self.phase_error_ns = error
        step = -(KP * error + KI * (self.integral + error))
        if abs(step) < self.limit_ns:        # the integral grows only while the step is not limited (anti-windup)
            self.integral += error
        else:
            step = self.limit_ns if step > 0 else -self.limit_ns
        self.correction = step * 1e-9
        return self.correction


def start_sync0(master, positions, period: float, name: str, tries: int = 3) -> int:
    """SYNC0 at ``period`` on the slaves at ``positions`` (SOEM's ``dc_sync``), each checked running once its start
    time has passed (:func:`.line.sync0_state`): a master held off longer than SOEM's 100 ms start delay
    activates a start time already past, which never comes; such a slave's SYNC0 is started again (one whose
    registers went unanswered is read again), ``tries`` times in all before one line beginning with ``name``
    names each with its state. Returns the restarts it took."""
    cycle = int(round(period * 1e9))
    states, restarts = {p: "late" for p in positions}, 0
    for attempt in range(tries):
        late = [p for p, state in states.items() if state == "late"]
        restarts += len(late) if attempt else 0
        for position in late:
            master.slaves[position].dc_sync(True, cycle)
        time.sleep(SOEM_SYNC_DELAY + 2 * period)
        states = {p: sync0_state(master.slaves[p]) for p in states}
        states = {p: state for p, state in states.items() if state in ("late", "unanswered")}
        if not states:
            return restarts
    why = {"late": "its next pulse (0x0990) stayed behind its system time (0x0910): the start time had passed "
                   f"before the activation (0x0981) reached it, the master held off longer than SOEM's "
                   f"{SOEM_SYNC_DELAY * 1e3:g} ms start delay",
           "unanswered": "its distributed clock registers did not answer"}
    raise RuntimeError(f"{name}: SYNC0 did not start after {tries} tries: "
                       + "; ".join(f"slave {p}: {why[state]}" for p, state in states.items()))
