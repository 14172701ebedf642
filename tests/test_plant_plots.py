"""The numbers the robot plot scripts print into their figures (titles, panel titles) are computed from the
plotted data: checked here on small synthetic arrays (the scripts' simulations are not run)."""
from __future__ import annotations

import numpy as np

from rtctl.plants.geared.plots import rms
from rtctl.plants.legged.plots import tracking_error
from rtctl.plants.quadruped_tail.plots import forward_figure, pitch_figure


def test_legged_tracking_error_covers_the_plotted_joints_and_time_span():
    t = np.linspace(0.0, 6.0, 61)
    q_d = np.zeros((61, 3))
    q = q_d.copy()
    q[10, 1] = 2e-4      # t = 1 s, plotted joint
    q[50, 2] = 5e-3      # t = 5 s: outside a 4 s window
    q[20, 0] = 1.0       # joint not plotted
    runs = {"FF": (t, q, q_d), "CT": (t, q_d.copy(), q_d)}
    names = [("knee", 1), ("ankle", 2)]
    assert tracking_error(runs, names, t_max=4.0) == {"FF": 2e-4, "CT": 0.0}
    assert tracking_error(runs, names)["FF"] == 5e-3


def test_geared_rms_is_per_joint():
    err = np.array([[3.0, 0.0, 1.0], [-4.0, 0.0, -1.0]])
    assert np.allclose(rms(err), [np.sqrt(12.5), 0.0, 1.0])


def test_quadruped_tail_forward_difference_is_split_by_unit(tmp_path):
    """The title quotes p (m) and phi (rad) separately, over the common span of the two runs only."""
    t1, t2 = np.arange(5) * 1e-3, np.arange(4) * 1e-3
    x1, x2 = np.zeros((5, 8)), np.zeros((4, 8))
    x1[2, 1] = 3e-6          # p_y
    x1[3, 4] = 7e-5          # phi_y
    x1[4, 0] = 1.0           # after the 1 ms run stopped: not compared
    x1[1, 7] = 0.5           # tail angle: not plotted, not quoted
    dp, dphi = forward_figure(tmp_path, t1, x1, t2, x2, stopped="a foot out of reach")
    assert (dp, dphi) == (3e-6, 7e-5)
    assert (tmp_path / "quadruped_tail_forward.png").stat().st_size > 10_000


def test_quadruped_tail_pitch_figure_draws_passive_actuators_only_when_used(tmp_path):
    e = np.geomspace(1e-6, 1e-1, 50)
    tc = np.zeros((50, 14))
    tc[:, :8] = np.linspace(-1000.0, 1000.0, 50)[:, None]
    pitch_figure(tmp_path, e, e[::-1], tc, ol_survived=False)
    assert (tmp_path / "quadruped_tail_pitch.png").stat().st_size > 10_000
