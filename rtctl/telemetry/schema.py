"""The telemetry wire format, schema version 1 (msgpack; never pickle).

Every message on the telemetry PUB endpoint is a ZeroMQ multipart message
``[topic, payload]``; ``payload`` is a msgpack map carrying ``"schema":
"rtctl.telemetry"`` and ``"version": 1``. A decoder that meets another version
raises :class:`SchemaVersionError` naming both versions (never a silent
misread). Units are SI; per-joint units depend on the joint type (revolute:
rad, rad/s, N m; prismatic: m, m/s, N) and are listed in the metadata.

Topics
------
``rtctl/meta`` -- sent at start and every ``meta_period`` s (default 1 s), so a
late subscriber can decode: ``robot``, ``joints`` (actuated joint names),
``rate_hz``, ``period`` (s), ``batch_period`` (s), ``fields`` (name -> ``{"shape":
[] or [n], "unit": str or [per-joint str]}``), ``controller``, ``trajectory``,
``extra`` (names of the controller's, loop hooks', sensors' and estimator's fields;
their units in ``fields``), ``started`` (unix s), ``capacity`` (samples the publisher's
ring holds), ``backlog`` (the topic of its backlog, below; absent where nothing
answers a backlog subscription, as under ``rtctl replay``).

``rtctl/samples`` -- a batch of consecutive loop samples, columnar:
``seq`` (batch counter from 0), ``first`` (index of the first sample: the
number of samples handed off before it), ``count``, ``dropped`` (samples the
publisher's ring overwrote since start: drop-oldest), ``sent`` (unix s), and
``fields``: name -> list of ``count`` values (scalars) or of ``count`` lists
(per-joint vectors). Sample ``first + i`` is row ``i``; a gap in sample
indices between batches means a subscriber lost messages (ZeroMQ's high-water
mark drops for a slow subscriber), which the tools count.

Sample fields (one row per control cycle):

==============  =========  ==============================================
name            shape      meaning (unit)
==============  =========  ==============================================
``t``           scalar     control time (s)
``cycle``       scalar     loop cycle index (int)
``stamp``       scalar     wall clock when handed off (unix s)
``period``      scalar     previous cycle's wake-to-wake period (s)
``latency``     scalar     previous cycle's wake-up latency (s)
``compute``     scalar     previous cycle's compute time (s)
``overruns``    scalar     overruns counted so far (int)
``tripped``     scalar     1 while the safe state is latched, else 0
``fresh``       scalar     1 when the driver delivered a new sample
``q``           n          measured joint position (rad or m)
``qd``          n          measured joint velocity (rad/s or m/s)
``q_d``         n          desired position (rad or m)
``qd_d``        n          desired velocity (rad/s or m/s)
``effort_cmd``  n          commanded effort after safety (N m or N)
``effort``      n          measured effort (N m or N)
``error``       n          tracking error ``q_d - q`` (rad or m)
``kp``, ``kd``  n          the controller's gains (unit by controller type)
``extra``       m          the controller's, loop hooks', sensors', estimator's values
==============  =========  ==============================================

``rtctl/event`` -- a discrete event: ``seq``, ``kind`` (``"control"``: an
accepted control-channel change; ``"safety"``: a trip, clamp or re-arm),
``cycle``, ``t`` (s), ``stamp`` (unix s), ``detail`` (text) and, for control
events, ``request`` (the validated request, without the token).

``rtctl/description`` -- the robot description (:mod:`rtctl.telemetry.description`): ``robot``, ``urdf``
(the URDF text of the model the run controls, with primitive visuals and a link per sensor mount),
``sensor_frames`` (sensor name -> its link). Sent at start and when a subscriber joins (after four sends, at
most once a second however many join), never beyond 1 MiB.

``backlog/rtctl/samples`` -- the backlog (:mod:`rtctl.telemetry.backlog`): what a
subscriber that joins late asks for by subscribing to this topic after ``rtctl/``
(``rtctl record`` does). The publisher answers a subscription to it with the samples it
has already published that its ring still holds, oldest first, in batches of the
``rtctl/samples`` form (``first``, ``count``, ``dropped``, ``sent``, ``fields``) with
``backlog`` (the backlog's number), ``part`` (its batch number from 0) and ``final``
(true on its last batch; a backlog with no sample is one batch of ``count`` 0). The
topic lies outside the ``rtctl/`` prefix on purpose: a subscriber to ``rtctl/`` (the
rtctl tools, most third-party ones) never receives a backlog, so nobody who did not
ask for it gets a sample twice; only a subscriber to everything (``""``) sees backlog
batches too, on this topic, never on ``rtctl/samples``.

PlotJuggler stream (separate PUB endpoint): single-frame flat JSON objects
(optionally decimated), ``{"timestamp": t, "q/<joint>": ..., "q_d/<joint>": ...,
"latency": ..., ...}``, one JSON array of them per batch or one object per sample
-- see :mod:`rtctl.telemetry.plotjuggler` and docs/telemetry.md.
"""
from __future__ import annotations

import json

import msgpack
import numpy as np

from .jsonvalues import NONFINITE, NONFINITE_JSON_SCHEMA, pointer_token, spell

SCHEMA = "rtctl.telemetry"
SCHEMA_VERSION = 1

TOPIC_META = b"rtctl/meta"
TOPIC_SAMPLES = b"rtctl/samples"
TOPIC_EVENT = b"rtctl/event"
TOPIC_DESCRIPTION = b"rtctl/description"
TOPIC_BACKLOG = b"backlog/rtctl/samples"
TOPICS = (TOPIC_META, TOPIC_SAMPLES, TOPIC_EVENT, TOPIC_DESCRIPTION, TOPIC_BACKLOG)

SCALAR_FIELDS = ("t", "cycle", "stamp", "period", "latency", "compute", "overruns", "tripped", "fresh")
INTEGER_FIELDS = ("cycle", "overruns", "tripped", "fresh")
JOINT_FIELDS = ("q", "qd", "q_d", "qd_d", "effort_cmd", "effort", "error", "kp", "kd")
SCALAR_UNITS = {"t": "s", "cycle": "1", "stamp": "s (unix)", "period": "s", "latency": "s", "compute": "s",
                "overruns": "1", "tripped": "1", "fresh": "1"}


class SchemaError(ValueError):
    """A telemetry message that cannot be decoded."""


class SchemaVersionError(SchemaError):
    """A message of another schema version."""


class Layout:
    """Column layout of one sample row in the float64 ring: scalars, then per-joint blocks, then extras."""

    def __init__(self, n: int, n_extra: int = 0):
        self.n, self.n_extra = int(n), int(n_extra)
        self.slices: dict[str, slice] = {}
        col = 0
        for name in SCALAR_FIELDS:
            self.slices[name] = slice(col, col + 1)
            col += 1
        for name in JOINT_FIELDS:
            self.slices[name] = slice(col, col + self.n)
            col += self.n
        self.slices["extra"] = slice(col, col + self.n_extra)
        col += self.n_extra
        self.width = col

    def columns(self, rows: np.ndarray) -> dict:
        """Rows (k, width) -> the ``fields`` map of a batch (plain Python lists: exact float64)."""
        out = {}
        for name in SCALAR_FIELDS:
            col = rows[:, self.slices[name].start]
            out[name] = col.astype(np.int64).tolist() if name in INTEGER_FIELDS else col.tolist()
        for name in JOINT_FIELDS:
            out[name] = rows[:, self.slices[name]].tolist()
        if self.n_extra:
            out["extra"] = rows[:, self.slices["extra"]].tolist()
        return out


_MAX_NS = 2 ** 63 - 1


def stamp_ns(seconds) -> int:
    """A wall-clock stamp (unix s) as an MCAP / Foxglove log time in ns; 0 for one that is not a finite,
    non-negative time."""
    try:
        ns = float(seconds) * 1e9
    except (TypeError, ValueError):
        return 0
    return int(ns) if 0.0 <= ns < _MAX_NS else 0


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def envelope(**fields) -> dict:
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, **fields}


def decode(topic: bytes, payload: bytes) -> dict:
    """Decode one ``[topic, payload]`` message; raise :class:`SchemaError` / :class:`SchemaVersionError`."""
    if topic not in TOPICS:
        raise SchemaError(f"unknown telemetry topic {topic!r}; known: {[t.decode() for t in TOPICS]}")
    try:
        msg = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001  (msgpack raises several types)
        raise SchemaError(f"{topic.decode()}: payload is not msgpack: {type(exc).__name__}: {exc}") from None
    if not isinstance(msg, dict) or msg.get("schema") != SCHEMA:
        raise SchemaError(f"{topic.decode()}: not an {SCHEMA} message")
    version = msg.get("version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(f"{topic.decode()}: telemetry schema version {version!r} received, but this rtctl "
                                 f"decodes version {SCHEMA_VERSION} only; use a matching rtctl on both ends")
    return msg


def batch_arrays(msg: dict) -> dict:
    """A decoded ``rtctl/samples`` batch as NumPy arrays (scalars (k,), joint fields (k, n))."""
    out = {}
    for name, values in msg["fields"].items():
        out[name] = np.asarray(values, dtype=np.int64 if name in INTEGER_FIELDS else np.float64)
    return out


def plotjuggler_objects(layout: Layout, rows: np.ndarray, joints: list[str], extra: list[str]) -> list[dict]:
    """Flat JSON-ready objects, one per row, with the top-level numeric ``timestamp`` (control time, s)."""
    out = []
    for row in rows:
        obj = {"timestamp": float(row[0])}
        for name in SCALAR_FIELDS[1:]:
            obj[name] = float(row[layout.slices[name].start])
        for name in JOINT_FIELDS:
            block = row[layout.slices[name]]
            for j, joint in enumerate(joints):
                obj[f"{name}/{joint}"] = float(block[j])
        if layout.n_extra:
            for j, label in enumerate(extra):
                obj[f"extra/{label}"] = float(row[layout.slices["extra"].start + j])
        out.append(obj)
    return out


# -- JSON per sample: PlotJuggler's flat objects and the Foxglove / MCAP sample messages ---------------------
# The MCAP recorder (:func:`rtctl.telemetry.recording.record`) and the live Foxglove server
# (:mod:`rtctl.telemetry.foxglove`) use the same channels, JSON Schemas and messages: one JSON
# message per loop sample on ``/rtctl/samples`` (the fields of one row plus ``index``, the sample
# index), log time = the sample's ``stamp`` (unix ns); ``/rtctl/meta`` and ``/rtctl/event`` carry the
# metadata and event maps; ``/robot_description`` the robot description, once (``{"data": URDF,
# "sensor_frames": {...}}``: a std_msgs/msg/String's field, which Foxglove's URDF layer reads from a topic).
CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT = "/rtctl/samples", "/rtctl/meta", "/rtctl/event"
CHANNEL_DESCRIPTION = "/robot_description"
DESCRIPTION_SCHEMA_NAME = "std_msgs/msg/String"
DESCRIPTION_JSON_SCHEMA = json.dumps({
    "title": DESCRIPTION_SCHEMA_NAME, "type": "object",
    "properties": {"data": {"type": "string", "description": "the robot's URDF"},
                   "sensor_frames": {"type": "object", "description": "sensor name -> its link in the URDF"}}}).encode()
SAMPLE_SCHEMA_NAME = f"rtctl.telemetry.v{SCHEMA_VERSION}.Sample"
META_SCHEMA_NAME = f"rtctl.telemetry.v{SCHEMA_VERSION}.Meta"
EVENT_SCHEMA_NAME = f"rtctl.telemetry.v{SCHEMA_VERSION}.Event"

# Every JSON message carries ``header.stamp`` ({sec, nsec}, the wall clock of the sample or event, as ROS's
# std_msgs/Header): Foxglove's plots can take it as their x axis ("header.stamp") instead of the receive time,
# at which a live client gets the samples in 10 ms batches.
HEADER_JSON_SCHEMA = {"type": "object", "description": "when the message's data was taken (wall clock)",
                      "properties": {"stamp": {"type": "object", "properties": {
                          "sec": {"type": "integer", "description": "s since the unix epoch"},
                          "nsec": {"type": "integer", "description": "ns after sec"}}},
                          "frame_id": {"type": "string"}}}


def header(seconds) -> dict:
    """The ``header`` of a JSON message stamped ``seconds`` (unix s; 0 when not a finite time)."""
    ns = stamp_ns(seconds)
    return {"stamp": {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}, "frame_id": ""}


def _schema(title: str, properties: dict) -> bytes:
    return json.dumps({"title": title, "type": "object",
                       "properties": {"header": HEADER_JSON_SCHEMA, **properties}}).encode()


def meta_json_schema() -> bytes:
    """The JSON Schema of a ``/rtctl/meta`` message (the module docstring's ``rtctl/meta``)."""
    text = {"type": "string"}
    number = {"type": "number"}
    return _schema(META_SCHEMA_NAME, {
        "schema": text, "version": {"type": "integer"}, "robot": text,
        "joints": {"type": "array", "items": text, "description": "actuated joints, the order of q, qd, ..."},
        "rate_hz": number, "period": {"type": "number", "description": "s"},
        "batch_period": {"type": "number", "description": "s"},
        "fields": {"type": "object", "description": "field name -> {shape, unit}"},
        "extra": {"type": "array", "items": text, "description": "the names of the extra field's values"},
        "controller": text, "trajectory": text, "started": {"type": "number", "description": "unix s"},
        "capacity": {"type": "integer", "description": "rows of the publisher's ring"},
        "backlog": {"type": "string", "description": "the topic that asks the publisher for its ring's backlog"}})


def event_json_schema() -> bytes:
    """The JSON Schema of a ``/rtctl/event`` message (the module docstring's ``rtctl/event``)."""
    return _schema(EVENT_SCHEMA_NAME, {
        "schema": {"type": "string"}, "version": {"type": "integer"}, "seq": {"type": "integer"},
        "kind": {"type": "string", "description": "control, safety or telemetry"},
        "cycle": {"type": "integer"}, "t": {"type": "number", "description": "control time, s"},
        "stamp": {"type": "number", "description": "unix s"}, "detail": {"type": "string"},
        "request": {"type": "object", "description": "the accepted control request, without its token"}})


NUMBER_NOTE = ("null where the value is not finite; the message's 'nonfinite' list then says which (NaN, "
               "Infinity, -Infinity) and where")


def sample_json_schema() -> bytes:
    """The JSON Schema (bytes) of one ``/rtctl/samples`` message. A non-finite value is ``null`` and listed in
    ``nonfinite`` (:mod:`rtctl.telemetry.jsonvalues`); the fields keep ``"type": "number"``, the one type
    name Foxglove's JSON Schema reader accepts, and say so in their description."""
    props = {"index": {"type": "integer"}, "header": HEADER_JSON_SCHEMA}
    for name in SCALAR_FIELDS:
        props[name] = {"type": "integer" if name in INTEGER_FIELDS else "number",
                       "description": f"{SCALAR_UNITS[name]}; {NUMBER_NOTE}"}
    for name in (*JOINT_FIELDS, "extra"):
        props[name] = {"type": "array", "items": {"type": "number", "description": NUMBER_NOTE}}
    props[NONFINITE] = NONFINITE_JSON_SCHEMA
    return json.dumps({"title": SAMPLE_SCHEMA_NAME, "type": "object", "properties": props}).encode()


class JsonRows:
    """Encodes ring rows (k, width) as JSON texts, one per row, with a template made once.

    ``style="plotjuggler"``: the flat object of :func:`plotjuggler_objects` (``timestamp`` = t, then
    ``cycle``, ..., ``q/<joint>``, ..., ``extra/<label>``); ``style="sample"``: the ``/rtctl/samples``
    message (``index``, the scalars, per-joint arrays, ``extra`` when there are extras).

    One C-level ``%`` per row (float ``repr``: the shortest text that reads back to the same
    float64, as :func:`json.dumps` writes it), so an encoding thread holds the GIL in short stretches
    and makes a few objects per row instead of a dict of ~80. A row with a non-finite value, which JSON cannot
    carry, takes the slow path and follows :mod:`rtctl.telemetry.jsonvalues`: ``null`` in its place and the
    ``nonfinite`` list naming it.
    """

    def __init__(self, layout: Layout, joints: list[str], extra: list[str], style: str = "plotjuggler"):
        if style not in ("plotjuggler", "sample"):
            raise ValueError(f"JsonRows style must be 'plotjuggler' or 'sample', got {style!r}")
        if len(joints) != layout.n or len(extra) != layout.n_extra:
            raise ValueError("JsonRows: joints/extra do not match the layout")
        self.style = style
        self.layout = layout
        self._stamp_col = layout.slices["stamp"].start
        def key(name: str) -> str:
            return json.dumps(name).replace("%", "%%")

        ints = {layout.slices[name].start for name in INTEGER_FIELDS} if style == "sample" else set()
        self._ints = ints
        flat_names = ["timestamp", *SCALAR_FIELDS[1:]]
        flat_names += [f"{f}/{j}" for f in JOINT_FIELDS for j in joints] + [f"extra/{e}" for e in extra]
        if style == "plotjuggler":
            pointers = ["/" + pointer_token(n) for n in flat_names]
        else:       # the ring's columns: the scalars, then each per-joint block, then the extras
            pointers = [f"/{name}" for name in SCALAR_FIELDS]
            pointers += [f"/{name}/{k}" for name in (*JOINT_FIELDS, "extra")
                         for k in range(len(range(layout.width)[layout.slices[name]]))]
        self._pointers = [json.dumps(p) for p in pointers]     # a column's place, for the 'nonfinite' list

        def template(fmt_int: str, fmt_float: str) -> str:
            conv = [fmt_int if c in ints else fmt_float for c in range(layout.width)]
            if style == "plotjuggler":  # every value a float, as plotjuggler_objects writes them
                return "{" + ",".join(f"{key(n)}:{c}" for n, c in zip(flat_names, conv)) + "}"
            parts = [f"{key('index')}:{fmt_int}",
                     f'{key("header")}:{{"stamp":{{"sec":{fmt_int},"nsec":{fmt_int}}},"frame_id":""}}']
            parts += [f"{key(name)}:{conv[layout.slices[name].start]}" for name in SCALAR_FIELDS]
            for name in ([*JOINT_FIELDS, "extra"] if layout.n_extra else JOINT_FIELDS):
                sl = layout.slices[name]
                parts.append(f"{key(name)}:[" + ",".join(conv[sl]) + "]")
            return "{" + ",".join(parts) + "}"

        self._template = template("%d", "%r")
        self._null_template = template("%s", "%s")

    def encode(self, rows: np.ndarray, first: int = 0, step: int = 1) -> list[bytes]:
        """``rows`` (k, width) -> k UTF-8 JSON texts; row i is sample ``first + i * step`` (style "sample")."""
        if rows.shape[0] == 0:
            return []
        tmpl = self._template
        finite = np.isfinite(rows).all(axis=1)
        values = rows.tolist()
        if self.style == "sample":
            ns = rows[:, self._stamp_col] * 1e9
            ns = np.where(np.isfinite(ns) & (ns >= 0) & (ns < _MAX_NS), ns, 0.0).astype(np.int64)
            sec, nsec = np.divmod(ns, 1_000_000_000)
            out = []
            for i, (row, ok, s, n) in enumerate(zip(values, finite.tolist(), sec.tolist(), nsec.tolist())):
                index = first + i * step
                out.append((tmpl % (index, s, n, *row)).encode() if ok else self._slow(row, (index, s, n)))
            return out
        return [(tmpl % tuple(row)).encode() if ok else self._slow(row, None)
                for row, ok in zip(values, finite.tolist())]

    def _slow(self, row: list, index) -> bytes:
        ints = self._ints
        cells = ["null" if not np.isfinite(v) else (str(int(v)) if c in ints else repr(v)) for c, v in enumerate(row)]
        listed = ",".join(f'{{"at":{self._pointers[c]},"value":"{spell(v)}"}}' for c, v in enumerate(row)
                          if not np.isfinite(v))
        if index is not None:
            cells[:0] = [str(int(k)) for k in index]
        return ((self._null_template % tuple(cells))[:-1] + f',"{NONFINITE}":[{listed}]}}').encode()
