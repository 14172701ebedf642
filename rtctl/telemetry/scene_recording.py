"""The 3D view in a recording: ``rtctl record`` writes ``/tf``, ``/rtctl/scene`` and ``/joint_states`` as the live
Foxglove server publishes them (:mod:`.scene`), from the robot description and the metadata the stream carries
(``rtctl/description``, ``rtctl/meta``), so Foxglove's 3D panel plays a recording as it shows a run.

The robot is the description's URDF read back (:func:`rtctl.model.urdf.load_urdf`; the sensors at their links,
``sensor_frames``), the configuration drawn the samples' ``state/q`` where the run published it, else the joints
by name. Samples that arrive before both the description and the metadata are recorded without the 3D view; a
description that cannot be read is said once and the recording goes on without it.
"""
from __future__ import annotations

import time

import numpy as np

from .scene import CHANNEL_JOINTS, CHANNEL_SCENE, CHANNEL_TF, DEFAULT_SCENE_RATE, RobotScene, SceneSpec, SensorMount
from .schema import JOINT_FIELDS, SCALAR_FIELDS, Layout, stamp_ns

KIND_OF_FIELD = {"force/x": "force_torque", "contact": "contact", "angular_rate/x": "imu"}


def sensor_kinds(extra: list) -> dict:
    """Sensor name -> kind, from the samples' extra field names (``NAME/force/x``, ``NAME/contact``, ...)."""
    kinds = {}
    for name in extra:
        for suffix, kind in KIND_OF_FIELD.items():
            if name.endswith("/" + suffix):
                kinds.setdefault(name[:-len(suffix) - 1], kind)
    return kinds


def rows_of_batch(layout: Layout, fields: dict, count: int) -> np.ndarray:
    """A decoded ``rtctl/samples`` batch's columns as ring rows (the publisher's :class:`~.schema.Layout`)."""
    rows = np.full((count, layout.width), np.nan)
    for name in (*SCALAR_FIELDS, *JOINT_FIELDS, "extra"):
        values = fields.get(name)
        if values is None:
            continue
        column = np.asarray(values, dtype=np.float64)
        target = rows[:, layout.slices[name]]
        if column.shape == (count,) and target.shape[1] == 1:
            rows[:, layout.slices[name].start] = column
        elif column.shape == target.shape:
            rows[:, layout.slices[name]] = column
        else:
            raise ValueError(f"samples field {name!r} has shape {list(column.shape)}, the metadata says "
                             f"{[count, target.shape[1]]}")
    return rows


class RecordedScene:
    """Writes the 3D channels into ``recording`` (a :class:`~.recording.McapRecording`) once it knows the robot."""

    def __init__(self, recording, rate: float = DEFAULT_SCENE_RATE, say=print):
        self.recording, self.period, self.say = recording, 1.0 / rate, say
        self.description = self.meta = None
        self.scene: RobotScene | None = None
        self.layout: Layout | None = None
        self._due = -np.inf
        self.failed = ""

    def described(self, msg: dict) -> None:
        if self.description is None and isinstance(msg.get("urdf"), str):
            self.description = msg
            self._build()

    def met(self, msg: dict) -> None:
        if self.meta is None and isinstance(msg.get("joints"), list):
            self.meta = msg
            self._build()

    def _build(self) -> None:
        if self.description is None or self.meta is None or self.scene is not None or self.failed:
            return
        from foxglove import messages

        from ..model.urdf import load_urdf

        try:
            joints, extra = list(self.meta["joints"]), list(self.meta.get("extra") or [])
            model = load_urdf(self.description["urdf"])
            links = self.description.get("sensor_frames") or {}
            sensors = []
            for name, kind in sensor_kinds(extra).items():
                if name in links:
                    frame = model.frame(links[name])
                    sensors.append(SensorMount(name, kind, int(frame.body), tuple(frame.rotation.ravel()),
                                               tuple(frame.translation)))
            self.layout = Layout(len(joints), len(extra))
            self.scene = RobotScene(SceneSpec(model, tuple(sensors)), self.layout, joints, extra)
        except (ValueError, KeyError, TypeError) as exc:
            self.failed = f"rtctl record: the 3D view is not recorded: the robot description: {exc}"
            self.say(self.failed)
            return
        for topic, message in ((CHANNEL_TF, messages.FrameTransforms), (CHANNEL_SCENE, messages.SceneUpdate),
                               (CHANNEL_JOINTS, messages.JointStates)):
            schema = message.get_schema()
            self.recording.channel(topic, schema.name, schema.encoding, bytes(schema.data), "protobuf")
        now = time.time_ns()
        self.recording.add(CHANNEL_SCENE, now, self.scene.robot(now))

    def samples(self, msg: dict) -> None:
        """The 3D messages of one ``rtctl/samples`` batch: named joints every sample, transforms and force arrows
        every ``1 / rate`` s of control time."""
        if self.scene is None:
            return
        count = int(msg["count"])
        try:
            rows = rows_of_batch(self.layout, msg["fields"], count)
        except ValueError as exc:
            self.failed = f"rtctl record: the 3D view stops: {exc}"
            self.say(self.failed)
            self.scene = None
            return
        t_col, stamp_col = self.layout.slices["t"].start, self.layout.slices["stamp"].start
        for row in rows:
            ns = stamp_ns(row[stamp_col])
            self.recording.add(CHANNEL_JOINTS, ns, self.scene.joint_states(row, ns))
            t = row[t_col]
            if np.isfinite(t) and t >= self._due:
                self._due = max(self._due + self.period, t)
                transforms, forces = self.scene.frame(row, ns)
                self.recording.add(CHANNEL_TF, ns, transforms)
                if forces:
                    self.recording.add(CHANNEL_SCENE, ns, forces)

