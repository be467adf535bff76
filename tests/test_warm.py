"""Kernels compiled ahead of first use (kernels/precompile.py): the list of signatures covers every
call the engine makes, and what the build ships is found by a later process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mempp.kernels import precompile

HERE = Path(__file__).resolve().parent

RECORD = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path
    import mempp.kernels as K
    from mempp.bench.warmup import exercise
    from mempp.kernels import precompile
    with tempfile.TemporaryDirectory() as tmp:
        exercise(Path(tmp))
    print(json.dumps(precompile.recorded(K)))
    """
)


@pytest.mark.slow
def test_the_engine_calls_no_kernel_signature_the_list_lacks():
    """If this fails, the engine now calls a kernel with new argument types: run
    ``python -m mempp.bench.warmup --record`` and commit kernels/signatures.txt."""
    out = subprocess.run([sys.executable, "-c", RECORD], capture_output=True, text=True, check=True).stdout
    used = {tuple(x) for x in json.loads(out.strip().splitlines()[-1])}
    listed = set(precompile.signatures())
    assert used - listed == set(), sorted(used - listed)[:5]
    assert len(listed) >= 40


def test_the_list_names_real_kernels():
    import importlib

    from numba.core import sigutils

    for module, function, sig in precompile.signatures():
        assert hasattr(importlib.import_module(f"mempp.kernels.{module}"), function), (module, function)
        sigutils.normalize_signature(sig)  # parses


@pytest.mark.slow
def test_a_shipped_cache_is_seeded_into_an_empty_one(tmp_path):
    """What setup.py ships as mempp/kernels/_precompiled is copied into a user's empty cache at
    import, and numba then loads the kernels from it rather than compiling them."""
    from mempp.kernels import jitcache

    shipped = jitcache.cache_root() / jitcache.CACHE_SUBDIR
    if not any(shipped.glob("topk.heap_sorted-*.nbi")):
        pytest.skip("this process's own cache holds no compiled heap_sorted to ship")
    fake = tmp_path / "pkg"
    fake.mkdir()
    for f in shipped.glob("topk.*"):
        (fake / f.name).write_bytes(f.read_bytes())
    code = textwrap.dedent(
        f"""
        import numpy as np
        from pathlib import Path
        from mempp.kernels import jitcache
        copied = jitcache.seed(Path({str(fake)!r}))
        from mempp.kernels.topk import heap_sorted
        s = np.array([3.0, 1.0, 2.0], dtype=np.float32); i = np.array([0, 1, 2], dtype=np.int64)
        heap_sorted(s, i, 3, np.empty(3, np.float32), np.empty(3, np.int64))
        print(copied, sum(heap_sorted.stats.cache_hits.values()), sum(heap_sorted.stats.cache_misses.values()))
        """
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "empty-cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    copied, hits, misses = map(int, subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split())
    assert copied >= 2 and hits == 1 and misses == 0


def test_kernels_of_an_instruction_set_this_cpu_lacks_are_skipped_and_kept(tmp_path, monkeypatch):
    """A listed kernel that is None here (VNNI on this CPU, or AVX2 elsewhere) is not compiled, and
    a recording here keeps the lines another machine recorded."""
    from mempp.kernels import int8batch

    line = ("int8batch", "batch_scan_avx2", "(Array(int8, 2, 'C', readonly=False, aligned=True),)")
    path = tmp_path / "signatures.txt"
    path.write_text("# header\n" + "\t".join(line) + "\n")
    monkeypatch.setattr(int8batch, "batch_scan_avx2", None)
    assert precompile.compile_all(path)["compiled"] == 0
    mine = ("topk", "heap_push", "(x,)")
    assert precompile.merged([mine], path) == sorted([mine, line])
