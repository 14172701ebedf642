"""CAN HIL: the rtctl loop at 500 Hz against emulator processes on a loopback CAN bus server.

Stated bounds (2-link arm, computed torque kp 400, sinusoids of 0.3 rad): max tracking error < 0.15 rad
on a run that kept its timing (fewer than 10 % of cycles overran and fewer than 5 % saw a reply missing),
< 0.25 rad otherwise and with 10 % dropped replies. Replies: every reply the driver missed was dropped by
the firmware or arrived after the reply timeout (the driver then counts it late); how many arrive late is
the machine's load, so the counts are checked against each other, not against a rate. A killed emulator
-> safe state exactly max_failed_cycles cycles after the last reply each motor's driver received, and no reply
beyond the 10 cycles in flight after the kill. A CiA 402 drive fault -> safe state at the first cycle
whose TPDOs arrive after the faulted SYNC (the next one unless they are late), then fault reset and the
loop runs on without trip or fault. The emulators run on a shared, non-real-time machine: see
STALL_TOLERANT. (Killing the *control* process: tests/hil/test_can_kill.py.)
"""
import numpy as np
import pytest

from rtctl.drivers import create_driver
from rtctl.hil.can_harness import BusServer, Emulator
from rtctl.hil.can_robot import arm2_urdf, build_arm2
from rtctl.loops.controllers import create_controller
from rtctl.loops.trajectories import create_trajectory
from rtctl.config import build, validate
from rtctl.dynamics import Dynamics
from rtctl.rt.loop import ControlLoop
from rtctl.safety import SafetyMonitor

from machine import skip_if_peer_starved, skip_if_starved

Q0 = [0.2, -0.4]
RATE = 500.0
# The emulators are Python processes on a shared, non-real-time machine: a scheduling stall of 10-20 ms is
# not a firmware fault. Runs whose subject is not stall detection allow 25 consecutive misses (50 ms), in the
# driver (max_failed_cycles) and in the safety monitor's stale-state watchdog alike.
STALL_TOLERANT = 25


# Replies still on their way when a run ends are never read (neither "got" nor "late"): at most STALL_TOLERANT
# cycles' worth per actuator, or the run would have tripped.
END_IN_FLIGHT = 2 * STALL_TOLERANT
# Drops the loop's cycles do not see (activation retries, deactivation frames) and activation's duplicate replies.
OUTSIDE_CYCLES = 10


@pytest.fixture(scope="module")
def server():
    s = BusServer()
    yield s
    err = s.stop()
    assert "not properly shut down" not in err and "Traceback" not in err, err


def tracking_bound(rep, health) -> float:
    """0.15 rad on a run that kept its timing; 0.25 rad (the bound with 10 % of the replies dropped) when the
    machine made more than 10 % of the cycles overrun or more than 5 % of them miss a reply."""
    clean = rep.overruns < 0.1 * rep.cycles and health.stale_cycles < 0.05 * rep.cycles
    return 0.15 if clean else 0.25


def check_reply_accounting(health, dropped):
    """Every missed reply was dropped by the firmware or came after the timeout: a reply that comes late is
    taken in a later read, where that read's own reply then counts as late. So, per run,
    missed = dropped + late + (replies still in flight at the end) - (drops outside the loop's cycles:
    activation, deactivation) -- exact up to the ends of the run."""
    missed, late = health.timeouts, health.extra["late_replies"]
    print(f"replies missed {missed}, dropped {dropped}, late {late}")
    assert dropped + late - OUTSIDE_CYCLES <= missed <= dropped + late + END_IN_FLIGHT, (missed, dropped, late)


def make_loop(driver, model, hooks=()):
    traj = create_trajectory("sinusoid", center=Q0, amplitude=[0.3, 0.3], frequency=[0.5, 0.7], phase=[0.0, 0.0])
    ctl = create_controller("computed_torque", Dynamics(model), kp=400.0)
    safety = SafetyMonitor(model, watchdog_cycles=driver.max_failed_cycles)   # the driver's fault comes first
    return ControlLoop(model=model, drivers=[driver], controller=ctl, trajectory=traj, safety=safety,
                       rate_hz=RATE, hooks=hooks)


def mit_run(server, *emu_args, duration=3.0, hooks=(), **drv):
    emu = Emulator(server, "mit", [1, 2], "--initial", *map(str, Q0), *emu_args)
    model = build_arm2()
    driver = create_driver("can_mit", model, can_ids=[1, 2], can_interface="remote", can_channel=server.url,
                           **{"read_timeout": 5e-4, **drv})
    loop = make_loop(driver, model, hooks)
    try:
        report = loop.run(duration=duration)
    finally:
        driver.close()
        counters = emu.stop()
    return loop, report, counters


@pytest.mark.slow
def test_mit_loop_closes_at_500_hz_and_tracks(server):
    loop, rep, emu = mit_run(server, max_failed_cycles=STALL_TOLERANT)
    h = loop.driver.health
    skip_if_starved(rep, "500 Hz tracking over CAN")
    assert rep.cycles == 1500 and not rep.tripped and not rep.failures and not h.fault, rep.format()
    assert np.all(rep.tracking_max < tracking_bound(rep, h)), rep.format()
    assert rep.timing["period"]["mean"] == pytest.approx(2000.0, rel=0.01)   # the loop kept its rate
    assert emu["dropped"] == 0
    check_reply_accounting(h, emu["dropped"])                               # nothing lost, only late
    assert emu["frames"] >= 2 * rep.cycles and emu["plant_steps"] > 0


@pytest.mark.slow
def test_mit_tolerates_10_percent_dropped_replies_and_a_delayed_one(server):
    # Reply 1000 (about cycle 500) is held back 7 ms by a stalled firmware.
    loop, rep, emu = mit_run(server, "--drop", "0.1", "--seed", "3", "--delay-reply", "1000", "0.007",
                             max_failed_cycles=STALL_TOLERANT)
    h = loop.driver.health
    skip_if_starved(rep, "tracking with 10 % dropped CAN replies")
    assert not rep.tripped and not h.fault and not rep.failures, rep.format()
    assert emu["dropped"] > 0 and emu["delayed"] == 1
    replies = 2 * rep.cycles
    assert 0.05 * replies < emu["dropped"] < 0.15 * replies                  # the seeded 10 %
    check_reply_accounting(h, emu["dropped"])                               # every lost reply counted
    assert h.extra["late_replies"] >= 1                                     # the delayed one at least
    assert np.all(rep.tracking_max < 0.25), rep.format()


@pytest.mark.slow
def test_mit_emulator_killed_mid_run_reaches_safe_state(server):
    # The kill is synchronous (the process is reaped before the loop goes on), but replies the firmware sent
    # before it died may still be queued on the bus (a few cycles' worth on a loaded machine), and on a loaded
    # machine the last replies before the kill may be late, so the exact bound is stated from the last reply
    # each motor's driver received. max_failed_cycles 15 (30 ms): a stall of the emulator before the kill is not the
    # subject here, the kill is.
    KILL_CYCLE, IN_FLIGHT, MAX_MISSED = 400, 10, 15
    misses = []                                       # per cycle: cumulative missed replies of each motor

    def kill(cycle, t, state, command):
        misses.append(list(driver.health.extra["missed_by_motor"]))
        if cycle == KILL_CYCLE:
            emu.kill()
            emu.proc.wait(5)

    emu = Emulator(server, "mit", [1, 2], "--initial", *map(str, Q0))
    model = build_arm2()
    driver = create_driver("can_mit", model, can_ids=[1, 2], can_interface="remote", can_channel=server.url,
                           read_timeout=5e-4, max_failed_cycles=MAX_MISSED)
    loop = make_loop(driver, model, hooks=(kill,))
    try:
        rep = loop.run(duration=1.5)
    finally:
        driver.close()
        emu.stop()
    assert rep.cycles == 750 and not rep.failures
    assert rep.tripped and driver.health.fault and "consecutive replies" in driver.health.fault_reason
    trip = loop.safety.trip_cycle
    missed = np.diff(np.array(misses), axis=0, prepend=0)[:trip + 1] > 0   # motor k missed its reply in cycle c
    last_reply = [np.flatnonzero(~missed[:, k]).max() for k in range(2)]
    assert KILL_CYCLE < trip, (trip, last_reply)                            # the kill tripped it, nothing before
    # No reply from a dead firmware: after the kill a motor's driver takes at most the replies it was still owed,
    # those it had missed by then (sent, but late: queued on a starved bus) and the kill cycle's own and the one
    # before (CI: 18 cycles' worth queued behind a starved bus server, replies missed before the kill).
    after = [int((~missed[KILL_CYCLE + 1:, k]).sum()) for k in range(2)]
    owed = [max(IN_FLIGHT, misses[KILL_CYCLE][k] + 2) for k in range(2)]
    assert all(a <= o for a, o in zip(after, owed)), (after, owed, last_reply)
    # exactly max_failed_cycles after the last
    assert trip == min(last_reply) + driver.max_failed_cycles, (trip, last_reply)


@pytest.fixture
def own_server():
    """A bus server of its own (no frames left over from the MIT runs, one of which kills its emulator)."""
    s = BusServer("rtctl-hil-cia402")
    yield s
    err = s.stop()
    assert "not properly shut down" not in err and "Traceback" not in err, err


@pytest.mark.slow
# Its cycle-exact accounting of the fault's arrival holds on an idle machine; starved, the bus server's delivery
# of SYNCs and TPDOs adds cycles the misses do not count (this stop: trip 3 cycles after the fault with 1 miss).
@pytest.mark.flaky(reruns=1, reruns_delay=1)
def test_cia402_via_config_tracks_and_survives_a_drive_fault(own_server, tmp_path):
    server = own_server
    urdf = tmp_path / "arm2.urdf"
    urdf.write_text(arm2_urdf())
    fault_sync = 600
    emu = Emulator(server, "cia402", [1, 2], "--urdf", str(urdf), "--initial", *map(str, Q0), "--ratio", "10",
                   "--fault-at-sync", str(fault_sync))
    cfg = validate({
        "robot": {"model": str(urdf)},
        "plant": {"initial_position": Q0},
        "driver": {"backend": "cia402", "can_interface": "remote", "can_channel": server.url, "can_ids": [1, 2],
                   "gear_ratio": 10.0, "max_failed_cycles": STALL_TOLERANT},
        "controller": {"type": "computed_torque", "kp": 400.0},
        "trajectory": {"type": "sinusoid", "center": Q0, "amplitude": [0.3, 0.3], "frequency": [0.5, 0.7]},
        "loop": {"rate_hz": RATE},
        "safety": {"watchdog_cycles": STALL_TOLERANT},
    })
    cfg["_dir"] = str(tmp_path)
    loop = build(cfg)
    driver = loop.driver
    assert driver.max_failed_cycles == STALL_TOLERANT and driver.read_timeout == 1e-3
    seen = {}
    record = []   # per cycle of the current run: (cycle, statuswords, cumulative misses per drive, late in cycle)

    def watch(cycle, t, state, command):
        if driver._gen == fault_sync - 1 and "cycle" not in seen:  # this cycle's write sends SYNC number fault_sync
            seen["cycle"] = cycle
            seen["tracking_before"] = loop.tracking_max.copy()
        missed = list(driver.health.extra["missed_by_drive"])
        before = record[-1][2] if record else [0, 0]
        # A drive that missed this cycle's TPDOs but has them by now: they came after the reply timeout.
        late = sum(1 for k in range(2) if missed[k] > before[k] and (driver._rx_gen[k] == driver._gen).all())
        record.append((cycle, driver.statusword.copy(), missed, late))

    loop.hooks.append(watch)
    try:
        rep = loop.run(duration=1.3)   # the fault comes at about cycle 595; the arm sags ~0.1 s after it
        assert rep.cycles == 650 and not rep.failures
        assert driver.health.extra["heartbeats"] > 0
        why = f"trip: {rep.trip_reason!r}; driver fault: {driver.health.fault_reason!r}; seen: {seen}"
        assert rep.tripped and "FAULT" in driver.health.fault_reason and "0x2310" in driver.health.fault_reason, why
        # The safe state comes at the first cycle whose statusword is not OPERATION ENABLED: the TPDOs answering
        # the faulted SYNC arrive in the next cycle's read, one cycle later for each cycle they (or the ones
        # before them, taken in their place) came late.
        if "FAULT" not in rep.trip_reason:                                 # tripped before the fault did
            skip_if_starved(rep, "a drive fault over CAN")
        trip, fault_cycle = loop.safety.trip_cycle, seen["cycle"]
        assert [c for c, _s, _m, _l in record] == list(range(len(record)))     # record index = cycle
        enabled = {c: all(sw & 0x6F == 0x27 for sw in sws) for c, sws, _m, _l in record}
        assert all(enabled[c] for c in range(fault_cycle + 1, trip)) and not enabled[trip], why
        misses = np.diff(np.array([m for _c, _s, m, _l in record]), axis=0, prepend=0).any(axis=1)
        if not fault_cycle < trip <= fault_cycle + 1 + misses[fault_cycle:trip + 1].sum():
            skip_if_starved(rep, "the drive fault's cycle-exact arrival over CAN")     # the machine explains it
            skip_if_peer_starved(driver.health, 0, "the drive fault's cycle-exact arrival over CAN")
        assert fault_cycle < trip <= fault_cycle + 1 + misses[fault_cycle:trip + 1].sum(), (why, misses[:trip + 1])
        # Before the fault: tracking within bounds (the arm drops once the drive is off).
        clean = rep.overruns < 0.1 * rep.cycles and misses[:fault_cycle].sum() < 0.05 * fault_cycle
        assert np.all(seen["tracking_before"] < (0.15 if clean else 0.25)), (seen, rep.format())
        # Fault reset: reconfigure, walk the drives back to OPERATION ENABLED, re-arm, run again.
        driver.configure()
        driver.activate()
        driver.read(loop.state, 0.0)
        loop.safety.check(loop.state, loop.command)
        loop.safety.rearm()
        # As an operator would after a fault: re-plan from where the sagged arm is back to the start pose.
        loop.trajectory = create_trajectory("min_jerk", start=loop.state.q.copy(), goal=Q0, duration=0.5,
                                            t0=loop.cycle / RATE)
        record.clear()
        rep2 = loop.run(duration=1.0)
        h = driver.health
        if rep2.tripped or h.fault:
            skip_if_starved(rep2, "the run after the fault reset")         # a failure the machine explains
        assert not rep2.tripped and not h.fault, rep2.format()
        assert np.all(np.abs(loop.state.q - Q0) < 0.05), loop.state.q
        # Every missed TPDO pair was late (none is dropped here): it came after the reply timeout within its
        # cycle, or in a later cycle where it was taken in place of that cycle's, which then counts as late.
        late_in_cycle = sum(late for _c, _s, _m, late in record)
        print(f"TPDO pairs missed {h.timeouts}, late frames {h.extra['late_replies']}, late in cycle {late_in_cycle}; "
              f"fault at cycle {fault_cycle}, trip at {trip}")
        assert h.timeouts <= h.extra["late_replies"] + late_in_cycle + END_IN_FLIGHT, \
            (h.timeouts, h.extra["late_replies"], late_in_cycle)
        # (No tracking bound after the reset: how far the unpowered arm swung while the drives were off and
        # being reset varies from run to run, and so does the recovery transient.)
        assert rep2.timing["period"]["mean"] == pytest.approx(2000.0, rel=0.01)
    finally:
        driver.close()
        counters = emu.stop()
    assert counters["faults"] == 2 and counters["syncs"] >= 1100  # 650 + 500 cycles; --fault-at-sync faults every drive once
    assert counters["dropped"] == 0
