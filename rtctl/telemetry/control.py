"""The run-time control channel: a ZeroMQ endpoint (off by default, loopback by default).

Clients are ordinary ZeroMQ REQ sockets (any language); the server is a ROUTER,
so that one slow or hostile client can never hold the channel: every request is
answered on its own, and an e-stop is answered at once whatever else is pending.
A request is one frame holding a msgpack or JSON map (never pickle); the reply
uses the request's encoding (garbage gets a msgpack reply). Every request has
``"cmd"``, optionally ``"id"`` (echoed: an int64 or a short string) and ``"token"``.

=============  ======================================================================
``status``     open; replies cycle, t, tripped, trip_reason, kp, kd, trajectory, limits
``estop``      open; ``reason`` (str): latch the safe state, applied by the channel's
               thread itself, at once (not at a cycle boundary)
``set_gains``  token; ``kp``, ``kd``: number or one per actuated joint, in [0, kp_max] / [0, kd_max]
``set_target`` token; ``goal`` (one per joint, inside the soft position limits),
               ``duration`` (s, (0, duration_max], default 1): a new minimum-jerk move
               from the current desired position (min_jerk only), refused when its peak
               velocity 1.875 |dq| / T or acceleration 5.774 |dq| / T^2 exceeds a joint's
               limit (the monitor's velocity bound and ``acceleration_limit``)
``set_cpg``    token; ``amplitude`` (>= 0), ``frequency`` (Hz, (0, frequency_max]),
               ``phase`` (rad, [-2 pi, 2 pi]), ``center``, ``pattern``: oscillator
               parameters; ``center +- amplitude`` inside the soft limits and the peak
               velocity / acceleration inside the joint limits. A trajectory with
               ``validate_cpg_request`` (the jaw robot's chewing CPG) checks the request
               itself (its own fields and therapist limits)
``rearm``      token; leave the safe state (refused with the blockers' reasons); the
               loop rejoins its trajectory by a recovery move (:meth:`ControlLoop.rearm`)
=============  ======================================================================

Why ``status`` and ``estop`` need no token: reading the state moves nothing, and an
e-stop only ever makes the robot safer; like the red button on the robot, it must work
for whoever is there, without a credential that might be missing in an emergency. The
cost, that any local process that reaches the endpoint can stop the robot, is a denial
of service that ends in the safe state. Every other command needs the token
(:mod:`rtctl.telemetry.auth`), compared in constant time.

Malformed input never reaches the loop and never ends the channel: a request with the
wrong number of frames, an empty frame, undecodable bytes, nesting deeper than
:data:`MAX_DEPTH`, integers beyond 64 bit, strings that are not valid UTF-8, unknown
fields or commands the running trajectory does not support get an error reply naming
the field (counted in ``refused``); envelopes with no routing frame are dropped and
counted in ``malformed``. Accepted changes are queued and applied by the loop at the next
cycle boundary (:meth:`ControlServer.drain`, a loop boundary hook costing one deque
truth test per cycle when idle); the reply says at which cycle, or that the loop reached
no boundary within ``apply_timeout``. Every accepted change is published as an
``rtctl/event`` of kind ``control``.

A bind beyond loopback (``allow_remote``) is refused unless ZeroMQ CURVE is configured:
the server's secret certificate and a directory of the client certificates allowed in
(``zmq.auth.create_certificates`` writes both kinds).
"""
from __future__ import annotations

import collections
import hmac
import json
import math
import os
import threading
import time

import msgpack
import numpy as np
import zmq

from .publisher import LOOPBACK_HOSTS, check_endpoint

COMMANDS = {
    "status": {"challenge"},
    "set_gains": {"kp", "kd"},
    "set_target": {"goal", "duration"},
    "set_cpg": {"amplitude", "frequency", "phase", "center", "pattern"},
    "estop": {"reason"},
    "rearm": set(),
}
OPEN_COMMANDS = frozenset({"status", "estop"})
COMMON = {"cmd", "id", "token"}
MAX_REQUEST_BYTES = 65536
MAX_DEPTH = 3          # the request map, a list in it, the numbers in the list
MAX_STRING = 1024      # characters of any string in a request
MAX_PENDING = 64       # requests waiting for a cycle boundary; beyond: refused at once
MAX_ELEMENTS = 256     # values (all levels) in one request; a longer walk is not started
MAX_FRAMES = 8         # frames kept of one message (envelope and request); the rest are dropped
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class Refused(ValueError):
    """A request that is refused; the message is the reason sent back."""


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(f"{name}: expected a number, got {type(value).__name__} {value!r:.60}")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise Refused(f"{name}: integer out of the 64-bit range")
    x = float(value)
    if not math.isfinite(x):
        raise Refused(f"{name}: must be finite, got {value!r}")
    return x


def _vector(value, n, name, low=-math.inf, high=math.inf, low_open=False):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise Refused(f"{name}: expected {n} values (one per actuated joint), got {len(value)}")
        arr = np.array([_number(v, f"{name}[{i}]") for i, v in enumerate(value)])
    else:
        arr = np.full(n, _number(value, name))
    for i, x in enumerate(arr):
        if x < low or x > high or (low_open and x <= low):
            lo = f"({low:g}" if low_open else f"[{low:g}"
            raise Refused(f"{name}[{i}] = {x:g} outside the allowed range {lo}, {high:g}]")
    return arr


def check_request_structure(request) -> dict:
    """Refuse what no command can use, naming the field: a non-map, non-string keys, nesting deeper
    than :data:`MAX_DEPTH`, integers beyond 64 bit, strings that are not valid UTF-8 or longer than
    :data:`MAX_STRING`, types other than nil, bool, int, float, str, list and map. Iterative: no
    recursion limit to hit."""
    if not isinstance(request, dict):
        raise Refused(f"a request must be a map with a 'cmd' field, got {type(request).__name__}")
    stack = [(request, "request", 1)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_ELEMENTS:
            raise Refused(f"request: more than {MAX_ELEMENTS} values")
        if depth > MAX_DEPTH:
            raise Refused(f"{path}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise Refused(f"{path}: field names must be strings, got {type(key).__name__}")
                _check_string(key, f"{path} field name")
                stack.append((item, key if depth == 1 else f"{path}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                stack.append((item, f"{path}[{i}]", depth + 1))
        elif isinstance(value, str):
            _check_string(value, path)
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            pass
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise Refused(f"{path}: integer out of the 64-bit range")
        else:
            raise Refused(f"{path}: unsupported type {type(value).__name__}")
    return request


def _check_string(text: str, path: str) -> None:
    if len(text) > MAX_STRING:
        raise Refused(f"{path}: string longer than {MAX_STRING} characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(f"{path}: not valid unicode (lone surrogate)") from None


def decode_request(raw: bytes):
    """(request, reply as JSON?) from one frame; raises :class:`Refused` naming what is wrong. The request's
    structure is checked by :meth:`ControlServer.handle` (:func:`check_request_structure`)."""
    use_json = raw[:1] in (b"{", b"[", b" ", b"\n", b"\t", b"\r")
    if not raw:
        raise Refused("empty request frame")
    if use_json:
        try:
            request = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise Refused(f"request: nested deeper than {MAX_DEPTH} levels") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise Refused(f"request is not valid JSON: {str(exc)[:200]}") from None
    else:
        try:
            request = msgpack.unpackb(raw, raw=False, strict_map_key=False)
        except UnicodeDecodeError:
            raise Refused("request: a msgpack string is not valid UTF-8") from None
        except (msgpack.exceptions.StackError, RecursionError):
            raise Refused(f"request: nested deeper than {MAX_DEPTH} levels") from None
        except Exception as exc:  # noqa: BLE001  (msgpack raises several kinds on garbage)
            raise Refused(f"request is neither JSON nor msgpack ({type(exc).__name__})") from None
    return request, use_json


def encode_reply(reply: dict, use_json: bool) -> bytes:
    """The reply's bytes; a reply that cannot be encoded becomes an error reply that can."""
    try:
        return json.dumps(reply).encode() if use_json else msgpack.packb(reply, use_bin_type=True)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        safe = {"ok": False, "error": "the reply could not be encoded"}
        return json.dumps(safe).encode() if use_json else msgpack.packb(safe, use_bin_type=True)


class _Pending:
    __slots__ = ("request", "apply", "done", "reply", "state", "lock", "envelope", "use_json", "rid", "deadline")

    def __init__(self, request, apply):
        self.request, self.apply = request, apply
        self.done = threading.Event()
        self.reply = None
        self.state = "pending"
        self.lock = threading.Lock()
        self.envelope = None
        self.use_json = False
        self.rid = None
        self.deadline = math.inf


class ControlServer:
    """Control channel of ``loop``; its :meth:`drain` is one of the loop's ``boundary_hooks`` (added here).

    ``token`` is required to :meth:`start` a socket (a server built without one only validates and
    applies requests in-process, as :class:`CommandSchedule` does). ``curve_secret_key`` (path of a
    ``.key_secret`` certificate) and ``curve_clients`` (directory of allowed clients' ``.key``
    certificates) turn on CURVE encryption and client authentication; both are required when
    ``allow_remote`` lets the endpoint bind beyond loopback.
    """

    def __init__(self, loop, *, endpoint: str = "tcp://127.0.0.1:5557", token: str | None = None,
                 kp_max: float = 1e5, kd_max: float = 1e4, frequency_max: float = 20.0, duration_max: float = 60.0,
                 apply_timeout: float = 1.0, allow_remote: bool = False, telemetry=None,
                 context: zmq.Context | None = None, curve_secret_key=None, curve_clients=None,
                 token_source: str = "the caller"):
        from .auth import check_token

        self.loop = loop
        self._bind = check_endpoint(endpoint, allow_remote, "control endpoint")
        self.token = None if token is None else check_token(token, "control token")
        self.token_source = token_source  # where the token came from, for the start-up message
        self._curve = None
        if curve_secret_key is not None or curve_clients is not None:
            self._curve = _curve_settings(curve_secret_key, curve_clients)
        if _binds_beyond_loopback(self._bind) and self._curve is None:
            raise ValueError(f"control endpoint {endpoint!r} binds beyond loopback: set curve_secret_key and "
                             "curve_clients (ZeroMQ CURVE) to do that; tokens alone would cross the network in clear")
        self.kp_max, self.kd_max = float(kp_max), float(kd_max)
        self.frequency_max, self.duration_max = float(frequency_max), float(duration_max)
        self.apply_timeout = float(apply_timeout)
        self.telemetry = telemetry if telemetry is not None else getattr(loop, "telemetry", None)
        self._ctx = context or zmq.Context.instance()
        self._queue: collections.deque = collections.deque()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error = None
        self._thread = None
        self._authenticator = None
        self.endpoint = ""
        self.accepted = 0
        self.refused = 0
        self.malformed = 0
        safety = loop.safety
        ctl = loop.controller
        self.n = ctl.n
        self.joints = list(ctl.joint_names)
        self.q_low, self.q_high = safety.soft_limits()
        loop.boundary_hooks.append(self.drain)

    # -- lifetime ------------------------------------------------------------------------
    def start(self) -> "ControlServer":
        if self.token is None:
            raise ValueError("a control channel needs a token (rtctl.telemetry.auth.server_token finds or makes one)")
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
        sock.bind(self._bind)
        self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        return sock

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
        waiting: list[_Pending] = []
        try:
            while not self._stop.is_set():
                events = poller.poll(1 if waiting else 100)
                if events:
                    for _ in range(100):  # serve a burst, then look at the waiting requests
                        frames = self._receive(sock)
                        if frames is None:
                            break
                        self._serve(sock, frames, waiting)
                if waiting:
                    self._answer_applied(sock, waiting)
        finally:
            sock.close(linger=0)

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
        if isinstance(outcome, _Pending):
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

    # -- requests --------------------------------------------------------------------------
    def handle_bytes(self, raw: bytes, deferred: bool = False):
        """Decode, validate, apply; returns (reply dict, reply as JSON?), or with ``deferred`` a
        :class:`_Pending` for a change the loop has yet to apply instead of waiting for it. Never raises:
        the channel must survive anything."""
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

    def _checked(self, request, allowed_common) -> tuple[str, dict]:
        check_request_structure(request)
        cmd = request.get("cmd")
        if not isinstance(cmd, str) or cmd not in COMMANDS:
            raise Refused(f"cmd: unknown or missing command {str(cmd)[:40]!r}; commands: {sorted(COMMANDS)}")
        unknown = sorted(set(request) - COMMANDS[cmd] - allowed_common)
        if unknown:
            raise Refused(f"{cmd}: unknown field '{unknown[0]}'; allowed: {sorted(COMMANDS[cmd])}")
        return cmd, request

    def handle(self, request, deferred: bool = False):
        """Validate and apply ``request``; a reply dict, or with ``deferred`` a :class:`_Pending` to answer
        once the loop has applied it. Raises :class:`Refused` with the reason."""
        cmd, request = self._checked(request, COMMON)
        rid = request.get("id")
        if rid is not None and not (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))):
            raise Refused(f"id: expected an integer or a string, got {type(rid).__name__}")
        if cmd not in OPEN_COMMANDS:
            given = request.get("token")
            if self.token is None:
                raise Refused(f"{cmd}: this server has no token, so it accepts only {sorted(OPEN_COMMANDS)}")
            if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.token.encode()):
                raise Refused(f"{cmd}: missing or wrong token (status and estop need none)")
        if cmd == "status":
            reply = self.status()
            challenge = request.get("challenge")
            if challenge is not None:
                reply["proof"] = self._proof(challenge)
        elif cmd == "estop":
            reply = self._estop_now(request)
        else:
            apply, clean = getattr(self, f"_validate_{cmd}")(request)
            pending = self._enqueue(cmd, clean, apply)
            if deferred:
                pending.rid = rid
                return pending
            pending.done.wait(self.apply_timeout)
            reply = self._outcome(pending)
            if reply is None:
                pending.done.wait()
                reply = self._outcome(pending)
        if rid is not None:
            reply["id"] = rid
        return reply

    def _proof(self, challenge) -> str:
        """HMAC-SHA256(token, challenge): shows a client that this server holds its token before the client
        sends it (a process squatting on the port cannot compute it)."""
        if not isinstance(challenge, str) or not 16 <= len(challenge) <= 128:
            raise Refused("challenge: expected a string of 16 to 128 characters")
        if self.token is None:
            raise Refused("challenge: this server has no token")
        return hmac.new(self.token.encode(), challenge.encode(), "sha256").hexdigest()

    def _estop_now(self, request) -> dict:
        apply, clean = self._validate_estop(request)
        detail = apply(self.loop)
        self.accepted += 1
        self._log({"cmd": "estop", **clean}, detail)
        return {"ok": True, "applied_cycle": int(self.loop.cycle), "detail": detail}

    def apply_now(self, request: dict) -> str:
        """Validate and apply ``request`` at once, from the loop's own thread (a boundary hook).

        The same checks as a request over the socket (token excepted); raises
        :class:`Refused` with the reason. Returns the applied change's description.
        """
        cmd, request = self._checked(request, {"cmd", "id"})
        if cmd == "status":
            raise Refused(f"cmd: 'status' is not a change; commands: {sorted(set(COMMANDS) - {'status'})}")
        apply, clean = getattr(self, f"_validate_{cmd}")(request)
        detail = apply(self.loop)
        self.accepted += 1
        self._log({"cmd": cmd, **clean}, detail)
        return detail

    def status(self) -> dict:
        loop = self.loop
        return {"ok": True, "cycle": int(loop.cycle), "t": loop.cycle * loop.period, "rate_hz": loop.rate_hz,
                "tripped": bool(loop.safety.tripped), "trip_reason": loop.safety.trip_reason,
                "joints": self.joints, "kp": loop.controller.kp.tolist(), "kd": loop.controller.kd.tolist(),
                "trajectory": type(loop.trajectory).__name__, "overruns": int(loop.stats.overruns),
                "limits": {"kp_max": self.kp_max, "kd_max": self.kd_max, "frequency_max": self.frequency_max,
                           "duration_max": self.duration_max, "q_low": self.q_low.tolist(),
                           "q_high": self.q_high.tolist()}}

    def _enqueue(self, cmd, clean, apply) -> _Pending:
        if len(self._queue) >= MAX_PENDING:
            raise Refused(f"{cmd}: {MAX_PENDING} requests are already waiting for the loop; try again")
        pending = _Pending({"cmd": cmd, **clean}, apply)
        pending.deadline = time.monotonic() + self.apply_timeout
        self._queue.append(pending)
        return pending

    def _outcome(self, pending: _Pending):
        """The reply of a queued request: applied, refused by the loop, or timed out (None: being applied)."""
        if not pending.done.is_set():
            with pending.lock:
                if pending.state == "pending":
                    pending.state = "cancelled"
            if pending.state == "cancelled":
                self.refused += 1
                return {"ok": False, "error": f"{pending.request['cmd']}: not applied: the loop reached no cycle "
                                              f"boundary within {self.apply_timeout:g} s (is it running?)"}
            return None
        if pending.reply.get("ok"):
            self.accepted += 1
        else:
            self.refused += 1
        return dict(pending.reply)

    # -- the loop side ----------------------------------------------------------------------
    def drain(self, loop) -> None:
        """Boundary hook: apply queued requests (called by the loop before each cycle's read)."""
        if not self._queue:
            return
        while self._queue:
            pending = self._queue.popleft()
            with pending.lock:
                if pending.state != "pending":
                    continue
                pending.state = "applying"
            try:
                detail = pending.apply(loop)
                pending.reply = {"ok": True, "applied_cycle": int(loop.cycle), "detail": detail}
                self._log(pending.request, detail)
            except Refused as exc:
                pending.reply = {"ok": False, "error": str(exc)}
            except Exception as exc:  # noqa: BLE001
                pending.reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            pending.done.set()

    def _log(self, request, detail) -> None:
        tele = self.telemetry if self.telemetry is not None else getattr(self.loop, "telemetry", None)
        if tele is not None:
            loop = self.loop
            tele.event("control", f"{request['cmd']}: {detail}", loop.cycle, loop.cycle * loop.period, request)

    # -- validators: (apply(loop) -> detail, cleaned request) ------------------------------------
    def _validate_set_gains(self, req):
        if "kp" not in req and "kd" not in req:
            raise Refused("set_gains: give kp and/or kd")
        kp = _vector(req["kp"], self.n, "kp", 0.0, self.kp_max) if "kp" in req else None
        kd = _vector(req["kd"], self.n, "kd", 0.0, self.kd_max) if "kd" in req else None

        def apply(loop):
            ctl = loop.controller
            if kp is not None:
                ctl.kp[:] = kp
            if kd is not None:
                ctl.kd[:] = kd
            return f"kp={ctl.kp.tolist()} kd={ctl.kd.tolist()}"
        clean = {k: v.tolist() for k, v in (("kp", kp), ("kd", kd)) if v is not None}
        return apply, clean

    def _validate_set_target(self, req):
        traj = self.loop.trajectory
        if not all(hasattr(traj, a) for a in ("start", "goal", "t0", "duration", "_args")) or \
                type(traj).__name__ != "MinimumJerk":
            raise Refused(f"set_target: needs a min_jerk trajectory; this loop runs {type(traj).__name__} "
                          "(oscillators: use set_cpg)")
        if "goal" not in req:
            raise Refused("set_target: 'goal' is required")
        goal = _vector(req["goal"], self.n, "goal")
        for i in range(self.n):
            if not self.q_low[i] <= goal[i] <= self.q_high[i]:
                raise Refused(f"goal[{i}] ({self.joints[i]}) = {goal[i]:g} outside the soft limits "
                              f"[{self.q_low[i]:g}, {self.q_high[i]:g}]")
        duration = _number(req.get("duration", 1.0), "duration")
        if not 0 < duration <= self.duration_max:
            raise Refused(f"duration = {duration:g} s outside the allowed range (0, {self.duration_max:g}]")
        self._refuse_while_moving_on_its_own("set_target", self.loop)  # after the fields: their errors first
        safety = self.loop.safety
        problem = safety.min_jerk_violation(self.loop.q_d, goal, duration)
        if problem:
            raise Refused(f"set_target: {problem}")

        def apply(loop):
            self._refuse_while_moving_on_its_own("set_target", loop)
            again = loop.safety.min_jerk_violation(loop.q_d, goal, duration)  # from where the loop is now
            if again:
                raise Refused(f"set_target: {again}")
            tr = loop.trajectory
            t = loop.cycle * loop.period
            tr.start[:] = loop.q_d
            tr.goal[:] = goal
            tr.t0 = t
            tr.duration = duration
            tr._args = (tr.t0, tr.duration, tr.start, tr.goal)
            return f"move to {goal.tolist()} in {duration:g} s from t = {t:.6g} s"
        return apply, {"goal": goal.tolist(), "duration": duration}

    def _refuse_while_moving_on_its_own(self, cmd: str, loop) -> None:
        """A new move starts from the desired state at rest: not during a re-arm's recovery move (whose
        offset is not the trajectory's), and for set_target not while the current move is under way."""
        if getattr(loop, "recovering", False):
            raise Refused(f"{cmd}: the robot is rejoining its trajectory after a re-arm; wait until it has")
        if cmd == "set_target":
            moving = np.flatnonzero(np.abs(loop.qd_d) > 1e-9)
            if moving.size:
                k = int(moving[0])
                raise Refused(f"set_target: the current move is under way (joint '{self.joints[k]}' desired "
                              f"velocity {loop.qd_d[k]:.4g}); wait until it has ended")

    def _validate_set_cpg(self, req):
        traj = self.loop.trajectory
        if getattr(self.loop, "recovering", False):
            self._refuse_while_moving_on_its_own("set_cpg", self.loop)
        custom = getattr(traj, "validate_cpg_request", None)  # a CPG with its own parameters and limits
        if custom is not None:
            try:
                return custom({k: v for k, v in req.items() if k in COMMANDS["set_cpg"]})
            except ValueError as exc:
                raise Refused(str(exc)) from None
        oscillator = ("amplitude", "frequency", "phase", "center")
        if not all(isinstance(getattr(traj, name, None), np.ndarray) for name in oscillator):
            raise Refused(f"set_cpg: needs an oscillator trajectory (sinusoid or a CPG); this loop runs "
                          f"{type(traj).__name__} (min_jerk: use set_target)")
        params = set(req) & COMMANDS["set_cpg"]
        if not params:
            raise Refused("set_cpg: give at least one of " + ", ".join(sorted(COMMANDS["set_cpg"])))
        clean = {}
        amp = _vector(req["amplitude"], self.n, "amplitude", 0.0) if "amplitude" in req else traj.amplitude
        center = _vector(req["center"], self.n, "center") if "center" in req else traj.center
        freq = _vector(req["frequency"], self.n, "frequency", 0.0, self.frequency_max, low_open=True) \
            if "frequency" in req else None
        phase = _vector(req["phase"], self.n, "phase", -2 * math.pi, 2 * math.pi) if "phase" in req else None
        pattern = None
        if "pattern" in req:
            patterns = getattr(traj, "patterns", None)
            if patterns is None:
                raise Refused(f"pattern: the trajectory {type(traj).__name__} has no patterns")
            pattern = req["pattern"]
            if not isinstance(pattern, str) or pattern not in patterns:
                raise Refused(f"pattern: must be one of {list(patterns)}, got {str(pattern)[:40]!r}")
            clean["pattern"] = pattern
        if "amplitude" in req or "center" in req:
            for i in range(self.n):
                if center[i] - amp[i] < self.q_low[i] or center[i] + amp[i] > self.q_high[i]:
                    raise Refused(f"joint {i} ({self.joints[i]}): center +- amplitude = [{center[i] - amp[i]:g}, "
                                  f"{center[i] + amp[i]:g}] leaves the soft limits "
                                  f"[{self.q_low[i]:g}, {self.q_high[i]:g}]")
        problem = self.loop.safety.oscillation_violation(amp, traj.frequency if freq is None else freq)
        if problem:
            raise Refused(f"set_cpg: {problem}")
        for name, v in (("amplitude", amp), ("center", center), ("frequency", freq), ("phase", phase)):
            if name in req:
                clean[name] = v.tolist()

        def apply(loop):
            self._refuse_while_moving_on_its_own("set_cpg", loop)
            tr = loop.trajectory
            t = loop.cycle * loop.period
            before = [np.empty(self.n) for _ in range(3)]
            tr.sample(t, *before)
            saved = {name: getattr(tr, name).copy() for name in ("amplitude", "center", "phase", "frequency")}
            omega_saved = getattr(tr, "_omega", None)
            omega_saved = None if omega_saved is None else omega_saved.copy()
            change(tr, t)
            after = [np.empty(self.n) for _ in range(3)]
            tr.sample(t, *after)
            step = np.abs(after[0] - before[0])
            allowed = loop.safety.velocity_bound * loop.period
            k = int(np.argmax(step - allowed))
            if step[k] > allowed[k]:
                for name, value in saved.items():
                    getattr(tr, name)[:] = value
                if omega_saved is not None:
                    tr._omega[:] = omega_saved
                raise Refused(f"set_cpg: the change would step joint '{self.joints[k]}' desired position by "
                              f"{step[k]:.4g} at once (more than its velocity bound allows in one cycle, "
                              f"{allowed[k]:.3g}); change amplitude, center or phase where they leave the "
                              "position unchanged, or in smaller steps")
            return ", ".join(f"{k}={v}" for k, v in clean.items())

        def change(tr, t):
            if "amplitude" in req:
                tr.amplitude[:] = amp
            if "center" in req:
                tr.center[:] = center
            if phase is not None:
                tr.phase[:] = phase
            if freq is not None:
                omega = getattr(tr, "_omega", None)
                if omega is not None and phase is None:  # keep omega t + phase continuous at t
                    tr.phase[:] = tr.phase + (omega - 2 * np.pi * freq) * t
                tr.frequency[:] = freq
                if omega is not None:
                    omega[:] = 2 * np.pi * freq
            if pattern is not None:
                tr.set_pattern(pattern)
        return apply, clean

    def _validate_estop(self, req):
        reason = req.get("reason", "control channel")
        if not isinstance(reason, str) or len(reason) > 200:
            raise Refused("reason: expected a string of at most 200 characters")

        def apply(loop):
            loop.safety.estop(reason, operator=True)
            return f"e-stop: {reason}"
        return apply, {"reason": reason}

    def _validate_rearm(self, req):
        estop_count = self.loop.safety.estop_count  # an e-stop after this request must not be undone by it

        def apply(loop):
            from ..safety import SafetyError
            try:
                detail = loop.rearm(estop_count)
            except SafetyError as exc:
                raise Refused(str(exc)) from None
            return detail
        return apply, {}


def _binds_beyond_loopback(bind: str) -> bool:
    if not bind.startswith("tcp://"):
        return False
    host = bind[len("tcp://"):].rpartition(":")[0]
    return host not in LOOPBACK_HOSTS


def _curve_settings(secret_key, clients):
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


class CommandSchedule:
    """Control-channel commands applied at given control times (the config's ``[[schedule]]``).

    A loop boundary hook: before the first cycle whose control time reaches an
    entry's ``t``, the entry goes through :meth:`ControlServer.apply_now`
    (the same validation as a live request). ``log`` records ``(t, request,
    detail or refusal)``; a refused entry is logged, printed and skipped, it
    does not stop the loop. Idle cost: one comparison per cycle.
    """

    def __init__(self, server: ControlServer, entries):
        self.server = server
        self.entries = sorted((dict(e) for e in entries), key=lambda e: e["t"])
        self.log: list[tuple[float, dict, str]] = []
        self._next = 0
        self._next_t = self.entries[0]["t"] if self.entries else math.inf
        server.loop.boundary_hooks.append(self)

    def check(self) -> None:
        """Validate every entry against the loop as built (nothing is applied); raises Refused naming it."""
        for k, entry in enumerate(self.entries):
            request = {key: v for key, v in entry.items() if key != "t"}
            try:
                cmd, request = self.server._checked(request, {"cmd"})
                if cmd == "status":
                    raise Refused("cmd: 'status' is not a change")
                getattr(self.server, f"_validate_{cmd}")(request)
            except Refused as exc:
                raise Refused(f"[[schedule]] {k} (t = {entry['t']:g} s): {exc}") from None

    def __call__(self, loop) -> None:
        t = loop.cycle * loop.period
        while t >= self._next_t - 1e-12:
            entry = self.entries[self._next]
            request = {key: v for key, v in entry.items() if key != "t"}
            try:
                outcome = self.server.apply_now(request)
            except Refused as exc:
                outcome = f"refused: {exc}"
                print(f"rtctl: scheduled {request.get('cmd')} at t = {t:.6g} s {outcome}", flush=True)
            self.log.append((t, request, outcome))
            self._next += 1
            self._next_t = self.entries[self._next]["t"] if self._next < len(self.entries) else math.inf
