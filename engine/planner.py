"""The read path of one query (docs/DESIGN.md §3): candidates, the three legs, fusion, reserve.

Owns :func:`run`, the glue that runs the stages in order and records the plan (``explain``).
The stages live in their own modules: ``candidates`` (masks: the temporal rules and filters),
``lexical``, ``tags``, ``vector`` and ``vector_batch`` (the legs), ``fusion`` (RRF and the
latest-date reserve), ``feedback`` (the vector leg's second scan, the tag leg's order), ``threads`` (the thread stage and the reserve's rule), ``options`` (:class:`QueryOptions`). Their public names are re-exported
here for callers of ``mempp.planner``. It must never import the store or the CLI.

Never imports: store, searcher, cli, mempp.bench.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from mempp.storage import NAT, Snapshot

from .candidates import BACKGROUND_INDEX_DOCS, candidate_mask, date_bounds, valid_index
from .feedback import feedback_query, tag_order
from .fusion import fuse, fused_order
from .lexical import B, K1, lexical_leg
from .options import QueryOptions, context_scale
from .tags import NameMatcher, tag_leg
from .threads import choose
from .types import LEGS
from .vector import RESCORE, KEEP_PER_CANDIDATES, ann_cost_ms, ann_request, ann_searches, exact_cost_ms, int8_keep, vector_leg
from .vector_batch import BATCH_BLOCK, BATCH_KEEP_BASE, BATCH_KEEP_PER_CANDIDATES, vector_legs

__all__ = [
    "B", "BACKGROUND_INDEX_DOCS", "BATCH_BLOCK", "BATCH_KEEP_BASE", "BATCH_KEEP_PER_CANDIDATES", "K1", "KEEP_PER_CANDIDATES",
    "Given", "NameMatcher", "QueryOptions", "RESCORE", "ann_cost_ms", "ann_request", "ann_searches", "candidate_mask", "context_scale", "date_bounds",
    "exact_cost_ms", "feedback_vector", "int8_keep", "lexical_leg", "run", "run_feedback", "text_legs", "tag_leg", "valid_index", "vector_leg", "vector_legs",
]


@dataclass(frozen=True)
class Given:
    """Legs of one query computed before :func:`run` (every field optional).

    ``mask`` (with ``n_cand``, its count) and ``vector`` (the vector leg's ranking) come from a
    batch (``Searcher.query_stream``). The shard driver (``mempp.gather``) gives every leg's
    result gathered from the shards of a store, ``source="shards"``: ``n_cand``, ``tag_docs``
    (:func:`tag_leg`'s candidates), ``lexical`` (:func:`lexical_leg`'s ranking and the tag
    documents' scores) and ``vector``; ``mask`` is then not needed. ``refined``: ``vector`` is
    already the feedback scan's ranking (``mempp.feedback``), so no feedback runs in :func:`run`.
    """

    mask: np.ndarray | None = None
    n_cand: int | None = None
    vector: np.ndarray | None = None
    tag_docs: np.ndarray | None = None
    lexical: tuple[np.ndarray, np.ndarray] | None = None
    refined: bool = False
    source: str = "batch"  # "batch" or "shards": what explain's methods say of a leg given here


NOTHING_GIVEN = Given()


def run(snap: Snapshot, question: str, qvec: np.ndarray | None, opt: QueryOptions, matcher: NameMatcher, given: Given = NOTHING_GIVEN):
    """Execute one query; returns ``(selected [(doc, reserved)], fused scores, rankings, plan details)``.

    ``given``: legs computed elsewhere (:class:`Given`); by default every leg runs here, and
    feedback (when ``opt.feedback``) rescans the vector leg over the candidates.
    """
    mask, n_cand, vector = given.mask, given.n_cand, given.vector
    tag_docs, lexical, refined = given.tag_docs, given.lexical, given.refined
    gathered = "gathered from shards" if given.source == "shards" else None
    t0 = time.perf_counter()
    if mask is None and (n_cand is None or tag_docs is None):
        mask = candidate_mask(snap, opt)
    if n_cand is None:
        n_cand = int(np.count_nonzero(mask))
    timings = {"candidates": (time.perf_counter() - t0) * 1e3}
    weights = dict(zip(LEGS, opt.weights))
    rankings: dict[str, np.ndarray] = {}
    t = time.perf_counter()
    matched_codes = matcher.match(question, opt.as_of) if weights["tag"] and question else []
    if tag_docs is None:
        tag_docs = _tag_candidates(snap, matched_codes, mask, n_cand)
    tag_ms = (time.perf_counter() - t) * 1e3  # the tag leg: names matched, its candidates, then its order (below)

    if _runs_lexical(weights, tag_docs, n_cand, question):
        t = time.perf_counter()
        linfo: dict = {} if lexical is None else {"method": gathered or "given"}
        lex, tag_scores = lexical if lexical is not None else lexical_leg(snap, question, mask, n_cand, opt, tag_docs, linfo)
        if weights["lexical"]:
            rankings["lexical"] = lex
        timings["lexical"] = (time.perf_counter() - t) * 1e3
    else:
        tag_scores = np.zeros(len(tag_docs), dtype=np.float64)
    if weights["tag"] and len(tag_docs):
        # "lexical": by BM25 for the question, then most recent, then latest ingested; "fused": that
        # order fused with cosine (mempp.feedback.tag_order).
        raw = snap.dates[tag_docs]
        dates = np.where(raw == NAT, -np.inf, raw.astype(np.float64))
        t = time.perf_counter()
        order = tag_order(snap, tag_docs, tag_scores, dates, qvec if weights["vector"] else None, opt.tag_rank)
        rankings["tag"] = tag_docs[order][: opt.depth]
        tag_ms += (time.perf_counter() - t) * 1e3
    if weights["tag"]:
        timings["tag"] = tag_ms
    if weights["vector"] and qvec is not None and n_cand:
        t = time.perf_counter()
        vinfo: dict = {"method": "batch matrix product, exact rescore" if gathered is None else gathered}
        reuse: dict = {}  # both scans of this mask list each segment's candidate rows once
        rankings["vector"] = vector if vector is not None else vector_leg(snap, qvec, mask, opt, vinfo, reuse)
        if opt.feedback and not refined:
            _, first = fuse(rankings, weights, snap.dates, NAT, 0, False)
            fvec, used = feedback_query(snap, qvec, fused_order(first)[: opt.feedback])
            if used:
                rankings["vector"] = vector_leg(snap, fvec, mask, opt, None, reuse)
                vinfo["feedback"] = used
        elif refined:
            vinfo["feedback"] = gathered or "given"
        timings["vector"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    ranked_lists = {leg: np.asarray(r, dtype=np.int64).tolist() for leg, r in rankings.items()}
    chained: dict[int, list[int]] = {}
    if opt.siblings or opt.chain or (opt.reserve and opt.reserve_rule != "paper"):
        _, fused = fuse(rankings, weights, snap.dates, NAT, 0, False)
        chosen = choose(snap, fused, rankings, mask, opt, NAT, question, chained)  # the chain and thread stages, then the reserve by its rule
    else:
        chosen, fused = fuse(rankings, weights, snap.dates, NAT, opt.k, opt.reserve)  # = select(rrf(...)), on arrays
    timings["fusion"] = (time.perf_counter() - t) * 1e3
    legs = {
        leg: {"weight": weights[leg], "returned": len(ranked_lists.get(leg, ()))}
        for leg in LEGS
    }
    if "vector" in rankings:
        legs["vector"]["method"] = vinfo["method"]
        if "feedback" in vinfo:
            legs["vector"]["feedback"] = vinfo["feedback"]
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
    if chained:
        details["chained"] = chained
    return chosen, fused, ranked_lists, details


def text_legs(
    snap: Snapshot, question: str, opt: QueryOptions, matcher: NameMatcher, mask: np.ndarray, n_cand: int,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """The tag leg's documents and the lexical leg's ``(ranking, tag documents' BM25)`` as :func:`run`
    computes them (None where it would run no lexical leg), for callers that run it twice."""
    weights = dict(zip(LEGS, opt.weights))
    tag_docs = _tag_candidates(snap, matcher.match(question, opt.as_of) if weights["tag"] and question else [], mask, n_cand)
    lexical = None
    if _runs_lexical(weights, tag_docs, n_cand, question):
        lexical = lexical_leg(snap, question, mask, n_cand, opt, tag_docs, {})
    return tag_docs, lexical


def _tag_candidates(snap: Snapshot, codes, mask: np.ndarray | None, n_cand: int) -> np.ndarray:
    """The tag leg's documents: the candidates by an author the question names (none without one)."""
    return tag_leg(snap, codes, mask) if len(codes) and n_cand else np.zeros(0, dtype=np.int64)


def _runs_lexical(weights: dict, tag_docs: np.ndarray, n_cand: int, question: str) -> bool:
    """Whether the lexical leg runs: it ranks for its own weight and scores the tag leg's documents."""
    return bool((weights["lexical"] or len(tag_docs)) and n_cand and question)


def feedback_vector(
    snap: Snapshot, question: str, qvec: np.ndarray, opt: QueryOptions, matcher: NameMatcher, *, mask: np.ndarray | None,
    vector: np.ndarray, n_cand: int, tag_docs: np.ndarray, lexical: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, list[int]]:
    """Feedback's vector and the documents it used (``feedback.feedback_query``), from the first
    fusion :func:`run` makes of the given legs (no thread stage, no reserve), for callers that
    scan the vector leg again themselves (a batch, the shards)."""
    first = replace(opt, feedback=0, siblings=0, chain=0, reserve=False, k=0)
    _, fused, _, _ = run(snap, question, qvec, first, matcher, Given(mask=mask, n_cand=n_cand, vector=vector, tag_docs=tag_docs, lexical=lexical))
    return feedback_query(snap, qvec, fused_order(fused)[: opt.feedback])


def run_feedback(
    snap: Snapshot, questions: Sequence[str], qvecs: Sequence[np.ndarray | None], opts: Sequence[QueryOptions],
    matcher: NameMatcher, masks: np.ndarray, counts: np.ndarray, vector: list,
) -> tuple[list, list[bool], list]:
    """Feedback (``mempp.feedback``) for a batch, its second scan batched as the first is.

    For each query with feedback on, a question vector and a batched first vector ranking
    (``vector[j]``): its text legs (:func:`text_legs`), the first fusion :func:`run` would make,
    and the feedback vector; then one :func:`vector_legs` call scans all those vectors. Returns
    the vector rankings (refined where that scan answered), which queries were refined (give
    ``refined=`` to :func:`run`; the others run their own feedback, as one query does), and each
    query's ``(tag_docs, lexical)`` or None, for :func:`run` to reuse.
    """
    n = len(opts)
    refined = [False] * n
    legs: list = [None] * n
    todo: list[int] = []
    fvecs: list[np.ndarray] = []
    for j, opt in enumerate(opts):
        if not (opt.feedback and opt.weights[2] and qvecs[j] is not None and vector[j] is not None):
            continue
        tag_docs, lexical = legs[j] = text_legs(snap, questions[j], opt, matcher, masks[j], int(counts[j]))
        fvec, used = feedback_vector(
            snap, questions[j], qvecs[j], opt, matcher, mask=masks[j], vector=vector[j], n_cand=int(counts[j]),
            tag_docs=tag_docs, lexical=lexical,
        )
        if used:
            todo.append(j)
            fvecs.append(fvec)
    if todo:
        sub = masks if len(todo) == len(masks) else masks[todo]
        again = vector_legs(snap, np.stack(fvecs), sub, [opts[j] for j in todo], np.asarray(counts)[todo])
        vector = list(vector)
        for i, j in enumerate(todo):
            if again[i] is not None:  # None: answered alone (an ANN search); run() then runs its own feedback
                vector[j], refined[j] = again[i], True
    return vector, refined, legs
