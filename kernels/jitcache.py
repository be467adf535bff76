"""Where numba caches mempp's compiled kernels: a per-user cache directory, never the package.

numba's default for ``cache=True`` writes the compiled code beside the source, in the package's
own ``__pycache__``. In a non-editable install that is ``site-packages/mempp/kernels``: files pip
did not install and will not remove, and after ``pip install -e`` the folder left behind shadows
the editable package (``cannot import name ... (unknown location)``). So mempp's kernels are
cached, in order of preference:

1. under ``NUMBA_CACHE_DIR`` when it is set (numba's own rule, unchanged);
2. under ``$XDG_CACHE_HOME/mempp/numba`` (``~/.cache/mempp/numba`` when unset);
3. under ``<tempdir>/mempp-numba-<uid>`` when that is not writable;
4. under a new private temporary directory when neither is (cached for this process only).

Only functions defined in mempp's own modules are affected: numba's other users keep its defaults.
A cache file of mempp's that cannot be written (a full disk, a file-size limit) is skipped, and the
kernel runs from memory; numba would raise the ``OSError`` from the call that compiled it. A damaged
one (truncated by a crash) is compiled again and rewritten; numba would fail every call on it.
Installed by ``mempp.kernels`` before any kernel is compiled (a locator is chosen when a
``cache=True`` function is decorated, at import).

Owns the cache locator (:class:`MemppCacheLocator`, :func:`install`), the passing over of a cache
file that cannot be written (:func:`_save_overload_or_skip`) or read (:func:`_load_overload_or_compile`),
and the seeding of the cache from the shipped ``_precompiled/`` (:func:`seed`).

Never imports: precompile, mempp.storage, mempp.store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from numba.core import caching, config

_PACKAGE_DIRS: tuple[str, ...] = ()
# One folder for mempp's kernels wherever the package is installed (site-packages, an editable
# checkout): numba keys every cached kernel by its source file's content (and the CPU), so an
# install of the same code finds the kernels another compiled, and a changed file is compiled again.
CACHE_SUBDIR = "kernels"


def cache_root() -> Path:
    """The directory mempp's compiled kernels are cached under (before any fallback)."""
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mempp" / "numba"


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


_fallback: Path | None = None


def _usable_root() -> Path:
    global _fallback
    root = cache_root()
    if _writable(root):
        return root
    if _fallback is None:
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        shared = Path(tempfile.gettempdir()) / f"mempp-numba-{uid}"
        _fallback = shared if _writable(shared) else Path(tempfile.mkdtemp(prefix="mempp-numba-"))
    return _fallback


class MemppCacheLocator(caching.UserProvidedCacheLocator):
    """numba's user-provided-directory locator, pointed at :func:`cache_root` for mempp's own files."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = str(_usable_root() / CACHE_SUBDIR)

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR:
            return None  # NUMBA_CACHE_DIR is set: numba's own locator honours it
        if not _ours(py_file):
            return None
        return caching._SourceFileBackedLocatorMixin.from_function.__func__(cls, py_func, py_file)


def _ours(path: str) -> bool:
    here = os.path.dirname(os.path.abspath(path))
    return any(here == d or here.startswith(d + os.sep) for d in _PACKAGE_DIRS)


_numba_save_overload = caching.Cache.save_overload
_numba_load_overload = caching.Cache.load_overload


def _load_overload_or_compile(self, sig, target_context):
    """numba's ``Cache.load_overload``, except that for mempp's own kernels a damaged cache entry (a
    truncated index or data file, after a crash or a power loss) is a miss: the function's index is
    reset, the kernel is compiled, and the compile's save writes a whole entry again. Left to numba,
    the unpickling error would fail every call of the kernel, in every process, until someone
    deleted the file."""
    try:
        return _numba_load_overload(self, sig, target_context)
    except Exception:
        if not _ours(self._py_func.__code__.co_filename):
            raise
        try:
            self.flush()  # an empty index in place of the damaged one
        except OSError:
            pass  # an unwritable cache: the save after the compile is skipped too
        return None


def _save_overload_or_skip(self, sig, data) -> None:
    """numba's ``Cache.save_overload``, except that for mempp's own kernels a cache file that cannot
    be written (a full disk, a file-size limit, a read-only cache) is skipped: the kernel is
    compiled and runs from memory, and the next process compiles it again. Left to numba, the
    ``OSError`` would surface from whatever store write or query first called the kernel, in place
    of that write's own error (a full disk must fail a commit with ``StoreWriteError``, and only
    when the store's own files cannot be written)."""
    try:
        _numba_save_overload(self, sig, data)
    except OSError:
        if not _ours(self._py_func.__code__.co_filename):
            raise


def install(*package_dirs: str) -> None:
    """Route the cache of functions defined under ``package_dirs`` through :class:`MemppCacheLocator`
    (idempotent), let a cache file that cannot be written or read pass (:func:`_save_overload_or_skip`,
    :func:`_load_overload_or_compile`), and seed the cache from what the package ships (:func:`seed`)."""
    global _PACKAGE_DIRS
    _PACKAGE_DIRS = tuple(sorted(set(_PACKAGE_DIRS) | {os.path.abspath(d) for d in package_dirs}))
    classes = caching.CacheImpl._locator_classes
    if MemppCacheLocator not in classes:
        classes.insert(0, MemppCacheLocator)
    caching.Cache.save_overload = _save_overload_or_skip
    caching.Cache.load_overload = _load_overload_or_compile
    for d in package_dirs:
        seed(Path(d) / PRECOMPILED)


PRECOMPILED = "_precompiled"
_seeded: set[str] = set()


def seed(shipped: Path) -> int:
    """Copy the compiled kernels a package ships (``pip install .`` compiles them while it builds,
    ``kernels/precompile.py``) into the cache where numba looks, each file that is not there yet; once
    per process. numba checks each entry against its source file's content and this CPU, and
    compiles again what does not match, so a shipped file can only save time. Returns the files copied."""
    key = str(shipped)
    if key in _seeded or config.CACHE_DIR or not shipped.is_dir():
        return 0
    _seeded.add(key)
    target = _usable_root() / CACHE_SUBDIR
    copied = 0
    try:
        target.mkdir(parents=True, exist_ok=True)
        have = set(os.listdir(target))
        for entry in os.scandir(shipped):
            if entry.is_file() and entry.name not in have:
                shutil.copyfile(entry.path, target / entry.name)
                copied += 1
    except OSError:
        return copied  # an unwritable cache: compile on first use instead
    return copied
