"""The robot description (rtctl.telemetry.description): the URDF of the model a run controls reads back to the same
model, its primitive visuals have the links' inertia and join their joints, each sensor's link is at the mount the
sensor computes, and the publisher sends it at the start and to newcomers, bounded however many join."""
from __future__ import annotations

import time
import tomllib
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import zmq

import rtctl
from rtctl.config import DEMO_CONFIG, build, validate
from rtctl.model import ModelBuilder, rpy_to_matrix
from rtctl.model.urdf import load_urdf
from rtctl.registry import robot_model
from rtctl.telemetry import Telemetry, decode
from rtctl.telemetry.description import (FLAT, MAX_DESCRIPTION_BYTES, RESEND_BURST, RESEND_PERIOD, Description,
                                         DescriptionTopic, description_of_loop, inertia_box, robot_description,
                                         sensor_mount)
from rtctl.telemetry.scene import WORLD
from rtctl.telemetry.schema import TOPIC_DESCRIPTION

MODELS = [("arm7", None), ("humanoid", "free_flyer"), ("quadruped12", "free_flyer"), ("planar_biped", "robot"),
          ("spatial_quadruped", "robot")]
WRIST_IMU = {"name": "wrist", "kind": "imu", "frame": "link7", "mount_xyz": [0.0, 0.0, 0.05],
             "mount_rpy": [0.3, -0.2, 0.1]}
WRIST_FT = {"name": "ft", "backend": "sim_force_torque", "kind": "force_torque", "frame": "tool",
            "mount_rpy": [0.0, 0.0, 1.2]}


def model_of(name, base):
    """A bundled URDF with that base, or the robot model of that name (base "robot": the legged robots' planar and
    Euler-angle bases)."""
    return robot_model(name) if base == "robot" else load_urdf(rtctl.bundled_model_path(name), base)


def demo_loop(*sensors, telemetry=None):
    raw = tomllib.loads(DEMO_CONFIG.read_text())
    raw["loop"]["pace"] = False
    raw["sensors"] = [dict(s) for s in sensors]
    if telemetry is not None:
        raw["telemetry"] = telemetry
    return build(validate(raw, "described.toml"))


@pytest.mark.parametrize("name, base", MODELS)
def test_the_description_reads_back_to_the_model_it_describes(name, base):
    """Bodies, joints, placements, inertias and frames: what load_urdf gives of the description is the model
    (an Euler or planar chain as the fixed-base joints it is written as)."""
    model = model_of(name, base)
    back = load_urdf(robot_description(model).urdf)
    assert back.body_names == model.body_names and back.joint_names == model.joint_names
    assert np.array_equal(back.parent, model.parent) and np.array_equal(back.joint_type, model.joint_type)
    for a, b in (("joint_rotation", 1e-12), ("joint_translation", 0), ("axis", 0), ("mass", 0), ("com", 0),
                 ("inertia_com", 1e-15)):
        np.testing.assert_allclose(getattr(back, a), getattr(model, a), rtol=0, atol=b, err_msg=a)
    assert back.has_free_flyer == model.has_free_flyer
    assert {f.name for f in back.frames} == {f.name for f in model.frames} | {WORLD}


def visuals(urdf: str):
    """(link, geometry element, rotation, origin) of every visual of the text."""
    out = []
    for link in ET.fromstring(urdf).iter("link"):
        for visual in link.iter("visual"):
            origin = visual.find("origin")
            xyz, rpy = (np.array(origin.get(k).split(), dtype=float) for k in ("xyz", "rpy"))
            out.append((link.get("name"), visual.find("geometry")[0], rpy_to_matrix(rpy), xyz))
    return out


@pytest.mark.parametrize("name, base", MODELS)
def test_each_inertia_box_has_its_links_mass_and_inertia(name, base):
    """The box drawn for a body, as written (6 digits), has the body's inertia about its centre of mass: m/12 of
    the sums of its sides' squares along its axes -- for every body whose inertia a box can have."""
    model = model_of(name, base)
    boxes = {link: (geometry, r, xyz) for link, geometry, r, xyz in visuals(robot_description(model).urdf)
             if geometry.tag == "box"}
    checked = 0
    for i, body in enumerate(model.body_names):
        if model.mass[i] == 0:
            assert body not in boxes
            continue
        sides, _ = inertia_box(model.mass[i], model.inertia_com[i])
        if sides.min() < FLAT * sides.max() * 1.01:
            continue                                   # flattened or inconsistent: drawn, not the inertia
        geometry, r, xyz = boxes[body]
        a, b, c = np.array(geometry.get("size").split(), dtype=float)
        drawn = r @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ r.T * model.mass[i] / 12
        scale = np.abs(model.inertia_com[i]).max()
        np.testing.assert_allclose(drawn, model.inertia_com[i], rtol=0, atol=1e-4 * scale, err_msg=body)
        np.testing.assert_allclose(xyz, model.com[i], rtol=0, atol=1e-6 * (1 + np.abs(model.com[i]).max()))
        checked += 1
    assert checked >= model.nbodies // 2


@pytest.mark.parametrize("name, base", MODELS[:3])
def test_the_skeleton_joins_each_body_to_its_children_and_frames(name, base):
    """A cylinder along z of the drawn rotation, centred at the drawn origin, has one end at the body's origin and
    the other at a child's joint or a frame, and each child and frame away from the origin has one."""
    model = model_of(name, base)
    ends = {}
    for link, geometry, r, xyz in visuals(robot_description(model).urdf):
        if geometry.tag == "cylinder":
            half = 0.5 * float(geometry.get("length")) * r[:, 2]
            assert np.linalg.norm(xyz - half) < 1e-5, (link, xyz - half)      # one end at the body's origin
            ends.setdefault(link, []).append(xyz + half)
    wanted = [(model.body_names[model.parent[c]], model.joint_translation[c]) for c in range(model.nbodies)
              if model.parent[c] >= 0] + [(model.body_names[f.body], f.translation) for f in model.frames
                                           if f.body >= 0]
    wanted = [(link, end) for link, end in wanted if np.linalg.norm(end) > 1e-6]
    assert len(wanted) == sum(len(v) for v in ends.values())
    for link, end in wanted:
        assert min(np.linalg.norm(e - end) for e in ends[link]) < 1e-5, (link, end)


def test_each_sensor_has_a_link_at_the_mount_the_sensor_computes():
    """The loop's IMU (mounted at an offset and turned) and force-torque sensor (on a merged frame) get links on
    their bodies at the rotation and translation the sensors themselves use, named in sensor_frames."""
    loop = demo_loop(WRIST_IMU, WRIST_FT)
    described = description_of_loop(loop)
    assert described.sensor_frames == {"wrist": "wrist_link", "ft": "ft_link"}
    back = load_urdf(described.urdf)
    for sensor in loop.sensors:
        frame = back.frame(described.sensor_frames[sensor.options.name])
        assert frame.body == back.body_names.index(loop.model.body_names[sensor.body])
        np.testing.assert_allclose(frame.rotation, sensor.rotation, rtol=0, atol=1e-15)
        np.testing.assert_allclose(frame.translation, sensor.translation, rtol=0, atol=1e-15)


def test_a_sensor_link_never_takes_the_name_of_a_link_or_joint():
    b = ModelBuilder("named")
    b.add_body("imu_link", -1, "revolute", mass=1.0, inertia=np.eye(3) * 1e-2, joint_name="imu_link_mount")
    b.add_fixed("imu_link_sensor", "imu_link", translation=(0, 0, 0.1))
    model = b.build()
    described = robot_description(model, [sensor_mount(model, "imu", "imu", "imu_link", [0.0, 0.0, 0.02])])
    assert described.sensor_frames == {"imu": "imu_link_sensor_sensor"}
    back = load_urdf(described.urdf)
    np.testing.assert_allclose(back.frame("imu_link_sensor_sensor").translation, [0.0, 0.0, 0.02])
    np.testing.assert_allclose(back.frame("imu_link_sensor").translation, [0.0, 0.0, 0.1])


class Pub:
    """Stands in for the publisher's socket: keeps what is sent."""

    def __init__(self):
        self.sent = []

    def send_multipart(self, parts, flags=0):
        self.sent.append(parts)


def test_a_flood_of_newcomers_gets_the_description_at_most_once_a_period_after_a_burst():
    topic, pub = DescriptionTopic(Description("r", "<robot name='r'/>")), Pub()
    topic.greet(pub, 0.0, False)
    assert len(pub.sent) == 1 and pub.sent[0][0] == TOPIC_DESCRIPTION     # at the start, unasked
    for k in range(1, 10_001):                                            # 10 s of a newcomer every ms
        topic.greet(pub, k * 1e-3, True)
    assert len(pub.sent) <= RESEND_BURST + 10.0 / RESEND_PERIOD + 1
    assert len(pub.sent) >= RESEND_BURST + 10.0 / RESEND_PERIOD - 1
    quiet = len(pub.sent)
    topic.greet(pub, 10.5, False)
    topic.greet(pub, 12.0, False)                   # the one left waiting, then nobody asks
    assert len(pub.sent) <= quiet + 1
    honest, pub = DescriptionTopic(Description("r", "<robot name='r'/>")), Pub()
    for k in range(RESEND_BURST):                   # a few newcomers, each at once
        honest.greet(pub, 0.01 * k, k > 0)
        assert len(pub.sent) == k + 1


def test_a_description_beyond_the_bound_is_never_sent_and_says_so():
    big = Description("big", "<robot name='big'>" + " " * MAX_DESCRIPTION_BYTES + "</robot>")
    with pytest.warns(UserWarning, match="not published"):
        topic = DescriptionTopic(big)
    pub = Pub()
    for k in range(20):
        topic.greet(pub, float(k), True)
    assert pub.sent == [] and topic.payload is None


@pytest.mark.slow
@pytest.mark.parametrize("publisher", ["process", "thread"])
def test_a_subscriber_joining_late_receives_the_loops_description(publisher):
    """The description of the running loop (its IMU's link included) reaches a subscriber that joins after the
    start, without waiting for a resend period, from the publisher process as from the thread."""
    loop = demo_loop(WRIST_IMU, telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "publisher": publisher})
    tel = loop.telemetry
    assert isinstance(tel, Telemetry)
    expected = description_of_loop(loop)
    try:
        time.sleep(0.3)                                # the start's send went to nobody
        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(tel.endpoint)
        sub.setsockopt(zmq.SUBSCRIBE, TOPIC_DESCRIPTION)
        start = time.monotonic()
        assert sub.poll(int(RESEND_PERIOD * 900)), "no description within the resend period"
        topic, payload = sub.recv_multipart()
        waited = time.monotonic() - start
        msg = decode(topic, payload)
        sub.close(linger=0)
    finally:
        tel.close()
    assert msg["urdf"] == expected.urdf and msg["sensor_frames"] == {"wrist": "wrist_link"}
    assert msg["robot"] == loop.model.name and waited < RESEND_PERIOD
