"""The plain baselines (bench/baseline.py: BM25 alone, and BM25 + best-window vector fused 1:4 with
thread siblings) and the REALTALK converter, on small hand-made data."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

import mempp
from mempp.bench.baseline import Scope, evaluate_baseline, tokens
from mempp.bench.convert_realtalk import convert_chat, parse_evidence
from mempp.dates import to_us

DOCS = [
    {"id": "a1", "scope": "s", "text": "The payments runbook lives in the ops wiki.", "date": "2023-01-01", "thread": "A"},
    {"id": "a2", "scope": "s", "text": "Thanks!", "date": "2023-01-02", "thread": "A"},
    {"id": "b1", "scope": "s", "text": "Budget review of the payments team, payments costs up.", "date": "2023-02-01", "thread": "B"},
    {"id": "c1", "scope": "s", "text": "The runbook moved to the new wiki.", "date": "2023-03-01", "thread": "C", "supersedes": "a1"},
    {"id": "d1", "scope": "s", "text": "Lunch is at noon, the wiki says.", "date": None},
]


def _bm25_oracle(docs, question):
    toks = [tokens(d["text"]) for d in docs]
    n, avg = len(docs), sum(map(len, toks)) / len(docs)
    out = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for term in set(tokens(question)):
            df = sum(term in x for x in toks)
            if tf[term]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * len(t) / avg))
        out.append(s)
    return out


def test_tokens_and_stop_list():
    assert tokens("The SLA is 99.9% -- Payments' runbook") == ["sla", "99", "9", "payments", "runbook"]


def test_bm25_equals_the_formula_and_respects_validity():
    sc = Scope(DOCS)
    q = "where is the payments runbook wiki"
    expected = _bm25_oracle(DOCS, q)
    everyone = sc.valid(None) | True
    ranked = sc.bm25(q, everyone)
    assert [expected[i] > 0 for i in ranked] == [True] * len(ranked)
    assert list(ranked) == sorted(ranked, key=lambda i: (-expected[i], -i))
    # Now: a1 is superseded by c1. At 2023-01-15: only a1, a2 exist (d1 is undated, excluded).
    assert "a1" not in sc.answer("bm25", q, None, None, 10)
    mid = to_us("2023-01-15", end_of_day=True)
    assert sc.answer("bm25", q, None, float(mid), 10) == ["a1"]


def test_siblings_follow_each_fused_document_in_ingest_order():
    sc = Scope(DOCS, mempp.HashEmbedder())
    vec = mempp.HashEmbedder().embed(["payments runbook"])[0]
    mid = float(to_us("2023-02-15", end_of_day=True))
    out = sc.answer("rrf-siblings", "payments runbook", vec, mid, 10)
    assert set(out) == {"a1", "a2", "b1"}
    assert out.index("a2") == out.index("a1") + 1  # a1's thread sibling comes right after it (a2 itself matches nothing)
    assert sc.answer("rrf-siblings", "payments runbook", vec, mid, 2) == out[:2]


def test_evaluate_baseline_reports_like_eval(tmp_path):
    docs, qs = tmp_path / "d.jsonl", tmp_path / "q.jsonl"
    docs.write_text("\n".join(json.dumps(d) for d in DOCS))
    qs.write_text(json.dumps({"id": "q", "scope": "s", "text": "payments budget", "category": "x", "as_of": None, "evidence": ["b1", "zz"]}))
    r = evaluate_baseline(docs, qs, "bm25", (1, 3))
    assert r["overall"]["recall@1"] == 0.5 and r["overall"]["mrr@3"] == 1.0 and r["questions"] == 1


def test_realtalk_evidence_parsing():
    assert parse_evidence(["D1:3", "D12:3-D12:5;D13:1", " D5:3.", "D11:17; D16:1", "D1:3"]) == [
        "D1:3", "D12:3", "D12:4", "D12:5", "D13:1", "D5:3", "D11:17", "D16:1"]


def test_realtalk_chat_conversion():
    chat = {
        "name": {"speaker_1": "Ann", "speaker_2": "Bo"},
        "session_1": [
            {"clean_text": "Hi! I ran 5k today", "speaker": "Ann", "date_time": "29.12.2023, 22:42:04", "dia_id": "D1:1"},
            {"clean_text": "", "speaker": "Bo", "date_time": "29.12.2023, 22:43:00", "dia_id": "D1:2", "img_url": ["x"]},
        ],
        "session_1_date_time": "29.12.2023, 22:42:04",
        "qa": [{"question": "When did Ann run?", "answer": "29.12.2023", "evidence": ["D1:1-D1:2"], "category": 2}],
    }
    docs, qs, counts = convert_chat("Chat_1_Ann_Bo", chat)
    assert docs == [{"id": "Chat_1_Ann_Bo:D1:1", "scope": "Chat_1_Ann_Bo", "text": "Hi! I ran 5k today", "author": "Ann",
                     "date": "2023-12-29T22:42:04", "thread": "Chat_1_Ann_Bo:session_1", "channel": "chat"}]
    assert qs[0]["evidence"] == ["Chat_1_Ann_Bo:D1:1"] and qs[0]["category"] == "temporal"
    assert counts == {"evidence_ids": 2, "dropped_ids": 1}


@pytest.mark.parametrize("kind", ["nope"])
def test_unknown_baseline(tmp_path, kind):
    with pytest.raises(ValueError):
        evaluate_baseline(tmp_path / "d", tmp_path / "q", kind)
