"""Scenario sweeps: sampling, failures as data, resume, and identical results on every backend."""
from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from rtctl.cli import main
from rtctl.sweep import SweepError, create_backend, load_sweep, read_rows, run_sweep
from rtctl.sweep.report import pareto_front
from rtctl.sweep.runner import run_one

PHYSICS = ("status", "tracking_rms", "tracking_max", "peak_effort", "actuator_energy", "trips", "cycles")


def write(tmp_path, body: str, name="sweep.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


MASS16 = """
[sweep]
base = "demo"
method = "grid"
duration = 0.4

[[sweep.parameter]]
path = "plant.mass_scale"
values = [0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]

[[sweep.parameter]]
path = "controller.kp"
values = [100.0, 900.0]
"""


def physics(rows):
    return {r["run_id"]: tuple(r.get(k) for k in PHYSICS) for r in rows}


@pytest.fixture(scope="module")
def sequential_rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seq")
    sweep = load_sweep(write(tmp, MASS16))
    summary = run_sweep(sweep, tmp / "seq.parquet", backend=create_backend("sequential"), progress=False)
    assert summary.ran == 16 and summary.by_status == {"ok": 16}
    return read_rows(tmp / "seq.parquet")


def test_grid_runs_every_combination_in_order(tmp_path):
    sweep = load_sweep(write(tmp_path, MASS16))
    runs = sweep.runs()
    assert len(runs) == 16
    expected = list(itertools.product([0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4], [100.0, 900.0]))
    assert [(r["params"]["plant.mass_scale"], r["params"]["controller.kp"]) for r in runs] == expected
    for r in runs:
        cfg = r["config"]
        assert cfg["loop"]["pace"] is False and cfg["loop"]["duration"] == 0.4
        assert cfg["plant"]["mass_scale"] == r["params"]["plant.mass_scale"]
        assert cfg["telemetry"]["enabled"] is False and cfg["control"]["enabled"] is False
    assert len({r["run_id"] for r in runs}) == 16


@pytest.mark.slow
def test_mass_perturbation_degrades_tracking_and_scales_effort(sequential_rows):
    """A physical check of the metrics: the nominal plant tracks best; effort grows with the plant's mass."""
    by = {(r["param.plant.mass_scale"], r["param.controller.kp"]): r for r in sequential_rows}
    for kp in (100.0, 900.0):
        rms = {m: by[(m, kp)]["tracking_rms"] for m in (0.7, 1.0, 1.4)}
        assert rms[1.0] < rms[0.7] and rms[1.0] < rms[1.4]
        peaks = [by[(m, kp)]["peak_effort"] for m in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)]
        assert all(b > a for a, b in zip(peaks, peaks[1:]))
    for m in (0.7, 1.4):  # stiffer gains shrink the error of a mismatched model
        assert by[(m, 900.0)]["tracking_rms"] < 0.5 * by[(m, 100.0)]["tracking_rms"]
    assert all(r["cycles"] == 400 and r["trips"] == 0 for r in sequential_rows)


@pytest.mark.slow
def test_local_pool_and_dask_local_cluster_give_identical_metrics(tmp_path, sequential_rows):
    pytest.importorskip("dask.distributed")
    sweep = load_sweep(write(tmp_path, MASS16))
    expected = physics(sequential_rows)
    with create_backend("local", workers=2) as pool:
        run_sweep(sweep, tmp_path / "local.parquet", backend=pool, progress=False)
    with create_backend("dask", workers=2) as dask:
        assert dask.workers == 2
        run_sweep(sweep, tmp_path / "dask.parquet", backend=dask, progress=False)
    assert physics(read_rows(tmp_path / "local.parquet")) == expected
    assert physics(read_rows(tmp_path / "dask.parquet")) == expected


FAILING = """
[sweep]
base = "demo"
method = "zip"
duration = 0.3

[[sweep.parameter]]
path = "controller.type"
values = ["computed_torque", "stewart_computed_torque", "computed_torque", "computed_torque"]

[[sweep.parameter]]
path = "controller.kp"
values = [400.0, 400.0, 9.0e5, 4.0e6]

[[sweep.parameter]]
path = "plant.mass_scale"
values = [1.0, 1.0, 0.1, 1.0]
"""


@pytest.mark.slow
def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path):
    sweep = load_sweep(write(tmp_path, FAILING))
    summary = run_sweep(sweep, tmp_path / "f.parquet", backend=create_backend("sequential"), progress=False)
    rows = {r["index"]: r for r in read_rows(tmp_path / "f.parquet")}
    assert summary.ran == 4 and len(rows) == 4
    assert rows[0]["status"] == "ok" and rows[0]["reason"] == ""
    assert rows[1]["status"] == "error"   # the Stewart controller cannot run the 7-DOF arm: raised while building
    assert rows[1]["reason"].startswith("build: ") and "stewart" in rows[1]["reason"]
    assert math.isnan(rows[1]["tracking_rms"])
    # kp = 9e5 1/s^2 (kd = 1897 1/s) is stable at 1 kHz for the controller's model, not on a plant 10x lighter
    # (the loop's gains are 10x): the safety monitor trips it
    assert rows[2]["status"] in ("tripped", "diverged") and rows[2]["reason"]
    # kp = 4e6 1/s^2 at 1 kHz: no kd makes the sampled loop stable (omega dt = 2): refused while building
    assert rows[3]["status"] == "error" and "kp must stay below" in rows[3]["reason"]


class _Interrupted(Exception):
    pass


class _StopAfter:
    """A sequential backend that dies (like Ctrl-C) after ``n`` finished runs."""

    name = "stop-after"

    def __init__(self, n):
        self.n, self.workers = n, 1

    def map_unordered(self, fn, items):
        for k, item in enumerate(items):
            if k == self.n:
                raise _Interrupted
            yield item, fn(item)

    def close(self):
        pass


@pytest.mark.slow
def test_resume_skips_finished_runs(tmp_path, sequential_rows):
    sweep = load_sweep(write(tmp_path, MASS16))
    out = tmp_path / "r.parquet"
    with pytest.raises(_Interrupted):
        run_sweep(sweep, out, backend=_StopAfter(5), progress=False)
    assert not out.exists() and (tmp_path / "r.parquet.journal.jsonl").exists()
    summary = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (summary.skipped, summary.ran) == (5, 11)
    assert physics(read_rows(out)) == physics(sequential_rows)
    assert not (tmp_path / "r.parquet.journal.jsonl").exists()
    again = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (again.skipped, again.ran) == (16, 0)
    fresh = run_sweep(sweep, out, backend=_StopAfter(16), progress=False, resume=False)
    assert (fresh.skipped, fresh.ran) == (0, 16)


def test_latin_hypercube_is_seeded_stratified_and_typed(tmp_path):
    body = """
[sweep]
base = "demo"
method = "latin_hypercube"
samples = 20
seed = 7

[[sweep.parameter]]
path = "controller.kp"
low = 50.0
high = 5000.0
log = true

[[sweep.parameter]]
path = "driver.latency_cycles"
low = 0
high = 1
"""
    a, b = load_sweep(write(tmp_path, body)).runs(), load_sweep(write(tmp_path, body)).runs()
    kp = np.array([r["params"]["controller.kp"] for r in a])
    assert [r["params"] for r in a] == [r["params"] for r in b]
    assert np.all((kp >= 50.0) & (kp <= 5000.0))
    strata = np.floor((np.log(kp) - math.log(50.0)) / (math.log(5000.0) - math.log(50.0)) * 20).astype(int)
    assert sorted(strata) == list(range(20))  # one sample in each of the 20 equal-probability strata
    assert {r["params"]["driver.latency_cycles"] for r in a} <= {0, 1}
    assert all(isinstance(r["params"]["driver.latency_cycles"], int) for r in a)


@pytest.mark.parametrize("body, message", [
    ("[sweep]\nbase='demo'\n[[sweep.parameter]]\npath='controller.gain'\nvalues=[1.0]\n", "has no key 'gain'"),
    ("[sweep]\nbase='demo'\n[[sweep.parameter]]\npath='kp'\nvalues=[1.0]\n", "SECTION.KEY"),
    ("[sweep]\nbase='demo'\n[[sweep.parameter]]\npath='plant.mass_scale'\nvalues=[1.0, -2.0]\n",
     "run 1 (plant.mass_scale=-2.0): [plant] mass_scale: must be > 0"),
    ("[sweep]\nbase='demo'\nmethod='zip'\n[[sweep.parameter]]\npath='plant.mass_scale'\nvalues=[1.0, 2.0]\n"
     "[[sweep.parameter]]\npath='controller.kp'\nvalues=[1.0]\n", "equal length"),
    ("[sweep]\nbase='demo'\nmethod='random'\n[[sweep.parameter]]\npath='controller.kp'\nlow=1.0\nhigh=2.0\n",
     "samples"),
    ("[sweep]\nbase='demo'\nmethod='random'\nsamples=3\n[[sweep.parameter]]\npath='controller.type'\n"
     "low=1.0\nhigh=2.0\n", "cannot be sampled from a range"),
    ("[sweep]\nbase='missing.toml'\n[[sweep.parameter]]\npath='controller.kp'\nvalues=[1.0]\n", "cannot read"),
    ("[sweep]\nbase='demo'\n[[sweep.parameter]]\npath='controller.kp'\nvalues=[1.0]\n[backend]\nkind='ray'\n",
     "[backend] kind"),
    *[(f"[sweep]\nbase='demo'\n[[sweep.parameter]]\npath='controller.kp'\nvalues=[1.0]\n[backend]\nrun_timeout={v}\n",
       "[backend] run_timeout") for v in ("0", "0.0", "-2.5", "'abc'", "inf", "nan", "true", "[1.0]")],
])
def test_bad_sweep_files_name_the_problem(tmp_path, body, message):
    with pytest.raises(SweepError, match=None) as info:
        load_sweep(write(tmp_path, body))
    assert message in str(info.value) and "sweep.toml" in str(info.value)


def test_pareto_front_is_the_set_of_non_dominated_points():
    rng = np.random.default_rng(3)
    x, y = rng.random(200), rng.random(200)
    front = set(pareto_front(x, y).tolist())
    for i in range(200):
        dominated = np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i])))
        assert (i in front) == (not dominated)


@pytest.mark.slow
def test_cli_sweep_and_report(tmp_path, capsys):
    sweep = write(tmp_path, FAILING)
    out = tmp_path / "cli.parquet"
    assert main(["sweep", str(sweep), "--out", str(out), "--backend", "sequential", "--no-progress"]) == 0
    assert "4 runs: 0 already done, 4 ran" in capsys.readouterr().out
    assert main(["sweep", str(sweep), "--out", str(out), "--backend", "sequential", "--no-progress"]) == 0
    assert "4 runs: 4 already done, 0 ran" in capsys.readouterr().out
    png = tmp_path / "report.png"
    assert main(["sweep-report", str(out), "--out", str(png)]) == 0
    assert "missing" not in capsys.readouterr().err                  # all 4 planned runs are there
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(["sweep", str(tmp_path / "nope.toml"), "--out", str(out)]) == 2


TIMEOUT = """
[sweep]
base = "demo"
method = "zip"

[[sweep.parameter]]
path = "loop.duration"
values = [0.3, 600.0, 600.0]     # 600 s of control time take far longer than 0.2 s of wall time

[[sweep.parameter]]
path = "controller.kp"
values = [400.0, 400.0, 900.0]

[backend]
run_timeout = 0.2
"""


@pytest.mark.parametrize("kind", ["sequential", "local"])
@pytest.mark.slow
def test_wall_clock_limit_stops_slow_runs_with_partial_metrics(tmp_path, kind):
    sweep = load_sweep(write(tmp_path, TIMEOUT))
    assert sweep.backend["run_timeout"] == 0.2
    out = tmp_path / "t.parquet"
    with create_backend(kind, workers=2) as backend:
        summary = run_sweep(sweep, out, backend=backend, progress=False)
    assert summary.by_status == {"ok": 1, "timeout": 2}
    assert "timeout 2" in summary.format() and "run_timeout" in summary.format()
    rows = {r["index"]: r for r in read_rows(out)}
    assert rows[0]["status"] == "ok" and rows[0]["cycles"] == 300 and rows[0]["reason"] == ""
    for i in (1, 2):
        row = rows[i]
        assert row["status"] == "timeout"
        m = re.fullmatch(r"wall-clock limit 0\.2 s reached at control time (\d+\.\d{3}) s of 600\.0 s "
                         r"\(cycle (\d+)\)", row["reason"])
        assert m, row["reason"]
        assert 0 < row["cycles"] < 600_000 and int(m.group(2)) == row["cycles"]
        assert float(m.group(1)) == pytest.approx(row["cycles"] * 1e-3, abs=1e-3)
        # the metrics of the cycles that ran are kept
        for metric in ("tracking_rms", "tracking_max", "peak_effort", "actuator_energy", "compute_p50_us"):
            assert math.isfinite(row[metric]) and row[metric] > 0, metric
        assert row["trips"] == 0
    # the limit does not touch a run that finishes: same physics as without it
    run = dict(sweep.runs()[0], run_timeout=None)
    unlimited = run_one(run)
    assert tuple(unlimited[k] for k in PHYSICS) == tuple(rows[0][k] for k in PHYSICS)
    # timeout rows are finished runs: resume skips them
    again = run_sweep(sweep, out, backend=create_backend("sequential"), progress=False)
    assert (again.skipped, again.ran) == (3, 0)
