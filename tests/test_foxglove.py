"""The live Foxglove server (``rtctl.telemetry.foxglove``) as a websocket surface.

A plain websocket client speaking the Foxglove WebSocket protocol (``foxglove.websocket.v1``)
checks, against a running loop: the handshake (subprotocol, ``serverInfo`` naming no capability
that takes data from a client), the channel advertisement (topics, encodings, and the very JSON
Schemas the MCAP recorder writes), and the data (binary ``messageData`` frames whose log time is
the sample's stamp and whose JSON equals, value for value, the sample the ZeroMQ stream carries).
Also: loopback-only binding unless allowed (who else may connect: ``tests/test_foxglove_security.py``),
subscribe/unsubscribe and the ``status`` replies to
bad requests, the drop-oldest bounds of the hand-off and per-client queues, random and malformed
client input never ending the server (with the control channel's e-stop working right after),
and the process's memory staying bounded at 1 kHz with no client and with a subscribed client
that never reads. Only the ``websockets`` package is needed: nothing here is skipped.
"""
import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from rtctl.operator import request
from rtctl.telemetry import Telemetry
from rtctl.operator.auth import TOKEN_ENV
from rtctl.telemetry.foxglove import (CHANNEL_JOINTS, CHANNEL_SCENE, CHANNEL_TF, SAMPLES_ID, SUBPROTOCOL, FoxgloveSink,
                                      _Client, check_host)
from rtctl.telemetry.schema import (CHANNEL_DESCRIPTION, CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES, meta_json_schema,
                                    SAMPLE_SCHEMA_NAME, TOPIC_SAMPLES, sample_json_schema)
from rtctl.telemetry.jsonvalues import NONFINITE
from rtctl.telemetry.tools import rows_of
from telemetry_helpers import collect, make_loop, run_in_background, subscriber, wait_meta

SINUSOID = {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7, "frequency": [1.0] * 7}
TOKEN = "foxglove-test-token-0123456789"


def run(coro, timeout=30.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def message_data(frame: bytes):
    """A binary ``messageData`` frame -> (subscription id, log time ns, payload)."""
    assert frame[0] == 0x01, frame[:1]
    sub_id, log_time = struct.unpack_from("<IQ", frame, 1)
    return sub_id, log_time, frame[13:]


async def handshake(url, origin=None):
    """Connect; return (ws, serverInfo, {topic: channel}) once every rtctl channel is advertised."""
    ws = await connect(url, subprotocols=[SUBPROTOCOL], max_size=None, origin=origin)
    assert ws.subprotocol == SUBPROTOCOL
    info = json.loads(await asyncio.wait_for(ws.recv(), 5))
    channels = {}
    while not {CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT} <= set(channels):
        msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
        if msg.get("op") == "advertise":
            channels.update({c["topic"]: c for c in msg["channels"]})
    return ws, info, channels


def start_loop_with_foxglove(seconds=30.0, **loop_sections):
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID, **loop_sections)
    sink = FoxgloveSink(port=0)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.2, sinks=[sink]).attach(loop).start()
    runner = run_in_background(loop, seconds)
    return loop, tel, sink, runner


def stop(loop, tel, runner):
    loop.request_stop()
    runner.join(10)
    tel.close()


@pytest.mark.slow
def test_handshake_advertisement_and_data_equal_the_zeromq_stream():
    loop, tel, sink, runner = start_loop_with_foxglove()
    sub = subscriber(tel.endpoint)
    try:
        assert sink.url == f"ws://127.0.0.1:{sink.port}"
        wait_meta(sub)

        async def session():
            ws, info, channels = await handshake(sink.url)
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 11, "channelId": channels[CHANNEL_SAMPLES]["id"]},
                {"id": 12, "channelId": channels[CHANNEL_META]["id"]}]}))
            samples, metas = [], []
            deadline = time.monotonic() + 15
            while (len(samples) < 300 or not metas) and time.monotonic() < deadline:
                frame = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(frame, bytes):
                    sub_id, log_time, payload = message_data(frame)
                    (samples if sub_id == 11 else metas).append((sub_id, log_time, json.loads(payload)))
            await ws.close()
            return info, channels, samples, metas

        info, channels, samples, metas = run(session())
        zmq_rows = {r["index"]: r for topic, m in collect(sub, 1.0) if topic == TOPIC_SAMPLES for r in rows_of(m)}
    finally:
        stop(loop, tel, runner)
        sub.close(linger=0)

    assert info["op"] == "serverInfo" and info["name"] == "rtctl"
    assert info["capabilities"] == []  # nothing a client could send data or commands through
    assert isinstance(info["sessionId"], str) and info["sessionId"]
    assert isinstance(info["metadata"], dict) and all(isinstance(v, str) for v in info["metadata"].values())
    assert [c["id"] for c in channels.values()] == sorted({c["id"] for c in channels.values()})  # distinct ids
    for topic in (CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT):
        assert channels[topic]["encoding"] == "json" and channels[topic]["schemaEncoding"] == "jsonschema"
    assert channels[CHANNEL_SAMPLES]["schemaName"] == SAMPLE_SCHEMA_NAME
    assert channels[CHANNEL_SAMPLES]["schema"] == sample_json_schema().decode()
    assert channels[CHANNEL_META]["schema"] == meta_json_schema().decode()
    schema_props = json.loads(channels[CHANNEL_SAMPLES]["schema"])["properties"]

    assert len(samples) >= 300 and metas
    indices = [m["index"] for _, _, m in samples]
    assert indices == sorted(set(indices))  # in order, no duplicates
    for sub_id, log_time, msg in samples:
        assert set(msg) == set(schema_props) - {"extra", NONFINITE}   # finite samples: no 'nonfinite' list
        assert len(msg["q"]) == 7 and isinstance(msg["cycle"], int) and isinstance(msg["tripped"], int)
        assert log_time == int(msg["stamp"] * 1e9)
    common = [m for _, _, m in samples if m["index"] in zmq_rows]
    assert len(common) >= 100, (len(common), len(zmq_rows))
    for msg in common:
        assert msg == zmq_rows[msg["index"]]  # every value, bit for bit (shortest float repr reads back exact)
    meta = metas[-1][2]
    assert meta["joints"] == list(loop.controller.joint_names) and meta["version"] == 1
    assert sink.sent >= len(samples)


@pytest.mark.slow
def test_the_server_in_the_publisher_process_that_rtctl_run_uses_by_default():
    """``rtctl run`` publishes from a process of its own (``[telemetry] publisher = "process"``, the default);
    the Foxglove server then runs in that process: same handshake, advertisement and data frames."""
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID,
                     telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.2,
                                "foxglove": True, "foxglove_port": 0})
    tel = loop.telemetry
    sink = tel.sinks[0]
    assert tel.process and tel._relay.poll() is None                  # the default: a publisher process
    assert sink.url == f"ws://127.0.0.1:{sink.port}" and sink.port > 0  # bound there, reported back
    assert not any(t.name == "rtctl-foxglove" for t in threading.enumerate())  # no server in this process
    runner = run_in_background(loop, 30.0)
    try:
        async def session():
            ws, info, channels = await handshake(sink.url)
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 21, "channelId": channels[CHANNEL_SAMPLES]["id"]}]}))
            frames = []
            while len(frames) < 100:
                frame = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(frame, bytes):
                    frames.append(message_data(frame))
            await ws.close()
            return info, channels, frames

        info, channels, frames = run(session())
    finally:
        stop(loop, tel, runner)
    assert info["op"] == "serverInfo" and info["name"] == "rtctl" and info["capabilities"] == []
    assert set(channels) == {CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT, CHANNEL_TF, CHANNEL_SCENE, CHANNEL_JOINTS,
                             CHANNEL_DESCRIPTION}
    assert channels[CHANNEL_SAMPLES]["schemaName"] == SAMPLE_SCHEMA_NAME
    assert channels[CHANNEL_SAMPLES]["schema"] == sample_json_schema().decode()
    samples = [json.loads(payload) for _, _, payload in frames]
    assert {sub_id for sub_id, _, _ in frames} == {21}
    indices = [m["index"] for m in samples]
    assert indices == sorted(set(indices)) and indices[-1] - indices[0] == len(indices) - 1  # consecutive
    for (_, log_time, _), msg in zip(frames, samples):
        assert log_time == int(msg["stamp"] * 1e9) and len(msg["q"]) == 7
    assert sink.sent >= len(frames)                        # the process's counters come back on close


def test_decimated_samples_are_every_kth_index():
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID)
    sink = FoxgloveSink(port=0, decimation=4)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[sink]).attach(loop).start()
    runner = run_in_background(loop, 30)
    try:
        async def session():
            ws, _, channels = await handshake(sink.url)
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 1, "channelId": channels[CHANNEL_SAMPLES]["id"]}]}))
            got = []
            while len(got) < 100:
                frame = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(frame, bytes):
                    got.append(json.loads(message_data(frame)[2])["index"])
            await ws.close()
            return got

        indices = run(session())
    finally:
        stop(loop, tel, runner)
    assert all(i % 4 == 0 for i in indices) and indices == sorted(set(indices))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "", "*"])
def test_wildcard_hosts_are_refused_even_when_remote_is_allowed(host):
    with pytest.raises(ValueError, match="every address"):
        check_host(host, allow_remote=True)


def test_a_host_beyond_loopback_needs_allow_remote():
    with pytest.raises(ValueError, match="allow_remote"):
        FoxgloveSink(host="192.0.2.10")
    assert check_host("192.0.2.10", allow_remote=True) == "192.0.2.10"
    assert check_host("localhost") == "127.0.0.1" and check_host("::1") == "::1"


def test_a_port_in_use_is_a_clear_start_error():
    loop = make_loop()
    first = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[FoxgloveSink(port=0)]).attach(loop).start()
    try:
        port = first.sinks[0].port
        second = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[FoxgloveSink(port=port)]).attach(make_loop())
        with pytest.raises(RuntimeError, match="cannot bind.*(in use|bind)"):
            second.start()
    finally:
        first.close()


@pytest.mark.slow
def test_wiring_builds_the_sink_from_the_telemetry_section(capsys):
    from rtctl.operator.wiring import close, describe, wire

    loop = make_loop()
    tel_cfg = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "plotjuggler": False,
               "plotjuggler_endpoint": "tcp://127.0.0.1:0", "plotjuggler_decimation": 1, "capacity": 4096,
               "batch_period": 0.01, "meta_period": 1.0, "sndhwm": 1000, "allow_remote": False,
               "plotjuggler_format": "array", "foxglove": True, "foxglove_host": "127.0.0.1", "foxglove_port": 0,
               "foxglove_decimation": 2}
    telemetry, _control = wire(loop, tel_cfg, {"enabled": False})
    try:
        sink = telemetry.sinks[0]
        assert isinstance(sink, FoxgloveSink) and sink.decimation == 2 and sink.port > 0
        describe(loop)
        assert f"Foxglove on ws://127.0.0.1:{sink.port}" in capsys.readouterr().out
    finally:
        close(loop)
    with pytest.raises(ValueError, match="allow_remote"):
        wire(make_loop(), {**tel_cfg, "foxglove_host": "192.0.2.10"}, {"enabled": False})


# -- who may connect ---------------------------------------------------------------------------------------
def test_closing_the_telemetry_closes_clients_with_going_away_and_ends_the_server_thread():
    sink = FoxgloveSink(port=0)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[sink]).attach(make_loop()).start()
    thread = sink._thread

    async def session():
        ws, _, channels = await handshake(sink.url)
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": 1, "channelId": channels[CHANNEL_META]["id"]}]}))
        while sink.clients == 0 or not sink._subscribers[channels[CHANNEL_META]["id"]]:
            await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, tel.close)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await ws.recv()
        return closed.value.rcvd.code if closed.value.rcvd else None

    assert run(session()) == 1001
    assert not thread.is_alive() and sink.clients == 0
    with pytest.raises(OSError):  # the port is free again: nothing listens
        socket.create_connection(("127.0.0.1", sink.port), timeout=5).close()
    sink.write(np.zeros((3, tel.layout.width)), 0)  # a late write after close: no error, nothing kept
    assert len(sink._inbox) == 0


# -- subscriptions and status replies ------------------------------------------------------------------------
def test_subscribe_errors_get_a_status_and_unsubscribe_stops_the_data():
    loop, tel, sink, runner = start_loop_with_foxglove()
    try:
        async def session():
            ws, _, channels = await handshake(sink.url)
            samples = channels[CHANNEL_SAMPLES]["id"]
            assert samples == SAMPLES_ID

            async def next_status():
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 5)
                    if isinstance(frame, str):
                        return json.loads(frame)
                    seen.append(message_data(frame)[0])

            seen = []
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 3, "channelId": samples}, {"id": 4, "channelId": 999}]}))
            status = await next_status()
            assert status["op"] == "status" and status["level"] == 2 and "999" in status["message"]
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 3, "channelId": samples}]}))
            assert "already in use" in (await next_status())["message"]
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 9, "channelId": samples}]}))
            assert "already subscribed" in (await next_status())["message"]
            while len(seen) < 5:
                frame = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(frame, bytes):
                    seen.append(message_data(frame)[0])
            assert set(seen) == {3}
            await ws.send(json.dumps({"op": "unsubscribe", "subscriptionIds": [3]}))
            await ws.send(json.dumps({"op": "unsubscribe", "subscriptionIds": [3]}))
            assert "no subscription with id 3" in (await next_status())["message"]
            seen.clear()
            await ws.send(json.dumps({"op": "setParameters", "parameters": []}))
            assert "unsupported op" in (await next_status())["message"]
            assert seen == []  # nothing for subscription 3 was queued once it was unsubscribed
            subscribers = sink._subscribers[SAMPLES_ID]
            await ws.send(b"\x02\x00\x00\x00\x00")  # client message data: no clientPublish capability
            assert "binary" in (await next_status())["message"]
            await ws.close()
            return subscribers

        assert run(session()) == 0
    finally:
        stop(loop, tel, runner)


def test_queues_are_bounded_and_drop_the_oldest():
    sink = FoxgloveSink(port=0, backlog=4)
    client = _Client(None, sink.backlog)
    for i in range(10):
        sink._offer(client, bytes([i]))
    assert list(client.queue) == [bytes([i]) for i in range(6, 10)] and sink.dropped == 6
    sink._wake_pending = True  # no server thread here: only the hand-off queue
    for i in range(10):
        sink._post(SAMPLES_ID, [i], [bytes([i])])
    sink._post(SAMPLES_ID, [10, 11], [b"a", b"b"])
    assert [m[1] for m in sink._inbox] == [8, 9, 10, 11] and sink.inbox_dropped == 8


# -- fuzzing the server's input, then the e-stop ------------------------------------------------------
def _fuzz_messages(rng, n, channel_ids):
    ops = ["subscribe", "unsubscribe", "advertise", "unadvertise", "publish", "getParameters", "setParameters",
           "subscribeParameterUpdates", "callService", "fetchAsset", "subscribeConnectionGraph", "playbackControl",
           "", None, 7]
    ids = [*channel_ids, 0, -1, 2 ** 32, 2 ** 64, 1e308, "1", None]
    for _ in range(n):
        kind = rng.randrange(7)
        if kind == 0:
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))  # random binary
        elif kind == 1:
            yield bytes([rng.choice([1, 2, 3, 4, 255])]) + bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        elif kind == 2:
            yield "".join(rng.choice('{}[]":,0123456789abcopsubscribe ') for _ in range(rng.randrange(1, 80)))
        elif kind == 3:
            yield json.dumps({"op": rng.choice(ops), rng.choice(["subscriptions", "subscriptionIds", "channels",
                                                                 "x"]): rng.choice([[], {}, 1, "a", None])})
        elif kind == 4:
            subs = [{"id": rng.choice(ids), "channelId": rng.choice(ids)} for _ in range(rng.randrange(0, 20))]
            yield json.dumps({"op": "subscribe", "subscriptions": subs})
        elif kind == 5:
            yield json.dumps({"op": "unsubscribe", "subscriptionIds": [rng.choice(ids) for _ in range(5)]})
        else:
            yield "[" * rng.randrange(1, 3000) + "]" * rng.randrange(0, 10)  # deep nesting


@pytest.mark.slow
def test_fuzzed_client_input_never_ends_the_server_and_the_estop_still_works(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    loop, tel, sink, runner = start_loop_with_foxglove(
        seconds=60.0, control={"enabled": True, "endpoint": "tcp://127.0.0.1:0"})
    rng = random.Random(20260520)
    try:
        async def fuzz():
            ws, _, channels = await handshake(sink.url)
            ids = [c["id"] for c in channels.values()]
            messages = list(_fuzz_messages(rng, 300, ids))
            sent = closed = 0
            deadline = time.monotonic() + 20
            for message in messages:
                if time.monotonic() > deadline:
                    break
                if ws is None:
                    ws, _, _ = await handshake(sink.url)
                try:
                    await ws.send(message)
                    sent += 1
                    try:  # drain whatever the server answers (status messages, data), briefly
                        while True:
                            await asyncio.wait_for(ws.recv(), 0.002)
                    except asyncio.TimeoutError:
                        pass
                except ConnectionClosed:
                    closed += 1
                    ws = None
            if ws is not None:
                await ws.close()
            return sent, closed

        sent, closed = run(fuzz(), timeout=60)
        assert sent >= 200, (sent, closed)
        assert runner.is_alive() and not loop.safety.tripped

        async def still_serves():  # a fresh client gets the handshake and live data after the fuzz
            ws, info, channels = await handshake(sink.url)
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 5, "channelId": channels[CHANNEL_SAMPLES]["id"]}]}))
            while True:
                frame = await asyncio.wait_for(ws.recv(), 5)
                if isinstance(frame, bytes):
                    await ws.close()
                    return info, json.loads(message_data(frame)[2])

        info, first = run(still_serves())
        assert info["op"] == "serverInfo" and first["cycle"] > 0

        reply = request(loop.control.endpoint, {"cmd": "estop", "reason": "after the foxglove fuzz"}, timeout=5.0)
        assert reply["ok"] is True, reply
        end = time.monotonic() + 5
        while not loop.safety.tripped and time.monotonic() < end:
            time.sleep(0.01)
        assert loop.safety.tripped and "after the foxglove fuzz" in loop.safety.trip_reason
    finally:
        stop(loop, tel, runner)
        loop.control.close()


# -- memory -------------------------------------------------------------------------------------------------
MEMORY_PROCESS = textwrap.dedent("""
    import json, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from telemetry_helpers import make_loop
    from rtctl.telemetry import Telemetry
    from rtctl.telemetry.foxglove import FoxgloveSink
    SINUSOID = {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7, "frequency": [1.0] * 7}
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID)
    sink = FoxgloveSink(port=0, backlog=int(sys.argv[2]))
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.1, sinks=[sink]).attach(loop).start()
    threading.Thread(target=lambda: loop.run(duration=600.0), daemon=True).start()
    print(json.dumps({"port": sink.port}), flush=True)
    while True:
        time.sleep(0.5)
        print(json.dumps({"cycles": loop.cycle, "sent": sink.sent, "dropped": tel.dropped,
                          "client_dropped": sink.dropped, "inbox_dropped": sink.inbox_dropped}), flush=True)
""")


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc to read a process's RSS")
def test_memory_stays_bounded_at_1khz_with_no_client_and_with_a_stalled_client():
    """10 s with no client, then 10 s with a client subscribed to everything that never reads: the loop
    process's RSS grows less than 8 MiB after a 3 s warm-up (the client's queue keeps at most 256 messages,
    ~0.4 MB, plus the socket's write buffer)."""
    warm_up_s, phase_s = 3.0, 10.0
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([sys.executable, "-c", MEMORY_PROCESS, here, "256"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    latest = {}
    port_line = proc.stdout.readline()
    assert port_line, proc.stderr.read()
    port = json.loads(port_line)["port"]

    def read_stats():
        for line in proc.stdout:
            latest.update(json.loads(line))

    threading.Thread(target=read_stats, daemon=True).start()
    stalled = {}

    async def stall(stop_event):  # subscribe to every channel, then never read again
        ws, _, channels = await handshake(f"ws://127.0.0.1:{port}")
        await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
            {"id": i, "channelId": c["id"]} for i, c in enumerate(channels.values())]}))
        ws.transport.pause_reading()
        stalled["connected"] = True
        while not stop_event.is_set():
            await asyncio.sleep(0.1)
        ws.transport.abort()

    stop_event = threading.Event()
    staller = None
    try:
        time.sleep(warm_up_s)
        series = [_rss_kib(proc.pid)]
        end = time.monotonic() + phase_s
        while time.monotonic() < end:
            time.sleep(1.0)
            series.append(_rss_kib(proc.pid))
        no_client_sent = latest.get("sent", 0)
        staller = threading.Thread(target=lambda: asyncio.run(stall(stop_event)), daemon=True)
        staller.start()
        end = time.monotonic() + phase_s
        while time.monotonic() < end:
            time.sleep(1.0)
            series.append(_rss_kib(proc.pid))
        print(f"loop process RSS (MiB): {[round(s / 1024, 1) for s in series]}; {latest}")
        assert proc.poll() is None and stalled.get("connected")
        assert no_client_sent == 0  # nothing encoded while nobody subscribed
        assert latest["cycles"] > 0.8 * 1000 * (warm_up_s + 2 * phase_s) and latest["dropped"] == 0, latest
        assert latest["sent"] > 1000  # the sink kept handing samples over for the stalled client
        assert max(series) - series[0] < 8 * 1024, series
    finally:
        stop_event.set()
        if staller is not None:
            staller.join(5)
        proc.kill()
        proc.wait(10)
