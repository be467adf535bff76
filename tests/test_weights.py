"""The default fusion weights follow k (``weights=None``): 2,1,1 for k up to RECALL_K, 1,1,1 above.

Checked against the same query with the weights written out, one by one and in a batch, and
against the fusion rule itself (each hit's score is the weighted RRF sum of its leg ranks).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mempp
from mempp.config import DEFAULT_WEIGHTS, RECALL_K, RECALL_WEIGHTS, default_weights

DIM = 16
WORDS = "budget region payments cluster lunch weather runbook outage policy vendor".split()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(7)
    n = 120
    docs = [
        {"id": f"d{i}", "text": " ".join(rng.choice(WORDS, size=int(rng.integers(2, 6)))) + f" item {i}",
         "author": ["Ann Lee", "Bo Park"][i % 2], "date": f"2023-{1 + i % 12:02d}-{1 + i % 27:02d}"}
        for i in range(n)
    ]
    s = mempp.Store.open(tmp_path_factory.mktemp("w") / "s", embedder=mempp.HashEmbedder(DIM))
    s.add(docs)
    yield s
    s.close()


def _rows(hits):
    return [(h.key, round(h.score, 12), h.reserved) for h in hits]


def _rrf_score(hit, weights):
    return sum(w / (60 + hit.ranks[leg]) for leg, w in zip(("lexical", "tag", "vector"), weights) if w and hit.ranks.get(leg) is not None)


def test_the_rule():
    assert default_weights(1) == default_weights(RECALL_K) == DEFAULT_WEIGHTS == (2.0, 1.0, 1.0)
    assert default_weights(RECALL_K + 1) == default_weights(500) == RECALL_WEIGHTS == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("k", [3, 10, RECALL_K, RECALL_K + 1, 30, 50])
def test_default_weights_are_the_rule_written_out(store, k):
    question = "Ann Lee budget outage runbook"
    want = default_weights(k)
    other = RECALL_WEIGHTS if want == DEFAULT_WEIGHTS else DEFAULT_WEIGHTS
    got = store.query(question, k=k)
    assert _rows(got) == _rows(store.query(question, k=k, weights=want))
    assert _rows(got) != _rows(store.query(question, k=k, weights=other))  # the two rules do rank differently here
    for h in got:
        if not h.reserved:
            assert h.score == pytest.approx(_rrf_score(h, want), rel=1e-6)
    batch = store.query_batch([question, "weather lunch"], k=k).to_pylist()
    explicit = store.query_batch([question, "weather lunch"], k=k, weights=want).to_pylist()
    assert batch == explicit


def test_cli_leaves_weights_to_the_rule(tmp_path, capsys):
    """``mempp query`` without ``--weights`` answers as ``query`` does with no weights: by k."""
    from mempp.cli import main

    path = tmp_path / "s"
    rng = np.random.default_rng(3)
    docs = [{"id": f"d{i}", "text": " ".join(rng.choice(WORDS, size=4)), "author": "Ann Lee", "date": "2023-05-01"} for i in range(80)]
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        s.add(docs)
        want = {k: [(h.key, round(h.score, 9)) for h in s.query("budget outage", k=k, weights=default_weights(k))] for k in (10, 20)}
    for k in (10, 20):
        capsys.readouterr()
        assert main(["query", str(path), "budget outage", "--k", str(k), "--json"]) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]
        assert [(h["key"], round(h["score"], 9)) for h in hits] == want[k]
