"""The numba kernels against slow, obviously correct numpy/Python oracles.

Ranking convention (mempp.kernels): higher score first; equal scores -> higher id first.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mempp.kernels import (
    TopK,
    bm25_accumulate,
    bm25_idf,
    clear_touched,
    heap_push,
    heap_push_many,
    heap_sorted,
    masked_dot_topk,
    topk_touched,
)

from strategies import bool_masks

K1 = 1.2
B = 0.75
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_order(pairs):
    """(score, id) pairs best first: higher score, then higher id."""
    return sorted(pairs, key=lambda p: (-p[0], -p[1]))


# --- top-k heap ----------------------------------------------------------------------------------
@st.composite
def scored_items(draw, integer_scores: bool | None = None):
    n = draw(st.integers(0, 40))
    ids = draw(st.permutations(list(range(n + draw(st.integers(0, 10))))))[:n]
    if integer_scores is None:
        integer_scores = draw(st.booleans())
    if integer_scores:  # few distinct values: many ties
        scores = draw(st.lists(st.integers(-3, 3).map(float), min_size=n, max_size=n))
    else:
        scores = draw(
            st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=n, max_size=n)
        )
    k = draw(st.one_of(st.just(1), st.integers(1, n + 5), st.just(n + 3)))
    return list(zip(scores, ids)), k


@SETTINGS
@given(scored_items(), st.sampled_from([np.float32, np.float64]), st.integers(0, 10))
def test_heap_push_many_equals_one_by_one(items, dtype, split):
    pairs, k = items
    scores = np.array([s for s, _ in pairs], dtype=dtype)
    ids = np.array([i for _, i in pairs], dtype=np.int64)
    a = (np.empty(k, dtype=dtype), np.empty(k, dtype=np.int64))
    b = (np.empty(k, dtype=dtype), np.empty(k, dtype=np.int64))
    na = 0
    for s, i in zip(scores, ids):
        na = heap_push(a[0], a[1], na, k, s, i)
    nb = heap_push_many(b[0], b[1], 0, k, scores[:split], ids[:split])  # a heap kept across calls
    nb = heap_push_many(b[0], b[1], nb, k, scores[split:], ids[split:])
    assert na == nb
    assert np.array_equal(a[0][:na], b[0][:nb]) and np.array_equal(a[1][:na], b[1][:nb])


@SETTINGS
@given(scored_items(), st.sampled_from([np.float32, np.float64]))
def test_heap_push_sorted_matches_sort(items, dtype):
    pairs, k = items
    hs = np.empty(k, dtype=dtype)
    hi = np.empty(k, dtype=np.int64)
    n = 0
    for pushed, (s, i) in enumerate(pairs, start=1):
        n = heap_push(hs, hi, n, k, dtype(s), i)
        assert n == min(k, pushed)
    out_s = np.empty(n, dtype=dtype)
    out_i = np.empty(n, dtype=np.int64)
    m = heap_sorted(hs, hi, n, out_s, out_i)
    want = reference_order(pairs)[:k]
    assert m == len(want)
    assert out_i.tolist() == [i for _, i in want]
    assert out_s.tolist() == [float(dtype(s)) for s, _ in want]


@SETTINGS
@given(scored_items(), scored_items())
def test_topk_class_matches_sort_and_is_reusable(first, second):
    pairs, k = first
    heap = TopK(k)
    for s, i in pairs:
        heap.n = heap_push(heap.scores, heap.ids, heap.n, heap.k, np.float32(s), i)
    ids, scores = heap.result()
    want = reference_order(pairs)[:k]
    assert ids.dtype == np.int64
    assert ids.tolist() == [i for _, i in want]
    assert scores.tolist() == [float(np.float32(s)) for s, _ in want]
    assert heap.n == 0
    # The same holder works again after result() (capacity k, fresh content).
    pairs2, _ = second
    for s, i in pairs2:
        heap.n = heap_push(heap.scores, heap.ids, heap.n, heap.k, np.float32(s), i)
    ids2, _ = heap.result()
    assert ids2.tolist() == [i for _, i in reference_order(pairs2)[:k]]


def test_heap_ties_prefer_higher_id():
    heap = TopK(3)
    for i in [5, 1, 9, 3, 7]:
        heap.n = heap_push(heap.scores, heap.ids, heap.n, heap.k, np.float32(1.0), i)
    ids, scores = heap.result()
    assert ids.tolist() == [9, 7, 5]
    assert scores.tolist() == [1.0, 1.0, 1.0]


def test_heap_k1_keeps_best():
    heap = TopK(1)
    for s, i in [(0.5, 0), (2.0, 1), (2.0, 4), (1.0, 7), (-1.0, 8)]:
        heap.n = heap_push(heap.scores, heap.ids, heap.n, heap.k, np.float32(s), i)
    ids, scores = heap.result()
    assert ids.tolist() == [4] and scores.tolist() == [2.0]


def test_heap_k0_keeps_nothing():
    heap = TopK(0)
    for s, i in [(0.5, 0), (2.0, 1)]:
        heap.n = heap_push(heap.scores, heap.ids, heap.n, heap.k, np.float32(s), i)
    ids, scores = heap.result()
    assert ids.tolist() == [] and scores.tolist() == []


def test_heap_empty_result():
    ids, scores = TopK(5).result()
    assert len(ids) == 0 and len(scores) == 0


# --- masked dot-product top-k --------------------------------------------------------------------
@st.composite
def embedding_segments(draw, integer: bool):
    dim = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    n = sum(sizes)
    if integer:
        elems = st.integers(-2, 2).map(float)
    else:
        elems = st.floats(-1, 1, allow_nan=False, width=32)
    segs = [
        np.array(draw(st.lists(st.lists(elems, min_size=dim, max_size=dim), min_size=s, max_size=s)), dtype=np.float32).reshape(s, dim)
        for s in sizes
    ]
    query = np.array(draw(st.lists(elems, min_size=dim, max_size=dim)), dtype=np.float32)
    mask = np.array(draw(bool_masks(n)), dtype=bool)
    k = draw(st.one_of(st.just(1), st.integers(1, n + 4), st.just(n + 2)))
    mask_dtype = draw(st.sampled_from([np.uint8, np.bool_]))
    return segs, query, mask.astype(mask_dtype), k


def run_masked_dot(segs, query, mask, k):
    heap = TopK(k, dtype=np.float32)
    base = 0
    for emb in segs:
        heap.n = masked_dot_topk(np.ascontiguousarray(emb), query, mask, base, k, heap.scores, heap.ids, heap.n)
        base += emb.shape[0]
    return heap.result()


def dot_oracle(segs, query, mask):
    """(score, global id) of every masked row, in float64."""
    out = []
    g = 0
    for emb in segs:
        for row in emb:
            if mask[g]:
                out.append((float(sum(float(a) * float(b) for a, b in zip(row, query))), g))
            g += 1
    return out


@SETTINGS
@given(embedding_segments(integer=True))
def test_masked_dot_topk_integer_scores_exact(case):
    # Small integer entries: every dot product is exact, so ties are exact and the result
    # must equal the sorted oracle exactly (ties -> higher global id first).
    segs, query, mask, k = case
    ids, scores = run_masked_dot(segs, query, mask, k)
    want = reference_order(dot_oracle(segs, query, mask))[:k]
    assert ids.tolist() == [i for _, i in want]
    assert scores.tolist() == [s for s, _ in want]


@SETTINGS
@given(embedding_segments(integer=False))
def test_masked_dot_topk_float_scores(case):
    segs, query, mask, k = case
    ids, scores = run_masked_dot(segs, query, mask, k)
    oracle = dot_oracle(segs, query, mask)
    want = reference_order(oracle)[:k]
    assert len(ids) == len(want)
    assert len(set(ids.tolist())) == len(ids)
    exact = {i: s for s, i in oracle}
    assert set(ids.tolist()) <= set(exact)
    for i, s in zip(ids.tolist(), scores.tolist()):
        assert s == pytest.approx(exact[i], abs=1e-5)
    # Ordered by the kernel's own scores (ties -> higher id).
    assert list(zip(scores.tolist(), ids.tolist())) == reference_order(list(zip(scores.tolist(), ids.tolist())))
    # Nothing left out scores clearly better than the worst kept document.
    if want:
        worst = min(exact[i] for i in ids.tolist())
        assert all(s <= worst + 1e-5 for s, i in oracle if i not in set(ids.tolist()))


def test_masked_dot_topk_shares_heap_across_segments():
    seg_a = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
    seg_b = np.array([[2, 0], [0, 0], [1, 1]], dtype=np.float32)
    q = np.array([1, 1], dtype=np.float32)
    mask = np.array([1, 1, 1, 0, 1, 1], dtype=np.uint8)
    ids, scores = run_masked_dot([seg_a, seg_b], q, mask, 3)
    # scores: 0:1, 1:1, 2:2, 3:masked(2), 4:0, 5:2  -> 5 (2, later id), 2 (2), 1 (1)
    assert ids.tolist() == [5, 2, 1]
    assert scores.tolist() == [2.0, 2.0, 1.0]
    ids, _ = run_masked_dot([seg_a, seg_b], q, np.zeros(6, dtype=np.uint8), 3)
    assert ids.tolist() == []


# --- BM25 ----------------------------------------------------------------------------------------
def test_bm25_idf_is_lucene():
    df = np.array([0, 1, 2, 5, 10])
    got = bm25_idf(10, df)
    want = [math.log(1 + (10 - d + 0.5) / (d + 0.5)) for d in df.tolist()]
    assert got.dtype == np.float64
    assert got.tolist() == pytest.approx(want, rel=1e-12)


@st.composite
def bm25_cases(draw):
    n_terms = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(0, 7), min_size=1, max_size=4))
    # Each document: its tokens (term ids, with repeats), possibly empty.
    docs = [
        [draw(st.lists(st.integers(0, n_terms - 1), min_size=0, max_size=8)) for _ in range(s)]
        for s in sizes
    ]
    n = sum(sizes)
    query = draw(st.lists(st.integers(0, n_terms), min_size=0, max_size=n_terms + 1, unique=True))  # n_terms: absent term
    mask = draw(bool_masks(n))
    k = draw(st.one_of(st.just(1), st.integers(1, n + 4), st.just(n + 2)))
    return docs, query, mask, k


def build_postings(seg_docs, n_terms):
    """One segment's CSR postings (sorted by term, then row), as the storage layer lays them out."""
    docs, tfs, starts = [], [], []
    for t in range(n_terms + 1):
        starts.append(len(docs))
        for row, toks in enumerate(seg_docs):
            c = toks.count(t)
            if c:
                docs.append(row)
                tfs.append(c)
    starts.append(len(docs))
    return np.array(docs, dtype=np.int32), np.array(tfs, dtype=np.uint32), starts


def bm25_oracle(docs, query, mask):
    """Score of every masked document that holds a query term (float64), from the formula."""
    flat = [toks for seg in docs for toks in seg]
    n = len(flat)
    avgdl = sum(len(t) for t in flat) / n
    out = {}
    for g, toks in enumerate(flat):
        if not mask[g]:
            continue
        tf = Counter(toks)
        s = 0.0
        hit = False
        for t in query:
            if tf[t] == 0:
                continue
            hit = True
            df = sum(1 for other in flat if t in other)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(toks) / avgdl))
        if hit:
            out[g] = s
    return out


def run_bm25(docs, query, mask, k, scores, touched):
    flat = [toks for seg in docs for toks in seg]
    n = len(flat)
    n_terms = max([max(t) for t in flat if t] + query + [0]) + 1
    avgdl = sum(len(t) for t in flat) / n
    df = np.array([sum(1 for toks in flat if t in toks) for t in query], dtype=np.int64)
    weights = bm25_idf(n, df)
    q = np.array(query, dtype=np.int64)
    n_touched = 0
    base = 0
    for seg in docs:
        p_docs, p_tfs, term_starts = build_postings(seg, n_terms)
        starts = np.array([term_starts[t] for t in q], dtype=np.int64)
        ends = np.array([term_starts[t + 1] for t in q], dtype=np.int64)
        lengths = np.array([len(t) for t in seg], dtype=np.float32)
        n_touched = bm25_accumulate(
            p_docs, p_tfs, starts, ends, weights, lengths, avgdl, K1, B, mask, base, scores, touched, n_touched
        )
        base += len(seg)
    acc = scores.copy()
    out_ids = np.empty(k, dtype=np.int64)
    out_scores = np.empty(k, dtype=np.float32)
    m = topk_touched(scores, touched, n_touched, k, out_ids, out_scores)
    got_touched = touched[:n_touched].tolist()
    clear_touched(scores, touched, n_touched)
    return out_ids[:m], out_scores[:m], got_touched, acc


@SETTINGS
@given(bm25_cases(), st.sampled_from([np.uint8, np.bool_]))
def test_bm25_matches_formula(case, mask_dtype):
    docs, query, mask_list, k = case
    n = sum(len(s) for s in docs)
    assume(n > 0)
    mask = np.array(mask_list, dtype=mask_dtype)
    scores = np.zeros(n, dtype=np.float32)
    touched = np.empty(n, dtype=np.int64)
    ids, top, got_touched, acc = run_bm25(docs, query, mask, k, scores, touched)
    oracle = bm25_oracle(docs, query, mask_list)

    # Every matching candidate touched exactly once; nothing else.
    assert sorted(got_touched) == sorted(oracle)
    assert len(set(got_touched)) == len(got_touched)
    # Accumulated scores follow the formula; non-candidates stay zero.
    for g in range(n):
        assert acc[g] == pytest.approx(oracle.get(g, 0.0), rel=1e-5, abs=1e-6)
    # Top-k is the best k of the accumulator, higher score first, ties -> higher id.
    want = reference_order([(float(acc[g]), g) for g in oracle])[:k]
    assert ids.tolist() == [g for _, g in want]
    assert top.tolist() == [s for s, _ in want]
    assert len(ids) == min(k, len(oracle))
    # And against the float64 oracle, nothing left out is clearly better than what was kept.
    if len(ids):
        worst = min(oracle[g] for g in ids.tolist())
        kept = set(ids.tolist())
        assert all(s <= worst * (1 + 1e-5) + 1e-6 for g, s in oracle.items() if g not in kept)
    # The accumulator is all zero again after clear_touched.
    assert not scores.any()

    # Reusing the cleared buffers gives the same answer.
    ids2, top2, _, acc2 = run_bm25(docs, query, mask, k, scores, touched)
    assert ids2.tolist() == ids.tolist() and top2.tolist() == top.tolist()
    assert np.array_equal(acc2, acc)
    assert not scores.any()


def test_bm25_ties_and_segments():
    # Two segments; docs 1 and 3 are identical (same tf, same length): an exact tie -> 3 first.
    docs = [[[0, 1], [0, 2]], [[1, 1, 1], [0, 2], [2]]]
    n = 5
    mask = np.ones(n, dtype=np.uint8)
    scores = np.zeros(n, dtype=np.float32)
    touched = np.empty(n, dtype=np.int64)
    ids, top, got_touched, acc = run_bm25(docs, [0], mask, 10, scores, touched)
    assert sorted(got_touched) == [0, 1, 3]
    assert acc[1] == acc[3]
    # doc 0 has length 2 like docs 1 and 3 with tf 1: all three tie.
    assert ids.tolist() == [3, 1, 0]
    oracle = bm25_oracle(docs, [0], [True] * n)
    assert top.tolist() == pytest.approx([oracle[3], oracle[1], oracle[0]], rel=1e-6)
    assert not scores.any()

    # Masking doc 3 out removes it and leaves the others' scores unchanged (N, df, avgdl are global).
    mask[3] = 0
    ids_m, top_m, _, _ = run_bm25(docs, [0], mask, 10, scores, touched)
    assert ids_m.tolist() == [1, 0]
    assert top_m.tolist() == top.tolist()[1:]


def test_bm25_empty_query_and_all_false_mask():
    docs = [[[0, 1], [1]]]
    scores = np.zeros(2, dtype=np.float32)
    touched = np.empty(2, dtype=np.int64)
    ids, _, t, _ = run_bm25(docs, [], np.ones(2, dtype=np.uint8), 3, scores, touched)
    assert ids.tolist() == [] and t == []
    ids, _, t, _ = run_bm25(docs, [0, 1], np.zeros(2, dtype=np.uint8), 3, scores, touched)
    assert ids.tolist() == [] and t == []
    assert not scores.any()


@SETTINGS
@given(
    st.lists(st.lists(st.integers(0, 3), max_size=8), min_size=1, max_size=40),
    st.integers(0, 3),
    st.data(),
)
def test_bm25_probe_adds_the_term_to_the_given_documents_only(seg, term, data):
    """``bm25_probe`` against the formula, document by document: each given document that holds
    the term gains ``w tf (k1 + 1) / (tf + norm)``; the others, and documents not given, stay."""
    from mempp.kernels import bm25_probe

    base = data.draw(st.integers(0, 5))
    rows = sorted(data.draw(st.sets(st.integers(0, len(seg) - 1))))
    p_docs, p_tfs, starts = build_postings(seg, 4)
    norms = np.array(data.draw(st.lists(st.floats(0.1, 3.0), min_size=len(seg), max_size=len(seg))), dtype=np.float64)
    scores = np.zeros(base + len(seg), dtype=np.float32)
    docs = np.array([base + r for r in rows], dtype=np.int64)
    bm25_probe(p_docs, p_tfs, starts[term], starts[term + 1], 0.7, norms, K1, base, docs, scores)
    want = np.zeros_like(scores)
    for r in rows:
        tf = seg[r].count(term)
        if tf:
            want[base + r] = np.float32(0.7 * tf * (K1 + 1.0) / (tf + norms[r]))
    np.testing.assert_allclose(scores, want, rtol=1e-6)
