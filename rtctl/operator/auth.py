"""Control-channel credentials: the token, and ZeroMQ CURVE keys for a bind beyond loopback.

The token that commands which move the robot, change gains or re-arm must carry
comes, in this order, from

1. a token file named in the config (``[control] token_file``) or on the command
   line (``--token-file``): a regular file owned by the current user, mode 0600 or
   stricter (a file other users can read is refused), not a symbolic link, in a
   directory of this user (or root) that no one else can write (unless sticky, as
   /tmp), holding the token on its first line;
2. the environment variable :data:`TOKEN_ENV` (an empty value is an error, not
   "no authentication");
3. the default token file :func:`default_token_path` (per user, 0600 in a 0700
   directory). A server with no token from 1 or 2 creates it there with a fresh
   random token at start-up (:func:`server_token`), so that ``rtctl control`` run by
   the same user finds it and nobody else can read it.

A token is never taken from argv: every user of the machine can read another
process's command line (``ps``).
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

TOKEN_ENV = "RTCTL_CONTROL_TOKEN"
MAX_TOKEN_BYTES = 4096
MIN_TOKEN_CHARS = 16


class CredentialError(ValueError):
    """A token or key file that cannot be used; the message names the file and the problem."""


def default_token_path() -> Path:
    """``$XDG_CONFIG_HOME/rtctl/control.token`` (``~/.config/rtctl/control.token`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rtctl" / "control.token"


def check_private(path: Path, what: str = "token file") -> os.stat_result:
    """Refuse ``path`` unless it is a regular file (or directory) of the current user that no one else can read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CredentialError(f"{what} {path}: does not exist") from None
    except OSError as exc:
        raise CredentialError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise CredentialError(f"{what} {path}: not a regular file")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CredentialError(f"{what} {path}: owned by uid {st.st_uid}, not by this user (uid {os.getuid()})")
    if st.st_mode & 0o077:
        mode = "700" if stat.S_ISDIR(st.st_mode) else "600"
        raise CredentialError(f"{what} {path}: mode {stat.S_IMODE(st.st_mode):04o} lets other users read it; "
                              f"run: chmod {mode} {path}")
    return st


def _check_token_directory(st: os.stat_result, directory: Path, path: Path) -> None:
    """Refuse the directory of a token file when a user other than this one (or root) can replace the file in
    it: owned by another user, or writable by group or others without the sticky bit (which keeps others from
    renaming or deleting files they do not own, as in /tmp)."""
    if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
        raise CredentialError(f"token file {path}: its directory {directory} is owned by uid {st.st_uid}, who "
                              "could replace the file; keep the token in a directory of your own")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise CredentialError(f"token file {path}: its directory {directory} is writable by other users (mode "
                              f"{stat.S_IMODE(st.st_mode):04o}), who could replace the file; run: chmod go-w "
                              f"{directory} (or keep the token in a directory of your own)")


def _open_token_file(path: Path) -> int:
    """A descriptor of the token file ``path``: its directory opened and checked first, the file opened from it
    once, without following a symbolic link and without waiting (a FIFO), and checked on what was opened
    (``fstat``), so what is read is what was checked."""
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise CredentialError(f"token file {path}: its directory cannot be opened ({exc.strerror})") from None
    try:
        _check_token_directory(os.fstat(dir_fd), path.parent, path)
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise CredentialError(f"token file {path}: does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CredentialError(f"token file {path}: a symbolic link (it can be pointed at another file); give "
                                  "the file itself") from None
        raise CredentialError(f"token file {path}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CredentialError(f"token file {path}: not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise CredentialError(f"token file {path}: owned by uid {st.st_uid}, not by this user (uid "
                                  f"{os.getuid()})")
        if st.st_mode & 0o077:
            raise CredentialError(f"token file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets other users read "
                                  f"it; run: chmod 600 {path}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_token(token, source: str) -> str:
    """The token itself: printable ASCII without spaces, at least :data:`MIN_TOKEN_CHARS` and at most
    :data:`MAX_TOKEN_BYTES` characters."""
    if not isinstance(token, str) or not token:
        raise CredentialError(f"{source}: the token is empty (an empty token does not turn authentication off)")
    if len(token) > MAX_TOKEN_BYTES or not token.isascii() or not token.isprintable() or " " in token:
        raise CredentialError(f"{source}: a token is printable ASCII without spaces, at most {MAX_TOKEN_BYTES} "
                              "characters")
    if len(token) < MIN_TOKEN_CHARS:
        raise CredentialError(f"{source}: the token has {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
                              "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def read_token_file(path) -> str:
    """The token held by ``path`` (first line): a regular file of this user that no one else can read, in a
    directory no one else can replace it in, opened without following links (:func:`_open_token_file`)."""
    path = Path(path).expanduser()
    with os.fdopen(_open_token_file(path), "rb") as fh:
        raw = fh.read(MAX_TOKEN_BYTES + 2)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise CredentialError(f"token file {path}: not ASCII text") from None
    lines = text.splitlines()
    return check_token(lines[0].strip() if lines else "", f"token file {path}")


def client_token(token_file=None, environ=None) -> str | None:
    """The token a client sends: from ``token_file``, else :data:`TOKEN_ENV`, else the default file if it exists."""
    environ = os.environ if environ is None else environ
    if token_file:
        return read_token_file(token_file)
    if TOKEN_ENV in environ:
        return check_token(environ[TOKEN_ENV], f"environment variable {TOKEN_ENV}")
    path = default_token_path()
    if path.exists():
        return read_token_file(path)
    return None


def server_token(token_file=None, environ=None) -> tuple[str, str]:
    """The token a server requires and where it came from; creates the default file when there is none."""
    environ = os.environ if environ is None else environ
    if token_file:
        return read_token_file(token_file), f"token file {token_file}"
    if TOKEN_ENV in environ:
        return check_token(environ[TOKEN_ENV], f"environment variable {TOKEN_ENV}"), f"${TOKEN_ENV}"
    path = default_token_path()
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32) + "\n")
    return read_token_file(path), f"token file {path}"


def write_private(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 (its directory 0700 if new); never follows or replaces an existing file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.path.islink(path.parent):
        raise CredentialError(f"directory {path.parent}: a symbolic link; refusing to keep a token there")
    check_private(path.parent, "directory")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        try:
            os.link(temporary, path)  # atomic, complete, and never replaces a file another process made first
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)


def load_curve_server_key(path) -> tuple[bytes, bytes]:
    """(public, secret) of a CURVE certificate written by ``zmq.auth.create_certificates`` (the secret one)."""
    import zmq.auth

    path = Path(path).expanduser()
    check_private(path, "CURVE secret key file")
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise CredentialError(f"CURVE secret key file {path}: {exc}") from None
    if not secret:
        raise CredentialError(f"CURVE secret key file {path}: holds no secret key (give the .key_secret file)")
    return public, secret
