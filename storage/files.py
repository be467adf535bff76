"""Store files on disk: how each immutable file is written, named in a manifest, and checked.

Every file the store writes is created once under a name no published version uses, written
through :class:`HashingSink` (which checksums the bytes as they go out), fsynced, and named in a
manifest by a :class:`FileRef`: its size and its XXH3-64 checksum (xxHash, the ``xxhash``
package). A reader checks size and checksum before it parses a byte, so a damaged file is
reported by name, never returned as data. Any file can be checked by hand with xxHash's own
tool: ``xxhsum -H3 FILE`` prints the digest the manifest records.

Stores written before format 2 recorded sha256 (with the project's former home-made
checksums wide64 or mix64 beside it); their files are checked by sha256, which every one of
their references carries, until a merge rewrites them.

Owns: FileRef, the hashing writer, file checks. Must never import the engine.

Never imports: manifest, snapshot, writer, mempp.store.
"""

from __future__ import annotations

import mmap
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import xxhash

from .aside import set_aside
from .errors import CorruptStoreError
from .fsutil import create_new, fsync_file, sha256_file, write_all

CHECKSUM = "xxh3"  # the manifest key of XXH3-64 (lower-case hex, as `xxhsum -H3` and xxhash.xxh3_64().hexdigest())
READ_CHUNK = 8 << 20


class Vanished(CorruptStoreError):
    """A file a manifest names is missing: damage, or a writer removed it after a newer version
    stopped naming it (the caller may re-read ``CURRENT`` and try again)."""


@dataclass(frozen=True)
class FileRef:
    name: str  # relative to the store directory
    size: int
    xxh3: str | None = None  # XXH3-64 (what format-2 stores record)
    sha256: str | None = None  # format-1 stores (every reference carries it)
    legacy: tuple = ()  # a format-1 reference's other checksums (("wide64", hex), ...), kept verbatim

    @property
    def digest(self) -> tuple[str, str]:
        """(kind, hex) of the checksum a reader checks: XXH3-64, else (format 1) sha256."""
        if self.xxh3 is not None:
            return CHECKSUM, self.xxh3
        if self.sha256 is None:
            raise CorruptStoreError(self.name, "the manifest records no checksum for this file")
        return "sha256", self.sha256

    def to_json(self) -> dict:
        out: dict = {"name": self.name, "size": self.size}
        if self.xxh3 is not None:
            out["xxh3"] = self.xxh3
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        out.update(dict(self.legacy))
        return out

    @classmethod
    def from_json(cls, d: dict) -> "FileRef":
        legacy = tuple(sorted((k, v) for k, v in d.items() if k in ("mix64", "wide64")))
        return cls(d["name"], int(d["size"]), d.get("xxh3"), d.get("sha256"), legacy)


def xxh3_bytes(data) -> str:
    return xxhash.xxh3_64(data).hexdigest()


def xxh3_file(path: Path) -> str:
    """XXH3-64 of a file, read through a memory map in windows (xxhash releases the GIL: check files in threads)."""
    h = xxhash.xxh3_64()
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return h.hexdigest()
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                view = memoryview(m)
                try:
                    for a in range(0, size, READ_CHUNK):
                        h.update(view[a : a + READ_CHUNK])
                finally:
                    view.release()
            return h.hexdigest()
        except (OSError, ValueError):  # a file that cannot be mapped: plain reads
            f.seek(0)
            h.reset()
            buf = bytearray(READ_CHUNK)
            while n := f.readinto(buf):
                h.update(memoryview(buf)[:n])
            return h.hexdigest()


def write_file(store: Path, name: str, data: bytes | memoryview, pending: list | None = None) -> FileRef:
    """Write a new immutable store file (fsynced, or with ``pending`` left to the caller) and return its reference."""
    return _write_new(store, name, lambda sink: sink.write(data), pending)


def write_table_file(store: Path, name: str, data: pa.Table | pa.RecordBatch, pending: list | None = None) -> FileRef:
    """Write ``data`` as a new immutable Arrow IPC file and return its reference.

    The file is fsynced before this returns, or, with ``pending`` (a list), left open and added
    to it as ``(descriptor, path)`` for the caller to fsync with others at once
    (``fsutil.fsync_all``) before anything names it.

    The file is written as pyarrow serializes it, piece by piece (each column buffer handed
    over as it is, not copied into one buffer of the whole file first: a segment's is
    hundreds of MB, and fresh memory is what a write costs most on a virtual machine).
    """

    def write(sink: HashingSink) -> None:
        with pa.ipc.new_file(pa.PythonFile(sink, mode="w"), data.schema) as writer:
            writer.write(data)

    return _write_new(store, name, write, pending)


def _write_new(store: Path, name: str, write, pending: list | None = None) -> FileRef:
    """Create ``name``, let ``write(sink)`` fill it through a :class:`HashingSink`, fsync it (or
    add it to ``pending``); its reference."""
    path = store / name
    if os.path.lexists(path):  # left by a write that failed before publishing: kept, never overwritten
        if ".tmp-" in name:
            os.unlink(path)  # a temporary file is never data
        else:
            set_aside(store, [name], "a new file of this name was about to be written")
    fd = create_new(path)
    try:
        sink = HashingSink(fd, path)
        try:
            write(sink)
            size, digest = sink.finish()
        finally:
            sink.shutdown()
        if pending is None:
            fsync_file(fd, path)
    except BaseException:
        os.close(fd)
        raise
    if pending is None:
        os.close(fd)
    else:
        pending.append((fd, path))
    return FileRef(name, size, xxh3=digest)


class HashingSink:
    """A new file's writer (pyarrow writes an IPC file through it as a file object): each piece
    goes to the file as it comes, and into the checksum in the same order.

    Small pieces (the IPC framing, short columns) are gathered up to ``SMALL`` bytes before
    they are written. A piece of ``BIG`` bytes or more is hashed in a thread while it is
    written here (xxhash releases the GIL), and ``write`` returns only when both are done:
    pyarrow may reuse what it handed over once the call returns.
    """

    SMALL = 64 << 10
    BIG = 1 << 20

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path
        self.hash = xxhash.xxh3_64()
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
            self.hash.update(view)
            write_all(self.fd, self.path, view)
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1)
        hashed = self.pool.submit(self.hash.update, view)
        try:
            write_all(self.fd, self.path, view)
        finally:
            hashed.result()

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass  # pieces are written as they come; the caller fsyncs

    def close(self) -> None:
        self.closed = True  # the descriptor is the caller's

    def finish(self) -> tuple[int, str]:
        """Write what is gathered; (size, XXH3-64) of everything written."""
        self._flush()
        return self.size, self.hash.hexdigest()

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def check_file(store: Path, ref: FileRef, *, verify: bool) -> Path:
    """The path of ``ref`` after checking it exists with the recorded size and, if ``verify``, checksum."""
    path = store / ref.name
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise Vanished(str(path), "file named by the manifest is missing") from None
    if not stat.S_ISREG(st.st_mode):  # from the one lstat: a file removed meanwhile is not "damaged"
        raise CorruptStoreError(str(path), "not a regular file")
    if st.st_size != ref.size:
        raise CorruptStoreError(str(path), f"size {st.st_size} != recorded {ref.size}")
    if verify:
        kind, want = ref.digest
        try:
            got = xxh3_file(path) if kind == CHECKSUM else sha256_file(path)
        except FileNotFoundError:
            raise Vanished(str(path), "file named by the manifest is missing") from None
        if got != want:
            raise CorruptStoreError(str(path), f"checksum mismatch ({'XXH3-64' if kind == CHECKSUM else kind})")
    return path


def verify_files(store: Path, refs: list[FileRef], *, threads: int = 8, hash: bool = True) -> dict[str, CorruptStoreError]:
    """Check each file's size and checksum against its reference, in a thread pool.

    Returns the failures by file name (empty when every file matches). ``hash=False`` checks
    sizes only (for measuring what verification costs; no production path uses it).
    """
    with Checks(store, refs, threads=threads, hash=hash) as checks:
        return checks.failures()


class Checks:
    """Checks of files running in a thread pool, in the order given: ``name in checks`` waits
    for that file's check and says whether it failed; ``checks[name]`` is its error.

    Lets a reader parse each file as soon as its own check has passed, while later files
    are still being hashed. Leaving the ``with`` block cancels checks not yet started.
    """

    def __init__(self, store: Path, refs: list[FileRef], *, threads: int = 8, hash: bool = True):
        self._store, self._hash = store, hash
        self._done: dict[str, CorruptStoreError | None] = {}
        self._pending: dict = {}
        self._pool = None
        workers = min(threads, len(refs), os.cpu_count() or 1)
        if workers <= 1 or sum(r.size for r in refs) < (4 << 20):
            for r in refs:
                self._done[r.name] = self._one(r)
            return
        self._pool = ThreadPoolExecutor(max_workers=workers)
        for r in refs:
            self._pending[r.name] = self._pool.submit(self._one, r)

    def _one(self, ref: FileRef) -> CorruptStoreError | None:
        try:
            check_file(self._store, ref, verify=self._hash)
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
