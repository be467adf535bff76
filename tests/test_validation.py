"""Bad input gets a ValidationError that names the field and the record, and nothing of the batch is written."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mempp

GOOD = {"id": "ok", "text": "a valid document", "author": "A", "date": "2023-01-01"}


def json_nest(levels: int):
    """A value of ``levels`` nested lists (``[[...]]``), built without recursion."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


BAD = [
    ({"text": 42}, "text"),
    ({"id": "k"}, "text"),
    ({"text": "x", "date": "2023-13-45"}, "date"),
    ({"text": "x", "date": "not a date"}, "date"),
    ({"text": "x", "date": 20230101}, "date"),
    ({"text": "x", "author": 7}, "author"),
    ({"text": "x", "thread": ["t"]}, "thread"),
    ({"text": "x", "channel": {"c": 1}}, "channel"),
    ({"text": "bad \ud800 surrogate"}, "text"),
    ({"text": "x", "author": "bad \udfff"}, "author"),
    ({"text": "x", "id": 1.5}, "id"),
    ({"text": "x", "id": 42}, "id"),
    ({"text": "x", "id": ""}, "id"),
    ({"text": "x", "id": " \t"}, "id"),
    ({"text": "x", "key": 7}, "key"),
    ({"text": "x", "supersedes": 3}, "supersedes"),
    ({"text": "x", "supersedes": ["ok", ""]}, "supersedes"),
    ({"text": "x", "extra": [[[[]]]] * 2 + [json_nest(101)]}, "meta"),
    ({"text": "x", "supersedes": 3.0}, "supersedes"),
    ({"text": "x", "supersedes": "no-such-key"}, "supersedes"),
    ({"text": "x", "extra": float("nan")}, "meta"),
    ({"text": "x", "extra": object()}, "meta"),
]


@pytest.mark.parametrize("bad,field", BAD)
def test_bad_record_names_field_and_record_and_writes_nothing(store, bad, field):
    store.add([GOOD])
    version, n = store.version, len(store)
    with pytest.raises(mempp.ValidationError) as info:
        store.add([{**GOOD, "id": "first"}, {**GOOD, "id": "second", "text": "another"}, bad])
    err = info.value
    assert err.field == field and err.record == 2
    assert "record 2" in str(err) and repr(field) in str(err)
    assert store.version == version and len(store) == n
    store.close()
    with mempp.Store.open(store.path) as again:  # and nothing reached the disk
        assert again.version == version and len(again) == n


def test_not_a_mapping(store):
    with pytest.raises(mempp.ValidationError, match="record 0"):
        store.add(["just a string"])


@pytest.mark.parametrize(
    "emb,match",
    [
        (np.ones((2, 5)), "dimension"),
        (np.ones((3, 384)), "shape"),
        (np.array([[1.0] * 384, [math.nan] + [0.0] * 383]), "NaN"),
        (np.array([[1.0] * 384, [math.inf] + [0.0] * 383]), "NaN"),
        ("nope", "numeric"),
    ],
)
def test_bad_embeddings(store, emb, match):
    with pytest.raises(mempp.ValidationError, match=match):
        store.add([{"text": "a"}, {"text": "b"}], embeddings=emb)
    assert len(store) == 0


def test_nan_record_is_named(store):
    emb = np.ones((2, 384), dtype=np.float32)
    emb[1, 3] = np.nan
    with pytest.raises(mempp.ValidationError) as info:
        store.add([{"text": "a"}, {"text": "b"}], embeddings=emb)
    assert info.value.record == 1


def test_dates_policy(store):
    store.add([
        {"id": "naive", "text": "naive", "date": "2023-05-08T10:00:00"},
        {"id": "offset", "text": "offset", "date": "2023-05-08T12:00:00+02:00"},
        {"id": "zulu", "text": "zulu", "date": "2023-05-08T10:00:00Z"},
        {"id": "far", "text": "far future", "date": "9999-12-31"},
        {"id": "old", "text": "very old", "date": "0001-01-01"},
    ])
    assert store.get("naive").date == store.get("offset").date == store.get("zulu").date
    assert store.get("far").date.year == 9999 and store.get("old").date.year == 1
    assert "far" not in {h.key for h in store.query("far future", as_of="2024-01-01")}


# --- an oracle of the documented input rules ------------------------------------------------------
def _unicode(value: str) -> bool:
    """Valid Unicode text: no lone surrogate (it has no UTF-8 encoding)."""
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _date_ok(value) -> bool:
    """An ISO 8601 string (Python's reading of it), a ``datetime`` or a ``date``, convertible to UTC."""
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return False
        try:
            value = datetime.fromisoformat(s)
        except ValueError:
            return False
    if isinstance(value, datetime):
        try:
            (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except OverflowError:
            return False
        return True
    return isinstance(value, date)


def first_invalid(docs: list[dict]) -> tuple[str, int] | None:
    """``(field, record)`` of the first error the README's rules give a batch of dicts with the
    fields ``id``, ``text``, ``author``, ``date`` and any extra (JSON) fields, or None when every
    record is valid. Per record, in order: ``id`` (absent, null, or a string of valid Unicode with
    something besides whitespace); ``text``
    (a string, valid Unicode; an empty or whitespace-only text skips the rest: the record is not
    stored); ``author`` (a string or null, valid Unicode); ``date`` (null or a date); the extra
    fields (JSON values: no NaN or infinity)."""
    for i, doc in enumerate(docs):
        key = doc.get("id")
        if key is not None and (not isinstance(key, str) or not _unicode(key) or not key.strip()):
            return "id", i
        text = doc.get("text")
        if not isinstance(text, str) or not _unicode(text):
            return "text", i
        if not text.strip():
            continue
        author = doc.get("author")
        if author is not None and (not isinstance(author, str) or not _unicode(author)):
            return "author", i
        if doc.get("date") is not None and not _date_ok(doc["date"]):
            return "date", i
        extra = {k: v for k, v in doc.items() if k not in ("id", "text", "author", "date")}
        if any(isinstance(v, float) and not math.isfinite(v) for v in extra.values()):
            return "meta", i
        if any(isinstance(v, str) and not _unicode(v) for v in extra.values()):
            return "meta", i
    return None


VALID = {
    "text": st.text(max_size=50),
    "date": st.one_of(st.none(), st.dates().map(str), st.datetimes().map(str)),
    "author": st.one_of(st.none(), st.text(max_size=10)),
}
# Mostly invalid (a text date may parse: the oracle decides).
INVALID = {
    "text": st.one_of(st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2)),
    "date": st.one_of(st.text(max_size=25), st.integers()),
    "author": st.integers(),
}


@st.composite
def batches(draw) -> list[dict]:
    """A batch of valid records, in about half the examples with one to three fields made bad."""
    docs = draw(st.lists(st.fixed_dictionaries(VALID), max_size=5))
    if docs and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(docs) - 1))
            name = draw(st.sampled_from(sorted(INVALID)))
            docs[i][name] = draw(INVALID[name])
    return docs


@settings(max_examples=60, deadline=None)
@given(docs=batches())
@example(docs=[{"text": "fine", "date": "2023-01-01", "author": None}])  # valid input must be stored
@example(docs=[{"text": "fine", "date": None, "author": "A"}, {"text": "x", "date": "2023-02-30", "author": None}])
@example(docs=[{"text": "0", "date": None, "author": None}, {"text": "0", "date": None, "author": ""}])  # a re-ingest within the batch
def test_any_input_is_stored_exactly_or_rejected_whole(tmp_path_factory, docs):
    """Each example on a fresh store: the oracle says whether the batch is valid and, if not,
    which record and field the error must name."""
    with mempp.Store.open(tmp_path_factory.mktemp("v") / "s", embedder=mempp.HashEmbedder()) as store:
        store.add([GOOD])  # something stored already (a re-ingest of it is possible)
        before, version = len(store), store.version
        expected = first_invalid(docs)
        try:
            ids = store.add(docs)
        except mempp.ValidationError as exc:
            assert (exc.field, exc.record) == expected, (exc, expected)
            assert len(store) == before and store.version == version
            return
        assert expected is None, f"accepted a batch the rules reject at {expected}"
        assert len(ids) == len(docs)
        for i, (doc, doc_id) in enumerate(zip(docs, ids)):
            if doc_id is None:
                assert not doc["text"].strip()
                continue
            rec = store.get(doc_id)
            assert " ".join(rec.text.split()) == " ".join(doc["text"].split())
            # A re-ingest (of a row stored before, or of an earlier record of this batch) returns
            # that row, whose author may be None where this one is "" (the same fingerprint).
            reingest = doc_id < before or doc_id in ids[:i]
            assert rec.author == doc["author"] or (reingest and (rec.author or "") == (doc["author"] or ""))


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("ab \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000")), max_size=12))
def test_fingerprint_fast_path_normalizes_whitespace_like_split(text):
    from mempp.ingest import UNNORMALIZED

    assert (UNNORMALIZED.search(text) is None) == (" ".join(text.split()) == text)


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("ab  \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000\x00\x7f\u200b")), max_size=12) | st.text(max_size=12))
def test_fingerprint_whitespace_check_agrees_with_split(text):
    from mempp.ingest import unnormalized

    assert unnormalized(text) == (" ".join(text.split()) != text)


class _Record(dict):
    """A mapping that is not exactly a dict: takes prepare's general path."""


_field_values = st.one_of(st.none(), st.text(max_size=6), st.sampled_from(["2023-01-01", "bad \ud800", " ", "2023-02-30", "2023-05-08T10:00:00Z"]), st.integers(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["id", "text", "date", "author", "key", "thread"]), _field_values, max_size=5), max_size=4))
def test_prepare_fast_path_equals_the_general_path(docs):
    """Plain dicts take a fast path; it must give the same rows, or the same first error, as the general one."""
    from mempp.ingest import prepare

    def run(records):
        try:
            return prepare(records, None, None)
        except mempp.ValidationError as exc:
            return (exc.field, exc.record, exc.key, str(exc))

    assert run(docs) == run([_Record(d) for d in docs])


_plain_values = st.one_of(
    st.none(),
    st.text(st.sampled_from(list("ab \t\u3000é\ud800")), max_size=4),
    st.sampled_from(["2023-01-01", "2023-01-01", "2023-02-30", "2023-05-08T10:00:00+02:00", "", "x"]),
    st.integers(),
    st.dates(),
)


@settings(max_examples=500, deadline=None)
@example(docs=[{"text": "", "author": "\ud800"}])  # skipped for its text: its author must not raise in the fingerprints
@given(
    st.lists(
        st.fixed_dictionaries(
            {"text": st.text(st.sampled_from(list("ab \t\u3000é")), max_size=4) | st.just("b\ud800")},
            optional={"date": _plain_values, "author": _plain_values, "id": st.just("k"), "thread": st.just("t")},
        ),
        max_size=6,
    )
)
def test_column_check_of_plain_records_equals_the_row_check(docs):
    """``check_plain`` takes a batch only when its rows are those of the per-record check (the
    rest goes the per-record way, which names the first error); the common batch it takes."""
    from mempp.ingest import Plain, check_plain, fingerprint, prepare, prepare_batch

    texts = [d["text"] for d in docs]
    plain = check_plain(docs, texts)
    try:
        want = prepare([_Record(d) for d in docs], None, None)
    except mempp.ValidationError:
        assert plain is None
        return
    if plain is not None:
        plain.fingerprints = [fingerprint(plain.authors[i], t) for i, t in enumerate(plain.texts)]
        assert plain.rows() == want
        new = plain.new_rows()
        whole, _ = prepare_batch(docs, None, None, texts=texts)  # with no fingerprints future: computed there
        assert isinstance(whole, Plain) and whole.rows() == want
        assert (new.records, new.texts, new.authors, new.dates) == ([r.record for r in want if r], [r.text for r in want if r], [r.author for r in want if r], [r.date for r in want if r])
    elif all(d.keys() <= {"text", "date", "author"} and type(d.get("date")) in (str, type(None)) and type(d.get("author")) in (str, type(None)) for d in docs):
        pytest.fail("a valid batch of plain records was left to the per-record check")


def test_embeddings_are_checked_in_chunks_exactly_as_one_array():
    from mempp.ingest import check_embeddings

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((9000, 16)).astype(np.float32) * 3
    emb[[0, 4096, 8999]] = 0
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    want = np.where(norms > 0, emb / np.where(norms > 0, norms, 1), 0).astype(np.float32)
    assert np.array_equal(check_embeddings(emb, 9000, 16).view(np.uint32), want.view(np.uint32))
    emb[[4500, 7000], 3] = [np.inf, np.nan]
    with pytest.raises(mempp.ValidationError) as info:
        check_embeddings(emb, 9000, 16)
    assert info.value.record == 4500


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 9000), st.integers(1, 40), st.sampled_from([1e-30, 1e-3, 1.0, 1e3, 1e19, 1e37]), st.integers(0, 2**32 - 1))
def test_normalized_embeddings_equal_those_of_linalg_norm(n, dim, scale, seed):
    """The normalization (one compiled pass) against np.linalg.norm, bit for bit, at
    magnitudes where squares underflow or overflow, with zero rows."""
    _assert_normalized_as_numpy(np.random.default_rng(seed), n, dim, scale, zero_share=0.05)


def _assert_normalized_as_numpy(rng, n: int, dim: int, scale: float, zero_share: float) -> np.ndarray:
    """Check ``check_embeddings`` of random rows (some zero) against numpy bit for bit; return the rows."""
    from mempp.ingest import check_embeddings

    emb = (rng.standard_normal((n, dim)) * scale).astype(np.float32)
    emb[rng.random(n) < zero_share] = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        want = np.where(norms > 0, emb / np.where(norms > 0, norms, 1), 0).astype(np.float32)
        got = check_embeddings(emb, n, dim)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    return emb


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.one_of(st.integers(1, 48), st.sampled_from([127, 128, 129, 136, 255, 256, 257, 384, 1000, 1536])), st.sampled_from([1e-30, 1e-3, 1.0, 1e3, 1e19, 1e37]), st.integers(0, 2**32 - 1))
def test_wide_rows_normalize_as_numpy_sums_them(n, dim, scale, seed):
    """Rows longer than numpy's pairwise block (128) are summed in halves: the compiled
    normalization follows the same split, bit for bit, and names the first row with a NaN."""
    from mempp.ingest import check_embeddings

    rng = np.random.default_rng(seed)
    emb = _assert_normalized_as_numpy(rng, n, dim, scale, zero_share=0.1)
    bad = sorted(set(rng.integers(0, n, 2).tolist()))
    emb[bad[0], dim - 1] = np.nan
    emb[bad[-1], 0] = -np.inf
    with pytest.raises(mempp.ValidationError) as info:
        check_embeddings(emb[:, ::1] if seed % 2 else np.asfortranarray(emb), n, dim)
    assert (info.value.field, info.value.record) == ("embedding", bad[0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.text(st.sampled_from(list("ab  \t\n\r\x0b\x0c\x1c\x1f\x00\x7fé")), min_size=1, max_size=10)), max_size=6))
def test_batch_fingerprints_equal_fingerprint(pairs):
    """The batch (compiled whitespace check, shared encoding) against :func:`fingerprint`, text by text."""
    from mempp.ingest import Row, fingerprint_rows, fingerprint

    rows = [Row(i, None, text, author, None, None, None, None, None, (), 0) for i, (author, text) in enumerate(pairs)]
    fingerprint_rows(rows)
    assert [r.fingerprint for r in rows] == [fingerprint(a, t) for a, t in pairs]
    ascii_rows = [Row(i, None, t.encode("ascii", "ignore").decode() or "x", None, None, None, None, None, None, (), 0) for i, (_, t) in enumerate(pairs)]
    fingerprint_rows(ascii_rows)
    assert [r.fingerprint for r in ascii_rows] == [fingerprint(None, r.text) for r in ascii_rows]


def test_fingerprints_keep_the_values_stores_hold():
    """BLAKE2b-64 of author, NUL, whitespace-normalized text, little-endian: the values stores written
    so far hold in their "fingerprint" column (re-ingest detection compares against them), by the
    batch path (ASCII, with and without authors) and by the one-text path."""
    from mempp.ingest import fingerprint, fingerprints

    cases = [(None, "hello world"), ("Ann Lee", "hello  world\n"), ("", "x"), ("Zo\u00eb", "na\u00efve text"), (None, "b" * 300)]
    want = [9198284202598318076, 5813974395255729460, 2812061760185643760, 13041298401910755588, 6953671380257264431]
    assert [fingerprint(a, t) for a, t in cases] == want
    assert fingerprints([a for a, _ in cases], [t for _, t in cases]).tolist() == want
    ascii_cases = [c for c in cases if (c[0] or "").isascii() and c[1].isascii()]
    got = fingerprints([a for a, _ in ascii_cases], [t for _, t in ascii_cases]).tolist()
    assert got == [w for c, w in zip(cases, want) if c in ascii_cases]


_words = st.text(st.sampled_from(list("ab  \t\nxyz")), max_size=400)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["", "Ann Lee", "b" * 130]), st.text(max_size=4)), _words), max_size=8))
def test_batch_fingerprints_of_long_texts_equal_fingerprint(pairs):
    """Texts of several 128-byte blocks, authors or none (the compiled hash's prefixes)."""
    from mempp.ingest import fingerprint, fingerprints

    assert fingerprints([a for a, _ in pairs], [t for _, t in pairs]).tolist() == [fingerprint(a, t) for a, t in pairs]


def test_deferred_runs_on_the_callers_thread_when_the_pool_has_not_started_it():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from mempp.ingest import Deferred

    def where(tag):
        return tag, threading.current_thread().name

    gate = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aside") as pool:
        pool.submit(gate.wait)  # the pool is busy: the next task waits in its queue
        queued = Deferred(pool, where, "queued")
        assert queued.result() == ("queued", threading.current_thread().name)
        failing = Deferred(pool, lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failing.result()
        with pytest.raises(ZeroDivisionError):  # the same error again, not a second run
            failing.result()
        gate.set()
        started = Deferred(pool, where, "started")
        pool.submit(lambda: None).result()  # the pool has run it by now
        tag, name = started.result()
        assert tag == "started" and name.startswith("aside")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([0, 1, 7, 2**63, 2**64 - 1, 12345678901234567890]), max_size=8), max_size=5),
    st.lists(st.lists(st.sampled_from([0, 1, 3, 2**63]), max_size=2), max_size=6),
    st.lists(st.sampled_from([0, 1, 2, 3, 7, 2**63, 2**64 - 1, 12345678901234567890]), max_size=6),
)
def test_fingerprint_index_equals_a_dict_of_lists(batches, small, probes):
    """The writer's sorted fingerprint index, extended batch by batch (a large first batch,
    then small ones that stay in the newer run until it is an eighth of the main one),
    against the dict of lists it replaced: membership and each fingerprint's docs in ingest order."""
    from mempp.ingest import FingerprintIndex

    index, model, first = FingerprintIndex(), {}, 0
    big = [i % 50 for i in range(100)]
    for batch in [big] + batches + small:
        index.extend(np.array(batch, dtype=np.uint64), first)
        for i, fp in enumerate(batch):
            model.setdefault(fp, []).append(first + i)
        first += len(batch)
    assert index.contains(np.array(probes, dtype=np.uint64)).tolist() == [p in model for p in probes]
    for p in probes:
        assert index.docs_of(p).tolist() == model.get(p, [])
    assert sum(len(run) for run, _ in index.runs) == first


def test_a_big_batch_skips_an_empty_text_whatever_its_author(tmp_path):
    """A batch of 2,000 records or more fingerprints every record ahead of the check, in a
    thread: a record skipped for its whitespace-only text, with a lone surrogate for author,
    is skipped there as it is one record at a time, and the rest are added."""
    docs = [{"text": f"document {i}"} for i in range(2500)]
    docs[7] = {"text": " ", "author": "\ud800"}
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder(dim=8)) as store:
        ids = store.add(docs)
        assert ids[7] is None and sum(i is not None for i in ids) == 2499
        assert store.add(docs[7:8]) == [None]  # the one-record path agrees


# --- ids, nesting and what add takes, in the API and in files alike ---------------------------------
MISSING = object()
ID_VALUES = st.one_of(
    st.just(MISSING), st.none(), st.text(max_size=3), st.sampled_from(["", " ", "\t\n", "a b", "42"]), st.integers(),
    st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.lists(st.text(max_size=2), max_size=2),
)


def _docs_with_ids(ids) -> list[dict]:
    return [{"text": f"document {i}"} if k is MISSING else {"id": k, "text": f"document {i}"} for i, k in enumerate(ids)]


def _cli_add(store, path, *extra) -> tuple[int, str]:
    """``mempp add STORE PATH`` run in this process: (exit status, stderr)."""
    import contextlib
    import io

    from mempp.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(["add", str(store), str(path), "--embedder", "hash", "--quiet", *extra])
    return rc, err.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(ID_VALUES, min_size=1, max_size=4), via=st.sampled_from(["api", "jsonl"]))
@example(ids=[MISSING, None, "k"], via="jsonl")  # no id and a null id: documents without a key
@example(ids=["", "k"], via="api")
@example(ids=["k", 42], via="jsonl")  # an integer id is refused as an integer text is, not made "42"
def test_one_id_rule_for_the_api_and_files(tmp_path_factory, ids, via):
    """An id is absent, null or a string with something besides whitespace: the API and a JSON
    Lines file take the same ones, store them as given, and refuse the others naming field
    ``id`` and the record (the file's line); a refused file leaves no store directory behind."""
    docs = _docs_with_ids(ids)
    expected = first_invalid(docs)
    root = tmp_path_factory.mktemp("ids")
    store = root / "s"
    if via == "api":
        with mempp.Store.open(store, embedder=mempp.HashEmbedder()) as s:
            try:
                got = s.add(docs)
            except mempp.ValidationError as exc:
                assert (exc.field, exc.record) == expected
                assert len(s) == 0 and s.version == 0
                return
            keys = [s.get(d).key for d in got]
    else:
        path = root / "docs.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
        rc, err = _cli_add(store, path)
        if expected is not None:
            assert rc == 1 and f"{path}:{expected[1] + 1}: field 'id'" in err, err
            assert not store.exists()
            return
        assert rc == 0, err
        with mempp.Store.open(store, read_only=True) as s:
            keys = [s.get(d).key for d in range(len(s))]
    assert expected is None
    assert keys == [None if k is MISSING else k for k in ids]


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize(
    "column,row,message",
    [
        (["a", None, "b"], None, None),
        (["a", "", "b"], 2, "field 'id': an empty id"),
        (["a", "b", "   "], 3, "field 'id': an empty id"),
        ([1, 2, 3], 1, "field 'id': expected a string, got int"),
    ],
)
def test_one_id_rule_for_parquet_and_arrow_files(tmp_path, kind, column, row, message):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": column, "text": ["one", "two", "three"]})
    path = tmp_path / f"docs.{kind}"
    if kind == "parquet":
        pq.write_table(table, path)
    else:
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    rc, err = _cli_add(tmp_path / "s", path)
    if row is None:
        assert rc == 0, err
        with mempp.Store.open(tmp_path / "s", read_only=True) as s:
            assert [s.get(d).key for d in range(3)] == column
        return
    assert rc == 1 and f"{path}: row {row}: {message}" in err, err
    assert not (tmp_path / "s").exists()


def test_nesting_is_limited_and_refused_by_name(tmp_path):
    """Extra fields nest lists and objects at most 100 levels: that deep round trips; deeper
    is a ValidationError naming field 'meta' and the record, from the API and from a file
    (JSON too deep for Python's parser names its line), and nothing is written."""
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        deepest = json_nest(100)
        doc_id = s.add([{"id": "deep", "text": "deep meta", "extra": deepest, "obj": {"a": {"b": json_nest(98)}}}])[0]
        assert s.get(doc_id).meta["extra"] == deepest
        for too_deep in (json_nest(101), {"a": json_nest(100)}, json_nest(5000)):
            with pytest.raises(mempp.ValidationError) as info:
                s.add([{"text": "fine"}, {"id": "x", "text": "too deep", "extra": too_deep}])
            assert (info.value.field, info.value.record) == ("meta", 1) and "100 levels" in str(info.value)
        assert len(s) == 1 and s.version == 1
    for levels, message in [(150, "field 'meta': an extra field nests lists and objects more than 100 levels deep"),
                            (5000, "JSON nested too deeply to read")]:
        path = tmp_path / f"deep{levels}.jsonl"
        path.write_text('{"text": "fine"}\n{"id": "x", "text": "y", "extra": ' + "[" * levels + "]" * levels + "}\n")
        rc, err = _cli_add(tmp_path / f"new{levels}", path)
        assert rc == 1 and err == f"mempp: error: {path}:2: {message}" + (" (a document's fields may nest lists and objects at most 100 levels deep)\n" if levels == 5000 else "\n")
        assert not (tmp_path / f"new{levels}").exists()


@pytest.mark.parametrize("docs", [None, 42, 3.5, object()])
def test_add_of_something_not_iterable_names_the_argument(store, docs):
    with pytest.raises(mempp.ValidationError) as info:
        store.add(docs)
    assert info.value.field == "docs" and type(docs).__name__ in str(info.value)
    assert len(store) == 0 and store.version == 0


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.sampled_from(["list", "dict"]), min_size=1, max_size=3000), via=st.sampled_from(["api", "jsonl"]))
@example(shape=["list"] * 100, via="jsonl")
@example(shape=["dict"] * 101, via="api")
@example(shape=["list"] * 3000, via="jsonl")
def test_any_nesting_is_stored_or_refused_by_name(tmp_path_factory, shape, via):
    """An extra field of lists and objects nested ``len(shape)`` deep: stored when at most 100
    levels, else a ValidationError naming field 'meta' and the record (the API), or the file's
    line (JSON Lines; also when Python's parser cannot read that deep), never a RecursionError."""
    from mempp.ingest import prepare
    from mempp.inputs import read_records

    value: object = 0
    for kind in reversed(shape):
        value = [value] if kind == "list" else {"k": value}
    if via == "api":
        try:
            rows = prepare([{"text": "fine"}, {"text": "nested", "extra": value}], None, None)
        except mempp.ValidationError as exc:
            assert len(shape) > 100 and (exc.field, exc.record) == ("meta", 1)
            return
        assert len(shape) <= 100 and json.loads(rows[1].meta)["extra"] == value
        return
    path = tmp_path_factory.mktemp("nest") / "docs.jsonl"
    text = ""
    for kind in shape:
        text += "[" if kind == "list" else '{"k": '
    text += "0" + "".join("]" if kind == "list" else "}" for kind in reversed(shape))
    path.write_text('{"text": "fine"}\n{"text": "nested", "extra": ' + text + "}\n")
    try:
        for where, batch in read_records(path):
            try:
                prepare(batch, None, None)
            except mempp.ValidationError as exc:
                raise mempp.ValidationError(f"{where[exc.record]}: {exc}") from None
    except mempp.ValidationError as exc:
        assert len(shape) > 100 and str(exc).startswith(f"{path}:2: ")
        return
    assert len(shape) <= 100
