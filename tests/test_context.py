"""Thread context: kernels against numpy oracles, and the lexical/vector legs against a dense re-computation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import mempp
from mempp.kernels import candidate_moments, context_topk, masked_dot_dense, sparse_moments, with_neighbours


def links(threads: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Oracle: neighbours in the same thread in index order (thread -1: none)."""
    n = len(threads)
    prev = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    last: dict[int, int] = {}
    for i, t in enumerate(threads):
        if t < 0:
            continue
        if t in last:
            prev[i] = last[t]
            nxt[last[t]] = i
        last[t] = i
    return prev, nxt


def oracle_context(scores, mask, threads, betas, scale=None, use_max=False):
    """Plain-Python thread context of every candidate: own z-score, neighbours summed (or max), scaled."""
    prev, nxt = links(threads)
    cand = mask.astype(bool)
    mu = scores[cand].mean() if cand.any() else 0.0
    sd = scores[cand].std() if cand.any() else 1.0
    sd = sd if sd > 1e-9 else 1.0
    z = (scores - mu) / sd
    out = {}
    for d in np.flatnonzero(cand):
        lifts = []
        p = q = d
        for b in betas:
            p = prev[p] if p >= 0 else -1
            q = nxt[q] if q >= 0 else -1
            lifts += [b * z[x] for x in (p, q) if x >= 0 and cand[x]]
        share = 1.0 if scale is None else float(scale[d])
        if use_max:
            out[int(d)] = max([z[d]] + [share * v for v in lifts]) if share > 0 else z[d]
        else:
            out[int(d)] = z[d] + share * sum(lifts)
    return out


case = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5).map(float), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.integers(-1, 3), min_size=n, max_size=n),
        st.lists(st.floats(0, 1), min_size=1, max_size=3),
        st.integers(1, n + 2),
    )
)


def run_kernel(c, scale=None, use_max=False):
    """Run ``context_topk`` on a hypothesis case; returns (got, best ids, best scores, every score, ids, oracle)."""
    scores, mask, threads, betas, k = c
    scores = np.array(scores, dtype=np.float32)
    mask = np.array(mask, dtype=np.uint8)
    scale = np.zeros(0, np.float32) if scale is None else np.array(scale[: len(scores)], dtype=np.float32)
    prev, nxt = links(threads)
    mu, sd = candidate_moments(scores, mask)
    ids = np.flatnonzero(mask).astype(np.int64)
    out_ids = np.empty(k, dtype=np.int64)
    out_s = np.empty(k)
    every = np.empty(len(ids))
    got = context_topk(scores, mu, sd, ids, len(ids), prev, nxt, np.array(betas), scale, mask, k, out_ids, out_s, every, use_max)
    want = oracle_context(
        scores.astype(np.float64), mask, threads, betas, scale=scale if len(scale) else None, use_max=use_max
    )
    return got, out_ids, out_s, every, ids, want


@settings(max_examples=60, deadline=None)
@given(case)
def test_context_topk_matches_oracle(c):
    k = c[4]
    got, out_ids, out_s, every, ids, want = run_kernel(c)
    np.testing.assert_allclose(every, [want[int(d)] for d in ids], atol=1e-9)
    expect = sorted(want, key=lambda d: (-round(want[d], 9), -d))[:k]
    assert got == len(expect)
    np.testing.assert_allclose(out_s[:got], [want[d] for d in expect], atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(case)
def test_sparse_moments_equal_dense_moments(c):
    scores, mask, _, _, _ = c
    scores = np.array(scores, dtype=np.float32)
    mask = np.array(mask, dtype=np.uint8)
    sparse = np.where(mask.astype(bool), scores, 0).astype(np.float32)
    touched = np.flatnonzero(sparse).astype(np.int64)
    np.testing.assert_allclose(
        sparse_moments(sparse, touched, len(touched), int(mask.sum())), candidate_moments(sparse, mask), atol=1e-9
    )


@settings(max_examples=60, deadline=None)
@given(case, st.integers(0, 3))
def test_with_neighbours_is_the_union_of_thread_windows(c, hops):
    _, mask, threads, _, _ = c
    mask = np.array(mask, dtype=np.uint8)
    prev, nxt = links(threads)
    seeds = np.flatnonzero(mask)[::2].astype(np.int64)
    seen = np.zeros(len(mask), dtype=np.uint8)
    out = np.empty(len(seeds) * (2 * hops + 1), dtype=np.int64)
    m = with_neighbours(seeds, len(seeds), prev, nxt, hops, mask, seen, out)
    want = set(int(s) for s in seeds)
    for s in seeds:
        p = q = int(s)
        for _ in range(hops):
            p = prev[p] if p >= 0 else -1
            q = nxt[q] if q >= 0 else -1
            want.update(x for x in (p, q) if x >= 0 and mask[x])
    assert sorted(out[:m].tolist()) == sorted(want) and len(set(out[:m].tolist())) == m
    assert not seen.any()


def test_masked_dot_dense():
    rng = np.random.default_rng(1)
    emb = rng.standard_normal((30, 8)).astype(np.float32)
    q = rng.standard_normal(8).astype(np.float32)
    mask = (rng.random(40) < 0.5).astype(np.uint8)
    out = np.full(40, -7.0, dtype=np.float32)
    masked_dot_dense(emb, q, mask, 5, out)
    for g in range(40):
        row = g - 5
        expect = emb[row] @ q if 0 <= row < 30 and mask[g] else -7.0
        assert np.isclose(out[g], expect, atol=1e-5)


def test_context_lifts_the_neighbour_of_a_strong_hit(tmp_path):
    docs = [
        {"id": "q", "text": "Did you ever go camping with the kids?", "author": "A", "thread": "s1"},
        {"id": "a", "text": "Yes, last summer at the lake, they loved it.", "author": "B", "thread": "s1"},
        {"id": "x", "text": "The lake was cold today.", "author": "C", "thread": "s2"},
        {"id": "y", "text": "Summer plans for the team.", "author": "C", "thread": "s3"},
    ]
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        s.add(docs)
        plain = [h.key for h in s.query("camping kids", legs=["lexical"], reserve=False, context=(), siblings=0)]
        ctx = s.query("camping kids", legs=["lexical"], reserve=False, context=(0.6,), context_mode="sum")
        assert "a" not in plain  # shares no word with the question
        assert [h.key for h in ctx][:2] == ["q", "a"]  # its thread neighbour carries it
        assert ctx.plan.legs["lexical"]["context"] == [0.6]
        vec = s.query("camping kids", legs=["vector"], reserve=False, context=(0.6, 0.3))
        assert {h.key for h in vec} == {"q", "a", "x", "y"}


@settings(max_examples=40, deadline=None)
@given(case, st.lists(st.floats(0, 1), min_size=40, max_size=40))
def test_context_scale_multiplies_the_neighbours_share(c, scale):
    _, _, _, every, ids, want = run_kernel(c, scale=scale)
    np.testing.assert_allclose(every, [want[int(d)] for d in ids], atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(case)
def test_context_max_mode(c):
    _, _, _, every, ids, want = run_kernel(c, use_max=True)
    np.testing.assert_allclose(every, [want[int(d)] for d in ids], atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 60, width=32), min_size=1, max_size=300), st.randoms(use_true_random=False), st.integers(1, 6))
def test_moments_do_not_depend_on_order_or_parts(values, rng, parts):
    """Fixed-point moments: any order of the scores, and the sum of any split into parts (segments,
    shards), give the same floats exactly; and they equal numpy's moments up to the rounding of
    each score to 2**-32."""
    from mempp.kernels.context import fixed_sums, moments_from_sums

    scores = np.array(values, dtype=np.float32)
    ids = np.arange(len(scores), dtype=np.int64)
    whole = sparse_moments(scores, ids, len(ids), len(ids))
    shuffled = ids.copy()
    rng.shuffle(shuffled)
    assert sparse_moments(scores, shuffled, len(ids), len(ids)) == whole
    sums = np.zeros(4, dtype=np.int64)
    for part in np.array_split(shuffled, parts):
        fixed_sums(scores, part, len(part), sums)
    assert moments_from_sums(sums, len(ids)) == whole
    mask = np.ones(len(scores), dtype=np.uint8)
    assert candidate_moments(scores, mask) == whole
    v = scores.astype(np.float64)
    np.testing.assert_allclose(whole, (v.mean(), v.std() if v.std() ** 2 > 1e-18 else 1.0), rtol=1e-6, atol=1e-6)
