"""Bounded top-k selection with a binary min-heap whose root is the worst kept item.

The heap lives in two caller-owned arrays (scores float32/float64, ids int64)
plus a fill count, so a scan over several segments can keep one heap across
kernel calls without allocating.

Owns that heap (:func:`heap_push`, :func:`heap_push_many`, :func:`heap_sorted`, :class:`TopK`)
and with it the ranking convention's tie-break. A leaf: the scan kernels import it.

Never imports: bm25, cosine, maxscore, int8scan, mempp.storage.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _below(s1, i1, s2, i2):
    # (s1, i1) ranks below (s2, i2): lower score, or equal score and earlier ingest.
    return s1 < s2 or (s1 == s2 and i1 < i2)


@njit(cache=True)
def sift_down(hs, hi, n, pos):
    while True:
        left = 2 * pos + 1
        if left >= n:
            return
        child = left
        right = left + 1
        if right < n and _below(hs[right], hi[right], hs[left], hi[left]):
            child = right
        if _below(hs[child], hi[child], hs[pos], hi[pos]):
            hs[pos], hs[child] = hs[child], hs[pos]
            hi[pos], hi[child] = hi[child], hi[pos]
            pos = child
        else:
            return


@njit(cache=True)
def _sift_up(hs, hi, pos):
    while pos > 0:
        parent = (pos - 1) // 2
        if _below(hs[pos], hi[pos], hs[parent], hi[parent]):
            hs[pos], hs[parent] = hs[parent], hs[pos]
            hi[pos], hi[parent] = hi[parent], hi[pos]
            pos = parent
        else:
            return


@njit(cache=True)
def heap_push(hs, hi, n, k, score, idx):
    """Offer (score, idx) to a heap of capacity ``k`` holding ``n`` items; return the new fill."""
    if n < k:
        hs[n] = score
        hi[n] = idx
        _sift_up(hs, hi, n)
        return n + 1
    if k > 0 and _below(hs[0], hi[0], score, idx):
        hs[0] = score
        hi[0] = idx
        sift_down(hs, hi, n, 0)
    return n


@njit(cache=True)
def heap_push_many(hs, hi, n, k, scores, ids):
    """:func:`heap_push` of every ``(scores[i], ids[i])`` (``scores`` of the heap's dtype); return the new fill."""
    for i in range(len(ids)):
        n = heap_push(hs, hi, n, k, scores[i], ids[i])
    return n


@njit(cache=True)
def heap_sorted(hs, hi, n, out_scores, out_ids):
    """Write the ``n`` heap items best first into ``out_*``; the heap is consumed."""
    m = n
    while m > 0:
        out_scores[m - 1] = hs[0]
        out_ids[m - 1] = hi[0]
        m -= 1
        hs[0] = hs[m]
        hi[0] = hi[m]
        sift_down(hs, hi, m, 0)
    return n


class TopK:
    """A reusable heap of capacity ``k`` (Python-side holder for the kernel buffers)."""

    __slots__ = ("k", "scores", "ids", "n")

    def __init__(self, k: int, dtype=np.float32) -> None:
        self.k = int(k)
        self.scores = np.empty(max(self.k, 1), dtype=dtype)
        self.ids = np.empty(max(self.k, 1), dtype=np.int64)
        self.n = 0

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """Best-first (ids, scores); empties the heap."""
        out_s = np.empty(self.n, dtype=self.scores.dtype)
        out_i = np.empty(self.n, dtype=np.int64)
        heap_sorted(self.scores, self.ids, self.n, out_s, out_i)
        self.n = 0
        return out_i, out_s
