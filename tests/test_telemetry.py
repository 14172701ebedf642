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
"""
import io
import threading
import time

import msgpack
import pytest

from rtctl.telemetry import EndpointError, SchemaVersionError, Telemetry, check_endpoint, decode
from rtctl.telemetry.schema import TOPIC_EVENT, TOPIC_SAMPLES, SchemaError, envelope, pack
from rtctl.telemetry.tools import echo, read_recording, record, replay, rows_of, stats, plot
from telemetry_helpers import Spy, assert_rows_equal, drain, make_loop, subscriber, wait_meta

TEL = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.05}


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


def _paced_run(stalled: bool, seconds: float = 2.0):
    loop = make_loop(loop={"pace": True, "disable_gc": True},
                     trajectory={"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7,
                                 "frequency": [0.5] * 7})
    # small ZeroMQ/TCP buffers so that a stalled subscriber overflows within the run
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", sndhwm=10, sndbuf=32768, meta_period=0.1).attach(loop).start()
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


def test_stalled_subscriber_does_not_disturb_the_loop_and_losses_are_counted():
    base1, tel1, _ = _paced_run(stalled=False)
    stall, tel2, lost = _paced_run(stalled=True)
    base2, _, _ = _paced_run(stalled=False)
    # The hand-off never loses a sample: the ring kept up; the stalled subscriber lost many (HWM drops).
    assert tel2.dropped == 0 and tel2.handed == stall.cycles == 2000
    assert lost > 500, lost
    # Timing: margins for a shared 2-core machine -- overruns within 1 % of the cycles (+5) of the
    # worse baseline; wake-up latency p99 within 1.5x + 300 us of the worse baseline.
    worst_over = max(base1.overruns, base2.overruns)
    assert stall.overruns <= worst_over + 0.01 * stall.cycles + 5, (base1.overruns, stall.overruns, base2.overruns)
    worst_p99 = max(base1.timing["latency"]["p99"], base2.timing["latency"]["p99"])
    assert stall.timing["latency"]["p99"] <= 1.5 * worst_p99 + 300.0, \
        (base1.timing["latency"], stall.timing["latency"], base2.timing["latency"])


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
    collected = [r for topic, m in drain(sub) if topic == TOPIC_SAMPLES for r in rows_of(m)]
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
