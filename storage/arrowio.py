"""Small helpers to write a table to Arrow IPC bytes and to memory-map one back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa


def encode_table(table: pa.Table) -> memoryview:
    return ipc_file(table.schema, lambda writer: writer.write_table(table))


def ipc_file(schema: pa.Schema, write) -> memoryview:
    """Arrow IPC file bytes of what ``write(writer)`` writes, in one buffer of the exact size.

    A counting pass (no copy) sizes the buffer, so the data is copied once, not grown in
    steps and then copied out to ``bytes`` (for a segment, hundreds of MB twice over).
    """
    counter = pa.MockOutputStream()
    with pa.ipc.new_file(counter, schema) as writer:
        write(writer)
    buf = pa.allocate_buffer(counter.size())
    with pa.ipc.new_file(pa.FixedSizeBufferWriter(buf), schema) as writer:
        write(writer)
    return memoryview(buf)


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
    values = arr.values.to_numpy(zero_copy_only=True)
    return values[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)
