"""The ``mempp`` command end to end, in real subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ORG


def mempp(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "mempp", *args], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in ORG) + "\n")
    return path


def test_add_query_stats(tmp_path, corpus):
    store = tmp_path / "org.mempp"
    out = mempp("add", str(store), str(corpus), "--embedder", "hash")
    assert "4 added" in out.stdout
    # stderr is not a terminal: each progress bar (the file checked, then added) is one summary line, when done
    assert re.fullmatch(r"check 4 docs [\d,]+/s in [\d,.]+s\nadd \[#{24}\] 4/4 docs [\d,]+/s 4 committed \(4 new, 0 already stored\) in [\d,.]+s\n", out.stderr), out.stderr
    again = mempp("add", str(store), str(corpus), "--quiet")
    assert "0 added, 4 already stored" in again.stdout and again.stderr == ""

    res = json.loads(mempp("query", str(store), "uptime SLA", "--json", "--k", "3").stdout)
    assert res["hits"][0]["key"] == "sla-2" and set(res["hits"][0]["ranks"]) == {"lexical", "tag", "vector"}
    assert res["plan"]["candidates"] == 3

    past = json.loads(mempp("query", str(store), "uptime SLA", "--json", "--as-of", "2023-03-01").stdout)
    assert {h["key"] for h in past["hits"]} == {"sla-1", "lunch"}

    text = mempp("query", str(store), "what did Ortiz decide about the SLA", "--explain").stdout
    assert "# as_of=now candidates=3" in text and "authors named: Ben Ortiz" in text
    assert "[2023-06-01] Ben Ortiz (email, thread EV-1):" in text and "lexical=1" in text  # leg ranks from 1, as the hits

    only = json.loads(mempp("query", str(store), "SLA", "--json", "--author", "Aisha Patel", "--as-of", "2023-02-01").stdout)
    assert [h["key"] for h in only["hits"]] == ["sla-1"]

    stats = json.loads(mempp("stats", str(store), "--json").stdout)
    assert stats["documents"] == 4 and stats["superseded"] == 1 and stats["version"] == 1
    assert "+4 docs" in mempp("versions", str(store)).stdout


def test_errors_are_one_line_and_nonzero(tmp_path, corpus):
    store = tmp_path / "s"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "text": "fine"}) + "\n" + json.dumps({"id": "b", "text": "x", "date": "2023-99-01"}) + "\n")
    proc = mempp("add", str(store), str(bad), "--embedder", "hash", "--quiet", check=False)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "bad.jsonl:2" in proc.stderr and "'date'" in proc.stderr

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": \n')
    proc = mempp("add", str(store), str(broken), "--embedder", "hash", check=False)
    assert proc.returncode == 1 and "broken.jsonl:2: not valid JSON" in proc.stderr

    proc = mempp("stats", str(tmp_path / "missing"), check=False)
    assert proc.returncode == 1 and "no such store" in proc.stderr
    proc = mempp("query", str(tmp_path / "missing"), "x", check=False)
    assert proc.returncode == 1
    mempp("add", str(store), str(corpus), "--embedder", "hash", "--quiet")
    proc = mempp("query", str(store), "x", "--as-of", "someday", check=False)
    assert proc.returncode == 1 and "as_of" in proc.stderr
    proc = mempp("query", str(store), "x", "--weights", "1,2", check=False)
    assert proc.returncode == 2


def test_eval_json_and_ranked_out(tmp_path, corpus):
    qs = tmp_path / "q.jsonl"
    rows = [
        {"id": "q1", "scope": None, "text": "What is the uptime SLA?", "category": "supersession", "as_of": None, "evidence": ["sla-2"]},
        {"id": "q2", "scope": None, "text": "What is the uptime SLA?", "category": "supersession", "as_of": "2023-03-01", "evidence": ["sla-1"]},
        {"id": "q3", "scope": None, "text": "Lunch?", "category": "other", "as_of": None, "evidence": []},
    ]
    qs.write_text("\n".join(json.dumps(r) for r in rows))
    ranked = tmp_path / "ranked.jsonl"
    out = mempp("eval", "--docs", str(corpus), "--questions", str(qs), "--k", "1", "--k", "3", "--json",
                "--embedder", "hash", "--ranked-out", str(ranked), "--no-reserve", "--quiet")
    report = json.loads(out.stdout)
    assert report["k"] == [1, 3] and report["questions"] == 2
    assert report["overall"]["recall@1"] == 1.0 and report["overall"]["mrr"] == 1.0
    assert report["by_category"]["supersession"]["questions"] == 2
    assert report["config"]["reserve"] is False
    lines = [json.loads(x) for x in ranked.read_text().splitlines()]
    assert [(x["id"], x["k"]) for x in lines] == [("q1", 1), ("q1", 3), ("q2", 1), ("q2", 3), ("q3", 1), ("q3", 3)]
    assert all(len(x["ranked"]) <= x["k"] for x in lines)
    assert lines[0]["ranked"][0] == "sla-2" and lines[2]["ranked"][0] == "sla-1"

    table = mempp("eval", "--docs", str(corpus), "--questions", str(qs), "--embedder", "hash", "--legs", "lexical", "--quiet").stdout
    assert "overall" in table and "recall@10" in table and "legs=('lexical',)" in table


def test_every_command_is_documented_in_the_readme():
    from pathlib import Path

    from mempp.cli import COMMANDS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name in COMMANDS:
        assert f"mempp {name}" in readme, name


def test_query_batch_file(tmp_path, corpus):
    import pyarrow as pa

    store = tmp_path / "s"
    mempp("add", str(store), str(corpus), "--embedder", "hash", "--quiet")
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"id": "a", "text": "uptime SLA"}) + "\n" + json.dumps({"id": "b", "text": "uptime SLA", "as_of": "2023-03-01"}) + "\n")
    rows = [json.loads(x) for x in mempp("query", str(store), "--batch", str(batch), "--k", "2").stdout.splitlines()]
    assert [(r["query_id"], r["rank"]) for r in rows] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    single = json.loads(mempp("query", str(store), "uptime SLA", "--json", "--k", "2", "--as-of", "2023-03-01").stdout)
    assert [r["key"] for r in rows if r["query_id"] == "b"] == [h["key"] for h in single["hits"]]
    out = tmp_path / "hits.arrow"
    assert "4 rows for 2 queries" in mempp("query", str(store), "--batch", str(batch), "--k", "2", "--out", str(out)).stdout
    table = pa.ipc.open_file(str(out)).read_all()
    assert table.num_rows == 4 and "rank_lexical" in table.column_names
    proc = mempp("query", str(store), check=False)
    assert proc.returncode == 1 and "question is needed" in proc.stderr


def test_two_add_processes_print_what_each_committed(tmp_path):
    """Two ``mempp add`` processes on one store at once: each prints the counts of its own
    commits, whatever the other committed before or meanwhile (the same file twice: one
    stores it, the other finds it stored; two files: each its own)."""
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document number {i}", "author": "Ann"}) + "\n" for i in range(60)))
    parts = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(json.dumps({"id": f"{name}{i}", "text": f"{name} note {i}"}) + "\n" for i in range(100))
                     + json.dumps({"text": "  "}) + "\n" + json.dumps({"id": f"{name}0", "text": f"{name} note 0"}) + "\n")
        parts.append(p)
    counts = re.compile(r": (\d+) added, (\d+) already stored, (\d+) empty skipped; (\d+) documents")

    def both(store, first, second, *extra):
        cmd = [sys.executable, "-m", "mempp", "add", str(store)]
        procs = [subprocess.Popen([*cmd, str(f), "--embedder", "hash", "--quiet", "--wait", "120", *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f in (first, second)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
        got = [tuple(int(x) for x in counts.search(o[0]).groups()) for o in outs]
        with mempp_store(store) as s:
            return got, len(s)

    got, n = both(tmp_path / "same.mempp", same, same)
    assert sorted(g[:3] for g in got) == [(0, 60, 0), (60, 0, 0)] and n == 60

    got, n = both(tmp_path / "ab.mempp", *parts, "--batch-size", "7")
    assert [g[:3] for g in got] == [(100, 1, 1), (100, 1, 1)] and n == 200  # the last line repeats the first
    assert max(g[3] for g in got) == 200


def mempp_store(path):
    import mempp as api

    return api.Store.open(path, read_only=True)


def test_options_may_come_before_the_question(tmp_path, corpus):
    store = tmp_path / "s"
    mempp("add", str(store), str(corpus), "--embedder", "hash", "--quiet")
    after = json.loads(mempp("query", str(store), "uptime SLA", "--k", "1", "--json", "--as-of", "2023-03-01").stdout)
    before = json.loads(mempp("query", str(store), "--k", "1", "--json", "--as-of", "2023-03-01", "uptime SLA").stdout)
    between = json.loads(mempp("query", "--k", "1", str(store), "--json", "uptime SLA", "--as-of", "2023-03-01").stdout)
    assert [h["key"] for h in after["hits"]] == [h["key"] for h in before["hits"]] == [h["key"] for h in between["hits"]] == ["sla-1"]
    proc = mempp("query", str(store), "--k", "1", "one", "two", check=False)
    assert proc.returncode == 2 and "unrecognized arguments: two" in proc.stderr


def _closed_pipe_run(argv) -> tuple[int, str]:
    """``mempp.cli.main(argv)`` in this process, its stdout a pipe whose reader is gone: (status, stderr)."""
    import contextlib
    import io
    import os

    from mempp.cli import main

    r, w = os.pipe()
    os.close(r)
    err = io.StringIO()
    out = open(w, "w", buffering=1 << 16)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in argv])
    finally:
        out.close()  # what is still buffered goes to /dev/null, where main sent stdout
    return rc, err.getvalue()


def test_a_reader_that_goes_away_ends_every_command_quietly(tmp_path, corpus):
    """Every command that writes to stdout, its reader gone (``| head -1``): exit status 141, as
    a tool that SIGPIPE ended, and no error on stderr; what it was doing is done (a write commits)."""
    store = tmp_path / "s"
    batch = tmp_path / "q.jsonl"
    batch.write_text(json.dumps({"id": "a", "text": "uptime SLA"}) + "\n")
    qs = tmp_path / "questions.jsonl"
    qs.write_text(json.dumps({"id": "q1", "scope": None, "text": "uptime SLA?", "category": "c", "as_of": None, "evidence": ["sla-2"]}) + "\n")
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "sla-3", "text": "SLA back to 99.9%", "date": "2023-09-01"}) + "\n")
    commands = [
        ("add", store, corpus, "--embedder", "hash", "--quiet"),
        ("add", store, more, "--quiet"),
        ("query", store, "uptime SLA"),
        ("query", store, "uptime SLA", "--json", "--explain"),
        ("query", store, "--batch", batch),
        ("get", store, "sla-2"),
        ("history", store, "sla-1"),
        ("supersede", store, "sla-2", "sla-3", "--effective", "2024-01-01"),
        ("merge", store, "--force"),
        ("stats", store),
        ("stats", store, "--json"),
        ("versions", store),
        ("eval", "--docs", corpus, "--questions", qs, "--k", "1", "--embedder", "hash", "--quiet"),
    ]
    for argv in commands:
        rc, err = _closed_pipe_run(argv)
        assert rc == 141 and "mempp:" not in err and "Error" not in err, (argv, rc, err)  # (a progress bar may report)
    with __import__("mempp").Store.open(store, read_only=True) as s:
        assert len(s) == 5 and s.get("sla-2").valid_until is not None  # the writes were done


def test_a_closed_pipe_ends_the_process_quietly():
    """The same, end to end: the interpreter's own exit writes nothing to stderr either."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-m", "mempp", "--help"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
        big = subprocess.run([sys.executable, "-m", "mempp", "query", "--help"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert proc.stderr == big.stderr == ""


def test_add_of_a_missing_file_creates_no_store(tmp_path):
    store = tmp_path / "new.mempp"
    for path, message in [(tmp_path / "missing.jsonl", "no such file"), (tmp_path, "is a directory, not a file of documents")]:
        proc = mempp("add", str(store), str(path), "--embedder", "hash", check=False)
        assert proc.returncode == 1 and proc.stderr == f"mempp: error: {path}: {message}\n", proc.stderr
        assert not store.exists()
