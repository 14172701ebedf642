"""rtctl against Pinocchio, the reference oracle.

Tolerance: every comparison is ``oracle.close(ours, ref, rtol=1e-9)``, i.e.
each element agrees to 1e-9 relative to the reference element, with a floor
of 1e-3 times the largest reference element (round-off-sized entries need not
match digit by digit). Per-frame quantities are compared stacked over all
frames of a state, so that floor is set by the whole robot.

Compared, on several random states (q, v, a, tau and external wrenches from
seeded generators) of the bundled robots -- arm7 fixed, quadruped12 and
humanoid with a free-flyer, quadruped12 and arm7 with the Euler-angle
floating base: inverse dynamics (with and without external wrenches), mass
matrix, nonlinear effects, forward dynamics (articulated-body and Cholesky,
with and without external wrenches) against ``pin.aba``, Jacobian and J-dot v
of every body and merged frame, frame placements, centre of mass and
``integrate``. A Hypothesis property test compares inverse dynamics, mass
matrix and both forward dynamics on random kinematic trees built with
ModelBuilder.
"""
from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtctl
from rtctl.model import ModelBuilder, rpy_to_matrix
from rtctl.model.urdf import load_urdf

from oracle import Pair, close, worst_relative_error

RTOL = 1e-9
N_STATES = 3
EULER_PITCH_LIMIT = 1.2  # keep away from the Euler-angle singularity at |pitch| = pi/2

CASES = {
    "arm7-fixed": ("arm7", None),
    "quadruped12-free_flyer": ("quadruped12", "free_flyer"),
    "humanoid-free_flyer": ("humanoid", "free_flyer"),
    "quadruped12-euler": ("quadruped12", "euler"),
    "arm7-euler": ("arm7", "euler"),
}


def check(ours, ref, what):
    assert close(ours, ref, rtol=RTOL), f"{what}: worst relative error {worst_relative_error(ours, ref):.3g}"


@cache
def make_pair(case: str) -> Pair:
    name, floating_base = CASES[case]
    path = rtctl.bundled_model_path(name)
    if floating_base == "euler":
        return Pair.from_model(load_urdf(path, "euler"))
    return Pair.from_urdf(path, floating_base)


def random_state(model, rng, euler_base=False):
    q = model.random_configuration(rng)
    if euler_base:  # bodies 3, 4, 5 are the yaw, pitch, roll joints of the Euler chain
        q[model.idx_q[4]] = rng.uniform(-EULER_PITCH_LIMIT, EULER_PITCH_LIMIT)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    tau = 10.0 * rng.normal(size=model.nv)
    f_ext = 5.0 * rng.normal(size=(model.nbodies, 6))
    return q, v, a, tau, f_ext


@cache
def make_states(case: str):
    pair = make_pair(case)
    rng = np.random.default_rng(list(CASES).index(case))
    return [random_state(pair.model, rng, euler_base=CASES[case][1] == "euler") for _ in range(N_STATES)]


@pytest.fixture(params=list(CASES))
def case(request):
    return request.param


@pytest.fixture
def pair(case):
    return make_pair(case)


@pytest.fixture
def states(case):
    return make_states(case)


def frame_names(model):
    """Every body and every merged frame attached to a body."""
    return list(model.body_names) + [f.name for f in model.frames if f.body >= 0]


# -- bundled robots ------------------------------------------------------------

@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
def test_inverse_dynamics(pair, states, with_fext):
    for k, (q, v, a, _, f_ext) in enumerate(states):
        f = f_ext if with_fext else None
        check(pair.dyn.inverse_dynamics(q, v, a, f_ext=f), pair.rnea(q, v, a, f), f"state {k}")


def test_mass_matrix(pair, states):
    for k, (q, *_) in enumerate(states):
        check(pair.dyn.mass_matrix(q), pair.crba(q), f"state {k}")


def test_nonlinear_effects(pair, states):
    for k, (q, v, *_) in enumerate(states):
        check(pair.dyn.nonlinear_effects(q, v), pair.nle(q, v), f"state {k}")


@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
@pytest.mark.parametrize("method", ["forward_dynamics", "forward_dynamics_cholesky"])
def test_forward_dynamics(pair, states, method, with_fext):
    for k, (q, v, _, tau, f_ext) in enumerate(states):
        f = f_ext if with_fext else None
        check(getattr(pair.dyn, method)(q, v, tau, f_ext=f), pair.aba(q, v, tau, f), f"state {k}")


def check_frames(ours, ref, names, what):
    """Compare a quantity stacked over all frames, so that the agreement floor is set by the
    largest entry of the whole robot (J-dot v of a frame can be zero up to round-off)."""
    ours, ref = np.array([ours(n) for n in names]), np.array([ref(n) for n in names])
    worst = names[int(np.argmax(np.abs(ours - ref).reshape(len(names), -1).max(axis=1)))]
    check(ours, ref, f"{what} (largest deviation at frame '{worst}')")


def test_frame_jacobians(pair, states):
    names = frame_names(pair.model)
    for k, (q, *_) in enumerate(states):
        check_frames(lambda n: pair.dyn.jacobian(q, n), lambda n: pair.frame_jacobian(q, n), names, f"state {k}")


def test_jacobian_dot_times_v(pair, states):
    names = frame_names(pair.model)
    for k, (q, v, *_) in enumerate(states):
        check_frames(lambda n: pair.dyn.jacobian_dot_times_v(q, v, n),
                     lambda n: pair.frame_classical_acceleration(q, v, n), names, f"state {k}")


def test_frame_placements(pair, states):
    names = frame_names(pair.model)
    for k, (q, *_) in enumerate(states):
        for part, label in ((0, "rotation"), (1, "position")):
            check_frames(lambda n: pair.dyn.frame_placement(q, n)[part],
                         lambda n: pair.frame_placement(q, n)[part], names, f"state {k}, {label}")


def test_center_of_mass(pair, states):
    for k, (q, *_) in enumerate(states):
        check(pair.dyn.center_of_mass(q), pair.center_of_mass(q), f"state {k}")


def test_integrate(pair, states):
    for k, (q, v, *_) in enumerate(states):
        for dt in (0.01, 0.5):
            check(pair.dyn.integrate(q, v, dt), pair.integrate(q, v, dt), f"state {k}, dt {dt}")


def test_integrate_free_flyer_beyond_half_turn():
    """A step turning more than pi rad: a quaternion and its negative are the same rotation, and,
    like Pinocchio, integrate must return the one in the hemisphere of the input quaternion."""
    pair = make_pair("quadruped12-free_flyer")
    q, v = pair.model.neutral_configuration(), np.zeros(pair.model.nv)
    v[3:6] = [0.0, 0.0, 4.0]  # base angular velocity: one 1 s step turns 4 rad about z
    check(pair.dyn.integrate(q, v, 1.0), pair.integrate(q, v, 1.0), "free-flyer q after a 4 rad turn")


# -- random kinematic trees ----------------------------------------------------

class TreeSpec(NamedTuple):
    free_flyer_root: bool
    parents: tuple  # parent of body i: -1 (world) or an earlier body
    joint_types: tuple
    seed: int  # axes, placements and inertial parameters


@st.composite
def tree_specs(draw):
    n = draw(st.integers(1, 12))
    free_flyer_root = draw(st.booleans())
    # Pinocchio's URDF mirror of a free-flyer model has a single root, so with a
    # free-flyer every later body hangs below it rather than from the world.
    lowest = 0 if free_flyer_root else -1
    parents = (-1,) + tuple(draw(st.integers(lowest, i - 1)) for i in range(1, n))
    joint_types = tuple(draw(st.sampled_from(["revolute", "prismatic"])) for _ in range(n))
    if free_flyer_root:
        joint_types = ("free_flyer",) + joint_types[1:]
    return TreeSpec(free_flyer_root, parents, joint_types, draw(st.integers(0, 2**32 - 1)))


def random_rotation(rng):
    return rpy_to_matrix(rng.uniform(-np.pi, np.pi, size=3))


def build_tree(spec: TreeSpec):
    rng = np.random.default_rng(spec.seed)
    b = ModelBuilder("random_tree")
    for i, (parent, jtype) in enumerate(zip(spec.parents, spec.joint_types)):
        axis = rng.normal(size=3)
        mass = rng.uniform(0.1, 5.0)
        x, y, z = rng.uniform(0.05, 0.5, size=3)  # box dimensions -> principal moments
        principal = mass / 12.0 * np.array([y * y + z * z, x * x + z * z, x * x + y * y])
        rot = random_rotation(rng)
        b.add_body(f"b{i}", parent, jtype, axis=axis / np.linalg.norm(axis),
                   rotation=random_rotation(rng), translation=rng.uniform(-0.5, 0.5, size=3),
                   mass=mass, com=rng.uniform(-0.3, 0.3, size=3), inertia=rot @ np.diag(principal) @ rot.T)
    return b.build()


@settings(max_examples=40, deadline=None)
@given(spec=tree_specs(), state_seed=st.integers(0, 2**32 - 1))
def test_random_trees(spec, state_seed):
    model = build_tree(spec)
    pair = Pair.from_model(model)
    q, v, a, tau, _ = random_state(model, np.random.default_rng(state_seed))
    check(pair.dyn.inverse_dynamics(q, v, a), pair.rnea(q, v, a), "inverse dynamics")
    check(pair.dyn.mass_matrix(q), pair.crba(q), "mass matrix")
    check(pair.dyn.forward_dynamics(q, v, tau), pair.aba(q, v, tau), "forward dynamics (articulated)")
    check(pair.dyn.forward_dynamics_cholesky(q, v, tau), pair.aba(q, v, tau), "forward dynamics (Cholesky)")


@pytest.mark.parametrize("case", ["arm7-fixed", "quadruped12-free_flyer"])
def test_reflected_rotor_inertia_agrees_with_pinocchio_armature(case):
    """Armature (N^2 J_rotor per joint) enters ID, M and FD exactly as Pinocchio's model.armature."""
    name, floating_base = CASES[case]
    pair = Pair.from_urdf(rtctl.bundled_model_path(name), floating_base)
    rng = np.random.default_rng(7)
    armature = rng.uniform(0.01, 0.5, pair.model.nv)
    if pair.model.has_free_flyer:
        armature[:6] = 0.0
    pair.model.set_armature(armature)
    pair.pin_model.armature = pair.v_to_pin(armature)
    pair.pin_data = pair.pin_model.createData()
    q, v, a, tau, _ = random_state(pair.model, rng)
    assert close(pair.dyn.inverse_dynamics(q, v, a), pair.rnea(q, v, a))
    assert close(pair.dyn.mass_matrix(q), pair.crba(q))
    assert close(pair.dyn.forward_dynamics(q, v, tau), pair.aba(q, v, tau))
    assert close(pair.dyn.forward_dynamics_cholesky(q, v, tau), pair.aba(q, v, tau))
