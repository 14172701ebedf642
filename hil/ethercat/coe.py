"""CANopen over EtherCAT: the SDO server and emergency messages of an emulated slave (ETG.1000.6 5.6.2 SDO,
5.6.4 emergency; the SDO protocol of CiA 301 7.2.4.3 carried in the mailbox).

A CoE message (the mailbox data after the 6-byte mailbox header) starts with the CoE header: bits 0-8 a number
(0 for SDO), bits 12-15 the service (1 emergency, 2 SDO request, 3 SDO response). An SDO request is the CiA 301
command byte, index, sub-index and 4 data bytes, at least 10 bytes in all:

* download initiate (command 0x21 + flags): expedited (bit 1, with bit 0 and bits 2-3 the 4 - n bytes used)
  or normal (the complete size, then as much data as the mailbox holds); bit 4 complete access (5.6.2.1.1:
  sub-index 0 or 1 and all that follow); answered 0x60. The rest of a normal download in download segments
  (command 0x00 + toggle bit 4, bits 1-3 unused bytes of a 7-byte segment, bit 0 the last), answered 0x20 +
  toggle.
* upload initiate (0x40, bit 4 complete access): up to 4 bytes expedited (0x43 + unused << 2), more normal
  (0x41, the complete size and what fits); the rest in upload segments (request 0x60 + toggle, answered 0x00 +
  toggle + unused << 1 + last): a segment's mailbox length is 3 + its data, at least 10 (data padded to 7).
* abort (0x80, index, sub-index, the abort code; CoE service 2 whichever side sends it, 5.6.2.7); a toggle
  bit not alternated 0x05030000, a command not known 0x05040001, a segment without a transfer under way
  0x05040001.

An emergency (5.6.4): CoE service 1, the error code, the error register 0x1001 and 5 manufacturer bytes.
SDO Information (service 8) is :mod:`.sdo_info`.
"""
from __future__ import annotations

import struct

from .dictionary import LENGTH_MISMATCH, ObjectDictionary, SdoAbort

SERVICE_EMERGENCY, SERVICE_SDO_REQUEST, SERVICE_SDO_RESPONSE = 1, 2, 3
TOGGLE_NOT_ALTERNATED, COMMAND_UNKNOWN = 0x05030000, 0x05040001
SDO_HEADER = struct.Struct("<HBHB")        # CoE header, command, index, sub-index
SDO_MINIMUM = 10                           # CoE header, command, index, sub-index, 4 data bytes
SEGMENT_HEADER = 3                         # CoE header, command
COMPLETE_ACCESS = 0x10


def coe_header(service: int) -> bytes:
    return struct.pack("<H", service << 12)


def abort(index: int, subindex: int, code: int) -> bytes:
    """Abort SDO transfer: a CoE SDO *request* (service 2) in both directions (ETG.1000.6 5.6.2.7)."""
    return SDO_HEADER.pack(SERVICE_SDO_REQUEST << 12, 0x80, index, subindex) + struct.pack("<I", code)


class CoeServices:
    """The CoE services of one slave, by the CoE header's service: ``services`` maps it to a handler
    ``request(message) -> a message, a list of them or None``. :meth:`request` answers a mailbox's CoE data
    with a list of messages (none for a service not offered)."""

    def __init__(self, services: dict):
        self.services = services

    def request(self, message: bytes) -> list[bytes]:
        if len(message) < 2:
            return []
        handler = self.services.get(struct.unpack_from("<H", message)[0] >> 12)
        reply = handler.request(message) if handler else None
        if reply is None:
            return []
        return reply if isinstance(reply, list) else [reply]


class SdoServer:
    """One slave's SDO server on ``dictionary``; ``mailbox_data`` the bytes a mailbox carries after its
    header. :meth:`request` takes a CoE message and returns the response."""

    def __init__(self, dictionary: ObjectDictionary, mailbox_data: int):
        self.od = dictionary
        self.mailbox_data = mailbox_data
        self._upload = None            # (index, sub-index, remaining bytes, toggle expected)
        self._download = None          # (index, sub-index, complete access, size, bytes so far, toggle expected)
        self.transfers = {"uploads": 0, "downloads": 0, "aborts": 0}

    def request(self, message: bytes) -> bytes | None:
        """The response to an SDO request, None for a message that takes none (an abort from the master)."""
        if len(message) < SEGMENT_HEADER:
            return None
        command = message[2]
        index, subindex = (struct.unpack_from("<HB", message, 3) if len(message) >= 6 else (0, 0))
        specifier = command >> 5
        try:
            if specifier == 1:
                return self._download_initiate(command, index, subindex, message)
            if specifier == 0:
                return self._download_segment(command, message)
            if specifier == 2:
                return self._upload_initiate(command, index, subindex)
            if specifier == 3:
                return self._upload_segment(command)
            if specifier == 4:
                self._upload = self._download = None
                return None
            raise SdoAbort(COMMAND_UNKNOWN)
        except SdoAbort as refused:
            self.transfers["aborts"] += 1
            where = self._download or self._upload or (index, subindex)
            self._upload = self._download = None
            return abort(where[0], where[1], refused.code)

    def _response(self, command: int, index: int, subindex: int, data: bytes = b"\0\0\0\0") -> bytes:
        return SDO_HEADER.pack(SERVICE_SDO_RESPONSE << 12, command, index, subindex) + data

    # -- download (master -> slave) -------------------------------------------------------------------------

    def _download_initiate(self, command, index, subindex, message):
        if len(message) < SDO_MINIMUM:
            raise SdoAbort(COMMAND_UNKNOWN)
        self._upload = self._download = None
        complete = bool(command & COMPLETE_ACCESS)
        if command & 0x02:                                       # expedited
            size = 4 - (command >> 2 & 0x03) if command & 0x01 else 4
            self._store(index, subindex, complete, message[6:6 + size])
        else:
            size = struct.unpack_from("<I", message, 6)[0]
            data = message[SDO_MINIMUM:]
            if len(data) >= size:
                self._store(index, subindex, complete, data[:size])
            else:
                self._download = (index, subindex, complete, size, bytes(data), 0)
        return self._response(0x60, index, subindex)

    def _download_segment(self, command, message):
        if self._download is None:
            raise SdoAbort(COMMAND_UNKNOWN)
        index, subindex, complete, size, so_far, toggle = self._download
        if command & 0x10 != toggle:
            raise SdoAbort(TOGGLE_NOT_ALTERNATED)
        data = message[SEGMENT_HEADER:]
        if len(data) == 7:
            data = data[:7 - (command >> 1 & 0x07)]
        so_far += data
        if command & 0x01:
            self._download = None
            if len(so_far) != size:
                raise SdoAbort(LENGTH_MISMATCH)
            self._store(index, subindex, complete, so_far)
        else:
            self._download = (index, subindex, complete, size, so_far, toggle ^ 0x10)
        return coe_header(SERVICE_SDO_RESPONSE) + bytes([0x20 | toggle]) + bytes(7)

    def _store(self, index, subindex, complete, data):
        if complete:
            self.od.write_complete(index, subindex, bytes(data))
        else:
            self.od.write(index, subindex, bytes(data))
        self.transfers["downloads"] += 1

    # -- upload (slave -> master) ---------------------------------------------------------------------------

    def _upload_initiate(self, command, index, subindex):
        self._upload = self._download = None
        complete = bool(command & COMPLETE_ACCESS)
        data = self.od.read_complete(index, subindex) if complete else self.od.read(index, subindex)
        self.transfers["uploads"] += 1
        if len(data) <= 4 and not complete:
            return self._response(0x43 | (4 - len(data)) << 2, index, subindex, data.ljust(4, b"\0"))
        room = self.mailbox_data - SDO_MINIMUM - 4
        first, rest = data[:room], data[room:]
        if rest:
            self._upload = (index, subindex, rest, 0)
        return self._response(0x41, index, subindex, struct.pack("<I", len(data)) + first)

    def _upload_segment(self, command):
        if self._upload is None:
            raise SdoAbort(COMMAND_UNKNOWN)
        index, subindex, rest, toggle = self._upload
        if command & 0x10 != toggle:
            raise SdoAbort(TOGGLE_NOT_ALTERNATED)
        room = self.mailbox_data - SEGMENT_HEADER
        chunk, rest = rest[:room], rest[room:]
        last = 0 if rest else 0x01
        unused = 7 - len(chunk) if len(chunk) < 7 else 0
        self._upload = (index, subindex, rest, toggle ^ 0x10) if rest else None
        return coe_header(SERVICE_SDO_RESPONSE) + bytes([toggle | unused << 1 | last]) + chunk.ljust(7, b"\0")
