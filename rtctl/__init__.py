"""rtctl: a real-time robot controller framework.

Subpackages: :mod:`rtctl.model` (kinematic trees from Python or URDF) and
:mod:`rtctl.dynamics` (recursive inverse/forward dynamics kernels).
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rtctl")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

from pathlib import Path

MODELS_DIR = Path(__file__).parent / "data" / "models"


def bundled_model_path(name: str) -> Path:
    """Path of a URDF shipped with rtctl (``arm7``, ``quadruped12``, ``humanoid``)."""
    path = MODELS_DIR / f"{name}.urdf"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.urdf"))
        raise FileNotFoundError(f"no bundled model '{name}'; bundled models: {known}")
    return path
