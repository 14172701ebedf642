"""``rtctl dashboard``: one static page on localhost plus a websocket bridge from the ZeroMQ stream.

The server (``websockets``, asyncio) serves ``rtctl/data/dashboard/`` (the page,
its script and ``plot.js``, a small canvas plotter shipped in the package: no
CDN) over HTTP and the bridge on ``/ws`` on the same port. The bridge
subscribes to the telemetry endpoint, keeps the wake-up-latency histogram over
every sample, and every ~33 ms (30 Hz) sends each browser one JSON frame: the
samples since the last frame decimated to at most ``points_per_frame``, the
histogram, the safety state and new events. Each client has its own bounded
queue; when a browser lags, its oldest frames are dropped (and counted), never
the bridge or the loop. Browser commands (``estop``, ``rearm``, ``status``
only) are forwarded to the control endpoint as control-channel requests.
"""
from __future__ import annotations

import asyncio
import json
import mimetypes
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import zmq
import zmq.asyncio

from .publisher import LOOPBACK_HOSTS
from .schema import TOPIC_EVENT, TOPIC_META, TOPIC_SAMPLES, SchemaError, decode

STATIC_DIR = Path(__file__).resolve().parent.parent / "data" / "dashboard"
HIST_EDGES_US = np.linspace(0.0, 500.0, 51)  # 10 us bins; the last bin also counts everything above
BROWSER_COMMANDS = ("estop", "rearm", "status")


class Dashboard:
    def __init__(self, telemetry_endpoint: str, control_endpoint: str | None = None, token: str | None = None,
                 host: str = "127.0.0.1", port: int = 8050, rate_hz: float = 30.0, points_per_frame: int = 40,
                 queue_size: int = 8, allow_remote: bool = False):
        if host not in LOOPBACK_HOSTS and not allow_remote:
            raise ValueError(f"dashboard host {host!r} is not loopback; pass allow_remote to serve beyond this "
                             "machine on purpose")
        self.telemetry_endpoint = telemetry_endpoint
        self.control_endpoint = control_endpoint
        self.token = token
        self.host, self.port = host, int(port)
        self.frame_period = 1.0 / rate_hz
        self.points = int(points_per_frame)
        self.queue_size = int(queue_size)
        self.meta = None
        self.clients: dict = {}
        self.client_drops = 0
        self.samples = 0
        self.lost = 0
        self.publisher_dropped = 0
        self._next_index = None
        self._pending: list = []
        self._events: list = []
        self._hist = np.zeros(len(HIST_EDGES_US) - 1, dtype=np.int64)
        self._tripped = 0
        self._last_t = 0.0
        self._loop = None
        self._stop = None
        self._thread = None
        self.url = ""

    # -- HTTP ---------------------------------------------------------------------------------
    def _process_request(self, connection, request):
        from websockets.datastructures import Headers
        from websockets.http11 import Response

        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None
        name = "index.html" if path in ("/", "") else path.lstrip("/")
        target = (STATIC_DIR / name).resolve()
        if STATIC_DIR not in target.parents or not target.is_file():
            return Response(404, "Not Found", Headers({"Content-Type": "text/plain", "Content-Length": "9"}),
                            b"not found")
        body = target.read_bytes()
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return Response(200, "OK", Headers({"Content-Type": ctype, "Content-Length": str(len(body)),
                                            "Cache-Control": "no-store"}), body)

    # -- websocket clients --------------------------------------------------------------------------
    async def _client(self, ws):
        queue: asyncio.Queue = asyncio.Queue(self.queue_size)
        self.clients[ws] = queue
        sender = asyncio.create_task(self._sender(ws, queue))
        try:
            if self.meta is not None:
                self._offer(queue, json.dumps({"type": "meta", "meta": self.meta}))
            async for text in ws:
                reply = await self._command(text)
                self._offer(queue, json.dumps({"type": "reply", **reply}))
        except Exception:  # noqa: BLE001  (a client going away is normal)
            pass
        finally:
            self.clients.pop(ws, None)
            sender.cancel()

    async def _sender(self, ws, queue):
        while True:
            text = await queue.get()
            await ws.send(text)

    def _offer(self, queue: asyncio.Queue, text: str) -> None:
        """Put with drop-oldest."""
        while queue.full():
            queue.get_nowait()
            self.client_drops += 1
        queue.put_nowait(text)

    async def _command(self, text) -> dict:
        try:
            req = json.loads(text)
        except (TypeError, ValueError):
            return {"ok": False, "error": "not JSON"}
        cmd = req.get("cmd") if isinstance(req, dict) else None
        if cmd not in BROWSER_COMMANDS:
            return {"ok": False, "error": f"the dashboard sends only {list(BROWSER_COMMANDS)}"}
        if not self.control_endpoint:
            return {"ok": False, "cmd": cmd, "error": "no control endpoint (start rtctl dashboard with --control)"}
        out = {"cmd": cmd}
        if cmd == "estop":
            out["reason"] = "dashboard e-stop button"
        if self.token:
            out["token"] = self.token
        sock = self._zctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(self.control_endpoint)
            await sock.send(msgpack.packb(out, use_bin_type=True))
            if not await sock.poll(3000):
                return {"ok": False, "cmd": cmd, "error": "control endpoint did not answer within 3 s"}
            reply = msgpack.unpackb(await sock.recv(), raw=False)
            reply["cmd"] = cmd
            return reply
        finally:
            sock.close(linger=0)

    # -- ZeroMQ side -----------------------------------------------------------------------------------
    async def _zmq_reader(self):
        sub = self._zctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(self.telemetry_endpoint)
        sub.setsockopt(zmq.SUBSCRIBE, b"rtctl/")
        try:
            while True:
                topic, payload = (await sub.recv_multipart())[:2]
                try:
                    msg = decode(topic, payload)
                except SchemaError as exc:
                    self._events.append({"kind": "decode", "detail": str(exc)})
                    continue
                if topic == TOPIC_SAMPLES:
                    self._take_batch(msg)
                elif topic == TOPIC_META:
                    first = self.meta is None
                    self.meta = msg
                    if first:
                        text = json.dumps({"type": "meta", "meta": msg})
                        for q in self.clients.values():
                            self._offer(q, text)
                elif topic == TOPIC_EVENT:
                    self._events.append({k: msg.get(k) for k in ("kind", "detail", "cycle", "t")})
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
        self._pending.append(f)

    def _frame(self) -> str:
        batches, self._pending = self._pending, []
        data = {"t": [], "q": [], "q_d": [], "error": [], "effort_cmd": [], "latency": []}
        for f in batches:
            for k in data:
                data[k].extend(f[k])
        n = len(data["t"])
        if n > self.points:
            pick = np.linspace(0, n - 1, self.points).round().astype(int)
            data = {k: [v[i] for i in pick] for k, v in data.items()}
        events, self._events = self._events, []
        return json.dumps({"type": "frame", **data, "hist_edges_us": HIST_EDGES_US.tolist(),
                           "hist": self._hist.tolist(), "tripped": int(self._tripped), "t_now": self._last_t,
                           "samples": self.samples, "lost": self.lost, "publisher_dropped": self.publisher_dropped,
                           "client_drops": self.client_drops, "events": events})

    async def _pusher(self):
        while True:
            await asyncio.sleep(self.frame_period)
            if not self.clients or (not self._pending and not self._events):
                continue
            text = self._frame()
            for q in list(self.clients.values()):
                self._offer(q, text)

    # -- running ----------------------------------------------------------------------------------------
    async def serve(self, started=None):
        from websockets.asyncio.server import serve

        self._zctx = zmq.asyncio.Context()
        self._stop = asyncio.Event()
        async with serve(self._client, self.host, self.port, process_request=self._process_request,
                         max_size=65536) as server:
            port = server.sockets[0].getsockname()[1]
            self.port = port
            self.url = f"http://{self.host}:{port}/"
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

        def main():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve(lambda url: ready.set()))

        self._thread = threading.Thread(target=main, name="rtctl-dashboard", daemon=True)
        self._thread.start()
        if not ready.wait(10.0):
            raise RuntimeError("dashboard did not start within 10 s")
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
