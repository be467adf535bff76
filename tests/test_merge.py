"""Segment merging (storage/merge.py, engine/writes.py): the policy's bounds, and that a merge
changes no answer of any version.

The oracle of "no answer changes" is the store itself before the merge: every version's ranked
output (keys, scores, per-leg ranks, reserved flags) is recorded, segments are merged, and every
version is asked again.
"""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import mempp
from mempp.storage.merge import MERGE_FACTOR, level, plan
from strategies import VOCAB, as_of_for, histories

QUESTIONS = ("sla uptime", "budget review approved", "vendor contract renewal", "incident latency policy", "Aisha release")


# --- the policy, as a pure function ------------------------------------------------------------


def _simulate(commit_sizes: list[int], barrier_every: int = 0, factor: int = MERGE_FACTOR):
    """Apply the policy after every commit until it asks for nothing; the units' sizes and the
    documents rewritten, checked as it goes."""
    units: list[int] = []
    bars: list[bool] = []  # bars[i]: boundary after unit i is an ANN edge
    rewritten = 0
    worst = 0
    for c, size in enumerate(commit_sizes):
        if units:
            bars.append(bool(barrier_every) and c % barrier_every == 0)
        units.append(size)
        while (cand := plan(units, bars, factor=factor)) is not None:
            a, b = cand.start, cand.stop
            assert 0 <= a < b <= len(units) and b - a >= 2
            assert not any(bars[a : b - 1]), "merged across an ANN boundary"
            rewritten += sum(units[a:b])
            units[a:b] = [sum(units[a:b])]
            bars[a : b - 1] = []
        worst = max(worst, len(units))
    return units, rewritten, worst


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just(1), st.just(1), st.integers(0, 3), st.integers(1, 5000)), min_size=1, max_size=400))
def test_policy_bounds_the_segment_count_and_the_rewrites(sizes):
    units, rewritten, worst = _simulate(sizes)
    n = sum(sizes)
    levels = level(max(n, 1)) + 1
    assert sum(units) == n
    assert worst <= MERGE_FACTOR + (MERGE_FACTOR - 1) * levels + 1  # +1: the commit just appended
    # each document is rewritten about once per level; the pair rule adds at most a few more
    assert rewritten <= max(n, 1) * (2 * levels + 4)


def test_single_document_commits_merge_by_levels():
    units, rewritten, worst = _simulate([1] * 10_000)
    assert len(units) <= (MERGE_FACTOR - 1) * (level(10_000) + 1)
    assert rewritten <= 10_000 * (level(10_000) + 1)
    assert sorted(units, reverse=True) == units  # older units are the larger ones


def test_policy_never_crosses_ann_boundaries():
    units, _, _ = _simulate([1] * 500, barrier_every=37)
    assert len(units) >= 500 // 37


def test_a_bulk_commit_between_small_ones_does_not_strand_them():
    sizes = []
    for _ in range(60):
        sizes += [1, 1, 1, 4000]
    units, _, worst = _simulate(sizes)
    assert worst <= MERGE_FACTOR + (MERGE_FACTOR - 1) * (level(sum(sizes)) + 1) + 1


# --- merges change no answer ---------------------------------------------------------------------


def _answers(store: mempp.Store, as_ofs) -> list:
    out = []
    for q in QUESTIONS:
        for as_of in as_ofs:
            for opts in ({}, {"reserve": False, "k": 4}, {"context": (), "weights": (1, 1, 4)}):
                hits = store.query(q, as_of=as_of, **{"k": 6, **opts})
                out.append([(h.key, h.doc_id, h.score, tuple(sorted(h.ranks.items())), h.reserved) for h in hits])
    return out


def _every_version(path, as_ofs) -> dict[int, list]:
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as s:
        versions = [v["version"] for v in s.versions()]
    out = {}
    for v in versions:
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), version=v) as s:
            out[v] = (len(s), s.stats()["supersessions"], _answers(s, as_ofs))
    return out


def _replay(store: mempp.Store, history) -> None:
    for i, op in enumerate(history.ops):
        if op[0] == "add":
            for doc in op[1]:
                doc.setdefault("thread", f"t{i % 3}")
            try:  # a write the rule refuses (test_temporal's model says which) writes nothing
                store.add(op[1], backdate=op[2])
            except (mempp.ValidationError, mempp.DocumentNotFound):  # an id only a refused write had
                pass
        else:
            try:
                store.supersede(op[1], op[2], effective=op[3], backdate=True)
            except (mempp.ValidationError, mempp.DocumentNotFound):  # an id only a refused write had
                pass


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), history=histories(max_ops=14, max_batch=3))
def test_merging_changes_no_answer_of_any_version(tmp_path_factory, data, history):
    path = tmp_path_factory.mktemp("m") / "s"
    as_ofs = [None] + [data.draw(as_of_for(history)) for _ in range(2)]
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s:
        _replay(s, history)
        assume(len(s) > 0)
        segments = len(s.searcher().snapshot.segments)
    before = _every_version(path, as_ofs)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s:
        got = s.merge(force=data.draw(st.booleans()))
        assert len(s.searcher().snapshot.segments) <= segments
    after = _every_version(path, as_ofs)
    assert set(after) - set(before) == set(range(max(before) + 1, max(before) + got["merges"] + 1))
    for v, answer in before.items():
        assert after[v] == answer, v
    newest = max(after)
    assert after[newest] == before[max(before)]


def test_many_small_commits_answer_as_one_commit(tmp_path):
    """The same documents committed one by one (with merges) or at once: the same answers."""
    rng = np.random.default_rng(5)
    docs = [
        {"id": f"d{i}", "text": " ".join(rng.choice(VOCAB, 5)) + f" item{i}", "author": ["Ann Lee", "Bo Chen", None][i % 3],
         "date": f"2023-{1 + i % 12:02d}-{1 + i % 27:02d}", "thread": f"t{i % 7}"}
        for i in range(300)
    ]
    docs[40]["supersedes"] = ["d3"]
    docs[77] = {**docs[77], "id": "d5"}  # a new version of d5
    with mempp.Store.open(tmp_path / "one", embedder=mempp.HashEmbedder()) as one:
        one.add(docs)
        want = _answers(one, [None, "2023-06-30"])
    with mempp.Store.open(tmp_path / "many", embedder=mempp.HashEmbedder()) as many:
        for d in docs:
            many.add([d])
        many.wait_merges()
        assert len(many.searcher().snapshot.segments) < 40
        assert _answers(many, [None, "2023-06-30"]) == want
    with mempp.Store.open(tmp_path / "many", embedder=mempp.HashEmbedder(), read_only=True) as again:
        assert _answers(again, [None, "2023-06-30"]) == want


def test_a_reader_keeps_its_version_while_a_merge_removes_its_files(tmp_path):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as w:
        for i in range(20):
            w.add([{"id": f"d{i}", "text": f"budget review item{i}", "date": "2023-01-02"}])
        reader = mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True)
        want = [(h.key, h.score) for h in reader.query("budget review item7", k=5)]
        old_files = {p.name for p in (path / "segments").iterdir()}
        w.merge(force=True)
    assert not old_files <= {p.name for p in (path / "segments").iterdir()}  # merged-away files removed
    assert [(h.key, h.score) for h in reader.query("budget review item7", k=5)] == want
    assert reader.get("d3").text == "budget review item3"
    assert reader.refresh() > 20 and [(h.key, h.score) for h in reader.query("budget review item7", k=5)] == want
    reader.close()


def test_version_files_stay_small_whatever_the_number_of_commits(tmp_path):
    """A commit writes a version file the size of its change: deltas do not grow with the store."""
    path = tmp_path / "s"
    sizes = {}
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        for i in range(300):
            s.add([{"id": f"d{i}", "text": f"note {i} on the budget", "date": "2023-02-02"}])
            name = path / "manifests" / f"{s.version:08d}.json"
            doc = json.loads(name.read_bytes())
            sizes.setdefault(doc["kind"], []).append(name.stat().st_size)
    deltas = sizes["delta"]
    assert max(deltas[-50:]) <= max(deltas[:50]) * 1.2
    assert max(sizes["checkpoint"]) < 40_000
    assert len(list((path / "manifests").glob("0*.json"))) <= 2 * 32 + 2


def test_threads_adding_at_once_coalesce_into_fewer_commits(tmp_path):
    path = tmp_path / "s"
    results: dict[int, list] = {}
    errors: list = []
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s:
        s.add([{"id": "seed", "text": "seed"}])
        start = threading.Barrier(8)

        def worker(t: int) -> None:
            start.wait()
            for i in range(25):
                doc = {"id": f"t{t}-{i}", "text": f"thread {t} note {i}", "author": f"a{t}"}
                if t == 3 and i == 10:
                    doc["supersedes"] = "missing-key"  # this call alone must fail
                try:
                    results[(t, i)] = s.add([doc])
                except mempp.ValidationError as exc:
                    errors.append((t, i, exc))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert [(t, i) for t, i, _ in errors] == [(3, 10)] and errors[0][2].record == 0
        assert len(s) == 1 + 8 * 25 - 1
        for (t, i), ids in results.items():
            assert s.get(ids[0]).key == f"t{t}-{i}"
        commits = s.version - 1
        assert commits <= 8 * 25 - 1
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as r:
        assert len(r) == 200 and sorted(r.get(i).key for i in range(1, 200)) == sorted(f"t{t}-{i}" for t, i in results)


@pytest.mark.parametrize("step", ["merge_before_files", "merge_after_files", "after_manifest_fsync", "after_current_rename"])
def test_a_failed_merge_leaves_the_store_as_it_was(tmp_path, monkeypatch, step):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s:
        for i in range(12):
            s.add([{"id": f"d{i}", "text": f"budget review item{i}", "date": "2023-01-02"}])
        want = [(h.key, h.score) for h in s.query("budget item4", k=5)]
        version = s.version
        monkeypatch.setenv("MEMPP_FAILPOINT", f"{step}:raise")
        with pytest.raises(mempp.StoreWriteError, match=f"failpoint {step}"):
            s.merge()
        monkeypatch.delenv("MEMPP_FAILPOINT")
        if step == "after_current_rename":  # past the commit point: the merge is published
            assert s.refresh() >= version
        assert [(h.key, h.score) for h in s.query("budget item4", k=5)] == want
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s:
        assert len(s) == 12 and [(h.key, h.score) for h in s.query("budget item4", k=5)] == want
        s.merge()
        assert len(s.searcher().snapshot.segments) < 12
        assert [(h.key, h.score) for h in s.query("budget item4", k=5)] == want
        for v in range(1, version + 1):
            with mempp.Store.open(path, embedder=mempp.HashEmbedder(), version=v) as old:
                assert len(old) == v
    leftovers = sorted(p.name for p in (path / "segments").iterdir() if p.name.startswith("m"))
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as r:
        live = {f.name.split("/")[-1] for u in r.searcher().snapshot.state.units for f in u.files.values()}
    assert set(leftovers) <= live


def test_merge_policy_constants_are_sane():
    assert MERGE_FACTOR >= 2 and level(MERGE_FACTOR - 1) == 0 and level(MERGE_FACTOR) == 1
    assert level(MERGE_FACTOR**3) == 3 and math.isclose(math.log(MERGE_FACTOR**3, MERGE_FACTOR), 3)
