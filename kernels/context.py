"""Thread context: a document's leg score lifted by the scores of its neighbours in its thread.

A turn of a conversation, a reply in an email thread or a paragraph of a
meeting's notes is read with what comes right before and after it. For a
leg's raw scores ``s`` over the candidates, with mean ``mu`` and standard
deviation ``sigma`` over the candidates, the context score of ``d`` is

    z(d) + Σ_h betas[h] · (z(prev_h(d)) + z(next_h(d))),   z = (s − mu) / sigma

where ``prev_h``/``next_h`` are the documents ``h + 1`` steps before/after
``d`` in its thread (ingest order) and only candidate neighbours count.
``prev``/``next`` hold the one-step links (−1: none).

Owns the context score: the candidates' moments (exact fixed-point sums), the neighbours' lift,
the documents its top can come from (max mode), and its top-k, over dense and sparse scores.

Never imports: bm25, cosine, maxscore, mempp.storage, mempp.store.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .topk import heap_push, heap_sorted


@njit(cache=True, nogil=True, fastmath=True)
def masked_dot_dense(emb, query, mask, base, out):
    """``out[base + row] = emb[row] · query`` for every masked row (others untouched)."""
    d = emb.shape[1]
    for row in range(emb.shape[0]):
        g = base + row
        if mask[g]:
            acc = np.float32(0.0)  # float32 accumulator: vectorized; float64 halves the speed
            for j in range(d):
                acc += emb[row, j] * query[j]
            out[g] = acc


# Moments in fixed point: each score is rounded to a multiple of 2**-FRAC on its own, and the
# multiples and their squares are added as integers (two words each, so nothing overflows).
# Integer addition is exact: the mean and deviation do not depend on the order the scores are
# met in, so they are the same however a store's documents are split into segments (a merge
# changes no score) or into shards (a distributed sum of parts is the same integer); and a
# set of equal scores has a deviation of exactly zero. Scores are BM25 values (under 2**8) or
# cosines; a multiple of 2**-20 is 1e-6 of a score.
FRAC = 20
_CARRY = 40
_LIMIT = 1 << 62


@njit(cache=True, nogil=True, inline="always")
def _add_q(h1, l1, h2, l2, q):
    """Add the multiple ``q`` and its square to the two-word sums, carrying before a word overflows."""
    l1 += q
    l2 += q * q
    if l2 >= _LIMIT or l1 >= _LIMIT or l1 <= -_LIMIT:
        c = l1 >> _CARRY
        h1 += c
        l1 -= c << _CARRY
        c = l2 >> _CARRY
        h2 += c
        l2 -= c << _CARRY
    return h1, l1, h2, l2


@njit(cache=True, nogil=True, inline="always")
def _add(h1, l1, h2, l2, v, scale):
    return _add_q(h1, l1, h2, l2, np.int64(np.rint(v * scale)))


@njit(cache=True, nogil=True)
def fixed_sums(scores, ids, n_ids, out):
    """Add the fixed-point sums of ``scores[ids[:n_ids]]`` and of their squares to ``out``
    (int64[4]: the sum as ``out[0] * 2**40 + out[1]``, the sum of squares as ``out[2] * 2**40 + out[3]``):
    the part a process holding some of the documents contributes; :func:`moments_from_sums` finishes."""
    h1, l1, h2, l2 = out[0], out[1], out[2], out[3]
    scale = 2.0**FRAC
    for j in range(n_ids):
        h1, l1, h2, l2 = _add(h1, l1, h2, l2, float(scores[ids[j]]), scale)
    out[0], out[1], out[2], out[3] = h1, l1, h2, l2


@njit(cache=True, nogil=True)
def fixed_sums_masked(scores, mask, out):
    """:func:`fixed_sums` of the masked documents' scores; returns how many were masked."""
    h1, l1, h2, l2 = out[0], out[1], out[2], out[3]
    scale = 2.0**FRAC
    n = 0
    for i in range(mask.shape[0]):
        # Without a branch on the mask (a candidate set is no pattern a branch predictor learns:
        # 305 against 137 us over 100k documents, 44% candidates): others add 0, whatever they hold.
        m = np.int64(mask[i] != 0)
        n += m
        h1, l1, h2, l2 = _add_q(h1, l1, h2, l2, np.int64(np.rint(scores[i] * scale)) * m)
    out[0], out[1], out[2], out[3] = h1, l1, h2, l2
    return n


def moments_from_sums(sums, n: int) -> tuple[float, float]:
    """(mean, standard deviation) over ``n`` documents from :func:`fixed_sums` (exact integer
    arithmetic, then one rounding each: the same floats from any split of the sums)."""
    if n == 0:
        return 0.0, 1.0
    s1 = (int(sums[0]) << _CARRY) + int(sums[1])
    s2 = (int(sums[2]) << _CARRY) + int(sums[3])
    mu = s1 / (n << FRAC)
    var = (n * s2 - s1 * s1) / ((n * n) << (2 * FRAC))
    return mu, (var**0.5 if var > 1e-18 else 1.0)


def merge_sums(parts) -> np.ndarray:
    """One :func:`fixed_sums` array from several (each from a part of the documents: a shard of a
    store): exact integer addition, so :func:`moments_from_sums` of the result equals the one of
    the whole, whatever the parts."""
    s1 = sum((int(p[0]) << _CARRY) + int(p[1]) for p in parts)
    s2 = sum((int(p[2]) << _CARRY) + int(p[3]) for p in parts)
    h1, h2 = s1 >> _CARRY, s2 >> _CARRY
    return np.array([h1, s1 - (h1 << _CARRY), h2, s2 - (h2 << _CARRY)], dtype=np.int64)


def candidate_moments(scores, mask) -> tuple[float, float]:
    """(mean, standard deviation) of ``scores`` over the masked documents (fixed point: the same
    whatever order or parts the documents are summed in)."""
    sums = np.zeros(4, dtype=np.int64)
    n = fixed_sums_masked(scores, mask, sums)
    return moments_from_sums(sums, n)


def sparse_moments(scores, touched, n_touched: int, n_candidates: int) -> tuple[float, float]:
    """(mean, sd) over ``n_candidates`` documents of which only the touched ones are non-zero
    (fixed point: the same whatever order the documents were touched in)."""
    sums = np.zeros(4, dtype=np.int64)
    fixed_sums(scores, touched, n_touched, sums)
    return moments_from_sums(sums, n_candidates)


@njit(cache=True, nogil=True)
def context_bound(z, betas, scaled, use_max):
    """An upper bound on the context score (:func:`context_topk`) of any document whose own
    z-score and whose candidate neighbours' z-scores are all at most ``z``.

    Each term of the formula grows with the z-scores it reads (the betas and the scales are
    >= 0, and rounding is monotone), so the bound is the formula at ``z``, every neighbour
    present where that raises it; a scale in ``[0, 1]`` (``scaled``) lowers a positive lift
    and raises a negative one at most to 0. Distributed scoring (``mempp.distributed``) uses it
    to certify that documents it has not scored cannot enter a leg's top ``depth``.
    """
    if betas.shape[0] == 0:
        return z
    if use_max:
        ctx = -np.inf
        for h in range(betas.shape[0]):
            ctx = max(ctx, betas[h] * z)
        if scaled:
            ctx = max(ctx, 0.0)
        return max(z, ctx)
    ctx = 0.0
    lift = max(z, 0.0)
    for h in range(betas.shape[0]):
        ctx += betas[h] * lift
        ctx += betas[h] * lift
    return z + ctx


@njit(cache=True, nogil=True)
def with_neighbours(ids, n_ids, prev, nxt, hops, mask, seen, out):
    """``ids[:n_ids]`` plus their candidate thread neighbours up to ``hops`` steps, each once.

    ``seen`` is a caller-owned zeroed uint8 array over all documents; it is zero again on return.
    Returns how many ids were written to ``out`` (capacity ``n_ids * (2 * hops + 1)``).
    """
    m = 0
    for j in range(n_ids):
        d = ids[j]
        if not seen[d]:
            seen[d] = 1
            out[m] = d
            m += 1
        p = d
        q = d
        for _ in range(hops):
            if p >= 0:
                p = prev[p]
            if q >= 0:
                q = nxt[q]
            if p >= 0 and mask[p] and not seen[p]:
                seen[p] = 1
                out[m] = p
                m += 1
            if q >= 0 and mask[q] and not seen[q]:
                seen[q] = 1
                out[m] = q
                m += 1
    for j in range(m):
        seen[out[j]] = 0
    return m


def neighbourhood(ids, prev, nxt, hops: int, mask, seen=None) -> np.ndarray:
    """:func:`with_neighbours` of ``ids`` as a new array: ``ids`` plus their candidate thread
    neighbours up to ``hops`` steps, each once. ``seen``: the caller's zeroed scratch over all
    documents, zero again on return (a fresh one when None)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    out = np.empty(max(len(ids) * (2 * hops + 1), 1), dtype=np.int64)
    if seen is None:
        seen = np.zeros(len(prev), dtype=np.uint8)
    return out[: with_neighbours(ids, len(ids), prev, nxt, hops, mask, seen, out)]


@njit(cache=True, nogil=True)
def thread_members(ids, codes, counts, prev, nxt, mask, max_size, offs, out):
    """For each of ``ids``: the other candidate documents of its thread in ingest order, when the
    thread holds 2 to ``max_size`` documents (else none), written to ``out[offs[j]:offs[j + 1]]``
    (capacity ``len(ids) * max_size``). Returns how many were written."""
    m = 0
    for j in range(ids.shape[0]):
        d = ids[j]
        offs[j] = m
        c = codes[d]
        if c < 0 or counts[c] > max_size or counts[c] < 2:
            continue
        head = d
        while prev[head] >= 0:  # at most max_size steps
            head = prev[head]
        while head >= 0:
            if head != d and mask[head]:
                out[m] = head
                m += 1
            head = nxt[head]
    offs[ids.shape[0]] = m
    return m


SEED_SAMPLE = 8  # context_seeds: every 8th document's score bounds the depth-th from below


def context_seeds(first: np.ndarray, mask: np.ndarray, mu: float, sigma: float, betas: np.ndarray, depth: int, move: float) -> np.ndarray | None:
    """The documents from whose thread neighbourhoods (``len(betas)`` steps) the top ``depth`` by
    context score (max mode), and every document within ``2 * move`` of it, must come; None when
    that cannot be shown and every candidate must be ranked. ``first``: a leg's scores over every
    document, positive only for candidates (0 elsewhere); ``move``: how far each context score
    may still move (the vector leg's rescore; 0 for exact scores, the lexical leg's).

    A document's context score is its own z-score or a lift of at most ``max(betas)`` (a
    neighbour's share is at most 1) times a neighbour's. With ``max(betas) <= 1``, a score above a
    positive ``x`` is a z-score above ``x``: the document's own or a neighbour's. Every 8th
    document's first score gives a lower bound ``z`` on the ``depth``-th z-score (a positive first
    score is a candidate's: others are 0), so the ``depth``-th context score is at least ``z``,
    and the documents that matter score above ``z - 2 * move``, positive here: they are the
    documents whose own z-score is above it, and their neighbours.
    """
    if float(betas.max(initial=0.0)) > 1.0 or (len(first) + SEED_SAMPLE - 1) // SEED_SAMPLE < depth:
        return None
    top = sampled_kth(first, SEED_SAMPLE, depth, np.empty(depth), np.empty(depth, dtype=np.int64))
    bound = (top - mu) / sigma - 2.0 * move
    if top <= 0.0 or bound <= 1e-6:
        return None
    threshold = mu + (bound - 1e-6) * sigma - 1e-6  # lowered past the rounding of z-scores
    out = np.empty(len(first), dtype=np.int64)
    return out[: at_least(first, mask, threshold, threshold <= 0.0, out)]


@njit(cache=True, nogil=True)
def sampled_kth(values, step, k, hs, hi):
    """The ``k``-th largest of ``values[::step]``, repeats counted (float64); -inf when it holds
    fewer than ``k``. ``hs``, ``hi``: scratch of ``k`` (a heap of the ``k`` largest)."""
    n = 0
    for i in range(0, values.shape[0], step):
        v = np.float64(values[i])
        if n < k or v > hs[0]:
            n = heap_push(hs, hi, n, k, v, i)
    return hs[0] if n == k else -np.inf


@njit(cache=True, nogil=True)
def at_least(values, mask, threshold, masked, out):
    """The indices of ``values`` at least ``threshold`` (compared in float64), in order, into
    ``out``; only masked ones when ``masked``. Returns how many."""
    m = 0
    for i in range(values.shape[0]):
        if np.float64(values[i]) >= threshold and (not masked or mask[i]):
            out[m] = i
            m += 1
    return m


@njit(cache=True, nogil=True)
def context_topk(scores, mu, sigma, ids, n_ids, prev, nxt, betas, scale, mask, k, out_ids, out_scores, all_scores, use_max=False):
    """Context scores of ``ids[:n_ids]`` into ``all_scores`` and their best ``k`` into ``out_*``; returns how many.

    ``scale[d]`` multiplies the neighbours' share of ``d``'s score (an empty ``scale`` means 1).
    With ``use_max`` a document's score is ``max(z(d), betas[h] · z(neighbour))`` instead of the
    sum: a neighbour of a strong hit rises to just below it, never above it.
    """
    inv = 1.0 / sigma
    scaled = scale.shape[0] > 0
    hs = np.empty(max(k, 1), dtype=np.float64)
    hi = np.empty(max(k, 1), dtype=np.int64)
    n = 0
    for j in range(n_ids):
        d = ids[j]
        ctx = -np.inf if use_max else 0.0
        p = d
        q = d
        for h in range(betas.shape[0]):
            if p >= 0:
                p = prev[p]
            if q >= 0:
                q = nxt[q]
            if use_max:
                if p >= 0 and mask[p]:
                    ctx = max(ctx, betas[h] * (scores[p] - mu) * inv)
                if q >= 0 and mask[q]:
                    ctx = max(ctx, betas[h] * (scores[q] - mu) * inv)
            else:
                if p >= 0 and mask[p]:
                    ctx += betas[h] * (scores[p] - mu) * inv
                if q >= 0 and mask[q]:
                    ctx += betas[h] * (scores[q] - mu) * inv
        if scaled and ctx != -np.inf:
            ctx = ctx * scale[d] if scale[d] > 0 else (-np.inf if use_max else 0.0)
        own = (scores[d] - mu) * inv
        acc = max(own, ctx) if use_max else own + ctx
        all_scores[j] = acc
        n = heap_push(hs, hi, n, k, acc, d)
    return heap_sorted(hs, hi, n, out_scores, out_ids)


@njit(cache=True, nogil=True, fastmath=True)
def masked_dot_max(emb, rows, query, mask, base, out):
    """For window vectors ``emb`` owned by segment rows ``rows``: ``out[g] = max(out[g], emb[i] · query)``."""
    d = emb.shape[1]
    for i in range(emb.shape[0]):
        g = base + rows[i]
        if mask[g]:
            acc = np.float32(0.0)  # float32 accumulator: vectorized; float64 halves the speed
            for j in range(d):
                acc += emb[i, j] * query[j]
            if acc > out[g]:
                out[g] = acc
