"""Per-cycle sample hand-off and the publisher thread.

The loop calls :meth:`Telemetry.sample` once per cycle, after the driver write.
The hand-off is one compiled call that copies the cycle's values into the next
row of a preallocated float64 ring (``capacity`` rows of :class:`~.schema.Layout`
width) and bumps a counter: no allocation, no lock, no ZeroMQ. The ring is
drop-oldest: when the publisher falls more than ``capacity`` samples behind,
the oldest rows are overwritten and counted in :attr:`Telemetry.dropped`.

A daemon thread wakes every ``batch_period`` s, copies the new rows out,
encodes them as one or more ``rtctl/samples`` batches (msgpack, schema in
:mod:`rtctl.telemetry.schema`) and sends them with ``NOBLOCK`` on a PUB socket
(ZeroMQ drops, per subscriber, what a slow subscriber cannot take: it never
blocks the sender; the subscriptions it keeps are bounded, :mod:`.subscriptions`).
It re-sends ``rtctl/meta`` every ``meta_period`` s, publishes ``rtctl/event``
messages (control-channel changes, safety events) and, when enabled, the
flat-JSON PlotJuggler stream on its own endpoint, and hands the
same rows to the extra sinks (:class:`~rtctl.telemetry.foxglove.FoxgloveSink`:
the live Foxglove server). All sockets and servers live in that thread; nothing
is encoded on the loop thread.

Keeping the loop's GIL waits short. The loop thread and the publisher thread
share the GIL: when the loop wakes for its next cycle while the publisher is
encoding, the loop waits until the publisher lets go of the GIL -- by default
up to CPython's 5 ms switch interval, five 1 kHz periods. So the publisher

* encodes with few Python objects: msgpack of NumPy columns, and each JSON
  text (PlotJuggler, Foxglove) from one preformatted template per row
  (:class:`~rtctl.telemetry.schema.JsonRows`), each a C call of ~20 us;
* works in chunks of at most :data:`CHUNK_ROWS` rows and sleeps
  :data:`CHUNK_PAUSE` s between chunks (a backlog after a stall never becomes
  one long stretch);
* while it runs, lowers the interpreter's switch interval to
  ``switch_interval`` (default :data:`SWITCH_INTERVAL`, 200 us; process-wide,
  restored by :meth:`Telemetry.close`), so a loop thread asking for the GIL
  gets it within about that much (plus one ~20 us C call) instead of 5 ms.

What remains is the operating system's: if the publisher is preempted while it
holds the GIL (a loaded machine), the loop waits for it to be scheduled again.

The publisher process (``process=True``; what ``rtctl run`` uses, ``[telemetry]
publisher = "process"``). The ring and its counter then live in a shared memory
mapping, and the publisher thread above runs in a child process
(:mod:`rtctl.telemetry.relay`) that maps the same ring: the loop's process keeps
no encoding, no sockets of the stream and no GIL holder but one thread that wakes
every ``batch_period`` to forward control-channel and safety events and, every
``meta_period``, the metadata (a few microseconds of Python each time). The loop
thread's cost is the same compiled copy; its wake-ups never wait for an encoder.
The child exits when the parent closes it or dies (end of file on its socket);
its counters (samples published, dropped, sink errors, each sink's public
numbers) come back on :meth:`Telemetry.close`.
"""
from __future__ import annotations

import collections
import mmap
import select
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

import numpy as np
import zmq

from ..rt.hooks import LoopSink
from . import child
from .backlog import BacklogSender
from .description import DescriptionTopic
from .endpoints import bind, check_endpoint, close
from .plotjuggler import PlotJugglerStream
from .schema import (JOINT_FIELDS, SCALAR_FIELDS, SCALAR_UNITS, TOPIC_BACKLOG, TOPIC_EVENT, TOPIC_META, TOPIC_SAMPLES,
                     Layout, envelope, pack)
from .ring import HEADER_WORDS, handoff, map_shared, remove_shared, ring_views
from .extras import gather_extras
from .subscriptions import MAX_SUBSCRIPTIONS, SubscriptionGuard, publishing_socket

CHUNK_ROWS = 50          # rows encoded between two GIL releases of the publisher thread
MAX_BATCH_ROWS = CHUNK_ROWS  # the most samples in one rtctl/samples message
CHUNK_PAUSE = 50e-6      # s slept between chunks (the GIL is free meanwhile)
SWITCH_INTERVAL = 2e-4   # s: sys.setswitchinterval while a Telemetry runs (None: leave it)
PUBLISHER_NICE = 10      # niceness the publisher process adds: the loop, at 0, gets a shared CPU first
RELAY_START_TIMEOUT = 30.0  # s for the publisher process to import, map the ring and bind
EVENT_BACKLOG = 10_000   # events waiting for the publisher at most


class Telemetry(LoopSink):
    """The loop's telemetry sink and publisher. ``attach(loop)``, ``start()``, then run the loop; ``close()``.

    ``endpoint``: PUB bind address (loopback by default; ``:0`` picks a free port,
    read the bound one from :attr:`endpoint` after :meth:`start`).
    ``plotjuggler_endpoint``: None, or the PlotJuggler JSON PUB bind address;
    ``plotjuggler_decimation`` sends every k-th sample there, ``plotjuggler_format`` as :mod:`.plotjuggler` says.
    ``sinks``: extra sinks run by the publisher thread (:class:`~rtctl.telemetry.sinks.PublisherSink`), e.g.
    :class:`~rtctl.telemetry.foxglove.FoxgloveSink`.
    ``switch_interval``: the interpreter switch interval (s) while running, None to leave it alone.
    ``process``: publish from a child process that maps the ring (see the module docstring) instead of a
    thread of this one; ``switch_interval`` is then left alone (no encoder shares this process's GIL).
    ``publisher_nice``: process mode, the niceness the publisher process adds to its own (0..19): where it
    competes with the loop for a CPU, the scheduler gives the loop the CPU first.
    """

    def __init__(self, *, endpoint: str = "tcp://127.0.0.1:5555", plotjuggler_endpoint: str | None = None,
                 capacity: int = 4096, batch_period: float = 0.01, meta_period: float = 1.0,
                 sndhwm: int = 1000, sndbuf: int = 0, allow_remote: bool = False, plotjuggler_decimation: int = 1,
                 context: zmq.Context | None = None, sinks=(), switch_interval: float | None = SWITCH_INTERVAL,
                 process: bool = False, publisher_nice: int = PUBLISHER_NICE, plotjuggler_format: str = "array"):
        if int(capacity) != capacity or capacity < 2:
            raise ValueError(f"telemetry capacity must be an integer >= 2, got {capacity!r}")
        if not (0 < batch_period <= 1.0):
            raise ValueError(f"batch_period must be in (0, 1] s, got {batch_period!r}")
        if not (0 < meta_period <= 60.0):
            raise ValueError(f"meta_period must be in (0, 60] s, got {meta_period!r}")
        if switch_interval is not None and not (1e-5 <= switch_interval <= 0.1):
            raise ValueError(f"switch_interval must be in [1e-5, 0.1] s or None, got {switch_interval!r}")
        if int(publisher_nice) != publisher_nice or not 0 <= publisher_nice <= 19:
            raise ValueError(f"publisher_nice must be an integer in [0, 19], got {publisher_nice!r}")
        self.process = bool(process)
        self.publisher_nice = int(publisher_nice)
        self._bind = check_endpoint(endpoint, allow_remote, "telemetry endpoint")
        self._pj_bind = None if plotjuggler_endpoint is None else \
            check_endpoint(plotjuggler_endpoint, allow_remote, "plotjuggler endpoint")
        self.capacity = int(capacity)
        self.batch_period = float(batch_period)
        self.meta_period = float(meta_period)
        self.sndhwm, self.sndbuf = int(sndhwm), int(sndbuf)
        self._pj_stream = PlotJugglerStream(plotjuggler_decimation, plotjuggler_format)
        self._ctx = context or zmq.Context.instance()
        self.endpoint = ""
        self.plotjuggler_endpoint = ""
        self.loop = None
        self._ring_fd = self._ring_path = self._ring_dir = None   # the shared ring's file until the child mapped it
        self.layout: Layout | None = None
        self._counter = np.zeros(1, dtype=np.int64)
        self._scalars = np.zeros(len(SCALAR_FIELDS))
        self._timing = self._scalars[3:6]   # period, latency, compute: rtctl.rt.stats.METRICS' order
        self._read = 0
        self.dropped = 0          # samples overwritten in the ring before the publisher took them
        self.batches = 0          # rtctl/samples messages sent
        self.published = 0        # samples sent
        self.events_sent = 0
        self.subscriber_resets = 0  # times a socket's subscribers were all disconnected (.subscriptions)
        self.backlogs = self.backlog_rows = self.backlog_requests = 0   # the ring resent to joiners (.backlog)
        self._event_seq = 0
        self._events: collections.deque = collections.deque(maxlen=EVENT_BACKLOG)  # oldest dropped beyond it
        self._safety_last = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.sinks = list(sinks)
        self.switch_interval = switch_interval
        self._saved_interval = None
        self.sink_errors: list[str] = []
        self.flush_cpu = 0.0       # s of publisher-thread CPU spent taking, encoding and sending samples
        self.flush_max = 0.0       # s, wall time of the longest single flush
        self._shared: mmap.mmap | None = None   # process mode: the mapping holding the counter and the ring
        self._relay: subprocess.Popen | None = None
        self._relay_conn: Connection | None = None
        self.lost = ""            # process mode: how and when the publisher process died during the run
        self._lost_at = 0         # samples handed off when it did

    # -- set-up --------------------------------------------------------------------------
    def attach(self, loop) -> "Telemetry":
        """Size the ring for ``loop`` and make it the loop's sink (``loop.telemetry = self``)."""
        ctl = loop.controller
        self.loop = loop
        self.joints = list(ctl.joint_names)
        self._index = ctl.index
        self._attach_extras(loop)
        self.layout = Layout(ctl.n, len(self.extra_names))
        if self.process:
            self._counter, self._ring = self._map_ring()
        else:
            self._ring = np.zeros((self.capacity, self.layout.width))
        self._kp_ref, self._kd_ref = ctl.kp, ctl.kd
        for sink in self.sinks:
            sink.attach(loop)
        self.description = DescriptionTopic.of_loop(loop)   # rtctl/description, sent by the publisher thread
        loop.telemetry = self
        return self

    def _attach_extras(self, loop) -> None:
        self.extra_names, self.extra_units, self._extra, self._extra_parts = gather_extras(loop)

    def metadata(self) -> dict:
        loop = self.loop
        pos, vel, eff = ([u[i] for u in loop.safety.units] for i in range(3))
        kp_u, kd_u = loop.controller.gain_units
        joint_units = {"q": pos, "qd": vel, "q_d": pos, "qd_d": vel, "effort_cmd": eff, "effort": eff,
                       "error": pos, "kp": kp_u, "kd": kd_u}
        fields = {name: {"shape": [], "unit": SCALAR_UNITS[name]} for name in SCALAR_FIELDS}
        fields.update({name: {"shape": [len(self.joints)], "unit": joint_units[name]} for name in JOINT_FIELDS})
        if self.extra_names:
            fields["extra"] = {"shape": [len(self.extra_names)], "unit": self.extra_units}
        return envelope(robot=loop.model.name, joints=self.joints, rate_hz=loop.rate_hz, period=loop.period,
                        batch_period=self.batch_period, fields=fields, extra=self.extra_names,
                        controller=loop.controller.name,
                        trajectory=type(loop.trajectory).__name__, started=self._started,
                        capacity=self.capacity, backlog=TOPIC_BACKLOG.decode())

    def _map_ring(self):
        """The counter and the ring in a new shared mapping (:func:`~.ring.map_shared`); its descriptor (or file)
        is handed to the publisher process by :meth:`_start_relay`."""
        self._shared, self._ring_fd, self._ring_path, self._ring_dir = map_shared(
            8 * (HEADER_WORDS + self.capacity * self.layout.width))
        return ring_views(self._shared, self.capacity, self.layout.width)

    def _remove_ring_file(self) -> None:
        fd, path, directory = self._ring_fd, self._ring_path, self._ring_dir
        self._ring_fd = self._ring_path = None
        remove_shared(fd, path, directory)

    def start(self) -> "Telemetry":
        """Bind the sockets and start the publisher thread or process (raises if a bind fails)."""
        if self.loop is None:
            raise RuntimeError("Telemetry.start: attach(loop) first")
        if self._thread is not None:
            return self
        self._started = time.time()
        if self.process:
            self._start_relay()
        else:
            self._start_thread()
        return self

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rtctl-telemetry", daemon=True)
        self._thread.start()
        self._ready.wait(10.0)
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"telemetry: cannot bind: {self._error}") from self._error
        if self.switch_interval is not None and sys.getswitchinterval() > self.switch_interval:
            self._saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(self.switch_interval)
            self._set_interval = sys.getswitchinterval()   # as the interpreter keeps it (whole microseconds)

    def _start_relay(self) -> None:
        """Start the publisher process, hand it the ring and the settings, and wait until it has bound."""
        mine, theirs = socket.socketpair()
        shared = (self._ring_fd,) if self._ring_fd is not None else ()
        try:
            self._relay = child.spawn("rtctl.telemetry.relay", theirs, pass_fds=shared)
        except BaseException:
            self._remove_ring_file()
            raise
        finally:
            theirs.close()
        self._relay_conn = Connection(mine.detach())
        settings = dict(endpoint=self._bind, plotjuggler_endpoint=self._pj_bind, capacity=self.capacity,
                        batch_period=self.batch_period, meta_period=self.meta_period, sndhwm=self.sndhwm,
                        sndbuf=self.sndbuf, allow_remote=True, plotjuggler_decimation=self._pj_stream.decimation,
                        plotjuggler_format=self._pj_stream.format, sinks=self.sinks)
        ring = self._ring_fd if self._ring_fd is not None else self._ring_path
        spec = dict(settings=settings, ring=ring, n=self.layout.n, nice=self.publisher_nice, joints=self.joints,
                    extra_names=self.extra_names, meta=self.metadata(), description=self.description)
        reply = child.handshake(self._relay_conn, spec, RELAY_START_TIMEOUT)
        self._remove_ring_file()
        if not reply or "error" in reply:
            self._stop_relay(kill=True)
            why = reply["error"] if reply else "the publisher process did not start"
            raise RuntimeError(f"telemetry: cannot bind: {why}")
        self.endpoint, self.plotjuggler_endpoint = reply["endpoint"], reply["plotjuggler_endpoint"]
        self._update_sinks(reply["sinks"])
        self._thread = threading.Thread(target=self._forward, name="rtctl-telemetry-events", daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        """Process mode, in this process: pass events and, every ``meta_period``, the metadata to the child;
        see each time whether the child still runs (a wait that does not block)."""
        meta_due = time.monotonic() + self.meta_period
        try:
            while not self._stop.wait(self.batch_period):
                if self._relay.poll() is not None:
                    self._publisher_died(self._relay.returncode)
                    return
                self._collect_safety_events()
                while self._events and self._relay_writable(0.0):
                    self._relay_conn.send(("event", self._events.popleft()))
                if time.monotonic() >= meta_due and self._relay_writable(0.0):
                    self._relay_conn.send(("meta", self.metadata()))
                    meta_due = time.monotonic() + self.meta_period
        except (OSError, EOFError) as exc:
            self.sink_errors.append(f"publisher process: {type(exc).__name__}: {exc}")

    def _publisher_died(self, code: int) -> None:
        """Say at once, in one line, that the publisher process is gone and nothing is published any more; the
        loop runs on (the report's notes and :attr:`lost` keep it; ``rtctl run`` ends with a non-zero status)."""
        self._lost_at = self.handed
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        at = f"cycle {self.loop.cycle} (t = {self.loop.cycle * self.loop.period:.3f} s)" if self.loop else "start"
        self.lost = f"the publisher process (pid {self._relay.pid}) died ({how}) at {at}"
        print(f"rtctl: telemetry: {self.lost}: samples are no longer published; the run goes on", file=sys.stderr,
              flush=True)

    def notes(self) -> list[str]:
        """The publisher process's death, if it died, and how many samples were not published since."""
        if not self.lost:
            return []
        return [f"TELEMETRY LOST: {self.lost}; the {self.handed - self._lost_at} samples handed off since were "
                "not published"]

    def _update_sinks(self, numbers) -> None:
        for sink, public in zip(self.sinks, numbers):
            for name, value in public.items():
                setattr(sink, name, value)

    def _relay_writable(self, timeout: float) -> bool:
        """The publisher process's socket takes a message now (it reads): a send never blocks this process."""
        return bool(select.select([], [self._relay_conn.fileno()], [], timeout)[1])

    def _close_relay(self, flush: bool) -> None:
        self._stop.set()
        self._thread.join(2.0 + self.batch_period)
        self._thread = None
        self._collect_safety_events()
        reply = None
        if self.lost or self._relay.poll() is not None:
            self.sink_errors.append(f"publisher process: {self.lost or 'exited before close'}")
            self._stop_relay(kill=True)
            return
        try:
            while self._events and self._relay_writable(1.0):
                self._relay_conn.send(("event", self._events.popleft()))
            if self._relay_writable(1.0):
                self._relay_conn.send(("close", flush))
                if self._relay_conn.poll(15.0):
                    reply = self._relay_conn.recv()
            else:
                self.sink_errors.append("publisher process: not reading; stopped")
        except (OSError, EOFError):
            pass
        if reply:
            for name in ("published", "batches", "dropped", "events_sent", "flush_cpu", "flush_max",
                         "subscriber_resets", "backlogs", "backlog_rows", "backlog_requests"):
                setattr(self, name, reply[name])
            self.sink_errors += reply["sink_errors"]
            self._update_sinks(reply["sinks"])
            self._read = reply["read"]
        else:
            self.sink_errors.append("publisher process: no reply to close")
        self._stop_relay(kill=reply is None)

    def _stop_relay(self, kill: bool) -> None:
        if self._relay_conn is not None:
            self._relay_conn.close()
            self._relay_conn = None
        if self._relay is not None:
            child.stop(self._relay, kill)
            self._relay = None

    def close(self, flush: bool = True) -> None:
        """Publish what is left (``flush``), stop the thread (or process) and close the sockets."""
        if self._thread is None:
            self._remove_ring_file()   # attached, never started
            return
        if self.process:
            self._close_relay(flush)
            return
        self._flush_on_close = flush
        self._stop.set()
        self._thread.join(10.0)
        self._thread = None
        if self._saved_interval is not None:
            if sys.getswitchinterval() == self._set_interval:  # nobody changed it since: put it back
                sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- the loop side ------------------------------------------------------------------------
    def sample(self, loop, t: float) -> None:
        """Hand this cycle's sample to the ring: one compiled copy, no allocation, never blocks."""
        s = loop.stats
        sc = self._scalars
        sc[0] = t
        sc[1] = loop.cycle
        sc[2] = time.time()
        s.copy_latest(self._timing)
        sc[6] = s.overruns
        sc[7] = loop.safety.tripped
        st = loop.state
        sc[8] = st.fresh
        ctl = loop.controller
        for dst, src in self._extra_parts:
            np.copyto(dst, src)
        handoff(self._ring, self._counter, sc, st.q, st.v, self._index, loop.q_d, loop.qd_d,
                 loop.command.effort, st.effort, ctl.kp, ctl.kd, self._extra)

    @property
    def handed(self) -> int:
        """Samples handed off by the loop so far."""
        return int(self._counter[0])

    def event(self, kind: str, detail: str, cycle: int = -1, t: float = float("nan"), request=None) -> None:
        """Queue an ``rtctl/event`` (any thread; published by the publisher thread)."""
        self._events.append((kind, detail, int(cycle), float(t), time.time(), request))

    # -- the publisher thread ---------------------------------------------------------------------
    def _run(self) -> None:
        pub = pj = None
        opened = []
        try:
            pub = publishing_socket(self._ctx, self.sndhwm, verbose=True)   # hears subscribers: meta for newcomers
            if self.sndbuf:
                pub.setsockopt(zmq.SNDBUF, self.sndbuf)
            self.endpoint = bind(pub, self._bind)
            if self._pj_bind:
                pj = publishing_socket(self._ctx, self.sndhwm)
                self.plotjuggler_endpoint = bind(pj, self._pj_bind)
                self._pj_stream.open(self.layout, self.joints, self.extra_names)
            for sink in self.sinks:
                sink.open(self)
                opened.append(sink)
        except (zmq.ZMQError, RuntimeError, ValueError, OSError) as exc:
            for sink in opened:
                sink.close()
            for sock in (pub, pj):
                if sock is not None:
                    close(sock, linger=0)
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._flush_on_close = True
        meta_due = 0.0
        guards = [SubscriptionGuard(sock) for sock in (pub, pj) if sock is not None]
        backlog = BacklogSender(self, pub, CHUNK_ROWS, CHUNK_PAUSE)
        try:
            while True:
                stopping = self._stop.wait(self.batch_period)
                now = time.monotonic()
                if self.description.greet(pub, now, self._read_subscriptions(guards)):
                    meta_due = now
                if now >= meta_due:
                    meta = self.metadata()
                    pub.send_multipart([TOPIC_META, pack(meta)], flags=zmq.NOBLOCK)
                    self._to_sinks(lambda sink: sink.meta(meta))
                    meta_due = now + self.meta_period
                if not stopping or self._flush_on_close:
                    c0, w0 = time.thread_time(), time.perf_counter()
                    self._flush(pub, pj)
                    backlog.step(guards[0], self._ring, self._read)
                    self._publish_events(pub)
                    self.flush_cpu += time.thread_time() - c0
                    self.flush_max = max(self.flush_max, time.perf_counter() - w0)
                if stopping:
                    break
        finally:
            close(pub, linger=200 if self._flush_on_close else 0)
            if pj is not None:
                close(pj, linger=200 if self._flush_on_close else 0)
            for sink in self.sinks:
                try:
                    sink.close()
                except Exception as exc:  # noqa: BLE001  (closing one sink must not keep the others open)
                    self._sink_failed(sink, exc)

    def _read_subscriptions(self, guards) -> bool:
        """True if a subscriber joined the stream (PlotJuggler's socket greets nobody); disconnecting every
        subscriber of a socket (too many subscriptions, a flood: :mod:`.subscriptions`) is published as an event."""
        joined = False
        for guard in guards:
            resets, disconnected = guard.resets, guard.disconnected
            newcomer = guard.read()
            joined = joined or (newcomer and guard is guards[0])
            if guard.resets != resets:
                self.subscriber_resets += guard.resets - resets
                self._events.append(("telemetry", f"{guard.endpoint}: more than {MAX_SUBSCRIPTIONS} subscriptions or "
                                     f"a flood of them: {guard.disconnected - disconnected} subscriber(s) disconnected",
                                     -1, float("nan"), time.time(), None))
        return joined

    def _to_sinks(self, call) -> None:
        """``call(sink)`` for every sink; a sink that raises is reported once and dropped, never the thread."""
        for sink in list(self.sinks):
            try:
                call(sink)
            except Exception as exc:  # noqa: BLE001
                self._sink_failed(sink, exc)
                self.sinks.remove(sink)
                try:
                    sink.close()
                except Exception as close_exc:  # noqa: BLE001
                    self.sink_errors.append(f"{type(sink).__name__}.close: {type(close_exc).__name__}: {close_exc}")

    def _sink_failed(self, sink, exc) -> None:
        msg = f"{type(sink).__name__}: {type(exc).__name__}: {exc}"
        self.sink_errors.append(msg)
        self._events.append(("telemetry", f"sink stopped: {msg}", -1, float("nan"), time.time(), None))

    def _take(self):
        """New ring rows since the last call (drop-oldest accounting); None when there are none."""
        cap = self.capacity
        w = int(self._counter[0])
        r = self._read
        if w - r > cap:
            self.dropped += w - r - cap
            r = w - cap
        if w == r:
            return None, r
        rows = self._ring[np.arange(r, w) % cap]  # a copy
        lapped = int(self._counter[0]) - cap - r   # rows overwritten while we copied (not under the GIL)
        if lapped > 0:
            self.dropped += lapped
            rows = rows[lapped:]
            r += lapped
        self._read = w
        return rows, r

    def _flush(self, pub, pj) -> None:
        rows, first = self._take()
        if rows is None:
            return
        layout = self.layout
        total = rows.shape[0]
        for start in range(0, total, CHUNK_ROWS):
            if start:
                time.sleep(CHUNK_PAUSE)  # the GIL is free for the loop thread between chunks
            chunk = rows[start:start + CHUNK_ROWS]
            k = int(chunk.shape[0])
            msg = envelope(seq=self.batches, first=first + start, count=k, dropped=self.dropped,
                           sent=time.time(), fields=layout.columns(chunk))
            pub.send_multipart([TOPIC_SAMPLES, pack(msg)], flags=zmq.NOBLOCK)
            self.batches += 1
            self.published += k
            if pj is not None:
                self._plotjuggler(pj, chunk, first + start)
            if self.sinks:
                self._to_sinks(lambda sink: sink.write(chunk, first + start))

    def _plotjuggler(self, pj, rows, first: int) -> None:
        for message in self._pj_stream.messages(rows, first):
            pj.send(message, flags=zmq.NOBLOCK)

    def _collect_safety_events(self) -> None:
        """Queue the loop's safety events not queued yet (none without a loop: the publisher process)."""
        safety = self.loop.safety if self.loop is not None else None
        if safety is not None and safety.events:
            events = list(safety.events)
            new = events
            if self._safety_last is not None:
                for i in range(len(events) - 1, -1, -1):
                    if events[i] is self._safety_last:
                        new = events[i + 1:]
                        break
            for cycle, kind, detail in new:
                self._events.append(("safety", f"{kind}: {detail}", int(cycle),
                                     float(cycle) * self.loop.period, time.time(), None))
            self._safety_last = events[-1]

    def _publish_events(self, pub) -> None:
        self._collect_safety_events()
        while self._events:
            kind, detail, cycle, t, stamp, request = self._events.popleft()
            msg = envelope(seq=self._event_seq, kind=kind, detail=detail, cycle=cycle, t=t, stamp=stamp)
            if request is not None:
                msg["request"] = request
            pub.send_multipart([TOPIC_EVENT, pack(msg)], flags=zmq.NOBLOCK)
            self._event_seq += 1
            self.events_sent += 1
            if self.sinks:
                self._to_sinks(lambda sink: sink.event(msg))


def public_numbers(sink) -> dict:
    """A sink's public scalar attributes (its counters, bound url and port): what crosses back from the
    publisher process to the sink object the caller holds."""
    return {k: v for k, v in vars(sink).items()
            if not k.startswith("_") and isinstance(v, (bool, int, float, str))}

