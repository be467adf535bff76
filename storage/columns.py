"""Columns of a snapshot read without Arrow's per-value overhead, and the string facets (author,
thread, channel) dictionary-encoded over a whole snapshot.

Owns: RowReader, Facet, and code_links (each row's neighbours among the rows of its facet value: the
thread links). Must never import the engine.

Never imports: snapshot, mempp.store, mempp.planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from .arrowio import numeric, one_array


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
            # memoryviews: indexing one gives a Python int, several times quicker than a numpy scalar
            self.offsets = memoryview(np.ascontiguousarray(np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]))
            self.data = memoryview(data) if data is not None else memoryview(b"")
        elif pa.types.is_integer(t) or (pa.types.is_timestamp(t) and t.unit == "us"):
            validity, values = arr.buffers()
            self.values = memoryview(np.ascontiguousarray(
                np.frombuffer(values, dtype=t.to_pandas_dtype() if pa.types.is_integer(t) else np.int64)[arr.offset : arr.offset + len(arr)]))
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
            self.valid = bits[arr.offset : arr.offset + len(arr)].tobytes()  # bytes: a Python int per row, quickly

    def get(self, row: int):
        kind = self.kind
        if kind == "scalar":
            return self.arr[row].as_py()
        if self.valid is not None and not self.valid[row]:
            return None
        if kind == "string":
            off = self.offsets
            return str(self.data[off[row] : off[row + 1]], "utf-8")
        if kind == "int":
            return self.values[row]
        return self.epoch + self.delta(microseconds=self.values[row])


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
        return cls.extend(None, chunks)

    @classmethod
    def extend(cls, previous: "Facet | None", chunks: list[pa.ChunkedArray]) -> "Facet":
        """``previous``'s documents followed by those of ``chunks`` (a later commit's rows).

        The names and their index are shared with ``previous`` while no new value appears
        (they are never changed once built), and copied when one does."""
        names: list[str] = previous.names if previous is not None else []
        index: dict[str, int] = previous.index if previous is not None else {}
        copied = previous is None
        parts = [previous.codes] if previous is not None else []
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
                    if not copied:
                        names, index, copied = list(names), dict(index), True
                    code = index[name] = len(names)
                    names.append(name)
                remap[i] = code
            idx = numeric(enc.indices, null=-1).astype(np.int64)
            parts.append(remap[idx])
        codes = np.concatenate(parts).astype(np.int32, copy=False) if parts else np.zeros(0, dtype=np.int32)
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


def code_links(codes: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(prev, next, last)``: each row's neighbour among the rows of its code, in row order (−1:
    none; a code below 0 has no neighbours), and each code's last row (−1: none)."""
    n = len(codes)
    prev = np.full(n, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    last = np.full(n_values, -1, dtype=np.int64)
    if n:
        order = np.lexsort((np.arange(n), codes))
        c = codes[order]
        same = (c[1:] == c[:-1]) & (c[1:] >= 0)
        prev[order[1:][same]] = order[:-1][same]
        nxt[order[:-1][same]] = order[1:][same]
        ends = np.flatnonzero(np.append(c[1:] != c[:-1], True))  # the last of each code's run
        real = c[ends] >= 0
        last[c[ends][real]] = order[ends][real]
    return prev, nxt, last
