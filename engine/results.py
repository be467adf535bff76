"""The Arrow layout of bulk-scoring results (``query_batch``, ``query_stream``, Ray scoring).

Owns :data:`BATCH_SCHEMA` (one row per hit: query, rank, doc_id, key, score, reserved and each
leg's rank) and the columns a batch fills (:func:`batch_columns`, :func:`hit_rows`), so that
every way of scoring many queries writes the same table.

Never imports: searcher, store, planner, mempp.storage.
"""

from __future__ import annotations

import pyarrow as pa

from .types import LEGS


def _schema() -> pa.Schema:
    fields = [
        pa.field("query", pa.int32()),
        pa.field("rank", pa.int32()),
        pa.field("doc_id", pa.uint64()),
        pa.field("key", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("reserved", pa.bool_()),
    ]
    return pa.schema(fields + [pa.field(f"rank_{leg}", pa.int32()) for leg in LEGS])


BATCH_SCHEMA = _schema()


def batch_columns() -> dict[str, list]:
    """Empty columns of a bulk-scoring result (:func:`hit_rows` fills them)."""
    return {f.name: [] for f in BATCH_SCHEMA}


def hit_rows(cols: dict[str, list], qi: int, chosen, fused, rankings) -> None:
    """Append query ``qi``'s hits (``planner.run``'s result) to the columns of a bulk-scoring result (all but ``key``)."""
    got = [doc for doc, _ in chosen]
    m = len(got)
    cols["query"] += [qi] * m
    cols["rank"] += range(m)
    cols["doc_id"] += got
    cols["score"] += [fused[doc] for doc in got]
    cols["reserved"] += [reserved for _, reserved in chosen]
    for leg in LEGS:
        ranked = rankings.get(leg)
        if ranked is None:
            cols[f"rank_{leg}"] += [None] * m
        else:
            pos = dict(zip(ranked, range(len(ranked))))
            cols[f"rank_{leg}"] += [pos.get(doc) for doc in got]
