"""The robot description: the URDF of the model a run controls, on the ``rtctl/description`` topic.

What a viewer (Foxglove's URDF layer, RViz's RobotModel) and ``rtctl export --ros2`` need to draw the robot and
place its frames. The text is :func:`rtctl.model.urdf.model_to_urdf` of the model rtctl controls -- not the file
it was loaded from, whose meshes a viewer may not find and whose fixed links rtctl has merged -- so its links are
the bodies and frames rtctl computes, under a fixed ``world`` link (:data:`WORLD`), with

* primitive visuals, which ``model_to_urdf`` does not write: each body's equivalent inertia box (the uniform box
  of the body's mass and principal moments of inertia, centred on its centre of mass along its principal axes)
  and a cylinder from the body's origin to each child joint and each frame attached to it (the skeleton);
* one link per sensor (:class:`~rtctl.telemetry.scene.SensorMount`: the ``[[sensors]]`` ``frame``,
  ``mount_xyz`` and ``mount_rpy``) on a fixed joint from its body: ``NAME_link``, ``_sensor`` appended while a
  link or joint has that name; the message's ``sensor_frames`` maps each sensor's name to its link, the
  ``frame_id`` of its readings.

The publisher sends it once at the start and again when a subscriber joins (:class:`DescriptionTopic`): at once
for the first :data:`RESEND_BURST` sends, then at most once every :data:`RESEND_PERIOD` s however many join
(a token bucket: a flood of subscriptions costs at most one description a period), and not at all when it is
longer than :data:`MAX_DESCRIPTION_BYTES` (a warning says so when the run starts). ``rtctl record`` writes it once, as
``/robot_description`` (``{"data": URDF, "sensor_frames": {...}}``, a ``std_msgs/msg/String``'s ``data``
field, which Foxglove's URDF layer reads from a topic).
"""
from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np
import zmq

from ..model.urdf_writer import matrix_to_rpy, model_to_urdf
from .scene import WORLD, SceneSpec, SensorMount
from .schema import TOPIC_DESCRIPTION, envelope, pack

MAX_DESCRIPTION_BYTES = 1 << 20     # the longest description published or read (a 30-body model's is ~25 kB)
RESEND_PERIOD = 1.0                 # s: the sends' long-run period at most, however many subscribers join
RESEND_BURST = 4                    # sends at once before that period applies (the start, a few newcomers)
SEGMENT_RADIUS = (0.003, 0.1, 0.02)   # a skeleton cylinder's radius: this fraction of its length, within [m, m]
FLAT = 0.02                         # an inertia box's thinnest side, as a fraction of its longest
COLOURS = {"rtctl_inertia": "0.55 0.6 0.7 0.45", "rtctl_skeleton": "0.15 0.35 0.75 1"}


@dataclass(frozen=True)
class Description:
    """A robot description: ``urdf`` (text), ``sensor_frames`` (sensor name -> its link in the URDF)."""

    robot: str
    urdf: str
    sensor_frames: dict = field(default_factory=dict)


def robot_description(model, sensors=()) -> Description:
    """The description of ``model`` with a link per sensor of ``sensors`` (:class:`~.scene.SensorMount` s); see
    the module docstring. ``model_to_urdf`` hangs the bodies from a link named :data:`~.scene.WORLD`."""
    root = ET.fromstring(model_to_urdf(model))
    for name, rgba in COLOURS.items():
        material = ET.SubElement(root, "material", name=name)
        ET.SubElement(material, "color", rgba=rgba)
    links = {link.get("name"): link for link in root.iter("link")}
    for i, name in enumerate(model.body_names):
        for visual in _visuals(model, i):
            links[name].append(visual)
    joints = {joint.get("name") for joint in root.iter("joint")}
    sensor_frames = {}
    for mount in sensors:
        link = f"{mount.name}_link"
        while link in links or f"{link}_mount" in joints:
            link += "_sensor"
        links[link] = ET.SubElement(root, "link", name=link)
        joints.add(f"{link}_mount")
        joint = ET.SubElement(root, "joint", name=f"{link}_mount", type="fixed")
        ET.SubElement(joint, "parent", link=WORLD if mount.body < 0 else model.body_names[mount.body])
        ET.SubElement(joint, "child", link=link)
        rotation = np.reshape(mount.rotation, (3, 3))
        ET.SubElement(joint, "origin", xyz=_text(mount.translation, 17), rpy=_text(matrix_to_rpy(rotation), 17))
        sensor_frames[mount.name] = link
    ET.indent(root)
    return Description(model.name, ET.tostring(root, encoding="unicode") + "\n", sensor_frames)


def description_of_loop(loop) -> Description:
    """The description of a loop's model with its sensors (where the 3D view places them too)."""
    return robot_description(loop.model, SceneSpec.of(loop).sensors)


def sensor_mount(model, name: str, kind: str, frame: str, xyz=None, rpy=None) -> SensorMount:
    """A sensor's mount from its ``[[sensors]]`` keys (the link or frame, ``mount_xyz``, ``mount_rpy``), as the
    sensor computes it (:meth:`rtctl.model.Frame.mounted`); ModelError naming what is wrong."""
    mount = model.frame(frame).mounted(name, xyz, rpy)
    return SensorMount(name, kind, int(mount.body), tuple(mount.rotation.ravel()), tuple(mount.translation))


def _text(values, digits: int = 6) -> str:
    return " ".join(f"{float(v):.{digits}g}" for v in values)


def _visual(geometry: str, size: dict, xyz, rotation, material: str) -> ET.Element:
    visual = ET.Element("visual")
    ET.SubElement(visual, "origin", xyz=_text(xyz), rpy=_text(matrix_to_rpy(rotation)))
    ET.SubElement(ET.SubElement(visual, "geometry"), geometry, **size)
    ET.SubElement(visual, "material", name=material)
    return visual


def inertia_box(mass: float, inertia) -> tuple[np.ndarray, np.ndarray]:
    """(sides (3,) m, axes (3, 3): a rotation whose columns are the principal axes) of the uniform box of
    ``mass`` with the rotational inertia ``inertia`` about its centre: I_1 = m (b^2 + c^2) / 12 and its cyclic
    permutations, so a^2 = 6 (I_2 + I_3 - I_1) / m (0 where an inconsistent inertia makes that negative)."""
    moments, axes = np.linalg.eigh(np.asarray(inertia, dtype=float))
    if np.linalg.det(axes) < 0:
        axes[:, 2] = -axes[:, 2]
    sides = np.sqrt(np.maximum(6.0 * (moments.sum() - 2.0 * moments) / mass, 0.0))
    return sides, axes


def _visuals(model, i: int) -> list:
    """Body ``i``'s inertia box (none for a massless body) and its skeleton cylinders."""
    out = []
    if model.mass[i] > 0:
        sides, axes = inertia_box(model.mass[i], model.inertia_com[i])
        if np.all(np.isfinite(sides)) and sides.max() > 0:
            sides = np.maximum(sides, FLAT * sides.max())
            out.append(_visual("box", {"size": _text(sides)}, model.com[i], axes, "rtctl_inertia"))
    ends = [model.joint_translation[c] for c in np.flatnonzero(model.parent == i)]
    ends += [f.translation for f in model.frames if f.body == i]
    low, fraction, high = SEGMENT_RADIUS
    for end in ends:
        length = float(np.linalg.norm(end))
        if length > 1e-6:
            radius = min(max(fraction * length, low), high)
            out.append(_visual("cylinder", {"radius": _text([radius]), "length": _text([length])}, 0.5 * end,
                               _z_along(end / length), "rtctl_skeleton"))
    return out


def _z_along(unit) -> np.ndarray:
    """A rotation whose third column is ``unit`` (a cylinder's axis: URDF's cylinders lie along z)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(unit[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, unit)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(unit, x), unit])


class DescriptionTopic:
    """The publisher's ``rtctl/description``: sent at the first :meth:`greet`, then after each newcomer, from a
    bucket of :data:`RESEND_BURST` sends refilled by one every :data:`RESEND_PERIOD` s (a subscriber joining
    while it is empty gets it when it refills); never when the description is longer than
    :data:`MAX_DESCRIPTION_BYTES` or there is none (``description`` None)."""

    def __init__(self, description: Description | None):
        self.payload = None
        if description is not None:
            payload = pack(envelope(robot=description.robot, urdf=description.urdf,
                                    sensor_frames=description.sensor_frames))
            if len(payload) <= MAX_DESCRIPTION_BYTES:
                self.payload = payload
            else:
                warnings.warn(f"telemetry: the robot description of {description.robot!r} takes {len(payload)} bytes, "
                              f"more than the {MAX_DESCRIPTION_BYTES} published: it is not published", stacklevel=2)
        self.sent = 0
        self._pending = True
        self._tokens, self._refilled = float(RESEND_BURST), None

    @classmethod
    def of_loop(cls, loop) -> "DescriptionTopic":
        try:
            return cls(description_of_loop(loop))
        except ValueError as exc:       # a model the URDF writer cannot describe: the run goes on without
            warnings.warn(f"telemetry: no robot description: {exc}", stacklevel=2)
            return cls(None)

    def greet(self, pub, now: float, joined: bool) -> bool:
        """Send on ``pub`` if due (``joined``: a subscriber joined); returns ``joined``."""
        self._pending = self._pending or joined
        if self._pending and self.payload is not None:
            elapsed = 0.0 if self._refilled is None else now - self._refilled
            self._tokens, self._refilled = min(RESEND_BURST, self._tokens + elapsed / RESEND_PERIOD), now
            if self._tokens >= 1.0:
                pub.send_multipart([TOPIC_DESCRIPTION, self.payload], flags=zmq.NOBLOCK)
                self.sent += 1
                self._tokens, self._pending = self._tokens - 1.0, False
        return joined
