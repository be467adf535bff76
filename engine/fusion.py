"""Weighted reciprocal-rank fusion and the latest-date reserve (docs/DESIGN.md §3.4, §3.8).

Owns the fusion rule: the RRF constant (:data:`RRF_C`), the legs' ``w / (c + rank)`` sums, the
fused order and the choice of ``k`` documents with the reserve (:func:`fuse`, compiled in
``kernels.rrf``). A read-path stage that sees ranked lists only, never a snapshot.

Never imports: candidates, lexical, tags, vector, threads, planner, store.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mempp.kernels.rrf import RESERVE_SLOTS, rrf_select

RRF_C = 60
SMALL = 24  # fewer documents than this are ordered in Python (numpy's calls cost more there)


def rrf(rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float], c: int = RRF_C) -> dict[int, float]:
    """``score(d) = Σ_leg w_leg / (c + rank_leg(d))`` with ranks from 0; a leg of weight 0 is skipped."""
    scores: dict[int, float] = {}
    for leg, ranked in rankings.items():
        w = float(weights.get(leg, 0.0))
        if w == 0.0:
            continue
        for rank, doc in enumerate(ranked):
            scores[doc] = scores.get(doc, 0.0) + w / (c + rank)
    return scores


def fused_order(scores: Mapping[int, float]) -> list[int]:
    """Documents by fused score, the later-ingested (higher doc id) first on ties."""
    if len(scores) < SMALL:
        return sorted(scores, key=lambda d: (-scores[d], -d))
    docs = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    return docs[np.lexsort((-docs, -values))].tolist()


def select(
    scores: Mapping[int, float],
    dates: Mapping[int, int | None],
    k: int,
    reserve: bool = True,
) -> list[tuple[int, bool]]:
    """Choose ``k`` documents: ``(doc, reserved)`` in result order.

    With the reserve, the first ``k − 3`` slots go by fused score and the last 3
    to the latest-dated matched documents not already chosen (later-ingested
    first on equal dates; undated documents are never "latest-dated"); slots the
    reserve cannot fill go by fused order. ``k ≤ 3`` makes every slot a reserve
    slot, exactly as the rule reads.
    """
    undated = object()
    by_doc = {d: undated if dates.get(d) is None else dates[d] for d in scores}
    return select_ranked(fused_order(scores), by_doc, undated, k, reserve)


def select_ranked(
    ranked: Sequence[int], dates: Any, undated: Any, k: int, reserve: bool, qualifies: Callable[[int, int], bool] | None = None
) -> list[tuple[int, bool]]:
    """``k`` documents of ``ranked`` (best first): ``(doc, reserved)`` in result order.

    ``dates[doc]``: a document's date, ``undated`` where it has none. With the reserve, the first
    ``k - 3`` places by list order, the last 3 to the latest-dated (then later-ingested)
    documents of the rest for which ``qualifies(doc, place)`` holds (None: all; undated
    documents never), what stays empty by list order.
    """
    if k <= 0:
        return []
    if not reserve:
        return [(d, False) for d in ranked[:k]]
    n_fused = min(max(k - RESERVE_SLOTS, 0), len(ranked))
    out = [(d, False) for d in ranked[:n_fused]]
    if isinstance(dates, np.ndarray) and len(ranked) - n_fused >= SMALL:
        rest = np.asarray(ranked[n_fused:], dtype=np.int64)
        places = np.flatnonzero(dates[rest] != undated)
        if qualifies is not None:
            keep = [qualifies(d, n_fused + p) for d, p in zip(rest[places].tolist(), places.tolist())]
            places = places[np.array(keep, dtype=np.bool_)]
        docs = rest[places]
        picks = docs[np.lexsort((-docs, -dates[docs]))[: k - n_fused]].tolist()
    else:
        pool = [
            d for place, d in enumerate(ranked)
            if place >= n_fused and dates[d] is not undated and dates[d] != undated and (qualifies is None or qualifies(d, place))
        ]
        pool.sort(key=lambda d: (-int(dates[d]), -d))
        picks = pool[: k - n_fused]
    out += [(d, True) for d in picks]
    taken = set(picks)
    for d in ranked[n_fused:]:
        if len(out) >= k:
            break
        if d not in taken:
            out.append((d, False))
    return out


def fuse(
    rankings: Mapping[str, Sequence[int]],
    weights: Mapping[str, float],
    dates: np.ndarray,
    undated: int,
    k: int,
    reserve: bool = True,
    c: int = RRF_C,
) -> tuple[list[tuple[int, bool]], dict[int, float]]:
    """``select(rrf(rankings, weights), ...)`` in one compiled call (``kernels.rrf``):
    ``(chosen, fused scores)``, the same values.

    ``dates``: every document's date by doc id (int64), ``undated`` where it has none (the
    smallest int64, ``NAT``). The fused score of a document adds its legs' ``w / (c + rank)``
    in the order :func:`rrf` does, so the floats are the same; orders are those of
    :func:`fused_order` (score, then the higher id).
    """
    parts, ws = [], []
    for leg, ranked in rankings.items():
        w = float(weights.get(leg, 0.0))
        if w == 0.0 or len(ranked) == 0:
            continue
        parts.append(np.asarray(ranked, dtype=np.int64))
        ws.append(w)
    if not parts:
        return [], {}
    docs = np.concatenate(parts) if len(parts) > 1 else parts[0]
    starts = np.zeros(len(parts) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(p) for p in parts])
    n = len(docs)
    out_docs = np.empty(max(k, 0), dtype=np.int64)
    out_reserved = np.empty(max(k, 0), dtype=np.bool_)
    fused_docs = np.empty(n, dtype=np.int64)
    fused_scores = np.empty(n, dtype=np.float64)
    got, m = rrf_select(
        docs, starts, np.array(ws), c, dates, undated, k, reserve, out_docs, out_reserved, fused_docs, fused_scores
    )
    fused = dict(zip(fused_docs[:m].tolist(), fused_scores[:m].tolist()))
    return list(zip(out_docs[:got].tolist(), out_reserved[:got].tolist())), fused
