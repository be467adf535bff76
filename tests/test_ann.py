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
        (a,) = s.searcher().snapshot.ann
        assert (a.first, a.n) == (0, 5000)
        assert a.wait(60) and a.failed is None
        assert any(v["version"] == s.version - 1 for v in s.versions())


def test_vector_leg_with_index_recalls_the_exact_top10(store):
    path, emb, days = store
    rng = np.random.default_rng(9)
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert s.searcher().snapshot.ann[0].wait(60)
        recalls, methods = [], set()
        for i in range(60):
            q = clustered(rng, 1)[0]
            as_of = None if i % 4 == 0 else str(np.datetime64("2021-01-01") + int(rng.integers(0, 1000)))
            opt = s.searcher().options(as_of=as_of, k=10, depth=50, vector_index="ann")
            mask = P.candidate_mask(s.searcher().snapshot, opt)
            info: dict = {}
            got = P.vector_leg(s.searcher().snapshot, q, mask, opt, info)
            methods.add(info["method"].split(" (")[0])
            exact = P.vector_leg(s.searcher().snapshot, q, mask, s.searcher().options(as_of=as_of, k=10, depth=50, vector_index="exact"))
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
        (a,) = s.searcher().snapshot.ann
        assert not a.wait(60)
        assert a.failed.startswith(str(ann_file)), a.failed  # named, never handed to hnswlib
        hits = s.query("doc", embedding=emb[7], k=5, vector_index="ann", weights=(0, 0, 1))
        assert "hnsw" not in hits.plan.legs["vector"]["method"]
        assert hits[0].doc_id == 7 or float(emb[hits[0].doc_id] @ emb[7]) >= float(emb[7] @ emb[7]) - 1e-6


# --- ANN in real use: supersessions, filters, time travel --------------------------------------------
ORG_N = 20_000  # indexed documents (the first commit)
ORG_DAY0 = np.datetime64("2021-01-01")


def day_us(day: int) -> int:
    """Microseconds of the start of day ``day`` after 2021-01-01 (UTC)."""
    return int((ORG_DAY0 + int(day)).astype("datetime64[us]").astype(np.int64))


class OrgOracle:
    """Plain numpy bookkeeping of what the fixture wrote: every document's date (day number,
    -1: undated), author, thread, and the effective days of the supersessions of it."""

    def __init__(self) -> None:
        self.day = np.zeros(0, dtype=np.int64)
        self.author = np.zeros(0, dtype=np.int64)
        self.thread = np.zeros(0, dtype=np.int64)
        self.ends: dict[int, list[tuple[int, int]]] = {}  # doc -> (effective day, commit) of each supersession of it

    def add(self, day, author, thread) -> None:
        self.day = np.concatenate([self.day, day])
        self.author = np.concatenate([self.author, author])
        self.thread = np.concatenate([self.thread, thread])

    def valid(self, n_docs: int, commits: int | None, as_of: int | None, authors=None, threads=None) -> np.ndarray:
        """Candidates (bool over the first ``n_docs``) at ``as_of`` (a day: the end of it; None: now),
        counting the supersessions of the first ``commits`` commits (None: all)."""
        day = self.day[:n_docs]
        if as_of is None:
            ok = np.ones(n_docs, dtype=bool)
        else:
            ok = (day >= 0) & (day <= as_of)
        for doc, ends in self.ends.items():
            effs = [e for e, c in ends if commits is None or c <= commits]
            if doc < n_docs and effs and (as_of is None or min(effs) <= as_of):
                ok[doc] = False
        if authors is not None:
            ok &= np.isin(self.author[:n_docs], authors)
        if threads is not None:
            ok &= np.isin(self.thread[:n_docs], threads)
        return ok


@pytest.fixture(scope="module")
def org(tmp_path_factory):
    """20,000 clustered documents by 20 authors in 2,000 threads over 1,000 days (2% undated),
    indexed (HNSW); then 3,000 new versions of indexed documents (near their old vectors, dated
    later), 400 explicit supersessions, and 1,000 documents newer than the index."""
    rng = np.random.default_rng(22)
    path = tmp_path_factory.mktemp("org") / "s"
    oracle = OrgOracle()

    def docs_of(ids, day, author, thread, version=""):
        out = []
        for i, d, a, t in zip(ids, day, author, thread):
            doc = {"id": f"k{i}", "text": f"note {i}{version}", "author": f"Author {a}", "thread": f"t{t}", "channel": ("email", "chat")[t % 2]}
            if d >= 0:
                doc["date"] = str(ORG_DAY0 + int(d))
            out.append(doc)
        return out

    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        emb = clustered(rng, ORG_N, k=200)
        day = np.where(rng.random(ORG_N) < 0.02, -1, rng.integers(0, 1000, ORG_N))
        author, thread = rng.integers(0, 20, ORG_N), rng.integers(0, 2000, ORG_N)
        s.add(docs_of(range(ORG_N), day, author, thread), embeddings=emb)
        oracle.add(day, author, thread)
        assert s.build_ann(min_docs=1000, m=16, ef_construction=100)["n"] == ORG_N
        indexed_version = s.version
        # New versions of indexed documents: the old version stays in the index and must be filtered out.
        old = rng.choice(np.flatnonzero(day >= 0), 3000, replace=False)
        new_day = np.minimum(day[old] + rng.integers(1, 300, len(old)), 999)
        new_emb = emb[old] + 0.05 * rng.standard_normal((len(old), DIM)).astype(np.float32)
        new_emb /= np.linalg.norm(new_emb, axis=1, keepdims=True)
        base = len(s)
        got = s.add(docs_of(old, new_day, author[old], thread[old], " revised"), embeddings=new_emb)
        assert got == list(range(base, base + len(old)))
        oracle.add(new_day, author[old], thread[old])
        for o, d in zip(old, new_day):
            oracle.ends.setdefault(int(o), []).append((int(d), 2))
        # Explicit supersessions of documents never re-versioned, by doc id, at their own dates.
        rest = np.setdiff1d(np.flatnonzero(day >= 0), old)
        pairs = rng.choice(rest, (400, 2), replace=False)
        eff = rng.integers(0, 1000, 400)
        s.supersede_many([(int(a), int(b), str(ORG_DAY0 + int(e))) for (a, b), e in zip(pairs, eff)], backdate=True)
        for (a, _), e in zip(pairs, eff):
            oracle.ends.setdefault(int(a), []).append((int(e), 3))
        # Newer than the index: scanned exactly beside it.
        more = clustered(rng, 1000, k=200)
        m_day, m_author, m_thread = rng.integers(0, 1000, 1000), rng.integers(0, 20, 1000), rng.integers(0, 2000, 1000)
        s.add(docs_of(range(10**6, 10**6 + 1000), m_day, m_author, m_thread), embeddings=more)
        oracle.add(m_day, m_author, m_thread)
    return path, oracle, np.concatenate([emb, new_emb, more]), indexed_version


def org_queries(rng, oracle, n_docs, count):
    """(query vector, as_of day or None, authors, threads) of every selectivity: none, an as_of,
    one or several authors, a thread, and combinations."""
    out = []
    for i in range(count):
        as_of = None if i % 5 == 0 else int(rng.integers(30, 1000))
        kind = i % 4
        authors = threads = None
        if kind == 1:
            authors = [int(a) for a in rng.choice(20, int(rng.integers(1, 8)), replace=False)]
        elif kind == 2:
            threads = [int(t) for t in rng.choice(2000, int(rng.integers(1, 60)), replace=False)]
        elif kind == 3 and i % 8 == 3:
            authors = [int(rng.integers(0, 20))]
            threads = [int(t) for t in rng.choice(2000, 400, replace=False)]
        out.append((clustered(rng, 1)[0], as_of, authors, threads))
    return out


def ask(s, q, as_of, authors, threads, mode, k=10, depth=50):
    return s.query(
        "", embedding=q, as_of=None if as_of is None else str(ORG_DAY0 + as_of), k=k, depth=depth, weights=(0, 0, 1),
        reserve=False, context=(), siblings=0, feedback=0, vector_index=mode,
        authors=None if authors is None else [f"Author {a}" for a in authors],
        threads=None if threads is None else [f"t{t}" for t in threads],
    )


@pytest.mark.slow
def test_ann_in_real_use_answers_valid_documents_with_recall_in_every_bucket(org):
    path, oracle, emb, _ = org
    rng = np.random.default_rng(23)
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert all(a.wait(120) for a in s.searcher().snapshot.ann)
        n = len(s)
        buckets: dict[str, list[float]] = {}
        used: dict[str, int] = {}
        for q, as_of, authors, threads in org_queries(rng, oracle, n, 240):
            ok = oracle.valid(n, None, as_of, authors, threads)
            share = ok.mean()
            bucket = "<1%" if share < 0.01 else "1-10%" if share < 0.1 else "10-50%" if share < 0.5 else ">=50%"
            exact_ids = None
            for mode in ("ann", "auto", "exact"):
                hits = ask(s, q, as_of, authors, threads, mode)
                ids = [h.doc_id for h in hits]
                assert hits.plan.candidates == int(ok.sum())
                # never a document superseded at as_of, dated after it, undated under an as_of, or filtered out
                assert all(ok[d] for d in ids), (mode, as_of, authors, threads)
                assert len(ids) == min(10, int(ok.sum()))
                if mode == "exact":
                    exact_ids = ids
                    want = np.flatnonzero(ok)[np.argsort(-(emb[np.flatnonzero(ok)] @ q), kind="stable")[:10]]
                    assert np.allclose(np.sort(emb[ids] @ q), np.sort(emb[want] @ q), atol=1e-5)
                elif mode == "ann":
                    ann_ids = ids
                    used[bucket] = used.get(bucket, 0) + ("hnsw" in hits.plan.legs["vector"]["method"])
            if exact_ids:
                buckets.setdefault(bucket, []).append(len(set(ann_ids) & set(exact_ids)) / len(exact_ids))
        assert set(buckets) == {"<1%", "1-10%", "10-50%", ">=50%"}, {b: len(r) for b, r in buckets.items()}
        for bucket, recalls in buckets.items():
            assert len(recalls) >= 20, (bucket, len(recalls))
            assert np.mean(recalls) >= 0.95, (bucket, np.mean(recalls), len(recalls))
        assert used["10-50%"] >= len(buckets["10-50%"]) // 2 and used[">=50%"] >= len(buckets[">=50%"]) // 2, used


@pytest.mark.slow
def test_ann_in_real_use_at_an_older_version(org):
    """Time travel by transaction time: the version the index was published in (no supersession
    yet, no newer document) answers with it, and only with documents valid at as_of then."""
    path, oracle, emb, indexed_version = org
    rng = np.random.default_rng(24)
    with mempp.Store.open(path, version=indexed_version, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert len(s) == ORG_N and all(a.wait(120) for a in s.searcher().snapshot.ann)
        recalls = []
        for q, as_of, authors, threads in org_queries(rng, oracle, ORG_N, 40):
            ok = oracle.valid(ORG_N, 1, as_of, authors, threads)
            ann = [h.doc_id for h in ask(s, q, as_of, authors, threads, "ann")]
            exact = [h.doc_id for h in ask(s, q, as_of, authors, threads, "exact")]
            assert all(ok[d] for d in ann) and len(ann) == len(exact) == min(10, int(ok.sum()))
            if exact:
                recalls.append(len(set(ann) & set(exact)) / len(exact))
        assert np.mean(recalls) >= 0.95


@pytest.mark.slow
def test_auto_chooses_the_index_where_it_is_cheaper_and_the_scan_where_that_is(org):
    path, oracle, emb, _ = org
    rng = np.random.default_rng(25)
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert all(a.wait(120) for a in s.searcher().snapshot.ann)
        n = len(s)
        top1 = []
        for _ in range(20):
            q = clustered(rng, 1)[0]
            # Every current document a candidate, one neighbour asked for: a search of the graph
            # (~0.16 ms by the cost model) against a scan of 20,000 rows (~0.5 ms): the index.
            hits = ask(s, q, None, None, None, "auto", k=1, depth=1)
            assert hits.plan.legs["vector"]["method"].startswith("hnsw"), hits.plan.legs["vector"]
            exact = ask(s, q, None, None, None, "exact", k=1, depth=1)
            top1.append(hits[0].doc_id == exact[0].doc_id)
            # One author of 20 at an early date (well under 1% of the documents), depth 50: the
            # index would be asked for thousands of neighbours to keep 50; the scan costs ~0.03 ms.
            a = int(rng.integers(0, 20))
            hits = ask(s, q, 150, [a], None, "auto")
            assert "hnsw" not in hits.plan.legs["vector"]["method"], hits.plan.legs["vector"]
            assert [h.doc_id for h in hits] == [h.doc_id for h in ask(s, q, 150, [a], None, "exact")]
            assert oracle.valid(n, None, 150, [a]).mean() < 0.01
        assert np.mean(top1) >= 0.95


@pytest.mark.slow
def test_query_batch_equals_single_queries_on_an_indexed_store(org):
    """A batch answers as query() does, also where the vector leg searches the index (and its
    answer differs from the exact scan's, which the batch's matrix pass would give)."""
    path, oracle, emb, _ = org
    rng = np.random.default_rng(26)
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM)) as s:
        assert all(a.wait(120) for a in s.searcher().snapshot.ann)
        qs = [clustered(rng, 1)[0] for _ in range(60)]
        texts = [f"note {i}" if i % 3 else "" for i in range(60)]
        as_ofs = [None if i % 4 == 0 else str(ORG_DAY0 + int(rng.integers(100, 1000))) for i in range(60)]
        differs = 0
        for mode, extra in (("ann", {"context": ()}), ("auto", {"context": (), "k": 1, "depth": 1}), ("ann", {})):
            opts = {"k": 10, "vector_index": mode, "weights": (1, 1, 2), "feedback": 0} | extra
            rows = s.query_batch(texts, np.stack(qs), as_of=as_ofs, chunk=16, **opts).to_pylist()
            for i in range(60):
                hits = s.query(texts[i], embedding=qs[i], as_of=as_ofs[i], **opts)
                assert [(r["doc_id"], r["score"], r["reserved"], r["rank_vector"]) for r in rows if r["query"] == i] == [
                    (h.doc_id, h.score, h.reserved, h.ranks["vector"]) for h in hits
                ], (mode, i)
                if mode == "ann" and extra:
                    exact = s.query(texts[i], embedding=qs[i], as_of=as_ofs[i], **(opts | {"vector_index": "exact"}))
                    differs += [h.doc_id for h in hits] != [h.doc_id for h in exact]
        assert differs, "the index answered every query as the exact scan: this test could not tell them apart"


def test_build_ann_threads_is_workers_former_name(tmp_path):
    rng = np.random.default_rng(3)
    emb = rng.standard_normal((60, DIM)).astype(np.float32)
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=DIM)) as s:
        s.add([{"text": f"doc {i}"} for i in range(60)], embeddings=emb)
        with pytest.warns(DeprecationWarning, match="workers"):
            assert s.build_ann(min_docs=1, m=8, ef_construction=20, threads=1)["n"] == 60
