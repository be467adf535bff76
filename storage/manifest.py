"""Versions of a store: the version files, ``CURRENT``, and the :class:`State` a version describes.

A version's state is the list of live *units* (each a segment: the documents, postings, term
dictionary entries and supersession events of a run of consecutive commits), the ANN indexes,
the totals, and the history of every version (what time travel answers from).

Format 2 (written by this code). Each version is one small file, ``manifests/NNNNNNNN.json``:

- a **delta** names its predecessor (version and XXH3-64) and the one change it makes: a commit
  appends a unit (and/or an ANN index), a merge replaces a run of adjacent units by one. Its
  size is that of the change, whatever the size of the store;
- every ``CHECKPOINT_EVERY`` versions, a **checkpoint** holds the whole state instead, so a
  reader walks at most that many deltas back. The history in a checkpoint is kept short:
  every ``SEAL_HISTORY`` entries are sealed into an immutable file it only names.

``CURRENT`` names the newest version file and its XXH3-64, and is replaced atomically (temp
file, fsync, rename, fsync of the directory); that rename is the commit point. Every link is
checked: ``CURRENT`` → newest file → its predecessor → ... → the checkpoint.

Format 1 (stores written before): one manifest per version listing every commit's files; read
as it is, and rewritten as a format-2 checkpoint by the first commit of a newer writer.

Owns: version files, the pointer, the state and history. Must never import the engine.

Never imports: snapshot, writer, merge, mempp.store.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .aside import MANIFESTS, SEGMENTS
from .errors import CorruptStoreError, StoreError
from .files import CHECKSUM, FileRef, Vanished, write_file, xxh3_bytes
from .fsutil import close_all, failpoint, fsync_all, fsync_dir, fsync_dirs, sha256_bytes
from .fsutil import replace as fsutil_replace

FORMAT = 2
# A version that carries an access file (who may read which document) is written as format 3, so
# that a mempp which knows nothing of access refuses the store instead of showing every document.
ACCESS_FORMAT = 3
READS = (1, 2, 3)
CURRENT = "CURRENT"
CHECKPOINT_EVERY = 32  # versions between checkpoints: a reader reads at most this many deltas
SEAL_HISTORY = 256  # history entries a checkpoint carries before they are sealed into a file of their own


def version_name(version: int) -> str:
    return f"{MANIFESTS}/{version:08d}.json"


@dataclass
class Unit:
    """A live segment: the data committed by versions ``lo``..``hi`` (one commit, or a merge of
    adjacent ones). Documents ``[first_doc, first_doc + n_docs)``, supersession events
    ``[first_sup, first_sup + n_sup)`` of the log, dictionary terms ``[first_term, ...)``.
    Counts are None only in a format-1 store's units (the snapshot counts them when it loads)."""

    stem: str
    lo: int
    hi: int
    first_doc: int
    n_docs: int
    files: dict[str, FileRef]
    first_sup: int | None = None
    n_sup: int | None = None
    first_term: int | None = None
    n_terms: int | None = None
    length: int | None = None  # sum of the documents' BM25 lengths

    def to_json(self) -> dict:
        return {
            "stem": self.stem, "versions": [self.lo, self.hi], "first_doc": self.first_doc, "n_docs": self.n_docs,
            "first_sup": self.first_sup, "n_sup": self.n_sup, "first_term": self.first_term, "n_terms": self.n_terms,
            "length": self.length, "files": {k: f.to_json() for k, f in self.files.items()},
        }

    @classmethod
    def from_json(cls, d: dict) -> "Unit":
        lo, hi = d["versions"]
        return cls(
            d["stem"], int(lo), int(hi), int(d["first_doc"]), int(d["n_docs"]),
            {k: FileRef.from_json(f) for k, f in d["files"].items()},
            _opt(d.get("first_sup")), _opt(d.get("n_sup")), _opt(d.get("first_term")), _opt(d.get("n_terms")),
            _opt(d.get("length")),
        )


@dataclass
class Ann:
    """An ANN index over doc ids ``[first, first + n)``, published by ``version``."""

    version: int
    first: int
    n: int
    params: dict
    file: FileRef

    def to_json(self) -> dict:
        return {"version": self.version, "first": self.first, "n": self.n, "params": self.params, "file": self.file.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "Ann":
        return cls(int(d["version"]), int(d["first"]), int(d["n"]), dict(d.get("params", {})), FileRef.from_json(d["file"]))


@dataclass(frozen=True)
class Entry:
    """One version in the history: when it was committed, what kind of change, and the prefix of
    the store it holds (documents, supersession events, dictionary terms, total BM25 length, ANN
    indexes). Every earlier version is such a prefix: data is only ever appended, and merges
    join adjacent units, so time travel answers from the current units cut at these counts."""

    version: int
    committed_at: str
    kind: str  # "add", "supersede", "ann", "merge", "upgrade", "access", "repair", "salvage", "erase"
    n_docs: int
    n_sup: int | None
    n_terms: int | None
    total_length: int | None
    n_ann: int
    added: int = 0  # documents this version added

    def to_json(self) -> list:
        return [self.version, self.committed_at, self.kind, self.n_docs, self.n_sup, self.n_terms, self.total_length, self.n_ann, self.added]

    @classmethod
    def from_json(cls, d: list) -> "Entry":
        v, at, kind, n_docs, n_sup, n_terms, length, n_ann, added = d
        return cls(int(v), at, kind, int(n_docs), _opt(n_sup), _opt(n_terms), _opt(length), int(n_ann), int(added))


@dataclass
class State:
    """What one version of a store holds (see the module docstring)."""

    format: int
    version: int
    meta: dict  # dim, embedder, analyzer, index: fixed when the store is created
    units: list[Unit]
    anns: list[Ann]
    n_docs: int
    n_sup: int | None
    n_terms: int
    total_length: int
    sealed: list[FileRef] = field(default_factory=list)  # history files, oldest first
    recent: list[Entry] = field(default_factory=list)  # history after the sealed files, through this version
    digest: str = ""  # XXH3-64 (format 1: sha256) of this version's own file
    depth: int = 0  # deltas between this version and its checkpoint (0: it is one)
    chain: list[str] = field(default_factory=list)  # the version files from the checkpoint to this one
    legacy: dict | None = None  # the format-1 manifest this state was read from
    access: FileRef | None = None  # the access log: every reader and membership change so far (None: none ever)

    @classmethod
    def empty(cls, meta: dict) -> "State":
        return cls(FORMAT, 0, dict(meta), [], [], 0, 0, 0, 0)

    def history(self, store: Path) -> list[Entry]:
        """Every version's entry, oldest first (sealed files are read and checked)."""
        out: list[Entry] = []
        for ref in self.sealed:
            out.extend(_read_sealed(store, ref))
        return out + list(self.recent)

    def names(self) -> set[str]:
        """Every file this version needs: its units', ANN indexes', history files and version files."""
        out = {f.name for u in self.units for f in u.files.values()}
        out |= {a.file.name for a in self.anns}
        out |= {r.name for r in self.sealed}
        out |= set(self.chain)
        if self.access is not None:
            out.add(self.access.name)
        return out


def _opt(x) -> int | None:
    return None if x is None else int(x)


# --- reading ------------------------------------------------------------------------------------


def read_pointer(store: Path) -> tuple[int, str, str, str] | None:
    """(version, file name, checksum kind, digest) from ``CURRENT``, or None before the first commit."""
    cur = store / CURRENT
    try:
        raw = cur.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise CorruptStoreError(str(cur), "not a regular file") from None
    except OSError as exc:
        raise CorruptStoreError(str(cur), f"cannot read: {exc.strerror or exc}") from None
    try:
        pointer = json.loads(raw)
        name, version = pointer["manifest"], pointer["version"]
        kind = CHECKSUM if CHECKSUM in pointer else "sha256"
        digest = pointer[kind]
    except (ValueError, KeyError, TypeError):
        raise CorruptStoreError(str(cur), "unreadable pointer") from None
    if not isinstance(version, int) or not isinstance(name, str) or name != version_name(version):
        raise CorruptStoreError(str(cur), "pointer names an inconsistent manifest")
    return version, name, kind, digest


def read_state(store: Path) -> State | None:
    """The state of the version ``CURRENT`` names, or None for a store with no commit yet.

    A damaged ``CURRENT`` or version file raises :class:`CorruptStoreError` naming it. There is
    no silent fall back to an older version (that would hide the loss of acknowledged commits):
    ``recovery.py`` finds the newest whole version when ``CURRENT`` is lost, says so, and
    ``repair`` re-points the store to it.
    """
    pointer = read_pointer(store)
    if pointer is None:
        return None
    version, name, kind, digest = pointer
    return read_chain(store, name, kind, digest, f"named by {CURRENT}")


def read_version_file(store: Path, version: int) -> State:
    """The state of ``manifests/<version>.json`` read as the newest version, without ``CURRENT``
    (the file's own checksum is unknown then; every link below it is checked as usual)."""
    return read_chain(store, version_name(version), None, None, "found on disk")


def read_chain(store: Path, name: str, kind: str | None, digest: str | None, why: str) -> State:
    """The state of version file ``name`` (its checksum ``digest`` of ``kind``, None: unchecked),
    walking its chain of deltas back to a checkpoint, every link checked."""
    doc = _read_json(store, name, kind, digest, why)
    version = int(name.removeprefix(f"{MANIFESTS}/").removesuffix(".json"))
    if doc.get("version") != version:
        raise CorruptStoreError(str(store / (CURRENT if digest is not None else name)), "pointer and manifest disagree on the version")
    if doc.get("format") == 1 or "commits" in doc:
        try:
            return legacy_state(doc, digest or "")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptStoreError(str(store / name), f"malformed commit list ({type(exc).__name__}: {exc})") from None
    deltas = []
    names = [name]
    while doc.get("kind") == "delta":
        deltas.append(doc)
        prev = doc.get("prev") or {}
        try:
            pv, pd = int(prev["version"]), str(prev[CHECKSUM])
        except (KeyError, TypeError, ValueError):
            raise CorruptStoreError(str(store / names[-1]), "malformed link to the previous version") from None
        if len(deltas) > CHECKPOINT_EVERY * 4:
            raise CorruptStoreError(str(store / names[-1]), "chain of versions too long (no checkpoint)")
        pname = version_name(pv)
        doc = _read_json(store, pname, CHECKSUM, pd, f"named by {names[-1]}")
        if doc.get("version") != pv:
            raise CorruptStoreError(str(store / pname), "does not hold the version its successor names")
        names.append(pname)
    if doc.get("kind") != "checkpoint":
        raise CorruptStoreError(str(store / names[-1]), "not a version file")
    try:
        state = _checkpoint_state(doc)
        state.chain = [names[-1]]
        for delta, nm in zip(reversed(deltas), reversed(names[:-1])):
            state = apply(state, delta)
            state.chain.append(nm)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptStoreError(str(store / name), f"malformed version file ({type(exc).__name__}: {exc})") from None
    state.digest = digest if digest is not None else xxh3_bytes((store / name).read_bytes())
    return state


def _read_json(store: Path, name: str, kind: str | None, digest: str | None, why: str) -> dict:
    path = store / name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise Vanished(str(path), f"manifest {why} is missing") from None
    except IsADirectoryError:
        raise CorruptStoreError(str(path), "not a regular file") from None
    except OSError as exc:
        raise CorruptStoreError(str(path), f"cannot read: {exc.strerror or exc}") from None
    got = None if kind is None else xxh3_bytes(raw) if kind == CHECKSUM else sha256_bytes(raw)
    if got != digest:
        raise CorruptStoreError(str(path), f"checksum differs from the one {why.split()[-1]} records (one of the two is damaged)")
    try:
        doc = json.loads(raw)
    except ValueError:
        raise CorruptStoreError(str(path), "not JSON") from None
    if not isinstance(doc, dict):
        raise CorruptStoreError(str(path), "not a manifest")
    if digest is None and (self_check(doc) is False or (doc.get("format") in (FORMAT, ACCESS_FORMAT) and not set(doc) <= _KEYS)):
        raise CorruptStoreError(str(path), "its own checksum does not match its contents")
    if doc.get("format") not in READS:  # a newer format, or a store with access control read by a mempp without it
        raise StoreError(f"{store}: store format {doc.get('format')!r}; this mempp reads formats {list(READS)}")
    return doc


def _checkpoint_state(doc: dict) -> State:
    t = doc["totals"]
    hist = doc.get("history", {})
    return State(
        FORMAT, int(doc["version"]), dict(doc["meta"]), [Unit.from_json(u) for u in doc["units"]],
        [Ann.from_json(a) for a in doc["anns"]], int(t["n_docs"]), int(t["n_sup"]), int(t["n_terms"]), int(t["total_length"]),
        [FileRef.from_json(r) for r in hist.get("sealed", [])], [Entry.from_json(e) for e in hist.get("recent", [])],
        access=FileRef.from_json(doc["access"]) if doc.get("access") is not None else None,
    )


def _read_sealed(store: Path, ref: FileRef) -> list[Entry]:
    from .files import check_file

    path = check_file(store, ref, verify=True)
    try:
        return [Entry.from_json(e) for e in json.loads(path.read_bytes())]
    except (ValueError, TypeError):
        raise CorruptStoreError(str(path), "not a history file") from None


def apply(state: State, delta: dict) -> State:
    """The state after ``delta`` (a commit's or a merge's change)."""
    change = delta["change"]
    entry = Entry.from_json(delta["entry"])
    units = list(state.units)
    anns = list(state.anns)
    access = state.access
    op = change["op"]
    if op == "append":
        if change.get("access") is not None:
            access = FileRef.from_json(change["access"])
        if change.get("unit") is not None:
            units.append(Unit.from_json(change["unit"]))
        if change.get("ann") is not None:
            anns.append(Ann.from_json(change["ann"]))
    elif op == "merge":
        stems = list(change["replaced"])
        at = [u.stem for u in units].index(stems[0])
        if [u.stem for u in units[at : at + len(stems)]] != stems:
            raise ValueError("a merge replaces units that are not adjacent in this state")
        units[at : at + len(stems)] = [Unit.from_json(change["unit"])]
    elif op == "replace":  # a repair (derived files made again) or an erasure (files rewritten), under new names
        if change.get("access") is not None:
            access = FileRef.from_json(change["access"])
        for u in change.get("units", []):
            new = Unit.from_json(u)
            units[[x.stem for x in units].index(new.stem)] = new
        for a in change.get("anns", []):
            new_ann = Ann.from_json(a)
            anns[[(x.first, x.n) for x in anns].index((new_ann.first, new_ann.n))] = new_ann
    else:
        raise ValueError(f"unknown change {op!r}")
    return replace(
        state,
        version=entry.version,
        units=units,
        anns=anns,
        access=access,
        n_docs=entry.n_docs,
        n_sup=entry.n_sup,
        n_terms=entry.n_terms if entry.n_terms is not None else state.n_terms,
        total_length=entry.total_length if entry.total_length is not None else state.total_length,
        recent=state.recent + [entry],
        depth=state.depth + 1,
        chain=list(state.chain),
    )


def legacy_state(manifest: dict, digest: str = "") -> State:
    """A format-1 manifest as a state: one unit per commit, the history as the manifest lists it."""
    units, anns, entries = [], [], []
    n_docs = 0
    for c in manifest.get("commits", []):
        v = int(c["version"])
        files = {k: FileRef.from_json(f) for k, f in c["files"].items()}
        if "ann" in files:
            info = c["ann"]
            anns.append(Ann(v, int(info["first"]), int(info["n"]), dict(info.get("params", {})), files.pop("ann")))
        if files:
            first = int(c.get("first_doc", n_docs))
            units.append(Unit(f"{SEGMENTS}/{v:08d}", v, v, first, int(c.get("n_docs", 0)), files))
        n_docs += int(c.get("n_docs", 0))
        kind = "add" if c.get("n_docs") else "ann" if "ann" in c else "supersede"
        entries.append(Entry(v, c["committed_at"], kind, n_docs, None, None, None, len(anns), int(c.get("n_docs", 0))))
    meta = {k: manifest.get(k) for k in ("dim", "embedder", "analyzer", "index")}
    return State(
        1, int(manifest.get("version", 0)), meta, units, anns, int(manifest.get("n_docs", 0)), None,
        int(manifest.get("n_terms", 0)), int(manifest.get("total_length", 0)), [], entries, digest, legacy=manifest,
    )


def read_legacy_version(store: Path, version: int) -> State:
    """A format-1 store's earlier version, from its own manifest file (format-1 time travel)."""
    name = version_name(version)
    path = store / name
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorruptStoreError(str(path), "manifest of a committed version is missing") from None
    except ValueError:
        raise CorruptStoreError(str(path), "not JSON") from None
    if not isinstance(doc, dict) or doc.get("version") != version:
        raise CorruptStoreError(str(path), "does not match the committed history")
    return legacy_state(doc)


# --- writing ------------------------------------------------------------------------------------


def publish(store: Path, doc: dict, pending: list | None = None, steps: tuple[str, ...] = ()) -> str:
    """Write version file ``doc`` and make it current (the commit point); returns its XXH3-64.

    ``pending``: ``(descriptor, path)`` of the commit's new files, written and not yet fsynced
    (``files.write_table_file(..., pending=)``); ``steps``: their failpoints, in order. The
    version file and ``CURRENT``'s replacement are written too, then all are fsynced at once,
    then the two directories that hold new files, then ``CURRENT`` is renamed over and the store
    directory fsynced: a crash anywhere before the rename leaves the previous version current,
    and the rename happens only once everything the new version names is durable.
    """
    pending = pending if pending is not None else []
    version = int(doc["version"])
    name = version_name(version)
    data = sealed_json(doc)
    digest = xxh3_bytes(data)
    pointer = json.dumps({"version": version, "manifest": name, CHECKSUM: digest}).encode()
    tmp = f".{CURRENT}.tmp-{os.getpid()}"
    try:
        write_file(store, name, data, pending)
        write_file(store, tmp, pointer, pending)
        fsync_all(pending)
    finally:
        close_all(pending)
    for step in steps + ("after_manifest_fsync", "after_current_tmp_fsync"):
        failpoint(step)
    fsync_dirs([store / MANIFESTS, store / SEGMENTS])
    failpoint("after_manifests_dir_fsync")
    failpoint("after_segments_dir_fsync")
    # The rename is the commit point; the store directory's fsync makes it (and the first
    # commit's segments/ and manifests/ entries) durable before add() returns.
    fsutil_replace(store / tmp, store / CURRENT)
    failpoint("after_current_rename")
    fsync_dir(store)
    failpoint("after_store_dir_fsync")
    return digest


SELF = "self_xxh3"  # a version file's own checksum, of its other keys: checked when no CURRENT records one
# Every key a version file of format 2 may hold (a damaged name is damage even where no checksum is recorded)
_KEYS = {"format", "kind", "version", "prev", "change", "entry", "meta", "units", "anns", "totals", "history", "access", SELF}


def _canonical(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def sealed_json(doc: dict) -> bytes:
    """``doc`` as a version file's bytes, carrying its own checksum (:data:`SELF`) so that a
    version found on disk without ``CURRENT`` (recovery.py) can be checked too."""
    body = {k: v for k, v in doc.items() if k != SELF}
    return _canonical({**body, SELF: xxh3_bytes(_canonical(body))})


def self_check(doc: dict) -> bool | None:
    """Whether a version file's own checksum matches its other keys (None: it carries none)."""
    want = doc.get(SELF)
    if want is None:
        return None
    return want == xxh3_bytes(_canonical({k: v for k, v in doc.items() if k != SELF}))


def delta_doc(state: State, change: dict, entry: Entry) -> dict:
    # "meta" is the checkpoint's, repeated (a few hundred bytes): any one readable version file then
    # says what the store was built with, which a salvage from the segments needs (recovery.py)
    access = state.access is not None or change.get("access") is not None
    return {
        "format": ACCESS_FORMAT if access else FORMAT, "kind": "delta", "version": entry.version, "meta": state.meta,
        "prev": {"version": state.version, CHECKSUM: state.digest}, "change": change, "entry": entry.to_json(),
    }


def checkpoint_doc(state: State) -> dict:
    doc = {
        "format": FORMAT if state.access is None else ACCESS_FORMAT, "kind": "checkpoint", "version": state.version, "meta": state.meta,
        "units": [u.to_json() for u in state.units], "anns": [a.to_json() for a in state.anns],
        "totals": {"n_docs": state.n_docs, "n_sup": state.n_sup, "n_terms": state.n_terms, "total_length": state.total_length},
        "history": {"sealed": [r.to_json() for r in state.sealed], "recent": [e.to_json() for e in state.recent]},
    }
    if state.access is not None:
        doc["access"] = state.access.to_json()
    return doc


def seal_history(store: Path, state: State, pending: list) -> State:
    """Move the recent history into an immutable file of its own when it is long (before a checkpoint)."""
    if len(state.recent) < SEAL_HISTORY:
        return state
    first, last = state.recent[0].version, state.recent[-1].version
    data = json.dumps([e.to_json() for e in state.recent], separators=(",", ":")).encode()
    ref = write_file(store, f"{MANIFESTS}/history-{first:08d}-{last:08d}.json", data, pending)
    return replace(state, sealed=state.sealed + [ref], recent=[])


def commit_version(store: Path, state: State, change: dict, entry: Entry, pending: list | None = None, steps: tuple[str, ...] = ()) -> State:
    """Publish version ``entry.version``: ``change`` applied to ``state``, as a delta or, every
    ``CHECKPOINT_EVERY`` versions (and always for the first one, or from a format-1 store), a
    checkpoint. ``pending``/``steps``: the change's new files not yet fsynced (:func:`publish`).
    Returns the new state."""
    pending = pending if pending is not None else []
    try:
        delta = delta_doc(state, change, entry)
        new = apply(state, delta)
        new = replace(new, format=FORMAT, legacy=None)
        if state.format != FORMAT or state.version == 0 or new.depth >= CHECKPOINT_EVERY:
            new = seal_history(store, new, pending)
            new = replace(new, depth=0, chain=[version_name(new.version)])
            doc = checkpoint_doc(new)
        else:
            new.chain.append(version_name(new.version))
            doc = delta
    except BaseException:
        close_all(pending)
        raise
    new.digest = publish(store, doc, pending, steps)
    return new
