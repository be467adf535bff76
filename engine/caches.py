"""The read path's structures derived from one version, built on first use (docs/DESIGN.md §3).

Owns :class:`VersionCaches` (per snapshot: the candidate masks of "now", the valid-at index, the
lexical leg's segment table, the vector leg's embedding table, the chain stage's small numbers)
and :class:`SegmentCaches` (per mapped segment, shared by the versions that hold it: the lexical
leg's dense bitsets, the chain stage's terms and days of the documents it read). They live
here, beside the snapshot rather than in it: the storage layer never holds the engine's data.
Each lives as long as its snapshot or segment (weak references); a
:class:`~mempp.Searcher` holds its version's, so they go when the last searcher of that version does.

Never imports: store, searcher, writer, planner, candidates, lexical, vector.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_LOCK = threading.Lock()
_VERSIONS: "weakref.WeakKeyDictionary[Any, VersionCaches]" = weakref.WeakKeyDictionary()
_SEGMENTS: "weakref.WeakKeyDictionary[Any, SegmentCaches]" = weakref.WeakKeyDictionary()


class VersionCaches:
    """One snapshot's derived structures; each slot None until built. ``lock`` guards builds."""

    __slots__ = ("lock", "masks", "valid_index", "valid_index_build", "valid_index_lock", "lex_table", "embedding_table", "sup_by_old", "small_numbers",
                 "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.masks: dict = {}
        self.valid_index = None
        self.valid_index_build: threading.Thread | None = None
        self.valid_index_lock = threading.Lock()
        self.lex_table = None
        self.embedding_table = None
        self.sup_by_old = None  # (event order by old doc id, then effective, then new doc id; the sorted old ids)
        self.small_numbers = None  # the term ids of "0" to "99" the version holds, sorted (the chain stage's)


class SegmentCaches:
    """One mapped segment's derived structures (kept across the versions that share the segment)."""

    __slots__ = ("dense_index", "doc_terms", "has_references", "doc_references", "__weakref__")

    def __init__(self) -> None:
        self.dense_index = None
        self.doc_terms: dict = {}  # row -> (its unique term ids, the days it names): the chain stage's, the last few thousand
        self.has_references: bool | None = None  # whether any document of the segment names references
        self.doc_references: dict = {}  # row -> the keys its "references" field names (the last few thousand read)


def version_caches(snap: Any) -> VersionCaches:
    """The caches of ``snap`` (made on first use)."""
    found = _VERSIONS.get(snap)
    if found is None:
        with _LOCK:
            found = _VERSIONS.get(snap)
            if found is None:
                found = _VERSIONS[snap] = VersionCaches()
    return found


def segment_caches(entry: Any) -> SegmentCaches:
    """The caches of one snapshot entry (a mapped segment; made on first use)."""
    found = _SEGMENTS.get(entry)
    if found is None:
        with _LOCK:
            found = _SEGMENTS.get(entry)
            if found is None:
                found = _SEGMENTS[entry] = SegmentCaches()
    return found
