"""Run a test's attack as another user of the control PC.

The machine and CI run the tests as root, the operator; :func:`as_other_user` forks and runs a function as
``nobody`` (uid and gid 65534, no supplementary groups) in the child, and returns what it returned (or
raises what it raised, as ``OtherUserError`` with the child's message). Without root it skips the test.
The child cannot import what the operator's files hold (the interpreter may live in root's home): import what
the function needs at the top of the test module.

:func:`another_user` is for an attacker that must keep its sockets open while the test acts (a squatter on a
port, a subscriber flooding a publisher): a context manager around the forked child, which reports once told
to finish. Without root it runs the attack as this user (the attacks it serves need no other uid to work).
"""
from __future__ import annotations

import contextlib
import encodings.idna  # noqa: F401  (socket.create_connection encodes host names with it)
import json
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


class Attacker:
    """What the attack returned when it was set up (:attr:`result`, with its ``uid``) and, once
    :meth:`finish` has told it to stop, its report (what its ``report`` callable returned)."""

    def __init__(self, result: dict, reader, done_w: int, pid: int):
        self.result, self._reader, self._done_w, self._pid = result, reader, done_w, pid
        self.report = None

    def finish(self) -> dict:
        if self.report is None:
            os.close(self._done_w)
            self.report = json.loads(self._reader.readline() or b'{"error": "the attacker died"}')
            os.waitpid(self._pid, 0)
            self._reader.close()
        return self.report


def _child(attack, args, ready_w: int, done_r: int) -> None:
    code, held = 0, []
    try:
        if os.getuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        result = dict(attack(held, *args) or {})
        report = result.pop("report", None)
        os.write(ready_w, json.dumps({"uid": os.getuid(), **result}).encode() + b"\n")
        os.read(done_r, 1)
        os.write(ready_w, json.dumps(report() if report else {}).encode() + b"\n")
    except BaseException as exc:  # noqa: BLE001  (reported to the test)
        code = 1
        os.write(ready_w, json.dumps({"uid": os.getuid(), "error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
    finally:
        os._exit(code)


@contextlib.contextmanager
def another_user(attack, *args):
    """Run ``attack(held, *args)`` in a forked child as another user; yields an :class:`Attacker`. The attack
    returns a JSON map, optionally with ``report``: a callable whose JSON map :meth:`Attacker.finish` returns.
    What the attack puts in the list ``held`` (its sockets) lives until then. Imports the attack needs must be
    done before (the child may not read this user's files)."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                          # the child: never returns into pytest
        os.close(ready_r)
        os.close(done_w)
        _child(attack, args, ready_w, done_r)
    os.close(ready_w)
    os.close(done_r)
    reader = os.fdopen(ready_r, "rb")
    attacker = Attacker(json.loads(reader.readline() or b'{"error": "the attacker died"}'), reader, done_w, pid)
    try:
        yield attacker
    finally:
        attacker.finish()
