"""What a new user hits in the first hour: directories that are not stores, supersession cycles,
files with a bad line far in, the CLI's small gaps, waiting for the writer's lock."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mempp


def _open(path, **kw):
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), **kw)


def _cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "mempp", *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


# --- an existing directory must be empty or a store --------------------------------------------------


def test_a_directory_of_other_files_is_not_opened_as_a_store(tmp_path):
    other = tmp_path / "project"
    other.mkdir()
    (other / "notes.txt").write_text("not a store")
    (other / "src").mkdir()
    for kw in ({}, {"read_only": True}):
        with pytest.raises(mempp.StoreError, match=r"not a mempp store .*notes\.txt, src"):
            _open(other, **kw)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt", "src"]  # nothing written beside them
    proc = _cli("query", other, "anything", check=False)
    assert proc.returncode == 1 and "not a mempp store" in proc.stderr and "no matching" not in proc.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    with _open(empty) as s:  # an empty directory becomes a store, as a missing one does
        s.add([{"text": "hello"}])
    with _open(tmp_path / "missing") as s:
        s.add([{"text": "hello"}])
    with _open(empty, read_only=True) as s:
        assert len(s) == 1


def test_etc_is_refused_with_a_clear_message():
    with pytest.raises(mempp.StoreError, match="not a mempp store"):
        _open("/etc", read_only=True)


# --- supersessions that would leave a record with no valid version ------------------------------------


DOCS = [
    {"id": "a", "text": "Per diem is $75.", "author": "Helen", "date": "2023-01-10"},
    {"id": "b", "text": "Per diem is $70.", "author": "Grace", "date": "2024-02-12"},
    {"id": "c", "text": "Per diem is $65.", "author": "Grace", "date": "2024-06-01"},
]


def test_a_supersession_cycle_is_refused_and_nothing_is_written(tmp_path):
    with _open(tmp_path / "s") as s:
        s.add(DOCS)
        s.supersede("a", "b")
        version = s.version
        with pytest.raises(mempp.ValidationError, match="itself superseded") as info:
            s.supersede("b", "a", effective="2024-03-01")  # a, replaced by b from 2024-02-12, replacing b
        assert info.value.field == "new"
        with pytest.raises(mempp.ValidationError, match="before 'a''s own date|before 'b''s own date"):
            s.supersede("b", "a")  # the default effective date is a's: before b's own
        with pytest.raises(mempp.ValidationError, match="itself superseded") as info:
            s.supersede_many([("b", "c"), ("c", "b", "2024-07-01")])  # the second closes a cycle with the first
        assert info.value.record == 1
        assert s.version == version
        # every date still has a valid version
        for day, want in (("2023-06-30", {"a"}), ("2024-03-01", {"b"}), ("2024-12-31", {"b", "c"})):
            assert {h.key for h in s.query("per diem", as_of=day, k=10, depth=10, reserve=False, legs=["vector"])} == want


def test_an_effective_date_before_the_document_needs_backdate(tmp_path):
    with _open(tmp_path / "s") as s:
        s.add(DOCS)
        with pytest.raises(mempp.ValidationError, match="before 'a''s own date") as info:
            s.supersede("a", "b", effective="2022-12-01")
        assert info.value.field == "effective"
        with pytest.raises(mempp.ValidationError, match="before 'b''s own date"):
            s.supersede("a", "b", effective="2023-06-01")  # a gap: a gone, b not there yet
        s.supersede("a", "b", effective="2023-06-01", backdate=True)  # asked for: recorded
        assert s.get("a").valid_until.date().isoformat() == "2023-06-01"


# --- mempp add: the whole file is checked before the first commit ----------------------------------


def _lines(n: int, bad_at: int | None = None, bad: dict | None = None) -> list[dict]:
    out = [{"id": f"d{i}", "text": f"note {i} on the budget", "date": "2023-01-02"} for i in range(n)]
    if bad_at is not None:
        out[bad_at] = bad
    return out


@pytest.mark.parametrize("bad", [{"id": "x", "text": "bad date", "date": "not a date"},
                                 {"id": "y", "text": "unknown target", "supersedes": "no-such-key"}])
def test_add_of_a_file_with_a_bad_record_far_in_commits_nothing(tmp_path, bad):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in _lines(120, 105, bad)) + "\n")
    store = tmp_path / "s"
    with _open(store) as s:
        s.add([{"id": "seed", "text": "seed"}])
    proc = _cli("add", store, src, "--batch-size", 20, "--embedder", "hash", "--quiet", check=False)
    assert proc.returncode == 1 and f"{src}:106" in proc.stderr, proc.stderr
    with _open(store, read_only=True) as s:
        assert len(s) == 1 and s.version == 1  # none of the five batches before line 106 was committed


def test_add_reads_parquet_and_arrow_with_the_same_checks(tmp_path):
    rows = _lines(30)
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "docs.parquet", row_group_size=7)
    with pa.OSFile(str(tmp_path / "docs.arrow"), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table, max_chunksize=11)
    for name in ("docs.parquet", "docs.arrow"):
        store = tmp_path / f"s-{name}"
        _cli("add", store, tmp_path / name, "--embedder", "hash", "--quiet", "--batch-size", 8)
        with _open(store, read_only=True) as s:
            assert [s.get(i).key for i in range(len(s))] == [r["id"] for r in rows]
    bad = pa.Table.from_pylist(_lines(10, 4, {"id": "z", "text": "x", "date": "31/12/2023"}))
    pq.write_table(bad, tmp_path / "bad.parquet")
    proc = _cli("add", tmp_path / "s-bad", tmp_path / "bad.parquet", "--embedder", "hash", "--quiet", check=False)
    assert proc.returncode == 1 and "bad.parquet: row 5" in proc.stderr and "date" in proc.stderr
    assert not (tmp_path / "s-bad" / "CURRENT").exists()


# --- the CLI's small gaps --------------------------------------------------------------------------


def test_get_history_supersede_and_merge_from_the_command_line(tmp_path):
    store = tmp_path / "s"
    with _open(store) as s:
        s.add(DOCS)
        s.add([{"id": "a", "text": "Per diem is $80.", "author": "Helen", "date": "2023-09-01"}])  # a new version of a
    got = json.loads(_cli("get", store, "b").stdout)
    assert got["key"] == "b" and got["text"] == "Per diem is $70." and got["valid_until"] is None
    assert json.loads(_cli("get", store, "0").stdout)["text"] == "Per diem is $75."  # a doc id number
    hist = [json.loads(line) for line in _cli("history", store, "a").stdout.splitlines()]
    assert [h["text"] for h in hist] == ["Per diem is $75.", "Per diem is $80."]
    proc = _cli("history", store, "nope", check=False)
    assert proc.returncode == 1 and "no document with id 'nope'" in proc.stderr
    proc = _cli("get", store, "nope", check=False)
    assert proc.returncode == 1 and "no document with id 'nope'" in proc.stderr
    _cli("supersede", store, "b", "c")
    assert json.loads(_cli("get", store, "b").stdout)["valid_until"].startswith("2024-06-01")
    proc = _cli("supersede", store, "c", "b", "--effective", "2024-07-01", check=False)
    assert proc.returncode == 1 and "itself superseded" in proc.stderr
    out = _cli("merge", store, "--force").stdout
    assert "-> 1 segments" in out
    with pytest.raises(mempp.DocumentNotFound):
        with _open(store, read_only=True) as s:
            s.history("nope")


def test_query_options_that_make_no_sense_are_errors(tmp_path):
    store = tmp_path / "s"
    with _open(store) as s:
        s.add(DOCS)
        with pytest.raises(mempp.ValidationError, match="every leg has weight 0"):
            s.query("per diem", weights=(0, 0, 0))
    for args in (["--k", "0"], ["--weights", "0,0,0"], ["--out", str(tmp_path / "h.arrow")]):
        proc = _cli("query", store, "per diem", *args, check=False)
        assert proc.returncode in (1, 2) and proc.stderr.strip(), (args, proc.stderr)
        assert "no matching documents" not in proc.stdout
    long = "x" * 1000
    with _open(store) as s:
        s.add([{"id": "long", "text": "per diem policy " + long}])
    out = _cli("query", store, "per diem policy", "--max-chars", 50).stdout
    assert "more characters; --json prints it whole" in out and long not in out
    hits = json.loads(_cli("query", store, "per diem policy", "--json").stdout)
    assert any(h["text"].endswith(long) for h in hits["hits"])


def test_every_command_and_option_has_help():
    from mempp.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
    for name, p in sub.choices.items():
        if name == "bench":
            continue
        for action in p._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"mempp {name} {action.option_strings[0]} has no help text"


def test_store_add_of_a_single_dict_is_a_clear_error(tmp_path):
    with _open(tmp_path / "s") as s:
        with pytest.raises(mempp.ValidationError, match="single dict; wrap it in a list") as info:
            s.add({"id": "a", "text": "one document"})
        assert info.value.field == "docs" and len(s) == 0


# --- a writer may wait for the lock ---------------------------------------------------------------


def test_a_second_writer_can_wait_for_the_lock(tmp_path):
    path = tmp_path / "s"
    first = _open(path)
    first.add([{"id": "one", "text": "first writer"}])
    with pytest.raises(mempp.StoreLockedError):
        with _open(path) as second:
            second.add([{"id": "two", "text": "second writer"}])
    threading.Timer(0.5, first.close).start()
    t = time.monotonic()
    with _open(path, lock_timeout=30) as second:
        second.add([{"id": "two", "text": "second writer"}])
        assert 0.3 < time.monotonic() - t < 30 and len(second) == 2
    with pytest.raises(mempp.ValidationError, match="lock_timeout"):
        _open(path, lock_timeout=-1)
