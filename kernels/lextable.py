"""The lexical kernels' view of a snapshot's postings: one table of raw addresses for all segments.

Owns the segment table (one int64 row of addresses and sizes per segment, :func:`segment_table`),
the term index that finds a query term in every segment with a couple of loads, the bitsets of
a segment's common terms (:func:`dense_index`), and the term lookup and IDF over the table
(:func:`lex_lookup`, :func:`lex_idf`). The scoring over it is ``maxscore``. Imports only numpy,
numba and ``intrinsics``; never ``maxscore``, which imports it.

Never imports: maxscore, bm25, mempp.storage.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .intrinsics import popcount

# Columns of a segment table row.
DOCS, TFS, NORMS, TERMS, TSTARTS, TDFS, N_TERMS, N_POST, N_ROWS, BASE, DSLOT, DBITS, N_WORDS, N_DWORDS, NMIN = range(15)
N_COLS = 15
_DTYPES = {
    DOCS: np.int32, TFS: np.uint32, NORMS: np.float64, TERMS: np.int32, TSTARTS: np.int64, TDFS: np.int32,
    DSLOT: np.int32, DBITS: np.uint64, NMIN: np.float64,
}
DENSE_SHARE = 1 / 16  # a term in at least this share of a segment's rows gets a bitset there


@njit(cache=True, nogil=True)
def _fill_bitsets(docs, tstarts, tdfs, slot_of, n_words, bits):
    for a in range(slot_of.shape[0]):
        sl = slot_of[a]
        if sl < 0:
            continue
        off = 2 * sl * n_words
        for p in range(tstarts[a], tstarts[a] + tdfs[a]):
            r = docs[p]
            bits[off + 2 * (r >> 6)] |= np.uint64(1) << np.uint64(r & 63)
        count = np.uint64(0)
        for i in range(n_words):
            bits[off + 2 * i + 1] = count
            count += popcount(bits[off + 2 * i])


def dense_index(docs, tstarts, tdfs, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Bitsets of a segment's common terms: (slot of each term or -1, bits), for :func:`segment_table`.

    A term held by at least ``DENSE_SHARE`` of the rows gets ``2 * ceil(n_rows / 64)`` uint64
    at ``bits[2 * slot * n_words:]``: per 64 rows, the word of rows held (row r: bit r % 64 of
    word r // 64) then how many rows the words before it hold, side by side so one cache line
    serves both. Its posting of row r is at ``start + rank + popcount(lower bits)``: MaxScore
    completes a candidate in a common term without a search. Depends on the postings only
    (not on the store's statistics), so a segment's index outlives snapshots.
    """
    tdfs = np.asarray(tdfs)
    dense = tdfs >= max(1.0, DENSE_SHARE * n_rows)
    slot_of = np.where(dense, np.cumsum(dense) - 1, -1).astype(np.int32)
    n_words = (n_rows + 63) // 64
    bits = np.zeros(2 * int(dense.sum()) * n_words, dtype=np.uint64)
    if len(bits):
        _fill_bitsets(
            np.ascontiguousarray(docs, dtype=np.int32), np.ascontiguousarray(tstarts, dtype=np.int64),
            np.ascontiguousarray(tdfs, dtype=np.int32), slot_of, n_words, bits,
        )
    return slot_of, bits


def segment_table(segments) -> tuple[np.ndarray, tuple, list]:
    """The int64 table (one row per segment) the kernels read postings through, the term index, and what they point into.

    The term index (``off, seg, start, df, slot``) lists, for each term id ``q``, at
    ``off[q]:off[q + 1]``, the segments holding it (in table order) with its run and bitset
    slot there: a query term is found with a couple of loads instead of a binary search in
    every segment's dictionary (cache misses, with many segments).

    ``segments``: (docs, tfs, norms, terms, term_starts, term_dfs, base, dense) per segment, as
    in ``storage.postings.Postings`` (``norms``: :func:`bm25_norms` of the rows' lengths;
    ``dense``: :func:`dense_index` of the segment, or None for none). Arrays of another dtype or
    layout are copied. The caller must keep the returned list alive as long as the table is
    used: the table holds bare addresses.
    """
    table = np.zeros((len(segments), N_COLS), dtype=np.int64)
    keep: list = []
    parts: list = []
    for s, (docs, tfs, norms, terms, starts, dfs, base, dense) in enumerate(segments):
        if dense is None:
            dense = (np.full(len(terms), -1, dtype=np.int32), np.zeros(0, dtype=np.uint64))
        nmin = np.array([np.min(norms) if len(norms) else 0.0], dtype=np.float64)  # bounds from tf alone use it
        cols = (DOCS, TFS, NORMS, TERMS, TSTARTS, TDFS, DSLOT, DBITS, NMIN)
        for col, a in zip(cols, (docs, tfs, norms, terms, starts, dfs, *dense, nmin)):
            a = np.ascontiguousarray(a, dtype=_DTYPES[col])
            if len(a) == 0:
                a = np.zeros(1, dtype=_DTYPES[col])  # a valid address even when empty
            keep.append(a)
            table[s, col] = a.ctypes.data
        table[s, N_TERMS] = len(terms)
        table[s, N_POST] = len(docs)
        table[s, N_ROWS] = len(norms)
        table[s, BASE] = base
        table[s, N_WORDS] = (len(norms) + 63) // 64
        table[s, N_DWORDS] = len(dense[1])
        parts.append((np.asarray(terms, dtype=np.int64), s, starts, dfs, dense[0]))
    index = _term_index(parts)
    return table, index, keep


def _term_index(parts) -> tuple:
    n_terms = max([int(t.max()) + 1 for t, *_ in parts if len(t)] + [0])
    terms = np.concatenate([t for t, *_ in parts]) if parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(terms, kind="stable")  # stable: segments stay in table order within a term
    off = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=off[1:])

    def cat(i, dtype):
        a = np.concatenate([np.asarray(x[i]) for x in parts]) if parts else np.zeros(0)
        return np.ascontiguousarray(a[order], dtype=dtype)

    seg = np.concatenate([np.full(len(t), s_, dtype=np.int32) for t, s_, *_ in parts]) if parts else np.zeros(0, np.int32)
    return off, np.ascontiguousarray(seg[order]), cat(2, np.int64), cat(3, np.int32), cat(4, np.int32)


@njit(cache=True, nogil=True)
def lex_lookup(off, tseg, tstart, tdf, tslot, qterms, starts, ends, df, slots):
    """Each query term's run ``[starts[t, s], ends[t, s])`` in segment ``s``, and its store-wide ``df[t]``.

    ``off, tseg, tstart, tdf, tslot``: the term index of :func:`segment_table`; ``qterms``:
    int64 term ids; a term absent from a segment has an empty run there. ``slots[t, s]``: the
    term's bitset in segment ``s`` (:func:`dense_index`), -1 for none.
    """
    for t in range(qterms.shape[0]):
        df[t] = 0
        for s in range(starts.shape[1]):
            starts[t, s] = 0
            ends[t, s] = 0
            slots[t, s] = -1
        q = qterms[t]
        if q < 0 or q >= off.shape[0] - 1:
            continue
        for e in range(off[q], off[q + 1]):
            s = tseg[e]
            starts[t, s] = tstart[e]
            ends[t, s] = tstart[e] + tdf[e]
            df[t] += tdf[e]
            slots[t, s] = tslot[e]


@njit(cache=True, nogil=True)
def lex_idf(n_docs, df, out):
    """``out[t] = ln(1 + (N - df + 0.5) / (df + 0.5))`` (Lucene), as :func:`lex_query` weighs the terms."""
    for t in range(df.shape[0]):
        d = float(df[t])
        out[t] = math.log1p((n_docs - d + 0.5) / (d + 0.5))
