"""What the loop and the safety monitor share about motion limits.

The minimum-jerk profile s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 moves a distance d in T seconds with
peak velocity ``MIN_JERK_PEAK_VELOCITY d / T`` and peak acceleration ``MIN_JERK_PEAK_ACCELERATION d / T^2``;
moves, re-arm recovery moves and control-channel requests are checked against the joint limits with them.
"""
from __future__ import annotations

import math

MIN_JERK_PEAK_VELOCITY = 1.875                      # max of ds/dtau (at tau = 1/2)
MIN_JERK_PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)  # max of |d2s/dtau2| (at tau = 1/2 -+ sqrt(3)/6)


class SafetyError(RuntimeError):
    """The monitor refused to re-arm; the message says why."""
