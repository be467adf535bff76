"""Time travel by transaction time: ``Store.open(path, version=N)`` and ``as_known_at=``.

Event time (``query(as_of=...)``) and transaction time (which committed version) are
independent: "what did the record say on X, as the store knew it on Y".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

import mempp


def open_store(path, **kw):
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), **kw)


def valid_keys(store, as_of=None) -> set:
    """Every document valid at ``as_of`` (the vector leg scans all candidates)."""
    n = max(len(store), 1)
    return {(h.key, h.text) for h in store.query("sla", as_of=as_of, k=n, depth=n, legs=["vector"], reserve=False)}


@pytest.fixture
def history(tmp_path):
    """Three committed versions of one SLA record; returns the path and each version's committed_at."""
    path = tmp_path / "s"
    with open_store(path) as s:
        s.add([{"id": "sla", "text": "SLA is 99.9%", "author": "Aisha", "date": "2023-01-10"}])  # v1
        s.add([{"id": "sla", "text": "SLA is 99.95%", "author": "Ben", "date": "2023-06-01"}])  # v2: new version
        fix = s.add([{"id": "fix", "text": "Correction: SLA was 99.5% from February", "date": "2023-02-15"}])[0]
        s.supersede(0, fix, effective="2023-02-15")  # v4: the first version is retroactively replaced
        times = {v["version"]: v["committed_at"] for v in s.versions()}
    assert sorted(times) == [1, 2, 3, 4]
    return path, times


V1 = ("sla", "SLA is 99.9%")
V2 = ("sla", "SLA is 99.95%")
FIX = ("fix", "Correction: SLA was 99.5% from February")


def test_what_the_record_said_on_x_as_known_on_y(history):
    path, times = history
    expect = {  # (as_known_at version, as_of) -> valid documents
        (1, "2023-04-01"): {V1},
        (1, "2023-07-01"): {V1},
        (2, "2023-04-01"): {V1},
        (2, "2023-07-01"): {V2},
        (3, "2023-04-01"): {V1, FIX},  # the correction is stored but not yet linked
        (4, "2023-04-01"): {FIX},
        (4, "2023-01-31"): {V1},
        (4, "2023-07-01"): {V2, FIX},
        (4, None): {V2, FIX},
    }
    for (v, as_of), want in expect.items():
        with mempp.Store.open(path, as_known_at=times[v]) as old:
            assert old.version == v and old.read_only
            assert valid_keys(old, as_of) == want, (v, as_of)
        with mempp.Store.open(path, version=v) as same:
            assert valid_keys(same, as_of) == want


def test_as_known_at_picks_the_newest_version_committed_by_then(history):
    path, times = history
    at = {v: datetime.fromisoformat(t) for v, t in times.items()}
    assert at[1] <= at[2] <= at[3] <= at[4]
    one_us = timedelta(microseconds=1)
    for v in (2, 3, 4):
        if at[v] > at[v - 1]:  # just before version v was committed, the store knew v - 1
            with mempp.Store.open(path, as_known_at=at[v] - one_us) as s:
                assert s.version == v - 1
    # One date policy: naive means UTC, an offset is converted, a bare date is the end of that day.
    naive = at[2].astimezone(timezone.utc).replace(tzinfo=None)
    plus2 = at[2].astimezone(timezone(timedelta(hours=2)))
    for value in (naive, naive.isoformat(), plus2, plus2.isoformat(), at[2].isoformat().replace("+00:00", "Z")):
        with mempp.Store.open(path, as_known_at=value) as s:
            assert s.version == 2, value
    with mempp.Store.open(path, as_known_at=at[4].date().isoformat()) as s:
        assert s.version == 4
    with mempp.Store.open(path, as_known_at=at[4].date()) as s:
        assert s.version == 4
    with mempp.Store.open(path, as_known_at="9999-12-31") as s:
        assert s.version == 4


def test_pinned_versions_are_read_only_and_stay_pinned(history):
    path, times = history
    with mempp.Store.open(path, version=2) as old:
        assert [v["version"] for v in old.versions()] == [1, 2]  # its own history, with commit times
        assert [v["committed_at"] for v in old.versions()] == [times[1], times[2]]
        assert old.refresh() == 2 and old.version == 2
        with pytest.raises(mempp.StoreError, match="read-only"):
            old.add([{"text": "more"}])
        with pytest.raises(mempp.StoreError, match="read-only"):
            old.supersede("sla", "fix")
        assert old.get("sla").text == "SLA is 99.95%"
        assert [r.text for r in old.history("sla")] == ["SLA is 99.9%", "SLA is 99.95%"]
    with open_store(path) as now:
        assert [v["version"] for v in now.versions()] == [1, 2, 3, 4]
        assert now.get(0).valid_until is not None


def test_no_such_version(history, tmp_path):
    path, times = history
    with pytest.raises(mempp.StoreError, match="no version was committed"):
        mempp.Store.open(path, as_known_at="2000-01-01")
    with pytest.raises(mempp.StoreError, match="no committed version 5"):
        mempp.Store.open(path, version=5)
    with pytest.raises(mempp.StoreError, match="no committed version 0"):
        mempp.Store.open(path, version=0)
    with pytest.raises(mempp.ValidationError, match="as_known_at"):
        mempp.Store.open(path, as_known_at="yesterday-ish")
    with pytest.raises(mempp.ValidationError, match="version"):
        mempp.Store.open(path, version="2")
    with pytest.raises(mempp.ValidationError, match="not both"):
        mempp.Store.open(path, version=1, as_known_at=times[1])
    with pytest.raises(mempp.StoreError, match="no such store"):
        mempp.Store.open(tmp_path / "missing", as_known_at=times[1])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(mempp.StoreError, match="no commit"):
        mempp.Store.open(empty, as_known_at="2030-01-01")


def test_a_manifest_left_by_a_crashed_commit_is_not_a_version(history):
    """A manifest written but never published by CURRENT (crash before the rename) cannot be opened."""
    path, _ = history
    stray = json.loads((path / "manifests/00000004.json").read_text())
    stray["version"] = 5
    (path / "manifests/00000005.json").write_text(json.dumps(stray))
    with pytest.raises(mempp.StoreError, match="no committed version 5"):
        mempp.Store.open(path, version=5)
    with mempp.Store.open(path, as_known_at="9999-01-01") as s:
        assert s.version == 4
    with open_store(path) as s:
        assert s.version == 4


def test_a_copy_travels_too(history, tmp_path):
    path, times = history
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    with mempp.Store.open(copy, as_known_at=times[2]) as s:
        assert s.version == 2 and valid_keys(s, "2023-07-01") == {V2}


def test_cli_query_as_known_at(history):
    path, times = history

    def keys(*extra):
        out = subprocess.run(
            [sys.executable, "-m", "mempp", "query", str(path), "SLA", "--json", "--k", "5", "--legs", "vector", *extra],
            capture_output=True, text=True, timeout=300, check=True,
        ).stdout
        return sorted(h["text"] for h in json.loads(out)["hits"])

    assert keys("--as-of", "2023-04-01", "--as-known-at", times[2]) == ["SLA is 99.9%"]
    assert keys("--as-of", "2023-04-01", "--version", "4") == ["Correction: SLA was 99.5% from February"]
    proc = subprocess.run([sys.executable, "-m", "mempp", "query", str(path), "SLA", "--as-known-at", "1999-01-01"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "no version was committed" in proc.stderr
