"""Losses that must never lose or hide committed documents: a lost CURRENT, a CURRENT replaced by an
older copy, an interrupted write's files, derived files gone; and the verify and repair commands.

Each test states the user's reproduction and checks the outcome against what was committed (the
oracle: the documents each acknowledged ``add`` stored). The damage matrix (test_damage.py) runs
every command over every file; these are the cases a user meets first, spelled out.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import warnings
from pathlib import Path

import pytest

import mempp
from mempp import cli

DOCS = [
    {"id": "a", "text": "Invoice 1043 approved by finance.", "author": "Ann Lee", "date": "2023-01-05"},
    {"id": "b", "text": "Travel per-diem raised to 60 euros.", "author": "Bo Chen", "date": "2023-02-01"},
]
ONE = [{"id": "c", "text": "Quarterly review moved to Friday.", "author": "Cy Diaz", "date": "2023-03-01"}]


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _jsonl(path: Path, docs: list[dict]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return str(path)


def _keys(path: Path) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mempp.Store.open(path, read_only=True) as s:
            return sorted(s.get(i).key for i in range(len(s)))


def test_a_lost_current_never_empties_the_store(tmp_path):
    """mempp add s d.jsonl; rm s/CURRENT; mempp stats s; mempp add s one.jsonl: the first two
    documents were gone (version 1's files overwritten). Now: read with a warning, add refused,
    verify says what is wrong, repair re-points, and the add then keeps all three."""
    s = tmp_path / "s"
    assert _run("add", str(s), _jsonl(tmp_path / "d.jsonl", DOCS), "--embedder", "hash")[0] == 0
    (s / "CURRENT").unlink()
    code, out, err = _run("stats", str(s), "--json")
    assert code == 0 and json.loads(out)["documents"] == 2 and "CURRENT" in json.loads(out)["recovered"]
    assert "mempp: warning:" in err and "CURRENT" in err and "mempp repair" in err
    code, out, err = _run("add", str(s), _jsonl(tmp_path / "one.jsonl", ONE))
    assert code == 1 and "mempp repair" in err
    assert _keys(s) == ["a", "b"] and not (s / "CURRENT").exists()
    code, out, err = _run("verify", str(s))
    assert code == 1 and "CURRENT: missing" in out and "newest whole version on disk: 1" in out
    code, out, err = _run("repair", str(s))
    assert code == 0 and "re-pointed CURRENT to version 1" in out
    assert _run("add", str(s), str(tmp_path / "one.jsonl"))[0] == 0
    assert _keys(s) == ["a", "b", "c"]
    code, out, _ = _run("verify", str(s), "--json")
    assert code == 0 and json.loads(out)["clean"] and json.loads(out)["version"] == 2


def test_python_api_reads_the_newest_whole_version_and_refuses_writes(tmp_path):
    s = tmp_path / "s"
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add(DOCS)
        st.add(ONE)
    (s / "CURRENT").write_text("{not json")
    with pytest.warns(mempp.StoreRecoveredWarning, match="CURRENT"):
        st = mempp.Store.open(s, embedder=mempp.HashEmbedder())
    with st:
        assert st.version == 2 and len(st) == 3 and st.stats()["recovered"]
        with pytest.raises(mempp.StoreError, match="mempp repair"):
            st.add([{"id": "d", "text": "more", "date": "2023-04-01"}])
        with pytest.raises(mempp.StoreError, match="mempp repair"):
            st.supersede("a", "c")
        assert not st.verify()["clean"]
    report = mempp.repair(s)
    assert report["clean"] and report["version"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
            st.add([{"id": "d", "text": "more", "date": "2023-04-01"}])
            assert len(st) == 4


def test_a_current_replaced_by_an_older_copy_loses_nothing(tmp_path):
    """A CURRENT restored from an older backup names version 1 while versions 2 and 3 are on disk:
    the next writer never deletes or overwrites their files; it sets them aside in lost+found/."""
    s = tmp_path / "s"
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add(DOCS)
        old = (s / "CURRENT").read_bytes()
        st.add(ONE)
        st.add([{"id": "d", "text": "Fourth note.", "date": "2023-04-01"}])
    newer = {p.name: p.read_bytes() for p in (s / "segments").iterdir() if p.name.startswith(("00000002", "00000003"))}
    newer |= {p.name: p.read_bytes() for p in (s / "manifests").iterdir() if p.name.startswith(("00000002", "00000003"))}
    assert newer
    (s / "CURRENT").write_bytes(old)
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        assert len(st) == 2
        st.add([{"id": "e", "text": "Written after the restore.", "date": "2023-05-01"}])
    kept = {p.name: p.read_bytes() for p in (s / "lost+found").rglob("*") if p.is_file() and p.name != "NOTE.json"}
    assert kept == newer  # every byte of versions 2 and 3, set aside, not overwritten by the new version 2
    notes = [json.loads(p.read_text()) for p in (s / "lost+found").rglob("NOTE.json")]
    assert notes and all("not named by version 1" in n["why"] for n in notes)


def test_missing_derived_files_are_made_again(tmp_path):
    """Postings, term index and int8 copy deleted: open makes them in memory with the same answers;
    verify calls them derived; repair writes them again as a new version and the store is clean."""
    from mempp.storage import commits as writer

    s = tmp_path / "s"
    old, writer.SMALL_UNIT = writer.SMALL_UNIT, 0
    try:
        with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
            st.add(DOCS + ONE)
            want = [(h.key, h.score) for h in st.query("invoice approved", k=3)]
    finally:
        writer.SMALL_UNIT = old
    gone = sorted(p.name for p in (s / "segments").iterdir() if p.name.endswith((".post.arrow", ".terms.arrow", ".q8.arrow")))
    assert len(gone) == 3
    for name in gone:
        (s / "segments" / name).unlink()
    with mempp.Store.open(s, embedder=mempp.HashEmbedder(), read_only=True) as st:
        assert [(h.key, h.score) for h in st.query("invoice approved", k=3)] == want
        assert sorted(Path(r).name for r in st.stats()["rebuilt"]) == gone
    report = mempp.verify(s)
    assert not report["clean"] and {p["kind"] for p in report["problems"]} == {"derived"}
    report = mempp.repair(s)
    assert report["clean"] and report["version"] == 2 and "made again" in report["actions"][0]
    with mempp.Store.open(s, embedder=mempp.HashEmbedder(), read_only=True) as st:
        assert [(h.key, h.score) for h in st.query("invoice approved", k=3)] == want
        assert st.stats()["rebuilt"] == []
        assert [v["version"] for v in st.versions()] == [1, 2]


def test_an_interrupted_writes_files_are_set_aside_not_reused(tmp_path):
    """Files of a version that was never made current (a commit killed before its rename) are set
    aside by the next writer, never removed or overwritten by the version it writes."""
    s = tmp_path / "s"
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add(DOCS)
        cur = (s / "CURRENT").read_bytes()
        st.add(ONE)
    (s / "CURRENT").write_bytes(cur)  # as if version 2's commit had been killed before its rename
    two = {p.name: p.read_bytes() for d in ("segments", "manifests") for p in (s / d).iterdir() if p.name.startswith("00000002")}
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add([{"id": "x", "text": "Another second version.", "date": "2023-06-01"}])
    aside = {p.name: p.read_bytes() for p in (s / "lost+found").rglob("00000002*")}
    assert aside == two
    assert _keys(s) == ["a", "b", "x"]


def test_a_new_store_with_only_a_first_commits_leftovers_opens_empty(tmp_path):
    s = tmp_path / "s"
    (s / "segments").mkdir(parents=True)
    (s / "segments" / "00000001.docs.arrow").write_bytes(b"half a segment")
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        assert len(st) == 0
        st.add(DOCS)
    assert _keys(s) == ["a", "b"]
    assert [p.read_bytes() for p in (s / "lost+found").rglob("00000001.docs.arrow")] == [b"half a segment"]


def test_verify_and_repair_of_a_clean_store(tmp_path):
    s = tmp_path / "s"
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add(DOCS)
        assert st.verify() == mempp.verify(s)
    before = {p: p.read_bytes() for p in s.rglob("*") if p.is_file() and p.name != "LOCK"}
    code, out, _ = _run("repair", str(s))
    assert code == 0 and "nothing to repair" in out
    assert {p: p.read_bytes() for p in s.rglob("*") if p.is_file() and p.name != "LOCK"} == before
    code, out, _ = _run("verify", str(tmp_path / "nowhere"))
    assert code == 1


def test_salvage_when_no_version_file_reads_whole(tmp_path):
    """A bit flip in the first checkpoint breaks every chain of version files although every
    segment is whole: repair salvages a checkpoint from the segments, with every document and the
    same answers, and sets the old version files aside."""
    s = tmp_path / "s"
    with mempp.Store.open(s, embedder=mempp.HashEmbedder()) as st:
        st.add(DOCS)
        st.add(ONE)
        st.supersede("a", "c")
        want = [[(h.key, h.score) for h in st.query(q, k=3, as_of=a)] for q in ("invoice", "review") for a in (None, "2023-02-15")]
    first = s / "manifests" / "00000001.json"
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x10
    first.write_bytes(bytes(data))
    with pytest.raises(mempp.CorruptStoreError, match="00000001.json"):
        mempp.Store.open(s, embedder=mempp.HashEmbedder(), read_only=True)
    report = mempp.repair(s)
    assert report["clean"] and "salvaged version 4" in " ".join(report["actions"]), report
    with mempp.Store.open(s, embedder=mempp.HashEmbedder(), read_only=True) as st:
        got = [[(h.key, h.score) for h in st.query(q, k=3, as_of=a)] for q in ("invoice", "review") for a in (None, "2023-02-15")]
        assert got == want and len(st) == 3 and st.stats()["supersessions"] == 1
    assert sorted(p.name for p in (s / "lost+found").rglob("0000000*.json")) == ["00000001.json", "00000002.json", "00000003.json"]
    shutil.rmtree(s / "segments")
    code, out, _ = _run("repair", str(s))
    assert code == 1
