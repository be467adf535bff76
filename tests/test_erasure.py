"""Erasure: the document's text, vector, terms and every derived copy leave every file of the store
(docs/DESIGN.md §8.5).

The oracle is the store directory itself: after ``erase`` every byte of every file is scanned for
the erased text, its author, the terms only it held (as the analyzer stores them), its embedding's
float32 bytes and its window vectors'. Every version ever committed is opened and asked for it.
Crashes (SIGKILL at each step, an I/O error at each file operation) leave the old or the new
state, and the next writer leaves no copy behind. Power loss at every operation of an erasure is
in tests/test_powerloss.py (the every-kind run).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mempp
from mempp.storage import fsutil
from mempp.storage.fsutil import COMMIT_STEPS

from crashkit import stray_files

INDEX = mempp.IndexConfig(window_stride=50)
SECRET = {
    "id": "hr-7",
    "text": "Quillonbury severance terms for Marisol Vantreight: " + " ".join(f"clause{i} zephyrquota" for i in range(300)),
    "author": "Ottoline Grebb", "date": "2024-02-01", "thread": "hr-cases", "channel": "hr",
}
SECRET_V2 = {"id": "hr-7", "text": "Quillonbury severance revised: Marisol Vantreight accepts.", "author": "Ottoline Grebb", "date": "2024-03-01"}
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def filler(n: int, start: int = 0) -> list[dict]:
    return [
        {"id": f"f{i}", "text": " ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(8)) + f" item{i}",
         "author": ["Ann Lee", "Bo Chen"][i % 2], "date": f"2024-01-{1 + i % 28:02d}", "thread": "hr-cases" if i % 10 == 0 else None,
         "channel": "ops" if i % 3 else "hr"}
        for i in range(start, start + n)
    ]


def open_store(path: Path, **kw) -> mempp.Store:
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), index=INDEX, **kw)


def build(path: Path) -> dict:
    """A store where the secret is everywhere a document can be: a merged unit with postings and
    an int8 copy, window vectors, an ANN index, a thread, a supersession (a second version, in a
    small unit of its own), restricted readers; returns what the scan looks for."""
    with open_store(path, merge="manual") as s:
        s.add(filler(120))
        s.add([dict(SECRET, readers=["group:hr"])])
        s.add(filler(80, 120))
        s.merge(force=True)
        s.build_ann(min_docs=10)
        s.add([SECRET_V2])
        s.add(filler(5, 200))
        s.add_members("group:hr", ["user:ben"])
        snap = s.searcher().snapshot
        docs = s.searcher().doc_ids("hr-7")
        vectors = []
        for d in docs:
            entry, row = snap.locate(d)
            vectors.append(np.array(entry.segment.embeddings[row], dtype=np.float32))
            if entry.window_rows is not None:
                vectors += [np.array(v, dtype=np.float32) for v in entry.window_embeddings[entry.window_rows == row]]
        tokens = set(s.searcher().analyzer.terms(SECRET["text"] + " " + SECRET_V2["text"]))
        others = set()
        for r in s.documents(principal=mempp.ADMIN):
            if r.key != "hr-7":
                others |= set(s.searcher().analyzer.terms(r.text))
        assert any(e.window_rows is not None and len(e.window_rows) for e in snap.segments), "the secret has window vectors"
        assert snap.ann, "an ANN index covers the secret"
    rare = sorted(t for t in tokens - others if len(t) >= 6 and not t.startswith("claus"))  # shorter ones occur by chance ("term" in a manifest)
    assert {"quillonburi", "zephyrquota"} <= set(rare) or {"quillonbury", "zephyrquota"} <= set(rare), rare
    return {"docs": docs, "vectors": vectors, "rare": rare}


def scan(path: Path, what: dict) -> list[str]:
    """Every file of the store directory holding any byte pattern of the erased document."""
    needles = [SECRET["text"][:40].encode(), b"Marisol", b"Vantreight", b"Ottoline Grebb", b"Quillonbury"]
    needles += [t.encode() for t in what["rare"]]
    needles += [v.tobytes() for v in what["vectors"]]
    found = []
    for f in sorted(path.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            found += [f"{f.relative_to(path)}: {n[:24]!r}" for n in needles if n in data]
    return found


def test_erase_leaves_no_byte_of_the_document_in_any_file(tmp_path):
    path = tmp_path / "s"
    what = build(path)
    assert scan(path, what), "the scan finds the document before it is erased"
    with open_store(path) as s:
        versions = [v["version"] for v in s.versions()]
        out = s.erase("hr-7", reason="GDPR art. 17 request 2024-118")
        assert out["erased"] == what["docs"] and out["files_removed"]
    assert scan(path, what) == []
    with open_store(path, read_only=True) as s:
        assert s.verify()["clean"]
        rec = s.erasures()
        assert [(r["doc_id"], r["key"], r["reason"]) for r in rec] == [(d, "hr-7", "GDPR art. 17 request 2024-118") for d in what["docs"]]
        for d in what["docs"]:
            with pytest.raises(mempp.DocumentNotFound, match="erased"):
                s.get(d, principal=mempp.ADMIN)
        with pytest.raises(mempp.DocumentNotFound):
            s.get("hr-7", principal=mempp.ADMIN)
        with pytest.raises(mempp.DocumentNotFound):
            s.history("hr-7", principal="user:ben")
        assert "Ottoline Grebb" not in s.authors(principal=mempp.ADMIN)
        assert all(r.key != "hr-7" for r in s.documents(principal=mempp.ADMIN))
        assert s.stats(principal=mempp.ADMIN)["erased"] == len(what["docs"])
    for v in versions + [versions[-1] + 1]:  # every version ever committed reads the blank rows
        with open_store(path, read_only=True, version=v) as old:
            for who in (mempp.ADMIN, "user:ben"):
                hits = old.query("Quillonbury severance Marisol Vantreight", k=50, principal=who)
                assert not set(h.doc_id for h in hits) & set(what["docs"]), v
                hits = old.query("Ottoline Grebb", k=50, principal=who, as_of="2024-02-15")
                assert not set(h.doc_id for h in hits) & set(what["docs"]), v
                assert all(r.key != "hr-7" for r in old.documents(principal=who))


def test_a_searcher_pinned_before_the_erasure_no_longer_returns_it(tmp_path):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:  # no window vectors: the export carries it all
        s.add(filler(30) + [SECRET])
        pinned = s.searcher()
        assert pinned.query("Quillonbury severance", k=3)[0].key == "hr-7"
        s.erase("hr-7", reason="retention")
        assert all(h.key != "hr-7" for h in pinned.query("Quillonbury severance", k=31))
        assert all(h.key != "hr-7" for h in pinned.query("Quillonbury severance", k=31, principal=mempp.ADMIN))
        with pytest.raises(mempp.DocumentNotFound):
            pinned.get("hr-7")
        table = s.export()
        assert "hr-7" not in table.column("id").to_pylist() and len(table) == 30
        assert s.stats()["documents"] == 30 and s.stats()["erased"] == 1


def test_erase_one_version_by_doc_id_keeps_the_others_and_their_supersession(tmp_path):
    with open_store(tmp_path / "s") as s:
        s.add(filler(10) + [SECRET])
        s.add([SECRET_V2])
        first, second = s.searcher().doc_ids("hr-7")
        s.erase(second, reason="entered by mistake")
        assert s.searcher().doc_ids("hr-7") == [first]
        rec = s.get("hr-7")
        assert rec.doc_id == first and rec.valid_until is not None  # still replaced from 2024-03-01
        assert rec.superseded_by.doc_id is None  # by an erased document: unnamed
        s.add([dict(SECRET_V2, text="A third version, after the erasure.")])
        assert len(s.searcher().doc_ids("hr-7")) == 2


def test_erase_before_a_date_within_a_channel(tmp_path):
    with open_store(tmp_path / "s") as s:
        s.add(filler(60))
        keep = {r.doc_id for r in s.documents() if not (r.channel == "hr" and r.date.day < 10)}
        out = s.erase_before("2024-01-10", channel="hr", reason="retention: hr, 1 year")
        assert out["erased"] and {r.doc_id for r in s.documents()} == keep
        assert s.erase_before("2024-01-10", channel="hr", reason="again")["erased"] == []  # nothing left to erase
        assert s.erase_before("2024-01-10", channel="nowhere", reason="none")["erased"] == []


@pytest.mark.parametrize("call,field", [
    (lambda s: s.erase("f1", reason=""), "reason"),
    (lambda s: s.erase("f1", reason=None), "reason"),
    (lambda s: s.erase_before("not a date", reason="r"), "before"),
    (lambda s: s.erase_before("2024-01-10", reason="r", channel=3), "channel"),
])
def test_bad_arguments_name_the_field_and_change_nothing(tmp_path, call, field):
    with open_store(tmp_path / "s") as s:
        s.add(filler(5))
        v = s.version
        with pytest.raises(mempp.ValidationError) as info:
            call(s)
        assert info.value.field == field and s.version == v
        with pytest.raises(mempp.DocumentNotFound):
            s.erase("nope", reason="r")
        assert s.version == v and len(s.documents()) == 5


def test_merges_in_the_background_never_bring_it_back(tmp_path):
    path = tmp_path / "s"
    with open_store(path, merge="background") as s:
        for i in range(24):
            s.add(filler(9, i * 9))
            if i == 12:
                s.add([SECRET])
        s.erase("hr-7", reason="r")
        for i in range(24, 40):
            s.add(filler(9, i * 9))
        s.wait_merges()
        assert all(h.key != "hr-7" for h in s.query("Quillonbury severance", k=20))
    assert scan(path, {"rare": ["zephyrquota"], "vectors": []}) == []


CHILD = textwrap.dedent(
    """
    import os, sys
    import mempp
    from test_erasure import open_store
    with open_store(sys.argv[1], merge="manual") as s:
        s.query("warm up", k=3, principal=mempp.ADMIN)
        os.environ["MEMPP_FAILPOINT"] = sys.argv[2]
        s.erase("hr-7", reason="r")
    print("done", flush=True)
    """
)
ERASE_STEPS = ("before_commit", "after_docs_fsync", "after_post_fsync", "after_terms_fsync", "after_win_fsync", "after_q8_fsync",
               "after_dict_fsync", "after_ann_fsync", "after_access_fsync") + COMMIT_STEPS[COMMIT_STEPS.index("after_manifest_fsync"):]


@pytest.mark.slow
@pytest.mark.parametrize("step", ERASE_STEPS)
def test_kill_at_each_step_of_an_erasure(tmp_path, step):
    """SIGKILL at each step: the old store (the document whole) or the new one (erased); the next
    writer removes what the killed one left, and erasing again (where it did not land) leaves no byte."""
    path = tmp_path / "s"
    what = build(path)
    with open_store(path, read_only=True) as s:
        version = s.version
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), f"{step}:kill"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, (step, proc.stdout, proc.stderr[-2000:])
    published = step in ("after_current_rename", "after_store_dir_fsync")
    with open_store(path, read_only=True) as s:
        assert s.version == version + published
        assert s.verify()["clean"]
        if published:
            with pytest.raises(mempp.DocumentNotFound):
                s.get("hr-7", principal=mempp.ADMIN)
        else:
            assert s.get("hr-7", principal=mempp.ADMIN).text == SECRET_V2["text"]
            assert s.get(what["docs"][0], principal=mempp.ADMIN).text == SECRET["text"]
    with open_store(path, merge="manual") as s:
        if not published:
            s.erase("hr-7", reason="r")
        s.add(filler(3, 500))
    assert stray_files(path) == []
    assert scan(path, what) == []


@pytest.mark.slow
def test_an_io_error_at_each_operation_of_an_erasure(tmp_path):
    """EIO at the Nth file operation of an erasure, for every N: a typed error, the old or the new
    state, and once reopened the erasure completes and leaves no byte."""
    from test_faults import FailNth

    base = tmp_path / "base"
    what = build(base)
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    counter = FailNth(-1, errno.EIO)
    with open_store(probe, merge="manual") as s:
        s.writer.begin_write()
        old = fsutil.set_io_hook(counter)
        try:
            s.erase("hr-7", reason="r")
        finally:
            fsutil.set_io_hook(old)
    total = counter.count
    assert total >= 12
    seen = set()
    for n in range(total):
        path = tmp_path / f"s{n}"
        shutil.copytree(base, path)
        s = open_store(path, merge="manual")
        s.writer.begin_write()
        v = s.version
        hook = FailNth(n, errno.EIO)
        old = fsutil.set_io_hook(hook)
        try:
            with pytest.raises(mempp.StoreWriteError):
                s.erase("hr-7", reason="r")
        finally:
            fsutil.set_io_hook(old)
        seen.add(hook.failed)
        s.close()
        with open_store(path, read_only=True) as r:
            done = r.version == v + 1
            assert r.version in (v, v + 1) and r.verify()["clean"], n
            assert (r.erasures() != []) == done
        with open_store(path, merge="manual") as s2:
            if not done:
                s2.erase("hr-7", reason="r")
            s2.add(filler(2, 900))
        assert stray_files(path) == [], n
        assert scan(path, what) == [], n
    assert {"create", "write", "fsync", "rename"} <= seen


def test_the_command_line_erases_lists_and_refuses_without_a_reason(tmp_path, capsys):
    from mempp.cli import main

    path = tmp_path / "s"
    with open_store(path) as s:
        s.add(filler(20) + [SECRET])
    assert main(["erase", str(path), "hr-7"]) != 0
    assert "reason" in capsys.readouterr().err
    assert main(["erase", str(path), "hr-7", "--reason", "GDPR request 7"]) == 0
    assert "erased 1 document" in capsys.readouterr().out
    assert main(["erase", str(path), "--before", "2024-01-05", "--channel", "hr", "--reason", "retention", "--json"]) == 0
    assert main(["erase", str(path), "--list"]) == 0
    listed = capsys.readouterr().out
    assert "hr-7" in listed and "GDPR request 7" in listed and "retention" in listed
    assert main(["erase", str(path), "nope", "--reason", "r"]) != 0
    assert "no document with id 'nope'" in capsys.readouterr().err
