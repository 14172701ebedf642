"""The mailbox of an emulated slave on SM0 (mailbox out, master -> slave) and SM1 (mailbox in, slave ->
master) (ETG.1000.4 the mailbox sync managers and their status; ETG.1000.6 5.6 the mailbox header, counter,
repeat and error reply).

A sync manager in mailbox mode (control bits 0-1 = 10b) holds one buffer: a master's write that reaches its
last byte fills SM0 (status bit 3); a write to a full SM0 is not taken (no working counter); a read of SM1 is
counted only while it is full, and empties it once its last byte is read. The slave takes the mailbox in
PRE-OP, SAFE-OP and OP (in INIT its application holds the mailbox sync managers off: nothing is counted).

Mailbox header, 6 bytes: the length of the data that follow, the station address (0 from the master), channel
and priority, then the type (bits 0-3: 0 error reply, 3 CoE) and the counter (bits 4-6, 1..7; 0 none). A
message with the previous message's counter is a repeated write and is dropped. Each reply carries the slave's
own counter, 1..7 in turn. A message the slave cannot take is answered with a mailbox error reply (type 0,
service 1, a detail code: 0x02 protocol not supported, 0x05 invalid header, 0x06 too short, 0x08 invalid
size). The repeat request: the master toggles bit 1 of SM1's activate register (0x080E) and the slave puts
its last reply in SM1 again, acknowledging in bit 1 of SM1's PDI control (0x080F).
"""
from __future__ import annotations

import struct

MAILBOX_HEADER = struct.Struct("<HHBB")
TYPE_ERROR, TYPE_COE = 0x00, 0x03
ERROR_UNSUPPORTED_PROTOCOL, ERROR_INVALID_HEADER, ERROR_TOO_SHORT, ERROR_INVALID_SIZE = 0x02, 0x05, 0x06, 0x08
SM_STATUS_FULL = 0x08
REPEAT = 0x02
_SM_REGISTERS, _SM_SIZE = 0x0800, 8
OUT, IN = 0, 1


def mailbox_message(kind: int, counter: int, data: bytes, address: int = 0) -> bytes:
    return MAILBOX_HEADER.pack(len(data), address, 0, kind | (counter & 0x07) << 4) + data


class Mailbox:
    """SM0 / SM1 of one ESC: ``memory`` its memory, ``protocols`` a map from mailbox type to a handler
    ``request(data) -> [reply data, ...]`` (the CoE services)."""

    def __init__(self, memory: bytearray, protocols: dict):
        self.memory = memory
        self.protocols = protocols
        self.active = False
        self.queue: list[bytes] = []
        self.last_reply = b""
        self.last_counter = None
        self.counter = 0
        self.counters = {"received": 0, "repeated": 0, "errors": 0, "repeat_requests": 0}
        self.full = [False, False]

    def _registers(self, n: int) -> tuple[int, int, bool]:
        """Start and length of sync manager ``n`` if it is in mailbox mode (else length 0), and whether it
        is enabled."""
        start, length, control, _status, activate = struct.unpack_from("<HHBBB", self.memory,
                                                                       _SM_REGISTERS + n * _SM_SIZE)
        return start, length if control & 0x03 == 0x02 else 0, bool(activate & 0x01)

    def area(self, n: int) -> tuple[int, int]:
        start, length, enabled = self._registers(n)
        return (start, length) if self.active and enabled else (0, 0)

    def set_active(self, active: bool) -> None:
        """The application holds the mailbox on (PRE-OP and above) or off (INIT: emptied)."""
        if active != self.active:
            self.active = active
            self.queue.clear()
            self.full = [False, False]
            self.last_counter = None
            self._publish()

    # -- the ESC's side: which accesses count and what they do -------------------------------------------------

    def refuses(self, ado: int, n: int, write: bool) -> bool:
        """True if this access touches a mailbox sync manager that does not take it (no working counter):
        a write to a full SM0, a read of an empty SM1, either while the mailbox is off."""
        for sm in (OUT, IN):
            start, length, enabled = self._registers(sm)
            if not (length and ado < start + length and start < ado + n):
                continue
            if not (self.active and enabled) or (write != (sm == OUT)):
                return True
            if self.full[OUT] if sm == OUT else not self.full[IN]:
                return True
        return False

    def written(self, ado: int, end: int) -> None:
        start, length = self.area(OUT)
        if length and ado < start + length <= end:
            self.full[OUT] = True
            message = bytes(self.memory[start:start + length])
            self.full[OUT] = False                   # the application takes it at once
            self._receive(message)
        if ado <= _SM_REGISTERS + _SM_SIZE + 6 < end:
            self._repeat_request()
        self._publish()

    def read_done(self, ado: int, end: int) -> None:
        start, length = self.area(IN)
        if length and self.full[IN] and ado < start + length <= end:
            self.full[IN] = False
            self._next()
            self._publish()

    # -- messages -------------------------------------------------------------------------------------------

    def _receive(self, message: bytes) -> None:
        self.counters["received"] += 1
        size, _address, _channel, kind_counter = MAILBOX_HEADER.unpack_from(message)
        kind, counter = kind_counter & 0x0F, kind_counter >> 4 & 0x07
        if counter and counter == self.last_counter:
            self.counters["repeated"] += 1
            return
        self.last_counter = counter
        if size > len(message) - MAILBOX_HEADER.size:
            return self._error(ERROR_INVALID_SIZE)
        handler = self.protocols.get(kind)
        if handler is None:
            return self._error(ERROR_UNSUPPORTED_PROTOCOL)
        for reply in handler.request(message[MAILBOX_HEADER.size:MAILBOX_HEADER.size + size]):
            self.send(kind, reply)

    def send(self, kind: int, data: bytes) -> None:
        """Queue a message to the master (a reply, or an emergency)."""
        self.counter = self.counter % 7 + 1
        self.queue.append(mailbox_message(kind, self.counter, data))
        if not self.full[IN]:
            self._next()
        self._publish()

    def _error(self, detail: int) -> None:
        self.counters["errors"] += 1
        self.send(TYPE_ERROR, struct.pack("<HH", 0x01, detail))

    def _next(self) -> None:
        start, length = self.area(IN)
        if self.queue and length:
            self._place(self.queue.pop(0), start, length)

    def _place(self, message: bytes, start: int, length: int) -> None:
        self.memory[start:start + length] = message[:length].ljust(length, b"\0")
        self.last_reply = message
        self.full[IN] = True

    def _repeat_request(self) -> None:
        base = _SM_REGISTERS + _SM_SIZE
        requested = self.memory[base + 6] & REPEAT
        if requested == self.memory[base + 7] & REPEAT:
            return
        self.counters["repeat_requests"] += 1
        start, length = self.area(IN)
        if self.last_reply and length:
            self._place(self.last_reply, start, length)
        self.memory[base + 7] = (self.memory[base + 7] & ~REPEAT) | requested

    def _publish(self) -> None:
        for sm in (OUT, IN):
            status = _SM_REGISTERS + sm * _SM_SIZE + 5
            self.memory[status] = (self.memory[status] & ~SM_STATUS_FULL) | (SM_STATUS_FULL if self.full[sm] else 0)

    def summary(self) -> dict:
        return dict(self.counters, queued=len(self.queue))
