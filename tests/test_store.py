"""The Store API: round trips, re-ingest rules, versions by key, supersession, filters, reserve."""

from __future__ import annotations

import multiprocessing
from datetime import datetime, timezone

import numpy as np
import pytest

import mempp
from conftest import ORG


def test_round_trip_through_reopen(tmp_path):
    path = tmp_path / "org.mempp"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        ids = s.add(ORG)
        before = [(h.key, h.score, h.ranks) for h in s.query("uptime SLA", k=4)]
        emb = s.searcher().snapshot.segments[0].segment.embeddings.copy()
    assert ids == [0, 1, 2, 3]
    with mempp.Store.open(path) as s:  # the embedder comes back from the manifest
        assert len(s) == 4 and s.version == 1
        assert [(h.key, h.score, h.ranks) for h in s.query("uptime SLA", k=4)] == before
        rec = s.get("sla-1")
        assert rec.text == ORG[0]["text"] and rec.author == "Aisha Patel" and rec.thread == "EV-1"
        assert rec.date == datetime(2023, 1, 10, tzinfo=timezone.utc)
        assert rec.valid_until == datetime(2023, 6, 1, tzinfo=timezone.utc)
        assert s.get("undated").date is None
        np.testing.assert_array_equal(s.searcher().snapshot.segments[0].segment.embeddings, emb)


def test_meta_keeps_extra_fields_verbatim(store):
    store.add([{"id": "m", "text": "hello world", "scope": "conv-1", "answer": {"x": [1, 2]}, "meta": {"a": 1}}])
    assert store.get("m").meta == {"scope": "conv-1", "answer": {"x": [1, 2]}, "a": 1}


def test_idempotent_reingest(store):
    first = store.add(ORG)
    again = store.add([{**d, "text": "  " + d["text"].replace(" ", "\n ") + " "} for d in ORG])
    # sla-1 is superseded, yet replaying it must not bring it back: every row is the stored one.
    assert again == first
    assert store.version == 1
    assert store.get("sla-1").valid_until is not None


def test_a_revert_with_a_new_date_is_a_new_version(store):
    store.add([{"id": "p", "text": "v1", "date": "2023-01-01"}, {"id": "p", "text": "v2", "date": "2023-02-01"}])
    assert store.add([{"id": "p", "text": "v1", "date": "2023-01-01"}, {"id": "p", "text": "v2", "date": "2023-02-01"}]) == [0, 1]
    assert store.add([{"id": "p", "text": "v1", "date": "2023-03-01"}]) == [2]
    assert store.get("p").text == "v1" and store.get("p").doc_id == 2


def test_same_text_of_an_active_row_is_the_same_document_whatever_its_date(store):
    # docs/DESIGN.md §2.2: identical text of an active row of the same author -> the existing doc id.
    assert store.add([{"id": "a", "text": "budget approved", "author": "B", "date": "2022-01-01"}]) == [0]
    assert store.add([{"id": "a", "text": "budget approved", "author": "B", "date": "2022-05-01"}]) == [0]
    assert store.add([{"text": "x y", "id": "k"}, {"text": "x  y", "id": "k", "date": "2020-01-01"}]) == [1, 1]
    assert store.get("a").valid_until is None


def test_reingest_of_the_same_text_by_another_author_is_new(store):
    a = store.add([{"text": "same words", "author": "A"}])
    b = store.add([{"text": "same words", "author": "B"}])
    c = store.add([{"text": "same   words", "author": "A"}])
    assert a != b and c == a


def test_distinct_keys_are_distinct_documents(store):
    ids = store.add([{"id": "x", "text": "Thanks!", "author": "A"}, {"id": "y", "text": "Thanks!", "author": "A"}])
    assert ids == [0, 1]
    assert store.add([{"text": "Thanks!", "author": "A"}]) == [1]  # no key: the latest active twin


def test_empty_text_is_skipped(store):
    assert store.add([{"text": ""}, {"text": " \n\t "}, {"text": "x"}]) == [None, None, 0]


def test_same_key_new_text_is_a_new_version(store):
    store.add([{"id": "pol", "text": "Per diem is $75.", "author": "A", "date": "2023-01-01"}])
    store.add([{"id": "pol", "text": "Per diem is $60.", "author": "B", "date": "2023-05-01"}])
    assert store.get("pol").text == "Per diem is $60."
    assert [r.text for r in store.history("pol")] == ["Per diem is $75.", "Per diem is $60."]
    assert store.query("per diem", as_of="2023-04-30", k=5)[0].text == "Per diem is $75."
    assert [h.text for h in store.query("per diem", k=5)] == ["Per diem is $60."]


def test_supersede_api_and_effective_date(store):
    store.add([
        {"id": "a", "text": "on-call is weekly", "date": "2023-01-01"},
        {"id": "b", "text": "on-call is biweekly", "date": "2023-03-01"},
    ])
    store.supersede("a", "b", effective="2023-04-15")
    keys = lambda **kw: sorted(h.key for h in store.query("on-call", k=10, **kw))
    assert keys(as_of="2023-02-01") == ["a"]
    assert keys(as_of="2023-04-14") == ["a", "b"]  # b exists, a is not yet replaced
    assert keys(as_of="2023-04-15") == ["b"]
    assert keys() == ["b"]
    with pytest.raises(mempp.DocumentNotFound):
        store.supersede("a", "nope")
    with pytest.raises(mempp.ValidationError, match="effective"):
        store.supersede("a", "b", effective="not a date")


def test_as_of_date_means_end_of_day_and_excludes_undated(store):
    store.add(ORG)
    assert "sla-2" in {h.key for h in store.query("SLA", as_of="2023-06-01")}
    assert "sla-2" not in {h.key for h in store.query("SLA", as_of="2023-05-31T23:59:59")}
    assert "undated" not in {h.key for h in store.query("SLA", as_of="2030-01-01")}
    assert "undated" in {h.key for h in store.query("SLA")}


def test_filters(store):
    store.add(ORG)
    assert {h.key for h in store.query("SLA", authors="Ben Ortiz")} == {"sla-2", "lunch"}  # vector leg ranks both
    assert {h.key for h in store.query("uptime", authors=["Ben Ortiz"], legs=["lexical"])} == {"sla-2"}
    assert {h.key for h in store.query("anything", channels="chat")} == {"lunch"}
    assert {h.key for h in store.query("SLA", threads=["EV-1"], as_of="2023-03-01")} == {"sla-1"}
    assert list(store.query("SLA", authors=["Nobody"])) == []
    assert {h.key for h in store.query("SLA", date_from="2023-02-01", date_to="2023-02-01")} == {"lunch"}


def test_tag_leg_matches_full_first_and_last_names(store):
    store.add(ORG)
    for q in ("what did Ben Ortiz say?", "what did Ortiz say?", "what did ben say?"):
        hits = store.query(q, legs=["tag"], reserve=False)
        assert {h.author for h in hits} == {"Ben Ortiz"}, q
        assert hits.plan.matched_authors == ("Ben Ortiz",)
    # ranked by relevance to the question, not by recency alone
    hits = store.query("Ben lunch", legs=["tag"], reserve=False)
    assert hits[0].key == "lunch" and hits[0].ranks["tag"] == 0
    assert list(store.query("what did Bob say?", legs=["tag"])) == []


def test_ranks_and_reserve_in_hits(tmp_path):
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        docs = [{"id": f"d{i}", "text": f"budget review number {i} " + "budget " * (20 - i), "date": f"2023-01-{i + 1:02d}"}
                for i in range(20)]
        s.add(docs)
        hits = s.query("budget", k=6, legs=["lexical"], reserve_rule="paper")
        assert len(hits) == 6
        assert [h.reserved for h in hits] == [False] * 3 + [True] * 3
        fused = [h.key for h in hits[:3]]
        assert fused == ["d0", "d1", "d2"]  # most "budget" occurrences first
        assert [h.key for h in hits[3:]] == ["d19", "d18", "d17"]  # latest-dated matches
        assert all(h.ranks["lexical"] is not None and h.ranks["vector"] is None for h in hits)
        plain = s.query("budget", k=6, legs=["lexical"], reserve=False)
        assert [h.key for h in plain] == [f"d{i}" for i in range(6)]
        # The default rule: reserve slots only for strong lexical matches near the top of the list.
        relevant = s.query("budget", k=6, legs=["lexical"])
        assert [h.key for h in relevant[:3]] == ["d0", "d1", "d2"] and "d19" not in [h.key for h in relevant]


def test_precomputed_embeddings(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((3, 8)).astype(np.float32)
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(8)) as s:
        s.add([{"text": f"doc {i}"} for i in range(3)], embeddings=vecs)
        hits = s.query("", embedding=vecs[1] * 3, k=1, reserve=False, legs=["vector"])
        assert hits[0].doc_id == 1
        with pytest.raises(mempp.ValidationError, match="embedding"):
            s.query("x", embedding=np.ones(7))


def test_store_without_a_known_embedder_needs_vectors(tmp_path):
    class Custom:
        dim, model_id, max_tokens = 4, "my-model", 128

        def embed(self, texts, *, batch_size=32, progress=None):
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    with mempp.Store.open(tmp_path / "s", embedder=Custom()) as s:
        s.add([{"text": "a b"}])
    with mempp.Store.open(tmp_path / "s") as s:
        with pytest.raises(mempp.EmbedderError, match="my-model"):
            s.query("a")
        assert s.query("a", embedding=[1, 0, 0, 0])[0].text == "a b"
    with pytest.raises(mempp.EmbedderError):
        mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(4))


def test_query_edge_cases(store):
    store.add(ORG)
    assert list(store.query("SLA", k=0)) == []
    # clamped to the candidates, every one of them (the vector leg ranks them all): sla-1 is superseded
    assert sorted(h.key for h in store.query("SLA", k=10**9, depth=10**9)) == ["lunch", "sla-2", "undated"]
    assert list(store.query("  ", k=10)) == []  # no words and no vector: nothing to rank by
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(mempp.ValidationError, match="'k'"):
            store.query("SLA", k=bad)
    with pytest.raises(mempp.ValidationError, match="as_of"):
        store.query("SLA", as_of="yesterday")
    with pytest.raises(mempp.ValidationError, match="weights"):
        store.query("SLA", weights=(1, 1))
    with pytest.raises(mempp.ValidationError, match="legs"):
        store.query("SLA", legs=["semantic"])
    with pytest.raises(mempp.ValidationError, match="text"):
        store.query(None)


def test_empty_store_answers_nothing(tmp_path):
    with mempp.Store.open(tmp_path / "empty", embedder=mempp.HashEmbedder()) as s:
        assert list(s.query("anything")) == [] and s.version == 0 and s.stats()["documents"] == 0


def test_versions_and_time_travel(store, tmp_path):
    store.add(ORG[:2])
    store.add(ORG[2:])
    assert [v["version"] for v in store.versions()] == [1, 2]
    old = mempp.Store.open(store.path, version=1)
    assert len(old) == 2 and old.read_only
    with pytest.raises(mempp.StoreError, match="read-only"):
        old.add([{"text": "x"}])
    with pytest.raises(mempp.StoreError):
        mempp.Store.open(store.path, version=9)


def test_reader_sees_a_snapshot_until_refresh(store):
    store.add(ORG[:2])
    reader = mempp.Store.open(store.path, read_only=True)
    store.add(ORG[2:])
    assert len(reader) == 2
    assert reader.refresh() == 2 and len(reader) == 4


def _try_write(path, q):
    try:
        with mempp.Store.open(path) as s:
            s.add([{"text": "from another process"}])
        q.put("ok")
    except mempp.StoreLockedError as exc:
        q.put(f"locked: {exc}")


def test_one_writer_at_a_time(store):
    store.add(ORG[:1])  # takes the writer lock
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_try_write, args=(str(store.path), q))
    p.start()
    p.join(60)
    assert q.get(timeout=5).startswith("locked")
    store.close()
    p = ctx.Process(target=_try_write, args=(str(store.path), q))
    p.start()
    p.join(60)
    assert q.get(timeout=5) == "ok"


def test_typed_documents(store):
    ids = store.add([mempp.Document(text="typed doc", id="t1", author="A", date="2023-01-01", meta={"x": 1})])
    rec = store.get(ids[0])
    assert rec.key == "t1" and rec.meta == {"x": 1}


def test_query_batch_table(store):
    store.add(ORG)
    table = store.query_batch(["uptime SLA", "lunch"], k=2, as_of=[None, "2023-03-01"])
    assert table.column_names[:5] == ["query", "rank", "doc_id", "key", "score"]
    rows = table.to_pylist()
    assert [r["key"] for r in rows if r["query"] == 0] == [h.key for h in store.query("uptime SLA", k=2)]
    assert [r["key"] for r in rows if r["query"] == 1] == [h.key for h in store.query("lunch", k=2, as_of="2023-03-01")]


def test_format_evidence(store):
    store.add(ORG)
    text = mempp.format_evidence([store.get("sla-2"), store.get("undated")])
    assert text == (
        "[2023-06-01] Ben Ortiz (email, thread EV-1):\n" + ORG[2]["text"]
        + "\n\n[undated] Carla Diaz:\n" + ORG[3]["text"]
    )


def test_question_dates_bound_as_of_only_when_asked(store):
    store.add(ORG)
    q = "What was the uptime SLA in March 2023?"
    assert store.query(q, k=1, legs=["lexical"])[0].key == "sla-2"
    hits = store.query(q, k=1, legs=["lexical"], question_dates=True)
    assert hits[0].key == "sla-1" and hits.plan.as_of_from_question
    assert hits.plan.as_of.isoformat().startswith("2023-03-31T23:59:59")
    # an explicit as_of wins over the question's date
    assert store.query(q, k=1, legs=["lexical"], question_dates=True, as_of="2023-07-01")[0].key == "sla-2"


def test_question_date_parser():
    from datetime import date

    from mempp.question_dates import question_as_of

    assert question_as_of("as of 2023-03-12?") == date(2023, 3, 12)
    assert question_as_of("decided in March 2023") == date(2023, 3, 31)
    assert question_as_of("on 5 May 2023 and Feb 2023") == date(2023, 5, 5)
    assert question_as_of("March 3rd, 2024") == date(2024, 3, 3)
    assert question_as_of("the policy in 2022") == date(2022, 12, 31)
    assert question_as_of("the 99.9% SLA, ticket 12345") is None
    assert question_as_of("2023-02-30") is None


def test_big_batches_tokenized_aside_index_like_small_ones(tmp_path):
    """A batch of 2,000+ rows is tokenized in a thread while rows are matched; used only when every row is new."""
    import numpy as np

    rng = np.random.default_rng(3)
    words = ["Caroline's", "budget", "99.9", "don't", "launch", "w7", "café", "1,000.5", "team", "the"]
    docs = [{"text": " ".join(rng.choice(words, 6)) + f" doc{i}", "date": "2023-01-02"} for i in range(2600)]
    again = docs[:100] + [{"text": f"fresh text {i}"} for i in range(2400)]  # re-ingests: tokens of all rows unused

    def build(path, chunk):
        with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
            for part in (docs, again):
                for a in range(0, len(part), chunk):
                    s.add(part[a : a + chunk])
            snap = s.searcher().snapshot
            lengths = np.concatenate([e.segment.lengths for e in snap.segments])
            return dict(snap.term_ids), lengths, [h.doc_id for h in s.query("caroline budget 99.9", k=20, legs=("lexical",))]

    big = build(tmp_path / "big", 10_000)
    small = build(tmp_path / "small", 500)
    assert big[0] == small[0] and np.array_equal(big[1], small[1]) and big[2] == small[2]


def test_big_batches_tokenized_before_the_check_index_like_small_ones(tmp_path):
    """Plain records of a big batch are tokenized as soon as add() starts, before they are
    checked: empty and whitespace-only texts (None results) drop out of the counts, and a
    rejected batch writes nothing and raises the error of its first bad record."""
    import numpy as np

    rng = np.random.default_rng(5)
    words = ["budget", "99.9", "Caroline's", "team", "the", "naïve", "launch"]
    blanks = ["", " ", "\n\t", "\u3000", "\xa0 \u2003"]
    docs = []
    for i in range(3000):
        if i % 7 == 3:
            docs.append({"text": blanks[i % len(blanks)]})
        else:
            docs.append({"text": " ".join(rng.choice(words, 5)) + f" doc{i}", "date": "2023-01-02", "author": ["Ann", None][i % 2]})

    def build(path, chunk):
        with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
            ids = [x for a in range(0, len(docs), chunk) for x in s.add(docs[a : a + chunk])]
            snap = s.searcher().snapshot
            lengths = np.concatenate([e.segment.lengths for e in snap.segments])
            hits = [h.doc_id for h in s.query("caroline budget 99.9 naive", k=20, legs=("lexical",))]
            return ids, dict(snap.term_ids), lengths, hits

    big, small = build(tmp_path / "big", 3000), build(tmp_path / "small", 500)
    assert big[0] == small[0] and big[1] == small[1] and np.array_equal(big[2], small[2]) and big[3] == small[3]
    assert big[0].count(None) == sum(1 for d in docs if not d["text"].strip())

    with mempp.Store.open(tmp_path / "bad", embedder=mempp.HashEmbedder()) as s:
        bad = docs[:2500] + [{"text": "fine", "date": "not a date"}] + docs[2500:]
        with pytest.raises(mempp.ValidationError) as info:
            s.add(bad)
        assert (info.value.field, info.value.record) == ("date", 2500)
        assert len(s) == 0 and s.version == 0

    # Should a dropped record have had tokens, the kept rows' texts are tokenized again.
    from concurrent.futures import Future

    from mempp.storage.analyzer import tokenize
    from mempp.batches import tokens_of_rows

    done = Future()
    done.set_result(tokenize(["alpha beta", "gamma", "delta"]))
    got = tokens_of_rows(done, np.array([True, False, True]), lambda: ["alpha beta", "delta"])
    want = tokenize(["alpha beta", "delta"])
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2]


class _Record(dict):
    """A mapping that is not exactly a dict: add() checks it on the general path, all on this thread."""


@pytest.mark.parametrize("ids", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_big_batch_of_plain_records_stores_what_the_general_path_stores(tmp_path, seed, ids):
    """A big batch of plain dicts (checked while fingerprints, tokens, normalized embeddings and
    their int8 copy are made in threads; without ids, checked column by column and, when no
    fingerprint repeats, stored without the row loop) stores the same bytes as the same records
    checked one by one on the general path (only the ingestion time and commit time differ)."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    words = ["budget", "99.9", "Caroline's", "team", "the", "launch", "w7", "ok"] + (["naïve", "café"] if seed == 1 else [])
    n = 2500
    docs = []
    for i in range(n):
        d = {"text": " ".join(rng.choice(words, int(rng.integers(1, 30)))) if i % 11 else ["", "  ", "\t x  y "][i % 3]}
        if seed:  # every record a new row: what was made aside for the whole batch is used as it is
            d["text"] += f" doc{i}"
        if i % 3 == 0:
            d["date"] = f"2023-0{1 + i % 9}-1{i % 10}"
        if i % 4 == 1:
            d["author"] = ["Ann Lee", "", "Bob"][i % 3]
        if i % 5 == 2 and ids:
            d["id"] = f"k{i % 700}"  # repeated keys: new versions supersede the old
        docs.append(d)
    if not seed:
        docs[100] = dict(docs[50])  # an exact re-ingest inside the batch
    emb = rng.standard_normal((n, 8)).astype(np.float32) * 3
    emb[[0, 7]] = 0

    def build(path, records):
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=8)) as s:
            ids = s.add(records, embeddings=emb)
            ids += s.add(records[:300], embeddings=emb[:300])  # re-ingests of stored rows
        return ids

    if not ids:  # the column-by-column check takes the batch
        from mempp.ingest import check_plain

        assert check_plain(docs, [d["text"] for d in docs]) is not None
    fast = build(tmp_path / "fast", docs)
    slow = build(tmp_path / "slow", [_Record(d) for d in docs])
    assert fast == slow
    files = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast" / "segments").iterdir())
    assert files == sorted(p.relative_to(tmp_path / "slow") for p in (tmp_path / "slow" / "segments").iterdir())
    for name in files:
        a, b = (tmp_path / "fast" / name), (tmp_path / "slow" / name)
        if name.name.endswith((".docs.arrow", ".sup.arrow")):
            ta, tb = (pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in (a, b))
            if "effective" in ta.column_names:  # undated rows take effect when ingested
                ea, eb, ra, rb = (np.asarray(t.column(c).cast(pa.int64())) for t, c in ((ta, "effective"), (tb, "effective"), (ta, "recorded_at"), (tb, "recorded_at")))
                assert np.array_equal(ea == ra, eb == rb) and np.array_equal(ea[ea != ra], eb[eb != rb])
            times = ["ingested_at", "effective", "recorded_at"]
            assert ta.drop_columns([c for c in times if c in ta.column_names]).equals(tb.drop_columns([c for c in times if c in tb.column_names]))
            assert len(ta) > 0
        else:
            assert a.read_bytes() == b.read_bytes(), name


def test_big_batch_reports_the_embeddings_error_first(tmp_path):
    """With a bad record and a NaN in the embeddings, the embeddings error is raised (they are
    checked first), whichever thread normalizes them; nothing is written."""
    docs = [{"text": f"doc {i}"} for i in range(3000)]
    docs[10] = {"text": "bad", "date": "not a date"}
    emb = np.ones((3000, 8), dtype=np.float32)
    emb[2900, 3] = np.nan
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=8)) as s:
        for records in (docs, [_Record(d) for d in docs]):
            with pytest.raises(mempp.ValidationError) as info:
                s.add(records, embeddings=emb)
            assert (info.value.field, info.value.record) == ("embedding", 2900)
        emb[2900, 3] = 1
        with pytest.raises(mempp.ValidationError) as info:
            s.add(docs, embeddings=emb)
        assert (info.value.field, info.value.record) == ("date", 10)
        assert len(s) == 0 and s.version == 0
