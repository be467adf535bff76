"""A service that adds one memory at a time: commit rate and latency, merges, and what the
queries and a fresh process's first query cost afterwards.

    python -m mempp.bench.commits --commits 10000
    python -m mempp.bench.commits --commits 3000 --threads 1,4,16 --json out.json

Documents are a few sentences over a 5,000-word vocabulary with random unit embeddings
(supplied, so the embedder is not measured), dated over three years, some in threads.
1. ``--commits`` single-document ``add`` calls, one after another, merges in the background (the
   default): commits/s, latency p50/p95/p99/max, and p99 of the commits that did not wait for a
   merge being published (the writer's turn is taken for as long as a commit takes).
2. The same documents committed at once into a second store; queries (text and a supplied query
   vector, default options) alternate between the two stores: p50 of each and the ratio.
3. A fresh process opens the many-commit store and answers one query (query vector supplied):
   the time from ``Store.open`` to the answer, and the segments it opened.
4. ``--threads``: that many threads adding single documents at once to a new store (group
   commit): commits/s and documents/s for each thread count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import mempp

WORDS = [f"w{i}" for i in range(5000)]
DIM = 384


def corpus(n: int, seed: int = 0) -> tuple[list[dict], np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.zipf(1.2, size=(n, 40)) % len(WORDS)
    docs = []
    for i in range(n):
        day = int(rng.integers(0, 1095))
        doc = {"id": f"m{i}", "text": " ".join(WORDS[w] for w in z[i, : 10 + i % 30]), "author": f"author{i % 40}",
               "date": f"{2021 + day // 365}-{1 + (day % 365) // 31:02d}-{1 + day % 28:02d}"}
        if i % 3 == 0:
            doc["thread"] = f"thread{i % 500}"
        docs.append(doc)
    emb = rng.standard_normal((n, DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return docs, emb


def queries(n: int, seed: int = 1) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    texts = [" ".join(WORDS[w] for w in rng.zipf(1.2, size=4) % len(WORDS)) for _ in range(n)]
    q = rng.standard_normal((n, DIM)).astype(np.float32)
    return texts, q / np.linalg.norm(q, axis=1, keepdims=True)


def _pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1e3, p))


def single_commits(path: Path, docs: list[dict], emb: np.ndarray) -> dict:
    lat, spans = [], []
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(DIM)) as s:
        t0 = time.perf_counter()
        for i, d in enumerate(docs):
            a = time.perf_counter()
            s.add([d], emb[i : i + 1])
            b = time.perf_counter()
            lat.append(b - a)
            spans.append((a, b))
        total = time.perf_counter() - t0
        waited = time.perf_counter()
        s.wait_merges()
        waited = time.perf_counter() - waited
        publishes = list(s.writer.compaction.publishes)
        stats = s.stats()
    quiet = [x for x, (a, b) in zip(lat, spans) if not any(p0 < b and p1 > a for p0, p1 in publishes)]
    return {
        "commits": len(docs), "seconds": round(total, 2), "commits_per_s": round(len(docs) / total, 1),
        "p50_ms": round(_pct(lat, 50), 2), "p95_ms": round(_pct(lat, 95), 2), "p99_ms": round(_pct(lat, 99), 2),
        "max_ms": round(max(lat) * 1e3, 1),
        "p99_ms_no_merge_publish": round(_pct(quiet, 99), 2), "commits_overlapping_a_publish": len(lat) - len(quiet),
        "merges": stats["merges"], "segments": stats["segments"], "wait_for_merges_s": round(waited, 2),
        "merge_publish_p50_ms": round(_pct([p1 - p0 for p0, p1 in publishes], 50), 2) if publishes else None,
        "versions": stats["version"],
    }


def query_side_by_side(many: Path, once: Path, n: int = 300, rounds: int = 3) -> dict:
    texts, qv = queries(n)
    out: dict[str, list[float]] = {"many": [], "once": []}
    with mempp.Store.open(many, embedder=mempp.HashEmbedder(DIM), read_only=True) as a, mempp.Store.open(
        once, embedder=mempp.HashEmbedder(DIM), read_only=True
    ) as b:
        stores = {"many": a, "once": b}
        for s in stores.values():  # warm: compile, caches, resident int8 copies
            for i in range(20):
                s.query(texts[i], embedding=qv[i])
            s.make_resident(timeout=60)
        same = 0
        for _ in range(rounds):
            for i in range(n):
                got = {}
                for name, s in stores.items():
                    t = time.perf_counter()
                    hits = s.query(texts[i], embedding=qv[i], as_of=None if i % 2 else "2023-06-30")
                    out[name].append(time.perf_counter() - t)
                    got[name] = [(h.key, round(h.score, 12)) for h in hits]
                same += got["many"] == got["once"]
        segs = (len(a.searcher().snapshot.segments), len(b.searcher().snapshot.segments))
    p50 = {k: statistics.median(v) * 1e3 for k, v in out.items()}
    return {"p50_ms_many_commits": round(p50["many"], 3), "p50_ms_one_commit": round(p50["once"], 3),
            "ratio": round(p50["many"] / p50["once"], 3), "segments": segs, "identical_answers": f"{same}/{rounds * n}"}


FIRST = """
import sys, time, numpy as np
t0 = time.perf_counter()
import mempp
t1 = time.perf_counter()
s = mempp.Store.open(sys.argv[1], embedder=mempp.HashEmbedder(%d), read_only=True)
t2 = time.perf_counter()
q = np.random.default_rng(9).standard_normal(%d).astype(np.float32); q /= np.linalg.norm(q)
hits = s.query("w1 w2 w3", embedding=q, k=10)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, len(s.searcher().snapshot.segments), len(hits))
""" % (DIM, DIM)


def open_first_query(path: Path, repeat: int = 3) -> dict:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", FIRST, str(path)], capture_output=True, text=True, check=True).stdout.split()
        imp, op, q, segs, hits = float(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4])
        runs.append((op + q, op, q, imp, segs))
    runs.sort()
    total, op, q, imp, segs = runs[len(runs) // 2]
    return {"open_plus_first_query_s": round(total, 3), "open_s": round(op, 3), "first_query_s": round(q, 3),
            "import_s": round(imp, 3), "segments": segs}


def threads_adding(root: Path, counts: list[int], per_thread: int) -> list[dict]:
    rows = []
    for t in counts:
        docs, emb = corpus(t * per_thread, seed=t)
        with mempp.Store.open(root / f"threads{t}", embedder=mempp.HashEmbedder(DIM)) as s:
            s.add(docs[:1], emb[:1])  # the store exists and the kernels are loaded
            v0 = s.version
            start = threading.Barrier(t + 1)

            def work(k: int) -> None:
                start.wait()
                for i in range(k * per_thread, (k + 1) * per_thread):
                    s.add([docs[i]], emb[i : i + 1])

            ths = [threading.Thread(target=work, args=(k,)) for k in range(t)]
            for th in ths:
                th.start()
            start.wait()
            t0 = time.perf_counter()
            for th in ths:
                th.join()
            dt = time.perf_counter() - t0
            commits = s.version - v0 - s.stats()["merges"]
        n = t * per_thread
        rows.append({"threads": t, "docs": n, "seconds": round(dt, 2), "docs_per_s": round(n / dt, 1),
                     "commits": commits, "commits_per_s": round(commits / dt, 1), "docs_per_commit": round(n / max(commits, 1), 2)})
    return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--threads", default="", help="comma-separated thread counts, e.g. 1,4,16")
    ap.add_argument("--per-thread", type=int, default=250)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="mempp-commits-"))
    root.mkdir(parents=True, exist_ok=True)
    docs, emb = corpus(args.commits)
    out: dict = {"commits": args.commits}
    warm = root / "warm"
    with mempp.Store.open(warm, embedder=mempp.HashEmbedder(DIM)) as w:  # kernels loaded before timing
        w.add(docs[:50], emb[:50])
        w.add(docs[50:51], emb[50:51])
        w.query("w1", embedding=emb[0])
    out["single"] = single_commits(root / "many", docs, emb)
    print(json.dumps(out["single"]), flush=True)
    with mempp.Store.open(root / "once", embedder=mempp.HashEmbedder(DIM)) as s:
        s.add(docs, emb)
    out["query"] = query_side_by_side(root / "many", root / "once")
    print(json.dumps(out["query"]), flush=True)
    out["open"] = open_first_query(root / "many")
    print(json.dumps(out["open"]), flush=True)
    if args.threads:
        out["threads"] = threads_adding(root, [int(x) for x in args.threads.split(",")], args.per_thread)
        for row in out["threads"]:
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
