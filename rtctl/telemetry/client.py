"""The client side of the control channel: one request over a ZeroMQ REQ socket (what ``rtctl control`` sends).

With a token, the server first proves it holds the same token before the token is sent, so a process
squatting on the port never sees it.
"""
from __future__ import annotations

import hmac
import json

import msgpack
import zmq

from .requests import MAX_REPLY_BYTES


class ServerNotTrusted(RuntimeError):
    """The endpoint did not prove it holds the token: the token was not sent."""


def request(endpoint: str, req, timeout: float = 3.0, encoding: str = "msgpack",
            context: zmq.Context | None = None, curve_server_key: bytes | None = None,
            curve_client_certificate=None, token: str | None = None) -> dict:
    """Send one request to a control endpoint and return the decoded reply (raises TimeoutError).

    With ``token``, the server must first prove it holds the same token (``status`` with a random
    ``challenge``, answered by HMAC-SHA256(token, challenge)); only then is the request sent with the
    token, so a process squatting on the port never sees it (raises :class:`ServerNotTrusted`).
    With CURVE: ``curve_server_key`` is the server's public key (z85 bytes) and
    ``curve_client_certificate`` the path of this client's ``.key_secret`` certificate.
    """
    from .endpoints import check_connect_endpoint

    check_connect_endpoint(endpoint, "control endpoint")
    if token is not None:
        import secrets

        curve = {"curve_server_key": curve_server_key, "curve_client_certificate": curve_client_certificate}
        challenge = secrets.token_hex(16)
        answer = request(endpoint, {"cmd": "status", "challenge": challenge}, timeout, encoding, context, **curve)
        expected = hmac.new(token.encode(), challenge.encode(), "sha256").hexdigest()
        proof = answer.get("proof") if isinstance(answer, dict) else None
        if not isinstance(proof, str) or not hmac.compare_digest(proof, expected):
            raise ServerNotTrusted(f"{endpoint} did not prove it holds the token (wrong token, or not the robot's "
                                   "control channel); the token was not sent")
        return request(endpoint, {**req, "token": token}, timeout, encoding, context, **curve)
    ctx = context or zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
    try:
        if curve_server_key is not None:
            from zmq.auth import load_certificate

            public, secret = load_certificate(str(curve_client_certificate))
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_serverkey = curve_server_key
        sock.connect(endpoint)
        if isinstance(req, (bytes, bytearray)):
            sock.send(bytes(req))
        elif encoding == "json":
            sock.send(json.dumps(req).encode())
        else:
            sock.send(msgpack.packb(req, use_bin_type=True))
        if not sock.poll(int(timeout * 1000)):
            raise TimeoutError(f"no reply from {endpoint} within {timeout:g} s")
        raw = sock.recv()
        if raw[:1] == b"{":
            return json.loads(raw)
        return msgpack.unpackb(raw, raw=False)
    finally:
        sock.close(linger=0)
