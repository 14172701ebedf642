"""rtctl: a real-time robot controller framework.

The public API is what ``__all__`` lists, importable from here: robot models (:func:`load_urdf`,
:class:`ModelBuilder`, :class:`Model`, :class:`ModelError`, :func:`bundled_model_path`), their dynamics
(:class:`Dynamics`), the component base classes a plugin derives from (:class:`ActuatorDriver`,
:class:`Plant`, :class:`Controller`, :class:`Trajectory`), and building and running a TOML config
(:func:`load_config`, :func:`bundled_config_path`, :func:`build`: a :class:`ControlLoop`, whose ``run``
returns a :class:`LoopReport`). Everything else, in the subpackages too, is internal and may change.

``import rtctl`` imports none of them (PEP 562: each is imported at its first use), nor numba: a
command that compiles nothing starts in a tenth of a second (``benchmarks/startup.py``). numba's cache
is configured when numba is first imported (:mod:`rtctl._numba_cache`).
"""
from importlib import import_module
from pathlib import Path

from . import _numba_cache, _source_tree

_source_tree.install(Path(__file__).resolve().parent)

MODELS_DIR = Path(__file__).parent / "data" / "models"

_LAZY = {
    "load_urdf": "rtctl.model.urdf",
    "Model": "rtctl.model",
    "ModelBuilder": "rtctl.model",
    "ModelError": "rtctl.model",
    "Dynamics": "rtctl.dynamics",
    "ActuatorDriver": "rtctl.drivers.base",
    "Plant": "rtctl.plants.base",
    "Controller": "rtctl.loops.base",
    "Trajectory": "rtctl.loops.base",
    "load_config": "rtctl.config",
    "bundled_config_path": "rtctl.config",
    "build": "rtctl.config",
    "ControlLoop": "rtctl.rt.loop",
    "LoopReport": "rtctl.rt.stats",
}

__all__ = ["bundled_model_path", *_LAZY]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rtctl")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+source"


def __getattr__(name: str):
    if name == "__version__":     # read from the installed metadata when asked for
        value = globals()[name] = _version()
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rtctl' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def bundled_model_path(name: str) -> Path:
    """Path of a URDF shipped with rtctl (``arm7``, ``quadruped12``, ``humanoid``, ``planar_biped``, ``spatial_quadruped``)."""
    path = MODELS_DIR / f"{name}.urdf"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.urdf"))
        raise FileNotFoundError(f"no bundled model '{name}'; bundled models: {known}")
    return path


_numba_cache.install()   # last: configuring at once (numba imported before rtctl) reads __version__
