"""The commit: write one batch's immutable files, then publish a new manifest.

Order (each step durable before the next): segment, postings, term index,
new dictionary terms and supersession events are written under names no
published manifest uses, each fsynced; then the new manifest is written and
fsynced; then ``CURRENT`` is replaced atomically and the directory fsynced.
A crash before the last rename leaves the previous version current; the
files it left behind are unreferenced and overwritten by the next commit.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import StoreWriteError
from .fsutil import FsyncError, failpoint, fsync_dir, mkdir
from .manifest import FORMAT, MANIFESTS, SEGMENTS, publish, write_file, write_table_file
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

    @property
    def n_docs(self) -> int:
        return 0 if self.columns is None else len(self.columns["doc_id"])

    def empty(self) -> bool:
        return self.n_docs == 0 and not self.supersessions and self.ann is None


# A batch of at least this many documents writes its big files from threads at once (see _commit).
PARALLEL_WRITES = 2000


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


def new_manifest(dim: int, embedder: dict, analyzer: dict, index: dict | None = None) -> dict:
    return {
        "format": FORMAT,
        "version": 0,
        "dim": dim,
        "embedder": embedder,
        "analyzer": analyzer,
        "index": index or {},
        "n_docs": 0,
        "total_length": 0,
        "n_terms": 0,
        "commits": [],
    }


def commit(store: Path, previous: dict, batch: CommitBatch) -> dict:
    """Write ``batch`` and publish it as version ``previous['version'] + 1``; return the new manifest.

    An I/O error raises :class:`StoreWriteError` (``broken=True`` when an fsync failed);
    the previous version stays current unless the error came after the ``CURRENT``
    rename, in which case the new version may or may not survive a crash.
    """
    try:
        return _commit(store, previous, batch)
    except FsyncError as exc:
        raise StoreWriteError(f"{store}: commit failed, fsync error: {exc}", exc.errno, broken=True) from exc
    except OSError as exc:
        raise StoreWriteError(f"{store}: commit failed: {exc}", exc.errno) from exc


def _commit(store: Path, previous: dict, batch: CommitBatch) -> dict:
    version = int(previous["version"]) + 1
    failpoint("before_commit")
    created = mkdir(store / SEGMENTS)
    created |= mkdir(store / MANIFESTS)
    if created:  # first commit: the new directories must be durable before CURRENT names files in them
        fsync_dir(store)
    stem = f"{SEGMENTS}/{version:08d}"
    files: dict[str, dict] = {}
    entry: dict = {"version": version, "committed_at": _now_iso(), "files": files}
    total_length = int(previous["total_length"])
    if batch.n_docs:
        # The postings are inverted and encoded in a thread (numba and Arrow release the GIL)
        # while the segment is encoded and written here. A big batch's postings, term index
        # and int8 copy are also written from that thread while the segment is (the writes'
        # copies into the page cache take one core per ~300 MB/s here); the steps still
        # complete, and their failpoints fire, in the order of the files; all are fsynced
        # before the manifest is written, as before. A small batch writes one file at a time.
        aside = batch.n_docs >= PARALLEL_WRITES

        def postings_files():
            post, index = Postings.build_flat(*batch.flat_terms).tables()
            if not aside:
                return post, index
            return write_table_file(store, f"{stem}.post.arrow", post), write_table_file(store, f"{stem}.terms.arrow", index)

        with ThreadPoolExecutor(max_workers=1) as pool:
            postings = pool.submit(postings_files)
            q8 = None
            if aside and batch.quantized is not None:  # after the postings, in the same thread
                q8 = pool.submit(lambda: write_table_file(store, f"{stem}.q8.arrow", _q8_file(batch)))
            files["docs"] = write_table_file(store, f"{stem}.docs.arrow", segment_batch(batch.columns, batch.embeddings)).to_json()
            failpoint("after_docs_fsync")
            post, index = postings.result()
            if not aside:
                post = write_table_file(store, f"{stem}.post.arrow", post)
            files["post"] = post.to_json()
            failpoint("after_post_fsync")
            if not aside:
                index = write_table_file(store, f"{stem}.terms.arrow", index)
            files["index"] = index.to_json()
            failpoint("after_terms_fsync")
            if batch.window_rows is not None and len(batch.window_rows):
                dim = batch.window_embeddings.shape[1]
                flat = pa.array(np.ascontiguousarray(batch.window_embeddings, dtype=np.float32).reshape(-1), pa.float32())
                table = pa.table(
                    {
                        "row": pa.array(batch.window_rows, pa.int32()),
                        "embedding": pa.FixedSizeListArray.from_arrays(flat, dim),
                    }
                )
                files["win"] = write_table_file(store, f"{stem}.win.arrow", table).to_json()
                failpoint("after_win_fsync")
            if batch.quantized is not None:
                ref = q8.result() if q8 is not None else write_table_file(store, f"{stem}.q8.arrow", _q8_file(batch))
                files["q8"] = ref.to_json()
                failpoint("after_q8_fsync")
        entry["first_doc"] = int(batch.columns["doc_id"][0])
        entry["n_docs"] = batch.n_docs
        total_length += int(sum(batch.columns["length"]))
    if batch.new_terms:
        table = pa.table({"term": pa.array(batch.new_terms, pa.string())})
        files["dict"] = write_table_file(store, f"{stem}.dict.arrow", table).to_json()
        failpoint("after_dict_fsync")
    if batch.supersessions:
        old, new, eff, rec = zip(*batch.supersessions)
        table = pa.table(
            {
                "old": pa.array(old, pa.uint64()),
                "new": pa.array(new, pa.uint64()),
                "effective": pa.array(eff, pa.int64()).cast(TS),
                "recorded_at": pa.array(rec, pa.int64()).cast(TS),
            }
        )
        files["sup"] = write_table_file(store, f"{stem}.sup.arrow", table).to_json()
        failpoint("after_sup_fsync")
    if batch.ann is not None:
        first, n, params, data = batch.ann
        files["ann"] = write_file(store, f"{stem}.ann.hnsw", data).to_json()
        failpoint("after_ann_fsync")
        entry["ann"] = {"first": int(first), "n": int(n), "params": params}
    manifest = dict(previous)
    manifest.update(
        version=version,
        n_docs=int(previous["n_docs"]) + batch.n_docs,
        total_length=total_length,
        n_terms=int(previous["n_terms"]) + len(batch.new_terms),
        commits=list(previous["commits"]) + [entry],
    )
    publish(store, manifest)
    return manifest


def now_us() -> int:
    return time.time_ns() // 1000


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def clean_strays(store: Path, manifest: dict | None) -> list[str]:
    """Remove what failed or crashed commits left: temporary files, and segment and manifest
    files no committed version names. Call only while holding the writer lock; returns the names removed.
    """
    from .fsutil import unlink

    version = int(manifest["version"]) if manifest else 0
    keep = {f["name"] for c in (manifest or {}).get("commits", []) for f in c["files"].values()}
    removed = []
    for d in (store, store / SEGMENTS, store / MANIFESTS):
        if not d.is_dir():
            continue
        for p in d.iterdir():
            rel = p.relative_to(store).as_posix()
            if d == store:
                stray = p.name.startswith(".") and ".tmp-" in p.name
            elif d.name == SEGMENTS:
                stray = rel not in keep
            else:
                stem = p.name.removesuffix(".json")
                stray = (".tmp-" in p.name) or (stem.isdigit() and int(stem) > version)
            if stray and (p.is_file() or p.is_symlink()):
                unlink(p)
                removed.append(rel)
    return removed
