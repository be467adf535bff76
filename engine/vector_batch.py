"""The vector leg of many queries at once (bulk scoring), each ranking equal to :func:`vector.vector_leg`'s.

Owns the int8 batch scan over blocks of rows (tiled kernels, the sampled score floors) and
the float32 matrix-product path, each query's exact rescore and certificate; a query that
cannot be certified comes back as None, to be answered alone. It must never import the
lexical or tag legs, fusion, the planner or the store.

Never imports: lexical, tags, fusion, planner, store.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mempp.kernels import TopK, batch_topk, heap_push_many
from mempp.kernels.cosine import certified_tops
from mempp.kernels.int8dot import BATCH_ROWS, Int8Batch, batch_scan, tiled_scan_ok
from mempp.storage import FOREVER, Snapshot

from .candidates import date_bounds
from .options import QueryOptions
from .vector import RESCORE, ann_searches, rescore, version_embedding_table

# Bulk scoring (int8 queries, a wider error bound) keeps, per query, BATCH_KEEP_BASE rows plus one per
# BATCH_KEEP_PER_CANDIDATES candidates (and at least what a single query keeps): on the 100k workload a
# query needs 130 to 410 rows to certify (more with more candidates); one not certified is answered alone.
BATCH_KEEP_BASE = 250
BATCH_KEEP_PER_CANDIDATES = 250


BATCH_BLOCK = 8192  # document rows per matrix product in vector_legs


def vector_legs(
    snap: Snapshot, qvecs: np.ndarray, masks: Sequence[np.ndarray], opts: Sequence[QueryOptions], counts: np.ndarray | None = None
) -> list:
    """The vector leg of many queries at once, each ranking equal to :func:`vector_leg`'s.

    With the int8 copy on every segment: one int8 pass over each block of rows (held in
    cache) for all the queries (``kernels.int8dot.batch_scan``; a tiled matrix product with
    512-bit VNNI, each query's rows kept above a floor set by a sampled pass first,
    :func:`scan_floors`), then each query's kept rows rescored exactly, best approximate
    first, and certified against the int8 error bound as in :func:`vector_leg`
    (``kernels.cosine.certified_tops``, all the queries in one call).
    Otherwise one float32 matrix product per block of rows, the best ``depth + 16`` rows
    rescored with the single-query kernel and certified (the product and the kernel round
    differently, by at most ``2 d 2^-23`` for unit vectors). None for a query that must be
    answered alone (not certified, or a store whose vector leg needs a dense pass: windows,
    thread context) or whose vector leg searches an ANN index (:func:`vector.ann_searches`: it
    is answered as :func:`vector.vector_leg` answers it alone). ``counts``: each mask's
    candidates, when known.
    """
    n_q = len(opts)
    if not n_q or snap.has_windows or (snap.has_threads and any(o.context for o in opts)):
        return [None] * n_q
    if any(a.index is not None for a in getattr(snap, "ann", ())):
        alone = [bool(ann_searches(snap, masks[b], o)) for b, o in enumerate(opts)]
        if any(alone):
            rest = [b for b in range(n_q) if not alone[b]]
            out: list = [None] * n_q
            if rest:
                sub = vector_legs(
                    snap, np.asarray(qvecs)[rest], np.stack([masks[b] for b in rest]), [opts[b] for b in rest],
                    None if counts is None else np.asarray(counts)[rest],
                )
                for b, r in zip(rest, sub):
                    out[b] = r
            return out
    q = np.ascontiguousarray(qvecs, dtype=np.float32)
    m = masks if isinstance(masks, np.ndarray) and masks.ndim == 2 else np.stack(masks)
    if snap.segments and all(e.q8 is not None for e in snap.segments):
        return _vector_legs_int8(snap, q, m, opts, counts)
    depth = max(o.depth for o in opts)
    keep = depth + 16
    heap_s = np.empty((n_q, keep), dtype=np.float32)
    heap_i = np.empty((n_q, keep), dtype=np.int64)
    heap_n = np.zeros(n_q, dtype=np.int64)
    for entry in snap.segments:
        emb = entry.segment.embeddings
        for r0 in range(0, len(emb), BATCH_BLOCK):
            block = q @ emb[r0 : r0 + BATCH_BLOCK].T
            batch_topk(block, m, entry.base + r0, keep, heap_s, heap_i, heap_n)
    eps = 2 * q.shape[1] * 2.0**-23 * 1.01 + 1e-7
    return [certified_top(snap, q[b], heap_s[b], heap_i[b], int(heap_n[b]), keep, opt.depth, eps) for b, opt in enumerate(opts)]


def certified_top(snap, query, heap_s, heap_i, n, keep, depth, eps):
    """The exact top ``depth`` of a query from its approximate heap, or None when not certified."""
    ids = np.sort(heap_i[:n])
    top = TopK(depth, dtype=np.float32)
    top.n = heap_push_many(top.scores, top.ids, top.n, depth, rescore(snap, ids, query), ids)
    # A row not kept has approximate <= the heap's root (its worst), so exact <= root + eps.
    certified = n < keep or (top.n == depth and float(heap_s[0]) + eps < float(top.scores[0]))
    return top.result()[0] if certified else None


def _vector_legs_int8(snap: Snapshot, q: np.ndarray, m: np.ndarray, opts: Sequence[QueryOptions], counts: np.ndarray | None = None) -> list:
    n_q = len(opts)
    depths = np.array([o.depth for o in opts], dtype=np.int64)
    if counts is None:
        counts = np.count_nonzero(m, axis=1)
    keeps = np.maximum(np.maximum(RESCORE * depths, depths + 100), BATCH_KEEP_BASE + np.asarray(counts, dtype=np.int64) // BATCH_KEEP_PER_CANDIDATES)
    if not all(tiled_scan_ok(e.q8, e.base) for e in snap.segments):
        keeps[:] = keeps.max()  # the row kernels scan a block for all queries only with one capacity for all
    width = int(keeps.max())
    heap_s = np.empty((n_q, width), dtype=np.float32)
    heap_i = np.empty((n_q, width), dtype=np.int64)
    heap_n = np.zeros(n_q, dtype=np.int64)
    prepared = Int8Batch.quantize(q)  # int8: half the work; the certificate absorbs the coarser bound
    counts = np.asarray(counts, dtype=np.int64)
    his = np.array([FOREVER if (h := date_bounds(o)[1]) is None else h for o in opts], dtype=np.int64)
    floors = scan_floors(snap, prepared, m, keeps, counts, his)
    eps = np.zeros(n_q, dtype=np.float64)
    for entry in snap.segments:
        batch_scan(
            entry.q8, entry.q8_scale, entry.q8_stats(), prepared, m, entry.base, keeps, heap_s, heap_i, heap_n, floors=floors,
            order=entry.q8_order, stops=entry.q8_stops(his),
        )
        eps = np.maximum(eps, prepared.error_bounds(entry.q8_stats()))
    if floors is not None:
        # A heap that did not fill: fewer than keep rows reached the floor, so rows below it may
        # belong in it. Scan those queries again without a floor (rare: the floor is set where
        # about SEED_MARGIN x keep rows should reach it).
        redo = np.flatnonzero((heap_n < keeps) & (floors > -np.inf))
        if len(redo):
            sub = Int8Batch(prepared.query[redo], prepared.qw[redo], prepared.qscale[redo])
            sm = np.ascontiguousarray(m[redo])
            ss, si, sn = heap_s[redo], heap_i[redo], np.zeros(len(redo), dtype=np.int64)
            for entry in snap.segments:
                stops = entry.q8_stops(his[redo])
                batch_scan(entry.q8, entry.q8_scale, entry.q8_stats(), sub, sm, entry.base, keeps[redo], ss, si, sn, order=entry.q8_order, stops=stops)
            heap_s[redo], heap_i[redo], heap_n[redo] = ss, si, sn
    table, keep = version_embedding_table(snap)
    out_ids = np.empty((n_q, int(depths.max())), dtype=np.int64)
    out_n = np.zeros(n_q, dtype=np.int64)
    certified = np.zeros(n_q, dtype=np.bool_)
    certified_tops(table, q.shape[1], q, heap_s, heap_i, heap_n, keeps, depths, eps, out_ids, out_n, certified)
    del keep
    return [out_ids[b, : out_n[b]] if certified[b] else None for b in range(n_q)]


SEED_STRIDE = 32  # the sample that sets the scan's floors: every 32nd block of rows
SEED_MARGIN = 2.0  # a floor is set where about this many times keep rows should score above it
SEED_MIN_RANK = 8  # ... from at least this many sampled rows above it (else no floor)
SEED_MIN_DOCS = 4 * SEED_STRIDE * BATCH_ROWS  # smaller stores: no sample (too few blocks to sample)


def scan_floors(
    snap: Snapshot, prepared: Int8Batch, m: np.ndarray, keeps: np.ndarray, counts: np.ndarray, his: np.ndarray | None = None
) -> np.ndarray | None:
    """Per query, a score floor for the int8 batch scan, from a scan of a sample of the rows; None for none.

    A row below its query's floor is not offered to the heap: most rows that would enter it
    only to be pushed out again (a heap of ``keep`` over ``n`` candidates in random order
    takes about ``keep * (1 + ln(n / keep))`` rows) are skipped. The floor is the sampled
    candidates' ``r``-th best score, ``r`` chosen so that about ``SEED_MARGIN x keep`` of all the
    candidates should reach it. Only a guess: the caller checks that each heap filled.
    ``his``: each query's date bound (``date_bounds``; FOREVER for none), which limits the rows read.
    """
    if not all(tiled_scan_ok(e.q8, e.base) for e in snap.segments) or snap.n_docs < SEED_MIN_DOCS:
        return None
    n_q = len(keeps)
    cap = int(np.ceil(2 * SEED_MARGIN * keeps.max() / SEED_STRIDE)) + 2 * SEED_MIN_RANK
    ss = np.empty((n_q, cap), dtype=np.float32)
    si = np.empty((n_q, cap), dtype=np.int64)
    sn = np.zeros(n_q, dtype=np.int64)
    seen = np.zeros(n_q, dtype=np.int64)
    for entry in snap.segments:
        batch_scan(
            entry.q8, entry.q8_scale, entry.q8_stats(), prepared, m, entry.base, cap, ss, si, sn, stride=SEED_STRIDE, seen=seen,
            order=entry.q8_order, stops=None if his is None else entry.q8_stops(his),
        )
    rank = (SEED_MARGIN * keeps * seen // np.maximum(counts, 1)).astype(np.int64)
    ok = (rank >= SEED_MIN_RANK) & (rank <= sn)
    filled = np.where(np.arange(cap)[None, :] < sn[:, None], ss, -np.inf)
    best = -np.sort(-filled, axis=1)  # best first
    floors = np.full(n_q, -np.inf, dtype=np.float32)
    floors[ok] = best[ok, rank[ok] - 1]
    return floors
