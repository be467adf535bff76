"""The lexical leg with thread context ranks only the strong matches' neighbourhoods, exactly.

In max mode (the default) a document's context score is its own z-score or at most a neighbour's
(``kernels.context.context_seeds``), so the top ``depth`` comes from the documents whose own
BM25 score reaches a lower bound on the ``depth``-th, and their thread neighbours. The brute
force ranks every touched candidate and every candidate neighbour of one with the same kernel
(``context_topk``, itself checked against a plain-Python oracle in ``test_context.py``): the
two lists must be equal, id for id and in order.

The store is large enough that the bound is tight (most queries rank a fraction of the pool),
and each thread holds one document with a word of its own, repeated: a question with that word
lifts the document's neighbours, which hold none of the question's words, into the top.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp import planner as P
from mempp.kernels import clear_touched, context_topk, neighbourhood, sparse_moments
from mempp.kernels.context import at_least, sampled_kth
from mempp.lexical import bm25_touched
from mempp.options import context_scale

N_DOCS = 2400
THREAD = 6
WORDS = [f"w{i}" for i in range(60)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(7)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    docs = []
    for i in range(N_DOCS):
        words = list(rng.choice(WORDS, size=rng.integers(3, 15), p=p / p.sum()))
        if i % THREAD == 2:
            words += [f"only{i // THREAD}"] * 3  # the thread's own word, in one of its documents
        if i % THREAD == 3:
            words = ["plain"]  # the next document holds no common word: only its neighbour lifts it
        doc = {"id": f"d{i}", "text": " ".join(words), "author": f"A{i % 4}", "thread": f"t{i // THREAD}"}
        doc["date"] = f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}"
        docs.append(doc)
    path = tmp_path_factory.mktemp("seeds") / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=8)) as s:
        for a in range(0, N_DOCS, 800):  # three segments
            s.add(docs[a : a + 800])
    s = mempp.Store.open(path, read_only=True)
    yield s
    s.close()


def brute_force(snap, question: str, mask, opt) -> tuple[list[int], int]:
    """Every touched candidate and every candidate neighbour of one, ranked; and how many."""
    ids = np.array(sorted(snap.term_ids[t] for t in set(snap.analyzer.terms(question)) if t in snap.term_ids), dtype=np.int64)
    scores, touched, n = bm25_touched(snap, ids, mask)
    try:
        prev, nxt = snap.thread_links
        betas = np.asarray(opt.context, dtype=np.float64)
        mu, sigma = sparse_moments(scores, touched, n, int(np.count_nonzero(mask)))
        pool = neighbourhood(touched[:n], prev, nxt, len(betas), mask)
        out_ids = np.empty(opt.depth, dtype=np.int64)
        got = context_topk(
            scores, mu, sigma, pool, len(pool), prev, nxt, betas, context_scale(snap, opt), mask, opt.depth, out_ids,
            np.empty(opt.depth), np.empty(len(pool)), opt.context_max,
        )
    finally:
        clear_touched(scores, touched, n)
    return out_ids[:got].tolist(), len(pool)


RANKED: list[tuple[int, int]] = []  # (ranked by the leg, the brute force's pool) per seeded query


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    common=st.lists(st.sampled_from(WORDS[:20]), min_size=0, max_size=3),
    own=st.lists(st.integers(0, N_DOCS // THREAD - 1), min_size=0, max_size=3),
    betas=st.sampled_from([(0.8, 0.6, 0.4), (1.0,), (0.5, 0.5), (0.9, 0.2), (1.5,), (2.0, 0.5)]),  # over 1: no seeds
    depth=st.sampled_from([1, 5, 20, 50, 100]),
    as_of=st.sampled_from([None, "2023-06-15", "2023-11-30"]),
    context_length=st.sampled_from([None, 4]),
)
def test_seeded_lexical_leg_equals_ranking_every_candidate(store, common, own, betas, depth, as_of, context_length):
    question = " ".join(common + [f"only{t}" for t in own])
    if not question:
        return
    snap = store.searcher().snapshot
    opt = store.searcher().options(k=10, depth=depth, as_of=as_of, context=betas, context_length=context_length)
    mask = P.candidate_mask(snap, opt)
    info: dict = {}
    got, _ = P.lexical_leg(snap, question, mask, int(np.count_nonzero(mask)), opt, np.zeros(0, dtype=np.int64), info)
    want, pool = brute_force(snap, question, mask, opt)
    assert got.tolist() == want
    RANKED.append((info.get("ranked", 0), pool))


def test_seeds_rank_a_fraction_of_the_pool_and_lift_untouched_neighbours(store):
    """The hypothesis run above must have exercised the seeded path; and a thread's own word
    must bring its neighbours that hold no question word (the text "plain") into the top."""
    seeded = [r for r, pool in RANKED if r < pool]
    assert len(seeded) >= len(RANKED) // 3, (len(seeded), len(RANKED))
    snap = store.searcher().snapshot
    opt = store.searcher().options(k=10, depth=20)
    mask = P.candidate_mask(snap, opt)
    question = "w0 w1 only5 only9"
    info: dict = {}
    got, _ = P.lexical_leg(snap, question, mask, int(np.count_nonzero(mask)), opt, np.zeros(0, dtype=np.int64), info)
    want, pool = brute_force(snap, question, mask, opt)
    assert got.tolist() == want and info["ranked"] < pool
    plain = {5 * THREAD + 3, 9 * THREAD + 3}
    assert plain <= set(got), "the neighbours of a thread's own word were not lifted into the top"


def test_a_lift_above_one_ranks_every_candidate(tmp_path):
    """With a beta above 1 a neighbour of a document below the seeds' bound can outrank every
    seed: 200 documents with the question's word and no thread score highest on their own; 100
    threads each pair a weaker match with a document without the word ("plain"), which a beta of
    2 lifts above them all; 1,600 documents without the word keep the mean low. Seeding here
    would lose every "plain" document."""
    docs = [{"id": f"s{i}", "text": "hub filler"} for i in range(200)]
    for t in range(100):
        docs += [{"id": f"w{t}", "text": "hub one two three", "thread": f"t{t}"}, {"id": f"p{t}", "text": "plain", "thread": f"t{t}"}]
    docs += [{"id": f"o{i}", "text": "other words"} for i in range(1600)]
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=8)) as s:
        s.add(docs)
        snap = s.searcher().snapshot
        opt = s.searcher().options(k=10, depth=20, context=(2.0,))
        mask = P.candidate_mask(snap, opt)
        info: dict = {}
        got, _ = P.lexical_leg(snap, "hub", mask, int(np.count_nonzero(mask)), opt, np.zeros(0, dtype=np.int64), info)
        want, pool = brute_force(snap, "hub", mask, opt)
        assert got.tolist() == want and info["ranked"] == pool
        assert all(s.searcher().record(int(d)).text == "plain" for d in got), "the lifted documents are the answer"


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(-2, 2, width=32), min_size=0, max_size=300),
    step=st.integers(1, 9),
    k=st.integers(1, 40),
    threshold=st.floats(-2, 2),
    masked=st.booleans(),
    data=st.data(),
)
def test_sampled_kth_and_at_least_equal_numpy(values, step, k, threshold, masked, data):
    """The seeds' two kernels against numpy: the k-th largest of every step-th value, repeats
    counted, and the indices at least a threshold (masked ones only, when asked)."""
    arr = np.array(values, dtype=np.float32)
    sample = arr[::step]
    want = -np.inf if len(sample) < k else float(-np.partition(-sample.astype(np.float64), k - 1)[k - 1])
    assert sampled_kth(arr, step, k, np.empty(k), np.empty(k, dtype=np.int64)) == want
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(arr), max_size=len(arr))), dtype=np.uint8)
    out = np.empty(len(arr), dtype=np.int64)
    keep = (arr.astype(np.float64) >= threshold) & (mask.astype(bool) if masked else True)
    assert out[: at_least(arr, mask, threshold, masked, out)].tolist() == np.flatnonzero(keep).tolist()
