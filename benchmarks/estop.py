#!/usr/bin/env python3
"""E-stop latency over the control channel, against a bare ZeroMQ echo measured in the same run.

A paced 1 kHz loop (the bundled demo) runs with its control channel on loopback. Timed from a
client's send to its receipt of the reply, ``--requests`` times each:

* peer: a bare ZeroMQ REQ/REP echo in a thread of the same process (the transport's own cost);
* ``status`` and ``estop`` requests to the control channel (re-armed between e-stops);
* ``estop`` right after a burst of ``--fuzz`` random multipart messages from other sockets.

Reported: median, p99 and max in milliseconds, and the median as a multiple of the peer's. With
``--load`` a second process spins on the other core (a busy control PC).

Usage: python benchmarks/estop.py [--requests 200] [--fuzz 500] [--load]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import zmq

import rtctl
from rtctl.config import build, load_config
from rtctl.operator.auth import TOKEN_ENV

DEMO = Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml"


def _spin(stop):
    while not stop.is_set():
        pass


def _round_trips(endpoint: str, payload: bytes, n: int, between=None) -> np.ndarray:
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    times = np.zeros(n)
    try:
        sock.send(payload)  # connect and warm up
        sock.recv()
        for k in range(n):
            if between is not None:
                between()
            start = time.perf_counter()
            sock.send(payload)
            if not sock.poll(2000):
                raise RuntimeError(f"no reply from {endpoint}")
            sock.recv()
            times[k] = time.perf_counter() - start
    finally:
        sock.close(linger=0)
    return times * 1e3


def _echo_server(ready, stop):
    sock = zmq.Context.instance().socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    ready.append(f"tcp://127.0.0.1:{port}")
    while not stop.is_set():
        if sock.poll(50):
            sock.send(sock.recv())
    sock.close(linger=0)


def _fuzz(endpoint: str, n: int, rng) -> None:
    ctx = zmq.Context.instance()
    sockets = [ctx.socket(zmq.DEALER) for _ in range(4)]
    for sock in sockets:
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
    for k in range(n):
        frames = [rng.bytes(int(rng.integers(0, 48))) for _ in range(int(rng.integers(1, 5)))]
        sockets[k % 4].send_multipart([b"", *frames] if k % 2 else frames)
    time.sleep(0.05)
    for sock in sockets:
        sock.close(linger=0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--fuzz", type=int, default=500)
    parser.add_argument("--load", action="store_true", help="spin a second process on the other core")
    args = parser.parse_args(argv)
    os.environ.setdefault(TOKEN_ENV, secrets.token_urlsafe(32))
    spinner_stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(spinner_stop,), daemon=True) if args.load else None
    if spinner is not None:
        spinner.start()
    cfg = load_config(DEMO)
    cfg["control"].update(enabled=True, endpoint="tcp://127.0.0.1:0")
    loop = build(cfg)
    runner = threading.Thread(target=lambda: loop.run(duration=3600.0), daemon=True)
    runner.start()
    ready, echo_stop = [], threading.Event()
    echo = threading.Thread(target=_echo_server, args=(ready, echo_stop), daemon=True)
    echo.start()
    while not ready or loop.cycle < 50:
        time.sleep(0.01)
    endpoint = loop.control.endpoint
    rng = np.random.default_rng(7)
    estop = msgpack.packb({"cmd": "estop", "reason": "benchmark"})
    rearm = loop.safety.rearm
    try:
        rows = [("peer: bare ZeroMQ REQ/REP echo", _round_trips(ready[0], estop, args.requests)),
                ("control channel: status", _round_trips(endpoint, msgpack.packb({"cmd": "status"}),
                                                         args.requests)),
                ("control channel: estop", _round_trips(endpoint, estop, args.requests, rearm))]
        after = np.zeros(max(args.requests // 10, 1))
        for k in range(after.shape[0]):
            rearm()
            _fuzz(endpoint, args.fuzz, rng)
            after[k] = _round_trips(endpoint, estop, 1)[0]
        rows.append((f"estop after {args.fuzz} fuzz messages", after))
    finally:
        loop.request_stop()
        runner.join(10)
        echo_stop.set()
        loop.control.close()
        if spinner is not None:
            spinner_stop.set()
            spinner.join(5)
    peer = float(np.median(rows[0][1]))
    print(f"rtctl e-stop benchmark | 1 kHz demo loop running | other core {'busy' if args.load else 'idle'}")
    print(f"{'round trip (ms)':<40}{'n':>6}{'median':>9}{'p99':>9}{'max':>9}{'x peer':>8}")
    for name, times in rows:
        print(f"{name:<40}{times.size:>6}{np.median(times):>9.3f}{np.percentile(times, 99):>9.3f}"
              f"{times.max():>9.3f}{np.median(times) / peer:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
