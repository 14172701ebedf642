"""The robot in Foxglove's 3D panel: frame transforms, primitives and force arrows from the telemetry rows.

The messages are Foxglove's well-known schemas, built and encoded by the official ``foxglove-sdk``
(``foxglove.messages``, protobuf, its schema descriptors): ``foxglove.FrameTransforms``,
``foxglove.SceneUpdate`` and ``foxglove.JointStates``
(https://docs.foxglove.dev/docs/visualization/message-schemas/). What a row of the stream holds becomes:

* ``/tf`` (FrameTransforms): one transform per body, from its parent body's frame (``world`` for a root) to
  its own, as robot_state_publisher does (the model's body names are the frame names); each sensor's frame
  under the body it is mounted on (``[[sensors]]`` ``frame``, ``mount_xyz``, ``mount_rpy``); for a floating
  base in simulation, the base as the drivers gave it (the simulator's truth) as ``truth/<base body>`` beside
  the estimate the controller sees; a Cartesian controller's target pose of its frame as ``target/<frame>``
  (:func:`target_pose_fields`);
* ``/rtctl/scene`` (SceneUpdate): the robot drawn with primitives locked to the body frames (a line from each
  body's origin to each child's joint, a sphere at each joint, each body's equivalent-inertia ellipsoid: the
  solid ellipsoid of the body's mass and principal moments), and arrows at the sensors for the measured
  forces: a force-torque sensor's force (in its frame), a contact sensor's normal force (world up);
* ``/joint_states`` (JointStates): the actuated joints by name (position, velocity, measured effort), so a
  plot is ``/joint_states.joints[:]{name=="elbow"}.position``.

The configuration drawn is the one the controller sees: the actuated joints from ``q`` and, for a robot whose
controller does not command every coordinate (a floating base, passive or mimic joints), the whole ``state.q``
published as the ``state/q/k`` extra fields by :class:`Configuration`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dynamics.spatial import matrix_quaternion
from ..rt.hooks import TelemetrySource

CHANNEL_TF, CHANNEL_SCENE, CHANNEL_JOINTS = "/tf", "/rtctl/scene", "/joint_states"
DEFAULT_SCENE_RATE = 30.0   # Hz of /tf and the force arrows: a screen's rate, not the loop's
WORLD = "world"
TRUTH = "truth/"
TARGET = "target/"
STATE_FIELD = "state/q/{}"
TRUTH_FIELD = "truth/q/{}"
FORCE_SCALE = 0.002        # m of arrow per N: 500 N is a 1 m arrow
LINE_THICKNESS = 0.01      # m
JOINT_DIAMETER = 0.03      # m
BODY_COLOR = (0.55, 0.6, 0.7, 0.5)
LINK_COLOR = (0.9, 0.9, 0.9, 1.0)
FORCE_COLOR = (0.95, 0.3, 0.1, 1.0)
CONTACT_COLOR = (0.1, 0.7, 0.3, 1.0)


class Configuration(TelemetrySource):
    """``state.q`` as telemetry (``state/q/k``): the configuration a viewer draws, for a robot whose controller
    does not command every coordinate. A view of the loop's state: nothing is copied by this source."""

    def __init__(self, loop):
        self.telemetry_values = loop.state.q
        self.telemetry_fields = tuple(STATE_FIELD.format(k) for k in range(loop.model.nq))
        self.telemetry_units = tuple(coordinate_units(loop.model))


def target_pose_fields(frame: str) -> tuple:
    """The telemetry names of a controller's target pose of ``frame`` (world rotation row-major, then origin):
    drawn as the frame ``target/<frame>``."""
    return tuple(f"{TARGET}{frame}/R/{k}" for k in range(9)) + tuple(f"{TARGET}{frame}/p/{a}" for a in "xyz")


def coordinate_units(model) -> list[str]:
    """The SI unit of each entry of ``q``: m or rad per joint, 1 for a free flyer's quaternion."""
    from ..model import FREE_FLYER, PRISMATIC
    units = []
    for i, kind in enumerate(model.joint_type):
        if kind == FREE_FLYER:
            units += ["m"] * 3 + ["1"] * 4
        else:
            size = (model.idx_q[i + 1] if i + 1 < model.nbodies else model.nq) - model.idx_q[i]
            units += ["m" if kind == PRISMATIC else "rad"] * int(size)
    return units


def configuration_sources(loop) -> list:
    """``[Configuration(loop)]`` when the controller's joints are not the whole ``q``, else ``[]``."""
    index = np.asarray(loop.controller.index[0])
    covered = index.size == loop.model.nq and np.array_equal(np.sort(index), np.arange(loop.model.nq))
    return [] if covered else [Configuration(loop)]


@dataclass(frozen=True)
class SensorMount:
    """Where a sensor is: its body (index, -1 the world), its axes and origin in that body's frame."""

    name: str
    kind: str
    body: int
    rotation: tuple
    translation: tuple


@dataclass(frozen=True)
class SceneSpec:
    """What a viewer needs besides the rows: the model and the sensors' mounts (picklable, for the publisher
    process)."""

    model: object
    sensors: tuple = ()

    @classmethod
    def of(cls, loop) -> "SceneSpec":
        return cls(loop.model, tuple(SensorMount(s.options.name, s.kind, int(s.body),
                                                 tuple(np.asarray(s.rotation).ravel()),
                                                 tuple(np.asarray(s.translation)))
                                     for s in loop.sensors))


def inertia_ellipsoid(mass: float, inertia: np.ndarray):
    """Diameters and principal axes of the uniform solid ellipsoid with ``mass`` and central ``inertia``:
    for semi-axes (a, b, c), I_a = m (b^2 + c^2) / 5, ... so a^2 = 5 (I_b + I_c - I_a) / (2 m). None for a
    massless body."""
    if not mass > 0:
        return None
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    total = moments.sum()
    squares = 5.0 * (total - 2.0 * moments) / (2.0 * mass)
    return 2.0 * np.sqrt(np.clip(squares, 0.0, None)), axes


class RobotScene:
    """Builds the 3D messages (module docstring) for rows of a stream with ``joints`` and ``extra`` names."""

    def __init__(self, spec: SceneSpec, layout, joints: list[str], extra: list[str]):
        from ..dynamics import Dynamics
        from foxglove import messages

        self.m = messages
        self.model = model = spec.model
        self.sensors = spec.sensors
        self.dynamics = Dynamics(model)
        self.joints = list(joints)
        self._q_cols = layout.slices["q"].start + np.arange(layout.n)
        self._qd_cols = layout.slices["qd"].start + np.arange(layout.n)
        self._effort_cols = layout.slices["effort"].start + np.arange(layout.n)
        extra_start = layout.slices["extra"].start
        column = {name: extra_start + k for k, name in enumerate(extra)}
        self._state_cols = self._columns(column, STATE_FIELD, model.nq)
        index = {name: i for i, name in enumerate(model.joint_names)}
        self._joint_q = np.array([model.idx_q[index[j]] for j in joints if j in index], dtype=np.int64)
        self._joint_cols = self._q_cols[[k for k, j in enumerate(joints) if j in index]]
        nq_base = int(model.idx_q[model.n_base_bodies]) if model.n_base_bodies < model.nbodies else model.nq
        self._truth_cols = self._columns(column, TRUTH_FIELD, nq_base) if model.n_base_bodies else None
        self._base_body = model.n_base_bodies - 1
        self._sensor_cols = {s.name: self._sensor_columns(column, s) for s in self.sensors}
        self._targets = [(name[len(TARGET):-len("/R/0")], np.array([column[f] for f in target_pose_fields(
            name[len(TARGET):-len("/R/0")])], dtype=np.int64)) for name in extra
            if name.startswith(TARGET) and name.endswith("/R/0")]
        self.q = model.neutral_configuration().astype(float)

    @staticmethod
    def _columns(column: dict, pattern: str, n: int):
        cols = [column.get(pattern.format(k)) for k in range(n)]
        return None if n == 0 or None in cols else np.array(cols, dtype=np.int64)

    @staticmethod
    def _sensor_columns(column: dict, sensor: SensorMount):
        names = ([f"{sensor.name}/force/{a}" for a in "xyz"] if sensor.kind == "force_torque"
                 else [f"{sensor.name}/force"] if sensor.kind == "contact" else [])
        cols = [column.get(n) for n in names]
        return None if not cols or None in cols else np.array(cols, dtype=np.int64)

    # -- the configuration of a row -----------------------------------------------------------------------
    def configuration(self, row: np.ndarray) -> np.ndarray:
        """The full ``q`` a row stands for (the controller's view); non-finite entries keep their last value."""
        q = self.q
        if self._state_cols is not None:
            values = row[self._state_cols]
            np.copyto(q, values, where=np.isfinite(values))
        else:
            values = row[self._joint_cols]
            ok = np.isfinite(values)
            q[self._joint_q[ok]] = values[ok]
        return q

    def _stamp(self, ns: int):
        return self.m.Timestamp(ns // 1_000_000_000, ns % 1_000_000_000)

    def _vector(self, v):
        return self.m.Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2]))

    def _quaternion(self, rotation):
        x, y, z, w = matrix_quaternion(tuple(np.asarray(rotation, dtype=float).ravel().tolist()))
        return self.m.Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))

    def _pose(self, rotation, translation):
        return self.m.Pose(position=self._vector(translation), orientation=self._quaternion(rotation))

    def _transform(self, stamp, parent: str, child: str, rotation, translation):
        return self.m.FrameTransform(timestamp=stamp, parent_frame_id=parent, child_frame_id=child,
                                     translation=self._vector(translation), rotation=self._quaternion(rotation))

    # -- the messages ---------------------------------------------------------------------------------------
    def frame(self, row: np.ndarray, ns: int) -> tuple[bytes, bytes]:
        """``/tf`` and the force arrows of ``/rtctl/scene`` (``b""``: no force sensor) for one row, from one
        forward kinematics."""
        rot, pos = self.dynamics.forward_kinematics(self.configuration(row))
        stamp = self._stamp(ns)
        return self._transforms(row, stamp, rot, pos), self._forces(row, stamp, rot, pos)

    def _transforms(self, row, stamp, rot, pos) -> bytes:
        """Every body under its parent, the sensors under their bodies, the true base beside."""
        model = self.model
        out = []
        for i, name in enumerate(model.body_names):
            p = int(model.parent[i])
            if p < 0:
                out.append(self._transform(stamp, WORLD, name, rot[i], pos[i]))
            else:
                out.append(self._transform(stamp, model.body_names[p], name, rot[p].T @ rot[i],
                                           rot[p].T @ (pos[i] - pos[p])))
        for s in self.sensors:
            parent = WORLD if s.body < 0 else model.body_names[s.body]
            out.append(self._transform(stamp, parent, s.name, np.reshape(s.rotation, (3, 3)), s.translation))
        for frame, cols in self._targets:
            pose = row[cols]
            if np.isfinite(pose).all():
                out.append(self._transform(stamp, WORLD, TARGET + frame, pose[:9].reshape(3, 3), pose[9:]))
        if self._truth_cols is not None:
            truth = row[self._truth_cols]
            if np.isfinite(truth).all():
                q = self.q.copy()
                q[:truth.size] = truth
                t_rot, t_pos = self.dynamics.forward_kinematics(q)
                b = self._base_body
                out.append(self._transform(stamp, WORLD, TRUTH + model.body_names[b], t_rot[b], t_pos[b]))
        return self.m.FrameTransforms(transforms=out).encode()

    def _forces(self, row, stamp, rot, pos) -> bytes:
        """An arrow per force sensor, :data:`FORCE_SCALE` m per N: a force-torque sensor's force in its own
        frame, a contact sensor's normal force pointing up from the foot (world axes); none while not read."""
        m = self.m
        entities = []
        for s in self.sensors:
            cols = self._sensor_cols[s.name]
            if cols is None:
                continue
            values = row[cols]
            arrows = []
            if np.isfinite(values).all():
                if s.kind == "force_torque":
                    force, frame, origin, color = values, s.name, np.zeros(3), FORCE_COLOR
                else:
                    body_rot, body_pos = (np.eye(3), np.zeros(3)) if s.body < 0 else (rot[s.body], pos[s.body])
                    origin = body_pos + body_rot @ np.asarray(s.translation)
                    force, frame, color = np.array([0.0, 0.0, values[0]]), WORLD, CONTACT_COLOR
                size = float(np.linalg.norm(force))
                if size > 0:
                    length = size * FORCE_SCALE
                    arrows.append(m.ArrowPrimitive(
                        pose=self._pose(_frame_along(force / size), origin), shaft_length=0.8 * length,
                        shaft_diameter=0.02, head_length=0.2 * length, head_diameter=0.04,
                        color=m.Color(r=color[0], g=color[1], b=color[2], a=color[3])))
            else:
                frame = s.name
            entities.append(m.SceneEntity(timestamp=stamp, frame_id=frame, id=f"force/{s.name}",
                                          frame_locked=frame != WORLD, arrows=arrows))
        return m.SceneUpdate(entities=entities).encode() if entities else b""

    def robot(self, ns: int) -> bytes:
        """The robot's primitives, one entity per body locked to its frame (module docstring)."""
        m, model, stamp = self.m, self.model, self._stamp(ns)
        link, body_color = _color(m, LINK_COLOR), _color(m, BODY_COLOR)
        identity = self._pose(np.eye(3), np.zeros(3))
        entities = []
        for i, name in enumerate(model.body_names):
            points = []
            for c in np.flatnonzero(model.parent == i):
                x, y, z = (float(v) for v in model.joint_translation[c])
                points += [m.Point3(x=0.0, y=0.0, z=0.0), m.Point3(x=x, y=y, z=z)]
            lines = [m.LinePrimitive(type=m.LinePrimitiveLineType.LineList, pose=identity, thickness=LINE_THICKNESS,
                                     points=points, color=link)] if points else []
            spheres = [m.SpherePrimitive(pose=identity, size=self._vector([JOINT_DIAMETER] * 3), color=link)]
            ellipsoid = inertia_ellipsoid(float(model.mass[i]), model.inertia_com[i])
            if ellipsoid is not None:
                diameters, axes = ellipsoid
                spheres.append(m.SpherePrimitive(pose=self._pose(axes, model.com[i]), size=self._vector(diameters),
                                                 color=body_color))
            entities.append(m.SceneEntity(timestamp=stamp, frame_id=name, id=f"body/{name}", frame_locked=True,
                                          lines=lines, spheres=spheres))
        return m.SceneUpdate(entities=entities).encode()

    def joint_states(self, row: np.ndarray, ns: int) -> bytes:
        """``/joint_states``: each actuated joint by name."""
        m = self.m
        q, v, e = row[self._q_cols], row[self._qd_cols], row[self._effort_cols]
        joints = [m.JointState(name=name, position=_number(q[k]), velocity=_number(v[k]), effort=_number(e[k]))
                  for k, name in enumerate(self.joints)]
        return m.JointStates(timestamp=self._stamp(ns), joints=joints).encode()


def _color(m, rgba):
    return m.Color(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])


def _number(x) -> float | None:
    return float(x) if np.isfinite(x) else None


def _frame_along(direction: np.ndarray) -> np.ndarray:
    """A rotation whose x axis is the unit ``direction`` (Foxglove's arrows point along their pose's x)."""
    x = direction
    helper = np.array([0.0, 0.0, 1.0]) if abs(x[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    y = np.cross(helper, x)
    y /= np.linalg.norm(y)
    return np.column_stack([x, y, np.cross(x, y)])
