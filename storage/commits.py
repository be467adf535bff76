"""The commit: write one batch's immutable files as a new unit, then publish a new version.

Order (each step durable before the next): segment, postings, term index, window vectors,
int8 copy, new dictionary terms, supersession events and ANN index are written under names no
published version uses, each fsynced; then the version file (manifest.py) is written and
fsynced; then ``CURRENT`` is replaced atomically and the directory fsynced. A crash before
the last rename leaves the previous version current; the files it left behind are
unreferenced and removed by the next writer (:func:`clean_strays`).

Owns: the write of one commit's files. Must never import the engine.

Never imports: snapshot, merge, mempp.store, mempp.writer.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .aside import file_number, set_aside, strays
from .errors import StoreWriteError
from .files import FileRef, write_file, write_table_file
from .fsutil import FsyncError, close_all, failpoint, fsync_dir, mkdir
from .manifest import MANIFESTS, SEGMENTS, Ann, Entry, State, Unit, commit_version
from .postings import Postings
from .segment import NAT, TS, date_order, segment_batch


@dataclass
class CommitBatch:
    """What one commit adds. Every part may be empty."""

    columns: dict | None = None  # segment columns (see segment_schema), without "embedding"
    embeddings: np.ndarray | None = None
    flat_terms: tuple[np.ndarray, np.ndarray] | None = None  # all new rows' term ids back to back, and each row's count
    new_terms: list[str] = field(default_factory=list)
    supersessions: list[tuple[int, int, int, int]] = field(default_factory=list)  # old, new, effective µs, recorded µs
    window_rows: np.ndarray | None = None  # segment row owning each extra window vector (long documents)
    window_embeddings: np.ndarray | None = None
    quantized: tuple[np.ndarray, np.ndarray] | None = None  # int8 copy of the embeddings (n, dim) and row scales
    ann: tuple[int, int, dict, bytes] | None = None  # an ANN index over doc ids [first, first + n): (first, n, params, file)
    access: pa.Table | None = None  # the whole access log after this commit (ACCESS_SCHEMA), when the commit changes it

    @property
    def n_docs(self) -> int:
        return 0 if self.columns is None else len(self.columns["doc_id"])

    def empty(self) -> bool:
        return self.n_docs == 0 and not self.supersessions and self.ann is None and self.access is None


# A batch of at least this many documents writes its big files from threads at once (see _commit).
PARALLEL_WRITES = 2000
# A unit of fewer documents is written as its segment (and window vectors) alone: its postings,
# term index and int8 copy are derived data that opening the version makes from the segment in
# memory (tokenizing a few documents costs less than opening three more files), and the commit
# writes, fsyncs and publishes three files fewer. Merges join such units into ones that have them.
SMALL_UNIT = 64


def q8_table(q8: np.ndarray, scale: np.ndarray, dates: np.ndarray) -> pa.Table:
    """The int8 copy of a segment's embeddings as stored: rows in date order (:func:`date_order`),
    each with its segment ``row`` and ``date``, so that the candidates of "date <= as_of" are a
    prefix to scan, not rows spread over the whole copy."""
    order = date_order(dates)
    rows = np.ascontiguousarray(q8)[order]
    return pa.table(
        {
            "q": pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1), pa.int8()), q8.shape[1]),
            "scale": pa.array(scale[order], pa.float32()),
            "row": pa.array(order, pa.int32()),
            "date": pa.array(dates[order], pa.int64()),
        }
    )


def _q8_file(batch: "CommitBatch") -> pa.Table:
    q8, scale = batch.quantized
    dates = pa.array(batch.columns["date"], pa.int64()).fill_null(NAT).to_numpy()  # µs, NAT when undated
    return q8_table(q8, scale, dates)


def new_meta(dim: int, embedder: dict, analyzer: dict, index: dict | None = None) -> dict:
    """What a new store fixes at creation: recorded in every checkpoint, checked on open."""
    return {"dim": dim, "embedder": embedder, "analyzer": analyzer, "index": index or {}}


class Committed(NamedTuple):
    """What :func:`commit` published: the new state, and what it made in memory that opening the
    version may use as it is (by segment file name: a small unit's postings and int8 copy), or None."""

    state: State
    built: dict | None


def commit(store: Path, state: State, batch: CommitBatch) -> Committed:
    """Write ``batch`` and publish it as version ``state.version + 1``; return the new state (and
    what the commit built in memory: :class:`Committed`).

    An I/O error raises :class:`StoreWriteError` (``broken=True`` when an fsync failed);
    the previous version stays current unless the error came after the ``CURRENT``
    rename, in which case the new version may or may not survive a crash.
    """
    return guarded(store, lambda: _commit(store, state, batch))


def guarded(store: Path, fn):
    """Run a write, turning I/O errors into :class:`StoreWriteError`."""
    try:
        return fn()
    except FsyncError as exc:
        raise StoreWriteError(f"{store}: commit failed, fsync error: {exc}", exc.errno, broken=True) from exc
    except OSError as exc:
        raise StoreWriteError(f"{store}: commit failed: {exc}", exc.errno) from exc


def prepare_dirs(store: Path) -> None:
    created = mkdir(store / SEGMENTS)
    created |= mkdir(store / MANIFESTS)
    if created:  # first commit: the new directories must be durable before CURRENT names files in them
        fsync_dir(store)


def _commit(store: Path, state: State, batch: CommitBatch) -> Committed:
    version = state.version + 1
    failpoint("before_commit")
    prepare_dirs(store)
    stem = f"{SEGMENTS}/{version:08d}"
    files: dict[str, FileRef] = {}
    pending: list = []  # every new file, written and fsynced together when the version is published
    length = 0
    built = None
    try:
        if batch.n_docs:
            length = int(sum(batch.columns["length"]))
            built = _write_rows(store, stem, batch, files, pending)
        if batch.new_terms:
            table = pa.table({"term": pa.array(batch.new_terms, pa.string())})
            files["dict"] = write_table_file(store, f"{stem}.dict.arrow", table, pending)
        if batch.supersessions:
            files["sup"] = write_table_file(store, f"{stem}.sup.arrow", sup_table(batch.supersessions), pending)
        ann = None
        if batch.ann is not None:
            first, n, params, data = batch.ann
            ref = write_file(store, f"{stem}.ann.hnsw", data, pending)
            ann = Ann(version, int(first), int(n), params, ref)
        access = None
        if batch.access is not None:
            access = write_table_file(store, f"{stem}.access.arrow", batch.access.cast(ACCESS_SCHEMA), pending)
    except BaseException:
        close_all(pending)
        raise
    unit = None
    if files:
        unit = Unit(
            stem, version, version, state.n_docs, batch.n_docs, files, state.n_sup, len(batch.supersessions), state.n_terms,
            len(batch.new_terms), length,
        )
    kind = "add" if batch.n_docs else "supersede" if batch.supersessions else "ann" if ann is not None else "access"
    entry = Entry(
        version, now_iso(), kind, state.n_docs + batch.n_docs, state.n_sup + len(batch.supersessions),
        state.n_terms + len(batch.new_terms), state.total_length + length, len(state.anns) + (ann is not None), batch.n_docs,
    )
    change = {"op": "append", "unit": None if unit is None else unit.to_json(), "ann": None if ann is None else ann.to_json()}
    if access is not None:
        change["access"] = access.to_json()
    steps = tuple(FILE_STEPS[k] for k in FILE_ORDER if k in files) + (("after_ann_fsync",) if ann is not None else ())
    steps += ("after_access_fsync",) if access is not None else ()
    return Committed(commit_version(store, state, change, entry, pending, steps), built)


FILE_ORDER = ("docs", "post", "index", "win", "q8", "dict", "sup")
FILE_STEPS = {
    "docs": "after_docs_fsync", "post": "after_post_fsync", "index": "after_terms_fsync", "win": "after_win_fsync",
    "q8": "after_q8_fsync", "dict": "after_dict_fsync", "sup": "after_sup_fsync",
}


def _write_rows(store: Path, stem: str, batch: CommitBatch, files: dict, pending: list) -> dict | None:
    """The new rows' files: segment, postings, term index, window vectors, int8 copy. A small
    batch writes its segment alone and returns its postings and int8 copy, made in memory
    (``{segment file name: {"postings", "q8"}}``); a bigger one returns None.

    A big batch's postings are inverted and encoded, and with its term index and int8 copy
    written, in a thread (numba and Arrow release the GIL) while the segment is encoded and
    written here (the writes' copies into the page cache take one core per ~300 MB/s here).
    A small batch writes one file after another.
    """
    if batch.n_docs < SMALL_UNIT:
        files["docs"] = write_table_file(store, f"{stem}.docs.arrow", segment_batch(batch.columns, batch.embeddings), pending)
        if batch.window_rows is not None and len(batch.window_rows):
            files["win"] = write_table_file(store, f"{stem}.win.arrow", window_table(batch.window_rows, batch.window_embeddings), pending)
        built = {"postings": Postings.build_flat(*batch.flat_terms)}
        if batch.quantized is not None:
            q8, scale = batch.quantized
            dates = pa.array(batch.columns["date"], pa.int64()).fill_null(NAT).to_numpy()
            order = date_order(dates)
            built["q8"] = (np.ascontiguousarray(q8[order]), scale[order], order, dates[order])
        return {files["docs"].name: built}
    if batch.n_docs < PARALLEL_WRITES:
        files["docs"] = write_table_file(store, f"{stem}.docs.arrow", segment_batch(batch.columns, batch.embeddings), pending)
        post, index = Postings.build_flat(*batch.flat_terms).tables()
        files["post"] = write_table_file(store, f"{stem}.post.arrow", post, pending)
        files["index"] = write_table_file(store, f"{stem}.terms.arrow", index, pending)
        if batch.window_rows is not None and len(batch.window_rows):
            files["win"] = write_table_file(store, f"{stem}.win.arrow", window_table(batch.window_rows, batch.window_embeddings), pending)
        if batch.quantized is not None:
            files["q8"] = write_table_file(store, f"{stem}.q8.arrow", _q8_file(batch), pending)
        return None
    aside: list = []  # the thread's own new files (one list per thread: no shared appends)

    def derived():
        post, index = Postings.build_flat(*batch.flat_terms).tables()
        out = {
            "post": write_table_file(store, f"{stem}.post.arrow", post, aside),
            "index": write_table_file(store, f"{stem}.terms.arrow", index, aside),
        }
        if batch.quantized is not None:
            out["q8"] = write_table_file(store, f"{stem}.q8.arrow", _q8_file(batch), aside)
        return out

    with ThreadPoolExecutor(max_workers=1) as pool:
        got = pool.submit(derived)
        try:
            files["docs"] = write_table_file(store, f"{stem}.docs.arrow", segment_batch(batch.columns, batch.embeddings), pending)
            if batch.window_rows is not None and len(batch.window_rows):
                files["win"] = write_table_file(store, f"{stem}.win.arrow", window_table(batch.window_rows, batch.window_embeddings), pending)
        finally:
            try:
                files.update(got.result())
            finally:
                pending.extend(aside)
    ordered = {k: files[k] for k in FILE_ORDER if k in files}
    files.clear()
    files.update(ordered)
    return None


def window_table(rows: np.ndarray, embeddings: np.ndarray) -> pa.Table:
    """Extra window vectors of long documents: each with the segment row it belongs to."""
    dim = embeddings.shape[1]
    flat = pa.array(np.ascontiguousarray(embeddings, dtype=np.float32).reshape(-1), pa.float32())
    return pa.table({"row": pa.array(rows, pa.int32()), "embedding": pa.FixedSizeListArray.from_arrays(flat, dim)})


# The access log (every reader and membership change, oldest first; the engine's ``access.py`` reads
# it): ``op`` is "new_readers" (a document's readers, named when it was added) or "readers" (a
# later change; ``doc_id``'s readers become ``principals``; null: everyone),
# "add_members" or "remove_members" (``principals`` join or leave ``group``), "erase" (``doc_id``
# was erased; ``note``: JSON ``{"key", "reason"}``), "person" (an entry of the people directory,
# ``note``: its JSON; it replaces the entry of the same name). Logs written before erasure lack ``note``.
ACCESS_SCHEMA = pa.schema([
    ("version", pa.int64()), ("recorded_at", TS), ("op", pa.string()), ("doc_id", pa.int64()), ("group", pa.string()),
    ("principals", pa.list_(pa.string())), ("note", pa.string()),
])


def sup_table(events) -> pa.Table:
    """Supersession events ``(old, new, effective µs, recorded µs)`` as the log stores them."""
    old, new, eff, rec = zip(*events)
    return pa.table(
        {
            "old": pa.array(old, pa.uint64()),
            # -1: replaced by a document this store does not hold (an import of a reader's export); read back as -1
            "new": pa.array(np.asarray(new, dtype=np.int64).astype(np.uint64), pa.uint64()),
            "effective": pa.array(eff, pa.int64()).cast(TS),
            "recorded_at": pa.array(rec, pa.int64()).cast(TS),
        }
    )


def now_us() -> int:
    return time.time_ns() // 1000


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def clean_strays(store: Path, state: State | None) -> list[str]:
    """Clear what failed or crashed writes and earlier versions left in ``segments/`` and
    ``manifests/``: every file that ``state`` (the current version) does not name, and temporary
    files. Call only while holding the writer lock; returns the names cleared.

    A file is removed only when it is provably unreferenced: a temporary file, or one whose name
    carries no version newer than ``state``'s and that no version file on disk newer than
    ``state`` names (an earlier version's file, replaced by a merge or a checkpoint). Anything
    else (an interrupted commit's files, or the versions after a ``CURRENT`` that was lost or
    replaced by an older copy) is set aside in ``lost+found/`` with a note, never deleted
    (``recovery.set_aside``).

    A reader in another process that is still opening an older version may then find a file
    gone; it re-reads ``CURRENT`` and opens the newer version (``Store.open``). A reader that
    has opened a version keeps its files: they are memory-mapped, and a removed file's pages
    stay until the last mapping goes.
    """
    from .fsutil import unlink

    names = strays(store, state)
    if not names:
        return []
    current = state.version if state is not None else 0
    newer = _named_by_newer(store, names, current)
    remove = [n for n in names if ".tmp-" in n or (file_number(n) <= current and n not in newer)]
    for n in remove:
        unlink(store / n)
    aside = [n for n in names if n not in set(remove)]
    set_aside(store, aside, f"not named by version {current}, the current one: left by an interrupted write, "
                            "or by versions after a CURRENT that was lost or replaced")
    return names


def _named_by_newer(store: Path, names: list[str], current: int) -> set[str]:
    """The files that a version file among ``names`` newer than ``current`` names (read as far as it parses)."""
    import json

    out: set[str] = set()
    for n in names:
        if not n.startswith(f"{MANIFESTS}/") or not n.endswith(".json") or not n[len(MANIFESTS) + 1 : -5].isdigit():
            continue
        if int(n[len(MANIFESTS) + 1 : -5]) <= current:
            continue
        try:
            doc = json.loads((store / n).read_bytes())
            units = doc.get("units") or [doc.get("change", {}).get("unit")] + (doc.get("change", {}).get("units") or [])
            anns = doc.get("anns") or [doc.get("change", {}).get("ann")] + (doc.get("change", {}).get("anns") or [])
            out |= {f["name"] for u in units if isinstance(u, dict) for f in u.get("files", {}).values()}
            out |= {a["file"]["name"] for a in anns if isinstance(a, dict)}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
    return out
