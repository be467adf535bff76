"""Erasure: the one write that destroys data (docs/DESIGN.md §8.5).

An erased document keeps its row, so that every doc id, count and earlier version stays what it
was, but the row is blank: no text (an empty text marks it; a stored document never has one), no
key, author, thread, channel, source or metadata, a fingerprint of 0 and a zero embedding. Its
postings, window vectors and int8 row go with it, a dictionary term no other document holds is
replaced by a placeholder that no query can spell, and an ANN index that held its vector is
rewritten with a zero vector, marked deleted. Every file that held any of it is written again
under a new name, published as a ``replace`` delta (history kind ``erase``) that also names the
new access log (its erase events: doc id, key, date, reason), and the files it replaced are then
removed (a crash before that leaves them unnamed by the current version: the next writer removes
them, ``commits.clean_strays``). Their earlier versions are the current units cut at their
counts (§4.3), so they read the blank rows too.

Owns :func:`erase_rows` (the rewrite and its publication) and :func:`erased_rows` /
:func:`erased_in` (which rows of a segment are erased).

Never imports: snapshot, mempp.store, mempp.writer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrowio import map_table, mapped_matrix, numeric
from .commits import ACCESS_SCHEMA, FILE_STEPS, now_iso, prepare_dirs, window_table
from .files import FileRef, write_file, write_table_file
from .fsutil import close_all, failpoint
from .manifest import SEGMENTS, Ann, Entry, State, Unit, commit_version
from .postings import Postings

BLANKED = ("key", "author", "thread", "channel", "source", "meta")  # set to null in an erased row


def placeholder_term(term_id: int) -> str:
    """What an erased term's dictionary entry becomes: unique, and never a token (no analyzer
    yields a NUL character)."""
    return f"\x00erased\x00{term_id}"


def erased_rows(table: pa.Table) -> np.ndarray:
    """Which rows of a segment table are erased (their text is empty): one bool each."""
    parts = []
    for c in table.column("text").chunks:  # from the offsets (pyarrow.compute would load pandas on open)
        kind = np.int64 if pa.types.is_large_string(c.type) else np.int32
        off = np.frombuffer(c.buffers()[1], dtype=kind)[c.offset : c.offset + len(c) + 1]
        parts.append(np.diff(off) == 0)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.bool_)


def erased_in(parts: list) -> tuple[np.ndarray, int]:
    """The erased doc ids of ``parts`` (``(snapshot entry, first row)``: the rows from there on) and
    the sum of their BM25 lengths (an erased row keeps its length; BM25 leaves it out)."""
    ids, length = [], 0
    for e, r in parts:
        rows = r + np.flatnonzero(erased_rows(e.segment.table.slice(r)))
        if len(rows):
            ids.append(e.base + rows)
            length += int(e.segment.lengths[rows].astype(np.int64).sum())
    return (np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, dtype=np.int64)), length


def erase_rows(store: Path, state: State, snap: Any, doc_ids: np.ndarray, access: pa.Table) -> tuple[State, list[str]]:
    """Blank ``doc_ids`` (of ``snap``, the full current version of ``state``) in every file that
    holds them, and publish that with the access log ``access`` as version ``state.version + 1``.
    Returns the new state and the names of the files it replaced (to remove once published)."""
    failpoint("before_commit")
    version = state.version + 1
    ids = np.unique(np.asarray(doc_ids, dtype=np.int64))
    by_docs = {e.segment.name: e for e in snap.segments}
    pending: list = []
    new_units: dict[str, Unit] = {}
    replaced: list[str] = []
    new_posts: dict[str, Postings] = {}  # docs file name -> the postings after erasure
    gone_terms: list[np.ndarray] = []  # the erased rows' term ids
    steps: list[str] = []
    try:
        prepare_dirs(store)
        for u in state.units:
            mine = ids[(ids >= u.first_doc) & (ids < u.first_doc + u.n_docs)]
            if not len(mine) or "docs" not in u.files:
                continue
            entry = by_docs[u.files["docs"].name]
            rows = (mine - u.first_doc).astype(np.int64)
            files = dict(u.files)
            tag = f"{u.stem}.e{version:08d}"
            files["docs"] = write_table_file(store, f"{tag}.docs.arrow", _blank_segment(entry.segment, rows), pending)
            post = entry.postings
            hit = np.isin(post.docs, rows)
            gone_terms.append(np.repeat(post.terms, post.dfs)[hit])
            new_posts[u.files["docs"].name] = kept = _without(post, hit)
            if "post" in files:
                p, i = kept.tables()
                files["post"] = write_table_file(store, f"{tag}.post.arrow", p, pending)
                files["index"] = write_table_file(store, f"{tag}.terms.arrow", i, pending)
            if "win" in files:
                win = map_table(store / u.files["win"].name)
                wrows = numeric(win.column("row"))
                keep = ~np.isin(wrows, rows)
                files["win"] = write_table_file(store, f"{tag}.win.arrow", window_table(wrows[keep], mapped_matrix(win.column("embedding"))[keep]), pending)
            if "q8" in files:
                files["q8"] = write_table_file(store, f"{tag}.q8.arrow", _blank_q8(map_table(store / u.files["q8"].name), rows), pending)
            replaced += [u.files[k].name for k in files if k in u.files and files[k] is not u.files[k]]
            steps += [FILE_STEPS[k] for k in ("docs", "post", "index", "win", "q8") if k in files and files[k] is not u.files[k]]
            new_units[u.stem] = _with_files(u, files)
        _placeholders(store, state, snap, new_posts, gone_terms, version, new_units, replaced, pending)
        if "dict" in {k for u in new_units.values() for k in u.files}:
            steps.append(FILE_STEPS["dict"])
        anns = []
        for a in state.anns:
            mine = ids[(ids >= a.first) & (ids < a.first + a.n)]
            if len(mine):
                data = _blank_ann(store, a, mine, snap.dim, version)
                anns.append(Ann(a.version, a.first, a.n, dict(a.params), write_file(store, f"{SEGMENTS}/{version:08d}.a{a.version:08d}.ann.hnsw", data, pending)))
                replaced.append(a.file.name)
                steps.append("after_ann_fsync")
        log = write_table_file(store, f"{SEGMENTS}/{version:08d}.access.arrow", access.cast(ACCESS_SCHEMA), pending)
        steps.append("after_access_fsync")
    except BaseException:
        close_all(pending)
        raise
    change = {
        "op": "replace", "units": [u.to_json() for u in new_units.values()], "anns": [a.to_json() for a in anns],
        "access": log.to_json(),
    }
    entry = Entry(version, now_iso(), "erase", state.n_docs, state.n_sup, state.n_terms, state.total_length, len(state.anns), 0)
    new = commit_version(store, state, change, entry, pending, tuple(dict.fromkeys(steps)))
    return new, sorted(set(replaced))


def _with_files(u: Unit, files: dict[str, FileRef]) -> Unit:
    return Unit(u.stem, u.lo, u.hi, u.first_doc, u.n_docs, files, u.first_sup, u.n_sup, u.first_term, u.n_terms, u.length)


def _blank_segment(seg: Any, rows: np.ndarray) -> pa.Table:
    """The segment's table with ``rows`` blank (new buffers for every column that held their data)."""
    table = seg.table.combine_chunks()
    n = table.num_rows
    mask = np.zeros(n, dtype=np.bool_)
    mask[rows] = True
    hit = pa.array(mask)
    nulled = pa.array(np.arange(n, dtype=np.int64), mask=mask)  # take() of it: null there, and no bytes kept for them
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if name == "text":
            cols[name] = pc.if_else(hit, pa.scalar("", col.type), col)
        elif name in BLANKED:
            cols[name] = col.take(nulled)
        elif name == "fingerprint":
            cols[name] = pc.if_else(hit, pa.scalar(0, col.type), col)
        elif name == "embedding":
            emb = np.array(seg.embeddings, dtype=np.float32, copy=True)
            emb[rows] = 0.0
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1), pa.float32()), emb.shape[1])
        else:
            cols[name] = col
    # if_else may keep the unchanged rows' bytes and drop the erased ones': concatenating into one
    # fresh chunk makes sure no buffer of the written file is a slice of the old one
    arrays = [pa.concat_arrays([c]) if isinstance(c, pa.Array) else pa.concat_arrays(c.chunks) for c in cols.values()]
    return pa.table(arrays, schema=table.schema)


def _without(post: Postings, hit: np.ndarray) -> Postings:
    """``post`` without the entries ``hit`` marks (the erased rows')."""
    if not hit.any():
        return post
    keep = ~hit
    terms = np.repeat(post.terms, post.dfs)[keep]
    u_terms, starts, dfs = np.unique(terms, return_index=True, return_counts=True)
    return Postings(
        terms=u_terms.astype(np.int32), starts=starts.astype(np.int64), dfs=dfs.astype(np.int32),
        docs=np.ascontiguousarray(post.docs[keep]), tfs=np.ascontiguousarray(post.tfs[keep]),
    )


def _blank_q8(q8: pa.Table, rows: np.ndarray) -> pa.Table:
    """The int8 copy with ``rows``' codes and scales zero (kept in its date order)."""
    q = np.array(mapped_matrix(q8.column("q")), dtype=np.int8, copy=True)
    scale = np.array(numeric(q8.column("scale")), dtype=np.float32, copy=True)
    if "row" in q8.column_names:
        at = np.flatnonzero(np.isin(numeric(q8.column("row")), rows))
    else:  # older stores: row order
        at = rows
    q[at] = 0
    scale[at] = 0.0
    cols = {"q": pa.FixedSizeListArray.from_arrays(pa.array(q.reshape(-1), pa.int8()), q.shape[1]), "scale": pa.array(scale, pa.float32())}
    for name in q8.column_names:
        if name not in cols:
            cols[name] = pa.concat_arrays(q8.column(name).chunks)
    return pa.table({name: cols[name] for name in q8.column_names})


def _placeholders(store, state, snap, new_posts, gone_terms, version, new_units, replaced, pending) -> None:
    """Replace, in the dictionary files that hold them, the terms no document holds any more."""
    if not gone_terms:
        return
    cand = np.unique(np.concatenate(gone_terms)).astype(np.int64)
    if not len(cand):
        return
    df = np.zeros(len(cand), dtype=np.int64)
    for e in snap.segments:
        _, _, d = new_posts.get(e.segment.name, e.postings).lookup(cand)
        df += d
    gone = cand[df == 0]
    for u in state.units:
        if "dict" not in u.files or u.first_term is None:
            continue
        mine = gone[(gone >= u.first_term) & (gone < u.first_term + (u.n_terms or 0))]
        if not len(mine):
            continue
        base = new_units.get(u.stem, u)
        terms = map_table(store / u.files["dict"].name).column("term").to_pylist()
        for t in mine.tolist():
            terms[t - u.first_term] = placeholder_term(t)
        files = dict(base.files)
        files["dict"] = write_table_file(store, f"{u.stem}.e{version:08d}.dict.arrow", pa.table({"term": pa.array(terms, pa.string())}), pending)
        replaced.append(u.files["dict"].name)
        new_units[u.stem] = _with_files(base, files)


def _blank_ann(store: Path, a: Ann, ids: np.ndarray, dim: int, version: int) -> bytes:
    """The ANN index file ``a`` with ``ids``' vectors zero and marked deleted (loaded afresh from
    its file: the index readers use is never changed)."""
    from .ann import load, to_bytes

    index = load(store / a.file.name, dim, a.n)
    index.add_items(np.zeros((len(ids), dim), dtype=np.float32), ids)  # an existing label: its vector replaced
    for d in ids.tolist():
        try:
            index.mark_deleted(int(d))
        except RuntimeError:  # already marked by an earlier erasure
            pass
    return to_bytes(index, store / f".ann-erase.tmp-{os.getpid()}")


__all__ = ["erase_rows", "erased_in", "erased_rows", "placeholder_term"]
