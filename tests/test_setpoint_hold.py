"""The hold a drive closing its own loop is sent to under the safe command (rtctl.drivers.hold): a stop at
constant deceleration from the measured position and velocity, then rest at the stop point (IEC 60204-1 stop
category 2), in closed form: q0 + v0 t - a t^2 / 2 until t = |v0| / a, then q0 + v0 |v0| / (2 a)."""
from __future__ import annotations

import numpy as np

from rtctl.drivers.hold import SetPointHold


def test_a_moving_joint_decelerates_to_the_stop_point_and_rests_there():
    hold = SetPointHold(2)
    hold.deceleration[:] = [4.0, 10.0]
    samples = []
    for step in range(101):                   # 1 s at 10 ms
        now = 7.0 + 0.01 * step               # the hold's own time begins at its first update
        hold.update(0, now, 0.3, 2.0)         # later measurements do not move a hold that has begun
        hold.update(1, now, -1.0, -1.5)
        samples.append((hold.position.copy(), hold.velocity.copy()))
    position = np.array([p for p, _ in samples])
    velocity = np.array([v for _, v in samples])
    t = 0.01 * np.arange(101)
    np.testing.assert_allclose(position[:50, 0], 0.3 + 2.0 * t[:50] - 2.0 * t[:50] ** 2, atol=1e-12)
    np.testing.assert_allclose(velocity[:50, 0], 2.0 - 4.0 * t[:50], atol=1e-12)
    np.testing.assert_allclose(position[50:, 0], 0.3 + 2.0 * 2.0 / 8.0, atol=1e-12)   # 0.5 s, 0.5 rad on
    assert np.all(velocity[50:, 0] == 0.0)
    np.testing.assert_allclose(position[-1, 1], -1.0 - 1.5 * 1.5 / 20.0, atol=1e-12)
    # the set point never passes the stop point nor turns back
    assert np.all(np.diff(position[:, 0]) >= 0) and np.all(np.diff(position[:, 1]) <= 0)


def test_without_a_deceleration_it_holds_at_once_and_a_new_hold_begins_afresh():
    hold = SetPointHold(1)                    # deceleration inf: a drive without 0x6085
    hold.update(0, 1.0, 0.25, 3.0)
    assert (hold.position[0], hold.velocity[0]) == (0.25, 0.0)
    hold.release()
    hold.deceleration[0] = 2.0
    hold.update(0, 5.0, -0.5, float("nan"))   # a non-finite velocity: held where it is
    hold.update(0, 6.0, 9.0, 9.0)
    assert (hold.position[0], hold.velocity[0]) == (-0.5, 0.0)
