"""``mempp.Writer``: every change to a store (docs/DESIGN.md §2, §5, §6).

The writer's lock, commits and their publication, group commit, supersessions, ANN builds and
segment merges (the scheduling: ``compaction.py``). A :class:`~mempp.Store` makes one on open
and hands its writes to it; each commit publishes a new version, which the store's next
:class:`~mempp.Searcher` reads.

Concurrent ``add`` calls of one process coalesce into one commit (group commit): each call
checks and embeds its own documents in its own thread, queues them, and the first caller to
take the writer's turn commits everything queued by then; every call returns once its own
documents are durable (or raises its own error: a record one call gets wrong fails that call
alone). What a commit holds is ``batches.py``'s; which supersessions a write records is
``supersession.plan``'s, the one rule.

Owns: every change to a store. Must never rank or answer queries.

Never imports: searcher, planner, fusion, lexical, vector, onnxruntime.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mempp.storage import CommitBatch, Snapshot, StoreError, StoreWriteError, WriterLock, clean_strays, commit, new_meta, now_us
from mempp.storage.analyzer import joined_ascii, tokenize
from mempp.storage.ann import DEFAULT_EF_CONSTRUCTION, DEFAULT_M
from mempp.storage.ann import build as ann_build
from mempp.storage.ann import to_bytes as ann_bytes
from mempp.storage.manifest import State, Unit
from mempp.storage.commits import guarded

from .batches import BatchBuilder, CyclicGCPaused, checked_windows, quantized_copy, record_texts, tokens_of_rows
from .compaction import Compaction, remove_files
from .config import IndexConfig
from .dates import to_us
from .docindex import DocIndex
from .access import MISSING, Access, readers_events, record_readers
from .erasure import Erasure
from .permissions import Permissions
from .errors import DocumentNotFound, ValidationError
from .ingest import Deferred, Plain, Row, prepare_batch, record_fingerprints
from .supersession import Event, Item, plan
from .tables import is_table, split_table
from .types import Added
from .versions import upgraded

# A batch of at least this many records is checked, fingerprinted, tokenized and normalized in
# threads at once (Writer.add); smaller ones take the plain path (threads would not pay) and
# coalesce with other threads' adds into one commit.
BIG_BATCH = 2000


def _one_writer_thread(method):
    """Serialize a write method across the threads sharing one Store (readers are not blocked)."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._write_mutex:
            return method(self, *args, **kwargs)

    return locked



class _Ticket:
    """One ``add`` call's checked documents, waiting for a commit (group commit)."""

    __slots__ = ("docs", "given", "rows", "supplied", "windows", "progress", "backdate", "result", "error", "done")

    def __init__(self, docs, given, rows, supplied, windows, progress, backdate=False):
        self.docs, self.given = docs, given  # the records and their readers (access.record_readers)
        self.rows, self.supplied, self.windows, self.progress = rows, supplied, windows, progress
        self.backdate = backdate
        self.result: list[int | None] | None = None
        self.error: BaseException | None = None
        self.done = False



class Writer:
    """The writes of one open :class:`~mempp.Store` (its ``writer``); every public write of the
    store is one of these. Safe to call from several threads (one writes at a time; ``add``
    calls coalesce). Reads go through the store's :class:`~mempp.Searcher`."""

    def __init__(
        self, host: Any, adopt: Callable[[Snapshot], None], docs: DocIndex, *, embedder_info: dict, analyzer, index: IndexConfig,
        read_only: bool, recovered: str | None, lock_timeout: float | None, on_corrupt: str, merge: str,
    ) -> None:
        """Made by :meth:`Store.open`: ``host`` the store (its public reads), ``adopt`` installs a
        snapshot this writer published as the store's current version."""
        self._host_ref = weakref.ref(host)  # no cycle: a Store dropped without close() frees its files at once
        self._adopt_ref = weakref.WeakMethod(adopt)
        self._docs = docs
        self.path: Path = host.path
        self.read_only = read_only
        self.analyzer = analyzer
        self.index = index
        self._embedder_info = embedder_info
        self._lock = WriterLock(self.path)
        self._lock_timeout = lock_timeout
        self._on_corrupt = on_corrupt
        self._broken: str | None = None  # set when an fsync failed: no more writes until reopened
        self._recovered = recovered  # opened at the newest whole version after a loss: no writes until repaired
        self._stale = False  # a write failed: the next one reads the newest version from disk first
        self._write_mutex = threading.Lock()  # one writing thread at a time (the group commit's leader)
        self._queue_lock = threading.Lock()
        self._queue: list = []  # add calls waiting for the next commit
        self.compaction = Compaction(self, merge)
        self.permissions = Permissions(self)
        self.erasure = Erasure(self)

    @property
    def _host(self) -> Any:
        host = self._host_ref()
        if host is None:
            raise StoreError(f"{self.path}: the store is gone")
        return host

    def _adopt(self, snap: Snapshot) -> None:
        adopt = self._adopt_ref()
        if adopt is None:
            raise StoreError(f"{self.path}: the store is gone")
        adopt(snap)

    @property
    def snap(self) -> Snapshot:
        """The version the next write builds on: the store's current one."""
        return self._host.searcher().snapshot

    def searcher(self) -> Any:
        """The store's current :class:`~mempp.Searcher` (what the next write builds on)."""
        return self._host.searcher()

    @property
    def dim(self) -> int:
        return int(self._embedder_info["dim"])

    @property
    def locked(self) -> bool:
        """Whether this writer holds the store's writer lock (from its first write until close)."""
        return self._lock.held

    @property
    def broken(self) -> str | None:
        """Why writes are refused after a failed fsync (None: they are not)."""
        return self._broken

    def _builder(self) -> BatchBuilder:
        return BatchBuilder(self.snap, self._docs, self.analyzer, self.index, lambda: self._host.embedder, self.dim)

    def add(
        self,
        docs: Iterable[dict | Any],
        embeddings: Any = None,
        *,
        batch_size: int = 32,
        progress: Callable[[int], None] | None = None,
        backdate: bool = False,
    ) -> Added:
        """Add documents as one commit; when it returns the batch is committed and durable.

        Returns one entry per input: the new doc id; the existing doc id for a re-ingest (same
        author and whitespace-normalized text as a stored row that is still active, or that has
        the same key and date); ``None`` for an empty or whitespace-only text. The list is an
        :class:`~mempp.Added`, whose ``new``, ``existing`` and ``skipped`` count what this call
        itself committed (other processes' and threads' commits never enter them).
        A key that matches a stored document with other text stores a new version: the versions
        of one key are ordered by date whatever the input order (an undated one at the instant
        it is recorded), each superseded effective at the next one's date. A ``supersedes`` field
        (a key or list of keys) records that this document replaces, from its date, the version
        of that key in force then, found among the stored documents and the whole batch
        (whatever its order). Refused with nothing written: a key found nowhere, a cycle, and,
        unless ``backdate=True``, a ``supersedes`` naming a document dated after this one (it
        would never have been valid). The rule: ``mempp.supersession.plan``.
        ``docs`` is an iterable of records (dicts or :class:`mempp.Document`), or an Arrow table of
        documents (``mempp.tables``: a column per field; ``mempp embed`` writes one); a single
        dict is refused (wrap it in a list). Calls from several threads coalesce into one commit.
        ``embeddings``: for a table, the name of its column of vectors (``"embedding"``); its
        ``<name>_windows`` column, when present, holds each document's window vectors (a store
        with a ``window_stride``). Supplied embeddings otherwise come without window vectors.
        ``batch_size``: texts per embedder call; ``progress(n)``: called as documents are embedded.
        """
        windows = None
        if is_table(docs):
            docs, embeddings, windows = split_table(docs, embeddings, self.dim)
            if windows is not None and embeddings is not None:
                windows = (windows[0], checked_windows(windows[1], self.dim))
        if isinstance(docs, (dict, str, bytes)):
            raise ValidationError(
                f"expected an iterable of records (a list of dicts), got a single {type(docs).__name__}; wrap it in a list",
                field="docs",
            )
        try:
            records = iter(docs)
        except TypeError:
            raise ValidationError(f"expected an iterable of records (a list of dicts), got {type(docs).__name__}", field="docs") from None
        with CyclicGCPaused():
            docs = list(records)
            given = record_readers(docs)
            if len(docs) >= BIG_BATCH:
                with self._write_mutex:
                    return self._add(docs, embeddings, batch_size, progress, windows, bool(backdate), given)
            return self._add_grouped(docs, embeddings, batch_size, progress, windows, bool(backdate), given)

    def _add_grouped(self, docs: list, embeddings, batch_size, progress, windows=None, backdate=False, given=None) -> list[int | None]:
        self.check_writable()
        rows, supplied = prepare_batch(docs, embeddings, self.dim)
        if supplied is None:
            windows = None
        if supplied is None and self._may_reingest(rows):
            with self._write_mutex:  # embed in the writer's turn only the rows found new (as a big batch does)
                return self._add(docs, None, batch_size, progress, None, backdate, given)
        if supplied is None and any(r is not None for r in rows):
            supplied, windows = self._builder().embed_rows(rows, batch_size, progress)  # in this thread, before the writer's turn
            progress = None
        ticket = _Ticket(docs, given, rows, supplied, windows, progress, backdate)
        with self._queue_lock:
            self._queue.append(ticket)
        with self._write_mutex:
            if not ticket.done:
                with self._queue_lock:
                    group, self._queue = self._queue, []
                self._commit_group(group)
        if ticket.error is not None:
            raise ticket.error
        return ticket.result

    def _may_reingest(self, rows: list[Row | None]) -> bool:
        """Whether some row has the fingerprint (author and normalized text) of a stored document,
        so that it may be a re-ingest: then the batch is not embedded ahead, and only the rows
        the writer finds new are (a file added again after an interruption embeds only what is
        missing). A false positive only costs the ahead-of-the-lock embedding."""
        fps = [r.fingerprint for r in rows if r is not None]
        if not fps or not self.snap.n_docs:
            return False
        self._docs.extend(self.snap)
        return bool(self._docs.fingerprints.contains(np.asarray(fps, dtype=np.uint64)).any())

    def _commit_group(self, group: list[_Ticket]) -> None:
        """Commit the queued ``add`` calls of ``group`` as one version (the caller holds the write mutex)."""
        try:
            self.check_writable()
            self.begin_write()
        except BaseException as exc:
            for t in group:
                t.error, t.done = exc, True
            return
        pending = list(group)
        while pending:
            offsets = np.cumsum([0] + [len(t.rows) for t in pending])
            rows: list[Row | None] = []
            for t, off in zip(pending, offsets):
                rows.extend(r if r is None or off == 0 else replace(r, record=r.record + int(off)) for r in t.rows)
            supplied = np.concatenate([t.supplied if t.supplied is not None else np.zeros((len(t.rows), self.dim), np.float32) for t in pending])
            wins = [(w[0] + off, w[1]) for t, off in zip(pending, offsets) if (w := t.windows) is not None and len(w[0])]
            windows = (np.concatenate([w[0] for w in wins]), np.concatenate([w[1] for w in wins])) if wins else None
            first = self.snap.n_docs  # the commit's new doc ids start here, in the order of the rows
            backdate = {r.record + int(off) for t, off in zip(pending, offsets) if t.backdate for r in t.rows if r is not None}
            try:
                results, batch = self._builder().add_rows(rows, supplied, 32, None, None, windows=windows, backdate=backdate)
            except ValidationError as exc:
                if exc.record is None:
                    raise
                i = int(np.searchsorted(offsets, exc.record, side="right")) - 1  # the call whose record it is
                bad = pending.pop(i)
                bad.error = ValidationError(exc.message, field=exc.field, record=exc.record - int(offsets[i]), key=exc.key)
                bad.done = True
                continue
            except BaseException as exc:
                for t in pending:
                    t.error, t.done = exc, True
                return
            try:
                for t in pending:
                    if t.progress is not None:
                        t.progress(sum(r is not None for r in t.rows))
                given = None
                if any(t.given is not None for t in pending):
                    given = [g for t in pending for g in (t.given if t.given is not None else [MISSING] * len(t.rows))]
                self._commit_rows(results, batch, [d for t in pending for d in t.docs], given, first)
            except BaseException as exc:
                for t in pending:
                    t.error, t.done = exc, True
                return
            for t, off in zip(pending, offsets):
                t.result, t.done = Added(results[off : off + len(t.rows)], first), True
                first = max([first] + [i + 1 for i in t.result if i is not None and i >= first])  # the next call's
            return

    def _commit_rows(self, results: list[int | None], batch: CommitBatch | None, docs: list, given: list | None, first: int) -> list[int | None]:
        """Commit an ``add``'s batch with the reader events of its records (``access.readers_events``)."""
        access = self.access()
        events = readers_events(access, docs, given, results, first, lambda key: self._docs.docs(key, first))
        if events:
            batch = batch if batch is not None else CommitBatch()
            batch.access = access.appended(events, self.snap.version + 1, now_us())
        if batch is not None:
            self._commit(batch)
        return results

    def _add(self, docs, embeddings, batch_size, progress, windows=None, backdate=False, given=None) -> list[int | None]:
        self.check_writable()
        if embeddings is None:
            windows = None
        docs = list(docs)
        early = record_texts(docs) if len(docs) >= BIG_BATCH else None
        if early is None:
            rows, supplied = prepare_batch(docs, embeddings, self.dim)
            prepared = [r.text for r in rows if r is not None]
            if len(prepared) < BIG_BATCH:
                self.begin_write()
                first = self.snap.n_docs
                done = self._builder().add_rows(rows, supplied, batch_size, progress, None, windows=windows, backdate=backdate)
                return Added(self._commit_rows(*done, docs, given, first), first)
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
                tokens = (int(kept.sum()), pool.submit(tokens_of_rows, all_tokens, kept, texts))
            else:
                tokens = (len(prepared), pool.submit(tokenize, prepared))
            quantized = None
            if supplied is not None and len(supplied) and self.index.vector_copy == "int8":
                # the int8 copy of every record's embedding, used if every record is a new row
                quantized = vectors.submit(quantized_copy, supplied)
            self.begin_write()
            first = self.snap.n_docs
            done = self._builder().add_rows(rows, supplied, batch_size, progress, tokens, quantized, windows, backdate)
            out = Added(self._commit_rows(*done, docs, given, first), first)
        except BaseException:
            for p in {pool, vectors}:
                p.shutdown(wait=False, cancel_futures=True)  # an error is not held up by the threads
            raise
        for p in {pool, vectors}:
            p.shutdown()
        return out

    def supersede(self, old: str | int, new: str | int, effective: Any = None, *, backdate: bool = False) -> None:
        """Record that ``new`` replaces ``old`` from ``effective`` on (default: ``new``'s date).

        ``old`` and ``new`` are keys (the active version) or doc ids. Nothing is deleted:
        ``old`` stays the answer for questions as of dates before ``effective``.

        Refused (``ValidationError``, nothing written), so that a record never loses every
        version where it had one (the rule of :func:`supersession.plan`):
        - ``new`` is itself superseded at or before ``effective`` (a cycle, or a replacement
          already replaced): from then on neither would be valid;
        - ``effective`` is before ``old``'s own date (``old`` would never have been valid) or
          before ``new``'s (neither would be valid in between), unless ``backdate=True``.
        A mistaken supersession is corrected by adding a new version, never by deleting one.
        """
        self._supersede([(old, new, effective)], many=False, backdate=backdate)

    def supersede_many(self, events: Iterable[tuple], *, backdate: bool = False) -> None:
        """Record many supersessions ``(old, new[, effective])`` as one commit (all or none).

        Each event as in :meth:`supersede`, checked against every other of the same call
        whatever their order; the first bad one raises a ``ValidationError`` naming its index
        (``record``) and nothing is written.
        """
        self._supersede(events, many=True, backdate=backdate)

    def mark_replaced(self, events: Iterable[tuple[int, Any]]) -> None:
        """Record that each ``(doc id, effective)`` was replaced from ``effective`` on by a document
        this store does not hold (one commit): an import of a reader's export keeps its documents'
        validity, the replacement unnamed."""
        with self._write_mutex:
            self.check_writable()
            self.begin_write()
            recorded = now_us()
            todo = [(self._host.searcher().resolve(int(d), "doc_id"), to_us(e), recorded) for d, e in events]
            if todo:
                self._commit(CommitBatch(supersessions=[(d, -1, e, r) for d, e, r in todo]))

    def check_supersessions(self, entries: Sequence[tuple], backdate: bool = False) -> None:
        """Raise the ``ValidationError`` :func:`supersession.plan` gives for new documents ``entries``
        (``(record, name, key, date µs or None, supersedes)``, in input order) added to the current
        version, naming each record by ``name`` (``FILE:LINE``): ``mempp add`` checks a whole file
        this way before its first commit. Writes nothing."""
        now = now_us()
        first = self.snap.n_docs
        items = [
            Item(first + i, record, key, date if date is not None else now, date is not None, sups, backdate, name)
            for i, (record, name, key, date, sups) in enumerate(entries)
        ]
        try:
            plan(self._builder().store_view(), items, recorded=now, backdate=backdate)
        except ValidationError as exc:
            it = next((x for x in items if x.record == exc.record), None)
            raise ValidationError(f"{it.name if it else exc.record}: field {exc.field!r}: {exc.message}") from None

    def stored_replay(self, row: Row) -> bool:
        """Whether the checked record ``row`` re-ingests a stored document (``mempp add`` resuming a file)."""
        return self._builder().stored_replay(row)

    def _supersede(self, events: Iterable[tuple], many: bool, backdate: bool = False) -> None:
        with self._write_mutex:
            self.check_writable()
            self.begin_write()
            recorded = now_us()
            searcher = self._host.searcher()
            todo = []
            for i, event in enumerate(events):
                if not isinstance(event, (tuple, list)) or len(event) not in (2, 3):
                    raise ValidationError("expected (old, new) or (old, new, effective)", field="event", record=i)
                old, new, effective = (*event, None) if len(event) == 2 else event
                where = i if many else None
                try:
                    old_id = searcher.resolve(old, "old")
                    new_id = searcher.resolve(new, "new")
                except ValidationError as exc:
                    raise ValidationError(exc.message, field=exc.field, record=where) from None
                except DocumentNotFound as exc:
                    raise DocumentNotFound(f"event {i}: {exc}" if many else str(exc)) from None
                eff = None
                if effective is not None:
                    try:
                        eff = to_us(effective)
                    except (ValueError, TypeError, OverflowError) as exc:
                        raise ValidationError(f"cannot parse {effective!r} ({exc})", field="effective", record=where) from None
                todo.append(Event(old_id, new_id, eff, where, (old, new)))
            out = plan(self._builder().store_view(), events=todo, recorded=recorded, backdate=backdate)
            if out:
                self._commit(CommitBatch(supersessions=[(o, n, e, recorded) for o, n, e in out]))

    # --- who may read what ----------------------------------------------------------------------
    def access(self) -> Access:
        """The permissions of the version the next write builds on."""
        return Access.of(self.path, self.snap.state)

    def commit_access(self, access: Access, events: list[dict]) -> None:
        """Commit ``events`` appended to ``access``'s log (in the writer's turn, after :meth:`begin_write`)."""
        if events:
            self._commit(CommitBatch(access=access.appended(events, self.snap.version + 1, now_us())))

    @_one_writer_thread
    def build_ann(
        self, *, min_docs: int = 50_000, m: int = DEFAULT_M, ef_construction: int = DEFAULT_EF_CONSTRUCTION, workers: int = 0,
        threads: int | None = None,
    ) -> dict | None:
        """Index the committed documents no ANN index covers yet (HNSW), if there are ``min_docs``.

        The index is built aside from the embeddings already committed (queries go on, on
        the exact scan), written and checksummed like every store file, and published as a
        new version; readers load it in the background after checking its checksum. Documents
        added later are scanned exactly until the next ``build_ann``. The vector leg then
        chooses, per query and index, between the index (oversampled, post-filtered, rescored
        exactly) and the exact scan, by a cost model (``planner.ann_cost_ms``). Returns
        ``{"first", "n", "seconds"}`` or None when there was too little to index. ``workers``:
        OS threads building it (0: every core); ``threads`` is its former name (a query's
        ``threads`` filters conversations).
        """
        if threads is not None:
            warnings.warn("build_ann(threads=...) is now build_ann(workers=...)", DeprecationWarning, stacklevel=3)
            workers = threads
        self.check_writable()
        self.begin_write()
        snap = self.snap
        first = max((a.first + a.n for a in snap.ann), default=0)
        n = snap.n_docs - first
        if n <= 0 or n < min_docs:
            return None
        t = time.perf_counter()
        rows = [e.segment.embeddings[max(0, first - e.base) :] for e in snap.segments if e.base + e.segment.n > first]
        index = ann_build(rows, first, m=m, ef_construction=ef_construction, workers=workers, store_bytes=snap.embedding_bytes)
        data = ann_bytes(index, self.path / f".ann-build.tmp-{os.getpid()}")
        params = {"space": "ip", "M": int(m), "ef_construction": int(ef_construction)}
        self._commit(CommitBatch(ann=(first, n, params, data)))
        return {"first": first, "n": n, "seconds": round(time.perf_counter() - t, 2)}

    # --- the writer's turn, commits and publication -----------------------------------------------
    def turn(self) -> threading.Lock:
        """The writer's turn: one thread of this process writes at a time (``with writer.turn():``)."""
        return self._write_mutex

    def check_writable(self) -> None:
        """Raise why this store refuses writes now, if it does (closed, read-only, a failed fsync,
        a recovered or partly unreadable version)."""
        self._host.check_open()
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        if self._broken is not None:
            raise StoreWriteError(f"{self.path}: writes refused after a failed fsync ({self._broken}); reopen the store", broken=True)
        if self._recovered is not None:
            raise StoreError(f"{self.path}: opened at the newest whole version after a loss; writes are refused until "
                             f"`mempp repair {self.path}` re-points the store ({self._recovered.split('; reading')[0]})")
        if self.snap.skipped:
            raise StoreError(f"{self.path}: opened with damaged files skipped ({', '.join(self.snap.skipped)}); read-only")

    def begin_write(self) -> None:
        """Take the writer lock and build on the newest committed version (in the writer's turn).

        The first write of this Store reads the newest version from disk and removes what a crashed
        or failed writer left behind; later writes build on this Store's own last commit (no other
        process can commit while the lock is held), except after a failed write, which may have
        published its version before it failed: then the newest is read again."""
        if not self._lock.held or self._stale:
            self._lock.acquire(self._lock_timeout)
            self._host.refresh()
            guarded(self.path, lambda: clean_strays(self.path, self.snap.state))
            self._stale = False
        self._docs.extend(self.snap)

    def guarded_write(self, fn: Callable[[], Any], stale_on_error: bool = False) -> Any:
        """Run a write of store files (``storage.commits.guarded``): a failed fsync stops every
        later write of this Store; ``stale_on_error``: a failure may have published a version,
        so the next write reads the newest from disk first."""
        try:
            return guarded(self.path, fn)
        except BaseException as exc:
            if stale_on_error:
                self._stale = True
            if isinstance(exc, StoreWriteError) and exc.broken:
                self._broken = str(exc)
            raise

    def _base_state(self) -> State:
        """The state a commit builds on: the current one (a format-1 store's rewritten as format 2
        first: its units and history with the counts format 2 records), or a new store's."""
        state = self.snap.state
        if state is None:
            return State.empty(new_meta(self.dim, self._embedder_info, self.analyzer.to_json(), self.index.to_json()))
        if state.format == 1:
            return upgraded(state, self.snap)
        return state

    def _commit(self, batch: CommitBatch) -> None:
        before = self.snap.state
        done = self.guarded_write(lambda: commit(self.path, self._base_state(), batch), stale_on_error=True)
        self.publish(done.state, done.built)
        if before is not None and before.format == done.state.format and done.state.depth == 0:
            remove_files(self.path, before.chain)  # a checkpoint: the version files before it are named by no version
        if self.compaction.mode == "background":
            self.compaction.poke()

    def publish(self, state: State, built: dict | None = None) -> None:
        """Make ``state``, just committed by this writer, the store's current version (its files
        verified as written; ``built``: a small unit's postings and int8 copy, made in memory by the commit)."""
        new = [u for u in state.units if u.hi == state.version] + [a for a in state.anns if a.version == state.version]
        written = [(f.name, f.xxh3) for u in new for f in (u.files.values() if isinstance(u, Unit) else [u.file])]
        snap = Snapshot(self.path, state, previous=self.snap, on_corrupt=self._on_corrupt, written=written, built=built)
        self._adopt(snap)
        self._docs.extend(snap)

    # --- merges -------------------------------------------------------------------------------------
    def merge(self, *, force: bool = False) -> dict:  # see Store.merge
        return self.compaction.merge(force)

    def wait_merges(self, timeout: float | None = None) -> bool:
        """Wait until the background merges are done (none under way or due); True when so."""
        return self.compaction.wait(timeout)

    def close(self) -> None:
        """Stop the merge thread, clear what an unfinished write left, release the writer lock."""
        self.compaction.stop()
        if self._lock.held and self._broken is None and not self.read_only:
            try:
                with self._write_mutex:
                    clean_strays(self.path, self.snap.state)
            except OSError:
                pass
        self._lock.release()
