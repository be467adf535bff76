"""What one commit of new documents holds: rows matched against the stored ones, embedded,
analyzed and laid out as a :class:`~mempp.storage.CommitBatch` (docs/DESIGN.md §2, §5).

Owns :class:`BatchBuilder` (re-ingests told apart from new rows, the supersessions the write
records by ``supersession.plan``, the batch's embeddings, term ids and int8 copy) and the
helpers the writer calls while a batch is checked. It decides nothing about when a commit
happens or who may write: that is ``mempp.writer``'s.

Never imports: store, searcher, writer, planner, onnxruntime.
"""

from __future__ import annotations

import gc
import itertools
from typing import Callable

import numpy as np

from mempp.kernels import quantize_rows
from mempp.storage import FOREVER, NAT, Analyzer, CommitBatch, Snapshot, now_us
from mempp.storage.analyzer import tokenize

from .config import IndexConfig
from .dates import iso
from .docindex import DocIndex
from .embedder import Embedder
from .errors import ValidationError
from .ingest import NewRows, Plain, Row, check_embeddings
from .supersession import Chains, Item, StoreView, plan


def render_row(index, row: Row) -> str:
    """What the store's embedder embeds for a checked record (``IndexConfig.embed_template``)."""
    return index.render(
        row.text, author=row.author, date=(iso(row.date) or "")[:10], thread=row.thread, channel=row.channel, source=row.source
    )


def checked_windows(vectors: np.ndarray, dim: int) -> np.ndarray:
    """Supplied window vectors as unit float32 rows (a NaN or a wrong dimension is refused)."""
    try:
        return check_embeddings(vectors, len(vectors), dim)
    except ValidationError as exc:
        raise ValidationError(exc.message, field="embedding_windows", record=exc.record) from None




class BatchBuilder:
    """Builds the commit of checked rows on one version ``snap`` (the writer's, under its lock)."""

    def __init__(self, snap: Snapshot, docs: DocIndex, analyzer: Analyzer, index: IndexConfig, embedder: Callable[[], Embedder], dim: int):
        self.snap, self.docs, self.analyzer, self.index, self.dim = snap, docs, analyzer, index, dim
        self._embedder = embedder
        docs.extend(snap)

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    def add_rows(
        self, rows: list[Row | None] | Plain, supplied, batch_size, progress, tokens, quantized=None, windows=None, backdate=False
    ) -> tuple[list[int | None], CommitBatch | None]:
        """The results of adding the checked ``rows`` (or a :class:`Plain` batch, its fingerprints
        set) to the current version, and the commit that adds them (None when nothing is new).
        ``windows``: (record, vector) of the rows' extra window vectors, when ``supplied`` was made
        by the store's own embedder; ``backdate``: True, False, or the set of records it is True for.
        The supersessions are :func:`supersession.plan`'s. Call with the writer's state held (``_begin_write``)."""
        snap = self.snap
        ingested = now_us()
        if isinstance(rows, Plain):
            fp_list = rows.fingerprints
            if len(set(fp_list)) == len(fp_list) and not self.docs.fingerprints.contains(np.asarray(fp_list, dtype=np.uint64)).any():
                # No row can re-ingest a stored one or another of the batch, and with no ids none
                # supersedes: every row is new, as the loop below would find one row at a time.
                ids: list[int | None] = [None] * rows.n_records
                for rec, doc_id in zip(rows.records, range(snap.n_docs, snap.n_docs + len(rows.records))):
                    ids[rec] = doc_id
                if rows.records:
                    if tokens is not None:
                        tokens = tokens[1]
                    batch = self.build(
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
        view = self.store_view()
        known = Chains(view)  # the store's versions and this batch's rows so far: which are active
        fps = np.fromiter((r.fingerprint for r in rows if r is not None), dtype=np.uint64)
        stored_fps = set(fps[self.docs.fingerprints.contains(fps)].tolist())  # the batch's fingerprints some stored row has
        for row in rows:
            if row is None:
                results.append(None)
                continue
            in_batch = batch_fps.get(row.fingerprint)
            if in_batch is not None or row.fingerprint in stored_fps:  # else no row can be the same document
                dup = self.duplicate(row, in_batch or [], batch_dates, known.active)
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
            batch = self.build(
                NewRows.of(new_rows), snap.n_docs, ingested, sups, batch_size, progress, supplied, tokens, quantized, windows
            )
            return results, batch
        return results, None

    def embed_rows(self, rows: list[Row | None], batch_size: int, progress) -> tuple[np.ndarray, tuple | None]:
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

    def build(
        self, rows: NewRows, first: int, ingested: int, sups, batch_size: int, progress, supplied: np.ndarray | None = None,
        tokens=None, quantized_all=None, windows=None,
    ) -> CommitBatch:
        """The commit of ``rows``; ``supplied``: the checked embeddings of the call's records, if given (row ``rows.records[i]``);
        ``tokens``: a future of ``tokenize`` of the rows' texts, if one was started; ``quantized_all``: a
        future of ``quantized_copy(supplied)``, if one was started; ``windows``: (record, vector) of extra
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
        term_ids = self.snap.term_ids
        new_terms: dict[str, int] = {}
        base_terms = self.snap.n_terms

        def intern(term: str) -> int:
            tid = term_ids.get(term)
            if tid is None:
                tid = new_terms.get(term)
                if tid is None:
                    tid = new_terms[term] = base_terms + len(new_terms)
            return tid

        if tokens is not None:
            flat, lengths = self.analyzer.intern_tokens(tokens.result(), intern, term_ids)
        else:
            flat, lengths = self.analyzer.term_ids(rows.texts, intern)
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
            quantized = quantized_copy(emb) if quantized_all is None else quantized_all.result()
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

    def duplicate(self, row: Row, in_batch: list, batch_dates: dict[int, int | None], active) -> int | None:
        """The stored document ``row`` re-ingests, if any.

        Same author and whitespace-normalized text, and either the stored row is active
        (docs/DESIGN.md §2.2's rule; a key on both sides must be the same key) or it has the same key
        and the same date (an exact replay of a superseded version, so re-adding a file never
        brings an old decision back). Rows with different keys are different documents.
        """
        docs = self.docs.fingerprints.docs_of(row.fingerprint)
        stored = list(zip(docs.tolist(), self.snap.keys_of(docs).to_pylist())) if len(docs) else []
        for doc, key in reversed(stored + in_batch):
            if key is not None and row.key is not None and key != row.key:
                continue
            if active(doc, key):
                return doc
            if key is not None and key == row.key:
                when = batch_dates[doc] if doc in batch_dates else int(self.snap.dates[doc])
                if (None if when == NAT else when) == row.date:
                    return doc
        return None

    def stored_replay(self, row: Row) -> bool:
        """Whether ``row`` re-ingests a stored document (:meth:`duplicate` against the store alone)."""
        active = lambda doc, key: self.snap.valid_until[doc] == FOREVER  # noqa: E731
        return self.duplicate(row, [], {}, active) is not None

    def store_view(self) -> StoreView:
        """This version as :func:`supersession.plan` reads it."""
        snap = self.snap

        def ingested(doc: int) -> int:
            entry, row = snap.locate(doc)
            return int(entry.segment.table.column("ingested_at")[row].value)

        def key_of(doc: int) -> str | None:
            return snap.keys_of([doc])[0].as_py()

        return StoreView(snap.dates, snap.valid_until, self.docs.keys_view(snap.n_docs), ingested, key_of)


def quantized_copy(emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The int8 copy of ``emb`` and its row scales (``kernels.quantize_rows``)."""
    out = (np.empty(emb.shape, dtype=np.int8), np.empty(len(emb), dtype=np.float32))
    quantize_rows(emb, *out)
    return out


def record_texts(docs: list) -> list[str] | None:
    """Each record's text, when every record is a dict whose text is a string (else None)."""
    if not all(type(d) is dict for d in docs):
        return None
    texts = list(map(dict.get, docs, itertools.repeat("text")))
    return texts if all(type(t) is str for t in texts) else None


def tokens_of_rows(all_tokens, keep: np.ndarray, texts: Callable[[], list[str]]) -> tuple:
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


class CyclicGCPaused:
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
