"""Run a test's attack as another user of the control PC.

The machine and CI run the tests as root, the operator; :func:`as_other_user` forks and runs a function as
``nobody`` (uid and gid 65534, no supplementary groups) in the child, and returns what it returned (or
raises what it raised, as ``OtherUserError`` with the child's message). Without root it skips the test.
The child cannot import what the operator's files hold (the interpreter may live in root's home): import what
the function needs at the top of the test module.
"""
from __future__ import annotations

import encodings.idna  # noqa: F401  (socket.create_connection encodes host names with it)
import os
import pickle
import traceback

import pytest

NOBODY = 65534


class OtherUserError(Exception):
    """What the function raised in the other user's process (type and message)."""


def as_other_user(fn, *args, uid: int = NOBODY, **kwargs):
    """``fn(*args, **kwargs)`` run by uid ``uid`` in a forked child; its (picklable) return value."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                result = ("ok", fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001  (reported to the test)
                result = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            with os.fdopen(w, "wb") as out:
                out.write(pickle.dumps(result))
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    os.close(w)
    with os.fdopen(r, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        raise OtherUserError(f"the other user's process ended without an answer (status {status})")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise OtherUserError(value)
    return value
