"""The control channel: validated requests, applied at cycle boundaries, logged as telemetry events.

While a paced loop runs, malformed requests (garbage bytes, wrong types, unknown fields,
out-of-range or non-finite values, a wrong token) are refused with the reason and leave
the loop untouched and running; valid ones change gains, targets and oscillator
parameters at a cycle boundary, are published as ``control`` events, and e-stop trips
the loop's safety monitor.
"""
import copy
import json
import math
import time

import msgpack
import numpy as np
import pytest

from rtctl.operator import ControlServer, request
from rtctl.operator.client import ServerNotTrusted
from rtctl.telemetry.schema import TOPIC_EVENT
from telemetry_helpers import collect, make_loop, run_in_background, subscriber, wait_meta

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("credentials") / "control.token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def min_jerk_loop(token_file):
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0},
                     telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.05},
                     control={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "token_file": token_file,
                              "kp_max": 2000.0})
    sub = subscriber(loop.telemetry.endpoint)
    wait_meta(sub)
    th = run_in_background(loop, 6.0)
    yield loop, sub
    th.join(15)
    loop.control.close()
    loop.telemetry.close()
    sub.close(linger=0)


def ask(loop, req, **kw):
    return request(loop.control.endpoint, req, token=TOKEN if isinstance(req, dict) else None, **kw)


@pytest.mark.slow
def test_malformed_requests_are_refused_and_the_loop_keepsrun_in_background(min_jerk_loop):
    loop, _ = min_jerk_loop
    kp0 = loop.controller.kp.copy()
    c0 = loop.cycle
    cases = [
        (b"\x00\xffgarbage\xc1", "neither JSON nor msgpack"),
        (b"{not json", "not valid JSON"),
        (msgpack.packb([1, 2, 3]), "must be a map"),
        ({"cmd": "set_gains", "kp": "abc"}, "kp: expected a number"),
        ({"cmd": "set_gains", "kp": [1.0, 2.0]}, "expected 7 values"),
        ({"cmd": "set_gains", "kp": 5000.0}, "outside the allowed range [0, 2000]"),
        ({"cmd": "set_gains", "kp": -1.0}, "outside the allowed range"),
        ({"cmd": "set_gains", "kp": float("nan")}, "must be finite"),
        ({"cmd": "set_gains", "kp": True}, "expected a number"),
        ({"cmd": "set_gains", "kp": 100.0, "gain": 3}, "unknown field 'gain'"),
        ({"cmd": "set_gains"}, "give kp and/or kd"),
        ({"cmd": "fly"}, "unknown or missing command"),
        ({"cmd": None}, "unknown or missing command"),
        ({"cmd": "set_target", "goal": [9.0] * 7}, "outside the soft limits"),
        ({"cmd": "set_target", "goal": [0.1] * 7, "duration": -1}, "outside the allowed range"),
        ({"cmd": "set_cpg", "frequency": 1.0}, "needs an oscillator trajectory"),
        ({"cmd": "estop", "reason": 42}, "reason"),
    ]
    for req, reason in cases:
        reply = ask(loop, req)
        assert reply["ok"] is False and reason in reply["error"], (req, reply)
    reply = request(loop.control.endpoint, {"cmd": "set_gains", "kp": 100.0})
    assert reply["ok"] is False and reply["error"].startswith("set_gains: needs the token: send hello first"), reply
    with pytest.raises(ServerNotTrusted, match="did not prove it holds the token"):
        request(loop.control.endpoint, {"cmd": "set_gains", "kp": 100.0}, token="not-the-token-0123456789")
    reply = request(loop.control.endpoint, {"cmd": "status"})  # open: reading moves nothing
    assert reply["ok"] is True and reply["tripped"] is False
    assert np.array_equal(loop.controller.kp, kp0)
    assert not loop.safety.tripped and loop.cycle > c0  # untouched, still running
    assert ask(loop, {"cmd": "status"})["ok"]


@pytest.mark.slow
def test_valid_changes_apply_at_a_cycle_boundary_and_are_logged(min_jerk_loop):
    loop, sub = min_jerk_loop
    c0 = loop.cycle
    reply = ask(loop, {"cmd": "set_gains", "kp": 300.0, "kd": [30.0] * 7, "id": 7}, encoding="json")
    assert reply["ok"] and reply["id"] == 7 and reply["applied_cycle"] >= c0
    assert loop.controller.kp.tolist() == [300.0] * 7 and loop.controller.kd.tolist() == [30.0] * 7
    goal = [0.1, -0.1, 0.1, -0.3, 0.1, 0.1, 0.0]
    end = time.monotonic() + 5.0
    while loop.cycle * loop.period < 1.1 and time.monotonic() < end:  # a new move waits for the first to end
        time.sleep(0.02)
    reply = ask(loop, {"cmd": "set_target", "goal": goal, "duration": 0.5})
    assert reply["ok"], reply
    applied = reply["applied_cycle"]
    assert loop.trajectory.goal.tolist() == goal and loop.trajectory.t0 == applied * loop.period
    status = ask(loop, {"cmd": "status"})
    assert status["kp"] == [300.0] * 7 and status["trajectory"] == "MinimumJerk" and not status["tripped"]
    time.sleep(0.3)
    events = [m for topic, m in collect(sub, 0.5) if topic == TOPIC_EVENT and m["kind"] == "control"]
    kinds = [e["request"]["cmd"] for e in events]
    assert "set_gains" in kinds and "set_target" in kinds
    gains = next(e for e in events if e["request"]["cmd"] == "set_gains")
    assert gains["request"]["kp"] == [300.0] * 7 and not {"token", "session", "proof"} & set(gains["request"])


@pytest.mark.slow
def test_estop_and_rearm_through_the_channel(min_jerk_loop):
    loop, _ = min_jerk_loop
    reply = ask(loop, {"cmd": "estop", "reason": "operator"})
    assert reply["ok"] and loop.safety.tripped and loop.safety.trip_reason == "e-stop: operator"
    assert loop.safety.trip_cycle >= reply["applied_cycle"]
    time.sleep(0.05)
    reply = ask(loop, {"cmd": "rearm"})
    assert reply["ok"], reply
    assert not loop.safety.tripped


@pytest.mark.slow
def test_oscillator_parameters_and_phase_continuity():
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0},
                     trajectory={"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7,
                                 "frequency": [0.5] * 7})
    ctl = ControlServer(loop, endpoint="tcp://127.0.0.1:0", frequency_max=5.0, token=TOKEN).start()
    qd = []
    loop.hooks.append(lambda cycle, t, state, command: qd.append(loop.q_d[0]))
    th = run_in_background(loop, 2.0)
    try:
        bad = request(ctl.endpoint, {"cmd": "set_cpg", "amplitude": 3.0}, token=TOKEN)
        assert not bad["ok"] and "leaves the soft limits" in bad["error"]
        bad = request(ctl.endpoint, {"cmd": "set_cpg", "frequency": 50.0}, token=TOKEN)
        assert not bad["ok"] and "(0, 5]" in bad["error"]
        bad = request(ctl.endpoint, {"cmd": "set_cpg", "pattern": "trot"}, token=TOKEN)
        assert not bad["ok"] and "no patterns" in bad["error"]
        bad = request(ctl.endpoint, {"cmd": "set_cpg", "frequency": 2.0}, token=TOKEN)  # 2.5 rad/s peak
        assert not bad["ok"] and "joint 'joint1'" in bad["error"] and "above its velocity limit 1.71" in bad["error"]
        reply = request(ctl.endpoint, {"cmd": "set_cpg", "frequency": 1.0}, token=TOKEN)
        assert reply["ok"], reply
        k = reply["applied_cycle"]
        bad = request(ctl.endpoint, {"cmd": "set_cpg", "amplitude": 0.25, "center": [0.05] * 7}, token=TOKEN)
        assert not bad["ok"] and "would step joint" in bad["error"]  # a jump of the desired position
        reply = request(ctl.endpoint, {"cmd": "set_cpg", "frequency": 0.8}, token=TOKEN)
        assert reply["ok"], reply
        k2 = reply["applied_cycle"]
        assert loop.trajectory.frequency.tolist() == [0.8] * 7 and loop.trajectory.amplitude.tolist() == [0.2] * 7
        assert loop.trajectory.center.tolist() == [0.0] * 7
    finally:
        th.join(10)
        ctl.close()
    # the desired position stays continuous across the frequency change (phase kept): |step| < 2 pi f A dt
    steps = np.abs(np.diff(np.array(qd)))  # steps[i] = q_d(cycle i + 1) - q_d(cycle i)
    assert k2 > k and steps[k - 3:k2 - 1].max() < 2 * math.pi * 1.0 * 0.2 / 500.0 * 1.01


def test_requests_to_a_stopped_loop():
    loop = make_loop()
    with ControlServer(loop, endpoint="tcp://127.0.0.1:0", apply_timeout=0.3, token=TOKEN) as ctl:
        reply = request(ctl.endpoint, {"cmd": "set_gains", "kp": 10.0}, token=TOKEN)
        assert not reply["ok"] and "reached no cycle boundary" in reply["error"]
        assert loop.controller.kp.tolist() == [400.0] * 7
        reply = request(ctl.endpoint, json.dumps({"cmd": "estop"}).encode())
        assert reply["ok"] and loop.safety.tripped
        loop.step(0.0)  # the cancelled set_gains is never applied later
        assert loop.controller.kp.tolist() == [400.0] * 7


def _scheduled_loop(schedule, **overrides):
    from rtctl.config import build, validate
    from telemetry_helpers import BASE
    raw = copy.deepcopy(BASE)
    raw["trajectory"] = {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7, "frequency": [0.5] * 7}
    raw["loop"] = dict(raw.get("loop", {}), pace=False, rate_hz=500.0)
    raw["schedule"] = schedule
    raw.update(overrides)
    cfg = validate(raw, "sched.toml")
    cfg["_source"] = "sched.toml"
    return build(cfg)


@pytest.mark.slow
def test_scheduled_commands_apply_at_their_control_time_through_the_channel_checks():
    loop = _scheduled_loop([{"t": 0.5, "cmd": "set_cpg", "frequency": 1.0},
                            {"t": 0.25, "cmd": "set_gains", "kp": 900.0},
                            {"t": 0.7, "cmd": "estop", "reason": "end of exercise"}])
    kp, freq = [], []
    loop.hooks.append(lambda cycle, t, state, command: (kp.append(loop.controller.kp[0]),
                                                        freq.append(loop.trajectory.frequency[0])))
    report = loop.run(duration=1.0)
    kp, freq = np.array(kp), np.array(freq)
    assert np.all(kp[:125] == 400.0) and np.all(kp[125:] == 900.0)        # t = 0.25 s is cycle 125 at 500 Hz
    assert np.all(freq[:250] == 0.5) and np.all(freq[250:] == 1.0)
    assert report.tripped and report.trip_reason.endswith("end of exercise") and loop.safety.trip_cycle == 350
    assert [(round(t, 6), r["cmd"]) for t, r, _ in loop.schedule.log] == [(0.25, "set_gains"), (0.5, "set_cpg"),
                                                                          (0.7, "estop")]


@pytest.mark.parametrize("entry, message", [
    ({"cmd": "set_gains", "kp": 1.0}, "needs 't'"),
    ({"t": -1.0, "cmd": "set_gains", "kp": 1.0}, "[[schedule]] 0 t: must be >= 0.0"),
    ({"t": 1.0, "cmd": "launch"}, "[[schedule]] 0 (t = 1 s): cmd: unknown or missing command 'launch'"),
    ({"t": 1.0, "cmd": "set_cpg", "amplitude": 5.0}, "leaves the soft limits"),
    ({"t": 1.0, "cmd": "set_gains", "kp": 1.0, "gain": 2}, "unknown field 'gain'"),
])
@pytest.mark.slow
def test_bad_schedule_entries_are_refused_when_the_config_is_built(entry, message):
    from rtctl.config import ConfigError
    with pytest.raises(ConfigError) as info:
        _scheduled_loop([entry])
    assert message in str(info.value) and "sched.toml" in str(info.value)
