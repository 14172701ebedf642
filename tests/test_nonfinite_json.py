"""One rule for NaN and infinities in every JSON output: valid JSON, the schema says it, rtctl's readers restore it.

* :func:`dumps` never writes the non-JSON literals ``NaN`` / ``Infinity`` (a strict parser reads every text);
  :func:`loads` gives back the same values, NaN, +inf and -inf each where it was, bit for bit; a finite object
  is written exactly as :func:`json.dumps` writes it; a ``nonfinite`` list that does not match its message
  is one ValueError.
* The template encoders (PlotJuggler's flat objects, the Foxglove/MCAP samples) follow the same rule: strict
  JSON, and restored they equal the reference objects value for value.
* ``rtctl record`` of a stream with NaN, +inf and -inf samples: every MCAP message is strict JSON, and
  :func:`read_recording` (replay, plot and identify read through it) restores the published values exactly;
  a recording of an earlier rtctl (the literals) still reads.
* The samples' JSON Schema gives each field one type name (Foxglove's JSON Schema reader refuses a type list
  such as ``["number", "null"]``, and so the whole channel) and says what a non-finite value becomes.
* The dashboard's frames are strict JSON; the page's ``nonfinite.js`` (run by node where it is installed)
  restores the same values as Python does.
"""
import asyncio
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rtctl.operator.dashboard import STATIC_DIR, Dashboard
from rtctl.telemetry.jsonvalues import NONFINITE, dumps, loads
from rtctl.telemetry.recording import record
from rtctl.telemetry.schema import JOINT_FIELDS, SCALAR_FIELDS, JsonRows, Layout, plotjuggler_objects, \
    sample_json_schema
from rtctl.telemetry.tools import CH_SAMPLES, read_recording
from telemetry_helpers import SyntheticPublisher


def strict_loads(text):
    def refuse(literal):
        raise AssertionError(f"non-JSON literal {literal} in {text[:80]!r}")
    return json.loads(text, parse_constant=refuse)


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN (and only to NaN), infinities by sign, ints and floats apart."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_dumps_writes_json_and_loads_restores_each_kind_of_non_finite_value():
    obj = {"t": math.nan, "q": [0.5, math.inf, -math.inf], "a/b~c": {"d": [[1.0, math.nan]]}, "n": 3, "s": "NaN"}
    text = dumps(obj)
    parsed = strict_loads(text)
    assert parsed["t"] is None and parsed["q"] == [0.5, None, None] and parsed["s"] == "NaN"
    assert parsed[NONFINITE] == [{"at": "/t", "value": "NaN"}, {"at": "/q/1", "value": "Infinity"},
                                 {"at": "/q/2", "value": "-Infinity"}, {"at": "/a~1b~0c/d/0/1", "value": "NaN"}]
    assert same(loads(text), obj)
    finite = {"t": 0.1, "q": [1e-300, -2.5], "k": 7}
    assert dumps(finite) == json.dumps(finite)
    for bad in ('{"q": [1.0], "nonfinite": [{"at": "/q/0", "value": "NaN"}]}',      # not null there
                '{"q": [null], "nonfinite": [{"at": "/q/1", "value": "NaN"}]}',      # no such place
                '{"q": [null], "nonfinite": [{"at": "/q/0", "value": "nan"}]}'):     # not a spelling of the rule
        with pytest.raises(ValueError):
            loads(bad)


def odd_rows():
    """Rows of a 2-joint, 1-extra layout; row 1 holds NaN, +inf and -inf in scalar, joint, extra and integer
    columns."""
    layout = Layout(2, 1)
    rows = np.arange(2 * layout.width, dtype=float).reshape(2, layout.width) + 0.25
    for name in ("cycle", "overruns", "tripped", "fresh"):
        rows[:, layout.slices[name].start] = 1
    rows[1, layout.slices["latency"].start] = math.inf
    rows[1, layout.slices["q"].start + 1] = math.nan
    rows[1, layout.slices["effort"].start] = -math.inf
    rows[1, layout.slices["extra"].start] = math.nan
    rows[1, layout.slices["overruns"].start] = math.nan
    return layout, rows


def test_template_encoders_write_json_and_restore_to_the_reference_objects():
    layout, rows = odd_rows()
    joints, extra = ["a/b", "c~d"], ["e"]
    flat = [loads(t) for t in JsonRows(layout, joints, extra, style="plotjuggler").encode(rows)]
    assert all(strict_loads(t) for t in JsonRows(layout, joints, extra, style="plotjuggler").encode(rows))
    assert same(flat, plotjuggler_objects(layout, rows, joints, extra))
    texts = JsonRows(layout, joints, extra, style="sample").encode(rows, first=40)
    parsed = [strict_loads(t) for t in texts]
    assert NONFINITE not in parsed[0] and parsed[1]["q"][1] is None and parsed[1]["overruns"] is None
    sample = loads(texts[1])
    assert math.isnan(sample["q"][1]) and sample["latency"] == math.inf and sample["effort"][0] == -math.inf
    assert math.isnan(sample["extra"][0]) and math.isnan(sample["overruns"]) and sample["cycle"] == 1
    assert sample["q"][0] == rows[1, layout.slices["q"].start] and sample["index"] == 41


def nonfinite_at(layout):
    q, effort, latency = layout.slices["q"].start, layout.slices["effort"].start, layout.slices["latency"].start

    def values(i):
        return {q + 2: math.nan, effort: -math.inf, latency: math.inf} if i % 3 == 1 else {}
    return values


def test_a_recording_of_non_finite_samples_is_json_and_reads_back_exactly(tmp_path):
    pub = SyntheticPublisher(rate=1000.0, batch=10)
    pub.nonfinite = nonfinite_at(pub.layout)
    pub.start()
    path = tmp_path / "trip.mcap"
    try:
        result = record(pub.endpoint, str(path), samples=300, idle_timeout=10.0, progress=False)
    finally:
        pub.close()
    assert result["samples"] >= 300 and result["failed"] is None
    from mcap.reader import make_reader
    with open(path, "rb") as fh:
        texts = [m.data for _, c, m in make_reader(fh, validate_crcs=True).iter_messages() if c.topic == CH_SAMPLES]
    assert len(texts) == result["samples"] and all(strict_loads(t) for t in texts)
    assert sum(NONFINITE in strict_loads(t) for t in texts) >= 99
    s = read_recording(str(path), progress=False)["samples"]
    rows = pub.rows(int(s["index"][0]), len(s["index"]))
    for name in (*SCALAR_FIELDS, *JOINT_FIELDS):
        if name != "stamp":
            got, want = s[name].reshape(len(rows), -1), rows[:, pub.layout.slices[name]]
            assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.isnan(got), np.isnan(want)), name
    assert np.isneginf(s["effort"][:, 0]).sum() >= 99 and np.isposinf(s["latency"]).sum() >= 99


def test_a_recording_with_the_literals_of_earlier_versions_still_reads(tmp_path):
    from mcap.writer import Writer
    path = tmp_path / "old.mcap"
    row = {"index": 0, "t": 0.0, "cycle": 0, "latency": math.nan, "q": [math.inf, -math.inf]}
    with open(path, "wb") as fh:
        writer = Writer(fh)
        writer.start()
        schema = writer.register_schema("s", "jsonschema", sample_json_schema())
        channel = writer.register_channel(CH_SAMPLES, "json", schema)
        writer.add_message(channel, log_time=1, publish_time=1, data=json.dumps(row).encode())  # NaN literals
        writer.finish()
    s = read_recording(str(path), progress=False)["samples"]
    assert math.isnan(s["latency"][0]) and s["q"][0].tolist() == [math.inf, -math.inf]


def test_the_sample_schema_gives_one_type_name_per_field_and_says_what_non_finite_becomes():
    schema = json.loads(sample_json_schema())
    props = schema["properties"]
    for name in (*SCALAR_FIELDS, *JOINT_FIELDS, "extra"):
        field = props[name] if name in SCALAR_FIELDS else props[name]["items"]
        assert isinstance(field["type"], str) and field["type"] in ("number", "integer"), name
        assert "null where the value is not finite" in field["description"], name
    items = props[NONFINITE]["items"]
    assert props[NONFINITE]["type"] == "array" and items["type"] == "object"
    assert {k: v["type"] for k, v in items["properties"].items()} == {"at": "string", "value": "string"}
    assert items["properties"]["value"]["enum"] == ["NaN", "Infinity", "-Infinity"]


async def _frames(url, origin, wanted):
    from websockets.asyncio.client import connect
    texts = []
    async with connect(url, origin=origin) as ws:
        while len(texts) < wanted:
            text = await asyncio.wait_for(ws.recv(), 10)
            if '"type": "frame"' in text and NONFINITE in text:
                texts.append(text)
    return texts


def test_dashboard_frames_are_json_and_the_page_restores_what_python_does():
    pub = SyntheticPublisher(rate=500.0, batch=5)
    pub.nonfinite = nonfinite_at(pub.layout)
    pub.start()
    dash = Dashboard(pub.endpoint, None, port=0)
    try:
        dash.start()
        texts = asyncio.run(_frames(f"ws://127.0.0.1:{dash.port}/ws", f"http://127.0.0.1:{dash.port}", 3))
    finally:
        dash.stop()
        pub.close()
    for text in texts:
        frame = loads(text)
        assert strict_loads(text)["type"] == "frame"
        index = np.round(np.asarray(frame["t"]) * pub.rate).astype(int)
        rows = pub.rows(int(index[0]), int(index[-1] - index[0] + 1))[index - index[0]]
        for name in ("q", "error", "effort_cmd", "latency"):
            want = rows[:, pub.layout.slices[name]].reshape(len(index), -1)
            got = np.asarray(frame[name], dtype=float).reshape(len(index), -1)
            assert np.array_equal(got, want, equal_nan=True), name
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's nonfinite.js was not run")
    script = ("require(process.argv[1]); const m = RtctlJson.parse(require('fs').readFileSync(0, 'utf8'));"
              "const f = v => Number.isNaN(v) ? 'NaN' : v === Infinity ? 'Infinity' : v === -Infinity ? "
              "'-Infinity' : v; console.log(JSON.stringify({q: m.q.map(r => r.map(f)), latency: m.latency.map(f)}))")
    for text in texts:
        out = subprocess.run([node, "-e", script, str(Path(STATIC_DIR) / "nonfinite.js")], input=text,
                             capture_output=True, text=True, timeout=30, check=True).stdout
        js = json.loads(out, parse_constant=float)
        spelled = {k: [[float(v) for v in r] if isinstance(r, list) else float(r) for r in vals]
                   for k, vals in js.items()}
        frame = loads(text)
        assert same(spelled, {"q": frame["q"], "latency": frame["latency"]})
