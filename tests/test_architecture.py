"""The import contracts of pyproject.toml ([tool.importlinter]: layers, a core that imports no outer
layer, no cycles) hold, checked by import-linter on the package as it installs: the outer folders
(drivers/, plants/, loops/, hil/) inside rtctl/ as pyproject's package-dir maps them."""
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rtctl

ROOT = Path(rtctl.__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"


def installed_layout(dest: Path) -> Path:
    """A copy of the sources in the layout pyproject.toml installs (package-dir mapping)."""
    mapping = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        shutil.copytree(ROOT / folder, dest.joinpath(*package.split(".")), ignore=ignore, dirs_exist_ok=True)
    return dest


def lint(tree: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
                           str(PYPROJECT), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not PYPROJECT.is_file(), reason="needs the source tree's pyproject.toml")
def test_import_contracts_hold(tmp_path):
    result = lint(installed_layout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.skipif(not PYPROJECT.is_file(), reason="needs the source tree's pyproject.toml")
def test_a_core_module_importing_a_driver_breaks_the_contracts(tmp_path):
    """The check can fail: the same tree with rtctl.dynamics importing rtctl.drivers is refused."""
    tree = installed_layout(tmp_path)
    kernels = tree / "rtctl" / "dynamics" / "__init__.py"
    kernels.write_text(kernels.read_text() + "\nfrom rtctl.drivers import base as _layer_breach  # noqa\n")
    result = lint(tree)
    assert result.returncode != 0
    assert "rtctl.dynamics -> rtctl.drivers" in result.stdout or "rtctl.dynamics" in result.stdout
