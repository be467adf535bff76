"""``mempp eval`` asks every question once per k and scores each k on its own answer.

With the latest-date reserve the last 3 of the k slots go to the latest-dated matched documents,
so the answer to ``k=4`` is not the first 4 hits of the answer to ``k=10``. The oracle here is
``store.query(..., k=k)`` itself, scored by hand.
"""

from __future__ import annotations

import json

import mempp
from mempp.bench.evaluate import EvalConfig, evaluate

# Three old, on-topic records answer the question; twelve later chat lines mention the topic in
# passing. The later ones are what the reserve picks for the last 3 slots of any answer.
DOCS = [
    {"id": f"gold{i}", "scope": "s", "text": f"Decision {i}: the runbook for the payments outage lives in the ops wiki, page {i}.",
     "author": "Aisha Patel", "date": f"2023-01-0{i + 1}", "thread": f"T{i}"}
    for i in range(3)
] + [
    {"id": f"chat{i}", "scope": "s", "text": f"thanks, payments looked fine today ({i})", "author": "Ben Ortiz",
     "date": f"2023-06-{i + 10}", "thread": f"C{i}"}
    for i in range(12)
]
QUESTIONS = [
    {"id": "q1", "scope": "s", "text": "Where is the runbook for the payments outage?", "category": "c", "as_of": None,
     "evidence": ["gold0", "gold1", "gold2"]},
    {"id": "q2", "scope": "s", "text": "payments runbook decision", "category": "c", "as_of": "2023-07-01",
     "evidence": ["gold2", "chat11"]},
]
KS = (4, 10)


def _write(tmp_path):
    docs, qs = tmp_path / "docs.jsonl", tmp_path / "questions.jsonl"
    docs.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    qs.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return docs, qs


def _hand(answers: dict[int, list[str]], gold: list[str]) -> dict[str, float]:
    out = {}
    for k, ranked in answers.items():
        out[f"recall@{k}"] = len(set(gold) & set(ranked[:k])) / len(set(gold))
        out[f"hit@{k}"] = float(bool(set(gold) & set(ranked[:k])))
        out[f"mrr@{k}"] = next((1 / (i + 1) for i, key in enumerate(ranked[:k]) if key in gold), 0.0)
    return out


def test_eval_recall_at_k_equals_a_query_asked_with_k(tmp_path):
    docs, qs = _write(tmp_path)
    ranked_out = tmp_path / "ranked.jsonl"
    # The paper's reserve rule: every matched document may take a reserve slot, so the chat lines do.
    cfg = EvalConfig(ks=KS, reserve_rule="paper")
    report = evaluate(docs, qs, cfg, embedder=mempp.HashEmbedder(), ranked_out=ranked_out, progress=False, workdir=tmp_path)

    # The oracle: the same store, asked by hand with each k.
    with mempp.Store.open(tmp_path / "oracle", embedder=mempp.HashEmbedder()) as store:
        store.add(DOCS)
        per_q = {}
        for q in QUESTIONS:
            answers = {k: [h.key for h in store.query(q["text"], as_of=q["as_of"], k=k, reserve_rule="paper")] for k in KS}
            per_q[q["id"]] = (answers, _hand(answers, q["evidence"]))
    # The reserve must change the top k here, or this test could not tell the two methods apart.
    assert any(a[4] != a[10][:4] for a, _ in per_q.values())
    for name in ("recall@4", "recall@10", "hit@4", "hit@10", "mrr@4", "mrr@10"):
        expected = sum(h[name] for _, h in per_q.values()) / len(per_q)
        assert report["overall"][name] == expected, name
    assert report["overall"]["mrr"] == report["overall"]["mrr@10"]
    # Scoring recall@4 on the first 4 of the k=10 answer gives another figure.
    prefix = sum(len(set(q["evidence"]) & set(per_q[q["id"]][0][10][:4])) / len(q["evidence"]) for q in QUESTIONS) / len(QUESTIONS)
    assert prefix != report["overall"]["recall@4"]

    lines = [json.loads(x) for x in ranked_out.read_text().splitlines()]
    assert [(x["id"], x["k"]) for x in lines] == [(q["id"], k) for q in QUESTIONS for k in KS]
    for x in lines:
        assert x["ranked"] == per_q[x["id"]][0][x["k"]]
