"""Running from a source checkout that is not installed as-is: map the outer folders into the namespace.

pyproject.toml installs ``drivers/``, ``plants/``, ``loops/`` and ``hil/`` as ``rtctl.drivers``, ... (its
``package-dir``). When ``rtctl`` itself is imported from the repository (e.g. ``python -m pytest`` at the
root, which puts the root first on ``sys.path``), this finder gives the same mapping, so the source tree
and an installed copy can never mix.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

OUTER_PACKAGES = ("drivers", "plants", "loops", "hil")


class _OuterFolderFinder:
    def __init__(self, root: Path):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        head, _, name = fullname.partition(".")
        if head != "rtctl" or name not in OUTER_PACKAGES:
            return None
        return importlib.util.spec_from_file_location(fullname, self.root / name / "__init__.py",
                                                      submodule_search_locations=[str(self.root / name)])


def outer_folders(package_dir: Path) -> dict[str, Path]:
    """``{"drivers": <repository>/drivers, ...}`` if ``package_dir`` is ``rtctl`` in a checkout; {} if it is
    an installed copy (the outer packages are inside it)."""
    root = package_dir.parent
    if (package_dir / "drivers").is_dir() or not (root / "pyproject.toml").is_file():
        return {}
    if not all((root / name / "__init__.py").is_file() for name in OUTER_PACKAGES):
        return {}
    return {name: root / name for name in OUTER_PACKAGES}


def install(package_dir: Path) -> None:
    """Map ``rtctl.<outer>`` to ``<repository>/<outer>`` if ``rtctl`` was imported from a checkout."""
    if outer_folders(package_dir) and not any(isinstance(f, _OuterFolderFinder) for f in sys.meta_path):
        # First: an editable install's finder (a meta path finder too) would map them to its own checkout.
        sys.meta_path.insert(0, _OuterFolderFinder(package_dir.parent))
