"""A network namespace with a veth pair in it, for EtherCAT tests and benchmarks: the emulated slaves on one
end, the master on the other, no frame leaving the namespace. Creating it needs root and ``ip`` (iproute2);
:func:`unavailable` says why it cannot be made here, for a skip. The namespace is deleted on exit, also when
the test fails (deleting it deletes the veth pair in it)."""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
MASTER_END, SLAVE_END = "ecmaster", "ecslaves"
_names = itertools.count()
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """None if a namespace with a veth pair can be made here, else why not (one line)."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to create a network namespace and a veth pair"
    if os.geteuid() != 0:
        return "creating a network namespace and a veth pair needs root (CI runs these tests as root)"
    with veth_namespace() as ns:
        if ns is None:
            return "`ip netns add` / `ip link add ... type veth` failed here (no CAP_SYS_ADMIN / veth module?)"
    return None


@contextlib.contextmanager
def veth_namespace():
    """A fresh namespace holding the veth pair MASTER_END <-> SLAVE_END, both up; yields its name (None if
    it could not be made). Deleted on exit."""
    name = f"rtctl-ec-{os.getpid()}-{next(_names)}"
    made = _ip("netns", "add", name).returncode == 0
    try:
        ok = made and all(_ip("-n", name, *cmd).returncode == 0 for cmd in (
            ("link", "add", MASTER_END, "type", "veth", "peer", "name", SLAVE_END),
            ("link", "set", MASTER_END, "up"), ("link", "set", SLAVE_END, "up")))
        yield name if ok else None
    finally:
        if made:
            _ip("netns", "del", name)


@contextlib.contextmanager
def inside(namespace: str):
    """The calling thread in ``namespace`` (setns(2) moves one thread): sockets opened here stay in it."""
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the test's namespace")
    finally:
        os.close(target)
        os.close(own)


def start_emulator(namespace: str, *args: str) -> subprocess.Popen:
    """``python -m rtctl.hil.ethercat --interface SLAVE_END ARGS`` inside ``namespace``, once it says READY."""
    proc = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-m", "rtctl.hil.ethercat",
                             "--interface", SLAVE_END, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        raise AssertionError(f"emulator did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return proc


def stop_emulator(proc: subprocess.Popen) -> str:
    """SIGTERM, then its output after READY (the STATS line)."""
    proc.terminate()
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    return out
