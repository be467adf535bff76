"""The scaling table: the peers' speed workload at several sizes (10k to 10M documents), with every
default option, embeddings supplied, one thread.

    OPENBLAS_NUM_THREADS=1 python -m mempp.bench.scaling --dir DIR [--sizes 10000,100000,1000000,10000000]
        [--queries 200] [--ann-up-to 100000] [--json OUT]

For each size: the store is built at ``DIR/n<N>`` on first use (``workload.build``: ingest rate,
embeddings supplied, the workload's inactive tenth retired), then a fresh process opens it and
measures: open (every file checksummed), ``make_resident``, resident memory after both (VmRSS) and
its peak before the bandwidth probe; the default query's p50 and p95 over ``--queries`` queries (feedback included) and with
``feedback=0``; ``query_batch`` of the same queries in one call (queries per second); the candidate mask with the
lexical leg, and with the exact vector leg, top 10 each (what the peers are asked); and beside
each query figure its limit: the bytes of int8 copy its scans read (each candidate's 384 bytes,
once per scan: two with feedback) over the read bandwidth measured in the same process
(``membw.membw_gbs``). With ``--peers``, the peers' scripts run beside each size up to
``--peers-up-to`` (``speed_report.run_peers``: bm25s and tantivy against the lexical leg; FAISS flat,
8-bit scalar quantizer and HNSW and usearch against the vector leg; LanceDB's hybrid search),
their graph indexes only up to ``--ann-up-to``. Up to ``--ann-up-to`` documents the HNSW index is built too (timed) and the
default query is also timed with ``vector_index="ann"``; above it the table says it was not built.
The workload is generated once and cached under ``$PERF_DATA`` (10M documents: 21 GB, written
chunk by chunk).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

DAY_US = 86_400_000_000


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(path: Path, n: int, queries: int, ann: bool) -> dict[str, Any]:
    """One store, measured in this (fresh) process."""
    import mempp
    from mempp import planner as P
    from mempp.kernels.int8dot import kernel_path

    from .membw import membw_gbs
    from .workload import load

    t = time.perf_counter()
    store = mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384))
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    store.make_resident()
    resident_s = time.perf_counter() - t
    rss = _rss_mb()
    w = load(n)
    q = min(queries, len(w.as_of))
    qemb = np.array(w.qemb[:q], dtype=np.float32)
    texts = [w.query_text(i) for i in range(q)]
    days = [str(np.datetime64(int(a), "D")) for a in np.asarray(w.as_of)[:q]]
    snap = store.searcher().snapshot
    cand = np.array([int(np.count_nonzero(P.candidate_mask(snap, P.QueryOptions(k=10, as_of=(int(a) + 1) * DAY_US - 1))))
                     for a in np.asarray(w.as_of)[:q]])
    store.query_batch(texts[:8], qemb[:8], k=10, as_of=days[:8])  # loads the batch kernels
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the bandwidth probe's 1 GiB
    gbs = membw_gbs()
    variants: dict[str, dict] = {"default": {}, "feedback=0": {"feedback": 0}}
    if ann:
        variants["default, HNSW"] = {"vector_index": "ann"}
    for opts in variants.values():  # warm: the first query of a kind loads its kernels
        store.query(texts[0], embedding=qemb[0], as_of=days[0], k=10, **opts)
    times: dict[str, list[float]] = {name: [] for name in variants}
    same: list[float] = []  # with HNSW: the share of the exact default's 10 hits it returns
    for i in range(q):
        got = {}
        for name in (list(variants) if i % 2 else list(variants)[::-1]):
            t = time.perf_counter()
            hits = store.query(texts[i], embedding=qemb[i], as_of=days[i], k=10, **variants[name])
            times[name].append(time.perf_counter() - t)
            got[name] = {h.doc_id for h in hits}
        if ann and got["default"]:
            same.append(len(got["default"] & got["default, HNSW"]) / len(got["default"]))
    t = time.perf_counter()
    store.query_batch(texts, qemb, k=10, as_of=days)
    batch_s = time.perf_counter() - t
    # Each leg alone, top 10, as the peers are asked (their filter's mask built in their time too):
    # the candidate mask, then the lexical leg or the exact vector leg.
    legs: dict[str, list[float]] = {"lexical": [], "vector": []}
    none = np.zeros(0, dtype=np.int64)
    for i in range(q):
        opt = P.QueryOptions(k=10, depth=10, as_of=(int(w.as_of[i]) + 1) * DAY_US - 1, vector_index=mempp.VectorIndex.EXACT)
        t = time.perf_counter()
        mask = P.candidate_mask(snap, opt)
        P.lexical_leg(snap, texts[i], mask, int(np.count_nonzero(mask)), opt, none)
        legs["lexical"].append(time.perf_counter() - t)
        t = time.perf_counter()
        mask = P.candidate_mask(snap, opt)
        P.vector_leg(snap, qemb[i], mask, opt)
        legs["vector"].append(time.perf_counter() - t)
    out: dict[str, Any] = {
        "n": n, "open_s": round(open_s, 3), "make_resident_s": round(resident_s, 3), "rss_mb_after_open": round(rss, 1),
        "peak_rss_mb": round(peak, 1), "membw_gbs": gbs,
        "queries": q, "candidates_mean": round(float(cand.mean()), 1), "kernel": kernel_path(), "query_batch_qps": round(q / batch_s, 1),
    }
    for leg, ts in legs.items():
        out[f"{leg} leg, top 10"] = {"p50_ms": round(1e3 * float(np.median(ts)), 3)}
    for name, ts in times.items():
        scans = 1 if name == "feedback=0" else 2
        limit_ms = float(np.median(cand)) * 384 * scans / (gbs * 1e9) * 1e3
        out[name] = {"p50_ms": round(1e3 * float(np.median(ts)), 3), "p95_ms": round(1e3 * float(np.percentile(ts, 95)), 3)}
        if name != "default, HNSW":
            out[name]["limit_ms"] = round(limit_ms, 3)
        else:
            out[name]["hits_of_exact"] = round(float(np.mean(same)), 4)
    store.close()
    return out


ANN_PEERS = ("hnswlib", "faiss-hnsw", "usearch")  # graph indexes: built only up to --ann-up-to, as mempp's


def peer_rows(peers: dict[str, Any]) -> list[dict[str, Any]]:
    """Each peer figure in short: tool, variant, p50, recall@10 and build time where given."""
    keep = ("tool", "bench", "variant", "p50_ms", "qps_1t", "recall10", "build_s", "peak_rss_mb")
    out: list[dict[str, Any]] = []
    for tool, run in peers.items():
        if run.get("rc"):
            out.append({"tool": tool, "failed": run.get("stderr", "")[-300:]})
        out += [{k: r[k] for k in keep if k in r} for r in run.get("rows", []) if "p50_ms" in r]
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The scaling table in Markdown: one column per size (the last row of each size), then the peers."""
    by_n = {r["n"]: r for r in rows}
    ns = sorted(by_n)

    def cell(r: dict, name: str) -> str:
        x = r.get(name)
        if x is None:
            return "not built" if name == "default, HNSW" else ""
        if name == "default, HNSW":
            return f"{x['p50_ms']:,.2f} ({x['hits_of_exact']:.3f} of the exact hits)"
        return f"{x['p50_ms']:,.2f} / {x['limit_ms']:,.2f}"

    out = ["| | " + " | ".join(f"{n:,}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
    lines = [
        ("ingest, embeddings supplied (docs/s)", lambda r: f"{r['build'].get('ingest_docs_per_s', float('nan')):,.0f}"),
        ("store on disk (MB)", lambda r: f"{r['build'].get('store_mb', float('nan')):,.0f}"),
        ("open, fresh process, every file hashed (s)", lambda r: f"{r['open_s']:.2f}"),
        ("make_resident (s)", lambda r: f"{r['make_resident_s']:.2f}"),
        ("resident memory after both / peak (MB)", lambda r: f"{r['rss_mb_after_open']:,.0f} / {r['peak_rss_mb']:,.0f}"),
        ("candidates per query (mean)", lambda r: f"{r['candidates_mean']:,.0f}"),
        ("default query p50 / its limit (ms)", lambda r: cell(r, "default")),
        ("`feedback=0` p50 / its limit (ms)", lambda r: cell(r, "feedback=0")),
        ("default query with HNSW, p50 (ms)", lambda r: cell(r, "default, HNSW")),
        ("`query_batch`, defaults (queries/s)", lambda r: f"{r['query_batch_qps']:,.1f}"),
        ("mask + lexical leg, top 10, p50 (ms)", lambda r: f"{r['lexical leg, top 10']['p50_ms']:,.3f}"),
        ("mask + exact vector leg, top 10, p50 (ms)", lambda r: f"{r['vector leg, top 10']['p50_ms']:,.3f}"),
        ("read bandwidth measured beside (GB/s)", lambda r: f"{r['membw_gbs']}"),
    ]
    for label, fn in lines:
        out.append(f"| {label} | " + " | ".join(fn(by_n[n]) for n in ns) + " |")
    peers = [(n, p) for n in ns for p in by_n[n].get("peers", [])]
    if peers:
        out += ["", "| N | peer | variant | p50 ms | recall@10 | build s |", "|---|---|---|---|---|---|"]
        for n, p in peers:
            if "failed" in p:
                out.append(f"| {n:,} | {p['tool']} | failed | | | |")
                continue
            out.append(f"| {n:,} | {p['tool']} | {p.get('variant', '')} | {p['p50_ms']} | {p.get('recall10', '')} | {p.get('build_s', '')} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="where the stores are built (one per size), reused after")
    p.add_argument("--sizes", default="10000,100000,1000000,10000000")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ann-up-to", type=int, default=100_000, help="build the HNSW index for sizes up to this")
    p.add_argument("--json", default=None, help="append each size's figures to this JSON Lines file")
    p.add_argument("--peers", default=None, help="the peers' benchmark folder (shared/bench/peers), run beside each size")
    p.add_argument("--peer-python", default=sys.executable, help="python with the peers' packages installed")
    p.add_argument("--peer-tools", default="bm25s,tantivy,numpy-exact,faiss-flat,faiss-sq8,faiss-hnsw,usearch,lancedb")
    p.add_argument("--peers-up-to", type=int, default=1_000_000, help="run the peers for sizes up to this (their generator holds the whole workload in memory)")
    p.add_argument("--table", default=None, metavar="JSONL", help="print the Markdown table of a --json file and stop")
    p.add_argument("--child", nargs=3, metavar=("PATH", "N", "ANN"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.table:
        print(table([json.loads(line) for line in Path(args.table).read_text().splitlines() if line.strip()]))
        return 0
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), int(args.child[1]), args.queries, args.child[2] == "1")))
        return 0
    from .speed_report import run_peers
    from .workload import build

    if not args.dir:
        p.error("--dir is required (where the stores are built)")
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    for n in (int(s) for s in args.sizes.split(",")):
        ann = n <= args.ann_up_to
        path = root / (f"n{n}" + ("-ann" if ann else ""))
        record = root / f"{path.name}.build.json"
        if not (path / "CURRENT").exists():
            built = build(n, path, ann=ann)
            record.write_text(json.dumps(built))
        built = json.loads(record.read_text()) if record.exists() else {}
        child = subprocess.run(
            [sys.executable, "-m", "mempp.bench.scaling", "--dir", str(root), "--queries", str(args.queries), "--child", str(path), str(n), "1" if ann else "0"],
            check=True, capture_output=True, text=True,
        )
        row = {**json.loads(child.stdout.strip().splitlines()[-1]), "build": built}
        if args.peers and n <= args.peers_up_to:
            tools = [t for t in args.peer_tools.split(",") if t and (n <= args.ann_up_to or t not in ANN_PEERS)]
            row["peers"] = peer_rows(run_peers(Path(args.peers), args.peer_python, n, tools, nq=args.queries))
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
