"""Loop closures: projected inverse dynamics and Baumgarte-stabilised forward dynamics.

A planar four-bar (crank, coupler, rocker; the coupler-rocker pin cut and closed
by a point constraint) and a two-link arm whose elbow is locked by a
constraint, compared with the single rigid body it becomes.
"""
import numpy as np
import pytest

from oracle import close
from rtctl.dynamics import Dynamics
from rtctl.dynamics.constrained import constrained_forward_dynamics, projected_inverse_dynamics
from rtctl.model import ModelBuilder

CRANK, COUPLER, ROCKER, GROUND = 0.1, 0.4, 0.3, 0.4
Y = (0.0, 1.0, 0.0)


def bar_inertia(mass, length):
    return np.diag([1e-4, mass * length ** 2 / 12, mass * length ** 2 / 12])


def four_bar() -> Dynamics:
    b = ModelBuilder("four_bar")
    b.add_body("crank", -1, "revolute", axis=Y, mass=0.5, com=(CRANK / 2, 0, 0), inertia=bar_inertia(0.5, CRANK))
    b.add_body("coupler", "crank", "revolute", axis=Y, translation=(CRANK, 0, 0), mass=1.0,
               com=(COUPLER / 2, 0, 0), inertia=bar_inertia(1.0, COUPLER))
    b.add_body("rocker", -1, "revolute", axis=Y, translation=(GROUND, 0, 0), mass=0.8,
               com=(ROCKER / 2, 0, 0), inertia=bar_inertia(0.8, ROCKER))
    return Dynamics(b.build())


PLANE = [3, 5]  # x and z rows of the linear part: the closure is planar


def closure(dyn, q, v=None):
    """phi (x, z gap between coupler tip and rocker tip), its Jacobian and, with v, Jc-dot v."""
    tip_c, tip_r = (COUPLER, 0, 0), (ROCKER, 0, 0)
    rot, pos = dyn.forward_kinematics(q)
    phi = (pos[1] + rot[1] @ tip_c - pos[2] - rot[2] @ tip_r)[[0, 2]]
    jc = (dyn.jacobian(q, 1, tip_c) - dyn.jacobian(q, 2, tip_r))[PLANE]
    if v is None:
        return phi, jc
    bias = (dyn.jacobian_dot_times_v(q, v, 1, tip_c) - dyn.jacobian_dot_times_v(q, v, 2, tip_r))[PLANE]
    return phi, jc, bias


def assemble(dyn, crank_angle, rng):
    """A constraint-consistent (q, v, a) with the given crank angle (closed-form assembly).

    A rotation about +y by angle t maps the x axis to (cos t, 0, -sin t), so in
    the plane coordinates (x, -z) every joint angle is an ordinary polar angle.
    """
    crank_tip = CRANK * np.array([np.cos(crank_angle), np.sin(crank_angle)])
    pivot = np.array([GROUND, 0.0])
    gap = pivot - crank_tip
    dist = np.linalg.norm(gap)
    # Coupler tip = rocker tip: intersection of circles (crank_tip, COUPLER) and (pivot, ROCKER).
    along = (COUPLER ** 2 - ROCKER ** 2 + dist ** 2) / (2 * dist)
    across = np.sqrt(COUPLER ** 2 - along ** 2)
    tip = crank_tip + (along * gap + across * np.array([-gap[1], gap[0]])) / dist
    coupler_abs = np.arctan2(*(tip - crank_tip)[::-1])
    rocker_abs = np.arctan2(*(tip - pivot)[::-1])
    q = np.array([crank_angle, coupler_abs - crank_angle, rocker_abs])
    assert np.abs(closure(dyn, q)[0]).max() < 1e-14
    _, jc = closure(dyn, q)
    null = np.linalg.svd(jc)[2][-1]
    v = null * rng.normal() * 3
    _, jc, bias = closure(dyn, q, v)
    a = np.linalg.lstsq(jc, -bias, rcond=None)[0] + null * rng.normal() * 10
    return q, v, a


def test_projected_inverse_dynamics_round_trips_through_constrained_forward_dynamics():
    dyn = four_bar()
    rng = np.random.default_rng(10)
    crank_only = np.array([[1.0], [0.0], [0.0]])
    for angle in rng.uniform(-np.pi, np.pi, 6):
        q, v, a = assemble(dyn, angle, rng)
        _, jc, bias = closure(dyn, q, v)
        sol = projected_inverse_dynamics(dyn, q, v, a, jc, actuation=crank_only)
        assert sol.residual < 1e-12
        qdd, lam = constrained_forward_dynamics(dyn, q, v, crank_only @ sol.tau, jc, bias)
        assert close(qdd, a)
        assert close(lam, sol.lam)


def test_crank_power_equals_rate_of_change_of_energy():
    """Constraint forces do no work: tau_crank * crank speed = v^T (M a + h) = dE/dt."""
    dyn = four_bar()
    rng = np.random.default_rng(11)
    q, v, a = assemble(dyn, 0.7, rng)
    _, jc, _ = closure(dyn, q, v)
    sol = projected_inverse_dynamics(dyn, q, v, a, jc, actuation=np.array([[1.0], [0.0], [0.0]]))
    dt = 1e-6
    e_plus = sum(dyn.energy(q + dt * v + 0.5 * dt * dt * a, v + dt * a))
    e_minus = sum(dyn.energy(q - dt * v + 0.5 * dt * dt * a, v - dt * a))
    assert sol.tau[0] * v[0] == pytest.approx((e_plus - e_minus) / (2 * dt), rel=1e-6)


def test_redundant_actuation_takes_the_minimum_weighted_norm_solution():
    dyn = four_bar()
    rng = np.random.default_rng(12)
    q, v, a = assemble(dyn, -0.4, rng)
    _, jc, _ = closure(dyn, q, v)
    tau_id = dyn.inverse_dynamics(q, v, a).copy()
    weights = np.array([1.0, 4.0, 0.5])
    sol = projected_inverse_dynamics(dyn, q, v, a, jc, weights=weights)
    assert sol.residual < 1e-12
    assert close(sol.tau + jc.T @ sol.lam, tau_id)
    # Any other realisable torque differs by Jc^T mu; the weighted norm is smallest at mu = 0.
    for _ in range(20):
        other = sol.tau + jc.T @ rng.normal(size=2)
        assert other @ (weights * other) > sol.tau @ (weights * sol.tau)


def test_unforced_four_bar_conserves_energy_and_stays_closed():
    dyn = four_bar()
    rng = np.random.default_rng(13)
    q, v, _ = assemble(dyn, 0.3, rng)
    zero = np.zeros(3)

    def deriv(q_, v_):
        phi, jc, bias = closure(dyn, q_, v_)
        qdd, _ = constrained_forward_dynamics(dyn, q_, v_, zero, jc, bias, phi=phi, stiffness=20.0, damping=20.0)
        return v_, qdd

    e0 = sum(dyn.energy(q, v))
    dt = 1e-3
    for _ in range(1000):
        k1 = deriv(q, v)
        k2 = deriv(q + dt / 2 * k1[0], v + dt / 2 * k1[1])
        k3 = deriv(q + dt / 2 * k2[0], v + dt / 2 * k2[1])
        k4 = deriv(q + dt * k3[0], v + dt * k3[1])
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    assert np.abs(closure(dyn, q)[0]).max() < 1e-9
    assert abs(sum(dyn.energy(q, v)) - e0) < 1e-6 * (2.3 * 9.81 * 0.5)


def test_locked_elbow_moves_like_one_rigid_body():
    """A two-link arm with its elbow held by the constraint qd_2 = 0 vs the merged single body."""
    elbow = 0.6
    link1 = dict(mass=1.0, com=(0.2, 0, 0), inertia=np.diag([0.001, 0.015, 0.015]))
    link2 = dict(mass=0.7, com=(0.15, 0.02, 0), inertia=np.diag([0.002, 0.01, 0.011]))
    b = ModelBuilder("arm2")
    b.add_body("l1", -1, "revolute", axis=(0, 0, 1), **link1)
    b.add_body("l2", "l1", "revolute", axis=(0, 0, 1), translation=(0.4, 0, 0), **link2)
    two = Dynamics(b.build())

    r = np.array([[np.cos(elbow), -np.sin(elbow), 0], [np.sin(elbow), np.cos(elbow), 0], [0, 0, 1]])
    m = ModelBuilder("arm1")
    m.add_body("l1", -1, "revolute", axis=(0, 0, 1), **link1)
    m.add_fixed("l2", "l1", rotation=r, translation=(0.4, 0, 0), **link2)
    one = Dynamics(m.build())
    for g in ([0, 0, -9.81], [0, -9.81, 0]):
        two.model.set_gravity(g)
        one.model.set_gravity(g)
        jc = np.array([[0.0, 1.0]])
        qdd, lam = constrained_forward_dynamics(two, [0.3, elbow], [1.5, 0.0], [2.0, 0.0], jc, [0.0])
        ref = one.forward_dynamics([0.3], [1.5], [2.0])[0]
        assert qdd[1] == pytest.approx(0.0, abs=1e-12)
        assert qdd[0] == pytest.approx(ref, rel=1e-10)
        # The multiplier is the elbow torque that holds the joint.
        tau = two.inverse_dynamics([0.3, elbow], [1.5, 0.0], qdd)
        assert lam[0] == pytest.approx(tau[1], rel=1e-10, abs=1e-12)


def test_bad_constraint_jacobian_is_named():
    dyn = four_bar()
    with pytest.raises(ValueError, match="Jc must have shape"):
        projected_inverse_dynamics(dyn, np.zeros(3), np.zeros(3), np.zeros(3), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="Jc_dot_v"):
        constrained_forward_dynamics(dyn, np.zeros(3), np.zeros(3), np.zeros(3), np.zeros((2, 3)), [np.nan, 0])
