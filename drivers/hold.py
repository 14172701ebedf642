"""Where a drive that closes its own loop is sent while its joint's stiffness is 0 (the safe command).

The safety layer's safe command (:mod:`rtctl.safety`) writes efforts, and sets every stiffness to 0 so that a
drive closing its own position or velocity loop stops pulling towards the set points the controller keeps
writing. A drive that takes a position or velocity target and no stiffness (CiA 402 cyclic synchronous position
or velocity) still needs a target: :class:`SetPointHold` gives it the stop IEC 60204-1 calls category 2, on the
drive's own loop -- from the position and velocity measured at the cycle the hold began, a constant deceleration
to rest (the drive's quick stop deceleration, CiA 402-2 0x6085), then the point where it stopped, held. All in
joint space, SI units; per cycle it allocates nothing but float temporaries.
"""
from __future__ import annotations

import math

import numpy as np


class SetPointHold:
    """Per joint: inactive (following the controller's set points) or holding; ``position`` and ``velocity``
    the hold's set point of the last :meth:`update`, ``deceleration`` (rad/s^2 or m/s^2 per joint; inf: stop at
    once) how fast a moving joint is brought to rest."""

    def __init__(self, n: int):
        self.active = np.zeros(n, dtype=bool)
        self.deceleration = np.full(n, np.inf)
        self.position, self.velocity = np.zeros(n), np.zeros(n)
        self._start = np.zeros((3, n))          # rows: time, position, velocity when the hold began

    def release(self) -> None:
        self.active[:] = False

    def update(self, k: int, now: float, q: float, v: float) -> None:
        """Joint ``k``'s hold set point at ``now`` (s), beginning the hold from ``q``, ``v`` if it is not active:
        ``q0 + v0 t - a t^2 / 2`` and ``v0 - a t`` (``a`` against ``v0``) until ``t = |v0| / a``, then rest at
        ``q0 + v0 |v0| / (2 a)``."""
        start = self._start
        if not self.active[k]:
            self.active[k] = True
            start[0, k], start[1, k], start[2, k] = now, q, v if math.isfinite(v) else 0.0
        t, q0, v0 = now - start[0, k], start[1, k], start[2, k]
        a = self.deceleration[k]
        stopping = abs(v0) / a
        if t < stopping:
            slowing = math.copysign(a, v0)
            self.position[k] = q0 + (v0 - 0.5 * slowing * t) * t
            self.velocity[k] = v0 - slowing * t
        else:
            self.position[k] = q0 + 0.5 * v0 * stopping
            self.velocity[k] = 0.0
