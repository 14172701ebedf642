"""``rtctl warm``: every kernel a config reaches lands in numba's cache, so the next process compiles none of it,
and a config it cannot build is one line naming the file, the others warmed all the same."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

LINE = re.compile(r"rtctl warm: (?P<config>\S+): (?P<compiled>\d+) kernels compiled \((?P<seconds>[\d.]+) s\)")


def warm(*args, cwd):
    return subprocess.run([sys.executable, "-m", "rtctl.cli", "warm", "--no-progress", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_a_second_warm_of_the_same_configs_compiles_nothing(tmp_path):
    first = warm("demo", "stewart", "--jobs", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = warm("demo", "stewart", "--jobs", "2", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    rows = [LINE.fullmatch(line) for line in second.stdout.splitlines()[:2]]
    assert all(rows), second.stdout
    assert [row["config"].rsplit("/", 1)[-1] for row in rows] == ["demo.toml", "stewart.toml"]
    assert [int(row["compiled"]) for row in rows] == [0, 0], second.stdout
    assert "2 of 2 configs ready" in second.stdout and second.stdout.rstrip().endswith(", 0 kernels compiled")


@pytest.mark.slow
def test_a_config_it_cannot_build_is_named_and_the_others_are_warmed(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text('[robot]\nmodel = "arm7"\n[controller]\ntype = "computed_torque"\nkp = -1.0\n')
    result = warm(str(broken), "demo", "--jobs", "1", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"rtctl warm: {broken}: error: ") and "kp" in lines[0], lines[0]
    assert LINE.fullmatch(lines[1]) and "demo.toml" in lines[1], lines[1]
    assert "1 of 2 configs ready" in lines[2], lines[2]
