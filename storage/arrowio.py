"""Small helpers to memory-map an Arrow IPC file back (``manifest.write_table_file`` writes them).

Owns mapping an Arrow IPC file back without a copy (:func:`map_table`, :func:`one_array`,
:func:`mapped_matrix`, :func:`numeric`). A leaf of the layer: no checksums, no file names.

Columns become numpy arrays here from their Arrow buffers (:func:`numeric`), not through
``to_numpy``: pyarrow's conversions load pandas when it is installed (its pandas shim), a third
of a second of a fresh process's open.

Never imports: files, manifest, snapshot, mempp.store.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa


def map_table(path: Path) -> pa.Table:
    """Memory-map an Arrow IPC file; one contiguous chunk per column where the file allows."""
    table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    if table.num_columns and table.column(0).num_chunks > 1:
        table = table.combine_chunks()
    return table


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its only chunk as is (still in the mapped file), else concatenated.

    ``ChunkedArray.combine_chunks`` copies even a single chunk, which for a mapped matrix
    (the int8 copy of the embeddings: 384 MB at 1M documents) costs the open a copy and the
    process that much anonymous memory.
    """
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def mapped_matrix(column: pa.ChunkedArray) -> np.ndarray:
    """A fixed-size-list column as an (n, width) numpy view of its values (zero copy for one chunk)."""
    arr = one_array(column)
    width = arr.type.list_size
    values = numeric(arr.values)
    return values[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)


def numeric(column: pa.Array | pa.ChunkedArray, null: int | float | None = None) -> np.ndarray:
    """A fixed-width numeric column (integers, floats; timestamps as int64) as a numpy array read
    from its data buffer: a view for one chunk without nulls, else a copy. ``null``: the value
    that stands for a null (a column with nulls and no ``null`` is an error)."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return numeric(column.chunk(0), null)
        parts = [numeric(c, null) for c in column.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=_dtype(column.type))
    dtype = _dtype(column.type)
    n, offset = len(column), column.offset
    if n == 0:
        return np.zeros(0, dtype=dtype)
    validity, data = column.buffers()[:2]
    values = np.frombuffer(data, dtype=dtype, count=offset + n)[offset:]
    if not column.null_count:
        return values
    if null is None:
        raise ValueError(f"numeric(): {column.null_count} nulls and no value given for them")
    valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[offset : offset + n].astype(bool)
    return np.where(valid, values, np.asarray(null, dtype=dtype))


def _dtype(t: pa.DataType) -> np.dtype:
    if pa.types.is_timestamp(t) or pa.types.is_date64(t):
        return np.dtype(np.int64)
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise TypeError(f"numeric(): not a fixed-width number column: {t}")
    return np.dtype(t.to_pandas_dtype())
