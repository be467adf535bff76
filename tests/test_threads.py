"""The thread stage and the relevant-evidence reserve (engine/threads.py), against plain models."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import mempp
from mempp.fusion import select as paper_select
from mempp.fusion import select_ranked as select
from mempp.threads import SIBLING_SHARE, lift_siblings, thread_siblings

NAT = np.iinfo(np.int64).min


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=0, max_size=25, unique=True),
    st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=31, max_size=31),
    st.integers(0, 12),
    st.booleans(),
)
def test_select_equals_the_paper_rule_when_everything_qualifies(order, dates, k, reserve):
    """With every document qualifying, select() is fusion.select() on scores that give ``order``."""
    scores = {d: float(len(order) - i) for i, d in enumerate(order)}
    arr = np.array([NAT if x is None else x for x in dates], dtype=np.int64)
    assert select(order, arr, NAT, k, reserve) == paper_select(scores, dict(enumerate(dates)), k, reserve)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(0, 20), st.floats(0.001, 1.0), max_size=15),
    st.lists(st.integers(0, 4), min_size=21, max_size=21),
    st.floats(0.1, 1.0),
)
def test_lift_siblings_against_a_model(fused, thread_of, share):
    """Each document ends with max(its own score, share x the best score among its thread's other fused members)."""

    def siblings_of(d):
        return [s for s in range(21) if s != d and thread_of[s] == thread_of[d] and thread_of[d] != 0]  # thread 0: "too long"

    order = sorted(fused, key=lambda d: (-fused[d], -d))
    got = lift_siblings(order, fused, siblings_of, share)
    for d in range(21):
        best = max((fused[s] for s in siblings_of(d) if s in fused), default=None)
        want = max(fused.get(d, 0.0), share * best) if best is not None else fused.get(d)
        if want is None or (d not in fused and want == 0.0):
            assert d not in got
        else:
            assert got[d] == want


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=1, max_size=30),
    st.lists(st.booleans(), min_size=30, max_size=30),
    st.integers(1, 5),
    st.data(),
)
def test_thread_siblings_against_a_model(tmp_path_factory, thread_of, candidate, max_size, data):
    """``thread_siblings`` (one kernel call for the documents asked) equals the thread lists: the
    other candidate members of a thread of 2 to ``max_size`` documents, in ingest order."""
    n = len(thread_of)
    docs = [{"id": f"d{i}", "text": "x"} | ({"thread": f"t{t}"} if t is not None else {}) for i, t in enumerate(thread_of)]
    with mempp.Store.open(tmp_path_factory.mktemp("sib") / "s", embedder=mempp.HashEmbedder(dim=4)) as s:
        s.add(docs[: n // 2])
        s.add(docs[n // 2 :])  # two segments: threads cross them
        snap = s.searcher().snapshot
        mask = np.array(candidate[:n], dtype=np.uint8)
        asked = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n), label="asked")
        siblings_of = thread_siblings(snap, mask, max_size, asked)
        for d in asked:
            t = thread_of[d]
            members = [i for i in range(n) if t is not None and thread_of[i] == t]
            want = [i for i in members if i != d and mask[i]] if 2 <= len(members) <= max_size else []
            assert list(siblings_of(d)) == want, (d, t)


def test_select_reserve_takes_only_qualifying_documents():
    dates = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
    order = [0, 1, 2, 3, 4, 5]
    # k=4: one place by order, 3 reserve slots; only 2 and 3 qualify: they are reserved, latest first.
    got = select(order, dates, NAT, 4, True, lambda d, place: d in (2, 3))
    assert got == [(0, False), (3, True), (2, True), (1, False)]


def _store(tmp_path):
    s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder())
    docs = [
        {"id": "e1", "text": "Proposal: move the payments cluster to the new region.", "author": "Ann", "date": "2023-01-01", "thread": "EMAIL"},
        {"id": "e2", "text": "Agreed, go ahead.", "author": "Bo", "date": "2023-01-02", "thread": "EMAIL"},
        {"id": "e3", "text": "Done, cut over on Friday.", "author": "Ann", "date": "2023-01-03", "thread": "EMAIL"},
    ] + [
        {"id": f"s{i}", "text": f"turn {i} about lunch and weather" + (" and the payments cluster" if i == 5 else ""),
         "author": "Cy", "date": f"2023-02-{i + 1:02d}", "thread": "SESSION"}
        for i in range(20)
    ] + [{"id": "thanks", "text": "Thanks!", "author": "Bo", "date": "2023-06-01"}]
    s.add(docs)
    return s


def test_small_threads_follow_a_hit_long_ones_do_not(tmp_path):
    with _store(tmp_path) as s:
        hits = s.query("payments cluster region", k=4, reserve=False, siblings=8, context=(), legs=["lexical"])
        keys = [h.key for h in hits]
        assert keys == ["e1", "s5", "e3", "e2"]  # e2, e3 share no word with the question: they came with e1
        assert hits[2].score == SIBLING_SHARE * hits[0].score  # (the later-ingested first on ties)
        # The 20-turn session is too long: s5 brings none of its turns.
        assert [h.key for h in s.query("payments cluster", k=4, reserve=False, siblings=8, context=(), legs=["lexical"])][:2] == ["s5", "e1"]
        off = [h.key for h in s.query("payments cluster region", k=4, reserve=False, siblings=0, context=(), legs=["lexical"])]
        assert off == ["e1", "s5"]


def test_reserve_spends_slots_only_on_relevant_documents(tmp_path):
    """With k <= 3 every slot is a reserve slot; a weak lexical match ("Thanks!") must not take one."""
    with _store(tmp_path) as s:
        relevant = s.query("where is the payments cluster?", k=3)
        assert "thanks" not in [h.key for h in relevant]
        assert all(h.key in ("e1", "s5") for h in relevant if h.reserved)
        paper = s.query("where is the payments cluster?", k=3, reserve_rule="paper", siblings=0)
        assert "thanks" in [h.key for h in paper]  # the paper's rule: the latest-dated matched document
