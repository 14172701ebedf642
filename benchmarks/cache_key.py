#!/usr/bin/env python3
"""What keying the numba cache costs at import, against the previous key measured in the same run.

Before, ``import rtctl`` hashed every source file of its five folders into the cache directory's name (any
edit recompiled all kernels). Now the name hashes versions only, and each kernel's cache entry is stamped
with the import closure of its module (rtctl._kernel_deps), computed while kernel modules are imported:

* ``python -c "import numba"`` and ``python -c "import rtctl"``, fresh interpreters, best of ``--repeat``;
* in one process, best of ``--repeat``: the previous key (sha1 over every ``.py`` file), this import's
  own work (graph, locator, directory name), and the stamps of every module defining kernels with their
  imports parsed (a process's first run after an edit of every file) and read from the memo (every run).

Also printed: how many modules define kernels and how many are in the union of their closures. With
``--kernels``, a fresh interpreter imports every module defining kernels and reports the time numba spent in
rtctl's cache locator (walking what each cached function reaches, and its stamp) against the whole import
(run it twice: the first run with a cold cache compiles the kernels given signatures, minutes).

Usage: python benchmarks/cache_key.py [--repeat 7] [--kernels]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rtctl
from rtctl import _kernel_deps

PACKAGE = Path(rtctl.__file__).resolve().parent
KERNEL = re.compile(rb"^\s*@(jit|njit)\b|^\s*jit = njit\(", re.M)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def interpreter(code: str, repeat: int) -> float:
    return best(lambda: subprocess.run([sys.executable, "-c", code], check=True), repeat)


def previous_key() -> str:
    """The key before: every source file of the five folders, hashed."""
    digest = hashlib.sha1(rtctl.__version__.encode())
    for folder in _kernel_deps.rtctl_packages(PACKAGE).values():
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def import_work() -> None:
    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(PACKAGE))
    _kernel_deps.install_locator(graph)
    rtctl._numba_cache._cache_name(True)


def sources() -> list[Path]:
    return [p for folder in _kernel_deps.rtctl_packages(PACKAGE).values() for p in Path(folder).rglob("*.py")]


KERNEL_FILES = [p for p in sources() if KERNEL.search(p.read_bytes())]


def stamps(memo: str | None) -> _kernel_deps.SourceGraph:
    """A fresh graph's stamps of every module defining kernels (a process's work if it imports them all)."""
    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(PACKAGE))
    if memo:
        graph.use_memo(memo)
    for path in KERNEL_FILES:
        graph.digest(path)
    graph.save_memo()
    return graph


LOCATOR_TIME = """
import importlib, json, sys, time
import rtctl
from numba.core import caching
locator = caching.CacheImpl._locator_classes[0]
spent = [0.0, 0]
for method in ("__init__", "get_source_stamp"):
    def timed(*args, _method=getattr(locator, method), _init=method == "__init__"):
        start = time.perf_counter()
        try:
            return _method(*args)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += _init
    setattr(locator, method, timed)
start = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({"import_s": time.perf_counter() - start, "locator_s": spent[0], "functions": spent[1],
                  "parsed": locator.rtctl_graph.parsed}))
"""


def locator_time() -> dict:
    graph = _kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(PACKAGE))
    names = sorted(graph.module_name(p) for p in KERNEL_FILES)
    proc = subprocess.run([sys.executable, "-c", LOCATOR_TIME, *names], check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--kernels", action="store_true", help="also import every kernel module (see above)")
    args = parser.parse_args()
    rows = [("python -c 'import numba' (peer)", interpreter("import numba", args.repeat)),
            ("python -c 'import rtctl'", interpreter("import rtctl", args.repeat)),
            ("previous key: hash of every source file", best(previous_key, args.repeat)),
            ("this key at import: graph, locator, name", best(import_work, args.repeat)),
            ("stamps of all kernel modules, parsed", best(lambda: stamps(None), args.repeat))]
    with tempfile.TemporaryDirectory() as memo:
        stamps(memo)
        rows.append(("stamps of all kernel modules, memo", best(lambda: stamps(memo), args.repeat)))
    peer = rows[2][1]
    print(f"{'':44s} {'best ms':>9s} {'x previous key':>15s}")
    for name, seconds in rows:
        print(f"{name:44s} {seconds * 1e3:9.1f} {seconds / peer:15.2f}")
    graph = stamps(None)
    sizes = sorted(len(graph.closure(p)) for p in KERNEL_FILES)
    closure = set().union(*(graph.closure(p) for p in KERNEL_FILES))
    if args.kernels:
        run = locator_time()
        print(f"\nimporting the {len(KERNEL_FILES)} kernel modules: {run['import_s']:.2f} s, of which "
              f"{run['locator_s'] * 1e3:.1f} ms in rtctl's locator for {run['functions']} cached functions "
              f"({run['locator_s'] / peer:.2f} x previous key; {run['parsed']} files parsed)")
    print(f"\n{len(sources())} modules; {len(KERNEL_FILES)} define kernels; {len(closure)} in the union of their "
          f"import closures (largest {sizes[-1]}, median {sizes[len(sizes) // 2]})")


if __name__ == "__main__":
    main()
