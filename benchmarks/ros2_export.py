#!/usr/bin/env python3
"""What ``rtctl export --ros2`` costs per sample: a recording of the demo arm (7 joints) with a wrist IMU at
``--rate`` Hz for ``--seconds`` s, written as ``rtctl record`` writes it, exported at ``--tf-rate`` (best of
``--repeat``; the reading of the recording is included, the first export's imports and compilation are not).

Prints the samples, the seconds and the microseconds per sample, and the load average at the start.

Usage: python benchmarks/ros2_export.py [--seconds 10] [--rate 1000] [--tf-rate 100] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rtctl.config import DEMO_CONFIG, load_config, robot_of  # noqa: E402
from rtctl.telemetry.description import robot_description  # noqa: E402
from rtctl.telemetry.ros2 import export_ros2  # noqa: E402
from telemetry_helpers import write_described_recording  # noqa: E402

IMU = '\n[[sensors]]\nname = "wrist"\nkind = "imu"\nframe = "link7"\nmount_xyz = [0.0, 0.0, 0.05]\n'


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--tf-rate", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    folder = Path(tempfile.mkdtemp())
    try:
        config = folder / "arm.toml"
        config.write_text(DEMO_CONFIG.read_text() + IMU)
        model, mounts = robot_of(load_config(config))
        n = int(args.seconds * args.rate)
        t = np.arange(n) / args.rate
        q = 0.5 * np.sin(np.outer(t, np.arange(1, 8)))
        fields = [f"wrist/{f}/{a}" for f in ("specific_force", "angular_rate") for a in "xyz"] + \
            [f"wrist/orientation/{a}" for a in "xyzw"]
        extra = np.column_stack([np.cos(np.outer(t, np.arange(1, 7))), np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))])
        rows = [{"index": k, "t": t[k], "stamp": 1.7e9 + t[k], "q": q[k].tolist(), "qd": q[k].tolist(),
                 "effort": q[k].tolist(), "extra": extra[k].tolist()} for k in range(n)]
        path = write_described_recording(folder / "run.mcap", robot_description(model, mounts), model.joint_names,
                                         rows, fields)
        times = []
        for k in range(args.repeat + 1):
            start = time.perf_counter()
            res = export_ros2(path, folder / f"bag{k}", tf_rate=args.tf_rate, progress=False)
            times.append(time.perf_counter() - start)
        best = min(times[1:])
        print(f"{n} samples ({args.seconds:g} s at {args.rate:g} Hz), TF at {args.tf_rate:g} Hz: "
              + ", ".join(f"{c} on {topic}" for topic, c in res["messages"].items()))
        print(f"export: best of {args.repeat} {best:.2f} s = {best / n * 1e6:.0f} us per sample")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
