"""The momentum observer and collision detection on the simulated 7-DOF arm (loops/observer.py, loops/collision.py).

Exactness: p = M(q) qd to round-off, and C^T qd - g against M' qd - C qd - g with M' from a central
difference of M along qd (free-flyer: against the momentum's rate along the true motion). Response:
a 20 N step (and a 2 Hz sine) on the last link gives the first-order response of time constant 1/K_O
within 2 % and settles within 1 % of the applied joint torque J^T F; the frame wrench estimate
recovers F. Model errors: with friction and a 10 % mass error, the residual without contact stays
inside the bound documented in MODEL_ERROR_BOUND. Detection: 60 s of the demo's move, repeated back
and forth at 0.4 Hz (faster than the demo's own 2 s move), with the demo's friction, encoders and
velocity noise, gives no detection; a 20 N contact on the last link is then detected within 10
cycles at 1 kHz, and each reaction runs. Cycles are counted in control time (offline loop).

``python tests/test_observer.py OUTDIR`` writes the estimate-vs-applied plots.
"""
import copy
import tracemalloc

import numpy as np
import pytest
from rtctl.loops.collision import CollisionMonitor
from rtctl.loops.observer import MomentumObserver

import rtctl
from rtctl.config import build, validate
from rtctl.dynamics import Dynamics
from rtctl.model.urdf import load_urdf

GOAL = np.array([0.6, 0.5, -0.4, -1.0, 0.5, 0.6, 0.3])
K_O = 50.0
DT = 1e-3
FORCE = np.array([0.0, 0.0, 0.0, 12.0, -16.0, 0.0])  # 20 N at the last link's origin, world axes
BASE = {
    "robot": {"model": "arm7"},
    "plant": {"initial_position": [0.0] * 7},
    "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
    "controller": {"type": "computed_torque", "kp": 400.0},
    "trajectory": {"type": "min_jerk", "goal": GOAL.tolist(), "duration": 1.0, "t0": 0.0},
    "loop": {"rate_hz": 1000.0, "pace": False},
}
# The demo's conditions (rtctl/data/configs/demo.toml): unmodelled viscous friction, 17-bit encoders,
# velocity noise; its move from 0 to GOAL, here back and forth for as long as needed.
DEMO = {
    "plant": {"viscous_friction": 0.05},
    "driver": {"encoder_counts": 131072, "velocity_noise": 1e-3},
    "trajectory": {"type": "sinusoid", "center": (GOAL / 2).tolist(), "amplitude": (GOAL / 2).tolist(),
                   "frequency": 0.4, "phase": -np.pi / 2},
}
# Thresholds for the demo: 1 N m static (noise and friction at rest stay below 0.07 N m), bands for the
# inertia error (10 % of the heaviest joint inertia, ~3 kg m^2 with the rotors) and viscous friction.
THRESHOLDS = {"threshold": 1.0, "velocity_band": 0.1, "acceleration_band": 0.3}
# Measured (test_model_errors_stay_inside_the_documented_bound): the largest |r| without contact, per
# joint, with viscous 0.05 N m s/rad + Coulomb 0.2 N m friction and every mass and inertia 10 % heavier
# than the model, on the aggressive move: [0.41, 4.56, 0.64, 2.23, 0.25, 0.35, 0.22] N m, mostly the
# 10 % gravity error on the shoulder and elbow (it does not grow with qd or qdd: a threshold for such a
# model error needs a static part of that size). The bound asserted is that, 25 % up.
MODEL_ERROR_BOUND = np.array([0.55, 5.7, 0.8, 2.8, 0.35, 0.45, 0.3])


def make_loop(overrides=None, **monitor):
    raw = copy.deepcopy(BASE)
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    if raw["trajectory"].get("type") == "sinusoid":
        for key in ("goal", "duration", "t0"):
            raw["trajectory"].pop(key, None)
    loop = build(validate(raw))
    mon = CollisionMonitor(loop.controller.dyn, loop.safety, loop.period, **{"gain": K_O, **monitor}).attach(loop)
    return loop, mon, loop.drivers[0].plant


def push_at(loop, plant, t_on, wrench_of_t=None, body=6, t_off=np.inf):
    """Apply FORCE (or ``wrench_of_t(t)``, sampled at mid-period) to ``body`` from control time ``t_on``
    until ``t_off``."""
    def hook(lp):
        t = lp.cycle * lp.period
        if t_on - 1e-9 <= t < t_off - 1e-9:
            plant.set_external_wrench(body, FORCE if wrench_of_t is None else wrench_of_t(t + 0.5 * lp.period))
        elif t >= t_off - 1e-9:
            plant.set_external_wrench(None)
    loop.boundary_hooks.append(hook)


def record(loop, mon, plant, body=6):
    """Per cycle: the residual (actuated joints) and the applied joint torque J(q)^T F of the plant."""
    rows = {"r": [], "tau": []}

    def hook(cycle, t, state, command):
        rows["r"].append(mon.observer.joint_residual.copy())
        rows["tau"].append(plant.dynamics.jacobian(plant.q, body).T @ plant.external_wrenches()[body])
    loop.hooks.append(hook)
    return rows


# -- exactness of the terms --------------------------------------------------------------------------


@pytest.mark.slow
def test_momentum_and_c_transpose_qd_are_exact():
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    dyn = Dynamics(model)
    obs = MomentumObserver(dyn, K_O, DT)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, v = rng.uniform(-1.5, 1.5, model.nq), rng.uniform(-2, 2, model.nv)
        p, beta = obs.terms(q, v)
        np.testing.assert_allclose(p, dyn.mass_matrix(q) @ v, atol=1e-12)
        h = 1e-6
        m_dot = (dyn.mass_matrix(q + h * v).copy() - dyn.mass_matrix(q - h * v).copy()) / (2 * h)
        g = dyn.gravity_forces(q).copy()
        expected = m_dot @ v - (dyn.nonlinear_effects(q, v) - g) - g
        np.testing.assert_allclose(beta, expected, atol=1e-7 * np.abs(expected).max())


def test_free_flyer_momentum_rate_matches_the_terms():
    """Unforced, p' = C^T v - g exactly: the momentum's rate along the true motion (central difference)."""
    model = load_urdf(rtctl.bundled_model_path("quadruped12"), "free_flyer")
    dyn = Dynamics(model)
    obs = MomentumObserver(dyn, K_O, DT)
    rng = np.random.default_rng(4)
    q = model.neutral_configuration()
    q[7:] += rng.uniform(-0.5, 0.5, model.nq - 7)
    q[3:7] = np.array([0.1, 0.2, 0.3, 0.9]) / np.linalg.norm([0.1, 0.2, 0.3, 0.9])
    v = rng.uniform(-1, 1, model.nv)
    p, beta = obs.terms(q, v)
    np.testing.assert_allclose(p, dyn.mass_matrix(q) @ v, atol=1e-12)
    a = dyn.forward_dynamics(q, v, np.zeros(model.nv)).copy()
    h = 1e-6
    p_plus, _ = obs.terms(dyn.integrate(q, v, h), v + h * a)
    p_minus, _ = obs.terms(dyn.integrate(q, v, -h), v - h * a)
    np.testing.assert_allclose((p_plus - p_minus) / (2 * h), beta, atol=1e-7 * np.abs(beta).max())


# -- response to a known wrench ----------------------------------------------------------------------


@pytest.mark.slow
def test_step_follows_the_first_order_response_and_settles():
    loop, mon, plant = make_loop(threshold=1e9)
    t_on = 1.1
    push_at(loop, plant, t_on)
    rows = record(loop, mon, plant)
    loop.run(duration=t_on + 10 / K_O)
    r, tau = np.array(rows["r"]), np.array(rows["tau"])
    k_on = round(t_on / DT)
    assert np.abs(r[:k_on]).max() < 1e-3  # during and after the move, no contact: nothing
    t = (np.arange(len(r)) - k_on) * DT
    tau_final = tau[-1]
    expected = np.where(t[:, None] > 0, tau_final * (1 - np.exp(-K_O * np.clip(t, 0, None)))[:, None], 0.0)
    scale = np.abs(tau_final).max()
    settled = t >= 5 / K_O  # e^-5 < 1 %
    print(f"step: first-order fit {np.abs(r - expected).max() / scale:.2%}, settled "
          f"{np.abs(r[settled] - tau[settled]).max() / scale:.3%} of max |J^T F|")
    assert np.abs(r - expected).max() < 0.02 * scale
    assert np.abs(r[settled] - tau[settled]).max() < 0.01 * scale
    np.testing.assert_allclose(mon.observer.wrench, FORCE, atol=0.01 * 20.0)


def test_sine_follows_the_first_order_response():
    loop, mon, plant = make_loop(threshold=1e9)
    t_on, omega = 1.1, 2 * np.pi * 2.0
    push_at(loop, plant, t_on, lambda t: FORCE * np.sin(omega * (t - t_on)))
    rows = record(loop, mon, plant)
    loop.run(duration=t_on + 1.0)
    r, tau = np.array(rows["r"]), np.array(rows["tau"])
    k_on = round(t_on / DT)
    amplitude = plant.dynamics.jacobian(plant.q, 6).T @ FORCE  # the arm holds its pose within ~1e-3 rad
    s = (np.arange(len(r)) - k_on) * DT
    s = np.clip(s, 0, None)[:, None]
    expected = amplitude * K_O / (K_O ** 2 + omega ** 2) * (K_O * np.sin(omega * s) - omega * np.cos(omega * s)
                                                            + omega * np.exp(-K_O * s))
    scale = np.abs(amplitude).max()
    print(f"sine: first-order fit {np.abs(r - expected).max() / scale:.2%} of the amplitude")
    assert np.abs(r - expected).max() < 0.02 * scale
    assert np.abs(tau[k_on:] - amplitude * np.sin(omega * s[k_on:])).max() < 0.02 * scale


@pytest.mark.slow
def test_model_errors_stay_inside_the_documented_bound():
    """Friction and a 10 % mass error: the residual without contact is the model error (bounded), and
    with a 20 N step the estimate settles to J^T F within that same bound."""
    plant_errors = {"viscous_friction": 0.05, "coulomb_friction": 0.2, "coulomb_velocity_scale": 0.01,
                    "mass_scale": 1.1}
    loop, mon, plant = make_loop({**DEMO, "plant": plant_errors}, threshold=1e9)
    t_on = 2.5
    push_at(loop, plant, t_on)
    rows = record(loop, mon, plant)
    loop.run(duration=t_on + 0.5)
    r, tau = np.array(rows["r"]), np.array(rows["tau"])
    k_on = round(t_on / DT)
    free = np.abs(r[10:k_on]).max(axis=0)
    print("largest |r| without contact, friction and 10 % mass error (N m):", np.round(free, 3))
    assert np.all(free < MODEL_ERROR_BOUND)
    assert free.max() > 0.2  # the errors are there to be seen
    settled = slice(k_on + int(5 / K_O / DT), None)
    assert np.all(np.abs(r[settled] - tau[settled]).max(axis=0) < MODEL_ERROR_BOUND)


# -- the estimate against the applied wrench, as a figure ----------------------------------------------
PLOT_T_ON, PLOT_OMEGA = 1.1, 2 * np.pi * 2.0
PLOT_CASES = {"exact": ({}, "exact model"),
              "model_errors": ({"driver": DEMO["driver"],
                                "plant": {"viscous_friction": 0.05, "coulomb_friction": 0.2,
                                          "coulomb_velocity_scale": 0.01, "mass_scale": 1.1}},
                               "plant: joint friction, 10 % heavier; 17-bit encoders, 1e-3 rad/s velocity noise")}


def write_plot(out, tag):
    """The arm holding GOAL after its 1 s move; from PLOT_T_ON the 20 N of FORCE on the last link for 0.5 s,
    then the same as a 2 Hz cosine: the frame wrench estimate against it (same figure as the Stewart
    platform's, rtctl.loops.observer_plots). Returns the path and the largest errors per window."""
    from rtctl.loops.observer_plots import plot_wrench_estimate

    overrides, label = PLOT_CASES[tag]
    loop, mon, plant = make_loop(overrides, threshold=1e9)
    t_on = PLOT_T_ON
    push_at(loop, plant, t_on, lambda t: FORCE if t < t_on + 0.5 else FORCE * np.cos(PLOT_OMEGA * (t - t_on - 0.5)))
    rows = {"w": [], "F": []}
    loop.hooks.append(lambda cycle, t, state, command: (rows["w"].append(mon.observer.wrench.copy()),
                                                        rows["F"].append(plant.external_wrenches()[6])))
    loop.run(duration=t_on + 1.5)
    t = np.arange(len(rows["w"])) * DT
    return plot_wrench_estimate(
        out / f"arm_observer_{tag}.png", t, np.array(rows["F"]), np.array(rows["w"]),
        f"7-DOF arm, momentum observer K_O = {K_O:g} 1/s, wrench at the last link\n{label}",
        where="the last link's origin",
        windows=[("step, 5/K_O after it", t_on + 5 / K_O, t_on + 0.5), ("2 Hz, with the 1/K_O lag", t_on + 0.5,
                                                                          t_on + 1.5)])


@pytest.mark.slow
def test_the_estimate_against_the_applied_wrench_is_plotted(tmp_path):
    """The figure's numbers are the observer's: on the exact model, 5/K_O after the step the estimate is within
    its first-order remainder e^-5 |F| (0.13 N of 20 N; the applied moment is zero, the estimate's 0.011 N m),
    and the 2 Hz cosine lags by the filter: the steady amplitude of the error on fy (16 N) is
    16 omega / sqrt(K_O^2 + omega^2) = 3.90 N, 4.00 N measured with the switch from the step."""
    path, errors = write_plot(tmp_path, "exact")
    print(path, errors)
    force, moment = errors["step, 5/K_O after it"]
    assert force < np.exp(-5) * 20.0 and moment < 0.02
    lag, _ = errors["2 Hz, with the 1/K_O lag"]
    steady = 16.0 * PLOT_OMEGA / np.hypot(K_O, PLOT_OMEGA)
    assert 0.99 * steady < lag < 1.05 * steady
    assert (tmp_path / "arm_observer_exact.png").stat().st_size > 20_000


# -- detection and reaction ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_minute_of_the_demo_move_without_contact_is_quiet_and_a_20_newton_contact_stops_it():
    loop, mon, plant = make_loop(DEMO, reaction="stop", **THRESHOLDS)
    report = loop.run(duration=60.0)
    assert report.cycles == 60_000 and mon.observer.samples == 60_000
    assert mon.detections == 0 and not report.tripped, report.trip_reason
    k_on = loop.cycle
    push_at(loop, plant, k_on * DT)
    loop.run(duration=0.05)
    assert mon.detections == 1 and loop.safety.tripped
    assert "collision" in loop.safety.trip_reason
    latency = loop.safety.trip_cycle - k_on  # cycle k_on's write is the first step with the contact
    print(f"20 N contact detected after {latency} cycles, on {mon.detection['joint']}")
    assert 1 <= latency <= 10
    # the safe command sent is the arm's default safe state, the hold: it stops the arm against the 20 N push
    assert not loop.safety.fallback and loop.safety.events[-1][2].startswith("hold: decelerating")
    loop.run(duration=1.0)
    assert np.abs(plant.v).max() < 1e-3


@pytest.mark.parametrize("reaction", ["reflex", "retract"])
@pytest.mark.slow
def test_compliant_reactions_run_and_re_arm(reaction):
    loop, mon, plant = make_loop(DEMO, reaction=reaction, **THRESHOLDS)
    push_at(loop, plant, 0.5, t_off=0.53)
    loop.run(duration=0.52)
    assert loop.safety.tripped and mon.detection["joint"] in loop.controller.joint_names
    assert loop.safety.trip_cycle - 500 <= 10
    loop.run(cycles=1)
    state, dyn = loop.state, loop.controller.dyn
    push = mon.detection["residuals"] * (1.0 if reaction == "retract" else 0.0)
    expected = dyn.gravity_forces(state.q) - mon.reflex_damping * state.v + push
    limit = loop.model.effort_limit
    np.testing.assert_allclose(loop.command.effort, np.clip(expected, -limit, limit), atol=1e-9)
    loop.run(duration=0.5)  # the robot yields; the residual decays with 1/K_O once the contact is gone
    assert np.abs(mon.observer.joint_residual).max() < 0.5
    assert loop.rearm().startswith("re-armed")  # the robot has come to rest: the trip and its reflex end
    assert not loop.safety.tripped and loop.safety._reaction is None
    loop.run(duration=0.5)  # recovery move back to the trajectory, no contact: no new detection
    assert mon.detections == 1 and not loop.safety.tripped


def test_the_monitor_allocates_nothing_after_warm_up():
    loop, mon, _ = make_loop(DEMO, **THRESHOLDS)
    for k in range(300):
        loop.step(k * DT)
    tracemalloc.start()
    for k in range(300, 400):
        loop.step(k * DT)
    before = tracemalloc.take_snapshot()
    for k in range(400, 800):
        loop.step(k * DT)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    ours = [tracemalloc.Filter(True, mod.__file__) for mod in (
        __import__("rtctl.loops.observer", fromlist=["x"]), __import__("rtctl.loops.collision", fromlist=["x"]))]
    growth = [d for d in after.filter_traces(ours).compare_to(before.filter_traces(ours), "lineno") if d.size_diff > 0]
    assert not growth, "\n".join(str(d) for d in growth[:10])
    assert mon.observer.samples == 800


def test_the_collision_section_of_a_run_config_builds_the_monitor_and_names_bad_keys(tmp_path):
    from rtctl.config import ConfigError, DEMO_CONFIG, build, load_config

    text = DEMO_CONFIG.read_text() + "\n[collision]\nenabled = true\nthreshold = 1.0\nvelocity_band = 0.1\n" \
        "acceleration_band = 0.3\nreaction = \"reflex\"\n"
    (tmp_path / "c.toml").write_text(text)
    loop = build(load_config(tmp_path / "c.toml"))
    assert loop.collision in loop.hooks and loop.collision.reaction == "reflex"
    (tmp_path / "bad.toml").write_text(text.replace("reaction = \"reflex\"", "reaction = \"flee\""))
    with pytest.raises(ConfigError, match=r"\[collision\] reaction"):
        load_config(tmp_path / "bad.toml")
    (tmp_path / "typo.toml").write_text(text.replace("threshold =", "treshold ="))
    with pytest.raises(ConfigError, match=r"\[collision\] unknown key 'treshold' \(did you mean 'threshold'\?\)"):
        load_config(tmp_path / "typo.toml")


def test_telemetry_publishes_the_controllers_extras_then_the_monitors():
    """One ``extra`` field gathered from every provider (controller, then hooks), without allocating."""
    from rtctl.config import DEMO_CONFIG, build, load_config
    from rtctl.telemetry import Telemetry

    path = DEMO_CONFIG.parent / "demo.toml"
    loop = build(load_config(path))
    mon = CollisionMonitor(Dynamics(loop.model), loop.safety, loop.period, threshold=1.0).attach(loop)
    ctl = loop.controller
    ctl.telemetry_fields, ctl.telemetry_values = ["gain_scale"], np.array([0.5])
    tel = Telemetry(capacity=256, endpoint="tcp://127.0.0.1:0").attach(loop)
    assert tel.extra_names == ["gain_scale", *mon.telemetry_fields]
    for k in range(50):
        ctl.telemetry_values[0] = k
        loop.step(k * loop.period)
    rows, _ = tel._take()
    extra = rows[:, tel.layout.slices["extra"]]
    assert np.array_equal(extra[:, 0], np.arange(50.0))
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for k in range(50, 150):
        tel.sample(loop, k * loop.period)                              # the gathering itself allocates nothing
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    ours = [tracemalloc.Filter(True, tel.sample.__code__.co_filename)]
    assert not [d for d in after.filter_traces(ours).compare_to(before.filter_traces(ours), "lineno")
                if d.size_diff > 0]
    assert np.array_equal(extra[-1, 1:], mon.telemetry_values)        # the monitor's last residuals and wrench
    assert np.any(extra[-1, 1:] != 0.0)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    for case in PLOT_CASES:
        print(*write_plot(out, case))
