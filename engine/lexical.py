"""The lexical leg (docs/DESIGN.md §3.2): BM25 over the full text, with thread context when asked.

Owns the BM25 constants, the per-thread scratch buffers of the scoring kernels, and the
per-snapshot tables the MaxScore kernel reads (``kernels.maxscore``); the sparse accumulation
with the neighbours' lift (``kernels.context``) for thread context. Also scores given
documents (the tag leg's) for the planner. It must never import the other legs, fusion,
the planner or the store.

Never imports: candidates, tags, vector, vector_batch, fusion, planner, store.
"""

from __future__ import annotations

import threading

import numpy as np

from mempp.kernels import bm25_accumulate, bm25_idf, clear_touched, context_seeds, context_topk, neighbourhood, sparse_moments
from mempp.kernels.maxscore import dense_index, lex_idf, lex_lookup, lex_query, lex_score_docs, lex_topk, scratch_size, segment_table
from mempp.storage import Snapshot

from .caches import segment_caches, version_caches
from .options import QueryOptions, context_scale

K1 = 1.2
B = 0.75

_buffers = threading.local()


def scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's BM25 accumulator (float32, all zero between queries) and touched list, of size >= n."""
    scores = getattr(_buffers, "scores", None)
    if scores is None or len(scores) < n:
        scores = _buffers.scores = np.zeros(max(n, 1024), dtype=np.float32)
        _buffers.touched = np.empty(len(scores), dtype=np.int64)
    return scores, _buffers.touched


def lexical_leg(
    snap: Snapshot, question: str, mask: np.ndarray, n_cand: int, opt: QueryOptions, score_for: np.ndarray, info: dict | None = None
):
    """Top ``depth`` candidates by BM25 (with thread context when asked), and the score of each ``score_for`` doc.

    Without thread context: document-at-a-time MaxScore over every segment in one kernel call
    (``kernels.maxscore``; exact, scores in float64). With it: sparse accumulation of every
    posting, then the neighbours' lift (``kernels.context``). ``info["method"]`` says which ran.
    """
    try:
        return _lexical_leg(snap, question, mask, n_cand, opt, score_for, info)
    except BaseException:
        # An interrupt between accumulation and clean-up would leave this thread's accumulator dirty.
        _buffers.__dict__.pop("scores", None)
        raise


def query_terms(snap: Snapshot, question: str) -> np.ndarray:
    """The question's index terms that the store holds, as sorted unique term ids (int64)."""
    terms = sorted(set(snap.analyzer.terms(question))) if snap.analyzer else []
    return np.array([snap.term_ids[t] for t in terms if t in snap.term_ids], dtype=np.int64)


def _lexical_leg(snap: Snapshot, question: str, mask: np.ndarray, n_cand: int, opt: QueryOptions, score_for: np.ndarray, info):
    ids = query_terms(snap, question)
    reader_df = getattr(snap, "reader_df", None)  # a ReaderView: a term no readable document holds is no term of its store
    if reader_df is not None and len(ids):
        ids = ids[reader_df(ids) > 0]
    extra = np.zeros(len(score_for), dtype=np.float64)
    if len(ids) == 0 or snap.n_docs == 0:
        return np.zeros(0, dtype=np.int64), extra
    context = bool(opt.context) and snap.has_threads  # without threads, context cannot change a ranking
    if not context:
        return _lexical_topk(snap, ids, mask, opt.depth, score_for, info)
    scores, touched, n = bm25_touched(snap, ids, mask)
    depth = opt.depth
    out_ids = np.empty(depth, dtype=np.int64)
    if info is not None:
        info["method"] = "sparse with thread context"
    if n:
        betas = np.asarray(opt.context, dtype=np.float64)
        prev, nxt = snap.thread_links
        mu, sigma = sparse_moments(scores, touched, n, n_cand)
        # Max mode: only the strong matches' neighbourhoods can hold the top (move 0: BM25 is exact).
        seeds = context_seeds(scores, mask, mu, sigma, betas, depth, 0.0) if opt.context_max else None
        pool = neighbourhood(touched[:n] if seeds is None else seeds, prev, nxt, len(betas), mask)
        m = len(pool)
        if info is not None:
            info["ranked"] = m
        out_scores = np.empty(depth, dtype=np.float64)
        scale = context_scale(snap, opt)
        got = context_topk(
            scores, mu, sigma, pool, m, prev, nxt, betas, scale, mask, depth, out_ids, out_scores, np.empty(m), opt.context_max
        )
        if len(score_for):
            context_topk(
                scores, mu, sigma, score_for, len(score_for), prev, nxt, betas, scale, mask, 0, out_ids[:0], out_scores[:0], extra,
                opt.context_max,
            )
    else:
        got = 0
    clear_touched(scores, touched, n)
    return out_ids[:got], extra


def bm25_n(snap: Snapshot) -> int:
    """BM25's N as the lexical leg counts it (a ``ReaderView``: the readable documents)."""
    return int(snap.n_global) if hasattr(snap, "reader_df") else int(snap.n_live)


def term_dfs(snap: Snapshot, ids: np.ndarray) -> np.ndarray:
    """Each term's document frequency as the lexical leg counts it (a ``ReaderView``: among the
    readable documents)."""
    if hasattr(snap, "reader_df"):
        return np.asarray(snap.reader_df(ids), dtype=np.int64)
    return _runs(snap, np.ascontiguousarray(ids, dtype=np.int64))[-1]  # one kernel call over every segment's term index


def bm25_touched(snap: Snapshot, ids: np.ndarray, mask: np.ndarray, df: np.ndarray | None = None):
    """Every candidate's BM25 score for the terms ``ids``, accumulated sparsely in this thread's
    scratch buffer: ``(scores, touched, n)``; ``touched[:n]`` are the documents holding a term.
    The caller must ``clear_touched(scores, touched, n)`` when done (the scratch is all zero
    between queries). ``df``: the terms' document frequencies over the whole store when this
    snapshot holds part of it (distributed scoring; default: its own), with which the idf and,
    with the snapshot's ``avg_length``, the scores are those of the whole store.
    """
    looked = [(entry, *entry.postings.lookup(ids)) for entry in snap.segments]
    n_global = snap.n_live
    if df is None and hasattr(snap, "reader_df"):
        df = snap.reader_df(ids)  # a ReaderView: the readable documents' frequencies and N
    if df is None:
        df = np.zeros(len(ids), dtype=np.int64)
        for _, _, _, dfs in looked:
            df += dfs
    else:
        n_global = snap.n_global  # a shard of a store (mempp.shards): the whole store's N
    idf = bm25_idf(n_global, df)
    full, touched = scratch(snap.n_docs)
    scores = full[: snap.n_docs]
    n = 0
    avgdl = snap.avg_length
    try:
        for entry, starts, ends, dfs in looked:
            if dfs.any():
                post = entry.postings
                n = bm25_accumulate(
                    post.docs, post.tfs, starts, ends, idf, entry.segment.lengths, avgdl, K1, B, mask, entry.base, scores, touched, n
                )
    except BaseException:
        _buffers.__dict__.pop("scores", None)  # an interrupted kernel may leave it dirty: a fresh one next time
        raise
    return scores, touched, n


def _lex_table(snap: Snapshot) -> tuple[np.ndarray, tuple, list]:
    """The snapshot's segment table and term index for the MaxScore kernels (built on first use, kept with the snapshot)."""
    caches = version_caches(snap)
    cached = caches.lex_table
    if cached is None:
        avgdl = snap.avg_length
        table, index, keep = segment_table(
            [
                (p.docs, p.tfs, e.norms(avgdl, K1, B), p.terms, p.starts, p.dfs, e.base, _dense_index(e))
                for e in snap.segments
                for p in (e.postings,)
            ]
        )
        cached = caches.lex_table = (table, index, keep)
    return cached  # keep (the arrays the table holds addresses of): the caller holds it while the kernels run


def _lex_scratch() -> tuple[np.ndarray, np.ndarray]:
    """This thread's scratch buffers for :func:`lex_topk` (the float one all zero between queries)."""
    fs = getattr(_buffers, "lex_f", None)
    if fs is None:
        fs = _buffers.lex_f = np.zeros(scratch_size(), dtype=np.float64)
        _buffers.lex_i = np.zeros(scratch_size(), dtype=np.int64)
    return fs, _buffers.lex_i


def _dense_index(entry) -> tuple[np.ndarray, np.ndarray]:
    """The segment's bitsets of common terms (``kernels.maxscore.dense_index``), kept with the entry across snapshots."""
    caches = segment_caches(entry)
    cached = caches.dense_index
    if cached is None or cached[0] is not entry.postings:
        post = entry.postings
        cached = caches.dense_index = (post, dense_index(post.docs, post.starts, post.dfs, entry.segment.n))
    return cached[1]


def _lexical_topk(snap: Snapshot, ids: np.ndarray, mask: np.ndarray, depth: int, score_for: np.ndarray, info):
    """Top ``depth`` by BM25 without thread context: one MaxScore call over all segments (``kernels.maxscore``)."""
    # `keep` stays referenced here: another thread may replace the cached table meanwhile.
    if hasattr(snap, "reader_df"):  # a ReaderView: its own N and frequencies, as lexical_top_scored takes them
        got_ids, _ = lexical_top_scored(snap, ids, snap.reader_df(ids), mask, depth)
        if info is not None:
            info["method"] = f"maxscore ({len(ids)} terms, the reader's statistics)"
        return got_ids, lexical_doc_scores(snap, ids, score_for)
    table, index, keep = _lex_table(snap)
    out_ids = np.empty(depth, dtype=np.int64)
    stats = np.zeros(4, dtype=np.int64)
    fs, is_ = _lex_scratch()
    got = lex_query(table, *index, ids, snap.n_live, K1, mask, depth, out_ids, np.empty(depth, dtype=np.float64), stats, fs, is_)
    extra = lexical_doc_scores(snap, ids, score_for)
    if info is not None:
        info["method"] = (
            f"maxscore ({len(ids)} terms, {stats[3]} postings, {stats[0]} read, {stats[1]} documents completed, {stats[2]} read to seed)"
        )
    del keep
    return out_ids[:got], extra


def _runs(snap: Snapshot, ids: np.ndarray):
    """``(table, keep, starts, ends, slots, df)``: the runs of the terms ``ids`` in the snapshot's segment
    table (``kernels.lextable.lex_lookup``) and their document frequencies over its segments."""
    table, index, keep = _lex_table(snap)
    starts, ends, slots = (np.empty((len(ids), table.shape[0]), dtype=np.int64) for _ in range(3))
    own_df = np.empty(len(ids), dtype=np.int64)
    lex_lookup(*index, ids, starts, ends, own_df, slots)
    return table, keep, starts, ends, slots, own_df


def _lookup(snap: Snapshot, ids: np.ndarray, df: np.ndarray | None):
    """``(table, keep, starts, ends, slots, idf)`` of the terms ``ids`` in the snapshot's segment table; ``df``: as in
    :func:`bm25_touched` (the idf is then the whole store's)."""
    table, keep, starts, ends, slots, own_df = _runs(snap, ids)
    idf = np.empty(len(ids), dtype=np.float64)
    if df is None and hasattr(snap, "reader_df"):
        df = snap.reader_df(ids)  # a ReaderView: the readable documents' frequencies and N
    if df is None:
        lex_idf(snap.n_live, own_df, idf)
    else:
        lex_idf(snap.n_global, np.asarray(df, dtype=np.int64), idf)
    return table, keep, starts, ends, slots, idf


def lexical_doc_scores(snap: Snapshot, ids: np.ndarray, docs: np.ndarray, df: np.ndarray | None = None) -> np.ndarray:
    """The BM25 score (float64, as the MaxScore kernel sums it) of each of ``docs`` for the terms ``ids``; ``df`` as in
    :func:`bm25_touched`."""
    extra = np.zeros(len(docs), dtype=np.float64)
    if len(docs) == 0 or len(ids) == 0:
        return extra
    table, keep, starts, ends, _, idf = _lookup(snap, ids, df)
    order = np.argsort(docs, kind="stable")
    sorted_scores = np.empty(len(docs), dtype=np.float64)
    lex_score_docs(table, starts, ends, idf, K1, np.ascontiguousarray(docs[order], dtype=np.int64), sorted_scores)
    extra[order] = sorted_scores
    del keep
    return extra


def lexical_top_scored(snap: Snapshot, ids: np.ndarray, df: np.ndarray, mask: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``depth`` by BM25 without thread context and their scores, with the whole store's ``df``
    (a shard of a store: ``mempp.shards``): the kernels of ``lex_query`` (lookup, idf, MaxScore),
    the idf from the whole store's statistics, so each score is the one the whole store gives."""
    out_ids = np.empty(depth, dtype=np.int64)
    out_scores = np.empty(depth, dtype=np.float64)
    if len(ids) == 0 or snap.n_docs == 0:
        return out_ids[:0], out_scores[:0]
    table, keep, starts, ends, slots, idf = _lookup(snap, ids, df)
    fs, is_ = _lex_scratch()
    got = lex_topk(table, starts, ends, slots, idf, K1, mask, depth, out_ids, out_scores, np.zeros(4, dtype=np.int64), fs, is_)
    del keep
    return out_ids[:got], out_scores[:got]
