"""Geared robotic mechanisms (GRMs) by the virtual-link method of Chen & Wang (1998).

A GRM is described declaratively (Python: :class:`Link`, :class:`TurningPair`,
:class:`GearPair`, :class:`GearedMechanism`; TOML / dict: :meth:`GearedMechanism.from_dict`,
:meth:`GearedMechanism.from_toml`). From the description the constructor derives,
refusing invalid input with a :class:`GearedMechanismError` that names the element:

* the graph (links = vertices, turning pairs = thin edges labelled with their
  axis, gear pairs = heavy edges) and the carrier of every gear pair (the link
  both gears turn on, possibly through coaxial links: a path of thin edges of
  one axis label). A gear turns about the axis of any of its thin edges, so any
  link can be a planetary stage's carrier, sun or ring, whichever is fixed (the
  base), input or output; each gear pair's axes must agree with its kind
  (external / internal: parallel, bevel: intersecting), else the pair is refused
  naming both axes;
* the canonical graph (section 2): a thin edge ``p -L- x`` whose parent edge
  ``pp -L- p`` has the same label is moved to ``pp -L- x`` (coaxial links),
  until no thin-edged path from the base repeats a label; a label that repeats
  non-consecutively cannot be canonicalised;
* the equivalent open-loop chain (EOLC: the thin path base -> end effector in
  the canonical graph), primary links ``0..n`` (on the EOLC) and secondary links,
  and the primary link carrying each secondary link (one level of secondary
  carriers is allowed: planets on a planet carrier that is an input or
  intermediate link; see "Planetary trains" below);
* the fundamental-circuit equations q_{j,i} = g_{k,j} q_{k,i} (eq. 9) and the
  coaxial conditions q_{i,k} = q_{i,j} + q_{j,k} (eq. 10), solved for every thin
  edge's relative rate in terms of the joint rates; hence the coefficients
  ``b[j, k]`` of q_{j,i}-dot = sum_k b_{j,k} theta_k-dot (eq. 11) and the structure
  matrix ``A`` with phi-dot = A^T Theta-dot (eq. 12; column ``m`` = the b-row of
  input link ``m``).

Gear ratio convention (eq. 9): for the gear pair (j, k), ``g_{k,j} = sign N_k / N_j``
with ``sign = -1`` for an external spur pair, ``+1`` for an internal pair and the
given sign for a bevel pair (it depends on the chosen positive axis directions).

Geometry: primary link ``i`` (i >= 1) carries Denavit-Hartenberg parameters
``dh = (a_{i,i-1}, alpha_{i,i-1}, d_{i,i-1})`` of the joint from primary link i-1
(Table 1 / eqs. 4-5, standard D-H: frame i = frame i-1 . Rz(theta_i) Tz(d) Tx(a) Rx(alpha)),
its mass, centre of mass and inertia about the centre of mass in its D-H frame.
A secondary link is axis-symmetric (the assumption of eq. 14): mass, centre of
mass (on its axis), unit ``axis`` e_j, axial inertia I_j and transverse inertia,
all in the D-H frame of its carrying primary link.

Dynamics (sections 5-6): the virtual EOLC (secondary links lumped into their
carriers, :meth:`GearedMechanism.virtual_model`) gives G_v = M_v theta'' + C_v
(eq. 13) plus gravity from the generic recursive core
(:class:`rtctl.dynamics.Dynamics`); the relative motion of secondary links gives
G_s = M_s theta'' + C_s (eqs. 14-21); the equations of motion are
(M_v + M_s) theta'' + C_v + C_s + g = A xi (eq. 23). :func:`rtctl.plants.geared.reference.secondary_terms`
evaluates eqs. 18a-d, 19a-e and 20a-c case by case (the reference); the
compiled kernels (:mod:`rtctl.plants.geared.kernels`) use the
equivalent compact form of eqs. 16a/16b:

    c_k = e_j . z_{k-1} (k <= i, inner), D_{k,h} = d c_k / d theta_h = e_j . (z_{k-1} x z_{h-1}) (k < h <= i),
    s = sum_k b_{j,k} theta_k',
    M_{j/i} = I_j (b b^T + b c^T + c b^T)                                    (eq. 18)
    C_{j/i,r} = I_j b_r sum_k c_k' theta_k' + I_j s (c_r' - sum_k D_{k,r} theta_k')   (eqs. 16, 19, 20)

Planetary trains (beyond the paper's class). Eq. 9 with a carrier that turns
gives Willis' equation: for sun s, ring r, carrier c,
(omega_s - omega_c) / (omega_r - omega_c) = -N_r / N_s. Two cases fall outside
section 4's assumptions and are handled exactly:

* planets carried by a primary link whose own joint turns them (ring or sun
  fixed, carrier as the output): q_{j,i}-dot then depends on inner joint rates
  too, so eq. 11 is generalised to q_{j,i}-dot = sum_k b_{j,k} theta_k-dot over
  all k. Eq. 14 holds unchanged, and the compact eqs. 16a/16b below (with
  b_{j,k} != 0 for k <= i) give M_s and C_s; the case tables of eqs. 18-20
  assume b_{j,k} = 0 for k <= i and are only valid in the paper's class;
* planets carried by a secondary carrier (the carrier as an input): each planet
  is a rotor of eq. 14 on the carrier's primary link turning at
  b_carrier + b_planet (parallel axes), and its orbit adds count x m r^2 to
  the carrier's axial inertia; the assembly must be balanced about the carrier
  axis (count >= 3 equally spaced planets, or a com on the axis) so that its
  mass distribution in the primary frame is constant (virtual link i*).

``count`` copies of a secondary link (the planets) are spaced equally about
the axis of the gears they mesh with (on a secondary carrier: its axis); each
is lumped into the virtual link and adds its axial inertia to the rotor.

OCR / typesetting errors of the source found while re-deriving (each checked in
``tests/test_geared_model.py``): eq. (43) writes ``theta_2^T C theta_2`` and eq. (44)
``M theta_2''`` -- both mean the full vectors theta-dot and theta''; eq. (34) reads
``1bfe_6`` for ^1e_6; in section 7.2 ``C_{j/1,2})_{1,1}`` "from eq. (20a)" is a
diagonal element, zero by eq. (20)'s own remark (all C_{j/1} vanish for link 6
anyway since ^1e_6 . ^1z_0 = 0). Appendix A's G_v closed form has several
dimensionally inconsistent entries (e.g. phi_3 = ... + m_3 phi_14 + I_3yy,
phi_5 = m_3 r_3z + I_3yy, phi_7 containing m_2* phi_2); it is not used -- G_v comes
from the generic core and is cross-checked against the brute-force Lagrangian.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from rtctl.model import ModelBuilder, combine_inertias, inertia_scale_factor
from rtctl.options import ConfigError

from .description import (GearedMechanismError, GearPair, Link, TurningPair, check_schema, mechanism_arguments,
                          parse_description, read_mechanism_table)
from .kernels import GRMDynamics, grm_forward_dynamics, grm_inverse_dynamics
from .structure import MechanismStructure

__all__ = ["GearedMechanismError", "Link", "TurningPair", "GearPair", "GearedMechanism", "GRMDynamics", "grm3",
           "GRM3_PARAMETERS", "grm_inverse_dynamics", "grm_forward_dynamics", "geared_model",
           "check_mechanism_section", "mechanism_of"]


def _rx(alpha):
    c, s = math.cos(alpha), math.sin(alpha)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def _rz(theta, xp=np):
    c, s = xp.cos(theta), xp.sin(theta)
    one, zero = c * 0 + 1, c * 0
    return xp.array([[c, -s, zero], [s, c, zero], [zero, zero, one]])


@dataclass
class _Sec:
    """A rotor of eq. 14: secondary link ``name`` turning relative to primary link ``carrier`` about ``axis``
    (in that link's D-H frame) at b . theta-dot, axial inertia ``inertia``."""

    name: str
    carrier: int
    axis: np.ndarray
    inertia: float
    b: np.ndarray


def _axis_rotation(u, angle):
    """Rotation by ``angle`` about the unit vector ``u`` (Rodrigues)."""
    ux = np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])
    return np.eye(3) + math.sin(angle) * ux + (1 - math.cos(angle)) * (ux @ ux)


def _distance_to_line(x, point, u):
    return float(np.linalg.norm(np.cross(np.asarray(x) - point, u)))


def _fmt(v):
    return "[" + ", ".join(f"{float(x) if abs(x) > 1e-12 else 0.0:.6g}" for x in v) + "]"


class GearedMechanism(MechanismStructure):
    """A GRM: structure (graph -> canonical graph -> EOLC -> b, A) and virtual-link dynamics.

    Attributes after construction: ``n`` (dof), ``primary`` (names, base first), ``secondary``
    (names), ``carrier`` (secondary name -> primary index), ``canonical_edges`` ((parent, child,
    label) of the canonical graph), ``gear_carrier`` (gear pair -> carrier name),
    ``circuit_equations`` (eq. 9, strings), ``coaxial_conditions`` (eq. 10, strings),
    ``b`` (secondary name -> length-n array, eq. 11, the rate relative to its canonical parent: its primary
    carrier, or its secondary carrier ``secondary_carrier[name]``), ``A`` (n x n, eq. 12), ``inputs``.
    """

    def __init__(self, links, turning_pairs, gear_pairs, *, base: str, end_effector: str, inputs,
                 name: str = "grm", gravity=(0.0, 0.0, -9.81)):
        self.name = name
        self.gravity = np.asarray(gravity, dtype=float)
        self.motor_torque_limit = None   # N m per input, where the mechanism's motors are known (grm3)
        self.links = {}
        for ln in links:
            if ln.name in self.links:
                raise GearedMechanismError(f"link '{ln.name}': duplicate link name")
            self.links[ln.name] = ln
        for nm in (base, end_effector, *inputs):
            if nm not in self.links:
                raise GearedMechanismError(f"link '{nm}' (base/end effector/input) is not described")
        self.base, self.end_effector, self.inputs = base, end_effector, list(inputs)
        if len(set(self.inputs)) != len(self.inputs):
            raise GearedMechanismError(f"inputs {self.inputs}: an input link is listed twice")
        if base in self.inputs:
            raise GearedMechanismError(f"inputs {self.inputs}: the base '{base}' does not move; an input is a link a "
                                       "motor turns")
        self.turning_pairs = list(turning_pairs)
        self.gear_pairs = list(gear_pairs)
        self.derive_structure()
        self._geometry()

    @classmethod
    def from_dict(cls, d: dict) -> "GearedMechanism":
        """Build from a plain dict (the ``[mechanism]`` table of a TOML file)."""
        return cls(**parse_description(d))

    @classmethod
    def from_toml(cls, path) -> "GearedMechanism":
        """Build from the ``[mechanism]`` table of a TOML file."""
        return cls.from_dict(read_mechanism_table(path))

    def _geometry(self):
        n = self.n
        self.dh = np.zeros((n + 1, 3))
        for r in range(1, n + 1):
            ln = self.links[self.primary[r]]
            if ln.dh is None or len(ln.dh) != 3 or not all(math.isfinite(float(x)) for x in ln.dh):
                raise GearedMechanismError(f"primary link '{ln.name}': needs dh = (a, alpha, d)")
            self.dh[r] = [float(x) for x in ln.dh]
        for ln in self.links.values():
            if not (isinstance(ln.count, int) and not isinstance(ln.count, bool) and ln.count >= 1):
                raise GearedMechanismError(f"link '{ln.name}': count must be an integer >= 1, got {ln.count!r}")
            if ln.count > 1 and ln.name in self.primary:
                raise GearedMechanismError(f"link '{ln.name}': a primary link cannot have copies (count = {ln.count})")
        self.sec_axis, self.sec_com = {}, {}
        for s in self.secondary:
            ln = self.links[s]
            if ln.axis is None:
                raise GearedMechanismError(f"secondary link '{s}': needs its axis (unit vector in the frame of "
                                           f"primary link '{self.primary[self.carrier[s]]}')")
            e = np.asarray(ln.axis, dtype=float)
            c = np.asarray(ln.com, dtype=float)
            if e.shape != (3,) or not np.all(np.isfinite(e)) or np.linalg.norm(e) < 1e-12:
                raise GearedMechanismError(f"secondary link '{s}': axis must be a non-zero 3-vector")
            if c.shape != (3,) or not np.all(np.isfinite(c)):
                raise GearedMechanismError(f"secondary link '{s}': com must be a finite 3-vector")
            if not (ln.axial_inertia >= 0 and ln.transverse_inertia >= 0 and ln.mass >= 0):
                raise GearedMechanismError(f"secondary link '{s}': mass and inertias must be >= 0")
            self.sec_axis[s], self.sec_com[s] = e / np.linalg.norm(e), c
        self._check_gear_axes()
        self._check_coaxial_labels()
        self._check_secondary_carriers()
        self._secs = self._rotors()
        secs = self._secs
        # Packed arrays for the kernels (rotors carried by the base contribute constant M only).
        self.sec_carrier = np.array([s.carrier for s in secs], dtype=np.int64)
        self.sec_inertia = np.array([s.inertia for s in secs])
        self.sec_b = np.ascontiguousarray(np.array([s.b for s in secs]).reshape(len(secs), n))
        # Axis in rtctl body frame of the carrier (body frame = D-H frame . Rx(alpha)^-1 ...): e_body = Rx(alpha) e.
        eb = np.zeros((len(secs), 3))
        for k, s in enumerate(secs):
            if s.carrier >= 1:
                eb[k] = _rx(self.dh[s.carrier, 1]) @ s.axis
        self.sec_axis_body = eb

    def copy_axis(self, s):
        """(point, unit direction) in the frame of primary link ``carrier[s]`` of the line the ``count`` copies of
        secondary link ``s`` are spaced about: a secondary carrier's axis (the planets' orbit), else the axis of
        the gears ``s`` meshes with (sun and ring of a planetary stage), which must be one line."""
        parent = self.secondary_carrier.get(s)
        if parent is not None:
            return self.sec_com[parent], self.sec_axis[parent]
        if self.links[s].count == 1:
            return self.sec_com[s], self.sec_axis[s]
        lines = []
        for (a, b), edges in self.gear_axis_edge.items():
            if s in (a, b):
                lines.append((b if s == a else a, self.edge_axis(edges[1] if s == a else edges[0])))
        if not lines:
            raise GearedMechanismError(f"secondary link '{s}': count = {self.links[s].count} copies are spaced about "
                                       "the axis of the gears they mesh with, and it meshes with none")
        (first, (p0, u0)) = lines[0]
        for other, (p1, u1) in lines[1:]:
            if np.linalg.norm(np.cross(u0, u1)) > 1e-9 or _distance_to_line(p1, p0, u0) > 1e-9:
                raise GearedMechanismError(
                    f"secondary link '{s}': its count = {self.links[s].count} copies mesh with '{first}' (axis "
                    f"{_fmt(u0)} through {_fmt(p0)} m) and '{other}' (axis {_fmt(u1)} through {_fmt(p1)} m), which "
                    "are not one line to space them about")
        rots, origins = self.zero_frames()
        i = self.carrier[s]
        return rots[i].T @ (p0 - origins[i]), rots[i].T @ u0

    def copies(self, s):
        """[(rotation about the copy axis, com, axis)] of every copy of secondary link ``s`` at zero angles, in the
        frame of primary link ``carrier[s]``."""
        point, u = self.copy_axis(s)
        e, c = self.sec_axis[s], self.sec_com[s]
        out = []
        for k in range(self.links[s].count):
            rot = _axis_rotation(u, 2 * math.pi * k / self.links[s].count)
            out.append((rot, point + rot @ (c - point), rot @ e))
        return out

    def _check_secondary_carriers(self):
        """Planets on a secondary carrier (section 5 extended): axes parallel to the carrier's, and the carrier's
        assembly balanced about its axis (com on the axis, or >= 3 equally spaced copies), so that it keeps its mass
        distribution in the primary link's frame as it turns -- the condition for lumping it into a virtual link."""
        for s, parent in self.secondary_carrier.items():
            e, (point, u) = self.sec_axis[s], (self.sec_com[parent], self.sec_axis[parent])
            if np.linalg.norm(np.cross(e, u)) > 1e-9:
                raise GearedMechanismError(
                    f"secondary link '{s}' on secondary carrier '{parent}': its axis {_fmt(e)} is not parallel to the "
                    f"carrier's axis {_fmt(u)} (planets on a secondary carrier must turn about parallel axes)")
            radius = _distance_to_line(self.sec_com[s], point, u)
            if radius > 1e-9 and self.links[s].count < 3 and self.links[s].mass > 0:
                raise GearedMechanismError(
                    f"secondary link '{s}' on secondary carrier '{parent}': its com is {radius:.6g} m off the carrier's "
                    f"axis with count = {self.links[s].count}; an unbalanced planet carrier is outside the virtual-link "
                    "method: give count >= 3 (equally spaced planets) or a com on the carrier's axis")
            if self.links[parent].count != 1:
                raise GearedMechanismError(f"secondary link '{parent}' carries '{s}': a carrier cannot have copies")
        for s in self.secondary:
            if self.links[s].count > 1 and s not in self.secondary_carrier:
                _, u = self.copy_axis(s)
                if np.linalg.norm(np.cross(self.sec_axis[s], u)) > 1e-9:
                    raise GearedMechanismError(
                        f"secondary link '{s}': count = {self.links[s].count} copies need an axis parallel to the "
                        f"axis {_fmt(u)} they are spaced about (that of the gears they mesh with)")

    def zero_frames(self):
        """World rotations and origins of the D-H frames 0..n at zero joint angles."""
        rots, origins = [np.eye(3)], [np.zeros(3)]
        for r in range(1, self.n + 1):
            a, alpha, d = self.dh[r]
            origins.append(origins[-1] + rots[-1] @ np.array([a, 0.0, d]))
            rots.append(rots[-1] @ _rx(alpha))
        return rots, origins

    def edge_axis(self, x):
        """(point, unit direction) in the world at zero joint angles of the turning axis of canonical edge -> x."""
        rots, origins = self.zero_frames()
        if x in self.primary_index:
            r = self.primary_index[x]
            return origins[r - 1], rots[r - 1][:, 2]
        i = self.carrier[x]
        return origins[i] + rots[i] @ self.sec_com[x], rots[i] @ self.sec_axis[x]

    def _check_gear_axes(self):
        """A gear pair's axes (fixed on its carrier, so checked at zero joint angles) agree with its kind: external
        (spur) and internal (ring) pairs turn about parallel axes, bevel pairs about intersecting, non-parallel ones."""
        for gp, (a, b, _) in zip(self.gear_pairs, self.ratio):
            (pa, ua), (pb, ub) = (self.edge_axis(x) for x in self.gear_axis_edge[(a, b)])
            sine = np.linalg.norm(np.cross(ua, ub))
            axes = (f"axis of '{a}' {_fmt(ua)} through {_fmt(pa)} m, axis of '{b}' {_fmt(ub)} through {_fmt(pb)} m "
                    "(world frame, zero joint angles)")
            where = f"gear pair {a}-{b} (kind '{gp.kind}')"
            if gp.kind in ("external", "internal") and sine > 1e-9:
                what = "spur" if gp.kind == "external" else "ring"
                raise GearedMechanismError(f"{where}: {axes} are not parallel; an {gp.kind} ({what}) pair needs "
                                           "parallel axes")
            if gp.kind == "bevel":
                if sine <= 1e-9:
                    raise GearedMechanismError(f"{where}: {axes} are parallel; a bevel pair needs intersecting, "
                                               "non-parallel axes")
                gap = abs((pb - pa) @ np.cross(ua, ub)) / sine
                if gap > 1e-6:
                    raise GearedMechanismError(f"{where}: {axes} do not intersect (they pass {gap:.6g} m apart); a "
                                               "bevel pair needs intersecting axes")

    def _check_coaxial_labels(self):
        """Thin edges with one axis label are one line (the coaxiality of section 2), at zero joint angles."""
        first = {}
        for _, x, label in self.canonical_edges:
            p, u = self.edge_axis(x)
            if label not in first:
                first[label] = (x, p, u)
                continue
            y, p0, u0 = first[label]
            if np.linalg.norm(np.cross(u, u0)) > 1e-9 or _distance_to_line(p, p0, u0) > 1e-9:
                raise GearedMechanismError(
                    f"axis label '{label}': the turning axis of '{x}' {_fmt(u)} through {_fmt(p)} m and that of '{y}' "
                    f"{_fmt(u0)} through {_fmt(p0)} m (world frame, zero joint angles) are not one line")

    def _rotors(self):
        """The relative motions of eq. 14, each a rotor (primary link i, axis e in frame i, I, b with
        q_{rotor,i}-dot = b . theta-dot). A secondary on a primary link is one rotor of count x I_j. A planet on a
        secondary carrier c (axis parallel to c's) is a rotor of its axial inertias turning at b_c + b_planet relative
        to i; its orbit adds count x m r^2 (r: com to c's axis) to c's rotor -- the balanced assembly's kinetic energy
        in frame i is then eq. 14's, and the rest lumps into virtual link i*."""
        rotors = []
        for s in self.secondary:
            ln = self.links[s]
            inertia = ln.count * float(ln.axial_inertia)
            b = self.b[s].copy()
            parent = self.secondary_carrier.get(s)
            if parent is not None:
                b = b + self.b[parent]
            for planet, c in self.secondary_carrier.items():
                if c == s:
                    radius = _distance_to_line(self.sec_com[planet], self.sec_com[s], self.sec_axis[s])
                    inertia += self.links[planet].count * float(self.links[planet].mass) * radius ** 2
            rotors.append(_Sec(s, self.carrier[s], self.sec_axis[s], inertia, b))
        return rotors

    # ------------------------------------------------------------------ models
    def _virtual_mass(self, r):
        """Mass, com and inertia (about com) of virtual link r* in primary link r's D-H frame (section 5.1): the
        primary link and every copy of each secondary link it carries, at zero angles."""
        ln = self.links[self.primary[r]]
        m, c = float(ln.mass), np.asarray(ln.com, dtype=float)
        inertia = np.zeros((3, 3)) if ln.inertia is None else np.asarray(ln.inertia, dtype=float)
        for s in self.secondary:
            if self.carrier[s] != r:
                continue
            sl = self.links[s]
            for _, com, e in self.copies(s):
                i_s = sl.transverse_inertia * (np.eye(3) - np.outer(e, e)) + sl.axial_inertia * np.outer(e, e)
                m, c, inertia = combine_inertias(m, c, inertia, float(sl.mass), com, i_s)
        return m, c, inertia

    def virtual_model(self, name: str | None = None):
        """The virtual EOLC as an rtctl :class:`~rtctl.model.Model` (eq. 13's tree).

        Body r's frame is the D-H frame r-1 turned by Rz(theta_r) about z_{r-1}; the end effector
        is the frame ``"end_effector"`` (D-H frame n). Joint limits come from the primary links.
        """
        b = ModelBuilder(name or self.name, gravity=self.gravity)
        parent = -1
        for r in range(1, self.n + 1):
            ln = self.links[self.primary[r]]
            a, alpha, d = self.dh[r]
            m, c, inertia = self._virtual_mass(r)
            rot = _rx(alpha)
            if r == 1:
                jr, jt = np.eye(3), np.zeros(3)
            else:
                pa, palpha, pd = self.dh[r - 1]
                jr, jt = _rx(palpha), np.array([pa, 0.0, pd])
            parent = b.add_body(f"link{ln.name}*", parent, "revolute", joint_name=f"theta{r}", axis=(0, 0, 1),
                                rotation=jr, translation=jt, mass=m, com=rot @ c + np.array([a, 0.0, d]),
                                inertia=rot @ inertia @ rot.T, lower=ln.lower, upper=ln.upper,
                                velocity_limit=ln.velocity_limit, effort_limit=ln.effort_limit)
        a, alpha, d = self.dh[self.n]
        b.add_frame("end_effector", parent, rotation=_rx(alpha), translation=(a, 0.0, d))
        return b.build()

    # ------------------------------------------------------------------ fast API
    def with_inertia_scaled(self, factor: float) -> "GearedMechanism":
        """The same mechanism with every link's mass and inertias times ``factor`` (a model error for
        robustness tests); its virtual model and secondary-link terms follow."""
        f = inertia_scale_factor(factor)
        links = [replace(ln, mass=f * ln.mass, inertia=None if ln.inertia is None else f * np.asarray(ln.inertia),
                         axial_inertia=f * ln.axial_inertia, transverse_inertia=f * ln.transverse_inertia)
                 for ln in self.links.values()]
        out = GearedMechanism(links, self.turning_pairs, self.gear_pairs, base=self.base,
                              end_effector=self.end_effector, inputs=self.inputs, name=self.name,
                              gravity=self.gravity)
        out.motor_torque_limit = self.motor_torque_limit
        return out

    def dynamics(self, model=None):
        """A :class:`GRMDynamics` (compiled virtual-link ID / FD) on ``model`` (default: the virtual model)."""
        return GRMDynamics(self, model)


# ---------------------------------------------------------------------------------------------- section 7 example
#: Numeric values for the symbols section 7 leaves open (SI units). Geometry: Table 1 with d1, a2.
#: Gear ratios g_{k,j} = +-N_k/N_j from the tooth numbers; input-link inertias include the motor rotor.
GRM3_PARAMETERS = dict(
    d1=0.30, a2=0.40,
    m1=4.0, r1=(0.0, -0.10, 0.02), I1=(0.030, 0.012, 0.030, 0.0, 0.0, 0.001),   # xx yy zz xy xz yz (Table 3 form)
    m2=3.0, r2=(-0.20, 0.0, 0.01), I2=(0.006, 0.045, 0.045, 0.0, 0.0008, 0.0),
    m3=1.0, r3=(0.0, 0.0, 0.08), I3=(0.004, 0.0045, 0.002, 0.0, 0.0, 0.0),
    # secondary links: (mass, com in carrier frame, axis in carrier frame, axial I_j, transverse)
    s4=(0.5, (0.12, 0.0, 0.05), (0.0, 0.0, 1.0), 5.0e-4, 4.0e-4),     # motor 1 pinion on the base, spur with link 1
    s5=(0.6, (0.0, 0.0, 0.10), (0.0, 0.0, 1.0), 4.0e-4, 3.0e-4),      # motor 2 shaft, coaxial with joint 1
    s6=(0.4, (0.0, 0.0, -0.06), (0.0, 0.0, 1.0), 3.0e-4, 2.0e-4),     # motor 3 bevel, coaxial with joint 2, on link 1
    s7=(0.15, (-0.05, 0.0, 0.0), (1.0, 0.0, 0.0), 1.0e-4, 6.0e-5),    # idler bevel on link 2 along x_2
    teeth=dict(N1=96, N4=12, N2=60, N5=20, N6=40, N7=20, N3=60),
    # g_{1,4} = -N1/N4 = -8 (external spur), g_{2,5} = +N2/N5 = 3 (bevel, sign +1),
    # g_{7,6} = -N7/N6 = -0.5 (bevel, sign -1), g_{3,7} = +N3/N7 = 3 (bevel, sign +1)
    signs=dict(g25=1, g76=-1, g37=1),
    limits=((-math.pi, math.pi), (-2.0, 2.0), (-2.5, 2.5)),
    velocity_limit=8.0,
    motor_torque_limit=(5.0, 5.0, 5.0),
)


def grm3(**overrides) -> GearedMechanism:
    """The 3-dof GRM of section 7 (Figs. 1-3, Table 1) with :data:`GRM3_PARAMETERS` (``overrides`` replace keys).

    Graph (Fig. 2a): 0-1 (a), 1-5 (a), 0-4 (d), 1-2 (b), 2-6 (b), 2-3 (c), 2-7 (e); gear pairs
    1-4 (carrier 0), 5-2 (carrier 1), 6-7 and 7-3 (carrier 2). Canonicalisation moves 5 to 0 and 6 to 1
    (Fig. 2b); the EOLC is 0-1-2-3 (Fig. 3); inputs 4, 5, 6; end effector 3.
    """
    p = dict(GRM3_PARAMETERS)
    p.update(overrides)
    t = p["teeth"]
    lim, vl = p["limits"], p["velocity_limit"]

    def sec(name, spec):
        m, c, e, ia, it = spec
        return Link(name, mass=m, com=c, axis=e, axial_inertia=ia, transverse_inertia=it)

    def inertia(x):
        xx, yy, zz, xy, xz, yz = x
        return [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]

    links = [
        Link("0"),
        Link("1", mass=p["m1"], com=p["r1"], inertia=inertia(p["I1"]), dh=(0.0, math.pi / 2, p["d1"]),
             lower=lim[0][0], upper=lim[0][1], velocity_limit=vl),
        Link("2", mass=p["m2"], com=p["r2"], inertia=inertia(p["I2"]), dh=(p["a2"], 0.0, 0.0),
             lower=lim[1][0], upper=lim[1][1], velocity_limit=vl),
        Link("3", mass=p["m3"], com=p["r3"], inertia=inertia(p["I3"]), dh=(0.0, math.pi / 2, 0.0),
             lower=lim[2][0], upper=lim[2][1], velocity_limit=vl),
        sec("4", p["s4"]), sec("5", p["s5"]), sec("6", p["s6"]), sec("7", p["s7"]),
    ]
    tps = [TurningPair(("0", "1"), "a"), TurningPair(("1", "5"), "a"), TurningPair(("0", "4"), "d"),
           TurningPair(("1", "2"), "b"), TurningPair(("2", "6"), "b"), TurningPair(("2", "3"), "c"),
           TurningPair(("2", "7"), "e")]
    sg = p["signs"]
    gps = [GearPair(("4", "1"), (t["N4"], t["N1"]), "external"),
           GearPair(("5", "2"), (t["N5"], t["N2"]), "bevel", sg["g25"]),
           GearPair(("6", "7"), (t["N6"], t["N7"]), "bevel", sg["g76"]),
           GearPair(("7", "3"), (t["N7"], t["N3"]), "bevel", sg["g37"])]
    mech = GearedMechanism(links, tps, gps, base="0", end_effector="3", inputs=["4", "5", "6"], name="grm3")
    # Joint effort limits implied by the motor limits through G = A xi (eq. 22), for the safety monitor.
    lim_xi = np.asarray(p["motor_torque_limit"], float)
    eff = np.abs(mech.A) @ lim_xi
    for r in range(1, 4):
        mech.links[str(r)].effort_limit = float(eff[r - 1])
    mech.motor_torque_limit = lim_xi
    return mech


def grm3_ratios(mech_or_params=None):
    """The symbols g_{1,4}, g_{2,5}, g_{7,6}, g_{3,7} of eqs. 27-30 for the built-in example."""
    p = GRM3_PARAMETERS if mech_or_params is None else mech_or_params
    t, s = p["teeth"], p["signs"]
    return dict(g14=-t["N1"] / t["N4"], g25=s["g25"] * t["N2"] / t["N5"], g76=s["g76"] * t["N7"] / t["N6"],
                g37=s["g37"] * t["N3"] / t["N7"])


def grm3_model():
    """The robot model ``"grm3"`` (a run config's ``[robot] model``): the virtual EOLC model of :func:`grm3`."""
    return grm3().virtual_model("grm3")


GEARED_MECHANISMS = {"grm3": grm3}


def check_mechanism_section(table, where: str = "[mechanism]") -> dict:
    """A run config's ``[mechanism]`` table checked against its schema (:mod:`rtctl.plants.geared.description`)
    and built once, so that a structural fault (an axis contradicting its gear pair's kind, no carrier, dependent
    joints, ...) is refused when the config is read; ConfigError naming ``where`` (``"FILE: [mechanism]"``), the
    element and the key or pair. Returns the checked table with defaults filled in."""
    checked = check_schema(table, where)
    try:
        GearedMechanism(**mechanism_arguments(checked))
    except GearedMechanismError as exc:
        raise ConfigError(f"{where} {exc}") from None
    return checked


def geared_model(mechanism: dict | None = None):
    """The robot model ``"geared"``: the virtual EOLC model of the mechanism a run config's ``[mechanism]`` section
    describes (``[robot] model = "geared"``). The model carries its :class:`GearedMechanism` as
    ``geared_mechanism``, which the ``"geared"`` plant and ``"geared_computed_torque"`` use."""
    if mechanism is None:
        raise GearedMechanismError("robot model 'geared' is the mechanism of the run config's [mechanism] section; "
                                   "none was given")
    mech = GearedMechanism(**mechanism_arguments(check_schema(mechanism)))
    model = mech.virtual_model()
    model.geared_mechanism = mech
    return model


geared_model.sections = {"mechanism": check_mechanism_section}


def mechanism_of(model, who: str) -> GearedMechanism:
    """The mechanism behind a virtual EOLC ``model``: the one it carries (robot model ``"geared"``), else the
    built-in one of its name (``"grm3"``); ValueError naming ``who`` otherwise."""
    mech = getattr(model, "geared_mechanism", None)
    if mech is not None:
        return mech
    if model.name not in GEARED_MECHANISMS:
        raise ValueError(f"{who}: no mechanism for model '{model.name}' (built-in: {sorted(GEARED_MECHANISMS)}; "
                         "or [robot] model = \"geared\" with a [mechanism] section); pass mechanism=")
    return GEARED_MECHANISMS[model.name]()
