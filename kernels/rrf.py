"""Weighted reciprocal-rank fusion and the latest-date reserve of one query, in one call.

The same numbers and choice as ``mempp.fusion.select(mempp.fusion.rrf(...))`` (Python dicts,
about 0.1 ms a query, a tenth of a bulk query's budget): each document's fused score adds its
legs' ``w / (c + rank)`` one at a time, legs in order, starting from 0.0, as ``rrf`` does;
orders are by score, then the higher document id (the library's ranking convention).

Owns :func:`rrf_select` and ``RESERVE_SLOTS``; the Python reference and the caller is
``mempp.fusion``.

Never imports: topk, mempp.fusion, mempp.threads, mempp.storage.
"""

from __future__ import annotations

import numpy as np
from numba import njit

RESERVE_SLOTS = 3


@njit(cache=True, nogil=True)
def rrf_select(docs, starts, weights, c, dates, undated, k, reserve, out_docs, out_reserved, fused_docs, fused_scores):
    """Fuse the legs ``docs[starts[l]:starts[l + 1]]`` (ranked lists, best first) with ``weights[l]``.

    Writes the distinct documents with their fused scores to ``fused_*`` (increasing id) and
    the ``k`` chosen, in result order, to ``out_docs`` / ``out_reserved`` (with ``reserve``,
    the last ``RESERVE_SLOTS`` slots go to the latest-dated documents not chosen, ``dates[doc]
    == undated`` never; slots it cannot fill go by fused order). Returns ``(chosen, distinct)``.
    """
    n = docs.shape[0]
    contrib = np.empty(n, dtype=np.float64)
    for leg in range(starts.shape[0] - 1):
        for i in range(starts[leg], starts[leg + 1]):
            contrib[i] = weights[leg] / (c + (i - starts[leg]))
    by_doc = np.argsort(docs, kind="mergesort")  # stable: a document's legs stay in order
    m = 0
    for x in range(n):
        i = by_doc[x]
        if m > 0 and fused_docs[m - 1] == docs[i]:
            fused_scores[m - 1] += contrib[i]
        else:
            fused_docs[m] = docs[i]
            fused_scores[m] = 0.0 + contrib[i]
            m += 1
    if k <= 0 or m == 0:
        return 0, m
    # Fused order: score, then the higher id. A stable sort by score of the ids in decreasing order.
    desc = fused_docs[:m][::-1].copy()
    desc_scores = fused_scores[:m][::-1].copy()
    order = np.argsort(-desc_scores, kind="mergesort")
    ranked = desc[order]
    n_fused = min(max(k - RESERVE_SLOTS, 0), m)  # from k as asked, as select() counts
    k = min(k, m)
    if not reserve:
        for x in range(k):
            out_docs[x] = ranked[x]
            out_reserved[x] = False
        return k, m
    got = 0
    for x in range(n_fused):
        out_docs[got] = ranked[x]
        out_reserved[got] = False
        got += 1
    # The latest-dated of the rest: by date, then the higher id (the rest in decreasing id, stably by date).
    rest = np.sort(ranked[n_fused:])[::-1].copy()
    n_dated = 0
    for x in range(rest.shape[0]):
        if dates[rest[x]] != undated:
            rest[n_dated] = rest[x]
            n_dated += 1
    dated = rest[:n_dated]
    when = np.empty(n_dated, dtype=np.int64)
    for x in range(n_dated):
        when[x] = dates[dated[x]]
    latest = dated[np.argsort(-when, kind="mergesort")]
    picks = min(k - n_fused, n_dated)
    for x in range(picks):
        out_docs[got] = latest[x]
        out_reserved[got] = True
        got += 1
    for x in range(n_fused, m):
        if got >= k:
            break
        d = ranked[x]
        taken = False
        for y in range(picks):
            if latest[y] == d:
                taken = True
                break
        if not taken:
            out_docs[got] = d
            out_reserved[got] = False
            got += 1
    return got, m
