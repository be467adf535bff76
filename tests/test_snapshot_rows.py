"""Reading single rows of a segment straight from the Arrow buffers equals Arrow's own conversion."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import mempp
from mempp.storage.snapshot import RowReader

TYPES = {
    "string": (pa.string(), st.text(max_size=20)),
    "large_string": (pa.large_string(), st.text(max_size=20)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "timestamp_utc": (pa.timestamp("us", tz="UTC"), st.integers(-(2**50), 2**50)),
    "timestamp_naive": (pa.timestamp("us"), st.integers(-(2**50), 2**50)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),  # through Arrow's scalar
}


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from(sorted(TYPES)), st.booleans())
def test_row_reader_equals_to_pylist(data, kind, chunked):
    typ, values = TYPES[kind]
    items = data.draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=40))
    arr = pa.array(items, type=pa.int64() if kind.startswith("timestamp") else typ)
    if kind.startswith("timestamp"):
        arr = arr.cast(typ)
    cut = data.draw(st.integers(0, len(items) - 1))
    arr = arr.slice(cut)  # a non-zero offset into the buffers
    column = pa.chunked_array([arr[: len(arr) // 2], arr[len(arr) // 2 :]], type=typ) if chunked else pa.chunked_array([arr])
    reader = RowReader(column)
    want = column.to_pylist()
    got = [reader.get(i) for i in range(len(want))]
    assert got == want
    for g, w in zip(got, want):
        if isinstance(w, dt.datetime):
            assert (g.tzinfo is None) == (w.tzinfo is None)


def test_store_rows_equal_the_segment_table(tmp_path):
    store = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=8))
    docs = [
        {"text": "héllo wörld ✓", "date": "2024-02-29", "author": "Ann", "key": "a", "meta": {"x": 1}},
        {"text": "second", "date": None, "thread": "t1"},
        {"text": "third " * 50, "date": "1999-12-31T23:59:59.999999Z", "channel": "c", "source": "s"},
    ]
    store.add(docs[:2])
    store.add(docs[2:])
    snap = store.searcher().snapshot
    ids = [2, 0, 1, 2]
    got = snap.rows(ids)
    for doc, row in zip(ids, got):
        entry, r = snap.locate(doc)
        want = entry.segment.table.slice(r, 1).to_pylist()[0]
        assert np.array_equal(row.pop("embedding"), np.asarray(want.pop("embedding"), dtype=np.float32))
        assert row == want
    assert snap.keys_of(np.array([0, 1, 2])).to_pylist() == ["a", None, None]
    assert snap.keys_of(np.array(ids)).to_pylist() == [row["key"] for row in snap.rows(ids)]  # across segments, any order
