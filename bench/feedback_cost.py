"""What feedback costs (``mempp.feedback``): one query's p50 / p95 and ``query_batch``'s queries per
second, ``feedback=3`` (the default) against ``feedback=0``, side by side in one process, on the
peers' speed workload (``bench/workload.py``, embeddings supplied, 300 queries).

    OPENBLAS_NUM_THREADS=1 python -m mempp.bench.feedback_cost N STORE_DIR

``STORE_DIR`` is built on first use (``bench/workload.py``'s ``build``) and reused after.
"""

import sys
import time
from pathlib import Path

import numpy as np

import mempp

from .workload import build
from .workload import load

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0])
    path = Path(argv[1])
    if not (path / "CURRENT").exists():
        build(n, path, progress=False)
    w = load(n)
    qemb = np.array(w.qemb, dtype=np.float32)
    qtexts = [w.query_text(q) for q in range(len(w.as_of))]
    days = [str(np.datetime64(int(a), "D")) for a in np.asarray(w.as_of)[:300]]
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384)) as s:
        s.make_resident()
        for fb in (3, 0):
            s.query_batch(qtexts[:64], qemb[:64], k=10, as_of=days[:64], feedback=fb)
        single = {3: [], 0: []}
        for q in range(300):
            for fb in ((3, 0) if q % 2 else (0, 3)):
                t = time.perf_counter()
                s.query(qtexts[q], embedding=qemb[q], as_of=days[q], k=10, feedback=fb)
                single[fb].append(time.perf_counter() - t)
        batch = {3: [], 0: []}
        for r in range(3):
            for fb in ((3, 0) if r % 2 else (0, 3)):
                t = time.perf_counter()
                s.query_batch(qtexts[:300], qemb[:300], k=10, as_of=days, feedback=fb)
                batch[fb].append(time.perf_counter() - t)
        from mempp.kernels.int8dot import batch_kernel_path, kernel_path

        segs = [e for e in s.searcher().snapshot.segments if e.q8 is not None]
        single_k = ", ".join(sorted({kernel_path(e.q8) for e in segs})) or kernel_path()
        batch_k = ", ".join(sorted({batch_kernel_path(e.q8, e.base) for e in segs})) or batch_kernel_path()
        print(f"int8 scan: {single_k}; query_batch: {batch_k}")
        for fb in (3, 0):
            print(f"feedback={fb}: single query p50 {1e3*np.median(single[fb]):.2f} ms p95 {1e3*np.percentile(single[fb],95):.2f} ms; query_batch {300/np.median(batch[fb]):.0f} q/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
