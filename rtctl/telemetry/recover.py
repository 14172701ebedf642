"""Close an MCAP recording that was cut short: killed, or stopped by a full disk (``rtctl recover``).

An MCAP file (the MCAP specification, "Records" and "Summary Section") is the magic, a Header, the data
section -- here Chunk records, each followed by one MessageIndex record per channel it holds -- then DataEnd,
the summary section (schemas, channels, statistics, chunk indexes, summary offsets), the Footer and the magic.
A file cut short ends somewhere in its data section: readers that need the footer (``mcap``'s reader,
Foxglove) refuse it, though every chunk written before the cut is intact.

:func:`recover` walks the records (opcode uint8, length uint64, body), keeps each chunk whose record is
complete and whose uncompressed CRC matches, cuts after the last one kept, writes that chunk's message indexes
anew (the cut may have fallen among them), then DataEnd, a summary section built from what the chunks hold and
the footer: what the Go ``mcap recover`` does, without rewriting the chunks (so a file on a full disk can be
repaired in place). On a disk so full that even the summary does not fit, the file is cut after its last
complete chunk and closed with DataEnd and a footer with no summary (a valid MCAP file that readers read from
the start); if even that does not fit, it is left cut there, for a later ``rtctl recover`` with space.
"""
from __future__ import annotations

import dataclasses
import io
import os
import struct
import zlib

from mcap.data_stream import ReadDataStream
from mcap.opcode import Opcode
from mcap.records import (Channel, Chunk, ChunkIndex, DataEnd, Footer, MessageIndex, RecordBuilder, Schema,
                          Statistics, SummaryOffset)

MAGIC = b"\x89MCAP0\r\n"
_RECORD = struct.Struct("<BQ")          # opcode, length
_MESSAGE_HEAD = struct.Struct("<HIQ")    # channel id, sequence, log time


class RecoveryError(ValueError):
    """A file that is not an MCAP recording, or that could not be closed."""


@dataclasses.dataclass
class _Group:
    """One chunk as found: where it is, its header fields, its messages' (log time, offset) per channel."""
    start: int
    length: int
    chunk: Chunk                # its header fields (the data left out)
    compressed_size: int
    messages: dict
    index_offsets: dict = dataclasses.field(default_factory=dict)
    index_end: int = 0

    @property
    def end(self) -> int:
        return self.start + self.length

    def indexes_complete(self) -> bool:
        return set(self.index_offsets) == set(self.messages)


@dataclasses.dataclass
class Scan:
    """What :func:`scan` found: whether the file is complete, where the good part ends, what it holds."""
    complete: bool
    header_end: int
    groups: list
    schemas: dict
    channels: dict

    def counts(self) -> dict:
        """Messages per channel id in the chunks kept."""
        out: dict = {}
        for g in self.groups:
            for cid, entries in g.messages.items():
                out[cid] = out.get(cid, 0) + len(entries)
        return out

    def topic_counts(self) -> dict:
        out: dict = {}
        for cid, n in self.counts().items():
            topic = self.channels[cid].topic if cid in self.channels else f"channel {cid}"
            out[topic] = out.get(topic, 0) + n
        return out


def _chunk_contents(body: bytes, schemas: dict, channels: dict):
    """The messages of a chunk record's body, per channel: [(log time, offset in the uncompressed data)];
    schemas and channels defined in it are added. None when the chunk is damaged (CRC, framing)."""
    from .tools import inflate_chunk

    try:
        chunk = Chunk.read(ReadDataStream(io.BytesIO(body)))
        data = inflate_chunk("chunk", chunk)
        if chunk.uncompressed_crc and zlib.crc32(data) != chunk.uncompressed_crc:
            return None, None
        return chunk, _records(data, schemas, channels)
    except Exception:  # noqa: BLE001  (a chunk that does not decode, whatever the reason, is where the file ends)
        return None, None


def _records(data: bytes, schemas: dict, channels: dict) -> dict:
    """The messages of a chunk's uncompressed records per channel: [(log time, offset)]; its schemas and
    channels are added to ``schemas`` and ``channels``."""
    messages: dict = {}
    pos = 0
    while pos < len(data):
        op, length = _RECORD.unpack_from(data, pos)
        inner = data[pos + _RECORD.size:pos + _RECORD.size + length]
        if len(inner) != length:
            raise RecoveryError("a record runs past the end of its chunk")
        if op == Opcode.MESSAGE and length >= _MESSAGE_HEAD.size:
            cid, _seq, log_time = _MESSAGE_HEAD.unpack_from(inner)
            messages.setdefault(cid, []).append((log_time, pos))
        elif op == Opcode.SCHEMA:
            schema = Schema.read(ReadDataStream(io.BytesIO(inner)))
            schemas[schema.id] = schema
        elif op == Opcode.CHANNEL:
            channel = Channel.read(ReadDataStream(io.BytesIO(inner)))
            channels[channel.id] = channel
        pos += _RECORD.size + length
    return messages


def _ends_with_footer(fh, size: int) -> bool:
    """Whether the file ends with a Footer record and the magic (a file whose close was completed)."""
    footer = _RECORD.size + 20
    if size < len(MAGIC) * 2 + footer:
        return False
    fh.seek(size - len(MAGIC) - footer)
    tail = fh.read(footer + len(MAGIC))
    return tail[-len(MAGIC):] == MAGIC and _RECORD.unpack_from(tail) == (Opcode.FOOTER, 20)


def scan(fh, size: int) -> Scan:
    """Walk the records of an MCAP file up to its first incomplete or damaged one."""
    fh.seek(0)
    if fh.read(len(MAGIC)) != MAGIC:
        raise RecoveryError("not an MCAP file (no MCAP magic at its start)")
    schemas, channels, groups = {}, {}, []
    pos, header_end, complete = len(MAGIC), None, False
    while pos + _RECORD.size <= size:
        op, length = _RECORD.unpack(fh.read(_RECORD.size))
        if length > size - pos - _RECORD.size:
            break
        body = fh.read(length)
        if op == Opcode.HEADER and header_end is None:
            header_end = pos + _RECORD.size + length
        elif header_end is None:
            break
        elif op == Opcode.CHUNK:
            chunk, messages = _chunk_contents(body, schemas, channels)
            if chunk is None:
                break
            group = _Group(pos, _RECORD.size + length, dataclasses.replace(chunk, data=b""), len(chunk.data), messages)
            group.index_end = group.end
            groups.append(group)
        elif op == Opcode.MESSAGE_INDEX and groups and groups[-1].index_end == pos:
            cid = struct.unpack_from("<H", body)[0] if length >= 2 else None
            groups[-1].index_offsets[cid] = pos
            groups[-1].index_end = pos + _RECORD.size + length
        elif op == Opcode.SCHEMA and not groups:
            schema = Schema.read(ReadDataStream(io.BytesIO(body)))
            schemas[schema.id] = schema
        elif op == Opcode.CHANNEL and not groups:
            channel = Channel.read(ReadDataStream(io.BytesIO(body)))
            channels[channel.id] = channel
        elif op == Opcode.DATA_END:
            complete = _ends_with_footer(fh, size)
            break
        else:           # a record rtctl record never writes in its data section: the good part ends before it
            break
        pos += _RECORD.size + length
    if header_end is None:
        raise RecoveryError("the file ends inside its MCAP header")
    for k, g in enumerate(groups[:-1]):      # a chunk missing message indexes ends the good part there
        if not g.indexes_complete():
            del groups[k + 1:]
            break
    return Scan(complete, header_end, groups, schemas, channels)


def _tail(scan: Scan, summary: bool) -> tuple[int, bytes]:
    """(where the good part ends, the bytes to write there): the last chunk's message indexes, DataEnd and,
    with ``summary``, the summary section; then the footer and the magic."""
    groups = scan.groups
    cut = groups[-1].end if groups else scan.header_end
    out = RecordBuilder()
    if groups and summary:
        last = groups[-1]
        last.index_offsets = {}
        for cid in sorted(last.messages):
            last.index_offsets[cid] = cut + out.count
            MessageIndex(cid, sorted(last.messages[cid])).write(out)
        last.index_end = cut + out.count
    DataEnd(0).write(out)
    start = cut + out.count
    if not summary:
        Footer(summary_start=0, summary_offset_start=0, summary_crc=0).write(out)
        return cut, out.end() + MAGIC
    section, offsets = RecordBuilder(), []

    def group(opcode, records):
        begin = section.count
        for record in records:
            record.write(section)
        offsets.append(SummaryOffset(group_opcode=opcode, group_start=start + begin,
                                     group_length=section.count - begin))

    counts = scan.counts()
    times = [t for g in groups for entries in g.messages.values() for t, _ in entries]
    group(Opcode.SCHEMA, scan.schemas.values())
    group(Opcode.CHANNEL, scan.channels.values())
    group(Opcode.STATISTICS, [Statistics(
        attachment_count=0, channel_count=len(scan.channels), channel_message_counts=counts,
        chunk_count=len(groups), message_count=sum(counts.values()), message_end_time=max(times, default=0),
        message_start_time=min(times, default=0), metadata_count=0, schema_count=len(scan.schemas))])
    group(Opcode.CHUNK_INDEX, [ChunkIndex(
        message_start_time=g.chunk.message_start_time, message_end_time=g.chunk.message_end_time,
        chunk_start_offset=g.start, chunk_length=g.length, message_index_offsets=dict(g.index_offsets),
        message_index_length=g.index_end - g.end, compression=g.chunk.compression,
        compressed_size=g.compressed_size, uncompressed_size=g.chunk.uncompressed_size) for g in groups])
    offset_start = start + section.count
    for offset in offsets:
        offset.write(section)
    data = section.end()
    crc = zlib.crc32(struct.pack("<BQQQ", Opcode.FOOTER, 20, start, offset_start), zlib.crc32(data))
    footer = RecordBuilder()
    Footer(summary_start=start, summary_offset_start=offset_start, summary_crc=crc).write(footer)
    return cut, out.end() + data + footer.end() + MAGIC


def recover(path: str, out: str | None = None) -> dict:
    """Close the recording ``path`` after its last complete chunk: in place, or into a new file ``out``.

    Returns ``{"complete": bool (the file needed nothing), "messages": {topic: count}, "chunks": n,
    "summary": bool (False: closed without a summary, the disk being full), "bytes_dropped": n}``. Raises
    :class:`RecoveryError` (one line) for a file that is not MCAP, and OSError when even the footer cannot
    be written (the file is then cut after its last complete chunk)."""
    if out is not None and os.path.exists(out) and os.path.samefile(path, out):
        raise RecoveryError(f"{out}: is the recording itself; recover into a new file, or in place")
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        try:
            found = scan(fh, size)
        except RecoveryError as exc:
            raise RecoveryError(f"{path}: {exc}") from None
    result = {"complete": found.complete, "messages": found.topic_counts(), "chunks": len(found.groups),
              "summary": True, "bytes_dropped": 0}
    if found.complete:
        return result
    cut, tail = _tail(found, summary=True)
    result["bytes_dropped"] = size - cut
    if out is not None:
        with open(path, "rb") as src, open(out, "wb") as dst:
            _copy(src, dst, cut)
            dst.write(tail)
        return result
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, cut)            # frees what the partial chunk held: room for the summary
        try:
            _write_at(fd, cut, tail)
            return result
        except OSError:
            pass
        result["summary"] = False
        cut, tail = _tail(found, summary=False)
        os.ftruncate(fd, cut)
        try:
            _write_at(fd, cut, tail)
        except OSError:
            os.ftruncate(fd, cut)
            raise
        return result
    finally:
        os.close(fd)


def _write_at(fd: int, offset: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _copy(src, dst, n: int) -> None:
    left = n
    while left > 0:
        block = src.read(min(left, 1 << 20))
        if not block:
            raise RecoveryError("the file changed while it was being recovered")
        dst.write(block)
        left -= len(block)
