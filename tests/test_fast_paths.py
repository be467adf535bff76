"""The fast paths of the read path against the plain ones they replace.

- dense BM25 accumulation (no per-posting mask test) against the sparse, masked kernel;
- the int8 copy: its error bound holds, and the vector leg that scans it and rescores
  exactly returns what the float32 scan returns, certified or by falling back;
- the lexical leg of a store, whichever path it takes, against a numpy BM25 oracle.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import types

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import mempp
from mempp.caches import version_caches
from mempp import candidates as C
from mempp import lexical as LX
from mempp import planner as P
from mempp import vector_batch as VB
from mempp.vector import version_embedding_table
from mempp.config import IndexConfig
from mempp.kernels import (
    TopK,
    bm25_accumulate_dense,
    bm25_idf,
    bm25_norms,
    dense_topk,
    Int8Query,
    masked_dot_topk,
    batch_scan,
    identity_order,
    masked_dot_topk_q8,
    masked_dot_above_q8,
    segment_stats,
    quantize_rows,
)

from mempp.kernels.masks import keep_dates_by_rule, valid_by_rule
from test_kernels import K1, B, SETTINGS, bm25_cases, build_postings, run_bm25

DIM = 16


@SETTINGS
@given(bm25_cases(), st.sampled_from([np.uint8, np.bool_]))
def test_dense_bm25_equals_sparse_kernel(case, mask_dtype):
    docs, query, mask_list, k = case
    n = sum(len(s) for s in docs)
    assume(n > 0)
    mask = np.array(mask_list, dtype=mask_dtype)
    want_ids, want_scores, _, _ = run_bm25(docs, query, mask, k, np.zeros(n, np.float32), np.empty(n, np.int64))

    flat = [toks for seg in docs for toks in seg]
    n_terms = max([max(t) for t in flat if t] + query + [0]) + 1
    avgdl = sum(len(t) for t in flat) / n
    weights = bm25_idf(n, np.array([sum(1 for toks in flat if t in toks) for t in query], dtype=np.int64))
    q = np.array(query, dtype=np.int64)
    scores = np.zeros(n, dtype=np.float32)
    base = 0
    for seg in docs:
        p_docs, p_tfs, term_starts = build_postings(seg, n_terms)
        norms = np.empty(len(seg))
        bm25_norms(np.array([len(t) for t in seg], dtype=np.float32), avgdl, K1, B, norms)
        starts = np.array([term_starts[t] for t in q], dtype=np.int64)
        ends = np.array([term_starts[t + 1] for t in q], dtype=np.int64)
        bm25_accumulate_dense(p_docs, p_tfs, starts, ends, weights, norms, K1, base, scores)
        base += len(seg)
    ids = np.empty(k, dtype=np.int64)
    top = np.empty(k, dtype=np.float32)
    m = dense_topk(scores, mask, k, ids, top)
    assert ids[:m].tolist() == want_ids.tolist()
    assert top[:m].tolist() == want_scores.tolist()  # same arithmetic, same order: bit for bit
    assert not scores.any()  # ready for the next query


def unit_rows(rng, n, d=DIM):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _heap(h, b, k):
    """Heap ``b`` of batch heaps ``h = [scores, ids, fills]`` as (ids, scores), best first."""
    t = TopK(k)
    t.scores[:], t.ids[:], t.n = h[0][b], h[1][b], int(h[2][b])
    return t.result()


def _all(n):
    """``order, start, stop`` of a whole copy stored in row order (the portable kernels' oracle form)."""
    return identity_order(n), 0, n


def _stats(q8, scale):
    stats = segment_stats(q8, scale)
    rowsum, l1 = stats[:2]
    assert np.array_equal(rowsum, q8.astype(np.int64).sum(axis=1)) and np.array_equal(l1, np.abs(q8.astype(np.int64)).sum(axis=1))
    return stats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 60), st.sampled_from([4, 16, 100, 128, 384, 1024, 4096]), st.floats(1e-3, 1e3),
    st.floats(1e-3, 1e3), st.booleans(),
)
def test_int8_scores_within_the_error_bound(seed, n, d, magnitude, qmag, precise):
    rng = np.random.default_rng(seed)
    emb = unit_rows(rng, n, d) * np.float32(magnitude)
    emb[0, :] = 0.0  # an all-zero row
    query = unit_rows(rng, 1, d)[0] * np.float32(qmag)
    if n > 1:
        emb[1, :] = np.float32(magnitude) / np.sqrt(d) * np.sign(query)  # the largest possible dot product
    q8 = np.empty(emb.shape, dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    quantize_rows(emb, q8, scale)
    stats = _stats(q8, scale)
    prepared = Int8Query(query, precise)
    # The oracle: the kernel's own formula in exact integers, then the same float32 rounding.
    ints = q8.astype(np.int64) @ prepared.qw.astype(np.int64)
    assert np.abs(ints).max(initial=0) < 2**31
    approx = scale * (np.float32(prepared.qscale) * ints.astype(np.float32))
    exact = emb.astype(np.float64) @ query.astype(np.float64)
    assert np.abs(approx.astype(np.float64) - exact).max() <= prepared.error_bound(stats)
    # Both kernels (portable, and VNNI where the CPU has it) give exactly these scores.
    mask = np.ones(n, dtype=np.uint8)
    heap = TopK(n)
    heap.n = masked_dot_topk_q8(q8, scale, prepared.qw, prepared.qscale, mask, 0, n, heap.scores, heap.ids, heap.n, *_all(n))
    ids, got = heap.result()
    assert sorted(ids.tolist()) == list(range(n))
    assert np.array_equal(got, approx[ids])
    heap = TopK(n)
    heap.n = prepared.scan(q8, scale, stats, mask, 0, n, heap.scores, heap.ids, heap.n)
    ids2, got2 = heap.result()
    assert np.array_equal(ids2, ids) and np.array_equal(got2, got)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 3000), st.sampled_from([100, 128, 384, 768]), st.floats(0.0, 1.0), st.integers(1, 64), st.integers(1, 5))
def test_int8_kernels_agree_bit_for_bit(seed, n, d, frac, k, n_q):
    """Portable, VNNI (where the CPU has it) and batch scans: masks of any density, heaps of
    any size, a base offset, rows of any width: the same heap, bit for bit."""
    rng = np.random.default_rng(seed)
    q8 = rng.integers(-127, 128, (n, d)).astype(np.int8)
    scale = rng.random(n).astype(np.float32)
    stats = _stats(q8, scale)
    base = int(rng.integers(0, 5))
    masks = np.zeros((n_q, base + n), dtype=np.uint8)
    masks[:, base:] = rng.random((n_q, n)) < frac
    queries = [Int8Query(rng.standard_normal(d).astype(np.float32), precise=False) for _ in range(n_q)]
    heap_s = np.empty((n_q, k), dtype=np.float32)
    heap_i = np.empty((n_q, k), dtype=np.int64)
    heap_n = np.zeros(n_q, dtype=np.int64)
    batch_scan(q8, scale, stats, queries, masks, base, k, heap_s, heap_i, heap_n)
    for b, prepared in enumerate(queries):
        a, v = TopK(k), TopK(k)
        a.n = masked_dot_topk_q8(q8, scale, prepared.qw, prepared.qscale, masks[b], base, k, a.scores, a.ids, a.n, *_all(n))
        v.n = prepared.scan(q8, scale, stats, masks[b], base, k, v.scores, v.ids, v.n)
        ra, rv = a.result(), v.result()
        assert np.array_equal(ra[0], rv[0]) and np.array_equal(ra[1], rv[1])
        # The precise (int16) query: portable and VNNI kernels agree too, and so do their threshold passes.
        fine = Int8Query(prepared.query)
        a, v = TopK(k), TopK(k)
        a.n = masked_dot_topk_q8(q8, scale, fine.qw, fine.qscale, masks[b], base, k, a.scores, a.ids, a.n, *_all(n))
        v.n = fine.scan(q8, scale, stats, masks[b], base, k, v.scores, v.ids, v.n)
        fa, fv = a.result(), v.result()
        assert np.array_equal(fa[0], fv[0]) and np.array_equal(fa[1], fv[1])
        if len(fa[1]):
            t = float(fa[1][-1])
            out = np.empty(n, dtype=np.int64)
            got = fine.above(q8, scale, stats, masks[b], base, t, out, 0)
            want = masked_dot_above_q8(q8, scale, fine.qw, np.float32(fine.qscale), masks[b], base, np.float32(t), np.empty(n, dtype=np.int64), 0, *_all(n))
            assert got == want >= min(k, len(fa[0]))
        assert len(ra[0]) == min(k, int(masks[b].sum()))
        bt = TopK(k)
        bt.scores[:], bt.ids[:], bt.n = heap_s[b], heap_i[b], int(heap_n[b])
        rb = bt.result()
        assert np.array_equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 600), st.sampled_from([128, 384]), st.integers(1, 4), st.sampled_from([0, 128, 255]),
    st.booleans(), st.integers(1, 40),
)
def test_int8_scan_skipping_low_halves_keeps_every_tie(seed, n, d, n_patterns, low, positive, k):
    """The VNNI scan skips a row's low-byte product when the high byte's bound is below the
    heap's root. Rows from a few patterns (scores tie by the hundred), queries whose low bytes
    are all 0, 128 or 255 (255 on rows of positive bytes: the bound is the score itself), equal
    or near-equal scales: the heap and the threshold pass equal the portable kernel's, bit for bit."""
    rng = np.random.default_rng(seed)
    lo_b = 1 if positive else -127
    patterns = rng.integers(lo_b, 128, (n_patterns, d)).astype(np.int8)
    q8 = np.ascontiguousarray(patterns[rng.integers(0, n_patterns, n)])
    scale = rng.choice(np.float32([0.5, 0.5, np.nextafter(np.float32(0.5), np.float32(1)), 0.25]), n).astype(np.float32)
    stats = _stats(q8, scale)
    mask = (rng.random(n) < 0.8).astype(np.uint8)
    high = rng.integers(-127, 127, d)
    qw = high * 256 + low
    qw[int(rng.integers(0, d))] = 32767  # max |qw| = 32767: qscale 1, qw taken as it is
    fine = Int8Query(qw.astype(np.float32))
    assert fine.qscale == 1.0 and np.array_equal(fine.qw, qw)
    a, v = TopK(k), TopK(k)
    a.n = masked_dot_topk_q8(q8, scale, fine.qw, np.float32(fine.qscale), mask, 0, k, a.scores, a.ids, a.n, *_all(n))
    v.n = fine.scan(q8, scale, stats, mask, 0, k, v.scores, v.ids, v.n)
    fa, fv = a.result(), v.result()
    assert np.array_equal(fa[0], fv[0]) and np.array_equal(fa[1], fv[1])
    for t in np.unique(fa[1])[:5]:
        out = np.empty(n, dtype=np.int64)
        got = fine.above(q8, scale, stats, mask, 0, float(t), out, 0)
        want_out = np.empty(n, dtype=np.int64)
        want = masked_dot_above_q8(q8, scale, fine.qw, np.float32(fine.qscale), mask, 0, np.float32(t), want_out, 0, *_all(n))
        assert got == want and np.array_equal(out[:got], want_out[:want])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1), st.lists(st.integers(1, 700), min_size=1, max_size=3), st.sampled_from([128, 384]),
    st.floats(0.0, 1.0), st.integers(1, 19), st.booleans(), st.booleans(),
)
def test_tiled_batch_scan_keeps_the_heaps_of_the_row_kernel(seed, sizes, d, frac, n_q, scaled_scores, amx):
    """The tiled int8 kernel (512-bit VNNI, its sums made with AMX tiles or not, where the CPU has
    them) against the portable row kernel, query by query: several segments feeding the same heaps,
    a capacity per query (0 included), partial tiles, query counts that are not a multiple of the
    tile, ties (equal rows), bit for bit."""
    rng = np.random.default_rng(seed)
    n_docs = sum(sizes) + 3
    masks = (rng.random((n_q, n_docs)) < frac).astype(np.uint8)
    queries = [Int8Query(rng.standard_normal(d).astype(np.float32), precise=False) for _ in range(n_q)]
    ks = rng.integers(0, 90, n_q)
    width = max(1, int(ks.max()))
    tiled = [np.zeros((n_q, width), np.float32), np.zeros((n_q, width), np.int64), np.zeros(n_q, np.int64)]
    want = [TopK(max(int(kb), 1)) for kb in ks]
    base = 3
    for n in sizes:
        q8 = rng.integers(-127, 128, (n, d)).astype(np.int8)
        q8[rng.random(n) < 0.2] = q8[0]  # equal rows: equal scores, the later id first
        scale = (rng.random(n).astype(np.float32) if scaled_scores else np.full(n, 0.01, np.float32))
        stats = segment_stats(q8, scale)
        batch_scan(q8, scale, stats, queries, masks, base, ks, *tiled, amx=amx)
        for b, q in enumerate(queries):
            if ks[b]:
                h = want[b]
                h.n = masked_dot_topk_q8(q8, scale, q.qw, q.qscale, masks[b], base, int(ks[b]), h.scores, h.ids, h.n, *_all(n))
        base += n
    for b in range(n_q):
        got = TopK(width)
        got.scores[:], got.ids[:], got.n = tiled[0][b], tiled[1][b], int(tiled[2][b])
        w = want[b].result() if ks[b] else (np.zeros(0, np.int64), np.zeros(0, np.float32))
        g = got.result()
        assert np.array_equal(g[0], w[0]) and np.array_equal(g[1], w[1])


_TILED_HEAPS = """
import numpy as np
from mempp.kernels.int8dot import Int8Query, batch_scan, segment_stats
rng = np.random.default_rng(7)
q8 = rng.integers(-127, 128, (700, 384)).astype(np.int8)
scale = rng.random(700).astype(np.float32)
queries = [Int8Query(rng.standard_normal(384).astype(np.float32), precise=False) for _ in range(21)]
masks = (rng.random((21, 700)) < 0.6).astype(np.uint8)
hs, hi, hn = np.zeros((21, 30), np.float32), np.zeros((21, 30), np.int64), np.zeros(21, np.int64)
batch_scan(q8, scale, segment_stats(q8, scale), queries, masks, 0, 30, hs, hi, hn)
heaps = [sorted(zip(hs[b, : hn[b]].tolist(), hi[b, : hn[b]].tolist())) for b in range(21)]
"""


@pytest.mark.slow
def test_the_tiled_batch_scan_compiles_and_agrees_without_amx(tmp_path):
    """With AMX off (``MEMPP_AMX=0``, as on a CPU without it) and nothing compiled yet, the tiled
    kernel, which holds the AMX instructions as inline assembly, still compiles (it needs the
    assembler's parser: without it LLVM aborted the process) and gives this process's heaps."""
    import json
    import os
    import subprocess
    import sys

    child = _TILED_HEAPS + "import json\nfrom mempp.kernels.int8dot import HAS_AMX\nassert not HAS_AMX\nprint(json.dumps(heaps))\n"
    env = {**os.environ, "MEMPP_AMX": "0", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    here: dict = {}
    exec(_TILED_HEAPS, here)  # the same heaps in this process (AMX where it has it)
    assert json.loads(proc.stdout) == [[list(p) for p in h] for h in here["heaps"]]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 2500), st.sampled_from([128, 384]), st.floats(0.0, 1.0), st.integers(1, 9),
    st.integers(1, 5), st.integers(1, 40), st.booleans(),
)
def test_a_copy_stored_in_date_order_scans_like_one_in_row_order(seed, n, d, frac, n_days, n_q, k, bounded):
    """The int8 copy as the writer stores it (rows by date, ``storage.writer.q8_table``) and the
    span of rows dated inside the query's bounds (``SegmentEntry.q8_span``): every scan gives the
    heaps and threshold sets of the copy in row order, bit for bit (ids: the segment's rows).
    Dates with many ties and undated rows; masks that keep only rows inside the bounds."""
    from mempp.storage.segment import NAT
    from mempp.storage.snapshot import SegmentEntry
    from mempp.storage.commits import q8_table

    rng = np.random.default_rng(seed)
    emb = unit_rows(rng, n, d)
    emb[rng.random(n) < 0.1] = emb[0]  # equal rows: ties broken by id
    q8 = np.empty(emb.shape, dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    quantize_rows(emb, q8, scale)
    dates = rng.integers(0, n_days, n).astype(np.int64) * 86_400_000_000
    dates[rng.random(n) < 0.1] = NAT
    table = q8_table(q8, scale, dates)
    entry = SegmentEntry(
        None, None, q8=table.column("q").combine_chunks().values.to_numpy().reshape(n, d), q8_scale=table.column("scale").to_numpy(),
        q8_order=table.column("row").to_numpy(), q8_dates=table.column("date").to_numpy(),
    )
    assert np.array_equal(np.sort(entry.q8_order), np.arange(n)) and np.all(entry.q8_dates[1:] >= entry.q8_dates[:-1])
    assert np.array_equal(entry.q8[np.argsort(entry.q8_order)], q8) and np.array_equal(entry.q8_dates, dates[entry.q8_order])
    base = int(rng.integers(0, 4))
    lo = int(rng.integers(0, n_days)) * 86_400_000_000 if bounded and rng.random() < 0.5 else None
    hi = int(rng.integers(0, n_days)) * 86_400_000_000 + int(rng.integers(0, 2)) if bounded else None
    inside = np.ones(n, bool)
    if lo is not None:
        inside &= dates >= lo
    if hi is not None:
        inside &= dates <= hi
    span = entry.q8_span(lo, hi)
    assert span[1] - span[0] == int(inside.sum())
    masks = np.zeros((n_q, base + n), dtype=np.uint8)
    masks[:, base:] = (rng.random((n_q, n)) < frac) & inside
    s_stats, r_stats = segment_stats(entry.q8, entry.q8_scale), segment_stats(q8, scale)

    for b in range(n_q):
        query = rng.standard_normal(d).astype(np.float32)
        for precise in (True, False):
            prepared = Int8Query(query, precise)
            want, got, port = TopK(k), TopK(k), TopK(k)
            want.n = prepared.scan(q8, scale, r_stats, masks[b], base, k, want.scores, want.ids, want.n)
            got.n = prepared.scan(entry.q8, entry.q8_scale, s_stats, masks[b], base, k, got.scores, got.ids, got.n, entry.q8_order, span)
            port.n = masked_dot_topk_q8(
                entry.q8, entry.q8_scale, prepared.qw, prepared.qscale, masks[b], base, k, port.scores, port.ids, port.n, entry.q8_order, *span
            )
            w, g, p = want.result(), got.result(), port.result()
            assert np.array_equal(w[0], g[0]) and np.array_equal(w[1], g[1])
            assert np.array_equal(w[0], p[0]) and np.array_equal(w[1], p[1])
            if len(w[1]):
                t = float(w[1][-1])
                out_w, out_g = np.empty(n, np.int64), np.empty(n, np.int64)
                n_w = prepared.above(q8, scale, r_stats, masks[b], base, t, out_w, 0)
                n_g = prepared.above(entry.q8, entry.q8_scale, s_stats, masks[b], base, t, out_g, 0, entry.q8_order, span)
                assert n_w == n_g and np.array_equal(np.sort(out_g[:n_g]), out_w[:n_w])
    # Bulk scoring: the tiled kernel (where the CPU has it) and the row kernels. Each query its
    # own date bound (its stop: the rows after it are skipped, the queries taken in order of
    # stops), mask and capacity; in date order, a sample of blocks counts the same candidates.
    from mempp.kernels.int8dot import BATCH_ROWS

    n_b = n_q + 9
    his = np.where(rng.random(n_b) < 0.2, np.iinfo(np.int64).max, rng.integers(0, n_days, n_b) * 86_400_000_000)
    bmasks = np.zeros((n_b, base + n), dtype=np.uint8)
    bmasks[:, base:] = (rng.random((n_b, n)) < frac) & (dates[None, :] <= his[:, None])
    stops = entry.q8_stops(his)
    assert np.array_equal(stops, [int((dates <= h).sum()) for h in his])
    queries = [Int8Query(rng.standard_normal(d).astype(np.float32), precise=False) for _ in range(n_b)]
    ks = rng.integers(0, k + 1, n_b)
    for tiled, kk in ((True, ks), (False, k)):
        heaps = []
        for args, order in (((q8, scale, r_stats), None), ((entry.q8, entry.q8_scale, s_stats), entry.q8_order)):
            h = [np.zeros((n_b, k), np.float32), np.zeros((n_b, k), np.int64), np.zeros(n_b, np.int64)]
            batch_scan(*args, queries, bmasks, base, kk, *h, tiled=tiled, order=order, stops=None if order is None else stops)
            heaps.append(h)
        for bq in range(n_b):
            (wi, ws), (gi, gs) = (_heap(h, bq, k) for h in heaps)
            assert np.array_equal(wi, gi) and np.array_equal(ws, gs)
    if mempp.kernels.int8dot.tiled_scan_ok(entry.q8, base):
        stride = 2
        h = [np.zeros((n_b, k), np.float32), np.zeros((n_b, k), np.int64), np.zeros(n_b, np.int64)]
        seen = np.zeros(n_b, np.int64)
        batch_scan(entry.q8, entry.q8_scale, s_stats, queries, bmasks, base, k, *h, order=entry.q8_order, stops=stops, stride=stride, seen=seen)
        docs = base + entry.q8_order[np.concatenate([np.arange(r0, min(n, r0 + BATCH_ROWS)) for r0 in range(0, n, BATCH_ROWS * stride)])]
        assert np.array_equal(seen, (bmasks[:, docs] != 0).sum(axis=1))
        for bq, q in enumerate(queries):
            only = np.zeros_like(bmasks[bq])
            only[docs] = bmasks[bq, docs]
            want = TopK(k)
            want.n = masked_dot_topk_q8(entry.q8, entry.q8_scale, q.qw, q.qscale, only, base, k, want.scores, want.ids, want.n, entry.q8_order, 0, n)
            wi, ws = want.result()
            gi, gs = _heap(h, bq, k)
            assert np.array_equal(wi, gi) and np.array_equal(ws, gs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 3000), st.floats(0.05, 1.0), st.integers(1, 12), st.integers(1, 4))
def test_tiled_batch_scan_floors_and_samples(seed, n, frac, n_q, stride):
    """The tiled kernel's floors: a heap that fills holds what the scan without floors holds;
    one that does not fill holds exactly the rows at or above its floor. Its sample (every
    stride-th block): the heap of the row kernel over those rows, and their candidates counted."""
    from mempp.kernels.int8dot import BATCH_ROWS, tiled_scan_ok

    d = 128
    rng = np.random.default_rng(seed)
    q8 = rng.integers(-127, 128, (n, d)).astype(np.int8)
    if not tiled_scan_ok(q8, 0):
        pytest.skip("no 512-bit VNNI here")
    scale = rng.random(n).astype(np.float32)
    stats = segment_stats(q8, scale)
    masks = (rng.random((n_q, n)) < frac).astype(np.uint8)
    queries = [Int8Query(rng.standard_normal(d).astype(np.float32), precise=False) for _ in range(n_q)]
    k = int(rng.integers(1, 60))
    free = [np.zeros((n_q, k), np.float32), np.zeros((n_q, k), np.int64), np.zeros(n_q, np.int64)]
    batch_scan(q8, scale, stats, queries, masks, 0, k, *free)
    floors = rng.standard_normal(n_q).astype(np.float32) * 0.1 + np.array([float(np.median(free[0][b, : free[2][b]])) if free[2][b] else 0.0 for b in range(n_q)], np.float32)
    floors[rng.random(n_q) < 0.3] = -np.inf
    floored = [np.zeros((n_q, k), np.float32), np.zeros((n_q, k), np.int64), np.zeros(n_q, np.int64)]
    batch_scan(q8, scale, stats, queries, masks, 0, k, *floored, floors=floors)
    for b, q in enumerate(queries):
        got = TopK(k)
        got.scores[:], got.ids[:], got.n = floored[0][b], floored[1][b], int(floored[2][b])
        filled = got.n == k
        g = got.result()
        if filled or floors[b] == -np.inf:
            want = TopK(k)
            want.scores[:], want.ids[:], want.n = free[0][b], free[1][b], int(free[2][b])
            w = want.result()
        else:
            approx = scale * (np.float32(q.qscale) * (q8.astype(np.int32) @ q.qw.astype(np.int32)).astype(np.float32))
            above = np.flatnonzero((approx >= floors[b]) & (masks[b] != 0))
            assert len(g[0]) == len(above) < k
            w = (above[np.lexsort((-above, -approx[above]))], approx[above][np.lexsort((-above, -approx[above]))])
        assert np.array_equal(g[0], w[0]) and np.array_equal(g[1], w[1])
    # the sample
    sampled = np.zeros(n, bool)
    for r0 in range(0, n, BATCH_ROWS * stride):
        sampled[r0 : r0 + BATCH_ROWS] = True
    seen = np.zeros(n_q, np.int64)
    samp = [np.zeros((n_q, k), np.float32), np.zeros((n_q, k), np.int64), np.zeros(n_q, np.int64)]
    batch_scan(q8, scale, stats, queries, masks, 0, k, *samp, stride=stride, seen=seen)
    if stride > 1:
        assert np.array_equal(seen, (masks[:, sampled] != 0).sum(axis=1))
    for b, q in enumerate(queries):
        want = TopK(k)
        want.n = masked_dot_topk_q8(q8, scale, q.qw, q.qscale, masks[b] * sampled, 0, k, want.scores, want.ids, want.n, *_all(n))
        got = TopK(k)
        got.scores[:], got.ids[:], got.n = samp[0][b], samp[1][b], int(samp[2][b])
        w, g = want.result(), got.result()
        assert np.array_equal(g[0], w[0]) and np.array_equal(g[1], w[1])


def test_query_batch_with_scan_floors_equals_single_queries(tmp_path, monkeypatch):
    """The batch's sampled floors (on from a few blocks of rows here, as on large stores): the same
    answers as single queries, including queries whose heap did not fill and were scanned again."""
    monkeypatch.setattr(VB, "SEED_MIN_DOCS", 0)
    monkeypatch.setattr(VB, "SEED_STRIDE", 2)
    monkeypatch.setattr(VB, "SEED_MARGIN", 1.0)  # floors about as high as the heaps' roots: some heaps do not fill
    rng = np.random.default_rng(5)
    n, dim = 3000, 128
    emb = unit_rows(rng, n, dim)
    vocab = [f"word{i}" for i in range(40)]
    texts = [" ".join(rng.choice(vocab, size=rng.integers(2, 8))) for _ in range(n)]
    s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=dim), index=IndexConfig(vector_copy="int8"))
    docs = [{"text": t, "date": f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}", "key": f"k{i}"} for i, t in enumerate(texts)]
    for a in range(0, n, 1000):
        s.add(docs[a : a + 1000], embeddings=emb[a : a + 1000])
    questions = [" ".join(rng.choice(vocab, size=2)) for _ in range(40)]
    qv = unit_rows(rng, 40, dim)
    as_of = [f"2023-{1 + i % 12:02d}-10" for i in range(40)]
    opts = [s.searcher().options(as_of=a, k=10) for a in as_of]
    masks = np.stack([P.candidate_mask(s.searcher().snapshot, o) for o in opts])
    counts = np.count_nonzero(masks, axis=1)
    keeps = np.maximum(200, P.BATCH_KEEP_BASE + counts // P.BATCH_KEEP_PER_CANDIDATES)
    prepared = mempp.kernels.Int8Batch.quantize(qv)
    floors = VB.scan_floors(s.searcher().snapshot, prepared, masks, keeps, counts)
    if not all(mempp.kernels.int8dot.tiled_scan_ok(e.q8, e.base) for e in s.searcher().snapshot.segments):
        assert floors is None  # no floors without the tiled kernel
        pytest.skip("no 512-bit VNNI here")
    assert floors is not None and np.isfinite(floors).any()
    heaps = [np.empty((40, keeps.max()), np.float32), np.empty((40, keeps.max()), np.int64), np.zeros(40, np.int64)]
    for e in s.searcher().snapshot.segments:
        batch_scan(e.q8, e.q8_scale, e.q8_stats(), prepared, masks, e.base, keeps, *heaps, floors=floors, order=e.q8_order)
    rescanned = int(((heaps[2] < keeps) & np.isfinite(floors)).sum())
    assert 0 < rescanned < int(np.isfinite(floors).sum())
    table = s.query_batch(questions, qv, k=10, as_of=as_of, depth=20)
    rows = table.to_pylist()
    for qi in range(40):
        hits = s.query(questions[qi], embedding=qv[qi], k=10, as_of=as_of[qi], depth=20, vector_index="exact")
        assert [r["doc_id"] for r in rows if r["query"] == qi] == [h.doc_id for h in hits]
        assert [r["rank_vector"] for r in rows if r["query"] == qi] == [h.ranks["vector"] for h in hits]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 20), st.sampled_from([1, 16, 128, 384]), st.floats(1e-6, 1e3))
def test_int8_batch_quantizes_as_int8_queries_do(seed, n_q, d, magnitude):
    """Int8Batch.quantize (whole arrays) against Int8Query(v, precise=False) row by row: the same
    integers, scales and VNNI bytes (padded with zero queries), and the same error bounds."""
    from mempp.kernels import Int8Batch
    from mempp.kernels.int8dot import AMX_QUERIES

    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((n_q, d)) * magnitude).astype(np.float32)
    if n_q:
        q[0] = 0.0  # a zero query: scale 1
    batch = Int8Batch.quantize(q)
    assert batch.hi.shape == (-(-n_q // AMX_QUERIES) * AMX_QUERIES, d) and (batch.hi[n_q:] == 128).all()
    q8 = rng.integers(-127, 128, (50, d)).astype(np.int8)
    stats = segment_stats(q8, rng.random(50).astype(np.float32))
    bounds = batch.error_bounds(stats)
    for b in range(n_q):
        one = Int8Query(q[b], precise=False)
        assert np.array_equal(batch.qw[b], one.qw) and batch.qscale[b] == one.qscale and np.array_equal(batch.hi[b], one.hi)
        assert math.isclose(bounds[b], one.error_bound(stats), rel_tol=1e-12)


def _store(path, emb, texts, vector_copy):
    s = mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=emb.shape[1]), index=IndexConfig(vector_copy=vector_copy))
    docs = [{"text": t, "date": f"2023-01-{1 + i % 28:02d}", "key": f"k{i}"} for i, t in enumerate(texts)]
    for a in range(0, len(docs), 250):  # several segments
        s.add(docs[a : a + 250], embeddings=emb[a : a + 250])
    return s


@pytest.mark.parametrize("kind", ["isotropic", "clustered", "duplicates"])
def test_int8_vector_leg_equals_float32_scan(tmp_path, kind):
    rng = np.random.default_rng(1)
    n = 900
    if kind == "isotropic":
        emb = unit_rows(rng, n)
    elif kind == "clustered":  # tight clusters: small gaps between neighbours' scores
        centres = unit_rows(rng, 5)
        emb = centres[rng.integers(0, 5, n)] + 0.02 * rng.standard_normal((n, DIM)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    else:  # near-ties everywhere (gaps below the int8 error): no certificate, the leg must rescan
        emb = np.repeat(unit_rows(rng, 1), n, axis=0) + 1e-4 * rng.standard_normal((n, DIM)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    texts = [f"document {i} about topic {i % 7}" for i in range(n)]
    q8 = _store(tmp_path / "q8", emb, texts, "int8")
    f32 = _store(tmp_path / "f32", emb, texts, None)
    assert all(e.q8 is not None for e in q8.searcher().snapshot.segments) and all(e.q8 is None for e in f32.searcher().snapshot.segments)
    methods = set()
    for i in range(25):
        query = unit_rows(rng, 1)[0] if i % 2 else emb[rng.integers(n)]
        for as_of in (None, "2023-01-10"):
            opt = P.QueryOptions(as_of=None if as_of is None else mempp.dates.to_us(as_of + "T23:59:59"), depth=50)
            mask = P.candidate_mask(q8.searcher().snapshot, opt)
            info: dict = {}
            got = P.vector_leg(q8.searcher().snapshot, query, mask, opt, info)
            want = P.vector_leg(f32.searcher().snapshot, query, mask, opt)
            assert got.tolist() == want.tolist()
            methods.add(info["method"])
            # And the float32 scan is the brute-force ranking (score desc, then id desc).
            sc = emb @ query
            order = sorted(np.flatnonzero(mask), key=lambda g: (-sc[g], -g))
            assert np.allclose(sc[want], sc[order[: len(want)]], atol=1e-6)
    if kind == "duplicates":  # the heap's floor is within the error bound: a second pass collects the band
        assert any("then the rows within the error bound" in m for m in methods)
    else:
        assert "int8 scan, exact rescore" in methods


@pytest.mark.parametrize("seed", range(6))
def test_rescoring_best_approximate_first_stops_only_where_no_row_left_can_enter(tmp_path, seed):
    """The rescore of the int8 heap stops once the next row's approximate score plus the error
    bound is below the worst exact score kept. Against rescoring every row, with approximations
    as wrong as the bound allows and wrong the worst way (the best rows scored ``eps`` low, the
    rest ``eps`` high): the same exact top, for every depth. A bound taken too tight (``eps / 2``)
    fails here."""
    from mempp.kernels import TopK, heap_push_many
    from mempp.vector import rescore, rescore_best_first

    rng = np.random.default_rng(seed)
    n = 1200
    centre = unit_rows(rng, 1)
    emb = centre + 0.15 * rng.standard_normal((n, DIM)).astype(np.float32)  # scores packed near the top
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    snap = _store(tmp_path / "f32", emb, [f"d {i}" for i in range(n)], None).searcher().snapshot
    query = centre[0]
    rows = np.sort(rng.choice(n, 900, replace=False))
    exact_scores = rescore(snap, rows, query)
    eps = float(np.quantile(exact_scores, 0.999) - np.quantile(exact_scores, 0.95))  # many rows within it of the top
    rank = np.argsort(np.argsort(-exact_scores))
    approx_scores = np.where(rank < 40, exact_scores - 0.999 * eps, exact_scores + 0.999 * eps * rng.random(len(rows))).astype(np.float32)
    for depth in (1, 5, 10, 30):
        approx = TopK(len(rows), dtype=np.float32)
        approx.scores[:], approx.ids[:], approx.n = approx_scores, rows, len(rows)
        got = TopK(depth, dtype=np.float32)
        read = rescore_best_first(snap, query, approx, got, eps)
        want = TopK(depth, dtype=np.float32)
        want.n = heap_push_many(want.scores, want.ids, 0, depth, exact_scores, rows)
        assert got.result()[0].tolist() == want.result()[0].tolist(), depth
        assert np.all(np.diff(read) > 0) and set(read.tolist()) <= set(rows.tolist())


def test_int8_vector_leg_rescans_when_the_band_is_too_wide(tmp_path):
    """5,000 near-duplicates: more rows within the int8 error bound than the second pass
    holds (4,096), so the leg rescans in float32, and still equals the float32 store."""
    rng = np.random.default_rng(7)
    n = 5000
    emb = np.repeat(unit_rows(rng, 1), n, axis=0) + 1e-5 * rng.standard_normal((n, DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    texts = [f"doc {i}" for i in range(n)]
    q8 = _store(tmp_path / "q8", emb, texts, "int8")
    f32 = _store(tmp_path / "f32", emb, texts, None)
    opt = P.QueryOptions(depth=50)
    mask = P.candidate_mask(q8.searcher().snapshot, opt)
    info: dict = {}
    got = P.vector_leg(q8.searcher().snapshot, emb[3], mask, opt, info)
    assert "not certified: exact rescan" in info["method"]
    assert got.tolist() == P.vector_leg(f32.searcher().snapshot, emb[3], mask, opt).tolist()


def _bm25_store_oracle(texts, query_terms, valid):
    analyzer = mempp.storage.Analyzer()
    toks = [analyzer.terms(t) for t in texts]
    n = len(toks)
    avgdl = sum(map(len, toks)) / n
    out = {}
    for g, ts in enumerate(toks):
        if not valid[g]:
            continue
        tf = Counter(ts)
        s = 0.0
        for t in query_terms:
            if tf[t]:
                df = sum(1 for o in toks if t in o)
                s += math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(ts) / avgdl))
        if s > 0:
            out[g] = s
    return out


def test_lexical_leg_every_strategy_matches_oracle(tmp_path):
    rng = np.random.default_rng(3)
    vocab = [f"word{i}" for i in range(300)]
    p = 1.0 / np.arange(1, 301) ** 1.1
    texts = [" ".join(rng.choice(vocab, size=rng.integers(3, 30), p=p / p.sum())) for _ in range(700)]
    s = _store(tmp_path / "s", unit_rows(rng, 700), texts, "int8")
    snap = s.searcher().snapshot
    methods = []
    questions = ["word0 word1", "word5", "word250 word299", "word0 word290", "word1 word2 word3 word280", "word0 word1 word2 word3", "absent"]
    questions += [" ".join(rng.choice(vocab, size=rng.integers(1, 6), p=p / p.sum())) for _ in range(40)]
    for question in questions:
        terms = sorted(set(snap.analyzer.terms(question)))
        for as_of in (None, "2023-01-05"):
            for depth in (5, 20):
                opt = P.QueryOptions(as_of=None if as_of is None else mempp.dates.to_us(as_of + "T23:59:59"), depth=depth)
                mask = P.candidate_mask(snap, opt)
                cands = np.flatnonzero(mask)
                score_for = cands[:: max(1, len(cands) // 7)]  # the tag leg's documents need exact scores too
                info: dict = {}
                got, extra = P.lexical_leg(snap, question, mask, int(mask.sum()), opt, score_for, info)
                oracle = _bm25_store_oracle(texts, terms, mask.view(bool))
                want = sorted(oracle, key=lambda g: (-oracle[g], -g))[:depth]
                assert len(got) == len(want), (question, info)
                assert np.allclose([oracle[g] for g in got.tolist()], [oracle[g] for g in want], rtol=1e-5), (question, info)
                if len(terms) and any(t in snap.term_ids for t in terms):
                    assert np.allclose(extra, [oracle.get(g, 0.0) for g in score_for.tolist()], rtol=1e-5), (question, info)
                methods.append(info.get("method", "none"))
    assert all(m.startswith("maxscore") or m == "none" for m in methods), set(methods)
    # MaxScore skipped documents: some queries scored fewer documents than they enumerated
    counts = [[int(w) for w in m.replace("(", " ").replace(",", " ").split() if w.isdigit()] for m in methods if m != "none"]
    assert any(c[3] < c[2] for c in counts), methods
    # the leg leaves its accumulator clean for the next query
    full, _ = LX.scratch(1)
    assert not full.any()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=30), st.integers(0, 10**6))
def test_counting_sort_inversion_equals_unique_based_build(docs, offset):
    from mempp.storage.postings import Postings

    arrays = [np.asarray(d, dtype=np.int64) + offset for d in docs]
    want = Postings.build(arrays)
    flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    got = Postings.build_flat(flat, np.array([len(d) for d in docs], dtype=np.int64))
    for name in ("terms", "starts", "dfs", "docs", "tfs"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
        assert getattr(got, name).dtype == getattr(want, name).dtype, name


@pytest.mark.parametrize("vector_copy", ["int8", None])
@pytest.mark.parametrize("kind", ["isotropic", "near-duplicates", "threads"])
def test_query_batch_equals_single_queries(tmp_path, kind, vector_copy):
    """Through the int8 batch scan or the float32 matrix product, the batch answers as single queries do."""
    rng = np.random.default_rng(7)
    n = 800
    emb = unit_rows(rng, n)
    if kind == "near-duplicates":  # the matrix product's rounding decides: the batch must not certify, and still agree
        emb = np.repeat(unit_rows(rng, 1), n, axis=0) + 1e-5 * rng.standard_normal((n, DIM)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    vocab = [f"word{i}" for i in range(60)]
    texts = [" ".join(rng.choice(vocab, size=rng.integers(2, 12))) for _ in range(n)]
    s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=DIM), index=IndexConfig(vector_copy=vector_copy))
    docs = [
        {"text": t, "date": f"2023-0{1 + i % 9}-{1 + i % 28:02d}", "key": f"k{i}", "author": f"Person {i % 5}"}
        | ({"thread": f"t{i % 40}"} if kind == "threads" else {})
        for i, t in enumerate(texts)
    ]
    s.add(docs[:500], embeddings=emb[:500])
    s.add(docs[500:], embeddings=emb[500:])
    questions = [" ".join(rng.choice(vocab, size=3)) + (" Person 2" if i % 4 == 0 else "") for i in range(30)]
    qv = unit_rows(rng, 30) if kind != "near-duplicates" else emb[rng.integers(0, n, 30)]
    as_of = [None if i % 3 == 0 else f"2023-0{1 + i % 9}-15" for i in range(30)]
    table = s.query_batch(questions, qv, k=8, as_of=as_of, chunk=7)
    rows = table.to_pylist()
    for qi in range(30):
        hits = s.query(questions[qi], embedding=qv[qi], k=8, as_of=as_of[qi])
        got = [r for r in rows if r["query"] == qi]
        assert [r["doc_id"] for r in got] == [h.doc_id for h in hits]
        assert [r["key"] for r in got] == [h.key for h in hits]
        assert [r["reserved"] for r in got] == [h.reserved for h in hits]
        assert [r["score"] for r in got] == [h.score for h in hits]
        assert [[r[f"rank_{leg}"] for leg in mempp.types.LEGS] for r in got] == [[h.ranks[leg] for leg in mempp.types.LEGS] for h in hits]
    opts = [s.searcher().options(as_of=a, k=8) for a in as_of]
    legs = P.vector_legs(s.searcher().snapshot, qv, [P.candidate_mask(s.searcher().snapshot, o) for o in opts], opts)
    if kind == "near-duplicates":
        assert any(r is None for r in legs)  # answered alone
    elif kind == "threads":
        assert all(r is None for r in legs)  # thread context needs the dense pass
    else:
        assert all(r is not None for r in legs)


@pytest.mark.parametrize("kind", ["isotropic", "near-duplicates"])
def test_batch_certificate_kernel_equals_rescoring_every_kept_row(tmp_path, kind):
    """certified_tops (rescoring best approximate first, stopping early, all queries in one call)
    against certified_top (every kept row rescored), per query: the same exact top and the same
    verdict; with capacities small enough that some queries cannot be certified."""
    from mempp.kernels import Int8Batch
    from mempp.kernels.cosine import certified_tops

    rng = np.random.default_rng(11 if kind == "isotropic" else 12)
    n, dim = 900, 128
    emb = unit_rows(rng, n, dim)
    if kind == "near-duplicates":
        emb = np.repeat(unit_rows(rng, 1, dim), n, axis=0) + 1e-3 * rng.standard_normal((n, dim)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    texts = [f"w{i % 7}" for i in range(n)]
    s = _store(tmp_path / "s", emb, texts, "int8")
    snap = s.searcher().snapshot
    n_q = 24
    qv = unit_rows(rng, n_q, dim)
    masks = (rng.random((n_q, n)) < rng.random((n_q, 1))).astype(np.uint8)
    depths = rng.integers(1, 30, n_q)
    keeps = depths + rng.integers(0, 120, n_q)
    prepared = Int8Batch.quantize(qv)
    width = int(keeps.max())
    hs, hi, hn = np.empty((n_q, width), np.float32), np.empty((n_q, width), np.int64), np.zeros(n_q, np.int64)
    eps = np.zeros(n_q)
    for e in snap.segments:
        batch_scan(e.q8, e.q8_scale, e.q8_stats(), prepared, masks, e.base, keeps, hs, hi, hn, order=e.q8_order)
        eps = np.maximum(eps, prepared.error_bounds(e.q8_stats()))
    table, keep = version_embedding_table(snap)
    out_ids = np.empty((n_q, int(depths.max())), np.int64)
    out_n = np.zeros(n_q, np.int64)
    certified = np.zeros(n_q, np.bool_)
    certified_tops(table, dim, qv, hs, hi, hn, keeps, depths, eps, out_ids, out_n, certified)
    verdicts = set()
    for b in range(n_q):
        want = VB.certified_top(snap, qv[b], hs[b], hi[b], int(hn[b]), int(keeps[b]), int(depths[b]), float(eps[b]))
        assert certified[b] == (want is not None)
        verdicts.add(bool(certified[b]))
        if want is not None:
            assert np.array_equal(out_ids[b, : out_n[b]], want)
            # and the exact scan agrees
            heap = TopK(int(depths[b]))
            for e in snap.segments:
                heap.n = masked_dot_topk(e.segment.embeddings, qv[b], masks[b], e.base, int(depths[b]), heap.scores, heap.ids, heap.n)
            assert np.array_equal(heap.result()[0], want)
    if kind == "near-duplicates":
        assert False in verdicts
    else:
        assert True in verdicts


_US = st.one_of(
    st.integers(-(2**62), 2**62),
    st.integers(-3, 3).map(lambda d: d * 86_400 * 10**6),  # midnight boundaries
    st.integers(0, 3 * 86_400 * 10**6),
)


_DOCS = st.lists(st.tuples(_US | st.just(int(mempp.storage.NAT)), _US | st.just(int(mempp.storage.FOREVER))), max_size=150)


@settings(max_examples=300, deadline=None)
@given(_DOCS, st.lists(_US, min_size=1, max_size=6), st.integers(1, 40))
def test_valid_mask_kernel_matches_the_rule(docs, ts, every):
    """Checkpoint bitsets plus events give exactly the rule, whichever checkpoint a date falls after."""
    from mempp.kernels.masks import ValidIndex

    NAT, FOREVER = int(mempp.storage.NAT), int(mempp.storage.FOREVER)
    dates = np.array([d for d, _ in docs], dtype=np.int64)
    until = np.array([u for _, u in docs], dtype=np.int64)
    vi = ValidIndex(dates, until, NAT, FOREVER, every=every)
    assert list(vi.cp_days) == sorted(set(vi.cp_days))
    for t in ts + [int(d) for d in vi.cp_days[:3] * 86_400 * 10**6]:  # also exactly on checkpoints
        want = [d != NAT and d <= t and (u == FOREVER or u > t) for d, u in docs]
        assert vi.mask(t).astype(bool).tolist() == want
        rows = np.full((3, len(docs)), 7, dtype=np.uint8)  # bulk scoring writes one row per query
        vi.mask(t, rows[1])
        assert rows[1].astype(bool).tolist() == want and (rows[[0, 2]] == 7).all()
        plain = np.empty(len(docs), dtype=np.uint8)  # the pass over the dates, before the index is built
        valid_by_rule(dates, until, np.int64(NAT), np.int64(t), plain)
        assert plain.astype(bool).tolist() == want


@settings(max_examples=200, deadline=None)
@given(_DOCS, _US, _US, _US, st.booleans())
def test_date_range_kernel_matches_the_rule(docs, t, lo, hi, now):
    from mempp.kernels.masks import ValidIndex

    NAT, FOREVER = int(mempp.storage.NAT), int(mempp.storage.FOREVER)
    dates = np.array([d for d, _ in docs], dtype=np.int64)
    until = np.array([u for _, u in docs], dtype=np.int64)
    vi = ValidIndex(dates, until, NAT, FOREVER, every=3)
    base = (until == FOREVER).view(np.uint8) if now else vi.mask(t)
    got = vi.keep_dates(base, lo, hi).astype(bool).tolist()
    assert got == [bool(b) and d != NAT and lo <= d <= hi for b, d in zip(base.tolist(), dates.tolist())]
    plain = np.empty(len(docs), dtype=np.uint8)
    keep_dates_by_rule(base, dates, np.int64(NAT), np.int64(lo), np.int64(hi), plain)
    assert plain.astype(bool).tolist() == got


def test_large_snapshots_answer_dated_queries_while_the_valid_index_builds(tmp_path, monkeypatch):
    """From BACKGROUND_INDEX_DOCS documents, the first dated query starts the ValidIndex's build in
    a thread and takes its mask from the plain rule meanwhile: the same masks and the same
    answers before and after the index exists."""
    rng = np.random.default_rng(5)
    n = 600
    emb = unit_rows(rng, n, DIM)
    s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=DIM))
    days = rng.integers(0, 400, n)
    docs = [
        {"id": f"k{i % 450}", "text": f"w{i % 13} w{i % 7} report", "author": f"a{i % 5}", "date": str(np.datetime64("2022-01-01") + int(d))}
        for i, d in enumerate(days)
    ]
    s.add(docs, embeddings=emb)  # repeated keys: supersessions, so retirement matters
    monkeypatch.setattr(C, "BACKGROUND_INDEX_DOCS", 1)
    snap = s.searcher().snapshot
    assert (snap.valid_until != mempp.storage.FOREVER).sum() > 50 and version_caches(snap).valid_index is None
    opts = [
        P.QueryOptions(k=10, as_of=int((np.datetime64("2022-01-01") + int(t)).astype("datetime64[us]").astype(np.int64)) + h)
        for t, h in zip(rng.integers(-5, 420, 12), rng.integers(0, 86_400 * 10**6, 12))
    ]
    opts += [dataclasses.replace(opts[0], date_from=opts[1].as_of - 90 * 86_400 * 10**6, date_to=opts[1].as_of)]
    before = [P.candidate_mask(snap, o).copy() for o in opts]
    builder = version_caches(snap).valid_index_build
    builder.join(timeout=60)
    assert not builder.is_alive() and version_caches(snap).valid_index is not None
    after = [P.candidate_mask(snap, o) for o in opts]
    for o, a, b in zip(opts, before, after):
        d, u = snap.dates, snap.valid_until
        want = (d != mempp.storage.NAT) & (d <= o.as_of) & (u > o.as_of)
        if o.date_from is not None:
            want &= (d >= o.date_from) & (d <= o.date_to)
        assert np.array_equal(a.astype(bool), want) and np.array_equal(b.astype(bool), want)
    s.close()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from("abcdefghijklmnopqrstuvwxyz")), max_size=300),
    st.lists(st.sampled_from("abcdefghijklmnopqrstuvwxyz?"), max_size=6),
    st.data(),
)
def test_facet_filter_rare_and_common_paths_match_isin(values, wanted, data):
    """A facet filter keeps exactly the masked documents whose value is wanted, by ids or by codes."""
    import pyarrow as pa

    from mempp.candidates import keep_facet
    from mempp.tags import tag_leg
    from mempp.storage.snapshot import Facet

    half = len(values) // 2
    facet = Facet.build([pa.chunked_array([values[:half]], pa.string()), pa.chunked_array([values[half:]], pa.string())])
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values))), dtype=np.uint8)
    want = [bool(m) and v is not None and v in wanted for m, v in zip(mask.tolist(), values)]
    assert keep_facet(mask, facet, wanted).astype(bool).tolist() == want
    # the tag leg takes the same two paths, by author code
    codes = [facet.index[v] for v in wanted if v in facet.index]
    assert tag_leg(types.SimpleNamespace(authors=facet), codes, mask).tolist() == [i for i, w in enumerate(want) if w]


def test_a_store_whose_int8_copy_is_in_row_order_answers_the_same(tmp_path, monkeypatch):
    """Stores written before the copy was kept in date order have no order column: they are
    scanned whole, in row order, and answer exactly as a store with the date-ordered copy
    (single queries at dates and now, a date range, bulk scoring)."""
    import pyarrow as pa

    import mempp.storage.commits as W

    rng = np.random.default_rng(4)
    n = 1100
    emb = unit_rows(rng, n, 128)
    texts = [f"w{i % 11} w{i % 17} note" for i in range(n)]
    dated = _store(tmp_path / "dated", emb, texts, "int8")

    def row_order(q8, scale, dates):  # the layout of older stores
        return pa.table({"q": pa.FixedSizeListArray.from_arrays(pa.array(q8.reshape(-1), pa.int8()), q8.shape[1]), "scale": pa.array(scale, pa.float32())})

    monkeypatch.setattr(W, "q8_table", row_order)
    old = _store(tmp_path / "old", emb, texts, "int8")
    assert all(e.q8_order is None for e in old.searcher().snapshot.segments)
    assert all(e.q8_order is not None and not np.array_equal(e.q8_order, np.arange(len(e.q8))) for e in dated.searcher().snapshot.segments)
    qv = unit_rows(rng, 12, 128)
    days = [f"2023-01-{1 + int(d):02d}" for d in rng.integers(0, 28, 12)]
    for i in range(12):
        kw = dict(embedding=qv[i], k=10, vector_index="exact")
        for extra in ({"as_of": days[i]}, {}, {"as_of": days[i], "date_from": "2023-01-05"}):
            a = [(h.doc_id, h.score) for h in old.query(texts[i], **kw, **extra)]
            b = [(h.doc_id, h.score) for h in dated.query(texts[i], **kw, **extra)]
            assert a == b
    ta = old.query_batch(texts[:12], qv, k=10, as_of=days)
    tb = dated.query_batch(texts[:12], qv, k=10, as_of=days)
    assert ta.column("doc_id").to_pylist() == tb.column("doc_id").to_pylist()
    old.close()
    dated.close()
