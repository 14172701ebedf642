"""The operator subcommands of ``rtctl``: dashboard and control (added to the parser by :func:`add_commands`)."""
from __future__ import annotations

import json
import sys

from ..telemetry.cli import DEFAULT_TELEMETRY
from .requests import COMMANDS

DEFAULT_CONTROL = "tcp://127.0.0.1:5557"


def _dashboard(args) -> int:
    from .dashboard import Dashboard
    Dashboard(args.endpoint, args.control, host=args.host, port=args.port,
              allow_remote=args.allow_remote).run_forever()
    return 0


def _control(args) -> int:
    from .client import ServerNotTrusted, request
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


def add_commands(sub) -> None:
    """Add the operator commands to ``sub``."""
    from ..options import argument_type
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
