"""Erasure: ``store.erase`` and ``store.erase_before``, the one write that destroys data (docs/DESIGN.md §8.5).

Legal erasure and retention rules need a document gone, not hidden: its text, embedding, terms,
postings, window vectors, int8 row and ANN vector are removed from every file of the store
(``storage/erase.py`` rewrites them and publishes the result as one version), every earlier
version reads the blank row, and the access log keeps that it happened: doc id, key, date and
reason, no content. What writers had set aside in ``lost+found/`` (copies of files no version
names) is removed too, since it may hold the document.

Owns :class:`Erasure` (the writer's ``erasure``: resolving what to erase, the erase events, the
commit, removing the replaced files) and :func:`erasures` (the records kept).

Never imports: store, searcher, planner, cli, onnxruntime.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from mempp.storage import NAT, now_us
from mempp.storage.aside import LOST, SEGMENTS
from mempp.storage.fsutil import fsync_dir, unlink
from mempp.storage.erase import erase_rows

from .access import Access, named_docs
from .dates import from_us
from .errors import ValidationError
from .options import date_arg

MAX_REASON_CHARS = 1000


class Erasure:
    """The erasures of one :class:`~mempp.Writer` (its ``erasure``)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def erase(self, refs: str | int | Iterable[str | int], reason: str) -> dict[str, Any]:
        """Erase every version of each key (or the one doc id) ``refs`` names; see :meth:`Store.erase`."""
        reason = _reason(reason)
        names = [refs] if isinstance(refs, (str, int, np.integer)) else list(refs)
        return self._erase(lambda s: sorted({d for r in names for d in named_docs(s, r)}), reason)

    def erase_before(self, before: Any, reason: str, channel: str | None = None) -> dict[str, Any]:
        """Erase every document dated before ``before`` (of ``channel`` only, when given); see :meth:`Store.erase_before`."""
        reason = _reason(reason)
        cut = date_arg(before, "before", end_of_day=False)
        if cut is None:
            raise ValidationError("expected a date", field="before")
        if channel is not None and not isinstance(channel, str):
            raise ValidationError(f"expected a channel name or None, got {type(channel).__name__}", field="channel")

        def pick(searcher: Any) -> list[int]:
            snap = searcher.snapshot
            keep = (snap.dates != NAT) & (snap.dates < cut) & (snap.valid_until != NAT)  # NAT: erased or unreadable already
            if channel is not None:
                code = snap.channels.index.get(channel)
                keep &= (snap.channels.codes == code) if code is not None else False
            return np.flatnonzero(keep).tolist()

        return self._erase(pick, reason)

    def _erase(self, pick, reason: str) -> dict[str, Any]:
        w = self._writer
        t = time.perf_counter()
        with w.compaction.paused(), w.turn():  # a merge reads the units this rewrites: none runs meanwhile
            w.check_writable()
            w.begin_write()
            searcher = w.searcher()
            snap = searcher.snapshot
            gone = set(snap.erased.tolist())
            docs = [d for d in pick(searcher) if d not in gone]
            if not docs:
                return {"erased": [], "version": snap.version, "files_removed": [], "seconds": round(time.perf_counter() - t, 3)}
            keys = snap.keys_of(np.asarray(docs, dtype=np.int64)).to_pylist()
            access: Access = w.access()
            events = [{"op": "erase", "doc_id": d, "note": json.dumps({"key": k, "reason": reason})} for d, k in zip(docs, keys)]
            log = access.appended(events, snap.version + 1, now_us())
            state, replaced = w.guarded_write(lambda: erase_rows(w.path, snap.state, snap, np.asarray(docs), log), stale_on_error=True)
            w.publish(state)  # the key and fingerprint index is made again (DocIndex.extend sees the erasure)
        # The replaced files are named by no version from now on: removed, never set aside (should
        # this process die first, the next writer removes them: they are older than the current version).
        # An error here leaves the erasure committed and a copy on disk: raised (StoreWriteError), so the caller knows.
        w.guarded_write(lambda: _remove(w.path, replaced))
        return {"erased": docs, "version": state.version, "files_removed": replaced, "seconds": round(time.perf_counter() - t, 3)}


def _remove(store: Path, names: list[str]) -> None:
    """Remove the replaced files and ``lost+found/``, then make the removals durable."""
    for name in names:
        if os.path.lexists(store / name):
            unlink(store / name)
    lost = store / LOST
    if lost.is_dir():
        shutil.rmtree(lost)
    fsync_dir(store / SEGMENTS)
    fsync_dir(store)


def erasures(access: Access) -> list[dict[str, Any]]:
    """The records of what was erased, oldest first: ``{"doc_id", "key", "reason", "erased_at"}``."""
    out = []
    for doc, rec in access.erased.items():
        out.append({"doc_id": doc, "key": rec.get("key"), "reason": rec.get("reason"), "erased_at": from_us(rec["erased_at"])})
    return sorted(out, key=lambda r: (r["erased_at"], r["doc_id"]))


def _reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("expected the reason for the erasure (a non-empty string), kept in the store's access log", field="reason")
    if len(reason) > MAX_REASON_CHARS:
        raise ValidationError(f"at most {MAX_REASON_CHARS} characters", field="reason")
    return reason
