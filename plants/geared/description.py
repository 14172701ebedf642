"""The declarative description of a geared robotic mechanism (seed 002, Chen & Wang): links, turning pairs
(thin edges) and gear pairs (heavy edges), and their dict / TOML form (the ``[mechanism]`` table).

:class:`rtctl.plants.geared.model.GearedMechanism` derives the structure and dynamics from it.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass

import numpy as np

__all__ = ["GearPair", "GearedMechanismError", "Link", "TurningPair", "parse_description", "read_mechanism_table"]


class GearedMechanismError(ValueError):
    """An invalid GRM description; the message names the offending element."""


@dataclass
class Link:
    """A link. Primary links need ``dh`` (except the base); secondary links need ``axis`` and ``axial_inertia``."""

    name: str
    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: object = None            # 3x3 about the centre of mass (primary links)
    dh: tuple | None = None           # (a, alpha, d) of the joint into this primary link
    axis: tuple | None = None         # secondary: unit axis e_j in the carrier's D-H frame
    axial_inertia: float = 0.0        # secondary: I_j about e_j (eq. 14)
    transverse_inertia: float = 0.0   # secondary: inertia about any axis through the com normal to e_j
    lower: float = -math.inf
    upper: float = math.inf
    velocity_limit: float = math.inf
    effort_limit: float = math.inf


@dataclass
class TurningPair:
    """A revolute joint (thin edge) between two links about the axis labelled ``axis``."""

    links: tuple
    axis: str


@dataclass
class GearPair:
    """A gear mesh (heavy edge). ``teeth`` = (N_a, N_b) for ``links`` = (a, b); ``kind``: external, internal, bevel."""

    links: tuple
    teeth: tuple
    kind: str = "external"
    sign: int | None = None           # bevel pairs: +1 or -1 (required)


MECHANISM_KEYS = {"name", "base", "end_effector", "inputs", "link", "turning_pair", "gear_pair", "gravity"}


def parse_description(d: dict) -> dict:
    """The :class:`~rtctl.plants.geared.model.GearedMechanism` arguments a plain dict (the ``[mechanism]`` table of a
    TOML file) describes."""
    bad = sorted(set(d) - MECHANISM_KEYS)
    if bad:
        raise GearedMechanismError(f"mechanism: unknown key '{bad[0]}'; allowed: {sorted(MECHANISM_KEYS)}")
    for key in ("base", "end_effector", "inputs", "link", "turning_pair"):
        if key not in d:
            raise GearedMechanismError(f"mechanism: missing '{key}'")
    links = []
    link_keys = set(Link.__dataclass_fields__)
    for k, ld in enumerate(d["link"]):
        bad = sorted(set(ld) - link_keys)
        if bad or "name" not in ld:
            raise GearedMechanismError(f"mechanism link #{k} ({ld.get('name', '?')}): "
                                       f"{'unknown key ' + repr(bad[0]) if bad else 'missing name'}")
        ld = dict(ld)
        if "inertia" in ld and np.shape(ld["inertia"]) == (6,):   # xx yy zz xy xz yz
            xx, yy, zz, xy, xz, yz = ld["inertia"]
            ld["inertia"] = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
        links.append(Link(**ld))
    tps = []
    for k, td in enumerate(d["turning_pair"]):
        if set(td) != {"links", "axis"} or len(td["links"]) != 2:
            raise GearedMechanismError(f"mechanism turning_pair #{k}: needs links = [a, b] and axis = 'label'")
        tps.append(TurningPair(tuple(td["links"]), td["axis"]))
    gps = []
    for k, gd in enumerate(d.get("gear_pair", [])):
        bad = sorted(set(gd) - {"links", "teeth", "kind", "sign"})
        if bad or "links" not in gd or "teeth" not in gd or len(gd["links"]) != 2 or len(gd["teeth"]) != 2:
            raise GearedMechanismError(f"mechanism gear_pair #{k}: needs links = [a, b], teeth = [Na, Nb]"
                                       f"{', unknown key ' + repr(bad[0]) if bad else ''}")
        gps.append(GearPair(tuple(gd["links"]), tuple(gd["teeth"]), gd.get("kind", "external"), gd.get("sign")))
    return dict(links=links, turning_pairs=tps, gear_pairs=gps, base=d["base"], end_effector=d["end_effector"],
                inputs=d["inputs"], name=d.get("name", "grm"), gravity=d.get("gravity", (0.0, 0.0, -9.81)))


def read_mechanism_table(path) -> dict:
    """The ``[mechanism]`` table of a TOML file."""
    with open(path, "rb") as fh:
        doc = tomllib.load(fh)
    if "mechanism" not in doc:
        raise GearedMechanismError(f"{path}: no [mechanism] table")
    return doc["mechanism"]
