"""Telemetry publishing: exact round trip, schema versioning, drop-oldest ring, stalled subscriber, tools.

* Every field of every sample a subscriber decodes equals, bit for bit, what the loop
  handed off that cycle (a spy copies the loop's arrays in the same cycle).
* A message of another schema version raises SchemaVersionError naming both versions.
* The ring is drop-oldest and counts exactly what it overwrote.
* A subscriber that stops reading does not change the loop's overrun count or
  wake-up latency beyond a stated margin, and its losses are counted (index gaps)
  while the publisher's ring drops nothing.
* record -> MCAP -> replay reproduces the exact values; plot writes a figure; echo
  and stats read a live stream.
* The template JSON encoders (PlotJuggler, Foxglove/MCAP samples) equal the reference
  encoders value for value; the PlotJuggler stream is decimated by sample index; MCAP
  recordings and the Foxglove server share channels and schemas; a failing sink is
  dropped and reported; the GIL switch interval is restored on close.
"""
import io
import json
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
import zmq

from rtctl.telemetry import EndpointError, SchemaVersionError, Telemetry, check_endpoint, decode
from rtctl.telemetry.publisher import CHUNK_ROWS
from rtctl.telemetry.sinks import PublisherSink
from rtctl.telemetry.description import description_of_loop
from rtctl.telemetry.schema import (CHANNEL_DESCRIPTION, CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES,
                                    DESCRIPTION_SCHEMA_NAME, event_json_schema, meta_json_schema, SAMPLE_SCHEMA_NAME,
                                    TOPIC_DESCRIPTION, TOPIC_EVENT, TOPIC_SAMPLES, JsonRows, Layout, SchemaError,
                                    envelope, pack, plotjuggler_objects, sample_json_schema)
from rtctl.telemetry.recording import record
from rtctl.telemetry.playback import replay
from rtctl.telemetry.tools import echo, plot, read_recording, rows_of, stats
from machine import starved
from telemetry_helpers import Spy, assert_rows_equal, drain, make_loop, subscriber, wait_meta

TEL = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.05}


@pytest.mark.slow
def test_round_trip_exact_values_and_metadata():
    loop = make_loop(telemetry=TEL)
    tel = loop.telemetry
    try:
        sub = subscriber(tel.endpoint)
        meta = wait_meta(sub)
        assert meta["version"] == 1 and meta["joints"] == list(loop.controller.joint_names)
        assert meta["fields"]["q"] == {"shape": [7], "unit": ["rad"] * 7}
        assert meta["fields"]["effort"]["unit"] == ["N m"] * 7 and meta["rate_hz"] == 1000.0
        spy = Spy(tel)
        loop.telemetry = spy
        loop.run(cycles=600)
        loop.safety.estop("test trip")  # a safety event, published as rtctl/event
        tel.close()
        msgs = drain(sub)
    finally:
        tel.close()
    rows = [r for topic, m in msgs if topic == TOPIC_SAMPLES for r in rows_of(m)]
    assert [r["index"] for r in rows] == list(range(600))
    assert_rows_equal(spy.rows, rows)
    assert tel.dropped == 0 and tel.handed == 600 and tel.published == 600
    events = [m for topic, m in msgs if topic == TOPIC_EVENT]
    assert any(e["kind"] == "safety" and "e-stop: test trip" in e["detail"] for e in events)


def test_schema_version_mismatch_is_reported_clearly():
    good = pack(envelope(seq=0, first=0, count=0, dropped=0, sent=0.0, fields={}))
    assert decode(TOPIC_SAMPLES, good)["version"] == 1
    future = msgpack.packb({"schema": "rtctl.telemetry", "version": 2, "fields": {}})
    with pytest.raises(SchemaVersionError, match=r"schema version 2 received.*decodes version 1 only"):
        decode(TOPIC_SAMPLES, future)
    with pytest.raises(SchemaError, match="not msgpack"):
        decode(TOPIC_SAMPLES, b"\xc1garbage")
    with pytest.raises(SchemaError, match="unknown telemetry topic"):
        decode(b"other", good)


def test_ring_is_drop_oldest_and_counts_drops_exactly():
    loop = make_loop()
    tel = Telemetry(capacity=16, endpoint="tcp://127.0.0.1:0").attach(loop)  # never started: nobody drains
    for k in range(100):
        loop.step(k * loop.period)
    rows, first = tel._take()
    assert tel.handed == 100 and tel.dropped == 84 and first == 84
    cycles = rows[:, tel.layout.slices["cycle"].start]
    assert cycles.tolist() == list(range(84, 100))


def test_endpoints_are_loopback_unless_explicit():
    assert check_endpoint("tcp://127.0.0.1:0") == "tcp://127.0.0.1:*"
    assert check_endpoint("tcp://localhost:5555") == "tcp://127.0.0.1:5555"
    with pytest.raises(EndpointError, match="allow_remote"):
        check_endpoint("tcp://0.0.0.0:5555")
    assert check_endpoint("tcp://0.0.0.0:5555", allow_remote=True) == "tcp://0.0.0.0:5555"
    with pytest.raises(EndpointError):
        check_endpoint("udp://127.0.0.1:1")
    with pytest.raises(EndpointError, match="abstract socket has no permissions"):
        check_endpoint("ipc://@rtctl-telemetry")


@pytest.mark.parametrize("process", [False, True])
@pytest.mark.slow
def test_ipc_sockets_are_created_owner_only(tmp_path, process):
    """An ipc:// server socket gets mode 0600 whatever the umask (connecting to a unix socket needs write
    permission on it, so no other user of the PC reads the stream or reaches the control channel), the
    umask comes back, and the owner's clients still connect."""
    import os
    import stat

    paths = {name: tmp_path / f"{name}.sock" for name in ("telemetry", "plotjuggler", "control")}
    token = tmp_path / "token"
    token.write_text("a-token-of-enough-length-0123\n")
    token.chmod(0o600)
    umask = os.umask(0o002)
    try:
        loop = make_loop(telemetry={"enabled": True, "endpoint": f"ipc://{paths['telemetry']}", "plotjuggler": True,
                                    "plotjuggler_endpoint": f"ipc://{paths['plotjuggler']}", "meta_period": 0.05,
                                    "publisher": "process" if process else "thread"},
                         control={"enabled": True, "endpoint": f"ipc://{paths['control']}",
                                  "token_file": str(token)})
        assert os.umask(0o002) == 0o002
    finally:
        os.umask(umask)
    try:
        for name, path in paths.items():
            mode = path.stat().st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) & 0o077 == 0, (name, oct(mode))
        sub = subscriber(loop.telemetry.endpoint)
        wait_meta(sub)
        sub.close(linger=0)
    finally:
        loop.control.close()
        loop.telemetry.close()


@pytest.mark.parametrize("part", ["telemetry", "control"])
@pytest.mark.slow
def test_an_ipc_endpoint_naming_a_file_leaves_it_alone(tmp_path, part):
    """ZeroMQ unlinks what is at an ipc:// path before binding: a mistaken endpoint naming a file (here the token
    file) is refused naming the path, and the file is still there; a socket a previous run left is replaced."""
    from rtctl.telemetry.endpoints import bind

    token = tmp_path / "token"
    token.write_text("a-token-of-enough-length-0123\n")
    token.chmod(0o600)
    endpoint = f"ipc://{token}"
    sections = {"telemetry": {"enabled": True, "endpoint": endpoint, "publisher": "thread"}} if part == "telemetry" \
        else {"control": {"enabled": True, "endpoint": endpoint, "token_file": str(token)}}
    with pytest.raises(ValueError, match="exists and is not a socket"):
        make_loop(**sections)
    assert token.read_text() == "a-token-of-enough-length-0123\n"
    import socket
    left = tmp_path / "left.sock"
    with socket.socket(socket.AF_UNIX) as stale:                 # a crashed run's socket file
        stale.bind(str(left))
    sock = zmq.Context.instance().socket(zmq.PUB)
    try:
        assert bind(sock, f"ipc://{left}") == f"ipc://{left}"
    finally:
        sock.close(linger=0)


def _paced_run(stalled: bool, seconds: float = 2.0):
    loop = make_loop(loop={"pace": True, "disable_gc": True},
                     trajectory={"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7,
                                 "frequency": [0.5] * 7})
    # small ZeroMQ/TCP buffers so that a stalled subscriber overflows within the run
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", sndhwm=10, sndbuf=32768, meta_period=0.1,
                    process=True).attach(loop).start()
    sub = None
    try:
        if stalled:
            sub = subscriber(tel.endpoint, rcvhwm=5, rcvbuf=4096)
            wait_meta(sub)
        report = loop.run(duration=seconds)
        time.sleep(0.1)
        tel.close()
        lost = None
        if sub is not None:  # the subscriber wakes up: what made it through, and the gaps
            msgs = drain(sub, idle=0.5)
            indices = [r["index"] for topic, m in msgs if topic == TOPIC_SAMPLES for r in rows_of(m)]
            lost = report.cycles - len(indices)
            assert indices == sorted(indices)
        return report, tel, lost
    finally:
        tel.close()
        if sub is not None:
            sub.close(linger=0)


def _work_overruns(report) -> int:
    """Overrun cycles whose own work (read, control, hand-off, write) did not fit the period: what the loop
    did, as against cycles that overran because the machine woke the loop up late."""
    late = report.late
    return late["cycles"] - late["woke_late"] if late else 0


@pytest.mark.slow
@pytest.mark.flaky(reruns=1, reruns_delay=1)  # wall-clock bounds on a shared 2-core machine: one more run
def test_stalled_subscriber_does_not_disturb_the_loop_and_losses_are_counted():
    base1, tel1, _ = _paced_run(stalled=False)
    stall, tel2, lost = _paced_run(stalled=True)
    base2, _, _ = _paced_run(stalled=False)
    runs = (base1.late, stall.late, base2.late, base1.timing["telemetry"], stall.timing["telemetry"],
            base2.timing["telemetry"])
    # The hand-off never loses a sample: the ring kept up; the stalled subscriber lost many (HWM drops).
    assert tel2.dropped == 0 and tel2.handed == stall.cycles == 2000
    assert lost > 500, lost
    # The loop's own work is not slowed by the stalled subscriber: the hand-off (the "telemetry" part of the
    # cycle, a ring write) costs what it costs without one, and no more cycles overran by their own work.
    # Margins for a shared 2-core machine: 1.5x + 20 us on the p99, 1 % of the cycles (+5) on the overruns.
    worst_handoff = max(base1.timing["telemetry"]["p99"], base2.timing["telemetry"]["p99"])
    assert stall.timing["telemetry"]["p99"] <= 1.5 * worst_handoff + 20.0, runs
    worst_work = max(_work_overruns(base1), _work_overruns(base2))
    assert _work_overruns(stall) <= worst_work + 0.01 * stall.cycles + 5, runs
    # Wake-up latency is the machine's: it is compared only when no run was starved (the last CI run's
    # baselines overran 22 and 175 cycles around the stalled run's 318, the machine's load changing).
    if not any(starved(r) for r in (base1, stall, base2)):
        worst_over = max(base1.overruns, base2.overruns)
        assert stall.overruns <= worst_over + 0.01 * stall.cycles + 5, runs
        worst_p99 = max(base1.timing["latency"]["p99"], base2.timing["latency"]["p99"])
        assert stall.timing["latency"]["p99"] <= 1.5 * worst_p99 + 300.0, \
            (base1.timing["latency"], stall.timing["latency"], base2.timing["latency"])


@pytest.mark.slow
def test_record_replay_plot_echo_stats(tmp_path):
    loop = make_loop(telemetry=TEL)
    tel = loop.telemetry
    spy = Spy(tel)
    loop.telemetry = spy
    path = tmp_path / "run.mcap"
    result = {}
    rec = threading.Thread(target=lambda: result.update(record(tel.endpoint, str(path), samples=800,
                                                               idle_timeout=5.0, progress=False)))
    try:
        rec.start()
        time.sleep(0.6)  # PUB/SUB slow joiner: let the recorder subscribe
        loop.safety  # noqa: B018
        loop.run(cycles=800)
        rec.join(15)
    finally:
        tel.close()
    assert result["samples"] == 800 and result["lost"] == 0
    loaded = read_recording(str(path), progress=False)
    assert loaded["meta"]["joints"] == list(loop.controller.joint_names)
    # the recording's channels and JSON Schemas are the live Foxglove server's (rtctl.telemetry.foxglove)
    from mcap.reader import make_reader
    with open(path, "rb") as fh:
        summary = make_reader(fh).get_summary()
    by_topic = {c.topic: (c.message_encoding, summary.schemas[c.schema_id]) for c in summary.channels.values()}
    assert set(by_topic) == {CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT, CHANNEL_DESCRIPTION, "/tf", "/rtctl/scene",
                             "/joint_states"}   # and the 3D view's (tests/test_foxglove_scene.py)
    # the robot description, once, though it is sent again to every subscriber when another joins
    assert result["description"] == 1 and by_topic[CHANNEL_DESCRIPTION][1].name == DESCRIPTION_SCHEMA_NAME
    assert loaded["description"]["data"] == description_of_loop(loop).urdf
    encoding, sample_schema = by_topic[CHANNEL_SAMPLES]
    assert encoding == "json" and sample_schema.encoding == "jsonschema"
    assert (sample_schema.name, sample_schema.data) == (SAMPLE_SCHEMA_NAME, sample_json_schema())
    assert by_topic[CHANNEL_META][1].data == meta_json_schema()
    assert by_topic[CHANNEL_EVENT][1].data == event_json_schema()
    assert loaded["samples"]["index"].tolist() == list(range(800))

    # replay as fast as possible; a subscriber decodes the original values exactly
    bound = {}
    ready = threading.Event()
    collected = []

    def on_ready(ep):
        bound["ep"] = ep
        ready.set()

    rep = threading.Thread(target=lambda: replay(str(path), "tcp://127.0.0.1:0", speed=0, progress=False,
                                                 ready=on_ready, connect_wait=0.8))
    rep.start()
    assert ready.wait(10)
    sub = subscriber(bound["ep"])
    echo_out = io.StringIO()
    ech = threading.Thread(target=lambda: echo(bound["ep"], count=3, timeout=10, out=echo_out))
    ech.start()
    rep.join(20)
    replayed = drain(sub)
    collected = [r for topic, m in replayed if topic == TOPIC_SAMPLES for r in rows_of(m)]
    assert [m["urdf"] for topic, m in replayed if topic == TOPIC_DESCRIPTION] == [loaded["description"]["data"]]
    ech.join(10)
    sub.close(linger=0)
    assert_rows_equal(spy.rows, collected)
    lines = echo_out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("rtctl/")

    # stats on a paced replay (1.0x): rate close to the recorded 1 kHz
    bound.clear()
    ready.clear()
    rep = threading.Thread(target=lambda: replay(str(path), "tcp://127.0.0.1:0", speed=1.0, progress=False,
                                                 ready=on_ready, connect_wait=0.5))
    rep.start()
    assert ready.wait(10)
    out = io.StringIO()
    st = stats(bound["ep"], duration=1.5, out=out)
    rep.join(10)
    assert st["samples"] == 800 and st["lost"] == 0 and st["decode_errors"] == 0
    assert 300 < st["rate_hz"] < 700  # 800 samples over a 1.5 s window
    assert "samples/s" in out.getvalue()

    png = tmp_path / "fig.png"
    plot(str(path), str(png), progress=False)
    assert png.stat().st_size > 20_000


# -- JSON encoders, PlotJuggler stream, sinks, GIL switch interval ------------------------------------------
def _rows_after(cycles=300):
    loop = make_loop()
    tel = Telemetry(capacity=1024, endpoint="tcp://127.0.0.1:0").attach(loop)
    for k in range(cycles):
        loop.step(k * loop.period)
    rows, first = tel._take()
    return loop, tel, rows, first


def test_json_rows_equal_the_reference_encoders_value_for_value():
    _loop, tel, rows, first = _rows_after()
    layout = tel.layout
    pj = JsonRows(layout, tel.joints, [], style="plotjuggler").encode(rows)
    assert [json.loads(t) for t in pj] == plotjuggler_objects(layout, rows, tel.joints, [])
    batch = decode(TOPIC_SAMPLES, pack(envelope(seq=0, first=first, count=len(rows), dropped=0, sent=0.0,
                                                fields=layout.columns(rows))))
    samples = [json.loads(t) for t in JsonRows(layout, tel.joints, [], style="sample").encode(rows, first)]
    assert samples == list(rows_of(batch))  # same keys, same order of fields, ints stay ints, floats exact
    assert all(isinstance(s["cycle"], int) for s in samples)
    # decimated indices, non-finite values (JSON has none: null) and awkward names
    odd = Layout(1, 1)
    row = np.arange(odd.width, dtype=float)[None, :].repeat(2, axis=0)
    row[1, odd.slices["q"].start] = np.nan
    row[1, odd.slices["latency"].start] = np.inf
    texts = JsonRows(odd, ['j"0%d'], ["e\\%s"], style="sample").encode(row, 10, 5)
    a, b = (json.loads(t) for t in texts)
    assert a["index"] == 10 and b["index"] == 15 and a["extra"] == [float(odd.width - 1)]
    assert b["q"] == [None] and b["latency"] is None and b["cycle"] == 1
    flat = [json.loads(t) for t in JsonRows(odd, ['j"0%d'], ["e\\%s"]).encode(row)]
    assert flat[0]['q/j"0%d'] == float(odd.slices["q"].start) and flat[1]['q/j"0%d'] is None
    assert flat[0]["extra/e\\%s"] == float(odd.width - 1)




@pytest.mark.parametrize("form", ["array", "object"])
@pytest.mark.slow
def test_plotjuggler_stream_is_decimated_by_sample_index_and_exact(form):
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0",
                    plotjuggler_decimation=3, plotjuggler_format=form, meta_period=0.05).attach(loop).start()
    pj = zmq.Context.instance().socket(zmq.SUB)
    pj.setsockopt(zmq.LINGER, 0)
    pj.connect(tel.plotjuggler_endpoint)
    pj.setsockopt(zmq.SUBSCRIBE, b"")
    sub = subscriber(tel.endpoint)
    try:
        wait_meta(sub)
        time.sleep(0.3)  # PUB/SUB slow joiner on the PlotJuggler socket (it has no meta to wait for)
        spy = Spy(tel)
        loop.telemetry = spy
        loop.run(cycles=700)
        tel.close()
        got = []
        while pj.poll(500):
            message = json.loads(pj.recv())
            got += message if form == "array" else [message]
        batches = [m for topic, m in drain(sub) if topic == TOPIC_SAMPLES]
    finally:
        tel.close()
        pj.close(linger=0)
        sub.close(linger=0)
    assert [int(o["cycle"]) for o in got] == list(range(0, 700, 3))
    for o in got:
        e = spy.rows[int(o["cycle"])]
        assert o["timestamp"] == e["t"] and o["latency"] == e["latency"]
        assert [o[f"q/{j}"] for j in tel.joints] == e["q"].tolist()
    assert max(m["count"] for m in batches) <= CHUNK_ROWS  # a backlog is sent in bounded chunks


class _BrokenSink(PublisherSink):
    def __init__(self):
        self.closed = False

    def open(self, telemetry):
        pass

    def write(self, rows, first):
        raise RuntimeError("sink broke")

    def meta(self, meta):
        pass

    def event(self, event):
        pass

    def close(self):
        self.closed = True


@pytest.mark.slow
def test_a_failing_sink_is_dropped_and_reported_while_the_stream_goes_on():
    loop = make_loop()
    broken = _BrokenSink()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.05, sinks=[broken]).attach(loop).start()
    sub = subscriber(tel.endpoint)
    try:
        wait_meta(sub)
        loop.run(cycles=300)
        tel.close()
        msgs = drain(sub)
    finally:
        tel.close()
    rows = [r for topic, m in msgs if topic == TOPIC_SAMPLES for r in rows_of(m)]
    assert len(rows) == 300 and broken.closed and tel.sinks == []
    assert tel.sink_errors == ["_BrokenSink: RuntimeError: sink broke"]
    assert any(m["kind"] == "telemetry" and "sink broke" in m["detail"] for topic, m in msgs if topic == TOPIC_EVENT)


def test_switch_interval_is_lowered_while_running_and_restored():
    before = sys.getswitchinterval()
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", switch_interval=2e-4).attach(loop).start()
    try:
        assert sys.getswitchinterval() == pytest.approx(min(before, 2e-4))
    finally:
        tel.close()
    assert sys.getswitchinterval() == before
    with pytest.raises(ValueError, match="switch_interval"):
        Telemetry(switch_interval=1.0)
