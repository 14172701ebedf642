"""Loop timing statistics: summaries against NumPy, ring wrap-around, counters, no allocation in record."""
import tracemalloc

import numpy as np
import pytest

from rtctl.rt.stats import METRICS, PARTS, STATISTICS, CycleStats


def fill(stats, period, latency, compute, overrun=None):
    overrun = np.zeros(len(period), bool) if overrun is None else overrun
    for per, lat, comp, over in zip(period, latency, compute, overrun):
        stats.record(float(per), float(lat), float(comp), bool(over))


def expected(samples_s):
    us = np.asarray(samples_s) * 1e6
    return {"min": us.min(), "mean": us.mean(), "p50": np.percentile(us, 50), "p99": np.percentile(us, 99),
            "max": us.max()}


def assert_summary_matches(summary, data):
    for metric, samples in zip(METRICS, data):
        want = expected(samples)
        assert set(summary[metric]) == set(STATISTICS)
        for key in STATISTICS:
            assert summary[metric][key] == pytest.approx(want[key], rel=1e-12, abs=1e-9), (metric, key)


def test_summary_matches_numpy_on_known_data():
    rng = np.random.default_rng(7)
    n = 777
    period = 1e-3 + rng.normal(0, 2e-5, n)
    latency = rng.exponential(5e-6, n)
    compute = rng.uniform(1e-4, 4e-4, n)
    stats = CycleStats(1000)
    fill(stats, period, latency, compute)
    s = stats.summary()
    assert_summary_matches(s, (period, latency, compute))
    assert s["cycles"] == n and s["window"] == n
    # a hand-checkable case: 1..100 us
    stats = CycleStats(100)
    fill(stats, np.arange(1, 101) * 1e-6, np.zeros(100), np.zeros(100))
    p = stats.summary()["period"]
    assert (p["min"], p["max"]) == pytest.approx((1.0, 100.0))
    assert p["mean"] == pytest.approx(50.5) and p["p50"] == pytest.approx(50.5) and p["p99"] == pytest.approx(99.01)


def test_ring_wrap_around_keeps_the_last_capacity_samples():
    cap = 100
    stats = CycleStats(cap)
    n = 3 * cap + 37
    period = np.arange(n) * 1e-6 + 1e-3
    latency = np.arange(n)[::-1] * 1e-7
    compute = np.sin(np.arange(n)) ** 2 * 1e-4
    fill(stats, period, latency, compute)
    for metric, samples in zip(METRICS, (period, latency, compute)):
        np.testing.assert_array_equal(stats.window(metric), samples[-cap:])  # oldest first
    s = stats.summary()
    assert_summary_matches(s, (period[-cap:], latency[-cap:], compute[-cap:]))
    assert s["cycles"] == n and s["window"] == cap
    assert s["period"]["min"] == pytest.approx(period[-cap] * 1e6)  # older samples are gone
    # exactly at the boundary
    stats = CycleStats(cap)
    fill(stats, period[:cap], latency[:cap], compute[:cap])
    np.testing.assert_array_equal(stats.window("period"), period[:cap])
    stats.record(9.0, 0.0, 0.0, False)
    np.testing.assert_array_equal(stats.window("period"), np.r_[period[1:cap], 9.0])


def test_counters():
    stats = CycleStats(8)
    pattern = [0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 0]
    fill(stats, np.full(16, 1e-3), np.zeros(16), np.zeros(16), pattern)
    stats.record(1e-3, 0.0, 0.0, True, skipped=2)
    stats.skipped += 1  # the loop's skip policy adds to it directly
    s = stats.summary()
    assert s["cycles"] == 17 and s["window"] == 8
    assert s["overruns"] == sum(pattern) + 1
    assert s["max_consecutive_overruns"] == 4
    assert s["skipped"] == 3
    stats.reset()
    assert stats.summary()["cycles"] == 0 and stats.overruns == 0


def test_empty_summary_and_table():
    stats = CycleStats(10)
    s = stats.summary()
    assert all(np.isnan(s[m][k]) for m in METRICS for k in STATISTICS)
    assert s["cycles"] == 0
    fill(stats, [1e-3, 1.1e-3], [1e-6, 3e-6], [2e-4, 2.5e-4], [False, True])
    table = stats.format_table()
    lines = table.splitlines()
    assert len(lines) == 1 + len(METRICS) + len(PARTS) + 1
    assert [line.split()[0] for line in lines[1:-1]] == [*METRICS, *PARTS]
    assert lines[0].split() == ["metric", "(us)", *STATISTICS]
    assert lines[1].split()[0] == "period" and "1050.00" in lines[1]
    assert "overruns 1 (50%)" in lines[-1] and "cycles 2" in lines[-1]


@pytest.mark.parametrize("capacity", [0, -5, 2.5, True])
def test_invalid_capacity(capacity):
    with pytest.raises(ValueError, match="capacity"):
        CycleStats(capacity)


def test_record_allocates_nothing():
    stats = CycleStats(256)
    for _ in range(1000):  # wrapped, counters well past the small-int cache
        stats.record(1e-3, 2e-6, 3e-4, True)
    args = [(1e-3 + k * 1e-9, 2e-6, 3e-4, k % 3 == 0) for k in range(500)]  # built before measuring
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for a in args:
            stats.record(*a)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    diff = [d for d in after.filter_traces(keep).compare_to(before.filter_traces(keep), "lineno") if d.size_diff > 0]
    assert sum(d.size_diff for d in diff) < 500, diff  # under a byte per call: nothing kept per call
    assert stats.cycles == 1500
