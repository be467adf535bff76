"""Every store format the code claims to open, as written by the code of its time (tests/data).

Each store under tests/data was written by the commit its ``make_*.py`` names, run as that
commit's code (``tests/data/oldstore.py``: the documents, the commits and the questions),
with the answers that code gave. Today's code must open each one read-only, verify it with the
checksums it carries, answer every question as the old code did (hit for hit, same fused
scores and reserve flags), find damage, and append to a copy in its own format.

| store | written by | what is old about it |
|---|---|---|
| ``unstemmed`` | b49644a | no ``stem`` in the manifest's analyzer (unstemmed), no index config (no int8 copy), sha256 only |
| ``mix64_row_order`` | f9ac388 | sha256 + mix64 checksums, the int8 copy in row order (no order column) |
| ``mix64`` | 939f3a6 | sha256 + mix64 checksums, the int8 copy in date order |
| ``wide64`` | 25fa624 | sha256 + wide64, the int8 copy in date order, an HNSW index: the format of main at 25fa624 |
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import mempp
from mempp.storage import Analyzer, CorruptStoreError, StoreError

DATA = Path(__file__).parent / "data"
STORES = ["unstemmed", "mix64_row_order", "mix64", "wide64"]
CHECKSUM = {"unstemmed": None, "mix64_row_order": "mix64", "mix64": "mix64", "wide64": "wide64"}
INT8 = {"unstemmed": "none", "mix64_row_order": "row order", "mix64": "date order", "wide64": "date order"}


def expected(name: str) -> dict:
    return json.loads((DATA / f"{name}.expected.json").read_text())


def manifest(path: Path) -> dict:
    current = json.loads((path / "CURRENT").read_text())
    return json.loads((path / current["manifest"]).read_text())


def answers(s: mempp.Store, want: dict) -> list:
    out = []
    for question, as_of, c, _ in want["answers"]:
        # with the ranking settings of the code that wrote it (before the chain and thread stages,
        # the relevant-only reserve rule, feedback, the fused tag order and the name-free vector): these tests are about
        # reading the old formats, not ranking
        kwargs = dict(want["configs"][c], siblings=0, reserve_rule="paper", feedback=0, tag_rank="lexical", chain=0, name_free=False)
        hits = s.query(question, as_of=as_of, embedding=want["embeddings"][question], **kwargs)
        out.append([question, as_of, c, [[h.key, round(h.score, 9), bool(h.reserved)] for h in hits]])
    return out


@pytest.mark.parametrize("name", STORES)
def test_old_store_opens_and_answers_as_when_it_was_written(name):
    want = expected(name)
    with mempp.Store.open(DATA / name, embedder=mempp.HashEmbedder(16), read_only=True) as s:
        for a in s.searcher().snapshot.ann:
            assert a.wait(60) and a.failed is None, a.failed
        assert s.version == want["facts"]["version"] and len(s) == want["facts"]["documents"]
        layouts = {"none" if e.q8 is None else "row order" if e.q8_order is None else "date order" for e in s.searcher().snapshot.segments}
        assert layouts == {INT8[name]}
        for e in s.searcher().snapshot.segments:  # each int8 row is the embedding of the document it is read as
            if e.q8 is not None:
                rows = np.arange(e.segment.n) if e.q8_order is None else e.q8_order
                approx = np.asarray(e.q8, dtype=np.float32) * np.asarray(e.q8_scale)[:, None]
                np.testing.assert_allclose(approx, np.asarray(e.segment.embeddings)[rows], atol=0.01)
        assert len(s.searcher().snapshot.ann) == (name == "wide64")
        assert {k: s.get(k).text for k in want["facts"]["texts"]} == want["facts"]["texts"]
        got = answers(s, want)
        for g, w in zip(got, want["answers"]):
            assert g == w, (g[:3], want["configs"][g[2]])
        assert len(got) == len(want["answers"]) > 50
        # the history the old code wrote reads back: a new version and a supersession-only commit
        assert [r.key for r in s.history("budget")] == ["budget", "budget"]
        assert s.get("lunch").valid_until is not None and s.get("sla-1").valid_until is not None
        assert [v["supersessions"] for v in s.versions()][:3] == [False, True, True]


@pytest.mark.parametrize("name", STORES)
def test_old_store_files_are_verified_with_the_checksum_they_carry(name, tmp_path):
    refs = [f for c in manifest(DATA / name)["commits"] for f in c["files"].values()]
    kind = CHECKSUM[name]
    for ref in refs:
        assert ("mix64" in ref) == (kind == "mix64") and ("wide64" in ref) == (kind == "wide64"), ref
    copy = tmp_path / name
    shutil.copytree(DATA / name, copy)
    docs = next(copy.glob("segments/00000001.docs.arrow"))
    data = bytearray(docs.read_bytes())
    data[len(data) // 2] ^= 0x04
    docs.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="00000001.docs.arrow"):
        mempp.Store.open(copy, embedder=mempp.HashEmbedder(16), read_only=True)


@pytest.mark.parametrize("name", STORES)
def test_a_writer_appends_to_an_old_store(name, tmp_path):
    copy = tmp_path / name
    shutil.copytree(DATA / name, copy)
    want = expected(name)
    with mempp.Store.open(copy, embedder=mempp.HashEmbedder(16)) as s:
        v = s.version
        s.add([{"id": "new", "text": "Dee is painting the fence.", "author": "Dee", "date": "2023-09-01", "thread": "conv-1"}])
        s.supersede("sla-2", "new", effective="2023-09-01")
        assert s.version == v + 2 and len(s) == 10
    with mempp.Store.open(copy, embedder=mempp.HashEmbedder(16), read_only=True) as s:
        assert s.get("new").author == "Dee" and s.get("sla-2").valid_until is not None
        # answers as of a date before the appended commits are those the old code gave
        old = [a for a in want["answers"] if a[1] == "2023-03-01"]
        assert answers(s, {**want, "answers": old}) == old
        analyzer = s.stats()["analyzer"]
    assert analyzer == manifest(DATA / name)["analyzer"] | ({"stem": False} if name == "unstemmed" else {})


def test_the_unstemmed_store_stays_unstemmed(tmp_path):
    """Opened without an analyzer, the store's own (recorded as no "stem") is used: the new
    document is indexed unstemmed too, so "painting" finds only the documents with that word."""
    assert "stem" not in manifest(DATA / "unstemmed")["analyzer"]
    copy = tmp_path / "unstemmed"
    shutil.copytree(DATA / "unstemmed", copy)
    with mempp.Store.open(copy, embedder=mempp.HashEmbedder(16)) as s:
        assert s.stats()["analyzer"]["stem"] is False
        s.add([{"id": "fence", "text": "Dee painted the fence.", "author": "Dee", "date": "2023-09-01"}])
        lexical = {"weights": (1, 0, 0), "reserve": False, "context": (), "siblings": 0}
        assert [h.key for h in s.query("painting", **lexical)] == ["paint-2"]
        assert sorted(h.key for h in s.query("painted", **lexical)) == ["fence", "paint"]
        assert [h.key for h in s.query("paint", **lexical)] == []
        with pytest.raises(StoreError, match="analyzer"):
            mempp.Store.open(copy, analyzer=Analyzer(), read_only=True)
    with mempp.Store.open(copy, analyzer=Analyzer(stem=False), read_only=True) as s:
        assert len(s) == 10


def test_analyzer_is_fixed_when_a_store_is_created(tmp_path):
    """``Store.open(analyzer=...)`` on creation is kept in the manifest and used; reopening with
    another is an error naming both, with none or the same it opens."""
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(16), analyzer=Analyzer(stem=False)) as s:
        s.add([{"id": "a", "text": "Melanie painted a sunset.", "date": "2023-01-01"}])
        assert s.stats()["analyzer"]["stem"] is False
    with pytest.raises(StoreError, match="indexed with analyzer") as info:
        mempp.Store.open(path, analyzer=Analyzer())
    assert "'stem': False" in str(info.value) and "'stem': True" in str(info.value)
    with pytest.raises(StoreError, match="indexed with analyzer"):
        mempp.Store.open(path, analyzer=Analyzer(stem=False, stopwords=False))
    for kw in ({}, {"analyzer": Analyzer(stem=False)}):
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(16), **kw) as s:
            assert s.stats()["analyzer"]["stem"] is False
            assert [h.key for h in s.query("painted", weights=(1, 0, 0), reserve=False)] == ["a"]
            assert list(s.query("painting", weights=(1, 0, 0), reserve=False)) == []
    # the default analyzer stems: a store created without one matches "painting" to "painted"
    with mempp.Store.open(tmp_path / "t", embedder=mempp.HashEmbedder(16)) as s:
        s.add([{"id": "a", "text": "Melanie painted a sunset.", "date": "2023-01-01"}])
        assert [h.key for h in s.query("painting", weights=(1, 0, 0), reserve=False)] == ["a"]
        assert s.stats()["analyzer"]["stem"] is True
