"""``mempp.Searcher``: every read of one committed version (docs/DESIGN.md §3, §6).

A :class:`Searcher` is pinned to one version of a store: whatever is committed meanwhile, its
answers do not change. It is read-only, owns that version's caches (``mempp.caches``) and is
safe to share between threads. ``Store.searcher()`` gives the current one; every read of a
:class:`~mempp.Store` is its current searcher's, and the shard driver, Ray workers, the CLI and
``mempp eval`` read through one too.

Owns: queries (``query``/``search``/``explain``, ``query_batch``/``query_stream`` and their Arrow
output; the ranking is ``planner.py``'s), single records (``get``, ``history``, ``documents``,
``replacements``, ``authors``), ``export``, ``versions`` and the version's counts (``stats``).
Must never write to the store.

Never imports: store, writer, compaction, mempp.storage.commits, mempp.storage.merge, mempp.bench, onnxruntime.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from mempp.storage import FOREVER, NAT, Analyzer, Snapshot

from .caches import VersionCaches, version_caches
from .config import (
    DEFAULT_CHAIN, DEFAULT_CONTEXT, DEFAULT_CONTEXT_MODE, DEFAULT_FEEDBACK, DEFAULT_NAME_FREE, DEFAULT_RESERVE_RULE, DEFAULT_SIBLINGS, DEFAULT_TAG_RANK, IndexConfig,
)
from .dates import from_us
from .docindex import DocIndex
from .embedder import Embedder, embed_queries
from .feedback import name_free
from .access import ADMIN, Access, check_principal, denied_without_principal
from .errors import DocumentNotFound, EmbedderError, ValidationError
from .reader_view import ReaderView
from .replaced import earliest_replacement, replacement_list
from .ingest import check_query_vectors, check_vector
from .options import DEFAULT_CHUNK, QueryOptions, check_question, check_texts, date_arg, names_arg, per_as_of, stream_chunk
from .planner import Given, NameMatcher, candidate_mask, run, run_feedback, vector_legs
from .question_dates import question_as_of
from .results import BATCH_SCHEMA, batch_columns, hit_rows
from .versions import version_list
from .stats import version_stats
from .types import LEGS, Hit, Hits, Plan, Record, Replacement

class Searcher:
    """Reads of one committed version of a store (read-only, pinned, thread-safe).

    >>> import mempp, tempfile
    >>> with mempp.Store.open(tempfile.mkdtemp() + "/org", embedder=mempp.HashEmbedder()) as s:
    ...     _ = s.add([{"id": "a", "text": "SLA is 99.9%", "author": "Ann Lee", "date": "2023-01-05"}])
    ...     searcher = s.searcher()
    ...     _ = s.add([{"id": "b", "text": "SLA is 99.95%", "author": "Ann Lee", "date": "2023-06-01"}])
    ...     len(searcher), len(s.searcher())
    (1, 2)
    """

    def __init__(
        self,
        path: Path,
        snapshot: Snapshot,
        *,
        embedder: Callable[[], Embedder],
        embedder_info: dict,
        analyzer: Analyzer,
        index: IndexConfig,
        docs: DocIndex | None = None,
        on_query: Callable[[Snapshot], None] | None = None,
        access: Callable[[], Access] | None = None,
    ) -> None:
        """Made by :class:`~mempp.Store` (``Store.searcher()``); ``embedder``: a callable giving
        the store's embedder (loaded on first use); ``docs``: the store's shared key index;
        ``on_query``: called with the snapshot on each query (the store's residency); ``access``:
        gives the permissions in force (the store's newest; default: this version's)."""
        self.path = path
        self._snap = snapshot
        self._embedder = embedder
        self._embedder_info = dict(embedder_info)
        self.analyzer = analyzer
        self.index = index
        self._docs = docs if docs is not None else DocIndex()
        self._on_query = on_query
        self._access = access
        self._caches: VersionCaches = version_caches(snapshot)  # held: they live as long as this searcher
        self._matcher: NameMatcher | None = None
        self._matcher_lock = threading.Lock()
        self._readers: dict[tuple, Searcher] = {}  # (permissions, principal or readable set) -> its searcher (reader())

    # --- what it reads ------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        """The committed version this searcher reads (``mempp.storage.Snapshot``; read-only)."""
        return self._snap

    @property
    def version(self) -> int:
        return self._snap.version

    @property
    def dim(self) -> int:
        return int(self._embedder_info["dim"])

    @property
    def embedder_info(self) -> dict:
        """The manifest's record of the store's embedder (model id, dimension, window, sha256)."""
        return dict(self._embedder_info)

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    @property
    def name_matcher(self) -> NameMatcher:
        """The tag leg's matcher of this version's author names and the newest people directory
        (built again when the directory changes)."""
        people = self.access().directory
        found = self._matcher
        if found is None or (found.people is not people and found.people != people):  # a refolded log: compare
            with self._matcher_lock:
                view = isinstance(self._snap, ReaderView)
                found = self._matcher = NameMatcher(self._snap.authors.readable_names if view else self._snap.authors.names, people)
        return found

    def __len__(self) -> int:
        return self._snap.n_docs

    @property
    def size(self) -> int:
        """The documents this searcher answers from: the version's (less the erased), or those its reader may read."""
        snap = self._snap
        return snap.n_global if isinstance(snap, ReaderView) else snap.n_live

    # --- who may read -------------------------------------------------------------------------------
    def access(self) -> Access:
        """The permissions in force (``mempp.access``): always the newest the store knows, whatever this version."""
        if self._access is not None:
            return self._access()
        return Access.of(self.path, self._snap.state)

    def allow(self, principal: Any, access: Access | None = None) -> Any:
        """``principal`` checked (None, :data:`mempp.ADMIN`, ``user:NAME``, ``group:NAME``); a store
        holding restricted documents refuses a read without one (:class:`AccessDenied`).
        ``access``: the permissions in force, when the caller has them already."""
        if principal is not None:
            principal = check_principal(principal)
        elif (access or self.access()).restricted:
            raise denied_without_principal(self.path)
        return principal

    def reader(self, principal: Any) -> "Searcher":
        """The searcher that answers ``principal``: this one where it may read every document of this
        version (or is :data:`mempp.ADMIN`, or nothing is restricted), else one over a
        :class:`~mempp.reader_view.ReaderView` of this version: every answer, statistic and count
        that of a store holding only what it may read (docs/DESIGN.md §8.3)."""
        if isinstance(self._snap, ReaderView):  # already one reader's (made by reader())
            return self
        access = self.access()
        principal = self.allow(principal, access)
        gone = access.erased_ids[access.erased_ids < self._snap.n_docs]  # erased after this version was opened: nobody's
        gone = gone[~np.isin(gone, self._snap.erased)] if len(gone) else gone
        if (principal is None or principal is ADMIN or not access.restricted) and not len(gone):
            return self
        known = self._readers.get((access, principal))  # this principal under these permissions, seen before
        if known is not None:
            return known
        readable = access.readable(ADMIN if principal is None else principal, self._snap.n_docs)
        readable[gone] = False
        if readable.all():
            found = self
        else:
            found = self._view(access, readable)
        with self._matcher_lock:
            self._readers[(access, principal)] = found
            while len(self._readers) > 16:
                self._readers.pop(next(iter(self._readers)))
        return found

    def _view(self, access: Access, readable: np.ndarray) -> "Searcher":
        """The searcher over the :class:`ReaderView` of ``readable`` (one per readable set, kept)."""
        key = (access, hashlib.blake2b(np.packbits(readable).tobytes(), digest_size=16).digest())
        with self._matcher_lock:
            found = self._readers.get(key)
            if found is None:
                found = Searcher(
                    self.path, ReaderView(self._snap, readable), embedder=self._embedder, embedder_info=self._embedder_info,
                    analyzer=self.analyzer, index=self.index, docs=self._docs, on_query=self._on_query, access=self._access,
                )
                self._readers[key] = found
        return found

    # --- options ------------------------------------------------------------------------------------
    def options(self, **kwargs: Any) -> QueryOptions:
        """A query's options checked and clamped to this version's size (:meth:`QueryOptions.build`;
        the keywords of :meth:`query` less ``embedding`` and ``question_dates``)."""
        return QueryOptions.build(n_docs=self.size, **kwargs)

    def batch_options(self, as_ofs: Sequence[Any], **kwargs: Any) -> list[QueryOptions]:
        """:meth:`options` for each ``as_of`` of a batch, the other options checked once (they are shared)."""
        return per_as_of(self.options, as_ofs, **kwargs)

    # --- one query ----------------------------------------------------------------------------------
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
        chain: int = DEFAULT_CHAIN, principal: Any = None, name_free: bool = DEFAULT_NAME_FREE,
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
        (BM25, then date). ``name_free`` (default True): every use of the question's vector
        leaves out the names it gives of this store's people. All three: ``mempp.feedback``. ``chain``: the chain stage (``mempp.chain``; default 2; 0: off).
        ``question_dates``: when ``as_of`` is None, a date the question names ("as of 2023-03-12",
        "in March 2023") becomes the ``as_of`` (the end of that day, month or year).
        ``vector_index``: over documents an ANN index covers (``Store.build_ann``), ``"auto"``
        lets the planner choose the index or the exact scan per query by cost, ``"ann"`` always
        uses the index, ``"exact"`` never does. Without an index the scan is exact either way.
        ``principal``: who asks (``"user:NAME"``, ``"group:NAME"`` or :data:`mempp.ADMIN`); a store
        holding restricted documents refuses a query without one (:meth:`allow`).
        """
        check_question(text)
        from_question = False
        if question_dates and as_of is None:
            named = question_as_of(text)
            if named is not None:
                as_of, from_question = named, True
        opt = self.options(
            k=k, as_of=as_of, weights=weights, depth=depth, reserve=reserve, legs=legs, authors=authors, threads=threads,
            channels=channels, date_from=date_from, date_to=date_to, context=context, context_length=context_length,
            context_mode=context_mode, vector_index=vector_index, siblings=siblings, reserve_rule=reserve_rule,
            feedback=feedback, tag_rank=tag_rank, chain=chain, principal=principal, name_free=name_free,
        )
        hits = self.run(text, opt, embedding=embedding)
        if from_question and hits.plan is not None:
            hits.plan = replace(hits.plan, as_of_from_question=True)
        return hits

    search = query

    def explain(self, text: str, **kwargs: Any) -> Plan:
        """The plan of a query (candidates, legs, timings); runs it."""
        return self.query(text, **kwargs).plan

    def run(self, text: str, opt: QueryOptions, *, embedding: Any = None) -> Hits:
        """Answer ``text`` with options already built (:meth:`options`); ``embedding``: the
        question's vector (else the embedder makes it, unless the text is blank)."""
        check_question(text)
        reader = self.reader(opt.principal)
        if reader is not self:
            return reader.run(text, opt, embedding=embedding)
        snap = self._snap
        size = self.size
        qvec = None
        if opt.weights[2] and size:
            if embedding is not None:
                qvec = check_vector(embedding, self.dim)
            elif text.strip():
                qvec = embed_queries(self.embedder, [text])[0]
        if self._on_query is not None:
            self._on_query(snap)
        opt = self.name_matcher.resolved(opt.clamped(size))
        hits = Hits()
        hits.version = snap.version
        if size == 0 or opt.k == 0:
            hits.plan = Plan(from_us(opt.as_of), 0, {}, opt.k, opt.depth, opt.reserve)
            return hits
        qvec = None if qvec is None else self.name_free_vectors([text], [opt], qvec[None, :])[0]
        chosen, fused, rankings, details = run(snap, text, qvec, opt, self.name_matcher)
        rank_of = {leg: {d: i for i, d in enumerate(r)} for leg, r in rankings.items()}
        docs = [doc for doc, _ in chosen]
        hits.extend(self.records(docs, Hit, snap.rows(docs), [
            {"score": fused[doc], "ranks": {leg: rank_of[leg].get(doc) if leg in rank_of else None for leg in LEGS}, "reserved": reserved}
            for doc, reserved in chosen
        ]))
        hits.plan = Plan(
            as_of=from_us(opt.as_of),
            candidates=details["candidates"],
            legs=details["legs"],
            k=opt.k,
            depth=opt.depth,
            reserve=opt.reserve,
            matched_authors=details["matched_authors"] if not isinstance(snap, ReaderView) else tuple(
                snap.authors.in_readable_order(details["matched_authors"])),
            timings_ms=details["timings_ms"], chained=details.get("chained", {}),
        )
        return hits

    # --- many queries -------------------------------------------------------------------------------
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
        return pa.Table.from_batches(batches, schema=BATCH_SCHEMA)

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
        question (empty or whitespace only) is not embedded and, as with :meth:`query`, has no rows
        unless its embedding is given. Within a chunk the vector leg is one pass over each block of
        documents for all its queries (the int8 copy, or a float32 matrix product;
        ``planner.vector_legs``), certified equal to the single-query exact scan; a query whose vector leg searches an ANN index
        (``vector_index``, the cost model) is answered by it alone, as :meth:`query` answers it.
        """
        texts, as_ofs = check_texts(texts, as_of)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValidationError(f"expected an integer >= 1, got {chunk!r}", field="chunk")
        if kwargs.pop("question_dates", False):
            raise ValidationError("not supported in a batch; resolve dates per question first", field="question_dates")
        opts = self.batch_options(as_ofs, k=k, **kwargs)
        reader = self.reader(opts[0].principal if opts else kwargs.get("principal"))
        opts = [o.clamped(reader.size) for o in opts]
        vecs = None
        if embeddings is not None and texts and reader.size and opts[0].weights[2]:
            vecs = check_query_vectors(embeddings, len(texts), self.dim)
        return reader._stream(texts, opts, vecs, progress, chunk)

    def _stream(self, texts: list[str], opts: list[QueryOptions], vecs: np.ndarray | None, progress, chunk: int):
        import pyarrow as pa

        snap = self._snap
        if self._on_query is not None:
            self._on_query(snap)
        matcher = self.name_matcher
        opts = [matcher.resolved(o) for o in opts]
        chunk = stream_chunk(snap.n_docs, chunk)
        # One mask buffer for every chunk: a fresh one page-faults in as the masks are written (0.1 ms a query at 100k).
        size = self.size
        mask_buf = np.empty((min(chunk, len(texts)), snap.n_docs), dtype=np.uint8) if size and texts and opts[0].k else None
        for start in range(0, len(texts), chunk):
            part = range(start, min(len(texts), start + chunk))
            qv = None
            blank = [False] * len(part)
            if vecs is not None:
                qv = vecs[start : part.stop]
            elif texts and size and opts[0].weights[2]:
                qv, blank = self.embed_questions([texts[i] for i in part])
            qv = self.name_free_vectors([texts[i] for i in part], [opts[i] for i in part], qv, blank)
            cols = batch_columns()
            if size and opts[0].k:
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
                    given = Given(mask=masks[j], vector=vec_rank[j], n_cand=int(counts[j]), tag_docs=tag_docs, lexical=lexical, refined=refined[j])
                    chosen, fused, rankings, _ = run(snap, ptexts[j], qvecs[j], opts[qi], matcher, given)
                    hit_rows(cols, qi, chosen, fused, rankings)
                cols["key"] = snap.keys_of(np.asarray(cols["doc_id"], dtype=np.int64))
            if progress is not None:
                progress(len(part))
            yield pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)

    def name_free_vectors(self, texts: Sequence[str], opts: Sequence[QueryOptions], qv: np.ndarray | None, blank: Sequence[bool] = ()) -> np.ndarray | None:
        """``qv`` less the names each question gives, where asked (``mempp.feedback.name_free``)."""
        try:  # the store's model embeds the names (loaded when a name is new)
            return name_free(self.name_matcher.named_phrases, str(self._embedder_info.get("model_id")),
                             lambda names: embed_queries(self.embedder, names), texts, opts, qv, blank)
        except EmbedderError:  # vectors of a model mempp cannot load, supplied with the question: names stay in
            return qv

    def embed_questions(self, texts: list[str]) -> tuple[np.ndarray, list[bool]]:
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

    # --- single records -----------------------------------------------------------------------------
    def record(self, doc: int, cls=Record, row: dict | None = None, **extra: Any) -> Any:
        """Doc id ``doc`` as a :class:`~mempp.Record` (or ``cls``, with ``extra`` fields)."""
        return self.records([doc], cls, None if row is None else [row], [extra])[0]

    def records(self, docs: Sequence[int], cls=Record, rows: Sequence[dict] | None = None, extras: Sequence[dict] | None = None) -> list:
        """:meth:`record` of each of ``docs`` (``rows``: theirs from ``snap.rows``; ``extras``: each
        one's extra fields), the permissions and the people directory looked up once."""
        snap = self._snap
        rows = rows if rows is not None else snap.rows(list(docs))
        readers = None if isinstance(snap, ReaderView) else self.access().readers
        persons = self.name_matcher.person_names
        out, valid_until = [], snap.valid_until
        for i, (doc, r) in enumerate(zip(docs, rows)):
            vu = int(valid_until[doc])
            out.append(cls(
                doc_id=doc, key=r["key"], text=r["text"], author=r["author"], date=r["date"], ingested_at=r["ingested_at"],
                thread=r["thread"], channel=r["channel"], source=r["source"], meta=json.loads(r["meta"]) if r["meta"] else {},
                valid_until=None if vu == FOREVER else from_us(vu), superseded_by=None if vu == FOREVER else self._replacement(doc),
                readers=None if readers is None else readers.get(doc), person=persons.get(r["author"]), **(extras[i] if extras else {}),
            ))
        return out

    def _replacement(self, doc: int) -> Replacement | None:
        """The earliest supersession of ``doc`` (the one its ``valid_until`` is), as a :class:`Replacement`."""
        return earliest_replacement(self._snap, self._caches, doc)

    def doc_ids(self, key: str) -> list[int]:
        """Every doc id stored under ``key`` in this version, oldest first (none: empty)."""
        self._docs.extend(self._snap)
        docs = self._docs.docs(key, self._snap.n_docs)
        snap = self._snap  # a version read before an erasure still names its keys; a reader, only its documents
        return [d for d in docs if d not in snap.erased and (not isinstance(snap, ReaderView) or snap.readable[d])]

    def active(self, key: str, latest: bool = False) -> int | None:
        """The doc id of ``key``'s active version (or, with ``latest``, its newest when none is active)."""
        docs = self.doc_ids(key)
        if not docs:
            return None
        for d in reversed(docs):
            if self._snap.valid_until[d] == FOREVER:
                return d
        return docs[-1] if latest else None

    def resolve(self, ref: str | int, field: str = "id") -> int:
        """The doc id ``ref`` names: a key (its active version, else its newest) or a doc id;
        ``DocumentNotFound`` when none, ``ValidationError`` naming ``field`` for another type."""
        if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
            if 0 <= int(ref) < self._snap.n_docs and (not isinstance(self._snap, ReaderView) or self._snap.readable[int(ref)]):
                if int(ref) not in self._snap.erased:
                    return int(ref)
                raise DocumentNotFound(f"doc id {ref} was erased")
            raise DocumentNotFound(f"no document with doc id {ref}")
        if isinstance(ref, str):
            doc = self.active(ref, latest=True)
            if doc is None:
                raise DocumentNotFound(f"no document with id {ref!r}")
            return doc
        raise ValidationError(f"expected a key (str) or doc id (int), got {type(ref).__name__}", field=field)

    def get(self, ref: str | int, *, principal: Any = None) -> Record:
        """The stored document: by key (its active version, else its newest) or by doc id."""
        reader = self.reader(principal)
        return reader.record(reader.resolve(ref, "id"))

    def history(self, key: str, *, principal: Any = None) -> list[Record]:
        """Every version stored under ``key``, oldest first; ``DocumentNotFound`` (as :meth:`get`) when there is none.
        Each record's ``reader_periods`` says who could read it from when to when (not to a reader of part of the store)."""
        reader = self.reader(principal)
        if reader is not self:
            return reader.history(key)
        if not isinstance(key, str):
            raise ValidationError(f"expected a key (str), got {type(key).__name__}", field="key")
        docs = self.doc_ids(key)
        if not docs:
            raise DocumentNotFound(f"no document with id {key!r}")
        rows = self._snap.rows(docs)
        if isinstance(self._snap, ReaderView):
            return self.records(docs, rows=rows)
        access = self.access()
        return self.records(docs, rows=rows, extras=[{"reader_periods": tuple(access.reader_periods(d, r["ingested_at"]))} for d, r in zip(docs, rows)])

    def authors(self, *, principal: Any = None) -> list[str]:
        """Every author name stored in this version, in the order first seen."""
        reader = self.reader(principal)
        if isinstance(reader._snap, ReaderView):
            return reader._snap.authors.in_readable_order([n for n in reader._snap.authors.readable_names if n])
        return list(self._snap.authors.names)

    def people(self, *, principal: Any = None) -> list[dict[str, Any]]:
        """The people directory (``Store.add_people``), in the order first added; a reader sees
        the entries that name an author of a document it may read."""
        reader = self.reader(principal)
        return list(self.access().directory) if reader is self else reader.name_matcher.entries_with_authors()

    def documents(self, *, as_of: Any = None, authors: Any = None, principal: Any = None) -> list[Record]:
        """The documents of this version in doc id order: all of them (superseded ones too, each
        with its ``valid_until``), or with ``as_of`` those valid at that date (undated ones
        excluded, as a query's candidates are); ``authors``: only theirs (case-insensitive)."""
        from .candidates import author_names

        reader = self.reader(principal)
        if reader is not self:
            return reader.documents(as_of=as_of, authors=authors)
        snap = self._snap
        keep = np.ones(snap.n_docs, dtype=bool)
        theta = date_arg(as_of, "as_of", end_of_day=True)
        if theta is not None:
            keep &= (snap.dates != NAT) & (snap.dates <= theta) & (snap.valid_until > theta)
        names = names_arg(authors, "authors")
        if names is not None:
            names = names + tuple(self.name_matcher.resolve(names, theta))
            codes = [snap.authors.index[n] for n in author_names(snap.authors, names)]
            keep &= np.isin(snap.authors.codes, np.asarray(codes, dtype=np.int32))
        keep &= snap.valid_until != NAT  # documents of a skipped (unreadable) segment
        docs = np.flatnonzero(keep).tolist()
        return self.records(docs)

    def replacements(self, ref: str | int, *, principal: Any = None) -> list[dict[str, Any]]:
        """The supersessions of one document (by key: its active version, else its newest; or
        a doc id), earliest effective first: ``{"doc_id", "key", "effective", "recorded_at"}``
        of each document that replaces it, from ``effective`` on."""
        reader = self.reader(principal)
        if reader is not self:
            return reader.replacements(ref)
        return replacement_list(self._snap, self.resolve(ref, "id"))

    def export(self, *, principal: Any = None) -> Any:
        """Every document of this version as one Arrow table that ``add`` rebuilds the same store
        from (``mempp.export``; the columns: docs/API.md, *Export*)."""
        from .export import export_table

        return export_table(self.reader(principal))

    def versions(self) -> list[dict[str, Any]]:
        """Committed versions, oldest first, through this one:
        ``{"version", "committed_at", "docs" (added by it), "supersessions" (whether it recorded any),
        "kind" ("add", "supersede", "ann", "merge", "access")}``."""
        return version_list(self.path, self._snap)

    def stats(self, *, principal: Any = None) -> dict[str, Any]:
        """Counts and sizes of this version (``Store.stats`` adds the store's own: merges, bytes on disk, ...)."""
        reader = self.reader(principal)
        return version_stats(reader._snap, self.path, self._embedder_info, self.analyzer, self.index)
