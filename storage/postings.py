"""Per-segment postings: for each term of the segment, the rows holding it and their term frequencies.

Two arrays sorted by (term, row): ``docs`` (int32 local row) and ``tfs``
(uint32), plus a term index (``terms`` sorted int32 ids, ``starts``, ``dfs``).
Opening a store maps these files; nothing is re-tokenized.

Owns that layout (:class:`Postings`): building it from a batch's term ids (``kernels.invert``),
merging runs of it, its Arrow tables, mapping it back and looking terms up.

Never imports: segment, snapshot, writer, mempp.store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from .arrowio import map_table, numeric


@dataclass
class Postings:
    terms: np.ndarray  # int32, sorted, unique
    starts: np.ndarray  # int64, start of each term's run in docs/tfs
    dfs: np.ndarray  # int32, run length = document frequency in this segment
    docs: np.ndarray  # int32 local rows
    tfs: np.ndarray  # uint32

    @classmethod
    def build(cls, doc_terms: Sequence[np.ndarray]) -> "Postings":
        """``doc_terms[row]``: the term ids of that row's text (repeats allowed)."""
        if not doc_terms:
            return cls.empty()
        lens = np.fromiter((len(t) for t in doc_terms), dtype=np.int64, count=len(doc_terms))
        if lens.sum() == 0:
            return cls.empty()
        terms = np.concatenate([np.asarray(t, dtype=np.int64) for t in doc_terms])
        rows = np.repeat(np.arange(len(doc_terms), dtype=np.int64), lens)
        # Unique (term, row) pairs with counts = term frequencies, sorted by term then row.
        pair = terms * len(doc_terms) + rows
        pair_u, tfs = np.unique(pair, return_counts=True)
        p_terms = pair_u // len(doc_terms)
        p_rows = pair_u % len(doc_terms)
        u_terms, starts, dfs = np.unique(p_terms, return_index=True, return_counts=True)
        return cls(
            terms=u_terms.astype(np.int32),
            starts=starts.astype(np.int64),
            dfs=dfs.astype(np.int32),
            docs=p_rows.astype(np.int32),
            tfs=tfs.astype(np.uint32),
        )

    @classmethod
    def build_flat(cls, flat: np.ndarray, lengths: np.ndarray) -> "Postings":
        """The same postings as :meth:`build`, from all rows' term ids back to back and each row's count."""
        from mempp.kernels.invert import invert

        if len(flat) == 0:
            return cls.empty()
        flat = np.ascontiguousarray(flat, dtype=np.int64)
        lo = int(flat.min())  # counting sort over the batch's id range only
        terms, starts, dfs, docs, tfs = invert(flat, np.ascontiguousarray(lengths, dtype=np.int64), int(flat.max()) - lo + 1, lo)
        return cls(terms=terms, starts=starts, dfs=dfs, docs=docs, tfs=tfs)

    @classmethod
    def empty(cls) -> "Postings":
        z32 = np.zeros(0, dtype=np.int32)
        return cls(z32, np.zeros(0, dtype=np.int64), z32, z32, np.zeros(0, dtype=np.uint32))

    def head(self, n: int) -> "Postings":
        """The postings of rows ``< n`` only (an earlier version's view of a merged segment)."""
        keep = self.docs < n
        if keep.all():
            return self
        terms = np.repeat(self.terms, self.dfs)[keep]
        u_terms, starts, dfs = np.unique(terms, return_index=True, return_counts=True)
        return Postings(
            terms=u_terms.astype(np.int32), starts=starts.astype(np.int64), dfs=dfs.astype(np.int32),
            docs=np.ascontiguousarray(self.docs[keep]), tfs=np.ascontiguousarray(self.tfs[keep]),
        )

    @classmethod
    def merge(cls, parts: list[tuple["Postings", int]]) -> "Postings":
        """One segment's postings from consecutive segments' (``(postings, row offset)`` in order):
        equal to :meth:`build_flat` over all their rows, sorted by term then row."""
        parts = [(p, off) for p, off in parts if len(p.docs)]
        if not parts:
            return cls.empty()
        terms = np.concatenate([np.repeat(p.terms, p.dfs) for p, _ in parts])
        docs = np.concatenate([p.docs.astype(np.int64) + off for p, off in parts])
        tfs = np.concatenate([p.tfs for p, _ in parts])
        order = np.argsort(terms, kind="stable")  # within a term, segments in order and rows ascending in each
        terms = terms[order]
        u_terms, starts, dfs = np.unique(terms, return_index=True, return_counts=True)
        return cls(
            terms=u_terms.astype(np.int32), starts=starts.astype(np.int64), dfs=dfs.astype(np.int32),
            docs=docs[order].astype(np.int32), tfs=tfs[order].astype(np.uint32),
        )

    def lookup(self, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each query term id: (start, end, df) in this segment; absent terms give an empty run."""
        if not len(self.terms):
            z = np.zeros(len(term_ids), dtype=np.int64)
            return z, z, z
        pos = np.minimum(np.searchsorted(self.terms, term_ids), len(self.terms) - 1)
        found = self.terms[pos] == term_ids
        starts = np.where(found, self.starts[pos], 0).astype(np.int64)
        dfs = np.where(found, self.dfs[pos], 0).astype(np.int64)
        return starts, starts + dfs, dfs

    def tables(self) -> tuple[pa.Table, pa.Table]:
        """(postings file, term index file) as the Arrow tables they hold."""
        post = pa.table({"doc": pa.array(self.docs, pa.int32()), "tf": pa.array(self.tfs, pa.uint32())})
        index = pa.table(
            {
                "term": pa.array(self.terms, pa.int32()),
                "start": pa.array(self.starts, pa.int64()),
                "df": pa.array(self.dfs, pa.int32()),
            }
        )
        return post, index

    @classmethod
    def open(cls, post_path: Path, index_path: Path) -> "Postings":
        post = map_table(post_path)
        index = map_table(index_path)
        return cls(
            terms=_np(index, "term"),
            starts=_np(index, "start"),
            dfs=_np(index, "df"),
            docs=_np(post, "doc"),
            tfs=_np(post, "tf"),
        )


def _np(table: pa.Table, name: str) -> np.ndarray:
    col = table.column(name)
    if col.num_chunks == 0:
        return np.zeros(0, dtype=col.type.to_pandas_dtype())
    return numeric(col.chunk(0))
