"""What a cached numba kernel's machine code depends on, for the freshness stamp of its cache entry.

numba validates a cached function against its own file only (its contents in recent numba, its mtime
and size in older ones), but it freezes a kernel's globals at compile time and compiles its callees into it: a
constant imported from another module, or an ``@njit`` callee defined in one, is part of the cached machine
code without being part of that check. A kernel's globals come from its module's own source and from
what the module imports, so the stamp of a kernel module here is a hash of the file and, transitively, of
every rtctl module it imports (from the import statements, parsed with :mod:`ast`, at module level and in
class or conditional bodies; imports inside functions bind locals, which no kernel's globals see).
A kernel can also be a copy of a template whose globals another module binds to its own functions
(``rtctl.plants.integrate.specialise``: the plant's rate function inlined into the integrator's loop): the
functions its code reaches through its globals, followed at decoration time, add their modules and what
those import. Modules nothing compiled imports (the command line, configs, servers, tests) are in no
kernel's stamp.

One thing a kernel can depend on stays outside this reach: data files a module reads at import time into
globals. No module in a kernel's closure does (the CPG's shipped patterns are read when asked for and reach
kernels as arguments).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path

MEMO_NAME = "rtctl-imports.json"   # parsed imports by module and content hash, beside numba's files
_MEMO_ENTRIES = 2000               # about ten versions of every module


class SourceGraph:
    """The import graph of a set of packages, each a dotted name mapped to its folder (e.g. ``rtctl`` ->
    ``.../rtctl`` and, in a source checkout, ``rtctl.plants`` -> ``.../plants``). Files are paths as
    strings, resolved; each is read and hashed once."""

    def __init__(self, packages: dict[str, Path]):
        self.packages = {name: os.path.realpath(folder) for name, folder in packages.items()}
        self._real: dict[str, str] = {}
        self._names: dict[str, str | None] = {}
        self._files: dict[str, str | None] = {}
        self._hashes: dict[str, str] = {}
        self._imports: dict[str, frozenset[str]] = {}
        self._closures: dict[str, frozenset[str]] = {}
        self._digests: dict[frozenset, str] = {}
        self._reached: dict = {}
        self._memo: dict[str, list[str]] = {}
        self._memo_path: str | None = None
        self._memo_dirty = False
        self.parsed = 0   # files parsed (the others' imports came from the memo)

    def _resolved(self, path) -> str:
        key = os.fspath(path)
        found = self._real.get(key)
        if found is None:
            found = self._real[key] = os.path.realpath(key)
        return found

    def module_name(self, path) -> str | None:
        """The dotted name of the module in ``path``, or None outside the packages."""
        path = self._resolved(path)
        if path not in self._names:
            self._names[path] = self._module_name(path)
        return self._names[path]

    def _module_name(self, path: str) -> str | None:
        best = None
        for name, folder in self.packages.items():
            if path.startswith(folder + os.sep) and (best is None or len(folder) > len(best[1])):
                best = (name, folder)
        if best is None or not path.endswith(".py"):
            return None
        parts = path[len(best[1]) + 1:-3].split(os.sep)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join([best[0], *parts])

    def module_file(self, name: str) -> str | None:
        """The file that defines module ``name`` (its ``__init__.py`` for a package), or None."""
        if name not in self._files:
            self._files[name] = self._module_file(name)
        return self._files[name]

    def _module_file(self, name: str) -> str | None:
        best = None
        for package in self.packages:
            if (name == package or name.startswith(package + ".")) and (best is None or len(package) > len(best)):
                best = package
        if best is None:
            return None
        base = os.path.join(self.packages[best], *name[len(best):].split(".")[1:])
        for candidate in (os.path.join(base, "__init__.py"), base + ".py"):
            if os.path.isfile(candidate):
                return candidate
        return None

    def use_memo(self, folder: str) -> None:
        """Keep parsed imports in ``folder``/:data:`MEMO_NAME` (a private directory: numba's cache), so a
        process parses only the files edited since one last did (parsing all of the kernels' modules takes
        about as long as importing numba; benchmarks/cache_key.py)."""
        path = os.path.join(folder, MEMO_NAME)
        if path == self._memo_path:
            return
        self._memo_path, self._memo_dirty = path, False
        try:
            with open(path, encoding="utf-8") as f:
                memo = json.load(f)
        except (OSError, ValueError):
            memo = {}
        ok = isinstance(memo, dict) and all(isinstance(v, list) and all(isinstance(t, str) for t in v)
                                           for v in memo.values())
        self._memo = memo if ok else {}

    def save_memo(self) -> None:
        """Write the memo (atomically; concurrent writers lose nothing but entries the next run re-parses)."""
        if not (self._memo_dirty and self._memo_path):
            return
        memo = dict(list(self._memo.items())[-_MEMO_ENTRIES:])
        try:
            fd, tmp = tempfile.mkstemp(prefix=".rtctl-imports-", dir=os.path.dirname(self._memo_path))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(memo, f, separators=(",", ":"))
            os.replace(tmp, self._memo_path)
            self._memo_dirty = False
        except OSError:
            pass

    def _inside(self, name: str) -> bool:
        return any(name == package or name.startswith(package + ".") for package in self.packages)

    def _hash(self, path: str) -> str:
        found = self._hashes.get(path)
        if found is None:
            with open(path, "rb") as f:
                found = self._hashes[path] = hashlib.sha256(f.read()).hexdigest()
        return found

    def _targets(self, path: str) -> list[str]:
        name = self.module_name(path)
        key = f"{name}:{self._hash(path)}"
        found = self._memo.get(key)
        if found is None:
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), path)
            is_package = os.path.basename(path) == "__init__.py"
            found = sorted({t for node in _global_imports(tree) for t in _targets(node, name, is_package)
                            if self._inside(t)})
            self.parsed += 1
            self._memo_dirty = True
        else:
            del self._memo[key]   # re-inserted last: the memo keeps the most recently used
        self._memo[key] = found
        return found

    def imports(self, path) -> frozenset[str]:
        """The files of the package modules that ``path`` imports where its module's globals are bound."""
        path = self._resolved(path)
        found = self._imports.get(path)
        if found is None:
            files = (self.module_file(target) for target in self._targets(path))
            found = self._imports[path] = frozenset(f for f in files if f is not None and f != path)
        return found

    def closure(self, path) -> frozenset[str]:
        """``path`` and every package module it imports, transitively."""
        path = self._resolved(path)
        found = self._closures.get(path)
        if found is None:
            seen, todo = {path}, [path]
            while todo:
                for dep in self.imports(todo.pop()):
                    if dep not in seen:
                        seen.add(dep)
                        todo.append(dep)
            found = self._closures[path] = frozenset(seen)
        return found

    def digest(self, *paths) -> str:
        """A hash of the module names and contents of the union of the :meth:`closure` of each of ``paths``
        (the same for the source checkout and the installed layout)."""
        key = frozenset(self._resolved(path) for path in paths)
        found = self._digests.get(key)
        if found is None:
            closure = frozenset().union(*(self.closure(path) for path in key))
            h = hashlib.sha256()
            for name, dep in sorted((self.module_name(dep), dep) for dep in closure):
                h.update(f"{name}\0{self._hash(dep)}\0".encode())
            found = self._digests[key] = h.hexdigest()
        return found

    def reached_files(self, func) -> set[str]:
        """The files of ``func`` and of the package functions its code reaches through its globals (a
        compiled function's Python function included), transitively, as they are bound now."""
        files, seen, todo = set(), set(), [func]
        while todo:
            f = todo.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            done = self._reached.get(f)
            if done is not None:   # a callee walked before (names bound later are in its own file)
                files |= done
                continue
            file = f.__code__.co_filename
            if self.module_name(file) is None:
                continue
            files.add(self._resolved(file))
            for name in _names(f.__code__):
                value = f.__globals__.get(name)
                if type(value).__module__.startswith("numba."):   # a dispatcher: its Python function
                    value = getattr(value, "py_func", None)
                if isinstance(value, types.FunctionType):
                    todo.append(value)
        self._reached[func] = frozenset(files)
        return files


def _global_imports(tree: ast.Module):
    """Import statements that bind module globals: not those inside a function's body."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def _names(code) -> set[str]:
    """The global (and attribute) names ``code`` and the code nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _targets(node, module: str, is_package: bool) -> list[str]:
    """The dotted module names an import statement in ``module`` may take its bound names from."""
    if isinstance(node, ast.Import):
        out = []
        for alias in node.names:
            parts = alias.name.split(".")
            out.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return out
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [source] + [f"{source}.{alias.name}" for alias in node.names if alias.name != "*"]


def rtctl_packages(package_dir: Path) -> dict[str, Path]:
    """rtctl's packages: ``rtctl`` itself, and the outer folders of a source checkout mapped in by
    :mod:`rtctl._source_tree` (installed, they are inside ``rtctl``'s folder)."""
    from ._source_tree import outer_folders

    return {"rtctl": package_dir, **{f"rtctl.{name}": folder for name, folder in outer_folders(package_dir).items()}}


def environment_tag() -> str:
    """The Python, numba and numpy versions (numba's own index checks numba's version only)."""
    numba, numpy = sys.modules.get("numba"), sys.modules.get("numpy")
    return (f"{sys.implementation.cache_tag} {sys.version.split()[0]} numba {getattr(numba, '__version__', '?')} "
            f"numpy {getattr(numpy, '__version__', '?')}")


def install_locator(graph: SourceGraph) -> bool:
    """Give numba's cache entries of functions in ``graph``'s packages :meth:`SourceGraph.digest` of their
    file as freshness stamp (numba's cache directory and file names unchanged: a stale entry is
    overwritten, as numba does when a file changes). False if this numba has no such locator to extend."""
    from numba.core import caching

    base = getattr(caching, "UserProvidedCacheLocator", None) or getattr(caching, "_UserProvidedCacheLocator", None)
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    if base is None or not isinstance(getattr(impl, "_locator_classes", None), list):
        return False

    class DependencyStampLocator(base):
        """numba's locator for ``NUMBA_CACHE_DIR``; the stamp covers the function's file, the files of the
        functions it reaches and what they import."""
        rtctl_graph = graph

        def __init__(self, py_func, py_file):
            super().__init__(py_func, py_file)
            self._rtctl_files = graph.reached_files(py_func) | {py_file}

        @classmethod
        def from_function(cls, py_func, py_file):
            if graph.module_name(py_file) is None:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            from numba.core import config

            graph.use_memo(config.CACHE_DIR)
            stamp = ("rtctl", graph.digest(*self._rtctl_files))
            graph.save_memo()
            return stamp

    impl._locator_classes[:] = [DependencyStampLocator] + [
        c for c in impl._locator_classes if getattr(c, "rtctl_graph", None) is None]
    return True
