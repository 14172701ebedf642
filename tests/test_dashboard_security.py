"""The dashboard as a web server that hostile pages and clients can reach.

Asserts that a websocket upgrade from any origin but the dashboard's own is
refused (403), that any request whose Host header is not the bound address is
refused (DNS rebinding), that a same-origin client still receives frames, that
e-stop needs no token while re-arm proves the token the browser sent and never
sends it (the dashboard holds none), that malformed, oversized and random
messages get an error reply or close only their own connection, and that the
dashboard's memory stays bounded at 1 kHz telemetry with no browser connected.

The control endpoint is mostly a small REP server in this file that answers like
the control channel (``status`` and ``estop`` open, ``rearm`` needs the proof of
the token: the channel's own :class:`~rtctl.operator.handshake.Sessions`) and
records what the dashboard forwarded; one test runs the real control channel of
a paced loop.
"""
import asyncio
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import msgpack
import pytest
import zmq
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rtctl.operator.auth import TOKEN_ENV
from rtctl.operator.handshake import Sessions, server_identity
from rtctl.operator.requests import Refused
from rtctl.operator.dashboard import (MAX_COMMAND_BYTES, MAX_EVENTS, MAX_PENDING_BATCHES, Dashboard,
                                       wait_for)
from telemetry_helpers import make_loop

CONTROL_TOKEN = "dashboard-test-token-0123456789"
SINUSOID = {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7, "frequency": [1.0] * 7}


class FakeControl:
    """REP endpoint answering like the control channel; ``requests`` holds every decoded request."""

    def __init__(self):
        self.requests = []
        self._stop = threading.Event()
        self._sock = zmq.Context.instance().socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self._sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.sessions = Sessions(CONTROL_TOKEN, server_identity(self.endpoint), "fake-run")
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            if not self._sock.poll(50):
                continue
            request = msgpack.unpackb(self._sock.recv(), raw=False)
            self.requests.append(request)
            self._sock.send(msgpack.packb(self._answer(request), use_bin_type=True))

    def _answer(self, request):
        cmd = request.get("cmd")
        try:
            if cmd == "hello":
                return {"ok": True, **self.sessions.hello(request)}
            if cmd not in ("status", "estop"):
                self.sessions.check(cmd, request)
        except Refused as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "applied_cycle": 1}

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._sock.close(linger=0)


@pytest.fixture
def control():
    fake = FakeControl()
    yield fake
    fake.close()


@pytest.fixture
def dashboard(control):
    dash = Dashboard("tcp://127.0.0.1:1", control.endpoint, port=0)
    dash.start()
    yield dash
    dash.stop()


def own_origin(dash, name="127.0.0.1"):
    return f"http://{name}:{dash.port}"


def ws_url(dash):
    return f"ws://127.0.0.1:{dash.port}/ws"


def run(coro, timeout=20.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def next_reply(ws, timeout=5.0):
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if message["type"] == "reply":
            return message


async def command(dash, payload, origin=None):
    async with connect(ws_url(dash), origin=origin or own_origin(dash)) as ws:
        await ws.send(payload if isinstance(payload, (str, bytes)) else json.dumps(payload))
        return await next_reply(ws)


def http_get(port, path, host_header, extra_headers=()):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host_header)
        for name, value in extra_headers:
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        conn.close()


WEBSOCKET_UPGRADE = (("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
                     ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="))


# -- origin and host checks ---------------------------------------------------------------------------
@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1", "http://127.0.0.1:1", "null",
                                    "http://127.0.0.1.evil.example", None])
def test_websocket_from_another_origin_is_refused(dashboard, control, origin):
    async def attempt():
        headers = {} if origin is None else {"Origin": origin}
        async with connect(ws_url(dashboard), additional_headers=headers):
            pass

    with pytest.raises(InvalidStatus) as refused:
        run(attempt())
    response = refused.value.response
    assert response.status_code == 403
    assert b"Origin" in response.body, response.body
    assert not dashboard.clients and not control.requests


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_same_origin_websocket_is_accepted_under_each_loopback_name(dashboard, control, name):
    async def status():
        bound = socket.create_connection(("127.0.0.1", dashboard.port), timeout=5)
        async with connect(f"ws://{name}:{dashboard.port}/ws", origin=own_origin(dashboard, name), sock=bound) as ws:
            await ws.send(json.dumps({"cmd": "status"}))
            return await next_reply(ws)

    assert run(status())["ok"] is True
    assert control.requests == [{"cmd": "status"}]


@pytest.mark.parametrize("path", ["/", "/index.html", "/plot.js", "/dashboard.js", "/missing", "/ws"])
@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1:1", "127.0.0.1"])
@pytest.mark.slow
def test_http_with_another_host_header_is_refused(dashboard, path, host):
    headers = WEBSOCKET_UPGRADE + (("Origin", own_origin(dashboard)),) if path == "/ws" else ()
    status, body = http_get(dashboard.port, path, host.format(port=dashboard.port), headers)
    assert status == 403, body
    assert "Host" in body and "DNS-rebinding" in body, body


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
def test_page_is_served_under_its_own_host_header_and_cannot_be_framed(dashboard, name):
    conn = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=5)
    try:
        conn.putrequest("GET", "/", skip_host=True)
        conn.putheader("Host", f"{name}:{dashboard.port}")
        conn.endheaders()
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200
    assert 'id="token"' in body and 'type="password"' in body
    assert response.getheader("X-Frame-Options") == "DENY"
    assert "frame-ancestors 'none'" in response.getheader("Content-Security-Policy")


def test_two_host_headers_are_refused(dashboard):
    status, body = http_get(dashboard.port, "/", f"127.0.0.1:{dashboard.port}",
                            (("Host", f"evil.example:{dashboard.port}"),))
    assert status == 403 and "Host" in body, body


def test_wildcard_bind_is_refused():
    with pytest.raises(ValueError, match="DNS-rebinding"):
        Dashboard("tcp://127.0.0.1:1", host="0.0.0.0", allow_remote=True)


def test_clients_beyond_the_limit_are_refused(control):
    dash = Dashboard("tcp://127.0.0.1:1", control.endpoint, port=0, max_clients=2)
    dash.start()

    async def three_clients():
        async with connect(ws_url(dash), origin=own_origin(dash)), connect(ws_url(dash), origin=own_origin(dash)):
            assert await asyncio.to_thread(wait_for, lambda: len(dash.clients) == 2, 5)
            with pytest.raises(InvalidStatus) as refused:
                async with connect(ws_url(dash), origin=own_origin(dash)):
                    pass
            return refused.value.response.status_code

    try:
        assert run(three_clients()) == 503
        assert wait_for(lambda: not dash.clients, 5)
        assert run(command(dash, {"cmd": "status"}))["ok"] is True
    finally:
        dash.stop()


@pytest.mark.slow
def test_same_origin_websocket_receives_frames(control):
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID,
                     telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.2})
    dash = Dashboard(loop.telemetry.endpoint, control.endpoint, port=0)
    runner = threading.Thread(target=lambda: loop.run(duration=6.0), daemon=True)

    async def frames():
        got = {"meta": 0, "frame": 0, "samples": 0}
        async with connect(ws_url(dash), origin=own_origin(dash)) as ws:
            while got["frame"] < 10 or not got["meta"]:
                message = json.loads(await asyncio.wait_for(ws.recv(), 5))
                got[message["type"]] += 1
                if message["type"] == "frame":
                    assert len(message["t"]) <= dash.points
                    got["samples"] += len(message["t"])
                    assert message["bridge_drops"] == 0
        return got

    try:
        dash.start()
        runner.start()
        got = run(frames())
    finally:
        loop.request_stop()
        runner.join(10)
        dash.stop()
        loop.telemetry.close()
    assert got["meta"] >= 1 and got["frame"] >= 10 and got["samples"] > 50, got


# -- commands and the token -------------------------------------------------------------------------
def test_dashboard_holds_no_token():
    import inspect

    assert "token" not in inspect.signature(Dashboard).parameters
    assert not hasattr(Dashboard("tcp://127.0.0.1:1"), "token")


def test_dashboard_cli_takes_no_token_from_argv():
    import argparse

    from rtctl.operator.cli import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["dashboard", "--port", "0"]).command == "dashboard"
    with pytest.raises(SystemExit):
        parser.parse_args(["dashboard", "--token", "secret"])


def test_estop_from_the_page_needs_no_token(dashboard, control):
    reply = run(command(dashboard, {"cmd": "estop"}))
    assert reply["ok"] is True and reply["cmd"] == "estop"
    assert control.requests == [{"cmd": "estop", "reason": "dashboard e-stop button"}]


def test_estop_never_carries_a_token_so_a_mistyped_one_cannot_block_it(dashboard, control):
    reply = run(command(dashboard, {"cmd": "estop", "token": "mistyped"}))
    assert reply["ok"] is True
    assert control.requests == [{"cmd": "estop", "reason": "dashboard e-stop button"}]


def test_rearm_proves_the_token_the_browser_sent_and_never_sends_it(dashboard, control):
    without = run(command(dashboard, {"cmd": "rearm"}))
    assert without["ok"] is False and "needs the control token" in without["error"], without
    assert control.requests == []

    wrong = run(command(dashboard, {"cmd": "rearm", "token": "not-the-token"}))
    assert wrong["ok"] is False and "did not prove it holds the token" in wrong["error"], wrong
    assert [r["cmd"] for r in control.requests] == ["hello"]         # nothing proved to it

    right = run(command(dashboard, {"cmd": "rearm", "token": CONTROL_TOKEN}))
    assert right["ok"] is True and right["cmd"] == "rearm", right
    assert [r["cmd"] for r in control.requests] == ["hello", "hello", "rearm"]
    assert set(control.requests[-1]) == {"cmd", "session", "proof"}
    assert CONTROL_TOKEN not in json.dumps(control.requests) and "proof" not in right


@pytest.mark.slow
def test_real_control_channel_refuses_rearm_without_the_browser_token(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv(TOKEN_ENV, CONTROL_TOKEN)
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0}, trajectory=SINUSOID,
                     control={"enabled": True, "endpoint": "tcp://127.0.0.1:0"})
    token = getattr(loop.control, "token", None) or CONTROL_TOKEN
    dash = Dashboard("tcp://127.0.0.1:1", loop.control.endpoint, port=0)
    runner = threading.Thread(target=lambda: loop.run(duration=20.0), daemon=True)
    try:
        dash.start()
        runner.start()
        assert wait_for(lambda: loop.cycle > 0, 60)     # past the warm-up: a re-arm needs a cycle boundary
        estop = run(command(dash, {"cmd": "estop"}))
        assert estop["ok"] is True, estop
        assert wait_for(lambda: loop.safety.tripped, 5)
        without = run(command(dash, {"cmd": "rearm"}))
        assert without["ok"] is False and "token" in without["error"], without
        wrong = run(command(dash, {"cmd": "rearm", "token": "not-the-control-token"}))
        assert wrong["ok"] is False and "token" in wrong["error"], wrong
        assert loop.safety.tripped
        right = run(command(dash, {"cmd": "rearm", "token": token}))
        assert right["ok"] is True, right
    finally:
        loop.request_stop()
        runner.join(10)
        dash.stop()
        loop.control.close()


def test_rearm_from_a_foreign_origin_never_reaches_the_control_channel(dashboard, control):
    with pytest.raises(InvalidStatus):
        run(command(dashboard, {"cmd": "rearm", "token": CONTROL_TOKEN}, origin="http://evil.example"))
    assert control.requests == []


MALFORMED = [
    ("not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ("42", "JSON object"),
    ('"estop"', "JSON object"),
    ("[" * 2500 + "]" * 2500, "nested too deeply"),
    ('{"cmd": {"nested": [[[[{}]]]]}}', "unknown command"),
    ('{"cmd": "set_gains", "kp": 1}', "unknown command"),
    ('{"no": "cmd"}', "unknown command"),
    ('{"cmd": "estop", "reason": "from the page"}', "unknown field 'reason'"),
    ('{"cmd": "rearm", "token": 123}', "token"),
    ('{"cmd": "rearm", "token": "' + "x" * 4097 + '"}', "token"),
    (b"\x00\xffbinary", "not binary"),
]


def test_malformed_commands_get_an_error_and_the_connection_stays_up(dashboard, control):
    async def session():
        replies = []
        async with connect(ws_url(dashboard), origin=own_origin(dashboard)) as ws:
            for payload, _ in MALFORMED:
                await ws.send(payload)
                replies.append(await next_reply(ws))
            await ws.send(json.dumps({"cmd": "estop"}))
            replies.append(await next_reply(ws))
        return replies

    replies = run(session())
    for (payload, expected), reply in zip(MALFORMED, replies):
        assert reply["ok"] is False and expected in reply["error"], (payload[:40], reply)
    assert replies[-1]["ok"] is True and replies[-1]["cmd"] == "estop"
    assert control.requests == [{"cmd": "estop", "reason": "dashboard e-stop button"}]


def test_oversized_message_closes_only_its_own_connection(dashboard, control):
    async def oversized():
        async with connect(ws_url(dashboard), origin=own_origin(dashboard), max_size=None) as ws:
            await ws.send("x" * (MAX_COMMAND_BYTES + 1))
            with pytest.raises(ConnectionClosed) as closed:
                await next_reply(ws)
            return closed.value.rcvd.code if closed.value.rcvd else None

    assert run(oversized()) == 1009
    assert run(command(dashboard, {"cmd": "estop"}))["ok"] is True


def _fuzz_messages(rng, count):
    valid = ['{"cmd": "status"}', '{"cmd": "estop"}', '{"cmd": "rearm", "token": "guess"}']
    pieces = ['{', '}', '[', ']', '"cmd"', ':', ',', '"estop"', '"rearm"', '"token"', 'null', 'true', '1e999',
              '-0', '"\\ud800"', '"\\u0000"', '\u00e9', '\U0001f600', ' ']
    for k in range(count):
        kind = rng.randrange(6)
        if k % 50 == 49:
            yield "y" * (MAX_COMMAND_BYTES + rng.randrange(1, 10000))
        elif kind == 0:
            yield rng.randbytes(rng.randrange(0, 2048))
        elif kind == 1:
            yield "".join(chr(rng.randrange(1, 0xD7FF)) for _ in range(rng.randrange(0, 300)))
        elif kind == 2:
            yield "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
        elif kind == 3:
            text = list(rng.choice(valid))
            for _ in range(rng.randrange(1, 4)):
                text[rng.randrange(len(text))] = chr(rng.randrange(32, 127))
            yield "".join(text)
        elif kind == 4:
            depth = rng.randrange(10, 2400)
            yield rng.choice(["[" * depth + "]" * depth, '{"a":' * (depth // 6) + "1" + "}" * (depth // 6)])
        else:
            yield json.dumps({"cmd": rng.choice(["status", "estop", "rearm", "set_target", 7, None]),
                              rng.choice(["token", "reason", "x"]): rng.choice([1, "a", [], {}])})


def test_fuzzed_messages_do_not_kill_the_server(dashboard, control):
    rng = random.Random(20240611)
    messages = list(_fuzz_messages(rng, 400))
    oversized = sum(len(m) > MAX_COMMAND_BYTES for m in messages)

    async def fuzz():
        deadline = time.monotonic() + 10.0
        replies, closed, ws = [], 0, None
        for message in messages:
            if time.monotonic() > deadline:
                break
            if ws is None:
                ws = await connect(ws_url(dashboard), origin=own_origin(dashboard), max_size=None)
            try:
                await ws.send(message)
                replies.append(await next_reply(ws))
            except ConnectionClosed:
                closed += 1
                ws = None
        if ws is not None:
            await ws.close()
        return replies, closed

    started = time.monotonic()
    replies, closed = run(fuzz(), timeout=30)
    assert time.monotonic() - started < 15
    assert closed == oversized >= 8  # each oversized message closed its own connection, and only those did
    assert len(replies) == len(messages) - oversized
    assert not [r for r in replies if "internal error" in r.get("error", "")]
    open_commands_forwarded = [r for r in control.requests if r["cmd"] in ("status", "estop")]
    assert sum(r["ok"] for r in replies) == len(open_commands_forwarded)
    estop = run(command(dashboard, {"cmd": "estop"}))
    assert estop["ok"] is True
    assert control.requests[-1] == {"cmd": "estop", "reason": "dashboard e-stop button"}
    assert all("token" not in r for r in control.requests)
    assert http_get(dashboard.port, "/", f"127.0.0.1:{dashboard.port}")[0] == 200


# -- memory ---------------------------------------------------------------------------------------------
def test_buffers_waiting_for_a_browser_are_bounded_and_count_drops():
    dash = Dashboard("tcp://127.0.0.1:1")
    fields = {k: [0.0] for k in ("t", "latency", "tripped")}
    fields.update({k: [[0.0] * 7] for k in ("q", "q_d", "error", "effort_cmd", "qd", "effort", "kp", "kd")})
    for first in range(1000):
        dash._take_batch({"first": first, "count": 1, "fields": fields})
    assert len(dash._pending) == 0 and dash.samples == 1000  # nobody to show them to: not kept

    dash.clients[object()] = None  # a connected browser whose frames are not being sent (stalled pusher)
    for first in range(1000, 2000):
        dash._take_batch({"first": first, "count": 1, "fields": fields})
    assert len(dash._pending) == MAX_PENDING_BATCHES
    assert dash.pending_dropped == 1000 - MAX_PENDING_BATCHES
    assert set(dash._pending[0]) == {"t", "q", "q_d", "error", "effort_cmd", "latency"}

    for k in range(1000):
        dash._add_event({"kind": "safety", "detail": "d" * 5000, "cycle": k, "t": k * 1e-3})
    assert len(dash._events) == MAX_EVENTS and dash.events_dropped == 1000 - MAX_EVENTS
    assert dash._events[-1]["cycle"] == 999 and len(dash._events[-1]["detail"]) < 1100
    assert dash.bridge_drops == dash.pending_dropped + dash.events_dropped


DASHBOARD_PROCESS = """
import json, sys, time
from rtctl.operator.auth import TOKEN_ENV
from rtctl.operator.handshake import Sessions, server_identity
from rtctl.operator.requests import Refused
from rtctl.operator.dashboard import Dashboard
dash = Dashboard(sys.argv[1], port=0)
dash.start()
while True:
    print(json.dumps({"samples": dash.samples, "pending": len(dash._pending), "events": len(dash._events),
                      "events_dropped": dash.events_dropped}), flush=True)
    time.sleep(0.5)
"""


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc to read a process's RSS")
def test_memory_stays_bounded_at_1khz_with_no_browser():
    warm_up_s, window_s = 4.0, 30.0
    loop = make_loop(loop={"pace": True, "rate_hz": 1000.0}, trajectory=SINUSOID,
                     telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.5})
    runner = threading.Thread(target=lambda: loop.run(duration=60.0), daemon=True)
    events_stop = threading.Event()

    def publish_events():
        k = 0
        while not events_stop.wait(0.02):
            loop.telemetry.event("test", f"event {k} while no browser is connected", k, k * 0.02)
            k += 1

    eventer = threading.Thread(target=publish_events, daemon=True)
    runner.start()
    eventer.start()
    proc = subprocess.Popen([sys.executable, "-c", DASHBOARD_PROCESS, loop.telemetry.endpoint],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    latest = {}

    def read_stats():
        for line in proc.stdout:
            latest.update(json.loads(line))

    threading.Thread(target=read_stats, daemon=True).start()
    try:
        assert wait_for(lambda: latest.get("samples", 0) > 0, 15), proc.stderr.read() if proc.poll() else latest
        time.sleep(warm_up_s)
        rss_start, samples_start = _rss_kib(proc.pid), latest["samples"]
        rss_series = [rss_start]
        end = time.monotonic() + window_s
        while time.monotonic() < end:
            time.sleep(min(2.0, max(0.0, end - time.monotonic())))
            rss_series.append(_rss_kib(proc.pid))
        samples = latest["samples"] - samples_start
        growth_mib = (rss_series[-1] - rss_start) / 1024
        print(f"dashboard RSS with no browser at 1 kHz: {rss_start / 1024:.1f} MiB -> {rss_series[-1] / 1024:.1f} "
              f"MiB over {window_s:g} s ({growth_mib:+.2f} MiB, peak {max(rss_series) / 1024:.1f} MiB), "
              f"{samples} samples, {latest}")
        assert proc.poll() is None
        assert samples > 0.8 * 1000 * window_s, latest
        assert latest["pending"] == 0 and latest["events"] <= MAX_EVENTS and latest["events_dropped"] > 0, latest
        assert (max(rss_series) - rss_start) < 5 * 1024, rss_series
    finally:
        proc.kill()
        proc.wait(10)
        events_stop.set()
        loop.request_stop()
        runner.join(10)
        eventer.join(5)
        loop.telemetry.close()
