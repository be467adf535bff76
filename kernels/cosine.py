"""Exact masked inner-product top-k over an embedding matrix.

Embeddings are stored L2-normalized, so the inner product is the cosine.
One call scans one segment (rows ``[0, n)`` of ``emb``, global index
``base + row``) and feeds a heap that the caller keeps across segments.

Owns the float32 scans (one query's masked top-k; many queries' top-k over a score matrix, with
their certificates), row normalization, the rows' int8 quantization and the exact rescore.

Never imports: int8scan, int8batch, mempp.storage, mempp.store.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from .intrinsics import prefetch, voidptr

RESCORE_AHEAD = 4  # certified_tops: rows prefetched ahead of the one rescored

from .topk import heap_push, heap_sorted


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


PAIRWISE_BLOCK = 128  # numpy's PW_BLOCKSIZE


def pairwise_plan(n: int) -> tuple[np.ndarray, np.ndarray]:
    """How numpy's pairwise summation splits a run of ``n`` values, as a postfix program:
    step ``i`` pushes the sum of the block ``[lo[i], lo[i] + size[i])`` (``size[i] > 0``, at
    most :data:`PAIRWISE_BLOCK`, summed by :func:`_block_squares`) or, for ``size[i] == 0``,
    pops two sums and pushes their sum. (numpy recurses; numba's cache does not keep recursive
    functions safely, so the split is planned once per row length and replayed.)"""
    lo: list[int] = []
    size: list[int] = []

    def split(a: int, m: int) -> None:
        if m <= PAIRWISE_BLOCK:
            lo.append(a)
            size.append(m)
            return
        m2 = m // 2
        m2 -= m2 % 8
        split(a, m2)
        split(a + m2, m - m2)
        lo.append(0)
        size.append(0)

    split(0, n)
    return np.asarray(lo, dtype=np.int64), np.asarray(size, dtype=np.int64)


@njit(cache=True, nogil=True)
def _block_squares(x, lo, n):
    """The float32 sum of ``x[lo:lo + n] ** 2`` (``n`` <= 128) in numpy's order: a plain loop
    under 8 values, else 8 running sums added pairwise, then the rest in turn."""
    if n < 8:
        res = np.float32(0.0)
        for i in range(lo, lo + n):
            res += x[i] * x[i]
        return res
    r0 = x[lo] * x[lo]
    r1 = x[lo + 1] * x[lo + 1]
    r2 = x[lo + 2] * x[lo + 2]
    r3 = x[lo + 3] * x[lo + 3]
    r4 = x[lo + 4] * x[lo + 4]
    r5 = x[lo + 5] * x[lo + 5]
    r6 = x[lo + 6] * x[lo + 6]
    r7 = x[lo + 7] * x[lo + 7]
    end = lo + n - n % 8
    i = lo + 8
    while i < end:
        r0 += x[i] * x[i]
        r1 += x[i + 1] * x[i + 1]
        r2 += x[i + 2] * x[i + 2]
        r3 += x[i + 3] * x[i + 3]
        r4 += x[i + 4] * x[i + 4]
        r5 += x[i + 5] * x[i + 5]
        r6 += x[i + 6] * x[i + 6]
        r7 += x[i + 7] * x[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += x[i] * x[i]
        i += 1
    return res


@njit(cache=True, nogil=True)
def _normalize_rows(emb, out, plan_lo, plan_size):
    stack = np.empty(plan_lo.shape[0], dtype=np.float32)
    for r in range(emb.shape[0]):
        row = emb[r]
        top = 0
        for p in range(plan_lo.shape[0]):
            if plan_size[p] > 0:
                stack[top] = _block_squares(row, plan_lo[p], plan_size[p])
                top += 1
            else:
                top -= 1
                stack[top - 1] = stack[top - 1] + stack[top]
        norm = np.sqrt(stack[0])
        if not np.isfinite(norm):
            for j in range(row.shape[0]):
                if not np.isfinite(row[j]):
                    return r
        o = out[r]
        if norm > 0:
            for j in range(row.shape[0]):
                o[j] = row[j] / norm
        else:
            for j in range(row.shape[0]):
                o[j] = np.float32(0.0)
    return -1


def normalize_rows(emb: np.ndarray, out: np.ndarray) -> int:
    """``out``: the rows of ``emb`` (C-contiguous float32) scaled to unit length, bit for bit as
    ``emb / np.linalg.norm(emb, axis=1, keepdims=True)``: the squares summed as numpy's
    pairwise summation adds them (:func:`pairwise_plan`); zero rows stay zero; a row whose
    squares overflow divides by infinity, as numpy's does. One pass, no temporaries.

    Returns -1, or the first row holding a NaN or an infinity (rows before it are written).
    """
    if emb.shape[0] == 0 or emb.shape[1] == 0:
        return -1
    return int(_normalize_rows(emb, out, *pairwise_plan(emb.shape[1])))


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


def embedding_table(segments) -> tuple[np.ndarray, list]:
    """``(table, keep)`` for :func:`certified_tops` from ``(embeddings, base)`` pairs: per segment (by increasing base) its float32
    embeddings' address, rows and base; ``keep`` holds the arrays while a kernel reads them."""
    keep = [np.ascontiguousarray(emb, dtype=np.float32) for emb, _ in segments]
    table = np.zeros((len(keep), 3), dtype=np.int64)
    for i, (emb, (_, base)) in enumerate(zip(keep, segments)):  # segments: (embeddings, base)
        table[i] = (emb.ctypes.data, emb.shape[0], int(base))
    return table, keep


@njit(cache=True, nogil=True)
def certified_tops(table, dim, queries, heap_s, heap_i, heap_n, keeps, depths, eps, out_ids, out_n, certified):
    """Each query's exact top ``depths[b]`` from the rows its approximate scan kept, and whether it is certified.

    ``heap_*[b]``: the scan's heap (root = worst kept, capacity ``keeps[b]``); ``eps[b]``: the
    bound on ``|approximate - exact|`` of any row. The kept rows are rescored with the exact
    scan's float32 kernel, best approximate first, until the next could not enter the exact top
    (its approximate + eps below the worst exact score kept): the same top as rescoring them all.
    Certified when the scan kept every candidate, or when no row left out (approximate <= the
    root) could reach the top. ``out_ids[b, :out_n[b]]``: best first; ``table``: :func:`embedding_table`.
    """
    n_seg = table.shape[0]
    bases = np.empty(n_seg, dtype=np.int64)
    for s in range(n_seg):
        bases[s] = table[s, 2]
    width = out_ids.shape[1]
    ts = np.empty(max(width, 1), dtype=np.float32)
    ti = np.empty(max(width, 1), dtype=np.int64)
    sorted_s = np.empty(max(width, 1), dtype=np.float32)
    for b in range(heap_n.shape[0]):
        n = heap_n[b]
        depth = depths[b]
        e = eps[b]
        order = np.argsort(heap_s[b, :n])
        m = 0
        q = queries[b]
        for x in range(n - 1, -1, -1):
            i = order[x]
            if m == depth and np.float64(heap_s[b, i]) + e < np.float64(ts[0]):
                break  # this row and every later one: exact <= approximate + eps < the worst kept
            if RESCORE_AHEAD and x >= RESCORE_AHEAD:  # the rows are scattered over memory: ask for one a few rows ahead
                ga = heap_i[b, order[x - RESCORE_AHEAD]]
                sa = np.searchsorted(bases, ga, side="right") - 1
                flat = carray(voidptr(table[sa, 0]), table[sa, 1] * dim, np.float32)
                for off in range(0, dim, 16):
                    prefetch(flat, (ga - table[sa, 2]) * dim + off)
            g = heap_i[b, i]
            s = np.searchsorted(bases, g, side="right") - 1
            emb = carray(voidptr(table[s, 0]), (table[s, 1], dim), np.float32)
            score = _dot(emb[g - table[s, 2]], q)
            if m < depth or score > ts[0] or (score == ts[0] and g > ti[0]):
                m = heap_push(ts, ti, m, depth, score, g)
        certified[b] = n < keeps[b] or (m == depth and np.float64(heap_s[b, 0]) + e < np.float64(ts[0]))
        out_n[b] = heap_sorted(ts, ti, m, sorted_s, out_ids[b])
