"""The command line as a new user tries it: each behaviour that once surprised one, with its test.

ls, export and its round trip, --date-from/--date-to, author names whatever their case (and the
closest names when none matches), history's replacements, --explain's ranks and timings, an
interrupted add resumed without embedding again, eval's warnings.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mempp
from mempp.cli import main

DOCS = [
    {"id": "sla", "text": "Uptime SLA: 99.9%, approved by Aisha Patel.", "author": "Aisha Patel", "date": "2023-01-10",
     "thread": "ops-1", "channel": "email", "source": "mail", "priority": 2, "tags": ["sla", "ops"]},
    {"id": "travel-1", "text": "Travel per-diem is $75 a day.", "author": "Helen Brandt", "date": "2023-01-09", "channel": "wiki"},
    {"id": "note", "text": "Undated note: the SLA dashboard lives on the ops wiki.", "author": "Sam Lee"},
    {"text": "A document without an id about the uptime dashboard.", "author": "Sam Lee", "date": "2023-02-01"},
]
LATER = [
    {"id": "sla", "text": "SLA raised to 99.95%.", "author": "Ben Ortiz", "date": "2023-06-01", "thread": "ops-1"},  # a new version
    {"id": "travel-2", "text": "Travel per-diem raised to $90 a day.", "author": "Helen Brandt", "date": "2023-07-01", "supersedes": "travel-1"},
    {"id": "sla-legacy", "text": "SLA back to 99.9% for the legacy region.", "author": "Ben Ortiz", "date": "2023-12-01"},
]
QUESTIONS = ["what is the uptime SLA?", "travel per-diem", "ops wiki dashboard", "Sam Lee", "legacy region"]
AS_OFS = [None, "2023-03-01", "2023-06-15", "2023-12-31", "2024-06-01"]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "org.mempp"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as store:
        store.add(DOCS)
        store.add(LATER)
        store.supersede("sla", "sla-legacy", effective="2024-01-01")  # an explicit supersession with its own date
    return path


def answers(path) -> list:
    out = []
    with mempp.Store.open(path, read_only=True) as store:
        for q in QUESTIONS:
            for as_of in AS_OFS:
                for authors in (None, ["sam lee"]):
                    hits = store.query(q, as_of=as_of, k=5, authors=authors)
                    out.append([(h.doc_id, h.key, round(h.score, 12), h.ranks, h.reserved, h.valid_until) for h in hits])
        out.append([(r.doc_id, r.key, r.text, r.author, r.date, r.thread, r.channel, r.source, r.meta, r.valid_until)
                    for r in store.documents()])
        snap = store.searcher().snapshot
        out.append(sorted(map(tuple, zip(*(np.asarray(a).tolist() for a in (snap.sup_old, snap.sup_new, snap.sup_effective))))))
    return out


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_export_then_add_answers_every_query_identically(store_path, tmp_path, capsys, suffix):
    out = tmp_path / f"org.{suffix}"
    rc, said, _ = cli(capsys, "export", str(store_path), "--out", str(out))
    assert rc == 0 and "7 documents" in said
    copy = tmp_path / "copy.mempp"
    rc, said, _ = cli(capsys, "add", str(copy), str(out), "--quiet")
    assert rc == 0 and "7 added" in said and "nothing embedded" in said, said
    assert answers(copy) == answers(store_path)
    with mempp.Store.open(copy, read_only=True) as store:
        assert store.stats()["embedder"]["model_id"].startswith("hash-")  # the export's model, not the default
    rc, said, _ = cli(capsys, "add", str(copy), str(out), "--quiet")  # again: everything is already stored
    assert rc == 0 and "0 added, 7 already stored, 0 supersessions" in said, said
    assert answers(copy) == answers(store_path)


def test_store_export_is_the_parquet_export_as_a_table(store_path, tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "org.parquet"
    cli(capsys, "export", str(store_path), "--out", str(out))
    with mempp.Store.open(store_path, read_only=True) as store:
        table = store.export()
        assert table.num_rows == 7 and table.equals(store.searcher().export(), check_metadata=True)
    written = pq.read_table(out)  # Parquet names a list's child "element" where Arrow says "item"
    assert written.schema.metadata == table.schema.metadata and table.equals(written.cast(table.schema))
    with mempp.Store.open(tmp_path / "empty", embedder=mempp.HashEmbedder()) as empty:
        assert empty.export().num_rows == 0


def test_export_format_rows(store_path, tmp_path, capsys):
    out = tmp_path / "org.jsonl"
    cli(capsys, "export", str(store_path), "--out", str(out))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["mempp_export"]["format"] == 1 and lines[0]["mempp_export"]["documents"] == 7
    rows = lines[1:]
    assert [r["doc_id"] for r in rows] == list(range(7))
    first = rows[0]
    assert first["id"] == "sla" and first["meta"] == {"priority": 2, "tags": ["sla", "ops"]} and first["thread"] == "ops-1"
    assert first["valid_until"] == "2023-06-01T00:00:00+00:00"
    assert [(e["doc_id"], e["effective"][:10]) for e in first["replaced_by"]] == [(4, "2023-06-01")]
    undated = rows[2]
    assert undated["date"] is None and undated["valid_until"] is None
    new_sla = rows[4]
    assert [(e["doc_id"], e["effective"][:10]) for e in new_sla["replaced_by"]] == [(6, "2024-01-01")]
    assert len(first["embedding"]) == mempp.HashEmbedder().dim


def test_ls_lists_documents_by_author_and_date(store_path, capsys):
    rc, said, _ = cli(capsys, "ls", str(store_path))
    assert rc == 0 and said.strip().endswith("7 documents")
    rc, said, _ = cli(capsys, "ls", str(store_path), "--as-of", "2023-03-01", "--author", "helen BRANDT")
    assert rc == 0 and "travel-1" in said and "travel-2" not in said and said.strip().endswith("1 documents valid at 2023-03-01")
    rc, said, _ = cli(capsys, "ls", str(store_path), "--json", "--as-of", "2023-12-31")
    keys = [json.loads(x)["key"] for x in said.splitlines()]
    assert keys == [None, "sla", "travel-2", "sla-legacy"]  # the undated note is left out with a date


def test_query_date_range(store_path, capsys):
    rc, said, _ = cli(capsys, "query", str(store_path), "per-diem", "--date-from", "2023-06-01", "--date-to", "2023-07-01", "--json")
    assert rc == 0 and [h["key"] for h in json.loads(said)["hits"]] == ["travel-2"]
    rc, _, err = cli(capsys, "query", str(store_path), "per-diem", "--date-from", "June")
    assert rc == 1 and "date_from" in err


def test_author_names_match_whatever_their_case_and_no_match_suggests(store_path, capsys):
    rc, said, _ = cli(capsys, "query", str(store_path), "dashboard", "--author", "sam lee", "--json")
    assert rc == 0 and {h["author"] for h in json.loads(said)["hits"]} == {"Sam Lee"}
    rc, out, err = cli(capsys, "query", str(store_path), "dashboard", "--author", "Sam Le")
    assert rc == 1 and out == "" and "no author named 'Sam Le' (closest: Sam Lee)" in err
    rc, out, err = cli(capsys, "query", str(store_path), "dashboard", "--author", "sam lee", "--author", "Nobody Atall")
    assert rc == 0 and "warning: no author named 'Nobody Atall'" in err and "Sam Lee" in out
    with mempp.Store.open(store_path, read_only=True) as store:
        assert [h.author for h in store.query("dashboard", authors="SAM  LEE")] == ["Sam Lee", "Sam Lee"]


def test_history_says_what_replaced_each_version(store_path, capsys):
    rc, said, _ = cli(capsys, "history", str(store_path), "sla")
    versions = [json.loads(x) for x in said.splitlines()]
    assert [(v["doc_id"], [(r["key"], r["effective"][:10]) for r in v["replaced_by"]]) for v in versions] == [
        (0, [("sla", "2023-06-01")]), (4, [("sla-legacy", "2024-01-01")])
    ]


def test_explain_ranks_from_one_and_per_stage_timings(store_path, capsys):
    rc, said, _ = cli(capsys, "query", str(store_path), "travel per-diem", "--explain", "--k", "2")
    with mempp.Store.open(store_path, read_only=True) as store:
        hits = store.query("travel per-diem", k=2)
    first = [x for x in said.splitlines() if x.startswith("1. ")][0]
    assert f"lexical={hits[0].ranks['lexical'] + 1}" in first
    timing = [x for x in said.splitlines() if x.startswith("# timings")][0]
    stages = dict(part.rsplit(" ", 1) for part in timing.split(": ", 1)[1].split("; ")[0].split(", "))
    assert list(stages) == ["candidates", "lexical", "tag", "vector", "fusion"]  # every stage, each timed on its own
    total = float(timing.rsplit("total ", 1)[1])
    assert abs(sum(float(v) for v in stages.values()) - total) < 0.05


def test_eval_warns_about_questions_it_cannot_score(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in [
        {"id": "a:1", "scope": "a", "text": "The uptime SLA is 99.9%.", "author": "Aisha", "date": "2023-01-10"},
        {"id": "a:2", "scope": "a", "text": "Travel per-diem is $75.", "author": "Helen", "date": "2023-01-11"},
    ]))
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in [
        {"id": "q1", "scope": "a", "text": "uptime SLA?", "evidence": ["a:1"]},
        {"id": "q2", "scope": "a", "text": "anything?", "evidence": []},
        {"id": "q3", "scope": "b", "text": "SLA?", "evidence": ["b:1"]},
        {"id": "q4", "scope": "a", "text": "per-diem?", "evidence": ["a:9"]},
    ]))
    rc, out, err = cli(capsys, "eval", "--docs", str(docs), "--questions", str(questions), "--k", "10", "--embedder", "hash", "--quiet", "--json")
    assert rc == 0
    assert "warning: 1 questions carry no evidence and are not scored (q2)" in err
    assert "warning: 1 questions ask scope 'b', which has no documents: each scores 0 (q3)" in err
    assert "warning: 1 questions of scope 'a' name evidence no document of that scope has (q4)" in err
    report = json.loads(out)
    assert report["questions"] == 3 and len(report["warnings"]) == 3
    questions.write_text(json.dumps({"id": "q2", "scope": "a", "text": "anything?", "evidence": []}) + "\n")
    rc, out, err = cli(capsys, "eval", "--docs", str(docs), "--questions", str(questions), "--embedder", "hash", "--quiet")
    assert rc == 1 and out == "" and "no question carries evidence" in err


class CountingEmbedder(mempp.HashEmbedder):
    """A hash embedder that counts the documents it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    def embed(self, texts, batch_size=32, progress=None):
        self.embedded += len(texts)
        return super().embed(texts, batch_size=batch_size, progress=progress)


def test_adding_again_embeds_only_what_is_missing(tmp_path):
    docs = [{"id": f"d{i}", "text": f"turn {i}: we talked about topic {i} at length", "author": "Sam Lee", "date": f"2023-01-{1 + i % 28:02d}"}
            for i in range(30)]
    emb = CountingEmbedder()
    with mempp.Store.open(tmp_path / "s", embedder=emb) as store:
        first = store.add(docs[:20])  # an interrupted add: the first 20 committed
        assert emb.embedded == 20
        again = store.add(docs)  # the whole file again
        assert emb.embedded == 30  # only the 10 missing were embedded
        assert list(again[:20]) == list(first) and again.new == 10 and again.existing == 20
        store.add([{"id": "d0", "text": "turn 0, revised", "author": "Sam Lee", "date": "2023-02-01"}])  # d0 superseded
        n = emb.embedded
        replay = store.add(docs)  # a replay: the superseded d0 (same id and date) stays a re-ingest, nothing embedded
        assert emb.embedded == n and replay.new == 0 and replay[0] == first[0]
        assert store.get("d0").text == "turn 0, revised"
    with mempp.Store.open(tmp_path / "ref", embedder=mempp.HashEmbedder()) as ref:
        ref.add(docs)
        with mempp.Store.open(tmp_path / "s", read_only=True) as store:
            for q in ("topic 7", "talked at length", "turn 25"):
                assert [h.key for h in store.query(q, k=5, as_of="2023-01-31")] == [h.key for h in ref.query(q, k=5, as_of="2023-01-31")]


def test_cli_add_resumes_and_its_progress_says_what_is_committed(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": f"note {i} about the release plan", "author": "Ben Ortiz", "date": "2023-03-01"} for i in range(12)]
    docs.write_text("".join(json.dumps(d) + "\n" for d in rows[:7]))
    cli(capsys, "add", str(tmp_path / "s"), str(docs), "--embedder", "hash", "--quiet")
    docs.write_text("".join(json.dumps(d) + "\n" for d in rows))
    rc, out, err = cli(capsys, "add", str(tmp_path / "s"), str(docs), "--batch-size", "5")
    assert rc == 0 and "5 added, 7 already stored, 0 empty skipped; 12 documents at version" in out and out.strip().endswith("; 5 embedded")
    assert "12/12 docs" in err and "12 committed (5 new, 7 already stored)" in err
