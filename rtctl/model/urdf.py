"""Load a :class:`~rtctl.model.Model` from URDF (and write one back).

Read: ``<link><inertial>`` (origin, mass, inertia), ``<joint>`` (parent, child,
origin, axis, limit) of types revolute, continuous, prismatic, fixed and
floating. Visual and collision geometry is ignored. Fixed joints are merged
into their parent body; the merged links remain available as frames.

Every problem raises :class:`~rtctl.model.ModelError` naming the file and the
element (link or joint) at fault.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from . import FREE_FLYER, PRISMATIC, REVOLUTE, Model, ModelBuilder, ModelError, check_inertia, rpy_to_matrix

FLOATING_BASES = (None, "fixed", "free_flyer", "euler")

# URDF parsers (urdfdom) reject "inf", so an unbounded limit is written as the largest double
# and read back as infinite.
UNBOUNDED = float(np.finfo(np.float64).max)


def load_urdf(source: str | os.PathLike, floating_base: str | None = None, *,
              euler_sequence: str = "zyx") -> Model:
    """Parse a URDF file (or a string starting with ``<``) into a Model.

    ``floating_base``: ``None``/``"fixed"`` fixes the root link to the world;
    ``"free_flyer"`` adds a 6-DOF free-flyer root joint (Pinocchio's q/v
    convention); ``"euler"`` adds the 3-prismatic + 3-revolute Euler-angle
    joint chain. A URDF whose root is a ``world`` link joined by a
    ``floating`` joint gets a free-flyer whatever this argument says.
    """
    if floating_base not in FLOATING_BASES:
        raise ModelError(f"floating_base must be one of {FLOATING_BASES}, got {floating_base!r}")
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    text_source = isinstance(source, str) and source.lstrip().startswith("<")
    label = "<urdf string>" if text_source else os.fspath(source)
    try:
        root = ET.fromstring(source) if text_source else ET.parse(source).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ModelError(f"{label}: cannot read URDF: {exc}") from None
    return _UrdfReader(label, root, floating_base, euler_sequence).build()


class _UrdfReader:
    def __init__(self, label, root, floating_base, euler_sequence):
        self.label = label
        self.root = root
        self.floating_base = floating_base
        self.euler_sequence = euler_sequence

    def error(self, msg):
        return ModelError(f"{self.label}: {msg}")

    def floats(self, elem, attr, n, where, default=None):
        raw = elem.get(attr) if elem is not None else None
        if raw is None:
            if default is None:
                raise self.error(f"{where}: missing attribute '{attr}'")
            return np.asarray(default, dtype=float)
        try:
            vals = np.array([float(x) for x in raw.split()])
        except ValueError:
            raise self.error(f"{where}: attribute {attr}='{raw}' is not numeric") from None
        if vals.shape != (n,) or not np.all(np.isfinite(vals)):
            raise self.error(f"{where}: attribute {attr}='{raw}' must be {n} finite numbers")
        return vals

    def origin(self, elem, where):
        o = elem.find("origin") if elem is not None else None
        xyz = self.floats(o, "xyz", 3, f"{where} <origin>", default=(0, 0, 0))
        rpy = self.floats(o, "rpy", 3, f"{where} <origin>", default=(0, 0, 0))
        return rpy_to_matrix(rpy), xyz

    def inertial(self, link, name):
        """(mass, com, inertia about com in link axes) of a link; zeros if it has no <inertial>."""
        where = f"link '{name}'"
        inertial = link.find("inertial")
        if inertial is None:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        rot, xyz = self.origin(inertial, where + " <inertial>")
        mass_el = inertial.find("mass")
        if mass_el is None:
            raise self.error(f"{where}: <inertial> has no <mass>")
        (mass,) = self.floats(mass_el, "value", 1, where + " <mass>")
        if mass < 0:
            raise self.error(f"{where}: negative mass {mass}")
        i_el = inertial.find("inertia")
        if i_el is None:
            inertia = np.zeros((3, 3))
        else:
            c = {k: float(self.floats(i_el, k, 1, where + " <inertia>", default=(0,))[0])
                 for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
            inertia = np.array([[c["ixx"], c["ixy"], c["ixz"]],
                                [c["ixy"], c["iyy"], c["iyz"]],
                                [c["ixz"], c["iyz"], c["izz"]]])
        try:
            inertia = check_inertia(inertia, mass, where)
        except ModelError as exc:
            raise self.error(str(exc)) from None
        return mass, xyz, rot @ inertia @ rot.T

    def build(self) -> Model:
        if self.root.tag != "robot":
            raise self.error(f"root element is <{self.root.tag}>, expected <robot>")
        links = {}
        for link in self.root.findall("link"):
            name = link.get("name")
            if not name:
                raise self.error("a <link> has no name")
            if name in links:
                raise self.error(f"link '{name}' is defined twice")
            links[name] = link
        joints, child_of, children = {}, {}, {name: [] for name in links}
        for joint in self.root.findall("joint"):
            jname = joint.get("name")
            if not jname:
                raise self.error("a <joint> has no name")
            if jname in joints:
                raise self.error(f"joint '{jname}' is defined twice")
            joints[jname] = joint
            jtype = joint.get("type")
            if jtype is None:
                raise self.error(f"joint '{jname}': missing attribute 'type'")
            if jtype not in ("revolute", "continuous", "prismatic", "fixed", "floating"):
                raise self.error(f"joint '{jname}': unknown joint type '{jtype}'")
            ends = {}
            for tag in ("parent", "child"):
                el = joint.find(tag)
                if el is None or not el.get("link"):
                    raise self.error(f"joint '{jname}': missing <{tag} link=...>")
                if el.get("link") not in links:
                    raise self.error(f"joint '{jname}': {tag} link '{el.get('link')}' is not a defined link")
                ends[tag] = el.get("link")
            if ends["child"] in child_of:
                raise self.error(
                    f"joint '{jname}': link '{ends['child']}' already has parent joint '{child_of[ends['child']]}'"
                )
            child_of[ends["child"]] = jname
            children[ends["parent"]].append((jname, ends["child"]))
        if not links:
            raise self.error("no <link> elements")
        roots = [name for name in links if name not in child_of]
        if not roots:
            raise self.error(f"the joint graph has a cycle: {self.cycle_from(next(iter(links)), child_of, joints)}")
        if len(roots) > 1:
            raise self.error(f"more than one root link (links without a parent joint): {roots}")

        b = ModelBuilder(self.root.get("name") or "robot")
        root = roots[0]
        placement = {}  # link name -> (body index, rotation, translation) of the link frame in the body
        root_joints = children[root]
        floating = self.floating_base
        floating_at_root = [j for j, _ in root_joints if joints[j].get("type") == "floating"]
        if floating_at_root and len(root_joints) > 1:
            raise self.error(f"joint '{floating_at_root[0]}': a floating joint must be the only joint of the "
                             f"root link '{root}' ({len(root_joints)} joints leave it)")
        if len(root_joints) == 1 and joints[root_joints[0][0]].get("type") == "floating":
            floating = "free_flyer"
            b.add_frame(root, -1)
            placement[root] = (-1, np.eye(3), np.zeros(3))
            jname, root = root_joints[0]
            root_joint_name = jname
        else:
            root_joint_name = "root_joint"
        mass, com, inertia = self.inertial(links[root], root)
        try:
            if floating == "free_flyer":
                idx = b.add_body(root, -1, FREE_FLYER, joint_name=root_joint_name, mass=mass, com=com,
                                 inertia=inertia)
                placement[root] = (idx, np.eye(3), np.zeros(3))
            elif floating == "euler":
                idx = b.add_euler_floating_base(root, sequence=self.euler_sequence, mass=mass, com=com,
                                                inertia=inertia)
                placement[root] = (idx, np.eye(3), np.zeros(3))
            else:
                b.add_frame(root, -1)
                placement[root] = (-1, np.eye(3), np.zeros(3))
        except ModelError as exc:
            raise self.error(f"link '{root}' -> {exc}") from None

        # Depth-first pre-order, children in file order, so each serial chain gets contiguous
        # indices; an explicit stack, so chains of any length load.
        seen = {root}
        stack = [(jname, child, root) for jname, child in reversed(children[root])]
        while stack:
            jname, child, parent_link = stack.pop()
            if child in seen:
                raise self.error(f"joint '{jname}': link '{child}' is reached twice (cycle)")
            seen.add(child)
            body, p_rot, p_trans = placement[parent_link]
            placement[child] = self.add_joint(b, joints[jname], jname, child, links[child], body, p_rot, p_trans)
            stack.extend((j, c, child) for j, c in reversed(children[child]))
        unreached = set(links) - seen - {roots[0]}
        if unreached:
            raise self.error(f"links not connected to the root '{roots[0]}' form a cycle: "
                             f"{self.cycle_from(sorted(unreached)[0], child_of, joints)}")
        try:
            return b.build()
        except ModelError as exc:
            raise self.error(str(exc)) from None

    def cycle_from(self, link, child_of, joints):
        """Follow parent joints up from ``link`` until a link repeats; describe that cycle."""
        path, order = {}, []
        while link not in path:
            path[link] = len(order)
            jname = child_of[link]
            order.append(jname)
            link = joints[jname].find("parent").get("link")
        cycle = order[path[link]:]
        cycle_links = [joints[j].find("child").get("link") for j in cycle]
        return ("joints " + " -> ".join(f"'{j}'" for j in cycle)
                + " (links " + ", ".join(f"'{name}'" for name in cycle_links) + ")")

    def add_joint(self, b, joint, jname, child, child_link, body, p_rot, p_trans):
        """Add the body (or merge the fixed link) behind ``joint``; return the child link's placement."""
        where = f"joint '{jname}'"
        j_rot, j_trans = self.origin(joint, where)
        rot, trans = p_rot @ j_rot, p_trans + p_rot @ j_trans
        mass, com, inertia = self.inertial(child_link, child)
        jtype = joint.get("type")
        try:
            if jtype == "fixed":
                b.add_fixed(child, body, rotation=rot, translation=trans, mass=mass if body >= 0 else 0.0,
                            com=com, inertia=inertia if body >= 0 else None)
                return body, rot, trans
            if jtype == "floating":
                raise self.error(f"{where}: a floating joint is only supported at the root of the tree")
            axis = self.floats(joint.find("axis"), "xyz", 3, where + " <axis>", default=(1, 0, 0))
            lo, hi, vel, eff = self.limits(joint, jtype, where)
            idx = b.add_body(child, body, PRISMATIC if jtype == "prismatic" else REVOLUTE,
                             joint_name=jname, axis=axis, rotation=rot, translation=trans,
                             mass=mass, com=com, inertia=inertia, lower=lo, upper=hi,
                             velocity_limit=vel, effort_limit=eff)
            return idx, np.eye(3), np.zeros(3)
        except ModelError as exc:
            if str(exc).startswith(self.label):
                raise
            raise self.error(f"{where} -> {exc}") from None

    def limits(self, joint, jtype, where):
        lim = joint.find("limit")
        if jtype in ("revolute", "prismatic") and lim is None:
            raise self.error(f"{where}: a {jtype} joint needs a <limit> element")
        if lim is None:
            return -np.inf, np.inf, np.inf, np.inf
        def get(key, default):
            value = float(self.floats(lim, key, 1, where + " <limit>", default=(default,))[0])
            return value if abs(value) < UNBOUNDED else np.copysign(np.inf, value)

        vel, eff = get("velocity", np.inf), get("effort", np.inf)
        if jtype == "continuous":
            lo, hi = -np.inf, np.inf
        else:
            lo, hi = get("lower", 0.0), get("upper", 0.0)
        if lo > hi:
            raise self.error(f"{where}: <limit> lower={lo} exceeds upper={hi}")
        if vel < 0 or eff < 0:
            raise self.error(f"{where}: <limit> velocity and effort must be >= 0")
        return lo, hi, vel, eff


def model_to_urdf(model: Model) -> str:
    """Write a Model as URDF text that :func:`load_urdf` reads back to the same arrays and frames.

    Bodies hang from a ``world`` link (a free-flyer root as a ``floating``
    joint); merged frames become massless links on fixed joints. Unbounded
    joints are written with the largest double as limit -- URDF parsers reject
    ``inf`` -- and revolute joints always as ``revolute``, so every joint keeps
    one position coordinate in other URDF readers too.
    """
    lines = [f'<robot name="{model.name}">', '  <link name="world"/>']
    fmt = lambda v: " ".join(f"{x:.17g}" for x in v)  # noqa: E731
    for i in range(model.nbodies):
        c = model.com[i]
        inertia = model.inertia_com[i]
        lines += [
            f'  <link name="{model.body_names[i]}">',
            "    <inertial>",
            f'      <origin xyz="{fmt(c)}" rpy="0 0 0"/>',
            f'      <mass value="{model.mass[i]:.17g}"/>',
            f'      <inertia ixx="{inertia[0, 0]:.17g}" ixy="{inertia[0, 1]:.17g}" ixz="{inertia[0, 2]:.17g}" '
            f'iyy="{inertia[1, 1]:.17g}" iyz="{inertia[1, 2]:.17g}" izz="{inertia[2, 2]:.17g}"/>',
            "    </inertial>",
            "  </link>",
        ]

    def joint(name, kind, parent, child, rotation, translation):
        return [f'  <joint name="{name}" type="{kind}">',
                f'    <parent link="{parent}"/>', f'    <child link="{child}"/>',
                f'    <origin xyz="{fmt(translation)}" rpy="{fmt(_matrix_to_rpy(rotation))}"/>']

    for i in range(model.nbodies):
        p = model.parent[i]
        jt = int(model.joint_type[i])
        kind = {REVOLUTE: "revolute", PRISMATIC: "prismatic", FREE_FLYER: "floating"}[jt]
        lines += joint(model.joint_names[i], kind, "world" if p < 0 else model.body_names[p], model.body_names[i],
                       model.joint_rotation[i], model.joint_translation[i])
        if jt != FREE_FLYER:
            iq, iv = model.idx_q[i], model.idx_v[i]
            bound = lambda x: float(np.clip(x, -UNBOUNDED, UNBOUNDED))  # noqa: E731
            lines.append(f'    <axis xyz="{fmt(model.axis[i])}"/>')
            lines.append(f'    <limit lower="{bound(model.lower[iq]):.17g}" upper="{bound(model.upper[iq]):.17g}" '
                         f'effort="{bound(model.effort_limit[iv]):.17g}" '
                         f'velocity="{bound(model.velocity_limit[iv]):.17g}"/>')
        lines.append("  </joint>")
    for f in model.frames:
        if f.name == "world" or f.name in model.body_names:
            continue
        lines.append(f'  <link name="{f.name}"/>')
        parent = "world" if f.body < 0 else model.body_names[f.body]
        lines += joint(f"{f.name}_fixed", "fixed", parent, f.name, f.rotation, f.translation)
        lines.append("  </joint>")
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def _matrix_to_rpy(r: np.ndarray) -> np.ndarray:
    pitch = np.arctan2(-r[2, 0], np.hypot(r[0, 0], r[1, 0]))
    if abs(np.cos(pitch)) < 1e-12:
        return np.array([np.arctan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([np.arctan2(r[2, 1], r[2, 2]), pitch, np.arctan2(r[1, 0], r[0, 0])])
