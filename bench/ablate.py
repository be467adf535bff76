"""Ablation tables in one run: ``python -m mempp.bench.ablate --docs D --questions Q [--out table.md]``.

As in ``mempp eval``, every question is asked once per k and each k scored on its own answer
(the k sweep too). Every configuration is evaluated on the same data with the same embedder, and each
text is embedded once for the whole run (an in-memory cache), so a table of many
rows costs little more than one ``mempp eval``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from typing import Any, Sequence


from mempp.embedder import EMBEDDER_CHOICES

from .embcache import CachingEmbedder
from .evaluate import EvalConfig, evaluate, make_embedder, preset


# name -> preset and overrides. "default" is what Store.query does with no arguments.
ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("default", {}),
    "paper (reference recipe: 1,1,4, depth 50)": ("paper", {}),
    "paper, vector leg off": ("paper", {"legs": ("lexical", "tag")}),
    "paper, lexical leg off": ("paper", {"legs": ("tag", "vector")}),
    "paper, tag leg off": ("paper", {"legs": ("lexical", "vector")}),
    "paper, reserve off": ("paper", {"reserve": False}),
    "paper-locomo (1,1,2, depth 200)": ("paper-locomo", {}),
    "default, vector leg off": ("default", {"legs": ("lexical", "tag")}),
    "default, lexical leg off": ("default", {"legs": ("tag", "vector")}),
    "default, tag leg off": ("default", {"legs": ("lexical", "vector")}),
    "default, reserve off": ("default", {"reserve": False}),
    "default, thread context off": ("default", {"context": ()}),
    "default, thread context summed (0.6,0.3,0.15)": ("default", {"context": (0.6, 0.3, 0.15), "context_mode": "sum"}),
    "default, no stemming": ("default", {"stem": False}),
    "default, weights 1,1,4": ("default", {"weights": (1.0, 1.0, 4.0)}),
    "default, weights 1,1,1": ("default", {"weights": (1.0, 1.0, 1.0)}),
    "default, depth 100": ("default", {"depth": 100}),
    "default, author in embedding": ("default", {"embed_template": "{author}: {text}"}),
    "default, question dates": ("default", {"question_dates": True}),
    "default, windows every 192 tokens": ("default", {"window_stride": 192}),
    "BM25 alone": ("default", {"legs": ("lexical",), "reserve": False, "context": ()}),
}


def table(rows: list[tuple[str, dict]], ks: Sequence[int]) -> str:
    cats = sorted({c for _, r in rows for c in r["by_category"]})
    head = "| configuration | " + " | ".join(f"R@{k}" for k in ks) + f" | MRR@{ks[0]} | " + " | ".join(f"{c} R@{ks[0]}/R@{ks[-1]}" for c in cats) + " |"
    lines = [head, "|" + "---|" * (len(ks) + 2 + len(cats))]
    for name, r in rows:
        o = r["overall"]
        cells = [f"{o[f'recall@{k}']:.3f}" for k in ks] + [f"{o[f'mrr@{ks[0]}']:.3f}"]
        for c in cats:
            b = r["by_category"].get(c)
            cells.append(f"{b[f'recall@{ks[0]}']:.2f} / {b[f'recall@{ks[-1]}']:.2f}" if b else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.ablate", description=__doc__)
    p.add_argument("--docs", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--k", type=int, action="append", default=None)
    p.add_argument("--embedder", choices=EMBEDDER_CHOICES, default=EvalConfig.embedder)
    p.add_argument("--only", action="append", default=None, help="run only configurations whose name contains this")
    p.add_argument("--ksweep", action="store_true", help="also the default's recall at k = 5, 10, 15, 30, 50")
    p.add_argument("--json", default=None, help="write every report to this file")
    args = p.parse_args(argv)
    ks = tuple(sorted(set(args.k or [10, 50])))
    emb = CachingEmbedder(make_embedder(args.embedder))
    rows: list[tuple[str, dict]] = []
    t0 = time.perf_counter()
    for name, (base, over) in ABLATIONS.items():
        if args.only and not any(o in name for o in args.only):
            continue
        cfg: EvalConfig = replace(preset(base, ks=ks, embedder=args.embedder), **over)
        report = evaluate(args.docs, args.questions, cfg, progress=False, embedder=emb)
        rows.append((name, report))
        print(f"{name}: R@{ks[0]} {report['overall'][f'recall@{ks[0]}']:.3f}  ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    print(table(rows, ks))
    if args.ksweep:
        sweep = (5, 10, 15, 30, 50)
        rep = evaluate(args.docs, args.questions, preset("default", ks=sweep, embedder=args.embedder), progress=False, embedder=emb)
        print("\n| k | " + " | ".join(str(k) for k in sweep) + " |\n|---|" + "---|" * len(sweep))
        print("| recall@k (default) | " + " | ".join(f"{rep['overall'][f'recall@{k}']:.3f}" for k in sweep) + " |")
        print("| hit@k (default) | " + " | ".join(f"{rep['overall'][f'hit@{k}']:.3f}" for k in sweep) + " |")
        rows.append(("ksweep", rep))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: r for name, r in rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
