"""rtctl: a real-time robot controller framework.

Subpackages: :mod:`rtctl.model` (kinematic trees from Python or URDF) and
:mod:`rtctl.dynamics` (recursive inverse/forward dynamics kernels).
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rtctl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

import hashlib
import os
import tempfile
from pathlib import Path

MODELS_DIR = Path(__file__).parent / "data" / "models"


def _numba_cache_dir() -> str:
    """A numba cache directory keyed on the hash of every rtctl source file.

    numba validates a cached function against its own file's timestamp only,
    so a kernel that calls into another, edited module would load stale
    machine code. Keying the directory on all sources rules that out.
    """
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1(__version__.encode())
    for package in ("rtctl", "drivers", "plants", "loops"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    for candidate in (base / "rtctl", Path(tempfile.gettempdir()) / "rtctl-cache"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return str(candidate / f"numba-{digest.hexdigest()[:16]}")
        except OSError:
            continue
    return ""


if not os.environ.get("NUMBA_CACHE_DIR"):
    import numba

    numba.config.CACHE_DIR = _numba_cache_dir()


def bundled_model_path(name: str) -> Path:
    """Path of a URDF shipped with rtctl (``arm7``, ``quadruped12``, ``humanoid``, ``planar_biped``, ``spatial_quadruped``)."""
    path = MODELS_DIR / f"{name}.urdf"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.urdf"))
        raise FileNotFoundError(f"no bundled model '{name}'; bundled models: {known}")
    return path
