"""``mempp.langchain.MemppRetriever``: a store as a LangChain retriever (extra ``mempp[langchain]``).

Owns the retriever: its fields (the store, ``k``, ``as_of``, the filters, any other query
option), the translation of a query into :meth:`Store.query`, and of each hit into a LangChain
``Document`` whose ``page_content`` is the original text and whose metadata carry the id, date,
author, thread, channel, fused score and each leg's share of it and rank. Sync and async (the async path runs the
query in a worker thread; a store answers queries from several threads at once).

Needs ``langchain-core``; ``import mempp`` never imports this module.

Never imports: cli, planner, searcher, writer, mempp.bench, mempp.storage.
"""

from __future__ import annotations

import asyncio
import os
from datetime import date, datetime
from typing import Any, Optional, Union

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, Field, PrivateAttr, field_validator
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(f"mempp.langchain needs langchain-core: pip install 'mempp[langchain]' ({exc})") from exc

from .store import Store
from .fusion import RRF_C
from .types import Hit, Plan

# Query keywords a call may pass (``retriever.invoke(q, k=3, as_of="2023-03-01")``) besides the fields.
CALL_OPTIONS = ("k", "as_of", "authors", "threads", "channels")


def hit_document(hit: Hit, plan: Plan | None = None) -> Document:
    """One hit as a LangChain document: the original text, and where it came from in the metadata
    (``leg_scores``: each leg's share of the fused ``score``, ``weight / (RRF_C + rank)``)."""
    ranks = dict(hit.ranks)
    legs = plan.legs if plan is not None else {}
    shares = {leg: None if r is None else float(legs.get(leg, {}).get("weight", 1.0)) / (RRF_C + r) for leg, r in ranks.items()}
    meta: dict[str, Any] = {
        "id": hit.key,
        "doc_id": hit.doc_id,
        "date": hit.date.isoformat() if hit.date else None,
        "author": hit.author,
        **({"person": hit.person} if hit.person else {}),  # the people directory's name for that author
        "thread": hit.thread,
        "channel": hit.channel,
        "valid_until": hit.valid_until.isoformat() if hit.valid_until else None,
        "superseded_by": hit.superseded_by.describe() if hit.superseded_by else None,
        "score": float(hit.score),
        "leg_scores": shares,
        "ranks": ranks,
        **{f"rank_{leg}": rank for leg, rank in ranks.items()},
        "reserved": bool(hit.reserved),
    }
    return Document(page_content=hit.text, metadata=meta, id=hit.key if hit.key is not None else str(hit.doc_id))


class MemppRetriever(BaseRetriever):
    """Retrieve the original evidence from a mempp store, as of a date.

    >>> retriever = MemppRetriever(store=store, k=5, as_of="2023-03-01")   # doctest: +SKIP
    >>> retriever.invoke("what is the uptime SLA?")[0].metadata["author"]  # doctest: +SKIP
    'Aisha Patel'

    ``store``: an open :class:`mempp.Store`, or a path (opened read-only; :meth:`close` closes it).
    ``k``, ``as_of``, ``authors``, ``threads``, ``channels``: as :meth:`Store.query`; a call may
    override each (``invoke(q, k=3, as_of=...)``). ``options``: any other keyword of
    :meth:`Store.query` (``weights``, ``depth``, ...). ``refresh``: before each query, move the
    store to its newest commit (:meth:`Store.refresh`) so that writes made since are seen.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any = Field(description="a mempp.Store, or the path of one (opened read-only)")
    k: int = Field(default=10, ge=1, description="documents to return")
    as_of: Optional[Union[str, datetime, date]] = Field(default=None, description="answer as the record stood then (None: now)")
    authors: Optional[list[str]] = None
    threads: Optional[list[str]] = None
    channels: Optional[list[str]] = None
    options: dict[str, Any] = Field(default_factory=dict, description="other keywords of Store.query")
    refresh: bool = True
    _owned: bool = PrivateAttr(default=False)

    @field_validator("store", mode="before")
    @classmethod
    def _open(cls, value: Any) -> Any:
        if isinstance(value, (str, os.PathLike)):
            return Store.open(value, read_only=True)
        if not isinstance(value, Store):
            raise ValueError(f"expected a mempp.Store or the path of one, got {type(value).__name__}")
        return value

    def __init__(self, **data: Any) -> None:
        opened = isinstance(data.get("store"), (str, os.PathLike))
        super().__init__(**data)
        self._owned = opened

    def close(self) -> None:
        """Close the store if this retriever opened it (from a path)."""
        if self._owned:
            self.store.close()

    def _search(self, query: str, overrides: dict[str, Any]) -> list[Document]:
        overrides = {key: v for key, v in overrides.items() if key != "verbose"}  # BaseRetriever.invoke's own
        unknown = set(overrides) - set(CALL_OPTIONS) - _QUERY_KEYWORDS
        if unknown:
            raise TypeError(f"MemppRetriever got unexpected keyword(s): {', '.join(sorted(unknown))}")
        opts = {"k": self.k, "as_of": self.as_of, "authors": self.authors, "threads": self.threads, "channels": self.channels}
        opts.update(self.options)
        opts.update(overrides)
        if self.refresh:
            self.store.refresh()
        hits = self.store.query(query, **opts)
        return [hit_document(h, hits.plan) for h in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        return self._search(query, kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await asyncio.to_thread(self._search, query, kwargs)


def _query_keywords() -> set[str]:
    import inspect

    return {p for p in inspect.signature(Store.query).parameters if p not in ("self", "text")}


_QUERY_KEYWORDS = _query_keywords()
