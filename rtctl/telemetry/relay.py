"""The publisher process of a ``Telemetry(process=True)``.

Started by :meth:`rtctl.telemetry.publisher.Telemetry.start` as a helper process (:mod:`rtctl.telemetry.child`),
with one end of a private socket pair. It receives the settings, the path of the shared ring (which the
parent removes once this process has mapped it) and the sinks, runs the same publisher thread as the
thread mode over the mapped ring, and answers with the bound endpoints. Then it takes metadata and events
from the socket until it is told to close, answers with its counters and exits; end of file on the socket
(the parent died) stops it too, without a flush.
"""
from __future__ import annotations

import mmap
import os
import sys
from multiprocessing.connection import Connection

from .child import receive_spec
from .publisher import Telemetry, public_numbers
from .ring import ring_views
from .schema import Layout


def serve(conn: Connection) -> int:
    spec = receive_spec(conn)
    if spec is None:
        return 0
    try:
        tel = Telemetry(**spec["settings"], switch_interval=None)
        ring = spec["ring"]   # the inherited descriptor of the parent's memory file, or a path
        fd = ring if isinstance(ring, int) else os.open(ring, os.O_RDWR)
        try:
            shared = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        tel.layout = Layout(spec["n"], len(spec["extra_names"]))
        tel.joints, tel.extra_names = spec["joints"], spec["extra_names"]
        tel.description = spec["description"]
        tel._counter, tel._ring = ring_views(shared, tel.capacity, tel.layout.width)
        latest_meta = [spec["meta"]]
        tel.metadata = lambda: latest_meta[0]
        sinks = list(tel.sinks)
        tel._start_thread()
    except (RuntimeError, ValueError, OSError) as exc:
        conn.send({"error": str(exc.__cause__ or exc)})   # the reason only: the parent says what failed
        return 1
    conn.send({"endpoint": tel.endpoint, "plotjuggler_endpoint": tel.plotjuggler_endpoint,
               "sinks": [public_numbers(s) for s in sinks]})
    flush = None
    while flush is None:
        try:
            kind, value = conn.recv()
        except (EOFError, OSError):
            break
        if kind == "meta":
            latest_meta[0] = value
        elif kind == "event":
            tel._events.append(value)
        elif kind == "close":
            flush = bool(value)
    tel.close(flush=bool(flush))
    if flush is not None:
        conn.send({"published": tel.published, "batches": tel.batches, "dropped": tel.dropped,
                   "events_sent": tel.events_sent, "flush_cpu": tel.flush_cpu, "flush_max": tel.flush_max,
                   "subscriber_resets": tel.subscriber_resets, "backlogs": tel.backlogs,
                   "backlog_rows": tel.backlog_rows, "backlog_requests": tel.backlog_requests,
                   "sink_errors": tel.sink_errors, "sinks": [public_numbers(s) for s in sinks], "read": tel._read})
    return 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return serve(Connection(int(args[0])))


if __name__ == "__main__":
    sys.exit(main())
