"""``query_batch`` and ``query_stream`` answer as ``query`` does, one question at a time, hit for hit.

The oracle is ``Store.query`` itself, run question by question on the same store with the
same options: the batch paths (one candidate mask per question, the vector leg of a chunk in
one pass, a chunk's questions embedded together) must change nothing a caller can see:
document, key, fused score, reserve flag and every leg's rank of every hit, in order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp.config import DEFAULT_CONTEXT
from mempp.types import LEGS

from strategies import AUTHORS, CHANNELS, THREADS, VOCAB, as_of_for, doc_dates, histories, iso_day_strings

NAME_PARTS = tuple(part for name in AUTHORS for part in name.split())
WORDS = VOCAB + NAME_PARTS + ("item1", "item2", "item3", "item4", "the", "of", "what", "99.9")
BLANK = ("", " ", "   ", "\n\t ", "\u3000\u00a0")

questions = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    st.sampled_from(BLANK),
    # very long: thousands of words (every term repeated; the embedder reads them all)
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(lambda w: " ".join(w * 1500)),
)
weights = st.tuples(*[st.sampled_from((0, 0.5, 1, 2, 4))] * 3)
legs = st.one_of(st.none(), st.lists(st.sampled_from(LEGS), unique=True, max_size=3))
contexts = st.one_of(
    st.just(DEFAULT_CONTEXT), st.just(()), st.lists(st.sampled_from((0.0, 0.3, 0.8, 1.0)), min_size=1, max_size=3).map(tuple)
)


def names(values) -> st.SearchStrategy:
    """A facet filter: None, one value, or a list (maybe empty, maybe naming nothing stored)."""
    return st.one_of(st.none(), st.sampled_from(values), st.lists(st.sampled_from(values + ("nobody",)), max_size=3, unique=True))


@st.composite
def query_options(draw) -> dict:
    """Every keyword ``query`` and ``query_batch`` share, each left at its default or drawn
    (the filters less often: together they often leave no candidate)."""
    opts: dict = {"k": draw(st.integers(1, 60))}
    ranking = {
        "depth": st.integers(1, 60),
        "weights": weights,
        "legs": legs,
        "reserve": st.booleans(),
        "context": contexts,
        "context_mode": st.sampled_from(("max", "sum")),
        "context_length": st.one_of(st.none(), st.integers(1, 8), st.floats(0.5, 10)),
        "vector_index": st.sampled_from(("auto", "exact", "ann")),
        "siblings": st.sampled_from((0, 1, 3, 8, 100)),
        "reserve_rule": st.sampled_from(("relevant", "paper")),
        "feedback": st.sampled_from((0, 1, 3, 10)),
        "tag_rank": st.sampled_from(("fused", "lexical")),
        "chain": st.sampled_from((0, 1, 2, 5)),
    }
    filters = {
        "authors": names(AUTHORS),
        "threads": names(THREADS),
        "channels": names(CHANNELS),
        "date_from": iso_day_strings,
        "date_to": st.one_of(iso_day_strings, doc_dates),
    }
    for name, values in ranking.items():
        if draw(st.booleans()):
            opts[name] = draw(values)
    for name, values in filters.items():
        if draw(st.integers(0, 3)) == 0:
            opts[name] = draw(values)
    return opts


def apply(store, history) -> None:
    for op in history.ops:
        try:  # a write the rule refuses (test_temporal's model says which) writes nothing
            if op[0] == "add":
                store.add(op[1], backdate=op[2])
            else:
                store.supersede(op[1], op[2], effective=op[3], backdate=True)  # effective dates drawn freely
        except (mempp.ValidationError, mempp.DocumentNotFound):  # an id only a refused write had
            pass


def single_rows(store, qi: int, question: str, as_of, embedding, opts: dict) -> list[dict]:
    """``query``'s hits for question ``qi`` as the batch's rows."""
    hits = store.query(question, as_of=as_of, embedding=embedding, **opts)
    return [
        {"query": qi, "rank": r, "doc_id": h.doc_id, "key": h.key, "score": h.score, "reserved": h.reserved}
        | {f"rank_{leg}": h.ranks[leg] for leg in LEGS}
        for r, h in enumerate(hits)
    ]


def assert_batch_equals_single(store, qs: list[str], as_ofs: list, opts: dict, per_query: bool, embeddings, chunk: int):
    as_of = as_ofs if per_query else as_ofs[0]
    try:
        table = store.query_batch(qs, embeddings, as_of=as_of, **opts)
    except mempp.ValidationError as exc:  # options query() refuses too (every weight 0), with the same field
        with pytest.raises(mempp.ValidationError) as single:
            store.query(qs[0], as_of=as_ofs[0], embedding=None if embeddings is None else embeddings[0], **opts)
        assert single.value.field == exc.field
        return
    rows = table.to_pylist()
    stream = list(store.query_stream(qs, embeddings, as_of=as_of, chunk=chunk, **opts))
    assert len(stream) == -(-len(qs) // chunk)
    assert pa.Table.from_batches(stream, schema=table.schema).to_pylist() == rows
    assert [r["query"] for r in rows] == sorted(r["query"] for r in rows)
    for qi, q in enumerate(qs):
        want = single_rows(store, qi, q, as_ofs[qi], None if embeddings is None else embeddings[qi], opts)
        assert [r for r in rows if r["query"] == qi] == want, (qi, q[:80], as_ofs[qi])


def wait_for_ann(store) -> None:
    for a in store.searcher().snapshot.ann:
        assert a.wait(60) and a.failed is None


@pytest.mark.slow
@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=histories(max_ops=6, max_batch=6, provenance=True), data=st.data())
def test_batch_equals_single_under_every_option(tmp_path_factory, history, data):
    with mempp.Store.open(tmp_path_factory.mktemp("s"), embedder=mempp.HashEmbedder(dim=64)) as store:
        apply(store, history)
        if data.draw(st.booleans(), label="ann index"):
            store.build_ann(min_docs=1, m=8, ef_construction=20)
            wait_for_ann(store)
        qs = data.draw(st.lists(questions, min_size=2, max_size=7), label="questions")
        opts = data.draw(query_options(), label="options")
        per_query = data.draw(st.booleans(), label="as_of per question")
        dates = as_of_for(history)
        as_ofs = data.draw(st.lists(dates, min_size=len(qs), max_size=len(qs)) if per_query else dates.map(lambda a: [a] * len(qs)), label="as_of")
        given_vectors = data.draw(st.booleans(), label="embeddings given")
        embeddings = store.embedder.embed([q if q.strip() else "sla" for q in qs]) if given_vectors else None
        chunk = data.draw(st.integers(1, 4), label="chunk")
        assert_batch_equals_single(store, qs, as_ofs, opts, per_query, embeddings, chunk)


def test_blank_questions_have_no_hits_in_either_path(tmp_path):
    """A blank question is not embedded: no hits, whether asked alone or in a batch."""
    docs = [{"id": f"d{i}", "text": f"budget review item{i}", "author": AUTHORS[i % 3], "date": "2023-01-02"} for i in range(30)]
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as store:
        store.add(docs)
        qs = list(BLANK) + ["budget"]
        table = store.query_batch(qs, k=10)
        assert table.column("query").to_pylist() == [len(BLANK)] * 10
        for q in BLANK:
            assert list(store.query(q, k=10)) == []
        # With an embedding given, the vector leg ranks by it, alone and in a batch alike.
        emb = store.embedder.embed(["budget review item7"] * len(qs))
        assert_batch_equals_single(store, qs, [None] * len(qs), {"k": 5}, False, emb, 2)
        assert table.num_rows < store.query_batch(qs, emb, k=10).num_rows
    # A store whose embedder is unknown answers blank questions without one, in a batch too.
    class Custom:
        dim, model_id, max_tokens = 4, "my-model", 128

        def embed(self, texts, *, batch_size=32, progress=None):
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    with mempp.Store.open(tmp_path / "c", embedder=Custom()) as s:
        s.add([{"text": "a b"}])
    with mempp.Store.open(tmp_path / "c") as s:
        assert s.query_batch(["", " "]).num_rows == 0 and list(s.query(" ")) == []
        with pytest.raises(mempp.EmbedderError):
            s.query_batch(["", "a"])
