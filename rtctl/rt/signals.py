"""Stop signals: SIGINT, SIGTERM and SIGHUP end a command in the same orderly way.

``kill``, ``systemctl stop``, ``docker stop``, ``timeout`` (SIGTERM), a closed terminal (SIGHUP) and Ctrl-C
(SIGINT) all stop a command the same way. Inside :class:`StopSignals` (around a whole command, entered in the
main thread):

* while a control loop runs (:meth:`ControlLoop.run <rtctl.rt.loop.ControlLoop.run>` registers itself with
  :func:`stop_requests`), the first signal asks it to stop at the next cycle boundary: the cycle in progress
  ends, the safety monitor's safe command is written once through the drivers, each driver is deactivated
  (MIT: exit motor mode; Dynamixel: torque off; CiA 402: shutdown) and the run returns its report;
* inside ``stop_requests()`` without a loop (a report being printed), the signal is noted and the code runs on;
  between :func:`hold` and :func:`release` (numba compiling: an exception raised inside its code generator's
  callbacks is lost and leaves the kernel broken) it is noted and raised at the release;
* elsewhere in the command (:meth:`StopSignals.raising`) the first signal raises :class:`StopSignal`, a
  ``KeyboardInterrupt``, so whatever cleans up after Ctrl-C (``finally`` blocks, a recording closing its
  file) cleans up after all three;
* a later signal does not abort the stop: it is noted in one line on stderr;
* a hard deadline bounds the stop: if the command has not returned :data:`HARD_DEADLINE` seconds after the
  first signal, one line says so and the process ends at once with status :data:`EXIT_STOP_DEADLINE`
  (``os._exit``: nothing more of it runs; each actuator's own watchdog is then the last line).

A command stopped by a signal exits with 128 + the signal's number (:func:`exit_status`: SIGHUP 129, SIGINT
130, SIGTERM 143), the status shells report for a process a signal ended. A signal that is ignored when the
guard is entered (``nohup``'s SIGHUP, SIGINT of a background job) stays ignored.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
HARD_DEADLINE = 5.0          # s from the first signal to the end of the command's orderly stop
EXIT_STOP_DEADLINE = 6       # the status of a process whose orderly stop overran HARD_DEADLINE (5: telemetry lost)

_active: "StopSignals | None" = None


def exit_status(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process the signal ended."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def say(line: str) -> None:
    """One line on stderr from a signal handler or a timer thread: straight to the file descriptor, so it
    neither waits for nor re-enters the lock of ``sys.stderr`` the interrupted code may hold."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        fd = 2
    with contextlib.suppress(OSError):
        os.write(fd, (line + "\n").encode())


class StopSignal(KeyboardInterrupt):
    """Raised by :class:`StopSignals` when a stop signal arrives outside a control loop."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = int(signum)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP as one orderly stop while the block runs (see the module docstring); a signal
    raises :class:`StopSignal` only inside :meth:`raising` (elsewhere it is noted, and raised on entering it).

    ``prog`` starts the lines it writes; ``received`` lists the signals in the order they came."""

    def __init__(self, prog: str = "rtctl", deadline: float | None = None):
        self.prog, self.deadline = prog, float(HARD_DEADLINE if deadline is None else deadline)
        self.received: list[int] = []
        self.pending = False                # a signal was noted that nothing has acted on yet
        self._stoppers: list = []           # one entry per open stop_requests block or hold: its callback or None
        self._raising = 0
        self._previous: dict = {}
        self._timer: threading.Timer | None = None
        self._outer: StopSignals | None = None

    @property
    def signum(self) -> int | None:
        """The first stop signal received, or None."""
        return self.received[0] if self.received else None

    def __enter__(self) -> "StopSignals":
        global _active
        if threading.current_thread() is threading.main_thread():   # Python runs handlers there only
            for sig in STOP_SIGNALS:
                previous = signal.getsignal(sig)
                if previous != signal.SIG_IGN:
                    self._previous[sig] = previous
                    signal.signal(sig, self._on_signal)
        self._outer, _active = _active, self
        return self

    def __exit__(self, *exc) -> None:
        global _active
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        _active = self._outer
        if self._timer is not None:
            self._timer.cancel()

    @contextlib.contextmanager
    def raising(self):
        """The command's own code: here a signal nothing else acts on raises :class:`StopSignal` (leaving the
        block, even on the way out, it cannot: a caller's ``except KeyboardInterrupt`` around it sees all)."""
        self._raising += 1
        try:
            self._raise_pending()
            yield
        finally:
            self._raising -= 1

    def _raise_pending(self) -> None:
        if self.pending and self._raising and not self._stoppers:
            self.pending = False
            raise StopSignal(self.received[0])

    def _on_signal(self, signum, _frame) -> None:
        self.received.append(signum)
        if len(self.received) > 1:
            say(f"{self.prog}: {signal_name(signum)} while stopping after {signal_name(self.received[0])}: the "
                f"orderly stop goes on (at most {self.deadline:g} s)")
            return
        self._timer = threading.Timer(self.deadline, self._overrun)
        self._timer.daemon = True
        self._timer.start()
        stops = [stop for stop in self._stoppers if stop is not None]
        self.pending = not stops
        for stop in stops:
            stop(signum)
        self._raise_pending()

    def _overrun(self) -> None:
        say(f"{self.prog}: the orderly stop after {signal_name(self.received[0])} did not end within "
            f"{self.deadline:g} s: exiting now (status {EXIT_STOP_DEADLINE})")
        os._exit(EXIT_STOP_DEADLINE)


def in_force() -> bool:
    """A :class:`StopSignals` handles this process's stop signals now (entered in the main thread)."""
    return _active is not None and bool(_active._previous)


@contextlib.contextmanager
def stop_requests(stop=None):
    """While the block runs, a stop signal does not raise: ``stop(signum)`` is called instead (at once with the
    first signal if one came before the block), e.g. a loop's request to stop at its next cycle boundary or a
    recorder's flag; without ``stop`` the signal is only noted. Does nothing outside :class:`StopSignals`."""
    guard = _active
    if guard is None:
        yield
        return
    guard._stoppers.append(stop)
    try:
        if stop is not None and guard.received:
            guard.pending = False
            stop(guard.received[0])
        yield
    finally:
        guard._stoppers.remove(stop)


def hold() -> None:
    """Note stop signals without raising until the matching :func:`release` (they nest). In the main thread
    only, where Python runs signal handlers: elsewhere (numba compiling for a telemetry thread) nothing to do."""
    if _active is not None and threading.current_thread() is threading.main_thread():
        _active._stoppers.append(None)


def release() -> None:
    """End a :func:`hold`; a signal noted meanwhile that nothing acted on is raised now, once nothing holds."""
    guard = _active
    if guard is not None and threading.current_thread() is threading.main_thread():
        guard._stoppers.remove(None)
        guard._raise_pending()


def on_stop_signals(handler) -> None:
    """Call ``handler(signum, frame)`` on SIGINT, SIGTERM and SIGHUP (those not ignored): for a server's main
    loop that checks a flag, such as the HIL emulators."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, handler)
