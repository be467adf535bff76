"""Ingest rate and open time of two installs of mempp, side by side in one run.

    python -m mempp.bench.side_by_side --python A=/path/to/venv-a/bin/python --python B=/path/to/venv-b/bin/python \\
        --n 1000000 --rounds 3 --dir /tmp/sbs [--json out.json]

For comparing a change across versions of the code (a new checksum, a new file format) on this
shared machine, where figures move by 10 to 30% with the hour: each round builds the store of the
peers' workload (``mempp.bench.workload``, embeddings supplied; ``build`` of
each install: the same documents, the same batches) with A, then with B, each in a fresh process,
then opens each store three times in fresh processes (every file checksummed) and asks one query.
``fresh_memory_gbs`` (how fast the build's process filled memory it had not touched, where the
install reports it) is printed beside each build: on a virtual machine whose host backs memory on
demand it moves the ingest rate more than any change of the code does.
The order alternates per round (A B, B A, ...). Reported: per install the median over rounds of
the ingest rate and of the open time (each round's open: the median of its three), and B / A.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

BUILD = """
import json, sys
from pathlib import Path
try:
    from mempp.bench.workload import build
except ImportError:  # an install from before build moved from bench/speed.py to bench/workload.py
    from mempp.bench.speed import build
print(json.dumps(build(int(sys.argv[1]), Path(sys.argv[2]), progress=False)))
"""

OPEN = """
import json, sys, time
import numpy as np
import mempp
t = time.perf_counter()
s = mempp.Store.open(sys.argv[1], read_only=True)
opened = time.perf_counter() - t
q = np.zeros(s.dim, dtype=np.float32); q[0] = 1.0
t = time.perf_counter()
s.query("budget review", embedding=q, k=10)
print(json.dumps({"open_s": opened, "first_query_s": time.perf_counter() - t, "n_docs": s.stats()["documents"]}))
"""


def child(python: str, code: str, *args: str) -> dict:
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{python}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.side_by_side", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", action="append", required=True, help="NAME=PATH of a python with mempp installed (two)")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default="/tmp/mempp-side-by-side")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    installs = [tuple(x.split("=", 1)) for x in args.python]
    if len(installs) != 2:
        p.error("give --python twice: NAME=PATH")
    root = Path(args.dir)
    # the workload, generated once (cached), outside the timing
    child(installs[0][1], "import sys; from mempp.bench.workload import load; load(int(sys.argv[1])); print('{}')", str(args.n))
    results: dict[str, dict[str, list[float]]] = {name: {"ingest_docs_per_s": [], "fresh_memory_gbs": [], "open_s": [], "first_query_s": []} for name, _ in installs}
    for r in range(args.rounds):
        order = installs if r % 2 == 0 else installs[::-1]
        for name, python in order:
            path = root / f"{name}"
            shutil.rmtree(path, ignore_errors=True)
            built = child(python, BUILD, str(args.n), str(path))
            opens = [child(python, OPEN, str(path)) for _ in range(3)]
            results[name]["ingest_docs_per_s"].append(built["ingest_docs_per_s"])
            results[name]["fresh_memory_gbs"].append(built.get("fresh_memory_gbs", float("nan")))
            results[name]["open_s"].append(float(np.median([o["open_s"] for o in opens])))
            results[name]["first_query_s"].append(float(np.median([o["first_query_s"] for o in opens])))
            print(json.dumps({"round": r, "install": name, "ingest_docs_per_s": built["ingest_docs_per_s"],
                              "fresh_memory_gbs": built.get("fresh_memory_gbs"), "open_s": round(results[name]["open_s"][-1], 3), "first_query_s": round(results[name]["first_query_s"][-1], 3)}), flush=True)
            shutil.rmtree(path, ignore_errors=True)
    (a, _), (b, _) = installs
    report = {name: {k: round(float(np.median(v)), 4) for k, v in res.items()} for name, res in results.items()}
    report["ratio_b_over_a"] = {k: round(report[b][k] / report[a][k], 3) for k in report[a]}
    report["n"] = args.n
    report["rounds"] = args.rounds
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
