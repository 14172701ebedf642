"""Bounded fuzz of the recordings ``rtctl identify`` (and ``rtctl plot`` / ``replay``) read: an MCAP file is input
from outside the process. A truncated or damaged file, a chunk that declares or inflates to more than it
should (a compression bomb), samples that are not objects of numbers, NaN / inf / huge values, metadata whose
joints are not a list of names: each is one line naming the file and what is wrong (the sample, the field,
the joint), read before anything inflates past the reader's bounds -- or a run of finite samples.
"""
from __future__ import annotations

import json
import random
import struct
import time

import numpy as np
import pytest
from mcap.writer import CompressionType, Writer

import rtctl
from rtctl.loops.identification import IdentificationError, read_run
from rtctl.model.urdf import load_urdf
from rtctl.telemetry import tools
from rtctl.telemetry.tools import CH_META, CH_SAMPLES, read_recording

N = 400
HOSTILE = [float("nan"), float("inf"), -float("inf"), 1e300, -1e300, "x", None, [], [[1.0]], {}, True, 10 ** 30,
           [0.1] * 3, [0.1] * 8, ["a"] * 7, [float("nan")] * 7, [1e300] * 7]


@pytest.fixture(scope="module")
def model():
    return load_urdf(rtctl.bundled_model_path("arm7"))


def rows(model, n=N):
    t = np.arange(n) * 2e-3
    q = 0.3 * np.sin(np.outer(t, np.arange(1, 8)))
    tau = 5.0 * np.cos(np.outer(t, np.arange(1, 8)))
    return [{"index": i, "t": float(t[i]), "cycle": i, "tripped": 0, "q": q[i].tolist(), "effort_cmd": tau[i].tolist()}
            for i in range(n)]


def write(path, samples, meta, compression=CompressionType.ZSTD, chunk_size=1 << 20):
    with open(path, "wb") as fh:
        w = Writer(fh, compression=compression, chunk_size=chunk_size)
        w.start(profile="", library="test")
        schema = w.register_schema(name="o", encoding="jsonschema", data=b"{}")
        ch_samples = w.register_channel(CH_SAMPLES, "json", schema)
        ch_meta = w.register_channel(CH_META, "json", schema)
        w.add_message(ch_meta, log_time=0, publish_time=0, data=json.dumps(meta).encode())
        for i, row in enumerate(samples):
            data = row if isinstance(row, bytes) else json.dumps(row).encode()
            w.add_message(ch_samples, log_time=i + 1, publish_time=i + 1, data=data)
        w.finish()
    return path


def meta_of(model):
    return {"schema": "rtctl.telemetry", "version": 1, "joints": list(model.joint_names)}


def refused_in_one_line_or_finite(path, model):
    """read_run either refuses in one line naming the file or returns finite, increasing samples."""
    start = time.monotonic()
    try:
        t, q, tau = read_run(path, model)
    except (IdentificationError, ValueError) as exc:
        message = str(exc)
        assert "\n" not in message and path.name in message, message
        assert time.monotonic() - start < 5.0
        return message
    assert np.all(np.isfinite(t)) and np.all(np.isfinite(q)) and np.all(np.isfinite(tau))
    assert np.all(np.diff(t) > 0) and q.shape == tau.shape == (len(t), 7)
    return None


def test_the_unharmed_recording_reads_the_same_with_every_compression(tmp_path, model):
    """The fuzz below has something to break: the clean file reads whole, zstd, lz4 or none alike."""
    want = rows(model)
    for compression in (CompressionType.ZSTD, CompressionType.LZ4, CompressionType.NONE):
        path = write(tmp_path / f"clean_{compression.name}.mcap", want, meta_of(model), compression, chunk_size=4096)
        t, q, tau = read_run(path, model)
        assert len(t) == N and np.array_equal(q[5], want[5]["q"]) and np.array_equal(tau[-1], want[-1]["effort_cmd"])


@pytest.mark.slow
def test_random_sample_and_metadata_mutations_are_refused_naming_the_sample_or_read_finite(tmp_path, model):
    rng = random.Random(7)
    refused = 0
    for k in range(60):
        samples, meta = rows(model), meta_of(model)
        if k % 6 == 5:
            meta["joints"] = rng.choice(HOSTILE + ["joint1", list(model.joint_names) * 2, {"joint1": 1}])
        else:
            for _ in range(rng.randint(1, 3)):
                row = samples[rng.randrange(N)]
                field = rng.choice(["t", "cycle", "tripped", "q", "effort_cmd", "index"])
                if rng.random() < 0.15:
                    del row[field]
                else:
                    row[field] = rng.choice(HOSTILE)
            if rng.random() < 0.1:
                samples[rng.randrange(N)] = rng.choice([[1, 2], 3, "row"])
        path = write(tmp_path / f"mutated_{k}.mcap", samples, meta)
        message = refused_in_one_line_or_finite(path, model)
        refused += message is not None
    assert refused >= 50          # nearly every mutation is one the reader must see


@pytest.mark.parametrize("value, named", [
    (float("nan"), "sample 123 has q (joint3) = nan"),
    (1e300, "sample 123 commands effort_cmd (joint3) = 1e+300, over 10 times the model's effort limit"),
    ("x", "sample 123 field 'q' = \"x\" is not a list of 7 numbers"),
    ([0.1] * 3, "sample 123 field 'q' = [0.1, 0.1, 0.1] is not a list of 7 numbers"),
])
def test_a_bad_value_is_named_by_sample_field_and_joint(tmp_path, model, value, named):
    samples = rows(model)
    field = "effort_cmd" if value == 1e300 else "q"
    if isinstance(value, float):
        samples[123][field][2] = value
    else:
        samples[123][field] = value
    path = write(tmp_path / "bad.mcap", samples, meta_of(model))
    assert named in refused_in_one_line_or_finite(path, model)


def test_truncated_and_byte_flipped_files_are_one_line(tmp_path, model):
    clean = write(tmp_path / "clean.mcap", rows(model), meta_of(model), CompressionType.NONE, chunk_size=8192)
    data = clean.read_bytes()
    rng = random.Random(3)
    refused = 0
    for k in range(40):
        damaged = bytearray(data)
        if k % 2:
            damaged = damaged[:rng.randrange(1, len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = tmp_path / f"damaged_{k}.mcap"
        path.write_bytes(bytes(damaged))
        refused += refused_in_one_line_or_finite(path, model) is not None
    assert refused >= 20


def chunk_offset(data: bytes) -> int:
    offset = 8
    while data[offset] != 0x06:
        offset += 9 + struct.unpack_from("<Q", data, offset + 1)[0]
    return offset


def test_a_chunk_declaring_a_huge_size_is_refused_before_it_is_inflated(tmp_path, model):
    path = write(tmp_path / "declared.mcap", rows(model), meta_of(model))
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, chunk_offset(data) + 9 + 16, 1 << 62)       # the chunk's uncompressed size
    path.write_bytes(bytes(data))
    message = refused_in_one_line_or_finite(path, model)
    assert "declares 4611686018427387904 bytes uncompressed, more than the 64 MiB" in message


def test_a_compression_bomb_chunk_is_refused_after_inflating_no_more_than_the_bound(tmp_path, model, monkeypatch):
    """A 1 MiB chunk whose zstd data is followed by a frame of 80 MiB of zeros (80 kB on disk): refused once
    64 MiB are out, naming the chunk, not inflated whole."""
    import zstandard

    bomb = zstandard.ZstdCompressor(level=1).compress(bytes(80 << 20))
    real = zstandard.compress

    class Bomb:
        @staticmethod
        def compress(data):
            return real(data) + bomb

    monkeypatch.setattr("mcap.writer.zstandard", Bomb)
    path = write(tmp_path / "bomb.mcap", rows(model), meta_of(model))
    monkeypatch.undo()
    assert path.stat().st_size < 400_000
    message = refused_in_one_line_or_finite(path, model)
    assert "inflates to or more 67108865 bytes (damaged, or a compression bomb)" in message


def test_messages_past_the_recording_bound_are_refused(tmp_path, model, monkeypatch):
    """Many chunks each within bounds add up: past MAX_RECORDING_BYTES the reader stops (bound made small
    here; it is 1 GiB)."""
    path = write(tmp_path / "long.mcap", rows(model), meta_of(model), chunk_size=4096)
    monkeypatch.setattr(tools, "MAX_RECORDING_BYTES", 50_000)
    with pytest.raises(ValueError, match=r"long.mcap: the recording's messages inflate to more than 0 MiB"):
        read_recording(str(path), progress=False)


def test_rtctl_identify_on_a_hostile_recording_is_one_line(tmp_path, model, capsys):
    from rtctl.cli import main

    samples = rows(model)
    samples[7] = [1, 2, 3]
    path = write(tmp_path / "hostile.mcap", samples, meta_of(model))
    assert main(["identify", str(path), "--model", "arm7", "--out", str(tmp_path / "x.urdf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "hostile.mcap: telemetry sample 7 is a JSON list, not an object" in err, err
    assert not (tmp_path / "x.urdf").exists()


@pytest.mark.filterwarnings("error::RuntimeWarning")        # numpy's overflow warnings are more lines
@pytest.mark.parametrize("armature, message", [
    (["1e300"], "the fit overflowed (torques up to"),
    (["0.05", "0.05"], "--armature: give one value or 7 (one per joint of model 'arm7'), got 2"),
])
@pytest.mark.slow
def test_rtctl_identify_with_an_armature_that_cannot_be_fitted_is_one_line_and_writes_nothing(tmp_path, model, capsys,
                                                                                              armature, message):
    """--armature 1e300 wrote a URDF of 1e-21 kg links and a report of inf / nan; two values for seven joints was
    numpy's broadcasting text."""
    from rtctl.cli import main

    path = write(tmp_path / "run.mcap", rows(model, n=1500), meta_of(model))
    out = tmp_path / "x.urdf"
    assert main(["identify", str(path), "--model", "arm7", "--out", str(out), "--armature", *armature]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert not out.exists()


@pytest.mark.parametrize("command, needs", [("plot", "plot needs the field(s) ['period', 'latency', 'overruns'"),
                                            ("replay", "replay needs the field(s) ['index']")])
def test_plot_and_replay_of_a_recording_lacking_their_fields_are_one_line(tmp_path, model, capsys, command, needs):
    """A recording of another writer (only some of the schema's fields): was KeyError: 'q_d' / 'index'."""
    from rtctl.cli import main

    samples = [{k: v for k, v in row.items() if k != "index"} for row in rows(model)]
    path = write(tmp_path / "partial.mcap", samples, meta_of(model))
    argv = (["plot", str(path), "--out", str(tmp_path / "p.png"), "--no-progress"] if command == "plot"
            else ["replay", str(path), "--endpoint", "tcp://127.0.0.1:0"])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"partial.mcap: {needs}" in err, err
