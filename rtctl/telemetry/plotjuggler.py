"""The PlotJuggler stream: flat JSON objects for PlotJuggler's ZMQ Subscriber and its JSON parser.

Each sample is one flat object (:class:`~rtctl.telemetry.schema.JsonRows`, style ``"plotjuggler"``):
``{"timestamp": t, "cycle": ..., "q/<joint>": ..., "extra/<label>": ...}``, sent on a PUB socket of its own
as single-frame messages. ``format`` says how the samples of one publisher batch travel:

* ``"array"`` (the default): one message per batch, the JSON array of its samples' objects;
* ``"object"``: one message per sample, the object itself.

What PlotJuggler makes of them, read in its source (``plotjuggler_plugins/DataStreamZMQ/datastream_zmq.cpp``
and ``plotjuggler_app/nlohmann_parsers.cpp``, tags 3.3.2 to 3.17.1):

* The subscriber's default port is 9872. From 3.6.1 it subscribes to each topic filter listed in its Topics
  field, or to ``""`` (every message) when the field is empty (before, always to ``""``); a filter such as
  ``rtctl`` matches no message here, as a single-frame message's filter is matched against the JSON text.
* A single-frame message has no topic, so its parser is the one made for topic ``""``. The parser names a
  member ``K`` of the top-level object ``prefix + "/" + K`` with an empty prefix: the key ``q/joint1`` is the
  series ``/q/joint1``, ``timestamp`` is ``/timestamp``. Booleans and numbers become points; ``null`` (a
  non-finite value, :mod:`rtctl.telemetry.jsonvalues`) and strings (the ``nonfinite`` list) are skipped.
* With "use field as timestamp if available" ticked and the field name ``timestamp`` (from 3.4.3; 3.3.2 to
  3.4.2 read ``timestamp`` when "use field [timestamp] if available" is ticked), a point's time is that
  member's number; without it, the receive time. A message whose field is missing or not a number turns the
  option off until the stream is started again (``t`` is always a finite number here).
* From 3.16.0 (its commit f3cba6e "Support batched array messages", February 2026) a top-level array is a
  batch: each element is parsed as a message of its own, its time taken from its own ``timestamp`` member, and
  its series named as above. Before 3.16.0 the parser flattens the array instead: series ``[0]/q/joint1``,
  ``[1]/q/joint1``, ... and no ``timestamp`` member at the top, so every point has the receive time. Hence
  ``format = "object"`` for PlotJuggler before 3.16.

Why ``"array"`` by default: PlotJuggler's current releases read it, and ZeroMQ's high-water marks count
messages, not bytes, so the same bytes in a tenth of the messages (1 kHz, 10 ms batches) let a PlotJuggler
that falls behind lose samples much later. ``python benchmarks/telemetry.py --only-plotjuggler`` measures both
forms in one run (benchmarks/RESULTS.md): a reader stalled until 20000 samples had been sent got all of them
from arrays, 3500-4500 from objects; the publisher's CPU per sample is about the same (array / object 0.95,
the encoding is most of it).
"""
from __future__ import annotations

import numpy as np

from .schema import JsonRows, Layout

FORMATS = ("array", "object")


class PlotJugglerStream:
    """Every ``decimation``-th sample (by sample index, whatever the batch boundaries), encoded in ``format``.

    Made with the options (validated here); :meth:`open` binds it to the stream's layout and names once they
    are known; :meth:`messages` turns a batch of ring rows into the messages to send.
    """

    def __init__(self, decimation: int = 1, format: str = "array"):
        if int(decimation) != decimation or decimation < 1:
            raise ValueError(f"plotjuggler_decimation must be an integer >= 1, got {decimation!r}")
        if format not in FORMATS:
            raise ValueError(f"plotjuggler_format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.decimation = int(decimation)
        self.format = format
        self._rows: JsonRows | None = None

    def open(self, layout: Layout, joints: list[str], extra: list[str]) -> None:
        self._rows = JsonRows(layout, joints, extra, style="plotjuggler")

    def messages(self, rows: np.ndarray, first: int) -> list[bytes]:
        """``rows`` (k, width), row i being sample ``first + i`` -> the messages carrying the decimated ones."""
        d = self.decimation
        picked = rows[(-first) % d::d] if d > 1 else rows
        texts = self._rows.encode(picked)
        if self.format == "object" or not texts:
            return texts
        return [b"[" + b",".join(texts) + b"]"]
