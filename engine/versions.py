"""Time travel by transaction time: which committed version ``Store.open(version=, as_known_at=)``
opens, and the list of versions.

Every version ever committed can be opened. In a format-2 store a version is the current units
cut at that version's counts (its history entry; ``storage/snapshot.py``), so merges and the
removal of merged-away files take nothing from it. A format-1 store (written before) keeps one
manifest per version, which is read as it is.

Owns: resolving ``version`` / ``as_known_at``, the list of versions (:func:`version_list`), and
a format-1 state's upgrade to format 2 (:func:`upgraded`, which a writer's first commit publishes).
Must never write.

Never imports: writer, planner, mempp.storage.commits, mempp.storage.merge.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mempp.storage import Entry, State, StoreError, read_legacy_version

from .dates import from_us, to_us
from .errors import ValidationError


def pinned(path: Path, current: State | None, version: Any, as_known_at: Any) -> tuple[State, Entry | None]:
    """(state, cut) to open for ``version`` or ``as_known_at``: the cut is the history entry of the
    version asked for (None when it is the current one, or when a format-1 store's own manifest
    of that version is returned as the state)."""
    if version is not None and as_known_at is not None:
        raise ValidationError("give version or as_known_at, not both", field="as_known_at")
    history = current.history(path) if current is not None else []
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
            raise ValidationError(f"expected an integer, got {version!r}", field="version")
        match = [e for e in history if e.version == int(version)]
        if not match:
            raise StoreError(f"{path}: no committed version {version}")
        entry = match[0]
    else:
        at = _date_arg(as_known_at, "as_known_at")
        known = [e for e in history if to_us(e.committed_at) <= at]
        if not known:
            first = history[0].committed_at if history else None
            raise StoreError(
                f"{path}: no version was committed at or before {from_us(at).isoformat()}"
                + (f" (the first was committed at {first})" if first else " (the store has no commit)")
            )
        entry = known[-1]
    if entry.version == current.version:
        return current, None
    if current.format == 1:
        return read_legacy_version(path, entry.version), None
    return current, entry


def _date_arg(value: Any, field: str) -> int:
    try:
        return to_us(value, end_of_day=True)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {value!r} as an ISO 8601 date ({exc})", field=field) from None


def upgraded(state: State, snap: Any) -> State:
    """A format-1 state as format 2: each unit and history entry with the counts format 2 records
    (counted from the files ``snap`` loaded), so that time travel can cut the units at any version."""
    units, counts = [], {}
    n_sup = n_terms = length = 0
    for u in state.units:
        s = snap.unit_stats.get(u.stem, {"n_sup": 0, "n_terms": 0, "length": 0})
        units.append(replace(u, first_sup=n_sup, n_sup=s["n_sup"], first_term=n_terms, n_terms=s["n_terms"], length=s["length"]))
        n_sup, n_terms, length = n_sup + s["n_sup"], n_terms + s["n_terms"], length + s["length"]
        counts[u.lo] = (n_sup, n_terms, length)
    history, last = [], (0, 0, 0)
    for e in state.recent:
        last = counts.get(e.version, last)
        history.append(replace(e, n_sup=last[0], n_terms=last[1], total_length=last[2]))
    return replace(state, units=units, n_sup=n_sup, n_terms=n_terms, total_length=length, recent=history)


def version_list(path: Path, snap: Any) -> list[dict[str, Any]]:
    """``Searcher.versions``: the versions committed through ``snap``'s, oldest first."""
    state = snap.state
    if state is None:
        return []
    out = []
    prev_sup = 0
    for e in state.history(path):
        if e.version > snap.version:
            break
        if state.format == 1:  # format 1 records no supersession counts: the commit's files tell
            sup = any(u.lo == e.version and "sup" in u.files for u in state.units)
        else:
            sup = (e.n_sup or 0) > prev_sup
            prev_sup = e.n_sup or 0
        out.append({"version": e.version, "committed_at": e.committed_at, "docs": e.added, "supersessions": sup, "kind": e.kind})
    return out
