"""Whether embedding a document together with the one before it in its thread finds more evidence.

    python -m mempp.bench.context_embedding --data /work/data-extra --corpus locomo-tune --corpus org-s1

A chat turn ("Yeah, I'm really lucky to have them") or a reply often means little without the
message it answers. This experiment embeds each document as the text before it in its thread (its
author's name first) followed by its own, and runs the evaluation three times per corpus: the vector leg
alone (no other leg, no thread context, no reserve), every default, and every default without thread context. Variants: ``own`` (the
document alone, as mempp embeds it), ``with previous`` (the previous document's text and author,
then this one's), ``mean`` (the normalized mean of the two vectors), ``best of own and with
previous`` (both kept, the second as a window vector: the vector leg scores the better of the two,
the store's best-window rule). A third setup is every default without thread context (the
neighbour lift inside the legs, which brings much of what the previous document adds). Only the
documents' vectors change; the lexical leg, the questions' vectors and every other setting stay as
they are. Nothing of it is part of mempp (``docs/quality.md``, *What did not work*, gives the figures).

Never imports: mempp.engine internals beyond the public evaluation (``bench.evaluate``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .embcache import CachingEmbedder
from .evaluate import evaluate, make_embedder, preset
from .quality import corpus_paths


class TextMapped:
    """An embedder that embeds each document's text as ``mapping(texts)`` gives it; questions unchanged."""

    def __init__(self, inner: Any, vectors: Callable[[list[str]], np.ndarray]) -> None:
        self.inner, self.vectors = inner, vectors
        self.dim, self.model_id = inner.dim, inner.model_id
        self.max_tokens = getattr(inner, "max_tokens", 512)

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress=None) -> np.ndarray:
        out = self.vectors(list(texts))
        if progress is not None:
            progress(len(texts))
        return out

    def embed_queries(self, texts: Sequence[str], *, batch_size: int = 32, progress=None) -> np.ndarray:
        return self.inner.embed_queries(texts, batch_size=batch_size)


class BestOfTwo(TextMapped):
    """Each document's own vector, and ``mapping(texts)`` as a second window: the vector leg scores
    a document by the better of the two (the store's best-window rule, ``window_stride`` set)."""

    def embed(self, texts: Sequence[str], *, batch_size: int = 32, progress=None) -> np.ndarray:
        if progress is not None:
            progress(len(texts))
        return self.inner.embed(list(texts))

    def embed_windows(self, texts: Sequence[str], stride: int, *, batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
        return self.vectors(list(texts)), np.arange(len(texts), dtype=np.int64)


def with_previous(docs: list[dict]) -> dict[str, str]:
    """Each document's text -> the previous document of its thread (in file order) as
    ``author: text``, a newline, then its own ``author: text`` (a document without a thread or
    without a predecessor: its own alone)."""
    last: dict[str, dict] = {}
    out: dict[str, str] = {}
    for d in docs:
        own = f"{d.get('author') or ''}: {d['text']}"
        thread = d.get("thread")
        prev = last.get(thread) if thread else None
        out[d["text"]] = (f"{prev.get('author') or ''}: {prev['text']}\n" if prev else "") + own
        if thread:
            last[thread] = d
    return out


def _unit(m: np.ndarray) -> np.ndarray:
    return (m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def run(corpus: str, data: Path, emb: Any) -> list[tuple[str, str, dict]]:
    docs_path, q_path = corpus_paths(corpus, data)
    docs = [json.loads(line) for line in open(docs_path, encoding="utf-8") if line.strip()]
    ctx = with_previous(docs)
    variants: dict[str, Callable[[list[str]], np.ndarray]] = {
        "own": lambda ts: emb.embed(ts),
        "with previous": lambda ts: emb.embed([ctx.get(t, t) for t in ts]),
        "mean": lambda ts: _unit(emb.embed(ts) + emb.embed([ctx.get(t, t) for t in ts])),
    }
    setups = {
        "vector leg alone": preset("default", ks=(10, 50), legs=("vector",), weights=(0.0, 0.0, 1.0), reserve=False, context=()),
        "default": preset("default", ks=(10, 50)),
        "default, no thread context": preset("default", ks=(10, 50), context=()),
    }
    rows = []
    for setup, cfg in setups.items():
        for name, fn in variants.items():
            rows.append((setup, name, evaluate(docs_path, q_path, cfg, progress=False, embedder=TextMapped(emb, fn))))
        best = BestOfTwo(emb, lambda ts: emb.embed([ctx.get(t, t) for t in ts]))
        rows.append((setup, "best of own and with previous", evaluate(docs_path, q_path, replace(cfg, window_stride=1), progress=False, embedder=best)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.context_embedding", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="/work/data-extra", help="where bench.quality prepare wrote the splits")
    p.add_argument("--corpus", action="append", required=True, help="a bench.quality corpus name (repeatable)")
    p.add_argument("--cache", default="/work/cache-quality", help="embedding cache folder ('' for none)")
    p.add_argument("--embedder", default="bge-small")
    args = p.parse_args(argv)
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache or None)
    for corpus in args.corpus:
        rows = run(corpus, Path(args.data), emb)
        cats = sorted({c for _, _, r in rows for c in r["by_category"]})
        print(f"\n{corpus}, {args.embedder} (recall@10 / @50)\n")
        print("| setup | document vector | all | " + " | ".join(cats) + " |")
        print("|---|---|---|" + "---|" * len(cats))
        for setup, name, r in rows:
            cells = [f"{r['by_category'][c]['recall@10']:.3f} / {r['by_category'][c]['recall@50']:.3f}" for c in cats]
            print(f"| {setup} | {name} | {r['overall']['recall@10']:.3f} / {r['overall']['recall@50']:.3f} | " + " | ".join(cells) + " |")
        emb.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
