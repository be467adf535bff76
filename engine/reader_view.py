"""One version as one reader sees it: only the documents a principal may read (docs/DESIGN.md §8.3).

A :class:`ReaderView` stands for a snapshot in every stage of the read path, and answers every
question the stages ask of it as a store holding only the readable documents would: a document
the reader may not read is never valid (``valid_until`` is NAT, as a document of an unreadable
segment), BM25's N, its documents' mean length and each term's document frequency count the
readable documents only, thread neighbours and thread sizes skip the others, and so does
``has_threads``. The arrays stay indexed by the store's doc ids, so nothing is copied but the
per-document validity and the thread links. A document's supersession state is its own: one
replaced by a document the reader may not read stays replaced from that date (its evidence
says "superseded on ...", without naming the replacement).

Owns :class:`ReaderView` and :class:`ReadableFacet`. Built once per version and readable set
(``Searcher.reader``).

Never imports: store, searcher, writer, planner, cli, onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mempp.storage import NAT
from mempp.storage.columns import code_links


class ReadableFacet:
    """A facet (authors, threads, channels) of a view: the store's codes and names; ``counts``
    count the readable documents only (a thread's size, as the thread stage reads it)."""

    def __init__(self, facet: Any, readable: np.ndarray) -> None:
        self._facet = facet
        self._readable = readable
        self._counts: np.ndarray | None = None
        self._first: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._facet, name)

    @property
    def base(self) -> Any:
        """The store's facet this one counts within."""
        return self._facet

    def counts(self) -> np.ndarray:
        if self._counts is None:
            codes = self._facet.codes[self._readable]
            self._counts = np.bincount(codes[codes >= 0], minlength=len(self._facet.names))
        return self._counts

    def first_seen(self) -> np.ndarray:
        """By code: the first readable document that has the value (n_docs where none does), the
        order a store of the readable documents alone would list the values in (computed once)."""
        if self._first is None:
            codes = self._facet.codes[: len(self._readable)]
            first = np.full(len(self._facet.names), len(codes), dtype=np.int64)
            ids = np.flatnonzero(self._readable & (codes >= 0))
            np.minimum.at(first, codes[ids], ids)
            self._first = first
        return self._first

    def in_readable_order(self, names: Any) -> list[str]:
        """``names`` (values of this facet) in the order a store of the readable documents lists them."""
        if len(names) < 2:
            return list(names)
        first = self.first_seen()
        return sorted(names, key=lambda n: (first[self._facet.index[n]], self._facet.index[n]))

    @property
    def readable_names(self) -> list[str]:
        """The names of the values some readable document has ("" for the others), by code."""
        counts = self.counts()
        return [n if counts[c] else "" for c, n in enumerate(self._facet.names)]


class ReaderView:
    """``snap`` as a store holding only the documents ``readable`` (one bool per doc id) marks."""

    def __init__(self, snap: Any, readable: np.ndarray) -> None:
        self._snap = snap
        self.readable = np.ascontiguousarray(readable[: snap.n_docs], dtype=np.bool_)
        self.n_global = int(self.readable.sum())  # BM25's N: the readable documents
        self.valid_until = np.where(self.readable, snap.valid_until, NAT)
        lengths = np.concatenate([e.segment.lengths for e in snap.segments]) if snap.segments else np.zeros(0, np.float32)
        total = int(lengths[self.readable[: len(lengths)]].astype(np.int64).sum())
        self.avg_length = total / self.n_global if self.n_global else 0.0
        self.authors = ReadableFacet(snap.authors, self.readable)
        self.threads = ReadableFacet(snap.threads, self.readable)
        self.channels = ReadableFacet(snap.channels, self.readable)
        self.ann: list = []  # the reader's answers come from the exact scans (a store of its own has no index)
        self._links: tuple[np.ndarray, np.ndarray] | None = None
        self._has_threads: bool | None = None
        self._every: np.ndarray | None = None  # every term's readable frequency (every_df)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._snap, name)

    @property
    def snapshot(self) -> Any:
        """The snapshot this view reads."""
        return self._snap

    @property
    def thread_links(self) -> tuple[np.ndarray, np.ndarray]:
        """(prev, next) among the readable documents of each thread, in ingest order (−1: none)."""
        if self._links is None:
            codes = np.where(self.readable, self._snap.threads.codes[: self._snap.n_docs], -1)
            prev, nxt, _ = code_links(codes, len(self._snap.threads.names))
            self._links = (prev, nxt)
        return self._links

    @property
    def has_threads(self) -> bool:
        if self._has_threads is None:
            self._has_threads = bool((self.thread_links[0] >= 0).any())
        return self._has_threads

    def reader_df(self, ids: np.ndarray) -> np.ndarray:
        """Each term's document frequency among the readable documents (callers only read them)."""
        every = self.every_df()  # at least one entry
        ids = np.asarray(ids, dtype=np.int64)
        inside = ids < len(every)
        return np.where(inside, every[np.where(inside, ids, 0)], 0)

    def every_df(self) -> np.ndarray:
        """Every term's document frequency among the readable documents, by term id: counted once per
        view from every segment's postings (one pass over them), so each query's lookups are reads."""
        if self._every is None:
            out = np.zeros(max(len(self._snap.term_ids), 1), dtype=np.int64)
            for e in self._snap.segments:
                post = e.postings
                if len(post.terms):
                    mine = self.readable[e.base : e.base + e.segment.n].view(np.uint8)
                    docs = post.docs
                    if len(docs) and int(docs.max()) >= len(mine):  # a row past the segment's (never written so): not readable
                        mine = np.concatenate([mine, np.zeros(int(docs.max()) + 1 - len(mine), dtype=np.uint8)])
                    ok = mine[docs]
                    terms = np.asarray(post.terms, dtype=np.int64)
                    grow = int(terms.max()) + 1 - len(out)
                    if grow > 0:
                        out = np.concatenate([out, np.zeros(grow, dtype=np.int64)])
                    if len(ok):
                        starts = np.minimum(np.asarray(post.starts, dtype=np.int64), len(ok) - 1)
                        counts = np.add.reduceat(ok, starts, dtype=np.int64)
                        out[terms] += np.where(np.asarray(post.dfs) > 0, counts, 0)  # a term once per segment
            self._every = out
        return self._every
