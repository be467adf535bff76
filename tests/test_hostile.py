"""T6 (input half), T8 and T9: bad input, hostile files, and queries that try to exhaust the store.

Each case ends in an exact round trip or a typed error (``ValidationError`` naming the
field and record, ``StoreError`` for the directory), with the store unchanged on error:
same version, same documents, nothing written. Nothing outside the store directory is ever
read or written, whatever names or symlinks it holds; no pickle anywhere.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mempp

from test_validation import first_invalid

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"id": "ok", "text": "the uptime SLA is 99.9%", "author": "Aisha Patel", "date": "2023-01-01"}


def open_store(path, **kw):
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), **kw)


def snapshot_of(path: Path) -> dict:
    """Every file of the store with its bytes' hash (to show a failed call wrote nothing)."""
    import hashlib

    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "LOCK"
    }


@pytest.fixture
def filled(tmp_path):
    s = open_store(tmp_path / "s", merge="manual")  # no background merge changes files while a test compares them
    s.add([GOOD, {"id": "b", "text": "budget approved by Ben", "author": "Ben Okafor", "date": "2023-02-01"}])
    yield s
    s.close()


def assert_unchanged(store, before_files, version, n):
    assert store.version == version and len(store) == n
    assert snapshot_of(store.path) == before_files
    with mempp.Store.open(store.path, read_only=True) as again:
        assert again.version == version and len(again) == n


# --- T6: documents --------------------------------------------------------------------------------
ROUND_TRIP = [
    "NUL \x00 inside",
    "\x00",
    "tabs\tand\r\nnewlines\u2028separators",
    "emoji \U0001F600 and CJK \u4e2d\u6587 and RTL \u05e9\u05dc\u05d5\u05dd",
    "combining e\u0301 vs \u00e9",
    "  leading and trailing whitespace  ",
    "x" * 3_000_000,  # a huge text is stored whole
    " ".join(f"w{i}" for i in range(50_000)),  # and one with many distinct terms
]


@pytest.mark.parametrize("text", ROUND_TRIP, ids=lambda t: repr(t[:20]))
def test_text_round_trips_exactly(tmp_path, text):
    with open_store(tmp_path / "s") as s:
        doc_id = s.add([{"id": "t", "text": text, "author": "A\x00B", "thread": "\U0001F600"}])[0]
    with mempp.Store.open(tmp_path / "s", read_only=True) as s:
        rec = s.get(doc_id)
        assert rec.text == text and rec.author == "A\x00B" and rec.thread == "\U0001F600"
        assert s.get("t").doc_id == doc_id


@pytest.mark.parametrize("text", ["", " ", "\n\t ", "\u3000\u00a0"])
def test_empty_and_whitespace_texts_are_skipped(filled, text):
    version, n = filled.version, len(filled)
    assert filled.add([{"text": text}]) == [None]
    assert filled.version == version and len(filled) == n  # nothing to commit


BAD = [
    ({"text": b"bytes, not text"}, "text"),
    ({"text": b"\xff\xfe invalid utf-8"}, "text"),
    ({"text": "lone \udc80 surrogate"}, "text"),
    ({"text": "x", "thread": "\ud83d"}, "thread"),
    ({"text": "x", "id": "key \udfff"}, "id"),
    ({"text": "x", "meta": {"k": "\ud800"}}, "meta"),
    ({"text": "x", "date": "0000-01-01"}, "date"),
    ({"text": "x", "date": "10000-01-01"}, "date"),
    ({"text": "x", "date": "-0001-01-01"}, "date"),
    ({"text": "x", "date": "9999-12-31T23:59:59-01:00"}, "date"),  # year 10000 in UTC
    ({"text": "x", "date": "2023-02-30"}, "date"),
    ({"text": "x", "date": ""}, "date"),
    ({"text": "x", "date": float("nan")}, "date"),
    ({"text": "x", "extra": float("inf")}, "meta"),
    ({"text": "x", "id": True}, "id"),
]


@pytest.mark.parametrize("bad,field", BAD, ids=lambda v: repr(v)[:40])
def test_bad_record_is_named_and_nothing_changes(filled, bad, field):
    before, version, n = snapshot_of(filled.path), filled.version, len(filled)
    with pytest.raises(mempp.ValidationError) as info:
        filled.add([{"id": "new1", "text": "fine"}, {"id": "new2", "text": "also fine"}, bad])
    assert info.value.field == field and info.value.record == 2
    assert f"record 2" in str(info.value) and repr(field) in str(info.value)
    assert_unchanged(filled, before, version, n)


@pytest.mark.parametrize(
    "emb,field,record",
    [
        (lambda d: np.full((2, d), np.nan), "embedding", 0),
        (lambda d: np.vstack([np.ones(d), np.r_[np.inf, np.zeros(d - 1)]]), "embedding", 1),
        (lambda d: np.vstack([np.ones(d), np.r_[-np.inf, np.zeros(d - 1)]]), "embedding", 1),
        (lambda d: np.ones((2, d + 1)), "embeddings", None),
        (lambda d: np.ones((3, d)), "embeddings", None),
        (lambda d: np.ones(d), "embeddings", None),
        (lambda d: [["a"] * d] * 2, "embeddings", None),
    ],
)
def test_bad_embeddings_are_refused_whole(filled, emb, field, record):
    before, version, n = snapshot_of(filled.path), filled.version, len(filled)
    with pytest.raises(mempp.ValidationError) as info:
        filled.add([{"text": "one"}, {"text": "two"}], embeddings=emb(filled.dim))
    assert info.value.field == field and info.value.record == record
    assert_unchanged(filled, before, version, n)


@pytest.mark.parametrize("vec", [lambda d: np.full(d, np.nan), lambda d: np.ones(d + 3), lambda d: np.r_[np.inf, np.ones(d - 1)]])
def test_bad_query_embedding(filled, vec):
    with pytest.raises(mempp.ValidationError, match="embedding"):
        filled.query("sla", embedding=vec(filled.dim))


def test_dates_one_policy(tmp_path):
    """Naive means UTC, offsets are converted, a bare date is the start of that day; exact instants round trip."""
    with open_store(tmp_path / "s") as s:
        ids = s.add([
            {"id": "naive", "text": "a", "date": datetime(2023, 5, 8, 10, 0)},
            {"id": "offset", "text": "b", "date": datetime(2023, 5, 8, 12, 0, tzinfo=timezone(timedelta(hours=2)))},
            {"id": "str", "text": "c", "date": "2023-05-08T05:00:00-05:00"},
            {"id": "micro", "text": "d", "date": "2023-05-08T10:00:00.000001Z"},
            {"id": "max", "text": "e", "date": "9999-12-31T23:59:59.999999Z"},
            {"id": "min", "text": "f", "date": "0001-01-01T00:00:00Z"},
        ])
        got = {s.get(i).key: s.get(i).date for i in ids}
    ten = datetime(2023, 5, 8, 10, tzinfo=timezone.utc)
    assert got["naive"] == got["offset"] == got["str"] == ten
    assert got["micro"] == ten + timedelta(microseconds=1)
    assert got["max"] == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    assert got["min"] == datetime(1, 1, 1, tzinfo=timezone.utc)


def test_duplicate_keys_within_and_across_batches(filled):
    """A repeated key is a new version (the earlier one superseded), never an overwrite."""
    a, b = filled.add([{"id": "dup", "text": "first", "date": "2023-03-01"}, {"id": "dup", "text": "second", "date": "2023-04-01"}])
    assert b == a + 1 and filled.get("dup").text == "second"
    c = filled.add([{"id": "dup", "text": "third", "date": "2023-05-01"}])[0]
    assert [r.text for r in filled.history("dup")] == ["first", "second", "third"]
    assert filled.get(a).valid_until is not None and filled.get(c).valid_until is None
    assert filled.add([{"id": "dup", "text": "third", "date": "2023-05-01"}]) == [c]  # replay: idempotent
    keys = {h.key for h in filled.query("first second third", as_of="2023-03-15", k=10)}
    assert "dup" in keys and {h.text for h in filled.query("x", as_of="2023-03-15", k=10) if h.key == "dup"} == {"first"}


DOC = st.fixed_dictionaries(
    {"text": st.one_of(st.text(max_size=40), st.text(max_size=40), st.binary(max_size=8)), "id": st.one_of(st.none(), st.text(max_size=4))},
    optional={
        "date": st.one_of(st.text(max_size=30), st.datetimes(timezones=st.one_of(st.none(), st.timezones())), st.dates()),
        "author": st.one_of(st.none(), st.text(max_size=8)),
        "extra": st.one_of(st.floats(), st.text(max_size=4), st.integers()),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(DOC, max_size=4))
@example(docs=[{"text": "fine", "id": None, "date": "2023-01-01", "author": "Ann", "extra": 1.5}])
@example(docs=[{"text": "fine", "id": "k"}, {"text": "x", "id": None, "extra": math.inf}])
def test_generated_batches_round_trip_or_change_nothing(tmp_path_factory, docs):
    """Each example on a fresh store (two documents stored): a batch the input rules
    (``test_validation.first_invalid``) accept is stored exactly; any other is refused naming
    the record and field those rules name, and nothing is written."""
    with open_store(tmp_path_factory.mktemp("h") / "s") as filled:
        filled.add([GOOD, {"id": "b", "text": "budget approved by Ben", "author": "Ben Okafor", "date": "2023-02-01"}])
        check_batch_round_trips_or_changes_nothing(filled, docs)


def check_batch_round_trips_or_changes_nothing(filled, docs):
    before, version, n = snapshot_of(filled.path), filled.version, len(filled)
    expected = first_invalid(docs)
    try:
        ids = filled.add(docs)
    except mempp.ValidationError as exc:
        assert (exc.field, exc.record) == expected, (exc, expected)
        assert_unchanged(filled, before, version, n)
        return
    assert expected is None, f"accepted a batch the rules reject at {expected}"
    for i, (doc, doc_id) in enumerate(zip(docs, ids)):
        if doc_id is None:
            assert not doc["text"].strip()
            continue
        rec = filled.get(doc_id)
        assert " ".join(rec.text.split()) == " ".join(doc["text"].split())
        if doc_id >= n and ids.index(doc_id) == i:  # stored by this call (not a re-ingest): exactly as given
            assert rec.text == doc["text"] and rec.key == doc.get("id")
        if "date" in doc and doc_id >= n and ids.index(doc_id) == i:
            when = doc["date"]
            if isinstance(when, datetime) and when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            if isinstance(when, datetime):
                assert rec.date == when


# --- T9: queries ------------------------------------------------------------------------------------
def test_k_and_depth_extremes(filled):
    n = len(filled)
    assert len(filled.query("sla", k=10**9)) == n  # clamped to the candidates
    assert len(filled.query("sla", k=10**9, depth=10**9, as_of="2023-01-15")) == 1
    assert list(filled.query("sla", k=0)) == []
    for bad in (-1, -(10**9), 1.5, "3", True, None):
        with pytest.raises(mempp.ValidationError) as info:
            filled.query("sla", k=bad)
        assert info.value.field == "k"
    with pytest.raises(mempp.ValidationError) as info:
        filled.query("sla", depth=0)
    assert info.value.field == "depth"
    table = filled.query_batch(["sla", "budget"], k=10**9)
    assert table.num_rows == 2 * n


def test_filters_that_match_nothing(filled):
    assert list(filled.query("sla", authors=["Nobody"])) == []
    assert list(filled.query("sla", authors=[])) == []
    assert list(filled.query("sla", threads="none", channels=["x"])) == []
    assert list(filled.query("sla", as_of="1900-01-01")) == []
    assert list(filled.query("sla", date_from="2030-01-01")) == []
    assert list(filled.query("sla", date_from="2023-02-01", date_to="2023-01-01")) == []
    # no words and no vector (a blank question is not embedded): nothing to rank by, no error
    assert list(filled.query("", k=5)) == [] and list(filled.query(" \n\t", k=5)) == []
    # a NUL is not blank: it is embedded, and the vector leg ranks every candidate
    assert {h.key for h in filled.query(" \x00 ", k=5)} == {"ok", "b"}
    with pytest.raises(mempp.ValidationError) as info:
        filled.query("sla", as_of="0000-00-00")
    assert info.value.field == "as_of"


def test_huge_queries_are_refused_or_answered(filled):
    with pytest.raises(mempp.ValidationError) as info:
        filled.query("sla " * 25_000_000)  # 100 MB
    assert info.value.field == "text"
    many = " ".join(f"t{i}" for i in range(100_000))  # 100k distinct terms, under the limit
    hits = filled.query(many + " sla", k=3)
    # both documents are candidates (the vector leg ranks them); with k <= 3 every slot is a
    # reserve slot, which only the strong lexical match may take ("relevant" rule); the fused
    # order fills the rest
    assert [(h.key, h.reserved) for h in hits] == [("ok", True), ("b", False)]
    assert [h.key for h in filled.query(many + " sla", k=3, legs=["lexical"])] == ["ok"]
    with pytest.raises(mempp.ValidationError):
        filled.query(b"bytes")
    with pytest.raises(mempp.ValidationError) as info:
        filled.query_batch(["sla", "x" * 2_000_000])
    assert info.value.field == "text" and info.value.record == 1


@pytest.mark.slow
def test_query_memory_does_not_grow(tmp_path):
    """In a child process: repeated huge-k, 100k-term and refused 100 MB queries leave the RSS flat."""
    code = r"""
import resource, sys, mempp
s = mempp.Store.open(sys.argv[1], embedder=mempp.HashEmbedder())
s.add([{"text": f"doc {i} sla uptime budget", "author": "A", "date": "2023-01-01"} for i in range(200)])
many = " ".join(f"t{i}" for i in range(100_000))
big = "sla " * 25_000_000
def round_():
    s.query("sla", k=10**9, depth=10**9)
    s.query(many, k=10)
    try:
        s.query(big)
    except mempp.ValidationError:
        pass
for _ in range(3):
    round_()
warm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(15):
    round_()
print(warm, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    warm, after = map(int, out.stdout.split())
    print(f"\nT9 memory: max RSS {warm // 1024} MiB after 3 rounds, {after // 1024} MiB after 15 more")
    assert after - warm < 64 * 1024, (warm, after)  # KiB: no growth beyond noise across 15 more rounds


# --- T8: hostile directories and files --------------------------------------------------------------
def test_store_path_with_nul_or_wrong_type(tmp_path):
    for bad in (str(tmp_path / "a\x00b"), b"/tmp/x", 42):
        with pytest.raises(mempp.StoreError):
            mempp.Store.open(bad)


def test_dotdot_in_the_store_path_is_just_a_path(tmp_path):
    (tmp_path / "a").mkdir()
    with open_store(tmp_path / "a" / ".." / "s") as s:
        s.add([GOOD])
    assert (tmp_path / "s" / "CURRENT").is_file() and not (tmp_path / "a" / "CURRENT").exists()


@pytest.fixture
def victim(tmp_path):
    """A file outside the store that a hostile store tries to make us read or overwrite."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("do not touch")
    return outside


def _outside_untouched(victim):
    assert sorted(p.name for p in victim.iterdir()) == ["secret"]
    assert (victim / "secret").read_text() == "do not touch"


def _refused_for_read_and_write(path):
    with pytest.raises(mempp.StoreError):
        mempp.Store.open(path, read_only=True)
    with pytest.raises(mempp.StoreError):
        s = open_store(path)
        s.add([{"text": "write attempt"}])


@pytest.mark.parametrize("where", ["segments", "manifests"])
def test_symlinked_folder_is_refused(filled, victim, where):
    path = filled.path
    filled.close()
    real = path / where
    moved = path.parent / f"{where}-real"
    real.rename(moved)
    for p in moved.iterdir():
        (victim / p.name).write_bytes(p.read_bytes())
    (path / where).symlink_to(victim)
    before = sorted(p.name for p in victim.iterdir())
    _refused_for_read_and_write(path)
    assert sorted(p.name for p in victim.iterdir()) == before


@pytest.mark.parametrize("where", ["segments", "manifests"])
def test_symlink_planted_in_a_folder_is_refused(filled, victim, where):
    path = filled.path
    filled.close()
    (path / where / "00000099.docs.arrow").symlink_to(victim / "secret")
    _refused_for_read_and_write(path)
    _outside_untouched(victim)


def test_symlink_replacing_a_published_file_is_refused(filled, victim):
    path = filled.path
    filled.close()
    seg = next((path / "segments").glob("*.docs.arrow"))
    (victim / "copy.arrow").write_bytes(seg.read_bytes())
    seg.unlink()
    seg.symlink_to(victim / "copy.arrow")
    _refused_for_read_and_write(path)
    assert sorted(p.name for p in victim.iterdir()) == ["copy.arrow", "secret"]


@pytest.mark.parametrize("name", ["CURRENT", "LOCK"])
def test_symlinked_pointer_or_lock_is_refused(filled, victim, name):
    path = filled.path
    filled.close()
    target = victim / "secret"
    if name == "CURRENT":
        (victim / "cur").write_bytes((path / "CURRENT").read_bytes())
        target = victim / "cur"
    (path / name).unlink(missing_ok=True)
    (path / name).symlink_to(target)
    _refused_for_read_and_write(path)
    assert (victim / "secret").read_text() == "do not touch"


def test_manifest_naming_files_outside_is_refused(filled, victim):
    import xxhash

    path = filled.path
    version = filled.version
    filled.close()
    name = f"manifests/{version:08d}.json"
    manifest = json.loads((path / name).read_text())
    assert manifest["kind"] == "checkpoint"  # the first version of a store is one
    docs = manifest["units"][0]["files"]["docs"]
    (victim / "seg.arrow").write_bytes((path / docs["name"]).read_bytes())  # same size and hash, outside
    docs["name"] = "../outside/seg.arrow"
    evil = json.dumps(manifest).encode()
    (path / name).write_bytes(evil)
    (path / "CURRENT").write_text(json.dumps({"version": version, "manifest": name, "xxh3": xxhash.xxh3_64(evil).hexdigest()}))
    _refused_for_read_and_write(path)
    (path / "CURRENT").write_text(json.dumps({"version": version, "manifest": "../outside/secret", "xxh3": "0" * 16}))
    _refused_for_read_and_write(path)
    (path / "CURRENT").write_text(json.dumps({"version": version, "manifest": "/etc/passwd", "xxh3": "0" * 16}))
    _refused_for_read_and_write(path)
    assert sorted(p.name for p in victim.iterdir()) == ["secret", "seg.arrow"]


def test_no_pickle_and_no_unsafe_loaders():
    """No pickle, no ``np.load`` unless ``allow_pickle=False``, no ``eval``/``exec`` in the package."""
    pattern = re.compile(r"\bpickle\b|allow_pickle=True|\beval\(|\bexec\(|marshal|shelve|__reduce__|torch\.load")
    np_load = re.compile(r"\b(np|numpy)\.load\(")
    found = []
    for folder in ("engine", "storage", "kernels", "bench"):
        for p in (ROOT / folder).rglob("*.py"):
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if pattern.search(line) or (np_load.search(line) and "allow_pickle=False" not in line):
                    found.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", ["extra-link", "ann/planted"])
def test_any_symlink_in_the_store_is_refused(filled, victim, name):
    """Also in folders a later format adds: the store never follows a link it holds."""
    path = filled.path
    filled.close()
    (path / name).parent.mkdir(exist_ok=True)
    (path / name).symlink_to(victim)
    _refused_for_read_and_write(path)
    _outside_untouched(victim)
