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
import stat
import sys
import time
from pathlib import Path

from . import _kernel_deps, _source_tree

_source_tree.install(Path(__file__).resolve().parent)

MODELS_DIR = Path(__file__).parent / "data" / "models"

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
    digest = hashlib.sha1(f"{__version__} {_kernel_deps.environment_tag()}".encode())
    if not stamped:
        for folder in _kernel_deps.rtctl_packages(Path(__file__).resolve().parent).values():
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


import numba  # noqa: E402

_stamped = _kernel_deps.install_locator(_kernel_deps.SourceGraph(_kernel_deps.rtctl_packages(
    Path(__file__).resolve().parent)))
if not os.environ.get("NUMBA_CACHE_DIR"):  # an explicit NUMBA_CACHE_DIR is the user's choice
    try:
        numba.config.CACHE_DIR = _numba_cache_dir(_stamped)
    except (_UnsafeCacheDir, OSError) as exc:
        _run_uncached(numba, f"no private cache directory: {exc}")


def bundled_model_path(name: str) -> Path:
    """Path of a URDF shipped with rtctl (``arm7``, ``quadruped12``, ``humanoid``, ``planar_biped``, ``spatial_quadruped``)."""
    path = MODELS_DIR / f"{name}.urdf"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.urdf"))
        raise FileNotFoundError(f"no bundled model '{name}'; bundled models: {known}")
    return path
