"""Exact masked inner-product top-k over an embedding matrix.

Embeddings are stored L2-normalized, so the inner product is the cosine.
One call scans one segment (rows ``[0, n)`` of ``emb``, global index
``base + row``) and feeds a heap that the caller keeps across segments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .topk import heap_push


@njit(cache=True, nogil=True, fastmath=True)
def _dot(a, b):
    acc = np.float32(0.0)  # a float32 accumulator keeps the loop in SIMD registers (2x faster than float64)
    for j in range(a.shape[0]):
        acc += a[j] * b[j]
    return acc


@njit(cache=True, nogil=True)
def masked_dot_topk(emb, query, mask, base, k, heap_scores, heap_ids, n_heap):
    """Push every masked row's score ``emb[row] · query`` into the heap; return the new fill.

    ``emb``: (n, d) float32 C-contiguous; ``query``: (d,) float32;
    ``mask``: global uint8/bool candidates; ``heap_*``: capacity ``k``.
    """
    for row in range(emb.shape[0]):
        g = base + row
        if mask[g]:
            s = _dot(emb[row], query)
            if n_heap < k or s > heap_scores[0] or (s == heap_scores[0] and g > heap_ids[0]):
                n_heap = heap_push(heap_scores, heap_ids, n_heap, k, s, g)
    return n_heap


@njit(cache=True, nogil=True)
def quantize_rows(emb, out_q, out_scale):
    """int8 copy of float32 rows: ``emb[r] ≈ out_scale[r] * out_q[r]`` (symmetric, per row)."""
    for r in range(emb.shape[0]):
        m = np.float32(0.0)
        for j in range(emb.shape[1]):
            a = abs(emb[r, j])
            if a > m:
                m = a
        s = m / np.float32(127.0) if m > 0 else np.float32(1.0)
        out_scale[r] = s
        inv = np.float32(1.0) / s
        for j in range(emb.shape[1]):
            out_q[r, j] = np.int8(round(emb[r, j] * inv))


@njit(cache=True, nogil=True)
def rescore_exact(emb, rows, query, out):
    """``out[i] = emb[rows[i]] · query`` with the float32 kernel of the exact scan (same rounding)."""
    for i in range(rows.shape[0]):
        out[i] = _dot(emb[rows[i]], query)


@njit(cache=True, nogil=True)
def batch_topk(scores, masks, base, k, heap_scores, heap_ids, heap_n):
    """Feed a block of precomputed scores of many queries into their heaps.

    ``scores``: (queries, rows) for global rows ``base ..``; ``masks``: (queries, n_docs)
    candidates; ``heap_*``: (queries, k) heaps and (queries,) fills, updated in place.
    """
    for b in range(scores.shape[0]):
        n = heap_n[b]
        hs = heap_scores[b]
        hi = heap_ids[b]
        for r in range(scores.shape[1]):
            g = base + r
            if masks[b, g]:
                s = scores[b, r]
                if n < k or s > hs[0] or (s == hs[0] and g > hi[0]):
                    n = heap_push(hs, hi, n, k, s, g)
        heap_n[b] = n
