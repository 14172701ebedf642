"""Sweeps keep results safe: --fresh only drops the old results once the new sweep has one, Ctrl-C stops
cleanly with the finished rows kept (and a re-run resumes), and a Dask scheduler is only reached over TLS."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rtctl.cli import main
from rtctl.sweep import SweepError, SweepInterrupted, create_backend, load_sweep, read_rows, run_sweep
from rtctl.sweep.backends import check_scheduler_address

TINY = """
[sweep]
base = "demo"
method = "grid"
duration = 0.05

[[sweep.parameter]]
path = "controller.kp"
values = [100.0, 400.0, 1600.0]
"""

# Each run asks for 600 s of control time and is stopped by the wall-clock limit: a run takes ~1 s, so a
# signal sent after the first row lands while the sweep is still going (with 0.3 s, a pool whose workers
# were still compiling could finish every run within a few tenths of a second of the first row).
SLOW = """
[sweep]
base = "demo"
method = "grid"
duration = 600.0

[[sweep.parameter]]
path = "controller.kp"
values = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0]

[backend]
kind = "sequential"
run_timeout = 1.0
"""


def write(tmp_path, body, name="sweep.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


class FailsAtStart:
    name, workers = "fails-at-start", 1

    def map_unordered(self, fn, items):
        raise RuntimeError("scheduler unreachable")
        yield  # pragma: no cover

    def close(self):
        pass


class DiesAfterFirst:
    name, workers = "dies-after-first", 1

    def map_unordered(self, fn, items):
        for k, item in enumerate(items):
            if k == 1:
                raise RuntimeError("lost the cluster")
            yield item, fn(item)

    def close(self):
        pass


@pytest.fixture
def old_results(tmp_path):
    sweep = load_sweep(write(tmp_path, TINY))
    out = tmp_path / "res.parquet"
    run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    return sweep, out, out.read_bytes()


def leftovers(out):
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(out.name) and p != out)


@pytest.mark.slow
def test_fresh_keeps_the_old_results_when_the_backend_fails_at_start(old_results):
    sweep, out, before = old_results
    with pytest.raises(RuntimeError, match="scheduler unreachable"):
        run_sweep(sweep, out, backend=FailsAtStart(), resume=False, progress=False)
    assert out.read_bytes() == before and leftovers(out) == []


@pytest.mark.slow
def test_cli_fresh_keeps_the_old_results_when_the_backend_is_refused(old_results, capsys):
    sweep, out, before = old_results
    code = main(["sweep", sweep.source, "--out", str(out), "--fresh", "--no-progress",
                 "--backend", "dask", "--address", "tcp://192.0.2.7:8786"])
    assert code == 2 and "reaches a Dask scheduler only over TLS" in capsys.readouterr().err
    assert out.read_bytes() == before and leftovers(out) == []


@pytest.mark.slow
def test_fresh_drops_the_old_results_once_the_new_sweep_has_a_row(old_results):
    sweep, out, _ = old_results
    with pytest.raises(RuntimeError, match="lost the cluster"):
        run_sweep(sweep, out, backend=DiesAfterFirst(), resume=False, progress=False)
    assert not out.exists() and leftovers(out) == ["res.parquet.journal.jsonl"]   # one new row, old ones gone
    again = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (again.skipped, again.ran) == (1, 2) and len(read_rows(out)) == 3 and leftovers(out) == []


@pytest.mark.slow
def test_results_set_aside_by_a_killed_fresh_sweep_are_put_back(old_results):
    sweep, out, _ = old_results
    out.replace(out.with_name(out.name + ".previous"))   # what a --fresh sweep killed before its first row leaves
    summary = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (summary.skipped, summary.ran) == (3, 0) and len(read_rows(out)) == 3 and leftovers(out) == []


@pytest.mark.slow
def test_interrupt_finalizes_the_finished_rows(tmp_path, capsys):
    sweep = load_sweep(write(tmp_path, TINY))
    out = tmp_path / "i.parquet"

    class CtrlCAfterOne(DiesAfterFirst):
        def map_unordered(self, fn, items):
            for k, item in enumerate(items):
                if k == 1:
                    raise KeyboardInterrupt
                yield item, fn(item)

    with pytest.raises(SweepInterrupted) as info:
        run_sweep(sweep, out, backend=CtrlCAfterOne(), progress=False)
    assert (info.value.done, info.value.total, info.value.ran) == (1, 3, 1)
    assert len(read_rows(out)) == 1 and leftovers(out) == []
    # Its report says half the sweep is missing, not "1 runs (ok 1)" as if that were all.
    assert main(["sweep-report", str(out), "--out", str(tmp_path / "i.png")]) == 0
    assert "warning: 2 of the sweep's 3 planned runs are missing (interrupted" in capsys.readouterr().err
    # Ctrl-C before the first row of a --fresh sweep: the earlier results are put back
    before = out.read_bytes()

    class CtrlCAtStart(DiesAfterFirst):
        def map_unordered(self, fn, items):
            raise KeyboardInterrupt
            yield  # pragma: no cover

    with pytest.raises(SweepInterrupted) as info:
        run_sweep(sweep, out, backend=CtrlCAtStart(), resume=False, progress=False)
    assert info.value.restored and out.read_bytes() == before and leftovers(out) == []


def _sigint_as_in_a_terminal() -> None:
    """A job started in the background of a non-interactive shell inherits SIGINT ignored (and Python then
    never turns it into KeyboardInterrupt); a terminal's Ctrl-C reaches a process with the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_cli(tmp_path, extra, *, group: bool, sig=signal.SIGINT):
    """Start ``rtctl sweep`` on SLOW, send ``sig`` once the first row is in the journal (to the process, or to
    its whole process group like a terminal's Ctrl-C or hang-up), and return (exit code, stderr, results path)."""
    sweep = write(tmp_path, SLOW)
    out = tmp_path / "slow.parquet"
    journal = tmp_path / "slow.parquet.journal.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "rtctl.cli", "sweep", str(sweep), "--out", str(out),
                             "--no-progress", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True, preexec_fn=_sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 240   # generous: a cold numba cache compiles every kernel first
        while not (journal.exists() and journal.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no result within the deadline"
            time.sleep(0.01)
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err, sweep, out


POOL = ["--backend", "local", "--workers", "2"]


@pytest.mark.parametrize("extra, group, sig", [([], False, signal.SIGINT), (POOL, True, signal.SIGINT),
                                               (POOL, True, signal.SIGHUP), (POOL, False, signal.SIGTERM)],
                         ids=["sequential", "local-pool-ctrl-c", "local-pool-hang-up", "local-pool-sigterm"])
@pytest.mark.slow
def test_a_stop_signal_stops_cleanly_and_a_rerun_resumes(tmp_path, capsys, extra, group, sig):
    code, err, sweep, out = interrupt_cli(tmp_path, extra, group=group, sig=sig)
    err = "\n".join(line for line in err.splitlines() if not line.startswith("rtctl: compil"))  # cold cache
    assert code == 128 + sig, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2, err
    rows = read_rows(out)
    assert 1 <= len(rows) < 8
    assert err.strip().splitlines() == [f"rtctl sweep: interrupted after {len(rows)} of 8 runs; partial results in "
                                        f"{out}; run it again to resume",
                                        f"rtctl sweep: stopped by {signal.Signals(sig).name} (exit status {code})"]
    assert leftovers(out) == []
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress", "--backend", "sequential"]) == 0
    assert f"8 runs: {len(rows)} already done, {8 - len(rows)} ran" in capsys.readouterr().out
    final = read_rows(out)
    assert len({r["run_id"] for r in final}) == 8 and {r["status"] for r in final} == {"timeout"}
    assert {r["run_id"]: r for r in final if r["run_id"] in {x["run_id"] for x in rows}} == \
        {r["run_id"]: r for r in rows}   # the rows written before the interrupt are kept as they were


@pytest.mark.parametrize("address", ["tls://10.0.0.5:8786", "tls://sched.example:8786", "tls://127.0.0.1:8786"])
def test_tls_scheduler_addresses_are_accepted(address):
    check_scheduler_address(address)


@pytest.mark.parametrize("address", ["tcp://10.0.0.5:8786", "10.0.0.5:8786", "tcp://0.0.0.0:8786",
                                     "tcp://sched.example:8786", "ucx://10.0.0.5:13337", "ws://10.0.0.5:8786",
                                     "tcp://127.0.0.1:8786", "127.0.0.1:8786", "tcp://localhost:8786",
                                     "tcp://[::1]:8786"])
def test_unencrypted_scheduler_addresses_are_refused_even_on_this_machine(address):
    """Another user of this machine reaches a loopback scheduler as well as the network reaches a remote one."""
    with pytest.raises(SweepError) as err:
        check_scheduler_address(address)
    message = str(err.value)
    assert "\n" not in message and "only over TLS with this client's certificates" in message
    assert "runs any code sent to it, as its user, for anyone who reaches its port" in message


def test_backend_tls_keys(tmp_path, monkeypatch):
    body = TINY + '[backend]\nkind = "dask"\naddress = "tls://10.0.0.5:8786"\n' \
                  'tls_ca_file = "certs/ca.pem"\ntls_cert = "certs/client.pem"\ntls_key = "certs/client-key.pem"\n'
    sweep = load_sweep(write(tmp_path, body))
    certs = tmp_path / "certs"
    assert sweep.backend["tls"] == {"tls_ca_file": str(certs / "ca.pem"), "tls_cert": str(certs / "client.pem"),
                                    "tls_key": str(certs / "client-key.pem")}
    with pytest.raises(SweepError, match="missing tls_cert"):
        load_sweep(write(tmp_path, TINY + '[backend]\ntls_ca_file = "ca.pem"\n'))
    with pytest.raises(SweepError, match="only over TLS"):
        create_backend("dask", address="tcp://127.0.0.1:8786", tls=sweep.backend["tls"])
    with pytest.raises(SweepError, match="LocalCluster"):
        create_backend("dask", tls=sweep.backend["tls"])
    distributed = pytest.importorskip("distributed")
    seen = {}

    class FakeClient:
        def __init__(self, address, **kwargs):
            seen.update(kwargs, address=address)

    monkeypatch.setattr(distributed, "Client", FakeClient)
    monkeypatch.setattr("dask.distributed.Client", FakeClient)
    create_backend("dask", address="tls://10.0.0.5:8786", tls=sweep.backend["tls"])
    security = seen["security"]
    assert seen["address"] == "tls://10.0.0.5:8786" and security.require_encryption
    assert (security.tls_ca_file, security.tls_client_cert, security.tls_client_key) == \
        (str(certs / "ca.pem"), str(certs / "client.pem"), str(certs / "client-key.pem"))


@pytest.mark.slow
def test_a_torn_journal_line_from_a_killed_sweep_does_not_swallow_later_rows(tmp_path):
    sweep = load_sweep(write(tmp_path, TINY))
    out = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError):
        run_sweep(sweep, out, backend=DiesAfterFirst(), progress=False)
    journal = tmp_path / "t.parquet.journal.jsonl"
    with open(journal, "a") as fh:
        fh.write('{"run_id": "torn')   # killed in the middle of writing a row
    summary = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (summary.skipped, summary.ran) == (1, 2) and len(read_rows(out)) == 3
