"""T5: every file type truncated at many offsets and hit by single-bit flips.

Each damaged store is opened and queried in a worker subprocess (so a crash of the process would
show as a failed exit status, not take pytest down). Every damage must be detected before the
file is parsed: a ``CorruptStoreError`` whose message names the file, or, for the derived
postings, term-index and int8-vector files, a rebuild from the segment text with answers identical to the
undamaged store's.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mempp

from crashkit import batch, long_run

INDEX = mempp.IndexConfig(window_stride=100)
QUERIES = ["alpha bravo", "term2x1 revised", "kilo lima mike", "golf"]

WORKER = textwrap.dedent(
    """
    import json, os, sys, warnings
    import mempp
    store, cases_file = sys.argv[1], sys.argv[2]
    cases = json.load(open(cases_file))
    queries = json.loads(sys.argv[3])
    def answers(s):
        return [[(h.key, h.score) for h in s.query(q, k=5, as_of=a)] for q in queries for a in (None, "2023-02-01")]
    out = []
    original = {}
    for rel, kind, arg in cases:
        path = os.path.join(store, rel)
        data = original.setdefault(rel, open(path, "rb").read())
        if kind == "trunc":
            bad = data[:arg]
        else:
            b = bytearray(data); b[arg // 8] ^= 1 << (arg % 8); bad = bytes(b)
        tmp = path + ".damaged"
        open(tmp, "wb").write(bad); os.replace(tmp, path)  # a new inode: earlier mappings keep the old one
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                with mempp.Store.open(store, embedder=mempp.HashEmbedder(), read_only=True) as s:
                    out.append({"ok": True, "answers": answers(s), "rebuilt": s.stats()["rebuilt"], "version": s.version,
                                "recovered": [str(w.message) for w in seen if w.category is mempp.StoreRecoveredWarning]})
        except mempp.MemppError as exc:
            out.append({"ok": False, "type": type(exc).__name__, "message": str(exc)})
        open(tmp, "wb").write(data); os.replace(tmp, path)
    print(json.dumps(out))
    """
)


def _store(tmp_path: Path) -> Path:
    """Three commits of every file type (small commits write their segment alone, writer.SMALL_UNIT:
    here every commit writes postings, term index and int8 copy too, so that each is damaged)."""
    from mempp.storage import commits as writer

    path = tmp_path / "s"
    old, writer.SMALL_UNIT = writer.SMALL_UNIT, 0
    try:
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), index=INDEX, merge="manual") as s:
            for b in range(3):
                s.add(batch(b, long=True))
    finally:
        writer.SMALL_UNIT = old
    return path


def _files(path: Path) -> dict[str, str]:
    """One file of each type, by type."""
    out = {"manifest": "manifests/00000003.json", "CURRENT": "CURRENT"}
    for kind in ("docs", "post", "terms", "q8", "dict", "sup", "win"):
        out[kind] = f"segments/00000003.{kind}.arrow"
    assert all((path / rel).is_file() for rel in out.values()), sorted(p.name for p in (path / "segments").iterdir())
    return out


def _answers(s: mempp.Store) -> list:
    return [[(h.key, h.score) for h in s.query(q, k=5, as_of=a)] for q in QUERIES for a in (None, "2023-02-01")]


@pytest.mark.slow
def test_truncations_and_bit_flips_are_all_detected(tmp_path):
    path = _store(tmp_path)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as s:
        pristine = json.loads(json.dumps(_answers(s)))
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), version=2) as s:
        before = json.loads(json.dumps(_answers(s)))  # what the store answered at version 2
    rng = random.Random(11)
    flips = 5000 if long_run() else 250  # per file; CI's share of its 15 minutes
    truncs = 200 if long_run() else 20
    cases, types = [], []
    for kind, rel in _files(path).items():
        size = (path / rel).stat().st_size
        offsets = sorted({0, 1, size - 1, size // 2} | {rng.randrange(size) for _ in range(truncs)})[:truncs]
        cases += [(rel, "trunc", o) for o in offsets]
        cases += [(rel, "flip", rng.randrange(size * 8)) for _ in range(flips)]
        types += [(kind, "trunc")] * len(offsets) + [(kind, "flip")] * flips
    results = []
    step = 1500
    for i in range(0, len(cases), step):
        chunk = tmp_path / f"cases{i}.json"
        chunk.write_text(json.dumps(cases[i : i + step]))
        proc = subprocess.run(
            [sys.executable, "-c", WORKER, str(path), str(chunk), json.dumps(QUERIES)],
            capture_output=True, text=True, timeout=600, env=dict(os.environ),
        )
        assert proc.returncode == 0, f"worker died (status {proc.returncode}): {proc.stderr[-2000:]}"
        results += json.loads(proc.stdout)
    assert len(results) == len(cases)
    tally: dict = {}
    for (rel, how, arg), (kind, _), r in zip(cases, types, results):
        name = rel.rsplit("/", 1)[-1]
        if kind in ("post", "terms", "q8"):  # derived: rebuilt, same answers
            assert r["ok"] and r["answers"] == pristine and r["rebuilt"] == [rel], (kind, how, arg, r)
        elif kind in ("CURRENT", "manifest") and r["ok"]:
            # read at the newest whole version on disk, saying so: version 3 itself when only CURRENT
            # is damaged, version 2 when version 3's own file is; answers as that version gave them
            want = 3 if kind == "CURRENT" else 2
            assert r["version"] == want and r["answers"] == (pristine if want == 3 else before), (kind, how, arg, r)
            assert len(r["recovered"]) == 1 and name in r["recovered"][0], (kind, how, arg, r)
        else:
            assert not r["ok"] and r["type"] == "CorruptStoreError" and name in r["message"], (kind, how, arg, r)
        tally[(kind, how)] = tally.get((kind, how), 0) + 1
    report = ", ".join(f"{k}: {tally[(k, 'trunc')]} truncations + {tally[(k, 'flip')]} flips" for k in _files(path))
    print(f"T5: all {len(cases)} detected ({report})")


def test_damaged_segment_skipped_on_request(tmp_path):
    path = _store(tmp_path)
    seg = path / "segments/00000002.docs.arrow"
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 4
    seg.write_bytes(bytes(data))
    with pytest.raises(mempp.CorruptStoreError, match="00000002.docs.arrow"):
        mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), on_corrupt="skip") as s:
        assert s.stats()["skipped"] == [str(seg)]
        assert len(s) == 9
        keys = {h.key for q in QUERIES + ["term1x0", "term1x1 term1x2"] for h in s.query(q, k=9)}
        keys |= {h.key for h in s.query("alpha", k=9, as_of="2023-12-31")}
        assert keys and not any(k.startswith("b1-") for k in keys)
        assert s.get("b0-1").text == batch(0, long=True)[1]["text"]  # the other segments read normally
        with pytest.raises(mempp.StoreError, match="skipped"):
            s.add(batch(3))


@pytest.mark.parametrize("kind", ["sup", "win"])
def test_damaged_primary_files_skipped_on_request(tmp_path, kind):
    path = _store(tmp_path)
    f = path / f"segments/00000003.{kind}.arrow"
    f.write_bytes(f.read_bytes()[:-1] + b"\0")
    with pytest.raises(mempp.CorruptStoreError, match=f"00000003.{kind}.arrow"):
        mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True, on_corrupt="skip") as s:
        assert s.stats()["skipped"] == [str(f)]
        assert len(s.query("alpha", k=3)) == 3


def test_damaged_dictionary_fails_even_when_skipping(tmp_path):
    path = _store(tmp_path)
    f = path / "segments/00000001.dict.arrow"
    f.write_bytes(f.read_bytes()[:-3])
    with pytest.raises(mempp.CorruptStoreError, match="00000001.dict.arrow"):
        mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True, on_corrupt="skip")


@pytest.mark.parametrize("what", ["manifest", "segment", "previous manifest"])
def test_a_missing_file_of_the_current_version_fails_at_once(tmp_path, monkeypatch, what):
    """A file gone while ``CURRENT`` stays put is lost, not merged away by a writer that moved on:
    ``open`` and ``refresh`` raise at once naming it (they waited out the whole retry window, 60 s,
    when the manifest itself was the file gone), and the store opens again once it is back."""
    import threading

    from mempp import store as store_module
    from mempp.storage.manifest import read_pointer

    path = _store(tmp_path)
    reader = mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), index=INDEX) as w:
        w.add(batch(9, long=True))
    version, name = read_pointer(path)[:2]
    gone = {"manifest": path / name, "segment": path / f"segments/{version:08d}.docs.arrow",
            "previous manifest": path / f"manifests/{version - 1:08d}.json"}[what]
    if not gone.exists():
        pytest.skip(f"{gone.name} is not part of version {version} here")
    kept = gone.read_bytes()
    gone.unlink()
    monkeypatch.setattr(store_module, "OPEN_RETRY_SECONDS", 10**6)  # a retry would never end by itself

    errors: dict = {}

    def attempt(name, call):
        try:
            call()
        except mempp.CorruptStoreError as exc:
            errors[name] = str(exc)

    threads = [threading.Thread(target=attempt, args=("open", lambda: mempp.Store.open(path, read_only=True)), daemon=True),
               threading.Thread(target=attempt, args=("refresh", reader.refresh), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "open or refresh kept retrying while CURRENT stayed put"
    if what == "segment":
        assert set(errors) == {"open", "refresh"} and all(gone.name in e for e in errors.values()), errors
    else:  # a version file lost: open reads the newest whole version before it, saying so; refresh stays put
        assert set(errors) == {"refresh"} and gone.name in errors["refresh"], errors
        with pytest.warns(mempp.StoreRecoveredWarning, match=gone.name):
            s = mempp.Store.open(path, read_only=True, embedder=mempp.HashEmbedder())
        assert s.version == (version - 1 if what == "manifest" else version - 2)
        s.close()
    assert reader.version == version - 1  # the reader stays on the version it had
    gone.write_bytes(kept)
    assert reader.refresh() == version
    reader.close()
