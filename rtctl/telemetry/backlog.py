"""The ring's backlog: a subscriber that joins late gets the samples published before it, while the ring has them.

ZeroMQ's PUB/SUB delivers nothing published before a subscription reaches the publisher (the "slow joiner" of
the ZeroMQ guide, chapter 1; RFC 29/PUBSUB filters at the publisher; the guide's chapter 5 answers it with a
snapshot from the publisher, as here). A recorder started before ``rtctl run``
connects once the run has bound its endpoint (ZeroMQ retries every 100 ms), and on a busy machine the run's
first samples went out before its subscription arrived (a recorder kept from running for the run's first 200
cycles began at sample 197 to 207: tests/test_telemetry_backlog.py, load 4 to 6 on 2 cores). The publisher
still holds them: its ring keeps the last ``capacity`` samples (:mod:`.publisher`).

The exchange. A subscriber that wants the backlog subscribes to ``rtctl/`` first, then to
:data:`~.schema.TOPIC_BACKLOG` (outside the ``rtctl/`` prefix: nobody else gets it; the schema module says
why). The publishing socket is an XPUB that passes every subscription up (:mod:`.subscriptions`), and
:class:`BacklogSender`, in the publisher thread after each flush, answers a subscription to that topic with a
*backlog*: the samples published so far that the ring still holds, oldest first, in batches on that topic.
Sample ``end`` (the first one not in the backlog) was published after the backlog began, so after the
subscriptions of whoever receives its first batch were in place (the subscriber's two subscriptions travel in
order on one connection; a backlog is started and its first batch sent between two live flushes): such a
subscriber gets every sample from the backlog's first on, once or twice. :class:`Joining` is its side: it
holds what arrives until the final batch of a backlog whose first batch it received, then gives the samples
in index order, each once.

What the backlog holds: every sample from the run's first, when the subscription arrives within the ring's
span (``capacity / rate_hz``: 4.1 s at the default 4096 samples and 1 kHz); later, the ring's samples but its
oldest, which the loop may be overwriting as it is read. A batch is copied from the ring as it is sent, and
rows the loop overwrote meanwhile are left out (a publisher starved for longer than the ring's span minus
what it had already sent loses the oldest; a subscriber sees the gap).

Bounds, whatever another local user who can connect sends (subscribing and unsubscribing as fast as it can):

* one backlog at a time; subscriptions that arrive meanwhile are answered together by one backlog, which
  starts no sooner than :data:`BACKLOG_INTERVAL` s after the previous one started: the publisher resends at
  most ``capacity`` samples per :data:`BACKLOG_INTERVAL` (counted in ``backlogs`` and ``backlog_rows``);
* in batches of ``CHUNK_ROWS`` samples with ``CHUNK_PAUSE`` between them and at most
  :data:`BACKLOG_CHUNKS` per wake of the publisher thread, like a live backlog (:mod:`.publisher`), so the
  loop's waits for the GIL stay as short in the thread mode;
* memory: one batch at a time, copied from the ring as it is sent; nothing else is kept. On the
  subscriber's side :class:`Joining` holds one backlog and the stream for at most :data:`MAX_HOLD` s, whatever
  the publisher sends, and takes only batches :func:`batch_error` finds well formed.
"""
from __future__ import annotations

import time

import numpy as np
import zmq

from .jsonvalues import NONFINITE
from .schema import TOPIC_BACKLOG, TOPIC_META, TOPIC_SAMPLES, envelope, pack

BACKLOG_INTERVAL = 1.0   # s from the start of one backlog to the start of the next, at least
BACKLOG_CHUNKS = 4       # backlog batches sent per wake of the publisher thread at most
BACKLOG_WAIT = 2.0       # s a joining subscriber holds the stream for its backlog's first batch, or its next one
MAX_HOLD = 10.0          # s a joining subscriber holds the stream at most (a whole ring of 4096 took 0.33 s)


class BacklogSender:
    """The publisher thread's side: answers subscriptions to :data:`~.schema.TOPIC_BACKLOG` on ``pub`` with
    backlogs of the ring of ``tel`` (a :class:`~.publisher.Telemetry`: its ``handed``, ``capacity``, ``layout``
    and ``dropped``; it counts ``backlogs``, ``backlog_rows`` and ``backlog_requests`` there), ``chunk_rows``
    samples a batch, ``chunk_pause`` s between batches."""

    def __init__(self, tel, pub, chunk_rows: int, chunk_pause: float):
        self.tel, self.pub = tel, pub
        self.chunk_rows, self.chunk_pause = int(chunk_rows), float(chunk_pause)
        self.pending = False       # a subscription waits for a backlog
        self.sending = False       # a backlog is in progress: samples [next, end) are still to send
        self.next = self.end = self.part = 0
        self.not_before = 0.0      # monotonic time before which no backlog starts
        self.ring = None

    def step(self, guard, ring, published: int) -> None:
        """After a live flush: note the subscriptions to the backlog topic ``guard`` (the stream's
        :class:`~.subscriptions.SubscriptionGuard`) took, start a backlog of ``ring`` when one is due (the samples
        before ``published``, the first not published yet), send its next batches."""
        self.ring = ring
        requests = guard.subscribed.count(TOPIC_BACKLOG)
        if requests:
            self.tel.backlog_requests += requests
            self.pending = True
        now = time.monotonic()
        if self.pending and not self.sending and now >= self.not_before:
            self.pending = False
            self.not_before = now + BACKLOG_INTERVAL
            self._begin(published)
        for _ in range(BACKLOG_CHUNKS):
            if not self.sending:
                break
            time.sleep(self.chunk_pause)    # the GIL is free for the loop thread between batches
            self._send_batch()

    def _begin(self, published: int) -> None:
        tel = self.tel
        self.end = published                                   # later ones go out live
        self.next = min(self.end, max(0, tel.handed - tel.capacity + 1))   # the oldest the loop is not writing
        self.part = 0
        self.sending = True
        tel.backlogs += 1

    def _send_batch(self) -> None:
        tel = self.tel
        first, stop = self.next, min(self.next + self.chunk_rows, self.end)
        rows = self.ring[np.arange(first, stop) % tel.capacity]   # a copy
        overwritten = min(stop, tel.handed - tel.capacity + 1) - first   # by the loop while we copied
        if overwritten > 0:
            rows, first = rows[overwritten:], first + overwritten
        final = stop >= self.end
        msg = envelope(backlog=tel.backlogs - 1, part=self.part, final=final, first=first, count=int(rows.shape[0]),
                       dropped=tel.dropped, sent=time.time(), fields=tel.layout.columns(rows))
        self.pub.send_multipart([TOPIC_BACKLOG, pack(msg)], flags=zmq.NOBLOCK)
        tel.backlog_rows += int(rows.shape[0])
        self.next, self.part, self.sending = stop, self.part + 1, not final


class Joining:
    """A joining subscriber's side (``rtctl record``): it subscribed to ``rtctl/``, then to the backlog topic.

    :meth:`hold` takes each decoded message while :attr:`waiting`; the wait ends with the final batch of a
    backlog whose first batch arrived (which answers this subscriber), at once when the metadata says the
    publisher offers no backlog (``rtctl replay``), or when ``wait`` s pass after the first message without
    the answering backlog's first batch, or after one of its batches without the next, and at the latest
    ``hold`` s after the first message. Then
    :meth:`release` gives the samples held, backlog and live, in index order and each once, and the other
    messages in the order they came; :meth:`trim` keeps later live batches from repeating a sample."""

    def __init__(self, wait: float = BACKLOG_WAIT, hold: float = MAX_HOLD):
        self.wait, self.hold_most = float(wait), float(hold)
        self.waiting = True
        self.deadline: float | None = None
        self.latest: float | None = None
        self.batches: list[dict] = []       # sample batches held: live ones and the answering backlog's
        self.others: list[tuple] = []       # (unix s received, topic, message) of the other messages held
        self.answering: set = set()         # backlogs whose first batch arrived
        self.next = 0                       # the first sample index not given out yet

    def hold(self, topic: bytes, msg: dict, now: float, received: float) -> bool:
        """Hold ``msg`` (received at monotonic ``now``, unix ``received``); True once the wait is over."""
        if self.deadline is None:
            self.deadline, self.latest = now + self.wait, now + self.hold_most
        if topic == TOPIC_BACKLOG:
            if msg["part"] == 0:
                self.answering.add(msg["backlog"])
            if msg["backlog"] in self.answering:        # another subscriber's, begun before we joined: not ours
                self.batches.append(msg)
                self.waiting = not msg.get("final")
                self.deadline = min(now + self.wait, self.latest)
        elif topic == TOPIC_SAMPLES:
            self.batches.append(msg)
        else:
            self.others.append((received, topic, msg))
            if topic == TOPIC_META and "backlog" not in msg:
                self.waiting = False
        return self.expired(now)

    def expired(self, now: float) -> bool:
        """True once the wait is over (ends it when ``wait`` s have passed since the first message)."""
        if self.waiting and self.deadline is not None and now >= self.deadline:
            self.waiting = False
        return not self.waiting

    def release(self) -> tuple[list[dict], list[tuple]]:
        """(the sample batches held, in index order, without a sample twice; the other messages held). The
        backlog gives the samples before the first one that came live, the live stream the others."""
        self.waiting = False
        live = [b for b in self.batches if "backlog" not in b]
        joined = min((b["first"] for b in live), default=None)
        held = live + [b if joined is None else rows_between(b, 0, joined - b["first"]) for b in self.batches
                       if "backlog" in b and (joined is None or b["first"] < joined)]
        batches = [b for b in map(self.trim, sorted(held, key=lambda b: b["first"])) if b is not None]
        others, self.batches, self.others = self.others, [], []
        return batches, others

    def trim(self, msg: dict) -> dict | None:
        """``msg`` (a samples batch) without the samples already given out; None when none is left."""
        first, count = msg["first"], msg["count"]
        if count == 0 or first + count <= self.next:
            return None
        skip = max(0, self.next - first)
        self.next = first + count
        return rows_between(msg, skip, count)


def batch_error(topic: bytes, msg: dict) -> str:
    """Why ``msg``, decoded from ``topic`` (``rtctl/samples`` or the backlog's), is no batch a subscriber can
    take (``""`` when it is one): ``first`` and ``count`` integers >= 0, ``fields`` mapping names (``stamp``
    among them; not ``index``, which the rows get, nor ``nonfinite``) to lists of ``count`` numbers or lists of
    numbers, and on the backlog's topic ``backlog`` and ``part`` integers >= 0."""
    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not (whole(msg.get("first")) and whole(msg.get("count"))):
        return "first and count must be integers >= 0"
    if topic == TOPIC_BACKLOG and not (whole(msg.get("backlog")) and whole(msg.get("part"))):
        return "a backlog batch's backlog and part must be integers >= 0"
    fields = msg.get("fields")
    if not isinstance(fields, dict) or "stamp" not in fields:
        return "fields must be a map with a stamp"
    for name, values in fields.items():
        if not isinstance(name, str) or name in ("index", NONFINITE):
            return f"the field name {name!r} is not one a sample can have"
        if not isinstance(values, list) or len(values) != msg["count"]:
            return f"field {name!r} must be a list of count ({msg['count']}) values"
        for value in values:
            if not (isinstance(value, (int, float)) or
                    isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)):
                return f"field {name!r} holds a {type(value).__name__}, not a number or a list of numbers"
    return ""


def rows_between(msg: dict, start: int, stop: int) -> dict:
    """A samples batch of ``msg``'s rows ``start`` to ``stop`` (``msg`` itself when that is all of them)."""
    if start == 0 and stop >= msg["count"]:
        return msg
    return dict(msg, first=msg["first"] + start, count=min(stop, msg["count"]) - start,
                fields={name: values[start:stop] for name, values in msg["fields"].items()})
