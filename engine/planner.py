"""The read path of one query: candidates, the three legs, fusion, reserve (DESIGN §2)."""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from mempp.kernels import (
    TopK,
    bm25_accumulate,
    bm25_idf,
    candidate_moments,
    clear_touched,
    context_topk,
    masked_dot_dense,
    masked_dot_max,
    masked_dot_topk,
    sparse_moments,
    topk_touched,
    with_neighbours,
)
from mempp.storage import FOREVER, NAT, Snapshot
from mempp.storage.analyzer import STOPWORDS

from .fusion import rrf, select
from .types import LEGS

K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class QueryOptions:
    k: int = 10
    as_of: int | None = None  # µs UTC, end of day already applied
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0)  # lexical, tag, vector
    depth: int = 50
    reserve: bool = True
    authors: tuple[str, ...] | None = None
    threads: tuple[str, ...] | None = None
    channels: tuple[str, ...] | None = None
    date_from: int | None = None
    date_to: int | None = None
    context: tuple[float, ...] = ()  # thread-context weights for neighbours 1, 2, ... steps away
    context_length: float | None = None  # neighbours count fully for documents of at most this many terms
    context_max: bool = False  # a neighbour lifts a document to betas[h] x its score, not by it (see kernels.context)


def candidate_mask(snap: Snapshot, opt: QueryOptions) -> np.ndarray:
    """uint8 mask over doc ids: valid at ``as_of`` and passing every filter.

    Valid at θ: ``date ≤ θ`` and no supersession effective at or before θ
    (θ = +∞ when ``as_of`` is None, where undated documents count too).
    """
    if opt.as_of is None:
        mask = snap.valid_until == FOREVER
    else:
        t = opt.as_of
        mask = (snap.dates != NAT) & (snap.dates <= t) & (snap.valid_until > t)
    if opt.date_from is not None:
        mask &= (snap.dates != NAT) & (snap.dates >= opt.date_from)
    if opt.date_to is not None:
        mask &= (snap.dates != NAT) & (snap.dates <= opt.date_to)
    for values, facet in ((opt.authors, snap.authors), (opt.threads, snap.threads), (opt.channels, snap.channels)):
        if values is not None:
            codes = [facet.index[v] for v in values if v in facet.index]
            mask &= np.isin(facet.codes, np.asarray(codes, dtype=np.int32))
    return mask.view(np.uint8)


# --- tag leg: which authors does the question name? ----------------------------------------------
_WORDS = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"(?<=[^\W_])['\u2019]s\b", "", text)
    return _WORDS.findall(text)


class NameMatcher:
    """Finds the authors a question names: the exact label, the full name, or a first or last name."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.by_token: dict[str, set[int]] = {}
        self.full: list[tuple[str, ...]] = []
        for code, name in enumerate(self.names):
            toks = tuple(_words(name))
            self.full.append(toks)
            parts = {toks[0], toks[-1]} if toks else set()
            for tok in parts:
                if len(tok) >= 2 and tok not in STOPWORDS and not tok.isdigit():
                    self.by_token.setdefault(tok, set()).add(code)

    def match(self, question: str) -> list[int]:
        words = _words(question)
        found: set[int] = set()
        joined = " " + " ".join(words) + " "
        for code, toks in enumerate(self.full):
            if toks and (" " + " ".join(toks) + " ") in joined:
                found.add(code)
        for w in words:
            found.update(self.by_token.get(w, ()))
        return sorted(found)


def context_scale(snap: Snapshot, opt: QueryOptions) -> np.ndarray:
    """Per-document share of the neighbours: ``min(1, context_length / length)``; empty when unscaled.

    A short turn of a conversation is read with its neighbours; a long, self-contained
    document (an email, a policy page) much less so.
    """
    if not opt.context or opt.context_length is None:
        return np.zeros(0, dtype=np.float32)
    lengths = snap.lengths
    return np.minimum(1.0, opt.context_length / np.maximum(lengths, 1.0)).astype(np.float32)


# --- legs ------------------------------------------------------------------------------------------
def lexical_leg(snap: Snapshot, question: str, mask: np.ndarray, n_cand: int, opt: QueryOptions, score_for: np.ndarray):
    """Top ``depth`` candidates by BM25 (with thread context when asked), and the score of each ``score_for`` doc."""
    terms = sorted(set(snap.analyzer.terms(question))) if snap.analyzer else []
    ids = np.array([snap.term_ids[t] for t in terms if t in snap.term_ids], dtype=np.int64)
    extra = np.zeros(len(score_for), dtype=np.float64)
    if len(ids) == 0 or snap.n_docs == 0:
        return np.zeros(0, dtype=np.int64), extra
    idf = bm25_idf(snap.n_docs, snap.global_df(ids))
    scores = np.zeros(snap.n_docs, dtype=np.float32)
    touched = np.empty(snap.n_docs, dtype=np.int64)
    n = 0
    avgdl = snap.avg_length
    for entry in snap.segments:
        post = entry.postings
        starts, ends, dfs = post.lookup(ids)
        if not dfs.any():
            continue
        n = bm25_accumulate(
            post.docs, post.tfs, starts, ends, idf, entry.segment.lengths, avgdl, K1, B, mask, entry.base, scores, touched, n
        )
    depth = opt.depth
    out_ids = np.empty(depth, dtype=np.int64)
    if opt.context and n:
        betas = np.asarray(opt.context, dtype=np.float64)
        prev, nxt = snap.thread_links
        mu, sigma = sparse_moments(scores, touched, n, n_cand)
        pool = np.empty(n * (2 * len(betas) + 1), dtype=np.int64)
        seen = np.zeros(snap.n_docs, dtype=np.uint8)
        m = with_neighbours(touched, n, prev, nxt, len(betas), mask, seen, pool)
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
        out_scores = np.empty(depth, dtype=np.float32)
        got = topk_touched(scores, touched, n, depth, out_ids, out_scores)
        if len(score_for):
            extra = scores[score_for].astype(np.float64)
    clear_touched(scores, touched, n)
    return out_ids[:got], extra


def tag_leg(snap: Snapshot, codes: Iterable[int], mask: np.ndarray) -> np.ndarray:
    """Candidates written by the named authors (unranked; the caller orders them)."""
    codes = np.asarray(list(codes), dtype=np.int32)
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    hit = np.isin(snap.authors.codes, codes) & mask.view(bool)
    return np.flatnonzero(hit).astype(np.int64)


def vector_leg(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions) -> np.ndarray:
    """Exact masked cosine scan; top ``depth`` doc ids.

    A document with extra window vectors scores as its best window; with thread context
    each score is lifted by its neighbours'. Both need every candidate's score (a dense
    pass); otherwise a heap keeps the best ``depth`` during the scan.
    """
    depth = opt.depth
    if opt.context or snap.has_windows:
        dense = np.zeros(snap.n_docs, dtype=np.float32)
        for entry in snap.segments:
            masked_dot_dense(entry.segment.embeddings, query, mask, entry.base, dense)
            if entry.window_rows is not None:
                masked_dot_max(entry.window_embeddings, entry.window_rows, query, mask, entry.base, dense)
        mu, sigma = candidate_moments(dense, mask)
        cands = np.flatnonzero(mask).astype(np.int64)
        prev, nxt = snap.thread_links
        out_ids = np.empty(depth, dtype=np.int64)
        got = context_topk(
            dense, mu, sigma, cands, len(cands), prev, nxt, np.asarray(opt.context, dtype=np.float64),
            context_scale(snap, opt), mask, depth, out_ids, np.empty(depth), np.empty(len(cands)), opt.context_max,
        )
        return out_ids[:got]
    heap = TopK(depth, dtype=np.float32)
    for entry in snap.segments:
        heap.n = masked_dot_topk(entry.segment.embeddings, query, mask, entry.base, depth, heap.scores, heap.ids, heap.n)
    return heap.result()[0]


def run(snap: Snapshot, question: str, qvec: np.ndarray | None, opt: QueryOptions, matcher: NameMatcher):
    """Execute one query; returns ``(selected [(doc, reserved)], fused scores, rankings, plan details)``."""
    t0 = time.perf_counter()
    mask = candidate_mask(snap, opt)
    n_cand = int(np.count_nonzero(mask))
    timings = {"candidates": (time.perf_counter() - t0) * 1e3}
    weights = dict(zip(LEGS, opt.weights))
    rankings: dict[str, np.ndarray] = {}
    matched_codes = matcher.match(question) if weights["tag"] and question else []
    tag_docs = tag_leg(snap, matched_codes, mask) if matched_codes and n_cand else np.zeros(0, dtype=np.int64)

    if (weights["lexical"] or len(tag_docs)) and n_cand and question:
        t = time.perf_counter()
        lex, tag_scores = lexical_leg(snap, question, mask, n_cand, opt, tag_docs)
        if weights["lexical"]:
            rankings["lexical"] = lex
        timings["lexical"] = (time.perf_counter() - t) * 1e3
    else:
        tag_scores = np.zeros(len(tag_docs), dtype=np.float64)
    if weights["tag"] and len(tag_docs):
        # Ranked by relevance (BM25) to the question, then most recent, then latest ingested.
        raw = snap.dates[tag_docs]
        dates = np.where(raw == NAT, -np.inf, raw.astype(np.float64))
        order = np.lexsort((-tag_docs, -dates, -tag_scores.astype(np.float64)))
        rankings["tag"] = tag_docs[order][: opt.depth]
    if weights["vector"] and qvec is not None and n_cand:
        t = time.perf_counter()
        rankings["vector"] = vector_leg(snap, qvec, mask, opt)
        timings["vector"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    ranked_lists = {leg: [int(d) for d in r] for leg, r in rankings.items()}
    fused = rrf(ranked_lists, weights)
    dates = {d: (None if snap.dates[d] == NAT else int(snap.dates[d])) for d in fused}
    chosen = select(fused, dates, opt.k, opt.reserve)
    timings["fusion"] = (time.perf_counter() - t) * 1e3
    legs = {
        leg: {"weight": weights[leg], "returned": len(ranked_lists.get(leg, ()))}
        for leg in LEGS
    }
    legs["vector"]["method"] = "exact masked scan" + (
        " (best window)" if snap.has_windows else ""
    )
    if opt.context:
        for leg in ("lexical", "vector"):
            legs[leg]["context"] = list(opt.context)
    details = {
        "candidates": n_cand,
        "legs": legs,
        "matched_authors": tuple(snap.authors.names[c] for c in matched_codes),
        "timings_ms": timings,
    }
    return chosen, fused, ranked_lists, details
