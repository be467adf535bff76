"""Query latency and ingest rate on a benchmark, for one or more embedders side by side.

``python -m mempp.bench.latency --docs D --questions Q [--scope S] [--queries 300]
[--embedder minilm --embedder bge-small] [--batched] [--window-stride N] [--json]``

Measured in one process. For each embedder in turn: the embedder alone on the
scope's documents (``embedder_docs_per_s``), then ``Store.add`` of the same
documents, embedding included (``add_docs_per_s``). Then the questions, each
asked of every store in turn (the order rotating per question, so a busy spell
of a shared machine falls on all models alike): ``Store.query`` with its own
query embedding (``query_ms_p50/p95``; ``embed_ms_p50`` is the query embedding
alone, timed apart, and ``planner_ms_p50`` the legs, fusion and reserve).
Everything is warmed first: each embedder on 32 texts, the store's kernels by
adding 32 documents to a scratch store (``first_add_s``: that first add, which
loads the compiled kernels, reported on its own). ``--batched`` adds, for each model
that runs every text alone (``OnnxEmbedder.alone``), the same model run in batches
(``NAME+batched``), to see what running alone costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

import numpy as np

import mempp
from mempp.embedder import EMBEDDER_CHOICES, embed_queries

from .evaluate import load, make_embedder


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.latency", description=__doc__)
    p.add_argument("--docs", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--scope", default=None, help="scope to use (default: the largest)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--embedder", action="append", choices=EMBEDDER_CHOICES, default=None,
                   help="embedder to measure (repeatable; default minilm and bge-small)")
    p.add_argument("--batched", action="store_true", help="also each model that embeds texts alone, run in batches")
    p.add_argument("--window-stride", type=int, default=None, help="index time: window vectors every N tokens")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    docs, qs = load(args.docs, args.questions)
    scope = args.scope or max(docs, key=lambda s: len(docs[s]))
    d, q = docs[scope], qs.get(scope, [])[: args.queries]
    texts = [x["text"] for x in d if isinstance(x.get("text"), str) and x["text"].strip()]
    names = list(dict.fromkeys(args.embedder or ["minilm", "bge-small"]))
    index = mempp.IndexConfig(window_stride=args.window_stride)

    out: dict[str, dict] = {}
    embedders = {}
    for name in list(names):
        t = time.perf_counter()
        emb = embedders[name] = make_embedder(name)
        out[name] = {"model_id": emb.model_id, "load_s": round(time.perf_counter() - t, 2)}
        if args.batched and getattr(emb, "alone", False):
            names.insert(names.index(name) + 1, name + "+batched")
            embedders[name + "+batched"] = mempp.OnnxEmbedder(model=name, alone=False)
            out[name + "+batched"] = {"model_id": emb.model_id, "load_s": out[name]["load_s"]}
    for name in names:
        embedders[name].embed(texts[:32])  # warm up
        embed_queries(embedders[name], [x["text"] for x in q[:8]])
    with tempfile.TemporaryDirectory() as tmp:  # the store's kernels (numba loads them on first use: about 0.5 s)
        t = time.perf_counter()
        with mempp.Store.open(Path(tmp) / "w", embedder=mempp.HashEmbedder()) as w:
            w.add(d[:32])
        first_add_s = time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        stores = {}
        for name in names:
            emb = embedders[name]
            t = time.perf_counter()
            emb.embed(texts)
            embed_s = time.perf_counter() - t
            store = stores[name] = stack.enter_context(mempp.Store.open(Path(tmp) / name, embedder=emb, index=index))
            t = time.perf_counter()
            store.add(d)
            add_s = time.perf_counter() - t
            store.query("warm up", k=10)
            out[name].update(
                documents=len(d),
                embedder_docs_per_s=round(len(texts) / embed_s, 1),
                add_docs_per_s=round(len(d) / add_s, 1),
                add_vs_embedder=round(embed_s / add_s, 3),
                add_s=round(add_s, 1),
            )
        total: dict[str, list[float]] = {n: [] for n in names}
        legs: dict[str, list[float]] = {n: [] for n in names}
        embed_only: dict[str, list[float]] = {n: [] for n in names}
        for i, x in enumerate(q):
            for name in names[i % len(names):] + names[: i % len(names)]:
                t = time.perf_counter()
                embed_queries(embedders[name], [x["text"]])
                embed_only[name].append(time.perf_counter() - t)
                t = time.perf_counter()
                hits = stores[name].query(x["text"], as_of=x.get("as_of"), k=10)
                total[name].append(time.perf_counter() - t)
                legs[name].append(sum(hits.plan.timings_ms.values()) / 1e3)
    for name in names:
        out[name].update(
            queries=len(total[name]),
            query_ms_p50=round(1e3 * float(np.median(total[name])), 2),
            query_ms_p95=round(1e3 * float(np.percentile(total[name], 95)), 2),
            embed_ms_p50=round(1e3 * float(np.median(embed_only[name])), 2),
            planner_ms_p50=round(1e3 * float(np.median(legs[name])), 2),
        )
    report = {"scope": scope, "documents": len(d), "window_stride": args.window_stride, "first_add_s": round(first_add_s, 2), "embedders": out}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"scope {scope}: {len(d)} documents, {len(q)} questions, windows {args.window_stride or 'off'}, first add {first_add_s:.2f}s")
        keys = [k for k in next(iter(out.values())) if k not in ("model_id", "documents")]
        w = max(16, *(len(n) + 2 for n in names))
        print(f"{'':>22}" + "".join(f"{n:>{w}}" for n in names))
        for k in keys:
            print(f"{k:>22}" + "".join(f"{out[n][k]:>{w}}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
