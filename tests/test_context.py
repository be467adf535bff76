"""Thread context: kernels against numpy oracles, and the lexical/vector legs against a dense re-computation.

The dense re-computation (``dense_context_leg``) is plain numpy on what the test wrote: BM25
(Lucene's formula over the whole store) or cosine for every document, z-scored over the
candidates, each candidate lifted by its candidate neighbours 1..H steps away in its thread
(ingest order), the documents ranked. The sparse lexical leg the default query runs on any
store with threads scores only the documents a query term touches and their neighbours: the
oracle ranks that pool (touched candidates and their candidate neighbours within H steps).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp import planner as P
from mempp import vector
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
    # the ids returned are the documents with those scores: each one's own oracle score, all distinct,
    # and the same set as the oracle's top k wherever no tie straddles the cut
    chosen = out_ids[:got].tolist()
    assert len(set(chosen)) == got and set(chosen) <= set(want)
    np.testing.assert_allclose([want[d] for d in chosen], out_s[:got], atol=1e-9)
    cut = want[expect[-1]] if expect else math.inf
    assert {d for d in want if want[d] > cut + 1e-9} <= set(chosen)


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


# --- the legs with thread context against a dense recomputation ---------------------------------
K1, B = 1.2, 0.75
VOCAB = [f"w{i}" for i in range(40)]
CTX_DIM = 16


def thread_links(threads: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Oracle: each document's previous and next document of its thread, in ingest order."""
    codes: dict[str, int] = {}
    return links([-1 if t is None else codes.setdefault(t, len(codes)) for t in threads])


def bm25_dense(doc_terms: list[list[str]], query_terms: list[str]) -> np.ndarray:
    """BM25 of every document (float64), N, df and the average length over the whole store."""
    n = len(doc_terms)
    avgdl = sum(map(len, doc_terms)) / n
    tfs = [Counter(t) for t in doc_terms]
    out = np.zeros(n)
    for term in set(query_terms):
        df = sum(1 for tf in tfs if term in tf)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for d, tf in enumerate(tfs):
            if tf[term]:
                out[d] += idf * tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * len(doc_terms[d]) / avgdl))
    return out


def dense_context_leg(scores, mask, prev, nxt, betas, lengths=None, context_length=None, use_max=True, standardize_by=None):
    """Context score of every candidate (dict doc -> score), from dense raw ``scores`` z-scored by
    the moments of ``standardize_by`` (default: ``scores``)."""
    cand = mask.astype(bool)
    n_cand = int(cand.sum())
    by = scores if standardize_by is None else standardize_by
    mu = by[cand].mean() if n_cand else 0.0
    var = (by[cand] ** 2).mean() - mu * mu if n_cand else 0.0
    sd = math.sqrt(var) if var > 1e-18 else 1.0
    z = (scores - mu) / sd
    out = {}
    for d in np.flatnonzero(cand):
        lifts = []
        p = q = int(d)
        for b in betas:
            p = prev[p] if p >= 0 else -1
            q = nxt[q] if q >= 0 else -1
            lifts += [b * z[x] for x in (p, q) if x >= 0 and cand[x]]
        share = 1.0 if context_length is None else min(1.0, context_length / max(lengths[d], 1.0))
        if use_max:
            out[int(d)] = max([z[d]] + [share * v for v in lifts]) if share > 0 else z[d]
        else:
            out[int(d)] = z[d] + share * sum(lifts)
    return out


def sparse_pool(scores, mask, prev, nxt, hops) -> set[int]:
    """The documents the sparse leg ranks: touched candidates and their candidate neighbours within ``hops``."""
    cand = mask.astype(bool)
    pool = set()
    for d in np.flatnonzero(cand & (scores > 0)):
        pool.add(int(d))
        p = q = int(d)
        for _ in range(hops):
            p = prev[p] if p >= 0 else -1
            q = nxt[q] if q >= 0 else -1
            pool.update(int(x) for x in (p, q) if x >= 0 and cand[x])
    return pool


def assert_ranks_like(got: list[int], oracle: dict, pool, depth: int) -> None:
    """``got`` is a best-first top ``depth`` of ``pool`` under the oracle's scores (ties either way)."""
    want = sorted(pool, key=lambda d: (-oracle[d], -d))[:depth]
    assert len(got) == len(want) and len(set(got)) == len(got)
    assert set(got) <= set(pool), sorted(set(got) - set(pool))
    np.testing.assert_allclose([oracle[d] for d in got], [oracle[d] for d in want], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def threaded(tmp_path_factory):
    """300 documents in 3 commits: 30 threads (a fifth of the documents in none), 5 authors,
    Zipf-distributed words, documents of 2 to 30 words, dates over 2023 (some undated)."""
    rng = np.random.default_rng(31)
    p = 1.0 / np.arange(1, len(VOCAB) + 1)
    docs, threads = [], []
    for i in range(300):
        thread = None if rng.random() < 0.2 else f"t{rng.integers(0, 30)}"
        doc = {"id": f"d{i}", "text": " ".join(rng.choice(VOCAB, size=rng.integers(2, 30), p=p / p.sum())), "author": f"A{i % 5}"}
        if thread is not None:
            doc["thread"] = thread
        if rng.random() < 0.9:
            doc["date"] = f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}"
        docs.append(doc)
        threads.append(thread)
    emb = rng.standard_normal((300, CTX_DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    path = tmp_path_factory.mktemp("ctx") / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=CTX_DIM)) as s:
        for a in (0, 120, 220):
            s.add(docs[a : a + {0: 120, 120: 100, 220: 80}[a]], embeddings=emb[a : a + {0: 120, 120: 100, 220: 80}[a]])
    analyzer = mempp.storage.Analyzer()
    doc_terms = [analyzer.terms(d["text"]) for d in docs]
    store = mempp.Store.open(path, read_only=True)
    yield store, doc_terms, threads, emb
    store.close()


ctx_options = st.fixed_dictionaries(
    {
        "context": st.lists(st.sampled_from((0.0, 0.2, 0.4, 0.6, 0.8, 1.0)), min_size=1, max_size=4).filter(any),
        "context_mode": st.sampled_from(("max", "sum")),
        "context_length": st.one_of(st.none(), st.integers(1, 20)),
        "depth": st.integers(1, 80),
        "as_of": st.one_of(st.none(), st.sampled_from(("2023-03-15", "2023-08-01", "2023-12-31"))),
        "authors": st.one_of(st.none(), st.lists(st.sampled_from(("A0", "A1", "A2", "A3", "A4")), min_size=1, max_size=3, unique=True)),
    }
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(st.sampled_from(VOCAB + ["absent"]), min_size=1, max_size=4), options=ctx_options, data=st.data())
def test_sparse_lexical_leg_with_context_matches_dense_oracle(threaded, words, options, data):
    """What the default query runs on a store with threads: the sparse BM25 leg with thread context,
    and the scores it gives the tag leg's documents, equal to the dense recomputation."""
    store, doc_terms, threads, _ = threaded
    snap = store.searcher().snapshot
    question = " ".join(words)
    opt = store.searcher().options(**options)
    mask = P.candidate_mask(snap, opt)
    cands = np.flatnonzero(mask)
    score_for = np.array(sorted(data.draw(st.sets(st.sampled_from(cands.tolist()), max_size=12), label="score_for")) if len(cands) else [], dtype=np.int64)
    info: dict = {}
    got, extra = P.lexical_leg(snap, question, mask, len(cands), opt, score_for, info)
    raw = bm25_dense(doc_terms, mempp.storage.Analyzer().terms(question))
    if not (raw[mask.astype(bool)] > 0).any():
        assert len(got) == 0
        return
    assert info["method"] == "sparse with thread context"
    prev, nxt = thread_links(threads)
    lengths = np.array([len(t) for t in doc_terms], dtype=np.float64)
    oracle = dense_context_leg(raw, mask, prev, nxt, opt.context, lengths, opt.context_length, opt.context_max)
    assert_ranks_like(got.tolist(), oracle, sparse_pool(raw, mask, prev, nxt, len(opt.context)), opt.depth)
    np.testing.assert_allclose(extra, [oracle[int(d)] for d in score_for], rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), options=ctx_options)
def test_dense_vector_leg_with_context_matches_dense_oracle(threaded, seed, options):
    """The vector leg on a store with threads: every candidate's cosine, z-scored by the moments
    of the int8 first scores, lifted by its neighbours."""
    store, doc_terms, threads, emb = threaded
    snap = store.searcher().snapshot
    q = np.random.default_rng(seed).standard_normal(CTX_DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    opt = store.searcher().options(**options)
    mask = P.candidate_mask(snap, opt)
    info: dict = {}
    got = P.vector_leg(snap, q, mask, opt, info)
    assert info["method"].startswith("thread context: first scores")
    prev, nxt = thread_links(threads)
    lengths = np.array([len(t) for t in doc_terms], dtype=np.float64)
    first, _ = vector.first_scores(snap, q, mask, opt)
    oracle = dense_context_leg(
        emb.astype(np.float64) @ q, mask, prev, nxt, opt.context, lengths, opt.context_length, opt.context_max, first.astype(np.float64)
    )
    assert_ranks_like(got.tolist(), oracle, oracle.keys(), opt.depth)


def test_lexical_query_with_default_context_ranks_as_the_oracle(threaded):
    """Through Store.query with the default context (0.8, 0.6, 0.4 in max mode), lexical leg only
    and the thread stage after fusion off (``siblings=0``: it has its own oracle)."""
    store, doc_terms, threads, _ = threaded
    prev, nxt = thread_links(threads)
    rng = np.random.default_rng(5)
    for _ in range(30):
        question = " ".join(rng.choice(VOCAB, size=rng.integers(1, 4)))
        hits = store.query(question, legs=["lexical"], reserve=False, k=50, siblings=0)
        assert hits.plan.legs["lexical"]["method"] == "sparse with thread context"
        mask = (store.searcher().snapshot.valid_until == mempp.storage.FOREVER).astype(np.uint8)
        raw = bm25_dense(doc_terms, mempp.storage.Analyzer().terms(question))
        oracle = dense_context_leg(raw, mask, prev, nxt, (0.8, 0.6, 0.4))
        assert_ranks_like([h.doc_id for h in hits], oracle, sparse_pool(raw, mask, prev, nxt, 3), 50)


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
