"""Live Foxglove WebSocket server for the loop's telemetry (Foxglove WebSocket protocol v1).

:class:`FoxgloveSink` is a sink of the telemetry publisher thread
(:class:`~rtctl.telemetry.publisher.Telemetry`): it gets the rows the publisher
took from the ring, never runs on the loop thread, and never makes the loop wait.
It serves, with its own implementation of the documented Foxglove WebSocket
protocol (subprotocol ``foxglove.websocket.v1``, on the ``websockets`` package,
default ``ws://127.0.0.1:8765``), the channels the MCAP recorder writes, with
the same JSON Schemas and messages (see :mod:`rtctl.telemetry.schema`):

* ``/rtctl/samples`` -- one JSON message per loop sample (optionally every
  ``decimation``-th): ``index``, the scalars, per-joint arrays ``q``, ``q_d``,
  ``error``, ...; log time = the sample's ``stamp``. In Foxglove, plot
  ``/rtctl/samples.q[0]``, ``/rtctl/samples.q_d[0]``, ... (joint order:
  ``/rtctl/meta.joints``);
* ``/rtctl/meta`` -- the metadata map, every ``meta_period`` s (a client
  subscribing gets the latest one at once);
* ``/rtctl/event`` -- control and safety events;
* ``/tf``, ``/rtctl/scene``, ``/joint_states`` -- the robot for Foxglove's 3D panel, in Foxglove's own
  protobuf schemas (:mod:`rtctl.telemetry.scene`), when the sink is attached to a loop;
* ``/robot_description`` -- the URDF (:mod:`rtctl.telemetry.description`), sent to each subscriber.

Every JSON message carries ``header.stamp``, the sample's wall clock, for plots against it.

The protocol as served. On connection: ``serverInfo`` (``name``, no
``capabilities``, ``metadata``, ``sessionId``), then one ``advertise`` of the
channels (the JSON ones: ``encoding`` ``json``, ``schemaEncoding`` ``jsonschema``,
the schema as JSON text; the protobuf ones: ``protobuf`` and the SDK's
FileDescriptorSet, base64-encoded as the protocol asks for a binary schema). A
client sends ``subscribe`` / ``unsubscribe``; data goes out as binary Message
Data frames: opcode ``0x01``, uint32 subscription id, uint64 log time (ns), the
payload, little-endian. Anything else a client
sends (another op, binary, bad JSON, unknown channel, a reused id) gets a
``status`` message (level 2, error) and the connection stays up. No capability
that takes data from a client is advertised (no client publish, services,
parameters, assets): a client can only subscribe and unsubscribe.

Who may connect. Any web page the operator opens can make the browser open a
websocket to 127.0.0.1, so every request is checked before the upgrade, as the
dashboard does (:mod:`rtctl.operator.dashboard`, same check functions); a
refused one gets ``403`` with a one-line text body saying why:

* the server binds loopback (``127.0.0.1``) by default; another address needs
  ``allow_remote``, and a wildcard (``0.0.0.0``, ``::``) is refused (the
  ``Host`` check needs the address clients use);
* the ``Host`` header must be the bound ``HOST:PORT`` (loopback bind: any of
  ``127.0.0.1``, ``localhost``, ``[::1]`` with the port): a page on a
  DNS-rebound name is refused;
* the ``Origin`` header, which browsers put on every websocket upgrade, must be
  one of ``allowed_origins`` (default :data:`DEFAULT_ALLOWED_ORIGINS`: the
  Foxglove web app ``https://app.foxglove.dev`` only). A request with no
  ``Origin`` at all comes from a non-browser client (a script, a bridge, a
  desktop app's native side) and is let through: no page of another site can
  make a browser omit it. ``null`` (sandboxed frames of any site, and the pages
  Chromium opens from files) and ``*`` can never be allowed. ``file://`` is not
  allowed by default: a browser that sends it for pages opened from files would
  let any HTML file the operator opens (a download, a mail attachment) read the
  stream; list it in ``allowed_origins`` to allow that on purpose. The 403 body
  names the Origin received, for adding it on purpose;
* at most ``max_clients`` connections at once (``503`` beyond); a client that
  does not offer the ``foxglove.websocket.v1`` subprotocol gets ``400``.

Memory is bounded and the publisher never waits on the network. Samples are
encoded only while a client is subscribed to ``/rtctl/samples`` (with no
client, a flush costs one check); the publisher thread then appends the
encoded JSON payloads to a bounded hand-off queue (``backlog`` messages,
oldest dropped, counted in :attr:`FoxgloveSink.inbox_dropped`) and wakes the
server's thread, which has its own asyncio loop. That thread frames each
message for each subscribed client into the client's own queue (``backlog``
messages, oldest dropped, counted in :attr:`FoxgloveSink.dropped`); a sender
task per client writes it out. So a client that stops reading holds at most
``backlog`` messages plus the socket's write buffer, and never slows the
publisher or the other clients. Frames are not compressed (compressing costs
CPU time under the GIL the loop thread shares).
"""
from __future__ import annotations

import asyncio
import base64
import collections
import itertools
import json
import struct
import threading
import time
from urllib.parse import urlsplit

import msgpack
import numpy as np

from .endpoints import LOOPBACK_HOSTS, tcp_in_use
from .jsonvalues import dumps
from .scene import CHANNEL_JOINTS, CHANNEL_SCENE, CHANNEL_TF, DEFAULT_SCENE_RATE, RobotScene, SceneSpec
from .schema import (CHANNEL_DESCRIPTION, CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES, DESCRIPTION_JSON_SCHEMA,
                     DESCRIPTION_SCHEMA_NAME, EVENT_SCHEMA_NAME, META_SCHEMA_NAME,
                     SAMPLE_SCHEMA_NAME, SCHEMA_VERSION, JsonRows, event_json_schema, header, meta_json_schema,
                     sample_json_schema, stamp_ns)
from .sinks import PublisherSink
from .web import allowed_hosts, host_refusal, origin_refusal, url_host

SUBPROTOCOL = "foxglove.websocket.v1"
DEFAULT_PORT = 8765
DEFAULT_BACKLOG = 1024  # messages per client (~1.5 kB each for the 7-joint arm: ~1.5 MB per client at most)
DEFAULT_MAX_CLIENTS = 8
FOXGLOVE_WEB_APP = "https://app.foxglove.dev"
LOCAL_PAGES = "file://"  # what some browsers send for pages opened from files (Chromium sends "null"): opt-in
DEFAULT_ALLOWED_ORIGINS = (FOXGLOVE_WEB_APP,)
NEVER_ALLOWED_ORIGINS = ("null", "*")
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")
MAX_CLIENT_MESSAGE = 64 * 1024  # bytes; a longer client message closes that connection (1009)
MAX_QUEUED_CLIENT_MESSAGES = 8  # received, not yet handled (websockets' max_queue)
MAX_STATUS_TEXT = 300
CLOSE_TIMEOUT = 2.0             # s a closing handshake may take before the connection is dropped
START_TIMEOUT = 10.0
MESSAGE_DATA = 0x01
_HEADER = struct.Struct("<BIQ")  # opcode, subscription id, log time (ns)
_UINT32 = 2 ** 32
_MAX_NS = 2 ** 63 - 1
SAMPLES_ID, META_ID, EVENT_ID, TF_ID, SCENE_ID, JOINTS_ID, DESCRIPTION_ID = 1, 2, 3, 4, 5, 6, 7


def check_host(host: str, allow_remote: bool = False) -> str:
    """The address to bind: loopback unless ``allow_remote``; never a wildcard."""
    if not isinstance(host, str) or host.strip("[]") in WILDCARD_HOSTS:
        raise ValueError(f"foxglove host {host!r} binds every address; bind one address (default 127.0.0.1)")
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise ValueError(f"foxglove host {host!r} is not loopback: the server shows the robot live to anyone who "
                         "reaches it; set allow_remote = true to serve beyond this machine on purpose")
    return "127.0.0.1" if host == "localhost" else host.strip("[]")


def check_origins(origins) -> frozenset:
    """``allowed_origins`` as the set of ``scheme://host[:port]`` strings an ``Origin`` header is compared to."""
    if isinstance(origins, str) or not all(isinstance(o, str) for o in origins):
        raise ValueError(f"foxglove allowed_origins must be a list of origins like {FOXGLOVE_WEB_APP!r}, "
                         f"got {origins!r}")
    out = set()
    for origin in origins:
        text = origin.strip().lower()
        if text in NEVER_ALLOWED_ORIGINS:
            raise ValueError(f"foxglove allowed origin {origin!r} would let any web site's page read the "
                             "telemetry (sandboxed frames send 'null'); list the origins themselves")
        parts = urlsplit(text)
        if (not parts.scheme or "://" not in text or parts.path not in ("", "/") or parts.query or parts.fragment
                or (parts.scheme in ("http", "https") and not parts.netloc)):
            raise ValueError(f"foxglove allowed origin {origin!r}: expected scheme://host[:port] as a browser "
                             f"sends it (e.g. {FOXGLOVE_WEB_APP!r}, 'http://localhost:8080', {LOCAL_PAGES!r})")
        out.add(f"{parts.scheme}://{parts.netloc}")
    return frozenset(out)


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _UINT32


def _shown(value) -> str:
    text = value if isinstance(value, str) else type(value).__name__
    return repr(text if len(text) <= 40 else text[:40] + "...")


class _Client:
    """One connection: its subscriptions and its bounded outgoing queue (drop-oldest)."""

    __slots__ = ("by_channel", "queue", "subs", "wake", "ws")

    def __init__(self, ws, backlog: int):
        self.ws = ws
        self.queue: collections.deque = collections.deque(maxlen=backlog)
        self.wake = asyncio.Event()
        self.subs: dict[int, int] = {}        # subscription id -> channel id
        self.by_channel: dict[int, int] = {}  # channel id -> subscription id


class FoxgloveSink(PublisherSink):
    """A Foxglove WebSocket server fed by the telemetry publisher thread.

    ``port`` 0 picks a free port (read :attr:`port` after :meth:`open`). ``decimation``: publish every
    k-th sample. ``backlog``: outgoing messages kept per client before the oldest are dropped.
    ``allowed_origins``: browser origins allowed to connect (clients sending no ``Origin`` always may).
    ``max_clients``: connections at once. ``scene_rate``: Hz of ``/tf`` and the force arrows
    (:mod:`rtctl.telemetry.scene`; the robot is drawn when the sink is attached to a loop).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, decimation: int = 1,
                 backlog: int = DEFAULT_BACKLOG, allow_remote: bool = False, name: str = "rtctl",
                 allowed_origins=DEFAULT_ALLOWED_ORIGINS, max_clients: int = DEFAULT_MAX_CLIENTS,
                 scene_rate: float = DEFAULT_SCENE_RATE):
        if int(decimation) != decimation or decimation < 1:
            raise ValueError(f"foxglove_decimation must be an integer >= 1, got {decimation!r}")
        if int(port) != port or not 0 <= port < 65536:
            raise ValueError(f"foxglove_port must be 0..65535, got {port!r}")
        if int(backlog) != backlog or not 1 <= backlog <= 1_000_000:
            raise ValueError(f"foxglove backlog must be 1..1000000 messages, got {backlog!r}")
        if int(max_clients) != max_clients or not 1 <= max_clients <= 1000:
            raise ValueError(f"foxglove max_clients must be 1..1000, got {max_clients!r}")
        if not 0 < scene_rate <= 1000:
            raise ValueError(f"foxglove scene_rate must be in (0, 1000] Hz, got {scene_rate!r}")
        self.host = check_host(host, allow_remote)
        self.scene_period = 1.0 / float(scene_rate)
        self.scene_spec: SceneSpec | None = None   # the robot to draw, from attach()
        self._scene: RobotScene | None = None
        self._scene_due = 0.0
        self._robot = b""
        self._description = b""
        self.port = int(port)
        self.decimation = int(decimation)
        self.backlog = int(backlog)
        self.max_clients = int(max_clients)
        self.allowed_origins = check_origins(allowed_origins)
        self.name = name
        self.url = ""
        self.sent = 0           # sample messages handed to the server (while a client was subscribed)
        self.events_sent = 0
        self.dropped = 0        # messages dropped from a lagging client's queue (oldest first)
        self.inbox_dropped = 0  # messages dropped before the server's thread took them
        self.refused = 0        # connection requests answered 403 / 503
        self._clients: dict = {}
        self._subscribers = [0] * 8  # per channel id: clients subscribed (written by the server thread)
        self._inbox: collections.deque = collections.deque(maxlen=self.backlog)
        self._wake_pending = False
        self._last_meta: bytes | None = None
        self._loop = None
        self._thread = None
        self._stop = None
        self._error = None
        self._hosts: frozenset = frozenset()

    @property
    def clients(self) -> int:
        return len(self._clients)

    # -- the publisher thread's side -----------------------------------------------------------------------
    def attach(self, loop) -> None:
        self.scene_spec = SceneSpec.of(loop)

    def open(self, telemetry) -> None:
        """Start the server thread (from the publisher thread); raises RuntimeError when it cannot bind."""
        layout = telemetry.layout
        self._encoder = JsonRows(layout, telemetry.joints, telemetry.extra_names, style="sample")
        self._stamp_col = layout.slices["stamp"].start
        json_schema = "jsonschema"
        self._channels = {SAMPLES_ID: (CHANNEL_SAMPLES, SAMPLE_SCHEMA_NAME, json_schema, sample_json_schema()),
                          META_ID: (CHANNEL_META, META_SCHEMA_NAME, json_schema, meta_json_schema()),
                          EVENT_ID: (CHANNEL_EVENT, EVENT_SCHEMA_NAME, json_schema, event_json_schema())}
        if self.scene_spec is not None:
            from foxglove import messages

            self._scene = RobotScene(self.scene_spec, layout, telemetry.joints, telemetry.extra_names)
            self._robot = self._scene.robot(time.time_ns())
            for cid, topic, message in ((TF_ID, CHANNEL_TF, messages.FrameTransforms),
                                        (SCENE_ID, CHANNEL_SCENE, messages.SceneUpdate),
                                        (JOINTS_ID, CHANNEL_JOINTS, messages.JointStates)):
                schema = message.get_schema()
                self._channels[cid] = (topic, schema.name, schema.encoding, bytes(schema.data))
        description = telemetry.description.payload if telemetry.description is not None else None
        if description is not None:    # the URDF, for Foxglove's URDF layer (source: topic)
            urdf = msgpack.unpackb(description, raw=False)
            self._description = dumps({"data": urdf["urdf"], "sensor_frames": urdf.get("sensor_frames") or {}}).encode()
            self._channels[DESCRIPTION_ID] = (CHANNEL_DESCRIPTION, DESCRIPTION_SCHEMA_NAME, json_schema,
                                              DESCRIPTION_JSON_SCHEMA)
        self._server_info = json.dumps({"op": "serverInfo", "name": self.name, "capabilities": [],
                                        "metadata": {"rtctl_schema_version": str(SCHEMA_VERSION)},
                                        "sessionId": str(time.time_ns())})
        self._advertise = json.dumps({"op": "advertise", "channels": [
            {"id": cid, "topic": topic, "encoding": "json" if encoding == "jsonschema" else encoding,
             "schemaName": schema_name, "schemaEncoding": encoding,
             # a binary schema (protobuf's FileDescriptorSet) goes base64-encoded (ws-protocol spec, advertise)
             "schema": schema.decode() if encoding == "jsonschema" else base64.b64encode(schema).decode()}
            for cid, (topic, schema_name, encoding, schema) in self._channels.items()]})
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), name="rtctl-foxglove", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT):
            self.close()
            raise RuntimeError(f"foxglove server did not start within {START_TIMEOUT:g} s")
        if self._error is not None:
            self._thread.join(START_TIMEOUT)
            self._thread = None
            raise RuntimeError(f"foxglove server cannot bind {url_host(self.host)}:{self.port}: {self._error}")
        self.url = f"ws://{url_host(self.host)}:{self.port}"

    def write(self, rows: np.ndarray, first: int) -> None:
        """Hand ``rows`` (sample ``first`` is row 0) to the server for the channels a client is subscribed to."""
        if self._scene is not None and rows.shape[0]:
            self._write_scene(rows, first)
        if not self._subscribers[SAMPLES_ID]:
            return
        d = self.decimation
        offset = (-first) % d  # samples whose index is a multiple of d, whatever the batch boundaries
        picked = rows[offset::d] if d > 1 else rows
        if picked.shape[0] == 0:
            return
        ns = picked[:, self._stamp_col] * 1e9
        ns = np.where(np.isfinite(ns) & (ns >= 0) & (ns < _MAX_NS), ns, 0.0).astype(np.int64).tolist()
        texts = self._encoder.encode(picked, first + offset, d)
        self._post(SAMPLES_ID, ns, texts)
        self.sent += len(texts)

    def _write_scene(self, rows: np.ndarray, first: int) -> None:
        """``/joint_states`` for every decimated row, ``/tf`` and the force arrows at ``scene_rate``."""
        subscribed = self._subscribers
        if subscribed[JOINTS_ID]:
            d = self.decimation
            offset = (-first) % d
            picked = rows[offset::d] if d > 1 else rows
            stamps = [stamp_ns(s) for s in picked[:, self._stamp_col].tolist()]
            self._post(JOINTS_ID, stamps, [self._scene.joint_states(r, ns) for r, ns in zip(picked, stamps)])
        now = time.monotonic()
        if (subscribed[TF_ID] or subscribed[SCENE_ID]) and now >= self._scene_due:
            self._scene_due = max(self._scene_due + self.scene_period, now)   # the rate on average
            ns = stamp_ns(rows[-1, self._stamp_col])
            transforms, forces = self._scene.frame(rows[-1], ns)
            if subscribed[TF_ID]:
                self._post(TF_ID, [ns], [transforms])
            if subscribed[SCENE_ID] and forces:
                self._post(SCENE_ID, [ns], [forces])

    def meta(self, meta: dict) -> None:
        now = time.time()
        meta = {**meta, "header": header(now)}
        text = dumps(meta, default=str).encode()  # once per meta_period: kept for the next subscriber
        self._last_meta = text
        if self._subscribers[META_ID]:
            self._post(META_ID, [stamp_ns(now)], [text])

    def event(self, event: dict) -> None:
        if self._subscribers[EVENT_ID]:
            stamp = event.get("stamp", time.time())
            self._post(EVENT_ID, [stamp_ns(stamp)], [dumps({**event, "header": header(stamp)}, default=str).encode()])
            self.events_sent += 1

    def _post(self, channel: int, stamps: list, payloads: list) -> None:
        """Append to the bounded hand-off queue and wake the server thread (never waits)."""
        inbox = self._inbox
        over = len(inbox) + len(payloads) - self.backlog
        if over > 0:
            self.inbox_dropped += min(over, len(payloads) + len(inbox))
        inbox.extend(zip(itertools.repeat(channel), stamps, payloads))
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except (RuntimeError, AttributeError):  # the server has stopped
                inbox.clear()

    def close(self) -> None:
        """Stop the server (connections closed with 1001) and its thread; idempotent."""
        thread, loop, stop = self._thread, self._loop, self._stop
        self._thread = None
        if thread is None:
            return
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # its loop has already ended
                pass
        thread.join(START_TIMEOUT + CLOSE_TIMEOUT)
        self._inbox.clear()

    # -- the server thread ------------------------------------------------------------------------------------
    def _main(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        finally:
            ready.set()
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        try:
            server = await serve(self._handler, self.host, self.port, process_request=self._process_request,
                                 subprotocols=[SUBPROTOCOL], compression=None, max_size=MAX_CLIENT_MESSAGE,
                                 max_queue=MAX_QUEUED_CLIENT_MESSAGES, close_timeout=CLOSE_TIMEOUT)
        except OSError as exc:
            self._error = tcp_in_use(exc, self.host, self.port)
            ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._hosts = allowed_hosts(self.host, self.port)
        ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            await server.wait_closed()

    def _process_request(self, connection, request):
        own = f"{url_host(self.host)}:{self.port}"
        if self.allowed_origins:
            expected = f"an allowed origin ({', '.join(sorted(self.allowed_origins))}; foxglove_allowed_origins)"
        else:
            expected = "allowed: no browser origin is (foxglove_allowed_origins is empty)"
        refusal = (host_refusal(request, self._hosts, own, "this Foxglove server")
                   or origin_refusal(request, self.allowed_origins, expected, required=False))
        if refusal is not None:
            self.refused += 1
            return connection.respond(403, refusal + "\n")
        if len(self._clients) >= self.max_clients:
            self.refused += 1
            return connection.respond(503, f"refused: {self.max_clients} Foxglove clients already connected\n")
        return None

    async def _handler(self, ws) -> None:
        from websockets.exceptions import ConnectionClosed

        if len(self._clients) >= self.max_clients:  # handshakes that raced past _process_request
            self.refused += 1
            await ws.close(1013, "too many clients")
            return
        client = _Client(ws, self.backlog)
        try:
            await ws.send(self._server_info)
            await ws.send(self._advertise)
        except ConnectionClosed:
            return
        self._clients[ws] = client
        sender = asyncio.create_task(self._sender(client))
        try:
            async for message in ws:
                try:
                    self._on_message(client, message)
                except Exception as exc:  # noqa: BLE001  (one bad message must not end the connection)
                    self._status(client, f"internal error on this message ({type(exc).__name__})")
        except ConnectionClosed:
            pass
        finally:
            del self._clients[ws]
            for channel in client.by_channel:
                self._subscribers[channel] -= 1
            client.subs.clear()
            client.by_channel.clear()
            client.queue.clear()
            sender.cancel()

    async def _sender(self, client: _Client) -> None:
        from websockets.exceptions import ConnectionClosed

        queue, ws = client.queue, client.ws
        try:
            while True:
                while queue:
                    await ws.send(queue.popleft())
                client.wake.clear()
                await client.wake.wait()
        except ConnectionClosed:
            pass

    def _offer(self, client: _Client, frame) -> None:
        queue = client.queue
        if len(queue) == queue.maxlen:
            self.dropped += 1
        queue.append(frame)
        client.wake.set()

    def _drain(self) -> None:
        """Frame what the publisher handed over for every subscribed client (server thread)."""
        self._wake_pending = False  # before taking: a message appended from now on schedules another drain
        inbox, pack = self._inbox, _HEADER.pack
        clients = list(self._clients.values())
        for _ in range(len(inbox)):
            try:
                channel, ns, payload = inbox.popleft()
            except IndexError:
                break
            for client in clients:
                sub = client.by_channel.get(channel)
                if sub is not None:
                    self._offer(client, pack(MESSAGE_DATA, sub, ns) + payload)
        if inbox and not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon(self._drain)

    def _status(self, client: _Client, message: str, level: int = 2) -> None:
        if len(message) > MAX_STATUS_TEXT:
            message = message[:MAX_STATUS_TEXT] + "..."
        self._offer(client, json.dumps({"op": "status", "level": level, "message": message}))

    def _on_message(self, client: _Client, message) -> None:
        if not isinstance(message, str):
            self._status(client, "binary client messages are not accepted: this server advertises no capability "
                                 "that takes data from a client")
            return
        try:
            req = json.loads(message)
        except RecursionError:
            self._status(client, "message nested too deeply")
            return
        except ValueError:
            self._status(client, "message is not valid JSON")
            return
        op = req.get("op") if isinstance(req, dict) else None
        if op == "subscribe":
            self._subscribe(client, req.get("subscriptions"))
        elif op == "unsubscribe":
            self._unsubscribe(client, req.get("subscriptionIds"))
        elif not isinstance(req, dict):
            self._status(client, f"a message is a JSON object with an 'op', got {type(req).__name__}")
        else:
            self._status(client, f"unsupported op {_shown(op)}: this read-only server takes only 'subscribe' "
                                 "and 'unsubscribe'")

    def _subscribe(self, client: _Client, subscriptions) -> None:
        if not isinstance(subscriptions, list):
            self._status(client, "subscribe: 'subscriptions' must be a list of {id, channelId}")
            return
        errors = []
        for sub in subscriptions:
            if not isinstance(sub, dict) or not _is_id(sub.get("id")):
                errors.append("each subscription needs an integer 'id' in 0..2**32-1")
                continue
            sid, channel = sub["id"], sub.get("channelId")
            if not _is_id(channel) or channel not in self._channels:
                errors.append(f"unknown channelId {_shown(channel) if not _is_id(channel) else channel}")
            elif sid in client.subs:
                errors.append(f"subscription id {sid} is already in use")
            elif channel in client.by_channel:
                errors.append(f"channel {channel} is already subscribed (id {client.by_channel[channel]})")
            else:
                client.subs[sid] = channel
                client.by_channel[channel] = sid
                self._subscribers[channel] += 1
                if channel == META_ID and self._last_meta is not None:
                    self._offer(client, _HEADER.pack(MESSAGE_DATA, sid, time.time_ns()) + self._last_meta)
                if channel == SCENE_ID and self._robot:   # the robot's primitives, which stay in their frames
                    self._offer(client, _HEADER.pack(MESSAGE_DATA, sid, time.time_ns()) + self._robot)
                if channel == DESCRIPTION_ID:
                    self._offer(client, _HEADER.pack(MESSAGE_DATA, sid, time.time_ns()) + self._description)
        if errors:
            self._status(client, f"subscribe: {len(errors)} subscription(s) ignored: {errors[0]}")

    def _unsubscribe(self, client: _Client, ids) -> None:
        if not isinstance(ids, list):
            self._status(client, "unsubscribe: 'subscriptionIds' must be a list of subscription ids")
            return
        errors = []
        for sid in ids:
            if not _is_id(sid) or sid not in client.subs:
                errors.append(f"no subscription with id {sid if _is_id(sid) else _shown(sid)}")
                continue
            channel = client.subs.pop(sid)
            del client.by_channel[channel]
            self._subscribers[channel] -= 1
        if errors:
            self._status(client, f"unsubscribe: {len(errors)} id(s) ignored: {errors[0]}")
