"""ZeroMQ endpoints: what a server may bind (loopback unless allowed) and what a client may connect to.

An ``ipc://PATH`` server socket is created owner-only (umask 077, :func:`bind`): on a shared control PC
another user cannot connect to it, as they could to a socket created under the usual umask 022. Abstract
sockets (``ipc://@NAME``) have no permissions at all and are refused.

One server per endpoint. A TCP port that a process listens on cannot be bound again (the kernel refuses;
the refusal names the holder). An ``ipc://PATH`` can: ZeroMQ unlinks whatever socket is at the path and binds
a new one, so a second run would take the first one's stream and control channel over. :func:`bind` therefore
holds an ``flock(2)`` on ``PATH.lock`` (0600, the holder's pid inside) for the socket's life and refuses the
path while another process holds it, naming that process; :func:`close` removes the socket file and releases
the lock. The kernel drops the lock of a process that dies, so a crashed run's socket and lock file are
taken over by the next run. A live socket at the path that no lock guards (another program's) is refused too.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import threading
from urllib.parse import urlsplit

import zmq

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class EndpointError(ValueError):
    """An endpoint that is malformed, or not loopback without an explicit opt-in."""


class EndpointInUse(zmq.ZMQError):
    """Another process serves on the endpoint (``errno`` EADDRINUSE); the message names it."""

    def __init__(self, endpoint: str, holder: str | None):
        super().__init__(errno.EADDRINUSE, in_use_message(endpoint, holder))


def in_use_message(address: str, holder: str | None) -> str:
    return (f"{address} is in use by {holder or 'another process'}: one server per endpoint; stop that one or "
            "choose another endpoint")


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
_HELD: dict = {}                 # id(socket) -> its _EndpointLock, until close()


def bind(sock, endpoint: str) -> str:
    """Bind a ZeroMQ socket to a checked endpoint, an ``ipc://`` path owner-only and locked (close it with
    :func:`close`); returns the bound endpoint. Raises :class:`EndpointInUse` naming the process that serves
    there. The umask is process-wide: files other threads create meanwhile are owner-only too, never wider."""
    if not endpoint.startswith("ipc://"):
        try:
            sock.bind(endpoint)
        except zmq.ZMQError as exc:
            if exc.errno == errno.EADDRINUSE and endpoint.startswith("tcp://"):
                raise EndpointInUse(endpoint, _tcp_holder(endpoint)) from None
            raise
        return sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    path = endpoint[len("ipc://"):]
    lock = None if path == "*" else _EndpointLock(endpoint, path)
    try:
        if lock is not None:
            _refuse_a_file_in_the_way(endpoint, path)
        with _UMASK_LOCK:
            previous = os.umask(0o077)
            try:
                sock.bind(endpoint)
            finally:
                os.umask(previous)
        if lock is not None:
            lock.bound()
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if lock is not None:
        _HELD[id(sock)] = lock
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def close(sock, linger: int | None = None) -> None:
    """Close a socket bound by :func:`bind`; an ``ipc://`` one's socket file is removed and its lock released."""
    sock.close(linger=linger)
    lock = _HELD.pop(id(sock), None)
    if lock is not None:
        lock.release()


def tcp_in_use(exc: OSError, host: str, port: int) -> OSError:
    """A TCP server's bind error, naming the process that listens there when the address is in use (the
    dashboard, the Foxglove and the HIL bus servers; the kernel refuses a second listener on a port)."""
    if exc.errno != errno.EADDRINUSE:
        return exc
    from .holders import tcp_holder

    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return OSError(errno.EADDRINUSE, in_use_message(f"{shown}:{port}", tcp_holder(host, port)))


def _tcp_holder(endpoint: str) -> str | None:
    from .holders import tcp_holder

    host, _, port = endpoint[len("tcp://"):].rpartition(":")
    return tcp_holder(host, int(port)) if port.isdigit() else None


class _EndpointLock:
    """``flock(2)`` on ``PATH.lock``, held while this process serves ``PATH`` (the lock file holds its pid)."""

    def __init__(self, endpoint: str, path: str):
        self.endpoint, self.path, self.file = endpoint, path, path + ".lock"
        self.socket_inode = None
        for _ in range(100):    # the holder may unlink the file between our open and our flock: open it again
            try:
                fd = os.open(self.file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise zmq.ZMQError(exc.errno, f"{endpoint}: cannot open the lock file {self.file}: "
                                              f"{exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _pid_in(fd)
                os.close(fd)
                raise EndpointInUse(endpoint, holder) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                current = os.lstat(self.file)
            except FileNotFoundError:
                current = None
            st = os.fstat(fd)
            if current is not None and _inode(current) == _inode(st):
                break
            os.close(fd)
        else:
            raise zmq.ZMQError(errno.EAGAIN, f"{endpoint}: cannot take the lock {self.file}")
        self.fd = fd
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            self._close_fd()
            raise zmq.ZMQError(errno.EACCES, f"{endpoint}: the lock file {self.file} is not a regular file of "
                                             "this user; remove it or choose another path")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def bound(self) -> None:
        try:
            self.socket_inode = _inode(os.lstat(self.path))
        except OSError:
            pass

    def release(self) -> None:
        """Remove the socket file (ZeroMQ leaves it) and the lock file, then unlock: whoever binds next finds
        the path free. Each is removed only if it is still the one this process made."""
        if self.fd is None:
            return
        for path, inode in ((self.path, self.socket_inode), (self.file, _inode(os.fstat(self.fd)))):
            try:
                if inode is not None and _inode(os.lstat(path)) == inode:
                    os.unlink(path)
            except OSError:
                pass
        self._close_fd()

    def _close_fd(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def _inode(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _pid_in(fd: int) -> str | None:
    """The holder named in a lock file: ``pid N (command)``, or None if it has not written it yet."""
    from .holders import describe_pid

    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return describe_pid(int(text)) if text.isdigit() else None


def _refuse_a_file_in_the_way(endpoint: str, path: str) -> None:
    """ZeroMQ unlinks whatever is at an ipc:// path before it binds there: only a socket nobody listens on (one
    a crashed run left) may be replaced, never a file, directory or symlink that a mistaken endpoint names, nor
    a live socket of another program."""
    if path.startswith("@"):
        return
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not stat.S_ISSOCK(mode):
        raise zmq.ZMQError(errno.EEXIST, f"{endpoint}: {path} exists and is not a socket (binding would delete "
                                         "it); remove it or choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise zmq.ZMQError(exc.errno, f"{endpoint}: {path} is a socket this user cannot reach "
                                          f"({exc.strerror}); choose another path") from None
        return
    finally:
        probe.close()
    from .holders import unix_holder

    raise EndpointInUse(endpoint, unix_holder(path))
