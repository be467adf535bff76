"""Small helpers to memory-map an Arrow IPC file back (``manifest.write_table_file`` writes them).

Owns mapping an Arrow IPC file back without a copy (:func:`map_table`, :func:`one_array`,
:func:`mapped_matrix`). A leaf of the layer: no checksums, no file names.

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
    values = arr.values.to_numpy(zero_copy_only=True)
    return values[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)
