"""After fusion, before the thread stage: evidence chained across documents.

A decision, its reasons and its corrections are often written in several documents that share
few words with the question or with each other, but are linked: by a *rare identifier* (a ticket
or incident number, a project, customer or product name), by a *day* one of them names ("after
the Product review on 9 June 2022"), or by a *reference* the writer gave. "Why was the root cause
of the Lattice outage revised?" finds the postmortem of INC-2022-0106; the ticket that
re-examined it and the e-mail that corrected it name INC-2022-0106 too, and hardly a word of the
question.

**The stage** (``chain``, the number of first fused documents that pull; 0 turns it off). Each of
the first ``chain`` documents of the fused list (a *hit*) lifts, to ``CHAIN_SHARE`` x its fused
score when that is above their own (just below the hit), the other documents the legs ranked that
(the first two rules only for a hit of at least ``CHAIN_MIN_LENGTH`` index terms: a turn of a chat
names things in passing)

- share its *rare terms*: its index terms held by at least 2 and at most
  ``max(CHAIN_MIN_DF, CHAIN_DF_SHARE x N)`` documents (N and the frequencies as BM25 counts them,
  a principal's own where it reads a part), less the question's terms and numbers of one or two
  digits, at most ``CHAIN_TERMS`` of them, the rarest first; a document whose BM25 for them is at
  least ``CHAIN_MIN_MATCH`` of the hit's own (the hit matches itself best) is chained;
- are dated on a day the hit's text names in full (``question_dates.days_named``), and score at
  least ``CHAIN_DAY_MATCH`` of the best of those for the hit's uncommon terms (:func:`uncommon_terms`;
  ``CHAIN_DAYS``);
- are named by key in the hit's ``references`` field (given at write time: the documents it
  answers, cites or revises), or name the hit's key in theirs.

Only documents a leg ranked take part, so every one is valid at the query's date, passes its
filters and may be read by the asker. The cost is one tokenization of each hit (its terms and
days kept with its segment for the last ``DOC_TERMS_KEPT`` documents) and two BM25 scorings of the
ranked documents per hit; ``references`` are read only in segments that hold any. ``explain``
lists what each hit pulled.

Owns :func:`chain_lift`, the rules above and their constants (chosen on the tuning splits:
``docs/quality.md``). Of the read path it reads only BM25's statistics.

Never imports: candidates, planner, searcher, store, threads, feedback.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Mapping

import numpy as np

from mempp.storage import NAT, Snapshot
from mempp.storage.analyzer import tokenize

from .caches import segment_caches, version_caches
from .lexical import bm25_n, lexical_doc_scores, query_terms, term_dfs
from .question_dates import days_named

CHAIN_TERMS = 8  # at most this many of a hit's rarest terms
CHAIN_MIN_DF = 5  # a rare term is held by at most max(CHAIN_MIN_DF, CHAIN_DF_SHARE x N) documents
CHAIN_DF_SHARE = 0.002
CHAIN_MIN_MATCH = 0.6  # a document is chained when its BM25 for the hit's rare terms is this share of the hit's own
CHAIN_SHARE = 0.9  # ... and rises to this share of the hit's fused score
CHAIN_MIN_LENGTH = 20  # a hit of fewer index terms pulls nothing (a turn of a chat names things in passing)
CHAIN_DAYS = True  # a hit also pulls the documents dated on a day it names ('after the review on 9 June 2022')
CHAIN_DAY_MATCH = 0.5  # ... that score at least this share of the best of them for the hit's uncommon terms
CHAIN_DAY_MIN_DF = 50  # the hit's uncommon terms: held by at most max(CHAIN_DAY_MIN_DF, CHAIN_DAY_DF_SHARE x N) documents
CHAIN_DAY_DF_SHARE = 0.01


DAY_US = 86_400_000_000
EPOCH = date(1970, 1, 1)
DOC_TERMS_KEPT = 4096  # per segment: the documents whose terms and days the chain stage keeps


SMALL_NUMBERS = tuple(sorted({str(i) for i in range(100)} | {f"{i:02d}" for i in range(10)}))  # "0" to "99", "00" to "09"


def _excluded(snap: Snapshot, question: str, terms: np.ndarray | None = None) -> np.ndarray:
    """Term ids a hit never chains by: the question's (``terms``, when the caller has them:
    ``query_terms``), and numbers of one or two digits ("9 June", "item 12" name nothing)."""
    caches = version_caches(snap)
    small = caches.small_numbers
    if small is None:  # once per version (the dictionary only grows; a version's own terms are fixed)
        known = snap.term_ids
        small = caches.small_numbers = np.sort(np.fromiter((known[t] for t in SMALL_NUMBERS if t in known), dtype=np.int64))
    if not question:
        return small
    return np.union1d(query_terms(snap, question) if terms is None else terms, small)


def member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set``, by binary search (``np.isin``'s
    set-up costs more than the search on the few dozen values a query has)."""
    if len(sorted_set) == 0 or len(values) == 0:
        return np.zeros(len(values), dtype=np.bool_)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _trim(kept: dict) -> None:
    """Drop the oldest entries past ``DOC_TERMS_KEPT`` (best effort: queries of other threads may
    add at the same time)."""
    while len(kept) > DOC_TERMS_KEPT:
        try:
            kept.pop(next(iter(kept)), None)
        except (RuntimeError, StopIteration):  # changed by another thread meanwhile
            return


def doc_terms(snap: Snapshot, docs: list[int]) -> list[tuple[np.ndarray, frozenset]]:
    """Each document's term ids (sorted, unique; the compiled tokenizer gives the analyzer's terms)
    and the days its text names, kept with its segment (the text never changes); the documents
    not kept yet are tokenized together."""
    places = [snap.locate(d) for d in docs]
    found = [segment_caches(entry).doc_terms.get(row) for entry, row in places]
    todo = [i for i, f in enumerate(found) if f is None]
    if todo:
        texts = [places[i][0].reader("text").get(places[i][1]) or "" for i in todo]
        # every term of a stored text is in the store's dictionary: looked up at C speed
        flat, counts = snap.analyzer.intern_tokens(tokenize(texts), lambda t: -1, snap.term_ids)
        ends = np.cumsum(counts)
        for i, text, end, n in zip(todo, texts, ends.tolist(), counts.tolist()):
            ids = np.unique(flat[end - n : end])
            entry, row = places[i]
            kept = segment_caches(entry).doc_terms
            found[i] = kept[row] = (ids[ids >= 0], frozenset((d - EPOCH).days for d in days_named(text)))
            _trim(kept)
    return found  # type: ignore[return-value]


def _has_references(entry) -> bool:
    """Whether any document of a segment names ``references`` (found once per segment)."""
    caches = segment_caches(entry)
    if caches.has_references is None:
        meta = entry.reader("meta")
        caches.has_references = meta.kind == "string" and b'"references"' in bytes(meta.data)
    return caches.has_references


def _references(snap: Snapshot, doc: int) -> tuple[str, ...]:
    """The keys a document's ``references`` field names (kept with its segment)."""
    entry, row = snap.locate(doc)
    if not _has_references(entry):
        return ()
    kept = segment_caches(entry).doc_references
    found = kept.get(row)
    if found is None:
        meta = entry.reader("meta").get(row)
        refs = json.loads(meta).get("references") if meta and '"references"' in meta else None
        found = kept[row] = tuple(refs) if isinstance(refs, list) else ()
        _trim(kept)
    return found


def reference_links(snap: Snapshot, order: list[int], hits: int) -> dict[int, list[int]]:
    """For each of the first ``hits`` documents of ``order``, the others of ``order`` it names in its
    ``references`` or that name it in theirs (by key; every version of a key that is listed)."""
    if not any(_has_references(e) for e in snap.segments):
        return {}
    refs = {d: _references(snap, d) for d in order}
    if not any(refs.values()):
        return {}
    keys = dict(zip(order, snap.keys_of(np.asarray(order, dtype=np.int64)).to_pylist()))
    out: dict[int, list[int]] = {}
    for h in order[:hits]:
        mine, key = set(refs[h]), keys[h]
        out[h] = [d for d in order if d != h and (keys[d] in mine or (key is not None and key in refs[d]))]
    return out


def rare_terms(snap: Snapshot, ids: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Of the term ids ``ids`` (their frequencies ``df``), the rare ones (the rarest first, at most ``CHAIN_TERMS``)."""
    most = max(CHAIN_MIN_DF, int(CHAIN_DF_SHARE * bm25_n(snap)))
    keep = (df >= 2) & (df <= most)
    return ids[keep][np.argsort(df[keep], kind="stable")[:CHAIN_TERMS]]


def uncommon_terms(snap: Snapshot, ids: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Of the term ids ``ids`` (their frequencies ``df``), those held by at most
    ``max(CHAIN_DAY_MIN_DF, CHAIN_DAY_DF_SHARE x N)`` documents: what the named-day link matches by."""
    return ids[df <= max(CHAIN_DAY_MIN_DF, int(CHAIN_DAY_DF_SHARE * bm25_n(snap)))]


def chain_lift(
    snap: Snapshot, fused: Mapping[int, float], order: list[int], hits: int, question: str, terms: np.ndarray | None = None,
) -> tuple[dict[int, float], dict[int, list[int]]]:
    """Fused scores after the chain stage, and what each hit pulled (``{hit: [docs]}``, for explain);
    ``terms``: ``query_terms(snap, question)``, when the caller has them."""
    lifted = dict(fused)
    pulled: dict[int, list[int]] = {}
    if not hits or not order or snap.analyzer is None:
        return lifted, pulled
    exclude = _excluded(snap, question, terms)
    pool = np.asarray(order, dtype=np.int64)
    pool_days = None
    linked = reference_links(snap, order, hits)
    lengths = snap.lengths
    long = [h for h in order[:hits] if lengths[h] >= CHAIN_MIN_LENGTH]  # a short hit pulls by references alone
    none = (np.zeros(0, dtype=np.int64), frozenset())
    held = {h: (ids[~member(ids, exclude)], days) for h, (ids, days) in zip(long, doc_terms(snap, long))}
    hit_terms = [held.get(h, none) for h in order[:hits]]  # each hit's terms it may chain by, and its named days
    # Every hit's frequencies in one lookup (a term's frequency does not depend on the others asked with it)
    ends = np.cumsum([len(ids) for ids, _ in hit_terms])
    every_df = term_dfs(snap, np.concatenate([ids for ids, _ in hit_terms]))
    for i, h in enumerate(order[:hits]):
        v = CHAIN_SHARE * fused[h]
        got: list[int] = list(linked.get(h, ()))
        ids, days = hit_terms[i]
        df = every_df[ends[i] - len(ids) : ends[i]]  # both links select by it
        rare = rare_terms(snap, ids, df)
        if len(rare):
            scores = lexical_doc_scores(snap, rare, pool)
            own = float(scores[order.index(h)])
            if own > 0:
                got += pool[(scores >= CHAIN_MIN_MATCH * own) & (pool != h)].tolist()
        if CHAIN_DAYS and days and len(ids):
            if pool_days is None:
                raw = snap.dates[pool]
                pool_days = np.where(raw == NAT, np.iinfo(np.int64).min, raw // DAY_US)
            on_day = pool[member(pool_days, np.array(sorted(days), dtype=np.int64)) & (pool != h)]
            if len(on_day):
                sc = lexical_doc_scores(snap, uncommon_terms(snap, ids, df), on_day)
                best = float(sc.max())
                if best > 0:
                    got += on_day[sc >= CHAIN_DAY_MATCH * best].tolist()
        got = [d for d in dict.fromkeys(got) if v > lifted[d]]
        for d in got:
            lifted[d] = v
        if got:
            pulled[h] = got
    return lifted, pulled
