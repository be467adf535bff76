"""T3 and T4: I/O errors inside a commit.

T3: the Nth file operation of a commit (create, write, fsync, rename, directory fsync, unlink,
mkdir) raises EIO or ENOSPC, for every N. The add raises ``StoreWriteError`` and is never
acknowledged; the previous version is intact; after a failed fsync the same writer refuses
further writes, and after reopening the store is writable again.
T4: a child process under ``RLIMIT_FSIZE`` at every 4 KiB step across a commit: a clear error,
earlier commits intact, writable again (same process) once the limit is lifted.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mempp
from mempp.storage import fsutil

from crashkit import batch, check_store, stray_files


class FailNth:
    """Raise ``OSError(code)`` at the ``n``-th operation under the store (0-based); count them all."""

    def __init__(self, n: int, code: int) -> None:
        self.n, self.code, self.count, self.failed = n, code, 0, None

    def __call__(self, op, path, data=None, dst=None):
        i = self.count
        self.count += 1
        if i == self.n:
            self.failed = op
            raise OSError(self.code, f"injected {errno.errorcode[self.code]}", str(path))
        return None


def _ops_in_commit(path: Path) -> int:
    counter = FailNth(-1, errno.EIO)
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        old = fsutil.set_io_hook(counter)
        try:
            s.add(batch(2))  # documents, new terms and a supersession: every file type but windows
        finally:
            fsutil.set_io_hook(old)
    return counter.count


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_nth_operation_failing_never_acknowledges(tmp_path, code):
    probe = tmp_path / "probe"
    with mempp.Store.open(probe, embedder=mempp.HashEmbedder()) as s:
        s.add(batch(0))
        s.add(batch(1))
    import shutil

    base = tmp_path / "base"
    shutil.copytree(probe, base)
    total = _ops_in_commit(probe)
    assert total >= 15
    seen = set()
    for n in range(total):
        path = tmp_path / f"s{n}"
        shutil.copytree(base, path)
        hook = FailNth(n, code)
        s = mempp.Store.open(path, embedder=mempp.HashEmbedder())
        old = fsutil.set_io_hook(hook)
        try:
            with pytest.raises(mempp.StoreWriteError) as info:
                s.add(batch(2))
        finally:
            fsutil.set_io_hook(old)
        seen.add(hook.failed)
        assert info.value.errno == code
        assert str(path) in str(info.value)
        assert info.value.broken == (hook.failed in ("fsync", "fsync_dir"))
        if info.value.broken:
            with pytest.raises(mempp.StoreWriteError, match="reopen"):
                s.add(batch(2))
        else:
            s.add(batch(2))  # a write error leaves the writer usable: the same store commits now
        s.close()
        if info.value.broken:
            # Unacknowledged: the batch is whole or absent (absent unless the failure followed the CURRENT rename).
            assert check_store(path, [0, 1], [2]) is None, n
            with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s2:
                if len(s2) == 6:
                    s2.add(batch(2))
                s2.add(batch(3))
            assert check_store(path, [0, 1, 2, 3]) is None, n
        else:
            assert check_store(path, [0, 1, 2]) is None, n
        assert stray_files(path) == [], n
    assert {"create", "write", "fsync", "rename", "fsync_dir"} <= seen
    print(f"Nth operation fails ({errno.errorcode[code]}): {total} operations per commit, every N refused and recovered")


CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    import mempp
    from crashkit import batch
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit raises EFBIG instead of killing us
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    out = []
    b = 1
    with mempp.Store.open(sys.argv[1], embedder=mempp.HashEmbedder()) as s:
        for limit in range(4096, int(sys.argv[2]) + 4096, 4096):
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
            try:
                s.add(batch(b, per=12))
                out.append({"limit": limit, "batch": b, "ok": True})
                b += 1
            except mempp.StoreWriteError as exc:
                out.append({"limit": limit, "batch": b, "ok": False, "errno": exc.errno, "error": str(exc)})
            finally:
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            s.add(batch(b, per=12))  # the limit lifted: the same writer commits
            out.append({"limit": None, "batch": b, "ok": True})
            b += 1
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_disk_full_at_every_4k_step(tmp_path):
    probe = tmp_path / "probe"  # the biggest file a 12-document commit writes; the steps go past it
    with mempp.Store.open(probe, embedder=mempp.HashEmbedder()) as s:
        s.add(batch(0, per=12))
    biggest = max(p.stat().st_size for p in (probe / "segments").iterdir())
    path = tmp_path / "s"
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as s:
        s.add(batch(0, per=12))
    # An empty kernel cache: the child's first add compiles its kernels under the limit too
    env = {"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(biggest + 8192)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    failed = [r for r in results if not r["ok"]]
    assert failed and any(r["ok"] for r in results if r["limit"])  # the steps span the commit's sizes
    for r in failed:
        assert r["errno"] == errno.EFBIG and "commit failed" in r["error"]
    acked = [0] + [r["batch"] for r in results if r["ok"]]
    assert check_store(path, acked, per=12) is None
    assert stray_files(path) == []
    print(f"disk full: {len(results) // 2} limits, {len(failed)} refused commits, {len(acked)} batches intact")


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_nth_operation_failing_in_a_merge_changes_nothing(tmp_path, code):
    """T3 for merges: the Nth file operation of a merge fails, for every N: a typed error (or, for
    the removal of merged-away files after the merge is published, none: that is left to later),
    the documents and every version unchanged, and the store merges and commits afterwards."""
    import shutil

    base = tmp_path / "base"
    with mempp.Store.open(base, embedder=mempp.HashEmbedder(), merge="manual") as s:
        for b in range(4):
            s.add(batch(b))
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    counter = FailNth(-1, errno.EIO)
    with mempp.Store.open(probe, embedder=mempp.HashEmbedder(), merge="manual") as s:
        s.merge()  # the writer's first write: its clean-up is not counted below
        old = fsutil.set_io_hook(counter)
        try:
            assert s.merge(force=True)["merges"] == 1
        finally:
            fsutil.set_io_hook(old)
    total = counter.count
    assert total >= 12
    seen = set()
    for n in range(total):
        path = tmp_path / f"s{n}"
        shutil.copytree(base, path)
        hook = FailNth(n, code)
        s = mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual")
        s.merge()
        old = fsutil.set_io_hook(hook)
        raised = None
        try:
            s.merge(force=True)
        except mempp.StoreWriteError as exc:
            raised = exc
        finally:
            fsutil.set_io_hook(old)
        seen.add(hook.failed)
        if raised is None:
            assert hook.failed == "unlink", n
        else:
            assert raised.errno == code and str(path) in str(raised)
            assert raised.broken == (hook.failed in ("fsync", "fsync_dir"))
            if not raised.broken:
                s.merge(force=True)  # the same writer merges now
        s.close()
        assert check_store(path, [0, 1, 2, 3]) is None, n
        for v in range(1, 5):
            with mempp.Store.open(path, embedder=mempp.HashEmbedder(), version=v) as old_version:
                assert len(old_version) == 3 * v, (n, v)
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s2:
            s2.add(batch(4))
            s2.merge(force=True)
            assert len(s2.searcher().snapshot.segments) == 1
        assert check_store(path, [0, 1, 2, 3, 4]) is None, n
        assert stray_files(path) == [], n
    assert {"create", "write", "fsync", "rename", "fsync_dir", "unlink"} <= seen
    print(f"Nth operation fails in a merge ({errno.errorcode[code]}): {total} operations, every N refused or harmless, recovered")


def _other_commit(store: mempp.Store, op: str) -> None:
    if op == "supersede":
        store.supersede_many([("b0-1", "b1-1"), ("b0-2", "b1-0", "2023-06-01")])
    else:
        store.build_ann(min_docs=1)


@pytest.mark.parametrize("op", ["supersede", "ann"])
def test_nth_operation_failing_in_a_supersession_or_ann_commit(tmp_path, op):
    """T3 for the other kinds of commit: ``supersede_many`` (a supersession-only commit) and
    ``build_ann``, the Nth file operation failing (EIO) for every N: a typed error, never an
    acknowledgement, nothing changed unless the failure followed the commit point, and the store
    commits the same afterwards."""
    import shutil

    base = tmp_path / "base"
    with mempp.Store.open(base, embedder=mempp.HashEmbedder(), merge="manual") as s:
        s.add(batch(0))
        s.add(batch(1))
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    counter = FailNth(-1, errno.EIO)
    with mempp.Store.open(probe, embedder=mempp.HashEmbedder(), merge="manual") as s:
        s.get("b0-0")
        s.writer.begin_write()  # the writer's own start (lock, clean-up) is not counted below
        old = fsutil.set_io_hook(counter)
        try:
            _other_commit(s, op)
        finally:
            fsutil.set_io_hook(old)
    total = counter.count
    assert total >= 8
    seen = set()
    for n in range(total):
        path = tmp_path / f"s{n}"
        shutil.copytree(base, path)
        s = mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual")
        s.writer.begin_write()
        hook = FailNth(n, errno.EIO)
        old = fsutil.set_io_hook(hook)
        try:
            with pytest.raises(mempp.StoreWriteError) as info:
                _other_commit(s, op)
        finally:
            fsutil.set_io_hook(old)
        seen.add(hook.failed)
        assert info.value.errno == errno.EIO and info.value.broken == (hook.failed in ("fsync", "fsync_dir"))
        s.close()
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), read_only=True) as r:
            done = r.version == 3  # the failure came after the CURRENT rename
            assert r.version in (2, 3) and len(r) == 6
            assert (r.get("b0-1").valid_until is not None) == (op == "supersede" and done)
            assert len(r.searcher().snapshot.ann) == (op == "ann" and done)
        assert check_store(path, [0, 1], extra_sups=2 if op == "supersede" and done else 0) is None, n
        with mempp.Store.open(path, embedder=mempp.HashEmbedder(), merge="manual") as s2:
            if not done:
                _other_commit(s2, op)
            s2.add(batch(2))
        assert check_store(path, [0, 1, 2], extra_sups=2 if op == "supersede" else 0) is None, n
        assert stray_files(path) == [], n
    assert {"create", "write", "fsync", "rename", "fsync_dir"} <= seen
