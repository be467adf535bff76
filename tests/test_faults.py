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
    env = {"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin"}
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
