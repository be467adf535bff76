"""``mempp.Store``: the one entry object. Open a directory, add documents, ask questions as of a date.

A thin facade over the two objects that do the work (docs/DESIGN.md §6): a :class:`~mempp.Writer`
(``writer.py``: the lock, commits, supersessions, merges, ANN builds, group commit) and the
current :class:`~mempp.Searcher` (``searcher.py``: every read, pinned to one version). Each
commit of the writer, and :meth:`Store.refresh`, moves the store to a new searcher; a searcher
already handed out keeps its version.

Owns: opening (the directory's layout checked, the embedder and config checked against the
manifest, recovery from a lost ``CURRENT``), which version is current, residency, and closing.

Never imports: cli, demo, mempp.bench, onnxruntime, tokenizers.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable

from mempp.storage import (
    Analyzer,
    CorruptStoreError,
    Snapshot,
    StoreError,
    Vanished,
    read_pointer,
    read_state,
)
from mempp.storage.confine import check_is_store, check_layout, check_manifest_names, check_store_path
from mempp.storage.errors import StoreRecoveredWarning
from mempp.storage.aside import file_number, strays
from mempp.storage.recovery import holds_data, newest_whole
from mempp.storage.recovery import repair as repair_store
from mempp.storage.recovery import verify as verify_store
from mempp.storage.fsutil import fsync_dir
from mempp.storage.resident import Residency

from .config import IndexConfig
from .docindex import DocIndex
from .embedder import DEFAULT_MODEL, Embedder, describe, embedder_for, model_label, model_spec, same_model
from .access import Access
from .permissions import Permissions
from .erasure import erasures
from .errors import EmbedderError, ValidationError
from .searcher import Searcher
from .versions import pinned
from .compaction import MERGE_MODES
from .writer import Writer

# The manifest record of a new store opened without an embedder (embedder.DEFAULT_MODEL).
DEFAULT_EMBEDDER = model_spec(DEFAULT_MODEL).describe()
OPEN_RETRY_SECONDS = 60.0  # a reader that finds a file gone re-reads CURRENT while it keeps moving (a
# writer merged the file away), for at most this long: each retry sees a newer version, so it only
# repeats while a writer commits and merges faster than this reader can map one version


def _read(name: str):
    """A read of :class:`Store`: the current searcher's method ``name``."""
    method = getattr(Searcher, name)

    @functools.wraps(method)
    def read(self, *args, **kwargs):
        self.check_open()
        return method(self._searcher, *args, **kwargs)

    return read


def _write(name: str):
    """A write of :class:`Store`: the writer's method ``name``."""
    method = getattr(Writer, name)

    @functools.wraps(method)
    def write(self, *args, **kwargs):
        return method(self.writer, *args, **kwargs)

    return write


def _permission(name: str):
    """A change of :class:`Store`'s permissions or people: the writer's ``permissions.name``."""
    method = getattr(Permissions, name)

    @functools.wraps(method)
    def change(self, *args, **kwargs):
        return method(self.writer.permissions, *args, **kwargs)

    return change


class Store:
    """A mempp store: a directory of immutable segments and version files.

    >>> import mempp, tempfile
    >>> with mempp.Store.open(tempfile.mkdtemp() + "/org", embedder=mempp.HashEmbedder()) as s:
    ...     ids = s.add([{"id": "a", "text": "SLA is 99.9%", "author": "Ann Lee", "date": "2023-01-05"}])
    ...     s.query("what is the SLA?", k=1)[0].key
    'a'
    """

    def __init__(
        self,
        path: Path,
        snapshot: Snapshot,
        embedder: Embedder | str | None,
        read_only: bool,
        analyzer: Analyzer,
        index: IndexConfig,
        resident: bool = True,
        merge: str = "background",
        *,
        recovered: str | None = None,
        on_corrupt: str = "raise",
        lock_timeout: float | None = None,
        pinned_at: bool = False,
    ):
        """Use :meth:`Store.open`."""
        self.path = path
        meta = snapshot.meta
        self.index = IndexConfig.from_json(meta["index"]) if meta.get("index") else index
        # A shipped model named by a string is loaded on first use, like the store's own.
        want = model_spec(embedder).describe() if isinstance(embedder, str) else describe(embedder) if embedder is not None else None
        self.read_only = read_only
        self._analyzer = snapshot.analyzer or analyzer
        self._closed = False
        self._recovered = recovered  # opened at the newest whole version: no writes until repaired
        self._on_corrupt = on_corrupt
        self._pinned = pinned_at  # opened at a version / as_known_at: refresh() keeps it there
        self._resident = resident  # copy the int8 vectors off the file mapping on the first query
        self.residency = Residency()
        self._resident_seen: Snapshot | None = None  # the last snapshot offered to the residency
        self._swap = threading.Lock()  # one snapshot swap at a time (refresh, a commit's publication)
        info = meta.get("embedder")
        if want is not None and info is not None and not same_model(info, want):
            raise EmbedderError(f"{path}: store was built with {model_label(info)}; got {model_label(want)}")
        self._embedder_info = info or want or dict(DEFAULT_EMBEDDER)
        self._embedder = _LazyEmbedder(path, self._embedder_info, None if isinstance(embedder, str) else embedder)
        self._docs = DocIndex()  # key -> doc ids and fingerprints, shared by every searcher and the writer
        self._searcher = self._searcher_of(snapshot)
        self.writer = Writer(
            self, self._adopt, self._docs, embedder_info=self._embedder_info, analyzer=self._analyzer, index=self.index,
            read_only=read_only, recovered=recovered, lock_timeout=lock_timeout, on_corrupt=on_corrupt, merge=merge,
        )

    def _searcher_of(self, snap: Snapshot) -> Searcher:
        # No reference back to this Store (its searchers, writer and threads hold it weakly): a
        # Store dropped without close() frees its mapped files at once, not at the next GC cycle.
        return Searcher(
            self.path, snap, embedder=self._embedder.get, embedder_info=self._embedder_info, analyzer=self._analyzer,
            index=self.index, docs=self._docs, on_query=_weakly(self._warm), access=_newest_access(self),
        )

    def _adopt(self, snap: Snapshot) -> None:
        """Make ``snap`` (newer than the current version) the current one."""
        with self._swap:
            if snap.version > self._searcher.version or self._searcher.snapshot.state is None:
                self._searcher = self._searcher_of(snap)

    # --- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        embedder: Embedder | str | None = None,
        read_only: bool = False,
        create: bool = True,
        version: int | None = None,
        as_known_at: Any = None,
        analyzer: Analyzer | None = None,
        index: IndexConfig | None = None,
        on_corrupt: str = "raise",
        resident: bool = True,
        merge: str = "background",
        lock_timeout: float | None = None,
    ) -> "Store":
        """Open the store at ``path``, creating the directory if it is missing (unless ``create=False``).

        ``embedder``: an embedder object, or the name of a model that ships with mempp
        (``"all-MiniLM-L6-v2"``/``"minilm"``, ``"bge-small-en-v1.5"``/``"bge-small"``; see
        ``mempp.embedder.MODELS``). It chooses the model of a new store, which the manifest
        records (model id, dimension, window, model file sha256); an existing store keeps its
        model, and naming another is an :class:`EmbedderError`. None: the model the store was
        built with (``embedder.DEFAULT_MODEL`` for a new store). A shipped model loads on first use.
        ``version``: open that committed version, read-only.
        ``as_known_at``: open, read-only, the newest version committed at or before that instant
        (transaction time; an ISO string, ``datetime`` or ``date``, with the library's one date
        policy: no time zone means UTC, an offset is converted, a date alone means the end of
        that UTC day). Together with ``query(as_of=...)`` (event time) this answers "what did
        the record say on X, as the store knew it on Y". Either gives a ``StoreError`` when no
        such committed version exists. Every version ever committed can be opened, whatever
        merges happened since (``storage/snapshot.py``).
        Every file is checked against the checksum its manifest records (XXH3-64; sha256 in
        stores of format 1) before it is read.
        ``on_corrupt``: ``"raise"`` (default) raises :class:`CorruptStoreError` naming a damaged
        segment; ``"skip"`` leaves it out (its documents are never returned), keeps the rest
        readable and lists it in ``stats()["skipped"]``. Damaged postings are rebuilt from the
        segment text either way (``stats()["rebuilt"]``). A damaged ``CURRENT``, manifest or
        term dictionary always raises; there is no silent fall back to an older version.
        ``resident``: on the first query (or :meth:`make_resident`), a background thread copies
        the int8 vectors out of the file mapping into memory on huge pages, where the exact vector
        scan runs up to twice as fast (storage/resident.py); False keeps every byte mapped.
        ``merge``: ``"background"`` (default) merges segments in a thread of the writer after
        commits, as the merge policy asks (``storage/merge.py``); ``"manual"`` only when
        :meth:`merge` is called (a service that schedules it itself).
        ``lock_timeout``: the first write takes the store's writer lock; while another writer
        holds it, wait up to this many seconds (default: refuse at once, ``StoreLockedError``).
        An existing directory must be empty or a mempp store: anything else is refused
        (``StoreError`` naming what it holds), so a store is never written beside other files.
        """
        if lock_timeout is not None and (
            isinstance(lock_timeout, bool) or not isinstance(lock_timeout, (int, float)) or not lock_timeout >= 0
        ):
            raise ValidationError(f"expected a number of seconds >= 0 or None, got {lock_timeout!r}", field="lock_timeout")
        if not isinstance(resident, bool):
            raise ValidationError(f"expected True or False, got {resident!r}", field="resident")
        if merge not in MERGE_MODES:  # checked before anything is created
            raise ValidationError(f"expected one of {list(MERGE_MODES)}, got {merge!r}", field="merge")
        if isinstance(embedder, str):
            model_spec(embedder)  # an unknown name fails before anything is created
        path = check_store_path(path)
        if not path.exists():
            if read_only or version is not None or as_known_at is not None or not create:
                raise StoreError(f"{path}: no such store")
            path.mkdir(parents=True)
            fsync_dir(path.parent)  # the store's own directory entry survives a power loss
        elif not path.is_dir():
            raise StoreError(f"{path}: not a directory")
        else:
            check_is_store(path)
        check_layout(path)
        pinned_at = version is not None or as_known_at is not None
        read_only = read_only or pinned_at
        lost_ok = [False]  # with on_corrupt="skip": a missing segment (no writer's doing) is skipped too

        def attempt(tried: int | None) -> tuple[Snapshot, str | None]:
            state, recovered = _current_state(path, tried)
            cut = None
            if pinned_at:
                state, cut = pinned(path, state, version, as_known_at)
            check_manifest_names(path, state)
            if state is not None and analyzer is not None and Analyzer.from_json(state.meta["analyzer"]) != analyzer:
                raise StoreError(f"{path}: store was indexed with analyzer {state.meta['analyzer']}, not {analyzer.to_json()}")
            if state is not None and index is not None and IndexConfig.from_json(state.meta.get("index")) != index:
                raise StoreError(f"{path}: store was indexed with {state.meta.get('index')}, not {index.to_json()}")
            return Snapshot(path, state, on_corrupt=on_corrupt, cut=cut, lost_ok=lost_ok[0]), recovered

        def skip_lost() -> bool:
            if on_corrupt == "skip" and not lost_ok[0]:
                lost_ok[0] = True
                return True
            return False

        snapshot, recovered = _retrying(path, attempt, skip_lost)
        if recovered is not None:
            warnings.warn(recovered, StoreRecoveredWarning, stacklevel=2)
        return cls(
            path, snapshot, embedder, read_only, analyzer or Analyzer(), index or IndexConfig(), resident, merge,
            recovered=recovered, on_corrupt=on_corrupt, lock_timeout=lock_timeout, pinned_at=pinned_at,
        )

    def refresh(self) -> int:
        """Move to the newest committed version (others' commits become visible); returns it.

        A store opened at a ``version`` or ``as_known_at`` stays there. The version never goes
        backwards. Safe to call while other threads query: each query runs on the snapshot it
        started with.
        """
        self.check_open()
        if self._pinned:
            return self._searcher.version
        check_layout(self.path)

        def attempt(tried: int | None) -> int:
            current = self._searcher
            pointer = read_pointer(self.path)
            if pointer is None or pointer[0] <= current.version:
                return current.version
            state = read_state(self.path)
            check_manifest_names(self.path, state)
            if state is not None and state.version > current.version:
                self._adopt(Snapshot(self.path, state, previous=current.snapshot, on_corrupt=self._on_corrupt))
            return self._searcher.version

        return _retrying(self.path, attempt)

    def verify(self) -> dict:
        """Check every file of every retained version against its manifest (``mempp verify``):
        ``{"clean", "version", "files", "problems": [{"file", "problem", "kind"}], "newest_whole"}``.
        Reads the files on disk now, whatever version this Store holds (storage/recovery.py)."""
        self.check_open()
        return verify_store(self.path)

    def close(self) -> None:
        if self._closed:
            return
        self.writer.close()
        self.residency.close()
        self._closed = True

    def make_resident(self, wait: bool = True, timeout: float | None = None) -> bool:
        """Copy the current version's int8 vectors into memory on huge pages now (see ``open``'s
        ``resident``), rather than in the background after the first query. ``wait``: block until
        done or ``timeout`` seconds; returns whether no copy is left under way."""
        self.check_open()
        self.residency.offer(self._searcher.snapshot.segments)
        return self.residency.wait(timeout if wait else 0)

    def _warm(self, snap: Snapshot) -> None:
        """On a query: offer a snapshot's segments to the background copier, once per snapshot."""
        if self._resident and self._resident_seen is not snap:
            self._resident_seen = snap
            self.residency.offer(snap.segments)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise ``StoreError`` when this Store is closed."""
        if self._closed:
            raise StoreError(f"{self.path}: store is closed")

    # --- properties ------------------------------------------------------------------------------
    def searcher(self) -> Searcher:
        """The :class:`~mempp.Searcher` of the current version: every read of this Store is its.
        It stays at that version whatever is committed later (hold it to read one version
        throughout); call again after a write or :meth:`refresh` for the newer one."""
        self.check_open()
        return self._searcher

    @property
    def version(self) -> int:
        return self._searcher.version

    @property
    def dim(self) -> int:
        return self._searcher.dim

    @property
    def embedder_info(self) -> dict:
        """The manifest's record of the store's embedder (model id, dimension, window, sha256)."""
        return self._searcher.embedder_info

    @property
    def embedder_loaded(self) -> bool:
        """Whether the embedder is in memory (a named model loads on first use: the first query or add that embeds)."""
        return self._embedder.loaded

    @property
    def embedder(self) -> Embedder:
        """The embedder, loaded on first use."""
        return self._embedder.get()

    def __len__(self) -> int:
        return len(self._searcher)

    # --- reads: the current searcher's --------------------------------------------------------------
    query = _read("query")
    search = _read("query")
    explain = _read("explain")
    query_batch = _read("query_batch")
    query_stream = _read("query_stream")
    get = _read("get")
    history = _read("history")
    authors = _read("authors")
    people = _read("people")
    documents = _read("documents")
    replacements = _read("replacements")
    export = _read("export")
    versions = _read("versions")

    # --- writes: the writer's -----------------------------------------------------------------------
    add = _write("add")
    supersede = _write("supersede")
    supersede_many = _write("supersede_many")
    build_ann = _write("build_ann")
    merge = _write("merge")
    wait_merges = _write("wait_merges")

    # --- who may read what, and who is who: the writer's permissions (docs/DESIGN.md §8, §9) ----------
    set_readers = _permission("set_readers")
    add_members = _permission("add_members")
    remove_members = _permission("remove_members")
    add_people = _permission("add_people")

    def erase(self, ref: Any, *, reason: str) -> dict[str, Any]:
        """Destroy a document: every version of a key (or one doc id; or a list of them). Its text,
        embedding, terms and every derived copy leave every file of the store, and every version
        reads a blank row that no read returns; the access log keeps the doc id, key, date and
        ``reason`` (:meth:`erasures`). One commit, crash-safe (docs/DESIGN.md §8.5). Returns
        ``{"erased": doc ids, "version", "files_removed", "seconds"}``."""
        return self.writer.erasure.erase(ref, reason)

    def erase_before(self, date: Any, *, reason: str, channel: str | None = None) -> dict[str, Any]:
        """:meth:`erase` every document dated before ``date`` (of ``channel`` only, when given): a retention rule."""
        return self.writer.erasure.erase_before(date, reason, channel)

    def erasures(self) -> list[dict[str, Any]]:
        """What was erased, oldest first: ``{"doc_id", "key", "reason", "erased_at"}`` (no content)."""
        return erasures(self._searcher.access())

    def stats(self, *, principal: Any = None) -> dict[str, Any]:
        """Counts and sizes of the version this Store holds (one snapshot, as a query reads).

        ``bytes_on_disk`` is the size of every file in the store's directory now, whatever the
        version: a file another process removes while it is counted (a writer's temporary
        file, a segment merged away) counts as gone, never as an error.
        """
        self.check_open()
        base = self._searcher.stats(principal=principal)
        merges = self.writer.compaction
        extra = {
            "recovered": self._recovered,
            "merges": merges.done,
            "merge_error": None if merges.error is None else str(merges.error),
            "bytes_on_disk": _bytes_on_disk(self.path),
            "resident_errors": list(self.residency.errors),
        }
        order = [
            "path", "version", "documents", "active", "superseded", "unreadable", "erased", "recovered", "supersessions", "undated",
            "first_date", "last_date", "authors", "threads", "terms", "segments", "format", "merges", "merge_error", "embedder",
            "analyzer", "index", "window_vectors", "bytes_on_disk", "skipped", "rebuilt", "int8_bytes", "resident_bytes",
            "resident_errors",
        ]
        both = {**base, **extra}
        return {key: both[key] for key in order}


class _LazyEmbedder:
    """A store's embedder, loaded on first use, shared by the store and its searchers."""

    def __init__(self, path: Path, info: dict, given: Embedder | None) -> None:
        self._path, self._info, self._embedder = path, info, given
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._embedder is not None

    def get(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = embedder_for(self._info)
                    if self._embedder is None:
                        raise EmbedderError(
                            f"{self._path}: store was built with embeddings from {self._info['model_id']!r}; "
                            "pass that embedder to Store.open, or pass embedding= / embeddings= yourself"
                        )
        return self._embedder


def _newest_access(store: "Store") -> Callable[[], Access]:
    """The permissions of ``store``'s newest version, held weakly (a searcher outliving its store
    keeps the permissions it last saw)."""
    ref = weakref.ref(store)
    last: list[Access] = []

    def newest() -> Access:
        s = ref()
        if s is not None:
            last[:] = [Access.of(s.path, s._searcher.snapshot.state)]
        return last[0] if last else Access()

    return newest


def _weakly(method: Callable) -> Callable:
    """``method`` called through a weak reference to its object (a no-op once the object is gone)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        bound = ref()
        if bound is not None:
            bound(*args)

    return call


def _current_state(path: Path, tried: int | None):
    """(state, None) of the version ``CURRENT`` names; or, when ``CURRENT`` or a version file of
    its chain is lost or damaged, (the newest whole version on disk, why: the warning to give).
    A directory that holds no ``CURRENT`` and nothing whole, only files of version 1 (a first
    commit interrupted before its version file was whole), reads as a store with no commit; its
    writer sets the leftovers aside. A ``Vanished`` file while
    ``CURRENT`` moves is a writer's doing: raised for the caller to retry."""
    try:
        state = read_state(path)
        if state is not None or not holds_data(path):
            return state, None
        problem = CorruptStoreError(str(path / "CURRENT"), "missing, while the store holds version files or segments")
    except CorruptStoreError as exc:
        if isinstance(exc, Vanished) and _moved(path, tried):
            raise
        problem = exc
    found, _ = newest_whole(path)
    if found is None:
        if not (path / "CURRENT").exists() and all(file_number(n) <= 1 for n in strays(path, None)):
            return None, None  # only a first commit's leftovers (every name carries version 1 at most): nothing was ever whole
        raise problem
    return found, (
        f"{problem}; reading version {found.version}, the newest whole version on disk; "
        f"writes are refused until `mempp repair {path}` re-points the store"
    )


def _bytes_on_disk(root: Path) -> int:
    """Bytes of the regular files under ``root`` (symlinks not followed), read while writers of
    other processes may create and remove files there: an entry gone before it is measured
    is skipped."""
    total = 0
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total


def _pointed_version(path: Path) -> int | None:
    """The version ``CURRENT`` names now (None: no commit yet, or a pointer that does not read)."""
    try:
        pointer = read_pointer(path)
    except CorruptStoreError:
        return None
    return None if pointer is None else pointer[0]


def _retrying(path: Path, attempt: Callable[[int | None], Any], fallback: Callable[[], bool] | None = None) -> Any:
    """``attempt(tried)`` (``tried``: the version ``CURRENT`` named before it read), again while a
    file it found gone was a writer's doing (``CURRENT`` moved meanwhile: the file was merged
    away), for at most ``OPEN_RETRY_SECONDS``; or when ``fallback()`` says to try once more."""
    deadline = time.monotonic() + OPEN_RETRY_SECONDS
    while True:
        tried = _pointed_version(path)  # CURRENT before the read: a file gone is a loss unless CURRENT moved
        try:
            return attempt(tried)
        except Vanished:
            if _moved(path, tried) and time.monotonic() <= deadline:
                continue
            if fallback is not None and fallback():
                continue
            raise


def _moved(path: Path, tried: int | None) -> bool:
    """Whether ``CURRENT`` now names another version than ``tried``, the one the failed read
    started from (a file found missing was then removed by a writer that moved on, not lost). A
    missing file of the version ``CURRENT`` still names is lost: that raises at once."""
    now = _pointed_version(path)
    return now is not None and now != tried


def verify(path: str | os.PathLike) -> dict:
    """Check every file of every retained version of the store at ``path`` against its manifest
    (``mempp verify``); see :meth:`Store.verify`. Opens nothing, takes no lock."""
    path = check_store_path(path)
    if not path.is_dir():
        raise StoreError(f"{path}: no such store")
    return verify_store(path)


def repair(path: str | os.PathLike, *, rollback: bool = False, lock_timeout: float | None = None) -> dict:
    """Make the store at ``path`` whole again (``mempp repair``; storage/recovery.py): entries
    that are not of their kind set aside, ``CURRENT`` re-pointed to the newest whole version
    after a lost or damaged ``CURRENT`` or version file, damaged or missing derived files made
    again as a new version. Nothing is deleted: what is set aside goes to ``lost+found/``.
    ``rollback``: when a segment of the current version is damaged, go back to the newest whole
    version before it. Takes the writer's lock (``lock_timeout`` as :meth:`Store.open`'s).
    Returns the actions and the verification after them (:func:`verify`'s keys)."""
    path = check_store_path(path)
    if not path.is_dir():
        raise StoreError(f"{path}: no such store")
    check_is_store(path)
    return repair_store(path, rollback=rollback, lock_timeout=lock_timeout)
