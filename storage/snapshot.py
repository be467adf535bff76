"""A snapshot: one committed version of a store, opened read-only and pinned.

It maps every live unit's files (segments, postings, window vectors, int8 copies,
dictionary terms, supersession events) and derives the per-document arrays the planner
needs (dates, the end of each document's validity, author/thread/channel codes and their
bitmaps). A later commit never changes a snapshot; ``Snapshot(..., previous=old)`` reuses the
files both share and extends the old one's per-document arrays (documents and supersession
events are only appended; a merge changes no document; after an erasure nothing is reused).

An earlier version (time travel) is the current units cut at that version's counts
(``cut``, a history entry): units after it are left out and the one that straddles it is
read up to the cut, so every version answers exactly as it did when it was current.

Owns: loading a version, per-document arrays, lookups by doc id.

Never imports: commits, merge, lock, fsutil, mempp.store, mempp.searcher.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa

from mempp.kernels import quantize_rows

from .analyzer import Analyzer
from .ann import AnnIndex
from .arrowio import map_table, mapped_matrix, numeric
from .columns import Facet, RowReader, code_links
from .errors import CorruptStoreError
from .files import Checks, Vanished
from .manifest import Entry, State, Unit
from .postings import Postings
from .resident import advise_if_larger
from .segment import NAT, Segment, timestamp_column, date_order
from .erase import erased_in

FOREVER = np.iinfo(np.int64).max
LINK_TAIL_MAX = 4096  # new documents linked one by one onto an earlier version's thread links; more: a full sort

__all__ = ["FOREVER", "Facet", "RowReader", "SegmentEntry", "Snapshot"]


@dataclass(eq=False)  # identity: the engine keys per-segment caches on the entry (weakly)
class SegmentEntry:
    segment: Segment
    postings: Postings
    window_rows: np.ndarray | None = None  # int32 segment row of each extra window vector
    window_embeddings: np.ndarray | None = None  # (m, dim) float32, mapped
    q8: np.ndarray | None = None  # (n, dim) int8 copy of the embeddings, mapped (IndexConfig.vector_copy)
    q8_scale: np.ndarray | None = None  # float32 per row: embedding ≈ q8_scale * q8
    q8_order: np.ndarray | None = None  # int32 segment row of each row of q8 (stored in date order); None: row order
    q8_dates: np.ndarray | None = None  # int64 µs date of each row of q8, ascending (with q8_order)
    _norms: tuple[float, np.ndarray] | None = None  # (avgdl, bm25_norms of the lengths), per snapshot statistics
    _readers: dict | None = None  # column name -> row reader (RowReader), built on first use
    _getters: list | None = None  # (name, RowReader.get) of every column but the embedding, built on first use
    _q8_stats: tuple | None = None  # (byte sum, sum |q8|) per row of q8, built on first use
    q8_state: str = "none"  # q8 is "mapped" (from its file), "queued" or "resident" (resident.py), "built", "failed"
    partial: bool = False  # read up to a cut (time travel): never reused by another snapshot

    def q8_stats(self) -> tuple:
        """The int8 copy's per-row byte sums and ``sum |q8|``, and the maxima the error bound
        needs (kernels.int8dot.segment_stats). Computed on the first query that scans the
        segment (about 2 ms per 50,000 rows) and kept."""
        stats = self._q8_stats
        if stats is None:
            from mempp.kernels.int8dot import segment_stats

            stats = self._q8_stats = segment_stats(self.q8, self.q8_scale)
        return stats

    def q8_span(self, lo: int | None, hi: int | None) -> tuple[int, int] | None:
        """The rows of q8 dated ``lo <= date <= hi`` (µs; None: unbounded), as ``(start, stop)``;
        None when q8 is in row order (an older store), where every row must be scanned.
        Undated rows sort first, inside every span that starts at 0."""
        dates = self.q8_dates
        if dates is None:
            return None
        start = 0 if lo is None else int(np.searchsorted(dates, lo, side="left"))
        stop = len(dates) if hi is None else int(np.searchsorted(dates, hi, side="right"))
        return start, max(start, stop)

    def q8_stops(self, hi: np.ndarray) -> np.ndarray | None:
        """For each date bound in ``hi`` (int64 µs, inclusive), the end of the rows of q8 dated at
        or before it (None when q8 is in row order)."""
        dates = self.q8_dates
        return None if dates is None else np.searchsorted(dates, hi, side="right").astype(np.int64)

    def make_resident(self, stop=None) -> int:
        """Swap the mapped int8 copy for one in anonymous memory on huge pages (storage/resident.py)
        and give the mapping's pages back; compute its :meth:`q8_stats` there too. Returns the
        bytes copied (0 when ``stop`` was set first, the copy staying mapped)."""
        from .resident import release_pages, resident_copy

        mapped = self.q8
        copy = resident_copy(mapped, stop)
        if copy is None:
            self.q8_state = "mapped"
            return 0
        self.q8 = copy  # a query reads q8 once per scan: it runs on either, the same bytes
        self.q8_state = "resident"
        release_pages(mapped)
        self.q8_stats()
        return copy.nbytes

    def norms(self, avgdl: float, k1: float, b: float) -> np.ndarray:
        """BM25 length norms of this segment's rows for the store-wide ``avgdl`` (cached)."""
        from mempp.kernels import bm25_norms

        cached = self._norms
        if cached is not None and cached[0] == (avgdl, k1, b):
            return cached[1]
        out = np.empty(len(self.segment.lengths), dtype=np.float64)
        bm25_norms(self.segment.lengths, avgdl, k1, b, out)
        self._norms = ((avgdl, k1, b), out)
        return out

    @property
    def base(self) -> int:
        return self.segment.first_doc

    def row_getters(self) -> list:
        """``(name, RowReader.get)`` of every column but the embedding, in the table's order."""
        getters = self._getters
        if getters is None:
            getters = self._getters = [(n, self.reader(n).get) for n in self.segment.table.column_names if n != "embedding"]
        return getters

    def reader(self, name: str) -> "RowReader":
        readers = self._readers
        if readers is None:
            readers = self._readers = {}
        r = readers.get(name)
        if r is None:
            r = readers[name] = RowReader(self.segment.table.column(name))
        return r


class Snapshot:
    """One committed version, read-only."""

    def __init__(
        self,
        store: Path,
        state: State | None,
        previous: "Snapshot | None" = None,
        on_corrupt: str = "raise",
        verify: bool = True,
        written: Iterable[tuple[str, str]] = (),
        cut: Entry | None = None,
        built: dict | None = None,
        lost_ok: bool = False,
    ) -> None:
        """Load ``state``'s version (``cut``: an earlier version of it), verifying every file's
        checksum (XXH3-64; sha256 in format-1 stores) before parsing it.

        A damaged postings or term-index file is rebuilt in memory from the segment text
        (listed in ``rebuilt``), a damaged int8 copy from the embeddings. A damaged segment,
        window-vector or supersession file raises :class:`CorruptStoreError` naming it, unless
        ``on_corrupt="skip"``: then the rest stays readable, the documents of a skipped segment
        are never returned, and the file is listed in ``skipped``. A damaged dictionary always
        raises. ``verify=False`` checks sizes only (to measure what hashing costs). ``written``:
        (name, checksum) of files this process has just written and fsynced, hashing the very
        bytes it wrote: reading them back would hash the page cache's copy of those bytes, so
        they count as verified. ``built``: by segment file name, the postings and int8 copy this
        process made of a small unit it just committed (else they are made from the segment here).
        ``lost_ok``: with ``on_corrupt="skip"``, a missing segment file is skipped too (the caller
        has made sure no writer removed it meanwhile).
        """
        if on_corrupt not in ("raise", "skip"):
            raise ValueError(f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}")
        self.store = store
        self.state = state
        self.cut = cut
        self.meta = dict(state.meta) if state is not None else {}
        self.version = cut.version if cut is not None else (state.version if state is not None else 0)
        self.dim = int(self.meta.get("dim") or 0)
        self.analyzer = Analyzer.from_json(self.meta["analyzer"]) if state is not None else None
        self.on_corrupt = on_corrupt
        self._lost_ok = lost_ok  # with "skip": a missing segment is skipped like a damaged one (not a merge's doing)
        self._built = built or {}
        self._int8 = (self.meta.get("index") or {}).get("vector_copy") == "int8"
        self.skipped: list[str] = []  # damaged files left out (on_corrupt="skip")
        self.rebuilt: list[str] = []  # damaged derived files rebuilt from the segments
        units = list(state.units) if state is not None else []
        if cut is not None:
            units = [u for u in units if u.lo <= cut.version]
        # An earlier version of this store this process has loaded: its files, dictionary and
        # supersession log are this version's first parts (data is only ever appended).
        base = previous if _prefix_of(previous, state, cut) else None
        old = {e.segment.name: e for e in previous.segments if not e.partial} if previous is not None else {}
        # Every file is checked against its recorded size and checksum before it is parsed; files a
        # previous snapshot of this process already verified (and reuses) are not hashed again.
        self.verified: set[tuple[str, str]] = set(previous.verified) if previous is not None else set()
        if verify:
            self.verified.update(written)
        todo = []
        for u in units:
            files = {k: f for k, f in u.files.items() if not _known(base, u, k)}
            if "docs" in files and files["docs"].name in old:
                files = {k: f for k, f in files.items() if k in ("dict", "sup")}
            todo.extend(f for f in files.values() if (f.name, f.digest[1]) not in self.verified)
        with Checks(store, todo, hash=verify) as bad:  # each file is parsed once its own check passes
            try:
                terms, sups, rebuild, placeholders = self._load(store, units, old, bad, base)
            except FileNotFoundError as exc:  # checked, then removed by a writer before it was mapped
                raise Vanished(str(exc.filename or store), f"file named by the manifest is missing ({exc})") from None
            if verify:
                self.verified.update((f.name, f.digest[1]) for f in todo if f.name not in bad)
        # ANN indexes over ranges of documents: loaded (after their checksum) in the background.
        old_ann = {a.name: a for a in previous.ann} if previous is not None else {}
        self.ann: list[AnnIndex] = []
        for a in state.anns if state is not None else []:
            if cut is not None and a.version > cut.version:
                continue
            idx = old_ann.get(a.file.name) or AnnIndex(a.first, a.n, a.file.name, dict(a.params), a.file)
            idx.load_in_background(store, self.dim)
            self.ann.append(idx)

        first_term = base.n_terms if base is not None else 0
        self.n_terms = first_term + len(terms)
        if rebuild:  # small units' postings, and damaged ones: from the text, with this version's dictionary
            new_ids = {t: i for i, t in enumerate(terms, first_term)}
            if base is not None:  # the earlier version's terms (its dictionary, shared, is not copied)
                old_ids = base.term_ids
                lookup = lambda t: new_ids[t] if t in new_ids else old_ids[t]  # noqa: E731
            else:
                lookup = new_ids.__getitem__
            for entry in rebuild:
                entry.postings = self._rebuild_postings(entry.segment, lookup)

        segs = [e.segment for e in self.segments]
        self.n_docs = sum(s.n for s in segs)
        self.total_length = int(cut.total_length) if cut is not None else int(state.total_length) if state is not None else 0
        if state is not None and cut is None and self.n_docs != state.n_docs:
            raise CorruptStoreError(str(store / (state.chain[-1] if state.chain else "CURRENT")),
                                    f"manifest says {state.n_docs} documents, segments hold {self.n_docs}")
        self._starts = np.array([s.first_doc for s in segs], dtype=np.int64)
        self._starts_list = self._starts.tolist()  # for bisect: a scalar lookup 10x cheaper than numpy's
        self.embedding_bytes = sum(s.embeddings.nbytes for s in segs)  # the float32 rows, mapped
        advise_if_larger([s.embeddings for s in segs], self.embedding_bytes, "random")  # storage/resident.py
        reuse = base if (base is not None and not placeholders) else None
        self._derive(sups, placeholders, reuse)
        # Last, when nothing can fail any more: the term dictionary. An earlier version's is
        # extended in place and shared (copying it would cost every commit the size of the
        # dictionary): a snapshot of that earlier version then also finds the newer terms, which
        # none of its segments holds, so its answers do not change.
        if base is not None:
            self.term_ids = base.term_ids
            for i, t in enumerate(terms, first_term):
                self.term_ids[t] = i
        else:
            self.term_ids = {t: i for i, t in enumerate(terms)}

    # --- per-document arrays ----------------------------------------------------------------------
    def _derive(self, sups: list, placeholders: list, reuse: "Snapshot | None") -> None:
        """Dates, validity, facets: extended from ``reuse`` (an earlier version of this store) when given."""
        n0 = reuse.n_docs if reuse is not None else 0
        new_parts = []  # (entry, first row) of every document after n0
        for e in self.segments:
            if e.base + e.segment.n > n0:
                new_parts.append((e, max(0, n0 - e.base)))
        dates = [e.segment.dates[r:] for e, r in new_parts]
        self.dates = np.concatenate(([reuse.dates] if reuse is not None else []) + dates) if (dates or reuse is not None) else np.zeros(0, dtype=np.int64)
        cols = lambda name: [e.segment.table.column(name).slice(r) for e, r in new_parts]  # noqa: E731
        self.authors = Facet.extend(reuse.authors if reuse is not None else None, cols("author"))
        self.threads = Facet.extend(reuse.threads if reuse is not None else None, cols("thread"))
        self.channels = Facet.extend(reuse.channels if reuse is not None else None, cols("channel"))

        # Supersession log, and each document's end of validity (earliest effective date);
        # ``sups`` holds the events after ``reuse``'s (all of them without it).
        tables = [t for t, _ in sups if len(t)]
        new = _sup_arrays(pa.concat_tables(tables) if tables else None)
        if reuse is not None:
            self.sup_old, self.sup_new, self.sup_effective, self.sup_recorded = (
                np.concatenate([a, b]) if len(b) else a for a, b in zip(reuse._sup, new)
            )
        else:
            self.sup_old, self.sup_new, self.sup_effective, self.sup_recorded = new
        self.n_sup = len(self.sup_old)
        if reuse is not None:
            self.valid_until = np.concatenate([reuse.valid_until, np.full(self.n_docs - n0, FOREVER, dtype=np.int64)])
            if len(new[0]):
                np.minimum.at(self.valid_until, new[0], new[2])
        else:
            self.valid_until = np.full(self.n_docs, FOREVER, dtype=np.int64)
            if len(self.sup_old):
                np.minimum.at(self.valid_until, self.sup_old, self.sup_effective)
        for entry in placeholders:  # unreadable documents are never valid, so never returned
            self.valid_until[entry.base : entry.base + entry.segment.n] = NAT
        # erased documents (an empty text) neither: the ones after n0 (``reuse`` has the others')
        erased, lost = erased_in([(e, r) for e, r in new_parts if not any(e is p for p in placeholders)])
        self.erased = np.concatenate([reuse.erased, erased]) if reuse is not None else erased
        self.valid_until[erased] = NAT
        self.erased_length = (reuse.erased_length if reuse is not None else 0) + lost
        if len(self.dates) != self.n_docs:
            raise ValueError(f"{self.n_docs} documents, {len(self.dates)} dates")
        if reuse is not None and "_thread_links" in reuse.__dict__:
            self._links_from = (reuse._thread_links, reuse.__dict__.get("_thread_last"), n0)

    @property
    def _sup(self) -> tuple:
        return self.sup_old, self.sup_new, self.sup_effective, self.sup_recorded

    # --- loading --------------------------------------------------------------------------------
    def _load(self, store: Path, units: list[Unit], old: dict, bad: Checks, base: "Snapshot | None") -> tuple:
        """Map the units' segments, postings, dictionaries and supersession logs (``bad``: their checks),
        each read up to the cut; of the dictionary and the log, only what ``base`` lacks.

        Returns (dictionary terms after ``base``'s, [(supersession table, unit)] after ``base``'s,
        entries whose postings must be rebuilt, placeholders).
        """
        cut = self.cut
        self.segments: list[SegmentEntry] = []
        terms: list[str] = []
        sups: list[tuple[pa.Table, Unit]] = []
        rebuild: list[SegmentEntry] = []
        placeholders: list[SegmentEntry] = []
        self.unit_stats: dict[str, dict] = {}  # per unit: what it holds, counted (format-1 manifests lack it)
        for unit in units:
            files = unit.files
            stats = self.unit_stats[unit.stem] = {"n_sup": 0, "n_terms": 0, "length": 0}
            keep_docs = unit.n_docs if cut is None else max(0, min(unit.n_docs, cut.n_docs - unit.first_doc))
            if "docs" in files and keep_docs:
                entry = old.get(files["docs"].name) if keep_docs == unit.n_docs else None
                if entry is None:
                    entry = self._open_unit(store, unit, files, keep_docs, bad, rebuild, placeholders)
                self.segments.append(entry)
                if unit.length is None:
                    stats["length"] = int(numeric(entry.segment.table.column("length")).sum(dtype=np.int64))
            if "dict" in files and not _known(base, unit, "dict"):
                if files["dict"].name in bad:
                    raise bad[files["dict"].name]  # term ids of every later segment depend on it
                got = map_table(store / files["dict"].name).column("term").to_pylist()
                stats["n_terms"] = len(got)
                if cut is not None and unit.first_term is not None:
                    got = got[: max(0, cut.n_terms - unit.first_term)]
                if base is not None:
                    got = got[max(0, base.n_terms - unit.first_term) :]
                terms.extend(got)
            if "sup" in files and not _known(base, unit, "sup"):
                if files["sup"].name in bad:
                    self._damaged(bad[files["sup"].name])
                else:
                    table = map_table(store / files["sup"].name)
                    stats["n_sup"] = len(table)
                    if cut is not None and unit.first_sup is not None:
                        table = table.slice(0, max(0, cut.n_sup - unit.first_sup))
                    if base is not None:
                        table = table.slice(max(0, base.n_sup - unit.first_sup))
                    sups.append((table, unit))
        return terms, sups, rebuild, placeholders

    def _open_unit(self, store, unit, files, keep, bad, rebuild, placeholders) -> "SegmentEntry":
        name = files["docs"].name
        partial = keep < unit.n_docs
        if name in bad:
            self._damaged(bad[name])
            entry = SegmentEntry(Segment.placeholder(name, unit.first_doc, keep, self.dim), Postings.empty())
            placeholders.append(entry)
        else:
            seg = Segment.open(store / name, name)
            if partial:
                seg = seg.head(keep)
            built = self._built.get(name) if not partial else None
            if "post" not in files:  # a small unit (writer.SMALL_UNIT): its postings are made here
                entry = SegmentEntry(seg, built["postings"] if built is not None else Postings.empty())
                if built is None:
                    rebuild.append(entry)
            elif files["post"].name in bad or files["index"].name in bad:
                # derived from the text: made again whether damaged or missing (a file a merge
                # removed meanwhile is made again from the very segment it was derived from)
                entry = SegmentEntry(seg, Postings.empty())
                rebuild.append(entry)
                self.rebuilt.extend(files[k].name for k in ("post", "index") if files[k].name in bad)
            else:
                post = Postings.open(store / files["post"].name, store / files["index"].name)
                entry = SegmentEntry(seg, post.head(keep) if partial else post)
        entry.partial = partial
        if "win" in files and files["win"].name in bad:
            self._damaged(bad[files["win"].name])
        elif "win" in files and not any(p is entry for p in placeholders):
            win = map_table(store / files["win"].name)
            rows = numeric(win.column("row"))
            emb = mapped_matrix(win.column("embedding"))
            if partial:
                keep_w = rows < keep
                rows, emb = rows[keep_w], emb[keep_w]
            entry.window_rows, entry.window_embeddings = rows, emb
        if "q8" not in files and self._int8 and "post" not in files:  # a small unit: its int8 copy made here
            built = self._built.get(name) if not partial else None
            if built is not None and "q8" in built:
                entry.q8, entry.q8_scale, entry.q8_order, entry.q8_dates = built["q8"]
                entry.q8_state = "built"
            else:
                _quantize_entry(entry)
        elif "q8" in files and (files["q8"].name in bad or any(p is entry for p in placeholders)):
            # derived from the embeddings: rebuild it rather than fail
            if files["q8"].name in bad:
                self.rebuilt.append(files["q8"].name)
            _quantize_entry(entry)
        elif "q8" in files:
            q8 = map_table(store / files["q8"].name)
            entry.q8 = mapped_matrix(q8.column("q"))
            entry.q8_state = "mapped"
            entry.q8_scale = numeric(q8.column("scale"))
            if "row" in q8.column_names:  # stored in date order (older stores: row order)
                entry.q8_order = numeric(q8.column("row"))
                entry.q8_dates = numeric(q8.column("date"))
            if partial:
                if entry.q8_order is None:
                    entry.q8, entry.q8_scale = entry.q8[:keep], entry.q8_scale[:keep]
                else:
                    sel = entry.q8_order < keep
                    entry.q8, entry.q8_scale = np.ascontiguousarray(entry.q8[sel]), entry.q8_scale[sel]
                    entry.q8_order, entry.q8_dates = entry.q8_order[sel], entry.q8_dates[sel]
                entry.q8_state = "built"
        return entry

    def _damaged(self, exc: CorruptStoreError) -> None:
        if (isinstance(exc, Vanished) and not self._lost_ok) or self.on_corrupt != "skip":
            raise exc
        self.skipped.append(exc.path)

    def _rebuild_postings(self, seg: Segment, lookup) -> Postings:
        """The postings of ``seg`` from its text, with this version's analyzer and term dictionary
        (``lookup(term)``: its id; the same analysis and inversion that wrote them)."""
        try:
            flat, lengths = self.analyzer.term_ids(seg.table.column("text").to_pylist(), lookup)
        except KeyError:
            raise CorruptStoreError(seg.name, "postings damaged and the text has terms missing from the dictionary") from None
        return Postings.build_flat(flat, lengths)

    @property
    def thread_links(self) -> tuple[np.ndarray, np.ndarray]:
        """(prev, next): each document's neighbour in its thread in ingest order, −1 for none (cached).

        Extended from an earlier version's links when this snapshot was made from one that had them."""
        links = self.__dict__.get("_thread_links")
        if links is None:
            codes = self.threads.codes
            n = len(codes)
            base = self.__dict__.pop("_links_from", None)
            if base is not None and base[1] is not None and n - base[2] <= LINK_TAIL_MAX:
                (p0, x0), last0, n0 = base
                prev = np.concatenate([p0, np.full(n - n0, -1, dtype=np.int64)])
                nxt = np.concatenate([x0, np.full(n - n0, -1, dtype=np.int64)])
                last = np.full(len(self.threads.names), -1, dtype=np.int64)
                last[: len(last0)] = last0
                _link_tail(codes, n0, prev, nxt, last)
            else:
                prev, nxt, last = code_links(codes, len(self.threads.names))
            links = self._thread_links = (prev, nxt)
            self._thread_last = last
        return links

    @property
    def has_threads(self) -> bool:
        """Whether any document has a thread neighbour (thread context can change a ranking)."""
        out = getattr(self, "_has_threads", None)
        if out is None:
            out = self._has_threads = bool((self.thread_links[0] >= 0).any())
        return out

    @property
    def has_windows(self) -> bool:
        """Whether any segment carries window vectors for long documents."""
        return any(e.window_rows is not None for e in self.segments)

    @property
    def lengths(self) -> np.ndarray:
        """float32 BM25 length (number of index terms) of every document (cached)."""
        out = getattr(self, "_lengths", None)
        if out is None:
            segs = [e.segment.lengths for e in self.segments]
            out = self._lengths = np.concatenate(segs) if segs else np.zeros(0, dtype=np.float32)
        return out

    # --- lookups -------------------------------------------------------------------------------
    def locate(self, doc_id: int) -> tuple["SegmentEntry", int]:
        """(segment, row) of a document id."""
        i = bisect_right(self._starts_list, doc_id) - 1
        entry = self.segments[i]
        return entry, doc_id - entry.base

    def row(self, doc_id: int) -> dict:
        return self.rows([doc_id])[0]

    def rows(self, doc_ids: list[int]) -> list[dict]:
        """:meth:`row` of many documents, read straight from the segments' buffers (``RowReader``)."""
        return self._take(doc_ids, None, embedding=True)

    def keys_of(self, doc_ids: np.ndarray) -> pa.Array:
        """The ``key`` of each document (null where it has none), in the order given, as one
        Arrow string array taken column by column from the segments."""
        docs = np.asarray(doc_ids, dtype=np.int64)
        if len(docs) == 0:
            return pa.array([], type=pa.string())
        seg = np.searchsorted(self._starts, docs, side="right") - 1
        order = np.argsort(seg, kind="stable")
        parts = []
        for i in np.unique(seg):
            rows = docs[order[seg[order] == i]] - self.segments[i].base
            parts.append(self.segments[i].reader("key").arr.take(pa.array(rows)).cast(pa.string()))
        inverse = np.empty(len(order), dtype=np.int64)
        inverse[order] = np.arange(len(order))
        return pa.concat_arrays(parts).take(pa.array(inverse))

    def _take(self, doc_ids, names: list[str] | None, embedding: bool = False) -> list[dict]:
        """Columns ``names`` (None: all but the embedding) of each document, in the order given;
        with ``embedding``, its row of the embedding matrix too."""
        out: list = []
        for doc in doc_ids:
            entry, r = self.locate(int(doc))
            if names is None:
                row = {name: get(r) for name, get in entry.row_getters()}
            else:
                row = {name: entry.reader(name).get(r) for name in names}
            if embedding:
                row["embedding"] = entry.segment.embeddings[r]
            out.append(row)
        return out

    def column(self, name: str) -> list:
        """A whole column as Python values, in doc-id order (for index building)."""
        out: list = []
        for e in self.segments:
            out.extend(e.segment.table.column(name).to_pylist())
        return out

    @property
    def n_live(self) -> int:
        """BM25's N: the documents of this version less the erased ones (as if never stored)."""
        return self.n_docs - len(self.erased)

    @property
    def avg_length(self) -> float:
        """BM25's mean document length, over :attr:`n_live` (an erased row keeps its length: taken out here)."""
        return (self.total_length - self.erased_length) / self.n_live if self.n_live else 0.0


def _prefix_of(previous: "Snapshot | None", state: State | None, cut: Entry | None) -> bool:
    """Whether ``previous`` (a snapshot of this process) holds a prefix of ``state`` cut at ``cut``:
    format 2 on both sides (units carry their counts), not newer, nothing skipped."""
    if previous is None or state is None or previous.state is None or previous.skipped or (state.format, previous.state.format) != (2, 2):
        return False
    target = cut if cut is not None else state
    since = [e for e in state.recent if e.version > previous.version]  # an erasure since rewrote rows ``previous`` holds
    if previous.version < target.version and (not since or since[0].version != previous.version + 1 or any(e.kind == "erase" for e in since)):
        return False
    return previous.version <= target.version and previous.n_docs <= target.n_docs and previous.n_sup <= target.n_sup and previous.n_terms <= target.n_terms


def _known(base: "Snapshot | None", unit: Unit, kind: str) -> bool:
    """Whether ``base`` already holds all of ``unit``'s dictionary terms or supersession events."""
    if base is None:
        return False
    if kind == "dict":
        return unit.first_term is not None and unit.first_term + unit.n_terms <= base.n_terms
    if kind == "sup":
        return unit.first_sup is not None and unit.first_sup + unit.n_sup <= base.n_sup
    return False


def _sup_arrays(sup: pa.Table | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if sup is None or not len(sup):
        return (np.zeros(0, dtype=np.int64),) * 4
    return (
        numeric(sup.column("old")).astype(np.int64),
        numeric(sup.column("new")).astype(np.int64),
        timestamp_column(sup.column("effective")),
        timestamp_column(sup.column("recorded_at")),
    )


def _link_tail(codes: np.ndarray, n0: int, prev: np.ndarray, nxt: np.ndarray, last: np.ndarray) -> None:
    """Link documents ``n0..`` to their threads' previous documents (``last``: each thread's last so far)."""
    for d in np.flatnonzero(codes[n0:] >= 0) + n0:
        c = codes[d]
        p = last[c]
        if p >= 0:
            prev[d] = p
            nxt[p] = d
        last[c] = d


def _quantize_entry(entry: "SegmentEntry") -> None:
    order = date_order(entry.segment.dates)
    emb = np.ascontiguousarray(entry.segment.embeddings[order], dtype=np.float32)
    entry.q8 = np.empty(emb.shape, dtype=np.int8)
    entry.q8_scale = np.empty(len(emb), dtype=np.float32)
    quantize_rows(emb, entry.q8, entry.q8_scale)
    entry.q8_order, entry.q8_dates = order, entry.segment.dates[order]
    entry.q8_state = "built"
