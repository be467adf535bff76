"""One query's options (:class:`QueryOptions`): checked once, frozen, read by every stage.

Owns the options every stage reads (candidates, legs, fusion), their checks and defaults
(:meth:`QueryOptions.build`, the one place an option is validated or clamped to a store's size),
the checks of a query's questions (:func:`check_question`, :func:`check_texts`), the chunk of a
batch (:func:`stream_chunk`), the enumerations of the modes (:class:`ReserveRule`, :class:`TagRank`, :class:`ContextMode`,
:class:`VectorIndex`), and the thread-context share of each document (:func:`context_scale`).
``Searcher.query``, ``query_batch``, the CLI, ``mempp eval``, the shard driver and Ray scoring all
build their options here.

Never imports: candidates, lexical, tags, vector, fusion, planner, searcher, store.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mempp.storage import Snapshot

from .config import (
    DEFAULT_CHAIN, DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_DEPTH, DEFAULT_FEEDBACK, DEFAULT_NAME_FREE, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK,
    default_weights,
)
from .access import check_principal
from .dates import to_us
from .errors import ValidationError
from .types import LEGS


class ReserveRule(enum.StrEnum):
    """Which documents may take a reserve slot (``mempp.threads``)."""

    RELEVANT = "relevant"  # strong lexical matches near the top
    PAPER = "paper"  # any document a leg matched


class TagRank(enum.StrEnum):
    """The tag leg's order (``mempp.feedback``)."""

    FUSED = "fused"  # BM25-then-date fused with cosine
    LEXICAL = "lexical"  # BM25, then date


class ContextMode(enum.StrEnum):
    """How thread context lifts a document (``kernels.context``)."""

    MAX = "max"  # up to its best neighbour's weighted score
    SUM = "sum"  # by its neighbours' weighted scores


class VectorIndex(enum.StrEnum):
    """Which way the vector leg reads documents an ANN index covers (``mempp.vector``)."""

    AUTO = "auto"  # the cheaper by the cost model
    ANN = "ann"  # always the index
    EXACT = "exact"  # never the index


def _member(cls: type[enum.StrEnum], value: Any, field: str):
    try:
        return cls(value)
    except ValueError:
        raise ValidationError(f"expected one of {[m.value for m in cls]}, got {value!r}", field=field) from None


def _count(value: Any, field: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValidationError(f"expected an integer >= {least}, got {value!r}", field=field)
    return int(value)


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"expected True or False, got {value!r}", field=field)
    return bool(value)


def date_arg(value: Any, field: str, *, end_of_day: bool) -> int | None:
    """An optional date option as µs UTC (the library's one date policy: ``mempp.dates``)."""
    if value is None:
        return None
    try:
        return to_us(value, end_of_day=end_of_day)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {value!r} as an ISO 8601 date ({exc})", field=field) from None


def names_arg(value: Any, field: str) -> tuple[str, ...] | None:
    """An optional filter of names: one string or a list of strings."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        out = tuple(value)
    except TypeError:
        raise ValidationError(f"expected a string or list of strings, got {type(value).__name__}", field=field) from None
    if not all(isinstance(v, str) for v in out):
        raise ValidationError("expected strings", field=field)
    return out


def _weights(weights: Any, legs: Any, k: int) -> tuple[float, float, float]:
    if weights is None:
        weights = default_weights(k)  # 2,1,1 for a short answer, 1,1,1 for a long one
    if isinstance(weights, dict):
        unknown = set(weights) - set(LEGS)
        if unknown:
            raise ValidationError(f"unknown legs {sorted(unknown)}; legs are {list(LEGS)}", field="weights")
        weights = tuple(weights.get(leg, 0.0) for leg in LEGS)
    try:
        w = tuple(float(x) for x in weights)
    except (TypeError, ValueError):
        raise ValidationError(f"expected three numbers (lexical, tag, vector), got {weights!r}", field="weights") from None
    if len(w) != 3 or not all(math.isfinite(x) and x >= 0 for x in w):
        raise ValidationError(f"expected three finite numbers >= 0 (lexical, tag, vector), got {weights!r}", field="weights")
    if not any(w):
        raise ValidationError(f"every leg has weight 0, so nothing could rank: {weights!r}", field="weights")
    if legs is not None:
        legs = [legs] if isinstance(legs, str) else list(legs)
        unknown = set(legs) - set(LEGS)
        if unknown:
            raise ValidationError(f"unknown legs {sorted(unknown)}; legs are {list(LEGS)}", field="legs")
        w = tuple(x if leg in legs else 0.0 for leg, x in zip(LEGS, w))
    return w  # type: ignore[return-value]


@dataclass(frozen=True)
class QueryOptions:
    """The options of one query, as every stage reads them. Build one with :meth:`build` (which
    checks every option and fills the defaults); the fields are already checked and normalized."""

    k: int = 10
    as_of: int | None = None  # µs UTC, end of day already applied
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0)  # lexical, tag, vector
    depth: int = 50
    reserve: bool = True
    authors: tuple[str, ...] | None = None
    threads: tuple[str, ...] | None = None
    channels: tuple[str, ...] | None = None
    date_from: int | None = None
    date_to: int | None = None
    context: tuple[float, ...] = ()  # thread-context weights for neighbours 1, 2, ... steps away
    context_length: float | None = None  # neighbours count fully for documents of at most this many terms
    context_mode: ContextMode = ContextMode.SUM
    vector_index: VectorIndex = VectorIndex.AUTO  # vector leg over ANN-indexed ranges (mempp.vector)
    siblings: int = 0  # thread stage: members of threads of at most this many documents are lifted (0: off; mempp.threads)
    reserve_rule: ReserveRule = ReserveRule.PAPER  # which documents may take a reserve slot (mempp.threads)
    feedback: int = 0  # the vector leg runs again with the mean vector of this many first fused documents added (0: off; mempp.feedback)
    tag_rank: TagRank = TagRank.LEXICAL  # tag leg order (mempp.feedback)
    name_free: bool = False  # the question's vector without the names of the people the tag leg matched (mempp.feedback)
    chain: int = 0  # chain stage: the first this many fused documents pull in documents sharing their rare terms (0: off; mempp.chain)
    principal: Any = None  # who asks (mempp.access): None, mempp.ADMIN, "user:NAME" or "group:NAME"

    @property
    def context_max(self) -> bool:
        """A neighbour lifts a document to betas[h] x its score, not by it (``kernels.context``)."""
        return self.context_mode is ContextMode.MAX

    @classmethod
    def build(
        cls, *, k: Any = 10, as_of: Any = None, weights: Any = None, depth: Any = None, reserve: Any = True, legs: Iterable[str] | str | None = None,
        authors: Any = None, threads: Any = None, channels: Any = None, date_from: Any = None, date_to: Any = None,
        context: Any = DEFAULT_CONTEXT, context_length: Any = None, context_mode: Any = DEFAULT_CONTEXT_MODE, vector_index: Any = "auto",
        siblings: Any = DEFAULT_SIBLINGS, reserve_rule: Any = DEFAULT_RESERVE_RULE, feedback: Any = DEFAULT_FEEDBACK,
        tag_rank: Any = DEFAULT_TAG_RANK, name_free: Any = DEFAULT_NAME_FREE, chain: Any = DEFAULT_CHAIN, principal: Any = None, n_docs: int | None = None,
    ) -> "QueryOptions":
        """Check every option of a query (a ``ValidationError`` names the first bad one) and fill
        the defaults: ``weights=None`` by ``k`` (``config.default_weights``), ``depth=None`` 50 or
        2k. ``n_docs``: clamp ``k`` and ``depth`` to a store of that many documents."""
        k = _count(k, "k", 0)
        depth = max(DEFAULT_DEPTH, 2 * k) if depth is None else _count(depth, "depth", 1)  # each leg returns enough for the answer
        w = _weights(weights, legs, k)
        try:
            ctx = tuple(float(x) for x in (context or ()))
        except (TypeError, ValueError):
            raise ValidationError(f"expected a list of numbers, got {context!r}", field="context") from None
        if len(ctx) > 8 or not all(math.isfinite(x) and x >= 0 for x in ctx):
            raise ValidationError(f"expected at most 8 finite numbers >= 0, got {context!r}", field="context")
        if context_length is not None and (
            isinstance(context_length, bool) or not isinstance(context_length, (int, float)) or not context_length > 0
        ):
            raise ValidationError(f"expected a number > 0 or None, got {context_length!r}", field="context_length")
        opt = cls(
            k=k,
            as_of=date_arg(as_of, "as_of", end_of_day=True),
            weights=w,
            depth=depth,
            reserve=bool(reserve),
            authors=names_arg(authors, "authors"),
            threads=names_arg(threads, "threads"),
            channels=names_arg(channels, "channels"),
            date_from=date_arg(date_from, "date_from", end_of_day=False),
            date_to=date_arg(date_to, "date_to", end_of_day=True),
            context=ctx if any(ctx) else (),
            context_length=None if context_length is None else float(context_length),
            context_mode=_member(ContextMode, context_mode, "context_mode"),
            vector_index=_member(VectorIndex, vector_index, "vector_index"),
            siblings=_count(siblings, "siblings", 0),
            reserve_rule=_member(ReserveRule, reserve_rule, "reserve_rule"),
            feedback=_count(feedback, "feedback", 0),
            tag_rank=_member(TagRank, tag_rank, "tag_rank"),
            name_free=_flag(name_free, "name_free"),
            chain=_count(chain, "chain", 0),
            principal=None if principal is None else check_principal(principal),
        )
        return opt if n_docs is None else opt.clamped(n_docs)

    def clamped(self, n_docs: int) -> "QueryOptions":
        """These options with ``k`` and ``depth`` at most a store's ``n_docs`` (at least 1)."""
        n = max(int(n_docs), 1)
        if self.k <= n and self.depth <= n:
            return self
        return replace(self, k=min(self.k, n), depth=min(self.depth, n))

    def at(self, as_of: Any) -> "QueryOptions":
        """These options with another ``as_of`` (checked as :meth:`build` checks it)."""
        return replace(self, as_of=date_arg(as_of, "as_of", end_of_day=True))


def context_scale(snap: Snapshot, opt: QueryOptions) -> np.ndarray:
    """Per-document share of the neighbours: ``min(1, context_length / length)``; empty when unscaled.

    A short turn of a conversation is read with its neighbours; a long, self-contained
    document (an email, a policy page) much less so.
    """
    if not opt.context or opt.context_length is None:
        return np.zeros(0, dtype=np.float32)
    lengths = snap.lengths
    return np.minimum(1.0, opt.context_length / np.maximum(lengths, 1.0)).astype(np.float32)


# A question longer than this is refused (field "text") rather than tokenized and embedded.
MAX_QUERY_CHARS = 1_000_000
MASK_BYTES = 128 << 20  # query_stream: candidate-mask bytes per chunk of queries (one per document and query)
# query_stream's queries per chunk: the int8 scan lays each block of rows out once per chunk and
# a chunk shares one pass over the rows, so larger is faster; but the chunk's masks (one byte per
# document and query) are new memory to fault in on every call. At 100k documents, the first call
# of a fresh process: 256 -> about 920 q/s, 512 -> 970, 1,024 -> 875 (repeated calls: 1,024 best).
DEFAULT_CHUNK = 512


def check_question(text: Any) -> None:
    """A question must be a string of at most ``MAX_QUERY_CHARS`` characters (field ``text``)."""
    if not isinstance(text, str):
        raise ValidationError(f"expected a string, got {type(text).__name__}", field="text")
    if len(text) > MAX_QUERY_CHARS:
        raise ValidationError(f"a query of {len(text)} characters; at most {MAX_QUERY_CHARS}", field="text")


def check_texts(texts: Sequence[str], as_of: Any) -> tuple[list[str], list]:
    """A batch's questions checked (strings, not too long) and its ``as_of`` as one value per question."""
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValidationError(f"expected a string, got {type(t).__name__}", field="text", record=i)
        if len(t) > MAX_QUERY_CHARS:
            raise ValidationError(f"a query of {len(t)} characters; at most {MAX_QUERY_CHARS}", field="text", record=i)
    as_ofs = list(as_of) if isinstance(as_of, (list, tuple)) else [as_of] * len(texts)
    if len(as_ofs) != len(texts):
        raise ValidationError(f"expected {len(texts)} dates, got {len(as_ofs)}", field="as_of")
    return texts, as_ofs


def stream_chunk(n_docs: int, chunk: int = DEFAULT_CHUNK) -> int:
    """Queries per chunk of :meth:`Searcher.query_stream` on a store of ``n_docs`` documents."""
    return max(1, min(chunk, MASK_BYTES // max(n_docs, 1)))


def per_as_of(build: Callable[..., QueryOptions], as_ofs: Sequence[Any], **kwargs: Any) -> list[QueryOptions]:
    """A batch's options, one per ``as_of``: ``build`` (``Searcher.options``) checks the others once
    (they are shared), and each distinct ``as_of`` string is parsed once."""
    out: list[QueryOptions] = []
    first: QueryOptions | None = None
    seen: dict = {}
    for a in as_ofs:
        if first is None:
            opt = first = build(as_of=a, **kwargs)
        else:
            try:
                known = seen.get(a) if a is None or isinstance(a, str) else None
            except TypeError:
                known = None
            opt = known if known is not None else first.at(a)
        if a is None or isinstance(a, str):
            seen[a] = opt
        out.append(opt)
    return out
