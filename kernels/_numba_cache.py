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
Installed by ``mempp.kernels`` before any kernel is compiled (a locator is chosen when a
``cache=True`` function is decorated, at import).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from numba.core import caching, config

_PACKAGE_DIRS: tuple[str, ...] = ()


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
        self._cache_path = str(_usable_root() / self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR:
            return None  # NUMBA_CACHE_DIR is set: numba's own locator honours it
        here = os.path.dirname(os.path.abspath(py_file))
        if not any(here == d or here.startswith(d + os.sep) for d in _PACKAGE_DIRS):
            return None
        return caching._SourceFileBackedLocatorMixin.from_function.__func__(cls, py_func, py_file)


def install(*package_dirs: str) -> None:
    """Route the cache of functions defined under ``package_dirs`` through :class:`MemppCacheLocator` (idempotent)."""
    global _PACKAGE_DIRS
    _PACKAGE_DIRS = tuple(sorted(set(_PACKAGE_DIRS) | {os.path.abspath(d) for d in package_dirs}))
    classes = caching.CacheImpl._locator_classes
    if MemppCacheLocator not in classes:
        classes.insert(0, MemppCacheLocator)
