"""A kernel's numba cache entry is stamped with what its machine code can depend on (rtctl._kernel_deps):
its module and the rtctl modules that module imports, transitively. Editing anything else (the command
line, configs, servers, emulators) reuses the cache; editing a kernel's module, a module it takes constants
from or one defining a callee recompiles it.

Every case works on a copy of the sources in a temporary folder; the repository is never edited.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rtctl
from rtctl import _kernel_deps
from test_architecture import installed_layout

ROOT = Path(rtctl.__file__).resolve().parent.parent
FOLDERS = ("rtctl", "drivers", "plants", "loops", "hil")
KERNEL = re.compile(rb"^\s*@(jit|njit)\b|^\s*jit = njit\(", re.M)   # how rtctl's modules define kernels

pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the source checkout")


def checkout(dest: Path) -> Path:
    """A copy of the source checkout's packages (the layout ``rtctl._source_tree`` maps)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest)
    return dest


def kernel_stamps(package_dir: Path, memo: Path | None = None) -> dict[str, str]:
    """Module name -> stamp of every module that defines numba kernels, from a fresh graph (its parsed
    imports kept in ``memo``, a folder, if given)."""
    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(package_dir))
    if memo is not None:
        graph.use_memo(str(memo))
    files = [p for folder in graph.packages.values() for p in Path(folder).rglob("*.py")
             if KERNEL.search(p.read_bytes())]
    stamps = {graph.module_name(p): graph.digest(p) for p in files}
    graph.save_memo()
    return stamps


def append(path: Path, text: str = "\n# edited\n") -> None:
    path.write_text(path.read_text() + text)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return checkout(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def parsed(tree):
    """The stamps of the unedited copy, every file parsed."""
    return kernel_stamps(tree / "rtctl")


@pytest.fixture(scope="module")
def memo(tmp_path_factory):
    """One memo of parsed imports for the module's edits: a file is parsed again only once edited."""
    return tmp_path_factory.mktemp("memo")


@pytest.fixture
def edited(tree, parsed, tmp_path):
    """A fresh copy of ``tree`` to edit, and the kernel stamps before the edit."""
    copy = tmp_path / "edited"
    shutil.copytree(tree, copy)
    return copy, parsed


def changed(copy: Path, before: dict[str, str], memo: Path) -> set[str]:
    after = kernel_stamps(copy / "rtctl", memo)
    assert after.keys() == before.keys()
    return {name for name in before if before[name] != after[name]}


@pytest.mark.slow
def test_the_stamps_are_those_of_the_installed_layout(parsed, memo, tmp_path):
    """The checkout maps drivers/, plants/, loops/, hil/ into rtctl as pyproject installs them: every
    kernel module has the same dependencies and stamp in both layouts (48 modules define kernels)."""
    installed = kernel_stamps(installed_layout(tmp_path) / "rtctl", memo)
    assert len(parsed) > 40 and installed == parsed


@pytest.mark.parametrize("path", ["rtctl/cli.py", "rtctl/config.py", "rtctl/operator/dashboard.py",
                                  "rtctl/operator/wiring.py", "hil/can_emulator.py"])
def test_an_edit_outside_the_kernels_dependencies_keeps_every_stamp(edited, memo, path):
    copy, before = edited
    append(copy / path)
    assert changed(copy, before, memo) == set()


def test_an_edited_kernel_module_changes_its_stamp_and_its_importers_only(edited, memo):
    copy, before = edited
    append(copy / "plants/jaw/kernels.py")
    hit = changed(copy, before, memo)
    assert "rtctl.plants.jaw.kernels" in hit and "rtctl.plants.jaw.steps" in hit   # steps calls its kernels
    assert "rtctl.dynamics.inverse" not in hit and "rtctl.plants.stewart.kernels" not in hit


def test_constants_and_callees_from_other_modules_change_the_stamp(edited, memo):
    """``plants/legged/module_dynamics.py`` imports the compiled ``forward_kinematics`` from
    rtctl.dynamics.kinematics and column constants from rtctl.dynamics.workspace and rtctl.model (which defines no kernel): an edit to any of them must reach its stamp."""
    copy, stamps = edited
    for path in ("rtctl/dynamics/kinematics.py", "rtctl/dynamics/workspace.py", "rtctl/model/__init__.py"):
        append(copy / path)
        after = kernel_stamps(copy / "rtctl", memo)
        hit = {name for name, stamp in after.items() if stamps[name] != stamp}
        stamps = after
        assert "rtctl.plants.legged.module_dynamics" in hit, path
        assert "rtctl.plants.stewart.kernels" not in hit and "rtctl.operator.inbox" not in hit, path


def test_imports_inside_functions_bind_no_global_a_kernel_sees(edited, memo):
    """``sweep/runner.py`` imports the config builder inside a function: no dependency of its kernel, unlike
    its module-level import of rtctl.rt.hooks, until the same import is made at module level."""
    copy, before = edited
    runner = copy / "rtctl" / "sweep" / "runner.py"
    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(copy / "rtctl"))
    assert "\n    from ..config import build\n" in runner.read_text()
    assert {graph.module_name(p) for p in graph.closure(runner)} == {"rtctl.sweep.runner", "rtctl.rt.hooks"}
    append(copy / "rtctl" / "config.py")
    assert changed(copy, before, memo) == set()
    append(runner, "\nfrom ..config import build  # noqa: E402\n")
    assert changed(copy, before, memo) == {"rtctl.sweep.runner"}
    stamps = kernel_stamps(copy / "rtctl", memo)
    append(copy / "rtctl" / "config.py")
    assert {n for n, s in kernel_stamps(copy / "rtctl", memo).items() if stamps[n] != s} == {"rtctl.sweep.runner"}


# -- end to end: numba's cache, in fresh interpreters ---------------------------------------------------------

CONSTANTS = "SCALE = {scale}\n"
KERNELS = '''from numba import njit

from ._probe_constants import SCALE


@njit(cache=True)
def scaled(x):
    return SCALE * x
'''
TEMPLATE = '''def apply_template(x):
    return rate(x)  # noqa: F821 (bound by specialise)
'''
RATES = '''from .plants.integrate import inlined, specialise
from ._probe_template import apply_template

OFFSET = {offset}


@inlined
def shifted(x):
    return x + OFFSET


applied = specialise(apply_template, "probe", rate=shifted)
'''
PROBE = """
import json, sys
import numba, rtctl
if sys.argv[1] == "numba-only":     # the control: numba's own stamp (the kernel's file only)
    from numba.core import caching
    caching.CacheImpl._locator_classes[:] = [c for c in caching.CacheImpl._locator_classes
                                             if getattr(c, "rtctl_graph", None) is None]
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev): compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev): pass
event.register("numba:compile", Count())
from rtctl._probe_kernels import scaled
from rtctl._probe_rates import applied
import rtctl.plants.integrate as integrate
values = {"scaled": scaled(1.5), "applied": applied(1.5)}
print(json.dumps({"values": values, "compiled": sorted(set(compiled)), "rtctl": rtctl.__file__,
                  "integrate": integrate.__file__,
                  "hits": {k: sum(f.stats.cache_hits.values()) for k, f in (("scaled", scaled), ("applied", applied))},
                  "cache": scaled.stats.cache_path}))
"""


def run_probe(copy: Path, mode: str, xdg: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(xdg)
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rtctl"] == str(copy / "rtctl" / "__init__.py")   # the copy, not the repository
    assert result["integrate"] == str(copy / "plants" / "integrate.py")
    return result


def probe_sources(copy: Path, scale: float, offset: float) -> None:
    (copy / "rtctl" / "_probe_constants.py").write_text(CONSTANTS.format(scale=scale))
    (copy / "rtctl" / "_probe_kernels.py").write_text(KERNELS)
    (copy / "rtctl" / "_probe_template.py").write_text(TEMPLATE)
    (copy / "rtctl" / "_probe_rates.py").write_text(RATES.format(offset=offset))


def test_a_specialised_kernel_depends_on_the_module_binding_its_functions():
    """``rk4_advance("geared", _geared_rates)`` compiles a copy of a template of plants/integrate.py with the
    geared plant's rate function inlined: its stamp covers plants/geared/plant.py."""
    from rtctl.plants.geared import plant

    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(Path(rtctl.__file__).resolve().parent))
    func = plant._geared_advance.py_func
    assert Path(func.__code__.co_filename).name == "integrate.py"
    assert {graph.module_name(f) for f in graph.reached_files(func)} >= {"rtctl.plants.integrate",
                                                                         "rtctl.plants.geared.plant"}


@pytest.mark.skipif(not hasattr(__import__("numba.core.caching").core.caching, "CacheImpl"),
                    reason="the control removes rtctl's locator from numba >= 0.62's CacheImpl")
@pytest.mark.slow
def test_numba_reloads_across_unrelated_edits_and_recompiles_what_an_edit_reaches(tree, tmp_path):
    """``scaled`` multiplies by a constant imported from another module; ``applied`` is a template (in a
    module of its own) specialised (plants.integrate.specialise) by a third module with a function adding
    that module's constant. numba's own stamp (the control) sees neither constant change."""
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    probe_sources(copy, scale=2.0, offset=1.0)
    xdg, control = tmp_path / "xdg", tmp_path / "control"
    both = ["apply_template__probe", "scaled"]

    first = run_probe(copy, "rtctl", xdg)
    assert first["values"] == {"scaled": 3.0, "applied": 2.5} and set(both) <= set(first["compiled"])
    assert first["cache"].startswith(str(xdg / "rtctl" / "numba-"))
    assert run_probe(copy, "numba-only", control)["values"] == {"scaled": 3.0, "applied": 2.5}

    append(copy / "rtctl" / "cli.py")                  # modules without kernels
    append(copy / "hil" / "can_emulator.py")
    second = run_probe(copy, "rtctl", xdg)
    assert second["compiled"] == [] and second["hits"] == {"scaled": 1, "applied": 1}

    probe_sources(copy, scale=4.0, offset=1.0)
    third = run_probe(copy, "rtctl", xdg)
    assert third["values"] == {"scaled": 6.0, "applied": 2.5}
    assert "scaled" in third["compiled"] and third["hits"] == {"scaled": 0, "applied": 1}

    probe_sources(copy, scale=4.0, offset=3.0)
    fourth = run_probe(copy, "rtctl", xdg)
    assert fourth["values"] == {"scaled": 6.0, "applied": 4.5}
    assert "apply_template__probe" in fourth["compiled"] and fourth["hits"] == {"scaled": 1, "applied": 0}

    stale = run_probe(copy, "numba-only", control)    # the kernels' own file is unchanged: old machine code
    assert stale["values"] == {"scaled": 3.0, "applied": 2.5} and stale["compiled"] == []
