"""Rigid-body dynamics of kinematic trees: the module-DeNOC recursive algorithms.

Conventions (stated once, used everywhere in rtctl)
---------------------------------------------------
* **Spatial vectors are [angular; linear]** (Featherstone's order, and the
  order of the DeNOC twist of Shah, Saha & Dutt, 2012, eq. 1). A twist is
  ``t = [omega; v_P]``: angular velocity and the velocity of a reference point
  P; a wrench is ``w = [n_P; f]``: moment about P and force. Unless a function
  says otherwise both are expressed in **world axes** and referred to the
  **origin of the body** they belong to ("world-aligned at the body origin",
  Pinocchio's ``LOCAL_WORLD_ALIGNED``). Pinocchio orders spatial vectors
  [linear; angular]; tests that compare with it swap the halves explicitly.
* Jacobians returned here are 6 x nv with rows [angular; linear].
* Generalized coordinates follow the joint types of :mod:`rtctl.model`; the
  free-flyer uses Pinocchio's q = [p; quaternion xyzw] and v = [v_lin; omega]
  in the base frame, so q, v, a and tau compare with Pinocchio directly.
* External wrenches ``f_ext`` are an (nbodies, 6) array, row k the wrench
  [n; f] acting on body k, moment about the body origin, world axes.
* Gravity is part of the model (``model.gravity``, default [0, 0, -9.81]).

Algorithms (numbered as in Shah, Saha & Dutt, 2012)
---------------------------------------------------
* :meth:`Dynamics.inverse_dynamics` -- recursive inverse dynamics, Fig. A.1
  (forward twist/twist-rate recursion, backward wrench recursion).
* :meth:`Dynamics.mass_matrix` -- generalized inertia matrix by composite
  modules, eqs. A.2-A.3; :meth:`Dynamics.nonlinear_effects` -- h(q, v).
* :meth:`Dynamics.forward_dynamics` -- O(n) articulated-module UDU^T forward
  dynamics, eqs. 28-30 and A.4-A.9; :meth:`Dynamics.forward_dynamics_cholesky`
  -- the O(n^3) reference (M + Cholesky).
* Kinematics: body poses, point Jacobians and the J-dot v bias, centre of mass,
  energy, and integration on the configuration manifold.
* Loop closures: :mod:`rtctl.dynamics.constrained`.

Every method checks its inputs (shape, finiteness) and raises ``ValueError``
naming the argument. The hot path for compiled control code is the kernels
in :mod:`rtctl.dynamics.kernels`, called with ``model.packed_int``,
``model.packed_float`` and ``Dynamics.ws``: they skip shape checks (wrong
shapes are undefined behaviour) and report non-finite inputs through their
return status instead of raising. Joints enter every kernel only through the
joint model :mod:`rtctl.dynamics.joints` (``jcalc``, the placed joint transform,
and ``motion_subspace``: Featherstone's jcalc); ``kernels`` lists the modules
the kernels live in.
"""
from __future__ import annotations

import numpy as np

from ..model import Model
from ..model.massless import massless_note
from . import kernels as _k

__all__ = ["Dynamics"]

_F64 = np.dtype(np.float64)
_rnea, _crba, _aba = _k.rnea, _k.crba, _k.aba
_ID_NAMES, _FD_NAMES = ("q", "v", "a"), ("q", "v", "tau")


class Dynamics:
    """Workspace and checked Python API for one :class:`~rtctl.model.Model`.

    A ``Dynamics`` is not thread-safe: give each thread its own.
    """

    def __init__(self, model: Model):
        self.model = model
        self.mi = model.packed_int
        self.mf = model.packed_float
        self.ws = np.zeros((model.nbodies, _k.WS_WIDTH))
        self._mat = np.zeros((model.nv, model.nv))
        self._nv = model.nv
        self._zero_v = np.zeros(model.nv)
        self._six = np.zeros(6)
        self._has_fext = False

    # -- argument handling -------------------------------------------------
    def _vec(self, x, n, name):
        """``x`` as a C-contiguous float64 vector of length n, or ValueError naming it."""
        if type(x) is np.ndarray and x.dtype is _F64 and x.shape == (n,) and x.flags.c_contiguous:
            return x
        try:
            arr = np.array(x, dtype=np.float64, order="C")
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a numeric vector of length {n}") from None
        if arr.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
        return arr

    def _out(self, out, shape, name):
        if out is None:
            return np.empty(shape)
        if type(out) is not np.ndarray or out.dtype is not _F64 or out.shape != shape or not out.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float64 array of shape {shape}")
        return out

    def _set_fext(self, f_ext):
        nb = self.model.nbodies
        if f_ext is None:
            if self._has_fext:
                self.ws[:nb, _k.W_FEXT:_k.W_FEXT + 6] = 0.0
                self._has_fext = False
            return
        arr = np.asarray(f_ext, dtype=np.float64)
        if arr.shape != (nb, 6):
            raise ValueError(f"f_ext must have shape ({nb}, 6) (one [n; f] wrench per body), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("f_ext contains NaN or inf")
        self.ws[:nb, _k.W_FEXT:_k.W_FEXT + 6] = arr
        self._has_fext = True

    def _converted(self, kernel, names, vectors, out):
        """Run an entry kernel on (q, v, a-or-tau, out) after converting what numba rejected (lists, int
        arrays, views), or raise ValueError naming the argument that cannot be converted."""
        sizes = (self.model.nq, self.model.nv, self.model.nv)
        vectors = [self._vec(x, n, name) for x, n, name in zip(vectors, sizes, names)]
        out = self._out(out, (self.model.nv,), "out")
        status = kernel(self.mi, self.mf, self.ws, *vectors, out)
        if status != _k.OK:
            self._raise(status, names + ("out",))
        return out

    def _raise(self, status, names, out_shape=None):
        if status == _k.SINGULAR:
            raise ValueError("singular inertia (articulated-body inertia or mass matrix not positive definite)"
                             + massless_note(self.model))
        if status > _k.WRONG_LENGTH:
            name = names[status - _k.WRONG_LENGTH - 1]
            shape = (self.model.nq,) if name == "q" else (self.model.nv,)
            if name == "out" and out_shape is not None:
                shape = out_shape
            raise ValueError(f"{name} must have shape {shape}")
        raise ValueError(f"{names[status - _k.NOT_FINITE - 1]} contains NaN or inf")

    def _finite(self, x, name):
        if not _k.all_finite(x):
            raise ValueError(f"{name} contains NaN or inf")

    # -- dynamics ----------------------------------------------------------
    # The three entry points below are the Python hot path (a control loop calls them every cycle): one
    # frame each, the kernel called straight away (numba's dispatcher checks dtype, rank and layout in C;
    # the kernel checks lengths and finiteness and returns a status), conversions only when numba refuses.
    def inverse_dynamics(self, q, v, a, f_ext=None, out=None) -> np.ndarray:
        """Generalized forces tau = M(q) a + h(q, v) - sum_k J_k^T f_ext_k."""
        if f_ext is not None or self._has_fext:
            self._set_fext(f_ext)
        if out is None:
            out = np.empty(self._nv)
        try:
            status = _rnea(self.mi, self.mf, self.ws, q, v, a, out)
        except TypeError:
            return self._converted(_rnea, _ID_NAMES, (q, v, a), out)
        if status:
            self._raise(status, _ID_NAMES + ("out",))
        return out

    def body_forces(self, q, v, a, f_ext=None, out=None) -> np.ndarray:
        """(nbodies, 6): row i the spatial force f_i that body i's parent exerts on it through joint i, ``[n; f]``
        with the moment about body i's origin, world axes (Featherstone, RBDA 2008, sec. 5.3: the recursive
        Newton-Euler algorithm's backward pass; ``tau_i = S_i^T f_i``)."""
        if f_ext is not None or self._has_fext:
            self._set_fext(f_ext)
        m = self.model
        q, v, a = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v"), self._vec(a, m.nv, "a")
        out = self._out(out, (m.nbodies, 6), "out")
        status = _k.body_forces(self.mi, self.mf, self.ws, q, v, a, np.empty(m.nv), out)
        if status != _k.OK:
            self._raise(status, _ID_NAMES + ("out",))
        return out

    def nonlinear_effects(self, q, v, out=None) -> np.ndarray:
        """h(q, v): Coriolis, centrifugal and gravity generalized forces."""
        return self.inverse_dynamics(q, v, self._zero_v, out=out)

    def gravity_forces(self, q, out=None) -> np.ndarray:
        """g(q): the generalized forces that hold the robot still against gravity."""
        return self.inverse_dynamics(q, self._zero_v, self._zero_v, out=out)

    def mass_matrix(self, q, out=None) -> np.ndarray:
        """Generalized inertia matrix M(q) (nv x nv, symmetric positive definite)."""
        if out is None:
            out = np.empty((self._nv, self._nv))
        try:
            status = _crba(self.mi, self.mf, self.ws, q, out)
        except TypeError:
            out = self._out(out, (self._nv, self._nv), "out")
            status = _crba(self.mi, self.mf, self.ws, self._vec(q, self.model.nq, "q"), out)
        if status:
            self._raise(status, ("q", "out"), (self._nv, self._nv))
        return out

    def forward_dynamics(self, q, v, tau, f_ext=None, out=None) -> np.ndarray:
        """Joint accelerations by the O(n) articulated-module (UDU^T) recursion."""
        if f_ext is not None or self._has_fext:
            self._set_fext(f_ext)
        if out is None:
            out = np.empty(self._nv)
        try:
            status = _aba(self.mi, self.mf, self.ws, q, v, tau, out)
        except TypeError:
            return self._converted(_aba, _FD_NAMES, (q, v, tau), out)
        if status:
            self._raise(status, _FD_NAMES + ("out",))
        return out

    def forward_dynamics_cholesky(self, q, v, tau, f_ext=None, out=None) -> np.ndarray:
        """Joint accelerations by the O(n^3) reference: M(q) qdd = tau - h(q, v)."""
        if f_ext is not None or self._has_fext:
            self._set_fext(f_ext)
        m = self.model
        out = np.empty(m.nv) if out is None else out
        q, v, tau = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v"), self._vec(tau, m.nv, "tau")
        status = _k.forward_dynamics_cholesky(self.mi, self.mf, self.ws, self._mat, q, v, tau,
                                              self._out(out, (m.nv,), "out"))
        if status != _k.OK:
            self._raise(status, ("q", "v", "tau", "out"))
        return out

    def floating_base_inverse_dynamics(self, q, v, a, n_base: int | None = None, out=None):
        """Under-actuated inverse dynamics (Shah, Saha & Dutt, 2012, eqs. 26-27) for a floating-base robot.

        ``a[n_base:]`` are the desired joint accelerations (``a[:n_base]`` is
        ignored); returns ``(tau, acc)``: joint forces with a zero base part,
        and the full acceleration including the base acceleration they cause.
        ``n_base`` defaults to the DOFs of the model's declared base
        (``model.n_base_dofs``); a fixed-base model needs it given.
        """
        m = self.model
        if n_base is None and m.base == "fixed":
            raise ValueError(f"model '{m.name}' has a fixed base: give n_base, the number of unactuated DOFs")
        n0 = m.n_base_dofs if n_base is None else int(n_base)
        prefix = np.append(m.idx_v, m.nv)
        if n0 not in prefix[1:]:
            raise ValueError(f"n_base={n0} does not end a prefix of the tree's bodies (DOF boundaries: "
                             f"{prefix[1:8].tolist()}...)")
        if any(m.parent[i] != i - 1 for i in range(1, int(np.searchsorted(prefix, n0)))):
            raise ValueError(f"the first {n0} DOFs are not a serial base chain")
        q, v, a = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v"), self._vec(a, m.nv, "a")
        out = self._out(out, (m.nv,), "out")
        acc = np.empty(m.nv)
        status = _k.floating_base_rnea(self.mi, self.mf, self.ws, np.empty((n0, n0)), q, v, a, acc, out)
        if status != _k.OK:
            self._raise(status, ("q", "v", "a", "out"))
        return out, acc

    # -- kinematics --------------------------------------------------------
    def forward_kinematics(self, q):
        """World rotations (nbodies, 3, 3) and origins (nbodies, 3) of every body (copies)."""
        q = self._vec(q, self.model.nq, "q")
        self._finite(q, "q")
        _k.forward_kinematics(self.mi, self.mf, self.ws, q)
        nb = self.model.nbodies
        return self.ws[:nb, _k.W_R:_k.W_R + 9].reshape(nb, 3, 3).copy(), self.ws[:nb, _k.W_O:_k.W_O + 3].copy()

    def _frame_point(self, frame, point):
        f = self.model.frame(frame) if isinstance(frame, str) else None
        if f is None:
            body = int(frame)
            if not 0 <= body < self.model.nbodies:
                raise ValueError(f"frame: body index {body} out of range")
            p = np.zeros(3)
        else:
            if f.body < 0:
                raise ValueError(f"frame '{frame}' is fixed to the world; it has no Jacobian")
            body, p = f.body, f.translation.copy()
        if point is not None:
            pt = self._vec(point, 3, "point")
            self._finite(pt, "point")
            p = p + (f.rotation @ pt if f is not None else pt)
        return body, p

    def frame_placement(self, q, frame):
        """World rotation and position of a body or frame (by name or body index)."""
        rot, pos = self.forward_kinematics(q)
        f = self.model.frame(frame) if isinstance(frame, str) else None
        if f is None:
            return rot[int(frame)], pos[int(frame)]
        if f.body < 0:
            return f.rotation.copy(), f.translation.copy()
        return rot[f.body] @ f.rotation, pos[f.body] + rot[f.body] @ f.translation

    def jacobian(self, q, frame, point=None, out=None) -> np.ndarray:
        """6 x nv world-aligned Jacobian [angular; linear] of a frame's origin (or of ``point``,
        given in the frame's axes relative to its origin)."""
        m = self.model
        q = self._vec(q, m.nq, "q")
        self._finite(q, "q")
        body, p = self._frame_point(frame, point)
        out = self._out(out, (6, m.nv), "out")
        _k.forward_kinematics(self.mi, self.mf, self.ws, q)
        _k.point_jacobian(self.mi, self.ws, body, p[0], p[1], p[2], out)
        return out

    def jacobian_dot_times_v(self, q, v, frame, point=None) -> np.ndarray:
        """J-dot v: the classical acceleration [alpha; a_P] of the point when qdd = 0 (no gravity)."""
        m = self.model
        q, v = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v")
        self._finite(q, "q")
        self._finite(v, "v")
        body, p = self._frame_point(frame, point)
        _k.kinematics(self.mi, self.mf, self.ws, q, v, self._zero_v, 0.0)
        out = np.empty(6)
        _k.point_acceleration(self.ws, body, p[0], p[1], p[2], out)
        return out

    def center_of_mass(self, q) -> np.ndarray:
        q = self._vec(q, self.model.nq, "q")
        self._finite(q, "q")
        _k.forward_kinematics(self.mi, self.mf, self.ws, q)
        out = np.empty(3)
        _k.center_of_mass(self.mi, self.mf, self.ws, out)
        return out

    def energy(self, q, v) -> tuple[float, float]:
        """(kinetic, potential) energy; potential is zero at the world origin height."""
        m = self.model
        q, v = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v")
        self._finite(q, "q")
        self._finite(v, "v")
        _k.kinematics(self.mi, self.mf, self.ws, q, v, self._zero_v, 0.0)
        _k.energy(self.mi, self.mf, self.ws, self._six)
        return float(self._six[0]), float(self._six[1])

    def integrate(self, q, v, dt: float, out=None) -> np.ndarray:
        """q (+) v dt on the configuration manifold (exact SE(3) step for a free-flyer)."""
        m = self.model
        q, v = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v")
        out = self._out(out, (m.nq,), "out")
        _k.integrate(self.mi, q, v, float(dt), out)
        return out

    def configuration_rate(self, q, v, out=None) -> np.ndarray:
        """dq/dt for velocity v (length nq)."""
        m = self.model
        q, v = self._vec(q, m.nq, "q"), self._vec(v, m.nv, "v")
        out = self._out(out, (m.nq,), "out")
        _k.configuration_rate(self.mi, q, v, out)
        return out
