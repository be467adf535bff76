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
    bm25_accumulate,
    candidate_moments,
    clear_touched,
    context_topk,
    masked_dot_dense,
    masked_dot_topk,
    topk_touched,
)
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
