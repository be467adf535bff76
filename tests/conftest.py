from __future__ import annotations

import os
from pathlib import Path

import pytest

import mempp

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEMPP_SHARED", ROOT.parent / "shared"))
LOCOMO = SHARED / "data" / "locomo"


def needs_locomo():
    return pytest.mark.skipif(
        not (LOCOMO / "docs.jsonl").is_file(),
        reason=f"LoCoMo data not found at {LOCOMO} (it lives in ../shared beside the checkout; set MEMPP_SHARED)",
    )


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels(tmp_path_factory):
    """Compile the kernels the write and read paths use once, in this process, before any test.

    numba caches each compiled kernel on disk, but only after compiling it. On a fresh clone the
    tests' child processes (the CLI, the concurrency workers, the kill loops' writers) would each
    compile what is not cached yet, and a writer killed while compiling leaves nothing cached for
    the next one. Cold, this takes about a minute here; warm, a second.
    """
    path = tmp_path_factory.mktemp("kernels") / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(dim=128)) as s:
        s.add([{"id": f"k{i}", "text": f"budget review item {i}", "date": "2024-01-02", "author": "Ann Lee"} for i in range(300)])
        s.add([{"id": "k0-new", "text": "budget review revised", "date": "2024-03-01", "author": "Ben Ortiz", "supersedes": "k0"}])
        s.query("budget review", k=3, as_of="2024-02-01")
        s.query_batch(["budget", "review"], k=3)


@pytest.fixture
def store(tmp_path):
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        yield s


ORG = [
    {"id": "sla-1", "text": "Decision: the uptime SLA is 99.9% for every plan.", "author": "Aisha Patel",
     "date": "2023-01-10", "thread": "EV-1", "channel": "email"},
    {"id": "lunch", "text": "Lunch on Friday at noon?", "author": "Ben Ortiz", "date": "2023-02-01", "channel": "chat"},
    {"id": "sla-2", "text": "Revised: the uptime SLA is now 99.95% after the outage review.", "author": "Ben Ortiz",
     "date": "2023-06-01", "thread": "EV-1", "channel": "email", "supersedes": "sla-1"},
    {"id": "undated", "text": "The SLA page lives in the wiki.", "author": "Carla Diaz"},
]
