"""The read path of a :class:`~mempp.Store`: query options checked, one query or many answered on
one snapshot (the planner does the ranking: ``planner.py``).

Owns: query-time validation, ``query``/``search``/``explain``, ``query_batch``/``query_stream`` and
their Arrow output. Must never write to the store.

Never imports: writes, mempp.storage.writer, mempp.storage.merge, mempp.bench, onnxruntime.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mempp.storage import Snapshot

from .config import (
    DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_DEPTH, DEFAULT_FEEDBACK, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK,
    default_weights,
)
from .feedback import TAG_RANKS
from .threads import RESERVE_RULES
from .dates import from_us, to_us
from .embedder import embed_queries
from .errors import ValidationError
from .ingest import check_vector
from .planner import NameMatcher, QueryOptions, candidate_mask, run, run_feedback, vector_legs
from .qdates import question_as_of
from .types import LEGS, Hit, Hits, Plan

# A question longer than this is refused (field "text") rather than tokenized and embedded.
MAX_QUERY_CHARS = 1_000_000
MASK_BYTES = 128 << 20  # query_stream: candidate-mask bytes per chunk of queries (one per document and query)
# query_stream's queries per chunk: the int8 scan lays each block of rows out once per chunk and
# a chunk shares one pass over the rows, so larger is faster; but the chunk's masks (one byte per
# document and query) are new memory to fault in on every call. At 100k documents, the first call
# of a fresh process: 256 -> about 920 q/s, 512 -> 970, 1,024 -> 875 (repeated calls: 1,024 best).
DEFAULT_CHUNK = 512


def _batch_schema():
    import pyarrow as pa

    fields = [
        pa.field("query", pa.int32()),
        pa.field("rank", pa.int32()),
        pa.field("doc_id", pa.uint64()),
        pa.field("key", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("reserved", pa.bool_()),
    ]
    return pa.schema(fields + [pa.field(f"rank_{leg}", pa.int32()) for leg in LEGS])


_BATCH_SCHEMA = _batch_schema()


class ReadPath:
    """Queries of a :class:`~mempp.Store` (mixed into it; uses its snapshot, embedder and record readers)."""

    def _options(
        self, *, k, as_of, weights, depth, reserve, legs, authors, threads, channels, date_from, date_to, context, context_length,
        context_mode, vector_index="auto", siblings=DEFAULT_SIBLINGS, reserve_rule=DEFAULT_RESERVE_RULE,
        feedback=DEFAULT_FEEDBACK, tag_rank=DEFAULT_TAG_RANK,
    ) -> QueryOptions:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValidationError(f"expected an integer >= 0, got {k!r}", field="k")
        if depth is None:
            depth = max(DEFAULT_DEPTH, 2 * int(k))  # each leg returns enough for the answer's size
        if weights is None:
            weights = default_weights(int(k))  # 2,1,1 for a short answer, 1,1,1 for a long one
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValidationError(f"expected an integer >= 1, got {depth!r}", field="depth")
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
        if isinstance(siblings, bool) or not isinstance(siblings, (int, np.integer)) or siblings < 0:
            raise ValidationError(f"expected an integer >= 0, got {siblings!r}", field="siblings")
        if reserve_rule not in RESERVE_RULES:
            raise ValidationError(f"expected one of {list(RESERVE_RULES)}, got {reserve_rule!r}", field="reserve_rule")
        if isinstance(feedback, bool) or not isinstance(feedback, (int, np.integer)) or feedback < 0:
            raise ValidationError(f"expected an integer >= 0, got {feedback!r}", field="feedback")
        if tag_rank not in TAG_RANKS:
            raise ValidationError(f"expected one of {list(TAG_RANKS)}, got {tag_rank!r}", field="tag_rank")
        n = max(self._snap.n_docs, 1)
        return QueryOptions(
            feedback=int(feedback),
            tag_rank=tag_rank,
            siblings=int(siblings),
            reserve_rule=reserve_rule,
            context=ctx if any(ctx) else (),
            context_length=None if context_length is None else float(context_length),
            context_max=_context_mode(context_mode),
            ann=_vector_index(vector_index),
            k=int(min(k, n)),
            as_of=_date_arg(as_of, "as_of", end_of_day=True),
            weights=w,
            depth=int(min(depth, n)),
            reserve=bool(reserve),
            authors=_names(authors, "authors"),
            threads=_names(threads, "threads"),
            channels=_names(channels, "channels"),
            date_from=_date_arg(date_from, "date_from", end_of_day=False),
            date_to=_date_arg(date_to, "date_to", end_of_day=True),
        )

    def query(
        self,
        text: str,
        *,
        as_of: Any = None,
        k: int = 10,
        authors: Sequence[str] | str | None = None,
        threads: Sequence[str] | str | None = None,
        channels: Sequence[str] | str | None = None,
        date_from: Any = None,
        date_to: Any = None,
        weights: Sequence[float] | dict[str, float] | None = None,
        depth: int | None = None,
        reserve: bool = True,
        legs: Iterable[str] | None = None,
        embedding: Any = None,
        context: Sequence[float] | None = DEFAULT_CONTEXT,
        context_length: float | None = None,
        context_mode: str = DEFAULT_CONTEXT_MODE,
        question_dates: bool = False,
        vector_index: str = "auto",
        siblings: int = DEFAULT_SIBLINGS,
        reserve_rule: str = DEFAULT_RESERVE_RULE,
        feedback: int = DEFAULT_FEEDBACK,
        tag_rank: str = DEFAULT_TAG_RANK,
    ) -> Hits:
        """The ``k`` documents that best answer ``text`` among those valid at ``as_of``.

        ``as_of``: ISO date/datetime (a date alone means the end of that day); None means now.
        ``weights``: (lexical, tag, vector) or a dict; None (default): 2, 1, 1 for k up to 15 and
        1, 1, 1 above (``mempp.config.default_weights``; the paper's is 1, 1, 4); a weight of 0
        (or a leg left out of ``legs``) skips that leg. ``embedding``: a precomputed query vector skips the embedder.
        A blank ``text`` (empty or whitespace only) is not embedded: it has no words and no
        vector to rank by, so it gets no hits unless ``embedding`` is given (then the vector
        leg ranks by that). :meth:`query_batch` follows the same rule.
        ``context``: thread-context weights for neighbours 1, 2, 3 steps away in the document's
        thread (default ``(0.8, 0.6, 0.4)``; ``()`` turns it off), applied to the lexical and
        vector legs' z-scored scores.
        ``context_length``: neighbours count fully for documents of at most this many index
        terms and proportionally less for longer ones (None: fully for all). ``context_mode``:
        ``"max"`` (default) lifts a document only up to its best neighbour's weighted score;
        ``"sum"`` adds the neighbours' weighted scores.
        ``depth``: candidates each leg returns; None (default): 50, or 2k for k above 25.
        ``siblings``: the thread stage: each candidate of a thread of at most this many documents
        (default 8; 0 turns it off) rises to 0.7 of the best fused score among its thread's other
        members (``mempp.threads``). ``reserve``: the last 3 slots go to the latest-dated documents
        ``reserve_rule`` lets in: ``"relevant"`` (default) strong lexical matches (BM25 at least 0.7
        of the best) within the first 3k places, ``"paper"`` any document a leg matched.
        ``feedback``: the vector leg scans again with the question's vector plus the mean vector
        of this many first fused documents (default 3; 0 turns it off). ``tag_rank``: the tag
        leg's order, ``"fused"`` (default: BM25-then-date fused with cosine) or ``"lexical"``
        (BM25, then date). Both: ``mempp.feedback``.
        ``question_dates``: when ``as_of`` is None, a date the question names ("as of 2023-03-12",
        "in March 2023") becomes the ``as_of`` (the end of that day, month or year).
        ``vector_index``: over documents an ANN index covers (:meth:`build_ann`), ``"auto"``
        lets the planner choose the index or the exact scan per query by cost, ``"ann"`` always
        uses the index, ``"exact"`` never does. Without an index the scan is exact either way.
        """
        self._check_open()
        snap = self._snap  # the whole query runs on this one version, whatever refresh() does meanwhile
        if not isinstance(text, str):
            raise ValidationError(f"expected a string, got {type(text).__name__}", field="text")
        if len(text) > MAX_QUERY_CHARS:
            raise ValidationError(f"a query of {len(text)} characters; at most {MAX_QUERY_CHARS}", field="text")
        from_question = False
        if question_dates and as_of is None:
            named = question_as_of(text)
            if named is not None:
                as_of, from_question = named, True
        opt = self._options(
            k=k, as_of=as_of, weights=weights, depth=depth, reserve=reserve, legs=legs, authors=authors, threads=threads,
            channels=channels, date_from=date_from, date_to=date_to, context=context, context_length=context_length,
            context_mode=context_mode, vector_index=vector_index, siblings=siblings, reserve_rule=reserve_rule,
            feedback=feedback, tag_rank=tag_rank,
        )
        qvec = None
        if opt.weights[2] and self._snap.n_docs:
            if embedding is not None:
                qvec = check_vector(embedding, self.dim)
            elif text.strip():
                qvec = embed_queries(self.embedder, [text])[0]
        hits = self._execute(text, qvec, opt, snap)
        if from_question and hits.plan is not None:
            hits.plan = replace(hits.plan, as_of_from_question=True)
        return hits

    search = query

    def explain(self, text: str, **kwargs: Any) -> Plan:
        """The plan of a query (candidates, legs, timings); runs it."""
        return self.query(text, **kwargs).plan

    def _execute(self, text: str, qvec: np.ndarray | None, opt: QueryOptions, snap: Snapshot | None = None) -> Hits:
        snap = snap or self._snap
        self._warm(snap)
        n = max(snap.n_docs, 1)
        if opt.k > n or opt.depth > n:
            opt = replace(opt, k=min(opt.k, n), depth=min(opt.depth, n))
        hits = Hits()
        hits.version = snap.version
        if snap.n_docs == 0 or opt.k == 0:
            hits.plan = Plan(from_us(opt.as_of), 0, {}, opt.k, opt.depth, opt.reserve)
            return hits
        chosen, fused, rankings, details = run(snap, text, qvec, opt, self._name_matcher(snap))
        rank_of = {leg: {d: i for i, d in enumerate(r)} for leg, r in rankings.items()}
        rows = snap.rows([doc for doc, _ in chosen])
        for (doc, reserved), row in zip(chosen, rows):
            ranks = {leg: rank_of[leg].get(doc) if leg in rank_of else None for leg in LEGS}
            hits.append(self._record(doc, Hit, snap, row=row, score=fused[doc], ranks=ranks, reserved=reserved))
        hits.plan = Plan(
            as_of=from_us(opt.as_of),
            candidates=details["candidates"],
            legs=details["legs"],
            k=opt.k,
            depth=opt.depth,
            reserve=opt.reserve,
            matched_authors=details["matched_authors"],
            timings_ms=details["timings_ms"],
        )
        return hits

    def _name_matcher(self, snap: Snapshot | None = None) -> NameMatcher:
        names = (snap or self._snap).authors.names
        cached = self._matcher  # read once: another thread may replace it (names only grow, so a length identifies them)
        if cached is None or cached[0] != len(names):
            cached = self._matcher = (len(names), NameMatcher(names))
        return cached[1]

    def query_batch(
        self,
        texts: Sequence[str],
        embeddings: Any = None,
        *,
        k: int = 10,
        as_of: Any = None,
        progress: Callable[[int], None] | None = None,
        chunk: int = DEFAULT_CHUNK,
        **kwargs: Any,
    ):
        """Answer many queries; a ``pyarrow.Table`` with one row per hit (see :meth:`query_stream`)."""
        import pyarrow as pa

        batches = list(self.query_stream(texts, embeddings, k=k, as_of=as_of, progress=progress, chunk=chunk, **kwargs))
        return pa.Table.from_batches(batches, schema=_BATCH_SCHEMA)

    def query_stream(
        self,
        texts: Sequence[str],
        embeddings: Any = None,
        *,
        k: int = 10,
        as_of: Any = None,
        progress: Callable[[int], None] | None = None,
        chunk: int = DEFAULT_CHUNK,
        **kwargs: Any,
    ):
        """Answer many queries, yielding one ``pyarrow.RecordBatch`` per ``chunk`` of queries (512 by
        default; fewer on a large store: a chunk's candidate masks, one byte per document and
        query, stay within 128 MB).

        Columns: query (its index), rank, doc_id, key, score (fused), reserved, and rank_lexical,
        rank_tag, rank_vector (null where that leg did not return the document). The same hits
        as :meth:`query` one by one, with the same keyword arguments; ``as_of`` may be one value
        or one per query; query embeddings are computed in batches unless given. A blank
        question (empty or whitespace only) is not embedded and, as with :meth:`query`, has no
        rows unless its embedding is given. Within a
        chunk the vector leg is one pass over each block of documents for all its queries (the int8
        copy, or a float32 matrix product; ``planner.vector_legs``), certified equal to the
        single-query exact scan; a query whose vector leg searches an ANN index
        (``vector_index``, the cost model) is answered by it alone, as :meth:`query` answers it.
        """
        import pyarrow as pa

        self._check_open()
        texts, as_ofs = check_texts(texts, as_of)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValidationError(f"expected an integer >= 1, got {chunk!r}", field="chunk")
        if kwargs.pop("question_dates", False):
            raise ValidationError("not supported in a batch; resolve dates per question first", field="question_dates")
        snap = self._snap
        self._warm(snap)
        n = max(snap.n_docs, 1)  # clamp to the snapshot this stream runs on (refresh() may move self._snap meanwhile)
        opts = self._batch_options(as_ofs, k=k, **kwargs)
        opts = [replace(o, k=min(o.k, n), depth=min(o.depth, n)) if o.k > n or o.depth > n else o for o in opts]
        vecs = None
        if texts and snap.n_docs and opts[0].weights[2]:
            if embeddings is not None:
                vecs = np.asarray(embeddings, dtype=np.float32)
                if vecs.ndim != 2 or vecs.shape != (len(texts), self.dim):
                    raise ValidationError(f"expected shape ({len(texts)}, {self.dim}), got {vecs.shape}", field="embeddings")
                vecs = np.stack([check_vector(v, self.dim) for v in vecs]) if len(vecs) else vecs
        matcher = self._name_matcher(snap)
        chunk = stream_chunk(snap.n_docs, chunk)
        # One mask buffer for every chunk: a fresh one page-faults in as the masks are written (0.1 ms a query at 100k).
        mask_buf = np.empty((min(chunk, len(texts)), snap.n_docs), dtype=np.uint8) if snap.n_docs and texts and opts[0].k else None
        for start in range(0, len(texts), chunk):
            part = range(start, min(len(texts), start + chunk))
            qv = None
            blank = [False] * len(part)
            if vecs is not None:
                qv = vecs[start : part.stop]
            elif texts and snap.n_docs and opts[0].weights[2]:
                qv, blank = self._embed_chunk([texts[i] for i in part])
            cols: dict[str, Any] = {f.name: [] for f in _BATCH_SCHEMA}
            if snap.n_docs and opts[0].k:
                masks = mask_buf[: len(part)]  # one array: vector_legs needs no copy
                for j, i in enumerate(part):
                    candidate_mask(snap, opts[i], out=masks[j])
                counts = np.array([np.count_nonzero(row) for row in masks], dtype=np.int64)
                popts = [opts[i] for i in part]
                vec_rank = vector_legs(snap, qv, masks, popts, counts) if qv is not None else [None] * len(part)
                qvecs = [None if qv is None or blank[j] else qv[j] for j in range(len(part))]
                ptexts = [texts[qi] for qi in part]
                refined, legs = [False] * len(part), [None] * len(part)
                if qv is not None and popts[0].feedback:  # the second scan batched too (planner.run_feedback)
                    vec_rank, refined, legs = run_feedback(snap, ptexts, qvecs, popts, matcher, masks, counts, vec_rank)
                for j, qi in enumerate(part):
                    tag_docs, lexical = legs[j] or (None, None)
                    chosen, fused, rankings, _ = run(
                        snap, ptexts[j], qvecs[j], opts[qi], matcher, mask=masks[j], vector=vec_rank[j], n_cand=int(counts[j]),
                        tag_docs=tag_docs, lexical=lexical, refined=refined[j],
                    )
                    hit_rows(cols, qi, chosen, fused, rankings)
                cols["key"] = snap.keys_of(np.asarray(cols["doc_id"], dtype=np.int64))
            if progress is not None:
                progress(len(part))
            yield pa.RecordBatch.from_pydict(cols, schema=_BATCH_SCHEMA)

    def _embed_chunk(self, texts: list[str]) -> tuple[np.ndarray, list[bool]]:
        """The query vectors of one chunk of a batch and which questions are blank (one embedder
        call per chunk: the same vectors wherever the chunk is embedded, ``mempp.distributed``
        included). As in :meth:`query`, a blank question is not embedded (its row stays zero) and
        its vector leg is off."""
        blank = [not t.strip() for t in texts]
        qv = np.zeros((len(texts), self.dim), dtype=np.float32)
        worded = [j for j, b in enumerate(blank) if not b]
        if worded:
            qv[worded] = embed_queries(self.embedder, [texts[j] for j in worded])
        return qv, blank

    def _batch_options(self, as_ofs: list, **kwargs: Any) -> list[QueryOptions]:
        """:meth:`_query_options` of every ``as_of``, the other options checked once (they are shared)."""
        out: list[QueryOptions] = []
        first: QueryOptions | None = None
        seen: dict = {}
        for a in as_ofs:
            if first is None:
                first = self._query_options(as_of=a, **kwargs)
                opt = first
            else:
                try:
                    known = seen.get(a) if a is None or isinstance(a, str) else None
                except TypeError:
                    known = None
                opt = known if known is not None else replace(first, as_of=_date_arg(a, "as_of", end_of_day=True))
            if a is None or isinstance(a, str):
                seen[a] = opt
            out.append(opt)
        return out

    def _query_options(
        self, *, as_of: Any, k: int = 10, weights: Any = None, depth: Any = None, reserve: bool = True,
        legs: Any = None, authors: Any = None, threads: Any = None, channels: Any = None, date_from: Any = None,
        date_to: Any = None, context: Any = DEFAULT_CONTEXT, context_length: Any = None, context_mode: str = DEFAULT_CONTEXT_MODE,
        vector_index: str = "auto", siblings: Any = DEFAULT_SIBLINGS, reserve_rule: str = DEFAULT_RESERVE_RULE,
        feedback: Any = DEFAULT_FEEDBACK, tag_rank: str = DEFAULT_TAG_RANK,
    ) -> QueryOptions:
        return self._options(
            k=k, as_of=as_of, weights=weights, depth=depth, reserve=reserve, legs=legs, authors=authors, threads=threads,
            channels=channels, date_from=date_from, date_to=date_to, context=context, context_length=context_length,
            context_mode=context_mode, vector_index=vector_index, siblings=siblings, reserve_rule=reserve_rule,
            feedback=feedback, tag_rank=tag_rank,
        )


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
    """Queries per chunk of :meth:`ReadPath.query_stream` on a store of ``n_docs`` documents."""
    return max(1, min(chunk, MASK_BYTES // max(n_docs, 1)))


def batch_columns() -> dict[str, list]:
    """Empty columns of a bulk-scoring result (:func:`hit_rows` fills them)."""
    return {f.name: [] for f in _BATCH_SCHEMA}


def hit_rows(cols: dict[str, list], qi: int, chosen, fused, rankings) -> None:
    """Append query ``qi``'s hits (``planner.run``'s result) to the columns of a bulk-scoring result (all but ``key``)."""
    got = [doc for doc, _ in chosen]
    m = len(got)
    cols["query"] += [qi] * m
    cols["rank"] += range(m)
    cols["doc_id"] += got
    cols["score"] += [fused[doc] for doc in got]
    cols["reserved"] += [reserved for _, reserved in chosen]
    for leg in LEGS:
        ranked = rankings.get(leg)
        if ranked is None:
            cols[f"rank_{leg}"] += [None] * m
        else:
            pos = dict(zip(ranked, range(len(ranked))))
            cols[f"rank_{leg}"] += [pos.get(doc) for doc in got]


def _vector_index(mode: Any) -> str:
    if mode not in ("auto", "ann", "exact"):
        raise ValidationError(f"expected 'auto', 'ann' or 'exact', got {mode!r}", field="vector_index")
    return mode


def _context_mode(mode: Any) -> bool:
    if mode not in ("sum", "max"):
        raise ValidationError(f"expected 'sum' or 'max', got {mode!r}", field="context_mode")
    return mode == "max"


def _date_arg(value: Any, field: str, *, end_of_day: bool) -> int | None:
    if value is None:
        return None
    try:
        return to_us(value, end_of_day=end_of_day)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {value!r} as an ISO 8601 date ({exc})", field=field) from None

def _names(value: Any, field: str) -> tuple[str, ...] | None:
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
