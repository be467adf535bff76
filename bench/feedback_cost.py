"""What a query-time stage costs: one query's p50 / p95 and ``query_batch``'s queries per second,
with the stage on against off, side by side in one process (alternating), on the peers' speed
workload (``bench/workload.py``, embeddings supplied, 300 queries).

    OPENBLAS_NUM_THREADS=1 python -m mempp.bench.feedback_cost N STORE_DIR [OPTION=ON,OFF] [--threads L]

``OPTION=ON,OFF``: the option and its two values (default ``feedback=3,0``: feedback, the vector
leg's second scan; ``chain=2,0``: the chain stage; ``context=default,off``: thread context, the
default against none). A value is an integer, ``default`` (the option not passed) or ``off``
(an empty tuple). ``STORE_DIR`` is built on first use (``bench/workload.py``'s ``build``) and
reused after; ``--threads L`` builds it with each run of ``L`` consecutive documents in one
thread, as mail and chat stores are (a store built without threads stays without).
"""

import sys
import time
from pathlib import Path

import numpy as np

import mempp

from .workload import build
from .workload import load


def _option(name: str, value: str) -> dict:
    if value == "default":
        return {}
    return {name: () if value == "off" else int(value)}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    thread_size = 0
    if "--threads" in argv:
        at = argv.index("--threads")
        thread_size = int(argv[at + 1])
        del argv[at : at + 2]
    n = int(argv[0])
    path = Path(argv[1])
    name, _, values = (argv[2] if len(argv) > 2 else "feedback=3,0").partition("=")
    on, off = values.split(",")
    kwargs = {v: _option(name, v) for v in (on, off)}
    if not (path / "CURRENT").exists():
        build(n, path, progress=False, thread_size=thread_size)
    w = load(n)
    qemb = np.array(w.qemb, dtype=np.float32)
    qtexts = [w.query_text(q) for q in range(len(w.as_of))]
    days = [str(np.datetime64(int(a), "D")) for a in np.asarray(w.as_of)[:300]]
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384)) as s:
        s.make_resident()
        for v in (on, off):
            s.query_batch(qtexts[:64], qemb[:64], k=10, as_of=days[:64], **kwargs[v])
        single: dict[int, list[float]] = {on: [], off: []}
        for q in range(300):
            for v in ((on, off) if q % 2 else (off, on)):
                t = time.perf_counter()
                s.query(qtexts[q], embedding=qemb[q], as_of=days[q], k=10, **kwargs[v])
                single[v].append(time.perf_counter() - t)
        batch: dict[int, list[float]] = {on: [], off: []}
        for r in range(3):
            for v in ((on, off) if r % 2 else (off, on)):
                t = time.perf_counter()
                s.query_batch(qtexts[:300], qemb[:300], k=10, as_of=days, **kwargs[v])
                batch[v].append(time.perf_counter() - t)
        from mempp.kernels.int8dot import batch_kernel_path, kernel_path

        segs = [e for e in s.searcher().snapshot.segments if e.q8 is not None]
        single_k = ", ".join(sorted({kernel_path(e.q8) for e in segs})) or kernel_path()
        batch_k = ", ".join(sorted({batch_kernel_path(e.q8, e.base) for e in segs})) or batch_kernel_path()
        print(f"int8 scan: {single_k}; query_batch: {batch_k}")
        for v in (on, off):
            print(f"{name}={v}: single query p50 {1e3*np.median(single[v]):.2f} ms p95 {1e3*np.percentile(single[v],95):.2f} ms; query_batch {300/np.median(batch[v]):.0f} q/s")
        print(f"{name}={on} against {off}: single query p50 x{np.median(single[on]) / np.median(single[off]):.3f}, "
              f"query_batch time x{np.median(batch[on]) / np.median(batch[off]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
