"""Shared set-up for the telemetry tests: small loops on the simulated arm, subscribers, spies."""
import copy
import threading
import time

import numpy as np
import zmq

from rtctl.config import build, validate
from rtctl.telemetry.schema import TOPIC_META, decode

BASE = {
    "robot": {"model": "arm7"},
    "plant": {"initial_position": [0.0] * 7},
    "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
    "controller": {"type": "computed_torque", "kp": 400.0},
    "trajectory": {"type": "min_jerk", "goal": [0.3, 0.2, -0.2, -0.5, 0.2, 0.3, 0.1], "duration": 1.0, "t0": 0.05},
    "loop": {"rate_hz": 1000.0, "pace": False},
}


def make_loop(**sections):
    raw = copy.deepcopy(BASE)
    for section, values in sections.items():
        if section == "trajectory":
            raw[section] = dict(values)
        else:
            raw.setdefault(section, {}).update(values)
    return build(validate(raw))


def run_in_background(loop, seconds):
    """Run ``loop`` paced for ``seconds`` in a daemon thread; return the thread once 20 cycles have run."""
    th = threading.Thread(target=lambda: loop.run(duration=seconds), daemon=True)
    th.start()
    end = time.monotonic() + 10
    while loop.cycle < 20 and time.monotonic() < end:
        time.sleep(0.01)
    return th


def subscriber(endpoint, rcvhwm=100_000, rcvbuf=0):
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVHWM, rcvhwm)
    if rcvbuf:
        sub.setsockopt(zmq.RCVBUF, rcvbuf)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    return sub


def wait_meta(sub, timeout=5.0):
    """Block until a metadata message arrives: the subscription is then live."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sub.poll(100):
            topic, payload = sub.recv_multipart()
            if topic == TOPIC_META:
                return decode(topic, payload)
    raise AssertionError("no telemetry metadata within the timeout")


def drain(sub, idle=0.5):
    """All messages until ``idle`` s pass without one: list of (topic, decoded)."""
    out = []
    while sub.poll(int(idle * 1000)):
        topic, payload = sub.recv_multipart()
        out.append((topic, decode(topic, payload)))
    return out


class Spy:
    """Wraps a Telemetry sink; keeps an exact copy of what each cycle handed off."""

    def __init__(self, telemetry):
        self.telemetry = telemetry
        self.rows = []

    def sample(self, loop, t):
        s = loop.stats
        h = s._head - 1
        idx = loop.controller.q_index
        vidx = loop.controller.v_index
        self.rows.append({
            "t": t, "cycle": loop.cycle, "period": s._period[h], "latency": s._latency[h],
            "compute": s._compute[h], "overruns": s.overruns, "tripped": int(loop.safety.tripped),
            "fresh": int(loop.state.fresh), "q": loop.state.q[idx].copy(), "qd": loop.state.v[vidx].copy(),
            "q_d": loop.q_d.copy(), "qd_d": loop.qd_d.copy(), "effort_cmd": loop.command.effort[vidx].copy(),
            "effort": loop.state.effort[vidx].copy(), "error": loop.q_d - loop.state.q[idx],
            "kp": loop.controller.kp.copy(), "kd": loop.controller.kd.copy()})
        self.telemetry.sample(loop, t)


def assert_rows_equal(expected, batch_rows):
    """Exact equality (float64 bit-for-bit via ==) of every field of every sample."""
    assert len(expected) == len(batch_rows)
    for e, got in zip(expected, batch_rows):
        for name, value in e.items():
            g = got[name]
            if isinstance(value, np.ndarray):
                assert np.array_equal(np.asarray(g, dtype=float), value), (name, e["cycle"])
            else:
                assert g == value, (name, e["cycle"], g, value)


def collect(sub, seconds):
    """All messages arriving within ``seconds`` (for streams that never go idle)."""
    out = []
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0 or not sub.poll(max(1, int(left * 1000))):
            return out
        topic, payload = sub.recv_multipart()
        out.append((topic, decode(topic, payload)))
