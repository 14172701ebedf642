"""The numba cache (pickled machine code) lives only in a private directory; otherwise rtctl runs uncached.

Each case imports rtctl in a fresh interpreter with a controlled HOME / XDG_CACHE_HOME and compiles one
small ``cache=True`` kernel (``rtctl.sweep.runner._accumulate_effort``), then looks at where numba put it.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import pytest

PROBE = """
import json, numpy as np, numba, rtctl
from rtctl.sweep.runner import _accumulate_effort
_accumulate_effort(np.zeros(2), np.zeros(2), np.arange(2), 1e-3, np.zeros(1), np.zeros(1))
print(json.dumps({"cache_dir": numba.config.CACHE_DIR, "kernel_cache": _accumulate_effort.stats.cache_path}))
"""

WARNING = "rtctl: numba kernels run uncached"


def probe(tmp_path, xdg=None, **extra):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), **extra)
    if xdg is not None:
        env["XDG_CACHE_HOME"] = str(xdg)
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def files_under(path) -> list[str]:
    return sorted(os.path.join(d, f) for d, dirs, files in os.walk(path) for f in files + dirs)


def assert_uncached(result, stderr, reason):
    assert result["kernel_cache"] is None and result["cache_dir"] == ""
    lines = [line for line in stderr.splitlines() if line.startswith(WARNING)]
    assert len(lines) == 1 and reason in lines[0], stderr


@pytest.mark.slow
def test_private_directory_is_created_0700_and_used(tmp_path):
    xdg = tmp_path / "xdg"   # does not exist yet: created private
    result, stderr = probe(tmp_path, xdg)
    root = xdg / "rtctl"
    assert WARNING not in stderr
    assert os.path.dirname(result["cache_dir"]) == os.path.realpath(root)
    assert os.path.basename(result["cache_dir"]).startswith("numba-")
    assert result["kernel_cache"].startswith(result["cache_dir"] + os.sep)
    for path in (xdg, root, result["cache_dir"]):
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert any(f.endswith(".nbi") for f in files_under(result["cache_dir"]))


@pytest.mark.slow
def test_default_location_is_under_home(tmp_path):
    result, _ = probe(tmp_path, xdg=None)
    assert result["cache_dir"].startswith(os.path.realpath(tmp_path / "home" / ".cache" / "rtctl") + os.sep)
    relative, _ = probe(tmp_path, xdg="relative/dir")   # the XDG spec: a relative path is ignored
    assert relative["cache_dir"] == result["cache_dir"]


@pytest.mark.slow
def test_world_writable_cache_home_is_refused(tmp_path):
    xdg = tmp_path / "shared"
    xdg.mkdir()
    xdg.chmod(0o777)
    result, stderr = probe(tmp_path, xdg)
    assert_uncached(result, stderr, "writable by other users")
    assert files_under(xdg) == []   # nothing created or cached there (not even numba's own default)


@pytest.mark.slow
def test_world_writable_cache_dir_of_ours_is_refused(tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "rtctl").mkdir(parents=True)
    (xdg / "rtctl").chmod(0o777)
    result, stderr = probe(tmp_path, xdg)
    assert_uncached(result, stderr, f"{xdg / 'rtctl'} is writable by other users")
    assert files_under(xdg) == [str(xdg / "rtctl")]


@pytest.mark.slow
def test_symlink_planted_by_an_attacker_is_not_followed(tmp_path):
    xdg, attacker = tmp_path / "xdg", tmp_path / "attacker"
    xdg.mkdir()
    attacker.mkdir()
    (attacker / "numba-planted").mkdir()
    (xdg / "rtctl").symlink_to(attacker)
    result, stderr = probe(tmp_path, xdg)
    assert_uncached(result, stderr, "is a symbolic link")
    assert files_under(attacker) == [str(attacker / "numba-planted")]
    assert files_under(xdg) == [str(xdg / "rtctl")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("owned", ["cache_dir", "parent"])
@pytest.mark.slow
def test_directory_owned_by_another_user_is_refused(tmp_path, owned):
    """E.g. root under sudo with the invoking user's HOME: that user must not choose what root loads."""
    xdg = tmp_path / "xdg"
    (xdg / "rtctl").mkdir(parents=True, mode=0o700)
    os.chown(xdg / "rtctl" if owned == "cache_dir" else xdg, 65534, 65534)
    result, stderr = probe(tmp_path, xdg)
    assert_uncached(result, stderr, "is owned by another user (uid 65534)")
    assert files_under(xdg) == [str(xdg / "rtctl")]


@pytest.mark.slow
def test_stale_siblings_are_pruned_without_following_symlinks(tmp_path):
    xdg = tmp_path / "xdg"
    first, _ = probe(tmp_path, xdg)
    root, current = xdg / "rtctl", first["cache_dir"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not rtctl's")
    old = time.time() - 3 * 24 * 3600
    stale = root / "numba-0000000000000000"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "f.nbi").write_bytes(b"x")
    (stale / "sub" / "link").symlink_to(outside)
    recent = root / "numba-1111111111111111"
    recent.mkdir()
    (root / "numba-2222222222222222").symlink_to(outside)   # a link named like a cache dir: left alone
    (root / "numba-3333333333333333").write_text("a file")
    unrelated = root / "other"
    unrelated.mkdir()
    for path in (stale, root / "numba-2222222222222222", unrelated, current):
        os.utime(path, (old, old), follow_symlinks=False)
    second, stderr = probe(tmp_path, xdg)
    assert second["cache_dir"] == current and WARNING not in stderr
    assert not stale.exists()
    assert (outside / "keep.txt").read_text() == "not rtctl's"
    assert recent.is_dir() and unrelated.is_dir() and (root / "numba-3333333333333333").is_file()
    assert (root / "numba-2222222222222222").is_symlink()
    # the current sources' directory is never pruned, however old: it is touched at every import
    assert os.path.isdir(current) and time.time() - os.stat(current).st_mtime < 3600


@pytest.mark.slow
def test_the_cache_keeps_two_other_source_versions_beyond_an_hour(tmp_path):
    """Every edited source tree gets its own directory; without a bound they pile up (115 MB seen)."""
    xdg = tmp_path / "xdg"
    first, _ = probe(tmp_path, xdg)
    root = xdg / "rtctl"
    now = time.time()
    ages_h = {"numba-a000000000000001": 0.1, "numba-a000000000000002": 2, "numba-a000000000000003": 3,
              "numba-a000000000000004": 5, "numba-a000000000000005": 30}
    for name, age in ages_h.items():
        (root / name).mkdir()
        os.utime(root / name, (now - age * 3600, now - age * 3600))
    second, _ = probe(tmp_path, xdg)
    kept = sorted(p.name for p in root.iterdir() if p.name.startswith("numba-"))
    # The two most recently used stay; beyond them a version goes once unused for an hour (a process
    # may still be using a more recent one), and any version unused for a day goes.
    current = os.path.basename(first["cache_dir"])
    assert kept == sorted([current, "numba-a000000000000001", "numba-a000000000000002"])


@pytest.mark.slow
def test_explicit_numba_cache_dir_is_respected(tmp_path):
    mine = tmp_path / "mine"
    result, stderr = probe(tmp_path, tmp_path / "xdg", NUMBA_CACHE_DIR=str(mine))
    assert result["cache_dir"] == str(mine) and WARNING not in stderr
    assert not (tmp_path / "xdg").exists()
