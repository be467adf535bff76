"""The damage matrix: every file and folder of a store, damaged in every way, meets every command.

A store with several versions, a merge, an ANN index, supersessions and a small last commit is
built once. Then, for each entry of it in turn (``CURRENT``, ``LOCK``, every version file, every
segment file, every derived file, ``segments/`` and ``manifests/``) and each damage (deleted,
emptied, truncated, one bit flipped, replaced by a directory, made unreadable; for a folder:
deleted, emptied, replaced by a file, made unreadable), a fresh copy is damaged and every command
a user runs is run against it, through ``mempp.cli.main`` as the shell runs it: open, stats,
query, get, history, versions, verify, add, supersede, merge, repair.

Pass, for every case:
- no command lets a Python exception escape (that would be a raw traceback); every error is one
  ``mempp: error:`` line, and when it comes from the damage it names the damaged entry;
- nothing is ever treated as an empty store: a write either is refused or keeps every document;
- after ``repair`` (with ``--rollback`` where it says a segment of the current version cannot
  be read), the store holds every document of the newest version whose files the damage left
  whole, unaltered, and answers every query as that version did; when no such version is left,
  ``repair`` salvages every document from the segments when only version files were hit, and
  otherwise says so (exit 1); every file is still in the store or in its ``lost+found/``.

The oracle of "the newest whole version" is independent of the code under test: each version
whose version file is on disk, with the set of files it needs (its chain of version files and
its segment files, derived ones excepted), recorded from the undamaged store.

Made unreadable (``chmod 000``) changes nothing for root, who runs CI here: those cases then pass
as undamaged ones, and the summary counts how many of them did.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

import mempp
from mempp import cli
from mempp.storage.manifest import read_version_file

from crashkit import batch

INDEX = mempp.IndexConfig(window_stride=100)
QUERIES = ["alpha bravo", "term3x1 revised", "kilo lima mike", "golf"]
AS_OF = (None, "2023-03-01")
DERIVED = (".post.arrow", ".terms.arrow", ".q8.arrow", ".ann.hnsw")
FILE_DAMAGE = ("delete", "empty", "truncate", "flip", "directory", "unreadable")
DIR_DAMAGE = ("delete", "empty", "file", "unreadable")


def _build(path: Path) -> None:
    """Versions 1-3: big commits (every file kind); 4: a merge of 1-3; 5: an ANN index; 6: a commit
    with supersessions; 7: supersessions alone; 8: a small commit (its segment alone)."""
    from mempp.storage import commits as writer

    old, writer.SMALL_UNIT = writer.SMALL_UNIT, 0
    try:
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), index=INDEX, merge="manual") as s:
            for b in range(3):
                s.add(batch(b, per=6, long=True))
            s.merge(force=True)
            s.build_ann(min_docs=1, m=8, ef_construction=40, workers=1)
            s.add(batch(6, per=6, long=True))  # re-keys b4-0: no such key, a new document; supersedes below
            s.supersede_many([("b0-1", "b6-1"), ("b1-2", "b6-2")])
    finally:
        writer.SMALL_UNIT = old
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), index=INDEX, merge="manual") as s:
        s.add(batch(7, per=2))


def _contents(s: mempp.Store) -> dict:
    docs = {}
    for i in range(len(s)):
        r = s.get(i)
        docs[r.key] = (r.doc_id, r.text, r.author, r.date.isoformat() if r.date else None)
    answers = [[(h.key, round(h.score, 12)) for h in s.query(q, k=5, as_of=a)] for q in QUERIES for a in AS_OF]
    return {"docs": docs, "answers": answers}


def _oracle(path: Path) -> dict:
    """For each version file on disk: the files it needs (derived ones excepted) and what it holds."""
    out = {}
    for name in sorted(os.listdir(path / "manifests")):
        if not name[:8].isdigit():
            continue
        v = int(name[:8])
        state = read_version_file(path, v)
        needs = set(state.chain)
        needs |= {f.name for u in state.units for f in u.files.values() if not f.name.endswith(DERIVED)}
        if not all((path / n).exists() for n in needs):
            continue  # its files were merged away: not a version that can be whole again
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), version=v) as s:
            out[v] = {"needs": needs, **_contents(s)}
    return out


def _damage(path: Path, rel: str, how: str) -> None:
    p = path / rel
    if how == "delete":
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    elif how == "empty":
        if p.is_dir():
            for q in p.iterdir():
                q.unlink()
        else:
            p.write_bytes(b"")
    elif how == "truncate":
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        data = bytearray(p.read_bytes())
        if data:
            data[len(data) // 2] ^= 0x10
        p.write_bytes(bytes(data))
    elif how == "directory":
        p.unlink()
        p.mkdir()
    elif how == "file":
        shutil.rmtree(p)
        p.write_bytes(b"not a folder")
    elif how == "unreadable":
        p.chmod(0)
    else:  # pragma: no cover
        raise ValueError(how)


def _run(args: list[str]) -> tuple[int, str, str]:
    """``mempp ARGS`` in this process: (exit status, stdout, stderr). An exception escaping
    ``main`` is what a user would see as a traceback: it fails the test where it happens."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("always")
        try:
            code = cli.main(args)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def _open_api(path: Path) -> str:
    """``Store.open`` as a program calls it: "ok", "recovered" or the error's type; any other exception escapes."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as s:
                s.query("alpha", k=3)
        except mempp.MemppError as exc:
            return type(exc).__name__
    return "recovered" if any(w.category is mempp.StoreRecoveredWarning for w in seen) else "ok"


def _entries(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    out = [("CURRENT", FILE_DAMAGE), ("LOCK", FILE_DAMAGE)]
    for d in ("manifests", "segments"):
        out += [(f"{d}/{n}", FILE_DAMAGE) for n in sorted(os.listdir(path / d))]
    out += [("manifests", DIR_DAMAGE), ("segments", DIR_DAMAGE)]
    return out


def _all_files(path: Path) -> dict[str, bytes]:
    """Every regular file under ``path`` by its name, lost+found's under the name it had."""
    out = {}
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            rel = p.relative_to(path).as_posix()
            if rel.startswith("lost+found/"):
                rel = rel.split("/", 2)[2]
                if rel == "NOTE.json":
                    continue
            with contextlib.suppress(OSError):
                out[rel] = p.read_bytes()
    return out


def _restore_modes(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        with contextlib.suppress(OSError):
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)


COMMANDS = ("open", "stats", "query", "get", "history", "versions", "verify", "add", "supersede", "merge", "repair")


@pytest.mark.slow
@pytest.mark.parametrize("damage", sorted(set(FILE_DAMAGE) | set(DIR_DAMAGE)))
def test_damage_matrix(tmp_path, damage):
    """One damage over every entry (a test per damage, so the workers share the matrix)."""
    pristine = tmp_path / "pristine"
    _build(pristine)
    oracle = _oracle(pristine)
    current = max(oracle)
    assert current == 8 and len(oracle) >= 4, sorted(oracle)
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps(d) + "\n" for d in batch(9, per=2)))
    root_reads_anyway = os.geteuid() == 0
    cases = 0
    failures: list[str] = []
    tally = {c: {"ok": 0, "refused": 0} for c in COMMANDS}
    outcomes = {"repaired to the current version": 0, "repaired to an earlier whole version": 0,
                "salvaged from the segments": 0, "no whole version left (repair says so)": 0, "unreadable ignored by root": 0}
    for rel, damages in _entries(pristine):
        for how in damages:
            if how != damage:
                continue
            cases += 1
            label = f"{rel} {how}"
            base = tmp_path / "case"
            if base.exists():
                _restore_modes(base)
                shutil.rmtree(base)
            work, reads = base / "w", base / "r"
            shutil.copytree(pristine, work)
            _damage(work, rel, how)
            shutil.copytree(work, reads, symlinks=True)
            # which version is the newest one the damage left whole (every file it needs untouched)
            intact = how == "unreadable" and root_reads_anyway

            def touched(v: int) -> bool:
                return not intact and any(n == rel or n.startswith(rel + "/") for n in oracle[v]["needs"])

            whole_left = [v for v in sorted(oracle, reverse=True) if not touched(v)]
            expect = whole_left[0] if whole_left else None
            before = _all_files(work)

            # --- every command, damaged store ---
            results = {"open": _open_api(work)}
            s = str(work)
            runs = {
                "stats": ["stats", s], "query": ["query", s, "alpha bravo", "--k", "3"], "get": ["get", s, "b1-1"],
                "history": ["history", s, "b0-1"], "versions": ["versions", s], "verify": ["verify", s],
                "add": ["add", s, str(more)], "supersede": ["supersede", s, "b7-0", "b7-1"], "merge": ["merge", s],
            }
            for name, args in runs.items():
                try:
                    code, out, err = _run(args)
                except Exception as exc:  # noqa: BLE001 - a traceback a user would see
                    failures.append(f"{label}: `mempp {name}` raised {type(exc).__name__}: {exc}")
                    continue
                results[name] = code
                tally[name]["ok" if code == 0 else "refused"] += 1
                if code != 0:
                    last = err.strip().splitlines()[-1] if err.strip() else ""
                    if not last.startswith("mempp: error:") and name != "verify":
                        failures.append(f"{label}: `mempp {name}` exit {code} without an error line: {err[-300:]!r}")
                    elif name not in ("verify",) and Path(rel).name not in err and "CURRENT" not in err:
                        failures.append(f"{label}: `mempp {name}` error does not name {rel}: {last}")
                if name == "verify" and code == 0 and not intact and not (rel == "LOCK") and how != "unreadable":
                    failures.append(f"{label}: `mempp verify` says clean")
            tally["open"]["ok" if results["open"] in ("ok", "recovered") else "refused"] += 1

            # a write that went through kept every document of the newest whole version
            if results.get("add") == 0 and expect is not None:
                try:
                    with mempp.Store.open(work, embedder=mempp.HashEmbedder(), read_only=True, on_corrupt="skip") as st:
                        keys = {st.get(i).key for i in range(len(st)) if st.stats()["unreadable"] == 0}
                except mempp.MemppError as exc:
                    keys = set()
                    failures.append(f"{label}: after a successful add the store does not open: {exc}")
                lost = set(oracle[expect]["docs"]) - keys
                if lost and keys:
                    failures.append(f"{label}: add succeeded and {len(lost)} documents of version {expect} are gone")

            # nothing committed is ever lost: every file is still there, or set aside
            after = _all_files(work)
            for name, data in before.items():
                if name not in after and not name.endswith(".tmp") and name != "LOCK":
                    if not (name.startswith("segments/") and name.endswith(DERIVED)):
                        failures.append(f"{label}: {name} gone after the commands")

            # --- repair, then the oracle, on the copy no write touched ---
            try:
                code, out, err = _run(["repair", str(reads)])
                if code != 0 and "--rollback" in out:
                    code, out, err = _run(["repair", str(reads), "--rollback"])
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{label}: `mempp repair` raised {type(exc).__name__}: {exc}")
                continue
            tally["repair"]["ok" if code == 0 else "refused"] += 1
            if intact:
                outcomes["unreadable ignored by root"] += 1
            salvageable = rel.startswith("manifests/") and how != "unreadable"
            if expect is None and salvageable:
                expect = current  # only version files were hit: repair salvages the segments, every document
                outcomes["salvaged from the segments"] += 1
            elif expect is None:
                outcomes["no whole version left (repair says so)"] += 1
                if code == 0:
                    failures.append(f"{label}: no whole version is left, but repair exits 0: {out}")
                continue
            if code != 0:
                failures.append(f"{label}: repair exit {code} though version {expect} is whole: {out} {err}")
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error", mempp.StoreRecoveredWarning)
                    with mempp.Store.open(reads, embedder=mempp.HashEmbedder(), read_only=True) as st:
                        got = _contents(st)
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{label}: after repair the store does not open: {type(exc).__name__}: {exc}")
                continue
            want = oracle[expect]
            if got["docs"] != want["docs"]:
                failures.append(f"{label}: after repair the documents differ from version {expect}'s")
            elif got["answers"] != want["answers"]:
                failures.append(f"{label}: after repair the answers differ from version {expect}'s")
            if not (salvageable and not whole_left):
                outcomes["repaired to the current version" if expect == current else "repaired to an earlier whole version"] += 1
    _restore_modes(tmp_path)
    lines = [f"damage matrix, {damage}: {cases} cases x {len(COMMANDS)} commands"]
    lines += [f"  {c:>9}: {tally[c]['ok']} ran, {tally[c]['refused']} refused with an error naming the damage" for c in COMMANDS]
    lines += [f"  {k}: {v}" for k, v in outcomes.items()]
    print("\n".join(lines))
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} failures)"
