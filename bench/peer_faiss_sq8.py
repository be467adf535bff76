"""A peer the shared peer scripts lack: FAISS ``IndexScalarQuantizer`` (8 bits a dimension, inner
product), exact over its codes, with the workload's candidate filter (``IDSelectorBitmap``), timed
as ``bench_ann.py`` times FAISS's flat index. Run with the peers' Python (faiss installed), not
mempp's; it reads the peers' workload and truth through their own modules:

    PEERS=shared/bench/peers /path/to/peers/python bench/peer_faiss_sq8.py N [--nq 1000]

Records one JSON line (``bench="ann"``, ``tool="faiss-sq8"``) per variant to ``$PERF_RESULTS``,
as the peers' scripts do. Imports nothing of mempp.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    sys.path.insert(0, os.environ.get("PEERS", "shared/bench/peers"))
    import faiss
    import numpy as np
    from common import by_bucket, record, recall_at_k, rss_mb, summarize, time_per_query  # the peers' helpers
    from workload import DATA_DIR, K, load

    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--nq", type=int, default=1000)
    a = ap.parse_args()
    w = load(a.n)
    n = w.n
    truth = np.load(os.path.join(DATA_DIR, f"n{n}", "truth_filtered.npy"), allow_pickle=False)
    nq = min(a.nq, len(truth))
    truth_f = [r[r >= 0] for r in truth[:nq]]
    frac = w.cand_frac()[:nq]
    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    idx = faiss.IndexScalarQuantizer(w.emb.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    idx.train(np.ascontiguousarray(w.emb[: min(n, 100_000)]))
    idx.add(np.ascontiguousarray(w.emb))
    build = time.perf_counter() - t
    faiss.omp_set_num_threads(1)

    def search(q: int):
        bits = np.packbits(w.active & (w.dates <= w.as_of[q]), bitorder="little")
        params = faiss.SearchParameters()
        params.sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
        _, ids = idx.search(w.qemb[q : q + 1], K, params=params)
        return ids[0][ids[0] >= 0]

    lat, res, wall = time_per_query(search, nq)
    per = [len(set(map(int, g[:K])) & set(map(int, t))) / len(t) if len(t) else np.nan for g, t in zip(res, truth_f)]
    record(
        bench="ann", n=n, tool="faiss-sq8", variant="IndexScalarQuantizer QT_8bit filter=IDSelectorBitmap (per-query mask+packbits incl.)",
        **summarize(lat, wall, nq), recall10=round(recall_at_k(res, truth_f), 4), recall_by_cand_frac=by_bucket(frac, per),
        build_s=round(build, 1), build_threads=2, rss_after_build_mb=round(rss_mb(), 1), version=faiss.__version__, nq=nq,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
