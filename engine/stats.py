"""A version's counts and sizes (``Searcher.stats``; ``Store.stats`` adds the store's own).

Owns :func:`version_stats`. Through a :class:`~mempp.reader_view.ReaderView` the counts are those
of a store holding only the readable documents: documents, validity, dates, authors, threads and
supersessions count what the reader may read (the sizes of files are the store's).

Never imports: store, searcher, writer, planner, onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mempp.storage import FOREVER, NAT

from .dates import from_us
from .reader_view import ReaderView


def version_stats(snap: Any, path: Any, embedder_info: dict, analyzer: Any, index: Any) -> dict[str, Any]:
    view = isinstance(snap, ReaderView)
    base = snap.snapshot if view else snap
    mine = snap.readable if view else np.ones(snap.n_docs, dtype=np.bool_)
    valid_now = int(np.count_nonzero((snap.valid_until == FOREVER) & mine)) if snap.n_docs else 0
    gone = np.zeros(snap.n_docs, dtype=np.bool_)
    gone[base.erased] = True
    mine = mine & ~gone  # erased rows: counted apart, never documents
    unreadable = int(np.count_nonzero((base.valid_until == NAT) & mine)) if snap.n_docs else 0  # in skipped segments
    n = int(np.count_nonzero(mine))
    dates = snap.dates[mine]
    dated = dates[dates != NAT]
    olds = np.asarray(snap.sup_old, dtype=np.int64)
    return {
        "path": str(path),
        "version": snap.version,
        "documents": n - unreadable,
        "active": valid_now,
        "superseded": n - unreadable - valid_now,
        "unreadable": unreadable,
        "erased": 0 if view else int(len(base.erased)),
        "supersessions": int(np.count_nonzero(mine[olds])) if len(olds) else 0,
        "undated": int(n - len(dated)),
        "first_date": from_us(int(dated.min())).isoformat() if len(dated) else None,
        "last_date": from_us(int(dated.max())).isoformat() if len(dated) else None,
        "authors": sum(1 for x in snap.authors.readable_names if x) if view else len(snap.authors.names),
        "threads": sum(1 for x in snap.threads.readable_names if x) if view else len(snap.threads.names),
        "terms": snap.n_terms,
        "segments": len(snap.segments),
        "format": snap.state.format if snap.state is not None else None,
        "embedder": dict(embedder_info),
        "analyzer": analyzer.to_json(),
        "index": index.to_json(),
        "window_vectors": int(sum(len(e.window_rows) for e in snap.segments if e.window_rows is not None)),
        "skipped": list(snap.skipped),
        "rebuilt": list(snap.rebuilt),
        "int8_bytes": int(sum(e.q8.nbytes for e in snap.segments if e.q8 is not None)),
        "resident_bytes": int(sum(e.q8.nbytes for e in snap.segments if e.q8_state == "resident")),
    }
