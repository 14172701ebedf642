"""What the machine did to a wall-clock run, as the run itself measured it.

A test whose bounds need the loop (or an emulator beside it) to get a CPU when its period starts cannot hold
when a busy machine does not give it one: a real controller starved for tens of milliseconds loses its plant
too. Such a test asks the run's own report, after the run, and skips saying what was measured instead of
failing, but only when the loop's timing shows the machine was at fault (late wake-ups with work that fitted
the period), never for a loop whose own compute overran.
"""
from __future__ import annotations

import pytest

STARVED_SHARE = 0.10   # more than this share of cycles overran, mostly by waking up late


def starved(report) -> str:
    """Why the machine starved this run (a :class:`rtctl.rt.loop.LoopReport`), or ``""`` if it did not: more
    than :data:`STARVED_SHARE` of its cycles overran, or its wake-up latency's p99 exceeded a whole period (1 % of
    the cycles woke a period late or more), most late cycles having woken up late with their work fitting."""
    late = report.late
    p99 = report.timing.get("latency", {}).get("p99", float("nan"))
    if not late or 2 * late["woke_late"] <= late["cycles"]:
        return ""
    if report.overruns <= STARVED_SHARE * report.cycles and not p99 > 1e6 / report.rate_hz:
        return ""
    return (f"the machine starved the loop in this run: {report.overruns} of {report.cycles} cycles overran, "
            f"{late['woke_late']} of them woke up late (wake-up latency {late['woke_late_latency']:.0f} us mean in "
            f"them, p99 {p99:.0f} us over the run) with their work fitting the period")


def skip_if_starved(report, what: str) -> None:
    """Skip the calling test with the measurement when :func:`starved` says the machine was at fault."""
    reason = starved(report)
    if reason:
        pytest.skip(f"{what}: {reason}")


PEER_LATE_SHARE = 0.05   # of reads: replies later than the timeout beyond what the test injected


def skip_if_peer_starved(health, injected: int, what: str) -> None:
    """Skip the calling test when the emulator in the other process was starved: its replies missed the
    driver's timeout on more reads than the ``injected`` losses explain, by more than
    :data:`PEER_LATE_SHARE` of the reads (the loop's own report cannot see this: its cycles fitted)."""
    excess = health.timeouts - injected
    if excess > PEER_LATE_SHARE * health.reads:
        pytest.skip(f"{what}: the machine starved the emulator in this run: {health.timeouts} of {health.reads} "
                    f"reads timed out, {injected} by the test's own injection")
