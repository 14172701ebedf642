"""``rtctl record``, ``rtctl replay`` and ``rtctl dashboard`` stop in order on SIGTERM and on SIGHUP, and a run's
telemetry process outlives a hang-up of the whole process group.

Each runs as an operator runs it (``python -m rtctl.cli ...`` in a child process): the recorder closes a
readable MCAP holding every sample it had received and prints its summary, the replay says how many samples it
sent, the dashboard closes its port; each exits with 128 + the signal's number and one line naming it.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from rtctl.config import DEMO_CONFIG
from rtctl.telemetry.schema import TOPIC_SAMPLES, decode
from rtctl.telemetry.tools import read_recording, rows_of
from telemetry_helpers import free_port, sample_rows, subscriber, write_recording

TERM, HUP = signal.SIGTERM, signal.SIGHUP
SAMPLES = 800            # 0.8 s recorded at 1 kHz: 16 s of replay at --speed 0.05, stopped well before its end


def rtctl(*args, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rtctl.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)


def wait_line(stream, match, proc, timeout: float = 60.0) -> str:
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        while line := stream.readline():
            if match(line.strip()):
                return line.strip()
    finally:
        timer.cancel()
    raise AssertionError(f"{proc.args[3:]} exited (status {proc.wait()}) before the line it should print")


def finish(proc, timeout: float = 60.0) -> tuple[str, str]:
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
    return out, err


def stopped_line(command, sig):
    return f"rtctl {command}: stopped by {signal.Signals(sig).name} (exit status {128 + sig})"


@pytest.mark.parametrize("record_sig, replay_sig", [(TERM, HUP), (HUP, TERM)], ids=["record-TERM", "record-HUP"])
@pytest.mark.slow
def test_record_and_replay_stop_in_order_on_a_signal(tmp_path, record_sig, replay_sig):
    recording = write_recording(tmp_path / "in.mcap", sample_rows(SAMPLES))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    out_path = tmp_path / "out.mcap"
    rec = rtctl("record", str(out_path), "--endpoint", endpoint, "--no-progress", cwd=tmp_path)
    rep = sub = None
    try:
        wait_line(rec.stderr, lambda s: s.startswith("waiting for a publisher"), rec)    # its loop is running
        rep = rtctl("replay", str(recording), "--endpoint", endpoint, "--speed", "0.05", "--no-progress",
                    cwd=tmp_path)
        wait_line(rep.stdout, lambda s: s.startswith("rtctl replay: publishing on"), rep)
        # The recorder subscribed long before this subscriber (the replay waits 0.5 s for subscribers): what
        # this one has seen, it has received too.
        sub = subscriber(endpoint)
        batches, end = 0, time.monotonic() + 30.0
        while batches < 3 and time.monotonic() < end:
            if sub.poll(100) and sub.recv_multipart()[0] == TOPIC_SAMPLES:
                batches += 1
        assert batches == 3, "no samples from the replay"
        rep.send_signal(replay_sig)
        rep_out, rep_err = finish(rep)
        rec.send_signal(record_sig)
        rec_out, rec_err = finish(rec)
    finally:
        for proc in (rec, rep):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if sub is not None:
            sub.close(linger=0)
    assert rep.returncode == 128 + replay_sig, rep_err
    sent = int(re.fullmatch(r"rtctl replay: (\d+) samples sent", rep_out.strip().splitlines()[-1]).group(1))
    assert 0 < sent < SAMPLES and rep_err.strip().splitlines()[-1] == stopped_line("replay", replay_sig), rep_err
    assert rec.returncode == 128 + record_sig, rec_err
    summary = re.fullmatch(r"rtctl record: (\d+) samples .* -> (.*); stopped by (SIG\w+)",
                           rec_out.strip().splitlines()[-1])
    assert summary and summary.group(2) == str(out_path), rec_out
    assert summary.group(3) == signal.Signals(record_sig).name
    kept = read_recording(str(out_path), progress=False)["samples"]["index"]
    got = int(summary.group(1))
    assert 0 < got <= sent and len(kept) == got
    assert rec_err.strip().splitlines()[-1] == stopped_line("record", record_sig), rec_err
    assert "Traceback" not in rec_err + rep_err


@pytest.mark.parametrize("sig", [TERM, HUP], ids=["SIGTERM", "SIGHUP"])
def test_dashboard_stops_and_closes_its_port_on_a_signal(tmp_path, sig):
    dash = rtctl("dashboard", "--endpoint", f"tcp://127.0.0.1:{free_port()}", "--port", "0", cwd=tmp_path)
    try:
        line = wait_line(dash.stdout, lambda s: s.startswith("rtctl dashboard: http://"), dash)
        port = int(re.match(r"rtctl dashboard: http://127\.0\.0\.1:(\d+)/", line).group(1))
        socket.create_connection(("127.0.0.1", port), timeout=5).close()         # serving
        dash.send_signal(sig)
        _out, err = finish(dash)
    finally:
        if dash.poll() is None:
            dash.kill()
            dash.wait()
    assert dash.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == stopped_line("dashboard", sig) and "Traceback" not in err, err
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()


@pytest.mark.slow
def test_a_hang_up_of_the_whole_process_group_leaves_the_telemetry_process_to_rtctl(tmp_path):
    """A closed terminal sends SIGHUP to every process of its group, the telemetry publisher process too: it
    leaves the stop to ``rtctl run``, which ends the run in order and then closes it with a flush, so the
    stream ends with the run's last cycle."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config = tmp_path / "run.toml"
    config.write_text(DEMO_CONFIG.read_text().replace("duration = 3.0", "duration = 60.0")
                      + f'\n[telemetry]\nenabled = true\nendpoint = "{endpoint}"\n')
    run = subprocess.Popen([sys.executable, "-m", "rtctl.cli", "run", str(config)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True)
    sub = None
    try:
        wait_line(run.stdout, lambda s: s.startswith("rtctl: telemetry on"), run, timeout=180.0)
        sub = subscriber(endpoint)
        indices = []
        end = time.monotonic() + 60.0
        while len(indices) < 300 and time.monotonic() < end:
            if sub.poll(100):
                topic, payload = sub.recv_multipart()[:2]
                if topic == TOPIC_SAMPLES:
                    indices += [row["index"] for row in rows_of(decode(topic, payload))]
        assert len(indices) >= 300, "no telemetry from the run"
        os.killpg(run.pid, HUP)
        out, err = finish(run)
        while sub.poll(1000):
            topic, payload = sub.recv_multipart()[:2]
            if topic == TOPIC_SAMPLES:
                indices += [row["index"] for row in rows_of(decode(topic, payload))]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        if sub is not None:
            sub.close(linger=0)
    assert run.returncode == 128 + HUP, err
    cycles = int(re.search(r"^ran (\d+) cycles", out, re.M).group(1))
    assert "stopped by SIGHUP: the safe command, then every driver deactivated" in out
    assert max(indices) == cycles - 1, (max(indices), cycles)      # flushed to the last cycle
