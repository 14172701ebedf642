"""Processes of the CAN HIL suite: the loopback CAN bus server and the emulator processes.

The bus is python-can-remote's websocket server bound to 127.0.0.1 on a free
port; inside it every client connection gets its own python-can ``virtual``
bus on one channel, so frames cross between the controller process and the
emulator processes. Nothing here listens on anything but loopback.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CODE = ("import sys; from can_remote.server import RemoteServer; "
               "s = RemoteServer('127.0.0.1', int(sys.argv[1]), interface='virtual', channel=sys.argv[2]); "
               "print('READY', flush=True); s.serve_forever()")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(proc: subprocess.Popen, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == "READY":
            return
        if not line and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stderr.read()}")
    proc.kill()
    raise TimeoutError(f"{what} not ready within {timeout} s")


class BusServer:
    """The loopback CAN bus server process (start/stop; ``url`` is the channel for ``interface="remote"``)."""

    def __init__(self, channel_name: str = "rtctl-hil"):
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/"
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER_CODE, str(self.port), channel_name],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        _wait_ready(self.proc, "CAN bus server", 20.0)
        deadline = time.monotonic() + 5.0
        while True:  # the listening socket exists once READY was printed, but be sure
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Emulator:
    """An emulator process (``python -m hil.can_emulator ...``) on the server's bus."""

    def __init__(self, server: BusServer, protocol: str, ids, *args: str):
        cmd = [sys.executable, "-m", "rtctl.hil.can_emulator", "--protocol", protocol, "--channel", server.url,
               "--ids", *map(str, ids), *args]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                     env=env)
        _wait_ready(self.proc, f"{protocol} emulator", 60.0)
        self.counters: dict = {}

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: the firmware dies mid-run."""
        if self.proc.poll() is None:
            self.proc.kill()

    def stop(self) -> dict:
        """SIGTERM, wait, and return the emulator's own counters (empty if it was killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _err = self.proc.communicate()
        for line in out.splitlines():
            if line.startswith("{"):
                self.counters = json.loads(line)
        return self.counters
