"""When ``CURRENT`` or a file cannot be trusted: the whole versions on disk, verification, repair.

A store never treats a directory that holds version files or segments as empty, and never
deletes a file it cannot prove unreferenced. This module owns the three tools that keep that
promise when something on disk is lost or damaged:

- :func:`newest_whole` finds the newest version file on disk whose chain of version files reads
  and whose primary files (documents, window vectors, dictionary terms, supersession events)
  match their recorded size and checksum. Derived files (postings, term index, int8 copy, ANN
  index) may be damaged or missing in a whole version: they are made again from the primary ones.
- :func:`verify` checks ``CURRENT``, every version file of the current chain, the history files
  and every file the current version names (every earlier version is a prefix of it, so those
  files are every retained version's), and lists each problem by file.
- :func:`repair` takes the writer's lock, sets aside what is not what it should be (a directory
  where a file belongs, a symlink), re-points ``CURRENT`` to the newest whole version when
  ``CURRENT`` or a version file is lost or damaged, and rebuilds damaged or missing derived files
  as a new version. What it sets aside goes to ``lost+found/`` inside the store; nothing is deleted.

What is set aside goes through ``aside.set_aside``, as the writer's own clearing of what an
interrupted write left does (``writer.clean_strays``).

Owns: whole versions, verify, repair and salvage.

Never imports: mempp.store, mempp.writer.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)

from .aside import file_number, set_aside, strays
from .errors import CorruptStoreError, StoreError
from .files import CHECKSUM, Checks, Vanished, write_file, write_table_file, xxh3_bytes
from .fsutil import close_all, fsync_all, fsync_dir
from .fsutil import replace as fs_replace
from .manifest import CURRENT, MANIFESTS, SEGMENTS, Ann, Entry, State, Unit, commit_version, read_pointer, read_state
from .manifest import read_version_file, version_name

DERIVED = ("post", "index", "q8")  # made again from a segment's text and embeddings
_VERSION_FILE = re.compile(r"([0-9]{8})\.json")


def disk_versions(store: Path) -> list[int]:
    """The version numbers of the version files in ``manifests/``, newest first."""
    try:
        names = os.listdir(store / MANIFESTS)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted((int(m.group(1)) for n in names if (m := _VERSION_FILE.fullmatch(n))), reverse=True)


def holds_data(store: Path) -> bool:
    """Whether ``segments/`` or ``manifests/`` holds anything (a store that has written files)."""
    for d in (SEGMENTS, MANIFESTS):
        try:
            with os.scandir(store / d) as entries:
                if next(entries, None) is not None:
                    return True
        except (FileNotFoundError, NotADirectoryError):
            continue
    return False


@dataclass
class Problem:
    """One thing wrong with one file (``file`` relative to the store)."""

    file: str
    problem: str
    kind: str  # "pointer", "version", "damaged", "missing", "derived", "layout", "stray"

    @property
    def damage(self) -> bool:
        """Whether this makes the store damaged (a stray file left by an interrupted write does not)."""
        return self.kind != "stray"

    def to_json(self) -> dict:
        return {"file": self.file, "problem": self.problem, "kind": self.kind}


def _rel(store: Path, path: str) -> str:
    try:
        return Path(path).relative_to(store).as_posix()
    except ValueError:
        return path


def file_kinds(state: State) -> dict[str, str]:
    """Every file ``state`` names -> its kind (``docs``, ``post``, ..., ``ann``, ``history``)."""
    out = {f.name: k for u in state.units for k, f in u.files.items()}
    out.update({a.file.name: "ann" for a in state.anns})
    out.update({r.name: "history" for r in state.sealed})
    if state.access is not None:
        out[state.access.name] = "access"
    return out


def check_files(store: Path, state: State, seen: dict | None = None) -> list[Problem]:
    """Each file ``state`` names checked against its size and checksum. ``seen``: results of
    earlier checks by (name, checksum), kept and reused (versions share most of their files)."""
    seen = {} if seen is None else seen
    refs = [f for u in state.units for f in u.files.values()] + [a.file for a in state.anns] + list(state.sealed)
    refs += [state.access] if state.access is not None else []
    todo = [r for r in refs if (r.name, r.digest[1]) not in seen]
    with Checks(store, todo) as checks:
        failed = checks.failures()
    seen.update({(r.name, r.digest[1]): failed.get(r.name) for r in todo})
    kinds = file_kinds(state)
    out = []
    for name, exc in sorted({r.name: seen[(r.name, r.digest[1])] for r in refs}.items()):
        if exc is not None:
            kind = kinds.get(name)
            derived = kind in DERIVED or kind == "ann"
            missing = isinstance(exc, Vanished)
            label = "derived" if derived else "missing" if missing else "damaged"
            out.append(Problem(name, exc.reason + ("; made again from the segment by repair" if derived else ""), label))
    return out


def newest_whole(store: Path, below: int | None = None) -> tuple[State | None, list[Problem]]:
    """The newest version on disk (at most ``below``) that reads whole, and why each newer one did not."""
    why: list[Problem] = []
    seen: dict = {}
    for v in disk_versions(store):
        if below is not None and v > below:
            continue
        try:
            state = read_version_file(store, v)
        except CorruptStoreError as exc:
            why.append(Problem(_rel(store, exc.path), exc.reason, "version"))
            continue
        except StoreError as exc:
            why.append(Problem(version_name(v), str(exc), "version"))
            continue
        bad = [p for p in check_files(store, state, seen) if p.kind != "derived"]
        if not bad:
            return state, why
        why.extend(Problem(p.file, f"{p.problem} (named by version {v})", p.kind) for p in bad)
    return None, why


def _layout_problems(store: Path) -> list[Problem]:
    from .confine import check_layout

    try:
        check_layout(store)
    except CorruptStoreError as exc:
        return [Problem(_rel(store, exc.path), exc.reason, "layout")]
    return []


def verify(store: Path) -> dict:
    """Every file of every retained version checked; see the module docstring. A dict:
    ``clean`` (no damage), ``version`` (the one ``CURRENT`` names, or None), ``files`` (checked),
    ``problems`` (each ``{"file", "problem", "kind"}``) and ``newest_whole`` (the version a repair
    would re-point to, when the current one cannot be read)."""
    store = Path(store)
    problems = _layout_problems(store)
    state = None
    version = None
    try:
        pointer = read_pointer(store)
        if pointer is None:
            if holds_data(store):
                problems.append(Problem(CURRENT, "missing, while the store holds version files or segments", "pointer"))
        else:
            version = pointer[0]
            state = read_state(store)
    except CorruptStoreError as exc:
        rel = _rel(store, exc.path)
        problems.append(Problem(rel, exc.reason, "pointer" if rel == CURRENT else "version"))
    except StoreError as exc:
        problems.append(Problem(CURRENT, str(exc), "version"))
    files = 0
    if state is not None:
        problems += check_files(store, state)
        files = len(file_kinds(state)) + len(state.chain) + 1
        problems += [Problem(n, "not named by the current version (an interrupted write's, or an earlier version's)", "stray") for n in strays(store, state)]
    best = None
    if state is None or any(p.kind in ("damaged", "missing") for p in problems):
        found, _ = newest_whole(store)
        best = None if found is None else found.version
    return {
        "store": str(store),
        "clean": not any(p.damage for p in problems),
        "version": version,
        "files": files,
        "problems": [p.to_json() for p in problems],
        "newest_whole": best,
    }


def point_to(store: Path, state: State) -> None:
    """Make ``state``'s version current (``CURRENT`` replaced atomically, as a commit does)."""
    name = version_name(state.version)
    digest = xxh3_bytes((store / name).read_bytes())
    pointer = json.dumps({"version": state.version, "manifest": name, CHECKSUM: digest}).encode()
    tmp = f".{CURRENT}.tmp-{os.getpid()}"
    pending: list = []
    try:
        write_file(store, tmp, pointer, pending)
        fsync_all(pending)
    finally:
        close_all(pending)
    fs_replace(store / tmp, store / CURRENT)
    fsync_dir(store)


def _fix_layout(store: Path, actions: list[str]) -> None:
    """Set aside a store entry that is not of its kind (a directory where ``CURRENT`` or ``LOCK``
    belongs, a file where ``segments/`` or ``manifests/`` belongs, a symlink anywhere in the
    store's two levels): nothing is deleted, and the entry is then missing, as it reports."""
    out = []
    for name, want_dir in ((CURRENT, False), ("LOCK", False), (SEGMENTS, True), (MANIFESTS, True)):
        p = store / name
        if os.path.islink(p) or (p.exists() and p.is_dir() != want_dir):
            out.append((name, "a symlink" if os.path.islink(p) else "a directory" if p.is_dir() else "a file"))
    for top in (store, store / SEGMENTS, store / MANIFESTS):
        if top.is_dir() and not top.is_symlink():
            out += [(_rel(store, e.path), "a symlink") for e in os.scandir(top) if e.is_symlink() and _rel(store, e.path) not in dict(out)]
    for rel, what in out:
        moved = set_aside(store, [rel], f"{rel} was {what}")
        actions.append(f"set aside {rel} ({what} where the store keeps its own {'folder' if rel in (SEGMENTS, MANIFESTS) else 'file'}) in {moved}")


def repair(store: Path, *, rollback: bool = False, lock_timeout: float | None = None) -> dict:
    """Make the store whole again, as far as that is possible without its lost bytes; returns
    ``{"actions": [...], "version": v, "clean": bool, "problems": [...]}`` (after the repair).

    ``rollback``: when a primary file of the current version is damaged (its documents cannot
    be read), re-point the store to the newest whole version before it; without it, repair
    leaves the current version and says what it would do.
    """
    from .lock import WriterLock

    store = Path(store)
    if not store.is_dir():
        raise StoreError(f"{store}: no such store")
    actions: list[str] = []
    _fix_layout(store, actions)
    lock = WriterLock(store)
    lock.acquire(lock_timeout)
    try:
        state, why = _current_or_none(store)
        if state is None:
            if why is None:
                return _finish(store, actions)  # a new store: nothing committed, nothing to repair
            found, _ = newest_whole(store)
            if found is None:
                saved, what = salvage(store)
                if saved is None:
                    actions.append(f"no whole version on disk ({why.file}: {why.problem}), and no salvage: {what}")
                    return _finish(store, actions)
                actions.append(f"no whole version on disk ({why.file}: {why.problem}); {what}")
                return _finish(store, actions)
            point_to(store, found)
            actions.append(f"re-pointed CURRENT to version {found.version}, the newest whole version ({why.file}: {why.problem})")
            state = found
        bad = [p for p in check_files(store, state) if p.kind in ("damaged", "missing")]
        if bad:
            found, _ = newest_whole(store, below=state.version - 1)
            where = f"version {found.version}" if found is not None else "none"
            if not rollback or found is None:
                actions.append(
                    f"{bad[0].file}: {bad[0].problem}; its documents cannot be made again (restore the file from a backup; "
                    f"the newest whole version before it: {where}" + ("; `repair --rollback` re-points there)" if found else ")")
                )
                return _finish(store, actions)
            point_to(store, found)
            actions.append(f"rolled back to version {found.version}, the newest whole version ({bad[0].file}: {bad[0].problem})")
            state = found
        rebuilt = _rebuild_derived(store, state)
        if rebuilt:
            actions.append(rebuilt)
    finally:
        lock.release()
    return _finish(store, actions)


_SEGMENT_FILE = re.compile(r"(m?[0-9]{8}(?:-[0-9]{8})?)(?:\.r([0-9]{8}))?\.(docs|post|terms|q8|dict|sup|win)\.arrow")
_KIND = {"terms": "index"}  # file suffix -> the unit's key for it
PRIMARY = ("docs", "win", "dict", "sup")
_ACCESS_FILE = re.compile(r"[0-9]{8}\.access\.arrow")


def salvage(store: Path) -> tuple[State | None, str]:
    """A new checkpoint made from the segment files on disk, for a store no version file of
    which reads whole (a damaged or lost version file in every chain). (state, what was done)
    or (None, why not).

    It needs what the store was built with (any one readable version file says so), and every
    segment that a readable version file counted: the units are the segment files' own (a
    merge's where one covers a run of commits), in the order of the versions that wrote them,
    each read and checked as Arrow, their documents numbered without a gap, and at least as many
    documents, dictionary terms and supersessions as the newest readable version file recorded.
    Derived files are left out (the store makes them again in memory; ``mempp merge --force``
    writes them again); ANN indexes too (``build_ann``). Versions before it keep one history entry
    per unit, so time travel stops at unit boundaries.
    """
    from .arrowio import map_table
    from .files import FileRef, xxh3_file
    from .manifest import ACCESS_FORMAT, FORMAT, checkpoint_doc, publish, self_check

    meta, floor, restricted = None, (0, 0, 0), False
    for v in disk_versions(store):
        try:
            doc = json.loads((store / version_name(v)).read_bytes())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or self_check(doc) is False or doc.get("format") not in (FORMAT, ACCESS_FORMAT):
            continue
        restricted |= doc.get("format") == ACCESS_FORMAT
        if meta is None and isinstance(doc.get("meta"), dict):
            meta = doc["meta"]
        try:
            e = Entry.from_json(doc["entry"]) if "entry" in doc else None
            t = doc.get("totals") or {}
            counts = (e.n_docs, e.n_sup or 0, e.n_terms or 0) if e else (int(t["n_docs"]), int(t["n_sup"]), int(t["n_terms"]))
            floor = max(floor, counts)
        except (KeyError, TypeError, ValueError):
            continue
    if meta is None:
        return None, "no readable version file says what the store was built with"
    found: dict[str, dict[str, tuple[int, str]]] = {}
    for name in sorted(os.listdir(store / SEGMENTS)) if (store / SEGMENTS).is_dir() else []:
        m = _SEGMENT_FILE.fullmatch(name)
        if m:
            stem, rev, kind = m.group(1), int(m.group(2) or 0), _KIND.get(m.group(3), m.group(3))
            if kind in PRIMARY and (kind not in found.get(stem, {}) or rev > found[stem][kind][0]):
                found.setdefault(stem, {})[kind] = (rev, f"{SEGMENTS}/{name}")
    spans = sorted(((int(st.lstrip("m")[:8]), int(st[-8:]), st) for st in found), key=lambda x: (x[0], -x[1]))
    units: list[Unit] = []
    entries: list[Entry] = []
    n_docs = n_sup = n_terms = length = last = 0
    for lo, hi, stem in spans:
        if lo <= last:
            continue  # a run a merge covers: its own files were set aside or are leftovers
        files = {k: FileRef(n, (store / n).stat().st_size, xxh3=xxh3_file(store / n)) for k, (_, n) in found[stem].items()}
        try:
            tables = {k: map_table(store / f.name) for k, f in files.items()}
            for t in tables.values():
                t.validate(full=True)
        except (OSError, pa.ArrowException) as exc:
            return None, f"{stem}: a segment file does not read ({exc})"
        docs = tables.get("docs")
        k_docs = 0 if docs is None else docs.num_rows
        if docs is not None and k_docs and int(docs.column("doc_id")[0].as_py()) != n_docs:
            return None, f"{files['docs'].name}: its documents start at {docs.column('doc_id')[0].as_py()}, not {n_docs} (a segment is missing)"
        k_len = 0 if docs is None else int(pa.compute.sum(docs.column("length")).as_py() or 0)
        k_sup = 0 if "sup" not in tables else tables["sup"].num_rows
        k_terms = 0 if "dict" not in tables else tables["dict"].num_rows
        units.append(Unit(f"{SEGMENTS}/{stem}", lo, hi, n_docs, k_docs, files, n_sup, k_sup, n_terms, k_terms, k_len))
        n_docs, n_sup, n_terms, length, last = n_docs + k_docs, n_sup + k_sup, n_terms + k_terms, length + k_len, hi
        when = "1970-01-01T00:00:00+00:00"
        if docs is not None and k_docs:
            at = pa.compute.max(docs.column("ingested_at")).as_py()
            when = at.replace(tzinfo=timezone.utc).isoformat() if at is not None else when
        entries.append(Entry(hi, when, "add" if k_docs else "supersede", n_docs, n_sup, n_terms, length, 0, k_docs))
    if (n_docs, n_sup, n_terms) < floor or n_docs < floor[0] or n_sup < floor[1] or n_terms < floor[2]:
        return None, (f"the segments on disk hold {n_docs} documents, {n_sup} supersessions and {n_terms} terms; a version "
                      f"file recorded {floor[0]}, {floor[1]} and {floor[2]}: a segment is lost")
    # The access log is whole in each of its files: the newest on disk is every change. A store
    # whose version files had one is never salvaged without it (its documents would read as everyone's).
    logs = sorted(n for n in os.listdir(store / SEGMENTS) if _ACCESS_FILE.fullmatch(n)) if (store / SEGMENTS).is_dir() else []
    access = None
    if logs:
        name = f"{SEGMENTS}/{logs[-1]}"
        access = FileRef(name, (store / name).stat().st_size, xxh3=xxh3_file(store / name))
        try:
            map_table(store / name).validate(full=True)
        except (OSError, pa.ArrowException) as exc:
            return None, f"{name}: the access log does not read ({exc})"
    elif restricted:
        return None, "a version file records who may read which document, and no access log is on disk"
    version = max([last, *disk_versions(store), *(file_number(n) for n in strays(store, None))]) + 1
    from .commits import now_iso

    entries.append(Entry(version, now_iso(), "salvage", n_docs, n_sup, n_terms, length, 0, 0))
    state = State(FORMAT, version, dict(meta), units, [], n_docs, n_sup, n_terms, length, [], entries,
                  chain=[version_name(version)], access=access)
    state.digest = publish(store, checkpoint_doc(state))
    old = [f"{MANIFESTS}/{n}" for n in os.listdir(store / MANIFESTS) if f"{MANIFESTS}/{n}" != state.chain[0]]
    moved = set_aside(store, old, f"version files replaced by version {version}, salvaged from the segments")
    return state, (f"salvaged version {version} from {len(units)} segments ({n_docs} documents, {n_sup} supersessions)"
                   + (f"; the old version files set aside in {moved}" if moved else ""))


def _current_or_none(store: Path) -> tuple[State | None, Problem | None]:
    """The current state, or (None, why it cannot be read); (None, None) for a store with no commit."""
    try:
        state = read_state(store)
    except CorruptStoreError as exc:
        return None, Problem(_rel(store, exc.path), exc.reason, "version")
    if state is None and holds_data(store):
        return None, Problem(CURRENT, "missing", "pointer")
    return state, None


def _finish(store: Path, actions: list[str]) -> dict:
    report = verify(store)
    return {"actions": actions or ["nothing to repair"], **report}


def _rebuild_derived(store: Path, state: State) -> str | None:
    """Make damaged or missing postings, term indexes, int8 copies and ANN indexes again from
    the segments, under new names, and publish them as a new version (kind ``repair``)."""
    from .snapshot import Snapshot
    from .commits import now_iso, prepare_dirs, q8_table

    problems = {p.file for p in check_files(store, state) if p.kind == "derived"}
    if not problems:
        return None
    version = max(state.version, max(disk_versions(store), default=0), max((file_number(n) for n in strays(store, state)), default=0)) + 1
    snap = Snapshot(store, state)  # makes the damaged derived files again, in memory
    by_doc = {e.segment.name: e for e in snap.segments}
    pending: list = []
    units, anns, names = [], [], []
    try:
        prepare_dirs(store)
        for u in state.units:
            hit = [k for k in DERIVED if k in u.files and u.files[k].name in problems]
            if not hit:
                continue
            entry = by_doc[u.files["docs"].name]
            files = dict(u.files)
            if "post" in hit or "index" in hit:
                post, index = entry.postings.tables()
                files["post"] = write_table_file(store, f"{u.stem}.r{version:08d}.post.arrow", post, pending)
                files["index"] = write_table_file(store, f"{u.stem}.r{version:08d}.terms.arrow", index, pending)
            if "q8" in hit:
                from mempp.kernels import quantize_rows

                emb = np.ascontiguousarray(entry.segment.embeddings, dtype=np.float32)
                q8, scale = np.empty(emb.shape, dtype=np.int8), np.empty(len(emb), dtype=np.float32)
                quantize_rows(emb, q8, scale)
                files["q8"] = write_table_file(store, f"{u.stem}.r{version:08d}.q8.arrow", q8_table(q8, scale, entry.segment.dates), pending)
            names += [u.files[k].name for k in hit]
            units.append(Unit(u.stem, u.lo, u.hi, u.first_doc, u.n_docs, files, u.first_sup, u.n_sup, u.first_term, u.n_terms, u.length))
        for a in state.anns:
            if a.file.name not in problems:
                continue
            from .ann import build, to_bytes

            parts = [e.segment.embeddings[max(0, a.first - e.base): max(0, a.first + a.n - e.base)] for e in snap.segments
                     if e.base < a.first + a.n and e.base + e.segment.n > a.first]
            index = build(parts, a.first, m=a.params.get("M", 16), ef_construction=a.params.get("ef_construction", 200))
            data = to_bytes(index, store / f".ann-repair.tmp-{os.getpid()}")
            ref = write_file(store, f"{SEGMENTS}/{version:08d}.a{a.version:08d}.ann.hnsw", data, pending)
            anns.append(Ann(a.version, a.first, a.n, dict(a.params), ref))
            names.append(a.file.name)
    except BaseException:
        close_all(pending)
        raise
    change = {"op": "replace", "units": [u.to_json() for u in units], "anns": [a.to_json() for a in anns]}
    entry = Entry(version, now_iso(), "repair", state.n_docs, state.n_sup, state.n_terms, state.total_length, len(state.anns), 0)
    commit_version(store, state, change, entry, pending)
    moved = set_aside(store, [n for n in names if os.path.lexists(store / n)], "damaged derived files, made again by repair")
    return f"made again {', '.join(sorted(names))} as version {version}" + (f" (the damaged ones set aside in {moved})" if moved else "")


__all__ = [
    "Problem", "check_files", "disk_versions", "holds_data", "newest_whole", "point_to",
    "repair", "salvage", "verify",
]
