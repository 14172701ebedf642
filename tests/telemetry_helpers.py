"""Shared set-up for the telemetry tests: small loops on the simulated arm, subscribers, spies."""
import copy
import json
import socket
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


def signed(server, request, token):
    """``request`` as a client holding ``token`` sends it to ``server`` (a ControlServer, in-process): with the
    session and proof of a ``hello`` just before (rtctl.operator.handshake)."""
    from rtctl.operator.handshake import ClientHandshake
    handshake = ClientHandshake(token, server.identity)
    return handshake.authenticate(server.handle(handshake.hello()), request)


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


def synthetic_value(index, column):
    """A deterministic, poorly compressible float64 for sample ``index``, ring column ``column``."""
    x = np.sin(np.add.outer(np.asarray(index, dtype=float) * 12.9898, np.asarray(column, dtype=float) * 78.233))
    return (x * 43758.5453) % 1.0 - 0.5


class SyntheticPublisher:
    """Schema-v1 telemetry of a 7-joint robot on a loopback PUB socket, from a thread: ``rate`` samples/s in
    batches of ``batch``, metadata every 0.2 s. Sample ``i`` holds :func:`synthetic_value` (``t`` = i / rate,
    ``cycle`` = i, ``stamp`` = the wall clock when sent); ``nonfinite(i)`` -> {column: value} overrides."""

    def __init__(self, rate=100.0, batch=2, nonfinite=None, joints=7):
        from rtctl.telemetry.schema import Layout
        self.layout = Layout(joints)
        self.joints = [f"j{k}" for k in range(joints)]
        self.rate, self.batch, self.nonfinite = float(rate), int(batch), nonfinite
        self.sock = zmq.Context.instance().socket(zmq.PUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 100_000)
        self.sock.bind("tcp://127.0.0.1:0")
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rows(self, first, count):
        lay = self.layout
        index = np.arange(first, first + count)
        rows = synthetic_value(index, np.arange(lay.width))
        rows[:, lay.slices["t"].start] = index / self.rate
        rows[:, lay.slices["cycle"].start] = index
        for name in ("overruns", "tripped", "fresh"):
            rows[:, lay.slices[name].start] = 0
        if self.nonfinite is not None:
            for k, i in enumerate(index):
                for column, value in self.nonfinite(int(i)).items():
                    rows[k, column] = value
        return rows

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        from rtctl.telemetry.schema import TOPIC_META, TOPIC_SAMPLES, envelope, pack
        t0, next_meta, seq = time.monotonic(), 0.0, 0
        while not self._stop.is_set():
            now = time.monotonic() - t0
            if now >= next_meta:
                self.sock.send_multipart([TOPIC_META, pack(envelope(joints=self.joints, rate_hz=self.rate,
                                                                    fields={}, started=time.time()))])
                next_meta = now + 0.2
            rows = self.rows(self.sent, self.batch)
            rows[:, self.layout.slices["stamp"].start] = time.time()
            self.sock.send_multipart([TOPIC_SAMPLES, pack(envelope(seq=seq, first=self.sent, count=self.batch,
                                                                   dropped=0, sent=time.time(),
                                                                   fields=self.layout.columns(rows)))])
            self.sent += self.batch
            seq += 1
            self._stop.wait(max(0.0, t0 + self.sent / self.rate - time.monotonic()))

    def close(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.sock.close(linger=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_recording(path, rows):
    """A minimal MCAP in the recorder's layout: ``rows`` on /rtctl/samples (JSON)."""
    from mcap.writer import Writer

    with open(path, "wb") as fh:
        writer = Writer(fh)
        writer.start()
        schema = writer.register_schema(name="rtctl.telemetry.Sample", encoding="jsonschema", data=b"{}")
        channel = writer.register_channel("/rtctl/samples", "json", schema)
        for row in rows:
            ns = int(row["stamp"] * 1e9)
            writer.add_message(channel, log_time=ns, publish_time=ns, data=json.dumps(row).encode())
        writer.finish()
    return path


def sample_rows(n=5):
    return [{"index": i, "t": i * 1e-3, "cycle": i, "stamp": 1.7e9 + i * 1e-3, "period": 1e-3, "latency": 0.0,
             "compute": 1e-4, "overruns": 0, "tripped": 0, "fresh": 1, "q": [0.0], "v": [0.0], "q_d": [0.0],
             "qd_d": [0.0], "effort_cmd": [0.0], "effort": [0.0], "kp": [1.0], "kd": [1.0], "extra": []}
            for i in range(n)]


def write_described_recording(path, description, joints, rows, extra=(), version=1):
    """A recording as rtctl record writes it (its writer, channels and schemas): the metadata naming ``joints``
    and ``extra``, the robot ``description`` (a rtctl.telemetry.description.Description, or None: a recording
    made before rtctl published one) and one message per row, logged at its stamp."""
    from rtctl.telemetry.recording import McapRecording
    from rtctl.telemetry.schema import stamp_ns
    from rtctl.telemetry.tools import CH_DESCRIPTION, CH_META, CH_SAMPLES

    rec = McapRecording(str(path))
    rec.add(CH_META, 1, json.dumps({"schema": "rtctl.telemetry", "version": version, "robot": "r",
                                    "joints": list(joints), "extra": list(extra)}))
    if description is not None:
        rec.add(CH_DESCRIPTION, 1, json.dumps({"data": description.urdf, "sensor_frames": description.sensor_frames}))
    for row in rows:
        rec.add(CH_SAMPLES, stamp_ns(row["stamp"]), json.dumps(row))
    rec.close()
    return path
