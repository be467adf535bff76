"""T6: a hypothesis state machine against a plain dict model of documents, supersessions and versions.

Rules: add a batch (versions of one id out of date order, ``supersedes`` naming ids stored
before or added later in the same batch, with or without ``backdate``: the model says which
the store must refuse), supersede, query as of a date (candidate set and every hit checked
against the temporal model of ``test_temporal``), get/history, close and reopen, a pinned
reader that refreshes, open an older version, and "crash": drop the Store without closing
it, or carry on from a copy of the directory taken while it was open.

``MEMPP_LONG=1`` runs many more examples. The number of examples run is printed at the end
(``pytest -s``) for the closing note.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import mempp

from strategies import AUTHORS, as_of_values, author_filters, doc_dates, documents, texts
from test_temporal import Model, both

LONG = os.environ.get("MEMPP_LONG") == "1"
RUNS = {"examples": 0, "steps": 0, "queries": 0, "ranked": 0, "ranked_found": 0, "refused": 0, "forward": 0}
ANALYZER = mempp.storage.Analyzer()


def open_store(path, **kw):
    # merges run when the machine asks (rule ``merge``), so that each version is one the model knows
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual", **kw)


def model_at(model: Model, n_docs: int, n_events: int) -> Model:
    """The model as it was at a committed version (documents and events are append-only)."""
    m = Model()
    m.docs = model.docs[:n_docs]
    m.events = model.events[:n_events]
    return m


def all_valid(store, as_of, authors=None) -> list:
    n = max(len(store), 1)
    return list(store.query("sla budget", as_of=as_of, k=n, depth=n, legs=["vector"], reserve=False, authors=authors))


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="mempp-t6-"))
        self.path = self.tmp / "s"
        self.store = open_store(self.path)
        self.model = Model()
        self.at_version: dict[int, tuple[int, int]] = {0: (0, 0)}  # version -> (model docs, model events)
        self.keys: list[str] = []
        self.counter = 0
        self.reader = None  # a read-only Store pinned to reader_version until it refreshes
        self.reader_version = 0
        self.instants: list[str] = []  # as_of values exactly at a date the history used (boundaries)
        self.stored: list[dict] = []  # every keyed input that was stored as a new document (to replay)
        RUNS["examples"] += 1

    @initialize()
    def open_reader(self) -> None:
        self.reader = mempp.Store.open(self.path, read_only=True)

    def teardown(self) -> None:
        for s in (self.store, self.reader):
            if s is not None:
                s.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- bookkeeping ------------------------------------------------------------------------------
    def _committed(self, before: tuple[int, int]) -> None:
        """After a write: a new version iff the model changed, and remember what that version holds."""
        now = (len(self.model.docs), len(self.model.events))
        version = max(self.at_version)
        if now != before:
            version += 1
            self.at_version[version] = now
        assert self.store.version == version
        RUNS["steps"] += 1

    def _seen(self, value: str | None) -> None:
        if value is not None:
            self.instants.append(f"{value}T00:00:00" if len(value) == 10 else value)

    def as_of(self, data):
        """None, any date (far future included), (often) exactly a document date or an effective
        date of the history, or an instant between two writes (after one's "effective now"
        supersessions were recorded, before the next's)."""
        kind = data.draw(st.sampled_from(("any", "boundary", "between")), label="as_of kind")
        if kind == "boundary" and self.instants:
            return data.draw(st.sampled_from(self.instants), label="as_of")
        if kind == "between" and self.model.spans:
            return self.model.between(data.draw(st.integers(0, len(self.model.spans) - 1), label="after write"))
        return data.draw(as_of_values, label="as_of")

    def _check_query(self, store, model: Model, as_of, authors) -> None:
        got = all_valid(store, as_of, authors)
        want = model.valid(as_of, authors)
        assert {h.doc_id for h in got} == want, (as_of, authors)
        assert all(a.score >= b.score for a, b in zip(got, got[1:]))
        RUNS["queries"] += 1

    # --- writes ---------------------------------------------------------------------------------
    @rule(data=st.data())
    def add(self, data) -> None:
        batch = []
        keys_before = set(self.keys)
        for _ in range(data.draw(st.integers(1, 4), label="size")):
            kinds = ["new", "keyless"] + (["readd"] if self.keys else []) + (["replay"] if self.stored else [])
            kind = data.draw(st.sampled_from(kinds), label="kind")
            if kind == "replay":  # an exact replay of a stored version, active or superseded: a re-ingest
                doc = dict(data.draw(st.sampled_from(self.stored), label="replayed"))
            elif kind == "keyless":
                doc = data.draw(documents(text=data.draw(st.one_of(texts(1, 3), st.just(" \n ")))))
            else:
                self.counter += 1
                key = f"k{self.counter}" if kind == "new" else data.draw(st.sampled_from(self.keys))
                doc = data.draw(documents(key=key, text=data.draw(texts()) + f" item{self.counter}"))
                if kind == "new":
                    self.keys.append(key)
                others = [k for k in self.keys if k != key]
                if others and data.draw(st.integers(0, 3)) == 0:
                    doc["supersedes"] = data.draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True))
            batch.append(doc)
            self._seen(doc.get("date"))
        # A forward reference: a document names an id that a later document of the batch adds first.
        ids = [d.get("id") for d in batch]
        fresh = [j for j, k in enumerate(ids) if j and k is not None and k not in keys_before and ids.index(k) == j]
        if fresh and data.draw(st.integers(0, 2), label="forward") == 0:
            j = data.draw(st.sampled_from(fresh), label="forward target")
            i = data.draw(st.integers(0, j - 1), label="forward from")
            if batch[i].get("id") != batch[j]["id"] and "text" in batch[i] and batch[i]["text"].strip():
                batch[i] = {**batch[i], "supersedes": list(batch[i].get("supersedes", ())) + [batch[j]["id"]]}
                RUNS["forward"] += 1
        backdate = data.draw(st.integers(0, 2), label="backdate") == 0
        before = (len(self.model.docs), len(self.model.events))
        n = len(self.model.docs)
        got = both(lambda: self.store.add(batch, backdate=backdate), lambda at: self.model.add(batch, at, backdate))
        if got is None:
            RUNS["refused"] += 1
            self.keys = [k for k in self.keys if k in keys_before]
            self._committed(before)
            return
        for i, (doc, doc_id) in enumerate(zip(batch, got)):
            if doc_id is not None and doc_id >= n and "id" in doc and got.index(doc_id) == i:
                self.stored.append({f: doc[f] for f in ("id", "text", "author", "date") if f in doc})
        self._committed(before)

    @precondition(lambda self: len(self.keys) >= 2)
    @rule(data=st.data(), effective=st.one_of(st.none(), doc_dates))
    def supersede(self, data, effective) -> None:
        live = [k for k in self.keys if self.model.active_with_key(k) is not None]
        new = data.draw(st.sampled_from(live or self.keys), label="new")
        old = data.draw(st.sampled_from([k for k in self.keys if k != new]), label="old")
        self._seen(effective)
        before = (len(self.model.docs), len(self.model.events))
        if live:  # a replacement that is itself superseded is refused (tests/test_first_hour.py)
            both(lambda: self.store.supersede(old, new, effective=effective, backdate=True), lambda at: self.model.supersede(old, new, effective, at))
        self._committed(before)

    @rule(force=st.booleans())
    def merge(self, force) -> None:
        """Merging publishes versions that hold what the version before them held."""
        before = self.store.version
        got = self.store.merge(force=force)
        assert self.store.version == before + got["merges"]
        for v in range(before + 1, self.store.version + 1):
            self.at_version[v] = self.at_version[before]

    # --- reads ----------------------------------------------------------------------------------
    @rule(data=st.data(), authors=author_filters)
    def query(self, data, authors) -> None:
        self._check_query(self.store, self.model, self.as_of(data), authors)

    @rule(data=st.data(), k=st.integers(0, 6))
    def query_top_k(self, data, k) -> None:
        """A ranked query with every leg and the reserve: only valid documents, exactly as many as
        asked while there are that many (the vector leg ranks every candidate up to its depth)."""
        as_of = self.as_of(data)
        hits = self.store.query("sla uptime Aisha budget", as_of=as_of, k=k)
        valid = self.model.valid(as_of)
        assert {h.doc_id for h in hits} <= valid
        assert len({h.doc_id for h in hits}) == len(hits) == min(k, len(valid))

    @precondition(lambda self: self.stored)
    @rule(data=st.data())
    def query_unique_terms(self, data) -> None:
        """Lexical only, words that each occur in one stored document (its ``itemN``): the model
        ranks it. Exactly the valid documents holding one of the words, by BM25: equal idf and
        tf, so the shorter document first, then the later ingested."""
        as_of = self.as_of(data)
        picked = data.draw(st.lists(st.sampled_from(self.stored), min_size=1, max_size=3, unique_by=lambda d: d["text"]), label="docs")
        words = [d["text"].split()[-1] for d in picked]
        hits = self.store.query(" ".join(words), as_of=as_of, k=5, legs=["lexical"], reserve=False)
        valid = self.model.valid(as_of)
        holders = [d for d in self.model.docs if d.id in valid and set(d.text.split()) & set(words)]
        want = sorted(holders, key=lambda d: (len(ANALYZER.terms(d.text)), -d.id))
        assert [h.doc_id for h in hits] == [d.id for d in want], (as_of, words)
        RUNS["ranked"] += 1
        RUNS["ranked_found"] += bool(want)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def get_and_history(self, data) -> None:
        key = data.draw(st.sampled_from(self.keys))
        doc = self.model.resolve(key)
        rec = self.store.get(key)
        assert rec.doc_id == doc.id and rec.key == key and rec.author == doc.author
        assert (rec.valid_until is None) == self.model.active(doc.id)
        assert [r.doc_id for r in self.store.history(key)] == [d.id for d in self.model.docs if d.key == key]

    @rule(data=st.data())
    def pinned_reader(self, data) -> None:
        """The reader sees its version, whatever was committed since."""
        as_of = self.as_of(data)
        assert self.reader.version == self.reader_version
        assert len(self.reader) == self.at_version[self.reader_version][0]
        self._check_query(self.reader, model_at(self.model, *self.at_version[self.reader_version]), as_of, None)

    @rule()
    def refresh_reader(self) -> None:
        self.reader_version = self.reader.refresh()
        assert self.reader_version == max(self.at_version)

    @precondition(lambda self: len(self.at_version) > 1)
    @rule(data=st.data())
    def open_older_version(self, data) -> None:
        as_of = self.as_of(data)
        v = data.draw(st.sampled_from(sorted(self.at_version)[1:]), label="version")
        with mempp.Store.open(self.path, version=v) as old:
            assert old.version == v and len(old) == self.at_version[v][0]
            self._check_query(old, model_at(self.model, *self.at_version[v]), as_of, None)
            assert [x["version"] for x in old.versions()] == list(range(1, v + 1))

    # --- lifecycle ------------------------------------------------------------------------------
    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = open_store(self.path)

    @rule()
    def crash(self) -> None:
        """Drop the writer without close(): its lock must not outlive it, and nothing is lost."""
        self.store = None
        gc.collect()
        self.store = open_store(self.path)

    @rule()
    def crash_to_copy(self) -> None:
        """Carry on from a copy of the directory taken while the store was open (and never closed)."""
        copy = self.tmp / f"c{self.counter}-{len(self.at_version)}"
        self.counter += 1
        shutil.copytree(self.path, copy)
        self.store = None
        self.reader.close()
        shutil.rmtree(self.path)
        self.path = copy
        self.store = open_store(self.path)
        self.reader = mempp.Store.open(self.path, read_only=True)
        self.reader_version = self.reader.version

    @invariant()
    def same_counts(self) -> None:
        if self.store is not None:
            assert len(self.store) == len(self.model.docs)
            assert self.store.version == max(self.at_version)


StoreMachine.TestCase.settings = settings(
    max_examples=500 if LONG else 40,
    stateful_step_count=50 if LONG else 30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
TestStoreMachine = pytest.mark.slow(StoreMachine.TestCase)


@pytest.mark.slow
def test_the_machine_checks_what_it_claims() -> None:
    """A short run of the machine must write, check queries against the model and rank documents
    by the model: a rule that never runs (a precondition that never holds, a strategy that
    draws nothing) would otherwise leave the machine passing while checking nothing. Prints the
    figures for the closing note (``pytest -s``; the long run's are printed the same way)."""
    from hypothesis.stateful import run_state_machine_as_test

    before = dict(RUNS)
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=20, stateful_step_count=25, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    ran = {k: RUNS[k] - before[k] for k in RUNS}
    print(f"\nT6 state machine (short run): {ran}")
    assert ran["examples"] >= 20 and ran["steps"] >= 20 and ran["queries"] >= 20, ran
    assert ran["ranked"] >= 3 and ran["ranked_found"] >= 1, ran
    assert ran["forward"] >= 3 and ran["refused"] >= 1, ran
