"""SIGINT, SIGTERM and SIGHUP: one orderly stop (rtctl.rt.signals), in-process and as ``rtctl run`` runs it.

In-process, signals are raised in the test's own (main) thread with ``signal.raise_signal``: the handler runs
at the next bytecode, so where it lands is exact. The second-signal and hard-deadline cases run ``rtctl run``
in a child process whose driver's deactivate takes long on purpose.
"""
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rtctl.cli import main
from rtctl.config import DEMO_CONFIG
from rtctl.rt.signals import (EXIT_STOP_DEADLINE, STOP_SIGNALS, StopSignal, StopSignals, exit_status, hold, release,
                              stop_requests)
from telemetry_helpers import make_loop

NAME = lambda sig: signal.Signals(sig).name      # noqa: E731  (the test ids)


def test_exit_status_is_the_shells_128_plus_the_signal_number():
    assert [exit_status(s) for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)] == [129, 130, 143]


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=NAME)
def test_a_signal_raises_inside_the_command_and_is_only_noted_outside(sig):
    with StopSignals("test") as stop:
        with pytest.raises(StopSignal) as caught:
            with stop.raising():
                signal.raise_signal(sig)
                time.sleep(5)                       # not reached: the handler raises at the next bytecode
        assert caught.value.signum == sig and stop.received == [sig]
    with StopSignals("test") as stop:
        signal.raise_signal(sig)                    # outside raising(): noted, raised on entering it
        assert stop.received == [sig] and stop.pending
        with pytest.raises(StopSignal):
            with stop.raising():
                pass
        assert not stop.pending


def test_a_signal_while_numba_compiles_is_raised_when_the_compile_is_released():
    with StopSignals("test") as stop, stop.raising():
        hold()
        hold()                                      # nested compiles
        signal.raise_signal(signal.SIGTERM)
        release()                                   # the inner one ends: the outer still holds it
        assert stop.pending
        with pytest.raises(StopSignal):
            release()


def test_a_later_signal_is_noted_in_one_line_and_does_not_raise(capfd):
    with StopSignals("rtctl test") as stop:
        with pytest.raises(StopSignal), stop.raising():
            signal.raise_signal(signal.SIGTERM)
        with stop.raising():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGHUP)
    assert stop.received == [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
    lines = capfd.readouterr().err.splitlines()
    assert lines == [f"rtctl test: {name} while stopping after SIGTERM: the orderly stop goes on (at most 5 s)"
                     for name in ("SIGINT", "SIGHUP")]


def test_handlers_are_restored_and_an_ignored_signal_stays_ignored():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    previous_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)        # as nohup starts a command
    try:
        with StopSignals("test"):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
        assert {s: signal.getsignal(s) for s in before} == before
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous_hup)


class Recorder:
    """What a driver was told, in order: ("write", effort, stiffness, damping, velocity) and ("deactivate",)."""

    def __init__(self, driver):
        self.calls = []
        write, deactivate = driver.write, driver.on_deactivate

        def recording_write(command, now):
            self.calls.append(("write", command.effort.copy(), command.stiffness.copy(), command.damping.copy(),
                               command.velocity.copy()))
            write(command, now)

        def recording_deactivate():
            self.calls.append(("deactivate",))
            deactivate()

        driver.write, driver.on_deactivate = recording_write, recording_deactivate


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=NAME)
@pytest.mark.slow
def test_a_signal_in_a_cycle_ends_the_run_at_its_boundary_with_the_safe_command_then_deactivate(sig):
    loop = make_loop(loop={"pace": True})
    driver = loop.drivers[0]
    recorder = Recorder(driver)

    def signal_at_cycle_200(cycle, t, state, command):      # the arm moving (the move starts at 0.05 s)
        if cycle == 200:
            signal.raise_signal(sig)
    loop.hooks.append(signal_at_cycle_200)
    with StopSignals("test") as stop, stop.raising():
        report = loop.run(cycles=1000)
    name = signal.Signals(sig).name
    assert report.cycles == 201 and report.stopped_by == name and report.safe_command_written
    assert f"stopped by {name}: the safe command, then every driver deactivated" in report.format()
    assert not driver.active and stop.received == [sig]
    # The last two things the driver was told: the safe command, then deactivate.
    assert [c[0] for c in recorder.calls[-2:]] == ["write", "deactivate"]
    assert sum(c[0] == "write" for c in recorder.calls) == 201 + 1
    _, effort, stiffness, damping, velocity = recorder.calls[-2]
    # Damping mode: effort -D v on the actuated joints, clamped to the effort limit, from the state measured at
    # the stop (the last cycle's read), nothing else commanded.
    safety = loop.safety
    v = loop.state.v[safety.v_index]
    limit = loop.model.effort_limit[safety.v_index]
    expected = np.zeros_like(effort)
    expected[safety.v_index] = np.clip(0.0 - safety.damping_gain * v, -limit, limit)
    assert np.array_equal(effort, expected) and np.any(expected != 0.0)
    assert not (stiffness.any() or damping.any() or velocity.any())
    # The next run is a new one: the stop does not outlive it.
    report = loop.run(cycles=5)
    assert report.cycles == 206 and report.stopped_by == "" and not report.safe_command_written


def test_a_signal_while_the_hardware_comes_up_runs_no_cycle():
    loop = make_loop(loop={"pace": True})
    driver = loop.drivers[0]
    recorder = Recorder(driver)
    activate = driver.on_activate

    def activate_then_signal():
        activate()
        signal.raise_signal(signal.SIGTERM)
    driver.on_activate = activate_then_signal
    with StopSignals("test") as stop, stop.raising():
        report = loop.run(cycles=1000)
    assert report.cycles == 0 and report.stopped_by == "SIGTERM" and not report.safe_command_written
    assert recorder.calls == [("deactivate",)] and not driver.active
    assert "stopped by SIGTERM: before the first cycle; every driver deactivated" in report.format()


def test_a_signal_before_the_run_starts_it_never_brings_the_hardware_up():
    loop = make_loop(loop={"pace": False})
    with StopSignals("test") as stop, stop.raising(), stop_requests():
        signal.raise_signal(signal.SIGHUP)
        report = loop.run(cycles=100)
    assert report.cycles == 0 and report.stopped_by == "SIGHUP"
    assert loop.drivers[0].lifecycle_state.value == "unconfigured"


def test_rtctl_run_in_process_prints_the_report_and_exits_with_the_signal_status(capsys, monkeypatch):
    """main() around a run: the report on stdout, one line on stderr, 128 + SIGHUP."""
    from rtctl.rt.loop import ControlLoop
    original = ControlLoop._run_unpaced

    def hang_up_at_cycle_10(self, n_cycles):
        self.hooks.append(lambda cycle, *_: signal.raise_signal(signal.SIGHUP) if cycle == 10 else None)
        original(self, n_cycles)
    monkeypatch.setattr(ControlLoop, "_run_unpaced", hang_up_at_cycle_10)
    status = main(["run", str(DEMO_CONFIG), "--offline", "--duration", "1"])
    out, err = capsys.readouterr()
    assert status == 129
    assert "ran 11 cycles at 1000 Hz" in out and "stopped by SIGHUP: the safe command, then every driver" in out
    assert err.splitlines()[-1] == "rtctl run: stopped by SIGHUP (exit status 129)"


# -- rtctl run in a child process whose driver stops slowly --------------------------------------------------
SLOW_STOP = """
import sys, time
import rtctl.rt.signals
rtctl.rt.signals.HARD_DEADLINE = float(sys.argv[2])
from rtctl.drivers.sim import SimDriver
from rtctl.registry import DRIVERS

@DRIVERS.register("slow_stop")
class SlowStop(SimDriver):
    def on_activate(self):
        print("activated", flush=True)

    def on_deactivate(self):
        print("deactivating", flush=True)
        time.sleep(float(sys.argv[3]))
        print("deactivated", flush=True)

from rtctl.cli import main
sys.exit(main(["run", sys.argv[1]]))
"""


def slow_stop_run(tmp_path, deadline: float, deactivate_seconds: float) -> subprocess.Popen:
    config = tmp_path / "slow_stop.toml"
    config.write_text(DEMO_CONFIG.read_text().replace('backend = "sim"', 'backend = "slow_stop"')
                      .replace("duration = 3.0", "duration = 60.0"))
    proc = subprocess.Popen([sys.executable, "-c", SLOW_STOP, str(config), str(deadline), str(deactivate_seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines = []
    while line := proc.stdout.readline():
        lines.append(line)
        if line.strip() == "activated":
            return proc
    proc.kill()
    raise AssertionError(f"the run did not start: {''.join(lines)} {proc.stderr.read()[-2000:]}")


def finish(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[str, str]:
    """The rest of stdout and stderr through the pipes' own readers (nothing they buffered is lost); killed
    after ``timeout``."""
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        out = proc.stdout.read()
        err = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
    return out, err


@pytest.mark.slow
def test_a_second_signal_during_the_stop_does_not_abort_it(tmp_path):
    proc = slow_stop_run(tmp_path, deadline=60.0, deactivate_seconds=1.0)
    try:
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "deactivating"
        proc.send_signal(signal.SIGINT)           # while the driver deactivates
        proc.send_signal(signal.SIGHUP)
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert out.startswith("deactivated\n") and "stopped by SIGTERM: the safe command, then every driver" in out
    assert "SIGINT while stopping after SIGTERM: the orderly stop goes on" in err
    assert "SIGHUP while stopping after SIGTERM: the orderly stop goes on" in err
    assert err.splitlines()[-1] == "rtctl run: stopped by SIGTERM (exit status 143)" and "Traceback" not in err


@pytest.mark.slow
def test_a_stop_that_overruns_the_hard_deadline_ends_the_process_with_one_line(tmp_path):
    deadline = 1.0
    proc = slow_stop_run(tmp_path, deadline=deadline, deactivate_seconds=60.0)
    try:
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = finish(proc)
        ended = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_STOP_DEADLINE, err
    assert deadline <= ended - sent < 30.0                 # long before the driver's 60 s
    assert out == "deactivating\n"
    assert err.strip().splitlines()[-1] == (f"rtctl run: the orderly stop after SIGTERM did not end within "
                                            f"{deadline:g} s: exiting now (status {EXIT_STOP_DEADLINE})")


def test_a_compile_in_another_thread_neither_holds_nor_raises_the_main_threads_signal():
    with StopSignals("test") as stop:
        with pytest.raises(StopSignal):
            with stop.raising():
                worker = threading.Thread(target=hold)
                worker.start()
                worker.join()
                signal.raise_signal(signal.SIGTERM)      # not held by the other thread's compile
                time.sleep(5)
        worker = threading.Thread(target=release)        # its release raises nothing there either
        worker.start()
        worker.join()
        assert stop.received == [signal.SIGTERM]
