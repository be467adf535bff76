"""Durable file primitives: write-then-fsync, atomic replace, directory fsync, checksums.

Every file the store publishes is written once under its final, never-reused
name (or under a temporary name then renamed, for the pointer files) and
fsynced before the manifest that names it is published.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new_file(path: Path, data: bytes | memoryview) -> None:
    """Create ``path`` (it must not exist), write ``data`` and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_replace(path: Path, data: bytes) -> None:
    """Publish ``data`` at ``path`` atomically: temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    write_new_file(tmp, data)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            h.update(block)
    return h.hexdigest()
