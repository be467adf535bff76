"""ANN indexes: built aside, published as a version, verified before loading, and the
planner's vector leg with them against the exact scan (recall on clustered vectors)."""

from __future__ import annotations

import numpy as np
import pytest

import mempp
from mempp import planner as P
from mempp.config import IndexConfig

DIM = 32


def clustered(rng, n, k=100, spread=0.6):
    centres = rng.standard_normal((k, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, k, n)] + spread * rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 6000
    emb = clustered(rng, n)
    path = tmp_path_factory.mktemp("ann") / "s"
    s = mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=DIM))
    days = rng.integers(0, 1000, n)
    docs = [{"text": f"doc {i}", "date": str(np.datetime64("2021-01-01") + int(days[i]))} for i in range(n)]
    s.add(docs[:5000], embeddings=emb[:5000])
    assert s.build_ann(min_docs=10_000) is None  # too few
    built = s.build_ann(min_docs=100, m=16, ef_construction=100)
    assert built["first"] == 0 and built["n"] == 5000
    s.add(docs[5000:], embeddings=emb[5000:])  # newer than the index: scanned exactly
    s.close()
    return path, emb, days


def test_index_is_published_verified_and_loaded_in_the_background(store):
    path, emb, _ = store
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        (a,) = s._snap.ann
        assert (a.first, a.n) == (0, 5000)
        assert a.wait(60) and a.failed is None
        assert any(v["version"] == s.version - 1 for v in s.versions())


def test_vector_leg_with_index_recalls_the_exact_top10(store):
    path, emb, days = store
    rng = np.random.default_rng(9)
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert s._snap.ann[0].wait(60)
        recalls, methods = [], set()
        for i in range(60):
            q = clustered(rng, 1)[0]
            as_of = None if i % 4 == 0 else str(np.datetime64("2021-01-01") + int(rng.integers(0, 1000)))
            opt = s._query_options(as_of=as_of, k=10, depth=50, vector_index="ann")
            mask = P.candidate_mask(s._snap, opt)
            info: dict = {}
            got = P.vector_leg(s._snap, q, mask, opt, info)
            methods.add(info["method"].split(" (")[0])
            exact = P.vector_leg(s._snap, q, mask, s._query_options(as_of=as_of, k=10, depth=50, vector_index="exact"))
            truth = set(exact[:10].tolist())
            if truth:
                recalls.append(len(truth & set(got[:10].tolist())) / len(truth))
            assert set(got.tolist()) <= set(np.flatnonzero(mask).tolist())  # only candidates, ever
        assert "hnsw" in methods
        assert np.mean(recalls) >= 0.95


def test_damaged_index_is_dropped_and_the_scan_is_exact(store, tmp_path):
    import shutil

    path, emb, _ = store
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    (ann_file,) = copy.glob("segments/*.ann.hnsw")
    data = bytearray(ann_file.read_bytes())
    data[len(data) // 2] ^= 0x10
    ann_file.write_bytes(bytes(data))
    with mempp.Store.open(copy, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        (a,) = s._snap.ann
        assert not a.wait(60)
        assert a.failed.startswith(str(ann_file)), a.failed  # named, never handed to hnswlib
        hits = s.query("doc", embedding=emb[7], k=5, vector_index="ann", weights=(0, 0, 1))
        assert "hnsw" not in hits.plan.legs["vector"]["method"]
        assert hits[0].doc_id == 7 or float(emb[hits[0].doc_id] @ emb[7]) >= float(emb[7] @ emb[7]) - 1e-6
