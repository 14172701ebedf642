"""Jaw-rehabilitation robot (Kalani et al., 2018) in the loop: plant, Gibbs-Appell controllers, closed-loop tracking,
allocation.

The plant integrates the generalized-momentum model of both platforms; the
controllers use the Gibbs-Appell model, so closed-loop tracking also
cross-checks the two formulations. Tolerances are stated per test.
"""
import math
import textwrap

import numpy as np
import pytest

from rtctl.drivers.sim import SimDriver
from rtctl.loops.base import Trajectory
from rtctl.loops.controllers import CONTROLLERS
from rtctl.plants.jaw.control import JawComputedTorque, JawFeedForwardPD
from rtctl.plants import create_plant
from rtctl.plants.jaw.plant import JawPlant
from rtctl.config import validate
from rtctl.dynamics import Dynamics
from rtctl.registry import robot_model as actuator_model
from rtctl.plants.jaw.model import REST_POSE, JawRehabRobot, PatientImpedance
from rtctl.rt.loop import ControlLoop
from rtctl.safety import SafetyMonitor

from allocation_counter import run_with_allocation_counters

BOLUS = dict(bolus_damping=40.0, bolus_force=8.0, bolus_band=(-0.03, 0.01), bolus_edge=2e-3)


@pytest.fixture(scope="module")
def mech():
    return JawRehabRobot()


@pytest.fixture(scope="module")
def model():
    return actuator_model("jaw")


class IncisalMinJerk(Trajectory):
    """Min-jerk move of the incisal point from occlusion to ``goal`` (m) in ``T`` s starting at ``t0`` (and, with
    ``back``, min-jerk back to occlusion in the next ``T`` s), mapped to the robot's legs by
    ``incisal_to_legs`` (what the CPG will do every cycle)."""

    n = 6

    def __init__(self, mech, goal, T, t0=0.1, back=False):
        self.mech, self.goal, self.T, self.t0, self.back = mech, np.asarray(goal, dtype=float), T, t0, back
        self.duration = t0 + (2 if back else 1) * T
        self.p, self.pd, self.pdd = np.zeros(3), np.zeros(3), np.zeros(3)

    def sample(self, t, q, qd, qdd):
        tau = (t - self.t0) / self.T
        sign, offset = 1.0, 0.0
        if self.back and tau > 1.0:
            tau, sign, offset = tau - 1.0, -1.0, 1.0
        s = min(max(tau, 0.0), 1.0)
        np.multiply(self.goal, offset + sign * (10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5), out=self.p)
        np.multiply(self.goal, sign * (30 * s ** 2 - 60 * s ** 3 + 30 * s ** 4) / self.T, out=self.pd)
        np.multiply(self.goal, sign * (60 * s - 180 * s ** 2 + 120 * s ** 3) / self.T ** 2, out=self.pdd)
        status = self.mech.incisal_to_legs(self.p, self.pd, self.pdd, q, qd, qdd)
        if status:
            raise ValueError(f"incisal path leaves the workspace (status {status})")


def run_loop(mech, controller_cls, kp, duration=1.0, goal=(0.0, 0.0, -0.010), back=False, plant_options=None,
             **ctl_options):
    model = actuator_model("jaw")
    plant = create_plant("jaw", model, mechanism=mech, substeps=2, **(plant_options or {}))
    driver = SimDriver(model, plant=plant, period=1e-3)
    ctl = controller_cls(Dynamics(model), controller_cls.Options(kp=kp), mechanism=mech, **ctl_options)
    trajectory = IncisalMinJerk(mech, goal, 0.5, back=back)
    loop = ControlLoop(model=model, drivers=[driver], controller=ctl, trajectory=trajectory,
                       safety=SafetyMonitor(model, position_margin=0.002), pace=False)
    report = loop.run(duration=duration)
    assert not report.tripped, report.trip_reason
    print(f"\n{controller_cls.name}: max leg error {report.tracking_max.max():.3e} m, "
          f"RMS {np.linalg.norm(report.tracking_rms):.3e} m")
    return report, plant, ctl


def test_registrations_and_actuator_model(mech, model):
    assert (model.nq, model.nv) == (6, 6) and model.total_mass == 0.0
    assert np.allclose(model.lower, mech.robot.stroke[0]) and np.allclose(model.upper, mech.robot.stroke[1])
    assert np.allclose(model.effort_limit, mech.robot.force_limit)
    assert CONTROLLERS.get("jaw_ff_pd") is JawFeedForwardPD and CONTROLLERS.get("jaw_computed_torque") is \
        JawComputedTorque
    assert JawComputedTorque.requires_model == JawFeedForwardPD.requires_model == "jaw"
    assert validate({"robot": {"model": "jaw"}, "plant": {"type": "jaw"},
                     "trajectory": {"type": "jaw_cpg"}})["plant"]["type"] == "jaw"
    plant = create_plant("jaw", model)
    assert isinstance(plant, JawPlant) and np.allclose(plant.x, REST_POSE)
    assert np.allclose(plant.q, mech.robot.leg_lengths(REST_POSE), rtol=1e-15)


def test_plant_options_are_validated(model):
    plant = create_plant("jaw", model, stiffness=[100, 100, 200, 1, 1, 1], bolus_force=5.0,
                         bolus_band=[-0.02, -0.002], viscous_friction=2.0)
    assert plant.impedance.stiffness.tolist() == [100, 100, 200, 1, 1, 1] and plant.impedance.bolus_force == 5.0
    assert plant.impedance.damping.tolist() == PatientImpedance().damping.tolist()    # untouched fields: nominal
    assert plant.parameters()["impedance"]["bolus_band"] == [-0.02, -0.002]
    for bad, match in ((dict(stiffness=-5.0), "stiffness"), (dict(damping=[1.0, 2.0]), "damping"),
                       (dict(bolus_band=(0.01, -0.01)), "bolus_band"), (dict(bolus_force=-1.0), "bolus_force"),
                       (dict(bolus_edge=1.0), "bolus_edge"), (dict(viscous_friction=-1.0), "viscous_friction"),
                       (dict(substeps=0), "substeps"), (dict(impedance="soft"), "impedance must be"),
                       (dict(stiffnes=1.0), "stiffnes")):
        with pytest.raises(ValueError, match=match):
            create_plant("jaw", model, **bad)


def test_plant_state_outputs_and_step(mech, model):
    """After a step q, v are the IK of the pose, the jaw legs, incisal point and patient force are those of
    the pose; one 10 us step agrees with the Taylor expansion of the model's forward dynamics (1e-11 m)."""
    plant = JawPlant(model, mechanism=mech, **BOLUS)
    rng = np.random.default_rng(2)
    imp = plant.impedance
    for _ in range(3):
        x, xd = mech.random_pose(rng), rng.normal(size=6) * 0.1
        tau = rng.normal(size=6) * 2.0
        plant.reset_pose(x, xd)
        xdd = mech.forward_dynamics(x, xd, tau, impedance=imp)
        plant.step(1e-5, tau)
        assert np.abs(plant.x - (x + 1e-5 * xd + 0.5e-10 * xdd)).max() < 1e-11
        q, v, _ = mech.leg_motion(plant.x, plant.xd, np.zeros(6))
        assert np.allclose(plant.q, q, rtol=1e-15) and np.allclose(plant.v, v, rtol=1e-12, atol=1e-15)
        assert np.allclose(plant.jaw_leg_lengths, mech.jaw_leg_lengths(plant.x), rtol=1e-15)
        assert np.allclose(plant.incisal, mech.incisal_point(plant.x), atol=1e-16)
        f, rec = mech.patient_force(plant.x, plant.xd, imp)
        assert np.allclose(plant.patient_force, f, rtol=1e-14, atol=1e-14) and plant.bolus_force == rec["bolus_force"]
        assert np.allclose(plant.patient_wrench(), mech.patient_wrench(plant.x, plant.xd, imp))
    x = plant.x.copy()
    with pytest.raises(ValueError, match="NaN"):
        plant.step(1e-3, np.array([np.nan] * 6))
    with pytest.raises(ValueError, match="effort must have shape"):
        plant.step(1e-3, [1.0, 2.0])
    with pytest.raises(ValueError, match="dt"):
        plant.step(-1e-3, np.zeros(6))
    assert np.array_equal(plant.x, x)
    with pytest.raises(ValueError, match="not in the workspace"):
        plant.reset_pose(REST_POSE + [0, 0, 0.06, 0, 0, 0])
    plant.reset(mech.robot.leg_lengths(mech.incisal_pose([0.0, 0.0, -0.01])[0]))
    assert np.allclose(plant.incisal, [0.0, 0.0, -0.01], atol=1e-10)


def test_plant_energy_balance(mech, model):
    """Unforced, frictionless, undamped (stiffness kept): kinetic + gravity + spring energy is conserved
    (RK4, 1 ms, 0.3 s: < 1e-8 J, observed 1.2e-10 J of 1.03 J). With patient damping, a bolus and leg
    forces: E(T) - E(0) equals the work of the leg forces minus the damping and bolus dissipation
    (trapezoidal rule over 0.5 ms steps, < 2e-3 of the dissipated energy, observed 1.2e-4)."""
    plant = JawPlant(model, mechanism=mech, damping=0.0)
    rng = np.random.default_rng(3)
    plant.reset_pose(mech.incisal_pose([0.002, 0.001, -0.008])[0], rng.normal(size=6) * 0.05)
    e0 = sum(plant.energy())
    for _ in range(300):
        plant.step(1e-3, np.zeros(6))
    assert abs(sum(plant.energy()) - e0) < 1e-8
    plant = JawPlant(model, JawPlant.Options(substeps=2), mechanism=mech, **BOLUS)
    x0, xd0, _ = mech.incisal_pose([0.0, 0.0, -0.02], [0.0, 0.0, 0.05])
    plant.reset_pose(x0, xd0)
    hold = mech.inverse_dynamics(x0, np.zeros(6), np.zeros(6), impedance=plant.impedance)
    D = plant.impedance.damping

    def power(tau):
        _, rec = mech.patient_force(plant.x, plant.xd, plant.impedance)
        p_legs = tau @ plant.v
        dissipation = plant.xd @ (D * plant.xd) + rec["bolus_force"] * rec["incisal_velocity_z"]
        return p_legs, dissipation

    dt, e_start = 5e-4, sum(plant.energy())
    work = lost = 0.0
    bolus_steps = 0
    for k in range(600):
        tau = hold * (1.0 + 0.3 * math.sin(2 * math.pi * 3 * k * dt))
        p0, d0 = power(tau)
        plant.step(dt, tau)
        p1, d1 = power(tau)
        work += 0.5 * dt * (p0 + p1)
        lost += 0.5 * dt * (d0 + d1)
        bolus_steps += plant.bolus_force > 0
    assert bolus_steps > 20 and lost > 1e-4
    assert abs(sum(plant.energy()) - e_start - (work - lost)) < 2e-3 * lost


def test_static_equilibrium(mech, model):
    plant = JawPlant(model, mechanism=mech)
    x = mech.incisal_pose([0.003, -0.002, -0.012])[0]
    tau = mech.inverse_dynamics(x, np.zeros(6), np.zeros(6))     # Gibbs-Appell holds the GM plant
    plant.reset_pose(x)
    for _ in range(200):
        plant.step(1e-3, tau)
    assert np.abs(plant.x - x).max() < 1e-12


def test_controllers_impose_the_model_motion(mech, model):
    """Computed torque: the plant model's legs accelerate at alpha (1e-8). FF-PD: with zero error its forces
    make the plant model follow the desired leg acceleration (1e-8)."""
    dyn = Dynamics(model)
    ct = JawComputedTorque(dyn, JawComputedTorque.Options(kp=400.0), mechanism=mech)
    ff = JawFeedForwardPD(dyn, JawFeedForwardPD.Options(kp=2000.0), mechanism=mech)
    rng = np.random.default_rng(5)
    effort = np.zeros(6)
    for _ in range(5):
        x, xd = mech.random_pose(rng), rng.normal(size=6) * 0.1
        q, qd, _ = mech.leg_motion(x, xd, np.zeros(6))
        q_d, qd_d, qdd_d = q + rng.normal(size=6) * 1e-4, qd + rng.normal(size=6) * 1e-3, rng.normal(size=6)
        ct.x[:] = x + 1e-4
        ct.update(0.0, 1e-3, q, qd, q_d, qd_d, qdd_d, effort)
        assert np.abs(ct.x - x).max() < 1e-9
        alpha = qdd_d + ct.kp * (q_d - q) + ct.kd * (qd_d - qd)
        xdd = mech.forward_dynamics(x, xd, effort)
        assert np.allclose(mech.leg_motion(x, xd, xdd)[2], alpha, rtol=1e-8, atol=1e-8)
        ff.update(0.0, 1e-3, q, qd, q, qd, qdd_d, effort)
        xdd = mech.forward_dynamics(x, xd, effort)
        assert np.abs(ff.x - x).max() < 1e-9
        assert np.allclose(mech.leg_motion(x, xd, xdd)[2], qdd_d, rtol=1e-8, atol=1e-8)
    # FF-PD default kd: critically damped for the leg-space inertia at rest
    JE = mech.robot.je(REST_POSE)
    lam = np.diag(np.linalg.inv(JE).T @ mech.mass_matrix(REST_POSE) @ np.linalg.inv(JE))
    assert np.allclose(ff.kd, 2 * np.sqrt(2000.0 * lam)) and np.allclose(ct.kd, 40.0)


@pytest.mark.slow
def test_closed_loop_tracking(mech):
    """ControlLoop + sim driver + plant: a 10 mm min-jerk opening of the incisal point in 0.5 s, then hold.

    Exact model (plant and controller share the nominal patient): computed torque (kp 400 1/s^2) max leg
    error < 1e-4 m (observed 4.6e-5 m: the zero-order hold of the leg forces over the 1 ms period while
    the commanded acceleration changes; it scales with dt / kp), FF-PD (kp 2000 N/m) < 1e-5 m (observed
    1.3e-6 m); the incisal point ends within 1 um of the goal. Without the patient model in the controller
    the computed-torque error grows above 1e-3 m (observed 8e-3 m: the patient's 300 N/m is as stiff as the
    legs' servo, kp times the moving mass)."""
    rep, plant, ctl = run_loop(mech, JawComputedTorque, 400.0)
    assert rep.tracking_max.max() < 1e-4
    assert np.abs(plant.incisal - [0.0, 0.0, -0.010]).max() < 1e-6
    rep, plant, _ = run_loop(mech, JawFeedForwardPD, 2000.0)
    assert rep.tracking_max.max() < 1e-5
    assert np.abs(plant.incisal - [0.0, 0.0, -0.010]).max() < 1e-6
    rep, _, _ = run_loop(mech, JawComputedTorque, 400.0, include_impedance=False)
    assert rep.tracking_max.max() > 1e-3


@pytest.mark.slow
def test_closed_loop_with_a_bolus(mech):
    """The patient chews a bolus (an opening and closing move through the bolus band, FF-PD 2000 N/m). Not in
    the controller's patient model: max leg error between 0.5 and 3 mm (observed 1.6 mm). In it (the nominal
    impedance includes the bolus): < 1e-5 m, as without a bolus."""
    plant_options = dict(**BOLUS)
    rep, _, _ = run_loop(mech, JawFeedForwardPD, 2000.0, duration=1.2, goal=(0.0, 0.0, -0.012), back=True,
                         plant_options=plant_options)
    assert 5e-4 < rep.tracking_max.max() < 3e-3
    rep, _, _ = run_loop(mech, JawFeedForwardPD, 2000.0, duration=1.2, goal=(0.0, 0.0, -0.012), back=True,
                         plant_options=plant_options, impedance=mech.impedance.replace(**BOLUS))
    assert rep.tracking_max.max() < 1e-5


def test_controller_errors(mech, model):
    ctl = JawComputedTorque(Dynamics(model), mechanism=mech)
    q = mech.robot.leg_lengths(REST_POSE)
    effort = np.zeros(6)
    with pytest.raises(ValueError, match="qd_d contains NaN"):
        ctl.update(0.0, 1e-3, q, np.zeros(6), q, np.array([0, 0, np.nan, 0, 0, 0.0]), np.zeros(6), effort)
    with pytest.raises(ValueError, match=r"v must have shape \(6,\), got \(5,\)"):
        ctl.update(0.0, 1e-3, q, np.zeros(5), q, np.zeros(6), np.zeros(6), effort)
    with pytest.raises(ValueError, match="effort must have shape"):
        ctl.update(0.0, 1e-3, q, np.zeros(6), q, np.zeros(6), np.zeros(6), np.zeros(7))
    with pytest.raises(ValueError, match="stroke"):
        ctl.update(0.0, 1e-3, np.full(6, 0.5), np.zeros(6), q, np.zeros(6), np.zeros(6), effort)
    ctl.update(0.0, 1e-3, list(q), np.zeros(6), q, np.zeros(6), np.zeros(6), effort)          # converted once
    ff = JawFeedForwardPD(Dynamics(model), JawFeedForwardPD.Options(kp=2000.0), mechanism=mech)
    with pytest.raises(ValueError, match="desired leg lengths"):
        ff.update(0.0, 1e-3, q, np.zeros(6), np.full(6, 0.5), np.zeros(6), np.zeros(6), effort)
    with pytest.raises(ValueError, match=r"kp(\[0\])?: must be >= 0.0, got -1.0"):
        JawFeedForwardPD(Dynamics(model), JawFeedForwardPD.Options(kp=-1.0), mechanism=mech)
    with pytest.raises(ValueError, match="include_impedance"):
        JawComputedTorque(Dynamics(model), mechanism=mech, include_impedance="yes")
    with pytest.raises(ValueError, match="needs the 6-leg"):
        JawComputedTorque(Dynamics(actuator_model("quadruped_tail")))


ALLOC_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.plants.jaw import kernels as jk
    from rtctl.plants.jaw import steps
    from rtctl.plants.jaw.model import JawRehabRobot, PatientImpedance

    @njit
    def cycles(n, pts2, P, S, C, W, V, io, t6):
        bad = 0
        for _ in range(n):
            bad += jk.incisal_to_legs(pts2, P, io[0, :3], io[1, :3], io[2, :3], io[3], io[4], io[5], W, V)
            bad += steps.computed_torque_step(pts2, P, S[jk.S_Q], S[jk.S_V], io[3], io[4], io[5], t6, C, W, V)
            bad += steps.ff_pd_step(pts2, P, S[jk.S_Q], S[jk.S_V], io[3], io[4], io[5], t6, C, W, V)
            bad += jk.ga_inverse_dynamics(pts2[0], P[0], S[jk.S_X], S[jk.S_XD], io[6], 31, t6, W, V)
            bad += steps.plant_step(pts2, P, S, t6, 1e-3, 2, W, V)
        return bad

    m = JawRehabRobot()
    P = m.pack(PatientImpedance(bolus_damping=30.0, bolus_force=5.0), viscous_friction=1.0, coulomb_friction=0.5)
    S = np.zeros((jk.NS, 6))
    S[jk.S_X] = m.incisal_pose([0.0, 0.0, -0.01])[0]
    steps.plant_outputs(m.pts2, P, S, m.W, m.V)
    C = np.zeros((jk.NK, 6))
    C[jk.K_KP], C[jk.K_KD], C[jk.K_X], C[jk.K_OPT, :2] = 400.0, 40.0, S[jk.S_X], (1e-11, 20)
    io = np.zeros((7, 6))
    io[0, :3], io[1, :3] = (0.0, 0.0, -0.01), (0.0, 0.0, 0.02)
    args = (m.pts2, P, S, C, m.W, m.V, io, np.zeros(6))
    assert cycles(1, *args) == 0
    counts = allocations(cycles, *args)
    print("allocations for 1 and 300 cycles:", counts)
    assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_compiled_steps_allocate_nothing():
    """incisal_to_legs, both controller steps, the Gibbs-Appell ID and the plant step run 300 times from a
    compiled loop with numba's allocation counter unchanged (see tests/test_allocation.py)."""
    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")
