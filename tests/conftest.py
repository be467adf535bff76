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
