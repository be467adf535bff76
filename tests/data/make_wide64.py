"""Writes tests/data/wide64 and wide64.expected.json: the format main wrote at commit 25fa624
(manifest format 1 with sha256 and wide64 checksums, the int8 copy in date order, an HNSW index
published by build_ann), which later formats must keep opening. Written by 25fa624's code,
importable as ``mempp``:

    git worktree add --detach /tmp/old-25fa624 25fa624
    for p in kernels storage bench; do ln -s ../$p /tmp/old-25fa624/engine/$p; done
    mkdir /tmp/old-25fa624-pkg && ln -s /tmp/old-25fa624/engine /tmp/old-25fa624-pkg/mempp
    PYTHONPATH=/tmp/old-25fa624-pkg:tests/data python tests/data/make_wide64.py
"""

from pathlib import Path

from oldstore import write_store

write_store(Path(__file__).parent / "wide64", thread_context=True, ann=True)
