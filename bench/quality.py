"""The quality tables of the README: every corpus, tuning and report splits, the
defaults beside plain BM25 and the simple baseline (BM25 + best-window vector fused 1:4, thread
siblings), ablations and a k sweep, all scored one query per k (each k on its own answer).

    python -m mempp.bench.quality --data /work/data-extra prepare      # split files, org seeds
    python -m mempp.bench.quality --data /work/data-extra table --corpus locomo-report [--config default ...]

Corpora (``--data`` holds what is not in ``../shared``; ``prepare`` writes the splits there):

| name | what | role |
|---|---|---|
| ``locomo-tune`` | LoCoMo conversations conv-26, conv-30, conv-41, conv-42, conv-43 (the first five in file order) | tuning |
| ``locomo-report`` | the other five: conv-44, conv-47, conv-48, conv-49, conv-50 | report |
| ``locomo`` | all ten (1,982 scored questions) | report |
| ``org-s1``, ``org-s2`` | ``bench/orgbench/``, 4,000 documents, 2 organizations, seeds 1 and 2 | tuning |
| ``org-s3``, ``org-s4`` | the same generator, seeds 3 and 4 (never used for tuning) | report |
| ``org-v1``; ``org-v3``, ``org-v4`` | seeds 1; 3 and 4 with ``--threads varied`` (chat threaded by room and month or quarter, some email threads forked) | tuning; report |
| ``org-people`` | the generator's role-and-alias slice (``--people``), seed 5: authors as emails, handles and "Last, First", a people directory, questions by name and by role | report |
| ``lme-dev`` | LongMemEval-S dev split (``../shared/data/longmemeval-s-dev``, 120 questions) | report |
| ``lme-dev-24`` | its first 24 scopes in sorted order (the baseline's window vectors of all 120 haystacks take hours here) | report |
| ``realtalk`` | REALTALK, 10 real 21-day chats, converted by ``bench/convert_realtalk.py`` into ``--data``/realtalk | report |

Embeddings are cached on disk (``--cache``, default ``/work/cache-quality``; ``bench/embcache.py``),
so a sweep of query-time settings embeds each text once. Only the experiments use the cache:
``mempp eval`` is always a plain run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from mempp.embedder import DEFAULT_MODEL, model_spec

from .baseline import evaluate_baseline
from .embcache import CachingEmbedder
from .evaluate import EvalConfig, evaluate, make_embedder, preset

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMPP_SHARED", ROOT.parent / "shared"))
LOCOMO = SHARED / "data" / "locomo"
LME = SHARED / "data" / "longmemeval-s-dev"
LOCOMO_TUNE = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
ORG_SEEDS = {"org-s1": 1, "org-s2": 2, "org-s3": 3, "org-s4": 4}
ORG_PEOPLE_SEED = 5  # the role-and-alias slice (orgbench --people), never used for tuning
ORG_VARIED = {"org-v1": 1, "org-v3": 3, "org-v4": 4}  # the same seeds threaded otherwise (orgbench --threads varied)
TUNING = ("locomo-tune", "org-s1", "org-s2", "org-v1")
REPORT = ("locomo-report", "locomo", "org-s3", "org-s4", "org-v3", "org-v4", "org-people", "lme-dev", "lme-dev-24", "realtalk")


def corpus_paths(name: str, data: Path) -> tuple[Path, Path]:
    if name == "locomo":
        return LOCOMO / "docs.jsonl", LOCOMO / "questions.jsonl"
    if name == "lme-dev":
        return data / "lme-dev" / "docs.jsonl", LME / "questions.jsonl"
    return data / name / "docs.jsonl", data / name / "questions.jsonl"


def prepare(data: Path) -> None:
    """Write the LoCoMo halves, the unpacked LongMemEval-S dev documents and the org seeds under ``data``."""
    import gzip

    from .orgbench import write

    for half, keep in (("locomo-tune", lambda s: s in LOCOMO_TUNE), ("locomo-report", lambda s: s not in LOCOMO_TUNE)):
        out = data / half
        out.mkdir(parents=True, exist_ok=True)
        for fname in ("docs.jsonl", "questions.jsonl"):
            with open(LOCOMO / fname, encoding="utf-8") as src, open(out / fname, "w", encoding="utf-8") as dst:
                for line in src:
                    if line.strip() and keep(json.loads(line)["scope"]):
                        dst.write(line)
    lme = data / "lme-dev"
    lme.mkdir(parents=True, exist_ok=True)
    if not (lme / "docs.jsonl").is_file():
        with gzip.open(LME / "docs.jsonl.gz", "rb") as src, open(lme / "docs.jsonl.tmp", "wb") as dst:
            dst.write(src.read())
        os.replace(lme / "docs.jsonl.tmp", lme / "docs.jsonl")
    sub24 = data / "lme-dev-24"
    sub24.mkdir(parents=True, exist_ok=True)
    with open(LME / "questions.jsonl", encoding="utf-8") as f:
        scopes = sorted({json.loads(line)["scope"] for line in f if line.strip()})[:24]
    for src, fname in ((lme / "docs.jsonl", "docs.jsonl"), (LME / "questions.jsonl", "questions.jsonl")):
        with open(src, encoding="utf-8") as s_in, open(sub24 / fname, "w", encoding="utf-8") as dst:
            for line in s_in:
                if line.strip() and json.loads(line)["scope"] in scopes:
                    dst.write(line)
    for name, seed in ORG_SEEDS.items():
        if not (data / name / "docs.jsonl").is_file():
            write(data / name, 4000, seed=seed, n_orgs=2)
    for name, seed in ORG_VARIED.items():
        if not (data / name / "docs.jsonl").is_file():
            write(data / name, 4000, seed=seed, n_orgs=2, threads="varied")
    if not (data / "org-people" / "people.jsonl").is_file():
        write(data / "org-people", 4000, seed=ORG_PEOPLE_SEED, n_orgs=2, people=True)


# name -> (preset, overrides) or ("baseline", kind).
CONFIGS: dict[str, tuple[str, Any]] = {
    "default": ("default", {}),
    "BM25 alone (plain)": ("baseline", "bm25"),
    "baseline (BM25 + best-window vector, RRF 1/4, thread siblings)": ("baseline", "rrf-siblings"),
    "baseline, with the default model": ("baseline-own-model", "rrf-siblings"),  # the same, run with --embedder's model
    "paper (the reference's recipe)": ("paper", {}),
    "default, lexical leg off": ("default", {"legs": ("tag", "vector")}),
    "default, tag leg off": ("default", {"legs": ("lexical", "vector")}),
    "default, vector leg off": ("default", {"legs": ("lexical", "tag")}),
    "default, thread stage off": ("default", {"siblings": 0}),
    "default, thread context off": ("default", {"context": ()}),
    "default, thread stage and context off": ("default", {"siblings": 0, "context": ()}),
    "default, reserve off": ("default", {"reserve": False}),
    "default, the paper's reserve rule": ("default", {"reserve_rule": "paper"}),
    "default, feedback off": ("default", {"feedback": 0}),
    "default, chain stage off": ("default", {"chain": 0}),
    "default, without the people directory": ("default", {"%people": False}),
    "default, chain stage without day links": ("default", {"@chain.CHAIN_DAYS": False}),
    "default, tag leg in lexical order": ("default", {"tag_rank": "lexical"}),
    "default, feedback off and tag leg in lexical order": ("default", {"feedback": 0, "tag_rank": "lexical"}),
    "default, weights 2,1,1 at every k": ("default", {"weights": (2.0, 1.0, 1.0)}),
    "earlier default (2,1,1; no thread stage or feedback)": ("default", {"weights": (2.0, 1.0, 1.0), "siblings": 0, "reserve_rule": "paper", "depth": 50, "feedback": 0, "tag_rank": "lexical"}),
}


def parse_spec(name: str) -> tuple[str, Any]:
    """A CONFIGS name, or ``preset+key=value+...`` (values as Python literals), e.g.
    ``default+siblings=4+reserve_rule='paper'`` or ``default+weights=(1,1,2)``."""
    import ast

    if name in CONFIGS:
        return CONFIGS[name]
    base, *pairs = name.split("+")
    over = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        over[key] = ast.literal_eval(value)
    return base, over


_BASELINE_EMB: dict = {}


def baseline_embedder(emb: Any) -> Any:
    """The baselines' embedder: all-MiniLM-L6-v2, as they are defined, cached like ``emb``."""
    if emb.model_id == model_spec("minilm").model_id:
        return emb
    if "minilm" not in _BASELINE_EMB:
        _BASELINE_EMB["minilm"] = CachingEmbedder(make_embedder("minilm"), emb.path.parent if emb.path else None)
    return _BASELINE_EMB["minilm"]


def run_config(name: str, docs: Path, questions: Path, ks: Sequence[int], emb: Any, embedder_name: str, spec=None) -> dict:
    base, over = spec or parse_spec(name)
    if base in ("baseline", "baseline-own-model"):
        return evaluate_baseline(docs, questions, over, ks, embedder=baseline_embedder(emb) if base == "baseline" else emb)
    import importlib

    # module constants for sweeps: "@NAME" (of mempp.threads) or "@module.NAME" (of mempp.module)
    knobs = {(k[1:].rpartition(".")[0] or "threads", k.rpartition(".")[2].lstrip("@")): v for k, v in over.items() if k.startswith("@")}
    saved = {(m, k): getattr(importlib.import_module(f"mempp.{m}"), k) for m, k in knobs}
    cfg: EvalConfig = replace(preset(base, ks=tuple(ks), embedder=embedder_name), **{k: v for k, v in over.items() if k[0] not in "@%"})
    try:
        for (m, k), v in knobs.items():
            setattr(importlib.import_module(f"mempp.{m}"), k, v)
        # "%people": False runs without the corpus's people.jsonl
        return evaluate(docs, questions, cfg, progress=False, embedder=emb, people=over.get("%people"))
    finally:
        for (m, k), v in saved.items():
            setattr(importlib.import_module(f"mempp.{m}"), k, v)


def row(name: str, r: dict, ks: Sequence[int], cats: Sequence[str]) -> str:
    o = r["overall"]
    cells = [f"{o[f'recall@{k}']:.3f}" for k in ks] + [f"{o[f'mrr@{ks[0]}']:.3f}"]
    for c in cats:
        b = r["by_category"].get(c)
        cells.append(" / ".join(f"{b[f'recall@{k}']:.2f}" for k in ks) if b else "")
    return f"| {name} | " + " | ".join(cells) + " |"


def summary(files: Sequence[str]) -> int:
    runs: dict[tuple[str, str, str], dict] = {}
    for f in files:
        for line in open(f, encoding="utf-8"):
            r = json.loads(line)
            runs[(r["corpus"], r.get("embedder", "minilm"), r["config"])] = r["report"]
    for corpus, embedder in dict.fromkeys((c, e) for c, e, _ in runs):
        rows = [(name, rep) for (c, e, name), rep in runs.items() if (c, e) == (corpus, embedder)]
        ks = rows[0][1]["k"]
        cats = sorted({c for _, r in rows for c in r["by_category"]})
        print(f"\n{corpus}, {embedder} ({rows[0][1]['questions']} questions; recall@{'/'.join(map(str, ks))})\n")
        print("| configuration | " + " | ".join(f"R@{k}" for k in ks) + f" | MRR@{ks[0]} | "
              + " | ".join(f"{c} (n={rows[0][1]['by_category'][c]['questions']})" for c in cats) + " |")
        print("|" + "---|" * (len(ks) + 2 + len(cats)))
        for name, r in rows:
            print(row(name, r, ks, cats))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.quality", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/work/data-extra", help="where prepare writes the splits (outside the repository)")
    p.add_argument("--cache", default="/work/cache-quality", help="embedding cache folder ('' for none)")
    p.add_argument("--embedder", default=model_spec(DEFAULT_MODEL).alias, help="a shipped model (default: mempp's)")
    p.add_argument("--no-save", action="store_true", help="read the cache but never write it (another run is filling it)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare")
    t = sub.add_parser("table")
    t.add_argument("--corpus", action="append", required=True)
    t.add_argument("--config", action="append", default=None, help="a CONFIGS name (repeatable; default all)")
    t.add_argument("--k", type=int, action="append", default=None)
    t.add_argument("--json", default=None, help="append every report to this JSON Lines file")
    sm = sub.add_parser("summary", help="tables from the JSON Lines that table --json wrote (the last run of each corpus and config)")
    sm.add_argument("files", nargs="+")
    args = p.parse_args(argv)
    data = Path(args.data)
    if args.cmd == "summary":
        return summary(args.files)
    if args.cmd == "prepare":
        prepare(data)
        return 0
    ks = tuple(sorted(set(args.k or [10, 50])))
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache or None)
    names = args.config or list(CONFIGS)
    for corpus in args.corpus:
        docs, questions = corpus_paths(corpus, data)
        if not docs.is_file():
            print(f"{corpus}: {docs} not found (run prepare, or the converter)", file=sys.stderr)
            continue
        reports = []
        for name in names:
            t0 = time.perf_counter()
            r = run_config(name, docs, questions, ks, emb, args.embedder)
            if not args.no_save:
                emb.save()
            reports.append((name, r))
            print(f"{corpus} / {name}: " + " ".join(f"R@{k} {r['overall'][f'recall@{k}']:.3f}" for k in ks)
                  + f" ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"corpus": corpus, "config": name, "embedder": args.embedder, "report": r}) + "\n")
        cats = sorted({c for _, r in reports for c in r["by_category"]})
        print(f"\n{corpus} ({reports[0][1]['questions']} questions; recall@{'/'.join(map(str, ks))}, per category the same)\n")
        print(f"| configuration | " + " | ".join(f"R@{k}" for k in ks) + f" | MRR@{ks[0]} | " + " | ".join(f"{c} (n={reports[0][1]['by_category'][c]['questions']})" for c in cats) + " |")
        print("|" + "---|" * (len(ks) + 2 + len(cats)))
        for name, r in reports:
            print(row(name, r, ks, cats))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
