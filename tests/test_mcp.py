"""``mempp mcp``: the MCP server, driven by the official SDK's own client.

Real server processes (``python -m mempp mcp STORE``) over stdio and streamable HTTP: the tools
listed with their schemas, remember then recall (as-of semantics), errors that name the field
and leave the server running, two clients at once (two stdio servers sharing the store's writer
lock; two HTTP clients of one server), and a server killed in the middle of a ``remember`` (the
memory is in the store whole or not at all). The tools' logic is also checked in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mempp

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'mempp[mcp]')")
anyio = pytest.importorskip("anyio")

from mcp import Client, StdioServerParameters  # noqa: E402

from mempp.mcp_server import MemoryTools, build_server, derived_id  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60  # seconds any one call may take (a cold numba cache compiles in the first query)

SLA_1 = {"id": "sla", "text": "Decision: the uptime SLA is 99.9% for every plan.", "author": "Aisha Patel", "date": "2023-01-10",
         "channel": "email", "thread": "EV-1"}
SLA_2 = {"id": "sla", "text": "Revised: the uptime SLA is now 99.95% after the outage review.", "author": "Ben Ortiz",
         "date": "2023-06-01", "channel": "email", "thread": "EV-1"}
LUNCH = {"id": "lunch", "text": "Team lunch on Friday at noon.", "author": "Ben Ortiz", "date": "2023-02-01", "channel": "chat"}


def server_params(store: Path, *extra: str, env: dict | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mempp", "mcp", str(store), "--embedder", "hash", *extra],
        env={**os.environ, **(env or {})},
        cwd=str(ROOT),
    )


def client(server) -> Client:
    return Client(server, read_timeout_seconds=TIMEOUT)


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def call(c: Client, tool: str, args: dict):
    result = await c.call_tool(tool, args)
    assert not result.is_error, text(result)
    return result


async def refused(c: Client, tool: str, args: dict, field: str) -> str:
    result = await c.call_tool(tool, args)
    assert result.is_error, (tool, args, text(result))
    msg = text(result)
    assert field in msg, (field, msg)
    return msg


# --- one client, one server process over stdio --------------------------------------------------------
@pytest.mark.slow
def test_stdio_session_tools_remember_recall_errors(tmp_path):
    transcript: list[str] = []

    async def main():
        async with client(server_params(tmp_path / "org")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            transcript.append("tools: " + ", ".join(sorted(tools)))
            assert set(tools) == {"remember", "recall", "get", "history", "supersede"}
            for t in tools.values():
                assert len(t.description) > 60 and t.input_schema["type"] == "object" and t.output_schema, t.name
            assert set(tools["remember"].input_schema["properties"]) == {"text", "author", "date", "thread", "channel", "supersedes", "id"}
            assert tools["remember"].input_schema["required"] == ["text"]
            assert set(tools["recall"].input_schema["properties"]) == {"question", "as_of", "k", "authors", "channels"}
            assert tools["recall"].input_schema["properties"]["k"]["maximum"] == 100
            assert tools["recall"].annotations.read_only_hint and not tools["remember"].annotations.read_only_hint

            for doc in (SLA_1, LUNCH, SLA_2):
                r = await call(c, "remember", doc)
                transcript.append(f"remember {doc['id']} ({doc['date']}): {text(r)}")
            assert r.structured_content["replaced"][0]["text"] == SLA_1["text"]  # says what it replaced
            assert "replaces sla (2023-01-10, Aisha Patel)" in text(r)

            for as_of, want in (("2023-03-01", SLA_1), ("2023-07-01", SLA_2)):
                r = await call(c, "recall", {"question": "what is the uptime SLA?", "as_of": as_of, "k": 2})
                transcript.append(f"recall as of {as_of}:\n{text(r)}")
                hits = r.structured_content["hits"]
                assert hits[0]["text"] == want["text"] and hits[0]["author"] == want["author"]
                mark = f", superseded on {SLA_2['date']} by sla ({SLA_2['author']})" if want is SLA_1 else ""  # replaced since
                assert text(r).startswith(f"[{want['date']}] {want['author']} (email, thread EV-1){mark}:\n{want['text']}")
                assert (hits[0]["superseded_by"] or {}).get("author") == (SLA_2["author"] if want is SLA_1 else None)
                assert {h["text"] for h in hits} & {SLA_1["text"], SLA_2["text"]} == {want["text"]}  # never both versions
                assert set(hits[0]["ranks"]) == set(hits[0]["leg_scores"]) == {"lexical", "tag", "vector"}
                assert sum(v for v in hits[0]["leg_scores"].values() if v) == pytest.approx(hits[0]["score"])
            r = await call(c, "recall", {"question": "uptime SLA", "as_of": "2022-12-31"})
            assert r.structured_content["hits"] == [] and "No memories" in text(r)  # before anything was said
            r = await call(c, "recall", {"question": "lunch", "authors": ["Aisha Patel"]})
            assert all(h["author"] == "Aisha Patel" for h in r.structured_content["hits"])

            r = await call(c, "history", {"id": "sla"})
            versions = r.structured_content["versions"]
            assert [v["text"] for v in versions] == [SLA_1["text"], SLA_2["text"]]
            assert versions[0]["valid_until"].startswith("2023-06-01") and versions[1]["valid_until"] is None
            r = await call(c, "get", {"id": "sla"})
            assert r.structured_content["memory"]["text"] == SLA_2["text"]

            msg = await refused(c, "recall", {"question": "SLA", "as_of": "last tuesday"}, "as_of")
            transcript.append(f"recall as_of='last tuesday': {msg}")
            await refused(c, "recall", {"question": "SLA", "k": 0}, "k")
            await refused(c, "recall", {"as_of": "2023-01-01"}, "question")
            await refused(c, "remember", {"text": "   "}, "text")
            await refused(c, "remember", {"text": "x", "date": "2023-02-30"}, "date")
            await refused(c, "remember", {"text": "x", "supersedes": "no-such-id"}, "supersedes")
            await refused(c, "get", {"id": "no-such-id"}, "id")
            await refused(c, "supersede", {"old": "sla", "new": "no-such-id"}, "new")
            await refused(c, "supersede", {"old": "lunch", "new": "sla", "effective": "2023-01-01"}, "effective")
            await refused(c, "nope", {}, "nope")

            # The server is still up, and the refused calls wrote nothing.
            r = await call(c, "recall", {"question": "team lunch", "k": 1})
            assert r.structured_content["hits"][0]["text"] == LUNCH["text"]
            r = await call(c, "supersede", {"old": "lunch", "new": "sla", "effective": "2023-07-01"})
            assert r.structured_content["old"]["valid_until"].startswith("2023-07-01")

    anyio.run(main)
    with mempp.Store.open(tmp_path / "org", read_only=True) as s:
        assert len(s) == 3 and s.stats()["supersessions"] == 2
    (tmp_path / "transcript.txt").write_text("\n".join(transcript) + "\n")
    out = os.environ.get("MEMPP_MCP_TRANSCRIPT")  # where a reader of this test wants the session
    if out:
        Path(out).write_text("\n\n".join(transcript) + "\n")


# --- two clients at once ----------------------------------------------------------------------------
@pytest.mark.slow
def test_two_stdio_servers_on_one_store_share_the_writer_lock(tmp_path):
    """Two clients, each with its own server process on the same store: their writes interleave
    (each waits for the other's lock), and each recalls what the other remembered."""
    store = tmp_path / "org"
    mempp.Store.open(store, embedder=mempp.HashEmbedder()).close()
    n = 6

    async def session(name: str, other: str, results: dict):
        async with client(server_params(store)) as c:
            async def one(i: int):
                await call(c, "remember", {"text": f"{name} note {i}: budget line {name}{i}", "author": name, "date": f"2024-01-{i + 1:02d}"})

            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(one, i)
            for _ in range(100):  # the other server's writes become visible as it commits them
                r = await call(c, "recall", {"question": "budget line", "authors": [other], "k": 20})
                if len(r.structured_content["hits"]) == n:
                    break
                await anyio.sleep(0.1)
            results[name] = r.structured_content["hits"]

    async def main():
        results: dict = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(session, "Ann Lee", "Bo Chen", results)
            tg.start_soon(session, "Bo Chen", "Ann Lee", results)
        return results

    results = anyio.run(main)
    assert {h["author"] for h in results["Ann Lee"]} == {"Bo Chen"} and len(results["Ann Lee"]) == n
    assert {h["author"] for h in results["Bo Chen"]} == {"Ann Lee"} and len(results["Bo Chen"]) == n
    with mempp.Store.open(store, read_only=True) as s:
        assert len(s) == 2 * n


def http_server(store: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """``mempp mcp STORE --http 127.0.0.1:0``: the process and the URL it prints once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mempp", "mcp", str(store), "--embedder", "hash", "--http", "127.0.0.1:0", *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    deadline = time.monotonic() + TIMEOUT
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        lines.append(line)
        if " at http://" in line:
            return proc, line.split(" at ", 1)[1].strip()
    proc.kill()
    raise AssertionError("the server printed no URL:\n" + "".join(lines))


@pytest.mark.slow
def test_http_two_clients_share_one_server(tmp_path):
    proc, url = http_server(tmp_path / "org")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def session(name: str, seen: dict):
            async with client(url) as c:
                assert {t.name for t in (await c.list_tools()).tools} >= {"remember", "recall"}
                for i in range(4):
                    await call(c, "remember", {"text": f"{name} decided item {i} of the rollout", "author": name, "date": f"2024-03-0{i + 1}"})
                seen[name] = c

        async def main():
            seen: dict = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(session, "Ann Lee", seen)
                tg.start_soon(session, "Bo Chen", seen)
            async with client(url) as c:  # a third client sees both clients' memories
                r = await call(c, "recall", {"question": "rollout item", "k": 20})
                r2 = await call(c, "recall", {"question": "rollout item", "k": 20, "as_of": "2024-03-02"})
            return r.structured_content["hits"], r2.structured_content["hits"]

        hits, early = anyio.run(main)
        assert len(hits) == 8 and {h["author"] for h in hits} == {"Ann Lee", "Bo Chen"}
        assert len(early) == 4 and all(h["date"] <= "2024-03-02T23:59:59" for h in early)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --- a server killed in the middle of a remember --------------------------------------------------
KILL_AT = ("after_manifest_fsync", "after_current_rename")  # the last step before CURRENT moves, the first after


@pytest.mark.slow
def test_server_killed_mid_remember_leaves_nothing_partial(tmp_path):
    """The server SIGKILLs itself at a step of the remember's commit (the engine's failpoints):
    killed before ``CURRENT`` moves, the store is as it was; after, the memory is there whole.
    Either way the store opens clean and the next writer writes at once (the lock died with it)."""
    first = {"id": "first", "text": "The first memory survives.", "author": "Ann Lee", "date": "2024-01-01"}
    doomed = {"id": "doomed", "text": "A memory written while the server dies. " * 40, "author": "Bo Chen", "date": "2024-01-02"}

    async def killed(step: str) -> None:
        store = tmp_path / step
        with mempp.Store.open(store, embedder=mempp.HashEmbedder()) as s:
            s.add([first])
        with pytest.raises(BaseException):  # the connection drops: no answer to that call
            async with client(server_params(store, env={"MEMPP_FAILPOINT": f"{step}:kill"})) as c:
                await c.call_tool("remember", doomed)

    async def main():
        async with anyio.create_task_group() as tg:
            for step in KILL_AT:
                tg.start_soon(killed, step)

    anyio.run(main)
    for step in KILL_AT:
        store = tmp_path / step
        with mempp.Store.open(store, read_only=True) as s:
            rows = [(s.get(i).key, s.get(i).text) for i in range(len(s))]
            assert not s.stats()["rebuilt"] and not s.stats()["skipped"]
        committed = step == "after_current_rename"
        assert rows == [("first", first["text"])] + ([("doomed", doomed["text"])] if committed else []), step
        tools = MemoryTools(store, wait=0)  # refuses at once if a lock were still held
        try:
            got = tools.remember(**doomed)
            assert got["stored"] is not committed and got["memory"]["text"] == doomed["text"]
            _, found = tools.recall("memory written while the server dies", k=1)
            assert found["hits"][0]["text"] == doomed["text"]
        finally:
            tools.close()


# --- the tools' logic in process (the SDK's in-memory client) ---------------------------------------
@pytest.fixture
def tools(tmp_path):
    t = MemoryTools(tmp_path / "org", embedder=mempp.HashEmbedder())
    yield t
    t.close()


def run_in_process(tools: MemoryTools, body):
    async def main():
        async with Client(build_server(tools)) as c:
            return await body(c)

    return anyio.run(main)


def test_remember_without_id_is_idempotent_and_dated_now(tools):
    async def body(c):
        a = (await call(c, "remember", {"text": "Standup  moves to 10am.", "author": "Ann Lee"})).structured_content
        b = (await call(c, "remember", {"text": "Standup moves to 10am.", "author": "Ann Lee"})).structured_content
        return a, b

    a, b = run_in_process(tools, body)
    assert a["stored"] and not b["stored"] and a["memory"]["doc_id"] == b["memory"]["doc_id"]
    assert a["memory"]["id"] == derived_id("Standup moves to 10am.", "Ann Lee")
    assert a["memory"]["date"][:4] >= "2025"  # now, not undated: a recall with as_of still finds it
    assert len(tools.reader) == 1


def test_remember_supersedes_reports_what_it_replaced(tools):
    async def body(c):
        await call(c, "remember", {"id": "p1", "text": "Per-diem is $60.", "author": "Helen Brandt", "date": "2023-01-01"})
        await call(c, "remember", {"id": "p2", "text": "Per-diem for London is $90.", "author": "Helen Brandt", "date": "2023-01-05"})
        r = await call(c, "remember", {"text": "Per-diem is $75 everywhere.", "author": "Helen Brandt", "date": "2023-05-01",
                                       "supersedes": ["p1", "p2"]})
        old = await call(c, "recall", {"question": "per-diem", "as_of": "2023-02-01"})
        new = await call(c, "recall", {"question": "per-diem", "as_of": "2023-06-01"})
        return r, old, new

    r, old, new = run_in_process(tools, body)
    assert sorted(m["id"] for m in r.structured_content["replaced"]) == ["p1", "p2"]
    assert "replaces p1 (2023-01-01, Helen Brandt), p2 (2023-01-05, Helen Brandt)" in text(r)
    assert {h["id"] for h in old.structured_content["hits"]} == {"p1", "p2"}
    assert [h["text"] for h in new.structured_content["hits"]] == ["Per-diem is $75 everywhere."]


def test_bad_arguments_are_tool_errors_naming_the_field(tools):
    cases = [
        ("remember", {"text": 42}, "text"),
        ("remember", {"text": "x", "author": ["a"]}, "author"),
        ("remember", {"text": "x", "id": "x", "supersedes": "x"}, "supersedes"),
        ("remember", {"text": "x", "supersedes": [""]}, "supersedes"),
        ("recall", {"question": " ", "k": 3}, "question"),
        ("recall", {"question": "x", "k": 101}, "k"),
        ("recall", {"question": "x", "k": "many"}, "k"),
        ("recall", {"question": "x", "authors": "Ann"}, "authors"),
        ("recall", {"question": "x", "as_of": "2023-99-01"}, "as_of"),
        ("history", {"id": "nobody"}, "id"),
        ("get", {}, "id"),
        ("supersede", {"old": "nobody", "new": "x"}, "old"),
    ]

    async def body(c):
        for tool, args, field in cases:
            await refused(c, tool, args, field)
        return (await call(c, "recall", {"question": "x"})).structured_content

    assert run_in_process(tools, body)["hits"] == []
    assert len(tools.reader) == 0  # nothing was written


def test_without_the_mcp_extra_mempp_works_and_mempp_mcp_says_how_to_install(tmp_path):
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import mempp, mempp.mcp_server\n"
        "from mempp.cli import main\n"
        f"sys.exit(main(['mcp', {str(tmp_path / 's')!r}, '--embedder', 'hash']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=TIMEOUT)
    assert proc.returncode == 1 and "pip install 'mempp[mcp]'" in proc.stderr, proc.stderr
    assert proc.stderr.startswith("mempp: error:")


def test_bad_or_taken_http_address_is_one_clear_error(tmp_path, capsys):
    import socket

    from mempp.cli import main

    assert main(["mcp", str(tmp_path / "s"), "--http", "localhost"]) == 1
    assert "expected HOST:PORT" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["mcp", str(tmp_path / "s"), "--http", f"127.0.0.1:{port}"]) == 1
    assert capsys.readouterr().err == f"mempp: error: --http 127.0.0.1:{port}: cannot listen there (Address already in use)\n"
    assert not (tmp_path / "s").exists()  # nothing was created
