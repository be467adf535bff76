"""Small helpers to write a table to Arrow IPC bytes and to memory-map one back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


def encode_table(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def map_table(path: Path) -> pa.Table:
    """Memory-map an Arrow IPC file; one contiguous chunk per column where the file allows."""
    table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    if table.num_columns and table.column(0).num_chunks > 1:
        table = table.combine_chunks()
    return table
