"""The lexical leg's top ``k`` over every segment in one kernel call: MaxScore.

A store has many segments, each with its own postings (``storage.postings``); a kernel call per
segment and term would cost more in Python than the scoring. Here the segments are described once
per snapshot by a table of raw addresses (:func:`segment_table`, one int64 row per segment), and
one call (:func:`lex_query`) looks up the query terms in every segment, weighs them and ranks.

MaxScore (Turtle and Flood, 1995): the query terms are ordered by their upper bound
``idf * (k1 + 1)``; the longest prefix of low-bound terms whose bounds sum to less than the
score to beat is *non-essential*: a document holding only those cannot enter the top ``k``.
Documents are enumerated from the essential terms' postings only, and completed in the
non-essential ones (a bitset for a common term, :func:`dense_index`; a search otherwise)
only while their partial score plus the remaining bounds can still beat the threshold.
Exact: the same top ``k`` as scoring every document, ties to the higher id (:func:`heap_push`);
scores are float64 sums added in one fixed order (terms by decreasing bound), whatever was pruned.

The work is mostly cache misses (the vector scan has flushed the caches), so the kernels read
postings in order and complete candidates one term at a time over a sorted batch (loads the
processor overlaps), not one candidate at a time.

Owns the MaxScore kernels (:func:`lex_query`, :func:`lex_topk`, :func:`lex_score_docs`), the
term-frequency bounds and the scratch sizes; the segment table is ``lextable``'s (re-exported).

Never imports: bm25, mempp.storage, mempp.lexical.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit

from .intrinsics import popcount, prefetch, voidptr
from .lextable import BASE, DBITS, DENSE_SHARE, DOCS, N_DWORDS, N_POST, N_ROWS, N_WORDS, NMIN, NORMS, TFS, dense_index, lex_idf, lex_lookup, segment_table
from .topk import heap_push, heap_sorted

__all__ = [
    "CAND", "DENSE_SHARE", "WINDOW", "dense_index", "lex_idf", "lex_lookup", "lex_query", "lex_score_docs", "lex_topk", "scratch_size",
    "segment_table",
]

TF_SLACK = 1.0 + 1e-12  # a bound from tf alone is inflated by this, far above the rounding of its few operations
TF_TABLE = 16  # tf-only bounds tabulated for tf < TF_TABLE; above, the term's bound idf * (k1 + 1)
TF_CAP = 1 << 20
BOUND_MARGIN = 1e-9  # relative slack on the bounds, far above float64 rounding of a few additions
AHEAD = 16  # postings or candidates ahead to prefetch


@njit(cache=True, inline="always")
def seek(docs, lo, end, target):
    """First position in ``docs[lo:end]`` (sorted rows) holding a row >= ``target``; ``end`` when none.

    Interpolates from the run's density (rows of a term are spread evenly, near enough), then
    gallops from the guess towards the answer and finishes by binary search: a few probes
    close together instead of a search over the whole gap.
    """
    if lo >= end or docs[lo] >= target:
        return lo
    last = docs[end - 1]
    if last < target:
        return end
    first = docs[lo]  # first < target <= last, so end - 1 > lo
    g = lo + np.int64(float(target - first) * float(end - 1 - lo) / float(last - first))
    if g <= lo:
        g = lo + 1
    if g > end - 1:
        g = end - 1
    if docs[g] >= target:  # the answer is in (lo, g]: gallop back
        hi = g
        step = 1
        a = g - 1
        while a > lo and docs[a] >= target:
            hi = a
            a -= step
            step <<= 1
        if a < lo:
            a = lo
    else:  # docs[g] < target <= docs[end - 1]: gallop forward
        a = g
        step = 1
        hi = g + 1
        while docs[hi] < target:
            a = hi
            step <<= 1
            hi = a + step
            if hi >= end - 1:
                hi = end - 1
                break
    # docs[a] < target <= docs[hi]
    lo2 = a + 1
    while lo2 < hi:
        m = (lo2 + hi) >> 1
        if docs[m] < target:
            lo2 = m + 1
        else:
            hi = m
    return lo2


WINDOW = 4096  # rows of a segment whose essential postings are accumulated together
CAND = 16384  # documents of a segment kept for completion before they are completed


def scratch_size() -> int:
    """Length of each of :func:`lex_topk`'s scratch buffers."""
    return 2 * WINDOW + 4 * CAND


@njit(cache=True, inline="always")
def _tf_ub(wj, k1p, nmin, tf):
    """A bound on a posting's contribution from its tf alone: the segment's least norm in place of its row's."""
    return wj * tf * k1p / (tf + nmin) * TF_SLACK


@njit(cache=True, nogil=True)
def _tf_floor(wj, k1p, nmin, rest, theta):
    """The least tf whose bound plus ``rest`` reaches ``theta``: a posting with a lower tf cannot.

    (The bound grows with tf; ``TF_SLACK`` covers rounding.) ``TF_CAP`` when none below it does.
    """
    if _tf_ub(wj, k1p, nmin, 1.0) + rest >= theta:
        return 1
    lo = 1
    hi = 2
    while _tf_ub(wj, k1p, nmin, float(hi)) + rest < theta:
        lo = hi
        hi *= 2
        if hi >= TF_CAP:
            return TF_CAP
    while hi - lo > 1:  # bound(lo) < theta - rest <= bound(hi)
        mid = (lo + hi) >> 1
        if _tf_ub(wj, k1p, nmin, float(mid)) + rest >= theta:
            hi = mid
        else:
            lo = mid
    return hi


SEED_SHARE = 1 / 16  # terms held by at most this share of the documents are rare: lex_topk enumerates them first


@njit(cache=True, nogil=True)
def _seed_threshold(table, starts, ends, order, w, k1, mask, k, n_docs, stats):
    """A score the k-th best document reaches for sure: the best k-th single-term contribution.

    Over the rarer terms (each in at most ``SEED_SHARE`` of the documents; reading them twice
    is cheap): a masked document's full score is at least any one of its terms'
    contributions, so the k-th best contribution of one term is a lower bound on the k-th
    best score. It spares the enumeration of common terms' postings while the threshold
    would otherwise still be low. -1.0 when no such term has k masked documents.
    """
    nt = w.shape[0]
    hs = np.empty(k, dtype=np.float64)
    hi = np.empty(k, dtype=np.int64)
    best = -1.0
    for j in range(nt - 1, -1, -1):
        if w[j] * (k1 + 1.0) <= best:
            break  # this term's and every lower-bound term's contributions are below the seed already
        t = order[j]
        df = 0
        for s in range(table.shape[0]):
            df += ends[t, s] - starts[t, s]
        if df < k or df > SEED_SHARE * n_docs:
            continue
        stats[2] += df
        n = 0
        wj = w[j]
        for s in range(table.shape[0]):
            n_post = table[s, N_POST]
            docs = carray(voidptr(table[s, DOCS]), n_post, np.int32)
            tfs = carray(voidptr(table[s, TFS]), n_post, np.uint32)
            norms = carray(voidptr(table[s, NORMS]), table[s, N_ROWS], np.float64)
            base = table[s, BASE]
            nmin = carray(voidptr(table[s, NMIN]), 1, np.float64)[0]
            floor = 1 if n < k else _tf_floor(wj, k1 + 1.0, nmin, 0.0, hs[0])
            e = ends[t, s]
            for p in range(starts[t, s], e):
                q = p + AHEAD
                if q < e and tfs[q] >= floor:
                    prefetch(norms, docs[q])
                    prefetch(mask, base + docs[q])
                if tfs[p] < floor:
                    continue  # cannot beat the k-th best so far, whatever its row's length: no load of its norm
                r = docs[p]
                tf = float(tfs[p])
                c = wj * tf * (k1 + 1.0) / (tf + norms[r])
                # test the heap's worst here: a call per posting (array arguments are reference-counted) costs more than the scan
                if (n < k or c > hs[0]) and mask[base + r]:
                    n = heap_push(hs, hi, n, k, c, base + r)
                    if n == k:
                        floor = _tf_floor(wj, k1 + 1.0, nmin, 0.0, hs[0])
        if n == k and hs[0] > best:
            best = hs[0]
    return best


@njit(cache=True, inline="always")
def _holds_any(docs, starts, ends, terms, s, row):
    """Whether segment ``s``'s ``row`` holds any of ``terms`` (a search in each one's run)."""
    for x in range(terms.shape[0]):
        t = terms[x]
        e = ends[t, s]
        p = seek(docs, starts[t, s], e, row)
        if p < e and docs[p] == row:
            return True
    return False


@njit(cache=True, nogil=True)
def lex_topk(table, starts, ends, slots, weights, k1, mask, k, out_ids, out_scores, stats, fscratch, iscratch):
    """Best ``k`` masked documents by BM25 over all segments into ``out_*`` (best first); return how many.

    ``starts``/``ends``/``slots``: :func:`lex_lookup`'s; ``weights[t]``: the term's idf. Documents
    score ``sum_t w_t tf (k1 + 1) / (tf + norm)`` over the terms they hold, ``norm`` from the
    table's per-row ``norms``. ``stats`` (int64, 3): postings of essential terms read,
    documents completed, postings read to seed the threshold. ``fscratch`` (float64) and ``iscratch`` (int64), each of
    :func:`scratch_size`: the caller's buffers (allocating them per call costs page faults);
    ``fscratch[:2 * WINDOW]`` must be all zero and is left so.

    Two passes of :func:`_maxscore_pass` when the query has both rare terms (each in at most
    ``SEED_SHARE`` of the documents) and common ones: first the documents holding a rare term,
    enumerated from the rare terms' postings alone and scored in full, whose k-th best score
    is then the threshold of the second pass, over the common terms only, for the documents
    holding none of the rare terms. A top ``k`` usually lies among the documents with a rare
    term, so the second pass starts with the threshold near its final value and reads few or
    none of the common terms' long postings (enumerated from the start, with a threshold that
    rises only as the windows go by, they are what costs most at a depth of 50). Each document
    is offered once, with its full score: the same top ``k`` as one pass.
    """
    nt = weights.shape[0]
    stats[0] = 0
    stats[1] = 0
    stats[2] = 0
    if nt == 0 or k <= 0:
        return 0
    if fscratch.shape[0] < 2 * WINDOW + 4 * CAND or iscratch.shape[0] < 2 * WINDOW + 4 * CAND:
        raise ValueError("lex_topk: scratch buffers shorter than scratch_size()")
    # Terms by increasing bound: position j of `order` is term order[j].
    ub = np.empty(nt, dtype=np.float64)
    for t in range(nt):
        ub[t] = weights[t] * (k1 + 1.0)
    order = np.argsort(ub, kind="mergesort")
    w = np.empty(nt, dtype=np.float64)
    for j in range(nt):
        w[j] = weights[order[j]]
    n_docs = 0
    for s in range(table.shape[0]):
        n_docs += table[s, N_ROWS]
    # The rare terms: the last of `order` (the rarer a term, the higher its bound).
    common = nt
    while common > 0:
        df = 0
        for s in range(table.shape[0]):
            df += ends[order[common - 1], s] - starts[order[common - 1], s]
        if df > SEED_SHARE * n_docs:
            break
        common -= 1
    hs = np.empty(k, dtype=np.float64)  # the result heap: full scores
    hi = np.empty(k, dtype=np.int64)
    none = np.empty(0, dtype=np.int64)
    if common == 0 or common == nt:
        # One pass. When every term is rare, from the best k-th single-term contribution (-1 when
        # none has k masked documents: admit everything until the heap fills).
        theta = _seed_threshold(table, starts, ends, order, w, k1, mask, k, n_docs, stats) if common == 0 else -1.0
        n = _maxscore_pass(table, starts, ends, slots, order, w, k1, mask, k, theta, 0, none, hs, hi, 0, stats, fscratch, iscratch)
    else:
        # No seed here: the first pass's partial scores raise the threshold about as soon, without
        # reading the rare terms' postings twice (measured: 15% of the leg at depth 50).
        n = _maxscore_pass(table, starts, ends, slots, order, w, k1, mask, k, -1.0, common, none, hs, hi, 0, stats, fscratch, iscratch)
        n = _maxscore_pass(
            table, starts, ends, slots, order[:common], w[:common], k1, mask, k, -1.0, 0, order[common:], hs, hi, n, stats, fscratch,
            iscratch,
        )
    return heap_sorted(hs, hi, n, out_scores, out_ids)


@njit(cache=True, nogil=True)
def _maxscore_pass(table, starts, ends, slots, order, w, k1, mask, k, theta, ness_floor, excl, hs, hi, n, stats, fscratch, iscratch):
    """One MaxScore enumeration over the terms ``order`` (by increasing bound; ``w``: their idfs), offering to the heap ``hs``/``hi`` (``n`` filled); returns its new fill.

    ``theta``: a score the k-th best document reaches for sure. Terms ``order[:ness_floor]`` are
    never essential (documents holding none of the others are not enumerated); documents
    holding any of the terms ``excl`` are not offered.

    Enumeration: the essential terms' postings are read a window of ``WINDOW`` rows at a time
    (one term alone: straight from its postings; several: added up in a small buffer, no
    merge of cursors). A masked document whose partial score plus the non-essential bounds
    reaches the threshold is kept as a candidate, with its partial score. Any masked
    document's full score is at least its partial score (float64 additions of non-negative
    numbers never go below an addend), so the k-th best partial score so far is a threshold
    too, and the essential set shrinks as it rises. Completion, at the end of a segment (or
    when the candidates fill their buffer): candidates still able to reach the threshold are
    completed in row order by a search in the non-essential terms' postings and offered to
    the heap, whose k-th best score raises the threshold further.
    """
    nt = order.shape[0]
    n_seg = table.shape[0]
    n_excl = excl.shape[0]
    if n == k and hs[0] > theta:
        theta = hs[0]
    prefix = np.empty(nt + 1, dtype=np.float64)  # prefix[j]: bound on what terms order[:j] add together
    prefix[0] = 0.0
    for j in range(nt):
        prefix[j + 1] = prefix[j] + w[j] * (k1 + 1.0)
    for j in range(nt + 1):
        prefix[j] = prefix[j] * (1.0 + BOUND_MARGIN)
    k1p = k1 + 1.0
    ness = min(ness_floor, nt)  # terms order[:ness] are non-essential
    while ness < nt and prefix[ness + 1] < theta:
        ness += 1
    ps = np.empty(k, dtype=np.float64)  # the best k partial scores
    pi = np.empty(k, dtype=np.int64)
    pn = 0
    pos = np.empty(nt, dtype=np.int64)
    end = np.empty(nt, dtype=np.int64)
    first = np.empty(nt, dtype=np.int64)
    slot = np.empty(nt, dtype=np.int64)
    buf = fscratch[:WINDOW]  # per window row: the bound from tf alone, then -1 for a survivor
    ex = fscratch[WINDOW : 2 * WINDOW]  # per surviving window row: the exact partial score
    c_part = fscratch[2 * WINDOW : 2 * WINDOW + CAND]
    l_part = fscratch[2 * WINDOW + CAND : 2 * WINDOW + 2 * CAND]
    touched = iscratch[:WINDOW]
    survivors = iscratch[WINDOW : 2 * WINDOW]
    c_row = iscratch[2 * WINDOW : 2 * WINDOW + CAND]
    c_ness = iscratch[2 * WINDOW + CAND : 2 * WINDOW + 2 * CAND]
    l_row = iscratch[2 * WINDOW + 2 * CAND : 2 * WINDOW + 3 * CAND]
    l_ness = iscratch[2 * WINDOW + 3 * CAND : 2 * WINDOW + 4 * CAND]
    wstart = np.empty(nt, dtype=np.int64)
    ubt = np.empty((nt, TF_TABLE), dtype=np.float64)
    none = np.int64(1) << 40
    read = 0
    completed = 0
    for s in range(n_seg):
        n_post = table[s, N_POST]
        docs = carray(voidptr(table[s, DOCS]), n_post, np.int32)
        tfs = carray(voidptr(table[s, TFS]), n_post, np.uint32)
        norms = carray(voidptr(table[s, NORMS]), table[s, N_ROWS], np.float64)
        base = table[s, BASE]
        n_words = table[s, N_WORDS]
        bits = carray(voidptr(table[s, DBITS]), table[s, N_DWORDS], np.uint64)
        nmin = carray(voidptr(table[s, NMIN]), 1, np.float64)[0]
        for j in range(nt):
            pos[j] = starts[order[j], s]
            end[j] = ends[order[j], s]
            first[j] = pos[j]
            slot[j] = slots[order[j], s]
            for tf in range(1, TF_TABLE - 1):
                ubt[j, tf] = _tf_ub(w[j], k1p, nmin, float(tf))
            ubt[j, 0] = 0.0
            ubt[j, TF_TABLE - 1] = w[j] * k1p * TF_SLACK  # any tf from here up
        nc = 0
        done = False
        while not done:
            # The window starts at the next row an essential term holds.
            lo = none
            for j in range(ness, nt):
                if pos[j] < end[j] and docs[pos[j]] < lo:
                    lo = docs[pos[j]]
            done = lo == none
            if not done:
                hi_row = lo + WINDOW
                rest = prefix[ness]
                if ness == nt - 1:  # one essential term: straight from its postings
                    j = nt - 1
                    p = pos[j]
                    e = end[j]
                    wj = w[j]
                    floor = _tf_floor(wj, k1p, nmin, rest, theta)
                    while p < e:
                        r = docs[p]
                        if r >= hi_row:
                            break
                        q = p + AHEAD
                        if q < e and tfs[q] >= floor:
                            prefetch(norms, docs[q])
                            prefetch(mask, base + docs[q])
                        if tfs[p] >= floor:  # else no row length lets it reach the threshold: no load of its norm
                            tf = float(tfs[p])
                            c = wj * tf * k1p / (tf + norms[r])
                            if c + rest >= theta and mask[base + r]:
                                c_row[nc] = r
                                c_part[nc] = c
                                c_ness[nc] = ness
                                nc += 1
                                if pn < k or c > ps[0]:
                                    pn = heap_push(ps, pi, pn, k, c, r)
                                    if pn == k and ps[0] > theta:
                                        theta = ps[0]
                                        floor = _tf_floor(wj, k1p, nmin, rest, theta)
                        p += 1
                    read += p - pos[j]
                    pos[j] = p
                else:  # several: add them up over the window
                    # First the bounds from tf alone (no norms: they are the cache misses) ...
                    m = 0
                    for j in range(nt - 1, ness - 1, -1):  # the kernels' fixed order of addition
                        p = pos[j]
                        wstart[j] = p
                        e = end[j]
                        while p < e:
                            r = docs[p]
                            if r >= hi_row:
                                break
                            i = r - lo
                            if buf[i] == 0.0:  # bounds are positive: zero means not touched yet
                                touched[m] = i
                                m += 1
                            buf[i] += ubt[j, min(tfs[p], TF_TABLE - 1)]
                            p += 1
                        read += p - pos[j]
                        pos[j] = p
                    for x in range(m):
                        i = touched[x]
                        if buf[i] + rest >= theta:
                            prefetch(mask, base + lo + i)
                            prefetch(norms, lo + i)
                    n_sv = 0
                    for x in range(m):
                        i = touched[x]
                        if buf[i] + rest >= theta and mask[base + lo + i]:
                            buf[i] = -1.0
                            survivors[n_sv] = i
                            n_sv += 1
                        else:
                            buf[i] = 0.0
                    # ... then the exact partial scores of the rows they leave, in the same order.
                    if n_sv:
                        for j in range(nt - 1, ness - 1, -1):
                            wj = w[j]
                            for p in range(wstart[j], pos[j]):
                                i = docs[p] - lo
                                if buf[i] < 0.0:
                                    tf = float(tfs[p])
                                    ex[i] += wj * tf * k1p / (tf + norms[docs[p]])
                    for x in range(n_sv):
                        i = survivors[x]
                        c = ex[i]
                        ex[i] = 0.0
                        buf[i] = 0.0
                        if c + rest >= theta:
                            c_row[nc] = lo + i
                            c_part[nc] = c
                            c_ness[nc] = ness
                            nc += 1
                            if pn < k or c > ps[0]:
                                pn = heap_push(ps, pi, pn, k, c, lo + i)
                                if pn == k and ps[0] > theta:
                                    theta = ps[0]
                while ness < nt and prefix[ness + 1] < theta:
                    ness += 1
            if nc and (done or nc + WINDOW > CAND):
                # Complete the candidates, one term at a time over the batch in row order (the
                # search cursors only move forward; a term's loads are independent of each other).
                srt = np.argsort(c_row[:nc])
                live = 0
                top = 0  # the most non-essential terms any live candidate lacks
                for x in range(nc):
                    y = srt[x]
                    if c_part[y] + prefix[c_ness[y]] >= theta:
                        l_row[live] = c_row[y]
                        l_part[live] = c_part[y]
                        l_ness[live] = c_ness[y]
                        if c_ness[y] > top:
                            top = c_ness[y]
                        live += 1
                for j in range(top - 1, -1, -1):
                    bound = prefix[j + 1]
                    wj = w[j]
                    sl = slot[j]
                    kept = 0
                    if sl >= 0:
                        # A common term: its bitset says whether a candidate holds it and where
                        # its posting is. All the postings' places first, each asked for at
                        # once, then the scores: the two loads of a candidate depend on each
                        # other, those of different candidates do not. c_row holds each one's
                        # posting (-1: none to add); it is free here, the candidates being in l_*.
                        for x in range(live):
                            xa = x + AHEAD
                            if xa < live:
                                prefetch(bits, 2 * (sl * n_words + (l_row[xa] >> 6)))
                            c_row[x] = -1
                            d = l_row[x]
                            if l_ness[x] > j and l_part[x] + bound >= theta:
                                wi = 2 * (sl * n_words + (d >> 6))
                                word = bits[wi]
                                b = np.uint64(d & 63)
                                if (word >> b) & np.uint64(1):
                                    p = first[j] + np.int64(bits[wi + 1] + popcount(word & ((np.uint64(1) << b) - np.uint64(1))))
                                    c_row[x] = p
                                    prefetch(tfs, p)
                                    prefetch(norms, d)
                    for x in range(live):
                        xa = x + AHEAD
                        if sl < 0 and xa < live:
                            prefetch(norms, l_row[xa])
                        d = l_row[x]
                        score = l_part[x]
                        if l_ness[x] > j:
                            if score + bound < theta:
                                continue  # cannot reach the threshold even with this term and the rest
                            if sl >= 0:
                                p = c_row[x]
                                if p >= 0:
                                    tf = float(tfs[p])
                                    score += wj * tf * k1p / (tf + norms[d])
                            else:
                                p = seek(docs, pos[j], end[j], d)
                                pos[j] = p
                                if p < end[j] and docs[p] == d:
                                    tf = float(tfs[p])
                                    score += wj * tf * k1p / (tf + norms[d])
                                    pos[j] = p + 1
                        l_row[kept] = d
                        l_part[kept] = score
                        l_ness[kept] = l_ness[x]
                        kept += 1
                    live = kept
                for x in range(live):
                    score = l_part[x]
                    if score < theta:
                        continue
                    completed += 1
                    g = base + l_row[x]
                    if n < k or score > hs[0] or (score == hs[0] and g > hi[0]):
                        if n_excl and _holds_any(docs, starts, ends, excl, s, l_row[x]):
                            continue  # holds a rare term: the first pass offered it with its full score
                        n = heap_push(hs, hi, n, k, score, g)
                        if n == k and hs[0] > theta:
                            theta = hs[0]
                nc = 0
                while ness < nt and prefix[ness + 1] < theta:
                    ness += 1
    stats[0] += read
    stats[1] += completed
    return n


@njit(cache=True, nogil=True)
def lex_score_docs(table, starts, ends, weights, k1, docs, out):
    """``out[i]``: the BM25 score of global document ``docs[i]`` (sorted, increasing), as :func:`lex_topk` sums it."""
    nt = weights.shape[0]
    n_seg = table.shape[0]
    ub = np.empty(nt, dtype=np.float64)
    for t in range(nt):
        ub[t] = weights[t] * (k1 + 1.0)  # the order lex_topk adds in
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
        pdocs = carray(voidptr(table[s, DOCS]), n_post, np.int32)
        tfs = carray(voidptr(table[s, TFS]), n_post, np.uint32)
        norms = carray(voidptr(table[s, NORMS]), rows, np.float64)
        for j in range(nt):
            pos[j] = starts[order[j], s]
        while i < docs.shape[0] and docs[i] < base + rows:
            d = docs[i] - base
            score = 0.0
            for j in range(nt - 1, -1, -1):
                e = ends[order[j], s]
                p = seek(pdocs, pos[j], e, d)
                pos[j] = p
                if p < e and pdocs[p] == d:
                    tf = float(tfs[p])
                    score += weights[order[j]] * tf * (k1 + 1.0) / (tf + norms[d])
            out[i] = score
            i += 1
    while i < docs.shape[0]:
        out[i] = 0.0
        i += 1


@njit(cache=True, nogil=True)
def lex_query(table, off, tseg, tstart, tdf, tslot, qterms, n_docs, k1, mask, k, out_ids, out_scores, stats, fscratch, iscratch):
    """:func:`lex_lookup`, :func:`lex_idf` and :func:`lex_topk` in one call; returns how many were ranked.

    ``stats`` (int64, 4): :func:`lex_topk`'s, then the query terms' postings in all.
    """
    nq = qterms.shape[0]
    n_seg = table.shape[0]
    starts = np.empty((nq, n_seg), dtype=np.int64)
    ends = np.empty((nq, n_seg), dtype=np.int64)
    slots = np.empty((nq, n_seg), dtype=np.int64)
    df = np.empty(nq, dtype=np.int64)
    idf = np.empty(nq, dtype=np.float64)
    lex_lookup(off, tseg, tstart, tdf, tslot, qterms, starts, ends, df, slots)
    lex_idf(n_docs, df, idf)
    got = lex_topk(table, starts, ends, slots, idf, k1, mask, k, out_ids, out_scores, stats, fscratch, iscratch)
    stats[3] = df.sum()
    return got
