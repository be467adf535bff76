"""Who may read which document: principals, reader lists, groups and the store's access log (docs/DESIGN.md §8).

A document may carry ``readers``: principals (``user:NAME``, ``group:NAME``) of whom at least
one must be the reader, or a group the reader belongs to (groups may hold groups); absent or
None, everyone may read it. Every change (a new document's readers, ``set_readers``,
``add_members``, ``remove_members``) is an event of the store's access log, committed like any
other write (``storage/commits.py``: ``ACCESS_SCHEMA``; the newest version names the whole log).
Permissions are always the newest version's, whatever version or date a read asks about.

Owns the principal syntax (:func:`check_principal`, :func:`check_readers`, :data:`ADMIN`), the
fold of the log into the permissions of one version (:class:`Access`: each document's readers,
each group's members, who may read what, each document's reader periods) and the events a change
appends (:meth:`Access.appended`). Reads the log's file through ``mempp.storage``; writes nothing.

Never imports: store, searcher, writer, planner, cli, onnxruntime.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from mempp.storage import ACCESS_SCHEMA
from mempp.storage.arrowio import map_table
from mempp.storage.files import FileRef, check_file

from .dates import from_us
from .errors import AccessDenied, DocumentNotFound, ValidationError
from .people import name_key

_PRINCIPAL = re.compile(r"(user|group):([^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?)")
MAX_PRINCIPAL_CHARS = 256


class _Admin:
    """The principal that reads every document (``mempp.ADMIN``; ``--as admin`` on the command line)."""

    _one: "_Admin | None" = None

    def __new__(cls) -> "_Admin":  # one object, also where a copy is unpickled (a Ray worker): ``is ADMIN`` holds
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __repr__(self) -> str:
        return "mempp.ADMIN"



ADMIN = _Admin()


def check_principal(value: Any, field: str = "principal", record: int | None = None, key: str | None = None) -> Any:
    """``value`` if it is :data:`ADMIN` or a well-formed ``user:NAME`` / ``group:NAME``; else a
    :class:`ValidationError` naming ``field`` (and the record)."""
    if value is ADMIN:
        return value
    if not isinstance(value, str) or len(value) > MAX_PRINCIPAL_CHARS or not _PRINCIPAL.fullmatch(value):
        raise ValidationError(
            f"expected 'user:NAME' or 'group:NAME' (a name without control characters or surrounding spaces), got {value!r}",
            field=field, record=record, key=key,
        )
    return value


def principal_arg(text: str | None, field: str = "--as") -> Any:
    """A principal as the command line gives it: None, ``admin`` for :data:`ADMIN`, or a checked
    ``user:NAME`` / ``group:NAME`` (an error names ``field``)."""
    if text is None:
        return None
    return ADMIN if text == "admin" else check_principal(text, field)


def check_readers(value: Any, field: str = "readers", record: int | None = None, key: str | None = None) -> tuple[str, ...] | None:
    """A document's readers as stored: None (everyone) or a sorted tuple of distinct principals
    (an empty list: nobody but :data:`ADMIN`)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise ValidationError(f"expected a list of principals or null (everyone), got {type(value).__name__}", field=field, record=record, key=key)
    out = set()
    for p in value:
        if p is ADMIN:
            raise ValidationError("mempp.ADMIN reads every document; it is not a reader to list", field=field, record=record, key=key)
        out.add(check_principal(p, field, record, key))
    return tuple(sorted(out))


def check_group(value: Any, field: str = "group") -> str:
    group = check_principal(value, field)
    if group is ADMIN or not group.startswith("group:"):
        raise ValidationError(f"expected 'group:NAME', got {value!r}", field=field)
    return group


class Access:
    """The permissions of one version: the fold of its access log (None: no change ever)."""

    def __init__(self, log: pa.Table | None = None) -> None:
        if log is not None and "note" not in log.column_names:  # written before erasure existed
            log = log.append_column("note", pa.nulls(len(log), pa.string()))
        self.log = log  # None: no change ever (an empty table is made only when one is appended)
        self.erased: dict[int, dict[str, Any]] = {}  # doc id -> {"key", "reason", "erased_at" (µs)}
        self.readers: dict[int, tuple[str, ...] | None] = {}  # doc id -> its readers (absent: everyone)
        self.members: dict[str, set[str]] = {}  # group -> its direct members
        self.periods: dict[int, list[tuple[int | None, tuple[str, ...] | None]]] = {}  # doc id -> (from µs, None: its add; readers)
        self.people: dict[tuple[str, ...], dict[str, Any]] = {}  # the people directory (people.py), by name_key
        n = 0 if log is None else len(log)
        cols = {c: log.column(c).to_pylist() for c in ("op", "doc_id", "group", "principals", "note")} if n else {}
        at = pa.array(log.column("recorded_at")).cast(pa.int64()).to_pylist() if n else []
        for i in range(n):
            op = cols["op"][i]
            if op in ("readers", "new_readers"):
                doc, readers = int(cols["doc_id"][i]), cols["principals"][i]
                readers = None if readers is None else tuple(readers)
                self.readers[doc] = readers
                self.periods.setdefault(doc, []).append((at[i] if op == "readers" else None, readers))
            elif op == "add_members":
                self.members.setdefault(cols["group"][i], set()).update(cols["principals"][i])
            elif op == "remove_members":
                self.members.setdefault(cols["group"][i], set()).difference_update(cols["principals"][i])
            elif op == "erase":
                self.erased[int(cols["doc_id"][i])] = {**json.loads(cols["note"][i] or "{}"), "erased_at": at[i]}
            elif op == "person":
                person = json.loads(cols["note"][i])
                self.people[name_key(person["name"])] = person
        self.directory = tuple(self.people.values())  # the same object while this log is (the matcher rebuilds on a new one)
        restricted = [d for d, r in self.readers.items() if r is not None]
        self.restricted_ids = np.array(sorted(restricted), dtype=np.int64)
        self.erased_ids = np.array(sorted(self.erased), dtype=np.int64)
        self._holders: dict[str, set[str]] | None = None

    @classmethod
    def load(cls, store: Path, ref: FileRef | None) -> "Access":
        """The permissions the access log ``ref`` of ``store`` describes (its checksum checked;
        the fold of one log file is kept for the versions that share it)."""
        if ref is None:
            return _NONE
        key = (str(store), ref.name, ref.digest[1])
        with _LOADED_LOCK:
            found = _LOADED.get(key)
        if found is None:
            found = cls(map_table(check_file(store, ref, verify=True)))
            with _LOADED_LOCK:
                _LOADED[key] = found
                while len(_LOADED) > 8:
                    _LOADED.pop(next(iter(_LOADED)))
        return found

    @classmethod
    def of(cls, store: Path, state: Any) -> "Access":
        """The permissions version ``state`` names (a ``storage.State``; None: a store with no commit)."""
        return cls.load(store, None if state is None else state.access)

    @property
    def restricted(self) -> bool:
        """Whether some document may not be read by everyone."""
        return len(self.restricted_ids) > 0

    # --- who is who -----------------------------------------------------------------------------
    def groups_of(self, principal: str) -> set[str]:
        """The groups ``principal`` belongs to, directly or through groups it belongs to."""
        if self._holders is None:
            holders: dict[str, set[str]] = {}
            for group, members in self.members.items():
                for m in members:
                    holders.setdefault(m, set()).add(group)
            self._holders = holders
        return _reachable(principal, self._holders)

    def may_read(self, principal: Any, doc_id: int) -> bool:
        readers = self.readers.get(int(doc_id))
        if int(doc_id) in self.erased and principal is not ADMIN:
            return False
        if principal is ADMIN or readers is None:
            return True
        return bool(({principal} | self.groups_of(principal)).intersection(readers))

    def readable(self, principal: Any, n_docs: int) -> np.ndarray:
        """One bool per doc id ``< n_docs``: whether ``principal`` may read it."""
        out = np.ones(n_docs, dtype=np.bool_)
        if principal is ADMIN or not self.restricted:
            return out
        ids = self.restricted_ids[self.restricted_ids < n_docs]
        me = {principal} | self.groups_of(principal)
        allowed: dict[tuple[str, ...], bool] = {}
        for d in ids.tolist():
            r = self.readers[d]
            ok = allowed.get(r)
            if ok is None:
                ok = allowed[r] = bool(me.intersection(r))
            out[d] = ok
        out[self.erased_ids[self.erased_ids < n_docs]] = False  # nobody's: as if never stored
        return out

    def reader_periods(self, doc_id: int, added: Any) -> list[dict[str, Any]]:
        """Who could read ``doc_id`` (added at ``added``, a datetime) from when to when:
        ``{"from", "until", "readers"}`` per period, oldest first (``readers`` None: everyone;
        ``until`` None: still so)."""
        out: list[dict[str, Any]] = [{"from": added, "until": None, "readers": None}]
        for us, readers in self.periods.get(int(doc_id), []):
            if us is None:  # named when the document was added
                out[-1]["readers"] = None if readers is None else list(readers)
                continue
            when = from_us(us)
            out[-1]["until"] = when
            out.append({"from": when, "until": None, "readers": None if readers is None else list(readers)})
        return out

    # --- changes --------------------------------------------------------------------------------
    def check_members(self, group: str, principals: Iterable[Any], add: bool) -> tuple[str, ...]:
        """The checked members of a change of ``group``; adding refuses a cycle (a group that
        would hold itself, directly or through others)."""
        got = tuple(sorted({check_principal(p, "principals") for p in principals}))
        if any(p is ADMIN for p in got):
            raise ValidationError("mempp.ADMIN reads every document; it is not a member to list", field="principals")
        if add:
            for p in got:
                if p == group or (p.startswith("group:") and group in self._below(p)):
                    raise ValidationError(f"{p} holds {group} (directly or through other groups): adding it would make a cycle", field="principals")
        return got

    def _below(self, member: str) -> set[str]:
        """The principals ``member`` holds, directly or through groups it holds."""
        return _reachable(member, self.members)

    def appended(self, events: list[dict[str, Any]], version: int, recorded_us: int) -> pa.Table:
        """The whole log after ``events`` (``{"op", "doc_id", "group", "principals"}``), recorded by ``version``."""
        n = len(events)
        new = pa.table(
            {
                "version": pa.array([version] * n, pa.int64()),
                "recorded_at": pa.array([recorded_us] * n, pa.int64()).cast(ACCESS_SCHEMA.field("recorded_at").type),
                "op": pa.array([e["op"] for e in events], pa.string()),
                "doc_id": pa.array([int(e.get("doc_id", -1)) for e in events], pa.int64()),
                "group": pa.array([e.get("group") for e in events], pa.string()),
                "principals": pa.array([None if e.get("principals") is None else list(e["principals"]) for e in events], pa.list_(pa.string())),
                "note": pa.array([e.get("note") for e in events], pa.string()),
            },
            schema=ACCESS_SCHEMA,
        )
        return new if self.log is None else pa.concat_tables([self.log.cast(ACCESS_SCHEMA), new]).combine_chunks()


def _reachable(start: str, edges: Mapping[str, Any]) -> set[str]:
    """Every principal reachable from ``start`` along ``edges`` (not ``start`` itself unless on a cycle)."""
    out: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in out:
                out.add(nxt)
                todo.append(nxt)
    return out


MISSING = object()  # a record that names no readers (a new version of a key then keeps the key's)


def record_readers(docs: Sequence[Any]) -> list | None:
    """Each record's checked readers (:data:`MISSING` where it names none), or None when no
    record names any. A dict's ``"readers"`` key (None: everyone); a Document's ``readers``."""
    out: list | None = None
    for i, d in enumerate(docs):
        if isinstance(d, Mapping):
            if "readers" not in d:
                continue
            value = d["readers"]
        else:
            value = getattr(d, "readers", None)
            if value is None:
                continue
        if out is None:
            out = [MISSING] * len(docs)
        out[i] = check_readers(value, record=i, key=_key(d))
    return out


def _key(d: Any) -> str | None:
    k = d.get("id", d.get("key")) if isinstance(d, Mapping) else getattr(d, "id", None)
    return k if isinstance(k, str) else None


def readers_events(access: Access, docs: Sequence[Any], given: list | None, results: Sequence[int | None], first: int,
                   stored: Callable[[str], list[int]]) -> list[dict[str, Any]]:
    """The reader events of an ``add`` whose records ``docs`` got doc ids ``results`` (new ones
    from ``first``): a new document takes its record's readers, else, as a new version of a key,
    the readers of the key's newest version (``stored(key)``: its doc ids below ``first``), else
    everyone's; a stored document a record names again takes that record's readers when it names some."""
    if given is None and not access.restricted:
        return []
    events: list[dict[str, Any]] = []
    newest: dict[str, tuple[str, ...] | None] = {}  # key -> readers of its newest version in this add
    for i, doc in enumerate(results):
        if doc is None:
            continue
        g = MISSING if given is None else given[i]
        if doc >= first:
            key = _key(docs[i])
            if g is MISSING:
                if key is None:
                    continue
                if key in newest:
                    g = newest[key]
                else:
                    before = stored(key)
                    g = access.readers.get(before[-1]) if before else None
            if key is not None:
                newest[key] = g
            if g is not None:
                events.append({"op": "new_readers", "doc_id": int(doc), "principals": g})
        elif g is not MISSING and access.readers.get(int(doc)) != g:
            events.append({"op": "readers", "doc_id": int(doc), "principals": g})
    return events


_NONE = Access()
_LOADED: dict[tuple, Access] = {}  # the last few logs folded, oldest first
_LOADED_LOCK = threading.Lock()


def named_docs(searcher: Any, ref: str | int) -> list[int]:
    """The doc ids a readers change names: every version of a key, or one doc id
    (``DocumentNotFound`` when none)."""
    docs = searcher.doc_ids(ref) if isinstance(ref, str) else [searcher.resolve(ref, "id")]
    if not docs:
        raise DocumentNotFound(f"no document with id {ref!r}")
    return docs


def denied_without_principal(path: Any) -> AccessDenied:
    return AccessDenied(
        f"{path}: the store holds documents not everyone may read; read as a principal "
        "(principal='user:NAME' or 'group:NAME'; --as on the command line), or as mempp.ADMIN (--as admin) to read everything"
    )
