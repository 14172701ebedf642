"""The operator process's side: the control channel's ROUTER, served here and never in the loop's process.

Started by :class:`rtctl.operator.process.OperatorProcess` with one end of a private socket pair (its file
descriptor in ``argv``) and the shared mapping of :mod:`rtctl.operator.inbox`. Every request is read, decoded,
structure-checked and authenticated here (:class:`~rtctl.operator.channel.RouterChannel`,
:class:`~rtctl.operator.handshake.Sessions`), ``hello`` is answered here; what passed goes to the loop:

* ``estop``: its reason (checked here) into the mapping and the header's e-stop count up; the loop applies it at
  its next cycle boundary, and if it has not within :data:`~rtctl.operator.inbox.ESTOP_WAKE` s (between runs,
  stalled) a byte on the socket pair wakes the loop process's link thread, which applies it. Asked again while
  one is unapplied, nothing more is queued. The reply names the cycle it was applied at.
* ``status``: answered from the loop's latest answer when it is younger than :data:`STATUS_MAX_AGE`; otherwise
  one query goes to the loop (a header count, woken as an e-stop is), and every status request arriving
  meanwhile waits for the same answer (a flood of status requests costs the loop at most one answer per
  :data:`STATUS_MAX_AGE`).
* a change (the token proved): its fields re-encoded as msgpack into the next free slot, refused at once when
  the :data:`~rtctl.operator.inbox.SLOTS` are all waiting.

End of file on the socket pair (the loop's process closed it or died) ends this process.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from multiprocessing.connection import Connection

import msgpack

from ..telemetry.child import receive_spec
from .channel import Pending, RouterChannel
from .inbox import (ESTOP_WAKE, H_ESTOP_ASKED, H_ESTOP_CYCLE, H_ESTOP_DONE, H_READ, H_REASON_LEN,
                               H_STATUS_ASKED, H_STATUS_DONE, H_WRITTEN, REASON_BYTES, REQUEST_BYTES, S_DEADLINE,
                               S_DONE, S_SEQ, S_TAKEN, SLOTS, SharedInbox)
from .requests import HELLO, Refused

STATUS_MAX_AGE = 0.02    # s: a status reply this young is served again without asking the loop
TAKEN_GRACE = 0.05       # s after a deadline before a record the loop has not taken is declared not applied


class Record(Pending):
    __slots__ = ("kind", "slot", "woke", "started")

    def __init__(self, request, kind: str):
        super().__init__(request)
        self.kind, self.slot, self.woke, self.started = kind, -1, False, time.monotonic()


class OperatorServer(RouterChannel):
    """The control channel over the shared inbox ``view`` (:class:`~rtctl.operator.inbox.SharedInbox`);
    ``link``: the socket pair's end that wakes the loop's process for an e-stop it has not taken."""

    def __init__(self, view: SharedInbox, link: socket.socket, *, apply_timeout: float = 1.0, **channel):
        super().__init__(**channel)
        self.view, self.link = view, link
        self.apply_timeout = float(apply_timeout)
        self._status = (-1.0, None)          # (when, reply) of the loop's latest status answer
        self._status_seq = 0                 # the status query whose answer self._status holds

    def handle(self, request, deferred: bool = False):
        cmd, request, rid = self.admit(request)
        if cmd == HELLO:
            reply = {"ok": True, **self._sessions.hello(request)}
        elif cmd == "status" and time.monotonic() - self._status[0] < STATUS_MAX_AGE:
            reply = dict(self._status[1])
        else:
            if cmd == "estop":
                record = self._estop(request)
            elif cmd == "status":
                record = self._ask_status()
            else:
                record = self._enqueue(cmd, request)
            record.rid = rid
            if deferred:
                return record
            return self._wait(record)
        if rid is not None:
            reply["id"] = rid
        return reply

    def _wait(self, record: Record) -> dict:
        while True:
            self._collect([record])
            if record.done.is_set() or time.monotonic() >= record.deadline:
                reply = self._outcome(record)
                if reply is not None:
                    if record.rid is not None:
                        reply["id"] = record.rid
                    return reply
            time.sleep(2e-4)

    def _estop(self, request) -> Record:
        reason = request.get("reason", "control channel")
        if not isinstance(reason, str) or len(reason) > 200:
            raise Refused("reason: expected a string of at most 200 characters")
        header = self.view.header
        record = Record({"cmd": "estop", "reason": reason}, "estop")
        record.deadline = time.monotonic() + self.apply_timeout
        if header[H_ESTOP_ASKED] == header[H_ESTOP_DONE]:   # none unapplied: ask; else this one is that one
            data = reason.encode()[:REASON_BYTES]
            self.view.reason[:len(data)] = memoryview(data)
            header[H_REASON_LEN] = len(data)
            header[H_ESTOP_ASKED] += 1
        record.seq = int(header[H_ESTOP_ASKED])
        return record

    def _ask_status(self) -> Record:
        header = self.view.header
        record = Record({"cmd": "status"}, "status")
        record.deadline = time.monotonic() + self.apply_timeout
        if header[H_STATUS_ASKED] == header[H_STATUS_DONE]:   # none in flight: ask; else wait for that one
            header[H_STATUS_ASKED] += 1
        record.seq = int(header[H_STATUS_ASKED])
        return record

    def _enqueue(self, cmd: str, request: dict) -> Record:
        header = self.view.header
        written = int(header[H_WRITTEN])
        if written - int(header[H_READ]) >= SLOTS:
            raise Refused(f"{cmd}: {SLOTS} requests are already waiting for the loop; try again")
        clean = {"cmd": cmd, **{k: v for k, v in request.items() if k not in ("cmd", "id")}}
        data = msgpack.packb(clean, use_bin_type=True)
        if len(data) > REQUEST_BYTES:
            raise Refused(f"{cmd}: longer than {REQUEST_BYTES} bytes once checked")
        record = Record(clean, "change")
        record.seq, record.slot = written + 1, written % SLOTS
        record.deadline = time.monotonic() + self.apply_timeout
        words = self.view.words[record.slot]
        words[S_SEQ] = record.seq
        words[S_DEADLINE] = time.monotonic_ns() + int(self.apply_timeout * 1e9)
        self.view.put_request(record.slot, data)
        header[H_WRITTEN] = written + 1                     # published last: the loop may take it from now on
        return record

    def _collect(self, waiting: list) -> None:
        header = self.view.header
        now = time.monotonic()
        for record in waiting:
            if record.done.is_set():
                continue
            if record.kind == "change":
                if self.view.words[record.slot][S_DONE] == record.seq:
                    record.reply = msgpack.unpackb(self.view.reply_bytes(record.slot), raw=False)
                    record.done.set()
                continue
            estop = record.kind == "estop"
            if header[H_ESTOP_DONE if estop else H_STATUS_DONE] >= record.seq:
                if estop:
                    record.reply = {"ok": True, "applied_cycle": int(header[H_ESTOP_CYCLE]),
                                    "detail": f"e-stop: {record.request['reason']}"}
                else:
                    if self._status[0] < now - STATUS_MAX_AGE or self._status_seq != record.seq:
                        self._status = (now, msgpack.unpackb(self.view.status_bytes(), raw=False))
                        self._status_seq = record.seq
                    record.reply = dict(self._status[1])
                record.done.set()
            elif not record.woke and now - record.started > ESTOP_WAKE:
                record.woke = True
                self._wake()

    def _wake(self) -> None:
        try:
            self.link.send(b"e", socket.MSG_DONTWAIT)
        except OSError:      # full (the loop's process is not reading: a byte is already waiting) or gone
            pass

    def _outcome(self, record: Record):
        if record.done.is_set():
            if record.reply.get("ok"):
                self.accepted += 1
            else:
                self.refused += 1
            return dict(record.reply)
        if record.kind == "change" and (self.view.words[record.slot][S_TAKEN] == record.seq
                                        or time.monotonic() < record.deadline + TAKEN_GRACE):
            return None                                    # being applied, or may yet be: wait for its reply
        self.refused += 1
        what = {"estop": "asked for; the loop's process applies it when it next can", "change": "not applied",
                "status": "no answer"}[record.kind]
        return {"ok": False, "error": f"{record.request['cmd']}: {what}: the loop reached no cycle boundary "
                                      f"within {self.apply_timeout:g} s (is it running?)"}


def serve(conn: Connection, link: socket.socket) -> int:
    import mmap

    spec = receive_spec(conn)
    if spec is None:
        return 0
    try:
        try:
            shared = mmap.mmap(spec["shared"], 0)
        finally:
            os.close(spec["shared"])
        server = OperatorServer(SharedInbox(shared), link, **spec["settings"]).start()
    except (RuntimeError, ValueError, OSError) as exc:
        conn.send({"error": str(exc.__cause__ or exc)})
        return 1
    conn.send({"endpoint": server.endpoint, "pid": os.getpid()})
    conn.close()
    while True:            # the loop's process never sends on the link: only its end of file comes
        try:
            if not link.recv(64):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    server.close()
    return 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    link = socket.socket(fileno=int(args[0]))
    return serve(Connection(os.dup(link.fileno())), link)
