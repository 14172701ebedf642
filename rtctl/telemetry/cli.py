"""The telemetry subcommands of ``rtctl``: telemetry, record, recover, replay, plot (added to the parser by
:func:`add_commands`)."""
from __future__ import annotations

import sys

DEFAULT_TELEMETRY = "tcp://127.0.0.1:5555"


def _echo(args) -> int:
    from .tools import echo
    return echo(args.endpoint, count=args.count, timeout=args.timeout)


def _stats(args) -> int:
    from .tools import stats
    return 0 if stats(args.endpoint, duration=args.duration)["samples"] else 1


def _record(args) -> int:
    from .recording import record
    res = record(args.endpoint, args.out, duration=args.duration, samples=args.samples,
                 progress=not args.no_progress, idle_timeout=args.idle_timeout)
    if res["failed"]:
        print(f"rtctl record: {res['failed']}", file=sys.stderr)
        return 1
    before = f", {res['before_first']} published before the first one recorded" if res["before_first"] else ""
    before += f", {res['from_backlog']} of them from the publisher's ring" if res["from_backlog"] else ""
    stopped = f"; stopped by {res['stopped_by']}" if res["stopped_by"] else ""
    print(f"rtctl record: {res['samples']} samples ({res['lost']} lost by this subscriber{before}, "
          f"{res['publisher_dropped']} dropped by the publisher), {res['meta']} metadata, {res['events']} events"
          f"{', the robot description' if res['description'] else ''} -> {res['path']}{stopped}")
    return 0 if res["samples"] else 1


def _recover(args) -> int:
    from .recover import recover
    if (args.out is None) == (not args.in_place):
        print("rtctl recover: error: give --out FIXED.mcap (a new file) or --in-place", file=sys.stderr)
        return 2
    res = recover(args.recording, args.out)
    counts = ", ".join(f"{n} on {topic}" for topic, n in sorted(res["messages"].items())) or "no messages"
    if res["complete"]:
        print(f"rtctl recover: {args.recording} is complete ({counts}); nothing to do")
        return 0
    where = args.out or args.recording
    summary = "" if res["summary"] else " (no room for the summary: readers read it from the start)"
    print(f"rtctl recover: {where}: {res['chunks']} complete chunks kept ({counts}), {res['bytes_dropped']} "
          f"bytes after the last one dropped{summary}")
    return 0


def _replay(args) -> int:
    from .playback import replay
    n = replay(args.recording, args.endpoint, speed=args.speed, progress=not args.no_progress,
               ready=lambda ep: print(f"rtctl replay: publishing on {ep}", flush=True))
    print(f"rtctl replay: {n} samples sent")
    return 0


def _plot(args) -> int:
    from .tools import plot
    print(f"rtctl plot: wrote {plot(args.recording, args.out, progress=not args.no_progress)}")
    return 0


def add_commands(sub) -> list:
    """Add the telemetry commands to ``sub``; returns the (parser, subparsers) pairs whose parser needs one of
    its subcommands (``rtctl telemetry``), for the caller to say so when none is given."""
    from ..options import argument_type
    seconds, count = argument_type("float", positive=True), argument_type("int", positive=True)
    tel = sub.add_parser("telemetry", help="inspect a live telemetry stream (echo, stats)")
    tsub = tel.add_subparsers(dest="telemetry_command", required=True)
    e = tsub.add_parser("echo", help="print decoded messages as JSON lines (one line per sample)")
    e.add_argument("--endpoint", default=DEFAULT_TELEMETRY)
    e.add_argument("--count", type=count, default=None, help="stop after this many lines")
    e.add_argument("--timeout", type=seconds, default=None, help="stop after this many seconds")
    e.set_defaults(func=_echo)
    s = tsub.add_parser("stats", help="rate, losses, publisher drops and latency of the stream")
    s.add_argument("--endpoint", default=DEFAULT_TELEMETRY)
    s.add_argument("--duration", type=seconds, default=5.0)
    s.set_defaults(func=_stats)

    r = sub.add_parser("record", help="record the telemetry stream to an MCAP file (opens in Foxglove)")
    r.add_argument("out", help="output .mcap file")
    r.add_argument("--endpoint", default=DEFAULT_TELEMETRY)
    r.add_argument("--duration", type=seconds, default=None,
                   help="seconds to record (default: until Ctrl-C, SIGTERM or SIGHUP, which close the file)")
    r.add_argument("--samples", type=count, default=None, help="stop after this many samples")
    r.add_argument("--idle-timeout", type=seconds, default=None, help="stop when nothing arrives for this long (s)")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=_record)

    v = sub.add_parser("recover", help="close a recording cut short (killed, disk full) after its last complete "
                                       "chunk, with its summary: a file every MCAP reader opens")
    v.add_argument("recording")
    v.add_argument("--out", default=None, help="write the recovered recording to this new file")
    v.add_argument("--in-place", action="store_true",
                   help="repair the file itself (when the disk has no room for a copy)")
    v.set_defaults(func=_recover)

    p = sub.add_parser("replay", help="republish an MCAP recording as a live telemetry stream")
    p.add_argument("recording")
    p.add_argument("--endpoint", default=DEFAULT_TELEMETRY, help="PUB endpoint to bind (loopback)")
    p.add_argument("--speed", type=argument_type("float", low=0.0), default=1.0,
                   help="playback speed (0: as fast as possible)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_replay)

    f = sub.add_parser("plot", help="plot a recording: q vs q_d, tracking error, effort, loop-timing histogram")
    f.add_argument("recording")
    f.add_argument("--out", required=True, help="image file (png, pdf, svg)")
    f.add_argument("--no-progress", action="store_true")
    f.set_defaults(func=_plot)

    return [(tel, tsub)]
