"""The legged robots of Shah, Saha & Dutt (2012): a 7-link planar biped and a 9-link spatial quadruped.

Both are floating-base kinematic trees split into the paper's kinematic modules
(Fig. 5 for the biped, Fig. 15 for the quadruped): module M_0 is the floating
trunk, every leg is one module of serially connected links. Foot-ground contact
is configuration independent (section 1): the feet carry contact points whose
ground reactions enter the dynamics as external wrenches (``tau^F`` of eq. 25);
:mod:`rtctl.dynamics.contact` computes them.

Frames: z up, x forward, y to the left; SI units.

Planar biped (section 5.1, Fig. 10), 9 DOF
    ``q = [x_0, z_0, phi, theta_1^1, theta_2^1, theta_3^1, theta_1^2, theta_2^2, theta_3^2]``:
    the trunk's centre of mass (x_0, z_0) and pitch ``phi`` about +y
    (:meth:`~rtctl.model.ModelBuilder.add_planar_floating_base`; ``phi = 0`` is
    the upright trunk, the paper's ``phi_0 = 90 deg`` measured from the horizontal),
    then hip, knee and ankle of the left leg (module M_1) and of the right leg
    (M_2), all about +y; zero joint angles are a straight leg under the hip with
    a horizontal foot. A positive angle turns a link's downward axis towards -x.

    * Trunk: l_0 = 0.5 m, m_0 = 5 kg, a solid cylinder of radius 0.05 m along z
      with its centre of mass at the body origin; the hips are at its lower end,
      (0, 0, -l_0/2) (Appendix B: z_h = z_c - l_0/2).
    * Thigh and shank: l = 0.5 m, m = 1 kg, solid cylinders of radius 0.02 m
      (``I = m (3 r^2 + l^2) / 12`` transverse, ``m r^2 / 2`` axial), centre of
      mass at mid-length. Both legs lie in the plane y = 0 (the planar model has
      no roll or yaw, so a lateral hip offset would change nothing).
    * Foot: the foot link (l_3 = 0.15 m, 0.2 kg) runs forward from the ankle: a
      slender bar along x, 0.04 m below the ankle (the ankle height, a choice:
      the paper gives only the length), with the heel under the ankle. Contact
      points: heel (0, 0, -0.04) and toe (0.15, 0, -0.04) in the foot frame;
      centre of mass at the bar's midpoint (0.075, 0, -0.04), inertia that of
      a thin rod about y and z. Heel under the ankle (``heel_offset = 0``) is
      the choice that centres the planned centre of pressure on the foot:
      with the legs' mass ahead of the hips (knees bent forward by 95-110 deg
      at the paper's z_c) it runs from 1.3 to 13.7 cm ahead of the ankle for
      the paper's hip trajectory and from 6.9 to 9.6 cm with the leg-mass
      compensation of :mod:`rtctl.plants.legged.gait` (tests/test_legged_gait.py).
      ``planar_biped(ankle_height=..., heel_offset=...)`` changes both.

Spatial quadruped (section 5.2, Fig. 15), 18 DOF
    Euler-angle floating base (:meth:`~rtctl.model.ModelBuilder.add_euler_floating_base`,
    ``q[0:6] = [x, y, z, yaw, pitch, roll]``, ``R = Rz Ry Rx``), then four legs
    (modules M_1..M_4, order front-left, front-right, hind-left, hind-right), each
    ``[hip roll (about x), hip pitch (about y), knee (about y)]``.

    * Trunk: l_0 = 1 m long (x), m_0 = 4 kg; width 0.3 m (y) and height 0.1 m
      (z) are choices (not in the paper); inertia of that solid box, centre of
      mass at the body origin. The hips are at (+-0.5, +-0.15, 0).
    * Universal hip: the roll joint carries a massless intermediate body (not a
      link of the paper's nine), the pitch joint the thigh; so the paper's
      link masses stay as given: thigh and shank 0.3 m, 1 kg each, solid
      cylinders of radius 0.02 m hanging along -z.
    * Point foot: one contact point at the shank tip (0, 0, -0.3).

Inertias of cylinders/boxes are the standard solid-body formulas; the values are
asserted against Pinocchio (built from :meth:`LeggedRobot.to_urdf`) in the tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtctl.model import Model, ModelBuilder

__all__ = ["LEGGED_ROBOTS", "QUADRUPED_LEGS", "LeggedRobot", "planar_biped", "spatial_quadruped"]

LINK_RADIUS = 0.02


def cylinder_inertia(mass: float, length: float, radius: float, axis: int) -> np.ndarray:
    """Solid cylinder about its centre: ``m (3 r^2 + l^2) / 12`` transverse, ``m r^2 / 2`` about ``axis``."""
    i = np.full(3, mass * (3 * radius ** 2 + length ** 2) / 12.0)
    i[axis] = mass * radius ** 2 / 2.0
    return np.diag(i)


def box_inertia(mass: float, size) -> np.ndarray:
    """Solid box of edge lengths ``size = (a, b, c)`` about its centre."""
    a, b, c = size
    return np.diag([mass * (b * b + c * c), mass * (a * a + c * c), mass * (a * a + b * b)]) / 12.0


@dataclass
class LeggedRobot:
    """A floating-base legged robot: model, contact points, kinematic modules and leg geometry.

    * ``model``: the full tree (base joints first, then the legs).
    * ``n_base``: unactuated base DOFs (3 planar, 6 Euler chain); the actuated
      joints are DOFs ``n_base..nv-1`` in leg order.
    * ``contact_bodies`` (nc,) int64, ``contact_points`` (nc, 3): contact points
      in their bodies' frames; ``foot_names`` (nc,).
    * ``feet``: ``{foot: indices into the contact points}``; ``legs``:
      ``{leg: (v indices of its actuated joints)}``, same key order as ``feet``.
    * ``modules``: the paper's kinematic modules, ``[(name, [body names])]``.
    * ``hip_offsets`` (nlegs, 3): hip joint positions in the trunk frame;
      ``link_lengths``: ``{"trunk", "thigh", "shank", "foot"}`` (m);
      ``ankle_height``: ankle above the sole (biped, m); ``heel_offset``: ankle
      in front of the heel (biped, m).
    """

    name: str
    model: Model
    n_base: int
    contact_bodies: np.ndarray
    contact_points: np.ndarray
    foot_names: list
    modules: list
    feet: dict
    legs: dict
    hip_offsets: np.ndarray
    link_lengths: dict
    ankle_height: float = 0.0
    heel_offset: float = 0.0
    trunk_body: str = "trunk"

    @property
    def total_mass(self) -> float:
        return self.model.total_mass

    @property
    def n_actuated(self) -> int:
        return self.model.nv - self.n_base

    @property
    def weight(self) -> float:
        """Total weight (N) under the model's gravity."""
        return self.total_mass * float(np.linalg.norm(self.model.gravity))

    def module_indices(self) -> list:
        """The modules as lists of body indices."""
        return [[self.model.body_index(b) for b in bodies] for _, bodies in self.modules]

    def to_urdf(self) -> str:
        """URDF text of the full tree (base joints included), read back by ``load_urdf(text)``."""
        from rtctl.model.urdf import model_to_urdf
        return model_to_urdf(self.model)


def planar_biped(*, ankle_height: float = 0.04, heel_offset: float = 0.0) -> LeggedRobot:
    """The 7-link, 9-DOF planar biped of section 5.1 (geometry in the module docstring)."""
    l0, l_leg, l_foot = 0.5, 0.5, 0.15
    m0, m_leg, m_foot = 5.0, 1.0, 0.2
    if not 0.0 < ankle_height < 0.5:
        raise ValueError(f"ankle_height must be in (0, 0.5) m, got {ankle_height}")
    if not 0.0 <= heel_offset <= l_foot:
        raise ValueError(f"heel_offset must be in [0, {l_foot}] m, got {heel_offset}")
    b = ModelBuilder("planar_biped")
    trunk = b.add_planar_floating_base("trunk", mass=m0, inertia=cylinder_inertia(m0, l0, 0.05, axis=2))
    y_axis = (0.0, 1.0, 0.0)
    heel, toe = -heel_offset, l_foot - heel_offset
    foot_com = (0.5 * (heel + toe), 0.0, -ankle_height)
    foot_inertia = np.diag([0.0, m_foot * l_foot ** 2 / 12.0, m_foot * l_foot ** 2 / 12.0])
    leg_inertia = cylinder_inertia(m_leg, l_leg, LINK_RADIUS, axis=2)
    contact_bodies, contact_points, foot_names, feet, legs = [], [], [], {}, {}
    modules = [("M0", ["trunk_Tx", "trunk_Tz", "trunk"])]
    for k, side in enumerate(("left", "right")):
        thigh = b.add_body(f"{side}_thigh", trunk, "revolute", joint_name=f"{side}_hip", axis=y_axis,
                           translation=(0, 0, -l0 / 2), mass=m_leg, com=(0, 0, -l_leg / 2), inertia=leg_inertia)
        shank = b.add_body(f"{side}_shank", thigh, "revolute", joint_name=f"{side}_knee", axis=y_axis,
                           translation=(0, 0, -l_leg), mass=m_leg, com=(0, 0, -l_leg / 2), inertia=leg_inertia)
        foot = b.add_body(f"{side}_foot", shank, "revolute", joint_name=f"{side}_ankle", axis=y_axis,
                          translation=(0, 0, -l_leg), mass=m_foot, com=foot_com, inertia=foot_inertia)
        b.add_frame(f"{side}_sole", foot, translation=(0, 0, -ankle_height))
        feet[f"{side}_foot"] = [len(foot_names), len(foot_names) + 1]
        for label, x in (("heel", heel), ("toe", toe)):
            contact_bodies.append(foot)
            contact_points.append((x, 0.0, -ankle_height))
            foot_names.append(f"{side}_{label}")
        legs[f"{side}_leg"] = tuple(range(3 + 3 * k, 6 + 3 * k))
        modules.append((f"M{k + 1}", [f"{side}_thigh", f"{side}_shank", f"{side}_foot"]))
    model = b.build()
    return LeggedRobot(
        name="planar_biped", model=model, n_base=model.n_base_dofs,
        contact_bodies=np.array(contact_bodies, dtype=np.int64),
        contact_points=np.array(contact_points, dtype=float), foot_names=foot_names,
        modules=modules, feet=feet, legs=legs,
        hip_offsets=np.array([[0.0, 0.0, -l0 / 2]] * 2),
        link_lengths={"trunk": l0, "thigh": l_leg, "shank": l_leg, "foot": l_foot},
        ankle_height=float(ankle_height), heel_offset=float(heel_offset),
    )


QUADRUPED_LEGS = ("front_left", "front_right", "hind_left", "hind_right")


def spatial_quadruped(*, width: float = 0.3) -> LeggedRobot:
    """The 9-link, 18-DOF spatial quadruped of section 5.2 (geometry in the module docstring)."""
    l0, l_leg = 1.0, 0.3
    m0, m_leg = 4.0, 1.0
    height = 0.1
    if not 0.0 < width <= 1.0:
        raise ValueError(f"width must be in (0, 1] m, got {width}")
    b = ModelBuilder("spatial_quadruped")
    trunk = b.add_euler_floating_base("trunk", sequence="zyx", mass=m0, inertia=box_inertia(m0, (l0, width, height)))
    leg_inertia = cylinder_inertia(m_leg, l_leg, LINK_RADIUS, axis=2)
    hips = {"front_left": (l0 / 2, width / 2, 0.0), "front_right": (l0 / 2, -width / 2, 0.0),
            "hind_left": (-l0 / 2, width / 2, 0.0), "hind_right": (-l0 / 2, -width / 2, 0.0)}
    contact_bodies, contact_points, foot_names, feet, legs = [], [], [], {}, {}
    modules = [("M0", ["trunk_Tx", "trunk_Ty", "trunk_Tz", "trunk_R0z", "trunk_R1y", "trunk"])]
    for k, leg in enumerate(QUADRUPED_LEGS):
        roll = b.add_body(f"{leg}_hip", trunk, "revolute", joint_name=f"{leg}_hip_roll", axis=(1, 0, 0),
                          translation=hips[leg])
        thigh = b.add_body(f"{leg}_thigh", roll, "revolute", joint_name=f"{leg}_hip_pitch", axis=(0, 1, 0),
                           mass=m_leg, com=(0, 0, -l_leg / 2), inertia=leg_inertia)
        shank = b.add_body(f"{leg}_shank", thigh, "revolute", joint_name=f"{leg}_knee", axis=(0, 1, 0),
                           translation=(0, 0, -l_leg), mass=m_leg, com=(0, 0, -l_leg / 2), inertia=leg_inertia)
        b.add_frame(f"{leg}_foot", shank, translation=(0, 0, -l_leg))
        feet[f"{leg}_foot"] = [k]
        contact_bodies.append(shank)
        contact_points.append((0.0, 0.0, -l_leg))
        foot_names.append(f"{leg}_foot")
        legs[leg] = tuple(range(6 + 3 * k, 9 + 3 * k))
        modules.append((f"M{k + 1}", [f"{leg}_hip", f"{leg}_thigh", f"{leg}_shank"]))
    model = b.build()
    return LeggedRobot(
        name="spatial_quadruped", model=model, n_base=model.n_base_dofs,
        contact_bodies=np.array(contact_bodies, dtype=np.int64),
        contact_points=np.array(contact_points, dtype=float), foot_names=foot_names,
        modules=modules, feet=feet, legs=legs,
        hip_offsets=np.array([hips[leg] for leg in QUADRUPED_LEGS], dtype=float),
        link_lengths={"trunk": l0, "thigh": l_leg, "shank": l_leg, "width": width},
    )


LEGGED_ROBOTS = {"planar_biped": planar_biped, "spatial_quadruped": spatial_quadruped}


def planar_biped_model():
    """The robot model ``"planar_biped"``: the full floating-base tree of :func:`planar_biped`."""
    return planar_biped().model


def spatial_quadruped_model():
    """The robot model ``"spatial_quadruped"``: the full floating-base tree of :func:`spatial_quadruped`."""
    return spatial_quadruped().model
