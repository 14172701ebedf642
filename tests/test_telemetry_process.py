"""The publisher process (``[telemetry] publisher = "process"``, the default of run configs).

* Every sample, event and metadata message reaches a subscriber exactly as in the thread mode, and the
  counters (published, dropped, each sink's numbers) come back on close.
* The shared ring's file is removed as soon as the publisher process has mapped it: nothing is left in
  the file system, even when both processes are killed.
* A publisher process whose loop process dies exits by itself; a publisher process that dies leaves the
  loop running, the loss reported, and the e-stop answering on the control channel.
* A bind that fails in the publisher process is one clear error in the loop's process.
* The publisher process runs ``publisher_nice`` nicer than the loop's process, so that the loop gets a
  shared CPU first.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import msgpack
import pytest
import zmq

from rtctl.telemetry import Telemetry
from rtctl.telemetry.foxglove import FoxgloveSink
from rtctl.telemetry.schema import TOPIC_EVENT, TOPIC_META, TOPIC_SAMPLES
from rtctl.telemetry.tools import rows_of
from telemetry_helpers import Spy, assert_rows_equal, drain, make_loop, subscriber, wait_meta

TEL = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.05, "publisher": "process"}


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_the_process_publisher_delivers_every_sample_event_and_the_sinks_numbers():
    loop = make_loop(telemetry=TEL)
    tel = loop.telemetry
    assert tel.process and tel._relay.poll() is None
    fox = FoxgloveSink(port=0)
    assert fox.url == ""
    try:
        sub = subscriber(tel.endpoint)
        meta = wait_meta(sub)
        assert meta["joints"] == list(loop.controller.joint_names)
        spy = Spy(tel)
        loop.telemetry = spy
        loop.run(cycles=700)
        tel.event("operator", "a note from the control channel", cycle=5)
        loop.safety.estop("test trip")
        tel.close()
        msgs = drain(sub)
    finally:
        tel.close()
    rows = [r for topic, m in msgs if topic == TOPIC_SAMPLES for r in rows_of(m)]
    assert [r["index"] for r in rows] == list(range(700))
    assert_rows_equal(spy.rows, rows)
    assert tel.handed == 700 and tel.published == 700 and tel.dropped == 0 and tel.batches >= 14
    events = [m for topic, m in msgs if topic == TOPIC_EVENT]
    assert any(e["kind"] == "operator" and e["cycle"] == 5 for e in events)
    assert any(e["kind"] == "safety" and "e-stop: test trip" in e["detail"] for e in events)
    assert tel.events_sent == len(events) and sum(topic == TOPIC_META for topic, _ in msgs) >= 1


@pytest.mark.slow
def test_a_sink_in_the_publisher_process_reports_its_bound_url_and_counters_back():
    loop = make_loop()
    sink = FoxgloveSink(port=0)
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0", sinks=[sink],
                    process=True).attach(loop).start()
    try:
        assert sink.url.startswith("ws://127.0.0.1:") and sink.port > 0
        assert tel.plotjuggler_endpoint.startswith("tcp://127.0.0.1:")
        pj = subscriber(tel.plotjuggler_endpoint)
        time.sleep(0.3)
        loop.run(cycles=300)
        time.sleep(0.3)
        texts = []
        while pj.poll(200):
            texts.append(pj.recv())
    finally:
        tel.close()
    samples = [obj for text in texts for obj in json.loads(text)]     # arrays: one per batch
    assert len(samples) == 300 and len(texts) < 300 and "q/joint1" in samples[0]
    assert tel.published == 300 and sink.sent == 0 and sink.url  # no Foxglove client: nothing sent to one


@pytest.mark.parametrize("nice", [None, 0, 19])
@pytest.mark.slow
def test_the_publisher_process_runs_nicer_than_the_loop_by_publisher_nice(nice):
    tel_section = dict(TEL) if nice is None else dict(TEL, publisher_nice=nice)
    loop = make_loop(telemetry=tel_section)
    try:
        added = os.getpriority(os.PRIO_PROCESS, loop.telemetry._relay.pid) - os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        loop.telemetry.close()
    expected = 10 if nice is None else nice
    assert added == min(expected, 19 - os.getpriority(os.PRIO_PROCESS, 0))


@pytest.mark.slow
def test_the_publisher_process_leaves_a_real_time_policy_it_inherits():
    """A loop's process started under SCHED_FIFO (`chrt -f`): the publisher process used to inherit the loop's
    FIFO priority, where publisher_nice means nothing and a busy encoder holds a shared CPU until it blocks. It
    runs under SCHED_OTHER, publisher_nice below the loop."""
    script = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, sys.argv[1])
        from rtctl.telemetry import Telemetry
        from telemetry_helpers import make_loop
        loop = make_loop()
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except PermissionError:
            print("no permission"); sys.exit(0)
        tel = Telemetry(endpoint="tcp://127.0.0.1:0", process=True).attach(loop).start()
        try:
            pid = tel._relay.pid
            print(os.sched_getscheduler(0), os.sched_getscheduler(pid),
                  os.getpriority(os.PRIO_PROCESS, pid) - os.getpriority(os.PRIO_PROCESS, 0))
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            tel.close()
    """)
    out = subprocess.run([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no permission":
        pytest.skip("setting SCHED_FIFO needs a privilege this run does not have")
    parent, child, added = (int(x) for x in out.stdout.split())
    assert (parent, child, added) == (os.SCHED_FIFO, os.SCHED_OTHER, 10), out.stdout


def test_publisher_nice_out_of_range_is_refused_naming_it():
    with pytest.raises(ValueError, match="publisher_nice"):
        make_loop(telemetry=dict(TEL, publisher_nice=20))
    with pytest.raises(ValueError, match="publisher_nice"):
        Telemetry(endpoint="tcp://127.0.0.1:0", process=True, publisher_nice=-1)


@pytest.mark.slow
def test_the_ring_has_no_name_and_its_memory_is_reserved_before_the_loop_writes():
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", process=True).attach(loop)
    fd = tel._ring_fd
    assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:rtctl-telemetry-ring")   # no file to open
    size = os.fstat(fd).st_size
    assert os.fstat(fd).st_blocks * 512 >= size   # reserved: a full /dev/shm is an error now, not a SIGBUS later
    tel.start()
    try:
        assert tel._ring_fd is None   # handed over, closed here; the mapping stays
        loop.run(cycles=50)
    finally:
        tel.close()
    assert tel.published == 50


_LOOP_PROCESS = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {tests!r})
    from telemetry_helpers import make_loop
    loop = make_loop(telemetry={{"enabled": True, "endpoint": "tcp://127.0.0.1:0", "publisher": "process"}})
    print(loop.telemetry._relay.pid, flush=True)
    loop.run(cycles=200)
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.slow
def test_the_publisher_process_exits_when_the_loop_process_is_killed():
    script = _LOOP_PROCESS.format(tests=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    relay = int(p.stdout.split()[0])
    assert _wait_gone(relay, 10.0), "the publisher process outlived its loop process"


@pytest.mark.slow
def test_a_dead_publisher_process_leaves_the_loop_running_and_the_estop_answering():
    loop = make_loop(telemetry=TEL, control={"enabled": True, "endpoint": "tcp://127.0.0.1:0"},
                     loop={"pace": True})
    tel, control = loop.telemetry, loop.control
    try:
        loop.run(cycles=100)
        tel._relay.kill()
        assert _wait_gone(tel._relay.pid, 10.0)
        report = loop.run(cycles=200)
        assert loop.cycle == 300 and not loop.safety.tripped
        assert report.notes[0].startswith(f"TELEMETRY LOST: the publisher process (pid {tel._relay.pid}) died "
                                          "(killed by signal 9)"), report.notes
        req = zmq.Context.instance().socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(control.endpoint)
        req.send(msgpack.packb({"cmd": "estop", "reason": "after the publisher died"}))
        assert req.poll(2000)
        reply = msgpack.unpackb(req.recv(), raw=False)
        req.close()
        assert reply["ok"] and loop.safety.tripped and loop.safety.operator_stop
    finally:
        control.close()
        tel.close()
    assert any("publisher process" in e for e in tel.sink_errors), tel.sink_errors


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (ValueError, OSError, IndexError):
            continue
    return found


@pytest.mark.slow
def test_rtctl_run_says_at_once_that_its_publisher_was_killed_and_ends_with_status_5(tmp_path):
    """kill -9 of the publisher process mid-run: one line on stderr while the run goes on (before the report),
    the report's TELEMETRY LOST line, and exit status 5 instead of 0 ("armed throughout")."""
    demo = (Path(__file__).parent.parent / "rtctl" / "data" / "configs" / "demo.toml").read_text()
    config = tmp_path / "run.toml"
    config.write_text(demo + '\n[telemetry]\nenabled = true\nendpoint = "tcp://127.0.0.1:0"\n')
    proc = subprocess.Popen([sys.executable, "-m", "rtctl.cli", "run", str(config), "--duration", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []   # (monotonic time, stream, line)

    def read(stream, name):
        for line in stream:
            lines.append((time.monotonic(), name, line.rstrip("\n")))

    readers = [threading.Thread(target=read, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, "err"), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        end = time.monotonic() + 120
        while not any(text.startswith("rtctl: telemetry on ") for _, _, text in lines) and time.monotonic() < end:
            time.sleep(0.05)
        endpoint = next(text for _, _, text in lines if text.startswith("rtctl: telemetry on ")).split()[3]
        sub = subscriber(endpoint)
        while sub.poll(100) == 0 or sub.recv_multipart()[0] != TOPIC_SAMPLES:   # the loop runs
            assert time.monotonic() < end and proc.poll() is None, lines
        sub.close()
        relay = [pid for pid in _children(proc.pid) if b"rtctl.telemetry.relay" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(relay) == 1, relay
        os.kill(relay[0], signal.SIGKILL)
        assert proc.wait(120) == 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(5)
    said = [(t, text) for t, name, text in lines if name == "err" and "telemetry: the publisher process" in text]
    assert len(said) == 1, lines
    when, text = said[0]
    assert text.startswith(f"rtctl: telemetry: the publisher process (pid {relay[0]}) died (killed by signal 9) at "
                           "cycle ") and text.endswith("samples are no longer published; the run goes on")
    report = next(t for t, name, line in lines if name == "out" and line.startswith("ran 4000 cycles"))
    assert when < report   # said while the run went on, not at its end
    out = "\n".join(line for _, name, line in lines if name == "out")
    assert f"TELEMETRY LOST: the publisher process (pid {relay[0]}) died (killed by signal 9)" in out
    assert "samples handed off since were not published" in out
    assert any(name == "err" and line.startswith("rtctl: the telemetry stream was lost during the run")
               for _, name, line in lines), lines


def test_a_bind_that_fails_in_the_publisher_process_is_one_clear_error():
    ctx = zmq.Context.instance()
    taken = ctx.socket(zmq.PUB)
    taken.setsockopt(zmq.LINGER, 0)
    port = taken.bind_to_random_port("tcp://127.0.0.1")
    loop = make_loop()
    tel = Telemetry(endpoint=f"tcp://127.0.0.1:{port}", process=True).attach(loop)
    try:
        with pytest.raises(RuntimeError, match=r"telemetry: cannot bind: .*(in use|Address)"):
            tel.start()
        assert tel._relay is None and tel._ring_fd is None
    finally:
        taken.close()


@pytest.mark.slow
def test_the_publisher_process_never_imports_from_the_working_directory(tmp_path, monkeypatch):
    """A module planted in the working directory (a shared /tmp, say) is not what the publisher process runs."""
    planted = tmp_path / "rtctl"
    (planted / "telemetry").mkdir(parents=True)
    (planted / "__init__.py").write_text("")
    (planted / "telemetry" / "__init__.py").write_text("")
    (planted / "telemetry" / "relay.py").write_text(
        f"open({str(tmp_path / 'pwned')!r}, 'w').write('ran')\ndef main(argv):\n    return 3\n")
    monkeypatch.chdir(tmp_path)
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", process=True).attach(loop).start()
    try:
        loop.run(cycles=20)
    finally:
        tel.close()
    assert tel.published == 20 and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("publisher", ["process", "thread"])
@pytest.mark.slow
def test_a_subscriber_that_joins_late_gets_the_metadata_at_once_not_after_meta_period(publisher):
    """The publisher hears subscriptions (an XPUB): a subscriber that connects long after the last metadata
    message gets one within a few batch periods, not after ``meta_period`` (here 60 s). Without it a recording
    shorter than ``meta_period`` had no joint names. Two late subscribers with the same (empty) filter each
    get theirs."""
    loop = make_loop(telemetry=dict(TEL, meta_period=60.0, publisher=publisher))
    try:
        first = subscriber(loop.telemetry.endpoint)
        wait_meta(first)
        for _ in range(2):
            time.sleep(0.3)
            late = subscriber(loop.telemetry.endpoint)
            t0 = time.monotonic()
            meta = wait_meta(late, timeout=2.0)
            assert time.monotonic() - t0 < 1.0 and meta["joints"] == list(loop.controller.joint_names)
            late.close()
        first.close()
    finally:
        loop.telemetry.close()
