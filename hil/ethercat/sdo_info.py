"""SDO Information: a master browsing a slave's object dictionary (ETG.1000.6 5.6.3).

A CoE message of service 8; after the CoE header the SDO Information header: the opcode (bits 0-6; bit 7 set
while more fragments follow), a reserved byte and the number of fragments still to come (16 bits). Opcodes:

* 1 / 2 get OD list: the list type (0 the number of objects in each list, 1 all objects, 2 RxPDO mappable,
  3 TxPDO mappable, 4 stored for device replacement, 5 startup parameters), answered with the list type and
  the indices, in as many fragments as the mailbox needs;
* 3 / 4 get object description: the index, answered with the index, data type, maximum sub-index, object
  code and the name;
* 5 / 6 get entry description: the index, sub-index and the value information wanted, answered with the
  index, sub-index, value information given (none beyond the fixed part here), data type, bit length,
  object access (bits 0-2 read in PRE-OP / SAFE-OP / OP, bits 3-5 write, bit 6 RxPDO and bit 7 TxPDO
  mappable) and the name;
* 7 the SDO Information error request: an abort code (0x06020000 no object, 0x06090011 no sub-index,
  0x05040001 an opcode not known).
"""
from __future__ import annotations

import struct

from .dictionary import ObjectDictionary, SdoAbort

SERVICE_SDO_INFORMATION = 8
GET_OD_LIST, GET_OBJECT_DESCRIPTION, GET_ENTRY_DESCRIPTION = 1, 3, 5
INFORMATION_ERROR, MORE_FRAGMENTS = 7, 0x80
INFO_HEADER = struct.Struct("<HBBH")      # CoE header, opcode, reserved, fragments left
COMMAND_UNKNOWN = 0x05040001
_ACCESS = {"ro": 0x07, "rw": 0x3F, "rw-preop": 0x0F}
READ_WRITE_MAPPABLE, READ_ONLY_MAPPABLE = 0x40, 0x80


class SdoInformation:
    """The SDO Information service of ``dictionary``; ``mailbox_data`` the bytes a mailbox carries after its
    header. :meth:`request` returns the messages that answer one."""

    def __init__(self, dictionary: ObjectDictionary, mailbox_data: int):
        self.od = dictionary
        self.mailbox_data = mailbox_data

    def request(self, message: bytes) -> list[bytes]:
        if len(message) < INFO_HEADER.size + 2:
            return [self._message(INFORMATION_ERROR, struct.pack("<I", COMMAND_UNKNOWN))]
        opcode = message[2] & 0x7F
        body = message[INFO_HEADER.size:]
        try:
            if opcode == GET_OD_LIST:
                return self._od_list(struct.unpack_from("<H", body)[0])
            if opcode == GET_OBJECT_DESCRIPTION:
                return [self._object_description(struct.unpack_from("<H", body)[0])]
            if opcode == GET_ENTRY_DESCRIPTION and len(body) >= 4:
                index, subindex, value_info = struct.unpack_from("<HBB", body)
                return [self._entry_description(index, subindex, value_info)]
            raise SdoAbort(COMMAND_UNKNOWN)
        except SdoAbort as refused:
            return [self._message(INFORMATION_ERROR, struct.pack("<I", refused.code))]

    def _message(self, opcode: int, data: bytes, fragments_left: int = 0) -> bytes:
        flag = MORE_FRAGMENTS if fragments_left else 0
        return INFO_HEADER.pack(SERVICE_SDO_INFORMATION << 12, opcode | flag, 0, fragments_left) + data

    def _lists(self) -> list[list[int]]:
        """All objects, RxPDO mappable, TxPDO mappable, backup, settings: the indices in order."""
        everything = sorted(self.od.objects)
        rx = [i for i in everything if self._mapping_bits(i) & READ_WRITE_MAPPABLE]
        tx = [i for i in everything if self._mapping_bits(i) & READ_ONLY_MAPPABLE]
        return [everything, rx, tx, [], []]

    def _od_list(self, list_type: int) -> list[bytes]:
        lists = self._lists()
        if list_type == 0:
            return [self._message(GET_OD_LIST + 1, struct.pack("<6H", 0, *(len(x) for x in lists)))]
        if not 1 <= list_type <= 5:
            raise SdoAbort(COMMAND_UNKNOWN)
        words = [list_type] + lists[list_type - 1]
        room = (self.mailbox_data - INFO_HEADER.size) // 2
        chunks = [words[k:k + room] for k in range(0, len(words), room)]
        return [self._message(GET_OD_LIST + 1, struct.pack(f"<{len(c)}H", *c), len(chunks) - 1 - n)
                for n, c in enumerate(chunks)]

    def _object_description(self, index: int) -> bytes:
        obj = self.od.objects.get(index)
        if obj is None:
            raise SdoAbort(0x06020000)
        data_type = obj.entries[1 if len(obj.entries) > 1 else 0].data_type
        max_sub = max(obj.entries)
        room = self.mailbox_data - INFO_HEADER.size - 6
        return self._message(GET_OBJECT_DESCRIPTION + 1, struct.pack("<HHBB", index, data_type, max_sub, obj.code)
                             + obj.name.encode("ascii")[:room])

    def _entry_description(self, index: int, subindex: int, value_info: int) -> bytes:
        e = self.od.entry(index, subindex)
        access = _ACCESS[e.access] | self._entry_mapping_bits(e)
        name = self.od.objects[index].name if subindex == 0 or len(self.od.objects[index].entries) == 1 else \
            f"SubIndex {subindex:03d}"
        room = self.mailbox_data - INFO_HEADER.size - 10
        return self._message(GET_ENTRY_DESCRIPTION + 1, struct.pack("<HBBHHH", index, subindex, value_info & 0x07,
                                                                    e.data_type, e.bits, access)
                             + name.encode("ascii")[:room])

    def _mapping_bits(self, index: int) -> int:
        bits = 0
        for e in self.od.objects[index].entries.values():
            bits |= self._entry_mapping_bits(e)
        return bits

    @staticmethod
    def _entry_mapping_bits(e) -> int:
        if not e.mappable:
            return 0
        return READ_ONLY_MAPPABLE if e.access == "ro" else READ_WRITE_MAPPABLE
