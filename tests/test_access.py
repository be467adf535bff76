"""Who may read what: readers, groups, principals, the access log's commits (docs/DESIGN.md §8).

The oracle of a permission is a plain Python model: a principal reads a document when the
document names no readers, or names the principal or a group the principal belongs to (through
any chain of groups). Reads as a principal who may not read every document are refused for now;
a principal who may read every document reads exactly what mempp.ADMIN reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp.storage import manifest

DOCS = [
    {"id": "sla", "text": "Uptime SLA is 99.9%.", "author": "Aisha Patel", "date": "2023-01-10"},
    {"id": "hr-7", "text": "Salary bands for 2024.", "author": "Hal Berg", "date": "2024-02-01", "readers": ["group:hr", "user:ben"]},
    {"id": "board-1", "text": "Board minutes: the merger vote.", "author": "Cleo Diaz", "date": "2024-03-01", "readers": ["group:board"]},
]


def open_store(path: Path, **kw) -> mempp.Store:
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), **kw)


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "s") as s:
        s.add(DOCS)
        yield s


READS = {
    "query": lambda s, **kw: s.query("salary bands", **kw),
    "explain": lambda s, **kw: s.explain("salary bands", **kw),
    "query_batch": lambda s, **kw: s.query_batch(["salary bands"], **kw),
    "query_stream": lambda s, **kw: list(s.query_stream(["salary bands"], **kw)),
    "get": lambda s, **kw: s.get("sla", **kw),
    "history": lambda s, **kw: s.history("sla", **kw),
    "documents": lambda s, **kw: s.documents(**kw),
    "authors": lambda s, **kw: s.authors(**kw),
    "replacements": lambda s, **kw: s.replacements("sla", **kw),
    "export": lambda s, **kw: s.export(**kw),
    "stats": lambda s, **kw: s.stats(**kw),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_store_with_restricted_documents_refuses_every_read_without_a_principal(store, read):
    with pytest.raises(mempp.AccessDenied, match="not everyone may read"):
        READS[read](store)
    READS[read](store, principal=mempp.ADMIN)  # everything, when asked for


def test_a_principal_reads_only_what_it_may(store):
    """user:zed may read sla alone: every read answers from it (the oracle of every statistic:
    tests/test_reader_oracle.py)."""
    who = "user:zed"
    assert [h.key for h in store.query("salary bands merger vote uptime", k=10, principal=who)] == ["sla"]
    assert store.explain("salary bands", principal=who).candidates == 1
    assert set(store.query_batch(["salary bands", "uptime"], principal=who).column("key").to_pylist()) <= {"sla"}
    assert [r.key for r in store.documents(principal=who)] == ["sla"] and store.authors(principal=who) == ["Aisha Patel"]
    assert store.stats(principal=who)["documents"] == 1 and store.export(principal=who).column("id").to_pylist() == ["sla"]
    for ref in ("hr-7", "board-1", 1, 2):
        with pytest.raises(mempp.DocumentNotFound):
            store.get(ref, principal=who)
    with pytest.raises(mempp.DocumentNotFound):
        store.history("hr-7", principal=who)
    assert store.get("sla", principal=who).readers is None  # a reader is not told who else reads what
    ben = store.query("salary bands merger vote", k=10, principal="user:ben")
    assert {h.key for h in ben} == {"hr-7", "sla"} and all(h.readers is None for h in ben)


def test_a_store_without_restrictions_reads_as_before(tmp_path):
    with open_store(tmp_path / "s") as s:
        s.add([{k: v for k, v in d.items() if k != "readers"} for d in DOCS])
        assert [h.key for h in s.query("salary bands", k=3)] == [h.key for h in s.query("salary bands", k=3, principal="user:zed")]
        assert s.get("hr-7").readers is None
    assert json.loads((tmp_path / "s" / "CURRENT").read_text())["version"] == 1
    assert json.loads((tmp_path / "s" / "manifests" / "00000001.json").read_text())["format"] == 2  # no access log: format 2


def test_a_principal_who_may_read_everything_reads_what_admin_reads(store):
    store.add_members("group:board", ["group:hr"])
    store.add_members("group:hr", ["user:ben"])
    for text in ("salary bands", "merger vote", "uptime"):
        mine = store.query(text, k=3, principal="user:ben")
        admin = store.query(text, k=3, principal=mempp.ADMIN)
        assert [(h.doc_id, h.score, h.ranks) for h in mine] == [(h.doc_id, h.score, h.ranks) for h in admin]
    assert store.query_batch(["salary bands", "uptime"], principal="user:ben").equals(
        store.query_batch(["salary bands", "uptime"], principal=mempp.ADMIN))


@pytest.mark.parametrize("bad", ["ben", "user:", "group:", " user:ben", "user:ben ", "admin", "role:x", "user:a\nb", 7, None])
def test_malformed_principals_and_readers_are_errors_naming_the_field_and_record(tmp_path, bad):
    with open_store(tmp_path / "s") as s:
        s.add(DOCS[:1])
        with pytest.raises(mempp.ValidationError, match=r"record 1 \(id 'x'\): field 'readers'"):
            s.add([DOCS[0], {"id": "x", "text": "t", "readers": [bad]}])
        if bad is not None:
            with pytest.raises(mempp.ValidationError, match="field 'principal'"):
                s.query("uptime", principal=bad)
        assert len(s) == 1 and s.version == 1  # nothing written


@pytest.mark.parametrize("bad", ["user:ben", {"user:ben": 1}, 3, [mempp.ADMIN]])
def test_readers_must_be_a_list_of_principals(tmp_path, bad):
    with open_store(tmp_path / "s") as s:
        with pytest.raises(mempp.ValidationError, match="field 'readers'"):
            s.add([{"id": "x", "text": "t", "readers": bad}])
        assert len(s) == 0


def test_groups_nest_and_a_cycle_is_refused(store):
    store.add_members("group:hr", ["group:hr-leads"])
    store.add_members("group:hr-leads", ["user:ann"])
    access = store.searcher().access()
    assert access.groups_of("user:ann") == {"group:hr-leads", "group:hr"}
    assert access.may_read("user:ann", store.get("hr-7", principal=mempp.ADMIN).doc_id)
    assert not access.may_read("user:ann", store.get("board-1", principal=mempp.ADMIN).doc_id)
    version = store.version
    for group, member in (("group:hr-leads", "group:hr"), ("group:hr", "group:hr")):
        with pytest.raises(mempp.ValidationError, match="cycle"):
            store.add_members(group, [member])
    assert store.version == version  # nothing committed
    store.remove_members("group:hr", ["group:hr-leads"])
    assert not store.searcher().access().may_read("user:ann", 1)
    store.remove_members("group:hr", ["user:nobody"])  # not a member: nothing to commit
    assert store.version == version + 1


def test_set_readers_covers_every_version_and_a_new_version_keeps_the_keys_readers(store):
    store.add([{"id": "hr-7", "text": "Salary bands for 2025.", "author": "Hal Berg", "date": "2025-02-01"}])
    versions = store.history("hr-7", principal=mempp.ADMIN)
    assert [r.readers for r in versions] == [("group:hr", "user:ben")] * 2  # the revision kept them
    store.set_readers("hr-7", ["user:hal"])
    assert [r.readers for r in store.history("hr-7", principal=mempp.ADMIN)] == [("user:hal",)] * 2
    store.add([{"id": "hr-7", "text": "Salary bands for 2026.", "author": "Hal Berg", "date": "2026-02-01", "readers": None}])
    assert [r.readers for r in store.history("hr-7", principal=mempp.ADMIN)] == [("user:hal",)] * 2 + [None]
    version = store.version
    store.set_readers("hr-7", None)
    store.set_readers("hr-7", None)  # already so: no commit
    assert store.version == version + 1
    with pytest.raises(mempp.DocumentNotFound):
        store.set_readers("nope", None)


def test_history_says_who_could_read_a_record_from_when_to_when(store):
    store.set_readers("sla", ["user:ann"])
    store.set_readers("sla", None)
    periods = store.history("sla", principal=mempp.ADMIN)[0].reader_periods
    assert [p["readers"] for p in periods] == [None, ["user:ann"], None]
    assert periods[0]["from"] == store.get("sla", principal=mempp.ADMIN).ingested_at
    assert all(a["until"] == b["from"] for a, b in zip(periods, periods[1:])) and periods[-1]["until"] is None
    added = store.history("hr-7", principal=mempp.ADMIN)[0].reader_periods
    assert [p["readers"] for p in added] == [["group:hr", "user:ben"]]  # named when it was added
    assert "reader_periods" in store.history("sla", principal=mempp.ADMIN)[0].to_dict()


def test_permissions_are_the_newest_whatever_version_is_read(tmp_path):
    path = tmp_path / "s"
    with open_store(path) as s:
        s.add([{k: v for k, v in d.items() if k != "readers"} for d in DOCS])
        assert s.version == 1
        s.set_readers("board-1", ["group:board"])  # a restriction after the fact applies to version 1 too
    with open_store(path, read_only=True, version=1) as old:
        assert len(old) == 3
        with pytest.raises(mempp.AccessDenied):
            old.query("merger vote")
        assert old.get("board-1", principal=mempp.ADMIN).readers == ("group:board",)
    with open_store(path, read_only=True) as s:
        searcher = s.searcher()
        with open_store(path) as w:
            w.set_readers("board-1", None)  # revoked by another writer
        s.refresh()
        assert searcher.query("merger vote", k=1)[0].key == "board-1"  # an older searcher reads the newest permissions


def test_readers_from_documents_tables_and_the_command_line(tmp_path, capsys):
    import pyarrow as pa

    from mempp.cli import main

    with open_store(tmp_path / "s") as s:
        s.add([mempp.Document(text="Doc one.", id="a", readers=("user:ann",)), mempp.Document(text="Doc two.", id="b")])
        table = pa.table({"id": ["c"], "text": ["Doc three."], "readers": [["group:ops"]]})
        s.add(table)
        got = {r.key: r.readers for r in s.documents(principal=mempp.ADMIN)}
    assert got == {"a": ("user:ann",), "b": None, "c": ("group:ops",)}
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "d", "text": "Doc four."}) + "\n" + json.dumps({"id": "e", "text": "Doc five.", "readers": None}) + "\n")
    store = str(tmp_path / "s")
    assert main(["add", store, str(tmp_path / "d.jsonl"), "--readers", "user:ann,group:ops", "--quiet"]) == 0
    assert main(["members", store, "group:ops", "--add", "user:bo", "user:cy"]) == 0
    assert main(["readers", store, "a", "user:bo"]) == 0
    capsys.readouterr()
    assert main(["readers", store, "d", "--json"]) == 0 and json.loads(capsys.readouterr().out)["readers"] == ["group:ops", "user:ann"]
    assert main(["readers", store, "e"]) == 0 and "everyone" in capsys.readouterr().out
    assert main(["query", store, "doc", "--k", "2"]) == 1 and "not everyone may read" in capsys.readouterr().err
    assert main(["query", store, "doc", "--as", "admin", "--k", "2"]) == 0
    assert main(["members", store, "group:ops", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["members"] == ["user:bo", "user:cy"]
    assert main(["history", store, "a", "--as", "admin"]) == 0
    assert json.loads(capsys.readouterr().out)["readers"] == ["user:bo"]


def test_merges_keep_the_permissions_and_export_carries_them(tmp_path):
    src = tmp_path / "s"
    with open_store(src) as s:
        for d in DOCS:
            s.add([d])
        s.add_members("group:hr", ["user:ann", "group:hr-leads"])
        s.merge(force=True)
        s.wait_merges()
        before = {r.key: r.readers for r in s.documents(principal=mempp.ADMIN)}
        assert before["hr-7"] == ("group:hr", "user:ben") and before["sla"] is None
        s.searcher().allow(mempp.ADMIN)
        out = tmp_path / "x.parquet"
        from mempp.export import write_export

        write_export(s.searcher(), out)
    from mempp.cli import main

    assert main(["add", str(tmp_path / "copy"), str(out), "--quiet"]) == 0
    with mempp.Store.open(tmp_path / "copy", read_only=True) as copy:
        assert {r.key: r.readers for r in copy.documents(principal=mempp.ADMIN)} == before
        assert copy.searcher().access().members == {"group:hr": {"user:ann", "group:hr-leads"}}
        with pytest.raises(mempp.AccessDenied):
            copy.query("salary")


def test_a_mempp_without_access_control_refuses_the_store(store, monkeypatch):
    path = store.path
    store.close()
    assert json.loads((path / "manifests" / f"{store.version:08d}.json").read_text())["format"] == manifest.ACCESS_FORMAT
    monkeypatch.setattr(manifest, "READS", (1, 2))  # what an older mempp reads
    with pytest.raises(mempp.StoreError, match="store format 3"):
        mempp.Store.open(path, read_only=True)


def test_verify_checks_the_access_log_and_a_damaged_one_fails_the_read(store):
    path = store.path
    store.close()
    assert mempp.verify(path)["clean"]
    log = next((path / "segments").glob("*.access.arrow"))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    report = mempp.verify(path)
    assert not report["clean"] and any(p["file"].endswith(".access.arrow") for p in report["problems"])
    with mempp.Store.open(path, read_only=True) as s:
        with pytest.raises(mempp.CorruptStoreError):
            s.query("uptime", principal="user:ben")  # fails closed: the permissions cannot be read


SCRIPT = """
import sys, mempp
with mempp.Store.open(sys.argv[1], embedder=mempp.HashEmbedder()) as s:
    s.set_readers("sla", ["user:ann"])
print("acknowledged", flush=True)
"""


@pytest.mark.parametrize("step,applied", [("after_access_fsync", False), ("after_manifest_fsync", False), ("after_current_rename", True)])
def test_a_process_killed_during_a_permission_commit_leaves_the_old_or_the_new_permissions(store, step, applied):
    path = store.path
    store.close()
    env = {**os.environ, "MEMPP_FAILPOINT": f"{step}:kill"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9 and "acknowledged" not in proc.stdout, proc.stderr
    with mempp.Store.open(path, read_only=True) as s:
        assert s.get("sla", principal=mempp.ADMIN).readers == (("user:ann",) if applied else None)
        assert mempp.verify(path)["clean"]
    with open_store(path) as s:  # the next writer clears what the killed one left
        s.set_readers("sla", ["user:bo"])
        assert s.get("sla", principal=mempp.ADMIN).readers == ("user:bo",)


# --- the permission model against a plain oracle ------------------------------------------------------
USERS = [f"user:u{i}" for i in range(4)]
GROUPS = [f"group:g{i}" for i in range(3)]

changes = st.lists(
    st.one_of(
        st.tuples(st.just("readers"), st.integers(0, 5), st.one_of(st.none(), st.lists(st.sampled_from(USERS + GROUPS), max_size=3))),
        st.tuples(st.just("add"), st.sampled_from(GROUPS), st.lists(st.sampled_from(USERS + GROUPS), min_size=1, max_size=2)),
        st.tuples(st.just("remove"), st.sampled_from(GROUPS), st.lists(st.sampled_from(USERS + GROUPS), min_size=1, max_size=2)),
    ),
    max_size=8,
)


def oracle_may_read(readers: dict, members: dict, who: str, doc: int) -> bool:
    r = readers.get(doc)
    if r is None:
        return True
    seen, todo = {who}, [who]
    while todo:
        p = todo.pop()
        for g, ms in members.items():
            if p in ms and g not in seen:
                seen.add(g)
                todo.append(g)
    return bool(seen & set(r))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes)
def test_who_may_read_what_follows_the_plain_model_through_commits_and_a_reopen(tmp_path_factory, todo):
    path = tmp_path_factory.mktemp("acl") / "s"
    readers: dict[int, tuple | None] = {}
    members: dict[str, set] = {}
    with open_store(path) as s:
        s.add([{"id": f"d{i}", "text": f"document {i}"} for i in range(6)])
        for kind, target, arg in todo:
            if kind == "readers":
                s.set_readers(target, arg)
                readers[target] = None if arg is None else tuple(sorted(set(arg)))
            elif kind == "add":
                cyclic = any(m == target or (m.startswith("group:") and oracle_may_read({0: (m,)}, members, target, 0)) for m in arg)
                if cyclic:
                    with pytest.raises(mempp.ValidationError, match="cycle"):
                        s.add_members(target, arg)
                else:
                    s.add_members(target, arg)
                    members.setdefault(target, set()).update(arg)
            else:
                s.remove_members(target, arg)
                members.setdefault(target, set()).difference_update(arg)
    with mempp.Store.open(path, read_only=True) as s:
        access = s.searcher().access()
        assert {d: r for d, r in access.readers.items() if r is not None} == {d: r for d, r in readers.items() if r is not None}
        for who in USERS + GROUPS:
            want = np.array([oracle_may_read(readers, members, who, d) for d in range(6)])
            assert (access.readable(who, 6) == want).all(), who
            got = [h.doc_id for h in s.query("document", k=6, principal=who)]
            if want.all():
                assert got == [h.doc_id for h in s.query("document", k=6, principal=mempp.ADMIN)]
            else:
                assert sorted(got) == np.flatnonzero(want).tolist()  # every readable document, nothing else


def test_the_mcp_tools_read_as_their_principal(tmp_path):
    from mempp.mcp_server import MemoryTools

    path = tmp_path / "s"
    with open_store(path) as s:
        s.add(DOCS)
    tools = MemoryTools(path, principal=None)
    try:
        with pytest.raises(mempp.AccessDenied):
            tools.recall("salary bands")
    finally:
        tools.close()
    tools = MemoryTools(path, principal=mempp.ADMIN)
    try:
        text, result = tools.recall("salary bands", k=2)
        assert "Salary bands" in text and tools.get("hr-7")["memory"]["id"] == "hr-7"
    finally:
        tools.close()
    with pytest.raises(mempp.ValidationError, match="'--as'"):
        MemoryTools(path, principal="ben")


def test_an_agent_may_not_revise_or_supersede_a_memory_it_may_not_read(tmp_path):
    """Refused before anything is written: the store keeps its version and its documents."""
    from mempp.mcp_server import MemoryTools, ToolInputError

    path = tmp_path / "s"
    with open_store(path) as s:
        s.add(DOCS)
        version = s.version
    tools = MemoryTools(path, principal="user:zed", embedder=mempp.HashEmbedder())
    try:
        with pytest.raises(ToolInputError) as info:
            tools.remember("Salary bands revised.", author="Zed", id="hr-7")
        assert info.value.field == "id"
        with pytest.raises(ToolInputError) as info:
            tools.remember("The board decided.", author="Zed", id="z-1", supersedes=["board-1"])
        assert info.value.field == "supersedes"
        tools.remember("Uptime SLA raised to 99.95%.", author="Zed", id="sla")  # a memory it may read: revised
    finally:
        tools.close()
    with open_store(path, read_only=True) as s:
        assert s.version == version + 1 and len(s.history("hr-7", principal=mempp.ADMIN)) == 1
        assert s.get("sla", principal=mempp.ADMIN).text == "Uptime SLA raised to 99.95%."
