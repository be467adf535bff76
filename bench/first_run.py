"""What a new user's first hour costs: install, the first and second ``mempp demo``, and a later
process's first query, each from an empty kernel cache where it says so.

    python -m mempp.bench.first_run --repo . [--cold] [--json out.json]

1. A fresh virtual environment; ``pip install REPO`` (the README's first line), timed. The build
   compiles the kernels ahead (setup.py); ``--cold`` also installs a second copy with
   ``MEMPP_NO_PRECOMPILE=1`` to show what the first demo costs without that.
2. ``mempp demo`` with an empty cache directory (``XDG_CACHE_HOME`` new), then again.
3. A fresh process opens a store of the demo's documents and answers one question: the time of
   ``Store.open`` + loading the embedder + the query (imports apart), with the cache warm.
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

FIRST_QUERY = """
import json, sys, time
t0 = time.perf_counter()
import mempp
t1 = time.perf_counter()
s = mempp.Store.open(sys.argv[1], read_only=True)
t2 = time.perf_counter()
s.embedder.embed_queries(["warm"]) if hasattr(s.embedder, "embed_queries") else s.embedder.embed(["warm"])
t3 = time.perf_counter()
hits = s.query("What is the daily per-diem for domestic business travel?", k=5)
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "embedder_s": t3 - t2, "query_s": t4 - t3,
                  "open_embedder_query_s": t4 - t1, "hits": len(hits)}))
"""

BUILD = """
import sys
from mempp.demo import demo_data
import mempp
docs, _ = demo_data()
with mempp.Store.open(sys.argv[1]) as s:
    s.add(docs)
"""


def _timed(cmd: list[str], env: dict, cwd: str | None = None) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return time.perf_counter() - t, out.stdout


def run(repo: Path, cold: bool) -> dict:
    root = Path(tempfile.mkdtemp(prefix="mempp-first-run-"))
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    result: dict = {}
    variants = [("precompiled", {})] + ([("no_precompile", {"MEMPP_NO_PRECOMPILE": "1"})] if cold else [])
    for name, extra in variants:
        venv = root / f"venv-{name}"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = str(venv / "bin" / "python")
        # A clean copy of the source, as a fresh clone is: a build/ folder left by an earlier
        # install would carry that build's compiled kernels into this one.
        src = root / f"src-{name}"
        shutil.copytree(repo, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".git"))
        install_s, _ = _timed([py, "-m", "pip", "install", "-q", str(src)], dict(env, **extra), cwd=str(root))
        cache = root / f"cache-{name}"
        run_env = dict(env, XDG_CACHE_HOME=str(cache))
        first_s, _ = _timed([str(venv / "bin" / "mempp"), "demo"], run_env, cwd=str(root))
        second_s, _ = _timed([str(venv / "bin" / "mempp"), "demo"], run_env, cwd=str(root))
        row = {"install_s": round(install_s, 1), "first_demo_s": round(first_s, 1), "second_demo_s": round(second_s, 1)}
        if name == "precompiled":
            store = root / "demo.mempp"
            _timed([py, "-c", BUILD, str(store)], run_env)
            runs = [json.loads(_timed([py, "-c", FIRST_QUERY, str(store)], run_env)[1]) for _ in range(3)]
            runs.sort(key=lambda r: r["open_embedder_query_s"])
            row["later_process"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in runs[1].items()}
        result[name] = row
        print(json.dumps({name: row}), flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=Path("."), help="the project to install (default: here)")
    ap.add_argument("--cold", action="store_true", help="also install without the kernels compiled ahead")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    got = run(args.repo.resolve(), args.cold)
    if args.json:
        args.json.write_text(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
