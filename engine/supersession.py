"""Supersessions: the one rule every write path records them by (:func:`plan`); the writes that
call it are ``Writer.add``, ``Writer.supersede`` and ``supersede_many`` (``writer.py``).

Owns the rule (README, *Temporal rules*): which supersession events a write records and which
it refuses. ``Store.add`` (Python, ``mempp add`` of JSONL, Parquet or Arrow, a table from
``mempp.distributed.embed``), ``supersede`` and ``supersede_many`` all call :func:`plan` with
the store's current state and the write's new documents or events, whatever their order in
the input:

- the versions of one id are ordered by their position (a dated version's date; an undated
  one's, the instant the store recorded it; equal positions by ingest order), and each is
  superseded effective at the position of the next: a version dated before the id's current
  one becomes an earlier version, valid from its date until the next-dated version's;
- a ``supersedes`` id names the version of that id in force at the new document's date (its
  latest version positioned at or before it; the id's earliest when all are later), found
  among the store's documents and the whole input, so a reference to a later line resolves;
- refused, naming both records and with nothing written: an id found nowhere; a supersession
  effective before the old document's own date (it would never have been valid) unless
  ``backdate=True``; a replacement that is itself superseded at or before the date it takes
  over (a cycle, or a replacement already replaced: neither would be valid from then on).

Validity at a date is ``candidates.py``'s; documents themselves are ``batches.py``'s.

Never imports: searcher, writer, planner, fusion, lexical, vector, compaction, onnxruntime.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mempp.storage import FOREVER, NAT

from .dates import iso
from .errors import ValidationError


@dataclass(frozen=True, slots=True)
class Item:
    """A new document of a write, as the rule sees it: its doc id, its record (its place in
    the input), its id (key), its position (its date, or the write's instant when undated),
    whether it is dated, the ids its ``supersedes`` field names, and whether its call passed
    ``backdate=True``; ``name``: how an error names it (else ``record N``)."""

    doc: int
    record: int | None
    key: str | None
    at: int
    dated: bool
    supersedes: tuple[str, ...] = ()
    backdate: bool = False  # its supersedes may leave a document without a valid version
    name: str | None = None  # how an error names it (``FILE:LINE``); else by its record


@dataclass(frozen=True, slots=True)
class Event:
    """An explicit supersession (``supersede``): ``old`` replaced by ``new`` from ``effective``
    (None: ``new``'s date, else the write's instant); ``record``: its index in the call, for errors;
    ``names``: how the caller named old and new."""

    old: int
    new: int
    effective: int | None
    record: int | None
    names: tuple[Any, Any]


class StoreView:
    """What the rule reads of the store: each id's stored versions, and each stored document's
    date, position and end of validity. ``keys``: id -> its doc ids in ingest order;
    ``ingested``: a stored document's ingest instant (for the position of an undated one)."""

    def __init__(self, dates, valid_until, keys: dict[str, list[int]], ingested: Callable[[int], int], key_of: Callable[[int], str | None]):
        self.dates, self.valid_until, self.keys = dates, valid_until, keys
        self.ingested, self.key_of = ingested, key_of

    def date(self, doc: int) -> int | None:
        d = int(self.dates[doc])
        return None if d == NAT else d

    def position(self, doc: int) -> int:
        d = int(self.dates[doc])
        return self.ingested(doc) if d == NAT else d

    def end(self, doc: int) -> int:
        return int(self.valid_until[doc])


class Chains:
    """The versions of each id a write knows: the store's and the input's so far, each id's as a
    sorted list of (position, doc id). :func:`plan` builds one for the whole input; the write
    path builds one row by row to tell a re-ingest (:meth:`active`)."""

    def __init__(self, view: StoreView):
        self.view = view
        self.chains: dict[str, list[tuple[int, int]]] = {}
        self.items: dict[int, Item] = {}
        self.referrers: dict[str, list[Item]] = {}  # id -> the items whose supersedes name it

    def chain(self, key: str) -> list[tuple[int, int]]:
        c = self.chains.get(key)
        if c is None:
            c = self.chains[key] = sorted((self.view.position(d), d) for d in self.view.keys.get(key, ()))
        return c

    def add(self, item: Item) -> None:
        self.items[item.doc] = item
        if item.key is not None:
            insort(self.chain(item.key), (item.at, item.doc))
        for target in item.supersedes:
            self.referrers.setdefault(target, []).append(item)

    def in_force(self, key: str, at: int) -> int | None:
        """The version of ``key`` in force at ``at`` (its last positioned at or before; its
        first when every one is later); None when the id has none."""
        c = self.chain(key)
        if not c:
            return None
        i = bisect_right(c, (at, FOREVER)) - 1
        return c[max(i, 0)][1]

    def date(self, doc: int) -> int | None:
        it = self.items.get(doc)
        if it is not None:
            return it.at if it.dated else None
        return self.view.date(doc)

    def active(self, doc: int, key: str | None) -> bool:
        """Whether ``doc`` is valid after everything known so far: not superseded in the store,
        the last version of its id, and named by no ``supersedes`` that resolves to it."""
        if doc not in self.items and self.view.end(doc) != FOREVER:
            return False
        if key is not None:
            c = self.chain(key)
            if c and c[-1][1] != doc:
                return False
            for it in self.referrers.get(key, ()):
                if it.doc != doc and self.in_force(key, it.at) == doc:
                    return False
        return True

    def short(self, doc: int) -> str:
        it = self.items.get(doc)
        if it is not None:
            return (it.name or f"record {it.record}") + (f" (id {it.key!r})" if it.key is not None else "")
        key = self.view.key_of(doc)
        return f"{key!r} (stored doc id {doc})" if key is not None else f"stored doc id {doc}"

    def label(self, doc: int) -> str:
        it = self.items.get(doc)
        if it is not None:
            where = it.name or (f"record {it.record}" if it.record is not None else f"doc id {doc}")
            return where + (f" (id {it.key!r}, " if it.key is not None else " (") + f"{_when(it.at if it.dated else None)})"
        key = self.view.key_of(doc)
        return (f"{key!r} (stored doc id {doc}, " if key is not None else f"stored doc id {doc} (") + f"{_when(self.view.date(doc))})"


def _when(us: int | None) -> str:
    return "undated" if us is None else f"dated {iso(us)}"


def plan(view: StoreView, items: Sequence[Item] = (), events: Sequence[Event] = (), *, recorded: int, backdate: bool = False) -> list[tuple[int, int, int]]:
    """The supersession events ``(old, new, effective)`` a write records: ``items``, its new
    documents (in input order), and ``events``, its explicit supersessions; ``recorded``: the
    write's instant. Raises :class:`ValidationError` naming the field and both records when the
    rule refuses the write (module docstring); then nothing of it may be written."""
    chains = Chains(view)
    for it in items:
        chains.add(it)
    out: list[tuple[int, int, int]] = []
    checked: list[tuple[int, int, int, str, Item | Event]] = []  # events whose replacement must outlive them
    # 1. The versions of one id, ordered by position: each superseded at the next one's.
    new_keys = {it.key for it in items if it.key is not None}
    for key in sorted(new_keys):
        c = chains.chain(key)
        for (_, a), (pos_b, b) in zip(c, c[1:]):
            if a in chains.items or b in chains.items:
                if a not in chains.items and view.end(a) <= pos_b:
                    continue  # already superseded by then: the event would change nothing
                out.append((a, b, pos_b))
    # 2. ``supersedes`` fields: the version in force at the new document's position.
    refs: list[tuple[int, Item, str]] = []
    for it in items:
        for target in it.supersedes:
            old = chains.in_force(target, it.at)
            if old is None:
                raise ValidationError(f"no document with id {target!r} in the store or in this input", field="supersedes", record=it.record, key=it.key)
            if old == it.doc:
                raise ValidationError("a document cannot supersede itself", field="supersedes", record=it.record, key=it.key)
            refs.append((old, it, target))
    if refs:
        cycle = _find_cycle(out + [(old, it.doc, it.at) for old, it, _ in refs])
        if cycle is not None:
            named = [d for d in cycle[:-1] if d in chains.items]
            first = chains.items[named[0]] if named else refs[0][1]
            raise ValidationError(
                f"a cycle of supersessions in this input: {' -> '.join(chains.short(d) for d in cycle)} "
                "(each replaced by the next); from the latest of their dates none would be valid",
                field="supersedes", record=first.record, key=first.key,
            )
    for old, it, target in refs:
        when = chains.date(old)
        if not (backdate or it.backdate) and when is not None and it.at < when:
            raise ValidationError(
                f"{chains.label(it.doc)} supersedes {chains.label(old)}, which is dated after it: "
                f"{target!r} would never have been valid; pass backdate=True (mempp add --backdate) if that is meant",
                field="supersedes", record=it.record, key=it.key,
            )
        out.append((old, it.doc, it.at))
        checked.append((old, it.doc, it.at, "supersedes", it))
    # 3. Explicit supersessions.
    for ev in events:
        where = ev.record
        if ev.old == ev.new:
            raise ValidationError("a document cannot supersede itself", field="new", record=where)
        old_date, new_date = chains.date(ev.old), chains.date(ev.new)
        eff = ev.effective if ev.effective is not None else (new_date if new_date is not None else recorded)
        if not backdate:
            for name, when, field in ((ev.names[0], old_date, "old"), (ev.names[1], new_date, "new")):
                if when is not None and eff < when:
                    raise ValidationError(
                        f"effective {iso(eff)} is before {name!r}'s own date {iso(when)}: "
                        + ("it would never have been valid" if field == "old" else "neither would be valid in between")
                        + "; pass backdate=True if that is meant",
                        field="effective", record=where,
                    )
        out.append((ev.old, ev.new, eff))
        checked.append((ev.old, ev.new, eff, "new", ev))
    # 4. A replacement must not itself be superseded by the time it takes over, by any event of
    # the store or of this write, whatever their order (a cycle, or a replacement already replaced).
    if checked:
        ends: dict[int, int] = {}
        for old, _, eff in out:
            ends[old] = min(ends.get(old, FOREVER), eff)
        for old, new, eff, field, src in checked:
            end = min(ends.get(new, FOREVER), FOREVER if new in chains.items else view.end(new))
            if end > eff:
                continue
            cycle = _cycle(out, old, new)
            if isinstance(src, Event):
                old_name, new_name = repr(src.names[0]), repr(src.names[1])
                record, key = src.record, None
            else:
                old_name, new_name = chains.label(old), chains.label(new)
                record, key = src.record, src.key
            what = (
                f"a cycle ({' -> '.join(chains.short(d) for d in cycle)}, each replaced by the next)"
                if cycle else "a replacement already replaced"
            )
            raise ValidationError(
                f"{new_name} is itself superseded from {iso(end)}, so it cannot replace {old_name} from {iso(eff)}: "
                f"{what}; neither would be valid from then on (to correct a supersession, add a new version)",
                field=field, record=record, key=key,
            )
    return out


def _cycle(events: list[tuple[int, int, int]], old: int, new: int) -> list[int] | None:
    """A path ``old -> new -> ... -> old`` along the events (each old document to its replacement), if any."""
    succ: dict[int, list[int]] = {}
    for a, b, _ in events:
        succ.setdefault(a, []).append(b)
    path, stack = {new: None}, [new]
    while stack:
        d = stack.pop()
        for n in succ.get(d, ()):
            if n == old:
                chain = [d]
                while path[chain[-1]] is not None:
                    chain.append(path[chain[-1]])
                return [old] + chain[::-1] + [old]
            if n not in path:
                path[n] = d
                stack.append(n)
    return None


def _find_cycle(events: list[tuple[int, int, int]]) -> list[int] | None:
    """Some cycle ``a -> b -> ... -> a`` along the events (each old document to its replacement), if any."""
    succ: dict[int, list[int]] = {}
    for a, b, _ in events:
        succ.setdefault(a, []).append(b)
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for root in succ:
        if root in state:
            continue
        path, stack = [root], [iter(succ.get(root, ()))]
        state[root] = 1
        while stack:
            n = next(stack[-1], None)
            if n is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(n) == 1:
                return path[path.index(n):] + [n]
            elif n not in state:
                state[n] = 1
                path.append(n)
                stack.append(iter(succ.get(n, ())))
    return None
