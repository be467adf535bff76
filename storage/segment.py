"""Immutable Arrow IPC segments: the documents of one commit, whole, with their embeddings.

A segment file holds one record batch (so every column maps to one
contiguous buffer) and is memory-mapped on open: text, metadata and the
embedding matrix are read straight from the page cache, never copied.

Owns the segment schema (:func:`segment_schema`), one commit's record batch
(:func:`segment_batch`), :class:`Segment` (a segment mapped back) and the date order of its rows.

Never imports: snapshot, writer, manifest, mempp.store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from .arrowio import mapped_matrix, numeric

TS = pa.timestamp("us", tz="UTC")
NAT = np.iinfo(np.int64).min  # "undated" in int64 microsecond arrays


def segment_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("doc_id", pa.uint64(), nullable=False),
            pa.field("key", pa.string()),
            pa.field("text", pa.large_string(), nullable=False),
            pa.field("author", pa.string()),
            pa.field("date", TS),
            pa.field("ingested_at", TS, nullable=False),
            pa.field("thread", pa.string()),
            pa.field("channel", pa.string()),
            pa.field("source", pa.string()),
            pa.field("meta", pa.string()),
            # blake2b-64 of (author, whitespace-normalized text): finds exact re-ingests without re-reading text
            pa.field("fingerprint", pa.uint64(), nullable=False),
            pa.field("length", pa.int32(), nullable=False),  # number of index terms (BM25 length)
            pa.field("embedding", pa.list_(pa.float32(), dim), nullable=False),
        ]
    )


def segment_batch(columns: dict, embeddings: np.ndarray) -> pa.RecordBatch:
    """One commit's rows as the record batch its segment file holds (the embeddings not copied when float32 and contiguous)."""
    dim = embeddings.shape[1]
    schema = segment_schema(dim)
    arrays = []
    for field in schema:
        if field.name == "embedding":
            flat = pa.array(np.ascontiguousarray(embeddings, dtype=np.float32).reshape(-1), pa.float32())
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, dim))
        else:
            arrays.append(pa.array(columns[field.name], type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


@dataclass
class Segment:
    """A read-only, memory-mapped segment."""

    name: str
    table: pa.Table
    first_doc: int
    dates: np.ndarray  # int64 µs UTC, NAT when undated
    lengths: np.ndarray  # float32
    embeddings: np.ndarray  # (n, dim) float32 view into the mapped file

    @property
    def n(self) -> int:
        return self.table.num_rows

    @classmethod
    def open(cls, path: Path, name: str) -> "Segment":
        source = pa.memory_map(str(path), "r")
        table = pa.ipc.open_file(source).read_all()
        if table.column("doc_id").num_chunks > 1:
            table = table.combine_chunks()
        n = table.num_rows
        dates = timestamp_column(table.column("date"))
        lengths = numeric(table.column("length")).astype(np.float32)
        emb_col = table.column("embedding")
        emb = mapped_matrix(emb_col) if n else np.zeros((0, emb_col.type.list_size), dtype=np.float32)
        first = int(table.column("doc_id")[0].as_py()) if n else 0
        return cls(name=name, table=table, first_doc=first, dates=dates, lengths=lengths, embeddings=emb)

    def head(self, n: int) -> "Segment":
        """The first ``n`` rows (an earlier version's view of a segment a later commit was merged into)."""
        return Segment(self.name, self.table.slice(0, n), self.first_doc, self.dates[:n], self.lengths[:n], self.embeddings[:n])

    @classmethod
    def placeholder(cls, name: str, first_doc: int, n: int, dim: int) -> "Segment":
        """``n`` empty, undated rows standing in for a damaged segment skipped on open."""
        return _placeholder(name, first_doc, n, dim)


def _placeholder(name: str, first: int, n: int, dim: int) -> "Segment":
    schema = segment_schema(dim)
    cols = {f.name: pa.nulls(n, f.type) for f in schema if f.name != "embedding"}
    cols["doc_id"] = pa.array(range(first, first + n), pa.uint64())
    cols["text"] = pa.array([""] * n, pa.large_string())
    cols["ingested_at"] = pa.array([0] * n, pa.int64()).cast(TS)
    cols["fingerprint"] = pa.array([0] * n, pa.uint64())
    cols["length"] = pa.array([0] * n, pa.int32())
    emb = np.zeros((n, dim), dtype=np.float32)
    cols["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1), pa.float32()), dim)
    table = pa.table([cols[f.name] for f in schema], schema=schema)
    return Segment(name, table, first, np.full(n, NAT, dtype=np.int64), np.zeros(n, dtype=np.float32), emb)


def date_order(dates: np.ndarray) -> np.ndarray:
    """The rows of a segment by event date (µs, undated first), ties in row order: int32."""
    return np.argsort(dates, kind="stable").astype(np.int32)


def timestamp_column(col: pa.ChunkedArray) -> np.ndarray:
    """A timestamp column as int64 µs with NAT for nulls."""
    return numeric(col, null=NAT).astype(np.int64, copy=False)
