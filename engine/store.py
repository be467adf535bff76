"""``mempp.Store``: the one entry object. Open a directory, add documents, ask questions as of a date."""

from __future__ import annotations

import functools
import gc
import itertools
import json
import math
import os
import time
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mempp.storage.confine import check_layout, check_manifest_names, check_store_path
from mempp.storage import (
    FOREVER,
    NAT,
    CorruptStoreError,
    Analyzer,
    CommitBatch,
    Snapshot,
    StoreError,
    StoreWriteError,
    WriterLock,
    clean_strays,
    commit,
    new_manifest,
    now_us,
    read_current,
    read_manifest,
)
from mempp.storage.analyzer import joined_ascii, tokenize
from mempp.storage.fsutil import fsync_dir
from mempp.storage.resident import Residency

from mempp.kernels import quantize_rows
from mempp.storage.ann import DEFAULT_EF_CONSTRUCTION, DEFAULT_M
from mempp.storage.ann import build as ann_build
from mempp.storage.ann import to_bytes as ann_bytes

from .config import DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_DEPTH, DEFAULT_WEIGHTS, IndexConfig
from .dates import from_us, iso, to_us
from .embedder import DEFAULT_MODEL, Embedder, describe, embed_queries, embedder_for, model_label, model_spec, same_model
from .errors import DocumentNotFound, EmbedderError, ValidationError
from .ingest import Deferred, FingerprintIndex, NewRows, Plain, Row, check_vector, prepare_batch, record_fingerprints
from .qdates import question_as_of
from .planner import NameMatcher, QueryOptions, candidate_mask, run, vector_legs
from .types import LEGS, Hit, Hits, Plan, Record

# A question longer than this is refused (field "text") rather than tokenized and embedded.
MAX_QUERY_CHARS = 1_000_000


def _batch_schema():
    import pyarrow as pa

    fields = [
        pa.field("query", pa.int32()),
        pa.field("rank", pa.int32()),
        pa.field("doc_id", pa.uint64()),
        pa.field("key", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("reserved", pa.bool_()),
    ]
    return pa.schema(fields + [pa.field(f"rank_{leg}", pa.int32()) for leg in LEGS])


_BATCH_SCHEMA = _batch_schema()

# The manifest record of a new store opened without an embedder (embedder.DEFAULT_MODEL).
DEFAULT_EMBEDDER = model_spec(DEFAULT_MODEL).describe()


def _one_writer_thread(method):
    """Serialize a write method across the threads sharing one Store (readers are not blocked)."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._write_mutex:
            return method(self, *args, **kwargs)

    return locked


# A batch of at least this many records is checked, fingerprinted, tokenized and normalized in
# threads at once (Store._add); smaller ones take the plain path (threads would not pay).
BIG_BATCH = 2000
MASK_BYTES = 128 << 20  # query_stream: candidate-mask bytes per chunk of queries (one per document and query)
# query_stream's queries per chunk: the int8 scan lays each block of rows out once per chunk and
# a chunk shares one pass over the rows, so larger is faster; but the chunk's masks (one byte per
# document and query) are new memory to fault in on every call. At 100k documents, the first call
# of a fresh process: 256 -> about 920 q/s, 512 -> 970, 1,024 -> 875 (repeated calls: 1,024 best).
DEFAULT_CHUNK = 512

class _CyclicGCPaused:
    """Pause the cyclic garbage collector while a write builds its batch.

    Checking and committing a batch allocates a few container objects per document (rows,
    index entries), which sets off hundreds of collections that walk every live object:
    0.3 to 0.6 s for 50,000 documents, a fifth of the ingest. Reference counting still frees
    everything at once; cycles wait until the write ends. Only the collector's state as
    found is restored, so nested or concurrent pauses leave it enabled as before.
    """

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.was:
            gc.enable()


class Store:
    """A mempp store: a directory of immutable segments and manifests.

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
    ):
        self.path = path
        self.index = IndexConfig.from_json(snapshot.manifest["index"]) if snapshot.manifest.get("index") else index
        self._snap = snapshot
        # A shipped model named by a string is loaded on first use, like the store's own.
        want = model_spec(embedder).describe() if isinstance(embedder, str) else describe(embedder) if embedder is not None else None
        self._embedder = None if isinstance(embedder, str) else embedder
        self.read_only = read_only
        self._analyzer = snapshot.analyzer or analyzer
        self._lock = WriterLock(path)
        self._closed = False
        self._broken: str | None = None  # set when an fsync failed: no more writes until reopened
        self._on_corrupt = "raise"
        self._matcher: tuple[int, NameMatcher] | None = None
        self._pinned = False  # opened at a version / as_known_at: refresh() keeps it there
        self._resident = resident  # copy the int8 vectors off the file mapping on the first query
        self._residency = Residency()
        self._resident_seen: Snapshot | None = None  # the last snapshot offered to the residency
        # Guards the snapshot swap and the lazily extended key indexes below, so that several
        # threads may query, get and refresh one Store at once.
        self._state = threading.RLock()
        self._write_mutex = threading.Lock()
        # Writer-side indexes, extended lazily up to _indexed docs: key -> doc ids; fingerprints.
        self._keys: dict[str, list[int]] = {}
        self._fps = FingerprintIndex()
        self._indexed = 0
        info = snapshot.manifest.get("embedder") if snapshot.manifest else None
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
        such committed version exists.
        Every file is checked against the checksum its manifest records (wide64; mix64 or sha256 in older stores) before it is read.
        ``on_corrupt``: ``"raise"`` (default) raises :class:`CorruptStoreError` naming a damaged
        segment; ``"skip"`` leaves it out (its documents are never returned), keeps the rest
        readable and lists it in ``stats()["skipped"]``. Damaged postings are rebuilt from the
        segment text either way (``stats()["rebuilt"]``). A damaged ``CURRENT``, manifest or
        term dictionary always raises; there is no silent fall back to an older version.
        ``resident``: on the first query (or :meth:`make_resident`), a background thread copies
        the int8 vectors out of the file mapping into memory on huge pages, where the exact vector
        scan runs up to twice as fast (storage/resident.py); False keeps every byte mapped.
        """
        if not isinstance(resident, bool):
            raise ValidationError(f"expected True or False, got {resident!r}", field="resident")
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
        check_layout(path)
        manifest = read_current(path)
        if version is not None or as_known_at is not None:
            manifest = _pinned_manifest(path, manifest, version, as_known_at)
            read_only = True
        check_manifest_names(path, manifest)
        want = analyzer or Analyzer()
        if manifest is not None and analyzer is not None and manifest["analyzer"] != analyzer.to_json():
            raise StoreError(f"{path}: store was indexed with analyzer {manifest['analyzer']}, not {analyzer.to_json()}")
        if manifest is not None and index is not None and IndexConfig.from_json(manifest.get("index")) != index:
            raise StoreError(f"{path}: store was indexed with {manifest.get('index')}, not {index.to_json()}")
        store = cls(path, Snapshot(path, manifest, on_corrupt=on_corrupt), embedder, read_only, want, index or IndexConfig(), resident)
        store._on_corrupt = on_corrupt
        store._pinned = version is not None or as_known_at is not None
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
        manifest = read_current(self.path)
        check_manifest_names(self.path, manifest)
        with self._state:
            if manifest is not None and int(manifest["version"]) > self._snap.version:
                self._snap = Snapshot(self.path, manifest, previous=self._snap, on_corrupt=self._on_corrupt)
            return self._snap.version

    def close(self) -> None:
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

    def versions(self) -> list[dict[str, Any]]:
        """Committed versions: ``{"version", "committed_at", "docs", "supersessions"}``, oldest first."""
        out = []
        for c in self._snap.manifest.get("commits", []):
            out.append(
                {
                    "version": c["version"],
                    "committed_at": c["committed_at"],
                    "docs": c.get("n_docs", 0),
                    "supersessions": "sup" in c["files"],
                }
            )
        return out

    # --- writing ---------------------------------------------------------------------------------
    @_one_writer_thread
    def add(
        self,
        docs: Iterable[dict | Any],
        embeddings: Any = None,
        *,
        batch_size: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> list[int | None]:
        """Add documents as one commit; when it returns the batch is committed and durable.

        Returns one entry per input: the new doc id; the existing doc id for a re-ingest (same
        author and whitespace-normalized text as a stored row that is still active, or that has
        the same key and date); ``None`` for an empty or whitespace-only text.
        A key that matches an active document with other text stores a new version and records
        a supersession of the old one, effective at the new document's date. A ``supersedes``
        field (a key or list of keys) records the same for other documents.
        """
        with _CyclicGCPaused():
            return self._add(docs, embeddings, batch_size, progress)

    def _add(self, docs, embeddings, batch_size, progress) -> list[int | None]:
        self._check_writable()
        docs = list(docs)
        early = _record_texts(docs) if len(docs) >= BIG_BATCH else None
        if early is None:
            rows, supplied = prepare_batch(docs, embeddings, self.dim)
            prepared = [r.text for r in rows if r is not None]
            if len(prepared) < BIG_BATCH:
                return self._add_rows(rows, supplied, batch_size, progress, None)
        # A big batch is tokenized in a thread (the compiled tokenizer releases the GIL) while
        # the rows are checked and matched against the store here; used if every row turns out
        # new. When every record is a dict with a string text, the texts are known before they
        # are checked, so tokenizing starts at once (a record found empty has no tokens and is
        # dropped from the counts after the check; a rejected batch just drops the result).
        pool = ThreadPoolExecutor(max_workers=1)  # the texts' work, in order
        vectors = ThreadPoolExecutor(max_workers=1) if early is not None else pool  # the embeddings'
        try:
            if early is not None:
                # Aside too, while the records are checked here: their tokens, then their
                # fingerprints, and the embeddings' normalization (compiled, releasing the GIL);
                # the texts' bytes are joined once for the first two. The fingerprints are queued
                # last: a batch checked column by column (quicker than the normalization it waits
                # for) computes them on this thread if the pool has not started them.
                ascii = pool.submit(joined_ascii, early)
                all_tokens = pool.submit(lambda: tokenize(early, ascii.result()))
                fps = Deferred(pool, record_fingerprints, docs, early, ascii)
                # A batch of plain records is checked column by column (ingest.check_plain).
                rows, supplied = prepare_batch(docs, embeddings, self.dim, vectors, fps, texts=early)
                if isinstance(rows, Plain):
                    kept = np.zeros(rows.n_records, dtype=np.bool_)
                    kept[rows.records] = True
                    texts = lambda p=rows: p.texts  # noqa: E731
                else:
                    kept = np.fromiter((r is not None for r in rows), dtype=np.bool_, count=len(rows))
                    texts = lambda rs=rows: [r.text for r in rs if r is not None]  # noqa: E731
                tokens = (int(kept.sum()), pool.submit(_tokens_of_rows, all_tokens, kept, texts))
            else:
                tokens = (len(prepared), pool.submit(tokenize, prepared))
            quantized = None
            if supplied is not None and len(supplied) and self.index.vector_copy == "int8":
                # the int8 copy of every record's embedding, used if every record is a new row
                quantized = vectors.submit(_quantized, supplied)
            out = self._add_rows(rows, supplied, batch_size, progress, tokens, quantized)
        except BaseException:
            for p in {pool, vectors}:
                p.shutdown(wait=False, cancel_futures=True)  # an error is not held up by the threads
            raise
        for p in {pool, vectors}:
            p.shutdown()
        return out

    def _add_rows(
        self, rows: list[Row | None] | Plain, supplied, batch_size, progress, tokens, quantized=None
    ) -> list[int | None]:
        """Commit the checked ``rows``, or a :class:`Plain` batch (its fingerprints set)."""
        self._begin_write()
        snap = self._snap
        ingested = now_us()
        if isinstance(rows, Plain):
            fp_list = rows.fingerprints
            if len(set(fp_list)) == len(fp_list) and not self._fps.contains(np.asarray(fp_list, dtype=np.uint64)).any():
                # No row can re-ingest a stored one or another of the batch, and with no ids none
                # supersedes: every row is new, as the loop below would find one row at a time.
                ids: list[int | None] = [None] * rows.n_records
                for rec, doc_id in zip(rows.records, range(snap.n_docs, snap.n_docs + len(rows.records))):
                    ids[rec] = doc_id
                if rows.records:
                    if tokens is not None:
                        tokens = tokens[1]
                    batch = self._build_batch(
                        rows.new_rows(), snap.n_docs, ingested, [], batch_size, progress, supplied, tokens, quantized
                    )
                    self._commit(batch)
                return ids
            rows = rows.rows()  # some may be re-ingests: row by row
        next_id = snap.n_docs
        results: list[int | None] = []
        new_rows: list[Row] = []
        batch_keys: dict[str, int] = {}
        batch_fps: dict[int, list[tuple[int, str | None]]] = {}
        batch_dates: dict[int, int | None] = {}
        retired: set[int] = set()  # superseded by this batch
        sups: list[tuple[int, int, int, int]] = []

        def active(doc: int) -> bool:
            return doc not in retired and (doc >= snap.n_docs or snap.valid_until[doc] == FOREVER)

        fps = np.fromiter((r.fingerprint for r in rows if r is not None), dtype=np.uint64)
        stored_fps = set(fps[self._fps.contains(fps)].tolist())  # the batch's fingerprints some stored row has
        for row in rows:
            if row is None:
                results.append(None)
                continue
            in_batch = batch_fps.get(row.fingerprint)
            if in_batch is not None or row.fingerprint in stored_fps:  # else no row can be the same document
                dup = self._duplicate(row, in_batch or [], batch_dates, active)
                if dup is not None:
                    results.append(dup)
                    continue
            doc_id = next_id
            next_id += 1
            effective = row.date if row.date is not None else ingested
            if row.key is not None:
                prev = batch_keys.get(row.key)
                if prev is None:
                    prev = self._active(row.key)
                if prev is not None and active(prev):
                    sups.append((prev, doc_id, effective, ingested))
                    retired.add(prev)
                batch_keys[row.key] = doc_id
            for target_key in row.supersedes:
                target = batch_keys.get(target_key)
                if target is None:
                    target = self._active(target_key, latest=True)
                if target is None:
                    raise ValidationError(f"no document with id {target_key!r}", field="supersedes", record=row.record, key=row.key)
                if target == doc_id:
                    raise ValidationError("a document cannot supersede itself", field="supersedes", record=row.record, key=row.key)
                sups.append((target, doc_id, effective, ingested))
                retired.add(target)
            batch_fps.setdefault(row.fingerprint, []).append((doc_id, row.key))
            batch_dates[doc_id] = row.date
            new_rows.append(row)
            results.append(doc_id)

        if new_rows or sups:
            if tokens is not None:
                tokens = tokens[1] if tokens[0] == len(new_rows) else None  # else some rows were re-ingests
            batch = self._build_batch(
                NewRows.of(new_rows), snap.n_docs, ingested, sups, batch_size, progress, supplied, tokens, quantized
            )
            self._commit(batch)
        return results

    def supersede(self, old: str | int, new: str | int, effective: Any = None) -> None:
        """Record that ``new`` replaces ``old`` from ``effective`` on (default: ``new``'s date).

        ``old`` and ``new`` are keys (the active version) or doc ids. Nothing is deleted:
        ``old`` stays the answer for questions as of dates before ``effective``.
        """
        self._supersede([(old, new, effective)], many=False)

    def supersede_many(self, events: Iterable[tuple]) -> None:
        """Record many supersessions ``(old, new[, effective])`` as one commit (all or none).

        Each event as in :meth:`supersede`; the first bad one raises a ``ValidationError``
        naming its index (``record``) and nothing is written.
        """
        self._supersede(events, many=True)

    @_one_writer_thread
    def _supersede(self, events: Iterable[tuple], many: bool) -> None:
        self._check_writable()
        self._begin_write()
        recorded = now_us()
        out = []
        for i, event in enumerate(events):
            if not isinstance(event, (tuple, list)) or len(event) not in (2, 3):
                raise ValidationError("expected (old, new) or (old, new, effective)", field="event", record=i)
            old, new, effective = (*event, None) if len(event) == 2 else event
            where = i if many else None
            try:
                old_id = self._resolve(old, "old")
                new_id = self._resolve(new, "new")
            except ValidationError as exc:
                raise ValidationError(exc.message, field=exc.field, record=where) from None
            except DocumentNotFound as exc:
                raise DocumentNotFound(f"event {i}: {exc}" if many else str(exc)) from None
            if old_id == new_id:
                raise ValidationError("a document cannot supersede itself", field="new", record=where)
            if effective is None:
                d = int(self._snap.dates[new_id])
                eff = d if d != NAT else recorded
            else:
                try:
                    eff = to_us(effective)
                except (ValueError, TypeError, OverflowError) as exc:
                    raise ValidationError(f"cannot parse {effective!r} ({exc})", field="effective", record=where) from None
            out.append((old_id, new_id, eff, recorded))
        if out:
            self._commit(CommitBatch(supersessions=out))

    @_one_writer_thread
    def build_ann(
        self, *, min_docs: int = 50_000, m: int = DEFAULT_M, ef_construction: int = DEFAULT_EF_CONSTRUCTION, threads: int = 0
    ) -> dict | None:
        """Index the committed documents no ANN index covers yet (HNSW), if there are ``min_docs``.

        The index is built aside from the embeddings already committed (queries go on, on
        the exact scan), written and checksummed like every store file, and published as a
        new version; readers load it in the background after checking its checksum. Documents
        added later are scanned exactly until the next ``build_ann``. The vector leg then
        chooses, per query and index, between the index (oversampled, post-filtered, rescored
        exactly) and the exact scan, by a cost model (``planner.ann_cost_ms``). Returns
        ``{"first", "n", "seconds"}`` or None when there was too little to index.
        """
        self._check_writable()
        self._begin_write()
        snap = self._snap
        first = max((a.first + a.n for a in snap.ann), default=0)
        n = snap.n_docs - first
        if n <= 0 or n < min_docs:
            return None
        t = time.perf_counter()
        rows = [e.segment.embeddings[max(0, first - e.base) :] for e in snap.segments if e.base + e.segment.n > first]
        index = ann_build(rows, first, m=m, ef_construction=ef_construction, threads=threads)
        data = ann_bytes(index, self.path / f".ann-build.tmp-{os.getpid()}")
        params = {"space": "ip", "M": int(m), "ef_construction": int(ef_construction)}
        self._commit(CommitBatch(ann=(first, n, params, data)))
        return {"first": first, "n": n, "seconds": round(time.perf_counter() - t, 2)}

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        if self._broken is not None:
            raise StoreWriteError(f"{self.path}: writes refused after a failed fsync ({self._broken}); reopen the store", broken=True)
        if self._snap.skipped:
            raise StoreError(f"{self.path}: opened with damaged files skipped ({', '.join(self._snap.skipped)}); read-only")

    def _begin_write(self) -> None:
        """Take the writer lock and build on the newest committed version."""
        first = not self._lock.held
        self._lock.acquire()
        self.refresh()
        if first:  # the new writer removes what a crashed or failed commit left behind
            clean_strays(self.path, self._snap.manifest or None)
        self._index_keys()

    def _commit(self, batch: CommitBatch) -> None:
        previous = self._snap.manifest or new_manifest(
            self.dim, self._embedder_info, self._analyzer.to_json(), self.index.to_json()
        )
        try:
            manifest = commit(self.path, previous, batch)
        except StoreWriteError as exc:
            if exc.broken:
                self._broken = str(exc)
            raise
        written = [(f["name"], f["sha256"]) for f in manifest["commits"][-1]["files"].values()]
        with self._state:
            self._snap = Snapshot(self.path, manifest, previous=self._snap, on_corrupt=self._on_corrupt, written=written)
            self._index_keys()

    def _build_batch(
        self, rows: NewRows, first: int, ingested: int, sups, batch_size: int, progress, supplied: np.ndarray | None = None,
        tokens=None, quantized_all=None,
    ) -> CommitBatch:
        """The commit of ``rows``; ``supplied``: the checked embeddings of the call's records, if given (row ``rows.records[i]``);
        ``tokens``: a future of ``tokenize`` of the rows' texts, if one was started; ``quantized_all``: a
        future of ``_quantized(supplied)``, if one was started."""
        n = len(rows)
        if supplied is not None:
            todo = []
            if n == len(supplied):  # every record is a new row: the matrix is the batch's, as it is
                emb = supplied
            else:
                emb = supplied[np.asarray(rows.records, dtype=np.int64)]
                quantized_all = None
        else:
            emb = np.empty((n, self.dim), dtype=np.float32)
            todo = list(range(n))  # no embeddings supplied: the embedder makes every row's
        win_rows = win_emb = None
        if todo:
            texts = [
                self.index.render(
                    rows.texts[i], author=rows.authors[i], date=(iso(rows.dates[i]) or "")[:10],
                    thread=rows.threads[i], channel=rows.channels[i], source=rows.sources[i],
                )
                for i in todo
            ]
            emb[todo] = self.embedder.embed(texts, batch_size=batch_size, progress=progress)
            if self.index.window_stride and hasattr(self.embedder, "embed_windows"):
                win_emb, owner = self.embedder.embed_windows(texts, self.index.window_stride, batch_size=batch_size)
                win_rows = np.asarray(todo, dtype=np.int64)[owner]
        elif progress is not None and n:
            progress(n)
        term_ids = self._snap.term_ids
        new_terms: dict[str, int] = {}
        base_terms = self._snap.n_terms

        def intern(term: str) -> int:
            tid = term_ids.get(term)
            if tid is None:
                tid = new_terms.get(term)
                if tid is None:
                    tid = new_terms[term] = base_terms + len(new_terms)
            return tid

        if tokens is not None:
            flat, lengths = self._analyzer.intern_tokens(tokens.result(), intern, term_ids)
        else:
            flat, lengths = self._analyzer.term_ids(rows.texts, intern)
        columns = {
            "doc_id": list(range(first, first + n)),
            "key": rows.keys,
            "text": rows.texts,
            "author": rows.authors,
            "date": rows.dates,
            "ingested_at": [ingested] * n,
            "thread": rows.threads,
            "channel": rows.channels,
            "source": rows.sources,
            "meta": rows.metas,
            "fingerprint": rows.fingerprints,
            "length": lengths,
        }
        quantized = None
        if n and self.index.vector_copy == "int8":
            quantized = _quantized(emb) if quantized_all is None else quantized_all.result()
        return CommitBatch(
            columns=columns if n else None,
            embeddings=emb,
            quantized=quantized,
            flat_terms=(flat, lengths),
            new_terms=list(new_terms),
            supersessions=sups,
            window_rows=win_rows,
            window_embeddings=win_emb,
        )

    def _index_keys(self) -> None:
        """Extend the key and fingerprint indexes to every committed document."""
        with self._state:
            self._index_keys_locked()

    def _index_keys_locked(self) -> None:
        snap = self._snap
        if self._indexed >= snap.n_docs:
            return
        for entry in snap.segments:
            seg = entry.segment
            if entry.base + seg.n <= self._indexed:
                continue
            first = max(self._indexed - entry.base, 0)
            keys = seg.table.column("key")
            if keys.null_count < seg.n:  # only rows with a key: their doc ids in order
                has = np.flatnonzero(~keys.is_null().to_numpy()[first:]) + first
                for row, key in zip(has.tolist(), keys.take(has).to_pylist()):
                    self._keys.setdefault(key, []).append(entry.base + row)
            fps = seg.table.column("fingerprint").to_numpy()  # uint64; one chunk: no copy
            self._fps.extend(fps[first:], entry.base + first)
        self._indexed = snap.n_docs

    def _duplicate(self, row: Row, in_batch: list, batch_dates: dict[int, int | None], active) -> int | None:
        """The stored document ``row`` re-ingests, if any.

        Same author and whitespace-normalized text, and either the stored row is active
        (DESIGN §1's rule; a key on both sides must be the same key) or it has the same key
        and the same date (an exact replay of a superseded version, so re-adding a file never
        brings an old decision back). Rows with different keys are different documents.
        """
        docs = self._fps.docs_of(row.fingerprint)
        stored = list(zip(docs.tolist(), self._snap.keys_of(docs).to_pylist())) if len(docs) else []
        for doc, key in reversed(stored + in_batch):
            if key is not None and row.key is not None and key != row.key:
                continue
            if active(doc):
                return doc
            if key is not None and key == row.key:
                when = batch_dates[doc] if doc in batch_dates else int(self._snap.dates[doc])
                if (None if when == NAT else when) == row.date:
                    return doc
        return None

    def _active(self, key: str, latest: bool = False) -> int | None:
        """The active document with ``key`` (or, with ``latest``, the newest version if none is active)."""
        docs = self._keys.get(key)
        if not docs:
            return None
        for d in reversed(docs):
            if self._snap.valid_until[d] == FOREVER:
                return d
        return docs[-1] if latest else None

    def _resolve(self, ref: str | int, field: str) -> int:
        self._index_keys()
        if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
            if 0 <= int(ref) < self._snap.n_docs:
                return int(ref)
            raise DocumentNotFound(f"no document with doc id {ref}")
        if isinstance(ref, str):
            doc = self._active(ref, latest=True)
            if doc is None:
                raise DocumentNotFound(f"no document with id {ref!r}")
            return doc
        raise ValidationError(f"expected a key (str) or doc id (int), got {type(ref).__name__}", field=field)

    # --- reading ---------------------------------------------------------------------------------
    def get(self, ref: str | int) -> Record:
        """The stored document: by key (its active version, else its newest) or by doc id."""
        self._check_open()
        with self._state:  # one snapshot for the lookup and the record
            return self._record(self._resolve(ref, "id"))

    def history(self, key: str) -> list[Record]:
        """Every version stored under ``key``, oldest first."""
        self._check_open()
        with self._state:
            self._index_keys()
            return [self._record(d) for d in self._keys.get(key, [])]

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

    def _options(
        self, *, k, as_of, weights, depth, reserve, legs, authors, threads, channels, date_from, date_to, context, context_length,
        context_mode, vector_index="auto",
    ) -> QueryOptions:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValidationError(f"expected an integer >= 0, got {k!r}", field="k")
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValidationError(f"expected an integer >= 1, got {depth!r}", field="depth")
        if isinstance(weights, dict):
            unknown = set(weights) - set(LEGS)
            if unknown:
                raise ValidationError(f"unknown legs {sorted(unknown)}; legs are {list(LEGS)}", field="weights")
            weights = tuple(weights.get(leg, 0.0) for leg in LEGS)
        try:
            w = tuple(float(x) for x in weights)
        except (TypeError, ValueError):
            raise ValidationError(f"expected three numbers (lexical, tag, vector), got {weights!r}", field="weights") from None
        if len(w) != 3 or not all(math.isfinite(x) and x >= 0 for x in w):
            raise ValidationError(f"expected three finite numbers >= 0 (lexical, tag, vector), got {weights!r}", field="weights")
        if legs is not None:
            legs = [legs] if isinstance(legs, str) else list(legs)
            unknown = set(legs) - set(LEGS)
            if unknown:
                raise ValidationError(f"unknown legs {sorted(unknown)}; legs are {list(LEGS)}", field="legs")
            w = tuple(x if leg in legs else 0.0 for leg, x in zip(LEGS, w))
        try:
            ctx = tuple(float(x) for x in (context or ()))
        except (TypeError, ValueError):
            raise ValidationError(f"expected a list of numbers, got {context!r}", field="context") from None
        if len(ctx) > 8 or not all(math.isfinite(x) and x >= 0 for x in ctx):
            raise ValidationError(f"expected at most 8 finite numbers >= 0, got {context!r}", field="context")
        if context_length is not None and (
            isinstance(context_length, bool) or not isinstance(context_length, (int, float)) or not context_length > 0
        ):
            raise ValidationError(f"expected a number > 0 or None, got {context_length!r}", field="context_length")
        n = max(self._snap.n_docs, 1)
        return QueryOptions(
            context=ctx if any(ctx) else (),
            context_length=None if context_length is None else float(context_length),
            context_max=_context_mode(context_mode),
            ann=_vector_index(vector_index),
            k=int(min(k, n)),
            as_of=_date_arg(as_of, "as_of", end_of_day=True),
            weights=w,
            depth=int(min(depth, n)),
            reserve=bool(reserve),
            authors=_names(authors, "authors"),
            threads=_names(threads, "threads"),
            channels=_names(channels, "channels"),
            date_from=_date_arg(date_from, "date_from", end_of_day=False),
            date_to=_date_arg(date_to, "date_to", end_of_day=True),
        )

    def query(
        self,
        text: str,
        *,
        as_of: Any = None,
        k: int = 10,
        authors: Sequence[str] | str | None = None,
        threads: Sequence[str] | str | None = None,
        channels: Sequence[str] | str | None = None,
        date_from: Any = None,
        date_to: Any = None,
        weights: Sequence[float] | dict[str, float] = DEFAULT_WEIGHTS,
        depth: int = DEFAULT_DEPTH,
        reserve: bool = True,
        legs: Iterable[str] | None = None,
        embedding: Any = None,
        context: Sequence[float] | None = DEFAULT_CONTEXT,
        context_length: float | None = None,
        context_mode: str = DEFAULT_CONTEXT_MODE,
        question_dates: bool = False,
        vector_index: str = "auto",
    ) -> Hits:
        """The ``k`` documents that best answer ``text`` among those valid at ``as_of``.

        ``as_of``: ISO date/datetime (a date alone means the end of that day); None means now.
        ``weights``: (lexical, tag, vector) or a dict (default 2, 1, 1; the paper's is 1, 1, 4);
        a weight of 0 (or a leg left out of ``legs``) skips that leg. ``embedding``: a precomputed query vector skips the embedder.
        ``context``: thread-context weights for neighbours 1, 2, 3 steps away in the document's
        thread (default ``(0.8, 0.6, 0.4)``; ``()`` turns it off), applied to the lexical and
        vector legs' z-scored scores.
        ``context_length``: neighbours count fully for documents of at most this many index
        terms and proportionally less for longer ones (None: fully for all). ``context_mode``:
        ``"max"`` (default) lifts a document only up to its best neighbour's weighted score;
        ``"sum"`` adds the neighbours' weighted scores.
        ``question_dates``: when ``as_of`` is None, a date the question names ("as of 2023-03-12",
        "in March 2023") becomes the ``as_of`` (the end of that day, month or year).
        ``vector_index``: over documents an ANN index covers (:meth:`build_ann`), ``"auto"``
        lets the planner choose the index or the exact scan per query by cost, ``"ann"`` always
        uses the index, ``"exact"`` never does. Without an index the scan is exact either way.
        """
        self._check_open()
        snap = self._snap  # the whole query runs on this one version, whatever refresh() does meanwhile
        if not isinstance(text, str):
            raise ValidationError(f"expected a string, got {type(text).__name__}", field="text")
        if len(text) > MAX_QUERY_CHARS:
            raise ValidationError(f"a query of {len(text)} characters; at most {MAX_QUERY_CHARS}", field="text")
        from_question = False
        if question_dates and as_of is None:
            named = question_as_of(text)
            if named is not None:
                as_of, from_question = named, True
        opt = self._options(
            k=k, as_of=as_of, weights=weights, depth=depth, reserve=reserve, legs=legs, authors=authors, threads=threads,
            channels=channels, date_from=date_from, date_to=date_to, context=context, context_length=context_length,
            context_mode=context_mode, vector_index=vector_index,
        )
        qvec = None
        if opt.weights[2] and self._snap.n_docs:
            if embedding is not None:
                qvec = check_vector(embedding, self.dim)
            elif text.strip():
                qvec = embed_queries(self.embedder, [text])[0]
        hits = self._execute(text, qvec, opt, snap)
        if from_question and hits.plan is not None:
            hits.plan = replace(hits.plan, as_of_from_question=True)
        return hits

    search = query

    def explain(self, text: str, **kwargs: Any) -> Plan:
        """The plan of a query (candidates, legs, timings); runs it."""
        return self.query(text, **kwargs).plan

    def _execute(self, text: str, qvec: np.ndarray | None, opt: QueryOptions, snap: Snapshot | None = None) -> Hits:
        snap = snap or self._snap
        self._warm(snap)
        n = max(snap.n_docs, 1)
        if opt.k > n or opt.depth > n:
            opt = replace(opt, k=min(opt.k, n), depth=min(opt.depth, n))
        hits = Hits()
        hits.version = snap.version
        if snap.n_docs == 0 or opt.k == 0:
            hits.plan = Plan(from_us(opt.as_of), 0, {}, opt.k, opt.depth, opt.reserve)
            return hits
        chosen, fused, rankings, details = run(snap, text, qvec, opt, self._name_matcher(snap))
        rank_of = {leg: {d: i for i, d in enumerate(r)} for leg, r in rankings.items()}
        rows = snap.rows([doc for doc, _ in chosen])
        for (doc, reserved), row in zip(chosen, rows):
            ranks = {leg: rank_of[leg].get(doc) if leg in rank_of else None for leg in LEGS}
            hits.append(self._record(doc, Hit, snap, row=row, score=fused[doc], ranks=ranks, reserved=reserved))
        hits.plan = Plan(
            as_of=from_us(opt.as_of),
            candidates=details["candidates"],
            legs=details["legs"],
            k=opt.k,
            depth=opt.depth,
            reserve=opt.reserve,
            matched_authors=details["matched_authors"],
            timings_ms=details["timings_ms"],
        )
        return hits

    def _name_matcher(self, snap: Snapshot | None = None) -> NameMatcher:
        names = (snap or self._snap).authors.names
        cached = self._matcher  # read once: another thread may replace it (names only grow, so a length identifies them)
        if cached is None or cached[0] != len(names):
            cached = self._matcher = (len(names), NameMatcher(names))
        return cached[1]

    def query_batch(
        self,
        texts: Sequence[str],
        embeddings: Any = None,
        *,
        k: int = 10,
        as_of: Any = None,
        progress: Callable[[int], None] | None = None,
        chunk: int = DEFAULT_CHUNK,
        **kwargs: Any,
    ):
        """Answer many queries; a ``pyarrow.Table`` with one row per hit (see :meth:`query_stream`)."""
        import pyarrow as pa

        batches = list(self.query_stream(texts, embeddings, k=k, as_of=as_of, progress=progress, chunk=chunk, **kwargs))
        return pa.Table.from_batches(batches, schema=_BATCH_SCHEMA)

    def query_stream(
        self,
        texts: Sequence[str],
        embeddings: Any = None,
        *,
        k: int = 10,
        as_of: Any = None,
        progress: Callable[[int], None] | None = None,
        chunk: int = DEFAULT_CHUNK,
        **kwargs: Any,
    ):
        """Answer many queries, yielding one ``pyarrow.RecordBatch`` per ``chunk`` of queries (512 by
        default; fewer on a large store: a chunk's candidate masks, one byte per document and
        query, stay within 128 MB).

        Columns: query (its index), rank, doc_id, key, score (fused), reserved, and rank_lexical,
        rank_tag, rank_vector (null where that leg did not return the document). The same hits
        as :meth:`query` one by one, with the same keyword arguments; ``as_of`` may be one value
        or one per query; query embeddings are computed in batches unless given. Within a
        chunk the vector leg is one pass over each block of documents for all its queries (the int8
        copy, or a float32 matrix product; ``planner.vector_legs``), certified equal to the
        single-query exact scan; ANN indexes are not used in a batch.
        """
        import pyarrow as pa

        self._check_open()
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValidationError(f"expected a string, got {type(t).__name__}", field="text", record=i)
            if len(t) > MAX_QUERY_CHARS:
                raise ValidationError(f"a query of {len(t)} characters; at most {MAX_QUERY_CHARS}", field="text", record=i)
        as_ofs = list(as_of) if isinstance(as_of, (list, tuple)) else [as_of] * len(texts)
        if len(as_ofs) != len(texts):
            raise ValidationError(f"expected {len(texts)} dates, got {len(as_ofs)}", field="as_of")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValidationError(f"expected an integer >= 1, got {chunk!r}", field="chunk")
        if kwargs.pop("question_dates", False):
            raise ValidationError("not supported in a batch; resolve dates per question first", field="question_dates")
        snap = self._snap
        self._warm(snap)
        n = max(snap.n_docs, 1)  # clamp to the snapshot this stream runs on (refresh() may move self._snap meanwhile)
        opts = self._batch_options(as_ofs, k=k, **kwargs)
        opts = [replace(o, k=min(o.k, n), depth=min(o.depth, n)) if o.k > n or o.depth > n else o for o in opts]
        vecs = None
        if texts and snap.n_docs and opts[0].weights[2]:
            if embeddings is not None:
                vecs = np.asarray(embeddings, dtype=np.float32)
                if vecs.ndim != 2 or vecs.shape != (len(texts), self.dim):
                    raise ValidationError(f"expected shape ({len(texts)}, {self.dim}), got {vecs.shape}", field="embeddings")
                vecs = np.stack([check_vector(v, self.dim) for v in vecs]) if len(vecs) else vecs
        matcher = self._name_matcher(snap)
        chunk = max(1, min(chunk, MASK_BYTES // max(snap.n_docs, 1)))
        # One mask buffer for every chunk: a fresh one page-faults in as the masks are written (0.1 ms a query at 100k).
        mask_buf = np.empty((min(chunk, len(texts)), snap.n_docs), dtype=np.uint8) if snap.n_docs and texts and opts[0].k else None
        for start in range(0, len(texts), chunk):
            part = range(start, min(len(texts), start + chunk))
            qv = None
            if vecs is not None:
                qv = vecs[start : part.stop]
            elif texts and snap.n_docs and opts[0].weights[2]:
                qv = embed_queries(self.embedder, [texts[i] for i in part])
            cols: dict[str, Any] = {f.name: [] for f in _BATCH_SCHEMA}
            if snap.n_docs and opts[0].k:
                masks = mask_buf[: len(part)]  # one array: vector_legs needs no copy
                for j, i in enumerate(part):
                    candidate_mask(snap, opts[i], out=masks[j])
                counts = np.array([np.count_nonzero(row) for row in masks], dtype=np.int64)
                popts = [opts[i] for i in part]
                vec_rank = vector_legs(snap, qv, masks, popts, counts) if qv is not None else [None] * len(part)
                for j, qi in enumerate(part):
                    chosen, fused, rankings, _ = run(
                        snap, texts[qi], None if qv is None else qv[j], opts[qi], matcher, mask=masks[j], vector=vec_rank[j],
                        n_cand=int(counts[j]),
                    )
                    got = [doc for doc, _ in chosen]
                    m = len(got)
                    cols["query"] += [qi] * m
                    cols["rank"] += range(m)
                    cols["doc_id"] += got
                    cols["score"] += [fused[doc] for doc in got]
                    cols["reserved"] += [reserved for _, reserved in chosen]
                    for leg in LEGS:
                        ranked = rankings.get(leg)
                        if ranked is None:
                            cols[f"rank_{leg}"] += [None] * m
                        else:
                            pos = dict(zip(ranked, range(len(ranked))))
                            cols[f"rank_{leg}"] += [pos.get(doc) for doc in got]
                cols["key"] = snap.keys_of(np.asarray(cols["doc_id"], dtype=np.int64))
            if progress is not None:
                progress(len(part))
            yield pa.RecordBatch.from_pydict(cols, schema=_BATCH_SCHEMA)

    def _batch_options(self, as_ofs: list, **kwargs: Any) -> list[QueryOptions]:
        """:meth:`_query_options` of every ``as_of``, the other options checked once (they are shared)."""
        out: list[QueryOptions] = []
        first: QueryOptions | None = None
        seen: dict = {}
        for a in as_ofs:
            if first is None:
                first = self._query_options(as_of=a, **kwargs)
                opt = first
            else:
                try:
                    known = seen.get(a) if a is None or isinstance(a, str) else None
                except TypeError:
                    known = None
                opt = known if known is not None else replace(first, as_of=_date_arg(a, "as_of", end_of_day=True))
            if a is None or isinstance(a, str):
                seen[a] = opt
            out.append(opt)
        return out

    def _query_options(
        self, *, as_of: Any, k: int = 10, weights: Any = DEFAULT_WEIGHTS, depth: int = DEFAULT_DEPTH, reserve: bool = True,
        legs: Any = None, authors: Any = None, threads: Any = None, channels: Any = None, date_from: Any = None,
        date_to: Any = None, context: Any = DEFAULT_CONTEXT, context_length: Any = None, context_mode: str = DEFAULT_CONTEXT_MODE,
        vector_index: str = "auto",
    ) -> QueryOptions:
        return self._options(
            k=k, as_of=as_of, weights=weights, depth=depth, reserve=reserve, legs=legs, authors=authors, threads=threads,
            channels=channels, date_from=date_from, date_to=date_to, context=context, context_length=context_length,
            context_mode=context_mode, vector_index=vector_index,
        )

    def stats(self) -> dict[str, Any]:
        """Counts and sizes of the current version."""
        snap = self._snap
        size = 0
        for p in self.path.rglob("*"):
            if p.is_file() and not p.is_symlink():
                size += p.stat().st_size
        valid_now = int(np.count_nonzero(snap.valid_until == FOREVER)) if snap.n_docs else 0
        dated = snap.dates[snap.dates != NAT]
        return {
            "path": str(self.path),
            "version": snap.version,
            "documents": snap.n_docs,
            "active": valid_now,
            "superseded": snap.n_docs - valid_now,
            "supersessions": int(len(snap.sup_old)),
            "undated": int(snap.n_docs - len(dated)),
            "first_date": from_us(int(dated.min())).isoformat() if len(dated) else None,
            "last_date": from_us(int(dated.max())).isoformat() if len(dated) else None,
            "authors": len(snap.authors.names),
            "threads": len(snap.threads.names),
            "terms": snap.n_terms,
            "segments": len(snap.segments),
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


def _quantized(emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The int8 copy of ``emb`` and its row scales (``kernels.quantize_rows``)."""
    out = (np.empty(emb.shape, dtype=np.int8), np.empty(len(emb), dtype=np.float32))
    quantize_rows(emb, *out)
    return out


def _record_texts(docs: list) -> list[str] | None:
    """Each record's text, when every record is a dict whose text is a string (else None)."""
    if not all(type(d) is dict for d in docs):
        return None
    texts = list(map(dict.get, docs, itertools.repeat("text")))
    return texts if all(type(t) is str for t in texts) else None


def _tokens_of_rows(all_tokens, keep: np.ndarray, texts: Callable[[], list[str]]) -> tuple:
    """``tokenize`` of the kept rows' texts, from ``all_tokens`` (a future of ``tokenize`` of every
    record's text; ``keep``: which records are rows): a record left out (empty or whitespace-only
    text) has no tokens, so only its count goes; should one have any, ``texts()`` (the rows' texts)
    are tokenized again."""
    tok, counts, words = all_tokens.result()
    if keep.all():
        return tok, counts, words
    if counts[~keep].any():
        return tokenize(texts())
    return tok, counts[keep], words


def _pinned_manifest(path: Path, current: dict | None, version: Any, as_known_at: Any) -> dict:
    """The manifest of an earlier committed version, chosen among those ``CURRENT`` descends from.

    Only versions listed in the current manifest's commit history count: a manifest file left
    by a commit that crashed before it was published is not a committed version.
    """
    if version is not None and as_known_at is not None:
        raise ValidationError("give version or as_known_at, not both", field="as_known_at")
    commits = (current or {}).get("commits", [])
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
            raise ValidationError(f"expected an integer, got {version!r}", field="version")
        if not any(int(c["version"]) == int(version) for c in commits):
            raise StoreError(f"{path}: no committed version {version}")
        want = int(version)
    else:
        at = _date_arg(as_known_at, "as_known_at", end_of_day=True)
        known = [int(c["version"]) for c in commits if to_us(c["committed_at"]) <= at]
        if not known:
            first = commits[0]["committed_at"] if commits else None
            raise StoreError(
                f"{path}: no version was committed at or before {from_us(at).isoformat()}"
                + (f" (the first was committed at {first})" if first else " (the store has no commit)")
            )
        want = max(known)
    if current is not None and int(current["version"]) == want:
        return current
    manifest = read_manifest(path, f"manifests/{want:08d}.json")
    entry = [c for c in commits if int(c["version"]) == want]
    if int(manifest.get("version", -1)) != want or manifest.get("commits", [])[-1:] != entry:
        raise CorruptStoreError(str(path / f"manifests/{want:08d}.json"), "does not match the committed history")
    return manifest


def _vector_index(mode: Any) -> str:
    if mode not in ("auto", "ann", "exact"):
        raise ValidationError(f"expected 'auto', 'ann' or 'exact', got {mode!r}", field="vector_index")
    return mode


def _context_mode(mode: Any) -> bool:
    if mode not in ("sum", "max"):
        raise ValidationError(f"expected 'sum' or 'max', got {mode!r}", field="context_mode")
    return mode == "max"


def _date_arg(value: Any, field: str, *, end_of_day: bool) -> int | None:
    if value is None:
        return None
    try:
        return to_us(value, end_of_day=end_of_day)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {value!r} as an ISO 8601 date ({exc})", field=field) from None


def _names(value: Any, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        out = tuple(value)
    except TypeError:
        raise ValidationError(f"expected a string or list of strings, got {type(value).__name__}", field=field) from None
    if not all(isinstance(v, str) for v in out):
        raise ValidationError("expected strings", field=field)
    return out
