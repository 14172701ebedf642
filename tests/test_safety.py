"""The safety monitor: each trip condition on the stated cycle, clamping, latching, re-arming, safe commands.

The bundled ``arm7`` (finite limits on every joint; limits in the URDF) is the
robot unless a test needs a floating base (``humanoid``) or unbounded joints.
"""
import textwrap
import tracemalloc

import numpy as np
import pytest

from rtctl import bundled_model_path
from rtctl.model import ModelBuilder
from rtctl.model.urdf import load_urdf
from rtctl.rt.interfaces import Command, RobotState, actuated_indices
from rtctl.safety import SafetyError, SafetyMonitor
from rtctl.safety.stop import gravity_bound

from allocation_counter import run_with_allocation_counters


@pytest.fixture(scope="module")
def arm():
    return load_urdf(bundled_model_path("arm7"))


@pytest.fixture(scope="module")
def humanoid():
    return load_urdf(bundled_model_path("humanoid"), "free_flyer")


def good_state(model):
    """Mid-range positions, zero velocity, fresh."""
    state = RobotState(model)
    q_idx, _, _ = actuated_indices(model)
    lo, hi = model.lower[q_idx], model.upper[q_idx]
    with np.errstate(invalid="ignore"):  # inf + -inf for unbounded joints
        state.q[q_idx] = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
    state.fresh = True
    return state


def setup(model, **options):
    """A monitor in the damping safe mode unless ``options`` say otherwise (the hold: test_safe_stop.py)."""
    options.setdefault("safe_mode", "damping")
    return SafetyMonitor(model, **options), good_state(model), Command(model)


def assert_safe_damping(mon, state, command):
    _, v_idx, _ = actuated_indices(mon.model)
    expected = np.zeros(mon.model.nv)
    expected[v_idx] = np.clip(-mon.damping_gain * state.v[v_idx], -mon.model.effort_limit[v_idx],
                              mon.model.effort_limit[v_idx])
    np.testing.assert_array_equal(command.effort, expected)
    assert not command.stiffness.any() and not command.damping.any() and not command.velocity.any()


# -- each trip condition -------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_command_trips_on_the_same_cycle(arm, bad):
    mon, state, command = setup(arm)
    command.effort[:] = 1.0
    assert mon.check(state, command) and not mon.tripped
    command.effort[3] = bad
    assert mon.check(state, command) is False
    assert mon.tripped and mon.cycles == 2 and mon.trip_cycle == 1  # 0-based index of the tripping check
    assert "non-finite command" in mon.trip_reason and "'joint4'" in mon.trip_reason
    assert_safe_damping(mon, state, command)  # v = 0: all zero, and finite


@pytest.mark.parametrize("field,index", [("q", 0), ("q", 6), ("v", 2), ("effort", 5)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_state_trips(arm, field, index, bad):
    mon, state, command = setup(arm)
    assert mon.check(state, command)
    getattr(state, field)[index] = bad
    command.effort[:] = 3.0
    assert mon.check(state, command) is False
    assert mon.tripped and mon.trip_cycle == 1
    assert f"non-finite state: {field}[{index}] (joint 'joint{index + 1}')" in mon.trip_reason
    # damping safe mode falls back to zero torque when v is not finite
    assert np.all(np.isfinite(command.effort))
    if field == "v":
        assert not command.effort.any()


def test_non_finite_floating_base_state_trips(humanoid):
    mon, state, command = setup(humanoid)
    assert mon.check(state, command)
    state.q[4] = np.nan  # base quaternion
    assert not mon.check(state, command)
    assert "q[4] (floating base)" in mon.trip_reason


def test_velocity_breach_trips_and_names_the_joint(arm):
    mon, state, command = setup(arm)
    state.v[2] = 1.74  # limit of joint3: 1.75 rad/s
    state.v[0] = -1.70
    assert mon.check(state, command) and not mon.tripped
    state.v[2] = -2.1
    assert not mon.check(state, command)
    assert mon.trip_reason == "velocity limit: joint 'joint3' |v| = 2.1 rad/s > 1.75"
    assert mon.trip_cycle == 1


def test_velocity_scale_tightens_the_limit(arm):
    mon, state, command = setup(arm, velocity_scale=0.5)
    state.v[6] = 1.5  # joint7 limit 3.14 -> 1.57
    assert mon.check(state, command)
    state.v[6] = 1.6
    assert not mon.check(state, command)
    assert "joint 'joint7'" in mon.trip_reason and "> 1.57" in mon.trip_reason


@pytest.mark.parametrize("side", [-1, 1])
def test_position_outside_soft_limits_trips(arm, side):
    margin = 0.05
    mon, state, command = setup(arm, position_margin=margin)
    hard = arm.upper[1] if side > 0 else arm.lower[1]  # joint2: +-2.09 rad
    state.q[1] = hard - side * 1.5 * margin  # inside the soft range
    assert mon.check(state, command) and not mon.tripped
    state.q[1] = hard - side * 0.5 * margin  # inside the hard limits but past the soft one
    assert not mon.check(state, command)
    assert mon.trip_reason.startswith("position limit: joint 'joint2' q = ")
    assert "soft limits [-2.04, 2.04]" in mon.trip_reason


def test_unbounded_joints_have_no_position_or_velocity_check():
    b = ModelBuilder("free")
    b.add_body("link", -1, "revolute", axis=(0, 0, 1), mass=1.0, inertia=np.eye(3) * 0.01)
    model = b.build()
    mon, state, command = setup(model)
    state.q[0], state.v[0], command.effort[0] = 1e6, 1e6, 1e6
    assert mon.check(state, command)
    np.testing.assert_array_equal(mon.damping_gain, [1.0])  # default where limits are infinite


def test_stale_state_trips_after_exactly_watchdog_plus_one_cycles(arm):
    w = 5
    mon, state, command = setup(arm, watchdog_cycles=w)
    state.fresh = False
    for _ in range(w - 1):  # a run of w-1 stale cycles, then a fresh one, resets the count
        assert mon.check(state, command)
    state.fresh = True
    assert mon.check(state, command)
    state.fresh = False
    for k in range(w):
        assert mon.check(state, command), f"tripped after only {k + 1} stale cycles"
    assert not mon.tripped
    assert mon.check(state, command) is False  # the (w+1)-th consecutive stale cycle
    assert mon.tripped and mon.trip_cycle == mon.cycles - 1 == (w - 1) + 1 + w
    assert mon.trip_reason == f"stale state: no fresh sample for {w + 1} consecutive cycles (watchdog {w})"


def test_estop_trips_immediately_and_the_next_check_is_safe(arm):
    mon, state, command = setup(arm)
    assert mon.check(state, command)
    mon.estop("operator pressed stop")
    assert mon.tripped and mon.trip_cycle == 1
    assert mon.trip_reason == "e-stop: operator pressed stop"
    command.effort[:] = 7.0
    command.stiffness[:] = 100.0
    assert not mon.check(state, command)
    assert_safe_damping(mon, state, command)
    assert mon.events[0] == (1, "trip", "e-stop: operator pressed stop")


def test_driver_fault_trips(arm):
    mon, state, command = setup(arm)
    assert mon.check(state, command)
    command.effort[:] = 2.0
    assert not mon.check(state, command, driver_fault=True, reason="bus timeout")
    assert mon.trip_reason == "driver fault: bus timeout" and mon.trip_cycle == 1
    assert_safe_damping(mon, state, command)

    mon2, state, command = setup(arm)
    mon2.report_fault("encoder 3 lost")
    assert mon2.tripped and mon2.trip_reason == "driver fault: encoder 3 lost" and mon2.trip_cycle == 0
    command.effort[:] = 2.0
    assert not mon2.check(state, command)
    assert_safe_damping(mon2, state, command)


# -- effort clamping ------------------------------------------------------------------------

def test_effort_clamp_is_exact_and_does_not_trip(arm):
    mon, state, command = setup(arm)
    request = np.array([-1000.0, 10.0, 110.0, -110.5, 0.0, 40.0000001, -55.0])
    for _ in range(10):
        command.effort[:] = request
        assert mon.check(state, command) and not mon.tripped
        np.testing.assert_array_equal(command.effort, [-176.0, 10.0, 110.0, -110.0, 0.0, 40.0, -40.0])
    assert mon.clamp_count == 10
    clamps = [e for e in mon.events if e[1] == "clamp"]
    assert len(clamps) == 1  # one event for the burst
    assert clamps[0][0] == 0 and "joint 'joint1'" in clamps[0][2] and "clamped to -176" in clamps[0][2]
    command.effort[:] = 0.0
    assert mon.check(state, command)  # the burst ends
    command.effort[:] = request
    assert mon.check(state, command)
    assert [e[0] for e in mon.events if e[1] == "clamp"] == [0, 11]
    assert mon.clamp_count == 11


def test_effort_over_limit_trips_when_clamping_is_off(arm):
    mon, state, command = setup(arm, effort_clamp=False)
    command.effort[5] = 40.0
    assert mon.check(state, command)
    command.effort[5] = 41.0
    assert not mon.check(state, command)
    assert mon.trip_reason == "effort limit: joint 'joint6' |effort| = 41 N m > 40"
    assert mon.clamp_count == 0


# -- latching and re-arming ------------------------------------------------------------------

def test_latched_command_stays_safe_for_100_good_cycles(arm):
    mon, state, command = setup(arm)
    state.v[3] = 5.0  # trip on velocity
    assert not mon.check(state, command)
    state.v[:] = np.linspace(-0.3, 0.3, 7)  # good state from now on
    for _ in range(100):
        command.effort[:] = 20.0  # what a controller would ask for
        command.stiffness[:] = 50.0
        command.damping[:] = 2.0
        assert mon.check(state, command) is False
        assert mon.tripped
        assert_safe_damping(mon, state, command)
    assert mon.cycles == 101 and mon.trip_cycle == 0
    assert "joint 'joint4'" in mon.trip_reason  # the first cause is kept


def test_rearm_fails_while_the_cause_persists_and_succeeds_after(arm):
    mon, state, command = setup(arm)
    state.v[2] = 2.1
    assert not mon.check(state, command)
    for _ in range(3):
        assert not mon.check(state, command)
        with pytest.raises(SafetyError, match=r"velocity limit: joint 'joint3' \|v\| = 2.1 rad/s > 1.75"):
            mon.rearm()
        assert mon.tripped
    state.v[2] = 0.5
    assert not mon.check(state, command)  # still latched until re-armed
    mon.rearm()
    assert not mon.tripped and mon.trip_reason == ""
    assert mon.events[-1][1] == "rearm"
    command.effort[:] = 3.0
    assert mon.check(state, command)
    np.testing.assert_array_equal(command.effort, 3.0)  # passed through untouched


def test_rearm_needs_a_fresh_state_after_a_watchdog_trip(arm):
    mon, state, command = setup(arm, watchdog_cycles=1)
    state.fresh = False
    mon.check(state, command)
    assert not mon.check(state, command)
    with pytest.raises(SafetyError, match="stale state"):
        mon.rearm()
    state.fresh = True
    mon.check(state, command)
    mon.rearm()
    assert mon.check(state, command)


def test_rearm_fails_while_the_driver_fault_is_reported(arm):
    mon, state, command = setup(arm)
    for _ in range(3):
        assert not mon.check(state, command, driver_fault=True, reason="overcurrent")
    with pytest.raises(SafetyError, match="driver fault still reported: overcurrent"):
        mon.rearm()
    assert not mon.check(state, command)
    mon.rearm()
    assert mon.check(state, command)


def test_rearm_fails_for_a_non_finite_last_state_and_before_any_check(arm):
    mon, state, command = setup(arm)
    mon.estop()
    with pytest.raises(SafetyError, match="no state has been checked"):
        mon.rearm()
    state.q[1] = np.nan
    mon.check(state, command)
    with pytest.raises(SafetyError, match=r"non-finite state: q\[1\]"):
        mon.rearm()
    state.q[1] = 0.0
    mon.check(state, command)
    mon.rearm()
    assert not mon.tripped


# -- the safe commands -------------------------------------------------------------------------

def test_damping_mode_produces_minus_d_v(arm):
    """The default gain: 0.1 effort_limit / velocity_limit, or where gravity needs more (joints 2-5 of the arm),
    twice the model's bound of the joint's gravity torque over its velocity limit (test_safe_stop.py)."""
    mon, state, command = setup(arm)
    default = np.maximum(0.1 * arm.effort_limit / arm.velocity_limit, 2.0 * gravity_bound(arm) / arm.velocity_limit)
    np.testing.assert_allclose(mon.damping_gain, default)
    assert np.all(mon.damping_gain[1:5] > 0.1 * arm.effort_limit[1:5] / arm.velocity_limit[1:5])
    state.v[:] = [0.5, -1.0, 0.2, 1.5, -2.0, 0.1, -0.7]
    mon.estop()
    assert not mon.check(state, command)
    np.testing.assert_allclose(command.effort, np.clip(-default * state.v, -arm.effort_limit, arm.effort_limit),
                               rtol=0, atol=1e-12)

    mon, state, command = setup(arm, damping_gain=100.0)
    state.v[:] = 0.25
    mon.estop()
    mon.check(state, command)
    np.testing.assert_array_equal(command.effort, -25.0)


def test_damping_command_is_limited_to_the_effort_limit(arm):
    mon, state, command = setup(arm, damping_gain=1000.0)
    state.v[0] = 1.0
    mon.estop()
    mon.check(state, command)
    assert command.effort[0] == -176.0


def test_zero_torque_mode_zeros(arm):
    mon, state, command = setup(arm, safe_mode="zero_torque")
    state.v[:] = 1.0
    command.effort[:] = 5.0
    command.stiffness[:] = 80.0
    command.damping[:] = 3.0
    mon.estop()
    assert not mon.check(state, command)
    assert not command.effort.any() and not command.stiffness.any() and not command.damping.any()


def test_floating_base_rows_are_zero_in_the_safe_command(humanoid):
    mon, state, command = setup(humanoid)
    state.v[:] = 0.5
    command.effort[:] = 9.0
    mon.estop()
    mon.check(state, command)
    assert not command.effort[:6].any()
    _, v_idx, _ = actuated_indices(humanoid)
    np.testing.assert_allclose(command.effort[v_idx], -0.5 * mon.damping_gain)


# -- construction -----------------------------------------------------------------------------------

@pytest.mark.parametrize("options,name", [
    (dict(safe_mode="brake"), "safe_mode"),
    (dict(position_margin=-0.01), "position_margin"),
    (dict(position_margin=3.0), "position_margin"),  # leaves no range
    (dict(velocity_scale=-1.0), "velocity_scale"),
    (dict(velocity_scale=0.0), "velocity_scale"),
    (dict(damping_gain=-0.5), "damping_gain"),
    (dict(damping_gain=[1.0, 2.0]), "damping_gain"),
    (dict(watchdog_cycles=0), "watchdog_cycles"),
    (dict(watchdog_cycles=2.5), "watchdog_cycles"),
])
def test_invalid_options_raise_naming_the_parameter(arm, options, name):
    with pytest.raises(ValueError, match=name):
        SafetyMonitor(arm, **options)


# -- no allocation on the per-cycle path -----------------------------------------------------------------

def _net_growth(fn, calls):
    """Bytes still allocated after ``calls`` calls of ``fn`` (tracemalloc's own bookkeeping excluded)."""
    fn()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(calls):
            fn()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    diff = after.filter_traces(keep).compare_to(before.filter_traces(keep), "lineno")
    return sum(d.size_diff for d in diff if d.size_diff > 0), [d for d in diff if d.size_diff > 0]


def test_check_retains_no_memory_over_500_calls(humanoid):
    mon, state, command = setup(humanoid)
    rng = np.random.default_rng(1)
    state.v[:] = rng.uniform(-1, 1, humanoid.nv)

    def armed():
        command.effort[:] = 1.0  # in place
        assert mon.check(state, command)

    def clamping():
        command.effort[10] = 1e4
        assert mon.check(state, command)

    def latched():
        assert not mon.check(state, command)

    for fn in (armed, clamping):
        grown, where = _net_growth(fn, 500)
        assert grown < 500, where  # less than a byte per call: nothing kept per call
    mon.estop()
    grown, where = _net_growth(latched, 500)
    assert grown < 500, where


NRT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl import bundled_model_path
    from rtctl.model.urdf import load_urdf
    from rtctl.rt.interfaces import Command, RobotState
    from rtctl.safety import SafetyMonitor, _safety_cycle

    @njit
    def cycles(n, q, v, tau, e, kp, kd, vel, force, qi, vi, lim, ctl, val):
        codes = 0
        for _ in range(n):
            e[3] = 1e5  # clamped every cycle
            codes += _safety_cycle(q, v, tau, e, kp, kd, vel, True, force, qi, vi, lim, ctl, val)
        return codes

    model = load_urdf(bundled_model_path("humanoid"), "free_flyer")
    mon = SafetyMonitor(model)
    st, cmd = RobotState(model), Command(model)
    st.q[mon.q_index] = 0.5 * (model.lower[mon.q_index] + model.upper[mon.q_index])
    st.v[:] = 0.1
    for force in (False, True):  # the armed/clamping path, then the latched (safe command) path
        args = (st.q, st.v, st.effort, cmd.effort, cmd.stiffness, cmd.damping, cmd.velocity, force,
                mon.q_index, mon.v_index, mon._lim, mon._ctl, mon._val)
        cycles(1, *args)  # compile
        counts = allocations(cycles, *args, status=False)
        print("force_safe", force, "allocations for 1 and 300 checks:", counts)
        assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_kernel_allocates_nothing_numba_nrt():
    out = run_with_allocation_counters(NRT_SCRIPT)
    assert out.strip().endswith("OK")
