"""Two uses of the question's vector beyond the vector leg's scan: feedback, and the tag leg's order.

**Feedback** (``feedback``, default 3; 0 turns it off). The legs run, and a first fusion ranks
their documents; the question's vector plus the mean of the (first-window) embeddings of the
first ``feedback`` documents of that list, normalized, is scanned again, and that ranking
replaces the vector leg's before the final fusion (Rocchio's pseudo-relevance feedback, with the
first fused documents taken as relevant). Evidence that shares few words with the question often
reads like the best hits ("What activities does Melanie partake in?": the turn about swimming
with the kids reads like the camping one the question's words found). It adds one scan of the
vector leg per query; ``explain`` lists the documents used.

**Tag order** (``tag_rank``). The tag leg holds every candidate by an author named in the
question, which in a two-person conversation is half of it. ``"lexical"`` (the paper's) ranks
them by BM25 for the question, then date, then ingest order; most have no question word, so most
rank by date alone. ``"fused"`` (the default) ranks them by reciprocal-rank fusion of that order
and their cosine to the question (``1/(60 + rank)`` each, ties to the later-ingested), so the
named person's documents about the question's subject come first.

**Names out of the question's vector** (``name_free``, default on). Where the question names
people the tag leg holds ("What activities does Melanie partake in?"), the vector legs and the
tag order read the question's vector less its projection on the query vectors of the names as
the question writes them (the store's embedder embeds each name once per model), normalized.
The tag leg already brings that person's documents; a person's own messages seldom carry their
name, while the name in the vector pulls toward what others wrote *to* them, so without it the
vector ranks by the question's subject. Roles are left in (the title is part of what is asked).
Supplied question vectors are treated the same way, so they must come from the store's model,
as a query's text does.

Feedback and tag order were chosen on the tuning splits only (LoCoMo's tuning half, org generator seed 1;
``docs/quality.md``). Without a question vector (a blank question, the vector leg off) neither
applies: the tag leg keeps the lexical order and no feedback runs.

Owns :func:`feedback_query`, :func:`tag_order`, :func:`name_free` (with :func:`without_names` and
the name vectors' cache, :func:`name_vectors`). Reads document embeddings through the
snapshot's segments, and scores them with the vector leg's exact rescore.

Never imports: candidates, lexical, tags, vector_batch, fusion, planner, threads, store, searcher.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from mempp.storage import Snapshot

from .vector import rescore

FEEDBACK_WEIGHT = 1.0  # the documents' mean vector is added with this weight to the (unit) question vector
TAG_RRF_C = 60
NAME_CACHE = 4096  # name vectors kept (per process, every model together)

_names: dict[tuple[str, str], np.ndarray] = {}


def doc_vectors(snap: Snapshot, docs: np.ndarray) -> np.ndarray:
    """The stored (first-window) embeddings of ``docs`` (global doc ids), float32, in the order given."""
    out = np.empty((len(docs), snap.dim), dtype=np.float32)
    for i, d in enumerate(np.asarray(docs, dtype=np.int64).tolist()):
        entry, row = snap.locate(d)
        out[i] = entry.segment.embeddings[row]
    return out


def feedback_query(snap: Snapshot, qvec: np.ndarray, top: list[int]) -> tuple[np.ndarray, list[int]]:
    """The feedback vector: ``qvec`` plus ``FEEDBACK_WEIGHT`` x the mean embedding of ``top`` (the
    first documents of a first fusion, ``fusion.fused_order``), normalized; and those documents.
    Returns ``qvec`` itself when ``top`` is empty."""
    if not top:
        return qvec, []
    q = np.asarray(qvec, dtype=np.float32) + np.float32(FEEDBACK_WEIGHT) * doc_vectors(snap, np.array(top)).mean(axis=0)
    norm = float(np.linalg.norm(q))
    return (q / norm if norm > 0 else np.asarray(qvec, dtype=np.float32)).astype(np.float32), top


def cosines(snap: Snapshot, docs: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Exact float32 cosine of each of ``docs`` (global ids, any order) with ``qvec``."""
    docs = np.asarray(docs, dtype=np.int64)
    order = np.argsort(docs, kind="stable")
    out = np.empty(len(docs), dtype=np.float32)
    out[order] = rescore(snap, docs[order], np.ascontiguousarray(qvec, dtype=np.float32))
    return out


def tag_order(
    snap: Snapshot, tag_docs: np.ndarray, tag_scores: np.ndarray, dates: np.ndarray, qvec: np.ndarray | None, rank: str,
) -> np.ndarray:
    """Indices into ``tag_docs`` in tag-leg order. ``dates``: theirs as float64 (``-inf`` undated).

    ``"lexical"``: BM25 (``tag_scores``) descending, then date, then the later-ingested first.
    ``"fused"`` with a question vector: ``1/(60 + lexical rank) + 1/(60 + cosine rank)``
    descending (cosine rank: cosine descending, the later-ingested first), then the later-ingested.
    """
    lexical = np.lexsort((-tag_docs, -dates, -np.asarray(tag_scores, dtype=np.float64)))
    if rank == "lexical" or qvec is None or len(tag_docs) < 2:
        return lexical
    n = len(tag_docs)
    by_cos = np.lexsort((-tag_docs, -cosines(snap, tag_docs, qvec).astype(np.float64)))
    place = np.empty(n, dtype=np.float64)
    score = np.zeros(n, dtype=np.float64)
    for order in (lexical, by_cos):
        place[order] = np.arange(n, dtype=np.float64)
        score += 1.0 / (TAG_RRF_C + place)
    return np.lexsort((-tag_docs, -score))


def name_vectors(model: str, embed: Callable[[list[str]], np.ndarray], names: list[str]) -> np.ndarray:
    """The unit query vectors of ``names`` (``embed`` makes the missing ones; cached by ``model``,
    the oldest dropped past ``NAME_CACHE``)."""
    todo = [n for n in names if (model, n) not in _names]
    if todo:
        for n, v in zip(todo, embed(todo)):
            _names[(model, n)] = np.asarray(v, dtype=np.float32)
        while len(_names) > NAME_CACHE:
            try:
                _names.pop(next(iter(_names)), None)
            except (RuntimeError, StopIteration):  # changed by another thread meanwhile
                break
    return np.stack([_names[(model, n)] for n in names]).reshape(len(names), -1)


def name_free(
    named: Callable[[str], list[str]], model: str, embed: Callable[[list[str]], np.ndarray],
    texts: Sequence[str], opts: Sequence, qv: np.ndarray | None, blank: Sequence[bool] = (),
) -> np.ndarray | None:
    """``qv`` (one row per question) where each question with ``name_free`` and its tag and vector
    legs on has the names ``named(text)`` finds taken out of its vector (:func:`without_names`);
    ``qv`` itself when none has. ``blank``: questions not embedded (left as they are)."""
    if qv is None:
        return None
    out = None
    for j, (text, opt) in enumerate(zip(texts, opts)):
        if not (opt.name_free and opt.weights[1] and opt.weights[2]) or (j < len(blank) and blank[j]) or not text:
            continue
        names = named(text)
        if names:
            if out is None:
                out = np.array(qv, dtype=np.float32)
            out[j] = without_names(out[j], name_vectors(model, embed, names))
    return qv if out is None else out


def without_names(qvec: np.ndarray, names: np.ndarray) -> np.ndarray:
    """``qvec`` less its projection on the span of the rows of ``names`` (each name's direction
    taken out, in any order), normalized; ``qvec`` itself where nothing would be left."""
    q = np.asarray(qvec, dtype=np.float64)
    basis: list[np.ndarray] = []  # an orthonormal basis of the names' span (Gram-Schmidt; a handful of rows)
    for v in np.asarray(names, dtype=np.float64).reshape(-1, len(q)):
        for b in basis:
            v = v - float(v @ b) * b
        size = math.sqrt(float(v @ v))
        if size > 1e-9:
            basis.append(v / size)
    rest = q
    for b in basis:
        rest = rest - float(rest @ b) * b
    size = math.sqrt(float(rest @ rest))
    return (rest / size).astype(np.float32) if basis and size > 1e-6 * math.sqrt(float(q @ q)) else np.asarray(qvec, dtype=np.float32)
