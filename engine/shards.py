"""Shards of a store for segment-sharded bulk scoring (``mempp.distributed.score(..., shards=N)``).

A shard is a run of adjacent units of one version of a store, opened alone: only its own files
are mapped and checked, and its documents get local ids (the store's id minus the shard's first).
:class:`ShardView` stands where the read path's stages expect a :class:`~mempp.storage.Snapshot`
(``candidate_mask``, ``tag_leg``, the lexical and vector legs' kernels), with the whole store's
BM25 statistics (N, average length; document frequencies come per query), so a shard never
changes a score. :class:`Shard` answers a driver's rounds for a chunk of queries
(``mempp.gather`` holds the driver's side and says why the merge is exact):

1. :meth:`Shard.first`: candidate masks; per query, each leg's result on the shard: a plain
   leg's top ``depth`` with exact scores; for a leg with thread context (or window vectors) its
   fixed-point moment sums (``kernels.context.fixed_sums``: integers, so the shards' parts add
   up to the whole store's exactly), its population, and its top ``M`` raw scores;
2. :meth:`Shard.top`: a larger top ``M`` of such a leg, from what round 1 kept;
3. :meth:`Shard.fetch`: candidate bits and raw scores of given documents;
4. :meth:`Shard.release`: forget the chunk.

No Ray here: a Ray actor holds a :class:`Shard` (``mempp.distributed``), and the tests also run
one in-process. Owns opening a shard and a shard's work. Must never rank across shards.

Never imports: store, searcher, planner, fusion, gather, distributed, ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mempp.kernels import clear_touched, fixed_sums, fixed_sums_masked
from mempp.storage import Snapshot, StoreError, read_state

from .candidates import candidate_mask
from .lexical import bm25_touched, lexical_doc_scores, lexical_top_scored
from .options import QueryOptions
from .tags import tag_leg
from .vector import context_scores, rescore, vector_leg
from .vector_batch import vector_legs
from .versions import pinned

# How each leg runs on a shard (set per query by the driver).
OFF, PLAIN, ZSCORED = 0, 1, 2
SHARD_FILES = ("docs", "post", "index", "win", "q8")  # what a shard maps of its units (log: the driver's; dictionary: see open_shard)


@dataclass(frozen=True)
class ShardSpec:
    """What a worker needs to open its shard: the store, the version, its units (docs file names,
    in order) and the whole store's figures a shard cannot see."""

    path: str
    version: int
    units: tuple[str, ...]  # the docs file of each unit, in id order
    first_doc: int
    n_docs: int
    n_global: int  # documents in the whole version (N of BM25)
    avg_length: float  # the whole version's average BM25 length
    has_threads: bool
    has_windows: bool
    valid_until: np.ndarray  # int64 µs per document of the shard (the whole log's supersessions)


class ShardView:
    """A shard's documents as the read path's stages read a snapshot (local ids ``0..n_docs``)."""

    def __init__(self, snap: Snapshot, spec: ShardSpec):
        self.snapshot = snap
        lo = spec.first_doc
        self.lo = lo
        self.segments = [replace(e, segment=replace(e.segment, first_doc=e.segment.first_doc - lo)) for e in snap.segments]
        self.n_docs = snap.n_docs
        self.n_global = self.n_live = spec.n_global  # BM25's N: the whole store's, erased rows left out
        self.avg_length = spec.avg_length
        self.erased = snap.erased
        self.has_threads = spec.has_threads  # the whole store's: it decides which path a leg takes
        self.has_windows = spec.has_windows
        self.dates = snap.dates
        self.valid_until = np.asarray(spec.valid_until, dtype=np.int64)
        if len(self.valid_until) != self.n_docs:
            raise StoreError(f"{spec.path}: shard of {self.n_docs} documents given {len(self.valid_until)} validity ends")
        self.authors, self.threads, self.channels = snap.authors, snap.threads, snap.channels
        self.analyzer = snap.analyzer
        self.lengths = snap.lengths
        self.ann: list = []  # bulk scoring never reads an ANN index (Store.query_stream)
        self.version = spec.version

    @property
    def thread_links(self):  # thread context is the driver's: neighbours live in other shards
        raise StoreError("a shard has no thread links; thread context is computed by the driver")


def open_shard(spec: ShardSpec) -> ShardView:
    """Open ``spec``'s units of its version: a :class:`Snapshot` of a state that lists only them,
    without their dictionary and supersession files (term ids and validity come from the driver).
    Only these units' files are mapped and checked against their checksums."""
    path = Path(spec.path)
    state = read_state(path)
    if state is None:
        raise StoreError(f"{path}: no such store")
    cut = None
    if state.version != spec.version:
        state, cut = pinned(path, state, spec.version, None)
    wanted = set(spec.units)
    units = [u for u in state.units if "docs" in u.files and u.files["docs"].name in wanted]
    found = [u.files["docs"].name for u in units]
    if found != list(spec.units):
        raise StoreError(
            f"{path}: the units of version {spec.version} changed since the driver opened it (a merge); run again"
        )
    n = sum(u.n_docs if cut is None else max(0, min(u.n_docs, cut.n_docs - u.first_doc)) for u in units)
    if all("post" in u.files for u in units):
        units = [replace(u, files={k: f for k, f in u.files.items() if k in SHARD_FILES}) for u in units]
        sub = replace(state, units=units, anns=[], n_docs=n, n_sup=0, n_terms=0)
    else:
        # A small unit (a commit of under 64 documents) has no postings file: its postings are
        # made at open from its text with the version's term dictionary, so the shard maps every
        # unit's dictionary file too (dictionaries only, outside its own units).
        units = [
            replace(u, files={k: f for k, f in u.files.items() if (k in SHARD_FILES and u.files["docs"].name in wanted) or k == "dict"})
            if "docs" in u.files else replace(u, files={k: f for k, f in u.files.items() if k == "dict"})
            for u in state.units
        ]
        sub = replace(state, units=[u for u in units if u.files], anns=[], n_docs=n, n_sup=0)
    snap = Snapshot(path, sub, cut=cut)
    if snap.n_docs != spec.n_docs or (snap.segments and snap.segments[0].base != spec.first_doc):
        raise StoreError(f"{path}: shard holds documents {snap.segments[0].base if snap.segments else 0}.. "
                         f"({snap.n_docs}), expected {spec.first_doc}.. ({spec.n_docs})")
    return ShardView(snap, spec)


@dataclass
class LegQuery:
    """One query of a chunk, as the driver sends it to every shard."""

    opt: QueryOptions
    lexical: int = OFF  # OFF, PLAIN or ZSCORED
    vector: int = OFF
    terms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # term ids, sorted
    df: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # the whole store's document frequencies
    authors: tuple[str, ...] = ()  # names the question matched (tag leg)
    top: int = 0  # M: raw scores to return per ZSCORED leg


@dataclass
class Scored:
    """A leg's documents with their scores (global ids)."""

    ids: np.ndarray
    scores: np.ndarray


@dataclass
class Moments:
    """Round 1 of a z-scored leg on one shard: moment sums, population, top ``M`` raw scores."""

    sums: np.ndarray  # int64[4]: kernels.context.fixed_sums of the leg's scores over the shard's candidates
    population: int  # documents with a score: touched (lexical) or candidates (vector)
    top: Scored


@dataclass
class ShardAnswer:
    """Round 1 of one query on one shard."""

    candidates: int
    tag_docs: np.ndarray  # global ids, ascending
    lexical: Scored | Moments | None = None
    tag_scores: np.ndarray | None = None  # PLAIN lexical: the BM25 score of each tag doc
    vector: Scored | Moments | None = None


class _Kept:
    """What a shard keeps of a chunk between rounds: masks, and each z-scored leg's raw scores."""

    def __init__(self, masks: np.ndarray):
        self.masks = masks
        self.lexical: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # query -> (local ids sorted, float32 scores)
        self.vector: dict[int, np.ndarray] = {}  # query -> dense float32 scores over the shard


def top(ids: np.ndarray, scores: np.ndarray, m: int, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The best ``m`` of ``ids`` by score, ties to the higher id (the heaps' order), best first;
    with ``ties``, also every further one scoring as the ``m``-th (so that all others score less)."""
    if m <= 0 or len(ids) == 0:
        return ids[:0], scores[:0]
    if len(ids) > 2 * m:
        part = np.argpartition(-scores, m - 1)[:m]
        keep = np.flatnonzero(scores >= scores[part].min())  # every tie at the cut: the order below settles them
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((-ids, -scores.astype(np.float64)))
    n = min(m, len(order))
    if ties:
        last = scores[order[n - 1]]
        while n < len(order) and scores[order[n]] == last:
            n += 1
    order = order[:n]
    return ids[order], scores[order]


class Shard:
    """One shard of a store answering a driver's rounds (see the module docstring)."""

    def __init__(self, spec: ShardSpec):
        self.view = open_shard(spec)
        self.lo = spec.first_doc
        self._chunks: dict[int, _Kept] = {}

    def info(self) -> dict[str, Any]:
        return {"first_doc": self.lo, "n_docs": self.view.n_docs, "segments": len(self.view.segments)}

    def first(self, chunk: int, queries: Sequence[LegQuery], qvecs: np.ndarray | None) -> list[ShardAnswer]:
        """Round 1 of a chunk of queries: masks, tag documents, each leg's shard result."""
        view, lo = self.view, self.lo
        n_q = len(queries)
        masks = np.empty((n_q, view.n_docs), dtype=np.uint8)
        for j, q in enumerate(queries):
            candidate_mask(view, q.opt, out=masks[j])
        counts = np.count_nonzero(masks, axis=1) if view.n_docs else np.zeros(n_q, dtype=np.int64)
        kept = self._chunks[chunk] = _Kept(masks)
        out: list[ShardAnswer] = []
        for j, q in enumerate(queries):
            tag_local = np.zeros(0, dtype=np.int64)
            if q.authors and counts[j]:
                codes = [view.authors.index[a] for a in q.authors if a in view.authors.index]
                tag_local = tag_leg(view, codes, masks[j]) if codes else tag_local
            out.append(ShardAnswer(int(counts[j]), tag_local + lo))
            if q.lexical == PLAIN:
                ids, scores = lexical_top_scored(view, q.terms, q.df, masks[j], q.opt.depth)
                out[j].lexical = Scored(ids + lo, scores)
                out[j].tag_scores = lexical_doc_scores(view, q.terms, tag_local, q.df)
            elif q.lexical == ZSCORED:
                out[j].lexical = self._lexical_moments(kept, j, q, masks[j])
        plain = [j for j, q in enumerate(queries) if q.vector == PLAIN and counts[j]]
        if plain and qvecs is not None:
            ranked = vector_legs(view, qvecs[plain], masks[plain], [queries[j].opt for j in plain], counts[plain])
            for j, got in zip(plain, ranked):
                if got is None:  # not certified by the batch scan: the single query's exact scan
                    got = vector_leg(view, qvecs[j], masks[j], queries[j].opt)
                ids = np.sort(np.asarray(got, dtype=np.int64))
                out[j].vector = Scored(ids + lo, rescore(view, ids, qvecs[j]))
        for j, q in enumerate(queries):
            if q.vector == PLAIN and out[j].vector is None:
                out[j].vector = Scored(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
            elif q.vector == ZSCORED and qvecs is not None:
                dense, first = context_scores(view, qvecs[j], masks[j], queries[j].opt)
                sums = np.zeros(4, dtype=np.int64)
                fixed_sums_masked(first, masks[j], sums)
                kept.vector[j] = dense
                out[j].vector = Moments(sums, int(counts[j]), self._vector_top(kept, j, q.top))
        return out

    def _lexical_moments(self, kept: _Kept, j: int, q: LegQuery, mask: np.ndarray) -> Moments:
        view = self.view
        sums = np.zeros(4, dtype=np.int64)
        if len(q.terms) == 0 or view.n_docs == 0:
            kept.lexical[j] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
            return Moments(sums, 0, Scored(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)))
        scores, touched, n = bm25_touched(view, q.terms, mask, q.df)
        try:
            fixed_sums(scores, touched, n, sums)
            ids = np.sort(touched[:n])
            vals = scores[ids].copy()
        finally:
            clear_touched(scores, touched, n)
        kept.lexical[j] = (ids, vals)
        return Moments(sums, n, self._lexical_top(kept, j, q.top))

    def _lexical_top(self, kept: _Kept, j: int, m: int) -> Scored:
        ids, vals = kept.lexical[j]
        top_ids, top_scores = top(ids, vals, m, ties=True)
        return Scored(top_ids + self.lo, top_scores)

    def _vector_top(self, kept: _Kept, j: int, m: int) -> Scored:
        cands = np.flatnonzero(kept.masks[j]).astype(np.int64)
        top_ids, top_scores = top(cands, kept.vector[j][cands], m, ties=True)
        return Scored(top_ids + self.lo, top_scores)

    def top(self, chunk: int, wants: Sequence[tuple[int, str, int]]) -> list[Scored]:
        """Round 2 (as often as the driver needs): for each ``(query, leg, M)``, the top ``M`` raw scores."""
        kept = self._chunks[chunk]
        return [self._lexical_top(kept, j, m) if leg == "lexical" else self._vector_top(kept, j, m) for j, leg, m in wants]

    def fetch(self, chunk: int, wants: Sequence[tuple[int, str, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each ``(query, leg, global ids in this shard)``: (candidate bits uint8, raw scores float32);
        leg ``"mask"``: the candidate bits alone (no scores)."""
        kept = self._chunks[chunk]
        out = []
        for j, leg, ids in wants:
            local = np.asarray(ids, dtype=np.int64) - self.lo
            bits = kept.masks[j][local]
            if leg == "mask":  # candidate bits alone (the thread stage)
                raw = np.zeros(0, dtype=np.float32)
            elif leg == "lexical":
                have, vals = kept.lexical[j]
                pos = np.searchsorted(have, local)
                pos_ok = np.minimum(pos, max(len(have) - 1, 0))
                hit = (pos < len(have)) & (have[pos_ok] == local) if len(have) else np.zeros(len(local), dtype=bool)
                raw = np.where(hit, vals[pos_ok] if len(have) else 0, 0).astype(np.float32)
            else:
                raw = kept.vector[j][local]
            out.append((bits, raw))
        return out

    def release(self, chunk: int) -> None:
        self._chunks.pop(chunk, None)
