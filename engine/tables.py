"""Documents as Arrow tables: what ``mempp embed`` writes and ``Store.add`` reads back.

A *document table* has one row per document and a column per field of docs/DESIGN.md §1 that its
documents use (``id`` or ``key``, ``text``, ``author``, ``date``, ``thread``, ``channel``,
``source``, ``supersedes``); any other column is a caller field (kept in ``meta``), except:

- ``extra``: a JSON object per row (or null) holding fields that are not columns; JSON Lines
  read by :func:`records_table` keep every field outside docs/DESIGN.md §1 there, verbatim, so a record
  goes through a table unchanged whatever its fields' types;
- the embedding column (``embedding``: a fixed-size list of float32, one vector per document)
  and its window vectors (``embedding_windows``: a list of such vectors per document, for a
  store whose ``IndexConfig`` has a ``window_stride``).

A null cell means the field is absent. Owns the conversions between tables and records.

Never imports: store, writer, searcher, ingest, distributed, ray.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

import numpy as np

from .errors import ValidationError

STRING_COLUMNS = ("id", "key", "text", "author", "date", "thread", "channel", "source")
EXTRA = "extra"
EMBEDDING = "embedding"
WINDOWS_SUFFIX = "_windows"
LINE = "_line"  # the source line of each record read from JSON Lines (for error messages; never stored)


def is_table(obj: Any) -> bool:
    """Whether ``obj`` is an Arrow table or record batch (without importing pyarrow for the answer)."""
    return type(obj).__module__.startswith("pyarrow") and hasattr(obj, "column_names") and hasattr(obj, "to_pylist")


def records_table(records: Iterable[tuple[int, dict]]):
    """A document table of JSON Lines records ``(line number, object)``: the docs/DESIGN.md §1 fields as
    string columns (``supersedes``: a list of keys), every other field in ``extra`` as JSON, and
    the line numbers in ``_line``. A field of the wrong type raises :class:`ValidationError` naming the line."""
    import pyarrow as pa

    cols: dict[str, list] = {name: [] for name in (*STRING_COLUMNS, "supersedes", EXTRA, LINE)}
    for line, obj in records:
        if not isinstance(obj, dict):
            raise ValidationError(f"line {line}: expected a JSON object", field="record")
        for name in STRING_COLUMNS:
            v = obj.get(name)
            if v is not None and not isinstance(v, str):
                raise ValidationError(f"line {line}: expected a string, got {type(v).__name__}", field=name)
            if name in ("id", "key") and v is not None and not v.strip():
                raise ValidationError(f"line {line}: an empty id ({v!r}); leave the field out, or null, for a document without one", field=name)
            cols[name].append(v)
        sup = obj.get("supersedes")
        if isinstance(sup, str):
            sup = [sup]
        if sup is not None and not (isinstance(sup, list) and all(isinstance(s, str) and s.strip() for s in sup)):
            raise ValidationError(f"line {line}: expected an id (a non-empty string) or a list of ids", field="supersedes")
        cols["supersedes"].append(sup)
        rest = {k: v for k, v in obj.items() if k not in STRING_COLUMNS and k != "supersedes"}
        try:
            cols[EXTRA].append(json.dumps(rest, ensure_ascii=False, sort_keys=True) if rest else None)
        except RecursionError:
            raise ValidationError(f"line {line}: nested too deeply", field=EXTRA) from None
        cols[LINE].append(line)
    schema = pa.schema(
        [pa.field(n, pa.string()) for n in STRING_COLUMNS]
        + [pa.field("supersedes", pa.list_(pa.string())), pa.field(EXTRA, pa.string()), pa.field(LINE, pa.int64())]
    )
    table = pa.table(cols, schema=schema)
    empty = [n for n in (*STRING_COLUMNS, "supersedes", EXTRA) if table.column(n).null_count == len(table) and n != "text"]
    return table.drop_columns(empty) if len(table) else table


def table_records(table, skip: Iterable[str] = ()) -> Iterator[dict]:
    """The records of a document table, as ``Store.add`` takes them (null cells left out,
    ``extra`` decoded and merged; the columns in ``skip`` and ``_line`` left out)."""
    skip = set(skip) | {LINE}
    names = [n for n in table.column_names if n not in skip]
    for i, row in enumerate(table.select(names).to_pylist()):
        extra = row.pop(EXTRA, None)
        rec = {k: v for k, v in row.items() if v is not None}
        if extra is not None:
            try:
                decoded = json.loads(extra) if isinstance(extra, str) else extra
            except ValueError as exc:
                raise ValidationError(f"not a JSON object ({exc})", field=EXTRA, record=i) from None
            except RecursionError:
                raise ValidationError("JSON nested too deeply to read", field=EXTRA, record=i) from None
            if not isinstance(decoded, dict):
                raise ValidationError("not a JSON object", field=EXTRA, record=i)
            rec = {**decoded, **rec}
        yield rec


def vectors_of(column, dim: int | None, field: str) -> np.ndarray:
    """A (rows, dim) float32 matrix from a fixed-size-list (or list) column of vectors."""
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if col.null_count:
        raise ValidationError("a row has no vector", field=field)
    if pa.types.is_fixed_size_list(col.type):
        width = col.type.list_size
    elif pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        lengths = np.asarray(col.value_lengths())
        width = int(lengths[0]) if len(lengths) else (dim or 0)
        if len(lengths) and (lengths != width).any():
            raise ValidationError("vectors of different lengths", field=field)
    else:
        raise ValidationError(f"expected a column of vectors, got {col.type}", field=field)
    values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return values.reshape(len(col), width) if len(col) else np.zeros((0, dim or width), dtype=np.float32)


def windows_of(column, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(owner row, vectors)`` of a column holding a list of window vectors per row."""
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    counts = np.asarray(col.value_lengths().fill_null(0), dtype=np.int64)
    owner = np.repeat(np.arange(len(col), dtype=np.int64), counts)
    flat = col.flatten()
    vecs = vectors_of(flat, dim, EMBEDDING + WINDOWS_SUFFIX) if len(flat) else np.zeros((0, dim), dtype=np.float32)
    return owner, vecs


def split_table(table, embeddings: Any, dim: int):
    """``(records, embeddings, windows)`` of a document table for ``Store.add``: ``embeddings`` names
    the table's column of vectors (its ``<name>_windows`` column, when present, holds the window
    vectors) or is an array; None embeds the documents."""
    windows = None
    skip: set[str] = set()
    if isinstance(embeddings, str):
        name = embeddings
        if name not in table.column_names:
            raise ValidationError(f"the table has no column {name!r} (columns: {table.column_names})", field="embeddings")
        skip.add(name)
        embeddings = vectors_of(table.column(name), dim, name)
        if name + WINDOWS_SUFFIX in table.column_names:
            skip.add(name + WINDOWS_SUFFIX)
            windows = windows_of(table.column(name + WINDOWS_SUFFIX), dim)
    else:
        skip.update(n for n in (EMBEDDING, EMBEDDING + WINDOWS_SUFFIX) if n in table.column_names)
    return list(table_records(table, skip)), embeddings, windows
