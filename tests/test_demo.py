"""The bundled demo corpus is well formed and the demo answers change with as_of."""

from __future__ import annotations

from datetime import date

from mempp.demo import demo_data, run_demo
from mempp.embedder import HashEmbedder


def test_demo_data_is_consistent():
    docs, questions = demo_data()
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids)) and 140 <= len(docs) <= 160
    by_id = {d["id"]: d for d in docs}
    assert len({d["author"] for d in docs}) >= 10
    revisions = [d for d in docs if d.get("supersedes")]
    assert len(revisions) >= 10
    for d in revisions:
        for old in d["supersedes"]:
            assert by_id[old]["author"] != d["author"] and by_id[old]["date"] <= d["date"]
    first, last = date.fromisoformat(docs[0]["date"][:10]), date.fromisoformat(docs[-1]["date"][:10])
    assert (last - first).days >= 500
    assert 12 <= len(questions) and sum(1 for q in questions if q["as_of"]) >= 5
    for q in questions:
        for e in q["evidence"]:
            assert e in by_id and (q["as_of"] is None or by_id[e]["date"][:10] <= q["as_of"])


def test_demo_runs_and_shows_answers_changing(capsys):
    lines: list[str] = []
    assert run_demo(embedder=HashEmbedder(), k=5, out=lines.append) == 0
    text = "\n".join(lines)
    assert "as of 2023-06-30" in text and "as of now" in text
    assert "superseded (kept, never deleted)" in text
    assert text.count("Q: ") < len(demo_data()[1])  # questions asked at several dates are grouped
