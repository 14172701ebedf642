"""The run-time control channel: a ZeroMQ REP endpoint (off by default, loopback by default).

Requests are msgpack or JSON maps (never pickle); the reply uses the request's
encoding (garbage gets a msgpack reply). Every request has ``"cmd"``, optionally
``"id"`` (echoed) and ``"token"`` (required, compared in constant time, when the
server has one). Commands and their fields:

=============  ======================================================================
``status``     -- ; replies cycle, t, tripped, trip_reason, kp, kd, trajectory, ...
``set_gains``  ``kp``, ``kd``: number or one per actuated joint, in [0, kp_max] / [0, kd_max]
``set_target`` ``goal`` (one per joint, inside the soft position limits), ``duration``
               (s, (0, duration_max], default 1): a new minimum-jerk move from the
               current desired position, starting at the next cycle (min_jerk only)
``set_cpg``    ``amplitude`` (>= 0), ``frequency`` (Hz, (0, frequency_max]), ``phase``
               (rad, [-2 pi, 2 pi]), ``center``, ``pattern`` (str, when the trajectory
               has ``patterns``): oscillator parameters (sinusoid, or any trajectory
               with these arrays); ``center +- amplitude`` must stay inside the soft
               limits; a frequency change keeps the oscillator phase continuous. A
               trajectory with ``validate_cpg_request`` (the jaw robot's chewing CPG)
               checks the request itself (its own fields and therapist limits)
``estop``      ``reason`` (str): latch the safe state
``rearm``      -- : leave the safe state (refused with the blockers' reasons)
=============  ======================================================================

Validation happens in the server thread: a wrong type, an unknown field, a
non-finite or out-of-range value or undecodable bytes is refused with the
reason and never reaches the loop. An accepted request is queued and applied by
the loop itself at the next cycle boundary (:meth:`ControlServer.drain`, a loop
boundary hook; it costs one deque truth test per cycle when idle); the reply
says at which cycle. If the loop does not reach a boundary within
``apply_timeout`` s (not running), the request is dropped and refused -- except
``estop``, which then latches the monitor directly. Every accepted change is
published as an ``rtctl/event`` of kind ``control``.
"""
from __future__ import annotations

import collections
import hmac
import json
import math
import threading

import msgpack
import numpy as np
import zmq

from .publisher import check_endpoint

COMMANDS = {
    "status": set(),
    "set_gains": {"kp", "kd"},
    "set_target": {"goal", "duration"},
    "set_cpg": {"amplitude", "frequency", "phase", "center", "pattern"},
    "estop": {"reason"},
    "rearm": set(),
}
COMMON = {"cmd", "id", "token"}
MAX_REQUEST_BYTES = 65536


class Refused(ValueError):
    """A request that is refused; the message is the reason sent back."""


def _number(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(f"{name}: expected a number, got {type(value).__name__} {value!r:.60}")
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


class _Pending:
    __slots__ = ("request", "apply", "done", "reply", "state", "lock")

    def __init__(self, request, apply):
        self.request, self.apply = request, apply
        self.done = threading.Event()
        self.reply = None
        self.state = "pending"
        self.lock = threading.Lock()


class ControlServer:
    """REP server for ``loop``; its :meth:`drain` must be one of the loop's ``boundary_hooks`` (``attach`` does it)."""

    def __init__(self, loop, *, endpoint: str = "tcp://127.0.0.1:5557", token: str | None = None,
                 kp_max: float = 1e5, kd_max: float = 1e4, frequency_max: float = 20.0, duration_max: float = 60.0,
                 apply_timeout: float = 1.0, allow_remote: bool = False, telemetry=None,
                 context: zmq.Context | None = None):
        self.loop = loop
        self._bind = check_endpoint(endpoint, allow_remote, "control endpoint")
        self.token = token or None
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
        self.endpoint = ""
        self.accepted = 0
        self.refused = 0
        safety = loop.safety
        ctl = loop.controller
        self.n = ctl.n
        self.joints = list(ctl.joint_names)
        lo = loop.model.lower[ctl.q_index] + safety.position_margin
        hi = loop.model.upper[ctl.q_index] - safety.position_margin
        self.q_low, self.q_high = lo, hi
        loop.boundary_hooks.append(self.drain)

    # -- lifetime ------------------------------------------------------------------------
    def start(self) -> "ControlServer":
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def _run(self) -> None:
        try:
            sock = self._ctx.socket(zmq.REP)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
            sock.bind(self._bind)
            self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        except zmq.ZMQError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                if not poller.poll(100):
                    continue
                raw = sock.recv()
                reply, use_json = self.handle_bytes(raw)
                sock.send(json.dumps(reply).encode() if use_json else msgpack.packb(reply, use_bin_type=True))
        finally:
            sock.close(linger=0)

    # -- requests --------------------------------------------------------------------------
    def handle_bytes(self, raw: bytes):
        """Decode, validate, apply; returns (reply dict, reply as JSON?). Never raises."""
        use_json = raw[:1] in (b"{", b" ", b"\n")
        try:
            if use_json:
                try:
                    request = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as exc:
                    raise Refused(f"request is not valid JSON: {exc}") from None
            else:
                try:
                    request = msgpack.unpackb(raw, raw=False, strict_map_key=False)
                except Exception as exc:  # noqa: BLE001
                    raise Refused(f"request is neither JSON nor msgpack ({type(exc).__name__})") from None
            reply = self.handle(request)
        except Refused as exc:
            self.refused += 1
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001  (the channel must survive anything)
            self.refused += 1
            reply = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}
        return reply, use_json

    def handle(self, request) -> dict:
        if not isinstance(request, dict):
            raise Refused(f"a request must be a map with a 'cmd' field, got {type(request).__name__}")
        if self.token is not None:
            given = request.get("token")
            if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.token.encode()):
                raise Refused("missing or wrong token")
        cmd = request.get("cmd")
        if not isinstance(cmd, str) or cmd not in COMMANDS:
            raise Refused(f"unknown or missing cmd {cmd!r}; commands: {sorted(COMMANDS)}")
        unknown = sorted(str(k) for k in set(request) - COMMANDS[cmd] - COMMON)
        if unknown:
            raise Refused(f"{cmd}: unknown field '{unknown[0]}'; allowed: {sorted(COMMANDS[cmd])}")
        rid = request.get("id")
        if cmd == "status":
            reply = self.status()
        else:
            apply, clean = getattr(self, f"_validate_{cmd}")(request)
            reply = self._submit(cmd, clean, apply)
        if rid is not None and isinstance(rid, (int, str)):
            reply["id"] = rid
        return reply

    def apply_now(self, request: dict) -> str:
        """Validate and apply ``request`` at once, from the loop's own thread (a boundary hook).

        The same checks as a request over the socket (token excepted); raises
        :class:`Refused` with the reason. Returns the applied change's description.
        """
        if not isinstance(request, dict):
            raise Refused(f"a request must be a map with a 'cmd' field, got {type(request).__name__}")
        cmd = request.get("cmd")
        if not isinstance(cmd, str) or cmd not in COMMANDS or cmd == "status":
            raise Refused(f"unknown or missing cmd {cmd!r}; commands: {sorted(set(COMMANDS) - {'status'})}")
        unknown = sorted(str(k) for k in set(request) - COMMANDS[cmd] - {"cmd", "id"})
        if unknown:
            raise Refused(f"{cmd}: unknown field '{unknown[0]}'; allowed: {sorted(COMMANDS[cmd])}")
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

    def _submit(self, cmd, clean, apply) -> dict:
        pending = _Pending({"cmd": cmd, **clean}, apply)
        self._queue.append(pending)
        if not pending.done.wait(self.apply_timeout):
            with pending.lock:
                if pending.state == "pending":
                    pending.state = "cancelled"
            if pending.state == "cancelled":
                if cmd == "estop":
                    apply(self.loop)
                    self._log(pending.request, "e-stop applied directly (loop not running)")
                    self.accepted += 1
                    return {"ok": True, "applied_cycle": int(self.loop.cycle), "note": "loop not running"}
                raise Refused(f"{cmd}: not applied: the loop reached no cycle boundary within "
                              f"{self.apply_timeout:g} s (is it running?)")
            pending.done.wait()
        if pending.reply.get("ok"):
            self.accepted += 1
        else:
            self.refused += 1
        return pending.reply

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

        def apply(loop):
            tr = loop.trajectory
            t = loop.cycle * loop.period
            tr.start[:] = loop.q_d
            tr.goal[:] = goal
            tr.t0 = t
            tr.duration = duration
            tr._args = (tr.t0, tr.duration, tr.start, tr.goal)
            return f"move to {goal.tolist()} in {duration:g} s from t = {t:.6g} s"
        return apply, {"goal": goal.tolist(), "duration": duration}

    def _validate_set_cpg(self, req):
        traj = self.loop.trajectory
        custom = getattr(traj, "validate_cpg_request", None)  # a CPG with its own parameters and limits
        if custom is not None:
            try:
                return custom({k: v for k, v in req.items() if k in COMMANDS["set_cpg"]})
            except ValueError as exc:
                raise Refused(str(exc)) from None
        params = set(req) & COMMANDS["set_cpg"]
        if not params:
            raise Refused("set_cpg: give at least one of " + ", ".join(sorted(COMMANDS["set_cpg"])))
        for name in params - {"pattern"}:
            if not isinstance(getattr(traj, name, None), np.ndarray):
                raise Refused(f"set_cpg: the trajectory {type(traj).__name__} has no oscillator parameter '{name}'")
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
                raise Refused(f"set_cpg: the trajectory {type(traj).__name__} has no patterns")
            pattern = req["pattern"]
            if not isinstance(pattern, str) or pattern not in patterns:
                raise Refused(f"pattern: must be one of {list(patterns)}, got {pattern!r}")
            clean["pattern"] = pattern
        if "amplitude" in req or "center" in req:
            for i in range(self.n):
                if center[i] - amp[i] < self.q_low[i] or center[i] + amp[i] > self.q_high[i]:
                    raise Refused(f"joint {i} ({self.joints[i]}): center +- amplitude = [{center[i] - amp[i]:g}, "
                                  f"{center[i] + amp[i]:g}] leaves the soft limits "
                                  f"[{self.q_low[i]:g}, {self.q_high[i]:g}]")
        for name, v in (("amplitude", amp), ("center", center), ("frequency", freq), ("phase", phase)):
            if name in req:
                clean[name] = v.tolist()

        def apply(loop):
            tr = loop.trajectory
            t = loop.cycle * loop.period
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
            return ", ".join(f"{k}={v}" for k, v in clean.items())
        return apply, clean

    def _validate_estop(self, req):
        reason = req.get("reason", "control channel")
        if not isinstance(reason, str) or len(reason) > 200:
            raise Refused("reason: expected a string of at most 200 characters")

        def apply(loop):
            loop.safety.estop(reason)
            return f"e-stop: {reason}"
        return apply, {"reason": reason}

    def _validate_rearm(self, req):
        def apply(loop):
            from ..safety import SafetyError
            try:
                loop.safety.rearm()
            except SafetyError as exc:
                raise Refused(str(exc)) from None
            return "re-armed"
        return apply, {}


def request(endpoint: str, req: dict, timeout: float = 3.0, encoding: str = "msgpack",
            context: zmq.Context | None = None) -> dict:
    """Send one request to a control endpoint and return the decoded reply (raises TimeoutError)."""
    ctx = context or zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
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
                cmd = request.get("cmd")
                if not isinstance(cmd, str) or cmd not in COMMANDS or cmd == "status":
                    raise Refused(f"unknown or missing cmd {cmd!r}; commands: "
                                  f"{sorted(set(COMMANDS) - {'status'})}")
                unknown = sorted(str(key) for key in set(request) - COMMANDS[cmd] - {"cmd"})
                if unknown:
                    raise Refused(f"{cmd}: unknown field '{unknown[0]}'; allowed: {sorted(COMMANDS[cmd])}")
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
