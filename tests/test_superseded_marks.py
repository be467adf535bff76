"""Evidence that says when it was replaced: a hit that held at the as-of date but was superseded
since carries ``superseded_by`` (when, by which id, whose), in ``Hit``, ``to_dict``/JSON, the
CLI and ``format_evidence``; checked against the supersession events themselves."""

from __future__ import annotations

import json
import random

import mempp
from mempp.cli import main

DOCS = [
    {"id": "sla-1", "text": "Uptime SLA is 99.9% for every customer.", "author": "Ann Lee", "date": "2023-01-05", "channel": "email"},
    {"id": "sla-2", "text": "Uptime SLA is now 99.95% for every customer.", "author": "Ben Ortiz", "date": "2023-06-01",
     "supersedes": ["sla-1"]},
    {"id": "travel", "text": "Travel needs a manager's approval.", "author": "Cy Park", "date": "2023-02-01"},
]


def test_a_hit_replaced_since_its_as_of_says_when_and_by_whom(tmp_path, capsys):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        s.add(DOCS)
        then = s.query("uptime SLA", as_of="2023-03-01", k=1)[0]
        assert then.key == "sla-1"
        assert then.superseded_by == mempp.Replacement(on=then.valid_until, doc_id=1, key="sla-2", author="Ben Ortiz")
        assert then.superseded_by.on.date().isoformat() == "2023-06-01"
        evidence = mempp.format_evidence([then])
        assert evidence.splitlines()[0] == "[2023-01-05] Ann Lee (email), superseded on 2023-06-01 by sla-2 (Ben Ortiz):"
        assert then.to_dict()["superseded_by"] == {"on": "2023-06-01T00:00:00+00:00", "doc_id": 1, "key": "sla-2", "author": "Ben Ortiz"}
        now = s.query("uptime SLA", k=1)[0]
        assert now.key == "sla-2" and now.superseded_by is None and "superseded" not in mempp.format_evidence([now])
        assert s.get("sla-1").superseded_by.key == "sla-2" and s.get("travel").superseded_by is None
    assert main(["query", str(path), "uptime SLA", "--as-of", "2023-03-01", "--k", "1", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out)["hits"][0]
    assert hit["superseded_by"]["key"] == "sla-2" and hit["superseded_by"]["on"].startswith("2023-06-01")
    assert main(["query", str(path), "uptime SLA", "--as-of", "2023-03-01", "--k", "1"]) == 0
    assert "superseded on 2023-06-01 by sla-2 (Ben Ortiz)" in capsys.readouterr().out


def test_superseded_by_is_the_earliest_recorded_replacement(tmp_path):
    """Random histories of explicit supersessions and same-id revisions: every record's mark is
    the earliest event of ``replacements`` (ties to the lower doc id), dated its ``valid_until``."""
    rng = random.Random(7)
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        for batch in range(6):
            docs = []
            for i in range(8):
                key = f"k{rng.randrange(12)}"
                doc = {"id": key, "text": f"note {batch} {i} {key}", "author": f"A{rng.randrange(3)}",
                       "date": f"2023-{rng.randrange(1, 13):02d}-{rng.randrange(1, 28):02d}"}
                docs.append(doc)
            s.add(docs)
            held = [r for r in s.documents() if r.valid_until is None and r.key]
            for _ in range(2):
                old, new = rng.sample(held, 2)
                if old.key != new.key:
                    s.supersede(old.doc_id, new.doc_id, backdate=True)
                    held = [r for r in s.documents() if r.valid_until is None and r.key]
        marked = 0
        for r in s.documents():
            events = s.replacements(r.doc_id)
            if r.valid_until is None:
                assert r.superseded_by is None
                continue
            first = events[0]  # every replaced record has its event (a same-id revision's included)
            assert r.superseded_by is not None and r.superseded_by.doc_id == first["doc_id"], (r, events)
            assert r.superseded_by.on == r.valid_until and r.superseded_by.key == first["key"]
            assert r.superseded_by.author == s.get(first["doc_id"]).author
            marked += 1
        assert marked > 5
