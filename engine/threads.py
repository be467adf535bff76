"""After fusion: the thread stage (small threads) and the relevant-evidence reserve.

**Thread stage.** A strong hit's *small* thread (an email thread, a ticket and its replies, a
meeting and its notes) is likely evidence too: the other messages carry the rest of the event. A
long conversation session is not: its other turns are mostly about something else. So each
candidate document (valid at ``as_of``, passing the filters) of a thread that holds **at most**
``siblings`` **documents** (over the whole store; 0 turns the stage off) rises to
``SIBLING_SHARE`` (0.7) of the best fused score among its thread's other members, when that is
above its own: near its best sibling, below it, among what fusion ranked there. Longer threads
are left to thread context (``kernels.context``), which lifts a turn toward its neighbours'
scores inside each leg. (Listing every sibling right after its hit, as the simple baseline (``--baseline rrf-siblings``) does,
was measured too and lost to this on both tuning sets: ``docs/quality.md``.)

**Reserve.** The last ``RESERVE_SLOTS`` of the ``k`` slots go to the latest-dated documents of
the rest of the list, as the paper's rule says, but (rule ``"relevant"``, the default) only to
*strong lexical matches*: documents whose own BM25 score for the question (a lift by thread
context does not count) is at least ``RESERVE_MIN_SHARE`` (0.7) of the best one among the
lexical leg's first ``RESERVE_BEST_POOL`` and the reserve's pool, and that stand within the first
``RESERVE_DEPTH_FACTOR x k`` places of the list. A vector match alone never qualifies: every
candidate has a cosine, so in a small store "where is the runbook?" would otherwise spend the
slots on whatever was written last ("Thanks!"). Slots that no qualifying document fills go by
list order, so an answer always holds ``min(k, listed)`` documents. Rule ``"paper"``: any
document matched by a leg qualifies (``mempp eval --preset paper``).

Owns the thread stage (:func:`lift_siblings`, :func:`thread_siblings`, ``SIBLING_SHARE``), the
order of the stages after fusion (:func:`choose`: the chain stage of ``mempp.chain`` first) and the
reserve's rules (``options.ReserveRule``, :func:`lexical_matches`, :func:`choose`; the
choice of ``k`` with the reserve itself is ``fusion.select_ranked``). Of the read path it
reads only the lexical leg's scores.

Never imports: candidates, planner, searcher, store.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from mempp.kernels import thread_members
from mempp.kernels.rrf import RESERVE_SLOTS

from .chain import chain_lift, member
from .fusion import fused_order, select_ranked
from .lexical import lexical_doc_scores, query_terms

SIBLING_SHARE = 0.7  # thread stage: a member of a small thread rises to this share of its best sibling's fused score
RESERVE_DEPTH_FACTOR = 3  # rule "relevant": reserve picks stand within the first 3k places of the list
RESERVE_MIN_SHARE = 0.7  # ... and score at least this share of the best BM25 score
RESERVE_BEST_POOL = 10  # the best BM25 score is taken over the lexical leg's first 10 and the reserve's pool


def lift_siblings(order: Sequence[int], fused: Mapping[int, float], siblings_of: Callable[[int], Sequence[int]], share: float) -> dict[int, float]:
    """Scores after the thread stage: each sibling of a document of ``order`` gets at least
    ``share`` x that document's fused score (its own when higher); documents only reached as
    siblings enter with that score."""
    lifted = dict(fused)
    for d in order:
        v = share * fused[d]
        for s in siblings_of(d):
            if v > lifted.get(s, 0.0):
                lifted[s] = v
    return lifted


def thread_siblings(snap, mask: np.ndarray, max_size: int, docs: Sequence[int]) -> Callable[[int], Sequence[int]]:
    """``siblings_of(doc)`` for each of ``docs``: the other candidate documents of ``doc``'s thread
    in ingest order, when that thread holds at most ``max_size`` documents in the store (else
    none); found in one kernel call (``kernels.context.thread_members``)."""
    facet = snap.threads
    prev, nxt = snap.thread_links  # each document's neighbour in its thread, in ingest order
    ids = np.asarray(docs, dtype=np.int64)
    offs = np.empty(len(ids) + 1, dtype=np.int64)
    out = np.empty(max(len(ids) * max(max_size, 0), 1), dtype=np.int64)
    thread_members(ids, facet.codes, facet.counts(), prev, nxt, mask, max_size, offs, out)
    where = {d: j for j, d in enumerate(ids.tolist())}
    bounds, members = offs.tolist(), out.tolist()

    def siblings_of(d: int) -> Sequence[int]:
        j = where[d]
        return members[bounds[j] : bounds[j + 1]]

    return siblings_of


def lexical_matches(
    snap, question: str, docs: Sequence[int], share: float = 0.0, pool: Sequence[int] = (), terms: np.ndarray | None = None,
) -> set[int]:
    """The documents of ``docs`` whose own BM25 score for ``question`` is above 0 (they hold a
    question term) and at least ``share`` x the best BM25 score among ``docs`` and ``pool``,
    whatever thread context did to the lexical leg's ranking. ``terms``: ``query_terms(snap,
    question)``, when the caller has them."""
    ids = () if not (snap.analyzer and question) else query_terms(snap, question) if terms is None else terms
    if not len(ids) or not len(docs):
        return set()
    mine = np.unique(np.asarray(docs, dtype=np.int64))
    wanted = np.union1d(mine, np.asarray(pool, dtype=np.int64)) if len(pool) else mine
    scores = lexical_doc_scores(snap, ids, wanted)
    floor = share * float(scores.max()) if share > 0 else 0.0
    ok = (scores > 0) & (scores >= floor)
    if len(wanted) != len(mine):
        ok &= member(wanted, mine)
    return set(wanted[ok].tolist())


def choose(
    snap, fused: dict[int, float], rankings: Mapping[str, Sequence[int]], mask: np.ndarray, opt, undated: int, question: str = "",
    chained: dict[int, list[int]] | None = None,
) -> list[tuple[int, bool]]:
    """The chain stage (``mempp.chain``), the thread stage, then the reserve, on fused scores;
    ``fused`` takes the stages' scores (so the hits' scores stay in list order); ``chained``
    takes what each hit pulled."""
    order = fused_order(fused)
    cut = int(RESERVE_DEPTH_FACTOR * opt.k)
    terms = query_terms(snap, question) if snap.analyzer and question else None  # the chain stage and the reserve both read them
    if opt.chain:
        lifted, pulled = chain_lift(snap, fused, order, opt.chain, question, terms)
        if pulled:  # a document is lifted only where some hit pulled it: else the order stands
            fused.update(lifted)
            order = fused_order(fused)
        if chained is not None:
            chained.update(pulled)
    if opt.siblings and snap.has_threads:
        fused.update(lift_siblings(order, fused, thread_siblings(snap, mask, opt.siblings, order), SIBLING_SHARE))
        order = fused_order(fused)
    qualifies = None
    if opt.reserve and opt.reserve_rule == "relevant":
        n_fused = max(opt.k - RESERVE_SLOTS, 0)
        # The best BM25 score is among the lexical leg's first few (thread context moves a
        # document at most a little above its own score's rank in "max" mode).
        lex = np.asarray(rankings.get("lexical", ()), dtype=np.int64)[:RESERVE_BEST_POOL].tolist()
        lexical = lexical_matches(snap, question, order[n_fused:cut], RESERVE_MIN_SHARE, lex, terms)

        def qualifies(d: int, place: int) -> bool:
            return place < cut and d in lexical

        # No place past the cut qualifies, and the places left empty are filled from the first
        # k + 3 (at most 3 picked, at most 3 to fill): the rest of the list cannot change the choice.
        order = order[: max(cut, opt.k + RESERVE_SLOTS)]
    return select_ranked(order, snap.dates, undated, opt.k, opt.reserve, qualifies)
