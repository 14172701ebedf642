"""Operation counts of Table 1 of Shah, Saha & Dutt (2012), counted on the module-level DeNOC recursion.

Method (instrumented evaluation, as for the Stewart platform's Table 1 in
:mod:`rtctl.plants.stewart.opcount`): the source of the compiled kernels
:mod:`rtctl.plants.legged.modular` is loaded a second time as plain Python
with ``COUNTING = True`` and run on object arrays of
:class:`~rtctl.plants.stewart.opcount.Counted` scalars. Every addition /
subtraction and multiplication / division whose operands depend on the state
is counted; operations with structural zeros and ones (the identity and zero
blocks of A_{k,j}, the zero half of a revolute or prismatic p_k, the upper
blocks of N^i, the m 1 block of M_k) and negations are free, and constants are
folded -- the rules of a symbolic count. Square roots (the Cholesky factor
of I_0) are counted apart.

What is counted, and what is not (the like-for-like terms):

* Inputs are the link poses the recursion starts from: origins O_k, world-axes
  joint axes p_k, centre-of-mass offsets d_k and inertias I_k about O_k (all
  state dependent, counted as variables), the ground wrenches w^F on every
  link, masses and gravity (constants). Building them from q (rotation
  matrices, sines and cosines) is not counted; the paper does not say whether
  its counts include it.
* The floating base is rtctl's: a chain of one-DOF virtual links (planar: x,
  z, pitch; spatial: x, y, z, yaw, pitch, roll), module M_0 of n_0 links, where
  the paper's base is one link with the 6 x n_0 matrix P_0 of eq. 7.
* Partition ``"modules"`` is the paper's (legs of three links, one block each:
  N^i dense, so a module costs O(eta^2)); ``"links"`` makes every link its own
  module, which the paper names the link-level special case of the same
  recursion (section 2) -- the intra-modular serial recursion of Fig. A.1.
* Forward dynamics (Table 1's second rows) is the module-level block UDU^T of
  :func:`~rtctl.plants.legged.modular.module_forward_dynamics` (eqs. 28-30,
  A.4-A.9): step 1 (t, t' at qdd = 0, w, h = N_d^T N_l^T w), phi = tau - h, the
  backward pass (M^^i, Psi^^i, I^^i and its U_i D_i U_i^T, A^{i,beta T} Psi^i,
  the parent's share, eq. 30 i-ii) and the forward pass (eq. 30 iii); the
  forces tau are variables except the floating base's, the constant 0 of
  eq. 25. No square roots (UDU^T, not Cholesky); divisions are counted with
  the multiplications, as the paper's M.

The paper's n is the number of joint DOFs outside the base (biped 6,
quadruped 12); its fixed-base rows are counted on serial chains of n generic
spatial revolute joints with every link its own module.
"""
from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
from rtctl.plants.legged.model import (
    LeggedRobot,
    box_inertia,
    planar_biped,
    spatial_quadruped,
)
from rtctl.plants.legged.module_dynamics import ModularDynamics, module_table
from rtctl.plants.stewart.opcount import Counted, Counter

from rtctl.dynamics import Dynamics
from rtctl.dynamics.workspace import W_D, W_I, W_O, W_S
from rtctl.model import MF_ARMATURE, MF_MASS, PRISMATIC, REVOLUTE, ModelBuilder

__all__ = ["PAPER_TABLE1", "count", "count_table", "format_table", "link_partition", "serial_chain"]

_SRC = Path(__file__).with_name("modular.py")

# Table 1 of the paper: (multiplications/divisions, additions/subtractions) as (a n + b) coefficients.
PAPER_TABLE1 = {
    "floating_inverse": ((164, 60), (156, 66)),
    "floating_forward": ((209, 60), (201, 66)),
    "fixed_inverse": ((94, -81), (82, -75)),
    "fixed_inverse_featherstone": ((130, -68), (101, -56)),
    "fixed_forward": ((209, -198), (201, -185)),
    "fixed_forward_featherstone": ((300, -267), (279, -259)),
}


def paper_counts(row: str, n: int) -> tuple[int, int]:
    """(multiplications, additions) of a Table 1 row at n DOFs."""
    (ma, mb), (aa, ab) = PAPER_TABLE1[row]
    return ma * n + mb, aa * n + ab


_KC = None


def _counting_kernels():
    global _KC
    if _KC is None:
        spec = importlib.util.spec_from_file_location("rtctl.plants.legged.modular_counting", _SRC)
        mod = importlib.util.module_from_spec(spec)
        mod.COUNTING = True
        spec.loader.exec_module(mod)
        _KC = mod
    return _KC


def link_partition(robot: LeggedRobot) -> LeggedRobot:
    """The same robot with every link outside the floating base its own module (the paper's link-level
    special case); the base module M_0 stays one module (a fixed-base chain has none)."""
    base = robot.modules[:1] if robot.n_base else []
    in_base = {name for _, names in base for name in names}
    modules = base + [(f"L{k}", [name]) for k, name in enumerate(robot.model.body_names) if name not in in_base]
    return dataclasses.replace(robot, modules=modules)


def serial_chain(n: int, seed: int = 3) -> LeggedRobot:
    """A fixed-base chain of n revolute joints with generic axes, offsets and inertias (one module)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(f"chain{n}")
    parent = -1
    names = []
    for k in range(n):
        axis = rng.standard_normal(3)
        mass = 1.0 + rng.random()
        parent = b.add_body(f"link{k}", parent, "revolute", axis=tuple(axis / np.linalg.norm(axis)),
                            translation=tuple(0.3 * rng.standard_normal(3)), mass=mass,
                            com=tuple(0.1 * rng.standard_normal(3)), inertia=box_inertia(mass, 0.1 + 0.2 * rng.random(3)))
        names.append(f"link{k}")
    model = b.build()
    return LeggedRobot(name=model.name, model=model, n_base=0, contact_bodies=np.zeros(0, dtype=np.int64),
                       contact_points=np.zeros((0, 3)), foot_names=[], modules=[("M0", names)], feet={}, legs={},
                       hip_offsets=np.zeros((0, 3)), link_lengths={})


def _inputs(robot: LeggedRobot, q, fext, counter):
    """Link poses by rtctl's forward kinematics, wrapped as counted variables (structural zeros of p_k kept)."""
    m = robot.model
    dyn = Dynamics(m)
    dyn.forward_kinematics(q)
    ws, mf, nb = dyn.ws, dyn.mf, m.nbodies

    def wrap(a):
        return np.array([[Counted(x, counter) for x in row] for row in a], dtype=object)

    s_axis = np.full((nb, 6), 0.0, dtype=object)
    for k in range(nb):
        cols = range(3) if m.joint_type[k] == REVOLUTE else range(3, 6) if m.joint_type[k] == PRISMATIC else range(6)
        for c in cols:
            s_axis[k, c] = Counted(ws[k, W_S + c], counter)
    return (wrap(ws[:nb, W_O:W_O + 3]), s_axis, wrap(ws[:nb, W_D:W_D + 3]), mf[:nb, MF_MASS].astype(object),
            wrap(ws[:nb, W_I:W_I + 6]), mf[:nb, MF_ARMATURE].astype(object), mf[nb, 0:3].astype(object),
            wrap(fext))


def count(robot: LeggedRobot, quantity: str, q, v=None, a=None, fext=None) -> tuple[Counter, np.ndarray]:
    """Operations of one evaluation of ``quantity`` by the module recursion (module docstring), and its value.

    ``quantity``: ``"floating_inverse"`` (eqs. 26-27: returns tau), ``"inverse"`` (tau = I qdd + C qd - tau^F
    over all DOFs, eq. 28), ``"mass_matrix"`` (eqs. A.2-A.3) or ``"forward"`` (qdd of eqs. 28-30 from the
    forces ``a``, whose base part is taken as the constant 0 of eq. 25: returns qdd). ``fext`` (nb, 6) defaults
    to zeros (still counted as variables).
    """
    k = _counting_kernels()
    m = robot.model
    nb, nv = m.nbodies, m.nv
    mods = module_table(robot)
    nm, e = mods.shape[0], int(mods[:, 1].max())
    c = Counter()
    fext = np.zeros((nb, 6)) if fext is None else np.asarray(fext, float)
    pos, s_axis, d, mass, inertia, arm, gravity, wf = _inputs(robot, np.asarray(q, float), fext, c)

    def obj(*shape):
        return np.full(shape, 0.0, dtype=object)

    def variables(x):
        return np.array([Counted(val, c) for val in np.asarray(x, float)], dtype=object)

    twist, rate, wrench = obj(nb, 6), obj(nb, 6), obj(nb, 6)
    n_mat, n_dot, a_col, a_dot = obj(nm, 6 * e, e), obj(nm, 6 * e, e), obj(nm, 6 * e, 6), obj(nm, 6 * e)
    m_tilde, mass_work, shift = obj(nm, 6 * e, 6 * e), obj(6 * e, max(6, e)), obj(6 * e, e)
    if quantity == "mass_matrix":
        out = obj(nv, nv)
        # N^i and A^{i,beta}; at the constant v = 0 the twists and rate terms cost nothing
        k.module_matrices(mods, pos, s_axis, np.zeros(nv), twist, n_mat, n_dot, a_col, a_dot)
        k.module_mass_matrix(mods, pos, d, mass, inertia, arm, n_mat, a_col, m_tilde, mass_work, shift, nv, out)
    elif quantity == "inverse":
        out = obj(nv)
        k.module_inverse_dynamics(mods, pos, s_axis, d, mass, inertia, arm, gravity, wf, variables(v), variables(a),
                                  out, twist, rate, wrench, n_mat, n_dot, a_col, a_dot, mass_work)
    elif quantity == "floating_inverse":
        out, acc = obj(nv), obj(nv)
        n0 = int(mods[0, 1])
        if not k.module_floating_base_id(mods, pos, s_axis, d, mass, inertia, arm, gravity, wf, variables(v),
                                         variables(a), acc, out, twist, rate, wrench, n_mat, n_dot, a_col, a_dot,
                                         m_tilde, mass_work, shift, obj(nv, nv), obj(n0, n0)):
            raise ValueError("I_0 is not positive definite at this state")
    elif quantity == "forward":
        out = obj(nv)
        tau = variables(a)
        tau[:robot.n_base] = 0.0                   # tau = [0; tau_theta] (eq. 25): the base is not actuated
        fd = (obj(nv), obj(nb, 6, 6), obj(e, e), obj(6 * e, e), obj(nm, 6, e), obj(6, e), obj(nb, 6), obj(nb, 6))
        if not k.module_forward_dynamics(mods, pos, s_axis, d, mass, inertia, arm, gravity, wf, variables(v), tau, out,
                                         np.zeros(nv), fd[0], twist, rate, wrench, n_mat, n_dot, a_col, a_dot,
                                         mass_work, *fd[1:]):
            raise ValueError("an articulated-module inertia is not positive definite at this state")
    else:
        raise ValueError(f"quantity must be 'floating_inverse', 'inverse', 'mass_matrix' or 'forward', got "
                         f"{quantity!r}")
    return c, np.vectorize(float, otypes=[float])(out)


def numeric(robot: LeggedRobot, quantity: str, q, v=None, a=None, fext=None) -> np.ndarray:
    """The same quantity from the compiled kernels (:class:`~rtctl.plants.legged.module_dynamics.ModularDynamics`)."""
    md = ModularDynamics(robot)
    md.set_external_wrenches(fext)
    if quantity == "mass_matrix":
        return md.mass_matrix(q).copy()
    if quantity == "inverse":
        return md.inverse_dynamics(q, v, a).copy()
    if quantity == "forward":
        tau = np.array(a, dtype=float)
        tau[:robot.n_base] = 0.0
        return md.forward_dynamics(q, v, tau).copy()
    return md.floating_base_inverse_dynamics(q, v, a)[1].copy()


def random_state(robot: LeggedRobot, seed: int = 5):
    rng = np.random.default_rng(seed)
    m = robot.model
    return (m.neutral_configuration() + 0.4 * rng.standard_normal(m.nq), rng.standard_normal(m.nv),
            rng.standard_normal(m.nv), rng.standard_normal((m.nbodies, 6)))


def count_table(chain_sizes=(2, 3, 4, 5, 6, 7)) -> dict:
    """Counts beside Table 1: the floating-base legged robots under both partitions, and the fixed-base chains.

    Returns ``{"legged": {(robot, partition, quantity): (mul, add, sqrt, n)}, "chains": {n: (mul, add)},
    "fit": (mul slope, mul intercept, add slope, add intercept), "chains_forward": ..., "fit_forward": ...}``
    (``chains``/``fit`` inverse dynamics, ``*_forward`` forward dynamics) -- ``mul`` counts divisions too, as
    the paper.
    """
    legged = {}
    for make in (planar_biped, spatial_quadruped):
        robot = make()
        q, v, a, fext = random_state(robot)
        for partition, r in (("modules", robot), ("links", link_partition(robot))):
            for quantity in ("floating_inverse", "forward", "mass_matrix"):
                c, _ = count(r, quantity, q, v, a, fext)
                legged[(robot.name, partition, quantity)] = (c.mul + c.div, c.add, c.sqrt, robot.n_actuated)
    out = {"legged": legged}
    for quantity, key in (("inverse", ""), ("forward", "_forward")):
        chains = {}
        for n in chain_sizes:
            robot = link_partition(serial_chain(n))
            q, v, a, fext = random_state(robot)
            c, _ = count(robot, quantity, q, v, a, np.zeros_like(fext))
            chains[n] = (c.mul + c.div, c.add)
        ns = np.array(list(chains))
        mul = np.polyfit(ns, [chains[n][0] for n in ns], 1)
        add = np.polyfit(ns, [chains[n][1] for n in ns], 1)
        out["chains" + key] = chains
        out["fit" + key] = (mul[0], mul[1], add[0], add[1])
    return out


def format_table(table: dict) -> str:
    lines = ["Shah, Saha & Dutt (2012) Table 1 beside the module-level DeNOC recursion counted here "
             "(M: mul/div, A: add/sub)",
             f"{'quantity':54s} {'n':>3s} | {'paper M':>8s} {'paper A':>8s} | {'ours M':>7s} {'ours A':>7s} sqrt"]
    lines.append("-" * len(lines[-1]))
    labels = {"floating_inverse": "floating-base ID (26-27)", "forward": "floating-base FD (28-30)",
              "mass_matrix": "GIM (A.2-A.3)"}
    paper_row = {"floating_inverse": "floating_inverse", "forward": "floating_forward"}
    for (name, partition, quantity), (mul, add, sqrt, n) in table["legged"].items():
        label = f"{name} {labels[quantity]}, {partition}"
        if quantity in paper_row:
            pm, pa = paper_counts(paper_row[quantity], n)
            paper = f"{pm:8d} {pa:8d}"
        else:
            paper = f"{'-':>8s} {'-':>8s}"
        lines.append(f"{label:54s} {n:3d} | {paper} | {mul:7d} {add:7d} {sqrt:4d}")
    for key, what, row in (("", "ID", "fixed_inverse"), ("_forward", "FD", "fixed_forward")):
        for n, (mul, add) in table["chains" + key].items():
            pm, pa = paper_counts(row, n)
            lines.append(f"{'fixed-base chain ' + what + ', links':54s} {n:3d} | {pm:8d} {pa:8d} | {mul:7d} {add:7d} "
                         f"{0:4d}")
    for key, what, row in (("", "ID", "fixed_inverse"), ("_forward", "FD", "fixed_forward")):
        ms, mi, as_, ai = table["fit" + key]
        (pms, pmi), (pas, pai) = PAPER_TABLE1[row]
        (fms, fmi), (fas, fai) = PAPER_TABLE1[row + "_featherstone"]
        lines.append(f"fixed-base {what} fitted: ({ms:.0f}n {mi:+.0f})M ({as_:.0f}n {ai:+.0f})A; paper ({pms}n {pmi:+d})M "
                     f"({pas}n {pai:+d})A, Featherstone ({fms}n {fmi:+d})M ({fas}n {fai:+d})A")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(count_table()))
