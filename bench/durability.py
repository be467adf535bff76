"""What durability costs: open time with and without checksum verification, and commit latency.

    python -m mempp.bench.durability --docs 100000 --dim 384 --dir /tmp/mempp-dur
    python -m mempp.bench.durability --commits 50 --batch 10

Open time is measured with a warm page cache (the store was just written); each figure is the
median of ``--repeat`` opens. Commit latency is the wall time of ``Store.add`` for a small batch
(each add is one commit: files fsynced, manifest, CURRENT and directories fsynced).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import mempp
from mempp.storage import Snapshot, read_current

WORDS = [f"w{i}" for i in range(5000)]


def build(path: Path, n: int, dim: int, per_commit: int = 10000) -> None:
    rng = np.random.default_rng(0)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim)) as s:
        for start in range(0, n, per_commit):
            m = min(per_commit, n - start)
            words = rng.integers(0, len(WORDS), size=(m, 30))
            docs = [
                {"id": f"d{start + i}", "text": " ".join(WORDS[w] for w in words[i]), "author": f"a{i % 50}",
                 "date": f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}"}
                for i in range(m)
            ]
            emb = rng.standard_normal((m, dim)).astype(np.float32)
            emb /= np.linalg.norm(emb, axis=1, keepdims=True)
            s.add(docs, emb)


def open_times(path: Path, repeat: int) -> dict[str, float]:
    out = {}
    manifest = read_current(path)
    for verify in (False, True):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            Snapshot(path, manifest, verify=verify)
            times.append(time.perf_counter() - t)
        out["verified" if verify else "sizes only"] = statistics.median(times)
    return out


def commit_latency(commits: int, batch: int) -> float:
    d = Path(tempfile.mkdtemp(prefix="mempp-commit-"))
    try:
        times = []
        with mempp.Store.open(d / "s", embedder=mempp.HashEmbedder()) as s:
            for c in range(commits):
                docs = [{"id": f"c{c}-{i}", "text": f"note {c} {i} on the uptime SLA", "author": "Ann"} for i in range(batch)]
                t = time.perf_counter()
                s.add(docs)
                times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        shutil.rmtree(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=0)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--commits", type=int, default=0)
    ap.add_argument("--batch", type=int, default=10)
    args = ap.parse_args()
    if args.docs:
        path = args.dir or Path(tempfile.mkdtemp(prefix="mempp-open-")) / "s"
        if not (path / "CURRENT").exists():
            t = time.perf_counter()
            build(path, args.docs, args.dim)
            print(f"built {args.docs} docs in {time.perf_counter() - t:.1f} s")
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        for k, v in open_times(path, args.repeat).items():
            print(f"open {args.docs} docs ({size / 1e6:.0f} MB), {k}: {v * 1e3:.0f} ms (median of {args.repeat})")
    if args.commits:
        p50 = commit_latency(args.commits, args.batch)
        print(f"commit latency, {args.batch}-document batch: p50 {p50 * 1e3:.1f} ms over {args.commits} commits")


if __name__ == "__main__":
    main()
