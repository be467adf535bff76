"""The committed documents by key and by fingerprint (docs/DESIGN.md §5).

Owns :class:`DocIndex`: each key's doc ids in ingest order and every document's fingerprint,
extended lazily as versions are read. Doc ids are assigned in commit order and never change, so
one index built up to the newest version a process has seen serves every older version too: a
reader pinned to a version of ``n`` documents keeps the ids below ``n``. Shared by the
:class:`~mempp.Searcher` of each version of one :class:`~mempp.Store` and by its
:class:`~mempp.Writer`; safe to use from several threads.

Never imports: store, searcher, writer, planner, cli.
"""

from __future__ import annotations

import threading

import numpy as np

from mempp.storage import Snapshot

from .ingest import FingerprintIndex


class DocIndex:
    """Key -> doc ids and the fingerprint index, up to :attr:`indexed` documents."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, list[int]] = {}
        self.fingerprints = FingerprintIndex()
        self.indexed = 0
        self.erased = 0  # erased documents of the newest version indexed

    def extend(self, snap: Snapshot) -> None:
        """Index every document of ``snap`` not indexed yet (its doc ids above :attr:`indexed`); all
        of them again when ``snap`` holds erasures the index has not seen (their keys and fingerprints are gone)."""
        erased = len(snap.erased)
        if self.indexed >= snap.n_docs and erased <= self.erased:
            return
        with self._lock:
            if erased > self.erased:
                self._keys, self.fingerprints, self.indexed, self.erased = {}, FingerprintIndex(), 0, erased
            for entry in snap.segments:
                seg = entry.segment
                if entry.base + seg.n <= self.indexed:
                    continue
                first = max(self.indexed - entry.base, 0)
                keys = seg.table.column("key")
                if keys.null_count < seg.n:  # only rows with a key: their doc ids in order
                    has = np.flatnonzero(~keys.is_null().to_numpy()[first:]) + first
                    for row, key in zip(has.tolist(), keys.take(has).to_pylist()):
                        self._keys.setdefault(key, []).append(entry.base + row)
                fps = seg.table.column("fingerprint").to_numpy()  # uint64; one chunk: no copy
                self.fingerprints.extend(fps[first:], entry.base + first)
            self.indexed = max(self.indexed, snap.n_docs)

    def docs(self, key: str, n_docs: int) -> list[int]:
        """The doc ids stored under ``key`` among the first ``n_docs`` documents, oldest first."""
        docs = self._keys.get(key)
        if not docs:
            return []
        if docs[-1] < n_docs:
            return list(docs)
        return [d for d in docs if d < n_docs]

    def keys_view(self, n_docs: int) -> "KeysAt":
        """A read-only mapping key -> doc ids limited to the first ``n_docs`` documents."""
        return KeysAt(self, n_docs)


class KeysAt:
    """``DocIndex`` as a mapping at one version (``get`` and ``in``, as the supersession rule reads it)."""

    __slots__ = ("index", "n_docs")

    def __init__(self, index: DocIndex, n_docs: int) -> None:
        self.index, self.n_docs = index, n_docs

    def get(self, key: str, default=None):
        docs = self.index.docs(key, self.n_docs)
        return docs if docs else default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.index.docs(key, self.n_docs))

    def __getitem__(self, key: str) -> list[int]:
        docs = self.index.docs(key, self.n_docs)
        if not docs:
            raise KeyError(key)
        return docs
