"""Reading documents (JSON Lines, Parquet, Arrow IPC) and questions, with errors that name the file and line or row.

Owns the input file formats (:func:`input_format`, :func:`read_jsonl`, :func:`read_records`):
JSON Lines, Parquet and Arrow IPC read in batches, each record labelled with where it came from.
It only reads: checking the records is ``ingest``'s.

Never imports: ingest, store, writer, mempp.storage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .errors import ValidationError

# The levels of lists and objects a document's extra field may nest (a record's own object aside);
# deeper input is refused by the input checks (``ingest``), and JSON too deep for Python's
# parser to read by :func:`read_jsonl`.
MAX_NESTING = 100


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line; a bad line raises ``ValidationError``."""
    path = Path(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except UnicodeDecodeError as exc:
                raise ValidationError(f"{path}:{lineno}: not UTF-8 ({exc.reason})") from None
            except RecursionError:
                raise ValidationError(
                    f"{path}:{lineno}: JSON nested too deeply to read (a document's fields may nest lists and objects "
                    f"at most {MAX_NESTING} levels deep)"
                ) from None
            except ValueError as exc:
                raise ValidationError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ValidationError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def input_format(path: str | Path) -> str:
    """``"parquet"``, ``"arrow"`` (an Arrow IPC file or stream) or ``"jsonl"``, by the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:6] == b"ARROW1" or head[:4] == b"\xff\xff\xff\xff":
        return "arrow"
    return "jsonl"


def read_records(path: str | Path, batch_size: int = 10_000) -> Iterator[tuple[list[str], list[dict]]]:
    """Documents from a JSON Lines, Parquet or Arrow IPC file, in batches: ``(where, records)``
    with ``where[i]`` naming record ``i`` for an error message (``FILE:LINE``, or ``FILE: row N``
    counted from 1 for the tabular formats). Parquet is read a row group at a time and Arrow a
    record batch at a time, each cut to ``batch_size``, so memory holds one batch."""
    path = Path(path)
    kind = input_format(path)
    if kind == "jsonl":
        where: list[str] = []
        batch: list[dict] = []
        for lineno, obj in read_jsonl(path):
            where.append(f"{path}:{lineno}")
            batch.append(obj)
            if len(batch) >= batch_size:
                yield where, batch
                where, batch = [], []
        if batch:
            yield where, batch
        return
    from .tables import EMBEDDING, WINDOWS_SUFFIX, table_records

    for where, part in read_tables(path, batch_size):
        # a document table (mempp.tables): null cells left out, 'extra' decoded; a column of vectors is not a field
        yield where, list(table_records(part, skip=(EMBEDDING, EMBEDDING + WINDOWS_SUFFIX)))


def read_tables(path: str | Path, batch_size: int = 10_000) -> Iterator[tuple[list[str], object]]:
    """A Parquet or Arrow IPC file's rows as ``(where, pyarrow.Table)`` pieces of at most ``batch_size`` rows."""
    path = Path(path)
    kind = input_format(path)
    if kind == "jsonl":
        raise ValidationError(f"{path}: expected a Parquet or Arrow file (a table with a column of vectors), got JSON Lines")
    row = 0
    for table in _tables(path, kind):
        for start in range(0, table.num_rows, batch_size):
            part = table.slice(start, batch_size)
            yield [f"{path}: row {row + i + 1}" for i in range(part.num_rows)], part
            row += part.num_rows


def _tables(path: Path, kind: str):
    import pyarrow as pa

    if kind == "parquet":
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        for i in range(f.num_row_groups):
            yield f.read_row_group(i)
        return
    with pa.memory_map(str(path), "r") as source:
        try:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            batches = pa.ipc.open_stream(source)
        for b in batches:
            yield pa.Table.from_batches([b])
