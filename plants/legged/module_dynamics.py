"""The compiled entries and the checked Python API of the module-level DeNOC dynamics of Shah, Saha & Dutt
(2012), "Modular framework for dynamic modeling and analyses of legged robots" (the algorithm itself, which
:mod:`rtctl.plants.legged.opcount` also counts, is :mod:`rtctl.plants.legged.modular`).

Each entry takes rtctl's packed model (``mi``, ``mf``) and workspace ``ws``, computes the link poses by rtctl's
forward kinematics and hands views of them to the module recursions; :class:`ModularDynamics` owns the work
arrays and checks its inputs.
"""
import numpy as np
from numba import njit

from rtctl.dynamics.kinematics import forward_kinematics
from rtctl.dynamics.workspace import W_D, W_FEXT, W_I, W_O, W_S
from rtctl.model import MF_ARMATURE, MF_MASS, MI_NV

from .modular import (MOD_LINKS, module_floating_base_id, module_forward_dynamics,
                      module_inverse_dynamics, module_mass_matrix, module_matrices)

jit = njit(cache=True)


@jit
def link_arrays(mi, mf, ws, q):
    """Link poses by rtctl's forward kinematics, then views of the eq. 1-2, 19 inputs (no copies)."""
    forward_kinematics(mi, mf, ws, q)
    nb = mi.shape[0]
    return (ws[:nb, W_O:W_O + 3], ws[:nb, W_S:W_S + 6], ws[:nb, W_D:W_D + 3], mf[:nb, MF_MASS],
            ws[:nb, W_I:W_I + 6], mf[:nb, MF_ARMATURE], mf[nb, 0:3], ws[:nb, W_FEXT:W_FEXT + 6])


@jit
def entry_inverse_dynamics(mi, mf, ws, mods, q, v, a, tau, work):
    pos, s_axis, d, m, inertia, arm, gravity, fext = link_arrays(mi, mf, ws, q)
    module_inverse_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, a, tau, work[0], work[1],
                            work[2], work[3], work[4], work[5], work[6], work[8])


@jit
def entry_mass_matrix(mi, mf, ws, mods, q, out, work):
    pos, s_axis, d, m, inertia, arm, _, _ = link_arrays(mi, mf, ws, q)
    module_matrices(mods, pos, s_axis, work[12], work[0], work[3], work[4], work[5], work[6])
    module_mass_matrix(mods, pos, d, m, inertia, arm, work[3], work[5], work[7], work[8], work[9], out.shape[0],
                       out)


@jit
def entry_floating_base(mi, mf, ws, mods, q, v, a, acc, tau, work):
    pos, s_axis, d, m, inertia, arm, gravity, fext = link_arrays(mi, mf, ws, q)
    return module_floating_base_id(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, a, acc, tau, work[0],
                                   work[1], work[2], work[3], work[4], work[5], work[6], work[7], work[8], work[9],
                                   work[10], work[11])


@jit
def entry_forward_dynamics(mi, mf, ws, mods, q, v, tau, qdd, work, fd_work):
    pos, s_axis, d, m, inertia, arm, gravity, fext = link_arrays(mi, mf, ws, q)
    return module_forward_dynamics(mods, pos, s_axis, d, m, inertia, arm, gravity, fext, v, tau, qdd, work[12],
                                   fd_work[0], work[0], work[1], work[2], work[3], work[4], work[5], work[6],
                                   work[8], fd_work[1], fd_work[2], fd_work[3], fd_work[4], fd_work[5],
                                   fd_work[6], fd_work[7])


def module_table(robot) -> np.ndarray:
    """The (nm, 4) module table ``[first body, links, parent module, first DOF]`` of a
    :class:`~rtctl.plants.legged.model.LeggedRobot`'s kinematic modules, checked against the paper's
    definition (section 2): each module a serial chain of one-DOF links with consecutive body indices, and
    each child module emerging from the last link of an earlier module. ``ValueError`` names the module."""
    model = robot.model
    rows, last_body = [], {}
    for k, ((name, bodies), idx) in enumerate(zip(robot.modules, robot.module_indices())):
        if not idx:
            raise ValueError(f"module {name} of {robot.name} has no links")
        for j, b in enumerate(idx):
            dofs = int(model.packed_int[b, MI_NV])
            if dofs != 1:
                raise ValueError(f"module {name} of {robot.name}: link '{bodies[j]}' has a joint with {dofs} DOFs; "
                                 "the module recursion takes one-DOF joints")
            if j > 0 and (b != idx[j - 1] + 1 or model.parent[b] != idx[j - 1]):
                raise ValueError(f"module {name} of {robot.name}: link '{bodies[j]}' does not follow "
                                 f"'{bodies[j - 1]}' serially")
        parent_body = int(model.parent[idx[0]])
        if parent_body < 0:
            parent = -1
            if k != 0:
                raise ValueError(f"module {name} of {robot.name}: only the first module (the base) may hang from "
                                 "the world")
        elif parent_body in last_body:
            parent = last_body[parent_body]
        else:
            raise ValueError(f"module {name} of {robot.name}: its first link '{bodies[0]}' does not hang from the "
                             "last link of an earlier module")
        rows.append((idx[0], len(idx), parent, int(model.idx_v[idx[0]])))
        last_body[idx[-1]] = k
    covered = sorted(b for idx in robot.module_indices() for b in idx)
    if covered != list(range(model.nbodies)):
        raise ValueError(f"the modules of {robot.name} do not cover its {model.nbodies} bodies exactly once")
    return np.array(rows, dtype=np.int64)


class ModularDynamics:
    """The module-level DeNOC recursion (this module's kernels) on a legged robot, one compiled call each.

    ``inverse_dynamics(q, v, a)``: tau = I qdd + C qd - tau^F (eq. 28, Fig. A.1) with the external wrenches
    ``fext`` (nb, 6) [n; f] about the body origins, world axes (default none); ``mass_matrix(q)``: the GIM
    (eqs. A.2-A.3); ``floating_base_inverse_dynamics(q, v, a)``: (qdd, tau) of eqs. 26-27;
    ``forward_dynamics(q, v, tau)``: qdd of eq. 28 by the block UDU^T (eqs. 29-30, A.4-A.9). Each writes
    into preallocated arrays (returned; copy them to keep) and allocates nothing.
    """

    def __init__(self, robot):
        from rtctl.dynamics import Dynamics

        self.robot = robot
        self.model = robot.model
        self.mods = module_table(robot)
        self.dyn = Dynamics(self.model)
        nb, nv, nm = self.model.nbodies, self.model.nv, self.mods.shape[0]
        e = int(self.mods[:, MOD_LINKS].max())
        n0 = int(self.mods[0, MOD_LINKS])
        self.n_base = n0
        # twist, rate, wrench, N, N-dot, A column, A-dot t, M~, scratch, A N, GIM, I_0, zero velocity
        self._work = (np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros((nm, 6 * e, e)),
                      np.zeros((nm, 6 * e, e)), np.zeros((nm, 6 * e, 6)), np.zeros((nm, 6 * e)),
                      np.zeros((nm, 6 * e, 6 * e)), np.zeros((6 * e, max(6, e))), np.zeros((6 * e, e)),
                      np.zeros((nv, nv)), np.zeros((n0, n0)), np.zeros(nv))
        # forward dynamics: h, M^ per link, I^ (factored), Psi^, A^T Psi per module, A^T Psi^, eta, mu-bar
        self._fd_work = (np.zeros(nv), np.zeros((nb, 6, 6)), np.zeros((e, e)), np.zeros((6 * e, e)),
                         np.zeros((nm, 6, e)), np.zeros((6, e)), np.zeros((nb, 6)), np.zeros((nb, 6)))
        self.tau, self.acc, self.mass, self.qdd = np.zeros(nv), np.zeros(nv), np.zeros((nv, nv)), np.zeros(nv)

    def _vector(self, name, x):
        x = np.ascontiguousarray(x, dtype=np.float64)
        n = self.model.nq if name == "q" else self.model.nv
        if x.shape != (n,) or not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must be {n} finite numbers, got shape {x.shape}")
        return x

    def set_external_wrenches(self, fext=None):
        """External wrenches (nb, 6) [n; f] about each body origin, world axes; None clears them."""
        ws = self.dyn.ws
        nb = self.model.nbodies
        ws[:nb, W_FEXT:W_FEXT + 6] = 0.0 if fext is None else np.asarray(fext, dtype=float).reshape(nb, 6)

    def inverse_dynamics(self, q, v, a):
        q, v, a = self._vector("q", q), self._vector("v", v), self._vector("a", a)
        entry_inverse_dynamics(self.dyn.mi, self.dyn.mf, self.dyn.ws, self.mods, q, v, a, self.tau, self._work)
        return self.tau

    def mass_matrix(self, q):
        q = self._vector("q", q)
        entry_mass_matrix(self.dyn.mi, self.dyn.mf, self.dyn.ws, self.mods, q, self.mass, self._work)
        return self.mass

    def forward_dynamics(self, q, v, tau):
        q, v, tau = self._vector("q", q), self._vector("v", v), self._vector("tau", tau)
        if not entry_forward_dynamics(self.dyn.mi, self.dyn.mf, self.dyn.ws, self.mods, q, v, tau, self.qdd,
                                       self._work, self._fd_work):
            raise ValueError("an articulated-module inertia I^i is not positive definite")
        return self.qdd

    def floating_base_inverse_dynamics(self, q, v, a):
        q, v, a = self._vector("q", q), self._vector("v", v), self._vector("a", a)
        if not entry_floating_base(self.dyn.mi, self.dyn.mf, self.dyn.ws, self.mods, q, v, a, self.acc, self.tau,
                                    self._work):
            raise ValueError("the base block I_0 of the inertia matrix is not positive definite")
        return self.acc, self.tau
