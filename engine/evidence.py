"""Render hits as evidence for an answering model: the original text with its date and author.

Owns the text format of evidence (:func:`evidence_header`, :func:`format_evidence`) that the CLI,
the demo and the benchmarks print. It reads result types only.

Never imports: store, planner, searcher, mempp.storage.
"""

from __future__ import annotations

from typing import Iterable

from .types import Record


def evidence_header(rec: Record) -> str:
    date = rec.date.date().isoformat() if rec.date else "undated"
    who = rec.author or "unknown author"
    where = [p for p in (rec.channel, f"thread {rec.thread}" if rec.thread else None) if p]
    person = getattr(rec, "person", None)
    if person:  # the people directory's name, the label as written kept beside it
        who, where = person, [f"as {rec.author}"] + where
    replaced = getattr(rec, "superseded_by", None)
    mark = f", {replaced.describe()}" if replaced is not None else ""
    return f"[{date}] {who}" + (f" ({', '.join(where)})" if where else "") + mark + ":"


def format_evidence(hits: Iterable[Record], *, separator: str = "\n\n") -> str:
    """``[2023-09-15] Aisha Patel (email, thread EV-2023-105):`` then the original text, per hit
    (an author the people directory knows by another name: ``Sarah Chen (as schen, email, ...)``).
    A hit that held at the as-of date but was replaced since says so in its header:
    ``[2023-01-05] Ann Lee, superseded on 2023-06-01 by sla-2 (Ben Ortiz):``."""
    return separator.join(f"{evidence_header(h)}\n{h.text}" for h in hits)
