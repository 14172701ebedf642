"""The client side of the control channel: one request over a ZeroMQ REQ socket (what ``rtctl control`` sends).

With a token, client and server first prove to each other that they hold it (:mod:`.handshake`); the token
itself is never sent, and nothing is proved to an endpoint that did not prove itself first.
"""
from __future__ import annotations

import json

import msgpack
import zmq

from .handshake import ClientHandshake, ServerNotTrusted
from .requests import MAX_REPLY_BYTES, OPEN_COMMANDS

__all__ = ["ServerNotTrusted", "request"]


def request(endpoint: str, req, timeout: float = 3.0, encoding: str = "msgpack",
            context: zmq.Context | None = None, curve_server_key: bytes | None = None,
            curve_client_certificate=None, token: str | None = None) -> dict:
    """Send one request to a control endpoint and return the decoded reply (raises TimeoutError).

    With ``token``, a command that needs it goes after a ``hello``: unless the reply proves that the server at
    ``endpoint`` holds the token (raises :class:`ServerNotTrusted`, nothing else sent), the request follows with
    this client's proof. ``status`` and ``estop`` need no token and are sent as they are.
    With CURVE: ``curve_server_key`` is the server's public key (z85 bytes) and
    ``curve_client_certificate`` the path of this client's ``.key_secret`` certificate.
    """
    from ..telemetry.endpoints import check_connect_endpoint

    check_connect_endpoint(endpoint, "control endpoint")
    ctx = context or zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
    # A REQ socket's send waits for a connected peer: one whose handshake failed (a CURVE key the server
    # refuses) never comes, so the send is bounded too.
    sock.setsockopt(zmq.SNDTIMEO, max(1, int(timeout * 1000)))
    try:
        if curve_server_key is not None:
            from zmq.auth import load_certificate

            public, secret = load_certificate(str(curve_client_certificate))
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_serverkey = curve_server_key
        sock.connect(endpoint)
        if token is not None and isinstance(req, dict) and req.get("cmd") not in OPEN_COMMANDS:
            handshake = ClientHandshake(token, endpoint)
            req = handshake.authenticate(_exchange(sock, endpoint, handshake.hello(), timeout, encoding), req)
        return _exchange(sock, endpoint, req, timeout, encoding)
    finally:
        sock.close(linger=0)


def _exchange(sock, endpoint: str, req, timeout: float, encoding: str):
    if isinstance(req, (bytes, bytearray)):
        data = bytes(req)
    elif encoding == "json":
        data = json.dumps(req).encode()
    else:
        data = msgpack.packb(req, use_bin_type=True)
    try:
        sock.send(data)
    except zmq.Again:
        raise TimeoutError(f"no connection to {endpoint} within {timeout:g} s (nothing answered, or the "
                           f"server refused this client's keys)") from None
    if not sock.poll(int(timeout * 1000)):
        raise TimeoutError(f"no reply from {endpoint} within {timeout:g} s")
    return decode_reply(sock.recv())


def decode_reply(raw: bytes):
    """A reply's map (JSON or msgpack, as the request); what is neither raises ValueError."""
    try:
        return json.loads(raw) if raw[:1] == b"{" else msgpack.unpackb(raw, raw=False)
    except Exception as exc:  # noqa: BLE001  (msgpack raises several kinds on garbage)
        raise ValueError("the control endpoint sent a reply that is neither JSON nor msgpack") from exc
