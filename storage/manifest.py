"""Manifests: one JSON file per committed version, and ``CURRENT``, the pointer to the newest.

A version is published by writing its manifest under a fresh name (fsynced),
then replacing ``CURRENT`` atomically (temp file, fsync, rename, fsync of the
directory). Every file a manifest names carries its size, sha256 and wide64 (a
checksum four to seven times as fast as sha256, ``kernels.checksum``), so a reader can tell a damaged
file from data; opening checks the size and wide64 (files written before it: mix64 where
they recorded it, else sha256).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from .errors import CorruptStoreError, StoreError
from .fsutil import atomic_replace, create_new, failpoint, fsync_dir, fsync_file, sha256_bytes, unlink, write_all

FORMAT = 1
CURRENT = "CURRENT"
MANIFESTS = "manifests"
SEGMENTS = "segments"


@dataclass(frozen=True)
class FileRef:
    name: str  # relative to the store directory
    size: int
    sha256: str
    mix64: str | None = None  # kernels.checksum.mix64 (recorded by stores written before wide64)
    wide64: str | None = None  # kernels.checksum.wide64 (what new files record)

    def to_json(self) -> dict:
        out = {"name": self.name, "size": self.size, "sha256": self.sha256}
        if self.mix64 is not None:
            out["mix64"] = self.mix64
        if self.wide64 is not None:
            out["wide64"] = self.wide64
        return out

    @property
    def quick(self) -> str:
        """The checksum opening checks: wide64, else mix64, else (the oldest stores) sha256."""
        return "wide64" if self.wide64 is not None else "mix64" if self.mix64 is not None else "sha256"

    @classmethod
    def from_json(cls, d: dict) -> "FileRef":
        return cls(d["name"], int(d["size"]), d["sha256"], d.get("mix64"), d.get("wide64"))


def write_file(store: Path, name: str, data: bytes | memoryview) -> FileRef:
    """Write a new immutable store file (fsynced) and return its reference."""
    return _write_new(store, name, lambda sink: sink.write(data))


def write_table_file(store: Path, name: str, data: pa.Table | pa.RecordBatch) -> FileRef:
    """Write ``data`` as a new immutable Arrow IPC file (fsynced) and return its reference.

    The file is written as pyarrow serializes it, piece by piece (each column buffer handed
    over as it is, not copied into one buffer of the whole file first: a segment's is
    hundreds of MB, and fresh memory is what a write costs most on a virtual machine).
    """

    def write(sink: _HashingSink) -> None:
        with pa.ipc.new_file(pa.PythonFile(sink, mode="w"), data.schema) as writer:
            writer.write(data)

    return _write_new(store, name, write)


def _write_new(store: Path, name: str, write) -> FileRef:
    """Create ``name``, let ``write(sink)`` fill it through a :class:`_HashingSink`, fsync it; its reference."""
    path = store / name
    # A file of this name can only be left by a commit that failed before publishing: nothing references it.
    unlink(path)
    fd = create_new(path)
    try:
        sink = _HashingSink(fd, path)
        try:
            write(sink)
            size, sha, wide = sink.finish()
        finally:
            sink.shutdown()
        fsync_file(fd, path)
    finally:
        os.close(fd)
    return FileRef(name, size, sha, wide64=wide)


class _HashingSink:
    """A new file's writer (pyarrow writes an IPC file through it as a file object): each piece
    goes to the file as it comes, and into both checksums (sha256, wide64) in the same order.

    Small pieces (the IPC framing, short columns) are gathered up to ``SMALL`` bytes before
    they are written. A piece of ``BIG`` bytes or more is hashed in a thread while it is
    written here (hashlib and the wide64 kernel release the GIL), and ``write`` returns only
    when both are done: pyarrow may reuse what it handed over once the call returns.
    """

    SMALL = 64 << 10
    BIG = 1 << 20

    def __init__(self, fd: int, path: Path) -> None:
        from mempp.kernels.checksum import Wide64

        self.fd, self.path = fd, path
        self.sha, self.wide = hashlib.sha256(), Wide64()
        self.size = 0
        self.small = bytearray()
        self.pool: ThreadPoolExecutor | None = None
        self.closed = False

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        if len(view) < self.SMALL:
            self.small += view
            if len(self.small) >= self.SMALL:
                self._flush()
        else:
            self._flush()
            self._put(view)
        self.size += len(view)
        return len(view)

    def _flush(self) -> None:
        if self.small:
            data = bytes(self.small)
            self.small.clear()
            self._put(memoryview(data))

    def _put(self, view: memoryview) -> None:
        if len(view) < self.BIG:
            self._hash(view)
            write_all(self.fd, self.path, view)
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1)
        hashed = self.pool.submit(self._hash, view)
        try:
            write_all(self.fd, self.path, view)
        finally:
            hashed.result()

    def _hash(self, view: memoryview) -> None:
        self.sha.update(view)
        self.wide.update(view)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass  # pieces are written as they come; the caller fsyncs

    def close(self) -> None:
        self.closed = True  # the descriptor is the caller's

    def finish(self) -> tuple[int, str, str]:
        """Write what is gathered; (size, sha256, wide64) of everything written."""
        self._flush()
        return self.size, self.sha.hexdigest(), self.wide.hexdigest()

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def check_file(store: Path, ref: FileRef, *, verify: bool, deep: bool = False) -> Path:
    """The path of ``ref`` after checking it exists with the recorded size and, if ``verify``,
    checksum: ``ref.quick`` (wide64, else mix64, else sha256; ``deep``: sha256 as well)."""
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

        quick = ref.quick
        if quick != "sha256":
            from mempp.kernels.checksum import mix64_file, wide64_file

            digest = wide64_file(path) if quick == "wide64" else mix64_file(path)
            if digest != getattr(ref, quick):
                raise CorruptStoreError(str(path), f"checksum mismatch ({quick})")
        if (deep or quick == "sha256") and sha256_file(path) != ref.sha256:
            raise CorruptStoreError(str(path), "checksum mismatch (sha256)")
    return path


def read_current(store: Path) -> dict | None:
    """The committed manifest ``CURRENT`` points to, or None for a store with no commit yet.

    ``CURRENT`` records the manifest's sha256; a damaged ``CURRENT`` or newest manifest
    raises :class:`CorruptStoreError` naming it. There is no silent fall back to an older
    version (that would hide the loss of acknowledged commits): open one explicitly with
    ``Store.open(path, version=N)``.
    """
    cur = store / CURRENT
    try:
        raw = cur.read_bytes()
    except FileNotFoundError:
        return None
    try:
        pointer = json.loads(raw)
        name, digest, version = pointer["manifest"], pointer["sha256"], pointer["version"]
    except (ValueError, KeyError, TypeError):
        raise CorruptStoreError(str(cur), "unreadable pointer") from None
    if not isinstance(version, int) or not isinstance(name, str) or name != f"{MANIFESTS}/{version:08d}.json":
        raise CorruptStoreError(str(cur), "pointer names an inconsistent manifest")
    manifest = read_manifest(store, name, digest)
    if manifest.get("version") != version:
        raise CorruptStoreError(str(cur), "pointer and manifest disagree on the version")
    return manifest


def read_manifest(store: Path, name: str, digest: str | None = None) -> dict:
    path = store / name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CorruptStoreError(str(path), "manifest named by CURRENT is missing") from None
    if digest is not None and sha256_bytes(raw) != digest:
        raise CorruptStoreError(str(path), f"sha256 differs from the one {CURRENT} records (one of the two is damaged)")
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise CorruptStoreError(str(path), "not JSON") from None
    if not isinstance(manifest, dict):
        raise CorruptStoreError(str(path), "not a manifest")
    if manifest.get("format") != FORMAT:
        raise StoreError(f"{store}: store format {manifest.get('format')!r}; this mempp reads format {FORMAT}")
    return manifest


def publish(store: Path, manifest: dict) -> None:
    """Make ``manifest`` the current version (the commit point)."""
    version = int(manifest["version"])
    name = f"{MANIFESTS}/{version:08d}.json"
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    write_file(store, name, data)
    failpoint("after_manifest_fsync")
    fsync_dir(store / MANIFESTS)
    failpoint("after_manifests_dir_fsync")
    fsync_dir(store / SEGMENTS)
    failpoint("after_segments_dir_fsync")
    pointer = json.dumps({"version": version, "manifest": name, "sha256": sha256_bytes(data)}).encode()
    # The rename is the commit point; the store directory's fsync makes it (and the first
    # commit's segments/ and manifests/ entries) durable before add() returns.
    atomic_replace(store / CURRENT, pointer, step="current")
    failpoint("after_store_dir_fsync")


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


def verify_files(
    store: Path, refs: list[FileRef], *, threads: int = 8, hash: bool = True, deep: bool = False
) -> dict[str, CorruptStoreError]:
    """Check each file's size and checksum against its reference, in a thread pool (both hashes release the GIL).

    Returns the failures by file name (empty when every file matches). ``deep``: sha256 too
    where a quicker checksum is recorded. ``hash=False`` checks sizes only (for measuring what
    verification costs; no production path uses it).
    """
    with Checks(store, refs, threads=threads, hash=hash, deep=deep) as checks:
        return checks.failures()


class Checks:
    """Checks of files running in a thread pool, in the order given: ``name in checks`` waits
    for that file's check and says whether it failed; ``checks[name]`` is its error.

    Lets a reader parse each file as soon as its own check has passed, while later files
    are still being hashed. Leaving the ``with`` block cancels checks not yet started.
    """

    def __init__(self, store: Path, refs: list[FileRef], *, threads: int = 8, hash: bool = True, deep: bool = False):
        self._store, self._hash, self._deep = store, hash, deep
        self._done: dict[str, CorruptStoreError | None] = {}
        self._pending: dict = {}
        self._pool = None
        workers = min(threads, len(refs), os.cpu_count() or 1)
        if workers <= 1 or sum(r.size for r in refs) < (4 << 20):
            for r in refs:
                self._done[r.name] = self._one(r)
            return
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=workers)
        for r in refs:
            self._pending[r.name] = self._pool.submit(self._one, r)

    def _one(self, ref: FileRef) -> CorruptStoreError | None:
        try:
            check_file(self._store, ref, verify=self._hash, deep=self._deep)
        except CorruptStoreError as exc:
            return exc
        except OSError as exc:
            return CorruptStoreError(str(self._store / ref.name), f"cannot read: {exc}")
        return None

    def _result(self, name: str) -> CorruptStoreError | None:
        if name in self._pending:
            self._done[name] = self._pending.pop(name).result()
        return self._done.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._result(name) is not None

    def __getitem__(self, name: str) -> CorruptStoreError:
        exc = self._result(name)
        if exc is None:
            raise KeyError(name)
        return exc

    def failures(self) -> dict[str, CorruptStoreError]:
        """Every failed check by file name (waits for all)."""
        for name in list(self._pending):
            self._result(name)
        return {name: exc for name, exc in self._done.items() if exc is not None}

    def __enter__(self) -> "Checks":
        return self

    def __exit__(self, *exc_info) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
