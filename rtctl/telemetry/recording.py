"""``rtctl record``: the live stream into an MCAP file that every reader opens, however the recording stops.

The file is written by the ``mcap`` package's reference Writer (JSON messages, JSON Schemas, zstd chunks;
see :mod:`rtctl.telemetry.tools` for the channels). What a stop leaves:

* Ctrl-C, SIGTERM or SIGHUP (and the end of ``--duration``, ``--samples``, ``--idle-timeout``): the open
  chunk is closed and DataEnd, the summary and the footer are written: a complete file, also when nothing
  was received (the magic and header are on disk from the start);
* a full disk (or any failed write): one line saying so, and the file is closed after its last complete
  chunk (:func:`rtctl.telemetry.recover.recover`, in place), with its summary if the disk has room for it;
* SIGKILL or a power cut: the file lacks its footer; ``rtctl recover`` rebuilds it from its complete chunks.

The chunk in progress is closed at least every :data:`FLUSH_PERIOD` s (and at :data:`CHUNK_BYTES` of
messages), each closed chunk is handed to the operating system at once: a stop that lets nothing run loses
at most the last :data:`FLUSH_PERIOD` s (plus one 0.1 s receive wait) of samples, and, at the start, what
the recorder holds while the publisher's backlog comes in.

A recording started first misses nothing (:mod:`.backlog`): the recorder also subscribes to the backlog
topic, holds what arrives until the publisher's answer (the samples it had already published, still in its
ring) is in -- 0.05 s for a few hundred samples, 0.33 s for a whole ring of 4096 (measured beside the loop at
1 kHz, load 4-5 on 2 cores) -- then writes backlog and live samples in index order, each once, their log
times in order, with the metadata and events held meanwhile among them by log time; an orderly stop during
the hold writes what it held.

Signals: while a recording runs in the main thread, SIGINT, SIGTERM and SIGHUP ask the receive loop to stop
(a flag it reads at least every 0.1 s; under ``rtctl``'s command line through its one orderly stop,
:mod:`rtctl.rt.signals`, which gives the exit status 128 + the signal), so no write is ever cut in the middle
by a signal. A stop that arrives
as an exception anyway (KeyboardInterrupt raised by another handler, or in a thread) between two writes still
finishes the file with the Writer; one that lands inside a write is closed by recovery, like a full disk.
"""
from __future__ import annotations

import contextlib
import errno
import signal
import sys
import threading
import time

import zmq

from ..rt.signals import in_force, stop_requests
from .backlog import Joining, batch_error, rows_between
from .jsonvalues import dumps
from .schema import (DESCRIPTION_JSON_SCHEMA, DESCRIPTION_SCHEMA_NAME, EVENT_SCHEMA_NAME, META_SCHEMA_NAME,
                     SAMPLE_SCHEMA_NAME, SCHEMA_VERSION, TOPIC_BACKLOG, TOPIC_DESCRIPTION, TOPIC_META, TOPIC_SAMPLES,
                     SchemaError, decode, event_json_schema, header, meta_json_schema, sample_json_schema, stamp_ns)
from .tools import (CH_DESCRIPTION, CH_EVENT, CH_META, CH_SAMPLES, PublisherWait, StreamCounter, _subscriber,
                    rows_of)

FLUSH_PERIOD = 1.0           # s: the longest a chunk stays open
CHUNK_BYTES = 1 << 20        # messages' bytes that close a chunk sooner
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
        errno.EFBIG: "the file size limit is reached"}


class _StopRequest:
    """Set by a stop signal; read by the receive loop."""

    def __init__(self):
        self.signum = None

    def __call__(self, signum, _frame) -> None:
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


@contextlib.contextmanager
def stop_signals():
    """SIGINT, SIGTERM and SIGHUP turned into a stop request while the block runs: through rtctl's one orderly
    stop when it is in force (the command line: :mod:`rtctl.rt.signals`, which also gives the exit status),
    else by handlers of its own (main thread only; the previous handlers are put back after it)."""
    request = _StopRequest()
    if in_force():
        with stop_requests(lambda signum: request(signum, None)):
            yield request
        return
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {}
    try:
        for name in STOP_SIGNALS:
            if hasattr(signal, name):
                previous[name] = signal.signal(getattr(signal, name), request)
        yield request
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)


class McapRecording:
    """The recording file: the reference Writer, chunks closed at least every :data:`FLUSH_PERIOD` s, and
    :meth:`close`, which leaves a readable file whatever interrupted the writing."""

    def __init__(self, path: str):
        from mcap.writer import Writer

        self.path = str(path)
        self.fh = open(self.path, "wb")
        self.writer = Writer(self.fh, chunk_size=CHUNK_BYTES)
        self.written = {CH_SAMPLES: 0, CH_META: 0, CH_EVENT: 0, CH_DESCRIPTION: 0}
        self._busy = True            # a Writer call in progress: its state is then not to be trusted
        self.writer.start(profile="", library=f"rtctl telemetry v{SCHEMA_VERSION}")
        meta = self.writer.register_schema(name=META_SCHEMA_NAME, encoding="jsonschema", data=meta_json_schema())
        event = self.writer.register_schema(name=EVENT_SCHEMA_NAME, encoding="jsonschema", data=event_json_schema())
        sample = self.writer.register_schema(name=SAMPLE_SCHEMA_NAME, encoding="jsonschema",
                                             data=sample_json_schema())
        text = self.writer.register_schema(name=DESCRIPTION_SCHEMA_NAME, encoding="jsonschema",
                                           data=DESCRIPTION_JSON_SCHEMA)
        self.channels = {CH_SAMPLES: self.writer.register_channel(CH_SAMPLES, "json", sample),
                         CH_META: self.writer.register_channel(CH_META, "json", meta),
                         CH_EVENT: self.writer.register_channel(CH_EVENT, "json", event),
                         CH_DESCRIPTION: self.writer.register_channel(CH_DESCRIPTION, "json", text)}
        self.writer.flush()          # magic and header on disk: a stop from here on leaves an MCAP file
        self._busy = False
        self._flushed = time.monotonic()

    def add(self, topic: str, ns: int, data: str | bytes) -> None:
        self._busy = True
        self.writer.add_message(self.channels[topic], log_time=ns, publish_time=ns,
                                data=data.encode() if isinstance(data, str) else data)
        self._busy = False
        self.written[topic] += 1

    def channel(self, topic: str, schema_name: str, schema_encoding: str, schema: bytes, encoding: str) -> None:
        """Add the channel ``topic`` (a later one: the 3D view's, :mod:`.scene_recording`)."""
        self._busy = True
        schema_id = self.writer.register_schema(name=schema_name, encoding=schema_encoding, data=schema)
        self.channels[topic] = self.writer.register_channel(topic, encoding, schema_id)
        self._busy = False
        self.written[topic] = 0

    def tick(self, now: float) -> None:
        """Close the chunk in progress when it has been open :data:`FLUSH_PERIOD` s."""
        if now - self._flushed >= FLUSH_PERIOD:
            self._busy = True
            self.writer.flush()
            self._busy = False
            self._flushed = now

    def close(self) -> dict:
        """Finish the file. ``{"messages": {topic: count in the file}, "recovered": None or recover()'s
        result, "error": None or the OSError that stopped a write}``."""
        error = None
        if not self._busy:
            try:
                self.writer.finish()
                self.fh.close()
                return {"messages": dict(self.written), "recovered": None, "error": None}
            except OSError as exc:
                error = exc
        with contextlib.suppress(OSError):
            self.fh.close()          # what it still buffers may not fit: recovery cuts at the last chunk
        from .recover import recover

        found = recover(self.path)
        return {"messages": {t: found["messages"].get(t, 0) for t in self.written}, "recovered": found,
                "error": error}


def record(endpoint: str, path: str, duration: float | None = None, samples: int | None = None,
           progress: bool = True, ctx=None, idle_timeout: float | None = None, out=None) -> dict:
    """Write the live stream to an MCAP file until ``duration`` s, ``samples`` samples, idle, Ctrl-C, SIGTERM
    or SIGHUP. Returns what was received and what the file holds (``samples``, ``meta``, ``events``: messages
    in the file); ``failed``: None, or one line saying which write failed and what the file kept."""
    from tqdm import tqdm

    out = out or sys.stderr
    counter = StreamCounter()
    joining = Joining()
    failure = stopped_by = None
    with stop_signals() as stop:         # from before the file exists to after it is closed
        sub = _subscriber(endpoint, ctx)
        sub.setsockopt(zmq.SUBSCRIBE, TOPIC_BACKLOG)   # after rtctl/: the backlog's samples then reach us all
        try:
            rec = _open(path)
        except BaseException:
            sub.close(linger=0)
            raise
        bar = tqdm(total=samples, unit="sample", desc="recording", disable=not progress, file=out)
        waiting = PublisherWait(endpoint, out, write=lambda line: bar.write(line, file=out))
        writer = None
        try:
            writer = _Writer(rec, counter, bar, samples)
            _receive(sub, writer, waiting, stop, duration, idle_timeout, joining)
        except KeyboardInterrupt:
            stopped_by = "SIGINT"
        except OSError as exc:
            failure = exc
        finally:
            if writer and failure is None and joining.waiting and not rec._busy:   # stopped while waiting: keep it
                try:
                    writer.held(joining)
                except OSError as exc:
                    failure = exc
            bar.close()
            sub.close(linger=0)
            closed = rec.close()
            waiting.finish()
        stopped_by = stopped_by or stop.name
    failure = failure or closed["error"]
    held = closed["messages"]
    return {"samples": held[CH_SAMPLES], "received": counter.received, "lost": counter.lost,
            "before_first": counter.before_first, "from_backlog": counter.from_backlog,
            "publisher_dropped": counter.publisher_dropped,
            "meta": held[CH_META], "events": held[CH_EVENT], "description": held[CH_DESCRIPTION], "path": str(path),
            "stopped_by": stopped_by,
            "failed": None if failure is None and closed["recovered"] is None else
            _failure_line(path, failure, closed["recovered"], held[CH_SAMPLES], counter.received)}


def _open(path: str) -> McapRecording:
    try:
        return McapRecording(path)
    except OSError as exc:
        if exc.errno not in FULL:
            raise
        raise ValueError(f"{path}: {FULL[exc.errno]} ({exc.strerror}): nothing was recorded") from None


def _receive(sub, writer: "_Writer", waiting, stop, duration, idle_timeout, joining: Joining) -> None:
    """Write what arrives; while ``joining`` waits for the backlog (:mod:`.backlog`), hold it and write it, in
    order, once the wait is over (then ask for no more backlogs)."""
    start = last_rx = time.monotonic()
    while stop.signum is None:
        now = time.monotonic()
        if joining.waiting and joining.expired(now):
            writer.held(joining, sub)
        writer.rec.tick(now)
        if duration is not None and now - start >= duration:
            return
        if writer.limit is not None and writer.counter.received >= writer.limit:
            return
        if idle_timeout is not None and now - last_rx >= idle_timeout:
            return
        if not sub.poll(100):
            waiting.idle()
            continue
        waiting.received()
        topic, payload = sub.recv_multipart()[:2]
        last_rx = time.monotonic()
        try:
            msg = decode(topic, payload)
        except SchemaError as exc:
            writer.bar.write(f"rtctl record: skipped a message: {exc}")
            continue
        if topic in (TOPIC_SAMPLES, TOPIC_BACKLOG) and (why := batch_error(topic, msg)):
            writer.bar.write(f"rtctl record: skipped a message: {topic.decode()}: {why}")
            continue
        if joining.waiting:
            if joining.hold(topic, msg, time.monotonic(), time.time()):
                writer.held(joining, sub)
        elif topic == TOPIC_SAMPLES:
            batch = joining.trim(msg)
            if batch is not None:
                writer.samples([batch])
        elif topic != TOPIC_BACKLOG:       # a backlog another subscriber asked for, still in flight
            writer.other(topic, msg, time.time())


class _Writer:
    """What ``rtctl record`` writes of each message into ``rec``: the samples (at most ``limit`` in all, counted
    by ``counter`` and ``bar``) with their 3D view (:mod:`.scene_recording`), the metadata, the events and the
    robot description."""

    def __init__(self, rec: McapRecording, counter, bar, limit: int | None):
        from .scene_recording import RecordedScene

        self.rec, self.counter, self.bar, self.limit = rec, counter, bar, limit
        self.scene = RecordedScene(rec, say=bar.write)

    def samples(self, batches, others=()) -> None:
        """Sample ``batches`` in index order and, among their rows by log time, ``others``: (unix s received,
        topic, message) of the metadata, events and description, in the order they came."""
        if self.limit is not None:
            left, kept = self.limit - self.counter.received, []
            for batch in batches:
                if left > 0:
                    kept.append(rows_between(batch, 0, left))
                    left -= kept[-1]["count"]
            batches = kept
        timed = sorted(((stamp_ns(_log_seconds(topic, msg, received)), received, topic, msg)
                        for received, topic, msg in others), key=lambda item: item[0])
        due = 0
        for batch in batches:
            self.counter.add(batch)
            for row in rows_of(batch):
                ns = stamp_ns(row["stamp"])
                while due < len(timed) and timed[due][0] <= ns:
                    _, received, topic, msg = timed[due]
                    self.other(topic, msg, received)
                    due += 1
                self.rec.add(CH_SAMPLES, ns, dumps(row))
            self.scene.samples(batch)
            self.bar.update(batch["count"])
        for _, received, topic, msg in timed[due:]:
            self.other(topic, msg, received)

    def other(self, topic: bytes, msg: dict, received: float) -> None:
        """A message that is not a samples batch, received at ``received`` (unix s)."""
        if topic == TOPIC_META:
            self.scene.met(msg)
            self.rec.add(CH_META, stamp_ns(received), dumps({**msg, "header": header(received)}, default=str))
        elif topic == TOPIC_DESCRIPTION:
            self.scene.described(msg)
            if not self.rec.written[CH_DESCRIPTION] and isinstance(msg.get("urdf"), str):   # once: sent to newcomers
                self.rec.add(CH_DESCRIPTION, stamp_ns(received),
                             dumps({"data": msg["urdf"], "sensor_frames": msg.get("sensor_frames") or {}}, default=str))
        else:
            stamp = _log_seconds(topic, msg, received)
            self.rec.add(CH_EVENT, stamp_ns(stamp), dumps({**msg, "header": header(stamp)}, default=str))

    def held(self, joining: Joining, sub=None) -> None:
        """The wait for the backlog is over: write what ``joining`` held, the robot known first so that its 3D
        view covers every sample, and (``sub``) ask for no more backlogs."""
        if sub is not None:
            sub.setsockopt(zmq.UNSUBSCRIBE, TOPIC_BACKLOG)
        batches, others = joining.release()
        for _, topic, msg in others:
            if topic == TOPIC_META:
                self.scene.met(msg)
            elif topic == TOPIC_DESCRIPTION:
                self.scene.described(msg)
        self.samples(batches, others)


def _log_seconds(topic: bytes, msg: dict, received: float):
    """An event's stamp; another message's time of receipt (unix s)."""
    return msg.get("stamp", received) if topic not in (TOPIC_META, TOPIC_DESCRIPTION) else received


def _failure_line(path, exc, recovered, kept: int, received: int) -> str:
    """One line: what failed, and what the file holds now."""
    what = FULL.get(getattr(exc, "errno", None), "a write failed") if exc is not None else \
        "the recording was interrupted inside a write"
    cause = f" ({exc.strerror or exc})" if isinstance(exc, OSError) else ""
    if recovered is None:
        return f"{path}: {what}{cause} while closing the recording"
    closed = "closed at its last complete chunk" if recovered["summary"] else \
        "closed at its last complete chunk, without a summary (no room for it)"
    return f"{path}: {what}{cause}; the recording was {closed}: {kept} of the {received} samples received are in it"
