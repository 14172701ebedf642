"""Who holds an address: the process listening on a TCP port or a unix socket path, for the message that
refuses a second server there (Linux ``/proc``: ``proc(5)``, ``/proc/net/tcp``, ``/proc/net/unix``).

A process of another user shows as its uid when its descriptors cannot be read (``/proc/PID/fd`` is the
owner's); elsewhere than Linux the holder is not named.
"""
from __future__ import annotations

import os
import socket
import struct

TCP_LISTEN = "0A"
UNIX_LISTENING = 0x10000   # __SO_ACCEPTCON in /proc/net/unix's Flags column


def describe_pid(pid: int) -> str:
    """``pid 1234 (rtctl run demo.toml)``: the pid and its command line, as far as it can be read; a telemetry
    publisher process is named by the run it serves."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read(4096).split(b"\0") if a]
    except OSError:
        argv = []
    if any("rtctl.telemetry.relay" in a for a in argv):
        parent = _parent(pid)
        return f"pid {pid} (the telemetry publisher of {describe_pid(parent) if parent else 'a run'})"
    if argv:
        argv[0] = os.path.basename(argv[0])
    if argv[1:3] in (["-m", "rtctl.cli"], ["-m", "rtctl"]):
        argv = ["rtctl", *argv[3:]]
    command = " ".join(" ".join(argv).split())
    if len(command) > 100:
        command = command[:97] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return ppid if ppid > 1 else None


def _owner_of(inode: int) -> int | None:
    """The pid of a process holding socket ``inode`` (one whose descriptors this user may read)."""
    target = f"socket:[{inode}]"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                    return int(entry)
            except OSError:
                continue
    return None


def _describe(inode: int, uid: int | None) -> str:
    pid = _owner_of(inode)
    if pid is not None:
        return describe_pid(pid)
    if uid is None:
        return "another process"
    import pwd

    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return f"a process of user {name} (uid {uid})"


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    if len(host) == 8:
        ip = socket.inet_ntop(socket.AF_INET, struct.pack("=I", int(host, 16)))
    else:
        words = [int(host[i:i + 8], 16) for i in range(0, 32, 8)]
        ip = socket.inet_ntop(socket.AF_INET6, struct.pack("=4I", *words))
    return ip, int(port, 16)


def tcp_holder(host: str, port: int) -> str | None:
    """The process listening on ``host``:``port`` (or on a wildcard address with that port), or None."""
    wanted = host.strip("[]")
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != TCP_LISTEN:
                continue
            ip, bound_port = _address(cols[1])
            if bound_port == port and ip in (wanted, "0.0.0.0", "::"):
                return _describe(int(cols[9]), int(cols[7]))
    return None


def unix_holder(path: str) -> str | None:
    """The process listening on the unix socket ``path``, or None."""
    names = {path, os.path.abspath(path)}
    try:
        with open("/proc/net/unix") as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        cols = line.split()
        if len(cols) >= 8 and int(cols[3], 16) & UNIX_LISTENING and cols[7] in names:
            return _describe(int(cols[6]), None)
    return None
