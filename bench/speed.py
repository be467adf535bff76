"""``mempp bench``: mempp on the peers' speed workload, with the peers run beside it in one run.

For each N (default 100,000): generate the workload (``mempp.bench.workload``, cached),
build a store (documents with their embeddings supplied; the workload's inactive 10%
retired by one ``supersede_many`` effective before every as-of date, so each query's
candidates are exactly the workload's ``active & date <= as_of``), then

- ingest rate (``Store.add`` only), store size on disk;
- in a fresh process: open time (median of 3) and the query session's peak RSS;
- per query, one thread, query embedding supplied: the candidate mask, the lexical leg
  (at the default depth 50, and at depth 10: the top 10 bm25s is asked for), the vector leg
  and the whole hybrid query (``Store.query``, default options), p50 / p95 / QPS, with checks: masks equal the workload's, the lexical top 10 equal a numpy BM25
  oracle's, the vector top 10 against an exact float32 numpy scan (recall@10). The legs are
  timed inside the hybrid flow (after the previous query's vector scan has evicted the caches);
  ``lexical_alone`` times mask + lexical leg query after query, as the peers are timed;
  ``query_batch`` over the same queries, three times (the median);
- memory bandwidth (the higher of numpy's sum and a compiled int64 sum over 1 GiB, 1 thread,
  best of 5 each: :func:`membw_gbs`), at the start of the run
  and in the query session just before and after the int8 scans, and the vector legs'
  effective scan rate against the higher of the two session figures (and the first);
- the peers (``--peers DIR`` = ``shared/bench/peers``, run with ``--peer-python``, one
  after another in child processes) and the ratio of each to mempp.

``python -m mempp.bench.speed --n 100000 --json out.json`` (or ``mempp bench ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .membw import BandwidthProbe, side_by_side_shares, membw_gbs
from .speed_report import LEXICAL_ROWS, PEER_TOOLS, peer_p50, run_peers, table
from .workload import build

DAY_US = 86_400 * 10**6


def _ms(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1e3
    return {"p50_ms": round(float(np.median(a)), 3), "p95_ms": round(float(np.percentile(a, 95)), 3), "qps": round(1e3 / float(a.mean()), 1)}


def _bm25_corpus(w, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, document of each token, document lengths) of the first ``n`` documents, for :func:`_bm25_oracle`."""
    lengths = np.diff(np.asarray(w.offs[: n + 1]))
    return np.asarray(w.toks[: w.offs[n]]), np.repeat(np.arange(n), lengths), lengths.astype(np.float64)


def _bm25_oracle(corpus, q_terms, n: int, mask: np.ndarray, k: int = 10) -> list[int]:
    """Top ``k`` by BM25 (k1 1.2, b 0.75, Lucene idf) from the workload's tokens, in numpy."""
    toks, doc_of, lengths = corpus
    scores = np.zeros(n)
    avgdl = lengths.mean()
    for t in sorted(set(int(x) for x in q_terms)):
        tf = np.bincount(doc_of[toks == t], minlength=n).astype(np.float64)
        df = np.count_nonzero(tf)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        scores += np.where(tf > 0, idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * lengths / avgdl)), 0.0)
    scores[~mask] = 0
    cand = np.flatnonzero(scores > 0)
    order = sorted(cand.tolist(), key=lambda g: (-scores[g], -g))
    return order[:k]


BUCKETS = ((0.0, 0.01, "<1%"), (0.01, 0.10, "1-10%"), (0.10, 0.50, "10-50%"), (0.50, 1.01, ">50%"))


def session(path: Path, n: int, queries: int, check: int, clustered: bool = False) -> dict[str, Any]:
    """Open the store and run the workload's queries; the caller runs this in a fresh process."""
    t = time.perf_counter()
    import mempp
    from mempp import planner as P

    from .workload import load

    import_s = time.perf_counter() - t
    opens = []
    for _ in range(3):
        t = time.perf_counter()
        store = mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384))
        opens.append(time.perf_counter() - t)
        if _ < 2:
            store.close()
    # What a service does at start (else the first query starts it in the background): the int8
    # copy of the embeddings moved onto huge pages (storage/resident.py), timed apart.
    t = time.perf_counter()
    store.make_resident()
    resident_s = time.perf_counter() - t
    snap = store.searcher().snapshot
    w = load(n, clustered)  # memory-mapped embeddings; the queries' arrays are small
    mask_t, lex_t, lex10_t, vec_t, all_t = [], [], [], [], []
    methods: dict[str, int] = {}
    qemb = np.array(w.qemb, dtype=np.float32)
    qtexts = [w.query_text(q) for q in range(len(w.as_of))]
    as_of = np.asarray(w.as_of).tolist()
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for q in range(min(queries, len(as_of))):
        as_of_day = str(np.datetime64(as_of[q], "D"))
        opt = P.QueryOptions(k=10, as_of=(as_of[q] + 1) * DAY_US - 1)
        opt10 = P.QueryOptions(k=10, as_of=opt.as_of, depth=10)
        t0 = time.perf_counter()
        mask = P.candidate_mask(snap, opt)
        n_cand = int(np.count_nonzero(mask))
        t1 = time.perf_counter()
        lex, _ = P.lexical_leg(snap, qtexts[q], mask, n_cand, opt, np.zeros(0, dtype=np.int64))
        t2 = time.perf_counter()
        info: dict = {}
        vec = P.vector_leg(snap, qemb[q], mask, opt, info)
        t3 = time.perf_counter()
        store.query(qtexts[q], embedding=qemb[q], as_of=as_of_day, k=10)
        t4 = time.perf_counter()
        # The lexical leg at depth 10, what bm25s is asked for (top 10); after the hybrid query,
        # whose vector scan has evicted the caches again, as before the depth-50 leg above.
        lex10, _ = P.lexical_leg(snap, qtexts[q], mask, n_cand, opt10, np.zeros(0, dtype=np.int64))
        t5 = time.perf_counter()
        mask_t.append(t1 - t0)
        lex_t.append(t2 - t1)
        vec_t.append(t3 - t2)
        all_t.append(t4 - t3)
        lex10_t.append(t5 - t4)
        methods[info.get("method", "?")] = methods.get(info.get("method", "?"), 0) + 1
        if q < check:
            kept.append((mask.copy(), lex[:10].copy(), vec[:10].copy(), lex10.copy()))
    # The lexical search alone, timed as the peers time bm25s and tantivy: query after query with
    # nothing between them, each query's filter mask built inside the timing (theirs is too).
    alone_t = []
    for q in range(min(queries, len(as_of))):
        opt = P.QueryOptions(k=10, as_of=(as_of[q] + 1) * DAY_US - 1)
        t0 = time.perf_counter()
        mask = P.candidate_mask(snap, opt)
        P.lexical_leg(snap, qtexts[q], mask, int(np.count_nonzero(mask)), opt, np.zeros(0, dtype=np.int64))
        alone_t.append(time.perf_counter() - t0)
    # Bulk scoring: the same queries through query_batch (one thread for the matrix products
    # is the caller's choice: OPENBLAS_NUM_THREADS=1, as `mempp bench` runs this process).
    nb = min(queries, len(as_of))
    days = [str(np.datetime64(a, "D")) for a in as_of[:nb]]
    warm = min(64, nb)
    store.query_batch(qtexts[:warm], qemb[:warm], k=10, as_of=days[:warm])  # warm up
    batch_runs = []  # three timed runs, the median reported: one run moves by 20% on the shared machine
    for _ in range(3):
        t = time.perf_counter()
        table = store.query_batch(qtexts[:nb], qemb[:nb], k=10, as_of=days)
        batch_runs.append(time.perf_counter() - t)
    batch_s = float(np.median(batch_runs))
    batch_check = 0
    for q in range(min(check, nb)):
        # the batch's vector leg is exact: compare with single queries that scan exactly too
        single = [h.doc_id for h in store.query(qtexts[q], embedding=qemb[q], as_of=days[q], k=10, vector_index="exact")]
        got = [r["doc_id"] for r in table.filter(np.asarray(table.column("query")) == q).to_pylist()]
        batch_check += got == single
    hwm = 0.0  # the query session's peak: before the reference scans below map every float32 row and the checks load the workload
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    # The float32 scan alone (what the int8 copy replaces), on the first 200 queries.
    from mempp.kernels import TopK, masked_dot_topk

    f32_t = []
    for q in range(min(200, queries, len(as_of))):
        mask = P.candidate_mask(snap, P.QueryOptions(k=10, as_of=(as_of[q] + 1) * DAY_US - 1))
        t = time.perf_counter()
        heap = TopK(50)
        for e in snap.segments:
            heap.n = masked_dot_topk(e.segment.embeddings, qemb[q], mask, e.base, 50, heap.scores, heap.ids, heap.n)
        heap.result()
        f32_t.append(time.perf_counter() - t)
    # The int8 scan over every row (all candidates): its read rate against the memory bandwidth.
    from mempp.kernels.int8dot import Int8Query, batch_kernel_path, has_vnni, kernel_path

    # The bandwidth again, here, before and after the int8 scans (the run's first figure comes
    # minutes earlier, before the build; a shared machine's bandwidth drifts): the scans are
    # compared with the higher of the two, and with the run's first figure too. And side by
    # side: the scans run in rounds of queries, each between two probes of the bandwidth
    # (the int64 read of 1 GiB, once), and each round's median rate is compared with the higher
    # probe beside it; a neighbour's load then slows the round and its probes alike.
    bw_detail: dict[str, list[float]] = {}
    bw_session = [membw_gbs(bw_detail)]
    probe = BandwidthProbe()
    full = np.ones(snap.n_docs, dtype=np.uint8)
    scan_t: list[float] = []
    full_shares: list[float] = []
    q8_bytes = sum(e.q8.nbytes for e in snap.segments if e.q8 is not None)
    n_full = min(50, queries, len(as_of)) if q8_bytes else 0
    for r0 in range(0, n_full, 10):
        before = probe.gbs()
        times = []
        for q in range(r0, min(n_full, r0 + 10)):
            prepared = Int8Query(qemb[q])
            t = time.perf_counter()
            heap = TopK(200)
            for e in snap.segments:
                if e.q8 is not None:
                    heap.n = prepared.scan(e.q8, e.q8_scale, e.q8_stats(), full, e.base, 200, heap.scores, heap.ids, heap.n, e.q8_order)
            times.append(time.perf_counter() - t)
        scan_t += times
        full_shares.append(q8_bytes / float(np.median(times)) / 1e9 / max(before, probe.gbs()))
    int8_full = (
        {**_ms(scan_t), "gbs": round(q8_bytes / float(np.median(scan_t)) / 1e9, 2), "vnni": has_vnni(), **side_by_side_shares(full_shares)}
        if scan_t else None
    )
    # The masked int8 scan alone with the workload's masks: the rows of each segment's copy
    # dated up to as_of (the span the leg reads), and the candidates among them.
    masked_t, span_rate, cand_rate, span_frac, span_shares = [], [], [], [], []
    n_masked = min(200, queries, len(as_of)) if q8_bytes else 0
    for r0 in range(0, n_masked, 20):
        before = probe.gbs()
        rates = []
        for q in range(r0, min(n_masked, r0 + 20)):
            opt = P.QueryOptions(k=10, as_of=(as_of[q] + 1) * DAY_US - 1)
            mask = P.candidate_mask(snap, opt)
            lo, hi = P.date_bounds(opt)
            spans = [(e, e.q8_span(lo, hi) or (0, len(e.q8))) for e in snap.segments if e.q8 is not None]
            prepared = Int8Query(qemb[q])
            keep = P.int8_keep(opt.depth, int(np.count_nonzero(mask)))  # as the leg keeps
            t = time.perf_counter()
            heap = TopK(keep)
            for e, span in spans:
                heap.n = prepared.scan(e.q8, e.q8_scale, e.q8_stats(), mask, e.base, keep, heap.scores, heap.ids, heap.n, e.q8_order, span)
            dt = time.perf_counter() - t
            span_rows = sum(b - a for _, (a, b) in spans)
            masked_t.append(dt)
            rates.append(span_rows * qemb.shape[1] / dt / 1e9)
            cand_rate.append(int(np.count_nonzero(mask)) * qemb.shape[1] / dt / 1e9)
            span_frac.append(span_rows / max(1, snap.n_docs))
        span_rate += rates
        span_shares.append(float(np.median(rates)) / max(before, probe.gbs()))
    bw_session.append(membw_gbs(bw_detail))
    int8_masked = (
        {
            **_ms(masked_t), "span_gbs": round(float(np.median(span_rate)), 2), "candidate_gbs": round(float(np.median(cand_rate)), 2),
            "span_frac_mean": round(float(np.mean(span_frac)), 3), **side_by_side_shares(span_shares),
        }
        if masked_t else None
    )
    del probe
    ann_report = None
    if getattr(snap, "ann", None):
        # The vector leg with the planner's choice (ANN or exact per range) against the exact
        # float32 scan, by candidate fraction; every query, not only the checked ones.
        exact_emb = np.asarray(w.emb[:n])
        per: dict[str, list] = {b[2]: [] for b in BUCKETS}
        times: dict[str, list] = {b[2]: [] for b in BUCKETS}
        used = 0
        for q in range(min(queries, len(as_of))):
            opt = P.QueryOptions(k=10, as_of=(as_of[q] + 1) * DAY_US - 1)
            mask = P.candidate_mask(snap, opt)
            info: dict = {}
            t = time.perf_counter()
            vec = P.vector_leg(snap, qemb[q], mask, opt, info)
            dt = time.perf_counter() - t
            used += "hnsw" in info.get("method", "")
            cand = mask.view(bool)
            frac = cand.sum() / n
            sc = exact_emb @ qemb[q]
            sc[~cand] = -np.inf
            truth = set(np.argsort(-sc, kind="stable")[: min(10, int(cand.sum()))].tolist())
            for lo, hi, name in BUCKETS:
                if lo <= frac < hi and truth:
                    per[name].append(len(truth & set(vec[:10].tolist())) / len(truth))
                    times[name].append(dt)
        ann_report = {
            "queries_using_ann": used,
            "recall10_by_candidate_fraction": {k: (round(float(np.mean(v)), 4), len(v)) for k, v in per.items() if v},
            "vector_p50_ms_by_candidate_fraction": {k: round(1e3 * float(np.median(v)), 3) for k, v in times.items() if v},
        }
    mask_ok = lex_ok = lex10_ok = 0
    recall = []
    corpus = _bm25_corpus(w, n) if kept else None  # once: at 1M its arrays are 1.5 GB
    for q, (mask, lex, vec, lex10) in enumerate(kept):
        want_mask = np.asarray(w.active[:n]) & (np.asarray(w.dates[:n]) <= w.as_of[q])
        mask_ok += bool(np.array_equal(mask.view(bool), want_mask))
        want_lex = _bm25_oracle(corpus, w.qtok[q], n, want_mask)
        lex_ok += lex.tolist() == want_lex
        lex10_ok += lex10.tolist() == want_lex
        sc = np.asarray(w.emb[:n]) @ qemb[q]
        sc[~want_mask] = -np.inf
        truth = set(np.argsort(-sc, kind="stable")[: min(10, int(want_mask.sum()))].tolist())
        if truth:  # as the peers count it: the share of the true top 10 (or of all candidates, when fewer)
            recall.append(len(truth & set(vec.tolist())) / len(truth))
    return {
        "open_s": round(float(np.median(opens)), 4),
        "import_s": round(import_s, 3),
        "resident_s": round(resident_s, 3),
        "resident_mb": round(store.stats()["resident_bytes"] / 1e6, 1),
        "mask": _ms(mask_t),
        "lexical": _ms(lex_t),
        "lexical_k10": _ms(lex10_t),
        "lexical_alone": _ms(alone_t),
        "vector": _ms(vec_t),
        "hybrid": _ms(all_t),
        "vector_float32_scan": _ms(f32_t),
        "int8_scan_all_rows": int8_full,
        "int8_masked_scan": int8_masked,
        "batch": {
            "queries": nb, "qps": round(nb / batch_s, 1), "qps_runs": [round(nb / x, 1) for x in batch_runs],
            "equal_to_single_queries": batch_check,
        },
        "vector_methods": methods,
        "kernels": _kernels(snap, kernel_path, batch_kernel_path),
        "checked_queries": min(check, queries),
        "masks_equal_workload": mask_ok,
        "lexical_top10_equal_numpy_oracle": lex_ok,
        "lexical_k10_equal_numpy_oracle": lex10_ok,
        "vector_recall10_vs_float32": round(float(np.mean(recall)), 4) if recall else None,
        "peak_rss_mb": round(hwm, 1),
        "membw_session_gbs": bw_session,
        "membw_session_by_method": bw_detail,
        "candidates_mean_frac": round(float(np.mean(w.cand_frac())), 3),
        "ann": ann_report,
    }


def _kernels(snap, kernel_path, batch_kernel_path) -> dict:
    """The int8 kernel paths the figures used, per segment kind: the single query's scan and
    ``query_batch``'s (``kernels.int8dot.kernel_path``; VNNI, AVX2 or the portable loop)."""
    segs = [e for e in snap.segments if e.q8 is not None]
    if not segs:
        return {"int8 scan": "none (no int8 copy)", "query_batch": "float32 matrix product"}
    return {
        "int8 scan": ", ".join(sorted({kernel_path(e.q8) for e in segs})),
        "query_batch": ", ".join(sorted({batch_kernel_path(e.q8, e.base) for e in segs})),
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--ray" or a.startswith("--ray=") for a in argv):  # embedding and bulk scoring on Ray: bench/distributed.py
        from .distributed import main as ray_main

        return ray_main(argv)
    p = argparse.ArgumentParser(prog="mempp bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, action="append", help="store sizes (repeatable; default 100000)")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--check", type=int, default=50, help="queries checked against the numpy oracles")
    p.add_argument("--dir", default=None, help="where to build stores (kept and reused); default a temporary directory")
    p.add_argument("--peers", default=None, help="the peers' benchmark folder (shared/bench/peers)")
    p.add_argument("--peer-python", default=sys.executable, help="python with the peers' packages installed")
    p.add_argument("--peer-tools", default="bm25s", help="comma-separated, of: " + ",".join(PEER_TOOLS) + " (numpy-exact before the ANN peers: it writes their truth)")
    p.add_argument("--json", default=None, help="write the report here as JSON")
    p.add_argument("--clustered", action="store_true", help="clustered embeddings (ANN recall is meaningless on isotropic ones)")
    p.add_argument("--ann", action="store_true", help="build the HNSW index after ingest and measure the planner with it")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="instead: embedding and bulk scoring on Ray against one process (bench/distributed.py; "
                   "`mempp bench --ray local --help` for its options)")
    p.add_argument("--session", default=None, help=argparse.SUPPRESS)  # internal: the fresh query process
    args = p.parse_args(argv)
    sizes = args.n or [100_000]
    if args.session:
        print(json.dumps(session(Path(args.session), sizes[0], args.queries, args.check, args.clustered)))
        return 0
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mempp-bench-"))
    bw_detail: dict[str, list[float]] = {}
    report: dict[str, Any] = {"membw_gbs": membw_gbs(bw_detail), "membw_by_method": bw_detail, "runs": []}
    try:
        for n in sizes:
            path = root / (f"n{n}" + ("-clustered" if args.clustered else "") + ("-ann" if args.ann else ""))
            if (path / "CURRENT").exists():
                built = json.loads(path.with_suffix(".build.json").read_text())
            else:
                shutil.rmtree(path, ignore_errors=True)
                built = build(n, path, clustered=args.clustered, ann=args.ann)
                path.with_suffix(".build.json").write_text(json.dumps(built))
            proc = subprocess.run(
                env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"},
                args=[sys.executable, "-m", "mempp.bench.speed", "--session", str(path), "--n", str(n), "--queries", str(args.queries), "--check", str(args.check)]
                + (["--clustered"] if args.clustered else []),
                capture_output=True, text=True,
            )
            if proc.returncode:
                raise SystemExit(f"query session failed:\n{proc.stderr[-3000:]}")
            sess = json.loads(proc.stdout.strip().splitlines()[-1])
            run: dict[str, Any] = {"n": n, "build": built, "session": sess}
            frac = sess["candidates_mean_frac"]
            # Bytes the int8 scan reads per query: candidates x 384 (plus the rescore, negligible).
            run["vector_gbs"] = round(frac * n * 384 / (sess["vector"]["p50_ms"] / 1e3) / 1e9, 2)
            if args.peers:
                peers = run_peers(Path(args.peers), args.peer_python, n, [t for t in args.peer_tools.split(",") if t])
                run["peers"] = peers
                ratios = {}
                bm = peer_p50(peers, "bm25s", "bm25", "filtered")
                tv = peer_p50(peers, "tantivy", "bm25", "filtered")
                for peer, peer_ms, legs in (("bm25s", bm, LEXICAL_ROWS), ("tantivy", tv, ("lexical", "lexical_alone"))):
                    for leg in legs if peer_ms else ():
                        ratios[f"{leg}_vs_{peer}"] = {"peer_ms": peer_ms, "speedup": round(peer_ms / sess[leg]["p50_ms"], 2)}
                run["ratios"] = ratios
            report["runs"].append(run)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
