"""The embedding model is a choice recorded per store; queries go through embed_queries, documents through embed."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import mempp
from mempp.bench.ablate import CachingEmbedder
from mempp.bench.evaluate import EvalConfig, evaluate
from mempp.embedder import BGE_SMALL, DEFAULT_MODEL, MINILM, model_spec
from mempp.store import DEFAULT_EMBEDDER

DOCS = [
    {"id": "sla", "text": "The uptime SLA was raised to 99.95% after the outage review.", "author": "Ben Ortiz", "date": "2023-06-01"},
    {"id": "lunch", "text": "Lunch on Friday at noon?", "author": "Ann Lee", "date": "2023-06-02"},
    {"id": "runbook", "text": "The deploy runbook lives in the ops wiki under Releases.", "author": "Carla Diaz", "date": "2023-06-03"},
]


class Recording:
    """A user's embedder with a query side: it tells documents and queries apart by the calls it gets."""

    dim, model_id, max_tokens = 64, "recording-64", 512

    def __init__(self, queries: bool = True) -> None:
        self.inner = mempp.HashEmbedder(64)
        self.doc_texts: list[str] = []
        self.query_texts: list[str] = []
        if queries:
            self.embed_queries = self._embed_queries

    def embed(self, texts, *, batch_size=32, progress=None):
        self.doc_texts += list(texts)
        return self.inner.embed(texts, progress=progress)

    def _embed_queries(self, texts, *, batch_size=32, progress=None):
        self.query_texts += list(texts)
        return self.inner.embed(["query " + t for t in texts])


def test_queries_go_through_embed_queries(tmp_path):
    emb = Recording()
    with mempp.Store.open(tmp_path / "s", embedder=emb) as s:
        s.add(DOCS)
        assert sorted(emb.doc_texts) == sorted(d["text"] for d in DOCS) and emb.query_texts == []
        emb.doc_texts.clear()
        hits = s.query("where is the runbook?", legs=["vector"], reserve=False, k=3)
        assert emb.query_texts == ["where is the runbook?"] and emb.doc_texts == []
        # the vector leg ranked by the query side's vector, not the document side's
        qv = emb.inner.embed(["query where is the runbook?"])[0]
        want = [h.key for h in s.query("", embedding=qv, legs=["vector"], reserve=False, k=3)]
        assert [h.key for h in hits] == want
        table = s.query_batch(["uptime SLA?", "lunch?"], k=2)
        assert emb.query_texts[1:] == ["uptime SLA?", "lunch?"] and emb.doc_texts == [] and table.num_rows == 4
        list(s.query_stream(["deploy"], k=1))
        assert emb.query_texts[-1] == "deploy" and emb.doc_texts == []


def test_embedder_without_embed_queries_embeds_queries_as_documents(tmp_path):
    emb = Recording(queries=False)
    assert not hasattr(emb, "embed_queries")
    with mempp.Store.open(tmp_path / "s", embedder=emb) as s:
        s.add(DOCS)
        emb.doc_texts.clear()
        s.query("where is the runbook?", k=2)
        s.query_batch(["uptime SLA?"], k=2)
        assert emb.doc_texts == ["where is the runbook?", "uptime SLA?"]


def test_eval_embeds_questions_as_queries(tmp_path):
    docs, qs = tmp_path / "docs.jsonl", tmp_path / "questions.jsonl"
    docs.write_text("".join(json.dumps({**d, "scope": "a"}) + "\n" for d in DOCS))
    qs.write_text(json.dumps({"id": "q1", "scope": "a", "text": "where is the runbook?", "evidence": ["runbook"]}) + "\n")
    for wrap in (False, True):  # bench/ablate's cache keeps the two sides apart too
        rec = Recording()
        evaluate(docs, qs, EvalConfig(embedder="hash"), progress=False, embedder=CachingEmbedder(rec) if wrap else rec, workdir=tmp_path)
        assert rec.query_texts == ["where is the runbook?"]
        assert "where is the runbook?" not in rec.doc_texts


def test_new_store_records_the_default_model(tmp_path):
    assert DEFAULT_EMBEDDER == model_spec(DEFAULT_MODEL).describe()
    with mempp.Store.open(tmp_path / "s") as s:
        s.add(DOCS, embeddings=np.eye(3, s.dim, dtype=np.float32))
        assert s.stats()["embedder"] == model_spec(DEFAULT_MODEL).describe()


def test_model_record_and_mismatch_without_loading(tmp_path):
    """Naming a model records it; another model, or the same id from another file, is refused."""
    vecs = np.eye(3, 384, dtype=np.float32)
    with mempp.Store.open(tmp_path / "bge", embedder="bge-small") as s:
        s.add(DOCS, embeddings=vecs)
        assert s.stats()["embedder"] == {"model_id": BGE_SMALL.model_id, "dim": 384, "max_tokens": 512,
                                         "model_sha256": BGE_SMALL.model_sha256}
        assert not s.embedder_loaded  # named models load on first use
    manifest = json.loads((tmp_path / "bge" / "manifests" / "00000001.json").read_text())
    assert manifest["meta"]["embedder"]["model_sha256"] == BGE_SMALL.model_sha256
    for other in ("minilm", "all-MiniLM-L6-v2", mempp.HashEmbedder(384)):
        with pytest.raises(mempp.EmbedderError, match="built with bge-small-en-v1.5"):
            mempp.Store.open(tmp_path / "bge", embedder=other)
    with mempp.Store.open(tmp_path / "bge", embedder="bge-small-en-v1.5") as s:  # its own name is fine
        assert s.query("", embedding=vecs[2], legs=["vector"], reserve=False, k=1)[0].key == "runbook"
    with pytest.raises(mempp.EmbedderError, match="no model 'bge-large'"):
        mempp.Store.open(tmp_path / "new", embedder="bge-large")
    assert not (tmp_path / "new").exists()

    class SameIdOtherFile:  # a user's build of "the same" model from another file
        dim, model_id, max_tokens, model_sha256 = 384, BGE_SMALL.model_id, 512, "0" * 64

        def embed(self, texts, *, batch_size=32, progress=None):
            return mempp.HashEmbedder(384).embed(texts)

    with mempp.Store.open(tmp_path / "other", embedder=SameIdOtherFile()) as s:
        s.add(DOCS)
    with pytest.raises(mempp.EmbedderError, match="sha256"):
        mempp.Store.open(tmp_path / "other", embedder="bge-small")
    with mempp.Store.open(tmp_path / "other") as s:
        with pytest.raises(mempp.EmbedderError, match="sha256 0000"):
            s.query("uptime")  # the shipped file is not the one the store was built with
        assert s.query("uptime", embedding=SameIdOtherFile().embed(["uptime"])[0], k=1, reserve=False)[0].key == "sla"


def test_records_without_a_model_hash_match_by_model_id():
    """A manifest written before model hashes were recorded matches its model by id and dimension."""
    from mempp.embedder import same_model

    old = {"model_id": MINILM.model_id, "dim": 384, "max_tokens": 256}
    assert same_model(old, MINILM.describe()) and same_model(MINILM.describe(), old)
    assert not same_model(old, BGE_SMALL.describe())
    assert not same_model({**old, "model_sha256": "0" * 64}, MINILM.describe())
    assert not same_model({**old, "dim": 768}, old)


@pytest.mark.model
def test_bge_store_reopens_with_bge(tmp_path):
    with mempp.Store.open(tmp_path / "s", embedder="bge-small-en-v1.5") as s:
        s.add(DOCS)
        stored = s.searcher().snapshot.segments[0].segment.embeddings
        bge = s.embedder
        assert bge.model_id == BGE_SMALL.model_id
        # documents embedded bare
        np.testing.assert_allclose(stored, bge.embed([d["text"] for d in DOCS]), atol=1e-6)
        assert s.query("where is the deploy runbook?", legs=["vector"], reserve=False, k=1)[0].key == "runbook"
    with mempp.Store.open(tmp_path / "s") as s:  # no model named: the store's own
        assert s.embedder.model_id == BGE_SMALL.model_id and s.embedder.query_prefix
        hits = s.query("where is the deploy runbook?", legs=["vector"], reserve=False, k=3)
        assert hits[0].key == "runbook"
        qv = s.embedder.embed_queries(["where is the deploy runbook?"])[0]
        assert [h.key for h in hits] == [h.key for h in s.query("", embedding=qv, legs=["vector"], reserve=False, k=3)]
        table = s.query_batch(["where is the deploy runbook?", "what is the uptime SLA?"], k=3, legs=["vector"], reserve=False)
        assert table.column("key").to_pylist()[:3] == [h.key for h in hits]  # batched queries embed like single ones
    with pytest.raises(mempp.EmbedderError, match="built with bge-small"):
        mempp.Store.open(tmp_path / "s", embedder=mempp.OnnxEmbedder(model="minilm"))


@pytest.mark.model
def test_bge_windows_reach_past_512_tokens(tmp_path):
    filler = " ".join(["the weekly status meeting covered hiring, travel and the office move."] * 60)  # ~900 tokens
    long_doc = {"id": "long", "text": filler + " The database failover runbook was rewritten by the platform team."}
    short = {"id": "short", "text": "We ordered new chairs for the office."}
    q = "who rewrote the database failover runbook?"
    with mempp.Store.open(tmp_path / "s", embedder="bge-small", index=mempp.IndexConfig(window_stride=256)) as s:
        s.add([long_doc, short])
        assert s.stats()["window_vectors"] >= 1
        hits = s.query(q, legs=["vector"], reserve=False, k=2)
        assert hits[0].key == "long" and "best window" in hits.plan.legs["vector"]["method"]
        # oracle: the long document scores as its best window, each window embedded bare
        bge = s.embedder
        ids = bge.full_tokenizer.encode(long_doc["text"]).ids
        body, size = ids[1:-1], bge.max_tokens - 2
        starts = [0] + list(range(256, len(body) - (size - 256), 256))
        qv = bge.embed_queries([q])[0]
        wins = np.vstack([bge.run_ids([[ids[0], *body[a : a + size], ids[-1]]]) for a in starts])
        from mempp.kernels import masked_dot_dense, masked_dot_max

        entry = s.searcher().snapshot.segments[0]
        dense, mask = np.zeros(2, dtype=np.float32), np.ones(2, dtype=np.uint8)
        masked_dot_dense(entry.segment.embeddings, qv, mask, 0, dense)
        masked_dot_max(entry.window_embeddings, entry.window_rows, qv, mask, 0, dense)
        assert dense[0] == pytest.approx(float((wins @ qv).max()), abs=1e-5)
        assert float((wins[1:] @ qv).max()) > float(wins[0] @ qv)  # the answer is past the first window
    with mempp.Store.open(tmp_path / "flat", embedder="bge-small") as s:
        s.add([long_doc, short])
        assert s.stats()["window_vectors"] == 0


@pytest.mark.model
def test_cli_embedder_choice(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    store = tmp_path / "s"

    def mempp_cli(*args, check=True):
        return subprocess.run([sys.executable, "-m", "mempp", *args], capture_output=True, text=True, check=check)

    mempp_cli("add", str(store), str(corpus), "--embedder", "bge-small", "--quiet")
    stats = json.loads(mempp_cli("stats", str(store), "--json").stdout)
    assert stats["embedder"]["model_id"] == BGE_SMALL.model_id
    out = json.loads(mempp_cli("query", str(store), "where is the deploy runbook?", "--json", "--k", "1").stdout)
    assert out["hits"][0]["key"] == "runbook"
    proc = mempp_cli("add", str(store), str(corpus), "--embedder", "minilm", "--quiet", check=False)
    assert proc.returncode == 1 and "built with bge-small-en-v1.5" in proc.stderr
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "q1", "text": "where is the deploy runbook?", "evidence": ["runbook"]}) + "\n")
    report = json.loads(mempp_cli("eval", "--docs", str(corpus), "--questions", str(qs), "--embedder", "bge-small",
                                  "--legs", "vector", "--no-reserve", "--k", "1", "--json", "--quiet").stdout)
    assert report["overall"]["recall@1"] == 1.0 and report["config"]["embedder"] == "bge-small"
