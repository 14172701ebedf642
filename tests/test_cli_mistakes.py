"""The command line answers each common mistake with one line on stderr and a non-zero exit, never a traceback.

Each case is one mistake a user makes on a first day (issue list: port already in use, a file that is not
what the command reads, a malformed endpoint, a sweep file given to ``run``, a misspelt name).
"""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import zmq

from rtctl.cli import main
from rtctl.operator.requests import COMMANDS
from rtctl.telemetry.schema import TOPIC_META, TOPIC_SAMPLES, envelope, pack
from rtctl.config import DEMO_CONFIG, bundled_config_path
from telemetry_helpers import free_port, sample_rows, write_recording


def one_error_line(capsys, argv, code=None):
    """Run ``rtctl ARGV`` in-process; return its single stderr line (asserting there is exactly one)."""
    try:
        status = main(argv)
    except SystemExit as stop:                                           # a mistake found by argparse
        status = stop.code
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.strip() and not line.startswith("rtctl: compil")]     # first-run compile notices
    assert status != 0, (argv, err)
    if code is not None:
        assert status == code, (argv, status, err)
    assert len(err) == 1, (argv, err)
    assert "Traceback" not in err[0]
    return err[0]


def test_replay_on_a_port_in_use_says_so(capsys, tmp_path):
    rec = write_recording(tmp_path / "r.mcap", sample_rows())
    port = free_port()
    squatter = zmq.Context.instance().socket(zmq.PUB)
    squatter.bind(f"tcp://127.0.0.1:{port}")
    try:
        line = one_error_line(capsys, ["replay", str(rec), "--endpoint", f"tcp://127.0.0.1:{port}",
                                       "--no-progress"], 1)
    finally:
        squatter.close(linger=0)
    assert "address already in use" in line


def test_dashboard_on_a_port_in_use_says_so(capsys):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        line = one_error_line(capsys, ["dashboard", "--port", str(port)], 1)
    assert "address already in use" in line


def test_plot_on_a_file_that_is_not_mcap(capsys, tmp_path):
    bad = tmp_path / "notes.mcap"
    bad.write_text("these are notes, not a recording\n")
    line = one_error_line(capsys, ["plot", str(bad), "--out", str(tmp_path / "o.png"), "--no-progress"], 2)
    assert "not a readable MCAP recording" in line and str(bad) in line


def test_plot_on_a_directory(capsys, tmp_path):
    line = one_error_line(capsys, ["plot", str(tmp_path), "--out", str(tmp_path / "o.png"), "--no-progress"], 1)
    assert line == f"rtctl plot: error: [Errno 21] Is a directory: '{tmp_path}'"


def test_plot_on_an_empty_file_and_on_a_recording_without_samples(capsys, tmp_path):
    empty = tmp_path / "empty.mcap"
    empty.write_bytes(b"")
    assert "the file is empty" in one_error_line(capsys, ["plot", str(empty), "--out", str(tmp_path / "o.png"),
                                                          "--no-progress"], 2)
    none = write_recording(tmp_path / "none.mcap", [])
    assert "no telemetry samples" in one_error_line(capsys, ["plot", str(none), "--out", str(tmp_path / "o.png"),
                                                             "--no-progress"], 2)


@pytest.mark.parametrize("endpoint", ["foo", "tcp://127.0.0.1", "tcp://127.0.0.1:0", "udp://127.0.0.1:5557"])
def test_control_with_a_malformed_endpoint(capsys, endpoint):
    line = one_error_line(capsys, ["control", "status", "--endpoint", endpoint], 2)
    assert "control endpoint" in line and repr(endpoint) in line


def test_run_on_a_sweep_file_points_to_rtctl_sweep(capsys):
    line = one_error_line(capsys, ["run", "sweep_jaw"], 2)
    assert "is a sweep file" in line and "rtctl sweep" in line


def test_run_with_a_misspelt_bundled_config_suggests_the_name(capsys):
    line = one_error_line(capsys, ["run", "stewrt"], 2)
    assert "did you mean 'stewart'" in line and "sweep_jaw" not in line


def test_sweep_report_on_a_missing_file(capsys, tmp_path):
    missing = tmp_path / "results.parquet"
    line = one_error_line(capsys, ["sweep-report", str(missing), "--out", str(tmp_path / "o.png")], 2)
    assert "no such results file" in line and str(missing) in line


def test_info_knows_robot_models_and_lists_the_names_that_exist(capsys):
    assert main(["info", "stewart"]) == 0
    assert "model 'stewart'" in capsys.readouterr().out
    line = one_error_line(capsys, ["info", "stewrt"], 2)
    assert "did you mean 'stewart'" in line and "arm7" in line and "quadruped_tail" in line


def test_a_payload_frame_typo_suggests_the_nearest_names(capsys, tmp_path):
    config = tmp_path / "payload.toml"
    text = DEMO_CONFIG.read_text()
    assert "[plant]" in text
    config.write_text(text.replace("[plant]", '[plant]\npayload_mass = 1.0\npayload_frame = "lnk7"', 1))
    line = one_error_line(capsys, ["run", str(config), "--duration", "0.01", "--offline"], 2)
    assert "'lnk7'" in line and "did you mean 'link7'" in line


def test_dashboard_beyond_loopback_explains_allow_remote(capsys):
    line = one_error_line(capsys, ["dashboard", "--host", "10.11.12.13"], 2)
    assert "--allow-remote" in line and "e-stop" in line


@pytest.mark.slow
def test_telemetry_tools_say_they_wait_for_a_publisher(capsys):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    status = main(["telemetry", "echo", "--endpoint", endpoint, "--timeout", "1.5"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"waiting for a publisher on {endpoint}" in err and "no message from" in err


@pytest.mark.slow
def test_record_with_no_publisher_exits_non_zero(capsys, tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    status = main(["record", str(tmp_path / "r.mcap"), "--endpoint", endpoint, "--duration", "1.5",
                   "--no-progress"])
    captured = capsys.readouterr()
    assert status == 1
    assert f"waiting for a publisher on {endpoint}" in captured.err and "0 samples" in captured.out


@pytest.mark.slow
def test_record_says_it_waits_on_a_line_of_its_own_beside_its_progress_bar(capsys, tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    status = main(["record", str(tmp_path / "r.mcap"), "--endpoint", endpoint, "--duration", "1.5"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"waiting for a publisher on {endpoint} ..." in err.replace("\r", "\n").splitlines(), err   # not after the bar


def test_an_unexpected_error_is_one_line_naming_its_type():
    """Outside pytest's capture: the real process prints one line, and the traceback only on request."""
    code = ("import rtctl.cli as c\n"
            "def boom(*args): raise RuntimeError('bus exploded')\n"
            "c.load_model = boom\n"
            "raise SystemExit(c.main(['info', 'arm7']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["rtctl info: error: RuntimeError: bus exploded "
                                                "(RTCTL_TRACEBACK=1 shows where)"]


def test_bundled_config_names_are_run_configs():
    assert bundled_config_path("jaw").name == "jaw.toml"


@pytest.mark.slow
def test_replayed_samples_are_stamped_when_sent_so_stats_latency_is_the_replays(tmp_path, capsys):
    """A recording's stamps are hours old; the replayed stream's hand-off -> receive latency is not."""
    import threading

    from rtctl.telemetry.playback import replay
    from rtctl.telemetry.tools import stats

    rows = sample_rows(400)
    for row in rows:
        row["stamp"] -= 3 * 3600.0                      # recorded three hours ago
    rec = write_recording(tmp_path / "old.mcap", rows)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    ready = threading.Event()
    sender = threading.Thread(target=replay, args=(str(rec), endpoint), daemon=True,
                              kwargs=dict(speed=0.25, progress=False, ready=lambda ep: ready.set(), connect_wait=1.0))
    sender.start()
    assert ready.wait(30)
    result = stats(endpoint, duration=2.5)
    sender.join(30)
    assert result["samples"] > 100
    assert 0.0 <= result["latency_ms"]["p50"] < 1000.0, result["latency_ms"]   # not 3 h = 1.08e7 ms


def installed_rtctl(*argv, timeout=60):
    """Run the installed ``rtctl`` command (the console script beside this interpreter) as a subprocess."""
    exe = Path(sys.executable).with_name("rtctl")
    assert exe.is_file(), f"no installed rtctl command beside {sys.executable}"
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=timeout)


def test_control_without_a_command_names_the_commands_as_a_real_process():
    """The issue's literal form: an endpoint but no command (argparse printed a usage block calling the
    optional KEY=VALUE params required)."""
    done = installed_rtctl("control", "--endpoint", "foo")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"rtctl control: error: missing command: one of {', '.join(COMMANDS)} "
                                        "(e.g. `rtctl control status`)"]
    assert done.stdout == ""


@pytest.mark.parametrize("argv, prog, expected", [
    ([], "rtctl", "missing command: one of info, demo, run, telemetry, record, recover, replay, plot, dashboard, "
                  "control, "),
    (["telemetry"], "rtctl telemetry", "missing subcommand: one of echo, stats "),
    (["telemetry", "--endpoint", "tcp://127.0.0.1:5555"], "rtctl telemetry", "invalid choice: 'tcp://"),
    (["control"], "rtctl control", "missing command: one of status, set_gains, "),
    (["run"], "rtctl run", "the following arguments are required: config "),
    (["telemetry", "stats", "--duration", "soon"], "rtctl telemetry stats", "invalid float value: 'soon'"),
    (["control", "status", "--bogus"], "rtctl control", "unrecognized arguments: --bogus "),   # not `rtctl:`
    (["info", "arm7", "--bogus"], "rtctl info", "unrecognized arguments: --bogus "),
    (["control", "frobnicate"], "rtctl control", "invalid choice: 'frobnicate' (choose from 'status', "),
    (["control", "set_gains", "kq=300"], "rtctl control", "set_gains: unknown field 'kq'; allowed: ['kd', 'kp']"),
    (["control", "set_gains", "kp"], "rtctl control", "expected KEY=VALUE, got 'kp'"),
    (["demo", "--duration", "-1"], "rtctl demo", "argument --duration: must be > 0, got -1.0 "),
    (["run", "demo", "--duration", "inf"], "rtctl run", "argument --duration: must be finite, got inf "),
    (["jaw-session", "jaw", "--out", "o", "--duration", "nan"], "rtctl jaw-session", "must be finite, got nan "),
    (["telemetry", "stats", "--duration", "0"], "rtctl telemetry stats", "argument --duration: must be > 0, got 0.0 "),
    (["telemetry", "echo", "--count", "0"], "rtctl telemetry echo", "argument --count: must be > 0, got 0 "),
    (["record", "o.mcap", "--samples", "-5"], "rtctl record", "argument --samples: must be > 0, got -5 "),
    (["replay", "r.mcap", "--speed", "-1"], "rtctl replay", "argument --speed: must be >= 0.0, got -1.0 "),
    (["recover", "r.mcap"], "rtctl recover", "give --out FIXED.mcap (a new file) or --in-place"),
    (["dashboard", "--port", "70000"], "rtctl dashboard", "argument --port: must be <= 65535, got 70000 "),
    (["control", "status", "--timeout", "0"], "rtctl control", "argument --timeout: must be > 0, got 0.0 "),
    (["control", "status", "--timeout", "nan"], "rtctl control", "argument --timeout: must be finite, got nan "),
    (["control", "status", "--timeout", "1e308"], "rtctl control", "argument --timeout: must be <= 86400.0, "),
])
def test_a_command_without_its_subcommand_or_argument_is_one_line(capsys, argv, prog, expected):
    line = one_error_line(capsys, argv, 2)
    assert line.startswith(f"{prog}: error: ") and expected in line, line


def test_control_passes_the_fields_every_command_takes_to_the_server(capsys):
    """The local check names a misspelt field but lets through what the server accepts on every command
    (``id``, echoed in the reply)."""
    from rtctl.operator import ControlServer
    from telemetry_helpers import make_loop

    with ControlServer(make_loop(), endpoint="tcp://127.0.0.1:0", token="a-token-of-enough-length-0123") as ctl:
        assert main(["control", "status", "id=7", "--endpoint", ctl.endpoint]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert reply["ok"] and reply["id"] == 7, reply


@pytest.mark.parametrize("publisher", ["process", "thread"])
def test_run_with_the_telemetry_port_in_use_says_cannot_bind_once(capsys, tmp_path, publisher):
    squatter = zmq.Context.instance().socket(zmq.PUB)
    squatter.setsockopt(zmq.LINGER, 0)
    port = squatter.bind_to_random_port("tcp://127.0.0.1")
    config = tmp_path / "taken.toml"
    config.write_text(DEMO_CONFIG.read_text() + f'\n[telemetry]\nenabled = true\npublisher = "{publisher}"\n'
                                                f'endpoint = "tcp://127.0.0.1:{port}"\n')
    try:
        line = one_error_line(capsys, ["run", str(config), "--duration", "0.01", "--offline"], 2)
    finally:
        squatter.close()
    assert line.startswith(f"rtctl run: error: {config}: telemetry: cannot bind: "), line
    assert line.count("cannot bind") == 1 and f"127.0.0.1:{port} is in use by pid {os.getpid()} (" in line, line
    assert line.endswith("one server per endpoint; stop that one or choose another endpoint"), line


def test_run_with_the_control_port_in_use_names_the_control_channel(capsys, tmp_path):
    squatter = zmq.Context.instance().socket(zmq.PUB)
    squatter.setsockopt(zmq.LINGER, 0)
    port = squatter.bind_to_random_port("tcp://127.0.0.1")
    config = tmp_path / "taken.toml"
    config.write_text(DEMO_CONFIG.read_text() + f'\n[control]\nenabled = true\nendpoint = "tcp://127.0.0.1:{port}"\n')
    try:
        line = one_error_line(capsys, ["run", str(config), "--duration", "0.01", "--offline"], 2)
    finally:
        squatter.close()
    assert line.startswith(f"rtctl run: error: {config}: control channel: cannot bind: "), line
    assert f"127.0.0.1:{port}" in line and "[telemetry]" not in line, line


class KnownPublisher:
    """A telemetry PUB on 127.0.0.1 publishing, every ``period`` s, one ``rtctl/samples`` batch of one sample
    with the next index (0, 1, 2, ...: ``sent`` so far), or with ``samples=False`` only ``rtctl/meta``."""

    def __init__(self, samples: bool = True, period: float = 0.002):
        self.samples, self.period, self.sent = samples, period, 0
        self.sock = zmq.Context.instance().socket(zmq.PUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self.stop.wait(self.period):
                if not self.samples:
                    self.sock.send_multipart([TOPIC_META, pack(envelope(joints=["j0"], fields={}))])
                    continue
                i = self.sent
                batch = envelope(seq=i, first=i, count=1, dropped=0, sent=time.time(),
                                 fields={"t": [i * 1e-3], "cycle": [i], "stamp": [time.time()]})
                self.sock.send_multipart([TOPIC_SAMPLES, pack(batch)])
                self.sent += 1
        finally:
            self.sock.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


class StampedStderr:
    """Stands in for sys.stderr: keeps each line written with the time it was written."""

    def __init__(self):
        self.lines, self._part = [], ""

    def write(self, text):
        self._part += text
        while "\n" in self._part:
            line, self._part = self._part.split("\n", 1)
            if line.strip() and not line.startswith("rtctl: compil"):
                self.lines.append((time.monotonic(), line))
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


@pytest.mark.slow
def test_stats_with_no_publisher_says_it_waits_after_about_a_second_and_prints_no_table(capsys, monkeypatch):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    stderr = StampedStderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    start = time.monotonic()
    status = main(["telemetry", "stats", "--endpoint", endpoint, "--duration", "2"])
    end = time.monotonic()
    assert status == 1
    assert [line for _, line in stderr.lines] == [f"waiting for a publisher on {endpoint} ..."]
    said = stderr.lines[0][0] - start
    assert 1.0 <= said < 1.7 and end - stderr.lines[0][0] > 0.2, (said, end - start)   # after ~1 s, not at the end
    assert capsys.readouterr().out == ""                                                # no table of NaNs


def test_stats_shorter_than_the_wait_still_says_it_heard_nothing(capsys):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    line = one_error_line(capsys, ["telemetry", "stats", "--endpoint", endpoint, "--duration", "0.3"], 1)
    assert line == f"waiting for a publisher on {endpoint} ..."


def test_stats_from_a_publisher_of_metadata_only_says_no_samples(capsys):
    with KnownPublisher(samples=False, period=0.05) as pub:
        line = one_error_line(capsys, ["telemetry", "stats", "--endpoint", pub.endpoint, "--duration", "0.8"], 1)
    assert line == f"no samples from {pub.endpoint} within 0.8 s (only metadata or events: is the loop running?)"
    assert capsys.readouterr().out == ""


def test_record_counts_the_samples_published_before_its_first_one(capsys, tmp_path):
    """Started late on a stream of known indices: 'published before the first one recorded' is the gap."""
    from rtctl.telemetry.tools import read_recording

    out = tmp_path / "late.mcap"
    with KnownPublisher() as pub:
        deadline = time.monotonic() + 10
        while pub.sent < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        published_before_start = pub.sent
        assert published_before_start >= 100
        status = main(["record", str(out), "--endpoint", pub.endpoint, "--samples", "50", "--no-progress"])
    assert status == 0
    index = read_recording(str(out), progress=False)["samples"]["index"].tolist()
    first = index[0]
    assert index == list(range(first, first + 50)) and first >= published_before_start
    from mcap.reader import make_reader
    with open(out, "rb") as fh:
        metas = make_reader(fh).get_summary().statistics.message_count - 50
    assert capsys.readouterr().out.splitlines() == [
        f"rtctl record: 50 samples (0 lost by this subscriber, {first} published before the first one recorded, "
        f"0 dropped by the publisher), {metas} metadata, 0 events -> {out}"]


@pytest.mark.slow
def test_dashboard_says_once_it_waits_for_a_publisher_and_keeps_serving_as_a_real_process():
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    exe = Path(sys.executable).with_name("rtctl")
    proc = subprocess.Popen([str(exe), "dashboard", "--port", "0", "--endpoint", endpoint],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def read(stream, name):
        for line in stream:
            lines.put((time.monotonic(), name, line.rstrip("\n")))

    for stream, name in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=read, args=(stream, name), daemon=True).start()
    try:
        t_url, kind, url_line = lines.get(timeout=60)
        assert kind == "out" and url_line.startswith("rtctl dashboard: http://127.0.0.1:"), url_line
        t_wait, kind, wait_line = lines.get(timeout=10)
        assert (kind, wait_line) == ("err", f"waiting for a publisher on {endpoint} ...")
        assert 0.9 <= t_wait - t_url < 2.0, t_wait - t_url
        time.sleep(1.5)                                           # said once, not every second
        assert lines.empty() and proc.poll() is None
        url = url_line.split()[2]
        with urllib.request.urlopen(url, timeout=10) as page:     # still serving the page
            assert page.status == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_dashboard_with_a_malformed_endpoint(capsys):
    line = one_error_line(capsys, ["dashboard", "--port", "0", "--endpoint", "foo"], 2)
    assert line == ("rtctl dashboard: error: telemetry endpoint 'foo': expected tcp://HOST:PORT, ipc://PATH or "
                    "inproc://NAME")


def test_plot_of_a_recording_without_samples_shows_no_progress_bar_before_the_error(capsys, tmp_path):
    none = write_recording(tmp_path / "none.mcap", [])
    line = one_error_line(capsys, ["plot", str(none), "--out", str(tmp_path / "o.png")], 2)   # progress on
    assert line == f"rtctl plot: error: {none}: the recording holds no telemetry samples"


def test_control_timeout_is_checked_so_a_silent_port_cannot_hold_it_forever():
    """A process squatting on the control port accepts the connection and never answers: `--timeout -1` waited
    for it forever (ZeroMQ's poll(-1000)). Checked like the other numbers: one usage line, at once (a process
    here, so that a wait fails the test instead of holding it; 0, nan and 1e308 are in the list above)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        done = installed_rtctl("control", "status", "--timeout", "-1", "--endpoint",
                               f"tcp://127.0.0.1:{silent.getsockname()[1]}", timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["rtctl control: error: argument --timeout: must be > 0, got -1.0 "
                                        "(`rtctl control -h` shows the usage)"]
