"""Physical and numerical truths of the legged plant (plants/legged/plant.py) on the compliant ground.

* standing still, the summed vertical ground reaction equals the weight within 1 %: a box on its corners,
  the planar biped on both feet and the spatial quadruped on four feet (joints held by a 1 kHz PD), with
  the load shared symmetrically and no net horizontal force;
* contact dissipates energy and never creates it: after drops with impacts, bounces and sliding, the total
  energy (kinetic + gravity + contact springs) never increases, step to step at 1 kHz and along the BDF
  solution, and the energy accounts balance (BDF 1e-5 of the initial energy, fixed step 3 % of the
  dissipated energy: the trapezoidal rule across touch-downs);
* a block sliding on the ground decelerates at mu g (1 %) and stops after v0^2 / (2 mu g) (2 %);
* the fixed-step integrators (semi-implicit Euler with 8 sub-steps, RK4 with 4, at 1 ms) follow the BDF
  reference (rtol 1e-8) within 0.5 mm over a quadruped's drop and settle and 2.5 mm (semi-implicit) or
  0.5 mm (RK4) over a tumbling box's impacts;
* the O(n) and O(n^3) forward dynamics give the same trajectory (1e-9); sub-steps equal shorter steps;
* the compiled step allocates nothing; bad settings and inputs raise ValueError, leaving the state unchanged;
* the run config builds the plant with its [contact] section; without one (or without its stiffness and
  damping) the plant stands on the ground of Shah, Saha & Dutt (2012), k = 1e6 N/m, d = 5000 N s/m.

The default ground is stiff: at 1 kHz the standing biped settles on it only from 48 semi-implicit Euler (32
RK4) sub-steps -- its 0.2 kg feet rocking on the heel and toe dashpots are the fastest mode -- and the
quadruped from 8 (4); its walks run at 10 kHz (benchmarks/legged.py prints the sweep). The tests of the
plant's numerics at its default 1 kHz x 8 sub-steps therefore run on the softer 1e5 / 500 ground (``SOFT``),
on which both robots settle from 8 (4) sub-steps.
"""
import textwrap

import numpy as np
import pytest

from rtctl.plants import create_plant
from rtctl.plants.legged.plant import PAPER_GROUND, ContactOptions, LeggedPlant
from rtctl.dynamics.contact import ContactModel
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.model import ModelBuilder
from rtctl.rt.interfaces import actuated_indices

from allocation_counter import run_with_allocation_counters

G = 9.81
DT = 1e-3
SOFT = ContactModel(stiffness=1e5, damping=500.0)  # the ground of the 1 kHz tests (module docstring)


def box_model(mass=10.0, size=(0.4, 0.3, 0.2)):
    """A free-flying box with contact points on its 8 corners (bottom ones first)."""
    b = ModelBuilder("box")
    a, w, h = size
    b.add_body("box", -1, "free_flyer", mass=mass,
               inertia=np.diag([w * w + h * h, a * a + h * h, a * a + w * w]) * mass / 12)
    corners = np.array([[sx * a / 2, sy * w / 2, sz * h / 2] for sz in (-1, 1) for sx in (-1, 1) for sy in (-1, 1)])
    return b.build(), np.zeros(8, dtype=np.int64), corners


def box_plant(**options):
    """The box on :data:`SOFT` (its fields as contact_* options if any are given)."""
    model, bodies, points = box_model()
    if "contact" not in options:
        if any(k.startswith("contact_") or k == "ground_height" for k in options):
            options = {"contact_stiffness": SOFT.stiffness, "contact_damping": SOFT.damping, **options}
        else:
            options["contact"] = SOFT
    return create_plant("legged", model, contact_bodies=bodies, contact_points=points, **options)


def tumbling_box_state(plant):
    """Box tilted 0.3 rad about (2, 1, 0), 15 cm above the ground, sliding and spinning."""
    q = plant.model.neutral_configuration()
    axis = np.array([2.0, 1.0, 0.0]) / np.sqrt(5.0)
    q[3:6], q[6] = np.sin(0.15) * axis, np.cos(0.15)
    q[2] = 0.25
    return q, np.array([0.8, 0.0, 0.0, 0.5, -1.0, 2.0])


def total_energy(plant):
    return sum(plant.energy())


def biped_stance(robot, lean=0.07):
    """Straight legs leaning forward by ``lean`` with level feet: the centre of mass over mid-foot."""
    q = robot.model.neutral_configuration()
    q[[3, 6]], q[[5, 8]] = lean, -lean
    return q


def quadruped_stance(robot, bend=0.5):
    """Knees bent (front backwards, hind forwards), feet under the hips."""
    q = robot.model.neutral_configuration()
    for k, (_, pitch, knee) in enumerate(robot.legs.values()):
        sign = 1.0 if k < 2 else -1.0
        q[pitch], q[knee] = sign * bend, -2.0 * sign * bend
    return q


def on_ground(plant, q, height=0.0):
    """``q`` with the base moved so the lowest contact point is ``height`` above the ground."""
    saved = plant.q.copy()
    plant.q[:] = q
    rot, pos = plant.dynamics.forward_kinematics(q)
    plant.q[:] = saved
    z = min(pos[b, 2] + rot[b, 2] @ p for b, p in zip(plant.contact_bodies, plant.contact_points))
    q = q.copy()
    q[2 if plant.model.name != "planar_biped" else 1] += height - z
    return q


def test_box_settles_and_carries_its_weight():
    plant = box_plant()
    q = plant.standing_configuration()
    q[2] += 0.03
    plant.reset(q)
    for _ in range(800):
        plant.step(DT, np.zeros(6))
    weight = 10.0 * G
    grf = plant.ground_reaction
    assert plant.total_ground_reaction[2] == pytest.approx(weight, rel=1e-3)
    assert np.allclose(grf[:4, 2], weight / 4, rtol=1e-2) and np.all(grf[4:] == 0.0)
    assert np.abs(grf[:, :2]).max() < 1e-3 * weight
    assert 0.1 - plant.q[2] == pytest.approx(weight / 4 / plant.contact_model.stiffness, rel=1e-2)


@pytest.mark.parametrize("name, ground, substeps", [("planar_biped", SOFT, 8), ("spatial_quadruped", SOFT, 8),
                                                    ("planar_biped", None, 48), ("spatial_quadruped", None, 8)])
@pytest.mark.slow
def test_robot_standing_on_its_feet_carries_its_weight(name, ground, substeps):
    """On the 1e5 / 500 ground and on the default 1e6 / 5000 one of Shah, Saha & Dutt (2012), 1 kHz."""
    robot = planar_biped() if name == "planar_biped" else spatial_quadruped()
    plant = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=2.0, substeps=substeps), contact=ground)
    stance = biped_stance(robot) if name == "planar_biped" else quadruped_stance(robot)
    q0 = on_ground(plant, stance, height=0.01)
    plant.reset(q0)
    qi, vi, _ = actuated_indices(robot.model)
    effort = np.zeros(robot.model.nv)
    for _ in range(1500):
        effort[vi] = 300.0 * (q0[qi] - plant.q[qi])
        if name == "planar_biped":
            # ankle damping against the shanks' pitch rate (the feet are flat): damps the whole-body sway
            # without acting on the 0.2 kg feet's own fast mode, which a 1 kHz D-term would destabilise
            for hip, knee, ankle in robot.legs.values():
                effort[ankle] += 40.0 * (plant.v[2] + plant.v[hip] + plant.v[knee])
        else:
            effort[vi] -= 5.0 * plant.v[vi]
        plant.step(DT, effort)
    weight = robot.weight
    total = plant.total_ground_reaction
    assert total[2] == pytest.approx(weight, rel=1e-2)
    assert np.abs(total[:2]).max() < 1e-2 * weight
    grf = plant.ground_reaction
    per_foot = np.array([grf[idx, 2].sum() for idx in robot.feet.values()])
    assert np.allclose(per_foot, weight / len(per_foot), rtol=0, atol=1e-2 * weight)  # symmetric stance
    feet_now = plant.dynamics.forward_kinematics(plant.q)[1][robot.contact_bodies]
    feet_start = plant.dynamics.forward_kinematics(q0)[1][robot.contact_bodies]
    assert np.abs(feet_now[:, :2] - feet_start[:, :2]).max() < 1e-3  # the feet stay put (creep < 1 mm)


def test_drop_never_creates_energy_fixed_step():
    for integrator, substeps in (("semi_implicit_euler", 8), ("rk4", 4)):
        plant = box_plant(integrator=integrator, substeps=substeps)
        plant.reset(*tumbling_box_state(plant))
        e0 = total_energy(plant)
        energy = [e0]
        for _ in range(600):
            plant.step(DT, np.zeros(6))
            energy.append(total_energy(plant))
        assert np.diff(energy).max() <= 1e-9 * e0, integrator
        dissipated = plant.dissipated_energy
        assert dissipated > 0.5 * (e0 - 10.0 * G * 0.1)  # most of the drop and spin energy is gone
        assert abs(energy[-1] + dissipated - e0) <= 3e-2 * dissipated, (integrator, energy[-1], dissipated, e0)


def test_quadruped_drop_energy_balance_with_joint_friction_and_effort():
    robot = spatial_quadruped()
    plant = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=2.0, integrator="rk4", substeps=4),
                                                         contact=SOFT)
    q0 = on_ground(plant, quadruped_stance(robot), height=0.02)
    plant.reset(q0)
    effort = np.zeros(robot.model.nv)
    effort[6:] = hold_torques(plant, robot)
    e0 = total_energy(plant)
    previous = e0
    for _ in range(300):
        plant.step(DT, effort)
        account = plant.energy_account
        now = total_energy(plant)
        assert now - account["effort_work"] <= previous + 1e-9 * e0  # only the efforts add energy
        previous = now - account["effort_work"]
    account = plant.energy_account
    assert account["contact"] > 0 and account["joint_friction"] > 0
    lost = account["contact"] + account["joint_friction"]
    assert abs(total_energy(plant) + lost - account["effort_work"] - e0) <= 3e-2 * lost


def hold_torques(plant, robot):
    """Joint torques that hold the crouched stance with the weight shared by the four feet (static ID)."""
    from rtctl.dynamics.contact import compute_contact
    q = on_ground(plant, quadruped_stance(robot), height=-robot.weight / 4 / plant.contact_model.stiffness)
    zero = np.zeros(robot.model.nv)
    f_ext = compute_contact(plant.dynamics, plant.contact_model, q, zero, plant.contact_bodies,
                            plant.contact_points)[0]
    tau = plant.dynamics.inverse_dynamics(q, zero, zero, f_ext=f_ext)
    assert np.abs(tau[:6]).max() < 1e-9 * robot.weight  # the feet alone carry the robot
    return tau[6:].copy()


@pytest.fixture(scope="module")
def box_reference():
    plant = box_plant()
    q, v = tumbling_box_state(plant)
    plant.reset(q, v)
    t, qs, vs, info = plant.simulate_offline(0.5, lambda t, q, v: np.zeros(6), method="BDF", rtol=1e-8,
                                             atol=1e-10, t_eval=np.arange(501) * DT)
    return plant, (q, v), qs, vs, info


@pytest.mark.slow
def test_drop_never_creates_energy_bdf(box_reference):
    plant, (q0, v0), qs, vs, info = box_reference
    plant.reset(q0, v0)
    e0 = total_energy(plant)
    energy = []
    for q, v in zip(qs, vs):
        plant.q[:], plant.v[:] = q, v
        energy.append(total_energy(plant))
    energy = np.array(energy)
    assert np.diff(energy).max() <= 1e-7 * e0
    assert e0 - energy[-1] > 10.0  # J: the drop and the spin were dissipated
    assert np.all(np.diff(info["contact"]) >= -1e-8 * e0)  # dense-output interpolation error only
    assert np.abs(energy + info["contact"] - e0).max() <= 1e-5 * e0
    assert np.all(info["effort_work"] == 0.0) and np.all(info["joint_friction"] == 0.0)


@pytest.mark.parametrize("integrator, substeps, tolerance", [("semi_implicit_euler", 8, 2.5e-3), ("rk4", 4, 5e-4)])
def test_fixed_step_follows_bdf_through_box_impacts(box_reference, integrator, substeps, tolerance):
    _, (q0, v0), qs, _, _ = box_reference
    plant = box_plant(integrator=integrator, substeps=substeps)
    plant.reset(q0, v0)
    worst = 0.0
    for k in range(1, 501):
        plant.step(DT, np.zeros(6))
        worst = max(worst, np.abs(plant.q[:3] - qs[k, :3]).max())
    assert worst < tolerance


@pytest.mark.parametrize("method", ["BDF", "LSODA"])
def test_fixed_step_follows_stiff_solver_through_quadruped_drop(method):
    robot = spatial_quadruped()
    plant = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=2.0), contact=SOFT)
    q0 = on_ground(plant, quadruped_stance(robot), height=0.02)
    effort = np.zeros(robot.model.nv)
    effort[6:] = hold_torques(plant, robot)
    plant.reset(q0)
    _, ref, _, info = plant.simulate_offline(0.3, lambda t, q, v: effort, method=method, rtol=1e-8, atol=1e-10,
                                             t_eval=np.arange(301) * DT)
    assert np.array_equal(plant.q, q0) and plant.t == 0.0  # the offline run leaves the plant alone
    for integrator, substeps in (("semi_implicit_euler", 8), ("rk4", 4)):
        fixed = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=2.0, integrator=integrator,
                                                             substeps=substeps), contact=SOFT)
        fixed.reset(q0)
        worst = 0.0
        for k in range(1, 301):
            fixed.step(DT, effort)
            worst = max(worst, np.abs(fixed.q - ref[k]).max())
        assert worst < 5e-4, (integrator, worst)
    assert q0[2] - ref[-1, 2] > 0.015  # it fell onto its feet


def test_aba_and_cholesky_give_the_same_motion():
    robot = planar_biped()
    plants = [LeggedPlant(robot.model, LeggedPlant.Options(forward_dynamics=fd, integrator="rk4", substeps=2),
                                                           contact=SOFT)
              for fd in ("aba", "cholesky")]
    q0 = on_ground(plants[0], biped_stance(robot), height=0.01)
    rng = np.random.default_rng(2)
    efforts = rng.normal(scale=5.0, size=(200, robot.model.nv))
    efforts[:, :3] = 0.0
    for plant in plants:
        plant.reset(q0)
        for effort in efforts:
            plant.step(DT, effort)
    assert np.abs(plants[0].q - plants[1].q).max() < 1e-9
    assert np.abs(plants[0].v - plants[1].v).max() < 1e-7
    assert np.any(plants[0].ground_reaction[:, 2] > 0)


def test_substeps_equal_shorter_steps():
    a = box_plant(integrator="rk4", substeps=4)
    b = box_plant(integrator="rk4", substeps=1)
    for plant in (a, b):
        plant.reset(*tumbling_box_state(plant))
    for _ in range(150):
        a.step(DT, np.zeros(6))
        for _ in range(4):
            b.step(DT / 4, np.zeros(6))
    assert np.abs(a.q - b.q).max() < 1e-12 and np.abs(a.v - b.v).max() < 1e-10
    assert a.dissipated_energy == pytest.approx(b.dissipated_energy, rel=1e-12)
    assert a.t == pytest.approx(b.t, rel=1e-12)


def test_standing_configuration_touches_the_ground():
    for plant in (LeggedPlant(planar_biped().model), LeggedPlant(spatial_quadruped().model),
                  box_plant(ground_height=0.2)):
        low = min(plant.dynamics.frame_placement(plant.q, int(b))[1][2]
                  + (plant.dynamics.frame_placement(plant.q, int(b))[0] @ p)[2]
                  for b, p in zip(plant.contact_bodies, plant.contact_points))
        assert low == pytest.approx(plant.contact_model.ground_height, abs=1e-12)
        assert abs(plant.total_ground_reaction[2]) < 1e-6
        plant.q[0] += 0.1
        plant.reset()
        assert plant.q[0] == 0.0 and plant.energy_account["contact"] == 0.0


ALLOCATION_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.plants.legged.plant import LeggedPlant, _step
    from rtctl.plants.rigid_body import RK4, SEMI_IMPLICIT_EULER
    from rtctl.dynamics.contact import contact_wrenches
    from rtctl.plants.legged.model import planar_biped

    @njit
    def cycles(n, mi, mf, ws, q, v, effort, method, viscous, coulomb, work, contact, energy, f_ext):
        bad = 0
        for _ in range(n):
            bad += _step(mi, mf, ws, q, v, effort, 1e-3, 2, method, viscous, coulomb, 0.05, work, contact, energy)
            contact_wrenches(mi, mf, ws, q, v, contact[0], contact[1], contact[2], f_ext, contact[3])
        return bad

    robot = planar_biped()
    for fd in ("aba", "cholesky"):
        plant = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=1.0, coulomb_friction=0.1,
                                                             forward_dynamics=fd))
        plant.q[1] -= 1e-3
        d = plant.dynamics
        for method in (RK4, SEMI_IMPLICIT_EULER):
            args = (d.mi, d.mf, d.ws, plant.q, plant.v, np.zeros(plant.nv), method, plant._viscous,
                    plant._coulomb, plant._work, plant._contact, plant._energy, np.zeros((robot.model.nbodies, 6)))
            assert cycles(1, *args) == 0  # compile
            counts = allocations(cycles, *args)
            print(fd, method, "allocations for 1 and 300 steps:", counts)
            assert counts[0] == counts[1], (fd, method, counts)
    print("OK")
""")


@pytest.mark.slow
def test_step_kernel_allocates_nothing_per_call():
    out = run_with_allocation_counters(ALLOCATION_SCRIPT)
    assert out.strip().endswith("OK")


def test_bad_settings_raise():
    model, bodies, points = box_model()
    with pytest.raises(ValueError, match="not a built-in legged robot"):
        LeggedPlant(model)
    with pytest.raises(ValueError, match="both contact_bodies and contact_points"):
        LeggedPlant(model, contact_bodies=bodies)
    with pytest.raises(ValueError, match="out of range"):
        LeggedPlant(model, contact_bodies=bodies + 1, contact_points=points)
    with pytest.raises(ValueError, match="forward_dynamics"):
        box_plant(forward_dynamics="featherstone")
    with pytest.raises(ValueError, match="unknown option 'stiffness'"):
        box_plant(stiffness=1e5)
    with pytest.raises(ValueError, match="either contact= or"):
        box_plant(contact=ContactModel(), contact_damping=10.0)
    with pytest.raises(ValueError, match="damping"):
        box_plant(contact_damping=-1.0)
    with pytest.raises(ValueError, match="contact:"):
        box_plant(contact={"stifness": 1e5})
    with pytest.raises(ValueError, match="substeps"):
        box_plant(substeps=0)
    with pytest.raises(ValueError, match="integrator"):
        box_plant(integrator="euler")
    robot = planar_biped()
    other = planar_biped(heel_offset=0.05)
    assert LeggedPlant(robot.model, robot=other).contact_points[0, 0] == pytest.approx(-0.05)


def test_bad_steps_leave_the_state_unchanged():
    plant = LeggedPlant(planar_biped().model)
    plant.q[1] -= 5e-4
    q, v = plant.q.copy(), plant.v.copy()
    cases = [(DT, np.full(9, np.nan), "effort contains NaN"), (DT, np.zeros(8), "effort must have shape"),
             (0.0, np.zeros(9), "dt must be"), ("fast", np.zeros(9), "dt must be"),
             (DT, np.full(9, 1e300), "diverged")]
    for dt, effort, message in cases:
        with pytest.raises(ValueError, match=message):
            plant.step(dt, effort)
        assert np.array_equal(plant.q, q) and np.array_equal(plant.v, v) and plant.t == 0.0
        assert plant.energy_account == {"contact": 0.0, "joint_friction": 0.0, "effort_work": 0.0}
    plant.step(DT, [0.0] * 9)  # a list is converted
    assert plant.t == DT


def test_registry_and_parameters_rebuild_the_plant():
    model, bodies, points = box_model()
    plant = create_plant("legged", model, contact_bodies=bodies, contact_points=points, contact_friction=0.4,
                         substeps=3)
    assert isinstance(plant, LeggedPlant) and plant.contact_model.friction == 0.4
    again = create_plant("legged", model, **plant.parameters())
    assert again.parameters() == plant.parameters()
    assert np.array_equal(again.contact_points, points)


def test_the_default_ground_is_the_papers():
    """Schema, plant and controllers default to the stiff ground of Shah, Saha & Dutt (2012); given fields override
    only themselves."""
    from rtctl.plants.legged.control import LeggedComputedTorque
    from rtctl.dynamics import Dynamics
    assert (PAPER_GROUND.stiffness, PAPER_GROUND.damping) == (1e6, 5000.0)
    assert (ContactOptions().stiffness, ContactOptions().damping) == (1e6, 5000.0)
    robot = spatial_quadruped()
    assert LeggedPlant(robot.model).contact_model == PAPER_GROUND
    assert LeggedComputedTorque(Dynamics(robot.model), LeggedComputedTorque.Options(kp=49.0)).contact == PAPER_GROUND
    half = ContactModel(stiffness=1e6, damping=5000.0, friction=0.5)
    assert LeggedPlant(robot.model, contact_friction=0.5).contact_model == half
    assert LeggedPlant(robot.model, contact={"friction": 0.5}).contact_model == half
    assert half.static_friction == 0.5  # a lower friction is not held up by the default's static friction
    # physically: the quadruped standing still on it sinks weight / (4 k), a tenth of the 1e5 ground's sinking
    plant = LeggedPlant(robot.model, LeggedPlant.Options(viscous_friction=2.0))
    q0 = on_ground(plant, quadruped_stance(robot), height=-robot.weight / 4 / 1e6)
    plant.reset(q0)
    assert plant.total_ground_reaction[2] == pytest.approx(robot.weight, rel=1e-9)


def test_config_builds_the_legged_plant(tmp_path):
    from rtctl.config import ConfigError, build, load_config
    text = textwrap.dedent("""
        [robot]
        model = "spatial_quadruped"
        [plant]
        type = "legged"
        integrator = "rk4"
        substeps = 3
        forward_dynamics = "cholesky"
        viscous_friction = 1.5
        [contact]
        stiffness = 5e4
        damping = 300.0
        friction = 0.6
        static_friction = 0.9
        [controller]
        type = "pd"
        kp = 100.0
        kd = 5.0
        [trajectory]
        type = "min_jerk"
        goal = [0.0, 0.1, -0.2, 0.0, 0.1, -0.2, 0.0, -0.1, 0.2, 0.0, -0.1, 0.2]
        duration = 1.0
        [loop]
        pace = false
        duration = 0.01
    """)
    path = tmp_path / "legged.toml"
    path.write_text(text)
    loop = build(load_config(path))
    plant = loop.driver.plant
    assert isinstance(plant, LeggedPlant)
    assert plant.contact_model == ContactModel(stiffness=5e4, damping=300.0, friction=0.6, static_friction=0.9)
    p = plant.parameters()
    assert (p["integrator"], p["substeps"], p["forward_dynamics"]) == ("rk4", 3, "cholesky")
    assert plant.q[2] == pytest.approx(0.6)  # standing: the feet on the ground
    # without [contact], or with a [contact] that leaves stiffness and damping out: the paper's ground
    path.write_text(text.split("[contact]")[0] + "[controller]" + text.split("[controller]")[1])
    assert build(load_config(path)).driver.plant.contact_model == PAPER_GROUND
    path.write_text(text.replace("stiffness = 5e4\n", "").replace("damping = 300.0\n", ""))
    assert build(load_config(path)).driver.plant.contact_model == ContactModel(
        stiffness=1e6, damping=5000.0, friction=0.6, static_friction=0.9)
    path.write_text(text.replace("damping = 300.0", "damping = -3.0"))
    with pytest.raises(ConfigError, match=r"\[contact\] damping"):
        load_config(path)
    rigid = text.replace('type = "legged"', 'type = "rigid_body"').replace(
        'model = "spatial_quadruped"', 'model = "arm7"').split("[controller]")[0] \
        + '[controller]\ntype = "computed_torque"\n[trajectory]\ngoal = [0.1, 0, 0, 0, 0, 0, 0]\nduration = 1.0\n'
    path.write_text(rigid)
    with pytest.raises(ConfigError, match=r"\[contact\] applies to plant 'legged' only"):
        build(load_config(path))
    path.write_text(rigid.split("[contact]")[0] + "[controller]" + rigid.split("[controller]")[1])
    with pytest.raises(ConfigError, match=r"\[plant\] unknown key 'forward_dynamics' for plant 'rigid_body'"):
        build(load_config(path))
