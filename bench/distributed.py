"""``mempp bench --ray``: embedding and bulk scoring on Ray against one plain process.

Embedding (``--docs FILE``, the first ``--embed-docs`` documents of a JSON Lines file): one
plain process, ``Store.add`` into a new store (the default model loaded on first use, 2 ONNX
threads), against ``mempp.distributed.embed`` with 1 worker (2 CPUs, 2 threads) and 2 workers
(1 CPU and 1 thread each), on a local Ray cluster started before (its start is not counted; the
actors' start and model load are); and ``add_embedded``, the single writer committing Ray's
table (``Store.add(table, embeddings="embedding")``). Rounds alternate them; medians of ``--reps``.

Bulk scoring (``--n``: the peers' workload store of ``mempp bench``, built in ``--dir`` when
missing; ``--threads`` builds a variant whose documents belong to threads of about 8, so that
thread context and the thread stage run; it is written in at least 4 units, merges off, so
that 2 shards hold 2 units each): the workload's questions (cycled to ``--queries``, their vectors
supplied) through ``Store.query_batch`` in this process against ``distributed.score``
query-parallel with 1 and 2 workers and segment-sharded with 1 and 2 shards. Each Ray run's
wall time includes starting its actors (reported apart as ``start_s``); sharded runs report
the driver's merge time per question and the documents fetched for thread context.

Every Ray result is checked equal to ``query_batch``'s (``equal``). The machine is shared: quote
medians side by side, as the report does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def embed_bench(docs: Path, n: int, reps: int) -> dict[str, Any]:
    import mempp
    from mempp import distributed
    from mempp.inputs import read_jsonl
    from mempp.tables import records_table

    records = []
    for item in read_jsonl(docs):
        records.append(item)
        if len(records) >= n:
            break
    table = records_table(records)
    dicts = [r for _, r in records]
    chars = sum(len(r["text"]) for r in dicts)
    runs: dict[str, list[float]] = {"store_add": [], "ray_1_worker": [], "ray_2_workers": [], "add_embedded": []}
    with tempfile.TemporaryDirectory(prefix="mempp-bench-embed-") as tmp:
        for rep in range(reps):
            # One plain process: a new store (the default model, loaded on first use) and Store.add.
            t = time.perf_counter()
            with mempp.Store.open(Path(tmp) / f"plain{rep}") as store:
                store.add(dicts)
            runs["store_add"].append(time.perf_counter() - t)
            t = time.perf_counter()
            out = distributed.embed(table, num_workers=1, cpus_per_worker=2)
            runs["ray_1_worker"].append(time.perf_counter() - t)
            assert out.num_rows == len(dicts)
            t = time.perf_counter()
            distributed.embed(table, num_workers=2, cpus_per_worker=1)
            runs["ray_2_workers"].append(time.perf_counter() - t)
            # What the single writer then costs: committing the embedded table (nothing to embed).
            t = time.perf_counter()
            with mempp.Store.open(Path(tmp) / f"embedded{rep}") as store:
                store.add(out, embeddings="embedding")
            runs["add_embedded"].append(time.perf_counter() - t)
    med = {k: _median(v) for k, v in runs.items()}
    rate = {k: round(len(dicts) / v, 1) for k, v in med.items()}
    return {
        "docs": len(dicts), "mean_chars": round(chars / len(dicts)), "reps": reps,
        "seconds": {k: [round(x, 2) for x in v] for k, v in runs.items()},
        "docs_per_s": rate,
        "ratio_to_store_add": {k: round(rate[k] / rate["store_add"], 3) for k in rate},
        "ray_overhead_1_worker": round(med["ray_1_worker"] / med["store_add"] - 1, 3),
    }


def _threaded_store(n: int, path: Path) -> None:
    """The workload's first ``n`` documents in threads of about 8 (thread context then runs)."""
    import mempp

    from .workload import DAY0, load

    w = load(n, False)
    days = np.datetime_as_string(np.asarray(w.dates).astype("datetime64[D]"))
    rng = np.random.default_rng(7)
    thread = rng.integers(0, max(1, n // 8), size=n)
    step = min(50_000, -(-n // 4))  # at least 4 units (merges off), so that 2 shards hold 2 each
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=384), merge="manual") as store:
        for a in range(0, n, step):
            texts = w.texts(a, min(n, a + step))
            docs = [{"text": t, "date": str(days[a + i]), "thread": f"t{thread[a + i]}"} for i, t in enumerate(texts)]
            store.add(docs, embeddings=np.ascontiguousarray(w.emb[a : a + len(docs)]))
        inactive = np.flatnonzero(~np.asarray(w.active))
        before = str(np.datetime64(DAY0 - 1, "D"))
        active = np.flatnonzero(np.asarray(w.active))
        retired_by = active[np.arange(len(inactive)) % max(len(active), 1)]
        store.supersede_many([(int(o), int(r), before) for o, r in zip(inactive, retired_by)], backdate=True)


def score_bench(n: int, directory: Path, queries: int, reps: int, threads: bool) -> dict[str, Any]:
    import mempp
    from mempp import distributed

    from .workload import build, load

    path = directory / (f"mempp-{n}" + ("-threads" if threads else ""))
    if not (path / "CURRENT").exists():
        if threads:
            _threaded_store(n, path)
        else:
            build(n, path)
    w = load(n, False)
    nq = len(w.as_of)
    pick = [q % nq for q in range(queries)]
    texts = [w.query_text(q) for q in pick]
    qemb = np.ascontiguousarray(np.asarray(w.qemb)[pick], dtype=np.float32)
    days = [str(np.datetime64(int(w.as_of[q]), "D")) for q in pick]
    out: dict[str, Any] = {"n": n, "threads": threads, "queries": queries, "reps": reps}
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384)) as store:
        out["segments"] = len(store.searcher().snapshot.segments)
        store.query_batch(texts[:64], qemb[:64], as_of=days[:64])  # warm up
        runs: dict[str, list[float]] = {}
        extra: dict[str, list[dict]] = {}
        want = None
        configs = [("one_process", None), ("parallel_1", {"num_workers": 1}), ("parallel_2", {"num_workers": 2}),
                   ("sharded_1", {"shards": 1}), ("sharded_2", {"shards": 2})]
        equal: dict[str, bool] = {}
        for _ in range(reps):
            for name, kw in configs:
                t = time.perf_counter()
                if kw is None:
                    table = store.query_batch(texts, qemb, as_of=days)
                    want = table
                    stats: dict = {}
                else:
                    stats = {}
                    table = distributed.score(store, texts, embeddings=qemb, as_of=days, stats=stats, **kw)
                runs.setdefault(name, []).append(time.perf_counter() - t)
                extra.setdefault(name, []).append(stats)
                if kw is not None:
                    equal[name] = equal.get(name, True) and table.equals(want)
    med = {k: _median(v) for k, v in runs.items()}
    out["seconds"] = {k: [round(x, 2) for x in v] for k, v in runs.items()}
    out["queries_per_s"] = {k: round(queries / v, 1) for k, v in med.items()}
    out["ratio_to_one_process"] = {k: round(med["one_process"] / v, 3) for k, v in med.items()}
    out["start_s"] = {k: round(_median([s.get("start_s", 0.0) for s in v]), 2) for k, v in extra.items() if k != "one_process"}
    out["queries_per_s_after_start"] = {
        k: round(queries / (med[k] - out["start_s"][k]), 1) for k in out["start_s"] if med[k] > out["start_s"][k]
    }
    for k in ("sharded_1", "sharded_2"):
        s = extra[k]
        out[f"{k}_driver_ms_per_query"] = round(1e3 * _median([x["driver_s"] for x in s]) / queries, 3)
        out[f"{k}_shards_ms_per_query"] = round(1e3 * _median([x["shards_s"] for x in s]) / queries, 3)
        out[f"{k}_fetched_per_query"] = round(_median([x["fetched"] for x in s]) / queries, 1)
        out[f"{k}_rounds"] = int(_median([x["rounds"] for x in s]))
    out["equal"] = equal
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mempp bench --ray", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ray", default="local", metavar="ADDRESS", help="the Ray cluster ('local' starts one of --cpus CPUs here)")
    p.add_argument("--cpus", type=int, default=2, help="CPUs of a local cluster (default 2)")
    p.add_argument("--docs", default=None, help="JSON Lines documents to embed (e.g. ../shared/data/locomo/docs.jsonl)")
    p.add_argument("--embed-docs", type=int, default=2000, help="documents to embed (default 2000)")
    p.add_argument("--n", type=int, action="append", default=None, help="workload store sizes to score (repeatable)")
    p.add_argument("--threads", action="store_true", help="score a workload store whose documents are in threads")
    p.add_argument("--dir", default=None, help="where the workload stores are built (kept and reused)")
    p.add_argument("--queries", type=int, default=4000, help="questions per scoring run (the workload's 1,000, cycled)")
    p.add_argument("--reps", type=int, default=3, help="rounds; medians reported")
    p.add_argument("--json", default=None, help="write the report here as JSON")
    args = p.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import ray

    from mempp import distributed

    if args.ray == "local":
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    else:
        distributed.connect(args.ray)
    report: dict[str, Any] = {"cpus": ray.cluster_resources().get("CPU"), "machine_cpus": os.cpu_count()}
    if args.docs:
        report["embed"] = embed_bench(Path(args.docs), args.embed_docs, args.reps)
        print(json.dumps({"embed": report["embed"]}, indent=1), flush=True)
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mempp-bench-ray-"))
    for n in args.n or []:
        r = score_bench(n, directory, args.queries, args.reps, args.threads)
        report.setdefault("score", []).append(r)
        print(json.dumps({"score": r}, indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
