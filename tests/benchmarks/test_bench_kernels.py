"""Micro-benchmarks of each kernel (pytest-benchmark). Skipped by the correctness suite
(``--benchmark-skip`` in pyproject); run them with

    python3 -m pytest tests/benchmarks -o addopts="" --benchmark-only

They assert nothing about time; the numbers are for comparing runs side by side.
"""

from __future__ import annotations

import numpy as np
import pytest

from mempp.kernels import (
    TopK,
    batch_topk,
    bm25_accumulate,
    bm25_accumulate_dense,
    bm25_norms,
    bm25_probe,
    dense_topk,
    Int8Query,
    identity_order,
    masked_dot_topk_q8,
    segment_stats,
    quantize_rows,
    candidate_moments,
    clear_touched,
    context_topk,
    masked_dot_dense,
    masked_dot_topk,
    topk_touched,
)
from mempp.kernels.invert import invert
from mempp.kernels.masks import ValidIndex
from mempp.storage.postings import Postings

N = 100_000
DIM = 384


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    lengths = rng.integers(50, 200, N)
    vocab = 50_000
    ranks = np.arange(1, vocab + 1)
    p = 1.0 / ranks**1.1
    p /= p.sum()
    doc_terms = [rng.choice(vocab, size=int(n), p=p) for n in lengths[:20_000]]
    doc_terms = doc_terms * (N // len(doc_terms))
    post = Postings.build(doc_terms)
    emb = rng.standard_normal((N, DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    mask = (rng.random(N) < 0.44).astype(np.uint8)
    threads = rng.integers(0, N // 20, N)
    order = np.lexsort((np.arange(N), threads))
    prev = np.full(N, -1, dtype=np.int64)
    nxt = np.full(N, -1, dtype=np.int64)
    same = threads[order][1:] == threads[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    nxt[order[:-1][same]] = order[1:][same]
    q_terms = np.array([5, 50, 500, 5000], dtype=np.int64)
    return dict(post=post, lengths=lengths.astype(np.float32), emb=emb, mask=mask, prev=prev, nxt=nxt,
                q=emb[7].copy(), q_terms=q_terms, avgdl=float(lengths.mean()))


def test_bm25_query(benchmark, corpus):
    post = corpus["post"]
    starts, ends, _ = post.lookup(corpus["q_terms"])
    idf = np.ones(len(starts))
    scores = np.zeros(N, dtype=np.float32)
    touched = np.empty(N, dtype=np.int64)
    out_i = np.empty(10, dtype=np.int64)
    out_s = np.empty(10, dtype=np.float32)

    def run():
        n = bm25_accumulate(post.docs, post.tfs, starts, ends, idf, corpus["lengths"], corpus["avgdl"], 1.2, 0.75,
                            corpus["mask"], 0, scores, touched, 0)
        topk_touched(scores, touched, n, 10, out_i, out_s)
        clear_touched(scores, touched, n)

    benchmark(run)


def test_masked_dot_topk(benchmark, corpus):
    def run():
        heap = TopK(10)
        heap.n = masked_dot_topk(corpus["emb"], corpus["q"], corpus["mask"], 0, 10, heap.scores, heap.ids, heap.n)
        return heap.result()

    benchmark(run)


def test_dense_scan_and_context(benchmark, corpus):
    cands = np.flatnonzero(corpus["mask"]).astype(np.int64)
    betas = np.array([0.8, 0.6, 0.4])

    def run():
        dense = np.zeros(N, dtype=np.float32)
        masked_dot_dense(corpus["emb"], corpus["q"], corpus["mask"], 0, dense)
        mu, sd = candidate_moments(dense, corpus["mask"])
        context_topk(dense, mu, sd, cands, len(cands), corpus["prev"], corpus["nxt"], betas, np.zeros(0, np.float32),
                     corpus["mask"], 50, np.empty(50, dtype=np.int64), np.empty(50), np.empty(len(cands)), True)

    benchmark(run)


def test_bm25_dense(benchmark, corpus):
    post = corpus["post"]
    starts, ends, _ = post.lookup(corpus["q_terms"])
    idf = np.ones(len(starts))
    norms = np.empty(N)
    bm25_norms(corpus["lengths"], corpus["avgdl"], 1.2, 0.75, norms)
    scores = np.zeros(N, dtype=np.float32)
    out_i = np.empty(10, dtype=np.int64)
    out_s = np.empty(10, dtype=np.float32)

    def run():
        bm25_accumulate_dense(post.docs, post.tfs, starts, ends, idf, norms, 1.2, 0, scores)
        dense_topk(scores, corpus["mask"], 10, out_i, out_s)

    benchmark(run)


def test_bm25_probe(benchmark, corpus):
    post = corpus["post"]
    starts, ends, _ = post.lookup(corpus["q_terms"][:1])
    norms = np.empty(N)
    bm25_norms(corpus["lengths"], corpus["avgdl"], 1.2, 0.75, norms)
    docs = np.sort(np.random.default_rng(1).choice(N, 500, replace=False)).astype(np.int64)
    scores = np.zeros(N, dtype=np.float32)
    benchmark(bm25_probe, post.docs, post.tfs, starts[0], ends[0], 1.0, norms, 1.2, 0, docs, scores)


def _int8_copy(corpus):
    q8 = np.empty(corpus["emb"].shape, dtype=np.int8)
    scale = np.empty(N, dtype=np.float32)
    quantize_rows(corpus["emb"], q8, scale)
    stats = segment_stats(q8, scale)
    return q8, scale, stats, Int8Query(corpus["q"])


def test_masked_dot_topk_int8(benchmark, corpus):
    """The planner's int8 scan: VNNI where the CPU has it."""
    q8, scale, stats, prepared = _int8_copy(corpus)

    def run():
        heap = TopK(200)
        heap.n = prepared.scan(q8, scale, stats, corpus["mask"], 0, 200, heap.scores, heap.ids, heap.n)
        return heap.result()

    benchmark(run)


def test_masked_dot_topk_int8_portable(benchmark, corpus):
    q8, scale, _, prepared = _int8_copy(corpus)

    def run():
        heap = TopK(200)
        heap.n = masked_dot_topk_q8(
            q8, scale, prepared.qw, prepared.qscale, corpus["mask"], 0, 200, heap.scores, heap.ids, heap.n, identity_order(N), 0, N
        )
        return heap.result()

    benchmark(run)


def test_masked_dot_topk_int8_date_order(benchmark, corpus):
    """The int8 scan of a copy stored in date order (as the writer stores it): the candidates of
    "valid at as_of" (dated at or before it, 10% retired) are then a span of the copy, not 44% of
    rows spread over all of it. Compare with test_masked_dot_topk_int8 (a random 44% mask)."""
    from mempp.storage.commits import q8_table

    q8, scale, _, prepared = _int8_copy(corpus)
    rng = np.random.default_rng(2)
    dates = rng.integers(0, 1000, N).astype(np.int64)
    t = q8_table(q8, scale, dates)
    sq8 = t.column("q").combine_chunks().values.to_numpy().reshape(N, -1)
    sscale, order = t.column("scale").to_numpy(), t.column("row").to_numpy()
    stats = segment_stats(sq8, sscale)
    mask = ((dates <= 488) & (rng.random(N) >= 0.1)).astype(np.uint8)  # 44% of the rows, as the workload's
    span = (0, int(np.searchsorted(t.column("date").to_numpy(), 488, side="right")))

    def run():
        heap = TopK(200)
        heap.n = prepared.scan(sq8, sscale, stats, mask, 0, 200, heap.scores, heap.ids, heap.n, order, span)
        return heap.result()

    benchmark(run)


def test_batch_topk_after_matrix_product(benchmark, corpus):
    queries = corpus["emb"][:64].copy()
    masks = np.repeat(corpus["mask"][None, :], 64, axis=0)

    def run():
        hs = np.empty((64, 66), dtype=np.float32)
        hi = np.empty((64, 66), dtype=np.int64)
        hn = np.zeros(64, dtype=np.int64)
        for r0 in range(0, N, 8192):
            batch_topk(queries @ corpus["emb"][r0 : r0 + 8192].T, masks, r0, 66, hs, hi, hn)

    benchmark(run)


def test_valid_mask(benchmark, corpus):
    rng = np.random.default_rng(2)
    dates = rng.integers(0, 10**15, N).astype(np.int64)
    until = np.where(rng.random(N) < 0.1, dates + 10**12, np.iinfo(np.int64).max).astype(np.int64)
    vi = ValidIndex(dates, until, np.iinfo(np.int64).min, np.iinfo(np.int64).max)
    benchmark(vi.mask, 5 * 10**14)


def test_valid_index_build(benchmark, corpus):
    rng = np.random.default_rng(2)
    dates = rng.integers(0, 10**15, N).astype(np.int64)
    until = np.where(rng.random(N) < 0.1, dates + 10**12, np.iinfo(np.int64).max).astype(np.int64)
    benchmark(ValidIndex, dates, until, np.iinfo(np.int64).min, np.iinfo(np.int64).max)


def test_invert_batch(benchmark, corpus):
    rng = np.random.default_rng(3)
    lengths = rng.integers(50, 200, 20_000).astype(np.int64)
    flat = rng.integers(0, 50_000, int(lengths.sum())).astype(np.int64)
    benchmark(invert, flat, lengths, 50_000)


@pytest.mark.parametrize("tiled", [True, False], ids=["tiled", "rows"])
def test_int8_batch_scan(benchmark, corpus, tiled):
    """Bulk scoring: 32 int8 queries per pass over the rows; the tiled matrix product (512-bit
    VNNI, where the CPU has it) or the row-by-row kernel."""
    from mempp.kernels import batch_scan

    q8, scale, stats, _ = _int8_copy(corpus)
    queries = [Int8Query(corpus["emb"][i], precise=False) for i in range(32)]
    masks = np.repeat(corpus["mask"][None, :], 32, axis=0)

    def run():
        hs = np.empty((32, 200), dtype=np.float32)
        hi = np.empty((32, 200), dtype=np.int64)
        hn = np.zeros(32, dtype=np.int64)
        batch_scan(q8, scale, stats, queries, masks, 0, 200, hs, hi, hn, tiled=tiled)

    benchmark(run)


@pytest.fixture(scope="module")
def workload_store(tmp_path_factory):
    """20,000 documents of the speed workload (bench/workload.py) in a store."""
    import mempp
    from mempp.bench.workload import build
    from mempp.bench.workload import load

    path = tmp_path_factory.mktemp("w") / "s"
    build(20_000, path, progress=False)
    w = load(20_000)
    store = mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=DIM))
    return store, [w.query_text(q) for q in range(50)], w


def test_lexical_maxscore_query(benchmark, workload_store):
    """The lexical leg (kernels/maxscore.py lex_query), 50 workload questions, top 50."""
    from mempp import planner as P

    store, questions, _ = workload_store
    snap = store.searcher().snapshot
    opt = P.QueryOptions(k=10)
    mask = P.candidate_mask(snap, opt)
    n_cand = int(np.count_nonzero(mask))

    def run():
        for text in questions:
            P.lexical_leg(snap, text, mask, n_cand, opt, np.zeros(0, dtype=np.int64))

    benchmark(run)


def test_analyzer_tokenize(benchmark, workload_store):
    """Analysis at ingest (kernels/tokenizer.py through Analyzer.term_ids), 5,000 workload texts."""
    from mempp.storage.analyzer import Analyzer

    _, _, w = workload_store
    texts = w.texts(0, 5_000)
    ids: dict[str, int] = {}
    benchmark(Analyzer().term_ids, texts, lambda t: ids.setdefault(t, len(ids)))


def test_rrf_select(benchmark):
    """Fusion of one hybrid query: three legs of 50, k = 10 with the date reserve."""
    from mempp.kernels.rrf import rrf_select

    rng = np.random.default_rng(4)
    docs = np.concatenate([rng.choice(100_000, 50, replace=False) for _ in range(3)]).astype(np.int64)
    starts = np.array([0, 50, 100, 150], dtype=np.int64)
    weights = np.array([2.0, 1.0, 1.0])
    dates = rng.integers(0, 10**15, 100_000).astype(np.int64)
    out_d, out_r = np.empty(10, np.int64), np.empty(10, np.bool_)
    fd, fs = np.empty(150, np.int64), np.empty(150, np.float64)
    benchmark(rrf_select, docs, starts, weights, 60, dates, -(2**63), 10, True, out_d, out_r, fd, fs)


def test_batch_fingerprints(benchmark, workload_store):
    """Fingerprints at ingest (hashlib BLAKE2b through ingest.fingerprints), 20,000 workload texts."""
    from mempp.ingest import fingerprints

    _, _, w = workload_store
    texts = w.texts(0, 20_000)
    benchmark(fingerprints, [None] * len(texts), texts)


def test_file_checksum(benchmark, corpus):
    """XXH3-64 (storage/files.py: what every store file records), 154 MB in memory."""
    import xxhash

    data = corpus["emb"].tobytes()  # 154 MB
    benchmark(lambda: xxhash.xxh3_64(data).hexdigest())


@pytest.mark.parametrize("kernel", ["compiled", "numpy"])
def test_normalize_embeddings(benchmark, corpus, kernel):
    """Normalizing supplied embeddings at ingest (kernels/cosine.py ``normalize_rows``, one pass
    bit for bit as numpy's norm) against numpy's own three passes, 20,000 x 384 into one buffer."""
    from mempp.kernels.cosine import normalize_rows

    emb = corpus["emb"][:20_000] * np.float32(3.0)
    out = np.empty_like(emb)

    def with_numpy():
        np.divide(emb, np.linalg.norm(emb, axis=1, keepdims=True), out=out)

    benchmark(with_numpy if kernel == "numpy" else lambda: normalize_rows(emb, out))
