"""The run-time control channel: a ZeroMQ endpoint (off by default, loopback by default).

Clients are ordinary ZeroMQ REQ sockets (any language); the server is a ROUTER,
so that one slow or hostile client can never hold the channel: every request is
answered on its own, and an e-stop is answered at once whatever else is pending.
A request is one frame holding a msgpack or JSON map (never pickle); the reply
uses the request's encoding (garbage gets a msgpack reply). Every request has
``"cmd"``, optionally ``"id"`` (echoed: an int64 or a short string); a command marked
*token* also ``"session"`` and ``"proof"`` from a ``hello`` just before (never the token).

=================  ======================================================================
``hello``          open; ``nonce``: opens a session, answered with the server's proof
                   (:mod:`.handshake`)
``status``         open; replies cycle, t, tripped, trip_reason, kp, kd, trajectory, limits
``estop``          open; ``reason`` (str): latch the safe state, applied by the channel's
                   thread itself, at once (not at a cycle boundary)
``set_gains``      token; ``kp``, ``kd``: number or one per actuated joint, in [0, kp_max] / [0, kd_max]
``set_target``     token; ``goal`` (one per joint, inside the soft position limits),
                   ``duration`` (s, (0, duration_max], default 1): a new minimum-jerk move
                   from the current desired position (min_jerk only), refused when its peak
                   velocity 1.875 |dq| / T or acceleration 5.774 |dq| / T^2 exceeds a joint's
                   limit (the monitor's velocity bound and ``acceleration_limit``)
``set_cpg``        token; ``amplitude`` (>= 0), ``frequency`` (Hz, (0, frequency_max]),
                   ``phase`` (rad, [-2 pi, 2 pi]), ``center``, ``pattern``: oscillator
                   parameters; ``center +- amplitude`` inside the soft limits and the peak
                   velocity / acceleration inside the joint limits. A trajectory with
                   ``validate_cpg_request`` (the jaw robot's chewing CPG) checks the request
                   itself (its own fields and therapist limits)
``set_impedance``  token; ``stiffness``, ``damping`` (6 values x y z rx ry rz, or 36: a
                   symmetric 6 x 6 row-major), ``damping_ratio``, ``nullspace_stiffness`` (one or
                   one per joint, [0, kp_max]) of an impedance controller: K symmetric positive
                   definite, D positive semi-definite, within the controller's
                   ``impedance_limits()`` (``status`` lists them); the controller blends K and D in
                   without a torque step. Refused for other controllers
``rearm``          token; leave the safe state (refused with the blockers' reasons); the
                   loop rejoins its trajectory by a recovery move (:meth:`ControlLoop.rearm`)
=================  ======================================================================

Why ``status`` and ``estop`` need no token: reading the state moves nothing, and an
e-stop only ever makes the robot safer; like the red button on the robot, it must work
for whoever is there, without a credential that might be missing in an emergency. The
cost, that any local process that reaches the endpoint can stop the robot, is a denial
of service that ends in the safe state. Every other command needs the token
(:mod:`rtctl.operator.auth`), which never crosses the wire: client and server prove to each
other that they hold it, for this server and this session only (:mod:`.handshake`).

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

``ControlServer`` serves the channel from a thread of the loop's process; ``rtctl run`` serves it from an
operator process instead (:mod:`rtctl.operator`: the socket, decoding and authentication there, the loop's
process taking validated commands from :mod:`.inbox`), with the same requests and replies.

Here: the server (token, pending queue, the loop side; the socket is :mod:`.channel`'s) and :class:`CommandSchedule`. The
request format and structure checks are in :mod:`.requests`, each command's checks in
:mod:`.commands`, the client in :mod:`.client`; their names are importable from here too.
"""
from __future__ import annotations

import collections
import math
import time

import zmq

from .channel import MAX_FRAMES, Pending, RouterChannel
from .client import ServerNotTrusted, request
from .commands import CommandValidation
from .requests import (COMMANDS, COMMON, HELLO, INT64_MAX, INT64_MIN, MAX_DEPTH, MAX_ELEMENTS,
                       MAX_REQUEST_BYTES, MAX_STRING, OPEN_COMMANDS, Refused, check_command, check_request_structure,
                       decode_request, encode_reply)

__all__ = ["COMMANDS", "COMMON", "INT64_MAX", "INT64_MIN", "MAX_DEPTH", "MAX_ELEMENTS", "MAX_FRAMES", "MAX_PENDING",
           "MAX_REQUEST_BYTES", "MAX_STRING", "OPEN_COMMANDS", "CommandSchedule", "ControlServer", "Refused",
           "ServerNotTrusted", "check_command", "check_request_structure", "decode_request", "encode_reply",
           "request"]

MAX_PENDING = 64       # requests waiting for a cycle boundary; beyond: refused at once


class ControlServer(RouterChannel, CommandValidation):
    """Control channel of ``loop`` served by a thread of the loop's process; its :meth:`drain` is one of the
    loop's ``boundary_hooks`` (added here).

    ``token`` is required to :meth:`start` a socket (a server built without one only validates and
    applies requests in-process, as :class:`CommandSchedule` and the loop's side of the operator process,
    :mod:`rtctl.operator.inbox`, do). ``curve_secret_key`` (path of a ``.key_secret`` certificate) and
    ``curve_clients`` (directory of allowed clients' ``.key`` certificates) turn on CURVE encryption and
    client authentication; both are required when ``allow_remote`` lets the endpoint bind beyond loopback
    (:class:`~rtctl.operator.channel.RouterChannel`). The checks of each change command,
    ``_validate_<command>``, come from :class:`~rtctl.operator.commands.CommandValidation`.
    """

    def __init__(self, loop, *, endpoint: str = "tcp://127.0.0.1:5557", token: str | None = None,
                 kp_max: float = 1e5, kd_max: float = 1e4, frequency_max: float = 20.0, duration_max: float = 60.0,
                 apply_timeout: float = 1.0, allow_remote: bool = False, telemetry=None,
                 context: zmq.Context | None = None, curve_secret_key=None, curve_clients=None,
                 token_source: str = "the caller"):
        super().__init__(endpoint=endpoint, token=token, allow_remote=allow_remote, context=context,
                         curve_secret_key=curve_secret_key, curve_clients=curve_clients, token_source=token_source)
        self.loop = loop
        self.kp_max, self.kd_max = float(kp_max), float(kd_max)
        self.frequency_max, self.duration_max = float(frequency_max), float(duration_max)
        self.apply_timeout = float(apply_timeout)
        self.telemetry = telemetry if telemetry is not None else loop.telemetry
        self._queue: collections.deque = collections.deque()
        safety = loop.safety
        ctl = loop.controller
        self.n = ctl.n
        self.joints = list(ctl.joint_names)
        self.q_low, self.q_high = safety.soft_limits()
        loop.boundary_hooks.append(self.drain)

    # -- requests --------------------------------------------------------------------------
    def handle(self, request, deferred: bool = False):
        """Validate and apply ``request``; a reply dict, or with ``deferred`` a :class:`Pending` to answer
        once the loop has applied it. Raises :class:`Refused` with the reason."""
        cmd, request, rid = self.admit(request)
        if cmd == HELLO:
            reply = {"ok": True, **self._sessions.hello(request)}
        elif cmd == "status":
            reply = self.status()
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
        cmd, request = check_command(request, {"cmd", "id"})
        if cmd in ("status", HELLO):
            raise Refused(f"cmd: {cmd!r} is not a change; commands: {sorted(set(COMMANDS) - {'status'})}")
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
                           "q_high": self.q_high.tolist(),
                           **self._impedance_limits()}}

    def _impedance_limits(self) -> dict:
        """``{"impedance": ...}``: what set_impedance may set on this loop's controller (empty for others)."""
        limits = self.loop.controller.impedance_limits()
        return {} if limits is None else {"impedance": limits}

    def _enqueue(self, cmd, clean, apply) -> Pending:
        if len(self._queue) >= MAX_PENDING:
            raise Refused(f"{cmd}: {MAX_PENDING} requests are already waiting for the loop; try again")
        pending = Pending({"cmd": cmd, **clean}, apply)
        pending.deadline = time.monotonic() + self.apply_timeout
        self._queue.append(pending)
        return pending

    def _outcome(self, pending: Pending):
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
        tele = self.telemetry if self.telemetry is not None else self.loop.telemetry
        if tele is not None:
            loop = self.loop
            tele.event("control", f"{request['cmd']}: {detail}", loop.cycle, loop.cycle * loop.period, request)


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
                cmd, request = check_command(request, {"cmd"})
                if cmd in ("status", HELLO):
                    raise Refused(f"cmd: {cmd!r} is not a change")
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
