"""``mempp demo``: the main job on the bundled fictional company.

Builds a store in a temporary directory from ``data/demo/docs.jsonl``, asks
the questions of ``data/demo/questions.jsonl`` (some at past dates), and
prints the evidence an answering model would get. Questions asked at two
dates are shown side by side, so you can see the answer change with ``as_of``.

Owns the demo's run and what it prints; its data lives in ``data/demo/``. It uses the public
:class:`Store` only, as a reader's first program would.

Never imports: cli, planner, mempp.storage, mempp.bench.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

from .evidence import format_evidence
from .progress import ProgressBar
from .store import Store


def demo_data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The bundled documents and questions."""
    base = resources.files("mempp").joinpath("data/demo")
    docs = [json.loads(line) for line in base.joinpath("docs.jsonl").read_text("utf-8").splitlines() if line.strip()]
    qs = [json.loads(line) for line in base.joinpath("questions.jsonl").read_text("utf-8").splitlines() if line.strip()]
    return docs, qs


def run_demo(embedder=None, k: int = 5, out=print) -> int:
    docs, questions = demo_data()
    authors = {d.get("author") for d in docs}
    revisions = sum(1 for d in docs if d.get("supersedes"))
    out(f"mempp demo: {len(docs)} documents by {len(authors)} authors, {revisions} of them revisions of earlier decisions.")
    hits_found = 0
    with tempfile.TemporaryDirectory() as tmp:
        with Store.open(Path(tmp) / "demo.mempp", embedder=embedder) as store:
            with ProgressBar(len(docs), "ingest") as bar:
                store.add(docs, progress=bar)
            stats = store.stats()
            out(f"store: {stats['documents']} documents, {stats['superseded']} superseded (kept, never deleted), "
                f"{stats['supersessions']} supersession events, version {stats['version']}\n")
            groups: dict[str, list[dict]] = defaultdict(list)
            for q in questions:
                groups[q["text"]].append(q)
            for text, qs in groups.items():
                out("=" * 100)
                out(f"Q: {text}   [{qs[0].get('category')}]")
                for q in qs:
                    when = q.get("as_of") or "now"
                    hits = store.query(text, as_of=q.get("as_of"), k=k)
                    gold = set(q.get("evidence") or ())
                    found = [h for h in hits if h.key in gold]
                    hits_found += bool(found)
                    out("-" * 100)
                    out(f"as of {when}: reference answer: {q.get('answer')}")
                    out(f"evidence handed to the answering model (top {k}; * = gold evidence):")
                    for h in hits:
                        mark = "*" if h.key in gold else " "
                        body = format_evidence([h]).replace("\n", "\n     ", 1)
                        out(f"  {mark} {body[:400]}{'...' if len(body) > 400 else ''}")
                out("")
    out(f"gold evidence in the top {k} for {hits_found} of {len(questions)} questions")
    return 0
