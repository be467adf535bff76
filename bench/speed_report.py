"""``mempp bench``'s report: the peers run beside mempp, and the Markdown table of a run.

Owns running the peers' scripts (``shared/bench/peers``) in child processes and reading their
JSON lines, and rendering a report (build, session and peer figures) as the table
``bench/README.md`` quotes. Imports nothing of mempp; ``speed`` imports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

LEXICAL_ROWS = ("lexical", "lexical_k10", "lexical_alone")  # the session's lexical timings, each compared with bm25s


def _resident_note(s: dict) -> str:
    if "resident_s" not in s:
        return ""
    return f"; then the int8 copy ({s['resident_mb']:,.0f} MB) moved onto huge pages in {s['resident_s']} s (Store.make_resident)"


PEER_TOOLS = ("bm25s", "tantivy", "scipy", "numpy-exact", "hnswlib", "faiss-flat", "faiss-sq8", "faiss-hnsw", "usearch", "lancedb")


def run_peers(peers: Path, python: str, n: int, tools: list[str], nq: int | None = None) -> dict[str, Any]:
    """Run the peers' scripts one after another; the JSON lines they record, by tool and variant.

    The ANN peers (``hnswlib``, ``faiss-*``, ``usearch``) score recall against the truth that
    ``numpy-exact`` writes: list it first. ``faiss-sq8`` is ours (``peer_faiss_sq8.py``), run the
    same way. ``nq``: queries, for the scripts that take a count (BM25's run all 1,000).
    """
    out: dict[str, Any] = {}
    count = [] if nq is None else ["--nq", str(nq)]
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {**os.environ, "PERF_RESULTS": str(results), "PEERS": str(peers)}
        for tool in tools:
            script, args = {
                "bm25s": ("bench_bm25.py", [str(n), "bm25s"]),
                "tantivy": ("bench_bm25.py", [str(n), "tantivy"]),
                "scipy": ("bench_bm25.py", [str(n), "scipy"]),
                "numpy-exact": ("bench_exact.py", [str(n), *count]),
                "hnswlib": ("bench_ann.py", [str(n), "hnswlib", *count]),
                "faiss-flat": ("bench_ann.py", [str(n), "faissflat", *count]),
                "faiss-hnsw": ("bench_ann.py", [str(n), "faiss", *count]),
                "usearch": ("bench_ann.py", [str(n), "usearch", *count]),
                "faiss-sq8": (str(Path(__file__).with_name("peer_faiss_sq8.py")), [str(n), *count]),
                "lancedb": ("bench_lancedb.py", [str(n), *count]),
            }[tool]
            t = time.perf_counter()
            proc = subprocess.run([python, str(peers / script), *args], env=env, capture_output=True, text=True)
            rows = []
            if results.exists():
                rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
                results.unlink()
            out[tool] = {"rc": proc.returncode, "wall_s": round(time.perf_counter() - t, 1), "rows": rows}
            if proc.returncode:
                out[tool]["stderr"] = proc.stderr[-2000:]
    return out


def peer_p50(peers: dict[str, Any], tool: str, bench: str, variant_prefix: str) -> float | None:
    for row in peers.get(tool, {}).get("rows", []):
        if row.get("bench") == bench and str(row.get("variant", "")).startswith(variant_prefix) and "p50_ms" in row:
            return float(row["p50_ms"])
    return None


def table(report: dict[str, Any]) -> str:
    lines = ["| N | what | p50 ms | p95 ms | QPS | note |", "|---|---|---|---|---|---|"]
    for r in report["runs"]:
        n = f"{r['n']:,}"
        s = r["session"]
        ann_b = f"; HNSW build {r['build']['ann_build_s']} s" if "ann_build_s" in r["build"] else ""
        b = r["build"]
        warm = f" (the process's first add, {b['warmup_docs']:,} documents into a scratch store, took {b['warmup_add_s']} s: with it, {b['ingest_docs_per_s_with_warmup']:,.0f} docs/s)" if "warmup_add_s" in b else ""
        if "fresh_memory_gbs" in b:
            warm += f"; memory not used before filled at {b['fresh_memory_gbs']} GB/s (bench.membw.fresh_memory_gbs)"
        kern = s.get("kernels")
        if kern:
            lines.append(f"| {n} | kernel paths | | | | int8 scan: {kern['int8 scan']}; query_batch: {kern['query_batch']} |")
        lines.append(f"| {n} | ingest, embeddings supplied | | | | {b['ingest_docs_per_s']:,.0f} docs/s{warm}{ann_b} |")
        lines.append(f"| {n} | open (fresh process) | {1e3 * s['open_s']:.1f} | | | store {r['build']['store_mb']:,.0f} MB, session peak RSS {s['peak_rss_mb']:,.0f} MB{_resident_note(s)} |")
        for leg in ("mask", *LEXICAL_ROWS, "vector", "hybrid"):
            x = s.get(leg)
            if x is None:
                continue
            note = ""
            if leg == "lexical":
                note = f"depth 50; top 10 = numpy oracle in {s['lexical_top10_equal_numpy_oracle']}/{s['checked_queries']}"
            if leg == "lexical_k10":
                note = f"depth 10, as bm25s is asked; = numpy oracle in {s.get('lexical_k10_equal_numpy_oracle')}/{s['checked_queries']}"
            if leg == "lexical_alone":
                note = "mask + lexical leg at depth 50, query after query with no other leg between, as the peers are timed (their mask inside the timing too)"
            p = r.get("ratios", {}).get(f"{leg}_vs_bm25s")
            if p:
                note += f"; bm25s filtered p50 {p['peer_ms']} ms: {p['speedup']}x"
            if leg == "vector":
                note = f"recall@10 vs float32 {s['vector_recall10_vs_float32']}; {r.get('vector_gbs', '')} GB/s effective of {report['membw_gbs']} GB/s"
                if kern:
                    note += f"; int8 scan: {kern['int8 scan']}"
            if leg == "vector":
                f = s.get("vector_float32_scan")
                if f:
                    note += f"; the float32 scan alone: p50 {f['p50_ms']} ms ({f['p50_ms'] / x['p50_ms']:.2f}x the int8 leg)"
            bw = max(s.get("membw_session_gbs") or [report["membw_gbs"]])

            def share(gbs: float) -> str:  # of the bandwidth measured beside the scans (and of the run's first figure)
                by = s.get("membw_session_by_method") or {}
                methods = ", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in by.items())
                return (
                    f"{100 * gbs / bw:.0f}% of the bandwidth ({bw} GB/s{': ' + methods if methods else ''}; "
                    f"{100 * gbs / report['membw_gbs']:.0f}% of the run's first {report['membw_gbs']})"
                )

            def side(f: dict) -> str:  # rounds of the scan, each against the bandwidth probed beside it
                rounds = f.get("share_rounds")
                if not rounds:
                    return ""
                return (
                    f"; side by side with the bandwidth, {100 * f['share_side_by_side']:.0f}% "
                    f"(median of {len(rounds)} rounds, {100 * min(rounds):.0f}% to {100 * max(rounds):.0f}%)"
                )

            if leg == "vector" and s.get("int8_scan_all_rows"):
                f = s["int8_scan_all_rows"]
                note += f"; int8 scan of every row: p50 {f['p50_ms']} ms, {f['gbs']} GB/s = {share(f['gbs'])}{' (VNNI)' if f['vnni'] else ''}{side(f)}"
            if leg == "vector" and s.get("int8_masked_scan"):
                f = s["int8_masked_scan"]
                note += (
                    f"; the masked int8 scan alone (workload masks, copy in date order): p50 {f['p50_ms']} ms, "
                    f"{f['span_gbs']} GB/s over the {100 * f['span_frac_mean']:.0f}% of rows dated up to as_of = "
                    f"{share(f['span_gbs'])}{side(f)}; {f['candidate_gbs']} GB/s of candidate rows = {100 * f['candidate_gbs'] / bw:.0f}%"
                )
            if leg == "mask":
                note = f"= workload mask in {s['masks_equal_workload']}/{s['checked_queries']}"
            lines.append(f"| {n} | {leg} | {x['p50_ms']} | {x['p95_ms']} | {x['qps']:,.0f} | {note} |")
        if s.get("ann"):
            a = s["ann"]
            rec = ", ".join(f"{k}: {v[0]} (n={v[1]})" for k, v in a["recall10_by_candidate_fraction"].items())
            lat = ", ".join(f"{k}: {v}" for k, v in a["vector_p50_ms_by_candidate_fraction"].items())
            lines.append(f"| {n} | vector leg with HNSW, recall@10 by candidate share | | | | {rec}; p50 ms {lat}; ANN used in {a['queries_using_ann']} queries |")
        b = s["batch"]
        runs = ", ".join(f"{x:,.0f}" for x in b.get("qps_runs", []))
        lines.append(
            f"| {n} | query_batch, {b['queries']} queries | | | {b['qps']:,.0f} | = single queries in "
            f"{b['equal_to_single_queries']}/{s['checked_queries']}{'; median of ' + runs if runs else ''}"
            f"{'; int8 scan: ' + kern['query_batch'] if kern else ''} |"
        )
        for tool, peer in r.get("peers", {}).items():
            for row in peer.get("rows", []):
                if "p50_ms" in row:
                    lines.append(f"| {n} | peer {tool}: {row.get('variant', row.get('bench'))} | {row['p50_ms']} | | {row.get('qps_1t', '')} | build {row.get('build_s', '')} s |")
    return "\n".join(lines)
