"""Physical and numerical truths of the rigid-body plant (plants/rigid_body.py).

* unforced, frictionless RK4 at 1 ms conserves energy: drift < 1e-7 of (kinetic + m g 1 m) over 1 s;
* viscous + Coulomb joint friction never adds energy (step to step, 1e-9 relative) and removes some;
* joint friction is internal: a falling free-flyer's centre of mass stays ballistic (1e-9 m);
* RK4 at 1 ms matches the DOP853 reference (rtol = atol = 1e-12) to 1e-6 after 0.5 s of sinusoidal
  torques; semi-implicit Euler converges at first order (error ratio for dt, dt/2 in [1.6, 2.4]);
* the free-flyer quaternion stays unit norm (1e-12) and, without gravity, world momentum is constant
  (1e-9 relative), friction included;
* substeps = 4 at dt equals 4 steps at dt / 4 (1e-12);
* the registry, parameter validation, bad efforts and singular models raise ValueError with clear
  messages, leaving the state unchanged;
* the step kernel allocates nothing per call.

The torques in the reference comparisons are sampled by a 100 Hz controller and held (zero-order
hold), as a plant sees them; the offline reference integrates the same held torques, so the
comparison measures integration error only.
"""
import textwrap

import numpy as np
import pytest

from rtctl.plants import Plant, create_plant
from rtctl.plants.rigid_body import RigidBodyPlant
from rtctl import bundled_model_path
from rtctl.dynamics import Dynamics
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf

from allocation_counter import run_with_allocation_counters

MODELS = {"arm7": None, "quadruped12": "free_flyer", "humanoid": "free_flyer"}
G = 9.81


def load(name):
    return load_urdf(bundled_model_path(name), MODELS[name])


def total_energy(plant):
    return sum(plant.energy())


def energy_scale(plant):
    """Kinetic energy + m g (1 m): the energy a 1 m drop of the whole robot would release, plus motion."""
    return plant.energy()[0] + plant.model.total_mass * G * 1.0


def world_momentum(dyn, q, v):
    """Total [linear; angular about the world origin] momentum in world axes (from the base rows of M v)."""
    rot, pos = dyn.forward_kinematics(q)
    h = dyn.mass_matrix(q) @ v
    lin = rot[0] @ h[0:3]
    ang = rot[0] @ h[3:6] + np.cross(pos[0], lin)
    return np.concatenate([lin, ang])


@pytest.mark.parametrize("name", ["arm7", "quadruped12"])
def test_rk4_conserves_energy_without_friction(name):
    plant = RigidBodyPlant(load(name), RigidBodyPlant.Options(end_stops=False))  # the integrator alone: stops dissipate
    rng = np.random.default_rng(5)
    plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
    e0, scale = total_energy(plant), energy_scale(plant)
    effort = np.zeros(plant.nv)
    drift = 0.0
    for _ in range(1000):
        plant.step(1e-3, effort)
        drift = max(drift, abs(total_energy(plant) - e0))
    assert plant.t == pytest.approx(1.0, abs=1e-12)
    assert drift / scale < 1e-7


@pytest.mark.parametrize("name", ["arm7", "quadruped12", "humanoid"])
def test_friction_never_adds_energy(name):
    """RK4 (whose own energy error is ~1e-12 per step) resolves the dissipation v^T tau_friction <= 0."""
    plant = RigidBodyPlant(load(name), RigidBodyPlant.Options(viscous_friction=0.05, coulomb_friction=0.02,
                                                              coulomb_velocity_scale=0.05, end_stops=False))
    rng = np.random.default_rng(8)
    plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
    scale = energy_scale(plant)
    effort = np.zeros(plant.nv)
    energies = [total_energy(plant)]
    for _ in range(1000):
        plant.step(1e-3, effort)
        energies.append(total_energy(plant))
    increases = np.diff(energies)
    assert increases.max() <= 1e-9 * scale
    assert energies[0] - energies[-1] > 1e-3 * scale


def test_joint_friction_does_not_act_on_the_floating_base():
    """Friction is internal to the robot: a falling quadruped's centre of mass follows p0 + v0 t - g t^2 / 2."""
    plant = RigidBodyPlant(load("quadruped12"), RigidBodyPlant.Options(
        viscous_friction=0.5, coulomb_friction=0.05, coulomb_velocity_scale=0.1, substeps=2))
    rng = np.random.default_rng(9)
    plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
    dyn = plant.dynamics
    c0 = dyn.center_of_mass(plant.q)
    rot, _ = dyn.forward_kinematics(plant.q)
    cdot0 = rot[0] @ (dyn.mass_matrix(plant.q) @ plant.v)[0:3] / plant.model.total_mass
    effort = np.zeros(plant.nv)
    for _ in range(300):
        plant.step(1e-3, effort)
    t = plant.t
    expected = c0 + cdot0 * t + 0.5 * plant.model.gravity * t * t
    assert np.abs(dyn.center_of_mass(plant.q) - expected).max() < 1e-9


CONTROL_PERIOD = 0.01
DURATION = 0.5


@pytest.fixture(scope="module", params=["arm7", "quadruped12"])
def reference(request):
    """A model, a start state, held sinusoidal torques and the DOP853 solution after 0.5 s."""
    model = load(request.param)
    base = RigidBodyPlant(model, RigidBodyPlant.Options(viscous_friction=0.02, end_stops=False))  # integrator accuracy
    rng = np.random.default_rng(2)
    q0, v0 = model.random_configuration(rng, span=1.0), 0.1 * rng.normal(size=model.nv)
    base.reset(q0, v0)
    dyn = base.dynamics
    offset = dyn.gravity_forces(q0).copy()
    amplitude = 2.0 * np.diag(dyn.mass_matrix(q0))
    if model.has_free_flyer:
        offset[:6] = amplitude[:6] = 0.0
    omega = 2 * np.pi * np.linspace(1.0, 3.0, model.nv)

    def held_effort(t):
        """Torques of a 100 Hz controller: the sinusoid sampled at the last control instant."""
        tk = CONTROL_PERIOD * np.floor(t / CONTROL_PERIOD + 1e-9)
        return offset + amplitude * np.sin(omega * tk)

    t, q_ref, v_ref = base.simulate_offline(DURATION, lambda t, q, v: held_effort(t), rtol=1e-12, atol=1e-12,
                                            t_eval=[0.25, DURATION])
    assert np.array_equal(base.q, q0) and np.array_equal(base.v, v0) and base.t == 0.0
    assert np.allclose(t, [0.25, DURATION], rtol=0, atol=1e-15)
    return model, q0, v0, held_effort, q_ref[-1], v_ref[-1]


def run_fixed_step(model, q0, v0, held_effort, integrator, dt):
    plant = RigidBodyPlant(model, RigidBodyPlant.Options(integrator=integrator, viscous_friction=0.02, end_stops=False))
    plant.reset(q0, v0)
    n = round(DURATION / dt)
    for k in range(n):
        plant.step(dt, held_effort(k * dt))
    return plant


@pytest.mark.slow
def test_rk4_matches_offline_reference(reference):
    model, q0, v0, held_effort, q_ref, v_ref = reference
    plant = run_fixed_step(model, q0, v0, held_effort, "rk4", 1e-3)
    assert np.abs(plant.q - q0).max() > 0.1
    assert np.abs(plant.q - q_ref).max() < 1e-6
    assert np.abs(plant.v - v_ref).max() < 1e-5


def test_semi_implicit_euler_converges_at_first_order(reference):
    model, q0, v0, held_effort, q_ref, _ = reference
    errors = [np.linalg.norm(run_fixed_step(model, q0, v0, held_effort, "semi_implicit_euler", dt).q - q_ref)
              for dt in (1e-3, 0.5e-3)]
    assert 1.6 < errors[0] / errors[1] < 2.4


def test_rosenbrock_converges_at_third_order_to_the_reference(reference):
    """ROS34PW2 keeps its order with the friction-only Jacobian (a W-method: any Jacobian will do). At 1 ms
    it is 4.7e-8 rad off after 0.5 s on the arm and 1.7e-5 rad on the quadruped, whose base tumbles at up
    to 13 rad/s (RK4: 1.1e-10 and 7.9e-9)."""
    model, q0, v0, held_effort, q_ref, _ = reference
    errors = [np.abs(run_fixed_step(model, q0, v0, held_effort, "rosenbrock", dt).q - q_ref).max()
              for dt in (1e-3, 0.5e-3)]
    assert errors[0] < 1e-4
    assert 6.4 < errors[0] / errors[1] < 9.6, errors


def test_simulate_offline_returns_unit_quaternions_and_checks_effort():
    plant = RigidBodyPlant(load("quadruped12"))
    rng = np.random.default_rng(3)
    plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
    t, q, v = plant.simulate_offline(0.05, lambda t, q, v: np.zeros(plant.nv), rtol=1e-6, atol=1e-6)
    assert q.shape == (t.size, plant.nq) and v.shape == (t.size, plant.nv) and t[-1] == pytest.approx(0.05)
    assert np.abs(np.linalg.norm(q[:, 3:7], axis=1) - 1.0).max() < 1e-14
    with pytest.raises(ValueError, match="effort_fn must return 18 values"):
        plant.simulate_offline(0.01, lambda t, q, v: np.zeros(3))
    with pytest.raises(ValueError, match="duration"):
        plant.simulate_offline(-1.0, lambda t, q, v: np.zeros(plant.nv))


@pytest.mark.parametrize("integrator", ["rk4", "semi_implicit_euler"])
def test_free_flyer_quaternion_stays_unit(integrator):
    plant = RigidBodyPlant(load("quadruped12"), RigidBodyPlant.Options(integrator=integrator))
    rng = np.random.default_rng(4)
    plant.reset(plant.model.random_configuration(rng), 3.0 * rng.normal(size=plant.nv))
    effort = np.zeros(plant.nv)
    worst = 0.0
    for _ in range(1000):
        plant.step(1e-3, effort)
        worst = max(worst, abs(np.linalg.norm(plant.q[3:7]) - 1.0))
    assert worst < 1e-12


@pytest.mark.parametrize("integrator, tolerance", [("rk4", 1e-9), ("rosenbrock", 1e-8)])
def test_free_flyer_in_zero_gravity_conserves_momentum_with_joint_friction(integrator, tolerance):
    """Momentum is not linear in (q, v): it is kept to the integration error, 1.1e-9 relative for the
    third-order Rosenbrock-W method, 10x below its bound."""
    model = load("humanoid")
    model.set_gravity([0, 0, 0])
    # friction alone on the base (the stops' stiffness costs accuracy)
    plant = RigidBodyPlant(model, RigidBodyPlant.Options(integrator=integrator, viscous_friction=0.1,
                                                         coulomb_friction=0.01, coulomb_velocity_scale=0.1,
                                                         end_stops=False))
    rng = np.random.default_rng(6)
    plant.reset(model.random_configuration(rng), rng.normal(size=model.nv))
    dyn = Dynamics(model)
    p0 = world_momentum(dyn, plant.q, plant.v)
    e0 = plant.energy()[0]
    effort = np.zeros(model.nv)
    for _ in range(300):
        plant.step(1e-3, effort)
    assert np.abs(world_momentum(dyn, plant.q, plant.v) - p0).max() < tolerance * max(1.0, np.abs(p0).max())
    assert plant.energy()[0] < e0


@pytest.mark.parametrize("name", ["arm7", "quadruped12"])
@pytest.mark.parametrize("integrator", ["rk4", "semi_implicit_euler"])
def test_substeps_equal_smaller_steps(name, integrator):
    model = load(name)
    rng = np.random.default_rng(10)
    q0, v0 = model.random_configuration(rng), rng.normal(size=model.nv)
    effort = rng.normal(size=model.nv)
    options = dict(integrator=integrator, viscous_friction=0.1, coulomb_friction=0.05, coulomb_velocity_scale=0.1)
    coarse = RigidBodyPlant(model, RigidBodyPlant.Options(substeps=4, **options))
    fine = RigidBodyPlant(model, RigidBodyPlant.Options(**options))
    coarse.reset(q0, v0)
    fine.reset(q0, v0)
    dt = 2e-3
    for _ in range(25):
        coarse.step(dt, effort)
        for _ in range(4):
            fine.step(dt / 4, effort)
    assert np.abs(coarse.q - fine.q).max() < 1e-12
    assert np.abs(coarse.v - fine.v).max() < 1e-12
    assert coarse.t == pytest.approx(fine.t, abs=1e-12)


def test_create_plant_by_name_and_parameters_round_trip():
    model = load("quadruped12")
    plant = create_plant("rigid_body", model, integrator="rk4", viscous_friction=np.full(model.nv, 0.3),
                         coulomb_friction=0.1, substeps=3, mass_scale=1.2)
    assert isinstance(plant, RigidBodyPlant) and isinstance(plant, Plant) and plant.name == "rigid_body"
    params = plant.parameters()
    assert params == {"integrator": "rk4", "substeps": 3, "viscous_friction": [0.3] * model.nv,
                      "coulomb_friction": 0.1, "coulomb_velocity_scale": 1e-3, "mass_scale": 1.2,
                      "payload_mass": 0.0, "payload_frame": None, "payload_offset": None, "end_stops": True}
    again = create_plant("rigid_body", model, **params)
    assert again.parameters() == params
    assert again.model.total_mass == pytest.approx(1.2 * model.total_mass, rel=1e-15)
    assert model.total_mass == load("quadruped12").total_mass      # the caller's model is not scaled
    v = np.ones(model.nv)
    assert np.array_equal(plant.friction_forces(v)[:6], np.zeros(6))
    assert np.allclose(plant.friction_forces(v)[6:], -0.3 - 0.1 * np.tanh(1e3), rtol=1e-15)


def test_unknown_plant_name_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"unknown plant 'rigid'.*'rigid_body'"):
        create_plant("rigid", load("arm7"))


@pytest.mark.parametrize("options,message", [   # the Options' own line, or the plant's for what needs the model
    (dict(integrator="euler"), r"^RigidBodyPlant.Options integrator: must be one of \['rk4', 'semi_implicit_euler', "
                               r"'rosenbrock'\], got 'euler'$"),
    (dict(substeps=0), r"^RigidBodyPlant.Options substeps: must be >= 1, got 0$"),
    (dict(substeps=2.5), r"^RigidBodyPlant.Options substeps: expected an integer, got 2.5$"),
    (dict(viscous_friction=-0.1), r"^RigidBodyPlant.Options viscous_friction\[0\]: must be >= 0.0, got -0.1$"),
    (dict(coulomb_friction=float("nan")), r"^RigidBodyPlant.Options coulomb_friction\[0\]: must be finite, got nan$"),
    (dict(viscous_friction=[0.1, 0.2]), r"viscous_friction must be a scalar or 7 per-DOF values.*got 2 values"),
    (dict(coulomb_friction="high"), r"^RigidBodyPlant.Options coulomb_friction\[0\]: expected a number, got 'high'$"),
    (dict(coulomb_velocity_scale=0.0), r"^RigidBodyPlant.Options coulomb_velocity_scale: must be > 0, got 0.0$"),
])
def test_bad_parameters_raise_naming_parameter_and_value(options, message):
    with pytest.raises(ValueError, match=message):
        create_plant("rigid_body", load("arm7"), **options)


def test_bad_efforts_and_steps_raise_and_leave_the_state_unchanged():
    plant = RigidBodyPlant(load("arm7"))
    rng = np.random.default_rng(11)
    plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
    plant.step(1e-3, np.zeros(plant.nv))
    state = (plant.q.copy(), plant.v.copy(), plant.t)
    bad = np.zeros(plant.nv)
    bad[2] = np.nan
    cases = [
        (dict(dt=1e-3, effort=bad), r"^effort contains NaN or inf"),
        (dict(dt=1e-3, effort=np.full(plant.nv, np.inf)), r"^effort contains NaN or inf"),
        (dict(dt=1e-3, effort=np.zeros(3)), r"^effort must have shape \(7,\), got \(3,\)"),
        (dict(dt=1e-3, effort=["a"] * 7), r"^effort must be a numeric vector of length nv = 7"),
        (dict(dt=0.0, effort=np.zeros(7)), r"^dt must be a finite time step > 0 s, got 0.0"),
        (dict(dt=float("nan"), effort=np.zeros(7)), r"^dt must be a finite time step > 0 s, got nan"),
        (dict(dt=1e-3, effort=np.full(7, 1e300)), r"^rigid_body plant \('arm7'\): a step of 0.001 s left NaN or inf "
                                                  r"at joint 'joint7': a torque of 1e\+300 N m \(mostly effort"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            plant.step(**kwargs)
        assert np.array_equal(plant.q, state[0]) and np.array_equal(plant.v, state[1]) and plant.t == state[2]
    plant.step(1e-3, [0.0] * 7)
    assert plant.t == pytest.approx(state[2] + 1e-3)


def test_singular_inertia_raises():
    builder = ModelBuilder("massless_tip")
    builder.add_body("link", -1, "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5),
                     inertia=np.diag([0.1, 0.1, 0.01]))
    builder.add_body("tip", "link", "revolute", axis=(0, 1, 0), translation=(0, 0, -1))
    plant = RigidBodyPlant(builder.build())
    with pytest.raises(ValueError, match="singular inertia"):
        plant.step(1e-3, np.zeros(2))
    assert plant.t == 0.0


ALLOCATION_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.plants.rigid_body import RK4, ROSENBROCK, SEMI_IMPLICIT_EULER, STOP_ROWS, RigidBodyPlant, _step_kernel
    from rtctl import bundled_model_path
    from rtctl.model.urdf import load_urdf

    @njit
    def cycles(n, mi, mf, ws, q, v, effort, method, viscous, coulomb, work, stops, stribeck):
        bad = 0
        for _ in range(n):
            bad += _step_kernel(mi, mf, ws, q, v, effort, 1e-4, 2, method, viscous, coulomb, 0.05, work, stops,
                                stribeck)
        return bad

    for name, base in (("arm7", None), ("humanoid", "free_flyer")):
        plant = RigidBodyPlant(load_urdf(bundled_model_path(name), base),
                               RigidBodyPlant.Options(viscous_friction=0.1, coulomb_friction=0.05))
        rng = np.random.default_rng(0)
        plant.reset(plant.model.random_configuration(rng), rng.normal(size=plant.nv))
        d = plant.dynamics
        for method in (RK4, SEMI_IMPLICIT_EULER, ROSENBROCK):
            args = (d.mi, d.mf, d.ws, plant.q, plant.v, np.zeros(plant.nv), method, plant._viscous,
                    plant._coulomb, plant._work, plant._stops, plant._stribeck)
            assert cycles(1, *args) == 0  # compile
            counts = allocations(cycles, *args)
            print(name, method, "allocations for 1 and 300 steps:", counts)
            assert counts[0] == counts[1], (name, method, counts)
    print("OK")
""")


@pytest.mark.slow
def test_step_kernel_allocates_nothing_per_call():
    out = run_with_allocation_counters(ALLOCATION_SCRIPT)
    assert out.strip().endswith("OK")


def test_end_stop_holds_the_joint_beyond_its_limit_by_effort_over_stiffness():
    """A joint pressed into its upper end stop by a constant torque tau (on top of gravity compensation)
    settles at upper + tau / k, k the stop's stiffness."""
    model = load("arm7")
    model.set_armature(np.full(model.nv, 0.05))  # the demo's geared motors
    plant = RigidBodyPlant(model, RigidBodyPlant.Options(substeps=4))
    dyn = plant.dynamics
    joint = 3  # joint4: 110 N m effort limit, upper 2.09 rad
    q = model.neutral_configuration()
    q[joint] = model.upper[joint] - 0.05
    plant.reset(q)
    push = np.zeros(model.nv)
    push[joint] = 30.0
    others = np.arange(model.nv) != joint
    for _ in range(3000):  # 3 s: the damped stop settles; the other joints held by PD on gravity compensation
        effort = push + dyn.inverse_dynamics(plant.q, np.zeros(model.nv), np.zeros(model.nv))
        effort[others] += 400.0 * (q[others] - plant.q[others]) - 40.0 * plant.v[others]
        plant.step(1e-3, effort)
    k = plant._stops[4, list(plant._stops[0]).index(joint)]
    assert 0 < k <= model.effort_limit[joint] / 0.01
    assert abs(plant.v).max() < 1e-6
    assert plant.q[joint] - model.upper[joint] == pytest.approx(push[joint] / k, rel=1e-3)


def test_end_stops_only_ever_take_energy_out():
    """Kinetic + potential + the stops' spring energy never increases when an unforced arm falls into them."""
    plant = RigidBodyPlant(load("arm7"), RigidBodyPlant.Options(substeps=4))
    model = plant.model
    stops = plant._stops
    rng = np.random.default_rng(3)
    plant.reset(model.random_configuration(rng), 3.0 * rng.normal(size=model.nv))

    def stored():
        q = plant.q[stops[0].astype(int)]
        beyond = np.maximum(q - stops[3], 0.0) + np.maximum(stops[2] - q, 0.0)
        return 0.5 * float(np.sum(stops[4] * beyond ** 2))

    energies = [total_energy(plant) + stored()]
    touched = 0
    for _ in range(2000):
        plant.step(1e-3, np.zeros(model.nv))
        energies.append(total_energy(plant) + stored())
        touched += stored() > 0
    assert touched > 0, "the fall never reached an end stop: the test proves nothing"
    assert np.diff(energies).max() <= 1e-6 * energy_scale(plant)
    lower, upper = model.lower[stops[0].astype(int)], model.upper[stops[0].astype(int)]
    q = plant.q[stops[0].astype(int)]
    assert np.all(q > lower - 0.2) and np.all(q < upper + 0.2)
