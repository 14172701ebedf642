"""Who may connect to the live Foxglove server (``rtctl.telemetry.foxglove``): a websocket from a foreign
``Origin`` (``null`` included) gets ``403``, as does a ``Host`` that is not the bound address (DNS rebinding);
a client without the ``foxglove.websocket.v1`` subprotocol gets ``400``, one beyond ``max_clients`` ``503``;
loopback names are accepted, two ``Host`` headers are not (RFC 6455 section 4.1; RFC 9110 section 7.2).
The stream itself, and the server's robustness: ``tests/test_foxglove.py``."""
import asyncio
import json
import socket
import struct

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from rtctl.telemetry import Telemetry
from rtctl.config import CORE_SCHEMA
from rtctl.telemetry.foxglove import (DEFAULT_ALLOWED_ORIGINS, FOXGLOVE_WEB_APP, LOCAL_PAGES, SUBPROTOCOL,
                                      FoxgloveSink, check_origins)
from rtctl.telemetry.schema import CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES
from telemetry_helpers import make_loop
from test_foxglove import handshake, run


@pytest.fixture
def server():
    """A Foxglove sink served by a started (not running) loop's publisher: (sink, url)."""
    sinks = []

    def start(**kwargs):
        sink = FoxgloveSink(port=0, **kwargs)
        tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.2, sinks=[sink]).attach(make_loop()).start()
        sinks.append((sink, tel))
        return sink

    yield start
    for sink, tel in sinks:
        thread = sink._thread
        tel.close()
        assert not thread.is_alive() and sink._thread is None and sink.clients == 0


def raw_upgrade(port, hosts, origin=None, protocol=SUBPROTOCOL):
    """Send a websocket upgrade by hand (any Host headers); return (status, headers text, body)."""
    lines = ["GET / HTTP/1.1", *(f"Host: {h}" for h in hosts), "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    if origin:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])

        def need(n):
            nonlocal body
            while len(body) < n:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                body += chunk

        if status != 101:
            need(int(next((line.split(b":", 1)[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), b"0")))
            return status, head.decode("latin-1"), body.decode()
        need(2)  # upgraded: the body is the first websocket frame (a text frame from the server: unmasked)
        assert body[0] == 0x81, body[:2]
        size, start = body[1], 2
        if size == 126:
            need(4)
            size, start = struct.unpack_from(">H", body, 2)[0], 4
        elif size == 127:
            need(10)
            size, start = struct.unpack_from(">Q", body, 2)[0], 10
        need(start + size)
    return status, head.decode("latin-1"), body[start:start + size].decode()


@pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example", "null",
                                    "https://app.foxglove.dev.evil.example", "http://app.foxglove.dev"])
def test_a_websocket_from_a_foreign_origin_is_refused(server, origin):
    sink = server()

    async def attempt():
        await connect(sink.url, subprotocols=[SUBPROTOCOL], origin=origin)

    with pytest.raises(InvalidStatus) as refused:
        run(attempt())
    response = refused.value.response
    assert response.status_code == 403
    assert b"Origin" in response.body and origin.encode() in response.body
    assert sink.clients == 0 and sink.refused >= 1


@pytest.mark.parametrize("origin", [None, "https://app.foxglove.dev", "HTTPS://APP.FOXGLOVE.DEV"])
def test_clients_without_origin_and_the_foxglove_web_app_connect(server, origin):
    sink = server()

    async def session():
        ws, info, channels = await handshake(sink.url, origin=origin)
        await ws.close()
        return info, channels

    info, channels = run(session())
    assert info["op"] == "serverInfo" and {CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT} <= set(channels)


def test_a_local_html_file_cannot_read_the_stream_unless_file_pages_are_allowed_on_purpose(server):
    """The attack: an HTML file the operator opens (a download, an attachment) in a browser that sends
    ``Origin: file://`` for it opens the live stream. Refused by default; ``file://`` is an explicit opt-in."""
    sink = server()
    status, _, body = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}"], origin="file://")
    assert status == 403 and body == ("refused: websocket Origin 'file://' is not an allowed origin "
                                      "(https://app.foxglove.dev; foxglove_allowed_origins)\n"), body
    assert sink.clients == 0
    opted_in = server(allowed_origins=[FOXGLOVE_WEB_APP, LOCAL_PAGES])
    status, _, _ = raw_upgrade(opted_in.port, [f"127.0.0.1:{opted_in.port}"], origin="file://")
    assert status == 101


def test_allowed_origins_are_configurable_and_never_null_or_any():
    sink = FoxgloveSink(port=0, allowed_origins=["http://localhost:8080/", " HTTPS://Example.org "])
    assert sink.allowed_origins == {"http://localhost:8080", "https://example.org"}
    assert FoxgloveSink(port=0).allowed_origins == set(DEFAULT_ALLOWED_ORIGINS) == {FOXGLOVE_WEB_APP}
    assert CORE_SCHEMA["telemetry"]["foxglove_allowed_origins"].default == list(DEFAULT_ALLOWED_ORIGINS)
    assert check_origins([]) == frozenset()
    for bad in (["null"], ["*"], ["evil.example"], ["https://a.example/page"], ["https://"], "https://a.example",
                [7]):
        with pytest.raises(ValueError):
            FoxgloveSink(port=0, allowed_origins=bad)


def test_no_browser_origin_when_the_list_is_empty(server):
    sink = server(allowed_origins=[])
    status, _, body = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}"], origin="https://app.foxglove.dev")
    assert status == 403 and "foxglove_allowed_origins is empty" in body
    status, _, _ = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}"])  # a non-browser client still may
    assert status == 101


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1:1", "127.0.0.2:{port}",
                                  "localhost.evil.example:{port}"])
def test_an_upgrade_with_another_host_header_is_refused(server, host):
    sink = server()
    status, _, body = raw_upgrade(sink.port, [host.format(port=sink.port)])
    assert status == 403 and "Host" in body and "DNS-rebinding" in body
    status, _, body = raw_upgrade(sink.port, [host.format(port=sink.port)], origin="https://app.foxglove.dev")
    assert status == 403 and "Host" in body


def test_loopback_names_are_accepted_and_two_host_headers_are_refused(server):
    sink = server()
    for name in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]"):
        status, head, first = raw_upgrade(sink.port, [f"{name}:{sink.port}"])
        assert status == 101, (name, head)
        assert f"sec-websocket-protocol: {SUBPROTOCOL}" in head.lower()
        assert json.loads(first)["op"] == "serverInfo"  # the first frame after the upgrade
    status, _, body = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}", "evil.example"])
    assert status == 403 and "one Host header" in body


def test_a_client_without_the_subprotocol_is_refused(server):
    sink = server()
    status, _, body = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}"], protocol=None)
    assert status == 400 and "subprotocol" in body
    status, _, body = raw_upgrade(sink.port, [f"127.0.0.1:{sink.port}"], protocol="foxglove.sdk.v1")
    assert status == 400 and "subprotocol" in body


def test_clients_beyond_max_clients_are_refused(server):
    sink = server(max_clients=2)

    async def session():
        first, _, _ = await handshake(sink.url)
        second, _, _ = await handshake(sink.url)
        with pytest.raises(InvalidStatus) as refused:
            await handshake(sink.url)
        status = refused.value.response.status_code
        await first.close()
        while sink.clients > 1:  # the server saw the close
            await asyncio.sleep(0.01)
        third, _, _ = await handshake(sink.url)
        await second.close()
        await third.close()
        return status

    assert run(session()) == 503
