"""The diagnostic benchmarks: the stage timer and the missed-evidence table, on small inputs.

Neither asserts a time: they must run against the engine as it is (a stage renamed or moved makes
the stage timer fail, not time nothing), restore what they wrap, and count what they say they count.
"""

from __future__ import annotations

import json

import mempp
from mempp.bench import misses, stages


def test_the_stage_timer_times_every_stage_it_names_and_restores_them(tmp_path, monkeypatch):
    import importlib

    monkeypatch.setenv("PERF_DATA", str(tmp_path / "data"))
    before = {(m, n): getattr(importlib.import_module(f"mempp.{m}"), n) for m, n in stages.STAGES}
    per_query, times = stages.measure(2000, tmp_path / "stores", 20)
    assert per_query > 0
    # every stage a default query reaches is timed (the tag leg's order only runs for a question naming
    # an author, which the workload's never do)
    reached = {f"{m}.{n}" for m, n in stages.STAGES} - {"planner.tag_order"}
    assert reached <= set(times) and all(times[s] > 0 for s in reached)
    assert times["planner.vector_leg"] >= times["vector.rescore_best_first"]  # nested: the outer holds the inner
    assert {(m, n): getattr(importlib.import_module(f"mempp.{m}"), n) for m, n in stages.STAGES} == before


def test_misses_counts_each_missed_evidence_document_once_by_its_place(tmp_path):
    """A corpus where the answer at k = 2 must miss some evidence: every miss is counted once in each
    ranking's row, and a place is put in the bucket it names."""
    docs = [{"id": f"d{i}", "scope": "s", "text": f"budget review item {i} " + ("vendor " * (i % 3)), "author": "Ann Lee",
             "date": f"2024-01-{1 + i:02d}"} for i in range(12)]
    questions = [
        {"id": "q1", "scope": "s", "text": "budget vendor", "category": "c1", "evidence": ["d1", "d2", "d4", "d5"]},
        {"id": "q2", "scope": "s", "text": "review item 7", "category": "c2", "evidence": ["d7", "d11"]},
        {"id": "q3", "scope": "s", "text": "unscored", "category": "c1"},
    ]
    dpath, qpath = tmp_path / "docs.jsonl", tmp_path / "questions.jsonl"
    dpath.write_text("".join(json.dumps(d) + "\n" for d in docs))
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions))
    rows = misses.ranks(dpath, qpath, mempp.HashEmbedder(dim=32), set(), 2)
    assert [r["id"] for r in rows] == ["q1", "q2"]  # scored questions only
    for r in rows:
        assert all(len(p) == len(r["evidence"]) for p in r["places"].values())
        assert sum(p is not None for p in r["places"]["answer"]) <= 2
        fused = r["places"]["fused (every default, k = 200)"]
        assert all(p is not None for p in fused)  # twelve documents: every one is in a list of 200
    only_c2 = misses.ranks(dpath, qpath, mempp.HashEmbedder(dim=32), {"c2"}, 2)
    assert [r["id"] for r in only_c2] == ["q2"]
    n_missed = sum(p is None for r in rows for p in r["places"]["answer"])
    text = misses.table(rows)
    assert text.startswith(f"{n_missed} of 6 evidence documents missed")
    for line in text.splitlines()[4:]:
        cells = [int(c) for c in line.strip("|").split("|")[1:]]
        assert sum(cells) == n_missed, line


def test_bucket_edges():
    assert [misses.bucket(p) for p in (0, 9, 10, 19, 20, 49, 50, 199, None)] == [
        "first 10", "first 10", "11-20", "11-20", "21-50", "21-50", "51-200", "51-200", "not in 200"]


def test_the_stage_cost_bench_builds_threads_and_compares_context_on_and_off(tmp_path, monkeypatch, capsys):
    from mempp.bench import feedback_cost

    monkeypatch.setenv("PERF_DATA", str(tmp_path / "data"))
    assert feedback_cost.main(["2000", str(tmp_path / "s"), "context=default,off", "--threads", "6"]) == 0
    out = capsys.readouterr().out
    assert "context=default: single query p50" in out and "context=off: single query p50" in out
    assert "context=default against off" in out
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        snap = s.searcher().snapshot
        assert snap.has_threads
        prev, nxt = snap.thread_links
        assert nxt[0] == 1 and nxt[5] == -1 and prev[6] == -1  # runs of six consecutive documents
