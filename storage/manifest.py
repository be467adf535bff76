"""Manifests: one JSON file per committed version, and ``CURRENT``, the pointer to the newest.

A version is published by writing its manifest under a fresh name (fsynced),
then replacing ``CURRENT`` atomically (temp file, fsync, rename, fsync of the
directory). Every file a manifest names carries its size and sha256, so a
reader can tell a damaged file from data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptStoreError, StoreError
from .fsutil import atomic_replace, fsync_dir, sha256_bytes, write_new_file

FORMAT = 1
CURRENT = "CURRENT"
MANIFESTS = "manifests"
SEGMENTS = "segments"


@dataclass(frozen=True)
class FileRef:
    name: str  # relative to the store directory
    size: int
    sha256: str

    def to_json(self) -> dict:
        return {"name": self.name, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, d: dict) -> "FileRef":
        return cls(d["name"], int(d["size"]), d["sha256"])


def write_file(store: Path, name: str, data: bytes) -> FileRef:
    """Write a new immutable store file (fsynced) and return its reference."""
    path = store / name
    if path.exists() or path.is_symlink():
        # Left by a commit that crashed before publishing: nothing references it.
        path.unlink()
    write_new_file(path, data)
    return FileRef(name, len(data), sha256_bytes(data))


def check_file(store: Path, ref: FileRef, *, verify: bool) -> Path:
    """The path of ``ref`` after checking it exists with the recorded size (and hash if ``verify``)."""
    path = store / ref.name
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise CorruptStoreError(str(path), "file named by the manifest is missing") from None
    if not path.is_file() or path.is_symlink():
        raise CorruptStoreError(str(path), "not a regular file")
    if st.st_size != ref.size:
        raise CorruptStoreError(str(path), f"size {st.st_size} != recorded {ref.size}")
    if verify:
        from .fsutil import sha256_file

        if sha256_file(path) != ref.sha256:
            raise CorruptStoreError(str(path), "checksum mismatch")
    return path


def read_current(store: Path) -> dict | None:
    """The committed manifest ``CURRENT`` points to, or None for a store with no commit yet."""
    cur = store / CURRENT
    try:
        raw = cur.read_bytes()
    except FileNotFoundError:
        return None
    try:
        pointer = json.loads(raw)
        name, digest = pointer["manifest"], pointer["sha256"]
    except (ValueError, KeyError, TypeError):
        raise CorruptStoreError(str(cur), "unreadable pointer") from None
    return read_manifest(store, name, digest)


def read_manifest(store: Path, name: str, digest: str | None = None) -> dict:
    path = store / name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CorruptStoreError(str(path), "manifest named by CURRENT is missing") from None
    if digest is not None and sha256_bytes(raw) != digest:
        raise CorruptStoreError(str(path), "checksum mismatch")
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise CorruptStoreError(str(path), "not JSON") from None
    if manifest.get("format") != FORMAT:
        raise StoreError(f"{store}: store format {manifest.get('format')!r}; this mempp reads format {FORMAT}")
    return manifest


def publish(store: Path, manifest: dict) -> None:
    """Make ``manifest`` the current version (the commit point)."""
    version = int(manifest["version"])
    name = f"{MANIFESTS}/{version:08d}.json"
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    write_file(store, name, data)
    fsync_dir(store / MANIFESTS)
    fsync_dir(store / SEGMENTS)
    pointer = json.dumps({"version": version, "manifest": name, "sha256": sha256_bytes(data)}).encode()
    atomic_replace(store / CURRENT, pointer)


def list_versions(store: Path) -> list[int]:
    d = store / MANIFESTS
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        stem = p.name.removesuffix(".json")
        if p.name.endswith(".json") and stem.isdigit():
            out.append(int(stem))
    return sorted(out)
