"""Run a function in a forked child process with its memory, CPU time and wall time bounded.

MuJoCo expands whatever a model file asks for while it parses and compiles it, in C, where this process
cannot interrupt it: nested ``<replicate>`` copies, ``<flexcomp>`` grids of bodies, height fields of any
size. Measured here: a 20000 x 20000 ``<hfield>`` (one line) took 6 GB and 15 s, a 100 x 100 ``<flexcomp>``
grid 18.6 s, and a 100000 x 100000 height field crashed the process (SIGSEGV). :func:`run_bounded` gives such
work to a child forked from this process (MuJoCo already loaded: no interpreter to start) with
``RLIMIT_AS`` (address space it may add to what it inherited) and ``RLIMIT_CPU`` set, and takes the result
back pickled; whatever the child does, this process only waits, within the wall-time bound.
"""
from __future__ import annotations

import faulthandler
import os
import pickle
import resource
import select
import signal
import time


class BoundExceeded(Exception):
    """The child went past a bound, crashed, or gave no answer; the message says which."""


def _address_space() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))


def _child(fn, args, kwargs, memory_mb: int, cpu_s: float, out: int) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):   # the parent's handlers are for the parent
        signal.signal(sig, signal.SIG_DFL)
    faulthandler.disable()
    limit = _address_space() + memory_mb * 2 ** 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    seconds = max(1, int(cpu_s))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))   # SIGXCPU, then SIGKILL
    try:
        result = ("ok", fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001  (handed to the parent, which raises it)
        result = ("raised", exc)
    try:
        data = pickle.dumps(result)
    except Exception as exc:  # noqa: BLE001  (an exception or result that does not pickle)
        data = pickle.dumps(("raised", BoundExceeded(f"unpicklable answer: {type(exc).__name__}: {exc}")))
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def _read_all(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes the pipe; None when ``deadline`` passes first."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def run_bounded(fn, *args, memory_mb: int, cpu_s: float, wall_s: float, **kwargs):
    """``fn(*args, **kwargs)`` computed in a forked child that may add at most ``memory_mb`` MB of address space
    and use ``cpu_s`` s of CPU (whole seconds, at least 1), and is killed after ``wall_s`` s (a file that
    blocks, a starved child). Returns its result; re-raises what it raised (both pickled); raises
    :class:`BoundExceeded` when it went past the CPU or wall bound, died of a signal or gave no answer.
    An allocation past the memory bound fails inside the child, as that library reports it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child: never returns into the caller's code
        try:
            os.close(r)
            _child(fn, args, kwargs, memory_mb, cpu_s, w)
        finally:
            os._exit(0)
    os.close(w)
    data = None
    try:
        data = _read_all(r, time.monotonic() + wall_s)
    finally:                                      # also on Ctrl-C: the child goes with the caller
        os.close(r)
        if data is None:
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    if data is None:
        raise BoundExceeded(f"gave no answer within {wall_s:g} s")
    if os.WIFSIGNALED(status):
        sig, seconds = os.WTERMSIG(status), max(1, int(cpu_s))
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= seconds):
            raise BoundExceeded(f"took more than {seconds} s of CPU")
        raise BoundExceeded(f"crashed: {signal.Signals(sig).name}")
    if not data:
        raise BoundExceeded(f"ended without an answer (exit status {os.waitstatus_to_exitcode(status)})")
    kind, value = pickle.loads(data)
    if kind == "raised":
        raise value
    return value
