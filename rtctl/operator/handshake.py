"""The control channel's mutual challenge-response: the token never crosses the wire, and a proof made for
one session with one server is worth nothing anywhere else.

A command that needs the token is preceded by ``hello``::

    client -> server   {"cmd": "hello", "nonce": Nc}
    server -> client   {"ok": true, "nonce": Ns, "server": S, "run": R, "proof": HMAC(token, server | S | R | Nc | Ns)}
    client -> server   {"cmd": C, ..., "session": Ns, "proof": HMAC(token, client | S | R | Nc | Ns | C)}

``S`` is the server's endpoint as it binds it (:func:`server_identity`) and ``R`` a random id of that server's
life (a run). The client checks that ``S`` is the endpoint it connected to (:func:`same_endpoint`) and the
server's proof before it proves anything itself; the server checks the client's proof against its own ``S``
and ``R`` and the session's nonces, once (a session is used up by its first command, and expires after
:data:`SESSION_TTL`). Each side's HMAC-SHA256 (RFC 2104) covers both nonces, so neither can be replayed; its
role label keeps one side's proof from standing in for the other's; ``S`` and ``R`` keep a proof from being
relayed to another server: a process squatting on a stopped run's port that passes a client's ``hello`` on to
a live run gets that run's proof for the run's own endpoint, which the client refuses, and never a proof of the
client's. This is the mutual authentication of ISO/IEC 9798-4 (three-pass, with MACs), with the server's
identity inside the MACs as the Station-to-Station protocol does (Diffie, van Oorschot, Wiener 1992).

Everything here is pure (no sockets, no clocks but the one given): the same code runs wherever the channel's
requests are checked, and in every client (``rtctl control``, the dashboard, any ZeroMQ REQ in another
language that computes the same HMACs).
"""
from __future__ import annotations

import collections
import hmac
import os
import secrets
import time

from .requests import Refused

PROTOCOL = "rtctl-control-1"
NONCE_CHARS = 32                 # hex characters of a nonce: 128 random bits
SESSION_TTL = 10.0               # s a server keeps a session open for its command
MAX_SESSIONS = 256               # open sessions at most; the oldest goes first
WILDCARD_HOSTS = ("0.0.0.0", "::", "*")


class ServerNotTrusted(RuntimeError):
    """The endpoint did not prove it holds the token for the endpoint connected to: nothing was proved to it."""


def new_nonce() -> str:
    return secrets.token_hex(NONCE_CHARS // 2)


def server_identity(endpoint: str) -> str:
    """The endpoint as both sides name it: ``tcp://HOST:PORT`` with ``localhost`` as 127.0.0.1 and IPv6 in
    brackets, ``ipc://`` with the socket's absolute path (symbolic links of its folder resolved)."""
    scheme, _, rest = endpoint.partition("://")
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        host = host.strip("[]").lower()
        host = "127.0.0.1" if host == "localhost" else host
        return f"tcp://{f'[{host}]' if ':' in host else host}:{port}"
    if scheme == "ipc":
        folder, name = os.path.split(rest)
        return f"ipc://{os.path.join(os.path.realpath(folder or '.'), name)}"
    return endpoint


def same_endpoint(connected: str, claimed) -> bool:
    """Whether a server claiming identity ``claimed`` is the one at ``connected`` (a server bound to a wildcard
    address, which needs ``allow_remote`` and CURVE, is reached by any address with its port)."""
    if not isinstance(claimed, str):
        return False
    mine = server_identity(connected)
    if mine == claimed:
        return True
    if mine.startswith("tcp://") and claimed.startswith("tcp://"):
        claimed_host, _, claimed_port = claimed[len("tcp://"):].rpartition(":")
        return claimed_host.strip("[]") in WILDCARD_HOSTS and mine.rpartition(":")[2] == claimed_port
    return False


def _mac(token: str, *parts: str) -> str:
    message = "\n".join((PROTOCOL, *parts)).encode()
    return hmac.new(token.encode(), message, "sha256").hexdigest()


def server_proof(token: str, server: str, run: str, client_nonce: str, server_nonce: str) -> str:
    return _mac(token, "server", server, run, client_nonce, server_nonce)


def client_proof(token: str, server: str, run: str, client_nonce: str, server_nonce: str, cmd: str) -> str:
    return _mac(token, "client", server, run, client_nonce, server_nonce, cmd)


def _nonce(value, field: str) -> str:
    if not isinstance(value, str) or len(value) != NONCE_CHARS or any(c not in "0123456789abcdef" for c in value):
        raise Refused(f"{field}: expected {NONCE_CHARS} lower-case hex characters (a fresh random nonce)")
    return value


class Sessions:
    """The server's side: answers ``hello`` and checks a command's ``session`` and ``proof``.

    ``server``: :func:`server_identity` of the bound endpoint; ``run``: this server's random id. At most
    :data:`MAX_SESSIONS` sessions are open (a flood of ``hello`` drops the oldest: the client retries), each for
    :data:`SESSION_TTL` s and one command.
    """

    def __init__(self, token: str, server: str, run: str, ttl: float = SESSION_TTL, capacity: int = MAX_SESSIONS,
                 clock=time.monotonic):
        self._token, self.server, self.run = token, server, run
        self._ttl, self._capacity, self._clock = float(ttl), int(capacity), clock
        self._open: collections.OrderedDict = collections.OrderedDict()   # server nonce -> (client nonce, expiry)

    def hello(self, request: dict) -> dict:
        client_nonce = _nonce(request.get("nonce"), "hello: nonce")
        server_nonce = new_nonce()
        while len(self._open) >= self._capacity:
            self._open.popitem(last=False)
        self._open[server_nonce] = (client_nonce, self._clock() + self._ttl)
        return {"nonce": server_nonce, "server": self.server, "run": self.run,
                "proof": server_proof(self._token, self.server, self.run, client_nonce, server_nonce)}

    def check(self, cmd: str, request: dict) -> None:
        """Raise :class:`Refused` unless ``request`` carries a proof of the token for an open session of this
        server; the session is used up either way."""
        session, proof = request.get("session"), request.get("proof")
        if session is None and proof is None:
            raise Refused(f"{cmd}: needs the token: send hello first, then the command with its session and proof "
                          "(rtctl control does; status and estop need none)")
        opened = self._open.pop(session, None) if isinstance(session, str) else None
        if opened is None or opened[1] < self._clock():
            raise Refused(f"{cmd}: session: unknown, used or expired (sessions last {self._ttl:g} s and one "
                          "command); send hello again")
        expected = client_proof(self._token, self.server, self.run, opened[0], session, cmd)
        if not isinstance(proof, str) or not hmac.compare_digest(proof.encode(), expected.encode()):
            raise Refused(f"{cmd}: wrong proof (not the token of this server; status and estop need none)")


class ClientHandshake:
    """The client's side, for one command to ``endpoint`` with ``token``: :meth:`hello` is the first
    request, :meth:`authenticate` checks its reply and returns the command to send."""

    def __init__(self, token: str, endpoint: str):
        self._token, self.endpoint = token, endpoint
        self.nonce = new_nonce()

    def hello(self) -> dict:
        return {"cmd": "hello", "nonce": self.nonce}

    def authenticate(self, reply, request: dict) -> dict:
        """``request`` with its ``session`` and ``proof``, if ``reply`` proves the server holds the token and is
        the one at :attr:`endpoint`; raises :class:`ServerNotTrusted` otherwise (nothing proved to it)."""
        reply = reply if isinstance(reply, dict) else {}
        server, run, server_nonce = reply.get("server"), reply.get("run"), reply.get("nonce")
        if not all(isinstance(v, str) for v in (server, run, server_nonce, reply.get("proof"))):
            raise ServerNotTrusted(f"{self.endpoint} did not prove it holds the token (not an rtctl control "
                                   "channel?); nothing was sent")
        if not same_endpoint(self.endpoint, server):
            raise ServerNotTrusted(f"{self.endpoint} answered as {server[:80]!r}, not as itself (a process "
                                   "relaying another server?); nothing was sent")
        expected = server_proof(self._token, server, run, self.nonce, server_nonce)
        if not hmac.compare_digest(reply["proof"].encode(), expected.encode()):
            raise ServerNotTrusted(f"{self.endpoint} did not prove it holds the token (wrong token, or not the "
                                   "robot's control channel); nothing was sent")
        cmd = str(request.get("cmd"))
        return {**request, "session": server_nonce,
                "proof": client_proof(self._token, server, run, self.nonce, server_nonce, cmd)}
