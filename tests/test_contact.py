"""The compliant foot-ground contact of rtctl.dynamics.contact (the configuration-independent
ground of Shah, Saha & Dutt, 2012).

* the kernel's forces equal the contact law evaluated independently (point positions from the body poses,
  point velocities as J(q) v from the point Jacobians), on random states of a box, the planar biped and the
  spatial quadruped, with 1e-9 relative agreement;
* its wrenches are the link-ground wrenches w^F: sum_c J_c^T F_c (point Jacobians) equals
  ID(q, v, a) - ID(q, v, a, f_ext) (eq. 24's tau^F through the recursive inverse dynamics), 1e-9;
* no pull: points above the ground or separating faster than k delta / d carry exactly zero force;
* friction opposes the slip, reaches mu F_n when sliding fast and mu_s F_n (the stiction peak) at the
  transition velocity, and equals ContactModel.friction_coefficient;
* the dissipated power is >= 0 and equals -(sum F . v_P) - d/dt(spring energy);
* bad parameters and contact points raise ValueError naming the field.
"""
import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.dynamics.contact import (NPARAMS, P_DAMPING, P_FRICTION, P_GROUND_HEIGHT, P_HUNT_CROSSLEY,
                                    P_SLIP_VELOCITY, P_STATIC_FRICTION, P_STIFFNESS, P_VISCOUS_FRICTION,
                                    ContactModel, check_contact_points, compute_contact)
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.model import ModelBuilder


def box_model(mass=10.0, size=(0.4, 0.3, 0.2)):
    """A free-flying box with contact points on its 8 corners."""
    b = ModelBuilder("box")
    a, w, h = size
    b.add_body("box", -1, "free_flyer", mass=mass,
               inertia=np.diag([w * w + h * h, a * a + h * h, a * a + w * w]) * mass / 12)
    corners = np.array([[sx * a / 2, sy * w / 2, sz * h / 2] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    return b.build(), np.zeros(8, dtype=np.int64), corners


def puck_model(mass=2.0):
    """A free-flying body with one contact point at its origin."""
    b = ModelBuilder("puck")
    b.add_body("puck", -1, "free_flyer", mass=mass, inertia=np.eye(3) * 0.01)
    return b.build(), np.zeros(1, dtype=np.int64), np.zeros((1, 3))


def robot_setup(name):
    if name == "box":
        return box_model()
    robot = planar_biped() if name == "planar_biped" else spatial_quadruped()
    return robot.model, robot.contact_bodies, robot.contact_points


def point_kinematics(dyn, q, v, bodies, points):
    """World positions, velocities (J v) and linear point Jacobians of the contact points (independent path)."""
    pos, vel, jac = [], [], []
    for b, p in zip(bodies, points):
        rot, origin = dyn.frame_placement(q, int(b))
        j = dyn.jacobian(q, int(b), point=p)[3:6]
        pos.append(origin + rot @ p)
        vel.append(j @ v)
        jac.append(j)
    return np.array(pos), np.array(vel), np.array(jac)


def contact_law(cm: ContactModel, pos, vel):
    """The contact law of the module docstring, written out per point in NumPy."""
    forces = np.zeros_like(pos)
    for c, (p, u) in enumerate(zip(pos, vel)):
        depth = cm.ground_height - p[2]
        if depth <= 0:
            continue
        rate = -u[2]
        fn = cm.stiffness * depth + (cm.damping + 1.5 * cm.hunt_crossley * cm.stiffness * depth) * rate
        if fn <= 0:
            continue
        vt = np.array([u[0], u[1]])
        speed = np.linalg.norm(vt)
        ft = -fn * cm.friction_coefficient(speed) * vt / speed if speed > 0 else np.zeros(2)
        forces[c] = [ft[0], ft[1], fn]
    return forces


BASE_Z = {"box": 2, "planar_biped": 1, "spatial_quadruped": 2}  # index of the base height in q


def random_state(dyn, rng, name, bodies, points, depth):
    """A random state with random velocities and the lowest contact point ``depth`` below the ground."""
    m = dyn.model
    q = m.random_configuration(rng, span=0.6)
    v = rng.normal(size=m.nv) * 0.3
    pos, _, _ = point_kinematics(dyn, q, np.zeros(m.nv), bodies, points)
    q[BASE_Z[name]] += CONTACT.ground_height - depth - pos[:, 2].min()
    return q, v


CONTACT = ContactModel(stiffness=8e4, damping=600.0, friction=0.7, static_friction=0.9, viscous_friction=0.4,
                       slip_velocity=0.05, hunt_crossley=0.3, ground_height=0.02)


@pytest.mark.parametrize("name", ["box", "planar_biped", "spatial_quadruped"])
def test_forces_and_wrenches_match_the_law_and_the_jacobian_transpose(name):
    model, bodies, points = robot_setup(name)
    dyn = Dynamics(model)
    rng = np.random.default_rng(4)
    loaded = 0
    for trial in range(40):
        q, v = random_state(dyn, rng, name, bodies, points, depth=0.003)
        f_ext, grf, power, spring = compute_contact(dyn, CONTACT, q, v, bodies, points)
        pos, vel, jac = point_kinematics(dyn, q, v, bodies, points)
        expected = contact_law(CONTACT, pos, vel)
        scale = max(1.0, np.abs(expected).max())
        assert np.abs(grf - expected).max() <= 1e-9 * scale, (trial, grf, expected)
        loaded += int(np.count_nonzero(expected[:, 2]))
        # tau^F = sum_c J_c^T F_c, and ID with the wrenches subtracts exactly that (eq. 24).
        a = rng.normal(size=model.nv)
        tau_f = sum(j.T @ f for j, f in zip(jac, grf))
        via_id = dyn.inverse_dynamics(q, v, a) - dyn.inverse_dynamics(q, v, a, f_ext=f_ext)
        assert np.abs(via_id - tau_f).max() <= 1e-9 * max(1.0, np.abs(tau_f).max()), (trial, via_id, tau_f)
        # the wrench rows: the force sum and the moment about each body origin
        for b in set(bodies.tolist()):
            sel = bodies == b
            rot, origin = dyn.frame_placement(q, b)
            assert np.allclose(f_ext[b, 3:6], grf[sel].sum(axis=0), rtol=0, atol=1e-9 * scale)
            moment = sum(np.cross(p - origin, f) for p, f in zip(pos[sel], grf[sel]))
            assert np.allclose(f_ext[b, 0:3], moment, rtol=0, atol=1e-9 * scale)
        others = np.setdiff1d(np.arange(model.nbodies), bodies)
        assert np.all(f_ext[others] == 0.0)
        # the dissipated power: -(sum F . v_P) - dE_s/dt, with dE_s/dt = sum k delta delta_dot
        depth = np.maximum(CONTACT.ground_height - pos[:, 2], 0.0)
        spring_rate = np.sum(CONTACT.stiffness * depth * (-vel[:, 2]))
        assert power == pytest.approx(-np.sum(grf * vel) - spring_rate, rel=1e-9, abs=1e-9)
        assert power >= 0.0
        assert spring == pytest.approx(0.5 * CONTACT.stiffness * np.sum(depth ** 2), rel=1e-12)
    assert loaded >= 25  # the states exercise loaded contacts


def state_of_puck(depth, velocity):
    model, bodies, points = puck_model()
    q = model.neutral_configuration()
    q[2] = -depth
    v = np.zeros(6)
    v[0:3] = velocity
    return Dynamics(model), q, v, bodies, points


def test_no_pull_and_no_force_above_the_ground():
    cm = ContactModel()
    dyn, q, v, b, p = state_of_puck(-1e-4, (0.3, 0.0, -1.0))  # 0.1 mm above, moving down fast
    assert np.all(compute_contact(dyn, cm, q, v, b, p)[1] == 0.0)
    depth = 1e-3
    release = cm.stiffness * depth / cm.damping  # separating faster than this: the dashpot would pull
    for up, loaded in ((0.9 * release, True), (1.1 * release, False), (10 * release, False)):
        dyn, q, v, b, p = state_of_puck(depth, (0.5, 0.2, up))
        f_ext, grf, power, spring = compute_contact(dyn, cm, q, v, b, p)
        if loaded:
            assert grf[0, 2] == pytest.approx(cm.stiffness * depth - cm.damping * up, rel=1e-12)
            assert grf[0, 2] > 0
        else:
            assert np.all(grf == 0.0) and np.all(f_ext == 0.0)
            assert power == pytest.approx(cm.stiffness * depth * up, rel=1e-12)  # the spring's energy is lost
        assert spring == pytest.approx(0.5 * cm.stiffness * depth ** 2, rel=1e-12)


@pytest.mark.parametrize("direction", [(1.0, 0.0), (0.6, -0.8), (-0.28, 0.96)])
def test_friction_opposes_slip_and_saturates_at_mu(direction):
    cm = ContactModel(friction=0.6, static_friction=0.6)
    depth = 5e-4
    fn = cm.stiffness * depth
    d = np.array(direction)
    for speed in (1e-4, 0.01, 0.05, 0.2, 2.0):
        dyn, q, v, b, p = state_of_puck(depth, (speed * d[0], speed * d[1], 0.0))
        grf = compute_contact(dyn, cm, q, v, b, p)[1][0]
        assert grf[2] == pytest.approx(fn, rel=1e-12)
        ft = grf[:2]
        assert np.dot(ft, d) < 0 and abs(ft[0] * d[1] - ft[1] * d[0]) <= 1e-12 * np.linalg.norm(ft)  # antiparallel to slip
        assert np.linalg.norm(ft) == pytest.approx(fn * cm.friction_coefficient(speed), rel=1e-12)
        assert np.linalg.norm(ft) <= cm.friction * fn * (1 + 1e-12)
    # sliding faster than the transition velocity: Coulomb friction mu F_n (tanh(4 s) within 1e-3)
    assert cm.friction_coefficient(cm.slip_velocity) == pytest.approx(cm.friction, rel=1e-3)
    assert cm.friction_coefficient(2.0) == pytest.approx(cm.friction, rel=1e-12)


def test_stiction_peak_and_viscous_term():
    cm = ContactModel(friction=0.5, static_friction=0.9, slip_velocity=0.04)
    speeds = np.linspace(0.0, 1.0, 200001)
    mu = cm.friction_coefficient(speeds)
    peak = speeds[np.argmax(mu)]
    assert peak == pytest.approx(cm.slip_velocity, rel=1e-2)  # the Coulomb ramp moves it by 0.4 %
    assert mu.max() == pytest.approx(0.9, rel=1e-3)
    assert mu[-1] == pytest.approx(0.5, rel=2e-3)  # the Stribeck bump has decayed at 25 v_s
    assert mu[0] == 0.0 and np.all(np.diff(mu[: np.argmax(mu)]) > 0)
    viscous = ContactModel(friction=0.5, viscous_friction=0.3)
    assert viscous.friction_coefficient(2.0) == pytest.approx(0.5 + 0.3 * 2.0, rel=1e-12)


def test_ground_height_and_hunt_crossley_damping():
    cm = ContactModel(damping=0.0, hunt_crossley=0.5, ground_height=0.1)
    for depth, rate in ((1e-3, 0.4), (2e-3, -0.1), (0.0, 1.0)):
        model, b, p = puck_model()
        dyn = Dynamics(model)
        q = model.neutral_configuration()
        q[2] = 0.1 - depth
        v = np.zeros(6)
        v[2] = -rate
        grf = compute_contact(dyn, cm, q, v, b, p)[1][0]
        expected = max(0.0, cm.stiffness * depth * (1 + 1.5 * 0.5 * rate)) if depth > 0 else 0.0
        assert grf[2] == pytest.approx(expected, rel=1e-12, abs=1e-12)  # vanishes at first touch


def test_pack_layout():
    cm = ContactModel(stiffness=2e4, damping=50.0, friction=0.4, static_friction=0.7, viscous_friction=0.1,
                      slip_velocity=0.02, ground_height=-0.3, hunt_crossley=0.2)
    packed = cm.pack()
    assert packed.shape == (NPARAMS,) and packed.dtype == np.float64
    expected = {P_STIFFNESS: 2e4, P_DAMPING: 50.0, P_FRICTION: 0.4, P_STATIC_FRICTION: 0.7,
                P_VISCOUS_FRICTION: 0.1, P_SLIP_VELOCITY: 0.02, P_GROUND_HEIGHT: -0.3, P_HUNT_CROSSLEY: 0.2}
    for index, value in expected.items():
        assert packed[index] == value
    assert ContactModel(friction=0.3).static_friction == 0.3


@pytest.mark.parametrize("kwargs, field", [
    ({"stiffness": 0.0}, "stiffness"), ({"stiffness": -1e5}, "stiffness"), ({"damping": -1.0}, "damping"),
    ({"friction": -0.1}, "friction"), ({"friction": 0.8, "static_friction": 0.5}, "static_friction"),
    ({"viscous_friction": -0.2}, "viscous_friction"), ({"slip_velocity": 0.0}, "slip_velocity"),
    ({"ground_height": float("nan")}, "ground_height"), ({"stiffness": "hard"}, "stiffness"),
    ({"hunt_crossley": -0.5}, "hunt_crossley"), ({"damping": True}, "damping"),
])
def test_bad_parameters_raise(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ContactModel(**kwargs)


def test_bad_contact_points_raise():
    model, bodies, points = box_model()
    with pytest.raises(ValueError, match="out of range"):
        check_contact_points(model, [0, 1], points[:2])
    with pytest.raises(ValueError, match="contact_points"):
        check_contact_points(model, bodies, points[:, :2])
    with pytest.raises(ValueError, match="contact_points"):
        check_contact_points(model, [0], [[0.0, np.inf, 0.0]])
    with pytest.raises(ValueError, match="contact_bodies"):
        check_contact_points(model, [0.5], [[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="contact_bodies"):
        check_contact_points(model, [], np.zeros((0, 3)))
    dyn = Dynamics(model)
    with pytest.raises(ValueError, match="q"):
        compute_contact(dyn, ContactModel(), np.full(model.nq, np.nan), np.zeros(model.nv), bodies, points)
