"""``mempp.Store``: the one entry object. Open a directory, add documents, ask questions as of a date.

The class is assembled from three parts, each in its own module: the write path
(``writes.py``: add, supersede, ANN indexes, merging), the read path (``reads.py``: query,
bulk scoring) and time travel (``versions.py``: opening an earlier version, the list of
versions). This module opens and closes a store and reads single records.

Owns :class:`Store` itself: opening (the directory's layout checked, the writer's lock, the
embedder and config checked against the manifest), the pinned snapshot and ``refresh``,
residency and merges waited for, single-record reads (``get``, ``history``, ``stats``) and
closing. The CLI and the benchmarks sit on top of it.

Never imports: cli, demo, mempp.bench, onnxruntime, tokenizers.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from mempp.storage import (
    FOREVER,
    NAT,
    Analyzer,
    CorruptStoreError,
    Snapshot,
    StoreError,
    Vanished,
    WriterLock,
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
from .dates import from_us
from .embedder import DEFAULT_MODEL, Embedder, describe, embedder_for, model_label, model_spec, same_model
from .errors import DocumentNotFound, EmbedderError, ValidationError
from .ingest import FingerprintIndex
from .planner import NameMatcher
from .reads import ReadPath
from .types import Record
from .versions import VersionsMixin, pinned
from .merging import BackgroundMerges, MergePath
from .supersession import SupersedePath
from .writes import WritePath

# The manifest record of a new store opened without an embedder (embedder.DEFAULT_MODEL).
DEFAULT_EMBEDDER = model_spec(DEFAULT_MODEL).describe()
OPEN_RETRY_SECONDS = 60.0  # a reader that finds a file gone re-reads CURRENT while it keeps moving (a
# writer merged the file away), for at most this long: each retry sees a newer version, so it only
# repeats while a writer commits and merges faster than this reader can map one version
MERGE_MODES = ("background", "manual")


class Store(WritePath, SupersedePath, MergePath, ReadPath, VersionsMixin):
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
    ):
        self.path = path
        meta = snapshot.meta
        self.index = IndexConfig.from_json(meta["index"]) if meta.get("index") else index
        self._snap = snapshot
        # A shipped model named by a string is loaded on first use, like the store's own.
        want = model_spec(embedder).describe() if isinstance(embedder, str) else describe(embedder) if embedder is not None else None
        self._embedder = None if isinstance(embedder, str) else embedder
        self.read_only = read_only
        self._analyzer = snapshot.analyzer or analyzer
        self._lock = WriterLock(path)
        self._closed = False
        self._broken: str | None = None  # set when an fsync failed: no more writes until reopened
        self._recovered: str | None = None  # opened at the newest whole version: no writes until repaired
        self._stale = False  # a write failed: the next one reads the newest version from disk first
        self._lock_timeout: float | None = None  # seconds the first write waits for another writer's lock
        self._on_corrupt = "raise"
        self._matcher: tuple[int, NameMatcher] | None = None
        self._pinned = False  # opened at a version / as_known_at: refresh() keeps it there
        self._resident = resident  # copy the int8 vectors off the file mapping on the first query
        self._residency = Residency()
        self._resident_seen: Snapshot | None = None  # the last snapshot offered to the residency
        # Guards the snapshot swap and the lazily extended key indexes below, so that several
        # threads may query, get and refresh one Store at once.
        self._state = threading.RLock()
        self._write_mutex = threading.Lock()  # one writing thread at a time (the group commit's leader)
        self._queue_lock = threading.Lock()
        self._queue: list = []  # add calls waiting for the next commit
        self._merge_lock = threading.Lock()  # one merge at a time
        self._merge_mode = merge
        self._merges = BackgroundMerges(self)
        # Writer-side indexes, extended lazily up to _indexed docs: key -> doc ids; fingerprints.
        self._keys: dict[str, list[int]] = {}
        self._fps = FingerprintIndex()
        self._indexed = 0
        info = meta.get("embedder")
        if want is not None and info is not None and not same_model(info, want):
            raise EmbedderError(f"{path}: store was built with {model_label(info)}; got {model_label(want)}")
        self._embedder_info = info or want or dict(DEFAULT_EMBEDDER)

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
        if merge not in MERGE_MODES:
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
        recovered: str | None = None
        lost_ok = False  # with on_corrupt="skip": a missing segment (no writer's doing) is skipped too
        deadline = time.monotonic() + OPEN_RETRY_SECONDS
        while True:
            tried = _pointed_version(path)  # CURRENT before the read: a file gone is a loss unless CURRENT moved
            try:
                state, recovered = _current_state(path, tried)
                cut = None
                if pinned_at:
                    state, cut = pinned(path, state, version, as_known_at)
                    read_only = True
                check_manifest_names(path, state)
                if state is not None and analyzer is not None and Analyzer.from_json(state.meta["analyzer"]) != analyzer:
                    raise StoreError(f"{path}: store was indexed with analyzer {state.meta['analyzer']}, not {analyzer.to_json()}")
                if state is not None and index is not None and IndexConfig.from_json(state.meta.get("index")) != index:
                    raise StoreError(f"{path}: store was indexed with {state.meta.get('index')}, not {index.to_json()}")
                snapshot = Snapshot(path, state, on_corrupt=on_corrupt, cut=cut, lost_ok=lost_ok)
                break
            except Vanished:
                if _moved(path, tried) and time.monotonic() <= deadline:
                    continue
                if on_corrupt == "skip" and not lost_ok:
                    lost_ok = True
                    continue
                raise
        if recovered is not None:
            warnings.warn(recovered, StoreRecoveredWarning, stacklevel=2)
        store = cls(path, snapshot, embedder, read_only, analyzer or Analyzer(), index or IndexConfig(), resident, merge)
        store._on_corrupt = on_corrupt
        store._lock_timeout = lock_timeout
        store._pinned = pinned_at
        store._recovered = recovered
        return store

    def refresh(self) -> int:
        """Move to the newest committed version (others' commits become visible); returns it.

        A store opened at a ``version`` or ``as_known_at`` stays there. The version never goes
        backwards. Safe to call while other threads query: each query runs on the snapshot it
        started with.
        """
        self._check_open()
        if self._pinned:
            return self._snap.version
        check_layout(self.path)
        deadline = time.monotonic() + OPEN_RETRY_SECONDS
        while True:
            pointer = read_pointer(self.path)
            if pointer is None or pointer[0] <= self._snap.version:
                return self._snap.version
            try:
                state = read_state(self.path)
                check_manifest_names(self.path, state)
                with self._state:
                    if state is not None and state.version > self._snap.version:
                        self._snap = Snapshot(self.path, state, previous=self._snap, on_corrupt=self._on_corrupt)
                    return self._snap.version
            except Vanished:
                if time.monotonic() > deadline or not _moved(self.path, pointer[0]):
                    raise

    def verify(self) -> dict:
        """Check every file of every retained version against its manifest (``mempp verify``):
        ``{"clean", "version", "files", "problems": [{"file", "problem", "kind"}], "newest_whole"}``.
        Reads the files on disk now, whatever version this Store holds (storage/recovery.py)."""
        self._check_open()
        return verify_store(self.path)

    def close(self) -> None:
        if self._closed:
            return
        self._close_writes()
        self._residency.close()
        self._lock.release()
        self._closed = True

    def make_resident(self, wait: bool = True, timeout: float | None = None) -> bool:
        """Copy the current version's int8 vectors into memory on huge pages now (see ``open``'s
        ``resident``), rather than in the background after the first query. ``wait``: block until
        done or ``timeout`` seconds; returns whether no copy is left under way."""
        self._check_open()
        self._residency.offer(self._snap.segments)
        return self._residency.wait(timeout if wait else 0)

    def wait_merges(self, timeout: float | None = None) -> bool:
        """Wait until the background merges are done (none under way or due); True when so."""
        return self._merges.wait(timeout)

    def _warm(self, snap: Snapshot) -> None:
        """On a query: offer a snapshot's segments to the background copier, once per snapshot."""
        if self._resident and self._resident_seen is not snap:
            self._resident_seen = snap
            self._residency.offer(snap.segments)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: store is closed")

    # --- properties ------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._snap.version

    @property
    def dim(self) -> int:
        return int(self._embedder_info["dim"])

    @property
    def embedder(self) -> Embedder:
        """The embedder, loaded on first use."""
        if self._embedder is None:
            self._embedder = embedder_for(self._embedder_info)
            if self._embedder is None:
                raise EmbedderError(
                    f"{self.path}: store was built with embeddings from {self._embedder_info['model_id']!r}; "
                    "pass that embedder to Store.open, or pass embedding= / embeddings= yourself"
                )
        return self._embedder

    def __len__(self) -> int:
        return self._snap.n_docs

    # --- reading single records -------------------------------------------------------------------
    def get(self, ref: str | int) -> Record:
        """The stored document: by key (its active version, else its newest) or by doc id."""
        self._check_open()
        with self._state:  # one snapshot for the lookup and the record
            return self._record(self._resolve(ref, "id"))

    def history(self, key: str) -> list[Record]:
        """Every version stored under ``key``, oldest first; ``DocumentNotFound`` (as :meth:`get`) when there is none."""
        self._check_open()
        if not isinstance(key, str):
            raise ValidationError(f"expected a key (str), got {type(key).__name__}", field="key")
        with self._state:
            self._index_keys()
            docs = self._keys.get(key)
            if not docs:
                raise DocumentNotFound(f"no document with id {key!r}")
            return [self._record(d) for d in docs]

    def authors(self) -> list[str]:
        """Every author name stored in the version this Store holds, in the order first seen."""
        self._check_open()
        return list(self._snap.authors.names)

    def documents(self, *, as_of: Any = None, authors: Any = None) -> list[Record]:
        """The documents of this version in doc id order: all of them (superseded ones too, each
        with its ``valid_until``), or with ``as_of`` those valid at that date (undated ones
        excluded, as a query's candidates are); ``authors``: only theirs (case-insensitive)."""
        from .candidates import author_names
        from .reads import _date_arg, _names

        self._check_open()
        snap = self._snap
        keep = np.ones(snap.n_docs, dtype=bool)
        theta = _date_arg(as_of, "as_of", end_of_day=True)
        if theta is not None:
            keep &= (snap.dates != NAT) & (snap.dates <= theta) & (snap.valid_until > theta)
        names = _names(authors, "authors")
        if names is not None:
            codes = [snap.authors.index[n] for n in author_names(snap.authors, names)]
            keep &= np.isin(snap.authors.codes, np.asarray(codes, dtype=np.int32))
        keep &= snap.valid_until != NAT  # documents of a skipped (unreadable) segment
        docs = np.flatnonzero(keep).tolist()
        return [self._record(d, snap=snap, row=r) for d, r in zip(docs, snap.rows(docs))]

    def replacements(self, ref: str | int) -> list[dict[str, Any]]:
        """The supersessions of one document (by key: its active version, else its newest; or
        a doc id), earliest effective first: ``{"doc_id", "key", "effective", "recorded_at"}``
        of each document that replaces it, from ``effective`` on."""
        self._check_open()
        with self._state:
            doc = self._resolve(ref, "id")
            snap = self._snap
            old, new, eff, rec = snap.sup_old, snap.sup_new, snap.sup_effective, snap.sup_recorded
            idx = np.flatnonzero(np.asarray(old) == doc) if len(old) else []
            out = [
                {
                    "doc_id": int(new[i]),
                    "key": snap.row(int(new[i]))["key"],
                    "effective": from_us(int(eff[i])).isoformat(),
                    "recorded_at": from_us(int(rec[i])).isoformat(),
                }
                for i in idx
            ]
        return sorted(out, key=lambda e: (e["effective"], e["doc_id"]))

    def export(self) -> "Any":
        """Every document of this version as one Arrow table that ``add`` rebuilds the same store
        from (``mempp.export``; the columns: docs/API.md, *Export*)."""
        from .export import export_table

        self._check_open()
        return export_table(self)

    def _record(self, doc: int, cls=Record, snap: Snapshot | None = None, row: dict | None = None, **extra: Any) -> Any:
        snap = snap or self._snap
        r = row if row is not None else snap.row(doc)
        vu = int(snap.valid_until[doc])
        return cls(
            doc_id=doc,
            key=r["key"],
            text=r["text"],
            author=r["author"],
            date=r["date"],
            ingested_at=r["ingested_at"],
            thread=r["thread"],
            channel=r["channel"],
            source=r["source"],
            meta=json.loads(r["meta"]) if r["meta"] else {},
            valid_until=None if vu == FOREVER else from_us(vu),
            **extra,
        )

    def stats(self) -> dict[str, Any]:
        """Counts and sizes of the version this Store holds (one snapshot, as a query reads).

        ``bytes_on_disk`` is the size of every file in the store's directory now, whatever the
        version: a file another process removes while it is counted (a writer's temporary
        file, a segment merged away) counts as gone, never as an error.
        """
        self._check_open()
        snap = self._snap
        size = _bytes_on_disk(self.path)
        valid_now = int(np.count_nonzero(snap.valid_until == FOREVER)) if snap.n_docs else 0
        unreadable = int(np.count_nonzero(snap.valid_until == NAT)) if snap.n_docs else 0  # in skipped segments
        dated = snap.dates[snap.dates != NAT]
        return {
            "path": str(self.path),
            "version": snap.version,
            "documents": snap.n_docs - unreadable,
            "active": valid_now,
            "superseded": snap.n_docs - unreadable - valid_now,
            "unreadable": unreadable,
            "recovered": self._recovered,
            "supersessions": int(len(snap.sup_old)),
            "undated": int(snap.n_docs - len(dated)),
            "first_date": from_us(int(dated.min())).isoformat() if len(dated) else None,
            "last_date": from_us(int(dated.max())).isoformat() if len(dated) else None,
            "authors": len(snap.authors.names),
            "threads": len(snap.threads.names),
            "terms": snap.n_terms,
            "segments": len(snap.segments),
            "format": snap.state.format if snap.state is not None else None,
            "merges": self._merges.done,
            "merge_error": None if self._merges.error is None else str(self._merges.error),
            "embedder": dict(self._embedder_info),
            "analyzer": self._analyzer.to_json(),
            "index": self.index.to_json(),
            "window_vectors": int(sum(len(e.window_rows) for e in snap.segments if e.window_rows is not None)),
            "bytes_on_disk": size,
            "skipped": list(snap.skipped),
            "rebuilt": list(snap.rebuilt),
            "int8_bytes": int(sum(e.q8.nbytes for e in snap.segments if e.q8 is not None)),
            "resident_bytes": int(sum(e.q8.nbytes for e in snap.segments if e.q8_state == "resident")),
            "resident_errors": list(self._residency.errors),
        }



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
