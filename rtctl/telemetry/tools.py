"""Telemetry tools: echo, stats and plot; reading recordings (``rtctl record``: :mod:`.recording`, ``rtctl
replay``: :mod:`.playback`).

Recordings are MCAP files (the ``mcap`` package's reference writer/reader)
with JSON messages and JSON Schemas, so Foxglove opens them directly:
``/rtctl/samples`` (one message per loop sample: the schema-v1 fields of one
row, plus ``index``, the sample index), ``/rtctl/meta`` and ``/rtctl/event``;
log time is the sample's ``stamp`` (unix ns). ``replay`` turns a recording
back into the live schema-v1 stream (re-batched, paced at ``speed``).
"""
from __future__ import annotations

import json
import os
import struct
import sys
import time

import numpy as np
import zmq

from .jsonvalues import dumps, restore
from .schema import (CHANNEL_DESCRIPTION, INTEGER_FIELDS, JOINT_FIELDS, SCHEMA_VERSION, TOPIC_SAMPLES, SchemaError,
                     decode, header)
from .subscriptions import MAX_STREAM_MESSAGE_BYTES

CH_SAMPLES, CH_META, CH_EVENT = "/rtctl/samples", "/rtctl/meta", "/rtctl/event"
CH_DESCRIPTION = CHANNEL_DESCRIPTION


def _subscriber(endpoint: str, ctx=None, rcvhwm: int = 100_000):
    from .endpoints import check_connect_endpoint

    check_connect_endpoint(endpoint, "telemetry endpoint")
    ctx = ctx or zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVHWM, rcvhwm)
    sub.setsockopt(zmq.MAXMSGSIZE, MAX_STREAM_MESSAGE_BYTES)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"rtctl/")
    return sub


def rows_of(msg: dict):
    """The rows of a decoded samples batch as dicts (schema field -> value), with ``index`` and the ``header``
    of the JSON messages (:func:`~.schema.header`)."""
    fields = msg["fields"]
    stamps = fields.get("stamp")
    for i in range(msg["count"]):
        row = {"index": msg["first"] + i}
        if stamps is not None:
            row["header"] = header(stamps[i])
        for name, values in fields.items():
            row[name] = values[i]
        yield row


class PublisherWait:
    """Says once, after ``after`` s with nothing received, that the tool is waiting for a publisher (the
    subscribing tools: echo, stats, record, the dashboard). Call :meth:`idle` when a wait for a message
    timed out, :meth:`received` when one arrived, :meth:`finish` when the tool stops listening. ``write``
    says the line instead of printing it to ``out`` (a progress bar's ``write``, so the line is not appended
    to the bar's)."""

    def __init__(self, endpoint: str, out, after: float = 1.0, write=None):
        self.endpoint, self.out, self.write = endpoint, out, write
        self.deadline = time.monotonic() + after
        self.heard = False

    def idle(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._say()

    def received(self) -> None:
        self.deadline = None
        self.heard = True

    def finish(self) -> bool:
        """Whether anything arrived; if nothing did, the waiting line has been said (now, if the tool stopped
        before ``after``), so a tool that heard nothing never ends silently."""
        if not self.heard and self.deadline is not None:
            self._say()
        return self.heard

    def _say(self) -> None:
        line = f"waiting for a publisher on {self.endpoint} ..."
        if self.write is not None:
            self.write(line)
        else:
            print(line, file=self.out or sys.stderr, flush=True)
        self.deadline = None


class StreamCounter:
    """Counts samples received and samples lost (gaps in sample indices) of one stream; ``before_first``:
    samples the publisher sent before the first one received (the subscription was not yet in place);
    ``from_backlog``: samples received in a backlog (:mod:`.backlog`) rather than live."""

    def __init__(self):
        self.received = 0
        self.from_backlog = 0
        self.lost = 0
        self.before_first = 0
        self.next_index = None
        self.publisher_dropped = 0
        self.batches = 0

    def add(self, msg: dict) -> None:
        first, count = msg["first"], msg["count"]
        if self.next_index is None:
            self.before_first = first
        elif first > self.next_index:
            self.lost += first - self.next_index
        self.next_index = first + count
        self.received += count
        self.from_backlog += count if "backlog" in msg else 0
        self.batches += 1
        self.publisher_dropped = msg.get("dropped", 0)


# -- echo -----------------------------------------------------------------------------------
def echo(endpoint: str, count: int | None = None, timeout: float | None = None, out=None, ctx=None) -> int:
    """Print messages as JSON lines: ``TOPIC {...}``; a samples batch prints one line per sample."""
    out = out or sys.stdout
    sub = _subscriber(endpoint, ctx)
    waiting = PublisherWait(endpoint, sys.stderr)
    printed = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while count is None or printed < count:
            wait = 200 if deadline is None else max(0, min(200, int((deadline - time.monotonic()) * 1000)))
            if not sub.poll(wait):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                waiting.idle()
                continue
            waiting.received()
            topic, payload = sub.recv_multipart()[:2]
            try:
                msg = decode(topic, payload)
            except SchemaError as exc:
                print(f"# {exc}", file=out, flush=True)
                continue
            if topic == TOPIC_SAMPLES:
                for row in rows_of(msg):
                    print(f"{topic.decode()} {dumps(row)}", file=out)
                    printed += 1
                    if count is not None and printed >= count:
                        break
            else:
                print(f"{topic.decode()} {dumps(msg, default=str)}", file=out)
                printed += 1
            out.flush()
    finally:
        sub.close(linger=0)
    if not printed:
        print(f"no message from {endpoint} within {timeout:g} s", file=sys.stderr)
        return 1
    return 0


# -- stats ----------------------------------------------------------------------------------
def stats(endpoint: str, duration: float = 5.0, out=None, ctx=None) -> dict:
    """Listen for ``duration`` s; print and return rate, losses, publisher drops and latency.

    With no sample there is no table (``samples`` is 0): the waiting line says nothing arrived, or one line
    that only metadata or events did."""
    out = out or sys.stdout
    sub = _subscriber(endpoint, ctx)
    counter = StreamCounter()
    latencies = []
    loop_latency = []
    errors = 0
    waiting = PublisherWait(endpoint, sys.stderr)
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            if not sub.poll(max(1, min(200, int((end - time.monotonic()) * 1000)))):
                waiting.idle()
                continue
            waiting.received()
            topic, payload = sub.recv_multipart()[:2]
            now = time.time()
            try:
                msg = decode(topic, payload)
            except SchemaError:
                errors += 1
                continue
            if topic != TOPIC_SAMPLES:
                continue
            counter.add(msg)
            f = msg["fields"]
            latencies.extend(now - s for s in f["stamp"])
            loop_latency.extend(f["latency"])
    finally:
        sub.close(linger=0)
    heard = waiting.finish()
    lat = np.asarray(latencies) * 1e3
    result = {"samples": counter.received, "batches": counter.batches, "rate_hz": counter.received / duration,
              "lost": counter.lost, "publisher_dropped": counter.publisher_dropped, "decode_errors": errors,
              "latency_ms": {k: float(fn(lat)) if lat.size else float("nan") for k, fn in
                             (("p50", np.median), ("p99", lambda a: np.percentile(a, 99)), ("max", np.max))},
              "loop_wakeup_latency_us_p99": float(np.percentile(np.asarray(loop_latency) * 1e6, 99))
              if loop_latency else float("nan")}
    if not counter.received:       # no table of NaNs: one line on stderr says what was missing
        if heard:
            print(f"no samples from {endpoint} within {duration:g} s (only metadata or events: is the loop "
                  f"running?)", file=sys.stderr, flush=True)
        return result
    print(f"{endpoint}: {result['samples']} samples in {result['batches']} batches over {duration:g} s "
          f"= {result['rate_hz']:.1f} samples/s", file=out)
    print(f"  lost by this subscriber (index gaps): {result['lost']}; dropped by the publisher ring: "
          f"{result['publisher_dropped']}; undecodable messages: {errors}", file=out)
    lm = result["latency_ms"]
    print(f"  hand-off -> receive latency (ms): p50 {lm['p50']:.3f}  p99 {lm['p99']:.3f}  max {lm['max']:.3f}",
          file=out)
    print(f"  loop wake-up latency p99 (us): {result['loop_wakeup_latency_us_p99']:.1f}", file=out, flush=True)
    return result


# -- reading recordings ------------------------------------------------------------------------
MAX_CHUNK_BYTES = 64 << 20       # one MCAP chunk, uncompressed (rtctl record writes chunks of about 1 MiB)
MAX_RECORDING_BYTES = 1 << 30    # messages of one recording, uncompressed (about 1.5 million 7-joint samples)
COLUMN_BATCH = 4096              # samples parsed before they are turned into arrays (8 bytes a number)


def read_recording(path: str, progress: bool = True, out=None) -> dict:
    """Load an MCAP recording: ``{"meta": last meta, "events": [...], "samples": {field: array}, "description":
    the first /robot_description message or None}``.

    A file that is not a recording of ``rtctl record`` -- truncated, with lengths or chunk sizes beyond the
    file or beyond :data:`MAX_CHUNK_BYTES`, a compressed chunk that inflates past its declared size or the
    messages past :data:`MAX_RECORDING_BYTES` (a compression bomb), samples that are not objects of numbers
    with the same fields -- is a ``ValueError`` of one line naming the file and what is wrong, read before
    anything inflates beyond those bounds."""
    from mcap.exceptions import McapError

    if os.path.getsize(path) == 0:
        raise ValueError(f"{path}: the file is empty (a recording that never started?)")
    try:
        columns, events, meta, description = _read_mcap_rows(path, progress, out)
    except SchemaError:
        raise
    except (McapError, EOFError, struct.error, ValueError, MemoryError, OverflowError, RuntimeError) as exc:
        raise ValueError(f"{path}: not a readable MCAP recording ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}); record one with `rtctl record FILE.mcap`") from None
    if columns is None:
        raise ValueError(f"{path}: the recording holds no telemetry samples")
    return {"meta": meta, "events": events, "samples": columns, "description": description}


class _FileBound:
    """A file's reads capped at what is left of it: a record that declares more bytes than the file holds
    ends the read (MCAP's EndOfFile) instead of allocating the declared size."""

    def __init__(self, fh, size: int):
        self._fh, self._size = fh, size

    def read(self, n: int = -1) -> bytes:
        left = max(0, self._size - self._fh.tell())
        return self._fh.read(left if n is None or n < 0 else min(n, left))

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def seekable(self) -> bool:
        return True


def inflate_chunk(path: str, chunk) -> bytes:
    """A chunk's records, decompressed to at most MAX_CHUNK_BYTES and exactly its declared size."""
    size = chunk.uncompressed_size
    where = f"{path}: an MCAP chunk"
    if size > MAX_CHUNK_BYTES:
        raise SchemaError(f"{where} declares {size} bytes uncompressed, more than the {MAX_CHUNK_BYTES >> 20} MiB "
                          f"rtctl reads at once (not a recording of `rtctl record`)")
    limit = MAX_CHUNK_BYTES + 1
    if chunk.compression == "zstd":
        import io

        import zstandard
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(chunk.data), read_across_frames=True) as z:
                parts, got = [], 0
                while got < limit:
                    part = z.read(min(1 << 20, limit - got))
                    if not part:
                        break
                    parts.append(part)
                    got += len(part)
            data = b"".join(parts)
        except zstandard.ZstdError as exc:
            raise SchemaError(f"{where} is not valid zstd data ({exc})") from None
    elif chunk.compression == "lz4":
        import lz4.frame
        data = lz4.frame.LZ4FrameDecompressor().decompress(chunk.data, max_length=limit)
    elif chunk.compression == "":
        data = chunk.data
    else:
        raise SchemaError(f"{where} uses the compression {chunk.compression[:40]!r}; rtctl reads zstd, lz4 or none")
    if len(data) != size:
        more = "or more " if len(data) >= limit else ""
        raise SchemaError(f"{where} declares {size} bytes uncompressed and inflates to {more}{len(data)} bytes "
                          f"(damaged, or a compression bomb)")
    return data


def _read_mcap_rows(path: str, progress: bool, out):
    """(columns or None, events, meta, description) in log-time order, each message checked and bounded as it is
    read."""
    import dataclasses

    from mcap.reader import make_reader
    from mcap.records import Channel, Chunk, Message
    from mcap.stream_reader import StreamReader, breakup_chunk
    from tqdm import tqdm

    size = os.path.getsize(path)
    events, metas, batches, rows, stamps = [], [], [], [], []
    names = description = None
    with open(path, "rb") as fh:
        summary = make_reader(_FileBound(fh, size)).get_summary()
        total = sum(summary.statistics.channel_message_counts.values()) if summary and summary.statistics else None
        if total is not None and not _sample_count(summary):
            return None, events, None, None     # no samples: read_recording says so, with no progress bar before it
        fh.seek(0)
        bar = tqdm(total=total, unit="msg", desc=f"reading {path}", disable=not progress, file=out or sys.stderr)
        topics, inflated = {}, 0

        def records():
            nonlocal inflated
            for record in StreamReader(_FileBound(fh, size), emit_chunks=True, record_size_limit=size).records:
                if isinstance(record, Chunk):
                    data = inflate_chunk(path, record)
                    inflated += len(data)
                    if inflated > MAX_RECORDING_BYTES:
                        break
                    yield from breakup_chunk(dataclasses.replace(record, compression="", data=data), True)
                else:
                    yield record

        for record in records():
            if isinstance(record, Channel):
                if record.message_encoding == "json":   # the 3D view's protobuf channels are Foxglove's to read
                    topics[record.id] = record.topic
                continue
            if not isinstance(record, Message):
                continue
            inflated += len(record.data)
            if inflated > MAX_RECORDING_BYTES:
                break
            if record.channel_id not in topics:
                continue
            topic = topics[record.channel_id]
            obj = _message(path, topic, record.data)
            if topic == CH_SAMPLES:
                if isinstance(obj, dict):
                    obj.pop("header", None)   # the stamp again, for plots: the sample's 'stamp' is the column
                rows.append(obj)
                stamps.append(record.log_time)
                if len(rows) == COLUMN_BATCH:
                    names = _add_batch(path, batches, rows, names)
            elif topic == CH_META:
                if not isinstance(obj, dict):
                    raise SchemaError(f"{path}: a {CH_META} message is a JSON {type(obj).__name__}, not an object")
                if obj.get("version") != SCHEMA_VERSION:
                    raise SchemaError(f"{path}: recording has telemetry schema version {obj.get('version')!r}, "
                                      f"this rtctl reads version {SCHEMA_VERSION}")
                metas.append((record.log_time, obj))
            elif topic == CH_DESCRIPTION:
                description = obj if description is None else description
            else:
                events.append((record.log_time, obj))
            bar.update(1)
        bar.close()
    if inflated > MAX_RECORDING_BYTES:
        raise SchemaError(f"{path}: the recording's messages inflate to more than {MAX_RECORDING_BYTES >> 20} MiB, "
                          f"more than rtctl reads into memory (a compression bomb, or record a shorter run)")
    if rows:
        names = _add_batch(path, batches, rows, names)
    meta = max(metas, key=lambda m: m[0])[1] if metas else None       # the last in log time
    events = [e for _, e in sorted(events, key=lambda e: e[0])]
    if not batches:
        return None, events, meta, description
    order = np.argsort(np.asarray(stamps, dtype=np.uint64), kind="stable")
    columns = {name: np.concatenate([b[name] for b in batches])[order] for name in names}
    return columns, events, meta, description


def _message(path: str, topic, data: bytes):
    """A recorded JSON message with its non-finite values restored (:mod:`rtctl.telemetry.jsonvalues`;
    recordings of earlier versions hold the literals NaN and Infinity, which :func:`json.loads` reads)."""
    try:
        return restore(json.loads(data))
    except ValueError as exc:
        raise SchemaError(f"{path}: a {topic or 'recorded'} message: {' '.join(str(exc).split())[:200]}") from None


def _add_batch(path: str, batches: list, rows: list, names):
    """Turn ``rows`` (the samples' JSON objects) into arrays appended to ``batches``; empties ``rows``.
    Every sample must be an object with the first sample's fields: numbers (64-bit integers for the integer
    fields) or, for the per-joint fields, lists of numbers as long in every sample."""
    first = sum(len(next(iter(b.values()))) for b in batches)
    expected = None if names is None else set(names)
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SchemaError(f"{path}: telemetry sample {first + k} is a JSON {type(row).__name__}, not an object")
        if names is None:
            names = tuple(row)
            expected = set(names)
            if not names:
                raise SchemaError(f"{path}: telemetry sample {first + k} has no fields")
        if row.keys() != expected:
            missing = [n for n in names if n not in row]
            extra = [n for n in row if n not in names]
            raise SchemaError(f"{path}: telemetry sample {first + k} "
                              + (f"lacks the field(s) {missing}" if missing else f"has the field(s) {extra[:5]}")
                              + " that the first sample " + ("has" if missing else "has not"))
    batch = {}
    for name in names:
        integer = name in INTEGER_FIELDS or name == "index"
        values = [r[name] for r in rows]
        try:
            column = np.asarray(values, dtype=np.int64 if integer else np.float64)
        except (ValueError, TypeError, OverflowError):
            column = None
        if column is None or column.ndim not in (1, 2) or (batches and column.shape[1:] != batches[0][name].shape[1:]):
            _raise_bad_field(path, first, name, values, integer, batches[0][name].shape[1:] if batches else None)
        batch[name] = column
    batches.append(batch)
    rows.clear()
    return names


def _raise_bad_field(path: str, first: int, name: str, values: list, integer: bool, shape):
    """The first sample whose ``name`` is not what the others' are, in one line."""
    import numbers

    def kind(v):
        if isinstance(v, bool) or not isinstance(v, (numbers.Real, list)):
            return None
        if isinstance(v, list):
            if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in v):
                return None
            if integer and not all(isinstance(x, int) and -2 ** 63 <= x < 2 ** 63 for x in v):
                return None
            return (len(v),)
        if integer and isinstance(v, int) and not -2 ** 63 <= v < 2 ** 63:
            return None
        return ()

    expected = shape if shape is not None else kind(values[0])
    for k, v in enumerate(values):
        got = kind(v)
        if got is None or got != expected:
            number = "a 64-bit integer" if integer else "a number"
            if expected is None:
                what = f"{number} or a list of them"
            elif expected:
                what = f"a list of {expected[0]} {'64-bit integers' if integer else 'numbers'}"
            else:
                what = number
            text = json.dumps(v)
            raise SchemaError(f"{path}: telemetry sample {first + k} field '{name}' = "
                              f"{text[:60] + ('...' if len(text) > 60 else '')} is not {what}")
    raise SchemaError(f"{path}: telemetry field '{name}' is not numbers of one shape")


def require_fields(path: str, samples: dict, names, command: str) -> None:
    """ValueError of one line when the recording lacks a field ``command`` reads: scalar fields hold one number
    per sample, per-joint fields as many as ``q`` (a recording of another writer, or hand-made)."""
    missing = [name for name in names if name not in samples]
    if missing:
        raise ValueError(f"{path}: {command} needs the field(s) {missing}, which the recording's samples lack "
                         f"(fields: {sorted(samples)})")
    width = samples["q"].shape[1:] if "q" in samples else None
    for name in names:
        joint = name in JOINT_FIELDS
        if samples[name].ndim != (2 if joint else 1) or (joint and width is not None and samples[name].shape[1:] != width):
            raise ValueError(f"{path}: the field '{name}' holds {samples[name].shape[1:] or 'one value'} per sample; "
                             f"{command} needs " + (f"one per joint ({width[0] if width else '?'})" if joint
                                                    else "one number"))


def _sample_count(summary) -> int:
    """Messages on the samples channel(s), from a recording's summary."""
    counts = summary.statistics.channel_message_counts
    return sum(counts.get(cid, 0) for cid, channel in summary.channels.items() if channel.topic == CH_SAMPLES)


def _plot_timing(ax, s) -> None:
    """Histogram of wake-up latency and period jitter; the title counts the recorded window's cycles and
    overruns (``overruns`` is the loop's running count, so the window's is last minus the one before it)."""
    lat = s["latency"] * 1e6
    per = s["period"] * 1e6
    cycles = s["cycle"]
    before = 0 if cycles[0] == 0 else int(s["overruns"][0])          # a window from cycle 0 counts its first
    overruns = int(s["overruns"][-1]) - before
    span = int(cycles[-1] - cycles[0] + 1)
    bins = np.logspace(-1, np.log10(max(10.0, np.nanmax(lat), np.nanmax(per)) * 1.1), 60)
    ax.hist(np.clip(lat[np.isfinite(lat)], 0.1, None), bins=bins, alpha=0.7, label="wake-up latency")
    if np.any(per > 0):
        jitter = np.abs(per[per > 0] - np.median(per[per > 0]))
        ax.hist(np.clip(jitter, 0.1, None), bins=bins, alpha=0.5, label="|period - median period|")
    recorded = f", {len(cycles)} recorded" if len(cycles) != span else ""
    ax.set(title=f"loop timing: cycles {int(cycles[0])}-{int(cycles[-1])} ({span}{recorded}), {overruns} overruns",
           xlabel="time (us, log scale)", ylabel="cycles (log scale)", xscale="log", yscale="log")
    ax.legend(fontsize=8, loc="upper right")


SAFETY_MARKERS = {"trip": dict(color="black", lw=1.4, ls="-", label="safe state entered (trip or e-stop)"),
                  "rearm": dict(color="black", lw=1.4, ls=":", label="re-armed")}   # black: no joint's colour


def safety_changes(t, tripped) -> dict[str, np.ndarray]:
    """The times at which the loop entered its safe state and at which it was re-armed (a recording that
    starts in the safe state enters it at its first sample)."""
    state = np.asarray(tripped) != 0
    change = np.flatnonzero(np.diff(state.astype(np.int8), prepend=np.int8(0)))
    return {"trip": np.asarray(t)[change[state[change]]], "rearm": np.asarray(t)[change[~state[change]]]}


def _mark_safety(axes, t, tripped) -> None:
    """A vertical line at every entry into the safe state and every re-arm, in the legend once each."""
    for kind, times in safety_changes(t, tripped).items():
        for a in axes:
            for k, when in enumerate(times):
                a.axvline(when, **{**SAFETY_MARKERS[kind], "label": SAFETY_MARKERS[kind]["label"] if k == 0 else None})


# -- plot -------------------------------------------------------------------------------------------
def plot(path: str, out_path: str, progress: bool = True, out=None) -> str:
    """Figure from a recording: q vs q_d, tracking error, effort, and the loop-timing histogram."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = read_recording(path, progress=progress, out=out)
    s = rec["samples"]
    if not s:
        raise ValueError(f"{path}: no samples recorded")
    require_fields(path, s, ("t", "cycle", "period", "latency", "overruns", "tripped", "q", "q_d", "error",
                             "effort_cmd"), "plot")
    joints = (rec["meta"] or {}).get("joints")
    if not isinstance(joints, list) or len(joints) != s["q"].shape[1]:
        joints = [f"j{k}" for k in range(s["q"].shape[1])]
    t = s["t"]
    fig, ax = plt.subplots(2, 2, figsize=(14, 8), constrained_layout=True)
    for k, name in enumerate(joints):
        line, = ax[0, 0].plot(t, s["q"][:, k], lw=1.2, label=name)
        ax[0, 0].plot(t, s["q_d"][:, k], "--", lw=0.9, color=line.get_color())
        ax[0, 1].plot(t, s["error"][:, k], lw=1.0, label=name)
        ax[1, 0].plot(t, s["effort_cmd"][:, k], lw=1.0, label=name)
    ax[0, 0].set(title="position q (solid) vs desired q_d (dashed)", xlabel="t (s)",
                 ylabel="position (rad; m for prismatic joints)")
    ax[0, 1].set(title="tracking error q_d - q", xlabel="t (s)", ylabel="error (rad; m for prismatic joints)")
    ax[1, 0].set(title="commanded effort", xlabel="t (s)", ylabel="effort (N m; N for prismatic joints)")
    _mark_safety(ax.flat[:3], t, s["tripped"])
    ax[0, 0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    _plot_timing(ax[1, 1], s)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path
