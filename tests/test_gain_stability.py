"""Gains are bounded by the stability of the sampled loop (rtctl.rt.stability), and the bound is the truth.

The declared maxima (kp = 1e5, kd = 1e4) at 1 kHz made the demo's holding arm chatter (peak |qd| 1.4 rad/s,
the effort at its 176 N m limit where it was 36); they are refused from TOML and from the control channel,
naming the bound. Along the ray kp = 10 kd (the maxima's ratio), in 4 % steps, every accepted pair holds the
demo still (peak |qd| <= 0.05 rad/s over 1 s, the plant's true velocity, held at the demo's goal) and the first
refused pair is within 10 % of the first that is not: without latency and with one cycle of it (the bound
halves). The Jury test agrees with the roots of the polynomial, and its region with the closed form.
"""
import numpy as np
import pytest

from rtctl.config import ConfigError, DEMO_CONFIG, build, load_config
from rtctl.rt.stability import (Sampling, characteristic_polynomial, euler_position_share, kd_interval, pd_stable,
                                schur_stable)
from rtctl.operator.control import ControlServer
from rtctl.operator.requests import Refused

GOAL = [0.6, 0.5, -0.4, -1.0, 0.5, 0.6, 0.3]
STILL = 0.05  # rad/s


def holding_demo(latency=0, **plant):
    cfg = load_config(DEMO_CONFIG)
    cfg["loop"]["pace"] = False
    cfg["plant"]["initial_position"] = cfg["trajectory"]["goal"] = GOAL
    cfg["plant"].update(plant)
    cfg["driver"]["latency_cycles"] = latency
    return build(cfg)


def peak_speed(loop, kp, kd):
    """Peak |qd| of the plant over 1 s of holding with gains (kp, kd), set behind the checks' back."""
    plant = loop.driver.plant
    plant.reset(np.array(GOAL))
    loop.controller.kp[:], loop.controller.kd[:] = kp, kd
    peak = np.zeros(1)
    loop.hooks[:] = [lambda c, t, s, cmd: np.maximum(peak, np.abs(plant.v).max(), out=peak)]
    loop.run(duration=1.0)
    return float(peak[0])


@pytest.mark.parametrize("latency", [0, 1])
@pytest.mark.slow
def test_the_first_refused_gains_are_within_10_percent_of_the_first_unstable_ones(latency):
    loop = holding_demo(latency)
    q = np.array(GOAL)
    ray = [(10.0 * kd, kd) for kd in 200.0 * 1.04 ** np.arange(70)]  # kd 200 ... 2900 1/s
    accepted = [not loop.controller.gain_violation(kp, kd, loop.sampling, q) for kp, kd in ray]
    first_refused = accepted.index(False)
    assert all(accepted[:first_refused]) and not any(accepted[first_refused:])
    for k in [*range(0, first_refused, 12), first_refused - 1]:   # accepted: still
        assert peak_speed(loop, *ray[k]) <= STILL, ray[k]
    first_unstable = next(k for k in range(first_refused, len(ray)) if peak_speed(
        holding_demo(latency) if loop.safety.tripped else loop, *ray[k]) > STILL)
    assert ray[first_unstable][1] <= 1.1 * ray[first_refused][1], (ray[first_refused], ray[first_unstable])


def test_the_declared_maxima_are_refused_from_toml_and_the_control_channel_naming_the_bound(tmp_path):
    loop = holding_demo()
    assert peak_speed(loop, 1e5, 1e4) > 1.0  # what they did: chatter at the effort limit
    bound = (r"joint 'joint1': kp = 100000 1/s\^2, kd = 10000 1/s make the loop sampled every 1 ms \(zero-order "
             r"hold\) unstable: with this kp, kd must lie in \(50, 2000\) 1/s \(Jury criterion")
    path = tmp_path / "stiff.toml"
    path.write_text(DEMO_CONFIG.read_text().replace("kp = 400.0", "kp = 100000.0\nkd = 10000.0"))
    with pytest.raises(ConfigError, match=r"stiff\.toml: \[controller\] " + bound):
        build(load_config(path))
    server = ControlServer(holding_demo())
    with pytest.raises(Refused, match="set_gains: " + bound):
        server.apply_now({"cmd": "set_gains", "kp": 1e5, "kd": 1e4})
    with pytest.raises(Refused, match=r"set_gains: joint 'joint1': kp = 400 1/s\^2, kd = 2100 1/s .* \(0\.2, 2000\)"):
        server.apply_now({"cmd": "set_gains", "kd": 2100.0})   # with the kp in use
    assert "kp=[20000.0" in server.apply_now({"cmd": "set_gains", "kp": 2e4, "kd": 1500.0})
    assert "kd=[1999.0" in server.apply_now({"cmd": "set_gains", "kd": 1999.0})


def test_a_torque_level_pd_is_bounded_through_the_joints_effective_inertia():
    """pd_gravity on the demo arm, straight up: the wrist (joint 7) moves 0.0504 kg m^2 (0.05 of it the reflected
    rotor), so kd beyond 2 m / T = 100.77 N m s/rad is refused there, the first joint it is beyond."""
    cfg = load_config(DEMO_CONFIG)
    cfg["controller"].update(type="pd_gravity", kp=400.0, kd=105.0)
    with pytest.raises(ConfigError, match=r"\[controller\] joint 'joint7': kp = 400 N m/rad \(N/m\), kd = 105 "
                                          r"N m s/rad \(N s/m\) \(effective inertia 0\.05038\) make the loop .* "
                                          r"unstable: with this kp, kd must lie in \(0\.2, 100\.765\) N m s/rad"):
        build(cfg)
    cfg["controller"]["kd"] = 100.0
    build(cfg)


def test_the_jury_test_agrees_with_the_roots_and_the_closed_form():
    rng = np.random.default_rng(3)
    for _ in range(3000):
        sampling = Sampling(1e-3, int(rng.integers(0, 3)), float(rng.choice([0.5, 0.75, 1.0])))
        kp, kd = 10 ** rng.uniform(1, 6.8), 10 ** rng.uniform(0, 3.6)
        radius = np.abs(np.roots(characteristic_polynomial(kp, kd, sampling))).max()
        if abs(radius - 1.0) > 1e-9:
            assert schur_stable(characteristic_polynomial(kp, kd, sampling)) == (radius < 1.0)
    t = 1e-3
    for kp in (400.0, 2e4, 1e6, 3.9e6):
        low, high = kd_interval(kp, Sampling(t))
        assert low == pytest.approx(kp * t / 2, rel=1e-6) and high == pytest.approx(2 / t, rel=1e-9)
    assert kd_interval(4.1e6, Sampling(t)) is None
    assert pd_stable(0.0, 1999.0, Sampling(t)) and not pd_stable(0.0, 2001.0, Sampling(t))
    assert euler_position_share(1) == 1.0 and euler_position_share(4) == 0.625


@pytest.mark.slow
def test_the_plant_integrator_enters_the_bound():
    """Semi-implicit Euler moves the position by T^2 u per step (c = 1, not 1/2): the bound on kd for kp = 2e4 is
    1990 1/s instead of 2000; the loop built on it uses that, and the simulated loop agrees (1980 still, 2000
    not). The Rosenbrock-W plant, exact on a constant acceleration like RK4, keeps 2000 (1980 still, 2020 not)."""
    loop = holding_demo(integrator="semi_implicit_euler")
    assert loop.sampling.position_share == 1.0
    high = kd_interval(2e4, loop.sampling)[1]
    assert high == pytest.approx(1990.0, rel=1e-9)
    assert peak_speed(loop, 2e4, 1980.0) <= STILL < peak_speed(loop, 2e4, 2000.0)
    loop = holding_demo(integrator="rosenbrock")
    assert kd_interval(2e4, loop.sampling)[1] == pytest.approx(2000.0, rel=1e-9)
    assert peak_speed(loop, 2e4, 1980.0) <= STILL < peak_speed(holding_demo(integrator="rosenbrock"), 2e4, 2020.0)
