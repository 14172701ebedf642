"""``rtctl record`` leaves a file every MCAP reader opens however it stops; ``rtctl recover`` closes one cut short.

* The command (a process) stopped by SIGTERM 0.5 s (before its first chunk is closed) and 5 s after its file
  holds the MCAP header, by SIGHUP and by SIGINT: the ``mcap`` package's reader opens the file with CRC checks
  (summary and footer present, also read as a stream to its footer), its messages per channel are what the
  command reported, and its samples are the published ones, value for value.
* While it records, the file on disk, recovered, already holds every sample but those of the last
  FLUSH_PERIOD (plus one receive wait and a margin): what a SIGKILL can cost.
* A full disk -- a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored so the write fails with EFBIG) and, as root,
  a 2 MiB tmpfs (ENOSPC): one line on stderr, exit 1, and the file, opened with CRC checks, holds as many
  samples as the line says: more than none, fewer than received, each the published one.
* ``recover`` of a complete recording cut in each kind of place (after the header, in a chunk, between a chunk
  and its message indexes, among them, in the summary) and of one with a damaged chunk: the result opens with
  CRC checks and holds exactly the messages of the chunks before the cut or the damage, byte for byte.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.stream_reader import StreamReader

from rtctl.cli import main
from rtctl.telemetry.jsonvalues import dumps
from rtctl.telemetry.recording import FLUSH_PERIOD, McapRecording
from rtctl.telemetry.recover import recover
from rtctl.telemetry.schema import JOINT_FIELDS, SCALAR_FIELDS
from rtctl.telemetry.tools import CH_EVENT, CH_META, CH_SAMPLES, read_recording
from telemetry_helpers import SyntheticPublisher

REPORT = re.compile(r"rtctl record: (\d+) samples .*, (\d+) metadata, (\d+) events -> .*; stopped by (SIG\w+)")
FULL_LINE = re.compile(r"rtctl record: \S+: (the disk is full|the file size limit is reached) \(.+\); the recording "
                       r"was closed at its last complete chunk(?:, without a summary \(no room for it\))?: (\d+) of the "
                       r"(\d+) samples received are in it$")   # the summary is written when the disk has room for it


def start_record(path, endpoint, preexec_fn=None):
    return subprocess.Popen([sys.executable, "-m", "rtctl.cli", "record", str(path), "--endpoint", endpoint,
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn)


def wait_header(proc, path, timeout=120.0):
    """The time the recorder's file first holds the MCAP magic and header (the recording has begun)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.stat().st_size > 16:
            return time.monotonic()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError(f"rtctl record wrote no header within {timeout} s")


def read_checked(path, summary: bool = True) -> dict:
    """{topic: [(log time, data)]} read through the summary with every CRC checked; the statistics agree and
    the file also reads as a stream, CRCs checked, to its footer. ``summary`` False: a file closed without one
    (a disk too full for it), read as a stream alone."""
    out = {}
    if summary:
        with open(path, "rb") as fh:
            reader = make_reader(fh, validate_crcs=True)
            found = reader.get_summary()
            assert found is not None and found.statistics is not None
            for _schema, channel, message in reader.iter_messages(log_time_order=False):
                out.setdefault(channel.topic, []).append((message.log_time, message.data))
            counts = {found.channels[c].topic: n for c, n in found.statistics.channel_message_counts.items() if n}
            assert counts == {topic: len(v) for topic, v in out.items()}
    with open(path, "rb") as fh:
        records = list(StreamReader(fh, validate_crcs=True).records)
    assert type(records[-1]).__name__ == "Footer"
    if not summary:
        topics = {r.id: r.topic for r in records if type(r).__name__ == "Channel"}
        for r in records:
            if type(r).__name__ == "Message":
                out.setdefault(topics[r.channel_id], []).append((r.log_time, r.data))
    return out


def assert_published(path, pub: SyntheticPublisher):
    """The recording's samples are consecutive and equal, field by field, to what ``pub`` sent."""
    s = read_recording(str(path), progress=False)["samples"]
    index = s["index"]
    assert np.array_equal(index, np.arange(index[0], index[0] + len(index)))
    rows = pub.rows(int(index[0]), len(index))
    for name in (*SCALAR_FIELDS, *JOINT_FIELDS):
        if name != "stamp":
            expected = rows[:, pub.layout.slices[name]]
            assert np.array_equal(s[name].reshape(len(index), -1), expected, equal_nan=True), name


def stop_after(path, pub, signum, after, snapshot_at=None):
    proc = start_record(path, pub.endpoint)
    live = None
    try:
        ready = wait_header(proc, path)
        if snapshot_at is not None:
            time.sleep(max(0.0, ready + snapshot_at - time.monotonic()))
            copied_at = time.time()
            shutil.copyfile(path, str(path) + ".live")
            live = (copied_at, recover(str(path) + ".live"))
        time.sleep(max(0.0, ready + after - time.monotonic()))
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err, live


@pytest.mark.parametrize("signum, after", [(signal.SIGTERM, 0.5), (signal.SIGTERM, 5.0), (signal.SIGHUP, 0.5),
                                           (signal.SIGINT, 0.5)],
                         ids=["SIGTERM-0.5s", "SIGTERM-5s", "SIGHUP-0.5s", "SIGINT-0.5s"])
@pytest.mark.slow
def test_a_stop_signal_closes_the_recording(tmp_path, signum, after):
    pub = SyntheticPublisher(rate=100.0, batch=2).start()     # ~150 kB/s: the 1 MiB chunk size is never reached
    path = tmp_path / "run.mcap"
    try:
        code, out, err, live = stop_after(path, pub, signum, after, snapshot_at=3.0 if after > 3.0 else None)
    finally:
        pub.close()
    match = REPORT.search(out)
    assert match, (code, out, err)
    samples, metas, events = (int(g) for g in match.groups()[:3])
    assert match.group(4) == signal.Signals(signum).name and code == 128 + signum     # rtctl.rt.signals
    got = read_checked(path)
    assert [len(got.get(t, [])) for t in (CH_SAMPLES, CH_META, CH_EVENT)] == [samples, metas, events]
    if samples:
        assert_published(path, pub)
    if live is not None:
        # the file as it was on disk 3 s in holds every sample but the last FLUSH_PERIOD's (+ a 0.1 s receive
        # wait, + 0.5 s for the recorder to take what the publisher stamped)
        copied_at, found = live
        assert found["messages"].get(CH_SAMPLES, 0) > 0, found
        last = read_recording(str(path) + ".live", progress=False)["samples"]["stamp"].max()
        assert last >= copied_at - (FLUSH_PERIOD + 0.1 + 0.5), (copied_at - last, found)
        assert samples >= found["messages"][CH_SAMPLES] + 150     # and the stop 2 s later kept what came since


def fsize_limit(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.fixture(params=["file-size-limit", "full-tmpfs"])
def small_disk(request, tmp_path):
    if request.param == "file-size-limit":
        yield tmp_path / "run.mcap", fsize_limit(1_500_000)
        return
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tmpfs needs root and mount(8); the file size limit case stands for it")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True,
                             text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt / "run.mcap", None
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.slow
def test_a_full_disk_stops_with_one_line_and_leaves_what_was_written_readable(small_disk):
    path, limit = small_disk
    pub = SyntheticPublisher(rate=2000.0, batch=20).start()     # ~1.5 MB/s after compression: full in seconds
    proc = start_record(path, pub.endpoint, preexec_fn=limit)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        pub.close()
        if proc.poll() is None:
            proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and out == "", (proc.returncode, out, err)
    match = FULL_LINE.match(lines[0])
    assert match, lines[0]
    kept, received = int(match.group(2)), int(match.group(3))
    assert 0 < kept < received
    assert len(read_checked(path, summary="without a summary" not in lines[0])[CH_SAMPLES]) == kept
    assert_published(path, pub)


# -- rtctl recover -------------------------------------------------------------------------------------------
def complete_recording(path, chunks=5, per_chunk=400):
    """A recording of ``chunks`` chunks closed by time (McapRecording.tick), metadata among the samples."""
    rec = McapRecording(str(path))
    pub = SyntheticPublisher(rate=1000.0)
    t0, clock = 1_700_000_000 * 10 ** 9, time.monotonic()
    i = 0
    for k in range(chunks):
        for _ in range(per_chunk):
            row = pub.rows(i, 1)[0]
            sample = {"index": i, **{n: row[pub.layout.slices[n]].tolist() for n in JOINT_FIELDS},
                      **{n: float(row[pub.layout.slices[n].start]) for n in SCALAR_FIELDS}}
            rec.add(CH_SAMPLES, t0 + i * 10 ** 6, dumps(sample))
            if i % 150 == 0:
                rec.add(CH_META, t0 + i * 10 ** 6, dumps({"version": 1, "joints": pub.joints}))
            i += 1
        rec.tick(clock + (k + 1) * FLUSH_PERIOD)
    pub.close()
    rec.close()
    with open(path, "rb") as fh:
        reader = make_reader(fh)
        chunk_indexes = sorted(reader.get_summary().chunk_indexes, key=lambda c: c.chunk_start_offset)
    assert len(chunk_indexes) == chunks
    return chunk_indexes


def messages_until(path, end_time):
    return {topic: [m for m in msgs if m[0] <= end_time] for topic, msgs in read_checked(path).items()}


@pytest.mark.parametrize("where", ["after the header", "in a chunk", "before its message indexes",
                                   "among its message indexes", "in the summary"])
@pytest.mark.slow
def test_recover_keeps_exactly_the_whole_chunks(tmp_path, where):
    full = tmp_path / "full.mcap"
    chunks = complete_recording(full)
    c = chunks[2]
    cut, whole = {"after the header": (chunks[0].chunk_start_offset, 0),
                  "in a chunk": (c.chunk_start_offset + c.chunk_length // 2, 2),
                  "before its message indexes": (c.chunk_start_offset + c.chunk_length, 3),
                  "among its message indexes": (c.chunk_start_offset + c.chunk_length + 11, 3),
                  "in the summary": (os.path.getsize(full) - 200, 5)}[where]
    cut_file, fixed = tmp_path / "cut.mcap", tmp_path / "fixed.mcap"
    cut_file.write_bytes(full.read_bytes()[:cut])
    with open(cut_file, "rb") as fh, pytest.raises(Exception):
        list(make_reader(fh, validate_crcs=True).iter_messages())     # the reference reader refuses it
    result = recover(str(cut_file), str(fixed))
    expected = messages_until(full, chunks[whole - 1].message_end_time if whole else -1)
    expected = {topic: msgs for topic, msgs in expected.items() if msgs}
    assert read_checked(fixed) == expected
    assert not result["complete"] and result["chunks"] == whole
    assert result["messages"] == {topic: len(msgs) for topic, msgs in expected.items()}
    assert recover(str(fixed))["complete"]
    recover(str(cut_file))                                           # in place: the same file
    assert cut_file.read_bytes() == fixed.read_bytes()


def test_recover_stops_at_a_damaged_chunk_and_the_command_says_what_it_kept(tmp_path, capsys):
    full = tmp_path / "full.mcap"
    chunks = complete_recording(full)
    data = bytearray(full.read_bytes()[:os.path.getsize(full) - 200])
    data[chunks[3].chunk_start_offset + chunks[3].chunk_length - 40] ^= 0xFF   # inside chunk 3's zstd data
    damaged = tmp_path / "damaged.mcap"
    damaged.write_bytes(bytes(data))
    assert main(["recover", str(damaged), "--out", str(tmp_path / "fixed.mcap")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"rtctl recover: {tmp_path / 'fixed.mcap'}: 3 complete chunks kept"), line
    expected = {t: m for t, m in messages_until(full, chunks[2].message_end_time).items() if m}
    assert read_checked(tmp_path / "fixed.mcap") == expected
    assert main(["recover", str(full), "--in-place"]) == 0                   # a complete file is left alone
    assert "is complete" in capsys.readouterr().out
    assert main(["recover", str(damaged), "--out", str(damaged)]) == 2        # never over its own input
    assert "is the recording itself" in capsys.readouterr().err
