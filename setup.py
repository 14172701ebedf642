"""rtctl's packages, found rather than listed (everything else is in pyproject.toml).

pyproject.toml's ``package-dir`` installs ``drivers/``, ``plants/``, ``loops/`` and ``hil/`` inside rtctl
(``rtctl.plants``, ...). setuptools' ``[tool.setuptools.packages.find]`` cannot rename what it finds, so each
mapped folder is searched here with its finder (PEP 420: a folder of data files alone is a package too) and
its name prefixed: a new ``plants/<robot>/`` is in the wheel without editing a list. ``tests/`` is not
mapped: no test ships (tests/test_wheel.py builds the wheel and checks both).
"""
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.config.pyprojecttoml import load_file

ROOT = Path(__file__).resolve().parent


def discovered_packages() -> list[str]:
    package_dir = load_file(ROOT / "pyproject.toml")["tool"]["setuptools"]["package-dir"]
    packages = set(package_dir)
    for package, folder in package_dir.items():
        found = find_namespace_packages(str(ROOT / folder), exclude=["*__pycache__*"])
        packages.update(f"{package}.{name}" for name in found)
    return sorted(packages)


setup(packages=discovered_packages())
