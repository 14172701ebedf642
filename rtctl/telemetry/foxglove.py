"""Live Foxglove WebSocket server for the loop's telemetry (the ``foxglove-sdk`` package).

:class:`FoxgloveSink` is a sink of the telemetry publisher thread
(:class:`~rtctl.telemetry.publisher.Telemetry`): it gets the rows the publisher
took from the ring, never runs on the loop thread, and never makes the loop wait.
It publishes, with the SDK's WebSocket server (``foxglove.sdk.v1`` subprotocol,
default ``ws://127.0.0.1:8765``), the channels the MCAP recorder writes, with
the same JSON Schemas and messages (see :mod:`rtctl.telemetry.schema`):

* ``/rtctl/samples`` -- one JSON message per loop sample (optionally every
  ``decimation``-th): ``index``, the scalars, per-joint arrays ``q``, ``q_d``,
  ``error``, ...; log time = the sample's ``stamp``. In Foxglove, plot
  ``/rtctl/samples.q[0]``, ``/rtctl/samples.q_d[0]``, ... (joint order:
  ``/rtctl/meta.joints``);
* ``/rtctl/meta`` -- the metadata map, every ``meta_period`` s;
* ``/rtctl/event`` -- control and safety events.

Samples are encoded only while a client is subscribed to ``/rtctl/samples``
(``Channel.has_sinks``): with no client the sink costs one check per flush.

Who may connect. The server binds loopback (``127.0.0.1``) by default; another
host needs ``allow_remote`` and a wildcard (``0.0.0.0``, ``::``) is refused.
The server is read-only: no capability that accepts data from a client is
advertised (no client publish, services, parameters), so a client can only
subscribe and unsubscribe. The SDK (0.30) has no hook to check the
``Origin`` of a websocket upgrade: it accepts any origin, so a web page open
in the operator's browser on this machine can read the telemetry (it cannot
send anything to the loop). Only enable it where that is acceptable.

Memory is bounded: the SDK keeps at most ``backlog`` outgoing messages per
client (oldest data dropped first); nothing is kept when no client is
connected. The sink itself holds no queue: it encodes what the publisher hands
it and logs it at once.
"""
from __future__ import annotations

import json
import time

import numpy as np

from .endpoints import LOOPBACK_HOSTS
from .schema import (CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES, OBJECT_JSON_SCHEMA, OBJECT_SCHEMA_NAME,
                     SAMPLE_SCHEMA_NAME, JsonRows, sample_json_schema)

DEFAULT_PORT = 8765
DEFAULT_BACKLOG = 1024  # messages per client (~1.5 kB each for the 7-joint arm: ~1.5 MB per client at most)
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")
SUBPROTOCOL = "foxglove.sdk.v1"


def _import_sdk():
    try:
        import foxglove
    except ImportError:
        raise RuntimeError("the Foxglove server needs the foxglove-sdk package: pip install 'rtctl[foxglove]' "
                           "(or pip install foxglove-sdk)") from None
    return foxglove


def check_host(host: str, allow_remote: bool = False) -> str:
    """The address to bind: loopback unless ``allow_remote``; never a wildcard."""
    if not isinstance(host, str) or host.strip("[]") in WILDCARD_HOSTS:
        raise ValueError(f"foxglove host {host!r} binds every address; bind one address (default 127.0.0.1)")
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise ValueError(f"foxglove host {host!r} is not loopback: the server shows the robot live to anyone who "
                         "reaches it (and cannot check a browser's Origin); set allow_remote = true to serve "
                         "beyond this machine on purpose")
    return "127.0.0.1" if host == "localhost" else host.strip("[]")


class FoxgloveSink:
    """A Foxglove WebSocket server fed by the telemetry publisher thread.

    ``port`` 0 picks a free port (read :attr:`port` after :meth:`open`). ``decimation``: publish every
    k-th sample. ``backlog``: outgoing messages kept per client before the oldest are dropped.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, decimation: int = 1,
                 backlog: int = DEFAULT_BACKLOG, allow_remote: bool = False, name: str = "rtctl"):
        if int(decimation) != decimation or decimation < 1:
            raise ValueError(f"foxglove_decimation must be an integer >= 1, got {decimation!r}")
        if int(port) != port or not 0 <= port < 65536:
            raise ValueError(f"foxglove_port must be 0..65535, got {port!r}")
        if int(backlog) != backlog or not 1 <= backlog <= 1_000_000:
            raise ValueError(f"foxglove backlog must be 1..1000000 messages, got {backlog!r}")
        self.host = check_host(host, allow_remote)
        self.port = int(port)
        self.decimation = int(decimation)
        self.backlog = int(backlog)
        self.name = name
        self.url = ""
        self.sent = 0          # sample messages logged to the server (while a client was subscribed)
        self.events_sent = 0
        self._server = None
        self._encoder = None

    def open(self, telemetry) -> None:
        """Start the server (from the publisher thread); raises RuntimeError when it cannot bind."""
        foxglove = _import_sdk()
        self._ctx = foxglove.Context()
        self._server = foxglove.start_server(name=self.name, host=self.host, port=self.port, context=self._ctx,
                                             capabilities=[], message_backlog_size=self.backlog)
        self.port = self._server.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"ws://{host}:{self.port}"
        layout = telemetry.layout
        self._encoder = JsonRows(layout, telemetry.joints, telemetry.extra_names, style="sample")
        self._stamp_col = layout.slices["stamp"].start
        self._samples = self._channel(foxglove, CHANNEL_SAMPLES, SAMPLE_SCHEMA_NAME, sample_json_schema())
        self._meta = self._channel(foxglove, CHANNEL_META, OBJECT_SCHEMA_NAME, OBJECT_JSON_SCHEMA)
        self._event = self._channel(foxglove, CHANNEL_EVENT, OBJECT_SCHEMA_NAME, OBJECT_JSON_SCHEMA)

    def _channel(self, foxglove, topic, schema_name, schema):
        return foxglove.Channel(topic, schema=foxglove.Schema(name=schema_name, encoding="jsonschema", data=schema),
                                message_encoding="json", context=self._ctx)

    def write(self, rows: np.ndarray, first: int) -> None:
        """Log ``rows`` (sample ``first`` is row 0) when a client is subscribed to the samples."""
        d = self.decimation
        offset = (-first) % d  # samples whose index is a multiple of d, whatever the batch boundaries
        if not self._samples.has_sinks():
            return
        picked = rows[offset::d] if d > 1 else rows
        if picked.shape[0] == 0:
            return
        stamps = (picked[:, self._stamp_col] * 1e9).astype(np.int64).tolist()
        texts = self._encoder.encode(picked, first + offset, d)
        log = self._samples.base.log
        for text, ns in zip(texts, stamps):
            log(text, ns)
        self.sent += len(texts)

    def meta(self, meta: dict) -> None:
        if self._meta.has_sinks():
            self._meta.base.log(json.dumps(meta, default=str).encode(), time.time_ns())

    def event(self, event: dict) -> None:
        if self._event.has_sinks():
            self._event.base.log(json.dumps(event, default=str).encode(), int(event.get("stamp", time.time()) * 1e9))
            self.events_sent += 1

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
            for ch in (self._samples, self._meta, self._event):
                ch.close()
