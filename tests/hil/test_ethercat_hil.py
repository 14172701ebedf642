"""EtherCAT HIL (issue 35, item 3): the 1 kHz computed-torque loop over the ``ethercat`` driver (SOEM through
pysoem) against seven emulated CiA 402 drives in cyclic synchronous torque, one per joint of the 7-DoF arm
(arm7, geared 100:1), in another process on the far end of a veth pair, inside a network namespace the test
makes. The drives and the arm are the CAN emulator's (rtctl.hil.ethercat.drive_axis): rtctl's rigid-body
simulation, or MuJoCo's of the same arm. Each process data frame is the drives' SYNC.

Stated bounds, the CAN HIL suite's (tests/hil/test_can_hil.py): max tracking error < 0.15 rad on a run that kept
its timing (fewer than 10 % of cycles overran, fewer than 5 % without a fresh frame), < 0.25 rad otherwise. The
emulator is a Python process on a shared, non-real-time machine (seven slaves cost it about 0.7 ms of CPU per
frame, measured with the run beside it): runs whose subject is not frame loss let STALL_TOLERANT frames in a row
go missing (0.1 s; the CAN suite lets 50 ms go at 500 Hz) and set each slave's SM watchdog to 1 s. Stops: the e-stop at speed (the
safety's hold: decelerate, then hold against gravity; the drives stay enabled), the master killed (each
slave's SM watchdog takes its outputs off: SAFE-OP with AL status code 0x001B, ETG.1000.4 / ETG.1000.6, and
its drive leaves OPERATION ENABLED). Link down and the emulator killed: tests/test_ethercat_driver.py.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.hil.can_robot import VISCOUS_FRICTION
from rtctl.hil.ethercat import netns
from rtctl.safety.stop import HOLD_KP

from ethercat_line import build_inside, emulated_line, run_closed, run_config, run_inside
from machine import skip_if_peer_starved, skip_if_starved

pytest.importorskip("pysoem")
pytestmark = pytest.mark.slow
WHY_NOT = netns.unavailable()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

CENTER = np.array([0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0])
AMPLITUDE = np.full(7, 0.3)
FREQUENCY = [0.3, 0.4, 0.4, 0.3, 0.4, 0.4, 0.5]       # joint speeds up to 0.94 rad/s, half or less of the limits
START = CENTER - AMPLITUDE                            # the sinusoids start there, at rest (phase -pi/2)
RATIO = 100.0
EFFORT_LIMIT = np.array([176.0, 176.0, 110.0, 110.0, 110.0, 40.0, 40.0])   # arm7's, N m at the joints
# Each drive sized for its joint: its peak, 3 times the rated torque (0x6072 = 3000 per mille), the joint's effort
# limit through the gear, except the last two, sized for the 10 N m the wrist needs: a thousandth of the rated
# torque is its torque's resolution, and at the URDF's 40 N m (0.013 N m) the wrist's 4e-4 kg m^2 tracked with
# 0.057 rad of error on MuJoCo's plant, 0.008 rad at 10 N m (the rigid-body plant's joint friction: below).
RATED = np.minimum(EFFORT_LIMIT, [176.0, 176.0, 110.0, 110.0, 110.0, 10.0, 10.0]) / RATIO / 3.0
KP = 400.0                                            # the computed-torque controller's (run_config's)
STALL_TOLERANT = 100                                  # frames in a row (0.1 s), and each slave's SM watchdog 1 s
ARM7 = ("--robot", "arm7", "--ratio", str(RATIO), "--initial", *map(str, START),
        "--rated-torque", *(f"{x:.4f}" for x in RATED))


def arm7_config(**driver) -> dict:
    raw = run_config("arm7", CENTER, AMPLITUDE, FREQUENCY, ratio=RATIO, phase=-np.pi / 2,
                     **{"max_failed_cycles": STALL_TOLERANT, "watchdog": 1.0, **driver})
    raw["plant"]["initial_position"] = START.tolist()
    raw["safety"] = {"watchdog_cycles": STALL_TOLERANT}
    return raw


def tracking_bound(report, health) -> np.ndarray:
    """The CAN suite's bound, plus per joint what the plant's joint friction, unknown to the controller, leaves:
    b v / (kp M_jj), computed torque's stiffness being kp M (0.29 rad at the wrist's 4e-4 kg m^2 at 0.94 rad/s;
    0.2 rad measured there, under 0.03 rad at every other joint)."""
    clean = report.overruns < 0.1 * report.cycles and health.stale_cycles < 0.05 * report.cycles
    return (0.15 if clean else 0.25) + friction_error()


def friction_error() -> np.ndarray:
    from rtctl.cli import load_model
    mass = np.diag(Dynamics(load_model("arm7", None)).mass_matrix(CENTER))
    return VISCOUS_FRICTION * AMPLITUDE * 2 * np.pi * np.asarray(FREQUENCY) / (KP * mass)


@pytest.fixture(params=["rigid_body", "mujoco"])
def arm7_line(request, tmp_path):
    args = ARM7
    if request.param == "mujoco":
        pytest.importorskip("mujoco")
        from rtctl.cli import load_model
        from rtctl.plants.mujoco.export import mjcf_from_model
        mjcf = tmp_path / "arm7.xml"
        mjcf.write_text(mjcf_from_model(load_model("arm7", None), floor=False))
        args = (*ARM7, "--mjcf", str(mjcf))
    with emulated_line(*args) as line:
        yield line


def test_computed_torque_at_1_khz_over_seven_ethercat_drives_tracks(arm7_line, capsys):
    ns, _proc, stop = arm7_line
    loop, report = run_closed(ns, arm7_config(), 2.0)
    stats = stop()
    health = loop.driver.health
    with capsys.disabled():
        print(f"\nEtherCAT arm7 at 1 kHz: tracking max {np.round(report.tracking_max, 3)} rad, overruns "
              f"{report.overruns}/{report.cycles}, lost frames {health.extra['lost_frames']}, wrong working "
              f"counters {health.extra['wrong_wkc']}")
    assert report.cycles == 2000
    if report.tripped or health.fault or np.any(report.tracking_max >= tracking_bound(report, health)):
        skip_if_starved(report, "1 kHz tracking over EtherCAT")           # a failure the machine explains
        skip_if_peer_starved(health, 0, "1 kHz tracking over EtherCAT")
    assert not report.tripped and not health.fault, report.format()
    assert np.all(report.tracking_max < tracking_bound(report, health)), report.format()
    assert all(s["outputs_received"] >= 2000 for s in stats["slaves"]), stats


def test_e_stop_at_speed_holds_the_loaded_arm_with_the_drives_enabled():
    """The e-stop at 1.2 s, every joint moving: the safety's hold decelerates within the limits and then holds the
    arm against gravity through the drives, which stay in OPERATION ENABLED (frames keep coming). On the
    rigid-body plant (the tracking test runs both)."""
    with emulated_line(*ARM7) as (ns, _proc, _stop):
        e_stop_run(ns)


def e_stop_run(ns):
    loop = build_inside(ns, arm7_config())
    trace = []

    def hook(cycle, t, state, command):
        if cycle == 1200:
            loop.safety.estop("test e-stop", operator=True)
        trace.append((t, state.q.copy(), state.v.copy()))
    loop.hooks.append(hook)
    try:
        report = run_inside(ns, loop, 2.5)
    finally:
        loop.driver.close()
    if "e-stop" not in report.trip_reason or loop.driver.health.fault:
        skip_if_starved(report, "the e-stop at speed over EtherCAT")       # a failure the machine explains
        skip_if_peer_starved(loop.driver.health, 0, "the e-stop at speed over EtherCAT")
    assert report.tripped and "e-stop" in report.trip_reason and not loop.driver.health.fault, report.format()
    q = np.array([x[1] for x in trace])
    v = np.array([x[2] for x in trace])
    model = loop.model
    assert np.all(q >= model.lower - 1e-6) and np.all(q <= model.upper + 1e-6)
    assert np.abs(v[1200]).max() > 0.1                                     # it was moving when stopped
    held = q[-300:]                                                         # the last 0.3 s
    # In place, against gravity, to within what the torque's resolution lets the hold's stiffness see: a
    # thousandth of the rated torque through the gear, over kp M_jj (0.08 rad at the wrist's 4e-4 kg m^2).
    dead_band = RATED * 1e-3 * RATIO / (HOLD_KP * np.diag(Dynamics(model).mass_matrix(held.mean(0))))
    print(f"\nheld: position range {np.round(np.ptp(held, axis=0), 4)} rad (dead band "
          f"{np.round(dead_band, 4)}), velocity RMS {np.round(np.sqrt(np.mean(v[-300:] ** 2, axis=0)), 4)} rad/s")
    assert np.all(np.ptp(held, axis=0) < 0.01 + dead_band), np.ptp(held, axis=0)
    assert np.abs(held.mean(0) - q[1300]).max() < 0.1, (held.mean(0), q[1300])   # where it stopped


def test_the_master_killed_its_slaves_watchdogs_take_their_outputs_off(tmp_path):
    """``rtctl run`` over the line, killed with SIGKILL mid-run: no frame comes any more; within each slave's SM
    watchdog (the driver's ``watchdog``, 0.1 s) every slave drops from OP to SAFE-OP with AL status code 0x001B,
    and its drive leaves OPERATION ENABLED (the abort connection option code's reaction, CiA 402-2 0x6007)."""
    raw = arm7_config(watchdog=0.1)
    lines = []
    for section, table in raw.items():
        lines.append(f"[{section}]")
        for key, value in table.items():
            lines.append(f"{key} = {json.dumps(value)}")
    path = tmp_path / "ethercat_arm7.toml"
    path.write_text("\n".join(lines) + "\n")
    with emulated_line(*ARM7) as (ns, _proc, stop):
        run = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "rtctl.cli", "run", str(path),
                                "--duration", "30"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            time.sleep(6.0)                          # compiled, configured and cycling by then
            assert run.poll() is None, run.communicate()[0][-3000:]
            os.kill(run.pid, signal.SIGKILL)
            run.wait(10)
            time.sleep(0.5)
        finally:
            if run.poll() is None:
                run.kill()
        stats = stop()
    for slave in stats["slaves"]:
        assert slave["state"] == "SAFE-OP" and slave["al_status_code"] == 0x001B, slave
        assert slave["watchdog_expiries"] >= 1 and slave["drive_state"] != "OPERATION ENABLED", slave


def test_the_hardware_pages_ethercat_set_up_runs_as_written(tmp_path):
    """docs/hardware.md: the ```sh block that starts with `ip netns add`, line by line (its namespace renamed so
    that parallel runs do not meet), the emulated slaves started from it, and its last line, ``rtctl run
    ethercat_arm7.toml``, on the page's ```toml block of that name: the run ends cleanly within the bounds
    above (its report's tracking), unless the machine starved it (its report says so)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "hardware.md").read_text()
    (block,) = [b for b in re.findall(r"^```sh\n(.*?)^```", page, re.S | re.M) if b.startswith("ip netns add")]
    (config,) = [b for b in re.findall(r"^```toml\n(.*?)^```", page, re.S | re.M)
                 if b.startswith("# ethercat_arm7.toml\n")]
    (tmp_path / "ethercat_arm7.toml").write_text(config)
    lines = [shlex.split(line.split("#")[0].strip().rstrip("&")) for line in block.splitlines()]
    documented = lines[0][3]
    ns = f"{documented}-{os.getpid()}"
    emulator = None
    try:
        for argv in lines:
            argv = [ns if a == documented else a for a in argv]
            if "rtctl-hil" in argv:
                at = argv.index("rtctl-hil")
                argv[at:at + 1] = [sys.executable, "-m", "rtctl.hil.cli"]
                emulator = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                assert emulator.stdout.readline().strip() == "READY", emulator.stderr.read()
            elif "rtctl" in argv:
                at = argv.index("rtctl")
                argv[at:at + 1] = [sys.executable, "-m", "rtctl.cli"]
                done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
            else:
                assert subprocess.run(argv, capture_output=True, text=True, timeout=30).returncode == 0, argv
    finally:
        if emulator is not None:
            emulator.kill()
            emulator.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    out = done.stdout + done.stderr
    if done.returncode != 0 and "the machine woke the loop late" in out:
        pytest.skip(f"the machine starved the documented run: {out[-600:]}")
    assert done.returncode == 0 and "SAFE STATE" not in out, out[-3000:]
    errors = [float(m) for m in re.findall(r"^\s+joint\d\s+\S+\s+(\S+)$", out, re.M)]
    assert len(errors) == 7 and np.all(np.array(errors) < 0.25 + friction_error()), out[-3000:]
