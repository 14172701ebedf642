"""Where a cycle's compute time goes: driver read, control, driver write, in-process plant, telemetry.

A component made slow on purpose (a busy wait of known length) shows up in its own part and in no other;
the parts add up to the cycle's compute time; the loud overrun warning names the part that took the time.
"""
import time

import numpy as np

from rtctl.rt.stats import PARTS
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
