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
4. Sinks off and on: the paced 1 kHz loop for ``--seconds`` s per case, the cases
   alternated over ``--rounds`` rounds in one run (so that the machine's load
   falls on every case alike): no telemetry; PUB + 1 subscriber; PlotJuggler JSON
   + 1 reader; Foxglove server + 1 websocket client subscribed to everything;
   the browser dashboard process + 1 browser-like websocket client; the MCAP
   recorder process; all of them together. Each case with the publisher process
   (what run configs use, at ``publisher_nice`` 10), "all" also with the publisher process at
   nice 0 and with the publisher thread (with the GIL
   switch interval it sets, and with CPython's default 5 ms); "off" and "all" also with the
   loop thread on the kernel's default time slice instead of ``[loop] time_slice_us`` 100;
   "all, no readers": PUB, PlotJuggler and Foxglove servers publishing with no process
   reading them (the dashboard and the recorder are readers: they are left out). Reported per case:
   overruns in each round, compute p99 and wake-up latency p99/max (us, worst
   round). The load average before and after is printed: other processes on the
   machine count. ``--realtime-priority N`` runs the loop thread under SCHED_FIFO
   priority N (``[loop] realtime_priority``, as on a control PC; needs the
   privilege), every case alike. "plotjuggler, per sample" is the PlotJuggler case with
   ``plotjuggler_format = "object"`` (one message per sample) instead of the default array per batch.
5. The PlotJuggler stream's two forms (:mod:`rtctl.telemetry.plotjuggler`), alternated over
   ``--rounds`` rounds in one run: ``--pj-samples`` samples of the arm7's 1 kHz run, in batches of 10 (a
   1 kHz loop's 10 ms ``batch_period``), encoded and sent one JSON object per sample ("object") or one
   JSON array per batch ("array") to a reader process that receives and parses every message. Reported:
   messages, bytes per sample, the publisher's CPU per sample (encoding, ZeroMQ sends), the reader's
   (receive, ``json.loads``; PlotJuggler itself is not run), each form's best round; and the samples a
   reader that stalls until all were sent still gets (ZeroMQ's high-water marks count messages: the
   publisher's ``sndhwm``, and ZeroMQ's default on the reader's side, which PlotJuggler leaves); array / object.

Usage: python benchmarks/telemetry.py [--seconds 3] [--burst 2] [--rounds 2] [--only-sinks | --only-plotjuggler]
                                      [--cases "off;all;all, nice 0"] [--realtime-priority N] [--pj-samples N]
"""
from __future__ import annotations

import argparse
import copy
import os
import platform
import subprocess
import sys
import tempfile
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

REALTIME = ""

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
while s.poll(3000):
    topic, payload = s.recv_multipart()
    m = decode(topic, payload)
    if topic == b"rtctl/samples":
        if nxt is not None and m["first"] > nxt:
            lost += m["first"] - nxt
        nxt = m["first"] + m["count"]
        received += m["count"]
print(received, lost, flush=True)
"""


def make_loop(pace: bool, kernel_slice: bool = False):
    raw = copy.deepcopy(ARM)
    raw["loop"]["pace"] = pace
    if kernel_slice:
        raw["loop"]["time_slice_us"] = 0.0
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


PJ_READER = r"""
import json, sys, zmq
s = zmq.Context().socket(zmq.SUB)
s.connect(sys.argv[1]); s.setsockopt(zmq.SUBSCRIBE, b"")
print("ready", flush=True)
samples = lambda m: len(m) if isinstance(m, list) else 1   # an array per batch, or an object per sample
n = samples(json.loads(s.recv()))  # the stream has no metadata: wait for its first message however long it takes
while s.poll(3000):
    n += samples(json.loads(s.recv()))
print(n, 0, flush=True)
"""

FOXGLOVE_CLIENT = r"""
import asyncio, json, sys
from websockets.asyncio.client import connect
async def main():
    async with connect(sys.argv[1], subprotocols=["foxglove.websocket.v1"], max_size=None) as ws:
        subs = []
        while len(subs) < 3:
            m = json.loads(await ws.recv())
            if m.get("op") == "advertise":
                subs += [{"id": c["id"], "channelId": c["id"]} for c in m["channels"]]
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))
        print("ready", flush=True)
        n = 0
        try:
            while True:
                m = await asyncio.wait_for(ws.recv(), 3.0)
                n += isinstance(m, bytes)
        except (asyncio.TimeoutError, Exception):
            pass
        print(n, 0, flush=True)
asyncio.run(main())
"""

DASHBOARD_CLIENT = r"""
import asyncio, sys, threading
from rtctl.operator.dashboard import Dashboard
from websockets.asyncio.client import connect
dash = Dashboard(sys.argv[1], port=0)
dash.start()
async def main():
    async with connect(f"ws://127.0.0.1:{dash.port}/ws", origin=f"http://127.0.0.1:{dash.port}") as ws:
        await ws.recv()
        print("ready", flush=True)
        n = 0
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 3.0); n += 1
        except (asyncio.TimeoutError, Exception):
            pass
        print(dash.samples, dash.lost, flush=True)
asyncio.run(main())
"""

RECORDER = r"""
import sys, threading
from rtctl.telemetry.recording import record
print("ready", flush=True)
res = record(sys.argv[1], sys.argv[2], progress=False, idle_timeout=3.0)
print(res["samples"], res["lost"], flush=True)
"""

SINK_CASES = ("off", "pub", "plotjuggler", "plotjuggler, per sample", "foxglove", "dashboard", "record", "all", "all, nice 0", "all, thread",
              "all, thread, 5 ms", "off, kernel slice", "all, kernel slice", "all, no readers")


def spawn_script(script, *argv):
    p = subprocess.Popen([sys.executable, "-c", script, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline().strip()
    if line != "ready":
        p.kill()
        raise RuntimeError(f"helper process did not start: {line!r}")
    return p


def sink_case(case: str, seconds: float, tmp: str):
    """One paced 1 kHz run with the sinks of ``case`` on; returns the loop report and the readers' counts."""
    from rtctl.telemetry.foxglove import FoxgloveSink
    from rtctl.telemetry.publisher import PUBLISHER_NICE, SWITCH_INTERVAL

    loop = make_loop(True, kernel_slice="kernel slice" in case)
    readers = "no readers" not in case
    case = case.replace(", kernel slice", "").replace(", no readers", "")
    tel = None
    procs = []
    if case != "off":
        every = case.startswith("all")
        pj = every or case.startswith("plotjuggler")
        fox = every or case == "foxglove"
        tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0" if pj else None,
                        sinks=[FoxgloveSink(port=0)] if fox else [],
                        switch_interval=None if "5 ms" in case else SWITCH_INTERVAL,
                        process="thread" not in case,
                        publisher_nice=0 if "nice 0" in case else PUBLISHER_NICE,
                        plotjuggler_format="object" if "per sample" in case else "array").attach(loop).start()
        if readers and (every or case == "pub"):
            procs.append(spawn(tel.endpoint, "reader"))
        if readers and pj:
            procs.append(spawn_script(PJ_READER, tel.plotjuggler_endpoint))
        if readers and fox:
            procs.append(spawn_script(FOXGLOVE_CLIENT, tel.sinks[0].url))
        if readers and (every or case == "dashboard"):
            procs.append(spawn_script(DASHBOARD_CLIENT, tel.endpoint))
        if readers and (every or case == "record"):
            procs.append(spawn_script(RECORDER, tel.endpoint, os.path.join(tmp, f"bench-{case[:3]}.mcap")))
        time.sleep(1.0)  # subscriptions in place, helper processes settled
    report = loop.run(duration=seconds)
    if tel is not None:
        tel.close()
    received = [tuple(int(x) for x in p.stdout.readline().split()[:2]) for p in procs]
    for p in procs:
        p.wait(15)
    cost = (tel.flush_cpu / seconds * 1e3, tel.flush_max * 1e3) if tel is not None else (0.0, 0.0)
    return report, received, cost


def sinks_table(seconds: float, rounds: int, cases=SINK_CASES):
    print(f"4. sinks off and on, paced 1 kHz loop (arm7), {seconds:g} s per case, {rounds} rounds alternated; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    results = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = tuple(cases) if r % 2 == 0 else tuple(reversed(cases))
            for case in order:
                results[case].append(sink_case(case, seconds, tmp))
    print(f"   load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"   loop thread: {REALTIME or 'normal scheduling'}; publisher: a process, except the 'thread' cases")
    print("   publisher CPU: ms of publisher-thread CPU per s of loop; longest flush: wall ms")
    print(f"   {'case':<24}{'overruns per round':>16}{'compute p99':>13}{'latency p99':>13}{'latency max':>13}"
          f"{'publisher CPU':>15}{'longest flush':>15}  readers got (of {int(seconds * 1000)})")
    for case, runs in results.items():
        over = ", ".join(str(rep.overruns) for rep, _, _ in runs)
        cp99 = max(rep.timing["compute"]["p99"] for rep, _, _ in runs)
        lp99 = max(rep.timing["latency"]["p99"] for rep, _, _ in runs)
        lmax = max(rep.timing["latency"]["max"] for rep, _, _ in runs)
        cpu = max(c[0] for _, _, c in runs)
        longest = max(c[1] for _, _, c in runs)
        got = "; ".join(",".join(str(n) for n, _ in rec) for _, rec, _ in runs) or "-"
        print(f"   {case:<24}{over:>16}{cp99:>13.1f}{lp99:>13.1f}{lmax:>13.0f}{cpu:>15.1f}{longest:>15.2f}  {got}")
    return results


PJ_BATCH_READER = r"""
import json, sys, time, zmq
s = zmq.Context().socket(zmq.SUB)
if sys.argv[2] == "reader":
    s.setsockopt(zmq.RCVHWM, 0)
s.connect(sys.argv[1]); s.setsockopt(zmq.SUBSCRIBE, b"")
print("ready", flush=True)
if sys.argv[2] == "stalled":
    sys.stdin.readline()   # stalls (ZeroMQ's default receive high-water mark, as PlotJuggler's) until told
messages = samples = 0
s.poll()
c0 = time.process_time()
while s.poll(1000):
    decoded = json.loads(s.recv())
    messages += 1
    samples += len(decoded) if isinstance(decoded, list) else 1
    c1 = time.process_time()
print(samples, messages, c1 - c0, flush=True)
"""


def arm_rows(n: int):
    """``n`` ring rows of the arm7's 1 kHz run (sinusoid), with the telemetry that names their columns."""
    loop = make_loop(False)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", capacity=n).attach(loop)
    for k in range(n):
        loop.step(k * loop.period)
    rows, first = tel._take()
    return rows, first, tel


def plotjuggler_round(form: str, rows, first: int, tel, mode: str, batch: int = 10):
    """Send ``rows`` in ``form`` to a reader process (``mode``: "reader" reads at once, no high-water mark on
    either side; "stalled" reads once everything was sent, the high-water marks left at ``Telemetry``'s and
    ZeroMQ's defaults). Returns (messages, bytes, publisher CPU s, samples the reader got, its CPU s)."""
    from rtctl.telemetry.plotjuggler import PlotJugglerStream
    stream = PlotJugglerStream(format=form)
    stream.open(tel.layout, tel.joints, tel.extra_names)
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0 if mode == "reader" else tel.sndhwm)
    endpoint = f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}"
    reader = spawn_script(PJ_BATCH_READER, endpoint, mode)
    time.sleep(0.5)  # the subscription in place (PUB/SUB slow joiner)
    messages = size = 0
    c0 = time.thread_time()
    for start in range(0, rows.shape[0], batch):
        for message in stream.messages(rows[start:start + batch], first + start):
            pub.send(message, flags=zmq.NOBLOCK)
            messages += 1
            size += len(message)
    cpu = time.thread_time() - c0
    if mode == "stalled":
        time.sleep(0.5)
        reader.stdin.write("go\n")
        reader.stdin.flush()
    got, _, reader_cpu = reader.stdout.readline().split()
    reader.wait(15)
    pub.close(linger=0)
    return messages, size, cpu, int(got), float(reader_cpu)


def plotjuggler_table(samples: int, rounds: int):
    rows, first, tel = arm_rows(samples)
    print(f"5. PlotJuggler stream, {samples} samples (arm7, {rows.shape[1]} values each) in batches of 10, "
          f"{rounds} rounds alternated; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    best, kept = {}, {}
    for r in range(rounds):
        for form in (("object", "array") if r % 2 == 0 else ("array", "object")):
            res = plotjuggler_round(form, rows, first, tel, "reader")
            if res[3] != samples:
                raise SystemExit(f"the reader got {res[3]} of {samples} samples in the {form} form")
            if form not in best or res[2] + res[4] < best[form][2] + best[form][4]:
                best[form] = res
            kept.setdefault(form, []).append(plotjuggler_round(form, rows, first, tel, "stalled")[3])
    print(f"   load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; CPU in us per sample, best "
          f"round; kept: samples a reader stalled until the end still got (sndhwm {tel.sndhwm}), every round")
    print(f"   {'form':<8}{'messages':>10}{'bytes/sample':>14}{'publisher CPU':>15}{'reader CPU':>12}  kept")
    for form, (messages, size, cpu, _, reader_cpu) in best.items():
        print(f"   {form:<8}{messages:>10}{size / samples:>14.1f}{cpu / samples * 1e6:>15.2f}"
              f"{reader_cpu / samples * 1e6:>12.2f}  {', '.join(str(k) for k in kept[form])}")
    (m0, b0, c0, _, r0), (m1, b1, c1, _, r1) = best["object"], best["array"]
    print(f"   array / object: messages {m1 / m0:.3f}, bytes {b1 / b0:.3f}, publisher CPU {c1 / c0:.2f}, "
          f"reader CPU {r1 / r0:.2f}, kept {'>= ' * (min(kept['array']) == samples)}"
          f"{min(kept['array']) / max(min(kept['object']), 1):.1f} (fewest of each)")


def chosen_cases(text: str):
    cases = tuple(c.strip() for c in text.split(";") if c.strip())
    unknown = [c for c in cases if c not in SINK_CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are {', '.join(SINK_CASES)}")
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--burst", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only-sinks", action="store_true", help="run section 4 only")
    ap.add_argument("--only-plotjuggler", action="store_true", help="run section 5 only")
    ap.add_argument("--pj-samples", type=int, default=20000, help="section 5's samples per round")
    ap.add_argument("--cases", default=";".join(SINK_CASES), help="section 4's cases, separated by ';'")
    ap.add_argument("--realtime-priority", type=int, default=0, help="SCHED_FIFO priority of the loop thread")
    args = ap.parse_args()
    global REALTIME
    if args.realtime_priority:
        ARM["loop"]["realtime_priority"] = args.realtime_priority
        REALTIME = f"SCHED_FIFO priority {args.realtime_priority}"
    print(f"rtctl telemetry benchmark -- {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})\n")
    if args.only_sinks:
        sinks_table(args.seconds, args.rounds, chosen_cases(args.cases))
        return
    if args.only_plotjuggler:
        plotjuggler_table(args.pj_samples, args.rounds)
        return
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
    print()
    sinks_table(args.seconds, args.rounds, chosen_cases(args.cases))
    print()
    plotjuggler_table(args.pj_samples, args.rounds)


if __name__ == "__main__":
    main()
