"""The write path of a :class:`~mempp.Store`: documents checked, matched against what is stored,
embedded and committed; ANN indexes; the commit and publication of every change (which
supersessions a write records: ``supersession.plan``, the one rule; merges of segments: ``merging.py``).

Concurrent ``add`` calls of one process coalesce into one commit (group commit): each call
checks and embeds its own documents in its own thread, queues them, and the first caller to
take the writer's turn commits everything queued by then; every call returns once its own
documents are durable (or raises its own error: a record one call gets wrong fails that call
alone). Segments are merged by the policy of ``storage/merge.py``, in a background thread of
the writer's process (``Store.open(merge="background")``, the default) or when asked
(``Store.merge``, ``merging.py``); a merge is published as a new version like any commit.

Owns: every change to a store. Must never rank or answer queries.

Never imports: reads, planner, fusion, lexical, vector, merging, onnxruntime.
"""

from __future__ import annotations

import functools
import gc
import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Iterable

import numpy as np

from mempp.kernels import quantize_rows
from mempp.storage import FOREVER, NAT, CommitBatch, Snapshot, StoreError, StoreWriteError, clean_strays, commit, new_meta, now_us
from mempp.storage.analyzer import joined_ascii, tokenize
from mempp.storage.ann import DEFAULT_EF_CONSTRUCTION, DEFAULT_M
from mempp.storage.ann import build as ann_build
from mempp.storage.ann import to_bytes as ann_bytes
from mempp.storage.manifest import State, Unit
from mempp.storage.writer import guarded

from .dates import iso
from .errors import DocumentNotFound, ValidationError
from .supersession import Chains, Item, StoreView, plan
from .ingest import Deferred, NewRows, Plain, Row, check_embeddings, prepare_batch, record_fingerprints
from .tables import is_table, split_table
from .types import Added

# A batch of at least this many records is checked, fingerprinted, tokenized and normalized in
# threads at once (Store._add); smaller ones take the plain path (threads would not pay) and
# coalesce with other threads' adds into one commit.
BIG_BATCH = 2000


def _one_writer_thread(method):
    """Serialize a write method across the threads sharing one Store (readers are not blocked)."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._write_mutex:
            return method(self, *args, **kwargs)

    return locked


def render_row(index, row: Row) -> str:
    """What the store's embedder embeds for a checked record (``IndexConfig.embed_template``)."""
    return index.render(
        row.text, author=row.author, date=(iso(row.date) or "")[:10], thread=row.thread, channel=row.channel, source=row.source
    )


def _checked_windows(vectors: np.ndarray, dim: int) -> np.ndarray:
    """Supplied window vectors as unit float32 rows (a NaN or a wrong dimension is refused)."""
    try:
        return check_embeddings(vectors, len(vectors), dim)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="embedding_windows", record=exc.record) from None


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



class _Ticket:
    """One ``add`` call's checked documents, waiting for a commit (group commit)."""

    __slots__ = ("rows", "supplied", "windows", "progress", "backdate", "result", "error", "done")

    def __init__(self, rows, supplied, windows, progress, backdate=False):
        self.rows, self.supplied, self.windows, self.progress = rows, supplied, windows, progress
        self.backdate = backdate
        self.result: list[int | None] | None = None
        self.error: BaseException | None = None
        self.done = False


class WritePath:
    """Writes of a :class:`~mempp.Store` (mixed into it)."""

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
                windows = (windows[0], _checked_windows(windows[1], self.dim))
        if isinstance(docs, (dict, str, bytes)):
            raise ValidationError(
                f"expected an iterable of records (a list of dicts), got a single {type(docs).__name__}; wrap it in a list",
                field="docs",
            )
        try:
            records = iter(docs)
        except TypeError:
            raise ValidationError(f"expected an iterable of records (a list of dicts), got {type(docs).__name__}", field="docs") from None
        with _CyclicGCPaused():
            docs = list(records)
            if len(docs) >= BIG_BATCH:
                with self._write_mutex:
                    return self._add(docs, embeddings, batch_size, progress, windows, bool(backdate))
            return self._add_grouped(docs, embeddings, batch_size, progress, windows, bool(backdate))

    def _add_grouped(self, docs: list, embeddings, batch_size, progress, windows=None, backdate=False) -> list[int | None]:
        self._check_writable()
        rows, supplied = prepare_batch(docs, embeddings, self.dim)
        if supplied is None:
            windows = None
        if supplied is None and self._may_reingest(rows):
            with self._write_mutex:  # embed in the writer's turn only the rows found new (as a big batch does)
                return self._add(docs, None, batch_size, progress, None, backdate)
        if supplied is None and any(r is not None for r in rows):
            supplied, windows = self._embed_rows(rows, batch_size, progress)  # in this thread, before the writer's turn
            progress = None
        ticket = _Ticket(rows, supplied, windows, progress, backdate)
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
        if not fps or not self._snap.n_docs:
            return False
        self._index_keys()
        return bool(self._fps.contains(np.asarray(fps, dtype=np.uint64)).any())

    def _embed_rows(self, rows: list[Row | None], batch_size: int, progress) -> tuple[np.ndarray, tuple | None]:
        """Embeddings (one per record; zero for a skipped one) and window vectors of ``rows``, by the store's embedder."""
        records = [i for i, r in enumerate(rows) if r is not None]
        texts = [render_row(self.index, rows[i]) for i in records]
        emb = np.zeros((len(rows), self.dim), dtype=np.float32)
        emb[records] = self.embedder.embed(texts, batch_size=batch_size, progress=progress)
        windows = None
        if self.index.window_stride and hasattr(self.embedder, "embed_windows"):
            win_emb, owner = self.embedder.embed_windows(texts, self.index.window_stride, batch_size=batch_size)
            windows = (np.asarray(records, dtype=np.int64)[owner], win_emb)
        return emb, windows

    def _commit_group(self, group: list[_Ticket]) -> None:
        """Commit the queued ``add`` calls of ``group`` as one version (the caller holds the write mutex)."""
        try:
            self._check_writable()
            self._begin_write()
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
            first = self._snap.n_docs  # the commit's new doc ids start here, in the order of the rows
            backdate = {r.record + int(off) for t, off in zip(pending, offsets) if t.backdate for r in t.rows if r is not None}
            try:
                results, batch = self._add_rows(rows, supplied, 32, None, None, windows=windows, backdate=backdate)
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
                self._commit_rows(results, batch)
            except BaseException as exc:
                for t in pending:
                    t.error, t.done = exc, True
                return
            for t, off in zip(pending, offsets):
                t.result, t.done = Added(results[off : off + len(t.rows)], first), True
                first = max([first] + [i + 1 for i in t.result if i is not None and i >= first])  # the next call's
            return

    def _commit_rows(self, results: list[int | None], batch: CommitBatch | None) -> list[int | None]:
        if batch is not None:
            self._commit(batch)
        return results

    def _add(self, docs, embeddings, batch_size, progress, windows=None, backdate=False) -> list[int | None]:
        self._check_writable()
        if embeddings is None:
            windows = None
        docs = list(docs)
        early = _record_texts(docs) if len(docs) >= BIG_BATCH else None
        if early is None:
            rows, supplied = prepare_batch(docs, embeddings, self.dim)
            prepared = [r.text for r in rows if r is not None]
            if len(prepared) < BIG_BATCH:
                self._begin_write()
                first = self._snap.n_docs
                return Added(self._commit_rows(*self._add_rows(rows, supplied, batch_size, progress, None, windows=windows, backdate=backdate)), first)
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
            self._begin_write()
            first = self._snap.n_docs
            out = Added(self._commit_rows(*self._add_rows(rows, supplied, batch_size, progress, tokens, quantized, windows, backdate)), first)
        except BaseException:
            for p in {pool, vectors}:
                p.shutdown(wait=False, cancel_futures=True)  # an error is not held up by the threads
            raise
        for p in {pool, vectors}:
            p.shutdown()
        return out

    def _add_rows(
        self, rows: list[Row | None] | Plain, supplied, batch_size, progress, tokens, quantized=None, windows=None, backdate=False
    ) -> tuple[list[int | None], CommitBatch | None]:
        """The results of adding the checked ``rows`` (or a :class:`Plain` batch, its fingerprints
        set) to the current version, and the commit that adds them (None when nothing is new).
        ``windows``: (record, vector) of the rows' extra window vectors, when ``supplied`` was made
        by the store's own embedder; ``backdate``: True, False, or the set of records it is True for.
        The supersessions are :func:`supersession.plan`'s. Call with the writer's state held (``_begin_write``)."""
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
                        rows.new_rows(), snap.n_docs, ingested, [], batch_size, progress, supplied, tokens, quantized, windows
                    )
                    return ids, batch
                return ids, None
            rows = rows.rows()  # some may be re-ingests: row by row
        next_id = snap.n_docs
        results: list[int | None] = []
        new_rows: list[Row] = []
        items: list[Item] = []
        batch_fps: dict[int, list[tuple[int, str | None]]] = {}
        batch_dates: dict[int, int | None] = {}
        view = self._store_view()
        known = Chains(view)  # the store's versions and this batch's rows so far: which are active
        fps = np.fromiter((r.fingerprint for r in rows if r is not None), dtype=np.uint64)
        stored_fps = set(fps[self._fps.contains(fps)].tolist())  # the batch's fingerprints some stored row has
        for row in rows:
            if row is None:
                results.append(None)
                continue
            in_batch = batch_fps.get(row.fingerprint)
            if in_batch is not None or row.fingerprint in stored_fps:  # else no row can be the same document
                dup = self._duplicate(row, in_batch or [], batch_dates, known.active)
                if dup is not None:
                    results.append(dup)
                    continue
            doc_id = next_id
            next_id += 1
            item = Item(
                doc_id, row.record, row.key, row.date if row.date is not None else ingested, row.date is not None,
                row.supersedes, backdate if isinstance(backdate, bool) else row.record in backdate,
            )
            known.add(item)
            items.append(item)
            batch_fps.setdefault(row.fingerprint, []).append((doc_id, row.key))
            batch_dates[doc_id] = row.date
            new_rows.append(row)
            results.append(doc_id)
        sups = [(o, n, e, ingested) for o, n, e in plan(view, items, recorded=ingested)]

        if new_rows or sups:
            if tokens is not None:
                tokens = tokens[1] if tokens[0] == len(new_rows) else None  # else some rows were re-ingests
            batch = self._build_batch(
                NewRows.of(new_rows), snap.n_docs, ingested, sups, batch_size, progress, supplied, tokens, quantized, windows
            )
            return results, batch
        return results, None

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
        if self._recovered is not None:
            raise StoreError(f"{self.path}: opened at the newest whole version after a loss; writes are refused until "
                             f"`mempp repair {self.path}` re-points the store ({self._recovered.split('; reading')[0]})")
        if self._snap.skipped:
            raise StoreError(f"{self.path}: opened with damaged files skipped ({', '.join(self._snap.skipped)}); read-only")

    def _begin_write(self) -> None:
        """Take the writer lock and build on the newest committed version.

        The first write of this Store reads the newest version from disk and removes what a crashed
        or failed writer left behind; later writes build on this Store's own last commit (no other
        process can commit while the lock is held), except after a failed write, which may have
        published its version before it failed: then the newest is read again."""
        if not self._lock.held or self._stale:
            self._lock.acquire(self._lock_timeout)
            self.refresh()
            guarded(self.path, lambda: clean_strays(self.path, self._snap.state))
            self._stale = False
        self._index_keys()

    def _base_state(self) -> State:
        """The state a commit builds on: the current one (a format-1 store's rewritten as format 2
        first: its units and history with the counts format 2 records), or a new store's."""
        state = self._snap.state
        if state is None:
            return State.empty(new_meta(self.dim, self._embedder_info, self._analyzer.to_json(), self.index.to_json()))
        if state.format == 1:
            return _upgraded(state, self._snap)
        return state

    def _commit(self, batch: CommitBatch) -> None:
        before = self._snap.state
        try:
            state = commit(self.path, self._base_state(), batch)
        except BaseException as exc:
            self._stale = True
            if isinstance(exc, StoreWriteError) and exc.broken:
                self._broken = str(exc)
            raise
        self._publish(state, batch.built)
        if before is not None and before.format == state.format and state.depth == 0:
            _remove(self.path, before.chain)  # a checkpoint: the version files before it are named by no version
        if self._merge_mode == "background":
            self._merges.poke()

    def _publish(self, state: State, built: dict | None = None) -> None:
        """Move to ``state``, just committed by this process (its files verified as written;
        ``built``: a small unit's postings and int8 copy, made in memory by the commit)."""
        new = [u for u in state.units if u.hi == state.version] + [a for a in state.anns if a.version == state.version]
        written = [(f.name, f.xxh3) for u in new for f in (u.files.values() if isinstance(u, Unit) else [u.file])]
        with self._state:
            self._snap = Snapshot(self.path, state, previous=self._snap, on_corrupt=self._on_corrupt, written=written, built=built)
            self._index_keys()

    def _close_writes(self) -> None:
        self._merges.stop()
        if self._lock.held and self._broken is None and not self.read_only:
            try:
                with self._write_mutex:
                    clean_strays(self.path, self._snap.state)
            except OSError:
                pass


    def _build_batch(
        self, rows: NewRows, first: int, ingested: int, sups, batch_size: int, progress, supplied: np.ndarray | None = None,
        tokens=None, quantized_all=None, windows=None,
    ) -> CommitBatch:
        """The commit of ``rows``; ``supplied``: the checked embeddings of the call's records, if given (row ``rows.records[i]``);
        ``tokens``: a future of ``tokenize`` of the rows' texts, if one was started; ``quantized_all``: a
        future of ``_quantized(supplied)``, if one was started; ``windows``: (record, vector) of extra
        window vectors made with ``supplied`` by the store's embedder."""
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
        if windows is not None and len(windows[0]) and n:
            pos = np.full(max(rows.records) + 1, -1, dtype=np.int64)
            pos[np.asarray(rows.records, dtype=np.int64)] = np.arange(n)
            at = pos[np.minimum(windows[0], len(pos) - 1)]
            at[windows[0] >= len(pos)] = -1
            keep = at >= 0
            if keep.any():
                win_rows, win_emb = at[keep], windows[1][keep]
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
        (docs/DESIGN.md §2.2's rule; a key on both sides must be the same key) or it has the same key
        and the same date (an exact replay of a superseded version, so re-adding a file never
        brings an old decision back). Rows with different keys are different documents.
        """
        docs = self._fps.docs_of(row.fingerprint)
        stored = list(zip(docs.tolist(), self._snap.keys_of(docs).to_pylist())) if len(docs) else []
        for doc, key in reversed(stored + in_batch):
            if key is not None and row.key is not None and key != row.key:
                continue
            if active(doc, key):
                return doc
            if key is not None and key == row.key:
                when = batch_dates[doc] if doc in batch_dates else int(self._snap.dates[doc])
                if (None if when == NAT else when) == row.date:
                    return doc
        return None

    def _stored_replay(self, row: Row) -> bool:
        """Whether ``row`` re-ingests a stored document (``_duplicate`` against the store alone)."""
        self._index_keys()
        active = lambda doc, key: self._snap.valid_until[doc] == FOREVER  # noqa: E731
        return self._duplicate(row, [], {}, active) is not None

    def _store_view(self) -> StoreView:
        """The current version as :func:`supersession.plan` reads it."""
        self._index_keys()
        snap = self._snap

        def ingested(doc: int) -> int:
            entry, row = snap.locate(doc)
            return int(entry.segment.table.column("ingested_at")[row].value)

        def key_of(doc: int) -> str | None:
            return snap.keys_of([doc])[0].as_py()

        return StoreView(snap.dates, snap.valid_until, self._keys, ingested, key_of)

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


def _remove(store, names) -> None:
    from mempp.storage.fsutil import unlink

    for name in sorted(names):
        try:
            unlink(store / name)
        except OSError:
            pass


def _upgraded(state: State, snap: Snapshot) -> State:
    """A format-1 state as format 2: each unit and history entry with the counts format 2 records
    (counted from the files ``snap`` loaded), so that time travel can cut the units at any version."""
    units, counts = [], {}
    n_sup = n_terms = length = 0
    for u in state.units:
        s = snap.unit_stats.get(u.stem, {"n_sup": 0, "n_terms": 0, "length": 0})
        units.append(replace(u, first_sup=n_sup, n_sup=s["n_sup"], first_term=n_terms, n_terms=s["n_terms"], length=s["length"]))
        n_sup, n_terms, length = n_sup + s["n_sup"], n_terms + s["n_terms"], length + s["length"]
        counts[u.lo] = (n_sup, n_terms, length)
    history, last = [], (0, 0, 0)
    for e in state.recent:
        last = counts.get(e.version, last)
        history.append(replace(e, n_sup=last[0], n_terms=last[1], total_length=last[2]))
    return replace(state, units=units, n_sup=n_sup, n_terms=n_terms, total_length=length, recent=history)


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


