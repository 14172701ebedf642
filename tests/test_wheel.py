"""The wheel is the source folders, mapped as pyproject.toml's package-dir installs them, and nothing else.

The suite runs on the checkout, so a folder the build leaves out would pass it and break only the users
who ``pip install .``. Here the wheel is built (``pip wheel --no-build-isolation --no-index``: no network)
from a copy of the repository in a temporary directory, to which a new robot folder ``plants/newrobot/``
was added without editing pyproject.toml; every file of ``rtctl/``, ``drivers/``, ``plants/``, ``loops/``,
``hil/`` (modules and data: configs, URDF/MJCF models, CPG patterns, the dashboard's page) must be in it
at its mapped path (``plants/jaw/model.py`` -> ``rtctl/plants/jaw/model.py``), no test module or conftest
may be, and the wheel, installed alone, must load every entry point it declares and run the README's
first commands.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
NEW_ROBOT = {                     # a robot folder the package lists have never heard of
    "plants/newrobot/__init__.py": '"""A robot added after the packaging was written."""\n',
    "plants/newrobot/model.py": "LINKS = 2\n",
    "plants/newrobot/newrobot.toml": "[robot]\nmodel = \"arm7\"\n",
    "plants/newrobot/meshes/link1.urdf": "<robot name=\"link1\"/>\n",    # a folder of data alone
}

pytestmark = pytest.mark.skipif(not PYPROJECT.is_file(), reason="needs the source tree's pyproject.toml")


def package_dir() -> dict[str, str]:
    return tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]


def ignored():
    """What git leaves out (.gitignore: caches, build output), and hidden files."""
    patterns = [line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()]
    return shutil.ignore_patterns(".*", *(p for p in patterns if p and not p.startswith("#")))


def copy_sources(dest: Path) -> Path:
    for path in ROOT.iterdir():             # the build's own files: pyproject.toml, setup.py, README.md, ...
        if path.is_file() and not path.name.startswith("."):
            shutil.copy2(path, dest / path.name)
    for folder in sorted(set(package_dir().values())):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignored())
    for relative, text in NEW_ROBOT.items():
        path = dest / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return dest


def mapped(relative: Path) -> str:
    """Where ``relative`` (a path in the source tree) installs: the longest package-dir folder it is in,
    replaced by its package's path (``plants/jaw/jaw.toml`` -> ``rtctl/plants/jaw/jaw.toml``)."""
    owners = [(package, folder) for package, folder in package_dir().items()
              if relative.parts[:len(Path(folder).parts)] == Path(folder).parts]
    package, folder = max(owners, key=lambda owner: len(Path(owner[1]).parts))
    return Path(*package.split("."), relative.relative_to(folder)).as_posix()


def is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name == "conftest.py" or (name.startswith("test_") and name.endswith(".py"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(source copy, wheel path, the wheel's file names other than its .dist-info)."""
    source = copy_sources(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("wheelhouse")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                             "--no-index", "-q", "-w", str(out), str(source)],
                            cwd=source, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("rtctl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = {n for n in archive.namelist() if not n.split("/", 1)[0].endswith(".dist-info")}
    return source, wheel, names


def source_files(source: Path) -> set[str]:
    """Every file of the copied package folders, by the path it installs at."""
    return {mapped(path.relative_to(source)) for folder in set(package_dir().values())
            for path in (source / folder).rglob("*") if path.is_file()}


@pytest.mark.slow
def test_every_file_of_the_package_folders_is_in_the_wheel_at_its_mapped_path(built):
    source, _, names = built
    expected = {name for name in source_files(source) if not is_test(name)}
    assert len(expected) > 100
    missing = sorted(expected - names)
    assert not missing, f"source files the wheel leaves out: {missing}"
    packages = {name.rsplit("/", 1)[0] for name in expected if name.endswith(".py")}
    assert {"rtctl/plants/jaw", "rtctl/drivers/can", "rtctl/loops/cpg", "rtctl/hil", "rtctl/telemetry"} <= packages
    data = {name for name in expected if not name.endswith(".py")}
    assert {"rtctl/data/models/arm7.urdf", "rtctl/data/dashboard/index.html", "rtctl/plants/jaw/jaw.toml",
            "rtctl/plants/mujoco/panda.xml", "rtctl/loops/cpg/data/normal.json"} <= data <= names


@pytest.mark.slow
def test_a_new_robot_folder_ships_without_editing_pyproject(built):
    source, _, names = built
    assert (source / "pyproject.toml").read_bytes() == PYPROJECT.read_bytes()
    for relative in NEW_ROBOT:
        assert mapped(Path(relative)) in names, relative


@pytest.mark.slow
def test_the_wheel_holds_nothing_but_the_package_folders_and_no_tests(built):
    source, _, names = built
    assert not [name for name in names if is_test(name)]
    assert not sorted(names - source_files(source))
    assert not [name for name in names if not name.startswith("rtctl/")]


LOAD_ENTRY_POINTS = """
import sys
from importlib.metadata import distribution
import rtctl, rtctl.plants
target = sys.argv[1]
for module in (rtctl, rtctl.plants):
    assert module.__file__.startswith(target), module.__file__
points = distribution("rtctl").entry_points
for point in points:
    point.load()
print(len(points), "entry points", sorted({point.group for point in points}))
"""


@pytest.mark.slow
def test_the_installed_wheel_alone_loads_its_entry_points_and_runs_the_readme_commands(built, tmp_path):
    """Installed by pip into an empty directory, first on the path (the checkout is not): every entry point
    the wheel declares loads from it, and ``rtctl --version`` and ``rtctl info arm7`` (a bundled URDF) run.
    Loading a module checks that it and the name are there; numba's compilation would add minutes of kernels
    with explicit signatures compiled at import (3 min on 2 busy cores), so the JIT is off."""
    _, wheel, _ = built
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=str(target), NUMBA_DISABLE_JIT="1")
    declared = tomllib.loads(PYPROJECT.read_text())["project"]
    count = sum(len(group) for group in declared["entry-points"].values()) + len(declared["scripts"])

    def run(*argv):
        result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    assert run(sys.executable, "-c", LOAD_ENTRY_POINTS, str(target)).startswith(f"{count} entry points")
    assert run(sys.executable, str(target / "bin" / "rtctl"), "--version").strip().endswith(
        declared["version"])
    assert "arm7" in run(sys.executable, str(target / "bin" / "rtctl"), "info", "arm7")
