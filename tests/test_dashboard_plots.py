"""The dashboard's plots say what they show: every tick label differs from its neighbours however little a
signal moves, and the latency histogram's overflow bin is drawn apart and labelled (issue: docs' promises).

plot.js runs in node on a stand-in canvas that records its texts and rectangles (tests/dashboard_plot.js).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rtctl.operator.dashboard import HIST_EDGES_US, STATIC_DIR

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")
HEIGHT, LEFT, BOTTOM = 300, 62, 30        # the stand-in canvas; LinePlot's and BarPlot's box


def drawn(scenario: dict) -> dict:
    harness = Path(__file__).with_name("dashboard_plot.js")
    proc = subprocess.run([NODE, str(harness), str(STATIC_DIR), json.dumps(scenario)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def tick_labels(texts) -> tuple[list[str], list[str]]:
    """(x tick labels left to right, y tick labels bottom to top)."""
    xs = sorted((t for t in texts if t["y"] == HEIGHT - BOTTOM + 13), key=lambda t: t["x"])
    ys = sorted((t for t in texts if t["x"] == LEFT - 4), key=lambda t: -t["y"])
    return [t["text"] for t in xs], [t["text"] for t in ys]


@pytest.mark.parametrize("t0, q0, dq", [(10.0, 0.6, 1e-6), (0.0, -1.2, 3e-4), (1234.5, 2e-4, 1e-7),
                                        (0.0, 25000.0, 0.5)],
                         ids=["micro-rad", "small", "tiny-value", "large-value"])
def test_neighbouring_tick_labels_never_read_alike(t0, q0, dq):
    t = t0 + np.arange(50) * 1e-4                      # 5 ms of a 10 kHz stream: a narrow time axis too
    q = q0 + dq * np.sin(2 * np.pi * 200 * (t - t0))
    x_labels, y_labels = tick_labels(drawn({"line": {"x": t.tolist(), "ys": [q.tolist()]}})["texts"])
    for labels, lo, hi in ((x_labels, t.min(), t.max()), (y_labels, q.min(), q.max())):
        values = [float(s) for s in labels]
        assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
        assert np.all(np.diff(values) > 0), labels                   # each label is its own tick's value
        step = values[1] - values[0]
        assert values[0] < lo + step and values[-1] > hi - step, (labels, lo, hi)


def test_the_latency_histograms_overflow_bin_is_drawn_apart_and_labelled():
    counts = [0] * len(HIST_EDGES_US)                  # 50 bins of 10 us, then the overflow (> 500 us)
    counts[3], counts[49], counts[-1] = 100, 4, 7
    out = drawn({"bars": {"edges": HIST_EDGES_US.tolist(), "counts": counts}})
    bars = sorted(out["rects"][1:], key=lambda r: r["x"])          # [0]: the canvas's background
    assert len(bars) == 3
    normal, last_bin, overflow = bars
    assert normal["color"] == last_bin["color"] != overflow["color"]
    assert overflow["x"] > last_bin["x"] + last_bin["w"] + 0.9 * last_bin["w"]   # a bin's gap after 500 us
    (label,) = [t for t in out["texts"] if t["text"].startswith("≥")]
    assert label["text"] == "≥ 500" and overflow["x"] < label["x"] < overflow["x"] + 2 * overflow["w"]
