"""``mempp eval`` on LoCoMo (from ../shared/data): the report re-scores from --ranked-out alone."""

from __future__ import annotations

import json

import pytest

from conftest import LOCOMO, needs_locomo
from mempp.bench.evaluate import EvalConfig, evaluate, score


@needs_locomo()
@pytest.mark.slow
def test_locomo_lexical_eval_rescored_independently(tmp_path):
    ranked = tmp_path / "ranked.jsonl"
    cfg = EvalConfig(ks=(10, 50), legs=("lexical",), reserve=False, embedder="hash")
    report = evaluate(LOCOMO / "docs.jsonl", LOCOMO / "questions.jsonl", cfg, ranked_out=ranked, progress=False)
    questions = [json.loads(x) for x in (LOCOMO / "questions.jsonl").read_text().splitlines()]
    runs = {(r["id"], r["k"]): r["ranked"] for r in map(json.loads, ranked.read_text().splitlines())}
    assert len(runs) == 2 * len(questions) == 2 * 1986
    scored = [q for q in questions if q["evidence"]]
    assert report["questions"] == len(scored) == 1982
    # Re-score from the ranked file alone, independently of the engine.
    for k in (10, 50):
        recall = sum(len(set(q["evidence"]) & set(runs[q["id"], k])) / len(set(q["evidence"])) for q in scored) / len(scored)
        assert recall == pytest.approx(report["overall"][f"recall@{k}"])
    # Plain BM25 over the bare turns: 0.56 / 0.70 as measured when mempp was first compared with the reference system.
    assert report["overall"]["recall@10"] > 0.54 and report["overall"]["recall@50"] > 0.67
    assert set(report["by_category"]) == {"adversarial", "multi_hop", "open_domain", "single_hop", "temporal"}


def test_score_metrics():
    # Each k is scored on its own answer: the k=1 answer here is not the first hit of the k=3 one.
    s = score({1: ["a"], 3: ["x", "b", "y"]}, ["b", "a", "z"])
    assert s == {
        "recall@1": 1 / 3, "hit@1": 1.0, "mrr@1": 1.0,
        "recall@3": 1 / 3, "hit@3": 1.0, "mrr@3": 0.5, "mrr": 0.5,
    }
    assert score({2: ["x", "b"]}, ["b"])["mrr"] == 0.5
    assert score({1: ["x"]}, ["b"])["mrr"] == 0.0
    assert score({1: ["x", "b"]}, ["b"])["recall@1"] == 0.0  # only the first k of an answer count
