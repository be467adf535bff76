"""Candidate masks (docs/DESIGN.md §3.1): the temporal rules and the filters.

Owns which documents a query may return: valid at ``as_of`` (dated at or before it, not
superseded by then; undated ones only when ``as_of`` is None), then narrowed by a date range
and by author, thread and channel filters, as a uint8 mask over doc ids. Also the snapshot's
checkpoint index of validity (:class:`ValidIndex`, built once per snapshot). It must never
import the legs, fusion, the planner or the store: they build on it.

Never imports: lexical, tags, vector, vector_batch, fusion, planner, store.
"""

from __future__ import annotations

import threading
from typing import Iterable, Sequence

import numpy as np

from mempp.kernels.masks import ValidIndex, keep_codes, keep_dates_by_rule, keep_ids, valid_by_rule
from mempp.storage import FOREVER, NAT, Snapshot

from .caches import version_caches
from .options import QueryOptions


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
    cache = version_caches(snap).masks
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
            mask = keep_facet(mask, facet, author_names(facet, values) if facet is snap.authors else values)
    return mask


def fold_name(name: str) -> str:
    """An author's name as the filter compares it: case and runs of whitespace ignored."""
    return " ".join(name.split()).casefold()


def author_names(facet, values: Iterable[str]) -> list[str]:
    """The stored author names that ``values`` name, whatever their case and spacing
    (``"sam lee"`` is ``"Sam Lee"``), as the tag leg's name matching is."""
    wanted = {fold_name(v) for v in values}
    return [n for n in facet.names if fold_name(n) in wanted]


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
    caches = version_caches(snap)
    vi = caches.valid_index
    if vi is not None:
        return vi
    if not wait and snap.n_docs >= BACKGROUND_INDEX_DOCS:
        with caches.lock:
            if caches.valid_index_build is None:
                builder = threading.Thread(target=_build_quietly, args=(snap,), name="mempp-valid-index", daemon=True)
                caches.valid_index_build = builder
                builder.start()
        return caches.valid_index
    with caches.valid_index_lock:  # one per snapshot: an older version's build in the background does not hold up this one's
        vi = caches.valid_index
        if vi is None:
            vi = caches.valid_index = ValidIndex(snap.dates, snap.valid_until, NAT, FOREVER)
    return vi


def _build_quietly(snap: Snapshot) -> None:
    try:
        valid_index(snap)
    except BaseException:  # the next waiting caller builds it again, and sees the error
        pass



def keep_facet(mask: np.ndarray, facet, values: Iterable[str]) -> np.ndarray:
    codes = sorted({facet.index[v] for v in values if v in facet.index})
    out = np.empty(len(mask), dtype=np.uint8)
    ids = rare_ids(facet, codes)
    if ids is not None:
        keep_ids(mask, ids, out)
    else:
        keep_codes(mask, facet.codes, code_mask(facet, codes), out)
    return out


def rare_ids(facet, codes: Sequence[int]) -> np.ndarray | None:
    """The ids (ascending uint32) of the documents with any of ``codes`` when they are under an
    eighth of all (from the facet's cached roaring bitmaps), else None: a pass over the codes is cheaper."""
    if sum(int(facet.counts()[c]) for c in codes) * 8 >= len(facet.codes):
        return None
    return np.frombuffer(facet.union(list(codes)).to_array(), dtype=np.uint32)


def code_mask(facet, codes: Sequence[int]) -> np.ndarray:
    wanted = np.zeros(len(facet.names) + 1, dtype=np.uint8)  # indexed by code + 1 (-1: no value)
    wanted[np.asarray(codes, dtype=np.int64) + 1] = 1
    return wanted
