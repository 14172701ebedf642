"""The generalized-momentum observer of the parallel platforms (plants/stewart/observer.py, plants/jaw/observer.py).

Exactness: along the unforced motion of each platform's own forward dynamics, the momentum's rate equals
beta = C^T xd - g (central difference; the Stewart platform without gravity so that the velocity terms are
what is compared); p . xd is twice the kinetic energy computed body by body; the jaw robot's p is its
coupled inertia times xd, and its momentum rate along an arbitrary motion equals J_E^T tau of the
independent Gibbs-Appell inverse dynamics plus beta. Response: a known wrench (step, then a 2 Hz sine)
on the platform (Stewart; on the jaw at the incisal point) in the closed loop gives the first-order
response of time constant 1/K_O within 2 % and settles within 1 % of the applied generalized force T^T F;
the wrench estimate recovers F. Model errors: with leg friction and a 10 % mass error the residual
without contact stays inside MODEL_ERROR_BOUND (Stewart) and JAW_MODEL_ERROR_BOUND (jaw).

``python tests/test_platform_observer.py OUTDIR`` writes the estimate-vs-applied plots.
"""
import copy
import sys

import numpy as np
import pytest

from rtctl.config import build, validate
from rtctl.plants.jaw.model import JawRehabRobot
from rtctl.plants.jaw.observer import jaw_observer
from rtctl.plants.stewart.model import StewartPlatform
from rtctl.plants.stewart.observer import PlatformObserverHook, stewart_observer

K_O = 50.0
DT = 1e-3
T_ON = 1.2
WRENCH = np.array([1.0, -0.5, 2.0, 12.0, -16.0, 5.0])  # [n; f] at the platform centre: 2.3 N m, 20.6 N
STEWART = {"robot": {"model": "stewart"}, "plant": {"type": "stewart", "substeps": 2},
           "driver": {"backend": "sim"}, "controller": {"type": "stewart_computed_torque", "kp": 400.0},
           "trajectory": {"type": "stewart_pose", "times": [0.0, 1.0], "t0": 0.0,
                          "waypoints": [[0, 0, 2.0, 0, 0, 0], [0.05, -0.05, 2.2, 0.1, -0.1, 0.1]]},
           "loop": {"rate_hz": 1000.0, "pace": False}, "safety": {"safe_mode": "damping", "position_margin": 0.05}}
# Measured (test_stewart_model_errors_stay_inside_the_documented_bound): the largest |r| without contact per
# pose coordinate (N, N, N, N m, N m, N m), with 0.5 N s/m viscous + 1 N Coulomb leg friction and every mass
# and inertia 10 % heavier than the model, on the 1 s move: [0.23, 0.46, 10.39, 0.60, 0.51, 0.49] -- mostly
# the 10 % weight error on z (the moving mass weighs ~60 N) and the friction of the moving legs. The bound
# asserted is that, 25 % up.
MODEL_ERROR_BOUND = np.array([0.28, 0.58, 13.0, 0.75, 0.63, 0.61])


def stewart_loop(plant=None, gain=K_O):
    raw = copy.deepcopy(STEWART)
    raw["plant"].update(plant or {})
    loop = build(validate(raw))
    obs = stewart_observer(loop.controller.mechanism, gain, loop.period)
    return loop, PlatformObserverHook(obs).attach(loop), loop.drivers[0].plant


def push_and_record(loop, hook, plant, wrench_of_t, frame="platform"):
    """Apply ``wrench_of_t(t)`` (sampled at mid-period) from T_ON; record per cycle the residual, the wrench
    estimate, and the generalized force T(x)^T F the plant applies (Euler space)."""
    mech = plant.mechanism if hasattr(plant.mechanism, "euler_jacobian") else plant.mechanism.robot
    rows = {"r": [], "w": [], "applied": [], "F": []}

    def boundary(lp):
        t = lp.cycle * lp.period
        if t >= T_ON - 1e-9:
            plant.set_external_wrench(frame, wrench_of_t(t + 0.5 * lp.period))

    def record(cycle, t, state, command):
        F = plant.external_wrench()
        T = mech.euler_jacobian(plant.x)[2]
        rows["r"].append(hook.observer.residual.copy())
        rows["w"].append(hook.observer.wrench.copy())
        rows["applied"].append(T.T @ np.concatenate([F[3:], F[:3]]))
        rows["F"].append(F)
    loop.boundary_hooks.append(boundary)
    loop.hooks.append(record)
    return rows


# -- exactness of the terms --------------------------------------------------------------------------


def test_stewart_momentum_rate_is_beta_along_the_unforced_motion():
    mech = StewartPlatform(g=0.0)
    obs = stewart_observer(mech, K_O, DT)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x, xd = mech.random_pose(rng), rng.uniform(-1, 1, 6)
        p, beta, _, _ = obs.terms(x, xd)
        assert p @ xd == pytest.approx(2 * mech.kinetic_energy(x, xd), rel=1e-12)
        xdd = mech.forward_dynamics(x, xd, np.zeros(6))
        h = 1e-6
        rate = (obs.terms(x + h * xd, xd + h * xdd)[0] - obs.terms(x - h * xd, xd - h * xdd)[0]) / (2 * h)
        np.testing.assert_allclose(rate, beta, atol=1e-7 * np.abs(beta).max())


def test_jaw_momentum_agrees_with_the_coupled_model_and_gibbs_appell():
    mech = JawRehabRobot()
    obs = jaw_observer(mech, K_O, DT)
    rng = np.random.default_rng(6)
    for _ in range(3):
        x, xd, xdd = mech.random_pose(rng), rng.uniform(-0.2, 0.2, 6), rng.uniform(-2, 2, 6)
        p, beta, _, _ = obs.terms(x, xd)
        np.testing.assert_allclose(p, mech.mass_matrix(x) @ xd, atol=1e-14)
        h = 1e-6
        rate = (obs.terms(x + h * xd, xd + h * xdd)[0] - obs.terms(x - h * xd, xd - h * xdd)[0]) / (2 * h)
        tau = mech.inverse_dynamics(x, xd, xdd, impedance=False)          # Gibbs-Appell, no patient
        expected = mech.robot.je(x).T @ tau + beta
        np.testing.assert_allclose(rate, expected, atol=1e-7 * np.abs(expected).max())


# -- response to a known wrench ----------------------------------------------------------------------


@pytest.mark.slow
def test_stewart_step_follows_the_first_order_response_and_settles():
    loop, hook, plant = stewart_loop()
    rows = push_and_record(loop, hook, plant, lambda t: WRENCH)
    loop.run(duration=T_ON + 10 / K_O)
    r, applied = np.array(rows["r"]), np.array(rows["applied"])
    k_on = round(T_ON / DT)
    assert np.abs(r[:k_on]).max() < 1e-3       # during the move and the hold, no contact: nothing
    t = (np.arange(len(r)) - k_on) * DT
    final = applied[-1]
    expected = np.where(t[:, None] > 0, final * (1 - np.exp(-K_O * np.clip(t, 0, None)))[:, None], 0.0)
    scale = np.abs(final).max()
    settled = t >= 5 / K_O
    print(f"stewart step: first-order fit {np.abs(r - expected).max() / scale:.2%}, settled "
          f"{np.abs(r[settled] - applied[settled]).max() / scale:.3%} of max |T^T F|")
    assert np.abs(r - expected).max() < 0.02 * scale
    assert np.abs(r[settled] - applied[settled]).max() < 0.01 * scale
    np.testing.assert_allclose(hook.observer.wrench, WRENCH, atol=0.01 * np.abs(WRENCH).max())
    np.testing.assert_allclose(hook.telemetry_values[6:], hook.observer.wrench)


def assert_follows_the_sine(rows, amplitude, omega: float, k_on: int, label: str) -> None:
    """The residual is the first-order observer's exact response, gain K_O, to ``amplitude`` sin(omega t)
    starting at cycle ``k_on``, within 2 % of the amplitude; the applied torque is that sine (the pose holds)."""
    r, applied = np.array(rows["r"]), np.array(rows["applied"])
    s = np.clip((np.arange(len(r)) - k_on) * DT, 0, None)[:, None]
    expected = amplitude * K_O / (K_O ** 2 + omega ** 2) * (K_O * np.sin(omega * s) - omega * np.cos(omega * s)
                                                            + omega * np.exp(-K_O * s))
    scale = np.abs(amplitude).max()
    print(f"{label} sine: first-order fit {np.abs(r - expected).max() / scale:.2%} of the amplitude")
    assert np.abs(r - expected).max() < 0.02 * scale
    assert np.abs(applied[k_on:] - amplitude * np.sin(omega * s[k_on:])).max() < 0.02 * scale


@pytest.mark.slow
def test_stewart_sine_follows_the_first_order_response():
    loop, hook, plant = stewart_loop()
    omega = 2 * np.pi * 2.0
    rows = push_and_record(loop, hook, plant, lambda t: WRENCH * np.sin(omega * (t - T_ON)))
    loop.run(duration=T_ON + 1.0)
    amplitude = plant.mechanism.euler_jacobian(plant.x)[2].T @ np.concatenate([WRENCH[3:], WRENCH[:3]])
    assert_follows_the_sine(rows, amplitude, omega, round(T_ON / DT), "stewart")


@pytest.mark.slow
def test_stewart_model_errors_stay_inside_the_documented_bound():
    errors = {"viscous_friction": 0.5, "coulomb_friction": 1.0, "coulomb_velocity_scale": 0.01, "mass_scale": 1.1}
    loop, hook, plant = stewart_loop(errors)
    rows = push_and_record(loop, hook, plant, lambda t: WRENCH)
    loop.run(duration=T_ON + 1.0)
    r, applied = np.array(rows["r"]), np.array(rows["applied"])
    k_on = round(T_ON / DT)
    free = np.abs(r[10:k_on]).max(axis=0)
    print("stewart: largest |r| without contact, friction and 10 % mass error:", np.round(free, 3))
    assert np.all(free < MODEL_ERROR_BOUND)
    assert free.max() > 0.3                     # the errors are there to be seen
    settled = slice(k_on + 500, None)            # the platform has come to rest against the push
    pushed = np.abs(r[settled] - applied[settled]).max(axis=0)
    print("stewart: largest |r - T^T F| at rest under the push:", np.round(pushed, 3))
    assert np.all(pushed < MODEL_ERROR_BOUND)


JAW_BITE = np.array([0.0, 0.0, 0.0, 1.0, -2.0, -10.0])   # [n; f] at the incisal point: 10.2 N, no moment
# Measured (test_jaw_model_errors_stay_inside_the_documented_bound): the largest |r| without contact per pose
# coordinate (N, N, N, N m, N m, N m), with 0.5 N s/m viscous + 1 N Coulomb robot-leg friction and every mass and
# inertia 10 % heavier than the model, on the 0.5 s move and hold: [0.022, 0.056, 4.40, 0.0015, 0.0075, 0.038]
# -- on z the Coulomb friction of the six moving legs (up to 5.5 N alone, while the legs move) and the 10 %
# weight error (1.09 N alone, at rest). The bound asserted is that, 25 % up.
JAW_MODEL_ERROR_BOUND = np.array([0.028, 0.071, 5.5, 0.0019, 0.0095, 0.048])


def jaw_loop(plant=None):
    """The jaw robot (patient off: its force would be external too) moving 10 mm down and 0.05 rad in 0.5 s,
    then holding; the observer at the incisal point."""
    mech = JawRehabRobot()
    raw = {"robot": {"model": "jaw"}, "plant": {"type": "jaw", "substeps": 2, **(plant or {})},
           "patient": {"stiffness": [0.0] * 6, "damping": [0.0] * 6},
           "driver": {"backend": "sim"}, "controller": {"type": "jaw_computed_torque", "kp": 10000.0},
           "trajectory": {"type": "min_jerk", "duration": 0.5,
                          "goal": mech.robot.leg_lengths(mech.rest_pose + [0, 0, -0.01, 0, 0, 0.05]).tolist()},
           "loop": {"rate_hz": 1000.0, "pace": False}, "safety": {"safe_mode": "damping", "position_margin": 0.002}}
    raw["plant"]["initial_position"] = mech.robot.leg_lengths(mech.rest_pose).tolist()
    loop = build(validate(raw))
    hook = PlatformObserverHook(jaw_observer(loop.controller.mechanism, K_O, loop.period, "incisal")).attach(loop)
    return loop, hook, loop.drivers[0].plant


@pytest.mark.slow
def test_jaw_step_at_the_incisal_point_is_estimated():
    """A 10 N bite-like push at the incisal point."""
    loop, hook, plant = jaw_loop()
    rows = push_and_record(loop, hook, plant, lambda t: JAW_BITE, frame="incisal")
    loop.run(duration=T_ON + 10 / K_O)
    r, applied = np.array(rows["r"]), np.array(rows["applied"])
    k_on = round(T_ON / DT)
    assert np.abs(r[:k_on]).max() < 1e-3
    t = (np.arange(len(r)) - k_on) * DT
    final = applied[-1]
    expected = np.where(t[:, None] > 0, final * (1 - np.exp(-K_O * np.clip(t, 0, None)))[:, None], 0.0)
    scale = np.abs(final).max()
    settled = t >= 5 / K_O
    print(f"jaw step: first-order fit {np.abs(r - expected).max() / scale:.2%}, settled "
          f"{np.abs(r[settled] - applied[settled]).max() / scale:.3%}")
    assert np.abs(r - expected).max() < 0.02 * scale
    assert np.abs(r[settled] - applied[settled]).max() < 0.01 * scale
    np.testing.assert_allclose(hook.observer.wrench, JAW_BITE, atol=0.01 * 10.0)


@pytest.mark.slow
def test_jaw_sine_at_the_incisal_point_follows_the_first_order_response():
    """A 2 Hz sine of the same bite: r' = K_O (T^T F - r) from r = 0, in closed form."""
    loop, hook, plant = jaw_loop()
    omega = 2 * np.pi * 2.0
    rows = push_and_record(loop, hook, plant, lambda t: JAW_BITE * np.sin(omega * (t - T_ON)), frame="incisal")
    loop.run(duration=T_ON + 1.0)
    k_on = round(T_ON / DT)
    assert np.abs(np.array(rows["r"])[:k_on]).max() < 1e-3
    arm = plant.mechanism.robot.rotation(plant.x) @ plant.frames["incisal"]
    at_centre = np.concatenate([JAW_BITE[:3] + np.cross(arm, JAW_BITE[3:]), JAW_BITE[3:]])
    amplitude = plant.mechanism.robot.euler_jacobian(plant.x)[2].T @ np.concatenate([at_centre[3:], at_centre[:3]])
    assert_follows_the_sine(rows, amplitude, omega, k_on, "jaw")


@pytest.mark.slow
def test_jaw_model_errors_stay_inside_the_documented_bound():
    errors = {"viscous_friction": 0.5, "coulomb_friction": 1.0, "coulomb_velocity_scale": 0.01, "mass_scale": 1.1}
    loop, hook, plant = jaw_loop(errors)
    rows = push_and_record(loop, hook, plant, lambda t: JAW_BITE, frame="incisal")
    loop.run(duration=T_ON + 1.0)
    r, applied = np.array(rows["r"]), np.array(rows["applied"])
    k_on = round(T_ON / DT)
    free = np.abs(r[10:k_on]).max(axis=0)
    print("jaw: largest |r| without contact, friction and 10 % mass error:", np.array2string(free, precision=4))
    settled = slice(k_on + 500, None)
    pushed = np.abs(r[settled] - applied[settled]).max(axis=0)
    print("jaw: largest |r - T^T F| at rest under the push:", np.round(pushed, 3))
    assert np.all(free < JAW_MODEL_ERROR_BOUND)
    assert free.max() > 0.3                     # the errors are there to be seen
    assert np.all(pushed < JAW_MODEL_ERROR_BOUND)


# -- real time and bad input -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_observer_allocates_nothing_per_cycle():
    import rtctl.plants.stewart.observer as mod
    from allocation_counter import retained_per_cycle
    loop, hook, plant = stewart_loop()
    plant.set_external_wrench("platform", WRENCH)
    growth = retained_per_cycle(loop, [mod])
    assert not growth, "\n".join(str(d) for d in growth[:10])
    assert hook.observer.samples == 1900


@pytest.mark.slow
def test_the_jaw_observer_hook_allocates_nothing_per_cycle():
    from allocation_counter import retained_per_cycle

    import rtctl.plants.jaw.observer as jaw_mod
    import rtctl.plants.stewart.observer as mod
    loop, hook, plant = jaw_loop()
    plant.set_external_wrench("incisal", JAW_BITE)
    growth = retained_per_cycle(loop, [mod, jaw_mod])
    assert not growth, "\n".join(str(d) for d in growth[:10])
    assert hook.observer.samples == 1900 and np.abs(hook.observer.wrench[5] + 10.0) < 0.1   # it did run, and right


def test_bad_input_is_named():
    mech = StewartPlatform()
    with pytest.raises(ValueError, match=r"frame 'tool' does not exist; frames of this platform: \['platform'\]"):
        stewart_observer(mech, K_O, DT, frame="tool")
    with pytest.raises(ValueError, match=r"gain must be finite and > 0"):
        stewart_observer(mech, float("nan"), DT)
    loop, hook, plant = stewart_loop()
    with pytest.raises(ValueError, match=r"frame 'incisal' does not exist on the platform"):
        plant.set_external_wrench("incisal", WRENCH)
    assert not hook.observer.update(np.full(6, np.nan), np.zeros(6), np.zeros(6))


def write_plots(out):
    from pathlib import Path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = {"exact": ({}, "exact model"),
             "model_errors": ({"viscous_friction": 0.5, "coulomb_friction": 1.0, "coulomb_velocity_scale": 0.01,
                               "mass_scale": 1.1}, "plant: leg friction, 10 % heavier")}
    for tag, (errors, label) in cases.items():
        write_plot(out, tag, errors, label)


def write_plot(out, tag, errors, label):
    from rtctl.loops.observer_plots import plot_wrench_estimate

    loop, hook, plant = stewart_loop(errors)
    omega = 2 * np.pi * 2.0
    rows = push_and_record(loop, hook, plant,
                           lambda t: WRENCH if t < T_ON + 0.5 else WRENCH * np.cos(omega * (t - T_ON - 0.5)))
    loop.run(duration=T_ON + 1.5)
    t = np.arange(len(rows["w"])) * DT
    path, errors = plot_wrench_estimate(
        out / f"stewart_observer_{tag}.png", t, np.array(rows["F"]), np.array(rows["w"]),
        f"Stewart platform, momentum observer K_O = {K_O:g} 1/s; {label}", where="the platform centre",
        windows=[("step, 5/K_O after it", T_ON + 5 / K_O, T_ON + 0.5),
                 ("2 Hz, with the 1/K_O lag", T_ON + 0.5, T_ON + 1.5)])
    print(path, errors)


if __name__ == "__main__":
    write_plots(sys.argv[1] if len(sys.argv) > 1 else ".")


@pytest.mark.slow
def test_an_observer_section_of_a_stewart_run_publishes_the_platform_wrench():
    from pathlib import Path

    import rtctl.plants.stewart as stewart_pkg
    from rtctl.config import ConfigError, read_toml

    raw = read_toml(Path(stewart_pkg.__file__).parent / "stewart.toml")
    raw["loop"]["pace"] = False
    raw["observer"] = {"enabled": True, "gain": 50.0}
    raw["telemetry"] = {"enabled": True, "endpoint": "tcp://127.0.0.1:0"}
    loop = build(validate(raw))
    try:
        hooks = [h for h in loop.hooks if isinstance(h, PlatformObserverHook)]
        assert len(hooks) == 1 and "platform_wrench/fz" in loop.telemetry.extra_names
        plant = loop.drivers[0].plant
        plant.set_external_wrench("platform", np.array([0.0, 0.0, 0.0, 0.0, 0.0, 30.0]))
        loop.run(cycles=400)   # 20 time constants of K_O = 50/s
        fz = hooks[0].telemetry_values[loop.telemetry.extra_names.index("platform_wrench/fz")]
        assert abs(fz - 30.0) < 0.05 * 30.0, fz   # 0.5 N s/m unmodelled leg friction while the platform moves
    finally:
        loop.telemetry.close()
    raw["observer"] = {"enabled": True, "frame": "tool"}
    with pytest.raises(ConfigError, match=r"\[observer\] frame: must be one of \['platform'\], got 'tool'"):
        build(validate(dict(raw, telemetry={})))
