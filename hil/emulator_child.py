"""An emulator in a process of its own, as a test or a sensor backend starts it: ``python -m MODULE ARGS``.

The emulator announces where to reach it on a line ``PORT ...`` of its standard output once it is ready, and
says its counters on a line ``STATS {json}`` when it stops (SIGTERM, as each emulator's ``main`` handles it).

The emulator's side: :func:`say` writes those lines, :func:`add_parent_argument` and :func:`orphan_check` let
an emulator started for a loop process (``--parent PID``) see that process gone -- killed, it can no longer
stop the emulator or remove the shared block it writes the plant's truth into, so the emulator exits and
removes it. It polls its parent's pid rather than asking for PR_SET_PDEATHSIG, which fires when the starting
*thread* ends.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from rtctl.options import argument_type


def say(line: str) -> None:
    """One line to the starter, if it still reads: a killed starter took the pipe's other end with it."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def add_parent_argument(parser) -> None:
    parser.add_argument("--parent", type=argument_type("int", positive=True), default=None,
                        help="pid of the process that started it and writes its shared truth: once it is gone, "
                        "exit and unlink the block it can no longer unlink")


def orphan_check(parent: int | None):
    """A callable: True once the process ``parent`` (None: none watched) is no longer this one's parent."""
    if parent is None:
        return lambda: False
    return lambda: os.getppid() != parent


class EmulatorChild:
    """``python -m {module} ARGS`` started and waited for until it announces itself: :attr:`announced` holds
    the words after ``PORT``. :meth:`stop` (SIGCONT, then SIGTERM) returns its STATS; :meth:`kill` is the
    device that dies."""

    module = ""                 # the emulator's module, ``rtctl.hil.NAME``
    what = "the emulator"       # for the message when it does not start
    startup_timeout = 60.0      # s to wait for its PORT line (a cold numba cache compiles first)

    def __init__(self, *args: str, startup_timeout: float | None = None, new_session: bool = False):
        """``new_session``: in a session of its own, out of reach of the signals a terminal sends to its
        starter's process group (Ctrl-C): its starter stops it, in order."""
        timeout = self.startup_timeout if startup_timeout is None else startup_timeout
        self.proc = subprocess.Popen([sys.executable, "-m", self.module, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=new_session)
        self.pid = self.proc.pid
        self.stats = None
        self.announced: list[str] | None = None
        deadline = time.monotonic() + timeout
        while self.announced is None and select.select((self.proc.stdout,), (), (),
                                                       max(0.0, deadline - time.monotonic()))[0]:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                self.announced = line.split()[1:]
        if self.announced is None:
            self.proc.kill()
            self.proc.wait()
            said = [line for line in self.proc.stderr.read().splitlines() if line.strip()]
            raise RuntimeError(f"{self.what} did not start" + (f": {said[-1].strip()}" if said else
                                                                f" within {timeout:g} s"))

    def kill(self) -> None:
        """SIGKILL: the device is gone (no STATS)."""
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = 10.0) -> dict | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)     # a test may have stopped it (SIGSTOP: a stalled device)
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        for line in (out or "").splitlines():
            if line.startswith("STATS "):
                self.stats = json.loads(line[6:])
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
