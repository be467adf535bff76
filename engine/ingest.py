"""Input validation: turn caller documents into checked rows before anything is written.

Every record of a batch is checked first; the first bad one raises a
:class:`ValidationError` naming it and the field, and nothing of the batch
is written.

Owns the checks of a caller's documents and vectors (:func:`prepare_batch`, :func:`check_vector`),
the checked :class:`Row`, and the fingerprints that match a record against what is stored. It
embeds nothing and writes nothing: the write path calls it, then embeds and commits.

Never imports: store, writer, searcher, planner, embedder, onnxruntime.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from concurrent.futures import Executor, Future
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import date
from typing import Any, Iterable, Mapping

import numpy as np

from mempp.kernels.tokenizer import maybe_unnormalized_ascii
from mempp.kernels.cosine import normalize_rows
from mempp.storage.analyzer import joined_ascii

from .dates import to_us
from .errors import ValidationError
from .inputs import MAX_NESTING
from .types import Document

STRING_FIELDS = ("author", "thread", "channel", "source")
KNOWN = {"id", "key", "text", "date", "meta", "supersedes", "readers", *STRING_FIELDS}  # readers: access.record_readers


@dataclass(slots=True)
class Row:
    """A checked document ready to be stored (``text`` non-empty)."""

    record: int
    key: str | None
    text: str
    author: str | None
    date: int | None  # µs UTC
    thread: str | None
    channel: str | None
    source: str | None
    meta: str | None  # JSON, verbatim caller fields
    supersedes: tuple[str, ...]
    fingerprint: int


UNNORMALIZED = re.compile(r"\s\s|[^\S ]|^\s|\s$")  # whatever " ".join(text.split()) would change


def fingerprint(author: str | None, text: str) -> int:
    """Identity of a re-ingest: the author and the text with whitespace normalized."""
    norm = " ".join(text.split()) if unnormalized(text) else text
    # surrogatepass: the same bytes as UTF-8 for every string a stored row can hold; a lone
    # surrogate (refused by the check, or in the author of a record skipped for its empty
    # text) still hashes when fingerprints are computed ahead of the check, rather than raising.
    data = (author or "").encode("utf-8", "surrogatepass") + b"\x00" + norm.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def unnormalized(text: str) -> bool:
    """Whether ``" ".join(text.split())`` differs from ``text`` (``UNNORMALIZED`` matches).

    Every whitespace character but the space is unprintable, so in printable text only
    spaces matter: doubled, leading or trailing. ``str.isprintable`` and ``in`` run at
    C speed; the regex (tens of microseconds for a page of text) is left for the rest.
    """
    if text.isprintable():
        return "  " in text or text.startswith(" ") or text.endswith(" ")
    return UNNORMALIZED.search(text) is not None


def _as_mapping(doc: Any, record: int) -> Mapping[str, Any]:
    if type(doc) is dict or isinstance(doc, Mapping):  # a dict skips the (slow) ABC check
        return doc
    if isinstance(doc, Document):
        d = asdict(doc)
        meta = d.pop("meta") or {}
        return {**meta, **{k: v for k, v in d.items() if v is not None and v != ()}}
    if is_dataclass(doc) and not isinstance(doc, type):
        return asdict(doc)
    raise ValidationError(f"expected a dict or mempp.Document, got {type(doc).__name__}", record=record)


def _check_key(key: Any, name: str, record: int) -> str | None:
    """A record's ``id``: absent or None (a document without a key), else a string with
    something besides whitespace; ``name`` is the field that held it (``id``, or ``key``)."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise ValidationError(f"expected a string, got {type(key).__name__}", field=name, record=record)
    _check_utf8(key, name, record, None)
    if not key.strip():
        raise ValidationError(
            f"an empty id ({key!r}); leave the field out, or null, for a document without one", field=name, record=record
        )
    return key


def _string(value: Any, name: str, record: int, key: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"expected a string or null, got {type(value).__name__}", field=name, record=record, key=key)
    _check_utf8(value, name, record, key)
    return value


def _check_utf8(value: str, name: str, record: int, key: str | None) -> None:
    if value.isascii():  # the common case, checked at C speed without an encoding pass
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"not valid Unicode text ({exc.reason} at {exc.start})", field=name, record=record, key=key) from None


# The fields a plain record may have for ``prepare``'s fast path (anything else takes the general one).
_PLAIN = frozenset({"id", "text", "date", "author"})


@dataclass(slots=True)
class NewRows:
    """The rows one commit adds, column by column (a list of :class:`Row` transposed, or a
    :class:`Plain` batch's columns); ``records[i]``: the caller's record of row ``i``."""

    records: list[int]
    keys: list[str | None]
    texts: list[str]
    authors: list[str | None]
    dates: list[int | None]
    threads: list[str | None]
    channels: list[str | None]
    sources: list[str | None]
    metas: list[str | None]
    fingerprints: list[int]

    @classmethod
    def of(cls, rows: list[Row]) -> "NewRows":
        return cls(
            [r.record for r in rows], [r.key for r in rows], [r.text for r in rows], [r.author for r in rows],
            [r.date for r in rows], [r.thread for r in rows], [r.channel for r in rows], [r.source for r in rows],
            [r.meta for r in rows], [r.fingerprint for r in rows],
        )

    def __len__(self) -> int:
        return len(self.records)


@dataclass(slots=True)
class Plain:
    """A batch of plain records checked column by column (:func:`check_plain`): the kept
    records (non-empty text) and their texts, authors and dates (µs), and their fingerprints
    (set by :func:`prepare_batch`)."""

    n_records: int
    records: list[int]
    texts: list[str]
    authors: list[str | None]
    dates: list[int | None]
    fingerprints: list[int] = field(default_factory=list)  # each kept row's, once known

    def rows(self) -> list[Row | None]:
        """The rows :func:`prepare` returns for the same records."""
        out: list[Row | None] = [None] * self.n_records
        for i, rec in enumerate(self.records):
            out[rec] = Row(rec, None, self.texts[i], self.authors[i], self.dates[i], None, None, None, None, (), self.fingerprints[i])
        return out

    def new_rows(self) -> NewRows:
        n = len(self.records)
        none = [None] * n
        return NewRows(self.records, none, self.texts, self.authors, self.dates, none, none, none, none, self.fingerprints)


# The fields of a record :func:`check_plain` takes (an id brings key rules: the per-record path).
_PLAIN_COLUMNS = frozenset({"text", "date", "author"})


def check_plain(docs: list, texts: list[str]) -> Plain | None:
    """The checks of :func:`prepare`, column by column at C speed, for a batch of plain records:
    dicts with no fields but ``text``, ``date`` and ``author`` (``texts``: their texts, all strings).

    Returns None when a record is not plain or fails a check: the per-record path then finds
    the first error (or, for an odd but valid record, the same result the long way). So every
    batch this accepts gets what :func:`prepare` would give it.
    """
    if not all(d.keys() <= _PLAIN_COLUMNS for d in docs):
        return None
    if not all(map(str.isascii, texts)) and not _encodable(texts):
        return None
    n = len(docs)
    if all(map(str.strip, texts)):  # strip returns the string itself, true unless empty after stripping
        records = list(range(n))
        kept = docs
    else:
        records = [i for i, t in enumerate(texts) if t.strip()]
        texts = [texts[i] for i in records]
        kept = [docs[i] for i in records]
    authors = list(map(dict.get, kept, itertools.repeat("author")))
    named = [a for a in authors if a is not None]
    if named and (not all(type(a) is str for a in named) or not (all(map(str.isascii, named)) or _encodable(named))):
        return None
    whens = list(map(dict.get, kept, itertools.repeat("date")))
    if not all(w is None or type(w) is str for w in whens):  # date objects: the per-record path
        return None
    parsed: dict[str | None, int | None] = {None: None}
    try:
        for when in set(whens):
            if when is not None:
                parsed[when] = to_us(when)
    except (ValueError, TypeError, OverflowError):
        return None
    return Plain(n, records, texts, authors, list(map(parsed.__getitem__, whens)))


def _encodable(strings: list[str]) -> bool:
    """Whether every string encodes as UTF-8 (lone surrogates do not)."""
    try:
        for s in strings:
            if not s.isascii():
                s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Deferred:
    """``fn(*args)`` submitted to ``pool``; :meth:`result` runs it on the caller's thread
    instead when the pool has not started it yet (a thread that would only wait does the work)."""

    def __init__(self, pool: Executor, fn, *args) -> None:
        self._fn, self._args = fn, args
        self._future = pool.submit(fn, *args)

    def result(self):
        if self._future.cancel():  # still queued: compute here
            done: Future = Future()
            try:
                done.set_result(self._fn(*self._args))
            except BaseException as exc:
                done.set_exception(exc)
            self._future = done
        return self._future.result()


def prepare(docs: Iterable[Any], embeddings: Any, dim: int | None) -> list[Row | None]:
    """Check every document; ``None`` marks an empty or whitespace-only text (skipped, as the reference does)."""
    return prepare_batch(docs, embeddings, dim)[0]


def prepare_batch(
    docs: Iterable[Any], embeddings: Any, dim: int | None, pool: Executor | None = None,
    fingerprints: Future | Deferred | None = None, texts: list[str] | None = None,
) -> tuple[list[Row | None] | Plain, np.ndarray | None]:
    """:func:`prepare`, and the checked (unit) embeddings as one matrix, row ``i`` for record ``i``.

    ``pool``: the embeddings are normalized there (the compiled kernel releases the GIL) while
    the records are checked here; an embeddings error still comes first, as when they are checked first.
    ``fingerprints``: a future (or :class:`Deferred`) of :func:`fingerprints` of every record's
    author and text (:func:`record_fingerprints`), used for the rows of the fast path and of a
    :class:`Plain` batch.
    ``texts``: every record's text, when every record is a dict with a string text: a batch
    :func:`check_plain` accepts comes back as a :class:`Plain` in place of the rows.
    """
    docs = list(docs)

    def check(emb: np.ndarray | None) -> tuple[list[Row | None] | Plain, np.ndarray | None]:
        plain = None if texts is None else check_plain(docs, texts)
        if plain is None:
            return _check_records(docs, emb, fingerprints)
        # while the embeddings are normalized (a Deferred runs here if the pool has not started it)
        got = record_fingerprints(docs, texts) if fingerprints is None else fingerprints.result()
        plain.fingerprints = (got if len(plain.records) == plain.n_records else got[plain.records]).tolist()
        return plain, emb

    if pool is None:
        return check(check_embeddings(embeddings, len(docs), dim))
    raw = _embeddings_array(embeddings, len(docs), dim)
    if raw is None:
        return check(None)
    emb = np.empty(raw.shape, dtype=np.float32)  # the rows' views of it are filled in the pool
    pending = pool.submit(_normalize_rows, raw, emb)
    try:
        out = check(emb)
    except BaseException:
        pending.result()  # an embeddings error is raised instead (it is the first)
        raise
    pending.result()
    return out


def _check_records(docs: list, emb: np.ndarray | None, fps: Future | Deferred | None) -> tuple[list[Row | None], np.ndarray | None]:
    rows: list[Row | None] = []
    append = rows.append
    plain: list[Row] = []  # fast-path rows, fingerprinted together at the end
    dates: dict[str, int] = {}  # the batch's distinct date strings, parsed once
    for i, raw in enumerate(docs):
        if type(raw) is dict and raw.keys() <= _PLAIN:
            # Fast path for the common record: the checks of the general path below, in its
            # order (so the same first error), for the fields a plain dict can have.
            key = raw.get("id")
            text = raw.get("text")
            author = raw.get("author")
            if (key is None or type(key) is str) and type(text) is str and (author is None or type(author) is str):
                if key is not None:
                    _check_key(key, "id", i)
                _check_utf8(text, "text", i, key)
                if not text.strip():
                    append(None)
                    continue
                if author is not None:
                    _check_utf8(author, "author", i, key)
                when = raw.get("date")
                if when is None:
                    us = None
                elif type(when) is str:
                    us = dates.get(when)
                    if us is None:
                        us = dates[when] = _date(when, i, key)
                else:
                    us = _date(when, i, key)
                row = Row(i, key, text, author, us, None, None, None, None, (), 0)
                append(row)
                plain.append(row)
                continue
        d = _as_mapping(raw, i)
        key = _check_key(d.get("id", d.get("key")), "id" if "id" in d or "key" not in d else "key", i)
        text = d.get("text")
        if not isinstance(text, str):
            raise ValidationError(
                f"expected a string, got {type(text).__name__}" if text is not None else "missing",
                field="text", record=i, key=key,
            )
        _check_utf8(text, "text", i, key)
        if not text.strip():
            append(None)
            continue
        strings = {name: _string(d.get(name), name, i, key) for name in STRING_FIELDS}
        when = d.get("date")
        date_us = None if when is None else _date(when, i, key)
        sup = d.get("supersedes") or ()
        if isinstance(sup, str):
            sup = (sup,)
        if not isinstance(sup, (list, tuple)) or not all(isinstance(s, str) and s.strip() for s in sup):
            raise ValidationError("expected an id (a non-empty string) or a list of ids", field="supersedes", record=i, key=key)
        meta = {k: v for k, v in d.items() if k not in KNOWN}
        if isinstance(d.get("meta"), Mapping):
            meta = {**d["meta"], **meta}
        elif d.get("meta") is not None:
            meta["meta"] = d["meta"]
        if meta.get("references") is not None:  # the documents it answers, cites or revises (mempp.chain)
            refs = meta["references"]
            refs = [refs] if isinstance(refs, str) else refs
            if not isinstance(refs, (list, tuple)) or not all(isinstance(r, str) and r.strip() for r in refs):
                raise ValidationError("expected an id (a non-empty string) or a list of ids", field="references", record=i, key=key)
            meta["references"] = list(refs)
        deep = False
        try:
            meta_json = json.dumps(meta, ensure_ascii=False, allow_nan=False, sort_keys=True) if meta else None
            if meta_json is not None:
                meta_json.encode("utf-8")
        except RecursionError:  # json.dumps ran out of stack
            deep = True
        except (TypeError, ValueError, UnicodeEncodeError) as exc:
            raise ValidationError(f"extra fields must be JSON values ({exc})", field="meta", record=i, key=key) from None
        if deep or (meta_json is not None and _too_deep(meta_json)):
            raise ValidationError(
                f"an extra field nests lists and objects more than {MAX_NESTING} levels deep", field="meta", record=i, key=key
            )
        append(
            Row(
                record=i,
                key=key,
                text=text,
                date=date_us,
                meta=meta_json,
                supersedes=tuple(str(s) for s in sup),
                fingerprint=fingerprint(strings["author"], text),
                **strings,
            )
        )
    if fps is None:
        fingerprint_rows(plain)
    elif plain:
        got = fps.result().tolist()
        for r in plain:
            r.fingerprint = got[r.record]
    return rows, emb


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _too_deep(meta_json: str) -> bool:
    """Whether a record's extra fields (``meta_json``: their object) nest lists and objects more
    than ``MAX_NESTING`` levels deep."""
    limit = MAX_NESTING + 1  # the fields' own object is one level
    return meta_json.count("[") + meta_json.count("{") > limit and json_depth(meta_json) > limit


def json_depth(text: str) -> int:
    """How deep the lists and objects of a JSON text nest (0 for a scalar)."""
    code = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8"), dtype=np.uint8)
    steps = np.isin(code, (ord("["), ord("{"))).astype(np.int64) - np.isin(code, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max()) if len(steps) else 0


class FingerprintIndex:
    """Every indexed document's fingerprint, sorted, with its doc id: the re-ingest check's
    lookups by fingerprint, vectorized over a batch (16 bytes a document, where a dict of
    lists took about 200 and a Python loop over every stored row to build).

    Two sorted runs: the main one and the newest documents'. A commit merges into the newer
    run only, which merges into the main one once it holds an eighth as many documents, so
    that a small commit on a large store does not copy the whole index.
    """

    __slots__ = ("runs",)

    def __init__(self) -> None:
        empty = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
        self.runs = [empty, empty]  # (fingerprints sorted, doc ids): main, newest

    def extend(self, fps: np.ndarray, first_doc: int) -> None:
        """Add documents ``first_doc, first_doc + 1, ...`` (newer than every indexed one) with ``fps``."""
        fps = np.asarray(fps, dtype=np.uint64)
        if not len(fps):
            return
        order = np.argsort(fps, kind="stable")
        newest = _merge(self.runs[1], (fps[order], first_doc + order.astype(np.int64)))
        if len(newest[0]) * 8 > len(self.runs[0][0]):
            self.runs = [_merge(self.runs[0], newest), (newest[0][:0], newest[1][:0])]
        else:
            self.runs[1] = newest

    def contains(self, fps: np.ndarray) -> np.ndarray:
        """Whether each of ``fps`` (uint64) is some indexed document's fingerprint."""
        fps = np.asarray(fps, dtype=np.uint64)
        out = np.zeros(len(fps), dtype=np.bool_)
        for run, _ in self.runs:
            if len(run):
                out |= run[np.minimum(np.searchsorted(run, fps), len(run) - 1)] == fps
        return out

    def docs_of(self, fp: int) -> np.ndarray:
        """The indexed documents with fingerprint ``fp``, oldest first."""
        key = np.uint64(fp)
        parts = [docs[np.searchsorted(run, key, side="left") : np.searchsorted(run, key, side="right")] for run, docs in self.runs]
        return np.concatenate(parts)


def _merge(old: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Two sorted (fingerprints, docs) runs as one, ``new``'s documents (all newer) after ``old``'s
    equal fingerprints, so that the docs of one fingerprint stay in ingest order."""
    at = np.searchsorted(old[0], new[0], side="right")
    return np.insert(old[0], at, new[0]), np.insert(old[1], at, new[1])


def record_fingerprints(docs: list[dict], texts: list[str], ascii: Future | None = None) -> np.ndarray:
    """:func:`fingerprints` of dict records (``texts``: their texts, all strings), before they are
    checked: an author that is not a string counts as none (such a record does not take the fast
    path). ``ascii``: a future of ``joined_ascii(texts)``."""
    authors = [d.get("author") for d in docs]
    return fingerprints([a if type(a) is str else None for a in authors], texts, None if ascii is None else ascii.result())


def fingerprint_rows(rows: list[Row]) -> None:
    """Set each row's :func:`fingerprint`: for ASCII texts and authors, a compiled pass over all
    of them at once clears the texts whitespace normalization leaves alone (the rest take
    the exact check of :func:`fingerprint`), and hashlib's BLAKE2b hashes those.
    """
    if not rows:
        return
    for r, fp in zip(rows, fingerprints([r.author for r in rows], [r.text for r in rows]).tolist()):
        r.fingerprint = fp


def fingerprints(authors: list[str | None], texts: list[str], ascii: tuple | None = None) -> np.ndarray:
    """``fingerprint(authors[t], texts[t])`` for every ``t``, as uint64 (``ascii``: ``joined_ascii(texts)`` if made).

    For ASCII texts and authors, a compiled pass over the joined texts finds those whitespace
    normalization leaves alone; their bytes are the author, a NUL and the text as it is, hashed
    with hashlib's BLAKE2b and read as little-endian integers all at once. The others take
    :func:`fingerprint`.
    """
    n = len(texts)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    if ascii is None:
        ascii = joined_ascii(texts)
    named = [a for a in authors if a]
    if ascii is None or (named and not "".join(named).isascii()):
        out[:] = [fingerprint(a, t) for a, t in zip(authors, texts)]
        return out
    data, offs = ascii
    flags = np.empty(n, dtype=np.bool_)
    maybe_unnormalized_ascii(data, offs, flags)
    blake2b = hashlib.blake2b
    digests = [
        fingerprint(a, t).to_bytes(8, "little") if f else blake2b(((a or "") + "\x00" + t).encode("ascii"), digest_size=8).digest()
        for a, t, f in zip(authors, texts, flags.tolist())
    ]
    out[:] = np.frombuffer(b"".join(digests), dtype="<u8")
    return out


def _date(when: Any, i: int, key: str | None) -> int:
    if not isinstance(when, (str, date)):
        raise ValidationError(f"expected an ISO 8601 string or datetime, got {type(when).__name__}", field="date", record=i, key=key)
    try:
        return to_us(when)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValidationError(f"cannot parse {when!r} as an ISO 8601 date ({exc})", field="date", record=i, key=key) from None


def check_embeddings(embeddings: Any, n: int, dim: int | None) -> np.ndarray | None:
    """``n`` embeddings as unit float32 rows of dimension ``dim`` (None passes through); a NaN,
    an infinity or a wrong shape raises :class:`ValidationError`."""
    emb = _embeddings_array(embeddings, n, dim)
    if emb is None:
        return None
    out = np.empty(emb.shape, dtype=np.float32)
    _normalize_rows(emb, out)
    return out


def _embeddings_array(embeddings: Any, n: int, dim: int | None) -> np.ndarray | None:
    """The embeddings as a float32 array of the right shape (not yet checked for NaN or infinity)."""
    if embeddings is None:
        return None
    try:
        emb = np.asarray(embeddings, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not a numeric array ({exc})", field="embeddings") from None
    if emb.ndim != 2 or emb.shape[0] != n:
        raise ValidationError(f"expected shape ({n}, dim), got {emb.shape}", field="embeddings")
    if dim is not None and emb.shape[1] != dim:
        raise ValidationError(f"expected dimension {dim}, got {emb.shape[1]}", field="embeddings")
    return emb


def _normalize_rows(emb: np.ndarray, out: np.ndarray) -> None:
    """``out``: the rows of ``emb`` scaled to unit length (zero rows stay zero), bit for bit as
    numpy's ``emb / np.linalg.norm(emb, axis=1, keepdims=True)`` (:func:`normalize_rows`, one
    compiled pass); a NaN or an infinity raises, naming the first such record."""
    bad = normalize_rows(np.ascontiguousarray(emb), out)
    if bad >= 0:
        raise ValidationError("contains NaN or infinity", field="embedding", record=int(bad))


def check_query_vectors(embeddings: Any, n: int, dim: int) -> np.ndarray:
    """A batch's supplied question vectors checked: ``(n, dim)``, finite, each normalized."""
    vecs = np.asarray(embeddings, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape != (n, dim):
        raise ValidationError(f"expected shape ({n}, {dim}), got {vecs.shape}", field="embeddings")
    return np.stack([check_vector(v, dim) for v in vecs]) if len(vecs) else vecs


def check_vector(vec: Any, dim: int, name: str = "embedding") -> np.ndarray:
    """A query vector as a unit float32 array of the store's dimension."""
    try:
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not a numeric vector ({exc})", field=name) from None
    if v.shape[0] != dim:
        raise ValidationError(f"expected dimension {dim}, got {v.shape[0]}", field=name)
    if not np.isfinite(v).all():
        raise ValidationError("contains NaN or infinity", field=name)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 and not math.isclose(norm, 1.0, rel_tol=1e-6) else v
