"""What replaced a record, as one reader sees it: the earliest supersession of a document (the
evidence mark, ``Record.superseded_by``) and every supersession of it (``Searcher.replacements``).

A replacement the store does not hold (an import of a reader's export) or the reader may not read
(a :class:`~mempp.reader_view.ReaderView`) is unnamed: its date only.

Owns :func:`earliest_replacement`, :func:`replacement_list` and :func:`replacement_seen`.

Never imports: store, searcher, writer, planner, onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dates import from_us
from .reader_view import ReaderView
from .types import Replacement


def replacement_seen(snap: Any, doc: int) -> bool:
    """Whether a replacement ``doc`` is named: held by the store (not -1), not erased and, in a reader's view, readable."""
    return doc >= 0 and doc not in snap.erased and (not isinstance(snap, ReaderView) or bool(snap.readable[doc]))


def earliest_replacement(snap: Any, caches: Any, doc: int) -> Replacement | None:
    """The supersession ``doc``'s ``valid_until`` is (``caches``: the version's, which keep the events' order)."""
    found = caches.sup_by_old
    if found is None:
        with caches.lock:
            found = caches.sup_by_old
            if found is None:
                order = np.lexsort((snap.sup_new, snap.sup_effective, snap.sup_old))
                found = caches.sup_by_old = (order, np.asarray(snap.sup_old)[order])
    order, olds = found
    i = int(np.searchsorted(olds, doc))
    if i >= len(olds) or olds[i] != doc:
        return None  # no event names it (valid_until comes from the events: not reached)
    e = int(order[i])
    new = int(snap.sup_new[e])
    on = from_us(int(snap.sup_effective[e]))
    if not replacement_seen(snap, new):
        return Replacement(on=on, doc_id=None, key=None, author=None)
    row = snap.row(new)
    return Replacement(on=on, doc_id=new, key=row["key"], author=row["author"])


def replacement_list(snap: Any, doc: int) -> list[dict[str, Any]]:
    """Every supersession of ``doc``, earliest effective first: ``{"doc_id", "key", "effective",
    "recorded_at"}`` (``doc_id`` and ``key`` None where the replacement is unnamed)."""
    old, new, eff, rec = snap.sup_old, snap.sup_new, snap.sup_effective, snap.sup_recorded
    out = []
    for i in (np.flatnonzero(np.asarray(old) == doc) if len(old) else []):
        n = int(new[i])
        seen = replacement_seen(snap, n)
        out.append({
            "doc_id": n if seen else None,
            "key": snap.row(n)["key"] if seen else None,
            "effective": from_us(int(eff[i])).isoformat(),
            "recorded_at": from_us(int(rec[i])).isoformat(),
        })
    return sorted(out, key=lambda e: (e["effective"], -1 if e["doc_id"] is None else e["doc_id"]))
