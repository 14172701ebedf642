"""The robot in Foxglove's 3D panel (``rtctl.telemetry.scene``): what ``/tf``, ``/rtctl/scene`` and
``/joint_states`` carry, decoded with the protobuf schema the SDK advertises by Google's own protobuf reader,
checked against Pinocchio's forward kinematics (the arm), against the estimate and the truth (a floating base),
and against the bodies' inertias (the ellipsoids round-trip to them)."""
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from rtctl.config import bundled_config_path, build, load_config
from rtctl.model.urdf import model_to_urdf
from rtctl.telemetry import Telemetry
from rtctl.telemetry.foxglove import FoxgloveSink
from rtctl.telemetry.scene import FORCE_SCALE, TRUTH, WORLD, RobotScene, inertia_ellipsoid
from telemetry_helpers import make_loop

pin = pytest.importorskip("pinocchio")


def decoder(message_type):
    """A protobuf class for a foxglove-sdk message type, built from the descriptor set it advertises."""
    schema = message_type.get_schema()
    files = descriptor_pb2.FileDescriptorSet.FromString(bytes(schema.data))
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))


def scene_of(loop):
    sink = FoxgloveSink(port=0)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[sink]).attach(loop)
    return RobotScene(sink.scene_spec, tel.layout, tel.joints, tel.extra_names), tel


def world_poses(tf_message):
    """{frame: (R, p) in the world} by composing the transforms from ``world`` down."""
    edges = {}
    for t in tf_message.transforms:
        q = t.rotation
        r = pin.Quaternion(q.w, q.x, q.y, q.z).toRotationMatrix()
        edges[t.child_frame_id] = (t.parent_frame_id, r, np.array([t.translation.x, t.translation.y, t.translation.z]))
    poses = {WORLD: (np.eye(3), np.zeros(3))}

    def pose(frame):
        if frame not in poses:
            parent, r, p = edges[frame]
            rp, pp = pose(parent)
            poses[frame] = (rp @ r, pp + rp @ p)
        return poses[frame]

    for frame in edges:
        pose(frame)
    return poses


def test_transforms_place_every_body_where_pinocchio_does():
    loop = make_loop()
    scene, tel = scene_of(loop)
    model = loop.model
    pmodel = pin.buildModelFromXML(model_to_urdf(model))
    pdata = pmodel.createData()
    FrameTransforms, JointStates = (decoder(t) for t in (scene.m.FrameTransforms, scene.m.JointStates))
    rng = np.random.default_rng(3)
    q_cols = tel.layout.slices["q"]
    for trial in range(5):
        q = rng.uniform(-2.0, 2.0, model.nq)
        row = np.zeros(tel.layout.width)
        row[q_cols] = q
        ns = 1_700_000_000_123_456_789 + trial
        transforms, forces = scene.frame(row, ns)
        assert forces == b""                       # the arm has no force sensor
        message = FrameTransforms.FromString(transforms)
        assert {(t.timestamp.seconds, t.timestamp.nanos) for t in message.transforms} == {(1_700_000_000, 123_456_789 + trial)}
        poses = world_poses(message)
        pin.forwardKinematics(pmodel, pdata, q)
        for name in model.body_names:
            joint = pmodel.getJointId(model.joint_names[model.body_names.index(name)])
            r, p = poses[name]
            assert np.allclose(r, pdata.oMi[joint].rotation, atol=1e-12), name
            assert np.allclose(p, pdata.oMi[joint].translation, atol=1e-12), name
        states = JointStates.FromString(scene.joint_states(row, ns))
        assert [j.name for j in states.joints] == tel.joints
        assert [j.position for j in states.joints] == q.tolist()   # exact: float64 on the wire


def test_a_floating_base_is_drawn_from_the_estimate_with_the_truth_beside_it():
    loop = build(load_config(bundled_config_path("legged_quadruped_estimated")))
    scene, tel = scene_of(loop)
    model = loop.model
    assert scene.sensors and any(s.kind == "contact" for s in scene.sensors)
    rng = np.random.default_rng(5)
    q_est = model.neutral_configuration() + rng.uniform(-0.3, 0.3, model.nq)
    q_true = q_est.copy()
    n_base = loop.base_truth.q.size
    q_true[:n_base] += rng.uniform(-0.05, 0.05, n_base)
    row = np.zeros(tel.layout.width)
    extra = tel.layout.slices["extra"].start
    for k in range(model.nq):
        row[extra + tel.extra_names.index(f"state/q/{k}")] = q_est[k]
    for k in range(n_base):
        row[extra + tel.extra_names.index(f"truth/q/{k}")] = q_true[k]
    poses = world_poses(decoder(scene.m.FrameTransforms).FromString(scene.frame(row, 10)[0]))
    rot, pos = scene.dynamics.forward_kinematics(q_est)
    base = model.n_base_bodies - 1
    trunk = model.body_names[base]
    assert np.allclose(poses[trunk][1], pos[base], atol=1e-12)
    t_rot, t_pos = scene.dynamics.forward_kinematics(q_true)
    assert np.allclose(poses[TRUTH + trunk][0], t_rot[base], atol=1e-12)
    assert np.allclose(poses[TRUTH + trunk][1], t_pos[base], atol=1e-12)
    assert not np.allclose(poses[TRUTH + trunk][1], poses[trunk][1])
    for s in scene.sensors:    # every sensor's frame is its mount on its body
        r, p = poses[s.name]
        body_r, body_p = rot[s.body], pos[s.body]
        assert np.allclose(p, body_p + body_r @ np.array(s.translation), atol=1e-12), s.name


def test_the_ellipsoids_have_the_bodies_inertias_and_the_lines_reach_the_children():
    loop = make_loop()
    scene, _ = scene_of(loop)
    model = loop.model
    update = decoder(scene.m.SceneUpdate).FromString(scene.robot(0))
    assert [e.frame_id for e in update.entities] == model.body_names
    for i, entity in enumerate(update.entities):
        assert entity.frame_locked
        ends = [(p.x, p.y, p.z) for line in entity.lines for p in line.points][1::2]
        children = [tuple(model.joint_translation[c]) for c in np.flatnonzero(model.parent == i)]
        assert ends == children
        if model.mass[i] > 0:
            ellipsoid = entity.spheres[1]
            semi = np.array([ellipsoid.size.x, ellipsoid.size.y, ellipsoid.size.z]) / 2.0
            q = ellipsoid.pose.orientation
            axes = pin.Quaternion(q.w, q.x, q.y, q.z).toRotationMatrix()
            m = model.mass[i]
            moments = m / 5.0 * np.array([semi[1] ** 2 + semi[2] ** 2, semi[0] ** 2 + semi[2] ** 2,
                                          semi[0] ** 2 + semi[1] ** 2])
            inertia = axes @ np.diag(moments) @ axes.T
            assert np.allclose(inertia, model.inertia_com[i], rtol=1e-9, atol=1e-12 * m), model.body_names[i]
            c = ellipsoid.pose.position
            assert np.allclose([c.x, c.y, c.z], model.com[i])
    assert inertia_ellipsoid(0.0, np.eye(3)) is None


def test_force_sensors_are_arrows_as_long_as_the_force():
    loop = build(load_config(bundled_config_path("legged_quadruped_estimated")))
    scene, tel = scene_of(loop)
    SceneUpdate = decoder(scene.m.SceneUpdate)
    row = np.zeros(tel.layout.width)
    extra = tel.layout.slices["extra"].start
    for k in range(loop.model.nq):
        row[extra + tel.extra_names.index(f"state/q/{k}")] = loop.model.neutral_configuration()[k]
    force_torque = [s for s in scene.sensors if s.kind == "force_torque"]
    contact = [s for s in scene.sensors if s.kind == "contact"]
    assert len(force_torque) == 4 and len(contact) == 4     # one of each per foot
    force = np.array([3.0, -4.0, 120.0])
    for s in scene.sensors:
        names = [f"{s.name}/force/{a}" for a in "xyz"] if s.kind == "force_torque" else [f"{s.name}/force"]
        values = force if s.kind == "force_torque" else [250.0]
        for name, value in zip(names, values):
            if name in tel.extra_names:
                row[extra + tel.extra_names.index(name)] = value
    update = SceneUpdate.FromString(scene.frame(row, 0)[1])
    arrows = {e.id: (e.frame_id, list(e.arrows)) for e in update.entities}
    for s in force_torque:
        frame, (arrow,) = arrows[f"force/{s.name}"]
        assert frame == s.name
        length = arrow.shaft_length + arrow.head_length
        assert length == pytest.approx(np.linalg.norm(force) * FORCE_SCALE, rel=1e-12)
        q = arrow.pose.orientation
        x_axis = pin.Quaternion(q.w, q.x, q.y, q.z).toRotationMatrix()[:, 0]
        assert np.allclose(x_axis, force / np.linalg.norm(force), atol=1e-12)
    for s in contact:
        frame, (arrow,) = arrows[f"force/{s.name}"]
        assert frame == WORLD
        q = arrow.pose.orientation
        assert np.allclose(pin.Quaternion(q.w, q.x, q.y, q.z).toRotationMatrix()[:, 0], [0, 0, 1], atol=1e-12)
        assert arrow.shaft_length + arrow.head_length == pytest.approx(250.0 * FORCE_SCALE)
    row[:] = np.nan
    update = SceneUpdate.FromString(scene.frame(row, 0)[1])
    assert all(not e.arrows for e in update.entities)      # not read yet: no arrow, never a NaN pose


def test_the_impedance_target_is_the_frame_target_slash_frame_at_the_desired_pose():
    from test_impedance import arm_loop

    loop = arm_loop()
    loop.run(cycles=50)                     # the controller has computed its target pose from the trajectory
    scene, tel = scene_of(loop)
    ctl = loop.controller
    row = np.zeros(tel.layout.width)
    row[tel.layout.slices["q"]] = loop.state.q
    extra = tel.layout.slices["extra"].start
    for k, name in enumerate(tel.extra_names):
        if name.startswith(f"target/{ctl.frame}/"):
            row[extra + k] = ctl.telemetry_values[ctl.telemetry_fields.index(name)]
    poses = world_poses(decoder(scene.m.FrameTransforms).FromString(scene.frame(row, 0)[0]))
    r, p = poses[f"target/{ctl.frame}"]
    desired = ctl.desired[:12]
    assert np.allclose(r, desired[:9].reshape(3, 3), atol=1e-12) and np.allclose(p, desired[9:], atol=1e-12)
    assert abs(np.linalg.det(r) - 1.0) < 1e-9 and np.linalg.norm(p) > 0.1
    # a desired pose from the trajectory's q_d is the frame's pose at q_d: independent, by Pinocchio
    pmodel = pin.buildModelFromXML(model_to_urdf(loop.model))
    pdata = pmodel.createData()
    frame = loop.model.frame(ctl.frame)
    pin.forwardKinematics(pmodel, pdata, loop.q_d)
    body = pdata.oMi[pmodel.getJointId(loop.model.joint_names[frame.body])]
    assert np.allclose(p, body.translation + body.rotation @ frame.translation, atol=1e-9)


def test_a_recording_holds_the_3d_view_as_the_live_server_sends_it(tmp_path):
    """``rtctl record`` writes /tf, /rtctl/scene and /joint_states from the stream's description and metadata:
    each recorded transform tree is Pinocchio's forward kinematics of the recorded sample at its stamp."""
    import threading
    import time

    from mcap.reader import make_reader

    from rtctl.telemetry.recording import record
    from rtctl.telemetry.scene import CHANNEL_JOINTS, CHANNEL_SCENE, CHANNEL_TF
    from rtctl.telemetry.tools import read_recording

    loop = make_loop(telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.1},
                     loop={"pace": True, "rate_hz": 1000.0},
                     trajectory={"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.3] * 7,
                                 "frequency": [0.5] * 7})
    tel = loop.telemetry
    path = tmp_path / "run.mcap"
    result = {}
    rec = threading.Thread(target=lambda: result.update(record(tel.endpoint, str(path), samples=1500,
                                                               idle_timeout=5.0, progress=False)))
    try:
        rec.start()
        time.sleep(0.6)
        loop.run(cycles=1500)
        rec.join(20)
    finally:
        tel.close()
    by_topic = {}
    with open(path, "rb") as fh:
        for schema, channel, message in make_reader(fh).iter_messages():
            by_topic.setdefault(channel.topic, []).append((schema, channel, message))
    assert {CHANNEL_TF, CHANNEL_SCENE, CHANNEL_JOINTS} <= set(by_topic)
    schema, channel, _ = by_topic[CHANNEL_TF][0]
    assert (schema.name, schema.encoding, channel.message_encoding) == ("foxglove.FrameTransforms", "protobuf",
                                                                       "protobuf")
    FrameTransforms, SceneUpdate, JointStates = (decoder(t) for t in (scene_messages().FrameTransforms,
                                                                      scene_messages().SceneUpdate,
                                                                      scene_messages().JointStates))
    robot = SceneUpdate.FromString(by_topic[CHANNEL_SCENE][0][2].data)
    assert [e.frame_id for e in robot.entities] == loop.model.body_names
    samples = read_recording(str(path), progress=False)["samples"]
    q_at = {int(round(s * 1e9)): q for s, q in zip(samples["stamp"], samples["q"])}
    joints = [JointStates.FromString(m.data) for _, _, m in by_topic[CHANNEL_JOINTS]]
    assert len(joints) >= 0.8 * len(samples["stamp"])       # from the description's arrival on, every sample
    pmodel = pin.buildModelFromXML(model_to_urdf(loop.model))
    pdata = pmodel.createData()
    transforms = [(m.log_time, FrameTransforms.FromString(m.data)) for _, _, m in by_topic[CHANNEL_TF]]
    assert len(transforms) >= 20
    checked = 0
    for log_time, message in transforms:
        q = q_at.get(log_time)
        if q is None:
            continue
        poses = world_poses(message)
        pin.forwardKinematics(pmodel, pdata, np.asarray(q))
        last = loop.model.body_names[-1]
        joint = pmodel.getJointId(loop.model.joint_names[-1])
        assert np.allclose(poses[last][1], pdata.oMi[joint].translation, atol=1e-12)
        checked += 1
    assert checked >= 20


def scene_messages():
    from foxglove import messages
    return messages
