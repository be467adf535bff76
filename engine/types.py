"""Typed documents and results.

Owns the frozen dataclasses callers see: :class:`Document` (what goes in), :class:`Record` (what
is stored), :class:`Hit` and :class:`Hits` (what a query returns, with its :class:`Plan`), their
``to_dict``/JSON forms, and the leg names (:data:`LEGS`). A leaf: the read path builds results,
never the other way round.

Never imports: store, searcher, planner, mempp.storage, pyarrow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

LEGS = ("lexical", "tag", "vector")


@dataclass(frozen=True)
class Document:
    """A document to add (``id`` is the caller's key). Plain dicts with the same fields work too."""

    text: str
    id: str | None = None
    author: str | None = None
    date: str | datetime | None = None
    thread: str | None = None
    channel: str | None = None
    source: str | None = None
    supersedes: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    readers: tuple[str, ...] | None = None  # who may read it (None: as the key's newest version, else everyone)


@dataclass(frozen=True)
class Replacement:
    """The document that replaced a record (its earliest supersession): from ``on``, ``key`` by
    ``author``; ``doc_id`` None when the reader may not read it, or the store does not hold it."""

    on: datetime
    doc_id: int | None
    key: str | None
    author: str | None

    def describe(self) -> str:
        """``superseded on 2023-06-01 by sla-2 (Ben Ortiz)``: how evidence marks a replaced record
        (``superseded on 2023-06-01`` when the replacement is not the reader's to see)."""
        if self.doc_id is None:
            return f"superseded on {self.on.date().isoformat()}"
        by = self.key if self.key is not None else f"doc {self.doc_id}"
        return f"superseded on {self.on.date().isoformat()} by {by}" + (f" ({self.author})" if self.author else "")

    def to_dict(self) -> dict[str, Any]:
        return {"on": self.on.isoformat(), "doc_id": self.doc_id, "key": self.key, "author": self.author}


@dataclass(frozen=True)
class Record:
    """A stored document, whole and unchanged."""

    doc_id: int
    key: str | None
    text: str
    author: str | None
    date: datetime | None
    ingested_at: datetime
    thread: str | None
    channel: str | None
    source: str | None
    meta: dict[str, Any]
    valid_until: datetime | None = None  # earliest supersession effective date, None if never superseded
    superseded_by: Replacement | None = None  # the document that replaced it on valid_until (None while it holds)
    readers: tuple[str, ...] | None = None  # who may read it now (None: everyone; mempp.access)
    reader_periods: tuple[dict[str, Any], ...] | None = None  # history(): who could read it, from when to when
    person: str | None = None  # the people directory's name for the author, where the label differs ("schen": "Sarah Chen")

    def to_dict(self) -> dict[str, Any]:
        out = {
            "doc_id": self.doc_id,
            "key": self.key,
            "date": self.date.isoformat() if self.date else None,
            "author": self.author,
            "thread": self.thread,
            "channel": self.channel,
            "source": self.source,
            "ingested_at": self.ingested_at.isoformat(),
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
            "superseded_by": self.superseded_by.to_dict() if self.superseded_by else None,
            "readers": None if self.readers is None else list(self.readers),
            "text": self.text,
            "meta": self.meta,
        }
        if self.person is not None:
            out["person"] = self.person
        if self.reader_periods is not None:
            out["reader_periods"] = [
                {"from": p["from"].isoformat(), "until": p["until"].isoformat() if p["until"] else None, "readers": p["readers"]}
                for p in self.reader_periods
            ]
        return out


@dataclass(frozen=True)
class Hit(Record):
    """One retrieved document: the original evidence, its fused score and its rank in every leg."""

    score: float = 0.0
    ranks: dict[str, int | None] = field(default_factory=dict)  # leg -> rank from 0, None if not returned
    reserved: bool = False  # placed by the latest-date reserve rather than by fused score

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "score": self.score, "ranks": dict(self.ranks), "reserved": self.reserved}


@dataclass(frozen=True)
class Plan:
    """What the planner did for one query (``explain``)."""

    as_of: datetime | None
    candidates: int
    legs: dict[str, dict[str, Any]]  # leg -> {"weight", "returned", "method", ...}
    k: int
    depth: int
    reserve: bool
    matched_authors: tuple[str, ...] = ()
    timings_ms: dict[str, float] = field(default_factory=dict)
    as_of_from_question: bool = False  # the as_of was read from a date the question names
    chained: dict[int, list[int]] = field(default_factory=dict)  # chain stage: hit doc id -> the doc ids it lifted (mempp.chain)

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "as_of_from_question": self.as_of_from_question,
            "candidates": self.candidates,
            "legs": self.legs,
            "k": self.k,
            "depth": self.depth,
            "reserve": self.reserve,
            "matched_authors": list(self.matched_authors),
            "timings_ms": self.timings_ms,
            "chained": {str(h): list(ds) for h, ds in self.chained.items()},
        }


class Added(list):
    """What :meth:`Store.add` returns: a list with one entry per input (the new doc id; the
    stored doc id of a re-ingest; None for an empty text, skipped), and what this call itself
    did, whatever other writers committed before or after it:

    - ``new``: documents this call stored (distinct new doc ids);
    - ``existing``: inputs that matched a document already stored, or an earlier input of the
      same call (their entry is that document's id);
    - ``skipped``: inputs with an empty or whitespace-only text.

    ``new + existing + skipped == len(ids)``. ``first``: the first doc id the commit gave this
    call's documents (doc ids are assigned in order, so an entry at or above it is a document
    this call stored).
    """

    def __init__(self, ids=(), first: int = 0) -> None:
        super().__init__(ids)
        self.first = first

    @property
    def new(self) -> int:
        return len({i for i in self if i is not None and i >= self.first})

    @property
    def skipped(self) -> int:
        return sum(1 for i in self if i is None)

    @property
    def existing(self) -> int:
        return len(self) - self.new - self.skipped


class Hits(list):
    """The hits of one query, best first, with the :class:`Plan` that produced them."""

    plan: Plan | None = None
    version: int | None = None  # the committed version (snapshot) the query ran on

    def to_json(self) -> str:
        return json.dumps(
            {"plan": self.plan.to_dict() if self.plan else None, "hits": [h.to_dict() for h in self]},
            ensure_ascii=False,
        )
