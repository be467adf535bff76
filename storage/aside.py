"""Setting aside what the store cannot prove unreferenced: ``lost+found/``, never a deletion.

A store directory keeps ``CURRENT``, ``LOCK``, ``segments/``, ``manifests/`` and, once something
was set aside, ``lost+found/``. A file that no current version names may still be data (an
interrupted commit's, or the versions after a ``CURRENT`` that was lost or replaced by an older
copy): writers and ``repair`` move such files into a new folder of ``lost+found/`` with a note
saying why (``NOTE.json``), keeping their paths, instead of removing them.

Owns: the layout names (``SEGMENTS``, ``MANIFESTS``, ``LOST``), the version number a file name
carries, the list of files a version does not name, and :func:`set_aside`.

Never imports: files, manifest, snapshot, writer, recovery, mempp.store.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from .fsutil import create_new, fsync_dir, fsync_dirs, fsync_file, mkdir, write_all
from .fsutil import replace as fs_replace

SEGMENTS = "segments"
MANIFESTS = "manifests"
LOST = "lost+found"
_NUMBER = re.compile(r"[0-9]{8}")


def _rel(store: Path, path: str) -> str:
    try:
        return Path(path).relative_to(store).as_posix()
    except ValueError:
        return path


def file_number(rel: str) -> int:
    """The newest version number written into a store file's name (0 for none): a commit's files
    carry its version, a merge's the last version it joins, a repair's its own."""
    found = _NUMBER.findall(rel.rsplit("/", 1)[-1])
    return max((int(x) for x in found), default=0)


def strays(store: Path, state) -> list[str]:
    """Files in ``segments/`` and ``manifests/`` that ``state`` does not name, and temporary files."""
    keep = state.names() if state is not None else set()
    out = []
    for d in (store, store / SEGMENTS, store / MANIFESTS):
        try:
            entries = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            rel = _rel(store, e.path)
            if d == store:
                if e.name.startswith(".") and ".tmp-" in e.name:
                    out.append(rel)
            elif rel not in keep and not (state is not None and state.format == 1 and d.name == MANIFESTS
                                          and file_number(rel) <= state.version):
                out.append(rel)
    return sorted(out)


def set_aside(store: Path, names: list[str], why: str) -> str | None:
    """Move ``names`` (relative to the store) into a new folder of ``lost+found/``, keeping their
    paths, with a note saying why; returns the folder (relative), or None when there was nothing."""
    names = [n for n in names if os.path.lexists(store / n)]
    if not names:
        return None
    mkdir(store / LOST)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder, i = f"{LOST}/{stamp}", 1
    while os.path.lexists(store / folder):
        i += 1
        folder = f"{LOST}/{stamp}-{i}"
    os.mkdir(store / folder)
    for n in names:
        dst = store / folder / n
        if not dst.parent.is_dir():
            os.makedirs(dst.parent)
        fs_replace(store / n, dst)
    note = json.dumps({"why": why, "moved": names, "at": stamp}, indent=1).encode()
    fd = create_new(store / folder / "NOTE.json")
    try:
        write_all(fd, store / folder / "NOTE.json", note)
        fsync_file(fd, store / folder / "NOTE.json")
    finally:
        os.close(fd)
    fsync_dirs(sorted({store / n.rsplit("/", 1)[0] for n in names if "/" in n}) + [store / folder, store / LOST])
    fsync_dir(store)
    return folder
