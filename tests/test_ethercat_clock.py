"""The master's cycle following the line's reference clock (drivers/ethercat/clock.py; ETG.1000.4 distributed
clocks, the master's side): a model of the loop -- deadlines on the host's clock, each frame sent a compute time
after its deadline, its reference-clock time read back in the next cycle's read and the correction moving the
deadline after -- against clocks that drift, with the frames' timing jittered."""
from __future__ import annotations

import numpy as np
import pytest

from rtctl.drivers.ethercat.clock import LIMIT, ReferenceClockFollower

PERIOD = 1e-3


def run(drift_ppm: float, offset_s: float, cycles: int = 2000, jitter_s: float = 20e-6, seed: int = 0):
    """Phase errors (ns) the follower saw and the deadlines (host s) of a loop that applies each correction to
    the deadline after the next, as rtctl's loop does (read in cycle k+1 what cycle k's frame brought)."""
    rng = np.random.default_rng(seed)
    follower = ReferenceClockFollower(PERIOD)
    deadline, correction = 0.0, 0.0
    errors, deadlines, in_flight = [], [], None
    for _ in range(cycles):
        if in_flight is not None:                                 # read: the last frame's reference time
            correction = follower.update(in_flight)
            errors.append(follower.phase_error_ns)
        sent = deadline + 150e-6 + rng.uniform(-jitter_s, jitter_s)    # write: compute, then the frame
        in_flight = int(round((sent * (1 + drift_ppm * 1e-6) + offset_s) * 1e9))
        deadlines.append(deadline)
        deadline += PERIOD + correction
    return np.array(errors), np.array(deadlines)


@pytest.mark.parametrize("drift_ppm", [500.0, 50.0, -50.0, 0.0])
@pytest.mark.parametrize("offset_s", [0.0, 0.00093, 12.3456789])
def test_the_frames_settle_half_a_cycle_from_sync0_and_the_loop_takes_the_reference_period(drift_ppm, offset_s):
    errors, deadlines = run(drift_ppm, offset_s)
    settled = np.abs(errors[500:])
    # within twice the frames' own jitter (+-20 us) of half a cycle after each SYNC0 pulse, from the 10th cycle on
    assert settled.max() < 40e3 and np.all(np.abs(errors[10:]) < 40e3), (settled.max(), drift_ppm, offset_s)
    # The loop's period, on the reference clock, is the SYNC0 cycle (the drift taken up by the integral): over
    # the settled cycles to within what the phase at their two ends can differ by (500 ppm would be 500 ns).
    spans = deadlines[-1] - deadlines[500]
    period_on_reference = spans / (len(deadlines) - 501) * (1 + drift_ppm * 1e-6)
    assert abs(period_on_reference - PERIOD) <= 2 * settled.max() * 1e-9 / (len(deadlines) - 501), \
        (period_on_reference - PERIOD, drift_ppm)


def test_one_cycle_moves_at_most_the_limit_and_a_reset_forgets():
    follower = ReferenceClockFollower(PERIOD)
    worst = follower.update(999_999)                  # the frame just before a pulse: the largest error
    assert worst == pytest.approx(-LIMIT * PERIOD)
    for _ in range(10_000):
        follower.update(999_999)                     # held there (a stalled loop): every step limited
    assert follower.integral == 0.0                  # and the integral not wound up meanwhile
    follower.reset()
    assert (follower.integral, follower.correction) == (0.0, 0.0)
    assert follower.update(500_000) == 0.0            # exactly half a cycle: nothing to move
