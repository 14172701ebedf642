"""``rtctl-hil can-bus`` serves nothing but its bus, to programs on this machine (issue: the control PC is shared).

Each test is an attack from another user of the machine (uid 65534, ``nobody``) on the bus server the
operator (root) started: a request path that climbs out of python-can-remote's web folder to the operator's
0600 control token, and a web page (DNS-rebound, or of another site) opening the bus's websocket to put
frames on it. A program of the operator's on the same bus must see none of the attacker's frames.
"""
from __future__ import annotations

import socket

import can
import pytest
from can_remote.client import RemoteClientProtocol
from can_remote.websocket import WebSocket

from other_user import as_other_user
from rtctl.drivers.can.bus import shutdown_bus
from rtctl.hil.cli import CanBusServer

ENTER_MOTOR_MODE = bytes.fromhex("FFFFFFFFFFFFFFFC")   # MIT mini-cheetah firmware: enable motor 1


@pytest.fixture
def bus_server():
    with CanBusServer() as server:        # the server rtctl-hil can-bus runs, as the operator (root)
        yield server.url, server.port


def raw_get(port: int, target: str, headers: dict) -> tuple[int, bytes]:
    """``curl --path-as-is``: one GET with ``target`` sent exactly as given; (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close"]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data and (chunk := s.recv(65536)):
            data += chunk
        status = int(data.split(b" ", 2)[1])
        while status != 101 and (chunk := s.recv(65536)):    # a refusal closes the connection after its body
            data += chunk
    return status, data.partition(b"\r\n\r\n")[2]


def steal_token(port: int, token_path: str) -> tuple:
    """As another user: the token file itself is unreadable; then ask the bus server for it."""
    try:
        open(token_path).close()
        readable = True
    except PermissionError:
        readable = False
    climb = "/.." * 12 + token_path
    return readable, raw_get(port, climb, {"Host": f"127.0.0.1:{port}"}), \
        raw_get(port, "/", {"Host": f"127.0.0.1:{port}"})


def test_a_request_path_climbing_out_of_the_web_folder_gets_no_file(bus_server, tmp_path):
    _, port = bus_server
    home = tmp_path / "home"
    (home / ".config" / "rtctl").mkdir(parents=True, mode=0o700)
    token = home / ".config" / "rtctl" / "control.token"
    token.write_text("operator-secret-token-0123456789\n")
    token.chmod(0o600)
    readable, (status, body), (index_status, index_body) = as_other_user(steal_token, port, str(token))
    assert not readable                                          # the file is the operator's alone
    assert status == 404 and b"operator-secret" not in body, (status, body[:200])
    assert index_status == 404 and b"<html" not in index_body.lower()   # python-can-remote's page is not served
    assert body.strip() == b"rtctl-hil can-bus serves only its CAN bus websocket (GET / with Upgrade: websocket)"


def web_page_sends(port: int, host: str, origin: str | None):
    """As another user, what a browser does for a page: a websocket upgrade with that page's Host and Origin;
    once on the bus, the page sends 'enter motor mode' to motor 1. Returns the upgrade's status."""
    headers = {"Host": host, **({"Origin": origin} if origin else {})}
    status, _ = raw_get(port, "/", {**headers, "Upgrade": "websocket", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                    "Sec-WebSocket-Version": "13"})
    if status != 101:
        return status
    ws = WebSocket(f"ws://127.0.0.1:{port}/", ["can.json.v1"], headers=headers)
    protocol = RemoteClientProtocol({}, ws)
    protocol.send_msg(can.Message(arbitration_id=1, data=ENTER_MOTOR_MODE, is_extended_id=False))
    ws.close()
    return status


@pytest.mark.parametrize("host, origin, refusal", [
    ("evil.example", "http://evil.example", b"Host 'evil.example' is not this CAN bus's address"),
    ("{loopback}", "http://evil.example", b"websocket Origin 'http://evil.example' is not allowed"),
    ("{loopback}", "null", b"websocket Origin 'null' is not allowed"),
], ids=["dns-rebound-page", "another-sites-page", "sandboxed-frame"])
@pytest.mark.slow
def test_a_web_page_cannot_put_frames_on_the_bus(bus_server, host, origin, refusal):
    url, port = bus_server
    host = host.format(loopback=f"127.0.0.1:{port}")
    operator = can.Bus(interface="remote", channel=url)
    try:
        assert as_other_user(web_page_sends, port, host, origin) == 403
        status, body = raw_get(port, "/", {"Host": host, "Origin": origin, "Upgrade": "websocket",
                                           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                           "Sec-WebSocket-Version": "13"})
        assert status == 403 and refusal in body, body
        assert operator.recv(0.5) is None                      # nothing reached the operator's program
        assert as_other_user(web_page_sends, port, f"127.0.0.1:{port}", None) == 101   # a local program may
        got = operator.recv(5.0)
        assert got is not None and bytes(got.data) == ENTER_MOTOR_MODE
    finally:
        shutdown_bus(operator)
