"""The numbers the robot plot scripts print into their figures (titles, panel titles) are computed from the
plotted data: checked here on small synthetic arrays (the scripts' simulations are not run)."""
from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.slow
def test_quadruped_tail_pitch_figure_draws_passive_actuators_only_when_used(tmp_path):
    e = np.geomspace(1e-6, 1e-1, 50)
    tc = np.zeros((50, 14))
    tc[:, :8] = np.linspace(-1000.0, 1000.0, 50)[:, None]
    pitch_figure(tmp_path, e, e[::-1], tc, ol_survived=False)
    assert (tmp_path / "quadruped_tail_pitch.png").stat().st_size > 10_000


@pytest.mark.slow
def test_legged_fig7_quotes_the_counted_runs_beside_table1(tmp_path):
    """Fig. 7's title quotes the counts of the table it draws (mass matrix rows left out) beside Table 1's
    formulas at the robot's n, and the fitted fixed-base lines rounded to whole operations."""
    from rtctl.plants.legged.plots import _formula, opcount_figure, opcount_summary
    legged = {}
    for name, n, base in (("planar_biped", 6, 1000), ("spatial_quadruped", 12, 3000)):
        for k, partition in enumerate(("modules", "links")):
            legged[(name, partition, "floating_inverse")] = (base + k, base + 10 + k, 3, n)
            legged[(name, partition, "forward")] = (base + 100 + k, base + 110 + k, 0, n)
            legged[(name, partition, "mass_matrix")] = (1, 1, 0, n)
    ns = (2, 3, 4)
    table = {"legged": legged, "chains": {n: (96 * n - 31, 98 * n - 59) for n in ns},
             "chains_forward": {n: (223 * n - 163, 224 * n - 218) for n in ns},
             "fit": (96.0000001, -30.9999999, 98.0, -59.0), "fit_forward": (222.9999999, -163.0, 224.0, -218.0000001)}
    summary = opcount_summary(table)
    assert summary["fit"] == (96, -31, 98, -59) and summary["fit_forward"] == (223, -163, 224, -218)
    assert summary[("planar_biped", "modules", "forward")] == (1100, 1110, 6, 209 * 6 + 60, 201 * 6 + 66)
    assert summary[("spatial_quadruped", "links", "floating_inverse")] == (3001, 3011, 12, 164 * 12 + 60,
                                                                           156 * 12 + 66)
    assert not any(k[2] == "mass_matrix" for k in summary if isinstance(k, tuple))
    assert _formula(223, -163) == "223n - 163" and _formula(164, 60) == "164n + 60"
    assert opcount_figure(tmp_path / "fig7.png", table) == summary
    assert (tmp_path / "fig7.png").stat().st_size > 10_000


@pytest.mark.slow
def test_legged_fig11_gait_ik_ranges(tmp_path):
    """Fig. 11's quoted joint ranges are the plotted IK angles in degrees; over two gait cycles the right leg
    repeats the left one half a cycle later (same ranges) and the knee stays bent forward."""
    from rtctl.plants.legged.gait import BipedGait
    from rtctl.plants.legged.plots import angle_ranges_deg, gait_ik_figure, gait_joint_trajectories
    assert angle_ranges_deg([[0.0, -np.pi], [np.pi / 2, 0.0]]) == [(0.0, 90.0), (-180.0, 0.0)]
    gait = BipedGait()
    q = gait_joint_trajectories(gait, [0.25, 1.25, 2.25])
    assert np.allclose(q[0, :3], q[1, 3:]) and np.allclose(q[0], q[2])
    ranges = gait_ik_figure(tmp_path / "fig11.png", gait)
    assert np.allclose(ranges[:3], ranges[3:])
    assert ranges[1][0] > 0.0
    assert (tmp_path / "fig11.png").stat().st_size > 10_000
