"""The read path of one query: candidates, the three legs, fusion, reserve (DESIGN §2)."""

from __future__ import annotations

import math
import re
import threading
import time
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from mempp.kernels import (
    TopK,
    batch_topk,
    heap_push_many,
    bm25_accumulate,
    bm25_idf,
    rescore_exact,
    candidate_moments,
    clear_touched,
    context_topk,
    masked_dot_dense,
    masked_dot_max,
    masked_dot_topk,
    sparse_moments,
    with_neighbours,
)
from mempp.kernels.cosine import certified_tops, embedding_table
from mempp.kernels.int8dot import BATCH_ROWS, Int8Batch, Int8Query, batch_scan, tiled_scan_ok
from mempp.kernels.maxscore import dense_index, lex_idf, lex_lookup, lex_query, lex_score_docs, scratch_size, segment_table
from mempp.kernels.masks import ValidIndex, keep_codes, keep_dates_by_rule, keep_ids, valid_by_rule
from mempp.storage import FOREVER, NAT, Snapshot
from mempp.storage.analyzer import STOPWORDS

from .fusion import fuse
from .types import LEGS

K1 = 1.2
B = 0.75
RESCORE = 4  # the int8 scan keeps RESCORE x depth rows (at least depth + 100) for the exact rescore
KEEP_PER_CANDIDATES = 200  # ... and at least one row per this many candidates
# Bulk scoring (int8 queries, a wider error bound) keeps, per query, BATCH_KEEP_BASE rows plus one per
# BATCH_KEEP_PER_CANDIDATES candidates (and at least what a single query keeps): on the 100k workload a
# query needs 130 to 410 rows to certify (more with more candidates); one not certified is answered alone.
BATCH_KEEP_BASE = 250
BATCH_KEEP_PER_CANDIDATES = 250

_buffers = threading.local()


def _scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's BM25 accumulator (float32, all zero between queries) and touched list, of size >= n."""
    scores = getattr(_buffers, "scores", None)
    if scores is None or len(scores) < n:
        scores = _buffers.scores = np.zeros(max(n, 1024), dtype=np.float32)
        _buffers.touched = np.empty(len(scores), dtype=np.int64)
    return scores, _buffers.touched


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
    ann: str = "auto"  # vector leg over ANN-indexed ranges: "auto" (cost model), "ann" (always), "exact" (never)


def candidate_mask(snap: Snapshot, opt: QueryOptions, out: np.ndarray | None = None) -> np.ndarray:
    """uint8 mask over doc ids: valid at ``as_of`` and passing every filter (do not modify it).

    ``out``: a uint8 array of ``n_docs`` to write the mask into (and return), rather than a new
    or cached one (bulk scoring fills one row per query).

    Valid at θ: ``date ≤ θ`` and no supersession effective at or before θ
    (θ = +∞ when ``as_of`` is None, where undated documents count too). The mask for
    "now" is computed once per snapshot; a mask at a date starts from the snapshot's
    checkpoint bitsets (``kernels.masks.ValidIndex``). On a large snapshot the first dated
    query starts building them in a background thread and, until they are built, masks come
    from one pass over the dates (:func:`valid_index`): a new version costs no query the build.
    A date range narrows it through the date order; a facet filter through the ids of its
    values' roaring bitmaps when they hold under an eighth of the documents, else through
    one pass over the facet's codes.
    """
    filtered = opt.date_from is not None or opt.date_to is not None or any(
        v is not None for v in (opt.authors, opt.threads, opt.channels)
    )
    if out is not None:
        if opt.as_of is not None and not filtered:
            valid_index(snap).mask(int(opt.as_of), out)
        else:
            out[:] = candidate_mask(snap, opt)
        return out
    cache = snap.__dict__.setdefault("_mask_cache", {})
    if opt.as_of is None:
        mask = cache.get("now")
        if mask is None:
            mask = cache["now"] = (snap.valid_until == FOREVER).view(np.uint8)
            mask.flags.writeable = False
    else:
        vi = valid_index(snap, wait=False)
        if vi is not None:
            mask = vi.mask(int(opt.as_of))
        else:
            mask = np.empty(snap.n_docs, dtype=np.uint8)
            valid_by_rule(snap.dates, snap.valid_until, np.int64(NAT), np.int64(opt.as_of), mask)
    if opt.date_from is not None or opt.date_to is not None:
        lo = opt.date_from if opt.date_from is not None else NAT + 1
        hi = opt.date_to if opt.date_to is not None else FOREVER
        vi = valid_index(snap, wait=False)
        if vi is not None:
            mask = vi.keep_dates(mask, lo, hi)
        else:
            kept = np.empty(snap.n_docs, dtype=np.uint8)
            keep_dates_by_rule(mask, snap.dates, np.int64(NAT), np.int64(lo), np.int64(hi), kept)
            mask = kept
    for values, facet in ((opt.authors, snap.authors), (opt.threads, snap.threads), (opt.channels, snap.channels)):
        if values is not None:
            mask = _keep_facet(mask, facet, values)
    return mask


def date_bounds(opt: QueryOptions) -> tuple[int | None, int | None]:
    """Event dates (µs, inclusive; None: unbounded) outside which no candidate of ``opt`` lies:
    a document valid at ``as_of`` is dated at or before it, and the date range bounds both sides."""
    hi = min((t for t in (opt.as_of, opt.date_to) if t is not None), default=None)
    return opt.date_from, hi


BACKGROUND_INDEX_DOCS = 200_000  # from this many documents, the first dated query does not wait for the ValidIndex


def valid_index(snap: Snapshot, wait: bool = True) -> ValidIndex | None:
    """The snapshot's :class:`ValidIndex` (built once, under the snapshot's lock).

    ``wait=False``: on a snapshot of ``BACKGROUND_INDEX_DOCS`` or more, None while it is not
    built yet, its build started in a background thread (60 ms at 1M documents, where one
    mask by the plain rule costs about 1 ms); smaller ones build it here.
    """
    vi = snap.__dict__.get("_valid_index")
    if vi is not None:
        return vi
    if not wait and snap.n_docs >= BACKGROUND_INDEX_DOCS:
        with _START_LOCK:
            if "_valid_index_build" not in snap.__dict__:
                builder = threading.Thread(target=_build_quietly, args=(snap,), name="mempp-valid-index", daemon=True)
                snap.__dict__["_valid_index_build"] = builder
                builder.start()
        return snap.__dict__.get("_valid_index")
    with _START_LOCK:
        lock = snap.__dict__.setdefault("_valid_index_lock", threading.Lock())
    with lock:  # one per snapshot: an older version's build in the background does not hold up this one's
        vi = snap.__dict__.get("_valid_index")
        if vi is None:
            vi = snap.__dict__["_valid_index"] = ValidIndex(snap.dates, snap.valid_until, NAT, FOREVER)
    return vi


def _build_quietly(snap: Snapshot) -> None:
    try:
        valid_index(snap)
    except BaseException:  # the next waiting caller builds it again, and sees the error
        pass


_START_LOCK = threading.Lock()


def _keep_facet(mask: np.ndarray, facet, values: Iterable[str]) -> np.ndarray:
    codes = sorted({facet.index[v] for v in values if v in facet.index})
    out = np.empty(len(mask), dtype=np.uint8)
    ids = _rare_ids(facet, codes)
    if ids is not None:
        keep_ids(mask, ids, out)
    else:
        keep_codes(mask, facet.codes, _wanted(facet, codes), out)
    return out


def _rare_ids(facet, codes: Sequence[int]) -> np.ndarray | None:
    """The ids (ascending uint32) of the documents with any of ``codes`` when they are under an
    eighth of all (from the facet's cached roaring bitmaps), else None: a pass over the codes is cheaper."""
    if sum(int(facet.counts()[c]) for c in codes) * 8 >= len(facet.codes):
        return None
    return np.frombuffer(facet.union(list(codes)).to_array(), dtype=np.uint32)


def _wanted(facet, codes: Sequence[int]) -> np.ndarray:
    wanted = np.zeros(len(facet.names) + 1, dtype=np.uint8)  # indexed by code + 1 (-1: no value)
    wanted[np.asarray(codes, dtype=np.int64) + 1] = 1
    return wanted


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


def _lexical_leg(snap: Snapshot, question: str, mask: np.ndarray, n_cand: int, opt: QueryOptions, score_for: np.ndarray, info):
    terms = sorted(set(snap.analyzer.terms(question))) if snap.analyzer else []
    ids = np.array([snap.term_ids[t] for t in terms if t in snap.term_ids], dtype=np.int64)
    extra = np.zeros(len(score_for), dtype=np.float64)
    if len(ids) == 0 or snap.n_docs == 0:
        return np.zeros(0, dtype=np.int64), extra
    context = bool(opt.context) and snap.has_threads  # without threads, context cannot change a ranking
    if not context:
        return _lexical_topk(snap, ids, mask, opt.depth, score_for, info)
    looked = [(entry, *entry.postings.lookup(ids)) for entry in snap.segments]
    df = np.zeros(len(ids), dtype=np.int64)
    for _, _, _, dfs in looked:
        df += dfs
    idf = bm25_idf(snap.n_docs, df)
    full, touched = _scratch(snap.n_docs)
    scores = full[: snap.n_docs]
    n = 0
    avgdl = snap.avg_length
    depth = opt.depth
    if info is not None:
        info["method"] = "sparse with thread context"
    for entry, starts, ends, dfs in looked:
        if not dfs.any():
            continue
        post = entry.postings
        n = bm25_accumulate(
            post.docs, post.tfs, starts, ends, idf, entry.segment.lengths, avgdl, K1, B, mask, entry.base, scores, touched, n
        )
    out_ids = np.empty(depth, dtype=np.int64)
    if n:
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
        got = 0
    clear_touched(scores, touched, n)
    return out_ids[:got], extra


def _lex_table(snap: Snapshot) -> tuple[np.ndarray, tuple, list]:
    """The snapshot's segment table and term index for the MaxScore kernels (built on first use, kept with the snapshot)."""
    cached = snap.__dict__.get("_lex_table")
    if cached is None:
        avgdl = snap.avg_length
        table, index, keep = segment_table(
            [
                (p.docs, p.tfs, e.norms(avgdl, K1, B), p.terms, p.starts, p.dfs, e.base, _dense_index(e))
                for e in snap.segments
                for p in (e.postings,)
            ]
        )
        cached = snap.__dict__["_lex_table"] = (table, index, keep)
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
    cached = entry.__dict__.get("_dense_index")
    if cached is None or cached[0] is not entry.postings:
        post = entry.postings
        cached = entry.__dict__["_dense_index"] = (post, dense_index(post.docs, post.starts, post.dfs, entry.segment.n))
    return cached[1]


def _lexical_topk(snap: Snapshot, ids: np.ndarray, mask: np.ndarray, depth: int, score_for: np.ndarray, info):
    """Top ``depth`` by BM25 without thread context: one MaxScore call over all segments (``kernels.maxscore``)."""
    # `keep` stays referenced here: another thread may replace the cached table meanwhile.
    table, index, keep = _lex_table(snap)
    out_ids = np.empty(depth, dtype=np.int64)
    stats = np.zeros(4, dtype=np.int64)
    fs, is_ = _lex_scratch()
    got = lex_query(table, *index, ids, snap.n_docs, K1, mask, depth, out_ids, np.empty(depth, dtype=np.float64), stats, fs, is_)
    extra = np.zeros(len(score_for), dtype=np.float64)
    if len(score_for):
        n_seg = table.shape[0]
        starts, ends, slots = (np.empty((len(ids), n_seg), dtype=np.int64) for _ in range(3))
        df = np.empty(len(ids), dtype=np.int64)
        idf = np.empty(len(ids), dtype=np.float64)
        lex_lookup(*index, ids, starts, ends, df, slots)
        lex_idf(snap.n_docs, df, idf)
        order = np.argsort(score_for, kind="stable")
        sorted_scores = np.empty(len(score_for), dtype=np.float64)
        lex_score_docs(table, starts, ends, idf, K1, np.ascontiguousarray(score_for[order], dtype=np.int64), sorted_scores)
        extra[order] = sorted_scores
    if info is not None:
        info["method"] = (
            f"maxscore ({len(ids)} terms, {stats[3]} postings, {stats[0]} read, {stats[1]} documents completed, {stats[2]} read to seed)"
        )
    del keep
    return out_ids[:got], extra


def tag_leg(snap: Snapshot, codes: Iterable[int], mask: np.ndarray) -> np.ndarray:
    """Candidates written by the named authors, ascending (unranked; the caller orders them)."""
    codes = sorted(set(int(c) for c in codes))
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    ids = _rare_ids(snap.authors, codes)
    if ids is not None:
        return ids[mask[ids].view(bool)].astype(np.int64)
    hit = np.empty(len(mask), dtype=np.uint8)
    keep_codes(mask, snap.authors.codes, _wanted(snap.authors, codes), hit)
    return np.flatnonzero(hit).astype(np.int64)


def vector_leg(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions, info: dict | None = None) -> np.ndarray:
    """Top ``depth`` doc ids by cosine over the candidates, exactly.

    A document with extra window vectors scores as its best window; with thread context
    each score is lifted by its neighbours'. Both need every candidate's score (a dense
    pass). Otherwise a heap keeps the best ``depth`` during the scan, and segments with an
    int8 copy are scanned through it: the best ``RESCORE x depth`` rows by approximate score
    are rescored exactly, and the result is certified against the int8 error bound (a row
    left out could not have entered the top ``depth``) or the scan is redone in float32.
    ``info`` receives how the leg ran.

    ``mask`` must be ``candidate_mask(snap, opt)`` or hold fewer documents: the int8 scan reads
    only the rows dated inside ``date_bounds(opt)``.
    """
    depth = opt.depth
    if (opt.context and snap.has_threads) or snap.has_windows:
        if info is not None:
            info["method"] = "exact masked scan" + (" (best window)" if snap.has_windows else "")
        return _dense_vector_leg(snap, query, mask, opt)
    segments = snap.segments
    ann_used: list[str] = []
    ann_hits: list[tuple[np.ndarray, np.ndarray]] = []
    ann = ann_searches(snap, mask, opt)
    if ann:
        covered = np.zeros(len(segments), dtype=bool)
        for a, n_cand, want in ann:
            lo, hi = a.first, a.first + a.n
            labels, _ = a.knn(query, want, ef=max(want, ANN_EF_MIN))
            hits = np.sort(labels[mask[labels].view(bool)])
            if len(hits) < min(depth, n_cand):
                continue  # the filter left too few: scan this range exactly
            ann_hits.append((hits, _rescore(snap, hits, query)))
            for i, e in enumerate(segments):
                if lo <= e.base and e.base + e.segment.n <= hi:
                    covered[i] = True
            ann_used.append(f"{n_cand}/{a.n} candidates, k={want}")
        segments = [e for i, e in enumerate(segments) if not covered[i]]

    def start() -> TopK:  # a heap holding the ANN ranges' (exactly rescored) results
        heap = TopK(depth, dtype=np.float32)
        for hits, scores in ann_hits:
            heap.n = heap_push_many(heap.scores, heap.ids, heap.n, depth, scores, hits)
        return heap

    exact = start()
    quant = [e for e in segments if e.q8 is not None]
    for entry in segments:
        if entry.q8 is None:
            exact.n = masked_dot_topk(entry.segment.embeddings, query, mask, entry.base, depth, exact.scores, exact.ids, exact.n)
    if quant:
        # Keep enough rows that the gap between the depth-th score and the kept floor exceeds the
        # rounding bound: the gap shrinks as candidates grow (more near-ties at the top).
        keep = int8_keep(depth, int(np.count_nonzero(mask)))
        approx = TopK(keep, dtype=np.float32)
        prepared = Int8Query(query)
        lo, hi = date_bounds(opt)
        spans = [e.q8_span(lo, hi) for e in quant]
        for entry, span in zip(quant, spans):
            approx.n = prepared.scan(
                entry.q8, entry.q8_scale, entry.q8_stats(), mask, entry.base, keep, approx.scores, approx.ids, approx.n, entry.q8_order, span
            )
        full = approx.n == keep
        floor = float(approx.scores[0]) if full else -np.inf  # the heap's root: the worst approximate score kept
        ids = np.sort(approx.ids[: approx.n])
        exact_scores = _rescore(snap, ids, query)
        exact.n = heap_push_many(exact.scores, exact.ids, exact.n, depth, exact_scores, ids)
        certified, band = True, 0
        if full and exact.n:
            eps = max(prepared.error_bound(e.q8_stats()) for e in quant)
            worst_kept = float(exact.scores[0]) if exact.n == depth else -np.inf
            # A row not kept has approximate <= floor, so exact <= floor + eps.
            certified = floor + eps < worst_kept
            if not certified and worst_kept > -np.inf:
                # Rows that could still beat the depth-th exact score have approximate >= worst_kept - eps:
                # collect them all in a second int8 pass and rescore them exactly.
                out = np.empty(max(4 * keep, 4096), dtype=np.int64)
                n_out = 0
                for entry, span in zip(quant, spans):
                    n_out = prepared.above(
                        entry.q8, entry.q8_scale, entry.q8_stats(), mask, entry.base, worst_kept - eps, out, n_out, entry.q8_order, span
                    )
                    if n_out < 0:
                        break
                if n_out >= 0:
                    more = np.setdiff1d(out[:n_out], ids)  # sorted; the kept rows are in the heap already
                    exact.n = heap_push_many(exact.scores, exact.ids, exact.n, depth, _rescore(snap, more, query), more)
                    certified, band = True, len(more)
        if not certified:
            exact = start()
            for entry in segments:
                exact.n = masked_dot_topk(entry.segment.embeddings, query, mask, entry.base, depth, exact.scores, exact.ids, exact.n)
        if info is not None and band:
            info["band_rows"] = band
        method = "int8 scan, exact rescore" + (", then the rows within the error bound" if band else "") + (
            "" if certified else ", not certified: exact rescan"
        )
    else:
        method = "exact masked scan" if segments else ""
    if info is not None:
        info["method"] = "; ".join([f"hnsw ({u})" for u in ann_used] + ([method] if method else []))
    return exact.result()[0]


# Cost model of the ANN choice, measured on the 2-core development machine (`mempp bench
# --clustered --ann`, bench/README.md): the int8 masked scan costs about 1 ns per document of a
# range plus 30 ns per candidate; an HNSW search (384-d, M 16) about 60 us plus 7 us per
# requested neighbour (ef = k), rescoring included. Measured with M 16; with M 32 (the default since
# the 1M recall runs) a search costs more, and the constants were not measured again.
EXACT_NS_PER_DOC, EXACT_NS_PER_CANDIDATE = 1.0, 30.0
ANN_US_BASE, ANN_US_PER_RESULT = 60.0, 7.0
ANN_EF_MIN = 64
ANN_OVERSAMPLE = 3.0  # 1.5 gave recall@10 0.938 at 1M clustered (10-50% candidates); 3.0 gave 0.955


def ann_searches(snap: Snapshot, mask: np.ndarray, opt: QueryOptions) -> list:
    """The ANN indexes :func:`vector_leg` searches for a query, as ``(index, candidates in its range,
    neighbours to ask for)``: those loaded, holding candidates, and chosen by ``opt.ann`` (``"auto"``:
    by the cost model). Empty when the leg needs the dense pass (thread context, windows) or
    scans exactly."""
    if opt.ann == "exact" or (opt.context and snap.has_threads) or snap.has_windows:
        return []
    out = []
    for a in getattr(snap, "ann", ()):
        if a.index is None:
            continue
        n_cand = int(np.count_nonzero(mask[a.first : a.first + a.n]))
        if n_cand == 0:
            continue
        want = ann_request(opt.depth, n_cand, a.n)
        if opt.ann != "ann" and ann_cost_ms(want) >= exact_cost_ms(a.n, n_cand):
            continue
        out.append((a, n_cand, want))
    return out


def int8_keep(depth: int, n_cand: int) -> int:
    """Rows a single query's int8 scan keeps for exact rescoring (see :func:`vector_leg`)."""
    return max(RESCORE * depth, depth + 100, n_cand // KEEP_PER_CANDIDATES)


def exact_cost_ms(n_docs: int, n_cand: int) -> float:
    return (EXACT_NS_PER_DOC * n_docs + EXACT_NS_PER_CANDIDATE * n_cand) / 1e6


def ann_cost_ms(k: int) -> float:
    return (ANN_US_BASE + ANN_US_PER_RESULT * k) / 1e3


def ann_request(depth: int, n_cand: int, n_docs: int) -> int:
    """Neighbours to ask for so that about ``depth`` of them pass a filter keeping ``n_cand`` of ``n_docs``."""
    share = max(n_cand / max(n_docs, 1), 1e-9)
    return int(min(n_docs, math.ceil(depth / share * ANN_OVERSAMPLE) + 10))


def _rescore(snap: Snapshot, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Exact float32 scores of sorted global ``ids``, with the scan's own kernel."""
    out = np.empty(len(ids), dtype=np.float32)
    starts = np.searchsorted(ids, [e.base for e in snap.segments] + [snap.n_docs])
    for i, entry in enumerate(snap.segments):
        a, b = starts[i], starts[i + 1]
        if b > a:
            rescore_exact(entry.segment.embeddings, ids[a:b] - entry.base, query, out[a:b])
    return out


def _dense_vector_leg(snap: Snapshot, query: np.ndarray, mask: np.ndarray, opt: QueryOptions) -> np.ndarray:
    depth = opt.depth
    dense = np.zeros(snap.n_docs, dtype=np.float32)
    for entry in snap.segments:
        masked_dot_dense(entry.segment.embeddings, query, mask, entry.base, dense)
        if entry.window_rows is not None:
            masked_dot_max(entry.window_embeddings, entry.window_rows, query, mask, entry.base, dense)
    mu, sigma = candidate_moments(dense, mask)
    cands = np.flatnonzero(mask).astype(np.int64)
    prev, nxt = snap.thread_links
    out_ids = np.empty(depth, dtype=np.int64)
    betas = np.asarray(opt.context if snap.has_threads else (), dtype=np.float64)
    got = context_topk(
        dense, mu, sigma, cands, len(cands), prev, nxt, betas,
        context_scale(snap, opt), mask, depth, out_ids, np.empty(depth), np.empty(len(cands)), opt.context_max,
    )
    return out_ids[:got]


BATCH_BLOCK = 8192  # document rows per matrix product in vector_legs


def vector_legs(
    snap: Snapshot, qvecs: np.ndarray, masks: Sequence[np.ndarray], opts: Sequence[QueryOptions], counts: np.ndarray | None = None
) -> list:
    """The vector leg of many queries at once, each ranking equal to :func:`vector_leg`'s.

    With the int8 copy on every segment: one int8 pass over each block of rows (held in
    cache) for all the queries (``kernels.int8dot.batch_scan``; a tiled matrix product with
    512-bit VNNI, each query's rows kept above a floor set by a sampled pass first,
    :func:`_scan_floors`), then each query's kept rows rescored exactly, best approximate
    first, and certified against the int8 error bound as in :func:`vector_leg`
    (``kernels.cosine.certified_tops``, all the queries in one call).
    Otherwise one float32 matrix product per block of rows, the best ``depth + 16`` rows
    rescored with the single-query kernel and certified (the product and the kernel round
    differently, by at most ``2 d 2^-23`` for unit vectors). None for a query that must be
    answered alone (not certified, or a store whose vector leg needs a dense pass: windows,
    thread context) or whose vector leg searches an ANN index (:func:`ann_searches`: it is
    answered as :func:`vector_leg` answers it alone). ``counts``: each mask's candidates, when known.
    """
    n_q = len(opts)
    if not n_q or snap.has_windows or (snap.has_threads and any(o.context for o in opts)):
        return [None] * n_q
    if any(a.index is not None for a in getattr(snap, "ann", ())):
        alone = [bool(ann_searches(snap, masks[b], o)) for b, o in enumerate(opts)]
        if any(alone):
            rest = [b for b in range(n_q) if not alone[b]]
            out: list = [None] * n_q
            if rest:
                sub = vector_legs(
                    snap, np.asarray(qvecs)[rest], np.stack([masks[b] for b in rest]), [opts[b] for b in rest],
                    None if counts is None else np.asarray(counts)[rest],
                )
                for b, r in zip(rest, sub):
                    out[b] = r
            return out
    q = np.ascontiguousarray(qvecs, dtype=np.float32)
    m = masks if isinstance(masks, np.ndarray) and masks.ndim == 2 else np.stack(masks)
    if snap.segments and all(e.q8 is not None for e in snap.segments):
        return _vector_legs_int8(snap, q, m, opts, counts)
    depth = max(o.depth for o in opts)
    keep = depth + 16
    heap_s = np.empty((n_q, keep), dtype=np.float32)
    heap_i = np.empty((n_q, keep), dtype=np.int64)
    heap_n = np.zeros(n_q, dtype=np.int64)
    for entry in snap.segments:
        emb = entry.segment.embeddings
        for r0 in range(0, len(emb), BATCH_BLOCK):
            block = q @ emb[r0 : r0 + BATCH_BLOCK].T
            batch_topk(block, m, entry.base + r0, keep, heap_s, heap_i, heap_n)
    eps = 2 * q.shape[1] * 2.0**-23 * 1.01 + 1e-7
    return [_certified_top(snap, q[b], heap_s[b], heap_i[b], int(heap_n[b]), keep, opt.depth, eps) for b, opt in enumerate(opts)]


def _certified_top(snap, query, heap_s, heap_i, n, keep, depth, eps):
    """The exact top ``depth`` of a query from its approximate heap, or None when not certified."""
    ids = np.sort(heap_i[:n])
    top = TopK(depth, dtype=np.float32)
    top.n = heap_push_many(top.scores, top.ids, top.n, depth, _rescore(snap, ids, query), ids)
    # A row not kept has approximate <= the heap's root (its worst), so exact <= root + eps.
    certified = n < keep or (top.n == depth and float(heap_s[0]) + eps < float(top.scores[0]))
    return top.result()[0] if certified else None


def _vector_legs_int8(snap: Snapshot, q: np.ndarray, m: np.ndarray, opts: Sequence[QueryOptions], counts: np.ndarray | None = None) -> list:
    n_q = len(opts)
    depths = np.array([o.depth for o in opts], dtype=np.int64)
    if counts is None:
        counts = np.count_nonzero(m, axis=1)
    keeps = np.maximum(np.maximum(RESCORE * depths, depths + 100), BATCH_KEEP_BASE + np.asarray(counts, dtype=np.int64) // BATCH_KEEP_PER_CANDIDATES)
    if not all(tiled_scan_ok(e.q8, e.base) for e in snap.segments):
        keeps[:] = keeps.max()  # the row kernels scan a block for all queries only with one capacity for all
    width = int(keeps.max())
    heap_s = np.empty((n_q, width), dtype=np.float32)
    heap_i = np.empty((n_q, width), dtype=np.int64)
    heap_n = np.zeros(n_q, dtype=np.int64)
    prepared = Int8Batch.quantize(q)  # int8: half the work; the certificate absorbs the coarser bound
    counts = np.asarray(counts, dtype=np.int64)
    his = np.array([FOREVER if (h := date_bounds(o)[1]) is None else h for o in opts], dtype=np.int64)
    floors = _scan_floors(snap, prepared, m, keeps, counts, his)
    eps = np.zeros(n_q, dtype=np.float64)
    for entry in snap.segments:
        batch_scan(
            entry.q8, entry.q8_scale, entry.q8_stats(), prepared, m, entry.base, keeps, heap_s, heap_i, heap_n, floors=floors,
            order=entry.q8_order, stops=entry.q8_stops(his),
        )
        eps = np.maximum(eps, prepared.error_bounds(entry.q8_stats()))
    if floors is not None:
        # A heap that did not fill: fewer than keep rows reached the floor, so rows below it may
        # belong in it. Scan those queries again without a floor (rare: the floor is set where
        # about SEED_MARGIN x keep rows should reach it).
        redo = np.flatnonzero((heap_n < keeps) & (floors > -np.inf))
        if len(redo):
            sub = Int8Batch(prepared.query[redo], prepared.qw[redo], prepared.qscale[redo])
            sm = np.ascontiguousarray(m[redo])
            ss, si, sn = heap_s[redo], heap_i[redo], np.zeros(len(redo), dtype=np.int64)
            for entry in snap.segments:
                stops = entry.q8_stops(his[redo])
                batch_scan(entry.q8, entry.q8_scale, entry.q8_stats(), sub, sm, entry.base, keeps[redo], ss, si, sn, order=entry.q8_order, stops=stops)
            heap_s[redo], heap_i[redo], heap_n[redo] = ss, si, sn
    table, keep = _embedding_table(snap)
    out_ids = np.empty((n_q, int(depths.max())), dtype=np.int64)
    out_n = np.zeros(n_q, dtype=np.int64)
    certified = np.zeros(n_q, dtype=np.bool_)
    certified_tops(table, q.shape[1], q, heap_s, heap_i, heap_n, keeps, depths, eps, out_ids, out_n, certified)
    del keep
    return [out_ids[b, : out_n[b]] if certified[b] else None for b in range(n_q)]


SEED_STRIDE = 32  # the sample that sets the scan's floors: every 32nd block of rows
SEED_MARGIN = 2.0  # a floor is set where about this many times keep rows should score above it
SEED_MIN_RANK = 8  # ... from at least this many sampled rows above it (else no floor)
SEED_MIN_DOCS = 4 * SEED_STRIDE * BATCH_ROWS  # smaller stores: no sample (too few blocks to sample)


def _scan_floors(
    snap: Snapshot, prepared: Int8Batch, m: np.ndarray, keeps: np.ndarray, counts: np.ndarray, his: np.ndarray | None = None
) -> np.ndarray | None:
    """Per query, a score floor for the int8 batch scan, from a scan of a sample of the rows; None for none.

    A row below its query's floor is not offered to the heap: most rows that would enter it
    only to be pushed out again (a heap of ``keep`` over ``n`` candidates in random order
    takes about ``keep * (1 + ln(n / keep))`` rows) are skipped. The floor is the sampled
    candidates' ``r``-th best score, ``r`` chosen so that about ``SEED_MARGIN x keep`` of all the
    candidates should reach it. Only a guess: the caller checks that each heap filled.
    ``his``: each query's date bound (``date_bounds``; FOREVER for none), which limits the rows read.
    """
    if not all(tiled_scan_ok(e.q8, e.base) for e in snap.segments) or snap.n_docs < SEED_MIN_DOCS:
        return None
    n_q = len(keeps)
    cap = int(np.ceil(2 * SEED_MARGIN * keeps.max() / SEED_STRIDE)) + 2 * SEED_MIN_RANK
    ss = np.empty((n_q, cap), dtype=np.float32)
    si = np.empty((n_q, cap), dtype=np.int64)
    sn = np.zeros(n_q, dtype=np.int64)
    seen = np.zeros(n_q, dtype=np.int64)
    for entry in snap.segments:
        batch_scan(
            entry.q8, entry.q8_scale, entry.q8_stats(), prepared, m, entry.base, cap, ss, si, sn, stride=SEED_STRIDE, seen=seen,
            order=entry.q8_order, stops=None if his is None else entry.q8_stops(his),
        )
    rank = (SEED_MARGIN * keeps * seen // np.maximum(counts, 1)).astype(np.int64)
    ok = (rank >= SEED_MIN_RANK) & (rank <= sn)
    filled = np.where(np.arange(cap)[None, :] < sn[:, None], ss, -np.inf)
    best = -np.sort(-filled, axis=1)  # best first
    floors = np.full(n_q, -np.inf, dtype=np.float32)
    floors[ok] = best[ok, rank[ok] - 1]
    return floors


def _embedding_table(snap: Snapshot) -> tuple[np.ndarray, list]:
    """The snapshot's float32 embeddings as a table of addresses (``kernels.cosine.embedding_table``), kept with the snapshot."""
    cached = snap.__dict__.get("_embedding_table")
    if cached is None:
        cached = snap.__dict__["_embedding_table"] = embedding_table([(e.segment.embeddings, e.base) for e in snap.segments])
    return cached


def run(
    snap: Snapshot, question: str, qvec: np.ndarray | None, opt: QueryOptions, matcher: NameMatcher,
    mask: np.ndarray | None = None, vector: np.ndarray | None = None, n_cand: int | None = None,
):
    """Execute one query; returns ``(selected [(doc, reserved)], fused scores, rankings, plan details)``.

    ``mask`` (with ``n_cand``, its count) and ``vector`` (the vector leg's ranking) may come
    precomputed from a batch.
    """
    t0 = time.perf_counter()
    if mask is None:
        mask = candidate_mask(snap, opt)
    if n_cand is None:
        n_cand = int(np.count_nonzero(mask))
    timings = {"candidates": (time.perf_counter() - t0) * 1e3}
    weights = dict(zip(LEGS, opt.weights))
    rankings: dict[str, np.ndarray] = {}
    matched_codes = matcher.match(question) if weights["tag"] and question else []
    tag_docs = tag_leg(snap, matched_codes, mask) if matched_codes and n_cand else np.zeros(0, dtype=np.int64)

    if (weights["lexical"] or len(tag_docs)) and n_cand and question:
        t = time.perf_counter()
        linfo: dict = {}
        lex, tag_scores = lexical_leg(snap, question, mask, n_cand, opt, tag_docs, linfo)
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
        vinfo: dict = {"method": "batch matrix product, exact rescore"}
        rankings["vector"] = vector if vector is not None else vector_leg(snap, qvec, mask, opt, vinfo)
        timings["vector"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    ranked_lists = {leg: np.asarray(r, dtype=np.int64).tolist() for leg, r in rankings.items()}
    chosen, fused = fuse(rankings, weights, snap.dates, NAT, opt.k, opt.reserve)  # = select(rrf(...)), on arrays
    timings["fusion"] = (time.perf_counter() - t) * 1e3
    legs = {
        leg: {"weight": weights[leg], "returned": len(ranked_lists.get(leg, ()))}
        for leg in LEGS
    }
    if "vector" in rankings:
        legs["vector"]["method"] = vinfo["method"]
    if "lexical" in rankings:
        legs["lexical"]["method"] = linfo.get("method", "")
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
