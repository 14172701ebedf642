"""``rtctl plot`` marks the safety state's changes: each entry into the safe state and each re-arm, in a
colour no joint has, named once in the legend (issue: the docs' promises; the e-stop's red line had joint
4's colour, no legend entry, and a re-arm was not marked)."""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from rtctl.cli import main
from telemetry_helpers import sample_rows, write_recording

matplotlib.use("Agg")
TRIPPED = [0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0]       # e-stopped at 3 and 8, re-armed at 6 and 10


def test_plot_marks_every_trip_and_rearm_apart_from_the_joints(tmp_path, monkeypatch):
    rows = sample_rows(len(TRIPPED))
    for row, tripped in zip(rows, TRIPPED):
        row.update(tripped=tripped, q=[0.1] * 5, v=[0.0] * 5, q_d=[0.0] * 5, error=[-0.1] * 5, qd_d=[0.0] * 5,
                   effort_cmd=[1.0] * 5, effort=[1.0] * 5, kp=[1.0] * 5, kd=[1.0] * 5)
    path = write_recording(tmp_path / "r.mcap", rows)
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: figures.append(fig))
    assert main(["plot", str(path), "--out", str(tmp_path / "p.png"), "--no-progress"]) == 0
    (fig,) = figures
    position = fig.axes[0]
    joints = {to_hex(line.get_color()) for line in position.lines if len(line.get_xdata()) == len(TRIPPED)}
    assert len(joints) == 5
    marks = [line for line in position.lines if len(line.get_xdata()) == 2]      # axvline: x, x
    trips = sorted(m.get_xdata()[0] for m in marks if m.get_linestyle() == "-")
    rearms = sorted(m.get_xdata()[0] for m in marks if m.get_linestyle() == ":")
    np.testing.assert_allclose(trips, [3e-3, 8e-3])
    np.testing.assert_allclose(rearms, [6e-3, 10e-3])
    assert not {to_hex(m.get_color()) for m in marks} & joints
    legend = [text.get_text() for text in position.get_legend().get_texts()]
    assert legend.count("safe state entered (trip or e-stop)") == 1 and legend.count("re-armed") == 1
    for axis in fig.axes[1:3]:                      # the error and effort panels are marked alike
        assert sum(len(line.get_xdata()) == 2 for line in axis.lines) == 4
