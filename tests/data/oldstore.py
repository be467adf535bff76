"""What the make_*.py scripts beside this file write: one small store and the answers the code
that wrote it gave, run with that code (an old commit checked out and importable as ``mempp``;
each script says which commit and how). Uses only the API every such commit has.

A store: 9 documents by 5 authors in two threads over 2023 (one undated), written in three
commits (a batch; a batch with a ``supersedes``, a new version of an id and a neighbour in a
thread; then a supersession alone), embedded by ``HashEmbedder(16)``. The answers: each
question at three ``as_of`` values under three configurations (all legs with the reserve,
lexical only, vector only), the query vector recorded so that a later embedder cannot change
it, and the keyword arguments a later ``Store.query`` needs to ask the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mempp

DOCS_1 = [
    {"id": "sla-1", "text": "Decision: the uptime SLA is 99.9% for every plan.", "author": "Aisha Patel",
     "date": "2023-01-10", "thread": "EV-1", "channel": "email"},
    {"id": "paint", "text": "Melanie painted a sunset at the lake.", "author": "Melanie Grey",
     "date": "2023-01-20", "thread": "conv-1", "channel": "chat"},
    {"id": "reply", "text": "Wow, that sounds lovely!", "author": "Carla Diaz",
     "date": "2023-01-20T10:00:00Z", "thread": "conv-1", "channel": "chat"},
    {"id": "lunch", "text": "Lunch on Friday at noon?", "author": "Ben Ortiz", "date": "2023-02-01", "channel": "chat"},
    {"id": "budget", "text": "Budget approved for the vendor review.", "author": "Aisha Patel",
     "date": "2023-02-15", "thread": "EV-2", "channel": "email"},
    {"id": "undated", "text": "The SLA page lives in the wiki.", "author": "Carla Diaz"},
]
DOCS_2 = [
    {"id": "sla-2", "text": "Revised: the uptime SLA is now 99.95% after the outage review.", "author": "Ben Ortiz",
     "date": "2023-06-01", "thread": "EV-1", "channel": "email", "supersedes": "sla-1"},
    {"id": "budget", "text": "Budget approved, raised by 10% for the vendor review.", "author": "Aisha Patel",
     "date": "2023-07-01", "thread": "EV-2", "channel": "email"},
    {"id": "paint-2", "text": "Melanie is painting again this summer.", "author": "Melanie Grey",
     "date": "2023-06-20", "thread": "conv-1", "channel": "chat"},
]
SUPERSEDE = ("lunch", "paint-2", "2023-05-01")
QUESTIONS = ["uptime SLA", "what did Ortiz decide about the SLA", "painted sunset", "painting", "lunch friday", "budget approved"]
AS_OFS = [None, "2023-03-01", "2023-08-01"]
CONFIGS = [
    {"k": 5, "weights": [1, 1, 1]},
    {"k": 5, "weights": [1, 0, 0], "reserve": False},
    {"k": 5, "weights": [0, 0, 1], "reserve": False},
]
CONTEXT = {"context": [0.8, 0.6, 0.4], "context_mode": "max"}


def write_store(path: Path, *, thread_context: bool, ann: bool = False) -> None:
    """Write the store at ``path`` and its answers at ``path`` + ``.expected.json``.

    ``thread_context``: the code has query-time thread context (then every answer is asked with
    ``CONTEXT``; else a later query asks with ``context=[]``, the same ranking). ``ann``: build an
    ANN index too and ask the vector-only answers through it as well.
    """
    shutil.rmtree(path, ignore_errors=True)
    embedder = mempp.HashEmbedder(16)
    with mempp.Store.open(path, embedder=embedder) as s:
        s.add(DOCS_1)
        s.add(DOCS_2)
        s.supersede(*SUPERSEDE[:2], effective=SUPERSEDE[2])
        if ann:
            assert s.build_ann(min_docs=1, m=8, ef_construction=20)["n"] == 9
    configs = CONFIGS + ([dict(CONFIGS[2], vector_index="ann")] if ann else [])
    asked = [dict(c, **CONTEXT) if thread_context else dict(c) for c in configs]
    later = [a if thread_context else dict(a, context=[]) for a in asked]  # what a later query passes
    embeddings, answers = {}, []
    with mempp.Store.open(path, embedder=embedder, read_only=True) as s:
        if ann:
            assert all(a.wait(60) for a in s.searcher().snapshot.ann)
        for question in QUESTIONS:
            vec = embeddings[question] = [float(x) for x in embedder.embed([question])[0]]
            for as_of in AS_OFS:
                for c, kwargs in enumerate(asked):
                    hits = s.query(question, as_of=as_of, embedding=vec, **kwargs)
                    answers.append([question, as_of, c, [[h.key, round(h.score, 9), bool(h.reserved)] for h in hits]])
        facts = {"version": s.version, "documents": len(s), "texts": {k: s.get(k).text for k in ("sla-2", "budget", "paint")}}
    (path / "LOCK").unlink(missing_ok=True)
    expected = {"facts": facts, "configs": later, "embeddings": embeddings, "answers": answers}
    path.with_name(path.name + ".expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
