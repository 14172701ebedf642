"""The joint-torque regressor: inverse dynamics linear in the inertial parameters, tau = Y(q, v, a) pi.

Each body contributes ten parameters, in its own frame (the frame of the joint that moves it) and in
Pinocchio's order (``Inertia.toDynamicParameters``)::

    pi_i = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]

with ``c`` the centre of mass and ``I`` the rotational inertia about the body origin O_i. The wrench a
body needs about O_i, in its own axes, is linear in them (Atkeson, An & Hollerbach, IJRR 1986, eq. 8)::

    n = I alpha + omega x (I omega) + h x a_O
    f = m a_O + alpha x h + omega x (omega x h),        h = m c,

``omega``, ``alpha`` the body's angular velocity and acceleration and ``a_O`` the acceleration of O_i
with gravity as an upward base acceleration -- the same body wrench as the recursive inverse dynamics
(:mod:`rtctl.dynamics.inverse`, Shah, Saha & Dutt (2012) eq. 19). Column ``10 i + p`` of Y is then the wrench of unit
parameter ``p`` of body i, rotated to world axes and projected on the motion subspace of body i and of
every ancestor j (Shah, Saha & Dutt, 2012, eq. 24 with the moment shifted from O_i to O_j)::

    Y[k, 10 i + p] = s_a . (n + (O_i - O_j) x f) + s_l . f,        [s_a; s_l] = column k of S_j.

``Y pi`` is ``rnea(q, v, a)`` without the armature term ``armature * a`` (a drive property, not a link's)
and without external wrenches. Fixed and floating bases alike: a floating base's DOFs are rows like any
joint's.
"""
from __future__ import annotations

import copy

import numpy as np
from numba import njit

from ..model import MI_IV, MI_NV, MI_PARENT, Model, ModelError
from .kinematics import kinematics
from .spatial import cross
from .workspace import (DOF_WIDTH, ENTRY_OPTIONS, OK, W_ACC, W_ALPHA, W_O, W_OMEGA, W_R, W_S, WRONG_LENGTH, WS_WIDTH,
                        check_vectors)

__all__ = ["PARAMETERS_PER_BODY", "PARAMETER_NAMES", "BaseParameters", "JointTorqueRegressor", "inertial_parameters",
           "joint_torque_regressor", "model_with_inertial_parameters"]

PARAMETERS_PER_BODY = 10
PARAMETER_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")

SIG_REGRESSOR = ("int64(int64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64[::1], "
                 "float64[:, ::1])")


@njit(cache=True, forceinline=True)
def _unit_inertia_times(p, x, y, z):
    """E_p (x, y, z) for the symmetric 3x3 E_p with a one at inertia entry p (4..9: xx xy yy xz yz zz)."""
    if p == 4:
        return x, 0.0, 0.0
    if p == 5:
        return y, x, 0.0
    if p == 6:
        return 0.0, y, 0.0
    if p == 7:
        return z, 0.0, x
    if p == 8:
        return 0.0, z, y
    return 0.0, 0.0, z


@njit(cache=True, forceinline=True)
def _unit_parameter_wrench(p, omega, alpha, acc):
    """(n, f) in body axes of a unit value of parameter ``p`` (module docstring, Atkeson et al. eq. 8)."""
    wx, wy, wz = omega
    ax, ay, az = alpha
    gx, gy, gz = acc
    if p == 0:                                   # m: f = a_O
        return 0.0, 0.0, 0.0, gx, gy, gz
    if p <= 3:                                   # h = e_p: n = e x a_O, f = alpha x e + omega x (omega x e)
        ex, ey, ez = 1.0 if p == 1 else 0.0, 1.0 if p == 2 else 0.0, 1.0 if p == 3 else 0.0
        nx, ny, nz = cross(ex, ey, ez, gx, gy, gz)
        tx, ty, tz = cross(ax, ay, az, ex, ey, ez)
        ux, uy, uz = cross(wx, wy, wz, ex, ey, ez)
        cx, cy, cz = cross(wx, wy, wz, ux, uy, uz)
        return nx, ny, nz, tx + cx, ty + cy, tz + cz
    ix, iy, iz = _unit_inertia_times(p, ax, ay, az)   # I = E_p: n = E alpha + omega x (E omega)
    kx, ky, kz = _unit_inertia_times(p, wx, wy, wz)
    cx, cy, cz = cross(wx, wy, wz, kx, ky, kz)
    return ix + cx, iy + cy, iz + cz, 0.0, 0.0, 0.0


@njit(cache=True, forceinline=True)
def _to_body_axes(ws, i, c):
    """R_i^T x for the world-axes 3-vector at ws[i, c:c+3]."""
    x, y, z = ws[i, c], ws[i, c + 1], ws[i, c + 2]
    return (ws[i, W_R] * x + ws[i, W_R + 3] * y + ws[i, W_R + 6] * z,
            ws[i, W_R + 1] * x + ws[i, W_R + 4] * y + ws[i, W_R + 7] * z,
            ws[i, W_R + 2] * x + ws[i, W_R + 5] * y + ws[i, W_R + 8] * z)


@njit(cache=True, forceinline=True)
def _to_world_axes(ws, i, x, y, z):
    """R_i (x, y, z)."""
    return (ws[i, W_R] * x + ws[i, W_R + 1] * y + ws[i, W_R + 2] * z,
            ws[i, W_R + 3] * x + ws[i, W_R + 4] * y + ws[i, W_R + 5] * z,
            ws[i, W_R + 6] * x + ws[i, W_R + 7] * y + ws[i, W_R + 8] * z)


@njit(SIG_REGRESSOR, **ENTRY_OPTIONS)
def joint_torque_regressor(mi, mf, ws, q, v, a, Y):
    """Y (nv x 10 nbodies) with ``Y pi = rnea(q, v, a) - armature a`` (module docstring); returns a status.

    Twists and twist rates come from the forward recursion of the inverse dynamics (gravity as a base
    acceleration); each body's unit-parameter wrenches are projected on its own and its ancestors' joints.
    Allocates nothing; ``Y`` is overwritten entirely.
    """
    status = check_vectors(mi, q, v, a, v)
    if status != OK:
        return status
    nb = mi.shape[0]
    if Y.shape[0] != v.shape[0] or Y.shape[1] != PARAMETERS_PER_BODY * nb:
        return WRONG_LENGTH + 4
    Y[:, :] = 0.0
    kinematics(mi, mf, ws, q, v, a, 1.0)
    for i in range(nb):
        omega = _to_body_axes(ws, i, W_OMEGA)
        alpha = _to_body_axes(ws, i, W_ALPHA)
        acc = _to_body_axes(ws, i, W_ACC)
        for p in range(PARAMETERS_PER_BODY):
            nbx, nby, nbz, fbx, fby, fbz = _unit_parameter_wrench(p, omega, alpha, acc)
            nx, ny, nz = _to_world_axes(ws, i, nbx, nby, nbz)
            fx, fy, fz = _to_world_axes(ws, i, fbx, fby, fbz)
            column = PARAMETERS_PER_BODY * i + p
            j = i
            while j >= 0:
                rx, ry, rz = ws[i, W_O] - ws[j, W_O], ws[i, W_O + 1] - ws[j, W_O + 1], ws[i, W_O + 2] - ws[j, W_O + 2]
                mx, my, mz = cross(rx, ry, rz, fx, fy, fz)
                iv = mi[j, MI_IV]
                for k in range(mi[j, MI_NV]):
                    o = W_S + DOF_WIDTH * k
                    Y[iv + k, column] = (ws[j, o] * (nx + mx) + ws[j, o + 1] * (ny + my) + ws[j, o + 2] * (nz + mz)
                                         + ws[j, o + 3] * fx + ws[j, o + 4] * fy + ws[j, o + 5] * fz)
                j = mi[j, MI_PARENT]
    return OK


def inertial_parameters(model: Model) -> np.ndarray:
    """The model's inertial parameters pi (10 nbodies, module docstring order), inertia about each body origin."""
    pi = np.zeros(PARAMETERS_PER_BODY * model.nbodies)
    for i in range(model.nbodies):
        m, c = model.mass[i], model.com[i]
        inertia = model.inertia_com[i] + m * (c @ c * np.eye(3) - np.outer(c, c))
        pi[10 * i:10 * i + 10] = [m, *(m * c), inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2],
                                  inertia[1, 2], inertia[2, 2]]
    return pi


def model_with_inertial_parameters(model: Model, pi) -> Model:
    """A copy of ``model`` whose bodies carry the inertial parameters ``pi`` (mass, centre of mass and
    inertia about it by the parallel-axis theorem). A body of zero mass must have zero first moment."""
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (PARAMETERS_PER_BODY * model.nbodies,) or not np.all(np.isfinite(pi)):
        raise ModelError(f"pi must hold {PARAMETERS_PER_BODY * model.nbodies} finite values (10 per body of model "
                         f"'{model.name}'), got shape {pi.shape}")
    out = copy.deepcopy(model)
    for i in range(model.nbodies):
        m, h = pi[10 * i], pi[10 * i + 1:10 * i + 4]
        xx, xy, yy, xz, yz, zz = pi[10 * i + 4:10 * i + 10]
        about_origin = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        if m <= 0 and np.any(h != 0):
            raise ModelError(f"body '{model.body_names[i]}': mass {m} kg with a first moment {h.tolist()} kg m")
        c = h / m if m > 0 else np.zeros(3)
        out.mass[i], out.com[i] = m, c
        out.inertia_com[i] = about_origin - m * (c @ c * np.eye(3) - np.outer(c, c))
    out.packed_int, out.packed_float = out._pack()
    return out


class JointTorqueRegressor:
    """The regressor of one model with its own workspace (not thread-safe, like :class:`~rtctl.dynamics.Dynamics`)."""

    def __init__(self, model: Model):
        self.model = model
        self.mi, self.mf = model.packed_int, model.packed_float
        self.ws = np.zeros((model.nbodies, WS_WIDTH))
        self.n_parameters = PARAMETERS_PER_BODY * model.nbodies

    def parameter_labels(self) -> list[str]:
        """``"body.name"`` for each column of Y."""
        return [f"{body}.{name}" for body in self.model.body_names for name in PARAMETER_NAMES]

    def compute(self, q, v, a, out=None) -> np.ndarray:
        """Y(q, v, a), nv x 10 nbodies; ValueError naming a vector of the wrong length or not finite."""
        m = self.model
        vectors = [np.ascontiguousarray(x, dtype=np.float64) for x in (q, v, a)]
        out = np.empty((m.nv, self.n_parameters)) if out is None else out
        status = joint_torque_regressor(self.mi, self.mf, self.ws, *vectors, out)
        if status != OK:
            names, sizes = ("q", "v", "a", "out"), ((m.nq,), (m.nv,), (m.nv,), (m.nv, self.n_parameters))
            k = status - WRONG_LENGTH - 1 if status > WRONG_LENGTH else status - 1
            problem = f"must have shape {sizes[k]}" if status > WRONG_LENGTH else "contains NaN or inf"
            raise ValueError(f"{names[k]} {problem}")
        return out

    def stacked(self, q, v, a) -> np.ndarray:
        """The regressors of N samples (rows of q, v, a) stacked sample by sample: (N nv) x 10 nbodies."""
        q, v, a = (np.ascontiguousarray(x, dtype=np.float64) for x in (q, v, a))
        n, nv = q.shape[0], self.model.nv
        out = np.empty((n * nv, self.n_parameters))
        for k in range(n):
            self.compute(q[k], v[k], a[k], out=out[k * nv:(k + 1) * nv])
        return out


class BaseParameters:
    """The base parameters of a stacked regressor Y (rows: samples and joints; columns: parameters) by QR
    with column pivoting (Gautier, J. Robot. Syst. 1991, section 3): ``Y P = Q [R1 R2]`` with R1 (r x r) of
    full rank r, so the dependent columns are ``Y_d = Y_b K``, ``K = R1^-1 R2``, and

        Y pi = Y_b beta,    beta = pi_b + K pi_d,

    ``independent`` and ``dependent`` the column indices of Y_b and Y_d. A column whose diagonal of R falls
    below ``tolerance`` times the largest is dependent (a parameter with no effect has a zero column of K).
    """

    def __init__(self, Y, tolerance: float = 1e-8):
        from scipy.linalg import qr, solve_triangular

        Y = np.asarray(Y, dtype=float)
        R, pivots = qr(Y, mode="r", pivoting=True)
        diagonal = np.abs(np.diag(R))
        self.rank = int(np.sum(diagonal > tolerance * diagonal[0])) if diagonal.size and diagonal[0] > 0 else 0
        self.independent = pivots[:self.rank].copy()
        self.dependent = pivots[self.rank:].copy()
        r = self.rank
        self.K = solve_triangular(R[:r, :r], R[:r, r:Y.shape[1]]) if r else np.zeros((0, self.dependent.size))
        self.n_parameters = Y.shape[1]

    def beta(self, pi) -> np.ndarray:
        """The base parameters of the full parameter vector ``pi``: pi_b + K pi_d."""
        pi = np.asarray(pi, dtype=float)
        return pi[self.independent] + self.K @ pi[self.dependent]

    def combination(self) -> np.ndarray:
        """The r x n matrix C with beta = C pi."""
        C = np.zeros((self.rank, self.n_parameters))
        C[np.arange(self.rank), self.independent] = 1.0
        C[:, self.dependent] = self.K
        return C
