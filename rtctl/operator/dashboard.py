"""``rtctl dashboard``: one static page on localhost plus a websocket bridge from the ZeroMQ stream.

The server (``websockets``, asyncio) serves ``rtctl/data/dashboard/`` (the page,
its script and ``plot.js``, a small canvas plotter shipped in the package: no
CDN) over HTTP and the bridge on ``/ws`` on the same port. The bridge
subscribes to the telemetry endpoint, keeps the wake-up-latency histogram over
every sample, and every ~33 ms (30 Hz) sends each browser one JSON frame: the
samples since the last frame decimated to at most ``points_per_frame``, the
histogram, the safety state, how old the newest samples are (``age``, s; ``stale``
beyond :data:`STALE_AFTER_S`: the loop or its publisher stopped sending, and the
page greys the safety state out) and new events. Each client has its own bounded
queue; when a browser lags, its oldest frames are dropped (and counted), never
the bridge or the loop.

Who may talk to it. Any web page the operator opens can make the browser send
requests to 127.0.0.1, so every request is checked before it is answered; a
refused one gets ``403`` with a one-line text body saying why:

* the ``Host`` header must be the address the dashboard is bound to,
  ``HOST:PORT`` (for a loopback bind any of ``127.0.0.1``, ``localhost`` and
  ``[::1]`` with the bound port): a page on a DNS-rebound name (``evil.example``
  resolving to 127.0.0.1) is refused, static files included;
* a websocket upgrade on ``/ws`` must carry an ``Origin`` header that is the
  dashboard's own origin, ``http://`` + one of those ``HOST:PORT``: another
  site's page cannot read telemetry or press the buttons (a missing ``Origin``
  is refused too);
* the page is sent with ``X-Frame-Options: DENY`` and a Content-Security-Policy
  (scripts and connections to itself only, no framing), so no other site can
  frame its buttons;
* at most ``max_clients`` websockets at once (``503`` beyond).

A wildcard bind (``0.0.0.0``, ``::``) is refused: the ``Host`` check needs the
address browsers use.

Commands. The page sends ``{"cmd": ..., "token": ...}`` text messages of at most
:data:`MAX_COMMAND_BYTES` (a longer one closes that connection, code 1009), handled
one at a time per client with at most :data:`MAX_QUEUED_COMMANDS` waiting; only
``estop``, ``rearm`` and ``status`` are forwarded to the control endpoint as
control-channel requests. ``estop`` and ``status`` need no token and never use
one (a mistyped token must not stand between the operator and the e-stop).
``rearm`` uses the token the operator typed into the page's password field
(kept in the page only: no storage, no URL) as ``rtctl control`` does
(:mod:`.handshake`): the control endpoint must prove it holds that token before
the dashboard proves it too, and the token itself is never sent; the dashboard
holds no token of its own. Anything else (binary, not JSON, not a map, too deep, unknown fields)
gets an ``{"ok": false, "error": ...}`` reply and the connection stays up.

Memory is bounded whether or not a browser is connected: batches waiting for
the next frame are kept only while a client is connected, in a
``deque(maxlen=MAX_PENDING_BATCHES)``; events in a ``deque(maxlen=MAX_EVENTS)``
(recent ones reach the next browser to connect); both drop the oldest and count
it (``bridge_drops`` in each frame). The telemetry subscription queues at most
:data:`SUBSCRIBER_HWM` messages (beyond, ZeroMQ drops them; counted in ``lost``).
"""
from __future__ import annotations

import asyncio
import collections
import json
import mimetypes
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import zmq
import zmq.asyncio

from ..options import show
from ..telemetry.endpoints import LOOPBACK_HOSTS, check_connect_endpoint, tcp_in_use
from ..telemetry.jsonvalues import dumps
from ..telemetry.schema import TOPIC_EVENT, TOPIC_META, TOPIC_SAMPLES, SchemaError, decode
from ..telemetry.subscriptions import MAX_STREAM_MESSAGE_BYTES
from ..telemetry.tools import PublisherWait
from ..telemetry.web import allowed_hosts, host_refusal, origin_refusal, url_host
from .auth import MAX_TOKEN_BYTES
from .client import decode_reply
from .handshake import ClientHandshake, ServerNotTrusted
from .requests import MAX_REPLY_BYTES

STATIC_DIR = Path(__file__).resolve().parent.parent / "data" / "dashboard"
HIST_EDGES_US = np.linspace(0.0, 500.0, 51)  # 10 us bins, and one more count: the overflow, above 500 us
BROWSER_COMMANDS = ("estop", "rearm", "status")
TOKEN_COMMANDS = ("rearm",)
COMMAND_FIELDS = {"cmd", "token"}
DISPLAYED_FIELDS = ("t", "q", "q_d", "error", "effort_cmd", "latency")
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")
MAX_COMMAND_BYTES = MAX_TOKEN_BYTES + 1024
MAX_QUEUED_COMMANDS = 4
MAX_PENDING_BATCHES = 64
MAX_EVENTS = 200
MAX_EVENT_DETAIL = 1000
CONTROL_TIMEOUT_S = 3.0
STALE_AFTER_S = 0.5      # no samples for this long: the page marks what it shows as stale
SUBSCRIBER_HWM = 200
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
                           "form-action 'none'")


class Dashboard:
    def __init__(self, telemetry_endpoint: str, control_endpoint: str | None = None, host: str = "127.0.0.1",
                 port: int = 8050, rate_hz: float = 30.0, points_per_frame: int = 40, queue_size: int = 8,
                 allow_remote: bool = False, max_clients: int = 16, out=None):
        if host not in LOOPBACK_HOSTS and not allow_remote:
            raise ValueError(f"dashboard host {host!r} is not loopback: the page shows the robot live and has its "
                             "e-stop and re-arm buttons, so by default only this machine may open it; add "
                             "--allow-remote (allow_remote=True) to serve it beyond this machine on purpose")
        if host in WILDCARD_HOSTS:
            raise ValueError(f"dashboard host {host!r} binds every address, so requests cannot be checked against "
                             "the address browsers use (DNS-rebinding defence); bind that address itself")
        check_connect_endpoint(telemetry_endpoint, "telemetry endpoint")
        if control_endpoint:
            check_connect_endpoint(control_endpoint, "control endpoint")
        self.telemetry_endpoint = telemetry_endpoint
        self.out = out  # where "waiting for a publisher" goes (None: stderr)
        self.control_endpoint = control_endpoint
        self.host, self.port = host, int(port)
        self.frame_period = 1.0 / rate_hz
        self.points = int(points_per_frame)
        self.queue_size = int(queue_size)
        self.max_clients = int(max_clients)
        self.meta = None
        self.clients: dict = {}
        self.client_drops = 0
        self.pending_dropped = 0
        self.events_dropped = 0
        self.samples = 0
        self.lost = 0
        self.publisher_dropped = 0
        self._next_index = None
        self._pending: collections.deque = collections.deque(maxlen=MAX_PENDING_BATCHES)
        self._events: collections.deque = collections.deque(maxlen=MAX_EVENTS)
        self._hist = np.zeros(len(HIST_EDGES_US), dtype=np.int64)   # the last: above the last edge
        self._tripped = 0
        self._last_t = 0.0
        self._last_batch = None   # time.monotonic() when the last samples arrived
        self._loop = None
        self._stop = None
        self._thread = None
        self.allowed_hosts: frozenset = frozenset()
        self.allowed_origins: frozenset = frozenset()
        self.url = ""

    @property
    def bridge_drops(self) -> int:
        return self.pending_dropped + self.events_dropped

    def _allow(self, port: int) -> None:
        self.allowed_hosts = allowed_hosts(self.host, port)
        self.allowed_origins = frozenset(f"http://{h}" for h in self.allowed_hosts)

    # -- HTTP ---------------------------------------------------------------------------------
    def _refusal(self, request, path: str) -> str | None:
        """Why ``request`` is refused (DNS rebinding, foreign origin), or None."""
        own = f"{url_host(self.host)}:{self.port}"
        refusal = host_refusal(request, self.allowed_hosts, own, "this dashboard")
        if refusal is not None or path != "/ws":
            return refusal
        return origin_refusal(request, self.allowed_origins, f"this dashboard's own origin http://{own}")

    def _process_request(self, connection, request):
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        path = request.path.split("?", 1)[0]
        refusal = self._refusal(request, path)
        if refusal is not None:
            return connection.respond(403, refusal + "\n")
        if path == "/ws":
            if len(self.clients) >= self.max_clients:
                return connection.respond(503, f"refused: {self.max_clients} dashboard clients already connected\n")
            return None
        name = "index.html" if path in ("/", "") else path.lstrip("/")
        try:
            target = (STATIC_DIR / name).resolve()
            found = STATIC_DIR in target.parents and target.is_file()
        except (OSError, ValueError):
            found = False
        if not found:
            return Response(404, "Not Found", Headers({"Content-Type": "text/plain", "Content-Length": "9"}),
                            b"not found")
        body = target.read_bytes()
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return Response(200, "OK", Headers({"Content-Type": ctype, "Content-Length": str(len(body)),
                                            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                                            "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
                                            "Content-Security-Policy": CONTENT_SECURITY_POLICY}), body)

    # -- websocket clients --------------------------------------------------------------------------
    async def _client(self, ws):
        from websockets.exceptions import ConnectionClosed

        queue: asyncio.Queue = asyncio.Queue(self.queue_size)
        self.clients[ws] = queue
        sender = asyncio.create_task(self._sender(ws, queue))
        try:
            if self.meta is not None:
                self._offer(queue, dumps({"type": "meta", "meta": self.meta}, default=str))
            async for message in ws:
                reply = await self._reply_to(message)
                self._offer(queue, dumps({**reply, "type": "reply"}, default=str))
        except ConnectionClosed:
            pass
        finally:
            self.clients.pop(ws, None)
            sender.cancel()

    async def _sender(self, ws, queue):
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                text = await queue.get()
                await ws.send(text)
        except ConnectionClosed:
            pass

    def _offer(self, queue: asyncio.Queue, text: str) -> None:
        """Put with drop-oldest."""
        while queue.full():
            queue.get_nowait()
            self.client_drops += 1
        queue.put_nowait(text)

    async def _reply_to(self, message) -> dict:
        try:
            return await self._command(message)
        except Exception as exc:  # noqa: BLE001  (one bad command must not end the connection)
            return {"ok": False, "error": f"dashboard: internal error on this command ({type(exc).__name__})"}

    async def _command(self, message) -> dict:
        if not isinstance(message, str):
            return {"ok": False, "error": "a command is a JSON text message, not binary"}
        try:
            req = json.loads(message)
        except RecursionError:
            return {"ok": False, "error": "command nested too deeply"}
        except ValueError:
            return {"ok": False, "error": "command is not valid JSON"}
        if not isinstance(req, dict):
            return {"ok": False, "error": f'a command is a JSON object like {{"cmd": "estop"}}, '
                                          f"got {type(req).__name__}"}
        cmd = req.get("cmd")
        if not isinstance(cmd, str) or cmd not in BROWSER_COMMANDS:
            shown = show(cmd) if isinstance(cmd, str) else type(cmd).__name__
            return {"ok": False, "error": f"unknown command {shown}; the dashboard sends only "
                                          f"{list(BROWSER_COMMANDS)}"}
        unknown = sorted(str(k)[:40] for k in set(req) - COMMAND_FIELDS)
        if unknown:
            return {"ok": False, "cmd": cmd, "error": f"unknown field {unknown[0]!r}; a command has only "
                                                      f"{sorted(COMMAND_FIELDS)}"}
        token = req.get("token")
        if token is not None and not (isinstance(token, str) and len(token) <= MAX_TOKEN_BYTES):
            return {"ok": False, "cmd": cmd, "error": f"token: expected a string of at most {MAX_TOKEN_BYTES} "
                                                      "characters"}
        if not self.control_endpoint:
            return {"ok": False, "cmd": cmd, "error": "no control endpoint (start rtctl dashboard with --control)"}
        out = {"cmd": cmd}
        if cmd == "estop":
            out["reason"] = "dashboard e-stop button"
        handshake = None
        if cmd in TOKEN_COMMANDS:
            if not token:
                return {"ok": False, "cmd": cmd, "error": f"{cmd} needs the control token: type it into the token "
                                                          "field"}
            handshake = ClientHandshake(token, self.control_endpoint)
        return {**await self._forward(out, handshake), "cmd": cmd}

    async def _forward(self, request: dict, handshake=None) -> dict:
        """One control-channel request, after ``handshake`` (:mod:`.handshake`: the token is never sent, and
        nothing is proved to an endpoint that does not prove itself); the reply map, or an error reply."""
        sock = self._zctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_REPLY_BYTES)
        try:
            sock.connect(self.control_endpoint)
            if handshake is not None:
                hello = await self._ask(sock, handshake.hello())
                try:
                    request = handshake.authenticate(hello, request)
                except ServerNotTrusted as exc:
                    return {"ok": False, "error": str(exc)}
            reply = await self._ask(sock, request)
        finally:
            sock.close(linger=0)
        return {k: v for k, v in reply.items() if k not in ("token", "proof", "session")}

    async def _ask(self, sock, request: dict) -> dict:
        try:   # a REQ send waits for a connected peer, which a refused handshake never gives: bounded too
            await asyncio.wait_for(sock.send(msgpack.packb(request, use_bin_type=True)), CONTROL_TIMEOUT_S)
        except asyncio.TimeoutError:
            return {"ok": False, "error": f"no connection to the control endpoint within {CONTROL_TIMEOUT_S:g} s"}
        if not await sock.poll(int(CONTROL_TIMEOUT_S * 1000)):
            return {"ok": False, "error": f"control endpoint did not answer within {CONTROL_TIMEOUT_S:g} s"}
        try:
            reply = decode_reply(await sock.recv())
        except ValueError as exc:
            return {"ok": False, "error": str(exc)}
        if not isinstance(reply, dict):
            return {"ok": False, "error": f"control endpoint sent a {type(reply).__name__}, not a map"}
        return {str(k): v for k, v in reply.items()}

    # -- ZeroMQ side -----------------------------------------------------------------------------------
    async def _zmq_reader(self):
        sub = self._zctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, SUBSCRIBER_HWM)
        sub.setsockopt(zmq.MAXMSGSIZE, MAX_STREAM_MESSAGE_BYTES)
        sub.connect(self.telemetry_endpoint)
        sub.setsockopt(zmq.SUBSCRIBE, b"rtctl/")
        waiting = PublisherWait(self.telemetry_endpoint, self.out)   # said once; the page is served meanwhile
        try:
            while True:
                if not await sub.poll(200):
                    waiting.idle()
                    continue
                waiting.received()
                topic, payload = (await sub.recv_multipart())[:2]
                try:
                    msg = decode(topic, payload)
                except SchemaError as exc:
                    self._add_event({"kind": "decode", "detail": str(exc)})
                    continue
                if topic == TOPIC_SAMPLES:
                    self._take_batch(msg)
                elif topic == TOPIC_META:
                    first = self.meta is None
                    self.meta = msg
                    if first:
                        text = dumps({"type": "meta", "meta": msg}, default=str)
                        for q in self.clients.values():
                            self._offer(q, text)
                elif topic == TOPIC_EVENT:
                    self._add_event({k: msg.get(k) for k in ("kind", "detail", "cycle", "t")})
        finally:
            sub.close(linger=0)

    def _take_batch(self, msg):
        first, count = msg["first"], msg["count"]
        if self._next_index is not None and first > self._next_index:
            self.lost += first - self._next_index
        self._next_index = first + count
        self.samples += count
        self.publisher_dropped = msg.get("dropped", 0)
        f = msg["fields"]
        lat = np.asarray(f["latency"]) * 1e6
        idx = np.clip(np.searchsorted(HIST_EDGES_US, lat, side="right") - 1, 0, len(self._hist) - 1)
        np.add.at(self._hist, idx, 1)
        self._tripped = f["tripped"][-1]
        self._last_t = f["t"][-1]
        self._last_batch = time.monotonic()
        if not self.clients:
            return
        if len(self._pending) == self._pending.maxlen:
            self.pending_dropped += 1
        self._pending.append({k: f[k] for k in DISPLAYED_FIELDS})

    def _add_event(self, event: dict) -> None:
        detail = event.get("detail")
        if isinstance(detail, str) and len(detail) > MAX_EVENT_DETAIL:
            event["detail"] = detail[:MAX_EVENT_DETAIL] + "..."
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(event)

    def _frame(self) -> str:
        batches = list(self._pending)
        self._pending.clear()
        data = {k: [] for k in DISPLAYED_FIELDS}
        for f in batches:
            for k in data:
                data[k].extend(f[k])
        n = len(data["t"])
        if n > self.points:
            pick = np.linspace(0, n - 1, self.points).round().astype(int)
            data = {k: [v[i] for i in pick] for k, v in data.items()}
        events = list(self._events)
        self._events.clear()
        age = self.data_age()
        return dumps({"type": "frame", **data, "hist_edges_us": HIST_EDGES_US.tolist(),
                           "hist": self._hist.tolist(), "tripped": int(self._tripped), "t_now": self._last_t,
                           "age": age, "stale": age is not None and age > STALE_AFTER_S,
                           "samples": self.samples, "lost": self.lost, "publisher_dropped": self.publisher_dropped,
                           "client_drops": self.client_drops, "bridge_drops": self.bridge_drops,
                           "events": events})

    def data_age(self) -> float | None:
        """Seconds since the last samples arrived (None: none yet)."""
        return None if self._last_batch is None else time.monotonic() - self._last_batch

    async def _pusher(self):
        """A frame every ``frame_period`` once samples have come, new ones or not: each says how old the data
        is (``age``, s) and whether that is more than :data:`STALE_AFTER_S` (``stale``)."""
        while True:
            await asyncio.sleep(self.frame_period)
            if not self.clients:
                self._pending.clear()
                continue
            if not self._pending and not self._events and self._last_batch is None:
                continue
            text = self._frame()
            for q in list(self.clients.values()):
                self._offer(q, text)

    # -- running ----------------------------------------------------------------------------------------
    async def serve(self, started=None):
        from websockets.asyncio.server import serve

        self._zctx = zmq.asyncio.Context()
        self._stop = asyncio.Event()
        bind_host = "127.0.0.1" if self.host == "localhost" else self.host.strip("[]")
        try:
            listening = await serve(self._client, bind_host, self.port, process_request=self._process_request,
                                    max_size=MAX_COMMAND_BYTES, max_queue=MAX_QUEUED_COMMANDS)
        except OSError as exc:
            self._zctx.term()
            raise tcp_in_use(exc, bind_host, self.port) from None
        async with listening as server:
            port = server.sockets[0].getsockname()[1]
            self.port = port
            self._allow(port)
            self.url = f"http://{url_host(self.host)}:{port}/"
            tasks = [asyncio.create_task(self._zmq_reader()), asyncio.create_task(self._pusher())]
            if started is not None:
                started(self.url)
            try:
                await self._stop.wait()
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        self._zctx.term()

    def start(self) -> str:
        """Serve from a background thread; returns the page URL."""
        ready = threading.Event()
        failed = []

        def main():
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self.serve(lambda url: ready.set()))
            except OSError as exc:
                failed.append(exc)
                ready.set()

        self._thread = threading.Thread(target=main, name="rtctl-dashboard", daemon=True)
        self._thread.start()
        if not ready.wait(10.0):
            raise RuntimeError("dashboard did not start within 10 s")
        if failed:
            self._thread.join()
            self._thread = None
            raise failed[0]
        return self.url

    def stop(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10.0)
            self._thread = None

    def run_forever(self) -> None:
        try:
            asyncio.run(self.serve(lambda url: print(f"rtctl dashboard: {url}  (telemetry {self.telemetry_endpoint}"
                                                     f", control {self.control_endpoint or 'off'})", flush=True)))
        except KeyboardInterrupt:
            pass


def wait_for(predicate, timeout: float, interval: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
