"""Keep every read and write inside the store directory, whatever names or symlinks it holds.

The store never follows a symlink inside its own directory: ``CURRENT``, ``LOCK``,
``segments/``, ``manifests/`` and every file in those two folders must be what they
look like (regular files and real directories). A manifest or pointer may only name
files by relative names of at most two components, none starting with a dot
(``segments/00000001.docs.arrow``), and ``CURRENT`` only ``manifests/<8 digits>.json``,
so a hostile manifest cannot point at ``../../etc`` or ``/etc``.
Anything else is refused with a typed error before it is opened. (The store path the
caller gives is the caller's choice and may itself be a symlink.)

Owns those rules (:func:`check_store_path`, :func:`check_is_store`, :func:`check_layout`,
:func:`check_name`, :func:`check_manifest_names`); the store applies them when it opens.

Never imports: manifest, snapshot, writer, mempp.store.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from .errors import CorruptStoreError, StoreError

# A data file: one or two path components inside the store, none starting with a dot (so no "..").
_DATA_NAME = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.-]*(/[0-9A-Za-z_][0-9A-Za-z_.-]*)?")
_MANIFEST_NAME = re.compile(r"manifests/[0-9]{8}\.json")
_DIRS = ("segments", "manifests")
_FILES = ("CURRENT", "LOCK")
_ASIDE = "lost+found"  # where repairs and writers set aside what they cannot prove unreferenced


def check_store_path(path: str | os.PathLike) -> Path:
    """``path`` as a ``Path``; a NUL or a non-string path is a ``StoreError``."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise StoreError(f"expected a path, got {type(path).__name__}") from None
    if isinstance(text, bytes):
        raise StoreError(f"expected a str path, got bytes {text!r}")
    if "\x00" in text:
        raise StoreError(f"{text!r}: a store path cannot contain NUL")
    if not text:
        raise StoreError("empty store path")
    return Path(text)


def check_is_store(store: Path) -> None:
    """Refuse an existing directory that is neither empty nor a mempp store (a ``StoreError`` naming
    what it holds), so that a store is never read from, or written beside, unrelated files.

    A store is a directory with ``CURRENT``, or one whose entries are all a store's own
    (``LOCK``, ``segments/``, ``manifests/``, a commit's temporary files): a store whose first
    commit has not happened yet, or was interrupted.
    """
    try:
        names = [e.name for e in os.scandir(store)]
    except NotADirectoryError:
        raise StoreError(f"{store}: not a directory") from None
    if "CURRENT" in names:
        return
    others = sorted(n for n in names if n not in _DIRS + _FILES + (_ASIDE,) and not (n.startswith(".") and ".tmp-" in n))
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise StoreError(
            f"{store}: not a mempp store (no CURRENT; it holds {shown}); give a new or empty directory for a new store"
        )


def check_layout(store: Path) -> None:
    """Refuse a store whose own entries are symlinks or not of their kind; check the pointer's name."""
    for name in _DIRS + _FILES:
        p = store / name
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        want = stat.S_ISDIR if name in _DIRS else stat.S_ISREG
        if not stat.S_ISLNK(st.st_mode) and name in _FILES and stat.S_ISDIR(st.st_mode):
            continue  # damage, not a planted path: reading CURRENT or taking LOCK reports it by name
        if stat.S_ISLNK(st.st_mode) or not want(st.st_mode):
            raise CorruptStoreError(str(p), "not a " + ("directory" if name in _DIRS else "regular file") + " (symlinks are never followed)")
    for top in os.scandir(store):  # no symlink anywhere in the store's own two levels
        if top.is_symlink():
            raise CorruptStoreError(f"{store}/{top.name}", "is a symlink (symlinks in a store are never followed)")
        if top.is_dir(follow_symlinks=False):
            for entry in os.scandir(top.path):
                if entry.is_symlink():
                    raise CorruptStoreError(f"{top.path}/{entry.name}", "is a symlink (symlinks in a store are never followed)")
    cur = store / "CURRENT"
    try:
        raw = cur.read_bytes()  # a regular file, checked above
    except (FileNotFoundError, IsADirectoryError):
        return
    try:
        name = json.loads(raw)["manifest"]
    except (ValueError, KeyError, TypeError):
        return  # read_current reports an unreadable pointer
    check_name(str(cur), name, manifest=True)


def check_name(where: str, name: object, *, manifest: bool = False) -> str:
    """``name`` if it is one of the store's own file names, else ``CorruptStoreError``."""
    pattern = _MANIFEST_NAME if manifest else _DATA_NAME
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise CorruptStoreError(where, f"names a file outside the store's layout: {name!r}")
    return name


def check_manifest_names(store: Path, state) -> None:
    """Every file a version references (a ``manifest.State``) must follow the store's naming scheme."""
    if state is None:
        return
    where = str(store / "manifests" / f"{int(state.version):08d}.json")
    for name in sorted(state.names()):
        check_name(where, name)
