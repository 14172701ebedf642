"""Load a :class:`~rtctl.model.Model` from URDF (and write one back).

Read: ``<link><inertial>`` (origin, mass, inertia), ``<joint>`` (parent, child,
origin, axis, limit, dynamics, mimic) of types revolute, continuous, prismatic,
fixed and floating. Visual and collision geometry, ``<calibration>`` and
``<safety_controller>`` are ignored. Fixed joints are merged into their parent
body -- mass, centre of mass and inertia (parallel-axis), a massless child's
inertia included; the merged links remain available as frames. Planar joints,
and floating joints anywhere but at the root, are refused naming the joint.

* Links without ``<inertial>``, massless links and massless links carrying an
  inertia load; where they leave a joint moving nothing, inverse dynamics and
  the mass matrix work and forward dynamics raises naming the joints
  (:mod:`rtctl.model.massless`).
* Physically inconsistent inertias follow the ``inertia`` policy of
  :mod:`rtctl.model.inertia`: ``"warn"`` (default: load as written, one warning
  listing every offending link), ``"strict"`` or ``"repair"``; the findings are
  kept in ``model.inertia_findings``.
* ``<mimic joint multiplier offset>`` (defaults 1 and 0) on a revolute,
  continuous or prismatic joint couples it to its leader: ``model.mimic`` is the
  :class:`~rtctl.model.mimic.MimicCoupling`; the model itself keeps every joint
  (as Pinocchio without ``mimic=True``). A ``<mimic>`` on a fixed joint has no
  coordinate to couple and is ignored.
* ``<dynamics damping friction>`` (defaults 0, numbers >= 0) go to
  ``model.damping`` and ``model.friction`` per DOF; the dynamics do not apply them.
* The floating base is the caller's choice (``floating_base``) or the tree's
  root (a ``floating`` joint leaving the root link); joint names play no part.

Every problem raises :class:`~rtctl.model.ModelError` naming the file and the
element (link or joint) at fault; nothing else escapes for any file content
(XML errors, unknown encodings, numeric overflow included).

Validation decisions (following the URDF spec, wiki.ros.org/urdf/XML/joint,
and urdfdom, the parser ROS and Pinocchio use):

* ``<limit>`` is required for revolute and prismatic joints. Wherever a
  ``<limit>`` element is present -- on any joint type, continuous, fixed and
  floating included, exactly as urdfdom parses it -- its ``effort`` and
  ``velocity`` attributes are required (urdfdom: "joint limit: no effort" /
  "no velocity") and must be numbers >= 0; ``lower`` and ``upper`` default
  to 0. A continuous joint may omit ``<limit>`` (then velocity and effort are
  unbounded); its ``lower``/``upper`` are checked as numbers but ignored (the
  joint is unbounded). The values of a ``<limit>`` on a fixed or floating
  joint are checked and ignored.
* Numbers follow the XML Schema ``xs:double`` lexical space and nothing more:
  optional sign, ASCII digits with an optional decimal point, optional
  exponent (``-1``, ``.5``, ``2.``, ``+3.5E-2``), surrounded by optional XML
  white space; vectors (``xyz``, ``rpy``) are exactly that many numbers
  separated by XML white space (space, tab, CR, LF). Python's ``float()``
  extras are refused: ``1_5``, non-ASCII digits, ``inf``/``infinity``/``nan``
  in any spelling, Unicode spaces. The xs:double special values ``INF``,
  ``+INF``, ``-INF`` and ``NaN`` are recognised but refused everywhere, as is
  a literal beyond the double range (``1e999``): every value the loader reads
  must be finite. An unbounded limit is written as the largest double
  (``1.7976931348623157e+308``, what :func:`model_to_urdf` writes) and read
  back as infinite.
* A document type declaration (``<!DOCTYPE ...>``) is refused. URDFs never
  need one, and it is the only place entities can be declared, so this
  rules out entity-expansion bombs ("billion laughs") and external entities
  (XXE): the document is refused at the ``<!DOCTYPE``, before any element.
"""
from __future__ import annotations

import math
import os
import warnings

import numpy as np

from . import (
    FREE_FLYER,
    PRISMATIC,
    REVOLUTE,
    Model,
    ModelBuilder,
    ModelError,
    check_inertia,
    rpy_to_matrix,
)
from ..options import show_all
from .inertia import DEFAULT_INERTIA_POLICY, InertiaPolicy
from .mimic import MimicCoupling, MimicJoint, MimicWarning

# model_to_urdf, UNBOUNDED and parse_xs_double are part of this module's API.
from .urdf_writer import UNBOUNDED, model_to_urdf  # noqa: F401
from .urdf_xml import (  # noqa: F401
    UNBOUNDED_HELP,
    XML_SPACE,
    looks_like_xml,
    parse_xml,
    parse_xs_double,
    show,
    xs_double,
)

FLOATING_BASES = (None, "fixed", "free_flyer", "euler", "planar")

# What numpy raises under load_urdf's np.errstate when finite inputs overflow.
_NUMERIC_FAILURES = (FloatingPointError, np.linalg.LinAlgError)


def load_urdf(source: str | bytes | os.PathLike, floating_base: str | None = None, *,
              euler_sequence: str = "zyx", inertia: str = DEFAULT_INERTIA_POLICY) -> Model:
    """Parse a URDF file (or a document: a string or bytes starting with ``<``) into a Model.

    Bytes that are a document are decoded as its XML declaration says
    (UTF-8 by default); other bytes are a file path.

    ``floating_base``: ``None``/``"fixed"`` fixes the root link to the world;
    ``"free_flyer"`` adds a 6-DOF free-flyer root joint (Pinocchio's q/v
    convention); ``"euler"`` adds the 3-prismatic + 3-revolute Euler-angle
    joint chain; ``"planar"`` the x-z planar base (prismatic x, z, revolute y).
    A URDF whose root is a ``world`` link joined by a ``floating`` joint gets a
    free-flyer whatever this argument says. The model's ``base`` is the one
    added (``"fixed"`` without), so joints written out in the URDF -- an Euler
    chain saved by :func:`model_to_urdf` included -- are all actuated joints of
    a fixed-base model.

    ``inertia``: what to do with physically inconsistent inertias -- ``"warn"``,
    ``"strict"`` or ``"repair"`` (see :mod:`rtctl.model.inertia`).
    """
    if floating_base not in FLOATING_BASES:
        raise ModelError(f"floating_base must be one of {FLOATING_BASES}, got {floating_base!r}")
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    text_source = looks_like_xml(source)
    if isinstance(source, bytes) and not text_source:
        source = os.fsdecode(source)
    label = "<urdf string>" if text_source else os.fspath(source)
    policy = InertiaPolicy(inertia, label)
    root = parse_xml(source, label, text_source)
    # Overflow and invalid operations become errors (turned into ModelError naming the element),
    # so absurd but finite numbers never give a model with inf/NaN in it or a warning.
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        try:
            return _UrdfReader(label, root, floating_base, euler_sequence, policy).build()
        except _NUMERIC_FAILURES as exc:
            raise ModelError(f"{label}: numeric overflow building the model (masses, inertias or "
                             f"offsets too large): {exc}") from None


class _UrdfReader:
    def __init__(self, label, root, floating_base, euler_sequence, inertia_policy):
        self.label = label
        self.root = root
        self.floating_base = floating_base
        self.euler_sequence = euler_sequence
        self.inertia_policy = inertia_policy
        self.mimics = []

    def error(self, msg):
        return ModelError(f"{self.label}: {msg}")

    def floats(self, elem, attr, n, where, default=None):
        """Attribute ``attr`` of ``elem`` as exactly ``n`` finite xs:double numbers (``default`` if absent)."""
        raw = elem.get(attr) if elem is not None else None
        if raw is None:
            if default is None:
                raise self.error(f"{where}: missing attribute '{attr}'")
            return np.array(default, dtype=float)
        shown = f"attribute {attr}={show(raw)}"
        tokens = [t for t in XML_SPACE.split(raw) if t]
        values = []
        for k, token in enumerate(tokens):
            value, problem = xs_double(token)
            if problem:
                if len(tokens) > 1:  # say which item: "... is not numeric: number 2 of 3, 'a', ..."
                    kind, reason = problem.split(": ", 1)
                    problem = f"{kind}: number {k + 1} of {len(tokens)}, {show(token)}, {reason}"
                raise self.error(f"{where}: {shown} {problem}")
            values.append(value)
        if len(values) != n:
            what = "one number" if n == 1 else f"{n} numbers separated by white space"
            raise self.error(f"{where}: {shown} must be {what}, got {len(values)}")
        return np.array(values)

    def number(self, elem, attr, where, default=None):
        return float(self.floats(elem, attr, 1, where, None if default is None else (default,))[0])

    def origin(self, elem, where):
        """Rotation and translation of ``elem``'s ``<origin>``; ``where`` names that origin element."""
        o = elem.find("origin") if elem is not None else None
        xyz = self.floats(o, "xyz", 3, where, default=(0, 0, 0))
        rpy = self.floats(o, "rpy", 3, where, default=(0, 0, 0))
        return rpy_to_matrix(rpy), xyz

    def inertial(self, link, name):
        """(mass, com, inertia about com in link axes) of a link; zeros if it has no <inertial>."""
        where = f"link {show(name)} <inertial>"
        inertial = link.find("inertial")
        if inertial is None:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        rot, xyz = self.origin(inertial, where + "<origin>")
        mass_el = inertial.find("mass")
        if mass_el is None:
            raise self.error(f"link {show(name)}: <inertial> has no <mass>")
        mass = self.number(mass_el, "value", where + "<mass>")
        if mass < 0:
            raise self.error(f"{where}<mass>: negative mass value={show(mass_el.get('value'))}")
        i_el = inertial.find("inertia")
        if i_el is None:
            inertia = np.zeros((3, 3))
        else:
            c = {k: self.number(i_el, k, where + "<inertia>", default=0.0)
                 for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
            inertia = np.array([[c["ixx"], c["ixy"], c["ixz"]],
                                [c["ixy"], c["iyy"], c["iyz"]],
                                [c["ixz"], c["iyz"], c["izz"]]])
        try:
            inertia = self.inertia_policy.inspect(name, check_inertia(inertia, mass, f"link {show(name)}", False))
            return mass, xyz, rot @ inertia @ rot.T
        except ModelError as exc:
            raise self.error(str(exc)) from None
        except _NUMERIC_FAILURES as exc:
            raise self.error(f"{where}<inertia>: numeric overflow ({exc})") from None

    def build(self) -> Model:
        if self.root.tag != "robot":
            raise self.error(f"root element {show(self.root.tag)} is not <robot>")
        links = self.read_links()
        joints, child_of, children = self.read_joints(links)
        root = self.root_link(links, child_of, joints)
        b = ModelBuilder(self.root.get("name") or "robot", require_physical_inertia=False)
        placement = {}  # link name -> (body index, rotation, translation) of the link frame in the body
        base_link = self.add_base(b, root, links, joints, children, placement)
        seen = self.add_tree(b, base_link, links, joints, children, placement)
        unreached = set(links) - seen - {root}
        if unreached:
            raise self.error(f"links not connected to the root {show(root)} form a cycle: "
                             f"{self.cycle_from(sorted(unreached)[0], child_of, joints)}")
        if b.nbodies == 0:
            raise self.error(f"no movable joint: the tree below root link {show(root)} is one rigid body; load it with "
                             "floating_base='free_flyer' (6 DOFs) or add joints")
        try:
            model = b.build()
            model.mimic = self.mimic_coupling(model)
        except ModelError as exc:
            raise self.error(str(exc)) from None
        self.inertia_policy.finish()
        model.inertia_findings = list(self.inertia_policy.findings)
        return model

    def mimic_coupling(self, model):
        """The coupling of the mimic joints whose leader is a movable joint; the others load as independent
        joints (what URDF readers that ignore <mimic> do), with one warning naming them."""
        dangling = [m for m in self.mimics if m.leader not in model.joint_names]
        if dangling:
            listed = "".join(f"\n  joint {show(m.name)} mimics {show(m.leader)}" for m in dangling)
            warnings.warn(f"{self.label}: {len(dangling)} <mimic> element(s) name no movable joint of the model; "
                          f"those joints load as independent joints:{listed}", MimicWarning, stacklevel=4)
        kept = [m for m in self.mimics if m not in dangling]
        return MimicCoupling(model, kept) if kept else None

    def read_links(self) -> dict:
        """The ``<link>`` elements by name."""
        links = {}
        for link in self.root.findall("link"):
            name = link.get("name")
            if not name:
                raise self.error("a <link> has no name")
            if name in links:
                raise self.error(f"link {show(name)} is defined twice")
            links[name] = link
        return links

    def read_joints(self, links):
        """``(joints, child_of, children)``: the ``<joint>`` elements by name, the parent joint of each
        child link, and the ``(joint, child link)`` pairs leaving each link, in file order."""
        joints, child_of, children = {}, {}, {name: [] for name in links}
        for joint in self.root.findall("joint"):
            jname = joint.get("name")
            if not jname:
                raise self.error("a <joint> has no name")
            if jname in joints:
                raise self.error(f"joint {show(jname)} is defined twice")
            joints[jname] = joint
            jtype = joint.get("type")
            if jtype is None:
                raise self.error(f"joint {show(jname)}: missing attribute 'type'")
            if jtype == "planar":
                raise self.error(f"joint {show(jname)}: planar joints are not supported (use revolute and prismatic "
                                 "joints through massless links, or floating_base='planar' for an x-z base)")
            if jtype not in ("revolute", "continuous", "prismatic", "fixed", "floating"):
                raise self.error(f"joint {show(jname)}: unknown joint type {show(jtype)}")
            ends = {}
            for tag in ("parent", "child"):
                el = joint.find(tag)
                if el is None or not el.get("link"):
                    raise self.error(f"joint {show(jname)}: missing <{tag} link=...>")
                if el.get("link") not in links:
                    raise self.error(f"joint {show(jname)}: {tag} link {show(el.get('link'))} is not a defined link")
                ends[tag] = el.get("link")
            if ends["child"] in child_of:
                raise self.error(f"joint {show(jname)}: link {show(ends['child'])} already has parent joint "
                                 f"{show(child_of[ends['child']])}")
            if jtype in ("fixed", "floating"):
                # Numbers the tree walk does not use are still checked: a floating root joint's
                # <origin>, and (as urdfdom does) a <limit> on a fixed or floating joint.
                self.origin(joint, f"joint {show(jname)} <origin>")
                self.limits(joint, jtype, f"joint {show(jname)}")
            child_of[ends["child"]] = jname
            children[ends["parent"]].append((jname, ends["child"]))
        return joints, child_of, children

    def root_link(self, links, child_of, joints) -> str:
        """The one link without a parent joint."""
        if not links:
            raise self.error("no <link> elements")
        roots = [name for name in links if name not in child_of]
        if not roots:
            raise self.error(f"the joint graph has a cycle: {self.cycle_from(next(iter(links)), child_of, joints)}")
        if len(roots) > 1:
            raise self.error(f"more than one root link (links without a parent joint): {show_all(roots)}")
        return roots[0]

    def add_base(self, b, root, links, joints, children, placement) -> str:
        """Attach the root link to the world as the declared base; return the link the base carries.

        A root link whose only joint is ``floating`` is the world: its child gets a
        free-flyer, whatever ``floating_base`` says.
        """
        root_joints = children[root]
        floating = self.floating_base
        floating_at_root = [j for j, _ in root_joints if joints[j].get("type") == "floating"]
        if floating_at_root and len(root_joints) > 1:
            raise self.error(f"joint {show(floating_at_root[0])}: a floating joint must be the only joint of the "
                             f"root link {show(root)} ({len(root_joints)} joints leave it)")
        root_joint_name = "root_joint"
        if floating_at_root:
            floating = "free_flyer"
            b.add_frame(root, -1)
            placement[root] = (-1, np.eye(3), np.zeros(3))
            root_joint_name, root = root_joints[0]
        mass, com, inertia = self.inertial(links[root], root)
        try:
            if floating == "free_flyer":
                idx = b.add_body(root, -1, FREE_FLYER, joint_name=root_joint_name, mass=mass, com=com,
                                 inertia=inertia)
            elif floating == "euler":
                idx = b.add_euler_floating_base(root, sequence=self.euler_sequence, mass=mass, com=com,
                                                inertia=inertia)
            elif floating == "planar":
                idx = b.add_planar_floating_base(root, mass=mass, com=com, inertia=inertia)
            else:
                idx = -1
                b.add_frame(root, -1)
        except ModelError as exc:
            raise self.error(f"link {show(root)} -> {exc}") from None
        except _NUMERIC_FAILURES as exc:
            raise self.error(f"link {show(root)}: numeric overflow ({exc})") from None
        placement[root] = (idx, np.eye(3), np.zeros(3))
        return root

    def add_tree(self, b, root, links, joints, children, placement) -> set:
        """Add the links below ``root``; return the names of the links reached (``root`` included).

        Depth-first pre-order, children in file order, so each serial chain gets contiguous
        indices; an explicit stack, so chains of any length load.
        """
        seen = {root}
        stack = [(jname, child, root) for jname, child in reversed(children[root])]
        while stack:
            jname, child, parent_link = stack.pop()
            if child in seen:
                raise self.error(f"joint {show(jname)}: link {show(child)} is reached twice (cycle)")
            seen.add(child)
            body, p_rot, p_trans = placement[parent_link]
            placement[child] = self.add_joint(b, joints[jname], jname, child, links[child], body, p_rot, p_trans)
            stack.extend((j, c, child) for j, c in reversed(children[child]))
        return seen

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
        return ("joints " + " -> ".join(show(j) for j in cycle)
                + " (links " + ", ".join(show(name) for name in cycle_links) + ")")

    def axis(self, joint, where):
        """The unit joint axis; the norm is taken after scaling by the largest component, so huge or
        tiny components neither overflow nor underflow."""
        axis_el = joint.find("axis")
        axis = self.floats(axis_el, "xyz", 3, where + " <axis>", default=(1, 0, 0))
        scale = float(np.abs(axis).max())
        norm = scale * float(np.linalg.norm(axis / scale)) if scale > 0 else 0.0
        if norm < 1e-12:
            raise self.error(f"{where} <axis>: attribute xyz={show(axis_el.get('xyz'))} is not a direction "
                             "(zero or shorter than 1e-12)")
        return (axis / scale) / (norm / scale)

    def add_joint(self, b, joint, jname, child, child_link, body, p_rot, p_trans):
        """Add the body (or merge the fixed link) behind ``joint``; return the child link's placement."""
        where = f"joint {show(jname)}"
        jtype = joint.get("type")
        j_rot, j_trans = self.origin(joint, where + " <origin>")
        mass, com, inertia = self.inertial(child_link, child)
        try:
            rot, trans = p_rot @ j_rot, p_trans + p_rot @ j_trans
            if jtype == "fixed":
                b.add_fixed(child, body, rotation=rot, translation=trans, mass=mass if body >= 0 else 0.0,
                            com=com, inertia=inertia if body >= 0 else None)
                return body, rot, trans
            if jtype == "floating":
                raise self.error(f"{where}: a floating joint is only supported at the root of the tree")
            axis = self.axis(joint, where)
            lo, hi, vel, eff = self.limits(joint, jtype, where)
            damping, friction = self.joint_dynamics(joint, where)
            self.read_mimic(joint, jname)
            idx = b.add_body(child, body, PRISMATIC if jtype == "prismatic" else REVOLUTE,
                             joint_name=jname, axis=axis, rotation=rot, translation=trans,
                             mass=mass, com=com, inertia=inertia, lower=lo, upper=hi,
                             velocity_limit=vel, effort_limit=eff, damping=damping, friction=friction)
            return idx, np.eye(3), np.zeros(3)
        except ModelError as exc:
            if str(exc).startswith(self.label):
                raise
            raise self.error(f"{where} -> {exc}") from None
        except _NUMERIC_FAILURES as exc:
            raise self.error(f"{where}: numeric overflow placing link {show(child)} (origins, masses or "
                             f"inertias too large): {exc}") from None

    def joint_dynamics(self, joint, where):
        """(damping, friction) of ``<dynamics>``, 0 where absent; each a number >= 0."""
        dyn = joint.find("dynamics")
        values = []
        for key in ("damping", "friction"):
            value = self.number(dyn, key, where + " <dynamics>", 0.0) if dyn is not None else 0.0
            if value < 0:
                raise self.error(f"{where} <dynamics>: attribute {key}={show(dyn.get(key))} must be >= 0")
            values.append(value)
        return tuple(values)

    def read_mimic(self, joint, jname):
        """Record ``<mimic joint multiplier offset>`` of a movable joint (multiplier 1, offset 0 by default)."""
        mimic = joint.find("mimic")
        if mimic is None:
            return
        where = f"joint {show(jname)} <mimic>"
        leader = mimic.get("joint")
        if not leader:
            raise self.error(f"{where}: missing attribute 'joint' (the joint it mimics)")
        if leader == jname:
            raise self.error(f"{where}: a joint cannot mimic itself")
        self.mimics.append(MimicJoint(jname, leader, self.number(mimic, "multiplier", where, 1.0),
                                      self.number(mimic, "offset", where, 0.0)))

    def limits(self, joint, jtype, where):
        """(lower, upper, velocity, effort) of a joint; infinite where unbounded."""
        lim = joint.find("limit")
        if lim is None:
            if jtype in ("revolute", "prismatic"):
                raise self.error(f"{where}: a {jtype} joint needs a <limit> element")
            return -np.inf, np.inf, np.inf, np.inf
        where = where + " <limit>"
        for key in ("effort", "velocity"):
            if lim.get(key) is None:
                raise self.error(f"{where}: missing attribute '{key}' (the URDF spec requires effort and "
                                 "velocity on every <limit>; " + UNBOUNDED_HELP + ")")

        def get(key, default=None):
            value = self.number(lim, key, where, default)
            return value if abs(value) < UNBOUNDED else math.copysign(math.inf, value)

        eff, vel = get("effort"), get("velocity")
        lo, hi = get("lower", 0.0), get("upper", 0.0)
        for key, value in (("effort", eff), ("velocity", vel)):
            if value < 0:
                raise self.error(f"{where}: attribute {key}={show(lim.get(key))} must be >= 0")
        if jtype not in ("revolute", "prismatic"):
            return -np.inf, np.inf, vel, eff
        if lo > hi:
            raise self.error(f"{where}: lower={lo} exceeds upper={hi}")
        return lo, hi, vel, eff
