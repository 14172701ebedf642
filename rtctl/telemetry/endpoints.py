"""ZeroMQ endpoints: what a server may bind (loopback unless allowed) and what a client may connect to.

An ``ipc://PATH`` server socket is created owner-only (umask 077, :func:`bind`): on a shared control PC
another user cannot connect to it, as they could to a socket created under the usual umask 022. Abstract
sockets (``ipc://@NAME``) have no permissions at all and are refused.
"""
from __future__ import annotations

import errno
import os
import stat
import threading
from urllib.parse import urlsplit

import zmq

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class EndpointError(ValueError):
    """An endpoint that is malformed, or not loopback without an explicit opt-in."""


def check_endpoint(endpoint: str, allow_remote: bool = False, what: str = "endpoint") -> str:
    """Validate a ZeroMQ bind endpoint: ``tcp://HOST:PORT`` (PORT 0 or ``*``: OS-chosen), ``ipc://`` or ``inproc://``.

    A tcp host other than loopback is refused unless ``allow_remote`` is set. Returns the
    endpoint to bind (``:0`` rewritten to ZeroMQ's ``:*``).
    """
    if not isinstance(endpoint, str) or "://" not in endpoint:
        raise EndpointError(f"{what} {endpoint!r}: expected tcp://HOST:PORT, ipc://PATH or inproc://NAME")
    scheme = endpoint.split("://", 1)[0]
    if scheme == "ipc" and endpoint.startswith("ipc://@"):
        raise EndpointError(f"{what} {endpoint!r}: an abstract socket has no permissions, any user of this machine "
                            "could connect; use ipc://PATH (created owner-only)")
    if scheme in ("ipc", "inproc"):
        return endpoint
    if scheme != "tcp":
        raise EndpointError(f"{what} {endpoint!r}: transport {scheme!r} not supported (tcp, ipc, inproc)")
    rest = endpoint[len("tcp://"):]
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise EndpointError(f"{what} {endpoint!r}: expected tcp://HOST:PORT")
    if port not in ("*", "0") and not (port.isdigit() and 0 < int(port) < 65536):
        raise EndpointError(f"{what} {endpoint!r}: port must be 1..65535, 0 or *")
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise EndpointError(f"{what} {endpoint!r}: binds beyond this machine; set allow_remote = true to do "
                            "that on purpose (default: 127.0.0.1 only)")
    if host == "localhost":
        host = "127.0.0.1"
    return f"tcp://{host}:{'*' if port in ('*', '0') else port}"


def check_connect_endpoint(endpoint: str, what: str = "endpoint") -> str:
    """Validate an endpoint a client connects to: ``tcp://HOST:PORT`` (a real port), ``ipc://`` or ``inproc://``."""
    checked = check_endpoint(endpoint, allow_remote=True, what=what)
    if checked.startswith("tcp://") and checked.endswith(":*"):
        raise EndpointError(f"{what} {endpoint!r}: a client connects to a port number, not 0 or *")
    return endpoint


def loopback_connect(endpoint: str) -> str:
    """The address a local client connects to for a bound ``endpoint`` (``*`` / 0.0.0.0 -> 127.0.0.1)."""
    parts = urlsplit(endpoint)
    if parts.scheme == "tcp" and parts.hostname in ("0.0.0.0", "*"):
        return f"tcp://127.0.0.1:{parts.port}"
    return endpoint


_UMASK_LOCK = threading.Lock()


def bind(sock, endpoint: str) -> str:
    """Bind a ZeroMQ socket to a checked endpoint, an ``ipc://`` path owner-only; returns the bound endpoint.
    The umask is process-wide: files other threads create meanwhile are owner-only too, never wider."""
    if endpoint.startswith("ipc://"):
        _refuse_a_file_in_the_way(endpoint)
        with _UMASK_LOCK:
            previous = os.umask(0o077)
            try:
                sock.bind(endpoint)
            finally:
                os.umask(previous)
    else:
        sock.bind(endpoint)
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def _refuse_a_file_in_the_way(endpoint: str) -> None:
    """ZeroMQ unlinks whatever is at an ipc:// path before it binds there: only a socket (one a previous run left)
    may be replaced, never a file, directory or symlink that a mistaken endpoint names."""
    path = endpoint[len("ipc://"):]
    if path == "*" or path.startswith("@"):
        return
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not stat.S_ISSOCK(mode):
        raise zmq.ZMQError(errno.EEXIST, f"{endpoint}: {path} exists and is not a socket (binding would delete "
                                         "it); remove it or choose another path")
