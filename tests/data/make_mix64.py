"""Writes tests/data/mix64 and mix64.expected.json: a store with sha256 and mix64 checksums (no
wide64) and the int8 copy in date order. Written by commit 939f3a6 (the last before 50a6797
added wide64), its code importable as ``mempp``:

    git worktree add --detach /tmp/old-939f3a6 939f3a6
    for p in kernels storage bench; do ln -s ../$p /tmp/old-939f3a6/engine/$p; done
    mkdir /tmp/old-939f3a6-pkg && ln -s /tmp/old-939f3a6/engine /tmp/old-939f3a6-pkg/mempp
    PYTHONPATH=/tmp/old-939f3a6-pkg:tests/data python tests/data/make_mix64.py
"""

from pathlib import Path

from oldstore import write_store

write_store(Path(__file__).parent / "mix64", thread_context=True)
