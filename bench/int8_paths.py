"""The int8 kernel paths side by side in one process: this CPU's fastest (VNNI or AVX2) against the
portable loop forced, on the peers' speed workload (``bench/workload.py``, embeddings supplied,
300 queries), for one query (``feedback`` 3 and 0) and ``query_batch``; each query alternates the
paths, each batch run too, so a neighbour's load falls on both. Wall and CPU time (this thread's:
on a shared machine the wall clock also counts the time other processes held the core).
Also a float32 matrix-vector product over the store's embeddings: one pass over memory, the yardstick.

    OPENBLAS_NUM_THREADS=1 python -m mempp.bench.int8_paths N STORE_DIR [QUERIES]

``STORE_DIR`` is built on first use (``bench/workload.py``'s ``build``) and reused after.
"""

import contextlib
import sys
import time
from pathlib import Path

import numpy as np

import mempp
from mempp.kernels import int8batch, int8scan
from mempp.kernels.int8dot import batch_kernel_path, kernel_path

from .workload import build, load


@contextlib.contextmanager
def portable():
    """The portable kernels, as on a CPU without VNNI or AVX2 (what ``MEMPP_VNNI=0 MEMPP_AVX2=0`` give)."""
    saved = (int8scan.avx2_ok, int8batch.avx2_ok, int8scan.vnni_ok, int8batch.vnni_ok, int8batch.HAS_VNNI512)
    int8scan.avx2_ok = int8batch.avx2_ok = int8scan.vnni_ok = int8batch.vnni_ok = lambda q8: False
    int8batch.HAS_VNNI512 = False
    try:
        yield
    finally:
        int8scan.avx2_ok, int8batch.avx2_ok, int8scan.vnni_ok, int8batch.vnni_ok, int8batch.HAS_VNNI512 = saved


def _timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - w, time.thread_time() - c


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0])
    path = Path(argv[1])
    nq = int(argv[2]) if len(argv) > 2 else 300
    if not (path / "CURRENT").exists():
        build(n, path, progress=False)
    w = load(n)
    qemb = np.array(w.qemb, dtype=np.float32)
    qtexts = [w.query_text(q) for q in range(len(w.as_of))]
    days = [str(np.datetime64(int(a), "D")) for a in np.asarray(w.as_of)[:nq]]
    paths = {"fast": contextlib.nullcontext, "portable": portable}
    with mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384)) as s:
        s.make_resident()
        segs = [e for e in s.searcher().snapshot.segments if e.q8 is not None]
        print(f"fast: int8 scan {', '.join(sorted({kernel_path(e.q8) for e in segs}))}; "
              f"query_batch {', '.join(sorted({batch_kernel_path(e.q8, e.base) for e in segs}))}")
        emb = [e.segment.embeddings for e in s.searcher().snapshot.segments]
        for name, ctx in paths.items():  # warm (and compile) both
            with ctx():
                for fb in (3, 0):
                    s.query_batch(qtexts[:16], qemb[:16], k=10, as_of=days[:16], feedback=fb)
                    s.query(qtexts[0], embedding=qemb[0], as_of=days[0], k=10, feedback=fb)
        same = 0
        single = {(p, fb): ([], []) for p in paths for fb in (3, 0)}
        for q in range(nq):
            for p in (("fast", "portable") if q % 2 else ("portable", "fast")):
                with paths[p]():
                    for fb in (3, 0):
                        got = []
                        wt, ct = _timed(lambda: got.append(s.query(qtexts[q], embedding=qemb[q], as_of=days[q], k=10, feedback=fb)))
                        single[(p, fb)][0].append(wt)
                        single[(p, fb)][1].append(ct)
                        if p == "fast" and fb == 3:
                            fast_ids = [h.doc_id for h in got[0]]
                        if p == "portable" and fb == 3:
                            port_ids = [h.doc_id for h in got[0]]
            same += fast_ids == port_ids
        batch = {(p, fb): ([], []) for p in paths for fb in (3, 0)}
        for r in range(3):
            for p in (("fast", "portable") if r % 2 else ("portable", "fast")):
                with paths[p]():
                    for fb in (3, 0):
                        wt, ct = _timed(lambda: s.query_batch(qtexts[:nq], qemb[:nq], k=10, as_of=days, feedback=fb))
                        batch[(p, fb)][0].append(wt)
                        batch[(p, fb)][1].append(ct)
        mv = []
        for r in range(5):
            mv.append(_timed(lambda: [e @ qemb[r] for e in emb]))
        print(f"float32 matrix-vector product over the {n:,} embeddings: {1e3 * np.median([x[0] for x in mv]):.2f} ms wall, "
              f"{1e3 * np.median([x[1] for x in mv]):.2f} ms CPU")
        for fb in (3, 0):
            for p in paths:
                sw, sc = single[(p, fb)]
                bw, bc = batch[(p, fb)]
                print(f"{p:8s} feedback={fb}: single query p50 {1e3 * np.median(sw):.2f} ms wall / {1e3 * np.median(sc):.2f} ms CPU; "
                      f"query_batch {nq / np.median(bw):.0f} q/s wall / {nq / np.median(bc):.0f} q/s CPU")
            print(f"  fast / portable, feedback={fb}: single p50 CPU {np.median(single[('portable', fb)][1]) / np.median(single[('fast', fb)][1]):.2f}x faster; "
                  f"query_batch CPU {np.median(batch[('portable', fb)][1]) / np.median(batch[('fast', fb)][1]):.2f}x")
        print(f"answers identical (feedback=3, top 10 ids): {same}/{nq}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
