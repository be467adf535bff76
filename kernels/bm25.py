"""BM25 (Lucene's formula) over per-segment postings, restricted to a candidate mask.

Statistics (N, df, average length) are global to the store and passed in, so
appending a segment never rewrites an old one and a filter never changes the
score of a candidate.

Postings of one segment are CSR-like: for each query term the caller passes
``[start, end)`` into the segment's ``post_docs`` (int32, local row) and
``post_tfs`` (float32 or any numeric). Scores accumulate into a dense global
``scores`` array (float32, length N, all zero between queries) and every
document touched for the first time is appended to ``touched`` so selection
and clean-up cost O(touched), not O(N).

Owns Lucene's BM25 formula (:func:`bm25_idf`, :func:`bm25_norms`), its accumulation over postings
into a dense score array, and the selection and clearing of the touched documents.

Never imports: cosine, context, mempp.storage, mempp.store.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .maxscore import seek
from .topk import heap_push, heap_sorted


def bm25_idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))`` for each term; float64."""
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


@njit(cache=True, nogil=True)
def bm25_accumulate(
    post_docs,
    post_tfs,
    starts,
    ends,
    term_weights,
    doc_len,
    avgdl,
    k1,
    b,
    mask,
    base,
    scores,
    touched,
    n_touched,
):
    """Add one segment's BM25 contributions for the query terms; return the new touched count.

    ``term_weights[t]`` is the term's IDF (times its query weight); ``doc_len``
    holds the segment's document lengths (local rows); ``mask`` is a global
    uint8/bool candidate mask; ``base`` is the segment's first global index.
    """
    inv_avg = 1.0 / avgdl if avgdl > 0 else 0.0
    for t in range(starts.shape[0]):
        w = term_weights[t]
        for p in range(starts[t], ends[t]):
            local = post_docs[p]
            g = base + local
            if not mask[g]:
                continue
            tf = float(post_tfs[p])
            norm = k1 * (1.0 - b + b * doc_len[local] * inv_avg)
            contrib = w * tf * (k1 + 1.0) / (tf + norm)
            if scores[g] == 0.0:
                touched[n_touched] = g
                n_touched += 1
            scores[g] += contrib
    return n_touched


@njit(cache=True, nogil=True)
def topk_touched(scores, touched, n_touched, k, out_ids, out_scores):
    """Best ``k`` of the touched documents into ``out_*`` (best first); return how many."""
    hs = np.empty(max(k, 1), dtype=scores.dtype)
    hi = np.empty(max(k, 1), dtype=np.int64)
    n = 0
    for j in range(n_touched):
        g = touched[j]
        n = heap_push(hs, hi, n, k, scores[g], g)
    return heap_sorted(hs, hi, n, out_scores, out_ids)


@njit(cache=True, nogil=True)
def clear_touched(scores, touched, n_touched):
    """Reset the accumulator so it is all zero again."""
    for j in range(n_touched):
        scores[touched[j]] = 0.0




@njit(cache=True, nogil=True)
def bm25_norms(doc_len, avgdl, k1, b, out):
    """``out[i] = k1 * (1 - b + b * doc_len[i] / avgdl)``: the per-document part of the BM25 denominator."""
    inv_avg = 1.0 / avgdl if avgdl > 0 else 0.0
    for i in range(doc_len.shape[0]):
        out[i] = k1 * (1.0 - b + b * doc_len[i] * inv_avg)


@njit(cache=True, nogil=True)
def bm25_accumulate_dense(post_docs, post_tfs, starts, ends, term_weights, norms, k1, base, scores):
    """Add one segment's BM25 contributions for the query terms to ``scores``, for every document.

    The branch-free form of :func:`bm25_accumulate` for queries whose postings cover a large
    share of the store: no mask test and no touched list per posting (both mispredict on a
    random candidate set); the mask is applied once, by :func:`dense_topk`. ``norms`` is
    :func:`bm25_norms` of the segment's lengths. Same arithmetic, same order, same scores.
    """
    for t in range(starts.shape[0]):
        w = term_weights[t]
        for p in range(starts[t], ends[t]):
            local = post_docs[p]
            tf = float(post_tfs[p])
            scores[base + local] += w * tf * (k1 + 1.0) / (tf + norms[local])


@njit(cache=True, nogil=True)
def dense_topk(scores, mask, k, out_ids, out_scores):
    """Best ``k`` documents with a positive score among the masked ones, best first; return how many.

    Zeroes ``scores`` as it goes, so the accumulator is ready for the next query. The mask
    multiplies the score instead of branching (a random candidate set defeats the branch
    predictor), and the heap is only called for a score that beats its current worst.
    """
    hs = np.empty(max(k, 1), dtype=scores.dtype)
    hi = np.empty(max(k, 1), dtype=np.int64)
    n = 0
    floor = 0.0  # scores must be positive; once the heap is full, at least its worst
    for g in range(scores.shape[0]):
        s = scores[g] * (mask[g] != 0)
        scores[g] = 0.0
        if s > floor or (s == floor and s > 0.0 and n == k):
            n = heap_push(hs, hi, n, k, s, g)
            if n == k:
                floor = hs[0]
    return heap_sorted(hs, hi, n, out_scores, out_ids)


@njit(cache=True, nogil=True)
def bm25_probe(post_docs, post_tfs, start, end, weight, norms, k1, base, docs, scores):
    """Add one term's contribution to the given documents only (MaxScore's non-essential terms).

    ``docs``: sorted global ids inside this segment; each is looked up in the term's run
    ``post_docs[start:end]`` (sorted rows) with MaxScore's own search (``maxscore.seek``),
    resuming where the previous one ended.
    """
    lo = start
    for i in range(docs.shape[0]):
        local = docs[i] - base
        a = seek(post_docs, lo, end, local)
        lo = a
        if a < end and post_docs[a] == local:
            tf = float(post_tfs[a])
            scores[docs[i]] += weight * tf * (k1 + 1.0) / (tf + norms[local])
