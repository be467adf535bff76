"""The chain stage (``mempp.chain``) against a plain Python model of its rule, and end to end:
a document that shares a rare identifier with the first hit, and no word with the question, rises;
it never brings in a document no leg ranked (so never one invalid at the query's date)."""

from __future__ import annotations

import math
import re
import random
from collections import Counter

import numpy as np

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
import mempp.chain as chain
from mempp.chain import chain_lift
from mempp.lexical import term_dfs

COMMON = ["outage", "login", "budget", "review", "team", "update", "plan", "release"]
IDS = ["inc 0106", "eng 6091", "acme", "zenith", "nova", "eng 4603", "item 12", "12"]


def model(store: mempp.Store, fused: dict[int, float], hits: int, question: str) -> dict[int, float]:
    """The rule of mempp.chain, written out: frequencies and BM25 from the documents' own texts."""
    snap = store.searcher().snapshot
    an = snap.analyzer
    terms = {d: an.terms(snap.row(d)["text"]) for d in range(snap.n_docs)}
    df = Counter(t for ts in terms.values() for t in set(ts))
    n = snap.n_docs
    avgdl = sum(len(ts) for ts in terms.values()) / n
    most = max(chain.CHAIN_MIN_DF, int(chain.CHAIN_DF_SHARE * n))
    exclude = set(an.terms(question))
    order = sorted(fused, key=lambda d: (-fused[d], -d))

    def bm25(d: int, rare: list[str]) -> float:
        tf = Counter(terms[d])
        out = 0.0
        for t in rare:
            if tf[t]:
                idf = math.log1p((n - df[t] + 0.5) / (df[t] + 0.5))
                out += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(terms[d]) / avgdl))
        return out

    lifted = dict(fused)
    for h in order[:hits]:
        if len(terms[h]) < chain.CHAIN_MIN_LENGTH:
            continue
        rare = sorted((t for t in set(terms[h]) - exclude if 2 <= df[t] <= most and not (len(t) <= 2 and t.isdigit())), key=lambda t: (df[t], snap.term_ids[t]))[: chain.CHAIN_TERMS]
        own = bm25(h, rare)
        if not rare or own <= 0:
            continue
        for d in order:
            if d != h and bm25(d, rare) >= chain.CHAIN_MIN_MATCH * own * (1 - 1e-12):
                lifted[d] = max(lifted[d], chain.CHAIN_SHARE * fused[h])
    return lifted


texts = st.lists(
    st.lists(st.sampled_from(COMMON + IDS), min_size=1, max_size=8).map(" ".join), min_size=3, max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts, st.integers(1, 4), st.randoms(use_true_random=False), st.sampled_from(["", "login outage", "acme budget"]), st.sampled_from([1, 2, 8]), st.sampled_from([0, 4]))
def test_chain_lift_is_the_model(tmp_path_factory, docs, hits, rnd, question, cap, shortest):
    path = tmp_path_factory.mktemp("chain")
    saved = chain.CHAIN_TERMS, chain.CHAIN_MIN_LENGTH
    chain.CHAIN_TERMS, chain.CHAIN_MIN_LENGTH = cap, shortest  # short texts here: the length rule binds at 4, not at 0
    try:
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=16)) as store:
            store.add([{"text": f"{t} n{i}", "date": "2023-01-01"} for i, t in enumerate(docs)])
            snap = store.searcher().snapshot
            ranked = rnd.sample(range(len(docs)), rnd.randint(1, len(docs)))
            fused = {d: rnd.choice([0.01, 0.02, 0.03]) + 1e-4 * i for i, d in enumerate(ranked)}
            order = sorted(fused, key=lambda d: (-fused[d], -d))
            got, pulled = chain_lift(snap, fused, order, hits, question)
            want = model(store, fused, hits, question)
            assert set(got) == set(fused)  # only documents a leg ranked
            for d in fused:
                assert got[d] == pytest.approx(want[d], rel=1e-9), d
            for h, ds in pulled.items():
                assert h in order[:hits] and all(got[d] == pytest.approx(chain.CHAIN_SHARE * fused[h]) or got[d] > chain.CHAIN_SHARE * fused[h] for d in ds)
    finally:
        chain.CHAIN_TERMS, chain.CHAIN_MIN_LENGTH = saved


def _store(path):
    store = mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=64))
    rng = random.Random(0)
    filler = [
        {"text": f"Weekly update {i}: a root cause review of the numbers; drills are planned.", "author": "Ann Lee", "date": "2022-03-01"}
        for i in range(30)
    ] + [{"text": f"Note {i}: {' '.join(rng.sample(COMMON[2:], 4))}", "date": "2022-03-02"} for i in range(40)]
    store.add([
        {"id": "pm", "text": "Postmortem INC-2022-0106: login outage on Lattice. Root cause: a memory leak in media-store.", "author": "Shirin Ortega", "date": "2022-01-10"},
        {"id": "tk", "text": "ENG-6091: the INC-2022-0106 follow-ups show the explanation does not hold; the logs show cache growth.", "author": "Felix Pemberton", "date": "2022-02-02"},
        {"id": "late", "text": "Retro of INC-2022-0106 and ENG-6091 after the quarter.", "author": "Freya Patel", "date": "2022-09-01"},
        *filler,
    ])
    return store


QUESTION = "Why was the root cause of the Lattice login outage revised?"


def test_a_shared_identifier_lifts_a_document_the_question_does_not_name(tmp_path, monkeypatch):
    monkeypatch.setattr(chain, "CHAIN_MIN_LENGTH", 0)  # these hits are short
    with _store(tmp_path / "s") as store:
        ask = dict(k=20, as_of="2022-06-30", weights=(2, 1, 0.01), depth=100)  # every document ranked by the vector leg
        off = [h.key for h in store.query(QUESTION, chain=0, **ask)]
        hits = store.query(QUESTION, chain=3, **ask)
        on = [h.key for h in hits]
        assert off[0] == on[0] == "pm"
        assert "tk" in on and ("tk" not in off or on.index("tk") < off.index("tk"))
        assert hits[on.index("tk")].score == pytest.approx(chain.CHAIN_SHARE * hits[0].score)
        pm, tk = (store.searcher().doc_ids(key)[0] for key in ("pm", "tk"))
        assert tk in hits.plan.chained[pm]
        assert "late" not in on  # dated after the as-of date: no leg ranked it, so nothing lifts it
        assert str(pm) in hits.plan.to_dict()["chained"]


def test_chain_off_is_the_answer_without_the_stage(tmp_path):
    with _store(tmp_path / "s") as store:
        a = store.query(QUESTION, k=8, chain=0)
        assert not a.plan.chained
        b = store.query(QUESTION, k=8)  # the default
        assert [h.key for h in a] == [h.key for h in b] or mempp.config.DEFAULT_CHAIN


def test_chain_is_an_option_checked_like_the_others(tmp_path):
    with _store(tmp_path / "s") as store:
        for bad in (-1, 1.5, "3", True):
            with pytest.raises(mempp.ValidationError, match="chain"):
                store.query(QUESTION, chain=bad)


def test_shards_and_batch_agree_with_one_query(tmp_path):
    with _store(tmp_path / "s") as store:
        one = [[h.key for h in store.query(q, k=6, chain=3)] for q in (QUESTION, "ENG-6091 cache growth")]
        rows = store.query_batch([QUESTION, "ENG-6091 cache growth"], k=6, chain=3).to_pylist()
        batch = [[r["key"] for r in sorted((r for r in rows if r["query"] == i), key=lambda r: r["rank"])] for i in range(2)]
        assert batch == one and all(len(x) == 6 for x in one)


def test_a_hit_pulls_the_document_dated_on_a_day_it_names(tmp_path, monkeypatch):
    """The decision e-mail names the meeting's day in another format; the meeting shares a few
    words with the e-mail (too few for the rare-term rule) and none of the question's, and it is
    dated that day; a meeting of another day sharing as much is not pulled."""
    monkeypatch.setattr(chain, "CHAIN_MIN_LENGTH", 0)  # these hits are short
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=64)) as store:
        store.add([
            {"id": "mail", "text": "Subject: API call limit for Nova Hub. After the Product review on 9 June 2022 we decided to cap API calls at 600 a minute.",
             "date": "2022-06-10"},
            {"id": "meet", "text": "Product review notes. Attendees Carmen, Freya, Marco.", "date": "2022-06-09"},
            {"id": "other", "text": "Roadmap for the quarter. Attendees Carmen, Freya, Marco.", "date": "2022-06-08"},
            *({"text": f"Status {i}: product review of the limit", "date": "2022-05-01"} for i in range(30)),
        ])
        ask = dict(k=20, weights=(2, 1, 0.01), depth=100)
        q = "Who decided the limit on API calls?"
        before = {h.key: h.score for h in store.query(q, chain=0, **ask)}
        hits = store.query(q, chain=1, **ask)
        assert hits[0].key == "mail"
        got = {h.key: h.score for h in hits}
        assert got["meet"] == pytest.approx(chain.CHAIN_SHARE * hits[0].score)
        assert got["meet"] > before.get("meet", 0.0)
        assert got.get("other", 0.0) == before.get("other", 0.0)
        mail, meet = (store.searcher().doc_ids(key)[0] for key in ("mail", "meet"))
        assert hits.plan.chained == {mail: [meet]}


def _referencing_store(path):
    store = mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=64))
    store.add([
        {"id": "decision", "text": "We move the Harbor uptime commitment to 99.95 from July.", "date": "2023-06-01"},
        {"id": "why", "text": "Two customers escalated after the spring incidents; finance agreed to the credits.", "date": "2023-05-20",
         "references": ["decision"]},  # it explains the decision: found when the decision is
        {"id": "later", "text": "Follow-up on the credits paid out.", "date": "2023-09-01", "references": "decision"},
        *({"text": f"Note {i}: uptime figures for the month, uptime dashboards", "date": "2023-04-01"} for i in range(30)),
    ])
    return store


def test_references_link_both_ways_and_only_within_the_as_of_date(tmp_path):
    """References link whatever the hit's length (these are all short)."""
    with _referencing_store(tmp_path / "s") as store:
        ask = dict(k=20, weights=(2, 1, 0.01), depth=100, as_of="2023-07-01")
        q = "Harbor uptime commitment"
        hits = store.query(q, chain=1, **ask)
        keys = [h.key for h in hits]
        assert keys[0] == "decision" and "why" in keys and "later" not in keys  # later: after the as-of date
        assert hits[keys.index("why")].score == pytest.approx(chain.CHAIN_SHARE * hits[0].score)
        assert "why" not in [h.key for h in store.query(q, chain=0, **ask)][:2]
        # the other way: a hit that names what it answers lifts that document
        hits = store.query("escalated customers spring incidents credits", chain=1, **ask)
        assert hits[0].key == "why" and hits[1].key == "decision"
        assert store.get("why").meta["references"] == ["decision"]
        assert store.get("later").meta["references"] == ["decision"]  # one id is kept as a list of one


@pytest.mark.parametrize("bad", [[""], "  ", [1], {"a": 1}, ["ok", None]])
def test_bad_references_name_the_field_and_record(tmp_path, bad):
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=16)) as store:
        store.add([{"id": "a", "text": "kept"}])
        with pytest.raises(mempp.ValidationError, match="references") as err:
            store.add([{"id": "b", "text": "fine"}, {"id": "c", "text": "bad", "references": bad}])
        assert err.value.record == 1
        assert store.stats()["documents"] == 1


def test_a_short_hit_pulls_nothing(tmp_path):
    """A hit of fewer than CHAIN_MIN_LENGTH index terms (a chat turn) names things in passing."""
    with _store(tmp_path / "s") as store:
        hits = store.query(QUESTION, k=20, as_of="2022-06-30", weights=(2, 1, 0.01), depth=100, chain=3)
        assert hits[0].key == "pm" and store.searcher().snapshot.lengths[hits[0].doc_id] < chain.CHAIN_MIN_LENGTH
        assert not hits.plan.chained


def test_the_command_line_takes_references_and_explains_the_chain(tmp_path):
    import json
    import subprocess
    import sys

    def run(*args, check=True):
        proc = subprocess.run([sys.executable, "-m", "mempp", *args], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 or not check, proc.stderr
        return proc

    docs = tmp_path / "docs.jsonl"
    rows = [
        {"id": "decision", "text": "We move the Harbor uptime commitment to 99.95 from July.", "date": "2023-06-01"},
        {"id": "why", "text": "Two customers escalated after the spring incidents.", "date": "2023-05-20", "references": ["decision"]},
        *({"id": f"n{i}", "text": f"Note {i}: uptime figures for the month", "date": "2023-04-01"} for i in range(12)),
    ]
    docs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    store = str(tmp_path / "s")
    run("add", store, str(docs), "--embedder", "hash", "--quiet")
    text = run("query", store, "Harbor uptime commitment", "--explain", "--k", "5").stdout
    assert re.search(r"# chained: doc 0 lifted docs .*\b1\b", text), text
    assert "# chained" not in run("query", store, "Harbor uptime commitment", "--explain", "--k", "5", "--chain", "0").stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "text": "a reply", "references": [""]}) + "\n")
    err = run("add", store, str(bad), "--quiet", check=False)
    assert err.returncode != 0 and "references" in err.stderr and len(err.stderr.strip().splitlines()) == 1


def test_many_threads_querying_with_a_small_cache_answer_as_one(tmp_path, monkeypatch):
    """The per-segment caches of hits' terms are bounded; threads filling and trimming them at
    once answer as a single thread does."""
    import concurrent.futures

    monkeypatch.setattr(chain, "DOC_TERMS_KEPT", 2)
    monkeypatch.setattr(chain, "CHAIN_MIN_LENGTH", 0)
    with _store(tmp_path / "s") as store:
        questions = [QUESTION, "cache growth logs", "memory leak media-store", "drills planned numbers"] * 5
        want = [[h.key for h in store.query(q, k=8)] for q in questions]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda q: [h.key for h in store.query(q, k=8)], questions))
        assert got == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts, st.lists(st.booleans(), min_size=40, max_size=40))
def test_a_readers_frequencies_are_its_documents_own(tmp_path_factory, docs, hidden):
    """A reader's term frequencies (counted once per view), as the chain stage reads them
    (``lexical.term_dfs``), are those of its readable documents' own texts."""
    path = tmp_path_factory.mktemp("reader-df")
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=16)) as store:
        store.add([{"text": f"{t} n{i}", "readers": ["group:hr"] if hidden[i] else None} for i, t in enumerate(docs)])
        view = store.searcher().reader("user:zed").snapshot
        if not hasattr(view, "reader_df"):
            return  # nothing hidden: the reader reads the store itself
        ids = np.arange(len(view.term_ids), dtype=np.int64)
        an, readable = view.analyzer, view.readable
        exact = Counter(view.term_ids[t] for d in range(view.n_docs) if readable[d] for t in set(an.terms(view.row(d)["text"])))
        want = np.array([exact[i] for i in ids.tolist()], dtype=np.int64)
        assert np.array_equal(view.reader_df(ids), want)
        assert np.array_equal(term_dfs(view, ids), want)


@pytest.mark.parametrize("gap", [0, 1, 20, 26, 30, 33, 40, 90])
def test_every_day_a_text_names_is_found_whatever_lies_between(gap):
    """Two full dates at any distance: the second is found even when its year falls near the edge of
    the window searched around the first."""
    from mempp.question_dates import days_named

    from datetime import date

    text = "on 2021-01-05" + " " * gap + " 2023-03-12." + " " * 100 + "Then March 4, 2024 and 9 June 2022 (and 2019 alone)"
    assert days_named(text) == {date(2021, 1, 5), date(2023, 3, 12), date(2024, 3, 4), date(2022, 6, 9)}


def test_year_like_numbers_inside_words_name_no_day():
    """A number glued to letters or digits ("w2023", "ID-20231", "x2023-03-12") is no year: only the
    dates written apart are found, however many such words lie around them."""
    from datetime import date

    from mempp.question_dates import days_named

    noise = " ".join(f"w{y} {y}1 A{y}" for y in range(1990, 2030))
    text = f"{noise} on 2021-01-05, x2023-03-12 and 12 March 2023x; {noise} then March 4, 2024. {noise}"
    assert days_named(text) == {date(2021, 1, 5), date(2024, 3, 4)}
