"""Processes of the CAN HIL suite: the loopback CAN bus server, the emulator processes, a bus sniffer and a
control process, all started from the installed package (``python -m rtctl.hil.cli ...``, ``python -m
rtctl.cli run ...``): nothing depends on where the repository is.

The bus is ``rtctl-hil can-bus`` (:mod:`rtctl.hil.cli`): python-can-remote's websocket server bound to
127.0.0.1 on a free port; inside it every client connection gets its own python-can ``virtual`` bus on one
channel, so frames cross between the controller process and the emulator processes. Nothing here listens
on anything but loopback.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import can

from rtctl.drivers.can.bus import shutdown_bus


def _start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_line(proc: subprocess.Popen, match, what: str, timeout: float) -> str:
    """The first line of ``proc``'s stdout for which ``match(line)`` holds; the process is killed (and this
    raises) if it exits first or the line does not come within ``timeout``."""
    timer = threading.Timer(timeout, proc.kill)     # a silent process: its stdout ends, readline returns ""
    timer.start()
    try:
        for line in proc.stdout:
            if match(line.strip()):
                return line.strip()
    finally:
        timer.cancel()
    proc.kill()
    _out, err = proc.communicate()
    raise RuntimeError(f"{what} exited (status {proc.returncode}) or was not ready within {timeout} s: "
                       f"{err[-2000:]}")


def _finish(proc: subprocess.Popen, timeout: float = 10.0) -> tuple[str, str]:
    """SIGTERM (if still running), wait, and the rest of stdout and stderr (pipes closed)."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


class BusServer:
    """The loopback CAN bus server process, ``rtctl-hil can-bus``; ``url`` is the channel for
    ``interface="remote"``. ``stop()`` returns what the server wrote on stderr (nothing when all is well)."""

    def __init__(self, channel_name: str = "rtctl-hil"):
        self.proc = _start([sys.executable, "-m", "rtctl.hil.cli", "can-bus", "--channel", channel_name])
        self.url = _wait_line(self.proc, lambda s: s.startswith("ws://127.0.0.1:"), "CAN bus server", 30.0)
        self.port = int(self.url.rstrip("/").rsplit(":", 1)[1])
        self.stderr = ""

    def stop(self) -> str:
        _out, self.stderr = _finish(self.proc)
        return self.stderr


class Emulator:
    """An emulator process (``rtctl-hil can-emulator ...``) on the server's bus."""

    def __init__(self, server: BusServer, protocol: str, ids, *args: str):
        self.proc = _start([sys.executable, "-m", "rtctl.hil.cli", "can-emulator", "--protocol", protocol,
                            "--channel", server.url, "--ids", *map(str, ids), *args])
        _wait_line(self.proc, lambda s: s == "READY", f"{protocol} emulator", 120.0)
        self.counters: dict = {}
        self.stderr = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: the firmware dies mid-run."""
        if self.proc.poll() is None:
            self.proc.kill()

    def stop(self) -> dict:
        """SIGTERM, wait, and return the emulator's own counters, event log and final state (empty if it was
        killed)."""
        out, self.stderr = _finish(self.proc)
        for line in out.splitlines():
            if line.startswith("{"):
                self.counters = json.loads(line)
        return self.counters


class Sniffer:
    """A bus client in a thread of this process that records every frame: ``frames`` is a list of
    ``(time.monotonic() at arrival, arbitration ID, data bytes)``."""

    def __init__(self, server: BusServer):
        self.bus = can.Bus(interface="remote", channel=server.url)
        self.frames: list[tuple[float, int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="can-sniffer", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            msg = self.bus.recv(0.05)
            if msg is not None and not msg.is_error_frame:
                self.frames.append((time.monotonic(), msg.arbitration_id, bytes(msg.data)))

    def count(self, arbitration_id: int, since: float = -1.0) -> int:
        return sum(1 for t, i, _d in self.frames if i == arbitration_id and t > since)

    def of(self, arbitration_id: int) -> list[tuple[float, bytes]]:
        return [(t, d) for t, i, d in self.frames if i == arbitration_id]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        shutdown_bus(self.bus)


def run_config_text(protocol: str, url: str, urdf: str, q0, rate_hz: float = 500.0, duration: float = 30.0,
                    **driver) -> str:
    """A run config (TOML) of the HIL arm on the bus at ``url``: ``protocol`` "cia402" or "can_mit", computed
    torque on sinusoids about ``q0``; ``driver`` adds keys to ``[driver]``."""
    def value(v):
        return json.dumps(v) if not isinstance(v, bool) else str(v).lower()
    extra = "".join(f"{k} = {value(v)}\n" for k, v in driver.items())
    q = value([float(x) for x in q0])
    return (f'[robot]\nmodel = {value(str(urdf))}\n[plant]\ninitial_position = {q}\n'
            f'[driver]\nbackend = "{protocol}"\ncan_interface = "remote"\ncan_channel = "{url}"\n'
            f'can_ids = [1, 2]\n{extra}'
            f'[controller]\ntype = "computed_torque"\nkp = 400.0\n'
            f'[trajectory]\ntype = "sinusoid"\ncenter = {q}\namplitude = [0.3, 0.3]\nfrequency = [0.5, 0.7]\n'
            f'[loop]\nrate_hz = {rate_hz}\nduration = {duration}\n')


class ControlProcess:
    """The control process: ``rtctl run CONFIG`` (the installed command line, as an operator runs it)."""

    def __init__(self, config_path, startup_timeout: float = 180.0):
        self.proc = _start([sys.executable, "-m", "rtctl.cli", "run", str(config_path)])
        # "rtctl: running ..." comes once the loop is built, before the drivers are configured.
        _wait_line(self.proc, lambda s: s.startswith("rtctl: running"), "control process", startup_timeout)
        self.killed_at = None
        self.output = ("", "")

    def kill(self) -> float:
        """SIGKILL now (no cleanup of any kind runs in it); returns ``time.monotonic()`` just before the signal
        (the process dies at or after it) once the process is reaped."""
        self.killed_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.output = self.proc.communicate(timeout=10)          # reaped, pipes closed
        return self.killed_at

    def stop(self) -> tuple[str, str]:
        """SIGTERM if still running; (stdout, stderr)."""
        if self.proc.returncode is not None and self.proc.stdout.closed:
            return self.output
        self.output = _finish(self.proc)
        return self.output


class Arm2Run:
    """``rtctl run`` of the HIL arm over ``protocol`` ("can_mit" or "cia402") against its emulator on
    ``server``'s bus, with a sniffer: ``with Arm2Run(...) as run:`` returns once the loop has put ``cycles``
    ``frame_id`` frames on the bus (command frames, SYNCs). On leaving, the control process is killed if it
    still runs and the emulator and the sniffer are stopped: the emulator's counters are then
    :attr:`counters`, the sniffer keeps its frames. ``config`` is added to the run config's text."""

    def __init__(self, server: BusServer, directory, protocol: str, q0, frame_id: int, cycles: int,
                 emu_args=(), config: str = "", **driver):
        from .can_robot import arm2_urdf

        urdf = directory / "arm2.urdf"
        urdf.write_text(arm2_urdf())
        self.config = directory / "run.toml"
        self.config.write_text(run_config_text(protocol, server.url, urdf, q0, duration=60.0, max_failed_cycles=25,
                                               **driver) + config)
        self.server, self.frame_id, self.cycles = server, frame_id, cycles
        self.emulator_args = ("cia402" if protocol == "cia402" else "mit", [1, 2], "--urdf", str(urdf),
                              "--initial", *map(str, q0), *emu_args)
        self.control: ControlProcess | None = None
        self.counters: dict = {}

    def __enter__(self) -> "Arm2Run":
        self.emulator = Emulator(self.server, *self.emulator_args)
        self.sniffer = Sniffer(self.server)
        try:
            self.control = ControlProcess(self.config)
            deadline = time.monotonic() + 120.0
            while self.sniffer.count(self.frame_id) < self.cycles:
                if self.control.proc.poll() is not None:
                    raise AssertionError(f"the control process ended: {self.control.stop()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the loop did not run {self.cycles} cycles")
                time.sleep(0.01)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.control is not None and self.control.proc.poll() is None:
            self.control.kill()
        self.counters = self.emulator.stop()
        self.sniffer.stop()
        if "not properly shut down" in self.emulator.stderr:
            raise AssertionError(self.emulator.stderr)
