"""``rtctl-hil``: the HIL tools' command line, run as the installed package runs it (``python -m rtctl.hil.cli``,
the same ``main`` as the console script), from a directory that is not the repository."""
import json
import signal
import socket
import subprocess
import sys
import time

import can
import pytest

from rtctl.drivers.can.bus import shutdown_bus
from rtctl.hil.can_harness import BusServer, Emulator
from rtctl.hil.cli import main
from rtctl.hil.dynamixel_emulator import EmulatorProcess, ServoChain, hil_arm


def rtctl_hil(*args, cwd):
    return subprocess.Popen([sys.executable, "-m", "rtctl.hil.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)


def test_can_bus_serves_frames_between_clients_and_stops_cleanly_on_sigterm(tmp_path):
    proc = rtctl_hil("can-bus", cwd=tmp_path)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("ws://127.0.0.1:") and url.endswith("/"), url
        a = can.Bus(interface="remote", channel=url)
        b = can.Bus(interface="remote", channel=url)
        lingering = can.Bus(interface="remote", channel=url)    # still connected when the server stops
        try:
            a.send(can.Message(arbitration_id=0x123, data=b"\x01\x02\x03", is_extended_id=False))
            got = b.recv(5.0)
            assert got is not None and got.arbitration_id == 0x123 and bytes(got.data) == b"\x01\x02\x03"
            b.send(can.Message(arbitration_id=0x456, data=b"\xAA", is_extended_id=False))
            got = a.recv(5.0)
            assert got is not None and got.arbitration_id == 0x456 and bytes(got.data) == b"\xAA"
        finally:
            shutdown_bus(a)
            shutdown_bus(b)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
        shutdown_bus(lingering)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "not properly shut down" not in err and "Traceback" not in err and err.strip() == "", err
    with pytest.raises(OSError):                                     # the port is closed
        socket.create_connection(("127.0.0.1", int(url.rstrip("/").rsplit(":", 1)[1])), timeout=1.0).close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
@pytest.mark.slow
def test_can_bus_on_a_given_port_stops_cleanly_on_sigint_and_sighup(tmp_path, sig):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = rtctl_hil("can-bus", "--port", str(port), "--channel", "bench", cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == f"ws://127.0.0.1:{port}/"
        bus = can.Bus(interface="remote", channel=f"ws://127.0.0.1:{port}/")
        shutdown_bus(bus)
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and err.strip() == "", err


@pytest.mark.slow
def test_can_bus_port_in_use_is_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = rtctl_hil("can-bus", "--port", str(port), cwd=tmp_path)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cannot listen on 127.0.0.1" in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("argv, says", [
    ([], "required"),
    (["nope"], "invalid choice"),
    (["can-bus", "--port", "99999"], "0..65535"),
    (["can-bus", "--port", "x"], "not a port number"),
    (["can-bus", "--bogus"], "rtctl-hil can-bus: error: unrecognized arguments: --bogus"),
    (["dynamixel-emulator", "--bogus"], "rtctl-hil dynamixel-emulator: error: unrecognized arguments: --bogus"),
    (["dynamixel-emulator", "--ids", "1,x"], "argument --ids: expected comma-separated integers, got '1,x'"),
    (["dynamixel-emulator", "--dt", "0"], "argument --dt: must be > 0, got 0.0"),
    (["dynamixel-emulator", "--inject-error", "2:melted"], "expected ID:KIND:SECONDS with KIND one of"),
    (["dynamixel-emulator", "--inject-error", "1:overload:nan"], "and SECONDS finite and >= 0"),
    (["dynamixel-emulator", "--viscous-friction", "-0.1"], "argument --viscous-friction: must be >= 0.0, got -0.1"),
    (["dynamixel-emulator", "--delay-ms", "nan"], "argument --delay-ms: must be finite, got nan"),
    (["dynamixel-emulator", "--temperature", "300"], "argument --temperature: must be <= 255.0, got 300.0"),
    (["dynamixel-emulator", "--robot", "nosuch"], "no URDF file, bundled model or robot model named 'nosuch'"),
    (["dynamixel-emulator", "--servo-model", "XY"], "unknown Dynamixel model 'XY'; known: ["),
    (["dynamixel-emulator", "--ids", "1,2,3"], "3 servo ids for 2 actuated joints"),
    (["can-emulator", "--protocol", "canopen"], "invalid choice"),
    (["can-emulator", "--protocol", "mit", "--channel", "ws://10.0.0.1:80/", "--ids", "1"],
     "host '10.0.0.1' is 10.0.0.1, not a loopback address"),
    (["can-emulator", "--protocol", "mit", "--channel", "ws://127.0.0.1.invalid:9/", "--ids", "1"],
     "host '127.0.0.1.invalid' does not resolve"),                # passed the old prefix test
    (["can-emulator", "--protocol", "mit", "--channel", "ws://127.0.0.1@192.0.2.1:9/", "--ids", "1"],
     "host '192.0.2.1' is 192.0.2.1, not a loopback address"),    # user info before the host: passed it too
    (["can-emulator", "--protocol", "mit", "--channel", "ws://127.0.0.1:x/", "--ids", "1"], "Port could not be"),
])
def test_bad_arguments_are_one_error_line_and_a_nonzero_exit(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and says in lines[0], captured.err
    assert captured.out == ""


def test_a_loopback_channel_is_connected_to_by_its_address():
    from rtctl.hil.can_emulator import loopback_channel

    assert loopback_channel("ws://localhost:5/bus?x=1") == "ws://127.0.0.1:5/bus?x=1"
    assert loopback_channel("ws://127.1:5") == "ws://127.0.0.1:5/"
    assert loopback_channel("ws://[::1]:5/") == "ws://[::1]:5/"


def test_help_of_each_subcommand(capsys):
    for argv in (["--help"], ["can-bus", "--help"], ["can-emulator", "--help"], ["dynamixel-emulator", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
        assert "usage:" in capsys.readouterr().out, argv


@pytest.mark.slow
def test_can_emulator_without_a_bus_server_is_one_line(tmp_path):
    with socket.socket() as s:              # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = rtctl_hil("can-emulator", "--protocol", "mit", "--channel", f"ws://127.0.0.1:{port}/", "--ids", "1", "2",
                     cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "READY" not in out
    lines = err.strip().splitlines()
    lines = [line for line in lines if not line.startswith("rtctl: compil")]
    assert len(lines) == 1 and "cannot open the CAN bus" in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT], ids=["SIGHUP", "SIGINT"])
@pytest.mark.slow
def test_can_emulator_stops_on_sighup_and_sigint_with_its_counters(sig):
    server = BusServer("rtctl-hil-cli-signals")
    try:
        emu = Emulator(server, "mit", [1])
        emu.proc.send_signal(sig)
        out, err = emu.proc.communicate(timeout=30)
    finally:
        server.stop()
    assert emu.proc.returncode == 0 and "Traceback" not in err, err
    counters = json.loads(out.strip().splitlines()[-1])
    assert counters["final"]["1"]["state"] == "rest", counters


def test_a_plant_step_below_real_time_yields_after_its_slice():
    """``--dt`` far below what a step costs: one wake-up steps for ADVANCE_SLICE of wall time, not through the
    backlog (40 ms of plant time at 1 us steps is 40 000 steps, over a second of work)."""
    chain = ServoChain(hil_arm(2), dt=1e-6)
    chain.advance(100.0)                        # the plant's clock starts
    start = time.perf_counter()
    chain.advance(100.04)
    spent = time.perf_counter() - start
    # A step costs tens of us: the slice holds some tens of steps; a tenth of the backlog would be 20 ms of work.
    assert 0 < chain.stats["steps"] < 4_000 and chain.sim_t < 0.004, chain.stats
    assert spent < 0.5, spent                    # the slice and a step (generous for a descheduled process)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.slow
def test_dynamixel_emulator_at_dt_1e_9_still_stops_on_a_signal(sig):
    """At ``--dt 1e-9`` the plant can never keep real time (it spun at full CPU and never looked at SIGTERM or
    Ctrl-C): it runs slower than real time, counted, and a signal ends it with its STATS line."""
    emu = EmulatorProcess("--robot", "dxl_arm2", "--dt", "1e-9")
    try:
        time.sleep(0.3)
        sent = time.monotonic()
        emu.proc.send_signal(sig)
        out, err = emu.proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if emu.proc.poll() is None:
            emu.proc.kill()
            emu.proc.communicate()
    assert emu.proc.returncode == 0 and "Traceback" not in err, err
    stats = json.loads(next(line for line in out.splitlines() if line.startswith("STATS "))[6:])
    assert stats["steps"] > 0 and stats["lag_skips"] > 0, stats
    assert took < 5.0, took
