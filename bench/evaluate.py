"""Retrieval evaluation (``mempp eval``): recall@k, hit@k and MRR per category, one store per scope.

The format is ``shared/eval/FORMAT.md``: ``docs.jsonl`` and ``questions.jsonl``.
Each scope gets its own store, built with one ``add``; each question is asked
at its own ``as_of``, **once per requested k** (``query(..., k=k)``), and each
k is scored on its own answer: recall@k, hit@k and MRR@k (1 / rank of the first
evidence document in the k-answer). A k=10 answer is not the first 10 hits of a
k=50 answer: the latest-date reserve takes the last 3 slots of every answer.
``mrr`` (no suffix) is the MRR of the largest k, as ``shared/eval/FORMAT.md``
defines it. Scores compare the caller's keys, so ``--ranked-out`` (one
``{"id", "k", "ranked": [keys, best first]}`` line per question and k, the k's
in increasing order after each other for a question) can be re-scored by anyone.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import mempp
from mempp.config import (
    DEFAULT_CHAIN, DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_FEEDBACK, DEFAULT_NAME_FREE, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK,
)
from mempp.embedder import DEFAULT_MODEL, EMBEDDER_CHOICES, embed_queries, model_spec
from mempp.inputs import read_jsonl
from mempp.progress import ProgressBar


@dataclass(frozen=True)
class EvalConfig:
    ks: tuple[int, ...] = (10, 50)
    weights: tuple[float, float, float] | None = None  # None: the store's default (2,1,1 up to k = 15, 1,1,1 above)
    depth: int | None = None  # None: the store's default (50, or 2k above k = 25)
    reserve: bool = True
    legs: tuple[str, ...] | None = None
    embedder: str = model_spec(DEFAULT_MODEL).alias  # a name of EMBEDDER_CHOICES
    context: tuple[float, ...] = DEFAULT_CONTEXT
    context_length: float | None = None
    context_mode: str = DEFAULT_CONTEXT_MODE
    question_dates: bool = False
    siblings: int = DEFAULT_SIBLINGS  # thread stage: largest thread whose siblings follow a hit (0: off)
    reserve_rule: str = DEFAULT_RESERVE_RULE  # "relevant" or "paper"
    feedback: int = DEFAULT_FEEDBACK  # the vector leg's second scan from the first fused documents (0: off)
    tag_rank: str = DEFAULT_TAG_RANK  # "fused" or "lexical"
    chain: int = DEFAULT_CHAIN  # the chain stage: hits whose rare terms lift other ranked documents (0: off)
    name_free: bool = DEFAULT_NAME_FREE  # the question's vector without the names of the people the tag leg holds
    stem: bool = True  # index time: Snowball stemming in the lexical analyzer
    embed_template: str | None = None  # index time: see mempp.IndexConfig
    window_stride: int | None = None  # index time: window vectors for long documents
    principal: Any = None  # who asks (a question's own "principal" field wins): documents may carry readers


# The reference's settings as closely as our parts allow (its lexical leg is PostgreSQL's
# ts_rank_cd over the stemmed english configuration; BM25 over stemmed terms stands in).
PRESETS: dict[str, dict[str, Any]] = {
    "paper": dict(weights=(1.0, 1.0, 4.0), depth=50, reserve=True, context=(), stem=True, embed_template=None, window_stride=None,
                  siblings=0, reserve_rule="paper", feedback=0, tag_rank="lexical", chain=0, name_free=False),
    # LoCoMo settings of the paper: weights 1,1,2 and 200 candidates per leg
    "paper-locomo": dict(weights=(1.0, 1.0, 2.0), depth=200, reserve=True, context=(), stem=True, embed_template=None, window_stride=None,
                         siblings=0, reserve_rule="paper", feedback=0, tag_rank="lexical", chain=0, name_free=False),
}


def preset(name: str, **overrides: Any) -> EvalConfig:
    """An :class:`EvalConfig` from a named preset ("default" or one of PRESETS), then overrides."""
    if name != "default" and name not in PRESETS:
        raise mempp.ValidationError(f"unknown preset {name!r}; presets: default, {', '.join(PRESETS)}", field="preset")
    base = {} if name == "default" else dict(PRESETS[name])
    base.update({k: v for k, v in overrides.items() if v is not None})
    return EvalConfig(**base)


def load(docs: str | Path, questions: str | Path) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """Documents and questions grouped by scope, in file order."""
    by_scope: dict[str, list[dict]] = defaultdict(list)
    for _, d in read_jsonl(docs):
        by_scope[str(d.get("scope"))].append(d)
    qs: dict[str, list[dict]] = defaultdict(list)
    for lineno, q in read_jsonl(questions):
        for name in ("id", "text"):
            if not isinstance(q.get(name), str):
                raise mempp.ValidationError(f"{questions}:{lineno}: expected a string", field=name)
        qs[str(q.get("scope"))].append(q)
    return dict(by_scope), dict(qs)


def load_people(path: str | Path, required: bool = False) -> dict[str, list[dict]]:
    """A benchmark's people directories by scope: JSON Lines of ``{"scope", "name", "aliases",
    "roles"}`` (``Store.add_people``'s records with their scope). A missing file is no directory,
    unless ``required``."""
    path = Path(path)
    if not path.is_file():
        if required:
            raise mempp.ValidationError(f"{path}: no such file", field="--people")
        return {}
    by_scope: dict[str, list[dict]] = defaultdict(list)
    for _, rec in read_jsonl(path):
        by_scope[str(rec.get("scope"))].append({k: v for k, v in rec.items() if k != "scope"})
    return dict(by_scope)


def check(doc_groups: Mapping[str, list[dict]], q_groups: Mapping[str, list[dict]]) -> list[str]:
    """What would make a score mislead, one sentence each: questions without evidence (never
    scored), questions whose scope has no documents (they score 0), and questions whose
    evidence no document of their scope has (those ids can never be found)."""

    def some(ids: list[str]) -> str:
        return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")

    out = []
    no_evidence = [str(q["id"]) for qs in q_groups.values() for q in qs if not q.get("evidence")]
    if no_evidence:
        out.append(f"{len(no_evidence)} questions carry no evidence and are not scored ({some(no_evidence)})")
    for scope, qs in sorted(q_groups.items()):
        asked = [str(q["id"]) for q in qs if q.get("evidence")]
        if not doc_groups.get(scope):
            if asked:
                out.append(f"{len(asked)} questions ask scope {scope!r}, which has no documents: each scores 0 ({some(asked)})")
            continue
        keys = {d.get("id") for d in doc_groups[scope]}
        missing = [str(q["id"]) for q in qs if q.get("evidence") and any(e not in keys for e in q["evidence"])]
        if missing:
            out.append(f"{len(missing)} questions of scope {scope!r} name evidence no document of that scope has ({some(missing)})")
    return out


def score(answers: Mapping[int, Sequence[str]], evidence: Sequence[str]) -> dict[str, float]:
    """Recall@k, hit@k and MRR@k of each k from **its own answer** ``answers[k]`` (the ranked keys
    of a query asked with that k; only its first k count), and ``mrr``: MRR@k of the largest k."""
    gold = set(evidence)
    out: dict[str, float] = {}
    for k in sorted(answers):
        ranked = list(answers[k])[:k]
        found = len(gold & set(ranked))
        out[f"recall@{k}"] = found / len(gold)
        out[f"hit@{k}"] = 1.0 if found else 0.0
        out[f"mrr@{k}"] = next((1.0 / (i + 1) for i, key in enumerate(ranked) if key in gold), 0.0)
    out["mrr"] = out[f"mrr@{max(answers)}"]
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {name: sum(r[name] for r in rows) / len(rows) for name in rows[0]}


def make_embedder(name: str):
    """The embedder called ``name``: a shipped model's alias or name (``minilm``, ``bge-small``), or ``hash``."""
    if name not in EMBEDDER_CHOICES:
        raise mempp.ValidationError(f"unknown embedder {name!r} ({', '.join(EMBEDDER_CHOICES)})", field="embedder")
    return mempp.HashEmbedder() if name == "hash" else mempp.OnnxEmbedder(model=name)


def evaluate(
    docs: str | Path,
    questions: str | Path,
    config: EvalConfig = EvalConfig(),
    *,
    ranked_out: str | Path | None = None,
    progress: bool = True,
    workdir: str | Path | None = None,
    embedder: Any = None,
    people: str | Path | bool | None = None,
) -> dict[str, Any]:
    """Run the benchmark; returns the ``--json`` report. ``embedder`` overrides ``config.embedder``;
    ``people``: each scope's people directory (:func:`load_people`; default ``people.jsonl``
    beside ``docs`` when there is one; False: none)."""
    t0 = time.perf_counter()
    doc_groups, q_groups = load(docs, questions)
    directory = {} if people is False else load_people(people or Path(docs).parent / "people.jsonl", required=people is not None)
    embedder = embedder or make_embedder(config.embedder)
    per_q: list[tuple[str, dict[str, float]]] = []
    n_docs = sum(len(v) for v in doc_groups.values())
    n_q = sum(len(v) for v in q_groups.values())
    timing = {"ingest_s": 0.0, "query_s": 0.0}
    out_f = open(ranked_out, "w", encoding="utf-8") if ranked_out else None
    try:
        with tempfile.TemporaryDirectory(dir=workdir) as tmp, \
                ProgressBar(n_docs, "ingest", enabled=progress) as ingest_bar, \
                ProgressBar(n_q, "query", unit="questions", enabled=progress) as query_bar:
            for i, scope in enumerate(sorted(set(doc_groups) | set(q_groups))):
                store = mempp.Store.open(
                    Path(tmp) / f"scope{i}",
                    embedder=embedder,
                    analyzer=mempp.Analyzer(stem=config.stem),
                    index=mempp.IndexConfig(embed_template=config.embed_template, window_stride=config.window_stride),
                )
                with store:
                    t = time.perf_counter()
                    store.add(doc_groups.get(scope, []), progress=ingest_bar)
                    if directory.get(scope):
                        store.add_people(directory[scope])
                    timing["ingest_s"] += time.perf_counter() - t
                    qs = q_groups.get(scope, [])
                    t = time.perf_counter()
                    vecs = embed_queries(embedder, [q["text"] for q in qs]) if qs and (config.weights is None or config.weights[2]) else None
                    for j, q in enumerate(qs):
                        answers: dict[int, list[str]] = {}
                        for k in config.ks:  # one query per k: the reserve makes a k-answer more than a prefix
                            hits = store.query(
                                q["text"],
                                as_of=q.get("as_of"),
                                k=k,
                                weights=config.weights,
                                depth=config.depth,
                                reserve=config.reserve,
                                legs=config.legs,
                                context=config.context,
                                context_length=config.context_length,
                                context_mode=config.context_mode,
                                question_dates=config.question_dates,
                                siblings=config.siblings,
                                reserve_rule=config.reserve_rule,
                                feedback=config.feedback,
                                tag_rank=config.tag_rank,
                                chain=config.chain,
                                name_free=config.name_free,
                                embedding=None if vecs is None else vecs[j],
                                principal=q.get("principal", config.principal),
                            )
                            answers[k] = [h.key for h in hits]
                            if out_f:
                                out_f.write(json.dumps({"id": q["id"], "k": k, "ranked": answers[k]}, ensure_ascii=False) + "\n")
                        if q.get("evidence"):
                            per_q.append((str(q.get("category")), score(answers, q["evidence"])))
                        query_bar.update(1)
                    timing["query_s"] += time.perf_counter() - t
    finally:
        if out_f:
            out_f.close()
    by_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for cat, s in per_q:
        by_cat[cat].append(s)
    return {
        "k": list(config.ks),
        "questions": len(per_q),
        "overall": mean([s for _, s in per_q]),
        "by_category": {cat: {**mean(rows), "questions": len(rows)} for cat, rows in sorted(by_cat.items())},
        "config": {**asdict(config), "docs": str(docs), "questions": str(questions), "people": sum(map(len, directory.values()))},
        "documents": n_docs,
        "seconds": round(time.perf_counter() - t0, 2),
        "timing": {k: round(v, 2) for k, v in timing.items()},
        "query_ms_mean": round(1e3 * timing["query_s"] / max(n_q, 1), 2),
    }


def format_report(report: dict[str, Any]) -> str:
    ks = report["k"]
    cols = [f"{m}@{k}" for k in ks for m in ("recall", "hit", "mrr")]
    head = f"{'category':<22}{'n':>6}" + "".join(f"{c:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for cat, row in report["by_category"].items():
        lines.append(f"{cat:<22}{row['questions']:>6}" + "".join(f"{row[c]:>11.3f}" for c in cols))
    lines.append("-" * len(head))
    lines.append(f"{'overall':<22}{report['questions']:>6}" + "".join(f"{report['overall'].get(c, 0):>11.3f}" for c in cols))
    cfg = report["config"]
    if "baseline" in cfg:
        lines.append(f"baseline={cfg['baseline']} embedder={cfg['embedder']}; {report['documents']} documents, {report['seconds']:.1f}s")
        return "\n".join(lines)
    lines.append(
        f"weights={cfg['weights'] or 'by k'} depth={cfg['depth']} reserve={cfg['reserve']} legs={cfg['legs'] or 'all'} "
        f"siblings={cfg.get('siblings')} reserve_rule={cfg.get('reserve_rule')} feedback={cfg.get('feedback')} tag_rank={cfg.get('tag_rank')} chain={cfg.get('chain')} name_free={cfg.get('name_free')} context={cfg['context'] or 'off'}{' (' + cfg['context_mode'] + ')' if cfg['context'] else ''} stem={cfg['stem']} template={cfg['embed_template']!r} "
        f"windows={cfg['window_stride'] or 'off'} "
        f"embedder={cfg['embedder']}; {report['documents']} documents, {report['seconds']:.1f}s "
        f"(ingest {report['timing']['ingest_s']:.1f}s, queries {report['timing']['query_s']:.1f}s)"
    )
    return "\n".join(lines)
