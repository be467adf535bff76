"""Inverting a batch of documents into postings: a counting sort by term, in one pass.

Input: every document's term ids back to back (``flat``) and each document's count
(``lengths``). Output, sorted by (term, row): the distinct terms, each one's run start and
document frequency, and the run's rows with their term frequencies, the layout of
``mempp.storage.postings``. O(tokens + largest term id), no comparison sort.

Owns :func:`invert`, the one kernel that builds postings (``mempp.storage.postings`` calls it).

Never imports: bm25, maxscore, mempp.storage.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def invert(flat, lengths, n_ids, lo=0):
    """(terms int32, starts int64, dfs int32, docs int32, tfs uint32) of the batch; term ids in ``[lo, lo + n_ids)``.

    The counting sort runs over that range only (``lo``: the batch's smallest id).
    """
    n = flat.shape[0]
    counts = np.zeros(n_ids + 1, dtype=np.int64)
    for i in range(n):
        counts[flat[i] - lo + 1] += 1
    for t in range(n_ids):
        counts[t + 1] += counts[t]  # counts[t]: where term t's tokens start
    rows_by_term = np.empty(n, dtype=np.int32)
    pos = counts[:n_ids].copy()
    i = 0
    for row in range(lengths.shape[0]):
        for _ in range(lengths[row]):
            t = flat[i] - lo
            rows_by_term[pos[t]] = row  # rows arrive in order, so each term's run is sorted
            pos[t] += 1
            i += 1
    terms = np.empty(n_ids, dtype=np.int32)
    starts = np.empty(n_ids, dtype=np.int64)
    dfs = np.empty(n_ids, dtype=np.int32)
    docs = np.empty(n, dtype=np.int32)
    tfs = np.empty(n, dtype=np.uint32)
    n_terms = 0
    m = 0
    for t in range(n_ids):
        a = counts[t]
        b = counts[t + 1]
        if a == b:
            continue
        terms[n_terms] = t + lo
        starts[n_terms] = m
        first = m
        j = a
        while j < b:
            r = rows_by_term[j]
            k = j + 1
            while k < b and rows_by_term[k] == r:
                k += 1
            docs[m] = r
            tfs[m] = k - j
            m += 1
            j = k
        dfs[n_terms] = m - first
        n_terms += 1
    return terms[:n_terms], starts[:n_terms], dfs[:n_terms], docs[:m], tfs[:m]
