"""The declarative description of a geared robotic mechanism (Chen & Wang, 1998): links, turning pairs
(thin edges) and gear pairs (heavy edges), and their dict / TOML form (the ``[mechanism]`` table).

:func:`check_schema` checks a ``[mechanism]`` table against its schema (:class:`MechanismOptions`,
:class:`LinkOptions`, :class:`TurningPairOptions`, :class:`GearPairOptions`, built on
:func:`rtctl.options.check_table`): a wrong key or value is a :class:`~rtctl.options.ConfigError` naming the
file, the section, the element and the key. :class:`rtctl.plants.geared.model.GearedMechanism` derives the
structure and dynamics from the checked description.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rtctl.model import ModelError, check_inertia
from rtctl.options import ConfigError, check_table, did_you_mean, read_toml, schema_keys, setting

__all__ = ["GearPair", "GearedMechanismError", "Link", "TurningPair", "MechanismOptions", "LinkOptions",
           "TurningPairOptions", "GearPairOptions", "check_schema", "mechanism_arguments", "parse_description",
           "read_mechanism_table"]

GEAR_KINDS = ("external", "internal", "bevel")


class GearedMechanismError(ValueError):
    """An invalid GRM description; the message names the offending element."""


@dataclass
class Link:
    """A link. Primary links need ``dh`` (except the base); secondary links need ``axis`` and ``axial_inertia``.

    ``count`` identical copies stand for one link (the planets of a planetary stage): equally spaced about the
    axis of the gears they mesh with (sun and ring), each with this mass and these inertias; ``com`` and ``axis``
    are those of the first copy, at zero angles.
    """

    name: str
    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: object = None            # 3x3 about the centre of mass (primary links)
    dh: tuple | None = None           # (a, alpha, d) of the joint into this primary link
    axis: tuple | None = None         # secondary: unit axis e_j in its primary carrier's D-H frame
    axial_inertia: float = 0.0        # secondary: I_j about e_j (eq. 14)
    transverse_inertia: float = 0.0   # secondary: inertia about any axis through the com normal to e_j
    lower: float = -math.inf
    upper: float = math.inf
    velocity_limit: float = math.inf
    effort_limit: float = math.inf
    count: int = 1


@dataclass
class TurningPair:
    """A revolute joint (thin edge) between two links about the axis labelled ``axis``."""

    links: tuple
    axis: str


@dataclass
class GearPair:
    """A gear mesh (heavy edge). ``teeth`` = (N_a, N_b) for ``links`` = (a, b); ``kind``: external (spur, parallel
    axes), internal (ring, parallel axes) or bevel (intersecting axes)."""

    links: tuple
    teeth: tuple
    kind: str = "external"
    sign: int | None = None           # bevel pairs: +1 or -1 (required)


@dataclass(frozen=True)
class MechanismOptions:
    """``[mechanism]``: the scalar keys; ``link``, ``turning_pair`` and ``gear_pair`` are arrays of tables
    ``[[mechanism.link]]`` ... with the schemas below."""

    name: str = setting("str", "grm")
    base: str = setting("str", None, required=True)
    end_effector: str = setting("str", None, required=True)
    inputs: object = setting("strs", None, required=True)
    gravity: object = setting("floats", (0.0, 0.0, -9.81))            # m/s^2, world frame


@dataclass(frozen=True)
class LinkOptions:
    """``[[mechanism.link]]`` (SI units; frames are the D-H frames of the primary carrier, section 3)."""

    name: str = setting("str", None, required=True)
    mass: float = setting("float", 0.0, low=0.0, high=1e6)                                   # kg
    com: object = setting("floats", (0.0, 0.0, 0.0), low=-1e3, high=1e3)                     # m
    inertia: object = setting("floats", None, low=-1e6, high=1e6)   # kg m^2 about the com: xx yy zz xy xz yz
    dh: object = setting("floats", None, low=-1e3, high=1e3)        # primary: a (m), alpha (rad), d (m)
    axis: object = setting("floats", None)                             # secondary: axis e_j
    axial_inertia: float = setting("float", 0.0, low=0.0, high=1e6)                          # kg m^2
    transverse_inertia: float = setting("float", 0.0, low=0.0, high=1e6)                     # kg m^2
    lower: float = setting("float", None)                              # rad
    upper: float = setting("float", None)                              # rad
    velocity_limit: float = setting("float", None, positive=True)      # rad/s
    effort_limit: float = setting("float", None, positive=True)        # N m
    count: int = setting("int", 1, low=1, high=64)                      # identical equally spaced copies


@dataclass(frozen=True)
class TurningPairOptions:
    """``[[mechanism.turning_pair]]``: a revolute joint and the label of its axis."""

    links: object = setting("strs", None, required=True)
    axis: str = setting("str", None, required=True)


@dataclass(frozen=True)
class GearPairOptions:
    """``[[mechanism.gear_pair]]``: tooth numbers N_a, N_b of links a, b (eq. 9), kind and, for bevel, sign."""

    links: object = setting("strs", None, required=True)
    teeth: object = setting("floats", None, required=True, positive=True)
    kind: str = setting("str", "external", choices=GEAR_KINDS)
    sign: int = setting("int", None, low=-1, high=1)


ELEMENTS = {"link": LinkOptions, "turning_pair": TurningPairOptions, "gear_pair": GearPairOptions}
MECHANISM_KEYS = set(schema_keys(MechanismOptions)) | set(ELEMENTS)
_LENGTHS = {("link", "com"): (3,), ("link", "inertia"): (6,), ("link", "dh"): (3,), ("link", "axis"): (3,),
            ("turning_pair", "links"): (2,), ("gear_pair", "links"): (2,), ("gear_pair", "teeth"): (2,)}


def _check_elements(table: dict, element: str, where: str) -> list[dict]:
    items = table.get(element, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise ConfigError(f"{where} {element}: expected an array of tables [[mechanism.{element}]], got {items!r}")
    keys = schema_keys(ELEMENTS[element])
    out = []
    for k, item in enumerate(items):
        label = f" ('{item['name']}')" if isinstance(item.get("name"), str) else ""
        at = f"{where} {element}[{k}]{label}"
        checked = {k: list(v) if isinstance(v, tuple) else v for k, v in check_table(item, keys, at).items()}
        for key, value in checked.items():
            shape = _LENGTHS.get((element, key))
            if shape is not None and value is not None and (not isinstance(value, list) or len(value) != shape[0]):
                raise ConfigError(f"{at} {key}: expected {shape[0]} values, got {value!r}")
        if element == "link":
            _check_link(checked, at)
        out.append(checked)
    return out


def _check_link(checked: dict, at: str) -> None:
    """What the model would refuse of one checked link, refused here naming the link and the key."""
    lower, upper = checked.get("lower"), checked.get("upper")
    if lower is not None and upper is not None and lower > upper:
        raise ConfigError(f"{at} lower: the lower limit {lower!r} is above the upper limit {upper!r}")
    inertia = checked.get("inertia")
    if inertia is not None:
        xx, yy, zz, xy, xz, yz = inertia
        try:
            check_inertia([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]], checked.get("mass") or 0.0, f"{at} inertia")
        except (ModelError, np.linalg.LinAlgError) as exc:
            msg = str(exc)
            raise ConfigError(msg if msg.startswith(at) else f"{at} inertia: {msg}") from None


def check_schema(table, where: str = "[mechanism]") -> dict:
    """The ``[mechanism]`` table checked against its schema, defaults filled in; ConfigError naming ``where``
    (``"FILE: [mechanism]"``), the element and the key."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {type(table).__name__}")
    for key in table:
        if key not in MECHANISM_KEYS:
            raise ConfigError(f"{where} unknown key '{key}'{did_you_mean(key, MECHANISM_KEYS, 1)}; "
                              f"allowed: {sorted(MECHANISM_KEYS)}")
    checked = check_table({k: v for k, v in table.items() if k not in ELEMENTS}, schema_keys(MechanismOptions),
                          where)
    checked["gravity"] = list(checked["gravity"]) if isinstance(checked["gravity"], tuple) else checked["gravity"]
    if not isinstance(checked["gravity"], list) or len(checked["gravity"]) != 3:
        raise ConfigError(f"{where} gravity: expected 3 values (m/s^2), got {checked['gravity']!r}")
    for element in ELEMENTS:
        checked[element] = _check_elements(table, element, where)
    if not checked["link"] or not checked["turning_pair"]:
        raise ConfigError(f"{where}: needs [[mechanism.link]] and [[mechanism.turning_pair]] tables")
    return checked


def _link(d: dict) -> Link:
    kw = {k: v for k, v in d.items() if v is not None}
    if "inertia" in kw and np.shape(kw["inertia"]) == (6,):   # xx yy zz xy xz yz (Table 3 form)
        xx, yy, zz, xy, xz, yz = kw["inertia"]
        kw["inertia"] = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
    return Link(**kw)


def mechanism_arguments(checked: dict) -> dict:
    return dict(links=[_link(d) for d in checked["link"]],
                turning_pairs=[TurningPair(tuple(d["links"]), d["axis"]) for d in checked["turning_pair"]],
                gear_pairs=[GearPair(tuple(d["links"]), tuple(d["teeth"]), d["kind"], d["sign"])
                            for d in checked["gear_pair"]],
                base=checked["base"], end_effector=checked["end_effector"], inputs=list(checked["inputs"]),
                name=checked["name"], gravity=tuple(checked["gravity"]))


def parse_description(d: dict, where: str = "[mechanism]") -> dict:
    """The :class:`~rtctl.plants.geared.model.GearedMechanism` arguments a plain dict (the ``[mechanism]`` table
    of a TOML file) describes, checked against the schema (ConfigError naming ``where`` and the key)."""
    return mechanism_arguments(check_schema(d, where))


def read_mechanism_table(path) -> dict:
    """The ``[mechanism]`` table of a TOML file."""
    doc = read_toml(path, "mechanism description", GearedMechanismError)
    if "mechanism" not in doc:
        raise GearedMechanismError(f"{path}: no [mechanism] table")
    return doc["mechanism"]
