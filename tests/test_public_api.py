"""The curated public API (``rtctl.__all__``, PEP 562 lazy names) and light start-up: ``import rtctl``,
``rtctl --version`` and ``rtctl control estop`` import neither numba nor scipy nor matplotlib nor numpy (the time
they take is ``benchmarks/startup.py``'s, against ``python -c pass``); numba imported later still gets
rtctl's private cache and dependency stamps before any kernel is decorated."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

import rtctl

HEAVY = ("numba", "scipy", "matplotlib", "llvmlite")


def modules_after(code: str, *argv: str) -> dict:
    """Run ``code`` in a fresh interpreter; it ends by printing ``sys.modules``' names as JSON."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))",
                           *argv], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    *out, names = proc.stdout.strip().splitlines()
    return {"out": out, "modules": set(json.loads(names)), "stderr": proc.stderr}


def heavy(modules: set) -> list:
    return sorted(m for m in modules if m.partition(".")[0] in HEAVY)


@pytest.mark.parametrize("name", rtctl.__all__)
def test_each_public_name_resolves_to_its_home_modules_object(name):
    value = getattr(rtctl, name)
    home = importlib.import_module(value.__module__)
    assert getattr(home, value.__qualname__) is value
    assert name in dir(rtctl)


def test_a_name_outside_the_api_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'NoSuchThing'"):
        rtctl.NoSuchThing  # noqa: B018
    with pytest.raises(ImportError):
        exec("from rtctl import NoSuchThing", {})


def test_import_rtctl_imports_no_heavy_module():
    result = modules_after("import rtctl\nassert rtctl.__version__")
    assert heavy(result["modules"]) == [] and "numpy" not in result["modules"]


def test_version_imports_no_heavy_module():
    result = modules_after("from rtctl.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit as e:\n"
                           "    assert e.code == 0")
    assert result["out"] == [f"rtctl {rtctl.__version__}"]
    assert heavy(result["modules"]) == [] and "numpy" not in result["modules"]


def test_control_estop_imports_no_heavy_module():
    """Against a real control channel (the server in this process): the reply says the loop latched the
    e-stop, and the client's process never imported numba, scipy or matplotlib."""
    from rtctl.operator.control import ControlServer
    from telemetry_helpers import make_loop

    loop = make_loop()
    with ControlServer(loop, endpoint="tcp://127.0.0.1:0", token="a-token-of-enough-length-0123") as ctl:
        result = modules_after("import sys\nfrom rtctl.cli import main\nassert main(sys.argv[1:]) == 0",
                               "control", "estop", "reason=start-up test", "--endpoint", ctl.endpoint)
    reply = json.loads(result["out"][-1])
    assert reply["ok"] is True, reply
    assert loop.safety.tripped and "start-up test" in loop.safety.trip_reason
    assert heavy(result["modules"]) == [] and "numpy" not in result["modules"]


@pytest.mark.slow
def test_numba_imported_after_rtctl_gets_the_private_cache_and_the_dependency_stamps(tmp_path):
    code = ("import sys, rtctl\nassert 'numba' not in sys.modules\n"
            "import numpy as np\nfrom rtctl.sweep.runner import _accumulate_effort\n"
            "_accumulate_effort(np.zeros(2), np.zeros(2), np.arange(2), 1e-3, np.zeros(1), np.zeros(1))\n"
            "import numba\nfrom numba.core import caching\n"
            "print(numba.config.CACHE_DIR)\nprint(_accumulate_effort.stats.cache_path)\n"
            "print(type(_accumulate_effort._cache._impl.locator).__name__)")
    home = tmp_path / "home"
    home.mkdir()
    env_code = f"import os\nos.environ['XDG_CACHE_HOME'] = {str(home)!r}\n" + code
    result = modules_after(env_code)
    cache_dir, cache_path, locator = result["out"][-3:]
    assert cache_dir.startswith(str(home / "rtctl" / "numba-"))
    assert cache_path.startswith(cache_dir + os.sep)
    assert locator == "DependencyStampLocator"
