"""A snapshot: one committed version of a store, opened read-only and pinned.

It maps every segment of the version and derives the per-document arrays the
planner needs (dates, the end of each document's validity, author/thread/
channel codes and their bitmaps). A later commit never changes a snapshot;
``Snapshot.load(..., previous=old)`` reuses the segments both share.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from mempp.kernels import quantize_rows

from .analyzer import Analyzer
from .arrowio import map_table, mapped_matrix, one_array
from .errors import CorruptStoreError
from .ann import AnnIndex
from .manifest import Checks, FileRef
from .postings import Postings
from .segment import NAT, Segment, _timestamps, date_order

FOREVER = np.iinfo(np.int64).max


@dataclass
class SegmentEntry:
    segment: Segment
    postings: Postings
    window_rows: np.ndarray | None = None  # int32 segment row of each extra window vector
    window_embeddings: np.ndarray | None = None  # (m, dim) float32, mapped
    q8: np.ndarray | None = None  # (n, dim) int8 copy of the embeddings, mapped (IndexConfig.vector_copy)
    q8_scale: np.ndarray | None = None  # float32 per row: embedding ≈ q8_scale * q8
    q8_order: np.ndarray | None = None  # int32 segment row of each row of q8 (stored in date order); None: row order
    q8_dates: np.ndarray | None = None  # int64 µs date of each row of q8, ascending (with q8_order)
    _norms: tuple[float, np.ndarray] | None = None  # (avgdl, bm25_norms of the lengths), per snapshot statistics
    _readers: dict | None = None  # column name -> row reader (RowReader), built on first use
    _getters: list | None = None  # (name, RowReader.get) of every column but the embedding, built on first use
    _q8_stats: tuple | None = None  # (byte sum, sum |q8|) per row of q8, built on first use
    q8_state: str = "none"  # q8 is "mapped" (from its file), "queued" or "resident" (resident.py), "built", "failed"

    def q8_stats(self) -> tuple:
        """The int8 copy's per-row byte sums and ``sum |q8|``, and the maxima the error bound
        needs (kernels.int8dot.segment_stats).

        Computed on the first query that scans the segment (about 2 ms per 50,000 rows) and kept.
        """
        stats = self._q8_stats
        if stats is None:
            from mempp.kernels.int8dot import segment_stats

            stats = self._q8_stats = segment_stats(self.q8, self.q8_scale)
        return stats

    def q8_span(self, lo: int | None, hi: int | None) -> tuple[int, int] | None:
        """The rows of q8 dated ``lo <= date <= hi`` (µs; None: unbounded), as ``(start, stop)``;
        None when q8 is in row order (an older store), where every row must be scanned.
        Undated rows sort first, inside every span that starts at 0."""
        dates = self.q8_dates
        if dates is None:
            return None
        start = 0 if lo is None else int(np.searchsorted(dates, lo, side="left"))
        stop = len(dates) if hi is None else int(np.searchsorted(dates, hi, side="right"))
        return start, max(start, stop)

    def q8_stops(self, hi: np.ndarray) -> np.ndarray | None:
        """For each date bound in ``hi`` (int64 µs, inclusive), the end of the rows of q8 dated at
        or before it (None when q8 is in row order)."""
        dates = self.q8_dates
        return None if dates is None else np.searchsorted(dates, hi, side="right").astype(np.int64)

    def make_resident(self, stop=None) -> int:
        """Swap the mapped int8 copy for one in anonymous memory on huge pages (storage/resident.py)
        and give the mapping's pages back; compute its :meth:`q8_stats` there too. Returns the
        bytes copied (0 when ``stop`` was set first, the copy staying mapped)."""
        from .resident import release_pages, resident_copy

        mapped = self.q8
        copy = resident_copy(mapped, stop)
        if copy is None:
            self.q8_state = "mapped"
            return 0
        self.q8 = copy  # a query reads q8 once per scan: it runs on either, the same bytes
        self.q8_state = "resident"
        release_pages(mapped)
        self.q8_stats()
        return copy.nbytes

    def norms(self, avgdl: float, k1: float, b: float) -> np.ndarray:
        """BM25 length norms of this segment's rows for the store-wide ``avgdl`` (cached)."""
        from mempp.kernels import bm25_norms

        cached = self._norms
        if cached is not None and cached[0] == (avgdl, k1, b):
            return cached[1]
        out = np.empty(len(self.segment.lengths), dtype=np.float64)
        bm25_norms(self.segment.lengths, avgdl, k1, b, out)
        self._norms = ((avgdl, k1, b), out)
        return out

    @property
    def base(self) -> int:
        return self.segment.first_doc

    def row_getters(self) -> list:
        """``(name, RowReader.get)`` of every column but the embedding, in the table's order."""
        getters = self._getters
        if getters is None:
            getters = self._getters = [(n, self.reader(n).get) for n in self.segment.table.column_names if n != "embedding"]
        return getters

    def reader(self, name: str) -> "RowReader":
        readers = self._readers
        if readers is None:
            readers = self._readers = {}
        r = readers.get(name)
        if r is None:
            r = readers[name] = RowReader(self.segment.table.column(name))
        return r


class RowReader:
    """Single values of one column by row, without Arrow's per-call ``take`` overhead.

    Strings, integers and microsecond timestamps are read straight from the column's
    buffers (well under a microsecond a value); other types through Arrow's scalar (about
    2 us). Values equal ``to_pylist()``'s (tests/test_snapshot_rows.py).
    """

    def __init__(self, column: pa.ChunkedArray):
        arr = one_array(column)
        self.arr = arr
        t = arr.type
        self.kind = "scalar"
        self.valid = None
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            self.kind = "string"
            validity, offsets, data = arr.buffers()
            width = np.int64 if pa.types.is_large_string(t) else np.int32
            self.offsets = np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
            self.data = memoryview(data) if data is not None else memoryview(b"")
        elif pa.types.is_integer(t) or (pa.types.is_timestamp(t) and t.unit == "us"):
            validity, values = arr.buffers()
            self.values = np.frombuffer(values, dtype=t.to_pandas_dtype() if pa.types.is_integer(t) else np.int64)[arr.offset : arr.offset + len(arr)]
            self.kind = "int"
            if pa.types.is_timestamp(t):
                import datetime as dt
                import zoneinfo

                self.kind = "timestamp"
                self.epoch = dt.datetime(1970, 1, 1, tzinfo=zoneinfo.ZoneInfo(t.tz) if t.tz else None)
                self.delta = dt.timedelta
        else:
            validity = None
        if self.kind != "scalar" and validity is not None and arr.null_count:
            bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            self.valid = bits[arr.offset : arr.offset + len(arr)]

    def get(self, row: int):
        kind = self.kind
        if kind == "scalar":
            return self.arr[row].as_py()
        if self.valid is not None and not self.valid[row]:
            return None
        if kind == "string":
            off = self.offsets
            return str(self.data[int(off[row]) : int(off[row + 1])], "utf-8")
        if kind == "int":
            return int(self.values[row])
        return self.epoch + self.delta(microseconds=int(self.values[row]))


@dataclass
class Facet:
    """A string column dictionary-encoded over the whole snapshot (author, thread, channel)."""

    names: list[str]
    codes: np.ndarray  # int32 per doc, -1 for null
    index: dict[str, int]
    _bitmaps: dict[int, BitMap] = field(default_factory=dict)
    _counts: np.ndarray | None = None

    @classmethod
    def build(cls, chunks: list[pa.ChunkedArray]) -> "Facet":
        names: list[str] = []
        index: dict[str, int] = {}
        parts = []
        for col in chunks:
            enc = one_array(col).dictionary_encode() if len(col) else None
            if enc is None:
                continue
            local = enc.dictionary.to_pylist()
            remap = np.empty(len(local) + 1, dtype=np.int32)
            remap[-1] = -1
            for i, name in enumerate(local):
                code = index.get(name)
                if code is None:
                    code = index[name] = len(names)
                    names.append(name)
                remap[i] = code
            idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            parts.append(remap[idx])
        codes = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, dtype=np.int32)
        return cls(names=names, codes=codes, index=index)

    def code_bitmap(self, code: int) -> BitMap:
        """Documents whose value has code ``code`` (cached for the snapshot's life)."""
        bm = self._bitmaps.get(code)
        if bm is None:
            bm = BitMap(np.flatnonzero(self.codes == code).astype(np.uint32))
            self._bitmaps[code] = bm
        return bm

    def union(self, codes: list[int]) -> BitMap:
        """Documents whose value has any of ``codes``."""
        return BitMap.union(BitMap(), *(self.code_bitmap(c) for c in codes))

    def counts(self) -> np.ndarray:
        """Documents per code (cached)."""
        if self._counts is None:
            self._counts = np.bincount(self.codes[self.codes >= 0], minlength=len(self.names))
        return self._counts


class Snapshot:
    """One committed version, read-only."""

    def __init__(
        self,
        store: Path,
        manifest: dict | None,
        previous: "Snapshot | None" = None,
        on_corrupt: str = "raise",
        verify: bool = True,
        written: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Load ``manifest``'s version, verifying every file's checksum (wide64; mix64 or sha256 in older stores) before parsing it.

        A damaged postings or term-index file is rebuilt in memory from the segment text
        (listed in ``rebuilt``). A damaged segment, window-vector or supersession file raises
        :class:`CorruptStoreError` naming it, unless ``on_corrupt="skip"``: then the rest
        stays readable, the documents of a skipped segment are never returned, and the file
        is listed in ``skipped``. A damaged dictionary always raises. ``verify=False`` checks
        sizes only (to measure what hashing costs). ``written``: (name, sha256) of files this
        process has just written and fsynced, hashing the very bytes it wrote (the commit
        that publishes this version): reading them back would hash the page cache's copy of
        those bytes, so they count as verified.
        """
        if on_corrupt not in ("raise", "skip"):
            raise ValueError(f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}")
        self.store = store
        self.manifest = manifest or {}
        self.version = int(self.manifest.get("version", 0))
        self.dim = int(self.manifest.get("dim", 0))
        self.analyzer = Analyzer.from_json(self.manifest["analyzer"]) if manifest else None
        self.n_docs = int(self.manifest.get("n_docs", 0))
        self.total_length = int(self.manifest.get("total_length", 0))
        old = {e.segment.name: e for e in previous.segments} if previous else {}
        old_terms = previous.term_files if previous else []
        self.on_corrupt = on_corrupt
        self.skipped: list[str] = []  # damaged files left out (on_corrupt="skip")
        self.rebuilt: list[str] = []  # damaged derived files rebuilt from the segments
        commits = [
            (c, {k: FileRef.from_json(v) for k, v in c["files"].items()}) for c in self.manifest.get("commits", [])
        ]
        # Every file is checked against its recorded size and checksum before it is parsed; files a
        # previous snapshot of this process already verified (and reuses) are not hashed again.
        self.verified: set[tuple[str, str]] = set(previous.verified) if previous else set()
        if verify:
            self.verified.update(written)
        todo = []
        for _, files in commits:
            if "docs" in files and files["docs"].name in old:
                files = {k: f for k, f in files.items() if k in ("dict", "sup")}
            files = {k: f for k, f in files.items() if k != "ann"}  # ANN indexes verify as they load, in the background
            todo.extend(f for f in files.values() if (f.name, f.sha256) not in self.verified)
        with Checks(store, todo, hash=verify) as bad:  # each file is parsed once its own check passes
            terms, sup_tables, rebuild, placeholders = self._load(store, commits, old, bad)
            if verify:
                self.verified.update((f.name, f.sha256) for f in todo if f.name not in bad)
        # ANN indexes over ranges of documents: loaded (after their checksum) in the background.
        old_ann = {a.name: a for a in previous.ann} if previous is not None else {}
        self.ann: list[AnnIndex] = []
        for commit, files in commits:
            if "ann" in files:
                ref, info = files["ann"], commit["ann"]
                a = old_ann.get(ref.name) or AnnIndex(int(info["first"]), int(info["n"]), ref.name, dict(info.get("params", {})), ref)
                a.load_in_background(store, self.dim)
                self.ann.append(a)
        if previous is not None and old_terms == self.term_files[: len(old_terms)]:
            self.term_ids = dict(previous.term_ids)  # the dictionary only grows: extend a copy
            for i in range(len(self.term_ids), len(terms)):
                self.term_ids[terms[i]] = i
        else:
            self.term_ids = {t: i for i, t in enumerate(terms)}
        self.n_terms = len(terms)
        for entry in rebuild:
            entry.postings = self._rebuild_postings(entry.segment)

        # Supersession log, and each document's end of validity (earliest effective date).
        if sup_tables:
            sup = pa.concat_tables(sup_tables)
            self.sup_old = sup.column("old").to_numpy().astype(np.int64)
            self.sup_new = sup.column("new").to_numpy().astype(np.int64)
            self.sup_effective = _timestamps(sup.column("effective"))
            self.sup_recorded = _timestamps(sup.column("recorded_at"))
        else:
            self.sup_old = self.sup_new = self.sup_effective = self.sup_recorded = np.zeros(0, dtype=np.int64)
        self.valid_until = np.full(self.n_docs, FOREVER, dtype=np.int64)
        if len(self.sup_old):
            np.minimum.at(self.valid_until, self.sup_old, self.sup_effective)
        for entry in placeholders:  # unreadable documents are never valid, so never returned
            self.valid_until[entry.base : entry.base + entry.segment.n] = NAT

        segs = [e.segment for e in self.segments]
        self.dates = np.concatenate([s.dates for s in segs]) if segs else np.zeros(0, dtype=np.int64)
        tables = [s.table for s in segs]
        self.authors = Facet.build([t.column("author") for t in tables])
        self.threads = Facet.build([t.column("thread") for t in tables])
        self.channels = Facet.build([t.column("channel") for t in tables])
        self._starts = np.array([s.first_doc for s in segs], dtype=np.int64)
        self._starts_list = self._starts.tolist()  # for bisect: a scalar lookup 10x cheaper than numpy's
        if len(self.dates) != self.n_docs:
            raise ValueError(f"manifest says {self.n_docs} documents, segments hold {len(self.dates)}")

    def _load(self, store: Path, commits: list, old: dict, bad: Checks) -> tuple:
        """Map the segments, postings, dictionaries and supersession logs (``bad``: their checks).

        Returns (terms, supersession tables, entries whose postings must be rebuilt, placeholders).
        """
        self.segments: list[SegmentEntry] = []
        self.term_files: list[str] = []
        terms: list[str] = []
        sup_tables: list[pa.Table] = []
        rebuild: list[SegmentEntry] = []
        placeholders: list[SegmentEntry] = []
        for commit, files in commits:
            if "docs" in files:
                name = files["docs"].name
                entry = old.get(name)
                if entry is None:
                    if name in bad:
                        self._damaged(bad[name])
                        seg = Segment.placeholder(name, int(commit["first_doc"]), int(commit["n_docs"]), self.dim)
                        entry = SegmentEntry(seg, Postings.empty())
                        placeholders.append(entry)
                    else:
                        seg = Segment.open(store / name, name)
                        if files["post"].name in bad or files["index"].name in bad:
                            entry = SegmentEntry(seg, Postings.empty())
                            rebuild.append(entry)
                            self.rebuilt.extend(files[k].name for k in ("post", "index") if files[k].name in bad)
                        else:
                            entry = SegmentEntry(seg, Postings.open(store / files["post"].name, store / files["index"].name))
                    if "win" in files and files["win"].name in bad:
                        self._damaged(bad[files["win"].name])
                    elif "win" in files and not any(p is entry for p in placeholders):
                        win = map_table(store / files["win"].name)
                        entry.window_rows = win.column("row").to_numpy()
                        entry.window_embeddings = mapped_matrix(win.column("embedding"))
                    if "q8" in files and (files["q8"].name in bad or any(p is entry for p in placeholders)):
                        # derived from the embeddings: rebuild it rather than fail
                        if files["q8"].name in bad:
                            self.rebuilt.append(files["q8"].name)
                        order = date_order(entry.segment.dates)
                        emb = np.ascontiguousarray(entry.segment.embeddings[order], dtype=np.float32)
                        entry.q8 = np.empty(emb.shape, dtype=np.int8)
                        entry.q8_scale = np.empty(len(emb), dtype=np.float32)
                        quantize_rows(emb, entry.q8, entry.q8_scale)
                        entry.q8_order, entry.q8_dates = order, entry.segment.dates[order]
                        entry.q8_state = "built"
                    elif "q8" in files:
                        q8 = map_table(store / files["q8"].name)
                        entry.q8 = mapped_matrix(q8.column("q"))
                        entry.q8_state = "mapped"
                        entry.q8_scale = one_array(q8.column("scale")).to_numpy(zero_copy_only=True)
                        if "row" in q8.column_names:  # stored in date order (older stores: row order)
                            entry.q8_order = one_array(q8.column("row")).to_numpy(zero_copy_only=True)
                            entry.q8_dates = one_array(q8.column("date")).to_numpy(zero_copy_only=True)
                self.segments.append(entry)
            if "dict" in files:
                if files["dict"].name in bad:
                    raise bad[files["dict"].name]  # term ids of every later segment depend on it
                self.term_files.append(files["dict"].name)
                terms.extend(map_table(store / files["dict"].name).column("term").to_pylist())
            if "sup" in files:
                if files["sup"].name in bad:
                    self._damaged(bad[files["sup"].name])
                else:
                    sup_tables.append(map_table(store / files["sup"].name))
        return terms, sup_tables, rebuild, placeholders

    def _damaged(self, exc: CorruptStoreError) -> None:
        if self.on_corrupt != "skip":
            raise exc
        self.skipped.append(exc.path)

    def _rebuild_postings(self, seg: Segment) -> Postings:
        """The postings of ``seg`` from its text, with this version's analyzer and term dictionary
        (the same analysis and inversion that wrote them)."""
        try:
            flat, lengths = self.analyzer.term_ids(seg.table.column("text").to_pylist(), self.term_ids.__getitem__)
        except KeyError:
            raise CorruptStoreError(seg.name, "postings damaged and the text has terms missing from the dictionary") from None
        return Postings.build_flat(flat, lengths)

    @property
    def thread_links(self) -> tuple[np.ndarray, np.ndarray]:
        """(prev, next): each document's neighbour in its thread in ingest order, −1 for none (cached)."""
        links = getattr(self, "_thread_links", None)
        if links is None:
            codes = self.threads.codes
            n = len(codes)
            prev = np.full(n, -1, dtype=np.int64)
            nxt = np.full(n, -1, dtype=np.int64)
            if n:
                order = np.lexsort((np.arange(n), codes))
                c = codes[order]
                same = (c[1:] == c[:-1]) & (c[1:] >= 0)
                prev[order[1:][same]] = order[:-1][same]
                nxt[order[:-1][same]] = order[1:][same]
            links = self._thread_links = (prev, nxt)
        return links

    @property
    def has_threads(self) -> bool:
        """Whether any document has a thread neighbour (thread context can change a ranking)."""
        out = getattr(self, "_has_threads", None)
        if out is None:
            out = self._has_threads = bool((self.thread_links[0] >= 0).any())
        return out

    @property
    def has_windows(self) -> bool:
        """Whether any segment carries window vectors for long documents."""
        return any(e.window_rows is not None for e in self.segments)

    @property
    def lengths(self) -> np.ndarray:
        """float32 BM25 length (number of index terms) of every document (cached)."""
        out = getattr(self, "_lengths", None)
        if out is None:
            segs = [e.segment.lengths for e in self.segments]
            out = self._lengths = np.concatenate(segs) if segs else np.zeros(0, dtype=np.float32)
        return out

    # --- lookups -------------------------------------------------------------------------------
    def locate(self, doc_id: int) -> tuple[SegmentEntry, int]:
        """(segment, row) of a document id."""
        i = bisect_right(self._starts_list, doc_id) - 1
        entry = self.segments[i]
        return entry, doc_id - entry.base

    def row(self, doc_id: int) -> dict:
        return self.rows([doc_id])[0]

    def rows(self, doc_ids: list[int]) -> list[dict]:
        """:meth:`row` of many documents, read straight from the segments' buffers (``RowReader``)."""
        return self._take(doc_ids, None, embedding=True)

    def keys_of(self, doc_ids: np.ndarray) -> pa.Array:
        """The ``key`` of each document (null where it has none), in the order given, as one
        Arrow string array taken column by column from the segments."""
        docs = np.asarray(doc_ids, dtype=np.int64)
        if len(docs) == 0:
            return pa.array([], type=pa.string())
        seg = np.searchsorted(self._starts, docs, side="right") - 1
        order = np.argsort(seg, kind="stable")
        parts = []
        for i in np.unique(seg):
            rows = docs[order[seg[order] == i]] - self.segments[i].base
            parts.append(self.segments[i].reader("key").arr.take(pa.array(rows)).cast(pa.string()))
        inverse = np.empty(len(order), dtype=np.int64)
        inverse[order] = np.arange(len(order))
        return pa.concat_arrays(parts).take(pa.array(inverse))

    def _take(self, doc_ids, names: list[str] | None, embedding: bool = False) -> list[dict]:
        """Columns ``names`` (None: all but the embedding) of each document, in the order given;
        with ``embedding``, its row of the embedding matrix too."""
        out: list = []
        for doc in doc_ids:
            entry, r = self.locate(int(doc))
            if names is None:
                row = {name: get(r) for name, get in entry.row_getters()}
            else:
                row = {name: entry.reader(name).get(r) for name in names}
            if embedding:
                row["embedding"] = entry.segment.embeddings[r]
            out.append(row)
        return out

    def column(self, name: str) -> list:
        """A whole column as Python values, in doc-id order (for index building)."""
        out: list = []
        for e in self.segments:
            out.extend(e.segment.table.column(name).to_pylist())
        return out

    @property
    def avg_length(self) -> float:
        return self.total_length / self.n_docs if self.n_docs else 0.0
