"""Shared by the crash, fault and corruption tests: deterministic batches, an oracle check of a
store against the acknowledged batches, and a simulated disk that loses what was not fsynced.

The simulated disk (``DiskModel``) is installed with ``mempp.storage.fsutil.set_io_hook``: the
store's real code runs and really writes its files, and the model shadows every create, write,
fsync, rename, unlink, mkdir and directory fsync under the store directory. ``snapshot()`` copies
the model; ``materialize()`` writes out what a disk could hold after a power loss at that moment:
a file's unsynced tail is dropped or kept (or a prefix of it), a directory entry changed since
that directory's last fsync is the old or the new one.
"""

from __future__ import annotations

import copy
import os
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

import mempp
from mempp.storage import fsutil

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()
AUTHORS = ["Ann Lee", "Bo Chen", "Cy Diaz"]
PER_BATCH = 3


def batch(b: int, per: int = PER_BATCH, long: bool = False) -> list[dict]:
    """Batch ``b``: ``per`` documents with keys ``b{b}-{i}``; every 4th batch re-keys a document of batch b-2
    (a supersession), every batch brings new terms (a dictionary file)."""
    docs = []
    for i in range(per):
        words = [WORDS[(b * 7 + i * 3 + j) % len(WORDS)] for j in range(6)] + [f"term{b}x{i}"]
        if long and i == 0:
            words = words * 60  # over 200 words: window vectors when the store has a window stride
        docs.append(
            {"id": f"b{b}-{i}", "text": " ".join(words), "author": AUTHORS[(b + i) % 3], "date": f"2023-{1 + b % 12:02d}-{1 + i:02d}"}
        )
    if b >= 2 and b % 4 == 2:
        docs[-1] = dict(docs[-1], id=f"b{b - 2}-0", text=docs[-1]["text"] + " revised")
    return docs


ERASED = ("<erased>",)  # an erased document's row (it keeps its doc id; nothing of it is readable)


def expected_rows(batches: list[int], erased: tuple[str, ...] = (), **kw) -> list[tuple]:
    return [ERASED if d["id"] in erased else (d["id"], d["text"], d["author"], d["date"]) for b in batches for d in batch(b, **kw)]


def stored_rows(store: mempp.Store) -> list[tuple]:
    out = []
    erased = set(store.searcher().snapshot.erased.tolist())
    for i in range(len(store)):
        if i in erased:
            out.append(ERASED)
            continue
        r = store.get(i)
        out.append((r.key, r.text, r.author, r.date.strftime("%Y-%m-%d") if r.date else None))
    return out


def check_store(path: Path, acked: list[int], maybe: list[int] = (), extra_sups: int = 0, erased: tuple[str, ...] = (), **kw) -> str | None:
    """None if the store at ``path`` opens and holds exactly the acknowledged batches, in order,
    optionally followed by a prefix of ``maybe`` (unacknowledged batches, each whole), and the
    batches' supersessions plus ``extra_sups`` more; else what is wrong. ``erased``: keys whose
    documents (every version) are erased rows."""
    import warnings

    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            s = mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True)
        # No CURRENT yet (power lost in the first commit before its rename) reads the version whose
        # files are whole, if one is: its derived files may be torn (their fsync never completed)
        recovered = any(w.category is mempp.StoreRecoveredWarning for w in seen)
        with s:
            rows = stored_rows(s)
            stats = s.stats()
            sups = stats["supersessions"]
            for a in s.searcher().snapshot.ann:  # an index the version names must load: a crash must not lose or damage it
                a.wait()
            lost_ann = [f"{a.name}: {a.failed}" for a in s.searcher().snapshot.ann if a.failed is not None]
    except Exception as exc:  # noqa: BLE001 - any failure to open is a violation
        return f"does not open: {type(exc).__name__}: {exc}"
    if lost_ann:
        return f"ANN index lost: {lost_ann}"
    if (stats["rebuilt"] and not recovered) or stats["skipped"]:  # a crash must not damage files; rebuilding is for media damage
        return f"damaged files: rebuilt {stats['rebuilt']}, skipped {stats['skipped']}"
    for n in range(len(maybe) + 1):
        want = list(acked) + list(maybe[:n])
        if rows == expected_rows(want, erased, **kw):
            expect_sups = sum(1 for b in want if b >= 2 and b % 4 == 2) + extra_sups
            return None if sups == expect_sups else f"{sups} supersessions, expected {expect_sups}"
    keys = [r[0] for r in rows]
    return f"holds {len(rows)} rows {keys[:12]}..., acknowledged batches {acked}, maybe {list(maybe)}"


# --- the simulated disk ------------------------------------------------------------------------


@dataclass(eq=False)
class File:
    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""


@dataclass(eq=False)
class Dir:
    entries: dict = field(default_factory=dict)
    synced: dict = field(default_factory=dict)


class SimulatedCrash(BaseException):
    """Raised by the hook to stop the writer where the power went out."""


def site(op: str, rel: str) -> str:
    """The fsync call site of an operation, by the file it touches."""
    if op == "fsync_dir":
        return {"": "store_dir", "segments": "segments_dir", "manifests": "manifests_dir"}.get(rel, rel)
    name = rel.rsplit("/", 1)[-1]
    if name.startswith(".CURRENT.tmp"):
        return "current_tmp"
    if rel.startswith("manifests/"):
        return "manifest"
    return name.split(".")[1] if "." in name else name  # docs, post, terms, win, q8, dict, sup, ann


FSYNC_SITES = (
    "new_dirs", "docs", "post", "terms", "win", "q8", "dict", "sup", "ann", "manifest", "manifests_dir", "segments_dir", "current_tmp",
    "store_dir",
)


class DiskModel:
    """Shadows the store directory ``root`` (assumed durable when installed)."""

    def __init__(self, root: Path, disabled: frozenset[str] = frozenset()) -> None:
        self.root = Path(root)
        self.disabled = disabled  # fsync sites that do nothing (to show the checker catches it)
        self.tree = self._load(self.root)
        self.ops = 0
        self.on_op = None  # called before every operation with (op, rel)
        self.last_op = ("", "")
        self._lock = threading.RLock()  # a big commit writes files from two threads: one operation at a time

    def _load(self, path: Path) -> Dir:
        d = Dir()
        for p in path.iterdir():
            if p.is_dir():
                d.entries[p.name] = self._load(p)
            elif p.name != "LOCK":
                d.entries[p.name] = File(bytearray(p.read_bytes()), p.read_bytes())
        d.synced = dict(d.entries)
        return d

    def _lookup(self, rel: str) -> tuple[Dir, str]:
        parts = rel.split("/")
        d = self.tree
        for part in parts[:-1]:
            d = d.entries[part]
        return d, parts[-1]

    def __call__(self, op: str, path: Path, data: bytes | None = None, dst: Path | None = None):
        with self._lock:
            return self._apply(op, path, data, dst)

    def _apply(self, op: str, path: Path, data: bytes | None, dst: Path | None):
        try:
            rel = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None  # outside the store (the parent's fsync when a store is created)
        rel = "" if rel == "." else rel
        if self.on_op is not None:
            self.on_op(op, rel)
        self.ops += 1
        where = site(op, rel)
        if where == "store_dir" and self.last_op[0] == "mkdir":
            where = "new_dirs"  # the first commit's fsync of segments/ and manifests/ entries
        self.last_op = (op, rel)
        if op in ("fsync", "fsync_dir") and where in self.disabled:
            return fsutil.SKIP
        if op == "fsync_dir":
            d = self.tree if rel == "" else self._lookup(rel)[0].entries[self._lookup(rel)[1]]
            d.synced = dict(d.entries)
        else:
            parent, name = self._lookup(rel)
            if op == "create":
                parent.entries[name] = File()
            elif op == "mkdir":
                parent.entries[name] = Dir()
            elif op == "write":
                parent.entries[name].data += data
            elif op == "fsync":
                f = parent.entries[name]
                f.synced = bytes(f.data)
            elif op == "unlink":
                parent.entries.pop(name, None)
            elif op == "rename":
                dparent, dname = self._lookup(Path(dst).resolve().relative_to(self.root.resolve()).as_posix())
                dparent.entries[dname] = parent.entries.pop(name)
        return fsutil.SKIP if op in ("fsync", "fsync_dir") else None  # the model decides durability

    def snapshot(self) -> Dir:
        return copy.deepcopy(self.tree)

    @staticmethod
    def materialize(tree: Dir, out: Path, mode: str, rng: random.Random | None = None) -> None:
        """Write what the disk holds after a power loss: mode "lose" drops everything unsynced,
        "keep" keeps everything, "random" decides each entry and each file's tail at random."""
        out.mkdir(parents=True)
        for name in set(tree.entries) | set(tree.synced):
            cur, dur = tree.entries.get(name), tree.synced.get(name)
            node = cur if cur is dur or mode == "keep" else dur if mode == "lose" else rng.choice([cur, dur])
            if node is None:
                continue
            if isinstance(node, Dir):
                DiskModel.materialize(node, out / name, mode, rng)
                continue
            if mode == "lose":
                content = node.synced
            elif mode == "keep":
                content = bytes(node.data)
            else:
                content = bytes(node.data[: rng.randint(len(node.synced), len(node.data))])
            (out / name).write_bytes(content)


def stray_files(path: Path) -> list[str]:
    """Files in the store the current version does not need, and temporary files."""
    from mempp.storage import read_state

    state = read_state(path)
    keep = state.names() if state is not None else set()
    out = [p.name for p in path.iterdir() if ".tmp-" in p.name]
    for folder in ("segments", "manifests"):
        if (path / folder).is_dir():
            for p in (path / folder).iterdir():
                name = f"{folder}/{p.name}"
                if state is not None and state.format == 1 and folder == "manifests":  # format 1 keeps every version's
                    if p.name[:8].isdigit() and int(p.name[:8]) <= state.version:
                        continue
                if name not in keep:
                    out.append(name)
    return out


def long_run() -> bool:
    return os.environ.get("MEMPP_LONG") == "1"
