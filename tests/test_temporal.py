"""Temporal semantics (docs/DESIGN.md §2): which documents are candidates at a given ``as_of``.

A plain-Python model of the rules is checked against a real ``mempp.Store``:

* a document is valid at θ when its ``date`` ≤ θ and no supersession event of it has
  ``effective_date`` ≤ θ;
* ``as_of=None`` is "after everything": every supersession counts, undated documents are
  included; a given ``as_of`` excludes undated documents; a date-only ``as_of`` means the end
  of that (UTC) day, a date-only document date the start of it;
* supersession events come from the ``supersedes`` field of added documents, from
  ``Store.supersede(old, new, effective=...)``, and from re-adding an existing ``id`` with a
  different text (effective at the new document's date; "now" when it is undated: the
  instant the store recorded it, which the model knows to within the call that made it, so
  it is right for any ``as_of``, far in the future or between two calls alike);
* a re-ingest (README, *Write rules*): same author and whitespace-normalized text as a
  stored row that is active (a key on both sides must be the same), or that has the same key
  and date (a replay of a superseded version), gives the existing id and changes nothing.

The vector leg scans every candidate, so ``k = depth = n docs`` with ``legs=["vector"]`` and
``reserve=False`` returns exactly the candidate set.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mempp
from mempp.planner import QueryOptions, candidate_mask

from strategies import (
    AUTHORS,
    as_of_for,
    as_of_values,
    author_filters,
    boundary_as_ofs,
    doc_dates,
    given_as_of_values,
    histories,
    iso_day_strings,
    supersession_chains,
)

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
QUERY = "sla uptime budget review"


# --- the model ------------------------------------------------------------------------------------
def is_day(s: str) -> bool:
    return len(s) == 10


def doc_instant(s: str) -> datetime:
    """A document date or supersession ``effective``: a bare day is the start of that UTC day."""
    if is_day(s):
        return datetime.combine(date.fromisoformat(s), time(0), tzinfo=UTC)
    dt = datetime.fromisoformat(s)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def as_of_instant(s: str | None) -> datetime | None:
    """A query's ``as_of``: a bare day is the end of that UTC day; None stays None (after everything)."""
    if s is None:
        return None
    if is_day(s):
        return datetime.combine(date.fromisoformat(s), time(23, 59, 59, 999999), tzinfo=UTC)
    return doc_instant(s)


def micros(dt: datetime) -> int:
    return (dt - EPOCH) // timedelta(microseconds=1)


def wall_us() -> int:
    """The wall clock in µs since the epoch (the clock the store stamps what it records with)."""
    return _time.time_ns() // 1000


def iso_us(us: int) -> str:
    """An instant (µs since the epoch) as an ISO timestamp, for an ``as_of``."""
    return (EPOCH + timedelta(microseconds=us)).isoformat()


@dataclass(frozen=True)
class Recorded:
    """The instant a call recorded something ("effective now"), known to lie in ``[lo, hi]`` (µs):
    the wall clock read just before and just after the call."""

    lo: int
    hi: int


class Ambiguous(Exception):
    """An ``as_of`` inside the span of a call that recorded an "effective now": the model cannot tell."""


def recorded(call):
    """Run ``call()``; returns ``(its result, Recorded(span of the call))``."""
    lo = wall_us()
    out = call()
    return out, Recorded(lo, wall_us())


@dataclass
class MDoc:
    id: int
    key: str | None
    author: str | None
    fingerprint: tuple[str, str]
    date: datetime | None
    text: str = ""
    at: Recorded | None = None  # the call that stored it (an undated document's position)
    supersedes: tuple[str, ...] = ()
    backdate: bool = False


class Refused(Exception):
    """The model refuses a write (README, *Temporal rules*); ``args[0]`` is a word its message holds."""


def position(d: MDoc) -> int:
    """Where a version stands among its id's versions: its date, or (undated) when it was recorded.
    Every generated date is long before any call, and calls do not overlap, so a call's start stands
    for the instant the store recorded it."""
    return micros(d.date) if d.date is not None else d.at.lo


def eff_us(eff) -> int:
    return eff.lo if isinstance(eff, Recorded) else micros(eff)


def effective(d: MDoc):
    """A supersession by ``d`` takes effect at its date, or (undated) when it was recorded."""
    return d.date if d.date is not None else d.at


def find_cycle(events) -> list[int] | None:
    """Some cycle along the events (each old document to its replacement), plainly: from each
    event, every path that comes back to where it started."""
    succ: dict[int, set[int]] = {}
    for old, new, _ in events:
        succ.setdefault(old, set()).add(new)
    for start in succ:
        seen, todo = set(), list(succ[start])
        while todo:
            d = todo.pop()
            if d == start:
                return [start]
            if d not in seen:
                seen.add(d)
                todo.extend(succ.get(d, ()))
    return None


class Model:
    def __init__(self) -> None:
        self.docs: list[MDoc] = []
        self.events: list[tuple[int, int, object]] = []  # (old, new, effective datetime or Recorded)
        self.spans: list[Recorded] = []  # every write's span, in order (as_of values between two writes)

    def active(self, doc: int, events=None) -> bool:
        return not any(old == doc for old, _, _ in (self.events if events is None else events))

    def active_with_key(self, key: str) -> MDoc | None:
        found = [d for d in self.docs if d.key == key and self.active(d.id)]
        assert len(found) <= 1, "model invariant: one active version per key"
        return found[0] if found else None

    def resolve(self, key: str) -> MDoc:
        """A key's active version, else its newest version."""
        doc = self.active_with_key(key)
        if doc is None:
            found = [d for d in self.docs if d.key == key]
            if not found:  # an id only a refused write had
                raise Refused("no document with id")
            doc = found[-1]
        return doc

    def plan(self, new: list[MDoc], check: bool) -> list:
        """The events the rule records for ``new`` (this write's new documents, in input order) on
        top of the stored ones. ``check``: refuse as the store does (:class:`Refused`); else
        (the state after a prefix of the input) leave out what cannot be resolved yet."""
        docs = self.docs + new
        fresh = {d.id for d in new}

        def chain(key):
            return sorted((d for d in docs if d.key == key), key=lambda d: (position(d), d.id))

        out = []
        for key in dict.fromkeys(d.key for d in new if d.key is not None):
            c = chain(key)
            for a, b in zip(c, c[1:]):
                if a.id in fresh or b.id in fresh:
                    out.append((a.id, b.id, effective(b)))
        refs = []
        for d in new:
            for target in d.supersedes:
                c = chain(target)
                if not c:
                    if check:
                        raise Refused("no document with id")
                    continue
                before = [v for v in c if position(v) <= position(d)]
                old = (before or c)[-1 if before else 0]
                if old.id == d.id:
                    if check:
                        raise Refused("cannot supersede itself")
                    continue
                refs.append((old, d))
        if not check:
            return out + [(old.id, d.id, effective(d)) for old, d in refs]
        if find_cycle(out + [(old.id, d.id, effective(d)) for old, d in refs]):
            raise Refused("cycle")
        for old, d in refs:
            if not d.backdate and old.date is not None and position(d) < micros(old.date):
                raise Refused("backdate=True")
        out += [(old.id, d.id, effective(d)) for old, d in refs]
        for old, d in refs:  # the replacement must outlive the moment it takes over
            ends = [eff_us(e) for o, _, e in self.events + out if o == d.id]
            if ends and min(ends) <= position(d):
                raise Refused("itself superseded")
        return out

    def duplicate(self, key: str | None, fp: tuple[str, str], when: datetime | None, new: list[MDoc]) -> MDoc | None:
        """The document a new record re-ingests (the stored ones and this write's before it): the
        newest with its fingerprint whose key does not differ, either active after what precedes
        the record, or (a replay of a superseded version) with the same key and date."""
        events = None
        for d in reversed(self.docs + new):
            if d.fingerprint != fp or (d.key is not None and key is not None and d.key != key):
                continue
            if events is None:
                events = self.events + self.plan(new, check=False)
            if self.active(d.id, events) or (key is not None and d.key == key and d.date == when):
                return d
        return None

    def add(self, batch: list[dict], at: Recorded, backdate: bool = False) -> list[int | None]:
        """``batch`` added by one call that ran within ``at``; raises :class:`Refused` (and
        changes nothing) where the store must refuse it."""
        out: list[int | None] = []
        new: list[MDoc] = []
        for raw in batch:
            text = raw["text"]
            if not text.strip():
                out.append(None)
                continue
            key, author = raw.get("id"), raw.get("author")
            fp = (author or "", " ".join(text.split()))
            when = doc_instant(raw["date"]) if raw.get("date") else None
            same = self.duplicate(key, fp, when, new)
            if same is not None:  # idempotent re-ingest
                out.append(same.id)
                continue
            sup = raw.get("supersedes", ())
            doc = MDoc(len(self.docs) + len(new), key, author, fp, when, text, at, (sup,) if isinstance(sup, str) else tuple(sup), backdate)
            new.append(doc)
            out.append(doc.id)
        events = self.plan(new, check=True)
        self.spans.append(at)
        self.docs += new
        self.events += events
        return out

    def supersede(self, old_key: str, new_key: str, effective: str | None, at: Recorded) -> None:
        """``Store.supersede(old_key, new_key, effective, backdate=True)``, called within ``at``;
        :class:`Refused` when ``new`` is itself superseded by then."""
        old, new = self.resolve(old_key), self.resolve(new_key)
        if effective is not None:
            eff = doc_instant(effective)
        else:
            eff = new.date if new.date is not None else at
        ends = [eff_us(e) for o, _, e in self.events if o == new.id]
        if ends and min(ends) <= eff_us(eff):
            raise Refused("itself superseded")
        self.spans.append(at)
        self.events.append((old.id, new.id, eff))

    def between(self, i: int) -> str:
        """An as_of after the ``i``-th write's span and before the next one's (or just after the last)."""
        lo = self.spans[i].hi
        hi = self.spans[i + 1].lo if i + 1 < len(self.spans) else lo + 2
        return iso_us((lo + hi) // 2)

    def valid(self, as_of: str | None, authors=None) -> set[int]:
        """The documents valid at ``as_of``; raises :class:`Ambiguous` if an "effective now"
        event's span holds ``as_of``."""
        theta = as_of_instant(as_of)
        t_us = None if theta is None else micros(theta)

        def in_effect(eff) -> bool:
            if isinstance(eff, Recorded):
                if eff.lo <= t_us < eff.hi:
                    raise Ambiguous(as_of)
                return eff.hi <= t_us
            return eff <= theta

        out = set()
        for d in self.docs:
            events = [eff for old, _, eff in self.events if old == d.id]
            if theta is None:
                ok = not events
            else:
                ok = d.date is not None and d.date <= theta and not any(in_effect(eff) for eff in events)
            if ok and (authors is None or d.author in authors):
                out.add(d.id)
        return out


# --- helpers --------------------------------------------------------------------------------------
def open_store(path):
    return mempp.Store.open(path, embedder=mempp.HashEmbedder())


def both(store_call, model_call):
    """Run a write on the store, then on the model with the span the store's call ran in: either
    both refuse it (the model's reason is in the store's message, and the store is unchanged) or
    both return the same. Returns the result, or None when refused."""
    lo = wall_us()
    try:
        got = store_call()
    except (mempp.ValidationError, mempp.DocumentNotFound) as exc:
        got = exc
    at = Recorded(lo, wall_us())
    try:
        want = model_call(at)
    except Refused as why:
        assert isinstance(got, (mempp.ValidationError, mempp.DocumentNotFound)), f"the store accepted what the model refuses ({why}): {got}"
        assert why.args[0] in str(got), (why.args[0], str(got))
        return None
    assert not isinstance(got, Exception), f"the store refused what the model accepts: {got}"
    assert got == want, f"returned {got}, the model {want}"
    return got


def apply(store, model: Model, history) -> None:
    for op in history.ops:
        if op[0] == "add":
            backdate = len(op) > 2 and op[2]
            both(lambda: store.add(op[1], backdate=backdate), lambda at: model.add(op[1], at, backdate))
        else:
            _, old, new, effective = op
            both(lambda: store.supersede(old, new, effective=effective, backdate=True), lambda at: model.supersede(old, new, effective, at))


def query_ids(store, as_of, authors=None, text=QUERY) -> set[int]:
    n = len(store)
    hits = store.query(text, as_of=as_of, k=n, depth=max(n, 1), legs=["vector"], reserve=False, authors=authors)
    ids = [h.doc_id for h in hits]
    assert len(ids) == len(set(ids))
    return set(ids)


def mask_ids(store, as_of, authors=None, date_from=None, date_to=None) -> set[int]:
    opt = QueryOptions(
        as_of=None if as_of is None else micros(as_of_instant(as_of)),
        authors=None if authors is None else tuple(authors),
        date_from=date_from,
        date_to=date_to,
    )
    mask = candidate_mask(store.searcher().snapshot, opt)
    assert mask.dtype == np.uint8 and mask.shape == (len(store),)
    return set(np.flatnonzero(mask).tolist())


def recorded_at(store, doc: int) -> int:
    """When the store recorded ``doc`` (µs), from its ``ingested_at``."""
    return micros(store.get(doc).ingested_at)


def keys_of(store, ids) -> set:
    return {store.get(int(i)).key for i in ids}


# --- property tests against the model -------------------------------------------------------------
def between_writes(history) -> st.SearchStrategy:
    """``("between", i)``: an as_of between the ``i``-th write and the next (resolved by ``Model.between``)."""
    return st.integers(0, len(history.ops) - 1).map(lambda i: ("between", i))


@SETTINGS
@given(history=histories(), data=st.data())
def test_query_returns_exactly_the_valid_documents(tmp_path_factory, history, data):
    as_ofs = st.one_of(as_of_for(history), between_writes(history))
    checks = data.draw(st.lists(st.tuples(as_ofs, author_filters), min_size=1, max_size=6), label="checks")
    model = Model()
    with open_store(tmp_path_factory.mktemp("store")) as store:
        apply(store, model, history)
        assert len(store) == len(model.docs)
        for as_of, authors in checks:
            if isinstance(as_of, tuple):  # between two accepted writes (a refused one has no span)
                as_of = model.between(min(as_of[1], len(model.spans) - 1)) if model.spans else None
            want = model.valid(as_of, authors)
            assert query_ids(store, as_of, authors) == want, (as_of, authors)
            assert mask_ids(store, as_of, authors) == want, (as_of, authors)


@SETTINGS
@given(
    history=histories(),
    data=st.data(),
    authors=author_filters,
    date_from=st.one_of(st.none(), iso_day_strings),
    date_to=st.one_of(st.none(), iso_day_strings, doc_dates),
)
def test_candidate_mask_matches_model(tmp_path_factory, history, data, authors, date_from, date_to):
    as_of = data.draw(as_of_for(history), label="as_of")
    model = Model()
    with open_store(tmp_path_factory.mktemp("store")) as store:
        apply(store, model, history)
        lo = None if date_from is None else doc_instant(date_from)  # start of that day
        hi = None if date_to is None else as_of_instant(date_to)  # a bare day: end of that day
        want = {
            d for d in model.valid(as_of, authors)
            if (lo is None or (model.docs[d].date is not None and model.docs[d].date >= lo))
            and (hi is None or (model.docs[d].date is not None and model.docs[d].date <= hi))
        }
        got = mask_ids(
            store,
            as_of,
            authors,
            date_from=None if lo is None else micros(lo),
            date_to=None if hi is None else micros(hi),
        )
        assert got == want
        # The same filter through the public API.
        n = len(store)
        hits = store.query(
            QUERY, as_of=as_of, k=n, depth=max(n, 1), legs=["vector"], reserve=False,
            authors=authors, date_from=date_from, date_to=date_to,
        )
        assert {h.doc_id for h in hits} == want


@SETTINGS
@given(history=histories(max_ops=4), data=st.data())
def test_reopened_store_agrees(tmp_path_factory, history, data):
    as_of = data.draw(st.one_of(given_as_of_values, st.sampled_from(boundary_as_ofs(history) or ["2022-01-01"])), label="as_of")
    # The supersession log is persisted: a fresh open sees the same validity.
    model = Model()
    path = tmp_path_factory.mktemp("store")
    with open_store(path) as store:
        apply(store, model, history)
    with open_store(path) as store:
        assert query_ids(store, as_of) == model.valid(as_of)
        assert query_ids(store, None) == model.valid(None)


@SETTINGS
@given(chain=supersession_chains(), one_batch=st.booleans(), data=st.data())
def test_supersession_chain_answers_the_version_in_force(tmp_path_factory, chain, one_batch, data):
    # Versions v0..vn with increasing dates, each replacing the previous from its own date:
    # at θ the answer is the last version dated ≤ θ; with as_of=None, the last version.
    with open_store(tmp_path_factory.mktemp("store")) as store:
        if one_batch:
            ids = store.add(chain)
        else:
            ids = [store.add([doc])[0] for doc in chain]
        assert ids == list(range(len(chain)))
        as_ofs = data.draw(
            st.lists(st.one_of(as_of_values, st.sampled_from([d["date"] + "T00:00:00" for d in chain])), min_size=1, max_size=4),
            label="as_ofs",
        )
        for as_of in as_ofs:
            theta = as_of_instant(as_of)
            in_force = [i for i, d in enumerate(chain) if theta is None or doc_instant(d["date"]) <= theta]
            want = {in_force[-1]} if in_force else set()
            assert query_ids(store, as_of) == want, as_of


# --- explicit examples ----------------------------------------------------------------------------
def test_superseded_record_is_the_answer_before_its_replacement(tmp_path):
    with open_store(tmp_path / "s") as store:
        v1, = store.add([{"id": "sla", "text": "The SLA is 99.5% uptime", "author": "Aisha Patel", "date": "2023-01-10"}])
        v2, = store.add([{"id": "sla", "text": "The SLA is now 99.9% uptime", "author": "Aisha Patel", "date": "2023-06-01"}])
        assert v1 != v2
        assert query_ids(store, "2023-03-01") == {v1}
        assert query_ids(store, "2023-05-31T23:59:59") == {v1}
        assert query_ids(store, "2023-06-01T00:00:00") == {v2}  # effective exactly at as_of: replaced
        assert query_ids(store, "2023-06-01") == {v2}
        assert query_ids(store, None) == {v2}
        assert query_ids(store, "2023-01-09") == set()  # before either existed
        # Nothing was deleted: both versions are kept whole.
        assert [r.text for r in store.history("sla")] == ["The SLA is 99.5% uptime", "The SLA is now 99.9% uptime"]
        assert store.get(v1).valid_until == datetime(2023, 6, 1, tzinfo=UTC)


def test_date_only_as_of_means_end_of_day(tmp_path):
    with open_store(tmp_path / "s") as store:
        a, = store.add([{"id": "a", "text": "budget approved", "date": "2023-05-08T18:00:00"}])
        assert query_ids(store, "2023-05-08") == {a}
        assert query_ids(store, "2023-05-08T12:00:00") == set()
        assert query_ids(store, "2023-05-08T18:00:00") == {a}
        assert query_ids(store, "2023-05-07") == set()
        # A bare day as a document date is the start of that day.
        b, = store.add([{"id": "b", "text": "vendor review", "date": "2023-05-09"}])
        assert query_ids(store, "2023-05-09T00:00:00") == {a, b}
        assert query_ids(store, "2023-05-08T23:59:59") == {a}
        c, = store.add([{"id": "c", "text": "late note", "date": "2023-05-08T23:59:59.999999"}])
        assert query_ids(store, "2023-05-08") == {a, c}
        assert query_ids(store, "2023-05-08T23:59:59.999998") == {a}


def test_two_supersessions_earliest_effective_counts(tmp_path):
    with open_store(tmp_path / "s") as store:
        a, b, c = store.add(
            [
                {"id": "a", "text": "policy one", "date": "2022-01-01"},
                {"id": "b", "text": "policy two", "date": "2022-01-02"},
                {"id": "c", "text": "policy three", "date": "2022-01-03"},
            ]
        )
        store.supersede("a", "b", effective="2022-06-01")
        store.supersede("a", "c", effective="2022-03-01")  # recorded later, effective earlier
        assert query_ids(store, "2022-02-28") == {a, b, c}
        assert query_ids(store, "2022-03-01T00:00:00") == {b, c}
        assert query_ids(store, "2022-04-01") == {b, c}
        assert query_ids(store, "2022-07-01") == {b, c}
        assert query_ids(store, None) == {b, c}
        assert store.get(a).valid_until == datetime(2022, 3, 1, tzinfo=UTC)


def test_supersede_effective_defaults_to_new_documents_date(tmp_path):
    with open_store(tmp_path / "s") as store:
        a, b = store.add(
            [
                {"id": "a", "text": "contract draft", "date": "2021-01-01"},
                {"id": "b", "text": "contract signed", "date": "2021-04-01"},
            ]
        )
        store.supersede("a", "b")
        assert query_ids(store, "2021-03-31") == {a}
        assert query_ids(store, "2021-04-01") == {b}


def test_supersedes_field(tmp_path):
    with open_store(tmp_path / "s") as store:
        a, = store.add([{"id": "a", "text": "release planned", "date": "2021-01-01"}])
        b, = store.add([{"id": "b", "text": "release shipped", "date": "2021-02-01", "supersedes": "a"}])
        assert query_ids(store, "2021-01-31") == {a}
        assert query_ids(store, "2021-02-01") == {b}
        assert query_ids(store, None) == {b}


def test_as_of_excludes_undated_documents(tmp_path):
    with open_store(tmp_path / "s") as store:
        undated, dated = store.add(
            [
                {"id": "u", "text": "latency incident"},
                {"id": "d", "text": "latency review", "date": "2020-01-01"},
            ]
        )
        assert query_ids(store, None) == {undated, dated}
        assert query_ids(store, "2023-01-01") == {dated}
        assert query_ids(store, "2999-12-31") == {dated}


def test_undated_new_version_supersedes_from_now(tmp_path):
    with open_store(tmp_path / "s") as store:
        v1, = store.add([{"id": "p", "text": "policy A", "date": "2021-01-01"}])
        v2, = store.add([{"id": "p", "text": "policy B"}])  # undated: effective when recorded
        assert query_ids(store, "2023-12-31") == {v1}  # the past is unchanged
        assert query_ids(store, None) == {v2}
        # Once recorded, the supersession is in effect at any later as_of; v2, undated, is never
        # a candidate at a given as_of: far ahead, neither version is.
        assert query_ids(store, "2999-12-31") == set()
        assert query_ids(store, iso_us(recorded_at(store, v2) + 1)) == set()
        assert query_ids(store, iso_us(recorded_at(store, v2) - 1)) == {v1}


def test_readd_identical_text_is_idempotent(tmp_path):
    with open_store(tmp_path / "s") as store:
        a, = store.add([{"id": "a", "text": "budget  approved", "author": "Ben Okafor", "date": "2022-01-01"}])
        again = store.add([{"id": "a", "text": "budget approved", "author": "Ben Okafor", "date": "2022-01-01"}])
        assert again == [a]
        assert len(store) == 1
        assert query_ids(store, "2022-01-01") == {a}
        assert query_ids(store, None) == {a}
        # Keyless: identical text and author of an active row is the same document.
        u, = store.add([{"text": "vendor review", "author": "Chen Wei", "date": "2022-02-01"}])
        assert store.add([{"text": "vendor\n review", "author": "Chen Wei"}]) == [u]
        assert store.add([{"id": "blank", "text": " \n "}]) == [None]
        assert len(store) == 2


def test_replaying_a_file_does_not_resurrect_old_versions(tmp_path):
    # Re-adding the same input file (an old version and its replacement under one id) must leave
    # every answer as it was. (The store documents this choice: an exact replay of any stored
    # version of the same id is a re-ingest, superseded or not.)
    batch = [
        {"id": "p", "text": "travel policy v1", "date": "2021-01-01"},
        {"id": "p", "text": "travel policy v2", "date": "2021-06-01"},
    ]
    with open_store(tmp_path / "s") as store:
        v1, v2 = store.add(batch)
        assert store.add(batch) == [v1, v2]
        assert store.add(batch[:1]) == [v1]
        assert len(store) == 2
        assert query_ids(store, "2021-03-01") == {v1}
        assert query_ids(store, "2021-07-01") == {v2}
        assert query_ids(store, None) == {v2}


def test_filters_intersect_with_validity(tmp_path):
    with open_store(tmp_path / "s") as store:
        a1, a2, a_undated, b1, c1 = store.add(
            [
                {"id": "a1", "text": "sla draft", "author": "Aisha Patel", "date": "2023-01-01"},
                {"id": "a2", "text": "sla final", "author": "Aisha Patel", "date": "2023-02-01"},
                {"id": "a3", "text": "sla notes", "author": "Aisha Patel"},
                {"id": "b1", "text": "sla vendor", "author": "Ben Okafor", "date": "2023-01-15"},
                {"id": "c1", "text": "sla review", "date": "2023-01-20"},
            ]
        )
        store.supersede("a1", "a2", effective="2023-03-01")
        assert query_ids(store, "2023-02-15", authors=["Aisha Patel"]) == {a1, a2}
        assert query_ids(store, "2023-03-15", authors=["Aisha Patel"]) == {a2}
        assert query_ids(store, None, authors=["Aisha Patel"]) == {a2, a_undated}
        assert query_ids(store, "2023-03-15", authors="Ben Okafor") == {b1}
        assert query_ids(store, "2023-03-15", authors=["Aisha Patel", "Ben Okafor"]) == {a2, b1}
        assert query_ids(store, "2023-03-15", authors=["Nobody Known"]) == set()
        assert query_ids(store, "2023-03-15") == {a2, b1, c1}
        assert keys_of(store, mask_ids(store, "2023-02-15", authors=["Aisha Patel"])) == {"a1", "a2"}


@pytest.mark.parametrize("as_of", ["2023-02-15", "2023-02-15T10:00:00+02:00", None])
def test_candidate_mask_matches_query(tmp_path, as_of):
    with open_store(tmp_path / "s") as store:
        store.add(
            [
                {"id": "x", "text": "uptime", "author": AUTHORS[0], "date": "2023-02-15T08:30:00Z"},
                {"id": "y", "text": "uptime report", "date": "2023-02-15T09:00:00Z"},
                {"id": "z", "text": "uptime later", "date": "2023-02-16"},
            ]
        )
        assert mask_ids(store, as_of) == query_ids(store, as_of)


def test_supersede_many_is_one_commit_and_all_or_nothing(tmp_path):
    s = mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder())
    s.add([{"key": k, "text": f"text {k}", "date": "2023-01-0%d" % (i + 1)} for i, k in enumerate("abcd")])
    v = s.version
    with pytest.raises(mempp.DocumentNotFound, match="event 1"):
        s.supersede_many([("a", "b"), ("zz", "c")])
    with pytest.raises(mempp.ValidationError, match="record 1.*effective"):
        s.supersede_many([("a", "b"), ("c", "d", "not a date")])
    assert s.version == v and len(s.query("text", k=10)) == 4
    s.supersede_many([("a", "b"), ("c", "d", "2023-01-02")], backdate=True)  # c retired before its own date: asked for
    assert s.version == v + 1
    assert sorted(h.key for h in s.query("text", k=10)) == ["b", "d"]
    assert [h.key for h in s.query("text", k=10, as_of="2023-01-01")] == ["a"]
    # c was retired from 2023-01-02, before d (dated 2023-01-04) existed
    assert [h.key for h in s.query("text", k=10, as_of="2023-01-03")] == ["b"]
