"""Where a cycle's compute time goes: driver read, control, driver write, in-process plant, telemetry.

A component made slow on purpose (a busy wait of known length) shows up in its own part and in no other;
the parts add up to the cycle's compute time; the loud overrun warning names what made the cycles late: the
part that took the time, or -- when the loop's work fits the period and the cycles overran because the loop
woke up late (a busy machine oversleeping) -- the wake-up latency. It speaks above 1 % overruns only.
"""
import time

import numpy as np
import pytest

from rtctl.rt.loop import LoopReport
from rtctl.rt.stats import PARTS, CycleStats
from telemetry_helpers import make_loop


def _busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _slowed(obj, name, seconds):
    original = getattr(obj, name)

    def slow(*args):
        _busy(seconds)
        return original(*args)

    setattr(obj, name, slow)


def _parts(loop):
    s = loop.stats
    n = s.count
    return {part: s.parts[k, :n] * 1e6 for k, part in enumerate(PARTS)}, s._compute[:n] * 1e6


def test_a_slow_plant_and_a_slow_controller_show_in_their_own_parts_and_the_parts_add_up():
    loop = make_loop()
    _slowed(loop.drivers[0].plant, "step", 300e-6)
    _slowed(loop.controller, "update", 150e-6)
    loop.run(cycles=300)
    parts, compute = _parts(loop)
    med = {k: float(np.median(v)) for k, v in parts.items()}
    assert 300.0 <= med["plant"] < 300.0 + 150.0, med
    assert 150.0 <= med["control"] < 150.0 + 150.0, med
    assert med["driver_read"] < 100.0 and med["driver_write"] < 100.0 and med["telemetry"] == 0.0, med
    total = sum(parts.values())
    assert np.all(total <= compute + 1e-3) and np.median(compute - total) < 10.0  # the loop's own bookkeeping
    timing = loop.report().timing
    assert set(PARTS) <= set(timing) and abs(timing["plant"]["p50"] - med["plant"]) < 1e-6


def test_the_overrun_warning_names_the_part_that_took_the_time():
    loop = make_loop(loop={"pace": True})
    _slowed(loop.drivers[0].plant, "step", 1.3e-3)
    report = loop.run(cycles=100)
    warning = report.overrun_warning()
    assert report.overruns > 90 and "most of it in plant" in warning, warning
    assert "plant" in report.format() and "driver_read" in report.format()


def test_overruns_from_late_wake_ups_are_blamed_on_the_wake_up_latency(monkeypatch):
    """Every 25th sleep of the loop oversleeps by 4 ms, as on a busy machine; the controller is the slowest part
    of a cycle (150 us busy wait) but every cycle's work fits the 1 ms period. The warning names the wake-up
    latency, not the controller."""
    real_sleep = time.sleep
    calls = [0]

    def oversleeping(seconds):
        calls[0] += 1
        real_sleep(seconds + (4e-3 if calls[0] % 25 == 0 else 0.0))

    loop = make_loop(loop={"pace": True})
    _slowed(loop.controller, "update", 150e-6)
    monkeypatch.setattr(time, "sleep", oversleeping)
    report = loop.run(cycles=500)
    monkeypatch.setattr(time, "sleep", real_sleep)
    late = report.late
    assert report.overruns > 0.01 * report.cycles and late["cycles"] == min(report.overruns, loop.stats.count)
    # most late cycles computed within the period and were late because they woke up late (their latency the
    # larger share); the 4 ms oversleeps make the whole late set's mean latency exceed its mean compute too
    assert late["woke_late"] > late["cycles"] / 2, late
    assert late["woke_late_latency"] > late["woke_late_compute"] and late["latency"] > late["compute"], late
    warning = report.overrun_warning()
    assert "woke up late" in warning and "wake-up latency" in warning, warning
    assert "most of it in" not in warning, warning
    assert warning in report.format()


def _report(stats, rate_hz=1000.0):
    s = stats.summary()
    return LoopReport(cycles=stats.cycles, duration=stats.cycles / rate_hz, rate_hz=rate_hz, tracked_names=["j"],
                      tracking_rms=np.zeros(1), tracking_max=np.zeros(1),
                      timing={k: v for k, v in s.items() if isinstance(v, dict)}, overruns=stats.overruns,
                      skipped_cycles=0, tripped=False, trip_reason="", late=stats.late_summary(1.0 / rate_hz))


def _cycles(n, slow=(), woke_late=()):
    """``n`` cycles at 1 kHz of 300 us compute (200 us control, 100 us plant, 20 us wake-up latency); the cycles in
    ``slow`` compute 1.3 ms (1.25 ms plant) and overrun; those in ``woke_late`` wake up 1.2 ms late and overrun."""
    stats = CycleStats(2 * n)
    control, plant = PARTS.index("control"), PARTS.index("plant")
    for k in range(n):
        latency, parts = 20e-6, {control: 200e-6, plant: 100e-6}
        if k in slow:
            parts = {control: 50e-6, plant: 1.25e-3}
        if k in woke_late:
            latency = 1.2e-3
        for j, value in parts.items():
            stats.parts[j, stats.slot] = value
        compute = sum(parts.values())
        stats.record(1e-3, latency, compute, latency + compute > 1e-3)
    return stats


@pytest.mark.parametrize("overruns, speaks", [(9, False), (10, False), (11, True)])
def test_the_warning_speaks_only_above_one_percent_of_overruns(overruns, speaks):
    """1000 cycles: 9 overruns (0.9 %) and 10 (1 %, not more than 1 %) say nothing; 11 (1.1 %) say so."""
    report = _report(_cycles(1000, slow=set(range(100, 100 + 10 * overruns, 10))))
    assert report.overruns == overruns
    warning = report.overrun_warning()
    assert bool(warning) == speaks and ("WARNING" in report.format()) == speaks
    if speaks:
        assert warning.startswith("WARNING: 11 of 1000 cycles (1.1 %) overran their 1 ms period"), warning
        assert "most of it in plant (1250 us mean in the late cycles)" in warning, warning


@pytest.mark.parametrize("woke_late, blamed", [(6, "latency"), (5, "plant")])
def test_the_warning_blames_what_made_most_late_cycles_late(woke_late, blamed):
    """Of 11 late cycles in 1000, those that woke up late (their 300 us of work fits the period) against those
    whose work took 1.3 ms: the majority is named. Over all cycles control is the largest part (200 us)."""
    late = list(range(100, 210, 10))
    stats = _cycles(1000, slow=set(late[woke_late:]), woke_late=set(late[:woke_late]))
    report = _report(stats)
    assert report.overruns == 11 and report.late["woke_late"] == woke_late
    warning = report.overrun_warning()
    if blamed == "latency":
        assert ("6 of its 11 late cycles woke up late (wake-up latency 1200 us mean in them" in warning
                and "computed within the period (300 us mean in them" in warning), warning
        assert "most of it in" not in warning
    else:
        assert "most of it in plant" in warning and "woke up late" not in warning, warning
