"""mempp's compiled kernels are cached in a per-user directory, never inside the installed package.

Each case runs in a fresh interpreter, since numba picks a function's cache directory when the
function is decorated (at import). Without ``kernels/jitcache.py`` the cache lands in the
package's own ``__pycache__``, which after ``pip install .`` then ``pip install -e .`` shadows the
editable install (the README's two set-up lines, run in order, once broke every import that way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mempp.kernels

KERNELS = Path(mempp.kernels.__file__).resolve().parent

PROBE = textwrap.dedent(
    """
    import json, sys
    from mempp.kernels.topk import heap_push
    from mempp.kernels.rrf import rrf_select
    out = {"paths": [f._cache._cache_path for f in (heap_push, rrf_select)]}
    if len(sys.argv) > 1:  # compile one small kernel for real and run it
        import numpy as np
        from mempp.kernels.topk import heap_sorted
        s = np.array([3.0, 1.0, 2.0], dtype=np.float32); i = np.array([0, 1, 2], dtype=np.int64)
        heap_sorted(s, i, 3, np.empty(3, np.float32), np.empty(3, np.int64))
        out["compiled"] = heap_sorted._cache._cache_path
    print(json.dumps(out))
    """
)


def _probe(env_updates: dict[str, str | None], *args: str, script: str = PROBE) -> dict:
    """Run ``script`` in a fresh interpreter (``NUMBA_CACHE_DIR`` unset unless ``env_updates`` sets
    it; a None value unsets that variable) and return the JSON of its last line."""
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    for k, v in env_updates.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _inside(path: str, root: Path) -> bool:
    return Path(path).resolve().is_relative_to(root.resolve())


def test_cache_goes_to_xdg_cache_home_and_never_into_the_package(tmp_path):
    xdg = tmp_path / "xdg"
    before = {p.name for p in (KERNELS / "__pycache__").glob("*.nb*")} if (KERNELS / "__pycache__").is_dir() else set()
    got = _probe({"XDG_CACHE_HOME": str(xdg)}, "compile")
    for path in got["paths"] + [got["compiled"]]:
        assert _inside(path, xdg / "mempp" / "numba"), path
        assert not _inside(path, KERNELS), path
    written = list((xdg / "mempp" / "numba").rglob("*.nbi"))
    assert any(p.name.startswith("topk.heap_sorted") for p in written), written
    after = {p.name for p in (KERNELS / "__pycache__").glob("*.nb*")} if (KERNELS / "__pycache__").is_dir() else set()
    assert after == before, sorted(after - before)


def test_numba_cache_dir_is_honoured(tmp_path):
    got = _probe({"NUMBA_CACHE_DIR": str(tmp_path / "nc"), "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert all(_inside(p, tmp_path / "nc") for p in got["paths"]), got


def test_home_cache_when_xdg_unset(tmp_path):
    got = _probe({"XDG_CACHE_HOME": None, "HOME": str(tmp_path / "home")})
    assert all(_inside(p, tmp_path / "home" / ".cache" / "mempp" / "numba") for p in got["paths"]), got


def test_falls_back_to_the_temp_directory_when_the_cache_home_is_not_writable(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    got = _probe({"XDG_CACHE_HOME": str(blocked), "TMPDIR": str(tmp)}, "compile")
    for path in got["paths"] + [got["compiled"]]:
        assert _inside(path, tmp), path
        assert not _inside(path, KERNELS), path


def test_other_numba_users_keep_numba_defaults(tmp_path):
    """Only mempp's own functions are redirected: a user's cached function still goes beside its source."""
    mod = tmp_path / "usermod.py"
    mod.write_text("from numba import njit\n@njit(cache=True)\ndef f(x):\n    return x + 1\n")
    code = "import sys; sys.path.insert(0, %r); import mempp.kernels, usermod; print(usermod.f._cache._cache_path)" % str(tmp_path)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out) == tmp_path / "__pycache__"



# heap_sorted over a min-heap of three; ``out`` holds its answer and the cache's hits in this process
HEAP_SORTED = """
import json, sys
import numpy as np
from mempp.kernels.topk import heap_sorted
def sort_heap():
    s = np.array([1.0, 3.0, 2.0], dtype=np.float32); i = np.array([1, 0, 2], dtype=np.int64)
    got_s, got_i = np.empty(3, np.float32), np.empty(3, np.int64)
    heap_sorted(s, i, 3, got_s, got_i)
    return {"scores": got_s.tolist(), "ids": got_i.tolist(), "hits": sum(heap_sorted.stats.cache_hits.values())}
"""
SORTED = ([3.0, 2.0, 1.0], [0, 2, 1])

FULL_DISK = HEAP_SORTED + textwrap.dedent(
    """
    import pathlib, resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit raises EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    out = sort_heap()
    if len(sys.argv) > 1:  # a user's own cached function: numba's behaviour, untouched
        sys.path.insert(0, sys.argv[1])
        try:
            import usermod
            usermod.f(1)
            out["user"] = "cached"
        except OSError as exc:
            out["user"] = exc.errno
    out["written"] = sorted(str(p) for p in pathlib.Path(heap_sorted._cache._cache_path).glob("*.nbc"))
    print(json.dumps(out))
    """
)


def test_a_kernel_compiled_on_a_full_disk_runs_without_its_cache_file(tmp_path):
    """A fresh process whose first call compiles a kernel while no file can grow (a full disk, a
    file-size limit): the kernel runs from memory and nothing is cached, where numba alone raises
    EFBIG from the call (a store write would fail with numba's error instead of its own)."""
    import errno

    (tmp_path / "usermod.py").write_text("from numba import njit\n@njit(cache=True)\ndef f(x):\n    return x + 1\n")
    got = _probe({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, str(tmp_path), script=FULL_DISK)
    assert (got["scores"], got["ids"]) == SORTED
    assert got["written"] == []
    assert got["user"] == errno.EFBIG  # only mempp's own kernels are spared
    got = _probe({"NUMBA_CACHE_DIR": str(tmp_path / "nc")}, script=FULL_DISK)  # numba's own locator, the same guard
    assert (got["scores"], got["ids"]) == SORTED
    assert got["written"] == []


@pytest.mark.parametrize("damaged", ["nbi", "nbc"])
def test_a_damaged_cache_entry_is_compiled_again_and_rewritten(tmp_path, damaged):
    """A kernel's cache file cut short (a crash or power loss while numba wrote it): the next process
    compiles the kernel and answers, and the one after it loads the rewritten entry."""
    script = HEAP_SORTED + "print(json.dumps(sort_heap()))\n"

    def run() -> dict:
        got = _probe({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, script=script)
        assert (got["scores"], got["ids"]) == SORTED
        return got

    run()
    files = list((tmp_path / "xdg" / "mempp" / "numba").rglob(f"topk.heap_sorted-*.{damaged}"))
    assert files
    for f in files:
        f.write_bytes(f.read_bytes()[:20])
    assert run()["hits"] == 0  # compiled again
    assert run()["hits"] == 1  # and cached again
