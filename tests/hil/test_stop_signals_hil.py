"""SIGTERM and SIGHUP stop ``rtctl run`` in order on every bus, within STOP_BOUND of the signal.

The control process is ``rtctl run`` (the installed command line, as ``tests/hil/test_can_kill.py`` starts it) closing
the HIL arm at 500 Hz against emulator processes: MIT motors and CiA 402 drives on the loopback CAN bus server,
a Dynamixel chain on a pty. Once the loop is cycling (command frames or SYNCs counted on the bus; the servos'
torque switched on by the first cycle), the test takes the time and sends SIGTERM or SIGHUP. The emulators
log the time they handled each frame on the same clock (``CLOCK_MONOTONIC``: ``time.monotonic`` for the CAN
emulators, ``time.perf_counter`` for the Dynamixel one, the same clock on Linux), so "signal sent -> actuator
unpowered" is measured without a race: an event logged after the signal was caused by it.

Each actuator leaves its powered state within STOP_BOUND: an MIT motor exits motor mode (0xFD), a CiA 402
drive leaves OPERATION ENABLED by the shutdown command (READY TO SWITCH ON: power stage off, torque 0), a
Dynamixel servo's torque goes off. The report is printed, the exit status is 128 + the signal's number, and
nothing was left to the actuators' own timeouts (the MIT firmware here has none, as its default).
The bound depends on the scheduling of four processes on a shared 2-core machine: ``wall_clock`` runs a test
once more when it fails (as ``tests/hil/test_dynamixel_hil.py``); a stop that does not happen fails both runs.
"""
import json
import os
import signal
import time

import pytest

from rtctl.hil.can_harness import Arm2Run, BusServer, ControlProcess, _wait_line
from rtctl.hil.dynamixel_emulator import EmulatorProcess, hil_arm
from rtctl.model.urdf_writer import model_to_urdf

wall_clock = pytest.mark.flaky(reruns=1, reruns_delay=1)
STOP_SIGNALS = [signal.SIGTERM, signal.SIGHUP]
NAME = lambda sig: signal.Signals(sig).name      # noqa: E731  (the test ids)
STOP_BOUND = 0.05        # s: signal sent -> every actuator unpowered
Q0 = [0.2, -0.4]
RUN_CYCLES = 100         # loop cycles (command frames / SYNCs on the bus) before the signal


@pytest.fixture
def server():
    s = BusServer("rtctl-hil-signals")
    yield s
    err = s.stop()
    assert "not properly shut down" not in err and "Traceback" not in err, err


def check_report(control, sig, out, err):
    """The report on stdout and the documented status: 128 + the signal, or 3 for a run that tripped before it
    (a loop starved on a loaded machine; the stop is the same)."""
    name = NAME(sig)
    status = 3 if "SAFE STATE: tripped" in out else 128 + sig
    assert control.proc.returncode == status, (out, err)
    assert "ran " in out and f"stopped by {name}: the safe command, then every driver deactivated" in out, out
    assert err.strip().splitlines()[-1] == f"rtctl run: stopped by {name} (exit status {status})", err
    assert "Traceback" not in err and "not properly shut down" not in err, err


def run_and_signal(server, tmp_path, protocol, sig, frame_id, emu_args=(), **driver):
    """Emulator + sniffer + ``rtctl run``; the signal after RUN_CYCLES cycles. Returns the time just before the
    signal, the control process's (stdout, stderr), the control process, the emulator's counters and the
    sniffer (stopped; its frames kept)."""
    with Arm2Run(server, tmp_path, protocol, Q0, frame_id, RUN_CYCLES, emu_args,
                 config="[safety]\nwatchdog_cycles = 25\n", **driver) as run:
        sent = time.monotonic()
        os.kill(run.control.proc.pid, sig)
        out, err = run.control.proc.communicate(timeout=60)
    return sent, (out, err), run.control, run.counters, run.sniffer


@wall_clock
@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=NAME)
@pytest.mark.slow
def test_mit_motors_leave_motor_mode_within_the_bound_of_the_signal(server, tmp_path, sig):
    sent, (out, err), control, emu, sniffer = run_and_signal(server, tmp_path, "can_mit", sig, 1,
                                                             motor_model="AK80-9")
    check_report(control, sig, out, err)
    for motor in (1, 2):
        exits = [t for t, m, e in emu["events"] if m == motor and e == "exit motor mode" and t > sent]
        why = f"motor {motor}: signal at {sent:.4f}, events {emu['events']}"
        assert exits, why
        on_bus = min(t for t, d in sniffer.of(motor) if t > sent and d[-1:] == b"\xfd")
        print(f"{NAME(sig)}: motor {motor} out of motor mode {1e3 * (exits[0] - sent):.1f} ms after the signal "
              f"(the frame on the bus after {1e3 * (on_bus - sent):.1f} ms)")
        assert exits[0] - sent <= STOP_BOUND, why
        final = emu["final"][str(motor)]
        assert final["state"] == "rest" and final["torque"] == 0.0, (final, why)


@wall_clock
@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=NAME)
@pytest.mark.slow
def test_cia402_drives_power_off_within_the_bound_of_the_signal(server, tmp_path, sig):
    sent, (out, err), control, emu, _sniffer = run_and_signal(server, tmp_path, "cia402", sig, 0x80,
                                                              ["--ratio", "10"], gear_ratio=10.0)
    check_report(control, sig, out, err)
    for node in (1, 2):
        log = emu["events"][str(node)]
        after = [(t, e) for t, e in log if t > sent]
        why = f"node {node}: signal at {sent:.4f}, log {log}"
        assert after and after[0][1] == "READY TO SWITCH ON", why        # shutdown: OPERATION ENABLED -> 8
        print(f"{NAME(sig)}: drive {node} powered off {1e3 * (after[0][0] - sent):.1f} ms after the signal")
        assert after[0][0] - sent <= STOP_BOUND, why
        # The drive's heartbeat consumer was switched off before the master's heartbeat stopped: no loss.
        assert not any("lost" in e or e.startswith("EMCY") for _t, e in after), why
        final = emu["final"][str(node)]
        assert final["state"] == "READY TO SWITCH ON" and final["torque"] == 0.0, (final, why)


def dynamixel_config(path, port, urdf) -> None:
    center, amplitude = [0.4, -0.3], [0.3, 0.3]
    path.write_text(
        f'[robot]\nmodel = {json.dumps(str(urdf))}\n[plant]\ninitial_position = [0.1, -0.6]\n'
        f'[driver]\nbackend = "dynamixel"\nport = "{port}"\nread_timeout = 0.0015\nmax_failed_cycles = 5\n'
        f'[controller]\ntype = "computed_torque"\nkp = 1600.0\n'
        f'[trajectory]\ntype = "sinusoid"\ncenter = {center}\namplitude = {amplitude}\nfrequency = [0.5, 0.5]\n'
        f'phase = [-1.5707963267948966, -1.5707963267948966]\n'
        f'[loop]\nrate_hz = 500.0\nduration = 60.0\n[safety]\nwatchdog_cycles = 25\n')


@wall_clock
@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=NAME)
@pytest.mark.slow
def test_dynamixel_servos_torque_off_within_the_bound_of_the_signal(tmp_path, sig):
    urdf = tmp_path / "dxl_arm2.urdf"
    urdf.write_text(model_to_urdf(hil_arm(2)))
    config = tmp_path / "run.toml"
    control = None
    with EmulatorProcess("--urdf", str(urdf), "--initial", "0.1,-0.6") as emu:
        dynamixel_config(config, emu.port, urdf)
        try:
            control = ControlProcess(config)
            for servo in (1, 2):         # the first cycle's goals switch each servo's torque on
                _wait_line(emu.proc, lambda s, i=servo: s.startswith("TORQUE ") and s.endswith(f" {i} on"),
                           f"servo {servo} torque on", 120.0)
            time.sleep(RUN_CYCLES / 500.0)
            sent = time.perf_counter()
            os.kill(control.proc.pid, sig)
            out, err = control.proc.communicate(timeout=60)
        finally:
            if control is not None and control.proc.poll() is None:
                control.kill()
    check_report(control, sig, out, err)
    stats = emu.stats
    for servo in (1, 2):
        offs = [t for t, i, what in stats["torque"] if i == servo and what == "torque off" and t > sent]
        why = f"servo {servo}: signal at {sent:.4f}, torque {stats['torque']}"
        assert offs, why
        print(f"{NAME(sig)}: servo {servo} torque off {1e3 * (offs[0] - sent):.1f} ms after the signal")
        assert offs[0] - sent <= STOP_BOUND, why
    assert stats["watchdog_expiries"] == 0, stats          # stopped by the master, not by its own watchdog
