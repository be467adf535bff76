"""How much of a store an exact vector scan must still rescore when it first reads a smaller code.

An exact top-``depth`` from a compressed copy works only with a bound: a document can be skipped
when its estimated cosine plus its error bound is below the ``depth``-th best estimate minus that
document's bound. With a per-document error vector ``e = d - d_hat``, ``|q . e| <= |e|`` for a unit
question (Cauchy-Schwarz), so the share of documents whose interval reaches the ``depth``-th lower
bound is what the exact scan must read again at full precision. This prints that share for
scalar codes of 8, 6 and 4 bits, each with a per-document or a per-dimension scale, around zero
or around the corpus mean, over real embeddings.

    python -m mempp.bench.code_bounds --docs D.jsonl --questions Q.jsonl [--limit 6000] [--embedder bge-small]
    python -m mempp.bench.code_bounds --vectors docs.npy --query-vectors questions.npy

Nothing here is used by the engine; it is the measurement behind docs/SPEED.md, *Reading less*.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1)


def code(docs: np.ndarray, bits: int, per_dim: bool, centred: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(the documents as the code gives them back, each one's error norm)``."""
    mu = docs.mean(axis=0) if centred else np.zeros(docs.shape[1], dtype=np.float32)
    x = docs - mu
    top = 2 ** (bits - 1) - 1
    scale = (np.quantile(np.abs(x), 0.999, axis=0)[None, :] if per_dim else np.abs(x).max(axis=1, keepdims=True)) / top
    scale = np.where(scale > 0, scale, 1)
    approx = np.clip(np.round(x / scale), -top, top) * scale
    return approx + mu, np.linalg.norm(x - approx, axis=1)


def kept(estimates: np.ndarray, err: np.ndarray, depth: int) -> np.ndarray:
    """Which documents one question's scan must rescore: those whose upper bound reaches the
    ``depth``-th best lower bound (every other one is provably outside the top ``depth``)."""
    kth = np.partition(estimates - err, -depth)[-depth]
    return estimates + err >= kth


def rescore_share(docs: np.ndarray, questions: np.ndarray, bits: int, per_dim: bool, centred: bool, depth: int = 50) -> tuple[float, float]:
    """``(median share of documents left to rescore, mean error norm)`` for one code."""
    approx, err = code(docs, bits, per_dim, centred)
    est = questions @ approx.T
    return float(np.median([np.mean(kept(row, err, depth)) for row in est])), float(err.mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mempp.bench.code_bounds", description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", help="documents (JSON Lines, the eval format) to embed")
    ap.add_argument("--questions", help="questions (JSON Lines) to embed")
    ap.add_argument("--vectors", help="document vectors (.npy), instead of --docs")
    ap.add_argument("--query-vectors", help="question vectors (.npy), instead of --questions")
    ap.add_argument("--limit", type=int, default=6000, help="documents at most (default 6000)")
    ap.add_argument("--embedder", default="bge-small")
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.vectors:
        docs = np.load(args.vectors, allow_pickle=False)
        questions = np.load(args.query_vectors, allow_pickle=False)
    elif args.docs and args.questions:
        from mempp.bench.evaluate import make_embedder
        from mempp.embedder import embed_queries
        from mempp.inputs import read_jsonl

        emb = make_embedder(args.embedder)
        texts = [d["text"] for _, d in read_jsonl(args.docs)][: args.limit]
        asked = [q["text"] for _, q in read_jsonl(args.questions)][:200]
        docs, questions = emb.embed(texts), embed_queries(emb, asked)
    else:
        ap.error("give --docs and --questions, or --vectors and --query-vectors")
    docs, questions = unit(docs), unit(questions)
    rows = []
    for bits in (8, 6, 4):
        for per_dim in (False, True):
            for centred in (False, True):
                share, err = rescore_share(docs, questions, bits, per_dim, centred, args.depth)
                rows.append({"bits": bits, "scale": "per dimension" if per_dim else "per document", "centred": centred,
                             "bytes": docs.shape[1] * bits // 8, "error_norm": round(err, 4), "rescore_share": round(share, 4)})
    if args.json:
        print(json.dumps({"documents": len(docs), "questions": len(questions), "depth": args.depth, "rows": rows}))
        return 0
    print(f"{len(docs)} documents, {len(questions)} questions, depth {args.depth}")
    print("| bits | bytes | scale | centred | mean error norm | share left to rescore |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bits']} | {r['bytes']} | {r['scale']} | {'yes' if r['centred'] else 'no'} | {r['error_norm']:.4f} | {r['rescore_share']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
