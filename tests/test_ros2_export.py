"""``rtctl export --ros2`` (rtctl.telemetry.ros2): a recording as a rosbag2, read back with rosbags' own reader.

Types, counts, stamps, joint names and every recorded value come back exactly; the TF tree composed from the bag
(its /tf and /tf_static, as a ROS client composes them) puts each link and sensor frame where Pinocchio's forward
kinematics of the original robot file puts it -- for a fixed arm, a free-flying quadruped and an Euler-angle
base; recordings without a description export with --robot; bad input is one line and writes nothing."""
from __future__ import annotations

import json
import random
import sys
import threading
import time
import tomllib

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import rtctl
from oracle import Pair
from rtctl.cli import main
from rtctl.config import DEMO_CONFIG, build, load_config, robot_of, validate
from rtctl.model import rpy_to_matrix
from rtctl.model.urdf import load_urdf
from rtctl.registry import robot_model
from rtctl.telemetry.description import Description, robot_description
from rtctl.telemetry.recording import McapRecording, record
from rtctl.telemetry.ros2 import export_ros2
from rtctl.telemetry.schema import stamp_ns
from rtctl.telemetry.tools import CH_DESCRIPTION, CH_META, CH_SAMPLES, read_recording
from telemetry_helpers import write_described_recording

rosbags = pytest.importorskip("rosbags")
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

STORE = get_typestore(Stores.ROS2_JAZZY)
WRIST_IMU = {"name": "wrist", "kind": "imu", "frame": "link7", "mount_xyz": [0.0, 0.0, 0.05],
             "mount_rpy": [0.3, -0.2, 0.1]}
WRIST_FT = {"name": "ft", "backend": "sim_force_torque", "kind": "force_torque", "frame": "link6",
            "mount_xyz": [0.01, 0.0, 0.02], "mount_rpy": [0.0, 0.0, 1.2]}
T0 = 1.7e9


def read_bag(path):
    """{topic: [(bag time ns, message)]} and {topic: type} of a bag, by rosbags' reader."""
    messages, types = {}, {}
    with Reader(path) as reader:
        for c in reader.connections:
            types[c.topic] = c.msgtype
        for c, ns, raw in reader.messages():
            messages.setdefault(c.topic, []).append((ns, STORE.deserialize_cdr(raw, c.msgtype)))
    return messages, types


def ns_of(header):
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def tf_tree(messages, k):
    """child -> (parent, rotation, translation) of the k-th /tf message and /tf_static."""
    tree = {}
    for msg in (messages["/tf_static"][0][1], messages["/tf"][k][1]):
        for tr in msg.transforms:
            r, t = tr.transform.rotation, tr.transform.translation
            tree[tr.child_frame_id] = (tr.header.frame_id, Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix(),
                                       np.array([t.x, t.y, t.z]))
    return tree


def in_world(tree, frame):
    """A frame's pose in ``world``, composed up the TF tree."""
    rot, pos = np.eye(3), np.zeros(3)
    while frame != "world":
        parent, r, t = tree[frame]
        rot, pos = r @ rot, r @ pos + t
        frame = parent
    return rot, pos


def floating_rows(model, n, rng, base_fields=7, source="state"):
    """Samples of a floating-base model: random joint positions and a random base pose, with the whole
    configuration as a run publishes it (state/q/k) or, as older recordings of a simulated run have it, the
    simulator's base (truth/q/k). Returns the joints, the rows, the extra fields and each row's base pose."""
    joints = model.joint_names[model.n_base_bodies:]
    rows, bases = [], []
    for i in range(n):
        base = rng.normal(size=base_fields)
        if base_fields == 7:
            base[3:] /= np.linalg.norm(base[3:])
        q = rng.uniform(-1.0, 1.0, len(joints))
        extra = np.concatenate([base, q]) if source == "state" else base
        rows.append({"index": i, "t": i * 1e-3, "stamp": T0 + i * 1e-3, "q": q.tolist(), "qd": (2 * q).tolist(),
                     "effort": (3 * q).tolist(), "extra": extra.tolist()})
        bases.append(base)
    return joints, rows, [f"{source}/q/{k}" for k in range(len(rows[0]["extra"]))], bases


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory):
    """A recording of the demo arm with a wrist IMU and a force-torque sensor, made by rtctl record from a live
    run, and its bag."""
    raw = tomllib.loads(DEMO_CONFIG.read_text())
    raw["loop"]["pace"] = False
    raw["sensors"] = [WRIST_IMU, WRIST_FT]
    raw["telemetry"] = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "publisher": "thread"}
    loop = build(validate(raw, "arm.toml"))
    tel, path = loop.telemetry, tmp_path_factory.mktemp("arm") / "run.mcap"
    result = {}

    recorder = threading.Thread(target=lambda: result.update(record(tel.endpoint, str(path), samples=600,
                                                                    idle_timeout=5.0, progress=False)))
    try:
        recorder.start()
        time.sleep(0.6)                     # PUB/SUB slow joiner: let the recorder subscribe
        loop.run(cycles=600)
        recorder.join(20)
    finally:
        tel.close()
    assert result["samples"] == 600 and result["description"] == 1
    bag = path.parent / "bag"
    res = export_ros2(path, bag, progress=False)
    return read_recording(str(path), progress=False), res, read_bag(bag), loop


@pytest.mark.slow
def test_the_bag_of_a_live_recording_holds_its_samples_exactly(arm_run):
    rec, res, (messages, types), _loop = arm_run
    s, meta = rec["samples"], rec["meta"]
    n = len(s["stamp"])
    assert types == {"/joint_states": "sensor_msgs/msg/JointState", "/tf": "tf2_msgs/msg/TFMessage",
                     "/tf_static": "tf2_msgs/msg/TFMessage", "/robot_description": "std_msgs/msg/String",
                     "/wrist/imu": "sensor_msgs/msg/Imu", "/ft/wrench": "geometry_msgs/msg/WrenchStamped"}
    slots = np.unique(np.floor(s["t"] * 100.0 + 1e-6))          # the 10 ms slots of control time (--tf-rate 100)
    assert {topic: len(m) for topic, m in messages.items()} == {
        "/joint_states": n, "/tf": len(slots), "/tf_static": 1, "/robot_description": 1, "/wrist/imu": n,
        "/ft/wrench": n} == res["messages"]
    stamps = [stamp_ns(x) for x in s["stamp"]]
    extra = {name: s["extra"][:, k] for k, name in enumerate(meta["extra"])}
    for k, (ns, js) in enumerate(messages["/joint_states"]):
        assert ns == ns_of(js.header) == stamps[k]
        assert js.name == meta["joints"]
        assert np.array_equal(js.position, s["q"][k]) and np.array_equal(js.velocity, s["qd"][k])
        assert np.array_equal(js.effort, s["effort"][k])
    for k, (ns, imu) in enumerate(messages["/wrist/imu"]):
        assert ns == ns_of(imu.header) == stamps[k] and imu.header.frame_id == "wrist_link"
        for axis in "xyz":
            assert getattr(imu.angular_velocity, axis) == extra[f"wrist/angular_rate/{axis}"][k]
            assert getattr(imu.linear_acceleration, axis) == extra[f"wrist/specific_force/{axis}"][k]
        assert [getattr(imu.orientation, a) for a in "xyzw"] == [extra[f"wrist/orientation/{a}"][k] for a in "xyzw"]
        assert imu.orientation_covariance[0] == 0.0           # the simulated IMU gives its orientation
    for k, (ns, w) in enumerate(messages["/ft/wrench"]):
        assert ns == stamps[k] and w.header.frame_id == "ft_link"
        for axis in "xyz":
            assert getattr(w.wrench.force, axis) == extra[f"ft/force/{axis}"][k]
            assert getattr(w.wrench.torque, axis) == extra[f"ft/torque/{axis}"][k]
    assert np.abs(s["extra"][:, meta["extra"].index("ft/force/z")]).max() > 0.1     # the arm did load its wrist
    assert messages["/robot_description"][0][1].data == rec["description"]["data"]
    assert res["sensors"] == {"/wrist/imu": "wrist_link", "/ft/wrench": "ft_link"} and res["notes"] == []


@pytest.mark.slow
def test_the_tf_tree_puts_each_link_and_sensor_where_pinocchio_does(arm_run):
    """At every /tf message, the frames composed up to world agree with Pinocchio's placements of the bundled
    URDF at the recorded q (the sensors: its link's placement times the config's mount)."""
    rec, _res, (messages, _types), loop = arm_run
    pair = Pair.from_urdf(rtctl.bundled_model_path("arm7"))
    stamps = [stamp_ns(x) for x in rec["samples"]["stamp"]]
    checked = 0
    for k, (ns, _msg) in enumerate(messages["/tf"]):
        q = rec["samples"]["q"][stamps.index(ns)]
        tree = tf_tree(messages, k)
        for link in [*loop.model.body_names, "tool"]:
            rot, pos = in_world(tree, link)
            want_rot, want_pos = pair.frame_placement(q, link)
            np.testing.assert_allclose(rot, want_rot, rtol=0, atol=1e-12)
            np.testing.assert_allclose(pos, want_pos, rtol=0, atol=1e-12)
        for sensor in (WRIST_IMU, WRIST_FT):
            r_link, p_link = pair.frame_placement(q, sensor["frame"])
            rot, pos = in_world(tree, f"{sensor['name']}_link")
            np.testing.assert_allclose(rot, r_link @ rpy_to_matrix(sensor["mount_rpy"]), rtol=0, atol=1e-12)
            np.testing.assert_allclose(pos, p_link + r_link @ np.asarray(sensor["mount_xyz"]), rtol=0, atol=1e-12)
        checked += 1
    assert checked == len(messages["/tf"]) >= 50


@pytest.mark.parametrize("tf_rate, expected, source", [(0.0, 250, "state"), (100.0, 25, "state"),
                                                      (40.0, 10, "truth")])
def test_a_free_flying_base_is_placed_under_world_and_its_feet_where_pinocchio_puts_them(tmp_path, tf_rate,
                                                                                       expected, source):
    path = rtctl.bundled_model_path("quadruped12")
    model = load_urdf(path, "free_flyer")
    joints, rows, extra, bases = floating_rows(model, 250, np.random.default_rng(5), source=source)
    write_described_recording(tmp_path / "run.mcap", robot_description(model), joints, rows, extra)
    res = export_ros2(tmp_path / "run.mcap", tmp_path / "bag", tf_rate=tf_rate, progress=False)
    messages, _ = read_bag(tmp_path / "bag")
    assert len(messages["/tf"]) == expected and f"({source}/q)" in res["base"]
    pair = Pair.from_urdf(path, "free_flyer")
    by_stamp = {stamp_ns(r["stamp"]): (r, base) for r, base in zip(rows, bases)}
    for k, (ns, _msg) in enumerate(messages["/tf"]):
        row, base = by_stamp[ns]
        q = np.concatenate([base, row["q"]])
        tree = tf_tree(messages, k)
        assert tree["trunk"][0] == "world"
        np.testing.assert_allclose(tree["trunk"][2], base[:3], rtol=0, atol=1e-15)
        for frame in ["trunk", "FL_shank", "HR_hip", *(f.name for f in model.frames)]:
            rot, pos = in_world(tree, frame)
            want_rot, want_pos = pair.frame_placement(q, frame)
            np.testing.assert_allclose(rot, want_rot, rtol=0, atol=1e-12)
            np.testing.assert_allclose(pos, want_pos, rtol=0, atol=1e-12)


def test_an_euler_angle_base_is_its_chain_of_joints_placed_as_pinocchio_places_it(tmp_path):
    model = robot_model("spatial_quadruped")
    joints, rows, extra, bases = floating_rows(model, 40, np.random.default_rng(9), base_fields=6)
    write_described_recording(tmp_path / "run.mcap", robot_description(model), joints, rows, extra)
    export_ros2(tmp_path / "run.mcap", tmp_path / "bag", tf_rate=0.0, progress=False)
    messages, _ = read_bag(tmp_path / "bag")
    pair = Pair.from_model(model)
    for k, (row, base) in enumerate(zip(rows, bases)):
        q = np.concatenate([base, row["q"]])
        tree = tf_tree(messages, k)
        for frame in ["trunk", *(f.name for f in model.frames)]:
            rot, pos = in_world(tree, frame)
            want_rot, want_pos = pair.frame_placement(q, frame)
            np.testing.assert_allclose(rot, want_rot, rtol=0, atol=1e-12)
            np.testing.assert_allclose(pos, want_pos, rtol=0, atol=1e-12)


def test_an_older_recording_exports_with_the_robot_of_its_config(tmp_path, capsys):
    """No /robot_description: refused in one line saying to give --robot; with the run config, the bag has the
    config's description (its IMU's link) and the IMU's messages in that frame."""
    config = tmp_path / "robot.toml"
    config.write_text(DEMO_CONFIG.read_text() + "\n[[sensors]]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                                          for k, v in WRIST_IMU.items()))
    joints = robot_of(load_config(config))[0].joint_names
    fields = [f"wrist/{f}/{a}" for f in ("specific_force", "angular_rate") for a in "xyz"]
    rows = [{"t": i * 1e-3, "stamp": T0 + i * 1e-3, "q": [0.1 * i] * 7, "extra": [float(i)] * 6} for i in range(30)]
    write_described_recording(tmp_path / "old.mcap", None, joints, rows, fields)
    assert main(["export", "--ros2", str(tmp_path / "old.mcap"), str(tmp_path / "bag")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no /robot_description" in err and "--robot" in err
    assert not (tmp_path / "bag").exists()
    argv = ["export", "--ros2", str(tmp_path / "old.mcap"), str(tmp_path / "bag"), "--robot", str(config),
            "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    messages, _ = read_bag(tmp_path / "bag")
    described = robot_description(*robot_of(load_config(config)))
    assert messages["/robot_description"][0][1].data == described.urdf
    assert [m.header.frame_id for _, m in messages["/wrist/imu"]] == ["wrist_link"] * 30
    imu = messages["/wrist/imu"][7][1]
    assert (imu.linear_acceleration.x, imu.angular_velocity.z) == (7.0, 7.0)
    assert imu.orientation_covariance[0] == -1.0          # no orientation recorded: "unknown", as Imu says
    assert "1 on /tf_static" in capsys.readouterr().out


def test_a_free_flyer_recording_with_a_urdf_given_needs_its_floating_base(tmp_path, capsys):
    path = rtctl.bundled_model_path("quadruped12")
    model = load_urdf(path, "free_flyer")
    joints, rows, extra, _ = floating_rows(model, 20, np.random.default_rng(1))
    write_described_recording(tmp_path / "old.mcap", None, joints, rows, extra)
    assert main(["export", "--ros2", str(tmp_path / "old.mcap"), str(tmp_path / "bag"), "--robot", "quadruped12"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--floating-base" in err and not (tmp_path / "bag").exists()
    assert main(["export", "--ros2", str(tmp_path / "old.mcap"), str(tmp_path / "bag"), "--robot", "quadruped12",
                 "--floating-base", "free_flyer", "--no-progress"]) == 0
    messages, _ = read_bag(tmp_path / "bag")
    assert len(messages["/tf"]) == 2 and messages["/tf"][0][1].transforms[0].child_frame_id == "trunk"


def clean(tmp_path, name="run.mcap", n=60):
    model = load_urdf(rtctl.bundled_model_path("quadruped12"), "free_flyer")
    joints, rows, extra, _ = floating_rows(model, n, np.random.default_rng(2))
    path = write_described_recording(tmp_path / name, robot_description(model), joints, rows, extra)
    return path, model, joints, rows, extra


def one_line_or_a_bag(capsys, recording, out):
    """rtctl export either refuses in one line naming the file (exit 2, nothing written) or writes a bag that
    rosbags reads with one joint state per sample."""
    start = time.monotonic()
    status = main(["export", "--ros2", str(recording), str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert time.monotonic() - start < 20
    if status != 0:
        lines = captured.err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
        assert not out.exists()
        return lines[0]
    messages, _ = read_bag(out)
    assert len(messages["/joint_states"]) == len(read_recording(str(recording), progress=False)["samples"]["stamp"])
    return None


@pytest.mark.parametrize("case, named", [
    ("text", "not a readable MCAP recording"), ("empty", "the file is empty"), ("no samples", "no telemetry samples"),
    ("version 2", "schema version 2"), ("out exists", "already exists"), ("other robot", "not joints of the robot"),
    ("no joints", "'joints' is not a list of 12"), ("bad description", "the robot description: <urdf string>")])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, case, named):
    path, model, joints, rows, extra = clean(tmp_path)
    out = tmp_path / "bag"
    if case == "text":
        path.write_text("joint states, please\n")
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "no samples":
        write_described_recording(path, robot_description(model), joints, [], extra)
    elif case == "version 2":
        write_described_recording(path, robot_description(model), joints, rows, extra, version=2)
    elif case == "out exists":
        out.mkdir()
        (out / "keep").write_text("mine")
    elif case == "other robot":
        arm = robot_description(load_urdf(rtctl.bundled_model_path("arm7")))
        write_described_recording(path, arm, joints, rows, extra)
    elif case == "no joints":
        write_described_recording(path, robot_description(model), joints[:-1], rows, extra)
    elif case == "bad description":
        twice = Description("r", "<robot><link name='a'/><link name='a'/></robot>")
        write_described_recording(path, twice, joints, rows, extra)
    status = main(["export", "--ros2", str(path), str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and named in err, err
    assert (out / "keep").read_text() == "mine" if case == "out exists" else not out.exists()


def test_a_missing_format_is_a_usage_error(tmp_path, capsys):
    path = clean(tmp_path)[0]
    with pytest.raises(SystemExit) as exc:
        main(["export", str(path), str(tmp_path / "bag")])
    assert exc.value.code == 2 and "--ros2" in capsys.readouterr().err


HOSTILE = [float("nan"), float("inf"), 1e300, "x", None, [], [[1.0]], {}, True, 10 ** 30, [0.1] * 3,
           ["a"] * 12, [float("nan")] * 12, "<robot/>"]


@pytest.mark.slow
def test_truncated_and_garbled_recordings_are_one_line_or_a_bag(tmp_path, capsys):
    path = clean(tmp_path, n=40)[0]
    data = path.read_bytes()
    rng = random.Random(11)
    refused = 0
    for k in range(30):
        damaged = bytearray(data)
        if k % 2:
            damaged = damaged[:rng.randrange(1, len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        bad = tmp_path / f"damaged_{k}.mcap"
        bad.write_bytes(bytes(damaged))
        refused += one_line_or_a_bag(capsys, bad, tmp_path / f"bag_{k}") is not None
    assert refused >= 15


@pytest.mark.slow
def test_wrong_json_in_samples_metadata_and_description_is_one_line_or_a_bag(tmp_path, capsys):
    rng = random.Random(4)
    _, model, joints, rows, extra = clean(tmp_path, n=30)
    described = robot_description(model)
    refused = 0
    for k in range(45):
        samples = [dict(r) for r in rows]
        meta_joints, meta_extra, description = list(joints), list(extra), {"data": described.urdf,
                                                                            "sensor_frames": {}}
        what = k % 3
        if what == 0:
            for _ in range(rng.randint(1, 3)):
                row = samples[rng.randrange(len(samples))]
                row[rng.choice(["q", "qd", "effort", "extra", "stamp", "t"])] = rng.choice(HOSTILE)
        elif what == 1:
            if rng.random() < 0.5:
                meta_joints = rng.choice(HOSTILE + [joints[::-1], joints + ["x"]])
            else:
                meta_extra = rng.choice(HOSTILE + [extra[:-1], ["state/q/0"] * len(extra)])
        else:
            key = rng.choice(["data", "sensor_frames", None])
            if key is None:
                description = rng.choice(HOSTILE)
            else:
                description[key] = rng.choice(HOSTILE + [described.urdf[:rng.randrange(len(described.urdf))],
                                                         "<!DOCTYPE r [<!ENTITY a 'a'>]><robot/>", {"imu": 3}])
        path = tmp_path / f"mutated_{k}.mcap"
        rec = McapRecording(str(path))
        rec.add(CH_META, 1, json.dumps({"schema": "rtctl.telemetry", "version": 1, "joints": meta_joints,
                                        "extra": meta_extra}))
        rec.add(CH_DESCRIPTION, 1, json.dumps(description))
        for row in samples:
            rec.add(CH_SAMPLES, stamp_ns(row["stamp"]), json.dumps(row))
        rec.close()
        refused += one_line_or_a_bag(capsys, path, tmp_path / f"bag_{k}") is not None
    assert refused >= 25


def test_without_rosbags_the_export_says_which_extra_to_install(tmp_path, capsys, monkeypatch):
    path = clean(tmp_path)[0]
    monkeypatch.setitem(sys.modules, "rosbags.rosbag2", None)
    assert main(["export", "--ros2", str(path), str(tmp_path / "bag")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'rtctl[ros2]'" in err and not (tmp_path / "bag").exists()


def test_a_planar_biped_run_exports_its_whole_configuration(tmp_path):
    """A run of the planar biped (its trunk on a planar base the controller does not command) hands off its
    whole configuration (state/q/k); exported, the trunk and feet are where Pinocchio puts them at the state's
    q, which the loop kept at each step."""
    from rtctl.config import bundled_config_path
    from rtctl.telemetry import Telemetry
    from rtctl.telemetry.description import description_of_loop

    cfg = load_config(bundled_config_path("legged_biped"))
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0").attach(loop)
    states = []
    for k in range(300):
        loop.step(k * loop.period)
        states.append(loop.state.q.copy())
    rows, first = tel._take()
    fields = tel.layout.columns(rows)
    samples = [{name: values[i] for name, values in fields.items()} | {"index": first + i}
               for i in range(len(rows))]
    for row in samples:
        row["stamp"] = T0 + row["t"]                   # stamps 1 ms apart: the run went as fast as it could
    write_described_recording(tmp_path / "run.mcap", description_of_loop(loop), tel.joints, samples,
                              tel.extra_names)
    res = export_ros2(tmp_path / "run.mcap", tmp_path / "bag", tf_rate=0.0, progress=False)
    assert res["base"] == "the recorded configuration (state/q)"
    messages, _ = read_bag(tmp_path / "bag")
    pair = Pair.from_model(loop.model)
    for k in range(0, 300, 7):
        tree = tf_tree(messages, k)
        for frame in ["trunk", "left_sole", "right_foot"]:
            rot, pos = in_world(tree, frame)
            want_rot, want_pos = pair.frame_placement(states[k], frame)
            np.testing.assert_allclose(rot, want_rot, rtol=0, atol=1e-12)
            np.testing.assert_allclose(pos, want_pos, rtol=0, atol=1e-12)
    assert abs(states[-1][0] - states[0][0]) + abs(states[-1][2] - states[0][2]) > 1e-4   # the trunk moved
