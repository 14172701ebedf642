"""``rtctl export --ros2``: a recording as a rosbag2 of standard ROS 2 messages, without ROS.

The bag is written by ``rosbags`` (pure Python; the ``ros2`` extra): a directory with ``metadata.yaml`` and one
MCAP file (rosbag2's MCAP storage, format version :data:`BAG_VERSION`, ROS 2 Jazzy's message definitions,
CDR), which ``ros2 bag play``, Foxglove and ``rosbags`` read. Its topics:

* ``/joint_states`` (``sensor_msgs/msg/JointState``): every sample; ``name`` the recording's joints
  (``/rtctl/meta``), ``position``, ``velocity`` and ``effort`` its ``q``, ``qd`` and ``effort`` (measured);
* ``/tf`` (``tf2_msgs/msg/TFMessage``): at ``tf_rate`` (Hz of control time; 0: every sample), one transform
  per moving joint of the description, from its parent link to its child link -- the child's pose in the
  parent's frame, as robot_state_publisher publishes it -- computed by rtctl's forward kinematics
  (:meth:`rtctl.dynamics.Dynamics.forward_kinematics`) from the recorded positions, not read from the
  recording: the whole configuration where the recording has it (``state/q/k``: a floating base, passive and
  mimic joints, :class:`~rtctl.telemetry.scene.Configuration`), else the joints by name, mimic joints from their
  leaders and a floating base from a simulator's ``truth/q/k``; the base under the fixed ``world``;
* ``/tf_static`` (transient local, once): the fixed joints (merged links, the sensors' links);
* ``/robot_description`` (``std_msgs/msg/String``, transient local, once): the URDF;
* ``/NAME/imu`` (``sensor_msgs/msg/Imu``) and ``/NAME/wrench`` (``geometry_msgs/msg/WrenchStamped``): every
  sample, for each sensor whose fields the samples carry (``NAME/specific_force/x`` ... and
  ``NAME/angular_rate/x`` ..., ``NAME/orientation/x`` ... when the device estimates one; ``NAME/force/x``
  ... and ``NAME/torque/x`` ...: :func:`rtctl.drivers.sensor.telemetry_names`), ``frame_id`` the sensor's
  link in the description. The accelerometer's specific force is ROS's ``linear_acceleration`` (REP 145:
  +g up at rest); no orientation: ``orientation_covariance[0] = -1``, as sensor_msgs/Imu says; the other
  covariances are unknown (zeros).

Stamps (headers and the bag's) are the samples' ``stamp`` (unix s). The description is the recording's
``/robot_description`` (:mod:`rtctl.telemetry.description`) or the one given (``rtctl export --robot``, for a
recording made before rtctl published one). A file that is not a recording, has no samples, another schema
version, metadata that does not name its joints, or a description that does not hold them is a ValueError
of one line, before anything is written; a bag cut short by a failed write is removed.
"""
from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..model import FREE_FLYER
from .description import MAX_DESCRIPTION_BYTES, Description
from .scene import WORLD
from .schema import stamp_ns
from .tools import CH_DESCRIPTION, require_fields

BAG_VERSION = 9                  # rosbag2's metadata format of Jazzy (rosbags writes 8 or 9)
DEFAULT_TF_RATE = 100.0          # Hz: a viewer draws at most about 60 frames a second
INSTALL_HINT = "rtctl export --ros2 needs the rosbags package: pip install 'rtctl[ros2]'"
SENSOR_TOPICS = {"imu": (("specific_force", "angular_rate"), "sensor_msgs/msg/Imu"),
                 "wrench": (("force", "torque"), "geometry_msgs/msg/WrenchStamped")}
XYZ, XYZW = ("x", "y", "z"), ("x", "y", "z", "w")


def _rosbags():
    try:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:
        raise ImportError(f"{INSTALL_HINT} ({exc})") from None
    return Writer, StoragePlugin, get_typestore(Stores.ROS2_JAZZY)


@dataclass
class _Sensor:
    kind: str                    # "imu" or "wrench"
    name: str
    frame_id: str
    columns: dict                # field -> column indices of its axes in the samples' extra


@dataclass
class _Plan:
    """What the bag is made of, checked before anything is written."""

    description: Description
    model: object
    joints: list
    stamps: np.ndarray           # ns
    tf_rows: np.ndarray          # the samples TF is computed at
    q_index: np.ndarray          # each recorded joint's coordinate in the description's q
    configuration: object = None  # the extra columns of the whole q (state/q/k), when recorded
    base: tuple = ()             # else (extra columns, their coordinates in q) of a floating base's pose
    base_source: str = "fixed"   # where the base's pose comes from
    mimic: tuple = ()            # (followers, leaders, multipliers, offsets) computed from recorded leaders
    sensors: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def export_ros2(recording, out, description: Description | None = None, tf_rate: float = DEFAULT_TF_RATE,
                progress: bool = True, stream=None) -> dict:
    """Write the rosbag2 ``out`` (a new directory) from ``recording``; see the module docstring. Returns counts
    per topic (``messages``), the sensors' topics, ``base`` (where the base pose came from) and ``notes``."""
    from .tools import read_recording

    out = Path(out)
    if out.exists() or out.is_symlink():
        raise ValueError(f"{out}: already exists; the bag is written to a new directory (remove it or name another)")
    if not (math.isfinite(tf_rate) and tf_rate >= 0):
        raise ValueError(f"--tf-rate must be a rate in Hz >= 0 (0: every sample), got {tf_rate!r}")
    writer_class, plugins, store = _rosbags()
    rec = read_recording(str(recording), progress=False)
    plan = _plan(str(recording), rec, description, tf_rate)
    writer = writer_class(out, version=BAG_VERSION, storage_plugin=plugins.MCAP)
    try:
        with writer:
            counts = _write(writer, store, plan, rec["samples"], progress, stream)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return {"path": str(out), "messages": counts, "base": plan.base_source,
            "sensors": {f"/{_token(s.name)}/{s.kind}": s.frame_id for s in plan.sensors}, "notes": plan.notes}


# -- checking the recording against its description -------------------------------------------------------------
def _plan(path: str, rec: dict, description, tf_rate: float) -> _Plan:
    from ..model.urdf import load_urdf

    samples, meta = rec["samples"], rec["meta"]
    require_fields(path, samples, ["stamp", "q", *(f for f in ("qd", "effort") if f in samples)], "export --ros2")
    n_joints = samples["q"].shape[1]
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: the recording has no /rtctl/meta, which names its joints")
    joints = meta.get("joints")
    if not _names(joints, n_joints):
        raise ValueError(f"{path}: /rtctl/meta 'joints' is not a list of {n_joints} distinct joint names (one per "
                         f"column of q): {_show(joints)}")
    extra = meta.get("extra", [])
    width = samples["extra"].shape[1] if "extra" in samples and samples["extra"].ndim == 2 else 0
    if not _names(extra, width):
        raise ValueError(f"{path}: /rtctl/meta 'extra' is not a list of {width} distinct field names (one per "
                         f"column of the samples' extra): {_show(extra)}")
    description = description or _recorded_description(path, rec)
    try:
        model = load_urdf(description.urdf)
    except ValueError as exc:        # ModelError: the URDF's element at fault, in one line
        raise ValueError(f"{path}: the robot description: {exc}") from None
    by_joint = {name: i for i, name in enumerate(model.joint_names) if model.joint_type[i] != FREE_FLYER}
    missing = [j for j in joints if j not in by_joint]
    if missing:
        raise ValueError(f"{path}: joint(s) {_show(missing)} of the recording are not joints of the robot "
                         f"description {description.robot!r} (its joints: {_show(list(by_joint))})")
    q_index = np.array([model.idx_q[by_joint[j]] for j in joints], dtype=np.int64)
    plan = _Plan(description, model, list(joints), np.array([stamp_ns(s) for s in samples["stamp"]], dtype=np.int64),
                 _tf_rows(samples, tf_rate), q_index)
    _plan_base(path, plan, list(extra))
    if plan.configuration is None:
        _plan_mimic(plan)
    plan.sensors = _sensors(list(extra), description.sensor_frames, plan.notes)
    return plan


def _names(value, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(isinstance(v, str) for v in value) \
        and len(set(value)) == n


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _recorded_description(path: str, rec: dict) -> Description:
    found = rec.get("description")
    if found is None:
        raise ValueError(f"{path}: the recording has no {CH_DESCRIPTION} (recorded before rtctl published the "
                         f"robot description?): give the robot with --robot CONFIG_OR_URDF")
    urdf = found.get("data") if isinstance(found, dict) else None
    frames = found.get("sensor_frames", {}) if isinstance(found, dict) else None
    if not isinstance(urdf, str) or len(urdf.encode()) > MAX_DESCRIPTION_BYTES:
        raise ValueError(f"{path}: {CH_DESCRIPTION} is not an object whose 'data' is a URDF of at most "
                         f"{MAX_DESCRIPTION_BYTES} bytes")
    if not isinstance(frames, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in frames.items()):
        raise ValueError(f"{path}: {CH_DESCRIPTION} 'sensor_frames' is not an object of sensor -> link names")
    return Description("", urdf, frames)


def _tf_rows(samples: dict, rate: float) -> np.ndarray:
    """The first sample of each 1/rate s of control time (``t``; the stamps without it); every sample at 0."""
    n = len(samples["stamp"])
    if rate == 0:
        return np.arange(n)
    t = samples["t"] if "t" in samples and samples["t"].ndim == 1 else samples["stamp"]
    with np.errstate(invalid="ignore", over="ignore"):
        slot = np.floor(np.where(np.isfinite(t), t, np.nan) * rate + 1e-6)
    keep = np.ones(n, dtype=bool)
    keep[1:] = slot[1:] != slot[:-1]
    return np.flatnonzero(keep & np.isfinite(slot))


def _columns(extra: list, prefix: str) -> list:
    """The columns of ``prefix/0``, ``prefix/1``, ... in the samples' extra, as long as they go on."""
    columns = []
    while f"{prefix}/{len(columns)}" in extra:
        columns.append(extra.index(f"{prefix}/{len(columns)}"))
    return columns


def _plan_base(path: str, plan: _Plan, extra: list) -> None:
    """Where the configuration comes from: ``state/q/k`` (the whole q the controller saw), else the joints by
    name with a floating base from the simulator's ``truth/q/k``, else a base at the origin."""
    model = plan.model
    state = _columns(extra, "state/q")
    if state:
        if len(state) != model.nq:
            raise ValueError(f"{path}: the recording's configuration has {len(state)} coordinates (state/q/0.."
                             f"{len(state) - 1}); the robot description's has {model.nq}: another robot, or one "
                             f"described without its floating base (--floating-base)")
        plan.configuration, plan.base_source = np.array(state), "the recorded configuration (state/q)"
        return
    columns = _columns(extra, "truth/q")
    n, what = len(columns), "the simulator's base truth (truth/q): the recording has no state/q"
    if model.has_free_flyer:
        if n == 7:
            plan.base, plan.base_source = (np.array(columns), np.arange(7)), what
        elif n == 0:
            plan.base_source = "none: the recording has no base pose (state/q): the base is drawn at the world origin"
        else:
            raise ValueError(f"{path}: the recording's base has {n} coordinates (truth/q/0..{n - 1}); the robot "
                             f"description's free-flying base has 7")
        return
    if n == 0:
        return
    if n > model.nq or set(plan.q_index.tolist()) & set(range(n)):
        raise ValueError(f"{path}: the recording's base has {n} coordinates (truth/q/0..{n - 1}) but the robot "
                         f"description's first joints are recorded joints: describe the robot with its floating base "
                         f"(--floating-base)")
    plan.base, plan.base_source = (np.array(columns), np.arange(n)), what


def _plan_mimic(plan: _Plan) -> None:
    """Mimic joints follow recorded leaders; every other coordinate neither recorded nor of the base is held at
    the neutral configuration (a note names them)."""
    model = plan.model
    known = set(plan.q_index.tolist()) | set(plan.base[1].tolist() if plan.base else [])
    if model.has_free_flyer:
        known |= set(range(7))
    follow = []
    for m in model.mimic.mimics if model.mimic is not None else []:
        follower, leader = (int(model.idx_q[model.joint_names.index(n)]) for n in (m.name, m.leader))
        if follower not in known and leader in known:
            follow.append((follower, leader, m.multiplier, m.offset))
    if follow:
        plan.mimic = tuple(np.array(c) for c in zip(*follow))
        known |= {f[0] for f in follow}
    held = [model.joint_names[i] for i in range(model.nbodies) if model.joint_type[i] != FREE_FLYER
            and int(model.idx_q[i]) not in known]
    if held:
        plan.notes.append(f"{len(held)} joint(s) of the description are not in the recording, held at their neutral "
                          f"position: {_show(held)}")


def _sensors(extra: list, frames: dict, notes: list) -> list:
    """The IMUs and force-torque sensors whose fields the samples carry (names of rtctl.drivers.sensor)."""
    axes = {}
    for k, name in enumerate(extra):
        prefix, _, rest = name.rpartition("/")
        sensor, _, quantity = prefix.rpartition("/")
        if sensor:
            axes.setdefault(sensor, {}).setdefault(quantity, {})[rest] = k
    found = []
    for sensor, quantities in axes.items():
        for kind, (needed, _) in SENSOR_TOPICS.items():
            if all(set(XYZ) <= set(quantities.get(q, {})) for q in needed):
                columns = {q: [quantities[q][a] for a in XYZ] for q in needed}
                if kind == "imu" and set(XYZW) <= set(quantities.get("orientation", {})):
                    columns["orientation"] = [quantities["orientation"][a] for a in XYZW]
                frame = frames.get(sensor)
                if frame is None:
                    notes.append(f"sensor {sensor!r} has no link in the description: its frame_id is its name")
                found.append(_Sensor(kind, sensor, frame or sensor, columns))
    return found


def _token(name: str) -> str:
    """A sensor's name as a ROS topic name token (letters, digits, underscores; no leading digit)."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return token if token[:1].isalpha() or token[:1] == "_" else f"s{token}"


# -- writing ---------------------------------------------------------------------------------------------------
def _write(writer, store, plan: _Plan, samples: dict, progress: bool, stream) -> dict:
    import sys

    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
    from tqdm import tqdm

    from ..dynamics import Dynamics
    from ..dynamics.spatial import matrix_quaternion

    T = store.types
    zero = QosTime(0, 0)
    latched = [Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL, zero, zero,
                   QosLiveliness.AUTOMATIC, zero, False)]
    topics = {"/joint_states": "sensor_msgs/msg/JointState", "/tf": "tf2_msgs/msg/TFMessage",
              "/tf_static": "tf2_msgs/msg/TFMessage", "/robot_description": "std_msgs/msg/String"}
    topics.update({f"/{_token(s.name)}/{s.kind}": SENSOR_TOPICS[s.kind][1] for s in plan.sensors})
    conn = {topic: writer.add_connection(topic, kind, typestore=store,
                                         offered_qos_profiles=latched if topic in ("/tf_static", "/robot_description")
                                         else ()) for topic, kind in topics.items()}
    counts = dict.fromkeys(topics, 0)

    def put(topic, ns, msg):
        writer.write(conn[topic], int(ns), store.serialize_cdr(msg, topics[topic]))
        counts[topic] += 1

    def header(ns, frame):
        return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=int(ns // 1_000_000_000),
                                                                                nanosec=int(ns % 1_000_000_000)),
                                        frame_id=frame)

    def transform(ns, parent, child, rotation, translation):
        x, y, z, w = matrix_quaternion(tuple(float(v) for v in np.ravel(rotation)))
        return T["geometry_msgs/msg/TransformStamped"](
            header=header(ns, parent), child_frame_id=child,
            transform=T["geometry_msgs/msg/Transform"](translation=_vector(T, translation),
                                                       rotation=T["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w)))

    model, stamps = plan.model, plan.stamps
    first = int(stamps[0])
    put("/robot_description", first, T["std_msgs/msg/String"](data=plan.description.urdf))
    static = [transform(first, WORLD if f.body < 0 else model.body_names[f.body], f.name, f.rotation, f.translation)
              for f in model.frames if f.name != WORLD]
    put("/tf_static", first, T["tf2_msgs/msg/TFMessage"](transforms=static))
    links = [(WORLD if p < 0 else model.body_names[p], model.body_names[i]) for i, p in enumerate(model.parent)]
    dyn, q_full = Dynamics(model), model.neutral_configuration()
    q, extra = samples["q"], samples.get("extra")
    velocity, effort = samples.get("qd"), samples.get("effort")
    empty = np.zeros(0)
    tf_due = np.zeros(len(stamps), dtype=bool)
    tf_due[plan.tf_rows] = True
    skipped = 0
    for k in tqdm(range(len(stamps)), unit="sample", desc="exporting", disable=not progress, file=stream or sys.stderr):
        ns = int(stamps[k])
        put("/joint_states", ns, T["sensor_msgs/msg/JointState"](
            header=header(ns, ""), name=plan.joints, position=np.ascontiguousarray(q[k], dtype=np.float64),
            velocity=empty if velocity is None else velocity[k].astype(np.float64),
            effort=empty if effort is None else effort[k].astype(np.float64)))
        if tf_due[k]:
            poses = _relative_poses(plan, dyn, q_full, q[k], extra[k] if extra is not None else None)
            if poses is None:
                skipped += 1
            else:
                put("/tf", ns, T["tf2_msgs/msg/TFMessage"](
                    transforms=[transform(ns, parent, child, r, t) for (parent, child), r, t in zip(links, *poses)]))
        for s in plan.sensors:
            put(f"/{_token(s.name)}/{s.kind}", ns, _sensor_message(T, s, header(ns, s.frame_id), extra[k]))
    if skipped:
        plan.notes.append(f"{skipped} TF sample(s) skipped: their positions (or base pose) were not finite")
    return counts


def _relative_poses(plan: _Plan, dyn, q_full, q_row, extra_row):
    """Each body's rotation and origin in its parent's frame (the world's for a root) at one sample, from the
    world poses of rtctl's forward kinematics; None when the positions are not finite."""
    model = plan.model
    if plan.configuration is not None:
        q_full[:] = extra_row[plan.configuration]
    else:
        q_full[plan.q_index] = q_row
    if plan.base:
        q_full[plan.base[1]] = extra_row[plan.base[0]]
    if model.has_free_flyer and (plan.base or plan.configuration is not None):
        norm = np.linalg.norm(q_full[3:7])
        if not (np.isfinite(norm) and norm > 1e-6):
            return None
        q_full[3:7] /= norm
    if plan.mimic:
        followers, leaders, multipliers, offsets = plan.mimic
        q_full[followers] = multipliers * q_full[leaders] + offsets
    if not np.all(np.isfinite(q_full)):
        return None
    rotation, origin = dyn.forward_kinematics(q_full)
    parent = model.parent
    kids = parent >= 0
    up = parent[kids]
    rotation[kids], origin[kids] = (np.einsum("kji,kjl->kil", rotation[up], rotation[kids]),
                                    np.einsum("kji,kj->ki", rotation[up], origin[kids] - origin[up]))
    return rotation, origin


def _vector(T, values):
    x, y, z = (float(v) for v in values)
    return T["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)


def _sensor_message(T, sensor: _Sensor, header, row):
    c = sensor.columns
    if sensor.kind == "wrench":
        return T["geometry_msgs/msg/WrenchStamped"](header=header, wrench=T["geometry_msgs/msg/Wrench"](
            force=_vector(T, row[c["force"]]), torque=_vector(T, row[c["torque"]])))
    unknown = np.zeros(9)
    orientation = row[c["orientation"]] if "orientation" in c else None
    covariance = np.zeros(9)
    if orientation is None or not np.all(np.isfinite(orientation)):
        orientation, covariance[0] = np.zeros(4), -1.0      # sensor_msgs/Imu: no orientation estimate
    x, y, z, w = (float(v) for v in orientation)
    return T["sensor_msgs/msg/Imu"](
        header=header, orientation=T["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w),
        orientation_covariance=covariance, angular_velocity=_vector(T, row[c["angular_rate"]]),
        angular_velocity_covariance=unknown, linear_acceleration=_vector(T, row[c["specific_force"]]),
        linear_acceleration_covariance=unknown.copy())
