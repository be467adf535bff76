"""Writes tests/data/format1 and format1.expected.json; run by hand with the code of the format
being frozen (here commit b203efb, from before the durability work), packaged as ``mempp``:

    PYTHONPATH=<old tree as mempp>:tests python tests/data/make_format1.py
"""

import json
import shutil
from pathlib import Path

import mempp
from conftest import ORG

DATA = Path(__file__).parent / "format1"
QUERIES = ["uptime SLA", "lunch friday", "wiki page", "outage review"]  # keep in step with test_crash.py

shutil.rmtree(DATA, ignore_errors=True)
with mempp.Store.open(DATA, embedder=mempp.HashEmbedder(16)) as s:
    s.add(ORG[:2])
    s.add(ORG[2:])
    answers = [
        [(h.key, round(h.score, 9)) for h in s.query(q, k=3, as_of=as_of)] for q in QUERIES for as_of in (None, "2023-03-01")
    ]
(DATA.parent / "format1.expected.json").write_text(json.dumps(answers))
(DATA / "LOCK").unlink()
