"""The engine over every path it has, to record the kernel signatures ``mempp warmup`` and the
build compile ahead of first use (``kernels/precompile.py``, ``kernels/signatures.txt``).

    python -m mempp.bench.warmup --record      # rewrite kernels/signatures.txt from a run of exercise()
                                               # (added to the lines listed: each CPU reaches its own int8 kernels;
                                               # run it with an empty NUMBA_CACHE_DIR, or a kernel that another
                                               # loads from the cache is not seen)
    python -m mempp.bench.warmup               # compile every listed signature (what `mempp warmup` does)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import mempp
from mempp.kernels import precompile


def exercise(root: Path) -> None:
    """Adds (small, big, windows, supersessions), queries (exact int8 and dense vector paths, thread
    context on and off, filters, as_of, the tag leg), bulk scoring, merges, an ANN index, time travel."""
    words = "budget review outage vendor contract policy hiring audit launch migration".split()
    rng = np.random.default_rng(0)

    def docs(n: int, prefix: str, threads: bool) -> list[dict]:
        out = []
        for i in range(n):
            d = {"id": f"{prefix}{i}", "text": " ".join(rng.choice(words, 8)) + f" item{i} " + "long " * (i % 3) * 60,
                 "author": ["Ann Lee", "Ben Ortiz", None][i % 3], "date": f"2024-{1 + i % 12:02d}-{1 + i % 27:02d}"}
            if threads:
                d["thread"] = f"t{i % 50}"
                d["channel"] = ["email", "chat"][i % 2]
            out.append(d)
        return out

    for threads, stride in ((True, 100), (False, None)):
        path = root / f"s{int(threads)}"
        index = mempp.IndexConfig(window_stride=stride)
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=64), index=index, merge="manual") as s:
            s.add(docs(2500, "big", threads))
            s.add(docs(40, "small", threads))
            s.add([{"id": "big1", "text": "a revised note", "date": "2024-05-01", "author": "Ann Lee"}])
            for i in range(3):
                s.add([{"text": f"single note {i} on the budget"}])
            s.add([{"text": "Café menu: crème brûlée — 5 € (über-budget) 😀 预算", "author": "Zoë Núñez"}])  # not ASCII
            s.query("café budget Zoë", k=5)
            s.supersede("big2", "big3", backdate=True)
            for kw in ({}, {"as_of": "2024-06-30"}, {"context": ()}, {"authors": ["Ann Lee"], "channels": ["email"]},
                       {"date_from": "2024-02-01", "date_to": "2024-08-01"}, {"legs": ["lexical"]}, {"reserve": False}):
                s.query("budget review Ann", k=10, **kw)
                s.query("", k=5, **kw)
            s.query_batch(["budget", "vendor contract", "audit"], k=5, as_of=[None, "2024-03-01", None])
            s.merge(force=True)
            s.query("budget review", k=10)
            s.build_ann(min_docs=1)
            for mode in ("ann", "auto", "exact"):
                s.query("budget review", k=10, vector_index=mode)
            s.add(docs(10, "late", threads))
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=64), version=2) as old:
            old.query("budget review", k=5, as_of="2024-06-30")
    # The models' width (384: bge-small, MiniLM), which the CPU-specific int8 kernels take (VNNI
    # needs rows of a multiple of 128 bytes; AVX2 any): the README's example, a dated query,
    # bulk scoring, as a first-time user's calls reach them.
    with mempp.Store.open(root / "s384", embedder=mempp.HashEmbedder(dim=384)) as s:
        s.add(docs(600, "w", False))
        s.add([{"id": "sla-1", "text": "Uptime SLA: 99.9%.", "author": "Aisha Patel", "date": "2023-01-10"},
               {"id": "sla-2", "text": "SLA raised to 99.95%.", "author": "Ben Ortiz", "date": "2023-06-01", "supersedes": "sla-1"}])
        for kw in ({}, {"as_of": "2023-03-01"}, {"feedback": 0}):
            s.query("what is the uptime SLA?", k=10, **kw)
        s.query_batch(["budget", "vendor contract", "audit", "uptime"], k=5, as_of=[None, "2024-03-01", None, "2023-03-01"])
    with mempp.Store.open(root / "s384", embedder=mempp.HashEmbedder(dim=384), read_only=True) as s:
        s.query("budget review", k=10, as_of="2024-06-30")
        s.query_batch(["budget", "vendor contract"], k=5)
    # Threads without windows (chats, mail, the demo's data): thread context's int8 first scores.
    with mempp.Store.open(root / "s384t", embedder=mempp.HashEmbedder(dim=384)) as s:
        s.add(docs(300, "t", True))
        for kw in ({}, {"as_of": "2024-06-30"}, {"feedback": 0}):
            s.query("budget review Ann", k=10, **kw)
        s.query_batch(["budget", "vendor contract"], k=5, as_of=[None, "2024-03-01"])
    with mempp.Store.open(root / "s384t", embedder=mempp.HashEmbedder(dim=384), read_only=True) as s:
        s.query("budget review", k=10)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="run the engine and rewrite kernels/signatures.txt")
    args = ap.parse_args(argv)
    if not args.record:
        got = precompile.compile_all(verbose=True)
        print(f"{got['compiled']} signatures in {got['seconds']} s")
        return
    with tempfile.TemporaryDirectory() as tmp:
        exercise(Path(tmp))
    import mempp.kernels as K

    rows = precompile.merged(precompile.recorded(K))
    header = "# module\tfunction\targument types: the kernels' entry points as the engine calls them (python -m mempp.bench.warmup --record)\n"
    precompile.SIGNATURES.write_text(header + "".join("\t".join(r) + "\n" for r in rows))
    print(f"{len(rows)} signatures written to {precompile.SIGNATURES}")


if __name__ == "__main__":
    main()
