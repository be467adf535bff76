"""The vector leg of one query (docs/DESIGN.md §3.2): cosine top ``depth`` over the candidates, exactly.

Owns the choice between the HNSW index and the exact scan per indexed range (a cost model),
the int8 scan with its exact rescore and certificate, the float32 fallback, the dense
pass that windows need, and thread context's ranking from the int8 first scores with its
exact rescore of the documents within reach of the top. Bulk scoring is ``vector_batch``. It must never
import the other legs, fusion, the planner or the store.

Never imports: lexical, tags, vector_batch, fusion, planner, store.
"""

from __future__ import annotations

import math

import numpy as np

from mempp.kernels import (
    TopK, candidate_moments, context_seeds, context_topk, heap_push_many, masked_dot_dense, masked_dot_max, masked_dot_topk, neighbourhood,
    rescore_exact,
)
from mempp.kernels.cosine import certified_tops, embedding_table
from mempp.kernels.int8dot import Int8Query
from mempp.storage import Snapshot

from .caches import version_caches
from .candidates import date_bounds
from .options import QueryOptions, VectorIndex, context_scale

RESCORE = 4  # the int8 scan keeps RESCORE x depth rows (at least depth + 100) for the exact rescore
KEEP_PER_CANDIDATES = 200  # ... and at least one row per this many candidates


def vector_leg(
    snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions, info: dict | None = None, reuse: dict | None = None,
) -> np.ndarray:
    """Top ``depth`` doc ids by cosine over the candidates, exactly.

    A document with extra window vectors scores as its best window (a float32 pass over
    every candidate); with thread context each score is lifted by its neighbours', ranked from
    every candidate's int8 first score and rescored where it can still reach the top
    (``docs/DESIGN.md`` §3.3). Otherwise a heap keeps the best ``depth`` during the scan, and segments with an
    int8 copy are scanned through it: the best ``RESCORE x depth`` rows by approximate score
    are rescored exactly, and the result is certified against the int8 error bound (a row
    left out could not have entered the top ``depth``) or the scan is redone in float32.
    ``info`` receives how the leg ran.

    ``mask`` must be ``candidate_mask(snap, opt)`` or hold fewer documents: the int8 scan reads
    only the rows dated inside ``date_bounds(opt)``. ``reuse``: a dict given to every scan of this
    ``mask`` (the feedback scan's too), where the int8 scans keep each segment's list of candidate
    rows (``kernels.int8scan.listed_rows``) instead of listing them again.
    """
    depth = opt.depth
    if (opt.context and snap.has_threads) or snap.has_windows:
        return _dense_vector_leg(snap, query, mask, opt, info, reuse)
    segments = snap.segments
    ann_used: list[str] = []
    ann_hits: list[tuple[np.ndarray, np.ndarray]] = []
    ann = ann_searches(snap, mask, opt)
    if ann:
        covered = np.zeros(len(segments), dtype=bool)
        for a, n_cand, want in ann:
            lo, hi = a.first, a.first + a.n
            labels, _ = a.knn(query, want, ef=max(want, ANN_EF_MIN))
            hits = np.sort(labels[mask[labels].view(bool)])
            if len(hits) < min(depth, n_cand):
                continue  # the filter left too few: scan this range exactly
            ann_hits.append((hits, rescore(snap, hits, query)))
            for i, e in enumerate(segments):
                if lo <= e.base and e.base + e.segment.n <= hi:
                    covered[i] = True
            ann_used.append(f"{n_cand}/{a.n} candidates, k={want}")
        segments = [e for i, e in enumerate(segments) if not covered[i]]

    def start() -> TopK:  # a heap holding the ANN ranges' (exactly rescored) results
        heap = TopK(depth, dtype=np.float32)
        for hits, scores in ann_hits:
            heap.n = heap_push_many(heap.scores, heap.ids, heap.n, depth, scores, hits)
        return heap

    exact = start()
    quant = [e for e in segments if e.q8 is not None]
    for entry in segments:
        if entry.q8 is None:
            exact.n = masked_dot_topk(entry.segment.embeddings, query, mask, entry.base, depth, exact.scores, exact.ids, exact.n)
    if quant:
        # Keep enough rows that the gap between the depth-th score and the kept floor exceeds the
        # rounding bound: the gap shrinks as candidates grow (more near-ties at the top).
        keep = int8_keep(depth, int(np.count_nonzero(mask)))
        approx = TopK(keep, dtype=np.float32)
        prepared = Int8Query(query)
        lo, hi = date_bounds(opt)
        spans = [e.q8_span(lo, hi) for e in quant]
        for entry, span in zip(quant, spans):
            approx.n = prepared.scan(
                entry.q8, entry.q8_scale, entry.q8_stats(), mask, entry.base, keep, approx.scores, approx.ids, approx.n, entry.q8_order, span, reuse
            )
        full = approx.n == keep
        floor = float(approx.scores[0]) if full else -np.inf  # the heap's root: the worst approximate score kept
        eps = max(prepared.error_bound(e.q8_stats()) for e in quant)
        ids = rescore_best_first(snap, query, approx, exact, eps)
        certified, band = True, 0
        if full and exact.n:
            worst_kept = float(exact.scores[0]) if exact.n == depth else -np.inf
            # A row not kept has approximate <= floor, so exact <= floor + eps.
            certified = floor + eps < worst_kept
            if not certified and worst_kept > -np.inf:
                # Rows that could still beat the depth-th exact score have approximate >= worst_kept - eps:
                # collect them all in a second int8 pass and rescore them exactly.
                out = np.empty(max(4 * keep, 4096), dtype=np.int64)
                n_out = 0
                for entry, span in zip(quant, spans):
                    n_out = prepared.above(
                        entry.q8, entry.q8_scale, entry.q8_stats(), mask, entry.base, worst_kept - eps, out, n_out, entry.q8_order, span
                    )
                    if n_out < 0:
                        break
                if n_out >= 0:
                    more = np.setdiff1d(out[:n_out], ids)  # sorted; the top's rows are in the heap already (the others rescored lose again)
                    exact.n = heap_push_many(exact.scores, exact.ids, exact.n, depth, rescore(snap, more, query), more)
                    certified, band = True, len(more)
        if not certified:
            exact = start()
            for entry in segments:
                exact.n = masked_dot_topk(entry.segment.embeddings, query, mask, entry.base, depth, exact.scores, exact.ids, exact.n)
        if info is not None and band:
            info["band_rows"] = band
        method = "int8 scan, exact rescore" + (", then the rows within the error bound" if band else "") + (
            "" if certified else ", not certified: exact rescan"
        )
    else:
        method = "exact masked scan" if segments else ""
    if info is not None:
        info["method"] = "; ".join([f"hnsw ({u})" for u in ann_used] + ([method] if method else []))
    return exact.result()[0]


# Cost model of the ANN choice, measured on the 2-core development machine (`mempp bench
# --clustered --ann`, bench/README.md): the int8 masked scan costs about 1 ns per document of a
# range plus 30 ns per candidate; an HNSW search (384-d, M 16) about 60 us plus 7 us per
# requested neighbour (ef = k), rescoring included. Measured with M 16; with M 32 (the default since
# the 1M recall runs) a search costs more, and the constants were not measured again.
EXACT_NS_PER_DOC, EXACT_NS_PER_CANDIDATE = 1.0, 30.0
ANN_US_BASE, ANN_US_PER_RESULT = 60.0, 7.0
ANN_EF_MIN = 64
ANN_OVERSAMPLE = 3.0  # 1.5 gave recall@10 0.938 at 1M clustered (10-50% candidates); 3.0 gave 0.955


def int8_keep(depth: int, n_cand: int) -> int:
    """Rows a single query's int8 scan keeps for exact rescoring (see :func:`vector_leg`)."""
    return max(RESCORE * depth, depth + 100, n_cand // KEEP_PER_CANDIDATES)


def ann_searches(snap: Snapshot, mask: np.ndarray, opt: QueryOptions) -> list:
    """The ANN indexes :func:`vector_leg` searches for a query, as ``(index, candidates in its range,
    neighbours to ask for)``: those loaded, holding candidates, and chosen by ``opt.vector_index`` (``"auto"``:
    by the cost model). Empty when the leg needs the dense pass (thread context, windows) or
    scans exactly."""
    if opt.vector_index is VectorIndex.EXACT or (opt.context and snap.has_threads) or snap.has_windows:
        return []
    out = []
    for a in getattr(snap, "ann", ()):
        if a.index is None:
            continue
        n_cand = int(np.count_nonzero(mask[a.first : a.first + a.n]))
        if n_cand == 0:
            continue
        want = ann_request(opt.depth, n_cand, a.n)
        if opt.vector_index is not VectorIndex.ANN and ann_cost_ms(want) >= exact_cost_ms(a.n, n_cand):
            continue
        out.append((a, n_cand, want))
    return out


def exact_cost_ms(n_docs: int, n_cand: int) -> float:
    return (EXACT_NS_PER_DOC * n_docs + EXACT_NS_PER_CANDIDATE * n_cand) / 1e6


def ann_cost_ms(k: int) -> float:
    return (ANN_US_BASE + ANN_US_PER_RESULT * k) / 1e3


def ann_request(depth: int, n_cand: int, n_docs: int) -> int:
    """Neighbours to ask for so that about ``depth`` of them pass a filter keeping ``n_cand`` of ``n_docs``."""
    share = max(n_cand / max(n_docs, 1), 1e-9)
    return int(min(n_docs, math.ceil(depth / share * ANN_OVERSAMPLE) + 10))


def rescore_best_first(snap: Snapshot, query: np.ndarray, approx: TopK, exact: TopK, eps: float) -> np.ndarray:
    """Push the exact top of the int8 heap's rows into ``exact``; those rows (sorted ids).

    ``kernels.cosine.certified_tops`` (bulk scoring's kernel, for this one query) rescores them
    best approximate first until the next row's approximate score plus ``eps`` (the bound on any
    row's error) is below the worst exact score kept: no row after it can enter, nor tie. The
    result is the rows' exact top, as if every row were rescored; the rows a store of many
    candidates keeps (one per ``KEEP_PER_CANDIDATES``, to certify the scan) are mostly never read
    in float32, which beyond memory is a read from disk.
    """
    table, keep = version_embedding_table(snap)
    out_ids = np.empty((1, exact.k), dtype=np.int64)
    out_n = np.zeros(1, dtype=np.int64)
    q = np.array(query, dtype=np.float32)  # a writable copy: the kernel's one compiled signature
    certified_tops(
        table, q.shape[0], q[None, :], approx.scores[None, : approx.n], approx.ids[None, : approx.n], np.array([approx.n]),
        np.array([approx.k]), np.array([exact.k]), np.array([eps]), out_ids, out_n, np.zeros(1, dtype=np.bool_),
    )
    del keep
    top = np.sort(out_ids[0, : out_n[0]])
    exact.n = heap_push_many(exact.scores, exact.ids, exact.n, exact.k, rescore(snap, top, q), top)
    return top


def version_embedding_table(snap: Snapshot) -> tuple[np.ndarray, list]:
    """The snapshot's float32 embeddings as a table of addresses (``kernels.cosine.embedding_table``), kept with the snapshot."""
    caches = version_caches(snap)
    cached = caches.embedding_table
    if cached is None:
        cached = caches.embedding_table = embedding_table([(e.segment.embeddings, e.base) for e in snap.segments])
    return cached


def rescore(snap: Snapshot, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Exact float32 scores of sorted global ``ids``, with the scan's own kernel."""
    out = np.empty(len(ids), dtype=np.float32)
    starts = np.searchsorted(ids, [e.base for e in snap.segments] + [snap.n_docs])
    for i, entry in enumerate(snap.segments):
        a, b = starts[i], starts[i + 1]
        if b > a:
            rescore_exact(entry.segment.embeddings, ids[a:b] - entry.base, query, out[a:b])
    return out


def _dense_vector_leg(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions, info: dict | None, reuse: dict | None) -> np.ndarray:
    depth = opt.depth
    prev, nxt = snap.thread_links
    betas = np.asarray(opt.context if snap.has_threads else (), dtype=np.float64)
    scale = context_scale(snap, opt)
    out_ids = np.empty(depth, dtype=np.int64)
    out_scores = np.empty(depth)

    def rank(scores: np.ndarray, mu: float, sigma: float, ids: np.ndarray, every: np.ndarray) -> int:
        """The top ``depth`` of ``ids`` by context score into ``out_*``; every one's into ``every``."""
        return context_topk(scores, mu, sigma, ids, len(ids), prev, nxt, betas, scale, mask, depth, out_ids, out_scores, every, opt.context_max)

    if snap.has_windows:
        if info is not None:
            info["method"] = "exact masked scan (best window)"
        dense = dense_scores(snap, query, mask)
        cands = np.flatnonzero(mask).astype(np.int64)
        return out_ids[: rank(dense, *candidate_moments(dense, mask), cands, np.empty(len(cands)))]
    # Thread context over the exact cosines, standardized by the moments of the first scores
    # (docs/DESIGN.md §3.3): the context scores of the first scores rank the candidates; each
    # exact cosine is within ``eps`` of its first score, so each context score moves by at most
    # ``move``; a document more than twice that below the depth-th cannot enter, and only the
    # rest (and the neighbours their scores read) are rescored in float32 and ranked again.
    first, eps = first_scores(snap, query, mask, opt, reuse)
    mu, sigma = candidate_moments(first, mask)
    move = eps / sigma * (max(1.0, float(betas.max(initial=0.0))) if opt.context_max else 1.0 + 2.0 * float(betas.sum()))
    move = move * (1.0 + 1e-6) + 1e-9  # the formula's own float64 rounding
    hops = len(betas)
    seen = np.zeros(snap.n_docs, dtype=np.uint8)  # neighbourhood's scratch, zero again after each use
    seeds = context_seeds(first, mask, mu, sigma, betas, depth, move) if opt.context_max else None
    ranked = np.flatnonzero(mask).astype(np.int64) if seeds is None else neighbourhood(seeds, prev, nxt, hops, mask, seen)
    every = np.empty(len(ranked))
    got = rank(first, mu, sigma, ranked, every)
    if got == 0:
        if info is not None:
            info["method"] = "thread context: no candidates"
        return out_ids[:0]
    pool = ranked[every >= out_scores[got - 1] - 2.0 * move] if got == depth else ranked
    ids = np.sort(neighbourhood(pool, prev, nxt, hops, mask, seen))
    first[ids] = rescore(snap, ids, query)
    if info is not None:
        info["method"] = "thread context: first scores (int8 where a copy exists), exact rescore"
        info["first_ranked"] = len(ranked)
        info["rescored_rows"] = len(ids)
    return out_ids[: rank(first, mu, sigma, pool, np.empty(len(pool)))]


def context_scores(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions) -> tuple[np.ndarray, np.ndarray]:
    """What the dense vector leg ranks by, for every candidate (a shard of a distributed store
    sends them): the exact cosines (the best window's with windows), and the scores whose moments
    standardize them (:func:`first_scores`; the cosines themselves with windows)."""
    if snap.has_windows:
        dense = dense_scores(snap, query, mask)
        return dense, dense
    first, _ = first_scores(snap, query, mask, opt)
    exact = np.zeros(snap.n_docs, dtype=np.float32)
    ids = np.flatnonzero(mask).astype(np.int64)
    exact[ids] = rescore(snap, ids, query)
    return exact, first


def first_scores(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions, reuse: dict | None = None) -> tuple[np.ndarray, float]:
    """Every candidate's first score (0 elsewhere), and a bound on how far its exact cosine
    (:func:`rescore`) can be from it.

    The first score is the int8 approximation where the segment has an int8 copy (one read of a
    quarter of the bytes), the float32 cosine elsewhere. Thread context standardizes the exact
    cosines by these scores' moments. The bound adds to the int8 error bound the float32
    rounding of a d-term sum of products of unit vectors, twice (the two float32 kernels).
    """
    first = np.zeros(snap.n_docs, dtype=np.float32)
    prepared = None
    eps = 0.0
    lo, hi = date_bounds(opt)
    for entry in snap.segments:
        if entry.q8 is None:
            masked_dot_dense(entry.segment.embeddings, query, mask, entry.base, first)
            continue
        prepared = prepared or Int8Query(query)
        prepared.dense(entry.q8, entry.q8_scale, entry.q8_stats(), mask, entry.base, first, entry.q8_order, entry.q8_span(lo, hi), reuse)
        eps = max(eps, prepared.error_bound(entry.q8_stats()))
    return first, eps + query.shape[0] * 2.0**-22 * float(np.linalg.norm(query))


def dense_scores(snap: Snapshot, query: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Every candidate's cosine (float32; its best window's where it has windows), 0 elsewhere."""
    dense = np.zeros(snap.n_docs, dtype=np.float32)
    for entry in snap.segments:
        masked_dot_dense(entry.segment.embeddings, query, mask, entry.base, dense)
        if entry.window_rows is not None:
            masked_dot_max(entry.window_embeddings, entry.window_rows, query, mask, entry.base, dense)
    return dense
