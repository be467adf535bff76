"""The settings of one query (:class:`QueryOptions`) and what they derive for a snapshot.

Owns the per-query options every stage reads (candidates, legs, fusion) and the thread-context
share of each document (:func:`context_scale`). Imports only numpy and the storage layer;
must never import the candidate, leg, fusion or store modules (they all import it).

Never imports: candidates, lexical, tags, vector, fusion, planner, store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mempp.storage import Snapshot


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
    siblings: int = 0  # thread stage: members of threads of at most this many documents are lifted (0: off; mempp.threads)
    reserve_rule: str = "paper"  # which documents may take a reserve slot: "paper" (any matched) or "relevant" (mempp.threads)
    feedback: int = 0  # the vector leg runs again with the mean vector of this many first fused documents added (0: off; mempp.feedback)
    tag_rank: str = "lexical"  # tag leg order: "lexical" (BM25, then date) or "fused" (that order fused with cosine; mempp.feedback)



def context_scale(snap: Snapshot, opt: QueryOptions) -> np.ndarray:
    """Per-document share of the neighbours: ``min(1, context_length / length)``; empty when unscaled.

    A short turn of a conversation is read with its neighbours; a long, self-contained
    document (an email, a policy page) much less so.
    """
    if not opt.context or opt.context_length is None:
        return np.zeros(0, dtype=np.float32)
    lengths = snap.lengths
    return np.minimum(1.0, opt.context_length / np.maximum(lengths, 1.0)).astype(np.float32)

