"""rtctl's numba cache: a private directory, and each kernel's entry stamped with what it depends on.

Nothing here runs at ``import rtctl``: numba takes a quarter of a second to import, and the commands that
compile nothing (``rtctl --version``, ``rtctl control estop``) should not pay for it. :func:`install`
puts a finder on ``sys.meta_path`` that lets numba import as usual and then calls :func:`configure`
before the module that imported numba goes on, so before any of rtctl's ``@njit(cache=True)``
decorators runs (they create their cache's locator and read ``numba.config.CACHE_DIR`` at decoration time).
If numba was imported before rtctl, :func:`install` configures at once. Functions registered with
:func:`when_configured` run then too (the command line's compile progress listener).
"""
from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

# numba's on-disk cache is pickled: whoever can write a cache file can run code in every process that
# loads it. rtctl's cache therefore lives only in a directory no other user can write to (see
# _private_dir); when there is none, rtctl's kernels run uncached (compiled at every start).
_CACHE_PRUNE_AGE_S = 24 * 3600.0   # numba-<hash> siblings of the current one unused this long are removed
_CACHE_KEEP_OTHERS = 2             # ... and beyond the 2 most recently used, those unused for an hour
_CACHE_BUSY_AGE_S = 3600.0
_WRITE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class _UnsafeCacheDir(Exception):
    """Why a cache directory is refused (the message names the path)."""


def _cache_name(stamped: bool) -> str:
    """``numba-<hash>`` of what the stamps of numba's cache entries leave out: rtctl's, Python's, numba's and
    numpy's versions (:func:`rtctl._kernel_deps.environment_tag`). Each kernel's entry is stamped with its
    module and the rtctl modules that module imports (:func:`rtctl._kernel_deps.install_locator`), so an
    edit recompiles only the kernels that can see it. Without that stamp (``stamped`` False: a numba whose
    cache locators we cannot extend) the name hashes every source file, as numba checks a function's own
    file only."""
    import hashlib

    from . import _kernel_deps

    digest = hashlib.sha1(f"{_version()} {_kernel_deps.environment_tag()}".encode())
    if not stamped:
        for folder in _kernel_deps.rtctl_packages(PACKAGE_DIR).values():
            for path in sorted(folder.rglob("*.py")):
                digest.update(str(path.relative_to(folder.parent)).encode())
                digest.update(path.read_bytes())
    return f"numba-{digest.hexdigest()[:16]}"


def _check_ancestors(real: str, uid: int, parent_of_cache: bool) -> None:
    """Every directory from ``real`` (a resolved path) up to ``/`` must be owned by root or this user and
    not writable by other users; higher up than the cache's own parent, a sticky world-writable directory
    such as ``/tmp`` is accepted (others cannot rename or replace entries they do not own there)."""
    d = real
    while True:
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode):
            raise _UnsafeCacheDir(f"{d} is not a directory")
        if st.st_uid not in (0, uid):
            raise _UnsafeCacheDir(f"{d} is owned by another user (uid {st.st_uid})")
        if st.st_mode & _WRITE_BY_OTHERS and (parent_of_cache or not st.st_mode & stat.S_ISVTX):
            raise _UnsafeCacheDir(f"{d} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})")
        parent_of_cache = False
        up = os.path.dirname(d)
        if up == d:
            return
        d = up


def _check_own(path: str, uid: int) -> None:
    """``path`` must be a directory (not a symlink) owned by this user and not writable by anyone else."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _UnsafeCacheDir(f"{path} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise _UnsafeCacheDir(f"{path} is not a directory")
    if st.st_uid != uid:
        raise _UnsafeCacheDir(f"{path} is owned by another user (uid {st.st_uid})")
    if st.st_mode & _WRITE_BY_OTHERS:
        raise _UnsafeCacheDir(f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})")
    if stat.S_IMODE(st.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)  # ours and safe already: tighten to private (older rtctl created it 0755)
        except OSError:
            pass


def _private_dir(path: str) -> str:
    """Create ``path`` (and missing parents) with mode 0700, check that only this user can write to it and
    to every directory above it, and return its resolved path; raise :class:`_UnsafeCacheDir` otherwise.

    The resolved path is what numba gets, so no symlink along the way can be re-pointed later.
    """
    uid = os.geteuid()
    path = os.path.abspath(path)
    missing = []
    existing = path
    while not os.path.lexists(existing):
        missing.append(os.path.basename(existing))
        existing = os.path.dirname(existing)
    if not missing:  # the directory itself exists: check it as it is (a symlink is refused, not followed)
        parent = os.path.realpath(os.path.dirname(path))
        _check_ancestors(parent, uid, parent_of_cache=True)
        real = os.path.join(parent, os.path.basename(path))
        _check_own(real, uid)
        return real
    real = os.path.realpath(existing)
    _check_ancestors(real, uid, parent_of_cache=len(missing) == 1)
    for name in reversed(missing):
        real = os.path.join(real, name)
        try:
            os.mkdir(real, 0o700)
        except FileExistsError:  # another process was faster: checked like any existing directory
            pass
        _check_own(real, uid)
    return real


def _cache_root() -> str:
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(str(Path.home()), ".cache")  # XDG: ignore relative
    return os.path.join(base, "rtctl")


def _prune_stale(root: str, keep: str) -> None:
    """Remove ``numba-*`` directories in ``root`` other than ``keep`` (each import touches its own): those no
    process has imported for :data:`_CACHE_PRUNE_AGE_S`, and beyond the :data:`_CACHE_KEEP_OTHERS` most
    recently used, those unused for an hour, so the cache holds about three versions (of rtctl, Python,
    numba, numpy), not every one ever run. Symlinks and files are left alone; ``shutil.rmtree`` does not
    follow symlinks inside."""
    now = time.time()
    others = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if not entry.name.startswith("numba-") or entry.name == keep:
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    others.append((now - st.st_mtime, entry.path))
    except OSError:
        return
    others.sort()
    stale = [path for rank, (age, path) in enumerate(others)
             if age > _CACHE_PRUNE_AGE_S or (rank >= _CACHE_KEEP_OTHERS and age > _CACHE_BUSY_AGE_S)]
    if stale:
        import shutil
        for path in stale:
            shutil.rmtree(path, ignore_errors=True)


def _numba_cache_dir(stamped: bool) -> str:
    """The private numba cache directory (``<cache>/rtctl/numba-<hash>``, :func:`_cache_name`), created and
    checked; raises :class:`_UnsafeCacheDir` or ``OSError`` when there is none."""
    try:
        root = _private_dir(_cache_root())
    except RuntimeError as exc:  # Path.home(): no HOME and no password entry
        raise _UnsafeCacheDir(str(exc)) from None
    name = _cache_name(stamped)
    current = os.path.join(root, name)
    try:
        os.mkdir(current, 0o700)
    except FileExistsError:
        _check_own(current, os.geteuid())
        os.utime(current)  # in use: keeps it from being pruned by other versions' imports
    _prune_stale(root, name)
    return current


def _run_uncached(numba, reason: str) -> None:
    """Make ``cache=True`` a no-op for rtctl's kernels and say so on stderr.

    numba has no switch for that: an empty ``CACHE_DIR`` falls back to ``__pycache__`` and then to
    ``$XDG_CACHE_HOME/numba``, an unusable one falls back the same way, and no usable location at all
    is an error at decoration time. So the dispatchers of rtctl's packages do not get a cache (they keep
    numba's in-memory ``NullCache``); other packages' functions are left to numba's defaults.
    """
    from numba.core import dispatcher

    cls = dispatcher.Dispatcher
    original = getattr(cls, "enable_caching", None)
    if original is not None and not getattr(original, "_rtctl_uncached", False):
        def enable_caching(self):
            module = getattr(self.py_func, "__module__", None) or ""
            if module.partition(".")[0] != "rtctl":
                original(self)

        enable_caching._rtctl_uncached = True
        cls.enable_caching = enable_caching
    elif original is None:  # a numba without the hook: a throwaway private directory instead
        import atexit
        import shutil
        import tempfile

        tmp = tempfile.mkdtemp(prefix="rtctl-numba-")
        atexit.register(shutil.rmtree, tmp, True)
        numba.config.CACHE_DIR = tmp
    mp = sys.modules.get("multiprocessing")
    if mp is None or mp.parent_process() is None:  # once per command, not once per worker process
        print(f"rtctl: numba kernels run uncached (compiled at every start): {reason}", file=sys.stderr)


def _version() -> str:
    import rtctl
    return rtctl.__version__


_configured = False
_pending: list = []


def configure() -> None:
    """Stamp rtctl's cache entries with their dependencies and point numba at the private cache directory
    (:func:`_numba_cache_dir`; uncached when there is none); then run what :func:`when_configured` queued."""
    global _configured
    if _configured:
        return
    _configured = True
    import numba

    from . import _kernel_deps

    stamped = _kernel_deps.install_locator(_kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(PACKAGE_DIR)))
    if not os.environ.get("NUMBA_CACHE_DIR"):  # an explicit NUMBA_CACHE_DIR is the user's choice
        try:
            numba.config.CACHE_DIR = _numba_cache_dir(stamped)
        except (_UnsafeCacheDir, OSError) as exc:
            _run_uncached(numba, f"no private cache directory: {exc}")
    while _pending:
        _pending.pop(0)()


def when_configured(func) -> None:
    """Call ``func()`` once numba is imported and configured: now if it is, else right after its import."""
    if _configured:
        func()
    else:
        _pending.append(func)


def cancel(func) -> None:
    """Forget ``func`` if :func:`when_configured` still holds it."""
    if func in _pending:
        _pending.remove(func)


class _ConfigureAfterImport:
    """numba's own loader, then :func:`configure` (a loader by protocol: ``importlib.abc`` costs 20 ms)."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        configure()


class _NumbaImportHook:
    """A meta path finder for ``numba`` alone: the spec the other finders give, its loader wrapped."""

    def __init__(self):
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "numba" or self.busy or _configured:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ConfigureAfterImport(spec.loader)
        return spec


def install() -> None:
    """Configure numba's cache for rtctl now if numba is imported, else as soon as it is."""
    if "numba" in sys.modules:
        configure()
    elif not any(isinstance(f, _NumbaImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _NumbaImportHook())
