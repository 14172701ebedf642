"""Foxglove's own client library against the live server: ``@foxglove/ws-protocol`` (Foxglove's reference
client, on Node.js) connects to rtctl's server, subscribes to every channel and decodes every message; the
protobuf ones (the 3D view's ``/tf``, ``/rtctl/scene``, ``/joint_states``) with ``.proto`` definitions generated
from ``@foxglove/schemas``, Foxglove's published schema definitions, not from what the server advertised.

Needs ``node`` and the packages of ``tests/node`` (``npm ci --prefix tests/node``, which CI runs): skipped,
saying so, without them."""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rtctl.telemetry.foxglove import CHANNEL_JOINTS, CHANNEL_SCENE, CHANNEL_TF
from rtctl.model.urdf import load_urdf
from rtctl.telemetry.schema import CHANNEL_DESCRIPTION, CHANNEL_EVENT, CHANNEL_META, CHANNEL_SAMPLES
from test_foxglove import start_loop_with_foxglove, stop

NODE_DIR = Path(__file__).parent / "node"
CLIENT = NODE_DIR / "foxglove_client.js"

if shutil.which("node") is None:
    pytest.skip("node is not installed: Foxglove's client library runs on Node.js", allow_module_level=True)
if not (NODE_DIR / "node_modules" / "@foxglove" / "ws-protocol").is_dir():
    pytest.skip("tests/node's packages are not installed (npm ci --prefix tests/node)", allow_module_level=True)


def test_foxglove_client_library_decodes_every_channel_with_the_published_schemas():
    loop, tel, sink, runner = start_loop_with_foxglove()
    try:
        done = subprocess.run(["node", str(CLIENT), sink.url, "3"], capture_output=True, text=True, timeout=60)
    finally:
        stop(loop, tel, runner)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and not [x for x in lines if x["kind"] == "error"], (done.stderr, lines[-3:])
    info = next(x for x in lines if x["kind"] == "serverInfo")
    assert info["name"] == "rtctl" and info["capabilities"] == []
    advertised = {x["topic"]: x for x in lines if x["kind"] == "advertise"}
    assert set(advertised) == {CHANNEL_SAMPLES, CHANNEL_META, CHANNEL_EVENT, CHANNEL_TF, CHANNEL_SCENE, CHANNEL_JOINTS,
                               CHANNEL_DESCRIPTION}
    assert {advertised[t]["schemaName"] for t in (CHANNEL_TF, CHANNEL_SCENE, CHANNEL_JOINTS)} == \
        {"foxglove.FrameTransforms", "foxglove.SceneUpdate", "foxglove.JointStates"}
    messages = [x for x in lines if x["kind"] == "message"]
    assert not [x for x in messages if x.get("error")], [x for x in messages if x.get("error")][:2]
    by_topic = {}
    for x in messages:
        by_topic.setdefault(x["topic"], []).append(x)
    model = loop.model
    # the 3D view: every body's frame, the robot's primitives, the joints by name
    tf = by_topic[CHANNEL_TF][-1]["message"]["transforms"]
    assert [t["child_frame_id"] for t in tf] == model.body_names
    assert all(abs(sum(t["rotation"][k] ** 2 for k in "xyzw") - 1.0) < 1e-12 for t in tf)
    scene = by_topic[CHANNEL_SCENE][0]["message"]["entities"]
    assert [e["frame_id"] for e in scene] == model.body_names and all(e["frame_locked"] for e in scene)
    joints = by_topic[CHANNEL_JOINTS]
    assert all([j["name"] for j in x["message"]["joints"]] == list(loop.controller.joint_names) for x in joints)
    # the URDF, for Foxglove's URDF layer: the model the run controls, body for body
    (description,) = by_topic[CHANNEL_DESCRIPTION]
    assert load_urdf(description["message"]["data"]).body_names == model.body_names
    # every message stamped: the protobuf ones' timestamp, the JSON ones' header.stamp, both the log time
    for x in joints + by_topic[CHANNEL_TF]:
        stamp = x["message"]["timestamp"] if x["topic"] == CHANNEL_JOINTS else x["message"]["transforms"][0]["timestamp"]
        assert int(x["logTime"]) == stamp["seconds"] * 10 ** 9 + stamp["nanos"]   # google.protobuf.Timestamp
    samples = by_topic[CHANNEL_SAMPLES]
    for x in samples:
        h = x["message"]["header"]["stamp"]
        assert int(x["logTime"]) == h["sec"] * 10 ** 9 + h["nsec"] == int(x["message"]["stamp"] * 1e9)
    assert by_topic[CHANNEL_META][-1]["message"]["header"]["stamp"]["sec"] > 0
    # the named joint positions are the samples' q, sample for sample
    q_by_stamp = {int(x["logTime"]): x["message"]["q"] for x in samples}
    common = [x for x in joints if int(x["logTime"]) in q_by_stamp]
    assert len(common) > 100
    for x in common:
        assert np.array_equal([j["position"] for j in x["message"]["joints"]], q_by_stamp[int(x["logTime"])])
