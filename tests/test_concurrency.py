"""T7: one writer process appends and supersedes while reader threads and a reader process query.

Every query records the version it ran on (``Hits.version``) and the documents valid at its
``as_of``; the oracle replays the writer's operations (a pure function of a seed) into the
temporal model of ``test_temporal`` up to that version. Zero violations are allowed; no
reader's version ever goes backwards; a second writer is refused at once; a SIGKILLed
writer's lock is free as soon as the process is gone.

Runs 30 s by default (``MEMPP_T7_SECONDS`` to change it; ``MEMPP_LONG=1`` runs 600 s). The writer
runs until the test kills it (its own limit only guards against an orphan), so a loaded machine
that slows the test down cannot end the writer while the test still expects it to hold the lock.
The figures (duration, queries checked, violations) are printed (``pytest -s``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mempp

from conc_worker import AS_OFS, QUERY, all_valid, operations
from test_temporal import Ambiguous, Model, Recorded, as_of_instant, micros, wall_us

HERE = Path(__file__).resolve().parent
WORKER = HERE / "conc_worker.py"
SECONDS = float(os.environ.get("MEMPP_T7_SECONDS", 600 if os.environ.get("MEMPP_LONG") == "1" else 30))
SEED = 20261130
# When the writer process records a supersession "effective now" (an undated new version) is
# known only to be after this module was imported; the readers' as_of values (AS_OFS, all in
# 2023 or before) are all before it, where such an event is not in effect yet.
WRITER_SPAN = Recorded(wall_us(), 2**62)


class Oracle:
    """The model after each number of the writer's operations (``at``, ``valid``: by operations; a
    version's count is read from the store's history, merges adding none), and the valid set per (operations, as_of)."""

    def __init__(self, seed: int) -> None:
        self.model = Model()
        self.ops = operations(seed)
        self.at: dict[int, tuple[int, int]] = {0: (0, 0)}
        self.cache: dict[tuple[int, str | None], frozenset[int]] = {}

    def _extend(self, version: int) -> None:
        while max(self.at) < version:
            op = next(self.ops)
            if op[0] == "add":
                self.model.add(op[1], WRITER_SPAN)
            else:
                self.model.supersede(op[1], op[2], op[3], WRITER_SPAN)
            self.at[max(self.at) + 1] = (len(self.model.docs), len(self.model.events))

    def valid(self, version: int, as_of: str | None) -> frozenset[int]:
        """``Model.valid`` restricted to the documents and events of ``version``, indexed for speed."""
        got = self.cache.get((version, as_of))
        if got is None:
            self._extend(version)
            n, e = self.at[version]
            theta = as_of_instant(as_of)
            if theta is not None and micros(theta) >= WRITER_SPAN.lo:
                raise Ambiguous(as_of)  # the fast rule below holds only before the writer's records
            ends: dict[int, list] = {}
            for old, _, eff in self.model.events[:e]:
                ends.setdefault(old, []).append(eff)
            out = set()
            for d in self.model.docs[:n]:
                effs = ends.get(d.id, ())
                if theta is None:
                    ok = not effs
                else:
                    ok = d.date is not None and d.date <= theta and not any(not isinstance(x, Recorded) and x <= theta for x in effs)
                if ok:
                    out.add(d.id)
            got = self.cache[(version, as_of)] = frozenset(out)
        return got

    def slow_valid(self, version: int, as_of: str | None) -> set[int]:
        """The model's own rule (to check the indexed one above)."""
        self._extend(version)
        m = Model()
        n, e = self.at[version]
        m.docs, m.events = self.model.docs[:n], self.model.events[:e]
        return m.valid(as_of)


def _thread_reader(name, store, stop, log, errors, own: bool) -> None:
    last = 0
    i = 0
    try:
        while not stop.is_set():
            if own and i % 3 == 0:
                store.refresh()
            as_of = AS_OFS[i % len(AS_OFS)]
            version, ids = all_valid(store, as_of)
            if version < last:
                errors.append(f"{name}: version went back from {last} to {version}")
            last = version
            log.append((name, version, as_of, tuple(ids)))
            i += 1
    except Exception as exc:  # pragma: no cover - reported by the test
        errors.append(f"{name}: {type(exc).__name__}: {exc}")


def _refresher(store, stop, errors) -> None:
    last = 0
    while not stop.is_set():
        v = store.refresh()
        if v < last:
            errors.append(f"refresh went back from {last} to {v}")
        last = v
        time.sleep(0.02)


@pytest.mark.slow
def test_readers_see_whole_commits_while_a_writer_runs(tmp_path):
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:  # version 0 exists as an empty store
        pass
    writer = subprocess.Popen(
        [sys.executable, str(WORKER), "writer", str(path), str(SEED), str(4 * SECONDS + 600), "0.02"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    reader_out = tmp_path / "reader.jsonl"
    reader = subprocess.Popen(
        [sys.executable, str(WORKER), "reader", str(path), str(SECONDS), str(reader_out), "7"],
        stderr=subprocess.PIPE, text=True,
    )
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        assert writer.stdout.readline().strip() == "1", writer.stderr.read()  # the first commit is acknowledged
        start = time.monotonic()
        # The writer's acknowledgements and messages are read as they come: a full pipe would stop it.
        acked, writer_err = [1], []
        drains = [threading.Thread(target=lambda: acked.extend(int(x) for x in writer.stdout), daemon=True),
                  threading.Thread(target=lambda: writer_err.extend(writer.stderr), daemon=True)]
        for t in drains:
            t.start()
        shared = mempp.Store.open(path, read_only=True)  # one Store, several threads, refreshed by another
        own = [mempp.Store.open(path, read_only=True) for _ in range(2)]
        log: list = []
        errors: list[str] = []
        threads = [threading.Thread(target=_refresher, args=(shared, stop, errors))]
        threads += [threading.Thread(target=_thread_reader, args=(f"shared{i}", shared, stop, log, errors, False)) for i in range(2)]
        threads += [threading.Thread(target=_thread_reader, args=(f"own{i}", s, stop, log, errors, True)) for i, s in enumerate(own)]
        for t in threads:
            t.start()

        refusals = 0
        second = mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual")
        while time.monotonic() - start < SECONDS:
            time.sleep(min(5.0, max(0.0, SECONDS - (time.monotonic() - start))))
            before = second.refresh()
            try:  # a second writer is refused at once, from another process
                second.add([{"id": "intruder", "text": "a second writer"}])
            except mempp.StoreLockedError:
                pass
            else:
                state = "was running" if writer.poll() is None else f"had ended with {writer.returncode}"
                pytest.fail(f"a second writer was let in after {time.monotonic() - start:.1f} s; the writer {state}: {''.join(writer_err)[-2000:]}")
            refusals += 1
            with pytest.raises(mempp.DocumentNotFound):
                second.history("intruder")
            assert second.version == before
        stop.set()
        for t in threads:
            t.join()
        duration = time.monotonic() - start
        assert reader.wait(timeout=120) == 0, reader.stderr.read()
        assert writer.poll() is None, f"the writer ended on its own with {writer.returncode}: {''.join(writer_err)[-2000:]}"

        # Kill the writer mid-run: the kernel frees its flock, so the next writer gets it at once.
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        for t in drains:
            t.join()
    finally:
        stop.set()
        for t in threads:
            t.join()
        for proc in (writer, reader):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    second.refresh()
    version = second.version
    second.add([{"id": "after-kill", "text": "the lock was free", "date": "2024-01-01"}])  # no StoreLockedError
    assert second.version == version + 1
    second.close()
    shared.close()
    for s in own:
        s.close()

    oracle = Oracle(SEED)
    with mempp.Store.open(path, version=version) as final:  # and the whole store equals the model
        ops_at, ops, merges = {0: 0}, 0, 0  # version -> writer operations it holds (a merge adds none)
        for h in final.versions():
            ops += h["kind"] != "merge"
            merges += h["kind"] == "merge"
            ops_at[h["version"]] = ops
        assert ops_at[version] >= max(acked)  # every acknowledged operation is there
        oracle._extend(ops_at[version])
        assert len(final) == oracle.at[ops_at[version]][0]
        for d in oracle.model.docs[: oracle.at[ops_at[version]][0]]:
            assert final.get(d.id).key == d.key

    proc_log = [json.loads(line) for line in reader_out.read_text().splitlines()]
    proc_versions = [r["v"] for r in proc_log]
    assert proc_versions == sorted(proc_versions), "the reader process's version went backwards"
    checked = violations = 0
    examples = []
    for name, v, as_of, ids in itertools.chain(log, (("process", r["v"], r["as_of"], tuple(r["ids"])) for r in proc_log)):
        checked += 1
        if frozenset(ids) != oracle.valid(ops_at[v], as_of):
            violations += 1
            examples.append((name, v, as_of))
    for v in sorted({ops_at[v] for _, v, _, _ in log})[::50]:  # the indexed oracle agrees with the model's own rule
        for as_of in AS_OFS:
            assert oracle.valid(v, as_of) == oracle.slow_valid(v, as_of)
    versions_seen = len({v for _, v, _, _ in log} | set(proc_versions))
    print(
        f"\nT7: {duration:.1f} s, writer committed {version} versions ({merges} of them merges; {oracle.at[ops_at[version]][0]} documents, "
        f"{oracle.at[ops_at[version]][1]} supersessions); {checked} queries checked ({len(log)} in threads, {len(proc_log)} in a "
        f"process) over {versions_seen} versions; {violations} violations; {refusals} second-writer refusals"
    )
    assert not errors, errors[:5]
    assert violations == 0, examples[:5]
    assert len(proc_log) > 0 and len(log) > 0 and versions_seen > 1


def test_second_writer_in_the_same_process_is_refused(tmp_path):
    """flock is per open file: two Stores in one process exclude each other too; close() frees it."""
    path = tmp_path / "s"
    a = mempp.Store.open(path, embedder=mempp.HashEmbedder())
    b = mempp.Store.open(path, embedder=mempp.HashEmbedder())
    a.add([{"id": "x", "text": "first writer"}])
    with pytest.raises(mempp.StoreLockedError, match="another writer"):
        b.add([{"id": "y", "text": "second writer"}])
    with pytest.raises(mempp.StoreLockedError):
        b.supersede("x", "x")
    assert b.version == 0 and b.refresh() == a.version == 1  # the refused writer wrote nothing
    a.close()
    b.add([{"id": "y", "text": "second writer"}])  # free once the first closed
    assert b.version == 2 and b.get("x").text == "first writer"
    b.close()


def test_threads_share_one_store_while_it_refreshes(tmp_path):
    """get/history/query from many threads right after a refresh: the lazily built key index
    is built once (no duplicated history), and every answer comes from one snapshot."""
    path = tmp_path / "s"
    writer = mempp.Store.open(path, embedder=mempp.HashEmbedder())
    writer.add([{"id": "seed", "text": "seed"}])
    reader = mempp.Store.open(path, read_only=True)
    n_keys = 3000
    writer.add([{"id": f"k{i}", "text": f"budget item {i}", "date": "2023-01-01"} for i in range(n_keys)])
    writer.supersede("k0", "k1")
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            barrier.wait()
            if t == 0:
                reader.refresh()
            for i in range(t, n_keys, 97):
                try:
                    h = reader.history(f"k{i}")
                except mempp.DocumentNotFound:  # the version before the keys were added
                    h = []
                if len(h) not in (0, 1):
                    errors.append(f"history(k{i}) has {len(h)} entries")
            hits = reader.query("budget", k=10**9, depth=10**9, legs=["vector"], reserve=False)
            if hits.version == 3 and len(hits) != n_keys:  # v3: k0 superseded, seed still valid
                errors.append(f"v3 query saw {len(hits)} documents")
            if hits.version == 1 and len(hits) != 1:
                errors.append(f"v1 query saw {len(hits)} documents")
        except Exception as exc:  # pragma: no cover
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    reader.refresh()
    assert [len(reader.history(f"k{i}")) for i in range(n_keys)] == [1] * n_keys
    assert reader.get("k0").valid_until is not None
    writer.close()
    reader.close()


def test_open_snapshots_outlive_merges_and_every_version_opens(tmp_path):
    """A snapshot keeps answering after merges remove the files it was opened from (they are
    mapped), and every version committed still opens afterwards."""
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as w:
        w.add([{"id": "a", "text": "one"}])
        old = mempp.Store.open(path, read_only=True)
        first = set((path / "segments").iterdir())
        for i in range(5):
            w.add([{"id": "a", "text": f"version {i}"}])
        w.merge(force=True)
        assert not first & set((path / "segments").iterdir())  # the first commit's files are gone
    for v in range(1, 7):
        with mempp.Store.open(path, version=v) as s:
            assert len(s) == v and s.get("a").text == ("one" if v == 1 else f"version {v - 2}")
    assert old.get("a").text == "one" and old.version == 1
    assert [h.key for h in old.query("one", k=1, legs=["lexical"])] == ["a"]
    old.close()


READS_SECONDS = float(os.environ.get("MEMPP_READS_SECONDS", 8))


def test_every_read_api_is_snapshot_safe_while_another_process_commits(tmp_path):
    """stats, get, history, versions, explain and query, in a loop in this process while a
    writer process commits, supersedes and merges (removing files and writing temporary ones):
    none raises, and each call's counts are those of the one version the Store holds."""
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()):
        pass
    writer = subprocess.Popen(
        [sys.executable, str(WORKER), "writer", str(path), str(SEED), str(READS_SECONDS + 600), "0.005"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # it runs until it is killed below
    errors: list[str] = []
    calls = versions_seen = 0
    try:
        with mempp.Store.open(path, read_only=True) as store:
            while store.refresh() == 0 and writer.poll() is None:  # the clock starts at the first commit
                time.sleep(0.01)
            deadline = time.monotonic() + READS_SECONDS
            seen = set()
            i = 0
            while time.monotonic() < deadline and writer.poll() is None:
                i += 1
                try:
                    if i % 2:
                        store.refresh()
                    v, n = store.version, len(store)
                    seen.add(v)
                    st = store.stats()
                    if (st["version"], st["documents"]) != (v, n):
                        errors.append(f"stats {st['version']}/{st['documents']} on a Store at {v}/{n}")
                    listed = store.versions()
                    if listed and listed[-1]["version"] != v:
                        errors.append(f"versions() ends at {listed[-1]['version']} on a Store at {v}")
                    try:
                        store.get("k1")
                        store.history("k1")
                    except mempp.DocumentNotFound:
                        if n:
                            raise
                    plan = store.explain(QUERY, k=3)
                    hits = store.query(QUERY, k=3)
                    if hits.version != v or plan.candidates > n:
                        errors.append(f"a query on version {hits.version} of a Store at {v}")
                    if i % 10 == 0:  # a process opening the store afresh reads it as well
                        with mempp.Store.open(path, read_only=True) as fresh:
                            fresh.stats()
                    calls += 7
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
            versions_seen = len(seen)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait()
    print(f"\nread APIs: {calls} calls over {versions_seen} versions while a writer committed; {len(errors)} errors")
    assert not errors, errors[:5]
    assert writer.returncode == -signal.SIGKILL, writer.stderr.read()[-2000:]  # it ran the whole time
    assert versions_seen > 3 and calls > 0


def test_stats_counts_a_file_removed_while_it_is_walked_as_gone(tmp_path, monkeypatch):
    """The directory walk of stats() meets files that vanish between listing and measuring
    (another process's temporary file renamed away): they count as gone, nothing raises."""
    import mempp.store as store_module

    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        s.add([{"id": "a", "text": "one"}])
        doomed = [path / ".CURRENT.tmp-17898", path / "segments" / "stray.tmp"]
        for p in doomed:
            p.write_bytes(b"x" * 1000)
        full = s.stats()["bytes_on_disk"]
        real = os.scandir

        class Vanishing:  # a directory entry whose file is removed right after its type is read
            def __init__(self, entry):
                self.entry, self.path, self.name = entry, entry.path, entry.name

            def is_dir(self, **kw):
                return self.entry.is_dir(**kw)

            def is_file(self, **kw):
                got = self.entry.is_file(**kw)
                if Path(self.path) in doomed:
                    Path(self.path).unlink()
                return got

            def stat(self, **kw):
                return os.stat(self.path, follow_symlinks=False)

        class listing_then_removal:  # os.scandir whose doomed files vanish between listing and measuring
            def __init__(self, folder):
                with real(folder) as it:
                    self.entries = iter([Vanishing(e) for e in it])

            def __iter__(self):
                return self.entries

            def __enter__(self):
                return self.entries

            def __exit__(self, *exc):
                return None

        monkeypatch.setattr(store_module.os, "scandir", listing_then_removal)
        got = s.stats()
        assert got["bytes_on_disk"] == full - 2000 and got["documents"] == 1


def test_add_counts_what_each_call_committed_when_threads_share_a_commit(tmp_path):
    """Calls of several threads coalesce into one commit; each call's ``Added`` still counts
    its own documents: one stored by an earlier call of the same commit is ``existing``."""
    with mempp.Store.open(tmp_path / "s", embedder=mempp.HashEmbedder()) as s:
        s.add([{"text": "stored before"}])
        barrier = threading.Barrier(8)
        got: list = [None] * 8

        def work(t: int) -> None:
            barrier.wait()
            got[t] = s.add([{"text": f"own {t}"}, {"text": "shared by all"}, {"text": "stored before"}, {"text": " "}])

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(g, mempp.Added) and g.new + g.existing + g.skipped == 4 and g.skipped == 1 for g in got)
        assert sum(g.new for g in got) == len(s) - 1 == 9  # each own text, and the shared one once
        assert sorted(g.new for g in got) == [1] * 7 + [2]
        again = s.add([{"text": "own 0"}, {"text": "brand new"}])
        assert (again.new, again.existing, again.skipped) == (1, 1, 0) and again == [got[0][0], 10]
