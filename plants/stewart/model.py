"""The 6-UPS Stewart platform of Lopes (2009): kinematics and generalized-momentum dynamics.

:class:`StewartPlatform` holds the geometry and inertial parameters (Table 2
by default, SI units) and wraps the compiled kernels of
:mod:`rtctl.plants.stewart.kernels` in a checked API:

* pose ``x = [x_P, y_P, z_P, psi, theta, phi]`` (m, rad; ZYX Euler angles,
  ``R = Rz(psi) Ry(theta) Rx(phi)``, eqs. 3-4); ``xd``, ``xdd`` its derivatives;
* inverse kinematics (eqs. 30-31), J_C, J_E (eqs. 5-6), J_A, T (eqs. 8-9, 23),
  J_D (eqs. 34-36), J_B (eqs. 39-40), J_G (eqs. 61-62), leg frames (eqs. 49-52);
* the generalized-momentum inertia and Coriolis/centripetal matrices of the
  platform (eqs. 24-28), each cylinder and piston in translation and
  rotation (eqs. 43-76), summed (eqs. 81-82), with every d/dt term analytic;
  gravity from the potential energy (eqs. 77-80, 83); actuator forces (eq. 84);
* forward dynamics, forward kinematics (Newton-Raphson), workspace and
  singularity checks;
* the independent cross-check with the generic core the tests and benchmarks
  use lives in :mod:`rtctl.plants.stewart.reference`;
* the actuator-space :class:`~rtctl.model.Model` the real-time loop runs on
  (:meth:`actuator_model`: six prismatic "leg" joints).

Corrections to the OCR'd paper (each re-derived; the tests check them):

* eq. 25/84: ``tau = J_C^-T f`` (the power balance tau . l-dot = f . u with
  l-dot = J_C u), where the text shows J_C^-1 in eq. 25;
* eq. 83: the Euler-space gravity dP/dx maps to {B} by T^-T, not T^-1;
* eq. 51: y_C = [-l_y, l_x, 0] / sqrt(l_x^2 + l_y^2) (numerators lost in OCR);
* eq. 60: the piston velocity is l-dot_i + omega_l x (-b_S n_i) (l-dot, not l).

Modelling note (the paper's assumption, made explicit): the leg angular
velocity is taken perpendicular to the leg (eq. 34). A universal joint with a
vertical first axis -- the one whose leg frame is eqs. 49-52 -- also spins the
leg about its axis at psi_leg-dot * (n . z_B); that spin carries no momentum and
does no work when the legs' axial moment of inertia is zero (Table 2: I_xx = 0;
the triangle inequality then forces I_yy = I_zz), so the model is then exact --
the cross-check with the generic core (which has the true universal joints)
agrees to ~1e-14. With I_xx > 0 it is the paper's approximation.
"""
from __future__ import annotations

import math

import numpy as np

from rtctl.model import inertia_scale_factor, payload_mass
from rtctl.model.closed_chain import ClosedChain

from . import kernels as _k
from . import solvers as _ks

__all__ = ["StewartPlatform", "TABLE2", "P1", "P2", "WORKSPACE_REASONS", "FK_ERRORS", "paper_trajectory"]

# Table 2, SI units (angles in rad, kg, m, kg m^2).
TABLE2 = dict(
    r_B=1.5, r_P=0.75, phi_B=math.radians(15.0), phi_P=0.0,
    m_P=1.43, I_P=(0.2, 0.2, 0.4),
    m_C=0.39, I_C=(0.0, 0.1, 0.1),
    m_S=0.39, I_S=(0.0, 0.1, 0.1),
    b_C=0.5, b_S=0.5,
)

# Section 5: P1 = [0, 0, 2000 mm, 0, 0, 0], P2 = [-100, -200, 2500 mm, 15, -15, 15 deg].
P1 = np.array([0.0, 0.0, 2.0, 0.0, 0.0, 0.0])
P2 = np.array([-0.1, -0.2, 2.5, math.radians(15.0), math.radians(-15.0), math.radians(15.0)])

WORKSPACE_REASONS = {
    0: "inside the workspace",
    1: "a leg is shorter than the stroke minimum",
    2: "a leg is longer than the stroke maximum",
    3: "near a singular configuration (|det J_C| below the threshold)",
    4: "Euler-angle singularity (|cos theta| < 1e-3)",
    5: "platform at or below the base plane",
    6: "pose is not finite",
}
FK_ERRORS = {
    _k.FK_OUT_OF_STROKE: "a measured leg length is outside the stroke [l_min, l_max]: no pose in the workspace",
    _k.SINGULAR: "J_E became singular during the Newton iteration (at or near a singular configuration)",
    _k.FK_NO_CONVERGENCE: "Newton-Raphson did not converge (lengths not reachable from the initial guess)",
    _k.FK_WRONG_BRANCH: "converged to the mirrored assembly (platform below the base plane)",
}

BODY_BITS = {"platform": _k.B_PLATFORM, "cylinder_translation": _k.B_CYL_TRA, "cylinder_rotation": _k.B_CYL_ROT,
             "piston_translation": _k.B_PIS_TRA, "piston_rotation": _k.B_PIS_ROT,
             "cylinders": _k.B_CYL_TRA | _k.B_CYL_ROT, "pistons": _k.B_PIS_TRA | _k.B_PIS_ROT, "all": _k.B_ALL}


def paper_trajectory(segment_time: float = 2.0, t0: float = 0.0):
    """(times, waypoints) of section 5: P1 -> P2 -> P1, each segment ``segment_time`` s long.

    The OCR'd text does not give the duration (Fig. 4's time axis is lost);
    2 s per segment is our choice.
    """
    return np.array([t0, t0 + segment_time, t0 + 2 * segment_time]), np.vstack([P1, P2, P1])


class StewartPlatform:
    """A 6-UPS Stewart platform (Fig. 1) with the generalized-momentum dynamic model.

    Parameters (defaults: Table 2): base and platform radii ``r_B``, ``r_P``
    and half-angles ``phi_B``, ``phi_P`` (semi-regular hexagons: B_1/B_6,
    B_2/B_3, B_4/B_5 are 2 phi_B apart around 0, 120, 240 deg; P_1/P_2,
    P_3/P_4, P_5/P_6 are 2 phi_P apart around 60, 180, 300 deg); masses and
    principal inertias of the platform (``m_P``, ``I_P`` in {P}), cylinder and
    piston (``m_C``, ``I_C``, ``m_S``, ``I_S`` in the leg frame, x along the
    leg); centre-of-mass distances ``b_C`` (from B_i) and ``b_S`` (from P_i);
    gravity ``g`` along -z_B. Not in the paper (our choices, used by the
    workspace check, FK and the actuator-space model): leg ``stroke``
    (l_min, l_max), ``force_limit`` (N), ``velocity_limit`` (m/s), ``home``
    pose (P1) and ``min_det_ratio`` (singularity threshold: |det J_C(x)| below
    this fraction of |det J_C(home)|).
    """

    def __init__(self, *, r_B=TABLE2["r_B"], r_P=TABLE2["r_P"], phi_B=TABLE2["phi_B"], phi_P=TABLE2["phi_P"],
                 m_P=TABLE2["m_P"], I_P=TABLE2["I_P"], m_C=TABLE2["m_C"], I_C=TABLE2["I_C"], m_S=TABLE2["m_S"],
                 I_S=TABLE2["I_S"], b_C=TABLE2["b_C"], b_S=TABLE2["b_S"], g: float = 9.81,
                 stroke=(1.8, 3.3), force_limit: float = 100.0, velocity_limit: float = 1.5, home=P1,
                 min_det_ratio: float = 0.05):
        self.r_B, self.r_P, self.phi_B, self.phi_P = float(r_B), float(r_P), float(phi_B), float(phi_P)
        for name, val in (("r_B", r_B), ("r_P", r_P), ("b_C", b_C), ("b_S", b_S)):
            if not (np.isfinite(val) and val > 0):
                raise ValueError(f"{name} must be finite and > 0, got {val!r}")
        self.stroke = (float(stroke[0]), float(stroke[1]))
        if not 0 < self.stroke[0] < self.stroke[1]:
            raise ValueError(f"stroke must be 0 < l_min < l_max, got {stroke!r}")
        self.force_limit, self.velocity_limit = float(force_limit), float(velocity_limit)
        base_ang = np.radians([0, 120, 120, 240, 240, 360]) + np.array([1, -1, 1, -1, 1, -1]) * self.phi_B
        plat_ang = np.radians([60, 60, 180, 180, 300, 300]) + np.array([-1, 1, -1, 1, -1, 1]) * self.phi_P
        self.base_points = np.stack([self.r_B * np.cos(base_ang), self.r_B * np.sin(base_ang), np.zeros(6)], 1)
        self.platform_points = np.stack([self.r_P * np.cos(plat_ang), self.r_P * np.sin(plat_ang), np.zeros(6)], 1)
        self.pts = np.ascontiguousarray(np.stack([self.base_points, self.platform_points]))
        par = np.zeros(_k.NPAR)
        par[_k.P_MP], par[_k.P_IPX:_k.P_IPZ + 1] = m_P, I_P
        par[_k.P_MC], par[_k.P_ICX:_k.P_ICZ + 1] = m_C, I_C
        par[_k.P_MS], par[_k.P_ISX:_k.P_ISZ + 1] = m_S, I_S
        par[_k.P_BC], par[_k.P_BS], par[_k.P_G] = b_C, b_S, g
        par[_k.P_LMIN], par[_k.P_LMAX] = self.stroke
        if not np.all(np.isfinite(par)) or np.any(par[:12] < 0):
            raise ValueError("masses and inertias must be finite and >= 0")
        self.par = par
        self.m_P, self.m_C, self.m_S, self.b_C, self.b_S, self.g = m_P, m_C, m_S, b_C, b_S, g
        self.I_P, self.I_C, self.I_S = (np.array(v, dtype=float) for v in (I_P, I_C, I_S))
        self.wk = np.zeros((_k.NWK, 6, 6))
        self.wv = np.zeros((_k.NWV, 6))
        self.home = np.array(home, dtype=float)
        self.min_det_ratio = float(min_det_ratio)
        self.det_min = 0.0
        self.det_min = self.min_det_ratio * abs(self.det_jc(self.home))
        status = self.workspace_status(self.home)
        if status:
            raise ValueError(f"home pose {self.home.tolist()} is not in the workspace: {WORKSPACE_REASONS[status]}")

    def _rebuilt(self, **changes) -> "StewartPlatform":
        params = dict(r_B=self.r_B, r_P=self.r_P, phi_B=self.phi_B, phi_P=self.phi_P, m_P=self.m_P, I_P=self.I_P,
                      m_C=self.m_C, I_C=self.I_C, m_S=self.m_S, I_S=self.I_S, b_C=self.b_C, b_S=self.b_S, g=self.g,
                      stroke=self.stroke, force_limit=self.force_limit, velocity_limit=self.velocity_limit,
                      home=self.home, min_det_ratio=self.min_det_ratio)
        params.update(changes)
        return StewartPlatform(**params)

    def with_inertia_scaled(self, factor: float) -> "StewartPlatform":
        """The same platform with every mass and inertia times ``factor`` (a model error for robustness tests)."""
        f = inertia_scale_factor(factor)
        return self._rebuilt(m_P=f * self.m_P, I_P=f * self.I_P, m_C=f * self.m_C, I_C=f * self.I_C,
                             m_S=f * self.m_S, I_S=f * self.I_S)

    def with_payload(self, mass: float) -> "StewartPlatform":
        """The same platform carrying a point mass ``mass`` (kg) at its centre of mass (the origin of {P})."""
        return self._rebuilt(m_P=self.m_P + payload_mass(mass))

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _pose(x, name="x"):
        arr = np.ascontiguousarray(x, dtype=np.float64)
        if arr.shape != (6,):
            raise ValueError(f"{name} must have shape (6,), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf")
        return arr

    def _bits(self, bodies):
        if isinstance(bodies, str):
            try:
                return BODY_BITS[bodies]
            except KeyError:
                raise ValueError(f"bodies must be one of {sorted(BODY_BITS)} or a bit mask, got {bodies!r}") from None
        return int(bodies)

    # ------------------------------------------------------------ kinematics
    def rotation(self, x) -> np.ndarray:
        """B_R_P (eq. 4)."""
        R = np.zeros((3, 3))
        _k.rotation(self._pose(x), R)
        return R

    def euler_jacobian(self, x, xd=None):
        """(J_A (eq. 9), J_A-dot, T (eq. 23), T-dot) at pose x and rate xd (default 0)."""
        x = self._pose(x)
        xd = np.zeros(6) if xd is None else self._pose(xd, "xd")
        R, JA, JAd, u = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 3)), np.zeros(6)
        _k.euler_terms(x, xd, R, JA, JAd, u)
        T, Td = np.eye(6), np.zeros((6, 6))
        T[3:, 3:], Td[3:, 3:] = JA, JAd
        return JA, JAd, T, Td

    def twist(self, x, xd) -> np.ndarray:
        """u = [v; omega] = T xd (eqs. 8, 23)."""
        return self.euler_jacobian(x)[2] @ self._pose(xd, "xd")

    def inverse_kinematics(self, x):
        """(leg vectors l_i (6, 3), lengths L_i (6,)) (eqs. 30-31)."""
        x = self._pose(x)
        R = self.rotation(x)
        legs = x[:3] + self.platform_points @ R.T - self.base_points
        return legs, np.linalg.norm(legs, axis=1)

    def leg_lengths(self, x) -> np.ndarray:
        return self.inverse_kinematics(x)[1]

    def jc(self, x) -> np.ndarray:
        """J_C (eq. 6): l-dot = J_C [v; omega]."""
        x = self._pose(x)
        R, JC = self.rotation(x), np.zeros((6, 6))
        _k.jc_matrix(self.pts, x, R, JC, np.zeros(3), np.zeros(3))
        return JC

    def je(self, x) -> np.ndarray:
        """J_E = J_C T (eq. 5): l-dot = J_E xd."""
        return self.jc(x) @ self.euler_jacobian(x)[2]

    def det_jc(self, x) -> float:
        return float(np.linalg.det(self.jc(x)))

    def leg_jacobians(self, x, xd, i: int) -> dict:
        """Leg i's Jacobians with respect to u = [v; omega] and their time derivatives:

        ``K`` (l-dot_i = K u), ``J_D`` (eq. 36), ``J_B`` (eq. 40), ``J_G`` (eq. 62),
        ``*_dot`` the analytic derivatives, ``R_C``/``R_C_dot`` (eqs. 49-52), ``n``, ``L``.
        """
        x, xd = self._pose(x), self._pose(xd, "xd")
        if not 0 <= int(i) < 6:
            raise ValueError(f"leg index must be 0..5, got {i}")
        wk, wv = self.wk, self.wv
        _k.euler_terms(x, xd, wk[_k.K_R], wk[_k.K_JA], wk[_k.K_JAD], wv[_k.V_U])
        L = _k.leg_kinematics(int(i), self.pts, x, wk[_k.K_R], wv[_k.V_U], wk, wv, True)
        _k.leg_frame(wv[_k.V_L], wv[_k.V_LD], wv[_k.V_N], wv[_k.V_ND], wk, wv, True)
        K, Kd = wk[_k.K_K, :3].copy(), wk[_k.K_KD, :3].copy()
        N, Nd = wk[_k.K_N, :3].copy(), wk[_k.K_ND, :3].copy()
        return dict(
            L=float(L), n=wv[_k.V_N, :3].copy(), K=K, K_dot=Kd,
            J_D=wk[_k.K_JD, :3].copy(), J_D_dot=wk[_k.K_JDD, :3].copy(),
            J_B=self.b_C * N, J_B_dot=self.b_C * Nd, J_G=K - self.b_S * N, J_G_dot=Kd - self.b_S * Nd,
            R_C=wk[_k.K_RC, :3, :3].copy(), R_C_dot=wk[_k.K_RCD, :3, :3].copy())

    def leg_motion(self, x, xd, xdd):
        """(lengths, rates, accelerations) of the legs for a platform motion."""
        q, qd, qdd = np.zeros(6), np.zeros(6), np.zeros(6)
        _k.leg_motion(self.pts, self._pose(x), self._pose(xd, "xd"), self._pose(xdd, "xdd"), q, qd, qdd,
                      self.wk, self.wv)
        return q, qd, qdd

    # ------------------------------------------------------------ dynamics
    def matrices(self, x, xd, bodies="all", legs: int = _k.ALL_LEGS):
        """(M, V, G): the summed inertia (eqs. 27, 45, 57, 67, 75), Coriolis/centripetal (eqs. 28, 46, 58,
        68, 76) matrices and the gravity wrench in {B} (eq. 83, corrected to T^-T) of the selected bodies.

        f|B = M xdd + V xd + G (eqs. 81-83). ``bodies``: a name of ``BODY_BITS`` or a bit mask.
        """
        M, V, G = np.zeros((6, 6)), np.zeros((6, 6)), np.zeros(6)
        _k.gm_matrices(self.pts, self.par, self._pose(x), self._pose(xd, "xd"), self._bits(bodies), int(legs),
                       _k.W_ALL, M, V, G, self.wk, self.wv)
        return M, V, G

    def gravity_euler(self, x) -> np.ndarray:
        """dP/dx (eqs. 78-80 summed): the gravitational generalized force in Euler coordinates (= T^T G|B)."""
        _, _, G = self.matrices(x, np.zeros(6))
        return self.euler_jacobian(x)[2].T @ G

    def potential_energy(self, x) -> float:
        """P = sum m_c g z_c (eq. 77) with the centres of mass of eqs. 29 and 59."""
        legs, L = self.inverse_kinematics(x)
        n = legs / L[:, None]
        z_c = self.base_points[:, 2] + self.b_C * n[:, 2]
        z_s = self._pose(x)[2] + (self.platform_points @ self.rotation(x).T)[:, 2] - self.b_S * n[:, 2]
        return self.g * (self.m_P * x[2] + self.m_C * z_c.sum() + self.m_S * z_s.sum())

    def kinetic_energy(self, x, xd) -> float:
        """1/2 sum over bodies of m |v_c|^2 + omega^T I omega (the paper's velocities: eqs. 8, 35, 39, 61)."""
        x, xd = self._pose(x), self._pose(xd, "xd")
        u = self.twist(x, xd)
        R = self.rotation(x)
        e = self.m_P * u[:3] @ u[:3] + u[3:] @ (R @ np.diag(self.I_P) @ R.T) @ u[3:]
        for i in range(6):
            J = self.leg_jacobians(x, xd, i)
            w = J["J_D"] @ u
            vc, vs = J["J_B"] @ u, J["J_G"] @ u
            Rc = J["R_C"]
            e += self.m_C * vc @ vc + self.m_S * vs @ vs + w @ (Rc @ np.diag(self.I_C + self.I_S) @ Rc.T) @ w
        return 0.5 * float(e)

    def inverse_dynamics(self, x, xd, xdd, bodies="all") -> np.ndarray:
        """Actuator (leg) forces tau = J_C^-T (M xdd + V xd + G) (eqs. 81-84), N."""
        tau = np.zeros(6)
        st = _ks.inverse_dynamics(self.pts, self.par, self._pose(x), self._pose(xd, "xd"), self._pose(xdd, "xdd"),
                                 self._bits(bodies), tau, self.wk, self.wv)
        if st != _k.OK:
            raise ValueError("J_C is singular at this pose: no finite actuator forces")
        return tau

    def platform_wrench(self, x, xd, xdd, bodies="all") -> np.ndarray:
        """f|B = [force; moment about the platform centre] the legs must exert (eq. 84, left side)."""
        M, V, G = self.matrices(x, xd, bodies)
        return M @ self._pose(xdd, "xdd") + V @ self._pose(xd, "xd") + G

    def forward_dynamics(self, x, xd, tau) -> np.ndarray:
        """xdd from M xdd = J_C^T tau - V xd - G."""
        xdd = np.zeros(6)
        st = _ks.forward_dynamics(self.pts, self.par, self._pose(x), self._pose(xd, "xd"), self._pose(tau, "tau"),
                                 xdd, self.wk, self.wv)
        if st != _k.OK:
            raise ValueError("the inertia matrix is singular at this pose")
        return xdd

    # ------------------------------------------------------------ FK, workspace
    def forward_kinematics(self, lengths, guess=None, *, tol: float = 1e-12, max_iter: int = 30) -> np.ndarray:
        """Platform pose from the six leg lengths (Newton-Raphson with J_E, from ``guess``, default home).

        Raises ``ValueError`` with the reason when the lengths are outside the
        stroke, the iteration meets a singularity or does not converge, or it
        lands on the mirrored assembly below the base.
        """
        lengths = self._pose(lengths, "lengths")
        x = self.home.copy() if guess is None else self._pose(guess, "guess").copy()
        st = _ks.forward_kinematics(self.pts, self.par, lengths, x, float(tol), int(max_iter), self.wk, self.wv)
        if st != _k.OK:
            raise ValueError(f"forward kinematics failed for leg lengths {np.round(lengths, 6).tolist()}: "
                             f"{FK_ERRORS[st]}")
        return x

    def workspace_status(self, x) -> int:
        """0 if x is inside the workspace, else a key of :data:`WORKSPACE_REASONS`."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (6,):
            raise ValueError(f"x must have shape (6,), got {x.shape}")
        return int(_ks.workspace_status(self.pts, self.par, x, self.det_min, self.wk, self.wv))

    def in_workspace(self, x) -> bool:
        return self.workspace_status(x) == 0

    def check_workspace(self, x) -> tuple[bool, str]:
        """(inside, reason) -- for the safety layer."""
        s = self.workspace_status(x)
        return s == 0, WORKSPACE_REASONS[s]

    def check_leg_lengths(self, lengths) -> tuple[bool, str]:
        """(inside, reason): leg lengths inside the stroke and assembling to a pose inside the workspace."""
        try:
            x = self.forward_kinematics(lengths)
        except ValueError as exc:
            return False, str(exc)
        return self.check_workspace(x)

    def random_pose(self, rng: np.random.Generator, *, span=(0.25, 0.25, 0.3, 0.35, 0.35, 0.35)) -> np.ndarray:
        """A random pose inside the workspace around home (rejection sampling)."""
        for _ in range(1000):
            x = self.home + rng.uniform(-1, 1, 6) * np.asarray(span)
            if self.in_workspace(x):
                return x
        raise RuntimeError("no pose inside the workspace found")

    # ------------------------------------------------------------ the loop's model
    def actuator_model(self, name: str = "stewart", closed_chain: ClosedChain | None = None, frames=None):
        """The loop's actuator-space model: six independent massless prismatic joints ``leg1..leg6``
        (q = leg lengths, v = rates, effort = leg forces) with the stroke, velocity and force limits; its
        ``closed_chain`` (default :meth:`closed_chain`) says what they move. ``frames``: ``{name: point}`` of the
        moving platform (m, in {P}), named in the model where they are at the home pose: the platform is the
        closed chain's, no body of this tree, so they are attached to the world (body -1) at ``x_home + R_home
        point`` with {P}'s axes there; the plant and the monitors that use them carry them with the platform."""
        from rtctl.model import ModelBuilder

        b = ModelBuilder(name)
        for i in range(6):
            b.add_body(f"leg{i + 1}", -1, "prismatic", joint_name=f"leg{i + 1}", axis=(0, 0, 1),
                       lower=self.stroke[0], upper=self.stroke[1], velocity_limit=self.velocity_limit,
                       effort_limit=self.force_limit)
        rotation = self.rotation(self.home)
        for frame, point in (frames or {}).items():
            b.add_frame(frame, -1, rotation, self.home[:3] + rotation @ np.asarray(point, dtype=float))
        model = b.build()
        model.closed_chain = closed_chain or self.closed_chain()
        return model

    def moving_parts(self, platform: str = "platform", legs: str = "") -> tuple[tuple[str, float], ...]:
        """``(name, mass kg)`` of the moving platform, the six cylinders and the six pistons."""
        return ((platform, self.m_P), (f"{legs}6 cylinders", 6 * self.m_C), (f"{legs}6 pistons", 6 * self.m_S))

    def closed_chain(self) -> ClosedChain:
        return ClosedChain("6-UPS Stewart platform of Lopes (2009)", self.moving_parts(),
                           "the generalized-momentum model (eqs. 81-83), leg forces tau = J_C^-T f (eq. 84)")

    def __repr__(self):
        return (f"StewartPlatform(r_B={self.r_B}, r_P={self.r_P}, phi_B={math.degrees(self.phi_B):g} deg, "
                f"phi_P={math.degrees(self.phi_P):g} deg, stroke={self.stroke})")


def stewart_model():
    """The robot model ``"stewart"`` (a run config's ``[robot] model``): the platform's actuator-space model."""
    return StewartPlatform().actuator_model("stewart")
