"""The telemetry subcommands of ``rtctl`` (added to the parser by :func:`add_commands`)."""
from __future__ import annotations

import json
import sys

from .requests import COMMANDS

DEFAULT_TELEMETRY = "tcp://127.0.0.1:5555"
DEFAULT_CONTROL = "tcp://127.0.0.1:5557"


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
    stopped = f"; stopped by {res['stopped_by']}" if res["stopped_by"] else ""
    print(f"rtctl record: {res['samples']} samples ({res['lost']} lost by this subscriber{before}, "
          f"{res['publisher_dropped']} dropped by the publisher), {res['meta']} metadata, {res['events']} events "
          f"-> {res['path']}{stopped}")
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


def _dashboard(args) -> int:
    from .dashboard import Dashboard
    Dashboard(args.endpoint, args.control, host=args.host, port=args.port,
              allow_remote=args.allow_remote).run_forever()
    return 0


def _control(args) -> int:
    from .control import ServerNotTrusted, request
    from .requests import COMMON, check_command
    if args.cmd is None:       # argparse would print the usage block and call the optional params required
        print(f"rtctl control: error: missing command: one of {', '.join(COMMANDS)} (e.g. `rtctl control "
              "status`)", file=sys.stderr)
        return 2
    req = {"cmd": args.cmd}
    for item in args.params:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        if key == "token":    # nothing is sent: ps shows every process's arguments to every user of the PC
            print("rtctl control: token=...: a token is never taken from the command line (every user can read "
                  "it with ps); it is read from --token-file, $RTCTL_CONTROL_TOKEN or the server's token file, "
                  "and never sent", file=sys.stderr)
            return 2
        try:
            req[key] = json.loads(value)
        except ValueError:
            req[key] = value
    check_command(req, COMMON)      # a misspelt field is named here, before the request goes anywhere
    if args.cmd not in ("status", "estop"):
        from .auth import CredentialError, client_token
        try:
            token = client_token(args.token_file)
        except CredentialError as exc:
            print(f"rtctl control: {exc}", file=sys.stderr)
            return 2
    else:
        token = None
    try:
        reply = request(args.endpoint, req, timeout=args.timeout, token=token)
    except (TimeoutError, ServerNotTrusted) as exc:
        print(f"rtctl control: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(reply))
    return 0 if reply.get("ok") else 1


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

    d = sub.add_parser("dashboard", help="serve the live browser dashboard on localhost")
    d.add_argument("--endpoint", default=DEFAULT_TELEMETRY, help="telemetry endpoint to subscribe to")
    d.add_argument("--control", default=None,
                   help=f"control endpoint for the e-stop and re-arm buttons (e.g. {DEFAULT_CONTROL}); the dashboard "
                        "holds no token: re-arm proves the one typed into the page, never sending it")
    d.add_argument("--host", default="127.0.0.1", help="address to serve on (default: loopback only)")
    d.add_argument("--port", type=argument_type("int", low=0, high=65535), default=8050,
                   help="TCP port (0: a free one)")
    d.add_argument("--allow-remote", action="store_true",
                   help="serve on a --host beyond this machine (anyone who reaches it sees the robot and can "
                        "press e-stop)")
    d.set_defaults(func=_dashboard)

    c = sub.add_parser("control", help="send one control-channel request, e.g. `rtctl control set_gains kp=300`",
                       allow_abbrev=False)
    c.add_argument("cmd", nargs="?", choices=COMMANDS, metavar="COMMAND", help=", ".join(COMMANDS))
    c.add_argument("params", nargs="*", help="KEY=VALUE (VALUE parsed as JSON when it can be)")
    c.add_argument("--endpoint", default=DEFAULT_CONTROL)
    c.add_argument("--token-file", default=None,
                   help="file (mode 0600) holding the control token; default: $RTCTL_CONTROL_TOKEN, else the "
                        "token file the server created for this user (tokens are never taken from the command "
                        "line, which every user can read)")
    c.add_argument("--timeout", type=argument_type("float", positive=True, high=86400.0), default=3.0,
                   help="seconds to wait for the reply")
    c.set_defaults(func=_control)
    return [(tel, tsub)]
