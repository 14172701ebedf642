"""One server per endpoint, on a control PC that other programs share.

* The attack as found: a second ``rtctl run`` on the ``ipc://`` endpoints of a running one started normally
  (ZeroMQ unlinks the first run's live socket files) and took its control channel over, so an e-stop sent to
  the endpoint stopped the newcomer while the running robot finished armed. Now the second run is refused in
  one line naming the first (its pid and command line), and the e-stop reaches the running one.
* Every server rtctl starts (telemetry, PlotJuggler, control, replay, dashboard, Foxglove, the HIL CAN bus)
  refuses an endpoint another process serves, naming that process; once the holder dies (SIGKILL: no clean-up)
  the endpoint is taken over, its stale socket and lock file with it.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zmq

import rtctl
from rtctl.cli import main
from rtctl.operator import ControlServer, request
from rtctl.telemetry import Telemetry
from rtctl.telemetry.endpoints import EndpointInUse, bind, close
from telemetry_helpers import make_loop

TOKEN = "one-run-per-endpoint-token-0123"
DEMO = Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml"
HOLD_ZMQ = ("import sys, zmq\nfrom rtctl.telemetry.endpoints import bind\n"
            "sock = zmq.Context().socket(zmq.XPUB)\nprint(bind(sock, sys.argv[1]), flush=True)\nsys.stdin.read()\n")
HOLD_TCP = ("import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
            "print(s.getsockname()[1], flush=True)\nsys.stdin.read()\n")


def _holder(code: str, *args):
    """A process of its own serving an endpoint until killed; (process, what it printed)."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    return proc, proc.stdout.readline().strip()


def _kill(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def _lines_until(stream, marker: str, lines: list, timeout: float = 120.0) -> None:
    done = threading.Event()

    def read():
        for line in stream:
            lines.append(line)
            if marker in line:
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(timeout) and any(marker in line for line in lines), "".join(lines)


@pytest.mark.slow
def test_a_second_rtctl_run_on_a_running_one_s_ipc_endpoints_is_refused_naming_it_and_its_estop_still_works(
        tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    config = tmp_path / "run.toml"
    control = f"ipc://{tmp_path}/control.sock"
    config.write_text(DEMO.read_text() + f'\n[telemetry]\nenabled = true\nendpoint = "ipc://{tmp_path}/tel.sock"\n'
                      f'plotjuggler = true\nplotjuggler_endpoint = "ipc://{tmp_path}/pj.sock"\n\n[control]\n'
                      f'enabled = true\nendpoint = "{control}"\ntoken_file = "{token}"\n')
    first = subprocess.Popen([sys.executable, "-m", "rtctl.cli", "run", str(config), "--duration", "120"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        _lines_until(first.stdout, "control channel on", lines)
        assert main(["run", str(config), "--duration", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "tel.sock is in use by pid" in err, err
        command = f"rtctl run {config} --duration 120"      # shown whole up to 100 characters (a deep tmp_path: cut)
        shown = command if len(command) <= 100 else command[:97] + "..."
        assert f"(the telemetry publisher of pid {first.pid} ({shown}))" in err, err
        assert first.poll() is None and all((tmp_path / f"{name}.sock").exists() for name in ("tel", "pj", "control"))
        assert request(control, {"cmd": "estop", "reason": "the second run's operator"})["ok"]
        status = request(control, {"cmd": "status"})      # the running robot's channel: it is the one stopped
        assert status["tripped"] and "the second run's operator" in status["trip_reason"], status
        assert status["cycle"] > 0 and first.poll() is None
    finally:
        first.kill()
        first.communicate()


def _start_control(endpoint):
    return ControlServer(make_loop(), endpoint=endpoint, token=TOKEN).start()


def _start_telemetry(endpoint):
    return Telemetry(endpoint=endpoint, process=True).attach(make_loop()).start()


def _start_plotjuggler(endpoint):
    return Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint=endpoint).attach(make_loop()).start()


@pytest.mark.parametrize("start, scheme", [
    (_start_control, "ipc"), (_start_control, "tcp"), (_start_telemetry, "ipc"), (_start_plotjuggler, "ipc")],
    ids=["control-ipc", "control-tcp", "telemetry-process-ipc", "plotjuggler-thread-ipc"])
@pytest.mark.slow
def test_a_zmq_server_refuses_an_endpoint_another_process_serves_and_takes_it_over_once_that_one_died(
        tmp_path, start, scheme):
    asked = f"ipc://{tmp_path}/server.sock" if scheme == "ipc" else "tcp://127.0.0.1:0"
    holder, endpoint = _holder(HOLD_ZMQ, asked)
    try:
        with pytest.raises(RuntimeError, match=f"{endpoint} is in use by pid {holder.pid} \\(python\\S* -c import sys"):
            start(endpoint)
    finally:
        _kill(holder)
    if scheme == "ipc":
        assert {p.name for p in tmp_path.iterdir()} == {"server.sock", "server.sock.lock"}   # left by the dead
    server = start(endpoint)
    try:
        assert server.endpoint == endpoint or server.plotjuggler_endpoint == endpoint
    finally:
        server.close()
    if scheme == "ipc":
        assert list(tmp_path.iterdir()) == []


def test_an_ipc_endpoint_is_one_server_s_within_a_process_too_and_a_live_socket_without_a_lock_is_not_replaced(
        tmp_path):
    ctx = zmq.Context.instance()
    first, second = ctx.socket(zmq.PUB), ctx.socket(zmq.PUB)
    endpoint = f"ipc://{tmp_path}/twice.sock"
    try:
        bind(first, endpoint)
        with pytest.raises(EndpointInUse, match=f"in use by pid {os.getpid()}"):
            bind(second, endpoint)
        close(first)
        assert bind(second, endpoint) == endpoint
    finally:
        close(first, 0)
        close(second, 0)
    foreign = socket.socket(socket.AF_UNIX)             # another program's live socket: no lock file beside it
    foreign.bind(str(tmp_path / "foreign.sock"))
    foreign.listen()
    try:
        with pytest.raises(EndpointInUse, match=f"foreign.sock is in use by pid {os.getpid()}"):
            bind(second, f"ipc://{tmp_path}/foreign.sock")
        assert (tmp_path / "foreign.sock").exists()
    finally:
        foreign.close()
        second.close(linger=0)


def _recording(path: Path) -> str:
    from mcap.writer import Writer

    from rtctl.telemetry.tools import CH_META, CH_SAMPLES
    with open(path, "wb") as fh:
        writer = Writer(fh)
        writer.start(profile="", library="test")
        schema = writer.register_schema(name="o", encoding="jsonschema", data=b"{}")
        meta, samples = (writer.register_channel(ch, "json", schema) for ch in (CH_META, CH_SAMPLES))
        writer.add_message(meta, log_time=0, publish_time=0,
                           data=json.dumps({"schema": "rtctl.telemetry", "version": 1, "joints": ["j"]}).encode())
        writer.add_message(samples, log_time=1, publish_time=1, data=json.dumps({"index": 0, "t": 0.0, "cycle": 0,
                                                                                 "q": [0.0]}).encode())
        writer.finish()
    return str(path)


def test_replay_refuses_an_endpoint_another_process_serves(tmp_path, capsys):
    holder, endpoint = _holder(HOLD_ZMQ, f"ipc://{tmp_path}/replay.sock")
    try:
        assert main(["replay", _recording(tmp_path / "run.mcap"), "--endpoint", endpoint, "--no-progress"]) == 1
    finally:
        _kill(holder)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"replay.sock is in use by pid {holder.pid}" in err, err


def _dashboard(port):
    from rtctl.operator.dashboard import Dashboard
    Dashboard("tcp://127.0.0.1:5555", port=port).start()


def _foxglove(port):
    from rtctl.telemetry.foxglove import FoxgloveSink
    Telemetry(endpoint="tcp://127.0.0.1:0", sinks=[FoxgloveSink(port=port)]).attach(make_loop()).start()


@pytest.mark.parametrize("start", [_dashboard, _foxglove], ids=["dashboard", "foxglove"])
def test_the_browser_servers_name_the_process_on_their_port(start):
    holder, port = _holder(HOLD_TCP)
    try:
        with pytest.raises((OSError, RuntimeError), match=f"127.0.0.1:{port} is in use by pid {holder.pid}"):
            start(int(port))
    finally:
        _kill(holder)


def test_the_hil_can_bus_names_the_process_on_its_port(tmp_path):
    holder, port = _holder(HOLD_TCP)
    try:
        out = subprocess.run([sys.executable, "-m", "rtctl.hil.cli", "can-bus", "--port", port], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    finally:
        _kill(holder)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert re.search(f"127.0.0.1:{port} is in use by pid {holder.pid} \\(python\\S* -c import socket", out.stderr), \
        out.stderr
