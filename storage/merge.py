"""Segment merging: which adjacent units to join (the policy, a pure function), and the join.

Why adjacent only: documents keep their ids and their order, so a merge changes no score,
no thread neighbour and no tie-break, and every earlier version stays a prefix of the units
(time travel reads the current units cut at that version's counts; ``snapshot.py``).

The policy, in the spirit of tantivy's log merge policy but over a sequence rather than a set:

- a unit's *level* is ``floor(log_F(docs))`` for ``F = MERGE_FACTOR`` (units under ``F``
  documents, supersession-only units included, are level 0);
- ``F`` adjacent units of one level are merged into one (the oldest ``F`` of such a run first);
  each document is then rewritten about once per level, ``log_F(N)`` times in all, and at
  most ``F − 1`` units of each level stay live;
- should units of different sizes interleave so that no run reaches ``F`` (a bulk commit
  between small ones), the adjacent pair with the fewest documents is merged whenever the
  count passes ``F + (F − 1) × levels``, which bounds the count whatever the history;
- nothing is merged across the boundary of an ANN index's range (an index covers whole
  units), and no merge makes a unit of more than ``MAX_MERGED_DOCS`` documents (bulk commits
  are big enough as they are).

A merge writes the joined unit's files under new names (as a commit writes its own), then
publishes a version that replaces the run by it (``manifest.apply``); the files it replaced
are removed once no version the writer keeps current names them (``writer.clean_strays``).

Owns: the merge policy and the merged files. Must never import the engine.

Never imports: snapshot, mempp.store, mempp.writer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from .arrowio import map_table
from .files import FileRef, write_table_file
from .fsutil import close_all, failpoint, fsync_all
from .resident import advise_if_larger
from .manifest import SEGMENTS, Entry, State, Unit, commit_version
from .postings import Postings
from . import commits
from .commits import now_iso, prepare_dirs, q8_table, window_table

MERGE_FACTOR = 8
MAX_MERGED_DOCS = 1 << 20


@dataclass(frozen=True)
class Candidate:
    """Units ``[start, stop)`` of a state's list to merge."""

    start: int
    stop: int


def level(docs: int, factor: int = MERGE_FACTOR) -> int:
    return 0 if docs < factor else int(math.log(docs, factor) + 1e-9)


def plan(
    sizes: Sequence[int], barriers: Sequence[bool] = (), *, factor: int = MERGE_FACTOR, max_docs: int = MAX_MERGED_DOCS
) -> Candidate | None:
    """The next merge for units of ``sizes`` documents (oldest first), or None.

    ``barriers[i]``: no merge may join unit ``i`` with unit ``i + 1`` (an ANN range ends between them).
    """
    n = len(sizes)
    bar = list(barriers) + [False] * (n - len(barriers))
    levels = [level(s, factor) for s in sizes]
    i = 0
    while i < n:
        j = i + 1
        while j < n and levels[j] == levels[i] and not bar[j - 1]:
            j += 1
        if j - i >= factor and sum(sizes[i : i + factor]) <= max_docs:
            return Candidate(i, i + factor)
        i = j
    budget = factor + (factor - 1) * (level(max(sum(sizes), 1), factor) + 1)
    if n > budget:
        pairs = [(sizes[k] + sizes[k + 1], k) for k in range(n - 1) if not bar[k] and sizes[k] + sizes[k + 1] <= max_docs]
        if pairs:
            _, k = min(pairs)
            return Candidate(k, k + 2)
    return None


def barriers(state: State) -> list[bool]:
    """Between which consecutive units an ANN index's range starts or ends."""
    edges = {a.first for a in state.anns} | {a.first + a.n for a in state.anns}
    return [u.first_doc + u.n_docs in edges for u in state.units[:-1]]


def next_merge(state: State) -> Candidate | None:
    return plan([u.n_docs for u in state.units], barriers(state))


def merged_unit(store: Path, snap, units: list[Unit]) -> Unit:
    """Write the files of ``units`` (adjacent, oldest first, as ``snap`` maps them) joined as one unit."""
    lo, hi = units[0].lo, units[-1].hi
    stem = f"{SEGMENTS}/m{lo:08d}-{hi:08d}"
    failpoint("merge_before_files")
    prepare_dirs(store)
    by_name = {e.segment.name: e for e in snap.segments}
    entries = [by_name[u.files["docs"].name] for u in units if "docs" in u.files]
    first = units[0].first_doc
    files: dict[str, FileRef] = {}
    pending: list = []  # written first, then fsynced at once (fsutil.fsync_all)
    try:
        if entries:
            advise_if_larger([e.segment.embeddings for e in entries], snap.embedding_bytes, "sequential")  # read once, in order
            docs = pa.concat_tables([e.segment.table for e in entries]).combine_chunks()
            files["docs"] = write_table_file(store, f"{stem}.docs.arrow", docs, pending)
            small = sum(u.n_docs for u in units) < commits.SMALL_UNIT  # derived data made when opened (commits.SMALL_UNIT)
            if not small:
                post, index = Postings.merge([(e.postings, e.base - first) for e in entries]).tables()
                files["post"] = write_table_file(store, f"{stem}.post.arrow", post, pending)
                files["index"] = write_table_file(store, f"{stem}.terms.arrow", index, pending)
            if any(e.window_rows is not None for e in entries):
                wins = [e for e in entries if e.window_rows is not None]
                rows = np.concatenate([e.window_rows.astype(np.int64) + (e.base - first) for e in wins])
                table = window_table(rows, np.concatenate([e.window_embeddings for e in wins]))
                files["win"] = write_table_file(store, f"{stem}.win.arrow", table, pending)
            if not small and all(e.q8 is not None for e in entries):
                q8 = np.concatenate([_row_order(e.q8, e.q8_order) for e in entries])
                scale = np.concatenate([_row_order(e.q8_scale, e.q8_order) for e in entries])
                dates = np.concatenate([e.segment.dates for e in entries])
                files["q8"] = write_table_file(store, f"{stem}.q8.arrow", q8_table(q8, scale, dates), pending)
        terms = [t for u in units if "dict" in u.files for t in map_table(store / u.files["dict"].name).column("term").to_pylist()]
        if terms:
            files["dict"] = write_table_file(store, f"{stem}.dict.arrow", pa.table({"term": pa.array(terms, pa.string())}), pending)
        sups = [map_table(store / u.files["sup"].name) for u in units if "sup" in u.files]
        if sups:
            files["sup"] = write_table_file(store, f"{stem}.sup.arrow", pa.concat_tables(sups).combine_chunks(), pending)
        fsync_all(pending)
    finally:
        close_all(pending)
    failpoint("merge_after_files")
    return Unit(
        stem, lo, hi, first, sum(u.n_docs for u in units), files, units[0].first_sup, sum(u.n_sup for u in units),
        units[0].first_term, sum(u.n_terms for u in units), sum(u.length for u in units),
    )


def publish_merge(store: Path, state: State, replaced: list[Unit], unit: Unit) -> State:
    """Publish the version that replaces the adjacent ``replaced`` by ``unit`` (their join)."""
    stems = [u.stem for u in replaced]
    units = [u.stem for u in state.units]
    at = units.index(stems[0]) if stems[0] in units else -1
    if at < 0 or units[at : at + len(stems)] != stems:
        raise ValueError("the units to replace are no longer adjacent in the current version")
    entry = Entry(state.version + 1, now_iso(), "merge", state.n_docs, state.n_sup, state.n_terms, state.total_length, len(state.anns), 0)
    return commit_version(store, state, {"op": "merge", "replaced": stems, "unit": unit.to_json()}, entry)


def _row_order(values: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """An int8 copy's rows (or scales) back in segment row order (they are stored in date order)."""
    if order is None:
        return values
    out = np.empty_like(values)
    out[order] = values
    return out


__all__ = ["Candidate", "MAX_MERGED_DOCS", "MERGE_FACTOR", "barriers", "level", "merged_unit", "next_merge", "plan", "publish_merge"]
