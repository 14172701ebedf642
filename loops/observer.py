"""External-torque observer on the generalized momentum (De Luca's residual).

Haddadin, De Luca & Albu-Schaeffer, "Robot Collisions: A Survey on Detection, Isolation, and
Identification", IEEE T-RO 33(6), 2017, eqs. (21)-(23): with p = M(q) qd the generalized momentum,

    p' = tau + tau_ext + C(q, qd)^T qd - g(q)                                  (eq. 21)
    r  = K_O (p - p(0) - int_0^t (tau + C^T qd - g + r) ds)                    (eq. 22)
    r' = K_O (tau_ext - r)                                                     (eq. 23)

so the residual ``r`` is the external joint torque filtered by a first-order lag of gain
``K_O`` (time constant 1 / K_O), with no joint acceleration. Here ``tau_ext`` is everything the
model does not explain: contact torques ``J^T F`` and unmodelled friction alike.

Exact terms, no finite difference of M. For a kinematic tree with every motion subspace S_i
fixed in its body (revolute, prismatic, free-flyer), Newton's law for the subtree of body i gives,
in world Plucker coordinates at a common point,

    p_i = S_i^T H_i + armature_i qd_i,      H_i = sum_{k in subtree(i)} I_k v_k,
    (C^T qd)_i = S_i'^T H_i = (v_i x S_i)^T H_i,
    g_i = -S_i^T sum_{k in subtree(i)} [c_k x m_k a_g; m_k a_g]   (a_g: the gravity vector),

(Featherstone, RBDA eq. 2.73 for S' = v x S; the subtree momentum H_i as in the CRBA). One pass
out (poses, twists) and one pass in (subtree momenta about the world origin) give p, C^T qd and g
together in O(n): :func:`momentum_terms`. Since M' = C + C^T, this C^T qd equals M' qd - C qd.

Discrete form (per control period dt): with the measured torque ``tau_{k-1}`` held over the period
(what a sim or torque-controlled drive applies, zero-order hold) and ``beta = C^T qd - g``
integrated by the trapezoid rule between samples, the momentum the model cannot explain over the
period is ``dE_k = p_k - p_{k-1} - dt tau_{k-1} - dt (beta_{k-1} + beta_k) / 2``, and eq. 23 is
integrated exactly for an external torque constant over the period:

    r_k = a r_{k-1} + (1 - a) dE_k / dt,    a = exp(-K_O dt).

For a step of external torque the residual is then ``tau_ext (1 - exp(-K_O (t - t_0)))`` at the
samples (up to the trapezoid error of beta, O(dt^2)). Every cycle the frame wrench is the
least-squares solution of ``J_F(q)^T F = r`` (``F = [n; f]`` at the frame origin, world axes).

Real-time: :meth:`MomentumObserver.update` is one compiled call over preallocated arrays.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import (
    DOF_WIDTH,
    W_D,
    W_I,
    W_O,
    W_OMEGA,
    W_S,
    W_VEL,
    forward_kinematics,
    model_sizes,
    point_jacobian,
)
from rtctl.dynamics.kinematics import propagate_velocity
from rtctl.dynamics.spatial import cholesky_solve
from rtctl.model import MF_ARMATURE, MF_MASS, MI_IV, MI_NV, MI_PARENT
from rtctl.rt.interfaces import actuated_indices

# Columns of the per-body accumulator (subtree sums about the world origin).
A_ANG, A_LIN, A_MASS, A_MC = 0, 3, 6, 7
A_WIDTH = 10
# Rows of the observer's float state ``x`` (length nv each): the last sample's p and beta, the residual,
# and this sample's p and beta while they are computed.
X_P, X_BETA, X_R, X_NEW_P, X_NEW_BETA = 0, 1, 2, 3, 4
X_ROWS = 5


@njit(cache=True, inline="always")
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@njit(cache=True)
def _body_momenta(mi, mf, ws, acc):
    """Each body's momentum, mass and first moment about the world origin, summed over its subtree."""
    nb = mi.shape[0]
    for i in range(nb):
        m = mf[i, MF_MASS]
        wx, wy, wz = ws[i, W_OMEGA], ws[i, W_OMEGA + 1], ws[i, W_OMEGA + 2]
        ux, uy, uz = ws[i, W_VEL], ws[i, W_VEL + 1], ws[i, W_VEL + 2]
        dx, dy, dz = ws[i, W_D], ws[i, W_D + 1], ws[i, W_D + 2]
        ox, oy, oz = ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2]
        i0, i1, i2, i3, i4, i5 = ws[i, W_I], ws[i, W_I + 1], ws[i, W_I + 2], ws[i, W_I + 3], ws[i, W_I + 4], \
            ws[i, W_I + 5]
        cx, cy, cz = _cross(wx, wy, wz, dx, dy, dz)
        px, py, pz = m * (ux + cx), m * (uy + cy), m * (uz + cz)       # linear momentum
        mx, my, mz = _cross(dx, dy, dz, ux, uy, uz)
        lx = i0 * wx + i3 * wy + i4 * wz + m * mx                       # I_O w + m d x v_O, about O_i
        ly = i3 * wx + i1 * wy + i5 * wz + m * my
        lz = i4 * wx + i5 * wy + i2 * wz + m * mz
        sx, sy, sz = _cross(ox, oy, oz, px, py, pz)                     # shifted to the world origin
        acc[i, A_ANG], acc[i, A_ANG + 1], acc[i, A_ANG + 2] = lx + sx, ly + sy, lz + sz
        acc[i, A_LIN], acc[i, A_LIN + 1], acc[i, A_LIN + 2] = px, py, pz
        acc[i, A_MASS] = m
        acc[i, A_MC], acc[i, A_MC + 1], acc[i, A_MC + 2] = m * (ox + dx), m * (oy + dy), m * (oz + dz)
    for i in range(nb - 1, 0, -1):
        parent = mi[i, MI_PARENT]
        if parent >= 0:
            for c in range(A_WIDTH):
                acc[parent, c] += acc[i, c]


@njit(cache=True)
def momentum_terms(mi, mf, ws, acc, q, v, p, beta):
    """``p = M(q) v`` and ``beta = C(q, v)^T v - g(q)`` (module docstring), O(n); ``acc`` (nbodies, A_WIDTH)."""
    nb = mi.shape[0]
    forward_kinematics(mi, mf, ws, q)
    for i in range(nb):
        propagate_velocity(mi, ws, i, v)
    _body_momenta(mi, mf, ws, acc)
    gx, gy, gz = mf[nb, 0], mf[nb, 1], mf[nb, 2]
    for i in range(nb):
        ox, oy, oz = ws[i, W_O], ws[i, W_O + 1], ws[i, W_O + 2]
        px, py, pz = acc[i, A_LIN], acc[i, A_LIN + 1], acc[i, A_LIN + 2]
        sx, sy, sz = _cross(ox, oy, oz, px, py, pz)
        hx, hy, hz = acc[i, A_ANG] - sx, acc[i, A_ANG + 1] - sy, acc[i, A_ANG + 2] - sz  # H_i about O_i
        m = acc[i, A_MASS]
        rx, ry, rz = acc[i, A_MC] - m * ox, acc[i, A_MC + 1] - m * oy, acc[i, A_MC + 2] - m * oz
        nx, ny, nz = _cross(rx, ry, rz, gx, gy, gz)                      # gravity moment about O_i
        wx, wy, wz = ws[i, W_OMEGA], ws[i, W_OMEGA + 1], ws[i, W_OMEGA + 2]
        ux, uy, uz = ws[i, W_VEL], ws[i, W_VEL + 1], ws[i, W_VEL + 2]
        iv = mi[i, MI_IV]
        for k in range(mi[i, MI_NV]):
            o = W_S + DOF_WIDTH * k
            ax, ay, az = ws[i, o], ws[i, o + 1], ws[i, o + 2]
            lx, ly, lz = ws[i, o + 3], ws[i, o + 4], ws[i, o + 5]
            p[iv + k] = ax * hx + ay * hy + az * hz + lx * px + ly * py + lz * pz + mf[i, MF_ARMATURE] * v[iv + k]
            da = _cross(wx, wy, wz, ax, ay, az)                           # S' = v_i x S_i
            d1 = _cross(wx, wy, wz, lx, ly, lz)
            d2 = _cross(ux, uy, uz, ax, ay, az)
            ctv = (da[0] * hx + da[1] * hy + da[2] * hz + (d1[0] + d2[0]) * px + (d1[1] + d2[1]) * py
                   + (d1[2] + d2[2]) * pz)
            grav = ax * nx + ay * ny + az * nz + m * (lx * gx + ly * gy + lz * gz)  # = -g_i
            beta[iv + k] = ctv + grav


@njit(cache=True)
def _frame_wrench(mi, ws, body, point, jac, normal, r, damping, wrench):
    """Least-squares ``F`` of ``J^T F = r``: ``(J J^T + damping I) F = J r``, J of the frame origin
    (``normal``: 36 scratch values, the 6 x 6 matrix row-major)."""
    point_jacobian(mi, ws, body, point[0], point[1], point[2], jac)
    nv = jac.shape[1]
    for i in range(6):
        s = 0.0
        for c in range(nv):
            s += jac[i, c] * r[c]
        wrench[i] = s
        for j in range(6):
            s = 0.0
            for c in range(nv):
                s += jac[i, c] * jac[j, c]
            normal[6 * i + j] = s + (damping if i == j else 0.0)
    if not cholesky_solve(normal, 0, 6, wrench, 0):
        wrench[:] = 0.0


@njit(cache=True)
def observer_step(mi, mf, ws, acc, q, v, tau, x, decay, dt, first):
    """One observer cycle (module docstring): ``x[X_P]``, ``x[X_BETA]`` become this sample's ``p`` and
    ``beta``, ``x[X_R]`` the residual; ``decay`` = exp(-K_O dt) per DOF. ``first``: (re)start at r = 0.
    Returns False (state unchanged) when q, v or tau is not finite."""
    nq, nv = model_sizes(mi)
    for k in range(nq):
        if not np.isfinite(q[k]):
            return False
    for k in range(nv):
        if not (np.isfinite(v[k]) and np.isfinite(tau[k])):
            return False
    p, beta, r = x[X_NEW_P], x[X_NEW_BETA], x[X_R]
    momentum_terms(mi, mf, ws, acc, q, v, p, beta)
    for k in range(nv):
        if first:
            r[k] = 0.0
        else:
            dE = p[k] - x[X_P, k] - dt * (tau[k] + 0.5 * (x[X_BETA, k] + beta[k]))
            r[k] = decay[k] * r[k] + (1.0 - decay[k]) * dE / dt
        x[X_P, k] = p[k]
        x[X_BETA, k] = beta[k]
    return True


class MomentumObserver:
    """The generalized-momentum residual of a tree model (module docstring), allocation-free per cycle.

    ``gain``: K_O in 1/s, a scalar or one per velocity DOF (or per actuated joint); ``dt``: the
    control period (s); ``frame``: where :attr:`wrench` estimates the external wrench (a link or
    frame name; default the last body), ``None`` to skip it. After :meth:`update`: :attr:`residual`
    (nv, N m or N), :attr:`joint_residual` (actuated joints), :attr:`wrench` ([n; f] at the frame
    origin, world axes, N m and N), :attr:`momentum` (p = M qd).
    """

    def __init__(self, dyn: Dynamics, gain, dt: float, frame: str | None = "", wrench_damping: float = 1e-9):
        if not isinstance(dyn, Dynamics):
            raise TypeError(f"observer: dyn must be an rtctl.dynamics.Dynamics, got {type(dyn).__name__}")
        self.dyn, self.model = dyn, dyn.model
        m = self.model
        self.q_index, self.v_index, self.joint_names = actuated_indices(m)
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"observer: dt must be a finite period > 0 s, got {dt}")
        self.dt = float(dt)
        self.gain = self._per_dof(gain)
        self.decay = np.exp(-self.gain * self.dt)
        self._acc = np.zeros((m.nbodies, A_WIDTH))
        self._x = np.zeros((X_ROWS, m.nv))
        self.momentum, self.beta, self.residual = self._x[X_P], self._x[X_BETA], self._x[X_R]
        self.joint_residual = np.zeros(len(self.v_index))
        self.frame = m.body_names[-1] if frame == "" else frame
        self.wrench = np.zeros(6)
        if self.frame is not None:
            f = m.frame(self.frame)
            if f.body < 0:
                raise ValueError(f"observer: frame '{self.frame}' is fixed to the world; it has no Jacobian")
            self._body, self._point = int(f.body), np.ascontiguousarray(f.translation, dtype=float)
        self._jac = np.zeros((6, m.nv))
        self._normal = np.zeros(36)
        self._wrench_damping = float(wrench_damping)
        self._first = True
        self.samples = 0

    def _per_dof(self, gain) -> np.ndarray:
        g = np.asarray(gain, dtype=float)
        nv, n = self.model.nv, len(self.v_index)
        if g.ndim == 1 and g.shape[0] == n and n != nv:
            full = np.full(nv, float(np.max(g)))
            full[self.v_index] = g
            g = full
        g = np.broadcast_to(g, (nv,)).copy() if g.ndim == 0 or g.shape == (nv,) else None
        if g is None or not np.all(np.isfinite(g)) or np.any(g <= 0):
            raise ValueError(f"observer: gain must be > 0, a scalar or {n} (actuated) or {nv} values, got {gain!r}")
        return g

    def reset(self) -> None:
        """Restart: the next :meth:`update` takes its momentum as p(0) and sets r = 0."""
        self._first = True

    def warm(self, q, v, tau) -> None:
        """Reach :meth:`update`'s kernels (:mod:`rtctl.rt.warmup`) at ``q``, ``v``, ``tau``, on copies of this
        observer's arrays: its state stays as it is."""
        dyn, x = self.dyn, self._x.copy()
        observer_step(dyn.mi, dyn.mf, dyn.ws, self._acc.copy(), q, v, tau, x, self.decay, self.dt, True)
        if self.frame is not None:
            _frame_wrench(dyn.mi, dyn.ws, self._body, self._point, self._jac.copy(), self._normal.copy(), x[X_R],
                          self._wrench_damping, self.wrench.copy())

    def update(self, q, v, tau) -> bool:
        """One cycle at the measured ``q``, ``v`` and the torque ``tau`` (nv) applied over the last period.
        Returns False (nothing updated) on a non-finite input."""
        dyn = self.dyn
        ok = observer_step(dyn.mi, dyn.mf, dyn.ws, self._acc, q, v, tau, self._x, self.decay, self.dt, self._first)
        if not ok:
            return False
        self._first = False
        self.samples += 1
        np.take(self.residual, self.v_index, out=self.joint_residual)
        if self.frame is not None:
            _frame_wrench(dyn.mi, dyn.ws, self._body, self._point, self._jac, self._normal, self.residual,
                          self._wrench_damping, self.wrench)
        return True

    def terms(self, q, v):
        """``(p, beta)`` = (M(q) v, C(q, v)^T v - g(q)) as new arrays (checks and tests; allocates)."""
        m, dyn = self.model, self.dyn
        p, beta = np.zeros(m.nv), np.zeros(m.nv)
        momentum_terms(dyn.mi, dyn.mf, dyn.ws, np.zeros_like(self._acc), np.ascontiguousarray(q, dtype=float),
                       np.ascontiguousarray(v, dtype=float), p, beta)
        return p, beta
