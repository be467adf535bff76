"""Query latency and ingest rate on a benchmark, side by side with the embedder alone.

``python -m mempp.bench.latency --docs D --questions Q [--scope S] [--queries 300]``

Measured in one process, one after another: the embedder alone on the scope's
documents, then ``Store.add`` of the same documents (embedding included), then
each question through ``Store.query`` with its own embedding (medians, p95).
Both sides are warmed first: the embedder on 32 texts, the store by adding 32
documents to a scratch store (``first_add_s``: that first add, which loads the
compiled kernels, is reported on its own).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

import mempp

from .evaluate import load


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.latency", description=__doc__)
    p.add_argument("--docs", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--scope", default=None, help="scope to use (default: the largest)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    docs, qs = load(args.docs, args.questions)
    scope = args.scope or max(docs, key=lambda s: len(docs[s]))
    d, q = docs[scope], qs.get(scope, [])[: args.queries]
    texts = [x["text"] for x in d if isinstance(x.get("text"), str) and x["text"].strip()]

    emb = mempp.OnnxEmbedder()
    emb.embed(texts[:32])  # warm up
    with tempfile.TemporaryDirectory() as tmp:  # and the store's kernels (numba loads them on first use: about 0.5 s)
        t = time.perf_counter()
        with mempp.Store.open(Path(tmp) / "w", embedder=emb) as w:
            w.add(d[:32])
        first_add_s = time.perf_counter() - t
    t = time.perf_counter()
    emb.embed(texts)
    embed_s = time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        with mempp.Store.open(Path(tmp) / "s", embedder=emb) as store:
            t = time.perf_counter()
            store.add(d)
            add_s = time.perf_counter() - t
            store.query("warm up", k=10)
            total, legs = [], []
            for x in q:
                t = time.perf_counter()
                hits = store.query(x["text"], as_of=x.get("as_of"), k=10)
                total.append(time.perf_counter() - t)
                legs.append(sum(v for k, v in hits.plan.timings_ms.items()) / 1e3)
    out = {
        "scope": scope,
        "documents": len(d),
        "embedder_docs_per_s": round(len(texts) / embed_s, 1),
        "add_docs_per_s": round(len(d) / add_s, 1),
        "add_vs_embedder": round(embed_s / add_s, 3),
        "first_add_s": round(first_add_s, 2),
        "queries": len(total),
        "query_ms_p50": round(1e3 * float(np.median(total)), 2),
        "query_ms_p95": round(1e3 * float(np.percentile(total, 95)), 2),
        "planner_ms_p50": round(1e3 * float(np.median(legs)), 2),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>22}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
