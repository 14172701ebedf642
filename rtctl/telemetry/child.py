"""A helper process of the loop's process: the telemetry publisher (:mod:`rtctl.telemetry.relay`) and the
operator process (:mod:`rtctl.operator.server`).

Each is a new interpreter started with ``python -c`` (never a fork of a threaded process) before the hardware
is activated. It imports rtctl from the folder this process imported it from, never from its working directory
(``python -m`` and ``-c`` put that first on ``sys.path``: a module planted there, in a shared /tmp say, would run
in the loop's name). It leaves a real-time policy it inherited (the loop's process started under ``chrt -f``):
at the loop's own FIFO priority it would hold a shared CPU until it blocks, and niceness means nothing there;
under SCHED_OTHER it runs its ``nice`` below the loop. It receives its settings over a private socket pair. The parent waits for its reply (the endpoints it bound, or why it could not) and stops it in
order; the child ignores the stop signals a terminal or systemd send to the whole group or unit: the loop's
process stops in order and closes it, and its death ends the child (end of file on the socket pair).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from ..rt.signals import STOP_SIGNALS

STOP_GRACE = 10.0    # s a child has to end after its socket pair closed, before it is killed

_BOOT = ("import os, sys\n"
         "if hasattr(os, 'sched_getscheduler') and os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR):\n"
         "    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))\n"
         "sys.path[0] = sys.argv[1]; from {module} import main; sys.exit(main(sys.argv[2:]))")


def package_root() -> str:
    """The folder holding the ``rtctl`` package this process imported."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spawn(module: str, theirs: socket.socket, pass_fds=()) -> subprocess.Popen:
    """``module``'s ``main([FD])`` in a new interpreter, ``FD`` being ``theirs`` (one end of a socket pair)."""
    return subprocess.Popen([sys.executable, "-c", _BOOT.format(module=module), package_root(),
                             str(theirs.fileno())],
                            pass_fds=(theirs.fileno(), *pass_fds), stdin=subprocess.DEVNULL, close_fds=True)


def handshake(conn: Connection, spec: dict, timeout: float) -> dict | None:
    """Send the child its ``spec`` and wait ``timeout`` s for its reply (None: it died or did not answer)."""
    try:
        conn.send(spec)
        return conn.recv() if conn.poll(timeout) else None
    except (EOFError, OSError):
        return None


def stop(child: subprocess.Popen, kill: bool) -> None:
    """Wait for ``child`` to end (after its socket pair closed), killing it at once (``kill``) or after
    :data:`STOP_GRACE`."""
    if kill:
        child.kill()
    try:
        child.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def receive_spec(conn: Connection) -> dict | None:
    """In the child: ignore the group's stop signals, take the spec (None: the parent went away first) and
    lower the priority by its ``nice``."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        spec = conn.recv()
    except (EOFError, OSError):
        return None
    if spec.get("nice"):
        os.nice(int(spec["nice"]))
    return spec
