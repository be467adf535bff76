"""The plain baselines (BM25 alone; BM25 + best-window vector fused 1:4 with thread siblings), written out in numpy so that anyone can check them.

``python -m mempp.bench.baseline --docs D --questions Q [--k 10 --k 50] [--kind rrf-siblings|bm25] [--json]``
(also ``mempp eval --baseline rrf-siblings|bm25``). Same input format, same scoring (one query per
k, each k scored on its own answer) and same report as ``mempp eval``; nothing of mempp's ranking
is used, only its date parser and, for the vector leg, its embedder.

- ``bm25``: BM25 over whole documents, Lucene's formula (k1 1.2, b 0.75,
  ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, N, df and the average length over the scope's
  documents), tokens ``[a-z0-9]+`` of the lower-cased text, Lucene's 33-word English stop list,
  no stemming. Ranked by score, the later-ingested document first on ties.
- ``rrf-siblings``: that BM25 leg and a vector leg scoring each document by its best window
  (windows of 254 tokens every 200 tokens, the model's first window included, mean-pooled
  MiniLM as the store embeds them), each its top 50; weighted RRF, BM25 1 and vector 4,
  ``w / (60 + rank)`` with ranks from 0; then thread siblings: walk the fused list in order and
  after each document append the other documents of its thread valid at ``as_of``, in ingest
  order, skipping any already listed. No reserve.

Candidates are the documents valid at the question's ``as_of`` by the validity rule of docs/DESIGN.md §2.1: dated at or
before it (undated ones only when ``as_of`` is null) and not superseded by then (by a
``supersedes`` field or a later document with the same ``id``, effective at the new document's
date). ``as_of`` null means after everything: superseded documents are out.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mempp.dates import to_us

from .evaluate import mean, load, make_embedder, score

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)
TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.2, 0.75
RRF_C = 60
DEPTH = 50
WEIGHTS = (1.0, 4.0)  # bm25, vector
WINDOW_STRIDE = 200
KINDS = ("rrf-siblings", "bm25")


def tokens(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


class Scope:
    """One scope's documents, their BM25 postings, window vectors and validity."""

    def __init__(self, docs: list[dict], embedder: Any = None) -> None:
        self.keys = [str(d["id"]) for d in docs]
        n = self.n = len(docs)
        self.dates = np.array([_date(d.get("date")) for d in docs], dtype=np.float64)  # nan: undated
        # Supersession: (old, effective date) events, from `supersedes` and re-used ids.
        self.superseded_at = np.full(n, np.inf)
        last_by_key: dict[str, int] = {}
        where: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(docs):
            where[self.keys[i]].append(i)
        for i, d in enumerate(docs):
            eff = self.dates[i] if not math.isnan(self.dates[i]) else -np.inf
            olds = []
            if self.keys[i] in last_by_key:
                olds.append(last_by_key[self.keys[i]])
            sup = d.get("supersedes") or ()
            for s in [sup] if isinstance(sup, str) else sup:
                olds += [j for j in where.get(str(s), ()) if j < i]
            for j in olds:
                self.superseded_at[j] = min(self.superseded_at[j], eff)
            last_by_key[self.keys[i]] = i
        threads = [d.get("thread") for d in docs]
        self.thread_members: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(threads):
            if t is not None:
                self.thread_members[t].append(i)
        self.thread = threads
        # BM25 postings.
        self.lengths = np.zeros(n, dtype=np.float64)
        post: dict[str, dict[int, int]] = defaultdict(dict)
        for i, d in enumerate(docs):
            toks = tokens(str(d.get("text") or ""))
            self.lengths[i] = len(toks)
            for t in toks:
                post[t][i] = post[t].get(i, 0) + 1
        self.postings = {t: (np.fromiter(p.keys(), np.int64, len(p)), np.fromiter(p.values(), np.float64, len(p))) for t, p in post.items()}
        self.avgdl = float(self.lengths.mean()) if n else 1.0
        self.embedder = embedder
        if embedder is not None and n:
            texts = [str(d.get("text") or "") for d in docs]
            first = embedder.embed(texts)
            wv, owner = embedder.embed_windows(texts, WINDOW_STRIDE)
            self.win = np.vstack([first, wv]).astype(np.float32)
            self.owner = np.concatenate([np.arange(n, dtype=np.int64), owner])

    def valid(self, as_of: float | None) -> np.ndarray:
        if as_of is None:
            return np.isinf(self.superseded_at)
        dated = ~np.isnan(self.dates)
        return dated & (np.where(dated, self.dates, np.inf) <= as_of) & (self.superseded_at > as_of)

    def bm25(self, question: str, mask: np.ndarray) -> np.ndarray:
        scores = np.zeros(self.n)
        touched = np.zeros(self.n, dtype=bool)
        for t in set(tokens(question)):
            p = self.postings.get(t)
            if p is None:
                continue
            docs, tf = p
            idf = math.log(1 + (self.n - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = K1 * (1 - B + B * self.lengths[docs] / self.avgdl)
            scores[docs] += idf * tf * (K1 + 1) / (tf + norm)
            touched[docs] = True
        return _ranked(scores, touched & mask)

    def vector(self, qvec: np.ndarray, mask: np.ndarray) -> np.ndarray:
        best = np.full(self.n, -np.inf)
        np.maximum.at(best, self.owner, self.win @ qvec.astype(np.float32))
        return _ranked(best, mask & np.isfinite(best))

    def answer(self, kind: str, question: str, qvec: np.ndarray | None, as_of: float | None, k: int) -> list[str]:
        mask = self.valid(as_of)
        lex = self.bm25(question, mask)
        if kind == "bm25":
            return [self.keys[i] for i in lex[:k]]
        legs = [(lex[:DEPTH], WEIGHTS[0]), (self.vector(qvec, mask)[:DEPTH], WEIGHTS[1])]
        fused: dict[int, float] = {}
        for ranked, w in legs:
            for r, d in enumerate(ranked.tolist()):
                fused[d] = fused.get(d, 0.0) + w / (RRF_C + r)
        order = sorted(fused, key=lambda d: (-fused[d], -d))
        out: list[int] = []
        listed: set[int] = set()
        for d in order:
            if d not in listed:
                out.append(d)
                listed.add(d)
            t = self.thread[d]
            if t is None:
                continue
            for s in self.thread_members[t]:
                if s not in listed and mask[s]:
                    out.append(s)
                    listed.add(s)
            if len(out) >= k:
                break
        return [self.keys[i] for i in out[:k]]


def _ranked(scores: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Indices of ``keep`` by score, the later-ingested (higher index) first on ties."""
    ids = np.flatnonzero(keep)
    return ids[np.lexsort((-ids, -scores[ids]))]


def _date(value: Any, end_of_day: bool = False) -> float:
    if value is None:
        return math.nan
    return float(to_us(value, end_of_day=end_of_day))


def evaluate_baseline(
    docs: str | Path, questions: str | Path, kind: str = "rrf-siblings", ks: Sequence[int] = (10, 50), *,
    embedder: Any = None, embedder_name: str = "minilm", ranked_out: str | Path | None = None,
) -> dict[str, Any]:
    """The report of ``mempp eval`` for a baseline (one query per k, each k scored on its own answer)."""
    if kind not in KINDS:
        raise ValueError(f"unknown baseline {kind!r}; one of {KINDS}")
    t0 = time.perf_counter()
    doc_groups, q_groups = load(docs, questions)
    if kind != "bm25" and embedder is None:
        embedder = make_embedder(embedder_name)
    per_q: list[tuple[str, dict[str, float]]] = []
    out_f = open(ranked_out, "w", encoding="utf-8") if ranked_out else None
    try:
        for scope in sorted(set(doc_groups) | set(q_groups)):
            sc = Scope(doc_groups.get(scope, []), embedder if kind != "bm25" else None)
            qs = q_groups.get(scope, [])
            if kind != "bm25" and qs:
                embed_q = getattr(embedder, "embed_queries", None) or embedder.embed  # a model's query side
                qvecs = embed_q([q["text"] for q in qs])
            for j, q in enumerate(qs):
                as_of = None if q.get("as_of") is None else _date(q["as_of"], end_of_day=True)
                answers = {}
                for k in ks:
                    answers[k] = sc.answer(kind, q["text"], None if kind == "bm25" else qvecs[j], as_of, k) if sc.n else []
                    if out_f:
                        out_f.write(json.dumps({"id": q["id"], "k": k, "ranked": answers[k]}, ensure_ascii=False) + "\n")
                if q.get("evidence"):
                    per_q.append((str(q.get("category")), score(answers, q["evidence"])))
    finally:
        if out_f:
            out_f.close()
    by_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for cat, s in per_q:
        by_cat[cat].append(s)
    return {
        "k": list(ks),
        "questions": len(per_q),
        "overall": mean([s for _, s in per_q]),
        "by_category": {cat: {**mean(rows), "questions": len(rows)} for cat, rows in sorted(by_cat.items())},
        "config": {"baseline": kind, "embedder": None if kind == "bm25" else getattr(embedder, "model_id", embedder_name),
                   "docs": str(docs), "questions": str(questions)},
        "documents": sum(len(v) for v in doc_groups.values()),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.baseline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--k", type=int, action="append", default=None)
    p.add_argument("--kind", choices=KINDS, default="rrf-siblings")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--ranked-out", default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from .evaluate import format_report

    report = evaluate_baseline(args.docs, args.questions, args.kind, tuple(sorted(set(args.k or [10, 50]))),
                               embedder_name=args.embedder, ranked_out=args.ranked_out)
    print(json.dumps(report) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
