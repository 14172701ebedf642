"""The loop's process's handle on its operator process (``rtctl run``'s control channel).

:class:`OperatorProcess` starts :mod:`rtctl.operator.server` as a helper process (:mod:`rtctl.telemetry.child`)
before the hardware is activated, hands it the shared mapping of :mod:`rtctl.operator.inbox` and the channel's
settings over a private socket pair, and waits until it has bound. In this process it leaves a
:class:`~rtctl.operator.inbox.CommandInbox` (a boundary hook of the loop: one compiled comparison per idle
cycle) and the in-process :class:`~rtctl.operator.control.ControlServer` that validates and applies what
arrives. No request's bytes are read, decoded or authenticated here: a flood on the channel costs this process
nothing but the CPU the operator process takes beside it, at :data:`OPERATOR_NICE`.

Losing the operator process (killed, crashed) latches the safe stop here (end of file on the socket pair,
:class:`~rtctl.operator.inbox.CommandInbox`): without it no e-stop could reach the loop, and a robot that can
no longer be stopped from outside must not keep moving.
"""
from __future__ import annotations

import os
import socket
import subprocess
from multiprocessing.connection import Connection

from ..telemetry import child
from .control import ControlServer
from .inbox import CommandInbox, shared_memory

OPERATOR_NICE = 0          # niceness the operator process adds (its e-stop answers within 10 ms; the loop runs SCHED_FIFO)
START_TIMEOUT = 30.0       # s for the operator process to import, map and bind


class OperatorProcess:
    """The control channel of ``loop`` served by an operator process (``start``, then run the loop; ``close``).

    Takes :class:`~rtctl.operator.control.ControlServer`'s arguments; ``nice``: what the operator process adds
    to its niceness. ``server`` is the in-process validator (``apply_now`` for a ``[[schedule]]``).
    """

    def __init__(self, loop, *, endpoint: str = "tcp://127.0.0.1:5557", token: str | None = None,
                 kp_max: float = 1e5, kd_max: float = 1e4, frequency_max: float = 20.0, duration_max: float = 60.0,
                 apply_timeout: float = 1.0, allow_remote: bool = False, telemetry=None, curve_secret_key=None,
                 curve_clients=None, token_source: str = "the caller", nice: int = OPERATOR_NICE):
        if token is None:
            raise ValueError("a control channel needs a token (rtctl.operator.auth.server_token finds or makes one)")
        self.loop = loop
        self.server = ControlServer(loop, kp_max=kp_max, kd_max=kd_max, frequency_max=frequency_max,
                                    duration_max=duration_max, telemetry=telemetry, apply_timeout=apply_timeout)
        probe = ControlServer(loop, endpoint=endpoint, token=token, allow_remote=allow_remote,
                              curve_secret_key=curve_secret_key, curve_clients=curve_clients)  # refusals here
        loop.boundary_hooks.remove(probe.drain)
        self.token, self.token_source = probe.token, token_source
        self.settings = dict(endpoint=endpoint, token=probe.token, allow_remote=allow_remote,
                             curve_secret_key=None if curve_secret_key is None else str(curve_secret_key),
                             curve_clients=None if curve_clients is None else str(curve_clients),
                             token_source=token_source, apply_timeout=apply_timeout, run_id=probe.run_id)
        self.nice = int(nice)
        self.endpoint = ""
        self.pid = 0
        self.inbox: CommandInbox | None = None
        self._child: subprocess.Popen | None = None

    def start(self) -> "OperatorProcess":
        shared, fd = shared_memory("rtctl-control-inbox")
        mine, theirs = socket.socketpair()
        try:
            self._child = child.spawn("rtctl.operator.server", theirs, pass_fds=(fd,))
        except BaseException:
            os.close(fd)
            mine.close()
            raise
        finally:
            theirs.close()
        conn = Connection(os.dup(mine.fileno()))
        try:
            reply = child.handshake(conn, dict(settings=self.settings, shared=fd, nice=self.nice), START_TIMEOUT)
        finally:
            conn.close()
            os.close(fd)
        if not reply or "error" in reply:
            mine.close()
            self._stop(kill=True)
            why = reply["error"] if reply else "the operator process did not start"
            raise RuntimeError(f"control channel: cannot bind: {why}")
        self.endpoint, self.pid = reply["endpoint"], reply["pid"]
        self.inbox = CommandInbox(self.server, shared, mine)
        self.inbox.watch(self.pid)
        return self

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.poll() is None

    @property
    def lost(self) -> str:
        """How the operator process was lost during the run (``""``: it was not)."""
        return self.inbox.lost if self.inbox is not None else ""

    def close(self) -> None:
        """End the operator process (an orderly end: nothing is latched)."""
        if self.inbox is not None:
            self.inbox.close()
        if self._child is not None:
            self._stop(kill=False)
        if self.server.drain in self.loop.boundary_hooks:
            self.loop.boundary_hooks.remove(self.server.drain)

    def _stop(self, kill: bool) -> None:
        child.stop(self._child, kill)
        self._child = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

