"""The masticatory rehabilitation robot of Kalani et al. (2018): two Gough-Stewart platforms,
Gibbs-Appell inverse dynamics (appendix A-D), the patient impedance and the incisal-point mapping.

Only the paper's abstract, references and appendix are available; the
geometry, masses and patient model below are ours, documented with their
reasoning. Frames, units and the pose x = [x, y, z, psi, theta, phi] (m, rad;
ZYX Euler angles) are those of :mod:`rtctl.plants.stewart.model`; spatial
vectors are [angular; linear] in rtctl, but the platform wrenches and twists
here follow the papers: [force; moment] and [v; omega].

The system
----------
* ``robot`` -- the rehabilitation robot, a 6-UPS :class:`StewartPlatform` on the
  table, base frame {B} (x lateral, y anterior, z up), moving platform {P}.
* ``jaw`` -- the second platform, a model of the human jaw: its base {B'} is the
  skull (maxilla), {B} turned by pi about x and lifted to ``skull_height``; its
  moving platform {P'} is the mandible, {P} turned by pi about x and rigidly
  fixed to the robot's moving platform (the bite splint). One pose x drives
  both: the jaw model's pose is x' = S x + c, S = diag(1, -1, -1, -1, -1, 1),
  c = [0, 0, skull_height, 0, 0, 0] (see :mod:`rtctl.plants.jaw.kernels`).
  Its six legs are passive (no actuator force): they contribute their inertia
  and weight. The robot's platform centre of mass and the mandible's are both
  at the {P} origin (the splint is mounted so that they coincide).
* the patient -- :class:`PatientImpedance`: per-axis stiffness and damping about
  the rest (occlusion) pose on the six pose coordinates and an optional food
  bolus resisting closing inside an opening band.

Dynamics
--------
:func:`gibbs_appell_inverse_dynamics` is the appendix's formulation: the Gibbs
functions of the platform (B.1-B.6), cylinders (C.1-C.4) and pistons
(D.1-D.4), built from J_bi, J_p and the link Jacobians and acceleration terms
D_2i..D_8i (A.1-A.32); the leg forces follow from J_p^T tau = dS/d(x-ddot_M) - Q_g,
the partial derivatives of the total Gibbs function with respect to the
platform accelerations x-ddot_M = [v-dot; omega-dot] minus the weights'
generalized force. :func:`rtctl.plants.jaw.reference.gibbs_appell_reference` is
the same in plain NumPy (also the Gibbs function values); the compiled kernel is
checked against it.
:meth:`JawRehabRobot.inverse_dynamics` is the two-platform Gibbs-Appell ID
(robot legs carry everything: both platforms, both leg sets, the patient);
:meth:`JawRehabRobot.forward_dynamics` is the plant's independent model, the
generalized-momentum formulation of Lopes (2009) for each platform.

Corrections to the appendix as printed (each re-derived; the tests check them):

* A.16: the matrix multiplying [v-dot; omega-dot] is J_bi of A.3 (the printed
  signs of its b entries are garbled); A.15 is the derivative of A.1, not A.6.
* A.19-A.20: the leg acceleration is q-ddot_i = iJ_bi,z x-ddot_M + iD_2i,z +
  (iv_bi,x^2 + iv_bi,y^2) / d_i; the printed O(q, q-dot) omits iD_2i,z, the
  centripetal acceleration of b_i along the leg.
* A.25-A.26: A.25 subtracts the underbraced iD_5i, A.26 adds it; the cylinder
  acceleration is (e_1i/d_i)[iv-dot_bi,x, iv-dot_bi,y, 0] - (e_1i/d_i^2)[2 v_x v_z,
  2 v_y v_z, v_x^2 + v_y^2], so iD_5i is the underbraced term *with* the minus sign.
* B.3-B.6: alpha-dot, beta-dot, gamma-dot are the angular-velocity components
  in the platform's principal axes (B.6 is Euler's equations), not Euler-angle rates.
* C.3: the cylinder's principal inertias are I^1i (printed I^2i) and the first
  term is squared like the others; D.1 has m_2i (printed m); D.3 is the piston's:
  I^2i and H_2i (printed I^1i, H_1i). C.3, D.3 take the angular acceleration in
  the leg frame {i}, where the inertia is diagonal: iJ_omega_i, iD_4i (the printed
  B_R_i-rotated J_omega_i, D_4i would pair {B} components with leg-frame inertias).

Agreement with the generalized-momentum model of Lopes (2009): exact for legs whose
cylinder and piston are bodies of revolution about the leg axis (I_yy = I_zz),
as all legs here. Both formulations take the leg's angular velocity
perpendicular to the leg (A.8), i.e. neglect the spin a universal joint gives
the leg about its axis: exact for zero axial leg inertia; with the robot's
actuators (axial 1.7e-5 kg m^2) the leg forces differ from the true
universal-joint mechanism (the generic core) by under 1% in our tests.
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.model.closed_chain import ClosedChain

from . import kernels as _jk
from ..stewart import kernels as _sk
from ..stewart.model import BODY_BITS, WORKSPACE_REASONS, StewartPlatform

__all__ = ["JawRehabRobot", "PatientImpedance", "gibbs_appell_inverse_dynamics", "gibbs_appell_wrench", "ROBOT_PARAMETERS", "JAW_PARAMETERS", "REST_POSE", "SKULL_HEIGHT",
           "INCISAL_POINT", "HINGE_RADIUS", "STATUS_REASONS"]

ALUMINIUM, STEEL = 2700.0, 7850.0   # kg/m^3


def _disc(density, radius, thickness):
    """(mass, principal inertias about the centre) of a solid disc, axis z."""
    m = density * math.pi * radius ** 2 * thickness
    return m, (m * (3 * radius ** 2 + thickness ** 2) / 12, m * (3 * radius ** 2 + thickness ** 2) / 12,
               m * radius ** 2 / 2)


def _rod(mass, radius, length):
    """Principal inertias (axial, transverse, transverse) of a solid cylinder about its centre, axis x
    (the leg axis of the leg frame of Lopes, 2009)."""
    t = mass * (3 * radius ** 2 + length ** 2) / 12
    return (mass * radius ** 2 / 2, t, t)


def _box(mass, a, b, c):
    """Principal inertias of a solid box with edges a (x), b (y), c (z)."""
    return (mass * (b * b + c * c) / 12, mass * (a * a + c * c) / 12, mass * (a * a + b * b) / 12)


# ---------------------------------------------------------------- default geometry and mass properties
# Rehabilitation robot: a desktop 6-UPS platform. Joint circles r_B = 120 mm (table) and r_P = 80 mm,
# joint pairs 2 x 15 deg / 2 x 10 deg apart (a 6-6 platform, well conditioned over the chewing workspace).
# Legs: compact electric linear actuators (DC motor + lead screw), stroke 130-200 mm pin to pin (70 mm).
# Moving platform: aluminium disc, radius 90 mm, 6 mm thick (0.41 kg).
# Cylinder (motor, gearbox, housing): 0.15 kg, a solid cylinder of radius 15 mm and length 130 mm, its
# centre of mass 60 mm from the base joint. Piston: steel rod of radius 4 mm and length 120 mm (0.047 kg),
# centre of mass 60 mm from the platform joint.
_m_plate, _I_plate = _disc(ALUMINIUM, 0.09, 0.006)
_m_rod = STEEL * math.pi * 0.004 ** 2 * 0.12
ROBOT_PARAMETERS = dict(
    r_B=0.12, r_P=0.08, phi_B=math.radians(15.0), phi_P=math.radians(10.0),
    m_P=_m_plate, I_P=_I_plate,
    m_C=0.15, I_C=_rod(0.15, 0.015, 0.13), b_C=0.06,
    m_S=_m_rod, I_S=_rod(_m_rod, 0.004, 0.12), b_S=0.06,
    stroke=(0.13, 0.20), force_limit=60.0, velocity_limit=0.3,
)
# Rest (occlusion) pose of {P}: the legs are near the top of their stroke so that opening uses most of it.
REST_POSE = np.array([0.0, 0.0, 0.16, 0.0, 0.0, 0.0])
# Jaw model: skull joints on r_B' = 90 mm, mandible joints on r_P' = 50 mm, the skull 90 mm above the
# mandible at rest (passive legs 90-150 mm). Mandible: 0.30 kg (dentate adult mandible with attached
# tissue, the 0.2-0.4 kg used in dynamic jaw models); inertias of its bounding box, 100 mm lateral x
# 90 mm antero-posterior x 50 mm vertical, which reproduces the ordering reported by Zhang, Peck &
# Hannam (J Biomech 35, 2002: smallest about the transverse axis, largest about the vertical axis).
# Passive legs: aluminium tube 0.04 kg (radius 8 mm, length 80 mm, centre 40 mm from the skull joint)
# and aluminium rod (radius 4 mm, length 70 mm, centre 35 mm from the mandible joint).
_m_pin = ALUMINIUM * math.pi * 0.004 ** 2 * 0.07
JAW_REST_HEIGHT = 0.09
SKULL_HEIGHT = float(REST_POSE[2]) + JAW_REST_HEIGHT
JAW_PARAMETERS = dict(
    r_B=0.09, r_P=0.05, phi_B=math.radians(15.0), phi_P=math.radians(10.0),
    m_P=0.30, I_P=_box(0.30, 0.10, 0.09, 0.05),
    m_C=0.04, I_C=_rod(0.04, 0.008, 0.08), b_C=0.04,
    m_S=_m_pin, I_S=_rod(_m_pin, 0.004, 0.07), b_S=0.035,
    stroke=(0.09, 0.15),
)
# Incisal point (between the lower central incisors) in {P}: 35 mm anterior of and 20 mm above the
# mandible's centre of mass, which lies between the second and third molars (Zhang et al. 2002).
INCISAL_POINT = np.array([0.0, 0.035, 0.02])
# Opening rotation a = p_z / rho about the lateral axis: rho = 88 mm is the antero-posterior distance from
# the incisal point to the condylar axis in Bonwill's equilateral triangle of 4 in (101.6 mm) sides.
HINGE_RADIUS = 0.1016 * math.sqrt(3.0) / 2.0

STATUS_REASONS = {0: "inside the workspace"}
STATUS_REASONS.update({k: f"robot: {v}" for k, v in WORKSPACE_REASONS.items() if k})
STATUS_REASONS.update({_jk.JAW_STATUS_OFFSET + k: f"jaw model: {v}" for k, v in WORKSPACE_REASONS.items() if k})
STATUS_REASONS[_jk.BAD_ARGUMENT] = "bad argument: p, pd, pdd must have length 3 and l, ld, ldd length 6"


def _vec(value, n, name, *, nonneg=False):
    try:
        arr = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or {n} numbers, got {value!r}") from None
    if not np.all(np.isfinite(arr)) or (nonneg and np.any(arr < 0)):
        raise ValueError(f"{name} must be finite{' and >= 0' if nonneg else ''}, got {arr.tolist()}")
    return arr


def _scalar(value, name, *, low=None, positive=False):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or (positive and not v > 0) or (low is not None and v < low):
        cond = "> 0" if positive else f">= {low}" if low is not None else "finite"
        raise ValueError(f"{name} must be finite and {cond}, got {value!r}")
    return v


class PatientImpedance:
    """The patient's (or jaw model's) passive resistance, a generalized force on the pose coordinates:

    f = -K (x - x_rest) - D x-dot + J_I^T [0, 0, -F_b]      (power f . x-dot)

    ``stiffness`` K (6: N/m for x, y, z; N m/rad for psi, theta, phi) and ``damping`` D (6: N s/m,
    N m s/rad), scalars or 6 values, >= 0. The food bolus pushes the incisal point down while the jaw
    *closes* (incisal velocity z-dot > 0) and the incisal vertical displacement p_z is inside
    ``bolus_band`` = (lo, hi) m: F_b = w(p_z) (``bolus_damping`` z-dot + ``bolus_force`` tanh(z-dot /
    ``bolus_velocity_scale``)) >= 0, w a C1 smoothstep window rising over ``bolus_edge`` m inside each end
    of the band. No bolus by default (``bolus_damping = bolus_force = 0``).

    Defaults: our nominal values of the order of the passive resistance of the jaw to opening (a few N
    over the chewing range: 300 N/m on the translations, 3 N m/rad on the rotations), light damping;
    they are not measured patient data -- identify them per patient.
    """

    FIELDS = ("stiffness", "damping", "bolus_damping", "bolus_force", "bolus_band", "bolus_edge",
              "bolus_velocity_scale")

    def __init__(self, stiffness=(300.0, 300.0, 300.0, 3.0, 3.0, 3.0), damping=(5.0, 5.0, 5.0, 0.05, 0.05, 0.05),
                 *, bolus_damping: float = 0.0, bolus_force: float = 0.0, bolus_band=(-0.015, 0.0),
                 bolus_edge: float = 1e-3, bolus_velocity_scale: float = 5e-3):
        self.stiffness = _vec(stiffness, 6, "stiffness", nonneg=True)
        self.damping = _vec(damping, 6, "damping", nonneg=True)
        self.bolus_damping = _scalar(bolus_damping, "bolus_damping", low=0.0)
        self.bolus_force = _scalar(bolus_force, "bolus_force", low=0.0)
        band = np.asarray(bolus_band, dtype=float) if np.ndim(bolus_band) == 1 else None
        if band is None or band.shape != (2,) or not np.all(np.isfinite(band)) or not band[0] < band[1]:
            raise ValueError(f"bolus_band must be (lower, upper) incisal vertical displacements in m with "
                             f"lower < upper, got {bolus_band!r}")
        self.bolus_band = (float(band[0]), float(band[1]))
        self.bolus_edge = _scalar(bolus_edge, "bolus_edge", low=0.0)
        if 2 * self.bolus_edge > band[1] - band[0]:
            raise ValueError(f"bolus_edge must be at most half the band width "
                             f"({(band[1] - band[0]) / 2:g} m), got {bolus_edge!r}")
        self.bolus_velocity_scale = _scalar(bolus_velocity_scale, "bolus_velocity_scale", positive=True)

    @classmethod
    def none(cls) -> "PatientImpedance":
        """No patient: zero stiffness, damping and bolus."""
        return cls(0.0, 0.0)

    def replace(self, **changes) -> "PatientImpedance":
        unknown = sorted(set(changes) - set(self.FIELDS))
        if unknown:
            raise ValueError(f"unknown impedance parameter {unknown[0]!r}; known: {list(self.FIELDS)}")
        kw = self.as_dict()
        kw.update({k: v for k, v in changes.items() if v is not None})
        return PatientImpedance(kw.pop("stiffness"), kw.pop("damping"), **kw)

    def as_dict(self) -> dict:
        return dict(stiffness=self.stiffness.tolist(), damping=self.damping.tolist(),
                    bolus_damping=self.bolus_damping, bolus_force=self.bolus_force,
                    bolus_band=list(self.bolus_band), bolus_edge=self.bolus_edge,
                    bolus_velocity_scale=self.bolus_velocity_scale)

    def pack(self, cp: np.ndarray) -> None:
        """Write into a coupling parameter row (``_jaw_kernels.C_*``)."""
        cp[_jk.C_K:_jk.C_K + 6] = self.stiffness
        cp[_jk.C_D:_jk.C_D + 6] = self.damping
        cp[_jk.C_BD], cp[_jk.C_BF] = self.bolus_damping, self.bolus_force
        cp[_jk.C_BLO], cp[_jk.C_BHI] = self.bolus_band
        cp[_jk.C_BE], cp[_jk.C_BV] = self.bolus_edge, self.bolus_velocity_scale

    def __repr__(self):
        return f"PatientImpedance({', '.join(f'{k}={v}' for k, v in self.as_dict().items())})"


# ---------------------------------------------------------------- Gibbs-Appell of one platform
def _work():
    return np.zeros((_jk.NW, 6, 6)), np.zeros((_jk.NV, 6))


def _bits(bodies):
    if isinstance(bodies, str):
        try:
            return BODY_BITS[bodies]
        except KeyError:
            raise ValueError(f"bodies must be one of {sorted(BODY_BITS)} or a bit mask, got {bodies!r}") from None
    return int(bodies)


def gibbs_appell_wrench(platform: StewartPlatform, x, xd, xdd, bodies="all", work=None) -> np.ndarray:
    """dS/d(x-ddot_M) - Q_g of the selected bodies (compiled): the wrench [force; moment about the platform
    centre] in the platform's base frame that the legs must exert (``_jaw_kernels.ga_wrench``)."""
    W, V = work or _work()
    F = np.zeros(6)
    _jk.ga_wrench(platform.pts, platform.par, platform._pose(x), platform._pose(xd, "xd"),
                  platform._pose(xdd, "xdd"), _bits(bodies), F, W, V)
    return F


def gibbs_appell_inverse_dynamics(platform: StewartPlatform, x, xd, xdd, bodies="all", work=None) -> np.ndarray:
    """Leg forces (N) of one platform by Gibbs-Appell (compiled): J_p^T tau = dS/d(x-ddot_M) - Q_g (A.7, B-D)."""
    W, V = work or _work()
    tau = np.zeros(6)
    st = _jk.ga_inverse_dynamics(platform.pts, platform.par, platform._pose(x), platform._pose(xd, "xd"),
                                 platform._pose(xdd, "xdd"), _bits(bodies), tau, W, V)
    if st != _jk.OK:
        raise ValueError("J_p is singular at this pose: no finite leg forces")
    return tau


# ---------------------------------------------------------------- the two-platform system
class JawRehabRobot:
    """Rehabilitation robot + jaw model + patient (module docstring).

    Parameters
    ----------
    robot, jaw : the two :class:`StewartPlatform` s (defaults: :data:`ROBOT_PARAMETERS`,
        :data:`JAW_PARAMETERS`; the jaw's gravity must be ``-robot.g``: its z' axis points down).
    rest_pose : the occlusion pose of {P} (orientation zero: the frames are level at occlusion).
    skull_height : height of the jaw model's base plane above the table, m.
    incisal_point : the incisal point in {P}, m.
    hinge_radius : rho of the opening rotation a = p_z / rho, m (``math.inf``: pure translation).
    impedance : the nominal :class:`PatientImpedance` (default: its defaults).
    """

    def __init__(self, robot: StewartPlatform | None = None, jaw: StewartPlatform | None = None, *,
                 rest_pose=REST_POSE, skull_height: float = SKULL_HEIGHT, incisal_point=INCISAL_POINT,
                 hinge_radius: float = HINGE_RADIUS, impedance: PatientImpedance | None = None):
        rest = np.asarray(rest_pose, dtype=float)
        if rest.shape != (6,) or not np.all(np.isfinite(rest)):
            raise ValueError(f"rest_pose must be 6 finite values [x, y, z, psi, theta, phi], got {rest_pose!r}")
        if np.any(rest[3:] != 0.0):
            raise ValueError(f"rest_pose orientation must be zero (the frames are level at occlusion), got "
                             f"{rest[3:].tolist()}")
        self.rest_pose = rest
        self.skull_height = _scalar(skull_height, "skull_height", positive=True)
        if not self.skull_height > rest[2]:
            raise ValueError(f"skull_height ({skull_height} m) must be above the rest pose height ({rest[2]} m)")
        self.incisal_offset = _vec(incisal_point, 3, "incisal_point")
        rho = float(hinge_radius) if isinstance(hinge_radius, (int, float)) else math.nan
        if not rho > 0:
            raise ValueError(f"hinge_radius must be > 0 m (math.inf for a pure translation), got {hinge_radius!r}")
        self.hinge_radius = rho
        self.robot = robot or StewartPlatform(**ROBOT_PARAMETERS, home=rest)
        jaw_rest = self.jaw_pose(rest)
        self.jaw = jaw or StewartPlatform(**JAW_PARAMETERS, g=-self.robot.g, home=jaw_rest)
        if self.jaw.g != -self.robot.g:
            raise ValueError(f"jaw.g must be -robot.g = {-self.robot.g} (gravity along +z' of the skull frame), "
                             f"got {self.jaw.g}")
        if impedance is not None and not isinstance(impedance, PatientImpedance):
            raise ValueError(f"impedance must be a PatientImpedance, got {type(impedance).__name__}")
        self.impedance = impedance or PatientImpedance()
        self.pts2 = np.ascontiguousarray(np.stack([self.robot.pts, self.jaw.pts]))
        self.P = self.pack()
        self.W, self.V = _work()
        status = self.workspace_status(rest)
        if status:
            raise ValueError(f"rest pose {rest.tolist()} is not in the workspace: {STATUS_REASONS[status]}")

    def with_inertia_scaled(self, factor: float) -> "JawRehabRobot":
        """The same robot and jaw model with every mass and inertia (platform, legs, mandible) times ``factor``
        (a model error for robustness tests); the patient's impedance is kept."""
        return JawRehabRobot(self.robot.with_inertia_scaled(factor), self.jaw.with_inertia_scaled(factor),
                             rest_pose=self.rest_pose, skull_height=self.skull_height,
                             incisal_point=self.incisal_offset, hinge_radius=self.hinge_radius,
                             impedance=self.impedance)

    def with_payload(self, mass: float) -> "JawRehabRobot":
        """The same robot carrying a point mass ``mass`` (kg) at the centre of mass of its moving platform."""
        return JawRehabRobot(self.robot.with_payload(mass), self.jaw, rest_pose=self.rest_pose,
                             skull_height=self.skull_height, incisal_point=self.incisal_offset,
                             hinge_radius=self.hinge_radius, impedance=self.impedance)

    # ------------------------------------------------------------ packing
    def pack(self, impedance: PatientImpedance | None = None, *, viscous_friction=0.0, coulomb_friction=0.0,
             coulomb_velocity_scale: float = 1e-3, stribeck_level=0.0, stribeck_velocity=1.0) -> np.ndarray:
        """The kernels' parameter array P (3, NP): robot par, jaw par, coupling row (with ``impedance``,
        default the nominal one, and the robot legs' friction; ``stribeck_level`` is static minus Coulomb)."""
        P = np.zeros((3, _jk.NP))
        P[_jk.ROBOT, :_sk.NPAR] = self.robot.par
        P[_jk.JAW, :_sk.NPAR] = self.jaw.par
        cp = P[_jk.CPL]
        cp[_jk.C_X0:_jk.C_X0 + 6] = self.rest_pose
        cp[_jk.C_H] = self.skull_height
        cp[_jk.C_INC:_jk.C_INC + 3] = self.incisal_offset
        cp[_jk.C_HINGE] = 1.0 / self.hinge_radius
        (impedance or self.impedance).pack(cp)
        cp[_jk.C_VISC:_jk.C_VISC + 6] = _vec(viscous_friction, 6, "viscous_friction", nonneg=True)
        cp[_jk.C_COUL:_jk.C_COUL + 6] = _vec(coulomb_friction, 6, "coulomb_friction", nonneg=True)
        cp[_jk.C_VSC] = _scalar(coulomb_velocity_scale, "coulomb_velocity_scale", positive=True)
        cp[_jk.C_STRIBECK:_jk.C_STRIBECK + 6] = _vec(stribeck_level, 6, "stribeck_level")
        cp[_jk.C_STRIBECK_V:_jk.C_STRIBECK_V + 6] = _vec(stribeck_velocity, 6, "stribeck_velocity")
        cp[_jk.C_DETR], cp[_jk.C_DETJ] = self.robot.det_min, self.jaw.det_min
        return P

    def _pose(self, x, name="x"):
        return self.robot._pose(x, name)

    # ------------------------------------------------------------ kinematics
    def jaw_pose(self, x, xd=None, xdd=None):
        """The jaw model's pose x' = S x + c (and S xd, S xdd when given)."""
        s = np.array([1.0, -1.0, -1.0, -1.0, -1.0, 1.0])
        xj = s * self._pose(x) + np.array([0.0, 0.0, self.skull_height, 0.0, 0.0, 0.0])
        if xd is None and xdd is None:
            return xj
        out = [xj]
        for v, name in ((xd, "xd"), (xdd, "xdd")):
            out.append(None if v is None else s * self._pose(v, name))
        return tuple(out)

    def workspace_status(self, x) -> int:
        """0 inside the workspace of both platforms, else a key of :data:`STATUS_REASONS`."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (6,):
            raise ValueError(f"x must have shape (6,), got {x.shape}")
        return int(_jk.coupled_workspace_status(self.pts2, self.P, x, self.W, self.V))

    def check_workspace(self, x) -> tuple[bool, str]:
        s = self.workspace_status(x)
        return s == 0, STATUS_REASONS[s]

    def leg_motion(self, x, xd, xdd):
        """Robot leg lengths, rates, accelerations of the platform motion."""
        return self.robot.leg_motion(x, xd, xdd)

    def jaw_leg_lengths(self, x) -> np.ndarray:
        return self.jaw.leg_lengths(self.jaw_pose(x))

    def incisal_point(self, x) -> np.ndarray:
        """Incisal displacement p from occlusion (m, [lateral, anterior, vertical]) of the pose x."""
        x = self._pose(x)
        return x[:3] + self.robot.rotation(x) @ self.incisal_offset - self.rest_pose[:3] - self.incisal_offset

    def incisal_pose(self, p, pd=None, pdd=None):
        """(x, xd, xdd) of {P} for the incisal displacement p, velocity pd, acceleration pdd (default 0):
        the opening rotation a = p_z / rho about the lateral axis plus the translation that puts the
        incisal point at r_I + p (``_jaw_kernels.incisal_pose``)."""
        vals = [_vec(0.0 if v is None else v, 3, name) for v, name in ((p, "p"), (pd, "pd"), (pdd, "pdd"))]
        x, xd, xdd = np.zeros(6), np.zeros(6), np.zeros(6)
        _jk.incisal_pose(self.P[_jk.CPL], *vals, x, xd, xdd)
        return x, xd, xdd

    def incisal_to_legs(self, p, pd, pdd, l, ld, ldd) -> int:
        """Write the robot's leg lengths ``l``, rates ``ld`` and accelerations ``ldd`` (preallocated float64
        (6,) arrays) for the incisal motion (p, pd, pdd) (each (3,): m, m/s, m/s^2; [lateral, anterior,
        vertical up]); one compiled, allocation-free call. Returns 0, or a key of :data:`STATUS_REASONS`
        when the pose leaves the workspace of either platform (outputs untouched).
        From compiled code call ``_jaw_kernels.incisal_to_legs(m.pts2, m.P, p, pd, pdd, l, ld, ldd, W, V)``
        with work arrays ``W, V`` of shapes (NW, 6, 6), (NV, 6) (zeros)."""
        try:
            return _jk.incisal_to_legs(self.pts2, self.P, p, pd, pdd, l, ld, ldd, self.W, self.V)
        except TypeError:
            pass
        for name, a in (("l", l), ("ld", ld), ("ldd", ldd)):
            if not (isinstance(a, np.ndarray) and a.shape == (6,) and a.dtype == np.float64
                    and a.flags.c_contiguous and a.flags.writeable):
                raise ValueError(f"{name} must be a writable C-contiguous float64 array of shape (6,)")
        vals = []
        for name, a in (("p", p), ("pd", pd), ("pdd", pdd)):
            try:
                arr = np.array(a, dtype=np.float64, order="C")
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be 3 numbers, got {a!r}") from None
            if arr.shape != (3,):
                raise ValueError(f"{name} must have shape (3,), got {arr.shape}")
            vals.append(arr)
        return _jk.incisal_to_legs(self.pts2, self.P, *vals, l, ld, ldd, self.W, self.V)

    def random_pose(self, rng: np.random.Generator, *, span=(0.008, 0.008, 0.02, 0.1, 0.1, 0.25)) -> np.ndarray:
        """A random pose in the workspace of both platforms around the rest pose, the opening mostly downward."""
        span = np.asarray(span, dtype=float)
        for _ in range(1000):
            x = self.rest_pose + rng.uniform(-1, 1, 6) * span
            x[2] = self.rest_pose[2] - abs(x[2] - self.rest_pose[2])
            if self.workspace_status(x) == 0:
                return x
        raise RuntimeError("no pose inside the workspace found")

    # ------------------------------------------------------------ dynamics
    def patient_force(self, x, xd, impedance: PatientImpedance | None = None):
        """(f, record): the patient's generalized force on the pose coordinates (power f . xd) and
        ``dict(p, bolus_force, incisal_velocity_z, bolus_window)``."""
        x, xd = self._pose(x), self._pose(xd, "xd")
        P = self.P if impedance is None else self.pack(impedance)
        JA, _, _, _ = self.robot.euler_jacobian(x)
        f, rec = np.zeros(6), np.zeros(6)
        _jk.patient_force(P[_jk.CPL], x, xd, self.robot.rotation(x), JA, f, rec)
        return f, dict(p=rec[:3].copy(), bolus_force=float(rec[3]), incisal_velocity_z=float(rec[4]),
                       bolus_window=float(rec[5]))

    def patient_wrench(self, x, xd, impedance: PatientImpedance | None = None) -> np.ndarray:
        """The patient's wrench on the platform in {B}, [force; moment about the platform centre] = T^-T f."""
        f, _ = self.patient_force(x, xd, impedance)
        return np.linalg.solve(self.robot.euler_jacobian(self._pose(x))[2].T, f)

    def inverse_dynamics(self, x, xd, xdd, impedance: PatientImpedance | None | bool = None) -> np.ndarray:
        """Robot leg forces (N) for the motion (x, xd, xdd) of the coupled system, Gibbs-Appell (compiled):
        J_E^T tau = T^T (F_robot + E F_jaw) - f_patient. ``impedance``: None the nominal one, False none,
        or a :class:`PatientImpedance`."""
        P = self._P_for(impedance)
        tau = np.zeros(6)
        st = _jk.coupled_inverse_dynamics(self.pts2, P, self._pose(x), self._pose(xd, "xd"),
                                          self._pose(xdd, "xdd"), tau, self.W, self.V)
        if st != _jk.OK:
            raise ValueError("J_E is singular at this pose: no finite leg forces")
        return tau

    def inverse_dynamics_gm(self, x, xd, xdd, impedance: PatientImpedance | None | bool = None) -> np.ndarray:
        """The same leg forces by the generalized-momentum model of each platform (compiled, for cross-checks)."""
        P = self._P_for(impedance)
        tau = np.zeros(6)
        st = _jk.coupled_inverse_dynamics_gm(self.pts2, P, self._pose(x), self._pose(xd, "xd"),
                                             self._pose(xdd, "xdd"), tau, self.W, self.V)
        if st != _jk.OK:
            raise ValueError("J_E is singular at this pose: no finite leg forces")
        return tau

    def forward_dynamics(self, x, xd, tau, impedance: PatientImpedance | None | bool = None) -> np.ndarray:
        """xdd of the coupled system under robot leg forces tau (generalized-momentum model, compiled)."""
        P = self._P_for(impedance)
        xdd = np.zeros(6)
        st = _jk.coupled_forward_dynamics(self.pts2, P, self._pose(x), self._pose(xd, "xd"),
                                          self._pose(tau, "tau"), xdd, self.W, self.V)
        if st != _jk.OK:
            raise ValueError("the coupled inertia matrix is singular at this pose")
        return xdd

    def mass_matrix(self, x) -> np.ndarray:
        """Euler-space inertia of the coupled system, ME = T^T (M_r + E M_j S) (symmetric positive definite)."""
        ME, hE = np.zeros((6, 6)), np.zeros(6)
        _jk.coupled_matrices(self.pts2, self.P, self._pose(x), np.zeros(6), ME, hE, self.W, self.V)
        return ME

    def _P_for(self, impedance):
        if impedance is None:
            return self.P
        if impedance is False:
            return self.pack(PatientImpedance.none())
        if isinstance(impedance, PatientImpedance):
            return self.pack(impedance)
        raise ValueError(f"impedance must be None, False or a PatientImpedance, got {impedance!r}")

    def energy(self, x, xd, impedance: PatientImpedance | None = None) -> dict:
        """Kinetic and gravitational energy of both platforms and the stiffness's potential energy, J."""
        x, xd = self._pose(x), self._pose(xd, "xd")
        xj, xdj, _ = self.jaw_pose(x, xd, np.zeros(6))
        K = (impedance or self.impedance).stiffness
        e = x - self.rest_pose
        return dict(kinetic=self.robot.kinetic_energy(x, xd) + self.jaw.kinetic_energy(xj, xdj),
                    gravity=self.robot.potential_energy(x) + self.jaw.potential_energy(xj),
                    spring=0.5 * float(e @ (K * e)))

    # ------------------------------------------------------------ the loop's model
    def actuator_model(self, name: str = "jaw"):
        """Six massless prismatic joints ``leg1..leg6`` = the robot's legs (stroke, velocity, force limits),
        moving the robot and the jaw model as one closed chain. Its frames ``platform`` (the centre of {P}) and
        ``incisal`` (the incisal point on the bite splint, the mouthpiece) are where they are at the rest pose,
        attached to the world (:meth:`StewartPlatform.actuator_model`): a force-torque sensor in the mouthpiece
        mounts on them (:meth:`rtctl.plants.jaw.plant.JawPlant.sensor_wrench`)."""
        chain = ClosedChain("masticatory rehabilitation robot of Kalani et al. (2018): the robot's "
                            "6-UPS platform and the jaw model's, joined at the bite splint",
                            self.robot.moving_parts("robot's platform", "robot's ")
                            + self.jaw.moving_parts("mandible", "jaw model's "),
                            "Gibbs-Appell inverse dynamics (appendix A-D), the jaw's legs passive")
        return self.robot.actuator_model(name, chain, frames=self.platform_frames())

    def platform_frames(self) -> dict:
        """``{name: point in {P}}`` of the frames of the moving platform: its centre and the incisal point."""
        return {"platform": np.zeros(3), "incisal": np.array(self.incisal_offset, dtype=float)}

    def forward_kinematics(self, lengths, guess=None) -> np.ndarray:
        """The pose from the robot's leg lengths (Newton-Raphson from ``guess``, default the rest pose)."""
        return self.robot.forward_kinematics(lengths, self.rest_pose if guess is None else guess)

    def __repr__(self):
        return (f"JawRehabRobot(robot={self.robot!r}, jaw={self.jaw!r}, skull_height={self.skull_height:g} m, "
                f"hinge_radius={self.hinge_radius:g} m)")


def jaw_model():
    """The robot model ``"jaw"``: the robot's six-leg actuator-space model."""
    return JawRehabRobot().actuator_model("jaw")
