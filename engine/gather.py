"""The driver of segment-sharded bulk scoring: splits a store into shards, sends each chunk of
queries to every shard (``mempp.shards``), merges what they return, and answers every query with
the planner's own :func:`~mempp.planner.run` (tag ranking, fusion, reserve) on the merged legs.

Why the merge is exact (the rows equal ``Store.query_batch``'s):

- *Statistics.* N and the average length are the whole version's (in each shard's
  :class:`~mempp.shards.ShardSpec`); each query term's document frequency is summed over every
  segment here and sent with the query. A shard's BM25 and cosine scores are then the whole
  store's, bit for bit: each document's score is computed by the same kernel from its own
  postings or vector.
- *Candidates.* Each shard computes ``candidate_mask`` over its documents (dates, validity,
  filters are per document); the candidate count and the tag leg's documents are sums and
  concatenations.
- *Plain legs* (no thread context): each shard returns its top ``depth`` with scores; the global
  top ``depth`` lies within their union, ordered as the heaps order (score, then higher id).
- *Thread context* (and window vectors): a document's context score z-scores the leg's raw
  scores over all candidates and lifts it by its thread neighbours' (``kernels.context``), and
  neighbours live in other shards. Each shard returns its moment sums in fixed point
  (``kernels.context.fixed_sums``: integers, added exactly here, so the mean and deviation are
  bit for bit those one process computes over all the candidates), how many documents score,
  and its top ``M`` raw scores. The driver takes the global top ``M``; a document neither
  in it nor within the context's hops of it has a context score of at most
  ``context_bound(z_M)`` (``kernels.context``). The driver fetches candidate bits and raw scores
  of the documents within twice the hops of the top ``M`` (and within the hops of the tag
  documents), computes their context scores with the planner's kernels (``neighbourhood``,
  ``context_topk``) over the whole store's thread links, and accepts the top ``depth`` when its
  last score beats the bound, or when the top ``M`` holds every scored document; else ``M``
  doubles and the shards send more.

- *Feedback* (``feedback``, ``mempp.feedback``): the driver runs the planner's first fusion on
  the merged legs, forms each query's feedback vector from the stored vectors of its first
  fused documents, and sends those vectors to the shards for one more vector leg (merged as
  the first one was); the planner then fuses with that leg, as one process does.

- *Thread stage* (``siblings``, ``mempp.threads``): it lifts the candidate members of small
  threads holding a fused document; the driver fetches the candidate bits of every member of
  such a thread of a ranked document (one round) and runs the stage and the reserve (its BM25
  check reads the driver's own view of the store) in the planner, as one process does.

The driver never computes a candidate mask over the whole store; it holds the version's
per-document arrays (dates, thread links) and scratch arrays of the store's size.
Owns: shard plans, requests, merges and the certificate.

Never imports: store, distributed, ray.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from mempp.kernels import context_bound, context_topk, merge_sums, moments_from_sums, neighbourhood
from mempp.storage import StoreError

from .errors import ValidationError
from .lexical import query_terms
from .options import QueryOptions, VectorIndex, context_scale
from .planner import Given, feedback_vector, run
from .results import BATCH_SCHEMA, batch_columns, hit_rows
from .shards import PLAIN, ZSCORED, LegQuery, Moments, Scored, ShardSpec, top

FIRST_TOP = 16  # the first top M of a z-scored leg: 2 x depth + this (max mode certifies with depth + 1 in practice)
MAX_ROUNDS = 40  # M doubles each round: a leg not certified by then holds every scored document anyway


def plan_shards(searcher, n_shards: int) -> list[ShardSpec]:
    """Split a :class:`~mempp.Searcher`'s version into ``n_shards`` runs of adjacent units with about as many
    documents each (fewer when it has fewer units)."""
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValidationError(f"expected an integer >= 1, got {n_shards!r}", field="shards")
    snap = searcher.snapshot
    if snap.skipped:
        raise StoreError(f"{searcher.path}: opened with damaged files skipped; sharded scoring needs every unit")
    entries = snap.segments
    if not entries:
        raise StoreError(f"{searcher.path}: an empty store has nothing to shard")
    sizes = np.array([e.segment.n for e in entries], dtype=np.int64)
    n = min(n_shards, len(entries))
    ends = np.cumsum(sizes)
    cuts = [0]
    for i in range(1, n):  # the unit boundary nearest to an i/n share of the documents, strictly increasing
        b = int(np.searchsorted(ends, ends[-1] * i / n)) + 1
        b = max(cuts[-1] + 1, min(b, len(entries) - (n - i)))
        cuts.append(b)
    cuts.append(len(entries))
    names = [e.segment.name for e in entries]
    links = snap.has_threads
    specs = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        lo = entries[a].base
        hi = entries[b - 1].base + entries[b - 1].segment.n
        specs.append(
            ShardSpec(
                path=str(searcher.path), version=snap.version, units=tuple(names[a:b]), first_doc=lo, n_docs=hi - lo,
                n_global=snap.n_live, avg_length=snap.avg_length, has_threads=links, has_windows=snap.has_windows,
                valid_until=np.ascontiguousarray(snap.valid_until[lo:hi]),
            )
        )
    return specs


# call(method, per-shard arguments) -> per-shard results, every shard at once (Ray, or in-process)
Call = Callable[[str, Sequence[tuple]], list]


class Driver:
    """Answers chunks of queries over the shards of one :class:`~mempp.Searcher`'s version (read-only)."""

    def __init__(self, searcher, specs: Sequence[ShardSpec], first_top: int | None = None):
        """``first_top``: the first top M of a z-scored leg (default ``2 x depth + FIRST_TOP``)."""
        self.searcher = searcher
        self.first_top = first_top
        self.snap = searcher.snapshot
        self.specs = list(specs)
        self.firsts = np.array([s.first_doc for s in specs], dtype=np.int64)
        self.matcher = searcher.name_matcher
        n = self.snap.n_docs
        self._scores = np.zeros(n, dtype=np.float32)  # raw scores of fetched documents (zero between uses)
        self._mask = np.zeros(n, dtype=np.uint8)  # their candidate bits
        self._seen = np.zeros(n, dtype=np.uint8)  # with_neighbours' scratch
        self._scales: dict = {}
        self._chunk = 0
        self.rounds: list[int] = []  # per chunk: round trips after the first (a measure of the certificate's work)
        self.driver_s = 0.0  # time in score_chunk outside the shards' calls: the merge's cost
        self.calls_s = 0.0  # time waiting on the shards
        self.fetched = 0  # documents whose raw score was fetched (thread context)

    # --- requests --------------------------------------------------------------------------------
    def _leg_query(self, text: str, opt: QueryOptions, has_vec: bool) -> LegQuery:
        snap = self.snap
        w_lex, w_tag, w_vec = opt.weights
        codes = self.matcher.match(text, opt.as_of) if w_tag and text else []
        authors = tuple(snap.authors.names[c] for c in codes)
        q = LegQuery(opt=opt, authors=authors, top=self.first_top or 2 * opt.depth + FIRST_TOP)
        if (w_lex or authors) and text:
            q.terms = query_terms(snap, text)
            q.df = self._df(q.terms)
            q.lexical = ZSCORED if (opt.context and snap.has_threads) else PLAIN
        if w_vec and has_vec:
            q.vector = ZSCORED if ((opt.context and snap.has_threads) or snap.has_windows) else PLAIN
        return q

    def _df(self, ids: np.ndarray) -> np.ndarray:
        """The whole store's document frequency of each term (from every segment's term index)."""
        df = np.zeros(len(ids), dtype=np.int64)
        if len(ids):
            for entry in self.snap.segments:
                df += entry.postings.lookup(ids)[2]
        return df

    # --- one chunk -------------------------------------------------------------------------------
    def score_chunk(
        self, call: Call, start: int, texts: Sequence[str], opts: Sequence[QueryOptions], qvecs: np.ndarray | None,
        blank: Sequence[bool] | None = None,
    ):
        """A ``pyarrow.RecordBatch`` of the hits of ``texts`` (query indices from ``start``);
        ``blank``: the questions that were not embedded (their vector leg is off, as in ``query_batch``)."""
        import time

        import pyarrow as pa

        t0 = time.perf_counter()
        waited = self.calls_s
        inner = call

        def call(method, args):
            t = time.perf_counter()
            try:
                return inner(method, args)
            finally:
                self.calls_s += time.perf_counter() - t

        snap = self.snap
        self._chunk += 1
        chunk = self._chunk
        blank = list(blank) if blank is not None else [False] * len(texts)
        qvecs = self.searcher.name_free_vectors(texts, opts, qvecs, blank)  # as query_batch's reads them
        has_vec = [qvecs is not None and not b for b in blank]
        queries = [self._leg_query(t, o, h) for t, o, h in zip(texts, opts, has_vec)]
        answers = call("first", [(chunk, queries, qvecs)] * len(self.specs))  # [shard][query]
        try:
            n_cand, tag_docs, lexical, vector, rounds = self._merge(call, chunk, queries, answers)
            refined, more = self._feedback(call, texts, opts, qvecs, has_vec, n_cand, tag_docs, lexical, vector)
            rounds += more
            siblings = self._sibling_bits(call, chunk, queries, lexical, vector, tag_docs)
        finally:
            call("release", [(chunk,)] * len(self.specs))
        self.rounds.append(rounds)
        cols = batch_columns()
        for j, (text, opt) in enumerate(zip(texts, opts)):
            ids, bits = siblings.get(j, (None, None))
            if ids is not None:
                self._mask[ids] = bits  # the thread stage reads the candidate bits of these documents only
            try:
                given = Given(
                    n_cand=n_cand[j], tag_docs=tag_docs[j],
                    lexical=lexical[j] if lexical[j] is not None else (np.zeros(0, dtype=np.int64), np.zeros(len(tag_docs[j]))),
                    vector=vector[j], mask=self._mask, refined=refined[j], source="shards",
                )
                chosen, fused, rankings, _ = run(snap, text, qvecs[j] if has_vec[j] else None, opt, self.matcher, given)
            finally:
                if ids is not None:
                    self._mask[ids] = 0
            hit_rows(cols, start + j, chosen, fused, rankings)
        cols["key"] = snap.keys_of(np.asarray(cols["doc_id"], dtype=np.int64))
        out = pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)
        self.driver_s += (time.perf_counter() - t0) - (self.calls_s - waited)
        return out

    def _merge(self, call: Call, chunk: int, queries: Sequence[LegQuery], answers: list):
        """Every query's legs from the shards' first answers (and the rounds thread context needs):
        ``(candidate counts, tag documents, lexical (ids, tag scores), vector ids, rounds)``."""
        snap = self.snap
        rounds = 0
        n_cand = [sum(a[j].candidates for a in answers) for j in range(len(queries))]
        tag_docs = [np.concatenate([a[j].tag_docs for a in answers]) for j in range(len(queries))]
        lexical: list[Any] = [None] * len(queries)
        vector: list[Any] = [None] * len(queries)
        pending: dict[tuple[int, str], _ZLeg] = {}
        for j, q in enumerate(queries):
            if q.lexical == PLAIN:
                ids, _ = top(*_concat([a[j].lexical for a in answers]), q.opt.depth)
                scores = [a[j].tag_scores for a in answers]
                lexical[j] = (ids, np.concatenate(scores) if scores else np.zeros(0))
            elif q.lexical == ZSCORED:
                z = _ZLeg("lexical", q, [a[j].lexical for a in answers], n_cand[j], tag_docs[j], snap)
                if z.done is not None:
                    lexical[j] = z.done
                else:
                    pending[(j, "lexical")] = z
            if q.vector == PLAIN:
                vector[j] = top(*_concat([a[j].vector for a in answers]), q.opt.depth)[0]
            elif q.vector == ZSCORED:
                z = _ZLeg("vector", q, [a[j].vector for a in answers], n_cand[j], tag_docs[j], snap)
                if z.done is not None:
                    vector[j] = z.done[0]
                else:
                    pending[(j, "vector")] = z
        while pending:
            self._fetch_and_certify(call, chunk, pending)
            for (j, leg), z in list(pending.items()):
                if z.done is not None:
                    if leg == "lexical":
                        lexical[j] = z.done
                    else:
                        vector[j] = z.done[0]
                    del pending[(j, leg)]
            if pending:
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise StoreError("distributed scoring: thread context not certified after many rounds")
                wants: list[list] = [[] for _ in self.specs]
                for (j, leg), z in pending.items():
                    z.m *= 2
                    for w in wants:
                        w.append((j, leg, z.m))
                tops = call("top", [(chunk, w) for w in wants])
                keys = list(pending)
                for i, key in enumerate(keys):
                    pending[key].set_tops([t[i] for t in tops])
        return n_cand, tag_docs, lexical, vector, rounds

    def _feedback(self, call: Call, texts, opts, qvecs, has_vec, n_cand, tag_docs, lexical, vector) -> tuple[list[bool], int]:
        """Feedback (``mempp.feedback``): for each query with ``feedback`` and a vector leg, the
        planner's first fusion of the merged legs gives the feedback vector, and one more round
        of the shards scans the vector leg with it; ``vector`` takes those rankings. Returns which
        queries were refined (the planner then runs no feedback of its own) and the certificate's
        round trips after that round's first (as ``rounds`` counts them)."""
        refined = [False] * len(texts)
        todo, subs, fvecs = [], [], []
        for j, opt in enumerate(opts):
            if not (opt.feedback and has_vec[j] and vector[j] is not None and opt.weights[2]):
                continue
            lex = lexical[j] if lexical[j] is not None else (np.zeros(0, dtype=np.int64), np.zeros(len(tag_docs[j])))
            fvec, used = feedback_vector(
                self.snap, texts[j], qvecs[j], opt, self.matcher, n_cand=n_cand[j], tag_docs=tag_docs[j], lexical=lex,
                vector=vector[j], mask=self._mask,
            )
            if not used:
                continue
            todo.append(j)
            subs.append(self._leg_query(texts[j], replace(opt, weights=(0.0, 0.0, opt.weights[2])), True))
            fvecs.append(fvec)
        if not todo:
            return refined, 0
        self._chunk += 1
        chunk = self._chunk
        answers = call("first", [(chunk, subs, np.stack(fvecs))] * len(self.specs))
        try:
            _, _, _, again, rounds = self._merge(call, chunk, subs, answers)
        finally:
            call("release", [(chunk,)] * len(self.specs))
        for i, j in enumerate(todo):
            vector[j] = again[i]
            refined[j] = True
        return refined, rounds

    def _sibling_bits(self, call: Call, chunk: int, queries: Sequence[LegQuery], lexical, vector, tag_docs) -> dict:
        """The thread stage (``mempp.threads``) lifts a fused document's siblings in small threads
        that are candidates: per query with the stage on, ``(ids, candidate bits)`` of every member
        of a small thread holding a document some leg ranked (one round to the shards)."""
        snap = self.snap
        if not snap.has_threads:
            return {}
        wanted: dict[int, np.ndarray] = {}
        for j, q in enumerate(queries):
            if not q.opt.siblings:
                continue
            ranked = [tag_docs[j]]
            if lexical[j] is not None:
                ranked.append(np.asarray(lexical[j][0], dtype=np.int64))
            if vector[j] is not None:
                ranked.append(np.asarray(vector[j], dtype=np.int64))
            ids = small_thread_members(snap, np.concatenate(ranked), q.opt.siblings)
            if len(ids):
                wanted[j] = ids
        if not wanted:
            return {}
        wants: list[list] = [[] for _ in self.specs]
        where: dict[int, list] = {}
        for j, ids in wanted.items():
            for s, piece in enumerate(np.split(ids, np.searchsorted(ids, self.firsts[1:], side="left"))):
                if len(piece):
                    where.setdefault(j, []).append((s, len(wants[s])))
                    wants[s].append((j, "mask", piece))
        got = call("fetch", [(chunk, w) for w in wants])
        return {j: (ids, np.concatenate([got[s][i][0] for s, i in where[j]])) for j, ids in wanted.items()}

    def _fetch_and_certify(self, call: Call, chunk: int, pending: dict) -> None:
        """One fetch round: every pending leg's neighbourhood from its shards, then its certificate."""
        prev, nxt = self.snap.thread_links
        wanted = {key: z.neighbourhood(prev, nxt) for key, z in pending.items()}
        wants: list[list] = [[] for _ in self.specs]
        where: dict = {}
        for key, ids in wanted.items():
            cut = np.searchsorted(ids, self.firsts[1:], side="left")
            pieces = np.split(ids, cut)
            for s, piece in enumerate(pieces):
                if len(piece):
                    where.setdefault(key, []).append((s, len(wants[s])))
                    wants[s].append((key[0], key[1], piece))
        got = call("fetch", [(chunk, w) for w in wants])
        self.fetched += sum(len(ids) for ids in wanted.values())
        for key, z in pending.items():
            ids = wanted[key]
            bits = np.concatenate([got[s][i][0] for s, i in where.get(key, [])]) if key in where else np.zeros(0, np.uint8)
            raw = np.concatenate([got[s][i][1] for s, i in where.get(key, [])]) if key in where else np.zeros(0, np.float32)
            self._scores[ids] = raw
            self._mask[ids] = bits
            try:
                z.certify(self, prev, nxt)
            finally:
                self._scores[ids] = 0
                self._mask[ids] = 0

    def scale(self, opt: QueryOptions) -> np.ndarray:
        key = (bool(opt.context), opt.context_length)
        s = self._scales.get(key)
        if s is None:
            s = self._scales[key] = context_scale(self.snap, opt)
        return s


def small_thread_members(snap, docs: np.ndarray, max_size: int) -> np.ndarray:
    """Every document (sorted, unique) of the threads of ``docs`` that hold 2 to ``max_size``
    documents in the store: those ``threads.thread_siblings`` can lift."""
    if not len(docs):
        return np.zeros(0, dtype=np.int64)
    codes = snap.threads.codes
    counts = snap.threads.counts()
    prev, nxt = snap.thread_links
    out: list[int] = []
    heads: set[int] = set()
    for d in np.unique(docs).tolist():
        c = int(codes[d])
        if c < 0 or counts[c] > max_size or counts[c] < 2:
            continue
        head = d
        while prev[head] >= 0:
            head = int(prev[head])
        if head in heads:
            continue
        heads.add(head)
        while head >= 0:
            out.append(head)
            head = int(nxt[head])
    return np.unique(np.asarray(out, dtype=np.int64))


def _concat(parts: Sequence[Scored]) -> tuple[np.ndarray, np.ndarray]:
    parts = [p for p in parts if p is not None]
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    return np.concatenate([p.ids for p in parts]), np.concatenate([p.scores for p in parts])


def _ball(ids: np.ndarray, prev: np.ndarray, nxt: np.ndarray, hops: int) -> np.ndarray:
    """``ids`` and every document at most ``hops`` steps from one of them along its thread, candidate or not."""
    out = [ids]
    for links in (prev, nxt):
        p = ids
        for _ in range(hops):
            p = links[p[p >= 0]]
            out.append(p[p >= 0])
    return np.unique(np.concatenate(out))


class _ZLeg:
    """One query's z-scored leg (thread context or window vectors) being merged (module docstring)."""

    def __init__(self, leg: str, q: LegQuery, parts: Sequence[Moments], n_cand: int, tag_docs: np.ndarray, snap):
        self.leg, self.q, self.opt = leg, q, q.opt
        self.n_cand = n_cand
        self.tag_docs = tag_docs if leg == "lexical" else np.zeros(0, dtype=np.int64)
        context = self.opt.context if (leg == "lexical" or snap.has_threads) else ()
        self.betas = np.asarray(context, dtype=np.float64)
        self.population = sum(p.population for p in parts)
        self.mu, self.sigma = moments_from_sums(merge_sums([p.sums for p in parts]), n_cand)
        self.m = q.top
        self.done: tuple[np.ndarray, np.ndarray] | None = None
        if leg == "lexical" and (len(q.terms) == 0 or self.population == 0):
            # as the lexical leg: no term, or no candidate holds one: no ranking, tag scores 0
            self.done = (np.zeros(0, dtype=np.int64), np.zeros(len(tag_docs), dtype=np.float64))
        elif leg == "vector" and n_cand == 0:
            self.done = (np.zeros(0, dtype=np.int64), np.zeros(0))
        else:
            self.set_tops([p.top for p in parts])

    def set_tops(self, tops: Sequence[Scored]) -> None:
        # Each shard sent its top M and every tie with its M-th: every document outside the union
        # scores below the union's M-th score t, and so does every one outside its part scoring >= t.
        self.top_ids, self.top_scores = top(*_concat(tops), self.m, ties=True)

    def neighbourhood(self, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        hops = len(self.betas)
        ids = _ball(self.top_ids, prev, nxt, 2 * hops)
        if len(self.tag_docs):
            ids = np.union1d(ids, _ball(self.tag_docs, prev, nxt, hops))
        return ids

    def certify(self, driver: Driver, prev: np.ndarray, nxt: np.ndarray) -> None:
        """Context scores of the top ``M`` and their neighbours (the driver's scratch holds their raw
        scores and candidate bits); ``done`` when the top ``depth`` is certain."""
        opt, betas = self.opt, self.betas
        scores, mask = driver._scores, driver._mask
        hops = len(betas)
        scale = driver.scale(opt) if len(betas) else np.zeros(0, dtype=np.float32)
        top = np.ascontiguousarray(self.top_ids, dtype=np.int64)
        pool = neighbourhood(top, prev, nxt, hops, mask, driver._seen)
        m = len(pool)
        depth = opt.depth
        out_ids = np.empty(depth, dtype=np.int64)
        out_scores = np.empty(depth, dtype=np.float64)
        got = context_topk(
            scores, self.mu, self.sigma, pool, m, prev, nxt, betas, scale, mask, depth, out_ids, out_scores, np.empty(m), opt.context_max
        )
        everything = len(self.top_ids) >= self.population
        if not everything:
            # Raw scores are float32: a document scoring below t scores at most the float32 just below it.
            below = np.nextafter(np.float32(self.top_scores[-1]), np.float32(-np.inf))
            z = (float(below) - self.mu) * (1.0 / self.sigma)
            bound = context_bound(z, betas, len(scale) > 0, opt.context_max)
            if not (got == depth and out_scores[depth - 1] > bound):
                return
        extra = np.zeros(len(self.tag_docs), dtype=np.float64)
        if len(self.tag_docs):
            context_topk(
                scores, self.mu, self.sigma, self.tag_docs, len(self.tag_docs), prev, nxt, betas, scale, mask, 0, out_ids[:0],
                out_scores[:0], extra, opt.context_max,
            )
        self.done = (out_ids[:got].copy(), extra)


def chunk_options(searcher, as_ofs: list, k: int, n_texts: int, kwargs: dict, sharded: bool = False) -> list[QueryOptions]:
    """Every query's options, checked as ``Store.query_stream`` checks them, and clamped to the store's size.

    ``sharded``: a store with an ANN index is refused unless ``vector_index="exact"``: shards scan
    exactly, while ``query_batch`` may answer a vector leg from the (approximate) index, so the
    rows could differ; with ``"exact"`` both scan and they are equal."""
    if kwargs.get("question_dates"):
        raise ValidationError("not supported in a batch; resolve dates per question first", field="question_dates")
    kwargs = {key: v for key, v in kwargs.items() if key != "question_dates"}
    opts = searcher.batch_options(as_ofs, k=k, **kwargs)  # clamped to the version's size
    matcher = searcher.name_matcher
    opts = [matcher.resolved(o) for o in opts]  # authors= by name, alias or role, as each query's as_of means it
    principal = opts[0].principal if opts else kwargs.get("principal")
    if searcher.reader(principal) is not searcher and sharded:  # as query_stream checks it; a reader of part of the store:
        raise ValidationError(  # its statistics are its own, which shards of the whole store do not hold
            f"{principal} may not read every document: segment-sharded scoring answers mempp.ADMIN and readers of the whole "
            "store only; score query-parallel (no shards), which answers every reader exactly", field="principal",
        )
    if sharded and opts and opts[0].vector_index is not VectorIndex.EXACT and searcher.snapshot.ann:
        raise ValidationError(
            "this store has an ANN index, which segment-sharded scoring does not read: pass vector_index='exact' "
            "(query_batch with it returns the same rows), or score query-parallel",
            field="vector_index",
        )
    return opts
