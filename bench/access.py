"""What permissions cost: a query as a principal against the same query as ``mempp.ADMIN`` (every
document: what an unrestricted store of the same documents answers with the same index), and
permission changes per second.

    python -m mempp.bench.access N DIR [--queries Q] [--users U] [--groups G] [--restricted F]

The store is the speed workload's first N documents (``bench/workload.py``, embeddings supplied),
a fraction F (default 0.2) of them readable by one random group each; G groups (default 1,000),
U users (default 10,000), each in 1 to 10 random groups (one ``add_members`` per group). Built
once in ``DIR`` and reused. Then, side by side in one process, each query alternating the two:

- ``admin``: the query as ``mempp.ADMIN``;
- ``principal, warm``: as one user whose view of the version is built already (the same user asks
  again: a service's steady state);
- ``principal, first``: as a user asking for the first time in this version (the view is built:
  its readable mask, validity, mean length and thread links);

the medians of ``add_members`` (one user to one group) and ``set_readers`` (one document)
commits per second, and the time of one ``erase`` (a document no run erased yet: every file that
holds it rewritten, the old ones removed). Prints a JSON line and a table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np

import mempp

from .workload import build as build_workload
from .workload import load


def prepare(n: int, path: Path, users: int, groups: int, restricted: float) -> None:
    """The workload store at ``path`` with its readers and memberships (skipped when built already)."""
    done = path / "access.json"
    if done.exists():
        return
    build_workload(n, path, progress=True)
    rng = random.Random(0)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=384)) as s:
        ids = rng.sample(range(n), int(n * restricted))
        t = time.perf_counter()
        by_group: dict[str, list[int]] = {}
        for d in ids:
            by_group.setdefault(f"group:g{rng.randrange(groups)}", []).append(d)
        # one reader change per restricted document would be one commit each: set them per doc id in
        # commits of many events (the log takes any number of events per commit)
        w = s.writer
        with w.turn():
            w.check_writable()
            w.begin_write()
            access = w.access()
            w.commit_access(access, [{"op": "readers", "doc_id": d, "principals": [g]} for g, docs in by_group.items() for d in docs])
        readers_s = time.perf_counter() - t
        members: dict[str, list[str]] = {}
        for u in range(users):
            for g in rng.sample(range(groups), rng.randint(1, 10)):
                members.setdefault(f"group:g{g}", []).append(f"user:u{u}")
        t = time.perf_counter()
        for g, ms in members.items():
            s.add_members(g, ms)
        members_s = time.perf_counter() - t
    done.write_text(json.dumps({"n": n, "restricted": len(ids), "groups": groups, "users": users,
                                "readers_commit_s": round(readers_s, 3), "membership_commits_s": round(members_s, 3)}))


def run(n: int, path: Path, queries: int, users: int) -> dict:
    w = load(n)
    days = np.datetime_as_string(np.asarray(w.as_of).astype("datetime64[D]"))
    rng = random.Random(1)
    out: dict = {"n": n, **json.loads((path / "access.json").read_text())}
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=384), read_only=True) as s:
        warm_user = "user:u0"
        s.query(w.query_text(0), embedding=w.qemb[0], as_of=str(days[0]), principal=warm_user)
        s.query(w.query_text(0), embedding=w.qemb[0], as_of=str(days[0]), principal=mempp.ADMIN)
        times: dict[str, list[float]] = {"admin": [], "principal, warm": [], "principal, first": []}
        readable = []
        for q in range(queries):
            kw = {"embedding": w.qemb[q % len(w.qemb)], "as_of": str(days[q % len(days)])}
            text = w.query_text(q % len(w.qemb))
            for name, who in (("admin", mempp.ADMIN), ("principal, warm", warm_user), ("principal, first", f"user:u{rng.randrange(1, users)}")):
                t = time.perf_counter()
                s.query(text, principal=who, **kw)
                times[name].append((time.perf_counter() - t) * 1e3)
            readable.append(int(s.searcher().reader(warm_user).size))
        out["p50_ms"] = {k: round(statistics.median(v), 3) for k, v in times.items()}
        out["ratio_warm"] = round(out["p50_ms"]["principal, warm"] / out["p50_ms"]["admin"], 2)
        out["ratio_first"] = round(out["p50_ms"]["principal, first"] / out["p50_ms"]["admin"], 2)
        out["warm_user_reads"] = readable[0]
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=384)) as s:
        changes = {"add_members": [], "set_readers": []}
        run_id = time.time_ns()  # new names each run: every call is a change, so a commit
        for i in range(20):
            t = time.perf_counter()
            s.add_members(f"group:g{i}", [f"user:bench{run_id}-{i}"])
            changes["add_members"].append(time.perf_counter() - t)
            t = time.perf_counter()
            s.set_readers(i, [f"group:g{i}", f"user:bench{run_id}-{i}"])
            changes["set_readers"].append(time.perf_counter() - t)
        out["changes_per_s"] = {k: round(1 / statistics.median(v), 1) for k, v in changes.items()}
        # one erasure: a document not erased yet (each run erases another), every file holding it rewritten
        erased = set(s.searcher().snapshot.erased.tolist())
        doc = next(d for d in random.Random(run_id).sample(range(n), 50) if d not in erased)
        t = time.perf_counter()
        got = s.erase(doc, reason="bench")
        out["erase_s"] = round(time.perf_counter() - t, 3)
        out["erase_files"] = len(got["files_removed"])
        out["erase_bytes_rewritten"] = sum((path / f).stat().st_size for u in s.searcher().snapshot.state.units
                                           for f in (r.name for r in u.files.values()) if f".e{got['version']:08d}." in f)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.access", description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int)
    p.add_argument("dir", type=Path)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--groups", type=int, default=1_000)
    p.add_argument("--restricted", type=float, default=0.2)
    a = p.parse_args(argv)
    prepare(a.n, a.dir, a.users, a.groups, a.restricted)
    got = run(a.n, a.dir, a.queries, a.users)
    print(json.dumps(got))
    print("| documents | restricted | query p50 admin | as a principal (warm) | (first in the version) | add_members/s | set_readers/s | erase one document |")
    print("|---|---|---|---|---|---|---|---|")
    m = got["p50_ms"]
    print(f"| {got['n']:,} | {got['restricted']:,} | {m['admin']} ms | {m['principal, warm']} ms ({got['ratio_warm']}x) | "
          f"{m['principal, first']} ms ({got['ratio_first']}x) | {got['changes_per_s']['add_members']} | {got['changes_per_s']['set_readers']} | "
          f"{got['erase_s']} s ({got['erase_files']} files, {got['erase_bytes_rewritten'] / 1e6:.0f} MB rewritten) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
