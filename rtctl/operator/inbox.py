"""The loop's side of the operator process: validated commands in, replies out, through shared memory.

The operator process (:mod:`rtctl.operator`) owns the control channel's socket; it decodes, authenticates
and checks every request there, and hands the loop's process only what passed: an e-stop, a status query, a
change from a client that proved the token. The hand-off is one shared mapping (an anonymous memory file, as
the telemetry ring's, :mod:`.publisher`) holding

* a header of int64 words (:data:`HEADER_WORDS`): the records written by the operator process and read by the
  loop, the e-stops asked for and applied, whether the operator process is gone;
* the reason of the latest e-stop (:data:`REASON_BYTES`) and the latest status reply (:data:`STATUS_BYTES`);
* :data:`SLOTS` fixed-size slots, each a request (its sequence number, deadline and msgpack bytes, at most
  :data:`REQUEST_BYTES`) and its reply (at most :data:`REPLY_BYTES`): a bounded queue; when it is full the
  operator process refuses the request at once.

:class:`CommandInbox` is a boundary hook of the loop: each cycle, before the read, one compiled call
(:func:`_waiting`) compares three pairs of header words and returns; nothing is allocated, no lock is taken,
no system call made. Only when something arrived does it take the records: an e-stop first (it never waits
behind a queued change, and asking again while one is unapplied does not queue a second), then the queued
records in order (changes only: an e-stop and a status query have their own header words), each validated against the loop as it is now and applied by the in-process
:class:`~.control.ControlServer` (its checks that need the loop's own objects: the gains' stability bound about
the measured configuration, a move from the desired position now, an impedance controller's or a CPG's own
check), its reply written back.

The loop's process holds one end of a socket pair whose other end only the operator process holds. A thread
here blocks on it (holding nothing): end of file means the operator process is gone (killed, crashed), and the
loop latches the safe stop at once, with one line saying so; the next boundary finds it latched. A byte on it
means an e-stop or a status query the loop did not take within :data:`ESTOP_WAKE` s (a loop between runs, or
stalled): the thread answers it itself, as the channel's thread always did. Changes wait for a cycle boundary.

Ordering: each side writes a record's bytes before the header word that publishes it; x86-64 keeps stores in
order (total store order), as the telemetry ring already relies on.
"""
from __future__ import annotations

import mmap
import os
import socket
import sys
import threading
import time

import msgpack
import numpy as np
from numba import njit

from .requests import Refused

HEADER_WORDS = 16
(H_WRITTEN, H_READ, H_ESTOP_ASKED, H_ESTOP_DONE, H_ESTOP_CYCLE, H_LOST, H_REASON_LEN, H_LOOP_PID, H_STATUS_ASKED,
 H_STATUS_DONE, H_STATUS_LEN) = range(11)
REASON_BYTES = 1024
STATUS_BYTES = 1 << 15
SLOTS = 16                 # requests waiting for a cycle boundary at most
SLOT_WORDS = 8             # per slot: sequence, deadline (ns, CLOCK_MONOTONIC), taken, done, request and reply length
S_SEQ, S_DEADLINE, S_TAKEN, S_DONE, S_REQUEST_LEN, S_REPLY_LEN = range(6)
REQUEST_BYTES = 1 << 16    # a request re-encoded by the operator process: no longer than its frame was
REPLY_BYTES = 1 << 15
ESTOP_WAKE = 5e-3          # s: an e-stop the loop has not applied by then is applied by the loop process's thread
SLOT_BYTES = 8 * SLOT_WORDS + REQUEST_BYTES + REPLY_BYTES
SIZE = 8 * HEADER_WORDS + REASON_BYTES + STATUS_BYTES + SLOTS * SLOT_BYTES


@njit("boolean(int64[::1])", cache=True)
def _waiting(header):
    """Something arrived: a record, an e-stop, a status query or the operator process's loss (allocation-free)."""
    return (header[H_WRITTEN] != header[H_READ] or header[H_ESTOP_ASKED] != header[H_ESTOP_DONE]
            or header[H_STATUS_ASKED] != header[H_STATUS_DONE] or header[H_LOST] == 1)


class SharedInbox:
    """The views of the shared mapping both processes use (``shared``: an mmap of :data:`SIZE` bytes)."""

    def __init__(self, shared):
        self.shared = shared
        self.header = np.frombuffer(shared, dtype=np.int64, count=HEADER_WORDS)
        self.reason = np.frombuffer(shared, dtype=np.uint8, count=REASON_BYTES, offset=8 * HEADER_WORDS)
        self._status = 8 * HEADER_WORDS + REASON_BYTES
        base = self._status + STATUS_BYTES
        self.words = [np.frombuffer(shared, dtype=np.int64, count=SLOT_WORDS, offset=base + k * SLOT_BYTES)
                      for k in range(SLOTS)]
        self._request = [base + k * SLOT_BYTES + 8 * SLOT_WORDS for k in range(SLOTS)]
        self._reply = [r + REQUEST_BYTES for r in self._request]

    def request_bytes(self, k: int) -> bytes:
        start = self._request[k]
        return self.shared[start:start + int(self.words[k][S_REQUEST_LEN])]

    def reply_bytes(self, k: int) -> bytes:
        start = self._reply[k]
        return self.shared[start:start + int(self.words[k][S_REPLY_LEN])]

    def status_bytes(self) -> bytes:
        return self.shared[self._status:self._status + int(self.header[H_STATUS_LEN])]

    def put_status(self, data: bytes) -> None:
        self.shared[self._status:self._status + len(data)] = data
        self.header[H_STATUS_LEN] = len(data)

    def put_request(self, k: int, data: bytes) -> None:
        self.shared[self._request[k]:self._request[k] + len(data)] = data
        self.words[k][S_REQUEST_LEN] = len(data)

    def put_reply(self, k: int, data: bytes) -> None:
        self.shared[self._reply[k]:self._reply[k] + len(data)] = data
        self.words[k][S_REPLY_LEN] = len(data)


def shared_memory(name: str, size: int = SIZE):
    """(mmap, fd) of ``size`` zeroed bytes in an anonymous memory file (Linux ``memfd_create``: nothing can open
    it by name, nothing is left behind), its memory reserved now; the fd goes to the child, then is closed."""
    fd = os.memfd_create(name, getattr(os, "MFD_CLOEXEC", 0))
    try:
        os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size), fd
    except OSError as exc:
        os.close(fd)
        raise RuntimeError(f"control channel: cannot reserve {size} bytes of shared memory: {exc}") from None


class CommandInbox:
    """The loop's side: a boundary hook of ``server.loop`` applying what the operator process hands over.

    ``server``: an in-process :class:`~.control.ControlServer` of the loop (no socket, no token) that validates
    and applies; ``shared``: the mapping; ``link``: this process's end of the socket pair with the operator
    process (:meth:`watch` starts the thread reading it).
    """

    def __init__(self, server, shared, link: socket.socket):
        self.server, self.loop = server, server.loop
        self.view = SharedInbox(shared)
        self._header = self.view.header
        self._header[H_LOOP_PID] = os.getpid()
        self._link = link
        self._lock = threading.Lock()
        self._closing = False
        self._thread = None
        self.operator_pid = 0
        self.lost = ""            # how the operator process was lost, once it was
        self.applied = 0          # records taken by the loop
        _waiting(self._header)    # compiled at import (its signature is given): called once here all the same
        self.loop.boundary_hooks.append(self)

    def watch(self, operator_pid: int) -> None:
        self.operator_pid = int(operator_pid)
        self._thread = threading.Thread(target=self._watch, name="rtctl-operator-link", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop watching (an orderly end: the operator process's exit then latches nothing)."""
        self._closing = True
        try:
            self._link.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        self._link.close()
        if self in self.loop.boundary_hooks:
            self.loop.boundary_hooks.remove(self)

    # -- the loop's thread -------------------------------------------------------------------
    def __call__(self, loop) -> None:
        if not _waiting(self._header):
            return
        with self._lock:
            self._serve(loop)

    def _serve(self, loop) -> None:
        header = self._header
        if header[H_LOST] == 1:
            self._latch_lost(loop)
        self._open_commands(loop)
        while header[H_READ] != header[H_WRITTEN]:
            k = int(header[H_READ] % SLOTS)
            self._take(loop, k)
            header[H_READ] += 1

    def _open_commands(self, loop) -> None:
        """The e-stop and status query, if asked for: the commands that need no token, never queued."""
        header = self._header
        if header[H_ESTOP_ASKED] != header[H_ESTOP_DONE]:
            self._estop(loop)
        if header[H_STATUS_ASKED] != header[H_STATUS_DONE]:
            asked = int(header[H_STATUS_ASKED])
            self.view.put_status(_packed(self.server.status(), STATUS_BYTES))
            header[H_STATUS_DONE] = asked

    def _estop(self, loop) -> None:
        header = self._header
        asked = int(header[H_ESTOP_ASKED])
        reason = bytes(self.view.reason[:int(header[H_REASON_LEN])]).decode("utf-8", "replace") or "control channel"
        self.server.apply_now({"cmd": "estop", "reason": reason})
        header[H_ESTOP_CYCLE] = loop.cycle
        header[H_ESTOP_DONE] = asked

    def _take(self, loop, k: int) -> None:
        words = self.view.words[k]
        seq = int(words[S_SEQ])
        words[S_TAKEN] = seq
        if time.monotonic_ns() > words[S_DEADLINE]:
            reply = {"ok": False, "error": "not applied: it reached the loop after its deadline"}
        else:
            reply = self._apply(loop, self.view.request_bytes(k))
        self.view.put_reply(k, _packed(reply, REPLY_BYTES))
        words[S_DONE] = seq
        self.applied += 1

    def _apply(self, loop, raw: bytes) -> dict:
        """The reply to one record: a request the operator process checked (structure, fields, proof)."""
        try:
            request = msgpack.unpackb(raw, raw=False)
            detail = self.server.apply_now(request)
            return {"ok": True, "applied_cycle": int(loop.cycle), "detail": detail}
        except Refused as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001  (the loop runs on; the client learns what went wrong)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def _latch_lost(self, loop) -> None:
        header = self._header
        if header[H_LOST] != 1:
            return
        header[H_LOST] = 2
        self.lost = (f"the operator process (pid {self.operator_pid}) is gone at cycle {loop.cycle}: the control "
                     "channel is closed, safe stop latched")
        print(f"rtctl: {self.lost}", file=sys.stderr, flush=True)
        loop.safety.estop(f"operator process lost (pid {self.operator_pid})", operator=True)
        tele = self.server.telemetry
        if tele is not None:
            tele.event("control", self.lost, loop.cycle, loop.cycle * loop.period, {"cmd": "estop"})

    # -- the link's thread -------------------------------------------------------------------
    def _watch(self) -> None:
        while True:
            try:
                data = self._link.recv(64)
            except OSError:
                data = b""
            if self._closing:
                return
            if not data:
                self._header[H_LOST] = 1
                with self._lock:
                    self._latch_lost(self.loop)
                return
            with self._lock:
                self._open_commands(self.loop)


def _packed(reply: dict, limit: int) -> bytes:
    data = msgpack.packb(reply, use_bin_type=True)
    if len(data) > limit:
        data = msgpack.packb({"ok": False, "error": f"the reply is longer than {limit} bytes"})
    return data
