"""The lexical leg's top ``k`` over every segment in one kernel call: document-at-a-time MaxScore.

A store has many segments, each with its own postings (``storage.postings``); calling a
kernel per segment and per term costs more in Python than the scoring itself on a small
query. Here the segments are described once per snapshot by a table of raw addresses
(:func:`segment_table`, one int64 row per segment), and one call looks up the query terms
in every segment (:func:`lex_lookup`) and one more ranks (:func:`lex_topk`).

MaxScore (Turtle and Flood, 1995), document at a time: the query terms are ordered by their
upper bound ``idf * (k1 + 1)``; the longest prefix of low-bound terms whose bounds sum to
less than the score to beat (the heap's worst once it holds ``k``) is *non-essential*: a
document holding only those cannot enter the top ``k``. Documents are enumerated from the
essential terms' postings only (merged in row order), and the non-essential terms are looked
up (galloping search, the cursors only move forward) for a document whose partial score
plus their bounds can still beat the heap. Exact: the same top ``k`` as scoring every
document, ties to the higher id (documents come in increasing id order, so a later
document that equals the heap's worst replaces it, as in :func:`heap_push`).

Scores are float64 sums of the terms' float64 contributions, added in one fixed order
(terms by decreasing bound), whatever was pruned.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba.core.extending import intrinsic

from .topk import heap_push, heap_sorted

# Columns of a segment table row.
DOCS, TFS, NORMS, TERMS, TSTARTS, TDFS, N_TERMS, N_POST, N_ROWS, BASE = range(10)
N_COLS = 10
_DTYPES = {DOCS: np.int32, TFS: np.uint32, NORMS: np.float64, TERMS: np.int32, TSTARTS: np.int64, TDFS: np.int32}
BOUND_MARGIN = 1e-9  # relative slack on the bounds, far above float64 rounding of a few additions


@intrinsic
def _voidptr(typingctx, addr):
    """An int64 address as a void pointer (for ``numba.carray``)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return types.voidptr(types.int64), codegen


def segment_table(segments) -> tuple[np.ndarray, list]:
    """The int64 table (one row per segment) the kernels read postings through, and what it points into.

    ``segments``: (docs, tfs, norms, terms, term_starts, term_dfs, base) per segment, as in
    ``storage.postings.Postings`` (``norms``: :func:`bm25_norms` of the rows' lengths). Arrays of
    another dtype or layout are copied. The caller must keep the returned list alive as long as
    the table is used: the table holds bare addresses.
    """
    table = np.zeros((len(segments), N_COLS), dtype=np.int64)
    keep: list = []
    for s, (docs, tfs, norms, terms, starts, dfs, base) in enumerate(segments):
        for col, a in zip((DOCS, TFS, NORMS, TERMS, TSTARTS, TDFS), (docs, tfs, norms, terms, starts, dfs)):
            a = np.ascontiguousarray(a, dtype=_DTYPES[col])
            if len(a) == 0:
                a = np.zeros(1, dtype=_DTYPES[col])  # a valid address even when empty
            keep.append(a)
            table[s, col] = a.ctypes.data
        table[s, N_TERMS] = len(terms)
        table[s, N_POST] = len(docs)
        table[s, N_ROWS] = len(norms)
        table[s, BASE] = base
    return table, keep


@njit(cache=True, nogil=True)
def lex_lookup(table, qterms, starts, ends, df):
    """Each query term's run ``[starts[t, s], ends[t, s])`` in segment ``s``, and its store-wide ``df[t]``.

    ``qterms``: int64 term ids; an id absent from a segment gives an empty run there.
    """
    n_seg = table.shape[0]
    for t in range(qterms.shape[0]):
        df[t] = 0
    for s in range(n_seg):
        nt = table[s, N_TERMS]
        terms = carray(_voidptr(table[s, TERMS]), nt, np.int32)
        tstarts = carray(_voidptr(table[s, TSTARTS]), nt, np.int64)
        tdfs = carray(_voidptr(table[s, TDFS]), nt, np.int32)
        for t in range(qterms.shape[0]):
            q = qterms[t]
            a = 0
            b = nt
            while a < b:
                m = (a + b) >> 1
                if terms[m] < q:
                    a = m + 1
                else:
                    b = m
            if a < nt and terms[a] == q:
                starts[t, s] = tstarts[a]
                ends[t, s] = tstarts[a] + tdfs[a]
                df[t] += tdfs[a]
            else:
                starts[t, s] = 0
                ends[t, s] = 0


@njit(cache=True, inline="always")
def _gallop(docs, lo, end, target):
    """First position in ``docs[lo:end]`` (sorted) holding a row >= ``target``; ``end`` when none."""
    if lo >= end or docs[lo] >= target:
        return lo
    step = 1
    hi = lo + 1
    while hi < end and docs[hi] < target:
        lo = hi
        step <<= 1
        hi = lo + step
    if hi > end:
        hi = end
    # docs[lo] < target; docs[hi] >= target or hi == end
    a = lo + 1
    b = hi
    while a < b:
        m = (a + b) >> 1
        if docs[m] < target:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True, nogil=True)
def lex_topk(table, starts, ends, weights, k1, mask, k, out_ids, out_scores, stats):
    """Best ``k`` masked documents by BM25 over all segments into ``out_*`` (best first); return how many.

    ``starts``/``ends``: :func:`lex_lookup`'s runs; ``weights[t]``: the term's idf. Documents
    score ``sum_t w_t tf (k1 + 1) / (tf + norm)`` over the terms they hold, ``norm`` from the
    table's per-row ``norms``. ``stats`` (int64, 2): documents enumerated from the essential
    terms, and documents scored in full.
    """
    nt = weights.shape[0]
    n_seg = table.shape[0]
    stats[0] = 0
    stats[1] = 0
    if nt == 0 or k <= 0:
        return 0
    # Terms by increasing bound: position j of `order` is term order[j].
    ub = np.empty(nt, dtype=np.float64)
    for t in range(nt):
        ub[t] = weights[t] * (k1 + 1.0)
    order = np.argsort(ub, kind="mergesort")
    w = np.empty(nt, dtype=np.float64)
    prefix = np.empty(nt + 1, dtype=np.float64)  # prefix[j]: bound on what terms order[:j] add together
    prefix[0] = 0.0
    for j in range(nt):
        w[j] = weights[order[j]]
        prefix[j + 1] = prefix[j] + ub[order[j]]
    for j in range(nt + 1):
        prefix[j] = prefix[j] * (1.0 + BOUND_MARGIN)
    hs = np.empty(k, dtype=np.float64)
    hi = np.empty(k, dtype=np.int64)
    n = 0
    theta = -1.0  # the score to beat; scores are positive, so -1 admits everything until the heap is full
    ness = 0  # terms order[:ness] are non-essential
    pos = np.empty(nt, dtype=np.int64)
    end = np.empty(nt, dtype=np.int64)
    big = np.int64(1) << 40
    scanned = 0
    scored = 0
    for s in range(n_seg):
        n_post = table[s, N_POST]
        docs = carray(_voidptr(table[s, DOCS]), n_post, np.int32)
        tfs = carray(_voidptr(table[s, TFS]), n_post, np.uint32)
        norms = carray(_voidptr(table[s, NORMS]), table[s, N_ROWS], np.float64)
        base = table[s, BASE]
        live = False
        for j in range(nt):
            pos[j] = starts[order[j], s]
            end[j] = ends[order[j], s]
            live = live or pos[j] < end[j]
        if not live:
            continue
        while True:
            # The next row any essential term holds.
            d = big
            for j in range(ness, nt):
                if pos[j] < end[j]:
                    r = docs[pos[j]]
                    if r < d:
                        d = r
            if d == big:
                break
            scanned += 1
            nrm = norms[d]
            score = 0.0
            for j in range(nt - 1, ness - 1, -1):
                p = pos[j]
                if p < end[j] and docs[p] == d:
                    tf = float(tfs[p])
                    score += w[j] * tf * (k1 + 1.0) / (tf + nrm)
                    pos[j] = p + 1
            g = base + d
            if score + prefix[ness] < theta or not mask[g]:
                continue
            ok = True
            for j in range(ness - 1, -1, -1):
                if score + prefix[j + 1] < theta:
                    ok = False
                    break
                p = _gallop(docs, pos[j], end[j], d)
                pos[j] = p
                if p < end[j] and docs[p] == d:
                    tf = float(tfs[p])
                    score += w[j] * tf * (k1 + 1.0) / (tf + nrm)
                    pos[j] = p + 1
            if not ok:
                continue
            scored += 1
            n = heap_push(hs, hi, n, k, score, g)
            if n == k and hs[0] > theta:
                theta = hs[0]
                while ness < nt and prefix[ness + 1] < theta:
                    ness += 1
    stats[0] = scanned
    stats[1] = scored
    return heap_sorted(hs, hi, n, out_scores, out_ids)


@njit(cache=True, nogil=True)
def lex_score_docs(table, starts, ends, weights, k1, docs, out):
    """``out[i]``: the BM25 score of global document ``docs[i]`` (sorted, increasing), as :func:`lex_topk` sums it."""
    nt = weights.shape[0]
    n_seg = table.shape[0]
    ub = np.empty(nt, dtype=np.float64)
    for t in range(nt):
        ub[t] = weights[t]
    order = np.argsort(ub, kind="mergesort")
    pos = np.empty(nt, dtype=np.int64)
    i = 0
    for s in range(n_seg):
        base = table[s, BASE]
        rows = table[s, N_ROWS]
        while i < docs.shape[0] and docs[i] < base:
            out[i] = 0.0  # before this segment and not in an earlier one: no such document
            i += 1
        if i >= docs.shape[0]:
            break
        if docs[i] >= base + rows:
            continue
        n_post = table[s, N_POST]
        pdocs = carray(_voidptr(table[s, DOCS]), n_post, np.int32)
        tfs = carray(_voidptr(table[s, TFS]), n_post, np.uint32)
        norms = carray(_voidptr(table[s, NORMS]), rows, np.float64)
        for j in range(nt):
            pos[j] = starts[order[j], s]
        while i < docs.shape[0] and docs[i] < base + rows:
            d = docs[i] - base
            score = 0.0
            for j in range(nt - 1, -1, -1):
                e = ends[order[j], s]
                p = _gallop(pdocs, pos[j], e, d)
                pos[j] = p
                if p < e and pdocs[p] == d:
                    tf = float(tfs[p])
                    score += weights[order[j]] * tf * (k1 + 1.0) / (tf + norms[d])
            out[i] = score
            i += 1
    while i < docs.shape[0]:
        out[i] = 0.0
        i += 1
