#!/usr/bin/env python3
"""What the 3D view costs the publisher (:mod:`rtctl.telemetry.scene`), beside what it already does per sample.

For each robot, per row of the stream: ``/tf`` and the force arrows (``RobotScene.frame``: forward kinematics
and foxglove-sdk's encoding), ``/joint_states`` (``RobotScene.joint_states``), and the JSON ``/rtctl/samples``
message of the same row (``JsonRows``, what the server and the recorder encode for every sample anyway), each
the median of ``--repeat`` timings of ``--rows`` rows; the ratios are to the JSON sample in the same run.
``/tf`` runs at ``foxglove_scene_rate`` (30 Hz), the other two at the sample rate.

Usage: python benchmarks/scene.py [--rows 200] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from rtctl.config import bundled_config_path, build, load_config
from rtctl.telemetry import Telemetry
from rtctl.telemetry.foxglove import FoxgloveSink
from rtctl.telemetry.scene import RobotScene
from rtctl.telemetry.schema import JsonRows

ROBOTS = ("demo", "stewart", "legged_quadruped_estimated")


def per_row(fn, rows, repeat) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for row in rows:
            fn(row)
        times.append((time.perf_counter() - start) / len(rows))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| robot | bodies | JSON sample (us) | /tf + arrows / JSON sample | /joint_states / JSON sample |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name in ROBOTS:
        loop = build(load_config(bundled_config_path(name)))
        sink = FoxgloveSink(port=0)
        tel = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[sink]).attach(loop)
        scene = RobotScene(sink.scene_spec, tel.layout, tel.joints, tel.extra_names)
        json_rows = JsonRows(tel.layout, tel.joints, tel.extra_names, style="sample")
        rows = rng.uniform(-0.5, 0.5, (args.rows, tel.layout.width))
        rows[:, tel.layout.slices["stamp"].start] = 1.7e9
        for row in rows[:3]:      # imports and compilation out of the timing
            scene.frame(row, 0), scene.joint_states(row, 0), json_rows.encode(row[None, :])
        sample = per_row(lambda r: json_rows.encode(r[None, :]), rows, args.repeat)
        frame = per_row(lambda r: scene.frame(r, 1), rows, args.repeat)
        joints = per_row(lambda r: scene.joint_states(r, 1), rows, args.repeat)
        print(f"| {name} | {loop.model.nbodies} | {sample * 1e6:.1f} | {frame / sample:.2f} | {joints / sample:.2f} |")


if __name__ == "__main__":
    main()
