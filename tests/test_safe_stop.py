"""The safe states stop a loaded arm: the hold inside its limits, the damping only as strong as gravity needs.

The demo arm and an example-robot-data arm (UR5), each carrying a payload the controller's model does not
know, are e-stopped at their move's peak speed in the default safe state (the hold, where the model carries
the robot's weight): from the e-stop on no joint exceeds its velocity limit, none reaches a hard limit, all
are at rest (|v| < 1e-3 rad/s, the plant's true velocity) within 1.5 s, and a re-arm would be accepted at
every cycle. The shipped damping (0.1 effort / velocity limit) let the loaded demo arm fall at 3.2x joint 2's
velocity limit onto its hard limit; it is now refused naming the joint, and the damping the model shows
sufficient keeps the arm under its limits but still moving after 1.5 s. A hold needs a trusted state: a
non-finite state, a stale one or a driver fault puts the latch on damping (or zero torque without finite
velocities) with an event saying which and why.
"""
import math
import textwrap

import numpy as np
import pytest

from rtctl import bundled_model_path
from rtctl.config import ConfigError, DEMO_CONFIG, build, load_config
from rtctl.dynamics import Dynamics
from rtctl.model.urdf import load_urdf
from rtctl.rt.interfaces import Command, RobotState, actuated_indices
from rtctl.rt.stability import Sampling
from rtctl.safety import SafetyMonitor
from rtctl.safety.stop import gravity_bound

from allocation_counter import run_with_allocation_counters

PEAK = 1.25            # s: the demo's move (t0 0.25 s, 2 s long) is at its peak speed
AT_REST = 1e-3         # rad/s
SETTLE = 1.5           # s after the e-stop


@pytest.fixture(scope="module")
def arm():
    return load_urdf(bundled_model_path("arm7"))


def ur5_path():
    from importlib.metadata import PackageNotFoundError, files
    try:
        found = [f for f in files("example-robot-data") or [] if f.name == "ur5_robot.urdf"]
    except PackageNotFoundError:
        found = []
    if not found:
        pytest.skip("example-robot-data (a test extra) is not installed")
    return str(found[0].locate())


def estopped_run(cfg, t_stop, after=2.0):
    """Run ``cfg`` offline with an e-stop at ``t_stop``; per cycle from the e-stop on: the plant's true
    (t, q, v) and whether a re-arm would be refused (:meth:`SafetyMonitor.rearm_blockers`)."""
    cfg["loop"]["pace"] = False
    cfg["schedule"] = [{"t": t_stop, "cmd": "estop", "reason": "test"}]
    loop = build(cfg)
    plant = loop.driver.plant
    rows, blocked = [], []

    def watch(lp):
        if lp.safety.tripped:
            rows.append((lp.cycle * lp.period, *plant.q, *plant.v))
            blocked.append(lp.safety.rearm_blockers(lp.state))
    loop.boundary_hooks.append(watch)
    loop.run(duration=t_stop + after)
    rows = np.array(rows)
    n = loop.model.nv
    return loop, rows[:, 0], rows[:, 1:1 + n], rows[:, 1 + n:], blocked


def assert_stopped_inside_the_limits(loop, t, q, v, blocked, t_stop):
    m = loop.model
    assert loop.safety.safe_mode == "hold" and not loop.safety.fallback
    assert t[0] == pytest.approx(t_stop, abs=2 * loop.period)
    peak = np.abs(v).max(axis=0)
    assert np.all(peak < m.velocity_limit), (peak / m.velocity_limit).round(3)
    assert np.all(q > m.lower) and np.all(q < m.upper)
    settled = t >= t_stop + SETTLE
    assert settled.sum() > 100 and np.abs(v[settled]).max() < AT_REST, np.abs(v[settled]).max()
    assert not any(blocked), next(b for b in blocked if b)  # a re-arm would go through at every cycle
    return peak


@pytest.mark.slow
def test_the_loaded_demo_arm_estopped_at_peak_speed_holds_inside_its_limits_and_may_rearm_at_once():
    cfg = load_config(DEMO_CONFIG)
    cfg["plant"]["payload_mass"] = 3.0
    loop, t, q, v, blocked = estopped_run(cfg, PEAK)
    peak = assert_stopped_inside_the_limits(loop, t, q, v, blocked, PEAK)
    assert peak[1] > 0.25 * loop.model.velocity_limit[1]  # it was moving: joint 2 at 0.47 rad/s
    assert any(kind == "safe" and "hold: decelerating to rest" in detail for _, kind, detail in loop.safety.events)

    cfg = load_config(DEMO_CONFIG)
    cfg["plant"]["payload_mass"] = 3.0
    cfg["safety"]["safe_mode"] = "damping"   # the gain the model shows sufficient: under the limits, still falling
    loop, t, q, v, _ = estopped_run(cfg, PEAK)
    assert np.all(np.abs(v).max(axis=0) < loop.model.velocity_limit)
    assert np.abs(v[t >= PEAK + SETTLE]).max() > 100 * AT_REST


@pytest.mark.slow
def test_a_loaded_ur5_estopped_at_peak_speed_holds_inside_its_limits_and_may_rearm_at_once(tmp_path):
    path = tmp_path / "ur5.toml"
    path.write_text(textwrap.dedent(f"""
        [robot]
        model = "{ur5_path()}"
        [plant]
        payload_mass = 3.0
        initial_position = [0.0, -1.2, 1.0, -1.2, -1.57, 0.0]
        [controller]
        type = "computed_torque"
        [trajectory]
        type = "min_jerk"
        goal = [1.0, -0.2, 0.2, -0.4, -0.8, 0.8]
        duration = 1.0
        t0 = 0.25
    """))
    loop, t, q, v, blocked = estopped_run(load_config(path), 0.75)
    peak = assert_stopped_inside_the_limits(loop, t, q, v, blocked, 0.75)
    assert peak.max() > 0.5 * loop.model.velocity_limit.max()   # 1.9 rad/s of 3.15


@pytest.mark.slow
def test_a_joint_over_its_soft_limit_stops_short_of_its_hard_limit():
    """Joint 2 (held near its soft limit, 2.04 rad) is thrown beyond it, to 2.045 rad at 1 rad/s: the hold
    stops it within 0.045 rad, short of the hard limit (2.09 rad); the damping lets gravity carry it into the
    stop."""
    def run(mode):
        cfg = load_config(DEMO_CONFIG)
        cfg["loop"]["pace"] = False
        cfg["safety"]["safe_mode"] = mode
        q0 = [0.0, 1.95, 0.0, 0.0, 0.0, 0.0, 0.0]
        cfg["plant"]["initial_position"] = cfg["trajectory"]["goal"] = q0
        loop = build(cfg)
        plant = loop.driver.plant
        loop.boundary_hooks.append(lambda lp: plant.reset(np.r_[0.0, 2.045, [0.0] * 5], np.r_[0.0, 1.0, [0.0] * 5])
                                   if lp.cycle == 10 else None)
        highest = []
        loop.hooks.append(lambda c, t, s, cmd: highest.append(plant.q[1]))
        loop.run(duration=1.0)
        assert "position limit: joint 'joint2'" in loop.safety.trip_reason
        return max(highest), loop
    hold, loop = run("hold")
    assert hold < loop.model.upper[1] - 0.01 and not loop.safety.fallback
    damping, _ = run("damping")
    assert damping > loop.model.upper[1]


# -- the hold's command and its fallbacks -------------------------------------------------------------------

def held(model, **options):
    mon = SafetyMonitor(model, safe_mode="hold", sampling=Sampling(1e-3), **options)
    state, command = RobotState(model), Command(model)
    q_idx, _, _ = actuated_indices(model)
    state.q[q_idx] = 0.3 * model.upper[q_idx]
    state.fresh = True
    return mon, state, command


def test_at_rest_the_hold_is_the_models_gravity_compensation(arm):
    mon, state, command = held(arm)
    mon.estop()
    for _ in range(3):
        assert not mon.check(state, command)
        np.testing.assert_allclose(command.effort, Dynamics(arm).gravity_forces(state.q), rtol=1e-12, atol=1e-12)
    assert not command.stiffness.any() and not command.damping.any() and not command.velocity.any()


def test_the_hold_decelerates_at_half_the_effort_over_the_inertia_and_then_holds_where_it_stopped(arm):
    """From v0 the reference decelerates all joints together in T = max |v0_j| M_jj / (0.5 effort_j): the first
    command is ID(q, v, -v0 / T); after T (+ one cycle) the reference rests at q0 + v0 T / 2."""
    mon, state, command = held(arm)
    dyn = Dynamics(arm)
    state.v[:] = [0.3, -0.5, 0.2, 0.8, -0.4, 0.6, 0.1]
    q0, v0 = state.q.copy(), state.v.copy()
    duration = np.max(np.abs(v0) * np.diag(dyn.mass_matrix(q0)) / (0.5 * arm.effort_limit))
    mon.estop()
    mon.check(state, command)
    np.testing.assert_allclose(command.effort, dyn.inverse_dynamics(q0, v0, -v0 / duration), rtol=1e-9)
    assert f"decelerating to rest in {duration:.3g} s" in mon.events[-1][2]
    state.v[:] = 0.0
    for _ in range(math.ceil(duration / 1e-3) + 1):
        mon.check(state, command)
    target = q0 + 0.5 * v0 * duration
    np.testing.assert_allclose(command.effort, dyn.inverse_dynamics(state.q, state.v, 400.0 * (target - state.q)),
                               rtol=1e-9)


@pytest.mark.parametrize("spoil,where,fallback", [
    (lambda s, m: s.q.__setitem__(2, np.nan), "non-finite state: q[2] (joint 'joint3') = nan",
     "damping instead (it needs only the measured velocities)"),
    (lambda s, m: s.v.__setitem__(4, np.inf), "non-finite state: v[4] (joint 'joint5') = inf",
     "zero torque instead (a velocity is not finite: nothing to damp with; damping once they all are)"),
    (lambda s, m: m.report_fault("bus off"), "driver fault: bus off",
     "damping instead (it needs only the measured velocities)"),
    (lambda s, m: setattr(s, "fresh", False), "stale state: no fresh sample for 6 consecutive cycles (watchdog 5)",
     "damping instead (it needs only the measured velocities)"),
])
def test_an_untrusted_state_puts_the_latch_on_damping_or_zero_torque_saying_which_and_why(arm, spoil, where,
                                                                                         fallback):
    """Whether the state goes bad before the trip or while holding, the fallback lasts the latch (a good
    state again does not bring the hold back) until a re-arm; the next trip holds again."""
    for while_holding in (False, True):
        mon, state, command = held(arm)
        state.v[:] = 0.2
        if while_holding:
            mon.estop()
            mon.check(state, command)
            assert mon.events[-1][1] == "safe" and not mon.fallback
        spoil(state, mon)
        for _ in range(6):
            mon.check(state, command)
        assert mon.tripped and mon.fallback == f"hold abandoned ({where}): {fallback}"
        assert mon.events[-1][1:] == ("safe", mon.fallback)
        good = held(arm)[1]
        good.v[:] = 0.2
        mon.check(good, command)
        np.testing.assert_allclose(command.effort, -mon.damping_gain * 0.2)  # still the fallback
        mon.rearm(good)
        assert not mon.fallback
        mon.estop()
        mon.check(good, command)
        assert not mon.fallback and "hold: decelerating" in mon.events[-1][2]


def test_the_hold_needs_a_model_that_carries_the_weight_and_is_the_default_only_there(arm):
    from rtctl.plants.jaw.model import jaw_model
    assert SafetyMonitor(arm).safe_mode == "hold"
    jaw = jaw_model()
    assert SafetyMonitor(jaw, position_margin=0.002).safe_mode == "damping"
    with pytest.raises(ValueError, match=r"safe_mode 'hold' is not possible: model 'jaw' carries no mass behind "
                                         r"joints \['leg1'"):
        SafetyMonitor(jaw, position_margin=0.002, safe_mode="hold")
    humanoid = load_urdf(bundled_model_path("humanoid"), "free_flyer")
    assert SafetyMonitor(humanoid).safe_mode == "damping"
    with pytest.raises(ValueError, match="floating base"):
        SafetyMonitor(humanoid, safe_mode="hold")


def test_hold_gains_beyond_the_loops_stability_are_refused_naming_the_bound(tmp_path):
    path = tmp_path / "stiff.toml"
    path.write_text(DEMO_CONFIG.read_text().replace('safe_mode = "hold"', 'safe_mode = "hold"\nhold_kd = 2500.0'))
    with pytest.raises(ConfigError, match=r"\[safety\] hold_kp, hold_kd: joint 'joint1': kp = 400 1/s\^2, "
                                          r"kd = 2500 1/s make the loop sampled every 1 ms .* kd must lie in "
                                          r"\(0\.2, 2000\) 1/s"):
        build(load_config(path))


# -- the damping gravity needs ------------------------------------------------------------------------------

def test_the_gravity_bound_holds_everywhere_and_is_reached_where_the_arm_reaches_out(arm):
    """Above |g_j(q)| over 20000 random configurations of the arm; for joint 2 (shoulder) within 2 % of the
    largest seen, and exactly 0 for joint 1, whose axis is vertical."""
    bound = gravity_bound(arm)
    dyn = Dynamics(arm)
    rng = np.random.default_rng(7)
    seen = np.zeros(arm.nv)
    for q in rng.uniform(arm.lower, arm.upper, size=(20000, arm.nq)):
        seen = np.maximum(seen, np.abs(dyn.gravity_forces(q)))
    assert np.all(bound >= seen)
    assert bound[0] == 0.0 and seen[1] > 0.98 * bound[1]


def test_a_damping_too_weak_for_gravity_is_refused_naming_the_joint(arm, tmp_path):
    """The old default 0.1 effort / velocity limit (10.3 N m s/rad on joint 2) let the loaded demo arm fall at
    5.4 rad/s onto joint 2's hard limit."""
    with pytest.raises(ValueError, match=r"damping: joint 'joint2': damping_gain 10\.29 lets gravity \(59\.34 N m "
                                         r"at most, as the model shows\) drive it to 5\.765 rad/s, beyond its "
                                         r"velocity limit 1\.71 rad/s; it needs at least 34\.7"):
        SafetyMonitor(arm, safe_mode="damping", damping_gain=0.1 * arm.effort_limit / arm.velocity_limit)
    path = tmp_path / "weak.toml"
    path.write_text(DEMO_CONFIG.read_text().replace('safe_mode = "hold"', 'safe_mode = "damping"\ndamping_gain = 10.0'))
    with pytest.raises(ConfigError, match=r"\[safety\] damping: joint 'joint2'"):
        build(load_config(path))


@pytest.mark.slow
def test_a_holding_loop_keeps_no_memory_from_cycle_to_cycle():
    import rtctl.safety as safety
    import rtctl.safety.stop as stop
    from allocation_counter import retained_per_cycle
    cfg = load_config(DEMO_CONFIG)
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    loop.safety.estop("test")
    assert retained_per_cycle(loop, [safety, stop]) == []
    assert loop.safety.tripped and loop.safety.events[-1][2].startswith("hold: decelerating")


@pytest.mark.slow
def test_the_latched_hold_allocates_nothing():
    out = run_with_allocation_counters(textwrap.dedent("""
        import numpy as np
        from numba import njit
        from rtctl import bundled_model_path
        from rtctl.model.urdf import load_urdf
        from rtctl.rt.interfaces import Command, RobotState
        from rtctl.rt.stability import Sampling
        from rtctl.safety import SafetyMonitor, _latched_hold

        @njit
        def cycles(n, q, v, e, qi, vi, mi, mf, ws, plan, clock, mass, alpha, tau, ctl):
            codes = 0
            for k in range(n):
                codes += _latched_hold(k == 0, q, v, e, qi, vi, mi, mf, ws, plan, clock, mass, alpha, tau, ctl)
            return codes

        model = load_urdf(bundled_model_path("arm7"))
        mon = SafetyMonitor(model, safe_mode="hold", sampling=Sampling(1e-3))
        st, cmd = RobotState(model), Command(model)
        st.v[:] = 0.3
        h = mon._hold
        args = (st.q, st.v, cmd.effort, mon.q_index, mon.v_index, h.dyn.mi, h.dyn.mf, h.dyn.ws, h.plan, h.clock,
                h.mass, h.alpha, h.tau, mon._ctl)
        mon._ctl[8] = 0  # C_STATE_CODE: a checked, finite state
        assert cycles(1, *args) == 0
        counts = allocations(cycles, *args, status=False)
        print("allocations for 1 and 300 held cycles:", counts)
        assert counts[0] == counts[1], counts
        print("OK")
    """))
    assert out.strip().endswith("OK")


@pytest.mark.slow
def test_the_jaw_robots_damping_lets_its_weight_open_the_patients_jaw():
    """The jaw robot's safe state is damping (its actuator-space model carries no mass: no hold). Its legs then
    carry nothing: e-stopped mid-chew, the robot sinks until the patient's tissue carries its weight (the
    patient's z force equals stiffness x opening, upwards), the jaw open beyond the therapist's max_opening;
    zero torque ends in the same place (damping only slows the fall)."""
    from rtctl.config import bundled_config_path
    openings = []
    for mode in ("damping", "zero_torque"):
        cfg = load_config(bundled_config_path("jaw"))
        cfg["loop"]["pace"] = False
        cfg["safety"]["safe_mode"] = mode
        cfg["schedule"] = [{"t": 0.8, "cmd": "estop", "reason": "the patient raised a hand"}]
        loop = build(cfg)
        assert loop.safety.safe_mode == mode
        loop.run(duration=2.6)
        plant = loop.driver.plant
        opening = -plant.incisal[2]
        assert np.abs(plant.xd).max() < 1e-3 and opening > cfg["therapist"]["max_opening"]
        assert plant.patient_force[2] == pytest.approx(plant.impedance.stiffness[2] * opening, rel=1e-3)
        openings.append(opening)
    assert openings[0] == pytest.approx(openings[1], rel=1e-2)
