"""Reading a segment's timestamp column: int64 microseconds, NAT for undated, from any chunking
and any slice offset (the numpy reader of the Arrow buffers against pyarrow's own conversion)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mempp.storage.segment import NAT, timestamp_column

MICROS = st.one_of(st.none(), st.integers(-(2**62), 2**62))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(MICROS, max_size=80), cuts=st.lists(st.integers(0, 80), max_size=4))
def test_timestamps_equal_pyarrow_with_nulls_as_nat(values, cuts):
    a = pa.array(values, pa.timestamp("us", tz="UTC"))
    edges = sorted({0, len(values), *(min(c, len(values)) for c in cuts)})
    col = pa.chunked_array([a.slice(lo, hi - lo) for lo, hi in zip(edges, edges[1:])] or [a], type=a.type)
    want = np.array([NAT if v is None else v for v in values], dtype=np.int64)
    got = timestamp_column(col)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.array_equal(got, col.cast(pa.int64()).fill_null(NAT).to_numpy())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**24), 2**24)), max_size=60),  # exact in float32 too
    cuts=st.lists(st.integers(0, 60), max_size=3),
    kind=st.sampled_from([pa.int32(), pa.int64(), pa.float32(), pa.float64()]),
)
def test_numeric_reads_every_chunk_and_offset(values, cuts, kind):
    from mempp.storage.arrowio import numeric

    a = pa.array(values, pa.int64()).cast(kind)
    edges = sorted({0, len(values), *(min(c, len(values)) for c in cuts)})
    col = pa.chunked_array([a.slice(lo, hi - lo) for lo, hi in zip(edges, edges[1:])] or [a], type=kind)
    want = np.array([-1 if v is None else v for v in values], dtype=kind.to_pandas_dtype())
    assert np.array_equal(numeric(col, null=-1), want)
    if any(v is None for v in values):
        with pytest.raises(ValueError):
            numeric(col)
    else:
        assert np.array_equal(numeric(col), want)
