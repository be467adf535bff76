"""Thread context: a document's leg score lifted by the scores of its neighbours in its thread.

A turn of a conversation, a reply in an email thread or a paragraph of a
meeting's notes is read with what comes right before and after it. For a
leg's raw scores ``s`` over the candidates, with mean ``mu`` and standard
deviation ``sigma`` over the candidates, the context score of ``d`` is

    z(d) + Σ_h betas[h] · (z(prev_h(d)) + z(next_h(d))),   z = (s − mu) / sigma

where ``prev_h``/``next_h`` are the documents ``h + 1`` steps before/after
``d`` in its thread (ingest order) and only candidate neighbours count.
``prev``/``next`` hold the one-step links (−1: none).
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


@njit(cache=True, nogil=True)
def candidate_moments(scores, mask):
    """(mean, standard deviation) of ``scores`` over the masked documents."""
    n = 0
    s1 = 0.0
    s2 = 0.0
    for i in range(mask.shape[0]):
        if mask[i]:
            v = float(scores[i])
            n += 1
            s1 += v
            s2 += v * v
    if n == 0:
        return 0.0, 1.0
    mu = s1 / n
    var = s2 / n - mu * mu
    return mu, np.sqrt(var) if var > 1e-18 else 1.0


@njit(cache=True, nogil=True)
def sparse_moments(scores, touched, n_touched, n_candidates):
    """(mean, sd) over ``n_candidates`` documents of which only the touched ones are non-zero."""
    if n_candidates == 0:
        return 0.0, 1.0
    s1 = 0.0
    s2 = 0.0
    for j in range(n_touched):
        v = float(scores[touched[j]])
        s1 += v
        s2 += v * v
    mu = s1 / n_candidates
    var = s2 / n_candidates - mu * mu
    return mu, np.sqrt(var) if var > 1e-18 else 1.0


@njit(cache=True, nogil=True)
def sparse_moment_parts(scores, touched, bounds, out):
    """Per part ``i``: the sum and the sum of squares (float64, in order) of ``scores[touched[j]]``
    for ``j`` in ``[bounds[i], bounds[i + 1])``, into ``out[i, 0]`` and ``out[i, 1]``.

    A part is one segment's touched documents: summed per segment and then across segments
    (:func:`moments_of_parts`), the moments do not depend on which process holds which segments.
    """
    for i in range(bounds.shape[0] - 1):
        s1 = 0.0
        s2 = 0.0
        for j in range(bounds[i], bounds[i + 1]):
            v = float(scores[touched[j]])
            s1 += v
            s2 += v * v
        out[i, 0] = s1
        out[i, 1] = s2


@njit(cache=True, nogil=True)
def dense_moment_parts(scores, mask, starts, out):
    """Per part ``i``: the sum and the sum of squares (float64, in id order) of the masked
    ``scores[d]`` for ``d`` in ``[starts[i], starts[i + 1])`` (one segment), into ``out[i]``."""
    for i in range(starts.shape[0] - 1):
        s1 = 0.0
        s2 = 0.0
        for d in range(starts[i], starts[i + 1]):
            if mask[d]:
                v = float(scores[d])
                s1 += v
                s2 += v * v
        out[i, 0] = s1
        out[i, 1] = s2


@njit(cache=True, nogil=True)
def moments_of_parts(parts, n):
    """(mean, standard deviation) over ``n`` documents from per-segment sums (``*_moment_parts``),
    added in segment order: the same floats whichever processes summed the parts."""
    if n == 0:
        return 0.0, 1.0
    s1 = 0.0
    s2 = 0.0
    for i in range(parts.shape[0]):
        s1 += parts[i, 0]
        s2 += parts[i, 1]
    mu = s1 / n
    var = s2 / n - mu * mu
    return mu, np.sqrt(var) if var > 1e-18 else 1.0


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
