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
    runs = {r["id"]: r["ranked"] for r in map(json.loads, ranked.read_text().splitlines())}
    assert len(runs) == len(questions) == 1986
    scored = [q for q in questions if q["evidence"]]
    assert report["questions"] == len(scored) == 1982
    # Re-score from the ranked file alone, independently of the engine.
    for k in (10, 50):
        recall = sum(len(set(q["evidence"]) & set(runs[q["id"]][:k])) / len(set(q["evidence"])) for q in scored) / len(scored)
        assert recall == pytest.approx(report["overall"][f"recall@{k}"])
    # Plain BM25 over the bare turns: 0.56 / 0.70 as measured for the reference comparison (issue 3).
    assert report["overall"]["recall@10"] > 0.54 and report["overall"]["recall@50"] > 0.67
    assert set(report["by_category"]) == {"adversarial", "multi_hop", "open_domain", "single_hop", "temporal"}


def test_score_metrics():
    s = score(["a", "x", "b", "y"], ["b", "a", "z"], ks=(1, 3))
    assert s == {"recall@1": 1 / 3, "hit@1": 1.0, "recall@3": 2 / 3, "hit@3": 1.0, "mrr": 1.0}
    assert score(["x", "b"], ["b"], ks=(1, 2))["mrr"] == 0.5
    assert score(["x"], ["b"], ks=(1,))["mrr"] == 0.0
