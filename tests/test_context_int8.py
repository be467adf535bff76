"""The vector leg with thread context on a store with an int8 copy, against brute force.

The leg ranks every candidate by the context score of its exact cosine (``vector.rescore``),
standardized by the moments of the first scores (the int8 approximations,
``vector.first_scores``); it rescores in float32 only the candidates whose context score the
int8 error bound leaves within reach of the top ``depth``, and their neighbours. The brute force
rescores every candidate and ranks them all with the same formula (``context_topk``, itself
checked against a plain-Python oracle in ``test_context.py``): the two lists must be equal,
id for id and in order. On the larger store the first ranking starts from the documents whose
own first score could lift a document into reach (``vector.context_seeds``) and their neighbours.

The embeddings are drawn around a few directions with little noise, so that many cosines lie
within the int8 error of each other and the approximate order differs from the exact one near
the cut: a margin one bound too narrow loses documents here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp import planner as P
from mempp import vector as V
from mempp.kernels import candidate_moments, context_topk


def clustered(rng: np.random.Generator, n: int, dim: int, centres: int, noise: float) -> np.ndarray:
    base = rng.standard_normal((centres, dim)).astype(np.float32)
    emb = base[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)


def build(path, dim: int, n: int, seed: int, vector_copy: str | None = "int8"):
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        doc = {"id": f"d{i}", "text": f"w{i % 7} w{i % 11}", "author": f"A{i % 3}"}
        if rng.random() < 0.85:
            doc["thread"] = f"t{rng.integers(0, n // 6)}"
        if rng.random() < 0.9:
            doc["date"] = f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}"
        docs.append(doc)
    emb = clustered(rng, n, dim, centres=4, noise=0.01)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=dim), index=mempp.IndexConfig(vector_copy=vector_copy)) as s:
        cut = [0, n // 2, (3 * n) // 4, n]  # three segments
        for a, b in zip(cut, cut[1:]):
            s.add(docs[a:b], embeddings=emb[a:b])
    return emb


@pytest.fixture(
    scope="module", params=[(384, "int8", 600), (384, "int8", 3000), (16, "int8", 600), (384, None, 600)],
    ids=["d384", "d384-seeded", "d16", "float32-only"],
)
def store(request, tmp_path_factory):
    """600 documents: every candidate is ranked; 3,000: the ranking starts from the seeds
    (``vector.context_seeds``) for most queries."""
    dim, copy, n = request.param
    path = tmp_path_factory.mktemp("ctx8") / "s"
    emb = build(path, dim, n, seed=dim, vector_copy=copy)
    s = mempp.Store.open(path, read_only=True)
    yield s, emb
    s.close()


def brute_force(snap, query, mask, opt) -> list[int]:
    """Every candidate rescored; every candidate ranked."""
    first, _ = V.first_scores(snap, query, mask, opt)
    mu, sigma = candidate_moments(first, mask)
    cands = np.flatnonzero(mask).astype(np.int64)
    scores = first.copy()
    scores[cands] = V.rescore(snap, cands, query)
    prev, nxt = snap.thread_links
    betas = np.asarray(opt.context, dtype=np.float64)
    out_ids = np.empty(opt.depth, dtype=np.int64)
    got = context_topk(
        scores, mu, sigma, cands, len(cands), prev, nxt, betas, V.context_scale(snap, opt), mask, opt.depth, out_ids,
        np.empty(opt.depth), np.empty(len(cands)), opt.context_max,
    )
    return out_ids[:got].tolist()


options = st.fixed_dictionaries(
    {
        "context": st.lists(st.sampled_from((0.0, 0.3, 0.6, 0.8, 1.0, 1.5)), min_size=1, max_size=3).filter(any),
        "context_mode": st.sampled_from(("max", "sum")),
        "context_length": st.one_of(st.none(), st.integers(1, 4)),
        "k": st.sampled_from((1, 5, 10, 30)),
        "as_of": st.one_of(st.none(), st.sampled_from(("2023-03-15", "2023-08-01"))),
    }
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), opts=options, noise=st.sampled_from((0.0, 0.02, 1.0)))
def test_context_vector_leg_equals_brute_force(store, seed, opts, noise):
    s, emb = store
    rng = np.random.default_rng(seed)
    # a query near a stored document (many near-ties at the top) or anywhere
    q = emb[rng.integers(0, len(emb))] + noise * rng.standard_normal(emb.shape[1]).astype(np.float32)
    q = (q / np.linalg.norm(q)).astype(np.float32)
    snap = s.searcher().snapshot
    opt = s.searcher().options(**opts)
    mask = P.candidate_mask(snap, opt)
    info: dict = {}
    got = P.vector_leg(snap, q, mask, opt, info).tolist()
    assert got == brute_force(snap, q, mask, opt)
    if np.count_nonzero(mask):
        assert info["method"].startswith("thread context: first scores")
        assert 0 < info["rescored_rows"] <= np.count_nonzero(mask)


def test_the_rescore_reads_a_few_rows_of_a_large_store(tmp_path):
    """What the int8 first scores buy: on 3,000 isotropic documents the leg rescores a small share."""
    path = tmp_path / "s"
    rng = np.random.default_rng(5)
    n, dim = 3000, 384
    emb = rng.standard_normal((n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    docs = [{"text": f"w{i % 13}", "thread": f"t{i // 5}", "date": "2023-01-01"} for i in range(n)]
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=dim)) as s:
        s.add(docs, embeddings=emb)
        snap = s.searcher().snapshot
        opt = s.searcher().options(k=10)
        q = rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        mask = P.candidate_mask(snap, opt)
        info: dict = {}
        got = P.vector_leg(snap, q, mask, opt, info).tolist()
        assert got == brute_force(snap, q, mask, opt)
        assert info["first_ranked"] < n // 4 and info["rescored_rows"] < n // 4, info


def test_a_margin_of_one_bound_loses_the_document_the_rounding_hid(tmp_path):
    """Rounding built to the edge: 50 copies of a row whose int8 copy rounds every scored value
    up by 0.49 of a step and one row that rounds them down by 0.49 score within the error bound
    of each other, the one row truly the best and second in the int8 order, by 1.8 bounds.

    The context score of a row here is its own (no neighbours), so the leg must rescore every
    row within twice the bound of the 50th approximate score: with one bound it returns the 50
    copies, and the brute force the one row and 49 copies."""
    dim = 384
    q = np.zeros(dim, dtype=np.float32)
    q[1:12] = 1.0 / np.sqrt(11.0)
    # in steps of the int8 scale: element 0 holds 127 (the row's largest, exact); elements 1-10
    # round across a step, element 11 leans the true score towards the one row; element 12
    # (not scored) gives both rows the same norm, so the same scale
    hidden = np.zeros(dim)
    copy = np.zeros(dim)
    hidden[0] = copy[0] = 127.0
    hidden[1:11], copy[1:11] = 5.49, 5.51
    hidden[11], copy[11] = 3.3, 3.0
    hidden[12] = np.sqrt(copy @ copy - hidden @ hidden)
    rows = np.array([hidden / np.linalg.norm(hidden), copy / np.linalg.norm(copy)], dtype=np.float32)
    rng = np.random.default_rng(3)
    filler = rng.standard_normal((300, dim)).astype(np.float32)
    filler /= np.linalg.norm(filler, axis=1, keepdims=True)
    emb = np.vstack([filler, np.repeat(rows[1:], 50, axis=0), rows[:1]])
    docs = [{"text": f"w{i}", "thread": f"t{i // 5}"} for i in range(300)] + [{"text": f"c{i}"} for i in range(51)]
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=dim)) as s:
        s.add(docs, embeddings=emb)
        snap = s.searcher().snapshot
        opt = s.searcher().options(k=10)
        assert opt.depth == 50
        mask = P.candidate_mask(snap, opt)
        first, eps = V.first_scores(snap, q, mask, opt)
        exact = V.rescore(snap, np.array([350, 349]), q)
        assert exact[0] > exact[1] and eps < first[349] - first[350] < 2 * eps  # truly first; hidden by more than one bound
        want = brute_force(snap, q, mask, opt)
        assert 350 in want
        assert P.vector_leg(snap, q, mask, opt).tolist() == want
