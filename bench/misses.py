"""Where the evidence the default answer misses ranks: in the whole fused list and in each leg alone.

    python -m mempp.bench.misses --data /work/data-extra --corpus locomo-tune [--category multi_hop --category open_domain] [--k 10]

For each scored question (of the categories given; all by default) every evidence document the
default ``k`` answer lacks is looked up in five longer rankings of the same question: every default
at k = 200 with 2k candidates per leg ("fused"), and each leg alone (no thread stage, chain stage or
reserve; 200 candidates): the lexical leg, the vector leg with every default (thread context,
feedback), the vector leg without them, and the tag leg. The table counts the missed documents by
the place each ranking gives them (in its first 10, 20, 50, 200, or not at all). A miss in the
fused list's first 20 is one that a change of order can bring in; one beyond 200 in every leg needs
a signal none of them has. ``--json`` writes each question's ranks.

Embeddings come from the quality tables' cache (``bench/embcache.py``). Nothing of it is part of
mempp; ``docs/quality.md`` quotes its table.

Never imports: mempp.engine internals beyond the public API and the evaluation's loaders (``bench.evaluate``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import mempp
from mempp.embedder import embed_queries

from .embcache import CachingEmbedder
from .evaluate import load, load_people, make_embedder
from .quality import corpus_paths

BUCKETS = ("first 10", "11-20", "21-50", "51-200", "not in 200")
LEG_ALONE = dict(k=200, reserve=False, siblings=0, chain=0, depth=200)
RANKINGS: dict[str, dict[str, Any]] = {
    "fused (every default, k = 200)": dict(k=200, weights=(2, 1, 1), depth=2000),
    "lexical leg": dict(legs=["lexical"], **LEG_ALONE),
    "vector leg": dict(legs=["vector"], **LEG_ALONE),
    "vector leg, no context or feedback": dict(legs=["vector"], context=(), feedback=0, **LEG_ALONE),
    "tag leg": dict(legs=["tag"], **LEG_ALONE),
}


def bucket(place: int | None) -> str:
    if place is None:
        return BUCKETS[4]
    return BUCKETS[0] if place < 10 else BUCKETS[1] if place < 20 else BUCKETS[2] if place < 50 else BUCKETS[3]


def ranks(docs: Path, questions: Path, emb: Any, categories: set[str], k: int) -> list[dict[str, Any]]:
    """Per question of ``categories`` (all when empty): its evidence's place in the ``k`` answer and in each ranking."""
    doc_groups, q_groups = load(docs, questions)
    people = load_people(docs.parent / "people.jsonl")
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, scope in enumerate(sorted(q_groups)):
            qs = [q for q in q_groups[scope] if q.get("evidence") and (not categories or q.get("category") in categories)]
            if not qs:
                continue
            with mempp.Store.open(Path(tmp) / f"scope{i}", embedder=emb) as store:
                store.add(doc_groups.get(scope, []))
                if people.get(scope):
                    store.add_people(people[scope])
                vecs = embed_queries(emb, [q["text"] for q in qs])
                for q, vec in zip(qs, vecs):
                    row = {"id": q["id"], "category": q.get("category"), "evidence": list(q["evidence"]), "places": {}}
                    for name, opts in {"answer": dict(k=k), **RANKINGS}.items():
                        keys = [h.key for h in store.query(q["text"], embedding=vec, as_of=q.get("as_of"), **opts)]
                        row["places"][name] = [keys.index(e) if e in keys else None for e in q["evidence"]]
                    out.append(row)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """Missed evidence counted by bucket, one line per ranking (markdown)."""
    missed = [(r, j) for r in rows for j, p in enumerate(r["places"]["answer"]) if p is None]
    total = sum(len(r["evidence"]) for r in rows)
    lines = [f"{len(missed)} of {total} evidence documents missed by the answer\n",
             "| ranking | " + " | ".join(BUCKETS) + " |", "|---|" + "---|" * len(BUCKETS)]
    for name in RANKINGS:
        c = Counter(bucket(r["places"][name][j]) for r, j in missed)
        lines.append(f"| {name} | " + " | ".join(str(c[b]) for b in BUCKETS) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.misses", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="/work/data-extra", help="where bench.quality prepare wrote the splits")
    p.add_argument("--corpus", required=True, help="a bench.quality corpus name")
    p.add_argument("--category", action="append", default=[], help="only these categories (repeatable; default all)")
    p.add_argument("--k", type=int, default=10, help="the answer's length (default 10)")
    p.add_argument("--cache", default="/work/cache-quality", help="embedding cache folder ('' for none)")
    p.add_argument("--embedder", default="bge-small")
    p.add_argument("--json", help="write each question's places here")
    args = p.parse_args(argv)
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache or None)
    docs, questions = corpus_paths(args.corpus, Path(args.data))
    rows = ranks(docs, questions, emb, set(args.category), args.k)
    emb.save()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
