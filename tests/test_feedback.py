"""Feedback (the vector leg's second scan), the tag leg's fused order and the name-free question
vector (engine/feedback.py), against numpy brute force over the stored vectors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mempp

DIM = 16
AUTHORS = ["Ann Lee", "Bo Park", "Cy Diaz"]
WORDS = "budget region payments cluster lunch weather runbook outage policy vendor".split()


def _build(path, seed: int, n: int = 60):
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs = [
        {
            "id": f"d{i}",
            "text": " ".join(rng.choice(WORDS, size=int(rng.integers(2, 7)))) + f" note {i}",
            "author": AUTHORS[int(rng.integers(0, 3))],
            "date": f"2023-{1 + i % 12:02d}-{1 + i % 27:02d}",
        }
        for i in range(n)
    ]
    store = mempp.Store.open(path, embedder=mempp.HashEmbedder(DIM))
    store.add(docs[: n // 2], embeddings=vecs[: n // 2])
    store.add(docs[n // 2 :], embeddings=vecs[n // 2 :])  # two segments: the vectors are read across both
    return store, vecs


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _leg(hits_table, leg):
    """Doc ids by their rank in one leg (from a query_batch table of one query)."""
    rows = [(r, d) for r, d in zip(hits_table[f"rank_{leg}"].to_pylist(), hits_table["doc_id"].to_pylist()) if r is not None]
    return [d for _, d in sorted(rows)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["budget payments", "runbook outage vendor", "lunch"]), st.integers(1, 5))
def test_feedback_vector_leg_equals_brute_force(tmp_path_factory, seed, question, n_feedback):
    """The vector leg with feedback ranks by cosine to unit(q + mean of the first fused documents'
    vectors), where the first fusion is the same query's with feedback off."""
    store, vecs = _build(tmp_path_factory.mktemp("fb") / "s", seed)
    rng = np.random.default_rng(seed + 1)
    q = _unit(rng.standard_normal(DIM))
    n = len(vecs)
    common = dict(k=n, reserve=False, siblings=0, context=(), depth=20)
    with store:
        first = store.query_batch([question], embeddings=q[None, :], **common, feedback=0)
        fused = first["doc_id"].to_pylist()  # the first fusion's order (no reserve, no thread stage)
        got = store.query_batch([question], embeddings=q[None, :], **common, feedback=n_feedback)
        fvec = _unit(q + vecs[fused[:n_feedback]].mean(axis=0))
        scores = vecs @ fvec
        want = sorted(range(n), key=lambda d: (-scores[d], -d))[:20]
        assert _leg(got, "vector") == want
        assert _leg(first, "vector") == sorted(range(n), key=lambda d: (-(vecs @ q)[d], -d))[:20]
        # explain() names the documents the feedback used (the same k: the default weights follow it)
        plan = store.explain(question, embedding=q, **common, feedback=n_feedback)
        assert plan.legs["vector"]["feedback"] == fused[:n_feedback]


def test_tag_rank_fused_against_a_model(tmp_path):
    """Tag leg "fused": RRF (c = 60) of its "lexical" order and of cosine order, ties to the later-ingested."""
    store, vecs = _build(tmp_path / "s", 7, n=80)
    q = _unit(np.arange(DIM, dtype=np.float32) - 7.5)
    common = dict(k=80, reserve=False, siblings=0, context=(), depth=80, feedback=0, name_free=False)
    text = ["what did Bo Park say about the budget?"]
    with store:
        lexical = _leg(store.query_batch(text, embeddings=q[None, :], **common, tag_rank="lexical"), "tag")
        fused = _leg(store.query_batch(text, embeddings=q[None, :], **common, tag_rank="fused"), "tag")
        # with the vector leg off the question has no vector: the tag leg keeps the lexical order
        assert _leg(store.query_batch(text, embeddings=q[None, :], **common, legs=["tag"]), "tag") == lexical
    assert sorted(lexical) == sorted(fused) and len(lexical) > 10
    cos = vecs @ q
    by_cos = sorted(lexical, key=lambda d: (-cos[d], -d))
    score = {d: 1 / (60 + lexical.index(d)) + 1 / (60 + by_cos.index(d)) for d in lexical}
    assert fused == sorted(lexical, key=lambda d: (-score[d], -d))
    assert fused != lexical


NAMED = {  # question -> the names it gives of the store's people, as name_free embeds them
    "what did Bo Park say about the budget?": ["bo park"],
    "Ann and Cy on the outage": ["ann", "cy"],
    "Lee's runbook, and Bo Park's vendor policy": ["bo park", "lee"],
    "Bo Park's budget, and what Bo said of it": ["bo", "bo park"],  # two names sharing a word: far from orthogonal
    "the budget of the payments cluster": [],
}


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(sorted(NAMED)), st.booleans())
def test_name_free_vector_equals_brute_force(tmp_path_factory, seed, question, batch):
    """With ``name_free`` (the default) the vector leg and the tag leg's cosine order read the
    question's vector less its least-squares projection on the names' vectors (the store's
    embedder), normalized; ``name_free=False`` reads it as given; a question naming nobody is
    unchanged. Single queries and batches agree."""
    store, vecs = _build(tmp_path_factory.mktemp("nf") / "s", seed)
    q = _unit(np.random.default_rng(seed + 1).standard_normal(DIM))
    n = len(vecs)
    common = dict(k=n, reserve=False, siblings=0, context=(), depth=n, feedback=0)
    names = NAMED[question]
    want_vec = q
    if names:
        basis = mempp.HashEmbedder(DIM).embed(names).astype(np.float64).T  # dim x names
        coef = np.linalg.lstsq(basis, q.astype(np.float64), rcond=None)[0]
        want_vec = _unit(q - basis @ coef)

    def vector_leg(**kw):
        if batch:
            return _leg(store.query_batch([question], embeddings=q[None, :], **common, **kw), "vector")
        hits = store.query(question, embedding=q, **common, **kw)
        return [h.doc_id for h in sorted((h for h in hits if h.ranks["vector"] is not None), key=lambda h: h.ranks["vector"])]

    with store:
        for kw, v in (({}, want_vec), ({"name_free": False}, q)):
            scores = vecs @ v
            assert vector_leg(**kw) == sorted(range(n), key=lambda d: (-scores[d], -d))


class ForeignModel:
    """An embedder mempp cannot load again by itself (not one of its shipped models)."""

    dim, model_id, max_tokens = DIM, "acme/in-house-encoder", 512

    def embed(self, texts, *, batch_size=32, progress=None):
        return mempp.HashEmbedder(DIM).embed(texts)


def test_name_free_keeps_supplied_vectors_of_a_model_it_cannot_load(tmp_path):
    """Reopened without its embedder, a store of another model's vectors still answers a named
    question whose vector is supplied (names stay in: nothing can embed them in that space),
    while a question without a vector still asks for the embedder."""
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=ForeignModel()) as store:
        store.add([{"id": f"d{i}", "text": f"budget note {i}", "author": AUTHORS[i % 3], "date": "2023-01-05"} for i in range(30)])
    q = _unit(np.random.default_rng(5).standard_normal(DIM))
    with mempp.Store.open(path) as store:
        got = [h.key for h in store.query("what did Bo Park say about the budget?", embedding=q, k=5)]
        assert got == [h.key for h in store.query("what did Bo Park say about the budget?", embedding=q, k=5, name_free=False)]
        assert len(got) == 5
        with pytest.raises(mempp.EmbedderError, match="acme/in-house-encoder"):
            store.query("what did Bo Park say about the budget?", k=5)


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_name_free_refuses_non_booleans(tmp_path, bad):
    store, _ = _build(tmp_path / "s", 1, n=10)
    with store, pytest.raises(mempp.ValidationError) as e:
        store.query("what did Ann say", name_free=bad)
    assert e.value.field == "name_free"


def test_feedback_off_without_a_question_vector(tmp_path):
    """A store queried with the vector leg off, or a blank question, runs no feedback."""
    store, vecs = _build(tmp_path / "s", 3)
    with store:
        for kwargs in ({"legs": ["lexical", "tag"]},):
            plan = store.explain("budget payments", k=5, **kwargs)
            assert "feedback" not in plan.legs["vector"]
        assert store.query("   ", k=5) == [] or len(store.query("   ", k=5)) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_feedback_refuses_bad_values(tmp_path, bad):
    store, _ = _build(tmp_path / "s", 1, n=10)
    with store, pytest.raises(mempp.ValidationError) as e:
        store.query("budget", feedback=bad)
    assert e.value.field == "feedback"


def test_tag_rank_refuses_unknown(tmp_path):
    store, _ = _build(tmp_path / "s", 1, n=10)
    with store, pytest.raises(mempp.ValidationError) as e:
        store.query("budget", tag_rank="date")
    assert e.value.field == "tag_rank"
