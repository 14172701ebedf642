#!/usr/bin/env python3
"""Telemetry cost, measured in one run.

1. Hand-off: the per-cycle cost of ``Telemetry.sample`` (the loop's only telemetry
   work), timed call by call on the 7-DOF arm: median and p99 in microseconds
   (target: median <= 5 us).
2. Sustained publish rate: samples handed off back to back for ``--burst`` s with
   the publisher thread running and one subscriber process decoding everything;
   reported: hand-off rate, samples published, received, dropped by the ring.
3. Loop jitter: the paced 1 kHz loop (arm, sinusoid, telemetry on) for
   ``--seconds`` s each with 0 subscribers, 3 subscriber processes decoding every
   message, and 1 stalled subscriber process (connects, never reads): wake-up
   latency p50/p99/max, overruns, and the samples the subscribers lost.

Usage: python benchmarks/telemetry.py [--seconds 3] [--burst 2]
"""
from __future__ import annotations

import argparse
import copy
import platform
import subprocess
import sys
import time

import numpy as np  # noqa: E402
import zmq  # noqa: E402

from rtctl.config import build, validate  # noqa: E402
from rtctl.telemetry import Telemetry  # noqa: E402

ARM = {
    "robot": {"model": "arm7"},
    "plant": {"initial_position": [0.0] * 7},
    "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
    "controller": {"type": "computed_torque", "kp": 400.0},
    "trajectory": {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.3] * 7, "frequency": [0.5] * 7},
    "loop": {"rate_hz": 1000.0, "pace": False},
}

SUBSCRIBER = r"""
import sys, time, zmq
from rtctl.telemetry.schema import decode
endpoint, mode = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
s = ctx.socket(zmq.SUB)
if mode == "stalled":
    s.setsockopt(zmq.RCVHWM, 5)
    s.setsockopt(zmq.RCVBUF, 4096)
s.connect(endpoint)
s.setsockopt(zmq.SUBSCRIBE, b"")
print("ready", flush=True)
if mode == "stalled":
    sys.stdin.readline()  # stall until told to read
received, nxt, lost = 0, None, 0
while s.poll(1500):
    topic, payload = s.recv_multipart()
    m = decode(topic, payload)
    if topic == b"rtctl/samples":
        if nxt is not None and m["first"] > nxt:
            lost += m["first"] - nxt
        nxt = m["first"] + m["count"]
        received += m["count"]
print(received, lost, flush=True)
"""


def make_loop(pace: bool):
    raw = copy.deepcopy(ARM)
    raw["loop"]["pace"] = pace
    return build(validate(raw))


def handoff_cost(n: int = 20000):
    loop = make_loop(False)
    loop.run(cycles=10)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", capacity=1024).attach(loop)
    clock = time.perf_counter_ns
    times = np.empty(n)
    for k in range(200):
        tel.sample(loop, 0.0)
    for k in range(n):
        t0 = clock()
        tel.sample(loop, 0.0)
        times[k] = clock() - t0
    t0 = clock()
    for k in range(n):
        pass
    empty = (clock() - t0) / n
    return np.median(times) / 1e3, np.percentile(times, 99) / 1e3, empty / 1e3


def spawn(endpoint, mode):
    p = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, endpoint, mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def finish(p, stalled=False):
    if stalled:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = p.stdout.readline().split()
    p.wait(10)
    return int(out[0]), int(out[1])


def publish_rate(seconds: float):
    loop = make_loop(False)
    loop.run(cycles=10)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", capacity=65536, sndhwm=100_000).attach(loop).start()
    p = spawn(tel.endpoint, "reader")
    time.sleep(0.5)
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        for _ in range(100):
            tel.sample(loop, 0.0)
        n += 100
        time.sleep(0)  # yield the GIL as a paced loop would
    tel.close()
    received, lost = finish(p)
    return n / seconds, tel.published, received, tel.dropped


def jitter(mode: str, seconds: float):
    loop = make_loop(True)
    # modest buffers (same in every case) so that a 3 s stall overflows them
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.5, sndhwm=50, sndbuf=65536).attach(loop).start()
    procs = [spawn(tel.endpoint, "reader") for _ in range(3)] if mode == "3 subscribers" else \
        [spawn(tel.endpoint, "stalled")] if mode == "1 stalled" else []
    time.sleep(0.5)
    report = loop.run(duration=seconds)
    tel.close()
    results = [finish(p, mode == "1 stalled") for p in procs]
    lost = sum(r[1] for r in results) + sum(report.cycles - r[0] for r in results) if results else 0
    return report, tel, lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--burst", type=float, default=2.0)
    args = ap.parse_args()
    print(f"rtctl telemetry benchmark -- {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})\n")
    med, p99, empty = handoff_cost()
    print(f"1. hand-off (Telemetry.sample, arm7, {20000} calls): median {med:.2f} us, p99 {p99:.2f} us "
          f"(timer + loop overhead {empty:.2f} us; target median <= 5 us)\n")
    rate, published, received, dropped = publish_rate(args.burst)
    print(f"2. sustained publishing, {args.burst:g} s of back-to-back hand-offs with 1 decoding subscriber:")
    print(f"   handed off {rate:,.0f} samples/s; published {published:,}, received {received:,}, "
          f"ring drops {dropped:,}\n")
    print(f"3. paced 1 kHz loop, {args.seconds:g} s per case (wake-up latency in us):")
    print(f"   {'case':<16}{'p50':>8}{'p99':>9}{'max':>9}{'overruns':>10}{'ring drops':>12}{'subscriber lost':>17}")
    for mode in ("0 subscribers", "3 subscribers", "1 stalled"):
        report, tel, lost = jitter(mode, args.seconds)
        lat = report.timing["latency"]
        print(f"   {mode:<16}{lat['p50']:>8.1f}{lat['p99']:>9.1f}{lat['max']:>9.1f}{report.overruns:>10}"
              f"{tel.dropped:>12}{lost:>17}")


if __name__ == "__main__":
    main()
