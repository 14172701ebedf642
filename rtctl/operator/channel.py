"""The control channel's socket: a ZeroMQ ROUTER served by one thread, whatever answers its requests.

:class:`RouterChannel` binds (loopback unless CURVE is configured), reads each message with at most
:data:`MAX_FRAMES` frames kept, answers every request on its own (one slow or hostile client never holds the
channel) and answers a request whose reply waits for something else (the loop, in the same process or
another) once that is done or its deadline passed. What a request means is the subclass's :meth:`handle`:
:class:`~rtctl.operator.control.ControlServer` applies it in this process; the operator process
(:mod:`rtctl.operator`) hands it to the loop's process.
"""
from __future__ import annotations

import collections
import math
import os
import secrets
import threading
import time

import zmq

from ..telemetry.endpoints import LOOPBACK_HOSTS, bind, check_endpoint, close
from .handshake import Sessions, server_identity
from .requests import (AUTH_FIELDS, COMMON, HELLO, MAX_REQUEST_BYTES, OPEN_COMMANDS, Refused, check_command,
                       decode_request, encode_reply)

MAX_FRAMES = 8         # frames kept of one message (envelope and request); the rest are dropped
BURST_SECONDS = 1e-3   # s spent on long requests before the socket is read again
SHORT_REQUEST = 1024   # bytes: a request this short is served as soon as it is read
MAX_BACKLOG = 64       # long requests read and waiting at most (the rest wait in the socket)


class Pending:
    """A request whose reply waits: ``done`` once it is known; ``state`` pending, applying or cancelled."""
    __slots__ = ("request", "apply", "done", "reply", "state", "lock", "envelope", "use_json", "rid", "deadline",
                 "seq")

    def __init__(self, request, apply=None):
        self.request, self.apply = request, apply
        self.done = threading.Event()
        self.reply = None
        self.state = "pending"
        self.lock = threading.Lock()
        self.envelope = None
        self.use_json = False
        self.rid = None
        self.deadline = math.inf
        self.seq = -1


class RouterChannel:
    """A ROUTER socket on ``endpoint`` served by a thread (:meth:`start`, :meth:`close`); requests go to
    :meth:`handle`. ``token`` (checked, :mod:`.auth`) opens :class:`~.handshake.Sessions` for the commands
    that need it; ``curve_secret_key`` and ``curve_clients`` turn on CURVE, required beyond loopback."""

    def __init__(self, *, endpoint: str, token: str | None, allow_remote: bool = False,
                 context: zmq.Context | None = None, curve_secret_key=None, curve_clients=None,
                 token_source: str = "the caller", run_id: str | None = None):
        from .auth import check_token

        self._bind = check_endpoint(endpoint, allow_remote, "control endpoint")
        self.token = None if token is None else check_token(token, "control token")
        self.token_source = token_source  # where the token came from, for the start-up message
        self.run_id = run_id or secrets.token_hex(8)  # this server's life, in every proof (another run's is void)
        self._sessions = self._new_sessions(self._bind)
        self._curve = None
        if curve_secret_key is not None or curve_clients is not None:
            self._curve = curve_settings(curve_secret_key, curve_clients)
        if binds_beyond_loopback(self._bind) and self._curve is None:
            raise ValueError(f"control endpoint {endpoint!r} binds beyond loopback: set curve_secret_key and "
                             "curve_clients (ZeroMQ CURVE) to do that; tokens alone would cross the network in clear")
        self._ctx = context or zmq.Context.instance()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error = None
        self._thread = None
        self._authenticator = None
        self.endpoint = ""
        self.accepted = 0
        self.refused = 0
        self.malformed = 0

    # -- lifetime ------------------------------------------------------------------------
    def start(self):
        if self.token is None:
            raise ValueError("a control channel needs a token (rtctl.operator.auth.server_token finds or makes one)")
        self._thread = threading.Thread(target=self._run, name="rtctl-control", daemon=True)
        self._thread.start()
        self._ready.wait(10.0)
        if self._error is not None:
            raise RuntimeError(f"control channel: cannot bind: {self._error}") from self._error
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(10.0)
            self._thread = None
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    @property
    def alive(self) -> bool:
        """The channel's thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def _socket(self):
        sock = self._ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        sock.setsockopt(zmq.SNDHWM, 1000)
        sock.setsockopt(zmq.RCVHWM, 16)
        if self._curve is not None:
            from zmq.auth.thread import ThreadAuthenticator

            public, secret, clients = self._curve
            self._authenticator = ThreadAuthenticator(self._ctx)
            self._authenticator.start()
            self._authenticator.configure_curve(domain="*", location=str(clients))
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_server = True
        self.endpoint = bind(sock, self._bind)
        self._sessions = self._new_sessions(self.endpoint)
        return sock

    def _new_sessions(self, endpoint: str):
        return None if self.token is None else Sessions(self.token, server_identity(endpoint), self.run_id)

    @property
    def identity(self) -> str:
        """The endpoint as proofs name it (:func:`~.handshake.server_identity`; before a bind, the one asked for)."""
        return server_identity(self.endpoint or self._bind)

    def _run(self) -> None:
        try:
            sock = self._socket()
        except zmq.ZMQError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        waiting: list[Pending] = []
        backlog: collections.deque = collections.deque()
        clock = time.monotonic
        try:
            while not self._stop.is_set():
                events = poller.poll(0 if backlog else 1 if waiting else 100)
                until = clock() + BURST_SECONDS
                if events:
                    self._take_arrivals(sock, backlog, waiting)
                while backlog and clock() < until:
                    self._serve(sock, backlog.popleft(), waiting)
                    if waiting:
                        self._answer_applied(sock, waiting)
                if waiting:
                    self._answer_applied(sock, waiting)
        finally:
            close(sock, linger=0)

    def _take_arrivals(self, sock, backlog, waiting) -> None:
        """Read what arrived (up to :data:`MAX_BACKLOG` messages waiting): a short request (an e-stop, a status,
        a hello are) is served at once, a long one waits in ``backlog`` for its turn, so an e-stop is never
        decoded after a flood of long junk that arrived with it."""
        while len(backlog) < MAX_BACKLOG:
            frames = self._receive(sock)
            if frames is None:
                return
            if len(frames[-1]) <= SHORT_REQUEST:
                self._serve(sock, frames, waiting)
            else:
                backlog.append(frames)

    def _receive(self, sock):
        """One message's frames, at most :data:`MAX_FRAMES` kept (a message of millions of frames costs
        no memory here); None when nothing is waiting."""
        try:
            frames = [sock.recv(zmq.NOBLOCK)]
        except zmq.Again:
            return None
        dropped = 0
        while sock.getsockopt(zmq.RCVMORE):
            frame = sock.recv()
            if len(frames) < MAX_FRAMES:
                frames.append(frame)
            else:
                dropped += 1
        if dropped:
            frames.append(b"")  # no request parses from a truncated message: it gets a frame-count error
            self.malformed += 1
        return frames

    def _serve(self, sock, frames: list, waiting: list) -> None:
        """One message from the ROUTER: [routing id, ..., b"", request]; never raises."""
        try:
            split = frames.index(b"", 1)
        except ValueError:
            self.malformed += 1
            return
        envelope, body = frames[:split + 1], frames[split + 1:]
        if len(body) != 1:
            self.refused += 1
            self._send(sock, envelope, {"ok": False, "error": f"a request is one frame, got {len(body)}"}, False)
            return
        outcome, use_json = self.handle_bytes(body[0], deferred=True)
        if isinstance(outcome, Pending):
            outcome.envelope, outcome.use_json = envelope, use_json
            waiting.append(outcome)
            return
        self._send(sock, envelope, outcome, use_json)

    def _send(self, sock, envelope, reply: dict, use_json: bool) -> None:
        try:
            sock.send_multipart([*envelope, encode_reply(reply, use_json)], zmq.NOBLOCK)
        except zmq.ZMQError:  # the peer is gone or not reading: its reply is dropped, nobody else's
            self.malformed += 1

    def _answer_applied(self, sock, waiting: list) -> None:
        self._collect(waiting)
        now = time.monotonic()
        for pending in list(waiting):
            if not pending.done.is_set() and now < pending.deadline:
                continue
            reply = self._outcome(pending)
            if reply is None:
                continue
            waiting.remove(pending)
            if pending.rid is not None:
                reply["id"] = pending.rid
            self._send(sock, pending.envelope, reply, pending.use_json)

    def _collect(self, waiting: list) -> None:
        """Mark the waiting requests whose replies are known (``done``): nothing to do where the loop's side
        sets them itself (the same process)."""

    def _outcome(self, pending: Pending):
        """The reply of a waiting request (None: not yet, though its deadline passed)."""
        raise NotImplementedError

    # -- requests --------------------------------------------------------------------------
    def handle_bytes(self, raw: bytes, deferred: bool = False):
        """Decode and handle; returns (reply dict, reply as JSON?), or with ``deferred`` a :class:`Pending`
        instead of waiting for its reply. Never raises: the channel must survive anything."""
        use_json = False
        try:
            request, use_json = decode_request(raw)
            reply = self.handle(request, deferred)
        except Refused as exc:
            self.refused += 1
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            self.refused += 1
            reply = {"ok": False, "error": f"internal error: {type(exc).__name__}"}
        return reply, use_json

    def admit(self, request) -> tuple:
        """(command, request without its session and proof, id) of a well-formed request whose command is open
        or proved by a session of this server (:class:`~.handshake.Sessions`); raises :class:`Refused` naming
        what is wrong."""
        cmd, request = check_command(request, COMMON, AUTH_FIELDS)
        rid = request.get("id")
        if rid is not None and not (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))):
            raise Refused(f"id: expected an integer or a string, got {type(rid).__name__}")
        if cmd not in OPEN_COMMANDS:
            if self._sessions is None:
                raise Refused(f"{cmd}: this server has no token, so it accepts only {sorted(OPEN_COMMANDS)}")
            if cmd != HELLO:
                self._sessions.check(cmd, request)
                request = {k: v for k, v in request.items() if k not in AUTH_FIELDS}
        return cmd, request, rid

    def handle(self, request, deferred: bool = False):
        """A reply dict for ``request``, or with ``deferred`` a :class:`Pending`; raises :class:`Refused`."""
        raise NotImplementedError


def binds_beyond_loopback(bind: str) -> bool:
    if not bind.startswith("tcp://"):
        return False
    host = bind[len("tcp://"):].rpartition(":")[0]
    return host not in LOOPBACK_HOSTS


def curve_settings(secret_key, clients):
    from pathlib import Path

    from .auth import CredentialError, load_curve_server_key

    if not zmq.has("curve"):
        raise ValueError("this libzmq has no CURVE support")
    if secret_key is None or clients is None:
        raise ValueError("CURVE needs both curve_secret_key (the server's .key_secret file) and curve_clients "
                         "(a directory of the allowed clients' public .key files)")
    public, secret = load_curve_server_key(secret_key)
    clients = Path(clients).expanduser()
    if not clients.is_dir():
        raise CredentialError(f"curve_clients {clients}: not a directory")
    st = clients.stat()
    if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
        raise CredentialError(f"curve_clients {clients}: must be owned by this user and writable by nobody else "
                              "(whoever can add a certificate there is let in)")
    return public, secret, clients
