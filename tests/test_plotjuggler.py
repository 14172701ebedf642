"""The PlotJuggler stream as PlotJuggler reads it (rtctl.telemetry.plotjuggler).

* Round trip: a ZeroMQ SUB on the PlotJuggler endpoint of a run (the publisher process, the default array form)
  reads its messages as PlotJuggler's JSON parser does from 3.16 on -- a top-level array is a batch, each
  element a message of its own, its time its own ``timestamp`` member, each numeric member ``K`` the series
  ``/K`` -- and gets exactly the loop's samples: every one once, in order, with the loop's control time and
  values bit for bit, under the names the documentation gives (``/q/<joint>``, ...).
* The exact wire text of two fixed rows, in both forms and decimated; a non-finite value is null with each
  element's own ``nonfinite`` list.
* The per-sample form for PlotJuggler before 3.16 sends one object per sample, decimated by sample index.
* A form that does not exist is refused in one line naming the key and the choices.
"""
import json
import time

import numpy as np
import pytest
import zmq

from rtctl.config import ConfigError, validate
from rtctl.telemetry import Telemetry
from rtctl.telemetry.plotjuggler import PlotJugglerStream
from rtctl.telemetry.schema import JOINT_FIELDS, SCALAR_FIELDS, Layout
from telemetry_helpers import BASE, Spy, make_loop


def plotjuggler_points(message: bytes) -> list[tuple[float, dict]]:
    """What PlotJuggler 3.16+ (ZMQ Subscriber, JSON parser, topic filter empty, "use field as timestamp" with
    ``timestamp``) plots of one single-frame message: per parsed object, (time, {series name: value})."""
    decoded = json.loads(message)
    points = []
    for obj in decoded if isinstance(decoded, list) else [decoded]:
        assert isinstance(obj, dict)
        series = {}
        for key, value in obj.items():
            if isinstance(value, (int, float)):
                series["/" + key] = float(value)
            else:       # null (a gap) and the nonfinite list (strings): no point
                assert value is None or key == "nonfinite", (key, value)
        points.append((series["/timestamp"], series))
    return points


def receive(sock, idle_ms=500) -> list[bytes]:
    out = []
    while sock.poll(idle_ms):
        out.append(sock.recv())
    return out


def pj_subscriber(endpoint):
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    sock.connect(endpoint)
    sock.setsockopt(zmq.SUBSCRIBE, b"")   # PlotJuggler's empty topic filter
    return sock


def wait_for_stream(loop, sock, timeout=10.0):
    """Run the loop a cycle at a time until the subscriber gets a message (PUB/SUB slow joiner), then discard
    what those cycles sent."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        loop.run(cycles=1)
        if sock.poll(20):
            receive(sock, 300)
            return
    raise AssertionError("nothing on the PlotJuggler endpoint")


@pytest.mark.slow
def test_array_batches_decode_into_exactly_the_loop_s_samples():
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0",
                    process=True).attach(loop).start()
    sock = pj_subscriber(tel.plotjuggler_endpoint)
    try:
        wait_for_stream(loop, sock)
        spy = Spy(tel)
        loop.telemetry = spy
        loop.run(cycles=700)
        tel.close()
        messages = receive(sock)
    finally:
        tel.close()
        sock.close(linger=0)
    assert all(m.startswith(b"[{") for m in messages) and len(messages) < 700 / 2    # batches, not samples
    points = [p for m in messages for p in plotjuggler_points(m)]
    assert len(points) == 700
    names = {"/timestamp", *(f"/{f}" for f in SCALAR_FIELDS[1:])}
    names |= {f"/{f}/{j}" for f in JOINT_FIELDS for j in loop.controller.joint_names}
    assert "/q/joint1" in names
    for (time_, series), row in zip(points, spy.rows):
        assert set(series) == names
        assert time_ == row["t"] and series["/cycle"] == row["cycle"] and series["/latency"] == row["latency"]
        for field in JOINT_FIELDS:
            assert [series[f"/{field}/{j}"] for j in loop.controller.joint_names] == row[field].tolist(), field
    assert [t for t, _ in points] == sorted({t for t, _ in points})     # every sample once, in order


def fixed_rows():
    layout = Layout(1, 1)
    rows = np.array([[0.001, 1, 1.7e9, 0.001, 2.5e-5, 1e-4, 0, 0, 1, 0.25, -0.5, 0.3, 0.0, 1.5, 1.25, 0.05, 400, 40,
                      -7.5],
                     [0.002, 2, 1.7e9 + 0.001, 0.001, 3e-5, 1e-4, 0, 1, 1, np.nan, -0.5, 0.3, 0.0, np.inf, 1.25, 0.05,
                      400, 40, -7.5]])
    return layout, rows


FIRST = (b'{"timestamp":0.001,"cycle":1.0,"stamp":1700000000.0,"period":0.001,"latency":2.5e-05,"compute":0.0001,'
         b'"overruns":0.0,"tripped":0.0,"fresh":1.0,"q/j1":0.25,"qd/j1":-0.5,"q_d/j1":0.3,"qd_d/j1":0.0,'
         b'"effort_cmd/j1":1.5,"effort/j1":1.25,"error/j1":0.05,"kp/j1":400.0,"kd/j1":40.0,"extra/e":-7.5}')
SECOND = (b'{"timestamp":0.002,"cycle":2.0,"stamp":1700000000.001,"period":0.001,"latency":3e-05,"compute":0.0001,'
          b'"overruns":0.0,"tripped":1.0,"fresh":1.0,"q/j1":null,"qd/j1":-0.5,"q_d/j1":0.3,"qd_d/j1":0.0,'
          b'"effort_cmd/j1":null,"effort/j1":1.25,"error/j1":0.05,"kp/j1":400.0,"kd/j1":40.0,"extra/e":-7.5,'
          b'"nonfinite":[{"at":"/q~1j1","value":"NaN"},{"at":"/effort_cmd~1j1","value":"Infinity"}]}')


def test_the_exact_wire_text_of_two_fixed_rows_in_both_forms():
    layout, rows = fixed_rows()

    def messages(first=0, **options):
        stream = PlotJugglerStream(**options)
        stream.open(layout, ["j1"], ["e"])
        return stream.messages(rows, first)

    assert messages() == [b"[" + FIRST + b"," + SECOND + b"]"]
    assert messages(format="object") == [FIRST, SECOND]
    assert messages(first=7, decimation=2) == [b"[" + SECOND + b"]"]          # sample 8 of 7 and 8
    assert messages(first=7, decimation=2, format="object") == [SECOND]
    assert messages(first=9, decimation=3) == [b"[" + FIRST + b"]"] and messages(first=10, decimation=3) == []
    (t0, a), (t1, b) = plotjuggler_points(messages()[0])
    assert (t0, t1) == (0.001, 0.002) and a["/q/j1"] == 0.25 and "/q/j1" not in b and b["/extra/e"] == -7.5


@pytest.mark.slow
def test_the_per_sample_form_sends_one_object_per_sample_decimated_by_index():
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0", plotjuggler_decimation=3,
                    plotjuggler_format="object").attach(loop).start()
    sock = pj_subscriber(tel.plotjuggler_endpoint)
    try:
        wait_for_stream(loop, sock)
        start = loop.cycle
        spy = Spy(tel)
        loop.telemetry = spy
        loop.run(cycles=300)
        tel.close()
        messages = receive(sock)
    finally:
        tel.close()
        sock.close(linger=0)
    assert all(m.startswith(b"{") for m in messages)
    points = [p for m in messages for p in plotjuggler_points(m)]
    assert [int(s["/cycle"]) for _, s in points] == [c for c in range(start, start + 300) if c % 3 == 0]
    by_cycle = {row["cycle"]: row for row in spy.rows}
    assert all(t == by_cycle[int(s["/cycle"])]["t"] for t, s in points)


def test_a_format_that_does_not_exist_is_refused_in_one_line():
    with pytest.raises(ValueError, match="plotjuggler_format must be one of array, object, got 'arrays'"):
        PlotJugglerStream(format="arrays")
    with pytest.raises(ValueError, match="plotjuggler_decimation must be an integer >= 1"):
        Telemetry(plotjuggler_endpoint="tcp://127.0.0.1:0", plotjuggler_decimation=0)
    raw = {**BASE, "telemetry": {"enabled": True, "plotjuggler": True, "plotjuggler_format": "arrays"}}
    with pytest.raises(ConfigError) as err:
        validate(raw)
    assert "plotjuggler_format" in str(err.value) and "\n" not in str(err.value)
