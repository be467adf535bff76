"""Where one default query's time goes, stage by stage, inside a running query.

    OPENBLAS_NUM_THREADS=1 python -m mempp.bench.stages N DIR [--queries 200]

Opens the store of the peers' workload at ``DIR/n<N>`` (built on first use: ``workload.build``),
answers ``--queries`` questions once to warm every cache, then answers them again with a timer
around each stage function of the read path (the planner's legs and stages, the vector leg's
parts, the chain stage's parts) and prints each one's time per query, beside the whole query's.

Each stage is timed where it runs, after the scans have passed over the int8 copy: Python that
follows a 38 MB scan finds its objects out of cache, and takes 2 to 3 times what the same call takes
in a loop of its own. A timed call costs about a microsecond more than an untimed one. The stages
nest (the vector leg holds its rescore, the thread stage holds the chain stage), so the column does
not add up to the total.

Never imports: mempp.engine internals beyond the stage functions it times (by module attribute).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

# (module of mempp, the name that module calls the stage by): the caller's name is the one wrapped,
# so a stage is timed wherever that module calls it.
STAGES: tuple[tuple[str, str], ...] = (
    ("planner", "candidate_mask"), ("planner", "lexical_leg"), ("planner", "tag_order"), ("planner", "vector_leg"),
    ("planner", "feedback_query"), ("planner", "fuse"), ("planner", "fused_order"), ("planner", "choose"),
    ("vector", "Int8Query"), ("vector", "rescore_best_first"),
    ("threads", "chain_lift"), ("threads", "lexical_matches"), ("threads", "select_ranked"),
    ("chain", "lexical_doc_scores"), ("chain", "term_dfs"), ("chain", "doc_terms"), ("chain", "_excluded"),
)


def timed(totals: dict[str, float], label: str, fn: Callable) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - t
    return call


def measure(n: int, root: Path, queries: int) -> tuple[float, dict[str, float]]:
    """The query's mean time and each stage's total, both per query (seconds)."""
    import importlib

    import mempp

    from .workload import build, load

    path = root / f"n{n}"
    if not path.exists():
        build(n, path)
    store = mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder(dim=384))
    store.make_resident()
    w = load(n)
    q = min(queries, len(w.as_of))
    vecs = np.asarray(w.qemb[:q], dtype=np.float32)
    texts = [w.query_text(i) for i in range(q)]
    days = [str(np.datetime64(int(a), "D")) for a in np.asarray(w.as_of)[:q]]

    def run() -> float:
        t = time.perf_counter()
        for i in range(q):
            store.query(texts[i], embedding=vecs[i], as_of=days[i], k=10)
        return time.perf_counter() - t

    run()  # warm: kernels, caches, the chain stage's terms of each hit
    untimed = run()
    totals: dict[str, float] = defaultdict(float)
    saved = []
    for module, name in STAGES:
        mod = importlib.import_module(f"mempp.{module}")
        saved.append((mod, name, getattr(mod, name)))
        setattr(mod, name, timed(totals, f"{module}.{name}", getattr(mod, name)))
    try:
        run()
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
    store.close()
    return untimed / q, {k: v / q for k, v in totals.items()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.stages", description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int, help="documents of the workload")
    p.add_argument("dir", help="where the store of the workload is (built on first use)")
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args(argv)
    per_query, stages = measure(args.n, Path(args.dir), args.queries)
    print(f"{args.n:,} documents, every default, embedding supplied: {1e3 * per_query:.3f} ms a query (untimed run)\n")
    print("| stage (module.name as its caller calls it) | µs per query |\n|---|---|")
    for label, t in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"| `{label}` | {1e6 * t:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
