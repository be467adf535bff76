"""Every code block and command line of the README runs, as written where it can.

- The two set-up lines: ``.ci/run`` runs exactly them (the first two lines of the first bash
  block) in a fresh virtual environment; here we check that it extracts exactly those two lines.
- The Python example runs as written and prints what its comment says.
- The command-line block runs line by line, as written, in a directory holding the files it names
  (``docs.jsonl``, ``questions.jsonl``) and with the real model.
- The quality and speed blocks name benchmarks that take minutes to hours at full size; they run
  here with the same commands on less: the hash embedder instead of the model, ``--n 2000
  --queries 20`` instead of 100,000 documents, a scratch ``--data`` folder; what changes is listed in
  ``REDUCED`` beside each command. Their figures are not checked (benchmarks never assert a time).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LOCOMO, ROOT, needs_locomo

README = ROOT / "README.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S)


def command_lines(block: str) -> list[str]:
    """The commands of a bash block, without their trailing comments."""
    return [re.sub(r"\s+# .*$", "", line).strip() for line in block.splitlines() if line.strip()]


def section_block(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    found = re.findall(r"```bash\n(.*?)```", text[start : end if end > 0 else None], re.S)
    assert len(found) == 1, title
    return found[0]


def run(line: str, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    # As a user types it, in a shell whose PATH finds this environment's python and mempp first.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PATH": path, **(env or {})}
    )
    assert proc.returncode == 0, f"{line}\nexit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def test_ci_runs_the_two_setup_lines_as_printed():
    first = command_lines(blocks("bash")[0])[:2]
    assert first == ["python3 -m pip install . && mempp demo", "python3 -m pip install -e '.[test]' && python3 -m pytest"]
    script = (ROOT / ".ci" / "run").read_text()
    awk = re.search(r"mapfile -t lines < <\((.*?)\)\n", script, re.S).group(1)
    got = subprocess.run(["bash", "-c", awk], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    assert got == first


@pytest.mark.model
def test_readme_python_example(tmp_path):
    code = blocks("python")[0]
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert out.getvalue() == "[2023-01-10] Aisha Patel, superseded on 2023-06-01 by sla-2 (Ben Ortiz):\nUptime SLA: 99.9%.\n"
    assert (tmp_path / "org.mempp" / "CURRENT").is_file()


DOCS = [
    {"id": "sla-1", "text": "Uptime SLA: 99.9%, approved by Aisha Patel.", "author": "Aisha Patel", "date": "2023-01-10"},
    {"id": "sla-2", "text": "SLA raised to 99.95%.", "author": "Ben Ortiz", "date": "2023-06-01", "supersedes": "sla-1"},
    {"id": "sla-3", "text": "SLA back to 99.9% for the legacy region.", "author": "Ben Ortiz", "date": "2023-12-01"},
    {"id": "travel-1", "text": "Travel per-diem is $75 a day.", "author": "Helen Brandt", "date": "2023-01-09"},
]


@pytest.mark.model
@pytest.mark.slow
def test_command_line_block_runs_as_written(tmp_path):
    # The block writes its own files (docs.jsonl, questions.jsonl) and runs as written in an empty directory.
    lines = command_lines(section_block("Command line"))
    from mempp.cli import COMMANDS

    documented = {x.split()[1] for x in lines if x.startswith("mempp ")}
    # eval and bench have their own sections; so have embed (it needs the ray extra and starts Ray) and mcp (a server)
    assert set(COMMANDS) - {"eval", "bench", "embed", "mcp"} <= documented, set(COMMANDS) - documented
    outputs = [(line, run(line, tmp_path).stdout) for line in lines]

    def said(prefix: str) -> str:
        return next(out for line, out in outputs if line.startswith(prefix))

    assert "sla-1" in said('mempp query org.mempp "who approved')  # as of 2023-03-01: the first SLA
    assert "Helen Brandt" in said('mempp query org.mempp "travel per-diem"')
    assert (tmp_path / "hits.arrow").is_file()
    assert "sla-2" in said("mempp get org.mempp sla-2") and "99.95%" in said("mempp get org.mempp sla-2")
    assert "99.9%" in said("mempp history org.mempp sla-1")
    assert "99.9%" in said('mempp query org.mempp "SLA?" --as-of 2023-03-01 --version 1')
    assert len(said("mempp versions org.mempp").strip().splitlines()) >= 2  # the add, the supersession
    assert [json.loads(x) for x in (tmp_path / "docs.jsonl").read_text().splitlines()] == DOCS  # the block's file is the one described
    assert "Helen Brandt" in said('mempp query org.mempp "travel per-diem" --author "helen brandt"')
    listed = said("mempp ls org.mempp --as-of 2023-03-01")
    assert "sla-1" in listed and "sla-2" not in listed
    assert "replaced_by" in said("mempp history org.mempp sla-1")
    assert "4 added" in said("mempp add copy.mempp") and "nothing embedded" in said("mempp add copy.mempp")
    assert "evidence" in said("mempp demo").lower() or said("mempp demo").count("Q:") >= 10
    assert "user:helen" in said("mempp members org.mempp group:finance") and "group:finance" in said("mempp readers org.mempp travel-1")
    assert "Helen Brandt" in said('mempp query org.mempp "travel per-diem?" --as user:helen')
    assert "Ben Ortiz  aka ben.ortiz@acme.com, bortiz  CTO (2023-05-01 to now)" in said("mempp people org.mempp")
    assert "authors named: Ben Ortiz" in said('mempp query org.mempp "what did the CTO raise?"')  # the role, through the directory


# Quality and speed commands at full size take minutes to hours; here they run on less.
REDUCED = [
    # (what the README says, what runs here)
    ("mempp eval ", None),  # + --embedder hash --quiet, on one LoCoMo conversation (below)
    ("--n 100000", "--n 2000 --queries 20"),
    ("--commits 10000", "--commits 60"),  # and --threads 1,2, a scratch --dir
    # mempp.bench.latency: one LoCoMo conversation, --queries 10; mempp bench: no peers (they need
    # their own python), a scratch --dir
    ("--data /tmp/q", "--data {tmp}/q --cache '' --embedder hash"),
    ("--corpus locomo-report --corpus org-s3 --corpus lme-dev", "--corpus locomo-report"),
]


def reduced(line: str, tmp: Path, locomo_small: Path) -> tuple[str, dict]:
    env: dict = {}
    for said, runs in REDUCED:
        if said in line and runs is not None:
            line = line.replace(said, runs.format(tmp=tmp))
    if line.startswith("mempp eval "):
        line = line.replace("../shared/data/locomo/", f"{locomo_small}/") + " --embedder hash --quiet"
    if "mempp.bench.latency" in line:
        line = line.replace("../shared/data/locomo/", f"{locomo_small}/") + " --queries 10"
    if "--peers ../shared/bench/peers" in line:
        line = line.replace("--peers ../shared/bench/peers", f"--dir {tmp}/bench")  # the peers need their own python
    if "mempp.bench.commits" in line:
        line = line.replace("--threads 1,4,16", "--threads 1,2") + f" --dir {tmp}/commits"
    return line, env


@pytest.fixture
def locomo_small(tmp_path):
    """One LoCoMo conversation (its documents and questions)."""
    out = tmp_path / "locomo"
    out.mkdir()
    docs = [json.loads(x) for x in (LOCOMO / "docs.jsonl").read_text().splitlines() if x.strip()]
    scope = docs[0].get("scope")
    (out / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs if d.get("scope") == scope))
    qs = [json.loads(x) for x in (LOCOMO / "questions.jsonl").read_text().splitlines() if x.strip()]
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs if q.get("scope") == scope))
    return out


@needs_locomo()
@pytest.mark.slow
@pytest.mark.model
@pytest.mark.parametrize("section", ["Quality", "Speed"])
def test_benchmark_blocks_run_on_less(tmp_path, locomo_small, section):
    lines = command_lines(section_block(section))
    assert lines
    cwd = ROOT  # the README's relative paths (../shared) are from the checkout
    for line in lines:
        small, env = reduced(line, tmp_path, locomo_small)
        assert "../shared/data/locomo/" not in small, small
        out = run(small, cwd, env)
        if line.endswith(" prepare"):
            assert any((tmp_path / "q").iterdir()), small  # it wrote the splits
        else:
            assert out.stdout.strip(), small  # a report


@pytest.mark.slow
@pytest.mark.model
def test_ray_block_runs_as_written(tmp_path):
    """The *Past one machine* block, line by line as written (local Ray, the real model)."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'mempp[ray]')")
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp_path / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "text": "uptime SLA"}) + "\n" + json.dumps({"id": "q2", "text": "uptime SLA", "as_of": "2023-03-01"}) + "\n"
    )
    import pyarrow as pa

    tables = []
    for line in command_lines(section_block("Past one machine (Ray)")):
        run(line, tmp_path)
        if "--out hits.arrow" in line:
            tables.append(pa.ipc.open_file(str(tmp_path / "hits.arrow")).read_all())
    assert (tmp_path / "docs.parquet").is_file() and len(tables) == 2
    assert tables[0].equals(tables[1]) and tables[0].num_rows > 0  # query-parallel and sharded: the same rows


# --- Agents: MCP and LangChain ---------------------------------------------------------------------------
AGENTS = "Agents: MCP and LangChain"


def section_python(title: str) -> list[str]:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start : end if end > 0 else None], re.S)


def printed(code: str) -> str:
    """What a block's ``print(...)  # OUTPUT`` lines say they print (``\\n`` a line break)."""
    return "".join(re.search(r"print\(.*\)\s+# (.*)$", line).group(1).replace("\\n", "\n") + "\n"
                   for line in code.splitlines() if line.strip().startswith("print("))


@pytest.mark.slow
def test_agents_commands_run_as_written(tmp_path):
    """``mempp mcp`` as the section writes it: over stdio it serves until its input closes; with
    ``--http`` (on a free port here instead of 8765) it prints its URL, and the SDK's client lists the tools."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'mempp[mcp]')")
    import anyio
    from mcp import Client

    lines = command_lines(section_block(AGENTS))
    assert [line.split()[:2] for line in lines] == [["mempp", "mcp"]] * 2 and "--http 127.0.0.1:8765" in lines[1]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    server = subprocess.Popen(["bash", "-c", "exec " + lines[1].replace("127.0.0.1:8765", "127.0.0.1:0")], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    proc = subprocess.run(["bash", "-c", lines[0]], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    try:
        line = server.stderr.readline()
        assert " at http://127.0.0.1:" in line, line + server.stderr.read()

        async def tools():
            async with Client(line.split(" at ", 1)[1].strip()) as c:
                return {t.name for t in (await c.list_tools()).tools}

        assert anyio.run(tools) == {"remember", "recall", "get", "history", "supersede"}
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.model
@pytest.mark.slow
def test_agents_python_examples_print_what_they_say(tmp_path, monkeypatch):
    """The section's two Python blocks run as written (the real model; the MCP example starts
    ``mempp mcp`` from PATH) and print what their comments say."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'mempp[mcp]')")
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install 'mempp[langchain]')")
    codes = section_python(AGENTS)
    assert len(codes) == 2 and "mcp" in codes[0] and "MemppRetriever" in codes[1]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for code in codes:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
        assert out.getvalue() == printed(code), code
