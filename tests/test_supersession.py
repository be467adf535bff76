"""One supersession rule for every write path (``mempp.supersession.plan``; README, *Temporal rules*).

The oracle is the rule itself, worked out by hand for each case: which versions are valid at
which dates, what is refused and with which words, and that a refused write leaves the store
as it was. The same inputs go through ``Store.add``, ``mempp add`` of JSON Lines and of
Parquet (one commit per line, so references cross commits), and a document table as
``mempp.distributed.embed`` makes one. The random counterpart is the model of
``test_temporal`` (``histories``) and ``test_state_machine``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mempp

UTC = timezone.utc

# The reproduction: the later line carries the earlier date.
REFUND = [
    {"id": "page", "text": "Refund window is 60 days.", "date": "2023-05-01"},
    {"id": "page", "text": "Refund window is 30 days.", "date": "2023-01-01"},
]


def _open(path, **kw):
    return mempp.Store.open(path, embedder=mempp.HashEmbedder(), **kw)


def valid(store, as_of, key="page") -> set[str]:
    """The texts of the documents with ``key`` valid at ``as_of`` (the vector leg scans every candidate)."""
    n = max(len(store), 1)
    return {h.text for h in store.query("refund window", as_of=as_of, k=n, depth=n, legs=["vector"], reserve=False) if h.key == key}


def check_refund(store) -> None:
    sixty, thirty = "Refund window is 60 days.", "Refund window is 30 days."
    assert valid(store, "2022-12-31") == set()
    assert valid(store, "2023-01-01") == {thirty}
    assert valid(store, "2023-04-30") == {thirty}
    assert valid(store, "2023-05-01") == {sixty}  # the later-dated version takes over at its date
    assert valid(store, "2023-12-31") == {sixty}
    assert valid(store, None) == {sixty}
    hist = {r.text: r for r in store.history("page")}
    assert hist[sixty].valid_until is None and hist[thirty].valid_until == datetime(2023, 5, 1, tzinfo=UTC)


def _cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "mempp", *map(str, args)], capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _write(path, docs):
    if path.suffix == ".parquet":
        names = list(dict.fromkeys(k for d in docs for k in d))  # from_pylist takes its columns from the first row
        pq.write_table(pa.Table.from_pylist([{k: d.get(k) for k in names} for d in docs]), path, row_group_size=1)
    else:
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


# --- Python API ------------------------------------------------------------------------------------
@pytest.mark.parametrize("one_call", [True, False])
def test_versions_of_one_id_are_ordered_by_date_whatever_the_input_order(tmp_path, one_call):
    with _open(tmp_path / "s") as s:
        if one_call:
            s.add(REFUND)
        else:
            for d in REFUND:
                s.add([d])
        check_refund(s)
        # a third version between the two: the earlier one now ends at its date, the later one stays
        mid, = s.add([{"id": "page", "text": "Refund window is 45 days.", "date": "2023-03-01"}])
        assert valid(s, "2023-02-28") == {"Refund window is 30 days."}
        assert valid(s, "2023-03-01") == {"Refund window is 45 days."}
        assert valid(s, "2023-05-01") == {"Refund window is 60 days."}
        assert s.get("page").text == "Refund window is 60 days."
        assert s.add(REFUND) == [0, 1]  # replaying the file changes nothing


def test_an_undated_version_stands_where_it_was_recorded(tmp_path):
    with _open(tmp_path / "s") as s:
        undated, = s.add([{"id": "p", "text": "policy now"}])
        old, = s.add([{"id": "p", "text": "policy in 2021", "date": "2021-01-01"}])  # an earlier version
        assert s.get("p").doc_id == undated
        rec = s.get(old)
        assert rec.valid_until == s.get(undated).ingested_at  # until the undated one was recorded
        n = len(s)
        assert {h.doc_id for h in s.query("policy", as_of="2022-01-01", k=n, depth=n, legs=["vector"], reserve=False)} == {old}
        assert {h.doc_id for h in s.query("policy", k=n, depth=n, legs=["vector"], reserve=False)} == {undated}


def test_supersedes_naming_a_later_dated_document_needs_backdate(tmp_path):
    with _open(tmp_path / "s") as s:
        s.add([{"id": "a", "text": "budget approved", "date": "2023-06-01"}])
        version = s.version
        late = {"id": "b", "text": "budget revised", "date": "2023-01-01", "supersedes": "a"}
        with pytest.raises(mempp.ValidationError) as info:
            s.add([late])
        msg = str(info.value)
        assert info.value.field == "supersedes" and info.value.record == 0
        assert "'a'" in msg and "'b'" in msg and "backdate=True" in msg and "dated after" in msg
        assert s.version == version and len(s) == 1
        b, = s.add([late], backdate=True)  # asked for: a is never valid
        n = len(s)
        assert {h.key for h in s.query("budget", as_of="2023-07-01", k=n, depth=n, legs=["vector"], reserve=False)} == {"b"}


def test_supersedes_names_the_version_in_force_at_the_new_date(tmp_path):
    # "c" replaces what "a" said on c's date (a's first version); a's later version stands from its own date.
    with _open(tmp_path / "s") as s:
        a1, a2, c = s.add([
            {"id": "a", "text": "plan one", "date": "2023-01-01"},
            {"id": "a", "text": "plan three", "date": "2023-09-01"},
            {"id": "c", "text": "plan two", "date": "2023-05-01", "supersedes": "a"},
        ])
        assert s.get(a1).valid_until == datetime(2023, 5, 1, tzinfo=UTC)
        assert s.get(a2).valid_until is None and s.get(c).valid_until is None


def test_forward_reference_within_one_input(tmp_path):
    with _open(tmp_path / "s") as s:
        c1, c2 = s.add([
            {"id": "c1", "text": "rollout starts in May", "date": "2023-03-01", "supersedes": "c2"},
            {"id": "c2", "text": "rollout starts in April", "date": "2023-01-01"},
        ])
        assert s.get(c2).valid_until == datetime(2023, 3, 1, tzinfo=UTC) and s.get(c1).valid_until is None


def test_a_cycle_within_one_input_is_refused_naming_its_records(tmp_path):
    with _open(tmp_path / "s") as s:
        s.add([{"id": "seed", "text": "seed"}])
        version = s.version
        for dates in (("2023-01-01", "2023-01-01"), ("2023-01-01", "2023-02-01")):
            batch = [
                {"id": "c1", "text": "one", "date": dates[0], "supersedes": "c2"},
                {"id": "c2", "text": "two", "date": dates[1], "supersedes": "c1"},
            ]
            for backdate in (False, True):
                with pytest.raises(mempp.ValidationError, match="cycle") as info:
                    s.add(batch, backdate=backdate)
                msg = str(info.value)
                assert "'c1'" in msg and "'c2'" in msg and info.value.field == "supersedes", msg
        assert s.version == version and len(s) == 1


def test_an_id_found_nowhere_says_so(tmp_path):
    with _open(tmp_path / "s") as s:
        with pytest.raises(mempp.ValidationError, match="no document with id 'c2' in the store or in this input") as info:
            s.add([{"id": "ok", "text": "fine"}, {"id": "c1", "text": "x", "supersedes": "c2"}])
        assert info.value.record == 1 and info.value.field == "supersedes" and len(s) == 0


def test_supersede_many_is_checked_whatever_the_order_of_its_events(tmp_path):
    docs = [{"id": k, "text": f"per diem {k}", "date": d} for k, d in (("a", "2023-01-10"), ("b", "2024-02-12"), ("c", "2024-06-01"))]
    for events in ([("b", "c"), ("c", "b", "2024-07-01")], [("c", "b", "2024-07-01"), ("b", "c")]):
        with _open(tmp_path / f"s{events[0][0]}") as s:
            s.add(docs)
            with pytest.raises(mempp.ValidationError, match="itself superseded.*cycle"):
                s.supersede_many(events)
            assert s.version == 1


# --- mempp add: JSON Lines and Parquet, one commit per line ----------------------------------------
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_mempp_add_orders_versions_and_resolves_forward_references(tmp_path, suffix):
    src = _write(tmp_path / f"docs{suffix}", REFUND + [
        {"id": "c1", "text": "Refund form moved to the portal.", "date": "2023-03-01", "supersedes": "c2"},
        {"id": "c2", "text": "Refund form is on paper.", "date": "2023-01-01"},
    ])
    store = tmp_path / "s"
    _cli("add", store, src, "--batch-size", 1, "--embedder", "hash", "--quiet")
    with _open(store, read_only=True) as s:
        check_refund(s)
        assert s.get("c2").valid_until == datetime(2023, 3, 1, tzinfo=UTC)
        assert s.version == 3  # the line naming c2 and the line adding it: one commit
    _cli("add", store, src, "--batch-size", 1, "--quiet")  # again: nothing new
    with _open(store, read_only=True) as s:
        assert len(s) == 4 and s.version == 3


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_mempp_add_refuses_a_cycle_or_a_backdated_supersedes_before_committing(tmp_path, suffix):
    store = tmp_path / "s"
    with _open(store) as s:
        s.add([{"id": "seed", "text": "seed"}])
    filler = [{"id": f"f{i}", "text": f"note {i}", "date": "2023-01-01"} for i in range(3)]
    cycle = _write(tmp_path / f"cycle{suffix}", filler + [
        {"id": "x1", "text": "one", "date": "2023-02-01", "supersedes": "x2"},
        {"id": "x2", "text": "two", "date": "2023-01-01", "supersedes": "x1"},
    ])
    proc = _cli("add", store, cycle, "--batch-size", 1, "--quiet", check=False)
    assert proc.returncode == 1 and "cycle" in proc.stderr and "'x1'" in proc.stderr and "'x2'" in proc.stderr, proc.stderr
    late = _write(tmp_path / f"late{suffix}", filler + [
        {"id": "y0", "text": "later", "date": "2023-06-01"},
        {"id": "y1", "text": "earlier", "date": "2023-02-01", "supersedes": "y0"},
    ])
    proc = _cli("add", store, late, "--batch-size", 1, "--quiet", check=False)
    where = f"{late}:5" if suffix == ".jsonl" else f"{late}: row 5"
    assert proc.returncode == 1 and where in proc.stderr and "backdate" in proc.stderr and "'y0'" in proc.stderr, proc.stderr
    with _open(store, read_only=True) as s:
        assert len(s) == 1 and s.version == 1  # nothing of either file
    _cli("add", store, late, "--batch-size", 1, "--quiet", "--backdate")
    with _open(store, read_only=True) as s:
        assert len(s) == 6 and s.get("y0").valid_until == datetime(2023, 2, 1, tzinfo=UTC)


# --- a document table (what mempp.distributed.embed returns), added as Ray ingest adds it ----------
def test_a_document_table_follows_the_same_rule(tmp_path):
    from mempp.tables import records_table

    docs = REFUND + [
        {"id": "c1", "text": "Refund form moved to the portal.", "date": "2023-03-01", "supersedes": "c2"},
        {"id": "c2", "text": "Refund form is on paper.", "date": "2023-01-01"},
    ]
    table = records_table(enumerate(docs, 1))
    with _open(tmp_path / "s") as s:
        vectors = s.embedder.embed([d["text"] for d in docs])
        table = table.append_column("embedding", pa.array(list(vectors), pa.list_(pa.float32(), s.dim)))
        s.add(table, embeddings="embedding")
        check_refund(s)
        assert s.get("c2").valid_until == datetime(2023, 3, 1, tzinfo=UTC)
    bad = records_table([(1, {"id": "z", "text": "z", "date": "2022-06-01", "supersedes": "page"})])
    with _open(tmp_path / "s") as s, pytest.raises(mempp.ValidationError, match="backdate"):
        s.add(bad)
