"""A snapshot: one committed version of a store, opened read-only and pinned.

It maps every segment of the version and derives the per-document arrays the
planner needs (dates, the end of each document's validity, author/thread/
channel codes and their bitmaps). A later commit never changes a snapshot;
``Snapshot.load(..., previous=old)`` reuses the segments both share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from .analyzer import Analyzer
from .arrowio import map_table
from .manifest import FileRef, check_file
from .postings import Postings
from .segment import NAT, Segment, _timestamps

FOREVER = np.iinfo(np.int64).max


@dataclass
class SegmentEntry:
    segment: Segment
    postings: Postings
    window_rows: np.ndarray | None = None  # int32 segment row of each extra window vector
    window_embeddings: np.ndarray | None = None  # (m, dim) float32, mapped
    q8: np.ndarray | None = None  # (n, dim) int8 copy of the embeddings, mapped (IndexConfig.vector_copy)
    q8_scale: np.ndarray | None = None  # float32 per row: embedding ≈ q8_scale * q8
    _norms: tuple[float, np.ndarray] | None = None  # (avgdl, bm25_norms of the lengths), per snapshot statistics

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


@dataclass
class Facet:
    """A string column dictionary-encoded over the whole snapshot (author, thread, channel)."""

    names: list[str]
    codes: np.ndarray  # int32 per doc, -1 for null
    index: dict[str, int]
    _bitmaps: dict[int, BitMap] = field(default_factory=dict)

    @classmethod
    def build(cls, chunks: list[pa.ChunkedArray]) -> "Facet":
        names: list[str] = []
        index: dict[str, int] = {}
        parts = []
        for col in chunks:
            enc = col.combine_chunks().dictionary_encode() if len(col) else None
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

    def bitmap(self, name: str) -> BitMap:
        """Documents whose value is exactly ``name`` (cached)."""
        code = self.index.get(name)
        if code is None:
            return BitMap()
        bm = self._bitmaps.get(code)
        if bm is None:
            bm = BitMap(np.flatnonzero(self.codes == code).astype(np.uint32))
            self._bitmaps[code] = bm
        return bm


class Snapshot:
    """One committed version, read-only."""

    def __init__(self, store: Path, manifest: dict | None, previous: "Snapshot | None" = None) -> None:
        self.store = store
        self.manifest = manifest or {}
        self.version = int(self.manifest.get("version", 0))
        self.dim = int(self.manifest.get("dim", 0))
        self.analyzer = Analyzer.from_json(self.manifest["analyzer"]) if manifest else None
        self.n_docs = int(self.manifest.get("n_docs", 0))
        self.total_length = int(self.manifest.get("total_length", 0))
        old = {e.segment.name: e for e in previous.segments} if previous else {}
        old_terms = previous.term_files if previous else []

        self.segments: list[SegmentEntry] = []
        self.term_files: list[str] = []
        terms: list[str] = []
        sup_tables: list[pa.Table] = []
        for commit in self.manifest.get("commits", []):
            files = {k: FileRef.from_json(v) for k, v in commit["files"].items()}
            if "docs" in files:
                name = files["docs"].name
                entry = old.get(name)
                if entry is None:
                    seg = Segment.open(check_file(store, files["docs"], verify=False), name)
                    post = Postings.open(
                        check_file(store, files["post"], verify=False),
                        check_file(store, files["index"], verify=False),
                    )
                    entry = SegmentEntry(seg, post)
                    if "win" in files:
                        win = map_table(check_file(store, files["win"], verify=False))
                        entry.window_rows = win.column("row").to_numpy()
                        chunk = win.column("embedding").combine_chunks()
                        entry.window_embeddings = chunk.values.to_numpy(zero_copy_only=True).reshape(len(win), -1)
                    if "q8" in files:
                        q8 = map_table(check_file(store, files["q8"], verify=False))
                        chunk = q8.column("q").combine_chunks()
                        entry.q8 = chunk.values.to_numpy(zero_copy_only=True).reshape(len(q8), -1)
                        entry.q8_scale = q8.column("scale").combine_chunks().to_numpy(zero_copy_only=True)
                self.segments.append(entry)
            if "dict" in files:
                self.term_files.append(files["dict"].name)
                terms.extend(map_table(check_file(store, files["dict"], verify=False)).column("term").to_pylist())
            if "sup" in files:
                sup_tables.append(map_table(check_file(store, files["sup"], verify=False)))
        if previous is not None and old_terms == self.term_files[: len(old_terms)]:
            self.term_ids = dict(previous.term_ids)  # the dictionary only grows: extend a copy
            for i in range(len(self.term_ids), len(terms)):
                self.term_ids[terms[i]] = i
        else:
            self.term_ids = {t: i for i, t in enumerate(terms)}
        self.n_terms = len(terms)

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

        segs = [e.segment for e in self.segments]
        self.dates = np.concatenate([s.dates for s in segs]) if segs else np.zeros(0, dtype=np.int64)
        tables = [s.table for s in segs]
        self.authors = Facet.build([t.column("author") for t in tables])
        self.threads = Facet.build([t.column("thread") for t in tables])
        self.channels = Facet.build([t.column("channel") for t in tables])
        self._starts = np.array([s.first_doc for s in segs], dtype=np.int64)
        if len(self.dates) != self.n_docs:
            raise ValueError(f"manifest says {self.n_docs} documents, segments hold {len(self.dates)}")

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
        i = int(np.searchsorted(self._starts, doc_id, side="right")) - 1
        entry = self.segments[i]
        return entry, doc_id - entry.base

    def row(self, doc_id: int) -> dict:
        entry, row = self.locate(doc_id)
        t = entry.segment.table
        out = {name: t.column(name)[row].as_py() for name in t.column_names if name != "embedding"}
        out["embedding"] = entry.segment.embeddings[row]
        return out

    def keys_of(self, doc_ids: np.ndarray) -> list:
        """The ``key`` of each document (None where it has none), in the order given."""
        out: list = [None] * len(doc_ids)
        if not len(doc_ids):
            return out
        seg = np.searchsorted(self._starts, doc_ids, side="right") - 1
        for i in np.unique(seg).tolist():
            where = np.flatnonzero(seg == i)
            entry = self.segments[i]
            vals = entry.segment.table.column("key").take(pa.array(doc_ids[where] - entry.base)).to_pylist()
            for w, v in zip(where.tolist(), vals):
                out[w] = v
        return out

    def column(self, name: str) -> list:
        """A whole column as Python values, in doc-id order (for index building)."""
        out: list = []
        for e in self.segments:
            out.extend(e.segment.table.column(name).to_pylist())
        return out

    def global_df(self, term_ids: np.ndarray) -> np.ndarray:
        df = np.zeros(len(term_ids), dtype=np.int64)
        for e in self.segments:
            df += e.postings.lookup(term_ids)[2]
        return df

    @property
    def avg_length(self) -> float:
        return self.total_length / self.n_docs if self.n_docs else 0.0
